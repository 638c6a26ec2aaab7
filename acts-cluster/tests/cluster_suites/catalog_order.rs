//! Model changes are serialized through the catalog: deploys of one model
//! racing through two nodes leave every partition with the same versions
//! numbered alike (version n has the same definition on every
//! partition), and a node that does not hold the catalog partition hands
//! the change to the node that does; a catalog compacted into a snapshot
//! (its superseded changes deleted) still brings a partition taken over
//! to the same versions.

use crate::support;

use acts::ManualClock;
use support::*;
use tokio::task::JoinSet;

/// Version `i` of the raced model (each one's definition differs).
fn raced(i: usize) -> String {
    format!(
        r#"
id: raced
ver: "1"
steps:
  - id: set
    uses: acts.transform.set
    params: {{ version: {i} }}
"#
    )
}

/// Each partition's versions of `raced`: (revision, definition as JSON).
async fn versions_of(nodes: &[&Node]) -> Vec<(u32, Vec<(u32, String)>)> {
    let mut out = Vec::new();
    for p in 0..P {
        let engine = nodes
            .iter()
            .find_map(|n| n.node.engine(p))
            .unwrap_or_else(|| panic!("partition {p} is held"));
        let exec = engine.executor();
        let mut versions = Vec::new();
        for v in exec.model().versions("raced").await.expect("versions") {
            let rev = v.model.revision;
            let (_, workflow) = exec.model().version("raced", rev).await.expect("a version");
            versions.push((rev, workflow.to_json()));
        }
        out.push((p, versions));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_deploys_through_two_nodes_number_versions_alike_on_every_partition() {
    let family = family("catalog").await;
    let clock = ManualClock::new(1_700_000_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);

    // Twelve different definitions, deployed all at once, alternately
    // through the two nodes.
    let mut deploys = JoinSet::new();
    for i in 0..12 {
        let url = if i % 2 == 0 {
            n1.url.clone()
        } else {
            n2.url.clone()
        };
        let text = raced(i);
        deploys.spawn(async move {
            let resp = reqwest::Client::new()
                .post(format!("{url}/api/v1/models"))
                .header("content-type", "application/yaml")
                .body(text)
                .send()
                .await
                .expect("deploy answers");
            let status = resp.status().as_u16();
            (status, resp.text().await.unwrap_or_default())
        });
    }
    while let Some(done) = deploys.join_next().await {
        let (status, body) = done.expect("a deploy");
        assert_eq!(status, 201, "{body}");
    }
    tick_all(&[&n1, &n2]).await;

    let all = versions_of(&[&n1, &n2]).await;
    let (_, first) = &all[0];
    assert_eq!(first.len(), 12, "every definition is a version: {first:?}");
    for (p, versions) in &all {
        let revs: Vec<u32> = versions.iter().map(|(r, _)| *r).collect();
        assert_eq!(
            versions, first,
            "partition {p} numbers the versions otherwise than partition 0 ({revs:?})"
        );
    }
}

/// Sends `method` to `url` with `body` (YAML); the status.
async fn model_call(method: reqwest::Method, url: String, body: Option<String>) -> u16 {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(text) = body {
        req = req.header("content-type", "application/yaml").body(text);
    }
    req.send()
        .await
        .expect("the call answers")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_after_the_catalog_was_compacted_numbers_versions_alike() {
    let family = family("compacted").await;
    let clock = ManualClock::new(1_700_000_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    // Six versions of `raced`, then 64 superseded changes (a model
    // deployed and removed 32 times): the snapshot (at change 64) keeps
    // the six, and deletes what the removals superseded.
    for i in 0..6 {
        let url = format!("{}/api/v1/models", n1.url);
        assert_eq!(
            model_call(reqwest::Method::POST, url, Some(raced(i))).await,
            201
        );
    }
    let scratch = raced(99).replace("id: raced", "id: scratch");
    for _ in 0..32 {
        let url = format!("{}/api/v1/models", n1.url);
        assert_eq!(
            model_call(reqwest::Method::POST, url, Some(scratch.clone())).await,
            201
        );
        let url = format!("{}/api/v1/models/scratch", n1.url);
        assert_eq!(model_call(reqwest::Method::DELETE, url, None).await, 204);
    }
    let meta = family.member("meta").await.expect("the metadata");
    let left = meta
        .scan_prefix(b"catalog/", None, false)
        .await
        .expect("the catalog");
    assert!(
        left.len() <= 13,
        "the superseded changes are deleted: {} left",
        left.len()
    );
    assert!(
        meta.get(b"catalog-snapshot").await.expect("read").is_some(),
        "a snapshot was written"
    );

    // A partition n2 will take has lost `raced` (as one that missed the
    // changes would): the takeover must bring it back from the compacted
    // catalog, numbered as everywhere else.
    let ids = ["n1".to_owned(), "n2".to_owned()];
    let lost = (0..P)
        .find(|p| acts_cluster::placement::owner_of(*p, &ids) == Some("n2"))
        .expect("n2 wins a partition");
    let exec = n1.node.engine(lost).expect("n1 holds it").executor();
    exec.model().remove("raced").await.expect("removed there");

    // n2 takes half the partitions over, from the compacted catalog.
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    clock.advance(TTL * 2);
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);
    assert!(n2.node.held().contains(&lost));
    let all = versions_of(&[&n1, &n2]).await;
    let (_, first) = &all[0];
    assert_eq!(first.len(), 6, "six versions: {first:?}");
    for (p, versions) in &all {
        assert_eq!(
            versions, first,
            "partition {p} numbers the versions otherwise"
        );
    }
    for p in n2.node.held() {
        let exec = n2.node.engine(p).expect("held").executor();
        assert!(
            exec.model().get("scratch").await.is_err(),
            "partition {p} has the removed model"
        );
    }
}
