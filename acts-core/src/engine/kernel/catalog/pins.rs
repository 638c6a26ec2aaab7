//! The pins that keep a start's model version from being deleted
//! ([`VersionPin`]) and a removal's mark on the versions it deletes
//! ([`GoingMark`]); how removals use them: `versions.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

type VersionKey = (String, u32);

/// The versions in use by starts, and those a removal is deleting.
#[derive(Default)]
pub(crate) struct Pins {
    counts: HashMap<VersionKey, usize>,
    going: HashSet<VersionKey>,
}

/// A start's hold on a model version: while it lives, the version is not
/// deleted. Dropped once the process row naming the version is durable
/// (or the start failed).
pub(crate) struct VersionPin {
    pins: Arc<parking_lot::Mutex<Pins>>,
    key: VersionKey,
}

impl VersionPin {
    /// Pins version `revision` of `mid`; `None` while a removal deletes it.
    pub(crate) fn take(
        pins: &Arc<parking_lot::Mutex<Pins>>,
        mid: &str,
        revision: u32,
    ) -> Option<Self> {
        let key = (mid.to_owned(), revision);
        let mut p = pins.lock();
        if p.going.contains(&key) {
            return None;
        }
        *p.counts.entry(key.clone()).or_default() += 1;
        Some(Self {
            pins: pins.clone(),
            key,
        })
    }
}

impl Drop for VersionPin {
    fn drop(&mut self) {
        let mut p = self.pins.lock();
        if let Some(n) = p.counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                p.counts.remove(&self.key);
            }
        }
    }
}

/// A removal's mark on the versions it may delete; lifted when dropped.
pub(crate) struct GoingMark {
    pins: Arc<parking_lot::Mutex<Pins>>,
    keys: Vec<VersionKey>,
}

impl GoingMark {
    /// Marks `revisions` of `mid` as going; returns the mark and the
    /// revisions a start holds (those must be kept).
    pub(crate) fn set(
        pins: &Arc<parking_lot::Mutex<Pins>>,
        mid: &str,
        revisions: &[u32],
    ) -> (Self, Vec<u32>) {
        let mut p = pins.lock();
        let mut pinned = Vec::new();
        let keys: Vec<VersionKey> = revisions.iter().map(|r| (mid.to_owned(), *r)).collect();
        for k in &keys {
            p.going.insert(k.clone());
            if p.counts.contains_key(k) {
                pinned.push(k.1);
            }
        }
        drop(p);
        (
            Self {
                pins: pins.clone(),
                keys,
            },
            pinned,
        )
    }
}

impl Drop for GoingMark {
    fn drop(&mut self) {
        let mut p = self.pins.lock();
        for k in &self.keys {
            p.going.remove(k);
        }
    }
}
