#!/usr/bin/env bash
# The main job on the embedded default store: `acts run` deploys the
# approval example into ./acts.db (redb, fsync on every commit), starts a
# process, answers its interrupt request and prints the outcome.
#
# Pass other arguments to run something else, e.g.
#   scripts/run.sh run examples/parallel.yml --auto --json
#   scripts/run.sh run examples/approval.yml      # answer on the terminal
#   scripts/run.sh ps
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$#" -eq 0 ]; then
  set -- run examples/approval.yml --auto
fi
cargo run --quiet -p acts-cli -- "$@"
