"""Noisy hosts: CPU steal as lost capacity, and when moving to another host pays.  :func:`steal_whatif`.

The Ctrip timeout article (seed 001, section 3.9) moves containers off a host whose load is too
high.  On a virtual machine that load shows as *steal*: the share of time a vCPU was ready to run
but the hypervisor ran someone else.  The model here takes steal as a steady fraction ``s`` of
each core's time, i.e. cores running at speed ``1 - s``, and answers what it costs in ceiling and
tail latency, and at which steal moving pays.  See :mod:`capacity.plan`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import as_float_array, check_discipline, check_nonnegative, check_positive, check_servers
from .._common import progress_ticker, solve_increasing
from .._result import Result
from ..distributions import Service, as_service
from ._solve import _parse_slo, _tail_fractions, _tail_function
from ._text import _DISCIPLINE_TEXT, _describe_service, _fmt_q, _fmt_rate, _fmt_time
from .ceiling import qps_ceiling

__all__ = ["StealWhatIf", "steal_whatif"]

ArrayLike = Any

#: The steal levels of the table when none are given: a quiet host to a very noisy one.
DEFAULT_STEAL = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)


@dataclass(frozen=True, repr=False)
class StealWhatIf(Result):
    """Result of :func:`steal_whatif`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per steal level (index ``steal``): ``capacity_qps``, ``ceiling_qps`` (SLO
        ceiling), ``ceiling_loss`` (``1 - ceiling / ceiling without steal``), and with
        ``arrival_rate`` one ``pQ_s`` column per SLO percentile at that rate (``inf``: unstable).
    ceiling_qps : float
        The SLO ceiling with no steal.
    slo_steal : float or None
        With ``arrival_rate``: the steal at which the SLO breaks at that rate (0: already broken).
    loss_steal : float or None
        With ``max_ceiling_loss``: the steal at which the ceiling has lost that share.
    move_steal : float or None
        The smaller of the two: above this steal, moving to a quieter host pays.
    arrival_rate, max_ceiling_loss, steal_period, servers, discipline, slo
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    ceiling_qps: float
    slo_steal: float | None
    loss_steal: float | None
    move_steal: float | None
    arrival_rate: float | None
    max_ceiling_loss: float | None
    steal_period: float
    servers: int
    discipline: str
    slo: dict
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("ceiling_qps", "slo_steal", "loss_steal", "move_steal")


def _slowed(service: Service, factor: np.ndarray, period: float = 0.0) -> Service:
    """``service`` with every time multiplied by ``factor = 1 / (1 - s)`` (an array: one law per
    element); with steal in periods of ``period`` seconds, Gaver's extra variance too (the gamma
    law with those two moments: the work plus a Poisson number of interruptions has an
    exponential tail, as the gamma has)."""
    f = np.asarray(factor, dtype=float)
    mean = np.asarray(service.mean, dtype=float) * f
    if period > 0:
        s = 1.0 - 1.0 / f
        scv = np.maximum(float(service.scv) + s * (1.0 - s) * period / float(service.mean), 1e-6)
        return Service.gamma(mean, scv)
    if service.family == "erlang":
        return Service.erlang(mean, np.broadcast_to(service._params["k"], mean.shape))
    return Service.from_moments(mean, np.broadcast_to(service.scv, mean.shape), family=service.family)


def _steal_array(steal: ArrayLike) -> np.ndarray:
    arr = as_float_array(steal, "steal")
    bad = ~((arr >= 0) & (arr < 1))
    if arr.ndim > 1 or bad.any():
        raise ValueError(f"steal must be a share in [0, 1) or a one-dimensional list of them, got {steal!r}")
    return np.atleast_1d(arr)


