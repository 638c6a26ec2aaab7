//! [`Params`]: an act's params, kept small in memory.
//!
//! A model holds one params value per act, and a long model holds tens of
//! thousands. Most are a small object (`{ key: approve }`, `{ v1: 1 }`),
//! which as a JSON [`Value`] takes a 640-byte B-tree node for its first
//! entry. A small object is kept here as a boxed slice of its entries in
//! name order instead (about 50 bytes an entry); any other value as it
//! is. Both read back as the same [`Value`] and serialize as the same JSON.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Vars;

/// Most entries an object keeps as a slice; a larger one stays a [`Value`].
const SMALL: usize = 8;

/// An act's params (see the module docs). Made from a [`Value`]
/// (`Params::from(json!({ "key": "approve" }))`), read back with
/// [`as_value`](Self::as_value) or [`to_value`](Self::to_value).
#[derive(Clone, Default, PartialEq)]
pub struct Params(Repr);

#[derive(Clone, PartialEq)]
enum Repr {
    /// A small object: its entries in name order.
    Object(Box<[(Box<str>, Value)]>),
    /// Anything else.
    Value(Value),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Value(Value::Null)
    }
}

impl Params {
    /// The params as a JSON value: borrowed when kept as one, built (a copy
    /// of the entries) for a small object.
    pub fn as_value(&self) -> Cow<'_, Value> {
        match &self.0 {
            Repr::Value(v) => Cow::Borrowed(v),
            Repr::Object(entries) => Cow::Owned(Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect::<Vars>(),
            )),
        }
    }

    /// The params as an owned JSON value.
    pub fn to_value(&self) -> Value {
        self.as_value().into_owned()
    }

    /// Whether there are none (`null`).
    pub fn is_null(&self) -> bool {
        matches!(&self.0, Repr::Value(Value::Null))
    }

    /// The value of an object's entry `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match &self.0 {
            Repr::Value(v) => v.get(key),
            Repr::Object(entries) => entries
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .map(|i| &entries[i].1),
        }
    }
}

impl From<Value> for Params {
    fn from(value: Value) -> Self {
        match value {
            // A map iterates in name order: the slice is sorted.
            Value::Object(map) if !map.is_empty() && map.len() <= SMALL => Params(Repr::Object(
                map.into_iter()
                    .map(|(k, v)| (k.into_boxed_str(), v))
                    .collect(),
            )),
            other => Params(Repr::Value(other)),
        }
    }
}

impl From<Params> for Value {
    fn from(params: Params) -> Self {
        match params.0 {
            Repr::Value(v) => v,
            Repr::Object(entries) => Value::Object(
                entries
                    .into_vec()
                    .into_iter()
                    .map(|(k, v)| (k.into_string(), v))
                    .collect(),
            ),
        }
    }
}

impl PartialEq<Value> for Params {
    fn eq(&self, other: &Value) -> bool {
        match (&self.0, other) {
            (Repr::Value(v), other) => v == other,
            (Repr::Object(entries), Value::Object(map)) => {
                entries.len() == map.len()
                    && entries
                        .iter()
                        .all(|(k, v)| map.get(k.as_ref()).is_some_and(|m| m == v))
            }
            (Repr::Object(_), _) => false,
        }
    }
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_value().fmt(f)
    }
}

impl Serialize for Params {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Value(v) => v.serialize(s),
            Repr::Object(entries) => s.collect_map(entries.iter().map(|(k, v)| (&**k, v))),
        }
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Params::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_back_and_serializes_as_the_value_it_was_made_of() {
        for v in [
            json!(null),
            json!("return { b: a + 10 }"),
            json!({ "key": "approve" }),
            json!({ "z": 1, "a": { "nested": [1, 2] }, "m": null }),
            json!({}),
            json!(
                (0..20)
                    .map(|i| (format!("k{i}"), json!(i)))
                    .collect::<Vars>()
            ),
            json!([1, 2, 3]),
        ] {
            let p = Params::from(v.clone());
            assert_eq!(p.to_value(), v);
            assert_eq!(p, v);
            assert_eq!(Value::from(p.clone()), v);
            assert_eq!(serde_json::to_string(&p).unwrap(), v.to_string());
            let back: Params = serde_json::from_str(&v.to_string()).unwrap();
            assert_eq!(back, p);
            assert_eq!(p.is_null(), v.is_null());
        }
        let p = Params::from(json!({ "b": 2, "a": 1 }));
        assert_eq!(p.get("a"), Some(&json!(1)));
        assert_eq!(p.get("c"), None);
        assert_ne!(p, json!({ "a": 1 }));
        assert_ne!(p, json!({ "a": 1, "b": 3 }));
    }

    #[test]
    fn a_small_object_is_smaller_than_its_map() {
        let p = Params::from(json!({ "v1": 1 }));
        assert!(matches!(p.0, Repr::Object(ref e) if e.len() == 1));
        assert!(std::mem::size_of::<Params>() <= std::mem::size_of::<Value>());
    }
}
