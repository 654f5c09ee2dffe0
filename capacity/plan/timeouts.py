"""The SLO solver and the single-queue planners: ``qps_ceiling``, ``servers_needed``,
``timeout_safe_rate`` (with burst tolerance) and ``recommend_timeout``.  See :mod:`capacity.plan`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .._checks import (
    check_discipline,
    check_nonnegative,
    check_positive,
    check_quantile,
    check_rr,
    check_servers,
    scalar_out,
)
from .._common import solve_increasing
from ..units import format_quantile as _fmt_q
from ..units import format_rate as _fmt_rate
from ..units import format_time as _fmt_time
from ..distributions import Service, as_service

__all__ = [
    "Ceiling",
    "ServersNeeded",
    "TimeoutAdvice",
    "TimeoutSafeRate",
    "burst_tolerance",
    "qps_ceiling",
    "recommend_timeout",
    "servers_needed",
    "timeout_safe_rate",
]

ArrayLike = Any

# Relative accuracy of every solved rate.  The solver works on log(u), u = rho / (1 - rho), and
# d(lambda)/lambda = (1 - rho) d(log u), so a width of 1e-7 in log u bounds the rate error by 1e-7.
_RATE_RTOL = 1e-7
# The forward models' tail probabilities carry ~1e-9 absolute error (Euler inversion), so tail
# fractions below this cannot be resolved; planners refuse them rather than return noise.
_MIN_FRACTION = 1e-7

# Timeout rule of seed article 001 (Ctrip, section 3.1; data/timeout_rules.toml, ids timeout_core
# and timeout_noncore): timeout = min(multiplier x P99.9, what the user accepts).
CORE_P999_MULTIPLIER = 3.0
NONCORE_P999_MULTIPLIER = 1.5


# ---------------------------------------------------------------------------------------------
# Inputs


def _tail_function(discipline: str, slo_on: str) -> Callable:
    """The forward model's ``sf(t, arrival_rate, service, servers)`` for the SLO."""
    from .. import fcfs, ps

    check_discipline(discipline, ("fcfs", "ps"))
    if slo_on not in ("response", "wait"):
        raise ValueError(f"slo_on must be 'response' or 'wait', got {slo_on!r}")
    if slo_on == "wait":
        if discipline != "fcfs":
            raise ValueError("slo_on='wait' needs discipline='fcfs': under processor sharing every request "
                             "starts at once, so there is no waiting time before service")
        return fcfs.wait_sf
    return ps.response_sf if discipline == "ps" else fcfs.response_sf