def _breaking_steal(service: Service, c: int, qs: np.ndarray, ts: np.ndarray, rate: float, discipline: str,
                    period: float = 0.0) -> float:
    """The steal at which the SLO breaks at ``rate``: the root in ``s`` of ``P(T > t_i) = 1 - q_i``
    with the service slowed to ``S / (1 - s)``, the smallest over the percentiles (0 if it is
    broken without steal).  Solved in ``u = s / (s_max - s)``, ``s_max = 1 - rate E[S] / c`` the
    steal at which the queue turns unstable, so the whole stable range maps onto (0, inf)."""
    sf = _tail_function(discipline, "response")
    p = _tail_fractions(qs)
    s_max = 1.0 - rate * float(service.mean) / c
    if s_max <= 0 or np.any(np.asarray(sf(ts, rate, service._expand(1), c), dtype=float) > p):
        return 0.0

    def log_tail(u: np.ndarray) -> np.ndarray:
        s = s_max * u / (1.0 + u)
        tail = np.asarray(sf(ts, rate, _slowed(service, 1.0 / (1.0 - s), period), c), dtype=float)
        return np.log(np.maximum(tail, 1e-300))

    u = solve_increasing(log_tail, np.log(p), np.full(qs.shape, 1e-3), np.full(qs.shape, 1e2), rtol=1e-7)
    return float(np.min(s_max * u / (1.0 + u)))


