#!/usr/bin/env bash
# A private Redis Cluster on loopback ports, for the tests:
#   scripts/redis-cluster.sh start DIR   # 3 masters + 3 replicas; prints HOST:PORT,... on stdout
#   scripts/redis-cluster.sh stop DIR    # stops every node started in DIR
# Each node gets a free port (and its cluster bus port, +10000), its own
# folder under DIR, no persistence; `redis-cli --cluster create` joins
# them; start returns once every node reports cluster_state:ok.
set -euo pipefail
cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
case "$cmd" in
  start)
    mkdir -p "$dir"
    ports=()
    # Ports and bus ports (+10000) below the kernel's ephemeral range, where
    # the test run's own client connections take their ports.
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    span=$((low - 10000 - 10000 - 100))
    port=$((10000 + ($$ * 7) % span))
    tries=0
    while [[ ${#ports[@]} -lt 6 ]]; do
      tries=$((tries + 1))
      if [[ $tries -gt 200 ]]; then
        echo "redis-cluster.sh: no free ports found below $low" >&2
        exit 1
      fi
      if [[ $((port + 10000)) -ge $low ]]; then port=10000; fi
      if port_free "$port" && port_free $((port + 10000)); then
        mkdir -p "$dir/$port"
        redis-server --port "$port" --bind 127.0.0.1 --protected-mode no \
          --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
          --dir "$dir/$port" --save '' --appendonly no --repl-diskless-sync-delay 0 --daemonize yes \
          --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" >/dev/null || true
        up=no
        for _ in $(seq 100); do
          if redis-cli -p "$port" ping >/dev/null 2>&1; then up=yes; break; fi
          sleep 0.1
        done
        if [[ $up == yes ]]; then
          ports+=("$port")
        else
          # Taken meanwhile, or it failed: say why, try another port.
          echo "redis-cluster.sh: node on port $port did not start; trying another" >&2
          tail -5 "$dir/$port/redis.log" >&2 2>/dev/null || true
          rm -rf "${dir:?}/$port"
        fi
      fi
      port=$((port + 1))
    done
    addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 || {
      cat "$dir/create.log" >&2
      exit 1
    }
    for p in "${ports[@]}"; do
      for _ in $(seq 200); do
        redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
        sleep 0.1
      done
      redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || {
        echo "node $p: the cluster did not become ready" >&2
        exit 1
      }
    done
    (IFS=,; echo "${addrs[*]}")
    ;;
  stop)
    for pidfile in "$dir"/*/redis.pid; do
      [[ -f "$pidfile" ]] || continue
      p=$(basename "$(dirname "$pidfile")")
      redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
