"""Smoke test of the validation harness against a real Node.js (Koa) server.

Runs a short version of ``validation/run.py`` (a blocking 5 ms handler and
the same 5 ms in five slices separated by ``await setTimeout(0)``: a
low-load calibration point each, and one point at utilisation ~0.3) and
checks that the harness produced points, that the server's own CPU time per
request matches the handler's busy loop, and that the M/D/1 FCFS prediction
(blocking) and the event-loop prediction (sliced: the simulated loop with
in-flight-first admission) fitted on the calibration point match the
measured latency.

Skips where Node.js or the server's dependencies are absent
(``npm ci --prefix validation/server`` installs them).
"""
from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "validation"

# Achieved on a 2-core VM shared with other jobs (load average ~5), seven
# accepted quick runs at measured utilisation 0.26-0.36: mean error
# +1..+8 %, p50 error -3..+8 %, p99 error +4..+24 % (the p99's own 95 % CI is
# about +-20 % with ~150-230 requests in those 4 s runs; the point now runs 10 s, ~570).  The tolerances
# leave 2-3x margin.
# The worst seen since: on a noisy CI host (calibrated then at 0.1, whose
# CPU per request came out 11 % above the point's) sliced +16 % mean, +34 % p99;
# with both cores busy with other work cpu -16 % mean, -31 % p99.
MEAN_TOL = 0.25
P50_TOL = 0.25
P99_TOL = 0.50
CPU_TOL = 0.15
# A warm no-op request against the 5 ms handler's CPU (0.04 on the development VM, 0.14 on a CI host).
WARM_SHARE = 0.25


def _skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "Node.js (node) is not on PATH: the validation harness needs Node.js >= 18"
    if not (VALIDATION / "server" / "node_modules" / "koa").is_dir():
        return ("validation/server/node_modules is missing: run `npm ci --prefix validation/server` "
                "to install the Koa server's dependencies")
    return None


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    sys.path.insert(0, str(VALIDATION))
    try:
        import run as harness
    finally:
        sys.path.remove(str(VALIDATION))
    out = tmp_path_factory.mktemp("validation")
    # 10 s at 0.3: ~570 requests of the 5 ms handler, so the p99 is the 6th slowest.  With 4 s
    # (~230 requests) it was the 3rd slowest, and one 40 ms stall of a CI host (which queues the
    # two or three requests that arrive during it) made a p99 of 48 ms against 17 predicted while
    # the mean and the median held.
    args = harness.parse_args(["--quick", "--handlers", "cpu,sliced", "--utils", "0.3", "--duration", "10",
                               "--calib-duration", "3", "--no-plot", "--out", str(out),
                               "--max-total", "180"])
    res = harness.sweep(args)
    assert (out / "points.csv").is_file() and (out / "points.json").is_file()
    return res


def _rows(res, handler, kind):
    return [r for r in res["points"] if r["handler"] == handler and r["kind"] == kind]


def _refused_skip(row: dict, what: str) -> None:
    if row["status"] == "refused":
        pytest.skip(f"the load generator refused the {what} after {row.get('refused_attempts')} tries "
                    f"(machine too busy to keep a Poisson schedule): {row.get('reason')}")


def test_harness_produced_points(quick_run):
    cal = _rows(quick_run, "cpu", "calib")
    assert cal, "no calibration point"
    assert cal[0]["status"] in ("ok", "refused"), cal[0].get("reason")
    _refused_skip(cal[0], "calibration run")
    points = _rows(quick_run, "cpu", "point")
    assert len(points) == 1
    assert points[0]["status"] in ("ok", "refused"), points[0].get("reason")


