"""Reading a warm-up transient: its headline numbers, its verdict, its table and the explanations.

The transient itself is :func:`capacity.plan._warmup_model._transient` on a fine grid; this module
turns it into what :class:`capacity.plan.WarmupTransient` reports (see
:func:`capacity.plan.warmup_transient`), and words :func:`capacity.plan.ramp_needed`'s answer.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._checks import check_positive
from ..distributions import Service
from ._text import _DISCIPLINE_TEXT, _describe_service, _fmt_q, _fmt_rate, _fmt_time
from ._warmup_model import _Ceilings, _Law


def _summary(tr: dict, law: _Law, ceil: _Ceilings, timeout: float | None) -> dict:
    """The headline numbers of a transient on its fine grid."""
    t, resp, delay = tr["time"], tr["response"], tr["delay"]
    dt = t[1] - t[0]
    # Within 1e-4 of the target is on it: the ramp is solved on the ceiling's interpolant, the percentiles
    # come from the forward one, and the two agree to ~1e-5.
    over = np.any(resp > ceil.ts[None, :] * (1 + 1e-4), axis=1)
    k = int(np.argmax(resp[:, 0]))
    backlog = np.flatnonzero(delay > 0)
    if backlog.size == 0:
        recovery = math.nan
    else:
        recovery = math.inf if backlog[-1] == t.size - 1 else float(t[backlog[-1] + 1])
    warm = np.flatnonzero(tr["multiplier"] - 1.0 > 0.01 * (law.cold - 1.0))
    out = dict(peak_response={float(q): float(resp[:, i].max()) for i, q in enumerate(ceil.qs)},
               peak_time=float(t[k]), seconds_over_slo=float(np.count_nonzero(over) * dt),
               peak_delay=float(delay.max()), recovery_time=recovery,
               warm_time=0.0 if warm.size == 0 else (math.inf if warm[-1] == t.size - 1 else float(t[warm[-1] + 1])),
               seconds_over_timeout=None, timeout_fraction=None, timed_out=None, timeout_window=None)
    if timeout is not None:
        late = delay >= timeout
        rate = tr["admitted_rate"]
        # FCFS: the fluid's requests that wait the timeout; PS: the share whose size the crowd lets not finish;
        # round robin: the fluid's requests whose k cycles (and slice delays) take it.
        share = late if tr["fluid"] is None else tr["fluid"].late_share(ceil.service, timeout)
        # The share among the requests of the warm-up: until the process is warm and any backlog is gone.
        until = max((v for v in (out["warm_time"], out["recovery_time"]) if math.isfinite(v)), default=t[-1])
        window = t <= max(until, dt)
        out.update(seconds_over_timeout=float(np.count_nonzero(late) * dt),
                   timed_out=float(np.sum(rate * share) * dt), timeout_window=float(max(until, dt)),
                   timeout_fraction=float(np.sum((rate * share)[window]) / max(np.sum(rate[window]), 1e-300)))
    return out


def _verdict(s: dict, warm_utilization: float) -> str:
    if warm_utilization >= 1:
        return "overloaded"
    if s["peak_delay"] > 0:
        return "backlog"
    return "slo_broken" if s["seconds_over_slo"] > 0 else "meets_slo"


def _table(tr: dict, ceil: _Ceilings, horizon: float, bucket: float | None) -> pd.DataFrame:
    step = horizon / 120 if bucket is None else float(check_positive(bucket, "bucket"))
    times = np.arange(0.0, horizon + 1e-9 * horizon, step)[:5000]
    cols = {name: np.interp(times, tr["time"], tr[key]) for name, key in
            (("admitted_rate", "admitted_rate"), ("multiplier", "multiplier"), ("utilization", "utilization"),
             ("ceiling_qps", "ceiling"), ("delay", "delay"))}
    for i, q in enumerate(ceil.qs):
        col = tr["response"][:, i]
        finite = np.isfinite(col)
        cols[f"{_fmt_q(q)}_s"] = np.interp(times, tr["time"][finite], col[finite]) if finite.any() else np.inf
    return pd.DataFrame(cols, index=pd.Index(times, name="time"))


def _law_text(r: dict) -> str:
    if r["warmup_requests"] is not None:
        return f"warms with every {r['warmup_requests']:,.0f} requests it serves"
    return f"warms with a {_fmt_time(r['warmup_time'])} time constant"


def _loop_text(r: dict) -> str:
    """The event loop's options, for round robin."""
    if r["discipline"] != "rr":
        return ""
    gaps = f", {_fmt_time(r['slice_delay'])} apart" if r["slice_delay"] and r["slices"] > 1 else ""
    return f" ({r['slices']} slice{'s' if r['slices'] > 1 else ''}{gaps}, {r['admission']} admission)"


