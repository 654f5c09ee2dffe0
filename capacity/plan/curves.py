"""Response curves: response-time quantiles against load, from one cached scale-free table.

A slider that changes the CPU time per request, the SLO threshold or an IO
delay should not re-solve a queueing model.  It does not have to: for a fixed
service-time *shape* (family and squared coefficient of variation), fixed
servers, discipline and slices, every response-time quantile is ``E[S]``
times a function of the utilisation alone.  This module computes that
function once on a utilisation grid (:func:`response_curve`, cached), rescales
it for any ``E[S]``, and reads SLO ceilings and timeout-safe rates off it by
monotone interpolation (:func:`capacity.plan.ceiling_from_curve`, and
``qps_ceiling(..., method="curve")`` / ``timeout_safe_rate(..., method="curve")``).

Why the rescaling is exact
--------------------------
Measure time in units of ``a = E[S]``.  A Poisson stream at rate ``lambda``
becomes a Poisson stream at rate ``lambda a``; a service time ``S`` becomes
``S / a``, which has mean 1 and the same family and scv.  Every discipline
here (FCFS, processor sharing, round robin with ``k`` equal slices) is
defined by the order of events and the *fractions* of the CPU each request
gets, which do not change under a change of time unit.  So the whole sample
path of the queue is the unit-mean path stretched by ``a``: the response
time ``T(a) = a T(1)`` in distribution at the same utilisation
``rho = lambda a / c``, hence ``quantile_q(T; lambda, a) = a quantile_q(T; rho c, 1)``.
The round-robin approximation of :mod:`capacity.rr` keeps this property
(its weights depend on ``rho``, ``scv`` and ``k`` only).  A constant delay
(IO wait, the ``(k - 1) slice_delay`` of :mod:`capacity.rr` with
``admission="fifo"``) is added after the queue and does not enter the table.
With ``admission="idle"`` the slice delay also decides when new requests get
in, so it is part of the queue; in units of ``E[S]`` it is the ratio
``slice_delay / E[S]``, and the table for that ratio is recomputed from the
cached FCFS and zero-delay rr tables on every call (see :func:`response_curve`).

The cache
---------
``_unit_table`` is a :func:`functools.lru_cache` (256 entries) keyed by
``(discipline, shape key, servers, slices, quantiles, utilisation grid)``,
where the shape key is ``(family,)`` for deterministic and exponential,
``(family, scv)`` for gamma, lognormal and hyperexponential, ``("erlang", k)``,
or the bytes of the samples divided by their mean for an empirical service.
A ``Service.from_scipy`` distribution has no such key: its curve is computed
every time (still correct, just not cached).  Tables are read-only arrays.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy.interpolate import PchipInterpolator

from .._checks import check_nonnegative, check_quantile, check_rr, check_servers
from .._deprecation import deprecated_alias, deprecated_property, module_getattr
from .._result import Result, jsonable
from ..distributions import Service, as_service
from ..units import format_quantile as _fmt_q
from ..units import format_rate as _fmt_rate
from ..units import format_time as _fmt_time
from ._solve import _rr_additive_delay
from ._text import _DISCIPLINE_TEXT, _describe_service, _servers_text

__all__ = ["DEFAULT_UTILIZATION", "ResponseCurve", "response_curve"]

ArrayLike = Any

# 40 utilisations evenly spaced in logit(rho) from 0.002 to 0.995: dense at both ends, where the curves bend
# (near 0 the response is the bare service time, near 1 it grows like 1 / (1 - rho)).
DEFAULT_UTILIZATION = 1.0 / (1.0 + np.exp(-np.linspace(np.log(0.002 / 0.998), np.log(0.995 / 0.005), 40)))
DEFAULT_UTILIZATION.setflags(write=False)


# ---------------------------------------------------------------------------------------------
# The scale-free table


def _shape_key(service: Service) -> tuple | None:
    """A hashable key of the service-time distribution *up to its mean*, or None (not cacheable)."""
    fam = service.family
    if fam in ("deterministic", "exponential"):
        return (fam,)
    if fam == "erlang":
        return (fam, float(service._params["k"]))
    if fam in ("gamma", "lognormal", "hyperexponential"):
        return (fam, float(service._params["scv"]))
    if fam == "empirical":
        x = np.asarray(service._samples, dtype=float)
        return (fam, (x / x.mean()).tobytes())
    return None


def _unit_service(key: tuple) -> Service:
    """The mean-1 service of a shape key."""
    fam = key[0]
    if fam == "deterministic":
        return Service.deterministic(1.0)
    if fam == "exponential":
        return Service.exponential(1.0)
    if fam == "erlang":
        return Service.erlang(1.0, key[1])
    if fam == "empirical":
        return Service.empirical(np.frombuffer(key[1], dtype=float))
    return getattr(Service, fam)(1.0, key[1])


def _forward(discipline: str, q: np.ndarray, rate: np.ndarray, service: Service, servers: int,
             slices: int, slice_delay: float = 0.0, admission: str = "fifo") -> np.ndarray:
    """Response-time quantiles ``q`` (column) at arrival rates ``rate`` (row), no constant delays
    (``slice_delay`` is passed to rr: 0 for ``"fifo"``, where it is additive)."""
    from .. import fcfs, ps, rr

    if discipline == "fcfs" or (discipline == "rr" and slices == 1):
        out = fcfs.response_quantile(q, rate, service, servers)
    elif discipline == "ps":
        out = ps.response_quantile(q, rate, service, servers)
    elif discipline == "rr-ps":   # round robin's PS half (capacity.rr._ps_quantile)
        out = rr._ps_quantile(q, rate, service, servers)
    else:
        out = rr.response_quantile(q, rate, service, servers, slices=slices, slice_delay=slice_delay,
                                   admission=admission)
    return np.asarray(out, dtype=float)


def _compute_table(discipline: str, service: Service, mean: float, servers: int, slices: int,
                   quantiles: tuple, grid: tuple, slice_delay: float = 0.0,
                   admission: str = "fifo") -> tuple[np.ndarray, np.ndarray]:
    q = np.array(quantiles)[:, None]
    u = np.array(grid)
    # One call for the grid and the zero-load column (the bare service time, or rr's value at rho = 0).
    rates = np.concatenate([[0.0], u]) * servers / mean
    return _frozen(_forward(discipline, q, rates, service, servers, slices, slice_delay, admission) / mean)


@functools.lru_cache(maxsize=256)
def _unit_table(discipline: str, key: tuple, servers: int, slices: int, quantiles: tuple,
                grid: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles of the response time for E[S] = 1 (rows: quantiles, columns: grid) and at zero load."""
    if discipline == "rr" and slices > 1:
        # FIFO round robin: the formula's table times capacity._rr_body's measured correction,
        # as capacity.rr.response_quantile computes it.
        from ..rr import _fifo_correction

        f_tab, f_zero = _rr_formula_table(key, servers, slices, quantiles, grid)
        q = np.array(quantiles)[:, None]
        rho = np.concatenate([[0.0], np.array(grid)])[None, :]
        both = np.column_stack([f_zero, f_tab]) * _fifo_correction(q, rho, float(slices), _unit_service(key), servers)
        return _frozen(both)
    return _compute_table(discipline, _unit_service(key), 1.0, servers, slices, quantiles, grid)


