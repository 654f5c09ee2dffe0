"""Solver layer of the fits: where the parameters are searched, from where, and how.

* Percentile fits: :class:`SearchSpace` (the free parameters on the log scale, their bounds, and
  the map to the natural parameters of :class:`~capacity.fit._model.QueueModel`), the
  closed-form :func:`start` and the :func:`grid_start` restart, bounded trust-region least
  squares on log residuals (:func:`fit_space`), and the profile over round-robin slice counts
  (:func:`profile_slices`).
* Load tests: least squares for MVA (:func:`solve_mva`) and the USL (:func:`solve_usl`).
* Utilisation windows: robust straight lines, Huber's M-estimate and Theil-Sen
  (:func:`robust_line`, batched over resamples).

Intervals and diagnostics are computed from what these return (:mod:`capacity.fit._intervals`,
:mod:`capacity.fit._diagnostics`); nothing here records a result.
"""
from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
from scipy import optimize

from ._model import SCV_DOMAIN, SLOW_PS, TWO_PARAM, QueueModel, measured_quantiles, mva_curves, usl

__all__ = [
    "RHO_MAX",
    "Profile",
    "SearchSpace",
    "Solution",
    "fit_space",
    "grid_start",
    "huber",
    "profile_slices",
    "robust_line",
    "robust_scale",
    "solve_mva",
    "solve_usl",
    "start",
    "theil_sen",
    "unpack_parameters",
]

RHO_MAX = 0.999           # upper bound of the utilisation at the busiest observation during the search
_JAC_STEP = 1e-4          # forward-difference step in the (log) parameters
_RESID_CAP = 20.0         # log-residual used where a trial point is unstable (inf quantile)
_XTOL, _FTOL = 1e-5, 1e-9    # least-squares stopping: relative step in theta; relative cost change
_RESTART_RMS = 0.02       # RMS relative error above which the fit is restarted from a grid
_SLOW_PS_SCV = (0.05, 20.0)   # scv search range for PS with those families (evaluation cost grows outside)

_HUBER_C = 1.345          # 95 % efficiency at Gaussian noise (Huber 1981, sec. 4.6)
_MAD_TO_SIGMA = 1.482602218505602  # 1 / Phi^-1(3/4): MAD -> standard deviation for Gaussian noise
_MAX_START = 1500         # windows used for the O(n^2) Theil-Sen start of the Huber fit


