"""Erlang B and Erlang C: blocking and waiting probabilities of many-server queues.

``erlang_b(servers, offered_load)`` is the probability that an arrival finds
all ``c`` servers busy in a loss system (M/M/c/c, and by insensitivity
M/G/c/c); ``erlang_c(servers, offered_load)`` is the probability that an
arrival has to wait in the delay system M/M/c.  ``sqrt_staffing`` is the
Halfin-Whitt square-root staffing rule.

Both probabilities come from the Poisson distribution, with no factorials
and no loop over servers, so a million grid points or a million servers cost
the same few vectorised calls:

    B(c, a) = P(N = c) / P(N <= c),   N ~ Poisson(a),
    1/C(c, a) = rho + (1 - rho) / B(c, a),   rho = a/c < 1

(the truncated-Poisson form of the Erlang loss formula, and the delay formula
from it).  Two paths evaluate them.

Fast path, every point with ``c <= 2**16`` (for B, with ``a < c``): the
servers are integers, so whatever depends on c alone is a table indexed by c,
and the grid goes through in chunks that stay in cache.  With
``u = rho - 1 - log rho``,

* ``P(N = c) = exp(-c u - [log c! - c log c + c])``, the bracket tabulated;
* where ``P(N = c)/(1 - rho) < 5e-17`` (the tails: ~60 % of a uniform grid)
  the geometric bound ``P(N > c) <= P(N = c) rho/(1 - rho)`` shows that
  ``P(N <= c) = 1`` and ``rho P(N = c) << 1 - rho`` to double precision:
  ``B = P(N = c)``, ``C = P(N = c)/(1 - rho)``;
* near the mean, ``P(N <= c)`` from Temme's uniform asymptotic expansion of
  the incomplete gamma function for ``c >= 40`` (``_temme_tables``) and from
  the Erlang B recursion for 1/B, run over all such points at once, below.

Grids of more than 2**18 points are split between threads, one per usable
core (``CAPACITY_NUM_THREADS`` sets the number), bit for bit the same values.
Speed: ``benchmarks/bench_erlang.py`` times a million points with up to 1000
servers on one core and on every core, against the per-point recursion that
calculators use.

General path, ``c > 2**16`` and, for B, ``a >= c``, in log space:
``P(N = c)`` with Loader's saddle-point expansion (no cancellation between
``c log a`` and ``log c!`` even at ``c = 10**6``), ``P(N <= c)`` with
``scipy.special.gammaincc`` where it is not tiny, and the ratio
``P(N <= c) / P(N = c)`` with the (finite, all-positive) Legendre continued
fraction of the incomplete gamma function where it is, i.e. far in the
overloaded tail ``a > c + 3 sqrt(c)``, where both probabilities underflow but
their ratio does not.

Accuracy, measured against mpmath at 50 digits (``tests/test_erlang.py``):
relative error of B and C below 1e-11 for ``1 <= c <= 10**6`` and every load
from ``1e-3`` to ``10**3 c`` that does not underflow, and below 4e-13 on the
fast path (random grids and the switches between its branches).  On the same
random points the fast and the log-space path reach at most 2.3e-13 and
4.5e-13 with ``c <= 1000``, 3.3e-13 and 2.3e-13 near the mean for
``40 <= c <= 2**16``, 1.4e-13 and 1.4e-14 as ``rho -> 1``.  The fast path's
largest errors come from rounding the log-pmf, ~ c |1 - rho| eps, which is as
much as rounding ``a`` itself to a double moves it; near the mean at large c
its typical error is ~1e-14 where Loader's series gives ~1e-15.  Values below
~1e-308 are returned as 0 or subnormal; the private ``_log_erlang_b`` keeps
them, e.g. ``log B = -83887 * ln 10`` at ``c = 10**6, a = c / 2``.
"""
from __future__ import annotations

import decimal
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from scipy import special

from ._checks import as_float_array, check_broadcast, check_nonnegative, check_servers, scalar_out

__all__ = ["erlang_b", "erlang_c", "sqrt_staffing"]

ArrayLike = Any

_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)
# Beyond this many standard deviations above c, P(N <= c) is too small to
# take from gammaincc (it underflows for large c), and the continued fraction
# converges in fewer than ~70 steps at any c.
_CF_SIGMAS = 3.0
_CF_MAX_STEPS = 10_000


def _sel(mask: np.ndarray):
    """``mask`` as an index, or ``...`` when it selects everything.

    Boolean gathers and scatters dominate the run time on large grids; most
    grids fall in a single branch, where a view costs nothing.
    """
    return ... if mask.all() else mask


# ---------------------------------------------------------------------------
# Poisson building blocks (Loader 2000)
# ---------------------------------------------------------------------------

