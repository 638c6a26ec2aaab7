# An online backup through the shipped binary (benches/README.md, "Online
# backups"): against `acts serve --backup-dir DIR` on URL (a one-interrupt
# model `ask` deployed, the store filled with N completed processes by
# CLIENTS clients running approval cycles: start, read, complete), it
# times interrupt round trips from CLIENTS clients before and during a
# backup (`POST /api/v1/backups`, as `acts backup --server` does) and
# prints the backup's pairs, bytes and time with the round trips' p50 and
# p99 before and during it.
# Usage: python3 benches/backup_serve.py URL N CLIENTS NAME
import json, sys, threading, time, urllib.request

base, n, clients, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        t = r.read()
        return json.loads(t) if t else None


def cycle():
    t = time.time()
    pid = call("POST", "/api/v1/processes", {"model": "ask", "vars": {}})["pid"]
    while True:
        d = call("GET", f"/api/v1/processes/{pid}")
        w = [x for x in d["tasks"] if x["state"] == "interrupted"]
        if w:
            break
    call("POST", f"/api/v1/processes/{pid}/tasks/{w[0]['tid']}/complete", {"answer": 1})
    return (time.time() - t) * 1e3


def run(count):
    out, lock = [], threading.Lock()

    def worker():
        while True:
            with lock:
                if len(out) >= count:
                    return
            ms = cycle()
            with lock:
                out.append(ms)
    ts = [threading.Thread(target=worker) for _ in range(clients)]
    [t.start() for t in ts]
    [th.join() for th in ts]
    return sorted(out)


def commit_buckets():
    """The server's group-commit latency histogram: (upper bound, count)."""
    req = urllib.request.Request(base + "/metrics")
    with urllib.request.urlopen(req, timeout=60) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        if line.startswith('acts_commit_seconds_bucket{le="'):
            le = line.split('"')[1]
            out.append((float("inf") if le == "+Inf" else float(le), int(line.split()[-1])))
    return out


def commit_p(before, after, p):
    """The bucket bound under which fraction p of the commits between the
    two histograms fell, and how many there were."""
    delta = [(le, a - b) for (le, a), (_, b) in zip(after, before)]
    total = delta[-1][1]
    for le, n in delta:
        if n >= total * p:
            return le * 1e3, total
    return float("inf"), total


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))]


t0 = time.time()
run(n)
print(f"filled: {n} cycles in {time.time() - t0:.1f} s", flush=True)
before_hist = commit_buckets()
before = run(400)
mid_hist = commit_buckets()
stop, during, lock = False, [], threading.Lock()


def loop():
    while not stop:
        start = time.time()
        ms = cycle()
        with lock:
            during.append((start, start + ms / 1e3, ms))


ts = [threading.Thread(target=loop) for _ in range(clients)]
[t.start() for t in ts]
time.sleep(1)
t = time.time()
start_hist = commit_buckets()
reply = call("POST", "/api/v1/backups", {"name": name})
end_hist = commit_buckets()
t_end = time.time()
secs = t_end - t
stop = True
[th.join() for th in ts]
# The round trips that overlapped the call.
during = sorted(ms for (s, e, ms) in during if e >= t and s <= t_end)
print(json.dumps(reply))
print(f"backup: {reply['pairs']} pairs, {reply['bytes']} bytes in {reply['millis']} ms "
      f"({reply['pairs'] / max(reply['millis'], 1) * 1000:.0f} pairs/s, "
      f"{reply['holds']['processes']} processes; the call {secs * 1000:.0f} ms with its count)")
print(f"round trips before: n={len(before)} p50 {pct(before, .5):.1f} ms p99 {pct(before, .99):.1f} ms")
print(f"round trips during the call: n={len(during)} p50 {pct(during, .5):.1f} ms p99 {pct(during, .99):.1f} ms")
b99, bn = commit_p(before_hist, mid_hist, .99)
d99, dn = commit_p(start_hist, end_hist, .99)
print(f"group commits before: {bn}, p99 <= {b99:g} ms; during the call: {dn}, p99 <= {d99:g} ms")
