//! The cases that run writers and readers at once, or close and reopen
//! the store (listed with the others in `cases.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use acts_store::{BatchOp, KvPair, KvStore, ScanRange};

use super::{CaseFailure, CaseResult, Env};

/// Every pair in the store, through an unbounded scan.
pub(super) async fn dump(store: &dyn KvStore) -> Result<Vec<KvPair>, CaseFailure> {
    Ok(store.scan(ScanRange::all()).await?)
}

pub(super) fn batches_are_atomic_to_concurrent_readers(env: &Env) -> CaseResult {
    const KEYS: usize = 16;
    const GENERATIONS: usize = 150;
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        fn key(i: usize) -> Vec<u8> {
            format!("atomic/{i:02}").into_bytes()
        }
        fn generation(g: usize) -> Vec<BatchOp> {
            let mut ops: Vec<BatchOp> = (0..KEYS)
                .map(|i| BatchOp::put(key(i), g.to_string()))
                .collect();
            // Alternate a marker key in and out so deletes are atomic too.
            ops.push(if g.is_multiple_of(2) {
                BatchOp::put("atomic/marker", g.to_string())
            } else {
                BatchOp::delete("atomic/marker")
            });
            ops
        }
        store.batch(generation(0)).await?;

        let done = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        for reader in 0..2 {
            let store = store.clone();
            let done = done.clone();
            readers.push(tokio::spawn(async move {
                let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
                let mut reads = 0usize;
                while !done.load(Ordering::SeqCst) || reads < 10 {
                    reads += 1;
                    let values: Vec<Vec<u8>> = if reader == 0 {
                        let pairs = store
                            .scan_prefix(b"atomic/", None, reads.is_multiple_of(2))
                            .await?;
                        let marker = pairs.iter().find(|p| p.key == b"atomic/marker");
                        let rest: Vec<Vec<u8>> = pairs
                            .iter()
                            .filter(|p| p.key != b"atomic/marker")
                            .map(|p| p.value.clone())
                            .collect();
                        let g: usize = std::str::from_utf8(&rest[0])
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(usize::MAX);
                        let marker_ok = match marker {
                            Some(m) => g.is_multiple_of(2) && m.value == rest[0],
                            None => g % 2 == 1,
                        };
                        if !marker_ok {
                            return Err(CaseFailure(format!(
                                "scan saw generation {g} with marker {:?}: a torn batch",
                                marker.map(|m| String::from_utf8_lossy(&m.value).into_owned())
                            )));
                        }
                        rest
                    } else {
                        store
                            .get_many(&keys)
                            .await?
                            .into_iter()
                            .map(|v| v.unwrap_or_default())
                            .collect()
                    };
                    if values.len() != KEYS || values.iter().any(|v| *v != values[0]) {
                        return Err(CaseFailure(format!(
                            "reader {reader} saw a torn batch: {:?}",
                            values
                                .iter()
                                .map(|v| String::from_utf8_lossy(v).into_owned())
                                .collect::<Vec<_>>()
                        )));
                    }
                    tokio::task::yield_now().await;
                }
                Ok::<usize, CaseFailure>(reads)
            }));
        }
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for g in 1..=GENERATIONS {
                    store.batch(generation(g)).await?;
                    tokio::task::yield_now().await;
                }
                Ok::<(), CaseFailure>(())
            })
        };
        let written = writer
            .await
            .map_err(|e| CaseFailure(format!("writer panicked: {e}")));
        done.store(true, Ordering::SeqCst);
        written??;
        for reader in readers {
            reader
                .await
                .map_err(|e| CaseFailure(format!("reader panicked: {e}")))??;
        }
        let last = store.get(&key(KEYS - 1)).await?;
        ensure_eq!(
            last,
            Some(GENERATIONS.to_string().into_bytes()),
            "the last generation"
        );
        Ok(())
    })
}

pub(super) fn concurrent_writers_all_land(env: &Env) -> CaseResult {
    const WRITERS: usize = 8;
    const EACH: usize = 40;
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..EACH {
                    let key = format!("w/{w}/{i:03}");
                    if i % 2 == 0 {
                        store.put(key.as_bytes(), key.as_bytes()).await?;
                    } else {
                        store.batch(vec![BatchOp::put(key.clone(), key)]).await?;
                    }
                }
                Ok::<(), CaseFailure>(())
            }));
        }
        for t in tasks {
            t.await
                .map_err(|e| CaseFailure(format!("writer panicked: {e}")))??;
        }
        let all = store.scan_prefix(b"w/", None, false).await?;
        ensure_eq!(
            all.len(),
            WRITERS * EACH,
            "pairs written by concurrent writers"
        );
        ensure!(
            all.iter().all(|p| p.key == p.value),
            "a value landed under the wrong key"
        );
        ensure!(
            all.windows(2).all(|w| w[0].key < w[1].key),
            "scan out of order"
        );
        Ok(())
    })
}

pub(super) fn reopen_keeps_exactly_the_committed_data(env: &Env) -> CaseResult {
    env.block_on(async {
        let (location, store) = env.fresh().await?;
        let mut model = BTreeMap::new();
        for i in 0..50u32 {
            let key = format!("p/{i:03}").into_bytes();
            store.put(&key, &i.to_be_bytes()).await?;
            model.insert(key, i.to_be_bytes().to_vec());
        }
        let mut ops = Vec::new();
        for i in (0..50u32).step_by(3) {
            let key = format!("p/{i:03}").into_bytes();
            ops.push(BatchOp::delete(key.clone()));
            model.remove(&key);
        }
        ops.push(BatchOp::put("p/new", "n"));
        model.insert(b"p/new".to_vec(), b"n".to_vec());
        store.batch(ops).await?;
        store.delete(b"p/001").await?;
        model.remove(b"p/001".as_slice());
        drop(store);

        let want: Vec<KvPair> = model.into_iter().map(|(k, v)| KvPair::new(k, v)).collect();
        for round in 1..=2 {
            let reopened = env
                .factory()
                .open(&location)
                .await
                .map_err(|e| CaseFailure(format!("reopen {round} of {location}: {e}")))?;
            ensure_eq!(
                dump(&*reopened).await?,
                want,
                "contents after reopen {round}"
            );
            ensure_eq!(
                reopened.get(b"p/002").await?,
                Some(2u32.to_be_bytes().to_vec()),
                "point read after reopen {round}"
            );
        }
        Ok(())
    })
}

pub(super) fn damaged_store_is_an_error_not_empty(env: &Env) -> CaseResult {
    env.block_on(async {
        let (location, store) = env.fresh().await?;
        store.put(b"k", b"v").await?;
        drop(store);
        ensure!(
            env.factory().damage(&location).await,
            "this durable backend's factory cannot damage a location; implement StoreFactory::damage"
        );
        let store = match env.factory().open(&location).await {
            Err(e) => {
                ensure!(!e.is_retryable(), "damage reported as retryable: {e}");
                return Ok(());
            }
            Ok(store) => store,
        };
        // Opening may succeed lazily; then reads must fail, not look empty.
        let got = store.get(b"k").await;
        let scanned = store.scan(ScanRange::all()).await;
        ensure!(
            !matches!(got, Ok(None)),
            "damaged store: get returned Ok(None) instead of an error"
        );
        ensure!(
            !matches!(&scanned, Ok(pairs) if pairs.is_empty()),
            "damaged store: scan returned Ok(empty) instead of an error"
        );
        ensure!(
            got.is_err() || scanned.is_err(),
            "damage() changed nothing that reads notice"
        );
        Ok(())
    })
}
