"""How much QPS before a latency SLO breaks: :func:`qps_ceiling` and :func:`ceiling_from_curve`.

Both answer with a :class:`Ceiling`: the exact solver of :mod:`capacity.plan._solve` on the
forward model, or a read-off of a cached :class:`~capacity.plan.ResponseCurve` (fast enough for
a slider).  See :mod:`capacity.plan`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._checks import check_nonnegative, check_positive, check_rr, check_servers, scalar_out
from .._deprecation import deprecated_property
from .._result import Result
from ..distributions import Service, as_service
from ._solve import (
    _max_rates,
    _max_rates_quantile,
    _mm1_fcfs_rates,
    _parse_slo,
    _rr_additive_delay,
    _rr_quantile,
    _tail_fractions,
    _tail_function,
)
from ._text import _explain_ceiling
from .curves import ResponseCurve, _curve_rate, _curve_rates

__all__ = ["Ceiling", "ceiling_from_curve", "qps_ceiling"]

ArrayLike = Any


@dataclass(frozen=True, repr=False)
class Ceiling(Result):
    """Result of :func:`qps_ceiling` and :func:`ceiling_from_curve`.

    Attributes
    ----------
    qps : float or ndarray
        Highest arrival rate (requests/s) at which every SLO percentile holds; 0 when no
        load meets the SLO.
    capacity_qps : float or ndarray
        Arrival rate at utilisation 1 (``servers / E[S]``): the CPU's raw throughput.
    utilization : float or ndarray
        ``qps / capacity_qps``: the utilisation at the ceiling (was ``ratio``, which still
        works for one release with a ``DeprecationWarning``).
    binding : float or ndarray
        The SLO quantile that binds first (e.g. ``0.99``).
    rates : dict
        Quantile -> ceiling of that percentile alone (requests/s).
    feasible : bool or ndarray
        False where no load meets the SLO.
    slo, discipline, servers, slo_on
        What was asked.
    delay : float
        The constant latency taken off every threshold, seconds (the ``delay`` plus, for rr
        with ``admission="fifo"``, ``(slices - 1) * slice_delay``).
    explanation : str
        One paragraph of plain text with the numbers (``str(ceiling)``).
    slices, slice_delay, admission
        The event-loop model the ceiling was computed with (``discipline="rr"``; 1, 0 and
        ``"fifo"`` for the other disciplines), so that a stored result says what it assumed.
    contradictions : tuple of str
        A fitted model's ceiling checked against the data it was fitted to
        (:meth:`capacity.fit.PercentileFit.ceiling`): each sentence names an observation the
        ceiling contradicts (an SLO met at a higher rate).  Empty when none, or not checked.
    """

    qps: Any
    capacity_qps: Any
    utilization: Any
    binding: Any
    rates: dict
    feasible: Any
    slo: dict
    discipline: str
    servers: Any
    delay: float
    slo_on: str
    explanation: str
    slices: int = 1
    slice_delay: float = 0.0
    admission: str = "fifo"
    contradictions: tuple = ()

    _headline: ClassVar[tuple[str, ...]] = ("qps", "capacity_qps", "utilization", "binding")

    ratio = deprecated_property("utilization")

    def headroom(self, arrival_rate: ArrayLike):
        """Fraction by which traffic at ``arrival_rate`` (requests/s) can grow before the SLO
        breaks: ``qps / arrival_rate - 1`` (negative when already past the ceiling)."""
        rate = check_positive(arrival_rate, "arrival_rate")
        return scalar_out(np.asarray(self.qps) / rate - 1.0)


def _ceiling(rates: np.ndarray, reason: np.ndarray, capacity: np.ndarray, qs: np.ndarray, ts: np.ndarray,
             service: Service, servers, discipline: str, delay: float, slo_on: str, slices: int,
             slice_delay: float, admission: str) -> Ceiling:
    """The :class:`Ceiling` of per-percentile ceilings in :func:`capacity.plan._solve._max_rates`' layout
    (``rates`` and ``reason`` of shape ``B + (k,)``, ``capacity`` of shape ``B + (1,)``)."""
    which = np.argmin(rates, axis=-1)
    qps = np.take_along_axis(rates, which[..., None], axis=-1)[..., 0]
    cap = capacity[..., 0]
    feasible = (reason == 0).all(axis=-1)
    # Where the SLO cannot be met, name the first percentile that fails.
    first_bad = np.argmax(reason != 0, axis=-1)
    which = np.where(feasible, which, first_bad)
    res = dict(qps=scalar_out(qps), capacity_qps=scalar_out(cap), utilization=scalar_out(qps / cap),
               binding=scalar_out(qs[which]), rates={float(q): scalar_out(rates[..., i]) for i, q in enumerate(qs)},
               feasible=scalar_out(feasible), slo={float(q): scalar_out(ts[..., i]) for i, q in enumerate(qs)},
               discipline=discipline, servers=scalar_out(servers), delay=delay, slo_on=slo_on)
    text = _explain_ceiling(res, service, reason, qs, ts, first_bad)
    return Ceiling(**res, explanation=text, slices=int(slices), slice_delay=float(slice_delay), admission=admission)


def qps_ceiling(service: Service | ArrayLike, servers: ArrayLike = 1, slo: Mapping[float, float] | None = None,
                discipline: str = "ps", delay: float = 0.0, *, slo_on: str = "response", slices: int = 1,
                slice_delay: float = 0.0, admission: str = "fifo", method: str = "exact") -> Ceiling:
    """The highest request rate at which every SLO percentile holds.

    Parameters
    ----------
    service : Service or float
        CPU time per request, seconds (a bare number: exponential with that mean).  Parameters
        may be arrays (one ceiling per element).
    servers : int or array_like of int, optional
        Cores or worker processes serving one queue (default 1); an array gives one ceiling
        per element.
    slo : mapping, optional
        Quantile -> seconds, e.g. ``{0.99: 0.5, 0.999: 2.0}`` (default ``{0.99: 0.5}``).
    discipline : {"ps", "fcfs", "rr"}, optional
        Processor sharing (an event loop, a time-sliced CPU; default), first come first
        served (a blocking worker pool) or event-loop round robin with ``slices`` slices per
        request (handlers that ``await``; :mod:`capacity.rr`).
    delay : float, optional
        Constant non-CPU latency added to every response (IO wait, downstream calls), seconds.
        It does not hold the CPU, so it only shrinks each threshold to ``t - delay``.
    slo_on : {"response", "wait"}, optional
        Whether the SLO bounds the response time (default) or, for FCFS, the waiting time
        before service starts (call-centre style "answered within 20 s").
    slices : int, optional
        ``discipline="rr"`` only: CPU slices per request (1 is FCFS exactly).
    slice_delay : float, optional
        ``discipline="rr"`` only: non-CPU delay between slices, seconds; with
        ``admission="fifo"`` it shrinks each threshold like ``delay``, by
        ``(slices - 1) * slice_delay`` (exact in the rr model); with ``"idle"`` it enters the
        rr model itself (it also decides when new requests get in).
    admission : {"fifo", "idle"}, optional
        ``discipline="rr"`` only: when a new request joins the run queue -- at once
        (``"fifo"``, default) or only when no request in flight is runnable (``"idle"``: Node.js
        20 handlers that ``await`` a ``setTimeout``); see :func:`capacity.rr.mean_response`.
    method : {"exact", "curve"}, optional
        ``"exact"`` (default) solves the forward model; ``"curve"`` reads the ceiling off the
        cached scale-free response curve (:func:`capacity.plan.response_curve`,
        :func:`ceiling_from_curve`): fast enough for a slider once the curve for the service
        shape is cached (``benchmarks/bench_notebooks.py`` times it), relative error below 2e-4
        (see ``ceiling_from_curve``); scalar service and servers only.

    Returns
    -------
    Ceiling
        ``.qps``, ``.capacity_qps``, ``.utilization``, ``.binding``, ``.rates``, ``.explanation``.

    Notes
    -----
    The SLO ``quantile_q(T) <= t`` holds exactly when ``P(T > t - delay) <= 1 - q``, and the
    tail probability rises with the arrival rate ``lambda``.  For each percentile the root of
    ``log P(T > t - delay; lambda) = log(1 - q)`` is found by the vectorised Illinois solver of
    :func:`capacity._common.solve_increasing`, in the variable ``u = rho / (1 - rho)`` (which
    maps the stable range ``0 < rho < 1`` onto ``(0, inf)``), relative accuracy 1e-7 in the rate;
    each iteration is one call of the forward model over all percentiles and configurations.
    The ceiling is the smallest of the per-percentile roots.

    M/M/1 FCFS has the closed form ``lambda = mu - ln(1 / (1 - q)) / t`` (the response time is
    exponential with rate ``mu - lambda``), used directly.

    Round robin (``"rr"``, ``slices > 1``) solves ``log quantile_q(T; lambda) = log t`` on
    :func:`capacity.rr.response_quantile` (its ``response_sf`` interpolates between tail
    levels), with the same solver; ``slices=1`` is the FCFS computation (either admission).

    The accuracy is that of the forward model: exact for M/G/1 and M/M/c FCFS and for PS with
    phase-type service on one core or exponential service on ``c`` cores; approximate otherwise
    (see :mod:`capacity.fcfs` and :mod:`capacity.ps`, whose several-core processor sharing
    for any service law states its error against simulation).  Tail fractions below 1e-7
    (``q > 1 - 1e-7``) are below the numerical resolution of the forward models and are
    rejected.

    References
    ----------
    M. Harchol-Balter, *Performance Modeling and Design of Computer Systems* (2013),
    chapters 13-14 (M/M/1, M/M/k) and 22 (processor sharing).
    L. Kleinrock, *Queueing Systems, Vol. 1* (1975), section 3.2 (M/M/1 response-time
    distribution).

    Examples
    --------
    25 ms of exponential CPU per request, one blocking worker, p99 within 500 ms:
    ``40 - ln(100) / 0.5 = 30.79`` QPS.

    >>> from capacity import plan
    >>> c = plan.qps_ceiling(0.025, slo={0.99: 0.5}, discipline="fcfs")
    >>> round(c.qps, 2), round(c.utilization, 3)
    (30.79, 0.77)
    >>> c2 = plan.qps_ceiling(0.025, servers=[1, 2, 4], slo={0.99: 0.5}, discipline="fcfs")
    >>> c2.qps.round(1).tolist()
    [30.8, 70.6, 150.5]
    """
    slo = {0.99: 0.5} if slo is None else slo
    qs, ts = _parse_slo(slo)
    service = as_service(service)
    c = check_servers(servers)
    delay_f = float(check_nonnegative(delay, "delay"))
    if slo_on == "wait" and delay_f > 0:
        raise ValueError("delay applies to the response time; with slo_on='wait' it must be 0")
    k, d_slice, adm = check_rr(discipline, slices, slice_delay, admission)
    if method not in ("exact", "curve"):
        raise ValueError(f"method must be 'exact' or 'curve', got {method!r}")
    if discipline == "rr" and slo_on != "response":
        raise ValueError("slo_on='wait' needs discipline='fcfs'")
    model = "fcfs" if (discipline == "rr" and k == 1) else discipline
    p = _tail_fractions(qs)
    # The constant part of the latency comes off the thresholds; for admission="idle" the slice
    # delay is not constant and stays in the rr model (d_model).
    d_add = _rr_additive_delay(k, d_slice, adm)
    d_model = d_slice if (k > 1 and adm == "idle") else 0.0
    t_eff = ts - delay_f - d_add

    if method == "curve":
        if slo_on != "response":
            raise ValueError("method='curve' covers response-time SLOs only")
        rates, reason, capacity = _curve_rates(service, c, qs, t_eff, discipline, k, d_model, adm)
    elif (model == "fcfs" and slo_on == "response" and service.family == "exponential"
          and bool(np.all(c == 1))):
        rates, reason, capacity = _mm1_fcfs_rates(service, c, qs, t_eff, p)
    elif model == "rr":
        rates, reason, capacity = _max_rates_quantile(_rr_quantile(k, d_model, adm), service, c, t_eff, qs)
    elif model == "ps" and slo_on == "response" and _ps_tabled(service, c):
        # A shipped PS table answers quantiles at any load, but P(T > t) only down to its last
        # level (1e-6): at the light loads the solver tries first, the tail beyond it was computed
        # directly (0.5 s a point; a gamma scv 0.3 ceiling took 27 s).  The same root, on quantiles.
        from .. import ps

        rates, reason, capacity = _max_rates_quantile(
            lambda q, rate, svc, cc: ps.response_quantile(q, rate, svc, cc), service, c, t_eff, qs)
    else:
        rates, reason, capacity = _max_rates(_tail_function(model, slo_on), service, c, t_eff, p)
    return _ceiling(rates, reason, capacity, qs, ts, service, c, discipline, delay_f + d_add, slo_on, k, d_slice,
                    adm)


def _ps_tabled(service: Service, servers: np.ndarray) -> bool:
    """One core and a family the shipped PS table holds."""
    from .. import _quantile_table

    return bool(np.all(servers == 1)) and service.family in _quantile_table.families("ps")


def ceiling_from_curve(curve: ResponseCurve, slo: Mapping[float, ArrayLike]) -> Ceiling:
    """The highest arrival rate at which every SLO percentile holds, read off a response curve.

    Parameters
    ----------
    curve : ResponseCurve
        From :func:`capacity.plan.response_curve`; every SLO quantile must be one of
        ``curve.quantiles``.
    slo : mapping
        Quantile -> threshold, seconds (thresholds may be arrays: one ceiling per element).

    Returns
    -------
    Ceiling
        As :func:`qps_ceiling` gives it: ``.qps`` (requests/s, 0 where no load meets the SLO),
        ``.binding``, ``.rates``, ``.explanation``.  (Before this release: the bare ``.qps``.)

    Notes
    -----
    An approximation of :func:`qps_ceiling` (which solves the forward model to a relative
    1e-7): the SLO ``quantile_q <= t`` holds while ``E[S] unit_q(rho) + offset <= t``, and
    ``unit_q`` is increasing, so its inverse at ``(t - offset) / E[S]`` is interpolated by a
    monotone cubic (PCHIP, Fritsch-Carlson) of ``log(1 - rho)`` against ``log unit_q`` through
    the grid points and the zero-load point; both coordinates are nearly linear in each other
    at both ends (``t -> E[S] quantile`` at low load, ``t ~ 1 / (1 - rho)`` in heavy traffic).
    Beyond the last grid point the last segment is extrapolated.  Measured against the exact
    solver with the default 40-point grid (``tests/test_plan_curves.py``): relative error
    below 2e-4 for p99/p99.9 over FCFS (scv 0-4, 1-4 servers), PS (exponential, 1-2 cores) and
    rr; typically ~1e-5.  Cheap enough for a slider (``benchmarks/bench_notebooks.py`` times
    notebook 02's moves, which call it).

    References
    ----------
    F. N. Fritsch and R. E. Carlson, "Monotone piecewise cubic interpolation", SIAM J. Numer.
    Anal. 17(2) (1980) 238-246.

    Examples
    --------
    >>> from capacity import plan
    >>> c = plan.response_curve(0.010, discipline="fcfs", quantiles=(0.99,))
    >>> round(plan.ceiling_from_curve(c, {0.99: 0.100}).qps, 2)   # exact: 100 - ln(100) / 0.1 = 53.95
    53.95
    """
    if not hasattr(slo, "items") or len(slo) == 0:
        raise ValueError(f"slo must be a non-empty mapping quantile -> seconds, got {slo!r}")
    items = sorted(slo.items(), key=lambda item: float(item[0]))
    qs = np.array([float(q) for q, _ in items])
    thresholds = [np.asarray(t, dtype=float) for _, t in items]
    shape = np.broadcast_shapes(*(t.shape for t in thresholds))
    ts = np.stack([np.broadcast_to(t, shape) for t in thresholds], axis=-1)    # B + (k,)
    rows = [curve._index(q) for q in qs]
    rates = np.stack([_curve_rate(curve, q, ts[..., k], row) for k, (q, row) in enumerate(zip(qs, rows))], axis=-1)
    zero_load = curve.zero_load[rows]
    # As the solver's reasons: 1 where the constant delays alone use the threshold up, 2 where
    # even zero load misses it.
    reason = np.where(ts - curve.offset <= 0, 1, np.where(zero_load <= ts, 0, 2))
    rates = np.where(reason == 0, rates, 0.0)
    capacity = np.full(shape + (1,), curve.capacity_qps)
    return _ceiling(rates, reason, capacity, qs, ts, curve.service, curve.servers, curve.discipline, curve.offset,
                    "response", curve.slices, curve.slice_delay, curve.admission)
