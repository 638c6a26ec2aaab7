#!/usr/bin/env bash
# Runs every test of the workspace on a fresh machine: installs what is
# missing (scripts/setup.sh), then `cargo test --workspace` (unit, scenario,
# conformance, property, fault and doc tests of every crate and backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace --all-targets "$@"
cargo test --workspace --doc
