"""Tests for capacity.erlang (Erlang B, Erlang C, square-root staffing).

Reference sources, named at each test:
- mpmath at 50 significant digits, from the definitions (the Erlang B
  recursion summed exactly, or the Poisson pmf over the regularised upper
  incomplete gamma for large c), independent of scipy;
- hand-worked closed forms for one and two servers;
- the textbook Erlang C staffing example (10 Erlangs, 14 agents);
- the Halfin-Whitt (1981) heavy-traffic limit.
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from capacity.erlang import _log_erlang_b, _log_erlang_c, erlang_b, erlang_c, sqrt_staffing

DPS = 50


# ---------------------------------------------------------------------------
# 50-digit references (mpmath), straight from the definitions
# ---------------------------------------------------------------------------

def _mp_log_b_recursion(c: int, a: float) -> mp.mpf:
    """log B by the Erlang B recursion B_k = a B_{k-1} / (k + a B_{k-1}), B_0 = 1
    (Cooper 1981, sec. 3.3), in 50-digit arithmetic.  Cheap for c <= ~2000."""
    with mp.workdps(DPS):
        a = mp.mpf(a)
        b = mp.mpf(1)
        for k in range(1, c + 1):
            b = a * b / (k + a * b)
        return mp.log(b)


def _mp_log_b_gamma(c: int, a: float) -> mp.mpf:
    """log B = log[(a^c e^-a / c!) / P(Poisson(a) <= c)], with
    P(Poisson(a) <= c) = Gamma(c+1, a) / c! (mpmath's regularised upper
    incomplete gamma), in 50-digit arithmetic.  Fast for any c."""
    with mp.workdps(DPS):
        a = mp.mpf(a)
        log_pmf = c * mp.log(a) - a - mp.loggamma(c + 1)
        return log_pmf - mp.log(mp.gammainc(c + 1, a, regularized=True))


def _mp_log_b(c: int, a: float) -> mp.mpf:
    return _mp_log_b_recursion(c, a) if c <= 1000 else _mp_log_b_gamma(c, a)


def _mp_log_c(c: int, a: float) -> mp.mpf:
    """log C from C = B / (1 - rho (1 - B)), rho = a / c < 1 (Cooper 1981, sec. 3.4)."""
    with mp.workdps(DPS):
        b = mp.exp(_mp_log_b(c, a))
        rho = mp.mpf(a) / c
        return mp.log(b / (1 - rho * (1 - b)))


def _rel_err(got: float, log_ref: mp.mpf) -> float:
    with mp.workdps(DPS):
        return float(abs(mp.mpf(got) / mp.exp(log_ref) - 1))


def test_mpmath_references_agree():
    """The two mpmath routes (recursion and incomplete gamma) agree to 40 digits,
    so either can serve as the reference."""
    for c, a in [(1, 0.5), (7, 3.25), (100, 99.9), (1000, 500.0), (1000, 1200.0), (1000, 20.0)]:
        r1, r2 = _mp_log_b_recursion(c, a), _mp_log_b_gamma(c, a)
        assert abs(r1 - r2) < mp.mpf(10) ** -40 * max(1, abs(r1))


# ---------------------------------------------------------------------------
# Erlang C against mpmath
# ---------------------------------------------------------------------------

SERVERS = [1, 2, 10, 100, 1000, 10**4, 10**5]
UTILISATIONS = [0.5, 0.9, 0.99, 0.999]


@pytest.mark.parametrize("c", SERVERS)
def test_erlang_c_against_mpmath(c):
    """Relative error <= 1e-9 against the 50-digit mpmath reference.

    Where the true C lies below the double range (1e4 servers at utilisation
    0.5: C ~ 1e-841) erlang_c returns 0 and the log-space core must still
    match the reference's log to 1e-9 absolute (= 1e-9 relative in C)."""
    loads = [u * c for u in UTILISATIONS]
    got = erlang_c(c, loads)
    got_log = _log_erlang_c(float(c), np.array(loads))
    for a, g, gl in zip(loads, got, got_log):
        ref = _mp_log_c(c, a)
        if ref > math.log(1e-300):
            assert _rel_err(g, ref) <= 1e-9, (c, a, g, ref)
        else:
            assert g == 0.0
        assert abs(gl - float(ref)) <= 1e-9, (c, a, gl, ref)


def test_erlang_c_textbook_anchor():
    """Classic Erlang C staffing example: A = 10 Erlangs, 14 agents,
    P(wait) = 0.1741319 (e.g. the worked call-centre example used by Erlang C
    calculators; also mpmath: 0.17413193359504984...)."""
    assert abs(erlang_c(14, 10.0) - 0.1741319) <= 1e-7
    assert _rel_err(erlang_c(14, 10.0), _mp_log_c(14, 10.0)) <= 1e-12


def test_erlang_c_unstable_is_one():
    """a >= c: the M/M/c queue is unstable and every arrival waits."""
    c = np.array([1, 3, 10, 10**6])
    for factor in [1.0, 1.0001, 2.0, 1e6]:
        assert np.all(erlang_c(c, c * factor) == 1.0)
    assert erlang_c(4, 4.0) == 1.0
    # just below the boundary it is < 1 but close (M/M/c at rho -> 1: C -> 1)
    assert 0.99 < erlang_c(4, 4.0 - 1e-6) < 1.0


