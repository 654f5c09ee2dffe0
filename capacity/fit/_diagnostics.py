"""Diagnostics layer of the fits: how well the model describes the data, and the caveats.

Fit-quality figures and residual tables, and the warnings each fit emits.  Every warning
function returns a list of ``(category, message)`` pairs; the public function records them on
its result (``FitResult._warn``), in the order they are returned here, and emits them once at
the end so that each points at the user's call.
"""
from __future__ import annotations

import math

import numpy as np

from ..exceptions import FitWarning, IdentifiabilityWarning, OverloadWarning
from ._intervals import DASHBOARD_PRECISION, RR_MODEL_ERROR
from ._solve import robust_scale

__all__ = [
    "LineQuality",
    "bound_warnings",
    "comparison_table",
    "cpu_cost_contradiction",
    "identifiability_warnings",
    "interval_warnings",
    "latency_law_warnings",
    "log_warnings",
    "mixed_bin_warnings",
    "mva_warnings",
    "r2",
    "sensitivity",
    "skipped_endpoint_warnings",
    "slices_warnings",
    "solver_warnings",
    "usl_warnings",
    "utilization_spread_warnings",
    "utilization_warnings",
]

Warnings = list  # of (warning category, message)


_CPU_COST_RATIO = 1.25    # a mean from the latencies alone this far from the CPU's is a contradiction ...
_CHI2_1_95 = 3.841        # ... when it also fits significantly better (likelihood ratio, 1 df)


def cpu_cost_contradiction(held_mean: float, free_mean: float, lr: float, miss_held: str, miss_free: str,
                           what: str) -> str | None:
    """The sentence saying that the CPU's cost per request (the utilisation law, ``held_mean``)
    and the cost the latencies alone need (``free_mean``) disagree, or None when they do not:
    within a factor 1.25 either way, or the latencies fit no better with their own (likelihood
    ratio ``lr``, scaled by the dispersion, at most the chi-square 95 % point on 1 df).
    ``miss_held``/``miss_free``: how far each fit misses, as text; ``what``: "percentiles" or
    "histograms"."""
    from ..units import format_time

    ratio = free_mean / held_mean
    if lr <= _CHI2_1_95 or 1 / _CPU_COST_RATIO <= ratio <= _CPU_COST_RATIO:
        return None
    why = ("CPU is spent outside these requests (GC, timers, other endpoints, other processes in the "
           "measurement); capacity.fit.from_utilization separates it" if ratio < 1 else
           "the latencies hold more than CPU: a wait that queues without holding the CPU (a lock, a "
           "connection pool, a downstream with its own queue), or the CPU measured over fewer cores "
           "than serve these requests")
    return (f"the CPU utilisation implies {format_time(held_mean)} of CPU per request, but the "
            f"{what} alone fit best with {format_time(free_mean)} ({ratio:.2g}x; miss {miss_held} with the "
            f"CPU's cost, {miss_free} without): {why}")

# percentiles
_MAX_RMS = 0.10               # RMS relative error above which the model "does not describe" the percentiles
_UNIDENTIFIED_FACTOR = 2.0    # a parameter free to move by this factor at that precision is not identified
_DELAY_UNIDENTIFIED = 0.25    # ... or a delay free to move by 25 % of the smallest observed percentile
# "Cannot tell": the consistent counts span more than half of the FCFS-to-limit scale
# g(k) = 1 - k^-0.6 (the rr interpolation weight near p99), e.g. 1..8 (0 to 0.71) or 2..50, but
# not 3..20 (0.48 to 0.83).
_SLICES_G_SPREAD = 0.5
_SLICES_BETA = 0.6
# utilisation windows
_OUTLIER_Z = 3.0          # |residual| > 3 robust sigmas flags a window
_SATURATED = 0.98         # CPU fraction of the cores treated as pinned
_MIN_QPS_CV = 0.10        # below this spread slope and background are confounded
_MAX_REL_SCALE = 0.25     # residual scale above 25 % of mean CPU: the law does not explain the data
_MAX_OUTLIER_SHARE = 0.20
# load tests
_MAX_RMS_REL = 0.10       # relative RMS error above which a model "does not describe" the sweep
_MIN_PEAK_UTIL = 0.5      # max X*D below this: the sweep never approached saturation
_LATENCY_LAW_SLACK = 0.05  # N/X may undershoot R by 5 % (measurement windows) before we complain
# request logs
_MAX_DISPERSION = 4.0     # window-count variance / Poisson variance above which a bin mixes loads


