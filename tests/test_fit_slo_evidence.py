"""A ceiling checked against its own data counts a window as "the SLO held" only beyond noise.

References: the exact binomial distribution function (scipy.stats.binom, independent of the beta
form the bound is computed with); counts drawn with numpy's seeded binomial and beta-binomial
generators, whose variance inflation is known; seeded simulations of an M/G/1 FCFS queue
(capacity.simulate) cut into one-minute Prometheus-style histograms, with the exact share of
requests over the SLO time (capacity.fcfs.response_sf) as the truth the contradiction is judged by;
hypothesis properties.
"""
from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from capacity import Service, fcfs, simulate
from capacity.fit import from_histograms, from_percentiles
from capacity.fit._slo_evidence import local_dispersion, share_upper_bound, slo_held
from capacity.plan import qps_ceiling

LE = [0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.5]
SVC = Service.lognormal(0.02, 1.0)          # the issue's FCFS service: 20 ms CPU
SLO = {0.99: 0.2}
RATES = [5.0, 10.0, 15.0, 20.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]


def _minute_windows(seed: int, minutes: int = 30) -> list[dict]:
    """Half an hour at each rate of RATES, one histogram per minute (after a minute of warm-up)."""
    out = []
    for i, rate in enumerate(RATES):
        req = simulate(rate, SVC, discipline="fcfs", horizon=60.0 * (minutes + 1), seed=seed + i).requests
        req = req[req["arrival"] > 60.0]
        minute = ((req["arrival"].to_numpy() - 60.0) // 60.0).astype(int)
        t = req["response"].to_numpy()
        for k in range(minutes):
            cum = np.searchsorted(np.sort(t[minute == k]), LE, side="right").astype(float)
            out.append({"buckets": dict(zip([*LE, math.inf], [*cum, float(np.sum(minute == k))])),
                        "arrival_rate": rate})
    return out


def _claimed_rate(note: str) -> float:
    return float(re.match(r"this contradicts the data: at ([\d.,]+)", note).group(1).replace(",", ""))


# ---------------------------------------------------------------------- the bound
@pytest.mark.parametrize("k,n,level", [(0, 50, 0.95), (3, 200, 0.9), (17, 1800, 0.95), (120, 9000, 0.999)])
def test_upper_bound_is_the_exact_clopper_pearson_one(k, n, level):
    """u solves P(Binomial(n, u) <= k) = 1 - level, checked with the binomial distribution itself."""
    u = float(share_upper_bound(k, n, level))
    assert stats.binom.cdf(k, n, u) == pytest.approx(1.0 - level, rel=1e-6)
    assert u > k / n


def test_the_issues_window_is_not_evidence_and_a_clear_one_is():
    """1,800 requests with 17 over 200 ms (0.94 %) do not show p99 <= 200 ms (bound 1.4 %); with
    2 over they do.  A deflation c counts n / c requests: k = 20 of 2,000 with c = 4 is k = 5 of 500."""
    assert float(share_upper_bound(17, 1800, 0.95)) == pytest.approx(0.0141, abs=1e-4)
    assert slo_held([30.0], [[17.0]], [1800.0], [0.01], 0.95).windows.size == 0
    assert slo_held([30.0], [[2.0]], [1800.0], [0.01], 0.95).windows.tolist() == [1]
    assert float(share_upper_bound(20, 2000, 0.95, 4.0)) == pytest.approx(float(share_upper_bound(5, 500, 0.95)))
    assert float(share_upper_bound(2000, 2000, 0.95)) == 1.0


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 50.0), st.integers(1, 20000), st.floats(0.0, 1.0), st.floats(1.0, 20.0)),
                min_size=1, max_size=10),
       st.integers(0, 9), st.floats(0.0, 1.0), st.sampled_from([0.9, 0.95, 0.99]))
def test_fewer_slow_requests_never_undo_held(rows, which, cut, level):
    """Lowering one window's count of slow requests (dispersions held) keeps every group that
    held, and lowers no bound."""
    lam, n, share, c = (np.array(x, dtype=float) for x in zip(*rows))
    k = np.floor(n * share * 0.03)
    fewer = k.copy()
    fewer[which % k.size] = np.floor(fewer[which % k.size] * cut)
    before = slo_held(lam, k[:, None], n, [0.01], level, c[:, None])
    after = slo_held(lam, fewer[:, None], n, [0.01], level, c[:, None])
    groups = (lambda e: {(int(s), int(w)) for s, w in zip(e.start, e.windows)})
    assert groups(before) <= groups(after)
    assert before.n_tests == after.n_tests
    assert np.all(share_upper_bound(fewer, n, level, c) <= share_upper_bound(k, n, level, c) + 1e-12)


