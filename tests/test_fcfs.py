"""Tests of capacity.fcfs against independent references.

References used (each test names its own):
* M/M/1 and M/M/c closed forms (Kleinrock, Queueing Systems I, 1975, sections 3.2, 3.5).
* M/D/1: Erlang's exact waiting-time distribution, evaluated with mpmath at 40 + lambda t / ln 10 digits
  (the sum alternates, so double precision would not do).
* Erlang-4 and hyperexponential service: mpmath Talbot inversion at 30 digits of the
  Pollaczek-Khinchine transform in its textbook form (a different inversion algorithm and
  a different algebraic form of the transform than the implementation's Euler/geometric sum).
* Lognormal service: a lattice (Benes) computation by FFT, with floor- and ceiling-rounded
  lattices that bound the true distribution from both sides (stochastic order), so the
  reference carries its own error bar.
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from capacity import Service, fcfs
from capacity.erlang import erlang_c

QS = (0.5, 0.9, 0.99, 0.999)
RHOS = (0.3, 0.7, 0.9, 0.95)
REL = 5e-3  # the brief's tolerance on quantiles: 0.5 % relative or 1e-4 E[S] absolute


def _close(value, ref, mean_service):
    return abs(value - ref) <= max(REL * abs(ref), 1e-4 * mean_service)


# ------------------------------------------------------------------------------------------
# M/M/1: closed forms (Kleinrock 1975, eqs. 3.26 and the wait tail rho e^{-(mu - lambda) t})

@pytest.mark.parametrize("mean", [1.0, 0.025])
@pytest.mark.parametrize("rho", RHOS)
def test_mm1_quantiles_closed_form(rho, mean):
    lam, mu = rho / mean, 1.0 / mean
    q = np.array(QS)
    resp = np.log(1.0 / (1.0 - q)) / (mu - lam)
    wait = np.where(q > 1 - rho, np.log(rho / (1.0 - q)) / (mu - lam), 0.0)
    np.testing.assert_allclose(fcfs.response_quantile(q, lam, mean), resp, rtol=1e-10)
    np.testing.assert_allclose(fcfs.wait_quantile(q, lam, Service.exponential(mean)), wait, rtol=1e-10)
    assert fcfs.mean_wait(lam, mean) == pytest.approx(rho * mean / (1 - rho), rel=1e-12)


# ------------------------------------------------------------------------------------------
# M/D/1: Erlang's exact formula (Erlang 1909; Kleinrock 1975 problem 5.x; also
# Franx, "A simple solution for the M/D/c waiting time distribution", ORL 29 (2001) eq. 1):
# P(W <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} (lambda (kD - t))^k / k! e^{-lambda (kD - t)}

def _md1_cdf(t, lam, d):
    # the largest term is about e^{lambda t}: carry that many digits plus 40
    with mp.workdps(40 + int(lam * t / 2.3)):
        t, lam, d = mp.mpf(t), mp.mpf(lam), mp.mpf(d)
        total = mp.mpf(0)
        for k in range(int(mp.floor(t / d)) + 1):
            x = lam * (k * d - t)
            total += x**k / mp.factorial(k) * mp.exp(-x)
        return (1 - lam * d) * total


def _md1_quantile(q, lam, d):
    if q <= 1 - lam * d:
        return 0.0
    lo, hi = 0.0, d
    while _md1_cdf(hi, lam, d) < q:
        lo, hi = hi, 2 * hi
    for _ in range(45):  # bisection to ~1e-13 relative
        mid = 0.5 * (lo + hi)
        if _md1_cdf(mid, lam, d) < q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("rho", RHOS)
def test_md1_quantiles_erlang_formula(rho):
    d = 1.0
    lam = rho / d
    ref = np.array([_md1_quantile(q, lam, d) for q in QS])
    wait = fcfs.wait_quantile(np.array(QS), lam, Service.deterministic(d))
    resp = fcfs.response_quantile(np.array(QS), lam, Service.deterministic(d))
    for w, r, rr in zip(wait, ref, resp):
        assert _close(w, r, d)
        assert _close(rr, r + d, d)  # T = W + D exactly


def test_md1_sf_many_digits():
    """Erlang's formula at high precision vs the Euler inversion: the cdf of M/D/1 has kinks at
    multiples of D, the hardest case for Euler; still within 1e-7 absolute."""
    lam, d = 0.9, 1.0
    ts = np.array([0.3, 1.5, 4.2, 17.7, 60.3])
    ref = np.array([float(1 - _md1_cdf(t, lam, d)) for t in ts])
    got = fcfs.wait_sf(ts, lam, Service.deterministic(d))
    np.testing.assert_allclose(got, ref, atol=1e-7, rtol=0)


# ------------------------------------------------------------------------------------------
# Erlang-4 and hyperexponential: mpmath Talbot inversion at 30 digits of the textbook
# Pollaczek-Khinchine transform W*(s) = (1 - rho) s / (s - lambda (1 - B*(s)))
# (Kleinrock 1975, eq. 5.105).

def _mp_lst(service):
    fam, p = service.family, service._params
    if fam == "erlang":
        k, m = int(p["k"]), mp.mpf(float(p["mean"]))
        return lambda s: (1 + s * m / k) ** (-k)
    pp, r1, r2 = (mp.mpf(float(p[x])) for x in ("p", "rate1", "rate2"))
    return lambda s: pp * r1 / (r1 + s) + (1 - pp) * r2 / (r2 + s)


def _talbot_sf(service, lam, t, response):
    with mp.workdps(30):
        lst = _mp_lst(service)
        lam_ = mp.mpf(lam)
        rho = lam_ * mp.mpf(float(service.mean))

        def wstar(s):
            return (1 - rho) * s / (s - lam_ * (1 - lst(s)))

        if response:
            f = lambda s: (1 - wstar(s) * lst(s)) / s  # noqa: E731
        else:
            f = lambda s: (1 - wstar(s)) / s  # noqa: E731
        return float(mp.invertlaplace(f, t, method="talbot"))


TALBOT_CASES = [
    ("erlang4", Service.erlang(1.0, 4)),
    ("hyperexp4", Service.hyperexponential(1.0, 4.0)),
    ("hyperexp10", Service.hyperexponential(1.0, 10.0)),
]


@pytest.mark.parametrize("name,service", TALBOT_CASES)
@pytest.mark.parametrize("rho", RHOS)
def test_mg1_quantiles_talbot(name, service, rho):
    """The quantile t* is correct to 0.5 % iff the reference cdf crosses q inside
    [t*(1 - 0.005), t*(1 + 0.005)]; and the sf at t* agrees to 1e-8."""
    m = float(service.mean)
    lam = rho / m
    q = np.array(QS)
    for response, func in ((False, fcfs.wait_quantile), (True, fcfs.response_quantile)):
        tq = func(q, lam, service)
        for qi, t in zip(q, tq):
            if t == 0.0:  # no wait: the reference atom P(W = 0) = 1 - rho must cover q
                assert not response and qi <= 1 - rho
                continue
            lo = max(t * (1 - REL), t - 1e-4 * m) if t * REL < 1e-4 * m else t * (1 - REL)
            hi = t + max(REL * t, 1e-4 * m)
            assert _talbot_sf(service, lam, lo, response) >= 1 - qi
            assert _talbot_sf(service, lam, hi, response) <= 1 - qi
        # many digits: the sf itself at the p99.9 point
        t999 = tq[-1]
        sf = (fcfs.response_sf if response else fcfs.wait_sf)(t999, lam, service)
        assert sf == pytest.approx(_talbot_sf(service, lam, t999, response), abs=1e-8, rel=1e-6)


def test_scaling_small_service_time():
    """E[S] = 25 ms: the same Talbot reference at the scaled parameters."""
    service = Service.hyperexponential(0.025, 4.0)
    lam = 0.9 / 0.025
    for q in QS:
        t = fcfs.response_quantile(q, lam, service)
        assert _talbot_sf(service, lam, t * (1 - REL), True) >= 1 - q
        assert _talbot_sf(service, lam, t * (1 + REL), True) <= 1 - q


# ------------------------------------------------------------------------------------------
# Lognormal: lattice (Benes) reference.  W = R_1 + ... + R_N, N geometric(rho),
# R ~ S_e with density P(S > x) / E[S] (Benes 1956; Asmussen, Applied Probability and
# Queues, 2003, VIII.5).  Rounding R and S down (up) to a lattice of step h gives a random
# variable stochastically below (above) the true one, so the lattice quantiles bracket the
# true quantile.  Convolutions by FFT with exponential damping against wrap-around.

def _lognormal_lattice_quantiles(mean, scv, rho):
    sigma2 = math.log1p(scv)
    sigma, mu = math.sqrt(sigma2), math.log(mean) - 0.5 * sigma2
    lam = rho / mean
    mean_wait = lam * mean**2 * (1 + scv) / (2 * (1 - rho))
    svc_top = math.exp(mu + sigma * 3.8)  # beyond the p99.99 of S
    length = 4 * (20 * mean_wait / rho + svc_top)
    n = 2**20
    h = length / n
    x = h * np.arange(n + 1)
    # integrated tail I(y) = E[min(S, y)] = E[S] Phi((ln y - mu - s^2)/s) + y P(S > y)
    with np.errstate(divide="ignore"):
        ly = np.log(x)
    i_y = mean * stats.norm.cdf((ly - mu - sigma2) / sigma) + x * stats.norm.sf((ly - mu) / sigma)
    r_floor = np.diff(i_y) / mean          # P(kh <= R < (k+1)h)
    s_cdf = stats.lognorm.cdf(x, sigma, scale=math.exp(mu))
    s_floor = np.diff(s_cdf)               # P(kh <= S < (k+1)h)
    # damping r^k, r^n = 1e-10: aliased mass is multiplied by 1e-10
    damp = np.exp(np.log(1e-10) / n * np.arange(n))
    z = np.exp(-2j * np.pi * np.arange(n) / n)
    fr = np.fft.fft(r_floor * damp)
    fs = np.fft.fft(s_floor * damp)
    shift = np.exp(np.log(1e-10) / n) * z  # one lattice step up (ceiling), damped
    out = {}
    for label, fr_k, fs_k in (("lo", fr, fs), ("hi", fr * shift, fs * shift)):
        w = (1 - rho) / (1 - rho * fr_k)
        for kind, tr in (("wait", w), ("resp", w * fs_k)):
            pmf = np.real(np.fft.ifft(tr)) / damp
            cdf = np.cumsum(pmf)
            out[label, kind] = np.array([h * np.argmax(cdf >= q) for q in QS])
    return out, h


@pytest.mark.parametrize("scv", [1.0, 4.0])
@pytest.mark.parametrize("rho", RHOS)
def test_mg1_lognormal_lattice(scv, rho):
    service = Service.lognormal(1.0, scv)
    ref, h = _lognormal_lattice_quantiles(1.0, scv, rho)
    q = np.array(QS)
    for kind, func in (("wait", fcfs.wait_quantile), ("resp", fcfs.response_quantile)):
        got = func(q, rho, service)
        lo, hi = ref["lo", kind], ref["hi", kind]
        # the lattice bracket itself must be tight, else the reference proves nothing
        assert np.all(hi - lo <= np.maximum(2e-3 * hi, 1e-4 + 2 * h))
        # inside the bracket (0.5 % asked; the bracket is ~1e-4 wide, and the Euler result
        # is held to it, which is a far tighter check)
        assert np.all(got >= lo * (1 - 1e-9) - 1e-12), (kind, got, lo)
        assert np.all(got <= hi * (1 + 1e-9) + h), (kind, got, hi)


# ------------------------------------------------------------------------------------------
# M/M/c (Kleinrock 1975, section 3.5; response sf e.g. Gross & Harris, Fundamentals of
# Queueing Theory, 4th ed., eq. 2.46)

def _mmc_response_sf_quad(t, lam, mu, c):
    """P(T > t) by numerical convolution (scipy quad) of the wait (atom 1 - C at 0, density
    C theta e^{-theta w}) with the exponential service: independent of the closed form."""
    cc = erlang_c(c, lam / mu)
    theta = c * mu - lam
    inner, _ = integrate.quad(lambda w: cc * theta * math.exp(-theta * w) * math.exp(-mu * (t - w)),
                              0.0, t, epsabs=0.0, epsrel=1e-13, limit=200)
    return (1 - cc) * math.exp(-mu * t) + inner + cc * math.exp(-theta * t)


@pytest.mark.parametrize("c,rho", [(2, 0.5), (4, 0.8), (16, 0.95), (3, 2.0 / 3.0 - 1e-9), (8, 0.3)])
def test_mmc_response_sf_against_quadrature(c, rho):
    mu = 1.0 / 0.05
    lam = rho * c * mu
    ts = np.array([0.001, 0.02, 0.1, 0.5, 2.0])
    ref = np.array([_mmc_response_sf_quad(t, lam, mu, c) for t in ts])
    np.testing.assert_allclose(fcfs.response_sf(ts, lam, 0.05, c), ref, rtol=1e-9, atol=1e-300)


def test_mmc_theta_equal_mu_is_continuous():
    """theta = c mu - lambda = mu at lambda = (c - 1) mu; the limit is e^{-mu t}(1 + C mu t)."""
    mu, c, t = 1.0, 3, np.array([0.1, 1.0, 7.0])
    lam = (c - 1) * mu
    cc = erlang_c(c, lam / mu)
    exact = np.exp(-mu * t) * (1 + cc * mu * t)
    for eps in (0.0, 1e-12, -1e-12, 1e-7, -1e-7):
        got = fcfs.response_sf(t, lam * (1 + eps), 1.0, c)
        np.testing.assert_allclose(got, exact, rtol=1e-6 if eps else 1e-13)


def test_mmc_wait_closed_form_and_c1_reduces_to_mm1():
    # C e^{-(c mu - lambda) t} and E[W] = C / (c mu - lambda) (Kleinrock 1975, eqs. 3.40-3.41)
    lam, mu, c = 30.0, 10.0, 4
    cc = erlang_c(c, lam / mu)
    assert fcfs.wait_sf(0.2, lam, 0.1, c) == pytest.approx(cc * math.exp(-(c * mu - lam) * 0.2), rel=1e-13)
    assert fcfs.mean_wait(lam, 0.1, c) == pytest.approx(cc / (c * mu - lam), rel=1e-13)
    assert fcfs.wait_quantile(0.99, lam, 0.1, c) == pytest.approx(math.log(cc / 0.01) / (c * mu - lam), rel=1e-13)
    # c = 1: M/M/1, response exponential with rate mu - lambda
    assert fcfs.response_sf(0.3, 7.0, 0.1, 1) == pytest.approx(math.exp(-3.0 * 0.3), rel=1e-13)
    assert fcfs.response_quantile(0.9, 7.0, 0.1, 1) == pytest.approx(math.log(10) / 3.0, rel=1e-10)


# ------------------------------------------------------------------------------------------
# M/G/c approximation: exact at its two anchors

@pytest.mark.parametrize("service", [Service.lognormal(0.2, 3.0), Service.deterministic(0.2),
                                     Service.erlang(0.2, 3), Service.hyperexponential(0.2, 5.0)])
def test_mgc_with_one_server_is_pollaczek_khinchine(service):
    lam = 4.0  # rho = 0.8
    pk = lam * float(service.moment(2)) / (2 * (1 - 0.8))  # Kleinrock 1975 eq. 5.72
    assert fcfs.mean_wait(lam, service, 1) == pytest.approx(pk, rel=1e-12)
    assert fcfs.mean_response(lam, service, 1) == pytest.approx(pk + 0.2, rel=1e-12)


def test_mgc_with_exponential_service_is_mmc():
    """gamma with scv 1 is exponential, but goes through the approximation's code path."""
    lam, c = 25.0, 3
    g = Service.gamma(0.1, 1.0)
    cc = erlang_c(c, lam * 0.1)
    assert fcfs.mean_wait(lam, g, c) == pytest.approx(cc / (c * 10 - lam), rel=1e-12)
    ts = np.array([0.01, 0.1, 0.5])
    np.testing.assert_allclose(fcfs.response_sf(ts, lam, g, c), fcfs.response_sf(ts, lam, 0.1, c), rtol=1e-7)
    np.testing.assert_allclose(fcfs.response_quantile(np.array(QS), lam, g, c),
                               fcfs.response_quantile(np.array(QS), lam, 0.1, c), rtol=1e-7)