# ---------------------------------------------------------------------- percentiles
def sensitivity(jtj_inv: np.ndarray, names: list[str], m: int, t_ref: float) -> dict:
    """How far each parameter can move while the model percentiles change by 1 % RMS.

    ``delta * sqrt(m * [(J^T J)^-1]_kk)`` with ``delta = 1 %`` and m percentiles, the others
    re-adjusting: a factor for log parameters, seconds for a constant delay.
    """
    sens = {}
    for k, name in enumerate(names):
        step = DASHBOARD_PRECISION * math.sqrt(m * max(jtj_inv[k, k], 0.0))
        sens[name] = step * t_ref if name == "delay" else math.exp(min(step, 700.0))
    return sens


def comparison_table(obs, residuals: np.ndarray):
    """Observed vs model per percentile (``rel_error`` = model / observed - 1)."""
    import pandas as pd

    model_x = np.exp(np.log(obs.t) + residuals)
    return pd.DataFrame({"observation": obs.obs_index, "arrival_rate": obs.lam, "q": obs.q,
                         "observed": obs.t, "model": model_x, "rel_error": model_x / obs.t - 1.0})


def slices_warnings(slices_range, best: int, busiest: float) -> Warnings:
    """The consistent slice counts span too much of the FCFS-to-PS scale to tell k."""
    g_lo, g_hi = (1.0 - np.asarray(slices_range or (1, 1), float) ** -_SLICES_BETA)
    if slices_range is None or not g_hi - g_lo > _SLICES_G_SPREAD:
        return []
    return [(IdentifiabilityWarning,
             f"slices is not identified by these percentiles: every count from {slices_range[0]} "
             f"to {slices_range[1]} fits within the noise (percentile precision plus the "
             f"{RR_MODEL_ERROR:.0%} error of the rr approximation); best {best}"
             + (f"; the busiest observation is at utilisation {busiest:.2f}, where FCFS, round "
                "robin and PS nearly coincide: add percentiles at higher load"
                if busiest < 0.5 else "; add percentiles at other loads, or give slices="))]


def utilization_spread_warnings(mean_fixed, spread: float, background: float = 0.0) -> Warnings:
    """The utilisation law gives per-observation costs that disagree (about the line, where the
    fit read a background of ``background`` busy cores at zero traffic)."""
    if mean_fixed is None or not spread > 0.2:
        return []
    if background > 0:
        why = (f"even about the line through the {background:.3g} busy cores of background they "
               "show (CPU at zero traffic, which the fit separates): the request mix changes "
               "between them, and the fit's CPU per request holds for their mix only")
    else:
        why = ("background CPU (GC, timers) that the observations could not separate (too few, or "
               "their rates too alike; from_utilization over more windows reads it with its "
               "uncertainty) or a changing request mix")
    return [(FitWarning, (f"the utilisation law gives per-observation CPU costs that differ by "
                          f"{spread:.0%} of their mean: {why}"))]


def solver_warnings(converged: bool, max_nfev: int, rms: float, comp, model) -> Warnings:
    """No convergence, or residuals too large for the model to describe the percentiles."""
    out = []
    if not converged:
        out.append((FitWarning, (f"the optimiser did not converge within {max_nfev} evaluations; "
                                 "the estimates are the best point reached")))
    if rms > _MAX_RMS:
        out.append((FitWarning, (f"large residuals: the model misses the percentiles by {rms:.0%} RMS "
                                 f"(worst {np.max(np.abs(comp['rel_error'])):.0%}); the {model.discipline} "
                                 f"queue with {model.family} CPU time"
                                 f"{'' if model.delay else ' and no delay'} does not describe these data")))
    return out


def bound_warnings(space, theta: np.ndarray) -> Warnings:
    """A parameter on its search bound (no delay at all is a legitimate answer)."""
    out = []
    for k, name in enumerate(space.names):
        tol = 1e-3 * max(1.0, space.hi[k] - space.lo[k]) if name != "delay" else 1e-4
        at_lo = theta[k] <= space.lo[k] + tol
        at_hi = theta[k] >= space.hi[k] - tol
        if name == "delay" and at_lo:
            continue   # no delay is a legitimate answer
        if at_lo or at_hi:
            what = {"log_mean": "E[S] (utilisation 0.999 at the busiest load)" if at_hi else "E[S]",
                    "log_scv": "the scv", "delay": "the delay (the smallest percentile)"}.get(name, name)
            out.append((FitWarning, (f"{name} sits on its search bound ({what}): the data push the model "
                                     "to an extreme; check the inputs or the model choice")))
    return out