# ---------------------------------------------------------------------------
# Erlang B against mpmath, including deep tails and a million servers
# ---------------------------------------------------------------------------

def _b_cases():
    cases = []
    for c in [1, 2, 3, 10, 15, 16, 17, 50, 100, 170, 1000]:
        s = math.sqrt(c)
        loads = [1e-3, 0.1, 0.01 * c, 0.5 * c, 0.9 * c, c, 1.1 * c, 2 * c, 10 * c, 1e3 * c, 1e6,
                 # either side of the switch to the continued fraction (a = c + 3 sqrt c)
                 c + 3 * s * (1 - 1e-9), c + 3 * s * (1 + 1e-9), c + 0.1 * s, c - s]
        cases += [(c, a) for a in loads if a > 0]
    for c in [10**4, 10**5, 10**6]:
        s = math.sqrt(c)
        loads = [0.99 * c, 0.999 * c, c - 3 * s, c - s, c, c + s, c + 3 * s * (1 - 1e-9),
                 c + 3 * s * (1 + 1e-9), c + 10 * s, 1.1 * c, 2 * c, 1e3 * c]
        cases += [(c, a) for a in loads]
    return cases


@pytest.mark.parametrize("c,a", _b_cases())
def test_erlang_b_against_mpmath(c, a):
    """Relative error of B (and absolute error of log B) against 50-digit mpmath.

    Covers the light-load tail (a = 1e-3 with 1000 servers: B ~ 1e-5565, only
    in log space), the overloaded tail (B -> 1 - c/a), both sides of the
    internal switch between methods, and c up to 10^6."""
    ref = _mp_log_b(c, a)
    got_log = float(_log_erlang_b(float(c), float(a)))
    # log B is conditioned like a * |d log B / d a| ~ max(|c - a|, 1) * eps.
    assert abs(got_log - float(ref)) <= 1e-12 * max(1.0, abs(float(ref))), (c, a, got_log, ref)
    got = erlang_b(c, a)
    if ref > math.log(1e-300):
        assert _rel_err(got, ref) <= 1e-11, (c, a, got, ref)
    elif ref < -746:  # below the smallest subnormal, 5e-324
        assert got == 0.0


def test_erlang_b_deep_light_load_tail_is_tiny_not_garbage():
    """B(170, 1) = 1/sum_{k<=170} 170!/k! ~ 1/170! ~ 1.4e-307: representable,
    so it must come out with full relative precision (mpmath recursion)."""
    got = erlang_b(170, 1.0)
    assert 1e-308 < got < 1e-306
    assert _rel_err(got, _mp_log_b_recursion(170, 1.0)) <= 1e-12


def test_erlang_b_million_servers_vectorised():
    """c = 10^6 over a sweep of loads, one call, against mpmath (incomplete gamma)."""
    c = 10**6
    loads = np.array([0.995, 0.999, 0.9999, 1.0, 1.0001, 1.001, 1.01, 1.5]) * c
    got = erlang_b(c, loads)
    for a, g in zip(loads, got):
        assert _rel_err(g, _mp_log_b_gamma(c, float(a))) <= 1e-11


# ---------------------------------------------------------------------------
# Hand-worked small cases
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("a", [1e-6, 0.3, 1.0, 2.5, 40.0, 1e5])
def test_small_cases_by_hand(a):
    """Cooper (1981) eq. 3.4 written out for c = 1, 2:
    B(1, a) = a / (1 + a);  B(2, a) = (a^2/2) / (1 + a + a^2/2);
    and M/M/1: C(1, rho) = rho for rho < 1."""
    assert erlang_b(1, a) == pytest.approx(a / (1 + a), rel=1e-13)
    assert erlang_b(2, a) == pytest.approx((a * a / 2) / (1 + a + a * a / 2), rel=1e-13)
    if a < 1:
        assert erlang_c(1, a) == pytest.approx(a, rel=1e-13)


def test_erlang_c_two_servers_by_hand():
    """M/M/2: C = 2 rho^2 / (1 + rho) with rho = a/2 (from C = cB/(c - a(1-B)))."""
    for rho in [0.1, 0.5, 0.9, 0.999]:
        assert erlang_c(2, 2 * rho) == pytest.approx(2 * rho**2 / (1 + rho), rel=1e-13)


def test_zero_load():
    """No traffic: nobody is blocked or waits."""
    assert erlang_b(5, 0.0) == 0.0
    assert erlang_c(5, 0) == 0.0


# ---------------------------------------------------------------------------
# sqrt_staffing
# ---------------------------------------------------------------------------

