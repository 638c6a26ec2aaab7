//! The model-based property test: random sequences of operations run against
//! the store and against a `BTreeMap`, and every read must agree.

use std::collections::BTreeMap;
use std::ops::Bound;

use acts_store::{BatchOp, KvStore, ScanRange};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use super::cases::{describe, expected_scan};
use super::{CaseFailure, CaseResult, Env};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `None` value: a delete.
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    GetMany(Vec<Vec<u8>>),
    Scan(ScanRange),
    ScanPrefix(Vec<u8>, Option<usize>, bool),
}

/// Keys from a tiny alphabet so operations collide, with the edge bytes.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(0x00u8), Just(b'a'), Just(b'b'), Just(0xFFu8)],
        0..4,
    )
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..8)
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => key().prop_map(Op::Delete),
        3 => prop::collection::vec((key(), prop::option::of(value())), 0..6).prop_map(Op::Batch),
        2 => key().prop_map(Op::Get),
        1 => prop::collection::vec(key(), 0..5).prop_map(Op::GetMany),
        3 => (bound(), bound(), prop::option::of(0usize..4), any::<bool>()).prop_map(
            |(start, end, limit, reverse)| {
                let mut r = ScanRange::new(start, end).with_reverse(reverse);
                r.limit = limit;
                Op::Scan(r)
            }
        ),
        1 => (key(), prop::option::of(0usize..4), any::<bool>())
            .prop_map(|(p, limit, reverse)| Op::ScanPrefix(p, limit, reverse)),
    ]
}

fn fail(step: usize, op: &Op, what: String) -> TestCaseError {
    TestCaseError::fail(format!("step {step} ({op:?}): {what}"))
}

async fn apply(
    store: &dyn KvStore,
    model: &mut Model,
    step: usize,
    op: &Op,
) -> Result<(), TestCaseError> {
    let err = |e: acts_store::StoreError| fail(step, op, format!("store error: {e}"));
    match op {
        Op::Put(k, v) => {
            store.put(k, v).await.map_err(err)?;
            model.insert(k.clone(), v.clone());
        }
        Op::Delete(k) => {
            store.delete(k).await.map_err(err)?;
            model.remove(k);
        }
        Op::Batch(writes) => {
            let ops = writes
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => BatchOp::put(k.clone(), v.clone()),
                    None => BatchOp::delete(k.clone()),
                })
                .collect();
            store.batch(ops).await.map_err(err)?;
            for (k, v) in writes {
                match v {
                    Some(v) => model.insert(k.clone(), v.clone()),
                    None => model.remove(k),
                };
            }
        }
        Op::Get(k) => {
            let got = store.get(k).await.map_err(err)?;
            if got.as_ref() != model.get(k) {
                return Err(fail(
                    step,
                    op,
                    format!("got {got:?}, model has {:?}", model.get(k)),
                ));
            }
        }
        Op::GetMany(keys) => {
            let got = store.get_many(keys).await.map_err(err)?;
            let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
            if got != want {
                return Err(fail(step, op, format!("got {got:?}, model has {want:?}")));
            }
        }
        Op::Scan(range) => {
            let got = store.scan(range.clone()).await.map_err(err)?;
            let want = expected_scan(model, range);
            if got != want {
                return Err(fail(
                    step,
                    op,
                    format!("scan {}: got {got:?}, model has {want:?}", describe(range)),
                ));
            }
        }
        Op::ScanPrefix(prefix, limit, reverse) => {
            let got = store
                .scan_prefix(prefix, *limit, *reverse)
                .await
                .map_err(err)?;
            let mut range = ScanRange::prefix(prefix).with_reverse(*reverse);
            range.limit = *limit;
            let want = expected_scan(model, &range);
            if got != want {
                return Err(fail(step, op, format!("got {got:?}, model has {want:?}")));
            }
        }
    }
    Ok(())
}

/// Random sequences of put/delete/batch/get/get_many/scan compared with a
/// `BTreeMap`, shrunk by proptest to a minimal failing sequence.
pub(super) fn model_based_random_ops(env: &Env) -> CaseResult {
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = prop::collection::vec(op(), 1..40);
    let result = runner.run(&strategy, |ops| {
        env.block_on(async {
            let (_, store) = env.fresh().await.map_err(|e| TestCaseError::fail(e.0))?;
            let mut model = Model::new();
            for (step, op) in ops.iter().enumerate() {
                apply(&*store, &mut model, step, op).await?;
            }
            // The final contents must match exactly.
            let all = store
                .scan(ScanRange::all())
                .await
                .map_err(|e| TestCaseError::fail(format!("final scan: {e}")))?;
            let want = expected_scan(&model, &ScanRange::all());
            if all != want {
                return Err(TestCaseError::fail(format!(
                    "final contents: got {all:?}, model has {want:?}"
                )));
            }
            Ok(())
        })
    });
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(why, ops)) => Err(CaseFailure(format!(
            "{why}; minimal failing sequence: {ops:?}"
        ))),
        Err(TestError::Abort(why)) => Err(CaseFailure(format!("proptest aborted: {why}"))),
    }
}
