"""Fit a closed-loop load-test sweep: MVA demand and think time, and the Universal Scalability Law.

:func:`from_loadtest` is a pipeline over the fit layers: a checked sweep (:mod:`._inputs`),
least squares per model (:mod:`._solve`; the models in :mod:`._model`), Gauss-Newton and
delta-method intervals (:mod:`._intervals`) and the caveats (:mod:`._diagnostics`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._deprecation import deprecated_property, renamed_parameters
from . import _diagnostics as diag
from ._inputs import Sweep, as_user_counts, check_confidence, check_sweep
from ._intervals import mva_intervals, usl_intervals
from ._model import mva_curves, usl, usl_peak
from ._result import FitResult
from ._solve import solve_mva, solve_usl

__all__ = ["LoadTestFit", "from_loadtest"]

ArrayLike = Any


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
    peak_users_ : float
        N* = sqrt((1 - sigma) / kappa), the USL population of maximum throughput
        (inf when kappa = 0).
    peak_throughput_ : float
        X(N*), requests/s.
    mva_capacity_qps_ : float
        1 / D, the saturation throughput of the MVA station.
    open_loop_capacity_qps_ : float
        Ceiling for an open (Poisson) request stream: the smaller of 1 / D and
        X(N*) among the fitted models.  A hard limit, not a safe rate.
    users, throughput, mean_response : ndarray
        The data: users, throughput and mean response time (sorted by users).
    """

    model_kind: str

    # The names of the previous release (docs/glossary.md).
    concurrency = deprecated_property("users")
    mean_latency = deprecated_property("mean_response")
    peak_concurrency_ = deprecated_property("peak_users_")

    @renamed_parameters(concurrency="users")
    def predict(self, users: ArrayLike):
        """Model throughput (and MVA response time) at the given users, as a DataFrame.

        Columns ``users``, ``mva_throughput`` and ``mva_response`` (MVA fitted; needs whole
        users) and ``usl_throughput`` (USL fitted).  (``concurrency=`` is
        the old name of ``users``.)
        """
        import pandas as pd

        n = as_user_counts(users, whole=bool(np.isfinite(self.demand_)))
        cols: dict[str, np.ndarray] = {"users": n}
        if np.isfinite(self.demand_):
            x, r = mva_curves(np.array([self.demand_]), np.array([self.think_time_]), n)
            cols["mva_throughput"], cols["mva_response"] = x[0], r[0]
        if np.isfinite(self.sigma_):
            cols["usl_throughput"] = usl(n, self.lambda1_, self.sigma_, self.kappa_)
        return pd.DataFrame(cols)

    def _description(self) -> dict:
        return {"model_kind": self.model_kind}