# ------------------------------------------------------------------------------------------
# Properties (hypothesis)

FAMILIES = {
    "exp": lambda m: Service.exponential(m),
    "det": lambda m: Service.deterministic(m),
    "erlang3": lambda m: Service.erlang(m, 3),
    "hyper5": lambda m: Service.hyperexponential(m, 5.0),
    "lognormal2": lambda m: Service.lognormal(m, 2.0),
}

fam_st = st.sampled_from(sorted(FAMILIES))
rho_st = st.floats(0.05, 0.9)
q_st = st.sampled_from([0.5, 0.9, 0.99, 0.999])


@settings(max_examples=12, deadline=None)
@given(fam=fam_st, rho=rho_st, q=q_st, servers=st.integers(1, 6))
def test_monotone_in_arrival_rate_and_servers(fam, rho, q, servers):
    svc = FAMILIES[fam](0.01)
    lam = rho * servers / 0.01
    lams = np.array([0.8 * lam, lam])
    r = fcfs.response_quantile(q, lams, svc, servers)
    assert r[0] <= r[1] * (1 + 1e-9)
    assert fcfs.mean_wait(lams[0], svc, servers) <= fcfs.mean_wait(lams[1], svc, servers)
    more = fcfs.response_quantile(q, lam, svc, servers + 1)
    assert more <= r[1] * (1 + 1e-9)
    assert fcfs.mean_response(lam, svc, servers + 1) <= fcfs.mean_response(lam, svc, servers)
    w = fcfs.wait_sf(0.005, lams, svc, servers)
    assert np.all(w[0] <= w[1] + 1e-9)


