//! Model changes are serialized through the catalog: deploys of one model
//! racing through two nodes leave every partition with the same versions
//! numbered alike (version n has the same definition on every
//! partition), and a node that does not hold the catalog partition hands
//! the change to the node that does.

mod support;

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
        for v in exec.versions("raced").await.expect("versions") {
            let rev = v.model.revision;
            let (_, workflow) = exec.model_version("raced", rev).await.expect("a version");
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
