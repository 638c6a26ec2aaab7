//! [`ScriptEngine`]: JavaScript (QuickJS) evaluation over a pool of
//! runtimes, each with a locked-down realm for expressions and code (a
//! fresh context for statement lists), with time and memory limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rquickjs::context::EvalOptions;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Runtime};
use serde_json::Value;

use super::crossing;
use super::error::ScriptError;
use super::helpers::{self, EvalState};
use super::kind::ScriptKind;
use super::outcome::{classify, finish, short};
use super::realm::{Realm, RealmRun};
use super::scope::{ScriptEffect, ScriptScope};

/// Limits every evaluation runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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

/// The outcome of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptOutput {
    /// The result as JSON (`undefined` becomes `null`).
    pub value: Value,
    /// The writes the script asked for, in order.
    pub effects: Vec<ScriptEffect>,
}

/// One QuickJS runtime with its limits set, its realm (built on first
/// use, dropped when an evaluation spoiled it) and the state its helpers
/// read. Expressions and code run in the realm; statement lists (and
/// scripts that do not compile) in a fresh context each.
struct Worker {
    // Dropped before the runtime it lives in.
    realm: Option<Realm>,
    rt: Runtime,
    state: Arc<Mutex<EvalState>>,
    deadline: Arc<Mutex<Option<Instant>>>,
}

/// Evaluates workflow JavaScript. Cheap to share (`Arc`), safe to call from
/// many threads: each call borrows a runtime from a pool, so evaluations run
/// in parallel and a runtime is reused.
/// Nothing one evaluation does to its JavaScript environment survives it:
/// expressions and code run in a locked-down realm (see `realm.rs`),
/// statement lists in a fresh context.
///
/// A script that runs past [`ScriptLimits::time`] or allocates past
/// [`ScriptLimits::memory_bytes`] fails with [`ScriptError::Timeout`] or
/// [`ScriptError::OutOfMemory`]; its runtime is discarded, never reused.
/// A result that is a promise is settled before the evaluation ends: a
/// rejected promise fails with [`ScriptError::Rejected`], one that cannot
/// settle with [`ScriptError::Unsettled`].
pub struct ScriptEngine {
    limits: ScriptLimits,
    stats: StatsCell,
    pool: Mutex<Vec<Worker>>,
    max_idle: usize,
    /// Expressions already warned about (bounded: forgotten when full).
    warned: Mutex<std::collections::HashSet<String>>,
}

/// What a [`ScriptEngine`]'s evaluations came to since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptStats {
    /// Evaluations (expressions, conditions, code, statement lists).
    pub evaluations: u64,
    /// Evaluations stopped at the time limit.
    pub timeouts: u64,
    /// Evaluations stopped at the memory limit.
    pub out_of_memory: u64,
    /// Evaluations that failed otherwise (a thrown error, a syntax error, a
    /// rejected promise, a result of the wrong type ...).
    pub failures: u64,
    /// JavaScript runtimes built (the pool reuses them: a runtime is
    /// dropped only after a limit or an unsettled promise).
    pub runtimes: u64,
}

#[derive(Default)]
struct StatsCell {
    runtimes: AtomicU64,
    evaluations: AtomicU64,
    timeouts: AtomicU64,
    out_of_memory: AtomicU64,
    failures: AtomicU64,
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

impl ScriptEngine {
    /// An engine whose evaluations run under `limits`.
    pub fn new(limits: ScriptLimits) -> Self {
        Self {
            limits,
            pool: Mutex::new(Vec::new()),
            max_idle: std::thread::available_parallelism().map_or(4, |n| n.get() * 2),
            warned: Mutex::default(),
            stats: StatsCell::default(),
        }
    }

