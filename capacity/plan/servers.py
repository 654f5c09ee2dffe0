"""How many servers for a load: :func:`servers_needed` (cores, worker processes, machines for N+1).

The fewest servers in one queue that keep every SLO percentile at a given arrival rate, by the
integer search of :mod:`capacity.plan._solve`; Erlang C staffing is its FCFS wait-SLO case.  See
:mod:`capacity.plan`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._checks import check_nonnegative, check_positive, check_servers, scalar_out
from .._result import Result
from ..distributions import Service, as_service
from ._solve import _parse_slo, _smallest_integer, _tail_fractions, _tail_function
from ._text import _explain_servers, _fmt_q, _fmt_time

__all__ = ["ServersNeeded", "servers_needed"]

ArrayLike = Any


@dataclass(frozen=True, repr=False)
class ServersNeeded(Result):
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
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("servers", "utilization", "binding", "machines")


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
    p = _tail_fractions(qs)
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
               tail={float(q): scalar_out(tail[..., i]) for i, q in enumerate(qs)},
               min_stable_servers=scalar_out(min_stable),
               machines=None if machines is None else scalar_out(machines),
               machines_without_redundancy=None if machines0 is None else scalar_out(machines0),
               redundancy=int(redundancy), servers_per_machine=spm,
               slo={float(q): float(t) for q, t in zip(qs, ts)}, discipline=discipline, slo_on=slo_on)
    return ServersNeeded(**res, explanation=_explain_servers(res, service, scalar_out(lam), scalar_out(c), delay_f))
