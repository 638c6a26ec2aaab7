//! What the kernel grants its parts, each through the capability trait
//! the part names: the gates ([`GateHost`]: run a transition of a process
//! to open a task let through, read a process, write a seat row, the gate
//! timer, counted background work) and recovery
//! ([`RecoveryHost`]: admission's count, loading a process, a transition
//! that applies an outbox record, a batch, a process's timer, refilling)
//! and the catalog ([`CatalogHost`]: whether the engine is open, the
//! clock, what a model is checked against, a batch, the services' trigger
//! rows and schedule timer) and the package runs ([`PackageHost`]: an
//! action on an act, the engine's closing).

use std::collections::HashSet;

use acts_store::BatchOp;
use async_trait::async_trait;

use crate::model::{Vars, Workflow};
use crate::package::PackageRegistry;
use crate::scheduler::{Action, GatePass};
use crate::script::ScriptEngine;

use crate::engine::kernel::cache::Cache;
use crate::engine::kernel::catalog::CatalogHost;
use crate::engine::kernel::gates::{GateChange, GateHost, GateRead, GateWork, Gates};
use crate::engine::kernel::package_runs::PackageHost;
use crate::engine::kernel::recovery::{ProcChange, RecoveryHost};
use crate::engine::kernel::shared::Kernel;
use crate::engine::types::error::EngineError;

#[async_trait]
impl GateHost for Kernel {
    fn gates(&self) -> &Gates {
        &self.gates
    }

    fn is_closed(&self) -> bool {
        Kernel::is_closed(self)
    }

    fn spawn(&self, work: GateWork) {
        Kernel::spawn(self, work);
    }

    fn arm_gate_timer(&self, due: i64) {
        if !Kernel::is_closed(self) {
            self.timers.arm_gates(due);
        }
    }

    async fn write(&self, ops: Vec<BatchOp>) -> Result<(), EngineError> {
        Kernel::write(self, None, ops).await
    }

    async fn transition_of(
        &self,
        pid: &str,
        change: GateChange,
    ) -> Result<Option<GatePass>, EngineError> {
        let Some(handle) = self.handle(pid).await? else {
            return Ok(None);
        };
        match self
            .transition(&handle, Vec::new(), move |p, svc| Ok(change(p, svc)))
            .await
        {
            Ok(pass) => Ok(Some(pass)),
            Err(EngineError::ProcessNotFound(_) | EngineError::Removed(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn read_of(&self, pid: &str, read: GateRead) -> Result<Option<GatePass>, EngineError> {
        self.with_process(pid, read).await
    }
}

#[async_trait]
impl RecoveryHost for Kernel {
    fn cache(&self) -> &Cache {
        &self.cache
    }

    fn is_closed(&self) -> bool {
        Kernel::is_closed(self)
    }

    fn refill(&self) {
        Kernel::refill(self);
    }

    fn arm_timer(&self, pid: &str, due: i64) {
        Kernel::arm_timer(self, pid, Some(due));
    }

    fn begin_touch(&self) {
        self.timers.begin_touch();
    }

    fn end_touch(&self) -> HashSet<String> {
        self.timers.end_touch()
    }

    fn resumes_in_flight(&self) -> usize {
        self.work.resumes_in_flight()
    }

    async fn write(&self, ops: Vec<BatchOp>) -> Result<(), EngineError> {
        Kernel::write(self, None, ops).await
    }

    async fn load(&self, pid: &str) -> Result<(), EngineError> {
        self.handle(pid).await.map(|_| ())
    }

    async fn transition_of(
        &self,
        pid: &str,
        extra: Vec<BatchOp>,
        change: ProcChange,
    ) -> Result<Option<()>, EngineError> {
        let Some(handle) = self.handle(pid).await? else {
            return Ok(None);
        };
        self.transition(&handle, extra, change).await.map(Some)
    }
}

#[async_trait]
impl CatalogHost for Kernel {
    fn check_open(&self) -> Result<(), EngineError> {
        Kernel::check_open(self)
    }

    fn now(&self) -> i64 {
        Kernel::now(self)
    }

    fn max_model_bytes(&self) -> usize {
        self.config.model_limits.max_bytes
    }

    fn scripts(&self) -> &ScriptEngine {
        &self.scripts
    }

    fn packages(&self) -> &PackageRegistry {
        &self.packages
    }

    fn gate_refusal(&self) -> Option<&'static str> {
        self.gates
            .refuses()
            .then_some(crate::engine::kernel::gates::NOT_ON_A_CLUSTER)
    }

    async fn write(&self, ops: Vec<BatchOp>) -> Result<(), EngineError> {
        Kernel::write(self, None, ops).await
    }

    async fn trigger_ops(&self, workflow: &Workflow) -> Result<Vec<BatchOp>, EngineError> {
        self.hooks.trigger_ops(self, workflow).await
    }

    async fn trigger_delete_ops(&self, id: &str) -> Result<Vec<BatchOp>, EngineError> {
        self.hooks.trigger_delete_ops(self, id).await
    }

    async fn arm_schedules(&self) -> Result<(), EngineError> {
        self.hooks.arm_schedules(self).await
    }
}

#[async_trait]
impl PackageHost for Kernel {
    async fn act(
        &self,
        pid: &str,
        tid: &str,
        action: Action,
        options: Vars,
    ) -> Result<(), EngineError> {
        Kernel::act(self, pid, tid, action, options, None).await
    }

    fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }
}
