"""Tests for capacity.closed (exact MVA and asymptotic bounds).

References used below, each independent of the code under test:
- hand-worked MVA recursions (arithmetic written out in the docstrings/comments);
- an explicit continuous-time Markov chain of a small closed network, solved
  with numpy linear algebra;
- the finite-source M/M/1//N (machine-repairman) formula, Kleinrock,
  *Queueing Systems* vol. 1 (1975), sec. 3.8, evaluated with mpmath;
- the exact throughput of a balanced network with Z = 0, Lazowska et al.,
  *Quantitative System Performance* (1984), sec. 5.4: X(N) = N / (D + (N-1) D/K);
- the asymptotic bounds of Lazowska et al., ch. 5.
"""
from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.closed import bounds, mva

# ---------------------------------------------------------------------- hand-worked cases


def test_one_station_no_think_time_by_hand():
    """D = 1, Z = 0 (hand-worked).

    n=1: R = 1*(1+0) = 1,  X = 1/1 = 1, Q = 1
    n=2: R = 1*(1+1) = 2,  X = 2/2 = 1, Q = 2
    n=3: R = 1*(1+2) = 3,  X = 3/3 = 1, Q = 3
    """
    res = mva(1.0, 0.0, 3)
    np.testing.assert_allclose(res.throughput, [1.0, 1.0, 1.0], rtol=1e-15)
    np.testing.assert_allclose(res.response, [1.0, 2.0, 3.0], rtol=1e-15)
    np.testing.assert_allclose(res.mean_number[:, 0], [1.0, 2.0, 3.0], rtol=1e-15)
    np.testing.assert_array_equal(res.users, [1, 2, 3])


def test_one_station_with_think_time_by_hand():
    """D = 1, Z = 1 (hand-worked).

    n=1: R = 1,                 X = 1/(1+1)   = 0.5,    Q = 0.5
    n=2: R = 1*(1+0.5) = 1.5,   X = 2/(1+1.5) = 0.8,    Q = 0.8*1.5 = 1.2
    n=3: R = 1*(1+1.2) = 2.2,   X = 3/(1+2.2) = 0.9375, Q = 0.9375*2.2 = 2.0625
    """
    res = mva(1.0, 1.0, 3)
    np.testing.assert_allclose(res.throughput, [0.5, 0.8, 0.9375], rtol=1e-14)
    np.testing.assert_allclose(res.response, [1.0, 1.5, 2.2], rtol=1e-14)
    np.testing.assert_allclose(res.mean_number[:, 0], [0.5, 1.2, 2.0625], rtol=1e-14)
    np.testing.assert_allclose(res.utilization[:, 0], [0.5, 0.8, 0.9375], rtol=1e-14)


def test_two_stations_by_hand():
    """D = [0.2, 0.1], Z = 1, worked with exact fractions by hand.

    n=1: R1 = 1/5, R2 = 1/10, R = 3/10, X = 1/(13/10) = 10/13
         Q1 = 10/13 * 1/5 = 2/13, Q2 = 10/13 * 1/10 = 1/13
    n=2: R1 = 1/5 (1 + 2/13) = 3/13, R2 = 1/10 (1 + 1/13) = 7/65
         R = 15/65 + 7/65 = 22/65, X = 2 / (87/65) = 130/87
         Q1 = 130/87 * 3/13 = 10/29, Q2 = 130/87 * 7/65 = 14/87
    n=3: R1 = 1/5 (1 + 10/29) = 39/145, R2 = 1/10 (1 + 14/87) = 101/870
         R = 234/870 + 101/870 = 335/870 = 67/174
         X = 3 / (241/174) = 522/241
         Q1 = 522/241 * 39/145 = 20358/34945, Q2 = 522/241 * 101/870 = 303/1205
    """
    res = mva([0.2, 0.1], 1.0, 3)
    np.testing.assert_allclose(res.throughput, [10 / 13, 130 / 87, 522 / 241], rtol=1e-14)
    np.testing.assert_allclose(res.response, [3 / 10, 22 / 65, 67 / 174], rtol=1e-14)
    np.testing.assert_allclose(res.residence_time[2], [39 / 145, 101 / 870], rtol=1e-14)
    np.testing.assert_allclose(res.mean_number,
                               [[2 / 13, 1 / 13], [10 / 29, 14 / 87], [20358 / 34945, 303 / 1205]],
                               rtol=1e-14)
    # Decimal check of the same numbers (hand calculator): X(3) = 2.16598, R(3) = 0.38506.
    assert abs(res.throughput[2] - 2.16598) < 1e-5
    assert abs(res.response[2] - 0.38506) < 1e-5