def steal_whatif(service: Service | ArrayLike, servers: int = 1, slo: Mapping[float, float] | None = None,
                 steal: ArrayLike = DEFAULT_STEAL, arrival_rate: float | None = None, discipline: str = "ps", *,
                 max_ceiling_loss: float | None = None, steal_period: float = 0.0,
                 progress: Callable[[int, int], Any] | None = None) -> StealWhatIf:
    """The SLO ceiling and the latency percentiles against CPU steal, and the steal at which to move host.

    Parameters
    ----------
    service : Service or float
        CPU time per request on a quiet host, seconds (scalar parameters; not ``empirical``).
    servers : int, optional
        Cores (vCPUs) serving one queue (default 1).
    slo : mapping, optional
        Quantile -> seconds (default ``{0.99: 0.5}``).
    steal : float or sequence of float, optional
        Steal shares for the table, each in [0, 1) (default 0, 2, 5, 10, 20, 30 %).
    arrival_rate : float, optional
        Today's rate, requests/s: adds the percentiles at that rate and ``slo_steal``.
    discipline : {"ps", "fcfs"}, optional
        Processor sharing (an event loop; default) or FCFS (a blocking worker pool).
    max_ceiling_loss : float, optional
        The share of the ceiling you accept losing to a noisy neighbour (e.g. 0.2): adds
        ``loss_steal``.
    steal_period : float, optional
        Seconds one steal period lasts, when the hypervisor takes the core in periods long
        against a request (default 0: finely interleaved).  FCFS only (see Notes).
    progress : callable, optional
        ``progress(done, total)``, called after each of the (up to four) solves: processor
        sharing with a non-exponential service on several cores takes a second or two.

    Returns
    -------
    StealWhatIf

    Notes
    -----
    *Model*: steal takes a steady share ``s`` of every core's time, finely interleaved with the
    requests' work (the hypervisor's slices are short against a request), so each core works at
    speed ``1 - s`` and a request needing ``S`` of CPU holds it ``S / (1 - s)``.  The capacity is
    ``c (1 - s) / E[S]`` and every queue formula applies to the slowed service.  Because time
    just stretches, the ceiling obeys ``ceiling(s; t) = (1 - s) ceiling(0; (1 - s) t)``: the
    latency SLO loses more than the raw ``s`` of capacity, since the same threshold is a tighter
    one for the slowed CPU.

    *Fine-grained is the default*: steal that comes in periods of length ``v`` adds variance to
    each request (Gaver 1962, interruptions of constant length arriving as a Poisson stream while
    the request runs: ``Var[S_eff] = Var[S] / (1 - s)^2 + E[S] s v / (1 - s)``), so long steal
    periods hurt the tail more.  With ``steal_period = v`` (FCFS only: one request holds a core,
    so an interruption of the core is one of the request, and the Pollaczek-Khinchine mean is
    exact with these two moments) the service is the gamma law with that variance (percentiles
    approximate): against the simulator with 50 ms periods of 20 % steal on 10 ms exponential
    requests at 56 requests/s, the mean inside the 99 % interval and the p99 -6 % (270 ms against
    286 +- 25 ms; the lognormal law of the same two moments read +11 %).  Under processor sharing
    an interruption stops every request in flight at once, which no per-request law describes:
    ``steal_period`` is refused there.  Checked against the simulator with steal as 0.5 ms
    interruptions of 10 ms requests (``tests/test_plan_steal.py``: mean and p99 inside the 99 %
    intervals, FCFS on one core and processor sharing on four at 70 % of the slowed capacity) and
    shown to be optimistic for 50 ms interruptions.  Steal that comes and goes over minutes (a
    neighbour's batch job) is a modulated capacity this model does not cover: read the table at
    the steal of the bad minutes.

    *When moving pays*: at ``slo_steal`` the SLO breaks at today's rate (the root of
    ``P(T > t) = 1 - q`` in ``s``); at ``loss_steal`` the ceiling has lost ``max_ceiling_loss`` --
    the SLO breaks at ``(1 - max_ceiling_loss) x ceiling``, so it is the same root at that rate.
    Above ``move_steal``, the smaller one, a quieter host (or a dedicated one) pays for the move.

    References
    ----------
    D. P. Gaver, "A waiting line with interrupted service, including priorities", J. Roy.
    Statist. Soc. B 24 (1962) 73-90.  Seed article 001 (Ctrip), section 3.9 ("change the host
    when its load is too high").

    Examples
    --------
    25 ms of exponential CPU on one core, FCFS, p99 within 500 ms (ceiling 30.79 QPS without
    steal, ``40 (1 - s) - ln(100) / 0.5`` with it); today 25 QPS:

    >>> from capacity import plan
    >>> r = plan.steal_whatif(0.025, slo={0.99: 0.5}, discipline="fcfs", arrival_rate=25.0)
    >>> round(r.ceiling_qps, 2), round(r.slo_steal, 4)     # 40 (1 - s) - 9.21 = 25
    (30.79, 0.1447)
    """
    svc = as_service(service)
    if svc.family in ("empirical", "scipy") or np.ndim(svc.mean):
        raise ValueError(f"service must be a parametric Service with scalar parameters (exponential, gamma, "
                         f"lognormal, ...), got {svc!r}")
    c = int(check_servers(servers))
    check_discipline(discipline, ("fcfs", "ps"))
    slo = {0.99: 0.5} if slo is None else slo
    qs, ts = _parse_slo(slo)
    s = _steal_array(steal)
    v = float(check_nonnegative(steal_period, "steal_period"))
    if v > 0 and discipline != "fcfs":
        raise ValueError(f"steal_period needs discipline='fcfs' (under {discipline!r} a steal period stops every "
                         f"request in flight at once, which a per-request law does not describe), got {steal_period!r}")
    lam = None if arrival_rate is None else float(check_positive(arrival_rate, "arrival_rate"))
    loss = None
    if max_ceiling_loss is not None:
        loss = float(as_float_array(max_ceiling_loss, "max_ceiling_loss"))
        if not 0 < loss < 1:
            raise ValueError(f"max_ceiling_loss must be a share in (0, 1), got {max_ceiling_loss!r}")
    steps = 2 + (lam is not None) + (loss is not None)
    tick = progress_ticker(progress, steps)
    base = float(qps_ceiling(svc, c, slo, discipline).qps)
    tick()
    slowed = _slowed(svc, 1.0 / (1.0 - s), v)
    ceil = np.atleast_1d(np.asarray(qps_ceiling(slowed, c, slo, discipline).qps, dtype=float))
    tick()
    table = pd.DataFrame({"capacity_qps": c * (1.0 - s) / float(svc.mean), "ceiling_qps": ceil,
                          "ceiling_loss": np.where(s == 0, 0.0, 1.0 - ceil / base) if base > 0 else np.nan},
                         index=pd.Index(s, name="steal"))
    slo_steal = loss_steal = None
    if lam is not None:
        _add_percentiles(table, svc, s, c, qs, lam, discipline, v)
        slo_steal = _breaking_steal(svc, c, qs, ts, lam, discipline, v)
        tick()
    if loss is not None and base > 0:
        loss_steal = _breaking_steal(svc, c, qs, ts, (1.0 - loss) * base, discipline, v)
        tick()
    found = [x for x in (slo_steal, loss_steal) if x is not None]
    res = dict(table=table, ceiling_qps=base, slo_steal=slo_steal, loss_steal=loss_steal,
               move_steal=min(found) if found else None, arrival_rate=lam, max_ceiling_loss=loss, steal_period=v,
               servers=c,
               discipline=discipline, slo={float(q): float(t) for q, t in zip(qs, ts)})
    return StealWhatIf(**res, explanation=_explain(res, svc))


