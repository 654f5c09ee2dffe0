"""gc_whatif on the seed article's V8 semi-space table (data/gc_semispace.csv, seed 003).

References: the article's numbers (3 processes saturating at 320 QPS, GC 27.5 % -> 7.14 % of CPU,
1008 -> 312 GCs and 47.7 s -> 11.8 s of GC in 3 minutes, +10 % QPS measured); the CPU-only
prediction (1 - 0.0714) / (1 - 0.275) - 1 = 28.1 % worked by hand; Gaver's (1962) completion-time
moments checked by Monte Carlo; Pollaczek-Khinchine for the pause part of the mean wait; the exact
M/G/1 FCFS with the law of simulated S_eff samples (an empirical service) for the choice of law.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from capacity import Service, fcfs, plan
from capacity.plan import gc_whatif

DATA = Path(__file__).resolve().parents[1] / "data" / "gc_semispace.csv"
WINDOW = 180.0  # "3 minutes" of GC trace


@pytest.fixture(scope="module")
def seed():
    t = pd.read_csv(DATA).set_index("semi_space_mb")
    b, a = t.loc[16], t.loc[64]
    return dict(service=3.0 / b["qps"],                       # 3 saturated processes at 320 QPS
                g=b["gc_cpu_share"], g2=a["gc_cpu_share"],
                v=b["gc_time_3min_s"] / b["gc_count_3min"], v2=a["gc_time_3min_s"] / a["gc_count_3min"],
                r=b["gc_count_3min"] / WINDOW, r2=a["gc_count_3min"] / WINDOW,
                measured=a["qps_change_vs_16mb"])


@pytest.fixture(scope="module")
def result(seed):
    return gc_whatif(seed["service"], seed["g"], seed["v"], seed["r"], seed["g2"], seed["v2"], seed["r2"],
                     processes=3, measured_gain=seed["measured"])


def test_seed_prediction_and_gap_are_surfaced(result):
    cpu_only = (1 - 0.0714) / (1 - 0.275) - 1          # 0.2808, by hand
    assert result.predicted_capacity_gain == pytest.approx(cpu_only, rel=1e-12)
    assert result.measured_gain == pytest.approx(0.10)
    assert result.gap == pytest.approx(cpu_only - 0.10, rel=1e-12)
    # 1 + 0.1 = 1 / (f (1 - 0.275) / (1 - 0.0714) + 1 - f)  ->  f = (1 - 1/1.1) / (1 - 0.725/0.9286)
    assert result.implied_cpu_share == pytest.approx((1 - 1 / 1.1) / (1 - 0.725 / 0.9286), rel=1e-9)
    gap_notes = [n for n in result.notes if "measured" in n]
    assert gap_notes and "+28.1 %" in gap_notes[0] and "+10.0 %" in gap_notes[0]
    assert "not purely CPU-bound" in result.explanation


def test_seed_capacity_and_ceiling(result, seed):
    t = result.table
    # Before: the measured 320 QPS is the capacity by construction (9.375 ms x 320 = 3 cores).
    assert t.loc["before", "capacity_qps"] == pytest.approx(320.0, rel=1e-12)
    assert t.loc["after", "service_mean_s"] == pytest.approx(seed["service"] * (1 - 0.275) / (1 - 0.0714))
    # Fewer, shorter pauses: the ceiling gains at least what the CPU gains, and p99 at the old ceiling falls.
    assert result.predicted_ceiling_gain >= result.predicted_capacity_gain
    assert t.loc["after", "p99_s"] < t.loc["before", "p99_s"]
    assert t.loc["before", "p99_s"] == pytest.approx(0.5, rel=1e-5)  # compared at the old ceiling
    assert t.loc["after", "pause_delay_s"] < t.loc["before", "pause_delay_s"]


def test_effective_service_moments_by_monte_carlo():
    # Mutator work exponential, some GC concurrent (g - p), constant pauses interrupting at rate theta.
    s, g, v, r = 0.010, 0.3, 0.02, 10.0          # pause share p = 0.2 of busy time
    res = gc_whatif(s, g, v, r, slo={0.99: 1.0})
    row = res.table.loc["before"]
    rng = np.random.default_rng(5)
    p = r * v
    x = rng.exponential(s * (1 - g) * (1 - p) / (1 - g), 2_000_000)
    n = rng.poisson(r / (1 - p) * x)
    eff = x + v * n
    assert row["service_mean_s"] == pytest.approx(eff.mean(), rel=3e-3)
    assert row["service_scv"] == pytest.approx(eff.var() / eff.mean() ** 2, rel=1e-2)
    assert row["service_mean_s"] == pytest.approx(s, rel=1e-12)  # GC included as measured


def test_pause_delay_is_residual_pause_decomposition():
    # FCFS, one core: the pause part of the P-K wait = E[V^2]/(2E[V]) x (share of time in pauses) / (1 - rho).
    s, g, v, r, lam = 0.010, 0.3, 0.02, 10.0, 50.0
    res = gc_whatif(s, g, v, r, arrival_rate=lam, pause_scv=1.0)
    row = res.table.loc["before"]
    ex = s * (1 - g) * (1 - r * v) / (1 - g)
    theta = r / (1 - r * v)
    pause_time_share = lam * ex * theta * v
    rho = lam * s
    assert row["pause_delay_s"] == pytest.approx((2 * v * v) / (2 * v) * pause_time_share / (1 - rho), rel=1e-12)
    # ... and the whole P-K wait with the table's two moments is fcfs.mean_wait of that service.
    svc = Service.gamma(row["service_mean_s"], row["service_scv"])
    pk = lam * row["service_mean_s"] ** 2 * (1 + row["service_scv"]) / (2 * (1 - rho))
    assert float(fcfs.mean_wait(lam, svc)) == pytest.approx(pk, rel=1e-9)


def test_inconsistent_pause_inputs_are_noted(seed):
    # The article's "50-60 ms average pause" with 1008 GCs in 180 s is 31 % of the CPU, more than 27.5 %.
    res = gc_whatif(seed["service"], 0.275, 0.055, seed["r"], 0.0714, 0.040, seed["r2"], processes=3)
    assert any("disagree" in n for n in res.notes)
    assert res.table.loc["before", "pause_share"] == pytest.approx(0.275)
    assert res.gap is None and res.measured_gain is None


def test_no_change_no_gain_and_better_than_predicted_note():
    res = gc_whatif(0.01, 0.2, 0.02, 5.0, measured_gain=0.0)
    assert res.predicted_capacity_gain == pytest.approx(0.0, abs=1e-12)
    assert res.predicted_ceiling_gain == pytest.approx(0.0, abs=1e-9)
    res = gc_whatif(0.01, 0.2, 0.02, 5.0, new_gc_cpu_share=0.1, measured_gain=0.5)
    assert any("exceeds" in n for n in res.notes)


def test_bad_inputs():
    with pytest.raises(ValueError, match="gc_cpu_share"):
        gc_whatif(0.01, 1.2, 0.02, 5.0)
    with pytest.raises(ValueError, match="pause_mean"):
        gc_whatif(0.01, 0.2, -0.02, 5.0)
    with pytest.raises(ValueError, match="discipline"):
        gc_whatif(0.01, 0.2, 0.02, 5.0, discipline="lifo")


# ------------------------------------------------------------------------------------------------
# gc_whatif: which law for the effective service


@pytest.mark.slow
def test_gc_effective_service_is_gamma_closer_to_the_sampled_law_than_lognormal():
    """The seed's "before" setting (scv 2.34): the exact M/G/1 FCFS p99 ceiling with the law of
    50,000 simulated S_eff = X + V_1 + ... + V_N(X) samples (X exponential, N Poisson at theta X,
    constant pauses) is matched by gamma within 2 % and missed by lognormal by over 10 %;
    gc_whatif uses gamma."""
    from capacity.plan.gc import _setting

    g, v, r = 0.275, 47.7 / 1008, 1008 / 180
    st = _setting(3 / 320 * (1 - g), 1.0, g, v, r, 0.0, [], "before")
    m, scv = st["service_mean_s"], st["service_scv"]
    rng = np.random.default_rng(1)
    x = rng.exponential(st["_ex"], 50_000)
    s_eff = x + v * rng.poisson(st["_theta"] * x)
    assert s_eff.var() / s_eff.mean() ** 2 == pytest.approx(scv, rel=0.05)
    slo = {0.99: 0.2}
    sampled = plan.qps_ceiling(Service.empirical(s_eff * (m / s_eff.mean())), 1, slo, discipline="fcfs").qps
    gamma = plan.qps_ceiling(Service.gamma(m, scv), 1, slo, discipline="fcfs").qps
    lognormal = plan.qps_ceiling(Service.lognormal(m, scv), 1, slo, discipline="fcfs").qps
    assert abs(gamma / sampled - 1) < 0.02
    assert abs(lognormal / sampled - 1) > 0.10
    res = gc_whatif(3 / 320, g, v, r, slo=slo)
    assert res.table.loc["before", "ceiling_qps"] == pytest.approx(gamma, rel=1e-9)


def test_gc_effective_service_follows_from_moments_at_and_below_scv_one():
    """No pauses: the effective service is the measured one (exponential at scv 1, deterministic at
    0, gamma between), as Service.from_moments has it."""
    from capacity.plan.gc import _queue_service

    assert _queue_service(0.01, 1.0 + 1e-12).family == "exponential"
    assert _queue_service(0.01, 1e-15).family == "deterministic"
    assert _queue_service(0.01, 0.4).family == "gamma" == Service.from_moments(0.01, 0.4).family
    assert _queue_service(0.01, 2.3).family == "gamma"
    ps_multi = gc_whatif(0.01, 0.2, 0.02, 0.0, servers=2, discipline="ps", slo={0.99: 0.2})
    assert ps_multi.table.loc["before", "service_scv"] == pytest.approx(1.0)   # exponential PS on 2 cores works