# ---------------------------------------------------------------------- percentiles: search space
class SearchSpace:
    """The free parameters of a percentile fit: names, bounds, and ``theta`` -> natural parameters.

    Free parameters, in this order, each only when not held: ``log_mean`` (log E[S], bounded so
    that the busiest observation stays below utilisation :data:`RHO_MAX`), ``log_scv`` (a
    two-parameter family), ``delay`` (a constant delay in units of the smallest observed
    percentile ``t_ref``, in [0, 0.999]) or ``log_delay_mean``/``log_delay_scv`` (lognormal).
    """

    def __init__(self, model: QueueModel, obs, scv_fixed=None, mean_fixed=None, delay_fixed=None,
                 measured_at: str = "client", tabled_only: bool = False):
        self.model, self.obs, self.measured_at, self.tabled_only = model, obs, measured_at, tabled_only
        self.mean_fixed, self.scv_fixed, self.delay_fixed = mean_fixed, scv_fixed, delay_fixed
        # Whitening of the log residuals (Sigma^-1/2, the observations' covariance): None weighs
        # every percentile alike; a generalised least-squares refit sets it.
        self.weights: np.ndarray | None = None
        self.t_ref = float(obs.t.min())
        family, discipline, delay = model.family, model.discipline, model.delay
        names, lo, hi = [], [], []
        rho_cap = float(np.min(obs.servers / obs.lam)) * RHO_MAX
        if mean_fixed is None:
            names.append("log_mean")
            lo.append(math.log(rho_cap) - 25.0)
            hi.append(math.log(rho_cap))
        if family in TWO_PARAM and scv_fixed is None:
            names.append("log_scv")
            a, b = SCV_DOMAIN[family]
            if discipline in ("ps", "rr") and family in SLOW_PS:
                # The PS transform's phase-type fit grows with 1/scv and with scv: bound the
                # search where one evaluation stays affordable -- or, for a family the shipped PS
                # table covers, to the table's scv range (benchmarks/bench_fit.py measures both).
                from .._quantile_table import ps_scv_range

                tabled = ps_scv_range(family, obs.servers)
                # Nearly constant CPU (fixed-work handlers, scv 0.01-0.1) is reachable wherever a
                # table reaches down to it, heavy tails wherever one reaches up to them (one core:
                # 0.01-53).  Lognormal is held to its tables; gamma beyond them (on several cores,
                # above scv 8) is computed directly (slowly, but right) up to scv 20 -- unless the
                # family is a candidate of a model selection, where minutes per fit are too many.
                low = _SLOW_PS_SCV[0] if tabled is None else min(_SLOW_PS_SCV[0], tabled[0])
                high = _SLOW_PS_SCV[1] if tabled is None else max(_SLOW_PS_SCV[1], tabled[1])
                a, b = max(a, low), min(b, high)
                if tabled is not None and (family == "lognormal" or tabled_only):
                    a, b = max(a, tabled[0]), min(b, tabled[1])
            lo.append(math.log(a))
            hi.append(math.log(b))
        if delay == "constant" and delay_fixed is None:
            names.append("delay")      # in units of the smallest observed percentile
            lo.append(0.0)
            hi.append(0.999)
        elif delay == "lognormal":
            names += ["log_delay_mean", "log_delay_scv"]
            lo += [math.log(self.t_ref * 1e-4), math.log(1e-3)]
            hi += [math.log(self.t_ref * 0.999), math.log(100.0)]
        self.names = names
        self.lo, self.hi = np.array(lo), np.array(hi)

    def with_model(self, model: QueueModel) -> SearchSpace:
        """The same observations and held values with another model (another slice count)."""
        return SearchSpace(model, self.obs, self.scv_fixed, self.mean_fixed, self.delay_fixed,
                           self.measured_at, self.tabled_only)

    def unpack(self, theta: np.ndarray) -> dict:
        """Natural parameters from a (K, p) batch; each value has shape (K,)."""
        return unpack_parameters(theta, self.names, self.model, self.mean_fixed, self.scv_fixed,
                                 self.delay_fixed, self.t_ref)

    def quantiles_at(self, theta, q, lam, servers) -> np.ndarray:
        """Model quantiles (K, N) of a batch of parameter vectors at (q, rate, servers)."""
        return self.model.quantiles(self.unpack(np.atleast_2d(theta)), q, lam, servers)

    def measured_at_observations(self, theta) -> np.ndarray:
        """Model quantiles (K, m) of the time as it was measured, at the observed (q, rate, servers)."""
        o = self.obs
        return measured_quantiles(self.model, self.unpack(np.atleast_2d(theta)), o.q, o.lam, o.servers,
                                  self.measured_at)

    def residuals(self, theta) -> np.ndarray:
        """log(model) - log(observed) for a (K, p) batch, finite (unstable points capped)."""
        o = self.obs
        x = self.measured_at_observations(theta)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(x) - np.log(o.t)
        return np.where(np.isfinite(r), r, _RESID_CAP)

    def with_jacobian(self, theta: np.ndarray):
        """Residuals and their forward-difference Jacobian from ONE batched forward call."""
        p = theta.size
        steps = np.where(theta + _JAC_STEP <= self.hi, _JAC_STEP, -_JAC_STEP)
        batch = np.vstack([theta, theta + np.diag(steps)])
        r = self.residuals(batch)
        return r[0], ((r[1:] - r[0]) / steps[:, None]).T if p else np.empty((r.shape[1], 0))


