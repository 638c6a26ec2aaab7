//! The fixed cases of the conformance suite (the model-based property test
//! lives in `model.rs`).

use std::collections::BTreeMap;
use std::ops::Bound;

use acts_store::{BatchOp, ErrorKind, KvPair, KvStore, MAX_KEY_LEN, ScanRange};

use super::heavy::{
    batches_are_atomic_to_concurrent_readers, concurrent_writers_all_land,
    damaged_store_is_an_error_not_empty, dump, reopen_keeps_exactly_the_committed_data,
};
use super::{Case, CaseFailure, CaseResult, Env};

pub(super) const ALL: &[Case] = &[
    Case {
        name: "point_reads_and_writes",
        durable_only: false,
        run: point_reads_and_writes,
    },
    Case {
        name: "get_many_reads_in_order",
        durable_only: false,
        run: get_many_reads_in_order,
    },
    Case {
        name: "batch_applies_in_order",
        durable_only: false,
        run: batch_applies_in_order,
    },
    Case {
        name: "scan_bounds_limits_and_direction",
        durable_only: false,
        run: scan_bounds_limits_and_direction,
    },
    Case {
        name: "scan_prefix_boundaries",
        durable_only: false,
        run: scan_prefix_boundaries,
    },
    Case {
        name: "large_values_round_trip",
        durable_only: false,
        run: large_values_round_trip,
    },
    Case {
        name: "oversized_input_is_rejected_and_changes_nothing",
        durable_only: false,
        run: oversized_input_is_rejected_and_changes_nothing,
    },
    Case {
        name: "batches_are_atomic_to_concurrent_readers",
        durable_only: false,
        run: batches_are_atomic_to_concurrent_readers,
    },
    Case {
        name: "concurrent_writers_all_land",
        durable_only: false,
        run: concurrent_writers_all_land,
    },
    Case {
        name: "reopen_keeps_exactly_the_committed_data",
        durable_only: true,
        run: reopen_keeps_exactly_the_committed_data,
    },
    Case {
        name: "damaged_store_is_an_error_not_empty",
        durable_only: true,
        run: damaged_store_is_an_error_not_empty,
    },
];

/// Keys at the edges of the byte order, used by the scan cases.
fn boundary_keys() -> Vec<Vec<u8>> {
    vec![
        vec![],
        vec![0x00],
        vec![0x00, 0x00],
        vec![0x01],
        b"a".to_vec(),
        b"a\x00".to_vec(),
        b"ab".to_vec(),
        vec![b'a'; 1000],
        vec![0x7F],
        vec![0x80],
        vec![0xFF],
        vec![0xFF, 0xFF],
        vec![0xFF; MAX_KEY_LEN],
    ]
}

/// What a scan must return over `model`, computed without the store.
pub(super) fn expected_scan(model: &BTreeMap<Vec<u8>, Vec<u8>>, range: &ScanRange) -> Vec<KvPair> {
    let inside = model.iter().filter(|(k, _)| range.contains(k));
    let limit = range.limit_or_max();
    let pair = |(k, v): (&Vec<u8>, &Vec<u8>)| KvPair::new(k.clone(), v.clone());
    if range.reverse {
        inside.rev().take(limit).map(pair).collect()
    } else {
        inside.take(limit).map(pair).collect()
    }
}

fn point_reads_and_writes(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        ensure_eq!(store.get(b"missing").await?, None, "get of a missing key");
        ensure_eq!(store.get(b"").await?, None, "get of the empty key");

        store.put(b"k", b"v1").await?;
        ensure_eq!(
            store.get(b"k").await?,
            Some(b"v1".to_vec()),
            "get after put"
        );
        store.put(b"k", b"v2").await?;
        ensure_eq!(
            store.get(b"k").await?,
            Some(b"v2".to_vec()),
            "get after overwrite"
        );
        store.put(b"", b"empty-key").await?;
        store.put(b"\x00\xff", b"").await?;
        ensure_eq!(
            store.get(b"").await?,
            Some(b"empty-key".to_vec()),
            "the empty key"
        );
        ensure_eq!(
            store.get(b"\x00\xff").await?,
            Some(Vec::new()),
            "an empty value is a value, not a missing key"
        );

        store.delete(b"k").await?;
        ensure_eq!(store.get(b"k").await?, None, "get after delete");
        store.delete(b"never-written").await?;
        ensure_eq!(
            dump(&*store).await?,
            vec![KvPair::new("", "empty-key"), KvPair::new(*b"\x00\xff", "")],
            "contents after point writes"
        );
        Ok(())
    })
}

