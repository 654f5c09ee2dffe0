"""Warm-up after a deploy: a fresh process is slow at first, and a ramp admits its traffic gradually.

The Ctrip timeout article (seed 001) met timeouts right after an instance was pulled into the
pool: in section 3.7 every request waited while Redis connections were being opened (fixed by
opening them at start-up, before taking traffic), and in section 3.8 the JIT had not compiled the
hot code yet (fixed by the RPC framework's warm-up: "the application does not take 100 % of the
traffic at once but more and more of it as time goes on, so a small share of the traffic compiles
the hot code first").  Here:

* :func:`warmup_transient` -- the first minutes of a process added under load: the admitted rate
  under a linear ramp, the cold multiplier, the utilisation, the SLO ceiling of the cold process,
  the fluid backlog and the response-time percentiles over time;
* :func:`ramp_needed` -- the shortest ramp that keeps every SLO percentile within its target at
  every moment, the pre-warming a ramp needs when the cold service alone breaks the SLO, and what
  happens with no ramp.

Both serve FCFS (a worker pool), processor sharing and event-loop round robin (``discipline="rr"``
with its ``slices``, ``slice_delay`` and ``admission``).  The rolling deploy (several processes
restarting in turn) is :mod:`capacity.plan.deploy`; the simulation that checks this model is
:mod:`capacity.plan.warmup_sim`.  See :mod:`capacity.plan`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import check_positive, check_rr, check_servers
from .._common import progress_ticker
from .._result import Result, jsonable
from ..distributions import Service, as_service
from ._text import _fmt_q
from ._warmup_model import _Ceilings, _check_ramp, _default_horizon, _law, _Law, _start_and_ramp, _transient
from ._warmup_report import _explain_ramp, _explain_transient, _summary, _table, _verdict

__all__ = ["RampNeeded", "WarmupTransient", "ramp_needed", "warmup_transient"]

ArrayLike = Any


@dataclass(frozen=True, repr=False)
class WarmupTransient(Result):
    """Result of :func:`warmup_transient`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per ``bucket`` (index ``time``, seconds since the process was added):
        ``admitted_rate`` (requests/s), ``multiplier`` (cold service over warm), ``utilization``,
        ``ceiling_qps`` (the SLO ceiling of the process as cold as it is then), ``delay`` (fluid
        backlog delay, s) and one ``pQ_s`` column per SLO percentile (s).
    verdict : str
        ``"meets_slo"``, ``"slo_broken"`` (slow, but the process keeps up), ``"backlog"`` (the cold
        process falls behind, then catches up), ``"overloaded"`` (its share is too much even warm).
    peak_response : dict
        Per SLO percentile, its largest value over the transient (s).
    peak_time : float
        When the first SLO percentile peaks (s).
    seconds_over_slo : float
        Seconds during which some percentile is above its target.  Against the simulator (FCFS,
        60 requests/s of 10 ms, 3 x cold, warm-up by time and by requests, no ramp) 9-13 % short:
        the fluid backlog drains faster than the random queue that follows it.
    peak_delay : float
        Largest fluid backlog delay (s); 0 when the process always keeps up.
    recovery_time : float
        When the backlog is back to 0 (s; NaN without backlog, inf if it never drains).
    warm_time : float
        When the multiplier is within 1 % of its cold excess from 1 (s).
    seconds_over_timeout, timeout_fraction, timed_out, timeout_window : float or None
        With ``timeout``: seconds during which the backlog delay alone passes it, the share of the
        requests admitted in the first ``timeout_window`` seconds (until the process is warm and
        the backlog gone) that arrive then, and their number (fluid).
    cold_utilization, warm_utilization : float
        The utilisation the full share would give the cold process and the warm one.
    arrival_rate, ramp, cold_multiplier, warmup_requests, warmup_time, servers, discipline, slices,
    slice_delay, admission, slo, timeout, horizon
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    verdict: str
    peak_response: dict
    peak_time: float
    seconds_over_slo: float
    peak_delay: float
    recovery_time: float
    warm_time: float
    seconds_over_timeout: float | None
    timeout_fraction: float | None
    timed_out: float | None
    timeout_window: float | None
    cold_utilization: float
    warm_utilization: float
    arrival_rate: float
    ramp: float
    cold_multiplier: float
    warmup_requests: float | None
    warmup_time: float | None
    servers: int
    discipline: str
    slices: int
    slice_delay: float
    admission: str
    slo: dict
    timeout: float | None
    horizon: float
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("verdict", "peak_response", "seconds_over_slo", "peak_delay")

    def to_dict(self) -> dict:
        """The summary numbers and the explanation, JSON-ready (the table is ``to_frame()``)."""
        return {name: jsonable(getattr(self, name)) for name in self._fields() if name != "table"}


