//! A cluster node holds the live streams of all its partitions to one
//! budget (`ServerOptions`' stream limits), not one budget per partition:
//! with room for one stream in all, a stream of a second partition on the
//! same node is refused (429) until the first is closed.

use std::sync::Arc;
use std::time::Duration;

use acts::{EngineConfig, ManualClock, StoreFamily};
use acts_cluster::{ClusterConfig, ClusterNode};
use acts_server::{Auth, ServerOptions, StreamLimits};
use serde_json::Value;

/// The header that pins a call to one partition (what a node sends to a
/// partition's owner).
const PARTITION: &str = "x-acts-partition";

async fn open_stream(http: &reqwest::Client, url: &str, p: u32) -> reqwest::Response {
    http.get(format!("{url}/api/v1/messages"))
        .header(PARTITION, p.to_string())
        .send()
        .await
        .expect("the node answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partitions_of_a_node_share_one_stream_budget() {
    let family = StoreFamily::memory("budget");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("an address");
    let url = format!("http://{addr}");
    let mut config = ClusterConfig::new("a", &url, 2);
    config.clock = Arc::new(ManualClock::new(1_000_000));
    config.background = false;
    config.engine = {
        let mut v = EngineConfig::default();
        v.tick = Duration::from_secs(3600);
        v
    };
    let limits = StreamLimits {
        max_streams: 1,
        ..StreamLimits::default()
    };
    let node = ClusterNode::join(config, family, ServerOptions::new(Auth::none(), limits))
        .await
        .expect("the node joins");
    assert_eq!(node.held().len(), 2, "one node holds both partitions");
    let router = node.router(Some(addr.port()));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let http = reqwest::Client::new();

    let first = open_stream(&http, &url, 0).await;
    assert_eq!(first.status().as_u16(), 200, "partition 0's stream opens");
    let refused = open_stream(&http, &url, 1).await;
    assert_eq!(
        refused.status().as_u16(),
        429,
        "partition 1's stream counts against the same budget"
    );
    let body: Value = refused.json().await.expect("an error body");
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");

    // Closing the first stream gives its place back (the server notices
    // the closed connection on its own time: ask again until it has, for
    // at most a minute).
    drop(first);
    let reopened = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let r = open_stream(&http, &url, 1).await;
            if r.status().as_u16() == 200 {
                return r;
            }
            assert_eq!(r.status().as_u16(), 429, "refused only for the budget");
            drop(r);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the closed stream's place is given back");
    assert_eq!(reopened.status().as_u16(), 200);
    drop(reopened);
    node.leave().await;
}
