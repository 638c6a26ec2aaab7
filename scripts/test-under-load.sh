#!/usr/bin/env bash
# Runs the README's test command (scripts/test.sh) N times in a row with
# every core kept busy by a CPU hog beside it (stress-ng at low priority,
# as a second build on a developer's machine would be), and prints one line
# per run and a closing count. Installs stress-ng when missing.
#   scripts/test-under-load.sh [N]      # default 5
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
if ! command -v stress-ng >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends stress-ng >/dev/null
fi
logs=$(mktemp -d "${TMPDIR:-/tmp}/acts-under-load-XXXXXX")
nice -n 19 stress-ng --cpu "$(nproc)" --cpu-load 100 --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT
passed=0
failed=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  if bash scripts/test.sh >"$logs/run-$i.log" 2>&1; then
    passed=$((passed + 1))
    echo "run $i: passed in $(( $(date +%s) - start )) s"
  else
    failed=$((failed + 1))
    echo "run $i: FAILED after $(( $(date +%s) - start )) s (log: $logs/run-$i.log)"
    grep -E "^test .* FAILED|panicked at" "$logs/run-$i.log" | head -5
  fi
done
echo "under-load: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
