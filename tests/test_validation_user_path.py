"""validation/user_path.py: the compressed day, the generator's --schedule, and the short run.

The short run (``python validation/run.py --user-path --quick``) drives the real Koa server, a
real Prometheus and the open-loop generator for about two minutes; it skips with the reason
where Node.js, the server's npm packages or Prometheus are absent.
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
from _scripts import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The p99 schedule lag the smoke run accepts (validation/README.md, "Honesty rules").
QUICK_MAX_P99_LAG_MS = 5.0


def _user_path():
    return load_script("validation/user_path.py")


def test_the_compressed_day_spans_its_range_with_bursts():
    """720 s between 20 and 110 req/s: the phases add up to the day, the rates stay within the
    range give or take the noise (and the bursts' 1.5x), the night is at the bottom and the
    afternoon at the top, three 2-second bursts; the same seed gives the same day."""
    up = _user_path()
    day = up.compressed_day(720.0, 20.0, 110.0, seed=3)
    sec = np.array([p[0] for p in day])
    rate = np.array([p[1] for p in day])
    assert sec.sum() == pytest.approx(720.0)
    assert int(np.sum(sec == 2.0)) == 3
    steady = rate[sec != 2.0]
    assert steady.min() > 20.0 * 0.75 and steady.max() < 110.0 * 1.3
    assert np.median(steady[:20]) < 25.0 and np.max(steady) > 95.0      # night trough, busy afternoon
    assert up.compressed_day(720.0, 20.0, 110.0, seed=3) == day
    assert up.compressed_day(720.0, 20.0, 110.0, seed=4) != day


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js (node) is not on PATH")
def test_loadgen_schedule_plays_each_phase_at_its_rate(tmp_path):
    """The generator's --schedule against a plain HTTP listener: 3 s at 50 req/s then 3 s at
    200 req/s send about 150 and 600 requests (Poisson counts, 4.5 standard deviations); its
    --metrics-port histogram, read during --linger, holds every completed request."""
    server = subprocess.Popen(["node", "-e", "const s=require('http').createServer((q,r)=>r.end('ok'));"
                               "s.listen(0,'127.0.0.1',()=>console.log(s.address().port));"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        (tmp_path / "day.json").write_text(json.dumps([[3, 50], [3, 200]]))
        gen_port = _user_path()._harness().free_port()
        gen = subprocess.Popen(["node", str(ROOT / "validation" / "loadgen" / "loadgen.js"),
                                "--port", str(port),
                                "--path", "/", "--schedule", str(tmp_path / "day.json"), "--out",
                                str(tmp_path / "run.csv"), "--server-stats", "0", "--warm-sockets", "4",
                                "--max-p99-lag-ms", "1e9", "--max-mean-lag-frac", "1e9",
                                "--metrics-port", str(gen_port), "--linger", "5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        summary = json.loads(gen.stdout.readline())       # printed when the schedule is done
        with urllib.request.urlopen(f"http://127.0.0.1:{gen_port}/metrics", timeout=5) as answer:
            exported = answer.read().decode()
        assert gen.wait(timeout=30) == 0, gen.stderr.read()
        assert summary["phases"] == [[3, 50], [3, 200]] and summary["rate"] == pytest.approx(125.0)
        # The exported histogram holds every completed request, cumulative over the bounds.
        counts = [float(line.rsplit(" ", 1)[1]) for line in exported.splitlines()
                  if line.startswith("loadgen_request_duration_seconds_bucket")]
        assert len(counts) == 58 and counts[-1] == summary["completed"] > 0
        assert all(a <= b for a, b in zip(counts, counts[1:]))
        assert f'loadgen_request_duration_seconds_count{{path="/"}} {summary["completed"]}' in exported
        sched = np.loadtxt(tmp_path / "run.csv", delimiter=",", skiprows=1)[:, 1]
        first, second = int(np.sum(sched < 3000)), int(np.sum(sched >= 3000))
        assert abs(first - 150) < 4.5 * 150 ** 0.5 and abs(second - 600) < 4.5 * 600 ** 0.5
        bad = subprocess.run(["node", str(ROOT / "validation" / "loadgen" / "loadgen.js"),
                              "--port", str(port),
                              "--path", "/", "--schedule", str(tmp_path / "day.json"), "--rate", "5"],
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode == 2 and "give --rate or --schedule, not both" in bad.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_short_user_path_runs_and_reports(tmp_path):
    """The short run end to end: one handler (blocking, 5 ms), a 60 s day, the fit through
    Prometheus's HTTP API from the middleware's histogram and from the generator's (a proxy's
    view), two peak points.  Checked: both fits chose the blocking model and read the CPU per
    request off the process counter (5 ms of busy loop plus Node's, Koa's and prom-client's
    own), the in-process fit found the busy loop's near-constant CPU, and every predicted p99
    has an interval around its estimate; summary.json, the table and the plot are written, and
    ``--repredict`` fits the saved days again to the same predictions.  The
    accuracy targets are the full run's (validation/README.md): this one is too short to hold them."""
    why = _user_path().missing()
    if why is not None:
        pytest.skip(why)
    done = subprocess.run([sys.executable, str(ROOT / "validation" / "run.py"), "--user-path", "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mode"] == "quick"
    assert summary["met"]["in_process"]["of"] == 2 and summary["met"]["proxy"]["of"] == 2
    for row in summary["rows"]:
        # The generator's histogram is a proxy's view only while the generator keeps its schedule:
        # validation/README.md's smoke-run tolerance is 5 ms of p99 lag.  Beyond it the generator's
        # own event loop, sharing the two cores with the server and Prometheus, stretches the
        # times it records as a shared processor would: on one host the proxy fit chose PS + delay
        # (by 400-540 QAIC, at this code and at stop 39's) in three runs with day lag p99 5.3-6.1 ms,
        # FCFS in two at 2.8-3.3 ms -- and PS at 3.1 ms with a CPU-bound process beside it, which
        # CI never runs (wallclock tests run alone).  The lag is recorded; no discipline is claimed.
        # Nor is the proxy's view held to FCFS when the fit says its choice misses the histograms:
        # a clean-clone CI run at a day lag of 3.8 ms chose PS + delay (23 % RMS miss in time, FCFS
        # + delay 29 %), and so did a run here at 3.9 ms.  The proxy sees the stalls between
        # requests (prom-client's scrape every 5 s, GC, HTTP parsing) that no model here has;
        # at 0.7 and 0.8 that PS + delay fit predicted p99 73 / 117 ms against 48 / 87 measured,
        # the in-process FCFS fit 43 / 66 ms (issue 16).
        lagged = row["histogram"] == "proxy" and row["day_lag_p99_ms"] > QUICK_MAX_P99_LAG_MS
        said = row["histogram"] == "proxy" and row["misses_histograms"]
        assert lagged or said or row["chosen"].startswith("fcfs"), row
        if row["histogram"] == "in_process":
            # A busy loop's CPU is near constant; four buckets per doubling resolve it.
            assert row["scv"] < 0.25, row
        assert 4.5 < row["cpu_per_request_ms"] < 7.5, row
        assert row["pred_p99_low_ms"] <= row["pred_p99_ms"] <= row["pred_p99_high_ms"], row
        assert row["requests"] > 1000 and 0.5 < row["measured_util"] < 0.95, row
    # The crossing of a p99 threshold, one per histogram, between the two measured p99s.
    assert [c["histogram"] for c in summary["crossings"]] == ["in_process", "proxy"]
    lo, hi = sorted(r["p99_ms"] for r in summary["rows"][::2])
    for c in summary["crossings"]:
        assert lo <= c["threshold_ms"] <= hi, c
    assert (tmp_path / "user_path.png").stat().st_size > 0
    assert "HistogramFit" in (tmp_path / "user_path.txt").read_text()
    # The README's table: one line per point and histogram, one per crossing; the CPU per request
    # of the day's fit against the peak's own (its drift is what the p99 at the peak's utilisation
    # takes out).
    md = (tmp_path / "user_path.md").read_text()
    assert md.count("\n| cpu | ") == len(summary["rows"]) + len(summary["crossings"])
    # The server pinned to the first core this process may use (Prometheus, the generator and the
    # harness on the second), and the report says so.
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        assert {row["server_core"] for row in summary["rows"]} == {cores[0]}, summary["rows"]
        assert f"the server pinned to core {cores[0]}" in md, md
    for row in summary["rows"]:
        assert row["peak_cpu_per_request_ms"] == pytest.approx(1e3 * row["measured_util"] / row["rate"])
        assert f"{row['cpu_per_request_ms']:.2f} \u2192 {row['peak_cpu_per_request_ms']:.2f}" in md
    # The saved query answers hold the whole day: fitted again without the server, the same
    # package gives the same predictions against the same measured peaks.
    again = subprocess.run([sys.executable, str(ROOT / "validation" / "run.py"), "--user-path",
                            "--repredict", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    redone = json.loads((tmp_path / "summary.json").read_text())
    assert redone["repredicted"] and len(redone["rows"]) == len(summary["rows"])
    for old, new in zip(summary["rows"], redone["rows"]):
        assert new["p99_ms"] == old["p99_ms"] and new["chosen"] == old["chosen"], (old, new)
        assert new["pred_p99_ms"] == pytest.approx(old["pred_p99_ms"], rel=1e-6), (old, new)


def test_the_p99_crossing_against_an_mm1_worked_by_hand():
    """The crossing of the geometric mean of two measured p99s, on an M/M/1 whose p99 is
    ``ln(100) / (mu - lambda)``: the predicted crossing is the root ``mu - ln(100) / threshold``
    (to the grid's interpolation), its band brackets it, the measured one is the log-linear
    interpolation between the points (their mean rate), and utilisations use the measured CPU."""
    up = _user_path()
    mu = 100.0                                          # 10 ms CPU

    def p99(rate):
        return np.log(100.0) / (mu - np.asarray(rate, dtype=float))

    class Fit:
        cpu_per_request_ = 1.0 / mu

        def predict(self, q, rate, interval=None):
            from capacity.fit import Prediction

            est = p99(rate)
            return est if interval is None else Prediction(est, 0.9 * est, 1.1 * est)

    rows = [{"rate": r, "p99_ms": 1e3 * float(p99(r)), "measured_util": 1.02 * r / mu} for r in (80.0, 70.0)]
    got = up.p99_crossing(Fit(), rows)
    threshold = float(np.sqrt(p99(70.0) * p99(80.0)))
    assert got["threshold_ms"] == pytest.approx(1e3 * threshold)
    root = mu - np.log(100.0) / threshold
    assert got["predicted_util"] == pytest.approx(1.02 * root / mu, rel=2e-4)
    assert got["measured_util"] == pytest.approx(1.02 * 75.0 / mu, rel=1e-12)
    assert got["error"] == pytest.approx(root / 75.0 - 1, rel=1e-3)
    # The high band reaches the threshold first (lower utilisation), the low band last.
    assert got["predicted_util_low"] < got["predicted_util"] < got["predicted_util_high"]
    low = (mu - np.log(100.0) / (threshold / 1.1)) * 1.02 / mu
    assert low == pytest.approx(got["predicted_util_low"], rel=2e-4)
    flat = up.p99_crossing(Fit(), [dict(rows[0], p99_ms=5.0), dict(rows[1], p99_ms=6.0)])
    assert np.isnan(flat["error"]) and "did not rise" in flat["note"]


def test_the_measured_p99s_own_interval_from_its_runs():
    """Three runs' p99s 100, 120, 140 ms: mean 120, s = 20, t(0.95, 2) = 2.919986, so
    120 -+ 2.919986 x 20 / sqrt(3) = 86.28 .. 153.72; one run has no interval."""
    up = _user_path()
    low, high = up._run_spread([100.0, 120.0, 140.0])
    assert (low, high) == pytest.approx((120 - 33.7171, 120 + 33.7171), abs=1e-3)
    assert all(math.isnan(x) for x in up._run_spread([100.0]))



def test_a_peak_run_on_a_noisy_host_is_measured_again(monkeypatch, tmp_path):
    """The full run's guard: a run in which the server had its core for 0.83 of its busy loops'
    wall time is measured again with the same arrivals, and the quiet one (0.99) kept; where every
    attempt is noisy the last is kept and the report says so next to the point."""
    up = _user_path()
    shares = iter([0.83, 0.99, 0.90, 0.91, 0.92, 0.93])
    calls = []

    def loadgen(port, path, csv, seed, rate=None, duration=None):
        calls.append(seed)
        share = next(shares)
        return {"server": {"spin_cpu_ms": 1000.0 * share, "spin_wall_ms": 1000.0}, "lag_p99_ms": 1.0}

    monkeypatch.setattr(up, "_loadgen", loadgen)
    s = up.FULL_SETTINGS
    summary, share, dropped = up._quiet_run(1, "/cpu", tmp_path / "a.csv", 7, 50.0, s)
    assert (share, dropped, calls) == (pytest.approx(0.99), [pytest.approx(0.83)], [7, 7])
    summary, share, dropped = up._quiet_run(1, "/cpu", tmp_path / "b.csv", 8, 50.0, s)
    assert share == pytest.approx(0.93) and dropped == pytest.approx([0.90, 0.91, 0.92])
    assert calls[2:] == [8] * (1 + s.host_retries)
    row = {"handler": "cpu", "histogram": "in_process", "measured_util": 0.79,
           "noisy_runs_dropped": dropped, "peak_spin_cpu_share": share}
    notes = "\n".join(up._host_notes([row, dict(row, histogram="proxy")]))
    assert "3 run(s) measured again" in notes and "0.90, 0.91, 0.92" in notes, notes
    assert "a noisy host" in notes and notes.count("cpu at 0.790") == 2, notes
    quiet = dict(row, noisy_runs_dropped=[], peak_spin_cpu_share=0.99)
    assert up._host_notes([quiet]) == [] and up._host_notes([dict(quiet, peak_spin_cpu_share=math.nan)]) == []
    placed = up._host_notes([dict(quiet, server_core=0), dict(quiet, server_core=0)])
    assert placed == ["", "- cpu: the server pinned to core 0, the harness, Prometheus and the generator off it"], placed

@pytest.fixture(scope="module")
def rescored(tmp_path_factory):
    """``rescored(RUN, rows)``: a saved run (validation/runs/RUN) fitted again with this package, in
    a copy, once per module (the totals test reads every day the per-day tests read): its summary,
    checked to hold ``rows`` re-predicted peak rows, and the copy's directory."""
    done = {}

    def get(run: str, rows: int) -> tuple[dict, pathlib.Path]:
        if run not in done:
            where = tmp_path_factory.mktemp(run) / "run"
            shutil.copytree(ROOT / "validation" / "runs" / run, where)
            done[run] = _user_path().repredict(where), where
        summary, where = done[run]
        assert summary["repredicted"] and len(summary["rows"]) == rows
        return summary, where

    return get


def _in_process_text(run: pathlib.Path) -> str:
    """The re-scored run's text (user_path.txt) of the fit from the in-process histogram."""
    text = (run / "user_path.txt").read_text()
    return text.split("-- from the in_process histogram", 1)[1].split("-- from the proxy", 1)[0]


def test_the_saved_full_run_is_predicted_as_the_readme_says(rescored):
    """The full run of 2026-12-05 (validation/runs/2026-12-05-user-path: a real Koa server's
    Prometheus answers over 12-minute days, and the clients' latencies measured at 70 % and 80 %
    CPU) fitted again with this package: from the proxy's histogram the p99 within 20 % at 7 of
    8 points or more, the mean within 10 % at 8, the 90 % interval holding the measured p99 at 8
    and the crossing within 5 % for 1 of 4 handlers; from the in-process one 7, 8, 7 and 3 -- the
    figures in validation/README.md, which a change may improve but not lose without saying so
    there.  Holding the day's CPU line instead of the ratio (2026-12-07, measured on this and
    eight more days) took the means from 7 and 5 to 8 and 8, and lost crossings: three of the
    proxy's lie at +5.4 to +6.4 %, the in-process blocking handler's at +6.0 %, where the ratio's
    extra CPU had put them within 5 % (and its p99 at 0.8 is -23 %)."""
    summary, run = rescored("2026-12-05-user-path", 16)
    proxy = summary["met"]["proxy"]
    # The measured rr body (capacity._rr_body) took the proxy's means from 6 to 7, the line to 8.
    assert proxy["p99"] >= 7 and proxy["mean"] >= 8 and proxy["p99_covered"] >= 8, proxy
    assert proxy["crossing"] >= 1, proxy
    inside = summary["met"]["in_process"]
    # In-process: the middleware's view of rr modelled (capacity._rr_in_process) took these from
    # 5, 2, 6 and 2 to 7, 5, 6 and 4; the measured rr body to 8, 5, 7 and 4; the line to 7, 8, 7, 3.
    assert inside["p99"] >= 7 and inside["mean"] >= 8 and inside["p99_covered"] >= 7, inside
    assert inside["crossing"] >= 3, inside
    # Intervals that say something: no parameter on its search bound blows one up (the mix day's
    # scv at its floor once gave a p99 interval reaching 16 s about a 92 ms estimate).
    for row in summary["rows"]:
        if row["histogram"] == "proxy":
            assert row["pred_p99_high_ms"] < 2.0 * row["pred_p99_ms"], row



def test_the_second_saved_day_is_predicted_as_the_readme_says(rescored):
    """The seed-2 day of 2026-12-05 (validation/runs/2026-12-05b-user-path-seed2: the
    setImmediate-sliced and CPU + IO handlers, measured after the in-process rule and the
    measured rr body were made, so neither was fitted to it) fitted again: from either histogram
    the p99 within 20 % at 3 of 4 points, the mean within 10 % at 4 of 4, the 90 % interval
    holding the measured p99 at 4 of 4; the crossing within 5 % for both handlers in-process and
    one from the proxy -- the figures in validation/README.md (holding the day's CPU line took the
    means from 3 to 4 and the proxy's mix crossing from within 5 % to +5.5 %)."""
    summary, run = rescored("2026-12-05b-user-path-seed2", 8)
    for where in ("proxy", "in_process"):
        met = summary["met"][where]
        assert met["p99"] >= 3 and met["mean"] >= 4 and met["p99_covered"] >= 4, (where, met)
    assert summary["met"]["in_process"]["crossing"] >= 2 and summary["met"]["proxy"]["crossing"] >= 1, summary["met"]


def test_the_blocking_handlers_second_day_is_predicted_as_the_readme_says(rescored):
    """The seed-3 day of 2026-12-06 (validation/runs/2026-12-06-user-path-cpu-seed3: the blocking
    handler, five runs of 60 s per peak point, measured after this package's fits were settled)
    fitted again: from either histogram the p99 within 20 % and the mean within 10 % at both
    points, the 90 % interval holding the measured p99 at both, and the crossing within 5 % -- the
    figures in validation/README.md (measured: p99 -15/-11 % in-process, -14/-10 % from the proxy;
    crossing +4.8 % and +4.7 %)."""
    summary, run = rescored("2026-12-06-user-path-cpu-seed3", 4)
    for where in ("proxy", "in_process"):
        met = summary["met"][where]
        assert met["p99"] >= 2 and met["mean"] >= 2 and met["p99_covered"] >= 2, (where, met)
        assert met["crossing"] >= 1, (where, met)
    # The measured p99 of each point is the pool of five runs; the spread of those runs is what
    # made the first day's point at 0.80 uncertain (three runs, 126-173 ms).
    for row in summary["rows"]:
        assert row["runs"] == 5, row


def test_a_day_where_the_fits_miss_says_so(rescored):
    """The seed-4 day of 2026-12-06 (validation/runs/2026-12-06b-user-path-immediate-seed4: the
    setImmediate-sliced handler, five runs per peak point).  In-process, rr with FIFO admission
    (the handler's structure) fits the histograms 9.5 % off in time; the across-windows z (1.24,
    1.28 needed) once set it aside for FCFS with gamma CPU, 33 % off, which over-predicted the p99
    by 97 % and 130 %.  A PS/FCFS fit that misses its own histograms no longer keeps a closer rr
    out on that z (capacity.fit._rr_candidates.rests_on_one_window), and the fit says why it kept
    rr: then +7 % and +36 %, the mean +4 % and +19 %, the crossing -5 %; the proxy's fit (FCFS
    with a delay) -28 % and -16 %.  Since 2026-12-07 the fits hold the day's CPU line (1.5-2.4 % of
    a core of background here) and try rr at near-constant CPU: in-process rr with gamma CPU now
    wins without that waiver (p99 -3 % and +18 %, means -4 % and +5 %), the proxy chooses rr with
    deterministic CPU and a delay (-5 % and +12 %, means -4 % and +2 %), every interval holds and
    both crossings are within 2 %.  The figures are validation/README.md's; a change may raise
    these counts but not lower them without saying so."""
    summary, run = rescored("2026-12-06b-user-path-immediate-seed4", 4)
    in_process = _in_process_text(run)
    assert "RR queue" in in_process and "misses the histograms" not in in_process, in_process[-2000:]
    for where in ("proxy", "in_process"):
        met = summary["met"][where]
        assert met["p99"] >= 2 and met["mean"] >= 2 and met["p99_covered"] >= 2 and met["crossing"] >= 1, (where, met)
    for row in summary["rows"]:
        assert row["runs"] == 5, row
        want = "rr gamma" if row["histogram"] == "in_process" else "rr deterministic + delay"
        assert row["chosen"] == want and abs(row["p99_error"]) < 0.20, row


def test_a_fourth_setimmediate_day_scored_after_the_guard_changed(rescored):
    """The seed-5 day of 2026-12-06 (validation/runs/2026-12-06c-user-path-immediate-seed5),
    measured after the seed-4 day changed the round-robin guard, on a day nothing was developed
    against.  In-process, rr with gamma CPU is chosen by the ordinary rule (its gain consistent
    across windows: no waiver).  Holding the ratio it over-predicted the p99 by 21 % and 36 %, and
    the proxy's FCFS with a delay was -17 % and -13 %, light in the day's busiest windows' tail and
    saying so.  Holding the day's CPU line (since 2026-12-07), in-process rr is +11 % and +20 %
    (means +4 % and +7 %, crossing -4.2 %) and the proxy chooses rr with deterministic CPU and a
    delay, +16 % and +25 % (crossing -5.6 %); at 0.8 both intervals (156-255 and 160-272 ms) now
    miss the measured 155 ms, where the ratio's held it.  As validation/README.md has them; a
    change may raise these counts but not lower them without saying so there."""
    summary, run = rescored("2026-12-06c-user-path-immediate-seed5", 4)
    in_process = _in_process_text(run)
    assert "in its busiest windows" not in in_process, in_process[-2000:]
    assert "RR queue" in in_process and "kept although its gain" not in in_process, in_process[-2000:]
    inside, proxy = summary["met"]["in_process"], summary["met"]["proxy"]
    assert inside["p99"] >= 1 and inside["mean"] >= 2 and inside["p99_covered"] >= 1, inside
    assert inside["crossing"] >= 1, inside
    assert proxy["p99"] >= 1 and proxy["mean"] >= 1 and proxy["p99_covered"] >= 1, proxy
    for row in summary["rows"]:
        assert row["runs"] == 5 and row["chosen"].startswith("rr") and abs(row["p99_error"]) < 0.30, row


def test_the_real_loop_runs_as_its_round_robin_model_at_the_peaks_own_cpu():
    """The setImmediate-sliced handler (``/sliced?k=5&yield=immediate``: five busy slices, an await
    on setImmediate between them) at its eight measured peak points of the four saved days with it.
    capacity.rr with the handler's own structure -- five slices of deterministic CPU, FIFO admission,
    no slice delay -- at the CPU per request each peak measured (the server's CPU counter over its
    requests, background included), nothing fitted, against what the generator measured: the mean
    within 6 % at every point (measured: within 5 %), the p99 within 26 % (measured: -25 % to +13 %;
    the runs of a point spread their p99s by +-15-20 %) and the p99 errors centred within 6 % of
    zero (measured: +0.6 %).  What the day's fits miss at these points is then the CPU per request
    they hold, not the model."""
    from capacity import Service, rr

    days = ["2026-12-05-user-path", "2026-12-05b-user-path-seed2", "2026-12-06b-user-path-immediate-seed4",
            "2026-12-06c-user-path-immediate-seed5"]
    p99_errors = []
    for day in days:
        measured = json.loads((ROOT / "validation" / "runs" / day / "summary-measured.json").read_text())
        rows = [r for r in measured["rows"] if r["handler"] == "sliced-immediate" and r["histogram"] == "proxy"]
        assert [r["target_util"] for r in rows] == [0.7, 0.8], day
        for r in rows:
            assert "k=5" in r["path"] and "yield=immediate" in r["path"], r["path"]
            cpu = Service.deterministic(r["measured_util"] / r["rate"])
            p99 = float(rr.response_quantile(0.99, r["rate"], cpu, slices=5, admission="fifo"))
            mean = float(rr.mean_response(r["rate"], cpu, slices=5, admission="fifo"))
            assert abs(1e3 * mean / r["mean_ms"] - 1) < 0.06, (day, r["target_util"], 1e3 * mean, r["mean_ms"])
            p99_errors.append(1e3 * p99 / r["p99_ms"] - 1)
            assert abs(p99_errors[-1]) < 0.26, (day, r["target_util"], 1e3 * p99, r["p99_ms"])
    assert len(p99_errors) == 8 and abs(np.mean(p99_errors)) < 0.06, p99_errors


def test_a_fifth_setimmediate_day_says_where_its_proxy_fit_is_low(rescored):
    """The seed-7 day of 2026-12-06 (validation/runs/2026-12-06e-user-path-immediate-seed7), measured
    after the fits began to judge the busiest windows' tail, nothing developed against it.  Holding
    the ratio, the proxy's FCFS fit (gamma CPU and a delay) missed that tail by -43 % and said so,
    its p99s at the peaks 22 % and 18 % low.  Holding the day's CPU line and trying rr at
    near-constant CPU (since 2026-12-07), the proxy chooses rr with deterministic CPU and a delay:
    it still misses that tail (by 12 %) and says so, yet its p99s are +15 % and +17 %; in-process
    rr +5 % and +12 %; every interval holds, every mean within 10 %, both crossings within 5 %.  As
    validation/README.md has them; a change may raise these counts but not lower them without
    saying so there."""
    summary, run = rescored("2026-12-06e-user-path-immediate-seed7", 4)
    text = (run / "user_path.txt").read_text()
    proxy_text = text.split("-- from the proxy", 1)[1]
    assert "in its busiest windows" in proxy_text and "faster than observed" in proxy_text, proxy_text[-2000:]
    for where in ("proxy", "in_process"):
        met = summary["met"][where]
        assert met["p99_covered"] >= 2 and met["p99"] >= 2 and met["mean"] >= 2 and met["crossing"] >= 1, summary["met"]
    for row in summary["rows"]:
        assert row["runs"] == 5 and row["chosen"].startswith("rr"), row
        if row["histogram"] == "proxy":
            assert row["busy_tail_miss"] < -0.10, row


def test_a_sixth_setimmediate_day_is_predicted_as_the_readme_says(rescored):
    """The seed-8 day of 2026-12-07 (validation/runs/2026-12-07-user-path-immediate-seed8), measured
    after the two readings of the CPU counter were compared on the earlier days, nothing developed
    against it: both histograms choose rr (with a delay).  Holding the ratio: the p99 within 20 % at
    both points (+18 / +18 % in-process, +19 / +19 % proxy), every interval holds, the crossing
    within 5 % (-4.5 / -4.8 %), the means high (+8 / +13 %, +11 / +15 %: the ratio's CPU per
    request 1.2-2.4 % above the peaks').  Holding the day's CPU line (since 2026-12-07): p99 +12 /
    +10 % and +18 / +12 %, means +5 / +6 % and +9 / +10.0 %, crossings -2.8 / -4.3 %.  As
    validation/README.md has them; a change may raise these counts but not lower them without
    saying so there."""
    summary, run = rescored("2026-12-07-user-path-immediate-seed8", 4)
    for where in ("proxy", "in_process"):
        met = summary["met"][where]
        assert met["p99"] >= 2 and met["p99_covered"] >= 2 and met["crossing"] >= 1, summary["met"]
    assert summary["met"]["in_process"]["mean"] >= 2 and summary["met"]["proxy"]["mean"] >= 1, summary["met"]
    for row in summary["rows"]:
        assert row["runs"] == 5 and row["chosen"].startswith("rr"), row


def test_a_third_full_run_is_predicted_as_the_readme_says(rescored):
    """The seed-9 run of 2026-12-07 (validation/runs/2026-12-07b-user-path-seed9: the blocking,
    setImmediate-sliced and CPU + IO handlers, five runs per peak point), measured to choose between
    the two readings of the day's CPU counter, nothing developed against it.  Holding the line: the
    p99 within 20 % and the mean within 10 % at all 12 points (holding the ratio: 11 and 8; the
    ratio's CPU per request was 0.5-6.5 % above the peaks'); the intervals hold 10 of 12 (the
    in-process mix fit's are above both measured p99s, as with the ratio); the crossings within 5 %
    for 2 of 3 handlers from each histogram (the blocking handler's at +5.3 / +5.1 %, +2.1 / +1.9 %
    holding the ratio).  As validation/README.md has them; a change may raise these counts but not
    lower them without saying so there."""
    summary, run = rescored("2026-12-07b-user-path-seed9", 12)
    for where in ("proxy", "in_process"):
        met = summary["met"][where]
        assert met["p99"] >= 6 and met["mean"] >= 6 and met["crossing"] >= 2, (where, met)
    assert summary["met"]["proxy"]["p99_covered"] >= 6 and summary["met"]["in_process"]["p99_covered"] >= 4
    for row in summary["rows"]:
        assert row["runs"] == 5, row


def test_the_timer_sliced_handler_measured_again_is_predicted_as_the_readme_says(rescored):
    """The timer-sliced handler of the seed-9 run measured again on its own
    (validation/runs/2026-12-07c-user-path-sliced-seed9; the first measurement's peaks met a noisy
    host).  In-process rr with a delay: p99 -13 / -11 %, means -3 / +4 %, crossing +4.9 %; the proxy
    chooses PS with a delay: p99 +9 / +12 %, means +15 / +26 % (too high: PS has the queue's tail
    but not its body), crossing -3.0 %; every interval holds.  Holding the ratio: p99 -1 / +8 % and
    +24 / +36 %, means +6 / +21 % and +26 / +46 %, crossings -0.3 / -7.7 %.  As validation/README.md
    has them; a change may raise these counts but not lower them without saying so there."""
    summary, run = rescored("2026-12-07c-user-path-sliced-seed9", 4)
    inside, proxy = summary["met"]["in_process"], summary["met"]["proxy"]
    assert inside["p99"] >= 2 and inside["mean"] >= 2 and inside["p99_covered"] >= 2 and inside["crossing"] >= 1
    assert proxy["p99"] >= 2 and proxy["p99_covered"] >= 2 and proxy["crossing"] >= 1, proxy
    noted = (run / "user_path.md").read_text()
    assert "6 run(s) measured again" in noted and "a noisy host" in noted, noted


def test_the_first_pinned_day_is_predicted_as_the_readme_says(rescored):
    """The timer-sliced handler on a fresh day (seed 10), the first with the server pinned
    (validation/runs/2026-12-07d-user-path-sliced-seed10; no run measured again).  In-process rr with
    a delay: p99 +7 / +9 %, means +5 / +11 %, crossing -1.8 %; the proxy chooses FCFS with a delay:
    p99 -11 / -13 %, means -5 / -6 %, crossing +4.7 %; every interval holds.  Holding the ratio the
    in-process fit was +23 / +37 % (p99) and +16 / +33 % (means).  As validation/README.md has them;
    a change may raise these counts but not lower them without saying so there."""
    summary, run = rescored("2026-12-07d-user-path-sliced-seed10", 4)
    inside, proxy = summary["met"]["in_process"], summary["met"]["proxy"]
    assert inside["p99"] >= 2 and inside["mean"] >= 1 and inside["p99_covered"] >= 2 and inside["crossing"] >= 1
    assert proxy["p99"] >= 2 and proxy["mean"] >= 2 and proxy["p99_covered"] >= 2 and proxy["crossing"] >= 1
    assert "the server pinned to core 0" in (run / "user_path.md").read_text()


def test_the_first_full_pinned_day_is_predicted_as_the_readme_says(rescored):
    """All four handler kinds on a fresh day (seed 11), the server pinned
    (validation/runs/2026-12-07e-user-path-pinned-seed11; one run measured again).  In-process: p99
    within 20 % at 8 of 8, means within 10 % at 6, intervals 8, crossings 4 of 4; proxy: 7, 7, 8
    and 3 (its mix p99 at 0.8 is -21 %, its mix crossing +5.6 %).  The blocking handler's p99, low
    by 10-23 % on three unpinned days, is within 7 % at both loads from both histograms.  As
    validation/README.md has them; a change may raise these counts but not lower them without
    saying so there."""
    summary, run = rescored("2026-12-07e-user-path-pinned-seed11", 16)
    inside, proxy = summary["met"]["in_process"], summary["met"]["proxy"]
    assert inside["p99"] >= 8 and inside["mean"] >= 6 and inside["p99_covered"] >= 8 and inside["crossing"] >= 4
    assert proxy["p99"] >= 7 and proxy["mean"] >= 7 and proxy["p99_covered"] >= 8 and proxy["crossing"] >= 3
    blocking = [r["p99_error"] for r in summary["rows"] if r["handler"] == "cpu"]
    assert len(blocking) == 4 and max(abs(e) for e in blocking) < 0.10, blocking
    noted = (run / "user_path.md").read_text()
    assert "the server pinned to core 0" in noted and "1 run(s) measured again" in noted, noted


#: Every saved user-path day and its peak rows: the totals below are over all of them.
SAVED_DAYS = {"2026-12-05-user-path": 16, "2026-12-05b-user-path-seed2": 8, "2026-12-06-user-path-cpu-seed3": 4,
              "2026-12-06b-user-path-immediate-seed4": 4, "2026-12-06c-user-path-immediate-seed5": 4,
              "2026-12-06d-user-path-seed6": 16, "2026-12-06e-user-path-immediate-seed7": 4,
              "2026-12-07-user-path-immediate-seed8": 4, "2026-12-07b-user-path-seed9": 12,
              "2026-12-07c-user-path-sliced-seed9": 4, "2026-12-07d-user-path-sliced-seed10": 4,
              "2026-12-07e-user-path-pinned-seed11": 16}


def test_every_saved_day_together_meets_the_readme_totals(rescored):
    """Issue 16's targets counted over every saved real-server day (96 peak points and 48 crossings,
    both histograms together), as validation/README.md's table has them since the fits hold the
    day's CPU line: the p99 within 20 % at 87 of 96 points, the mean within 10 % at 86, the 90 %
    interval holding the measured p99 at 90 (above 9 in 10), the crossing within 5 % at 39 of 48
    (the first 76 points and 38 crossings: 68, 70, 70, 30; the pinned seed-10 day added 4, 3, 4
    and 2, the pinned seed-11 day of all four handlers 15, 13, 16 and 7).  Holding the ratio the
    first 76 gave 61, 42, 73 and 28.  Each day also has its own test above; this one keeps the sum
    from sliding a point at a time."""
    assert set(SAVED_DAYS) == {p.name for p in (ROOT / "validation" / "runs").iterdir() if p.is_dir()}
    total = dict.fromkeys(["p99", "mean", "p99_covered", "of", "crossing", "crossings"], 0)
    for run, rows in SAVED_DAYS.items():
        summary, _ = rescored(run, rows)
        for met in summary["met"].values():
            for k in total:
                total[k] += met[k]
    assert (total["of"], total["crossings"]) == (96, 48), total
    assert total["p99"] >= 87 and total["mean"] >= 86 and total["p99_covered"] >= 90, total
    assert total["crossing"] >= 39, total


def test_rr_near_constant_makes_the_seed4_proxy_fit_round_robin(monkeypatch):
    """``capacity.fit._rr_candidates.RR_NEAR_CONSTANT`` (on in the package; the harness's switch, the
    measurement in validation/README.md): the seed-4 setImmediate day seen by the proxy, whose best
    PS/FCFS fit is FCFS + delay at scv 0.001, below the 0.01 rr can search with that family.  Off, rr
    is set aside (its body too wide for the light windows) and FCFS stands; on, rr is tried with
    deterministic CPU and chosen, ahead of that FCFS fit in deviance."""
    from capacity.fit import _rr_candidates

    path = ROOT / "validation" / "runs" / "2026-12-06b-user-path-immediate-seed4" / "day-sliced-immediate-proxy.json"
    on, _ = _user_path()._fit_saved(path)
    monkeypatch.setattr(_rr_candidates, "RR_NEAR_CONSTANT", False)
    off, _ = _user_path()._fit_saved(path)
    assert off.discipline == "fcfs" and off.scv_ < 0.01, (off.discipline, off.scv_)
    assert (on.discipline, on.family) == ("rr", "deterministic"), (on.discipline, on.family)
    assert on.deviance_ < off.deviance_, (on.deviance_, off.deviance_)
