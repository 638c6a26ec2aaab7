//! Examples in Markdown documents, checked by `acts test DOC.md`.
//!
//! A fenced block whose info string is `yaml model=NAME` is a model; a
//! block `yaml test=NAME` is its test file (the `NAME.test.yml` of
//! `acts test`). The blocks are written to a temporary folder as
//! `NAME.yml` and `NAME.test.yml`, so a test's `deploy: [other.yml]` names
//! another model block of the same document. A model block without a test
//! block must deploy and start (run with every interrupt completed).

use std::path::{Path, PathBuf};

use crate::failure::Failure;

/// A model example found in a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// Its name (`model=NAME`).
    pub name: String,
    /// The line of the model block's opening fence (1-based).
    pub line: usize,
    /// The model's text.
    pub model: String,
    /// The test block's text, if there is one.
    pub test: Option<String>,
}

/// The largest document read (bytes).
const MAX_DOC_BYTES: u64 = 4 << 20;

/// The model and test blocks of a Markdown text.
pub fn examples(text: &str) -> Result<Vec<Example>, String> {
    let mut out: Vec<Example> = Vec::new();
    let mut tests: Vec<(String, usize, String)> = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let lang = words.next().unwrap_or_default();
        let tag = words.find_map(|w| {
            w.strip_prefix("model=")
                .map(|n| ("model", n))
                .or_else(|| w.strip_prefix("test=").map(|n| ("test", n)))
        });
        let mut body = String::new();
        let mut closed = false;
        for (_, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        if !closed {
            return Err(format!("line {}: a code block is never closed", n + 1));
        }
        let Some((kind, name)) = tag else {
            continue;
        };
        if !matches!(lang, "yaml" | "yml" | "json") {
            return Err(format!(
                "line {}: example '{name}' must be a yaml block (```yaml {kind}={name})",
                n + 1
            ));
        }
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(format!(
                "line {}: example name '{name}' may use letters, digits, '-' and '_' only",
                n + 1
            ));
        }
        if kind == "model" {
            if out.iter().any(|e| e.name == name) {
                return Err(format!("line {}: a second model '{name}'", n + 1));
            }
            out.push(Example {
                name: name.to_owned(),
                line: n + 1,
                model: body,
                test: None,
            });
        } else {
            tests.push((name.to_owned(), n + 1, body));
        }
    }
    for (name, line, body) in tests {
        let Some(e) = out.iter_mut().find(|e| e.name == name) else {
            return Err(format!(
                "line {line}: test '{name}' has no model block '{name}'"
            ));
        };
        if e.test.is_some() {
            return Err(format!("line {line}: a second test for '{name}'"));
        }
        e.test = Some(body);
    }
    Ok(out)
}

/// Writes the examples of document `doc` into `dir`; returns, per
/// example, (model file, test file, label).
pub fn write_examples(doc: &Path, dir: &Path) -> Result<Vec<(PathBuf, PathBuf, String)>, Failure> {
    let cannot =
        |e: std::io::Error| Failure::input(format!("cannot read '{}': {e}", doc.display()));
    let size = std::fs::metadata(doc).map_err(cannot)?.len();
    if size > MAX_DOC_BYTES {
        return Err(Failure::input(format!(
            "'{}' is {size} bytes; documents of at most {MAX_DOC_BYTES} are read",
            doc.display()
        )));
    }
    let text = std::fs::read_to_string(doc).map_err(cannot)?;
    let found = examples(&text).map_err(|e| Failure::input(format!("{}: {e}", doc.display())))?;
    if found.is_empty() {
        return Err(Failure::input(format!(
            "'{}' has no examples (a block ```yaml model=NAME)",
            doc.display()
        )));
    }
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text)
            .map_err(|e| Failure::run(format!("cannot write '{}': {e}", p.display())))
    };
    let mut out = Vec::new();
    for e in found {
        let model = dir.join(format!("{}.yml", e.name));
        let test = dir.join(format!("{}.test.yml", e.name));
        write(&model, &e.model)?;
        write(&test, e.test.as_deref().unwrap_or("{}\n"))?;
        out.push((
            model,
            test,
            format!("{}:{} ({})", doc.display(), e.line, e.name),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_and_test_blocks_pair_by_name() {
        let doc = "# T\n\n```yaml model=one\nid: one\n```\n\ntext\n\n```yaml test=one\nexpect: { state: completed }\n```\n\n```yaml\nplain: block\n```\n\n```yaml model=two\nid: two\n```\n";
        let e = examples(doc).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].name.as_str(), e[0].line), ("one", 3));
        assert_eq!(e[0].model, "id: one\n");
        assert_eq!(e[0].test.as_deref(), Some("expect: { state: completed }\n"));
        assert_eq!(e[1].test, None);
    }

    #[test]
    fn mistakes_in_a_document_are_named_with_their_line() {
        let orphan = examples("```yaml test=x\n{}\n```\n").unwrap_err();
        assert!(
            orphan.contains("line 1") && orphan.contains("no model"),
            "{orphan}"
        );
        let open = examples("```yaml model=x\nid: x\n").unwrap_err();
        assert!(open.contains("never closed"), "{open}");
        let twice = examples("```yaml model=x\n```\n```yaml model=x\n```\n").unwrap_err();
        assert!(twice.contains("second model"), "{twice}");
        let bad = examples("```yaml model=../x\n```\n").unwrap_err();
        assert!(bad.contains("letters"), "{bad}");
    }
}
