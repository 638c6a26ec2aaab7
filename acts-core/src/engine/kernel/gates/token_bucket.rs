//! [`Bucket`]: a rate key's token bucket and the tasks waiting for its
//! tokens (see `act_gates.rs`).

use crate::engine::kernel::fair_queue::FairQueue;

/// `burst` tokens at most, `per_second` added, the waiters in order.
#[derive(Debug)]
pub(crate) struct Bucket {
    tokens: f64,
    /// When `tokens` was last brought up to date (ms).
    at: i64,
    per_second: f64,
    burst: u32,
    /// The tasks waiting for a token, in the order they get one.
    pub(crate) waiting: FairQueue,
}

impl Bucket {
    /// An empty bucket at `at` (ms).
    pub(crate) fn empty_at(at: i64, per_second: f64, burst: u32) -> Self {
        Self {
            tokens: 0.0,
            at,
            per_second,
            burst,
            waiting: FairQueue::default(),
        }
    }

    /// Takes the latest model's figures.
    pub(crate) fn set_rate(&mut self, per_second: f64, burst: u32) {
        self.per_second = per_second;
        self.burst = burst;
    }

    /// Spends a token if one is there.
    pub(crate) fn take(&mut self) -> bool {
        let there = self.tokens >= 1.0;
        if there {
            self.tokens -= 1.0;
        }
        there
    }

    /// Adds the tokens of the time since it was last brought up to date.
    pub(crate) fn refill(&mut self, now: i64) {
        if now > self.at {
            let added = (now - self.at) as f64 * self.per_second / 1000.0;
            self.tokens = (self.tokens + added).min(f64::from(self.burst));
            self.at = now;
        }
    }

    /// Whether it holds `burst` tokens (as of its last refill).
    pub(crate) fn is_full(&self) -> bool {
        self.tokens >= f64::from(self.burst)
    }

    /// When the next token is there (ms).
    pub(crate) fn next_token_at(&self) -> i64 {
        let missing = (1.0 - self.tokens).max(0.0);
        self.at + (missing * 1000.0 / self.per_second).ceil() as i64
    }
}
