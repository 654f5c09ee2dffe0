"""Log reading rate: ``capacity.logs.read_nginx`` against the plain per-line Python loop.

Run from the repository root::

    python benchmarks/bench_logs.py [--lines 500000]

Writes synthetic access-log lines in the default format (nginx ``combined`` plus ``$request_time
$upstream_response_time``; IPv4 and IPv6 clients, a few ``-`` timings and multi-valued upstream times) to a
temporary file, then times, in the same process and on the same file:

- ``read_nginx(path)``: the typed DataFrame (times, status, bytes, timings, strings), and
  ``read_nginx(path, usecols=[...])`` keeping only the columns a capacity fit needs;
- the plain loop: ``for line in f: m = regex.match(line)`` followed by per-field conversions (``int``,
  ``float``, ``datetime.strptime`` with a cache of the timestamps already seen), rows gathered into a
  DataFrame at the end -- what one writes without thinking about speed.

Each figure is the best of ``--repeat`` runs; CPU time (``time.process_time``) is reported next to wall time
because the figure that matters is per core, and a shared machine inflates wall time.
Target: read_nginx >= 200,000 lines/s on one core.

Before that, old reader against the streaming one (issue 18): each runs alone in a child process on the same file
-- ``read_nginx(path, usecols=[...])`` and ``logs.aggregate(path, window=60)`` (polars, every core) -- and
reports its wall and CPU time and its peak resident memory (``ru_maxrss``: it sees Arrow's and polars'
native memory, which tracemalloc does not).  Target: aggregate >= 2,000,000 lines/s (wall, 2 cores) and
>= 5x read_nginx in the same run.  ``--stream-only`` skips the in-process part.

Then the same lines split into ``--parts`` files (4) are aggregated by one process and by
``logs.aggregate(dir, client=...)`` on a Dask ``LocalCluster`` of 2 worker processes of one thread each
(one task per file), each in its own child process; the Dask figure times the aggregate call on a cluster
already started (its start-up is printed apart), its CPU time is the client's and the workers' during the
call (``time.process_time`` on each worker before and after), and its peak memory is the client's and the
largest worker's (``RUSAGE_CHILDREN``).  The ratio printed is
Dask against the one-process streaming reader on the same files: on one 2-core machine the cluster only adds
its transfers (the one-process reader already uses both cores); the cluster pays where the files are on
several machines.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import random
import re
import tempfile
import time
import warnings

import pandas as pd

from capacity.logs import read_nginx

_PATHS = ["/api/users", "/api/orders/12345?expand=items", "/static/app.3f9a.js", "/health",
          "/api/search?q=red%20shoes&page=2", "/api/cart", "/login"]
_AGENTS = ["Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 "
           "Safari/537.36",
           "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
           "curl/8.4.0", "Go-http-client/1.1", "-"]


_FIT_COLUMNS = ["time", "path", "status", "request_time", "upstream_response_time"]


def write_log(path: str, n: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    t0 = dt.datetime(2024, 3, 1, 10, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            stamp = (t0 + dt.timedelta(seconds=i // 250)).strftime("%d/%b/%Y:%H:%M:%S %z")
            if rnd.random() < 0.1:
                addr = f"2001:db8::{rnd.randrange(65536):x}"
            else:
                addr = f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(256)}"
            rt = rnd.lognormvariate(-3.0, 0.8)
            r = rnd.random()
            if r < 0.02:
                timing = "0.000 -"
            elif r < 0.03:
                timing = f"{rt:.3f} {rt * 0.3:.3f}, {rt * 0.6:.3f}"
            else:
                timing = f"{rt:.3f} {rt * 0.9:.3f}"
            f.write(f'{addr} - - [{stamp}] "{rnd.choice(("GET", "GET", "GET", "POST"))} {rnd.choice(_PATHS)} '
                    f'HTTP/1.1" {rnd.choice((200, 200, 200, 200, 304, 404, 502))} {rnd.randrange(20000)} '
                    f'"-" "{rnd.choice(_AGENTS)}" {timing}\n')


_LINE = re.compile(
    r'(\S+) - (\S+) \[([^\]]+)\] "(\S+) (\S+) (\S+)" (\d{3}) (\d+) "([^"]*)" "([^"]*)" (\S+) (.+)$'
)


def plain_loop(path: str) -> pd.DataFrame:
    """The straightforward reader: one regex match and Python conversions per line."""
    rows = []
    stamps: dict[str, dt.datetime] = {}
    skipped = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _LINE.match(line)
            if m is None:
                skipped += 1
                continue
            (addr, user, stamp, method, path_, proto, status, size, ref, agent, rt, urt) = m.groups()
            t = stamps.get(stamp)
            if t is None:
                t = stamps[stamp] = dt.datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z")
            upstream = [float(v) for v in re.split(r"\s*[,:]\s*", urt) if v != "-"]
            rows.append((addr, user, t, method, path_, proto, int(status), int(size), ref, agent,
                         float(rt) if rt != "-" else float("nan"),
                         sum(upstream) if upstream else float("nan")))
    return pd.DataFrame(rows, columns=["remote_addr", "remote_user", "time", "method", "path", "protocol",
                                       "status", "bytes", "http_referer", "http_user_agent", "request_time",
                                       "upstream_response_time"])


def best_of(func, repeat: int) -> tuple[float, float, object]:
    cpu, wall, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = func()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall, result


def child(reader: str, path: str) -> None:
    """Run one reader on ``path`` in this (child) process and print its figures as JSON."""
    from capacity import logs

    if reader == "dask":
        return dask_child(path)
    w0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if reader == "read_nginx":
            n = len(read_nginx(path, usecols=_FIT_COLUMNS))
        else:
            n = logs.aggregate(path, window=60).requests
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"lines": n, "wall": wall, "cpu": cpu,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def dask_child(path: str) -> None:
    """``logs.aggregate(path, client=...)`` on a 2-worker LocalCluster started here; figures as JSON."""
    from dask.distributed import Client, LocalCluster

    from capacity import logs

    s0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(_warm)   # a cluster in service has imported what it runs
        startup = time.perf_counter() - s0
        before = client.run(time.process_time)
        w0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("error", logs.LogReadWarning)
            n = logs.aggregate(path, window=60, client=client).requests
        wall, cpu_here = time.perf_counter() - w0, time.process_time() - c0
        after = client.run(time.process_time)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_workers = sum(after[w] - before[w] for w in after)
    print(json.dumps({"lines": n, "wall": wall, "cpu": cpu_here + cpu_workers,
                      "startup": startup, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "worker_peak_mb": workers.ru_maxrss / 1024}))


def _warm() -> None:
    import importlib

    for module in ("polars", "capacity._log_stream"):
        importlib.import_module(module)


def split_log(path: str, parts: int, directory: str) -> None:
    """The lines of ``path`` in ``parts`` files of consecutive lines (one Dask task each)."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    size = -(-len(lines) // parts)
    os.makedirs(directory)
    for k in range(parts):
        with open(os.path.join(directory, f"access-{k}.log"), "w", encoding="utf-8") as out:
            out.writelines(lines[k * size:(k + 1) * size])


