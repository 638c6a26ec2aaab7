//! The protocol over an HTTP front instead of one engine (a cluster
//! node's front, which routes every call to the partition it concerns):
//! `Send` is `POST /api/v1/actions/{name}` through the front, `OnMessage`
//! its message stream (`GET /api/v1/messages`, or the durable channel's
//! `/api/v1/channels/{key}/stream`) read back from its Server-Sent
//! Events. The front authenticates the caller's bearer token as the HTTP
//! API does; only the token and the trace context are passed on (never a
//! header of the cluster's own).
//!
//! May use: the facade `acts`, axum, tonic, the module's shapes and keys.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, header};
use axum::response::IntoResponse;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tonic::Status;
use tower::ServiceExt;

use super::proto::Message;
use crate::actions::{ack_id_from, message_shape};

/// The headers of a gRPC call the front gets.
const PASSED: [&str; 3] = ["authorization", "traceparent", "tracestate"];

/// Most bytes of an action's answer (what the server encodes at most).
pub(crate) const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Most bytes of one event of the front's stream.
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// An HTTP front serving `/api/v1`.
#[derive(Clone)]
pub(crate) struct Front(pub(crate) Router);

impl Front {
    /// Sends `method path` with `body` (JSON) and the caller's passed
    /// headers through the front.
    async fn call(
        &self,
        method: Method,
        path: &str,
        from: &HeaderMap,
        body: Option<Vec<u8>>,
    ) -> axum::response::Response {
        let mut req = Request::builder().method(method).uri(path);
        for name in PASSED {
            if let Some(v) = from.get(name) {
                req = req.header(name, v);
            }
        }
        let body = match body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(b)
            }
            None => Body::empty(),
        };
        let req = match req.body(body) {
            Ok(r) => r,
            Err(e) => {
                return crate::ApiError::bad_request(format!("the call cannot be made: {e}"))
                    .into_response();
            }
        };
        match self.0.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }

    /// Runs action `name` with `options` for the caller of `headers`.
    pub(crate) async fn send(
        &self,
        headers: &HeaderMap,
        name: &str,
        options: &acts::Vars,
    ) -> Result<Value, Status> {
        if !crate::actions::is_action_name(name) {
            return Err(Status::not_found(format!("not found action '{name}'")));
        }
        let body = serde_json::to_vec(options).map_err(|e| Status::internal(e.to_string()))?;
        let path = format!("/api/v1/actions/{name}");
        let resp = self.call(Method::POST, &path, headers, Some(body)).await;
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), MAX_ANSWER_BYTES)
            .await
            .map_err(|e| Status::unavailable(format!("the answer was cut off: {e}")))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| Status::internal(format!("the answer is not JSON: {e}")));
        }
        Err(refusal(status.as_u16(), &bytes))
    }

    /// The message stream at `path` (with its filters), as protocol
    /// messages: a durable subscription's (`channel`) carry its ack ids.
    pub(crate) async fn subscribe(
        &self,
        headers: &HeaderMap,
        path: String,
        channel: Option<String>,
    ) -> Result<impl Stream<Item = Result<Message, Status>> + use<>, Status> {
        let resp = self.call(Method::GET, &path, headers, None).await;
        let status = resp.status();
        if !status.is_success() {
            let bytes = axum::body::to_bytes(resp.into_body(), 64 * 1024)
                .await
                .unwrap_or_default();
            return Err(refusal(status.as_u16(), &bytes));
        }
        let body = resp.into_body().into_data_stream();
        let state = (body, Vec::<u8>::new(), channel, false);
        Ok(futures_util::stream::unfold(
            state,
            |(mut body, mut pending, channel, done)| async move {
                if done {
                    return None;
                }
                loop {
                    if let Some(event) = next_event(&mut pending) {
                        match message(&event, channel.as_deref()) {
                            Parsed::Skip => continue,
                            Parsed::Message(m) => {
                                return Some((Ok(m), (body, pending, channel, false)));
                            }
                            Parsed::End(s) => {
                                return Some((Err(s), (body, pending, channel, true)));
                            }
                        }
                    }
                    if pending.len() > MAX_EVENT_BYTES {
                        let s = Status::resource_exhausted(format!(
                            "a message of the stream is over {MAX_EVENT_BYTES} bytes"
                        ));
                        return Some((Err(s), (body, pending, channel, true)));
                    }
                    match body.next().await {
                        Some(Ok(chunk)) => pending.extend_from_slice(&chunk),
                        Some(Err(e)) => {
                            let s = Status::unavailable(format!(
                                "the message stream ended ({e}); subscribe again"
                            ));
                            return Some((Err(s), (body, pending, channel, true)));
                        }
                        None => {
                            let s = Status::unavailable(
                                "the message stream ended (the server is stopping); subscribe again",
                            );
                            return Some((Err(s), (body, pending, channel, true)));
                        }
                    }
                }
            },
        ))
    }
}

/// The next whole event of the bytes read so far (taken out of them).
fn next_event(pending: &mut Vec<u8>) -> Option<Bytes> {
    let end = pending.windows(2).position(|w| w == b"\n\n")?;
    let event: Vec<u8> = pending.drain(..end + 2).collect();
    Some(Bytes::from(event))
}