def _parse_slo(slo: Mapping[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles (sorted) and thresholds of an SLO mapping ``{q: seconds}``."""
    if isinstance(slo, (int, float)) or not hasattr(slo, "items") or len(slo) == 0:
        raise ValueError(f"slo must be a non-empty mapping quantile -> seconds, e.g. {{0.99: 0.5}}, got {slo!r}")
    items = sorted((float(check_quantile(q, "slo quantile")), float(check_positive(t, f"slo[{q}]")))
                   for q, t in slo.items())
    return np.array([q for q, _ in items]), np.array([t for _, t in items])


def _describe_service(service: Service) -> str:
    mean = np.asarray(service.mean)
    if mean.ndim:
        return f"{service.family} service"
    return f"{_fmt_time(float(mean))} of CPU per request ({service.family}, scv {float(service.scv):.2g})"


# ---------------------------------------------------------------------------------------------
# The one solver: the highest arrival rate at which P(X > t_i) <= p_i for every i


def _max_rates(sf: Callable, service: Service, servers: np.ndarray, t: np.ndarray,
               p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-constraint ceilings.

    ``t`` and ``p`` have shape ``(k,)`` (one entry per constraint, ``t`` may be <= 0 for a
    constraint no load can meet).  Returns ``(rates, reason, capacity)`` where ``rates`` has
    shape ``B + (k,)`` (``B`` = broadcast shape of ``servers`` and the service parameters),
    ``reason`` is 0 (solved), 1 (threshold <= 0: the constant delay alone uses it up) or 2 (the
    constraint fails even at zero load), and ``capacity`` (shape ``B + (1,)``) is the rate at
    utilisation 1.
    """
    svc, c, shape, capacity, tt, reason = _rate_problem(service, servers, t)
    pp = np.broadcast_to(p, shape)
    # Zero load: the response is the service time alone (the wait is 0).
    at_zero = np.asarray(sf(tt, 0.0, svc, c), dtype=float)
    reason[(reason == 0) & (at_zero > pp)] = 2

    def log_tail(rate):
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(np.asarray(sf(tt, rate, svc, c), dtype=float), 1e-300))

    return _solve_rates(log_tail, np.log(pp), shape, capacity, reason), reason, capacity


def _rate_problem(service: Service, servers: np.ndarray, t: np.ndarray):
    """Broadcast setup shared by the two rate solvers: the service with a constraint axis, the
    servers, the shape, the capacity (rate at utilisation 1), thresholds made positive, and the
    reason array (1 where the threshold is <= 0, else 0 until checked)."""
    svc = service._expand(1)
    c = servers[..., None]
    mean = np.asarray(svc.mean, dtype=float)
    shape = np.broadcast_shapes(c.shape, mean.shape, t.shape)
    capacity = np.broadcast_to(c / mean, shape[:-1] + (1,))
    tt = np.broadcast_to(np.where(t > 0, t, 1.0), shape)
    reason = np.broadcast_to(np.where(t > 0, 0, 1), shape).copy()
    return svc, c, shape, capacity, tt, reason


def _solve_rates(increasing: Callable, target: np.ndarray, shape: tuple, capacity: np.ndarray,
                 reason: np.ndarray) -> np.ndarray:
    """Rates where ``increasing(rate) = target`` for the rows with ``reason == 0`` (0 elsewhere),
    solved in u = rho / (1 - rho) so the whole stable range (0, capacity) maps to (0, inf)."""
    if not (reason == 0).any():
        return np.zeros(shape)
    target = np.where(reason == 0, target, np.nan)
    u = solve_increasing(lambda u: increasing(capacity * (u / (1.0 + u))), target,
                         np.full(shape, 1e-3), np.full(shape, 1e2), log=True, rtol=_RATE_RTOL)
    return np.where(reason == 0, capacity * (u / (1.0 + u)), 0.0)


def _mm1_fcfs_ceiling(mean: np.ndarray, q: np.ndarray, t: np.ndarray) -> np.ndarray:
    """M/M/1 FCFS: T ~ Exp(mu - lambda), so P(T > t) = 1 - q gives lambda = mu - ln(1/(1-q)) / t."""
    with np.errstate(divide="ignore"):
        rate = 1.0 / mean - (-np.log1p(-q)) / np.where(t > 0, t, np.nan)
    return np.where(t > 0, np.maximum(rate, 0.0), 0.0)


def _rr_additive_delay(slices: int, slice_delay: float, admission: str) -> float:
    """The part of the rr response that is a constant added to every quantile: ``(k - 1) d`` for
    ``admission="fifo"`` (exact in :mod:`capacity.rr`), none for ``"idle"`` (there the slice delay
    also changes who waits, so it goes into the rr model itself)."""
    return (slices - 1) * slice_delay if admission == "fifo" else 0.0


def _rr_quantile(slices: int, slice_delay: float = 0.0, admission: str = "fifo") -> Callable:
    """``quantile(q, rate, svc, c)`` of :func:`capacity.rr.response_quantile`.

    ``slice_delay`` is what remains of the slice delay after :func:`_rr_additive_delay` took its
    additive part off the thresholds: 0 for ``"fifo"``, the delay itself for ``"idle"``."""
    from .. import rr

    def quantile(q, rate, svc, c):
        return rr.response_quantile(q, rate, svc, c, slices=slices, slice_delay=slice_delay,
                                    admission=admission)
    return quantile


def _max_rates_quantile(qfunc: Callable, service: Service, servers: np.ndarray, t: np.ndarray,
                        q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`_max_rates`, but solving ``log quantile_q(lambda) = log t`` on a quantile function
    ``qfunc(q, arrival_rate, service, servers)`` (for models whose quantile is primary, like rr)."""
    svc, c, shape, capacity, tt, reason = _rate_problem(service, servers, t)
    qq = np.broadcast_to(q, shape)
    at_zero = np.asarray(qfunc(qq, np.zeros(shape), svc, c), dtype=float)
    reason[(reason == 0) & (at_zero > tt)] = 2

    def log_quantile(rate):
        return np.log(np.asarray(qfunc(qq, rate, svc, c), dtype=float))

    return _solve_rates(log_quantile, np.log(tt), shape, capacity, reason), reason, capacity


# ---------------------------------------------------------------------------------------------
# qps_ceiling


@dataclass(frozen=True)
class Ceiling:
    """Result of :func:`qps_ceiling`.

    Attributes
    ----------
    qps : float or ndarray
        Highest arrival rate (requests/s) at which every SLO percentile holds; 0 when no
        load meets the SLO.
    capacity_qps : float or ndarray
        Arrival rate at utilisation 1 (``servers / E[S]``): the CPU's raw throughput.
    ratio : float or ndarray
        ``qps / capacity_qps``: the utilisation at the ceiling.
    binding : float or ndarray
        The SLO quantile that binds first (e.g. ``0.99``).
    rates : dict
        Quantile -> ceiling of that percentile alone (requests/s).
    feasible : bool or ndarray
        False where no load meets the SLO.
    explanation : str
        One paragraph of plain text with the numbers.
    slices, slice_delay, admission
        The event-loop model the ceiling was computed with (``discipline="rr"``; 1, 0 and
        ``"fifo"`` for the other disciplines), so that a stored result says what it assumed.
    """

    qps: Any
    capacity_qps: Any
    ratio: Any
    binding: Any
    rates: dict
    feasible: Any
    slo: dict
    discipline: str
    servers: Any
    delay: float
    slo_on: str
    explanation: str = field(repr=False)
    slices: int = 1
    slice_delay: float = 0.0
    admission: str = "fifo"

    def headroom(self, arrival_rate: ArrayLike):
        """Fraction by which traffic at ``arrival_rate`` (requests/s) can grow before the SLO
        breaks: ``qps / arrival_rate - 1`` (negative when already past the ceiling)."""
        rate = check_positive(arrival_rate, "arrival_rate")
        return scalar_out(np.asarray(self.qps) / rate - 1.0)

    def __str__(self) -> str:
        return self.explanation


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
        cached scale-free latency curve (:func:`capacity.plan.latency_curve`,
        :func:`capacity.plan.ceiling_from_curve`): microseconds once the curve for the
        service shape is cached, relative error below 2e-4 (see ``ceiling_from_curve``);
        scalar service and servers only.

    Returns
    -------
    Ceiling
        ``.qps``, ``.capacity_qps``, ``.ratio``, ``.binding``, ``.rates``, ``.explanation``.

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
    (see :mod:`capacity.fcfs` and :mod:`capacity.ps`).  Processor sharing with ``servers > 1``
    and non-exponential service raises ``NotImplementedError``.  Tail fractions below 1e-7
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
    >>> round(c.qps, 2), round(c.ratio, 3)
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
    p = -np.expm1(np.log(qs))  # 1 - q, exactly for q near 1
    if (p < _MIN_FRACTION).any():
        raise ValueError(f"slo quantile must be at most 1 - {_MIN_FRACTION:g} (the forward models resolve "
                         f"tail fractions only down to ~1e-9), got {qs.max()!r}")
    # The constant part of the latency comes off the thresholds; for admission="idle" the slice
    # delay is not constant and stays in the rr model (d_model).
    d_add = _rr_additive_delay(k, d_slice, adm)
    d_model = d_slice if (k > 1 and adm == "idle") else 0.0
    t_eff = ts - delay_f - d_add

    closed = (model == "fcfs" and slo_on == "response" and service.family == "exponential"
              and bool(np.all(c == 1)) and method == "exact")
    if method == "curve":
        if slo_on != "response":
            raise ValueError("method='curve' covers response-time SLOs only")
        from .curves import _curve_rates
        rates, reason, capacity = _curve_rates(service, c, qs, t_eff, discipline, k, d_model, adm)
    elif closed:
        mean = np.asarray(service.mean, dtype=float)[..., None]
        shape = np.broadcast_shapes(c[..., None].shape, mean.shape, ts.shape)
        rates = np.broadcast_to(_mm1_fcfs_ceiling(mean, qs, t_eff), shape)
        capacity = np.broadcast_to(c[..., None] / mean, shape[:-1] + (1,))
        at_zero = np.exp(-np.where(t_eff > 0, t_eff, 0.0) / mean)
        reason = np.broadcast_to(np.where(t_eff <= 0, 1, np.where(at_zero > p, 2, 0)), shape)
    elif model == "rr":
        rates, reason, capacity = _max_rates_quantile(_rr_quantile(k, d_model, adm), service, c, t_eff, qs)
    else:
        rates, reason, capacity = _max_rates(_tail_function(model, slo_on), service, c, t_eff, p)

    which = np.argmin(rates, axis=-1)
    qps = np.take_along_axis(rates, which[..., None], axis=-1)[..., 0]
    cap = capacity[..., 0]
    feasible = (reason == 0).all(axis=-1)
    # Where the SLO cannot be met, name the first percentile that fails.
    first_bad = np.argmax(reason != 0, axis=-1)
    which = np.where(feasible, which, first_bad)
    binding = qs[which]
    result_rates = {float(q): scalar_out(rates[..., i]) for i, q in enumerate(qs)}
    res = dict(qps=scalar_out(qps), capacity_qps=scalar_out(cap), ratio=scalar_out(qps / cap), binding=scalar_out(binding),
               rates=result_rates, feasible=scalar_out(feasible), slo={float(q): float(t) for q, t in zip(qs, ts)},
               discipline=discipline, servers=scalar_out(c), delay=delay_f + d_add, slo_on=slo_on)
    text = _explain_ceiling(res, service, reason, qs, ts, which, first_bad)
    return Ceiling(**res, explanation=text, slices=int(k), slice_delay=float(d_slice), admission=adm)


_DISCIPLINE_TEXT = {"ps": "processor sharing", "fcfs": "FCFS", "rr": "event-loop round robin"}


def _servers_text(servers) -> str:
    return f"{servers} server{'s' if servers != 1 else ''}" if np.ndim(servers) == 0 else "each server count"


def _explain_ceiling(res: dict, service: Service, reason: np.ndarray, qs, ts, which, first_bad) -> str:
    qps = np.asarray(res["qps"])
    if qps.ndim:
        lo, hi = float(qps.min()), float(qps.max())
        text = (f"{qps.size} configurations under {_DISCIPLINE_TEXT[res['discipline']]}: SLO ceilings from "
                f"{_fmt_rate(lo)} to {_fmt_rate(hi)}")
        servers = np.asarray(res["servers"])
        if qps.ndim == 1 and servers.shape == qps.shape and qps.size <= 12:
            binding, ratio = np.broadcast_to(res["binding"], qps.shape), np.broadcast_to(res["ratio"], qps.shape)
            text += ": " + "; ".join(
                f"{int(c)} server{'s' if c != 1 else ''} {_fmt_rate(float(x))} ({100 * float(r):.1f} % utilisation, "
                f"{_fmt_q(float(b))} binds)" if x > 0 else f"{int(c)} server{'s' if c != 1 else ''} 0 QPS (SLO "
                "unreachable)" for c, x, r, b in zip(servers, qps, ratio, binding))
            per_server = qps / servers
            if qps.size > 1 and np.all(np.diff(servers) > 0) and np.all(np.diff(per_server) > 0) and lo > 0:
                text += (". Per server the ceiling rises with the pool size: one shared queue absorbs bursts "
                         "better than separate small ones")
        return text + "."
    where = f"on {_servers_text(int(res['servers']))} under {_DISCIPLINE_TEXT[res['discipline']]}"
    what = "wait" if res["slo_on"] == "wait" else "response time"
    slo_text = ", ".join(f"{_fmt_q(q)} {what} <= {_fmt_time(t)}" for q, t in zip(qs, ts))
    head = f"With {_describe_service(service)} {where}, the SLO is {slo_text}."
    cap = float(res["capacity_qps"])
    delay = res["delay"]
    delay_text = ""
    if delay > 0:
        delay_text = (f" A constant {_fmt_time(delay)} of non-CPU latency (IO wait) is part of every "
                      f"response, so the queue and the CPU get t - {_fmt_time(delay)} of each threshold.")
    if not res["feasible"]:
        i = int(first_bad.reshape(-1)[0]) if np.ndim(first_bad) else int(first_bad)
        r = int(np.asarray(reason).reshape(-1, len(qs))[0, i])
        q, t = qs[i], ts[i]
        if r == 1:
            why = (f"the {_fmt_time(delay)} delay alone is at least the {_fmt_q(q)} target of {_fmt_time(t)}, so "
                   "no load, however small, meets it")
        else:
            why = (f"even an idle server misses the {_fmt_q(q)} target of {_fmt_time(t)}: more than "
                   f"{100 * (1 - q):.3g} % of requests need that much CPU (plus delay) on their own, so "
                   "adding servers cannot help; only cheaper requests or a looser SLO can")
        return f"{head}{delay_text} The SLO cannot be met at any load (ceiling 0 QPS): {why}."
    q_bind = float(res["binding"])
    t_bind = float(res["slo"][q_bind])
    rate = float(res["qps"])
    text = (f"{head}{delay_text} It holds up to {_fmt_rate(rate)}, {100 * rate / cap:.1f} % of the "
            f"{_fmt_rate(cap)} the CPU serves at 100 % utilisation. The {_fmt_q(q_bind)} target of "
            f"{_fmt_time(t_bind)} binds first")
    others = [(q, r) for q, r in res["rates"].items() if q != q_bind]
    if others:
        text += " (" + ", ".join(f"{_fmt_q(q)} alone would allow {_fmt_rate(float(r))}" for q, r in others) + ")"
    text += (f". Beyond {_fmt_rate(rate)} the {_fmt_q(q_bind)} exceeds {_fmt_time(t_bind)}; at {_fmt_rate(cap)} "
             "the queue is unstable and latency grows without bound.")
    return text


# ---------------------------------------------------------------------------------------------
# Integer search: the smallest n with ok(n)


def _smallest_integer(ok: Callable[[np.ndarray], np.ndarray], start: np.ndarray, width: int = 8) -> np.ndarray:
    """Smallest integer ``n >= start`` with ``ok(n)`` true, elementwise, for ``ok`` monotone in n.

    ``ok`` receives candidates of shape ``start.shape + (width,)`` and returns booleans of that
    shape, so each round is one forward evaluation for all points and candidates.  A galloping
    phase (offsets 1, 2, 4, ..., 2^(width-1) times a stride that grows by 2^width per round)
    brackets the answer; a ``width``-section search then narrows the bracket by a factor
    ``width + 1`` per round (and tests every integer once the gap is at most ``width + 1``).
    """
    start = np.asarray(start, dtype=np.int64)
    lo = start - 1                                   # largest n known to fail (start - 1 does)
    hi = np.full(start.shape, -1, dtype=np.int64)    # smallest n known to pass; -1: not yet found
    stride = np.ones(start.shape, dtype=np.int64)
    steps = 2 ** np.arange(width, dtype=np.int64)
    frac = np.arange(1, width + 1) / (width + 1)
    big = np.iinfo(np.int64).max
    for _ in range(64):
        open_ = hi < 0
        narrow = ~open_ & (hi - lo > 1)
        if not (open_.any() or narrow.any()):
            break
        gallop = lo[..., None] + stride[..., None] * steps
        section = lo[..., None] + np.maximum(1, np.round((hi - lo)[..., None] * frac).astype(np.int64))
        cand = np.where(open_[..., None], gallop, np.where(narrow[..., None], section, hi[..., None]))
        good = np.asarray(ok(cand), dtype=bool)
        first_good = np.min(np.where(good, cand, big), axis=-1)
        last_bad = np.max(np.where(~good, cand, lo[..., None]), axis=-1)
        found = first_good < big
        hi = np.where(found & (open_ | (first_good < hi)), first_good, hi)
        lo = np.where(open_ | narrow, np.maximum(lo, last_bad), lo)
        stride = np.where(open_ & ~found, stride * 2 ** width, stride)
    return hi


# ---------------------------------------------------------------------------------------------
# servers_needed


@dataclass(frozen=True)
class ServersNeeded:
    """Result of :func:`servers_needed`.

    Attributes
    ----------
    servers : int or ndarray
        Fewest cores / worker processes in one queue that meet the SLO (with
        ``servers_per_machine``: ``machines * servers_per_machine``, every machine up).
    utilization : float or ndarray
        ``arrival_rate * E[S] / servers``.
    binding : float or ndarray
        The SLO quantile closest to its limit at that size.
    tail : dict
        Quantile -> P(T > t) at that size (the SLO allows ``1 - q``).
    machines, machines_without_redundancy : int, ndarray or None
        With ``servers_per_machine``: machines to deploy, and the machines the load needs with
        every one of them up.
    explanation : str
    """

    servers: Any
    utilization: Any
    binding: Any
    tail: dict
    min_stable_servers: Any
    machines: Any
    machines_without_redundancy: Any
    redundancy: int
    servers_per_machine: Any
    slo: dict
    discipline: str
    slo_on: str
    explanation: str = field(repr=False)

    def __str__(self) -> str:
        return self.explanation


def servers_needed(arrival_rate: ArrayLike, service: Service | ArrayLike, slo: Mapping[float, float],
                   discipline: str = "ps", redundancy: int = 0, servers_per_machine: int | None = None, *,
                   delay: float = 0.0, slo_on: str = "response") -> ServersNeeded:
    """The fewest servers (cores, worker processes) that keep every SLO percentile.

    Parameters
    ----------
    arrival_rate : float or array_like
        Peak Poisson arrival rate, requests/s (> 0); an array gives one answer per element.
    service : Service or float
        CPU time per request, seconds.
    slo : mapping
        Quantile -> seconds, e.g. ``{0.99: 0.5}``.
    discipline : {"ps", "fcfs"}, optional
        As in :func:`qps_ceiling`.
    redundancy : int, optional
        Machines that may be down while the SLO still holds (``1`` = N+1).  Needs
        ``servers_per_machine``.
    servers_per_machine : int, optional
        Cores per machine; the answer is then rounded up to whole machines.
    delay : float, optional
        Constant non-CPU latency per response, seconds (see :func:`qps_ceiling`).
    slo_on : {"response", "wait"}, optional
        Bound the response time (default) or, for FCFS, the wait before service.

    Returns
    -------
    ServersNeeded

    Notes
    -----
    ``P(T > t)`` falls as servers are added, so the answer is the smallest integer ``c``
    with ``P(T > t_i - delay; lambda, c) <= 1 - q_i`` for every percentile.  The search starts
    at the stability bound ``c = floor(lambda E[S]) + 1`` and gallops, then narrows the bracket
    eight candidates at a time; each round is one vectorised forward evaluation.

    With ``servers_per_machine = k`` the cores are treated as one pool (the load balancer as
    good as one queue; a lower bound on what real dispatch needs, see the scaling comparison
    for round-robin and least-connections), ``machines = ceil(c / k) + redundancy`` and the
    SLO is checked with ``machines - redundancy`` machines up: the extra machines are added
    exactly because the remaining machines would miss the SLO.

    Erlang C staffing (M/M/c, wait SLO) is the special case ``discipline="fcfs"``,
    ``slo_on="wait"``: ``P(W > t) = C(c, a) exp(-(c mu - lambda) t)``.

    References
    ----------
    R. B. Cooper, *Introduction to Queueing Theory*, 2nd ed. (1981), section 3.4 (Erlang C).
    M. Harchol-Balter, *Performance Modeling and Design of Computer Systems* (2013),
    chapter 14 (M/M/k), section 14.5 (capacity provisioning).

    Examples
    --------
    Call-centre staffing: 10 Erlangs of 3-minute calls, at most 20 % may wait over 20 s:

    >>> from capacity import plan
    >>> r = plan.servers_needed(10 / 180, 180.0, {0.8: 20.0}, discipline="fcfs", slo_on="wait")
    >>> r.servers, round(r.utilization, 3)
    (14, 0.714)
    """
    qs, ts = _parse_slo(slo)
    lam = check_positive(arrival_rate, "arrival_rate")
    service = as_service(service)
    delay_f = float(check_nonnegative(delay, "delay"))
    if slo_on == "wait" and delay_f > 0:
        raise ValueError("delay applies to the response time; with slo_on='wait' it must be 0")
    if isinstance(redundancy, bool) or not isinstance(redundancy, (int, np.integer)) or redundancy < 0:
        raise ValueError(f"redundancy must be a non-negative integer, got {redundancy!r}")
    if redundancy and servers_per_machine is None:
        raise ValueError("redundancy needs servers_per_machine (redundancy counts machines)")
    spm = None if servers_per_machine is None else int(check_servers(servers_per_machine, "servers_per_machine"))
    p = -np.expm1(np.log(qs))
    if (p < _MIN_FRACTION).any():
        raise ValueError(f"slo quantile must be at most 1 - {_MIN_FRACTION:g}, got {qs.max()!r}")
    t_eff = ts - delay_f
    sf = _tail_function(discipline, slo_on)
    mean = np.asarray(service.mean, dtype=float)
    shape = np.broadcast_shapes(lam.shape, mean.shape)
    lam_b = np.broadcast_to(lam, shape)
    load = lam_b * np.broadcast_to(mean, shape)
    min_stable = np.floor(load).astype(np.int64) + 1

    # Infeasible at any size: the delay uses up a threshold, or the service time alone misses it.
    at_zero = np.asarray(sf(np.where(t_eff > 0, t_eff, 1.0), 0.0, service._expand(1), 1), dtype=float)
    bad = np.broadcast_to((t_eff <= 0) | (at_zero > p), np.broadcast_shapes(np.shape(at_zero), qs.shape))
    if bad.any():
        i = int(np.argwhere(bad)[0][-1])
        why = ("the delay alone reaches it" if t_eff[i] <= 0 else
               f"more than {100 * p[i]:.3g} % of requests need over {_fmt_time(t_eff[i])} of CPU on their "
               "own, even on an idle server")
        raise ValueError(f"slo {_fmt_q(qs[i])} <= {_fmt_time(ts[i])} cannot be met with any number of "
                         f"servers: {why}")

    svc = service._expand(2)
    t_k = np.broadcast_to(t_eff, (1, len(qs)))
    p_k = p

    def ok(cand: np.ndarray) -> np.ndarray:
        tail = np.asarray(sf(t_k, lam_b[..., None, None], svc, cand[..., None]), dtype=float)
        return (tail <= p_k).all(axis=-1)

    c = _smallest_integer(ok, min_stable)
    machines = machines0 = None
    if spm is not None:
        machines0 = -(-c // spm)
        machines = machines0 + redundancy
        c_total = machines * spm
    else:
        c_total = c
    tail = np.asarray(sf(t_eff, lam_b[..., None], service._expand(1), c[..., None]), dtype=float)
    binding = qs[np.argmax(tail / p, axis=-1)]
    res = dict(servers=scalar_out(c_total), utilization=scalar_out(load / c_total), binding=scalar_out(binding),
               tail={float(q): scalar_out(tail[..., i]) for i, q in enumerate(qs)}, min_stable_servers=scalar_out(min_stable),
               machines=None if machines is None else scalar_out(machines),
               machines_without_redundancy=None if machines0 is None else scalar_out(machines0),
               redundancy=int(redundancy), servers_per_machine=spm,
               slo={float(q): float(t) for q, t in zip(qs, ts)}, discipline=discipline, slo_on=slo_on)
    return ServersNeeded(**res, explanation=_explain_servers(res, service, scalar_out(lam), scalar_out(c), delay_f))


def _explain_servers(res: dict, service: Service, lam, c_pool, delay: float) -> str:
    if np.ndim(res["servers"]):
        s = np.asarray(res["servers"])
        text = f"{s.size} configurations: from {int(s.min())} to {int(s.max())} servers"
        lam_a = np.asarray(lam)
        if s.ndim == 1 and lam_a.shape == s.shape and s.size <= 12:
            util = np.broadcast_to(res["utilization"], s.shape)
            text += ": " + "; ".join(f"{_fmt_rate(float(x))} needs {int(c)} ({100 * float(u):.1f} % utilisation)"
                                     for x, c, u in zip(lam_a, s, util))
        return text + "."
    what = "wait" if res["slo_on"] == "wait" else "response time"
    slo_text = ", ".join(f"{_fmt_q(q)} {what} <= {_fmt_time(t)}" for q, t in res["slo"].items())
    q_b = float(res["binding"])
    load = float(lam) * float(np.asarray(service.mean))
    text = (f"At {_fmt_rate(float(lam))} with {_describe_service(service)} under "
            f"{_DISCIPLINE_TEXT[res['discipline']]}, the offered load is {load:.3g} busy cores, so at least "
            f"{int(res['min_stable_servers'])} keep the queue stable; the SLO ({slo_text}) needs {int(c_pool)} "
            f"(utilisation {100 * load / int(c_pool):.1f} %).")
    if delay > 0:
        text += f" Each response also carries {_fmt_time(delay)} of non-CPU delay."
    text += (f" At {int(c_pool)} the {_fmt_q(q_b)} is the tightest: {100 * float(res['tail'][q_b]):.3g} % of "
             f"requests exceed {_fmt_time(res['slo'][q_b])} (allowed {100 * (1 - q_b):.3g} %).")
    if res["machines"] is not None:
        spm, m, m0, r = res["servers_per_machine"], int(res["machines"]), int(res["machines_without_redundancy"]), \
            res["redundancy"]
        text += f" With {spm} cores per machine that is {m0} machine{'s' if m0 > 1 else ''}"
        if r:
            text += (f"; with {r} down the remaining {m0 - 1} ({(m0 - 1) * spm} cores) would miss the SLO, so deploy "
                     f"{m} machines ({m * spm} cores) for N+{r}")
        text += "."
    return text


# ---------------------------------------------------------------------------------------------
# timeout_safe_rate


@dataclass(frozen=True)
class TimeoutSafeRate:
    """Result of :func:`timeout_safe_rate`: ``.qps``, ``.capacity_qps``, ``.ratio``,
    ``.timeout``, ``.max_timeout_fraction``, ``.feasible``, ``.explanation``, and the
    event-loop model it assumed (``.slices``, ``.slice_delay``, ``.admission``)."""

    qps: Any
    capacity_qps: Any
    ratio: Any
    timeout: float
    max_timeout_fraction: float
    feasible: Any
    discipline: str
    servers: Any
    explanation: str = field(repr=False)
    burst_qps: float | None = None
    burst_seconds: Any = None
    slices: int = 1
    slice_delay: float = 0.0
    admission: str = "fifo"

    def __str__(self) -> str:
        return self.explanation


def _burst_seconds(burst_qps: float, service: Service, servers, budget: float, discipline: str):
    """Longest burst at ``burst_qps`` (from an idle server) after which a mean-sized request
    still finishes within ``budget`` seconds, by the fluid overload laws of :mod:`capacity.overload`."""
    from .. import overload

    mean = np.asarray(service.mean, dtype=float)
    if discipline == "fcfs":
        # A FCFS arrival u seconds into the burst waits (rho - 1) u, then runs for its own E[S].
        slope = np.asarray(overload.fcfs_overload_wait(1.0, burst_qps, service, servers), dtype=float)
        room = budget - mean
    else:
        # PS: a request of size x arriving at u stays u (exp(alpha x / c) - 1) (Jean-Marie & Robert).
        slope = np.asarray(overload.ps_fluid_sojourn(1.0, mean, burst_qps, service, servers), dtype=float)
        room = budget + 0.0 * mean
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(slope > 0, np.maximum(room, 0.0) / np.where(slope > 0, slope, 1.0), np.inf)
    return scalar_out(out)


def burst_tolerance(service: Service | ArrayLike, servers: ArrayLike, timeout: ArrayLike, burst_qps: ArrayLike,
                    discipline: str = "ps", *, delay: float = 0.0):
    """How long a burst above capacity may last before a mean-sized request misses the timeout.

    Parameters
    ----------
    service : Service or float
        CPU time per request, seconds.
    servers : int or array_like of int
        Cores or worker processes serving one queue.
    timeout : float or array_like
        Client timeout, seconds.
    burst_qps : float or array_like
        Arrival rate during the burst, requests/s.
    discipline : {"ps", "fcfs"}, optional
    delay : float, optional
        Constant non-CPU latency per response, seconds (it uses up part of the timeout).

    Returns
    -------
    float or ndarray
        The longest burst at ``burst_qps``, from an idle server, after which a request of mean
        size still completes within ``timeout``, seconds; ``inf`` at or below capacity, 0 when
        even an idle server misses the timeout.

    Notes
    -----
    The fluid overload laws of :mod:`capacity.overload` (an approximation that ignores
    randomness, good once the backlog is many requests deep).  With
    ``rho_b = burst_qps E[S] / c > 1``, a FCFS arrival ``u`` s into the burst waits
    ``(rho_b - 1) u`` (:func:`capacity.overload.fcfs_overload_wait`), so the burst may last
    ``(timeout - delay - E[S]) / (rho_b - 1)``.  Under PS a request of size ``x`` arriving at
    ``u`` stays ``u (exp(alpha x / c) - 1)`` (:func:`capacity.overload.ps_fluid_sojourn`,
    Jean-Marie & Robert 1994), so the burst may last ``(timeout - delay) / (exp(alpha E[S] / c) - 1)``.
    This is what ``timeout_safe_rate(..., burst_qps=...).burst_seconds`` reports.

    References
    ----------
    A. Jean-Marie and P. Robert, "On the transient behavior of the processor sharing queue",
    Queueing Systems 17 (1994) 129-136.

    Examples
    --------
    >>> from capacity import plan
    >>> round(plan.burst_tolerance(0.025, 1, 1.0, 60.0, discipline="fcfs"), 4)   # (1 - 0.025) / 0.5
    1.95
    """
    check_discipline(discipline, ("fcfs", "ps"))
    service = as_service(service)
    c = check_servers(servers)
    to = check_positive(timeout, "timeout")
    burst = check_positive(burst_qps, "burst_qps")
    d = float(check_nonnegative(delay, "delay"))
    return _burst_seconds(burst, service, c, to - d, discipline)


def timeout_safe_rate(service: Service | ArrayLike, servers: ArrayLike, timeout: float,
                      max_timeout_fraction: float = 1e-3, discipline: str = "ps", *,
                      delay: float = 0.0, burst_qps: float | None = None, slices: int = 1,
                      slice_delay: float = 0.0, admission: str = "fifo",
                      method: str = "exact") -> TimeoutSafeRate:
    """The highest request rate at which at most ``max_timeout_fraction`` of requests time out.

    Parameters
    ----------
    service : Service or float
        CPU time per request, seconds.
    servers : int or array_like of int
        Cores or worker processes serving one queue.
    timeout : float
        Client timeout, seconds.
    max_timeout_fraction : float, optional
        Largest acceptable fraction of requests slower than ``timeout`` (default 1e-3).
    discipline : {"ps", "fcfs", "rr"}, optional
        As in :func:`qps_ceiling` (burst tolerance: ``ps`` and ``fcfs`` only).
    delay : float, optional
        Constant non-CPU latency per response, seconds.
    slices, slice_delay, admission : optional
        Round robin only, as in :func:`qps_ceiling` (``admission``: ``"fifo"``, default, or
        ``"idle"``).
    method : {"exact", "curve"}, optional
        ``"curve"``: read the rate off the cached latency curve of the ``1 - fraction`` quantile
        (:func:`qps_ceiling` with ``method="curve"``), fast enough for sliders; default exact.
    burst_qps : float, optional
        A burst rate, requests/s (typically above capacity): the result's ``burst_seconds`` is
        the longest burst at that rate, starting from an idle server, after which a request of
        mean size still completes within the timeout (``inf`` at or below capacity).

    Returns
    -------
    TimeoutSafeRate
        ``.qps``, ``.capacity_qps``, ``.ratio``, ``.burst_seconds``, ``.explanation``.

    Notes
    -----
    Solves ``P(T > timeout - delay; lambda) = max_timeout_fraction`` for ``lambda`` -- the same
    solver as :func:`qps_ceiling` with the SLO ``{1 - fraction: timeout}``.  This is the
    steady-state answer for Poisson traffic.

    Burst tolerance uses the fluid overload laws of :mod:`capacity.overload` (an approximation
    that ignores randomness, good once the backlog is many requests deep).  A burst at
    ``rho_b = burst_qps E[S] / c > 1`` builds CPU backlog at ``(rho_b - 1) c`` per second
    (:func:`capacity.overload.backlog`), so a FCFS arrival ``u`` s into it waits ``(rho_b - 1) u``
    (:func:`capacity.overload.fcfs_overload_wait`) and the burst may last
    ``(timeout - delay - E[S]) / (rho_b - 1)``.  Under PS the number present grows like
    ``alpha u`` and a request of size ``x`` stays ``u (exp(alpha x / c) - 1)``
    (:func:`capacity.overload.ps_fluid_sojourn`, Jean-Marie & Robert 1994), so the burst may last
    ``(timeout - delay) / (exp(alpha E[S] / c) - 1)``; requests larger than the mean time out
    earlier.  Starting from a busy server instead of an idle one shortens it by the backlog
    already present.

    References
    ----------
    M. Harchol-Balter (2013), chapter 22 (processor sharing).

    Examples
    --------
    >>> from capacity import plan
    >>> r = plan.timeout_safe_rate(0.025, 1, timeout=1.0, max_timeout_fraction=1e-3, discipline="fcfs")
    >>> round(r.qps, 2)     # 40 - ln(1000) / 1
    33.09
    >>> r = plan.timeout_safe_rate(0.025, 1, 1.0, discipline="fcfs", burst_qps=60.0)
    >>> round(r.burst_seconds, 4)   # (1 - 0.025) / (60 * 0.025 - 1)
    1.95
    """
    frac = float(check_quantile(max_timeout_fraction, "max_timeout_fraction"))
    to = float(check_positive(timeout, "timeout"))
    res = qps_ceiling(service, servers, {1.0 - frac: to}, discipline=discipline, delay=delay, slices=slices,
                      slice_delay=slice_delay, admission=admission, method=method)
    service = as_service(service)
    if np.ndim(res.qps):
        text = res.explanation
    elif not res.feasible:
        text = (f"With {_describe_service(service)} on {_servers_text(res.servers)} under "
                f"{_DISCIPLINE_TEXT[discipline]}, more than {100 * frac:.3g} % of requests exceed the "
                f"{_fmt_time(to)} timeout even at zero load" +
                (f" (the {_fmt_time(delay)} delay alone reaches it)" if delay >= to else "") +
                ": no request rate is timeout-safe; raise the timeout or cut the CPU per request.")
    else:
        text = (f"With {_describe_service(service)} on {_servers_text(res.servers)} under "
                f"{_DISCIPLINE_TEXT[discipline]}, at most {100 * frac:.3g} % of requests exceed a "
                f"{_fmt_time(to)} timeout up to {_fmt_rate(res.qps)} ({100 * res.ratio:.1f} % of the "
                f"{_fmt_rate(res.capacity_qps)} CPU capacity). Above it timeouts rise quickly, and past capacity "
                "the queue grows without bound so nearly every request times out. This is a steady-state "
                "limit; short bursts above it are tolerated only until the backlog reaches the timeout.")
    burst = burst_s = None
    if burst_qps is not None:
        burst = float(check_positive(burst_qps, "burst_qps"))
        if discipline == "rr":
            raise ValueError("burst_qps: the fluid burst model covers discipline 'ps' and 'fcfs' only")
        burst_s = burst_tolerance(service, res.servers, to, burst, discipline, delay=delay)
        if np.ndim(burst_s) == 0:
            if np.isinf(burst_s):
                text += (f" A burst at {_fmt_rate(burst)} is within capacity: it can last indefinitely in the fluid "
                         "view, though above the timeout-safe rate more than the allowed share times out.")
            else:
                text += (f" A burst at {_fmt_rate(burst)} from an idle server can last about {_fmt_time(burst_s)} "
                         "before a request of mean size no longer finishes within the timeout (fluid overload "
                         "model).")
    return TimeoutSafeRate(qps=res.qps, capacity_qps=res.capacity_qps, ratio=res.ratio, timeout=to,
                           max_timeout_fraction=frac, feasible=res.feasible, discipline=discipline,
                           servers=res.servers, explanation=text, burst_qps=burst, burst_seconds=burst_s,
                           slices=res.slices, slice_delay=res.slice_delay, admission=res.admission)


# ---------------------------------------------------------------------------------------------
# recommend_timeout


@dataclass(frozen=True)
class TimeoutAdvice:
    """Result of :func:`recommend_timeout`.

    Attributes
    ----------
    timeout : float
        Recommended client timeout, seconds.
    rule : str
        Which term of the min() decided it: ``"3 x P99.9"``, ``"1.5 x P99.9"`` or ``"user limit"``.
    p999 : float
        The P99.9 used (given, or from the model).
    timeout_fraction : float or None
        Fraction of requests the model predicts slower than the timeout (with a model).
    warning : str
    explanation : str
    """

    timeout: float
    rule: str
    p999: float
    core: bool
    user_limit: float | None
    multiplier: float
    timeout_fraction: float | None
    warning: str
    explanation: str = field(repr=False)

    def __str__(self) -> str:
        return self.explanation


_PS_WARNING = ("The rule protects only below saturation: under processor sharing (an event loop) the "
               "response-time tail is heavier than under FCFS at the same mean, and in overload (arrival rate "
               ">= capacity) every request's latency grows without bound, so any timeout is eventually hit by "
               "nearly all requests; pair it with a rate limit at the timeout-safe rate.")


def recommend_timeout(p999: float | None, core: bool = True, user_limit: float | None = None,
                      service: Service | ArrayLike | None = None, arrival_rate: float | None = None,
                      servers: int = 1, discipline: str = "ps") -> TimeoutAdvice:
    """A client timeout by the P99.9 rule, with what the model says it costs.

    Parameters
    ----------
    p999 : float or None
        The server's P99.9 response time, seconds.  ``None``: take it from the model
        (``service`` and ``arrival_rate`` required).
    core : bool, optional
        Core call (affects orders: 3 x P99.9) or non-core (may be hidden: 1.5 x P99.9).
    user_limit : float, optional
        The longest wait the user accepts, seconds; caps the timeout.
    service, arrival_rate, servers, discipline : optional
        A model of the server (see :func:`qps_ceiling`); when given, the result also holds the
        fraction of requests the model predicts slower than the recommended timeout.

    Returns
    -------
    TimeoutAdvice

    Notes
    -----
    The rule (seed article 001, Ctrip, section 3.1; ``data/timeout_rules.toml``):
    core calls ``min(3 x P99.9, user limit)``, non-core ``min(1.5 x P99.9, user limit)``.  With a
    model the timed-out fraction is ``P(T > timeout)`` from the forward model.  Network time and
    GC pauses on the client side add to the server's latency (the article's own caveat) and
    are not in the model.

    References
    ----------
    Ctrip tech blog, "10 effective ways to reduce client timeouts" (2023), section 3.1.

    Examples
    --------
    >>> from capacity import plan
    >>> a = plan.recommend_timeout(0.12, core=True, user_limit=0.3)
    >>> a.timeout, a.rule
    (0.3, 'user limit')
    >>> a = plan.recommend_timeout(None, core=False, service=0.025, arrival_rate=20.0, discipline="fcfs")
    >>> round(a.p999, 4), round(a.timeout, 4), round(a.timeout_fraction, 7)
    (0.3454, 0.5181, 3.16e-05)
    """
    if not isinstance(core, (bool, np.bool_)):
        raise ValueError(f"core must be True or False, got {core!r}")
    have_model = service is not None or arrival_rate is not None
    if have_model and (service is None or arrival_rate is None):
        raise ValueError("a model needs both service and arrival_rate")
    sf = _tail_function(discipline, "response") if have_model else None
    if p999 is None:
        if not have_model:
            raise ValueError("p999 is required unless service and arrival_rate are given")
        from .. import fcfs, ps
        mod = ps if discipline == "ps" else fcfs
        p999_f = float(mod.response_quantile(0.999, arrival_rate, service, servers))
        if not np.isfinite(p999_f):
            raise ValueError(f"arrival_rate {arrival_rate!r} overloads the model (utilisation >= 1): there is no "
                             "P99.9 to base a timeout on")
    else:
        p999_f = float(check_positive(p999, "p999"))
    mult = CORE_P999_MULTIPLIER if core else NONCORE_P999_MULTIPLIER
    by_rule = mult * p999_f
    rule = f"{mult:g} x P99.9"
    timeout = by_rule
    if user_limit is not None:
        limit = float(check_positive(user_limit, "user_limit"))
        if limit < by_rule:
            timeout, rule = limit, "user limit"
    else:
        limit = None
    frac = None
    if have_model:
        frac = float(sf(timeout, arrival_rate, service, servers))
    kind = "core" if core else "non-core"
    text = (f"For a {kind} call with server P99.9 {_fmt_time(p999_f)}, the rule min({mult:g} x P99.9, user limit) "
            f"gives {_fmt_time(by_rule)}")
    if limit is not None:
        text += f" against a user limit of {_fmt_time(limit)}"
    text += f": set the timeout to {_fmt_time(timeout)} ({rule} decides)."
    if limit is not None and limit < p999_f:
        text += (" The user limit is below the P99.9 itself, so more than 0.1 % of calls will time out: the "
                 "service is too slow for what users accept.")
    if frac is not None:
        text += (f" The model ({_DISCIPLINE_TEXT[discipline]}, {arrival_rate:g} QPS on {_servers_text(servers)}) "
                 f"predicts {100 * frac:.3g} % of requests slower than that.")
    text += " " + _PS_WARNING
    return TimeoutAdvice(timeout=timeout, rule=rule, p999=p999_f, core=bool(core), user_limit=limit,
                         multiplier=mult, timeout_fraction=frac, warning=_PS_WARNING, explanation=text)
