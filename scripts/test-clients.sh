#!/usr/bin/env bash
# The TypeScript and Python clients (clients/) against the shipped `acts
# serve`: each checks its code is what docs/openapi.json gives, then runs
# the approval example against a live server it starts (memory store, a
# free loopback port). Usage: scripts/test-clients.sh [PATH-TO-acts]
# (default: build it). Needs node/npm and python3 (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-}"
if [ -z "$bin" ]; then
  # The build scripts/test.sh makes (the same features: nothing built twice).
  cargo build --quiet --workspace --features acts-cli/redis --bin acts
  bin="${CARGO_TARGET_DIR:-target}/debug/acts"
fi
bin=$(realpath "$bin")

echo "== clients/python: the operations table is the document's; the approval example"
python3 clients/python/generate.py --check
(cd clients/python && ACTS_BIN="$bin" python3 -W error::ResourceWarning -m unittest discover -s tests -v)

echo "== clients/typescript: the types are the document's; the approval example"
(
  cd clients/typescript
  npm ci --no-audit --no-fund --loglevel=error
  mkdir -p dist
  npm run --silent check-generated
  npm run --silent build
  ACTS_BIN="$bin" npm test --silent
)
