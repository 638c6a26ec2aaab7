//! `/metrics` of a cluster node: the Prometheus text of every partition
//! engine it holds, summed series by series (counts, gauges and histogram
//! buckets all add up across partitions), plus the node's own gauges.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::call::{Call, Target};
use crate::node::ClusterNode;

/// Sums the series of several Prometheus texts; `# HELP`/`# TYPE` lines
/// are kept once, in first-seen order.
pub(crate) fn sum_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let mut comments: Vec<String> = Vec::new();
    let mut order: Vec<String> = Vec::new();
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for text in texts {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if line.starts_with('#') {
                if !comments.iter().any(|c| c == line) {
                    comments.push(line.to_owned());
                    order.push(line.to_owned());
                }
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(v) = value.parse::<f64>() else {
                continue;
            };
            if !sums.contains_key(series) {
                order.push(series.to_owned());
            }
            *sums.entry(series.to_owned()).or_insert(0.0) += v;
        }
    }
    let mut out = String::new();
    for item in order {
        match sums.get(&item) {
            Some(v) => out.push_str(&format!("{item} {v}\n")),
            None => {
                out.push_str(&item);
                out.push('\n');
            }
        }
    }
    out
}

/// The node's metrics: its partitions' summed, and how many it holds.
pub(crate) async fn metrics(node: &ClusterNode, call: Call) -> Response {
    let mut texts = Vec::new();
    for p in node.held() {
        if let Target::Local(_) = node.target(p) {
            let answer = node.on_partition(p, &call).await;
            if !answer.status.is_success() {
                // Not allowed (a user's token), or the engine is closing:
                // the first refusal answers.
                return answer.into_response();
            }
            texts.push(String::from_utf8_lossy(&answer.body).into_owned());
        }
    }
    let mut out = sum_texts(texts.iter().map(String::as_str));
    out.push_str(&format!(
        "# TYPE acts_cluster_partitions_held gauge\nacts_cluster_partitions_held {}\n# TYPE acts_cluster_partitions gauge\nacts_cluster_partitions {}\n",
        node.held().len(),
        node.partitions()
    ));
    // The node's own traffic outside its partitions' (membership, leases,
    // the catalog, the connection's settings checks).
    if let Some(io) = node.own_store_io() {
        for (name, v) in [
            ("round_trips", io.round_trips),
            ("commands", io.commands),
            ("sent_bytes", io.bytes_out),
            ("received_bytes", io.bytes_in),
        ] {
            out.push_str(&format!(
                "# TYPE acts_cluster_store_{name}_total counter\nacts_cluster_store_{name}_total {v}\n"
            ));
        }
    }
    let mut r = (StatusCode::OK, Bytes::from(out)).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_add_up_and_comments_stay_once() {
        let a = "# TYPE x gauge\nx 2\ny{k=\"a b\"} 1\n";
        let b = "# TYPE x gauge\nx 3\ny{k=\"a b\"} 4\nz 1\n";
        assert_eq!(
            sum_texts([a, b]),
            "# TYPE x gauge\nx 5\ny{k=\"a b\"} 5\nz 1\n"
        );
    }
}
