"""Peak memory and time of ``simulate`` at 1e6 and 1e7 requests, table kept or summarised.

Run from the repository root::

    python benchmarks/bench_sim_memory.py          # 1e6 and 1e7 requests (a few minutes)
    python benchmarks/bench_sim_memory.py 1e6      # 1e6 only

Each figure comes from a fresh Python process (``resource.getrusage`` peak resident memory,
minus the process's peak after the imports) running one ``simulate`` call at utilisation 0.9
(mean CPU 1 ms, so 1e7 requests are about 3 hours of traffic at 900 req/s per core) and then
every statistic of the result (``per_second``, ``mean_response``, ``response_quantile``,
``confidence_interval``, ``utilization``, ``mean_number``, ``to_dict``).

* baseline: ``keep="requests"`` -- the per-request table, with the statistics computed from it
  (the only representation before ``keep`` existed); ``old table`` is that table's size in the
  old layout (64-bit integer columns), rebuilt from it;
* summary: ``keep="summary"`` -- what ``simulate`` keeps by default when the table would not
  fit in ``max_memory`` (1 GB).

The ratio is summary / baseline.  The constants of ``capacity.sim._storage`` come from these
figures.
"""
from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
from capacity.sim import simulate

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # bytes (Linux: KiB)

n, keep, kw = int(float(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3])
cores = kw.get("servers", 1) * kw.get("processes", 1)
rate = 0.9 * cores / 0.001
base = peak()
t0 = time.perf_counter()
run = simulate(rate, 0.001, horizon=n / rate, seed=1, keep=keep, max_memory=None, **kw)
t_sim = time.perf_counter() - t0
old = new = 0
if keep == "requests":
    table = run.requests
    new = int(table.memory_usage(deep=True).sum())
    ints = ["attempt", "request_id", "process", "machine"]
    old = new + sum(table[c].size * (8 - table[c].dtype.itemsize) for c in ints)
t0 = time.perf_counter()
run.per_second; run.mean_response(); run.response_quantile([0.5, 0.99]); run.confidence_interval(0.99)
run.utilization(); run.mean_number(); run.to_dict()
t_stats = time.perf_counter() - t0
print(json.dumps({"rows": run.to_dict()["n_requests"], "sim": t_sim, "stats": t_stats,
                  "peak": peak() - base, "table": new, "old_table": old}))
"""

CASES = [
    ("FCFS, 1 core", {}),
    ("FCFS, 4 cores", {"servers": 4}),
    ("PS, 4 cores", {"discipline": "ps", "servers": 4}),
    ("FCFS, 4 processes", {"processes": 4}),
    ("PS, timeout 10 s, drop (event engine)", {"discipline": "ps", "timeout": 10.0, "on_timeout": "drop"}),
]


def measure(n: float, keep: str, kw: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, repr(n), keep, json.dumps(kw)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    sizes = [float(a) for a in sys.argv[1:]] or [1e6, 1e7]
    print(f"{'case':<40} {'requests':>10} {'keep':>9} {'simulate s':>10} {'stats s':>8} {'peak MB':>8} "
          f"{'table MB':>9} {'old table MB':>12} {'peak ratio':>10}")
    for n in sizes:
        for label, kw in CASES:
            base = measure(n, "requests", kw)
            summ = measure(n, "summary", kw)
            for keep, r in (("requests", base), ("summary", summ)):
                ratio = f"{summ['peak'] / base['peak']:.2f}" if keep == "summary" else ""
                table = f"{r['table'] / 1e6:,.0f}" if r["table"] else "-"
                old = f"{r['old_table'] / 1e6:,.0f}" if r["old_table"] else "-"
                print(f"{label:<40} {r['rows']:>10,} {keep:>9} {r['sim']:>10.2f} {r['stats']:>8.2f} "
                      f"{r['peak'] / 1e6:>8,.0f} {table:>9} {old:>12} {ratio:>10}", flush=True)


if __name__ == "__main__":
    main()
