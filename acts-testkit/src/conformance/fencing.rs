//! The cases of conditional batches ([`KvStore::batch_if`]): applied only
//! when every condition holds, nothing applied otherwise, and the check
//! atomic with the write under contention — what fences a writer that lost
//! its lease.

use std::sync::Arc;

use acts_store::{BatchOp, Condition, ErrorKind, KvPair, KvStore, MAX_KEY_LEN, ScanRange};

use super::{Case, CaseFailure, CaseResult, Env};

pub(super) const ALL: &[Case] = &[
    Case {
        name: "conditional_batch_applies_only_when_its_conditions_hold",
        durable_only: false,
        run: conditional_batch_applies_only_when_its_conditions_hold,
    },
    Case {
        name: "conditional_batches_fence_concurrent_writers",
        durable_only: false,
        run: conditional_batches_fence_concurrent_writers,
    },
];

async fn dump(store: &dyn KvStore) -> Result<Vec<KvPair>, CaseFailure> {
    Ok(store.scan(ScanRange::all()).await?)
}

fn conditional_batch_applies_only_when_its_conditions_hold(env: &Env) -> CaseResult {
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        store.put(b"epoch", b"1").await?;
        let applied = store
            .batch_if(
                vec![Condition::equals("epoch", "1")],
                vec![BatchOp::put("a", "1")],
            )
            .await?;
        ensure!(applied, "a holding condition applies the batch");
        // A condition that does not hold applies none of the ops.
        let applied = store
            .batch_if(
                vec![Condition::equals("epoch", "2")],
                vec![BatchOp::put("a", "2"), BatchOp::delete("epoch")],
            )
            .await?;
        ensure!(!applied, "epoch is 1, not 2");
        ensure_eq!(
            dump(&*store).await?,
            vec![KvPair::new("a", "1"), KvPair::new("epoch", "1")],
            "nothing of a batch whose condition failed"
        );
        // Values compare exactly (not as prefixes, not as numbers).
        for other in ["10", "", "01"] {
            let applied = store
                .batch_if(
                    vec![Condition::equals("epoch", other)],
                    vec![BatchOp::put("a", other)],
                )
                .await?;
            ensure!(!applied, "epoch \"1\" matched \"{other}\"");
        }
        // Absence: a lease taken once.
        let take = || {
            store.batch_if(
                vec![Condition::absent("lease")],
                vec![BatchOp::put("lease", "n1")],
            )
        };
        ensure!(take().await?, "the lease was free");
        ensure!(!take().await?, "the lease is taken");
        ensure!(
            !store
                .batch_if(
                    vec![Condition::absent("epoch")],
                    vec![BatchOp::put("x", "1")]
                )
                .await?,
            "epoch is present"
        );
        // Every condition must hold.
        let both = |second: Condition| {
            store.batch_if(
                vec![Condition::equals("epoch", "1"), second],
                vec![BatchOp::put("b", "1")],
            )
        };
        ensure!(
            !both(Condition::absent("lease")).await?,
            "one of two failed"
        );
        ensure_eq!(store.get(b"b").await?, None, "nothing applied");
        ensure!(both(Condition::equals("lease", "n1")).await?, "both hold");
        ensure_eq!(store.get(b"b").await?, Some(b"1".to_vec()), "applied");
        // Compare and set: the condition's own key moves on.
        let bump = |from: &'static str, to: &'static str| {
            store.batch_if(
                vec![Condition::equals("epoch", from)],
                vec![BatchOp::put("epoch", to)],
            )
        };
        ensure!(bump("1", "2").await?, "1 → 2");
        ensure!(!bump("1", "3").await?, "a stale epoch is refused");
        ensure_eq!(store.get(b"epoch").await?, Some(b"2".to_vec()), "epoch");
        // No conditions: a plain batch. No ops: only the answer.
        ensure!(
            store
                .batch_if(Vec::new(), vec![BatchOp::delete("b")])
                .await?,
            "no conditions always apply"
        );
        ensure_eq!(store.get(b"b").await?, None, "deleted");
        ensure!(
            store
                .batch_if(vec![Condition::equals("epoch", "2")], Vec::new())
                .await?,
            "holds, nothing to write"
        );
        ensure!(
            !store
                .batch_if(vec![Condition::equals("epoch", "9")], Vec::new())
                .await?,
            "does not hold, nothing to write"
        );
        // An oversized condition key is refused before anything applies.
        let before = dump(&*store).await?;
        let err = store
            .batch_if(
                vec![Condition::absent(vec![0u8; MAX_KEY_LEN + 1])],
                vec![BatchOp::put("c", "1")],
            )
            .await;
        ensure!(
            matches!(&err, Err(e) if e.kind() == ErrorKind::InvalidInput),
            "an oversized condition key: {err:?}"
        );
        ensure_eq!(dump(&*store).await?, before, "nothing applied");
        Ok(())
    })
}

/// Writers race to move an epoch on by compare-and-set; each win also
/// records who won that epoch. With an atomic check, every epoch has
/// exactly one winner and the epoch equals the number of wins.
fn conditional_batches_fence_concurrent_writers(env: &Env) -> CaseResult {
    const WRITERS: usize = 6;
    const TRIES: usize = 30;
    env.block_on(async {
        let (_, store) = env.fresh().await?;
        store.put(b"epoch", b"0").await?;
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store: Arc<dyn KvStore> = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut wins = 0usize;
                for _ in 0..TRIES {
                    let seen = store.get(b"epoch").await?.unwrap_or_default();
                    let n: usize = String::from_utf8_lossy(&seen).parse().unwrap_or(0);
                    let next = (n + 1).to_string();
                    let won = store
                        .batch_if(
                            vec![Condition::equals("epoch", seen.clone())],
                            vec![
                                BatchOp::put("epoch", next.clone()),
                                BatchOp::put(format!("won/{:06}", n + 1), w.to_string()),
                            ],
                        )
                        .await?;
                    wins += usize::from(won);
                    tokio::task::yield_now().await;
                }
                Ok::<usize, CaseFailure>(wins)
            }));
        }
        let mut wins = 0;
        for t in tasks {
            wins += t
                .await
                .map_err(|e| CaseFailure(format!("writer panicked: {e}")))??;
        }
        let epoch = store.get(b"epoch").await?.unwrap_or_default();
        ensure_eq!(
            String::from_utf8_lossy(&epoch).into_owned(),
            wins.to_string(),
            "the epoch moved once per win"
        );
        let won = store.scan_prefix(b"won/", None, false).await?;
        ensure_eq!(won.len(), wins, "one record per epoch: no epoch won twice");
        ensure!(
            wins >= TRIES,
            "at least one writer wins each round ({wins})"
        );
        Ok(())
    })
}