@settings(max_examples=15, deadline=None)
@given(fam=fam_st, q=q_st, servers=st.integers(1, 4))
def test_light_load_gives_service_time(fam, q, servers):
    svc = FAMILIES[fam](0.02)
    assert fcfs.response_quantile(q, 0.0, svc, servers) == pytest.approx(float(svc.ppf(q)), rel=1e-12)
    assert fcfs.mean_response(0.0, svc, servers) == pytest.approx(0.02, rel=1e-12)
    assert fcfs.wait_quantile(q, 0.0, svc, servers) == 0.0
    # rho = 1e-7: the response quantile is the service quantile to ~ rho
    got = fcfs.response_quantile(q, 1e-7 * servers / 0.02, svc, servers)
    assert got == pytest.approx(float(svc.ppf(q)), rel=1e-5, abs=1e-9)


@settings(max_examples=15, deadline=None)
@given(rho=st.floats(0.05, 0.97), q=st.floats(0.01, 0.999))
def test_scv_one_families_equal_mm1(rho, q):
    """gamma(scv 1) is exponential: the Euler M/G/1 path must reproduce M/M/1's closed form
    ln(1/(1-q)) / (mu - lambda) (Kleinrock 1975, eq. 3.26), to 1e-8 up to p99.9: the documented
    accuracy of the Euler inversion (its absolute error ~1e-10 dominates deeper in the tail)."""
    m = 0.05
    lam = rho / m
    exact = math.log(1 / (1 - q)) / (1 / m - lam)
    assert fcfs.response_quantile(q, lam, Service.gamma(m, 1.0)) == pytest.approx(exact, rel=1e-8)
    assert fcfs.response_quantile(q, lam, Service.hyperexponential(m, 1.0)) == pytest.approx(exact, rel=1e-8)


