//! The script helpers (`$get`, `$set`, `$env`, `console`, …) installed into
//! every context (a realm's, or a statement script's fresh one).
//!
//! The helpers are JavaScript closures over a few native functions that
//! exchange JSON text with the evaluation's own [`EvalState`]. The prelude
//! captures the natives in its closure and deletes them from the global
//! object, so user code can neither call nor replace the engine's plumbing;
//! what it can replace (`$get`, `console`, …) lives only as long as the one
//! evaluation's context.

use std::sync::Arc;

use parking_lot::Mutex;
use rquickjs::{Ctx, Function, Object};
use serde_json::Value;

use super::crossing;
use super::scope::{ScriptEffect, ScriptScope};
use crate::model::TimeoutLimit;

/// The state one evaluation's native helpers read and write. A fresh
/// context gets its own; a realm's natives share one, filled for each
/// evaluation and emptied after it (no script runs between evaluations: a
/// runtime left with pending jobs is discarded).
#[derive(Default)]
pub(super) struct EvalState {
    pub(super) scope: ScriptScope,
    pub(super) effects: Vec<ScriptEffect>,
}

/// The `$<name>` helpers every evaluation gets (`$get`, `$set`, …), without
/// the `$`: names a snapshot may not take.
pub const HELPER_NAMES: [&str; 9] = [
    "get",
    "set",
    "set_process_var",
    "inputs",
    "data",
    "ecode",
    "cost",
    "cost_in",
    "env",
];

/// The start of the prelude: captures the natives `__acts_*` in a closure
/// and deletes them from the global object.
const PRELUDE_HEAD: &str = r#"
(() => {
  const g = globalThis;
  const n = {};
  for (const k of ['log', 'get', 'set', 'set_process_var', 'inputs', 'data', 'ecode', 'cost', 'cost_in', 'env_get', 'env_set', 'step_get', 'step_data', 'step_set']) {
    n[k] = g['__acts_' + k]; delete g['__acts_' + k];
  }
  // How values cross to and from the process's data (crossing.rs):
  // JSON text, with what JSON cannot say (an exact big integer, a string
  // that begins with the mark) in marked strings. The natives captured,
  // so a script that replaces them changes only its own values.
  const MARK = '\u0000acts:';
  const jsonParse = JSON.parse, jsonStringify = JSON.stringify, big = BigInt, isFinite = Number.isFinite;
  const revive = (k, x) => (typeof x === 'string' && x.startsWith(MARK)
    ? (x.startsWith('n:', 6) ? big(x.slice(8)) : MARK + x.slice(8))
    : x);
  // Text that starts with \u0001 holds marks.
  const parse = (s) => (s === undefined ? undefined
    : s.charCodeAt(0) === 1 ? jsonParse(s.slice(1), revive) : jsonParse(s));
  // Every value a helper writes (a variable, an env entry, a step's data)
  // and a script's result: a number that is not finite fails the script,
  // as in the reference, never a silent null; a BigInt is exact; a key
  // whose value is undefined is kept as null.
  const crossing = (k, x) => {
    switch (typeof x) {
      case 'number':
        if (!isFinite(x)) {
          throw new TypeError(`a number that is not finite (${x})${k === '' ? '' : ` (at '${k}')`}; JSON has no such number`);
        }
        return x;
      case 'bigint': return MARK + 'n:' + x;
      case 'string': return x.startsWith(MARK) ? MARK + 's:' + x.slice(6) : x;
      case 'undefined': return null;
      default: return x;
    }
  };
  const text = (v) => jsonStringify(v, crossing);
"#;

/// The helpers, each installed only into evaluations whose source names
/// it (a fresh context pays for what its script uses): the names that
/// trigger a part, and the part.
const PRELUDE_PARTS: &[(&[&str], &str)] = &[
    (
        &["console"],
        r#"
  const log = (level) => (...args) => n.log(level, args.map((a) => String(a)).join(' '));
  g.console = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') };
"#,
    ),
    (
        &["$get", "$set", "$inputs", "$data", "$ecode", "$cost"],
        r#"
  g.$get = (name) => parse(n.get(String(name)));
  g.$set = (name, value) => { n.set(String(name), text(value)); };
  g.$set_process_var = (name, value) => { n.set_process_var(String(name), text(value)); };
  g.$inputs = () => parse(n.inputs());
  g.$data = () => parse(n.data());
  g.$ecode = () => parse(n.ecode());
  g.$cost = () => n.cost();
  g.$cost_in = (min, max) => (max === undefined ? n.cost_in(String(min)) : n.cost_in(String(min), String(max)));
"#,
    ),
    (
        &["$env"],
        r#"
  g.$env = new Proxy({}, {
    get: (_, key) => (typeof key === 'string' ? parse(n.env_get(key)) : undefined),
    set: (_, key, value) => { if (typeof key === 'string') n.env_set(key, text(value)); return true; },
  });
"#,
    ),
    (
        &["intersection", "union", "difference"],
        r#"
  const uniq = (a) => Array.from(new Set(a.map(String))).sort();
  Object.defineProperty(Array.prototype, 'intersection', { value: function (b) { const s = new Set(b.map(String)); return uniq(this.filter((x) => s.has(String(x)))); } });
  Object.defineProperty(Array.prototype, 'union', { value: function (b) { return uniq(this.concat(b)); } });
  Object.defineProperty(Array.prototype, 'difference', { value: function (b) { const s = new Set(b.map(String)); return uniq(this.filter((x) => !s.has(String(x)))); } });
"#,
    ),
];

/// The step globals' maker, for an evaluation given steps (fresh
/// contexts only): `__acts_step(id)` makes the proxy the engine installs
/// as the global `id`, and is deleted before the script runs.
const PRELUDE_STEPS: &str = r#"
  g.__acts_step = (id) => new Proxy({}, {
    get: (_, key) => {
      if (typeof key !== 'string') return undefined;
      if (key === 'data' || key === 'inputs') return () => parse(n.step_data(id));
      const v = parse(n.step_get(id, key));
      return v === undefined ? null : v;
    },
    set: (_, key, value) => { if (typeof key === 'string') n.step_set(id, key, text(value)); return true; },
    has: (_, key) => typeof key === 'string',
  });
"#;

/// The end of the prelude: hides `eval` and evaluates to the deep-freeze
/// function the engine uses for sealed data (kept out of the global
/// object).
const PRELUDE_TAIL: &str = r#"
  delete g.eval;
  const freeze = (o) => { if (o && typeof o === 'object' && !Object.isFrozen(o)) { Object.freeze(o); Object.values(o).forEach(freeze); } return o; };
  return { freeze, text, parse };
})()
"#;

