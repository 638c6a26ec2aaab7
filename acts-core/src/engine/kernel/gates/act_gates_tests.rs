//! Unit tests of `act_gates.rs`.

use super::*;
use crate::scheduler::RateGate;

fn keyed(key: &str, limit: u32, since: i64) -> TaskGate {
    TaskGate {
        key: Some(key.into()),
        limit,
        rate: None,
        since,
        seq: 0,
    }
}

fn rated(per_second: f64, burst: u32, since: i64) -> TaskGate {
    TaskGate {
        key: None,
        limit: 0,
        rate: Some(RateGate {
            key: "r".into(),
            per_second,
            burst,
        }),
        since,
        seq: 0,
    }
}

fn id(pid: &str, tid: &str) -> GateId {
    (pid.into(), tid.into())
}

#[test]
fn a_full_key_lets_the_oldest_waiter_through_when_a_task_ends() {
    let mut g = ActGates::new(0);
    assert!(g.ask("p1", "a", &keyed("k", 1, 1), &QueueOrder::default(), 1));
    assert!(!g.ask("p3", "a", &keyed("k", 1, 3), &QueueOrder::default(), 3));
    assert!(!g.ask("p2", "a", &keyed("k", 1, 2), &QueueOrder::default(), 3));
    // Another key is independent; asking again changes nothing.
    assert!(g.ask("p4", "a", &keyed("other", 1, 4), &QueueOrder::default(), 4));
    assert!(!g.ask("p2", "a", &keyed("k", 1, 2), &QueueOrder::default(), 5));
    assert_eq!(g.ended("p1", "a", 6), vec![id("p2", "a")]);
    assert!(
        g.ask("p2", "a", &keyed("k", 1, 2), &QueueOrder::default(), 6),
        "open once let through"
    );
    // A waiter that goes frees nothing; the holder's end lets none
    // through when nobody waits.
    assert!(g.ended("p3", "a", 7).is_empty());
    assert!(g.ended("p2", "a", 8).is_empty());
    assert!(g.keys().iter().all(|k| k.key != "k"));
    assert!(!g.has("p2"));
}

#[test]
fn a_higher_priority_process_goes_first_and_tenants_take_turns() {
    let mut g = ActGates::new(0);
    let order = |priority, fairness: &str| QueueOrder {
        priority,
        fairness: fairness.into(),
    };
    assert!(g.ask("h", "t", &keyed("k", 1, 0), &QueueOrder::default(), 0));
    for (pid, o) in [
        ("low", order(1, "")),
        ("a1", order(3, "a")),
        ("a2", order(3, "a")),
        ("b1", order(3, "b")),
        ("vip", order(5, "")),
    ] {
        assert!(!g.ask(pid, "t", &keyed("k", 1, 1), &o, 1));
    }
    let mut out = Vec::new();
    let mut holder = "h".to_owned();
    for _ in 0..5 {
        let next = g.ended(&holder, "t", 2);
        holder = next[0].0.clone();
        out.push(holder.clone());
    }
    assert_eq!(out, ["vip", "a1", "b1", "a2", "low"]);
}

#[test]
fn each_waiter_counts_against_its_own_limit_in_order() {
    let mut g = ActGates::new(0);
    assert!(g.ask("a", "t", &keyed("k", 2, 1), &QueueOrder::default(), 1));
    assert!(g.ask("b", "t", &keyed("k", 2, 2), &QueueOrder::default(), 2));
    assert!(!g.ask("w", "t", &keyed("k", 2, 3), &QueueOrder::default(), 3));
    // A later ask with a higher limit still waits behind `w`.
    assert!(!g.ask("late", "t", &keyed("k", 5, 4), &QueueOrder::default(), 4));
    assert_eq!(g.ended("a", "t", 5), vec![id("w", "t"), id("late", "t")]);
}

#[test]
fn a_bucket_starts_empty_at_the_start_and_refills_at_its_rate() {
    // Started at 1,000 ms; 2 a second, bursts of 3.
    let mut g = ActGates::new(1_000);
    assert!(
        !g.ask(
            "p",
            "1",
            &rated(2.0, 3, 1_000),
            &QueueOrder::default(),
            1_000
        ),
        "no burst at a start"
    );
    assert_eq!(g.next_token_at(), Some(1_500));
    assert!(g.refill(1_499).is_empty());
    assert_eq!(g.refill(1_500), vec![id("p", "1")]);
    assert_eq!(g.next_token_at(), None);
    // After a quiet spell the bucket holds `burst` tokens, no more.
    for t in ["2", "3", "4"] {
        assert!(g.ask(
            "p",
            t,
            &rated(2.0, 3, 10_000),
            &QueueOrder::default(),
            10_000
        ));
    }
    assert!(!g.ask(
        "p",
        "5",
        &rated(2.0, 3, 10_000),
        &QueueOrder::default(),
        10_000
    ));
    assert!(!g.ask(
        "q",
        "1",
        &rated(2.0, 3, 10_001),
        &QueueOrder::default(),
        10_001
    ));
    assert_eq!(g.next_token_at(), Some(10_500));
    assert_eq!(g.refill(11_000), vec![id("p", "5"), id("q", "1")]);
    // Nobody waits: once full again the bucket is dropped, and one made
    // anew holds the same (full) budget.
    assert!(g.refill(20_000).is_empty());
    assert!(g.keys().is_empty(), "{:?}", g.keys());
    for t in ["6", "7"] {
        assert!(g.ask(
            "p",
            t,
            &rated(2.0, 3, 20_000),
            &QueueOrder::default(),
            20_000
        ));
    }
}

#[test]
fn a_slot_is_held_while_its_task_waits_for_a_token() {
    let mut g = ActGates::new(0);
    let both = |since| TaskGate {
        rate: rated(1.0, 1, since).rate,
        ..keyed("k", 1, since)
    };
    assert!(
        !g.ask("a", "t", &both(0), &QueueOrder::default(), 0),
        "holds the slot, waits for a token"
    );
    assert!(
        !g.ask("b", "t", &both(1), &QueueOrder::default(), 1),
        "waits for the slot"
    );
    assert_eq!(g.refill(1_000), vec![id("a", "t")]);
    assert!(g.refill(5_000).is_empty(), "b still waits for the slot");
    // a ends: b takes the slot and the token the bucket holds.
    assert_eq!(g.ended("a", "t", 5_000), vec![id("b", "t")]);
}

#[test]
fn a_restore_counts_open_tasks_before_it_lets_waiters_through() {
    let mut g = ActGates::new(0);
    let found = |tid: &str, since, open| GateUse {
        tid: tid.into(),
        gate: keyed("k", 1, since),
        open,
    };
    let opened = g.restore(
        vec![
            ("w2".into(), found("t", 2, false), QueueOrder::default()),
            ("w".into(), found("t", 1, false), QueueOrder::default()),
            ("h".into(), found("t", 0, true), QueueOrder::default()),
        ],
        5,
    );
    assert!(opened.is_empty(), "the open task keeps the only slot");
    assert_eq!(g.ended_all("h", 6), vec![id("w", "t")], "the oldest first");
    assert_eq!(g.ended_all("w", 7), vec![id("w2", "t")]);
    // With the slot free, the oldest waiter found takes it, whatever
    // order the rows came in.
    let mut g = ActGates::new(0);
    let opened = g.restore(
        vec![
            ("late".into(), found("t", 9, false), QueueOrder::default()),
            ("early".into(), found("t", 3, false), QueueOrder::default()),
        ],
        10,
    );
    assert_eq!(opened, vec![id("early", "t")]);
}
