"""Timing of capacity.ps quantiles (run: python benchmarks/bench_ps.py [--sweep | --heavy-traffic | ...]).

Prints best-of-N wall times in ms for four response quantiles (p50/p90/p99/p99.9)
at one point (rho 0.5 and 0.9) per service family, and optionally a 200-point
utilisation sweep of the p99.  Baseline, in the same process: the direct computation
(hyper-Erlang fit + exact M/PH/1-PS transform, point by point) that the shipped table
``capacity/tables/ps_quantiles.npz`` was built from; for the phase-type families
(exponential, Erlang, hyperexponential, deterministic) the direct computation is what
``capacity.ps`` always runs, so both columns time the same thing; so does near-constant gamma
(scv 0.01: the tagged request's exact size, ``capacity._ps_near_constant``, not tabled yet).
First, the import and the first call of a fresh process (the table is read then).

``--many-cores``: the "M/G/c-PS figures": a 20-rate p99 sweep (utilisation 0.0625-0.94, E[S] =
25 ms) on c = 2, 4, 8 cores for deterministic, gamma scv 0.05, lognormal scv 1 and 4, best of 3.
Baseline, in the same process: the direct computation (every table disabled; for deterministic
CPU the extra-delay path, and the former Erlang pair 2 E(64) - E(32) for the tagged size,
``_ps_many_cores.DETERMINISTIC_DELAY = False``, as a third column).

``--heavy-traffic``: what a response curve asks on several cores: its 40 utilisations (0.002 to
0.995, two of them above the M/G/c-PS tables' top, 0.991) x p50/p99/p99.9, for lognormal scv 2,
gamma scv 0.5 and deterministic CPU on 2, 4 and 16 cores, read from the tables (carried to the
heavy-traffic limit above their top, ``capacity._quantile_table._log_t_heavy``; deterministic CPU
through the gamma rows, ``capacity._ps_deterministic_table``); baseline, in the same process, the
direct computation of the same curve.

``--between-cores``: lognormal (scv 2) and gamma (scv 0.5) CPU on core counts without a table of
their own (3, 6, 12, 24, 48), read between the two tables either side, and above the largest
(96, 128, 256, 1000; read towards infinitely many cores, the sweep up to utilisation 0.85,
``capacity._quantile_table.BEYOND_LARGEST_TOP``): a 20-rate p99 sweep and
a whole default ``from_percentiles`` fit (four percentiles at one load); baseline, in the same
process, the direct computation (every table disabled) of the same sweep.

``--one-core-saturation``: what a fit's 90 % interval asks at one rate near saturation on one
core: p99 over 400 draws of the CPU law (lognormal and gamma, E[S] = 11.8 ms) at utilisation
0.9992, above the one-core table's top (0.999), where the top's ``(1 - rho) t_q`` is held
(``capacity._quantile_table._log_t_one_core_heavy``); baseline, in the same process, the direct
computation of every tenth draw, times ten.

``--light-tail``: deterministic CPU on one core, what a histogram fit of a day asks each time it
evaluates the model: 40 levels (q 0.001 to 1 - 1e-6) at 24 light loads (utilisation 0.02-0.16).
The table answers all of them; baseline, in the same process, the former path: the direct
computation at the points beyond each light-load row's resolved levels (the table answered the
others in both).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from capacity import Service, ps
from capacity import _quantile_table as table

Q = np.array([0.5, 0.9, 0.99, 0.999])
SERVICES = {
    "exponential": Service.exponential(1.0),
    "erlang-2": Service.erlang(1.0, 2),
    "hyperexp scv 4": Service.hyperexponential(1.0, 4.0),
    "deterministic": Service.deterministic(1.0),
    "gamma scv 0.5": Service.gamma(1.0, 0.5),
    "lognormal scv 1": Service.lognormal(1.0, 1.0),
    "lognormal scv 4": Service.lognormal(1.0, 4.0),
    "gamma scv 0.01": Service.gamma(1.0, 0.01),      # near-constant: capacity._ps_near_constant
}

# A fresh process: import, then the first lognormal call (it reads the shipped table).
FIRST_CALL = """
import time
t0 = time.perf_counter()
from capacity import Service, ps
t1 = time.perf_counter()
ps.response_quantile([0.5, 0.9, 0.99, 0.999], 0.5, Service.lognormal(1.0, 2.0))
t2 = time.perf_counter()
print(f"{1e3 * (t1 - t0):.0f} {1e3 * (t2 - t1):.0f}")
"""


def first_call() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, check=True)
    imp, first = out.stdout.split()
    print(f"fresh process: import capacity {imp} ms, first PS call (lognormal, table) {first} ms")


def best_ms(func, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def direct_ms(func, repeat=1):
    table.disabled = True
    try:
        return best_ms(func, repeat)
    finally:
        table.disabled = False


MANY_CORES = {
    "deterministic": Service.deterministic(0.025),
    "gamma scv 0.05": Service.gamma(0.025, 0.05),
    "lognormal scv 1": Service.lognormal(0.025, 1.0),
    "lognormal scv 4": Service.lognormal(0.025, 4.0),
}


def many_cores() -> None:
    from capacity import _ps_many_cores

    print("M/G/c-PS: 20-rate p99 sweep (rho 0.0625-0.94), best of 3; direct = every table disabled;"
          " former = the Erlang-pair tagged size for deterministic CPU")
    for name, svc in MANY_CORES.items():
        for c in (2, 4, 8):
            lam = np.linspace(10, 150, 20) * c / 4
            fast = best_ms(lambda: ps.response_quantile(0.99, lam, svc, servers=c))
            slow = direct_ms(lambda: ps.response_quantile(0.99, lam, svc, servers=c))
            former = ""
            if svc.family == "deterministic":
                _ps_many_cores.DETERMINISTIC_DELAY = False
                try:
                    former = f"   former {direct_ms(lambda: ps.response_quantile(0.99, lam, svc, servers=c)):8.0f} ms"
                finally:
                    _ps_many_cores.DETERMINISTIC_DELAY = True
            print(f"  {name:16s} c={c}  {fast:8.1f} ms   direct {slow:8.0f} ms   ratio {slow / fast:7.1f}{former}")


def heavy_traffic() -> None:
    from capacity.plan.curves import DEFAULT_UTILIZATION

    q = np.array([0.5, 0.99, 0.999])[:, None]
    print("a response curve on several cores: 40 utilisations (0.002-0.995) x p50/p99/p99.9, best of 3;"
          " direct = every table disabled, once")
    for name, svc in (("lognormal scv 2", Service.lognormal(1.0, 2.0)), ("gamma scv 0.5", Service.gamma(1.0, 0.5)),
                      ("deterministic", Service.deterministic(1.0))):
        for c in (2, 4, 16):
            lam = DEFAULT_UTILIZATION * c
            fast = best_ms(lambda: ps.response_quantile(q, lam, svc, servers=c))
            slow = direct_ms(lambda: ps.response_quantile(q, lam, svc, servers=c))
            print(f"  {name:16s} c={c:2d}  {fast:7.1f} ms   direct {slow:8.0f} ms   ratio {slow / fast:6.0f}", flush=True)


def one_core_saturation() -> None:
    """A fit's 90 % interval at one rate near saturation: 400 parameter draws at utilisation 0.9992
    (the user-path harness's crossing grid met this: 83 s for one call)."""
    print("one core at utilisation 0.9992, p99 over 400 draws of the CPU law's scv, best of 3;"
          " direct = every table disabled, once")
    for name, family, scvs in (("lognormal scv 0.015-0.05", "lognormal", (0.015, 0.05)),
                               ("gamma scv 0.3-0.7", "gamma", (0.3, 0.7)),
                               ("lognormal scv 0.8-1.5", "lognormal", (0.8, 1.5))):
        scv = np.geomspace(*scvs, 400)
        lam = 0.9992 / 0.0118
        fast = best_ms(lambda: ps.response_quantile(0.99, lam, getattr(Service, family)(0.0118, scv)))
        # The direct baseline on every tenth draw (all 400 took 75-500 s), scaled to 400.
        few = getattr(Service, family)(0.0118, scv[::10])
        slow = 10 * direct_ms(lambda: ps.response_quantile(0.99, lam, few))
        print(f"  {name:26s} {fast:7.1f} ms   direct {slow:9.0f} ms   ratio {slow / fast:8.0f}", flush=True)


def between_cores() -> None:
    import warnings

    from capacity import _quantile_table
    from capacity.fit import from_percentiles

    print("M/G/c-PS between the tables: 20-rate p99 sweep (rho 0.05-0.95; above 64 cores 0.05-0.85), best of 3;"
          " default fit, best of 3")
    for name, svc in (("lognormal scv 2", Service.lognormal(0.025, 2.0)), ("gamma scv 0.5", Service.gamma(0.025, 0.5))):
        for c in (3, 6, 12, 24, 48, 96, 128, 256, 1000):
            if _quantile_table.many_cores_table(c) is None:
                continue
            top = 0.95 if c < max(_quantile_table.PS_MANY_CORES) else _quantile_table.BEYOND_LARGEST_TOP
            lam = np.linspace(0.05, top, 20) * c / 0.025
            fast = best_ms(lambda: ps.response_quantile(0.99, lam, svc, servers=c))
            slow = direct_ms(lambda: ps.response_quantile(0.99, lam, svc, servers=c))
            obs = dict(zip(Q.tolist(), ps.response_quantile(Q, 0.6 * c / 0.025, svc, servers=c)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = best_ms(lambda: from_percentiles(obs, 0.6 * c / 0.025, servers=c))
            print(f"  {name:16s} c={c:4d}  sweep {fast:7.1f} ms   direct {slow:8.0f} ms   ratio {slow / fast:6.0f}"
                  f"   default fit {fit:6.0f} ms")


def many_levels() -> None:
    """Many levels of one queue (a latency curve): one grid of P(T > t) against a Newton solve per
    level (the grid switched off) in the same process."""
    from capacity import ps as ps_module

    levels = np.linspace(0.005, 0.995, 200)
    print("PS, 200 levels at one load (a latency curve): grid (best of 3) vs a solve per level (once)")
    for name, svc, rho in (("hyperexp scv 3", Service.hyperexponential(1.0, 3.0), 0.5),
                           ("hyperexp scv 8", Service.hyperexponential(1.0, 8.0), 0.9),
                           ("gamma scv 20", Service.gamma(1.0, 20.0), 0.5)):
        fast = best_ms(lambda: ps.response_quantile(levels, rho, svc), repeat=3)
        saved, ps_module._ps_inversion.GRID_FROM_LEVELS = ps_module._ps_inversion.GRID_FROM_LEVELS, 10**9
        try:
            slow = best_ms(lambda: ps.response_quantile(levels, rho, svc), repeat=1)
        finally:
            ps_module._ps_inversion.GRID_FROM_LEVELS = saved
        print(f"  {name:16s} rho {rho}  {fast:8.0f} ms   per level {slow:8.0f} ms   ratio {slow / fast:5.1f}")


def light_tail() -> None:
    """M/D/1-PS at light load, a fit's levels: the table's line beyond the resolved levels against
    the direct computation those points took before (see the module docstring)."""
    from capacity import _ps_deterministic_table as det

    svc = Service.deterministic(1.0)
    levels = -np.expm1(-np.exp(np.linspace(np.log(-np.log1p(-1e-3)), np.log(-np.log(1e-6)), 40)))
    rho = np.linspace(0.02, 0.16, 24)[:, None]
    q = np.broadcast_to(levels, (rho.size, levels.size))
    r = np.broadcast_to(rho, q.shape)
    a = det.atom(r)
    p = np.clip((q - a) / (1 - a), 1e-300, None)
    beyond = (q > a) & (np.log(-np.log1p(-p)) > det.direct_resolved(r))
    fast = best_ms(lambda: ps.response_quantile(q, r, svc))
    slow = direct_ms(lambda: ps.response_quantile(q[beyond], r[beyond], svc))
    print(f"M/D/1-PS, {q.size} points (24 light loads x 40 levels), {int(beyond.sum())} beyond the resolved "
          f"levels: table {fast:.1f} ms (best of 3), former path {slow:.0f} ms (direct at those points), "
          f"ratio {slow / fast:.0f}")


def main() -> None:
    if "--light-tail" in sys.argv:
        light_tail()
        return
    if "--many-cores" in sys.argv:
        many_cores()
        return
    if "--heavy-traffic" in sys.argv:
        heavy_traffic()
        return
    if "--between-cores" in sys.argv:
        between_cores()
        return
    if "--one-core-saturation" in sys.argv:
        one_core_saturation()
        return
    if "--many-levels" in sys.argv:
        many_levels()
        return
    first_call()
    ps.response_quantile(Q, 0.5, Service.lognormal(1.0, 1.0))  # load the table once
    for rho in (0.5, 0.9):
        print(f"one point, rho = {rho}, four response quantiles (best of 3):")
        for name, svc in SERVICES.items():
            fast = best_ms(lambda: ps.response_quantile(Q, rho, svc))
            slow = direct_ms(lambda: ps.response_quantile(Q, rho, svc))
            print(f"  {name:18s} {fast:9.1f} ms   direct {slow:9.1f} ms   ratio {slow / fast:7.1f}")
    if "--sweep" in sys.argv:
        rhos = np.linspace(0.01, 0.99, 200)
        for name in ("exponential", "erlang-2", "hyperexp scv 4", "deterministic", "lognormal scv 4"):
            fast = best_ms(lambda: ps.response_quantile(0.99, rhos, SERVICES[name]), repeat=1)
            print(f"sweep 200 points, p99, {name}: {fast:.0f} ms")
        slow = direct_ms(lambda: ps.response_quantile(0.99, rhos, SERVICES["lognormal scv 4"]))
        print(f"sweep 200 points, p99, lognormal scv 4, direct: {slow:.0f} ms")


if __name__ == "__main__":
    main()
