"""The small-request limit of the M/G/1-PS response time, for the body of heavy-tailed CPU laws.

A request whose CPU time ``x`` is tiny next to the others' finishes before anyone arrives or
leaves, sharing the CPU with the ``N`` requests it found, so ``T(x) -> x (1 + N)`` as ``x -> 0``;
in M/G/1-PS ``N`` is geometric, ``P(N = n) = (1 - rho) rho^n``, whatever the CPU law (PS is
insensitive; the arrival sees the time average by PASTA).  Taking that for every request::

    P(T > t) ~= sum_{k >= 1} (1 - rho) rho^(k - 1) P(S > t / k).

It is exact in the limit of small requests and keeps E[T | x] = x / (1 - rho) exact for every x,
but gives large requests the small ones' spread (it is a mean-preserving spread of the truth
request by request), so it is high in the far tail and a little low just below it.  Heavy-tailed
gamma CPU (scv 10-50) is almost all tiny requests -- 95 % of a scv-20 law is under 1 % of the mean
-- and there it is right where the hyper-Erlang fit of :mod:`capacity.ps`'s direct computation is
not: that fit floors sizes at 1e-6 E[S], and its body is off by +6 % to orders of magnitude.
Measured against PS simulation by ``python tools/measure_heavy_tail_ps.py``.

Used offline by ``tools/build_quantile_tables.py`` (the heavy-tail gamma piece's body); the
package never calls it.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from capacity import Service  # noqa: E402

#: Exact terms of the geometric sum; above, bins 2 % wide in k, each at its mean k.
EXACT_TERMS = 64
BIN_RATIO = 1.02
#: Geometric mass left out beyond the last bin.
MASS_CUT = 1e-16


def _bins(rho: float) -> tuple[np.ndarray, np.ndarray]:
    """(k, mass) of the geometric law of 1 + N at utilisation ``rho``: exact for k <= 64, then
    2 %-wide bins in k (P(S > t/k) moves little across one), up to where the tail holds 1e-16."""
    if rho <= 0.0:
        return np.array([1.0]), np.array([1.0])
    k_max = max(1.0 + np.log(MASS_CUT) / np.log(rho), 2.0)
    exact = np.arange(1.0, min(EXACT_TERMS, k_max) + 1.0)
    edges = [exact[-1] + 1.0]
    while edges[-1] <= k_max:
        edges.append(max(np.floor(edges[-1] * BIN_RATIO), edges[-1] + 1.0))
    edges = np.array(edges)
    tail = rho ** (edges - 1.0)                     # P(1 + N >= k) at each edge
    ks = np.concatenate([exact, np.sqrt(edges[:-1] * (edges[1:] - 1.0))])
    mass = np.concatenate([(1.0 - rho) * rho ** (exact - 1.0), tail[:-1] - tail[1:]])
    return ks, mass


def service_quantile(family: str, scv: float, q: np.ndarray) -> np.ndarray:
    """s_q of a mean-1 law of the family."""
    return np.asarray(getattr(Service, family)(1.0, scv).ppf(q), dtype=float)


def sf(t: np.ndarray, rho: float, family: str, scv: float) -> np.ndarray:
    """P(T > t) of the small-request limit, mean-1 CPU law (``t`` any shape)."""
    ks, mass = _bins(rho)
    t = np.asarray(t, dtype=float)
    own = getattr(Service, family)(1.0, scv)
    return (np.asarray(own.sf(t[..., None] / ks), dtype=float) * mass).sum(axis=-1)


def log_quantile(q: np.ndarray, rho: float, family: str, scv: float, iterations: int = 80) -> np.ndarray:
    """log t_q of the small-request limit (mean-1 CPU law) by bisection in log t.

    Bracket: T >= S gives t_q >= s_q; and P(T <= s_p k) >= P(1 + N <= k) p, so with
    p = (1 + q) / 2 and k where P(1 + N <= k) >= 2 q / (1 + q), t_q <= s_p k."""
    q = np.asarray(q, dtype=float)
    lo = np.log(service_quantile(family, scv, q))
    p = 0.5 * (1.0 + q)
    k = 1.0 if rho <= 0 else np.maximum(np.ceil(np.log((1.0 - q) / (1.0 + q)) / np.log(rho)), 1.0)
    hi = np.log(service_quantile(family, scv, p)) + np.log(k)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        below = sf(np.exp(mid), rho, family, scv) > 1.0 - q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)
