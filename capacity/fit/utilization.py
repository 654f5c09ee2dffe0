"""CPU cost per request from per-window QPS and CPU busy fraction (the utilisation law)."""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .._checks import as_float_array, check_positive
from ..exceptions import FitWarning, IdentifiabilityWarning, OverloadWarning
from ._result import FitResult

__all__ = ["UtilizationFit", "from_utilization"]

ArrayLike = Any

_HUBER_C = 1.345          # 95 % efficiency at Gaussian noise (Huber 1981, sec. 4.6)
_MAD_TO_SIGMA = 1.482602218505602  # 1 / Phi^-1(3/4): MAD -> standard deviation for Gaussian noise
_OUTLIER_Z = 3.0          # |residual| > 3 robust sigmas flags a window
_SATURATED = 0.98         # CPU fraction of the cores treated as pinned
_MIN_QPS_CV = 0.10        # below this spread slope and background are confounded
_MAX_REL_SCALE = 0.25     # residual scale above 25 % of mean CPU: the law does not explain the data
_MAX_OUTLIER_SHARE = 0.20
_CHUNK = 4_000_000        # elements per bootstrap chunk (memory bound)
_MAX_START = 1500         # windows used for the O(n^2) Theil-Sen start of the Huber fit
_MAX_THEILSEN = 3000      # beyond this the all-pairs Theil-Sen bootstrap is too slow


# ---------------------------------------------------------------------- estimators (batched math)
def _robust_scale(r: np.ndarray) -> np.ndarray:
    """1.4826 x median absolute deviation (about 0) along the last axis."""
    return _MAD_TO_SIGMA * np.median(np.abs(r), axis=-1)


def _wls(x, y, w, intercept):
    """Weighted least squares for y = b + a x along the last axis; ``intercept`` None fits b."""
    if intercept is not None:
        yy = y - intercept
        sxx = np.sum(w * x * x, axis=-1)
        a = np.divide(np.sum(w * x * yy, axis=-1), sxx, out=np.zeros_like(sxx), where=sxx > 0)
        return a, np.full_like(a, intercept)
    sw = np.sum(w, axis=-1)
    sx = np.sum(w * x, axis=-1)
    sy = np.sum(w * y, axis=-1)
    sxx = np.sum(w * x * x, axis=-1)
    sxy = np.sum(w * x * y, axis=-1)
    det = sw * sxx - sx * sx
    ok = det > 1e-12 * np.maximum(sw * sxx, 1e-300)
    # Degenerate x spread (one QPS level): no slope information; put everything in the mean ratio.
    a = np.where(ok, (sw * sxy - sx * sy) / np.where(ok, det, 1.0), np.divide(sy, np.where(sx > 0, sx, 1.0)))
    b = np.where(ok, (sy - a * sx) / sw, 0.0)
    return a, b


def _huber(x, y, intercept, scale, start=None, max_iter=200, tol=1e-10):
    """Huber M-estimate by iteratively reweighted least squares, batched over leading axes.

    ``scale`` is held fixed (shape of the batch), so the objective is convex
    and the IRLS iteration converges to the unique minimum from any start.
    """
    if start is None:
        a, b = _wls(x, y, np.ones_like(y), intercept)
    else:
        a, b = start
    tiny = np.maximum(scale, 1e-12 * (np.mean(np.abs(y), axis=-1) + 1e-300))[..., None]
    for _ in range(max_iter):
        r = np.abs(y - b[..., None] - a[..., None] * x) / tiny
        w = np.minimum(1.0, _HUBER_C / np.maximum(r, 1e-300))
        a_new, b_new = _wls(x, y, w, intercept)
        step = np.max(np.abs(a_new - a) * np.abs(x).max(axis=-1) + np.abs(b_new - b)) if a.size else 0.0
        a, b = a_new, b_new
        if step <= tol * (np.max(np.abs(y)) + 1e-300):
            break
    return a, b


