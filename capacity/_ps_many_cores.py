"""Processor sharing on c > 1 cores for any service law (approximation; used by :mod:`capacity.ps`).

The tagged-request chain of :mod:`capacity._ps_chain` with the tagged request's own CPU time
as a phase-type law in the state, among others that leave as if their CPU time were
exponential (:func:`_mgc_sf_pdf`); and, where the request never shares a core, its exact
CPU-time law instead of the PH fit (:class:`_NoShareSwap`).  Deterministic CPU time has its own
path (:func:`_det_sf_pdf`): the extra delay ``T - x`` of a fixed attained-service clock.  The
method and its measured error are in :func:`capacity.ps.response_sf` and
:func:`capacity.ps.response_quantile`.  Lognormal and gamma CPU on 2, 4, 8, 16, 32 and 64 cores
are read from shipped tables of this computation (:data:`capacity._quantile_table.PS_MANY_CORES`),
on the core counts between them from the two tables either side, and above 64 (to utilisation
0.85) from the 64-core table read towards infinitely many cores; below scv 0.04 they take
:mod:`capacity._ps_narrow_many_cores` instead (a phase-type fit cannot follow so narrow a law).
The figures below are this path's, which answers every other case.

M/G/c-PS figures (``python benchmarks/bench_ps.py --many-cores``: a 20-rate p99 sweep, rho
0.0625-0.94, E[S] = 25 ms, best of 3, on a shared 2-core machine under load; "former" = the
Erlang-pair tagged size ``2 E(64) - E(32)`` with the no-share swap, timed in the same process)::

    service          c   this path   former    ratio
    deterministic    2     333 ms    1837 ms    5.5
    deterministic    4     243 ms    2154 ms    8.9
    deterministic    8     485 ms    3246 ms    6.7
    gamma scv 0.05   2     478 ms     680 ms    1.4   (same path: noise)
    gamma scv 0.05   4     877 ms     884 ms    1.0
    gamma scv 0.05   8    1138 ms    1193 ms    1.0
    lognormal scv 1  2     825 ms     826 ms    1.0   (same path)
    lognormal scv 1  4     984 ms     955 ms    1.0
    lognormal scv 1  8     682 ms     693 ms    1.0
    lognormal scv 4  2     750 ms     727 ms    1.0   (same path)
    lognormal scv 4  4     884 ms     907 ms    1.0
    lognormal scv 4  8     937 ms     866 ms    0.9

Where the deterministic time went before (``ps.response_quantile(0.99, linspace(10, 150, 20),
Service.deterministic(0.025), 4)``): 96 Erlang phases per evaluation, each one tridiagonal solve
over 31 Euler nodes x ~115 states per point (2,300 per evaluation of 20 points), 10 evaluations
(123 point-evaluations: one just above the size, then Newton from a start ~2x off), >90 % of
it in LAPACK ``zgttrs``.  Now: the evaluation just above the size is the never-share chain
alone; the Newton iterations run first on orders (4, 2, 1) with 21 nodes and the states cut at
a 1e-8 tail (7 solves, ~1/6 of the cost), then two or three on the full orders (16, 8, 4): 28
solves.  Near-constant gamma and lognormal laws still take the PH path (16-20 phases; 5-9
evaluations); nothing of this has been done for them yet.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.linalg.lapack import dgttrf as _dgttrf
from scipy.linalg.lapack import dgttrs as _dgttrs
from scipy.linalg.lapack import zgttrf as _zgttrf
from scipy.linalg.lapack import zgttrs as _zgttrs
from scipy.special import gammaincc, gammaln

from ._laplace import DEFAULT_TERMS, euler_nodes, invert
from ._ps_chain import _state_band, _unique_points
from ._ps_transform import _pad_ph
from .distributions import Service
from .phasetype import phase_type

__all__: list[str] = []   # private: capacity.ps is the public face


# ---------------------------------------------------------------------------
# c cores, phase-type service of the tagged request, exponential others
# ---------------------------------------------------------------------------
# Unknowns (points x Euler nodes x states) per LAPACK call: bounds the memory of one chunk
# (six complex arrays of this length, ~100 MB).
_MGC_CHUNK_UNKNOWNS = 1_000_000


def _mgc_states(rho: np.ndarray, c: np.ndarray, tail: float = 1e-15) -> np.ndarray:
    """Truncation level of the others' count: the M/M/c stationary tail below ``tail``."""
    with np.errstate(divide="ignore"):
        nmax = (c + 10 + np.ceil(np.log(tail) / np.log(np.maximum(rho, 1e-300)))).astype(int)
    return np.where(rho > 0, nmax, c.astype(int) + 1)


