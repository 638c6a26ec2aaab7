//! Where things live: the partition of a process, and which live node owns
//! a partition (rendezvous hashing).
//!
//! Both are pure functions of their inputs, so every node computes the
//! same answer from the same membership — no coordinator.

/// The part of a pid its partition is hashed from. A subflow child's pid
/// is its parent's pid followed by `_` and the 8-character id of the task
/// that started it (nested children add more), so the child hashes like
/// its root process and lives in the same partition: a parent and its
/// children share one store namespace and one owner, and their
/// transitions never cross partitions.
pub fn routing_key(pid: &str) -> &str {
    let mut key = pid;
    while let Some((head, tail)) = key.rsplit_once('_') {
        if head.is_empty() || tail.len() != 8 || !tail.bytes().all(|b| b.is_ascii_alphanumeric()) {
            break;
        }
        key = head;
    }
    key
}

/// The partition (0..`partitions`) process `pid` belongs to.
pub fn partition_of(pid: &str, partitions: u32) -> u32 {
    let p = u64::from(partitions.max(1));
    // The remainder is below `partitions`, a u32.
    (mix(fnv1a(routing_key(pid).as_bytes())) % p) as u32
}

/// The partition that keeps the slots of concurrency key `key`: every
/// start of the key is routed there, so one engine counts its holders.
pub fn key_partition(key: &str, partitions: u32) -> u32 {
    let p = u64::from(partitions.max(1));
    let mut bytes = b"key\0".to_vec();
    bytes.extend_from_slice(key.as_bytes());
    (mix(fnv1a(&bytes)) % p) as u32
}

/// A new random pid of partition `p` (of `partitions`).
pub fn pid_in(p: u32, partitions: u32) -> String {
    loop {
        let pid = acts::long_id();
        if partition_of(&pid, partitions) == p {
            return pid;
        }
    }
}

/// The live node that should own `partition`: the one with the highest
/// score for it (rendezvous hashing). When a node joins or leaves, only
/// the partitions it wins or held move. `None` when no node is live.
pub fn owner_of(partition: u32, live: &[String]) -> Option<&str> {
    live.iter()
        .max_by_key(|node| (score(node, partition), node.as_str()))
        .map(String::as_str)
}

fn score(node: &str, partition: u32) -> u64 {
    let mut bytes = node.as_bytes().to_vec();
    bytes.push(0);
    bytes.extend_from_slice(&partition.to_be_bytes());
    mix(fnv1a(&bytes))
}

/// FNV-1a, 64 bits: stable across builds and platforms (every node must
/// agree), unlike the standard library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A finalizer (SplitMix64's) so that nearby inputs spread over the range.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_one_partition_and_pids_are_drawn_in_it() {
        let p = key_partition("customer-7", 16);
        assert_eq!(p, key_partition("customer-7", 16));
        for _ in 0..20 {
            assert_eq!(partition_of(&pid_in(p, 16), 16), p);
        }
        let spread: std::collections::HashSet<u32> = (0..200)
            .map(|i| key_partition(&format!("k{i}"), 16))
            .collect();
        assert!(
            spread.len() > 12,
            "keys spread over the partitions: {spread:?}"
        );
    }

    #[test]
    fn children_live_with_their_root() {
        assert_eq!(routing_key("order42"), "order42");
        assert_eq!(routing_key("order42_Ab3dE6gH"), "order42");
        assert_eq!(routing_key("order42_Ab3dE6gH_zz99YY00"), "order42");
        // Not a task id: kept.
        assert_eq!(routing_key("order_1"), "order_1");
        assert_eq!(routing_key("_Ab3dE6gH"), "_Ab3dE6gH");
        for p in [1, 7, 64] {
            assert_eq!(
                partition_of("x_Ab3dE6gH", p),
                partition_of("x", p),
                "{p} partitions"
            );
        }
    }

    #[test]
    fn pids_spread_over_partitions() {
        let mut counts = [0u32; 16];
        for i in 0..16_000 {
            counts[partition_of(&format!("pid{i}"), 16) as usize] += 1;
        }
        for (p, n) in counts.iter().enumerate() {
            assert!((800..1200).contains(n), "partition {p} got {n} of 16,000");
        }
    }

    #[test]
    fn a_joining_node_takes_only_what_it_wins() {
        let three: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
        let four: Vec<String> = ["n1", "n2", "n3", "n4"].map(String::from).to_vec();
        let mut moved = 0;
        let mut per_node = std::collections::HashMap::new();
        for p in 0..256 {
            let before = owner_of(p, &three).expect("live");
            let after = owner_of(p, &four).expect("live");
            *per_node.entry(after).or_insert(0) += 1;
            if before != after {
                assert_eq!(after, "n4", "partition {p} moved between old nodes");
                moved += 1;
            }
        }
        assert!((32..96).contains(&moved), "{moved} of 256 moved to n4");
        assert_eq!(per_node.len(), 4);
        assert_eq!(owner_of(3, &[]), None);
    }
}