/// The prelude for `source`: the helpers it names (a helper reached only
/// by a computed name, `globalThis['$e' + 'nv']`, is not installed), and
/// with `steps` the maker of step globals — for a fresh context, which
/// pays for what its script uses.
pub(super) fn prelude_for(source: &str, steps: bool) -> String {
    prelude_with(|names| names.iter().any(|n| source.contains(n)), steps)
}

/// The prelude with every helper, for a long-lived realm (which never
/// runs a script given steps).
pub(super) fn prelude_all() -> String {
    prelude_with(|_| true, false)
}

fn prelude_with(wanted: impl Fn(&[&str]) -> bool, steps: bool) -> String {
    let mut text = String::from(PRELUDE_HEAD);
    for (names, part) in PRELUDE_PARTS {
        if wanted(names) {
            text.push_str(part);
        }
    }
    if steps {
        text.push_str(PRELUDE_STEPS);
    }
    text.push_str(PRELUDE_TAIL);
    text
}

fn json_text(v: &Value) -> String {
    crossing::to_script(v)
}

/// Reads JSON text the prelude's `text` wrote (a value a helper received,
/// a script's result): its marks read back (see `crossing.rs`).
pub(super) fn parse_json(text: &str) -> Result<Value, String> {
    let v = serde_json::from_str(text).map_err(|e| {
        format!("the value cannot cross into the process's data: {e} (at most {MAX_DEPTH} levels of nesting)")
    })?;
    crossing::from_script(text, v)
}

/// The prelude's functions the engine calls (`text`, `parse`), kept in
/// the context's userdata by [`install`].
type CrossingFns<'js> = Object<'js>;

fn crossing_fn<'js>(ctx: &Ctx<'js>, name: &str) -> rquickjs::Result<Function<'js>> {
    let fns = ctx
        .userdata::<CrossingFns>()
        .map(|f| f.clone())
        .ok_or_else(|| rquickjs::Error::new_from_js("userdata", "crossing functions"))?;
    fns.get(name)
}

/// A script's result as the prelude's `text` writes it (JSON with marks;
/// `None` for a value JSON has no text for, e.g. a function). Throws what
/// `text` throws (a number that is not finite, a cycle).
pub(super) fn result_text<'js>(
    ctx: &Ctx<'js>,
    value: rquickjs::Value<'js>,
) -> rquickjs::Result<Option<String>> {
    let text: Option<rquickjs::String> = crossing_fn(ctx, "text")?.call((value,))?;
    text.map(|t| t.to_string()).transpose()
}

/// An evaluation's variables from their text ([`crossing::to_script`]).
pub(super) fn parse_vars<'js>(
    ctx: &Ctx<'js>,
    text: &str,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    if text.starts_with(crossing::MARKED) {
        crossing_fn(ctx, "parse")?.call((text,))
    } else {
        ctx.json_parse(text)
    }
}

/// The deepest nesting of a value that crosses between a script and the
/// process's data (what JSON reading allows).
pub const MAX_DEPTH: usize = 128;

