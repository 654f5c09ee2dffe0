"""The planning subcommands: ``ceiling``, ``servers``, ``timeout``, ``scaling``, ``gc``, ``threads``,
``handoff``, ``steal``.

Each is a thin front end to :mod:`capacity.plan` returning ``(data, text)``: the JSON-able
record ``--json`` prints and the table with its explanation printed otherwise.
"""
from __future__ import annotations

import argparse

import numpy as np

from ._common import _jsonable, _ms, _q, _service, _service_text, _stderr_progress, _UsageError, _wrap


def _cmd_ceiling(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    servers = np.array(args.servers)
    res = plan.qps_ceiling(service, servers if servers.size > 1 else int(servers[0]), args.slo,
                           discipline=args.discipline, delay=args.delay, slo_on=args.slo_on)
    qps = np.atleast_1d(res.qps)
    cap = np.atleast_1d(res.capacity_qps)
    binding = np.atleast_1d(res.binding)
    rows = []
    for i, c in enumerate(servers):
        rows.append({"servers": int(c), "qps": float(qps[i]), "capacity_qps": float(cap[i]),
                     "utilization": float(qps[i] / cap[i]), "binding": _q(binding[i]),
                     "per_slo_qps": {_q(q): float(np.atleast_1d(r)[i]) for q, r in res.rates.items()}})
    data = {"command": "ceiling", "service": {"mean_s": args.cpu, "scv": float(service.scv),
                                              "family": service.family},
            "discipline": args.discipline, "slo": {_q(q): t for q, t in res.slo.items()}, "slo_on": args.slo_on,
            "delay_s": args.delay, "rows": rows, "explanation": res.explanation, "result": res.to_dict()}
    what = "wait" if args.slo_on == "wait" else ""
    slo_cols = [f"{_q(q)}{' wait' if what else ''}<={_ms(t)}" for q, t in res.slo.items()]
    lines = [f"QPS ceiling: {_service_text(args, service)}" + (f", +{_ms(args.delay)} delay" if args.delay else ""),
             "",
             f"{'servers':>8}{'ceiling QPS':>14}{'util':>8}{'capacity':>12}  {'binds':<8}"
             + "".join(f"{c:>20}" for c in slo_cols)]
    for r in rows:
        lines.append(f"{r['servers']:>8}{r['qps']:>14.4g}{100 * r['utilization']:>7.1f}%{r['capacity_qps']:>12.4g}  "
                     f"{r['binding']:<8}" + "".join(f"{v:>20.4g}" for v in r["per_slo_qps"].values()))
    lines += ["", "(per-percentile columns: the QPS at which that percentile alone reaches its target)", "",
              _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_servers(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    qps = np.array(args.qps)
    if args.redundancy and args.per_machine is None:
        raise _UsageError("argument --redundancy: needs --per-machine (redundancy counts machines)")
    res = plan.servers_needed(qps if qps.size > 1 else float(qps[0]), service, args.slo,
                              discipline=args.discipline, redundancy=args.redundancy,
                              servers_per_machine=args.per_machine, delay=args.delay, slo_on=args.slo_on)
    n = qps.size
    servers = np.broadcast_to(res.servers, (n,))
    util = np.broadcast_to(res.utilization, (n,))
    binding = np.broadcast_to(res.binding, (n,))
    machines = None if res.machines is None else np.broadcast_to(res.machines, (n,))
    rows = []
    for i in range(n):
        row = {"qps": float(qps[i]), "servers": int(servers[i]), "utilization": float(util[i]),
               "binding": _q(binding[i]),
               "tail": {_q(q): float(np.broadcast_to(v, (n,))[i]) for q, v in res.tail.items()}}
        if machines is not None:
            row["machines"] = int(machines[i])
        rows.append(row)
    data = {"command": "servers", "service": {"mean_s": args.cpu, "scv": float(service.scv),
                                              "family": service.family},
            "discipline": args.discipline, "slo": {_q(q): t for q, t in res.slo.items()}, "slo_on": args.slo_on,
            "delay_s": args.delay, "per_machine": args.per_machine, "redundancy": args.redundancy,
            "rows": rows, "explanation": res.explanation, "result": res.to_dict()}
    lines = [f"Servers needed: {_service_text(args, service)}; SLO "
             + ", ".join(f"{_q(q)}{' wait' if args.slo_on == 'wait' else ''} <= {_ms(t)}" for q, t in res.slo.items()),
             "",
             f"{'QPS':>10}{'servers':>9}{'util':>8}" + (f"{'machines':>10}" if machines is not None else "")
             + f"  {'binds':<8}{'share over target':>18}"]
    for r in rows:
        b = r["binding"]
        lines.append(f"{r['qps']:>10.4g}{r['servers']:>9}{100 * r['utilization']:>7.1f}%"
                     + (f"{r['machines']:>10}" if machines is not None else "")
                     + f"  {b:<8}{100 * r['tail'][b]:>17.3g}%")
    if machines is not None:
        lines.append(f"\n(servers = machines x {args.per_machine} cores, N+{args.redundancy})")
    lines += ["", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_timeout(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    if args.p999 is None and args.timeout is None:
        raise _UsageError("give --timeout (timeout-safe QPS) or --p999 (recommended timeout)")
    if args.p999 is not None:
        if args.qps is not None and args.cpu is None:
            raise _UsageError("argument --qps: needs --cpu (a model of the server)")
        model = args.cpu is not None and args.qps is not None
        service = _service(args) if args.cpu is not None else None
        adv = plan.recommend_timeout(args.p999, core=not args.non_core, user_limit=args.user_limit,
                                     service=service if model else None,
                                     arrival_rate=args.qps if model else None,
                                     servers=args.servers, discipline=args.discipline)
        data = {"command": "timeout", "mode": "recommend", "p999_s": adv.p999, "core": adv.core,
                "multiplier": adv.multiplier, "user_limit_s": adv.user_limit, "timeout_s": adv.timeout,
                "rule": adv.rule, "model_timeout_fraction": adv.timeout_fraction, "warning": adv.warning,
                "explanation": adv.explanation, "result": adv.to_dict()}
        lines = ["Recommended client timeout (rule: min(3 x P99.9, user limit) core, 1.5 x non-core)", "",
                 f"{'P99.9':>12}{'call':>10}{'rule value':>12}{'user limit':>12}{'timeout':>10}  decided by"]
        lines.append(f"{_ms(adv.p999):>12}{'core' if adv.core else 'non-core':>10}"
                     f"{_ms(adv.multiplier * adv.p999):>12}{_ms(adv.user_limit) if adv.user_limit else '-':>12}"
                     f"{_ms(adv.timeout):>10}  {adv.rule}")
        if adv.timeout_fraction is not None:
            lines.append(f"model: {100 * adv.timeout_fraction:.3g} % of requests slower than {_ms(adv.timeout)} "
                         f"at {args.qps:g} QPS")
        lines += ["", _wrap(adv.explanation)]
        return data, "\n".join(lines)
    if args.cpu is None:
        raise _UsageError("argument --cpu: required with --timeout (a model of the server)")
    service = _service(args)
    res = plan.timeout_safe_rate(service, args.servers, args.timeout, args.max_fraction,
                                 discipline=args.discipline, delay=args.delay, burst_qps=args.burst_qps)
    data = {"command": "timeout", "mode": "safe_rate", "service": {"mean_s": args.cpu, "scv": float(service.scv),
                                                                   "family": service.family},
            "discipline": args.discipline, "servers": args.servers, "timeout_s": args.timeout,
            "max_timeout_fraction": args.max_fraction, "delay_s": args.delay, "qps": res.qps,
            "capacity_qps": res.capacity_qps, "utilization": res.utilization, "burst_qps": res.burst_qps,
            "burst_seconds": res.burst_seconds, "explanation": res.explanation, "result": res.to_dict()}
    burst = res.burst_qps is not None
    lines = [f"Timeout-safe rate: {_service_text(args, service)}, {args.servers} "
             f"server{'s' if args.servers != 1 else ''}", "",
             f"{'timeout':>10}{'max share':>11}{'safe QPS':>11}{'util':>8}{'capacity':>11}"
             + (f"{'burst QPS':>11}{'may last':>10}" if burst else ""),
             f"{_ms(args.timeout):>10}{100 * args.max_fraction:>10.3g}%{res.qps:>11.4g}{100 * res.utilization:>7.1f}%"
             f"{res.capacity_qps:>11.4g}" + (f"{res.burst_qps:>11.4g}{_ms(res.burst_seconds):>10}" if burst else ""),
             "", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_scaling(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    res = plan.compare_scaling(args.qps, service, args.slo, options=args.option, cores=args.cores,
                               cores_per_machine=args.cores_per_machine, cost_per_machine=args.cost_per_machine,
                               cost_per_core=args.cost_per_core, memory_per_process=args.memory_per_process,
                               machine_memory=args.machine_memory, discipline=args.discipline)
    t = res.table
    qcols = [f"{_q(q)}_s" for q in res.slo]
    rows = []
    for label, r in t.iterrows():
        row = {"option": label}
        row.update({k: _jsonable(v) for k, v in r.items()})
        rows.append(row)
    data = {"command": "scaling", "peak_qps": args.qps,
            "service": {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family},
            "discipline": args.discipline, "slo": {_q(q): v for q, v in res.slo.items()}, "best": res.best,
            "rows": rows, "explanation": res.explanation, "result": res.to_dict()}
    width = max(len("option"), *(len(str(x)) for x in t.index))
    head = (f"{'option':<{width}}{'cores':>6}{'util':>7}" + "".join(f"{c[:-2]:>9}" for c in qcols)
            + f"{'SLO':>5}{'ceiling':>9}{'headroom':>9}{'N+1':>5}" + "".join(f"{'N+1 ' + c[:-2]:>11}" for c in qcols[-1:])
            + f"{'cost':>9}" + (f"{'mem ok':>7}" if args.memory_per_process and args.machine_memory else ""))
    lines = [f"Cluster vs machine at {args.qps:g} QPS: {_service_text(args, service)}; SLO "
             + ", ".join(f"{_q(q)} <= {_ms(v)}" for q, v in res.slo.items()), "", head]
    for label, r in t.iterrows():
        lines.append(f"{label:<{width}}{int(r['cores']):>6}{100 * r['utilization']:>6.1f}%"
                     + "".join(f"{_ms(r[c]):>9}" for c in qcols)
                     + f"{'yes' if r['meets_slo'] else 'NO':>5}{r['ceiling_qps']:>9.4g}{r['headroom']:>8.2f}x"
                     + f"{'yes' if r['n1_meets_slo'] else 'NO':>5}"
                     + "".join(f"{_ms(r['n1_' + c]):>11}" for c in qcols[-1:])
                     + f"{r['cost']:>9.4g}"
                     + (f"{'yes' if r['fits_memory'] else 'NO':>7}" if args.memory_per_process and args.machine_memory
                        else ""))
    lines += ["", "(ceiling: QPS at which the SLO breaks; headroom: ceiling / peak; N+1: SLO with one machine down)",
              "", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_gc(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    res = plan.gc_whatif(service, args.gc_share, args.pause, args.pause_rate, args.new_gc_share, args.new_pause,
                         args.new_pause_rate, servers=args.servers, slo=args.slo, discipline=args.discipline,
                         processes=args.processes, pause_scv=args.pause_scv, arrival_rate=args.qps,
                         measured_gain=args.measured_gain, progress=_stderr_progress())
    t = res.table
    qcols = [f"{_q(q)}_s" for q in sorted(args.slo)]
    data = {"command": "gc", "service": {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family},
            "discipline": args.discipline, "processes": args.processes, "servers": args.servers,
            "slo": {_q(q): float(v) for q, v in sorted(args.slo.items())},
            "table": {k: {c: _jsonable(v) for c, v in row.items()} for k, row in t.iterrows()},
            "arrival_rate": res.arrival_rate, "predicted_capacity_gain": res.predicted_capacity_gain,
            "predicted_ceiling_gain": res.predicted_ceiling_gain, "measured_gain": res.measured_gain,
            "gap": res.gap, "implied_cpu_share": res.implied_cpu_share, "notes": res.notes,
            "explanation": res.explanation, "result": res.to_dict()}
    lines = [f"GC what-if: {_service_text(args, service)}, {args.processes} process"
             f"{'es' if args.processes > 1 else ''}", "",
             f"{'':<8}{'GC CPU':>8}{'pause':>9}{'pauses/s':>9}{'CPU/req':>9}{'scv':>6}{'capacity':>10}{'ceiling':>10}"
             + "".join(f"{c[:-2] + ' @' + format(res.arrival_rate, '.4g') + ' QPS':>16}" for c in qcols)
             + f"{'pause wait':>11}"]
    for label, r in t.iterrows():
        lines.append(f"{label:<8}{100 * r['gc_cpu_share']:>7.3g}%{_ms(r['pause_mean_s']):>9}"
                     f"{r['pause_rate_per_s']:>9.3g}{_ms(r['service_mean_s']):>9}{r['service_scv']:>6.2f}"
                     f"{r['capacity_qps']:>10.4g}{r['ceiling_qps']:>10.4g}"
                     + "".join(f"{_ms(r[c]):>16}" for c in qcols) + f"{_ms(r['pause_delay_s']):>11}")
    lines += ["", f"predicted: capacity {100 * res.predicted_capacity_gain:+.1f} %, SLO ceiling "
                  f"{100 * res.predicted_ceiling_gain:+.1f} %"
              + (f"; measured {100 * res.measured_gain:+.1f} % (gap {100 * res.gap:.1f} points)"
                 if res.measured_gain is not None else ""), "", _wrap(res.explanation)]
    return data, "\n".join(lines)



def _cmd_jvm_gc(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    res = plan.jvm_gc_whatif(service, args.qps, args.pauses, args.pause_time, args.new_pauses, args.new_pause_time,
                             servers=args.servers, slo=args.slo, discipline=args.discipline, window=args.window,
                             timeout=args.timeout, pause_scv=args.pause_scv, resize_pause_count=args.resize_pauses,
                             resize_pause_time=args.resize_pause_time, fixed_heap=args.fixed_heap,
                             processes=args.processes, measured_gain=args.measured_gain,
                             progress=_stderr_progress())
    t = res.table
    qcols = [f"{_q(q)}_s" for q in sorted(args.slo)]
    data = {"command": "jvm-gc", "service": {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family},
            "discipline": args.discipline, "processes": args.processes, "servers": args.servers,
            "window_s": args.window, "timeout_s": args.timeout,
            "table": {k: {c: _jsonable(v) for c, v in row.items()} for k, row in t.iterrows()},
            "arrival_rate": res.arrival_rate, "predicted_capacity_gain": res.predicted_capacity_gain,
            "predicted_ceiling_gain": res.predicted_ceiling_gain, "notes": res.notes,
            "explanation": res.explanation, "result": res.to_dict()}
    lines = [f"JVM GC what-if: {_service_text(args, service)}, {args.servers} core{'s' if args.servers > 1 else ''}"
             f" at {args.qps:.4g} QPS", "",
             f"{'':<8}{'GC CPU':>8}{'pause':>9}{'capacity':>10}{'ceiling':>10}"
             + "".join(f"{c[:-2]:>9}" for c in qcols) + (f"{'timeouts':>10}" if args.timeout else "")]
    for label, r in t.iterrows():
        lines.append(f"{label:<8}{100 * r['gc_cpu_share']:>7.3g}%{_ms(r['pause_mean_s']):>9}"
                     f"{r['capacity_qps']:>10.4g}{r['ceiling_qps']:>10.4g}"
                     + "".join(f"{_ms(r[c]):>9}" for c in qcols)
                     + (f"{100 * r['timeout_fraction']:>9.3g}%" if args.timeout else ""))
    lines += ["", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_threads(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    if args.load is not None and args.cpu_util is None:
        raise _UsageError("argument --load: needs --cpu-util (the load is compared at a utilisation)")
    res = plan.thread_demand(args.qps, args.response, calls=args.calls, call_time=args.call_time)
    data = {"command": "threads", "arrival_rate": args.qps, "mean_response_s": args.response, "calls": args.calls,
            "call_time_s": res.call_time, "mean_number": res.mean_number, "threads_blocking": res.threads_blocking,
            "threads_nonblocking": res.threads_nonblocking, "pool_blocking": res.pool_blocking,
            "pool_nonblocking": res.pool_nonblocking, "explanation": res.explanation, "result": res.to_dict()}
    calls = (f", {args.calls} parallel call{'s' if args.calls != 1 else ''} of {_ms(res.call_time)}" if args.calls
             else "")
    lines = [f"Threads by Little's law: {args.qps:g} QPS, {_ms(args.response)} per request{calls}", "",
             f"{'IO':<14}{'mean threads':>14}{'p99 threads':>13}",
             f"{'blocking':<14}{res.threads_blocking:>14.4g}{res.pool_blocking:>13}",
             f"{'non-blocking':<14}{res.threads_nonblocking:>14.4g}{res.pool_nonblocking:>13}",
             "", _wrap(res.explanation)]
    if args.cpu_util is not None:
        load = plan.cpu_load(args.cpu_util, args.servers, load=args.load)
        data["cpu_load"] = load.to_dict()
        lines += ["", f"CPU load at {100 * args.cpu_util:.3g} % of {args.servers} core{'s' if args.servers > 1 else ''}: "
                      f"model {load.load:.3g} runnable threads ({load.running:.3g} running, {load.waiting:.3g} "
                      "waiting)" + (f", measured {args.load:g}" if args.load is not None else ""),
                  "", _wrap(load.explanation)]
    return data, "\n".join(lines)


def _cmd_pool(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    res = plan.thread_pool(args.qps, args.cpu, args.delay, cores=args.cores, threads=args.threads,
                           switch_cost=args.switch_cost, quantum=args.quantum, max_mean_response=args.max_mean)
    t = res.table
    data = {"command": "pool", "arrival_rate": args.qps, "service_s": args.cpu, "delay_s": args.delay,
            "cores": args.cores, "switch_cost_s": args.switch_cost, "quantum_s": args.quantum,
            "max_mean_response_s": args.max_mean,
            "best_threads": res.best_threads, "threads_needed": res.threads_needed,
            "table": _jsonable(t), "explanation": res.explanation}
    shown = t if args.threads is not None or len(t) <= 12 else t.loc[sorted(
        {int(t.index[np.isfinite(t["mean_response_s"])].min()) if np.isfinite(t["mean_response_s"]).any()
         else int(t.index.min()), *(x for x in (res.best_threads, res.threads_needed) if x is not None),
         int(t.index.min()), int(t.index.max()), min(args.cores, int(t.index.max()))})]
    io = f" + {_ms(args.delay)} IO" if args.delay > 0 else ", no IO"
    lines = [f"Thread pool: {args.qps:g} tasks/s, {_ms(args.cpu)} CPU{io}, {args.cores} "
             f"core{'s' if args.cores > 1 else ''}", "",
             f"{'threads':>8}{'mean':>11}{'wait':>11}{'P(wait)':>10}{'CPU':>8}{'switching':>11}"]
    for n, r in shown.iterrows():
        wait = _ms(r["mean_wait_s"]) if r["mean_wait_s"] >= 1e-7 else "0"    # not 1e-20 us
        lines.append(f"{n:>8}{_ms(r['mean_response_s']):>11}{wait:>11}{r['wait_probability']:>10.3g}"
                     f"{100 * r['cpu_utilization']:>7.3g}%{100 * r['switch_share']:>10.2g}%")
    lines += ["", _wrap(res.explanation)]
    if args.slo is not None:
        # The percentile SLO: the pool as M/M/n with the whole holding time (CPU + IO), its cores checked.
        from ..distributions import Service

        sized = plan.pool_size(args.qps, Service.exponential(args.cpu + args.delay), args.slo, service=args.cpu,
                               cores=args.cores, switch_cost=args.switch_cost)
        data["slo"] = {_q(q): float(v) for q, v in sorted(args.slo.items())}
        data["threads_for_slo"] = _jsonable(sized.servers)
        lines += ["", f"threads for {', '.join(f'{_q(q)} <= {_ms(v)}' for q, v in sorted(args.slo.items()))}: "
                      f"{sized.servers}", "", _wrap(sized.explanation)]
    return data, "\n".join(lines)


def _cmd_handoff(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    res = plan.handoff_cost(args.task, args.servers, args.cpu_util, args.burst, switch_cost=args.switch_cost,
                            parallel=args.parallel)
    t = res.table
    qcol = [c for c in t.columns if c.startswith("p")][0]
    data = {"command": "handoff", "task_s": args.task, "servers": args.servers, "utilization": args.cpu_util,
            "burst_s": args.burst, "switch_cost_s": args.switch_cost, "parallel": args.parallel,
            "table": {k: {c: _jsonable(v) for c, v in row.items()} for k, row in t.iterrows()},
            "added_mean_s": res.added_mean, "added_quantile_s": res.added_quantile, "pays": res.pays,
            "break_even_s": res.break_even, "explanation": res.explanation, "result": res.to_dict()}
    lines = [f"Thread-pool hand-off: {args.parallel} x {_ms(args.task)} task, {args.servers} cores at "
             f"{100 * args.cpu_util:.3g} %, bursts {_ms(args.burst)}", "",
             f"{'':<12}{'mean':>10}{qcol[:-2]:>10}{'CPU':>10}"]
    for label, r in t.iterrows():
        lines.append(f"{label:<12}{_ms(r['mean_s']):>10}{_ms(r[qcol]):>10}{_ms(r['cpu_s']):>10}")
    lines += ["", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_steal(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    if args.steal_period > 0 and args.discipline != "fcfs":
        raise _UsageError("argument --steal-period: needs --discipline fcfs (under processor sharing a steal "
                          "period stops every request in flight at once, which a per-request law does not describe)")
    steal = args.steal if args.steal is not None else plan.steal.DEFAULT_STEAL
    res = plan.steal_whatif(service, args.servers, args.slo, steal=steal, arrival_rate=args.qps,
                            discipline=args.discipline, max_ceiling_loss=args.max_loss,
                            steal_period=args.steal_period, progress=_stderr_progress())
    t = res.table
    qcols = [c for c in t.columns if c.startswith("p")]
    data = {"command": "steal", "service": {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family},
            "discipline": args.discipline, "servers": args.servers,
            "slo": {_q(q): float(v) for q, v in sorted(args.slo.items())}, "arrival_rate": args.qps,
            "rows": [{"steal": float(s), **{c: _jsonable(v) for c, v in row.items()}} for s, row in t.iterrows()],
            "ceiling_qps": res.ceiling_qps, "slo_steal": res.slo_steal, "loss_steal": res.loss_steal,
            "move_steal": res.move_steal, "explanation": res.explanation, "result": res.to_dict()}
    lines = [f"CPU steal: {_service_text(args, service)}, {args.servers} core{'s' if args.servers > 1 else ''}", "",
             f"{'steal':>7}{'capacity':>10}{'ceiling':>10}{'lost':>7}"
             + "".join(f"{c[:-2] + ' @' + format(args.qps, 'g') + ' QPS':>18}" for c in qcols)]
    for s, r in t.iterrows():
        lines.append(f"{100 * s:>6.3g}%{r['capacity_qps']:>10.4g}{r['ceiling_qps']:>10.4g}"
                     f"{100 * r['ceiling_loss']:>6.3g}%" + "".join(f"{_ms(r[c]):>18}" for c in qcols))
    if res.move_steal is not None:
        lines += ["", f"move host above {100 * res.move_steal:.3g} % steal"]
    lines += ["", _wrap(res.explanation)]
    return data, "\n".join(lines)
