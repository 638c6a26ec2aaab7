//! The index of process variables a model declares (`index: [customer,
//! amount]`): one key per (model, variable, value, process),
//! `("x", model, variable, value, pid)` → pid, written in the batch of the
//! transition that changed the value and deleted with the process. A query
//! on one variable reads only the keys in its range.
//!
//! Indexable values are strings, integers and booleans; a variable holding
//! anything else (a fraction, null, an object) has no entry.

use acts_store::BatchOp;
use acts_store::keys::KeyBuilder;
use serde_json::Value;

use crate::durable::IndexValue;
use crate::model::Vars;

/// The index value of a variable's value (`None`: not indexable).
pub(crate) fn indexable(v: &Value) -> Option<IndexValue> {
    match v {
        Value::String(s) => Some(IndexValue::Str(s.clone())),
        Value::Bool(b) => Some(IndexValue::Bool(*b)),
        Value::Number(n) => n.as_i64().map(IndexValue::Int),
        _ => None,
    }
}

/// The prefix of model `mid`'s entries for variable `name`.
pub(crate) fn var_prefix(mid: &str, name: &str) -> KeyBuilder {
    KeyBuilder::new().str("x").str(mid).str(name)
}

/// The key of `pid`'s entry `name = value` of model `mid`.
fn var_key(mid: &str, name: &str, value: &IndexValue, pid: &str) -> Vec<u8> {
    value.encode(var_prefix(mid, name)).str(pid).finish()
}

/// The values of `names` in `data` that can be indexed.
pub(crate) fn indexed_values(names: &[String], data: &crate::scheduler::Scope) -> Vars {
    names
        .iter()
        .filter_map(|n| {
            let v = data.get(n)?;
            indexable(v).map(|_| (n.clone(), v.clone()))
        })
        .collect()
}

/// The ops that move `pid`'s entries from `old` to `new` values.
pub(crate) fn var_index_ops(mid: &str, pid: &str, old: &Vars, new: &Vars) -> Vec<BatchOp> {
    let mut ops = Vec::new();
    for (name, v) in old {
        if new.get(name) != Some(v)
            && let Some(iv) = indexable(v)
        {
            ops.push(BatchOp::delete(var_key(mid, name, &iv, pid)));
        }
    }
    for (name, v) in new {
        if old.get(name) != Some(v)
            && let Some(iv) = indexable(v)
        {
            ops.push(BatchOp::put(var_key(mid, name, &iv, pid), pid.as_bytes()));
        }
    }
    ops
}