def compare_dask(directory: str, lines: int, parts: int) -> None:
    """One process against a 2-worker LocalCluster, each in a child process, on the same ``parts`` files."""
    figures = {}
    for reader in ("aggregate", "dask"):
        out = subprocess.run([sys.executable, __file__, "--child", reader, directory], check=True,
                             capture_output=True, text=True).stdout
        figures[reader] = json.loads(out.strip().splitlines()[-1])
        assert figures[reader]["lines"] == lines, figures[reader]
    one, many = figures["aggregate"], figures["dask"]
    print(f"\n{parts} files of the same lines          {'lines/s (wall)':>15} {'lines/s (CPU)':>14} {'peak RSS':>10}")
    print(f"{'aggregate, one process':<36} {lines / one['wall']:>15,.0f} {lines / one['cpu']:>14,.0f} "
          f"{one['peak_mb']:>7,.0f} MB")
    print(f"{'aggregate, Dask LocalCluster 2x1':<36} {lines / many['wall']:>15,.0f} {lines / many['cpu']:>14,.0f} "
          f"{many['peak_mb']:>7,.0f} MB client, {many['worker_peak_mb']:,.0f} MB largest worker")
    print(f"Dask / one process: {one['wall'] / many['wall']:.2f}x lines/s (wall), {one['cpu'] / many['cpu']:.2f}x "
          f"per CPU second; the cluster's start-up ({many['startup']:.1f} s) is in neither figure")