def test_sqrt_staffing_values():
    """c = ceil(a + beta sqrt(a)), by hand."""
    assert sqrt_staffing(100.0, 1.0) == 110
    assert sqrt_staffing(100.0, 1.05) == 111  # 110.5 -> 111
    assert sqrt_staffing(10.0, 0.5) == 12  # 10 + 1.58 -> 12
    assert sqrt_staffing(0.0, 2.0) == 1  # at least one server
    out = sqrt_staffing(np.array([[4.0], [9.0]]), np.array([0.0, 1.0]))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [[4, 6], [9, 12]])
    assert isinstance(sqrt_staffing(4.0, 1.0), int)


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_sqrt_staffing_halfin_whitt_limit(beta):
    """Halfin & Whitt (1981), Prop. 1: with c = a + beta sqrt(a), P(wait) ->
    1 / (1 + beta Phi(beta) / phi(beta)) as a -> infinity.  The gap shrinks
    like 1/sqrt(a): below 2% relative at a = 10^6 and smaller than at 10^4."""
    limit = 1.0 / (1.0 + beta * stats.norm.cdf(beta) / stats.norm.pdf(beta))
    gaps = []
    for a in [1e4, 1e6]:
        c = sqrt_staffing(a, beta)
        gaps.append(abs(erlang_c(c, a) / limit - 1))
    assert gaps[1] < 0.02
    assert gaps[1] < gaps[0]


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("func", [erlang_b, erlang_c])
@pytest.mark.parametrize("load", [-1.0, float("nan"), float("inf"), [1.0, -0.5]])
def test_bad_offered_load(func, load):
    with pytest.raises(ValueError, match="offered_load"):
        func(3, load)


@pytest.mark.parametrize("func", [erlang_b, erlang_c])
@pytest.mark.parametrize("servers", [0, -2, 2.5, True, float("nan"), [3, 0]])
def test_bad_servers(func, servers):
    with pytest.raises(ValueError, match="servers"):
        func(servers, 1.0)


def test_sqrt_staffing_bad_input():
    with pytest.raises(ValueError, match="offered_load"):
        sqrt_staffing(-1.0, 1.0)
    with pytest.raises(ValueError, match="beta"):
        sqrt_staffing(10.0, float("nan"))
    with pytest.raises(ValueError, match="beta"):
        sqrt_staffing(10.0, float("inf"))


# ---------------------------------------------------------------------------
# Properties (hypothesis)
# ---------------------------------------------------------------------------

servers_st = st.integers(min_value=1, max_value=10**6)
frac_st = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(c=servers_st, frac=frac_st)
def test_properties_range_and_order(c, frac):
    """B, C in [0, 1], no NaN, and C >= B (waiting is likelier than blocking:
    C = B / (1 - rho (1 - B)) with rho < 1), for c up to 10^6, loads 0..2c."""
    a = frac * c
    b, cw = erlang_b(c, a), erlang_c(c, a)
    assert 0.0 <= b <= 1.0 and 0.0 <= cw <= 1.0
    assert cw >= b * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(c=st.integers(min_value=1, max_value=10**6), frac=st.floats(0.01, 2.0),
       step=st.floats(1e-6, 1.0))
def test_monotone(c, frac, step):
    """Both decrease in servers and increase in offered load (Jagerman 1974, sec. 2)."""
    a = frac * c
    assert erlang_b(c + 1, a) <= erlang_b(c, a) * (1 + 1e-12)
    assert erlang_c(c + 1, a) <= erlang_c(c, a) * (1 + 1e-12)
    a2 = a * (1 + step)
    assert erlang_b(c, a2) >= erlang_b(c, a) * (1 - 1e-12)
    assert erlang_c(c, a2) >= erlang_c(c, a) * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(c=st.integers(min_value=2, max_value=10**6), frac=st.floats(0.05, 3.0))
def test_recursion_identity(c, frac):
    """The implementation never uses the recursion, so check it holds:
    B(c, a) = a B(c-1, a) / (c + a B(c-1, a))  (Cooper 1981, sec. 3.3)."""
    a = frac * c
    prev = erlang_b(c - 1, a)
    expected = a * prev / (c + a * prev)
    got = erlang_b(c, a)
    if expected > 1e-290:
        assert got == pytest.approx(expected, rel=1e-11)


@settings(max_examples=60, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4),
       seed=st.integers(0, 2**32 - 1))
def test_broadcast_shape_and_no_nan(shapes, seed):
    """Output shape = broadcast shape of the inputs; no NaN anywhere on random
    grids with up to 10^6 servers and loads 0..2c."""
    rng = np.random.default_rng(seed)
    s_shape, a_shape = shapes.input_shapes
    servers = rng.integers(1, 10**6 + 1, size=s_shape)
    loads = rng.uniform(0, 2, size=a_shape) * 10 ** rng.uniform(0, 6, size=a_shape)
    for func in (erlang_b, erlang_c):
        out = np.asarray(func(servers, loads))
        assert out.shape == shapes.result_shape
        assert not np.isnan(out).any()
        assert ((out >= 0) & (out <= 1)).all()


def test_scalar_in_scalar_out():
    assert isinstance(erlang_b(3, 1.0), float)
    assert isinstance(erlang_c(np.int64(3), np.float64(1.0)), float)
    assert isinstance(erlang_c([3], 1.0), np.ndarray)
