//! Taking a finished process back into flight (an operator's retry of a
//! process that ended in an error).
//!
//! A finished process holds no admission place and no resident instance.
//! Reopening loads it, claims a place for it as a start does (refused with
//! `Busy` at the cap rather than parked: the caller is waiting for an
//! answer), and applies the change in one transition under its lane. If
//! the change is refused or its batch fails, the place is given back and
//! the process stays as stored. One instance per pid holds throughout: the
//! claim fails while any other instance of the pid is resident or loading
//! (a concurrent read; tried again a few times), and an instance loaded
//! before a removal cannot write after it (the writer's removal epoch).

use acts_store::BatchOp;

use crate::engine::kernel::cache::Admission;
use crate::engine::kernel::shared::Kernel;
use crate::engine::kernel::transition::Outcome;
use crate::engine::types::error::EngineError;
use crate::scheduler::{Process, Services};

/// How many times a reopen retries its claim while another instance of
/// the pid is being read.
const CLAIM_TRIES: usize = 100;

impl Kernel {
    /// Applies `f` to process `pid` in one transition, taking it back into
    /// flight first if it has finished (see the module docs); a process in
    /// flight is changed as any action changes it.
    pub(crate) async fn reopen<T>(
        &self,
        pid: &str,
        f: impl FnOnce(&mut Process, Services<'_>) -> Outcome<T>,
    ) -> Result<T, EngineError> {
        self.reopen_with(pid, Vec::new(), f).await
    }

    /// [`reopen`](Self::reopen) with `extra` ops in the change's batch.
    pub(crate) async fn reopen_with<T>(
        &self,
        pid: &str,
        extra: Vec<BatchOp>,
        f: impl FnOnce(&mut Process, Services<'_>) -> Outcome<T>,
    ) -> Result<T, EngineError> {
        self.check_open()?;
        let mut f = Some(f);
        for _ in 0..CLAIM_TRIES {
            let Some((handle, state)) = self.load(pid).await? else {
                return Err(EngineError::ProcessNotFound(pid.to_owned()));
            };
            if !state.is_terminal() {
                // In flight (or parked): the usual path.
                let f = f
                    .take()
                    .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))?;
                return self.on_process_with(pid, extra, f).await;
            }
            // A fresh instance: nobody else holds its lane.
            let Ok(guard) = handle.lane.clone().try_lock_owned() else {
                unreachable!("a new lane is unlocked");
            };
            let slot = guard.persisted.row.slot.clone();
            let order = guard.persisted.row.order.clone().unwrap_or_default();
            match self.admit_after_count(&handle, slot.as_ref(), &order).await {
                // Another instance is resident or loading (a read): let it
                // finish, then claim again.
                Err(()) => {
                    drop(guard);
                    tokio::task::yield_now().await;
                    continue;
                }
                Ok(Admission::Waiting) => {
                    self.cache.unpark(pid);
                    // Only a keyed process waits for its key.
                    let (key, limit) = slot.map(|s| (s.key, s.limit)).unwrap_or_default();
                    return Err(EngineError::KeyBusy {
                        pid: pid.to_owned(),
                        key,
                        limit,
                    });
                }
                Ok(Admission::Parked | Admission::Counting) => {
                    self.cache.unpark(pid);
                    return Err(EngineError::Busy {
                        pid: pid.to_owned(),
                        cap: self.cache.cap(),
                        waited: std::time::Duration::ZERO,
                    });
                }
                Ok(Admission::Admitted) => {
                    handle.hold_place();
                    let f = f
                        .take()
                        .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))?;
                    let out = self
                        .transition_locked(&handle, guard, extra, None, f, |t, _| t)
                        .await;
                    if out.is_err() {
                        // Still finished in the store: out of memory and
                        // out of admission again.
                        self.cache.forget(pid, &handle);
                        if handle.give_place_back() {
                            self.cache.release(pid);
                        }
                        self.refill();
                    }
                    return out;
                }
            }
        }
        Err(EngineError::Busy {
            pid: pid.to_owned(),
            cap: self.cache.cap(),
            waited: std::time::Duration::ZERO,
        })
    }
}
