"""Tests for capacity.erlang (Erlang B, Erlang C, square-root staffing).

Reference sources, named at each test:
- mpmath at 50 significant digits, from the definitions (the Erlang B
  recursion summed exactly, or the Poisson pmf over the regularised upper
  incomplete gamma for large c), independent of scipy;
- hand-worked closed forms for one and two servers;
- the textbook Erlang C staffing example (10 Erlangs, 14 agents);
- the Halfin-Whitt (1981) heavy-traffic limit;
- for the fast path's Temme coefficients, an exact rational derivation from
  the definitions (DLMF section 8.12) and Temme's (1979) printed leading terms;
- the general log-space path itself, against which the fast path is compared
  on random grids.
"""
from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import optimize, special, stats

from capacity import erlang as E
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


# ---------------------------------------------------------------------------
# Fast path (integer servers <= 2**16): the Temme expansion near the mean,
# the exact sum for few servers, the closed form where P(N > c) is negligible,
# and the switches between them
# ---------------------------------------------------------------------------

def _temme_coefficients(n_k: int, n_pow: int) -> list[list[Fraction]]:
    """d[k][n], the coefficient of eta**n in Temme's c_k(eta), in exact rationals,
    straight from the definitions (DLMF section 8.12 and 5.11.3):

    - lambda - 1 = mu(eta) from eta**2/2 = mu - log(1 + mu), i.e. by
      differentiating, (1 + mu) eta = mu dmu/deta, solved order by order;
    - c_0 = 1/mu - 1/eta;
    - c_k = c_{k-1}'(eta)/eta + (-1)**k g_k/mu, with Gamma*(z) ~ sum g_k z**-k
      = exp(sum_j B_2j / (2j (2j - 1)) z**(1 - 2j)) (Stirling, Bernoulli B_2j).

    No floating point and nothing taken from scipy's tables."""
    m = n_pow + 2 * n_k + 2
    alpha = [Fraction(0), Fraction(1)]
    for n in range(2, m + 2):
        s = sum((n + 1 - i) * alpha[i] * alpha[n + 1 - i] for i in range(2, n))
        alpha.append((alpha[n - 1] - s) / (n + 1))
    q = [Fraction(1)]  # 1/mu = (1/eta) sum q_n eta**n
    for n in range(1, m + 1):
        q.append(-sum(alpha[1 + j] * q[n - j] for j in range(1, n + 1)))
    c0 = q[1:]
    bern = [Fraction(1)]
    for j in range(1, 2 * n_k + 2):
        bern.append(-sum(math.comb(j + 1, i) * bern[i] for i in range(j)) / (j + 1))
    log_series = [Fraction(0)] * (n_k + 1)
    for j in range(1, n_k // 2 + 2):
        if 2 * j - 1 <= n_k:
            log_series[2 * j - 1] = bern[2 * j] / (2 * j * (2 * j - 1))
    g, term = [Fraction(1)] + [Fraction(0)] * n_k, [Fraction(1)] + [Fraction(0)] * n_k
    for p in range(1, n_k + 1):  # exp(log_series) term by term
        new = [Fraction(0)] * (n_k + 1)
        for i, x in enumerate(term):
            for j, y in enumerate(log_series[: n_k + 1 - i]):
                new[i + j] += x * y
        term = [x / p for x in new]
        g = [x + y for x, y in zip(g, term)]
    rows = [c0]
    for k in range(1, n_k):
        prev = rows[-1]
        assert prev[1] + (-1) ** k * g[k] == 0  # the 1/eta poles cancel
        rows.append([(n + 2) * prev[n + 2] + (-1) ** k * g[k] * c0[n] for n in range(len(prev) - 2)])
    return [row[:n_pow] for row in rows]


def test_temme_coefficients_rederived():
    """The hard-coded table is the exact derivation rounded to double, and the
    derivation reproduces the leading terms printed by Temme (1979) and in DLMF 8.12:
    c_0 = -1/3 + eta/12 - 2 eta**2/135 + eta**3/864 + ..., c_1 = -1/540 - eta/288
    + eta**2/378 + ..., c_2(0) = 25/6048 (also scipy's igam.h d table)."""
    table = E._TEMME_D
    exact = _temme_coefficients(*table.shape)
    assert exact[0][:4] == [Fraction(-1, 3), Fraction(1, 12), Fraction(-2, 135), Fraction(1, 864)]
    assert exact[1][:3] == [Fraction(-1, 540), Fraction(-1, 288), Fraction(1, 378)]
    assert exact[2][0] == Fraction(25, 6048)
    for k, row in enumerate(exact):
        for n, d in enumerate(row):
            assert table[k, n] == float(d), (k, n)


@pytest.mark.parametrize("c", [E._EXACT_BELOW, E._EXACT_BELOW + 1, 64, 100, 1000, 4096, E._FAST_MAX_SERVERS])
def test_temme_polynomial_against_mpmath(c):
    """The truncated expansion itself: P(N <= c) = 1 - erfc(x)/2 + P(N = c) (1 + P_c(x)),
    x = sqrt(c u), u = rho - 1 - log rho, with x and P(N = c) in 50-digit mpmath and
    only P_c from the table, against mpmath's incomplete gamma.  Absolute error
    <= 1e-15 (measured 5.6e-16 at c = 40, rounding ~1e-16 elsewhere) for loads
    c - z sqrt(c) from the mean (z = 0) to past the switch to the closed form
    (z ~ 8.5)."""
    _, _, temme = E._fast_tables(c)
    for z in np.linspace(0.0, 9.5, 39):
        a = c - z * math.sqrt(c)
        if a <= 0:
            continue
        with mp.workdps(DPS):
            am = mp.mpf(a)
            x = mp.sqrt(c * (am / c - 1 - mp.log(am / c)))
            pmf = mp.exp(c * mp.log(am) - am - mp.loggamma(c + 1))
            cdf = float(mp.gammainc(c + 1, am, regularized=True))
            half_erfc = float(mp.erfc(x) / 2)
        got = 1.0 - half_erfc + float(pmf) * (1.0 + np.polyval(temme[::-1, c], float(x)))
        assert abs(got - cdf) <= 1e-15, (c, z, got, cdf)


def _check_b_c(c: int, loads, rel: float):
    """erlang_b and erlang_c (one vectorised call each) against 50-digit mpmath."""
    loads = [float(a) for a in loads]
    got_b, got_c = erlang_b(c, loads), erlang_c(c, loads)
    for a, gb, gc in zip(loads, got_b, got_c):
        ref_b = _mp_log_b(c, a)
        if ref_b > math.log(1e-300):
            assert _rel_err(gb, ref_b) <= rel, ("B", c, a, gb)
        if a < c:
            ref_c = _mp_log_c(c, a)
            if ref_c > math.log(1e-300):
                assert _rel_err(gc, ref_c) <= rel, ("C", c, a, gc)


@pytest.mark.parametrize("c", [2, 20, 38, 39, 40, 41, 42])
def test_either_side_of_the_exact_sum_switch(c):
    """c < 40 near the mean: the Erlang B recursion; c >= 40: Temme.  Relative
    error <= 1e-13 (measured < 2e-14) across utilisation 0.01..0.9999."""
    _check_b_c(c, c * np.array([0.01, 0.05, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999]), 1e-13)


def _negligible_switch(c: int) -> float:
    """The load below c where P(N = c)/(1 - rho) = 5e-17, i.e. where the fast path
    switches between the Temme/exact branch and the closed form (log pmf from
    scipy's gammaln: the switch only needs locating, not evaluating)."""
    def gap(a):
        return c * math.log(a) - a - special.gammaln(c + 1.0) - math.log1p(-a / c) - math.log(E._NEGLIGIBLE)
    return optimize.brentq(gap, 1e-300 ** (1.0 / c) * 10, c * (1 - 1e-12), xtol=1e-14, rtol=1e-15)


@pytest.mark.parametrize("c", [1, 5, 39, 40, 100, 1000, 20_000, E._FAST_MAX_SERVERS])
def test_either_side_of_the_negligible_tail_switch(c):
    """Just inside and outside the switch to the closed form: both branches agree
    with mpmath to 1e-12 relative (measured ~1e-14 for c <= 1000; the c |1 - rho| eps
    rounding of the log-pmf grows to ~1e-13 at 2**16).  And what the closed form
    drops is below half an ulp of what it is added to, by mpmath: P(N > c) against
    P(N <= c), and rho P(N = c) against (1 - rho) P(N <= c) in 1/C."""
    a0 = _negligible_switch(c)
    _check_b_c(c, [a0 * (1 - 1e-3), a0 * (1 - 1e-7), a0 * (1 + 1e-7), a0 * (1 + 1e-3)], 1e-12)
    with mp.workdps(DPS):
        a = mp.mpf(a0 * (1 - 1e-7))
        cdf = mp.gammainc(c + 1, a, regularized=True)
        pmf = mp.exp(c * mp.log(a) - a - mp.loggamma(c + 1))
        rho = a / c
        assert (1 - cdf) / cdf < 2.0**-53
        assert rho * pmf / ((1 - rho) * cdf) < 2.0**-53


def test_log_factorial_table():
    """log(c!) - c log c + c, the c-only part of the log-pmf, against mpmath: within
    an ulp for c <= 16 (computed in decimal arithmetic there) and 2 ulps above
    (Stirling series, error < 1e-16)."""
    _, log_terms, _ = E._fast_tables(E._FAST_MAX_SERVERS)
    for c in list(range(1, 40)) + [100, 1000, 12345, E._FAST_MAX_SERVERS]:
        with mp.workdps(DPS):
            ref = float(mp.loggamma(c + 1) - c * mp.log(c) + c)
        assert abs(-log_terms[c] - ref) <= (1 if c <= 16 else 2) * np.spacing(ref), c


@pytest.mark.parametrize("c", [100, 300, 1000, 4096])
def test_utilisation_near_one(c):
    """Heavy traffic, rho -> 1 (C -> 1, the (1 - rho) P(N <= c) term vanishing
    against rho P(N = c)): relative error <= 1e-12 against mpmath."""
    rhos = 1 - np.array([1e-2, 1e-3, 1e-4, 1e-6, 1e-9, 1e-12])
    _check_b_c(c, c * rhos, 1e-12)


@pytest.mark.parametrize("c", [E._FAST_MAX_SERVERS, E._FAST_MAX_SERVERS + 1])
def test_either_side_of_the_fast_path_limit(c):
    """2**16 servers (fast path) and one more (general log-space path): both
    against mpmath (incomplete gamma) to 1e-11, loads through the mean into
    overload."""
    s = math.sqrt(c)
    _check_b_c(c, [c - 20 * s, c - 8 * s, c - 3 * s, c - 0.5 * s, c - 1e-3, c + s, c + 10 * s], 1e-11)


def test_fast_and_general_paths_agree_on_a_random_grid():
    """The fast path (erlang_b / erlang_c for c <= 2**16) against the general
    log-space path (_log_erlang_b / _log_erlang_c, Loader pmf + gammaincc +
    continued fraction) on 50,000 random points, c log-uniform on 1..2**16,
    loads 0..2c with a share near the mean and near rho = 1: relative
    difference <= 2e-11 wherever the value is above 1e-300 (measured ~1e-12,
    the two log-pmf roundings at the largest c), and both 0 below 1e-320."""
    rng = np.random.default_rng(11)
    n = 50_000  # more than one chunk, the last one partial
    c = np.exp(rng.uniform(0, math.log(E._FAST_MAX_SERVERS), n)).astype(np.int64)
    rho = np.concatenate([rng.uniform(0, 2, n // 2), 1 - 10 ** rng.uniform(-9, 0, n // 4),
                          1 - rng.uniform(-10, 10, n - n // 2 - n // 4) / np.sqrt(c[: n - n // 2 - n // 4])])
    a = np.maximum(rho * c, 0.0)
    for fast, general in [(erlang_b(c, a), np.exp(_log_erlang_b(c.astype(float), a))),
                          (erlang_c(c, a), np.exp(_log_erlang_c(c.astype(float), a)))]:
        big = general > 1e-300
        assert np.max(np.abs(fast[big] / general[big] - 1)) <= 2e-11
        assert np.all(fast[general < 1e-320] < 1e-300)


def test_benchmark_grid_against_mpmath():
    """The benchmark's kind of grid (servers 1..1000, utilisation uniform on (0, 1)),
    300 random points against mpmath: relative error <= 1e-12 (measured 3e-13,
    the log-pmf rounding c |1 - rho| eps far in the tail)."""
    rng = np.random.default_rng(5)
    c = rng.integers(1, 1001, 300)
    a = rng.uniform(0, 1, 300) * c
    got_b, got_c = erlang_b(c, a), erlang_c(c, a)
    for ci, ai, gb, gc in zip(c, a, got_b, got_c):
        ref_b, ref_c = _mp_log_b(int(ci), float(ai)), _mp_log_c(int(ci), float(ai))
        if ref_c > math.log(1e-300):
            assert _rel_err(gc, ref_c) <= 1e-12, (ci, ai)
            assert _rel_err(gb, ref_b) <= 1e-12, (ci, ai)
        else:
            assert gc < 1e-300 and gb < 1e-300


def test_exact_sum_vectorised_equals_scalar():
    """The recursion for c < 40 runs in numpy for many points and in Python floats
    for a few (scalar calls): same operations, same order, so bitwise the same."""
    rng = np.random.default_rng(2)
    c = rng.integers(1, E._EXACT_BELOW, 500)
    a = rng.uniform(0.05, 1.0, 500) * c
    for func in (erlang_b, erlang_c):
        got = func(c, a)
        assert all(got[i] == func(int(c[i]), float(a[i])) for i in range(0, 500, 7))


def test_mixed_paths_in_one_call_match_single_calls():
    """One call mixing c above and below 2**16, loads below and above c (B then
    takes the general path for a >= c), and a = 0: the same values as scalar
    calls, in the input's shape."""
    c = np.array([[1, 39, 40, 1000, 70_000, 10**6], [2, 65_536, 65_537, 5, 3, 100]])
    a = np.array([[0.5, 30.0, 41.0, 0.0, 69_000.0, 2e6], [2.0, 65_000.0, 66_000.0, 1e-9, 2.999, 100.0]])
    for func in (erlang_b, erlang_c):
        got = func(c, a)
        assert got.shape == c.shape
        for idx in np.ndindex(c.shape):
            assert got[idx] == func(int(c[idx]), float(a[idx])), (func.__name__, idx)


@pytest.mark.parametrize("func", [erlang_b, erlang_c])
def test_bad_values_past_the_first_chunk(func):
    """Integer and float64 arrays are checked chunk by chunk inside the fast
    path: a bad value far into the array raises the shared checks' error, and
    a bad server count wins over a bad load, as in check_servers/check_nonnegative."""
    n = 3 * E._CHUNK
    servers, loads = np.full(n, 10, dtype=np.int64), np.full(n, 3.0)
    for bad, message in [(np.nan, "offered_load must not be NaN"), (np.inf, "non-negative and finite"),
                         (-1.0, "non-negative and finite")]:
        x = loads.copy()
        x[n - 5] = bad
        with pytest.raises(ValueError, match=message):
            func(servers, x)
        s = servers.copy()
        s[2 * E._CHUNK + 1] = 0
        with pytest.raises(ValueError, match="servers must be a positive integer"):
            func(s, x)
    s = servers.astype(np.int32)
    s[n - 1] = -3
    with pytest.raises(ValueError, match="servers"):
        func(s, loads)
    big = servers.copy()
    big[0] = 10**6  # the general path takes that point; its load is checked there
    x = loads.copy()
    x[0] = -2.0
    with pytest.raises(ValueError, match="offered_load"):
        func(big, x)


def _threaded_grid():
    """A grid just large enough to be split (2 * 2**17 points and a remainder), with every
    branch in it: c < 40 near the mean, Temme points, negligible tails, a >= c, c > 2**16."""
    rng = np.random.default_rng(11)
    n = E._PARALLEL_MIN + 12_345
    c = rng.integers(1, 1001, n)
    a = rng.uniform(0.0, 1.05, n) * c
    c[[7, n // 2 + 3, n - 2]] = [70_000, 2**16, 10**6]
    a[[7, n // 2 + 3, n - 2]] = [69_000.0, 2**16 - 300.0, 2e6]
    return c, a


@pytest.mark.parametrize("func", [erlang_b, erlang_c])
def test_threads_give_the_single_thread_values_bit_for_bit(func, monkeypatch):
    """A large grid is split between threads; every point still goes through the same
    operations, so 1, 2 and 3 threads agree exactly (and with scalar calls)."""
    c, a = _threaded_grid()
    results = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("CAPACITY_NUM_THREADS", threads)
        results[threads] = func(c, a)
    assert np.array_equal(results["1"], results["2"]) and np.array_equal(results["1"], results["3"])
    for i in (0, 7, c.size // 2 + 3, c.size - 2, c.size - 1):
        assert results["2"][i] == func(int(c[i]), float(a[i]))


@pytest.mark.parametrize("func", [erlang_b, erlang_c])
def test_threads_report_bad_values_of_any_part(func, monkeypatch):
    """A bad value in the second thread's part raises the shared checks' error."""
    monkeypatch.setenv("CAPACITY_NUM_THREADS", "2")
    c, a = _threaded_grid()
    x = a.copy()
    x[-10] = np.nan
    with pytest.raises(ValueError, match="offered_load must not be NaN"):
        func(c, x)
    s = c.copy()
    s[-10] = 0
    with pytest.raises(ValueError, match="servers must be a positive integer"):
        func(s, a)


@pytest.mark.parametrize("bad", ["0", "two", "-1", "1.5"])
def test_thread_count_variable_is_checked(bad, monkeypatch):
    monkeypatch.setenv("CAPACITY_NUM_THREADS", bad)
    c, a = _threaded_grid()
    with pytest.raises(ValueError, match="CAPACITY_NUM_THREADS"):
        erlang_c(c, a)
