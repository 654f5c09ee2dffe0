"""CPU cost per request from per-window request rate and CPU busy fraction (the utilisation law).

:func:`from_utilization` is a pipeline over the fit layers: checked windows (:mod:`._inputs`),
a robust straight line (:mod:`._solve`), a moving-block bootstrap (:mod:`._intervals`), then
quality and caveats (:mod:`._diagnostics`) into a :class:`UtilizationFit`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import as_float_array
from .._deprecation import renamed_parameters
from ._diagnostics import LineQuality, utilization_warnings
from ._inputs import UtilizationWindows, check_utilization_options, check_windows
from ._intervals import block_bootstrap, percentile_interval
from ._model import make_service
from ._result import FitResult
from ._solve import robust_line

__all__ = ["UtilizationFit", "from_utilization"]

ArrayLike = Any

_MAX_THEILSEN = 3000      # beyond this the all-pairs Theil-Sen bootstrap is too slow


# ---------------------------------------------------------------------- result
class UtilizationFit(FitResult):
    """Result of :func:`from_utilization`.

    Attributes
    ----------
    cpu_per_request_ : float
        E[S], CPU seconds one request costs (summed over cores).
    background_ : float
        Cores busy with no traffic (GC, timers, other processes), the intercept.
    background_share_ : float
        Share of the CPU spent on background work at the mean observed QPS.
    capacity_qps_ : float
        QPS at which the CPU saturates: (cores - background) / E[S].
    service_ : capacity.Service
        ``Service.exponential(cpu_per_request_)``.  The utilisation law
        identifies only the *mean* service time; the exponential shape is a
        placeholder, fit the spread with ``from_percentiles``.
    r2_ : float
        R² of the fit over the windows not flagged as outliers.
    residual_scale_ : float
        Robust (MAD-based) standard deviation of the residuals, cores.
    outliers_ : ndarray of bool
        Windows whose residual exceeds 3 robust standard deviations.
    residuals_ : ndarray
        Observed minus fitted busy cores per window.
    cores : float
        The ``cores`` the utilisation fractions refer to.
    """

    cores: float

    @renamed_parameters(qps="arrival_rate")
    def predict(self, arrival_rate: ArrayLike):
        """CPU busy fraction of ``cores`` the fit predicts at ``arrival_rate`` requests/s (vectorised).

        Values above 1 mean the load exceeds the CPU capacity.  (``qps=`` is the old name of
        ``arrival_rate``.)
        """
        q = as_float_array(arrival_rate, "arrival_rate")
        out = (self.background_ + self.cpu_per_request_ * q) / self.cores
        return out.item() if out.ndim == 0 else out

    def _description(self) -> dict:
        return {"cores": self.cores}


# ---------------------------------------------------------------------- public
@renamed_parameters(qps="arrival_rate", cpu="utilization")
def from_utilization(
    arrival_rate: ArrayLike,
    utilization: ArrayLike,
    cores: float = 1,
    *,
    confidence: float = 0.95,
    background: float | None = None,
    method: str = "huber",
    n_bootstrap: int = 1000,
    block_size: int = 1,
    seed: int | None = 0,
) -> UtilizationFit:
    """Fit the CPU cost per request from per-window request rate and CPU busy fraction.

    Parameters
    ----------
    arrival_rate : array_like, shape (n,)
        Completed requests per second in each time window (n >= 3), e.g. one
        value per minute from the service's metrics (the QPS).  Formerly ``qps``.
    utilization : array_like, shape (n,)
        CPU busy fraction in the same windows, as a fraction of ``cores`` in
        [0, 1]: 0.25 with ``cores=1`` is a quarter of one core, 0.25 with
        ``cores=4`` is one core busy.  Percentages are rejected (divide by 100).
        Formerly ``cpu``.
    cores : float, default 1
        Cores the fraction refers to (the process's cores, or a container CPU
        quota, may be fractional).
    confidence : float, default 0.95
        Coverage of the bootstrap intervals.
    background : float, optional
        Hold the intercept fixed at this many busy cores instead of fitting it
        (``background=0.0`` forces the line through the origin; use it when all
        windows sit at one QPS level, where the intercept is not identifiable).
    method : {"huber", "theilsen"}, default "huber"
        Robust regression used; see Notes.
    n_bootstrap : int, default 1000
        Bootstrap resamples of the windows for the intervals.
    block_size : int, default 1
        Windows per bootstrap block.  1 resamples windows independently; use
        a block of roughly the autocorrelation length (e.g. 10-30 one-minute
        windows) when residuals are correlated in time, which otherwise makes
        the intervals too narrow.
    seed : int or None, default 0
        Seed of the bootstrap generator (fixed by default, so results repeat).

    Returns
    -------
    UtilizationFit
        ``cpu_per_request_``, ``background_``, ``background_share_``,
        ``capacity_qps_``, ``service_``, ``r2_``, ``outliers_``, ``summary``,
        ``print_summary()``, ``predict(arrival_rate)``.

    Warns
    -----
    FitWarning
        The CPU cost is not significantly above zero, the residuals are large
        (robust scale above 25 % of the mean busy cores), or more than 20 % of
        the windows are outliers.
    IdentifiabilityWarning
        QPS varies too little across windows (coefficient of variation below
        0.1) to separate the cost per request from the background.
    OverloadWarning
        Some windows have the CPU at >= 98 % of ``cores``: at saturation the
        served QPS is capped, so pass completed (not offered) requests.

    Notes
    -----
    The utilisation law (Little's law applied to the CPU) over a window of
    length T with C_i busy cores and lambda_i completed requests/s::

        utilization_i * cores = background + E[S] * arrival_rate_i + noise_i

    E[S] is the CPU seconds per request summed over cores; ``background`` the
    cores busy without traffic.  Then::

        background_share = background / (background + E[S] * mean(arrival_rate))
        capacity_qps     = (cores - background) / E[S]

    ``capacity_qps`` is the throughput at which the CPU is 100 % busy: the hard
    ceiling, not a safe operating point (latency diverges before it).

    Robust regression.  CPU series have one-sided spikes (deploys, cron jobs,
    GC storms) that drag ordinary least squares upward.  ``"huber"`` (default)
    minimises Huber's loss with tuning constant 1.345 (95 % efficient under
    Gaussian noise) at a fixed robust scale (1.4826 MAD of the residuals of a
    Theil-Sen start on at most 1500 evenly spaced windows, updated once);
    with the scale fixed the loss is convex, so the iteratively reweighted
    least squares converges to a unique answer (``benchmarks/bench_fit.py``
    times 20,000 windows with 1000 bootstrap resamples).
    ``"theilsen"`` takes the median of all pairwise slopes (breakdown point
    29 %) and the median intercept; it costs O(n^2) memory and time per
    bootstrap resample, so it is refused beyond 3000 windows, and it is less
    efficient under clean Gaussian noise.  On the spiky synthetic data of the tests (300
    windows, 5 % spikes of +0.3 CPU) both recover the cost within 1 %; Huber
    had the smaller error over 40 seeds (see tests/test_fit_utilization.py).

    Intervals are percentile intervals of a (moving-block) bootstrap over
    windows with the Huber scale held fixed.  Capacity intervals use the order
    statistics of the bootstrap capacities (a resample with zero slope has
    infinite capacity).  Windows whose residual exceeds 3 robust standard
    deviations are flagged in ``outliers_``; ``r2_`` is computed without them.

    Assumptions: E[S] is the same in every window (a stable request mix), CPU
    and QPS are measured over the same windows, and ``arrival_rate`` counts
    completed requests.

    References
    ----------
    P. J. Huber, *Robust Statistics*, Wiley 1981, ch. 7 (M-estimates of
    regression, Huber's loss).
    H. Theil, "A rank-invariant method of linear and polynomial regression
    analysis", Indagationes Math. 12, 1950; P. K. Sen, "Estimates of the
    regression coefficient based on Kendall's tau", JASA 63, 1968.
    E. D. Lazowska et al., *Quantitative System Performance*, 1984, sec. 3.2
    (the utilisation law U = X S).
    H. R. Kuensch, "The jackknife and the bootstrap for general stationary
    observations", Ann. Statist. 17, 1989 (moving-block bootstrap).

    Examples
    --------
    Ten-minute windows, 12 ms of CPU per request, 0.05 cores of background:

    >>> import numpy as np
    >>> from capacity.fit import from_utilization
    >>> qps = np.array([5, 10, 20, 30, 40, 50, 15, 25, 35, 45], dtype=float)
    >>> cpu = 0.05 + 0.012 * qps                       # one core
    >>> res = from_utilization(qps, cpu, cores=1, n_bootstrap=200)
    >>> round(res.cpu_per_request_, 6), round(res.background_, 6)
    (0.012, 0.05)
    >>> round(res.capacity_qps_, 2)                    # (1 - 0.05) / 0.012
    79.17

    Saturated CPU (third seed article): 320 QPS with 3 worker processes
    pinned, GC taking 27.5 % of the CPU.  With the intercept fixed at zero the
    cost is 3 / 320 s, 6.8 ms of it outside GC:

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")           # OverloadWarning: the CPU is pinned
    ...     sat = from_utilization([320, 320, 320], [1.0, 1.0, 1.0], cores=3, background=0.0)
    >>> round(sat.cpu_per_request_ * 1e3, 3), round(sat.cpu_per_request_ * (1 - 0.275) * 1e3, 3)
    (9.375, 6.797)
    """
    data = check_windows(arrival_rate, utilization, cores)
    data = check_utilization_options(data, confidence, background, method, n_bootstrap, block_size,
                                     _MAX_THEILSEN)
    q, y, intercept = data.arrival_rate, data.busy, data.background
    a, b, scale = robust_line(q, y, intercept, method)
    a, b, scale = float(a), float(b), float(scale)
    rng = np.random.default_rng(seed)
    a_bs, b_bs = block_bootstrap(q, y, intercept, method, scale, (a, b), int(n_bootstrap), int(block_size), rng)
    quality = LineQuality(y, q, a, b)

    res = UtilizationFit(
        "utilisation law  cpu*cores = background + E[S]*qps",
        confidence_level=confidence,
        n_observations=q.size,
        method=f"{'Huber M-estimate' if method == 'huber' else 'Theil-Sen'}; "
               f"{'fixed' if intercept is not None else 'fitted'} background; "
               f"bootstrap over windows (B={int(n_bootstrap)}, block={int(block_size)}, seed={seed})",
    )
    cost_lower = _record(res, data, a, b, a_bs, b_bs, quality, confidence)
    mean_q = float(q.mean())
    qps_cv = float(q.std() / mean_q) if mean_q > 0 else 0.0
    res._set_quality("qps_cv", qps_cv)
    for category, message in utilization_warnings(data, qps_cv, cost_lower, confidence, quality):
        res._warn(category, message)
    res._emit_warnings(stacklevel=4)   # 4: through the renamed_parameters wrapper to the caller
    return res


def _record(res: UtilizationFit, data: UtilizationWindows, a: float, b: float, a_bs, b_bs,
            quality: LineQuality, confidence: float) -> float:
    """Estimates, bootstrap intervals and fit quality on ``res``; returns the cost's lower bound."""
    c, intercept, mean_q = data.cores, data.background, float(data.arrival_rate.mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = (c - b) / a if a > 0 else math.inf
        cap_bs = np.where(a_bs > 0, np.maximum(c - b_bs, 0.0) / np.where(a_bs > 0, a_bs, 1.0), np.inf)
        share = b / (b + a * mean_q) if (b + a * mean_q) > 0 else math.nan
        share_bs = b_bs / (b_bs + a_bs * mean_q)
    cap = max(cap, 0.0)
    res.cores = c
    res.cpu_per_request_ = a
    res.background_ = b
    res.background_share_ = float(share)
    res.capacity_qps_ = float(cap)
    res.service_ = make_service("exponential", a, 1.0) if a > 0 else None
    res.r2_ = quality.r2
    res.residual_scale_ = quality.scale
    res.outliers_ = quality.outliers
    res.residuals_ = quality.residuals
    res.bootstrap_ = {"cpu_per_request": a_bs, "background": b_bs, "capacity_qps": cap_bs}

    def interval(samples):
        return percentile_interval(samples, confidence)

    cost_interval = interval(a_bs)
    res._add_parameter("cpu_per_request", a, *cost_interval, unit="s", note="CPU seconds per request")
    if intercept is None:
        res._add_parameter("background", b, *interval(b_bs), unit="cores", note="busy cores at zero QPS")
        res._add_parameter("background_share", share, *interval(share_bs), unit="",
                           note=f"of CPU at mean QPS {mean_q:.4g}/s")
    else:
        res._add_parameter("background", b, unit="cores", note="held fixed")
        res._add_parameter("background_share", share, unit="", note=f"of CPU at mean QPS {mean_q:.4g}/s")
    res._add_parameter("capacity_qps", cap, *interval(cap_bs), unit="req/s", note="QPS at 100% CPU")
    res._set_quality("r2", quality.r2)
    res._set_quality("r2_all_windows", quality.r2_all)
    res._set_quality("residual_scale_cores", quality.scale)
    res._set_quality("outlier_windows", int(quality.outliers.sum()))
    return res._rows["cpu_per_request"][1]
