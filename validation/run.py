#!/usr/bin/env python3
"""Validate capacity's queueing models against a real Node.js (Koa) server.

    python validation/run.py --quick            # ~25 s smoke run (what the test runs)
    python validation/run.py --out results      # the full sweep (~25 min)

Needs Node.js >= 18 and the server's dependencies:
``npm ci --prefix validation/server``.

What it does, for each handler kind (blocking CPU, CPU sliced by awaits, IO
wait, a mix):

1. starts ``validation/server/server.js`` (one process, pinned to core 0);
2. warms it up (JIT) with a short discarded run;
3. **calibration** at low load (utilisation ~0.1): the server's own CPU time
   per request (``process.cpuUsage()`` / requests, from ``/stats``) is the
   service time S, and the median latency there fixes a constant base
   latency b = measured p50 - model p50 (loopback, HTTP, timer delays:
   whatever is not queueing; the median because one stall of a busy machine
   moves a short run's mean by milliseconds).  Nothing else is fitted, and only on this point;
4. **points** at target utilisations (default 0.3 0.5 0.7 0.8 0.9): an
   open-loop Poisson run from ``validation/loadgen/loadgen.js`` (pinned to
   core 1) at rate = target / S.  The utilisation used for the comparison
   is the *measured* one of that run, server CPU time / wall time, not the
   target; the model is evaluated at arrival rate = measured utilisation / S;
5. writes ``points.csv`` / ``points.json`` (measured mean, p50, p99, p99.9
   with batch-means confidence intervals, predictions, relative errors) and
   ``plot.png`` (measured vs predicted) to ``--out``.

Models: blocking handler -> M/D/1 FCFS (``capacity.fcfs``); sliced and mixed
handlers -> event-loop round robin (``capacity.rr``) with ``slices`` = the
handler's ``k`` and ``slice_delay`` = 0; IO handler -> FCFS on its (small)
CPU part.  FCFS, PS and RR predictions are written for every run (columns
``fcfs_*``, ``ps_*``, ``rr_*``); ``model`` names the primary, whose values
are also the ``pred_*`` / ``err_*`` columns.

Honesty rules: a point whose load generator could not keep the Poisson
schedule is recorded as ``refused`` and never compared; every measured
statistic carries a 95 % batch-means confidence interval; every prediction
carries a band from the Poisson uncertainty of the measured utilisation
(+-1.96/sqrt(N) relative).  On a shared machine all of it is noisy.

Bounded: every child has a timeout and a maximum lifetime, the whole run has
``--max-total`` seconds, and children are killed on exit (finally, SIGTERM,
SIGINT; the server also exits when this process's pipe to it closes).
Loopback only.  Uses only the standard library, numpy, pandas, capacity and
(for the plot, optional) matplotlib.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import capacity
import capacity.rr  # not imported by capacity/__init__.py

HERE = Path(__file__).resolve().parent
SERVER_JS = HERE / "server" / "server.js"
LOADGEN_JS = HERE / "loadgen" / "loadgen.js"
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
STATS = ["mean", "p50", "p99", "p999"]
MODELS = ("fcfs", "ps", "rr")  # every run gets all three; Handler.model is the primary
# two-sided 97.5 % t quantiles, for batch-means intervals with B - 1 dof
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 14: 2.145, 19: 2.093, 29: 2.045}


@dataclass
class Handler:
    name: str
    path: str
    nominal_cpu_ms: float  # only to choose the calibration rate
    model: str  # "fcfs", "ps" or "rr"
    slices: int | None = None  # awaits split the CPU into this many slices; None: the path's k

    def __post_init__(self) -> None:
        # slices = the k of the path (/sliced?k=5&... -> 5, /mix?...&k=2 -> 2)
        if self.slices is None:
            self.slices = slices_of(self.path)


def slices_of(path: str) -> int:
    """The ``k`` query parameter of a handler path, 1 when absent."""
    from urllib.parse import parse_qs, urlsplit
    k = parse_qs(urlsplit(path).query).get("k")
    return int(k[0]) if k else 1


FULL_HANDLERS = [
    Handler("cpu", "/cpu?ms=11", 11.0, "fcfs"),
    Handler("sliced", "/sliced?k=5&ms=2.2&yield=timeout", 11.0, "rr"),
    Handler("sliced-immediate", "/sliced?k=5&ms=2.2&yield=immediate", 11.0, "rr"),
    Handler("io", "/io?ms=20", 1.0, "fcfs"),
    Handler("mix", "/mix?cpu=6&io=20&k=2", 6.0, "rr"),
]
QUICK_HANDLERS = [
    Handler("cpu", "/cpu?ms=5", 5.0, "fcfs"),
    Handler("sliced", "/sliced?k=5&ms=1&yield=timeout", 5.0, "rr"),
]
OVERHEAD_PATH = "/cpu?ms=0"  # the HTTP + Koa cost of a request that does no work


class Aborted(Exception):
    pass


def _t975(dof: int) -> float:
    keys = sorted(_T975)
    for k in keys:
        if dof <= k:
            return _T975[k]
    return 1.96


# --------------------------------------------------------------------------
# child processes


class Children:
    """Start children in their own process groups; kill them all on close."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def popen(self, cmd: list[str], core: int | None, **kw) -> subprocess.Popen:
        def pre() -> None:
            os.setsid()
            if core is not None:
                # the same system call as `taskset -c CORE`: every thread the
                # child starts inherits the affinity
                os.sched_setaffinity(0, {core})

        p = subprocess.Popen(cmd, preexec_fn=pre, **kw)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + 3
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                p.wait(timeout=3)
        self.procs.clear()


