//! Inner-loop benchmarks of the engine core: model load, tree build and
//! script evaluation.
//!
//! Run: `cargo bench -p acts-benches --bench core`; numbers in
//! benches/README.md.

use std::sync::Arc;

use acts_core::model::Workflow;
use acts_core::script::{ScriptEngine, ScriptKind, ScriptScope};
use acts_core::tree::{ModelTree, ProcessTree};
use acts_testkit::models::THREE_STEPS;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

fn core_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("model");
    group.throughput(Throughput::Elements(1));
    group.bench_function("yaml_load_3_steps", |b| {
        b.iter(|| Workflow::from_yaml(std::hint::black_box(THREE_STEPS)).expect("parses"))
    });
    let workflow = Workflow::from_yaml(THREE_STEPS).expect("parses");
    group.bench_function("tree_build_3_steps", |b| {
        b.iter(|| ModelTree::build(std::hint::black_box(&workflow)).expect("builds"))
    });
    let model = Arc::new(ModelTree::build(&workflow).expect("builds"));
    group.bench_function("process_tree_new", |b| {
        b.iter(|| ProcessTree::new(model.clone()))
    });
    group.finish();

    let engine = ScriptEngine::default();
    let scope = ScriptScope::from_vars(
        json!({"a": 10, "v": 500})
            .as_object()
            .cloned()
            .expect("object"),
    );
    let mut group = c.benchmark_group("script");
    group.throughput(Throughput::Elements(1));
    group.bench_function("condition_cached", |b| {
        b.iter(|| {
            engine
                .eval_bool("v > 100", scope.clone())
                .expect("evaluates")
        })
    });
    group.bench_function("code_transform_cached", |b| {
        b.iter(|| {
            engine
                .eval(ScriptKind::Code, "return { b: a + 10 };", scope.clone())
                .expect("evaluates")
        })
    });
    group.finish();
}

criterion_group!(benches, core_benches);
criterion_main!(benches);
