//! `acts serve --cluster` (one node of a cluster: `acts-cluster`) and
//! `acts cluster status`.

use std::io::Write;
use std::time::Duration;

use acts_cluster::{ClusterConfig, ClusterError, ClusterNode, ClusterStatus};

use crate::failure::Failure;
use crate::serve::{Listen, access_note, grpc_then_http, listen_with_grpc};

/// What `acts serve --cluster` was given.
pub(crate) struct Join<'a> {
    pub(crate) url: &'a str,
    pub(crate) node: &'a str,
    pub(crate) partitions: u32,
    pub(crate) advertise: Option<&'a str>,
    pub(crate) lease_ttl: Duration,
}

/// Joins the cluster and serves its API until a stop signal, then leaves
/// cleanly (every partition handed over at once).
pub(crate) async fn serve(
    join: Join<'_>,
    at: Listen<'_>,
    config: &crate::config::ConfigFile,
) -> Result<u8, Failure> {
    let (options, listener, bound, grpc) = listen_with_grpc(at, config).await?;
    // before anything says it listens: a stop sent then must stop it cleanly
    let signal = acts_server::shutdown_signal();
    let advertise = match join.advertise {
        Some(a) => a.trim_end_matches('/').to_owned(),
        None if bound.ip().is_unspecified() => {
            return Err(Failure::input(format!(
                "--listen {bound} listens on every interface: say where the other nodes reach \
                 this one with --advertise http://HOST:{}",
                bound.port()
            )));
        }
        None => format!("http://{bound}"),
    };
    let family = acts::open_store_family(join.url)
        .await
        .map_err(|e| Failure::input(format!("--cluster: {e}")))?;
    let persistence = family.persistence();
    // Asked again at the stop: what the store saw while it ran counts.
    let store = family.clone();
    let mut cluster = ClusterConfig::new(join.node, &advertise, join.partitions);
    cluster.lease_ttl = join.lease_ttl;
    cluster.engine.spans = crate::telemetry::span_export();
    cluster.packages = acts_packages::packages(&config.packages())
        .map_err(|e| Failure::input(format!("the config: {e}")))?;
    let node = ClusterNode::join(cluster, family, options.clone())
        .await
        .map_err(|e| match e {
            ClusterError::PartitionCount { .. }
            | ClusterError::Config(_)
            | ClusterError::NodeInUse { .. } => {
                Failure::input(format!("cannot join the cluster: {e}"))
            }
            other => Failure::run(format!("cannot join the cluster: {other}")),
        })?;
    // A service's stderr may be closed by whoever started it: a failed
    // write of these notes is not a reason to stop.
    let _ = writeln!(
        std::io::stderr(),
        "acts serve: node '{}' of the cluster at {} ({} partitions, {} held now) listening on \
         http://{bound}, reached at {advertise}; {}; Ctrl-C leaves the cluster",
        join.node,
        acts::redacted_url(join.url),
        node.partitions(),
        node.held().len(),
        access_note(options.auth()),
    );
    if let Some(note) = crate::serve::persistence_note(&persistence) {
        let _ = writeln!(std::io::stderr(), "acts serve: {note}");
    }
    let access = access_note(options.auth());
    let (stopping, http_stop) = grpc_then_http(signal, grpc, |listener, at, stop| {
        let _ = writeln!(
            std::io::stderr(),
            "acts serve: the gRPC protocol of acts-server 0.25 on {at}, routed over the cluster \
             (acts-channel: ActsChannel::connect(\"http://{at}\")); {access}"
        );
        let served = acts_cluster::serve_grpc(node.clone(), listener, stop);
        tokio::spawn(async move { served.await.map_err(|e| e.to_string()) })
    });
    let http = acts_cluster::serve(node, listener, http_stop).await;
    crate::serve::after_http(http, stopping).await?;
    let _ = writeln!(
        std::io::stderr(),
        "acts serve: left the cluster; its partitions were handed over; {}",
        crate::serve::stop_note(&store.persistence(), 0)
    );
    Ok(0)
}

/// `acts cluster status`: asks the node at `server`.
pub(crate) async fn status(
    server: Option<&str>,
    token: Option<&str>,
    json: bool,
) -> Result<u8, Failure> {
    let Some(server) = server else {
        return Err(Failure::input(
            "acts cluster status asks a node: give the URL of any node with --server URL (or ACTS_SERVER)",
        ));
    };
    let status: ClusterStatus =
        crate::client::get_from(server, token, &["cluster", "status"]).await?;
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&status).unwrap_or_default();
        let _ = writeln!(out, "{text}");
        return Ok(0);
    }
    let _ = write!(out, "{}", render(&status));
    Ok(0)
}

/// The status as text.
fn render(s: &ClusterStatus) -> String {
    let mut out = format!(
        "cluster: {} live node(s), {} partitions (as node '{}' sees it; lease TTL {:.1} s; model catalog at change {})\n\n",
        s.nodes.len(),
        s.partitions,
        s.node,
        s.lease_ttl_ms as f64 / 1000.0,
        s.catalog_seq
    );
    out.push_str(&format!(
        "{:<16} {:<28} {:>10} {:>12}\n",
        "NODE", "ADDRESS", "PARTITIONS", "HEARTBEAT"
    ));
    for n in &s.nodes {
        out.push_str(&format!(
            "{:<16} {:<28} {:>10} {:>10.1} s\n",
            n.node,
            n.addr,
            n.held,
            n.heartbeat_age_ms as f64 / 1000.0
        ));
    }
    out.push_str(&format!(
        "\n{:<10} {:<16} {:>6} {:>10} {:>12}\n",
        "PARTITION", "OWNER", "EPOCH", "IN FLIGHT", "CATALOG LAG"
    ));
    for p in &s.owners {
        let dash = || "-".to_owned();
        out.push_str(&format!(
            "{:<10} {:<16} {:>6} {:>10} {:>12}\n",
            p.partition,
            p.owner.clone().unwrap_or_else(|| "(moving)".to_owned()),
            p.epoch.map_or_else(dash, |e| e.to_string()),
            p.admitted.map_or_else(dash, |a| a.to_string()),
            p.catalog_lag.map_or_else(dash, |l| l.to_string()),
        ));
    }
    let moving = s.owners.iter().filter(|p| p.owner.is_none()).count();
    if moving > 0 {
        out.push_str(&format!(
            "\n{moving} partition(s) have no live owner: they move within the lease TTL\n"
        ));
    }
    out
}
