//! Answers to interrupt requests: from a file, automatic, or typed on the
//! terminal.

use std::collections::HashMap;
use std::path::Path;

use acts::{Action, Vars};
use serde::Deserialize;
use serde_json::Value;

use crate::Failure;

/// One answer: an action and its vars.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The action's name.
    pub action: String,
    /// Its options.
    #[serde(default)]
    pub vars: Vars,
}

impl Answer {
    /// `complete` with no vars.
    pub fn complete() -> Self {
        Self {
            action: "complete".into(),
            vars: Vars::new(),
        }
    }

    /// The engine action.
    pub fn engine_action(&self) -> Result<Action, String> {
        let name = if self.action == "set_vars" {
            "set_process_vars"
        } else {
            self.action.as_str()
        };
        Action::from_name(name).ok_or_else(|| {
            format!(
                "unknown action '{}' (use complete, submit, back, cancel, abort, skip, error, remove or set_vars)",
                self.action
            )
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Answer),
    Many(Vec<Answer>),
}

/// Answers read from a file: per act key (or node id), a list used in turn,
/// the last one repeating.
#[derive(Debug, Default)]
pub struct AnswerFile {
    answers: HashMap<String, Vec<Answer>>,
    used: HashMap<String, usize>,
}

impl AnswerFile {
    /// Reads and checks an answers file.
    pub fn read(path: &Path) -> Result<Self, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::input(format!(
                "cannot read answers file '{}': {e}",
                path.display()
            ))
        })?;
        let raw: HashMap<String, OneOrMany> = serde_json::from_str(&text).map_err(|e| {
            Failure::input(format!(
                "answers file '{}': {e} (expected {{\"KEY\": {{\"action\": \"complete\", \"vars\": {{}}}}}})",
                path.display()
            ))
        })?;
        let mut answers = HashMap::new();
        for (key, v) in raw {
            let list = match v {
                OneOrMany::One(a) => vec![a],
                OneOrMany::Many(l) => l,
            };
            if list.is_empty() {
                return Err(Failure::input(format!(
                    "answers file '{}': '{key}' has an empty list of answers",
                    path.display()
                )));
            }
            for a in &list {
                a.engine_action().map_err(|e| {
                    Failure::input(format!("answers file '{}', '{key}': {e}", path.display()))
                })?;
            }
            answers.insert(key, list);
        }
        Ok(Self {
            answers,
            used: HashMap::new(),
        })
    }

    /// The next answer for an act with `key` (if any) and node id `nid`;
    /// `None` when the file has none for it.
    pub fn next(&mut self, key: Option<&str>, nid: &str) -> Option<Answer> {
        let k = key
            .filter(|k| self.answers.contains_key(*k))
            .unwrap_or(nid)
            .to_owned();
        let list = self.answers.get(&k)?;
        let n = self.used.entry(k).or_insert(0);
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
    };
    a.engine_action()?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_repeat_the_last_and_fall_back_to_the_node_id() {
        let dir = std::env::temp_dir().join(format!("acts-answers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.json");
        std::fs::write(
            &f,
            r#"{"approve": [{"action": "back", "vars": {"to": "s1"}}, {"action": "complete"}],
                "step2": {"action": "error", "vars": {"ecode": "E1"}}}"#,
        )
        .unwrap();
        let mut a = AnswerFile::read(&f).unwrap();
        assert_eq!(a.next(Some("approve"), "x").unwrap().action, "back");
        assert_eq!(a.next(Some("approve"), "x").unwrap().action, "complete");
        assert_eq!(a.next(Some("approve"), "x").unwrap().action, "complete");
        assert_eq!(a.next(Some("other"), "step2").unwrap().action, "error");
        assert!(a.next(None, "nothing").is_none());
        std::fs::write(&f, r#"{"k": {"action": "explode"}}"#).unwrap();
        assert!(
            AnswerFile::read(&f)
                .unwrap_err()
                .message
                .contains("explode")
        );
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
}
