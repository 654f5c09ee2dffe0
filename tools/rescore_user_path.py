#!/usr/bin/env python
"""Re-score saved user-path days under each reading of the day's CPU counter and with and without
rr tried at near-constant CPU: the comparison validation/README.md quotes.

Usage (from the repository root)::

    python tools/rescore_user_path.py                         # every day in validation/runs/
    python tools/rescore_user_path.py /tmp/up9 validation/runs/2026-12-07-user-path-immediate-seed8

Each day is copied to a temporary directory and fitted again there
(:func:`validation.user_path.repredict`, as ``run.py --user-path --repredict``) four times:
``capacity.fit._cpu_law.HOLD`` "ratio" or "line" and
``capacity.fit._rr_candidates.RR_NEAR_CONSTANT`` off or on.  Printed: per day and configuration
the targets met (p99 within 20 %, mean within 10 %, interval holds the p99, crossing within 5 %)
by histogram, then the totals; ``--rows`` adds every peak row's errors.  Nothing is measured,
nothing in the given directories is written.  About a minute per day and configuration.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import shutil
import sys
import tempfile
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))

import user_path  # noqa: E402

from capacity.fit import _cpu_law, _rr_candidates  # noqa: E402

CONFIGS = [("ratio", False), ("line", False), ("ratio", True), ("line", True)]
COUNTS = ["p99", "mean", "p99_covered", "crossing"]
TOTALS = COUNTS + ["of", "crossings"]


def rescore(day: pathlib.Path, hold: str, near: bool, scratch: pathlib.Path) -> dict:
    """The summary of ``day`` fitted again with the given switches, in a copy under ``scratch``."""
    copy = scratch / f"{day.name}-{hold}-{int(near)}"
    shutil.copytree(day, copy)
    saved = _cpu_law.HOLD, _rr_candidates.RR_NEAR_CONSTANT
    _cpu_law.HOLD, _rr_candidates.RR_NEAR_CONSTANT = hold, near
    try:
        with contextlib.redirect_stdout(io.StringIO()):       # repredict prints its tables
            return user_path.repredict(copy)
    finally:
        _cpu_law.HOLD, _rr_candidates.RR_NEAR_CONSTANT = saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("days", nargs="*", type=pathlib.Path,
                    help="saved user-path directories (default: every one in validation/runs/)")
    ap.add_argument("--rows", action="store_true", help="print every peak row's errors too")
    ap.add_argument("--only", metavar="READING,NEAR", help="one configuration, e.g. line,on")
    args = ap.parse_args(argv)
    configs = CONFIGS
    if args.only:
        hold, near = args.only.split(",")
        if hold not in ("ratio", "line") or near not in ("on", "off"):
            ap.error(f"--only must be ratio|line,on|off, got {args.only!r}")
        configs = [(hold, near == "on")]
    days = args.days or sorted(p for p in (ROOT / "validation" / "runs").iterdir() if p.is_dir())
    warnings.simplefilter("ignore")
    totals: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for day in days:
            for hold, near in configs:
                t0 = time.perf_counter()
                summary = rescore(day, hold, near, pathlib.Path(tmp))
                label = f"{hold:5s} near={'on ' if near else 'off'}"
                met = summary["met"]
                cells = "  ".join(f"{where}: " + " ".join(
                    f"{k}={met[where][k]}/{met[where]['crossings' if k == 'crossing' else 'of']}" for k in COUNTS)
                    for where in sorted(met))
                print(f"{day.name:45s} {label}  {cells}  ({time.perf_counter() - t0:.0f} s)", flush=True)
                for where, m in met.items():
                    into = totals.setdefault((hold, near), {}).setdefault(where, dict.fromkeys(TOTALS, 0))
                    for k in TOTALS:
                        into[k] += m[k]
                if args.rows:
                    for r in summary["rows"]:
                        print(f"    {r['handler']:16s} {r['histogram']:10s} {r['target_util']:.1f} "
                              f"{r['chosen']:24s} p99 {100 * r['p99_error']:+6.1f} %  mean "
                              f"{100 * r['mean_error']:+6.1f} %  interval "
                              f"{r['pred_p99_low_ms']:.0f}-{r['pred_p99_high_ms']:.0f} ms "
                              f"(measured {r['p99_ms']:.0f})")
                    for c in summary["crossings"]:
                        print(f"    {c['handler']:16s} {c['histogram']:10s} crossing {100 * c['error']:+6.1f} %")
    print("\ntotals (peak points for p99, mean and interval; handler-days for the crossing)")
    print("| reading | rr near-constant | histogram | p99 within 20 % | mean within 10 % | interval holds p99 "
          "| crossing within 5 % |")
    print("|---|---|---|---|---|---|---|")
    for (hold, near), per in totals.items():
        both = {k: sum(m[k] for m in per.values()) for k in TOTALS}
        for where, m in [*sorted(per.items()), ("both", both)]:
            print(f"| {hold} | {'on' if near else 'off'} | {where} | {m['p99']} of {m['of']} | {m['mean']} of "
                  f"{m['of']} | {m['p99_covered']} of {m['of']} | {m['crossing']} of {m['crossings']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
