"""Tests for capacity.fit.from_utilization (issue 4, section 2).

References used here are independent of the implementation: the simulated
truth (cost, background) that generated the windows, ordinary least squares
from numpy as a non-robust baseline, hand arithmetic for noiseless lines and
for the seed-article examples (issue 4, section 6).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.exceptions import CapacityWarning, FitWarning, IdentifiabilityWarning, OverloadWarning
from capacity.fit import FitResult, UtilizationFit, from_utilization

COST = 0.012        # s of CPU per request (issue 4, section 7)
BACKGROUND = 0.05   # cores busy without traffic


def spiky_windows(seed: int, n: int = 300, noise: float = 0.02, spike_share: float = 0.05):
    """The issue's benchmark: n one-minute windows, QPS uniform in 5..50, 12 ms per request,
    0.05 cores background, Gaussian noise (sd ``noise`` cores, ~5 % of the mean CPU) and
    a share of windows with +0.3 CPU spikes (cron jobs, deploys)."""
    rng = np.random.default_rng(seed)
    qps = rng.uniform(5, 50, n)
    spikes = rng.random(n) < spike_share
    cpu = BACKGROUND + COST * qps + rng.normal(0, noise, n) + 0.3 * spikes
    return qps, np.clip(cpu, 0, 1), spikes


def quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)
        return func(*args, **kwargs)


# ---------------------------------------------------------------------- accuracy
def test_recovers_cost_within_2_percent_from_spiky_windows():
    """Issue 4, section 7: a known cost recovered within 2 % from noisy windows with outliers."""
    qps, cpu, spikes = spiky_windows(seed=2024)
    res = from_utilization(qps, cpu, cores=1)
    assert abs(res.cpu_per_request_ / COST - 1) < 0.02
    lo, hi = res.summary.loc["cpu_per_request", ["lower", "upper"]]
    assert lo < COST < hi
    assert abs(res.background_ - BACKGROUND) < 0.01
    cap_lo, cap_hi = res.summary.loc["capacity_qps", ["lower", "upper"]]
    assert cap_lo < (1 - BACKGROUND) / COST < cap_hi
    # Spikes are 15 noise sigmas: essentially all are flagged, few clean windows are.
    assert res.outliers_[spikes].mean() > 0.9
    assert res.outliers_[~spikes].mean() < 0.02
    assert res.r2_ > 0.95
    assert res.warnings_ == []


def test_accuracy_and_interval_coverage_over_seeds():
    """20 independent data sets: RMS relative error of the cost < 1 %, and the 95 % bootstrap
    interval covers the truth in >= 17 of 20 (binomial(20, 0.95) gives >= 17 with prob. 0.98)."""
    errors, covered = [], 0
    for seed in range(20):
        qps, cpu, _ = spiky_windows(seed=100 + seed)
        res = from_utilization(qps, cpu, n_bootstrap=300, seed=seed)
        errors.append(res.cpu_per_request_ / COST - 1)
        lo, hi = res.summary.loc["cpu_per_request", ["lower", "upper"]]
        covered += lo <= COST <= hi
    assert np.sqrt(np.mean(np.square(errors))) < 0.01
    assert covered >= 17


def test_robust_methods_beat_least_squares_on_spikes():
    """Huber and Theil-Sen against numpy's ordinary least squares on the spiky benchmark.

    Measured (200 seeds, noise sd 0.02): RMS relative error Huber 0.84 %, Theil-Sen 0.86 %,
    OLS 2.7 % (and OLS biases the background up by the spikes' mean, +0.016 cores)."""
    err = {"huber": [], "theilsen": [], "ols": []}
    for seed in range(12):
        qps, cpu, _ = spiky_windows(seed=500 + seed)
        for method in ("huber", "theilsen"):
            fit = from_utilization(qps, cpu, method=method, n_bootstrap=50)
            err[method].append(fit.cpu_per_request_ / COST - 1)
        slope = np.linalg.lstsq(np.c_[np.ones_like(qps), qps], cpu, rcond=None)[0][1]
        err["ols"].append(slope / COST - 1)
    rms = {k: float(np.sqrt(np.mean(np.square(v)))) for k, v in err.items()}
    assert rms["huber"] < 0.5 * rms["ols"]
    assert rms["theilsen"] < 0.5 * rms["ols"]
    assert rms["huber"] < 0.012 and rms["theilsen"] < 0.012


@pytest.mark.parametrize("method", ["huber", "theilsen"])
def test_noiseless_line_is_exact(method):
    """Hand arithmetic: cpu = 0.1 + 0.004 qps on one core, capacity (1 - 0.1) / 0.004 = 225/s."""
    qps = np.array([10.0, 20, 40, 80, 160, 30, 60])
    res = from_utilization(qps, 0.1 + 0.004 * qps, method=method, n_bootstrap=60)
    assert res.cpu_per_request_ == pytest.approx(0.004, rel=1e-9)
    assert res.background_ == pytest.approx(0.1, abs=1e-9)
    assert res.capacity_qps_ == pytest.approx(225.0, rel=1e-9)
    assert res.background_share_ == pytest.approx(0.1 / (0.1 + 0.004 * qps.mean()), rel=1e-9)
    assert res.predict(225.0) == pytest.approx(1.0, rel=1e-9)
    assert isinstance(res.predict(10.0), float)
    np.testing.assert_allclose(res.predict(qps), 0.1 + 0.004 * qps, rtol=1e-9)
    assert res.service_.mean == pytest.approx(0.004, rel=1e-9)
    assert res.service_.family == "exponential"


def test_cpu_fraction_refers_to_the_given_cores():
    """The same busy cores expressed as a fraction of 4 cores give the same cost; capacity
    scales with the cores: (4 - 0.2) / 0.03 = 126.67/s."""
    qps = np.array([10.0, 20, 30, 40, 50, 60])
    busy = 0.2 + 0.03 * qps  # cores
    res = from_utilization(qps, busy / 4, cores=4, n_bootstrap=60)
    assert res.cpu_per_request_ == pytest.approx(0.03, rel=1e-9)
    assert res.background_ == pytest.approx(0.2, abs=1e-9)
    assert res.capacity_qps_ == pytest.approx((4 - 0.2) / 0.03, rel=1e-9)


def test_third_seed_saturated_processes_and_gc_share():
    """Issue 4, section 6, third seed: 320 QPS with the CPU saturated on 3 processes, GC 27.5 %.
    Hand arithmetic: 3 cores / 320 QPS = 9.375 ms per request; without GC 9.375 * 0.725 = 6.797 ms."""
    with pytest.warns(OverloadWarning, match="saturated"):
        res = from_utilization([318, 320, 322], [1.0, 1.0, 1.0], cores=3, background=0.0)
    assert res.cpu_per_request_ == pytest.approx(3 / 320, rel=1e-3)
    assert res.cpu_per_request_ * (1 - 0.275) == pytest.approx(0.0068, abs=0.00005)
    assert res.capacity_qps_ == pytest.approx(320, rel=1e-3)
    assert any("saturated" in m for m in res.warnings_)


def test_first_seed_ceiling_explains_the_collapse():
    """Issue 4, section 6, first seed: 16-25 % CPU at 6-10 QPS per server.  Hand arithmetic on
    the two ends: cost (0.25 - 0.16) / (10 - 6) = 22.5 ms, background 0.16 - 6 * 0.0225 = 0.025
    cores, ceiling (1 - 0.025) / 0.0225 = 43.3 QPS: above the 20 QPS seconds (which only queued)
    and below the 67 QPS peak second (which cannot be served at all)."""
    qps = np.linspace(6, 10, 9)
    cpu = 0.16 + (0.25 - 0.16) * (qps - 6) / 4
    res = from_utilization(qps, cpu, n_bootstrap=60)
    assert res.cpu_per_request_ == pytest.approx(0.0225, rel=1e-6)
    assert res.capacity_qps_ == pytest.approx(0.975 / 0.0225, rel=1e-6)
    assert 20 < res.capacity_qps_ < 67
    assert res.predict(67.0) > 1 > res.predict(20.0)


# ---------------------------------------------------------------------- warnings
def test_constant_qps_is_not_identifiable():
    rng = np.random.default_rng(7)
    qps = 30 + rng.normal(0, 0.5, 60)
    cpu = 0.05 + COST * qps + rng.normal(0, 0.01, 60)
    with pytest.warns(IdentifiabilityWarning, match="cannot be separated"):
        res = from_utilization(qps, cpu, n_bootstrap=100)
    assert any("cannot be separated" in m for m in res.warnings_)
    # Fixing the background restores identifiability: no warning, cost close to the truth.
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        fixed = from_utilization(qps, cpu, background=0.05, n_bootstrap=100)
    assert fixed.cpu_per_request_ == pytest.approx(COST, rel=0.02)
    assert np.isnan(fixed.summary.loc["background", "lower"])


def test_cpu_unrelated_to_qps_warns_not_significant():
    rng = np.random.default_rng(3)
    qps = rng.uniform(5, 50, 100)
    cpu = 0.3 + rng.normal(0, 0.02, 100)
    with pytest.warns(FitWarning, match="not significantly above zero"):
        from_utilization(qps, cpu, n_bootstrap=200)


def test_large_residuals_warn():
    rng = np.random.default_rng(4)
    qps = rng.uniform(5, 50, 200)
    cpu = np.clip(0.05 + 0.004 * qps + rng.normal(0, 0.1, 200), 0, 1)
    with pytest.warns(FitWarning, match="large residuals"):
        res = from_utilization(qps, cpu, n_bootstrap=100)
    assert isinstance(res, UtilizationFit)


def test_warnings_escalate_with_filter():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        with pytest.raises(OverloadWarning):
            from_utilization([100, 200, 300], [1.0, 1.0, 1.0], background=0.0)


# ---------------------------------------------------------------------- result object
def test_summary_and_print_summary(capsys):
    qps, cpu, _ = spiky_windows(seed=11, n=120)
    res = from_utilization(qps, cpu, n_bootstrap=200, confidence=0.9)
    assert isinstance(res, FitResult)
    s = res.summary
    assert isinstance(s, pd.DataFrame)
    assert list(s.columns) == ["estimate", "lower", "upper", "unit", "note"]
    assert list(s.index) == ["cpu_per_request", "background", "background_share", "capacity_qps"]
    assert (s["lower"] <= s["estimate"]).all() and (s["estimate"] <= s["upper"]).all()
    assert res.confidence_level == 0.9
    assert res.params_["cpu_per_request"] == res.cpu_per_request_
    assert set(res.fit_quality_.index) >= {"r2", "residual_scale_cores", "outlier_windows", "qps_cv"}
    assert res.outliers_.dtype == bool and res.outliers_.shape == qps.shape
    np.testing.assert_allclose(res.residuals_, cpu - res.background_ - res.cpu_per_request_ * qps)
    res.print_summary()
    out = capsys.readouterr().out
    assert "cpu_per_request" in out and "90%" in out and "fit quality" in out
    assert "UtilizationFit" in repr(res)


def test_bootstrap_is_seeded():
    qps, cpu, _ = spiky_windows(seed=12, n=80)
    a = from_utilization(qps, cpu, n_bootstrap=100, seed=5).summary
    b = from_utilization(qps, cpu, n_bootstrap=100, seed=5).summary
    pd.testing.assert_frame_equal(a, b)


def test_block_bootstrap_widens_interval_for_correlated_noise():
    """AR(1) noise (phi = 0.9) correlated in time with a slowly varying QPS: iid resampling
    of windows understates uncertainty; blocks of 20 windows give a wider interval."""
    rng = np.random.default_rng(8)
    n = 400
    t = np.arange(n)
    qps = 27 + 20 * np.sin(2 * np.pi * t / 200)
    e = np.zeros(n)
    for i in range(1, n):
        e[i] = 0.9 * e[i - 1] + rng.normal(0, 0.01)
    cpu = 0.05 + COST * qps + e
    iid = from_utilization(qps, cpu, n_bootstrap=300)
    blk = from_utilization(qps, cpu, n_bootstrap=300, block_size=20)
    w_iid = np.diff(iid.summary.loc["cpu_per_request", ["lower", "upper"]].to_numpy(float))[0]
    w_blk = np.diff(blk.summary.loc["cpu_per_request", ["lower", "upper"]].to_numpy(float))[0]
    assert w_blk > 1.5 * w_iid


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"arrival_rate": [1.0, 2.0], "utilization": [0.1, 0.2]}, "arrival_rate"),
        ({"arrival_rate": [1.0, np.nan, 3.0], "utilization": [0.1, 0.2, 0.3]}, "arrival_rate"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, np.nan, 0.3]}, "utilization"),
        ({"arrival_rate": [1.0, -2.0, 3.0], "utilization": [0.1, 0.2, 0.3]}, "arrival_rate"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [10.0, 20.0, 30.0]}, "percent"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 1.2, 0.3]}, "utilization"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, -0.2, 0.3]}, "utilization"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2]}, "utilization"),
        ({"arrival_rate": [[1.0, 2.0, 3.0]], "utilization": [[0.1, 0.2, 0.3]]}, "arrival_rate"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2, 0.3], "cores": 0}, "cores"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2, 0.3], "confidence": 1.0}, "confidence"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2, 0.3], "method": "ols"}, "method"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2, 0.3], "background": 2.0}, "background"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2, 0.3], "n_bootstrap": 10}, "n_bootstrap"),
        ({"arrival_rate": [1.0, 2.0, 3.0], "utilization": [0.1, 0.2, 0.3], "block_size": 4}, "block_size"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        from_utilization(**kwargs)


# ---------------------------------------------------------------------- properties
@settings(max_examples=15, deadline=None)
@given(
    cost=st.floats(1e-4, 0.05),
    bg=st.floats(0.0, 0.3),
    scale=st.floats(0.1, 10.0),
    seed=st.integers(0, 10_000),
)
def test_equivariance_in_qps_units_and_cpu_offset(cost, bg, scale, seed):
    """Measuring QPS in other units (x scale) divides the cost by the scale and leaves the
    background alone; the capacity in those units scales by it (Huber with a fixed-scale
    start is affine equivariant in x)."""
    rng = np.random.default_rng(seed)
    qps = rng.uniform(1, 1 / (2 * cost) * 0.8, 40)
    cpu = np.clip(bg + cost * qps + rng.normal(0, 0.005, 40), 0, 1)
    base = quiet(from_utilization, qps, cpu, n_bootstrap=50)
    scaled = quiet(from_utilization, qps * scale, cpu, n_bootstrap=50)
    assert scaled.cpu_per_request_ == pytest.approx(base.cpu_per_request_ / scale, rel=1e-6, abs=1e-12)
    assert scaled.background_ == pytest.approx(base.background_, rel=1e-6, abs=1e-9)
    if np.isfinite(base.capacity_qps_) and base.cpu_per_request_ > 0:
        assert scaled.capacity_qps_ == pytest.approx(base.capacity_qps_ * scale, rel=1e-6)
    # A constant extra load (another process) moves only the background.
    if cpu.max() < 0.9:
        shifted = quiet(from_utilization, qps, cpu + 0.1, n_bootstrap=50)
        assert shifted.background_ == pytest.approx(base.background_ + 0.1, rel=1e-6, abs=1e-9)
        assert shifted.cpu_per_request_ == pytest.approx(base.cpu_per_request_, rel=1e-6, abs=1e-12)


def test_single_qps_level_with_bootstrap_is_clean():
    """All windows at one QPS: no RuntimeWarning from empty slope sets (pyproject turns them into
    errors), an IdentifiabilityWarning instead; with background fixed the cost is cpu*cores/qps."""
    qps = np.full(10, 20.0)
    cpu = 0.05 + COST * qps
    with pytest.warns(IdentifiabilityWarning):
        from_utilization(qps, cpu, n_bootstrap=60)
    for method in ("huber", "theilsen"):
        res = from_utilization(qps, cpu, background=0.0, method=method, n_bootstrap=60)
        assert res.cpu_per_request_ == pytest.approx(cpu[0] / 20.0, rel=1e-12)


def test_no_traffic_at_all_is_an_error():
    with pytest.raises(ValueError, match="arrival_rate"):
        from_utilization([0.0, 0.0, 0.0], [0.1, 0.1, 0.1])
