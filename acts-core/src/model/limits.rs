//! [`ModelLimits`]: how large and how deeply nested a model text may be,
//! checked in one linear pass before any parser sees the text (a YAML
//! parser needs quadratic time for deeply nested flow collections, and
//! memory in proportion to the text).

use super::error::ModelError;
use super::source::Location;

/// Limits on a model's source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelLimits {
    /// Most bytes of model text. Default 1 MiB.
    pub max_bytes: usize,
    /// Most levels of nested flow collections (`[`/`{`). Default 64
    /// (the YAML parser itself stops block nesting at 128).
    pub max_depth: usize,
}

impl Default for ModelLimits {
    fn default() -> Self {
        Self {
            max_bytes: 1024 * 1024,
            max_depth: 64,
        }
    }
}

impl ModelLimits {
    /// Checks `text` against the limits: its size, then the nesting depth
    /// of its flow collections (brackets inside quoted scalars and
    /// comments do not count).
    pub fn check(&self, text: &str) -> Result<(), ModelError> {
        if text.len() > self.max_bytes {
            return Err(ModelError::Parse {
                message: format!(
                    "the model is {} bytes, more than the limit of {} bytes (split it, or raise the model size limit)",
                    text.len(),
                    self.max_bytes
                ),
                location: None,
            });
        }
        let mut depth = 0usize;
        let (mut line, mut column) = (1usize, 0usize);
        let mut quote: Option<char> = None;
        let mut comment = false;
        let mut prev = '\n';
        for c in text.chars() {
            column += 1;
            if c == '\n' {
                line += 1;
                column = 0;
                comment = false;
                prev = c;
                continue;
            }
            if comment {
                continue;
            }
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' => quote = Some(c),
                    '#' if prev.is_whitespace() => comment = true,
                    '[' | '{' => {
                        depth += 1;
                        if depth > self.max_depth {
                            return Err(ModelError::Parse {
                                message: format!(
                                    "collections nest deeper than {} levels",
                                    self.max_depth
                                ),
                                location: Some(Location { line, column }),
                            });
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                },
            }
            prev = c;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_flow_depth_are_bounded_and_quotes_and_comments_do_not_count() {
        let limits = ModelLimits {
            max_bytes: 100,
            max_depth: 3,
        };
        assert!(limits.check("id: m\nv: [[[1]]]\n").is_ok());
        let err = limits.check("id: m\nv: [[[[1]]]]\n").unwrap_err();
        assert_eq!(err.location(), Some(Location { line: 2, column: 7 }));
        assert!(limits.check("id: m\nv: '[[[[['\n# [[[[[\n").is_ok());
        let err = limits.check(&"x".repeat(101)).unwrap_err();
        assert!(err.to_string().contains("101 bytes"), "{err}");
    }
}
