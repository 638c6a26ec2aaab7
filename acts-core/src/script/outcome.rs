//! What a script's run comes to: its result as JSON (a promise settled
//! first, a number that is not finite refused as in the reference), and
//! its failures as [`ScriptError`]s.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, CaughtError, Ctx};
use serde_json::Value;

use super::error::ScriptError;
use super::helpers;

/// A script's result as JSON: a promise is settled first; failures become
/// [`ScriptError`]s.
pub(super) fn finish<'js>(
    ctx: &Ctx<'js>,
    value: Result<rquickjs::Value<'js>, CaughtError<'js>>,
    source: &str,
    time: Duration,
    deadline: &Mutex<Option<Instant>>,
) -> Result<Value, ScriptError> {
    let fail = |e: CaughtError<'_>| classify(e, source, time, deadline);
    let value = value.map_err(fail)?;
    let value =
        settle(ctx, value, deadline).map_err(|e| promise_error(e, source, time, deadline))?;
    // The prelude's `text`: a number that is not finite fails the script
    // as in the reference (never a silent null), a BigInt is exact, a key
    // whose value is undefined is kept as null (see crossing.rs).
    let text = helpers::result_text(ctx, value)
        .catch(ctx)
        .map_err(|e| match fail(e) {
            ScriptError::Exception { message, script } => ScriptError::Exception {
                message: format!("its result: {message}"),
                script,
            },
            other => other,
        })?;
    match text {
        // A result that cannot be read back (nested too deep, a BigInt
        // beyond 64 bits) is an error, never a silent null (found by the
        // fuzzer).
        Some(t) => helpers::parse_json(&t).map_err(|message| ScriptError::Exception {
            message: format!("its result: {message}"),
            script: source.to_owned(),
        }),
        None => Ok(Value::Null),
    }
}

/// Settles a promise result by running the context's jobs until it is
/// fulfilled or rejected; other values pass through.
fn settle<'js>(
    ctx: &Ctx<'js>,
    value: rquickjs::Value<'js>,
    deadline: &Mutex<Option<Instant>>,
) -> Result<rquickjs::Value<'js>, PromiseFailure<'js>> {
    let Some(promise) = value.as_promise().cloned() else {
        return Ok(value);
    };
    loop {
        match promise.state() {
            PromiseState::Resolved => {
                return promise
                    .result::<rquickjs::Value>()
                    .unwrap_or(Ok(rquickjs::Value::new_null(ctx.clone())))
                    .catch(ctx)
                    .map_err(PromiseFailure::Rejected);
            }
            PromiseState::Rejected => {
                let err = promise
                    .result::<rquickjs::Value>()
                    .unwrap_or(Err(rquickjs::Error::Exception))
                    .catch(ctx);
                return Err(PromiseFailure::Rejected(match err {
                    Err(e) => e,
                    Ok(_) => CaughtError::Error(rquickjs::Error::Exception),
                }));
            }
            PromiseState::Pending => {
                let expired = deadline.lock().is_some_and(|d| Instant::now() >= d);
                if expired || !ctx.execute_pending_job() {
                    return Err(PromiseFailure::Unsettled);
                }
            }
        }
    }
}

/// The error for a failed promise result (a limit hit while settling it is
/// reported as that limit).
fn promise_error(
    e: PromiseFailure<'_>,
    source: &str,
    time: Duration,
    deadline: &Mutex<Option<Instant>>,
) -> ScriptError {
    let short = short(source);
    match e {
        PromiseFailure::Rejected(e) => match classify(e, source, time, deadline) {
            ScriptError::Exception { message, script } => ScriptError::Rejected { message, script },
            other => other,
        },
        PromiseFailure::Unsettled => {
            if deadline.lock().is_some_and(|d| Instant::now() >= d) {
                ScriptError::Timeout {
                    script: short,
                    limit: time,
                }
            } else {
                ScriptError::Unsettled { script: short }
            }
        }
    }
}

/// The first 80 characters of a script, for error messages.
pub(super) fn short(source: &str) -> String {
    source.chars().take(80).collect()
}

/// Turns a caught JavaScript failure into a [`ScriptError`].
pub(super) fn classify(
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
    let short = short(source);
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

/// Why a promise result failed.
enum PromiseFailure<'js> {
    Rejected(CaughtError<'js>),
    Unsettled,
}
