"""Tests of capacity.fit.from_percentiles (issue 4, sections 1, 5, 6, 7).

References used:
* synthetic truth: seeded simulations of the queue (capacity.sim, exact request-by-request
  simulators, validated in tests/test_sim.py) with a known service distribution; the fit must
  recover the known mean CPU cost within 3 % and predict the p99 at a held-out utilisation 0.9
  within 10 % (the issue's targets).  The held-out reference is the exact M/G/1 quantile at the
  TRUE service (Pollaczek-Khinchine transform, validated in tests/test_fcfs.py against
  simulation) and, for one case, a long simulation at utilisation 0.9.
* Monte Carlo (10^6 draws) for the lognormal-delay convolution.
* the seed article 000 numbers, read from data/incident_facts.toml.
"""
from __future__ import annotations

import math
import pathlib
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
import warnings

import numpy as np
import pytest

from capacity import Service, fcfs, ps
from capacity.exceptions import FitWarning, IdentifiabilityWarning
from capacity.fit import PercentileFit, from_percentiles
from capacity.fit._model import lognormal_delay_quantiles
from capacity.sim import simulate

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
QS = np.array([0.5, 0.9, 0.99, 0.999])
MEAN = 0.05          # 50 ms of CPU per request


def _observe(service, rhos, discipline="fcfs", n=1_000_000, delay=0.0, qs=QS, seed=100):
    """Empirical percentiles of seeded simulations at each utilisation (one record each)."""
    recs = []
    for i, rho in enumerate(rhos):
        lam = rho / service.mean
        sim = simulate(lam, service, discipline, horizon=n / lam, seed=seed + i)
        r = sim.requests["response"].to_numpy()
        r = r + delay
        recs.append({"percentiles": dict(zip(qs.tolist(), np.quantile(r, qs).tolist())),
                     "arrival_rate": lam, "n_requests": r.size})
    return recs