def test_cpu_per_request_matches_busy_loop(quick_run):
    """The /cpu?ms=5 busy loop is wall-clock based, so CPU ~= wall: the
    server's CPU per request, less the measured per-request HTTP overhead
    (/cpu?ms=0) at the same rate, is 5 ms.  Where the host preempts the
    server, the loop's CPU falls short of its 5 ms of wall time: the server
    counts its CPU over the loops themselves (getrusage around each loop), and
    the loops' wall time a request times that share is the reference (a
    clean-clone CI host's refused calibration, p99 schedule lag 13.6 ms,
    measured 3.41 ms of handler CPU).
    The server's CPU does not depend on the schedule otherwise, so a refused
    run counts here.  A no-op request (the
    twin's runs at 100/s and 300/s) costs no more in a busier process than at
    the calibration rate, where it pays the idle process's wake-ups too (which
    the 5 ms handler pays alike), and a small share of the handler's CPU.  Its
    absolute cost is the host's speed, not the harness's: 0.2 ms on the
    development VM, 0.58-0.70 ms on CI hosts; the bound is relative to the
    handler's CPU measured in the same run."""
    cal = _rows(quick_run, "cpu", "calib")[0]
    overhead = quick_run["meta"]["overhead_cpu_per_req_ms"]
    assert cal["cpu_per_req_ms"] is not None and overhead is not None
    handler_cpu = cal["cpu_per_req_ms"] - overhead
    # Every request ran at least its 5 ms of wall-clock loop; more where the host took the CPU at
    # the loop's last look at the clock (5.115 ms a request on a clean-clone CI host).
    wall = cal["spin_wall_per_req_ms"]
    assert 5.0 * (1 - 1e-6) <= wall < 5.0 * (1 + CPU_TOL), wall
    share = cal["spin_cpu_share"]
    if share < 0.5:
        pytest.skip(f"the host gave the server the CPU for only {share:.0%} of its busy loops' wall time")
    assert share < 1.1, share   # above 1 only by the process's other threads (GC) during a loop
    # the loops' own CPU a request: 5 ms where the host left the server alone
    loop_cpu = min(share, 1.0) * wall
    assert abs(handler_cpu / loop_cpu - 1) < CPU_TOL, (cal["cpu_per_req_ms"], overhead, share, wall)
    warm = [r["cpu_per_req_ms"] for r in _rows(quick_run, "cpu-twin", "warm")]
    assert len(warm) == 2 and all(r is not None for r in warm), warm
    assert 0 < min(warm) <= overhead and min(warm) < WARM_SHARE * handler_cpu, (warm, overhead, handler_cpu)


@pytest.mark.parametrize("handler", ["cpu", "sliced"])
def test_prediction_at_low_utilisation(quick_run, handler):
    _refused_skip(_rows(quick_run, handler, "calib")[0], "calibration run")
    point = _rows(quick_run, handler, "point")[0]
    _refused_skip(point, "point")
    assert point["status"] == "ok", point.get("reason")
    assert 0.2 < point["measured_util"] < 0.4, point["measured_util"]
    for stat, tol in (("mean", MEAN_TOL), ("p50", P50_TOL), ("p99", P99_TOL)):
        # the model's prediction for Poisson arrivals at the measured utilisation, and the same
        # model replayed on the run's own send times
        for name in ("err", "err_obs"):
            err = point[f"{name}_{stat}"]
            assert math.isfinite(err) and abs(err) < tol, (
                name, stat, point[f"meas_{stat}"], point[f"pred_{stat}"],
                {k: point.get(k)
                 for k in ("n", "measured_util", "cpu_per_req_ms", "lag_p99_ms", "lag_max_ms")})


def _import_harness():
    sys.path.insert(0, str(VALIDATION))
    try:
        import run as harness
    finally:
        sys.path.remove(str(VALIDATION))
    return harness