def _add_percentiles(table: pd.DataFrame, svc: Service, s: np.ndarray, c: int, qs: np.ndarray, lam: float,
                     discipline: str, period: float = 0.0) -> None:
    """The SLO percentiles at ``lam`` for every steal level, as ``pQ_s`` columns (inf: unstable)."""
    from .. import fcfs, ps

    mod = ps if discipline == "ps" else fcfs
    slowed = _slowed(svc, (1.0 / (1.0 - s))[:, None], period)
    quant = np.asarray(mod.response_quantile(qs[None, :], lam, slowed, c), dtype=float).reshape(s.size, qs.size)
    for i, q in enumerate(qs):
        table[f"{_fmt_q(q)}_s"] = quant[:, i]


def _explain(r: dict, svc: Service) -> str:
    t, c = r["table"], r["servers"]
    slo_text = ", ".join(f"{_fmt_q(q)} <= {_fmt_time(x)}" for q, x in r["slo"].items())
    text = (f"With {_describe_service(svc)} on {c} core{'s' if c > 1 else ''} under "
            f"{_DISCIPLINE_TEXT[r['discipline']]} and the SLO {slo_text}, a quiet host holds "
            f"{_fmt_rate(r['ceiling_qps'])}. Steal is lost CPU: at {100 * t.index[-1]:.3g} % steal the capacity "
            f"falls to {_fmt_rate(t['capacity_qps'].iloc[-1])} and the SLO ceiling to "
            f"{_fmt_rate(t['ceiling_qps'].iloc[-1])} ({100 * t['ceiling_loss'].iloc[-1]:.3g} % lost: more than the "
            "steal itself, because the same latency target is tighter for a slower CPU).")
    if r["slo_steal"] is not None:
        lam, s1 = r["arrival_rate"], r["slo_steal"]
        text += (f" At today's {_fmt_rate(lam)} the SLO is already broken without steal." if s1 == 0 else
                 f" At today's {_fmt_rate(lam)} the SLO breaks at {100 * s1:.3g} % steal.")
    if r["loss_steal"] is not None:
        text += (f" The ceiling has lost {100 * r['max_ceiling_loss']:.3g} % at {100 * r['loss_steal']:.3g} % "
                 "steal.")
    if r["move_steal"] == 0:
        text += (" Moving host cannot fix it: the SLO is broken on a quiet host too, so the service needs more "
                 "cores or cheaper requests first.")
    elif r["move_steal"] is not None:
        text += (f" Above {100 * r['move_steal']:.3g} % steal (watch the %st column of top or vmstat, per vCPU), "
                 "moving to a quieter host pays. This assumes steady, finely interleaved steal; steal in long "
                 "bursts hurts the tail more.")
    return text
