"""Timeouts: the timeout-safe rate, how long a burst may last, and which client timeout to set.

:func:`timeout_safe_rate` is the ceiling of the SLO ``{1 - max_timeout_fraction: timeout}``
(:func:`capacity.plan.qps_ceiling`), :func:`burst_tolerance` the fluid overload law of
:mod:`capacity.overload` for a burst above capacity, and :func:`recommend_timeout` the P99.9 rule
of seed article 001 with what the model says it costs.  See :mod:`capacity.plan`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._checks import (
    check_discipline,
    check_nonnegative,
    check_positive,
    check_quantile,
    check_servers,
    scalar_out,
)
from .._deprecation import deprecated_property
from .._result import Result
from ..distributions import Service, as_service
from ._solve import _tail_function
from ._text import (
    _DISCIPLINE_TEXT,
    _PS_WARNING,
    _burst_sentence,
    _explain_advice,
    _explain_burst,
    _explain_timeout_safe,
    _servers_text,
)
from .ceiling import qps_ceiling

__all__ = [
    "CORE_P999_MULTIPLIER",
    "NONCORE_P999_MULTIPLIER",
    "BurstTolerance",
    "TimeoutAdvice",
    "TimeoutSafeRate",
    "burst_tolerance",
    "recommend_timeout",
    "timeout_safe_rate",
]

ArrayLike = Any

# Timeout rule of seed article 001 (Ctrip, section 3.1; data/timeout_rules.toml, ids timeout_core
# and timeout_noncore): timeout = min(multiplier x P99.9, what the user accepts).
CORE_P999_MULTIPLIER = 3.0
NONCORE_P999_MULTIPLIER = 1.5


# ---------------------------------------------------------------------------------------------
# Burst tolerance


@dataclass(frozen=True, repr=False)
class BurstTolerance(Result):
    """Result of :func:`burst_tolerance`.

    Attributes
    ----------
    burst_seconds : float or ndarray
        The longest burst at ``burst_qps``, from an idle server, after which a request of mean
        size still completes within ``timeout``, seconds (``inf`` at or below capacity, 0 when
        even an idle server misses the timeout).
    burst_qps : float or ndarray
        The arrival rate during the burst, requests/s.
    timeout : float or ndarray
        The client timeout, seconds.
    capacity_qps : float or ndarray
        ``servers / E[S]``: bursts at or below it can last indefinitely (fluid view).
    servers, discipline, delay
        The model it was computed with.
    explanation : str
        One paragraph of plain text with the numbers (``str(result)``).
    """

    burst_seconds: Any
    burst_qps: Any
    timeout: Any
    capacity_qps: Any
    servers: Any
    discipline: str
    delay: float
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("burst_seconds", "burst_qps", "timeout", "capacity_qps")


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
                    discipline: str = "ps", *, delay: float = 0.0) -> BurstTolerance:
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
    BurstTolerance
        ``.burst_seconds``: the longest burst at ``burst_qps``, from an idle server, after which
        a request of mean size still completes within ``timeout``, seconds; ``inf`` at or below
        capacity, 0 when even an idle server misses the timeout.  Also ``.capacity_qps`` and
        ``.explanation``.  (Before this release: the bare ``.burst_seconds``.)

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
    >>> b = plan.burst_tolerance(0.025, 1, 1.0, 60.0, discipline="fcfs")
    >>> round(b.burst_seconds, 4)   # (1 - 0.025) / (60 * 0.025 - 1)
    1.95
    """
    check_discipline(discipline, ("fcfs", "ps"))
    service = as_service(service)
    c = check_servers(servers)
    to = check_positive(timeout, "timeout")
    burst = check_positive(burst_qps, "burst_qps")
    d = float(check_nonnegative(delay, "delay"))
    res = dict(burst_seconds=_burst_seconds(burst, service, c, to - d, discipline), burst_qps=scalar_out(burst),
               timeout=scalar_out(to), capacity_qps=scalar_out(c / np.asarray(service.mean, dtype=float)),
               servers=scalar_out(c), discipline=discipline, delay=d)
    return BurstTolerance(**res, explanation=_explain_burst(res, service))