@settings(max_examples=20, deadline=None)
@given(fam=fam_st, rho=st.floats(0.01, 0.95), servers=st.integers(1, 8))
def test_little_and_mean_consistency(fam, rho, servers):
    """E[T] = E[W] + E[S]; with Little's law, lambda E[T] - lambda E[W] = offered load
    (mean number in service)."""
    svc = FAMILIES[fam](0.3)
    lam = rho * servers / 0.3
    ew, et = fcfs.mean_wait(lam, svc, servers), fcfs.mean_response(lam, svc, servers)
    assert et == pytest.approx(ew + 0.3, rel=1e-12)
    assert lam * et - lam * ew == pytest.approx(lam * 0.3, rel=1e-9)


def test_mean_wait_matches_integral_of_sf():
    """E[W] = int_0^inf P(W > t) dt (quad of the Euler sf) equals Pollaczek-Khinchine.

    quad runs piecewise between quantiles of W up to its 1 - 1e-10 quantile: over
    [0, inf) at once its extrapolation hit the inverted sf's ~1e-12 rounding and
    warned; the lognormal tail left out is ~1e-8 of the mean."""
    svc, lam = Service.lognormal(1.0, 2.0), 0.7
    edges = np.r_[0.0, fcfs.wait_quantile(np.array([0.5, 0.9, 0.99, 0.999, 0.9999, 1 - 1e-6, 1 - 1e-8,
                                                     1 - 1e-10]), lam, svc)]
    val = sum(integrate.quad(lambda t: fcfs.wait_sf(t, lam, svc), lo, hi, limit=200, epsrel=1e-10)[0]
              for lo, hi in zip(edges[:-1], edges[1:]))
    assert val == pytest.approx(fcfs.mean_wait(lam, svc), rel=1e-6)


