//! Answers to interrupt requests: scripted (a file or a test's `answers`),
//! automatic, or typed on the terminal.
//!
//! A script maps an act's key (its `params.key`), or, if it has none, its
//! node id, to one answer or a list used in turn (the last one repeats):
//! `{"action": "...", "vars": {...}, "target": "KEY_OR_ID", "delay_ms": N}`.
//! An answer that leaves its interrupt waiting (`set_vars`, `push`) is
//! followed, once the engine has settled, by the list's next answer for
//! the same interrupt — or by `complete` when the list is used up.

use std::collections::HashMap;
use std::path::Path;

use acts::{Action, Vars};
use serde::Deserialize;
use serde_json::Value;

use crate::failure::Failure;

/// What an answer does.
#[derive(Debug, Clone, PartialEq)]
pub enum Verb {
    /// An action on an act (complete, submit, back, cancel, abort, skip,
    /// error, remove, set_vars).
    Act(Action),
    /// Push a new act (`vars` is its definition) to the interrupt's step.
    Push,
    /// Leave the interrupt unanswered.
    Ignore,
}

/// The action names an answer may use.
pub const ACTIONS: &str =
    "complete, submit, back, cancel, abort, skip, error, push, remove, set_vars, ignore";

/// One answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The action's name.
    pub action: String,
    /// Its options (`error`: ecode, message; `back`: to; `push`: the act).
    #[serde(default)]
    pub vars: Vars,
    /// Apply it to the most recent act seen with this key or node id
    /// instead of the interrupt's own act.
    #[serde(default)]
    pub target: Option<String>,
    /// Apply it this long after the interrupt arrived (engine clock).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// The engine is expected to refuse it (`acts test` checks that it
    /// does; a refused answer is reported and the next one follows).
    #[serde(default)]
    pub refused: bool,
}

impl Answer {
    /// `complete` with no vars.
    pub fn complete() -> Self {
        Self {
            action: "complete".into(),
            vars: Vars::new(),
            target: None,
            delay_ms: None,
            refused: false,
        }
    }

    /// What the answer does.
    pub fn verb(&self) -> Result<Verb, String> {
        match self.action.as_str() {
            "push" => Ok(Verb::Push),
            "ignore" => Ok(Verb::Ignore),
            name => name
                .parse::<Action>()
                .map(Verb::Act)
                .map_err(|_| format!("unknown action '{}' (use {ACTIONS})", self.action)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Answer),
    Many(Vec<Answer>),
}

/// A set of scripted answers, used in turn per key.
#[derive(Debug, Default)]
pub struct AnswerFile {
    answers: HashMap<String, Vec<Answer>>,
    used: HashMap<String, usize>,
}

impl AnswerFile {
    /// Reads and checks an answers file (JSON).
    pub fn read(path: &Path) -> Result<Self, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::input(format!(
                "cannot read answers file '{}': {e}",
                path.display()
            ))
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            Failure::input(format!(
                "answers file '{}': {e} (expected {{\"KEY\": {{\"action\": \"complete\", \"vars\": {{}}}}}})",
                path.display()
            ))
        })?;
        Self::from_value(value)
            .map_err(|e| Failure::input(format!("answers file '{}': {e}", path.display())))
    }

    /// Checks answers given as a JSON value (a test file's `answers`).
    pub fn from_value(value: Value) -> Result<Self, String> {
        let raw: HashMap<String, OneOrMany> =
            serde_json::from_value(value).map_err(|e| e.to_string())?;
        let mut answers = HashMap::new();
        for (key, v) in raw {
            let list = match v {
                OneOrMany::One(a) => vec![a],
                OneOrMany::Many(l) => l,
            };
            if list.is_empty() {
                return Err(format!("'{key}' has an empty list of answers"));
            }
            for a in &list {
                a.verb().map_err(|e| format!("'{key}': {e}"))?;
            }
            answers.insert(key, list);
        }
        Ok(Self {
            answers,
            used: HashMap::new(),
        })
    }

    /// The next answer for an act with `key` (if any) and node id `nid`;
    /// `None` when the script has none for it. The last of a list repeats
    /// (for the next interrupt of that act, e.g. after a `back`).
    pub fn next(&mut self, key: Option<&str>, nid: &str) -> Option<Answer> {
        self.take(key, nid, true)
    }

    /// The next answer of the list for an interrupt that is still waiting
    /// after an answer that does not end it (`set_vars`, `push`): only an
    /// answer not used yet; `None` when the list is used up.
    pub fn next_unused(&mut self, key: Option<&str>, nid: &str) -> Option<Answer> {
        self.take(key, nid, false)
    }

    fn take(&mut self, key: Option<&str>, nid: &str, repeat_last: bool) -> Option<Answer> {
        let k = key
            .filter(|k| self.answers.contains_key(*k))
            .unwrap_or(nid)
            .to_owned();
        let list = self.answers.get(&k)?;
        let n = self.used.entry(k).or_insert(0);
        if *n >= list.len() && !repeat_last {
            return None;
        }
        let a = list[(*n).min(list.len() - 1)].clone();
        *n += 1;
        Some(a)
    }
}

