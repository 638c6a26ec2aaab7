#!/usr/bin/env bash
# Runs every test of the workspace on a fresh machine: installs what is
# missing (scripts/setup.sh), then `cargo test --workspace` (unit, scenario,
# conformance, property, fault, crash-matrix, CLI and doc tests of every
# crate and backend), then the example workflows' own tests (`acts test`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --all-targets "$@"
cargo test --workspace --doc
for backend in redb rocksdb; do
  echo "== the engine suites again on $backend (ACTS_TEST_STORE=$backend)"
  ACTS_TEST_STORE=$backend cargo test -p acts-core --test cache_seed --test engine \
    --test engine_features --test engine_guards --test delivery_trigger
done
rm -rf "${TMPDIR:-/tmp}"/acts-test-store-*
echo "== acts test examples/"
cargo run --quiet -p acts-cli -- test examples/