# ---------------------------------------------------------------------- percentiles: starts
def unpack_parameters(theta: np.ndarray, names: list[str], model: QueueModel, mean_fixed, scv_fixed,
                      delay_fixed, t_ref: float) -> dict:
    """The natural parameters (mean, scv, delay...) of a (K, p) batch of search vectors
    (``log_mean``, ``log_scv``, ``delay`` in units of ``t_ref``...), each of shape (K,); what is
    not searched is the held value (exponential: scv 1; deterministic: 0)."""
    K = theta.shape[0]
    col = {n: theta[:, i] for i, n in enumerate(names)}
    out = {}
    out["mean"] = np.exp(col["log_mean"]) if "log_mean" in col else np.full(K, mean_fixed)
    if model.family in TWO_PARAM:
        out["scv"] = np.exp(col["log_scv"]) if "log_scv" in col else np.full(K, scv_fixed)
    else:
        out["scv"] = np.full(K, 1.0 if model.family == "exponential" else 0.0)
    if model.delay == "constant":
        out["delay"] = col["delay"] * t_ref if "delay" in col else np.full(K, delay_fixed)
    elif model.delay == "lognormal":
        out["delay_mean"] = np.exp(col["log_delay_mean"])
        out["delay_scv"] = np.exp(col["log_delay_scv"])
    return out


def start(space: SearchSpace) -> np.ndarray:
    """Closed-form two-moment start (Pollaczek-Khinchine or PS mean, lognormal response)."""
    # Response-time moments from a lognormal through the percentiles of the lightest observation.
    from scipy.special import ndtri

    obs, model = space.obs, space.model
    j = int(np.argmin([obs.lam[obs.obs_index == i][0] * 1.0 for i in range(obs.n_obs)]))
    m = obs.obs_index == j
    z, lt = ndtri(obs.q[m]), np.log(obs.t[m])
    if m.sum() >= 2 and np.ptp(z) > 0:
        sig = max(float(np.polyfit(z, lt, 1)[0]), 0.05)
    else:
        sig = 0.6
    mu = float(np.mean(lt - sig * z))
    lam, c = float(obs.lam[m][0]), float(obs.servers[m][0])
    d0 = 0.3 * float(obs.t.min()) if model.delay is not None else 0.0
    # the slice gaps hold no CPU: at low load they add (k - 1) d to every response
    d_gaps = (model.slices - 1) * model.slice_delay if model.discipline == "rr" else 0.0
    et = max(math.exp(mu + sig * sig / 2) - d0 - d_gaps, 1e-3 * math.exp(mu))
    cs = min(max(math.expm1(sig * sig), 0.2), 20.0)
    # Per-core: E[T] ~ E[S] (1 + (1 + cs)/2 * rho/(1 - rho)) (FCFS, Pollaczek-Khinchine) or
    # E[S]/(1 - rho) (PS); solve for E[S] by bisection on rho.
    k = (1 + cs) / 2 if model.discipline == "fcfs" else 1.0
    if model.discipline == "rr":
        # Between FCFS and PS with the mean's weight g(k) = 1 - k^-0.69 (capacity.rr docstring).
        g = 1.0 - model.slices ** -0.6908
        k = (1 - g) * (1 + cs) / 2 + g
    lo_r, hi_r = 0.0, RHO_MAX
    for _ in range(60):
        r = (lo_r + hi_r) / 2
        es = r * c / lam
        if es * (1 + k * r / (1 - r) / c) < et:
            lo_r = r
        else:
            hi_r = r
    mean0 = lo_r * c / lam
    base = {"log_mean": math.log(max(mean0, 1e-12)), "log_scv": math.log(cs),
            "delay": d0 / space.t_ref,
            "log_delay_mean": math.log(max(d0, space.t_ref * 1e-3)), "log_delay_scv": math.log(0.5)}
    return np.clip(np.array([base[n] for n in space.names]), space.lo, space.hi)


def grid_start(space: SearchSpace, theta0: np.ndarray) -> tuple[np.ndarray, float]:
    """Best of a small grid around ``theta0`` (one batched call) and its sum of squared
    (whitened, where the space has weights) residuals: the restart after a poor fit."""
    mult = {"log_mean": np.log([0.5, 1.0, 1.5]), "log_scv": np.log([0.3, 1.0, 3.0]),
            "delay": np.array([-0.25, 0.0, 0.4]), "log_delay_mean": np.log([0.5, 1.0, 2.0]),
            "log_delay_scv": np.array([0.0])}
    grids = np.meshgrid(*[theta0[i] + mult[n] for i, n in enumerate(space.names)], indexing="ij")
    cand = np.clip(np.stack([g.ravel() for g in grids], axis=1), space.lo, space.hi)
    r = space.residuals(cand)
    if space.weights is not None:
        r = r @ space.weights.T
    ssr = np.sum(r ** 2, axis=1)
    best = int(np.argmin(ssr))
    return cand[best], float(ssr[best])