    /// What the evaluations so far came to.
    pub fn stats(&self) -> ScriptStats {
        let s = &self.stats;
        ScriptStats {
            evaluations: s.evaluations.load(Relaxed),
            timeouts: s.timeouts.load(Relaxed),
            out_of_memory: s.out_of_memory.load(Relaxed),
            failures: s.failures.load(Relaxed),
            runtimes: s.runtimes.load(Relaxed),
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

    /// Whether this is the first warning about `expression` (so a failing
    /// `${{ }}` evaluated for every process is logged once, not per run).
    pub(crate) fn first_warning(&self, expression: &str) -> bool {
        const REMEMBERED: usize = 4096;
        let mut warned = self.warned.lock();
        if warned.len() >= REMEMBERED {
            warned.clear();
        }
        warned.insert(expression.to_owned())
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
        let time = self.limits.time;
        let result = self.with_worker(|w| w.eval(kind, source, scope, time));
        let s = &self.stats;
        s.evaluations.fetch_add(1, Relaxed);
        match &result {
            Ok(_) => {}
            Err(ScriptError::Timeout { .. }) => {
                s.timeouts.fetch_add(1, Relaxed);
            }
            Err(ScriptError::OutOfMemory { .. }) => {
                s.out_of_memory.fetch_add(1, Relaxed);
            }
            Err(_) => {
                s.failures.fetch_add(1, Relaxed);
            }
        }
        result
    }

    /// Runs `f` on a runtime of the pool (a new one if none is idle) and
    /// gives it back — unless it hit a limit or still holds jobs of the
    /// finished work (a promise chain that never settled): then it is
    /// dropped.
    fn with_worker<T>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T, ScriptError>,
    ) -> Result<T, ScriptError> {
        let worker = self.pool.lock().pop();
        let mut worker = match worker {
            Some(w) => w,
            None => self.new_worker()?,
        };
        let result = f(&mut worker);
        let reusable = !matches!(
            result,
            Err(ScriptError::Timeout { .. }
                | ScriptError::OutOfMemory { .. }
                | ScriptError::Unsettled { .. })
        ) && !worker.rt.is_job_pending();
        if reusable {
            let mut pool = self.pool.lock();
            if pool.len() < self.max_idle {
                pool.push(worker);
            }
        }
        result
    }

    /// Whether `source` is valid JavaScript (statements or an expression;
    /// a `return` is allowed, as in `acts.transform.code`), without running
    /// any of it: the parser's message when it is not.
    pub fn check_syntax(&self, source: &str) -> Result<(), ScriptError> {
        let time = self.limits.time;
        self.with_worker(|w| w.check_syntax(source, time))
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
        self.stats.runtimes.fetch_add(1, Relaxed);
        rt.set_memory_limit(self.limits.memory_bytes);
        rt.set_max_stack_size(self.limits.stack_bytes);
        let deadline: Arc<Mutex<Option<Instant>>> = Arc::default();
        let watched = deadline.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            watched.lock().is_some_and(|d| Instant::now() >= d)
        })));
        Ok(Worker {
            realm: None,
            rt,
            state: Arc::default(),
            deadline,
        })
    }
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
        let setup = |e: rquickjs::Error| ScriptError::Setup(e.to_string());
        self.ensure_realm()?;
        let globals = scope.globals();
        // Measured without recursion: a value nested deeper than data can
        // be is refused before it is serialized (found by the fuzzer: one
        // thousands of levels deep overflowed the stack).
        if let Some((name, _)) = globals
            .iter()
            .find(|(_, v)| helpers::depth(v) > helpers::MAX_DEPTH)
        {
            return Err(ScriptError::Exception {
                message: format!(
                    "variable '{name}' is nested more than {} levels deep",
                    helpers::MAX_DEPTH
                ),
                script: source.to_owned(),
            });
        }
        let vars = crossing::to_script(&Value::Object(globals));
        // Step globals are proxies over this evaluation's state: made in a
        // context of its own (the realm's globals stay as locked down).
        let steps: Vec<String> = scope.steps.iter().map(|s| s.id.clone()).collect();
        *self.state.lock() = EvalState {
            scope,
            effects: Vec::new(),
        };
        *self.deadline.lock() = Some(Instant::now() + time);
        let deadline = &self.deadline;
        let ran = match self.realm.as_mut() {
            _ if !steps.is_empty() => Ok(RealmRun::Fresh),
            Some(realm) => realm
                .run(kind, source, &vars, |ctx, value| {
                    finish(ctx, value, source, time, deadline)
                })
                .map_err(setup),
            None => Ok(RealmRun::Fresh),
        };
        let result = match ran {
            Ok(RealmRun::Ran { result, clean }) => {
                if !clean {
                    // The script left something behind that cannot be
                    // undone: the next evaluation gets a new realm.
                    self.realm = None;
                }
                result
            }
            Ok(RealmRun::Fresh) => self.eval_fresh(kind, source, &vars, &steps, time),
            Err(e) => {
                self.realm = None;
                Err(e)
            }
        };
        *self.deadline.lock() = None;
        let effects = std::mem::take(&mut *self.state.lock()).effects;
        result.map(|value| ScriptOutput { value, effects })
    }

    /// Builds the realm if there is none (first use, or the last one was
    /// spoiled).
    fn ensure_realm(&mut self) -> Result<(), ScriptError> {
        if self.realm.is_none() {
            let realm =
                Realm::new(&self.rt, &self.state).map_err(|e| ScriptError::Setup(e.to_string()))?;
            self.realm = Some(realm);
        }
        Ok(())
    }

    /// Whether `source` parses (see [`ScriptEngine::check_syntax`]).
    fn check_syntax(&mut self, source: &str, time: Duration) -> Result<(), ScriptError> {
        self.ensure_realm()?;
        *self.deadline.lock() = Some(Instant::now() + time);
        let checked = match self.realm.as_mut() {
            Some(realm) => realm.check_syntax(source),
            None => Ok(Ok(())),
        };
        *self.deadline.lock() = None;
        match checked {
            Ok(parsed) => parsed.map_err(|message| ScriptError::Syntax {
                message,
                script: short(source),
            }),
            Err(e) => {
                self.realm = None;
                Err(ScriptError::Setup(e.to_string()))
            }
        }
    }

    /// Runs `source` in a context of its own (pristine globals and
    /// intrinsics, the helpers it names, a global for each of `steps` no
    /// variable has taken), dropped after.
    fn eval_fresh(
        &self,
        kind: ScriptKind,
        source: &str,
        vars: &str,
        steps: &[String],
        time: Duration,
    ) -> Result<Value, ScriptError> {
        let setup = |e: rquickjs::Error| ScriptError::Setup(e.to_string());
        let ctx = Context::full(&self.rt).map_err(setup)?;
        let deadline = &self.deadline;
        ctx.with(|ctx| -> Result<Value, ScriptError> {
            let fail = |e: CaughtError<'_>| classify(e, source, time, deadline);
            let freeze = helpers::install(
                &ctx,
                &self.state,
                options(),
                helpers::prelude_for(source, !steps.is_empty()),
            )
            .catch(&ctx)
            .map_err(fail)?;
            let g = ctx.globals();
            let vars: rquickjs::Object = helpers::parse_vars(&ctx, vars)
                .catch(&ctx)
                .map_err(fail)?
                .into_object()
                .ok_or_else(|| ScriptError::Setup("the variables are not an object".into()))?;
            for k in vars.keys::<String>() {
                let k = k.catch(&ctx).map_err(fail)?;
                let mut js: rquickjs::Value = vars.get(k.as_str()).catch(&ctx).map_err(fail)?;
                if k.starts_with('$') {
                    // Sealed data: read-only for scripts.
                    js = freeze.call((js,)).catch(&ctx).map_err(fail)?;
                }
                g.set(k.as_str(), js).catch(&ctx).map_err(fail)?;
            }
            if !steps.is_empty() {
                let make: Function = g.get("__acts_step").catch(&ctx).map_err(fail)?;
                g.remove("__acts_step").catch(&ctx).map_err(fail)?;
                for id in steps {
                    // A task variable of the same name wins, as in the
                    // reference (variables are installed last there).
                    if !vars.contains_key(id.as_str()).catch(&ctx).map_err(fail)? {
                        let proxy: rquickjs::Value =
                            make.call((id.as_str(),)).catch(&ctx).map_err(fail)?;
                        g.set(id.as_str(), proxy).catch(&ctx).map_err(fail)?;
                    }
                }
            }
            let value = run(&ctx, kind, source);
            finish(&ctx, value, source, time, deadline)
        })
    }
}

/// Runs `source` in `ctx`: code and pure expressions as a function whose
/// result is returned; other expression scripts as a global statement list
/// whose completion value is the result.
fn run<'js>(
    ctx: &Ctx<'js>,
    kind: ScriptKind,
    source: &str,
) -> Result<rquickjs::Value<'js>, CaughtError<'js>> {
    let func: Function = match kind {
        ScriptKind::Code => ctx
            .eval_with_options(format!("(function () {{\n{source}\n}})"), options())
            .catch(ctx)?,
        ScriptKind::Expression => {
            let as_expression = format!("(function () {{ return (\n{source}\n); }})");
            match ctx.eval_with_options(as_expression, options()).catch(ctx) {
                Ok(f) => f,
                // Not an expression: statements, evaluated as a block so
                // their declarations stay local.
                Err(_) => {
                    return ctx
                        .eval_with_options(format!("{{\n{source}\n}}"), options())
                        .catch(ctx);
                }
            }
        }
    };
    func.call(()).catch(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_expression_is_warned_about_once() {
        let e = ScriptEngine::default();
        assert!(e.first_warning("nobody_set_this"));
        assert!(!e.first_warning("nobody_set_this"));
        assert!(e.first_warning("another"));
    }
}
