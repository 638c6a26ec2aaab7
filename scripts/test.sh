#!/usr/bin/env bash
# Runs every test of the workspace on a fresh machine: installs what is
# missing (scripts/setup.sh), then `cargo test --workspace` (unit, scenario,
# conformance, property, fault, crash-matrix, CLI and doc tests of every
# crate and backend; among them a PostgreSQL primary's crash under a
# cluster of `acts serve` nodes with a synchronous and an asynchronous
# standby and through a failover by Patroni with etcd, restores from a
# dump and to a point in time, a Redis master failed over by Sentinel, and a cluster of
# `acts serve --cluster` nodes through node and Redis master crashes on
# private Redis Clusters), then the engine suites (the reference's cache
# scenarios, engine features, guards, deliveries/triggers) again on redb,
# RocksDB, Redis, a Redis Cluster (scripts/redis-cluster.sh: 3 masters +
# 3 replicas on loopback ports, stopped afterwards) and PostgreSQL
# (scripts/postgres.sh: a private server, fsync=on), then the example
# workflows' own tests and the examples of docs/MODEL.md (`acts test`), then
# the HTTP API's contract: docs/openapi.json validated as OpenAPI 3.1 and
# the shipped `acts serve` fuzzed from it (scripts/fuzz-api.sh), then the
# TypeScript and Python clients against it (scripts/test-clients.sh).
#
# Every cargo invocation here is `cargo_test`: the whole workspace
# (`--workspace`, then `--test NAME -- MODULE::` to pick suites: each
# crate's integration tests are one binary, NAME_suites) with the same features
# (`acts-cli/redis`: the CLI's tests on private Redis servers and
# clusters), so each resolves the same build and nothing is built twice
# (RocksDB's C++ above all); the scripts that need the `acts` binary get
# the one those builds made. A full clean-clone run, timed and measured,
# is in docs/TESTING.md ("What a test run costs").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A full run from nothing gains little from incremental compilation, and
# its data would be gigabytes (the inner loop of docs/CONTRIBUTING.md keeps
# it on).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo_test() { cargo test --workspace --features acts-cli/redis "$@"; }
# (among them acts-cli's cluster_nodes, redis_settings, cluster_keys and
# cluster_grpc: a cluster of `acts serve --cluster` processes on private
# Redis Clusters through kill -9, join, SIGSTOP and a master crash)
cargo_test --all-targets "$@"
cargo_test --doc
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
acts_bin="$target_dir/debug/acts"
# acts-core's integration tests are one binary (core_suites); its engine
# suites are picked by module.
engine_suites() {
  cargo_test --test core_suites -- cache_seed:: engine:: engine_features:: \
    engine_guards:: delivery_trigger:: engine_guarantees:: reference_behaviour:: versions:: operator_controls:: queries:: listings:: retry:: fencing:: migration:: \
    linear_cost:: script_values:: chain_outputs:: residency:: concurrency_keys:: gates:: bulk_jobs::
}
echo "== the gate suite again with its keys kept at their homes (a cluster's protocol, through a courier)"
ACTS_TEST_GATE_HOMES=1 cargo_test --test core_suites -- gates::
ACTS_TEST_GATE_HOMES=1 ACTS_TEST_STORE=redb cargo_test --test core_suites -- gates::
for backend in redb rocksdb; do
  echo "== the engine suites again on $backend (ACTS_TEST_STORE=$backend)"
  ACTS_TEST_STORE=$backend engine_suites
done
rm -rf "${TMPDIR:-/tmp}"/acts-test-store-*

echo "== the engine suites again on redis (a private redis-server)"
# A port below the kernel's ephemeral range (where client connections
# take their ports), not in use.
low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port=$((10000 + $$ % (low - 11000)))
while redis-cli -p "$port" ping >/dev/null 2>&1 || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
ACTS_TEST_STORE=redis ACTS_TEST_REDIS_URL="redis://127.0.0.1:$port" engine_suites

echo "== the engine suites again on a Redis Cluster (3 masters + 3 replicas, private)"
cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/acts-redis-cluster-XXXXXX")
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; scripts/redis-cluster.sh stop "$cluster_dir" || true; rm -rf "$cluster_dir"' EXIT
cluster_nodes=$(scripts/redis-cluster.sh start "$cluster_dir")
ACTS_TEST_STORE=redis-cluster ACTS_TEST_REDIS_CLUSTER="$cluster_nodes" engine_suites
scripts/redis-cluster.sh stop "$cluster_dir"

echo "== the engine suites again on PostgreSQL (a private server, fsync=on)"
pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/acts-postgres-XXXXXX")
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; scripts/redis-cluster.sh stop "$cluster_dir" || true; rm -rf "$cluster_dir"; scripts/postgres.sh stop "$pg_dir" || true; rm -rf "$pg_dir"' EXIT
pg_url=$(scripts/postgres.sh start "$pg_dir")
ACTS_TEST_STORE=postgres ACTS_TEST_POSTGRES_URL="$pg_url" engine_suites
echo "== the cluster's ownership tests with the nodes on PostgreSQL"
ACTS_TEST_CLUSTER_STORE=postgres ACTS_TEST_POSTGRES_URL="$pg_url" cargo_test --test cluster_suites -- ownership:: catalog_order:: step_gates:: cluster_bulk_jobs::
scripts/postgres.sh stop "$pg_dir"
echo "== acts test examples/ docs/MODEL.md"
"$acts_bin" test examples/ docs/MODEL.md --config docs/examples.config.yaml
echo "== the OpenAPI document: valid OpenAPI 3.1, and acts serve fuzzed from it (schemathesis)"
"${ACTS_VENV:-$HOME/.cache/acts-venv}/bin/openapi-spec-validator" docs/openapi.json
bash scripts/fuzz-api.sh "$acts_bin"
echo "== the TypeScript and Python clients against acts serve"
bash scripts/test-clients.sh "$acts_bin"