def test_local_dispersion_measures_known_inflation():
    """Binomial counts (inflation 1) and beta-binomial ones with intra-class correlation r
    (inflation 1 + (n - 1) r = 10.99 at n = 1000, r = 0.01), 400 windows over a spread of loads
    (the share grows with the load, so the figure may only overstate): the median over windows
    within 25 % of the truth."""
    rng = np.random.default_rng(2027)
    lam = np.repeat(np.linspace(10.0, 30.0, 40), 10)
    p = 0.002 + 0.0004 * (lam - 10.0)
    n = np.full(lam.size, 1000.0)
    plain = rng.binomial(1000, p).astype(float)
    r = 0.01
    a, b = p * (1 - r) / r, (1 - p) * (1 - r) / r
    clustered = rng.binomial(1000, rng.beta(a, b)).astype(float)
    assert np.median(local_dispersion(lam, plain, n)) == pytest.approx(1.0, rel=0.25)
    assert np.median(local_dispersion(lam, clustered, n)) == pytest.approx(1 + 999 * r, rel=0.25)
    assert np.isnan(local_dispersion(lam[:5], plain[:5], n[:5])).all()       # too few to measure


# ---------------------------------------------------------------------- the fits
@pytest.mark.parametrize("seed", [0, 100, 200])
def test_minutes_that_met_the_slo_by_chance_raise_no_contradiction(seed):
    """The issue's case: FCFS, 20 ms lognormal CPU, a day of one-minute histograms at 5-34 QPS.
    The exact p99 is 257 ms at 30 QPS (2.4 % over 200 ms) and the ceiling for p99 <= 200 ms is
    24 QPS; the fit finds it within 3 %.  Above it, some minutes had at most 1 % over 200 ms by
    chance (the old check took any of them for the SLO met and said the ceiling contradicts the
    data); at every such rate the exact share is over 1 %.  Now no contradiction is said."""
    windows = _minute_windows(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_histograms(windows, discipline="fcfs", family="lognormal", delay=None)
    c = fit.ceiling(SLO)
    truth = qps_ceiling(SVC, 1, SLO, discipline="fcfs").qps
    assert c.qps == pytest.approx(truth, rel=0.03)
    at = fit.comparison_[(fit.comparison_["le"] == 0.2) & (fit.comparison_["arrival_rate"] > c.qps)]
    lucky = at[at["observed_share_above"] <= 0.01]
    assert len(lucky) >= 5
    assert np.all(fcfs.response_sf(0.2, lucky["arrival_rate"].to_numpy(), SVC) > 0.01)
    assert c.contradictions == ()


@pytest.mark.parametrize("seed", [0, 100])
def test_a_ceiling_the_minutes_refute_is_still_said(seed):
    """The same days fitted with the CPU's scv held at 4 (the truth is 1): the model puts the
    ceiling below 9 QPS, where the queue meets p99 <= 200 ms up to 24 QPS.  The minutes, pooled
    with those next in load, show it with 95 % confidence: the contradiction is said, at a load
    where the exact share over 200 ms is indeed within 1 %."""
    windows = _minute_windows(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrong = from_histograms(windows, discipline="fcfs", family="lognormal", delay=None, scv=4.0)
    c = wrong.ceiling(SLO)
    assert c.qps < 9.0 and len(c.contradictions) == 1
    note = c.contradictions[0]
    assert "with 95 % confidence" in note and "by the windows nearest in load" in note
    rate = _claimed_rate(note)
    assert c.qps < rate and float(fcfs.response_sf(0.2, rate, SVC)) < 0.01


def _exact_percentiles(qs, n: bool):
    rates = [10.0, 15.0, 20.0]
    recs = [{"percentiles": dict(zip(qs, map(float, fcfs.response_quantile(qs, r, SVC)))), "arrival_rate": r}
            for r in rates]
    return [{**r, "n_requests": 3600 * r["arrival_rate"]} if n else r for r in recs]


def test_percentiles_with_counts_need_a_higher_percentile_to_show_the_slo():
    """Exact percentiles of the queue at 10-20 QPS, an hour each, fitted with scv 4 held: the
    ceiling for p99 <= 250 ms falls below 10 QPS.  With n_requests and p99.9 (236 ms at 10 QPS,
    under 250 ms: at most 36 of 36,000 requests slower) the SLO's holding at 10 QPS is shown with
    95 % confidence.  From p50/p90/p99 alone it cannot be (a sample p99 under the SLO time leaves
    up to 1 % slower), so nothing is said; without n_requests the note says what was seen, one
    observation that met the SLO, and that how sure it is cannot be said."""
    slo = {0.99: 0.25}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = from_percentiles(_exact_percentiles([0.5, 0.9, 0.99, 0.999], True), discipline="fcfs",
                                family="lognormal", delay=None, scv=4.0)
        short = from_percentiles(_exact_percentiles([0.5, 0.9, 0.99], True), discipline="fcfs",
                                 family="lognormal", delay=None, scv=4.0)
        blind = from_percentiles(_exact_percentiles([0.5, 0.9, 0.99], False), discipline="fcfs",
                                 family="lognormal", delay=None, scv=4.0)
    c = full.ceiling(slo)
    assert c.qps < 10.0 and len(c.contradictions) == 1
    assert c.contradictions[0].startswith("this contradicts the data: at 10 QPS the observation of 36,000 requests "
                                          "met the SLO with 95 % confidence: p99 (measured p99.9 236 ms")
    assert short.ceiling(slo).qps < 15.0 and short.ceiling(slo).contradictions == ()
    plain = blind.ceiling(slo).contradictions
    assert len(plain) == 1 and "the observed p99 174 ms met the SLO" in plain[0] and "give n_requests" in plain[0]
