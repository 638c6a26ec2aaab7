//! The application packages running now: each run is given up when its
//! act ends some other way first — a client answered, skipped or aborted
//! the act, or its process ended (aborted, timed out) — so nothing keeps
//! working for an act that no longer waits for it. Giving up drops the
//! run, which stops what it started (the shell package kills the script's
//! process group when its run is dropped).
//!
//! A run applies its result to its act through the capability the kernel
//! hands it, [`PackageHost`] (an action on an act, the engine's closing).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::{Instrument, info_span, warn};

use crate::model::Vars;
use crate::scheduler::{Action, TaskError};

use crate::engine::types::error::EngineError;
use crate::engine::types::package::{ActPackage, PackageContext};

/// What a package run needs of the engine (the kernel implements it).
#[async_trait]
pub(crate) trait PackageHost: Send + Sync {
    /// Applies `action` with `options` to act `tid` of `pid` (the
    /// application's own action, in a transition of the process).
    async fn act(
        &self,
        pid: &str,
        tid: &str,
        action: Action,
        options: Vars,
    ) -> Result<(), EngineError>;
    /// Resolves to `true` once the engine closes.
    fn closing(&self) -> tokio::sync::watch::Receiver<bool>;
}

/// The cancel switches of one process's running acts: by act, the run's
/// number and its switch.
type Switches = HashMap<String, (u64, oneshot::Sender<()>)>;

/// The application packages and their runs' cancel switches, by process
/// and act.
#[derive(Default)]
pub(crate) struct PackageRuns {
    /// The application packages registered with the engine, by name.
    apps: HashMap<String, Arc<dyn ActPackage>>,
    runs: parking_lot::Mutex<HashMap<String, Switches>>,
    next: AtomicU64,
    /// Runs not yet finished: while none runs, giving one up (asked on
    /// every client action and every process end) takes no lock.
    running: AtomicUsize,
}

/// One run's place in [`PackageRuns`]: `cancelled` resolves when the run
/// is to be given up; dropped, the place is freed.
pub(crate) struct RunGuard<'a> {
    runs: &'a PackageRuns,
    pid: String,
    tid: String,
    id: u64,
    cancelled: oneshot::Receiver<()>,
}

impl PackageRuns {
    /// The runs of application packages `apps`.
    pub(crate) fn new(apps: HashMap<String, Arc<dyn ActPackage>>) -> Self {
        Self {
            apps,
            ..Default::default()
        }
    }

    /// Runs application package `uses` for act `tid` of `pid` and applies
    /// its result to the act (in a transition, through `host`); given up
    /// when the act ends otherwise or the engine closes.
    pub(crate) async fn run(
        &self,
        host: &dyn PackageHost,
        pid: String,
        tid: String,
        uses: String,
        params: Value,
        inputs: Vars,
    ) {
        let Some(package) = self.apps.get(&uses).cloned() else {
            let err = TaskError::new(
                "package",
                format!("package '{uses}' is not registered with this engine"),
            );
            let _ = host.act(&pid, &tid, Action::Error, err.to_vars()).await;
            return;
        };
        let ctx = PackageContext {
            pid: pid.clone(),
            tid: tid.clone(),
            params,
            inputs,
        };
        let mut closing = host.closing();
        let mut guard = self.start(&pid, &tid);
        let run = package
            .run(ctx)
            .instrument(info_span!("package", pid = %pid, tid = %tid, uses = %uses));
        let result = tokio::select! {
            r = run => r,
            // The engine closes: the run is dropped (the act stays running
            // in the store, and a restart runs it again, as after a crash).
            _ = closing.wait_for(|c| *c) => return,
            // The act ended otherwise (answered, skipped, aborted; its
            // process ended): the run is dropped, which stops it.
            () = guard.cancelled() => {
                tracing::info!(pid = %pid, tid = %tid, uses = %uses, "package run given up: its act ended");
                return;
            }
        };
        drop(guard);
        let (action, options) = match result {
            Ok(vars) => (Action::Complete, vars),
            Err(f) => (Action::Error, TaskError::new(f.ecode, f.message).to_vars()),
        };
        match host.act(&pid, &tid, action, options).await {
            Ok(()) => {}
            // Outputs over the vars limit fail the act, which would
            // otherwise wait for a result that can never be stored.
            Err(EngineError::TooLarge { size, limit, .. }) => {
                let err = TaskError::new(
                    "package.too_large",
                    format!(
                        "package '{uses}' returned {size} bytes of outputs, more than the \
                         engine's max_vars_bytes ({limit})"
                    ),
                );
                if let Err(e) = host.act(&pid, &tid, Action::Error, err.to_vars()).await {
                    warn!(pid = %pid, tid = %tid, error = %e, "package failure not applied");
                }
            }
            Err(e) => warn!(pid = %pid, tid = %tid, error = %e, "package result not applied"),
        }
    }

