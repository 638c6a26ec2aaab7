//! acts-sim's integration tests, one binary: the simulator's seeds on one
//! engine and on a cluster.

mod cluster;
mod sim;