def _inputs(service: Any, servers: Any, slo: Mapping | None, discipline: str, slices: Any = 1,
            slice_delay: Any = 0.0, admission: Any = "fifo") -> tuple[Service, int, dict, tuple[int, float, str]]:
    """The validated service, cores, SLO and round-robin options ``(slices, slice_delay, admission)``."""
    svc = as_service(service)
    if svc.family in ("empirical", "scipy") or np.ndim(svc.mean):
        raise ValueError(f"service must be a parametric Service with scalar parameters (exponential, gamma, "
                         f"lognormal, ...), got {svc!r}")
    c = check_servers(servers)
    if c.ndim:
        raise ValueError(f"servers must be a single integer, got {servers!r}")
    rr = check_rr(discipline, slices, slice_delay, admission)
    return svc, int(c), ({0.99: 0.5} if slo is None else slo), rr


def warmup_transient(arrival_rate: float, service: Service | float, cold_multiplier: float, *,
                     warmup_requests: float | None = None, warmup_time: float | None = None, ramp: float = 0.0,
                     servers: int = 1, slo: Mapping[float, float] | None = None, discipline: str = "ps",
                     slices: int = 1, slice_delay: float = 0.0, admission: str = "fifo",
                     timeout: float | None = None, horizon: float | None = None,
                     bucket: float | None = None,
                     progress: Callable[[int, int], Any] | None = None) -> WarmupTransient:
    """The first minutes of a fresh process added under load: its p99, backlog and timeouts over time.

    Parameters
    ----------
    arrival_rate : float
        The process's full share of the traffic, requests/s (what it gets once the ramp is over).
    service : Service or float
        CPU time per request of the *warm* process, seconds (scalar parameters; a number is an
        exponential mean).
    cold_multiplier : float
        ``m0 >= 1``: the fresh process's service time over the warm one (JIT-less interpreted
        code, connections still to open).  1 is no warm-up.
    warmup_requests, warmup_time : float
        Exactly one: the process warms with the requests it serves, the multiplier's excess
        falling by ``e`` every ``warmup_requests`` requests (JIT); or with time, by ``e`` every
        ``warmup_time`` seconds (pools and caches filling).
    ramp : float, optional
        Seconds over which the balancer raises the process's share linearly from 0 to full
        (Dubbo's and the Ctrip RPC framework's warm-up weight, Envoy's slow start with
        aggression 1); 0 (default) admits the full share at once.
    servers : int, optional
        Cores of the process (default 1).
    slo : mapping, optional
        Quantile -> seconds (default ``{0.99: 0.5}``).
    discipline : {"ps", "fcfs", "rr"}, optional
        Processor sharing (an event loop; default), FCFS (a blocking worker pool) or event-loop
        round robin over the ``slices`` between a handler's awaits (:mod:`capacity.rr`).
    slices, slice_delay, admission : optional
        ``discipline="rr"`` only: the CPU slices of a request (default 1, which is FCFS), the
        non-CPU pause between two of them (seconds, default 0) and when a new request joins the run
        queue (``"fifo"``, default, or ``"idle"``); see :mod:`capacity.rr`.
    timeout : float, optional
        Client timeout, seconds: adds the seconds and the share of requests over it.
    horizon, bucket : float, optional
        Length of the transient and the spacing of the table's rows, seconds (default: until the
        process is warm and any backlog has drained, and 120 rows).
    progress : callable, optional
        ``progress(done, total)`` after each of the two steps: the response curve (most of the
        time: processor sharing on several cores with a non-exponential law computes it directly,
        about 3 s for gamma CPU on four cores) and the march.

    Returns
    -------
    WarmupTransient

    Notes
    -----
    *Warm-up law*: the service time of a request is ``S m`` with the warm law ``S`` and the
    multiplier ``m(x) = 1 + (m0 - 1) exp(-x / L)``.  With ``warmup_requests = L`` the progress
    ``x`` is the number of requests the process started before this one (HotSpot compiles a
    method after a count of invocations; the exponential is the smooth form of "the hot methods
    compile one after another, most-used first").  With ``warmup_time = L`` it is the seconds
    since the process started, and the process runs at speed ``1 / m(t)``: in ``dt`` it does
    ``dt / m(t)`` seconds of warm work, so the whole queue is the warm queue seen through the
    clock ``G(t) = int_0^t ds / m(s)`` -- exact for FCFS and PS alike, since both only share the
    CPU.  Both laws start at ``m0`` and are within 1 % of warm after ``L ln 100 = 4.6 L``.

    *Ramp*: the process is admitted the share ``a(t) = min(1, t / R)`` of its full rate
    ``lambda``, Poisson at rate ``lambda a(t)``.  In a fleet of ``N`` behind a weighted balancer
    its share is ``a lambda_total / (N - 1 + a)``, slightly more than ``a`` times its full share;
    :func:`capacity.plan.rolling_deploy` uses that exactly.

    *Transient (approximation)*: at each moment the utilisation is
    ``rho(t) = lambda a(t) E[S] m(t) / c``.  Where the cold process cannot keep up, work piles up
    as a fluid: request ``n`` starts at ``s_n = max(t_n, s_{n-1} + cost_{n-1} / c)`` (the running
    maximum of :func:`capacity.overload.backlog`, with the costs ``E[S] m(n)`` of the requests law,
    or in the clock ``G`` of the time law) and waits ``D(t) = s - t``.  On top of ``D`` comes the
    random part of the queue: the percentile of the stationary queue at ``rho(t)`` with service
    ``S m(t)`` -- the pointwise stationary approximation (Green and Kolesar 1991), read off the
    cached response curve of :func:`capacity.plan.response_curve` (within 2e-4 of the exact
    formulas) -- but never more than a queue can build in the ``t`` seconds it has had: the
    queued work exceeds its fluid level by at most the running maximum of a Brownian motion of
    variance rate ``lambda E[(S m)^2] / c^2``, whose ``q``-quantile is ``sigma sqrt(t) z_{(1-q)/2}``
    (reflection principle; Harrison 1985), plus the request's own ``m q_S``.  So
    ``T_q(t) = D(t) + min(stationary_q(rho(t)), m q_S + sigma sqrt(t) z_{(1-q)/2})``, continuous
    through overload (where the stationary percentile is infinite).

    *Processor sharing*: the crowd shares the cores, so a request's wait depends on its size, not
    only on the backlog.  Fluid PS (Gromoll, Puha and Williams 2002): every request present is served
    at ``r = min(1, c / N)`` (in the clock ``G`` for the time law), ``R(t) = int r`` is the service a
    request present all along has had, and ``N(t) = int lambda a(u) P(S m > R(t) - R(u)) du`` -- the
    requests admitted so far whose size exceeds what they have had (the requests law prices the
    request admitted at ``u`` at ``S m(n(u))``).  ``N`` and ``R`` are marched over the grid, each step
    giving the cores' ``c dt`` of work to the crowd.  A request of size ``x`` admitted at ``u`` leaves
    when ``R`` has grown by ``x``, so its ``q``-percentile is the service quantile mapped through
    ``R``: ``R^-1(R(u) + m q_S) - u``.  Where the process keeps up the fluid is the bare service, and
    the pointwise stationary percentile above (with its Brownian cap) is the larger:
    ``T_q(t) = max(fluid_q(t), min(stationary_q(rho(t)), m q_S + sigma sqrt(t) z_{(1-q)/2}))``.  With
    ``timeout`` the requests that time out are those whose size the crowd does not let finish in it:
    ``P(S m > R(u + timeout) - R(u))`` per admitted request.

    *Measured against* :func:`capacity.plan.warmup_simulation` (``tests/test_plan_warmup.py``;
    10 ms exponential CPU, 60 requests/s, ``m0 = 3``): at the ramp :func:`ramp_needed` gives, the
    worst 10-20 s window of the simulation had 0.8-1.4 % of its requests over the p99 target
    (FCFS and PS, both laws): the ramp is right to about 10 % in the threshold; at 0.6 x that
    ramp 3-38 % were over.  With no ramp (180 % utilisation cold), FCFS: while the backlog grows
    the model's p99 is within 10 % of the simulated one (6.8 s model, 6.5 s simulated at
    t = 10 s) and its median 4-14 % above; while the backlog drains the model is below (p99 1.1 s
    against 3.7 s); the count of timed-out requests (2 s timeout: the fluid's requests with
    ``D >= timeout``) is within 3 %.
    Processor sharing, no ramp (180 % cold; exponential, gamma scv 2 and lognormal scv 1.5 CPU; 1
    and 4 cores; both laws), per 5 s bucket while the fluid backlog is 2 s or more: the model's p50
    is 0.92-1.25 x the simulated one and its p99 0.79-1.05 x (the former model, the FCFS backlog
    plus the stationary part, had p99 0.06-0.45 x and p50 1.3-3.7 x); the timed-out count (2 s and
    5 s timeouts) 0.89-0.97 x the simulated one (it was 1.3-2.3 x, or none at 5 s).  Where the
    random backlog the fluid does not carry dominates, the model is low: with a short or mild
    overload (a 10 s ramp, lognormal CPU: backlog under 2 s) the p99 was 0.35-0.8 x the simulated
    one and the timed-out count 0.6-0.8 x; in the last 10 s of a drain the p99 was 0.15-0.5 x.

    *Round robin* (``discipline="rr"``, :mod:`capacity.rr`): one slice is FCFS exactly (every function
    here gives FCFS's numbers).  With ``k`` slices the stationary percentile is rr's calibrated
    formula (:func:`capacity.rr.response_quantile`, its own error against simulation in that module:
    p99 within 6.5 % on one core) at ``rho(t)`` with service ``S m(t)``, from the cached zero-delay
    table plus the ``(k - 1) d`` of slice delays; with ``admission="idle"`` the delay enters the queue
    as ``d / (m E[S])``, so the idle formula is applied at each ``m`` and the ceiling found by
    bisection; the Brownian cap adds the ``(k - 1) d`` too.  Where the process falls behind, fluid
    round robin (``"fifo"``): every request present has one slice queued, so a cycle of the run queue
    takes ``P / c`` with ``P`` the slice work present, and a request leaves after ``k`` cycles whatever
    its size, ``tau_{j+1} = tau_j + P(tau_j) / c`` (marched over the grid, in the clock ``G`` for the
    time law; against the self-similar closed form of a constant overload, ``L(a) = beta a`` with
    ``beta = (1 + rho (1 - 1 / beta) / k)^k``, within 1 %).  With ``"idle"`` the loop admits the
    waiting requests in batches, the next when the one in flight is served:
    ``s_{n+1} = s_n + (W(s_n) - W(s_{n-1})) / c`` with ``W`` the admitted work, and a request arriving
    in ``(s_{n-1}, s_n]`` leaves at ``s_{n+1}``.  Then ``T_q(t) = R(t) + min(stationary_q(rho(t)),
    m q_S + (k - 1) d + sigma sqrt(t) z_{(1-q)/2})`` with ``R`` the fluid response, 0 where the
    process keeps up; with ``timeout``, the requests whose ``R + (k - 1) d`` reaches it.  Measured
    against :func:`capacity.plan.warmup_simulation` (``tests/test_plan_warmup_rr.py``; 10 ms
    exponential CPU, 60 requests/s, ``m0 = 3``, no ramp): FIFO admission (5 slices both laws; 3
    slices 1 ms apart), while the backlog grows past 5 s, p50 4-9 % above the simulated one and
    p99 -9 to +5 %; the timed-out count (2 s) within 1 %.  Idle admission (5 slices 2 ms apart,
    requests law): the timed-out count within 1 %, per 5 s bucket p50 1.0-1.5 x and p99
    0.8-1.06 x (the model's batches are in phase, the runs' are not).  At the ramp
    :func:`ramp_needed` gives, the worst window had 0.7-1.9 % of its requests over the p99 target,
    at 0.6 x that ramp 3.8-12 %.  The simulation cannot carry a slice delay under the time law
    (a wall-clock wait does not slow down with the process).

    What it leaves out: retries of timed-out requests (see
    :func:`capacity.overload.retry_fixed_points`), a balancer that sends less to a slow process
    (least connections protects a cold process somewhat), and health checks that fail under the
    backlog and restart the process cold again.

    References
    ----------
    Seed article 001 (Ctrip), sections 3.7 (warm-up at start-up: open connections before taking
    traffic) and 3.8 (JIT; warm-up by a gradually rising share of traffic).  L. V. Green and
    P. J. Kolesar, "The pointwise stationary approximation for queues with nonstationary
    arrivals", Management Science 37(1) (1991) 84-97.  J. M. Harrison, *Brownian Motion and
    Stochastic Flow Systems*, Wiley (1985), sec. 1.8 (reflection principle).  W. Whitt,
    *Stochastic-Process Limits*, Springer (2002), ch. 5 (fluid and heavy-traffic limits).  H. C. Gromoll,
    A. L. Puha and R. J. Williams, "The fluid limit of a heavily loaded processor sharing queue",
    Annals of Applied Probability 12(3) (2002) 797-859.  Apache Dubbo,
    ``AbstractLoadBalance.calculateWarmupWeight`` (weight ``uptime / warmup`` of the full
    weight); Envoy, ``slow_start_config`` of the round robin and least request balancers.

    Examples
    --------
    A 10 ms (exponential) FCFS process at 60 requests/s, three times slower when it starts and
    warming with a 20 s time constant: with no ramp it starts at 180 % utilisation and falls
    behind; a 60 s ramp keeps it within a 250 ms p99.

    >>> from capacity import plan
    >>> cold = plan.warmup_transient(60.0, 0.010, 3.0, warmup_time=20.0, discipline="fcfs", slo={0.99: 0.25})
    >>> cold.verdict, round(cold.cold_utilization, 2), round(cold.peak_delay, 1)
    ('backlog', 1.8, 4.9)
    >>> plan.warmup_transient(60.0, 0.010, 3.0, warmup_time=20.0, ramp=60.0, discipline="fcfs",
    ...                       slo={0.99: 0.25}).verdict
    'meets_slo'
    """
    svc, c, slo, rr = _inputs(service, servers, slo, discipline, slices, slice_delay, admission)
    lam = float(check_positive(arrival_rate, "arrival_rate"))
    law = _law(cold_multiplier, warmup_requests, warmup_time)
    r = _check_ramp(ramp)
    tau = None if timeout is None else float(check_positive(timeout, "timeout"))
    tick = progress_ticker(progress, 2)
    ceil = _Ceilings(svc, c, slo, discipline, rr)
    tick()
    span = _default_horizon(law, ceil, lam, r) if horizon is None else float(check_positive(horizon, "horizon"))
    march = _transient(law, ceil, lam, r, span)
    tick()
    return _result(march, law, ceil, lam, r, tau, span, bucket)


