"""Timing of capacity.fit (run: python benchmarks/bench_fit.py; ``--selection``: the one-model fits
and the model selections only, about a minute).

The fits' docstrings state no machine timings; this script measures them on your machine.

Prints wall times (best of N, ms) of one from_percentiles fit of four percentiles (p50/p90/p99/p99.9):
* FCFS, lognormal CPU (mean, scv free) at one load and at three loads jointly;
* FCFS, lognormal CPU plus a constant delay;
* PS, exponential CPU (mean free);
* PS, lognormal CPU (mean, scv free);
against the issue's target (100 ms per fit), and a naive baseline in the same process:
scipy.optimize.minimize(method="Nelder-Mead") on the same objective with one scalar
forward call per percentile to the public quantile functions (no batching, no Jacobian,
no FCFS table; start at mean = p50, scv = 1).

Also one FCFS fit on two cores (M/G/c); then the cases computed point by point, one forward
evaluation of the queue model each (a fit takes tens of them): PS with gamma and
hyperexponential CPU; and one from_utilization fit of 20,000 windows with 1000 bootstrap
resamples (Huber).

"Fast for every law" (issue 14): lognormal and gamma CPU under PS on 4 and 8 cores (the M/G/c-PS
tables), deterministic CPU under PS and rr (the M/D/1-PS table,
capacity._ps_deterministic_table) and heavy-tailed gamma under PS (scv 8.7 and 30: the PS
table's heavy-tail piece; lognormal scv 40 and its 50-load curve from the same piece), hyperexponential CPU under rr (its PS half
from the phase-type PS table): a whole fit, a forward evaluation and the GC what-if with a timeout,
each against the direct computation (every shipped table disabled) in the same process.

The measured rr body (capacity._rr_body): rr.response_quantile on a fit's batch and a whole rr
fit, against the same with the correction replaced by 1 (the formula alone), in the same process.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
from scipy import optimize

from capacity import Service, fcfs, ps
from capacity.fit import from_percentiles

Q = np.array([0.5, 0.9, 0.99, 0.999])
MEAN, LAM = 0.05, 8.0
TARGET_MS = 100.0


def best_ms(func, repeat=5):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best, out


def naive_fit(obs, lam, forward, family, two_param=True, maxfev=2000):
    """Nelder-Mead on the sum of squared log errors, one scalar forward call per percentile."""
    qs = np.array(list(obs))
    ts = np.array(list(obs.values()))
    count = [0]

    def ssr(x):
        m = float(np.exp(x[0]))
        c = float(np.exp(x[1])) if two_param else 1.0
        if lam * m >= 1:
            return 1e6
        svc = getattr(Service, family)(m, c) if two_param else Service.exponential(m)
        count[0] += 1
        model = np.array([forward(float(q), lam, svc) for q in qs])
        return float(np.sum((np.log(model) - np.log(ts)) ** 2))

    x0 = np.log([ts[0], 1.0]) if two_param else np.log([ts[0]])
    sol = optimize.minimize(ssr, x0, method="Nelder-Mead",
                            options={"xatol": 1e-6, "fatol": 1e-12, "maxfev": maxfev})
    return float(np.exp(sol.x[0])), count[0]


def main(selection_only: bool = False) -> None:
    warnings.simplefilter("ignore")
    svc = Service.lognormal(MEAN, 2.0)
    one = dict(zip(Q.tolist(), fcfs.response_quantile(Q, LAM, svc)))
    three = [{"percentiles": dict(zip(Q.tolist(), fcfs.response_quantile(Q, lam, svc))), "arrival_rate": lam}
             for lam in (6.0, 12.0, 16.0)]
    delayed = {q: t + 0.02 for q, t in one.items()}
    ps_exp = dict(zip(Q.tolist(), ps.response_quantile(Q, LAM, Service.exponential(MEAN))))
    ps_ln = dict(zip(Q.tolist(), ps.response_quantile(Q, LAM, svc)))
    two_cores = dict(zip(Q.tolist(), fcfs.response_quantile(Q, 2 * LAM, svc, 2)))

    fixed = dict(family="lognormal", delay=None)          # one model: no selection
    from_percentiles(one, LAM, discipline="fcfs", **fixed)          # warm-up (imports, caches)
    rows = []
    print(f"one from_percentiles fit (4 percentiles, E[S] = {1e3 * MEAN:g} ms), target {TARGET_MS:g} ms")
    cases = [
        ("FCFS lognormal, 1 load", lambda: from_percentiles(one, LAM, discipline="fcfs", **fixed), 5),
        ("FCFS lognormal, 3 loads", lambda: from_percentiles(three, discipline="fcfs", **fixed), 5),
        ("FCFS lognormal + delay",
         lambda: from_percentiles(delayed, LAM, discipline="fcfs", family="lognormal", delay="constant"), 5),
        ("PS exponential, 1 load",
         lambda: from_percentiles(ps_exp, LAM, discipline="ps", family="exponential", delay=None), 5),
        ("PS lognormal, 1 load", lambda: from_percentiles(ps_ln, LAM, discipline="ps", **fixed), 5),
        ("FCFS lognormal, 2 cores",
         lambda: from_percentiles(two_cores, 2 * LAM, servers=2, discipline="fcfs", **fixed), 5),
    ]
    for name, func, rep in cases:
        ms, res = best_ms(func, rep)
        rows.append((name, ms))
        flag = "ok " if ms <= TARGET_MS else "SLOW"
        print(f"  {flag} {name:28s} {ms:9.1f} ms   E[S] = {1e3 * res.cpu_per_request_:.3f} ms, "
              f"scv = {res.scv_:.3f}, {res.n_function_evaluations_} evaluations")

    print("\nnaive baseline: Nelder-Mead, scalar forward call per percentile (same process)")
    ms_n, (m_n, nfev) = best_ms(lambda: naive_fit(one, LAM, fcfs.response_quantile, "lognormal"), 1)
    print(f"  FCFS lognormal, 1 load      {ms_n:9.1f} ms   E[S] = {1e3 * m_n:.3f} ms, {nfev} evaluations;"
          f" ratio naive / batched = {ms_n / rows[0][1]:.1f}x")
    ms_e, (m_e, nfev_e) = best_ms(lambda: naive_fit(ps_exp, LAM, ps.response_quantile, "exponential",
                                                    two_param=False), 1)
    print(f"  PS exponential, 1 load      {ms_e:9.1f} ms   E[S] = {1e3 * m_e:.3f} ms, {nfev_e} evaluations;"
          f" ratio = {ms_e / rows[3][1]:.1f}x")
    ms_l, (m_l, nfev_l) = best_ms(lambda: naive_fit(ps_ln, LAM, ps.response_quantile, "lognormal"), 1)
    print(f"  PS lognormal, 1 load        {ms_l:9.1f} ms   E[S] = {1e3 * m_l:.3f} ms, "
          f"{nfev_l} evaluations; ratio = {ms_l / rows[4][1]:.1f}x")

    selection(one, three, rows)
    if selection_only:
        return
    grid()
    slow_models()
    distribution_fits()
    histogram_fits()
    utilization_fit()
    every_law()
    rr_body()


def rr_body() -> None:
    """What the measured rr body (capacity._rr_body) costs: rr.response_quantile on a fit's batch
    (250 windows x 16 levels, lognormal CPU, 5 slices; FIFO and idle admission) and a whole rr
    fit with its slices and family chosen, each with the corrections and with them replaced by 1
    (the formula alone) in the same process; the tables are built before timing (a one-off
    ~0.1-0.2 s per family and admission rule)."""
    from unittest import mock

    from capacity import rr

    svc = Service.lognormal(1.0, 1.5)
    q = np.linspace(0.05, 0.999, 16)[None, :]
    lam = np.linspace(0.1, 0.85, 250)[:, None]
    days = [{"percentiles": dict(zip(Q.tolist(), rr.response_quantile(Q, r, Service.lognormal(MEAN, 1.5), slices=5))),
             "arrival_rate": r} for r in (4.0, 9.0, 13.0)]
    rr.response_quantile(q, lam, svc, slices=5)
    rr.response_quantile(q, lam, svc, slices=5, admission="idle")
    print("\nrr with its measured body (capacity._rr_body) against the formula alone")
    for name, func in (("forward, 4000 points", lambda: rr.response_quantile(q, lam, svc, slices=5)),
                       ("forward, 4000 points, idle admission",
                        lambda: rr.response_quantile(q, lam, svc, slices=5, admission="idle")),
                       ("from_percentiles, slices and family chosen",
                        lambda: from_percentiles(days, discipline="rr"))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            now, _ = best_ms(func, 3)
            with mock.patch.object(rr, "_fifo_correction", lambda qb, *a: np.ones(np.shape(qb))), \
                    mock.patch.object(rr, "_idle_correction", lambda qb, *a: np.ones(np.shape(qb))):
                before, _ = best_ms(func, 3)
        print(f"  {name:44s} {now:9.1f} ms, formula alone {before:9.1f} ms, ratio {now / before:5.2f}x")


def every_law() -> None:
    """The laws that were computed point by point: tables against the direct computation."""
    from capacity import _quantile_table as table, rr
    from capacity.fit._model import QueueModel
    from capacity.plan import gc_whatif

    def both(func, repeat):
        ms, out = best_ms(func, repeat)
        table.disabled = True
        try:
            direct, _ = best_ms(func, 1)
        finally:
            table.disabled = False
        return ms, direct, out

    det = Service.deterministic(MEAN)
    lam = 0.4 / MEAN
    ps_obs = [{"percentiles": dict(zip(Q.tolist(), ps.response_quantile(Q, r, det))), "arrival_rate": r}
              for r in (lam, 2 * lam)]
    rr_obs = [{"percentiles": dict(zip(Q.tolist(), rr.response_quantile(Q, r, det, slices=5))), "arrival_rate": r}
              for r in (lam, 2 * lam)]
    heavy = {"mean": np.array([MEAN]), "scv": np.array([8.7])}
    h2 = Service.hyperexponential(MEAN, 4.0)
    h2_obs = [{"percentiles": dict(zip(Q.tolist(), rr.response_quantile(Q, r, h2, slices=5))), "arrival_rate": r}
              for r in (0.5 * lam, lam, 1.5 * lam)]
    # M/G/c-PS (capacity._ps_many_cores) from the tables of capacity._quantile_table.PS_MANY_CORES
    ln4 = Service.lognormal(MEAN, 2.0)
    four = dict(zip(Q.tolist(), ps.response_quantile(Q, 4 * LAM, ln4, servers=4)))
    eight = [{"percentiles": dict(zip(Q.tolist(), ps.response_quantile(Q, r, Service.gamma(MEAN, 0.5), servers=8))),
              "arrival_rate": r} for r in (4 * LAM, 8 * LAM, 12 * LAM)]
    cases = [
        ("PS lognormal fit, 4 cores",
         lambda: from_percentiles(four, 4 * LAM, servers=4, discipline="ps", family="lognormal", delay=None), 3),
        ("PS gamma fit, 4 cores",
         lambda: from_percentiles(four, 4 * LAM, servers=4, discipline="ps", family="gamma", delay=None), 3),
        ("PS gamma fit, 8 cores, 3 loads",
         lambda: from_percentiles(eight, servers=8, discipline="ps", family="gamma", delay=None), 3),
        ("PS deterministic fit, 2 loads",
         lambda: from_percentiles(ps_obs, discipline="ps", family="deterministic", delay=None), 3),
        ("rr deterministic fit, 2 loads",
         lambda: from_percentiles(rr_obs, discipline="rr", slices=5, family="deterministic", delay=None), 3),
        ("rr H2 scv 4 fit, 1 load",    # rr's PS half from the phase-type PS table (rr._ps_quantile)
         lambda: from_percentiles([h2_obs[1]], discipline="rr", slices=5, family="hyperexponential", delay=None), 3),
        ("rr H2 scv 4 fit, 3 loads",
         lambda: from_percentiles(h2_obs, discipline="rr", slices=5, family="hyperexponential", delay=None), 3),
        ("PS gamma scv 8.7, 1 evaluation",
         lambda: QueueModel("ps", "gamma").quantiles(heavy, Q, np.full(Q.size, LAM), np.ones(Q.size, int)), 3),
        ("PS gamma scv 30, 1 evaluation",    # the heavy-tail piece to scv 53
         lambda: QueueModel("ps", "gamma").quantiles({"mean": np.array([MEAN]), "scv": np.array([30.0])}, Q,
                                                     np.full(Q.size, LAM), np.ones(Q.size, int)), 3),
        ("PS lognormal scv 40, 1 evaluation",
         lambda: QueueModel("ps", "lognormal").quantiles({"mean": np.array([MEAN]), "scv": np.array([40.0])}, Q,
                                                         np.full(Q.size, LAM), np.ones(Q.size, int)), 3),
        ("PS lognormal scv 40, 50-load p99 curve",
         lambda: ps.response_quantile(0.99, np.linspace(0.5, 19.0, 50), Service.lognormal(MEAN, 40.0)), 1),
        ("PS gamma scv 20, 50-load p99 curve",
         lambda: ps.response_quantile(0.99, np.linspace(0.5, 19.0, 50), Service.gamma(MEAN, 20.0)), 3),
        ("gc_whatif PS, timeout",
         lambda: gc_whatif(Service.gamma(0.01, 1.0), 0.3, 0.24, None, discipline="ps", arrival_rate=80.0,
                           timeout=1.0), 1),
    ]
    print("\nfast for every law: shipped tables vs the direct computation (tables disabled), same process")
    for name, func, rep in cases:
        ms, direct, _ = both(func, rep)
        flag = "ok " if ms <= TARGET_MS else "SLOW"
        print(f"  {flag} {name:32s} {ms:9.1f} ms   direct {direct:9.1f} ms   ratio {direct / ms:6.1f}x")


def selection(one: dict, three: list, rows: list) -> None:
    """from_percentiles with nothing but the data: 8 candidates (10 where rr is tried too), against
    the one-model fit of the same data in this process."""
    from capacity import rr

    svc = Service.lognormal(0.01, 1.0)
    rr_days = [{"percentiles": dict(zip(Q.tolist(), rr.response_quantile(Q, r, svc, slices=5))), "arrival_rate": r,
                "utilization": 0.01 * r} for r in (20.0, 40.0, 60.0)]
    law = Service.lognormal(MEAN, 2.0)
    ps_days = [{"percentiles": dict(zip(Q.tolist(), ps.response_quantile(Q, lam, law))), "arrival_rate": lam}
               for lam in (6.0, 12.0, 16.0)]
    twenty = [{"percentiles": dict(zip(Q.tolist(), fcfs.response_quantile(Q, lam, law))), "arrival_rate": lam}
              for lam in np.linspace(2.0, 18.0, 20)]
    print("\nfrom_percentiles choosing its model (QAIC over the candidates), against one model")
    for name, data, lam, base in (("1 load", one, LAM, rows[0][1]), ("3 loads", three, None, rows[1][1]),
                                  ("3 loads of a PS queue", ps_days, None, None), ("20 loads", twenty, None, None),
                                  ("3 loads of an rr queue", rr_days, None, None)):
        ms, res = best_ms(lambda: from_percentiles(data, lam), 3)
        ratio = "" if base is None else f"; {ms / base:.1f}x the one-model fit"
        print(f"  {name:24s} {ms:9.1f} ms   {len(res.candidates_)} candidates, chose {res.discipline} {res.family}"
              f"{ratio}")


def grid() -> None:
    """The issue's grid: one from_percentiles fit (p50/p90/p99/p99.9 at one load, utilisation
    0.4) for every CPU family x discipline, the model given (no selection), with its peak traced
    memory; the data are the model's own quantiles, so every fit has a known answer.  Near-constant
    CPU (scv 0.03, a fixed-work handler) is its own row for the two-parameter families."""
    import tracemalloc

    from capacity import rr
    from capacity.fit._model import FAMILIES

    funcs = {"fcfs": fcfs.response_quantile, "ps": ps.response_quantile,
             "rr": lambda q, lam, s: rr.response_quantile(q, lam, s, slices=5)}
    laws = [(f, 1.0 if f in ("exponential", "hyperexponential") else 0.0 if f == "deterministic" else 2.0)
            for f in FAMILIES]
    laws += [("hyperexponential", 4.0), ("lognormal", 0.03), ("gamma", 0.03)]
    lam = 0.4 / MEAN
    print(f"\nfit-time grid: one load, 4 percentiles, model given (ms, best of 2; peak MiB); target {TARGET_MS:g} ms")
    print(f"  {'CPU law':24s}" + "".join(f"{d:>22s}" for d in funcs))
    for family, scv in laws:
        svc = (getattr(Service, family)(MEAN, scv) if family in ("lognormal", "gamma", "hyperexponential")
               else getattr(Service, family)(MEAN))
        cells = []
        for d, func in funcs.items():
            obs = dict(zip(Q.tolist(), np.asarray(func(Q, lam, svc), dtype=float)))
            kw = dict(discipline=d, family=family, delay=None)
            if d == "rr":
                kw.update(slices=5)
            ms, res = best_ms(lambda o=obs, k=kw: from_percentiles(o, lam, **k), 2)
            # Memory in a separate run: tracemalloc slows Python-heavy paths several times.
            tracemalloc.start()
            from_percentiles(obs, lam, **kw)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            err = res.cpu_per_request_ / MEAN - 1
            cells.append(f"{ms:8.0f} ms {peak:5.0f} MiB {'ok' if ms <= TARGET_MS else '  '}")
            if abs(err) > 0.02:
                cells[-1] += f" (E[S] {100 * err:+.0f} %)"
        print(f"  {family + ' scv ' + format(scv, 'g'):24s}" + "".join(f"{c:>22s}" for c in cells))


def slow_models() -> None:
    """One batched forward evaluation (4 percentiles) of the models without a shipped table."""
    from capacity.fit._model import QueueModel

    print("\none forward evaluation of the model (4 percentiles), computed point by point")
    cases = [("PS gamma, scv 3", QueueModel("ps", "gamma"), 3.0),
             ("PS hyperexponential, scv 4", QueueModel("ps", "hyperexponential"), 4.0)]
    for name, model, scv in cases:
        params = {"mean": np.array([MEAN]), "scv": np.array([scv])}
        lam, srv = np.full(Q.size, LAM), np.ones(Q.size, dtype=np.int64)
        ms, _ = best_ms(lambda m=model, p=params, r=lam, c=srv: m.quantiles(p, Q, r, c), 2)
        print(f"  {name:28s} {ms:9.1f} ms")


def distribution_fits() -> None:
    """The hyper-Erlang fit the PS models need for lognormal and gamma CPU: made live against
    read from the shipped table (capacity/tables/ph_fits.npz) in the same process, at scvs
    between the table's nodes (interpolated and polished) and at a node (read exactly); then a
    whole PS fit on 4 cores, the case the fits dominated."""
    from capacity import phasetype as ph

    print("\nhyper-Erlang distribution fit of one CPU-time law: live vs shipped table")
    node = float(ph.FIT_TABLE_SCV[60])
    for family, scv in (("lognormal", 0.7), ("lognormal", 6.0), ("gamma", 3.3), ("gamma", 20.0),
                        ("lognormal", node)):
        ppf = getattr(Service, family)(1.0, scv).ppf
        live, _ = best_ms(lambda: ph._hyper_erlang_fit(ppf, 1.0), 1)
        table, _ = best_ms(lambda: ph._table_fit(family, scv), 3)
        where = "node" if scv == node else "between nodes"
        print(f"  {family:9s} scv {scv:6.3f} ({where:13s}) live {live:8.1f} ms, table {table:7.1f} ms,"
              f" ratio {live / table:6.1f}x")
    four = dict(zip(Q.tolist(), ps.response_quantile(Q, 4 * LAM, Service.lognormal(MEAN, 2.0), servers=4)))
    ph._FIT_CACHE.clear()
    ms, res = best_ms(lambda: from_percentiles(four, 4 * LAM, servers=4, family="lognormal"), 1)
    print(f"  whole fit, PS lognormal on 4 cores (fit cache cold): {ms / 1e3:.1f} s, "
          f"scv = {res.scv_:.3f}, {res.n_function_evaluations_} evaluations")


def histogram_fits() -> None:
    """from_histograms on a day of 24 windows (Prometheus default buckets, counts of the exact
    PS model): one fit of a given model and the default model selection (8 candidates); the
    baseline is the same bucket probabilities from ps.response_sf directly (what the fit would
    cost without reading the model's distribution from its quantile tables), one evaluation."""
    from capacity.fit import from_histograms
    from capacity.fit.histograms import _BucketModel, _parse_windows
    from capacity.fit._model import QueueModel

    svc = Service.lognormal(0.02, 2.0)
    le = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
    rates = np.linspace(3.0, 33.0, 24)
    below = 1.0 - np.asarray(ps.response_sf(le, rates[:, None], svc))
    windows = [{"bounds": le, "counts": 3600 * r * np.diff(np.r_[0.0, b, 1.0]), "arrival_rate": r}
               for r, b in zip(rates, below)]
    print("\nfrom_histograms, 24 windows x 15 buckets (exact PS lognormal counts)")
    ms_one, fit = best_ms(lambda: from_histograms(windows, discipline="ps", family="lognormal", delay=None), 3)
    ms_all, sel = best_ms(lambda: from_histograms(windows), 3)
    data = _parse_windows(windows, 1)
    bm = _BucketModel(QueueModel("ps", "lognormal"), data, "client", ["log_mean", "log_scv"], None, None, None, 0.1)
    theta = np.log([[0.02, 2.0]])
    ms_eval, _ = best_ms(lambda: bm.probabilities(theta), 5)
    ms_direct, _ = best_ms(lambda: ps.response_sf(le, rates[:, None], svc), 1)
    print(f"  one model (PS lognormal)        {ms_one:9.1f} ms   {fit.n_function_evaluations_} evaluations")
    print(f"  model selection (8 candidates)  {ms_all:9.1f} ms   chose {sel.discipline} {sel.family}")
    print(f"  one evaluation: from the tables {ms_eval:9.2f} ms, ps.response_sf directly {ms_direct:9.1f} ms;"
          f" ratio {ms_direct / ms_eval:.0f}x")


def utilization_fit() -> None:
    from capacity.fit import from_utilization

    rng = np.random.default_rng(0)
    rate = rng.uniform(5, 50, 20_000)
    busy = np.clip(0.05 + 0.012 * rate + rng.normal(0, 0.02, rate.size), 0, 1)
    ms, _ = best_ms(lambda: from_utilization(rate, busy, n_bootstrap=1000), 1)
    print(f"\nfrom_utilization, 20,000 windows, 1000 bootstrap resamples (Huber): {ms / 1e3:.1f} s")


if __name__ == "__main__":
    import sys

    main(selection_only="--selection" in sys.argv[1:])
