//! [`PointReads`]: point reads asked at the same time, sent to a server as
//! one multi-key read — for the backends whose every call is a round trip
//! (Redis, PostgreSQL).
//!
//! The engine reads one key per call (is this process id taken? what does
//! this process hold?), and a burst makes thousands of such calls at once:
//! one round trip each would cost the server and the engine more than the
//! writes do. A reader task takes the reads waiting in its queue (up to
//! [`MAX_KEYS`] keys or [`MAX_KEY_BYTES`] of keys), reads them with one
//! multi-key call and answers each; at most [`IN_FLIGHT`] such calls run
//! at once, and what arrives meanwhile waits for the next. A read is sent
//! after it was asked, so it sees every write acknowledged before it was
//! asked.
//!
//! The queue holds at most [`QUEUE`] requests (a caller waits for room),
//! so at most `QUEUE` × [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes of keys.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::{StoreError, StoreOp, StoreResult};

/// Keys one multi-key read reads at most.
pub const MAX_KEYS: usize = 512;
/// Key bytes one multi-key read reads at most.
pub const MAX_KEY_BYTES: usize = 1 << 20;
/// Multi-key reads of one reader that run at once.
pub const IN_FLIGHT: usize = 4;
/// Requests the queue holds.
pub const QUEUE: usize = 1024;

type Reply = oneshot::Sender<StoreResult<Option<Vec<u8>>>>;

/// The values of `keys`, in order (`None`: absent), read with one call.
type ReadMany = dyn Fn(
        Vec<Vec<u8>>,
    ) -> std::pin::Pin<Box<dyn Future<Output = StoreResult<Vec<Option<Vec<u8>>>>> + Send>>
    + Send
    + Sync;

/// A queue of point reads, answered together (see the module docs).
/// Cheap to clone; the reader ends when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct PointReads {
    queue: mpsc::Sender<(Vec<u8>, Reply)>,
    batches: Arc<AtomicU64>,
}

impl PointReads {
    /// Starts a reader (a task on the current tokio runtime) that reads
    /// with `read_many`, which must not itself read through this queue.
    /// `None` outside a tokio runtime: then read directly.
    pub fn start<F, Fut>(read_many: F) -> Option<Self>
    where
        F: Fn(Vec<Vec<u8>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<Option<Vec<u8>>>>> + Send + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let read_many: Arc<ReadMany> = Arc::new(move |keys| Box::pin(read_many(keys)));
        let (queue, requests) = mpsc::channel(QUEUE);
        let batches = Arc::new(AtomicU64::new(0));
        runtime.spawn(reader(read_many, requests, batches.clone()));
        Some(Self { queue, batches })
    }

    /// Reads `key` with whatever else is asked meanwhile. `None` when the
    /// reader is gone (its runtime ended): the caller reads on its own.
    pub async fn get(&self, key: &[u8]) -> Option<StoreResult<Option<Vec<u8>>>> {
        let (reply, answer) = oneshot::channel();
        self.queue.send((key.to_vec(), reply)).await.ok()?;
        answer.await.ok()
    }

    /// How many multi-key reads the reader has made.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }
}

async fn reader(
    read_many: Arc<ReadMany>,
    mut requests: mpsc::Receiver<(Vec<u8>, Reply)>,
    batches: Arc<AtomicU64>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = requests.recv().await {
        // Wait for a slot first: what arrives meanwhile joins this batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = first.0.len();
        let mut batch = vec![first];
        while batch.len() < MAX_KEYS && bytes < MAX_KEY_BYTES {
            match requests.try_recv() {
                Ok(r) => {
                    bytes += r.0.len();
                    batch.push(r);
                }
                Err(_) => break,
            }
        }
        batches.fetch_add(1, Ordering::Relaxed);
        let read_many = read_many.clone();
        tokio::spawn(async move {
            let keys: Vec<Vec<u8>> = batch.iter().map(|(k, _)| k.clone()).collect();
            match read_many(keys).await {
                Ok(values) if values.len() == batch.len() => {
                    for ((_, reply), value) in batch.into_iter().zip(values) {
                        let _ = reply.send(Ok(value));
                    }
                }
                Ok(values) => {
                    let message = format!(
                        "a read of {} keys answered {} values",
                        batch.len(),
                        values.len()
                    );
                    for (_, reply) in batch {
                        let _ = reply.send(Err(StoreError::new(
                            "point reads",
                            StoreOp::Get,
                            crate::ErrorKind::Backend,
                            message.clone(),
                        )));
                    }
                }
                Err(e) => {
                    for (_, reply) in batch {
                        let _ = reply.send(Err(StoreError::new(
                            e.backend(),
                            StoreOp::Get,
                            e.kind(),
                            e.message().to_owned(),
                        )));
                    }
                }
            }
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::PointReads;
    use crate::{ErrorKind, StoreError, StoreOp};

    #[test]
    fn reads_asked_together_share_one_call_and_each_gets_its_value() {
        // One thread: every read is queued before the reader runs.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let calls = Arc::new(AtomicUsize::new(0));
            let seen = calls.clone();
            let reads = PointReads::start(move |keys: Vec<Vec<u8>>| {
                seen.fetch_add(1, Ordering::Relaxed);
                async move {
                    Ok(keys
                        .into_iter()
                        .map(|k| k[0].is_multiple_of(2).then(|| vec![k[0], 1]))
                        .collect())
                }
            })
            .expect("inside a runtime");
            let asks = (0..1000u32).map(|i| {
                let reads = reads.clone();
                async move { (i, reads.get(&[(i % 200) as u8]).await) }
            });
            for (i, got) in futures_util::future::join_all(asks).await {
                let k = (i % 200) as u8;
                let want = k.is_multiple_of(2).then(|| vec![k, 1]);
                assert_eq!(got.expect("the reader answers").expect("Ok"), want);
            }
            // join_all polls its futures in rounds, so the reader runs
            // between them: a few dozen calls, never one a read.
            let n = calls.load(Ordering::Relaxed);
            assert!((1..100).contains(&n), "1,000 reads took {n} calls");
            assert_eq!(reads.batches(), n as u64);

            let failing = PointReads::start(|_keys: Vec<Vec<u8>>| async {
                Err(StoreError::new(
                    "redis",
                    StoreOp::GetMany,
                    ErrorKind::Unavailable,
                    "down",
                ))
            })
            .expect("inside a runtime");
            let e = failing
                .get(b"k")
                .await
                .expect("answered")
                .expect_err("the call's failure is each read's");
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            assert_eq!(e.backend(), "redis");
        });
        assert!(
            PointReads::start(|_keys: Vec<Vec<u8>>| async { Ok(Vec::new()) }).is_none(),
            "outside a runtime there is no reader"
        );
    }
}
