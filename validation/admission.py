#!/usr/bin/env python3
"""Which admission rule does this Node.js event loop follow?  Trace a sliced handler and see.

    python validation/admission.py                      # /sliced?k=5&ms=2.2&yield=timeout at ~50 % load
    python validation/admission.py --path '/sliced?k=5&ms=2.2&yield=immediate' --rate 46 --duration 20

Starts the validation server with ``--trace`` (pinned to the first core, normal
priority), sends it an open-loop Poisson stream from the load generator (second
core), fetches the server's per-slice trace and counts, for every batch of new
requests the loop admitted (consecutive first slices), how many *older*
requests were in flight -- started and not finished -- at that moment:

* ``admission="fifo"`` (the run queue takes a new request at once): new
  requests get in whatever is in flight;
* ``admission="idle"`` (``capacity.sim.simulate``; requests in flight first):
  new requests get in only when at most one older request is in flight and it
  is waiting out its gap.

Measured here (Node.js 20.20.2, libuv 1.46, utilisation ~0.5): with
``yield=timeout`` 2 of 717 admission batches (0.3 %) came with two or more
older requests in flight; with ``yield=immediate`` 14.7 % did (up to seven
older requests).  So timer-awaited handlers follow ``"idle"`` and setImmediate
ones ``"fifo"``; the verdict line says "idle" below 5 %.  Other Node.js versions may differ
(libuv's timer loop changed in later releases): run this before trusting
either rule on your version.  Writes the raw trace to ``--out`` (CSV: req,
slice, start_ms, end_ms, entry_ms).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as harness  # noqa: E402  (the sibling driver: children, pinning, load generator)


def admissions(trace: pd.DataFrame) -> pd.DataFrame:
    """One row per admission batch: the number of older requests in flight when it began."""
    t = trace.sort_values("start_ms", kind="stable").reset_index(drop=True)
    k = int(t["slice"].max()) + 1
    done: dict[int, int] = {}  # request -> slices run so far, for requests in flight
    rows = []
    prev_first = False
    for r in t.itertuples():
        if r.slice == 0 and not prev_first:
            rows.append({"start_ms": r.start_ms, "older_in_flight": sum(1 for v in done.values() if 0 < v < k)})
        prev_first = r.slice == 0
        done[r.req] = r.slice + 1
        if r.slice + 1 == k:
            del done[r.req]
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", default="/sliced?k=5&ms=2.2&yield=timeout")
    p.add_argument("--rate", type=float, default=44.0, help="requests/s (44/s is ~50 %% of an 11 ms handler)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of load after a 10 s warm-up")
    p.add_argument("--out", default=None, help="where to keep the trace CSV (default: a temporary file)")
    p.add_argument("--node", default="node")
    a = p.parse_args(argv)
    node = shutil.which(a.node) or a.node
    if harness.slices_of(a.path) < 2:
        raise SystemExit("the path needs k >= 2 slices (e.g. /sliced?k=5&ms=2.2&yield=timeout)")
    out = Path(a.out) if a.out else Path(subprocess.check_output(["mktemp", "--suffix", ".csv"], text=True).strip())
    cores = harness.choose_cores()
    children = harness.Children()
    try:
        srv = children.popen([node, str(harness.SERVER_JS), "--port", "0", "--watch-stdin", "--max-seconds",
                              str(int(a.duration) + 120), "--trace", str(out)], cores[0],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        port = json.loads(srv.stdout.readline())["port"]
        harness.run_load(children, node, cores[1], True, port, a.path, a.rate, 10.0, 1, None)  # JIT warm-up
        s = harness.run_load(children, node, cores[1], True, port, a.path, a.rate, a.duration, 2, None)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/trace", timeout=30).read()
    finally:
        children.close()
    if not s.get("ok"):
        print(f"the load generator refused the run: {s.get('reasons')}", file=sys.stderr)
    adm = admissions(pd.read_csv(out))
    counts = adm["older_in_flight"].value_counts().sort_index()
    srv_stats = s.get("server") or {}
    util = srv_stats.get("cpu_ms", np.nan) / srv_stats.get("wall_ms", np.nan)
    print(f"{a.path} at {a.rate:g}/s (utilisation {util:.2f}), {len(adm)} admission batches; trace in {out}")
    for n, c in counts.items():
        print(f"  {n} older request(s) in flight: {c:5d}  ({100 * c / len(adm):5.1f} %)")
    crowded = float((adm["older_in_flight"] >= 2).mean())
    verdict = "idle (requests in flight first)" if crowded < 0.05 else "fifo (new requests join at once)"
    print(f"batches admitted past two or more older requests: {100 * crowded:.1f} % -> admission looks {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