fn get_many_reads_in_order(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        store
            .batch(vec![BatchOp::put("a", "1"), BatchOp::put("c", "3")])
            .await?;
        let keys: Vec<Vec<u8>> = ["c", "b", "a", "c"]
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        ensure_eq!(
            store.get_many(&keys).await?,
            vec![
                Some(b"3".to_vec()),
                None,
                Some(b"1".to_vec()),
                Some(b"3".to_vec())
            ],
            "get_many answers in the order asked, duplicates included"
        );
        ensure_eq!(
            store.get_many(&[]).await?,
            Vec::<Option<Vec<u8>>>::new(),
            "get_many of nothing"
        );
        Ok(())
    })
}

fn batch_applies_in_order(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        store.put(b"old", b"x").await?;
        store
            .batch(vec![
                BatchOp::put("a", "1"),
                BatchOp::delete("a"),
                BatchOp::put("b", "1"),
                BatchOp::put("b", "2"),
                BatchOp::delete("old"),
                BatchOp::delete("never-written"),
                BatchOp::put("c", "3"),
            ])
            .await?;
        ensure_eq!(
            dump(&*store).await?,
            vec![KvPair::new("b", "2"), KvPair::new("c", "3")],
            "a later op on the same key wins"
        );
        store.batch(Vec::new()).await?;
        ensure_eq!(
            dump(&*store).await?.len(),
            2,
            "an empty batch changes nothing"
        );
        Ok(())
    })
}

fn all_bounds(keys: &[Vec<u8>]) -> Vec<Bound<Vec<u8>>> {
    let mut bounds = vec![Bound::Unbounded];
    for k in keys {
        bounds.push(Bound::Included(k.clone()));
        bounds.push(Bound::Excluded(k.clone()));
    }
    // A bound between stored keys, and one past every key.
    bounds.push(Bound::Included(b"aa".to_vec()));
    bounds.push(Bound::Excluded(vec![0xFF; MAX_KEY_LEN]));
    bounds
}

fn scan_bounds_limits_and_direction(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        let keys = boundary_keys();
        let model: BTreeMap<Vec<u8>, Vec<u8>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), format!("v{i}").into_bytes()))
            .collect();
        store
            .batch(
                model
                    .iter()
                    .map(|(k, v)| BatchOp::put(k.clone(), v.clone()))
                    .collect(),
            )
            .await?;

        // Every pair of boundary-key bounds is checked; limits and direction
        // on a subset, to keep a networked backend's run short.
        let bounds = all_bounds(&keys);
        let mut scans = 0;
        for (si, start) in bounds.iter().enumerate() {
            for (ei, end) in bounds.iter().enumerate() {
                let base = ScanRange::new(start.clone(), end.clone());
                let mut variants = vec![base.clone(), base.clone().reversed()];
                if (si + ei) % 3 == 0 {
                    for limit in [0, 1, 3] {
                        variants.push(base.clone().with_limit(limit));
                        variants.push(base.clone().with_limit(limit).reversed());
                    }
                }
                for range in variants {
                    let got = store.scan(range.clone()).await?;
                    ensure_eq!(
                        got,
                        expected_scan(&model, &range),
                        "scan {}",
                        describe(&range)
                    );
                    scans += 1;
                }
            }
        }
        ensure!(scans > 1000, "only {scans} scans were checked");
        Ok(())
    })
}

