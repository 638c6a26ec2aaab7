//! Time: the injectable [`Clock`] ([`SystemClock`] in production,
//! [`ManualClock`] in tests) and the [`TimerService`] every timed behaviour
//! (retries, schedules, snapshot TTL, task timeouts) is scheduled on.
//!
//! May use: nothing else of the crate.

mod clock;
mod timers;

pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use timers::{Fired, TimerId, TimerService};
