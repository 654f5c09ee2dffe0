"""Tests of the event loop's admission rule: ``simulate(discipline="rr", admission=...)``.

``admission="fifo"`` puts an arriving request at the back of the run queue at
once; ``admission="idle"`` keeps it waiting until a free core finds the run
queue empty (requests in flight go first), then admits every waiting request
in arrival order.  Sources of the expected values:

* hand-worked schedules (worked out in each test's docstring);
* the FCFS engine (with one slice there is nothing in flight to favour, so
  both rules are FCFS);
* a schedule traced on the real Koa server of ``validation/`` under Node.js
  20 (libuv 1.46), quoted in the test.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capacity import Service
from capacity.sim import ADMISSIONS, simulate
from capacity.sim._drivers import _run
from capacity.sim._options import _Options

from _sample_path import number_in_system_area


def sizes_run(arrivals, sizes, **kw):
    opts = _Options(discipline="rr", **kw)
    return _run(np.asarray(arrivals, float), np.asarray(sizes, float), "rr", opts.servers, None, opts)


@pytest.mark.parametrize("engine", [None, "objects", "global"])
def test_in_flight_first_by_hand(engine):
    """A (t=0), B (0.5), C (1.5), 2 s each in two 1-s slices, one core, no delay.

    idle: 0-1 A1; B waits (A is in flight and runnable); 1-2 A2 (A done at 2;
    C arrives at 1.5 and waits too); at 2 the run queue is empty: B and C are
    admitted together, 2-3 B1, 3-4 C1, 4-5 B2 (done 5), 5-6 C2 (done 6).
    fifo (for contrast): 0-1 A1, 1-2 B1, 2-3 A2 (done 3), 3-4 C1, 4-5 B2 (5),
    5-6 C2 (6)."""
    idle = sizes_run([0.0, 0.5, 1.5], [2.0] * 3, slices=2, admission="idle", engine=engine).requests
    assert idle["start"].tolist() == [0.0, 2.0, 3.0]
    assert idle["completion"].tolist() == [2.0, 5.0, 6.0]
    fifo = sizes_run([0.0, 0.5, 1.5], [2.0] * 3, slices=2, engine=engine).requests
    assert fifo["completion"].tolist() == [3.0, 5.0, 6.0]


@pytest.mark.parametrize("engine", [None, "objects", "global"])
def test_delay_opens_the_door_by_hand(engine):
    """Same arrivals, slice_delay 0.5 s.  0-1 A1, A sleeps to 1.5; at 1 the run
    queue is empty (A asleep): B is admitted, 1-2 B1, B sleeps to 2.5.  At 1.5
    A wakes (wake-ups before arrivals) and C arrives and waits.  2-3 A2 (done
    3); B woke at 2.5: 3-4 B2 (done 4); at 4 the queue is empty: C admitted,
    4-5 C1, sleeps to 5.5, 5.5-6.5 C2 (done 6.5); the core idles 5-5.5."""
    run = sizes_run([0.0, 0.5, 1.5], [2.0] * 3, slices=2, slice_delay=0.5, admission="idle", engine=engine)
    req = run.requests
    assert req["start"].tolist() == [0.0, 1.0, 4.0]
    assert req["completion"].tolist() == [3.0, 4.0, 6.5]
    assert run.utilization() == pytest.approx(6.0 / 6.5, rel=1e-12)


def test_node20_trace():
    """Measured on the validation server (Node.js 20.20.2, libuv 1.46, one process):
    ``/sliced?k=5&ms=2.2&yield=timeout`` requests sent at 0, 0.5, 6, 8 and 12 ms.
    The first two alternated slice by slice; the other three were not read
    until the second finished (its last slice ended at 25.2 ms after the
    first slice began, the third request's first slice began 0.4 ms later),
    then the three alternated.  The model with the measured ~1.1 ms timer
    gap gives the same order: requests 2-4 start only after 0 and 1 are
    done (fifo would start request 2 at once, at 8.8 ms)."""
    sent = np.array([0.0, 0.5, 6.0, 8.0, 12.0]) * 1e-3
    req = simulate(sent, Service.deterministic(0.011), discipline="rr", slices=5, slice_delay=0.0011,
                   admission="idle").requests
    first_two_done = req["completion"].iloc[:2].max()
    assert (req["start"].iloc[2:] >= first_two_done).all()
    assert req["start"].iloc[2] == pytest.approx(first_two_done)
    # the later three, admitted together, finish in arrival order within one slice of each other
    late = req["completion"].iloc[2:].to_numpy()
    assert np.all(np.diff(late) > 0) and late[-1] - late[0] < 2 * 0.0022 + 1e-12
    fifo = simulate(sent, Service.deterministic(0.011), discipline="rr", slices=5, slice_delay=0.0011).requests
    assert fifo["start"].iloc[2] < first_two_done


def test_drop_at_timeout_under_idle_admission():
    """The first hand-worked case with a 3 s timeout and on_timeout='drop'
    (deadlines 3, 3.5, 4.5): A runs 0-2 (ok).  B and C are admitted at 2;
    2-3 B1, 3-4 C1; B, queued behind C, is dropped at its deadline 3.5 with
    1 s of CPU; 4-4.5 C2 is cut at C's deadline with 1.5 s of CPU."""
    req = simulate([0.0, 0.5, 1.5], Service.deterministic(2.0), discipline="rr", slices=2, timeout=3.0,
                   on_timeout="drop", admission="idle").requests
    assert req["outcome"].tolist() == ["ok", "dropped", "dropped"]
    assert req["departure"].tolist() == [2.0, 3.5, 4.5]
    assert req["cpu"].tolist() == [2.0, 1.0, pytest.approx(1.5)]


@pytest.mark.parametrize("servers", [1, 2])
def test_one_slice_both_rules_are_fcfs(servers):
    kw = dict(servers=servers, horizon=2000.0, seed=21)
    a = simulate(0.8 * servers, Service.gamma(1.0, 2.0), discipline="rr", admission="idle", **kw)
    b = simulate(0.8 * servers, Service.gamma(1.0, 2.0), **kw)
    np.testing.assert_allclose(a.requests["completion"], b.requests["completion"], rtol=1e-12)


def test_engines_agree_idle():
    """The fast engine, the per-process objects and the global loop give the same
    schedule under idle admission (slices, delays, several cores)."""
    rng = np.random.default_rng(9)
    n = 3000
    arr = np.sort(rng.uniform(0, n / 1.5, n))
    sz = rng.exponential(1.0, n)
    for kw in (dict(slices=3), dict(slices=4, slice_delay=0.3, servers=2), dict(slices=5, slice_delay=0.05)):
        base = sizes_run(arr, sz, admission="idle", **kw).requests
        for engine in ("objects", "global"):
            other = sizes_run(arr, sz, engine=engine, admission="idle", **kw).requests
            np.testing.assert_allclose(other["completion"], base["completion"], rtol=1e-12)


def test_idle_admission_is_work_conserving_and_keeps_little():
    """Without delay a free core always finds work when any request is present
    (in the run queue or waiting), so utilisation and the last departure equal
    FCFS's; Little's law holds on the sample path."""
    kw = dict(horizon=5000.0, seed=8)
    a = simulate(0.85, Service.gamma(1.0, 2.0), discipline="rr", slices=7, admission="idle", **kw)
    b = simulate(0.85, Service.gamma(1.0, 2.0), **kw)
    assert a.utilization() == pytest.approx(b.utilization(), rel=1e-9)
    assert a.requests["completion"].max() == pytest.approx(b.requests["completion"].max(), rel=1e-12)
    area, total = number_in_system_area(a.requests)
    assert area == pytest.approx(total, rel=1e-9)


def test_idle_admission_is_between_fcfs_and_fifo_for_timer_slices():
    """Deterministic 11 ms in 5 slices with a 1.1 ms gap (the validation
    handler) at utilisation 0.7: in-flight-first admission keeps requests
    closer to FCFS order, so its mean and p99 lie below the FIFO run queue's
    and above FCFS's (the gaps add ~4.4 ms to every request)."""
    kw = dict(horizon=4000.0, seed=5)
    svc = Service.deterministic(0.011)
    lam = 0.7 / 0.011
    idle = simulate(lam, svc, discipline="rr", slices=5, slice_delay=0.0011, admission="idle", **kw)
    fifo = simulate(lam, svc, discipline="rr", slices=5, slice_delay=0.0011, **kw)
    fcfs = simulate(lam, svc, **kw)
    w = 10.0
    for stat in ("mean", 0.99):
        get = (lambda r: r.mean_response(w)) if stat == "mean" else (lambda r: r.response_quantile(0.99, w))
        assert get(fcfs) + 0.004 < get(idle) < 0.93 * get(fifo), stat


def test_bad_admission():
    with pytest.raises(ValueError, match="admission"):
        simulate([0.0, 1.0], 1.0, discipline="rr", admission="lifo")
    with pytest.raises(ValueError, match="admission"):
        simulate([0.0, 1.0], 1.0, admission="idle")
    assert ADMISSIONS == ("fifo", "idle")


def test_result_records_admission():
    run = simulate([0.0, 1.0], 1.0, discipline="rr", slices=2, admission="idle")
    assert run.admission == "idle"
    assert isinstance(run.requests, pd.DataFrame)
