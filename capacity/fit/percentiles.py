"""CPU service-time distribution from observed latency percentiles (p50/p90/p99/p99.9 at known loads).

:func:`from_percentiles` is a pipeline over the fit layers: check and parse the observations
(:mod:`._inputs`), build the queue model and its search space (:mod:`._model`,
:mod:`._solve`), solve (a profile over slice counts for round robin), then intervals
(:mod:`._intervals`) and diagnostics (:mod:`._diagnostics`) into a :class:`PercentileFit`.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import check_choice, check_discipline
from ..exceptions import FitWarning
from . import _diagnostics as diag
from ._inputs import (
    PercentileObservations,
    PercentileOptions,
    check_observations_fit,
    check_percentile_options,
    parse_percentiles,
)
from ._intervals import WaldIntervals, consistent_slices, percentile_covariance, slices_noise, whitening
from ._model import MEASURED_AT, TWO_PARAM, QueueModel, check_measured_at, make_service
from ._cpu_law import hold_readings
from ._rr_candidates import RR_ADMISSIONS, rr_can_be_told
from ._fitted import PercentileFit, Prediction, servers_text
from ._selection import candidate_families, candidate_grid, qaic_scores, select
from ._solve import Profile, SearchSpace, Solution, fit_space, profile_slices

__all__ = ["PercentileFit", "Prediction", "from_percentiles"]

ArrayLike = Any


# ---------------------------------------------------------------------- public
def from_percentiles(
    percentiles: Mapping[float, float] | Sequence[Any],
    arrival_rate: ArrayLike | None = None,
    servers: ArrayLike = 1,
    discipline: str | None = None,
    family: str | None = None,
    utilization: ArrayLike | None = None,
    delay: str | float | None = "auto",
    *,
    measured_at: str = "client",
    scv: float | None = None,
    n_requests: ArrayLike | None = None,
    confidence: float = 0.95,
    max_nfev: int = 60,
    slices: int | str | None = None,
    admission: str = "fifo",
    slice_delay: float = 0.0,
) -> PercentileFit:
    """Fit the CPU service-time distribution (and a non-CPU delay) to latency percentiles.

    Parameters
    ----------
    percentiles : mapping or list
        Observed response-time percentiles in seconds, ``{q: t}`` with q in
        (0, 1), e.g. ``{0.5: 0.045, 0.9: 0.08, 0.99: 0.3}``.  Several
        observations (e.g. one per hour of a day) fit jointly: a list of such
        mappings (then ``arrival_rate`` etc. are one value per observation),
        or a list of records ``{"percentiles": {...}, "arrival_rate": 8.0,
        "utilization": 0.2, "n_requests": 28800, "servers": 1}``.
    arrival_rate : float or array_like, optional
        Requests/s during each observation (required unless every record has it).
    servers : int or array_like, default 1
        Cores or worker processes serving the queue.
    discipline : {"ps", "fcfs", "rr"} or None, default None
        Processor sharing (a time-sliced CPU), first come first served (a
        blocking worker pool) or event-loop round robin
        (:mod:`capacity.rr`: each request's CPU in ``slices`` slices through
        a FIFO run queue; fit it on p90 and above, its median is poor).
        None: ps or fcfs, chosen from the data (see Model selection).
    family : {"lognormal", "gamma", "hyperexponential", "exponential", "deterministic"} or None
        Service-time family, parametrised by mean and scv.  None: lognormal
        or gamma, chosen from the data.
    utilization : float or array_like, optional
        Measured CPU busy fraction in (0, 1] of ``servers`` during each
        observation.  Holds the mean through the utilisation law
        ``E[S] = sum(U_i servers_i) / sum(lambda_i)`` (CPU spent outside
        requests -- GC, timers -- then counts as request cost).  Where five or more
        observations' CPU against their rate shows such a background (a line with an
        intercept, as :func:`capacity.fit.from_utilization`), the mean held is the requests'
        on cores slowed by it instead, the summary has a ``background`` row, and the
        prediction intervals span the ratio too (:mod:`capacity.fit._cpu_law`).
    delay : "auto", None, "constant", "lognormal" or float, default "auto"
        Non-CPU latency added to every response (IO, database, network; it
        holds no CPU so it does not queue).  A number holds it fixed (seconds);
        ``"auto"``: none or constant, chosen from the data (the constant one
        only where the percentiles outnumber its free parameters).
    measured_at : {"client", "proxy", "in_process"}, default "client"
        Where the percentiles were timed, as in :func:`from_histograms`: a
        client or proxy sees the whole response; a timer in the server's own
        middleware sees, for a blocking handler (``fcfs``), its CPU time and
        delay alone (the queue is in front of it), under ``ps`` the whole
        sojourn, under ``rr`` (FIFO admission) the response less the wait for
        the first slice (:mod:`capacity._rr_in_process`; idle admission
        in-process is refused).  Predictions are always of the response as the
        client sees it.
    scv : float, optional
        Hold the service scv fixed instead of fitting it.
    n_requests : float or array_like, optional
        Number of requests behind each observation's percentiles; enables the
        confidence intervals (see Notes).  Without it, intervals are NaN.
    confidence : float, default 0.95
        Coverage of the intervals.
    max_nfev : int, default 60
        Budget of forward evaluations (each one batched call of the queue model).
    slices : int, "fit" or None
        ``discipline="rr"`` only: CPU slices per request, held fixed (an
        integer >= 1), or estimated (``"fit"`` or None): one fit per k in
        (1, 2, 3, 5, 8, 13, 20, 50), the best RMS wins.  Sets ``slices_``,
        ``slices_range_`` (the counts consistent with the data) and
        ``slice_profile_`` (k -> RMS relative residual, also in ``tables_``).
        Without ``slice_delay``, with ``admission="fifo"`` a constant ``delay``
        absorbs the ``(k - 1) * slice_delay`` of :mod:`capacity.rr` exactly;
        with ``"idle"`` only approximately (there the slice delay also changes
        who waits): give it.
    admission : {"fifo", "idle"}, default "fifo"
        ``discipline="rr"`` only: when a new request joins the run queue --
        at once (``"fifo"``) or only when no request in flight is runnable
        (``"idle"``: Node.js 20 handlers awaiting ``setTimeout``; see
        :func:`capacity.rr.mean_response`).  Held, not fitted; recorded in
        ``admission_`` (None for other disciplines) and the model name.
    slice_delay : float, default 0
        ``discipline="rr"`` only: non-CPU seconds between two slices of a
        request (a zero-delay timer's ~1 ms on Node.js, a fast IO call),
        held fixed and part of the rr model (:func:`capacity.rr.response_quantile`);
        recorded in ``slice_delay_``.  Measure it with a zero-work twin of the
        handler (``validation/run.py`` does): its median latency over a bare
        request's, per gap.

    Returns
    -------
    PercentileFit
        ``service_``, ``cpu_per_request_``, ``scv_``, ``delay_``,
        ``capacity_qps_``, ``summary``, ``print_summary()``, ``comparison_``
        (observed vs model), ``predict(q, arrival_rate)``, ``ceiling(slo)``.

    Raises
    ------
    ValueError
        Quantiles outside (0, 1), latencies not positive or decreasing in q,
        utilisation outside (0, 1], fewer percentiles than free parameters
        (the message names the parameters), an unknown discipline or family.

    Warns
    -----
    IdentifiabilityWarning
        A parameter the percentiles cannot pin down: it can move by a factor
        of 2 (a constant delay: by a quarter of the smallest percentile) while
        the model percentiles change by less than 1 % RMS -- e.g. p50 and p90
        at low load cannot split the latency into CPU and IO; or, with
        ``n_requests``, its interval spans more than a factor of 2.
    FitWarning
        The optimiser did not converge, the RMS relative residual exceeds 10 %,
        or a parameter sits on its search bound.

    Notes
    -----
    Model: Poisson arrivals at ``arrival_rate`` to one queue of ``servers``;
    response = queue response time of the service S (exact M/G/1 FCFS from
    :func:`capacity.fcfs.response_quantile`, the M/G/c approximation there for
    ``servers > 1``; PS from :func:`capacity.ps.response_quantile`, exact on one
    core for exponential, hyperexponential and Erlang/integer-shape gamma and on
    several for exponential, an approximation with its measured error otherwise) plus an independent delay D.  Constant D adds to every
    quantile exactly.  Lognormal D: the quantile of the sum comes from a
    numerical convolution, P(T + D <= x) = E[F_T(x - D)] with 32-node
    Gauss-Hermite quadrature over log D and F_T interpolated on a 96-point log
    grid of :func:`response_sf` values, inverted on a 512-point grid
    (measured against 10^6-sample Monte Carlo in the tests: within 1 %).

    Objective: generalised least squares on ``r = log(model) - log(observed)``
    (relative errors), ``r^T Sigma^-1 r`` with ``Sigma`` the covariance of the
    observed log-percentiles -- their sampling covariance from ``n_requests``
    (below) plus 1 % squared on the diagonal, the precision no percentile is
    trusted beyond (a dashboard's rounding, the models' own accuracy); without
    ``n_requests`` every percentile counts equally.  ``Sigma`` is evaluated at
    an unweighted first fit, and the fit is then repeated from there with the
    weights (one step of iteratively reweighted least squares).  Parameters ``log E[S]``,
    ``log scv``, the delay, searched by :func:`scipy.optimize.least_squares`
    (trust-region reflective, bounded so that the busiest observation stays
    below utilisation 0.999; scv in [0.001, 100], or [0.05, 20] for PS with
    non-exponential service, and within the shipped table's range, 0.39-20,
    for PS with lognormal service).  On one core the model's quantiles come from
    shipped tables (:mod:`capacity._quantile_table`) where they cover the
    point: for FCFS with lognormal or gamma CPU a table of the exact M/G/1
    quantiles (cubic interpolation, within 0.2 % of the exact value between
    the nodes; gamma with scv ~20 at the p50: 2 %), for PS with lognormal CPU
    the table that :func:`capacity.ps.response_quantile` itself uses.  Other cases, and
    points off the tables, are computed directly.  Each evaluation computes the residuals and
    their forward-difference Jacobian in ONE batched call of the queue model
    (the parameter sets are an extra array axis), from a start chosen by the
    two-moment closed form (Pollaczek-Khinchine / PS mean with a lognormal
    through the percentiles).  If that ends with more than 2 % RMS error, the
    search restarts once from the best point of a small grid around the start
    (one batched call).  For PS with gamma or hyperexponential CPU (computed
    point by point, far slower per evaluation) the Jacobian is computed only at
    points the solver accepts, and there is no restart.

    Identifiability without a sample size: ``sensitivity_`` linearises the
    model at the optimum, J the Jacobian of the log-percentiles, and reports
    ``delta * sqrt(m * [(J^T J)^-1]_kk)`` with ``delta = 1 %`` and m
    percentiles: how far parameter k can move, the others re-adjusting,
    before the percentiles change by 1 % RMS.

    Intervals (only with ``n_requests``): an empirical q-quantile of n i.i.d.
    latencies has asymptotic variance ``q(1-q) / (n f(x_q)^2)``, covariance
    ``p(1-q) / (n f(x_p) f(x_q))`` for p < q (same sample), with the density
    f taken from the fitted model (dx/dq by a finite difference).  With the
    floor these give ``Sigma``; the parameters' covariance is
    ``(J^T Sigma^-1 J)^-1``, inflated by the reduced chi-square
    ``r^T Sigma^-1 r / (m - p)`` when above 1 (a misfit, or latencies of
    consecutive requests correlated by busy periods, so n overstates the
    information), and mapped to Wald intervals on the log scale.

    Model selection (``discipline``, ``family`` None or ``delay="auto"``):
    every combination of the candidates is fitted -- ps and fcfs; lognormal
    and gamma (for ps within the shipped PS table's scv range); no delay and a
    constant delay -- and the smallest QAIC wins, ``QAIC = D / c + 2 k`` with
    D the deviance ``r^T Sigma^-1 r``, k the free parameters and c the
    dispersion ``D / (m - k)`` of the most general candidate, at least 1
    (:func:`capacity.fit._selection.select`; Burnham and Anderson 2002, sec.
    6.5).  ``candidates_`` lists them with their Akaike weights, and the
    prediction intervals mix the candidates by weight.  At one low load every
    discipline fits about equally: the warning says so, and the intervals
    are as wide as the candidates' disagreement.  Event-loop round robin
    (one slice is FCFS, many approach PS) joins the candidates where the
    best of these misses the percentiles by more than twice their precision
    (reduced chi-square above 4) and the observations span loads (1.5x):
    with the best family and delay, its slice count profiled, for admission
    ``"fifo"`` and ``"idle"`` -- about 2 s more (``benchmarks/bench_fit.py``:
    87 ms for the 8 candidates at one load, 24x one model; 2.2 s with rr).

    Consistency: with ``utilization`` the mean comes from the CPU; where the
    percentiles outnumber the free parameters, the chosen model is also fitted
    with its mean free, and when the percentiles alone need a mean more than
    25 % away and fit significantly better (likelihood ratio above the 95 %
    point of chi-square(1), scaled by the dispersion), ``contradictions_``
    and a warning say so: CPU spent outside these requests, or latencies
    that hold more than CPU.

    Slices (``discipline="rr"``, ``slices="fit"``): a profile over k, each
    fit warm-started from the previous k's optimum.  k is consistent with the
    data when ``m (RMS_k^2 - RMS_min^2) / sigma^2`` is below the 95 % point of
    chi-square(1) (3.84), ``sigma^2`` the squared relative precision of a
    percentile (from ``n_requests``, else 1 %) plus ``0.03^2`` for the rr
    approximation's own quantile error; an ``IdentifiabilityWarning`` says
    the data cannot tell when the consistent counts span more than half of
    the FCFS-to-limit scale ``g(k) = 1 - k^-0.6`` (e.g. 1..8, or everything
    at low load, where all disciplines coincide).  Measured
    (``tests/test_fit_rr.py``, exact rr simulation with k = 5, exponential
    10 ms CPU, 4e5 requests at utilisation 0.5 and 0.8, p90/p99/p99.9, five
    seeds): E[S] within 2.4 % (k free) and 0.6 % (k = 5 held); best k 3, 5,
    5, 5, 13, consistent range always containing 5 and excluding 1.

    Speed: each fit is a few batched evaluations of the queue model (the
    number is ``n_function_evaluations_``); PS and rr with gamma or
    hyperexponential CPU are computed point by point, and are much slower.
    ``benchmarks/bench_fit.py`` measures the cases on your machine, against a
    naive fit (Nelder-Mead, one scalar call per percentile to the public
    quantile functions).

    References
    ----------
    R. J. Serfling, *Approximation Theorems of Mathematical Statistics*,
    Wiley 1980, sec. 2.3 (asymptotic distribution of sample quantiles).
    M. A. Branch, T. F. Coleman, Y. Li, "A subspace, interior, and conjugate
    gradient method for large-scale bound-constrained minimization
    problems", SIAM J. Sci. Comput. 21, 1999 (the trust-region reflective
    algorithm).

    Examples
    --------
    Percentiles produced by an M/G/1 FCFS queue with 50 ms lognormal CPU
    (scv 2) at 8 req/s are fitted back:

    >>> from capacity import Service, fcfs
    >>> from capacity.fit import from_percentiles
    >>> svc = Service.lognormal(0.05, 2.0)
    >>> qs = [0.5, 0.9, 0.99, 0.999]
    >>> obs = dict(zip(qs, fcfs.response_quantile(qs, 8.0, svc)))
    >>> res = from_percentiles(obs, 8.0, discipline="fcfs")
    >>> round(res.cpu_per_request_, 4), round(res.scv_, 2)
    (0.05, 2.0)
    >>> round(res.predict(0.99, 12.0), 3) == round(fcfs.response_quantile(0.99, 12.0, svc), 3)
    True
    """
    if discipline is not None:
        check_discipline(discipline)
    measured_at = check_choice(measured_at, "measured_at", MEASURED_AT)
    obs = parse_percentiles(percentiles, arrival_rate, servers, utilization, n_requests)
    auto_delay = isinstance(delay, str) and delay == "auto"
    candidates = candidate_grid(("ps", "fcfs") if discipline is None else (discipline,),
                                lambda d: candidate_families(d) if family is None else (family,),
                                (None, "constant") if auto_delay else (delay,))
    fits, kept = [], []
    for d, f, dl in candidates:
        opts = check_percentile_options(d, f, dl, scv, confidence, max_nfev, slices, admission, slice_delay)
        check_measured_at(measured_at, d, dl, opts.admission)
        space = _search_space(opts, obs, measured_at, tabled_only=family is None)
        if auto_delay and dl is not None and len(space.names) >= obs.q.size:
            continue     # a delay the percentiles cannot carry is no candidate
        without = next((fit for fit, c in zip(fits, kept) if c == (d, f, None)), None)
        nested = without._theta if dl == "constant" and without is not None and opts.delay_fixed is None else None
        fits.append(_fit_model(space, opts, obs, nested))
        kept.append((d, f, dl))
    top = fits[int(np.argmin(qaic_scores(*_scores(fits))[0]))]
    if discipline is None and _rr_can_be_told(obs, fits, top):
        # Event-loop round robin lies between them (one slice: FCFS; many: PS): with the best family
        # and delay so far, its slice count profiled, for either admission rule (1-2 s each); timed
        # in-process, FIFO admission only (capacity._rr_in_process has no rule for idle admission).
        for rule in RR_ADMISSIONS[measured_at == "in_process"]:
            opts = check_percentile_options("rr", top.family, top._model.delay, scv, confidence, max_nfev,
                                            "fit", rule, slice_delay)
            fits.append(_fit_model(_search_space(opts, obs, measured_at, tabled_only=family is None), opts, obs))
            kept.append(("rr" if rule == "fifo" else "rr, idle admission", top.family, top._model.delay))
    best = fits[0]
    if len(fits) > 1:
        best = select(fits, kept, *_scores(fits), "rms_rel_error", [f.fit_quality_["rms_rel_error"] for f in fits])
    _check_cpu_cost(best, obs, tabled_only=family is None, max_nfev=max_nfev)
    best._profile_bound_intervals()
    best._emit_warnings(stacklevel=3)
    return best


# ---------------------------------------------------------------------- pipeline steps
def _scores(fits: list) -> tuple[list, list, list]:
    """(deviance, free parameters, residual degrees of freedom) of each candidate fit; a profiled
    slice count is a free parameter."""
    return ([f.deviance_ for f in fits], [f._n_free for f in fits], [f.degrees_of_freedom_ for f in fits])


_RR_TRIED_ABOVE = 4.0     # reduced chi-square of the best PS/FCFS candidate above which rr is fitted too


def _rr_can_be_told(obs: PercentileObservations, fits: list, top: PercentileFit) -> bool:
    """Whether round robin is worth its candidates (each a profile over slice counts, 1-2 s): the
    best PS or FCFS model misses the percentiles by more than twice their precision (reduced
    chi-square above 4; the true model gives 1-4 on simulated days, up to 11 with very heavy
    tails), and rr can be told apart -- only by how the percentiles change with load, so the
    observations span loads (the busiest at least 1.5x the least busy) and outnumber its
    parameters.  Timed in-process, rr is told apart the same way: the middleware misses the wait
    for the first slice, which :mod:`capacity._rr_in_process` takes out."""
    misfit = top.deviance_ / max(top.degrees_of_freedom_, 1) > _RR_TRIED_ABOVE
    return misfit and rr_can_be_told(obs) and obs.q.size > max(f._n_free for f in fits) + 1


def _search_space(opts: PercentileOptions, obs: PercentileObservations, measured_at: str,
                  tabled_only: bool) -> SearchSpace:
    """The queue model of one candidate and its search space (the mean held by the utilisation law
    when every observation has its CPU)."""
    mean_fixed, _ = obs.utilization_law()
    model = QueueModel(opts.discipline, opts.family, opts.delay,
                       slices=1 if opts.slices_fixed is None else opts.slices_fixed,
                       admission=opts.admission, slice_delay=opts.slice_delay,
                       sf_grid=(float(obs.t.min()) * 1e-3, float(obs.t.max()) * 30))
    return SearchSpace(model, obs, opts.scv_fixed, mean_fixed, opts.delay_fixed, measured_at, tabled_only)


def _solve_weighted(space: SearchSpace, opts: PercentileOptions, nested: np.ndarray | None = None):
    """The fit of one model: least squares (a profile over slice counts for round robin), then,
    with ``n_requests``, once more weighted by the observations' covariance there (GLS).

    ``nested``: the optimum of the same model without its delay; the search also starts from it
    (with no delay), so the model with a delay never fits worse than the one without.
    Returns the space, solution, profile (or None) and :class:`DeltaMethod`."""
    profile = None
    if opts.slice_candidates is None:
        sol = fit_space(space, opts.max_nfev)
        if nested is not None:
            again = fit_space(space, opts.max_nfev, theta0=np.r_[nested, 1e-3])
            again.nfev += sol.nfev
            sol = again if again.rms < sol.rms else dataclasses.replace(sol, nfev=again.nfev)
    else:
        profile = profile_slices(lambda k: space.with_model(space.model.with_slices(k)),
                                 opts.slice_candidates, opts.max_nfev)
        space, sol = profile.space, profile.solution
    delta = percentile_covariance(space, sol)
    if delta.sigma is not None and space.names:
        space.weights = whitening(delta.total)
        first = sol
        sol = fit_space(space, opts.max_nfev, theta0=first.theta)
        sol.nfev += first.nfev
        delta = percentile_covariance(space, sol)
    return space, sol, profile, delta


def _fit_model(space: SearchSpace, opts: PercentileOptions, obs: PercentileObservations,
               nested: np.ndarray | None = None) -> PercentileFit:
    """One candidate model fitted, its intervals and diagnostics recorded (warnings not emitted)."""
    mean_fixed, util_spread = obs.utilization_law()
    check_observations_fit(obs, opts, mean_fixed, space.names)
    res = _new_result(opts, obs, space.measured_at)
    space, sol, profile, delta = _solve_weighted(space, opts, nested)
    pars = _record_estimates(res, space, sol)

    # linearised diagnostics (unweighted: what the percentiles pin down without a sample size)
    p, m = len(space.names), obs.q.size
    jtj_inv = np.linalg.pinv(sol.jacobian.T @ sol.jacobian) if p else np.empty((0, 0))
    sens = diag.sensitivity(jtj_inv, space.names, m, space.t_ref)
    import pandas as pd

    res.sensitivity_ = pd.Series(sens, dtype=float, name="within 1% RMS")
    res.deviance_, res.degrees_of_freedom_ = delta.deviance, m - p - (profile is not None)
    res._n_free = p + (profile is not None)
    res._set_quality("deviance", delta.deviance)
    if delta.sigma is not None:
        res._set_quality("reduced_chi2", delta.reduced_chi2)
    res.covariance_ = delta.cov
    if delta.cov is not None:
        # For a parameter on its search bound (capacity.fit._bound_profile): the whitened residuals
        # whose sum of squares is the deviance, and the dispersion the covariance was scaled by.
        w = space.weights
        res._residuals = (lambda theta: w @ space.residuals(theta[None, :])[0]) if w is not None \
            else (lambda theta: space.residuals(theta[None, :])[0])
        res._dispersion = max(1.0, delta.reduced_chi2) if math.isfinite(delta.reduced_chi2) else 1.0
    slices_range = _record_slices(res, opts, space, profile, slices_noise(delta), m)
    wald = WaldIntervals(res.covariance_, space.names, opts.confidence, space.t_ref)
    _record_parameters(res, space, pars, wald, mean_fixed, slices_range, opts.slice_candidates)
    readings = obs.cpu_readings() if mean_fixed is not None else None
    if readings is not None:
        hold_readings(res, readings)
    comp = _record_quality(res, obs, sol, p)

    busiest = float(np.max(obs.lam * res.cpu_per_request_ / obs.servers))
    for category, message in (
            diag.slices_warnings(slices_range, res.slices_, busiest)
            + diag.utilization_spread_warnings(mean_fixed, util_spread, readings.background if readings else 0.0)
            + diag.solver_warnings(sol.converged, opts.max_nfev, sol.rms, comp, space.model)
            + diag.bound_warnings(space, sol.theta)
            + diag.identifiability_warnings(sens, space.t_ref, opts.delay)
            + diag.interval_warnings(wald, opts.confidence)):
        res._warn(category, message)
    res.contradictions_ = ()
    res.candidates_, res._candidate_fits = None, [(res, 1.0)]
    return res


def _check_cpu_cost(res: PercentileFit, obs: PercentileObservations, tabled_only: bool, max_nfev: int) -> None:
    """Compare the CPU-implied cost (the utilisation law) with the cost the percentiles alone
    need; a clear disagreement goes in ``contradictions_`` and a warning."""
    held = res._space
    if held.mean_fixed is None:
        return
    free = SearchSpace(held.model, obs, held.scv_fixed, None, held.delay_fixed, held.measured_at, tabled_only)
    dof = obs.q.size - len(free.names)
    if dof < 1:
        return       # the percentiles cannot fit the mean apart from the CPU
    sol = fit_space(free, max_nfev)
    dev_free = percentile_covariance(free, sol).deviance
    mean_free = float(free.unpack(sol.theta[None, :])["mean"][0])
    lr = (res.deviance_ - dev_free) / max(1.0, dev_free / dof)
    res._set_quality("cpu_per_request_from_percentiles", mean_free)
    note = diag.cpu_cost_contradiction(held.mean_fixed, mean_free, lr,
                                       f"{100 * res.fit_quality_['rms_rel_error']:.0f} % RMS",
                                       f"{100 * sol.rms:.0f} %", "percentiles")
    if note is None:
        return
    res.contradictions_ = (*res.contradictions_, note)
    res._warn(FitWarning, f"the data contradict each other: {note}")


def _new_result(opts: PercentileOptions, obs: PercentileObservations, measured_at: str) -> PercentileFit:
    """The empty result, named after its model and method."""
    rr_name = ""
    if opts.discipline == "rr":
        rr_name = f"{opts.slices_fixed} slices" if opts.slice_candidates is None else "slices fitted"
        rr_name = f" ({rr_name}{', idle admission' if opts.admission == 'idle' else ''})"
    res = PercentileFit(
        f"{opts.discipline.upper()} queue{rr_name}, {opts.family} CPU time"
        + ("" if opts.delay is None else f" + {opts.delay} delay")
        + ("" if measured_at == "client" else f" (percentiles measured at the {measured_at})"),
        confidence_level=opts.confidence, n_observations=obs.n_obs,
        method=("generalised least squares on log percentiles, weighted by their sampling covariance from "
                "n_requests plus a 1 % floor (scipy trust-region reflective); Wald intervals" if obs.have_n else
                "least squares on log percentiles (scipy trust-region reflective); no intervals (n_requests "
                "not given)"),
    )
    res.discipline, res.family, res.measured_at = opts.discipline, opts.family, measured_at
    res.servers = np.unique(obs.servers).item() if np.unique(obs.servers).size == 1 else obs.servers
    res._servers_default = int(np.max(obs.servers))
    return res


def _record_estimates(res: PercentileFit, space: SearchSpace, sol: Solution) -> dict:
    """The fitted service, delay and capacity on ``res``; returns the natural parameters."""
    res._model, res._space, res._theta = space.model, space, sol.theta
    pars = space.unpack(sol.theta[None, :])
    mean = float(pars["mean"][0])
    scv_hat = float(pars["scv"][0])
    res.service_ = make_service(space.model.family, mean, scv_hat)
    res.cpu_per_request_ = mean
    res.scv_ = scv_hat
    if space.model.delay == "constant":
        res.delay_ = float(pars["delay"][0])
    elif space.model.delay == "lognormal":
        res.delay_ = make_service("lognormal", float(pars["delay_mean"][0]), float(pars["delay_scv"][0]))
    else:
        res.delay_ = None
    res.capacity_qps_ = float(np.max(space.obs.servers)) / mean
    res.residuals_ = sol.residuals
    res.n_function_evaluations_ = sol.nfev
    return pars


def _record_slices(res: PercentileFit, opts: PercentileOptions, space: SearchSpace, profile: Profile | None,
                   noise: float, m: int):
    """The fitted (or held) number of slices and, when profiled, its consistent range."""
    rr = opts.discipline == "rr"
    res.slices_ = space.model.slices if rr else None
    res.admission_ = opts.admission if rr else None
    res.slice_delay_ = opts.slice_delay if rr else None
    res.slice_profile_ = None
    if profile is None:
        res.slices_range_ = (res.slices_, res.slices_) if rr else None
        return None
    import pandas as pd

    ks = list(opts.slice_candidates)
    consistent = consistent_slices(profile.rms, m, noise)
    res.slices_range_ = (min(consistent), max(consistent))
    res.slice_profile_ = pd.DataFrame(
        {"slices": ks, "rms_rel_error": [profile.rms[k] for k in ks],
         "consistent": [k in consistent for k in ks]}).set_index("slices")
    res._add_table("slices profile", res.slice_profile_)
    return res.slices_range_


def _record_parameters(res: PercentileFit, space: SearchSpace, pars: dict, wald: WaldIntervals, mean_fixed,
                       slices_range, candidates) -> None:
    """The summary rows: estimates with their intervals (NaN where held)."""
    names, family, mean = space.names, space.model.family, res.cpu_per_request_
    fixed_note = "held fixed" if mean_fixed is None else "from the utilisation law (held)"
    lo_m, hi_m = wald.interval("log_mean", mean)
    res._add_parameter("cpu_per_request", mean, lo_m, hi_m, unit="s",
                       note="CPU seconds per request" if "log_mean" in names else fixed_note)
    if family in TWO_PARAM:
        res._add_parameter("scv", res.scv_, *wald.interval("log_scv", res.scv_), unit="",
                           note="service-time scv" if "log_scv" in names else "held fixed")
    else:
        res._add_parameter("scv", res.scv_, unit="", note=f"fixed by the {family} family")
    if space.model.delay == "constant":
        res._add_parameter("delay", res.delay_, *wald.interval("delay", res.delay_, log=False), unit="s",
                           note="non-CPU latency" if "delay" in names else "held fixed")
    elif space.model.delay == "lognormal":
        dm, ds = float(pars["delay_mean"][0]), float(pars["delay_scv"][0])
        res._add_parameter("delay_mean", dm, *wald.interval("log_delay_mean", dm), unit="s",
                           note="lognormal delay")
        res._add_parameter("delay_scv", ds, *wald.interval("log_delay_scv", ds), unit="",
                           note="lognormal delay")
    srv_max = float(np.max(space.obs.servers))

    def _rate(mean_bound):  # servers / E[S] bound; a 0 s lower bound on E[S] gives an infinite rate
        if math.isnan(mean_bound):
            return math.nan
        return srv_max / mean_bound if mean_bound > 0 else math.inf

    res._add_parameter("capacity_qps", res.capacity_qps_, _rate(hi_m), _rate(lo_m), unit="req/s",
                       note=f"{servers_text(srv_max)} / E[S] (100% CPU)")
    if space.model.discipline == "rr":
        if slices_range is None:
            res._add_parameter("slices", res.slices_, unit="", note="held fixed")
        else:
            res._add_parameter("slices", res.slices_, slices_range[0], slices_range[1], unit="",
                               note=f"best of {list(candidates)}; interval: counts consistent "
                                    "with the data (profile)")


def _record_quality(res: PercentileFit, obs: PercentileObservations, sol: Solution, p: int):
    """Observed vs model per percentile, and the fit-quality figures; returns the comparison."""
    comp = diag.comparison_table(obs, sol.residuals)
    res.comparison_ = comp
    res._add_table("observed vs model", comp)
    res._set_quality("rms_rel_error", sol.rms)
    res._set_quality("max_abs_rel_error", float(np.max(np.abs(comp["rel_error"]))))
    res._set_quality("n_percentiles", obs.q.size)
    res._set_quality("n_free_parameters", p)
    res._set_quality("function_evaluations", sol.nfev)
    res._set_quality("max_utilization", float(np.max(obs.lam * res.cpu_per_request_ / obs.servers)))
    return comp
