//! Helpers shared by the server's integration tests.
#![allow(dead_code)] // each test file uses its own subset

pub mod api;
pub mod contract;

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::Value;

/// How long a test waits for something that must happen (a hang guard,
/// never what decides an outcome).
pub const GUARD: Duration = Duration::from_secs(10);

/// The text of the next Server-Sent Event of a stream's `body` (up to its
/// blank line).
pub async fn next_event(body: &mut Body) -> String {
    let mut seen = String::new();
    while !seen.contains("\n\n") {
        let frame = tokio::time::timeout(GUARD, body.frame())
            .await
            .expect("an event arrives (hang guard)")
            .expect("the stream is open")
            .expect("a frame");
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    seen
}

/// The `data:` of an event, as JSON.
pub fn event_data(event: &str) -> Value {
    let data = event
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data line in: {event}"));
    serde_json::from_str(data).expect("the message as JSON")
}