def _frozen(both: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(table, zero-load column) of a zero-load-first table, read-only (they are cached)."""
    table, zero = both[:, 1:].copy(), both[:, 0].copy()
    table.setflags(write=False)
    zero.setflags(write=False)
    return table, zero


@functools.lru_cache(maxsize=256)
def _rr_formula_table(key: tuple, servers: int, slices: int, quantiles: tuple,
                      grid: tuple) -> tuple[np.ndarray, np.ndarray]:
    """capacity.rr's zero-delay FIFO formula for E[S] = 1, uncorrected: a per-point blend of the
    cached FCFS and PS tables, so a new slice count costs no queue computation.  The idle table
    starts from it, as capacity.rr's idle formula does."""
    from ..rr import _blend

    f_tab, f_zero = _unit_table("fcfs", key, servers, 1, quantiles, grid)
    # rr's PS half (capacity.rr._ps_quantile: the phase-type table for H2 and exponential CPU)
    p_tab, p_zero = _unit_table("rr-ps", key, servers, 1, quantiles, grid)
    q = np.array(quantiles)[:, None]
    rho = np.concatenate([[0.0], np.array(grid)])[None, :]
    scv = float(np.asarray(_unit_service(key).scv))
    return _frozen(_blend(q, np.column_stack([f_zero, f_tab]), np.column_stack([p_zero, p_tab]), 1.0, rho, scv,
                          float(slices)))


def _idle_unit_table(key: tuple, servers: int, slices: int, quantiles: tuple, grid: tuple,
                     unit_delay: float) -> tuple[np.ndarray, np.ndarray]:
    """The rr ``admission="idle"`` table for E[S] = 1 and slice delay ``unit_delay = d / E[S]``.

    Not cached (``unit_delay`` changes with every E[S]): rr's idle formula applied to the cached
    FCFS table and zero-delay rr table, elementwise, exactly as :func:`capacity.rr.response_quantile`
    combines the same two quantiles: a few array operations on cached tables instead of
    ``rr.response_quantile`` on the whole grid."""
    from .. import rr

    f_tab, f_zero = _unit_table("fcfs", key, servers, 1, quantiles, grid)
    r_tab, r_zero = _rr_formula_table(key, servers, slices, quantiles, grid)
    q = np.array(quantiles)[:, None]
    rho = np.concatenate([[0.0], np.array(grid)])[None, :]
    # the FCFS zero-load column is the unit service's quantile, the formula's zero-load value
    both = rr._idle_quantile(q, np.column_stack([f_zero, f_tab]), np.column_stack([r_zero, r_tab]), f_zero[:, None],
                             rho, float(slices), float(unit_delay), 1.0, _unit_service(key), servers)
    return _frozen(both)


# ---------------------------------------------------------------------------------------------
# response_curve


@dataclass(frozen=True, repr=False)
class ResponseCurve(Result):
    """Result of :func:`response_curve` (was ``LatencyCurve``, which still works for one release).

    Attributes
    ----------
    utilization : ndarray, shape (n,)
        The utilisation grid, in (0, 1).
    arrival_rate : ndarray, shape (n,)
        ``utilization * servers / E[S]``, requests/s.
    quantiles : ndarray, shape (m,)
    response : ndarray, shape (m, n)
        Response-time quantiles (rows) at each arrival rate, seconds, delays included (was
        ``latency``).
    zero_load : ndarray, shape (m,)
        The same quantiles at zero load, seconds.
    capacity_qps : float
        ``servers / E[S]``: the arrival rate at utilisation 1.
    mean_service : float
        ``E[S]``, seconds.
    servers, discipline, slices, slice_delay, delay, service
        What the curve was computed for.
    unit : ndarray, shape (m, n)
        The scale-free table: quantiles for E[S] = 1 and no constant delay (read-only, shared by
        the cache; for ``admission="idle"`` it includes the slice delay, at ``slice_delay / E[S]``).
    unit_zero : ndarray, shape (m,)
        The same at zero load.
    offset : float
        Constant latency added to every quantile, seconds: ``delay + (slices - 1) * slice_delay``
        (``admission="fifo"``) or ``delay`` alone (``"idle"``, whose slice delay is in ``unit``).
    admission : str
        The rr admission rule (``"fifo"`` or ``"idle"``; ``"fifo"`` for other disciplines).
    """

    utilization: np.ndarray
    arrival_rate: np.ndarray
    quantiles: np.ndarray
    response: np.ndarray
    zero_load: np.ndarray
    capacity_qps: float
    mean_service: float
    servers: int
    discipline: str
    slices: int
    slice_delay: float
    delay: float
    offset: float
    unit: np.ndarray = field(repr=False)
    unit_zero: np.ndarray = field(repr=False)
    admission: str = "fifo"
    service: Service | None = None

    _headline: ClassVar[tuple[str, ...]] = ("discipline", "servers", "mean_service", "quantiles")

    latency = deprecated_property("response")

    def row(self, q: float) -> np.ndarray:
        """Response time (s) of quantile ``q`` at every grid point; ``q`` must be one of ``quantiles``."""
        return self.response[self._index(q)]

    def _index(self, q: float) -> int:
        # |quantile - q| <= 1e-12, as np.isclose(rtol=0, atol=1e-12) but cheaper (slider hot path).
        hit = np.flatnonzero(np.abs(self.quantiles - float(q)) <= 1e-12)
        if hit.size == 0:
            raise ValueError(f"quantile {q!r} is not on this curve (quantiles {self.quantiles.tolist()})")
        return int(hit[0])

    def to_frame(self) -> pd.DataFrame:
        """The curve as a table: ``utilization``, ``arrival_rate`` and one column per quantile (s)."""
        data = {"utilization": self.utilization, "arrival_rate": self.arrival_rate}
        data.update({_fmt_q(float(q)): self.response[i] for i, q in enumerate(self.quantiles)})
        return pd.DataFrame(data)

    frame = deprecated_alias(to_frame, "ResponseCurve.frame", "ResponseCurve.to_frame")

    def to_dict(self) -> dict:
        """The curve's fields as JSON-ready Python, without the cache's scale-free ``unit`` tables
        (``response`` is ``mean_service * unit + offset``)."""
        return {name: jsonable(getattr(self, name)) for name in self._fields() if name not in ("unit", "unit_zero")}

    def __str__(self) -> str:
        # Written on demand, not stored: a slider builds a curve per move and rarely prints it.
        qs = "/".join(_fmt_q(float(q)) for q in self.quantiles)
        service = (_describe_service(self.service) if self.service is not None
                   else f"{_fmt_time(self.mean_service)} of CPU per request")
        text = (f"The {qs} response time with {service} on {_servers_text(self.servers)} under "
                f"{_DISCIPLINE_TEXT[self.discipline]}"
                + (f" ({self.slices} slices)" if self.discipline == "rr" and self.slices > 1 else "")
                + f", at {self.utilization.size} utilisations from {100 * self.utilization[0]:.3g} % to "
                f"{100 * self.utilization[-1]:.3g} % ({_fmt_rate(float(self.arrival_rate[0]))} to "
                f"{_fmt_rate(float(self.arrival_rate[-1]))} of a {_fmt_rate(self.capacity_qps)} capacity)")
        if self.offset > 0:
            text += f"; every quantile includes {_fmt_time(self.offset)} of constant non-CPU delay"
        return text + "."


def response_curve(service: Service | float, servers: int = 1, discipline: str = "ps",
                   quantiles: ArrayLike = (0.5, 0.99, 0.999), utilization: ArrayLike | None = None,
                   delay: float = 0.0, *, slices: int = 1, slice_delay: float = 0.0,
                   admission: str = "fifo") -> ResponseCurve:
    """Response-time quantiles against the arrival rate, from a cached scale-free table.

    Parameters
    ----------
    service : Service or float
        CPU time per request, seconds (a bare number: exponential with that mean); scalar
        parameters only.
    servers : int, optional
        Cores or worker processes serving the one queue (default 1).
    discipline : {"ps", "fcfs", "rr"}, optional
        Processor sharing (event loop), FCFS (worker pool) or event-loop round robin with
        ``slices`` slices (:mod:`capacity.rr`).
    quantiles : sequence of float, optional
        Quantiles in (0, 1) (default p50, p99, p99.9).
    utilization : array_like, optional
        Increasing utilisations in (0, 1); default :data:`DEFAULT_UTILIZATION` (40 levels from
        0.002 to 0.995, evenly spaced in ``logit(rho)``).
    delay : float, optional
        Constant non-CPU latency added to every response, seconds.
    slices : int, optional
        Slices per request for ``discipline="rr"`` (1 is FCFS).
    slice_delay : float, optional
        Non-CPU delay between two slices (``rr`` only), seconds; adds
        ``(slices - 1) * slice_delay`` with ``admission="fifo"``.
    admission : {"fifo", "idle"}, optional
        ``rr`` only: a new request joins the run queue at once (``"fifo"``, default) or only
        when no request in flight is runnable (``"idle"``, Node.js 20 ``setTimeout`` awaits;
        :mod:`capacity.rr`).  With ``"idle"`` the slice delay is not a constant offset.

    Returns
    -------
    ResponseCurve
        ``.arrival_rate`` (requests/s), ``.response`` (quantiles x rates, seconds), ``.to_frame()``.

    Notes
    -----
    Exact rescaling of a cached table (see the module docstring for the invariance argument):
    ``response = E[S] * unit_table(rho) + delay + (slices - 1) * slice_delay`` (the last term
    for ``admission="fifo"`` only) at ``arrival_rate = rho * servers / E[S]``, where
    ``unit_table`` holds the forward model's quantiles (:func:`capacity.fcfs.response_quantile`,
    :func:`capacity.ps.response_quantile`, :func:`capacity.rr.response_quantile`) for a mean-1
    service of the same shape.  The accuracy is the forward model's (exact for M/G/1 and M/M/c
    FCFS and for PS on one core with phase-type service or on ``c`` cores with exponential
    service; ``rr`` with ``slices > 1`` is the calibrated approximation of :mod:`capacity.rr`).
    The first call for a shape costs one forward evaluation on the grid (PS is by far the
    slowest model, FCFS the fastest); later calls only rescale the cached table
    (``benchmarks/bench_notebooks.py`` times both as the notebooks use them).

    ``rr`` with ``admission="idle"`` and ``slices > 1``: the slice delay changes who waits, so
    it is not an offset; in units of E[S] it is ``slice_delay / E[S]``, which changes with E[S].
    The table is then rr's idle formula (:mod:`capacity.rr`) applied elementwise to the cached
    FCFS table and the cached zero-delay rr table at that ratio -- the same combination
    :func:`capacity.rr.response_quantile` makes, to rounding -- recomputed on every call (a few
    array operations more than a cached curve), with ``offset = delay``.

    References
    ----------
    M. Harchol-Balter, *Performance Modeling and Design of Computer Systems* (2013),
    chapters 13-14 and 22.

    Examples
    --------
    >>> from capacity import plan
    >>> c = plan.response_curve(0.010, discipline="fcfs", quantiles=(0.99,), utilization=[0.5])
    >>> round(float(c.response[0, 0]), 6)    # M/M/1: ln(100) / (mu - lambda) = 4.60517 / 50
    0.092103
    """
    service = as_service(service)
    k, d_slice, adm = check_rr(discipline, slices, slice_delay, admission)
    if service.shape != ():
        raise ValueError("response_curve needs a service with scalar parameters (one curve per call)")
    c = int(check_servers(servers))
    if np.ndim(c):
        raise ValueError(f"servers must be a single integer, got {servers!r}")
    d = float(check_nonnegative(delay, "delay"))
    qs = np.atleast_1d(np.asarray(check_quantile(quantiles, "quantiles"), dtype=float))
    if qs.ndim != 1:
        raise ValueError(f"quantiles must be a sequence of probabilities, got {quantiles!r}")
    grid = DEFAULT_UTILIZATION if utilization is None else _check_grid(utilization)
    mean = float(service.mean)
    key = _shape_key(service)
    q_t, g_t = tuple(qs.tolist()), tuple(grid.tolist())
    idle = discipline == "rr" and k > 1 and adm == "idle"
    if key is None:
        unit, unit_zero = _compute_table(discipline, service, mean, c, k, q_t, g_t,
                                         d_slice if idle else 0.0, adm)
    elif idle:
        unit, unit_zero = _idle_unit_table(key, c, k, q_t, g_t, d_slice / mean)
    else:
        unit, unit_zero = _unit_table(discipline, key, c, k, q_t, g_t)
    offset = d + _rr_additive_delay(k, d_slice, adm)
    grid = np.array(grid)
    return ResponseCurve(utilization=grid, arrival_rate=grid * (c / mean), quantiles=qs,
                         response=mean * unit + offset, zero_load=mean * unit_zero + offset, capacity_qps=c / mean,
                         mean_service=mean, servers=c, discipline=discipline, slices=k, slice_delay=d_slice,
                         delay=d, offset=offset, unit=unit, unit_zero=unit_zero, admission=adm, service=service)


def _check_grid(utilization: ArrayLike) -> np.ndarray:
    grid = np.atleast_1d(np.asarray(utilization, dtype=float))
    if grid.ndim != 1 or not np.all((grid > 0) & (grid < 1)) or np.any(np.diff(grid) <= 0):
        raise ValueError(f"utilization must be increasing values in (0, 1), got {utilization!r}")
    return grid


# ---------------------------------------------------------------------------------------------
# Reading a ceiling off the curve


@functools.lru_cache(maxsize=1024)
def _inverse(unit_row: bytes, unit_zero: float, grid: bytes):
    """Monotone interpolant of log(1 - rho) against log(unit quantile), with its end points."""
    row = np.frombuffer(unit_row, dtype=float)
    u = np.concatenate([[0.0], np.frombuffer(grid, dtype=float)])
    r = np.concatenate([[unit_zero], row])
    # Keep the last point of every flat run (no queueing yet, e.g. the FCFS median of constant service
    # below 50 % load): the SLO holds up to the end of the run.
    # Below 1e-12 relative the forward models' own noise can make the table dip; the running maximum
    # makes it non-decreasing so that it has an inverse.
    r = np.maximum.accumulate(r)
    keep = np.r_[r[1:] > r[:-1] * (1.0 + 1e-12), True]
    x, y = np.log(r[keep]), np.log1p(-u[keep])
    if x.size == 1:
        return None, x, y, 0.0
    interp = PchipInterpolator(x, y, extrapolate=False)
    slope = (y[-1] - y[-2]) / (x[-1] - x[-2])
    return interp, x, y, slope


def _unit_ceiling(unit_row: np.ndarray, unit_zero: float, grid: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Utilisation at which the unit quantile reaches ``xs`` (0 where even zero load exceeds it)."""
    interp, x, y, slope = _inverse(np.ascontiguousarray(unit_row, dtype=float).tobytes(), float(unit_zero),
                                   np.ascontiguousarray(grid, dtype=float).tobytes())
    with np.errstate(divide="ignore", invalid="ignore"):
        lx = np.log(np.where(xs > 0, xs, np.nan))
    inside = (lx >= x[0]) & (lx <= x[-1])
    ly = np.full(lx.shape, -np.inf)
    if interp is not None and inside.any():
        ly[inside] = interp(lx[inside])
    # Beyond the grid: continue the last segment (heavy traffic: t ~ 1 / (1 - rho), slope -1).
    above = lx > x[-1]
    ly[above] = y[-1] + slope * (lx[above] - x[-1])
    rho = -np.expm1(ly)
    rho = np.where(np.isnan(lx) | (lx < x[0]), 0.0, rho)
    return np.clip(rho, 0.0, 1.0)


def _curve_rate(curve: ResponseCurve, q: float, t: ArrayLike, i: int | None = None) -> np.ndarray:
    """The arrival rate at which quantile ``q`` (row ``i`` of the curve) reaches ``t`` seconds."""
    i = curve._index(q) if i is None else i
    t_arr = np.asarray(t, dtype=float)
    xs = np.atleast_1d((t_arr - curve.offset) / curve.mean_service)
    rho = _unit_ceiling(curve.unit[i], curve.unit_zero[i], curve.utilization, xs)
    return (rho * curve.capacity_qps).reshape(t_arr.shape)


def _curve_rates(service: Service, servers: np.ndarray, qs: np.ndarray, t_eff: np.ndarray, discipline: str,
                 slices: int, slice_delay: float = 0.0,
                 admission: str = "fifo") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-percentile ceilings for ``qps_ceiling(method="curve")``, in :func:`_max_rates`' layout.

    ``t_eff`` is each threshold minus every constant delay, so the curve is taken without delays;
    ``slice_delay`` is the part that is not constant (rr ``admission="idle"``; 0 otherwise)."""
    if service.shape != () or np.ndim(servers) != 0:
        raise ValueError("method='curve' needs a scalar service and a single server count; use method='exact' "
                         "for arrays")
    curve = response_curve(service, int(servers), discipline, quantiles=tuple(qs.tolist()), slices=slices,
                           slice_delay=slice_delay, admission=admission)
    rates = np.array([_curve_rate(curve, q, max(float(t), 0.0)) for q, t in zip(qs, t_eff)], dtype=float)
    zero_ok = curve.zero_load <= np.maximum(t_eff, 0.0)
    reason = np.where(t_eff <= 0, 1, np.where(zero_ok, 0, 2))
    rates = np.where(reason == 0, rates, 0.0)
    return rates, reason, np.array([curve.capacity_qps])


# The names before this release, for one release (docs/glossary.md, "Renamed in this release").
__getattr__ = module_getattr("capacity.plan.curves", {"latency_curve": "capacity.plan.curves:response_curve",
                                                      "LatencyCurve": "capacity.plan.curves:ResponseCurve"})
