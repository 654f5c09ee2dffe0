"""The planners' explanations: one paragraph of plain text with the numbers, per answer.

Shared phrases (the discipline in words, "N servers", a service in words) and the writers of the
single-queue planners' ``explanation`` fields (:mod:`capacity.plan.ceiling`,
:mod:`~capacity.plan.servers`, :mod:`~capacity.plan.timeouts`).  Numbers are formatted by
:mod:`capacity.units`, as the CLI and the notebooks format them.
"""
from __future__ import annotations

import numpy as np

from ..distributions import Service
from ..units import format_quantile as _fmt_q
from ..units import format_rate as _fmt_rate
from ..units import format_time as _fmt_time

_DISCIPLINE_TEXT = {"ps": "processor sharing", "fcfs": "FCFS", "rr": "event-loop round robin"}

_PS_WARNING = ("The rule protects only below saturation: under processor sharing (an event loop) the "
               "response-time tail is heavier than under FCFS at the same mean, and in overload (arrival rate "
               ">= capacity) every request's latency grows without bound, so any timeout is eventually hit by "
               "nearly all requests; pair it with a rate limit at the timeout-safe rate.")


def _servers_text(servers) -> str:
    return f"{servers} server{'s' if servers != 1 else ''}" if np.ndim(servers) == 0 else "each server count"


def _describe_service(service: Service) -> str:
    mean = np.asarray(service.mean)
    if mean.ndim:
        return f"{service.family} service"
    return f"{_fmt_time(float(mean))} of CPU per request ({service.family}, scv {float(service.scv):.2g})"


# ---------------------------------------------------------------------------------------------
# Ceiling


def _explain_ceiling(res: dict, service: Service, reason: np.ndarray, qs, ts, first_bad) -> str:
    """The paragraph of a :class:`~capacity.plan.Ceiling` (``res``: its fields)."""
    if np.ndim(res["qps"]):
        return _explain_ceilings(res)
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


def _explain_ceilings(res: dict) -> str:
    """The paragraph of a broadcast :class:`~capacity.plan.Ceiling` (one ceiling per configuration)."""
    qps = np.asarray(res["qps"])
    lo, hi = float(qps.min()), float(qps.max())
    text = (f"{qps.size} configurations under {_DISCIPLINE_TEXT[res['discipline']]}: SLO ceilings from "
            f"{_fmt_rate(lo)} to {_fmt_rate(hi)}")
    servers = np.asarray(res["servers"])
    if qps.ndim == 1 and servers.shape == qps.shape and qps.size <= 12:
        binding = np.broadcast_to(res["binding"], qps.shape)
        utilization = np.broadcast_to(res["utilization"], qps.shape)
        text += ": " + "; ".join(
            f"{int(c)} server{'s' if c != 1 else ''} {_fmt_rate(float(x))} ({100 * float(u):.1f} % utilisation, "
            f"{_fmt_q(float(b))} binds)" if x > 0 else f"{int(c)} server{'s' if c != 1 else ''} 0 QPS (SLO "
            "unreachable)" for c, x, u, b in zip(servers, qps, utilization, binding))
        per_server = qps / servers
        if qps.size > 1 and np.all(np.diff(servers) > 0) and np.all(np.diff(per_server) > 0) and lo > 0:
            text += (". Per server the ceiling rises with the pool size: one shared queue absorbs bursts "
                     "better than separate small ones")
    return text + "."


# ---------------------------------------------------------------------------------------------
# Servers needed


def _explain_servers(res: dict, service: Service, lam, c_pool, delay: float) -> str:
    """The paragraph of a :class:`~capacity.plan.ServersNeeded` (``res``: its fields)."""
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
# Timeouts


