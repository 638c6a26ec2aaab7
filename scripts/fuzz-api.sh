#!/usr/bin/env bash
# Fuzzes the HTTP API of the shipped `acts serve` with schemathesis, driven
# by the OpenAPI document it serves: a private server on a free loopback
# port (memory store, one admin token), seeded with the document's example
# model, then every operation but the two endless streams with N cases
# each (default 25; FUZZ_EXAMPLES=N), every check schemathesis has: no
# 5xx, answers in their schemas, documented statuses and content types,
# what the schema refuses is refused, what it allows is accepted (the
# document carries each rule the server enforces; the one body whose
# rules are in words, a model's, is named in scripts/fuzz-api.toml),
# refused without a token, ... The seed is drawn per run and printed
# (FUZZ_SEED=N replays one). Afterwards the server must still be
# healthy. Exits non-zero on any failure; the report is in
# ${TMPDIR:-/tmp}/acts-fuzz-*/.
#
# Usage: scripts/fuzz-api.sh [PATH_TO_ACTS_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
acts=${1:-}
if [ -z "$acts" ]; then
  # The build scripts/test.sh makes (the same features: nothing built twice).
  cargo build --quiet --workspace --features acts-cli/redis --bin acts
  acts="${CARGO_TARGET_DIR:-target}/debug/acts"
fi
st="${ACTS_VENV:-$HOME/.cache/acts-venv}/bin/st"
[ -x "$st" ] || { echo "fuzz-api: schemathesis is missing ($st): run scripts/setup.sh" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/acts-fuzz-XXXXXX")
token="fuzz-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
hash=$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
cat > "$work/config.yaml" <<YAML
tokens:
  - principal: fuzzer
    roles: [admin]
    sha256: "$hash"
YAML

"$acts" --store memory: --config "$work/config.yaml" serve --listen 127.0.0.1:0 > "$work/serve.log" 2>&1 &
server=$!
# Killed outright at the end (a memory store has nothing to flush, and a
# server the fuzzer wedged must not keep this script waiting).
trap 'kill -KILL "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
trap 'exit 143' TERM INT
url=""
for _ in $(seq 600); do
  url=$(grep -o 'listening on http://[0-9.:]*' "$work/serve.log" | head -1 | sed 's/listening on //') || true
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "fuzz-api: the server did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
auth="Authorization: Bearer $token"

# The example model, so calls by the examples' ids reach real data.
curl -sf -XPOST -H "$auth" -H 'content-type: application/yaml' \
  --data-binary "$(curl -sf "$url/api/v1/openapi.json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["paths"]["/api/v1/models"]["post"]["requestBody"]["content"]["application/yaml"]["example"])')" \
  "$url/api/v1/models" > /dev/null

seed=${FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "== schemathesis against $url (${FUZZ_EXAMPLES:-25} cases per operation, seed $seed: FUZZ_SEED=$seed replays it)"
status=0
# (from the work folder: schemathesis keeps its example database in the
# current one)
config="$PWD/scripts/fuzz-api.toml"
(cd "$work" && "$st" --config-file "$config" run "$url/api/v1/openapi.json" \
  --header "$auth" \
  --checks all \
  --max-examples "${FUZZ_EXAMPLES:-25}" \
  --workers 1 \
  --seed "$seed" \
  --request-timeout 30 \
  --exclude-path-regex '/stream$|/messages$' \
  --report junit --report-dir "$work" \
  --no-color) > "$work/schemathesis.log" 2>&1 || status=$?
tail -40 "$work/schemathesis.log"

# The server survived it and still answers.
curl -sf -m 30 "$url/healthz" > /dev/null || { echo "fuzz-api: the server is not healthy afterwards" >&2; status=1; }
curl -sf -m 30 "$url/readyz" > /dev/null || { echo "fuzz-api: the server is not ready afterwards" >&2; status=1; }
kill -0 "$server" 2>/dev/null || { echo "fuzz-api: the server died" >&2; status=1; }
[ "$status" -eq 0 ] && echo "fuzz-api: no failures (seed $seed; log: $work/schemathesis.log)"
[ "$status" -ne 0 ] && echo "fuzz-api: failed with seed $seed (FUZZ_SEED=$seed bash scripts/fuzz-api.sh replays it)" >&2
exit "$status"
