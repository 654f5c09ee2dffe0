"""What a fitted queue model answers: predictions with intervals, and ceilings checked against the data.

:class:`PercentileFit` is the result of :func:`capacity.fit.from_percentiles` and the base of
:class:`capacity.fit.histograms.HistogramFit`: ``predict``, ``predict_mean`` and ``ceiling``, each
with an optional interval (:class:`Prediction`) over the fit's parameter draws and, when the model
was chosen from the data, over the candidate models by weight.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .._checks import check_positive, check_servers
from ..distributions import Service
from ._model import make_service
from ._result import FitResult

__all__ = ["PercentileFit", "Prediction", "servers_text"]

ArrayLike = Any


# ---------------------------------------------------------------------- result
class Prediction(NamedTuple):
    """A predicted value with its interval: ``estimate`` (the fit's), ``low`` and ``high``."""

    estimate: Any
    low: Any
    high: Any


def node_cluster_note(discipline: str, servers: int) -> str:
    """The commonest misreading of a multi-core event-loop fit, said where it can happen: a Node.js
    cluster is one event loop per worker, not one processor-sharing queue on all the cores.  Empty
    for one server or a blocking (FCFS) pool."""
    if discipline not in ("ps", "rr") or servers <= 1:
        return ""
    return (f"If the {servers} servers are Node.js cluster workers, each worker is its own event loop with "
            f"its share of the traffic: {servers} one-core queues, not one {servers}-core processor-sharing "
            "queue -- fit one worker (servers=1, its own rate and CPU) and plan per worker.")


class PercentileFit(FitResult):
    """Result of :func:`from_percentiles`.

    Attributes
    ----------
    service_ : capacity.Service
        The fitted CPU service-time distribution (the queue's service).
    cpu_per_request_ : float
        E[S], CPU seconds per request.
    scv_ : float
        Squared coefficient of variation of the service time (fixed by the
        family for exponential, 1, and deterministic, 0).
    delay_ : float, capacity.Service or None
        The non-CPU latency: seconds (``delay="constant"``), a lognormal
        :class:`~capacity.Service` (``delay="lognormal"``; a distribution of
        latency, it holds no CPU), or None.
    capacity_qps_ : float
        ``servers / cpu_per_request_``: the request rate at which the CPU is
        100 % busy (the hard ceiling, not a safe operating point).
    residuals_ : ndarray
        log(model / observed) per percentile.
    comparison_ : pandas.DataFrame
        Observed vs model per percentile (also in ``tables_``).
    covariance_ : ndarray or None
        Covariance of the search parameters (log mean, log scv, ...) from the
        sampling error of the percentiles; None without ``n_requests``.
    sensitivity_ : pandas.Series
        How far each parameter can move (a factor, or seconds for a constant
        delay) while the model percentiles change by at most 1 % RMS: the
        identifiability diagnostic that does not need a sample size.
    slices_, slices_range_, admission_, slice_delay_
        ``discipline="rr"`` only (None otherwise): the fitted or held slice
        count, the counts consistent with the data, and the admission rule
        and slice delay (seconds) the model used, as given.
    measured_at : str
        Where the latencies were timed (predictions are of the client's view).
    deviance_, degrees_of_freedom_ : float, int
        ``r^T Sigma^-1 r`` of the log residuals (see Notes of
        :func:`from_percentiles`) and the percentiles less the free parameters.
    candidates_ : pandas.DataFrame or None
        When the model was chosen from the data: every candidate (discipline,
        family, delay) with its estimates, deviance, QAIC, ``delta_qaic`` and
        Akaike weight, best first.
    contradictions_ : tuple of str
        Where the data contradict each other (the CPU-implied cost against the
        percentiles); empty when they agree.  :meth:`ceiling` repeats them.
    """

    discipline: str
    servers: Any
    family: str
    # Set by the fits that can profile a parameter on its search bound (see _profiles_on_bounds).
    _residuals = None
    _dispersion = 1.0
    _bound_profiles = None
    # The CPU per request by the other reading of the utilisation law over the held one
    # (capacity.fit._cpu_law); None where the mean is not held or the windows show no background.
    _mean_alternative: float | None = None

    def predict(self, q: ArrayLike, arrival_rate: ArrayLike, servers: ArrayLike | None = None,
                interval: float | None = None, window: float | None = None):
        """Model latency quantile(s) at ``arrival_rate`` (req/s), seconds; broadcasts q and rate.

        Includes the fitted non-CPU delay.  ``inf`` where the load is unstable.

        With ``interval`` (a coverage such as 0.9) returns ``Prediction(estimate, low, high)``:
        the central ``interval`` range of the prediction over parameter sets drawn from the
        fit's approximate sampling distribution (normal in the search parameters, mean the
        estimate, covariance ``covariance_``; 400 draws, seeded, so the answer is repeatable)
        and, for a fit that chose its model from the data, over the candidate models in
        proportion to their Akaike weights, each draw multiplied by ``exp(m Z)`` for the
        fit's own miss of its data ``m`` (RMS relative error of the percentiles; for histograms
        the RMS miss in log time at the bucket bounds, or its mean in the busiest windows' tail
        where that is larger), the model error made explicit; the
        draws stay within the fit's search bounds, and the interval is widened to hold the
        estimate where their central range misses it.  Where the CPU per request is held by the
        utilisation law and the windows' CPU shows a background (busy cores at zero QPS), the same
        draws are made again with the ratio ``sum(busy) / sum(rate)`` instead of the mean of the
        requests on cores slowed by that background, which the fit holds
        (:mod:`capacity.fit._cpu_law`): a day cannot tell which
        holds at a peak; the interval is then the union of the two readings' central ranges.
        ``high`` is ``inf`` where some plausible parameters make the queue unstable at that load.

        With ``window`` (seconds) as well, the interval is for the quantile *measured* over that
        much traffic -- a load test, a peak minute, pooled runs -- rather than the long-run one: each
        draw also carries the luck of a finite window, simulated from the fitted model at each load
        (:mod:`capacity.fit._window`; at most 8 loads per call, under a second each).  At 80 % CPU a
        60 s p99 moves by about +-25 % (5-95 %) about the long-run value, as much as the
        parameters' uncertainty of a good day's fit.  Without a covariance
        (:func:`from_percentiles` without ``n_requests``) the bounds are NaN and a warning
        names what is missing.  Predicting above the busiest observed utilisation warns that
        it extrapolates.
        """
        from .._checks import check_quantile
        from ._inputs import check_confidence

        qq = check_quantile(q, "q")
        lam = check_positive(arrival_rate, "arrival_rate")
        srv = check_servers(self._servers_default if servers is None else servers, "servers")
        shape = np.broadcast_shapes(qq.shape, lam.shape, srv.shape)
        qb, lb, sb = (np.broadcast_to(a, shape).ravel() for a in (qq, lam, srv))
        sb = sb.astype(np.int64)
        out = self._space.quantiles_at(self._theta[None, :], qb, lb, sb)[0].reshape(shape)
        if interval is None:
            _window_needs_interval(window)
            return out.item() if out.ndim == 0 else out
        check_confidence(interval)
        self._warn_extrapolation(lb, sb)

        def quantiles(space, thetas):
            x = np.asarray(space.quantiles_at(thetas, qb, lb, sb), dtype=float)
            return np.where(np.isfinite(x), x, np.inf)

        luck = self._window_luck(window, qb, lb, sb)
        low, high = _around(*self._interval_of(quantiles, interval, qb.shape, "prediction", luck=luck),
                            out.ravel())
        pick = (lambda a: a.reshape(shape).item() if not shape else a.reshape(shape))
        return Prediction(out.item() if out.ndim == 0 else out, pick(low), pick(high))

    def predict_mean(self, arrival_rate: ArrayLike, servers: ArrayLike | None = None,
                     interval: float | None = None, window: float | None = None):
        """Model mean response time at ``arrival_rate`` (req/s), seconds, the fitted delay included
        (``fcfs``/``ps``/``rr`` ``mean_response`` of the fitted service); ``inf`` where unstable.

        With ``interval``: ``Prediction(estimate, low, high)`` over the same parameter draws and
        candidate models as :meth:`predict`; with ``window`` too, for the mean measured over that
        many seconds of traffic (as in :meth:`predict`).
        """
        lam = check_positive(arrival_rate, "arrival_rate")
        srv = check_servers(self._servers_default if servers is None else servers, "servers")
        shape = np.broadcast_shapes(lam.shape, srv.shape)
        lb, sb = (np.broadcast_to(a, shape).ravel() for a in (lam, srv))
        est = self._mean_at(self._space, self._theta[None, :], lb, sb)[0].reshape(shape)
        pick = (lambda a: a.reshape(shape).item() if not shape else a.reshape(shape))
        if interval is None:
            _window_needs_interval(window)
            return pick(est)
        from ._inputs import check_confidence

        check_confidence(interval)
        self._warn_extrapolation(lb, sb)
        luck = self._window_luck(window, np.full(lb.shape, np.nan), lb, sb)
        low, high = _around(*self._interval_of(lambda space, thetas: self._mean_at(space, thetas, lb, sb),
                                               interval, lb.shape, "prediction", luck=luck), est.ravel())
        return Prediction(pick(est), pick(low), pick(high))

    @staticmethod
    def _mean_at(space, thetas: np.ndarray, lam: np.ndarray, servers: np.ndarray) -> np.ndarray:
        """Mean response (K, N) for K parameter vectors of one model at N (rate, servers)."""
        from .. import fcfs, ps, rr

        model = space.model
        params = space.unpack(thetas)
        svc = make_service(model.family, params["mean"][:, None], params["scv"][:, None])
        with np.errstate(all="ignore"):
            if model.discipline == "rr":
                t = rr.mean_response(lam, svc, servers, slices=model.slices, slice_delay=model.slice_delay,
                                     admission=model.admission)
            else:
                t = (fcfs if model.discipline == "fcfs" else ps).mean_response(lam, svc, servers)
        t = np.asarray(t, dtype=float)
        if "delay" in params:
            t = t + params["delay"][:, None]
        elif "delay_mean" in params:
            t = t + params["delay_mean"][:, None]
        return np.where(np.isfinite(t), t, np.inf)

    _N_DRAWS = 400

    def _draw_sets(self, n: int) -> list:
        """[(space, thetas)]: parameter sets drawn from the sampling distribution of each candidate
        model with weight (one model alone unless the fit chose it from the data), in proportion to
        its Akaike weight -- the model uncertainty next to the parameters'."""
        sets = []
        for fit, weight in self._candidate_fits:
            k = int(round(n * weight))
            if weight >= 0.01 and k > 0:
                sets += fit._own_draws(k)
        # The held CPU reading's draws first, the other reading's after: the first rows (and their
        # seeded model errors) are then those of a fit without the second reading.
        return sorted(sets, key=lambda s: isinstance(s[0], _MeanScaled))

    def _own_draws(self, n: int) -> list:
        """[(space, thetas)]: parameter sets drawn from this fit's own sampling distribution; with
        a second reading of the held CPU per request (``_mean_alternative``), the same sets again
        with that mean (in a :class:`_MeanScaled` space)."""
        sets = self._parameter_draws(n)
        factor = self._mean_alternative
        if factor is None or not sets:
            return sets
        (space, thetas), = sets
        return [(space, thetas), (_MeanScaled(space, factor), thetas)]

    def _parameter_draws(self, n: int) -> list:
        """[(space, thetas)]: ``n`` sets of the search parameters drawn from their sampling
        distribution (the estimate ``n`` times where none is free, so that the model error spreads
        it and a candidate weighs by its draws; none without a covariance)."""
        if not self._theta.size:
            return [(self._space, np.zeros((n, 0)))]
        if self.covariance_ is None:
            return []
        rng = np.random.default_rng(20261203)
        profiles = self._profiles_on_bounds()
        if profiles:
            from ._bound_profile import draws_with_bounds

            draws = draws_with_bounds(self._theta, self.covariance_, profiles, n, rng)
            return [(self._space, np.clip(draws, self._space.lo, self._space.hi))]
        cov = 0.5 * (self.covariance_ + self.covariance_.T)
        # eigh, not Cholesky: a near-singular covariance (an unidentified parameter) is allowed.
        w, v = np.linalg.eigh(cov)
        root = v * np.sqrt(np.maximum(w, 0.0))
        draws = self._theta[None, :] + rng.standard_normal((n, self._theta.size)) @ root.T
        # Held within the search bounds: the model's own domain (a PS law beyond the shipped table's
        # scv is computed point by point, minutes for 400 draws; a mean past the busiest observation's
        # stability is not a parameter the data allow either).
        return [(self._space, np.clip(draws, self._space.lo, self._space.hi))]

    def _window_luck(self, window, stats: np.ndarray, lam: np.ndarray, servers: np.ndarray):
        """None without ``window``; else ``draws -> (draws, N)`` factors, the luck of a ``window``-second
        measurement of ``stats`` (quantile levels, NaN for the mean) at each load."""
        if window is None:
            return None
        if np.ndim(window) != 0:
            raise ValueError(f"window must be one number of seconds, got {window!r}")
        window = float(check_positive(window, "window"))        # finite and > 0
        from ._window import window_factors

        params = self._space.unpack(self._theta[None, :])
        return lambda draws: window_factors(self._space.model, params, stats, lam, servers, window, draws)

    def _profile_bound_intervals(self) -> None:
        """The interval of each parameter on its search bound from its profile likelihood
        (:mod:`capacity.fit._bound_profile`), in place of the Wald interval, whose curvature there
        means nothing; the method line says so."""
        profiles = self._profiles_on_bounds() if self.covariance_ is not None else []
        if not profiles:
            return
        space = self._space
        for pr in profiles:
            lo, hi = pr.interval(self.confidence_level)
            natural = {"log_scv": ("scv", (math.exp(lo), math.exp(hi))),
                       "delay": ("delay", (lo * space.t_ref, hi * space.t_ref)),
                       "log_mean": ("cpu_per_request", (math.exp(lo), math.exp(hi)))}
            if space.names[pr.index] not in natural:
                continue            # a lognormal delay's parameters: their rows keep the Wald range
            key, (lo_n, hi_n) = natural[space.names[pr.index]]
            est, _, _, unit, note = self._rows[key]
            self._rows[key] = (est, lo_n, hi_n, unit, note + " (on its bound: profile-likelihood interval)")
            if key == "cpu_per_request":
                est, _, _, unit, note = self._rows["capacity_qps"]
                self._rows["capacity_qps"] = (est, self._servers_default / hi_n, self._servers_default / lo_n,
                                              unit, note)
        self.method += "; profile-likelihood intervals for parameters on their search bounds"

    def _at_an_edge(self) -> list[str]:
        """The parameters whose estimate is an edge of what the model can compute rather than a
        fitted value: the scv on its upper search bound (the end of a shipped table or of the
        family's domain), the CPU per request on either bound (utilisation 0.999 at the busiest
        load, or nothing), a constant delay on its upper bound (the whole of the smallest
        latency).  A lower scv bound (nearly constant CPU) and no delay are legitimate answers."""
        space, theta = getattr(self, "_space", None), getattr(self, "_theta", None)
        if space is None or theta is None or not np.size(theta):
            return []
        from ._bound_profile import on_bound

        lo, hi = np.asarray(space.lo, dtype=float), np.asarray(space.hi, dtype=float)
        edge = []
        for i in on_bound(np.asarray(theta, dtype=float), lo, hi):
            name, upper = space.names[i], theta[i] - lo[i] > hi[i] - theta[i]
            if name == "log_mean" or (upper and name in ("log_scv", "delay")):
                edge.append(name)
        return edge

    def _profiles_on_bounds(self) -> list:
        """Profiles of the parameters on a search bound (:mod:`capacity.fit._bound_profile`),
        computed once; empty for fits that keep no residual function (no covariance) or whose
        model is computed point by point."""
        residuals = self._residuals
        # A model computed point by point (no shipped table) would take minutes to profile: Wald.
        if residuals is None or not self._theta.size or self._space.model.slow:
            return []
        if self._bound_profiles is None:
            from ._bound_profile import on_bound, profile_from_bound

            lo, hi = np.asarray(self._space.lo, dtype=float), np.asarray(self._space.hi, dtype=float)
            self._bound_profiles = [profile_from_bound(residuals, self._theta, i, lo, hi, self._dispersion)
                                    for i in on_bound(self._theta, lo, hi)]
        return self._bound_profiles

    def _interval_of(self, evaluate, interval: float, shape: tuple, what: str, model_error: bool = True,
                     stacklevel: int = 3, luck=None):
        """Central ``interval`` range of ``evaluate(space, thetas)`` (K draws x N points) over the
        parameter draws of every model with weight, each value times the model error when asked
        and times ``luck(K)`` (a finite window's, :meth:`_window_luck`) when given; NaN, with a
        warning naming what is missing, without a covariance."""
        sets = self._draw_sets(self._N_DRAWS)
        if not sets:
            import warnings

            from ..exceptions import IdentifiabilityWarning

            warnings.warn(f"no {what} interval: the fit has no covariance (give n_requests, the requests "
                          "behind each set of percentiles)", IdentifiabilityWarning, stacklevel=stacklevel)
            return np.full(shape, np.nan), np.full(shape, np.nan)
        with np.errstate(all="ignore"):
            parts = [np.asarray(evaluate(space, thetas), dtype=float) for space, thetas in sets]
        allx = np.concatenate(parts, axis=0)
        # Which rows read the held CPU per request the other way (capacity.fit._cpu_law).
        other = np.concatenate([np.full(x.shape[0], isinstance(space, _MeanScaled))
                                for x, (space, _) in zip(parts, sets)])
        if model_error:
            allx = self._with_model_error(allx)
        if luck is not None:
            allx = allx * luck(allx.shape[0])
        tail = 0.5 * (1.0 - interval)
        # inf (unstable draws) held as the largest float while interpolating: inf - inf is NaN.
        big = np.finfo(float).max
        allx = np.where(np.isposinf(allx), big, allx)
        # The union of each reading's central range (one reading alone: its own range).
        groups = [rows for rows in (~other, other) if rows.any()]
        low = np.min([np.quantile(allx[rows], tail, axis=0) for rows in groups], axis=0)
        high = np.max([np.quantile(allx[rows], 1.0 - tail, axis=0) for rows in groups], axis=0)
        return tuple(np.where(b > 1e300, np.inf, b) for b in (low, high))

    def _model_error(self) -> float:
        """The fit's own miss of its data, on the log scale (RMS relative error of the percentiles)."""
        value = float(self.fit_quality_.get("rms_rel_error", 0.0))
        return value if math.isfinite(value) else 0.0

    def _with_model_error(self, draws: np.ndarray) -> np.ndarray:
        """Each draw times ``exp(m Z)``, Z standard normal (seeded), m :meth:`_model_error`: how far
        the model missed the data it came from, carried into the prediction as a model error of
        that size (conservative: the miss holds some sampling noise too).

        One Z per draw, shared by every point of the call: a model that is off is off along the
        whole curve, and the interval at a rate does not depend on which other rates were asked
        with it (one Z per point made ``predict(q, [a, b])`` at ``a`` differ from ``predict(q, a)``
        by the Monte Carlo noise of a fresh set of Z)."""
        m = self._model_error()
        if m <= 0:
            return draws
        rng = np.random.default_rng(31)
        z = rng.standard_normal((draws.shape[0],) + (1,) * (draws.ndim - 1))
        with np.errstate(invalid="ignore"):
            return draws * np.exp(m * z)

    def _warn_extrapolation(self, lb, sb) -> None:
        seen = float(self.fit_quality_.get("max_utilization", np.nan))
        asked = float(np.max(lb * self.cpu_per_request_ / sb))
        if np.isfinite(seen) and asked > seen * 1.15:
            import warnings

            from ..exceptions import IdentifiabilityWarning

            warnings.warn(f"extrapolating: the prediction is at utilisation {asked:.2f}, the busiest "
                          f"observation was at {seen:.2f}; the interval covers the fit's parameter "
                          "uncertainty, not a change of behaviour above what was seen (windows at "
                          f"utilisation near {min(asked, 0.95):.2f} would test it)",
                          IdentifiabilityWarning, stacklevel=3)

    def ceiling(self, slo: Mapping[float, float], interval: float | None = None):
        """Highest request rate meeting ``slo`` ({q: seconds}), via :func:`capacity.plan.qps_ceiling`.

        Only for no delay or a constant delay (which shrinks each threshold).

        With ``interval`` (a coverage such as 0.9) returns ``Prediction(estimate, low, high)``:
        ``estimate`` the :class:`~capacity.plan.Ceiling` as without it, ``low`` and ``high``
        the central range of the ceiling (QPS) over the parameter draws of :meth:`predict`
        (and the candidate models by weight), each draw's ceiling from one vectorised
        :func:`~capacity.plan.qps_ceiling`; a fitted constant delay is held at each model's
        estimate (its spread is left out).  NaN bounds, with a warning, without a covariance.

        The answer is checked against the data the fit came from: where a window (an observation)
        at a higher rate than the ceiling met the SLO, the ceiling contradicts the data, and
        ``contradictions`` and the explanation say so next to the number (which stays the
        model's), with how sure it is.  With request counts (histograms, ``n_requests``) a
        window counts only when it met the SLO beyond sampling noise: the upper confidence
        bound (Clopper-Pearson, at the fit's ``confidence_level`` jointly over the windows above
        the ceiling, Bonferroni) of its share of requests slower than the SLO time is within
        ``1 - q``, the requests deflated for the queue's correlation (the dispersion of the
        windows nearest in load, else the fit's own); see :mod:`capacity.fit._slo_evidence`.
        Without counts the note says only that the observation met the SLO at that load.
        """
        from ..plan import qps_ceiling

        if isinstance(self.delay_, Service):
            raise NotImplementedError("ceiling() supports no delay or a constant delay; "
                                      "use predict() on a grid")
        extra = ({"slices": self.slices_, "admission": self.admission_, "slice_delay": self.slice_delay_}
                 if self.discipline == "rr" else {})
        c = qps_ceiling(self.service_, self._servers_default, slo, discipline=self.discipline,
                        delay=float(self.delay_ or 0.0), **extra)
        note = node_cluster_note(self.discipline, self._servers_default)
        if note:
            import dataclasses

            c = dataclasses.replace(c, explanation=f"{c.explanation} {note}")
        if interval is not None:
            from ._inputs import check_confidence

            check_confidence(interval)
            low, high = _around(*self._ceiling_bounds(c.slo, interval), np.asarray(float(c.qps)))
            return Prediction(self._checked_ceiling(c), float(low), float(high))
        return self._checked_ceiling(c)

    def _ceiling_bounds(self, slo: dict, interval: float) -> tuple[float, float]:
        from ..plan import qps_ceiling

        def ceilings(space, thetas):
            model = space.model
            params = space.unpack(thetas)
            svc = make_service(model.family, params["mean"], params["scv"])
            delay = float(np.median(params["delay"])) if "delay" in params else 0.0
            extra = ({"slices": model.slices, "admission": model.admission, "slice_delay": model.slice_delay}
                     if model.discipline == "rr" else {})
            got = qps_ceiling(svc, self._servers_default, slo, discipline=model.discipline, delay=delay, **extra)
            return np.atleast_1d(np.asarray(got.qps, dtype=float))

        low, high = self._interval_of(ceilings, interval, (), "ceiling", model_error=False, stacklevel=4)
        return float(low), float(high)

    def _checked_ceiling(self, c):
        """The ceiling with what it contradicts in the data said next to it: an observation at a
        higher rate that met the SLO, and the fit's own contradictions (``contradictions_``)."""
        import dataclasses

        from ..units import format_rate

        if np.ndim(c.qps) != 0:
            return c
        notes = []
        # The busiest observation above the ceiling where the SLO held.
        held = self._slo_held(c.slo, float(c.qps))
        if held is not None:
            _, evidence, sure = held
            advice = ("trust the observation" if sure else
                      "one observation, and without the number of requests behind it how sure it is cannot be "
                      "said (give n_requests)")
            notes.append(f"this contradicts the data: {evidence}, yet the ceiling is {format_rate(float(c.qps))}; "
                         f"the model misses its own data (RMS error {self._miss_text()}) -- {advice}, and fit "
                         "another discipline, family or delay")
        notes += [f"the data contradict each other: {n}" for n in self.contradictions_]
        if not notes:
            return c
        text = " ".join(f"{n[0].upper()}{n[1:]}." for n in notes)
        return dataclasses.replace(c, explanation=f"{c.explanation} {text}", contradictions=tuple(notes))

    def _slo_held(self, slo: dict, above: float) -> tuple[float, str, bool] | None:
        """(rate, what was seen, whether it is sure) for the busiest observation above ``above``
        (req/s) where the SLO held; None if none.

        With ``n_requests``, only where the counts show it beyond sampling noise
        (:func:`._slo_evidence.observations_held`).  Without them how sure cannot be said: an
        observation whose measured SLO percentiles all met it is reported as what it is, one
        observation that met the SLO (``sure`` False)."""
        from ..units import format_quantile, format_rate, format_time
        from ._slo_evidence import observations_held

        comp = self.comparison_
        obs = getattr(self._space, "obs", None)
        counted = obs is not None and obs.have_n
        if counted:
            comp = comp.assign(n_requests=obs.n_requests)
        groups = [rows for _, rows in comp[comp["arrival_rate"] > above * 1.001].groupby("observation")]
        if not counted:
            out = []
            for rows in groups:
                seen = {float(q): float(t) for q, t in zip(rows["q"], rows["observed"])}
                common = [q for q in slo if q in seen]
                if common and all(seen[q] <= slo[q] for q in common):
                    rate = float(rows["arrival_rate"].iloc[0])
                    out.append((rate, f"at {format_rate(rate)} the observed "
                                + ", ".join(f"{format_quantile(q)} {format_time(seen[q])}" for q in common)
                                + " met the SLO", False))
            return max(out, default=None)
        if not groups:
            return None
        return observations_held(groups, slo, self.fit_quality_, self.confidence_level)

    def _miss_text(self) -> str:
        rms = self.fit_quality_.get("rms_rel_error", math.nan)
        return f"{100 * float(rms):.0f} %"

    def _description(self) -> dict:
        return {"discipline": self.discipline, "family": self.family, "servers": self.servers,
                "delay": self._model.delay, "slices": self.slices_, "admission": self.admission_,
                "slice_delay": self.slice_delay_, "measured_at": getattr(self, "measured_at", None)}


class _MeanScaled:
    """A fit's prediction space whose service-time mean is multiplied by ``factor`` (the other
    reading of a held CPU per request, :mod:`capacity.fit._cpu_law`)."""

    def __init__(self, space, factor: float):
        self.space, self.factor = space, factor
        self.model, self.names, self.t_ref = space.model, space.names, space.t_ref
        self.lo, self.hi = space.lo, space.hi

    def unpack(self, theta: np.ndarray) -> dict:
        params = dict(self.space.unpack(np.atleast_2d(theta)))
        params["mean"] = params["mean"] * self.factor
        return params

    def quantiles_at(self, theta, q, lam, servers) -> np.ndarray:
        return self.model.quantiles(self.unpack(theta), q, lam, servers)


def _window_needs_interval(window) -> None:
    if window is not None:
        raise ValueError(f"window={window!r} shapes the prediction interval only: give interval= too "
                         "(e.g. interval=0.9)")


def servers_text(n) -> str:
    """``1 server``, ``4 servers``: the count as a summary's note says it."""
    return f"{n:g} server" + ("" if n == 1 else "s")


def _around(low: np.ndarray, high: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The interval widened to hold the fit's own estimate: when the draws' central range misses
    it (a parameter the data barely pin down, its draws piling up at the ends of its range, or
    candidate models that disagree), the estimate is still a value the data allow.  NaN bounds
    (no covariance) stay NaN."""
    with np.errstate(invalid="ignore"):
        return (np.where(np.isnan(low), low, np.fmin(low, estimate)),
                np.where(np.isnan(high), high, np.fmax(high, estimate)))

