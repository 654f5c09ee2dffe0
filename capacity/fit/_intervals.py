"""Interval layer of the fits: how uncertain each estimate is, from what the solver returned.

* Generalised least squares (percentile fits, :func:`percentile_covariance`): the sampling
  covariance of empirical quantiles plus a precision floor weighs the log residuals; the
  parameters' covariance follows, then Wald intervals on the log scale (:class:`WaldIntervals`).
* Profile (round-robin slices, :func:`consistent_slices`): the counts whose fit is within the
  noise of the best.
* Gauss-Newton covariance with Student t (load tests: :func:`gauss_newton_covariance`,
  :func:`mva_intervals`, :func:`usl_intervals`, the USL peak by the delta method on its logs).
* Moving-block bootstrap with percentile intervals (utilisation windows:
  :func:`block_bootstrap`, :func:`percentile_interval`).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._model import measured_quantiles, usl, usl_peak
from ._solve import robust_line

__all__ = [
    "DASHBOARD_PRECISION",
    "PRECISION_FLOOR",
    "RR_MODEL_ERROR",
    "DeltaMethod",
    "WaldIntervals",
    "block_bootstrap",
    "consistent_slices",
    "gauss_newton_covariance",
    "mva_intervals",
    "percentile_covariance",
    "observation_covariance",
    "percentile_interval",
    "sampling_covariance",
    "slices_noise",
    "usl_intervals",
    "whitening",
]

DASHBOARD_PRECISION = 0.01   # 1 % relative error assumed for percentiles without n_requests
PRECISION_FLOOR = DASHBOARD_PRECISION   # no percentile is weighed as more precise than this
# Relative error of the rr quantile approximation itself on p90-p99.9 (capacity.rr docstring:
# p90 within 7 %, p99 within 5 %, p99.9 within 18 %, mostly 2-4 %): a noise floor below which
# residual differences between slice counts say nothing.
RR_MODEL_ERROR = 0.03
_CHI2_1_95 = 3.841        # 95 % point of chi-square with 1 degree of freedom
_CHUNK = 4_000_000        # elements per bootstrap chunk (memory bound)


# ---------------------------------------------------------------------- delta method (percentiles)
@dataclasses.dataclass
class DeltaMethod:
    """``cov``: covariance of the search parameters (None without ``n_requests``); ``sigma``:
    sampling covariance of the log-percentiles (None without ``n_requests``); ``total``: the
    covariance the fit weighs them by (``sigma`` plus the precision floor); ``deviance``:
    ``r^T total^-1 r``; ``reduced_chi2`` its value per residual degree of freedom (NaN without)."""

    cov: np.ndarray | None
    sigma: np.ndarray | None
    total: np.ndarray
    deviance: float
    reduced_chi2: float


def sampling_covariance(space, theta: np.ndarray) -> np.ndarray | None:
    """Sampling covariance of the observed log-percentiles at the model ``theta``; None without
    ``n_requests``.

    An empirical q-quantile of n i.i.d. latencies has asymptotic variance
    ``q(1-q) / (n f(x_q)^2)``, covariance ``p(1-q) / (n f(x_p) f(x_q))`` for p < q (same
    sample), f the density of the time as measured under the model (d log x / dq by a central
    difference); percentiles of different observations are independent.
    """
    obs = space.obs
    if not obs.have_n:
        return None
    m = obs.q.size
    h = np.minimum(1e-4, 0.1 * np.minimum(obs.q, 1 - obs.q))
    both = measured_quantiles(space.model, space.unpack(theta[None, :]), np.concatenate([obs.q - h, obs.q + h]),
                              np.tile(obs.lam, 2), np.tile(obs.servers, 2), space.measured_at)[0]
    g = (np.log(both[m:]) - np.log(both[:m])) / (2 * h)
    qi, qj = obs.q[:, None], obs.q[None, :]
    same = obs.obs_index[:, None] == obs.obs_index[None, :]
    sigma = np.where(same, np.minimum(qi, qj) * (1 - np.maximum(qi, qj)), 0.0)
    return sigma * g[:, None] * g[None, :] / obs.n_requests[:, None]


def observation_covariance(space, theta: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """``(sampling, total)``: the sampling covariance of the log-percentiles (None without
    ``n_requests``) and the covariance a fit weighs them by, ``sampling + PRECISION_FLOOR^2 I``.

    The floor is the precision no percentile is trusted beyond, sample size aside: a
    dashboard's rounding, and the models' own accuracy (the tables' interpolation, the
    approximations' stated errors, a real server's departures from Poisson arrivals).  Without
    ``n_requests`` the weights are equal, and the fit is ordinary least squares on the logs.
    """
    m = space.obs.q.size
    sampling = sampling_covariance(space, theta)
    floor = PRECISION_FLOOR ** 2 * np.eye(m)
    return sampling, floor if sampling is None else sampling + floor


def whitening(total: np.ndarray) -> np.ndarray:
    """``L^-1`` with ``total = L L^T`` (Cholesky): whitened residuals ``L^-1 r`` have unit covariance."""
    return np.linalg.inv(np.linalg.cholesky(total))


def percentile_covariance(space, sol) -> DeltaMethod:
    """The percentile fit's deviance and, with ``n_requests``, the covariance of its parameters.

    Generalised least squares: with ``Sigma`` the observations' covariance
    (:func:`observation_covariance` at the estimate), the deviance is ``r^T Sigma^-1 r`` and the
    covariance ``(J^T Sigma^-1 J)^-1``, inflated by the reduced chi-square ``deviance / (m - p)``
    when above 1 (a misfit, or latencies correlated in the queue beyond what n independent
    requests carry).
    """
    obs, r, J = space.obs, sol.residuals, sol.jacobian
    m, p = obs.q.size, len(space.names)
    sampling, total = observation_covariance(space, sol.theta)
    w = whitening(total)
    rw = w @ r
    deviance = float(rw @ rw)
    dof = m - p
    chi2 = deviance / dof if dof > 0 else math.nan
    cov = None
    if sampling is not None and p:
        jw = w @ J
        cov = np.linalg.pinv(jw.T @ jw)
        if math.isfinite(chi2) and chi2 > 1:
            cov = cov * chi2
    return DeltaMethod(cov, sampling, total, deviance, chi2 if sampling is not None else math.nan)


class WaldIntervals:
    """Wald intervals of the search parameters: on the log scale (a factor either way) for the
    log parameters, in seconds for a constant delay (``delay`` in units of ``t_ref``)."""

    def __init__(self, cov: np.ndarray | None, names: list[str], confidence: float, t_ref: float):
        from scipy.special import ndtri

        self.cov, self.names, self.t_ref = cov, names, t_ref
        self.z = float(ndtri(0.5 + confidence / 2))

    def se(self, name: str) -> float:
        k = self.names.index(name)
        return math.sqrt(max(self.cov[k, k], 0.0))

    def interval(self, name: str, value: float, log: bool = True) -> tuple[float, float]:
        """``(lower, upper)`` of the natural parameter ``value``; NaN when held or without ``cov``."""
        if self.cov is None or name not in self.names:
            return math.nan, math.nan
        se = self.se(name)
        if log:
            # A parameter the data barely constrain has a huge standard error:
            # its upper bound is infinite (and said so by the identifiability
            # warning), not an OverflowError.
            spread = self.z * se
            if spread > 700.0:
                return 0.0, math.inf
            return value * math.exp(-spread), value * math.exp(spread)
        s = se * self.t_ref
        return max(value - self.z * s, 0.0), value + self.z * s


# ---------------------------------------------------------------------- profile (rr slices)
def slices_noise(delta: DeltaMethod) -> float:
    """Relative precision of one percentile: from ``n_requests`` when known, else 1 %."""
    if delta.sigma is None:
        return DASHBOARD_PRECISION
    return float(np.sqrt(np.mean(np.diag(delta.sigma))))


def consistent_slices(rms_k: dict, m: int, noise: float) -> list:
    """Slice counts whose fit is not worse than the best by more than the noise allows.

    Profile-likelihood rule: with m log-percentiles of independent relative error ``sigma``,
    ``m (RMS_k^2 - RMS_min^2) / sigma^2`` is approximately chi-square(1) for the true k; keep k
    where it is below the 95 % point.  ``sigma^2 = noise^2 + RR_MODEL_ERROR^2``.
    """
    sig2 = noise ** 2 + RR_MODEL_ERROR ** 2
    best = min(rms_k.values())
    return [k for k, v in rms_k.items() if m * (v ** 2 - best ** 2) <= _CHI2_1_95 * sig2]


# ---------------------------------------------------------------------- Gauss-Newton (load tests)
def gauss_newton_covariance(jac: np.ndarray, resid: np.ndarray, n_params: int):
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


def mva_intervals(sol, d_hat: float, z_hat: float, fit_z: bool, level: float):
    """``({"demand": (lo, hi), "think_time": (lo, hi)}, se of log D, has covariance)``: D on the
    log scale, Z clipped at 0; NaN without residual degrees of freedom."""
    from scipy import stats

    cov, dof = gauss_newton_covariance(sol.jac, sol.fun, sol.x.size)
    if cov is None:
        nan = (math.nan, math.nan)
        return {"demand": nan, "think_time": nan}, math.nan, False
    t = stats.t.ppf(0.5 + level / 2, dof)
    se_logd = math.sqrt(max(cov[0, 0], 0.0))
    out = {"demand": (d_hat * math.exp(-t * se_logd), d_hat * math.exp(t * se_logd)),
           "think_time": (math.nan, math.nan)}
    if fit_z:
        se_z = math.sqrt(max(cov[1, 1], 0.0))
        out["think_time"] = (max(z_hat - t * se_z, 0.0), z_hat + t * se_z)
    return out, se_logd, True


def _log_peak_throughput_gradient(x: np.ndarray) -> np.ndarray:
    """d log X(N*) / d(lambda1, sigma, kappa) by central differences."""
    eps = 1e-6
    grad = np.empty(3)
    for k in range(3):
        p_hi, p_lo = x.copy(), x.copy()
        step = eps * max(abs(x[k]), 1e-12)
        p_hi[k] += step
        p_lo[k] -= step
        f_hi = math.log(usl(usl_peak(p_hi[1], p_hi[2]), *p_hi))
        f_lo = math.log(usl(usl_peak(p_lo[1], max(p_lo[2], 1e-300)), *p_lo))
        grad[k] = (f_hi - f_lo) / (2 * step)
    return grad


def usl_intervals(sol, peak_n: float, peak_x: float, level: float):
    """``(intervals, has covariance)`` of lambda1, sigma, kappa (clipped at 0), and of the peak
    N* and X(N*) by the delta method on their logs (both positive, skewed intervals)."""
    from scipy import stats

    lam, sigma, kappa = (float(v) for v in sol.x)
    ci = {k: (math.nan, math.nan) for k in ("lambda1", "sigma", "kappa", "peak_n", "peak_x")}
    cov, dof = gauss_newton_covariance(sol.jac, sol.fun, 3)
    if cov is None:
        return ci, False
    t = float(stats.t.ppf(0.5 + level / 2, dof))
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    ci["lambda1"] = (max(lam - t * se[0], 0.0), lam + t * se[0])
    ci["sigma"] = (max(sigma - t * se[1], 0.0), sigma + t * se[1])
    ci["kappa"] = (max(kappa - t * se[2], 0.0), kappa + t * se[2])
    if math.isfinite(peak_n) and kappa > 0:
        g_n = np.array([0.0, -0.5 / (1.0 - sigma), -0.5 / kappa])  # d log N* / d(lam, sigma, kappa)
        se_n = math.sqrt(max(float(g_n @ cov @ g_n), 0.0))
        grad = _log_peak_throughput_gradient(sol.x)
        se_x = math.sqrt(max(float(grad @ cov @ grad), 0.0))
        ci["peak_n"] = (peak_n * math.exp(-t * se_n), peak_n * math.exp(t * se_n))
        ci["peak_x"] = (peak_x * math.exp(-t * se_x), peak_x * math.exp(t * se_x))
        if ci["kappa"][0] <= 0:
            ci["peak_n"] = (ci["peak_n"][0], math.inf)
    return ci, True


# ---------------------------------------------------------------------- bootstrap (utilisation)
def block_bootstrap(x, y, intercept, method, scale, start, n_boot, block, rng):
    """Moving-block bootstrap over windows: arrays of slopes and intercepts, shape (n_boot,).

    Huber resamples hold the full-sample robust ``scale`` and start from its estimate.
    """
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
            a, b, _ = robust_line(xb, yb, intercept, method)
        else:
            a, b, _ = robust_line(xb, yb, intercept, method, scale=np.full(m, scale),
                                  start=(np.full(m, start[0]), np.full(m, start[1])))
        a_out[lo:lo + m], b_out[lo:lo + m] = a, b
    return a_out, b_out


def percentile_interval(samples: np.ndarray, confidence: float):
    """Two-sided percentile interval of bootstrap ``samples`` (conservative order statistics)."""
    alpha = 1.0 - confidence
    lo_q, hi_q = alpha / 2, 1 - alpha / 2
    return (np.quantile(samples, lo_q, method="lower"), np.quantile(samples, hi_q, method="higher"))
