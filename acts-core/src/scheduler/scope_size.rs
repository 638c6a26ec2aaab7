//! The size of each task's data (its scope), kept as data is written, and
//! the per-scope limit: a write that would pass it is not made.

use serde_json::Value;

use crate::model::Vars;

use super::tasks::{TaskIx, TaskTable};

/// Counts the bytes of a value's JSON text without building it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `value`'s JSON text, counted without building it.
pub fn json_len(value: &impl serde::Serialize) -> usize {
    let mut n = ByteCount(0);
    // Writing JSON into a counter cannot fail for map/value data; a value
    // that cannot be written counts what was written before the failure.
    let _ = serde_json::to_writer(&mut n, value);
    n.0
}

/// The size one entry adds to a scope's stored JSON text.
pub(super) fn entry_size(key: &str, value: &Value) -> usize {
    key.len() + 4 + json_len(value)
}

impl TaskTable {
    /// Sets the most bytes one task's data may hold (0: no limit); a write
    /// that would pass it is refused ([`take_refused`](Self::take_refused)).
    pub fn set_max_scope_bytes(&mut self, max: usize) {
        self.max_scope_bytes = max;
    }

    /// Why a data write was refused since the last call (a scope would
    /// have grown past its limit), if one was.
    pub fn take_refused(&mut self) -> Option<String> {
        self.refused.take()
    }

    /// The size of task `ix`'s data as stored (its JSON text, about).
    pub fn data_size(&self, ix: TaskIx) -> usize {
        self.sizes.get(ix.index()).copied().unwrap_or(0)
    }

    /// Why writing `vars` into task `ix`'s data would pass the scope limit,
    /// if it would (checked before a client action changes anything).
    pub fn would_refuse(&self, ix: TaskIx, vars: &Vars) -> Option<String> {
        let task = self.tasks.get(ix.index())?;
        let mut size = self.data_size(ix);
        for (k, v) in vars {
            size -= task
                .data
                .get(k)
                .map_or(0, |old| entry_size(k, old))
                .min(size);
            size += entry_size(k, v);
        }
        (self.max_scope_bytes > 0 && size > self.max_scope_bytes).then(|| {
            format!(
                "the options would grow task '{}''s data to {size} bytes, more than the limit of {} bytes (max_scope_bytes)",
                task.id, self.max_scope_bytes
            )
        })
    }

    /// Writes one entry into task `ix`'s data unless the scope would pass
    /// its limit (then nothing is written and the refusal is recorded).
    pub(super) fn put(&mut self, ix: TaskIx, key: &str, value: &Value) -> bool {
        let i = ix.index();
        let old = self.tasks[i]
            .data
            .get(key)
            .map_or(0, |v| entry_size(key, v));
        let new = entry_size(key, value);
        let size = self.sizes[i] - old.min(self.sizes[i]) + new;
        if self.max_scope_bytes > 0 && size > self.max_scope_bytes && new > old {
            if self.refused.is_none() {
                self.refused = Some(format!(
                    "task '{}': writing '{key}' ({new} bytes) would grow its data to {size} bytes, more than the limit of {} bytes (max_scope_bytes)",
                    self.tasks[i].id, self.max_scope_bytes
                ));
            }
            return false;
        }
        self.sizes[i] = size;
        self.data_mut(ix).insert(key.to_owned(), value.clone());
        true
    }

    /// Counts every task's data size from its data (after a restore).
    pub(super) fn recount_sizes(&mut self) {
        self.sizes = self
            .tasks
            .iter()
            .map(|t| t.data.iter().map(|(k, v)| entry_size(k, v)).sum())
            .collect();
    }
}