def _result(tr: dict, law: _Law, ceil: _Ceilings, lam: float, ramp: float, tau: float | None, span: float,
            bucket: float | None) -> WarmupTransient:
    warm_u = lam * ceil.mean / ceil.servers
    s = _summary(tr, law, ceil, tau)
    res = dict(table=_table(tr, ceil, span, bucket), verdict=_verdict(s, warm_u), **s,
               cold_utilization=warm_u * law.cold, warm_utilization=warm_u, arrival_rate=lam, ramp=ramp,
               cold_multiplier=law.cold, warmup_requests=law.scale if law.by == "requests" else None,
               warmup_time=law.scale if law.by == "time" else None, servers=ceil.servers,
               discipline=ceil.discipline, slices=ceil.slices, slice_delay=ceil.slice_delay,
               admission=ceil.admission, slo={float(q): float(t) for q, t in zip(ceil.qs, ceil.ts)},
               timeout=tau, horizon=span)
    return WarmupTransient(**res, explanation=_explain_transient(res, ceil.service))


# ---------------------------------------------------------------------------------------------
# The shortest ramp


@dataclass(frozen=True, repr=False)
class RampNeeded(Result):
    """Result of :func:`ramp_needed`.

    Attributes
    ----------
    ramp : float
        The shortest linear ramp (s) that keeps every SLO percentile within its target at every
        moment, started when the process has been pre-warmed to ``start_multiplier``; 0 when the
        full share is fine at once; inf when nothing helps (``feasible`` False).
    feasible : bool
        False when the warm process already breaks the SLO at its share.
    start_multiplier : float
        The multiplier when traffic starts: ``cold_multiplier``, or lower when the cold service
        alone breaks the SLO and the process must be pre-warmed first.
    prewarm_requests, prewarm_time : float
        The pre-warming that takes the multiplier there (synthetic requests for the requests law,
        seconds of waiting for the time law; the other is None).  0 when none is needed.
    ceiling_qps, cold_ceiling_qps : float
        The SLO ceiling of the warm process and of the process at ``cold_multiplier``.
    no_ramp, with_ramp : WarmupTransient
        The transient with the full share at once (no pre-warming) and with the answer.
    table : pandas.DataFrame
        Both over time: ``with_ramp``'s table and the no-ramp ``admitted_rate``, ``delay`` and
        percentiles, prefixed ``no_ramp_``.
    arrival_rate, cold_multiplier, warmup_requests, warmup_time, servers, discipline, slices,
    slice_delay, admission, slo
        What was asked.
    explanation : str
    """

    ramp: float
    feasible: bool
    start_multiplier: float
    prewarm_requests: float | None
    prewarm_time: float | None
    ceiling_qps: float
    cold_ceiling_qps: float
    no_ramp: WarmupTransient
    with_ramp: WarmupTransient
    table: pd.DataFrame
    arrival_rate: float
    cold_multiplier: float
    warmup_requests: float | None
    warmup_time: float | None
    servers: int
    discipline: str
    slices: int
    slice_delay: float
    admission: str
    slo: dict
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("ramp", "start_multiplier", "ceiling_qps", "cold_ceiling_qps")

    def to_dict(self) -> dict:
        """The answer, the two transients' summaries and the explanation (the table is ``to_frame()``)."""
        return {name: jsonable(getattr(self, name)) for name in self._fields() if name != "table"}


