"""What a fresh process pays before its first answer (run: python benchmarks/bench_first_call.py).

A CLI call, a planning script or a notebook kernel starts cold: it imports capacity and asks
one quantile.  Prints the best-of-N wall times (ms) of fresh Python processes for

* ``import capacity``,
* then the first p99 of each queue in turn (PS lognormal, FCFS gamma, rr gamma 4 slices),
* the same with ``scipy.stats`` imported first -- the baseline, what every first answer paid
  while the service laws evaluated their cdf/sf/ppf through ``scipy.stats`` (now
  ``scipy.special`` directly, the same formulas),

with the ratio, against the issue's target (first call under 200 ms after the import).
"""
from __future__ import annotations

import subprocess
import sys

REPEAT = 5
STEPS = {"import capacity": "import capacity",
         "first PS p99": "capacity.ps.response_quantile(0.99, 20.0, capacity.Service.lognormal(0.025, 2.0))",
         "first FCFS p99": "capacity.fcfs.response_quantile(0.99, 20.0, capacity.Service.gamma(0.025, 2.0))",
         "first rr p99": "capacity.rr.response_quantile(0.99, 20.0, capacity.Service.gamma(0.025, 0.5), slices=4)"}


def fresh_ms(setup: str) -> list[float]:
    """Best-of-REPEAT wall ms of each step in a fresh interpreter (``setup`` counted in the import)."""
    code = "import time; t = [time.perf_counter()]; " + setup
    for step in STEPS.values():
        code += step + "; t.append(time.perf_counter()); "
    code += "print(*[1e3 * (b - a) for a, b in zip(t, t[1:])])"
    best = [float("inf")] * len(STEPS)
    for _ in range(REPEAT):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        best = [min(b, float(x)) for b, x in zip(best, out.stdout.split())]
    return best


def main() -> None:
    now = fresh_ms("")
    base = fresh_ms("import scipy.stats; ")
    print(f"{'step':16s}{'now ms':>9s}{'baseline ms':>13s}{'ratio':>7s}")
    for name, a, b in zip(STEPS, now, base):
        print(f"{name:16s}{a:9.0f}{b:13.0f}{b / a:7.1f}")
    print(f"{'total':16s}{sum(now):9.0f}{sum(base):13.0f}{sum(base) / sum(now):7.1f}")
    print(f"baseline: scipy.stats imported first (counted in its import), as every first answer did "
          f"before; the first PS call {'meets' if now[1] < 200 else 'misses'} the 200 ms target")


if __name__ == "__main__":
    main()