# ---------------------------------------------------------------------- public
@renamed_parameters(concurrency="users", mean_latency="mean_response")
def from_loadtest(
    users: ArrayLike,
    throughput: ArrayLike,
    mean_response: ArrayLike | None = None,
    *,
    think_time: float | None = None,
    model: str = "both",
    confidence: float = 0.95,
) -> LoadTestFit:
    """Fit a closed-loop load-test sweep with MVA and the Universal Scalability Law.

    Parameters
    ----------
    users : array_like, shape (n,)
        N, concurrent clients of each run (``ab -c N``, ``wrk -c N``, k6 VUs);
        whole numbers >= 1 for MVA.  Any order; repeated levels allowed.
        Formerly ``concurrency``.
    throughput : array_like, shape (n,)
        X(N), completed requests per second measured in each run.
    mean_response : array_like, shape (n,), optional
        Mean response time R(N) of each run, seconds.  Improves the MVA fit:
        it pins the think time through the response-time law Z = N/X - R.
        Formerly ``mean_latency``.
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
        ``lambda1_``, ``sigma_``, ``kappa_``, ``peak_users_``,
        ``peak_throughput_`` (USL); ``open_loop_capacity_qps_``; ``summary``,
        ``fit_quality_``, ``tables_["observed vs model"]``, ``print_summary()``,
        ``predict(users)``.  Parameters of a model not fitted are NaN.

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
    ``mean_response`` is given) over the runs.  Relative (log) errors weigh the
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
    >>> round(fit.sigma_, 4), round(fit.kappa_, 6), round(fit.peak_users_, 1)
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
    check_confidence(confidence)
    sweep = check_sweep(users, throughput, mean_response, think_time, model)
    import pandas as pd

    res = LoadTestFit(
        {"both": "closed loop: MVA (one station) and USL", "mva": "closed loop: MVA (one station)",
         "usl": "Universal Scalability Law"}[model],
        confidence_level=confidence,
        n_observations=sweep.users.size,
        method="least squares; Gauss-Newton standard errors, Student t intervals",
    )
    res.model_kind = model
    res.users, res.throughput, res.mean_response = sweep.users, sweep.throughput, sweep.mean_response
    nan = math.nan
    res.demand_ = res.think_time_ = res.mva_capacity_qps_ = nan
    res.lambda1_ = res.sigma_ = res.kappa_ = res.peak_users_ = res.peak_throughput_ = nan
    table = {"users": sweep.users, "throughput": sweep.throughput}
    if sweep.mean_response is not None:
        table["mean_response"] = sweep.mean_response
    _warn(res, diag.latency_law_warnings(sweep))
    if model in ("mva", "both"):
        table["mva_throughput"], table["mva_response"] = _fit_mva(res, sweep, confidence)
    if model in ("usl", "both"):
        table["usl_throughput"] = _fit_usl(res, sweep, confidence)
    res._add_table("observed vs model", pd.DataFrame(table))

    caps = [(res.mva_capacity_qps_, "mva_capacity_qps"), (res.peak_throughput_, "peak_throughput")]
    best, key = min((v, k) for v, k in caps if not math.isnan(v))
    res.open_loop_capacity_qps_ = float(best)
    row = res.summary.loc[key]
    res._add_parameter("open_loop_capacity_qps", best, row["lower"], row["upper"], unit="req/s",
                       note=f"hard ceiling (= {key}); plan below it")
    res._emit_warnings(stacklevel=4)   # 4: through the renamed_parameters wrapper to the caller
    return res


# ---------------------------------------------------------------------- one model each
def _warn(res: LoadTestFit, warnings: list) -> None:
    for category, message in warnings:
        res._warn(category, message)


def _fit_mva(res: LoadTestFit, sweep: Sweep, level: float):
    """MVA demand D and think time Z (held when given) on ``res``; returns the model X and R."""
    n, x, r = sweep.users, sweep.throughput, sweep.mean_response
    fit_z = sweep.think_time is None
    sol, d_hat, z_hat = solve_mva(n, x, r, sweep.think_time)
    ci, se_logd, has_cov = mva_intervals(sol, d_hat, z_hat, fit_z, level)
    xm, rm = mva_curves(np.array([d_hat]), np.array([z_hat]), n)
    xm, rm = xm[0], rm[0]
    res.demand_, res.think_time_ = d_hat, z_hat
    res.mva_capacity_qps_ = 1.0 / d_hat
    d_lo, d_hi = ci["demand"]
    res._add_parameter("demand", d_hat, d_lo, d_hi, unit="s", note="MVA service demand D")
    if fit_z:
        res._add_parameter("think_time", z_hat, *ci["think_time"], unit="s", note="MVA think/IO time Z")
    else:
        res._add_parameter("think_time", z_hat, unit="s", note="held fixed")
    res._add_parameter("mva_capacity_qps", 1.0 / d_hat, 1.0 / d_hi if d_hi > 0 else math.nan,
                       1.0 / d_lo if d_lo > 0 else math.nan, unit="req/s", note="1/D")
    rel = xm / x - 1.0
    rms = float(np.sqrt(np.mean(rel ** 2)))
    res._set_quality("mva_r2", diag.r2(x, xm))
    res._set_quality("mva_rms_rel_error", rms)
    if r is not None:
        res._set_quality("mva_response_rms_rel_error", float(np.sqrt(np.mean((rm / r - 1.0) ** 2))))
    _warn(res, diag.mva_warnings(sol, rms, sweep, fit_z, d_hat, has_cov, se_logd))
    return xm, rm


def _fit_usl(res: LoadTestFit, sweep: Sweep, level: float):
    """USL lambda1, sigma, kappa and the throughput peak on ``res``; returns the model X."""
    n, x = sweep.users, sweep.throughput
    sol = solve_usl(n, x)
    lam, sigma, kappa = (float(v) for v in sol.x)
    peak_n = usl_peak(sigma, kappa)
    if math.isfinite(peak_n):
        peak_x = float(usl(peak_n, lam, sigma, kappa))
    else:  # no coherency term: Amdahl's asymptote lambda1 / sigma
        peak_x = lam / sigma if sigma > 0 else math.inf
    ci, has_cov = usl_intervals(sol, peak_n, peak_x, level)
    res.lambda1_, res.sigma_, res.kappa_ = lam, sigma, kappa
    res.peak_users_, res.peak_throughput_ = peak_n, peak_x
    res._add_parameter("lambda1", lam, *ci["lambda1"], unit="req/s", note="USL throughput of one client")
    res._add_parameter("sigma", sigma, *ci["sigma"], unit="", note="USL contention")
    res._add_parameter("kappa", kappa, *ci["kappa"], unit="", note="USL coherency")
    res._add_parameter("peak_users", peak_n, *ci["peak_n"], unit="clients",
                       note="N* = sqrt((1-sigma)/kappa)")
    res._add_parameter("peak_throughput", peak_x, *ci["peak_x"], unit="req/s", note="X(N*)")
    xm = usl(n, lam, sigma, kappa)
    # The USL is fitted on absolute errors, so judge it by the RMS error relative to the mean
    # throughput (the per-point relative error is also reported: it is large at N = 1 on SDM91).
    nrmse = float(np.sqrt(np.mean((xm - x) ** 2)) / np.mean(x))
    res._set_quality("usl_r2", diag.r2(x, xm))
    res._set_quality("usl_rmse_over_mean", nrmse)
    res._set_quality("usl_rms_rel_error", float(np.sqrt(np.mean((xm / x - 1.0) ** 2))))
    _warn(res, diag.usl_warnings(sol, nrmse, has_cov, ci["kappa"][0]))
    return xm
