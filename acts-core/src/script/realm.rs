//! [`Realm`]: one long-lived, locked-down JavaScript context of a runtime,
//! in which expressions and `acts.transform.code` scripts run one after
//! another without seeing each other.
//!
//! Building a context costs ~110 µs; running a small script in a context
//! that exists costs a few. A realm is built once per runtime and locked
//! down so that nothing an evaluation does survives it:
//!
//! - Every object reachable from the global object — the intrinsics
//!   (`Object.prototype`, `Array.prototype`, `JSON`, …), the intrinsics
//!   with no global name (generator, async and iterator prototypes), the
//!   helpers — is frozen, and every global property is made non-writable
//!   and non-configurable. A script cannot change what the next one sees
//!   (assignments to them are ignored, as sloppy-mode JavaScript does;
//!   `Object.defineProperty` throws).
//! - `eval`, `WeakRef` and `FinalizationRegistry` are removed: `eval` could
//!   declare global lexical bindings (which outlive the evaluation and
//!   cannot be deleted); a finalizer could run during a later evaluation.
//! - The script's variables live in a fresh object per evaluation (the
//!   script runs inside `with` over it), never on the global object. What a
//!   script adds to the global object (a sloppy-mode global, a property of
//!   `globalThis`) is deleted when the evaluation ends; a property that
//!   cannot be deleted, a changed prototype or a non-extensible global
//!   object spoils the realm, which is then dropped and built anew.
//! - A script is compiled once per realm (kept by its kind and text, up to
//!   [`KEPT_SCRIPTS`] scripts of [`KEPT_TEXT_BYTES`] of text in all: what a
//!   realm keeps counts against its runtime's memory limit) as an arrow
//!   function of the variables
//!   object: it has no `arguments`, no `prototype` and no name a script
//!   could reach it by (QuickJS never exposes a caller), and it is frozen.
//!   Each call makes a fresh scope over a fresh variables object (and, for
//!   code, a fresh inner function), so nothing compiled carries state from
//!   one evaluation to the next. A text that does not compile as a
//!   function is remembered too, and goes straight to a fresh context.
//!
//! Between evaluations the realm keeps only those compiled functions and
//! its own checker of the global object, in its runtime's userdata
//! (removed with the realm); what else it needs of the intrinsics it reads
//! by name from the frozen global object.
//!
//! Statement lists whose completion value is the result (`let x = 2; x * a`)
//! cannot run as a function; they run in a fresh context of their own (see
//! `engine.rs`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use rquickjs::context::EvalOptions;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Object, Runtime, Value};

use super::helpers::{self, EvalState};
use super::kind::ScriptKind;

/// Locks the realm down (see the module doc).
const LOCKDOWN: &str = r#"
(() => {
  const g = globalThis;
  delete g.WeakRef;
  delete g.FinalizationRegistry;
  const seen = new Set([g]);
  const freeze = (o) => {
    if (o === null || (typeof o !== 'object' && typeof o !== 'function') || seen.has(o)) return;
    seen.add(o);
    Object.freeze(o);
    freeze(Object.getPrototypeOf(o));
    for (const k of Reflect.ownKeys(o)) {
      const d = Reflect.getOwnPropertyDescriptor(o, k);
      if (d === undefined) continue;
      if ('value' in d) { freeze(d.value); } else { freeze(d.get); freeze(d.set); }
    }
  };
  // Intrinsics that no global property names.
  [
    function* () {}, async function () {}, async function* () {}, async () => {},
    (function* () {})(), (async function* () {})(),
    [][Symbol.iterator](), new Map()[Symbol.iterator](), new Set()[Symbol.iterator](),
    ''[Symbol.iterator](), /a/[Symbol.matchAll]('a'), Promise.resolve(),
    (function () { return arguments; })(),
  ].forEach(freeze);
  for (const k of Reflect.ownKeys(g)) {
    const d = Reflect.getOwnPropertyDescriptor(g, k);
    if ('value' in d) {
      Object.defineProperty(g, k, { writable: false, configurable: false });
      freeze(d.value);
    } else {
      Object.defineProperty(g, k, { configurable: false });
      freeze(d.get);
      freeze(d.set);
    }
  }
  freeze(Object.getPrototypeOf(g));
})()
"#;

/// How many compiled scripts a realm keeps (all are forgotten when it is
/// full: a workload's scripts are few, a generated one's many).
const KEPT_SCRIPTS: usize = 256;

/// How much script text a realm keeps compiled, in all (their bytecode is
/// a few times as large, and counts against the runtime's memory limit).
const KEPT_TEXT_BYTES: usize = 256 * 1024;

