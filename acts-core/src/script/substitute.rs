//! `${{ expr }}` substitution, with the reference engine's rules.
//!
//! - [`vars`]: node `vars` (and subflow options, exposes). Only a string
//!   that is one whole `${{ }}` expression is evaluated; objects are
//!   processed recursively, arrays are copied.
//! - [`params`]: package params. Objects and arrays are processed
//!   recursively. A string that is one whole expression becomes its JSON
//!   result (type kept); expressions inside a longer string are replaced by
//!   their text (strings raw, other values as JSON).
//!
//! An expression that throws (e.g. it reads an undefined name) does not
//! fail the task: its value becomes `null` and a warning is logged, as in
//! the reference. A hard failure ([`ScriptError::is_hard`]: a time or
//! memory limit, a rejected or unsettled promise) is returned as an error,
//! which fails the task. Unlike the reference, which
//! matches greedily (so two expressions in one string break), every
//! `${{ ... }}` in a string is evaluated on its own. Writes a substituted
//! expression asks for (`$set`) are ignored.

use serde_json::Value;

use super::engine::ScriptEngine;
use super::error::ScriptError;
use super::kind::ScriptKind;
use super::scope::ScriptScope;
pub use crate::model::whole_expression;

fn evaluate(engine: &ScriptEngine, expr: &str, scope: &ScriptScope) -> Result<Value, ScriptError> {
    match engine.eval(ScriptKind::Expression, expr, scope.clone()) {
        Ok(out) => Ok(out.value),
        Err(e) if e.is_hard() => Err(e),
        Err(e) => {
            if engine.first_warning(expr) {
                tracing::warn!(target: "acts::script", expression = expr, error = %e, "expression failed; using null (warned once per expression)");
            }
            Ok(Value::Null)
        }
    }
}

/// Substitutes node vars (see the module docs).
pub fn vars(
    engine: &ScriptEngine,
    value: &Value,
    scope: &ScriptScope,
) -> Result<Value, ScriptError> {
    Ok(match value {
        Value::String(s) => match whole_expression(s) {
            Some(expr) => evaluate(engine, expr, scope)?,
            None => value.clone(),
        },
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), vars(engine, v, scope)?)))
                .collect::<Result<_, ScriptError>>()?,
        ),
        other => other.clone(),
    })
}

/// Substitutes package params (see the module docs).
pub fn params(
    engine: &ScriptEngine,
    value: &Value,
    scope: &ScriptScope,
) -> Result<Value, ScriptError> {
    Ok(match value {
        Value::String(s) => {
            if let Some(expr) = whole_expression(s) {
                return evaluate(engine, expr, scope);
            }
            if !s.contains("${{") {
                return Ok(value.clone());
            }
            Value::String(interpolate(engine, s, scope)?)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), params(engine, v, scope)?)))
                .collect::<Result<_, ScriptError>>()?,
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| params(engine, v, scope))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// Replaces every `${{ expr }}` in `s` by its result's text.
fn interpolate(engine: &ScriptEngine, s: &str, scope: &ScriptScope) -> Result<String, ScriptError> {
    replace_each(s, |expr| {
        Ok(match evaluate(engine, expr, scope)? {
            Value::String(text) => text,
            other => other.to_string(),
        })
    })
}

/// Every `${{ expr }}` in `s` replaced by its result's text, strictly: an
/// expression that throws, or whose value is `null` or `undefined`, is an
/// error that names it (where a silent `null` would be wrong, e.g. a
/// concurrency key, which would then group unrelated processes).
pub fn text_strict(engine: &ScriptEngine, s: &str, scope: &ScriptScope) -> Result<String, String> {
    replace_each(s, |expr| {
        if let Some(text) = plain_name(expr, scope) {
            return Ok(text);
        }
        match engine.eval(ScriptKind::Expression, expr, scope.clone()) {
            Ok(out) => match out.value {
                Value::Null => Err(format!("`{expr}` has no value")),
                Value::String(text) => Ok(text),
                other => Ok(other.to_string()),
            },
            Err(e) => Err(format!("`{expr}` fails: {e}")),
        }
    })
}

/// The text of `expr` when it is only a name the scope holds as a string
/// or an integer (what a script run would give, without one: a key like
/// `${{ customer }}` is read on every start).
fn plain_name(expr: &str, scope: &ScriptScope) -> Option<String> {
    let mut chars = expr.chars();
    let first = chars.next()?;
    let name = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name {
        return None;
    }
    match scope.global(expr)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// `s` with each `${{ expr }}` replaced by what `each` makes of `expr`.
fn replace_each<E>(s: &str, mut each: impl FnMut(&str) -> Result<String, E>) -> Result<String, E> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        let Some(len) = crate::model::expression_len(&rest[start + 3..]) else {
            break;
        };
        let end = start + 3 + len;
        out.push_str(&rest[..start]);
        out.push_str(&each(rest[start + 3..end].trim())?);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}
