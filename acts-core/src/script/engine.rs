//! [`ScriptEngine`]: JavaScript (QuickJS) evaluation with compiled-script
//! caching, a pool of runtimes, and time and memory limits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rquickjs::context::EvalOptions;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Object, Runtime};
use serde_json::Value;

use super::error::ScriptError;
use super::scope::{ScriptEffect, ScriptScope};
use crate::model::TimeoutLimit;

/// Limits every evaluation runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Heap a runtime may allocate; beyond it the script fails.
    pub memory_bytes: usize,
    /// Wall-clock time one evaluation may take; beyond it the script is
    /// interrupted and fails.
    pub time: Duration,
    /// Native stack a script may use (deep recursion fails, not crashes).
    pub stack_bytes: usize,
}

impl Default for ScriptLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 16 * 1024 * 1024,
            time: Duration::from_secs(5),
            stack_bytes: 256 * 1024,
        }
    }
}

/// How a source text is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScriptKind {
    /// An expression or statements whose completion value is the result
    /// (`if`, `while`, `run`, `${{ }}`): `a > 1`, `let x = 2; x * a`.
    Expression,
    /// A function body whose `return` value is the result
    /// (`acts.transform.code`): `return { b: a + 10 }`.
    Code,
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptOutput {
    /// The result as JSON (`undefined` becomes `null`).
    pub value: Value,
    /// The writes the script asked for, in order.
    pub effects: Vec<ScriptEffect>,
}

/// Per-evaluation state the native helpers read and write.
#[derive(Default)]
struct EvalState {
    scope: ScriptScope,
    effects: Vec<ScriptEffect>,
}

/// Most compiled scripts a runtime keeps before it starts over.
const CACHE_CAP: usize = 4096;

/// One QuickJS runtime and context with its helpers installed.
struct Worker {
    /// How many compiled scripts the runtime's cache holds (the cache itself
    /// is a JS object, `__acts_cache`, so compiled functions stay inside
    /// the runtime that owns them).
    cached: usize,
    /// The context (it keeps its runtime alive).
    ctx: Context,
    deadline: Arc<Mutex<Option<Instant>>>,
    state: Arc<Mutex<EvalState>>,
}

/// Evaluates workflow JavaScript. Cheap to share (`Arc`), safe to call from
/// many threads: each call borrows a runtime from a pool, so evaluations run
/// in parallel and a runtime (with its compiled-script cache) is reused.
///
/// A script that runs past [`ScriptLimits::time`] or allocates past
/// [`ScriptLimits::memory_bytes`] fails with [`ScriptError::Timeout`] or
/// [`ScriptError::OutOfMemory`]; its runtime is discarded, never reused.
pub struct ScriptEngine {
    limits: ScriptLimits,
    pool: Mutex<Vec<Worker>>,
    max_idle: usize,
}

impl std::fmt::Debug for ScriptEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEngine")
            .field("limits", &self.limits)
            .field("idle", &self.pool.lock().len())
            .finish()
    }
}

impl Default for ScriptEngine {
    fn default() -> Self {
        Self::new(ScriptLimits::default())
    }
}