def test_sliced_handlers_use_the_event_loop_model_with_their_k():
    """No Node needed: the await-sliced handlers' primary model is the
    simulated event loop with slices = the path's k, in-flight-first admission
    for timer awaits and FIFO admission for setImmediate; the blocking one FCFS."""
    harness = _import_harness()
    full = {h.name: h for h in harness.FULL_HANDLERS}
    assert (full["sliced"].model, full["sliced"].slices, full["sliced"].admission) == ("loop", 5, "idle")
    assert (full["sliced-immediate"].model, full["sliced-immediate"].slices,
            full["sliced-immediate"].admission) == ("loop", 5, "fifo")
    assert (full["mix"].model, full["mix"].slices, full["mix"].admission) == ("loop", 2, "idle")
    assert (full["cpu"].model, full["cpu"].slices) == ("fcfs", 1)
    assert all(h.twin is not None for h in full.values() if h.slices > 1)
    assert harness.slices_of("/mix?cpu=6&io=20&k=2") == 2
    assert harness.slices_of("/cpu?ms=5") == 1
    # rr with one slice is FCFS; with 5 slices it lies between FCFS and PS
    rate = 0.6 / 0.005
    fcfs = harness.model_stats("fcfs", rate, 0.005, 1.0)
    ps = harness.model_stats("ps", rate, 0.005, 1.0)
    rr1 = harness.model_stats("rr", rate, 0.005, 1.0, slices=1)
    rr5 = harness.model_stats("rr", rate, 0.005, 1.0, slices=5)
    for k in ("mean", "p99"):
        assert math.isclose(rr1[k][0], fcfs[k][0], rel_tol=1e-9)
        assert fcfs[k][0] < rr5[k][0] < ps[k][0]


def test_p99_crossing_utilisation():
    """No Node needed.  Points whose measured p99 IS the model (M/D/1, 11 ms, base 0.5 ms) at
    utilisations 0.3, 0.5, 0.7, 0.8: the crossing of the model's values at those points,
    interpolated as the measurement is, is the measured one exactly, while the model's own
    curve crosses ~2 % later (the chord of a convex log p99 crosses early); points
    whose server was 10 % slower than calibrated cross ~10 % earlier, and the error says so."""
    import pandas as pd

    harness = _import_harness()
    s, base = 0.011, 0.5
    u = np.array([0.3, 0.5, 0.7, 0.8])
    model_p99 = harness.model_stats("fcfs", u / s, s, base)["p99"]

    def table(slow: float) -> pd.DataFrame:
        p99 = harness.model_stats("fcfs", u / (s * slow), s * slow, base)["p99"]
        return pd.DataFrame({"handler": "cpu", "kind": "point", "status": "ok", "measured_util": u,
                             "meas_p99": p99, "pred_p99": model_p99, "service_ms": 1e3 * s, "base_ms": base,
                             "model": "fcfs", "slices": 1})

    exact = harness.p99_crossing(table(1.0))[0]
    assert exact["error"] == pytest.approx(0.0, abs=1e-12)
    assert 0.0 < exact["error_curve"] < 0.05
    assert exact["util_measured"] > 0.3 and exact["util_measured"] < 0.8
    slow = harness.p99_crossing(table(1.1))[0]
    assert 0.05 < slow["error"] < 0.15


def test_calibration_arithmetic():
    """No Node needed.  The gap between slices is the twin's median latency over the
    overhead handler's, less the twin's extra CPU, per gap: (5.76 - 0.33 - (0.82 - 0.17)) / 4
    = 1.195 ms (the values of a quiet-machine calibration of /sliced?k=5&ms=2.2); the base
    latency makes each model's p50 equal the measured one at the calibration point."""
    harness = _import_harness()
    h = {x.name: x for x in harness.FULL_HANDLERS}["sliced"]
    overhead = {"status": "ok", "meas_p50": 0.33, "cpu_per_req_ms": 0.17}
    twin = {"status": "ok", "meas_p50": 5.76, "cpu_per_req_ms": 0.82}
    cal = {"status": "ok", "cpu_per_req_ms": 11.8, "measured_util": 0.104, "meas_p50": 18.8}
    harness.calibrate(cal, h, overhead, twin)
    assert cal["delay_ms"] == pytest.approx(1.195)
    assert cal["service_ms"] == pytest.approx(11.8)
    for model in ("fcfs", "rr", "loop"):
        lam = 0.104 / 0.0118
        p50 = harness.model_stats(model, lam, 0.0118, cal[f"base_{model}_ms"], 5, "idle", cal["delay_ms"],
                                  quantiles=("p50",))["p50"][0]
        assert p50 == pytest.approx(18.8, rel=1e-9), model
    # the loop model carries the four 1.2 ms gaps itself, so its base is ~4.8 ms below FCFS's
    assert 4.0 < cal["base_fcfs_ms"] - cal["base_loop_ms"] < 5.5


