#!/usr/bin/env bash
# The main job on the embedded default store (redb): for now, a tour of the
# durable store layer that writes, scans, reopens and verifies a database
# file (ACTS_STORE or ./acts.db).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --quiet --release -p acts-store-redb --example durable_tour -- "${ACTS_STORE:-acts.db}"
