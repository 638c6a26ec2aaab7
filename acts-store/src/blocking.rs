//! Running a backend's blocking calls without stalling the async workers
//! (feature `tokio`).

use crate::error::{ErrorKind, StoreError, StoreOp, StoreResult};

/// Runs `work` (a blocking database call: a commit that may fsync, a disk
/// read) on tokio's blocking pool when called inside a tokio runtime, and
/// inline otherwise. A panic inside `work` becomes a [`ErrorKind::Backend`]
/// error for `op`, not a panic of the caller.
pub async fn run_blocking<T: Send + 'static>(
    backend: &'static str,
    op: StoreOp,
    work: impl FnOnce() -> StoreResult<T> + Send + 'static,
) -> StoreResult<T> {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        StoreError::new(
            backend,
            op,
            ErrorKind::Backend,
            format!("the blocking {backend} call did not finish: {e}"),
        )
    })?
}