# ---------------------------------------------------------------------------------------------
# timeout_safe_rate


@dataclass(frozen=True, repr=False)
class TimeoutSafeRate(Result):
    """Result of :func:`timeout_safe_rate`: ``.qps``, ``.capacity_qps``, ``.utilization`` (was
    ``.ratio``, which still works for one release),
    ``.timeout``, ``.max_timeout_fraction``, ``.feasible``, ``.explanation``, and the
    event-loop model it assumed (``.slices``, ``.slice_delay``, ``.admission``)."""

    qps: Any
    capacity_qps: Any
    utilization: Any
    timeout: float
    max_timeout_fraction: float
    feasible: Any
    discipline: str
    servers: Any
    explanation: str
    burst_qps: float | None = None
    burst_seconds: Any = None
    slices: int = 1
    slice_delay: float = 0.0
    admission: str = "fifo"

    _headline: ClassVar[tuple[str, ...]] = ("qps", "utilization", "timeout", "max_timeout_fraction")

    ratio = deprecated_property("utilization")


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
        ``"curve"``: read the rate off the cached response curve of the ``1 - fraction`` quantile
        (:func:`qps_ceiling` with ``method="curve"``), fast enough for sliders; default exact.
    burst_qps : float, optional
        A burst rate, requests/s (typically above capacity): the result's ``burst_seconds`` is
        the longest burst at that rate, starting from an idle server, after which a request of
        mean size still completes within the timeout (``inf`` at or below capacity).

    Returns
    -------
    TimeoutSafeRate
        ``.qps``, ``.capacity_qps``, ``.utilization``, ``.burst_seconds``, ``.explanation``.

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
    text = _explain_timeout_safe(res, service, to, frac, delay)
    burst = burst_s = None
    if burst_qps is not None:
        burst = float(check_positive(burst_qps, "burst_qps"))
        if discipline == "rr":
            raise ValueError("burst_qps: the fluid burst model covers discipline 'ps' and 'fcfs' only")
        d = float(check_nonnegative(delay, "delay"))
        burst_s = _burst_seconds(burst, service, check_servers(res.servers), to - d, discipline)
        if np.ndim(burst_s) == 0:
            text += _burst_sentence(burst, burst_s)
    return TimeoutSafeRate(qps=res.qps, capacity_qps=res.capacity_qps, utilization=res.utilization, timeout=to,
                           max_timeout_fraction=frac, feasible=res.feasible, discipline=discipline,
                           servers=res.servers, explanation=text, burst_qps=burst, burst_seconds=burst_s,
                           slices=res.slices, slice_delay=res.slice_delay, admission=res.admission)


# ---------------------------------------------------------------------------------------------
# recommend_timeout


@dataclass(frozen=True, repr=False)
class TimeoutAdvice(Result):
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
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("timeout", "rule", "p999", "timeout_fraction")


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
    limit = None
    if user_limit is not None:
        limit = float(check_positive(user_limit, "user_limit"))
        if limit < by_rule:
            timeout, rule = limit, "user limit"
    frac = None if not have_model else float(sf(timeout, arrival_rate, service, servers))
    model = (f"{_DISCIPLINE_TEXT[discipline]}, {arrival_rate:g} QPS on {_servers_text(servers)}"
             if have_model else "")
    text = _explain_advice("core" if core else "non-core", p999_f, mult, by_rule, limit, timeout, rule, frac, model)
    return TimeoutAdvice(timeout=timeout, rule=rule, p999=p999_f, core=bool(core), user_limit=limit,
                         multiplier=mult, timeout_fraction=frac, warning=_PS_WARNING, explanation=text)
