//! What the package tests share: an engine with the packages installed, a
//! model run to its end, and a hang guard.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use acts::{ChannelOptions, Engine, ProcInfo, TaskState, Vars};
use acts_packages::PackagesConfig;

/// Longest a test waits for anything (a hang guard, not a timing claim).
pub const HANG: Duration = Duration::from_secs(120);

/// An engine on `store` (memory when `None`) with both packages installed.
pub async fn engine(config: &PackagesConfig, store: Option<Arc<dyn acts::KvStore>>) -> Engine {
    builder(config, store).start().await.expect("engine")
}

/// The builder [`engine`] starts.
pub fn builder(
    config: &PackagesConfig,
    store: Option<Arc<dyn acts::KvStore>>,
) -> acts::EngineBuilder {
    let mut b = Engine::builder();
    if let Some(s) = store {
        b = b.store(s);
    }
    acts_packages::install(b, config).expect("packages config")
}

/// Deploys `model`, starts it with `vars` and waits for its end.
pub async fn run(engine: &Engine, model: &str, vars: Vars) -> ProcInfo {
    let exec = engine.executor();
    let info = exec.model().deploy_yaml(model).await.expect("deploy");
    let mut rx = engine.channel(ChannelOptions::default()).subscribe();
    let p = exec.proc().start(&info.id, vars).await.expect("start");
    wait_end(engine, &mut rx, &p.pid).await
}

/// Waits for process `pid`'s end on `rx`, then reads it.
pub async fn wait_end(
    engine: &Engine,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<acts::Message>,
    pid: &str,
) -> ProcInfo {
    tokio::time::timeout(HANG, async {
        loop {
            let m = rx.recv().await.expect("engine running");
            let ended = m.state == "completed" || m.state == "error" || m.state == "aborted";
            if m.pid == pid && m.r#type == "workflow" && ended {
                break;
            }
        }
    })
    .await
    .expect("the process ends");
    let p = engine.executor().proc().get(pid).await.expect("process");
    assert!(p.state != TaskState::Running, "{p:?}");
    p
}

/// A model `id` of one act `uses` with `params` (YAML flow text).
pub fn one_act(id: &str, uses: &str, params: &str) -> String {
    format!("id: {id}\nver: '1'\nsteps:\n  - id: s\n    uses: {uses}\n    params: {params}\n")
}

/// The ecode and message a failed process ended with.
pub fn failure(p: &ProcInfo) -> (String, String) {
    let e = p.err.as_ref().unwrap_or_else(|| panic!("no error: {p:?}"));
    (e.ecode.clone(), e.message.clone())
}