def test_trace_admission_counting():
    """No Node needed.  validation/admission.py counts, per batch of first slices, the older
    requests in flight.  Hand-made trace, 3 slices per request: A alone (0 older); after A's
    second slice B and C are admitted together while A is in flight (one batch, 1 older); D is
    admitted after all three finished (0 older)."""
    import pandas as pd

    sys.path.insert(0, str(VALIDATION))
    try:
        import admission as tracer  # validation/admission.py
    finally:
        sys.path.remove(str(VALIDATION))
    order = [(0, 0), (0, 1), (1, 0), (2, 0), (0, 2), (1, 1), (2, 1), (1, 2), (2, 2), (3, 0), (3, 1), (3, 2)]
    rows = [(req, sl, float(i), float(i + 1)) for i, (req, sl) in enumerate(order)]  # req, slice, start, end
    trace = pd.DataFrame(rows, columns=["req", "slice", "start_ms", "end_ms"]).assign(entry_ms=0.0)
    adm = tracer.admissions(trace)
    assert adm["older_in_flight"].tolist() == [0, 1, 0]
    assert adm["start_ms"].tolist() == [0.0, 2.0, 9.0]


def test_calibration_takes_the_warmest_twin_run():
    """No Node needed.  The cold-start price is the twin's CPU per request at the calibration
    rate minus the lowest of its warm runs (100/s and 300/s); a failed warm run is ignored."""
    harness = _import_harness()
    h = {x.name: x for x in harness.FULL_HANDLERS}["sliced"]
    overhead = {"status": "ok", "meas_p50": 0.33, "cpu_per_req_ms": 0.17}
    twin = {"status": "ok", "meas_p50": 5.76, "cpu_per_req_ms": 1.07}
    warm = [{"status": "ok", "cpu_per_req_ms": 0.38}, {"status": "ok", "cpu_per_req_ms": 0.14},
            {"status": "refused", "cpu_per_req_ms": 0.01}]
    cal = {"status": "ok", "cpu_per_req_ms": 12.34, "measured_util": 0.116, "meas_p50": 18.8}
    harness.calibrate(cal, h, overhead, twin, warm)
    assert cal["cold_penalty_ms"] == pytest.approx(1.07 - 0.14)
    assert cal["service_ms"] == pytest.approx(12.34 - 0.93)
    harness.calibrate(cal, h, overhead, twin, warm[:1])   # one warm run (sweeps before two rates)
    assert cal["cold_penalty_ms"] == pytest.approx(1.07 - 0.38)


def _write_run(path, resp_ms, start_ms=0.0):
    import pandas as pd

    n = len(resp_ms)
    sched = start_ms + 10.0 * np.arange(n)
    pd.DataFrame({"i": np.arange(n), "sched_ms": sched, "sent_ms": sched, "end_ms": sched + resp_ms,
                  "status": 200}).to_csv(path, index=False)