/// The helpers every runtime gets, written in JavaScript over a few native
/// functions that exchange JSON text.
const PRELUDE: &str = r#"
(() => {
  const g = globalThis;
  const parse = (s) => (s === undefined ? undefined : JSON.parse(s));
  const log = (level) => (...args) => __acts_log(level, args.map((a) => String(a)).join(' '));
  g.console = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error') };
  g.$get = (name) => parse(__acts_get(String(name)));
  g.$set = (name, value) => { __acts_set(String(name), JSON.stringify(value === undefined ? null : value)); };
  g.$set_process_var = (name, value) => { __acts_set_process_var(String(name), JSON.stringify(value === undefined ? null : value)); };
  g.$inputs = () => parse(__acts_inputs());
  g.$data = () => parse(__acts_data());
  g.$ecode = () => parse(__acts_ecode());
  g.$cost = () => __acts_cost();
  g.$cost_in = (min, max) => (max === undefined ? __acts_cost_in(String(min)) : __acts_cost_in(String(min), String(max)));
  g.$env = new Proxy({}, {
    get: (_, key) => (typeof key === 'string' ? parse(__acts_env_get(key)) : undefined),
    set: (_, key, value) => { if (typeof key === 'string') __acts_env_set(key, JSON.stringify(value === undefined ? null : value)); return true; },
  });
  const uniq = (a) => Array.from(new Set(a.map(String))).sort();
  Object.defineProperty(Array.prototype, 'intersection', { value: function (b) { const s = new Set(b.map(String)); return uniq(this.filter((x) => s.has(String(x)))); } });
  Object.defineProperty(Array.prototype, 'union', { value: function (b) { return uniq(this.concat(b)); } });
  Object.defineProperty(Array.prototype, 'difference', { value: function (b) { const s = new Set(b.map(String)); return uniq(this.filter((x) => !s.has(String(x)))); } });
  g.__acts_freeze = (o) => { if (o && typeof o === 'object' && !Object.isFrozen(o)) { Object.freeze(o); Object.values(o).forEach(g.__acts_freeze); } return o; };
  g.__acts_cache = Object.create(null);
  g.__acts_eval = g.eval;
  delete g.eval;
})();
"#;

impl ScriptEngine {
    /// An engine whose evaluations run under `limits`.
    pub fn new(limits: ScriptLimits) -> Self {
        Self {
            limits,
            pool: Mutex::new(Vec::new()),
            max_idle: std::thread::available_parallelism().map_or(4, |n| n.get() * 2),
        }
    }

    /// Creates up to `n` idle runtimes ahead of use, so the first
    /// evaluations do not pay for building one (errors are left for the
    /// evaluation that needs the runtime to report).
    pub fn warm(&self, n: usize) {
        let want = n.min(self.max_idle);
        let have = self.pool.lock().len();
        for _ in have..want {
            match self.new_worker() {
                Ok(w) => self.pool.lock().push(w),
                Err(_) => return,
            }
        }
    }

    /// The limits evaluations run under.
    pub fn limits(&self) -> ScriptLimits {
        self.limits
    }

    /// Evaluates `source` as `kind` with `scope` visible, returning its
    /// result and the writes it asked for.
    pub fn eval(
        &self,
        kind: ScriptKind,
        source: &str,
        scope: ScriptScope,
    ) -> Result<ScriptOutput, ScriptError> {
        let worker = self.pool.lock().pop();
        let mut worker = match worker {
            Some(w) => w,
            None => self.new_worker()?,
        };
        let result = worker.eval(kind, source, scope, self.limits.time);
        let reusable = !matches!(
            result,
            Err(ScriptError::Timeout { .. } | ScriptError::OutOfMemory { .. })
        );
        if reusable {
            let mut pool = self.pool.lock();
            if pool.len() < self.max_idle {
                pool.push(worker);
            }
        }
        result
    }

    /// Evaluates a condition (`if`, `while`); the result must be a boolean.
    pub fn eval_bool(&self, source: &str, scope: ScriptScope) -> Result<bool, ScriptError> {
        let out = self.eval(ScriptKind::Expression, source, scope)?;
        match out.value {
            Value::Bool(b) => Ok(b),
            other => Err(ScriptError::NotBoolean {
                script: source.to_owned(),
                value: other.to_string(),
            }),
        }
    }

    fn new_worker(&self) -> Result<Worker, ScriptError> {
        let setup = |e: rquickjs::Error| ScriptError::Setup(e.to_string());
        let rt = Runtime::new().map_err(setup)?;
        rt.set_memory_limit(self.limits.memory_bytes);
        rt.set_max_stack_size(self.limits.stack_bytes);
        let deadline: Arc<Mutex<Option<Instant>>> = Arc::default();
        let watched = deadline.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            watched.lock().is_some_and(|d| Instant::now() >= d)
        })));
        let ctx = Context::full(&rt).map_err(setup)?;
        let state: Arc<Mutex<EvalState>> = Arc::default();
        ctx.with(|ctx| install_helpers(&ctx, &state))
            .map_err(setup)?;
        Ok(Worker {
            cached: 0,
            ctx,
            deadline,
            state,
        })
    }
}

