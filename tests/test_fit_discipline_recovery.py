"""Discipline recovery of the default histogram fit on simulated days (issue 15, point 8).

The days are those of ``tools/fit_discipline_recovery.py`` (:func:`simulated_day`): twelve
windows over a diurnal curve from 10 % to 70 % CPU, 5-30 minute windows (1.5e3-6e4 requests),
Prometheus-style bucket layouts, latencies from the exact seeded simulator.  The reference for
the p99 at 80 % CPU (a load no window saw) is the exact FCFS / PS value.

Measured with the tool (10 days per discipline, seeds as below): FCFS 10/10 and PS 10/10 chosen,
p99 at 0.8 within 6.7 % on every day; round robin (await-sliced event loop, 3-13 slices, fifo and
idle admission) chosen on 10 of 10 days, the CPU per request within 3 % on 9 of 10 (within
0.8 %; the tenth +5.5 %), p99 at 0.8 within 10 % of a 1e6-request simulation on 9 of 10 (at most
12.5 % off).  Until the FIFO body was measured (:mod:`capacity._rr_body`) rr won 4 of 10: the
formula's p10-p75 was 10-30 % low, so FCFS with a wider CPU law fitted the bucket counts better.
Until the idle body was measured too, four of the five idle-admission days were fitted as FIFO
round robin, their CPU 3-7 % low (CPU within 3 % on 5 of 10).  The tenth day (FIFO, lognormal
CPU of scv 1.5, 13 slices, 30-minute windows: 575,000 requests) is fitted as idle round robin
with 2 slices: the measured body is 1-2.5 % off there, in a wave over the levels that follows
the PS quantile of a lognormal law at light load (computed through a phase-type fit, issue 14),
and with that many requests such a wave outweighs the right slice count.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from capacity.fit import from_histograms
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    return load_script("tools/fit_discipline_recovery.py")


tool = _load_tool()


def _recovery(discipline: str, days: int):
    rows = []
    for d in range(days):
        seed = 1000 * (1 + list(tool.SERVICES).index(discipline)) + d
        data, truth = tool.simulated_day(discipline, d, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = from_histograms(data)
        rows.append((fit, truth))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("discipline", ["fcfs", "ps"])
def test_fcfs_and_ps_days_are_recognised(discipline):
    """Eight days each (CPU lognormal/gamma, scv 0.5-4, 10-30 ms; three bucket layouts; 5-30
    minute windows): the true discipline chosen on all eight, the CPU per request within 3 %, and
    the p99 at 80 % CPU within 10 % of the exact value on at least seven (measured: all, at most
    6.7 % off)."""
    rows = _recovery(discipline, 8)
    chosen = [fit.discipline for fit, _ in rows]
    assert chosen.count(discipline) == 8, chosen
    cpu_err = [fit.cpu_per_request_ / truth["mean"] - 1 for fit, truth in rows]
    assert max(map(abs, cpu_err)) < 0.03, cpu_err
    p99_err = [float(fit.predict(0.99, tool.PEAK_UTILIZATION / truth["mean"])) / tool.true_p99(truth, 0)[0] - 1
               for fit, truth in rows]
    assert sum(abs(e) <= 0.10 for e in p99_err) >= 7, p99_err


@pytest.mark.slow
def test_event_loop_days_are_recognised_as_round_robin():
    """Ten event-loop days (3-13 slices, fifo and idle admission, gamma/lognormal CPU of scv
    0.5-2): round robin chosen on at least 9 (measured: all 10), the CPU per request within 3 % on
    at least 9 (measured: 9, the tenth +5.5 %), and the p99 at 80 % CPU within 15 % of a
    simulation of the true model on at least 8 (measured: 9 within 10 %, at most 12.5 % off)."""
    rows = _recovery("rr", 10)
    chosen = [fit.discipline for fit, _ in rows]
    assert chosen.count("rr") >= 9, chosen
    cpu_err = [fit.cpu_per_request_ / truth["mean"] - 1 for fit, truth in rows]
    assert sum(abs(e) < 0.03 for e in cpu_err) >= 9, cpu_err
    p99_err = [float(fit.predict(0.99, tool.PEAK_UTILIZATION / truth["mean"])) / tool.true_p99(truth, 1e6)[0] - 1
               for fit, truth in rows]
    assert sum(abs(e) <= 0.15 for e in p99_err) >= 8, p99_err