def test_broadcast_shapes_and_scalars():
    lam = np.array([[1.0], [2.0], [3.0]])        # (3, 1)
    servers = np.array([1, 2])                    # (2,)
    q = np.array([0.5, 0.9, 0.99]).reshape(3, 1, 1)
    svc = Service.lognormal(np.array([0.1, 0.2]), 2.0)
    assert fcfs.mean_wait(lam, svc, servers).shape == (3, 2)
    assert fcfs.response_quantile(q, lam, svc, servers).shape == (3, 3, 2)
    assert fcfs.wait_sf(q, lam, 0.1, servers).shape == (3, 3, 2)
    assert isinstance(fcfs.response_quantile(0.9, 1.0, 0.1), float)
    assert isinstance(fcfs.wait_sf(0.1, 1.0, Service.deterministic(0.1)), float)
    # elementwise equals pointwise
    full = fcfs.response_quantile(q, lam, svc, servers)
    one = fcfs.response_quantile(0.9, 2.0, Service.lognormal(0.2, 2.0), 2)
    assert full[1, 1, 1] == pytest.approx(one, rel=1e-12)


@pytest.mark.parametrize("fam", sorted(FAMILIES))
def test_unstable_gives_inf(fam):
    svc = FAMILIES[fam](0.1)
    lam = np.array([10.0, 25.0])
    assert np.all(np.isinf(fcfs.mean_wait(lam, svc, 2)) == [False, True])
    assert np.all(np.isinf(fcfs.mean_response(10.5, svc, 1)))
    assert np.isinf(fcfs.wait_quantile(0.9, 10.5, svc))
    assert np.isinf(fcfs.response_quantile(0.5, 31.0, svc, 3))
    assert fcfs.wait_sf(100.0, 10.5, svc) == 1.0
    assert fcfs.response_sf(100.0, 11.0, svc) == 1.0


