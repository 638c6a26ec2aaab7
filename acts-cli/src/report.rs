//! What a run reports about each process ([`Report`], [`ReportError`]),
//! how a message is kept in it, and how it is printed.

use std::time::Instant;

use acts::{Message, MessageType, Vars};
use serde_json::{Value, json};

/// The outcome of one process.
#[derive(Debug, Clone)]
pub struct Report {
    /// Process id (empty when it never started).
    pub pid: String,
    /// Model id.
    pub model: String,
    /// Final state: a process state, or `invalid`, `rejected`, `stalled`.
    pub state: String,
    /// The process outputs (without `pid`: it has its own field).
    pub outputs: Vars,
    /// Why it failed, stalled or was refused.
    pub error: Option<ReportError>,
    /// The messages of it (and its subflow children), in order, each
    /// `{type, nid, tid, key, name, uses, state, time}`.
    pub messages: Vec<Value>,
    /// How long it ran on the engine's clock (ms; virtual in scripted
    /// runs).
    pub engine_ms: i64,
    /// The answers the engine refused, in order (the run went on with the
    /// next answer, as a client of acts 0.25 does).
    pub refused: Vec<RefusedAnswer>,
    /// Answers marked `refused: true` that the engine took.
    pub taken_but_expected_refused: Vec<String>,
}

/// An answer the engine refused.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedAnswer {
    /// The act it answered (its key, else its node id).
    pub act: String,
    /// The answer's action.
    pub action: String,
    /// Why the engine refused it.
    pub message: String,
    /// Whether the answer said it would be (`refused: true`).
    pub expected: bool,
}

/// Why a run did not complete.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportError {
    /// The error code alone (`""` when there is none).
    pub ecode: String,
    /// What happened.
    pub message: String,
}

impl ReportError {
    /// An error without a code.
    pub fn uncoded(message: impl Into<String>) -> Self {
        Self {
            ecode: String::new(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ecode.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.ecode, self.message)
        }
    }
}

impl Report {
    /// A run that never started: `state` is `invalid` or `rejected`.
    pub fn refused(state: &str, model: &str, error: String) -> Self {
        Self {
            pid: String::new(),
            model: model.to_owned(),
            state: state.to_owned(),
            outputs: Vars::new(),
            error: Some(ReportError::uncoded(error)),
            messages: Vec::new(),
            engine_ms: 0,
            refused: Vec::new(),
            taken_but_expected_refused: Vec::new(),
        }
    }

    /// The `--json` form.
    pub fn to_json(&self) -> Value {
        json!({
            "pid": self.pid,
            "model": self.model,
            "state": self.state,
            "outputs": self.outputs,
            "error": self.error.as_ref().map(|e| json!({"ecode": e.ecode, "message": e.message})),
            "messages": self.messages,
            "refused": self.refused.iter().map(|r| json!({
                "act": r.act, "action": r.action, "message": r.message, "expected": r.expected,
            })).collect::<Vec<_>>(),
        })
    }

    /// The exit code: 0 completed, 1 error/aborted/stalled, 2 refused.
    pub fn exit_code(&self) -> u8 {
        match self.state.as_str() {
            "invalid" | "rejected" => 2,
            "completed" | "submitted" => 0,
            _ => 1,
        }
    }
}

/// A message as the report keeps it: `{type, nid, tid, key, name, uses,
/// state, time}`; `key` is an act's `params.key` (`""` without one) and
/// the node id for the others (the model id for the workflow).
pub(crate) fn report_message(m: &Message) -> Value {
    let key = match m.r#type {
        MessageType::Act => m.key.clone().unwrap_or_default(),
        MessageType::Workflow => m.model_id.clone(),
        _ => m.nid.clone(),
    };
    json!({
        "type": m.r#type,
        "nid": m.nid,
        "tid": m.tid,
        "key": key,
        "name": m.name,
        "uses": m.uses.as_deref().unwrap_or_default(),
        "state": m.state,
        "time": m.time,
    })
}

/// A duration in ms as a person reads it: `4ms`, `2.5s`, `1h`, `1h 30m`,
/// `2d 3h` (the two largest units).
pub fn human_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        let tenths = ms / 100;
        return if tenths % 10 == 0 {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        };
    }
    let secs = ms / 1_000;
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let Some(first) = units.iter().position(|(n, _)| secs >= *n) else {
        return format!("{secs}s");
    };
    let (n1, u1) = units[first];
    let mut out = format!("{}{u1}", secs / n1);
    if let Some((n2, u2)) = units.get(first + 1) {
        let rest = (secs % n1) / n2;
        if rest > 0 {
            out.push_str(&format!(" {rest}{u2}"));
        }
    }
    out
}

/// Prints `r` as JSON or text; a run on a virtual clock says how long it
/// took there and in real time.
pub fn print_report(r: &Report, json: bool, virtual_clock: bool, started: Instant) {
    if json {
        println!("{}", r.to_json());
        return;
    }
    if r.pid.is_empty() {
        // Never started (the model is invalid, the start refused): no
        // outputs to show; the reason is on stderr.
        println!("model {} {}", r.model, r.state);
        return;
    }
    let real = human_duration(started.elapsed().as_millis() as i64);
    let took = if virtual_clock {
        format!(
            "after {} on the virtual clock ({real} real)",
            human_duration(r.engine_ms)
        )
    } else {
        format!("in {real}")
    };
    println!("process {} ({}) {} {took}", r.pid, r.model, r.state);
    match &r.error {
        Some(e) if r.exit_code() != 2 => println!("error: {e}"),
        _ => {}
    }
    let outputs =
        serde_json::to_string_pretty(&Value::Object(r.outputs.clone())).unwrap_or_default();
    println!("outputs: {outputs}");
}

#[cfg(test)]
mod tests {
    use super::human_duration;

    #[test]
    fn durations_read_as_a_person_reads_them() {
        assert_eq!(human_duration(4), "4ms");
        assert_eq!(human_duration(2_500), "2.5s");
        assert_eq!(human_duration(3_000), "3s");
        assert_eq!(human_duration(3_600_000), "1h");
        assert_eq!(human_duration(5_400_000), "1h 30m");
        assert_eq!(human_duration(2 * 86_400_000 + 3 * 3_600_000 + 5), "2d 3h");
        assert_eq!(human_duration(312_000), "5m 12s");
        assert_eq!(human_duration(-5), "0ms");
    }
}
