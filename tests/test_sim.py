"""Tests of the discrete-event simulator ``capacity.sim``.

Sources of the expected values:

* hand-worked schedules (each worked out in the test's docstring);
* a plain Python loop of Lindley's recursion (Lindley 1952);
* textbook steady-state formulas, written out here independently of the
  package: M/M/1 mean response 1/(mu - lambda) and its exponential response
  time (Kleinrock vol. 1, ch. 3 and 5), Pollaczek-Khinchine for M/D/1
  (Kleinrock vol. 1, ch. 5), Erlang C from its definition (Kleinrock
  vol. 1, ch. 3, M/M/m), and the insensitivity of processor sharing (the M/G/c-PS
  queue is symmetric, so its number in system is that of M/M/c: Kelly,
  *Reversibility and Stochastic Networks*, 1979, sec. 3.3);
* Little's law and conservation laws that hold on every sample path.

Simulation comparisons use fixed seeds and a 99% batch-means interval, and
also check that the interval is narrow, so that the test can fail.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from capacity import Service
from capacity.sim import SimulationResult, simulate
from capacity.sim._drivers import _run
from capacity.sim._engines import _lindley_waits
from capacity.units import format_time

WARMUP = 1000.0  # seconds discarded at the start of each long run (initial transient)


def erlang_c_reference(c: int, a: float) -> float:
    """P(wait) in M/M/c from the textbook definition (Kleinrock vol. 1, ch. 3, M/M/m):
    C = (a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a))."""
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) * c / (c - a)
    return tail / (head + tail)


def lindley_loop(arrivals: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Lindley (1952): W_0 = 0, W_n = max(0, W_{n-1} + S_{n-1} - (A_n - A_{n-1}))."""
    waits = [0.0]
    a, s = arrivals.tolist(), sizes.tolist()
    for n in range(1, len(a)):
        waits.append(max(0.0, waits[-1] + s[n - 1] - (a[n] - a[n - 1])))
    return np.array(waits)


def run_sizes(arrivals, sizes, discipline, servers=1) -> pd.DataFrame:
    """Simulate given per-request sizes (hand-worked cases need unequal sizes)."""
    return _run(np.asarray(arrivals, float), np.asarray(sizes, float), discipline, servers, None).requests


def assert_in_ci(result: SimulationResult, theory: float, max_rel_half_width: float, **kw) -> None:
    ci = result.confidence_interval(level=0.99, batches=30, warmup=WARMUP, **kw)
    assert ci.low <= theory <= ci.high, (theory, ci)
    # The interval must be tight enough that a wrong model would fall outside it.
    assert ci.half_width < max_rel_half_width * theory, (theory, ci)


# ---------------------------------------------------------------------------- hand-worked cases
def test_fcfs_one_server_by_hand():
    """Deterministic 2 s requests at 0, 1, 1.5, 5, 9 s on one core.
    Starts: 0, 2 (waits for the first), 4, 6, 9 (idle from 8 to 9); completions +2."""
    r = simulate([0.0, 1.0, 1.5, 5.0, 9.0], Service.empirical([2.0])).requests
    np.testing.assert_array_equal(r["start"], [0.0, 2.0, 4.0, 6.0, 9.0])
    np.testing.assert_array_equal(r["completion"], [2.0, 4.0, 6.0, 8.0, 11.0])
    np.testing.assert_array_equal(r["response"], [2.0, 3.0, 4.5, 3.0, 2.0])
    np.testing.assert_array_equal(r["service"], [2.0] * 5)


def test_fcfs_unequal_sizes_by_hand():
    """Sizes 3, 1, 2, 0.5 arriving at 0, 1, 2, 7 s on one core: starts 0, 3, 4, 7
    (idle 6-7); on two cores: starts 0, 1, 2 (core 2 free at 2), 7."""
    arr, sizes = [0.0, 1.0, 2.0, 7.0], [3.0, 1.0, 2.0, 0.5]
    one = run_sizes(arr, sizes, "fcfs", 1)
    np.testing.assert_array_equal(one["start"], [0.0, 3.0, 4.0, 7.0])
    np.testing.assert_array_equal(one["completion"], [3.0, 4.0, 6.0, 7.5])
    two = run_sizes(arr, sizes, "fcfs", 2)
    np.testing.assert_array_equal(two["start"], [0.0, 1.0, 2.0, 7.0])
    np.testing.assert_array_equal(two["completion"], [3.0, 2.0, 4.0, 7.5])