def test_high_load_stays_finite():
    """rho = 0.999: no NaN; the M/M/1 answer is still right to 1e-7."""
    lam = 0.999 / 0.01
    q = np.array(QS)
    np.testing.assert_allclose(fcfs.response_quantile(q, lam, Service.gamma(0.01, 1.0)),
                               np.log(1 / (1 - q)) / (100 - lam), rtol=1e-7)
    for fam in sorted(FAMILIES):
        v = fcfs.response_quantile(q, lam, FAMILIES[fam](0.01))
        assert np.all(np.isfinite(v)) and np.all(np.diff(v) > 0)


# ------------------------------------------------------------------------------------------
# Bad input

@pytest.mark.parametrize("func", [fcfs.mean_wait, fcfs.mean_response])
def test_bad_input_means(func):
    with pytest.raises(ValueError, match="arrival_rate"):
        func(-1.0, 0.1)
    with pytest.raises(ValueError, match="arrival_rate"):
        func(float("nan"), 0.1)
    with pytest.raises(ValueError, match="servers"):
        func(1.0, 0.1, 2.5)
    with pytest.raises(ValueError, match="servers"):
        func(1.0, 0.1, 0)


@pytest.mark.parametrize("func", [fcfs.wait_quantile, fcfs.response_quantile])
def test_bad_input_quantiles(func):
    for q in (0.0, 1.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="q"):
            func(q, 1.0, 0.1)
    with pytest.raises(ValueError, match="arrival_rate"):
        func(0.5, -2.0, 0.1)
    with pytest.raises(ValueError, match="servers"):
        func(0.5, 1.0, 0.1, servers=np.array([1, 0]))


@pytest.mark.parametrize("func", [fcfs.wait_sf, fcfs.response_sf])
def test_bad_input_sf(func):
    with pytest.raises(ValueError, match="t must"):
        func(-1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="arrival_rate"):
        func(1.0, float("nan"), 0.1)
    with pytest.raises(ValueError, match="servers"):
        func(1.0, 1.0, 0.1, servers=1.5)


# ------------------------------------------------------------------------------------------
# Speed paths: the tabulated quadrature transform, the Irwin-Hall head with its density,
# and the Newton solver must agree with the direct computations they replace.

@pytest.mark.parametrize("scv", [0.1, 1.0, 4.0, 10.0])
def test_tabulated_transform_matches_direct_quadrature(scv):
    """Chebyshev panels in ln t along each Euler ray vs direct Gauss-Legendre quadrature
    at the same nodes, t / E[S] from 1e-6 to 1e6 (lognormal closed-form sf and a wrapped
    scipy gamma)."""
    from capacity._laplace import euler_nodes
    from capacity.fcfs import _numeric_tail_transform, _TransformTable
    m = 0.025
    t = m * np.exp(np.random.default_rng(7).uniform(np.log(1e-6), np.log(1e6), 200))
    s = euler_nodes(t)
    for svc in (Service.lognormal(m, scv), Service.from_scipy(stats.gamma(1 / scv, scale=m * scv))):
        table = _TransformTable(svc)
        direct = _numeric_tail_transform(svc, s)
        np.testing.assert_allclose(table(s), direct, rtol=1e-12, atol=0)


def test_lognormal_quadrature_closed_form_sf_matches_scipy():
    """The lognormal path evaluates sf and its 1e-17 quantiles in closed form; the same
    distribution wrapped from scipy goes through scipy.stats."""
    from capacity._laplace import euler_nodes
    from capacity.fcfs import _numeric_tail_transform
    scv, m = 3.0, 0.2
    sigma = math.sqrt(math.log1p(scv))
    wrapped = Service.from_scipy(stats.lognorm(sigma, scale=m * math.exp(-0.5 * sigma**2)))
    s = euler_nodes(m * np.logspace(-4, 4, 30))
    np.testing.assert_allclose(_numeric_tail_transform(Service.lognormal(m, scv), s),
                               _numeric_tail_transform(wrapped, s), rtol=1e-13)


def test_lognormal_sweep_equals_pointwise():
    """A 200-point sweep (tabulated transform) gives the quantiles of one-point calls
    (direct quadrature) to the inversion's accuracy."""
    svc = Service.lognormal(0.025, 4.0)
    rho = np.linspace(0.01, 0.99, 200)
    lam = rho / 0.025
    q = np.array(QS)
    sweep = fcfs.response_quantile(q, lam[:, None], svc)
    wsweep = fcfs.wait_quantile(q, lam[:, None], svc)
    for i in (0, 57, 120, 180, 199):
        np.testing.assert_allclose(sweep[i], fcfs.response_quantile(q, lam[i], svc), rtol=1e-8)
        np.testing.assert_allclose(wsweep[i], fcfs.wait_quantile(q, lam[i], svc), rtol=1e-8)