def ramp_needed(arrival_rate: float, service: Service | float, cold_multiplier: float, *,
                warmup_requests: float | None = None, warmup_time: float | None = None, servers: int = 1,
                slo: Mapping[float, float] | None = None, discipline: str = "ps", slices: int = 1,
                slice_delay: float = 0.0, admission: str = "fifo", timeout: float | None = None,
                progress: Callable[[int, int], Any] | None = None) -> RampNeeded:
    """The shortest traffic ramp that keeps the SLO while a fresh process warms up, and what no ramp does.

    Parameters
    ----------
    arrival_rate, service, cold_multiplier, warmup_requests, warmup_time, servers, slo, discipline
        As in :func:`warmup_transient` (``arrival_rate``: the process's full share, requests/s).
    slices, slice_delay, admission, timeout
        As in :func:`warmup_transient`.
    progress : callable, optional
        ``progress(done, total)`` after each of the four steps (the response curve, the no-ramp
        transient, the ramp, its transient); processor sharing with a non-exponential service on
        several cores takes a few seconds the first time (the curve is cached).

    Returns
    -------
    RampNeeded

    Notes
    -----
    The criterion is pointwise: the admitted rate ``lambda a(t)`` must stay at or below the SLO
    ceiling ``C(m(t))`` of the process as cold as it is at that moment -- the pointwise
    stationary approximation of :func:`warmup_transient`, which errs on the safe side while the
    load rises (a queue lags behind its stationary level).  ``C(m)`` comes from one cached
    response curve, ``C(m; t) = C(1; t / m) / m`` (a service ``m`` times longer is the same queue in
    a time unit ``m`` times longer).  On a fine grid of multipliers ``m`` between the start and 1
    (the law's progress ``x`` from the start): the time law reaches ``m`` at ``t = x`` whatever the
    ramp, so ``R >= lambda x / C(m)``; the requests law has served ``x = r^2 R / (2 lambda)``
    requests when the ramp reaches the rate ``r``, so ``R >= 2 lambda x / C(m)^2``.  The ramp is
    the largest bound where ``C(m) < lambda`` (the point ``C = lambda`` solved exactly).

    If the cold service alone breaks the SLO (``m0`` above ``min_q t_q / q_q(S)``, the quantile of
    the bare service), no ramp helps: the first requests are too slow however few.  The answer is
    then to pre-warm the process to that multiplier first -- replay or synthetic requests for the
    requests law, the article's start-up warm-up (open the connections, load the caches) or just
    waiting for the time law -- and ramp from there; pre-warming further shortens the ramp.  A
    dashboard's per-minute p99 averages over the minute, so it shows less than this pointwise
    criterion guards against.

    References
    ----------
    As :func:`warmup_transient`.

    Examples
    --------
    The example of :func:`warmup_transient`.  M/M/1 FCFS holds ``p99 <= t`` up to
    ``1 / (E[S] m) - ln(100) / t``: 100 - 18.42 = 81.6 requests/s warm, 33.3 - 18.4 = 14.9 cold.  The
    ramp must last until the process holds its 60 requests/s, at ``m = 100 / 78.42 = 1.275``,
    i.e. ``20 ln(2 / 0.275) = 39.7`` s:

    >>> from capacity import plan
    >>> r = plan.ramp_needed(60.0, 0.010, 3.0, warmup_time=20.0, discipline="fcfs", slo={0.99: 0.25})
    >>> round(r.ramp, 1), round(r.ceiling_qps, 1), round(r.cold_ceiling_qps, 1), r.no_ramp.verdict
    (39.7, 81.6, 14.9, 'backlog')
    """
    svc, c, slo, rr = _inputs(service, servers, slo, discipline, slices, slice_delay, admission)
    lam = float(check_positive(arrival_rate, "arrival_rate"))
    law = _law(cold_multiplier, warmup_requests, warmup_time)
    tau = None if timeout is None else float(check_positive(timeout, "timeout"))
    tick = progress_ticker(progress, 4)
    ceil = _Ceilings(svc, c, slo, discipline, rr)
    tick()
    warm_cap, cold_cap = (float(v) for v in ceil.qps(np.array([1.0, law.cold])))
    feasible = lam <= warm_cap
    start, ramp = _start_and_ramp(law, ceil, lam) if feasible else (law.cold, math.inf)
    prewarm = float(law.progress_to(start)) if start < law.cold else 0.0
    tick()
    after = _Law(start, law.scale, law.by)
    span = max(_default_horizon(law, ceil, lam, 0.0), _default_horizon(after, ceil, lam, ramp if feasible else 0.0))
    no_ramp = _result(_transient(law, ceil, lam, 0.0, span), law, ceil, lam, 0.0, tau, span, None)
    tick()
    with_ramp = _result(_transient(after, ceil, lam, ramp if feasible else 0.0, span), after, ceil, lam,
                        ramp if feasible else 0.0, tau, span, None)
    tick()
    table = with_ramp.table.copy()
    for col in ["admitted_rate", "delay"] + [f"{_fmt_q(q)}_s" for q in ceil.qs]:
        table[f"no_ramp_{col}"] = no_ramp.table[col].to_numpy()
    res = dict(ramp=ramp, feasible=feasible, start_multiplier=start,
               prewarm_requests=prewarm if law.by == "requests" else None,
               prewarm_time=prewarm if law.by == "time" else None, ceiling_qps=warm_cap, cold_ceiling_qps=cold_cap,
               no_ramp=no_ramp, with_ramp=with_ramp, table=table, arrival_rate=lam, cold_multiplier=law.cold,
               warmup_requests=law.scale if law.by == "requests" else None,
               warmup_time=law.scale if law.by == "time" else None, servers=c, discipline=discipline,
               slices=ceil.slices, slice_delay=ceil.slice_delay, admission=ceil.admission,
               slo={float(q): float(t) for q, t in zip(ceil.qs, ceil.ts)})
    return RampNeeded(**res, explanation=_explain_ramp(res))
