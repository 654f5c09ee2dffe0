"""Threads, CPU load, pool size and hand-off (seed 001, sections 3.4 and 3.6).

References: the article's 100 + 3 x 100 = 400 threads against 100 with NIO (section 3.6);
Little's law worked by hand; M/G/infinity (Poisson number in flight for any holding law) by
Monte Carlo with lognormal holding times; the M/M/2 number in system ``2 rho / (1 - rho^2)``,
whose value 2 falls at the golden ratio, and Erlang C for 3 servers by exact fractions; the
M/M/n FCFS response-time law (Cooper 1981, section 3.4) for the pool size; the hand-off's
closed-form delay law by Monte Carlo, and the article's 2.7 -> 1.6 ms mean and 23.7 -> 1.7 ms
P99.9 (section 3.4) at the fitted setting the docstring names.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _cli import run_cli
from capacity.plan import cpu_load, handoff_cost, pool_size, thread_demand

# ---------------------------------------------------------------------------------- threads


def test_article_400_threads_against_100_with_nio():
    # 100 concurrent requests: 1000 requests/s x 100 ms; A calls B, C, D in parallel.
    r = thread_demand(1000.0, 0.100, calls=3)
    assert r.mean_number == pytest.approx(100.0)
    assert r.threads_blocking == pytest.approx(100 + 3 * 100)
    assert r.threads_nonblocking == pytest.approx(100.0)
    assert "400 threads" in r.explanation


def test_shorter_calls_hold_fewer_threads_by_littles_law():
    r = thread_demand([1000.0, 500.0], 0.100, calls=3, call_time=0.040)
    # lambda (W + k d): 1000 (0.1 + 0.12) = 220, 500 x 0.22 = 110.
    assert r.threads_blocking.tolist() == pytest.approx([220.0, 110.0])
    assert r.threads_nonblocking.tolist() == pytest.approx([100.0, 50.0])


def test_pool_is_the_quantile_of_a_poisson_number_in_flight():
    # M/G/infinity: lognormal holding times (scv 4), 200/s x 50 ms -> Poisson(10) in flight.
    lam, w, reps, horizon = 200.0, 0.050, 20_000, 3.0
    r = thread_demand(lam, w, calls=2, q=0.99)
    rng = np.random.default_rng(7)
    sigma2 = math.log(1 + 4.0)
    n = rng.poisson(lam * horizon, reps)
    arrivals = rng.uniform(0, horizon, n.sum())
    hold = rng.lognormal(math.log(w) - sigma2 / 2, math.sqrt(sigma2), n.sum())
    rep = np.repeat(np.arange(reps), n)
    in_flight = np.bincount(rep[arrivals + hold > horizon], minlength=reps)
    share_ok = np.mean(in_flight <= r.pool_nonblocking)
    share_short = np.mean(in_flight <= r.pool_nonblocking - 1)
    se = math.sqrt(0.01 * 0.99 / reps)
    assert share_ok >= 0.99 - 4 * se and share_short < 0.99 + 4 * se
    assert in_flight.mean() == pytest.approx(r.mean_number, abs=4 * math.sqrt(10 / reps))
    assert r.pool_blocking == 3 * r.pool_nonblocking


@settings(max_examples=40, deadline=None)
@given(lam=st.floats(0.1, 1e4), w=st.floats(1e-4, 10.0), calls=st.integers(0, 20), frac=st.floats(0.0, 1.0))
def test_threads_at_least_requests_and_rising_with_calls(lam, w, calls, frac):
    r = thread_demand(lam, w, calls=calls, call_time=frac * w)
    more = thread_demand(lam, w, calls=calls + 1, call_time=frac * w)
    assert r.threads_blocking >= r.threads_nonblocking == pytest.approx(r.mean_number)
    assert more.threads_blocking >= r.threads_blocking
    assert r.pool_blocking >= r.pool_nonblocking


# ---------------------------------------------------------------------------------- CPU load


def test_load_on_two_cores_by_hand():
    rho = np.array([0.1, 0.5, 0.9])
    r = cpu_load(rho, servers=2)
    assert r.load.tolist() == pytest.approx((2 * rho / (1 - rho ** 2)).tolist(), rel=1e-12)
    assert r.running.tolist() == pytest.approx((2 * rho).tolist())
    # 2 rho / (1 - rho^2) = 2  <=>  rho^2 + rho - 1 = 0: the golden ratio.
    assert r.full_load_utilization[0] == pytest.approx((math.sqrt(5) - 1) / 2, rel=1e-8)
    assert cpu_load(0.3).full_load_utilization == pytest.approx(0.5, rel=1e-8)  # rho / (1 - rho) = 1


def test_load_on_three_cores_against_erlang_c_in_fractions():
    rho, c = Fraction(4, 5), 3
    a = c * rho
    head = sum(a ** k / math.factorial(k) for k in range(c))
    tail = a ** c / math.factorial(c) / (1 - rho)
    erlang_c = tail / (head + tail)
    load = a + erlang_c * rho / (1 - rho)
    assert cpu_load(0.8, servers=3).load == pytest.approx(float(load), rel=1e-12)


def test_measured_load_above_the_model_is_called_excess():
    r = cpu_load(0.45, servers=2, load=2.2)
    assert r.excess_load == pytest.approx(2.2 - 0.9 / (1 - 0.45 ** 2))
    assert "bunches" in r.explanation
    assert "agrees" in cpu_load(0.45, servers=2, load=1.15).explanation


# ---------------------------------------------------------------------------------- pool size


def _mmn_response_sf(t: float, lam: float, mean: float, n: int) -> float:
    """P(T > t) of M/M/n FCFS (Cooper 1981, section 3.4), Erlang C by its sum."""
    mu, a = 1 / mean, lam * mean
    head = sum(a ** k / math.factorial(k) for k in range(n))
    tail = a ** n / math.factorial(n) * n / (n - a)
    c = tail / (head + tail)
    gap = n * mu - lam - mu
    if abs(gap) < 1e-9 * mu:   # the limit gap -> 0 of the term below
        return math.exp(-mu * t) * (1 + c * mu * t)
    return math.exp(-mu * t) + c * mu / gap * (math.exp(-mu * t) - math.exp(-(n * mu - lam) * t))


def test_pool_size_is_erlang_c_staffing():
    r = pool_size(200.0, 0.050, {0.99: 0.300})
    n = r.servers
    assert _mmn_response_sf(0.3, 200.0, 0.05, n) <= 0.01 < _mmn_response_sf(0.3, 200.0, 0.05, n - 1)
    assert "threads" in r.explanation


def test_pool_size_checks_the_cores():
    ok = pool_size(200.0, 0.050, {0.99: 0.3}, service=0.006, cores=2, switch_cost=5e-6)
    assert "60.1 % busy" in ok.explanation       # 200 x (6 ms + 2 x 5 us) / 2
    with pytest.raises(ValueError, match="cores=1 cannot keep up"):
        pool_size(200.0, 0.050, {0.99: 0.3}, service=0.006, cores=1)
    with pytest.raises(ValueError, match="holding"):
        pool_size(200.0, 0.050, {0.99: 0.1})


# ---------------------------------------------------------------------------------- hand-off


def _waits(rng, wake, theta, n):
    return np.where(rng.random(n) < wake, rng.exponential(1 / theta, n), 0.0)


def test_handoff_delay_law_by_monte_carlo():
    c, rho, b, k, x = 2, 0.45, 0.004, 3, 0.002
    r = handoff_cost(x, c, rho, b, switch_cost=0.0, parallel=k, q=0.999)
    wake = 2 * rho ** 2 / (1 + rho)                       # Erlang C for 2 servers
    assert r.wake_probability == pytest.approx(wake, rel=1e-12)
    theta = c * (1 - rho) / b
    rng = np.random.default_rng(11)
    n = 2_000_000
    delay = np.max([_waits(rng, wake, theta, n) for _ in range(k)], axis=0) + _waits(rng, wake, theta, n)
    pool = r.table.loc["pool"]
    assert pool["mean_s"] - x == pytest.approx(delay.mean(), abs=4 * delay.std() / math.sqrt(n))
    # The sample quantile's standard error: sqrt(q (1 - q) / n) / density there (density ~ theta P(>y)).
    y = pool["p99.9_s"] - x
    assert np.mean(delay > y) == pytest.approx(1e-3, abs=4 * math.sqrt(1e-3 / n))


def test_handoff_against_the_article():
    """Fitted, not predicted: 31 % utilisation and 5 ms bursts on 2 cores (the docstring says so).
    What is checked is that they give both the mean and the tail twenty times larger."""
    r = handoff_cost(0.0016, servers=2, utilization=0.31, burst=0.005)
    t = r.table
    assert t.loc["pool", "mean_s"] == pytest.approx(0.0027, abs=0.05e-3)
    assert t.loc["pool", "p99.9_s"] == pytest.approx(0.0237, abs=0.5e-3)
    assert t.loc["synchronous", "p99.9_s"] == pytest.approx(0.0017, abs=0.1e-3)
    assert r.break_even == math.inf and not r.pays and "calling thread" in r.explanation


def test_handoff_break_even_by_hand():
    # k = 2, no switch cost: E[max(W1, W2)] + E[Wc] = (2C - C^2 / 2) / theta + C / theta.
    c, rho, b = 2, 0.31, 0.005
    wake = 2 * rho ** 2 / (1 + rho)
    theta = c * (1 - rho) / b
    r = handoff_cost(0.004, c, rho, b, switch_cost=0.0, parallel=2)
    assert r.break_even == pytest.approx((2 * wake - wake ** 2 / 2) / theta + wake / theta, rel=1e-10)
    idle = handoff_cost(0.004, c, 0.0, b, switch_cost=5e-6, parallel=2)
    assert idle.added_mean == pytest.approx(2 * 5e-6 - 0.004) and idle.added_quantile == idle.added_mean


@settings(max_examples=30, deadline=None)
@given(x=st.floats(1e-5, 0.05), rho=st.floats(0.0, 0.95), k=st.integers(1, 8))
def test_pool_pays_exactly_above_break_even(x, rho, k):
    r = handoff_cost(x, 2, rho, 0.004, parallel=k)
    if abs(x - r.break_even) > 1e-12:
        assert r.pays == (x > r.break_even)
    if k == 1:   # one task handed off: the caller only waits, the pool never pays
        assert r.break_even == math.inf and r.added_mean > 0


# ---------------------------------------------------------------------------------- CLI


def test_cli_threads_and_handoff():
    import json

    code, out, _ = run_cli("threads", "--qps", "1000", "--response", "100ms", "--calls", "3", "--json")
    data = json.loads(out)
    assert code == 0 and data["threads_blocking"] == pytest.approx(400) and data["threads_nonblocking"] == 100
    assert data["result"]["explanation"] == data["explanation"]
    code, out, _ = run_cli("threads", "--qps", "20", "--response", "50ms", "--cpu-util", "45%", "--servers", "2",
                        "--load", "2.2")
    assert code == 0 and "measured 2.2" in out
    code, out, _ = run_cli("handoff", "--task", "1.6ms", "--servers", "2", "--cpu-util", "31%", "--burst", "5ms")
    assert code == 0 and "23.3 ms" in out and "calling thread" in out


@pytest.mark.parametrize("args, flag", [
    (["threads", "--qps", "10", "--response", "10ms", "--calls", "-1"], "--calls"),
    (["threads", "--qps", "10", "--response", "10ms", "--load", "2"], "--load"),
    (["threads", "--qps", "10", "--response", "10ms", "--calls", "2", "--call-time", "20ms"], "call_time"),
    (["handoff", "--task", "1ms", "--servers", "2", "--cpu-util", "100%", "--burst", "5ms"], "--cpu-util"),
    (["handoff", "--task", "1ms", "--servers", "2", "--cpu-util", "30%", "--burst", "5ms", "--parallel", "40"],
     "parallel"),
])
def test_cli_bad_input_is_one_line(args, flag):
    code, _, err = run_cli(*args)
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0]


# ---------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("call, name", [
    (lambda: thread_demand(-1.0, 0.1), "arrival_rate"),
    (lambda: thread_demand(10.0, 0.1, calls=1.5), "calls"),
    (lambda: thread_demand(10.0, 0.1, calls=2, call_time=0.2), "call_time"),
    (lambda: thread_demand(10.0, 0.1, q=1.0), "q"),
    (lambda: cpu_load(1.0, 2), "utilization"),
    (lambda: cpu_load(0.5, 0), "servers"),
    (lambda: cpu_load(0.5, 2, load=-1.0), "load"),
    (lambda: pool_size(10.0, 0.1, {0.99: 1.0}, switches=-1), "switches"),
    (lambda: pool_size(10.0, 0.1, {0.99: 1.0}, service=0.01), "service and cores"),
    (lambda: pool_size(10.0, 0.1, {0.99: 1.0}, service=0.2, cores=2), "service must be part of holding"),
    (lambda: handoff_cost(0.0, 2, 0.3, 0.005), "task"),
    (lambda: handoff_cost(0.001, 2, 1.0, 0.005), "utilization"),
    (lambda: handoff_cost(0.001, 2, 0.3, 0.0), "burst"),
    (lambda: handoff_cost(0.001, 2, 0.3, 0.005, parallel=0), "parallel"),
    (lambda: handoff_cost(0.001, 2, 0.3, 0.005, switch_cost=-1e-6), "switch_cost"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
