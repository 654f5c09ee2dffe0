"""Transforms of the service time for the FCFS formulas: what :mod:`capacity.fcfs` inverts.

``G(s) = int_0^inf exp(-s x) P(S > x) dx``, the Laplace transform of the service's tail, in
closed form for the parametric families and by quadrature otherwise (lognormal, scipy laws,
empirical samples), tabulated along the Euler rays once per call when many points share one
law (:class:`_TransformTable`).  The Pollaczek-Khinchine transform of the M/G/1 wait and the
M/G/c approximations of :mod:`capacity.fcfs` are built from it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import special

from ._laplace import _euler_weights
from .distributions import Service, _clog1p

__all__: list[str] = []   # private: capacity.fcfs is the public face

#: The parametric families rebuilt from a slice of their parameters (chunks of a grid).
_CTORS: dict[str, Callable[..., Service]] = {
    "deterministic": lambda p: Service.deterministic(p["mean"]),
    "exponential": lambda p: Service.exponential(p["mean"]),
    "erlang": lambda p: Service.erlang(p["mean"], p["k"]),
    "gamma": lambda p: Service.gamma(p["mean"], p["scv"]),
    "lognormal": lambda p: Service.lognormal(p["mean"], p["scv"]),
    "hyperexponential": lambda p: Service.hyperexponential(p["mean"], p["scv"]),
}


def _cexpm1(z: np.ndarray) -> np.ndarray:
    """exp(z) - 1 for complex z, accurate for small |z|."""
    x, y = z.real, z.imag
    half = np.sin(0.5 * y)
    return (np.expm1(x) * np.cos(y) - 2.0 * half * half) + 1j * np.exp(x) * np.sin(y)


_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)
_UNIFORM_PANELS = 64
_GEOMETRIC_PANELS = 40
_CHUNK = 64


def _numeric_tail_transform(svc: Service, s: np.ndarray) -> np.ndarray:
    """G(s) = int_0^inf exp(-s x) P(S > x) dx by quadrature (no closed form).

    ``s`` has shape ``(n, K)``: the Euler nodes of one inversion time per row,
    which share their real part ``r`` and are equally spaced in the imaginary
    direction.  exp(-s x) is below 4e-18 beyond x = 40 / r, and oscillates
    there through at most ~330 radians; composite 10-point Gauss-Legendre on
    the union of 64 uniform panels over [0, 40/r] (resolving the
    oscillation) and 40 geometric panels between the 1e-17 and 1 - 1e-17
    service quantiles (resolving the body of the distribution) gives
    G(s) to 2e-15 relative (checked against the closed-form gamma
    transform, scv 0.25 to 10, t / E[S] from 1e-3 to 1e5; quadrupling both
    panel counts changes lognormal values by < 2e-15).
    """
    n, k_nodes = s.shape
    if svc.family == "lognormal":
        # closed forms: scipy's frozen-object calls cost ~1 ms each
        sigma = np.sqrt(np.log1p(np.asarray(svc._params["scv"], float)))
        mu = np.log(np.asarray(svc._params["mean"], float)) - 0.5 * sigma**2
        z = special.ndtri(1e-17)
        x_lo = np.broadcast_to(np.exp(mu + sigma * z), (n,))
        x_hi = np.broadcast_to(np.exp(mu - sigma * z), (n,))
    else:
        frozen = svc._frozen
        x_lo = np.broadcast_to(np.asarray(frozen.ppf(1e-17), float), (n,))
        x_hi = np.broadcast_to(np.asarray(frozen.isf(1e-17), float), (n,))
    # Below hi * 1e-25 the panel [0, lo] contributes at most lo to G: negligible.
    x_lo = np.maximum(x_lo, 1e-25 * x_hi)
    # Geometric panels of ratio <= 2 resolve any smooth body, including the
    # x^a cusp at 0 of a gamma density with shape a < 1.
    n_geo = int(np.clip(np.ceil(np.max(np.log2(x_hi / x_lo))), _GEOMETRIC_PANELS, 90))
    out = np.empty((n, k_nodes), dtype=complex)
    if svc.family == "lognormal":
        mu_ = np.broadcast_to(mu, (n,))
        sig_ = np.broadcast_to(sigma, (n,))

        def tail_at(x, sl):
            with np.errstate(divide="ignore"):
                return special.ndtr((mu_[sl, None] - np.log(x)) / sig_[sl, None])
    else:
        sf_svc = svc._expand(1) if svc.family in _CTORS else svc
        svc_params_flat = svc.family in _CTORS and np.ndim(svc._params["mean"]) > 0

        def tail_at(x, sl):
            if svc_params_flat:
                sub = _CTORS[svc.family]({k: v[sl] for k, v in svc._params.items() if k in ("mean", "scv", "k")})
                return np.asarray(sub._expand(1).sf(x))
            return np.asarray(sf_svc.sf(x))
    u = np.linspace(0.0, 1.0, _UNIFORM_PANELS + 1)
    g = np.linspace(0.0, 1.0, n_geo + 1)
    for start in range(0, n, _CHUNK):
        sl = slice(start, min(n, start + _CHUNK))
        r = s[sl, 0].real
        step = (s[sl, 1] - s[sl, 0]).imag
        top = np.minimum(40.0 / r, x_hi[sl])
        lo, hi = x_lo[sl], x_hi[sl]
        geo = np.exp(np.log(lo)[:, None] + np.log(hi / lo)[:, None] * g)
        edges = np.sort(np.concatenate([top[:, None] * u, np.minimum(geo, top[:, None])], axis=1), axis=1)
        a, b = edges[:, :-1], edges[:, 1:]
        half = 0.5 * (b - a)
        x = ((0.5 * (a + b))[..., None] + half[..., None] * _GL_X).reshape(len(r), -1)
        w = (half[..., None] * _GL_W).reshape(len(r), -1)
        tail = tail_at(x, sl)
        cur = (w * tail * np.exp(-r[:, None] * x)).astype(complex)
        z = np.exp(-1j * step[:, None] * x)
        for k in range(k_nodes):
            # s_k = s_0 + k * i * step: walk exp(-s_k x) by one factor per node.
            out[sl, k] = cur.sum(axis=1)
            cur *= z
    return out


_PANEL_WIDTH = 0.5      # in ln t
_PANEL_NODES = 16
_TABLE_MIN_ROWS = 48    # below this many inversion times, direct quadrature is cheaper
_CHEB = np.cos(np.pi * (np.arange(_PANEL_NODES) + 0.5) / _PANEL_NODES)
_CHEB_W = (-1.0) ** np.arange(_PANEL_NODES) * np.sin(np.pi * (np.arange(_PANEL_NODES) + 0.5) / _PANEL_NODES)


class _TransformTable:
    """G(beta_k / t) of a quadrature-only service (lognormal, scipy), tabulated
    along each of the 31 Euler rays as a function of u = ln t.

    Along a ray, G(beta_k e^{-u}) is analytic in u in a strip of half-width
    >= ~1.6 (the transform is analytic off the negative real s axis, and
    arg beta_k <= 1.45), so degree-15 interpolation at Chebyshev points on
    panels of width 1 in u converges like 8^{-16}: measured agreement with
    direct quadrature better than 1e-13 relative (scv 0.25 to 10,
    t / E[S] from 1e-6 to 1e6; see tests).  Panels are built lazily, only
    where the solver looks, and live as long as one call's model, so a
    sweep over arrival rates with one service pays the quadrature once per
    panel instead of once per point and iteration.
    """

    def __init__(self, svc: Service):
        self.svc = svc
        self.scale = float(np.asarray(svc.mean))
        self.keys = np.empty(0, dtype=np.int64)
        self.values = np.empty((0, _PANEL_NODES, 2 * 15 + 1), dtype=complex)

    def _build(self, panels: np.ndarray) -> None:
        beta, _ = _euler_weights(15)
        u = (panels[:, None] + 0.5 + 0.5 * _CHEB) * _PANEL_WIDTH
        t = self.scale * np.exp(u).ravel()
        vals = _numeric_tail_transform(self.svc, beta / t[:, None]).reshape(panels.size, _PANEL_NODES, -1)
        keys = np.concatenate([self.keys, panels])
        order = np.argsort(keys)
        self.keys = keys[order]
        self.values = np.concatenate([self.values, vals])[order]

    def __call__(self, s: np.ndarray) -> np.ndarray:
        beta, _ = _euler_weights(15)
        if s.shape[0] < _TABLE_MIN_ROWS or s.shape[1] != beta.size:
            return _numeric_tail_transform(self.svc, s)
        t = beta[0].real / s[:, 0].real
        u = np.log(t / self.scale) / _PANEL_WIDTH
        j = np.floor(u).astype(np.int64)
        need = np.unique(j)
        missing = need[~np.isin(need, self.keys)]
        if missing.size:
            self._build(missing)
        x = 2.0 * (u - j) - 1.0
        diff = x[:, None] - _CHEB
        diff = np.where(diff == 0.0, 1e-300, diff)  # on a node: that node's value
        r = _CHEB_W / diff
        vals = self.values[np.searchsorted(self.keys, j)]  # (n, nodes, 31)
        return np.einsum("np,npk->nk", r, vals) / r.sum(axis=1)[:, None]


def _make_table(svc: Service) -> "_TransformTable | None":
    if svc.family not in ("lognormal", "scipy"):
        return None
    if svc.family == "lognormal" and any(np.ndim(v) for v in svc._params.values()):
        return None
    if svc.family == "scipy" and np.ndim(np.asarray(svc.mean)) > 0:
        return None
    return _TransformTable(svc)


def _tail_transform(svc: Service, s: np.ndarray, table: "_TransformTable | None" = None) -> np.ndarray:
    """G(s) = (1 - B*(s)) / s, the transform of P(S > x), in forms free of
    the cancellation 1 - B*(s) suffers for small |s|.  ``s`` has shape
    ``(n, K)``; the service parameters have shape ``(n,)`` or ``()``."""
    fam = svc.family
    if fam in ("lognormal", "scipy"):
        return table(s) if table is not None else _numeric_tail_transform(svc, s)
    # parameters with a trailing node axis (not svc._expand: building scipy frozen objects costs ms)
    p = {k: np.asarray(v)[..., None] for k, v in svc._params.items()} if fam in _CTORS else {}
    if fam == "deterministic":
        return -_cexpm1(-s * p["mean"]) / s
    if fam == "exponential":
        return p["mean"] / (1.0 + s * p["mean"])
    if fam in ("erlang", "gamma"):
        shape = p["k"] if fam == "erlang" else 1.0 / p["scv"]
        return -_cexpm1(-shape * _clog1p(s * (p["mean"] / shape))) / s
    if fam == "hyperexponential":
        return p["p"] / (p["rate1"] + s) + (1.0 - p["p"]) / (p["rate2"] + s)
    if fam == "empirical":
        values, counts = np.unique(svc._samples, return_counts=True)
        w = counts / counts.sum()
        return (-_cexpm1(-s[..., None] * values) @ w) / s
    raise NotImplementedError(fam)  # pragma: no cover
