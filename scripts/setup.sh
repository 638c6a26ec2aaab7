#!/usr/bin/env bash
# Installs the system packages acts needs, only those that are missing:
#   libclang-dev  - bindgen, for RocksDB's C++ bindings
#   redis-server  - the Redis backend's tests start a private server
#   redis-tools   - redis-cli, with which scripts/test.sh runs one for the
#                   engine suites
#   chromium, chromium-driver - the dashboard's browser test drives a
#                   headless Chromium through WebDriver
#   postgresql    - the PostgreSQL backend's tests start a private server
#                   (initdb + pg_ctl on a loopback port, as the postgres user)
#   patroni, etcd-server - the PostgreSQL failover test runs a pair
#                   managed by Patroni with etcd (acts-testkit's patroni.rs)
#   python3-venv  - a private Python environment ($ACTS_VENV, default
#                   ~/.cache/acts-venv) holding schemathesis (the API fuzzer
#                   of scripts/fuzz-api.sh) and openapi-spec-validator (checks
#                   docs/openapi.json), both pinned
#   nodejs, npm   - the TypeScript client's build and test (clients/typescript)
# Runs `apt-get update` at most once. Safe to run again and again.
set -euo pipefail

missing=()
if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then
  missing+=(libclang-dev)
fi
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v patroni >/dev/null 2>&1 || missing+=(patroni)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
venv="${ACTS_VENV:-$HOME/.cache/acts-venv}"
if [ ! -x "$venv/bin/st" ] && ! python3 -m venv --help >/dev/null 2>&1; then
  missing+=(python3-venv)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is not installed; install Rust (stable) with rustup first" >&2
  exit 1
fi

if [ ! -x "$venv/bin/st" ] || [ ! -x "$venv/bin/openapi-spec-validator" ]; then
  echo "setup: installing schemathesis and openapi-spec-validator into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'schemathesis==4.32.5' 'openapi-spec-validator==0.9.0'
fi
