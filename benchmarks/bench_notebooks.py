"""What a slider move costs in each notebook (run: python benchmarks/bench_notebooks.py [NN ...]).

Each notebook's code cells run top to bottom in an in-process IPython shell (one
subprocess per notebook, so no notebook inherits another's caches), with no
browser: the widgets exist in the kernel, and setting ``widget.value`` runs the
same ``observe`` callbacks as a user's move.  The script then finds the panel's
controls by their CSS class ``capacity-slider-<name>`` (see
:func:`capacity.notebook.prepare_controls`), makes the moves listed in
``MOVES`` below and prints, per group of moves, the median and the largest time
of one move (recompute + redraw) in ms.

Baselines, in the same process: the notebook's own ``plot.redraw()`` alone (the
blitted redraw every move ends with: static background restored, animated
artists drawn, one PNG encoded) and ``plot.redraw(full=True)`` (the whole figure
rendered, what a callback would cost without blitting).  Each group prints its
median against the blitted redraw (``x redraw``: how much of a move is the
model), and each notebook the full redraw against the blitted one.  Notebook 04
also times the cached-curve path of ``plan.timeout_safe_rate`` /
``plan.burst_tolerance`` it uses against the exact solver.

The figures go into ``notebooks/README.md``; the notebooks themselves measure
nothing (a notebook that moves its own widgets after showing them races the
browser, see :mod:`capacity.notebook`).  Runs every notebook in 2-4 minutes.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


@dataclass
class Group:
    """Moves timed together: ``(control name, value)`` pairs, made ``repeat`` times.

    ``setup`` moves are made first and undone last, untimed (e.g. the discipline the group
    needs); ``clear`` names the notebook's ``functools.lru_cache`` wrappers to empty first,
    so that every package call is computed afresh (a first visit); ``plot`` names the
    notebook's ``LivePlot`` the moves redraw (a notebook with two panels has two), the baseline
    of the group's ``x redraw``.
    """

    name: str
    moves: list[tuple[str, Any]]
    repeat: int = 1
    setup: list[tuple[str, Any]] = field(default_factory=list)
    clear: list[str] = field(default_factory=list)
    plot: str = "plot"


MOVES: dict[str, list[Group]] = {
    "01": [Group("burst QPS, length, CPU, processes (replay + redraw)",
                 [("burst_qps", 80), ("burst_s", 20), ("cpu_ms", 40.0), ("processes", 2)], repeat=3)],
    "02": [
        Group("ps/fcfs: CPU, SLO, IO delay, cores, percentile, discipline",
              [("cpu_ms", 20.0), ("slo_ms", 300.0), ("delay_ms", 30.0), ("servers", 4), ("slo_q", 0.999),
               ("discipline", "fcfs")], repeat=4),
        Group("fcfs: variability and CPU", [("scv", 4.0), ("scv", 0.0), ("cpu_ms", 30.0)], repeat=3,
              setup=[("discipline", "fcfs")]),
        Group("rr: yield toggle (setImmediate / setTimeout)", [("admission", "idle"), ("admission", "fifo")],
              repeat=3, setup=[("discipline", "rr")]),
        Group("rr: new slice counts (tables blended)", [("slices", k) for k in (8, 12, 2, 17)],
              setup=[("discipline", "rr")]),
        Group("rr: slices and CPU, seen before", [("slices", 8), ("cpu_ms", 20.0)], repeat=3,
              setup=[("discipline", "rr")]),
        Group("rr: cores (ps tables built at start)", [("servers", c) for c in (6, 8, 3)],
              setup=[("discipline", "rr")]),
        Group("ps: variability, one core (shipped tables; constant CPU built at start)",
              [("scv", 4.0), ("scv", 0.0), ("scv", 0.25), ("scv", 8.0)], repeat=2),
        Group("rr: variability, one core (fcfs and ps tables blended)", [("scv", 2.0), ("scv", 0.5), ("scv", 0.0)],
              repeat=2, setup=[("discipline", "rr")]),
        Group("ps: variability on 2 cores, first visit (M/G/c-PS tables)", [("scv", 0.5)],
              setup=[("servers", 2)]),
        Group("ps: variability on 6 cores, first visit (M/G/c-PS tables; constant CPU through them)",
              [("scv", 0.0), ("scv", 0.25), ("scv", 4.0), ("scv", 8.0), ("scv", 2.0)], setup=[("servers", 6)]),
        Group("rr: variability on 3 cores, first visit (M/G/c FCFS + PS tables blended)",
              [("scv", 0.0), ("scv", 0.5), ("scv", 4.0), ("scv", 8.0)], setup=[("discipline", "rr"), ("servers", 3)]),
    ],
    "03": [
        Group("every slider, first visit (package calls afresh)",
              [("peak_qps", 800), ("cores", 8), ("processes", 2), ("dispatch", "least_connections"), ("extra", 1),
               ("peak_qps", 1200), ("dispatch", "pooled"), ("peak_qps", 1990), ("peak_qps", 1730),
               ("cost_machine", 200), ("cost_core", 50)], clear=["machines_n1", "p99"]),
        Group("every slider, revisit (answers remembered)",
              [("peak_qps", 800), ("cores", 8), ("processes", 2), ("dispatch", "least_connections"), ("extra", 1),
               ("peak_qps", 1200), ("dispatch", "pooled"), ("peak_qps", 1990), ("peak_qps", 1730),
               ("cost_machine", 200), ("cost_core", 50)], repeat=2),
    ],
    "04": [
        Group("retries", [("retries", 0), ("retries", 4), ("retries", 1)], repeat=3),
        Group("burst QPS", [("burst_qps", 400.0), ("burst_qps", 650.0), ("burst_qps", 310.0)], repeat=3),
        Group("CPU and timeout, new settings (retry analysis)",
              [("cpu_ms", 12.0), ("cpu_ms", 13.5), ("timeout_s", 2.0), ("timeout_s", 0.7), ("cpu_ms", 8.5)],
              clear=["retry_at"]),
        Group("cores (p99.9 tables built at start; retry analysis)", [("servers", c) for c in (3, 7, 5)],
              clear=["retry_at"]),
    ],
    "05": [
        Group("QPS, SLO, discipline, family (fit + ceiling + redraw)",
              [("qps", 12.0), ("qps", 9.5), ("slo_ms", 1000.0), ("slo_ms", 650.0), ("discipline", "ps"),
               ("qps", 7.0), ("discipline", "fcfs"), ("family", "gamma"), ("family", "lognormal")]),
        Group("cores, on release (M/G/c fit, then back to one core)", [("servers", 2), ("servers", 1)]),
    ],
    "06": [
        Group("GC share, pause, rate, CPU, semi-space: first visit",
              [("gc_share", 10.0), ("pause_ms", 80.0), ("pause_rate", 3.0), ("cpu_ms", 12.0), ("semi_space", 256)],
              clear=["whatif"]),
        Group("the same moves, revisit (answers remembered)",
              [("gc_share", 10.0), ("pause_ms", 80.0), ("pause_rate", 3.0), ("cpu_ms", 12.0), ("semi_space", 256)],
              repeat=2),
        Group("JVM: pauses, resizing, heap, CPU, cores, QPS, timeout, pause scv: first visit",
              [("jvm_pauses", 40), ("jvm_pause_ms", 900.0), ("jvm_new_pauses", 15), ("jvm_new_pause_ms", 300.0),
               ("jvm_resize", 5), ("jvm_resize_ms", 60.0), ("jvm_fixed_heap", False), ("jvm_cpu_ms", 6.0),
               ("jvm_servers", 4), ("jvm_qps", 400.0), ("jvm_timeout_ms", 80.0), ("jvm_pause_scv", 2.0)],
              clear=["jvm_whatif"], plot="jvm_plot"),
        Group("JVM: the same moves, revisit (answers remembered)",
              [("jvm_pauses", 40), ("jvm_pause_ms", 900.0), ("jvm_new_pauses", 15), ("jvm_new_pause_ms", 300.0),
               ("jvm_resize", 5), ("jvm_resize_ms", 60.0), ("jvm_fixed_heap", False), ("jvm_cpu_ms", 6.0),
               ("jvm_servers", 4), ("jvm_qps", 400.0), ("jvm_timeout_ms", 80.0), ("jvm_pause_scv", 2.0)],
              plot="jvm_plot"),
    ],
    "07": [Group("CPU, think time, concurrency (MVA + PS + redraw)",
                 [("cpu_ms", 20.0), ("think_ms", 200.0), ("users", 50)], repeat=4)],
    "08": [Group("steal, CPU, cores, QPS, task, parallel, utilisation, burst (steal + hand-off + redraw)",
                 [("steal", 25.0), ("cpu_ms", 30.0), ("servers", 2), ("qps", 60.0), ("task_ms", 10.0),
                  ("parallel", 2), ("util", 10.0), ("burst_ms", 8.0)], repeat=3)],
    "09": [
        Group("cache: hit ratio (expiry; the ceiling read off the curve), first visit",
              [("hit_pct", 95.0), ("hit_pct", 98.0), ("hit_pct", 85.0)], clear=["expiry_here"], plot="cache_plot"),
        Group("cache: QPS, on release (needed hit ratio solved + expiry), first visit",
              [("qps", 400.0), ("qps", 150.0), ("qps", 600.0)], clear=["needed_at", "expiry_here"],
              plot="cache_plot"),
        Group("cache: expiry sliders (keys, skew, timeout, retries, refresh), first visit",
              [("keys", 2000), ("zipf", 1.0), ("timeout_ms", 1000.0), ("retries", 0), ("refresh_min", 10.0)],
              clear=["expiry_here"], plot="cache_plot"),
        Group("cache: costs and cores, on release (ceiling curve recomputed), first visit",
              [("hit_ms", 2.0), ("miss_ms", 40.0), ("servers", 4)],
              clear=["ceiling_curve", "needed_at", "expiry_here"], plot="cache_plot"),
        Group("cache: every slider, revisit (answers remembered)",
              [("hit_pct", 95.0), ("qps", 400.0), ("keys", 2000), ("retries", 0), ("miss_ms", 40.0),
               ("servers", 4)], repeat=2, plot="cache_plot"),
        Group("endpoints, event loop (PS): rates, costs, cores (on release), isolate, first visit",
              [("api_qps", 10.0), ("api_ms", 20.0), ("static_qps", 100.0), ("static_ms", 2.0),
               ("ep_servers", 2), ("isolate", "/api")], clear=["mix_at"]),
        Group("endpoints, event loop (PS): the same moves, revisit (answers remembered)",
              [("api_qps", 10.0), ("api_ms", 20.0), ("static_qps", 100.0), ("static_ms", 2.0),
               ("ep_servers", 2), ("isolate", "/api")]),
        Group("endpoints, worker pool (FCFS): the same moves, first visit",
              [("api_qps", 10.0), ("api_ms", 20.0), ("static_qps", 100.0), ("static_ms", 2.0),
               ("ep_servers", 2), ("isolate", "/api")], setup=[("discipline", "fcfs")], clear=["mix_at"]),
    ],
    "10": [
        Group("cold, warm-up, ramp, QPS, CPU, N, k: first visit (ramp + 2 transients + deploy + redraw)",
              [("cold", 4.0), ("warmup_k", 20.0), ("ramp", 60.0), ("qps", 350.0), ("cpu_ms", 6.0),
               ("processes", 20), ("batch", 3), ("surge", True)], clear=["panel"]),
        Group("the same moves, revisit (answers remembered)",
              [("cold", 4.0), ("warmup_k", 20.0), ("ramp", 60.0), ("qps", 350.0), ("cpu_ms", 6.0),
               ("processes", 20), ("batch", 3), ("surge", True)], repeat=2),
        Group("discipline: event loop (PS), awaits (rr), first visit (fluid crowd marched)",
              [("discipline", "ps"), ("discipline", "rr")], clear=["panel"]),
        Group("ps: cold, ramp, QPS, CPU, on release, first visit", [("cold", 4.0), ("ramp", 60.0), ("qps", 350.0),
                                                                    ("cpu_ms", 6.0)],
              setup=[("discipline", "ps")], clear=["panel"]),
        Group("ps: the same moves, revisit (answers remembered)", [("cold", 4.0), ("ramp", 60.0), ("qps", 350.0),
                                                                   ("cpu_ms", 6.0)],
              setup=[("discipline", "ps")], repeat=2),
    ],
}


def time_slider_moves(moves: Iterable[tuple[Any, Any]], repeat: int = 1) -> dict[str, float]:
    """Move widgets programmatically and time each move (recompute + redraw), ms.

    Setting ``widget.value`` runs every ``observe`` callback synchronously, so the time is
    what a user's move costs on the kernel side (the browser then decodes one PNG).  Each
    widget is put back to its original value after each round (untimed), so the next round
    moves again.  A move to the value a widget already holds runs no callback: the lists in
    ``MOVES`` avoid them.
    """
    moves = list(moves)
    originals = {}
    for widget, _ in moves:
        originals.setdefault(id(widget), (widget, widget.value))
    times = []
    for _ in range(repeat):
        for widget, value in moves:
            t0 = time.perf_counter()
            widget.value = value
            times.append(time.perf_counter() - t0)
        for widget, value in originals.values():
            widget.value = value
    return {"moves": len(times), "median_ms": 1e3 * statistics.median(times), "max_ms": 1e3 * max(times)}


def _median_ms(func, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _controls() -> dict[str, Any]:
    """The panel's controls, by the name in their CSS class ``capacity-slider-<name>``."""
    from ipywidgets.widgets.widget import _instances

    out = {}
    for widget in list(_instances.values()):
        for cls in getattr(widget, "_dom_classes", ()):
            if cls.startswith("capacity-slider-"):
                out[cls.removeprefix("capacity-slider-")] = widget
    return out


