"""Discipline recovery of the default histogram fit on simulated days (issue 15, point 8).

The days are those of ``tools/fit_discipline_recovery.py`` (:func:`simulated_day`): twelve
windows over a diurnal curve from 10 % to 70 % CPU, 5-30 minute windows (1.5e3-6e4 requests),
Prometheus-style bucket layouts, latencies from the exact seeded simulator.  The reference for
the p99 at 80 % CPU (a load no window saw) is the exact FCFS / PS value.

Measured with the tool (10 days per discipline, seeds as below): FCFS 10/10 and PS 10/10 chosen,
p99 at 0.8 within 6.7 % on every day; round robin (await-sliced event loop, 3-13 slices, fifo and
idle admission) chosen on 4 of 10 days (6 FCFS), p99 at 0.8 within 10 % of a 1e6-request
simulation on 7 of 10 (at most 27 % off).  rr is a candidate on every day that spans loads (it
used to need the best FCFS/PS model's dispersion above 8, which short windows rarely reach: 1 of
10 then; FCFS and PS days stay 10 of 10 with the one-window rule of
``capacity.fit._rr_candidates``); what is left: with ``admission="fifo"`` the
rr approximation of :mod:`capacity.rr` (calibrated on the mean and p90-p99.9) misses the body of
the distribution by 10-26 % below p90 at 40-70 % CPU, so at the true slice count it fits the
counts worse than FCFS with a wider CPU law (G / df 12-69 against 4-10) -- a model error, not
noise, that no selection rule in the fit can undo.  The rr test below is a strict xfail until
the rr body is calibrated (then it must be turned into a plain test).
"""
from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

from capacity.fit import from_histograms

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    spec = importlib.util.spec_from_file_location("fit_discipline_recovery",
                                                  ROOT / "tools" / "fit_discipline_recovery.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fit_discipline_recovery", mod)
    spec.loader.exec_module(mod)
    return mod


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
@pytest.mark.xfail(strict=True, reason="issue 15.8: capacity.rr's fifo-admission body is 10-26 % off "
                                       "below p90, so FCFS wins most event-loop days (measured 4 of 10)")
def test_event_loop_days_are_recognised_as_round_robin():
    """Ten event-loop days (3-13 slices, fifo and idle admission, gamma/lognormal CPU of scv
    0.5-2): round robin chosen on at least 9."""
    chosen = [fit.discipline for fit, _ in _recovery("rr", 10)]
    assert chosen.count("rr") >= 9, chosen