def identifiability_warnings(sens: dict, t_ref: float, delay) -> Warnings:
    """Parameters free to move by a factor 2 (a delay: a quarter of the smallest percentile)."""
    out = []
    for name, value in sens.items():
        if name == "delay":
            bad = value > _DELAY_UNIDENTIFIED * t_ref
            size = f"{value:.3g} s"
        else:
            bad = value > _UNIDENTIFIED_FACTOR
            size = f"a factor {value:.3g}" if value < 1e6 else "an unbounded factor"
        if bad:
            out.append((IdentifiabilityWarning,
                        f"{name} is not identified by these percentiles: it can move by {size} while the "
                        "model percentiles change by less than 1 % RMS"
                        + (" (CPU and non-CPU latency cannot be separated: add percentiles at higher load, "
                           "or give utilization=)" if delay is not None else "")
                        + "; fix it or add percentiles at other loads"))
    return out


def interval_warnings(wald, confidence: float) -> Warnings:
    """Intervals (from ``n_requests``) wider than a factor 2 either way."""
    if wald.cov is None:
        return []
    out = []
    for name in wald.names:
        if name != "delay" and wald.z * wald.se(name) > math.log(_UNIDENTIFIED_FACTOR):
            out.append((IdentifiabilityWarning,
                        (f"{name}: the {confidence:.0%} interval spans more than a factor "
                         f"{_UNIDENTIFIED_FACTOR:g} either way; the percentiles do not pin it down")))
    return out


# ---------------------------------------------------------------------- request logs
def mixed_bin_warnings(bin_table) -> Warnings:
    """Load bins whose window counts vary far more than Poisson noise: they pool several loads."""
    mixed = bin_table[(bin_table["dispersion"] > _MAX_DISPERSION) & (bin_table["rate_cv"] > 0.1)]
    return [(FitWarning, (f"load bin {int(row['bin'])} pools windows from "
                          f"{row['qps_low']:.3g} to {row['qps_high']:.3g} req/s (count variance "
                          f"{row['dispersion']:.1f}x Poisson): it mixes different loads; use more bins"))
            for _, row in mixed.iterrows()]


def log_warnings(log, timing: str, fit_width: float) -> Warnings:
    """Rows left out, and windows too short for the queue to settle."""
    out = []
    if log.dropped:
        out.append((FitWarning, (f"{log.dropped} of {log.n_rows} rows have no usable time or {timing}; "
                                 "they were left out")))
    med = float(np.median(log.latency))
    if med > 0.1 * fit_width:
        out.append((FitWarning, (f"median latency {med:.3g} s exceeds 10 % of the {fit_width:g} s window: "
                                 "the queue does not settle within a window, so per-window load bins are "
                                 "unreliable; use longer windows")))
    return out


def skipped_endpoint_warnings(skipped: list, min_requests: int) -> Warnings:
    """Endpoints with too few requests to fit."""
    if not skipped:
        return []
    return [(IdentifiabilityWarning,
             f"{len(skipped)} endpoint(s) have fewer than {min_requests} requests and were not fitted: "
             + ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""))]


# ---------------------------------------------------------------------- utilisation windows
class LineQuality:
    """Residuals of the utilisation-law line, their robust scale, the outlier windows and R²
    (without the outliers, and over all windows)."""

    def __init__(self, y: np.ndarray, x: np.ndarray, a: float, b: float):
        self.residuals = resid = y - b - a * x
        self.scale = float(robust_scale(resid))
        self.outliers = np.abs(resid) > _OUTLIER_Z * max(self.scale, 1e-12 * float(np.abs(y).mean()) + 1e-300)
        inl = ~self.outliers
        ss_tot = float(np.sum((y[inl] - y[inl].mean()) ** 2))
        self.r2 = 1.0 - float(np.sum(resid[inl] ** 2)) / ss_tot if ss_tot > 0 else math.nan
        ss_tot_all = float(np.sum((y - y.mean()) ** 2))
        self.r2_all = 1.0 - float(np.sum(resid ** 2)) / ss_tot_all if ss_tot_all > 0 else math.nan