def compare_in_children(path: str, lines: int) -> None:
    figures = {}
    load_before = os.getloadavg()[0]   # other work on the machine takes cores from the 2-thread reader first
    for reader in ("read_nginx", "aggregate"):
        out = subprocess.run([sys.executable, __file__, "--child", reader, path], check=True,
                             capture_output=True, text=True).stdout
        figures[reader] = json.loads(out.strip().splitlines()[-1])
        assert figures[reader]["lines"] == lines, figures[reader]
    print(f"\n{'reader (child process)':<24} {'lines/s (wall)':>15} {'lines/s (CPU)':>14} {'peak RSS':>10}")
    for reader, f in figures.items():
        print(f"{reader:<24} {lines / f['wall']:>15,.0f} {lines / f['cpu']:>14,.0f} {f['peak_mb']:>7,.0f} MB")
    old, new = figures["read_nginx"], figures["aggregate"]
    print(f"aggregate / read_nginx: {old['wall'] / new['wall']:.1f}x lines/s (wall), "
          f"{old['cpu'] / new['cpu']:.1f}x per CPU second, {new['peak_mb'] / old['peak_mb']:.2f}x peak memory; "
          f"target >= 2,000,000 lines/s wall and >= 5x: "
          f"{'met' if lines / new['wall'] >= 2e6 and old['wall'] / new['wall'] >= 5 else 'NOT met'} on this machine "
          f"(CPU time over {os.cpu_count()} cores; a busy machine lowers the wall figures)")
    print(f"load average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores (the readers' own runs included)")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stream-only", action="store_true", help="only the child-process comparisons")
    parser.add_argument("--parts", type=int, default=4, help="files for the Dask comparison (default 4)")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "access.log")
        write_log(path, args.lines)
        size_mb = os.path.getsize(path) / 1e6
        # The child processes first, while this one is small: a child's ru_maxrss starts from the RSS of
        # the process it was forked from (Linux keeps it across exec), which the in-process part inflates.
        print(f"{args.lines:,} lines, {size_mb:.1f} MB")
        compare_in_children(path, args.lines)
        if not args.no_dask:
            split_log(path, args.parts, os.path.join(tmp, "parts"))
            compare_dask(os.path.join(tmp, "parts"), args.lines, args.parts)
        if args.stream_only:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the synthetic file must parse completely
            c_fast, w_fast, df = best_of(lambda: read_nginx(path), args.repeat)
            c_few, w_few, _ = best_of(lambda: read_nginx(path, usecols=_FIT_COLUMNS), args.repeat)
        c_loop, w_loop, ref = best_of(lambda: plain_loop(path), args.repeat)
        assert len(df) == len(ref) == args.lines, (len(df), len(ref))
        assert (df["status"].to_numpy() == ref["status"].to_numpy()).all()
        assert ((df["upstream_response_time"] - ref["upstream_response_time"]).abs().max() < 1e-12)
        del df, ref
    print(f"\nin this process, best of {args.repeat}")
    print(f"{'reader':<12} {'lines/s (CPU)':>14} {'lines/s (wall)':>15}")
    print(f"{'read_nginx':<12} {args.lines / c_fast:>14,.0f} {args.lines / w_fast:>15,.0f}")
    print(f"{'  usecols*':<12} {args.lines / c_few:>14,.0f} {args.lines / w_few:>15,.0f}")
    print(f"{'plain loop':<12} {args.lines / c_loop:>14,.0f} {args.lines / w_loop:>15,.0f}")
    print(f"* usecols={_FIT_COLUMNS} (what a capacity fit needs)")
    print(f"speed-up (CPU): {c_loop / c_fast:.2f}x   target: read_nginx >= 200,000 lines/s "
          f"({'met' if args.lines / c_fast >= 200_000 else 'NOT met'} on this machine)")


if __name__ == "__main__":
    main()
