//! The engine's task spans as OpenTelemetry spans (see the module docs).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use acts::{SpanSink, TaskSpan, TaskState, TraceContext};
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};

/// Hands task spans to the batch processor (which never blocks: a full
/// queue drops).
pub(super) struct TaskSpans {
    processor: Arc<BatchSpanProcessor>,
    scope: InstrumentationScope,
}

impl TaskSpans {
    pub(super) fn new(processor: Arc<BatchSpanProcessor>) -> Self {
        Self {
            processor,
            scope: InstrumentationScope::builder("acts")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }
}

impl SpanSink for TaskSpans {
    fn export(&self, spans: Vec<TaskSpan>) {
        for s in spans {
            self.processor.on_end(span_data(s, &self.scope));
        }
    }
}

/// `c` as OpenTelemetry's span context (`remote`: a caller's).
pub(super) fn span_context(c: &TraceContext, remote: bool) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(c.trace_id),
        SpanId::from_bytes(c.span_id),
        if c.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        },
        remote,
        TraceState::default(),
    )
}

/// The most bytes of an error message a span carries (the processor's
/// queue is bounded in spans; with every text clipped, in bytes too).
const MAX_MESSAGE_BYTES: usize = 1024;
/// The most bytes of a name or an id a span carries.
const MAX_NAME_BYTES: usize = 256;

/// `s` cut to at most `max` bytes, on a character boundary.
fn clip(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

fn at(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// One task's span: named `<kind> <node name>`, its attributes under
/// `acts.*`, failed tasks with an error status.
fn span_data(s: TaskSpan, scope: &InstrumentationScope) -> SpanData {
    let name = |v: String| clip(v, MAX_NAME_BYTES);
    let mut attributes = vec![
        KeyValue::new("acts.pid", name(s.pid)),
        KeyValue::new("acts.tid", name(s.tid)),
        KeyValue::new("acts.node.id", name(s.nid)),
        KeyValue::new("acts.node.kind", s.kind.as_str()),
        KeyValue::new("acts.model.id", name(s.model_id)),
        KeyValue::new("acts.model.version", i64::from(s.model_version)),
        KeyValue::new("acts.state", s.state.to_string()),
    ];
    if let Some(uses) = s.uses {
        attributes.push(KeyValue::new("acts.package", name(uses)));
    }
    let status = match (&s.error, s.state) {
        (Some(e), _) => {
            if !e.ecode.is_empty() {
                attributes.push(KeyValue::new("acts.error.code", name(e.ecode.clone())));
            }
            if s.state == TaskState::Error {
                Status::error(clip(e.message.clone(), MAX_MESSAGE_BYTES))
            } else {
                Status::Unset
            }
        }
        (None, TaskState::Error) => Status::error("failed"),
        (None, TaskState::Completed) => Status::Ok,
        (None, _) => Status::Unset,
    };
    let mut links = SpanLinks::default();
    links.links = s
        .answered_by
        .map(|c| {
            Link::new(
                span_context(&c, true),
                vec![KeyValue::new("acts.link", "answered_by")],
                0,
            )
        })
        .into_iter()
        .collect();
    let own = TraceContext {
        trace_id: s.trace_id,
        span_id: s.span_id,
        sampled: true,
    };
    SpanData {
        span_context: span_context(&own, false),
        parent_span_id: s.parent_span_id.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: s.parent_is_remote,
        span_kind: SpanKind::Internal,
        name: Cow::Owned(format!("{} {}", s.kind.as_str(), name(s.name))),
        start_time: at(s.start_ms),
        end_time: at(s.end_ms),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links,
        status,
        instrumentation_scope: scope.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn texts_are_clipped_on_a_character_boundary() {
        assert_eq!(clip("abc".into(), 8), "abc");
        assert_eq!(clip("abcdef".into(), 4), "abcd");
        // 'é' is two bytes: a cut inside it backs off to before it.
        assert_eq!(clip("aé".into(), 2), "a");
    }
}
