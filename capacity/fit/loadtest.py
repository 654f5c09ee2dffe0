"""Fit a closed-loop load-test sweep: MVA demand and think time, and the Universal Scalability Law."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import as_float_array, check_nonnegative
from ..closed import mva
from ..exceptions import FitWarning, IdentifiabilityWarning
from ._result import FitResult

__all__ = ["LoadTestFit", "from_loadtest"]

ArrayLike = Any

_MAX_RMS_REL = 0.10       # relative RMS error above which a model "does not describe" the sweep
_MIN_PEAK_UTIL = 0.5      # max X*D below this: the sweep never approached saturation
_LATENCY_LAW_SLACK = 0.05  # N/X may undershoot R by 5 % (measurement windows) before we complain


# ---------------------------------------------------------------------- models (math)
def _usl(n, lam, sigma, kappa):
    """X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)); broadcasts."""
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def _usl_peak(sigma: float, kappa: float) -> float:
    """N* = sqrt((1 - sigma) / kappa), where dX/dN = 0; inf without coherency delay."""
    if kappa <= 0 or sigma >= 1:
        return math.inf
    return math.sqrt((1.0 - sigma) / kappa)


def _mva_curves(demand: np.ndarray, think: np.ndarray, users: np.ndarray):
    """Single-station MVA throughput and latency at ``users`` for a batch of (D, Z)."""
    res = mva(demand[:, None], think, int(users.max()))
    idx = users.astype(np.int64) - 1
    return res.throughput[:, idx], res.response_time[:, idx]


def _r2(x: np.ndarray, xm: np.ndarray) -> float:
    """Coefficient of determination of the model values ``xm`` for the data ``x``."""
    return 1.0 - float(np.sum((x - xm) ** 2)) / max(float(np.sum((x - x.mean()) ** 2)), 1e-300)


def _numeric_cov(jac: np.ndarray, resid: np.ndarray, n_params: int):
    """Gauss-Newton covariance s^2 (J^T J)^-1 with s^2 = SSR / (m - p); None without residual df."""
    m = resid.size
    dof = m - n_params
    if dof <= 0:
        return None, dof
    s2 = float(resid @ resid) / dof
    try:
        cov = np.linalg.pinv(jac.T @ jac) * s2
    except np.linalg.LinAlgError:  # pragma: no cover - pinv is robust
        return None, dof
    return cov, dof


# ---------------------------------------------------------------------- result
class LoadTestFit(FitResult):
    """Result of :func:`from_loadtest`.

    Attributes
    ----------
    demand_ : float
        D, seconds of service per request at the bottleneck (MVA; NaN if not fitted).
    think_time_ : float
        Z, seconds between a response and the client's next request (MVA).
    lambda1_ : float
        USL throughput of one client without contention, requests/s.
    sigma_ : float
        USL contention (serial fraction), dimensionless.
    kappa_ : float
        USL coherency delay, dimensionless.
    peak_concurrency_ : float
        N* = sqrt((1 - sigma) / kappa), the USL population of maximum throughput
        (inf when kappa = 0).
    peak_throughput_ : float
        X(N*), requests/s.
    mva_capacity_qps_ : float
        1 / D, the saturation throughput of the MVA station.
    open_loop_capacity_qps_ : float
        Ceiling for an open (Poisson) request stream: the smaller of 1 / D and
        X(N*) among the fitted models.  A hard limit, not a safe rate.
    concurrency, throughput, mean_latency : ndarray
        The data (sorted by concurrency).
    """

    model_kind: str

    def predict(self, concurrency: ArrayLike):
        """Model throughput (and MVA latency) at the given concurrencies, as a DataFrame.

        Columns ``mva_throughput`` and ``mva_latency`` (MVA fitted; needs
        integer concurrency) and ``usl_throughput`` (USL fitted).
        """
        import pandas as pd

        n = np.atleast_1d(as_float_array(concurrency, "concurrency"))
        if np.any(~np.isfinite(n) | (n < 1)):
            raise ValueError(f"concurrency must be >= 1 and finite, got {concurrency!r}")
        cols: dict[str, np.ndarray] = {"concurrency": n}
        if np.isfinite(self.demand_):
            if np.any(n != np.round(n)):
                raise ValueError(f"concurrency must be whole numbers for MVA, got {concurrency!r}")
            x, r = _mva_curves(np.array([self.demand_]), np.array([self.think_time_]), n)
            cols["mva_throughput"], cols["mva_latency"] = x[0], r[0]
        if np.isfinite(self.sigma_):
            cols["usl_throughput"] = _usl(n, self.lambda1_, self.sigma_, self.kappa_)
        return pd.DataFrame(cols)


# ---------------------------------------------------------------------- fitting pieces
def _fit_mva(n, x, r, think_time, level, res: LoadTestFit):
    """Least squares on log throughput (and log latency) over (log D, Z)."""
    from scipy import optimize, stats

    fit_z = think_time is None
    d0 = 1.0 / float(x.max())
    if not fit_z:
        z0 = float(think_time)
    elif r is not None:
        z0 = max(float(np.median(n / x - r)), 0.0)
    else:
        z0 = max(float(n[0] / x[0] - d0), 0.0)

    def unpack(theta):
        theta = np.atleast_2d(theta)
        d = np.exp(theta[:, 0])
        z = theta[:, 1] if fit_z else np.full(theta.shape[0], float(think_time))
        return d, z

    def residuals_batch(theta):
        d, z = unpack(theta)
        xm, rm = _mva_curves(d, z, n)
        parts = [np.log(xm / x)]
        if r is not None:
            parts.append(np.log(rm / r))
        return np.concatenate(parts, axis=-1)

    def fun(theta):
        return residuals_batch(theta)[0]

    def jac(theta):
        # One batched MVA call for the central differences of every parameter.
        p = theta.size
        h = 1e-6 * np.maximum(np.abs(theta), 1e-3)
        pts = np.repeat(theta[None, :], 2 * p, axis=0)
        for k in range(p):
            pts[2 * k, k] += h[k]
            pts[2 * k + 1, k] -= h[k]
        if fit_z:  # keep Z >= 0 in the difference stencil
            pts[:, 1] = np.maximum(pts[:, 1], 0.0)
        vals = residuals_batch(pts)
        cols = [(vals[2 * k] - vals[2 * k + 1]) / (pts[2 * k, k] - pts[2 * k + 1, k]) for k in range(p)]
        return np.stack(cols, axis=1)

    if fit_z:
        theta0 = np.array([math.log(d0), z0])
        bounds = ([-np.inf, 0.0], [np.inf, np.inf])
    else:
        theta0 = np.array([math.log(d0)])
        bounds = (-np.inf, np.inf)
    sol = optimize.least_squares(fun, theta0, jac=jac, bounds=bounds, x_scale="jac", method="trf",
                                 xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=500)
    d_hat, z_hat = (float(v[0]) for v in unpack(sol.x))
    cov, dof = _numeric_cov(sol.jac, sol.fun, theta0.size)
    if cov is not None:
        t = stats.t.ppf(0.5 + level / 2, dof)
        se_logd = math.sqrt(max(cov[0, 0], 0.0))
        d_lo, d_hi = d_hat * math.exp(-t * se_logd), d_hat * math.exp(t * se_logd)
        if fit_z:
            se_z = math.sqrt(max(cov[1, 1], 0.0))
            z_lo, z_hi = max(z_hat - t * se_z, 0.0), z_hat + t * se_z
        else:
            z_lo = z_hi = math.nan
    else:
        d_lo = d_hi = z_lo = z_hi = math.nan
        se_logd = math.nan
        res._warn(IdentifiabilityWarning,
                  "MVA: as many parameters as data points, the fit is exact and has no interval; "
                  "add concurrency levels")

    xm, rm = _mva_curves(np.array([d_hat]), np.array([z_hat]), n)
    xm, rm = xm[0], rm[0]
    res.demand_, res.think_time_ = d_hat, z_hat
    res.mva_capacity_qps_ = 1.0 / d_hat
    res._add_parameter("demand", d_hat, d_lo, d_hi, unit="s", note="MVA service demand D")
    if fit_z:
        res._add_parameter("think_time", z_hat, z_lo, z_hi, unit="s", note="MVA think/IO time Z")
    else:
        res._add_parameter("think_time", z_hat, unit="s", note="held fixed")
    res._add_parameter("mva_capacity_qps", 1.0 / d_hat, 1.0 / d_hi if d_hi > 0 else math.nan,
                       1.0 / d_lo if d_lo > 0 else math.nan, unit="req/s", note="1/D")
    rel = xm / x - 1.0
    rms = float(np.sqrt(np.mean(rel ** 2)))
    res._set_quality("mva_r2", _r2(x, xm))
    res._set_quality("mva_rms_rel_error", rms)
    if r is not None:
        res._set_quality("mva_latency_rms_rel_error", float(np.sqrt(np.mean((rm / r - 1.0) ** 2))))
    if not sol.success:
        res._warn(FitWarning, f"MVA fit did not converge: {sol.message}")
    if rms > _MAX_RMS_REL:
        hint = ""
        if np.any(np.diff(x) < 0):
            hint = " (throughput falls at high concurrency, which MVA cannot produce: see the USL fit)"
        res._warn(FitWarning,
                  f"MVA: large residuals, throughput off by {rms:.0%} RMS; a single queueing station does "
                  f"not describe this sweep{hint}")
    if r is None and fit_z and float(x.max()) * d_hat < _MIN_PEAK_UTIL:
        res._warn(IdentifiabilityWarning,
                  f"MVA: the sweep reached only {float(x.max()) * d_hat:.0%} of the fitted saturation "
                  "throughput, so demand and think time are confounded and 1/D is an extrapolation; pass "
                  "mean_latency, fix think_time, or test at higher concurrency")
    elif cov is not None and se_logd > 0.5:
        res._warn(IdentifiabilityWarning,
                  f"MVA: the demand D is poorly determined (relative standard error {se_logd:.0%})")
    return xm, rm


def _fit_usl(n, x, level, res: LoadTestFit):
    """Nonlinear least squares on throughput over (lambda1, sigma, kappa), sigma and kappa >= 0."""
    from scipy import optimize, stats

    # Start from Gunther's quadratic: with C = X / lambda, N/C - 1 = sigma (N-1) + kappa N (N-1).
    lam0 = float(np.max(x[n == n.min()] / n.min()))
    a = np.c_[n - 1.0, n * (n - 1.0)]
    (s0, k0), *_ = np.linalg.lstsq(a, n * lam0 / x - 1.0, rcond=None)
    p0 = [lam0, min(max(s0, 1e-4), 0.9), max(k0, 1e-8)]
    with np.errstate(over="ignore", invalid="ignore"):
        sol = optimize.least_squares(lambda p: _usl(n, *p) - x, p0,
                                     bounds=([0.0, 0.0, 0.0], [np.inf, 1.0, 1.0]), x_scale="jac",
                                     method="trf", xtol=1e-14, ftol=1e-14, gtol=1e-14, max_nfev=2000)
    lam, sigma, kappa = (float(v) for v in sol.x)
    cov, dof = _numeric_cov(sol.jac, sol.fun, 3)
    peak_n = _usl_peak(sigma, kappa)
    if math.isfinite(peak_n):
        peak_x = float(_usl(peak_n, lam, sigma, kappa))
    else:  # no coherency term: Amdahl's asymptote lambda1 / sigma
        peak_x = lam / sigma if sigma > 0 else math.inf
    ci = {k: (math.nan, math.nan) for k in ("lambda1", "sigma", "kappa", "peak_n", "peak_x")}
    if cov is not None:
        t = float(stats.t.ppf(0.5 + level / 2, dof))
        se = np.sqrt(np.maximum(np.diag(cov), 0.0))
        ci["lambda1"] = (max(lam - t * se[0], 0.0), lam + t * se[0])
        ci["sigma"] = (max(sigma - t * se[1], 0.0), sigma + t * se[1])
        ci["kappa"] = (max(kappa - t * se[2], 0.0), kappa + t * se[2])
        if math.isfinite(peak_n) and kappa > 0:
            # Delta method on the logs (both quantities are positive, skewed intervals).
            g_n = np.array([0.0, -0.5 / (1.0 - sigma), -0.5 / kappa])  # d log N* / d(lam, sigma, kappa)
            se_n = math.sqrt(max(float(g_n @ cov @ g_n), 0.0))
            eps = 1e-6
            grad = np.empty(3)
            for k in range(3):
                p_hi, p_lo = sol.x.copy(), sol.x.copy()
                step = eps * max(abs(sol.x[k]), 1e-12)
                p_hi[k] += step
                p_lo[k] -= step
                f_hi = math.log(_usl(_usl_peak(p_hi[1], p_hi[2]), *p_hi))
                f_lo = math.log(_usl(_usl_peak(p_lo[1], max(p_lo[2], 1e-300)), *p_lo))
                grad[k] = (f_hi - f_lo) / (2 * step)
            se_x = math.sqrt(max(float(grad @ cov @ grad), 0.0))
            ci["peak_n"] = (peak_n * math.exp(-t * se_n), peak_n * math.exp(t * se_n))
            ci["peak_x"] = (peak_x * math.exp(-t * se_x), peak_x * math.exp(t * se_x))
            if ci["kappa"][0] <= 0:
                ci["peak_n"] = (ci["peak_n"][0], math.inf)
    else:
        res._warn(IdentifiabilityWarning,
                  "USL: three points for three parameters, the fit is exact and has no interval; "
                  "add concurrency levels")

    res.lambda1_, res.sigma_, res.kappa_ = lam, sigma, kappa
    res.peak_concurrency_, res.peak_throughput_ = peak_n, peak_x
    res._add_parameter("lambda1", lam, *ci["lambda1"], unit="req/s", note="USL throughput of one client")
    res._add_parameter("sigma", sigma, *ci["sigma"], unit="", note="USL contention")
    res._add_parameter("kappa", kappa, *ci["kappa"], unit="", note="USL coherency")
    res._add_parameter("peak_concurrency", peak_n, *ci["peak_n"], unit="clients",
                       note="N* = sqrt((1-sigma)/kappa)")
    res._add_parameter("peak_throughput", peak_x, *ci["peak_x"], unit="req/s", note="X(N*)")
    xm = _usl(n, lam, sigma, kappa)
    # The USL is fitted on absolute errors, so judge it by the RMS error relative to the mean
    # throughput (the per-point relative error is also reported: it is large at N = 1 on SDM91).
    nrmse = float(np.sqrt(np.mean((xm - x) ** 2)) / np.mean(x))
    res._set_quality("usl_r2", _r2(x, xm))
    res._set_quality("usl_rmse_over_mean", nrmse)
    res._set_quality("usl_rms_rel_error", float(np.sqrt(np.mean((xm / x - 1.0) ** 2))))
    if not sol.success:
        res._warn(FitWarning, f"USL fit did not converge: {sol.message}")
    if nrmse > _MAX_RMS_REL:
        res._warn(FitWarning, f"USL: large residuals, RMS error {nrmse:.0%} of the mean throughput")
    if cov is not None and not ci["kappa"][0] > 0:
        res._warn(IdentifiabilityWarning,
                  "USL: kappa is not significantly above zero, so these data do not locate a throughput "
                  "peak (peak_concurrency has no upper bound); test at higher concurrency")
    return xm


# ---------------------------------------------------------------------- public
def _check_sweep(concurrency, throughput, mean_latency, think_time, model):
    n = as_float_array(concurrency, "concurrency")
    x = as_float_array(throughput, "throughput")
    if n.ndim != 1:
        raise ValueError(f"concurrency must be a 1-D array of client counts, got shape {n.shape}")
    if x.shape != n.shape:
        raise ValueError(f"throughput must have the same shape as concurrency {n.shape}, got {x.shape}")
    bad = ~np.isfinite(n) | (n < 1)
    if bad.any():
        raise ValueError(f"concurrency must be >= 1 and finite, got {n[bad][0]!r}")
    bad = ~np.isfinite(x) | (x <= 0)
    if bad.any():
        raise ValueError(f"throughput must be positive and finite, got {x[bad][0]!r}")
    r = None
    if mean_latency is not None:
        r = as_float_array(mean_latency, "mean_latency")
        if r.shape != n.shape:
            raise ValueError(f"mean_latency must have the same shape as concurrency {n.shape}, got {r.shape}")
        bad = ~np.isfinite(r) | (r <= 0)
        if bad.any():
            raise ValueError(f"mean_latency must be positive and finite, got {r[bad][0]!r}")
    if think_time is not None:
        z = check_nonnegative(think_time, "think_time")
        if z.ndim != 0:
            raise ValueError(f"think_time must be a single number of seconds, got {think_time!r}")
        think_time = float(z)
    if model not in ("mva", "usl", "both"):
        raise ValueError(f"model must be 'mva', 'usl' or 'both', got {model!r}")
    order = np.argsort(n, kind="stable")
    n, x = n[order], x[order]
    r = None if r is None else r[order]
    distinct = np.unique(n).size
    if model in ("usl", "both") and distinct < 3:
        raise ValueError(
            f"concurrency needs at least 3 distinct levels for the USL (3 parameters), got {distinct}"
        )
    if model in ("mva", "both"):
        if np.any(n != np.round(n)):
            raise ValueError(f"concurrency must be whole numbers of clients for MVA, got {concurrency!r}")
        if think_time is None and r is None and distinct < 2:
            raise ValueError("concurrency needs at least 2 distinct levels to fit MVA demand and think time, "
                             f"got {distinct}")
    return n, x, r, think_time


def from_loadtest(
    concurrency: ArrayLike,
    throughput: ArrayLike,
    mean_latency: ArrayLike | None = None,
    *,
    think_time: float | None = None,
    model: str = "both",
    confidence: float = 0.95,
) -> LoadTestFit:
    """Fit a closed-loop load-test sweep with MVA and the Universal Scalability Law.

    Parameters
    ----------
    concurrency : array_like, shape (n,)
        N, concurrent clients of each run (``ab -c N``, ``wrk -c N``, k6 VUs);
        whole numbers >= 1 for MVA.  Any order; repeated levels allowed.
    throughput : array_like, shape (n,)
        X(N), completed requests per second measured in each run.
    mean_latency : array_like, shape (n,), optional
        Mean response time R(N) of each run, seconds.  Improves the MVA fit:
        it pins the think time through the response-time law Z = N/X - R.
    think_time : float, optional
        Z, seconds each client waits between a response and its next request,
        if known (0 for ``ab``/``wrk`` without pacing); fitted when omitted.
    model : {"both", "mva", "usl"}, default "both"
        Which models to fit.
    confidence : float, default 0.95
        Coverage of the (asymptotic, Gauss-Newton) intervals.

    Returns
    -------
    LoadTestFit
        ``demand_``, ``think_time_``, ``mva_capacity_qps_`` (MVA);
        ``lambda1_``, ``sigma_``, ``kappa_``, ``peak_concurrency_``,
        ``peak_throughput_`` (USL); ``open_loop_capacity_qps_``; ``summary``,
        ``fit_quality_``, ``tables_["observed vs model"]``, ``print_summary()``,
        ``predict(concurrency)``.  Parameters of a model not fitted are NaN.

    Raises
    ------
    ValueError
        Non-positive or NaN data, arrays of different shapes, fewer than 3
        distinct concurrencies for the USL or fewer than 2 for MVA with a
        fitted think time (and no latencies).

    Warns
    -----
    FitWarning
        An optimiser did not converge; a model misses the throughput by more
        than 10 % RMS; latencies violate the response-time law (R > N/X).
    IdentifiabilityWarning
        No residual degrees of freedom; the sweep never approached saturation
        (MVA demand and think time confounded); kappa not significantly > 0
        (the USL peak is not located by the data).

    Notes
    -----
    **MVA.**  One queueing station with service demand D (a processor-sharing
    or exponential FCFS server) and N clients that think for Z seconds
    between requests.  Exact MVA (:func:`capacity.closed.mva`) gives X(N) and
    R(N); D and Z minimise the sum of squared log errors of X (and of R when
    ``mean_latency`` is given) over the runs.  Relative (log) errors weigh the
    runs equally whatever their scale.  Intervals: Gauss-Newton covariance,
    Student t with (residuals - parameters) degrees of freedom; D on the log
    scale.  A multi-core server is not a single station: D is then an
    *effective* demand (about CPU seconds per request / cores at saturation)
    and the low-load latency is not reproduced exactly.

    **USL** (Gunther 2007, ch. 4-5)::

        X(N) = lambda1 N / (1 + sigma (N - 1) + kappa N (N - 1))
        N*   = sqrt((1 - sigma) / kappa),   peak X(N*)

    fitted by nonlinear least squares on X (absolute errors, as R's ``usl``
    package does with ``nls``), 0 <= sigma, kappa <= 1, lambda1 > 0 estimated
    (not fixed to X(1)).  Standard errors from the Gauss-Newton covariance;
    intervals of N* and X(N*) by the delta method on their logs.  On the SPEC
    SDM91 data this reproduces the ``usl`` package's sigma = 0.0277285,
    kappa = 0.0001044, lambda1 = 89.995, N* = 96.5 (tests/test_fit_loadtest.py).

    **Open-loop ceiling.**  MVA: 1/D, the saturation throughput of the
    station.  USL: X(N*), the most the system ever delivered.  The reported
    ``open_loop_capacity_qps_`` is the smaller of the fitted ones.

    *Why closed-loop numbers overstate open-loop capacity.*  A closed test
    caps the population at N: a slow response delays that client's next
    request (coordinated omission), so queueing throttles itself and latency
    grows only linearly past the knee.  Production traffic is an open stream:
    requests keep arriving while earlier ones are slow, so near saturation the
    queue grows without bound (R = D/(1 - rho) for one PS station).  With
    D = 10 ms and Z = 90 ms, MVA gives X = 98.0 req/s at R = 63 ms for
    N = 15 clients, but an open Poisson stream at the same 98 req/s
    (rho = 0.98) has R = 0.010/0.02 = 0.50 s, eight times more; N = 20 gives
    99.94 req/s at 110 ms where the open stream has R = 16 s.  Plan open
    traffic well below the ceiling this fit reports, with the PS/FCFS queue
    formulas.

    References
    ----------
    N. J. Gunther, *Guerrilla Capacity Planning*, Springer 2007, ch. 4-5
    (USL, its regression, and the SPEC SDM91 example).
    S. Moeding, R package ``usl`` (CRAN), dataset ``specsdm91`` and
    ``usl(throughput ~ load, specsdm91)``.
    M. Reiser, S. S. Lavenberg, "Mean-value analysis of closed multichain
    queueing networks", J. ACM 27(2), 1980.
    B. Schroeder, A. Wierman, M. Harchol-Balter, "Open versus closed: a
    cautionary tale", NSDI 2006.

    Examples
    --------
    SPEC SDM91 (Sun SPARCcenter 2000, Gunther 2007; scripts per hour):

    >>> from capacity.fit import from_loadtest
    >>> n = [1, 18, 36, 72, 108, 144, 216]
    >>> x = [64.9, 995.9, 1652.4, 1853.2, 1828.9, 1775.0, 1702.2]
    >>> fit = from_loadtest(n, x, model="usl")
    >>> round(fit.sigma_, 4), round(fit.kappa_, 6), round(fit.peak_concurrency_, 1)
    (0.0277, 0.000104, 96.5)

    A sweep generated by MVA with D = 5 ms and Z = 20 ms is recovered:

    >>> from capacity.closed import mva
    >>> users = [1, 2, 4, 8, 16, 32]
    >>> curve = mva(0.005, 0.020, 32)
    >>> xs = [float(curve.throughput[u - 1]) for u in users]
    >>> fit = from_loadtest(users, xs, model="mva")
    >>> round(fit.demand_, 6), round(fit.think_time_, 6), round(fit.open_loop_capacity_qps_, 1)
    (0.005, 0.02, 200.0)
    """
    if not (0 < confidence < 1) or isinstance(confidence, bool):
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    n, x, r, think = _check_sweep(concurrency, throughput, mean_latency, think_time, model)
    import pandas as pd

    res = LoadTestFit(
        {"both": "closed loop: MVA (one station) and USL", "mva": "closed loop: MVA (one station)",
         "usl": "Universal Scalability Law"}[model],
        confidence_level=confidence,
        n_observations=n.size,
        method="least squares; Gauss-Newton standard errors, Student t intervals",
    )
    res.model_kind = model
    res.concurrency, res.throughput, res.mean_latency = n, x, r
    nan = math.nan
    res.demand_ = res.think_time_ = res.mva_capacity_qps_ = nan
    res.lambda1_ = res.sigma_ = res.kappa_ = res.peak_concurrency_ = res.peak_throughput_ = nan
    table = {"concurrency": n, "throughput": x}
    if r is not None:
        table["mean_latency"] = r
        implied_z = n / x - r
        worst = float(np.min(implied_z / r))
        if worst < -_LATENCY_LAW_SLACK:
            res._warn(FitWarning,
                      f"mean_latency exceeds concurrency/throughput by up to {-worst:.0%}: the response-time "
                      "law R = N/X - Z needs Z >= 0; were throughput and latency measured over the same "
                      "window, and does throughput count every completed request?")
    if model in ("mva", "both"):
        xm, rm = _fit_mva(n, x, r, think, confidence, res)
        table["mva_throughput"] = xm
        table["mva_latency"] = rm
    if model in ("usl", "both"):
        table["usl_throughput"] = _fit_usl(n, x, confidence, res)
    res._add_table("observed vs model", pd.DataFrame(table))

    caps = [(res.mva_capacity_qps_, "mva_capacity_qps"), (res.peak_throughput_, "peak_throughput")]
    caps = [(v, k) for v, k in caps if not math.isnan(v)]
    best, key = min(caps)
    res.open_loop_capacity_qps_ = float(best)
    row = res.summary.loc[key]
    res._add_parameter("open_loop_capacity_qps", best, row["lower"], row["upper"], unit="req/s",
                       note=f"hard ceiling (= {key}); plan below it")
    res._emit_warnings(stacklevel=3)
    return res
