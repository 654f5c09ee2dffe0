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

Then, old reader against the streaming one (issue 18): each runs alone in a child process on the same file
-- ``read_nginx(path, usecols=[...])`` and ``logs.aggregate(path, window=60)`` (polars, every core) -- and
reports its wall and CPU time and its peak resident memory (``ru_maxrss``: it sees Arrow's and polars'
native memory, which tracemalloc does not).  Target: aggregate >= 2,000,000 lines/s (wall, 2 cores) and
>= 5x read_nginx in the same run.  ``--stream-only`` skips the first part.
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
    parser.add_argument("--stream-only", action="store_true", help="only the child-process comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "access.log")
        write_log(path, args.lines)
        size_mb = os.path.getsize(path) / 1e6
        if args.stream_only:
            print(f"{args.lines:,} lines, {size_mb:.1f} MB")
            return compare_in_children(path, args.lines)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the synthetic file must parse completely
            c_fast, w_fast, df = best_of(lambda: read_nginx(path), args.repeat)
            c_few, w_few, _ = best_of(lambda: read_nginx(path, usecols=_FIT_COLUMNS), args.repeat)
        c_loop, w_loop, ref = best_of(lambda: plain_loop(path), args.repeat)
        assert len(df) == len(ref) == args.lines, (len(df), len(ref))
        assert (df["status"].to_numpy() == ref["status"].to_numpy()).all()
        assert ((df["upstream_response_time"] - ref["upstream_response_time"]).abs().max() < 1e-12)
        del df, ref
        compare_in_children(path, args.lines)
    print(f"{args.lines:,} lines, {size_mb:.1f} MB, best of {args.repeat}")
    print(f"{'reader':<12} {'lines/s (CPU)':>14} {'lines/s (wall)':>15}")
    print(f"{'read_nginx':<12} {args.lines / c_fast:>14,.0f} {args.lines / w_fast:>15,.0f}")
    print(f"{'  usecols*':<12} {args.lines / c_few:>14,.0f} {args.lines / w_few:>15,.0f}")
    print(f"{'plain loop':<12} {args.lines / c_loop:>14,.0f} {args.lines / w_loop:>15,.0f}")
    print(f"* usecols={_FIT_COLUMNS} (what a capacity fit needs)")
    print(f"speed-up (CPU): {c_loop / c_fast:.2f}x   target: read_nginx >= 200,000 lines/s "
          f"({'met' if args.lines / c_fast >= 200_000 else 'NOT met'} on this machine)")


if __name__ == "__main__":
    main()