def _stirlerr(n: np.ndarray) -> np.ndarray:
    """``log(n!) - [(n + 1/2) log n - n + log(2 pi)/2]`` for real ``n >= 1``.

    The Stirling series for n > 15 (error < 1e-16 there); the direct
    difference below, where the terms are small enough (|.| < 45) that the
    cancellation costs at most ~1e-14 absolute.
    """
    n = np.asarray(n, dtype=float)
    out = np.empty_like(n)
    big = _sel(n > 15)
    small = _sel(~(n > 15))
    nb = n[big]
    nn = nb * nb
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    out[big] = (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / nb
    ns = n[small]
    out[small] = special.gammaln(ns + 1) - (ns + 0.5) * np.log(ns) + ns - _HALF_LOG_2PI
    return out


def _bd0(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Deviance term ``x log(x/m) + m - x`` (>= 0) for ``x, m > 0``.

    Near ``x = m`` the naive form loses ``eps * |x - m|`` in absolute terms
    (1e-10 at a million servers); Loader's series in ``v = (x-m)/(x+m)``,

        bd0 = (x - m) v + 2 x sum_{j>=1} v^(2j+1) / (2j + 1),

    keeps full relative precision.  Used for ``|v| < 0.1`` (8 terms give
    < 1e-17 relative truncation error there).
    """
    out = np.empty(np.broadcast_shapes(x.shape, m.shape))
    x, m = np.broadcast_arrays(x, m)
    v = (x - m) / (x + m)
    near_mask = np.abs(v) < 0.1
    near, far = _sel(near_mask), _sel(~near_mask)
    xn, mn, vn = x[near], m[near], v[near]
    w = vn * vn
    poly = np.zeros_like(w)
    for j in range(8, 0, -1):
        poly = (poly + 1.0 / (2 * j + 1)) * w
    out[near] = (xn - mn) * vn + 2.0 * xn * vn * poly
    xf, mf = x[far], m[far]
    with np.errstate(over="ignore", divide="ignore"):
        ratio = xf / mf
    # x/m overflows only for denormal-sized m; then the log difference is
    # huge and its rounding is relatively negligible.
    logratio = np.where(np.isfinite(ratio) & (ratio > 0), np.log(np.where(ratio > 0, ratio, 1.0)),
                        np.log(xf) - np.log(mf))
    out[far] = xf * logratio + mf - xf
    return out


def _log_poisson_pmf(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``log P(N = c)`` for ``N ~ Poisson(a)``, ``c >= 1``, ``a > 0`` (Loader's form)."""
    return -_stirlerr(c) - _bd0(c, a) - _HALF_LOG_2PI - 0.5 * np.log(c)


def _log_cdf_over_pmf_cf(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``log[P(N <= c) / P(N = c)]`` for ``a > c`` by a continued fraction.

    ``P(N <= c) / P(N = c) = Gamma(c+1, a) / (a^c e^-a)``, and Legendre's
    continued fraction for the upper incomplete gamma function gives

        a / (a - c + 1 c / (a - c + 2 + 2 (c-1) / (a - c + 4 + 3 (c-2) / ...))),

    finite for integer ``c`` (the (c+1)-th numerator is zero) and with every
    term positive when ``a > c``, so the modified Lentz evaluation below has
    no cancellation.  Each element stops when its own update is within
    rounding of 1; for ``a >= c + 3 sqrt(c)`` that takes < 70 steps at any c.
    """
    d = a - c
    f = d.copy()
    big_c = f.copy()  # Lentz's C_k
    big_d = np.zeros_like(f)
    idx = np.arange(f.size)
    cc, dd = c.copy(), d.copy()
    for k in range(1, _CF_MAX_STEPS + 1):
        bk = dd + 2.0 * k
        ak = k * (cc - (k - 1))
        big_d = 1.0 / (bk + ak * big_d)
        big_c = bk + ak / big_c
        delta = big_c * big_d
        f[idx] *= delta
        going = np.abs(delta - 1.0) > 2e-16
        if not going.all():
            idx, cc, dd, big_c, big_d = idx[going], cc[going], dd[going], big_c[going], big_d[going]
            if idx.size == 0:
                break
    return np.log(a) - np.log(f)


def _log_erlang_b(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``log B(c, a)`` elementwise; ``c >= 1`` (float array), ``a >= 0``.

    Finite for every ``a > 0`` however deep the tail (``-inf`` at ``a = 0``),
    so callers needing B far below the double range can stay in log space.
    """
    c, a = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(a, dtype=float))
    out = np.full(c.shape, -np.inf)
    pos = a > 0
    cf = pos & (a > c + _CF_SIGMAS * np.sqrt(c))
    gam_mask = pos & ~cf
    gam = _sel(gam_mask)
    if gam_mask.any():
        cg, ag = c[gam], a[gam]
        log_pmf = _log_poisson_pmf(cg, ag)
        # P(N <= c) = Q(c + 1, a), the regularised upper incomplete gamma;
        # here it is >= ~exp(-_CF_SIGMAS**2 / 2 - 1), far from underflow.
        # Below the mean the geometric bound
        #   P(N > c) <= P(N = c) * a / (c + 1 - a)
        # often shows P(N <= c) = 1 to double precision: skip gammaincc there
        # (it is the costly call, and this covers most light-load points).
        with np.errstate(divide="ignore"):
            log_tail = log_pmf + np.log(ag) - np.log(np.maximum(cg + 1.0 - ag, 0.0))
        sure = log_tail < -40.0  # tail < 4e-18: log P(N <= c) = -tail rounds to 0
        log_cdf = np.zeros_like(ag)
        unsure = _sel(~sure)
        log_cdf[unsure] = np.log(special.gammaincc(cg[unsure] + 1.0, ag[unsure]))
        out[gam] = log_pmf - log_cdf
    if cf.any():
        out[cf] = -_log_cdf_over_pmf_cf(c[cf], a[cf])
    return out


def _log_erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``log C(c, a)`` elementwise; 0 (C = 1) where ``a >= c``.

    ``1/C = (1 - rho)/B + rho`` with ``rho = a/c``, i.e.
    ``log C = log B + log c - log(c - a + a B)``: every term positive.
    """
    c, a = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(a, dtype=float))
    out = np.zeros(c.shape)
    stable = _sel(a < c)
    cs, as_ = c[stable], a[stable]
    log_b = _log_erlang_b(cs, as_)
    out[stable] = log_b + np.log(cs) - np.log(cs - as_ + as_ * np.exp(log_b))
    return out


# ---------------------------------------------------------------------------
# Fast path: integer servers up to 2**16 with the load below the server count
# ---------------------------------------------------------------------------
#
# The general path above works for any c but pays, on a grid, for boolean
# gathers, Loader's near/far split and gammaincc on every near-mean point.
# Here whatever depends on c alone is a table, and the points go through in
# chunks small enough to stay in cache.  The tables stop at 2**16 servers
# (12 doubles a row, ~6 MB): beyond, they would cost more memory than they
# save time, and this path's log-pmf rounding, ~ c |1 - rho| eps, would pass
# 1e-12 where the general path's Loader series stays near 1e-15.

_FAST_MAX_SERVERS = 1 << 16
# Points per chunk.  Each chunk makes ~60 numpy calls, and between them a thread
# holds the GIL: with two threads on a 10**6-point grid 2**15 spent a third of
# the time handing the GIL over (29 ms against 19-21 ms at 2**16), while on one
# thread 2**16 was as fast as 2**15 or faster (27-30 ms against 30-32 ms);
# 2**17 and larger fall out of cache (512 KB per working array).
_CHUNK = 1 << 16
# Half an ulp of 1 (2**-53 = 1.1e-16) with a margin: a P(N > c) or a
# rho P(N = c)/(1 - rho) below this changes no sum it enters.
_NEGLIGIBLE = 5e-17
# Near the mean, fewer servers than this take the exact finite sum, whose
# cost grows with c; from here on ten powers of the Temme expansion are below
# rounding (_temme_tables).
_EXACT_BELOW = 40
# exp(y) leaves numpy's vectorised kernel (10-100x slower) once its result
# underflows, and so does a product landing just below the subnormal range
# (microcode assist); the pmf is exp(y/2)**2 with y/2 >= -700: exact halving,
# fast exp, and products below exp(-1400) flush to 0 at full speed.  (The
# alternative exp(y + 700) exp(-700) rounds y + 700 to ~1e-13.)
_EXP_HALF_FLOOR = -700.0

# d[k][n]: the coefficient of eta**n in Temme's c_k(eta) (DLMF section 8.12:
# c_0 = 1/(lambda - 1) - 1/eta, c_k = c_{k-1}'/eta + (-1)**k g_k / (lambda - 1)
# with Gamma*(p) ~ sum g_k p**-k, DLMF 5.11.3), derived in exact rational
# arithmetic and rounded (tests/test_erlang.py re-derives them); they agree
# with the d table of scipy's cephes igam.h.  k < 12 and n <= 10 is what
# c >= 40 needs (see _temme_tables).
_TEMME_D = np.array([
    (-0.3333333333333333, 0.08333333333333333, -0.014814814814814815, 0.0011574074074074073,
     0.0003527336860670194, -0.0001787551440329218, 3.919263178522438e-05, -2.185448510679992e-06,
     -1.85406221071516e-06, 8.296711340953087e-07, -1.7665952736826078e-07),
    (-0.001851851851851852, -0.003472222222222222, 0.0026455026455026454, -0.0009902263374485596,
     0.00020576131687242798, -4.018775720164609e-07, -1.8098550334489977e-05, 7.64916091608111e-06,
     -1.6120900894563446e-06, 4.647127802807434e-09, 1.378633446915721e-07),
    (0.004133597883597883, -0.0026813271604938273, 0.0007716049382716049, 2.0093878600823047e-06,
     -0.0001073665322636516, 5.2923448829120125e-05, -1.2760635188618728e-05, 3.423578734096138e-08,
     1.3721957309062934e-06, -6.298992138380055e-07, 1.4280614206064242e-07),
    (0.0006494341563786008, 0.00022947209362139917, -0.0004691894943952557, 0.00026772063206283885,
     -7.561801671883977e-05, -2.396505113867297e-07, 1.1082654115347302e-05, -5.6749528269915965e-06,
     1.4230900732435883e-06, -2.7861080291528143e-11, -1.6958404091930278e-07),
    (-0.0008618882909167117, 0.0007840392217200666, -0.0002990724803031902, -1.4638452578843418e-06,
     6.641498215465122e-05, -3.968365047179435e-05, 1.1375726970678419e-05, 2.507497226237533e-10,
     -1.6954149536558305e-06, 8.907507532205309e-07, -2.292934834000805e-07),
    (-0.00033679855336635813, -6.972813758365857e-05, 0.0002772753244959392, -0.00019932570516188847,
     6.797780477937208e-05, 1.419062920643967e-07, -1.3594048189768693e-05, 8.018470256334202e-06,
     -2.291481176508095e-06, -3.252473551298454e-10, 3.4652846491085265e-07),
    (0.0005313079364639922, -0.0005921664373536939, 0.0002708782096718045, 7.902353232660328e-07,
     -8.153969367561969e-05, 5.61168275310625e-05, -1.8329116582843375e-05, -3.0796134506033047e-09,
     3.465155368803609e-06, -2.0291327396058603e-06, 5.788792863149004e-07),
    (0.00034436760689237765, 5.171790908260592e-05, -0.00033493161081142234, 0.0002812695154763237,
     -0.00010976582244684731, -1.2741009095484485e-07, 2.7744451511563645e-05, -1.8263488805711332e-05,
     5.7876949497350525e-06, 4.93875893393627e-10, -1.0595367014026043e-06),
    (-0.0006526239185953094, 0.0008394987206720873, -0.000438297098541721, -6.969091458420552e-07,
     0.00016644846642067547, -0.00012783517679769218, 4.629953263691304e-05, 4.557909867922708e-09,
     -1.0595271125805195e-05, 6.783342904865167e-06, -2.1075476666258803e-06),
    (-0.0005967612901927463, -7.204895416020011e-05, 0.0006782308837667328, -0.0006401475260262758,
     0.00027750107634328704, 1.819700838046515e-07, -8.479507117068503e-05, 6.105192082501531e-05,
     -2.1073920183404862e-05, -8.858589014125599e-10, 4.5284535953805374e-06),
    (0.0013324454494800656, -0.0019144384985654776, 0.0011089369134596636, 9.9324041226423e-07,
     -0.0005087450129309319, 0.00042735056665392886, -0.00016858853767910798, -8.1301893922785e-09,
     4.5284402370562144e-05, -3.127053674781734e-05, 1.044986828530338e-05),
    (0.001579727660730835, 0.00016251626278391583, -0.0020633421035543276, 0.00213896861856891,
     -0.0010108559391263003, -3.99127055299192e-07, 0.0003623502508476469, -0.00028143901463712157,
     0.00010449513336495887, 2.12114184918303e-09, -2.5779417251947842e-05),
])

# (size, log_terms, temme): tables for 0 <= c < size, built on first use and
# grown (to the next power of two) when a larger c arrives.
_tables: tuple[int, np.ndarray, np.ndarray] | None = None


def _log_fact_term_exact(n: int) -> float:
    """``log(n!) - n log n + n``, correctly rounded (40-digit decimal arithmetic).

    For small n the double-precision difference of these O(n log n) terms
    keeps only ~1e-14 of the O(1) result.
    """
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        value = decimal.Decimal(math.factorial(n)).ln() - n * decimal.Decimal(n).ln() + n
    return float(value)


def _temme_tables(size: int) -> np.ndarray:
    """``T[j][c]``, the coefficients of ``P_c(x) = sum_j T[j][c] x**j``, for ``0 < c < size``.

    For ``rho = a/c < 1``, ``u = rho - 1 - log rho`` and ``x = sqrt(c u)``,
    Temme's uniform asymptotic expansion of the regularised upper incomplete
    gamma function,

        Q(c, a) = erfc(-x)/2 + exp(-c u)/sqrt(2 pi c) sum_k c_k(eta) c**-k,
        eta = -x sqrt(2/c),

    (N. M. Temme, "The asymptotic expansion of the incomplete gamma
    functions", SIAM J. Math. Anal. 10 (1979) 757-766; DLMF section 8.12;
    the method of DiDonato & Morris, ACM TOMS 12 (1986) 377-393, and of
    scipy's igam.c for large a near the transition), with
    ``exp(-c u)/sqrt(2 pi c) = P(N = c) exp(stirlerr(c))`` and
    ``P(N <= c) = Q(c, a) + P(N = c)``, reads

        P(N <= c) = 1 - erfc(x)/2 + P(N = c) (1 + P_c(x)).

    ``P_c`` keeps the powers eta**0..eta**10 of each ``c_k`` and the terms
    k < 12, folded into one polynomial per c.  The truncation only has to be
    small next to 1e-16 after the factor ``P(N = c) ~ exp(-x**2)`` that
    multiplies it, so ten powers suffice over the whole near-mean range
    ``0 <= x <~ 6.1`` (beyond it the fast path drops ``P(N > c)``):
    absolute error of P(N <= c) against mpmath, with x and P(N = c) exact,
    5.6e-16 at c = 40 and below 2e-16 from c = 50 to 2**16.  Rows c < 40 are
    filled but not used.
    """
    c = np.arange(size, dtype=float)
    c[0] = 1.0
    inv_c = 1.0 / c
    n_pow = _TEMME_D.shape[1]
    e = np.zeros((n_pow, size))
    for row in _TEMME_D[::-1]:
        e = e * inv_c + row[:, None]
    scale = (-np.sqrt(2.0 / c))[None, :] ** np.arange(n_pow)[:, None] * np.exp(_stirlerr(c))
    return e * scale


def _fast_tables(max_servers: int) -> tuple[int, np.ndarray, np.ndarray]:
    """``(size, log_terms, temme)`` covering ``c <= max_servers`` (<= 2**16), at least 1024 rows.

    ``log_terms[c] = -[log(c!) - c log c + c]``, so that
    ``log P(N = c) = -c u + log_terms[c]``.
    """
    global _tables
    tab = _tables
    if tab is not None and tab[0] > max_servers:
        return tab
    size = min(max(1024, 1 << int(max_servers).bit_length()), _FAST_MAX_SERVERS + 1)
    c = np.arange(size, dtype=float)
    c[0] = 1.0
    log_terms = _stirlerr(c) + _HALF_LOG_2PI + 0.5 * np.log(c)
    for n in range(1, 17):
        log_terms[n] = _log_fact_term_exact(n)
    tab = (size, -log_terms, _temme_tables(size))
    _tables = tab
    return tab


def _fast_erlang(c: np.ndarray, a: np.ndarray, want_c: bool,
                 check: bool) -> tuple[np.ndarray, np.ndarray] | str:
    """Erlang C (``want_c``) or B for flat integer ``c`` and loads ``a``.

    Returns ``(values, unstable)``, ``unstable`` the indices where ``a >= c``
    (there C is set to 1; B is left to the caller's general path);
    ``"invalid"`` if ``check`` and a server count is below 1 or a load is
    negative, NaN or infinite (the caller then raises the shared checks'
    error); ``"too many servers"`` if some ``c > 2**16``.  Checking chunk by
    chunk, while the chunk is in cache, costs a fraction of the passes over
    the whole input that the shared checks (and a global maximum) make.

    Per point, with ``rho = a/c`` and ``u = rho - 1 - log rho``:

    * ``P(N = c) = exp(-c u - [log(c!) - c log c + c])``, the bracket from a
      table.  ``(1 - rho) + log rho`` has absolute error ~ |1 - rho| eps
      (1 - rho is exact near 1, and rounding rho moves both terms together),
      so the log-pmf is off by ~ c |1 - rho| eps: the effect of rounding
      ``a`` to a double, at most ~2e-12 where the result is representable at
      c = 2**16 (c u < 708) and measured below 4e-13.
    * ``C = P(N = c) / (rho P(N = c) + (1 - rho) P(N <= c))`` and
      ``B = P(N = c) / P(N <= c)``.  The geometric bound
      ``P(N > c) <= P(N = c) rho/(1 - rho)`` shows that where
      ``P(N = c)/(1 - rho) < 5e-17`` both ``P(N > c)`` and ``rho P(N = c)``
      are below half an ulp of 1 in their sums: there
      ``C = P(N = c)/(1 - rho)`` and ``B = P(N = c)``.
    * Otherwise (the ~40 % of a uniform grid near the mean) ``P(N <= c)``
      comes from the Temme expansion of :func:`_temme_tables` for
      ``c >= 40``, and from the exact finite sum of :func:`_exact_small`
      below (those points go through Temme with the rest, which costs less
      than splitting them off, unless a chunk has no other).
    """
    n = c.size
    size, log_terms, temme = _fast_tables(0)
    top = temme.shape[0] - 1
    out = np.empty(n)
    exact, unstable = [], []
    m = min(n, _CHUNK)
    # rows lcu, pmf, omr first: the near-mean points take all three in one call
    work = np.empty((5, m))
    full_rows = tuple(work)
    # the Temme coefficients of the near points, gathered into the same memory every chunk (a
    # fresh megabyte per chunk costs page faults)
    coef_buf = np.empty(temme.shape[0] * m)
    near_buf = np.empty(3 * m)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        for s in range(0, n, _CHUNK):
            e = min(s + _CHUNK, n)
            ci, ai, o = c[s:e], a[s:e], out[s:e]
            if check and not (ci.min() >= 1 and ai.min() >= 0.0):
                return "invalid"
            c_top = ci.max()
            if c_top >= size:
                if c_top > _FAST_MAX_SERVERS:
                    return "too many servers"
                size, log_terms, temme = _fast_tables(int(c_top))
            w = work if e - s == m else work[:, :e - s]
            lcu, pmf, omr, cf, rho = full_rows if e - s == m else tuple(w)
            np.copyto(cf, ci)
            np.divide(ai, cf, out=rho)
            np.subtract(1.0, rho, out=omr)
            np.log(rho, out=lcu)
            lcu += omr
            lcu *= cf                                  # -c u
            # (mode="clip" lets np.take write into out unbuffered; every c is in the table)
            np.take(log_terms, ci, out=pmf, mode="clip")
            pmf += lcu                                 # log P(N = c)
            pmf *= 0.5
            np.maximum(pmf, _EXP_HALF_FLOOR, out=pmf)
            np.exp(pmf, out=pmf)
            pmf *= pmf                                 # P(N = c)
            far = o if want_c else rho                 # C with P(N > c) dropped
            np.divide(pmf, omr, out=far)
            if omr.min() <= 0.0:
                bad = np.flatnonzero(omr <= 0.0)
                if check and np.isinf(ai[bad]).any():
                    return "invalid"
                far[bad] = 0.0                         # keep them out of the near set
                unstable.append(bad + s)
            near = np.flatnonzero(far >= _NEGLIGIBLE)
            if not want_c:
                o[...] = pmf
            if not near.size:
                continue
            cn = ci[near]
            few = np.flatnonzero(cn < _EXACT_BELOW)
            if few.size:
                exact.append((near[few] + s, cn[few], ai[near[few]]))
                if few.size == near.size:
                    continue                           # (small inputs) no Temme point
            x, pn, omr_n = np.take(w[:3], near, axis=1, mode="clip",
                                   out=near_buf[:3 * near.size].reshape(3, -1))
            np.abs(x, out=x)
            np.sqrt(x, out=x)                          # sqrt(c u)
            coef = np.take(temme, cn, axis=1, mode="clip",
                           out=coef_buf[:temme.shape[0] * cn.size].reshape(-1, cn.size))
            poly = coef[top]
            for j in range(top - 1, -1, -1):
                poly *= x
                poly += coef[j]
            poly *= pn
            den = special.erfc(x, out=x)
            den *= -0.5
            den += 1.0
            den += poly                                # P(N < c)
            if want_c:
                den *= omr_n                           # (1 - rho) P(N <= c) + rho P(N = c)
            den += pn                                  # (for B: P(N <= c))
            np.divide(pn, den, out=den)
            o[near] = den
    unstable = np.concatenate(unstable) if unstable else np.zeros(0, dtype=np.intp)
    if want_c:
        out[unstable] = 1.0
    if exact:
        _exact_small(*(np.concatenate(part) for part in zip(*exact)), out, want_c)
    return out, unstable


# Grids of at least this many points are split between threads: numpy's and
# scipy's ufuncs and gathers release the GIL, so each thread's chunks run on
# their own core.  Below it (sliders, planning sweeps) a thread costs more
# than it saves: a quarter of a million points take ~7 ms on one core.
_PARALLEL_MIN = 1 << 18
_MAX_THREADS = 8


def _threads() -> int:
    """Threads for a large grid: ``CAPACITY_NUM_THREADS`` if set, else the cores this
    process may run on (at most 8)."""
    env = os.environ.get("CAPACITY_NUM_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"CAPACITY_NUM_THREADS must be a whole number >= 1, got {env!r}")
        return int(env)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, _MAX_THREADS))


def _fast_erlang_split(c: np.ndarray, a: np.ndarray, want_c: bool,
                       check: bool) -> tuple[np.ndarray, np.ndarray] | str:
    """:func:`_fast_erlang` over contiguous parts of the grid in parallel threads.

    Every point is computed by the same operations as in one thread, so the
    result is bitwise the same; only grids of at least ``_PARALLEL_MIN``
    points per two threads are split.
    """
    n = c.size
    workers = min(_threads(), n // (_PARALLEL_MIN // 2))
    if workers < 2:
        return _fast_erlang(c, a, want_c, check)
    _fast_tables(0)  # build the first tables once, not in every thread
    # part boundaries on chunk boundaries: the parts' chunks are the single thread's
    edges = [min(n, (n * i // workers + _CHUNK - 1) // _CHUNK * _CHUNK) for i in range(workers + 1)]
    edges[-1] = n
    parts = [(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo]
    with ThreadPoolExecutor(max_workers=len(parts)) as pool:
        results = list(pool.map(lambda p: _fast_erlang(c[p[0]:p[1]], a[p[0]:p[1]], want_c, check), parts))
    for flag in ("invalid", "too many servers"):
        if any(isinstance(r, str) and r == flag for r in results):
            return flag
    out = np.concatenate([r[0] for r in results])
    unstable = np.concatenate([r[1] + lo for r, (lo, _) in zip(results, parts)])
    return out, unstable


def _exact_small(idx: np.ndarray, cs: np.ndarray, ae: np.ndarray, out: np.ndarray,
                 want_c: bool) -> None:
    """``out[idx]`` (``idx`` increasing) for servers ``cs < 40`` and loads ``0 < ae < cs`` near the mean.

    ``R_c = P(N <= c)/P(N = c)`` by ``R_0 = 1``, ``R_m = 1 + (m/a) R_{m-1}``:
    the Erlang B recursion for 1/B (Jagerman 1974), all terms positive,
    relative error < 2 c eps; then ``B = 1/R_c`` and
    ``C = 1/(rho + (1 - rho) R_c)``.  All points run at once, sorted by c so
    that step m touches only those with ``c >= m`` (a handful, as from a
    scalar call, run the same operations in Python floats instead).  Near
    the mean ``R_c`` is far from overflow (tiny loads, where it is not, are
    never near).
    """
    if cs.size <= 64 and int(cs.sum()) <= 600:
        # a few points (scalar calls): the same operations in Python floats,
        # without the per-step numpy calls
        values = []
        for c_, a_ in zip(cs.tolist(), ae.tolist()):
            inv_a, r_ = 1.0 / a_, 1.0
            for m in range(1, c_ + 1):
                r_ = r_ * inv_a * m + 1.0
            if want_c:
                rho_ = a_ / c_
                r_ = r_ * (1.0 - rho_) + rho_
            values.append(1.0 / r_)
        out[idx] = values
        return
    order = np.argsort((_EXACT_BELOW - cs).astype(np.uint8), kind="stable")  # c descending
    cs, ae = cs[order], ae[order]
    inv_a = 1.0 / ae
    at_least = cs.size - np.cumsum(np.bincount(cs, minlength=_EXACT_BELOW))  # [m-1]: # c >= m
    r = np.ones(cs.size)
    for m in range(1, int(cs[0]) + 1):
        head = r[:at_least[m - 1]]
        head *= inv_a[:head.size]
        head *= m
        head += 1.0
    if want_c:
        rho = ae / cs
        r *= 1.0 - rho
        r += rho
    # back to the (increasing) order of idx before scattering: the writes then
    # walk ``out`` forwards instead of missing the cache at every point
    values = np.empty_like(r)
    values[order] = r
    np.divide(1.0, values, out=values)
    out[idx] = values


def _erlang(servers, offered_load, want_c: bool) -> np.ndarray:
    """Erlang C (``want_c``) or B over the broadcast inputs.

    The fast path takes every point with ``c <= 2**16``; the general log-space
    path above takes larger c and, for B, loads ``a >= c``.  Integer server
    and float64 load arrays are validated where they are used (see
    :func:`_fast_erlang`); anything else goes through the shared checks
    first, as do both whenever a problem is found, so that the errors are
    theirs.
    """
    defer_c = isinstance(servers, np.ndarray) and servers.dtype.kind == "i"
    defer_a = isinstance(offered_load, np.ndarray) and offered_load.dtype == np.float64
    check = defer_c or defer_a

    def fail():
        check_servers(servers, "servers")
        check_nonnegative(offered_load, "offered_load")
        raise AssertionError("unreachable: the checks above raise")  # pragma: no cover

    c = servers if defer_c else check_servers(servers, "servers")
    if defer_a:
        a = offered_load
    else:
        try:
            a = check_nonnegative(offered_load, "offered_load")
        except ValueError:
            fail()  # a servers error comes first
    try:
        shape = np.broadcast_shapes(c.shape, a.shape)
    except ValueError:
        if check:
            check_servers(servers, "servers")
            check_nonnegative(offered_load, "offered_load")
        check_broadcast(servers=c, offered_load=a)  # raises, naming both
        raise
    c = np.broadcast_to(c, shape).ravel()
    a = np.broadcast_to(a, shape).ravel()
    fast, general = None, np.zeros(0, dtype=np.intp)
    res = _fast_erlang_split(c, a, want_c, check)
    if res == "too many servers":
        fast, general = np.flatnonzero(c <= _FAST_MAX_SERVERS), np.flatnonzero(c > _FAST_MAX_SERVERS)
        res = _fast_erlang_split(c[fast], a[fast], want_c, check)
        ag = a[general]
        if check and not (ag.min() >= 0.0 and ag.max() < np.inf):
            res = "invalid"
    if res == "invalid":
        fail()
    if fast is None:
        out, unstable = res
    else:
        out = np.empty(c.size)
        out[fast], unstable = res
        unstable = fast[unstable]
    if not want_c:
        general = np.concatenate([general, unstable])
    if general.size:
        cg, ag = c[general].astype(float), a[general]
        out[general] = np.exp(_log_erlang_c(cg, ag) if want_c else _log_erlang_b(cg, ag))
    return out.reshape(shape)


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------

def erlang_b(servers: ArrayLike, offered_load: ArrayLike) -> float | np.ndarray:
    """Erlang B: probability that an arrival is blocked in M/M/c/c (= M/G/c/c).

    Parameters
    ----------
    servers : int or array_like of int
        Number of servers ``c`` (cores, workers, trunks), each >= 1.
    offered_load : float or array_like
        Offered load ``a = arrival_rate * E[S]`` in Erlangs (dimensionless:
        requests/s times seconds), >= 0.

    Returns
    -------
    float or ndarray
        ``B(c, a)`` in [0, 1], broadcast over the inputs.  A float for scalar
        inputs.

    Notes
    -----
    Poisson arrivals, ``c`` servers, no waiting room: an arrival that finds
    all servers busy is lost.  The result is exact and, by insensitivity,
    holds for any service-time distribution with mean ``E[S]``:

        B(c, a) = (a^c / c!) / sum_{k=0}^{c} a^k / k!
                = P(N = c) / P(N <= c),   N ~ Poisson(a).

    Computed without factorials or a loop over servers (see the module
    docstring).  For ``c <= 2**16`` and ``a < c``: ``P(N = c)`` from a table
    of ``log c! - c log c + c``; ``B = P(N = c)`` where the geometric bound
    shows ``P(N > c) < 5e-17``; near the mean ``P(N <= c)`` from Temme's
    uniform expansion of the incomplete gamma function (``c >= 40``) or the
    recursion below (``c < 40``).  Otherwise in log space: Loader's
    saddle-point form of the Poisson pmf, ``P(N <= c) = Q(c+1, a)`` from
    ``scipy.special.gammaincc``, and for ``a > c + 3 sqrt(c)`` the
    incomplete-gamma continued fraction for the ratio.  Relative error
    < 1e-11 against a 50-digit reference for ``c <= 10**6`` (below 4e-13
    for ``c <= 2**16, a < c``); values below the double range (e.g.
    ``c = 10**6`` at ``a = c/2``, where ``B ~ 1e-83887``) are returned as 0.
    The classic recursion ``B_k = a B_{k-1} / (k + a B_{k-1})`` (Jagerman
    1974) gives the same numbers one server at a time.

    References
    ----------
    R. B. Cooper, *Introduction to Queueing Theory*, 2nd ed., North Holland
    (1981), section 3.3, eq. (3.4) (Erlang loss formula) and section 3.5
    (insensitivity).
    D. L. Jagerman, "Some properties of the Erlang loss function", Bell
    System Technical Journal 53 (1974) 525-551.
    C. Loader, "Fast and accurate computation of binomial probabilities"
    (2000) (saddle-point Poisson pmf).
    N. M. Temme, "The asymptotic expansion of the incomplete gamma
    functions", SIAM J. Math. Anal. 10 (1979) 757-766 (uniform expansion of
    P(N <= c) near the mean).

    Examples
    --------
    >>> from capacity.erlang import erlang_b
    >>> round(erlang_b(1, 2.0), 6)  # a / (1 + a)
    0.666667
    >>> round(erlang_b(14, 10.0), 6)
    0.056819
    >>> erlang_b([10, 20, 30], 20.0).round(4).tolist()
    [0.538, 0.1589, 0.0085]
    """
    return scalar_out(_erlang(servers, offered_load, want_c=False))


def erlang_c(servers: ArrayLike, offered_load: ArrayLike) -> float | np.ndarray:
    """Erlang C: probability that an arrival has to wait in M/M/c.

    Parameters
    ----------
    servers : int or array_like of int
        Number of servers ``c``, each >= 1.
    offered_load : float or array_like
        Offered load ``a = arrival_rate * E[S]`` in Erlangs, >= 0.

    Returns
    -------
    float or ndarray
        ``C(c, a)`` in [0, 1]; exactly 1 where ``a >= c`` (unstable: the
        queue grows without bound and every request waits).

    Notes
    -----
    Poisson arrivals, ``c`` identical exponential servers, one FCFS queue of
    unlimited size.  Exact for M/M/c (for M/G/c it is only the usual
    approximation of the waiting probability):

        C(c, a) = c B(c, a) / (c - a (1 - B(c, a))),   a < c,

    with ``B`` the Erlang B probability.  For ``c <= 2**16`` (see the module
    docstring) it is ``C = P(N = c) / (rho P(N = c) + (1 - rho) P(N <= c))``,
    ``rho = a/c``, with ``P(N = c)`` from a table of ``log c! - c log c + c``,
    ``P(N <= c) = 1`` where the geometric bound shows the rest below 5e-17
    (then ``C = P(N = c)/(1 - rho)``), and near the mean ``P(N <= c)`` from
    Temme's uniform expansion of the incomplete gamma function
    (``c >= 40``) or the Erlang B recursion (``c < 40``); beyond, in log space
    as ``log C = log B + log c - log(c - a + a B)``.  All terms are positive:
    no cancellation even at utilisation 0.999 and 10**5 servers.  Relative
    error <= 1e-9 against a 50-digit mpmath reference for ``c`` up to 10**5
    and utilisation up to 0.999 (measured: < 1e-11; < 4e-13 for
    ``c <= 2**16``, < 2.5e-13 on the benchmark grid of up to 1000 servers).
    Grids of more than 2**18 points are split between threads (one per
    usable core, or ``CAPACITY_NUM_THREADS``), with bit-for-bit the same
    values; ``benchmarks/bench_erlang.py`` measures the speed on one core
    and on every core.

    References
    ----------
    R. B. Cooper, *Introduction to Queueing Theory*, 2nd ed., North Holland
    (1981), section 3.4, eq. (4.5) (Erlang delay formula) and its relation to
    Erlang B.
    N. M. Temme, "The asymptotic expansion of the incomplete gamma
    functions", SIAM J. Math. Anal. 10 (1979) 757-766.

    Examples
    --------
    The classic staffing example, 10 Erlangs offered to 14 agents:

    >>> from capacity.erlang import erlang_c
    >>> round(erlang_c(14, 10.0), 7)
    0.1741319
    >>> erlang_c(1, 0.3)  # M/M/1: P(wait) = utilisation
    0.3
    >>> erlang_c(4, 5.0)  # overloaded
    1.0
    """
    return scalar_out(_erlang(servers, offered_load, want_c=True))


def sqrt_staffing(offered_load: ArrayLike, beta: ArrayLike) -> int | np.ndarray:
    """Square-root staffing: ``c = ceil(a + beta sqrt(a))`` servers.

    Parameters
    ----------
    offered_load : float or array_like
        Offered load ``a = arrival_rate * E[S]`` in Erlangs, >= 0.
    beta : float or array_like
        Quality-of-service parameter (safety staffing in units of
        ``sqrt(a)``), finite.  ``beta > 0`` keeps M/M/c stable; ``beta <= 0``
        is meaningful only for loss systems (Erlang B).

    Returns
    -------
    int or ndarray of int64
        Number of servers, at least 1, broadcast over the inputs.

    Notes
    -----
    An approximation (a rule of thumb made exact in a limit).  In the
    Halfin-Whitt (quality-and-efficiency-driven) regime, ``a -> inf`` with
    ``(c - a) / sqrt(a) -> beta > 0``, the M/M/c waiting probability tends to

        P(wait) -> [1 + beta Phi(beta) / phi(beta)]^(-1),

    with ``Phi`` and ``phi`` the standard normal cdf and density (about
    0.2234 for ``beta = 1``, 0.0269 for ``beta = 2``), so a fixed ``beta``
    keeps the fraction of waiting requests roughly constant as traffic grows
    while utilisation tends to 1.  At finite load the actual ``erlang_c`` at
    the returned ``c`` differs from the limit by O(1/sqrt(a)); check it with
    :func:`erlang_c`.  ``a + beta sqrt(a)`` is rounded up after a relative
    slack of a few ulps, so that rounding noise in an exact integer does not
    add a server.

    References
    ----------
    S. Halfin and W. Whitt, "Heavy-traffic limits for queues with many
    exponential servers", Operations Research 29 (1981) 567-588, Proposition 1.

    Examples
    --------
    >>> from capacity.erlang import erlang_c, sqrt_staffing
    >>> sqrt_staffing(100.0, 1.0)
    110
    >>> c = sqrt_staffing(10_000.0, 1.0)
    >>> c, round(erlang_c(c, 10_000.0), 3)
    (10100, 0.225)
    """
    a = check_nonnegative(offered_load, "offered_load")
    b = as_float_array(beta, "beta")
    if not np.isfinite(b).all():
        raise ValueError(f"beta must be finite, got {b[~np.isfinite(b)].flat[0] if b.ndim else b.item()!r}")
    x = a + b * np.sqrt(a)
    if (x > 2.0**53).any():
        raise ValueError(f"offered_load too large for an integer server count, got {a.max()!r}")
    servers = np.ceil(x * (1.0 - 8.0 * np.finfo(float).eps))
    servers = np.maximum(servers, 1.0).astype(np.int64)
    return scalar_out(servers)