fn scan_prefix_boundaries(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        let keys = boundary_keys();
        let model: BTreeMap<Vec<u8>, Vec<u8>> =
            keys.iter().map(|k| (k.clone(), b"v".to_vec())).collect();
        store
            .batch(
                model
                    .iter()
                    .map(|(k, v)| BatchOp::put(k.clone(), v.clone()))
                    .collect(),
            )
            .await?;
        let prefixes: Vec<&[u8]> = vec![
            b"",
            b"\x00",
            b"a",
            b"a\x00",
            b"b",
            b"\xff",
            b"\xff\xff",
            b"\xff\xff\xff",
        ];
        for prefix in prefixes {
            for reverse in [false, true] {
                for limit in [None, Some(1), Some(2)] {
                    let got = store.scan_prefix(prefix, limit, reverse).await?;
                    let mut want: Vec<KvPair> = model
                        .iter()
                        .filter(|(k, _)| k.starts_with(prefix))
                        .map(|(k, v)| KvPair::new(k.clone(), v.clone()))
                        .collect();
                    if reverse {
                        want.reverse();
                    }
                    want.truncate(limit.unwrap_or(usize::MAX));
                    ensure_eq!(
                        got,
                        want,
                        "scan_prefix {prefix:?} limit {limit:?} reverse {reverse}"
                    );
                }
            }
        }
        Ok(())
    })
}

fn large_values_round_trip(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        let big: Vec<u8> = (0..(1 << 20)).map(|i: u32| (i % 251) as u8).collect();
        store.put(b"big", &big).await?;
        store
            .batch(vec![
                BatchOp::put("big2", big.clone()),
                BatchOp::put("small", "s"),
            ])
            .await?;
        ensure!(
            store.get(b"big").await?.as_ref() == Some(&big),
            "1 MiB value read back differs"
        );
        let scanned = store.scan_prefix(b"big", None, false).await?;
        ensure_eq!(scanned.len(), 2, "scan of the big values");
        ensure!(
            scanned.iter().all(|p| p.value == big),
            "1 MiB values scanned back differ"
        );
        Ok(())
    })
}

fn oversized_input_is_rejected_and_changes_nothing(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        let too_long = vec![b'k'; MAX_KEY_LEN + 1];
        match store
            .batch(vec![
                BatchOp::put("ok", "1"),
                BatchOp::put(too_long.clone(), "2"),
            ])
            .await
        {
            Err(e) => ensure_eq!(e.kind(), ErrorKind::InvalidInput, "kind of the rejection"),
            Ok(()) => {
                return Err(CaseFailure(
                    "a batch with an oversized key was accepted".into(),
                ));
            }
        }
        ensure_eq!(
            dump(&*store).await?,
            Vec::<KvPair>::new(),
            "a rejected batch applies nothing"
        );
        match store.get(&too_long).await {
            Err(e) => ensure_eq!(
                e.kind(),
                ErrorKind::InvalidInput,
                "kind of the get rejection"
            ),
            Ok(v) => {
                return Err(CaseFailure(format!(
                    "get of an oversized key returned Ok({v:?}), not an error"
                )));
            }
        }
        ensure!(
            store.put(&too_long, b"v").await.is_err(),
            "put of an oversized key accepted"
        );
        Ok(())
    })
}

/// A short description of a range for failure messages.
pub(super) fn describe(range: &ScanRange) -> String {
    let show = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(k) => format!("[{}", short(k)),
        Bound::Excluded(k) => format!("({}", short(k)),
        Bound::Unbounded => "*".into(),
    };
    format!(
        "{} .. {} limit {:?}{}",
        show(&range.start),
        show(&range.end),
        range.limit,
        if range.reverse { " reversed" } else { "" }
    )
}

fn short(k: &[u8]) -> String {
    if k.len() > 8 {
        format!("{:?}…({} bytes)", &k[..8], k.len())
    } else {
        format!("{k:?}")
    }
}