def test_irwin_hall_tail_and_density():
    """sf against the triangular (n = 2) closed form; density integrates to the cdf
    (scipy quad), n = 1..6."""
    from capacity.fcfs import _irwin_hall
    x = np.linspace(-0.5, 6.5, 57)
    sf, pdf = _irwin_hall(x)
    tri = np.where(x <= 0, 1.0, np.where(x <= 1, 1 - x**2 / 2, np.where(x <= 2, (2 - x)**2 / 2, 0.0)))
    np.testing.assert_allclose(sf[:, 1], tri, atol=1e-14)
    for n in range(1, 7):
        for xi in (0.3, 1.7, 2.5, 4.1, n - 0.2):
            val, _ = integrate.quad(lambda y: _irwin_hall(np.array([y]))[1][0, n - 1], 0.0, xi,
                                    points=[k for k in range(1, n + 1) if k < xi], epsabs=1e-13, limit=200)
            assert val == pytest.approx(1.0 - _irwin_hall(np.array([xi]))[0][0, n - 1], abs=1e-10)


@pytest.mark.parametrize("service", [Service.deterministic(1.0), Service.erlang(1.0, 4),
                                     Service.lognormal(1.0, 2.0), Service.hyperexponential(1.0, 4.0)])
def test_density_used_by_newton_is_the_derivative_of_the_tail(service):
    """The density inverted from the same transform values is -d/dt of the tail
    (central differences of the tail itself)."""
    from capacity.fcfs import _Model
    lam = 0.8
    model = _Model(np.full(5, lam), np.ones(5, dtype=np.int64), service, np.ones(5))
    t = np.array([0.4, 1.3, 2.6, 5.5, 11.0])
    h = 1e-4
    for func in (model.wait_sf_dens, model.response_sf_dens):
        _, dens = func(t)
        fd = (func(t - h)[0] - func(t + h)[0]) / (2 * h)
        np.testing.assert_allclose(dens, fd, rtol=1e-5, atol=1e-7)


def test_many_servers_at_low_load_have_no_nan():
    """P(wait) underflows to 0 with 2e5 servers at utilisation 0.0028: the tail must be 0, not 0/0.
    By hand: P(T > t) for M/M/c with C = 0 is the service tail exp(-t/E[S])."""
    assert fcfs.wait_sf(20.0, 1e5 / 180, 180.0, 200_000) == 0.0
    assert fcfs.response_sf(20.0, 1e5 / 180, 180.0, 200_000) == pytest.approx(math.exp(-20 / 180), rel=1e-12)
    assert fcfs.response_quantile(0.99, 1e5 / 180, 180.0, 200_000) == pytest.approx(180 * math.log(100), rel=1e-9)


def test_a_grid_in_chunks_gives_the_same_answers(monkeypatch):
    """Large grids are computed in chunks of points (a 10^6-point grid once took 9.7 GB at once;
    now 0.4 GB): a point's answer does not depend on the chunk it falls in (beyond the quantile
    solver's stopping tolerance: a batch iterates until its last point converges)."""
    import capacity.fcfs as fcfs_module

    lam = np.linspace(1.0, 30.0, 101)
    svc = Service.lognormal(0.025, 2.0)
    whole = fcfs.response_quantile(0.99, lam, svc)
    monkeypatch.setattr(fcfs_module, "_CHUNK_POINTS", 7)
    np.testing.assert_allclose(fcfs.response_quantile(0.99, lam, svc), whole, rtol=1e-9)
    np.testing.assert_array_equal(fcfs.response_sf(0.2, lam, svc),
                                  np.asarray(fcfs.response_sf(0.2, lam[None, :], svc)).ravel())


@pytest.mark.parametrize("service", [Service.deterministic(1.0), Service.gamma(1.0, 0.003)],
                         ids=["deterministic", "gamma-0.003"])
def test_every_quantile_of_a_dense_grid_solves_its_own_equation(service):
    """Over a 99 x 202 grid (rho 0.01-0.99, q 0.001-0.99999) each wait quantile w has
    P(W > w) = 1 - q, and the quantiles grow with q and with the load.  The batched Newton solver
    once returned exp(-1.5) times the root at a point whose iterate hit the root exactly (the
    M/D/1 p99.99 at rho 0.32: 0.97 instead of 4.36, only inside this grid)."""
    rho = np.linspace(0.01, 0.99, 99)[:, None]
    q = np.concatenate([np.linspace(0.001, 0.999, 200), [0.9999, 0.99999]])[None, :]
    w = np.asarray(fcfs.wait_quantile(q, rho, service))
    waits = np.broadcast_to(q > 1 - rho, w.shape)
    sf = np.asarray(fcfs.wait_sf(w, rho, service))
    # atol: the Euler inversion's ~1e-10 absolute noise (the solver's documented accuracy)
    np.testing.assert_allclose(sf[waits], np.broadcast_to(1 - q, w.shape)[waits], rtol=1e-6, atol=1e-10)
    assert np.all(np.diff(w, axis=0) >= -1e-12) and np.all(np.diff(w, axis=1) >= -1e-12)


