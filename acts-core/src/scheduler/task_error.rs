//! [`TaskError`]: why a task (and with it, perhaps, its process) failed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Vars;

/// The error a task ended with: `ecode` is what `catches` match, `message`
/// says what happened.
///
/// Serialised as `{"ecode": ..., "message": ...}`; stores written before
/// this type existed hold `["ecode", "message"]`, which still reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "TaskErrorRepr")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskError {
    /// The error code (`catches` match on it).
    pub ecode: String,
    /// What happened.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TaskErrorRepr {
    Object { ecode: String, message: String },
    Pair(String, String),
}

impl From<TaskErrorRepr> for TaskError {
    fn from(r: TaskErrorRepr) -> Self {
        let (ecode, message) = match r {
            TaskErrorRepr::Object { ecode, message } | TaskErrorRepr::Pair(ecode, message) => {
                (ecode, message)
            }
        };
        Self { ecode, message }
    }
}

impl TaskError {
    /// An error with `ecode` and `message`.
    pub fn new(ecode: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            ecode: ecode.into(),
            message: message.into(),
        }
    }

    /// The options of an `error` action (and the data a failed task
    /// holds): `{ecode, message}`.
    pub fn to_vars(&self) -> Vars {
        let mut o = Vars::new();
        o.insert("ecode".into(), Value::String(self.ecode.clone()));
        o.insert("message".into(), Value::String(self.message.clone()));
        o
    }

    /// The `ecode` and `message` in `vars` (missing or non-text: empty).
    pub fn from_vars(vars: &Vars) -> Self {
        let text = |k: &str| {
            vars.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Self::new(text("ecode"), text("message"))
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.ecode, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_object_and_the_older_pair_and_writes_the_object() {
        let e = TaskError::new("E1", "bad");
        let json = serde_json::to_value(&e).expect("plain data serializes");
        assert_eq!(json, serde_json::json!({"ecode": "E1", "message": "bad"}));
        let back: TaskError = serde_json::from_value(json).expect("object");
        assert_eq!(back, e);
        let old: TaskError = serde_json::from_str(r#"["E1","bad"]"#).expect("pair");
        assert_eq!(old, e);
        assert!(serde_json::from_str::<TaskError>(r#"{"ecode":1}"#).is_err());
    }

    #[test]
    fn round_trips_through_action_options() {
        let e = TaskError::new("E2", "why");
        assert_eq!(TaskError::from_vars(&e.to_vars()), e);
        assert_eq!(TaskError::from_vars(&Vars::new()), TaskError::default());
    }
}