/// Parses `KEY=JSON` pairs into vars (a value that is not JSON is an
/// error naming the flag).
pub fn parse_vars(pairs: &[String]) -> Result<Vars, Failure> {
    let mut vars = Vars::new();
    for pair in pairs {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(Failure::input(format!(
                "--var '{pair}': expected KEY=JSON (e.g. amount=10 or name='\"ada\"')"
            )));
        };
        if k.is_empty() {
            return Err(Failure::input(format!("--var '{pair}': the key is empty")));
        }
        let value: Value = serde_json::from_str(v).map_err(|e| {
            Failure::input(format!(
                "--var '{pair}': the value is not JSON ({e}); quote strings: {k}='\"{v}\"'"
            ))
        })?;
        vars.insert(k.to_owned(), value);
    }
    Ok(vars)
}

/// Parses a line typed on the terminal: `ACTION [JSON-VARS]` (empty:
/// complete).
pub fn parse_typed(line: &str) -> Result<Answer, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(Answer::complete());
    }
    let (action, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let vars = if rest.trim().is_empty() {
        Vars::new()
    } else {
        match serde_json::from_str::<Value>(rest.trim()) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("the vars must be a JSON object".into()),
            Err(e) => return Err(format!("the vars are not JSON: {e}")),
        }
    };
    let a = Answer {
        action: action.to_owned(),
        vars,
        target: None,
        delay_ms: None,
        refused: false,
    };
    a.verb()?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_repeat_the_last_and_fall_back_to_the_node_id() {
        let mut a = AnswerFile::from_value(json!({
            "approve": [{"action": "back", "vars": {"to": "s1"}}, {"action": "complete"}],
            "step2": {"action": "error", "vars": {"ecode": "E1"}, "delay_ms": 5}
        }))
        .unwrap();
        assert_eq!(a.next(Some("approve"), "x").unwrap().action, "back");
        assert_eq!(a.next(Some("approve"), "x").unwrap().action, "complete");
        assert_eq!(a.next(Some("approve"), "x").unwrap().action, "complete");
        let e = a.next(Some("other"), "step2").unwrap();
        assert_eq!((e.action.as_str(), e.delay_ms), ("error", Some(5)));
        assert!(a.next(None, "nothing").is_none());
        // A still-waiting interrupt takes only unused answers.
        let mut b = AnswerFile::from_value(json!({
            "k": [{"action": "set_vars"}, {"action": "complete"}]
        }))
        .unwrap();
        assert_eq!(b.next(Some("k"), "x").unwrap().action, "set_vars");
        assert_eq!(b.next_unused(Some("k"), "x").unwrap().action, "complete");
        assert!(b.next_unused(Some("k"), "x").is_none());
        let bad = AnswerFile::from_value(json!({"k": {"action": "explode"}})).unwrap_err();
        assert!(bad.contains("explode"), "{bad}");
        assert!(AnswerFile::from_value(json!({"k": {"action": "complete", "when": 1}})).is_err());
    }

    #[test]
    fn every_verb_is_known() {
        for name in ACTIONS.split(", ") {
            let a = Answer {
                action: name.into(),
                ..Answer::complete()
            };
            assert!(a.verb().is_ok(), "{name}");
        }
    }

    #[test]
    fn vars_are_json_values() {
        let v = parse_vars(&["a=10".into(), "b=\"x\"".into(), "c={\"d\":true}".into()]).unwrap();
        assert_eq!(v["a"], 10);
        assert_eq!(v["b"], "x");
        assert_eq!(v["c"]["d"], true);
        let e = parse_vars(&["name=ada".into()]).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("quote strings"), "{}", e.message);
        assert!(parse_vars(&["novalue".into()]).is_err());
    }

    #[test]
    fn typed_answers() {
        assert_eq!(parse_typed("").unwrap(), Answer::complete());
        let a = parse_typed("error {\"ecode\": \"E1\"}").unwrap();
        assert_eq!(a.action, "error");
        assert_eq!(a.vars["ecode"], "E1");
        assert!(parse_typed("fly").is_err());
        assert!(parse_typed("complete [1]").is_err());
    }

    /// A JSON value of any shape (what an answers file may hold).
    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z_]{0,8}|\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 5, |inner| {
            let key = prop_oneof![
                Just("action".to_owned()),
                Just("vars".to_owned()),
                Just("target".to_owned()),
                Just("delay_ms".to_owned()),
                "[a-z_]{1,6}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(key, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever an answers file holds, reading it and using it is an
        /// answer or an error, never a panic.
        #[test]
        fn any_answers_file_reads_or_fails_cleanly(v in any_json()) {
            if let Ok(mut file) = AnswerFile::from_value(v) {
                for key in ["a", "b", "action", "x"] {
                    if let Some(a) = file.next(Some(key), key) {
                        let _ = a.verb();
                    }
                }
            }
        }

        /// A typed answer line and `--var` pairs of any text.
        #[test]
        fn any_typed_line_and_var_pair_parse_or_fail_cleanly(
            line in "\\PC{0,60}",
            pairs in proptest::collection::vec("\\PC{0,20}", 0..4),
        ) {
            let _ = parse_typed(&line);
            let _ = parse_vars(&pairs);
        }
    }
}