/// Texts longer than this are compiled for each evaluation, never kept.
const KEPT_MAX_LEN: usize = 4 * 1024;

/// Made at lockdown: whether the global object is still extensible with
/// its original prototype. The intrinsics it uses are taken before any
/// script runs.
const GLOBAL_CHECK: &str = r#"
(() => {
  const isExtensible = Object.isExtensible;
  const getPrototypeOf = Object.getPrototypeOf;
  const objectProto = Object.prototype;
  return Object.freeze((g) => isExtensible(g) && getPrototypeOf(g) === objectProto);
})()
"#;

/// The realm's compiled scripts, kept in its runtime's userdata (a
/// JavaScript value cannot be held outside its runtime): one map per kind
/// ([`slot`]), by text (`None`: the text does not compile as a function,
/// it runs in a fresh context). Removed when the realm is dropped.
type Compiled<'js> = RefCell<Vec<HashMap<String, Option<Function<'js>>>>>;

/// [`GLOBAL_CHECK`]'s function, kept in the runtime's userdata beside
/// [`Compiled`] (the realm's only other function).
type GlobalCheck<'js> = Function<'js>;

/// The map of [`Compiled`] that holds scripts of `kind`.
fn slot(kind: ScriptKind) -> usize {
    match kind {
        ScriptKind::Expression => 0,
        ScriptKind::Code => 1,
    }
}

/// A long-lived, locked-down context of one runtime (see the module doc).
pub(super) struct Realm {
    ctx: Context,
    /// The global object's own string keys after the lockdown.
    baseline: HashSet<String>,
    /// How many symbol keys it had then.
    baseline_symbols: usize,
}

/// What running a script in a realm gave.
pub(super) enum RealmRun<T> {
    /// It ran (successfully or not); `clean` tells whether the realm is
    /// still fit for the next evaluation.
    Ran {
        /// What `finish` made of the result.
        result: T,
        /// Whether the realm is as the lockdown left it.
        clean: bool,
    },
    /// The source does not compile as a function here (a statement list,
    /// or a syntax error to report): run it in a fresh context.
    Fresh,
}

fn options() -> EvalOptions {
    let mut o = EvalOptions::default();
    o.global = true;
    o.strict = false;
    o.promise = false;
    o
}

/// The frozen intrinsics a realm uses, read by name for one evaluation.
struct Intrinsics<'js> {
    object: Object<'js>,
    reflect: Object<'js>,
}

impl<'js> Intrinsics<'js> {
    fn of(ctx: &Ctx<'js>) -> rquickjs::Result<Self> {
        let g = ctx.globals();
        Ok(Self {
            object: g.get("Object")?,
            reflect: g.get("Reflect")?,
        })
    }

    fn object_fn(&self, name: &str) -> rquickjs::Result<Function<'js>> {
        self.object.get(name)
    }

    /// `Reflect.ownKeys(o)`.
    fn own_keys(&self, o: &Object<'js>) -> rquickjs::Result<Vec<Value<'js>>> {
        let f: Function = self.reflect.get("ownKeys")?;
        let keys: rquickjs::Array = f.call((o.clone(),))?;
        keys.iter::<Value>().collect()
    }

    /// Freezes `v` and everything it holds (sealed data).
    fn deep_freeze(&self, v: &Value<'js>, depth: usize) -> rquickjs::Result<()> {
        let Some(o) = v.as_object() else {
            return Ok(());
        };
        if depth > 64 {
            return Ok(()); // JSON data is no deeper than the model limits
        }
        self.object_fn("freeze")?.call::<_, ()>((o.clone(),))?;
        for k in o.keys::<String>() {
            let child: Value = o.get(k?)?;
            self.deep_freeze(&child, depth + 1)?;
        }
        Ok(())
    }
}

impl Realm {
    /// Builds and locks down a realm on `rt` whose helpers use `state`.
    pub(super) fn new(rt: &Runtime, state: &Arc<Mutex<EvalState>>) -> rquickjs::Result<Self> {
        let ctx = Context::full(rt)?;
        let (baseline, baseline_symbols) = ctx.with(|ctx| -> rquickjs::Result<_> {
            helpers::install(&ctx, state, options(), helpers::prelude_all())?;
            ctx.eval_with_options::<(), _>(LOCKDOWN, options())?;
            let check: GlobalCheck = ctx.eval_with_options(GLOBAL_CHECK, options())?;
            // What a realm that failed mid-build left is replaced.
            let _ = ctx.remove_userdata::<Compiled>();
            let _ = ctx.remove_userdata::<GlobalCheck>();
            let kept = ctx
                // One map per kind: `slot` indexes no further.
                .store_userdata::<Compiled>(RefCell::new(vec![HashMap::new(); 2]))
                .is_ok()
                && ctx.store_userdata::<GlobalCheck>(check).is_ok();
            if !kept {
                return Err(rquickjs::Error::new_from_js("userdata", "realm functions"));
            }
            let intrinsics = Intrinsics::of(&ctx)?;
            let mut strings = HashSet::new();
            let mut symbols = 0;
            for k in intrinsics.own_keys(&ctx.globals())? {
                match k.as_string() {
                    Some(s) => {
                        strings.insert(s.to_string()?);
                    }
                    None => symbols += 1,
                }
            }
            Ok((strings, symbols))
        })?;
        Ok(Self {
            ctx,
            baseline,
            baseline_symbols,
        })
    }