def _mgc_sf_pdf(t: np.ndarray, lam: np.ndarray, mu: np.ndarray, c: np.ndarray,
                beta: np.ndarray, rate: np.ndarray, onward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of the tagged request's response time, M/G/c-PS approximated.

    The tagged request's CPU time is phase-type with initial vector ``beta``, an upper
    bidiagonal sub-generator (as every representation of :func:`capacity.phasetype.phase_type`
    is: a phase either moves to the next or exits) given by its diagonal ``-rate`` and
    superdiagonal ``onward`` (rates per second, shape (points, m)); the other requests leave as if their
    CPU time were exponential with the true mean ``1 / mu``.  State: (others n, tagged
    phase i).  At the tagged arrival n has the M/M/c law, which is the M/G/c-PS law too
    (insensitivity).  In state (n, i) the tagged request moves on at rate
    ``share_n (-Tm_ii)`` with ``share_n = min(1, c / (n + 1))``, others arrive at ``lam``
    and leave at ``n share_n mu``.  The transform of P(T > t) is

        L(s) = sum_i beta_i alpha y_i,   (sI - Q + r_i Sh) y_i = 1 + Tm_{i,i+1} Sh y_{i+1},

    one tridiagonal system per phase (``Sh = diag(share_n)``), solved from the last phase
    back; every point, Euler node and state of a chunk is one LAPACK ``zgtsv`` call (the
    systems are stacked with zero couplings between them).  Exact for exponential service
    (then it is the chain of :func:`_mmc_sf_pdf`); for other laws the others' exponential
    departures are the approximation (see :func:`capacity.ps.response_quantile`).
    """
    b = t.size
    m = beta.shape[-1]
    sf = np.empty(b)
    pdf = np.empty(b)
    bottom, nmax = _state_band(lam / (c * mu), c, _mgc_states(lam / (c * mu), c))
    starts = _chunk_starts(nmax - bottom + 1)
    for lo, hi in zip(starts[:-1], starts[1:]):
        sl = slice(lo, min(hi, b))
        sf[sl], pdf[sl] = _mgc_chunk(t[sl], lam[sl], mu[sl], c[sl].astype(float), bottom[sl], nmax[sl], beta[sl],
                                     rate[sl], onward[sl], m)
    return sf, pdf


def _chunk_starts(sizes: np.ndarray) -> list:
    """Chunks of whole points, each at most ``_MGC_CHUNK_UNKNOWNS`` unknowns (points x Euler
    nodes x states; one point may exceed it): the start index of each, and the end."""
    cum = np.cumsum(sizes * euler_nodes(np.ones(1)).shape[-1])   # (at most) the nodes of one point
    starts = [0]
    while starts[-1] < sizes.size:
        base = cum[starts[-1] - 1] if starts[-1] else 0
        starts.append(max(starts[-1] + 1, int(np.searchsorted(cum, base + _MGC_CHUNK_UNKNOWNS, side="right"))))
    starts[-1] = min(starts[-1], sizes.size)
    return starts


def _chain_layout(lam, mu, c, bottom, nmax):
    """The others' chain of every point of a chunk, stacked: (pid, first, share, birth, death,
    alpha, sub, sup) with ``sub``/``sup`` the off-diagonals of ``-Q`` (zero between points)."""
    sizes = nmax - bottom + 1
    pid = np.repeat(np.arange(lam.size), sizes)           # point of each state
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    local = np.arange(pid.size) - first[pid]               # state index within its point's band
    n = bottom[pid] + local                                # the others' count
    top = n == nmax[pid]
    share = np.minimum(1.0, c[pid] / (n + 1.0))
    birth = np.where(top, 0.0, lam[pid])
    death = np.where(local > 0, n * share * mu[pid], 0.0)  # a wall at the band's bottom
    # M/M/c stationary law of the others at the tagged arrival (PASTA), from log ratios
    with np.errstate(divide="ignore"):
        step = np.log(np.maximum(lam[pid] / mu[pid], 1e-300)) - np.log(np.minimum(np.maximum(n, 1), c[pid]))
    step[local == 0] = 0.0
    logp = np.cumsum(step)
    logp -= np.repeat(logp[first], sizes)                  # restart at each point
    logp -= np.repeat(np.maximum.reduceat(logp, first), sizes)
    alpha = np.exp(logp)
    alpha /= np.repeat(np.add.reduceat(alpha, first), sizes)
    sub = np.where(local[1:] == 0, 0.0, -death[1:])
    sup = np.where(top[:-1], 0.0, -birth[:-1])
    return pid, first, share, birth, death, alpha, sub, sup


def _node_blocks(band: np.ndarray, kk: int) -> np.ndarray:
    """An off-diagonal of one node block repeated for ``kk`` nodes, zero between the blocks."""
    blocks = np.concatenate([np.tile(band, kk).reshape(kk, band.size), np.zeros((kk, 1))], axis=1)
    return blocks.ravel()[:-1].astype(complex)


def _mgc_chunk(t, lam, mu, c, bottom, nmax, beta, rate_ph, onward_ph, m):
    pid, first, share, birth, death, alpha, sub1, sup1 = _chain_layout(lam, mu, c, bottom, nmax)
    s = euler_nodes(t)                                     # (points, K)
    kk = s.shape[-1]
    # Layout (K, states): node-major, each node block holds every point's chain.
    s_flat = s[pid].T                                      # (K, L)
    length = pid.size
    sub, sup = _node_blocks(sub1, kk), _node_blocks(sup1, kk)
    base = s_flat + (birth + death)
    tot = np.zeros((kk, length), dtype=complex)
    y = np.zeros((kk, length), dtype=complex)
    factors, factored_rate = None, None
    for i in range(m - 1, -1, -1):
        rate = rate_ph[:, i][pid]
        onward = onward_ph[:, i][pid]
        rhs = 1.0 + onward * share * y
        if factors is None or not np.array_equal(rate, factored_rate):
            # the phases of an Erlang run share one matrix: factor it once (LU), solve per phase
            factors, factored_rate = _zgttrf(sub, (base + rate * share).ravel(), sup)[:5], rate
        y = _zgttrs(*factors, rhs.reshape(-1, 1))[0].reshape(kk, length)
        if beta[:, i].any():
            tot += beta[:, i][pid] * alpha * y
    lst = np.add.reduceat(tot, first, axis=1).T            # (points, K)
    return invert(lambda _s: lst, t), invert(lambda _s: 1.0 - s * lst, t)


# ---------------------------------------------------------------------------
# c cores: the tagged request's exact size while it never shares a core
# ---------------------------------------------------------------------------
# Gauss-Laguerre rule for E[g(S); S > t] = P(S > t) int_0^inf g(S at tail level P(S > t) e^-z) e^-z dz.
_LAGUERRE_Z, _LAGUERRE_W = np.polynomial.laguerre.laggauss(40)


def _no_share_modes(lam: np.ndarray, mu: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P0(x) = P(a request of CPU time x never shares a core) = sum_j coef_j exp(theta_j x).

    It never shares while it and the others number at most c: the others' chain on
    n = 0..c-1 (arrivals ``lam``, departures ``n mu``: everyone has a core), killed when an
    arrival would make c others, started from the M/M/c law restricted to n < c.  That
    birth-death sub-generator is symmetrisable, so ``eigh_tridiagonal`` gives its modes.
    Returns arrays (points, max c) padded with zero coefficients.
    """
    bottom, top = _state_band(lam / (mu * c), c, c.astype(int))
    never = top < c - 1          # the band ends below c - 1: nobody ever shares a core
    width = int(np.max(np.where(never, 1, c - bottom)))
    coef = np.zeros((lam.size, width))
    theta = np.zeros((lam.size, width))
    uniq, inverse = _unique_points(lam / mu, c, mu)
    for j, (a, cc, rate) in enumerate(uniq):
        cc = int(cc)
        rows = inverse == j
        low = int(bottom[rows][0])
        if a == 0 or never[rows][0]:
            coef[rows, 0] = 1.0
            continue
        n = np.arange(low, cc, dtype=float)
        # M/M/c: P(N = n) proportional to a^n / n! below c, and sum_{n >= c} = a^c / c! / (1 - a/c)
        logw = n * np.log(a) - gammaln(n + 1)
        log_rest = cc * np.log(a) - gammaln(cc + 1.0) - np.log1p(-a / cc)
        shift = max(logw.max(), log_rest)
        norm = np.exp(logw - shift).sum() + np.exp(log_rest - shift)
        birth, death = np.full(n.size, a * rate), np.where(n > low, n * rate, 0.0)  # a wall at the bottom
        # detailed balance w_n lam = w_{n+1} (n+1) mu with w the same a^n / n!: symmetrise by sqrt(w)
        half = 0.5 * (logw - logw.max())
        eig, vec = eigh_tridiagonal(-(birth + death), np.sqrt(birth[:-1] * death[1:])) if n.size > 1 else \
            (-(birth + death), np.ones((1, 1)))
        # pi_n / sqrt(w_n), formed in logs: both factors overflow alone far below the mode
        coef[rows, :n.size] = ((np.exp(logw - shift - half) / norm) @ vec) * (vec.T @ np.exp(half))
        theta[rows, :n.size] = eig
    return coef, theta


