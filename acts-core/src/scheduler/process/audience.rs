//! Who a process is for: the principal who started it and everyone its
//! interrupts address (`params.to`). Access control reads it: a user sees
//! the processes they started or were addressed by, and answers the
//! interrupts that address them or one of their roles.

use std::collections::BTreeSet;

use serde_json::Value;

/// Most distinct names a process's audience keeps (a loop that addresses a
/// new user on every round cannot grow the process row without bound;
/// past it, a name is still checked on its own interrupt, but the process
/// no longer lists for that user).
pub const MAX_AUDIENCE: usize = 256;

/// Longest name an interrupt may address (longer ones address nobody).
const MAX_NAME_BYTES: usize = 256;

/// The principal who started a process and the names its interrupts
/// addressed (`user:<id>` or `role:<name>`), which only grows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audience {
    /// Who started the process (`None`: the embedding application, a
    /// trigger without a principal, or a parent process).
    pub started_by: Option<String>,
    names: BTreeSet<String>,
}

impl Audience {
    /// An audience as stored.
    pub fn restore(started_by: Option<String>, names: Vec<String>) -> Self {
        Self {
            started_by,
            names: names.into_iter().collect(),
        }
    }

    /// The names addressed so far, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// How many names were addressed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no interrupt addressed anybody yet.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Adds the names `params` address.
    pub(super) fn note(&mut self, params: &Value) {
        for name in addressees(params) {
            if self.names.len() >= MAX_AUDIENCE {
                break;
            }
            self.names.insert(name);
        }
    }
}

/// The names an act's params address: `params.to`, a string or a list of
/// strings, each `user:<id>`, `role:<name>`, or a bare user id (taken as
/// `user:<id>`). Anything else addresses nobody.
pub fn addressees(params: &Value) -> Vec<String> {
    let normalize = |s: &str| {
        let s = s.trim();
        if s.is_empty() || s.len() > MAX_NAME_BYTES {
            return None;
        }
        match s.split_once(':') {
            Some(("user" | "role", rest)) if !rest.is_empty() => Some(s.to_owned()),
            Some(_) => None,
            None => Some(format!("user:{s}")),
        }
    };
    match params.get("to") {
        Some(Value::String(s)) => normalize(s).into_iter().collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(normalize)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addressees_normalize_users_and_roles() {
        assert_eq!(
            addressees(&json!({"to": ["role:finance", "user:ann", "bob", "x:y", "", 3]})),
            vec!["role:finance", "user:ann", "user:bob"]
        );
        assert_eq!(addressees(&json!({"to": "ann"})), vec!["user:ann"]);
        assert!(addressees(&json!({"to": {"a": 1}})).is_empty());
        assert!(addressees(&json!("ann")).is_empty());
        assert!(addressees(&json!({"to": "role:"})).is_empty());
    }

    #[test]
    fn the_audience_is_bounded() {
        let mut a = Audience::default();
        for i in 0..(MAX_AUDIENCE + 10) {
            a.note(&json!({"to": format!("user:u{i}")}));
        }
        assert_eq!(a.len(), MAX_AUDIENCE);
    }
}