def test_ps_two_jobs_by_hand():
    """One core.  A (size 3) at 0 runs alone until 1 (2 s left); B (size 1) arrives
    at 1 and both run at rate 1/2: B has its 1 s at t = 3, A then has 1 s left
    and runs alone until t = 4."""
    r = run_sizes([0.0, 1.0], [3.0, 1.0], "ps")
    np.testing.assert_allclose(r["completion"], [4.0, 3.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r["response"], [4.0, 2.0], rtol=0, atol=1e-12)
    assert r["start"].isna().all()


def test_ps_two_jobs_equal_remaining_by_hand():
    """One core.  A (size 2) at 0 has 1 s left when B (size 1) arrives at 1;
    sharing at rate 1/2 both finish at t = 3 (the busy period holds 3 s of work)."""
    r = run_sizes([0.0, 1.0], [2.0, 1.0], "ps")
    np.testing.assert_allclose(r["completion"], [3.0, 3.0], rtol=0, atol=1e-12)


def test_ps_two_servers_by_hand():
    """Two cores, each job at rate min(1, 2/n).
    A (3) at 0 and B (1) at 0.5 each get a whole core.  At 1, C (1) arrives:
    A has 2 left, B 0.5, C 1; three jobs share two cores at rate 2/3.
    B finishes after 0.5/(2/3) = 0.75 s, at 1.75; A then has 1.5 left, C 0.5,
    each on its own core: C at 2.25, A at 3.25."""
    r = run_sizes([0.0, 0.5, 1.0], [3.0, 1.0, 1.0], "ps", servers=2)
    np.testing.assert_allclose(r["completion"], [3.25, 1.75, 2.25], rtol=0, atol=1e-12)


def test_ps_job_uses_at_most_one_core():
    """A single 2 s job on 4 cores still takes 2 s (single-threaded request).
    Three 1 s jobs on two cores share at rate 2/3 and all finish at 1.5 s."""
    r = run_sizes([0.0], [2.0], "ps", servers=4)
    assert r["completion"].tolist() == [2.0]
    r = run_sizes([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], "ps", servers=2)
    np.testing.assert_allclose(r["completion"], [1.5, 1.5, 1.5], rtol=0, atol=1e-12)


def test_thirty_simultaneous_requests():
    """30 requests of 1 s arriving at t = 0 on one core: PS serves all at rate
    1/30, so all leave together at 30 s; FCFS finishes them at 1, 2, ..., 30 s.
    On 4 cores PS runs them at rate 4/30 and all finish at 7.5 s."""
    one_second = Service.deterministic(1.0)
    ps = simulate(np.zeros(30), one_second, discipline="ps").requests
    assert ps["completion"].tolist() == [30.0] * 30
    fcfs = simulate(np.zeros(30), one_second, discipline="fcfs").requests
    assert fcfs["completion"].tolist() == [float(k) for k in range(1, 31)]
    assert fcfs["start"].tolist() == [float(k) for k in range(30)]
    ps4 = simulate(np.zeros(30), one_second, discipline="ps", servers=4).requests
    np.testing.assert_allclose(ps4["completion"], 7.5, rtol=1e-15)
    fcfs4 = simulate(np.zeros(30), one_second, servers=4).requests
    assert fcfs4["completion"].tolist() == [float(k // 4 + 1) for k in range(30)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=12))
def test_ps_simultaneous_arrivals_hand_formula(sizes):
    """Jobs all arriving at 0 on one PS core, sizes sorted x_(1) <= ... <= x_(n):
    job k leaves at x_(1) + ... + x_(k-1) + (n - k + 1) x_(k) (each of the n - k + 1
    jobs still present receives x_(k) - x_(k-1) more service in that phase)."""
    x = np.array(sizes)
    done = run_sizes(np.zeros(x.size), x, "ps")["completion"].to_numpy()
    xs = np.sort(x)
    n = xs.size
    expected = np.cumsum(xs) - xs + (n - np.arange(n)) * xs
    np.testing.assert_allclose(np.sort(done), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(0.0, 3.0)), min_size=1, max_size=40),
       st.integers(1, 4))
def test_ps_and_fcfs_share_busy_periods(pairs, servers):
    """On one core every work-conserving discipline has the same busy periods,
    so PS and FCFS end the last busy period at the same instant; with at
    least as many cores as jobs, PS never shares and response = size."""
    gaps, sizes = np.array(pairs).T
    arr = np.cumsum(gaps)
    ps = run_sizes(arr, sizes, "ps")
    fcfs = run_sizes(arr, sizes, "fcfs")
    assert ps["completion"].max() == pytest.approx(fcfs["completion"].max(), rel=1e-12, abs=1e-12)
    assert np.all(ps["response"] >= sizes - 1e-9)
    alone = run_sizes(arr, sizes, "ps", servers=arr.size)
    np.testing.assert_allclose(alone["response"], sizes, rtol=1e-12, atol=1e-12)
    # The heap engine (c servers) and Lindley (one server) agree when c = 1.
    many = _run(arr, sizes, "fcfs", servers, None).requests
    if servers == 1:
        np.testing.assert_allclose(many["start"], fcfs["start"], rtol=1e-12, atol=1e-12)
    assert np.all(many["start"].diff().fillna(0) >= 0)  # FCFS starts in arrival order


# ---------------------------------------------------------------------------- Lindley vectorised
def test_vectorised_lindley_matches_loop():
    """10^5 random requests at rho = 0.9 (and a 10^5-request heavy run at rho = 0.99):
    the blocked running-minimum form equals the plain loop to 1e-9 s."""
    rng = np.random.default_rng(11)
    n = 100_000
    for rho in (0.9, 0.99):
        arr = np.cumsum(rng.exponential(1.0 / rho, n))
        sizes = rng.lognormal(-0.5, 1.0, n)  # mean 1 s, heavy-ish tail
        ref = lindley_loop(arr, sizes)
        np.testing.assert_allclose(_lindley_waits(arr, sizes), ref, rtol=0, atol=1e-9)
        # Odd block lengths exercise the padding and the carry between blocks.
        np.testing.assert_allclose(_lindley_waits(arr, sizes, block=7), ref, rtol=0, atol=1e-9)
        start = simulate(arr, Service.empirical([1.0])).requests["start"].to_numpy()
        assert np.all(start >= arr)


def test_fcfs_heap_matches_lindley_on_one_server():
    """The c-server heap engine run with c = 1 reproduces Lindley's waits."""
    rng = np.random.default_rng(12)
    arr = np.sort(rng.uniform(0, 9000, 10_000))
    sizes = rng.exponential(0.8, 10_000)
    from capacity.sim._engines import _fcfs_many
    heap = _fcfs_many(arr, sizes, 1)
    np.testing.assert_allclose(heap.start - arr, lindley_loop(arr, sizes), rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------- steady state vs formulas
@pytest.mark.slow
@pytest.mark.parametrize("rho, seed", [(0.5, 101), (0.8, 102)])
def test_mm1_fcfs_mean_response(rho, seed):
    """M/M/1 FCFS, mean service 1 s: E[T] = 1/(mu - lambda) (Kleinrock vol. 1, ch. 3, M/M/1)."""
    run = simulate(rho, 1.0, horizon=1e6 / rho, seed=seed)
    assert_in_ci(run, 1.0 / (1.0 - rho), 0.04)


@pytest.mark.slow
@pytest.mark.parametrize("rho, seed", [(0.5, 103), (0.8, 104)])
def test_mm1_ps_mean_response(rho, seed):
    """M/M/1 PS: E[T] = 1/(mu - lambda), the same as FCFS (Kleinrock vol. 2, ch. 4,
    processor sharing)."""
    run = simulate(rho, 1.0, discipline="ps", horizon=2e5 / rho, seed=seed)
    assert_in_ci(run, 1.0 / (1.0 - rho), 0.07)


@pytest.mark.slow
def test_mm1_fcfs_response_quantile():
    """M/M/1 FCFS response time is exponential with rate mu - lambda (Kleinrock vol. 1,
    ch. 3, M/M/1 sojourn time), so its 0.9-quantile is ln(10)/(mu - lambda)."""
    rho = 0.7
    run = simulate(rho, 1.0, horizon=1e6 / rho, seed=105)
    theory = math.log(10.0) / (1.0 - rho)
    assert_in_ci(run, theory, 0.04, stat=0.9)
    assert run.response_quantile(0.9, warmup=WARMUP) == pytest.approx(theory, rel=0.03)
    assert run.mean_response(warmup=WARMUP) == pytest.approx(1.0 / (1.0 - rho), rel=0.03)


@pytest.mark.slow
def test_md1_fcfs_mean_wait_pollaczek_khinchine():
    """M/D/1, D = 1 s, rho = 0.7: E[W] = rho D / (2 (1 - rho)) (Pollaczek-Khinchine)."""
    rho = 0.7
    run = simulate(rho, Service.deterministic(1.0), horizon=5e5 / rho, seed=106)
    assert_in_ci(run, rho / (2 * (1 - rho)), 0.04, metric="wait")


@pytest.mark.slow
def test_md1_ps_insensitive():
    """M/D/1 PS: E[T] = E[S]/(1 - rho) whatever the size distribution (PS insensitivity),
    here 1/0.3 s -- FCFS would give 1 + 0.7/0.6 = 2.17 s."""
    rho = 0.7
    run = simulate(rho, Service.deterministic(1.0), discipline="ps", horizon=2e5 / rho, seed=107)
    assert_in_ci(run, 1.0 / (1.0 - rho), 0.04)


@pytest.mark.slow
def test_mmc_fcfs_mean_wait_erlang_c():
    """M/M/4 FCFS at rho = 0.8 (offered load 3.2): E[W] = C(4, 3.2)/(c mu - lambda)."""
    c, load = 4, 3.2
    run = simulate(load, 1.0, servers=c, horizon=1e6 / load, seed=108)
    assert_in_ci(run, erlang_c_reference(c, load) / (c - load), 0.06, metric="wait")
    assert run.utilization() == pytest.approx(0.8, abs=0.005)


@pytest.mark.slow
def test_mmc_ps_mean_response_equals_fcfs():
    """M/M/4 PS (rate min(1, 4/n) each) has the birth-death number-in-system of M/M/4,
    so E[T] equals the FCFS value C(c, a)/(c mu - lambda) + 1/mu; by insensitivity
    (symmetric queue, Kelly 1979 sec. 3.3) so does M/D/4 PS."""
    c, load = 4, 3.2
    theory = erlang_c_reference(c, load) / (c - load) + 1.0
    ps = simulate(load, 1.0, discipline="ps", servers=c, horizon=2e5 / load, seed=109)
    assert_in_ci(ps, theory, 0.05)
    fcfs = simulate(load, 1.0, servers=c, horizon=1e6 / load, seed=110)
    a = ps.confidence_interval(warmup=WARMUP)
    b = fcfs.confidence_interval(warmup=WARMUP)
    assert abs(a.estimate - b.estimate) <= math.hypot(a.half_width, b.half_width)
    det = simulate(load, Service.deterministic(1.0), discipline="ps", servers=c, horizon=2e5 / load,
                   seed=111)
    assert_in_ci(det, theory, 0.05)


# ---------------------------------------------------------------------------- sample-path laws
def number_integral(req: pd.DataFrame, t0: float, t1: float) -> float:
    """integral over [t0, t1] of N(t) dt: each request contributes the part of
    [arrival, completion] inside the window."""
    lo = np.clip(req["arrival"].to_numpy(), t0, t1)
    hi = np.clip(req["completion"].to_numpy(), t0, t1)
    return float(np.sum(hi - lo))


@pytest.mark.parametrize("discipline, servers", [("fcfs", 1), ("ps", 1), ("ps", 3)])
def test_littles_law(discipline, servers):
    """L = lambda W on one long sample path (Little 1961): the time-average number
    in system over the run equals the measured arrival rate times the mean
    response, up to the requests still present at the end (< 1% here)."""
    rate = 0.8 * servers
    run = simulate(rate, 1.0, discipline=discipline, servers=servers, horizon=50_000, seed=112)
    req = run.requests
    horizon = run.horizon
    area = number_integral(req, 0.0, horizon)
    inside = req[req["completion"] <= horizon]
    lam = len(req) / horizon
    assert area / horizon == pytest.approx(lam * req["response"].mean(), rel=0.01)
    # The class's own event sweep gives the same area.
    assert run.mean_number() == pytest.approx(area / horizon, rel=1e-9)
    assert len(inside) > 0.99 * len(req)


def test_conservation_fcfs_many_servers():
    """FCFS, 3 cores, lognormal sizes: every request starts after it arrives, in
    arrival order, completes after start + size, and at most 3 are in service
    at any instant (and 3 at some instant, so the check is not vacuous)."""
    run = simulate(2.7, Service.lognormal(1.0, scv=3.0), servers=3, horizon=20_000, seed=113)
    req = run.requests
    assert np.all(req["start"] >= req["arrival"])
    assert np.all(np.diff(req["start"]) >= 0)
    np.testing.assert_allclose(req["completion"], req["start"] + req["service"], rtol=1e-15)
    np.testing.assert_allclose(req["response"], req["completion"] - req["arrival"], rtol=1e-12, atol=1e-9)
    assert np.all(req["response"] >= req["service"] - 1e-9)
    # Sweep over service intervals; at equal times a completion frees its core first.
    times = np.concatenate([req["start"], req["completion"]])
    steps = np.concatenate([np.ones(len(req)), -np.ones(len(req))])
    order = np.lexsort((steps, times))
    in_service = np.cumsum(steps[order])
    assert in_service.max() == 3
    assert in_service.min() >= 0


@pytest.mark.parametrize("discipline", ["fcfs", "ps"])
def test_work_conservation_one_server(discipline):
    """One core, run to empty: the time with at least one request present equals
    the total CPU time, and PS responses are never shorter than the size."""
    rng = np.random.default_rng(114)
    arr = np.sort(rng.uniform(0, 5000, 4000))
    run = simulate(arr, Service.hyperexponential(1.0, scv=5.0), discipline=discipline, seed=115)
    req = run.requests
    assert run.horizon == req["completion"].max()
    busy = run.utilization() * run.horizon
    assert busy == pytest.approx(req["service"].sum(), rel=1e-9)
    assert np.all(req["completion"] > req["arrival"])
    assert np.all(req["response"] >= req["service"] * (1 - 1e-9))


def test_utilization_measured():
    """M/M/2 at rho = 0.6 over 10^5 s: busy fraction within 0.01 of 0.6
    (the sd of the total work / (c T) is about 0.002 here)."""
    run = simulate(1.2, 1.0, servers=2, horizon=100_000, seed=116)
    assert run.utilization() == pytest.approx(0.6, abs=0.01)


# ---------------------------------------------------------------------------- inputs, reproducibility
def test_poisson_arrivals():
    """A rate gives Poisson arrivals: count ~ Poisson(lambda T), exponential gaps (KS test)."""
    run = simulate(5.0, 0.1, horizon=2000, seed=117)
    arr = run.requests["arrival"].to_numpy()
    assert abs(arr.size - 10_000) < 4 * math.sqrt(10_000)
    assert arr.min() >= 0 and arr.max() <= 2000 and np.all(np.diff(arr) >= 0)
    assert stats.kstest(np.diff(arr), "expon", args=(0, 1 / 5.0)).pvalue > 1e-3
    assert run.horizon == 2000.0
    assert simulate(0.0, 1.0, horizon=10).requests.empty


def test_reproducible_with_seed():
    a = simulate(0.9, Service.gamma(1.0, 2.0), discipline="ps", horizon=500, seed=7).requests
    b = simulate(0.9, Service.gamma(1.0, 2.0), discipline="ps", horizon=500, seed=7).requests
    pd.testing.assert_frame_equal(a, b)
    c = simulate(0.9, Service.gamma(1.0, 2.0), discipline="ps", horizon=500,
                 seed=np.random.default_rng(7)).requests
    pd.testing.assert_frame_equal(a, c)
    d = simulate(0.9, Service.gamma(1.0, 2.0), discipline="ps", horizon=500, seed=8).requests
    assert not a["arrival"].equals(d["arrival"])


def test_result_object():
    run = simulate([0.0, 1.0], 1.0, seed=3)
    assert isinstance(run, SimulationResult)
    # The foundation's five columns come first, in their original order; the
    # overload columns (issue 3) follow.
    assert list(run.requests.columns) == ["arrival", "start", "completion", "response", "service",
                                          "outcome", "attempt", "request_id", "process", "machine",
                                          "departure", "cpu", "deadline"]
    assert (run.requests["outcome"] == "ok").all()
    assert run.discipline == "fcfs" and run.servers == 1
    q = run.response_quantile([0.1, 0.9])
    assert q.shape == (2,) and q[0] <= q[1]
    assert math.isnan(run.mean_response(warmup=5.0))


# ---------------------------------------------------------------------------- the result protocol
def test_repr_is_one_short_line():
    """repr names the configuration and the size of the table, never its rows."""
    run = simulate(0.9, 1.0, horizon=5000, seed=3)
    n = len(run.requests)
    assert n > 4000
    assert repr(run) == (f"SimulationResult(discipline='fcfs', servers=1, processes=1, machines=1, "
                         f"timeout=None, horizon=5000, requests=<table {n} rows>)")


def test_str_explains_the_run_in_words():
    run = simulate(1.5, 1.0, horizon=600, seed=1, timeout=10, on_timeout="drop", retries=1)
    text = str(run)
    counts = run.requests["outcome"].value_counts()
    retries = int((run.requests["attempt"] > 0).sum())
    assert counts["ok"] > 0 and counts["dropped"] > 0 and retries > 0  # the words below are all exercised
    assert f"Simulated {len(run.requests):,} requests (of which {retries:,} retries)" in text
    assert f"{counts['ok']:,} ok" in text and f"{counts['dropped']:,} dropped" in text
    assert f"Mean response {format_time(run.mean_response())}" in text
    assert f"p99 {format_time(run.response_quantile(0.99))}" in text
    assert f"{100 * run.utilization():.1f} % busy" in text
    assert "horizon of 600 s" in text and "client timeout 10 s" in text and "FCFS" in text
    assert "\n" not in text
    rr = str(simulate([0.0, 0.5], Service.deterministic(2.0), discipline="rr", slices=2, admission="idle"))
    assert "round robin over 2 slices, idle admission" in rr and "2 ok" in rr
    assert "No request completed" in str(simulate(0.0, 1.0, horizon=10))


def test_to_frame_is_a_copy_of_the_requests():
    run = simulate([0.0, 1.0, 1.5], 1.0, seed=2)
    frame = run.to_frame()
    pd.testing.assert_frame_equal(frame, run.requests)
    frame.loc[0, "arrival"] = 99.0
    assert run.requests.loc[0, "arrival"] == 0.0


def test_to_dict_is_configuration_and_summary_without_rows():
    run = simulate(1.2, 1.0, servers=2, horizon=5000, seed=4, timeout=3.0)
    d = run.to_dict()
    text = json.dumps(d)  # plain JSON-ready Python
    assert len(run.requests) > 5000 and len(text) < 1000  # no per-request rows
    assert (d["discipline"], d["servers"], d["processes"], d["machines"]) == ("fcfs", 2, 1, 1)
    assert (d["horizon"], d["timeout"], d["end"], d["stopped"]) == (5000.0, 3.0, run.end, False)
    assert d["n_requests"] == len(run.requests) and d["n_retries"] == 0
    assert d["outcomes"] == run.requests["outcome"].value_counts().to_dict()
    assert sum(d["outcomes"].values()) == d["n_requests"]
    assert d["mean_response"] == run.mean_response()
    assert d["response_quantile"]["0.99"] == run.response_quantile(0.99)
    assert d["utilization"] == run.utilization() and d["mean_number"] == run.mean_number()
    series = pd.Series([1.0] * 5, index=pd.date_range("2024-01-01", periods=5, freq="s"))
    timed = simulate(series, 0.1, discipline="rr", slices=2, slice_delay=Service.exponential(0.01), seed=1)
    d = json.loads(json.dumps(timed.to_dict()))
    assert d["origin"] == "2024-01-01T00:00:00"
    assert d["slice_delay"]["family"] == "exponential" and d["slice_delay"]["mean_s"] == pytest.approx(0.01)
    assert simulate(0.0, 1.0, horizon=10).to_dict()["mean_response"] is None  # NaN -> null


def test_confidence_interval_is_a_named_tuple_with_the_protocol():
    ci = simulate(0.5, 1.0, horizon=20_000, seed=1).confidence_interval()
    assert ci._fields == ("estimate", "half_width", "low", "high", "level", "batches")
    assert str(ci) == f"{format_time(ci.estimate)} +/- {format_time(ci.half_width)} (99 % confidence, " \
                      f"batch means over 30 batches)"
    assert json.loads(json.dumps(ci.to_dict())) == ci._asdict()
    assert ci.to_frame().to_dict("records") == [ci._asdict()]


@pytest.mark.parametrize("kwargs, name", [
    (dict(arrivals=-1.0, horizon=10), "arrivals"),
    (dict(arrivals=float("nan"), horizon=10), "arrivals"),
    (dict(arrivals=float("inf"), horizon=10), "arrivals"),
    (dict(arrivals=[0.0, float("nan")]), "arrivals"),
    (dict(arrivals=[0.0, -1.0]), "arrivals"),
    (dict(arrivals=[0.0, 2.0, 1.0]), "arrivals"),
    (dict(arrivals=[[0.0, 1.0]]), "arrivals"),
    (dict(arrivals=1.0), "horizon"),
    (dict(arrivals=1.0, horizon=-5), "horizon"),
    (dict(arrivals=[0.0, 5.0], horizon=2.0), "horizon"),
    (dict(arrivals=[0.0], discipline="lifo"), "discipline"),
    (dict(arrivals=[0.0], servers=0), "servers"),
    (dict(arrivals=[0.0], servers=1.5), "servers"),
    (dict(arrivals=[0.0], servers=[1, 2]), "servers"),
    (dict(arrivals=[0.0], service=-1.0), "service"),
    (dict(arrivals=[0.0], service=Service.exponential([1.0, 2.0])), "service"),
])
def test_bad_input(kwargs, name):
    kwargs = {"service": 1.0, **kwargs}
    with pytest.raises(ValueError, match=name):
        simulate(**kwargs)


def test_duration_is_now_horizon():
    """The run length was ``duration`` (the glossary keeps that word for a request's measured
    time): the old keyword and attribute still work for one release, warning with the new name."""
    new = simulate(2.0, 0.25, horizon=300, seed=9)
    with pytest.warns(DeprecationWarning, match="'duration' is now 'horizon'"):
        old = simulate(2.0, 0.25, duration=300, seed=9)
    pd.testing.assert_frame_equal(old.requests, new.requests, check_exact=True)
    assert new.horizon == 300.0
    with pytest.warns(DeprecationWarning, match=r"SimulationResult.duration is now .horizon"):
        assert old.duration == 300.0
    with pytest.raises(TypeError, match="both"):
        simulate(2.0, 0.25, horizon=300, duration=300)


def test_unknown_discipline_lists_choices():
    with pytest.raises(ValueError, match=r"discipline.*'fcfs'.*'ps'.*'lifo'"):
        simulate([0.0], 1.0, discipline="lifo")


def test_confidence_interval_bad_input():
    run = simulate(0.5, 1.0, horizon=1000, seed=4)
    with pytest.raises(ValueError, match="stat"):
        run.confidence_interval(stat="median")
    with pytest.raises(ValueError, match="stat"):
        run.confidence_interval(stat=1.5)
    with pytest.raises(ValueError, match="level"):
        run.confidence_interval(level=1.0)
    with pytest.raises(ValueError, match="batches"):
        run.confidence_interval(batches=1)
    with pytest.raises(ValueError, match="batches"):
        run.confidence_interval(batches=10_000)
    with pytest.raises(ValueError, match="warmup"):
        run.confidence_interval(warmup=-1.0)
    with pytest.raises(ValueError, match="metric"):
        run.confidence_interval(metric="queue")
    ps = simulate(0.5, 1.0, discipline="ps", horizon=1000, seed=4)
    with pytest.raises(ValueError, match="wait"):
        ps.confidence_interval(metric="wait")
