//! What the group-commit writer has committed: counts and the buckets of
//! commit times and group sizes ([`WriterStats`]).

use std::sync::atomic::AtomicU64;

/// Upper bounds (inclusive, µs) of the buckets of
/// [`WriterStats::commit_micros_buckets`]; one more bucket holds the rest.
pub const COMMIT_MICROS_BOUNDS: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// Upper bounds (inclusive, batches) of the buckets of
/// [`WriterStats::group_size_buckets`]; one more bucket holds the rest.
pub const GROUP_SIZE_BOUNDS: [u64; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// What a writer has committed since it started ([`GroupCommitWriter::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterStats {
    /// Groups committed (one backend transaction each: one fsync on a
    /// store that syncs every commit).
    pub commits: u64,
    /// Batches (transitions' writes) in those groups.
    pub batches: u64,
    /// Groups whose commit failed.
    pub failures: u64,
    /// Time spent in the commits, µs.
    pub commit_micros: u64,
    /// How many commits (failed ones too) took at most each of
    /// [`COMMIT_MICROS_BOUNDS`] and not the one before (the last bucket:
    /// longer than all of them).
    pub commit_micros_buckets: [u64; 13],
    /// How many committed groups held at most each of
    /// [`GROUP_SIZE_BOUNDS`] batches and more than the one before (the
    /// last bucket: more than all of them).
    pub group_size_buckets: [u64; 11],
}

#[derive(Default)]
pub(super) struct WriterStatsCell {
    commits: AtomicU64,
    batches: AtomicU64,
    failures: AtomicU64,
    commit_micros: AtomicU64,
    commit_micros_buckets: [AtomicU64; 13],
    group_size_buckets: [AtomicU64; 11],
}

/// The bucket of `value` under `bounds` (the last for a value above all).
fn bucket(bounds: &[u64], value: u64) -> usize {
    bounds
        .iter()
        .position(|b| value <= *b)
        .unwrap_or(bounds.len())
}

impl WriterStatsCell {
    /// Counts one commit of `size` batches that took `micros` (`ok`:
    /// committed; else failed or refused).
    pub(super) fn record(&self, micros: u64, ok: bool, size: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.commit_micros.fetch_add(micros, Relaxed);
        self.commit_micros_buckets[bucket(&COMMIT_MICROS_BOUNDS, micros)].fetch_add(1, Relaxed);
        if ok {
            self.commits.fetch_add(1, Relaxed);
            self.batches.fetch_add(size, Relaxed);
            self.group_size_buckets[bucket(&GROUP_SIZE_BOUNDS, size)].fetch_add(1, Relaxed);
        } else {
            self.failures.fetch_add(1, Relaxed);
        }
    }

    /// The counts as they stand.
    pub(super) fn snapshot(&self) -> WriterStats {
        use std::sync::atomic::Ordering::Relaxed;
        WriterStats {
            commits: self.commits.load(Relaxed),
            batches: self.batches.load(Relaxed),
            failures: self.failures.load(Relaxed),
            commit_micros: self.commit_micros.load(Relaxed),
            commit_micros_buckets: std::array::from_fn(|i| {
                self.commit_micros_buckets[i].load(Relaxed)
            }),
            group_size_buckets: std::array::from_fn(|i| self.group_size_buckets[i].load(Relaxed)),
        }
    }
}