def test_single_user_response_is_total_demand():
    # With one user nobody ever queues: R(1) = sum_k D_k (Lazowska et al. ch. 5).
    d = [0.013, 0.002, 0.04]
    res = mva(d, 0.3, 1)
    assert res.response[0] == pytest.approx(sum(d), rel=1e-15)
    assert res.throughput[0] == pytest.approx(1 / (sum(d) + 0.3), rel=1e-15)


# ---------------------------------------------------------------------- operational laws


@pytest.mark.parametrize("demands, think_time", [
    ([0.2, 0.1], 1.0),
    (0.01, 0.0),
    ([0.003, 0.02, 0.019, 0.001], 0.25),
])
def test_operational_laws_hold_for_every_population(demands, think_time):
    res = mva(demands, think_time, 60)
    n = res.users
    x = res.throughput
    d = np.atleast_1d(demands)
    # Interactive response-time law (Lazowska et al. ch. 3): R = N/X - Z.
    np.testing.assert_allclose(res.response, n / x - think_time, rtol=1e-12, atol=1e-15)
    # Little's law at each station: Q_k = X R_k.
    np.testing.assert_allclose(res.mean_number, x[:, None] * res.residence_time, rtol=1e-14)
    # Utilization law: U_k = X D_k, never above 1.
    np.testing.assert_allclose(res.utilization, x[:, None] * d[None, :], rtol=1e-14)
    assert np.all(res.utilization <= 1 + 1e-12)
    # Population conservation: users at stations plus users thinking (X Z, Little at the delay) = n.
    np.testing.assert_allclose(res.mean_number.sum(axis=1) + x * think_time, n, rtol=1e-12)
    # Throughput increases with the population and stays within the asymptotic bounds.
    assert np.all(np.diff(x) >= -1e-12 * x[1:])
    b = bounds(demands, think_time, 60)
    assert np.all(x <= b.throughput_upper * (1 + 1e-12))
    assert np.all(x >= b.throughput_lower * (1 - 1e-12))
    assert np.all(res.response >= b.response_lower * (1 - 1e-12))
    assert np.all(res.response <= b.response_upper * (1 + 1e-12))


# ---------------------------------------------------------------------- exact references


def _ctmc_two_stations(s1, s2, p, think_time, users):
    """Stationary throughput and mean queue lengths of a closed network, by brute force.

    Delay station (exponential think time, mean Z) -> station 1 (exponential
    service, mean s1).  After station 1 a request goes to station 2 (mean s2)
    with probability p, and from there back to station 1; otherwise it
    completes and its client starts thinking.  State (n1, n2) with
    n0 = N - n1 - n2 thinking.  Visits per request: V1 = 1/(1-p),
    V2 = p/(1-p), so demands D1 = s1/(1-p), D2 = p s2/(1-p).
    """
    states = [(n1, n2) for n1 in range(users + 1) for n2 in range(users + 1 - n1)]
    index = {s: i for i, s in enumerate(states)}
    gen = np.zeros((len(states), len(states)))
    for (n1, n2), i in index.items():
        n0 = users - n1 - n2
        if n0 > 0:  # a client finishes thinking
            gen[i, index[(n1 + 1, n2)]] += n0 / think_time
        if n1 > 0:  # station 1 finishes a burst
            gen[i, index[(n1 - 1, n2 + 1)]] += p / s1
            gen[i, index[(n1 - 1, n2)]] += (1 - p) / s1
        if n2 > 0:  # station 2 sends the request back to station 1
            gen[i, index[(n1 + 1, n2 - 1)]] += 1 / s2
    np.fill_diagonal(gen, -gen.sum(axis=1))
    # pi Q = 0 with sum(pi) = 1: replace one balance equation by the normalisation.
    a = gen.T.copy()
    a[-1, :] = 1.0
    rhs = np.zeros(len(states))
    rhs[-1] = 1.0
    pi = np.linalg.solve(a, rhs)
    n1 = np.array([s[0] for s in states])
    n2 = np.array([s[1] for s in states])
    completions = (1 - p) / s1 * pi[n1 > 0].sum()
    return completions, np.array([pi @ n1, pi @ n2])