    /// Runs `source` as `kind` over the variables in `vars_json` (a JSON
    /// object text), handing the result to `finish` inside the context.
    pub(super) fn run<T>(
        &mut self,
        kind: ScriptKind,
        source: &str,
        vars_json: &str,
        finish: impl for<'js> FnOnce(&Ctx<'js>, Result<Value<'js>, CaughtError<'js>>) -> T,
    ) -> rquickjs::Result<RealmRun<T>> {
        let baseline = (&self.baseline, self.baseline_symbols);
        self.ctx.with(|ctx| -> rquickjs::Result<_> {
            let intrinsics = Intrinsics::of(&ctx)?;
            let known = compiled(&ctx, |c| c[slot(kind)].get(source).cloned())?;
            let f = match known {
                Some(Some(f)) => f,
                Some(None) => return Ok(RealmRun::Fresh),
                None => {
                    let f = compile(&ctx, kind, source);
                    if let Some(f) = &f {
                        // Unreachable from scripts already; frozen all the same.
                        intrinsics
                            .object_fn("freeze")?
                            .call::<_, ()>((f.clone(),))?;
                    }
                    if source.len() <= KEPT_MAX_LEN {
                        compiled(&ctx, |c| {
                            let scripts: usize = c.iter().map(HashMap::len).sum();
                            let text: usize =
                                c.iter().flat_map(HashMap::keys).map(String::len).sum();
                            if scripts >= KEPT_SCRIPTS || text + source.len() > KEPT_TEXT_BYTES {
                                c.iter_mut().for_each(HashMap::clear);
                            }
                            c[slot(kind)].insert(source.to_owned(), f.clone());
                        })?;
                    }
                    match f {
                        Some(f) => f,
                        None => return Ok(RealmRun::Fresh),
                    }
                }
            };
            let vars = enter(&ctx, &intrinsics, vars_json)?;
            let value = f.call::<_, Value>((vars,)).catch(&ctx);
            let result = finish(&ctx, value);
            let clean = clean(&ctx, &intrinsics, baseline).unwrap_or(false);
            Ok(RealmRun::Ran { result, clean })
        })
    }

    /// Whether `source` parses as a function body (statements, or one
    /// expression); the parser's message when it does not. Nothing of the
    /// script runs: compiling only makes the function.
    pub(super) fn check_syntax(&mut self, source: &str) -> rquickjs::Result<Result<(), String>> {
        self.ctx.with(|ctx| -> rquickjs::Result<_> {
            let text = format!("(function () {{\n{source}\n}})");
            Ok(
                match ctx
                    .eval_with_options::<Function, _>(text, options())
                    .catch(&ctx)
                {
                    Ok(_) => Ok(()),
                    Err(CaughtError::Exception(e)) => Err(syntax_message(
                        &e.message().unwrap_or_else(|| e.to_string()),
                        e.stack().as_deref(),
                        source,
                    )),
                    Err(other) => Err(other.to_string()),
                },
            )
        })
    }
}

/// Deletes what the evaluation added to the global object; whether the
/// realm is as the lockdown left it (`baseline`: the global object's own
/// string keys and symbol count after the lockdown).
fn clean<'js>(
    ctx: &Ctx<'js>,
    i: &Intrinsics<'js>,
    (baseline, baseline_symbols): (&HashSet<String>, usize),
) -> rquickjs::Result<bool> {
    let g = ctx.globals();
    let check: GlobalCheck = ctx
        .userdata::<GlobalCheck>()
        .map(|f| f.clone())
        .ok_or_else(|| rquickjs::Error::new_from_js("userdata", "global checker"))?;
    if !check.call::<_, bool>((g.clone(),))? {
        return Ok(false); // not extensible, or another prototype
    }
    // Baseline keys cannot be deleted (the lockdown made them
    // non-configurable): the same count means nothing was added. Counted
    // from the engine's list of keys, without building an array of them.
    let count = g
        .own_keys::<rquickjs::Atom>(rquickjs::object::Filter::new().string().symbol())
        .len();
    if count == baseline.len() + baseline_symbols {
        return Ok(true);
    }
    let delete: Function = i.reflect.get("deleteProperty")?;
    let mut ok = true;
    let mut symbols = 0;
    for k in i.own_keys(&g)? {
        match k.as_string() {
            Some(s) if baseline.contains(&s.to_string()?) => continue,
            Some(_) => {}
            None => {
                symbols += 1;
                if symbols <= baseline_symbols {
                    continue;
                }
            }
        }
        let deleted: bool = delete.call((g.clone(), k))?;
        ok &= deleted;
    }
    Ok(ok && symbols <= baseline_symbols)
}