def utilization_warnings(data, qps_cv: float, cost_lower: float, confidence: float,
                         quality: LineQuality) -> Warnings:
    """Saturated windows, confounded slope and background, a cost not above zero, large
    residuals, too many outliers."""
    q, u, c, y = data.arrival_rate, data.utilization, data.cores, data.busy
    out = []
    saturated = int(np.sum(u >= _SATURATED))
    if saturated:
        out.append((OverloadWarning,
                    (f"{saturated} of {q.size} windows have CPU >= {_SATURATED:.0%} of {c:g} cores: the CPU "
                     "is saturated there, so arrival_rate must count completed requests (offered load is "
                     "capped)")))
    if data.background is None and qps_cv < _MIN_QPS_CV:
        out.append((IdentifiabilityWarning,
                    (f"arrival_rate varies only {qps_cv:.1%} (coefficient of variation) across windows: the "
                     "cost per request and the background load cannot be separated; add windows at other "
                     "loads or fix background= (e.g. 0.0)")))
    if not cost_lower > 0:
        out.append((FitWarning,
                    (f"the CPU cost per request is not significantly above zero ({confidence:.0%} interval "
                     f"starts at {cost_lower:.3g} s): CPU does not track QPS in these windows")))
    mean_y = float(y.mean())
    robust_sd = quality.scale
    if mean_y > 0 and robust_sd > _MAX_REL_SCALE * mean_y:
        out.append((FitWarning,
                    (f"large residuals: typical deviation {robust_sd:.3g} cores is "
                     f"{robust_sd / mean_y:.0%} of the mean busy cores; the utilisation law with one cost "
                     "per request does not explain this CPU (request mix changing? other workloads?)")))
    if quality.outliers.mean() > _MAX_OUTLIER_SHARE:
        out.append((FitWarning,
                    (f"{quality.outliers.mean():.0%} of the windows are outliers (|residual| > "
                     f"{_OUTLIER_Z:g} robust sigmas): the data hold more than one regime")))
    return out


# ---------------------------------------------------------------------- load tests
def r2(x: np.ndarray, xm: np.ndarray) -> float:
    """Coefficient of determination of the model values ``xm`` for the data ``x``."""
    return 1.0 - float(np.sum((x - xm) ** 2)) / max(float(np.sum((x - x.mean()) ** 2)), 1e-300)


def latency_law_warnings(sweep) -> Warnings:
    """Mean responses above N/X: the response-time law R = N/X - Z would need Z < 0."""
    n, x, r = sweep.users, sweep.throughput, sweep.mean_response
    if r is None:
        return []
    worst = float(np.min((n / x - r) / r))
    if not worst < -_LATENCY_LAW_SLACK:
        return []
    return [(FitWarning,
             (f"mean_response exceeds users/throughput by up to {-worst:.0%}: the response-time "
              "law R = N/X - Z needs Z >= 0; were throughput and latency measured over the same "
              "window, and does throughput count every completed request?"))]


def mva_warnings(sol, rms: float, sweep, fit_z: bool, d_hat: float, has_cov: bool,
                 se_logd: float) -> Warnings:
    """MVA: no residual degrees of freedom, no convergence, a poor fit, a confounded or poorly
    determined demand."""
    x = sweep.throughput
    out = []
    if not has_cov:
        out.append((IdentifiabilityWarning,
                    ("MVA: as many parameters as data points, the fit is exact and has no interval; "
                     "add concurrency levels")))
    if not sol.success:
        out.append((FitWarning, f"MVA fit did not converge: {sol.message}"))
    if rms > _MAX_RMS_REL:
        hint = ""
        if np.any(np.diff(x) < 0):
            hint = " (throughput falls at high concurrency, which MVA cannot produce: see the USL fit)"
        out.append((FitWarning,
                    (f"MVA: large residuals, throughput off by {rms:.0%} RMS; a single queueing station does "
                     f"not describe this sweep{hint}")))
    if sweep.mean_response is None and fit_z and float(x.max()) * d_hat < _MIN_PEAK_UTIL:
        out.append((IdentifiabilityWarning,
                    (f"MVA: the sweep reached only {float(x.max()) * d_hat:.0%} of the fitted saturation "
                     "throughput, so demand and think time are confounded and 1/D is an extrapolation; pass "
                     "mean_response, fix think_time, or test at higher concurrency")))
    elif has_cov and se_logd > 0.5:
        out.append((IdentifiabilityWarning,
                    f"MVA: the demand D is poorly determined (relative standard error {se_logd:.0%})"))
    return out


def usl_warnings(sol, nrmse: float, has_cov: bool, kappa_lower: float) -> Warnings:
    """USL: no residual degrees of freedom, no convergence, a poor fit, no located peak."""
    out = []
    if not has_cov:
        out.append((IdentifiabilityWarning,
                    ("USL: three points for three parameters, the fit is exact and has no interval; "
                     "add concurrency levels")))
    if not sol.success:
        out.append((FitWarning, f"USL fit did not converge: {sol.message}"))
    if nrmse > _MAX_RMS_REL:
        out.append((FitWarning, f"USL: large residuals, RMS error {nrmse:.0%} of the mean throughput"))
    if has_cov and not kappa_lower > 0:
        out.append((IdentifiabilityWarning,
                    ("USL: kappa is not significantly above zero, so these data do not locate a throughput "
                     "peak (peak_users has no upper bound); test at higher concurrency")))
    return out