def _set_rt(pid: int) -> bool:
    """SCHED_FIFO priority 1 for the child's main thread only.

    Only the main thread (whose id is the pid): Node's helper threads (GC,
    compiler) stay under the normal scheduler.  Making them all real-time
    while pinned to one core livelocks: measured, the idle server then burns
    100 % of its core spinning in the kernel.
    """
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(1))
        return True
    except (PermissionError, OSError, AttributeError):
        return False


def choose_cores() -> tuple[int | None, int | None]:
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None, None
    if len(cores) >= 2:
        return cores[0], cores[1]
    return None, None


def start_server(children: Children, node: str, core: int | None, rt: bool,
                 max_seconds: float) -> tuple[int, int, bool]:
    p = children.popen([node, str(SERVER_JS), "--port", "0", "--watch-stdin",
                        "--max-seconds", str(int(max_seconds))], core,
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(p.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=20)
    if not line or not line[0].strip():
        err = p.stderr.read() if p.poll() is not None else "(no output within 20 s)"
        raise RuntimeError(f"server did not start: {err}")
    info = json.loads(line[0])
    got_rt = _set_rt(info["pid"]) if rt else False
    return int(info["port"]), int(info["pid"]), got_rt


def run_load(children: Children, node: str, core: int | None, rt: bool, port: int, path: str,
             rate: float, duration: float, seed: int, out_csv: Path | None,
             drain: float = 15.0) -> dict:
    cmd = [node, str(LOADGEN_JS), "--port", str(port), "--path", path, "--rate", f"{rate:.6g}",
           "--duration", f"{duration:.6g}", "--seed", str(seed), "--drain-timeout", f"{drain:.6g}"]
    if out_csv is not None:
        cmd += ["--out", str(out_csv)]
    p = children.popen(cmd, core, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if rt:
        _set_rt(p.pid)
    try:
        out, err = p.communicate(timeout=duration + drain + 40)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return {"ok": False, "exit": None, "reasons": ["load generator timed out"], "stderr": err}
    summary: dict = {}
    for ln in out.splitlines():
        ln = ln.strip()
        if ln.startswith("{"):
            summary = json.loads(ln)
    summary["exit"] = p.returncode
    summary["stderr"] = err.strip()
    if p.returncode != 0:
        summary["ok"] = False
        summary.setdefault("reasons", []).append(err.strip() or f"exit code {p.returncode}")
    return summary


# --------------------------------------------------------------------------
# statistics


def batch_stats(resp_ms: np.ndarray, batches: int) -> dict:
    """Point estimates on all data, 95 % CI half-widths from batch means.

    The batches are contiguous in arrival order.  For quantiles the interval
    comes from the spread of the per-batch quantiles, which is rough for
    p99.9 unless each batch holds several thousand requests.
    """
    out: dict = {"n": int(resp_ms.size)}
    b = int(min(batches, max(2, resp_ms.size // 20)))
    parts = np.array_split(resp_ms, b) if resp_ms.size >= 2 * b else []
    for name in STATS:
        f = np.mean if name == "mean" else (lambda x, q=QUANTILES[name]: np.quantile(x, q))
        out[name] = float(f(resp_ms)) if resp_ms.size else math.nan
        if len(parts) >= 2:
            vals = np.array([f(p) for p in parts])
            out[name + "_ci"] = float(_t975(len(parts) - 1) * vals.std(ddof=1) / math.sqrt(len(parts)))
        else:
            out[name + "_ci"] = math.nan
    out["batches"] = len(parts)
    return out


def p99_curve(model: str, rate: np.ndarray, service_s: float, base_ms: float, slices: int = 1) -> np.ndarray:
    """Predicted p99 (ms) at each rate, as in :func:`model_stats` (inf at or above saturation)."""
    svc = capacity.Service.deterministic(service_s)
    mod = {"fcfs": capacity.fcfs, "ps": capacity.ps, "rr": capacity.rr}[model]
    kw = {"slices": slices, "slice_delay": 0.0} if model == "rr" else {}
    out = np.full(rate.shape, np.inf)
    stable = rate * service_s < 1
    if stable.any():
        out[stable] = base_ms + 1e3 * np.asarray(mod.response_quantile(0.99, rate[stable], svc, **kw), dtype=float)
    return out


def model_stats(model: str, rate, service_s: float, base_ms: float, slices: int = 1) -> dict:
    """Predicted mean / quantiles in ms: base latency + the queue's response.

    ``model`` is "fcfs", "ps" or "rr" (event-loop round robin with
    ``slices`` slices; ignored by the others).  For "rr" ``slice_delay`` is
    0: the timer / IO waits between slices are already in the base latency
    ``base_ms`` fitted at the low-load calibration point, so adding them
    again as a delay would count them twice.

    ``rate`` may be an array (one prediction per rate); rates at or above
    saturation give ``inf``.  The PS quantiles of a deterministic service are
    slow (~0.5 s per rate and quantile on a busy machine), so callers pass
    all their rates at once and ask for few.
    """
    rate = np.atleast_1d(np.asarray(rate, dtype=float))
    svc = capacity.Service.deterministic(service_s)
    if model not in ("fcfs", "ps", "rr"):
        raise ValueError(f"unknown model {model!r}")
    mod = {"fcfs": capacity.fcfs, "ps": capacity.ps, "rr": capacity.rr}[model]
    kw = {"slices": slices, "slice_delay": 0.0} if model == "rr" else {}
    stable = rate * service_s < 1
    out = {k: np.full(rate.shape, np.inf) for k in STATS}
    if stable.any():
        r = rate[stable]
        out["mean"][stable] = base_ms + 1e3 * np.asarray(mod.mean_response(r, svc, **kw), dtype=float)
        for name, q in QUANTILES.items():
            # one quantile at a time: capacity.ps does not broadcast q against rate
            out[name][stable] = base_ms + 1e3 * np.asarray(mod.response_quantile(q, r, svc, **kw), dtype=float)
    return out


# --------------------------------------------------------------------------
# the sweep


def measure(children: Children, args, node: str, cores, rt: bool, port: int, h: Handler, kind: str,
            target: float, rate: float, duration: float, seed: int, raw_dir: Path) -> dict:
    tag = f"{h.name}_{kind}_{target:.2f}"
    csv = raw_dir / f"{tag}.csv"
    s = run_load(children, node, cores[1], rt, port, h.path, rate, duration, seed, csv)
    row: dict = {"handler": h.name, "path": h.path, "kind": kind, "target_util": target,
                 "rate": rate, "seed": seed, "status": "ok", "model": h.model, "slices": h.slices}
    srv = s.get("server") or {}
    done = srv.get("requests_completed") or 0
    if done:
        row["cpu_per_req_ms"] = srv["cpu_ms"] / done
        row["measured_util"] = srv["cpu_ms"] / srv["wall_ms"]
        row["elu"] = srv.get("event_loop_utilization")
        row["served_rate"] = done / (srv["wall_ms"] / 1e3)
    for k in ("scheduled", "completed", "failed", "lag_mean_ms", "lag_p99_ms", "lag_max_ms",
              "sockets_opened_during_run"):
        row[k] = s.get(k)
    if not s.get("ok"):
        row["status"] = "refused" if s.get("exit") == 3 else "failed"
        row["reason"] = "; ".join(s.get("reasons") or []) or s.get("stderr", "")
        return row
    d = pd.read_csv(csv)
    d = d[(d.status >= 200) & (d.status < 300)]
    d = d[d.sched_ms >= args.warmup * 1e3]  # the queue starts empty: drop the first seconds
    resp = (d.end_ms - d.sent_ms).to_numpy()
    st = batch_stats(resp, args.batches)
    row["n"] = st.pop("n")
    row["batches"] = st.pop("batches")
    for k, v in st.items():
        row["meas_" + k] = v
    row["meas_mean_user"] = float((d.end_ms - d.sched_ms).mean()) if len(d) else math.nan
    return row


def predict_into(row: dict, h: Handler, service_s: float, base_ms: float) -> None:
    """Predictions at the run's measured utilisation (and the primary model's
    band over the utilisation's Poisson uncertainty, +-1.96/sqrt(N))."""
    rho = row.get("measured_util")
    if rho is None or not math.isfinite(rho) or row.get("status") != "ok":
        return
    n = max(row.get("completed") or 1, 1)
    rel = 1.96 / math.sqrt(n)
    row["util_lo"], row["util_hi"] = rho * (1 - rel), rho * (1 + rel)
    for model in MODELS:
        rhos = [rho, row["util_lo"], row["util_hi"]] if model == h.model else [rho]
        pred = model_stats(model, np.array(rhos) / service_s, service_s, base_ms, h.slices)
        for k in STATS:
            row[f"{model}_{k}"] = float(pred[k][0])
            if model == h.model:
                row[f"pred_{k}"] = float(pred[k][0])
                row[f"pred_{k}_lo"] = float(pred[k][1])
                row[f"pred_{k}_hi"] = float(pred[k][2])
    for k in STATS:
        m = row.get(f"meas_{k}")
        row[f"err_{k}"] = (row[f"pred_{k}"] / m - 1) if m else math.nan


def sweep(args) -> dict:
    node = shutil.which(args.node) or args.node
    if not Path(node).exists() and shutil.which(node) is None:
        raise SystemExit(f"node not found ({args.node}); install Node.js >= 18")
    if not (HERE / "server" / "node_modules" / "koa").is_dir():
        raise SystemExit("validation/server/node_modules is missing: run `npm ci --prefix validation/server`")
    out = Path(args.out)
    raw_dir = out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    handlers = QUICK_HANDLERS if args.quick else FULL_HANDLERS
    if args.handlers:
        pool = {h.name: h for h in handlers}
        unknown = [w for w in args.handlers.split(",") if w not in pool]
        if unknown:
            raise SystemExit(f"unknown handler(s) {unknown}; this mode has {sorted(pool)}")
        handlers = [pool[w] for w in args.handlers.split(",")]
    cores = choose_cores() if args.pin else (None, None)
    t_start = time.monotonic()
    children = Children()
    rows: list[dict] = []
    meta: dict = {
        "mode": "quick" if args.quick else "full",
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip(),
        "python": platform.python_version(), "capacity": capacity.__version__,
        "machine": platform.machine(), "cpus": os.cpu_count(), "cores": list(cores),
        "loadavg_start": list(os.getloadavg()), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "duration_s": args.duration, "calib_duration_s": args.calib_duration, "warmup_s": args.warmup,
        "calib_util": args.calib_util, "utils": args.utils, "batches": args.batches,
    }

    def check_time() -> None:
        if time.monotonic() - t_start > args.max_total:
            raise Aborted(f"--max-total {args.max_total} s exceeded")

    def on_signal(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        port, spid, got_rt = start_server(children, node, cores[0], args.rt, args.max_total + 60)
        lg_rt = got_rt  # real-time for the generator only where it worked for the server
        meta.update(server_pid=spid, port=port, realtime_main_threads=got_rt)
        log(f"server on 127.0.0.1:{port} (pid {spid}, core {cores[0]}, realtime={got_rt}); "
            f"load generator on core {cores[1]}")
        # warm-up: JIT, connection handling; discarded
        for h in handlers:
            run_load(children, node, cores[1], lg_rt, port, h.path, 0.2 / (h.nominal_cpu_ms / 1e3),
                     args.warm, args.seed, None)
        check_time()
        # the HTTP overhead of a request that does nothing
        ov = measure(children, args, node, cores, lg_rt, port, Handler("overhead", OVERHEAD_PATH, 1.0, "fcfs"),
                     "calib", args.calib_util, 100.0, args.calib_duration, args.seed, raw_dir)
        rows.append(ov)
        meta["overhead_cpu_per_req_ms"] = ov.get("cpu_per_req_ms")
        log(f"overhead {OVERHEAD_PATH}: CPU/request {ov.get('cpu_per_req_ms', math.nan):.3f} ms")
        for h in handlers:
            check_time()
            rate0 = args.calib_util / ((h.nominal_cpu_ms + 0.5) / 1e3)
            cal = measure(children, args, node, cores, lg_rt, port, h, "calib", args.calib_util, rate0,
                          args.calib_duration, args.seed, raw_dir)
            if cal.get("cpu_per_req_ms") is None:
                cal["status"] = "failed"
                rows.append(cal)
                log(f"{h.name}: calibration failed: {cal.get('reason')}")
                continue
            service_s = cal["cpu_per_req_ms"] / 1e3
            base_ms = math.nan
            if cal["status"] == "ok":
                # b from the median, not the mean: one stall of a busy machine
                # in a short calibration run moves the mean by milliseconds
                lam0 = cal["measured_util"] / service_s
                base_ms = cal["meas_p50"] - float(model_stats(h.model, lam0, service_s, 0.0, h.slices)["p50"][0])
            cal["service_ms"], cal["base_ms"] = service_s * 1e3, base_ms
            predict_into(cal, h, service_s, base_ms)
            rows.append(cal)
            log(f"{h.name}: calibration at util {cal['measured_util']:.3f}: CPU/request "
                f"{cal['cpu_per_req_ms']:.3f} ms, base latency {base_ms:.3f} ms [{cal['status']}]")
            if not math.isfinite(base_ms):
                continue
            for i, u in enumerate(args.utils):
                check_time()
                row = measure(children, args, node, cores, lg_rt, port, h, "point", u, u / service_s,
                              args.duration, args.seed + 1 + i, raw_dir)
                row["service_ms"], row["base_ms"] = service_s * 1e3, base_ms
                predict_into(row, h, service_s, base_ms)
                rows.append(row)
                log(describe(row))
    except Aborted as e:
        meta["aborted"] = str(e)
        log(f"ABORTED: {e}")
    finally:
        children.close()
        for s, handler in old.items():
            signal.signal(s, handler)
    meta["elapsed_s"] = time.monotonic() - t_start
    meta["loadavg_end"] = list(os.getloadavg())
    table = pd.DataFrame(rows)
    table.to_csv(out / "points.csv", index=False)
    crossings = p99_crossing(table)
    for c in crossings:
        log(f"{c['handler']}: p99 crosses {c['threshold_ms']:.1f} ms at utilisation {c['util_measured']:.3f} "
            f"measured, {c['util_predicted']:.3f} predicted ({100 * c['error']:+.1f}%)")
    meta["p99_crossing"] = crossings
    (out / "points.json").write_text(json.dumps({"meta": meta, "points": _jsonable(rows)}, indent=1))
    if args.plot:
        try:
            plot(table, out / "plot.png", grid_points=6 if args.quick else 12)
        except ImportError:
            log("matplotlib missing: no plot")
    log(f"wrote {out / 'points.csv'} ({len(rows)} runs, {meta['elapsed_s']:.1f} s)")
    return {"meta": meta, "points": rows}


def p99_crossing(table: pd.DataFrame, grid: int = 48) -> list[dict]:
    """Per handler: the utilisation at which p99 crosses a threshold, measured vs predicted.

    The threshold is the geometric mean of the smallest and largest measured p99 of the
    handler's ok points, so it lies inside the measured range.  Measured crossing: linear
    interpolation of log p99 against the measured utilisation between the two points around
    it.  Predicted crossing: the handler's primary model (fitted at the calibration point only)
    on a fine utilisation grid, the same interpolation.  Error = predicted / measured - 1.
    """
    out = []
    if table.empty or "kind" not in table:
        return out
    pts = table[(table.kind == "point") & (table.status == "ok")]
    for name, g in pts.groupby("handler", sort=False):
        g = g.sort_values("measured_util")
        if len(g) < 2 or not np.all(np.diff(np.log(g.meas_p99.to_numpy())) > 0):
            continue
        lo, hi = float(g.meas_p99.min()), float(g.meas_p99.max())
        thr = math.sqrt(lo * hi)
        u_meas = float(np.interp(math.log(thr), np.log(g.meas_p99.to_numpy()), g.measured_util.to_numpy()))
        first = g.iloc[0]
        service_s, base_ms = first.service_ms / 1e3, first.base_ms
        # Only the p99, on a modest grid: PS quantiles of a deterministic service (inside rr)
        # cost ~0.1 s per utilisation.
        u = np.linspace(0.8 * g.measured_util.min(), min(0.995, g.measured_util.max() * 1.15), grid)
        pred = p99_curve(first.model, u / service_s, service_s, base_ms, int(first.slices))
        ok = np.isfinite(pred)
        if not np.any(pred[ok] >= thr):
            continue
        u_pred = float(np.interp(math.log(thr), np.log(np.maximum.accumulate(pred[ok])), u[ok]))
        out.append({"handler": name, "threshold_ms": thr, "util_measured": u_meas, "util_predicted": u_pred,
                    "error": u_pred / u_meas - 1})
    return out


def describe(r: dict) -> str:
    head = f"{r['handler']:>16} target {r['target_util']:.2f}"
    if r.get("status") != "ok":
        return f"{head}: {r.get('status', '').upper()}: {r.get('reason', '')}"
    parts = [f"util {r['measured_util']:.3f}", f"n {r['n']}"]
    for k in STATS:
        parts.append(f"{k} {r['meas_' + k]:.2f}±{r['meas_' + k + '_ci']:.2f} vs {r['pred_' + k]:.2f} "
                     f"({100 * r['err_' + k]:+.0f}%)")
    return f"{head}: " + ", ".join(parts)


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def plot(table: pd.DataFrame, path: Path, grid_points: int = 10) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[(table.get("status") == "ok") & table.get("pred_mean").notna()] if "pred_mean" in table else table.iloc[:0]
    names = [h for h in dict.fromkeys(ok.handler) if h != "overhead"]
    if not names:
        return
    fig, axes = plt.subplots(len(names), 4, figsize=(16, 3.6 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        d = ok[ok.handler == name].sort_values("measured_util")
        service_s = d.service_ms.iloc[0] / 1e3
        base = d.base_ms.iloc[0]
        grid = np.linspace(0.05, 0.95, grid_points)
        slices = int(d.slices.iloc[0]) if "slices" in d and pd.notna(d.slices.iloc[0]) else 1
        curves = {m: model_stats(m, grid / service_s, service_s, base, slices) for m in MODELS}
        for j, k in enumerate(STATS):
            ax = axes[i, j]
            ax.errorbar(d.measured_util, d["meas_" + k], yerr=d["meas_" + k + "_ci"], fmt="o", color="k",
                        capsize=3, label="measured (95% CI)")
            for model, colour in (("fcfs", "C0"), ("ps", "C1"), ("rr", "C2")):
                what = f"RR k={slices}" if model == "rr" else model.upper()
                ax.plot(grid, curves[model][k], color=colour, marker=".",
                        label=f"{what} (fitted at low load)")
                ax.plot(d.measured_util, d[f"{model}_{k}"], "x", color=colour)
            ax.set_title(f"{name}: {k}")
            ax.set_xlabel("measured utilisation")
            ax.set_ylabel("ms")
            top = np.nanmax(np.r_[d["meas_" + k].to_numpy() * 2, d[f"pred_{k}"].to_numpy() * 1.3])
            ax.set_ylim(0, top if np.isfinite(top) and top > 0 else None)
            ax.set_xlim(0, 1)
            if i == 0 and j == 0:
                ax.legend(fontsize=8)
    fig.suptitle(f"capacity models vs a real Koa server ({path.parent.name}); noisy shared machine unless stated")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: small handlers, 2 points, ~25 s")
    p.add_argument("--out", default=None, help="output directory (default validation/results[-quick])")
    p.add_argument("--utils", default=None, help="target utilisations, comma-separated")
    p.add_argument("--handlers", default=None, help="comma-separated subset: full mode "
                   + ",".join(h.name for h in FULL_HANDLERS) + "; quick mode "
                   + ",".join(h.name for h in QUICK_HANDLERS))
    p.add_argument("--duration", type=float, default=None, help="seconds per point")
    p.add_argument("--calib-duration", type=float, default=None, help="seconds of the low-load calibration")
    p.add_argument("--calib-util", type=float, default=0.1, help="utilisation of the calibration point")
    p.add_argument("--warmup", type=float, default=None, help="seconds dropped at the start of every run")
    p.add_argument("--warm", type=float, default=None, help="seconds of discarded JIT warm-up per handler")
    p.add_argument("--batches", type=int, default=10, help="batches for batch-means CIs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-total", type=float, default=None, help="hard limit on the whole run, seconds")
    p.add_argument("--node", default="node")
    p.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin to cores")
    p.add_argument("--no-rt", dest="rt", action="store_false",
                   help="do not give the server's and generator's main threads SCHED_FIFO priority")
    p.add_argument("--no-plot", dest="plot", action="store_false")
    a = p.parse_args(argv)
    q = a.quick
    a.utils = [float(x) for x in a.utils.split(",")] if a.utils else ([0.3, 0.6] if q else [0.3, 0.5, 0.7, 0.8, 0.9])
    a.duration = a.duration or (3.0 if q else 60.0)
    a.calib_duration = a.calib_duration or (2.0 if q else 30.0)
    a.warmup = a.warmup if a.warmup is not None else (0.2 if q else 3.0)
    # 30 s: with 5 s the first (calibration) run of an await-sliced handler still paid JIT warm-up,
    # 12.6-15.2 ms of CPU per request against 11.5-11.9 ms in later runs; after 30 s, 11.9 ms.
    a.warm = a.warm or (0.7 if q else 30.0)
    a.max_total = a.max_total or (120.0 if q else 4 * 3600.0)
    a.out = a.out or str(HERE / ("results-quick" if q else "results"))
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    res = sweep(args)
    pts = [r for r in res["points"] if r.get("kind") == "point"]
    return 0 if pts and all(r.get("status") == "ok" for r in pts) else 1


if __name__ == "__main__":
    sys.exit(main())
