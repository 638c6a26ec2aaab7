//! [`Scope`]: a task's own data, a map from names to JSON values kept
//! small in memory.
//!
//! Most tasks hold one or two names (an act's run mode and the value it
//! set, a step's output), and a process of a long model holds tens of
//! thousands of tasks. A [`Vars`] (a B-tree) takes a 640-byte node for its
//! first entry; a scope of up to [`SMALL`] entries is a vector sorted by
//! name, sized to what it holds, and only a larger one becomes a [`Vars`].
//! Both iterate in name order, so a scope's JSON text is exactly that of
//! the same [`Vars`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::model::Vars;

/// Most entries a scope keeps as a sorted vector; past this it is a
/// [`Vars`] (inserting into a vector shifts what follows).
const SMALL: usize = 16;

/// A task's own data (see the module docs).
#[derive(Clone, Default)]
pub struct Scope(Repr);

#[derive(Clone)]
enum Repr {
    Small(Vec<(String, Value)>),
    Large(Vars),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

impl Scope {
    /// An empty scope (no allocation).
    pub fn new() -> Self {
        Self::default()
    }

    fn position(entries: &[(String, Value)], key: &str) -> Result<usize, usize> {
        entries.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match &self.0 {
            Repr::Small(e) => Self::position(e, key).ok().map(|i| &e[i].1),
            Repr::Large(m) => m.get(key),
        }
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// How many names are set.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Small(e) => e.len(),
            Repr::Large(m) => m.len(),
        }
    }

    /// Whether no name is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match &mut self.0 {
            Repr::Small(e) => match Self::position(e, &key) {
                Ok(i) => Some(std::mem::replace(&mut e[i].1, value)),
                Err(_) if e.len() == SMALL => {
                    let mut m: Vars = std::mem::take(e).into_iter().collect();
                    m.insert(key, value);
                    self.0 = Repr::Large(m);
                    None
                }
                Err(i) => {
                    if e.len() == e.capacity() && e.len() < 4 {
                        // Tiny scopes grow one entry at a time.
                        e.reserve_exact(1);
                    }
                    e.insert(i, (key, value));
                    None
                }
            },
            Repr::Large(m) => m.insert(key, value),
        }
    }

    /// Unsets `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        match &mut self.0 {
            Repr::Small(e) => Self::position(e, key).ok().map(|i| e.remove(i).1),
            Repr::Large(m) => m.remove(key),
        }
    }

    /// The entries in name order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Repr::Small(e) => Iter::Small(e.iter()),
            Repr::Large(m) => Iter::Large(m.iter()),
        }
    }

    /// A copy as a [`Vars`].
    pub fn to_vars(&self) -> Vars {
        self.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// The entries of a [`Scope`] in name order.
pub enum Iter<'a> {
    /// Of a small scope.
    Small(std::slice::Iter<'a, (String, Value)>),
    /// Of a large scope.
    Large(serde_json::map::Iter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next().map(|(k, v)| (k, v)),
            Iter::Large(i) => i.next(),
        }
    }
}

impl<'a> IntoIterator for &'a Scope {
    type Item = (&'a String, &'a Value);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<(String, Value)> for Scope {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut s = Scope::new();
        for (k, v) in iter {
            s.insert(k, v);
        }
        s
    }
}

impl From<Vars> for Scope {
    fn from(vars: Vars) -> Self {
        if vars.len() > SMALL {
            return Scope(Repr::Large(vars));
        }
        // A map iterates sorted: the vector is sorted as it is built.
        let mut e = Vec::with_capacity(vars.len());
        e.extend(vars);
        Scope(Repr::Small(e))
    }
}

impl PartialEq for Scope {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<Vars> for Scope {
    fn eq(&self, other: &Vars) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Scope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vars::deserialize(d).map(Scope::from)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_scope_reads_and_writes_like_a_map() {
        let mut s = Scope::new();
        assert!(s.is_empty());
        assert_eq!(s.insert("b".into(), json!(2)), None);
        assert_eq!(s.insert("a".into(), json!(1)), None);
        assert_eq!(s.insert("b".into(), json!(3)), Some(json!(2)));
        assert_eq!(s.get("b"), Some(&json!(3)));
        assert!(s.contains_key("a") && !s.contains_key("c"));
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"{"a":1,"b":3}"#);
        assert_eq!(s.remove("a"), Some(json!(1)));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_one_entry_scope_holds_one_entry_not_a_tree_node() {
        let mut s = Scope::new();
        s.insert("v".into(), json!(1));
        let Repr::Small(e) = &s.0 else {
            panic!("one entry is small")
        };
        assert_eq!(e.capacity(), 1);
    }

    proptest! {
        /// Any sequence of writes and removals leaves the scope equal to a
        /// map given the same sequence: the same entries, the same order,
        /// the same JSON, through the change of representation and back
        /// from its JSON.
        #[test]
        fn a_scope_behaves_as_a_map(ops in proptest::collection::vec((0u8..40, any::<Option<i32>>()), 0..120)) {
            let (mut s, mut m) = (Scope::new(), Vars::new());
            for (k, v) in ops {
                let key = format!("k{k}");
                match v {
                    Some(v) => prop_assert_eq!(s.insert(key.clone(), json!(v)), m.insert(key, json!(v))),
                    None => prop_assert_eq!(s.remove(&key), m.remove(&key)),
                }
                prop_assert!(s == m);
            }
            let text = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(&text, &serde_json::to_string(&m).unwrap());
            let back: Scope = serde_json::from_str(&text).unwrap();
            prop_assert!(back == m);
            prop_assert_eq!(s.to_vars(), m);
        }
    }
}