def _explain_timeout_safe(ceiling, service: Service, timeout: float, fraction: float, delay: float) -> str:
    """The paragraph of a :class:`~capacity.plan.TimeoutSafeRate`, from the :class:`Ceiling` of the
    SLO ``{1 - fraction: timeout}`` it was solved as."""
    if np.ndim(ceiling.qps):
        return ceiling.explanation
    where = (f"With {_describe_service(service)} on {_servers_text(ceiling.servers)} under "
             f"{_DISCIPLINE_TEXT[ceiling.discipline]}")
    if not ceiling.feasible:
        return (f"{where}, more than {100 * fraction:.3g} % of requests exceed the {_fmt_time(timeout)} timeout "
                "even at zero load" +
                (f" (the {_fmt_time(delay)} delay alone reaches it)" if delay >= timeout else "") +
                ": no request rate is timeout-safe; raise the timeout or cut the CPU per request.")
    return (f"{where}, at most {100 * fraction:.3g} % of requests exceed a {_fmt_time(timeout)} timeout up to "
            f"{_fmt_rate(ceiling.qps)} ({100 * ceiling.utilization:.1f} % of the {_fmt_rate(ceiling.capacity_qps)} "
            "CPU capacity). Above it timeouts rise quickly, and past capacity the queue grows without bound so "
            "nearly every request times out. This is a steady-state limit; short bursts above it are tolerated "
            "only until the backlog reaches the timeout.")


def _burst_sentence(burst_qps: float, burst_seconds: float) -> str:
    """How long a burst may last, as :func:`~capacity.plan.timeout_safe_rate` appends it."""
    if np.isinf(burst_seconds):
        return (f" A burst at {_fmt_rate(burst_qps)} is within capacity: it can last indefinitely in the fluid "
                "view, though above the timeout-safe rate more than the allowed share times out.")
    return (f" A burst at {_fmt_rate(burst_qps)} from an idle server can last about {_fmt_time(burst_seconds)} "
            "before a request of mean size no longer finishes within the timeout (fluid overload model).")


def _explain_burst(res: dict, service: Service) -> str:
    """The paragraph of a :class:`~capacity.plan.BurstTolerance` (``res``: its fields)."""
    seconds = np.asarray(res["burst_seconds"])
    if seconds.ndim:
        finite = seconds[np.isfinite(seconds)]
        text = f"{seconds.size} configurations under {_DISCIPLINE_TEXT[res['discipline']]}: "
        if finite.size == 0:
            return text + "every burst is within capacity and can last indefinitely (fluid view)."
        text += f"bursts may last from {_fmt_time(float(finite.min()))} to {_fmt_time(float(finite.max()))}"
        if finite.size < seconds.size:
            text += f" ({seconds.size - finite.size} within capacity: indefinitely)"
        return text + " before a request of mean size misses the timeout (fluid overload model)."
    burst, cap, timeout = float(res["burst_qps"]), float(res["capacity_qps"]), float(res["timeout"])
    head = (f"With {_describe_service(service)} on {_servers_text(res['servers'])} under "
            f"{_DISCIPLINE_TEXT[res['discipline']]} (capacity {_fmt_rate(cap)}) and a {_fmt_time(timeout)} timeout")
    if res["delay"] > 0:
        head += f" of which {_fmt_time(res['delay'])} is non-CPU delay"
    if np.isinf(seconds):
        return (f"{head}: a burst at {_fmt_rate(burst)} is within capacity, so the fluid backlog does not grow and "
                "it can last indefinitely; above the timeout-safe rate more than the allowed share still times out.")
    if seconds == 0:
        return (f"{head}: a request of mean size misses the timeout even on an idle server, so no burst at "
                f"{_fmt_rate(burst)} is tolerated.")
    return (f"{head}: a burst at {_fmt_rate(burst)} ({burst / cap:.2g} x capacity) from an idle server can last "
            f"about {_fmt_time(float(seconds))} before a request of mean size no longer finishes within the "
            "timeout (fluid overload model; larger requests time out earlier, and a busy server has less room).")


def _explain_advice(kind: str, p999: float, multiplier: float, by_rule: float, limit, timeout: float, rule: str,
                    fraction, model: str) -> str:
    """The paragraph of a :class:`~capacity.plan.TimeoutAdvice`."""
    text = (f"For a {kind} call with server P99.9 {_fmt_time(p999)}, the rule min({multiplier:g} x P99.9, user "
            f"limit) gives {_fmt_time(by_rule)}")
    if limit is not None:
        text += f" against a user limit of {_fmt_time(limit)}"
    text += f": set the timeout to {_fmt_time(timeout)} ({rule} decides)."
    if limit is not None and limit < p999:
        text += (" The user limit is below the P99.9 itself, so more than 0.1 % of calls will time out: the "
                 "service is too slow for what users accept.")
    if fraction is not None:
        text += f" The model ({model}) predicts {100 * fraction:.3g} % of requests slower than that."
    return text + " " + _PS_WARNING
