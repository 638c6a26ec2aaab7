//! `/metrics` in Prometheus text format: the server's own request counters
//! and latency, recorded into a recorder of this server (not a global one,
//! so an application embedding several servers, or tests, keep theirs
//! apart), and the engine's admission and memory figures read at scrape
//! time.

use std::sync::Arc;
use std::time::Instant;

use acts::{COMMIT_MICROS_BOUNDS, GROUP_SIZE_BOUNDS};
use acts::{DeliveryState, Engine};
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};

/// The server's metrics.
#[derive(Clone)]
pub(crate) struct Metrics {
    recorder: Arc<PrometheusRecorder>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Self {
            recorder: Arc::new(PrometheusBuilder::new().build_recorder()),
        }
    }

    /// The text a scrape returns.
    pub(crate) async fn render(&self, engine: &Engine, streams: &crate::stream::Streams) -> String {
        let exec = engine.executor();
        // Counted from the deliveries' state index (keys only); a store
        // that cannot answer leaves the last figures in place.
        let pending = exec.msg().count(DeliveryState::Pending).await.ok();
        let dead = exec.msg().count(DeliveryState::Failed).await.ok();
        let mut by_state = Vec::new();
        for state in acts::TaskState::ALL {
            if let Ok(n) = exec.proc().count(state).await {
                by_state.push((state.as_str(), n));
            }
        }
        let ready = engine.storage().readiness().await.is_ok();
        let synced = engine.storage().persistence().is_synced();
        let st = engine.runtime().stats();
        let io = engine.storage().store_io();
        let cap = engine.runtime().cache().cap();
        let max_resident = engine.runtime().cache().max_resident();
        // Totals over the keys (a label per key would be a series per
        // customer): `acts ps --waiting-for concurrency` names them.
        let keys = engine.runtime().cache().keys_in_use();
        let holders: usize = keys.iter().map(|k| k.holders).sum();
        let waiting: usize = keys.iter().map(|k| k.waiting).sum();
        let longest = keys.iter().map(|k| k.waiting).max().unwrap_or(0);
        // Steps' and acts' keys (`concurrency:` and `rate:` on a node).
        let gates = engine.runtime().gate_keys();
        let gate_holders: usize = gates.iter().map(|k| k.holders).sum();
        let gate_waiting: usize = gates.iter().map(|k| k.waiting).sum();
        metrics::with_local_recorder(&*self.recorder, || {
            metrics::gauge!("acts_concurrency_keys").set(keys.len() as f64);
            metrics::gauge!("acts_concurrency_holders").set(holders as f64);
            metrics::gauge!("acts_concurrency_waiting").set(waiting as f64);
            metrics::gauge!("acts_concurrency_longest_queue").set(longest as f64);
            metrics::gauge!("acts_gate_keys").set(gates.len() as f64);
            metrics::gauge!("acts_gate_holders").set(gate_holders as f64);
            metrics::gauge!("acts_gate_waiting").set(gate_waiting as f64);
            metrics::gauge!("acts_processes_admitted").set(st.admitted as f64);
            metrics::gauge!("acts_processes_resident").set(st.resident as f64);
            metrics::gauge!("acts_processes_parked").set(st.parked as f64);
            metrics::gauge!("acts_processes_stuck").set(st.stuck as f64);
            metrics::gauge!("acts_processes_stalled").set(st.stalled as f64);
            metrics::gauge!("acts_admission_cap").set(cap as f64);
            metrics::gauge!("acts_max_resident").set(max_resident as f64);
            metrics::gauge!("acts_writes_queued").set(st.queued_writes as f64);
            // 1 while the next transition can commit (as /readyz), and
            // while the store syncs every acknowledged write.
            metrics::gauge!("acts_store_ready").set(f64::from(u8::from(ready)));
            metrics::gauge!("acts_store_synced").set(f64::from(u8::from(synced)));
            metrics::gauge!("acts_streams_open").set(streams.open_streams() as f64);
            metrics::gauge!("acts_streams_queued_bytes").set(streams.queued_bytes() as f64);
            if let Some(n) = pending {
                metrics::gauge!("acts_deliveries_pending").set(n as f64);
            }
            if let Some(n) = dead {
                metrics::gauge!("acts_deliveries_dead").set(n as f64);
            }
            // Totals since the engine started (counters to Prometheus:
            // rate() gives transitions per second, commit latency as
            // commit_seconds / commits, group size as batches / commits).
            metrics::counter!("acts_transitions_total").absolute(st.transitions);
            metrics::counter!("acts_commits_total").absolute(st.writer.commits);
            metrics::counter!("acts_commit_batches_total").absolute(st.writer.batches);
            metrics::counter!("acts_commit_failures_total").absolute(st.writer.failures);
            metrics::gauge!("acts_commit_seconds_total").set(st.writer.commit_micros as f64 / 1e6);
            // The store's traffic (a store that counts it: Redis).
            if let Some(io) = io {
                metrics::counter!("acts_store_round_trips_total").absolute(io.round_trips);
                metrics::counter!("acts_store_commands_total").absolute(io.commands);
                metrics::counter!("acts_store_sent_bytes_total").absolute(io.bytes_out);
                metrics::counter!("acts_store_received_bytes_total").absolute(io.bytes_in);
            }
            for (state, n) in by_state {
                metrics::gauge!("acts_processes", "state" => state).set(n as f64);
            }
            let sc = st.scripts;
            metrics::counter!("acts_script_evaluations_total").absolute(sc.evaluations);
            metrics::counter!("acts_script_limit_hits_total", "limit" => "time")
                .absolute(sc.timeouts);
            metrics::counter!("acts_script_limit_hits_total", "limit" => "memory")
                .absolute(sc.out_of_memory);
            metrics::counter!("acts_script_failures_total").absolute(sc.failures);
        });
        let mut text = self.recorder.handle().render();
        let w = &st.writer;
        histogram(
            &mut text,
            "acts_commit_seconds",
            "Time of one group commit (one backend transaction), failed ones too.",
            &COMMIT_MICROS_BOUNDS.map(|us| us as f64 / 1e6),
            &w.commit_micros_buckets,
            w.commit_micros as f64 / 1e6,
        );
        histogram(
            &mut text,
            "acts_commit_group_size",
            "Transitions' batches in one committed group.",
            &GROUP_SIZE_BOUNDS.map(|n| n as f64),
            &w.group_size_buckets,
            w.batches as f64,
        );
        text
    }

    /// Counts a request by route and status and records its latency.
    pub(crate) async fn track(State(m): State<Metrics>, request: Request, next: Next) -> Response {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
        let method = request.method().to_string();
        let started = Instant::now();
        let response = next.run(request).await;
        let status = response.status().as_u16().to_string();
        let secs = started.elapsed().as_secs_f64();
        metrics::with_local_recorder(&*m.recorder, || {
            metrics::counter!("acts_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
                .increment(1);
            metrics::histogram!("acts_http_request_seconds", "method" => method, "route" => route)
                .record(secs);
        });
        response
    }
}

/// Appends Prometheus histogram `name` with per-bucket (not cumulative)
/// `counts` under `bounds` (one more count: above them all) and `sum`.
fn histogram(out: &mut String, name: &str, help: &str, bounds: &[f64], counts: &[u64], sum: f64) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, n) in counts.iter().enumerate() {
        cumulative += n;
        match bounds.get(i) {
            Some(le) => {
                let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
            }
            None => {
                let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
            }
        }
    }
    let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
}