def _execute(path: Path) -> tuple[dict[str, Any], float]:
    """Run a notebook's code cells in an in-process IPython shell; its namespace and run time (s)."""
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell

    os.environ.setdefault("MPLBACKEND", "Agg")
    shell = InteractiveShell.instance()
    nb = nbformat.read(path, as_version=4)
    os.chdir(path.parent)   # the notebooks find data/ relative to where they run
    # Agg cannot show a figure; the notebook's own warning filters stay as its cells set them.
    warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")
    t0 = time.perf_counter()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            result = shell.run_cell(cell.source, silent=True)
        result.raise_error()
    return shell.user_ns, time.perf_counter() - t0


def _bench_timeout_curve() -> str:
    """Notebook 04's cached-curve path for the timeout-safe rate and burst tolerance, against the exact solver."""
    from capacity import Service, plan

    settings = [(11.0, 1.0), (13.5, 0.7), (9.0, 2.3), (20.0, 4.1)]

    def curve():
        for cpu_ms, timeout in settings:
            svc = Service.exponential(cpu_ms / 1e3)
            plan.timeout_safe_rate(svc, 3, timeout, method="curve")
            plan.burst_tolerance(svc, 3, timeout, 400.0)

    def exact():
        for cpu_ms, timeout in settings:
            plan.timeout_safe_rate(Service.exponential(cpu_ms / 1e3), 3, timeout)

    curve()   # the curve's table for 3 cores, built once (the notebook builds it at start)
    fast = _median_ms(curve) / len(settings)
    slow = _median_ms(exact, repeat=3) / len(settings)
    return (f"  timeout-safe rate + burst tolerance, cached curve: {fast:.2f} ms per setting; exact solver "
            f"(timeout-safe rate alone): {slow:.1f} ms ({slow / fast:.0f}x)")