def _theil_sen(x, y, intercept):
    """Theil-Sen slope (median of pairwise slopes) and median intercept, batched; O(n^2) memory."""
    if intercept is not None:
        pos = x > 0
        ratio = np.where(pos, (y - intercept) / np.where(pos, x, 1.0), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            a = np.nanmedian(ratio, axis=-1)
        a = np.where(np.isnan(a), 0.0, a)
        return a, np.full_like(a, intercept)
    n = x.shape[-1]
    i, j = np.triu_indices(n, k=1)
    dx = x[..., j] - x[..., i]
    dy = y[..., j] - y[..., i]
    slopes = np.where(dx != 0, dy / np.where(dx != 0, dx, 1.0), np.nan)
    with warnings.catch_warnings():
        # A resample with a single QPS level has no pairwise slope at all (all NaN): slope 0 below.
        warnings.simplefilter("ignore", RuntimeWarning)
        a = np.nanmedian(slopes, axis=-1)
    a = np.where(np.isnan(a), 0.0, a)
    b = np.median(y - a[..., None] * x, axis=-1)
    return a, b


def _estimate(x, y, intercept, method, scale=None, start=None):
    """Point estimate (a, b) and the robust residual scale, batched over leading axes."""
    if method == "theilsen":
        a, b = _theil_sen(x, y, intercept)
        return a, b, _robust_scale(y - b[..., None] - a[..., None] * x)
    if scale is None:
        # Robust start and scale from Theil-Sen (Huber needs a scale it cannot estimate itself
        # robustly from a least-squares start), then one scale update from the Huber residuals.
        # Large inputs: every k-th window is plenty for a start and a scale.
        step = -(-x.shape[-1] // _MAX_START)
        a, b = _theil_sen(x[..., ::step], y[..., ::step], intercept)
        scale = _robust_scale(y - b[..., None] - a[..., None] * x)
        a, b = _huber(x, y, intercept, scale, start=(a, b))
        scale = _robust_scale(y - b[..., None] - a[..., None] * x)
        start = (a, b)
    a, b = _huber(x, y, intercept, scale, start=start)
    return a, b, scale


def _bootstrap(x, y, intercept, method, scale, start, n_boot, block, rng):
    """Moving-block bootstrap over windows: arrays of slopes and intercepts, shape (n_boot,)."""
    n = x.size
    n_blocks = -(-n // block)
    per_row = n * (n if method == "theilsen" else 1)
    chunk = max(1, _CHUNK // per_row)
    a_out, b_out = np.empty(n_boot), np.empty(n_boot)
    for lo in range(0, n_boot, chunk):
        m = min(chunk, n_boot - lo)
        starts = rng.integers(0, n - block + 1 if block < n else 1, size=(m, n_blocks))
        idx = (starts[..., None] + np.arange(block)).reshape(m, -1)[:, :n] % n
        xb, yb = x[idx], y[idx]
        if method == "theilsen":
            a, b, _ = _estimate(xb, yb, intercept, method)
        else:
            a, b, _ = _estimate(xb, yb, intercept, method, scale=np.full(m, scale),
                                start=(np.full(m, start[0]), np.full(m, start[1])))
        a_out[lo:lo + m], b_out[lo:lo + m] = a, b
    return a_out, b_out


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
        The ``cores`` the CPU fractions refer to.
    """

    cores: float

    def predict(self, qps: ArrayLike):
        """CPU busy fraction of ``cores`` the fit predicts at ``qps`` requests/s (vectorised).

        Values above 1 mean the load exceeds the CPU capacity.
        """
        q = as_float_array(qps, "qps")
        out = (self.background_ + self.cpu_per_request_ * q) / self.cores
        return out.item() if out.ndim == 0 else out


# ---------------------------------------------------------------------- public
def _check_windows(qps, cpu, cores):
    q = as_float_array(qps, "qps")
    u = as_float_array(cpu, "cpu")
    if q.ndim != 1:
        raise ValueError(f"qps must be a 1-D array of per-window request rates, got shape {q.shape}")
    if u.shape != q.shape:
        raise ValueError(f"cpu must have the same shape as qps {q.shape}, got {u.shape}")
    if q.size < 3:
        raise ValueError(f"qps needs at least 3 windows to fit a slope and an intercept, got {q.size}")
    bad = ~np.isfinite(q) | (q < 0)
    if bad.any():
        raise ValueError(f"qps must be non-negative and finite, got {q[bad][0]!r}")
    bad = ~np.isfinite(u) | (u < 0) | (u > 1)
    if bad.any():
        hint = ""
        if np.all((u >= 0) & (u <= 100)) and np.any(u > 1):
            hint = " (it looks like percent: pass cpu / 100)"
        raise ValueError(
            f"cpu must be the busy fraction of the given cores, in [0, 1], got {u[bad][0]!r}{hint}"
        )
    c = check_positive(cores, "cores")
    if c.ndim != 0:
        raise ValueError(f"cores must be a single positive number, got {cores!r}")
    return q, u, float(c)


def from_utilization(
    qps: ArrayLike,
    cpu: ArrayLike,
    cores: float = 1,
    *,
    confidence: float = 0.95,
    background: float | None = None,
    method: str = "huber",
    n_bootstrap: int = 1000,
    block_size: int = 1,
    seed: int | None = 0,
) -> UtilizationFit:
    """Fit the CPU cost per request from per-window QPS and CPU busy fraction.

    Parameters
    ----------
    qps : array_like, shape (n,)
        Completed requests per second in each time window (n >= 3), e.g. one
        value per minute from the service's metrics.
    cpu : array_like, shape (n,)
        CPU busy fraction in the same windows, as a fraction of ``cores`` in
        [0, 1]: 0.25 with ``cores=1`` is a quarter of one core, 0.25 with
        ``cores=4`` is one core busy.  Percentages are rejected (divide by 100).
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
        ``print_summary()``, ``predict(qps)``.

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

        cpu_i * cores = background + E[S] * qps_i + noise_i

    E[S] is the CPU seconds per request summed over cores; ``background`` the
    cores busy without traffic.  Then::

        background_share = background / (background + E[S] * mean(qps))
        capacity_qps     = (cores - background) / E[S]

    ``capacity_qps`` is the throughput at which the CPU is 100 % busy: the hard
    ceiling, not a safe operating point (latency diverges before it).

    Robust regression.  CPU series have one-sided spikes (deploys, cron jobs,
    GC storms) that drag ordinary least squares upward.  ``"huber"`` (default)
    minimises Huber's loss with tuning constant 1.345 (95 % efficient under
    Gaussian noise) at a fixed robust scale (1.4826 MAD of the residuals of a
    Theil-Sen start on at most 1500 evenly spaced windows, updated once);
    with the scale fixed the loss is convex, so the iteratively reweighted
    least squares converges to a unique answer (20,000 windows with 1000
    bootstrap resamples take about 12 s on one core).
    ``"theilsen"`` takes the median of all pairwise slopes (breakdown point
    29 %) and the median intercept; it costs O(n^2) memory and time per
    bootstrap resample, so it is refused beyond 3000 windows, and it is less
    efficient under clean Gaussian noise.  On the spiky synthetic benchmark in the tests (300
    windows, 5 % spikes of +0.3 CPU) both recover the cost within 1 %; Huber
    had the smaller error over 40 seeds (see tests/test_fit_utilization.py).

    Intervals are percentile intervals of a (moving-block) bootstrap over
    windows with the Huber scale held fixed.  Capacity intervals use the order
    statistics of the bootstrap capacities (a resample with zero slope has
    infinite capacity).  Windows whose residual exceeds 3 robust standard
    deviations are flagged in ``outliers_``; ``r2_`` is computed without them.

    Assumptions: E[S] is the same in every window (a stable request mix), CPU
    and QPS are measured over the same windows, and ``qps`` counts completed
    requests.

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
    q, u, c = _check_windows(qps, cpu, cores)
    if not (0 < confidence < 1) or isinstance(confidence, bool):
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if method not in ("huber", "theilsen"):
        raise ValueError(f"method must be 'huber' or 'theilsen', got {method!r}")
    if method == "theilsen" and q.size > _MAX_THEILSEN:
        raise ValueError(f"method='theilsen' costs O(n^2) per bootstrap resample; with {q.size} windows "
                         f"(> {_MAX_THEILSEN}) use method='huber'")
    if not np.any(q > 0):
        raise ValueError("qps must have at least one window with traffic (all windows are 0 req/s)")
    if isinstance(n_bootstrap, bool) or int(n_bootstrap) != n_bootstrap or n_bootstrap < 50:
        raise ValueError(f"n_bootstrap must be an integer >= 50, got {n_bootstrap!r}")
    if isinstance(block_size, bool) or int(block_size) != block_size or not 1 <= block_size <= q.size:
        raise ValueError(f"block_size must be an integer in [1, {q.size}], got {block_size!r}")
    intercept = None
    if background is not None:
        bg = as_float_array(background, "background")
        if bg.ndim != 0 or not np.isfinite(bg) or bg < 0 or bg > c:
            raise ValueError(f"background must be a number of cores in [0, cores={c:g}], got {background!r}")
        intercept = float(bg)

    y = u * c  # busy cores
    a, b, scale = _estimate(q, y, intercept, method)
    a, b, scale = float(a), float(b), float(scale)
    rng = np.random.default_rng(seed)
    a_bs, b_bs = _bootstrap(q, y, intercept, method, scale, (a, b), int(n_bootstrap), int(block_size), rng)

    alpha = 1.0 - confidence
    lo_q, hi_q = alpha / 2, 1 - alpha / 2

    def interval(samples):
        return (np.quantile(samples, lo_q, method="lower"), np.quantile(samples, hi_q, method="higher"))

    mean_q = float(q.mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = (c - b) / a if a > 0 else math.inf
        cap_bs = np.where(a_bs > 0, np.maximum(c - b_bs, 0.0) / np.where(a_bs > 0, a_bs, 1.0), np.inf)
        share = b / (b + a * mean_q) if (b + a * mean_q) > 0 else math.nan
        share_bs = b_bs / (b_bs + a_bs * mean_q)
    cap = max(cap, 0.0)

    resid = y - b - a * q
    robust_sd = float(_robust_scale(resid))
    outliers = np.abs(resid) > _OUTLIER_Z * max(robust_sd, 1e-12 * float(np.abs(y).mean()) + 1e-300)
    inl = ~outliers
    ss_tot = float(np.sum((y[inl] - y[inl].mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid[inl] ** 2)) / ss_tot if ss_tot > 0 else math.nan
    ss_tot_all = float(np.sum((y - y.mean()) ** 2))
    r2_all = 1.0 - float(np.sum(resid ** 2)) / ss_tot_all if ss_tot_all > 0 else math.nan

    from ..distributions import Service

    res = UtilizationFit(
        "utilisation law  cpu*cores = background + E[S]*qps",
        confidence_level=confidence,
        n_observations=q.size,
        method=f"{'Huber M-estimate' if method == 'huber' else 'Theil-Sen'}; "
               f"{'fixed' if intercept is not None else 'fitted'} background; "
               f"bootstrap over windows (B={int(n_bootstrap)}, block={int(block_size)}, seed={seed})",
    )
    res.cores = c
    res.cpu_per_request_ = a
    res.background_ = b
    res.background_share_ = float(share)
    res.capacity_qps_ = float(cap)
    res.service_ = Service.exponential(a) if a > 0 else None
    res.r2_ = r2
    res.residual_scale_ = robust_sd
    res.outliers_ = outliers
    res.residuals_ = resid
    res.bootstrap_ = {"cpu_per_request": a_bs, "background": b_bs, "capacity_qps": cap_bs}

    res._add_parameter("cpu_per_request", a, *interval(a_bs), unit="s", note="CPU seconds per request")
    if intercept is None:
        res._add_parameter("background", b, *interval(b_bs), unit="cores", note="busy cores at zero QPS")
        res._add_parameter("background_share", share, *interval(share_bs), unit="",
                           note=f"of CPU at mean QPS {mean_q:.4g}/s")
    else:
        res._add_parameter("background", b, unit="cores", note="held fixed")
        res._add_parameter("background_share", share, unit="", note=f"of CPU at mean QPS {mean_q:.4g}/s")
    res._add_parameter("capacity_qps", cap, *interval(cap_bs), unit="req/s", note="QPS at 100% CPU")
    res._set_quality("r2", r2)
    res._set_quality("r2_all_windows", r2_all)
    res._set_quality("residual_scale_cores", robust_sd)
    res._set_quality("outlier_windows", int(outliers.sum()))
    qps_cv = float(q.std() / mean_q) if mean_q > 0 else 0.0
    res._set_quality("qps_cv", qps_cv)

    # ---- caveats
    saturated = int(np.sum(u >= _SATURATED))
    if saturated:
        res._warn(OverloadWarning,
                  f"{saturated} of {q.size} windows have CPU >= {_SATURATED:.0%} of {c:g} cores: the CPU is "
                  "saturated there, so qps must count completed requests (offered load is capped)")
    if intercept is None and qps_cv < _MIN_QPS_CV:
        res._warn(IdentifiabilityWarning,
                  f"qps varies only {qps_cv:.1%} (coefficient of variation) across windows: the cost per "
                  "request and the background load cannot be separated; add windows at other loads or "
                  "fix background= (e.g. 0.0)")
    a_lo = res.summary.loc["cpu_per_request", "lower"]
    if not a_lo > 0:
        res._warn(FitWarning,
                  f"the CPU cost per request is not significantly above zero ({confidence:.0%} interval "
                  f"starts at {a_lo:.3g} s): CPU does not track QPS in these windows")
    mean_y = float(y.mean())
    if mean_y > 0 and robust_sd > _MAX_REL_SCALE * mean_y:
        res._warn(FitWarning,
                  f"large residuals: typical deviation {robust_sd:.3g} cores is {robust_sd / mean_y:.0%} "
                  "of the mean busy cores; the utilisation law with one cost per request does not explain "
                  "this CPU (request mix changing? other workloads?)")
    if outliers.mean() > _MAX_OUTLIER_SHARE:
        res._warn(FitWarning,
                  f"{outliers.mean():.0%} of the windows are outliers (|residual| > {_OUTLIER_Z:g} robust "
                  "sigmas): the data hold more than one regime")
    res._emit_warnings(stacklevel=3)
    return res
