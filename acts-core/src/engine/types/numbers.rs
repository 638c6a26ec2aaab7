//! JSON has one kind of number: `10.0` is the integer 10 (to JSON Schema,
//! to JavaScript). [`whole_numbers_as_integers`] reads such numbers as the
//! integers they are, where a request needs an integer: the server's
//! second try at a body, a variable query's bounds.

use serde_json::{Number, Value};

/// The largest magnitude a float holds exactly: beyond it a float may be
/// an integer rounded on its way in (`-9223372036854775809` reads as
/// -2^63), so it is left as it is, and refused where an integer is due.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Rewrites every number of `v` (nested too) that is a whole float of at
/// most 2^53 in magnitude (`10.0`, `1e3`) as that integer; whether any was.
pub fn whole_numbers_as_integers(v: &mut Value) -> bool {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            let whole = f.fract() == 0.0 && (-EXACT..=EXACT).contains(&f);
            if whole {
                *n = Number::from(f as i64);
            }
            whole
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, item| whole_numbers_as_integers(item) | any),
        Value::Object(fields) => fields
            .values_mut()
            .fold(false, |any, item| whole_numbers_as_integers(item) | any),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_floats_up_to_2_53_become_integers_and_nothing_else_changes() {
        let mut v = json!({"a": 10.0, "b": [1e3, 2.5, -0.0], "c": "10.0", "d": 7});
        assert!(whole_numbers_as_integers(&mut v));
        assert_eq!(
            v,
            json!({"a": 10, "b": [1000, 2.5, 0], "c": "10.0", "d": 7})
        );
        assert!(v["a"].is_i64());
        let mut big = json!(9_007_199_254_740_994.0);
        assert!(!whole_numbers_as_integers(&mut big));
        assert!(big.is_f64());
        let mut none = json!({"x": 1, "y": [true, null]});
        assert!(!whole_numbers_as_integers(&mut none));
    }
}
