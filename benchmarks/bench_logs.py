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
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "access.log")
        write_log(path, args.lines)
        size_mb = os.path.getsize(path) / 1e6
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the synthetic file must parse completely
            c_fast, w_fast, df = best_of(lambda: read_nginx(path), args.repeat)
            c_few, w_few, _ = best_of(lambda: read_nginx(path, usecols=_FIT_COLUMNS), args.repeat)
        c_loop, w_loop, ref = best_of(lambda: plain_loop(path), args.repeat)
        assert len(df) == len(ref) == args.lines, (len(df), len(ref))
        assert (df["status"].to_numpy() == ref["status"].to_numpy()).all()
        assert ((df["upstream_response_time"] - ref["upstream_response_time"]).abs().max() < 1e-12)
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
