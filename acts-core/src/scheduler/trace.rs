//! The trace of a process: one span per task, in W3C trace-context terms,
//! for an exporter outside the engine (the server's OpenTelemetry export).
//!
//! A process's trace context lives in its data, not beside it: the private
//! root variable [`TRACEPARENT_KEY`] holds the `traceparent` of whoever
//! started it (a caller's trace continues into the process), and the same
//! key in an act's data holds the `traceparent` of the request that
//! answered it (a link). Stored with the tasks, both survive a restart.
//! Without one, the trace id is derived from the pid. Span ids are derived
//! from the pid and the task id, so a parent's id is known without being
//! stored and stays the same after a restart or on another node.
//!
//! A subflow child's root carries its act's context, so a child process
//! is part of its parent's trace.

use sha2::{Digest, Sha256};

use super::{MessageType, TaskError, TaskState};

/// The private variable holding a `traceparent` (the process's in the root
/// data, an answering request's in an act's data).
pub const TRACEPARENT_KEY: &str = "__traceparent";

/// A W3C trace context: which trace, which span in it, sampled or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The span id (never all zero).
    pub span_id: [u8; 8],
    /// The caller's sampled flag.
    pub sampled: bool,
}

impl TraceContext {
    /// Reads a `traceparent` header value (version 00 and later versions
    /// read as 00 does); `None` when it is not one (a malformed header is
    /// ignored, as the W3C specification asks).
    pub fn parse(traceparent: &str) -> Option<Self> {
        let s = traceparent.trim();
        let mut parts = s.split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |x: &str, n: usize| x.len() == n && x.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex(version, 2)
            || version == "ff"
            || !hex(trace, 32)
            || !hex(span, 16)
            || !hex(flags, 2)
        {
            return None;
        }
        // Version 00 has exactly four fields; later ones may add more.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        decode_hex(trace, &mut trace_id)?;
        decode_hex(span, &mut span_id)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The `traceparent` header value.
    pub fn to_traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            encode_hex(&self.trace_id),
            encode_hex(&self.span_id),
            u8::from(self.sampled)
        )
    }
}

fn decode_hex(s: &str, out: &mut [u8]) -> Option<()> {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(())
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The trace id of a process started without a trace context.
pub fn derived_trace_id(pid: &str) -> [u8; 16] {
    let d = Sha256::new()
        .chain_update(b"acts-trace\0")
        .chain_update(pid)
        .finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// The span id of task `tid` of process `pid` (the root task's is the
/// process's span).
pub fn task_span_id(pid: &str, tid: &str) -> [u8; 8] {
    let d = Sha256::new()
        .chain_update(b"acts-span\0")
        .chain_update(pid)
        .chain_update(b"\0")
        .chain_update(tid)
        .finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&d[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

/// One finished task as a span.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskSpan {
    /// The process's trace.
    pub trace_id: [u8; 16],
    /// This task's span.
    pub span_id: [u8; 8],
    /// The parent span: the parent task's, for the root the caller's (or
    /// the subflow act's); `None` for a root without a caller.
    pub parent_span_id: Option<[u8; 8]>,
    /// Whether the parent is a caller's span (outside the engine).
    pub parent_is_remote: bool,
    /// `workflow`, `step`, `branch` or `act`.
    pub kind: MessageType,
    /// The node's name (its id when it has none).
    pub name: String,
    /// Process id.
    pub pid: String,
    /// Task id.
    pub tid: String,
    /// Node id.
    pub nid: String,
    /// The model id.
    pub model_id: String,
    /// The model version the process runs (0: unknown).
    pub model_version: u32,
    /// The package of an act or a `uses` step.
    pub uses: Option<String>,
    /// How it ended.
    pub state: TaskState,
    /// Why it failed, if it did.
    pub error: Option<TaskError>,
    /// When it started (ms since the Unix epoch, engine clock).
    pub start_ms: i64,
    /// When it ended (ms since the Unix epoch, engine clock).
    pub end_ms: i64,
    /// The request that answered it (an act a client completed), if that
    /// request carried a trace context.
    pub answered_by: Option<TraceContext>,
}

/// Where the engine hands finished tasks' spans, after their transition
/// is durable (a span is never reported for work that was not stored).
/// The spans of a process started in an unsampled trace are not built.
pub trait SpanSink: Send + Sync + 'static {
    /// The spans of one committed transition, in the order the tasks ended.
    fn export(&self, spans: Vec<TaskSpan>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_malformed_ones_are_ignored() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = TraceContext::parse(tp).expect("valid");
        assert_eq!(c.trace_id[0], 0x4b);
        assert_eq!(c.span_id[7], 0xb7);
        assert!(c.sampled);
        assert_eq!(c.to_traceparent(), tp);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0é736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
        // A later version may carry more fields.
        assert!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
                .is_some_and(|c| !c.sampled)
        );
    }

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        assert_eq!(derived_trace_id("p1"), derived_trace_id("p1"));
        assert_ne!(derived_trace_id("p1"), derived_trace_id("p2"));
        assert_eq!(task_span_id("p", "t"), task_span_id("p", "t"));
        assert_ne!(task_span_id("p", "t1"), task_span_id("p", "t2"));
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(task_span_id("ab", "c"), task_span_id("a", "bc"));
    }
}