@pytest.mark.parametrize("s1, s2, p, think_time, users", [
    (0.02, 0.05, 0.0, 0.5, 4),     # p = 0: station 2 never visited, MVA gets one station
    (0.02, 0.05, 0.6, 0.5, 4),     # CPU <-> DB loop, the brief's N = 4 case
    (0.3, 0.1, 0.25, 0.2, 7),      # CPU-bound, short think time
])
def test_mva_matches_ctmc(s1, s2, p, think_time, users):
    if p == 0.0:
        # One queueing station only; the CTMC still has the (unused) second station.
        demands = [s1]
    else:
        demands = [s1 / (1 - p), p * s2 / (1 - p)]
    res = mva(demands, think_time, users)
    for n in range(1, users + 1):
        x_ref, q_ref = _ctmc_two_stations(s1, s2, p, think_time, n)
        assert res.throughput[n - 1] == pytest.approx(x_ref, rel=1e-10)
        np.testing.assert_allclose(res.mean_number[n - 1], q_ref[:len(demands)], rtol=1e-10)


def test_matches_machine_repairman_formula():
    """Finite-source M/M/1//N (Kleinrock vol. 1 sec. 3.8), evaluated with mpmath.

    p0 = 1 / sum_{n=0}^{N} N!/(N-n)! (D/Z)^n,  X = (1 - p0) / D.
    """
    d, z, users = 0.01, 0.4, 80
    mpmath.mp.dps = 40
    res = mva(d, z, users)
    for n in (1, 5, 39, 40, 41, 80):
        total = mpmath.fsum(mpmath.factorial(n) / mpmath.factorial(n - j) * (mpmath.mpf(d) / z) ** j
                            for j in range(n + 1))
        x_ref = (1 - 1 / total) / mpmath.mpf(d)
        assert res.throughput[n - 1] == pytest.approx(float(x_ref), rel=1e-12)


def test_balanced_network_exact_throughput():
    # Lazowska et al. sec. 5.4: K stations of equal demand d and Z = 0 give
    # X(N) = N / (d (N + K - 1)) exactly.
    d, k, users = 0.1, 3, 2000
    res = mva([d] * k, 0.0, users)
    n = np.arange(1, users + 1)
    np.testing.assert_allclose(res.throughput, n / (d * (n + k - 1)), rtol=1e-12)


def test_large_population_saturates_cleanly():
    # Far past the knee: X -> 1/D_max, R -> N D_max - Z (Lazowska ch. 5), no overflow/NaN.
    res = mva([0.01, 0.002], 1.0, 20000)
    assert np.all(np.isfinite(res.throughput)) and np.all(np.isfinite(res.mean_number))
    assert res.throughput[-1] == pytest.approx(100.0, rel=1e-9)
    assert res.response[-1] == pytest.approx(20000 * 0.01 - 1.0, rel=1e-6)


