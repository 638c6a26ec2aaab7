//! Keys a model does not know: `parms:` for `params:`, `iff:` for `if:`.
//! The deserializer ignores them (an unknown key is not an error in acts
//! 0.25), which silently changes what a model does — a step whose `iff:`
//! is ignored runs unconditionally. [`unknown_keys`] finds each one with
//! its line and column and the known key it most likely meant.

use saphyr_parser::{Event, Parser};

use super::source::Location;

/// A key of a workflow, step, branch or trigger that the model language
/// does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// The key as written.
    pub key: String,
    /// Where the key is.
    pub location: Location,
    /// What it was found in: `workflow`, `step`, `branch` or `trigger`.
    pub within: &'static str,
    /// The known key closest to it, when one is close.
    pub did_you_mean: Option<&'static str>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: unknown key '{}' in a {}",
            self.location, self.key, self.within
        )?;
        match self.did_you_mean {
            Some(k) => write!(f, " (did you mean '{k}'?)"),
            None => write!(f, " (it is ignored)"),
        }
    }
}

/// What a mapping in the model is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Workflow,
    Step,
    Branch,
    Trigger,
    /// A workflow's or step's `concurrency:`.
    Concurrency,
    /// A step's `rate:`.
    Rate,
    /// Free-form data (params, options, vars, ...): not checked.
    Free,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Workflow => "workflow",
            Kind::Step => "step",
            Kind::Branch => "branch",
            Kind::Trigger => "trigger",
            Kind::Concurrency => "concurrency",
            Kind::Rate => "rate",
            Kind::Free => "value",
        }
    }

    /// The keys this kind has, each with the kind of its value (lists:
    /// the kind of their items).
    fn keys(self) -> &'static [(&'static str, Kind)] {
        use Kind::*;
        match self {
            Workflow => &[
                ("id", Free),
                ("name", Free),
                ("desc", Free),
                ("ver", Free),
                ("steps", Step),
                ("env", Free),
                ("vars", Free),
                ("inputs", Free),
                ("on", Trigger),
                ("options", Free),
                ("metadata", Free),
                ("exposes", Free),
                ("index", Free),
                ("concurrency", Concurrency),
                ("priority", Free),
                ("fairness_key", Free),
            ],
            Step => &[
                ("id", Free),
                ("name", Free),
                ("desc", Free),
                ("vars", Free),
                ("if", Free),
                ("while", Free),
                ("branches", Branch),
                ("next", Free),
                ("uses", Free),
                ("params", Free),
                ("catches", Step),
                ("timeouts", Step),
                ("options", Free),
                ("metadata", Free),
                ("exposes", Free),
                ("concurrency", Concurrency),
                ("rate", Rate),
            ],
            Branch => &[
                ("id", Free),
                ("name", Free),
                ("desc", Free),
                ("vars", Free),
                ("if", Free),
                ("else", Free),
                ("needs", Free),
                ("run", Free),
                ("steps", Step),
                ("next", Free),
                ("options", Free),
                ("metadata", Free),
                ("exposes", Free),
            ],
            Trigger => &[
                ("id", Free),
                ("name", Free),
                ("desc", Free),
                ("kind", Free),
                ("params", Free),
                ("schedule", Free),
                ("metadata", Free),
            ],
            Concurrency => &[("key", Free), ("limit", Free)],
            Rate => &[("key", Free), ("per_second", Free), ("burst", Free)],
            Free => &[],
        }
    }

    fn child(self, key: &str) -> Option<Kind> {
        self.keys().iter().find(|(k, _)| *k == key).map(|(_, c)| *c)
    }

    fn closest(self, key: &str) -> Option<&'static str> {
        self.keys()
            .iter()
            .map(|(k, _)| (*k, strsim::damerau_levenshtein(key, k)))
            .filter(|(k, d)| *d <= 2 && *d < k.len().max(key.len()))
            .min_by_key(|(_, d)| *d)
            .map(|(k, _)| k)
    }
}