/// How deeply `v` nests (iteratively: a value of any depth is measured
/// without recursion).
pub(super) fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|x| (x, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// A JSON value a helper received from a script, or the exception it
/// throws back.
fn from_script(text: &str) -> rquickjs::Result<Value> {
    parse_json(text).map_err(|m| rquickjs::Error::new_from_js_message("value", "JSON", m))
}

/// Installs the natives and runs `prelude` (from [`prelude_for`] or
/// [`prelude_all`]) in a new context; returns the deep-freeze function for
/// sealed data.
pub(super) fn install<'js>(
    ctx: &Ctx<'js>,
    state: &Arc<Mutex<EvalState>>,
    options: rquickjs::context::EvalOptions,
    prelude: String,
) -> rquickjs::Result<Function<'js>> {
    let g = ctx.globals();
    g.set(
        "__acts_log",
        Function::new(ctx.clone(), |level: String, text: String| {
            match level.as_str() {
                "error" => tracing::error!(target: "acts::script", "{text}"),
                "warn" => tracing::warn!(target: "acts::script", "{text}"),
                "debug" => tracing::debug!(target: "acts::script", "{text}"),
                _ => tracing::info!(target: "acts::script", "{text}"),
            }
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_get",
        Function::new(ctx.clone(), move |name: String| -> Option<String> {
            s.lock().scope.find(&name).map(json_text)
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_set",
        Function::new(
            ctx.clone(),
            move |name: String, value: String| -> rquickjs::Result<()> {
                let value = from_script(&value)?;
                let mut st = s.lock();
                st.scope.own.insert(name.clone(), value.clone());
                st.effects.push(ScriptEffect::Set { name, value });
                Ok(())
            },
        )?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_set_process_var",
        Function::new(
            ctx.clone(),
            move |name: String, value: String| -> rquickjs::Result<()> {
                let value = from_script(&value)?;
                s.lock()
                    .effects
                    .push(ScriptEffect::SetProcessVar { name, value });
                Ok(())
            },
        )?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_inputs",
        Function::new(ctx.clone(), move || -> String {
            let st = s.lock();
            match &st.scope.inputs {
                Some(inputs) => json_text(&Value::Object(inputs.clone())),
                None => json_text(&Value::Object(st.scope.visible())),
            }
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_data",
        Function::new(ctx.clone(), move || -> String {
            json_text(&Value::Object(s.lock().scope.own.clone()))
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_ecode",
        Function::new(ctx.clone(), move || -> String {
            s.lock().scope.ecode().map_or("null".to_owned(), |e| {
                json_text(&Value::String(e.to_owned()))
            })
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_cost",
        Function::new(ctx.clone(), move || -> f64 {
            s.lock().scope.cost_millis as f64
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_cost_in",
        Function::new(
            ctx.clone(),
            move |min: String, max: rquickjs::function::Opt<String>| -> bool {
                // An unparsable literal counts as zero, as in the reference
                // (deploy-time validation rejects literal ones up front).
                let ms = |lit: &str| {
                    lit.parse::<TimeoutLimit>()
                        .map_or(0, |t| t.as_duration().as_millis() as u64)
                };
                let cost = s.lock().scope.cost_millis;
                cost >= ms(&min) && max.0.is_none_or(|m| cost < ms(&m))
            },
        )?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_env_get",
        Function::new(ctx.clone(), move |name: String| -> Option<String> {
            s.lock().scope.env_get(&name).map(|v| json_text(&v))
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_env_set",
        Function::new(
            ctx.clone(),
            move |name: String, value: String| -> rquickjs::Result<()> {
                if name.starts_with("__") || name == "WORK_DIR" {
                    return Ok(()); // read-only keys are silently kept, as in the reference
                }
                let value = from_script(&value)?;
                let mut st = s.lock();
                st.scope.env.insert(name.clone(), value.clone());
                st.effects.push(ScriptEffect::SetEnv { name, value });
                Ok(())
            },
        )?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_step_get",
        Function::new(
            ctx.clone(),
            move |id: String, name: String| -> Option<String> {
                let st = s.lock();
                let step = st.scope.step(&id)?;
                step.visible.get(&name).map(json_text)
            },
        )?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_step_data",
        Function::new(ctx.clone(), move |id: String| -> String {
            let st = s.lock();
            st.scope.step(&id).map_or("null".to_owned(), |step| {
                json_text(&Value::Object(step.data.clone()))
            })
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_step_set",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, id: String, name: String, value: String| -> rquickjs::Result<()> {
                let value = from_script(&value)?;
                let mut st = s.lock();
                match st.scope.set_step(&id, &name, value) {
                    Ok(effect) => {
                        st.effects.push(effect);
                        Ok(())
                    }
                    Err(message) => {
                        drop(st);
                        Err(rquickjs::Exception::throw_message(&ctx, &message))
                    }
                }
            },
        )?,
    )?;
    g.set("os", std::env::consts::OS)?;
    let fns: Object = ctx.eval_with_options(prelude, options)?;
    let freeze: Function = fns.get("freeze")?;
    let _ = ctx.remove_userdata::<CrossingFns>();
    if ctx.store_userdata::<CrossingFns>(fns).is_err() {
        return Err(rquickjs::Error::new_from_js(
            "userdata",
            "crossing functions",
        ));
    }
    Ok(freeze)
}
