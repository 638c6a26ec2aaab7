//! Where a `${{ expression }}` ends: at the first `}}` that is not inside
//! a string or template literal of the expression, nor inside one of its
//! own braces (an object literal) — so `${{ 'x}}y' }}` is one expression
//! and `${{ a }} and ${{ b }}` two. The reference (acts 0.25) matched to
//! the last `}}` of the line, which breaks the second case
//! (docs/COMPATIBILITY.md).

/// The length of the expression text at the start of `after` (the text
/// just after a `${{`), up to the `}}` that closes it; `None` when nothing
/// closes it. Text the scan cannot read as JavaScript (a quote never
/// closed) ends at its first `}}`, as before.
pub fn expression_len(after: &str) -> Option<usize> {
    scan(after).or_else(|| after.find("}}"))
}

/// What the scanner is inside.
enum Context {
    /// Code, with the depth of its own `{ }`.
    Code(usize),
    /// A template literal's text (`` `...` ``).
    Template,
}

fn scan(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut stack = vec![Context::Code(0)];
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match stack.last_mut()? {
            Context::Template => match b {
                b'\\' => i += 1,
                b'`' => {
                    stack.pop();
                }
                b'$' if bytes.get(i + 1) == Some(&b'{') => {
                    stack.push(Context::Code(0));
                    i += 1;
                }
                _ => {}
            },
            Context::Code(depth) => match b {
                b'\'' | b'"' => i = string_end(bytes, i)?,
                b'`' => stack.push(Context::Template),
                b'{' => *depth += 1,
                b'}' if *depth > 0 => *depth -= 1,
                b'}' if stack.len() > 1 => {
                    // the end of a template's `${ }`
                    stack.pop();
                }
                b'}' if bytes.get(i + 1) == Some(&b'}') => return Some(i),
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// The index of the quote that closes the string opened at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'\n' => return None,
            b if b == quote => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::expression_len;

    fn inner(s: &str) -> Option<&str> {
        expression_len(s).map(|n| s[..n].trim())
    }

    #[test]
    fn the_close_is_the_first_outside_strings_templates_and_braces() {
        assert_eq!(inner(" a }} and ${{ b }}"), Some("a"));
        assert_eq!(inner(" 'x}}y' }}"), Some("'x}}y'"));
        assert_eq!(
            inner(r#" "a}}" + 'b\'}}' }} tail"#),
            Some(r#""a}}" + 'b\'}}'"#)
        );
        assert_eq!(
            inner(" `t}}${ {a: 1}.a }}` }}"),
            Some("`t}}${ {a: 1}.a }}`")
        );
        assert_eq!(inner(" {a: {b: 1}} }}"), Some("{a: {b: 1}}"));
        assert_eq!(inner(" a + b"), None);
        // A quote never closed: the first `}}`, as before.
        assert_eq!(inner(" it's }} x"), Some("it's"));
    }
}
