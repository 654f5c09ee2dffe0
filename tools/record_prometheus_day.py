#!/usr/bin/env python
"""Record a compressed day through a real Prometheus into ``data/prometheus/`` (~7 minutes).

Usage (from the repository root; needs Debian's ``prometheus`` and ``prometheus_client``)::

    python tools/record_prometheus_day.py

A seeded M/G/1-PS queue (1 ms lognormal CPU time of scv 2, the truth written beside the data)
is played in wall-clock time into a ``prometheus_client`` histogram and CPU counter (see
``tools/prometheus_harness.py``); Prometheus scrapes them every second.  The load follows a day
squeezed into twelve 30-second phases -- a night trough at 8-10 % CPU, a morning ramp, a busy
hour at 55 %, an evening decline -- and the two range queries a fit makes are saved as the
server answered them:

* ``buckets.json``: ``sum by (le) (increase(demo_request_duration_seconds_bucket{}[30s]))``
* ``cpu.json``: ``sum(rate(process_cpu_seconds_total{}[30s]))``

with ``day.json`` holding the truth, the schedule and the versions.  Notebook 05 fits them with
:func:`capacity.fit.from_prometheus_json`.
"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys
import time
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity import Service, __version__  # noqa: E402
from capacity.fit.prometheus import bucket_query, cpu_query  # noqa: E402

OUT = ROOT / "data" / "prometheus"
MEAN, SCV = 0.001, 2.0
UTILIZATION = [0.10, 0.08, 0.10, 0.18, 0.28, 0.38, 0.45, 0.55, 0.50, 0.40, 0.30, 0.20]
PHASE = 30.0
LEAD = 10.0
LE = [0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256]
NAME = "demo_request_duration_seconds"


def _harness():
    spec = importlib.util.spec_from_file_location("prometheus_harness", ROOT / "tools" / "prometheus_harness.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _query(url: str, query: str, start: float, end: float, step: float) -> dict:
    body = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                   "step": f"{step:g}"}).encode()
    with urllib.request.urlopen(urllib.request.Request(url + "/api/v1/query_range", data=body), timeout=30) as r:
        return json.loads(r.read().decode("utf-8"))


def main() -> None:
    import prometheus_client

    h = _harness()
    svc = Service.lognormal(MEAN, SCV)
    rates = [u / MEAN for u in UTILIZATION]
    lengths = [PHASE] * len(rates)
    lengths[0] += LEAD
    lengths[-1] += LEAD
    rows = h.simulated_requests(svc, list(zip(rates, lengths)), seed=2026)
    with h.exporter(LE, NAME) as (target, hist, cpu), h.run_prometheus([target]) as url:
        time.sleep(2.5)
        t0 = h.feed(rows, hist, cpu)
        time.sleep(1.5)
        start, end = t0 + LEAD, t0 + LEAD + PHASE * len(rates)
        answers = {"buckets": _query(url, bucket_query(NAME, "", PHASE), start + PHASE, end, PHASE),
                   "cpu": _query(url, cpu_query("process_cpu_seconds_total", "", PHASE), start + PHASE, end, PHASE)}
    OUT.mkdir(parents=True, exist_ok=True)
    for name, answer in answers.items():
        (OUT / f"{name}.json").write_text(json.dumps(answer, indent=1) + "\n")
    version = subprocess.run(["prometheus", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    (OUT / "day.json").write_text(json.dumps({
        "truth": {"discipline": "ps", "family": "lognormal", "cpu_per_request_s": MEAN, "scv": SCV, "servers": 1},
        "schedule": [{"arrival_rate": r, "seconds": s} for r, s in zip(rates, lengths)],
        "window_s": PHASE, "bucket_bounds_s": LE, "seed": 2026,
        "queries": {"buckets": bucket_query(NAME, "", PHASE), "cpu": cpu_query("process_cpu_seconds_total", "", PHASE)},
        "recorded_with": {"capacity": __version__, "prometheus": version,
                          "prometheus_client": getattr(prometheus_client, "__version__", "see pip")},
    }, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}/buckets.json, cpu.json, day.json")


if __name__ == "__main__":
    main()
