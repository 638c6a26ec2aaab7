//! How a value crosses between the process's data (JSON) and a script,
//! exactly, as in the reference: an integer a JavaScript number cannot
//! hold (beyond ±(2^53 − 1)) reaches the script as a `BigInt`; a `BigInt`
//! the script gives back becomes that exact JSON integer (within the
//! i64/u64 range, else the script fails saying so); an object key whose
//! value is `undefined` is kept as `null`; a number that is not finite
//! fails the script.
//!
//! Values cross as JSON text (fast in both directions). What JSON text
//! cannot say is carried in marked strings — `"\u0000acts:n:DIGITS"` for
//! an exact integer, and `"\u0000acts:s:REST"` for a string of the script's
//! own that begins with the mark (so every string crosses unchanged) —
//! written only when a value needs them: the prelude's `parse` and `text`
//! (see `helpers.rs`) and [`to_script`] / [`from_script`] here read and
//! write them.

use serde_json::{Map, Number, Value};

/// The mark that starts a marked string.
const MARK: &str = "\u{0}acts:";

/// The mark as it appears in JSON text.
const MARK_IN_TEXT: &str = "\\u0000acts:";

/// What text for the prelude's `parse` starts with when it holds marks
/// (JSON text never starts with it).
pub(super) const MARKED: char = '\u{1}';

/// The largest integer a JavaScript number holds exactly (2^53 − 1).
const MAX_SAFE: i64 = 9_007_199_254_740_991;

/// The JSON text of `v` for a script to read with the prelude's `parse`:
/// as it is, or — when `v` holds an integer beyond a JavaScript number's
/// exact range, or a string that begins with the mark — marked, and
/// prefixed with [`MARKED`].
pub(super) fn to_script(v: &Value) -> String {
    let text = v.to_string();
    if !may_need_marks(&text) {
        return text;
    }
    match mark(v) {
        Some(marked) => format!("{MARKED}{marked}"),
        None => text,
    }
}

/// Whether text may hold what [`mark`] marks: an integer of 16 digits or
/// more (2^53 has 16), or the mark (cheap; a false positive only costs a
/// look at the value).
fn may_need_marks(text: &str) -> bool {
    if text.contains(MARK_IN_TEXT) {
        return true;
    }
    let mut run = 0;
    for b in text.bytes() {
        if b.is_ascii_digit() {
            run += 1;
            if run >= 16 {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// `v` with its big integers and marked strings marked; `None` when
/// nothing needed it.
fn mark(v: &Value) -> Option<Value> {
    match v {
        Value::Number(n) => {
            let big = match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => !(-MAX_SAFE..=MAX_SAFE).contains(&i),
                (None, Some(_)) => true,
                _ => false,
            };
            big.then(|| Value::String(format!("{MARK}n:{n}")))
        }
        Value::String(s) => s
            .strip_prefix(MARK)
            .map(|rest| Value::String(format!("{MARK}s:{rest}"))),
        Value::Array(items) => {
            let marked: Vec<Option<Value>> = items.iter().map(mark).collect();
            marked.iter().any(Option::is_some).then(|| {
                Value::Array(
                    marked
                        .into_iter()
                        .zip(items)
                        .map(|(m, v)| m.unwrap_or_else(|| v.clone()))
                        .collect(),
                )
            })
        }
        Value::Object(map) => {
            let marked: Vec<Option<Value>> = map.values().map(mark).collect();
            marked.iter().any(Option::is_some).then(|| {
                Value::Object(
                    map.iter()
                        .zip(marked)
                        .map(|((k, v), m)| (k.clone(), m.unwrap_or_else(|| v.clone())))
                        .collect::<Map<_, _>>(),
                )
            })
        }
        Value::Null | Value::Bool(_) => None,
    }
}

/// Reads back a value the prelude's `text` wrote (`text`, already
/// parsed to `v`): its marked strings become the integers and strings they
/// stand for. An integer outside the i64/u64 range is an error saying so.
pub(super) fn from_script(text: &str, v: Value) -> Result<Value, String> {
    if !text.contains(MARK_IN_TEXT) {
        return Ok(v);
    }
    unmark(v)
}

fn unmark(v: Value) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => match s.strip_prefix(MARK) {
            Some(rest) => match (rest.strip_prefix("n:"), rest.strip_prefix("s:")) {
                (Some(digits), _) => Value::Number(exact_integer(digits)?),
                (_, Some(rest)) => Value::String(format!("{MARK}{rest}")),
                _ => Value::String(s),
            },
            None => Value::String(s),
        },
        Value::Array(items) => {
            Value::Array(items.into_iter().map(unmark).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| Ok((k, unmark(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other,
    })
}

/// The JSON integer of a `BigInt`'s digits.
fn exact_integer(digits: &str) -> Result<Number, String> {
    if let Ok(i) = digits.parse::<i64>() {
        return Ok(Number::from(i));
    }
    if let Ok(u) = digits.parse::<u64>() {
        return Ok(Number::from(u));
    }
    Err(format!(
        "a BigInt outside the i64/u64 range ({digits}n) has no JSON integer here"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_values_cross_as_their_text() {
        let v = json!({"a": [1, 2.5, "x"], "b": 9_007_199_254_740_991i64});
        assert_eq!(to_script(&v), v.to_string());
    }

    #[test]
    fn big_integers_and_marked_strings_are_marked_and_read_back() {
        let v = json!({
            "id": 9_007_199_254_740_993i64,
            "neg": i64::MIN,
            "max": u64::MAX,
            "s": "\u{0}acts:n:5",
            "digits": "12345678901234567890",
            "f": 1.5e300
        });
        let text = to_script(&v);
        assert!(text.starts_with(MARKED), "{text}");
        let parsed: Value = serde_json::from_str(&text[MARKED.len_utf8()..]).unwrap();
        assert_eq!(parsed["id"], json!("\u{0}acts:n:9007199254740993"));
        assert_eq!(parsed["s"], json!("\u{0}acts:s:n:5"));
        assert_eq!(parsed["digits"], json!("12345678901234567890"));
        let plain = serde_json::to_string(&parsed).unwrap();
        assert_eq!(from_script(&plain, parsed).unwrap(), v);
    }

    #[test]
    fn an_integer_beyond_u64_is_an_error() {
        let v = json!(["\u{0}acts:n:18446744073709551616"]);
        let err = from_script(&v.to_string(), v).unwrap_err();
        assert!(err.contains("outside the i64/u64 range"), "{err}");
    }
}