def _explain_transient(r: dict, svc: Service) -> str:
    c, lam = r["servers"], r["arrival_rate"]
    ramp = "all at once" if r["ramp"] == 0 else f"over a {_fmt_time(r['ramp'])} linear ramp"
    text = (f"A fresh process with {_describe_service(svc)} when warm, {r['cold_multiplier']:.3g} x slower when it "
            f"starts, {_law_text(r)}. It gets its {_fmt_rate(lam)} share {ramp}, on {c} core{'s' if c > 1 else ''} "
            f"under {_DISCIPLINE_TEXT[r['discipline']]}{_loop_text(r)}: {100 * r['cold_utilization']:.3g} % "
            f"utilisation cold, "
            f"{100 * r['warm_utilization']:.3g} % warm.")
    slo = ", ".join(f"{_fmt_q(q)} <= {_fmt_time(t)}" for q, t in r["slo"].items())
    peak = ", ".join(f"{_fmt_q(q)} {_fmt_time(v)}" for q, v in r["peak_response"].items())
    v = r["verdict"]
    if v == "overloaded":
        return text + (" Its share is more than the process can do even when warm: it never catches up, whatever "
                       "the ramp; it needs more processes or cheaper requests.")
    if v == "meets_slo":
        text += f" The SLO ({slo}) holds throughout: the percentiles peak at {peak}."
    elif v == "slo_broken":
        text += (f" The process keeps up, but the SLO ({slo}) is broken for {_fmt_time(r['seconds_over_slo'])}: "
                 f"the percentiles peak at {peak} at t = {_fmt_time(r['peak_time'])}.")
    else:
        ps_note = "; under processor sharing the slowest requests take several times it" if r["discipline"] == "ps" \
            else ""
        text += (f" Cold, it cannot keep up: requests queue for up to {_fmt_time(r['peak_delay'])} (fluid backlog"
                 f"{ps_note}) and the SLO ({slo}) is broken for {_fmt_time(r['seconds_over_slo'])}; the backlog is "
                 + (f"gone at t = {_fmt_time(r['recovery_time'])}." if math.isfinite(r["recovery_time"])
                    else "still there at the end of the horizon."))
        if r["timeout"] is not None and r["seconds_over_timeout"]:
            text += (f" For {_fmt_time(r['seconds_over_timeout'])} the queue alone is longer than the "
                     f"{_fmt_time(r['timeout'])} timeout: {r['timed_out']:,.0f} requests time out, "
                     f"{100 * r['timeout_fraction']:.3g} % of those of the first {_fmt_time(r['timeout_window'])}.")
    return text + (f" The process is warm (within 1 %) after {_fmt_time(r['warm_time'])}."
                   if math.isfinite(r["warm_time"]) else "")


def _explain_ramp(r: dict) -> str:
    lam = r["arrival_rate"]
    text = (f"The warm process holds {_fmt_rate(r['ceiling_qps'])} within the SLO, the cold one "
            f"({r['cold_multiplier']:.3g} x slower) {_fmt_rate(r['cold_ceiling_qps'])}; its share is {_fmt_rate(lam)}.")
    if not r["feasible"] and r["ceiling_qps"] == 0:
        return text + (" Even a single request on the idle warm process misses the SLO (its CPU time"
                       + (" plus the slice delays between its awaits" if r["discipline"] == "rr" else "")
                       + "): no ramp or number of processes helps; the requests must get cheaper or the SLO "
                         "looser.")
    if not r["feasible"]:
        return text + (" The share is more than even the warm process holds within the SLO: no ramp helps; the "
                       "service needs more processes (or cheaper requests) first.")
    nr = r["no_ramp"]
    text += {"meets_slo": " With no ramp the SLO holds anyway.",
             "slo_broken": f" With no ramp the SLO is broken for {_fmt_time(nr.seconds_over_slo)} while it warms.",
             "backlog": f" With no ramp the cold process falls behind: requests queue for up to "
                        f"{_fmt_time(nr.peak_delay)} and the SLO is broken for {_fmt_time(nr.seconds_over_slo)}.",
             }.get(nr.verdict, "")
    pre = r["prewarm_requests"] if r["prewarm_requests"] is not None else r["prewarm_time"]
    if pre:
        what = (f"{pre:,.0f} warm-up requests (replayed or synthetic)" if r["prewarm_requests"] is not None
                else f"{_fmt_time(pre)} of start-up warm-up (connections opened, caches loaded) before taking traffic")
        text += (f" The cold service alone breaks the SLO, so no ramp can hold it: pre-warm the process with {what}, "
                 f"down to {r['start_multiplier']:.3g} x,")
        text += " then" if r["ramp"] > 0 else " and it can take its full share at once."
    if r["ramp"] > 0:
        text += (f" {'ramp' if pre else 'A linear ramp of'} {_fmt_time(r['ramp'])} keeps every percentile within its "
                 f"target at every moment (pointwise stationary approximation; a longer ramp or more pre-warming "
                 f"only helps).")
    elif not pre:
        text += " No ramp is needed."
    return text
