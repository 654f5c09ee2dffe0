"""The user's path, proven on the real validation server: a compressed day of traffic scraped by a
real Prometheus, fitted from the dashboard's own numbers only, then the peak measured and compared.

For each handler:

1. Start the Koa server with ``--metrics`` (prom-client: a histogram timed in the middleware, the
   default process metrics) and Debian's Prometheus scraping it every 5 s on loopback, and the
   generator's own histogram of what it saw (``--metrics-port``: what a proxy in front exports).
2. Play a *compressed day* (:func:`compressed_day`): troughs, a morning ramp, a busy afternoon,
   noise and short bursts, between about 10 % and 55 % CPU, with the open-loop generator's
   ``--schedule``.
3. The user's fits: :func:`capacity.fit.from_prometheus` with the URL, the metric and the day's
   time range -- no discipline, family, admission, slices or delay, nothing measured inside the
   server beyond what it exports -- once from the middleware's histogram (``measured_at=
   "in_process"``) and once from the proxy's (``"proxy"``), both with the server's CPU counter.
   (``step``, the window length of the query, is the one query option: a compressed day is
   minutes long, not 24 h.)
4. The peak: Poisson load at the rates the fit puts at 70 % and 80 % CPU, the generator's own
   latencies (what clients see) against ``predict`` and ``predict_mean`` with 90 % intervals for
   what that many seconds of pooled traffic can show (``window=``: the parameters' uncertainty,
   the model error and the luck of a finite window).

Writes ``DIR/user_path.csv`` (one row per handler, histogram and load), ``DIR/user_path.txt``
(the table and each fit's summary), ``DIR/user_path.png``, ``DIR/summary.json``, and each fit's
query answers as Prometheus gave them (``DIR/day-<handler>-<histogram>.json``), from which
``--repredict DIR`` fits the days again with a newer package and compares with the same peaks.
Run through ``python validation/run.py --user-path --out DIR [--quick]``.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time
import types
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
SERVER = ROOT / "validation" / "server" / "server.js"
LOADGEN = ROOT / "validation" / "loadgen" / "loadgen.js"
METRIC = "http_request_duration_fine_seconds"     # the finer of the server's two histograms
PROXY_METRIC = "loadgen_request_duration_seconds" # the generator's, as a proxy in front would export it
#: The two histograms a team may have, each fitted where it was measured: the application's own
#: (timed in its middleware: the queue in front of a blocking handler is not in it) and a proxy's.
SOURCES = (("in_process", METRIC), ("proxy", PROXY_METRIC))
SCRAPE_S = 5.0
LOW_UTIL, HIGH_UTIL = 0.10, 0.55                  # the day's CPU range
PEAK_UTILS = (0.7, 0.8)


@dataclasses.dataclass(frozen=True)
class DayHandler:
    """A handler of the validation server and its nominal CPU per request (to size the day)."""

    name: str
    path: str
    cpu_ms: float


FULL = [DayHandler("cpu", "/cpu?ms=11", 11.0),
        DayHandler("sliced", "/sliced?k=5&ms=2.2&yield=timeout", 11.0),
        DayHandler("sliced-immediate", "/sliced?k=5&ms=2.2&yield=immediate", 11.0),
        DayHandler("mix", "/mix?cpu=6&io=20&k=2", 6.0)]
QUICK = [DayHandler("cpu", "/cpu?ms=5", 5.0)]


@dataclasses.dataclass(frozen=True)
class Settings:
    day_s: float          # length of the compressed day
    step_s: float         # window of the fit's query
    peak_s: float         # seconds of load per run of a peak point
    warmup_s: float       # seconds dropped at the start of each run
    repeats: int          # runs per peak point (other seeds), pooled
    # A peak run in which the host left the server its CPU for less than this share of its busy
    # loops' wall time (:func:`_spin_cpu_share`) is run again, up to ``host_retries`` times.
    min_spin_share: float = 0.0
    host_retries: int = 0
    # The server on a core of its own, everything the harness starts on another (:func:`_placement`).
    pin: bool = True


#: A single 60-90 s run's p99 at 0.7-0.8 moves by +-20-25 % with the luck of its arrivals (the
#: sweep's repeats); three pooled runs per point bring that to about +-12 %.
#: A peak run on a noisy host is measured again (the generator's own lag check cannot see it: the
#: seed-9 timer-sliced day's peaks, 2026-12-07, had runs where the host took 9-17 % of the server's
#: core, medians 1.5-3x the quiet runs' and p99s to 460 ms; quiet runs on the saved days keep
#: 0.98-0.99 of it, the days as a whole 0.95-0.98).
FULL_SETTINGS = Settings(day_s=720.0, step_s=30.0, peak_s=60.0, warmup_s=5.0, repeats=3,
                         min_spin_share=0.95, host_retries=3)
QUICK_SETTINGS = Settings(day_s=60.0, step_s=10.0, peak_s=15.0, warmup_s=2.0, repeats=1)


# --------------------------------------------------------------------------- the day
def compressed_day(seconds: float, low: float, high: float, seed: int = 1, phase_s: float = 5.0) -> list:
    """Phases ``[[seconds, rate], ...]`` of a day squeezed into ``seconds``: a night trough at
    ``low``, a morning ramp, a noisy working day, a busy afternoon at ``high``, an evening decline;
    each phase's rate varied by +-8 % (lognormal), and three 2-second bursts at 1.5x the rate
    around them, as minute averages hide them.  Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    n = max(int(round(seconds / phase_s)), 4)
    x = (np.arange(n) + 0.5) / n
    shape = np.interp(x, [0.0, 0.15, 0.35, 0.6, 0.65, 0.78, 0.9, 1.0],
                      [0.0, 0.0, 0.65, 0.7, 1.0, 1.0, 0.4, 0.2])
    shape = shape + 0.05 * np.sin(2 * np.pi * 7 * x) * (x > 0.35) * (x < 0.6)
    rates = (low + (high - low) * shape) * np.exp(0.08 * rng.standard_normal(n) - 0.0032)
    phases = []
    bursts = set(rng.choice(np.arange(1, n - 1), size=min(3, n - 2), replace=False).tolist())
    for i, r in enumerate(rates):
        if i in bursts:
            phases += [[phase_s - 2.0, float(r)], [2.0, float(1.5 * r)]]
        else:
            phases.append([phase_s, float(r)])
    return phases