def _hyper_erlang_branches(beta: np.ndarray, rate: np.ndarray, onward: np.ndarray):
    """(weights, orders, rates) of an upper-bidiagonal PH (diagonal ``-rate``, superdiagonal
    ``onward``) made of Erlang runs entered where ``beta > 0``, as
    :func:`capacity.phasetype.phase_type` builds them; shape (points, m)."""
    m = beta.shape[-1]
    # phases left in the run from each phase: count until a phase that does not move on
    orders = np.ones(beta.shape)
    for i in range(m - 2, -1, -1):
        orders[..., i] = np.where(onward[..., i] > 0, orders[..., i + 1] + 1, 1.0)
    return beta, orders, rate


def _gamma_tail(k, rate, theta, t):
    """E[exp(theta S); S > t] for S ~ gamma(shape k, rate), theta <= 0 (broadcast)."""
    shifted = rate - theta
    with np.errstate(divide="ignore", under="ignore", over="ignore"):
        return np.exp(k * (np.log(rate) - np.log(shifted))) * gammaincc(k, shifted * t)


def _gamma_density(k, rate, t):
    with np.errstate(divide="ignore", under="ignore", over="ignore", invalid="ignore"):
        return np.where(t > 0, np.exp(k * np.log(rate) + (k - 1) * np.log(np.maximum(t, 1e-300)) - rate * t
                                      - gammaln(k)), 0.0)


