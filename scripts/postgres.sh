#!/usr/bin/env bash
# A private PostgreSQL server on a loopback port, for the tests:
#   scripts/postgres.sh start DIR   # initdb into DIR, start it; prints its URL on stdout
#   scripts/postgres.sh stop DIR    # stops the server started in DIR
# fsync=on, trust authentication on 127.0.0.1 only, a free port below the
# kernel's ephemeral range. PostgreSQL refuses to run as root: as root the
# server runs as the `postgres` user (which the Debian package creates).
set -euo pipefail
cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
  echo "postgres.sh: no PostgreSQL server installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
as_server() {
  if [[ "$(id -u)" -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
  start)
    mkdir -p "$dir/sockets"
    if [[ "$(id -u)" -eq 0 ]]; then chown -R postgres:postgres "$dir"; fi
    as_server "$bin/initdb" -U postgres --auth=trust -E UTF8 --no-sync -D "$dir/data" >/dev/null
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    port=$((10000 + ($$ * 13) % (low - 11000)))
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
    as_server "$bin/pg_ctl" -w -t 60 -D "$dir/data" -l "$dir/server.log" \
      -o "-p $port -k $dir/sockets -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=300" \
      start >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [[ -d "$dir/data" ]]; then
      as_server "$bin/pg_ctl" -w -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
    fi
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
