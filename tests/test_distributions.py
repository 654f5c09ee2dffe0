"""Service-time distributions: moments, distribution functions, transforms.

References are independent of the implementation: numerical integration of
the survival function and of the density (scipy.integrate.quad), the
defining formulas of each family worked by hand, and sample moments.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from capacity import Service
from capacity.distributions import as_service

FAMILIES = {
    "deterministic": lambda m: Service.deterministic(m),
    "exponential": lambda m: Service.exponential(m),
    "erlang4": lambda m: Service.erlang(m, 4),
    "gamma0.5": lambda m: Service.gamma(m, 0.5),
    "lognormal1": lambda m: Service.lognormal(m, 1.0),
    "lognormal4": lambda m: Service.lognormal(m, 4.0),
    "hyperexp4": lambda m: Service.hyperexponential(m, 4.0),
    "hyperexp10": lambda m: Service.hyperexponential(m, 10.0),
}
EXPECTED_SCV = {"deterministic": 0.0, "exponential": 1.0, "erlang4": 0.25, "gamma0.5": 0.5,
                "lognormal1": 1.0, "lognormal4": 4.0, "hyperexp4": 4.0, "hyperexp10": 10.0}


@pytest.mark.parametrize("name", FAMILIES)
def test_mean_and_scv_are_what_was_asked(name):
    s = FAMILIES[name](0.025)
    assert s.mean == pytest.approx(0.025, rel=1e-12)
    assert s.scv == pytest.approx(EXPECTED_SCV[name], rel=1e-12, abs=1e-15)
    assert s.moment(2) == pytest.approx((1 + EXPECTED_SCV[name]) * 0.025**2, rel=1e-12)


@pytest.mark.parametrize("name", [n for n in FAMILIES if n != "deterministic"])
def test_moments_match_integrals_of_the_survival_function(name):
    # E[S^k] = k * int_0^inf x^(k-1) P(S > x) dx  (integration by parts)
    s = FAMILIES[name](1.0)
    for k in (1, 2, 3):
        val, _ = integrate.quad(lambda x: k * x ** (k - 1) * s.sf(x), 0, np.inf, limit=400)
        assert s.moment(k) == pytest.approx(val, rel=1e-6), k


def test_hyperexponential_by_hand():
    # Balanced means, scv 4: p = (1 + sqrt(3/5))/2, rates 2p and 2(1-p) for mean 1.
    s = Service.hyperexponential(1.0, 4.0)
    p = 0.5 * (1 + math.sqrt(3 / 5))
    r1, r2 = 2 * p, 2 * (1 - p)
    assert p / r1 == pytest.approx(0.5) and (1 - p) / r2 == pytest.approx(0.5)
    t = 1.7
    assert s.sf(t) == pytest.approx(p * math.exp(-r1 * t) + (1 - p) * math.exp(-r2 * t), rel=1e-14)
    assert s.moment(3) == pytest.approx(6 * (p / r1**3 + (1 - p) / r2**3), rel=1e-14)
    assert s.lst(0.3) == pytest.approx(p * r1 / (r1 + 0.3) + (1 - p) * r2 / (r2 + 0.3), rel=1e-14)


def test_lognormal_parameters_by_hand():
    # sigma^2 = ln(1 + scv), mu = ln(mean) - sigma^2/2; median = exp(mu).
    s = Service.lognormal(0.05, 3.0)
    sigma2 = math.log(4.0)
    assert s.ppf(0.5) == pytest.approx(math.exp(math.log(0.05) - sigma2 / 2), rel=1e-12)


def test_deterministic_step():
    s = Service.deterministic(0.011)
    assert s.cdf([0.0109, 0.011, 0.02]).tolist() == [0.0, 1.0, 1.0]
    assert s.sf(0.0109) == 1.0
    assert s.ppf(0.999) == 0.011
    assert s.lst(2.0) == pytest.approx(math.exp(-0.022))
    assert np.all(s.sample(5, 0) == 0.011)


@pytest.mark.parametrize("name", [n for n in FAMILIES if n != "deterministic"])
def test_ppf_inverts_cdf(name):
    s = FAMILIES[name](0.3)
    q = np.array([1e-6, 0.01, 0.5, 0.9, 0.99, 0.999, 0.999999])
    np.testing.assert_allclose(s.cdf(s.ppf(q)), q, rtol=1e-9)


@pytest.mark.parametrize("name", [n for n in FAMILIES if not n.startswith("lognormal")])
def test_lst_matches_numerical_integral(name):
    # E[exp(-s S)] = int exp(-s x) dF(x) = 1 - s int exp(-s x) P(S > x) dx
    s = FAMILIES[name](1.0)
    for z in (0.1, 1.0, 7.5):
        if s.family == "deterministic":
            ref = math.exp(-z)
        else:
            ref = 1 - z * integrate.quad(lambda x: math.exp(-z * x) * s.sf(x), 0, np.inf, limit=400)[0]
        assert s.lst(z) == pytest.approx(ref, rel=1e-7)


def test_lst_complex_argument_gamma():
    # Gamma(a, theta): E[exp(-sS)] = (1 + s theta)^(-a) also for complex s (principal branch).
    s = Service.gamma(2.0, 0.5)  # a = 2, theta = 1
    z = 0.4 + 3.0j
    assert s.lst(z) == pytest.approx((1 + z) ** -2, rel=1e-13)


def test_lognormal_has_no_closed_form_lst():
    s = Service.lognormal(1.0, 1.0)
    assert not s.has_lst
    with pytest.raises(NotImplementedError):
        s.lst(1.0)


@pytest.mark.parametrize("name", FAMILIES)
def test_samples_have_the_right_mean(name):
    s = FAMILIES[name](2.0)
    x = s.sample(200_000, rng=np.random.default_rng(7))
    # 5 standard errors: fails with probability < 1e-6 for a correct sampler.
    se = math.sqrt(s.variance / x.size)
    assert abs(x.mean() - 2.0) < 5 * se + 1e-12


def test_samples_follow_the_distribution():
    s = Service.hyperexponential(1.0, 10.0)
    x = s.sample(50_000, rng=123)
    assert stats.kstest(x, s.cdf).pvalue > 1e-4


def test_empirical():
    s = Service.empirical([0.01, 0.02, 0.02, 0.05])
    assert s.mean == pytest.approx(0.025)
    assert s.moment(2) == pytest.approx((0.0001 + 0.0004 * 2 + 0.0025) / 4)
    assert s.cdf(0.02) == 0.75
    assert s.sf(0.02) == 0.25
    assert s.ppf(0.5) == 0.02
    assert s.lst(10.0) == pytest.approx(np.mean(np.exp(-10 * np.array([0.01, 0.02, 0.02, 0.05]))))


def test_from_scipy():
    s = Service.from_scipy(stats.weibull_min(c=1.5, scale=0.02))
    assert s.mean == pytest.approx(0.02 * math.gamma(1 + 1 / 1.5), rel=1e-10)
    assert s.moment(2) == pytest.approx(0.02**2 * math.gamma(1 + 2 / 1.5), rel=1e-10)
    assert s.ppf(0.5) == pytest.approx(0.02 * math.log(2) ** (1 / 1.5), rel=1e-10)


def test_parameters_broadcast_like_scipy():
    s = Service.lognormal(np.array([0.01, 0.02, 0.04]), np.array([[1.0], [4.0]]))
    assert s.shape == (2, 3)
    assert np.shape(s.mean) == (2, 3)
    assert np.shape(s.cdf(0.02)) == (2, 3)
    assert s.sample(10, 0).shape == (10, 2, 3)
    e = Service.exponential([0.1, 0.2])._expand(1)
    assert e.shape == (2, 1)
    assert np.shape(e.lst(np.ones((2, 5)))) == (2, 5)


@settings(max_examples=60, deadline=None)
@given(mean=st.floats(1e-4, 10), scv=st.floats(1.0, 50))
def test_hyperexponential_moments_property(mean, scv):
    s = Service.hyperexponential(mean, scv)
    assert s.mean == pytest.approx(mean, rel=1e-10)
    assert s.scv == pytest.approx(scv, rel=1e-8)
    assert s.cdf(s.ppf(0.9)) == pytest.approx(0.9, rel=1e-9)


def test_bare_number_means_exponential():
    s = as_service(0.025)
    assert s.family == "exponential" and s.mean == 0.025


@pytest.mark.parametrize("call, name", [
    (lambda: Service.exponential(-1.0), "mean"),
    (lambda: Service.exponential(float("nan")), "mean"),
    (lambda: Service.gamma(1.0, 0.0), "scv"),
    (lambda: Service.hyperexponential(1.0, 0.5), "scv"),
    (lambda: Service.erlang(1.0, 2.5), "k"),
    (lambda: Service.lognormal(1.0, -2), "scv"),
    (lambda: Service.empirical([]), "samples"),
    (lambda: Service.empirical([0.1, -0.2]), "samples"),
    (lambda: Service.exponential(1.0).ppf(1.0), "q"),
    (lambda: Service.exponential(1.0).ppf(0.0), "q"),
    (lambda: Service.exponential(1.0).moment(0), "k"),
    (lambda: as_service(-3), "service"),
    (lambda: as_service("fast"), "service"),
    (lambda: Service.exponential(True), "mean"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------------- Service.from_moments: the one rule


@pytest.mark.parametrize("scv, family", [(0.0, "deterministic"), (1.0, "exponential"), (0.04, "gamma"),
                                         (0.9999, "gamma"), (1.0001, "lognormal"), (25.0, "lognormal")])
def test_from_moments_picks_the_family_by_the_scv(scv, family):
    s = Service.from_moments(0.025, scv)
    assert s.family == family
    # Whatever the law, it keeps both moments it was given.
    assert s.mean == pytest.approx(0.025, rel=1e-15)
    assert s.scv == pytest.approx(scv, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("family, scv", [("gamma", 3.0), ("lognormal", 0.2), ("hyperexponential", 4.0),
                                         ("erlang", 0.25), ("exponential", 1.0), ("deterministic", 0.0)])
def test_from_moments_with_a_family_is_that_constructor(family, scv):
    s = Service.from_moments(0.02, scv, family=family)
    direct = {"erlang": lambda: Service.erlang(0.02, round(1 / scv)),
              "exponential": lambda: Service.exponential(0.02),
              "deterministic": lambda: Service.deterministic(0.02)}.get(family,
                                                                        lambda: getattr(Service, family)(0.02, scv))()
    assert s.family == direct.family
    t = np.array([0.001, 0.02, 0.1])
    np.testing.assert_array_equal(s.sf(t), direct.sf(t))


def test_from_moments_broadcasts_arrays_on_one_side_of_one():
    s = Service.from_moments(0.01, np.array([0.1, 0.5, 1.0]))
    assert s.family == "gamma" and s.shape == (3,)
    np.testing.assert_allclose(s.scv, [0.1, 0.5, 1.0], rtol=1e-15)
    assert Service.from_moments(np.array([0.01, 0.02]), 4.0).family == "lognormal"


@pytest.mark.parametrize("kwargs, match", [
    (dict(mean=0.01, scv=np.array([0.5, 2.0])), "both sides of 1.*family="),
    (dict(mean=0.01, scv=-0.1), "scv must be non-negative"),
    (dict(mean=0.01, scv=float("inf")), "scv must be non-negative and finite"),
    (dict(mean=0.0, scv=1.0), "mean must be positive"),
    (dict(mean=0.01, scv=2.0, family="exponential"), "scv must be 1 for the exponential"),
    (dict(mean=0.01, scv=0.5, family="deterministic"), "scv must be 0 for the deterministic"),
    (dict(mean=0.01, scv=0.3, family="erlang"), "1/k for an integer k"),
    (dict(mean=0.01, scv=0.5, family="hyperexponential"), "scv must be >= 1"),
    (dict(mean=0.01, scv=0.0, family="gamma"), "scv must be > 0 for the gamma"),
    (dict(mean=0.01, scv=1.0, family="weibull"), "family must be one of"),
])
def test_from_moments_refuses_what_no_law_of_the_family_has(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Service.from_moments(**kwargs)


# ---------------------------------------------------------------------- closed forms vs scipy.stats
def _law(family: str, mean: float, scv: float, k: int) -> Service:
    return {"exponential": lambda: Service.exponential(mean), "erlang": lambda: Service.erlang(mean, k),
            "gamma": lambda: Service.gamma(mean, scv), "lognormal": lambda: Service.lognormal(mean, scv)}[family]()


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from(["exponential", "erlang", "gamma", "lognormal"]),
       log_mean=st.floats(-4, 2), log_scv=st.floats(-3, 1.7), k=st.integers(1, 300),
       t_over_mean=st.floats(1e-3, 100.0), q=st.floats(1e-12, 1 - 1e-12))
def test_closed_forms_are_scipy_stats(family, log_mean, log_scv, k, t_over_mean, q):
    """cdf, sf and ppf of these families come from scipy.special directly (the first queue answer
    of a process no longer imports scipy.stats); they must be scipy.stats's own values."""
    svc = _law(family, 10 ** log_mean, 10 ** log_scv, k)
    frozen = svc._frozen
    t = np.array([-1.0, 0.0, t_over_mean * 10 ** log_mean])
    for ours, ref in ((svc.cdf(t), frozen.cdf(t)), (svc.sf(t), frozen.sf(t)),
                      (svc.ppf(q), frozen.ppf(q))):
        np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=0.0)


def test_a_fresh_process_answers_without_importing_scipy_stats():
    """scipy.stats takes about half a second to import; the queue formulas' first answers in a
    fresh process (a CLI call, a planning script) must not need it."""
    import subprocess
    import sys

    code = ("import sys; from capacity import ps, fcfs, rr, Service; "
            "ps.response_quantile(0.99, 20.0, Service.lognormal(0.025, 2.0)); "
            "fcfs.response_quantile(0.99, 20.0, Service.gamma(0.025, 2.0)); "
            "rr.response_quantile(0.99, 20.0, Service.gamma(0.025, 0.5), slices=4); "
            "print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
