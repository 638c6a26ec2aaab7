//! [`SealedData`]: the registry of externally fed, versioned data that
//! tasks seal at prepare (the reference's §7.3).
//!
//! An application registers named targets ([`SealOptions`]: policy,
//! scope variables, what to do when something is missing, TTL) and pushes
//! data per scope with a revision ([`SealedData::upsert`]). When a task is
//! prepared, each target's current value for the task's scope is sealed
//! into the task (`$<name>` in its scripts, read-only) and persisted with
//! the task's scope, so a resumed process sees what it sealed. Entries
//! expire `ttl_secs` after their last refresh: expired entries read as
//! absent and the engine's housekeeping timer drops them. The registry is
//! memory-only; keeping the source durable is the feeder's job.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::model::Vars;
use crate::scheduler::seal::{OnMissing, SealPolicy, SealTarget, Seals};
use crate::time::Clock;

use crate::engine::types::error::EngineError;

/// The longest TTL (seconds) a target may have.
pub const MAX_TTL_SECS: u64 = (i64::MAX / 1000) as u64;

/// How a target is sealed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SealOptions {
    /// Once per task lineage (default) or for every task.
    pub policy: SealPolicy,
    /// Task variables whose values, joined by `/`, form the scope key
    /// (empty: the one scope `""`).
    pub scope: Vec<String>,
    /// Skip (default) or fail the task when a scope variable or the data
    /// is missing.
    pub on_missing: OnMissing,
    /// Entry lifetime since its last refresh (`None`: forever).
    pub ttl_secs: Option<u64>,
}

impl SealOptions {
    /// Sealed once per lineage.
    pub fn per_proc() -> Self {
        Self::default()
    }

    /// Sealed for every task.
    pub fn per_task() -> Self {
        Self {
            policy: SealPolicy::PerTask,
            ..Self::default()
        }
    }

    /// With a TTL.
    pub fn with_ttl(mut self, secs: u64) -> Self {
        self.ttl_secs = Some(secs);
        self
    }

    /// With scope variables.
    pub fn with_scope(mut self, vars: &[&str]) -> Self {
        self.scope = vars.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Failing the task when something is missing.
    pub fn or_error(mut self) -> Self {
        self.on_missing = OnMissing::Error;
        self
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), EngineError> {
        if let Some(ttl) = self.ttl_secs
            && ttl > MAX_TTL_SECS
        {
            return Err(EngineError::Seal(format!(
                "snapshot ttl {ttl}s exceeds the maximum of {MAX_TTL_SECS}s"
            )));
        }
        Ok(())
    }
}

/// One scope's data.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SealedEntry {
    /// Revision: a newer one replaces the data.
    pub rev: u64,
    /// The data.
    pub data: Vars,
    /// When it was last refreshed (ms on the engine clock).
    pub timestamp: i64,
}

struct Target {
    options: SealOptions,
    entries: HashMap<String, SealedEntry>,
}

impl Target {
    fn expired(&self, e: &SealedEntry, now: i64) -> bool {
        self.options
            .ttl_secs
            .is_some_and(|ttl| now.saturating_sub(e.timestamp) >= (ttl as i64).saturating_mul(1000))
    }
}

/// The registry (see the module docs).
pub struct SealedData {
    targets: RwLock<HashMap<String, Target>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SealedData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.targets.read().keys().cloned().collect();
        f.debug_struct("SealedData")
            .field("targets", &names)
            .finish()
    }
}

fn check_name(name: &str) -> Result<(), EngineError> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(EngineError::Seal(format!(
            "snapshot name '{name}' must be an identifier (letters, digits, '_'): scripts read it as ${name}"
        )));
    }
    if crate::script::HELPER_NAMES.contains(&name) {
        return Err(EngineError::Seal(format!(
            "snapshot name '{name}' is taken by the script helper ${name}"
        )));
    }
    Ok(())
}