/// `f` on the realm's [`Compiled`] scripts (an error when they are gone).
fn compiled<'js, T>(
    ctx: &Ctx<'js>,
    f: impl FnOnce(&mut [HashMap<String, Option<Function<'js>>>]) -> T,
) -> rquickjs::Result<T> {
    let guard = ctx
        .userdata::<Compiled>()
        .ok_or_else(|| rquickjs::Error::new_from_js("userdata", "realm functions"))?;
    let mut maps = guard.borrow_mut();
    Ok(f(&mut maps))
}

impl Drop for Realm {
    fn drop(&mut self) {
        // The kept functions hold the context: released with the realm.
        self.ctx.with(|ctx| {
            drop(ctx.remove_userdata::<Compiled>());
            drop(ctx.remove_userdata::<GlobalCheck>());
        });
    }
}

/// The variables object of one evaluation: the variables, with no
/// prototype; sealed data (`$name`) frozen and read-only.
fn enter<'js>(
    ctx: &Ctx<'js>,
    i: &Intrinsics<'js>,
    vars_json: &str,
) -> rquickjs::Result<Object<'js>> {
    let vars = helpers::parse_vars(ctx, vars_json)?
        .into_object()
        .ok_or_else(|| rquickjs::Error::new_from_js("value", "object"))?;
    i.object_fn("setPrototypeOf")?
        .call::<_, ()>((vars.clone(), Value::new_null(ctx.clone())))?;
    let sealed: Vec<String> = vars
        .keys::<String>()
        .filter_map(|k| k.ok())
        .filter(|k| k.starts_with('$'))
        .collect();
    if !sealed.is_empty() {
        let define = i.object_fn("defineProperty")?;
        for k in sealed {
            let v: Value = vars.get(k.as_str())?;
            i.deep_freeze(&v, 0)?;
            let read_only = Object::new(ctx.clone())?;
            read_only.set("writable", false)?;
            read_only.set("configurable", false)?;
            define.call::<_, ()>((vars.clone(), k, read_only))?;
        }
    }
    Ok(vars)
}

/// Compiles `source` as a function of the variables object; `None` when it
/// must run in a fresh context (a statement list, or a syntax error, which
/// the fresh context reports).
fn compile<'js>(ctx: &Ctx<'js>, kind: ScriptKind, source: &str) -> Option<Function<'js>> {
    let text = match kind {
        ScriptKind::Code => format!(
            "((__acts_vars) => {{ with (__acts_vars) {{ return (function () {{\n{source}\n}})(); }} }})"
        ),
        ScriptKind::Expression => {
            format!("((__acts_vars) => {{ with (__acts_vars) {{ return (\n{source}\n); }} }})")
        }
    };
    ctx.eval_with_options::<Function, _>(text, options())
        .catch(ctx)
        .ok()
}

/// The parser's message in the user's terms: where in *their* text (the
/// wrapper's first line is not theirs), and an error found after their
/// last line said as what it is — the script ends too early.
fn syntax_message(message: &str, stack: Option<&str>, source: &str) -> String {
    // QuickJS reports the place as `at <file>:<line>:<column>`.
    let place = stack.and_then(|s| {
        let tail = s.trim().rsplit(' ').next()?;
        let mut parts = tail.rsplitn(3, ':');
        let column: usize = parts.next()?.parse().ok()?;
        let line: usize = parts.next()?.parse().ok()?;
        Some((line, column))
    });
    let lines = source.lines().count().max(1);
    match place {
        Some((line, _)) if line > lines + 1 => {
            "it ends too early (an operand, a closing bracket or a quote is missing at its end)"
                .to_owned()
        }
        Some((line, column)) if line >= 2 && lines > 1 => {
            format!("{message} (its line {}, column {column})", line - 1)
        }
        Some((_, column)) => format!("{message} (at column {column})"),
        None => message.to_owned(),
    }
}
