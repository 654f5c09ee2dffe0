"""The M/PH/1 processor-sharing sojourn time through its Laplace transform (one core).

:func:`capacity.ps.response_sf` and :func:`capacity.ps.response_quantile` invert what this
module computes.  For phase-type service ``(beta, Tm)`` the response time of a tagged request of
size x has the transform

    E[exp(-s T(x))] = (1 - rho) exp(-(s + lam) x) / (z(x) - rho pi_e y(x)),
    (y, z)(x) = expm(M x) 1,   M = [[Tm - (s + lam) I, t], [-lam beta, 0]],

integrated against the size density by composite Gauss-Legendre quadrature on panels laid out
by the phase rates (derivation in :func:`capacity.ps.response_sf`).  Two evaluations: one
eigen-decomposition of M(s) per (point, s) (fast), and propagated matrix exponentials for the
near-defective M(s) the first cannot represent.  Deterministic service keeps the exact size of the
tagged request (:func:`_ps1_lst_atom`).
"""
from __future__ import annotations

import numpy as np

from ._laplace import euler_nodes, invert
from .phasetype import _ph_mean

__all__: list[str] = []   # private: capacity.ps is the public face

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
    # Square each matrix its own number of times: squaring the whole stack as often as its
    # largest norm needs (and keeping the unneeded products out with np.where) cost most of a
    # deterministic PS evaluation, whose light-load Euler nodes have norms ~100 times the rest.
    jmax = int(j.max()) if j.size else 0
    if jmax == 0:
        return out
    flat_out = out.reshape((-1, d, d))
    flat_j = j.reshape(-1)
    for i in range(jmax):
        idx = np.flatnonzero(flat_j > i)
        if idx.size == flat_j.size:
            flat_out = flat_out @ flat_out
        else:
            part = flat_out[idx]
            flat_out[idx] = part @ part
    return flat_out.reshape(out.shape)


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


def _sojourn_generator(s: np.ndarray, lam: np.ndarray, beta: np.ndarray, tm: np.ndarray):
    """The pieces every form of the transform needs: the exit rates ``t = -Tm 1``, the utilisation
    ``rho = lam E[S]``, the equilibrium residual law ``pi_e = beta (-Tm)^-1 / E[S]`` and the
    (n, K, m+1, m+1) matrix ``M(s) = [[Tm - (s + lam) I, t], [-lam beta, 0]]`` whose exponential
    gives (y, z)(x) (see :func:`_ps1_lst`)."""
    n, nk = s.shape
    m = beta.shape[-1]
    tvec = -tm.sum(axis=-1)
    inv_row = np.linalg.solve(np.swapaxes(-tm, -1, -2), beta[..., None])[..., 0]  # beta (-Tm)^-1
    mean = inv_row.sum(axis=-1)
    big = np.zeros((n, nk, m + 1, m + 1), dtype=complex)
    big[..., :m, :m] = tm[:, None] - (s + lam[:, None])[..., None, None] * np.eye(m)
    big[..., :m, m] = tvec[:, None, :]
    big[..., m, :m] = -(lam[:, None] * beta)[:, None, :]
    return tvec, lam * mean, inv_row / mean[:, None], big


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
    tvec, rho, pi_e, big = _sojourn_generator(s, lam, beta, tm)
    # Panels as wide as the fastest phase still alive allows (_panel_layout): a fast phase of a
    # phase-type fit (a gamma of scv 0.3 has one at 7.8e5/s) dies out within 1e-4 s, and uniform
    # panels at its width took 100,000 steps (33 s for one light-load quantile) where these take
    # hundreds.  The matrix exponentials are exact for any width; the width only serves the
    # Gauss-Legendre rule, whose integrand is smooth on each panel as in the eigen path.
    spin = np.max(np.abs(s), axis=-1)
    start, level, live, widths, _ = _panel_layout(beta, tm, lam, spin, horizon)
    rows = np.arange(n)
    step = _expm(big[:, None] * widths[:, :, None, None, None])        # (n, L, K, m+1, m+1)
    step_size = _expm(tm[:, None] * widths[..., None, None])           # (n, L, m, m)
    state = np.ones((n, nk, m + 1), dtype=complex)
    logz = np.zeros((n, nk), dtype=complex)
    vrow = beta.astype(float).copy()
    panels = start.shape[0]
    states = np.empty((panels, n, nk, m + 1), dtype=complex)
    logzs = np.empty((panels, n, nk), dtype=complex)
    vrows = np.empty((panels, n, m))
    for p in range(panels):
        states[p], logzs[p], vrows[p] = state, logz, vrow
        j, on = level[p], live[p]
        new = (step[rows, j] @ state[..., None])[..., 0]
        z = new[..., m]
        # (y, z) only matters up to a common factor: renormalise so nothing over/underflows.
        with np.errstate(all="ignore"):
            state = np.where(on[:, None, None], new / z[..., None], state)
            logz = np.where(on[:, None], logz + np.log(z), logz)
        vrow = np.where(on[:, None], np.einsum("ni,nij->nj", vrow, step_size[rows, j]), vrow)
    pp, ii = np.nonzero(live)                     # the (panel, point) pairs to integrate
    lv = level[pp, ii]
    width = widths[ii, lv]
    total = np.zeros((n, nk), dtype=complex)
    for xg, wg in zip(_GL_X, _GL_W):
        frac = 0.5 * (xg + 1.0)
        e_node = _expm(big[:, None] * (frac * widths)[:, :, None, None, None])
        f_node = _expm(tm[:, None] * (frac * widths)[..., None, None])
        node = (e_node[ii, lv] @ states[pp, ii][..., None])[..., 0]            # (Q, K, m+1)
        x = start[pp, ii] + frac * width                                       # (Q,)
        dens = np.einsum("qi,qij,qj->q", vrows[pp, ii], f_node[ii, lv], tvec[ii])
        denom = node[..., m] - rho[ii, None] * np.einsum("qki,qi->qk", node[..., :m], pi_e[ii])
        expo = -(s[ii] + lam[ii, None]) * x[:, None] - logzs[pp, ii]
        g = (1.0 - rho)[ii, None] * np.exp(expo) / denom
        np.add.at(total, ii, (0.5 * wg) * (width * dens)[:, None] * g)
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
    tvec, rho, pi_e, big = _sojourn_generator(s, lam, beta, tm)
    eye = np.eye(m)
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
    tvec, rho, pi_e, big = _sojourn_generator(s, lam, beta, tm)
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
