//! Whether the engine can acknowledge work now: what `/readyz` answers.
//!
//! Ready means the next transition can commit: the engine is open and not
//! fenced, the store says it takes writes ([`KvStore::health`]: a Redis
//! that evicts keys does not, a file store broken by an I/O error does not
//! until it reopens), and — when the last commit failed — a probe commit
//! gets through. Nothing else proves that a store which failed a commit
//! takes writes again (a disk that is still full opens fine).
//!
//! [`KvStore::health`]: acts_store::KvStore::health

use crate::engine::persist::lease_rows::health_probe_op;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;

impl On<'_> {
    /// `Ok` when the next transition can commit; else why not.
    pub(crate) async fn readiness(&self) -> Result<(), EngineError> {
        self.check_open()?;
        self.store().health().await?;
        if self.writer().failing().is_some() {
            let probe = health_probe_op(self.clock().now_millis());
            self.write(None, vec![probe]).await?;
        }
        Ok(())
    }
}