impl SealedData {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            targets: RwLock::new(HashMap::new()),
            clock,
        }
    }

    /// Registers target `name` (re-registering replaces it and drops its
    /// data).
    pub fn register(&self, name: &str, options: SealOptions) -> Result<(), EngineError> {
        check_name(name)?;
        options.validate()?;
        self.targets.write().insert(
            name.to_owned(),
            Target {
                options,
                entries: HashMap::new(),
            },
        );
        Ok(())
    }

    /// Pushes `data` at revision `rev` for `scope` (registering `name` with
    /// the default options if needed): a newer revision replaces the data,
    /// the same one only refreshes it, an older one is ignored.
    pub fn upsert(&self, name: &str, scope: &str, rev: u64, data: Vars) -> Result<(), EngineError> {
        check_name(name)?;
        let now = self.clock.now_millis();
        let mut targets = self.targets.write();
        let target = targets.entry(name.to_owned()).or_insert_with(|| Target {
            options: SealOptions::default(),
            entries: HashMap::new(),
        });
        match target.entries.get_mut(scope) {
            Some(e) if rev < e.rev => {}
            Some(e) if rev == e.rev => e.timestamp = now,
            _ => {
                target.entries.insert(
                    scope.to_owned(),
                    SealedEntry {
                        rev,
                        data,
                        timestamp: now,
                    },
                );
            }
        }
        Ok(())
    }

    /// Removes `scope`'s data of target `name`.
    pub fn remove(&self, name: &str, scope: &str) -> Result<(), EngineError> {
        let mut targets = self.targets.write();
        let target = targets
            .get_mut(name)
            .ok_or_else(|| EngineError::Seal(format!("sealed data '{name}' is not registered")))?;
        target.entries.remove(scope);
        Ok(())
    }

    /// The live entry of `scope` (an expired one is dropped and reads as
    /// absent).
    pub fn read(&self, name: &str, scope: &str) -> Option<SealedEntry> {
        let now = self.clock.now_millis();
        {
            let targets = self.targets.read();
            let target = targets.get(name)?;
            let e = target.entries.get(scope)?;
            if !target.expired(e, now) {
                return Some(e.clone());
            }
        }
        let mut targets = self.targets.write();
        if let Some(target) = targets.get_mut(name) {
            // Drop it only if it is still the expired entry we saw.
            let expired = target
                .entries
                .get(scope)
                .is_some_and(|e| target.expired(e, now));
            if expired {
                target.entries.remove(scope);
            }
        }
        None
    }

    /// Every live entry of target `name`, by scope.
    pub fn list(&self, name: &str) -> Vec<(String, SealedEntry)> {
        let now = self.clock.now_millis();
        let targets = self.targets.read();
        let Some(target) = targets.get(name) else {
            return Vec::new();
        };
        let mut out: Vec<(String, SealedEntry)> = target
            .entries
            .iter()
            .filter(|(_, e)| !target.expired(e, now))
            .map(|(s, e)| (s.clone(), e.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Drops the expired entries of targets with a TTL; returns how many.
    pub(crate) fn sweep(&self, now: i64) -> usize {
        let mut dropped = 0;
        for target in self.targets.write().values_mut() {
            if target.options.ttl_secs.is_none() {
                continue;
            }
            let before = target.entries.len();
            let ttl = target.options.ttl_secs;
            target.entries.retain(|_, e| {
                !ttl.is_some_and(|t| {
                    now.saturating_sub(e.timestamp) >= (t as i64).saturating_mul(1000)
                })
            });
            dropped += before - target.entries.len();
        }
        dropped
    }
}

impl Seals for SealedData {
    fn targets(&self) -> Vec<SealTarget> {
        let mut out: Vec<SealTarget> = self
            .targets
            .read()
            .iter()
            .map(|(name, t)| SealTarget {
                name: name.clone(),
                policy: t.options.policy,
                scope: t.options.scope.clone(),
                on_missing: t.options.on_missing,
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn read(&self, name: &str, scope: &str) -> Option<Vars> {
        SealedData::read(self, name, scope).map(|e| e.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::ManualClock;
    use serde_json::json;
    use std::time::Duration;

    fn data(v: serde_json::Value) -> Vars {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn revisions_replace_refresh_or_are_ignored() {
        let clock = ManualClock::new(1_000);
        let s = SealedData::new(Arc::new(clock.clone()));
        s.upsert("prices", "eu", 2, data(json!({"a": 2}))).unwrap();
        s.upsert("prices", "eu", 1, data(json!({"a": 1}))).unwrap();
        assert_eq!(
            s.read("prices", "eu").unwrap().data["a"],
            2,
            "older ignored"
        );
        clock.advance(Duration::from_secs(5));
        s.upsert("prices", "eu", 2, data(json!({"a": 99}))).unwrap();
        let e = s.read("prices", "eu").unwrap();
        assert_eq!(
            (e.data["a"].clone(), e.timestamp),
            (json!(2), 6_000),
            "same rev refreshes only"
        );
        s.upsert("prices", "eu", 3, data(json!({"a": 3}))).unwrap();
        assert_eq!(s.read("prices", "eu").unwrap().data["a"], 3);
        assert!(s.remove("nope", "eu").is_err());
        s.remove("prices", "eu").unwrap();
        assert!(s.read("prices", "eu").is_none());
    }

    #[test]
    fn ttl_expires_on_read_and_on_sweep() {
        let clock = ManualClock::new(0);
        let s = SealedData::new(Arc::new(clock.clone()));
        s.register("fx", SealOptions::per_task().with_ttl(60))
            .unwrap();
        s.upsert("fx", "a", 1, data(json!({"r": 1}))).unwrap();
        s.upsert("fx", "b", 1, data(json!({"r": 2}))).unwrap();
        clock.advance(Duration::from_secs(59));
        assert!(s.read("fx", "a").is_some());
        clock.advance(Duration::from_secs(1));
        assert!(s.read("fx", "a").is_none(), "expired at its TTL");
        assert_eq!(s.list("fx").len(), 0);
        assert_eq!(s.sweep(clock.now_millis()), 1, "b dropped by the sweep");
        assert!(
            s.register("fx", SealOptions::default().with_ttl(u64::MAX))
                .is_err()
        );
        assert!(
            s.register("get", SealOptions::default()).is_err(),
            "reserved"
        );
        assert!(
            s.register("a-b", SealOptions::default()).is_err(),
            "not an identifier"
        );
    }
}