# ---------------------------------------------------------------------- percentiles: least squares
@dataclasses.dataclass
class Solution:
    """Optimum of one search: ``theta``, log ``residuals``, their ``jacobian``, forward
    evaluations ``nfev`` and whether the optimiser ``converged``."""

    theta: np.ndarray
    residuals: np.ndarray
    jacobian: np.ndarray
    nfev: int
    converged: bool

    @property
    def rms(self) -> float:
        """RMS of the log residuals (about the RMS relative error)."""
        return float(np.sqrt(np.mean(self.residuals ** 2)))


def fit_space(space: SearchSpace, max_nfev: int, theta0: np.ndarray | None = None) -> Solution:
    """Least-squares fit over one search space.

    ``theta0``: a warm start (the optimum of a neighbouring slice count in the profile); then a
    large residual is expected for a wrong k and triggers no grid restart, only a failure does.
    """
    m = space.obs.q.size
    if not space.names:
        theta = np.empty(0)
        return Solution(theta, space.residuals(theta[None, :])[0], np.empty((m, 0)), 1, True)
    warm = theta0 is not None
    theta0 = start(space) if theta0 is None else np.clip(theta0, space.lo, space.hi)
    sol = _least_squares(space, theta0, max_nfev)
    nfev = sol.nfev
    rms0 = math.sqrt(2 * sol.cost / m)
    if ((rms0 > _RESTART_RMS and not warm) or sol.status <= 0) and not space.model.slow:
        # A poor local optimum (or none): restart once from the best point of a small grid -- when
        # that point already fits better than the optimum found.  Where none does, the misfit is
        # the model's, not the start's (a wrong candidate of a model selection: the restart
        # converged to the same optimum in every candidate of the benchmarks' selections).
        theta_g, ssr_g = grid_start(space, theta0)
        nfev += 1
        if sol.status <= 0 or not np.isfinite(sol.cost) or ssr_g < 2 * sol.cost:
            sol2 = _least_squares(space, theta_g, max_nfev)
            nfev += sol2.nfev
            if sol2.cost < sol.cost:
                sol = sol2
    theta = sol.x
    r, J = sol.cached if sol.cached is not None else space.with_jacobian(theta)
    return Solution(theta, r, J, nfev, sol.status > 0)


def _least_squares(space: SearchSpace, theta0: np.ndarray, max_nfev: int):
    """Bounded trust-region least squares; fast models get residuals + Jacobian in one batched call."""
    if space.model.slow:
        # Each point is computed one by one here: compute the Jacobian only where the solver asks.
        last: dict = {}

        def fun(theta):
            last.clear()
            last[theta.tobytes()] = r = space.residuals(theta[None, :])[0]
            return r

        def jac(theta):
            r0 = last.get(theta.tobytes())
            if r0 is None:
                r0 = fun(theta)
            steps = np.where(theta + _JAC_STEP <= space.hi, _JAC_STEP, -_JAC_STEP)
            rk = space.residuals(theta + np.diag(steps))
            return ((rk - r0) / steps[:, None]).T
    else:
        cache: dict = {}

        def fun(theta):
            key = theta.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = space.with_jacobian(theta)
            return cache[key][0]

        def jac(theta):
            fun(theta)
            return cache[theta.tobytes()][1]

    if space.weights is not None:
        w, raw_fun, raw_jac = space.weights, fun, jac
        fun = (lambda theta: w @ raw_fun(theta))           # noqa: E731 - whitened residuals
        jac = (lambda theta: w @ raw_jac(theta))           # noqa: E731
    # Stops where a step moves the (log) parameters by less than 1e-5 of themselves: far inside any
    # interval a fit reports (the benchmarks' selections give the same estimates to six digits as
    # with 1e-7, in 15 % fewer evaluations).  The cost tolerance stays tight: where the percentiles
    # leave a ridge (a CPU cost against a delay at low load), 1e-7 stopped 10 % along it.
    sol = optimize.least_squares(fun, theta0, jac=jac, bounds=(space.lo, space.hi), method="trf",
                                 x_scale=1.0, xtol=_XTOL, ftol=_FTOL, gtol=_FTOL, max_nfev=max_nfev)
    sol.cached = None if space.model.slow else cache.get(sol.x.tobytes())
    return sol