@pytest.mark.parametrize("demands, think_time", [
    ([0.01, 0.005], 0.09), ([0.01], 0.0), ([0.02, 0.02, 0.01], 0.0), ([0.001, 0.0005], 100.0),
    ([0.01, 1e-9], 0.0), ([[0.01, 0.002], [0.03, 0.01]], [0.5, 5.0])])
def test_large_population_path_matches_the_recursion(demands, think_time, monkeypatch):
    """Above _RECURSION_MAX_USERS the normalising constant in log space takes over: on the same
    networks it must give what the recursion gives (measured: 1e-13, 6e-11 with Z = 1e5 D_max)."""
    import capacity.closed as closed

    ref = mva(demands, think_time, 3000)
    monkeypatch.setattr(closed, "_RECURSION_MAX_USERS", 10)
    got = mva(demands, think_time, 3000)
    for name in ("throughput", "response", "mean_number", "residence_time", "utilization"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-9, err_msg=name)


def test_balanced_network_exact_throughput_at_a_million_users():
    # The balanced-network identity X(N) = N / (d (N + K - 1)) through the large-population path.
    d, k, users = 0.1, 3, 10**6
    res = mva([d] * k, 0.0, users)
    n = np.arange(1, users + 1)
    np.testing.assert_allclose(res.throughput, n / (d * (n + k - 1)), rtol=1e-9)
    assert res.mean_number[-1].sum() == pytest.approx(users, rel=1e-9)


def test_too_large_a_result_is_refused():
    with pytest.raises(ValueError, match=r"users=100000000 with 2 station\(s\) needs 6.4 GB"):
        mva([0.01, 0.005], 0.09, 10**8)


# ---------------------------------------------------------------------- bounds


def test_bounds_by_hand():
    """D = [0.2, 0.1], Z = 1: D = 0.3, D_max = 0.2 (hand-worked).

    knee N* = (0.3 + 1)/0.2 = 6.5
    X+(1) = min(1/1.3, 5) = 0.769..., X+(10) = min(10/1.3, 5) = 5
    R-(1) = max(0.3, 0.2 - 1) = 0.3, R-(10) = max(0.3, 2 - 1) = 1
    X-(10) = 10/(10*0.3 + 1) = 2.5, R+(10) = 3
    """
    b = bounds([0.2, 0.1], 1.0, 10)
    assert b.knee == pytest.approx(6.5, rel=1e-15)
    assert b.throughput_upper[0] == pytest.approx(1 / 1.3, rel=1e-15)
    assert b.throughput_upper[-1] == pytest.approx(5.0, rel=1e-15)
    assert b.response_lower[0] == pytest.approx(0.3, rel=1e-15)
    assert b.response_lower[-1] == pytest.approx(1.0, rel=1e-15)
    assert b.throughput_lower[-1] == pytest.approx(2.5, rel=1e-15)
    assert b.response_upper[-1] == pytest.approx(3.0, rel=1e-15)


def test_bounds_broadcast():
    b = bounds([[0.2, 0.1], [0.1, 0.1], [0.05, 0.3]], [[1.0], [0.0]], 4)
    assert b.throughput_upper.shape == (2, 3, 4)
    assert b.knee.shape == (2, 3)
    # Z = 0, D = [0.1, 0.1]: knee = 0.2/0.1 = 2.
    assert b.knee[1, 1] == pytest.approx(2.0)


# ---------------------------------------------------------------------- properties

demand_vectors = st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=4)
think_times = st.floats(0.0, 10.0)


@settings(max_examples=60, deadline=None)
@given(demand_vectors, think_times, st.integers(1, 60))
def test_monotone_in_population(demands, think_time, users):
    res = mva(demands, think_time, users)
    # Lazowska et al. ch. 5-6: X(n) and R(n) are nondecreasing in n.
    assert np.all(np.diff(res.throughput) >= -1e-12 * res.throughput[1:])
    assert np.all(np.diff(res.response) >= -1e-12 * res.response[1:])
    b = bounds(demands, think_time, users)
    assert np.all(res.throughput <= b.throughput_upper * (1 + 1e-12))
    assert np.all(res.throughput >= b.throughput_lower * (1 - 1e-12))


