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
    /// Per pid, the instances built (dead ones pruned as the pid's next
    /// instance is built, and every pid's once the map has doubled).
    handles: std::collections::HashMap<String, Vec<Weak<ProcHandle>>>,
    /// The map's size after the last full prune.
    pruned_at: usize,
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
            let same = t.handles.entry(handle.pid().to_owned()).or_default();
            same.retain(|w| w.strong_count() > 0);
            let others: Vec<String> = same
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|h| is_live(h))
                .map(|h| describe(&h))
                .collect();
            same.push(Arc::downgrade(handle));
            if !others.is_empty() {
                let fault = format!(
                    "process '{}': a new instance was built while another was alive ({})",
                    handle.pid(),
                    others.join(", ")
                );
                t.faults.push(fault);
            }
            // Amortized: a full prune each time the map has doubled.
            if t.handles.len() > 2 * t.pruned_at.max(512) {
                t.handles.retain(|_, v| {
                    v.retain(|w| w.strong_count() > 0);
                    !v.is_empty()
                });
                t.pruned_at = t.handles.len();
            }
        }
        #[cfg(not(feature = "testing"))]
        let _ = handle;
    }

    /// The pids of the instances someone still holds (live or not).
    #[cfg(feature = "testing")]
    pub(crate) fn held(&self) -> Vec<String> {
        let t = self.inner.lock();
        let mut out: Vec<String> = t
            .handles
            .iter()
            .filter(|(_, v)| v.iter().any(|w| w.strong_count() > 0))
            .map(|(pid, _)| pid.clone())
            .collect();
        out.sort();
        out
    }

    /// Every fault seen: doubles noted as instances were built, and now
    /// (call it when the engine is idle) any pid with more than one live
    /// instance or a live instance that is not the resident one.
    #[cfg(feature = "testing")]
    pub(crate) fn faults(&self, cache: &Cache) -> Vec<String> {
        let mut t = self.inner.lock();
        t.handles.retain(|_, v| {
            v.retain(|w| w.strong_count() > 0);
            !v.is_empty()
        });
        t.pruned_at = t.handles.len();
        let mut out = t.faults.clone();
        let mut live: std::collections::BTreeMap<String, Vec<Arc<ProcHandle>>> =
            std::collections::BTreeMap::new();
        for h in t.handles.values().flatten().filter_map(Weak::upgrade) {
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

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::engine::persist::Persisted;
    use crate::engine::persist::rows::ProcRow;
    use crate::model::{Vars, Workflow};
    use crate::scheduler::Process;
    use crate::tree::ModelTree;

    fn instance(pid: &str) -> Arc<ProcHandle> {
        let w = Workflow::new().with_id("m").with_step(|s| s.with_id("s1"));
        // A model of one plain step builds (checked by the model tests).
        let tree = Arc::new(ModelTree::build(&w).expect("a valid model"));
        let row = ProcRow::unstarted(pid, "m", 1, 0, Vars::new());
        ProcHandle::new(
            Process::new(pid, tree, Vars::new()),
            Persisted::fresh(row),
            0,
        )
    }

    #[test]
    fn a_second_live_instance_of_a_pid_is_a_fault() {
        let tracked = Instances::default();
        let cache = Cache::new(10, 10);
        let first = instance("p1");
        tracked.track(&first);
        tracked.track(&instance("p2"));
        // Neither is resident: both live outside the resident set.
        assert_eq!(tracked.faults(&cache).len(), 1, "only p1 is still held");
        let second = instance("p1");
        tracked.track(&second);
        let faults = tracked.faults(&cache);
        assert!(
            faults
                .iter()
                .any(|f| f.contains("a new instance was built while another was alive")),
            "{faults:?}"
        );
        assert!(
            faults.iter().any(|f| f.contains("2 live instances")),
            "{faults:?}"
        );
    }

    #[test]
    fn an_instance_built_after_the_last_one_is_gone_is_no_fault() {
        let tracked = Instances::default();
        let cache = Cache::new(10, 10);
        let first = instance("p1");
        tracked.track(&first);
        drop(first);
        let second = instance("p1");
        tracked.track(&second);
        // An unloaded instance (its process dropped) cannot act any more.
        second.lane.try_lock().expect("free").process = None;
        assert_eq!(tracked.faults(&cache), Vec::<String>::new());
    }
}
