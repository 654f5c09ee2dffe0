"""Per-machine and cluster-wide rate limits from the timeout-safe rate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import check_positive, check_quantile, check_servers
from .._result import Result
from ..distributions import Service, as_service
from ._text import _DISCIPLINE_TEXT, _describe_service, _fmt_rate, _fmt_time
from .timeouts import timeout_safe_rate

__all__ = ["RateLimits", "rate_limits"]

ArrayLike = Any


@dataclass(frozen=True, repr=False)
class RateLimits(Result):
    """Result of :func:`rate_limits`.

    Attributes
    ----------
    machine_limit : float
        Per-machine limit to configure, requests/s: ``(1 - safety_margin) x machine_safe_qps``.
    cluster_limit : float
        Cluster-wide limit, requests/s: ``machines x machine_limit``.
    cluster_limit_n1 : float
        ``(machines - 1) x machine_limit``: what the machines left after one failure can take;
        a cluster limit at this value keeps the per-machine limits from rejecting when a
        machine is down.
    machine_safe_qps : float
        Timeout-safe rate of one machine (:func:`timeout_safe_rate`), requests/s.
    table : pandas.DataFrame
        With ``peak_qps``: one row per scenario (all machines up / one down, with and without
        the limits): ``offered_qps``, ``admitted_qps``, ``rejected_fraction``,
        ``machine_qps``, ``utilization``, ``p99_s``, ``timeout_fraction`` (of the admitted
        requests).  Without ``peak_qps``: empty.
    explanation : str
    """

    machine_limit: float
    cluster_limit: float
    cluster_limit_n1: float
    machine_safe_qps: float
    machine_capacity_qps: float
    safety_margin: float
    machines: int
    servers_per_machine: int
    timeout: float
    max_timeout_fraction: float
    peak_qps: float | None
    table: pd.DataFrame
    discipline: str
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("machine_limit", "cluster_limit", "machine_safe_qps", "machines")

    def to_frame(self) -> pd.DataFrame:
        """The scenario table at ``peak_qps`` (one row per scenario); without a peak, one row of
        the limits themselves."""
        if len(self.table):
            return self.table.copy()
        return pd.DataFrame([{name: getattr(self, name) for name in self._fields()
                              if name not in ("table", "explanation")}])


def rate_limits(service: Service | ArrayLike, servers_per_machine: int, machines: int, timeout: float,
                max_timeout_fraction: float = 1e-3, safety_margin: float = 0.2, peak_qps: float | None = None,
                discipline: str = "ps") -> RateLimits:
    """Per-machine and cluster-wide rate limits, and what they do to traffic at a peak.

    Parameters
    ----------
    service : Service or float
        CPU time per request, seconds (scalar parameters).
    servers_per_machine : int
        Cores (worker processes) per machine, modelled as one queue per machine.
    machines : int
        Machines in the cluster.
    timeout : float
        Client timeout, seconds.
    max_timeout_fraction : float, optional
        Largest acceptable share of requests slower than the timeout (default 1e-3).
    safety_margin : float, optional
        Fraction in [0, 1) kept free below the timeout-safe rate (default 0.2: limit at 80 %):
        the model's rate assumes Poisson traffic and a known CPU cost per request.
    peak_qps : float, optional
        A peak to evaluate, requests/s over the cluster.
    discipline : {"ps", "fcfs"}, optional

    Returns
    -------
    RateLimits

    Notes
    -----
    The seed article 001 (Ctrip, section 3.2; ``data/timeout_rules.toml``, rule
    ``rate_limit_per_machine_and_cluster``) says to measure the maximum traffic the
    application can carry and to limit on two levels, per machine (a surge must not crash
    one machine) and per cluster; it gives no values.  Here the "maximum traffic" is the
    timeout-safe rate ``r`` of one machine (at most ``max_timeout_fraction`` of requests
    exceed ``timeout``), the machine limit is ``(1 - margin) r`` and the cluster limit is
    ``machines`` times that.

    At a peak ``P`` the balancer spreads traffic evenly, so each machine is offered
    ``P / m`` (``m`` machines up) and admits ``min(P / m, limit)``; the rest is rejected at
    once (a fast 429/503, which a client can retry elsewhere, instead of a slow timeout).
    The admitted stream is treated as Poisson at the admitted rate: a limiter clips the
    bursts, so the real admitted stream is smoother and the p99 and timeout share shown are
    upper estimates.  Without limits, a machine offered more than its capacity has an
    unbounded queue: every request eventually times out (timeout share 1).

    References
    ----------
    Ctrip tech blog, "10 effective ways to reduce client timeouts" (2023), section 3.2.

    Examples
    --------
    25 ms exponential requests, one FCFS core per machine, 4 machines, 1 s timeout, 0.1 %:
    the safe rate is ``40 - ln(1000) = 33.09`` QPS per machine, limit 80 % of it:

    >>> from capacity.plan import rate_limits
    >>> r = rate_limits(0.025, 1, 4, 1.0, 1e-3, 0.2, peak_qps=150.0, discipline="fcfs")
    >>> round(r.machine_limit, 3), round(r.cluster_limit, 2), round(r.cluster_limit_n1, 2)
    (26.474, 105.9, 79.42)
    >>> round(float(r.table.loc["all up, limited", "rejected_fraction"]), 4)
    0.294
    """
    from .. import fcfs, ps

    svc = as_service(service)
    if np.ndim(svc.mean):
        raise ValueError("service must have scalar parameters here")
    spm = int(check_servers(servers_per_machine, "servers_per_machine"))
    m = int(check_servers(machines, "machines"))
    to = float(check_positive(timeout, "timeout"))
    frac = float(check_quantile(max_timeout_fraction, "max_timeout_fraction"))
    margin = float(safety_margin)
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"safety_margin must be in [0, 1), got {safety_margin!r}")
    peak = None if peak_qps is None else float(check_positive(peak_qps, "peak_qps"))
    mod = ps if discipline == "ps" else fcfs
    safe = timeout_safe_rate(svc, spm, to, frac, discipline=discipline)
    r = float(safe.qps)
    cap = float(safe.capacity_qps)
    limit = (1.0 - margin) * r
    rows = []
    if peak is not None:
        for label, up, limited in (("all up, limited", m, True), ("one down, limited", m - 1, True),
                                   ("all up, no limit", m, False), ("one down, no limit", m - 1, False)):
            if up == 0:
                rows.append(dict(scenario=label, machines_up=0, offered_qps=peak, admitted_qps=0.0,
                                 rejected_fraction=1.0, machine_qps=np.nan, utilization=np.nan, p99_s=np.inf,
                                 timeout_fraction=1.0))
                continue
            per = peak / up
            admitted_per = min(per, limit) if limited else per
            util = admitted_per / cap
            if util < 1.0:
                p99 = float(mod.response_quantile(0.99, admitted_per, svc, spm))
                tf = float(mod.response_sf(to, admitted_per, svc, spm))
            else:
                p99, tf = np.inf, 1.0
            rows.append(dict(scenario=label, machines_up=up, offered_qps=peak, admitted_qps=admitted_per * up,
                             rejected_fraction=1.0 - admitted_per * up / peak, machine_qps=admitted_per,
                             utilization=util, p99_s=p99, timeout_fraction=tf))
    table = pd.DataFrame(rows).set_index("scenario") if rows else pd.DataFrame()
    res = RateLimits(machine_limit=limit, cluster_limit=m * limit, cluster_limit_n1=(m - 1) * limit,
                     machine_safe_qps=r, machine_capacity_qps=cap, safety_margin=margin, machines=m,
                     servers_per_machine=spm, timeout=to, max_timeout_fraction=frac, peak_qps=peak, table=table,
                     discipline=discipline, explanation="")
    # The paragraph reads the result's own fields; a frozen result gets it once, here.
    object.__setattr__(res, "explanation", _explain(res, svc))
    return res


def _explain(r: RateLimits, svc: Service) -> str:
    text = (f"One machine ({r.servers_per_machine} core{'s' if r.servers_per_machine > 1 else ''}, "
            f"{_describe_service(svc)}, {_DISCIPLINE_TEXT[r.discipline]}) keeps at most "
            f"{100 * r.max_timeout_fraction:.3g} % of requests over the {_fmt_time(r.timeout)} timeout up to "
            f"{_fmt_rate(r.machine_safe_qps)} (capacity {_fmt_rate(r.machine_capacity_qps)}). With a "
            f"{100 * r.safety_margin:.3g} % safety margin: limit each machine to {_fmt_rate(r.machine_limit)} and "
            f"the cluster of {r.machines} to {_fmt_rate(r.cluster_limit)}"
            + (f" ({_fmt_rate(r.cluster_limit_n1)} is what {r.machines - 1} machines take if one fails)"
               if r.machines > 1 else "") + ".")
    if r.peak_qps is not None and len(r.table):
        t = r.table
        a, d = t.loc["all up, limited"], t.loc["one down, limited"]
        text += (f" At a peak of {_fmt_rate(r.peak_qps)}: {_fmt_rate(a['admitted_qps'])} admitted, "
                 f"{100 * a['rejected_fraction']:.3g} % rejected at once, the admitted p99 is "
                 f"{_fmt_time(a['p99_s'])} and {100 * a['timeout_fraction']:.3g} % of them time out.")
        if r.machines > 1:
            text += (f" With one machine down: {_fmt_rate(d['admitted_qps'])} admitted, "
                     f"{100 * d['rejected_fraction']:.3g} % rejected, p99 {_fmt_time(d['p99_s'])}.")
        nl = t.loc["one down, no limit" if r.machines > 1 else "all up, no limit"]
        if nl["utilization"] >= 1 or not np.isfinite(nl["p99_s"]):
            text += (" Without the limits the machines would be overloaded: the queue grows without bound "
                     "and nearly every request times out, not just the excess.")
        else:
            text += (f" Without the limits the worst case ({'one machine down' if r.machines > 1 else 'all up'}) "
                     f"has p99 {_fmt_time(nl['p99_s'])} and {100 * nl['timeout_fraction']:.3g} % timeouts.")
    return text
