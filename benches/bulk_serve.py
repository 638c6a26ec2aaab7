# A bulk retry through the shipped binary (benches/README.md, "A bulk
# retry of 100,000 failed processes"): starts N processes of the model
# `flaky` (the testkit's FLAKY_CHARGE, deployed first, with a
# one-interrupt model `one_irq`) through `acts serve`'s HTTP API, then
# times `acts --server URL bulk retry --ecode declined --var fixed=true
# --per-second RATE`, making interrupt round trips over HTTP meanwhile.
# Usage: python3 benches/bulk_serve.py URL ACTS_BINARY N RATE
import json, subprocess, sys, time, threading, urllib.request, concurrent.futures as cf
base, acts, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        t = r.read()
        return json.loads(t) if t else None
t0 = time.time()
with cf.ThreadPoolExecutor(32) as ex:
    list(ex.map(lambda i: call("POST", "/api/v1/processes", {"model": "flaky", "vars": {}}), range(n)))
print("started", n, "in", round(time.time() - t0, 1), "s", flush=True)
def rt():
    t = time.time()
    p = call("POST", "/api/v1/processes", {"model": "one_irq", "vars": {}})
    pid = p["pid"]
    while True:
        d = call("GET", f"/api/v1/processes/{pid}")
        w = [x for x in d["tasks"] if x["state"] == "interrupted"]
        if w: break
    call("POST", f"/api/v1/processes/{pid}/tasks/{w[0]['tid']}/complete", {})
    return (time.time() - t) * 1e6
before = sorted(rt() for _ in range(300))
stop = False; during = []
def loop():
    while not stop: during.append(rt())
th = threading.Thread(target=loop); th.start()
t = time.time()
out = subprocess.run([acts, "--server", base, "bulk", "retry", "--ecode", "declined", "--var", "fixed=true", "--per-second", rate, "--json"], capture_output=True, text=True)
secs = time.time() - t
stop = True; th.join()
job = json.loads(out.stdout)
during.sort()
pct = lambda v, q: int(v[min(len(v) - 1, int(len(v) * q))])
print(json.dumps({"n": n, "per_second": int(rate), "job_secs": round(secs, 2), "retries_per_sec": round(job["done"] / secs), "done": job["done"], "state": job["state"],
  "rt_p50_before_us": pct(before, .5), "rt_p99_before_us": pct(before, .99), "rt_p50_during_us": pct(during, .5), "rt_p99_during_us": pct(during, .99), "round_trips_during": len(during)}))