def bench_one(path: Path) -> None:
    """Execute one notebook and print its figures."""
    ns, run_s = _execute(path)
    controls = _controls()
    groups = MOVES[path.name[:2]]
    redraws = {}
    for name in ["plot"] + sorted({g.plot for g in groups} - {"plot"}):
        plot = ns[name]
        redraw = _median_ms(plot.redraw)
        full = _median_ms(lambda: plot.redraw(full=True))
        plot.redraw(full=True)  # leave the cached background in place for the moves
        redraws[name] = redraw
        panel = "" if name == "plot" else f" ({name})"
        head = f"{path.name}: runs top to bottom in {run_s:.1f} s (no browser); " if name == "plot" else "  "
        print(f"{head}redraw{panel} {redraw:.1f} ms blitted, {full:.1f} ms full ({full / redraw:.1f}x)")
    for group in groups:
        redraw = redraws[group.plot]
        for name in group.clear:
            ns[name].cache_clear()
        undo = [(controls[name], controls[name].value) for name, _ in group.setup]
        for name, value in group.setup:
            controls[name].value = value
        t = time_slider_moves([(controls[name], value) for name, value in group.moves], repeat=group.repeat)
        for widget, value in reversed(undo):
            widget.value = value
        print(f"  {group.name}: median {t['median_ms']:.0f} ms, max {t['max_ms']:.0f} ms over {t['moves']} moves "
              f"({t['median_ms'] / redraw:.1f}x redraw)")
    if path.name.startswith("04"):
        print(_bench_timeout_curve())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", help="notebook numbers (01 ... 09); default: all")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)   # internal: one notebook, this process
    args = parser.parse_args(argv)
    if args.one:
        bench_one(args.one.resolve())
        return 0
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if args.numbers:
        paths = [p for p in paths if p.name[:2] in args.numbers]
    env = dict(os.environ, MPLBACKEND="Agg")
    failed = 0
    for path in paths:
        proc = subprocess.run([sys.executable, __file__, "--one", str(path)], env=env, cwd=ROOT, check=False)
        failed += proc.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