def test_repeats_are_pooled(tmp_path):
    """No Node needed.  A pooled point holds the statistics of all its runs' kept requests
    together, intervals from the spread of the runs' own values (t with R - 1 dof), averaged
    utilisation, and only the runs that kept their schedule."""
    harness = _import_harness()
    args = harness.parse_args(["--warmup", "0.05", "--out", str(tmp_path)])
    rng = np.random.default_rng(5)
    reps, kept = [], []
    for r in range(3):
        resp = rng.lognormal(2.5, 0.5, 400)
        path = tmp_path / f"run{r}.csv"
        _write_run(path, resp)
        kept.append(resp[5:])   # sched 0, 10, 20, 30, 40 ms fall in the 0.05 s warm-up
        reps.append({"handler": "cpu", "path": "/cpu?ms=11", "target_util": 0.8, "rate": 70.0,
                     "model": "fcfs", "slices": 1, "admission": "fifo", "status": "ok", "seed": 30 + r,
                     "raw_csv": str(path),
                     "cpu_per_req_ms": 11.0 + r, "measured_util": 0.78 + 0.01 * r, "elu": 0.8,
                     "served_rate": 70.0, "lag_mean_ms": 0.01, "lag_p99_ms": 0.1 * (r + 1), "lag_max_ms": 1.0,
                     "scheduled": 400, "completed": 400, "failed": 0, "sockets_opened_during_run": 0,
                     "meas_mean_user": float(resp.mean())})
        for name in harness.STATS:
            x = resp[5:]
            reps[-1]["meas_" + name] = float(x.mean() if name == "mean"
                                             else np.quantile(x, harness.QUANTILES[name]))
    refused = dict(reps[0], status="refused", reason="lag", raw_csv="nowhere.csv")
    row = harness.pool_repeats(reps + [refused], args)
    allk = np.concatenate(kept)
    assert row["kind"] == "point" and row["repeats"] == 4 and row["repeats_ok"] == 3
    assert row["n"] == allk.size and row["completed"] == 1200
    assert row["meas_p99"] == pytest.approx(np.quantile(allk, 0.99))
    assert row["meas_mean"] == pytest.approx(allk.mean())
    own = np.array([r["meas_p99"] for r in reps])
    assert row["meas_p99_ci"] == pytest.approx(4.303 * own.std(ddof=1) / math.sqrt(3))
    assert row["measured_util"] == pytest.approx(0.79) and row["lag_p99_ms"] == pytest.approx(0.3)
    assert row["cpu_per_req_ms"] == pytest.approx(12.0)
    none = harness.pool_repeats([refused], args)
    assert none["status"] == "refused" and "no repeat" in none["reason"]


def test_run_interval_of_the_measurement_as_made():
    """No Node needed.  What FCFS M/D/1 at utilisation 0.8 predicts for a run of 60 s (first 3 s
    dropped): its interval holds the exact long-run mean and p99; the median of its p99 lies
    ~5 % below the long-run p99 (a minute rarely holds the bursts that make the long-run tail;
    the median is estimated to ~2 %); three pooled runs have a narrower interval (the spread of
    a mean falls as 1/sqrt(3)) and a p99 median nearer the long run."""
    harness = _import_harness()
    from capacity import Service, fcfs

    svc_s, rate, base = 0.011, 0.8 / 0.011, 0.5
    svc = Service.deterministic(svc_s)
    mean = 1e3 * fcfs.mean_response(rate, svc) + base
    p99 = 1e3 * fcfs.response_quantile(0.99, rate, svc) + base
    one = harness.run_interval("fcfs", rate, svc_s, base, 1, "fifo", 0.0, 60.0, 3.0)
    three = harness.run_interval("fcfs", rate, svc_s, base, 1, "fifo", 0.0, 60.0, 3.0, runs=3)
    for k, exact in (("mean", mean), ("p99", p99)):
        assert one[k][0] < exact < one[k][2] and three[k][0] < exact < three[k][2], k
    assert one["mean"][1] == pytest.approx(mean, rel=0.03)
    assert 0.88 < one["p99"][1] / p99 < 0.98
    assert one["p99"][1] < three["p99"][1] < 1.02 * p99
    ratio = (three["mean"][2] - three["mean"][0]) / (one["mean"][2] - one["mean"][0])
    assert 0.4 < ratio < 0.75, ratio
    assert three["p99"][2] - three["p99"][0] < 0.7 * (one["p99"][2] - one["p99"][0])
    assert harness.run_interval("ps", rate, svc_s, base, 1, "fifo", 0.0, 60.0, 3.0) is None
    assert harness.run_interval("fcfs", 1.01 / svc_s, svc_s, base, 1, "fifo", 0.0, 60.0, 3.0) is None