@settings(max_examples=60, deadline=None)
@given(demand_vectors, think_times, st.integers(1, 40), st.data())
def test_more_demand_or_think_time_lowers_throughput(demands, think_time, users, data):
    base = mva(demands, think_time, users).throughput
    k = data.draw(st.integers(0, len(demands) - 1))
    slower = list(demands)
    slower[k] *= data.draw(st.floats(1.01, 5.0))
    assert np.all(mva(slower, think_time, users).throughput <= base * (1 + 1e-12))
    more_think = think_time + data.draw(st.floats(0.01, 5.0))
    assert np.all(mva(demands, more_think, users).throughput <= base * (1 + 1e-12))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 15), st.integers(0, 2**32 - 1))
def test_batch_broadcast_matches_loop(b1, b2, k, users, seed):
    rng = np.random.default_rng(seed)
    demands = rng.uniform(0.001, 0.5, size=(b1, b2, k))
    think_time = rng.uniform(0.0, 2.0, size=(b2,))
    res = mva(demands, think_time, users)
    assert res.throughput.shape == (b1, b2, users)
    assert res.mean_number.shape == (b1, b2, users, k)
    assert res.utilization.shape == (b1, b2, users, k)
    for i, j in itertools.product(range(b1), range(b2)):
        one = mva(demands[i, j], think_time[j], users)
        np.testing.assert_allclose(res.throughput[i, j], one.throughput, rtol=1e-15)
        np.testing.assert_allclose(res.mean_number[i, j], one.mean_number, rtol=1e-15)


def test_think_time_batch_with_scalar_demand():
    res = mva(0.01, [0.0, 0.1, 1.0], 5)
    assert res.throughput.shape == (3, 5)
    # Z = 0, one station: X = 1/D for every n (hand-worked as in the D = 1 case).
    np.testing.assert_allclose(res.throughput[0], 100.0, rtol=1e-14)


# ---------------------------------------------------------------------- DataFrame


def test_to_frame_single_network():
    df = mva([0.2, 0.1], 1.0, 3).to_frame()
    assert isinstance(df, pd.DataFrame)
    assert list(df.index) == [1, 2, 3] and df.index.name == "users"
    for col in ("throughput", "response", "mean_number_0", "mean_number_1",
                "utilization_0", "utilization_1", "residence_time_0"):
        assert col in df.columns
    assert df.loc[2, "throughput"] == pytest.approx(130 / 87, rel=1e-14)  # hand-worked above


def test_to_frame_batch():
    res = mva([[0.2, 0.1], [0.1, 0.1]], 1.0, 3)
    df = res.to_frame()
    assert df.index.names == ["batch_0", "users"]
    assert len(df) == 6
    assert df.loc[(0, 2), "throughput"] == pytest.approx(130 / 87, rel=1e-14)
    assert df.loc[(1, 3), "throughput"] == pytest.approx(res.throughput[1, 2], rel=0)


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, name", [
    (dict(demands=-0.1, think_time=0.0, users=3), "demands"),
    (dict(demands=0.0, think_time=0.0, users=3), "demands"),
    (dict(demands=[0.1, float("nan")], think_time=0.0, users=3), "demands"),
    (dict(demands=[0.1, float("inf")], think_time=0.0, users=3), "demands"),
    (dict(demands=[], think_time=0.0, users=3), "demands"),
    (dict(demands="fast", think_time=0.0, users=3), "demands"),
    (dict(demands=0.1, think_time=-1.0, users=3), "think_time"),
    (dict(demands=0.1, think_time=float("nan"), users=3), "think_time"),
    (dict(demands=0.1, think_time=float("inf"), users=3), "think_time"),
    (dict(demands=0.1, think_time=0.0, users=0), "users"),
    (dict(demands=0.1, think_time=0.0, users=-2), "users"),
    (dict(demands=0.1, think_time=0.0, users=2.5), "users"),
    (dict(demands=0.1, think_time=0.0, users=True), "users"),
    (dict(demands=0.1, think_time=0.0, users=None), "users"),
    (dict(demands=0.1, think_time=0.0, users=[1, 2]), "users"),
    (dict(demands=0.1, think_time=0.0, users=float("nan")), "users"),
])
@pytest.mark.parametrize("func", [mva, bounds])
def test_bad_input_names_parameter(func, kwargs, name):
    with pytest.raises(ValueError, match=name):
        func(**kwargs)