# --------------------------------------------------------------------------- processes
def _harness():
    spec = importlib.util.spec_from_file_location("prometheus_harness", ROOT / "tools" / "prometheus_harness.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _placement() -> tuple[int | None, int | None]:
    """(the server's core, the core of everything else: this harness, Prometheus, the generator),
    the first two this process may use; None, None on one core or without CPU affinity.

    Why: unpinned, a 2-core host's other work (a test run, a fit) took 9-17 % of the server's core
    in some peak runs (the seed-9 timer-sliced day, validation/README.md), medians 1.5-3x the quiet
    runs'; pinned, the harness's own processes keep off its core, as in the sweep.  The server
    stays at normal priority, as the sweep's does: with a real-time main thread Node spins on
    locks its helper threads hold on the same core (validation/README.md, "Pinning and
    priority"), and here a quick run's peak overran its generator's 60 s limit."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:          # not Linux
        return None, None
    return (cores[0], cores[1]) if len(cores) >= 2 else (None, None)


def missing() -> str | None:
    """Why the user path cannot run here, or None."""
    if shutil.which("node") is None:
        return "Node.js (node) is not on PATH"
    if not (ROOT / "validation" / "server" / "node_modules" / "prom-client").is_dir():
        return "validation/server/node_modules lacks prom-client: run `npm ci --prefix validation/server`"
    if shutil.which("prometheus") is None:
        return "the prometheus binary is not installed (Debian package 'prometheus')"
    return None


def _loadgen(port: int, path: str, out: pathlib.Path, seed: int, rate: float | None = None,
             schedule: pathlib.Path | None = None, duration: float | None = None,
             metrics_port: int | None = None, linger: float = 0.0) -> dict:
    """One generator run (lag checks relaxed and recorded: a 2-core machine running a server, a
    Prometheus and the generator cannot hold the 1 ms default); its JSON summary."""
    cmd = ["node", str(LOADGEN), "--port", str(port), "--path", path, "--seed", str(seed), "--out", str(out),
           "--max-p99-lag-ms", "1e9", "--max-mean-lag-frac", "1e9"]
    cmd += ["--schedule", str(schedule)] if schedule is not None else ["--rate", f"{rate:.6g}"]
    if duration is not None:
        cmd += ["--duration", f"{duration:g}"]
    if metrics_port is not None:
        cmd += ["--metrics-port", str(metrics_port), "--linger", f"{linger:g}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=(duration or 900) + linger + 120)
    lines = done.stdout.strip().splitlines()
    # Exit code 4 is both "some requests failed" (a summary follows) and an abort (warm-up or
    # /reset failed, hard time limit: no summary): only the first is a run to read.
    if done.returncode not in (0, 4) or not lines:
        raise RuntimeError(f"loadgen failed ({done.returncode}, {'no' if not lines else 'a'} summary): "
                           f"{done.stderr.strip()[-400:]}")
    return json.loads(lines[-1])


def _client_latencies(csv: pathlib.Path, warmup_s: float) -> np.ndarray:
    """What clients saw: response end minus send, seconds, after the warm-up, successful only."""
    import pandas as pd

    d = pd.read_csv(csv)
    d = d[(d.status >= 200) & (d.status < 300) & (d.sched_ms >= warmup_s * 1e3)]
    return ((d.end_ms - d.sent_ms) / 1e3).to_numpy()


# --------------------------------------------------------------------------- one handler
def _save_day(url: str, fit, path: pathlib.Path, measured_at: str) -> None:
    """The fit's own range queries, answered again and saved as Prometheus returned them, so that
    the day can be fitted again later without the server (:func:`repredict`)."""
    from capacity.fit.prometheus import _query_range

    src = fit.source_
    first, end, step = src["start"] + src["step"], src["end"], src["step"]
    saved = {"step": step, "measured_at": measured_at, "queries": src["queries"]}
    for name, query in src["queries"].items():
        saved[name] = {"status": "success",
                       "data": {"resultType": "matrix", "result": _query_range(url, query, first, end, step)}}
    path.write_text(json.dumps(saved))


def _fit_saved(path: pathlib.Path):
    """A day saved by :func:`_save_day`, fitted as the user's fit was: (fit, warnings)."""
    from capacity.fit import from_prometheus_json

    saved = json.loads(path.read_text())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = from_prometheus_json(saved["buckets"], saved.get("cpu"), step=saved["step"],
                                   measured_at=saved["measured_at"])
    return fit, [str(w.message) for w in caught]


def _rows(h: DayHandler, fits: dict, notes: dict, measured: list[dict]) -> tuple[list[dict], list[dict], str]:
    """Each measured peak point against each fit's prediction, the crossings, the fits' text."""
    rows = []
    for m in measured:
        for source, fit in fits.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # The interval of what the pooled runs can show: their seconds of traffic, the
                # luck of a finite window next to the parameters' uncertainty.
                window = m["requests"] / m["rate"]
                p99 = fit.predict(0.99, m["rate"], interval=0.9, window=window)
                mean = fit.predict_mean(m["rate"], interval=0.9, window=window)
                # Diagnostic, not a target: the fit at the peak's measured utilisation (the rate at
                # which the fit's CPU per request gives it) -- the miss that remains once the CPU
                # per request's drift between the day and the peak is taken out.
                at_util = float(fit.predict(0.99, m["measured_util"] / fit.cpu_per_request_))
            meas_p99, meas_mean = m["p99_ms"] / 1e3, m["mean_ms"] / 1e3
            spread = _run_spread(m["run_p99_ms"])
            rows.append({
                "handler": h.name, "path": h.path, "histogram": source, **m,
                "chosen": f"{fit.discipline} {fit.family}" + ("" if fit.delay_ is None else " + delay"),
                "cpu_per_request_ms": 1e3 * fit.cpu_per_request_, "scv": fit.scv_,
                # The fit's own miss in the day's busiest windows' tail (below zero: too light).
                "busy_tail_miss": float(fit.fit_quality_.get("busy_tail_log_time_miss", math.nan)),
                "peak_cpu_per_request_ms": 1e3 * m["measured_util"] / m["rate"],
                "pred_p99_at_util_ms": 1e3 * at_util, "p99_error_at_util": at_util / meas_p99 - 1,
                "pred_p99_ms": 1e3 * p99.estimate,
                "pred_p99_low_ms": 1e3 * p99.low, "pred_p99_high_ms": 1e3 * p99.high,
                "p99_error": p99.estimate / meas_p99 - 1,
                "p99_covered": bool(p99.low <= meas_p99 <= p99.high),
                "p99_run_low_ms": spread[0], "p99_run_high_ms": spread[1],
                "p99_consistent": bool(spread[0] <= 1e3 * p99.high and 1e3 * p99.low <= spread[1]),
                "pred_mean_ms": 1e3 * mean.estimate,
                "mean_error": mean.estimate / meas_mean - 1,
                "mean_covered": bool(mean.low <= meas_mean <= mean.high),
                "fit_warnings": len(notes[source]),
                "misses_histograms": any("misses the histograms" in n for n in notes[source])})
    crossings = [dict(handler=h.name, histogram=source,
                      **p99_crossing(fit, [r for r in rows if r["histogram"] == source]))
                 for source, fit in fits.items()]
    text = "\n".join(f"-- from the {source} histogram\n" + str(fit)
                     + "".join(f"\n  (warned) {n}" for n in notes[source]) for source, fit in fits.items())
    return rows, crossings, text


def _run_spread(run_p99_ms: list[float]) -> tuple[float, float]:
    """The measured p99's own 90 % interval from its repeats: mean +- t(0.95, n - 1) s / sqrt(n)
    of the runs' p99s (NaN with one run).  A p99 over a minute of a queue at 80 % CPU moves by
    +-20-25 % between runs (validation sweep), so "the prediction interval misses the measured
    p99" means something only next to this."""
    x = np.asarray(run_p99_ms, dtype=float)
    if x.size < 2:
        return math.nan, math.nan
    from scipy import stats

    half = float(stats.t.ppf(0.95, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return float(x.mean()) - half, float(x.mean()) + half


#: What a row holds of the measurement itself (the rest is the fit's): kept by :func:`repredict`.
MEASURED = ("target_util", "rate", "measured_util", "requests", "runs", "p99_ms", "run_p99_ms", "mean_ms",
            "peak_lag_p99_ms", "day_lag_p99_ms", "peak_spin_cpu_share", "day_spin_cpu_share",
            "run_spin_cpu_share", "noisy_runs_dropped", "server_core")


def run_handler(h: DayHandler, s: Settings, out: pathlib.Path, seed: int,
                server_core: int | None = None) -> tuple[list[dict], list[dict], str]:
    """The day, the user's fit and the peak points of one handler: (rows, crossings, the fits'
    summaries).  The fits' query answers are saved as ``day-<handler>-<histogram>.json``.  With
    ``server_core`` the server runs on that core (each row says which)."""
    from capacity.fit import from_prometheus

    harness = _harness()
    # --max-seconds only stops a server the harness forgot; it must outlive the two fits between the
    # day and the peaks, which took over 300 s on a loaded machine (the peaks then met a closed port).
    server = subprocess.Popen(["node", str(SERVER), "--metrics", "--port", "0",
                               "--max-seconds",
                               str(int(s.day_s + 2 * len(PEAK_UTILS) * s.repeats * s.peak_s + 1800))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=None if server_core is None else lambda: os.sched_setaffinity(0, {server_core}))
    try:
        port = json.loads(server.stdout.readline())["port"]
        gen_port = harness.free_port()
        server_at = f"127.0.0.1:{port}"
        with harness.run_prometheus([server_at, f"127.0.0.1:{gen_port}"], scrape_interval=SCRAPE_S) as url:
            day = compressed_day(s.day_s, LOW_UTIL * 1e3 / h.cpu_ms, HIGH_UTIL * 1e3 / h.cpu_ms, seed)
            day_file = out / f"day-{h.name}.json"
            day_file.write_text(json.dumps(day))
            _loadgen(port, h.path, out / f"warm-{h.name}.csv", seed, rate=0.3e3 / h.cpu_ms, duration=5.0)
            time.sleep(SCRAPE_S)
            start = time.time()
            linger = 2 * SCRAPE_S         # the generator's histogram stays up until the last windows are scraped
            day_run = _loadgen(port, h.path, out / f"day-{h.name}.csv", seed + 1, schedule=day_file,
                               metrics_port=gen_port, linger=linger)
            end = time.time() - linger
            fits, notes = {}, {}
            cpu = f'process_cpu_seconds_total{{instance="{server_at}"}}'
            for source, metric in SOURCES:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    fits[source] = from_prometheus(url, metric, start=start + SCRAPE_S, end=end - 1.0,
                                                   step=s.step_s, cpu=cpu, measured_at=source)
                notes[source] = [str(w.message) for w in caught]
                _save_day(url, fits[source], out / f"day-{h.name}-{source}.json", source)
        measured = []
        for j, util in enumerate(PEAK_UTILS):
            rate = util / fits["proxy"].cpu_per_request_
            # Repeats of the point (other seeds), pooled: what clients saw in all of them.
            runs, utils, lags, shares, noisy = [], [], [], [], []
            for k in range(s.repeats):
                csv = out / f"peak-{h.name}-{util:g}-{k}.csv"
                summary, share, dropped = _quiet_run(port, h.path, csv, seed + 10 + j + 100 * k, rate, s)
                server_stats = summary.get("server") or {}
                noisy += dropped
                runs.append(_client_latencies(csv, s.warmup_s))
                utils.append(server_stats["cpu_ms"] / server_stats["wall_ms"] if server_stats else math.nan)
                lags.append(summary["lag_p99_ms"])
                shares.append(share)
            t = np.concatenate(runs)
            measured.append({"target_util": util, "rate": rate, "measured_util": float(np.mean(utils)),
                             "requests": int(t.size), "runs": len(runs),
                             "p99_ms": 1e3 * float(np.quantile(t, 0.99)),
                             "run_p99_ms": [1e3 * float(np.quantile(x, 0.99)) for x in runs],
                             "mean_ms": 1e3 * float(np.mean(t)),
                             "peak_lag_p99_ms": max(lags), "day_lag_p99_ms": day_run["lag_p99_ms"],
                             "peak_spin_cpu_share": min(shares), "run_spin_cpu_share": shares,
                             "noisy_runs_dropped": noisy, "server_core": server_core,
                             "day_spin_cpu_share": _spin_cpu_share(day_run.get("server") or {})})
        return _rows(h, fits, notes, measured)
    finally:
        harness.stop(server)


def _quiet_run(port: int, path: str, csv: pathlib.Path, seed: int, rate: float,
               s: Settings) -> tuple[dict, float, list[float]]:
    """One peak run, measured again (the same arrivals) while the host leaves the server less than
    ``s.min_spin_share`` of its core, at most ``s.host_retries`` times: the generator's summary of
    the run kept, its spin share, and the shares of the runs measured again."""
    dropped = []
    for _ in range(1 + s.host_retries):
        summary = _loadgen(port, path, csv, seed, rate=rate, duration=s.peak_s)
        share = _spin_cpu_share(summary.get("server") or {})
        if not share < s.min_spin_share:
            break
        dropped.append(share)
    else:
        dropped.pop()               # the last one is kept, and said to be noisy by its share
    return summary, share, dropped


def _spin_cpu_share(server_stats: dict) -> float:
    """The share of the server's busy loops' wall time in which it had the CPU (its ``/stats``
    over one generator run): below 1 where the host took the CPU from it, which the wall-clock
    loops hide from the latencies but not from the CPU per request."""
    wall = server_stats.get("spin_wall_ms") or 0.0
    return server_stats["spin_cpu_ms"] / wall if wall > 0 else math.nan


def p99_crossing(fit, rows: list[dict], grid: int = 96) -> dict:
    """Where the p99 crosses a threshold: measured against the fit's prediction.

    The threshold is the geometric mean of the measured p99 at the two peak points, so it is
    crossed between them; the measured crossing interpolates ``log p99`` linearly in the rate
    between the points (with the geometric-mean threshold: their mean rate), and the predicted
    one is where the fit's p99 (and its 90 % band) reaches the threshold on a grid of rates.
    Both rates are turned into CPU utilisation with the measured CPU per request (the server's
    CPU over its requests at the points), so the error of the utilisation is that of the rate.
    The measured side rests on two points: a curve that bends between them moves it by a few
    per cent (``log p99`` is convex in the load).
    """
    lo, hi = sorted(rows, key=lambda r: r["rate"])[:: len(rows) - 1]
    cost = float(np.mean([r["measured_util"] / r["rate"] for r in (lo, hi)]))
    threshold = math.sqrt(lo["p99_ms"] * hi["p99_ms"]) / 1e3
    out = {"threshold_ms": 1e3 * threshold, "measured_util": math.nan, "predicted_util": math.nan,
           "predicted_util_low": math.nan, "predicted_util_high": math.nan, "error": math.nan}
    if not hi["p99_ms"] > lo["p99_ms"]:
        out["note"] = "the measured p99 did not rise between the points: no crossing to compare"
        return out
    a, b = math.log(lo["p99_ms"]), math.log(hi["p99_ms"])
    measured = lo["rate"] + (hi["rate"] - lo["rate"]) * (math.log(1e3 * threshold) - a) / (b - a)
    rates = np.linspace(0.5 * lo["rate"], min(1.5 * hi["rate"], 0.999 / fit.cpu_per_request_), grid)
    band = _band_to_crossing(fit, rates, threshold)

    def first_crossing(curve) -> float:
        y = np.log(np.asarray(curve, dtype=float))
        above = np.flatnonzero(y >= math.log(threshold))
        if above.size == 0:
            return math.nan
        i = int(above[0])
        if i == 0:
            return float(rates[0])
        return float(np.interp(math.log(threshold), y[i - 1:i + 1], rates[i - 1:i + 1]))

    est, high_rate, low_rate = (_refined(fit, threshold, rates, band.estimate), first_crossing(band.low),
                                first_crossing(band.high))
    out.update(measured_util=cost * measured, predicted_util=cost * est, predicted_util_low=cost * low_rate,
               predicted_util_high=cost * high_rate, error=est / measured - 1)
    return out


def _band_to_crossing(fit, rates: np.ndarray, threshold: float, chunk: int = 16):
    """The fit's p99 and its 90 % band on ``rates`` (ascending), evaluated a chunk of rates at a
    time up to the first chunk where even the band's low edge has reached ``threshold``; the rates
    beyond are NaN, as no crossing lies there.  The same numbers as one call on the whole grid (the
    draws and their model error do not depend on the rates asked), without the band's 400 draws
    at utilisations near 1, where PS quantiles off the tables cost seconds a point."""
    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start in range(0, rates.size, chunk):
            part = fit.predict(0.99, rates[start:start + chunk], interval=0.9)
            parts.append(part)
            if np.any(np.asarray(part.low, dtype=float) >= threshold):
                break
    pad = np.full(rates.size - sum(np.size(p.estimate) for p in parts), np.nan)
    joined = {k: np.concatenate([np.atleast_1d(np.asarray(getattr(p, k), dtype=float)) for p in parts] + [pad])
              for k in ("estimate", "low", "high")}
    return types.SimpleNamespace(**joined)


def _refined(fit, threshold: float, rates: np.ndarray, estimate) -> float:
    """The rate where the fit's estimated p99 reaches ``threshold``: bracketed on the grid, then
    solved on the fit itself (brentq on log p99; a point estimate costs milliseconds, unlike the
    band's draws), so the crossing does not carry the grid's interpolation error."""
    y = np.log(np.asarray(estimate, dtype=float)) - math.log(threshold)
    above = np.flatnonzero(y >= 0)
    if above.size == 0:
        return math.nan
    i = int(above[0])
    if i == 0 or y[i] == 0:
        return float(rates[i])
    from scipy.optimize import brentq

    def gap(rate: float) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return math.log(float(fit.predict(0.99, rate))) - math.log(threshold)

    return float(brentq(gap, rates[i - 1], rates[i], xtol=1e-9 * rates[i], rtol=1e-12))


# --------------------------------------------------------------------------- the run
def run(out: pathlib.Path, quick: bool = False, seed: int = 1, handlers: list[str] | None = None,
        repeats: int | None = None, peak_s: float | None = None, pin: bool = True) -> dict:
    """Every handler's day, fit and peak (or those named in ``handlers``); writes the table, the
    plot and ``summary.json`` (the table also after each handler, so a long run's finished
    handlers survive an interruption).  ``repeats`` and ``peak_s`` override the mode's runs per
    peak point and seconds per run; ``pin=False`` leaves the server unpinned (:func:`_placement`)."""
    import pandas as pd

    why = missing()
    if why is not None:
        raise RuntimeError(why)
    out.mkdir(parents=True, exist_ok=True)
    s = QUICK_SETTINGS if quick else FULL_SETTINGS
    if repeats is not None:
        if repeats < 1:
            raise ValueError(f"repeats must be at least 1, got {repeats}")
        s = dataclasses.replace(s, repeats=int(repeats))
    if peak_s is not None:
        if not peak_s > 2 * s.warmup_s:
            raise ValueError(f"peak_s must exceed twice the warm-up ({2 * s.warmup_s:g} s), got {peak_s}")
        s = dataclasses.replace(s, peak_s=float(peak_s))
    s = dataclasses.replace(s, pin=bool(pin))
    rows, crossings, texts = [], [], []
    began = time.time()
    chosen = QUICK if quick else FULL
    if handlers:
        pool = {h.name: h for h in chosen}
        unknown = [name for name in handlers if name not in pool]
        if unknown:
            raise ValueError(f"unknown handler(s) {unknown}; this mode has {list(pool)}")
        chosen = [pool[name] for name in handlers]
    server_core, others_core = _placement() if s.pin else (None, None)
    before = os.sched_getaffinity(0) if others_core is not None else None
    try:
        if others_core is not None:
            # This process and what it starts (Prometheus, the generator) keep off the server's core.
            os.sched_setaffinity(0, {others_core})
        for i, h in enumerate(chosen):
            got, crossed, text = run_handler(h, s, out, seed + 100 * i, server_core)
            rows += got
            crossings += crossed
            texts.append(f"== {h.name} ({h.path})\n{text}")
            pd.DataFrame(rows).to_csv(out / "user_path.csv", index=False)
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
    return _report(out, {"mode": "quick" if quick else "full", "seconds": time.time() - began,
                         "settings": dataclasses.asdict(s)}, rows, crossings, texts)


def repredict(out: pathlib.Path) -> dict:
    """No measuring: fit the days saved in ``out`` again with the current package and compare
    the new predictions with the peak points measured then (``summary.json``).  Writes the same
    files with ``"repredicted": true`` in the summary (the first run's summary is kept as
    ``summary-measured.json``)."""
    first = out / "summary-measured.json"
    if not first.exists():
        (out / "summary.json").replace(first)
    old = json.loads(first.read_text())
    handlers = {h.name: h for h in FULL + QUICK}
    rows, crossings, texts = [], [], []
    for name in dict.fromkeys(r["handler"] for r in old["rows"]):
        h = handlers[name]
        fits, notes = {}, {}
        for source, _ in SOURCES:
            fits[source], notes[source] = _fit_saved(out / f"day-{name}-{source}.json")
        # (days saved before the spin shares were recorded have none: NaN)
        measured = [{k: r.get(k, math.nan) for k in MEASURED} for r in old["rows"]
                    if r["handler"] == name and r["histogram"] == SOURCES[0][0]]
        got, crossed, text = _rows(h, fits, notes, measured)
        rows += got
        crossings += crossed
        texts.append(f"== {h.name} ({h.path})\n{text}")
    return _report(out, {"mode": old["mode"], "seconds": old["seconds"], "settings": old["settings"],
                         "repredicted": True}, rows, crossings, texts)


def _report(out: pathlib.Path, head: dict, rows: list[dict], crossings: list[dict], texts: list[str]) -> dict:
    """The table (csv, txt), the plot and ``summary.json`` with the targets met."""
    import pandas as pd

    table = pd.DataFrame(rows)
    table.to_csv(out / "user_path.csv", index=False)
    shown = table[["handler", "histogram", "target_util", "measured_util", "chosen", "p99_ms", "pred_p99_ms",
                   "pred_p99_low_ms", "pred_p99_high_ms", "p99_error", "mean_ms", "pred_mean_ms", "mean_error",
                   "cpu_per_request_ms", "peak_cpu_per_request_ms", "p99_error_at_util"]]
    crossed = pd.DataFrame(crossings)
    (out / "user_path.md").write_text(_markdown(rows, crossings))
    (out / "user_path.txt").write_text(shown.round(3).to_string(index=False) + "\n\nWhere the p99 crosses "
                                       "the geometric mean of the two measured p99s:\n"
                                       + crossed.round(3).to_string(index=False) + "\n\n"
                                       + "\n\n".join(texts) + "\n")
    summary = {
        **head, "metric": METRIC, "rows": rows, "crossings": crossings,
        "targets": {"mean_within": 0.10, "p99_within": 0.20, "interval_coverage": 0.9, "crossing_within": 0.05},
        "met": {source: {"mean": int(sum(abs(r["mean_error"]) <= 0.10 for r in mine)),
                         "p99": int(sum(abs(r["p99_error"]) <= 0.20 for r in mine)),
                         "p99_covered": int(sum(r["p99_covered"] for r in mine)),
                         "p99_consistent": int(sum(r["p99_consistent"] for r in mine)), "of": len(mine),
                         "crossing": int(sum(abs(c["error"]) <= 0.05 for c in cross)), "crossings": len(cross)}
                for source, _ in SOURCES
                for mine in [[r for r in rows if r["histogram"] == source]]
                for cross in [[c for c in crossings if c["histogram"] == source]]},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    _plot(table, out / "user_path.png")
    print(shown.round(3).to_string(index=False))
    print(crossed.round(3).to_string(index=False))
    return summary


def _host_notes(rows: list[dict]) -> list[str]:
    """Where the server ran (a line per handler: its core), and a line
    per peak point whose runs the host disturbed: those measured again, and any kept with the host
    holding more of the server's core than FULL_SETTINGS allows (nothing on older days, which did
    not record these)."""
    notes, placed = [], set()
    for r in rows:
        if r["histogram"] != SOURCES[0][0]:
            continue
        core = r.get("server_core")
        if isinstance(core, int) and r["handler"] not in placed:
            placed.add(r["handler"])
            notes.append(f"- {r['handler']}: the server pinned to core {core}, the harness, Prometheus and "
                         "the generator off it")
        dropped = r.get("noisy_runs_dropped")
        dropped = dropped if isinstance(dropped, list) else []
        low = r.get("peak_spin_cpu_share", math.nan)
        if dropped:
            notes.append(f"- {r['handler']} at {r['measured_util']:.3f}: {len(dropped)} run(s) measured again, the "
                         f"host having left the server {', '.join(f'{x:.2f}' for x in dropped)} of its core")
        if low < FULL_SETTINGS.min_spin_share:
            notes.append(f"- {r['handler']} at {r['measured_util']:.3f}: **a noisy host** -- a run kept with "
                         f"{low:.2f} of the server's core")
    return ["", *notes] if notes else []


def _markdown(rows: list[dict], crossings: list[dict]) -> str:
    """The README's tables: each peak point measured -> predicted, and the crossings."""
    def pct(x: float) -> str:
        return f"{100 * x:+.0f} %".replace("-", "\u2212")

    lines = ["| handler | histogram | chosen | util | p99 ms | p99 90 % interval | runs' p99 90 % "
             "| mean ms | CPU/request ms, day \u2192 peak | p99 at the peak's util | busiest windows' tail |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        covered = "\u2713" if r["p99_covered"] else "\u2717"
        overlap = "\u2713" if r["p99_consistent"] else "\u2717"
        lines.append(
            f"| {r['handler']} | {r['histogram'].replace('_', '-')} | {r['chosen']} | {r['measured_util']:.3f} "
            f"| {r['p99_ms']:.1f} \u2192 {r['pred_p99_ms']:.1f} ({pct(r['p99_error'])}) "
            f"| {r['pred_p99_low_ms']:.0f}-{r['pred_p99_high_ms']:.0f} {covered} "
            + (f"| {r['p99_run_low_ms']:.0f}-{r['p99_run_high_ms']:.0f} {overlap} "
               if math.isfinite(r["p99_run_low_ms"]) else "| one run ")
            + f"| {r['mean_ms']:.1f} \u2192 {r['pred_mean_ms']:.1f} ({pct(r['mean_error'])}) "
            f"| {r['cpu_per_request_ms']:.2f} \u2192 {r['peak_cpu_per_request_ms']:.2f} "
            f"| {pct(r['p99_error_at_util'])} "
            + (f"| {pct(r['busy_tail_miss'])} |" if math.isfinite(r.get("busy_tail_miss", math.nan)) else "| - |"))
    lines += _host_notes(rows)
    lines += ["", "| handler | histogram | threshold ms | measured util | predicted util (90 %) | error |",
              "|---|---|---|---|---|---|"]
    for c in crossings:
        lines.append(f"| {c['handler']} | {c['histogram'].replace('_', '-')} | {c['threshold_ms']:.1f} "
                     f"| {c['measured_util']:.3f} | {c['predicted_util']:.3f} "
                     f"({c['predicted_util_low']:.3f}-{c['predicted_util_high']:.3f}) | {pct(c['error'])} |")
    return "\n".join(lines) + "\n"


def _plot(table, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    for k, ((name, source), rows) in enumerate(table.groupby(["handler", "histogram"], sort=False)):
        x = rows["target_util"].to_numpy() + 0.008 * (k - 1)
        ax.errorbar(x, rows["pred_p99_ms"], yerr=[np.maximum(rows["pred_p99_ms"] - rows["pred_p99_low_ms"], 0.0),
                                                   np.maximum(rows["pred_p99_high_ms"] - rows["pred_p99_ms"], 0.0)],
                    fmt="o", capsize=4, label=f"{name}, {source} histogram: predicted p99 (90 %)")
        ax.plot(x, rows["p99_ms"], "kx", ms=8)
    ax.plot([], [], "kx", label="measured p99 (clients)")
    ax.set(xlabel="CPU utilisation (from the fit)", ylabel="p99 (ms)", yscale="log",
           title="Fitted from a compressed day in Prometheus, predicted at the peak")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":      # python validation/user_path.py OUT [--quick]
    run(pathlib.Path(sys.argv[1]), quick="--quick" in sys.argv[2:])