@pytest.mark.parametrize("scv, c, rho", [(0.02, 2, 0.5), (1.5, 4, 0.8), (4.0, 16, 0.95), (25.0, 4, 0.6)])
def test_several_servers_lognormal_response_is_the_convolution_with_the_exponential_wait(scv, c, rho):
    """M/G/c FCFS with lognormal service: ``T = S + W``, W with its atom ``1 - C`` at 0 and the
    exponential tail ``C exp(-theta t)`` of the approximation; ``P(T > t) = P(S > t) +
    C int_0^t exp(-theta (t - s)) f_S(s) ds``, here by scipy's adaptive quadrature against
    scipy.stats.lognorm (independent of the Gauss-Legendre rule in the normal score that
    capacity.fcfs uses, which replaced a numerical Laplace transform of the law: 10x faster, and
    right at 1 - 1e-6 where the inversion's floor put the light-load p99.9999 35 % high)."""
    svc = Service.lognormal(1.0, scv)
    sigma = np.sqrt(np.log1p(scv))
    law = stats.lognorm(sigma, scale=np.exp(-0.5 * sigma ** 2))
    lam = rho * c
    p_wait = float(erlang_c(c, lam))
    theta = (c - lam) / (0.5 * (1.0 + scv))          # Allen-Cunneen: C / E[W]
    for t in np.asarray(fcfs.response_quantile([0.5, 0.9, 0.99, 0.999], lam, svc, c)):
        inner, _ = integrate.quad(lambda s: np.exp(-theta * (t - s)) * law.pdf(s), 0.0, t, limit=200,
                                  points=[law.median()] if law.median() < t else None, epsabs=1e-13)
        ref = law.sf(t) + p_wait * inner
        assert float(fcfs.response_sf(t, lam, svc, c)) == pytest.approx(ref, rel=1e-6, abs=1e-12)
    light = float(fcfs.response_quantile(1 - 1e-6, 0.05 * 16, svc, 16))    # nobody waits
    assert light == pytest.approx(float(law.ppf(1 - 1e-6)), rel=1e-4)


@pytest.mark.parametrize("scv, c, rho", [(0.01, 2, 0.3), (0.01, 16, 0.7), (0.3, 4, 0.9), (1.0 / 3, 8, 0.5),
                                         (3.0, 4, 0.8), (30.0, 64, 0.99)])
def test_several_servers_gamma_response_is_the_convolution_with_the_exponential_wait(scv, c, rho):
    """M/G/c FCFS with gamma (and Erlang: scv 1/3) service, the same law ``T = S + W`` as the
    lognormal case above, now in closed form (incomplete gamma, or Kummer's 1F1 where
    ``theta >= 1 / scale``), against scipy's adaptive quadrature of the convolution with
    scipy.stats.gamma.  The numerical Laplace inversion it replaced was right in the body but off
    in the far tail of nearly constant laws: at scv 0.01 on 2-16 cores P(T > t) at its own
    p99.99 and p99.9999 was off by factors up to 30 (the quantiles by up to 49 %)."""
    svc = Service.erlang(1.0, 3) if scv == 1.0 / 3 else Service.gamma(1.0, scv)
    law = stats.gamma(1.0 / scv, scale=scv)
    lam = rho * c
    p_wait = float(erlang_c(c, lam))
    theta = (c - lam) / (0.5 * (1.0 + scv))
    levels = [0.5, 0.9, 0.99, 0.999, 0.9999, 1 - 1e-6]
    for q, t in zip(levels, np.asarray(fcfs.response_quantile(levels, lam, svc, c))):
        pts = [p for p in (law.mean(), t - 1.0 / theta) if 0 < p < t]
        inner, _ = integrate.quad(lambda s: np.exp(-theta * (t - s)) * law.pdf(s), 0.0, t, limit=1000,
                                  points=pts or None, epsabs=0, epsrel=1e-12)
        ref = law.sf(t) + p_wait * inner
        assert ref == pytest.approx(1 - q, rel=1e-8), (q, t)
        assert float(fcfs.response_sf(t, lam, svc, c)) == pytest.approx(ref, rel=1e-8, abs=1e-15)