def test_whole_float_users_accepted():
    assert mva(0.1, 0.0, 3.0).throughput.shape == (3,)
    assert mva(0.1, 0.0, np.int64(3)).throughput.shape == (3,)


def test_docstring_open_versus_closed_example():
    """The numbers quoted in the ``mva`` docstring, worked by hand.

    Closed: D = 10 ms, Z = 0, N = 10. One station with Z = 0 is always busy:
    X = 1/D = 100 req/s, R = N/X = 0.1 s.
    Open M/G/1-PS at 99 req/s: rho = 0.99, R = D/(1 - rho) = 0.01/0.01 = 1 s.
    """
    res = mva(0.010, 0.0, 10)
    assert res.throughput[-1] == pytest.approx(100.0, rel=1e-12)
    assert res.response[-1] == pytest.approx(0.1, rel=1e-12)
    # The closed test never shows more than 10 requests in flight; the open
    # stream at 99 % of the closed throughput has a mean of rho/(1-rho) = 99.
    assert res.mean_number[-1, 0] == pytest.approx(10.0, rel=1e-12)


# ---------------------------------------------------------------------- result protocol and old names


def test_results_follow_the_result_protocol():
    import json

    res = mva([0.2, 0.1], 1.0, 3)
    text = repr(res)
    assert text.startswith("MVAResult(") and "users=1..3" in text and len(text) < 120
    # In words: the bottleneck (station 0, D = 0.2 s) caps throughput at 1 / 0.2 = 5 requests/s.
    assert "station 0 is the bottleneck" in str(res) and "5 requests/s" in str(res)
    assert json.loads(json.dumps(res.to_dict()))["response"] == pytest.approx(res.response.tolist(), rel=1e-15)
    b = bounds([0.2, 0.1], 1.0, 3)
    assert "knee=" in repr(b) and len(repr(b)) < 80
    # knee N* = (D + Z) / D_max = (0.3 + 1) / 0.2 = 6.5 users (hand-worked).
    assert "6.5 users" in str(b)
    frame = b.to_frame()
    assert list(frame.columns) == ["throughput_upper", "throughput_lower", "response_lower", "response_upper"]
    assert frame.loc[3, "response_upper"] == pytest.approx(0.9, rel=1e-15)  # n D = 3 x 0.3
    assert json.loads(json.dumps(b.to_dict()))["knee"] == pytest.approx(6.5)


@pytest.mark.parametrize("old, new", [("response_time", "response"), ("queue_length", "mean_number")])
def test_old_mva_names_warn_and_still_work(old, new):
    res = mva([0.2, 0.1], 1.0, 3)
    with pytest.warns(DeprecationWarning, match=f"MVAResult.{old} is now .{new}"):
        value = getattr(res, old)
    np.testing.assert_array_equal(value, getattr(res, new))


@pytest.mark.parametrize("old, new", [("response_time_lower", "response_lower"),
                                      ("response_time_upper", "response_upper")])
def test_old_bounds_names_warn_and_still_work(old, new):
    b = bounds([0.2, 0.1], 1.0, 3)
    with pytest.warns(DeprecationWarning, match=f"{new}"):
        value = getattr(b, old)
    np.testing.assert_array_equal(value, getattr(b, new))