@dataclasses.dataclass
class Profile:
    """The fits of a profile over slice counts: the best ``space`` and ``solution`` (its ``nfev``
    counts every fit's evaluations), and ``rms`` per slice count."""

    space: SearchSpace
    solution: Solution
    rms: dict


def profile_slices(make_space, candidates, max_nfev: int) -> Profile:
    """One full fit per slice count (ascending: each starts from its neighbour's optimum); the
    best RMS wins, ties to the smaller count."""
    # A loop over a few model variants; each fit is vectorised over parameter sets and percentiles.
    fits = {}
    prev = None
    for k in candidates:
        space = make_space(k)
        fits[k] = (space, fit_space(space, max_nfev, prev))
        prev = fits[k][1].theta
    rms_k = {k: sol.rms for k, (_, sol) in fits.items()}
    best = min(candidates, key=lambda k: (rms_k[k], k))
    space, sol = fits[best]
    total = sum(s.nfev for _, s in fits.values())
    return Profile(space, dataclasses.replace(sol, nfev=total), rms_k)


# ---------------------------------------------------------------------- load tests
def solve_mva(n, x, r, think_time):
    """Least squares on log throughput (and log response) over (log D, Z); Z held when given.

    Returns the scipy solution and the fitted ``(D, Z)``.
    """
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
        xm, rm = mva_curves(d, z, n)
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
    return sol, d_hat, z_hat


def solve_usl(n, x):
    """Nonlinear least squares on throughput over (lambda1, sigma, kappa), sigma and kappa in [0, 1]."""
    # Start from Gunther's quadratic: with C = X / lambda, N/C - 1 = sigma (N-1) + kappa N (N-1).
    lam0 = float(np.max(x[n == n.min()] / n.min()))
    a = np.c_[n - 1.0, n * (n - 1.0)]
    (s0, k0), *_ = np.linalg.lstsq(a, n * lam0 / x - 1.0, rcond=None)
    p0 = [lam0, min(max(s0, 1e-4), 0.9), max(k0, 1e-8)]
    with np.errstate(over="ignore", invalid="ignore"):
        return optimize.least_squares(lambda p: usl(n, *p) - x, p0,
                                      bounds=([0.0, 0.0, 0.0], [np.inf, 1.0, 1.0]), x_scale="jac",
                                      method="trf", xtol=1e-14, ftol=1e-14, gtol=1e-14, max_nfev=2000)


# ---------------------------------------------------------------------- robust straight lines
def robust_scale(r: np.ndarray) -> np.ndarray:
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


def huber(x, y, intercept, scale, start=None, max_iter=200, tol=1e-10):
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


def theil_sen(x, y, intercept):
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


def robust_line(x, y, intercept, method, scale=None, start=None):
    """Point estimate (a, b) of y = b + a x and the robust residual scale, batched over leading axes.

    ``intercept`` holds b (None fits it); ``method`` is "huber" or "theilsen".
    """
    if method == "theilsen":
        a, b = theil_sen(x, y, intercept)
        return a, b, robust_scale(y - b[..., None] - a[..., None] * x)
    if scale is None:
        # Robust start and scale from Theil-Sen (Huber needs a scale it cannot estimate itself
        # robustly from a least-squares start), then one scale update from the Huber residuals.
        # Large inputs: every k-th window is plenty for a start and a scale.
        step = -(-x.shape[-1] // _MAX_START)
        a, b = theil_sen(x[..., ::step], y[..., ::step], intercept)
        scale = robust_scale(y - b[..., None] - a[..., None] * x)
        a, b = huber(x, y, intercept, scale, start=(a, b))
        scale = robust_scale(y - b[..., None] - a[..., None] * x)
        start = (a, b)
    a, b = huber(x, y, intercept, scale, start=start)
    return a, b, scale