enum Frame {
    /// A mapping of `kind`; `key` is the key whose value comes next.
    Map { kind: Kind, key: Option<String> },
    /// A list whose items are of `kind`.
    Seq { kind: Kind },
}

/// Every unknown key of the workflow in `yaml`, in document order (a
/// document that does not scan gives none: the parser reports it).
pub fn unknown_keys(yaml: &str) -> Vec<UnknownKey> {
    let mut found = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    for item in Parser::new_from_str(yaml) {
        let Ok((event, span)) = item else {
            break;
        };
        match event {
            Event::MappingStart(..) => {
                let kind = value_kind(&stack);
                stack.push(Frame::Map { kind, key: None });
            }
            Event::SequenceStart(..) => {
                let kind = value_kind(&stack);
                stack.push(Frame::Seq { kind });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                value_done(&mut stack);
            }
            Event::Scalar(text, ..) => match stack.last_mut() {
                Some(Frame::Map { kind, key }) if key.is_none() => {
                    if *kind != Kind::Free && kind.child(&text).is_none() {
                        found.push(UnknownKey {
                            key: text.to_string(),
                            location: Location {
                                line: span.start.line(),
                                column: span.start.col() + 1,
                            },
                            within: kind.name(),
                            did_you_mean: kind.closest(&text),
                        });
                    }
                    *key = Some(text.into_owned());
                }
                _ => value_done(&mut stack),
            },
            Event::Alias(..) => value_done(&mut stack),
            _ => {}
        }
    }
    found
}

/// The kind of a value starting now, from where it is (the document's
/// root is the workflow).
fn value_kind(stack: &[Frame]) -> Kind {
    match stack.last() {
        None => Kind::Workflow,
        Some(Frame::Map { kind, key: Some(k) }) => kind.child(k).unwrap_or(Kind::Free),
        Some(Frame::Map { key: None, .. }) => Kind::Free,
        Some(Frame::Seq { kind }) => *kind,
    }
}

/// A mapping's value has ended: the next scalar is a key again.
fn value_done(stack: &mut [Frame]) {
    if let Some(Frame::Map { key, .. }) = stack.last_mut() {
        *key = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_misspelled_keys_where_they_are_and_leaves_free_data_alone() {
        let yaml = "id: m\nver: '1'\nsteps:\n  - id: s1\n    iff: a > 1\n    uses: acts.transform.set\n    parms: { anything: 1 }\n    params: { free: { keys: here } }\n    branches:\n      - id: b1\n        steps:\n          - id: inner\n            nxt: s1\n    catches:\n      - id: c\n        whatever: 1\nvars:\n  - { name: a, value: 1 }\non:\n  - { id: t, kind: manual, shedule: x }\noptions: { any: thing }\n";
        let found: Vec<(String, usize, &str, Option<&str>)> = unknown_keys(yaml)
            .into_iter()
            .map(|u| (u.key, u.location.line, u.within, u.did_you_mean))
            .collect();
        assert_eq!(
            found,
            vec![
                ("iff".to_owned(), 5, "step", Some("if")),
                ("parms".to_owned(), 7, "step", Some("params")),
                ("nxt".to_owned(), 13, "step", Some("next")),
                ("whatever".to_owned(), 16, "step", None),
                ("shedule".to_owned(), 20, "trigger", Some("schedule")),
            ]
        );
    }

    #[test]
    fn a_clean_model_has_none() {
        let yaml = "id: m\nname: M\nver: '1'\nsteps:\n  - id: s1\n    if: a > 1\n    while: false\n    uses: acts.core.irq\n    params: { key: k }\n    timeouts:\n      - id: t1\n        if: $cost_in('1h')\n        uses: acts.core.msg\n    branches:\n      - { id: b, else: true, needs: [x], run: '1', steps: [] }\nexposes:\n  - { name: a }\n";
        assert_eq!(unknown_keys(yaml), Vec::new());
    }
}