fn json_text(v: &Value) -> String {
    v.to_string()
}

fn parse_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Installs the native functions the prelude builds on, then the prelude.
fn install_helpers(ctx: &Ctx<'_>, state: &Arc<Mutex<EvalState>>) -> rquickjs::Result<()> {
    let g = ctx.globals();
    g.set(
        "__acts_log",
        Function::new(ctx.clone(), |level: String, text: String| {
            tracing::info!(target: "acts::script", level = %level, "{text}");
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
        Function::new(ctx.clone(), move |name: String, value: String| {
            let value = parse_json(&value);
            let mut st = s.lock();
            st.scope.own.insert(name.clone(), value.clone());
            st.effects.push(ScriptEffect::Set { name, value });
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_set_process_var",
        Function::new(ctx.clone(), move |name: String, value: String| {
            let value = parse_json(&value);
            s.lock()
                .effects
                .push(ScriptEffect::SetProcessVar { name, value });
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_inputs",
        Function::new(ctx.clone(), move || -> String {
            Value::Object(s.lock().scope.inputs.clone()).to_string()
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_data",
        Function::new(ctx.clone(), move || -> String {
            Value::Object(s.lock().scope.own.clone()).to_string()
        })?,
    )?;
    let s = state.clone();
    g.set(
        "__acts_ecode",
        Function::new(ctx.clone(), move || -> String {
            s.lock().scope.ecode().map_or("null".to_owned(), |e| {
                Value::String(e.to_owned()).to_string()
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
        Function::new(ctx.clone(), move |name: String, value: String| {
            if name.starts_with("__") || name == "WORK_DIR" {
                return; // read-only keys are silently kept, as in the reference
            }
            let value = parse_json(&value);
            let mut st = s.lock();
            st.scope.env.insert(name.clone(), value.clone());
            st.effects.push(ScriptEffect::SetEnv { name, value });
        })?,
    )?;
    g.set("os", std::env::consts::OS)?;
    ctx.eval_with_options::<(), _>(PRELUDE, options())
}

fn options() -> EvalOptions {
    let mut o = EvalOptions::default();
    o.global = true;
    o.strict = false;
    o.promise = false;
    o
}

impl Worker {
    fn eval(
        &mut self,
        kind: ScriptKind,
        source: &str,
        scope: ScriptScope,
        time: Duration,
    ) -> Result<ScriptOutput, ScriptError> {
        let globals = scope.globals();
        {
            let mut st = self.state.lock();
            st.scope = scope;
            st.effects.clear();
        }
        *self.deadline.lock() = Some(Instant::now() + time);
        let cached = &mut self.cached;
        let deadline = &self.deadline;
        let result = self.ctx.with(|ctx| -> Result<Value, ScriptError> {
            let g = ctx.globals();
            let fail = |e: CaughtError<'_>| classify(e, source, time, deadline);
            for (k, v) in &globals {
                let mut js = ctx.json_parse(v.to_string()).catch(&ctx).map_err(fail)?;
                if k.starts_with('$') {
                    // Sealed snapshot data: read-only for scripts.
                    let freeze: rquickjs::Function =
                        g.get("__acts_freeze").catch(&ctx).map_err(fail)?;
                    js = freeze.call((js,)).catch(&ctx).map_err(fail)?;
                }
                g.set(k.as_str(), js).catch(&ctx).map_err(fail)?;
            }
            let result = (|| {
                let func = compiled(&ctx, cached, kind, source).map_err(fail)?;
                let value: rquickjs::Value = func.call(()).catch(&ctx).map_err(fail)?;
                let text = ctx.json_stringify(value).catch(&ctx).map_err(fail)?;
                Ok(match text {
                    Some(t) => parse_json(
                        &t.to_string()
                            .map_err(|e| ScriptError::Setup(e.to_string()))?,
                    ),
                    None => Value::Null,
                })
            })();
            // Task variables do not leak into the next evaluation.
            for k in globals.keys() {
                let _ = g.remove(k.as_str());
            }
            result
        });
        *self.deadline.lock() = None;
        let effects = std::mem::take(&mut self.state.lock().effects);
        result.map(|value| ScriptOutput { value, effects })
    }
}

/// The cached compiled form of `source`, compiling it on first use.
fn compiled<'js>(
    ctx: &Ctx<'js>,
    cached: &mut usize,
    kind: ScriptKind,
    source: &str,
) -> Result<Function<'js>, CaughtError<'js>> {
    let key = match kind {
        ScriptKind::Expression => format!("e:{source}"),
        ScriptKind::Code => format!("c:{source}"),
    };
    let mut cache: Object = ctx.globals().get("__acts_cache").catch(ctx)?;
    if let Some(func) = cache.get::<_, Option<Function>>(key.as_str()).catch(ctx)? {
        return Ok(func);
    }
    let func: Function = match kind {
        ScriptKind::Code => ctx
            .eval_with_options(format!("(function () {{\n{source}\n}})"), options())
            .catch(ctx)?,
        ScriptKind::Expression => {
            // A pure expression compiles to a function returning it; other
            // statements are evaluated as a block whose completion value is
            // the result (through the original `eval`, kept hidden).
            let as_expression = format!("(function () {{ return (\n{source}\n); }})");
            match ctx.eval_with_options(as_expression, options()).catch(ctx) {
                Ok(f) => f,
                Err(_) => {
                    let block = Value::String(format!("{{\n{source}\n}}")).to_string();
                    ctx.eval_with_options(
                        format!("(function () {{ return __acts_eval({block}); }})"),
                        options(),
                    )
                    .catch(ctx)?
                }
            }
        }
    };
    if *cached >= CACHE_CAP {
        cache = Object::new(ctx.clone()).catch(ctx)?;
        ctx.globals()
            .set("__acts_cache", cache.clone())
            .catch(ctx)?;
        *cached = 0;
    }
    cache.set(key.as_str(), func.clone()).catch(ctx)?;
    *cached += 1;
    Ok(func)
}

/// Turns a caught JavaScript failure into a [`ScriptError`].
fn classify(
    e: CaughtError<'_>,
    source: &str,
    time: Duration,
    deadline: &Mutex<Option<Instant>>,
) -> ScriptError {
    let timed_out = deadline.lock().is_some_and(|d| Instant::now() >= d);
    let message = match &e {
        CaughtError::Exception(ex) => ex.message().unwrap_or_else(|| ex.to_string()),
        CaughtError::Value(v) => v
            .as_string()
            .and_then(|s| s.to_string().ok())
            .unwrap_or_else(|| format!("{v:?}")),
        CaughtError::Error(err) => err.to_string(),
    };
    let short = source.chars().take(80).collect::<String>();
    if timed_out || message.contains("interrupted") {
        return ScriptError::Timeout {
            script: short,
            limit: time,
        };
    }
    // Out of memory, QuickJS may fail to allocate even its error object and
    // throw a bare `null` (a script throwing `null` itself, which carries
    // no message either, is reported the same way).
    let bare_null = matches!(&e, CaughtError::Value(v) if v.is_null());
    if message.contains("out of memory")
        || bare_null
        || matches!(&e, CaughtError::Error(rquickjs::Error::Allocation))
    {
        // The runtime is discarded by the caller, not collected here: this
        // runs inside `Context::with`, which holds the runtime's lock.
        return ScriptError::OutOfMemory { script: short };
    }
    ScriptError::Exception {
        message,
        script: short,
    }
}