    /// Notes the run of act `tid` of process `pid`.
    pub(crate) fn start(&self, pid: &str, tid: &str) -> RunGuard<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        // Counted before its switch is placed: a `cancel` that finds no
        // run counted comes before the run (as it would under the lock).
        self.running.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.runs
            .lock()
            .entry(pid.to_owned())
            .or_default()
            .insert(tid.to_owned(), (id, tx));
        RunGuard {
            runs: self,
            pid: pid.to_owned(),
            tid: tid.to_owned(),
            id,
            cancelled: rx,
        }
    }

    /// Gives up the run of act `tid` of process `pid`, if one runs.
    pub(crate) fn cancel(&self, pid: &str, tid: &str) {
        if self.idle() {
            return;
        }
        let mut runs = self.runs.lock();
        let Some(acts) = runs.get_mut(pid) else {
            return;
        };
        if let Some((_, tx)) = acts.remove(tid) {
            let _ = tx.send(());
        }
        if acts.is_empty() {
            runs.remove(pid);
        }
    }

    /// Gives up every run of process `pid`.
    pub(crate) fn cancel_process(&self, pid: &str) {
        if self.idle() {
            return;
        }
        let acts = self.runs.lock().remove(pid);
        for (_, (_, tx)) in acts.into_iter().flatten() {
            let _ = tx.send(());
        }
    }

    /// No run is going on.
    fn idle(&self) -> bool {
        self.running.load(Ordering::SeqCst) == 0
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.runs.lock().values().map(HashMap::len).sum()
    }
}

impl RunGuard<'_> {
    /// Resolves when the run is to be given up (never, while it is not).
    pub(crate) async fn cancelled(&mut self) {
        if (&mut self.cancelled).await.is_err() {
            // replaced by a later run of the same act: only that one is
            // given up
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let mut runs = self.runs.runs.lock();
        if let Some(acts) = runs.get_mut(&self.pid) {
            if acts.get(&self.tid).is_some_and(|(id, _)| *id == self.id) {
                acts.remove(&self.tid);
            }
            if acts.is_empty() {
                runs.remove(&self.pid);
            }
        }
        drop(runs);
        self.runs.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_is_given_up_by_its_act_or_its_process_and_freed_when_done() {
        let runs = PackageRuns::default();
        let mut a = runs.start("p1", "t1");
        let mut b = runs.start("p1", "t2");
        let mut c = runs.start("p2", "t1");
        runs.cancel("p1", "t1");
        a.cancelled().await;
        runs.cancel_process("p1");
        b.cancelled().await;
        // p2's run goes on
        let still = tokio::time::timeout(std::time::Duration::from_millis(1), c.cancelled()).await;
        assert!(still.is_err(), "another process's run is not given up");
        drop((a, b));
        assert_eq!(runs.len(), 1);
        drop(c);
        assert_eq!(runs.len(), 0, "a finished run frees its place");
        assert!(runs.idle(), "and is no longer counted");
        // a later run of the same act replaces the earlier one's switch
        let first = runs.start("p3", "t1");
        let mut second = runs.start("p3", "t1");
        drop(first);
        assert_eq!(
            runs.len(),
            1,
            "the earlier run's end leaves the later one's"
        );
        runs.cancel("p3", "t1");
        second.cancelled().await;
    }
}
