//! Where things are in a YAML source: line and column of the scalar values
//! of interesting keys (`id`, `uses`, `next`, `if`, ...), so validation errors
//! can point at the line a person has to fix.

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser};

/// A position in a source file (both 1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// The keys whose values the index records.
const INDEXED_KEYS: &[&str] = &[
    "id", "uses", "next", "if", "while", "schedule", "kind", "needs",
];

/// Positions of `key: value` scalars in a YAML document, in document order.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    positions: HashMap<(String, String), Vec<Location>>,
}

enum Frame {
    Map {
        expect_key: bool,
        key: Option<String>,
    },
    Seq {
        key: Option<String>,
    },
}

impl SourceMap {
    /// Indexes `yaml`; a document that does not scan gives an empty map (the
    /// parse error is reported by the deserializer).
    pub fn index(yaml: &str) -> Self {
        let mut map = SourceMap::default();
        let mut stack: Vec<Frame> = Vec::new();
        for item in Parser::new_from_str(yaml) {
            let Ok((event, span)) = item else {
                break;
            };
            let at = Location {
                line: span.start.line(),
                column: span.start.col() + 1,
            };
            match event {
                Event::MappingStart(..) => {
                    stack.push(Frame::Map {
                        expect_key: true,
                        key: None,
                    });
                }
                Event::SequenceStart(..) => {
                    // A list under a key (e.g. `needs: [a, b]`) records its
                    // items under that key.
                    let key = match stack.last() {
                        Some(Frame::Map {
                            expect_key: false,
                            key,
                        }) => key.clone(),
                        _ => None,
                    };
                    stack.push(Frame::Seq { key });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    Self::value_done(&mut stack);
                }
                Event::Scalar(text, ..) => match stack.last_mut() {
                    Some(Frame::Map { expect_key, key }) if *expect_key => {
                        *key = Some(text.into_owned());
                        *expect_key = false;
                    }
                    Some(Frame::Map { key, .. }) => {
                        if let Some(k) = key.as_deref() {
                            map.record(k, &text, at);
                        }
                        Self::value_done(&mut stack);
                    }
                    Some(Frame::Seq { key: Some(k) }) => {
                        let k = k.clone();
                        map.record(&k, &text, at);
                    }
                    _ => {}
                },
                Event::Alias(..) => Self::value_done(&mut stack),
                _ => {}
            }
        }
        map
    }

    fn value_done(stack: &mut [Frame]) {
        if let Some(Frame::Map { expect_key, .. }) = stack.last_mut() {
            *expect_key = true;
        }
    }

    fn record(&mut self, key: &str, value: &str, at: Location) {
        if INDEXED_KEYS.contains(&key) {
            self.positions
                .entry((key.to_owned(), value.to_owned()))
                .or_default()
                .push(at);
        }
    }

    /// Where the `n`-th (from 0) `key: value` occurs.
    pub fn find_nth(&self, key: &str, value: &str, n: usize) -> Option<Location> {
        self.positions
            .get(&(key.to_owned(), value.to_owned()))
            .and_then(|all| all.get(n).copied())
    }

    /// Where the first `key: value` occurs.
    pub fn find(&self, key: &str, value: &str) -> Option<Location> {
        self.find_nth(key, value, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_ids_and_uses_with_their_lines() {
        let yaml = "id: m1\nsteps:\n  - id: s1\n    uses: acts.core.irq\n  - id: s1\n    branches:\n      - id: b1\n        needs: [x, y]\n";
        let map = SourceMap::index(yaml);
        assert_eq!(map.find("id", "m1"), Some(Location { line: 1, column: 5 }));
        assert_eq!(map.find("id", "s1"), Some(Location { line: 3, column: 9 }));
        assert_eq!(
            map.find_nth("id", "s1", 1),
            Some(Location { line: 5, column: 9 })
        );
        assert_eq!(map.find("uses", "acts.core.irq").map(|l| l.line), Some(4));
        assert_eq!(map.find("needs", "y").map(|l| l.line), Some(8));
        assert_eq!(map.find("id", "nope"), None);
    }
}
