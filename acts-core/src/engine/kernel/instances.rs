//! One instance per pid, checked (feature `testing`): every process
//! instance the engine builds ([`ProcHandle`]) is tracked weakly, so a test
//! or the simulator can ask whether two instances of one pid were ever
//! alive together, or whether one lives outside the resident set. Without
//! the feature the tracker is empty and costs nothing.

#[cfg(feature = "testing")]
use std::sync::{Arc, Weak};

#[cfg(feature = "testing")]
use crate::engine::kernel::cache::Cache;
use crate::engine::kernel::handle::ProcHandle;

/// The instances built so far (weak), and the doubles seen as they were
/// built.
#[derive(Debug, Default)]
pub(crate) struct Instances {
    #[cfg(feature = "testing")]
    inner: parking_lot::Mutex<Tracked>,
}

#[cfg(feature = "testing")]
#[derive(Debug, Default)]
struct Tracked {
    handles: Vec<Weak<ProcHandle>>,
    faults: Vec<String>,
}

/// Whether `h` could still apply a transition: its lane is busy (a caller
/// is in a transition with it) or it holds a process in flight (a
/// finished one, still held by a caller that read it or by a retry queue,
/// takes no action any more: a retry or a new start loads it again).
#[cfg(feature = "testing")]
fn is_live(h: &ProcHandle) -> bool {
    match h.lane.try_lock() {
        Ok(slot) => slot
            .process
            .as_ref()
            .is_some_and(|p| !p.state().is_terminal()),
        Err(_) => true,
    }
}

/// How a tracked instance stands (for a fault's message).
#[cfg(feature = "testing")]
fn describe(h: &Arc<ProcHandle>) -> String {
    let held = Arc::strong_count(h) - 1;
    match h.lane.try_lock() {
        Ok(slot) => format!(
            "born {}, {held} holder(s), {}",
            h.born,
            slot.process
                .as_ref()
                .map_or("unloaded".to_owned(), |p| format!("state {}", p.state()))
        ),
        Err(_) => format!("born {}, {held} holder(s), lane busy", h.born),
    }
}

impl Instances {
    /// Tracks a new instance; notes a fault when another live instance of
    /// its pid exists.
    #[cfg_attr(not(feature = "testing"), allow(clippy::unused_self))]
    pub(crate) fn track(&self, handle: &std::sync::Arc<ProcHandle>) {
        #[cfg(feature = "testing")]
        {
            let mut t = self.inner.lock();
            t.handles.retain(|w| w.strong_count() > 0);
            let others: Vec<String> = t
                .handles
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|h| h.pid() == handle.pid() && is_live(h))
                .map(|h| describe(&h))
                .collect();
            if !others.is_empty() {
                t.faults.push(format!(
                    "process '{}': a new instance was built while another was alive ({})",
                    handle.pid(),
                    others.join(", ")
                ));
            }
            t.handles.push(Arc::downgrade(handle));
        }
        #[cfg(not(feature = "testing"))]
        let _ = handle;
    }

    /// Every fault seen: doubles noted as instances were built, and now
    /// (call it when the engine is idle) any pid with more than one live
    /// instance or a live instance that is not the resident one.
    #[cfg(feature = "testing")]
    pub(crate) fn faults(&self, cache: &Cache) -> Vec<String> {
        let mut t = self.inner.lock();
        t.handles.retain(|w| w.strong_count() > 0);
        let mut out = t.faults.clone();
        let mut live: std::collections::BTreeMap<String, Vec<Arc<ProcHandle>>> =
            std::collections::BTreeMap::new();
        for h in t.handles.iter().filter_map(Weak::upgrade) {
            if is_live(&h) {
                live.entry(h.pid().to_owned()).or_default().push(h);
            }
        }
        for (pid, hs) in live {
            if hs.len() > 1 {
                out.push(format!("process '{pid}': {} live instances", hs.len()));
            }
            let resident = cache.resident_handle(&pid);
            if hs
                .iter()
                .any(|h| !resident.as_ref().is_some_and(|r| Arc::ptr_eq(r, h)))
            {
                let what: Vec<String> = hs.iter().map(describe).collect();
                out.push(format!(
                    "process '{pid}': a live instance outside the resident set ({}; resident: {})",
                    what.join(", "),
                    resident.as_ref().map_or("none".into(), describe)
                ));
            }
        }
        out
    }
}