def _quiet(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = from_percentiles(*args, **kwargs)
    return res, caught


# ---------------------------------------------------------------------- synthetic truth, FCFS (exact model)
@pytest.mark.parametrize("family,scv,delay", [
    ("lognormal", 0.5, 0.0),
    ("lognormal", 2.0, 0.0),
    ("lognormal", 5.0, 0.0),
    ("gamma", 1.0, 0.0),
    ("lognormal", 2.0, 0.03),
    ("gamma", 1.0, 0.03),
])
def test_fcfs_recovers_cost_and_predicts_held_out_p99(family, scv, delay):
    # Truth: M/G/1 FCFS with E[S] = 50 ms, observed at utilisation 0.3, 0.6 and 0.8
    # (10^6 simulated requests each), plus a constant 30 ms IO delay in two cases.
    svc = getattr(Service, family)(MEAN, scv)
    recs = _observe(svc, [0.3, 0.6, 0.8], delay=delay)
    res, caught = _quiet(recs, discipline="fcfs", family=family, delay="constant" if delay else None)
    assert isinstance(res, PercentileFit)
    assert abs(res.cpu_per_request_ / MEAN - 1) < 0.03
    lam = 0.9 / MEAN
    exact = fcfs.response_quantile(0.99, lam, svc) + delay
    assert abs(res.predict(0.99, lam) / exact - 1) < 0.10
    if delay:
        assert abs(res.delay_ - delay) < 0.1 * delay
    # The model is exact here: the residuals are sampling noise only (up to ~6 % RMS at scv 5,
    # where the p99.9 at utilisation 0.8 rests on a few long busy periods).
    assert res.fit_quality_["rms_rel_error"] < 0.08
    lo, hi = res.summary.loc["cpu_per_request", ["lower", "upper"]]
    assert lo < res.cpu_per_request_ < hi
    assert not [w for w in caught if issubclass(w.category, FitWarning)]


def test_held_out_p99_against_simulation():
    # Independent reference at the held-out load: a 4e6-request simulation at utilisation 0.9
    # (lognormal scv 2; batch-to-batch spread of its p99 is a few %, see the seeds study in
    # the report).
    svc = Service.lognormal(MEAN, 2.0)
    res, _ = _quiet(_observe(svc, [0.3, 0.6, 0.8], n=500_000), discipline="fcfs")
    lam = 0.9 / MEAN
    sim = simulate(lam, svc, "fcfs", horizon=4e6 / lam, seed=3, keep="requests",
                   max_memory="2GB").requests["response"].to_numpy()  # 4e6 rows: over the default 1 GB
    assert abs(res.predict(0.99, lam) / np.quantile(sim, 0.99) - 1) < 0.10


def test_single_load_fit_exact_percentiles():
    # Percentiles computed by the exact model itself are fitted back to ~1e-6 (a consistency
    # check of the optimiser, not of the model).
    svc = Service.gamma(0.02, 3.0)
    obs = dict(zip(QS.tolist(), fcfs.response_quantile(QS, 30.0, svc)))
    res = from_percentiles(obs, 30.0, discipline="fcfs", family="gamma")
    assert res.cpu_per_request_ == pytest.approx(0.02, rel=1e-4)
    assert res.scv_ == pytest.approx(3.0, rel=1e-3)
    assert res.capacity_qps_ == pytest.approx(50.0, rel=1e-4)


# ---------------------------------------------------------------------- PS, where the PS model is exact
def test_ps_exponential_recovers_cost():
    # M/M/1-PS simulation (exact PS engine) at utilisation 0.3 and 0.7; the PS response-time
    # distribution for exponential service is exact in capacity.ps.
    svc = Service.exponential(MEAN)
    qs = np.array([0.5, 0.9, 0.99])
    res, caught = _quiet(_observe(svc, [0.3, 0.7], "ps", n=300_000, qs=qs, seed=10), family="exponential")
    assert abs(res.cpu_per_request_ / MEAN - 1) < 0.03
    lam = 0.9 / MEAN
    assert abs(res.predict(0.99, lam) / ps.response_quantile(0.99, lam, svc) - 1) < 0.10
    assert not caught


@pytest.mark.slow
def test_ps_hyperexponential_recovers_cost_and_scv():
    # Hyperexponential service is phase-type, so capacity.ps is exact for it.  Slow path
    # (~10 s): PS quantiles of non-exponential service cost ~0.15 s per point, so two
    # percentiles at two loads (4 points for 2 parameters).
    svc = Service.hyperexponential(MEAN, 3.0)
    qs = np.array([0.5, 0.99])
    res, _ = _quiet(_observe(svc, [0.3, 0.7], "ps", n=300_000, qs=qs, seed=10), family="hyperexponential")
    assert abs(res.cpu_per_request_ / MEAN - 1) < 0.03
    assert abs(res.scv_ / 3.0 - 1) < 0.15
    lam = 0.9 / MEAN
    assert abs(res.predict(0.99, lam) / ps.response_quantile(0.99, lam, svc) - 1) < 0.10


# ---------------------------------------------------------------------- delay models
def test_lognormal_delay_convolution_matches_monte_carlo():
    # M/M/1 FCFS response is exponential with rate mu - lambda (textbook); add an independent
    # lognormal delay and compare quantiles with 10^6 Monte Carlo draws (std error < 0.5 %).
    lam, m = 8.0, 0.05
    rng = np.random.default_rng(5)
    t = rng.exponential(1 / (1 / m - lam), 1_000_000)
    dsvc = Service.lognormal(0.03, 1.5)
    d = dsvc.sample(1_000_000, rng)
    qs = np.array([0.5, 0.9, 0.99])
    mc = np.quantile(t + d, qs)
    svc = Service.exponential(np.array([[m]]))
    got = lognormal_delay_quantiles("fcfs", qs, np.full(3, lam), np.ones(3, dtype=np.int64), svc,
                                    np.array([[0.03]]), np.array([[1.5]]), 1e-4, 30.0)[0]
    np.testing.assert_allclose(got, mc, rtol=0.01)


@pytest.mark.slow
def test_lognormal_delay_fit_recovers_cost():
    # FCFS lognormal scv 1 CPU plus an independent lognormal IO delay (mean 20 ms, scv 0.5),
    # observed at three loads.
    svc = Service.lognormal(MEAN, 1.0)
    dsvc = Service.lognormal(0.02, 0.5)
    rng = np.random.default_rng(11)
    recs = []
    for i, rho in enumerate([0.3, 0.6, 0.8]):
        lam = rho / MEAN
        r = simulate(lam, svc, "fcfs", horizon=200_000 / lam, seed=20 + i).requests["response"].to_numpy()
        r = r + dsvc.sample(r.size, rng)
        recs.append({"percentiles": dict(zip(QS.tolist(), np.quantile(r, QS))), "arrival_rate": lam})
    res, caught = _quiet(recs, discipline="fcfs", delay="lognormal")
    assert abs(res.cpu_per_request_ / MEAN - 1) < 0.03
    assert isinstance(res.delay_, Service)
    assert abs(res.delay_.mean / 0.02 - 1) < 0.25
    # The delay's spread hides under the queue's (scv >= 1): the fit must say it is not identified.
    assert any(issubclass(w.category, IdentifiabilityWarning) and "log_delay_scv" in str(w.message)
               for w in caught)


def test_utilization_holds_the_mean():
    # Utilisation law (Lazowska et al. 1984, sec. 3.2): E[S] = U servers / lambda.
    svc = Service.lognormal(0.025, 1.0)
    obs = dict(zip(QS.tolist(), ps.response_quantile(QS, 8.0, Service.exponential(0.025))))
    res, _ = _quiet(obs, 8.0, family="exponential", utilization=0.2)
    assert res.cpu_per_request_ == pytest.approx(0.2 / 8.0)
    assert res.summary.loc["cpu_per_request", "note"].startswith("from the utilisation law")
    del svc


# ---------------------------------------------------------------------- identifiability and honesty
def test_low_load_cannot_separate_cpu_from_io():
    # At utilisation 0.02 the queue adds almost nothing and a nearly constant CPU time
    # (lognormal scv 0.05) makes the response ~ E[S] + d: only the sum is identified, the split
    # between CPU and IO is not (the example).  Reference: hand reasoning; the
    # sensitivity must exceed the factor-2 threshold for the mean.
    svc = Service.lognormal(0.01, 0.05)
    qs = [0.5, 0.9, 0.99]
    obs = dict(zip(qs, fcfs.response_quantile(qs, 2.0, svc) + 0.03))
    res, caught = _quiet(obs, 2.0, discipline="fcfs", delay="constant")
    assert any(issubclass(w.category, IdentifiabilityWarning) and "log_mean" in str(w.message)
               for w in caught)
    assert res.sensitivity_["log_mean"] > 2.0
    # ... while a three-percentile shifted lognormal with scv 1 IS identified at 1 % precision.
    svc = Service.lognormal(0.01, 1.0)
    obs = dict(zip(qs, fcfs.response_quantile(qs, 2.0, svc) + 0.03))
    res, caught = _quiet(obs, 2.0, discipline="fcfs", delay="constant")
    assert res.sensitivity_["log_mean"] < 2.0
    assert not any(issubclass(w.category, IdentifiabilityWarning) for w in caught)


def test_only_p50_with_delay_is_too_few_points():
    with pytest.raises(ValueError, match="percentiles.*cannot identify"):
        from_percentiles({0.5: 0.045}, 8.0, delay="constant")


def test_no_intervals_without_n_requests():
    obs = dict(zip(QS.tolist(), fcfs.response_quantile(QS, 8.0, Service.lognormal(0.05, 2.0))))
    res = from_percentiles(obs, 8.0, discipline="fcfs")
    assert res.summary[["lower", "upper"]].isna().all().all()
    assert "no intervals" in res.method
    assert res.covariance_ is None


def test_misfit_is_reported():
    # Percentiles no M/G/1 with lognormal service can produce at this load (p99.9 = 100 x p50 at
    # utilisation 0.1 with a pinned mean): the fit must warn, not return a silent number.
    _, caught = _quiet({0.5: 0.01, 0.9: 0.011, 0.99: 0.012, 0.999: 1.0}, 10.0, discipline="fcfs",
                       utilization=0.1)
    assert any(issubclass(w.category, FitWarning) and "large residuals" in str(w.message) for w in caught)


def test_summary_and_print(capsys):
    obs = dict(zip(QS.tolist(), fcfs.response_quantile(QS, 8.0, Service.lognormal(0.05, 2.0))))
    res = from_percentiles(obs, 8.0, discipline="fcfs", n_requests=10_000)
    res.print_summary()
    out = capsys.readouterr().out
    assert "observed vs model" in out and "cpu_per_request" in out
    assert list(res.comparison_["q"]) == QS.tolist()
    assert res.predict([0.5, 0.99], 8.0).shape == (2,)


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,match", [
    (dict(percentiles={0.5: 0.1, 0.9: 0.05}, arrival_rate=8.0), "must not decrease"),
    (dict(percentiles={1.0: 0.1}, arrival_rate=8.0), "strictly between 0 and 1"),
    (dict(percentiles={0.0: 0.1}, arrival_rate=8.0), "strictly between 0 and 1"),
    (dict(percentiles={0.5: -0.1, 0.9: 0.2}, arrival_rate=8.0), "latencies must be positive"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, utilization=1.5), "utilization"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, utilization=0.0), "utilization"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=-1.0), "arrival_rate"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}), "arrival_rate"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, delay="constant"),
     "percentiles.*cannot identify"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, discipline="lifo"), "discipline"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, family="weibull"), "family"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, n_requests=0), "n_requests"),
    (dict(percentiles={0.5: 0.05, 0.9: 0.1}, arrival_rate=8.0, delay=0.07), "delay"),
    (dict(percentiles={}, arrival_rate=8.0), "percentiles"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        from_percentiles(**kwargs)


# ---------------------------------------------------------------------- seed article 000 (worked example)
def _facts():
    with open(DATA / "incident_facts.toml", "rb") as f:
        doc = tomllib.load(f)
    return {x["id"]: x for x in doc["fact"]}


def test_incident_seed_ceiling_explains_the_67_qps_collapse():
    """First seed: 40-50 ms normal latency, process CPU 16-25 %, 6-10 QPS, 67 QPS peak second.

    Model: one Node process on one core, FCFS -- the article's own blocking experiment shows
    that unbroken CPU blocks are served one after another -- plus a constant non-CPU delay;
    percentiles p50 = 45 ms (middle of "40-50 ms") and p99.5 = 100 ms ("99.5 % within
    100 ms"); the mean is held by the utilisation law.  Over the readings of the ranges
    (16 % at 10 QPS ... 25 % at 6 QPS) the CPU cost is 16-42 ms and the 100 % CPU ceiling
    24-62.5 QPS: below 67 QPS for every reading, so the 67 QPS second overloads the process
    whatever the exact numbers, while 20 QPS stays below every ceiling.  At a steady 20 QPS
    the fitted model gives a p99 below 1 s for every reading: the article's 1-3 s at 20 QPS
    is not a steady-state effect of that cost (it needs the 20 requests to arrive together
    AND cost >= 50 ms each, 20 x E[S] >= 1 s -- dearer than the CPU figures allow).
    The extreme reading (25 % at 6 QPS, 42 ms) cannot produce a 45 ms median at all: the fit
    says so (large residuals).  What the data cannot identify: the CPU-time spread and the
    CPU/IO split rest on two percentiles, exactly determined, with no check of fit.
    """
    f = _facts()
    u_lo, u_hi = f["process_cpu"]["low"], f["process_cpu"]["high"]
    q_lo, q_hi = f["daily_qps"]["low"], f["daily_qps"]["high"]
    peak = f["peak_qps"]["value"]
    burst = f["burst_qps_each_minute"]["value"]
    lat = (f["normal_latency"]["low"] + f["normal_latency"]["high"]) / 2
    under = f["fraction_under_100ms"]
    obs = {0.5: lat, under["value"]: under["threshold_s"]}
    ceilings, p99_at_burst, misfit = [], [], []
    for u, lam in [(u_lo, q_hi), (u_hi, q_lo), ((u_lo + u_hi) / 2, (q_lo + q_hi) / 2)]:
        res, caught = _quiet(obs, lam, discipline="fcfs", utilization=u, delay="constant")
        assert res.cpu_per_request_ == pytest.approx(u / lam)
        ceilings.append(res.capacity_qps_)
        p99_at_burst.append(res.predict(0.99, burst))
        misfit.append(any("large residuals" in str(w.message) for w in caught))
    assert math.isclose(min(ceilings), q_lo / u_hi) and math.isclose(max(ceilings), q_hi / u_lo)
    assert max(ceilings) < peak                      # 67 QPS is beyond 100 % CPU in every reading
    assert min(ceilings) > burst                     # 20 QPS is not
    assert max(p99_at_burst) < f["slow_batch_each_minute"]["low"]   # steady 20 QPS: p99 < 1 s
    assert misfit == [False, True, False]


def test_ceiling_under_an_slo():
    # The SLO ceiling (capacity.plan.qps_ceiling on the fitted service) lies below the 100 % CPU
    # ceiling, and the fitted model's p99 at that rate sits on the SLO threshold.
    obs = dict(zip(QS.tolist(), fcfs.response_quantile(QS, 8.0, Service.lognormal(0.05, 2.0))))
    res = from_percentiles(obs, 8.0, discipline="fcfs")
    ceiling = res.ceiling({0.99: 1.0})
    assert 8.0 < ceiling.qps < res.capacity_qps_
    assert res.predict(0.99, ceiling.qps) == pytest.approx(1.0, rel=1e-3)


def test_unidentified_parameter_gets_an_infinite_bound_not_an_overflow():
    """Dashboard percentiles at one low load cannot pin a gamma scv with a free delay: the interval
    must come back open-ended (and the fit must warn), not raise OverflowError (regression)."""
    obs = {0.5: 0.045, 0.9: 0.08, 0.99: 0.3, 0.999: 0.9}
    with pytest.warns(UserWarning) as record:  # every capacity warning, so none leaks
        res = from_percentiles(obs, 8.0, discipline="fcfs", family="gamma", delay="constant",
                               n_requests=28_800)
    kinds = {w.category for w in record}
    assert IdentifiabilityWarning in kinds and FitWarning in kinds  # unidentified, and a poor fit
    lower, upper = res.summary.loc["scv", ["lower", "upper"]]
    assert lower <= res.scv_ <= upper
    assert np.isfinite(res.cpu_per_request_) and res.cpu_per_request_ > 0


# ---------------------------------------------------------------------- nearly constant CPU (issue 14)
def test_a_fixed_work_handler_is_reached_by_the_default_fit():
    """A fixed-work handler (gamma CPU, scv 0.03) behind an event loop, simulated exactly (PS) at
    utilisation 0.3 and 0.6: the default fit (model chosen by QAIC, nothing given) can reach
    near-constant CPU -- its search range once stopped at scv 0.57 for lognormal and 0.085 for
    gamma -- so it recovers the CPU per request and predicts the p99 at utilisation 0.8 from the
    two lighter loads.  References: the simulation's own truth (E[S] = 10 ms) and a third seeded
    run at 0.8 with its 99 % interval (plus 5 %: the fit's percentiles carry sampling noise)."""
    svc = Service.gamma(0.01, 0.03)
    days = []
    for rho, seed in ((0.3, 31), (0.6, 32)):
        run = simulate(rho / 0.01, svc, discipline="ps", horizon=2e4, seed=seed)
        days.append({"percentiles": {q: run.confidence_interval(q, batches=30, warmup=200).estimate
                                     for q in (0.5, 0.9, 0.99)},
                     "arrival_rate": rho / 0.01, "utilization": rho})
    res, _ = _quiet(days)
    assert res.discipline == "ps"
    assert res.scv_ < 0.08       # below both old floors (measured: 0.028, from p50/p90/p99 at two loads)
    assert res.cpu_per_request_ == pytest.approx(0.01, rel=0.01)
    peak = simulate(80.0, svc, discipline="ps", horizon=2e4, seed=33)
    ci = peak.confidence_interval(0.99, level=0.99, batches=30, warmup=200)
    assert abs(res.predict(0.99, 80.0) - ci.estimate) <= ci.half_width + 0.05 * ci.estimate