def _no_share_ph_part(t: np.ndarray, coef: np.ndarray, theta: np.ndarray, weights: np.ndarray,
                      orders: np.ndarray, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E[P0(S); S > t] and P0(t) f(t) for the phase-type size (branches as from
    :func:`_hyper_erlang_branches`): closed forms per branch and mode."""
    tt = t[:, None, None]
    tail = _gamma_tail(orders[:, :, None], rates[:, :, None], theta[:, None, :], tt)
    tail = np.einsum("pb,pj,pbj->p", weights, coef, tail)
    density = (weights * _gamma_density(orders, rates, t[:, None])).sum(axis=1)
    return tail, _no_share_probability(t, coef, theta) * density


def _no_share_probability(x: np.ndarray, coef: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """P0(x) on flat points (``x`` shape (points,) or (points, k))."""
    xx = x[..., None]
    with np.errstate(under="ignore"):
        val = (coef.reshape(coef.shape[:1] + (1,) * (xx.ndim - 2) + coef.shape[1:])
               * np.exp(theta.reshape(coef.shape[:1] + (1,) * (xx.ndim - 2) + coef.shape[1:]) * xx)).sum(-1)
    return np.clip(val, 0.0, 1.0)


#: Erlang orders whose Richardson combination 2 E(2k) - E(k) stands for the tagged request's
#: fixed CPU time (deterministic service) on several cores; the error of an Erlang-k size is
#: O(1/k), of the combination O(1/k^2).
DETERMINISTIC_TAGGED_ORDER = 32


def _tagged_sizes(svc: Service, shape: tuple, rows: np.ndarray) -> list:
    """The tagged request's CPU time on the selected flat points, as a linear combination
    ``[(weight, beta, rate, onward), ...]`` of upper-bidiagonal PH laws (shape (points, m))."""
    if svc.family == "deterministic":
        x = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()[rows]
        out = []
        for weight, k in ((2.0, 2 * DETERMINISTIC_TAGGED_ORDER), (-1.0, DETERMINISTIC_TAGGED_ORDER)):
            beta = np.zeros((x.size, k))
            beta[:, 0] = 1.0
            rate = np.broadcast_to((k / x)[:, None], (x.size, k))
            onward = np.concatenate([rate[:, 1:], np.zeros((x.size, 1))], axis=1)
            out.append((weight, beta, rate, onward))
        return out
    beta, tm = phase_type(svc, fit="distribution")
    beta, tm = _pad_ph(beta, tm, shape)
    beta, tm = beta[rows], tm[rows]
    rate = -np.diagonal(tm, axis1=-2, axis2=-1)
    onward = np.concatenate([np.diagonal(tm, 1, axis1=-2, axis2=-1), np.zeros(beta.shape[:-1] + (1,))], axis=-1)
    return [(1.0, beta, rate, onward)]


# Families whose phase-type form is exact (nothing to swap back).
_EXACT_PH = ("exponential", "erlang", "hyperexponential")


class _NoShareSwap:
    """The PH fit's error where it matters most with many cores: while the tagged request
    never shares a core its response time is its CPU time, so that part of P(T > t),
    ``E[P0(S); S > t]``, is taken with the service's exact law instead of the PH fit's
    (P0 from :func:`capacity._ps_chain._no_share_modes`).  Returns the changes of P(T > t)
    and of the density on the selected points."""

    def __init__(self, svc: Service, shape: tuple, many: np.ndarray, lam, mu, c, tagged: list):
        self.svc, self.shape, self.many = svc, shape, many
        self.coef, self.theta = _no_share_modes(lam, mu, c)
        self.branches = [(weight, _hyper_erlang_branches(beta, rate, onward)) for weight, beta, rate, onward in tagged]
        fam = svc.family
        flat = {k: np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()[many]
                for k, v in svc._params.items() if k in ("mean", "scv")}
        self.kind = fam if fam in ("deterministic", "gamma", "empirical") else "quadrature"
        self.params = flat

    def _full(self, values: np.ndarray, sel: np.ndarray, fill: float) -> np.ndarray:
        full = np.full((values.shape[0],) + (int(np.prod(self.shape)),), fill)
        full[:, sel] = values
        return full.reshape((values.shape[0],) + self.shape)

    def __call__(self, t: np.ndarray, sel: np.ndarray, sub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ts = t[sel]
        coef, theta = self.coef[sub], self.theta[sub]
        ph_tail, ph_density = 0.0, 0.0
        for weight, branches in self.branches:
            a, b = _no_share_ph_part(ts, coef, theta, *(x[sub] for x in branches))
            ph_tail, ph_density = ph_tail + weight * a, ph_density + weight * b
        if self.kind == "deterministic":
            x0 = self.params["mean"][sub]
            tail = np.where(x0 > ts, _no_share_probability(x0, coef, theta), 0.0)
            density = np.zeros(ts.shape)
        elif self.kind == "gamma":
            k = 1.0 / self.params["scv"][sub]
            rate = k / self.params["mean"][sub]
            tail = np.einsum("pj,pj->p", coef, _gamma_tail(k[:, None], rate[:, None], theta, ts[:, None]))
            density = _no_share_probability(ts, coef, theta) * _gamma_density(k, rate, ts)
        elif self.kind == "empirical":
            # the sum over the samples above t, in chunks of samples (memory: points x chunk x modes)
            x = self.svc._samples
            tail = np.zeros(ts.shape)
            step = max(1, int(2e6 // max(1, ts.size * coef.shape[1])))
            for lo in range(0, x.size, step):
                xs = x[lo:lo + step]
                p0 = _no_share_probability(np.broadcast_to(xs, (ts.size, xs.size)), coef, theta)
                tail += np.where(xs[None, :] > ts[:, None], p0, 0.0).sum(axis=1)
            tail /= x.size
            density = np.zeros(ts.shape)
        else:
            # E[P0(S); S > t] = P(S > t) int_0^inf P0(x(P(S > t) e^-z)) e^-z dz, x(u) the size with
            # tail u (Gauss-Laguerre).
            above = np.asarray(self.svc.sf(self._full(ts[None], sel, 0.0)), dtype=float).reshape(-1)[sel]
            levels = above[None, :] * np.exp(-_LAGUERRE_Z)[:, None]            # (Z, points)
            u = np.clip(1.0 - levels, 1e-300, 1.0 - 1e-16)
            sizes = np.asarray(self.svc.ppf(self._full(u, sel, 0.5)), dtype=float).reshape(u.shape[0], -1)[:, sel]
            tail = above * (_LAGUERRE_W[:, None] * _no_share_probability(sizes.T, coef, theta).T).sum(axis=0)
            frozen = getattr(self.svc, "_frozen", None)
            pdf = getattr(frozen, "pdf", None)
            density = np.zeros(ts.shape) if pdf is None else _no_share_probability(ts, coef, theta) * \
                np.asarray(pdf(self._full(ts[None], sel, 1.0)[0]), dtype=float).reshape(-1)[sel]
        return tail - ph_tail, density - ph_density


# ---------------------------------------------------------------------------
# c cores, deterministic CPU time: the extra delay R = T - x
# ---------------------------------------------------------------------------
#: Erlang orders and weights of the three-term Richardson combination that stands for the
#: tagged request's fixed attained-service clock in :func:`_det_sf_pdf` (error O(1/k^3) where
#: the extra delay is smooth); measured in :func:`capacity.ps.response_quantile`.
DETERMINISTIC_DELAY_ORDERS = ((8.0 / 3.0, 16), (-2.0, 8), (1.0 / 3.0, 4))
#: The same with orders 4, 2, 1 (7 solves instead of 28): the quantile solver's first stage.
DETERMINISTIC_COARSE_ORDERS = ((8.0 / 3.0, 4), (-2.0, 2), (1.0 / 3.0, 1))
# False: deterministic CPU on c > 1 cores goes through the former path (the Richardson pair of
# Erlang sizes of :func:`_tagged_sizes` in :func:`_mgc_sf_pdf` with :class:`_NoShareSwap`);
# private, for the tests and benchmarks/bench_ps.py.
DETERMINISTIC_DELAY = True
# Within this fraction of x above x, P(T > t) is taken as P(R > 0) (see _det_sf_pdf).
_DET_JUST_ABOVE = 1e-8


def _det_sf_pdf(t: np.ndarray, lam: np.ndarray, mu: np.ndarray, c: np.ndarray, x: np.ndarray,
                orders=DETERMINISTIC_DELAY_ORDERS, coarse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of T for a tagged request of fixed CPU time ``x``, M/G/c-PS
    with the others leaving as if exponential (the approximation of :func:`_mgc_sf_pdf`).

    In the tagged request's attained service ``a`` the others' count is a Markov chain of
    generator ``H = Sh^-1 Q`` (``Sh = diag(share_n)``, ``share_n = min(1, c/(n+1))``) and real
    time runs at ``1/share_n``, so ``T = x + R`` with the extra delay
    ``R = int_0^x D(N(a)) da``, ``D_n = 1/share_n - 1 >= 0`` (zero while nobody shares), and

        E[exp(-sR)] = alpha expm(x (H - sD)) 1.

    P(T > t) = P(R > t - x) is inverted in ``r = t - x`` (Euler), where the jump of P(T > t)
    at ``x`` (the never-share atom) and the kink of the density after it sit at the origin
    and cause no ringing -- the Erlang size of :func:`_tagged_sizes` smeared them over
    ``x (1 +- 1/sqrt(k))`` and the inversion in ``t`` rang there.  ``expm(x M)`` is replaced
    by ``k`` backward-Euler steps ``(I - (x/k) M)^-1``, i.e. an Erlang-k clock, each step one
    tridiagonal solve (``(s (I - Sh) - Q + r Sh) v_i = r Sh v_{i+1}``, ``r = k/x``, one LU per
    order), and the orders are combined by Richardson extrapolation
    (``DETERMINISTIC_DELAY_ORDERS``).  The density inverts ``E[exp(-sR)] - P(R = 0)``, with
    ``P(R = 0)`` the same steps as ``s -> inf`` (the never-share chain alone), so that no
    atom is left in the transform.  Exact as k grows; errors against ``expm`` of the same chain
    (``tests/test_ps_many_cores.py``) in :func:`capacity.ps.response_quantile`.

    ``coarse``: the quantile solver's first stage (a start for the full computation, whose
    answer does not depend on it): 21 Euler nodes instead of 31 and the others' count cut
    where the M/M/c tail is below 1e-8 instead of 1e-15 (about half the states at high load).
    """
    b = t.size
    sf, pdf = np.ones(b), np.zeros(b)
    # T >= x: P(T > t) = 1 below x.  Within 1e-8 x above it P(T > t) = P(R > 0) = 1 - P(R = 0) to
    # ~1e-8 (the density of R is bounded): the never-share chain alone, no transform (the
    # quantile solver asks there first, for every point).
    near = (t > x) & (t - x <= _DET_JUST_ABOVE * x)
    far = t - x > _DET_JUST_ABOVE * x
    for idx, atom_only in ((np.flatnonzero(near), True), (np.flatnonzero(far), False)):
        if idx.size == 0:
            continue
        rho = lam[idx] / (c[idx] * mu[idx])
        bottom, nmax = _state_band(rho, c[idx], _mgc_states(rho, c[idx], 1e-8 if coarse else 1e-15))
        starts = _chunk_starts(nmax - bottom + 1)
        for lo, hi in zip(starts[:-1], starts[1:]):
            pts, sl = idx[lo:hi], slice(lo, hi)
            sf[pts], pdf[pts] = _det_chunk(t[pts] - x[pts], lam[pts], mu[pts], c[pts].astype(float),
                                           bottom[sl], nmax[sl], x[pts], orders, atom_only,
                                           10 if coarse else DEFAULT_TERMS)
    return sf, pdf


def _det_chunk(r, lam, mu, c, bottom, nmax, x, orders, atom_only=False, terms=DEFAULT_TERMS):
    pid, first, share, birth, death, alpha, sub1, sup1 = _chain_layout(lam, mu, c, bottom, nmax)
    length = pid.size
    # s -> inf: every state where the tagged request shares is left at once (P(R = 0)); a real
    # system on the same layout, the shared states cut off (diagonal 1, right-hand side 0)
    free = share >= 1.0
    sub0 = np.where(free[1:] & free[:-1], sub1, 0.0)
    sup0 = np.where(free[1:] & free[:-1], sup1, 0.0)
    atom = np.zeros(r.size)                                # P(R = 0)
    for weight, order in orders:
        rate = order / x[pid]
        factors0 = _dgttrf(sub0, np.where(free, birth + death + rate, 1.0), sup0)[:5]
        v0 = np.ones(length)
        for _ in range(order):
            v0 = _dgttrs(*factors0, np.where(free, rate * v0, 0.0).reshape(-1, 1))[0].ravel()
        atom += weight * np.add.reduceat(alpha * v0, first)
    if atom_only:
        return 1.0 - atom, np.zeros(r.size)
    s = euler_nodes(r, terms)                              # (points, K)
    kk = s.shape[-1]
    sub, sup = _node_blocks(sub1, kk), _node_blocks(sup1, kk)
    base = s[pid].T * (1.0 - share) + (birth + death)      # (K, L), node-major as in _mgc_chunk
    lst = np.zeros((r.size, kk), dtype=complex)            # E[exp(-sR)]
    for weight, order in orders:
        rate = order / x[pid]
        # every step solves with the same matrix: one LU per order
        factors = _zgttrf(sub, (base + rate * share).ravel(), sup)[:5]
        v = np.ones((kk, length), dtype=complex)
        for _ in range(order):
            v = _zgttrs(*factors, (rate * share * v).reshape(-1, 1))[0].reshape(kk, length)
        lst += weight * np.add.reduceat(alpha * v, first, axis=1).T
    return (invert(lambda _s: (1.0 - lst) / s, r, terms),
            invert(lambda _s: lst - atom[:, None], r, terms))
