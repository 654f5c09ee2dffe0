"""Processor sharing (PS): how an event loop or a time-sliced CPU serves requests.

With ``n`` requests present and ``c`` cores, every request progresses at rate
``min(1, c/n)`` (egalitarian processor sharing; ``c = 1`` is the classic
M/G/1-PS queue, the model of a Node.js-style event loop that interleaves
in-flight requests).  Arrivals are Poisson with rate ``arrival_rate``
(requests/s); ``service`` is the CPU time one request needs (seconds).

Means are exact and insensitive (they depend on the service distribution
only through its mean).  The response-time distribution is not: PS has a
much heavier tail than FCFS at the same mean (at utilisation 0.5 and
E[S] = 1 s exponential, the p99.9 is 22.2 s under PS and 13.8 s under FCFS).

* One core: exact for phase-type (PH) service via the sojourn-time Laplace
  transform derived below (see :func:`response_sf`), numerically inverted
  (Euler algorithm); other service distributions are replaced by a PH
  fit of the whole distribution (:mod:`capacity.phasetype`; deterministic
  service keeps the exact size for the tagged request), an approximation
  whose error is measured in :func:`response_quantile`.  For lognormal
  service that computation is precomputed on a grid and shipped
  (:mod:`capacity._quantile_table`) and read from that table
  (``benchmarks/bench_ps.py`` times it against the direct computation).
* ``c`` cores (and one core) with exponential service: exact, by a tagged-request Markov chain;
  other service distributions raise ``NotImplementedError`` for the
  distribution (the means stay exact).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.linalg.lapack import zgtsv as _zgtsv

from . import _quantile_table as _table
from ._checks import check_nonnegative, check_quantile, scalar_out
from ._common import prepare
from ._laplace import euler_nodes, invert
from .distributions import Service
from .erlang import erlang_c
from .phasetype import _ph_mean, phase_type

__all__ = ["conditional_mean_response", "mean_number", "mean_response", "response_quantile", "response_sf"]

ArrayLike = Any

# Gauss-Legendre rule used on every quadrature panel, and the largest phase
# rotation / decay (radians, or e-folds) allowed across one panel.  Measured
# against the exact M/M/1-PS chain: 16 nodes on 10-radian panels left 3e-5
# at rho = 0.9 (the integrand has complex singularities near the real axis
# at high load); 32 nodes on 3-radian panels stay below 1e-9 up to rho = 0.99.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(32)
_PANEL_SPAN = 3.0
_GL16 = np.polynomial.legendre.leggauss(16)
_LOW_RHO = 0.95
# Beyond tau = _HORIZON * t the factor exp(-Re(s) tau) = exp(-11.5 * 3.3) < 4e-17
# at every Euler node, so the size integral can stop there.
_HORIZON = 3.3
# A phase i stops constraining the panel width where mu_i x > _ALIVE_CUT.
_ALIVE_CUT = 60.0
_SPIN_SPAN = 3.0
# Relative size (e-folds) below which the non-leading modes of D(x) are dropped (closed-form tail).
_TAIL_DEAD = 37.0
# Size quantile beyond which the service-time density is ignored.
_SIZE_TAIL = 1e-17


# ---------------------------------------------------------------------------
# Batched matrix exponential (scipy.linalg.expm loops in Python over a batch)
# ---------------------------------------------------------------------------
def _expm(a: np.ndarray) -> np.ndarray:
    """expm of a stack of small matrices: scaling and squaring with a
    degree-14 Taylor polynomial on norms <= 1/2 (truncation < 3e-17)."""
    a = np.asarray(a)
    d = a.shape[-1]
    norm = np.max(np.sum(np.abs(a), axis=-1), axis=-1)
    with np.errstate(divide="ignore"):
        j = np.maximum(0, np.ceil(np.log2(np.maximum(norm, 1e-300) / 0.5))).astype(int)
    scaled = a * np.ldexp(1.0, -j)[..., None, None]
    eye = np.eye(d, dtype=a.dtype)
    out = eye + scaled / 14.0
    for k in range(13, 0, -1):
        out = eye + (scaled @ out) / k
    jmax = int(j.max()) if j.size else 0
    for i in range(jmax):
        sq = out @ out
        out = np.where((i < j)[..., None, None], sq, out)
    return out


# ---------------------------------------------------------------------------
# One core: sojourn-time transform for PH service
# ---------------------------------------------------------------------------
def _ph_size_horizon(beta: np.ndarray, tm: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """A size x with P(S > x) <= _SIZE_TAIL, per parameter point (doubling)."""
    x = np.array(mean, dtype=float, copy=True)
    ones = np.ones(beta.shape)
    for _ in range(80):
        sf = np.einsum("...i,...ij,...j->...", beta, _expm(tm * x[..., None, None]), ones)
        big = sf > _SIZE_TAIL
        if not big.any():
            break
        x = np.where(big, 2.0 * x, x)
    return x


def _ps1_lst(s: np.ndarray, lam: np.ndarray, beta: np.ndarray, tm: np.ndarray,
             horizon: np.ndarray) -> np.ndarray:
    """E[exp(-s T)] of the M/PH/1-PS response time, batched.

    ``s``: (n, K) complex; ``lam``, ``horizon``: (n,); ``beta``: (n, m);
    ``tm``: (n, m, m).  Returns (n, K).

    E[exp(-s T(x))] = (1 - rho) exp(-(s + lam) x) / (z(x) - rho pi_e y(x)) with
    (y, z)(x) = expm(M x) (1, ..., 1), M = [[Tm - (s + lam) I, t], [-lam beta, 0]],
    integrated against the PH density beta expm(Tm x) t by composite
    Gauss-Legendre quadrature; see response_sf for the derivation.
    """
    n, nk = s.shape
    m = beta.shape[-1]
    tvec = -tm.sum(axis=-1)
    inv_row = np.linalg.solve(np.swapaxes(-tm, -1, -2), beta[..., None])[..., 0]  # beta (-Tm)^-1
    mean = inv_row.sum(axis=-1)
    rho = lam * mean
    pi_e = inv_row / mean[:, None]
    big = np.zeros((n, nk, m + 1, m + 1), dtype=complex)
    eye = np.eye(m)
    big[..., :m, :m] = tm[:, None] - (s + lam[:, None])[..., None, None] * eye
    big[..., :m, m] = tvec[:, None, :]
    big[..., m, :m] = -(lam[:, None] * beta)[:, None, :]
    # Common number of panels; each element has its own panel width.
    rate = np.max(np.abs(np.diagonal(tm, axis1=-2, axis2=-1)), axis=-1) + lam
    spin = np.max(np.abs(s), axis=-1)
    panels = int(np.clip(np.max(np.ceil(horizon * np.maximum(spin, rate) / _PANEL_SPAN)), 1, 100_000))
    width = horizon / panels
    step = _expm(big * width[:, None, None, None])
    step_size = _expm(tm * width[:, None, None])
    state = np.ones((n, nk, m + 1), dtype=complex)
    logz = np.zeros((n, nk), dtype=complex)
    vrow = beta.astype(float).copy()
    states = np.empty((panels, n, nk, m + 1), dtype=complex)
    logzs = np.empty((panels, n, nk), dtype=complex)
    vrows = np.empty((panels, n, m))
    for p in range(panels):
        states[p], logzs[p], vrows[p] = state, logz, vrow
        state = (step @ state[..., None])[..., 0]
        z = state[..., m]
        # (y, z) only matters up to a common factor: renormalise so nothing over/underflows.
        state = state / z[..., None]
        logz = logz + np.log(z)
        vrow = np.einsum("ni,nij->nj", vrow, step_size)
    start = np.arange(panels)[:, None] * width  # (P, n)
    total = np.zeros((n, nk), dtype=complex)
    for xg, wg in zip(_GL_X, _GL_W):
        frac = 0.5 * (xg + 1.0)
        e_node = _expm(big * (frac * width)[:, None, None, None])
        f_node = _expm(tm * (frac * width)[:, None, None])
        node = (e_node @ states[..., None])[..., 0]
        x = start + frac * width  # (P, n)
        dens = np.einsum("pni,nij,nj->pn", vrows, f_node, tvec)
        denom = node[..., m] - rho[None, :, None] * np.einsum("pnki,ni->pnk", node[..., :m], pi_e)
        expo = -(s[None] + lam[None, :, None]) * x[..., None] - logzs
        g = (1.0 - rho)[None, :, None] * np.exp(expo) / denom
        total += (0.5 * wg) * width[:, None] * np.sum(dens[..., None] * g, axis=0)
    return total


# ---------------------------------------------------------------------------
# Transform path, fast: one eigen-decomposition of M(s) per (s, point)
# ---------------------------------------------------------------------------
def _reachable(beta: np.ndarray, tm: np.ndarray) -> np.ndarray:
    """Phases the chain can visit (padding phases of _pad_ph are not)."""
    m = beta.shape[-1]
    reach = beta > 0
    link = (tm > 0) & ~np.eye(m, dtype=bool)
    for _ in range(m):
        new = reach | np.any(reach[..., :, None] & link, axis=-2)
        if np.array_equal(new, reach):
            break
        reach = new
    return reach


def _panel_layout(beta, tm, lam, spin, horizon):
    """Variable-width quadrature panels over [0, horizon), per point.

    The width at x is _PANEL_SPAN / max(spin, lam + mu(x)), with mu(x) the
    fastest phase rate still alive at x (mu x < _ALIVE_CUT): a phase whose
    rate times x exceeds the cut contributes less than e^-_ALIVE_CUT (times
    polynomial and conditioning factors) to the density and to the
    denominator D(x), so it no longer forces narrow panels.  Returns
    ``start`` (P, n), ``level`` (P, n) indices into ``widths`` (n, m), and
    ``live`` (P, n) (False for padding panels of points that are done),
    ``widths`` and the end of the last panel (n,).
    """
    n, m = beta.shape
    rates = np.where(_reachable(beta, tm), -np.diagonal(tm, axis1=-2, axis2=-1), 0.0)
    order = -np.sort(-rates, axis=-1)
    n_reach = np.sum(order > 0, axis=-1)
    widths = 1.0 / np.maximum(spin[:, None] / _SPIN_SPAN, (order + lam[:, None]) / _PANEL_SPAN)
    rows = np.arange(n)
    x = np.zeros(n)
    starts, levels, lives = [], [], []
    while True:
        live = x < horizon
        if not live.any() or len(starts) >= 100_000:
            break
        j = np.minimum(np.sum(order * x[:, None] >= _ALIVE_CUT, axis=-1), n_reach - 1)
        starts.append(x.copy())
        levels.append(j)
        lives.append(live)
        x = np.where(live, x + widths[rows, j], x)
    # reshape/dtype keep the shapes right when no panel is needed (e.g. no arrivals:
    # the closed-form tail starts at x = 0).
    return (np.array(starts, dtype=float).reshape(-1, n), np.array(levels, dtype=np.int64).reshape(-1, n),
            np.array(lives, dtype=bool).reshape(-1, n), widths, x)


def _ps1_lst_eig(s, lam, beta, tm, horizon, rule=None):
    """Same as _ps1_lst, by eigen-decomposing M(s) once per (point, s).

    With M = V diag(d) V^-1, the denominator z - rho pi_e y of the
    conditional transform is D(x) = sum_j c_j exp(d_j x), c = (r V) * (V^-1 1),
    r = (-rho pi_e, 1): O(m) work per quadrature node instead of a matrix
    exponential.  Panels widen where fast phases have died out
    (_panel_layout).  Returns (lst, bad); ``bad`` flags (point, s) pairs whose
    eigenvector basis loses more than 1e-6 relative accuracy to cancellation
    (near-defective M, e.g. Erlang at very light load), to be recomputed by
    _ps1_lst.
    """
    n, nk = s.shape
    m = beta.shape[-1]
    tvec = -tm.sum(axis=-1)
    inv_row = np.linalg.solve(np.swapaxes(-tm, -1, -2), beta[..., None])[..., 0]
    mean = inv_row.sum(axis=-1)
    rho = lam * mean
    pi_e = inv_row / mean[:, None]
    big = np.zeros((n, nk, m + 1, m + 1), dtype=complex)
    eye = np.eye(m)
    big[..., :m, :m] = tm[:, None] - (s + lam[:, None])[..., None, None] * eye
    big[..., :m, m] = tvec[:, None, :]
    big[..., m, :m] = -(lam[:, None] * beta)[:, None, :]
    with np.errstate(all="ignore"):
        d, vec = np.linalg.eig(big)
        try:
            w = np.linalg.solve(vec, np.ones((n, nk, m + 1, 1), dtype=complex))[..., 0]
        except np.linalg.LinAlgError:
            return np.zeros((n, nk), dtype=complex), np.ones((n, nk), dtype=bool)
        rvec = np.concatenate([-rho[:, None] * pi_e, np.ones((n, 1))], axis=-1)
        coef = np.einsum("ni,nkij->nkj", rvec, vec) * w
        # Size of the basis compared with the vector it represents: cancellation at x = 0.
        cond = np.sum(np.abs(vec) * np.abs(w)[..., None, :], axis=(-1, -2)) / (m + 1)
    rate_x = d + (s + lam[:, None])[..., None]  # exponent of exp(-(s+lam)x) D(x) per mode
    # Beyond x_dead every mode but the leading one is below e^-_TAIL_DEAD relative to it, so
    # the integrand is f(x) exp(-r x) / c exactly (to that level), integrated in closed form.
    lead_idx = np.argmax(rate_x.real, axis=-1)[..., None]
    r_lead = np.take_along_axis(rate_x, lead_idx, axis=-1)
    c_lead = np.take_along_axis(coef, lead_idx, axis=-1)
    with np.errstate(all="ignore"):
        gap = (r_lead - rate_x).real
        reach = (np.log(np.abs(coef)) - np.log(np.abs(c_lead)) + _TAIL_DEAD) / gap
        reach = np.where(np.arange(m + 1) == lead_idx, 0.0, np.where(coef == 0, 0.0, reach))
        reach = np.where(np.isnan(reach) | (gap <= 0) & (np.arange(m + 1) != lead_idx), np.inf, reach)
    x_dead = np.max(np.maximum(reach, 0.0), axis=(-1, -2))
    closed = np.isfinite(x_dead) & (x_dead < horizon)
    spin = np.max(np.abs(s), axis=-1)
    start, level, live, widths, x_end = _panel_layout(beta, tm, lam, spin, np.where(closed, x_dead, horizon))
    xg, wg = rule or (_GL_X, _GL_W)
    frac = 0.5 * (xg + 1.0)
    # Density at the nodes: v_p expm(Tm frac w) t, with v_p = beta expm(Tm x_p) stepped panel by panel.
    steps = _expm(tm[:, None] * widths[..., None, None])  # (n, L, m, m)
    node_t = (_expm(tm[:, None, None] * (widths[..., None, None, None] * frac[:, None, None]))
              @ tvec[:, None, None, :, None])[..., 0]  # (n, L, G, m)
    rows = np.arange(n)
    panels = start.shape[0]
    dens = np.empty((panels, n, frac.size))
    vrow = beta.astype(float).copy()
    for p in range(panels):
        j = level[p]
        dens[p] = np.einsum("ni,ngi->ng", vrow, node_t[rows, j]) * live[p][:, None]
        vrow = np.where(live[p][:, None], np.einsum("ni,nij->nj", vrow, steps[rows, j]), vrow)
    width = widths[rows, level]  # (P, n)
    total = np.zeros((n, nk), dtype=complex)
    bad = ~(np.isfinite(cond) & (cond < 1e6)) | ~np.all(np.isfinite(coef), axis=-1)
    coef = np.where(bad[..., None], 0.0, coef)
    # x >= 0, so the largest exponent at x is x * max Re(rate): scale by it (no overflow).
    lead = np.max(rate_x.real, axis=-1)  # (n, K)
    shifted = rate_x - lead[..., None]
    wd = np.where(live, width, 0.0) * dens.transpose(2, 0, 1)  # (G, P, n)
    # Points need different numbers of panels (live panels are a prefix): integrate groups of
    # similar counts together so a sweep does not pay the largest count for every point.
    counts = live.sum(axis=0)
    order = np.argsort(counts, kind="stable")
    sorted_counts = counts[order]
    lo = 0
    with np.errstate(all="ignore"):
        while lo < n:
            hi = int(np.searchsorted(sorted_counts, 1.25 * sorted_counts[lo] + 1, side="right"))
            grp = order[lo:hi]
            lo = hi
            pg = int(sorted_counts[hi - 1])
            st, wi, lv = start[:pg, grp], width[:pg, grp], live[:pg, grp, None]
            sh, cf, ld = shifted[grp], coef[grp], lead[grp]
            for g in range(frac.size):
                x = (st + frac[g] * wi)[..., None]  # (P, n, 1)
                terms = cf * np.exp(sh[None] * x[..., None])
                den = np.sum(terms, axis=-1)
                if g == 0:  # cancellation is a smooth property of x: check it once per panel
                    bad[grp] |= np.any((np.sum(np.abs(terms), axis=-1) > 1e6 * np.abs(den)) & lv, axis=0)
                gx = np.where(lv, np.exp(-ld[None] * x) / den, 0.0)
                total[grp] += (0.5 * wg[g]) * np.einsum("pn,pnk->nk", wd[g][:pg, grp], gx)
    if closed.any():
        # int_{x_end}^inf beta e^{Tm x} t e^{-r x} dx / c = v(x_end) (r I - Tm)^-1 t e^{-r x_end} / c
        # (Re r > 0 > eigenvalues of Tm, so the solve is regular).
        cr = np.flatnonzero(closed)
        r = r_lead[cr, :, 0]
        mat = r[..., None, None] * eye - tm[cr, None]
        sol = np.linalg.solve(mat, np.broadcast_to(tvec[cr, None, :, None], mat.shape[:-1] + (1,)))[..., 0]
        with np.errstate(all="ignore"):
            tail = (np.einsum("ni,nki->nk", vrow[cr], sol) * np.exp(-r * x_end[cr, None]) / c_lead[cr, :, 0])
        total[cr] += tail
    total = (1.0 - rho)[:, None] * total
    bad |= ~np.isfinite(total)
    return total, bad


def _ps1_lst_atom(s, lam, beta, tm, x):
    """E[exp(-s T(x))] for a tagged request of fixed size ``x`` (no size integral).

    Deterministic service: the tagged request's size is exactly the mean, so
    its conditional transform is the unconditional one; only the other
    requests (the branching process and their residual sizes) use the PH
    representation ``(beta, Tm)``.  Shapes as in _ps1_lst, ``x``: (n,).
    """
    n, nk = s.shape
    m = beta.shape[-1]
    tvec = -tm.sum(axis=-1)
    inv_row = np.linalg.solve(np.swapaxes(-tm, -1, -2), beta[..., None])[..., 0]
    mean = inv_row.sum(axis=-1)
    rho = lam * mean
    pi_e = inv_row / mean[:, None]
    big = np.zeros((n, nk, m + 1, m + 1), dtype=complex)
    big[..., :m, :m] = tm[:, None] - (s + lam[:, None])[..., None, None] * np.eye(m)
    big[..., :m, m] = tvec[:, None, :]
    big[..., m, :m] = -(lam[:, None] * beta)[:, None, :]
    state = _expm(big * x[:, None, None, None]).sum(axis=-1)
    den = state[..., m] - rho[:, None] * np.einsum("nki,ni->nk", state[..., :m], pi_e)
    return (1.0 - rho)[:, None] * np.exp(-(s + lam[:, None]) * x[:, None]) / den


def _pad_ph(beta: np.ndarray, tm: np.ndarray, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    m = beta.shape[-1]
    return (np.broadcast_to(beta, shape + (m,)).reshape(-1, m),
            np.broadcast_to(tm, shape + (m, m)).reshape(-1, m, m))


_CHUNK_BYTES = 64e6


def _ps1_sf_flat(t: np.ndarray, lam: np.ndarray, beta: np.ndarray, tm: np.ndarray,
                 size_horizon: np.ndarray, atom: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of T for flat arrays of stable M/PH/1-PS points, t > 0.

    ``atom``: the fixed size of every request (deterministic service), or None.
    T then has an atom (1 - rho) exp(-lam x) at x (the request never shares the
    CPU), which is taken out of the transform before inversion and added back.
    """
    sf = np.empty(t.shape)
    pdf = np.empty(t.shape)
    if atom is not None:
        s = euler_nodes(t)
        lst = _ps1_lst_atom(s, lam, beta, tm, atom)
        mass = (1.0 - lam * _ph_mean(beta, tm)) * np.exp(-lam * atom)
        rest = lst - mass[:, None] * np.exp(-s * atom[:, None])
        sf = invert(lambda _s, v=((1.0 - mass)[:, None] - rest) / s: v, t)
        pdf = invert(lambda _s, v=rest: v, t)
        before = t < atom
        return np.where(before, 1.0, sf), np.where(before, 0.0, pdf)
    m = beta.shape[-1]
    # Chunk the batch only to bound memory (node arrays of one GL node for one chunk).
    per_elem = 31 * (m + 1) * 16 * 400
    chunk = max(1, int(_CHUNK_BYTES // per_elem))
    for lo in range(0, t.size, chunk):
        sl = slice(lo, lo + chunk)
        tt = t[sl]
        horizon = np.minimum(_HORIZON * tt, size_horizon[sl])
        s = euler_nodes(tt)
        lst = np.empty(s.shape, dtype=complex)
        bad = np.zeros(s.shape, dtype=bool)
        rho = lam[sl] * _ph_mean(beta[sl], tm[sl])
        # 16-node rules suffice below utilisation 0.95 (near-singular integrands only appear
        # close to 1; measured against the exact chain, see response_sf).
        for low in (True, False):
            rows = np.flatnonzero((rho <= _LOW_RHO) == low)
            if rows.size:
                rule = _GL16 if low else (_GL_X, _GL_W)
                lst[rows], bad[rows] = _ps1_lst_eig(s[rows], lam[sl][rows], beta[sl][rows],
                                                    tm[sl][rows], horizon[rows], rule)
        rows = np.flatnonzero(bad.any(axis=-1))
        if rows.size:
            # Near-defective M(s): the (slower) propagated matrix exponentials.
            lst[rows] = _ps1_lst(s[rows], lam[sl][rows], beta[sl][rows], tm[sl][rows], horizon[rows])
        sf[sl] = invert(lambda _s, v=(1.0 - lst) / s: v, tt)
        pdf[sl] = invert(lambda _s, v=lst: v, tt)
    return sf, pdf


# ---------------------------------------------------------------------------
# c cores, exponential service: tagged-request birth-death chain
# ---------------------------------------------------------------------------
def _mmc_stationary(lam: float, mu: float, c: int, nmax: int) -> np.ndarray:
    """M/M/c stationary P(N = n), n = 0..nmax, from log ratios (no overflow)."""
    n = np.arange(1, nmax + 1)
    log_ratio = np.log(lam / mu) - np.log(np.minimum(n, c))
    logp = np.concatenate([[0.0], np.cumsum(log_ratio)])
    p = np.exp(logp - logp.max())
    return p / p.sum()


def _truncation(rho: float, c: int) -> int:
    # Beyond c the stationary law is geometric with ratio rho: stop where it is < 1e-18.
    return int(c + 10 + np.ceil(np.log(1e-18) / np.log(max(rho, 1e-300))) if rho > 0 else c + 10)


def _mmc_sf_modes(lam: float, mu: float, c: int) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) = sum_j coef_j exp(eig_j t) for the M/M/c-PS response time.

    State: the number n of other requests.  The tagged request is served at
    rate mu min(1, c/(n+1)) (and leaves), the others leave at rate
    n mu min(1, c/(n+1)), arrivals at rate lam; at the tagged arrival n has
    the stationary M/M/c law (PASTA).  The generator is a birth-death matrix
    with killing, symmetrised by D = diag(sqrt(w)), w_{n+1}/w_n = b_n/d_{n+1}.
    """
    if lam == 0.0:
        return np.array([1.0]), np.array([-mu])
    nmax = _truncation(lam / (c * mu), c)
    n = np.arange(nmax + 1)
    share = mu * np.minimum(1.0, c / (n + 1.0))
    birth = np.where(n < nmax, lam, 0.0)
    death = n * share
    diag = -(birth + death + share)
    off = np.sqrt(lam * death[1:])
    logw = np.concatenate([[0.0], np.cumsum(np.log(lam) - np.log(death[1:]))])
    logw -= logw.max()
    alpha = _mmc_stationary(lam, mu, c, nmax)
    with np.errstate(divide="ignore"):
        left = np.where(alpha > 0, np.exp(np.log(np.maximum(alpha, 1e-320)) - 0.5 * logw), 0.0)
    right = np.exp(0.5 * logw)
    eig, vec = eigh_tridiagonal(diag, off)
    coef = (left @ vec) * (vec.T @ right)
    return coef, eig


def _mmc_cond_mean_modes(lam: float, mu: float, c: int) -> tuple[np.ndarray, np.ndarray]:
    """E[T(x)] = sum_j coef_j int_0^x exp(eig_j a) da (attained-service chain).

    In the tagged request's attained service a, real time runs at
    r_n = max(1, (n+1)/c) per unit of a, arrivals come at lam r_n and each
    other request leaves at rate mu (it is served as fast as the tagged one).
    """
    nmax = _truncation(lam / (c * mu), c) if lam > 0 else c + 10
    n = np.arange(nmax + 1)
    r = np.maximum(1.0, (n + 1.0) / c)
    if lam == 0.0:
        return np.array([1.0]), np.array([0.0])
    birth = np.where(n < nmax, lam * r, 0.0)
    death = n * mu
    diag = -(birth + death)
    off = np.sqrt(birth[:-1] * death[1:])
    logw = np.concatenate([[0.0], np.cumsum(np.log(birth[:-1]) - np.log(death[1:]))])
    logw -= logw.max()
    alpha = _mmc_stationary(lam, mu, c, nmax)
    with np.errstate(divide="ignore"):
        left = np.where(alpha > 0, np.exp(np.log(np.maximum(alpha, 1e-320)) - 0.5 * logw), 0.0)
    right = r * np.exp(0.5 * logw)
    eig, vec = eigh_tridiagonal(diag, off)
    coef = (left @ vec) * (vec.T @ right)
    return coef, eig


# ---------------------------------------------------------------------------
# c cores, exponential service: resolvent of the tagged-request chain
# ---------------------------------------------------------------------------
# Up to this many points a LAPACK tridiagonal solve per (point, Euler node) beats the sweep over
# states vectorised across points (measured: 3-5x for a few points, 2x for 120, 1.7x for a
# 40-utilisation latency table); beyond it the sweep bounds the Python-level call count.
_GTSV_MAX_POINTS = 4096


def _mmc_sf_pdf(t: np.ndarray, rho: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of the M/M/c-PS response time, in units of E[S].

    The transform of P(T > t) is ``alpha (sI - Q)^-1 1`` for the tagged-request chain (see
    :func:`_mmc_sf_pdf_sweep`).  For a few points each tridiagonal system is solved by
    LAPACK's ``zgtsv`` (one call per point and Euler node, O(states) each); for larger
    batches the sweep over states, vectorised across points, costs less Python overhead.
    Both agree to ~1e-11 in P(T > t).
    """
    if t.size > _GTSV_MAX_POINTS:
        return _mmc_sf_pdf_sweep(t, rho, c)
    with np.errstate(divide="ignore"):
        nmax = (c + 10 + np.ceil(np.log(1e-15) / np.log(np.maximum(rho, 1e-300)))).astype(int)
    nmax = np.where(rho > 0, nmax, c + 1)
    s = euler_nodes(t)  # (b, K)
    tot = np.empty(s.shape, dtype=complex)
    chains: dict = {}
    for j in range(t.size):
        key = (float(rho[j]), int(c[j]))
        if key not in chains:
            top, cc = int(nmax[j]), float(c[j])
            lam = key[0] * cc
            n = np.arange(top + 1.0)
            share = np.minimum(1.0, cc / (n + 1.0))
            birth = np.where(n < top, lam, 0.0)
            death = n * share
            with np.errstate(divide="ignore"):
                log_ratio = np.log(max(lam, 1e-300)) - np.log(np.minimum(np.maximum(n[1:], 1.0), cc))
            logp = np.concatenate([[0.0], np.cumsum(log_ratio)])
            alpha = np.exp(logp - logp.max())
            chains[key] = ((-death[1:]).astype(complex), birth + death + share,
                           (-birth[:-1]).astype(complex), alpha / alpha.sum())
        sub, diag, sup, alpha = chains[key]
        ones = np.ones(diag.size, dtype=complex)
        for k in range(s.shape[1]):
            tot[j, k] = alpha @ _zgtsv(sub, s[j, k] + diag, sup, ones)[3]
    sf = invert(lambda _s: tot, t)
    pdf = invert(lambda _s: 1.0 - s * tot, t)
    return sf, pdf


def _mmc_sf_pdf_sweep(t: np.ndarray, rho: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of the M/M/c-PS response time, in units of E[S].

    Same tagged-request chain as _mmc_sf_modes (state: others n, truncated where
    the stationary tail is < 1e-15), but through its resolvent: the transform
    of P(T > t) is alpha (sI - Q)^-1 1, a tridiagonal solve done for every
    Euler node at once by one backward sweep (continued fraction) over n,
    ``x_n = p_n + r_n x_{n-1}``, accumulating ``sum_n alpha_n x_n =
    sum_j p_j A_j`` with ``A_j = alpha_j + r_{j+1} A_{j+1}``.  sI - Q is
    diagonally dominant for Re s > 0, so the sweep is stable.  Points are
    sorted by truncation level so that each only costs its own states.
    """
    b = t.size
    with np.errstate(divide="ignore"):
        nmax = (c + 10 + np.ceil(np.log(1e-15) / np.log(np.maximum(rho, 1e-300)))).astype(int)
    nmax = np.where(rho > 0, nmax, c + 1)
    order = np.argsort(-nmax, kind="stable")
    t_s, rho_s, c_s, nmax_s = t[order], rho[order], c[order].astype(float), nmax[order]
    top = int(nmax_s[0])
    lam = rho_s * c_s
    n = np.arange(top + 1)[:, None]
    share = np.minimum(1.0, c_s / (n + 1.0))
    birth = np.where(n < nmax_s, lam, 0.0)
    death = n * share
    diag = birth + death + share
    with np.errstate(divide="ignore"):
        log_ratio = np.log(np.maximum(lam, 1e-300)) - np.log(np.minimum(np.maximum(n[1:], 1), c_s))
    logp = np.concatenate([np.zeros((1, b)), np.cumsum(log_ratio, axis=0)])
    logp = np.where(n <= nmax_s, logp, -np.inf)
    alpha = np.exp(logp - logp.max(axis=0))
    alpha /= alpha.sum(axis=0)
    s = euler_nodes(t_s)  # (b, K)
    k = s.shape[-1]
    r = np.zeros((b, k), dtype=complex)
    p = np.zeros((b, k), dtype=complex)
    acc = np.zeros((b, k), dtype=complex)
    tot = np.zeros((b, k), dtype=complex)
    active = np.searchsorted(-nmax_s, -np.arange(top + 1), side="right")  # rows with nmax >= n
    for i in range(top, -1, -1):
        a = active[i]
        den = s[:a] + diag[i, :a, None] - birth[i, :a, None] * r[:a]
        p[:a] = (1.0 + birth[i, :a, None] * p[:a]) / den
        acc[:a] = alpha[i, :a, None] + r[:a] * acc[:a]
        tot[:a] += p[:a] * acc[:a]
        r[:a] = death[i, :a, None] / den
    sf = invert(lambda _s: tot, t_s)
    pdf = invert(lambda _s: 1.0 - s * tot, t_s)
    out_sf = np.empty(b)
    out_pdf = np.empty(b)
    out_sf[order] = sf
    out_pdf[order] = pdf
    return out_sf, out_pdf


def _unique_points(*arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    stacked = np.stack([np.asarray(a, dtype=float).ravel() for a in arrays], axis=-1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return uniq, inverse.ravel()


# ---------------------------------------------------------------------------
# Shared evaluation of P(T > t) on a broadcast batch
# ---------------------------------------------------------------------------
# One core: the exact sojourn transform is cheaper than a chain of more states.
# Several cores: the chain is exact, so keep it until memory and time forbid.
_CHAIN_MAX_STATES_ONE_CORE = 5_000
_CHAIN_MAX_STATES = 50_000


class _SfEvaluator:
    """Precomputes everything that does not depend on t for the stable
    points of a batch, then evaluates P(T > t) (and the density) for any t of
    the batch shape."""

    def __init__(self, inputs, shape: tuple):
        self.shape = shape
        svc: Service = inputs.service
        lam = np.broadcast_to(inputs.arrival_rate, shape).ravel()
        servers = np.broadcast_to(inputs.servers, shape).ravel()
        stable = np.broadcast_to(inputs.stable, shape).ravel()
        self.stable = stable
        expo = svc.family == "exponential"
        # Exponential service on any number of cores: the tagged-request chain (fast);
        # other PH services on one core: the sojourn transform.
        self.many = stable.copy() if expo else stable & (servers > 1)
        self.one = np.zeros_like(stable) if expo else stable & (servers == 1)
        # The chain needs ~35/(1 - rho) states, so its time and memory grow without
        # bound as rho -> 1.  Past its limit (rho > 0.993 on one core, where the
        # transform is exact too; rho > 0.9993 on several) a point goes through the
        # sojourn transform, which costs the same at any load.  With c > 1 cores it treats
        # the c cores as one core c times faster: in heavy traffic n >> c requests
        # share the cores, each getting c/n, so the relative error is O(c (1 - rho)).
        self.fast_core = np.ones(stable.shape)
        if expo:
            mean_flat = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()
            with np.errstate(divide="ignore"):
                rho_flat = lam * mean_flat / servers
                states = np.log(1e-15) / np.log(np.where(stable, rho_flat, 0.5))
            heavy = stable & (states > np.where(servers == 1, _CHAIN_MAX_STATES_ONE_CORE, _CHAIN_MAX_STATES))
            self.many &= ~heavy
            self.one |= heavy
            self.fast_core = np.where(heavy, servers, 1.0)
        if self.many.any():
            if not expo:
                raise NotImplementedError(
                    "the response-time distribution of processor sharing with servers > 1 is only "
                    f"implemented for exponential service, got {svc.family!r}; the means "
                    "(mean_response, conditional_mean_response) are exact for any service")
            mean = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()
            self.mean_many = mean[self.many]
            self.rho_many = (lam * mean / servers)[self.many]
            self.c_many = servers[self.many]
        if self.one.any():
            beta, tm = phase_type(svc, fit="distribution")
            beta, tm = _pad_ph(beta, tm, shape)
            self.beta, self.tm = beta[self.one], tm[self.one] * self.fast_core[self.one][:, None, None]
            self.lam1 = lam[self.one]
            mean_ph = np.linalg.solve(np.swapaxes(-self.tm, -1, -2), self.beta[..., None])[..., 0].sum(-1)
            self.size_horizon = _ph_size_horizon(self.beta, self.tm, mean_ph)
            self.atom = None
            if svc.family == "deterministic":
                self.atom = (np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()[self.one]
                             / self.fast_core[self.one])

    def both(self, t: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(P(T > t), density) on the flat batch; only where ``mask`` (default all)."""
        t = np.asarray(t, dtype=float)
        t = t.ravel() if t.size == int(np.prod(self.shape)) else np.broadcast_to(t, self.shape).ravel()
        mask = np.ones(t.shape, dtype=bool) if mask is None else mask
        sf = np.ones(t.shape)
        pdf = np.zeros(t.shape)
        pos = (t > 0) & mask
        if self.one.any():
            sel = self.one & pos
            sub = pos[self.one]
            if sel.any():
                sf[sel], pdf[sel] = _ps1_sf_flat(t[sel], self.lam1[sub], self.beta[sub], self.tm[sub],
                                                 self.size_horizon[sub],
                                                 None if self.atom is None else self.atom[sub])
        if self.many.any():
            sel = self.many & pos
            sub = pos[self.many]
            if sel.any():
                es = self.mean_many[sub]
                a, b = _mmc_sf_pdf(t[sel] / es, self.rho_many[sub], self.c_many[sub])
                sf[sel], pdf[sel] = a, b / es
        return np.clip(sf, 0.0, 1.0), np.maximum(pdf, 0.0)

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return self.both(t)[0].reshape(self.shape)


def _solve_quantile(ev: _SfEvaluator, target: np.ndarray, guess: np.ndarray,
                    iterations: int = 60) -> np.ndarray:
    """t with -log P(T > t) = target on flat arrays (NaN target: skipped).

    Safeguarded Newton on u = log t for F(u) = -log P(T > e^u), whose slope
    F'(u) = t f(t) / P(T > t) comes from the same transform evaluations (the
    density is the inverse of the LST itself).  A bracket [lo, hi] is kept; a
    step leaving it, or a non-positive slope, falls back to bisection (or to
    widening by e^2 while one side is still open).
    """
    todo = np.isfinite(target)
    u = np.log(np.where(todo, guess, 1.0))
    lo = np.full(u.shape, -np.inf)
    hi = np.full(u.shape, np.inf)
    for _ in range(iterations):
        if not todo.any():
            break
        sf, pdf = ev.both(np.exp(u), todo)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            f = -np.log(np.maximum(sf, 1e-300)) - target
            slope = np.exp(u) * pdf / np.maximum(sf, 1e-300)
            step = f / slope
        lo = np.where(todo & (f < 0), u, lo)
        hi = np.where(todo & (f > 0), u, hi)
        new = u - np.clip(np.where(np.isfinite(step), step, 0.0), -2.0, 2.0)
        inside = np.isfinite(step) & (slope > 0) & (new > lo) & (new < hi)
        closed = np.isfinite(lo) & np.isfinite(hi)
        fallback = np.where(closed, 0.5 * (lo + hi), np.where(np.isfinite(lo), u + 2.0, u - 2.0))
        new = np.where(inside, new, fallback)
        done = (np.abs(new - u) < 1e-8) | (f == 0) | (closed & (hi - lo < 1e-12))
        u = np.where(todo, new, u)
        todo &= ~done
    return np.exp(u)


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------
def mean_response(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Mean response time E[T] of processor sharing, seconds.

    Parameters
    ----------
    arrival_rate : float or array_like
        Poisson arrival rate, requests/s (>= 0).
    service : Service or float
        CPU time per request (a :class:`~capacity.Service`, or a mean in
        seconds meaning exponential).
    servers : int or array_like of int
        Cores sharing the requests (each request gets ``min(1, c/n)`` of a core).

    Returns
    -------
    float or ndarray
        E[T] in seconds; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    Exact and insensitive (any service distribution with that mean).  One
    core: ``E[T] = E[S] / (1 - rho)``.  ``c`` cores: the M/G/c-PS queue is
    symmetric, so its number in system has the M/M/c law and (Little)
    ``E[T] = E[S] + C(c, a) E[S] / (c - a)`` with ``a = arrival_rate E[S]``
    and ``C`` the Erlang C probability.

    References
    ----------
    L. Kleinrock, *Queueing Systems vol. 2*, Wiley 1976, section 4.4.
    F. P. Kelly, *Reversibility and Stochastic Networks*, Wiley 1979, ch. 3
    (symmetric queues, insensitivity).

    Examples
    --------
    >>> from capacity import ps
    >>> ps.mean_response(0.5, 1.0)
    2.0
    >>> round(ps.mean_response(1.5, 1.0, servers=2), 6)  # M/M/2: 1 + C/(c-a)
    2.285714
    """
    q = prepare(arrival_rate, service, servers)
    return scalar_out(_mean_response(q))


def _mean_response(q) -> np.ndarray:
    c = np.broadcast_to(q.servers, q.shape)
    a = np.broadcast_to(q.offered_load, q.shape)
    es = np.broadcast_to(q.mean_service, q.shape)
    stable = np.broadcast_to(q.stable, q.shape)
    a_ok = np.where(stable, a, 0.0)
    wait = np.asarray(erlang_c(c, a_ok), dtype=float) * es / np.where(stable, c - a_ok, 1.0)
    return np.where(stable, es + wait, np.inf)


def mean_number(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Mean number of requests in the system (in service), E[N].

    Parameters
    ----------
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        ``E[N] = arrival_rate * E[T]`` (Little's law); ``inf`` where unstable.
        One core: ``rho / (1 - rho)``.

    Notes
    -----
    Exact and insensitive (the number in system has the M/M/c law).

    References
    ----------
    J. D. C. Little, "A proof for the queuing formula L = lambda W",
    Operations Research 9 (1961) 383-387.

    Examples
    --------
    >>> from capacity import ps
    >>> ps.mean_number(0.5, 1.0)
    1.0
    """
    q = prepare(arrival_rate, service, servers)
    lam = np.broadcast_to(q.arrival_rate, q.shape)
    et = _mean_response(q)
    return scalar_out(np.where(np.isfinite(et), lam * np.where(np.isfinite(et), et, 0.0), np.inf))


def conditional_mean_response(size: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                              servers: ArrayLike = 1):
    """Mean response time of a request that needs ``size`` seconds of CPU.

    Parameters
    ----------
    size : float or array_like
        The request's CPU time x, seconds (>= 0).
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        E[T | S = x] in seconds; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    One core: ``E[T(x)] = x / (1 - rho)`` exactly, for any service
    distribution (Kleinrock 1976, eq. 4.17) -- every request is slowed
    down by the same factor.

    ``c`` cores: ``E[T(x)] = x E[T] / E[S]`` with ``E[T]`` from
    :func:`mean_response`, again linear and insensitive.  The M/G/c-PS queue
    is symmetric (Kelly 1979) and a special case of Cohen's (1979)
    generalised processor sharing, whose conditional mean sojourn time is
    insensitive to the service distribution beyond its mean.  For
    exponential service we verified linearity independently: the tagged
    request's chain in attained-service time (real time runs at
    ``max(1, (n+1)/c)`` per unit of attained service, arrivals at
    ``arrival_rate * max(1, (n+1)/c)``, each other request leaves at rate
    ``1/E[S]``; ``_mmc_cond_mean_modes``) gives the same slope at x -> 0 and
    x -> inf to 1e-12 (``tests/test_ps.py``), and a simulation with H2
    service (scv 4, c = 2) agrees within its standard error.

    References
    ----------
    J. W. Cohen, "The multiple phase service network with generalized
    processor sharing", Acta Informatica 12 (1979) 245-284.
    F. P. Kelly, *Reversibility and Stochastic Networks*, Wiley 1979, ch. 3.
    L. Kleinrock, *Queueing Systems vol. 2*, Wiley 1976, section 4.4.

    Examples
    --------
    >>> from capacity import ps
    >>> ps.conditional_mean_response(0.3, 0.5, 1.0)
    0.6
    """
    x = check_nonnegative(size, "size")
    q = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(x.shape, q.shape)
    xs = np.broadcast_to(x, shape)
    rho = np.broadcast_to(q.utilization, shape)
    c = np.broadcast_to(q.servers, shape)
    stable = np.broadcast_to(q.stable, shape)
    out = np.where(stable, xs / np.where(stable, 1.0 - rho, 1.0), np.inf)
    # Linear in x for any number of cores (see Notes): x E[T] / E[S].
    ratio = np.broadcast_to(_mean_response(q) / q.mean_service, shape)
    out = np.where(stable, xs * np.where(stable, ratio, 0.0), np.inf)
    return scalar_out(out)


def _service_alone_when_idle(values: np.ndarray, inp, shape: tuple, of_service: Callable) -> np.ndarray:
    """Where the arrival rate is 0 nobody shares the CPU, so the response is the service time
    itself: take ``of_service()`` (its exact sf or ppf) there rather than the PH-fitted value."""
    idle = np.broadcast_to(inp.arrival_rate == 0, shape)
    if not idle.any():
        return values
    return np.where(idle, np.broadcast_to(np.asarray(of_service(), dtype=float), shape), values)


def response_sf(t: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                servers: ArrayLike = 1):
    """P(T > t): probability that a request's response time exceeds ``t``.

    Parameters
    ----------
    t : float or array_like
        Time, seconds (>= 0).
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        P(T > t); 1 where the utilisation is >= 1.

    Notes
    -----
    **One core, PH service (exact).**  Change time to the tagged request's
    attained service ``a``: with ``n`` requests present each is served at
    rate ``1/n``, so in ``a`` every request present advances through its
    phases at its native rates, independently, and new requests arrive at
    rate ``lambda`` per request present -- a branching process, and
    ``T(x) = int_0^x N(a) da``.  For a request in phase ``i`` with remaining
    horizon ``tau``, ``phi_i(s, tau) = E[exp(-s * attained time of it and its
    descendants within tau)]`` solves the matrix Riccati equation
    ``phi' = -s phi + Tm phi + t + lambda phi (beta phi - 1)``, ``phi(0) = 1``.
    At the tagged arrival the number of others is geometric,
    ``(1 - rho) rho^n``, with independent equilibrium residual sizes
    (initial vector ``pi_e = beta (-Tm)^-1 / E[S]``), hence

        E[exp(-s T(x))] = exp(-s x - lambda int_0^x (1 - beta phi)) (1 - rho) / (1 - rho pi_e phi(x)).

    The substitution ``phi = y / z``, ``z' = -lambda beta y`` linearises the
    Riccati equation: ``(y, z)' = M (y, z)`` with
    ``M = [[Tm - (s + lambda) I, t], [-lambda beta, 0]]``, so

        E[exp(-s T(x))] = (1 - rho) exp(-(s + lambda) x) / (z(x) - rho pi_e y(x)),
        (y, z)(x) = expm(M x) (1, ..., 1),

    which for exponential service is the classic M/M/1-PS transform
    (Coffman, Muntz and Trotter 1970).  The unconditional transform
    integrates this against the PH density by composite Gauss-Legendre
    quadrature (16 nodes below utilisation 0.95, 32 above) on panels of
    variable width: at most 3 radians of rotation of ``exp(-s x)`` and 3
    e-folds of ``lambda + mu_i`` for every phase rate ``mu_i`` still alive at
    x (``mu_i x < 60``; a fast branch of a fitted mixture only forces narrow
    panels near 0), horizon ``min(3.3 t, size with tail < 1e-17)``.  ``M(s)``
    is eigen-decomposed once per Euler node, so each quadrature node costs
    O(m), and D(x) = sum_j c_j exp(r_j x); beyond the x where every mode but
    the leading one is below e^-37 of it, the rest of the integral is
    ``v(x) (r I - Tm)^-1 t exp(-r x) / c`` in closed form (one solve).
    Pairs whose eigenbasis would lose more than 1e-6 to cancellation --
    near-defective ``M``, e.g. Erlang at very light load -- fall back to
    propagated matrix exponentials on uniform panels, and
    ``(1 - E[exp(-sT)])/s`` is inverted by the Euler
    algorithm (31 nodes).  Agreement with an independent tagged-request
    Markov chain: ~1e-9 absolute (exponential, H2, Erlang-2;
    ``tests/test_ps.py``); run on exponential service against the chain
    resolvent below, max error 1e-11 (rho 0.5, 0.9) and 6e-10 (rho 0.99)
    for t from 0.05 to 1000 mean sizes.  The variable panels and the
    closed-form tail agree with the former uniform panels to 4e-11 in
    P(T > t) (10 service families incl. lognormal/gamma/empirical fits,
    rho 0.02-0.98, t from 0.2 to 10 E[T]).

    **Other service distributions, one core**: the hyper-Erlang distribution
    fit of :func:`capacity.phasetype.phase_type` (``fit="distribution"``;
    approximation; errors in :func:`response_quantile`).  Deterministic
    service: the tagged request's size is exactly the mean, so no size
    integral is needed (``_ps1_lst_atom``); the other requests use an
    Erlang-24, and the atom ``(1 - rho) exp(-lambda x)`` of T at x is
    removed before the inversion and added back.

    **Exponential service, any number of cores (exact)**: the tagged-request
    chain (state: number of other requests; truncated where the M/M/c
    stationary tail is below 1e-15), whose transform ``alpha (sI - Q)^-1 1``
    is one tridiagonal solve per Euler node, done for all nodes at once by a
    backward continued-fraction sweep (``_mmc_sf_pdf``); in units of E[S]
    the result depends only on (rho, c).  Agreement with ``expm_multiply``
    of the same chain: 1e-9 (``tests/test_ps.py``).

    References
    ----------
    E. G. Coffman, R. R. Muntz and H. Trotter, "Waiting time distributions
    for processor-sharing systems", JACM 17 (1970) 123-130.
    T. J. Ott, "The sojourn-time distribution in the M/G/1 queue with
    processor sharing", J. Appl. Prob. 21 (1984) 360-378.
    S. F. Yashkov, "Processor-sharing queues: some progress in analysis",
    Queueing Systems 2 (1987) 1-17.
    J. Abate and W. Whitt, INFORMS J. Computing 18 (2006) 408-421.

    Examples
    --------
    >>> from capacity import ps
    >>> round(ps.response_sf(2.0, 0.5, 1.0), 6)
    0.321267
    """
    t_arr = check_nonnegative(t, "t")
    q = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(t_arr.shape, q.shape)
    tb = np.broadcast_to(t_arr, shape)
    table = _table.Coverage("ps", q, shape)
    if table.mask is None:
        out = _SfEvaluator(q, shape)(tb)
    else:
        flat = np.ones(table.size)
        tf = tb.ravel()
        t_unit = tf[table.mask] / table.mean[table.mask]
        flat[table.mask] = _table.sf("ps", table.family, t_unit, table.rho[table.mask], table.scv[table.mask])
        # Tabled points whose answer lies beyond the table's levels, and points outside it:
        # computed directly.
        flat[np.isnan(flat) & (tf <= 0)] = 1.0
        rest = table.stable & ~(table.mask & np.isfinite(flat)) & (tf > 0)
        if rest.any():
            sub = table.subset(rest)
            flat[rest] = _SfEvaluator(sub, sub.shape)(tf[rest])
        out = flat.reshape(shape)
    return scalar_out(_service_alone_when_idle(out, q, shape, lambda: q.service.sf(t_arr)))


def response_quantile(q: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                      servers: ArrayLike = 1):
    """Quantile of the response time under processor sharing, seconds.

    Parameters
    ----------
    q : float or array_like
        Probability in (0, 1), e.g. 0.99 for the p99.
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        The t with P(T <= t) = q; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    Solves ``-log P(T > t) = -log(1 - q)`` on :func:`response_sf` by a
    vectorised safeguarded Newton iteration in ``log t`` (the density comes
    from inverting the LST at the same transform values, so each step costs
    one transform evaluation), started from the larger of the exponential
    guess ``E[T] (-log(1 - q))`` and the size quantile ``/(1 - rho)``.  Exact for exponential, Erlang, hyperexponential
    and integer-shape gamma service on one core and for exponential service
    on ``c`` cores (numerical error ~1e-9 absolute in the probability, so
    tail quantiles are reliable to about q = 1 - 1e-6).  Exception: with
    exponential service on ``c > 1`` cores above utilisation 0.9993 (where the
    exact chain would need more than 50,000 states) the cores are treated as
    one core ``c`` times faster -- the heavy-traffic limit, with relative
    error O(c (1 - rho)): 1.6 % at p50 and 0.3 % at p99 for c = 3 at
    rho = 0.993, ten times less at the switch.

    Other service distributions on one core are approximations: lognormal
    (through a table, see below), gamma, empirical and scipy laws use a hyper-Erlang PH fit of the whole
    distribution (:func:`capacity.phasetype.phase_type` with
    ``fit="distribution"``: at most 16 phases, mean exact, quantiles within
    3-8 % from p1 to p99.999); deterministic service uses the exact size for
    the tagged request and an Erlang-24 for the others.  Measured relative
    error of the quantiles against exact PS simulation (E[S] = 1 s;
    relative error = model / simulation - 1; 6e6 s seeded runs of
    :func:`capacity.sim.simulate`, 3e6-5.4e6 requests, 99 % batch-means
    half-widths in brackets)::

        service          rho   p50            p90            p99            p99.9
        lognormal scv 1  0.5   +1.3% (0.4%)   -0.2% (0.5%)   -1.3% (0.7%)   -0.3% (1.8%)
        lognormal scv 1  0.9   -0.2% (1.6%)   +1.6% (2.2%)   -0.6% (2.8%)   +1.3% (3.5%)
        lognormal scv 4  0.5   -0.8% (0.5%)   -0.0% (0.7%)   -0.6% (1.2%)   +0.2% (2.3%)
        lognormal scv 4  0.9   -0.2% (2.9%)   +0.9% (3.5%)   +1.0% (4.5%)   +0.9% (6.0%)
        deterministic    0.5   -0.1% (0.2%)   -0.0% (0.4%)   -0.2% (1.2%)   -1.2% (3.2%)
        deterministic    0.9   -0.4% (1.1%)   -0.4% (1.7%)   +0.2% (3.8%)   -1.2% (9.7%)

    (The former three-moment fit was off by +31 % / -23 % / +20 % at
    p50 / p99 / p99.9 for lognormal scv 4 at rho 0.5: the PS tail depends
    on the whole size distribution, not on its first moments.)

    **Lognormal service on one core comes from a shipped table** of that
    computation (:mod:`capacity._quantile_table`: 32 utilisations from 0.001
    to 0.999 x scv values from 0.39 to 25 (evenly spaced in log scv, 11
    nodes) x 40 levels from q = 0.001 to 1 - 1e-6, read by a cubic spline;
    :func:`response_sf` solves the same spline for the level), because the
    direct computation is slow for these laws (``benchmarks/bench_ps.py``).
    Points off the table (rho > 0.999, scv outside, q beyond the levels) are
    computed directly.  At the nodes the table reproduces the direct
    computation (to 0.2 %); between them it is smoother than it: the
    hyper-Erlang fit changes structure with scv, so the direct result jumps
    by a few per cent between nearby scv values (at light load, where
    ``T -> S``, the direct p90 is 9 % off the lognormal's own at scv 3.1, the
    table 2 %).  Against exact PS simulation between the nodes (p50 / p90 /
    p99 / p99.9; 4 x 1.5e6 s runs, standard errors 0.1-1.2 %, 1.2-2.2 % at
    rho 0.935)::

        scv    rho   table                          direct computation
        0.469  0.79  +0.9% -0.2% -0.5% -0.9%        -0.3% -1.8% -0.6% +0.1%
        1.46   0.79  +0.4% +0.6% +0.9% +1.5%        +0.1% +0.9% +0.7% +1.5%
        4.55   0.935 -1.4% -0.9% -1.6% -1.6%        -1.4% -1.0% -1.5% -1.7%

    Below scv 0.39 the hyper-Erlang fits are too uneven to interpolate
    (measured at scv 0.15, rho 0.79: -5.6 % / -9.3 % at p99 / p99.9 from a
    table, -2.3 % / -4.7 % directly), so those points are computed directly.
    Speed: ``benchmarks/bench_ps.py`` times four quantiles at one point from
    the table and directly for each service family.

    References
    ----------
    See :func:`response_sf`.

    Examples
    --------
    At utilisation 0.5 the PS p99.9 is 22.2 s, against 13.8 s for FCFS:

    >>> from capacity import ps
    >>> round(ps.response_quantile(0.999, 0.5, 1.0), 2)
    22.2
    """
    qq = check_quantile(q, "q")
    inp = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(qq.shape, inp.shape)
    stable = np.broadcast_to(inp.stable, shape)
    if not stable.any():
        return scalar_out(np.full(shape, np.inf))
    qb = np.broadcast_to(qq, shape)
    table = _table.Coverage("ps", inp, shape)
    if table.mask is None:
        res = _direct_quantile(qb, inp, shape, stable)
    else:
        qf = qb.ravel()
        flat = np.full(table.size, np.inf)
        m = table.mask
        flat[m] = table.mean[m] * _table.quantile("ps", table.family, qf[m], table.rho[m], table.scv[m])
        rest = table.stable & ~(m & np.isfinite(flat))
        if rest.any():
            sub = table.subset(rest)
            flat[rest] = _direct_quantile(qf[rest], sub, sub.shape, sub.stable)
        res = flat.reshape(shape)
    res = _service_alone_when_idle(res, inp, shape, lambda: inp.service.ppf(qb))
    return scalar_out(np.where(stable, res, np.inf))


def _direct_quantile(qb: np.ndarray, inp, shape: tuple, stable: np.ndarray) -> np.ndarray:
    """response_quantile computed from the transform (no table), on broadcast inputs."""
    ev = _SfEvaluator(inp, shape)
    target = np.where(stable, -np.log1p(-qb), np.nan)
    et = np.broadcast_to(np.where(inp.stable, _mean_response(inp), 1.0), shape)
    # Start from the exponential law with the exact mean, or, when larger, from the size
    # quantile slowed down by 1/(1 - rho) (T(x) ~ x/(1 - rho) for long requests).
    guess = et * np.maximum(target, 0.05)
    try:
        svc_q = np.asarray(inp.service.ppf(qb), dtype=float)
        rho = np.broadcast_to(inp.utilization, shape)
        with np.errstate(all="ignore"):
            alt = svc_q / np.where(stable, 1.0 - rho, 1.0)
        guess = np.where(np.isfinite(alt) & (alt > guess), alt, guess)
    except (NotImplementedError, ValueError, TypeError):
        pass
    return _solve_quantile(ev, target.ravel(), guess.ravel()).reshape(shape)