enum Parsed {
    /// A comment (keep-alive, a partition attached).
    Skip,
    Message(Message),
    /// The stream ends with this status.
    End(Status),
}

/// One SSE event of the front's stream as a protocol message.
fn message(event: &[u8], channel: Option<&str>) -> Parsed {
    let text = String::from_utf8_lossy(event);
    let (mut kind, mut id, mut data) = (None, None, String::new());
    let mut partition = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("partition:") {
            partition = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("event:") {
            kind = Some(v.trim_start().to_owned());
        } else if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim_start().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if kind.as_deref() == Some("lagged") {
        return Parsed::End(Status::resource_exhausted(format!(
            "the client read too slowly ({data}); subscribe again (a durable subscription \
             re-sends what was not acknowledged)"
        )));
    }
    let Some(id) = id else {
        return Parsed::Skip;
    };
    let m: acts::Message = match serde_json::from_str(&data) {
        Ok(m) => m,
        Err(e) => {
            return Parsed::End(Status::internal(format!(
                "a message of the stream is not a message: {e}"
            )));
        }
    };
    let seq = match channel {
        Some(c) => ack_id_from(c, &id, partition.as_deref()),
        None => id,
    };
    Parsed::Message(Message {
        name: m.name.clone(),
        data: Some(message_shape(&m, &seq).to_string().into_bytes()),
        seq,
        ack: None,
    })
}

/// The gRPC status of the front's error answer (`{"error": {code,
/// message}}`).
fn refusal(status: u16, body: &[u8]) -> Status {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let code = v["error"]["code"].as_str().unwrap_or_default();
    let message = match v["error"]["message"].as_str() {
        Some(m) => m.to_owned(),
        None => format!("the server answered {status}"),
    };
    Status::new(code_of(status, code), message)
}

/// The gRPC code of an HTTP API error (its status and `code`).
pub(crate) fn code_of(status: u16, code: &str) -> tonic::Code {
    match status {
        400 | 415 => tonic::Code::InvalidArgument,
        401 => tonic::Code::Unauthenticated,
        403 => tonic::Code::PermissionDenied,
        404 => tonic::Code::NotFound,
        409 if code == "duplicated" => tonic::Code::AlreadyExists,
        409 => tonic::Code::FailedPrecondition,
        413 | 429 => tonic::Code::ResourceExhausted,
        501 => tonic::Code::Unimplemented,
        503 => tonic::Code::Unavailable,
        _ => tonic::Code::Internal,
    }
}

/// A path segment, percent-encoded (a channel key holds `%` and `:`).
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_whole_and_comments_skipped() {
        let mut pending = b": partition 3 attached\n\nevent: act\nid: m1\ndata: {\"a\"".to_vec();
        let first = next_event(&mut pending).expect("the comment");
        assert!(matches!(message(&first, None), Parsed::Skip));
        assert!(next_event(&mut pending).is_none(), "half an event waits");
        pending.extend_from_slice(b":1}\n\n");
        let event = next_event(&mut pending).expect("the event");
        assert!(pending.is_empty());
        // not a message: the stream ends, naming why
        assert!(matches!(message(&event, None), Parsed::End(_)));
        let lagged = b"event: lagged\ndata: 9 messages were waiting\n\n";
        match message(lagged, None) {
            Parsed::End(s) => {
                assert_eq!(s.code(), tonic::Code::ResourceExhausted);
                assert!(s.message().contains("9 messages"), "{}", s.message());
            }
            _ => panic!("lagged ends the stream"),
        }
    }

    #[test]
    fn a_message_carries_its_ack_id_on_a_durable_subscription() {
        let mut m = acts::Message::default();
        m.id = "m1".into();
        m.name = "ask".into();
        let event = format!(
            "event: act\nid: m1\ndata: {}\n\n",
            serde_json::to_string(&m).expect("json")
        );
        let Parsed::Message(out) = message(event.as_bytes(), Some("grpc:app:c1")) else {
            panic!("a message")
        };
        assert_eq!(out.seq, crate::actions::ack_id("grpc:app:c1", "m1"));
        // from a cluster node's stream: the partition it came from
        let routed = event.replace("data:", "partition: 5\ndata:");
        let Parsed::Message(from) = message(routed.as_bytes(), Some("grpc:app:c1")) else {
            panic!("a message")
        };
        assert_eq!(crate::actions::ack_partition(&from.seq), Some(5));
        assert_eq!(out.name, "ask");
        let Parsed::Message(live) = message(event.as_bytes(), None) else {
            panic!("a message")
        };
        assert_eq!(live.seq, "m1");
    }

    #[test]
    fn a_refusal_keeps_its_code_and_message() {
        let body = br#"{"error":{"code":"not_found","message":"no process 'p1'"}}"#;
        let s = refusal(404, body);
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert_eq!(s.message(), "no process 'p1'");
        assert_eq!(refusal(503, b"").code(), tonic::Code::Unavailable);
        assert_eq!(segment("grpc:a%2Fb:c 1"), "grpc%3Aa%252Fb%3Ac%201");
    }
}
