//! [`StoreIo`]: what a networked store has sent and received so far — the
//! cost of a transition in round trips, commands and bytes, which the
//! benchmarks report per operation, per commit and per idle second.

/// Counters of a store's traffic since it was opened: of its namespace
/// (clones share them; the store of another namespace on the same
/// connection counts its own, so a sum over namespaces counts each
/// request once). Take two readings and subtract ([`since`](Self::since)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreIo {
    /// Requests that waited for the server's answer (a pipeline is one).
    pub round_trips: u64,
    /// Commands or statements sent (a pipeline of n is n).
    pub commands: u64,
    /// Bytes of the requests as sent on the wire.
    pub bytes_out: u64,
    /// Bytes of the answers' payload (the values and their framing as
    /// the client decoded them; close to the wire's).
    pub bytes_in: u64,
}

impl StoreIo {
    /// The traffic between `earlier` and this reading.
    pub fn since(&self, earlier: &StoreIo) -> StoreIo {
        StoreIo {
            round_trips: self.round_trips.saturating_sub(earlier.round_trips),
            commands: self.commands.saturating_sub(earlier.commands),
            bytes_out: self.bytes_out.saturating_sub(earlier.bytes_out),
            bytes_in: self.bytes_in.saturating_sub(earlier.bytes_in),
        }
    }
}

/// The traffic of two stores together.
impl std::ops::Add for StoreIo {
    type Output = StoreIo;

    fn add(self, other: StoreIo) -> StoreIo {
        StoreIo {
            round_trips: self.round_trips + other.round_trips,
            commands: self.commands + other.commands,
            bytes_out: self.bytes_out + other.bytes_out,
            bytes_in: self.bytes_in + other.bytes_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StoreIo;

    #[test]
    fn a_difference_of_readings_never_underflows() {
        let a = StoreIo {
            round_trips: 10,
            commands: 12,
            bytes_out: 1000,
            bytes_in: 400,
        };
        let b = StoreIo {
            round_trips: 4,
            commands: 5,
            bytes_out: 600,
            bytes_in: 100,
        };
        assert_eq!(
            a.since(&b),
            StoreIo {
                round_trips: 6,
                commands: 7,
                bytes_out: 400,
                bytes_in: 300
            }
        );
        assert_eq!(b.since(&a), StoreIo::default());
        assert_eq!((a + b).since(&b), a);
    }
}
