"""Phase-type (PH) representations of service-time distributions.

A PH distribution ``(beta, Tm)`` is the time to absorption of a Markov chain
with initial vector ``beta`` over ``m`` transient phases and sub-generator
``Tm``; its exit-rate vector is ``t = -Tm @ 1``, its density
``f(x) = beta expm(Tm x) t`` and its k-th moment ``k! beta (-Tm)^(-k) 1``.
The processor-sharing formulas of :mod:`capacity.ps` are exact for PH service.

Which representation each :class:`~capacity.Service` family gets:

=================  ==========================================================
family             PH representation
=================  ==========================================================
exponential        1 phase, exact
erlang(k)          k phases, exact (k <= ``MAX_PHASES``, else Erlang-MAX_PHASES)
hyperexponential   2 phases, exact
gamma, integer     Erlang with k = 1/scv phases, exact (k <= ``MAX_PHASES``)
shape 1/scv
everything else    ``fit="moments"`` (default): a moment fit (approximation),
                   see :func:`_moment_fit`:
                   scv < 1: mixture of Erlang(k-1) and Erlang(k) with a common
                   rate, matching two moments (Tijms 2003, section 5.9);
                   scv >= 1: two-phase hyperexponential matching three
                   moments where feasible (Whitt 1982), otherwise balanced
                   means matching two; deterministic: Erlang-MAX_PHASES.
                   ``fit="distribution"``: a hyper-Erlang (mixture of at
                   most 8 Erlang branches, <= ``FIT_PHASES`` phases) fitted
                   by least squares in log-quantile space at 120
                   probabilities from 1e-3 to 1 - 1e-6, sizes below
                   ``SIZE_FLOOR`` (1e-6) x mean fitted as that size, mean exact (see
                   :func:`_hyper_erlang_fit`; quantile error of lognormal
                   fits 3-8 % max, 1-4 % mean over p1..p99.999).
=================  ==========================================================

Parameters given as arrays may need different numbers of phases at
different grid points; the representations are padded to the largest count
with unreachable phases (``beta = 0`` there, ``Tm`` diagonal ``-1``, no
transitions in or out), which changes nothing.

The deterministic service time, and any scv below ``1 / MAX_PHASES``, is
represented by an Erlang with ``MAX_PHASES`` phases, i.e. scv
``1 / MAX_PHASES`` instead of the true value; the effect on the M/D/1-PS
response-time quantiles is measured in :func:`capacity.ps.response_quantile`.

References
----------
H. C. Tijms, *A First Course in Stochastic Models*, Wiley 2003, section 5.9
(fitting a mixture of Erlangs to two moments).
W. Whitt, "Approximating a point process by a renewal process, I: two basic
methods", Operations Research 30 (1982) 125-147, section 3 (three-moment H2).
M. F. Neuts, *Matrix-Geometric Solutions in Stochastic Models*, 1981, ch. 2.
A. Thummler, P. Buchholz and M. Telek, "A novel approach for phase-type
fitting with the EM algorithm", IEEE TDSC 3 (2006) 245-258 (hyper-Erlang EM).
A. Feldmann and W. Whitt, "Fitting mixtures of exponentials to long-tail
distributions to analyze network performance models", Performance
Evaluation 31 (1998) 245-279.
"""
from __future__ import annotations

import math
import weakref
from pathlib import Path

import numpy as np
from scipy import optimize, special

from .distributions import Service, as_service

__all__ = ["MAX_PHASES", "phase_type"]

#: Largest number of phases used for low-variability (scv < 1) services.
MAX_PHASES = 24


def _erlang_mix(mean: np.ndarray, scv: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Mixture of Erlang(k-1) and Erlang(k), common rate, two moments matched.

    ``k = ceil(1/scv)`` (at least 2, at most ``MAX_PHASES``) and, with
    probability ``p``, the job leaves after phase ``k-1`` (Tijms 2003,
    eq. 5.9.3): ``p = (k scv - sqrt(k (1 + scv) - k^2 scv)) / (1 + scv)``,
    rate ``mu = (k - p) / mean``.  For ``scv < 1/MAX_PHASES`` this is the
    Erlang-MAX_PHASES of the same mean.
    """
    scv = np.maximum(scv, 1.0 / MAX_PHASES)
    k = np.clip(np.ceil(1.0 / scv - 1e-9), 2, MAX_PHASES).astype(int)
    disc = np.maximum(k * (1.0 + scv) - k**2 * scv, 0.0)
    p = np.clip((k * scv - np.sqrt(disc)) / (1.0 + scv), 0.0, 1.0)
    mu = (k - p) / mean
    shape = mean.shape
    beta = np.zeros(shape + (m,))
    beta[..., 0] = 1.0
    tm = np.zeros(shape + (m, m))
    idx = np.arange(m)
    live = idx < k[..., None]
    diag = np.where(live, -mu[..., None], -1.0)
    tm[..., idx, idx] = diag
    up = np.where(idx[:-1] < (k[..., None] - 1), mu[..., None], 0.0)
    # From phase k-1 (index k-2) the job continues to phase k only with probability 1-p.
    last_hop = idx[:-1] == (k[..., None] - 2)
    up = np.where(last_hop, up * (1.0 - p[..., None]), up)
    tm[..., idx[:-1], idx[1:]] = up
    return beta, tm


def _h2(p: np.ndarray, r1: np.ndarray, r2: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    shape = np.broadcast_shapes(np.shape(p), np.shape(r1), np.shape(r2))
    beta = np.zeros(shape + (m,))
    tm = np.zeros(shape + (m, m))
    idx = np.arange(m)
    tm[..., idx, idx] = -1.0
    beta[..., 0] = p
    beta[..., 1] = 1.0 - p
    tm[..., 0, 0] = -r1
    tm[..., 1, 1] = -r2
    return beta, tm


def _moment_fit(m1, m2, m3) -> tuple[np.ndarray, np.ndarray]:
    """PH fit to the first two (scv < 1) or three (scv >= 1) raw moments.

    scv >= 1: the H2 with ``a_i = 1/rate_i`` the roots of
    ``x^2 - c1 x + c0`` where ``u_k = m_k / k!`` satisfy
    ``u_3 = c1 u_2 - c0 u_1``, ``u_2 = c1 u_1 - c0`` (the moment / Prony
    equations, Whitt 1982 section 3); feasible iff ``m1 m3 > 1.5 m2^2``.
    Otherwise (third moment too small, or not finite) balanced means.
    """
    m1, m2, m3 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (m1, m2, m3)))
    scv = np.maximum(m2 / m1**2 - 1.0, 0.0)
    low = scv < 1.0 - 1e-12
    m = max(2, int(np.max(np.clip(np.ceil(1.0 / np.maximum(scv[low], 1.0 / MAX_PHASES) - 1e-9),
                                  2, MAX_PHASES)))) if low.any() else 2
    beta_lo, tm_lo = _erlang_mix(m1, np.where(low, scv, 0.5), m)
    # Three-moment H2 where feasible.
    u1, u2, u3 = m1, m2 / 2.0, m3 / 6.0
    with np.errstate(all="ignore"):
        c1 = (u3 - u2 * u1) / (u2 - u1**2)
        c0 = c1 * u1 - u2
        disc = c1**2 - 4.0 * c0
        root = np.sqrt(np.maximum(disc, 0.0))
        a1 = 0.5 * (c1 + root)
        a2 = 0.5 * (c1 - root)
        p3 = (u1 - a2) / (a1 - a2)
    feasible = (np.isfinite(m3) & (m1 * m3 > 1.5 * m2**2 * (1 + 1e-9)) & (scv > 1 + 1e-9)
                & np.isfinite(c1) & (disc > 0) & (a2 > 0) & (p3 > 0) & (p3 < 1))
    # Balanced means (Whitt 1982 eq. 3.7), the same as Service.hyperexponential.
    c2 = np.maximum(scv, 1.0)
    pb = 0.5 * (1.0 + np.sqrt((c2 - 1.0) / (c2 + 1.0)))
    rb1, rb2 = 2.0 * pb / m1, 2.0 * (1.0 - pb) / m1
    p = np.where(feasible, p3, pb)
    r1 = np.where(feasible, 1.0 / np.where(feasible, a1, 1.0), rb1)
    r2 = np.where(feasible, 1.0 / np.where(feasible, a2, 1.0), rb2)
    beta_hi, tm_hi = _h2(p, r1, r2, m)
    beta = np.where(low[..., None], beta_lo, beta_hi)
    tm = np.where(low[..., None, None], tm_lo, tm_hi)
    return beta, tm


def _erlang_exact(mean: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = np.minimum(np.round(k).astype(int), MAX_PHASES)
    m = int(np.max(k)) if k.size else 1
    mu = k / mean
    shape = mean.shape
    beta = np.zeros(shape + (m,))
    beta[..., 0] = 1.0
    tm = np.zeros(shape + (m, m))
    idx = np.arange(m)
    live = idx < k[..., None]
    tm[..., idx, idx] = np.where(live, -mu[..., None], -1.0)
    tm[..., idx[:-1], idx[1:]] = np.where(idx[:-1] < k[..., None] - 1, mu[..., None], 0.0)
    return beta, tm


def phase_type(service, fit: str = "moments") -> tuple[np.ndarray, np.ndarray]:
    """PH representation ``(beta, Tm)`` of a service-time distribution.

    Parameters
    ----------
    service : Service or float
        A :class:`~capacity.Service` (or a bare mean in seconds, exponential).
    fit : {"moments", "distribution"}
        For families without an exact PH form: match two or three moments
        (default), or fit the whole distribution by a hyper-Erlang
        (lognormal, non-integer gamma, empirical, scalar scipy laws; a
        scipy law with array parameters falls back to moments).

    Returns
    -------
    beta : ndarray, shape ``service.shape + (m,)``
        Initial probabilities of the phases.
    Tm : ndarray, shape ``service.shape + (m, m)``
        Sub-generator (rates per second); ``-Tm @ 1`` is the exit-rate vector.

    Notes
    -----
    Exact for exponential, Erlang (up to ``MAX_PHASES`` phases),
    hyperexponential and integer-shape gamma; a moment fit (an approximation)
    for every other family -- see the module docstring.

    Examples
    --------
    >>> from capacity import Service
    >>> beta, tm = phase_type(Service.erlang(2.0, 2))
    >>> beta.tolist(), tm.tolist()
    ([1.0, 0.0], [[-1.0, 1.0], [0.0, -1.0]])
    """
    svc: Service = as_service(service)
    fam, p = svc.family, svc._params
    if fam == "exponential":
        mean = np.asarray(p["mean"], dtype=float)
        return np.ones(mean.shape + (1,)), (-1.0 / mean)[..., None, None]
    if fam == "erlang":
        mean, k = np.broadcast_arrays(np.asarray(p["mean"], float), np.asarray(p["k"], float))
        return _erlang_exact(mean, k)
    if fam == "hyperexponential":
        return _h2(p["p"], p["rate1"], p["rate2"], 2)
    if fam == "deterministic":
        mean = np.asarray(p["mean"], dtype=float)
        return _erlang_exact(mean, np.full(mean.shape, float(MAX_PHASES)))
    if fam == "gamma":
        mean, scv = np.broadcast_arrays(np.asarray(p["mean"], float), np.asarray(p["scv"], float))
        shape = 1.0 / scv
        integer = np.abs(shape - np.round(shape)) < 1e-9 * np.maximum(shape, 1.0)
        if np.all(integer):
            return _erlang_exact(mean, np.round(shape))
    if fit not in ("moments", "distribution"):
        raise ValueError(f"fit must be 'moments' or 'distribution', got {fit!r}")
    if fit == "distribution":
        return _distribution_fit(svc)
    m1 = np.asarray(svc.moment(1), dtype=float)
    m2 = np.asarray(svc.moment(2), dtype=float)
    with np.errstate(over="ignore"):
        m3 = np.asarray(svc.moment(3), dtype=float)
    return _moment_fit(m1, m2, m3)


def _ph_mean(beta: np.ndarray, tm: np.ndarray) -> np.ndarray:
    """E[S] = beta (-Tm)^(-1) 1 (used by tests and by the PS module)."""
    ones = np.ones(beta.shape)
    return np.einsum("...i,...i->...", beta, np.linalg.solve(-tm, ones[..., None])[..., 0])


def _ph_moment(beta: np.ndarray, tm: np.ndarray, k: int) -> np.ndarray:
    """E[S^k] = k! beta (-Tm)^(-k) 1."""
    v = np.ones(beta.shape)[..., None]
    for _ in range(k):
        v = np.linalg.solve(-tm, v)
    return math.factorial(k) * np.einsum("...i,...i->...", beta, v[..., 0])


# ---------------------------------------------------------------------------
# Distribution fit: hyper-Erlang (mixture of Erlang branches) in log-quantile space
# ---------------------------------------------------------------------------
#: Most phases a distribution fit may use (the PS transform costs O(m^3) per
#: transform node for the eigen-decomposition and O(m) per quadrature node).
FIT_PHASES = 16
# Branch structures tried, cheapest first: M branches of a common order r.  More
# branches of low order follow wide (heavy-tailed) laws, fewer of high order
# concentrated ones; a few mixed-order structures help lognormals with scv < 1.
_FIT_STRUCTURES = ((1,) * 8, (2,) * 8, (1, 3, 3, 3), (3,) * 5, (1, 3, 4, 5), (4,) * 4, (3, 5, 8), (6,) * 2, (8,) * 2,
                   (16,))
# Target grid: probabilities uniform in logit(u) over [1e-3, 1 - 1e-6].
_FIT_U = 1.0 / (1.0 + np.exp(-np.linspace(np.log(1e-3 / (1 - 1e-3)), np.log((1 - 1e-6) / 1e-6), 120)))
_FIT_CACHE: dict = {}
#: Sizes below this fraction of the mean are fitted as this fraction.  A heavy-tailed gamma
#: (scv 10: shape 0.1) puts 24 % of its requests below 1e-6 of its mean and its p1 at 1e-20:
#: fitted as they are, half the branches went to those sizes, with rates up to 1e18 / mean
#: (1e59 at scv 50), which broke the processor-sharing transform (quantiles of 0.05 s where
#: simulation gives 35 s) and left too few branches for the tail (the p99.9's mass off by 100x
#: at scv 25).  Such requests carry under 1e-6 of the work and leave a queue as soon as they
#: enter it, so no response-time law depends on their exact size below the floor.
SIZE_FLOOR = 1e-6
# Fits of empirical and scipy services, per Service object (dropped with the object).
_OBJECT_FITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _em_hyper_erlang(x: np.ndarray, w: np.ndarray, orders: np.ndarray, iters: int = 100):
    """Weighted EM for a mixture of Erlang(r_i, lam_i) with fixed orders r_i
    (Thummler, Buchholz and Telek 2006); the M-step keeps the weighted mean."""
    r = orders.astype(float)[:, None]
    big_m = orders.size
    cw = np.cumsum(w) / np.sum(w)
    grp = np.minimum((cw * big_m).astype(int), big_m - 1)
    alpha = np.array([w[grp == i].sum() for i in range(big_m)]) + 1e-12
    mean_i = np.array([(w * x)[grp == i].sum() for i in range(big_m)]) / alpha
    lam = r[:, 0] / np.maximum(mean_i, 1e-300)
    lx = np.log(x)
    lg = special.gammaln(r)
    for _ in range(iters):
        logp = np.log(alpha)[:, None] + r * np.log(lam)[:, None] + (r - 1) * lx - lam[:, None] * x - lg
        g = np.exp(logp - logp.max(axis=0))
        gw = g / g.sum(axis=0) * w
        alpha = np.maximum(gw.sum(axis=1), 1e-300)
        lam = r[:, 0] * alpha / np.maximum(gw @ x, 1e-300)
    return alpha / alpha.sum(), lam


def _fit_targets(ppf, mean: float) -> dict:
    """What a hyper-Erlang fit of the law with quantile function ``ppf`` is fitted to: the
    target probabilities and sizes, the residual scale and the weighted EM grid."""
    # Probabilities whose sizes lie below SIZE_FLOOR x mean are not targets (see SIZE_FLOOR): the
    # grid starts at the floor's probability, and the fit only has to put that much mass below it.
    floor = SIZE_FLOOR * mean
    p_floor = _probability_below(ppf, floor)
    u = _FIT_U if p_floor <= _FIT_U[0] else _logit_grid(p_floor, _FIT_U[-1], _FIT_U.size)
    z = np.log(u / (1 - u))
    x = np.asarray(ppf(u), dtype=float)
    lx = np.log(np.maximum(x, 1e-300))
    dlx = np.gradient(lx, z)
    scale = np.maximum(dlx, 1e-3 * max(np.max(dlx), 1e-300))  # d log x / d logit(u), floored for atoms
    # EM grid: 400 cells uniform in logit over [1e-7, 1 - 1e-9] (or from the floor's probability),
    # masses as weights; the mass below the floor is one cell at the floor.
    e_low = max(1e-7, p_floor)
    ze = np.linspace(np.log(e_low / (1 - e_low)), np.log((1 - 1e-9) / 1e-9), 401)
    ue = 1.0 / (1.0 + np.exp(-ze))
    ue[-1] = 1.0
    xe = np.asarray(ppf(1.0 / (1.0 + np.exp(-0.5 * (ze[1:] + ze[:-1])))), dtype=float)
    we = np.diff(ue)
    if e_low > 1e-7:
        xe, we = np.concatenate([[floor], xe]), np.concatenate([[e_low], we])
    else:
        we[0] += ue[0]
    return dict(ppf=ppf, mean=mean, floor=floor, u=u, x=x, scale=scale, xe=np.maximum(xe, 1e-300), we=we)


def _fit_structure(targets: dict, orders, starts: list | None = None):
    """Best ``(score, alpha, lam)`` of one branch structure (None if every start fails).

    ``starts``: parameter vectors ``(log(alpha_i / alpha_0) for i >= 1, log lam)`` to start
    from; by default weighted EM and equal weights at spread quantiles."""
    u, x, scale, mean = targets["u"], targets["x"], targets["scale"], targets["mean"]
    r = np.asarray(orders)
    big_m = r.size
    rr = r.astype(float)[:, None]

    def unpack(th):
        logit_a = np.concatenate([[0.0], th[:big_m - 1]])
        a = np.exp(logit_a - np.max(logit_a))
        a = a / a.sum()
        lam = np.exp(th[big_m - 1:])
        return a, lam * (np.sum(a * rr[:, 0] / lam) / mean)

    def resid(th):
        a, lam = unpack(th)
        arg = lam[:, None] * x
        d = np.where(u < 0.5, a @ special.gammainc(rr, arg) - u, (1 - u) - a @ special.gammaincc(rr, arg))
        return d / (u * (1 - u)) * scale

    if starts is None:
        starts = []
        a0, l0 = _em_hyper_erlang(targets["xe"], targets["we"], r)
        starts.append(np.concatenate([np.log(np.maximum(a0[1:], 1e-6) / max(a0[0], 1e-6)), np.log(l0)]))
        # Second start: equal weights, branch means at quantiles spread in logit(u).
        uq = 1.0 / (1.0 + np.exp(-np.linspace(-2.0, 6.0, big_m))) if big_m > 1 else np.array([0.5])
        starts.append(np.concatenate([np.zeros(big_m - 1),
                                      np.log(rr[:, 0] / np.maximum(targets["ppf"](uq), 1e-300))]))
    best = None
    for th0 in starts:
        with np.errstate(all="ignore"):
            try:
                sol = optimize.least_squares(resid, th0, method="trf", x_scale="jac", max_nfev=40)
            except (ValueError, np.linalg.LinAlgError):
                continue
        if not np.all(np.isfinite(sol.fun)):
            continue
        score = np.sqrt(np.mean(sol.fun**2)) + 0.25 * np.max(np.abs(sol.fun))
        if best is None or score < best[0]:
            with np.errstate(over="ignore"):  # a rate overflowing to inf is capped below
                a, lam = unpack(sol.x)
            best = (score, a, lam)
    return best


def _finish_fit(r: np.ndarray, a: np.ndarray, lam: np.ndarray, mean: float):
    """Cap the branch rates at the size floor and restore the mean exactly."""
    # A branch left with almost no weight may keep an absurd rate (1e154 seen): no branch is
    # faster than the floor, then the mean is restored exactly.
    lam = np.minimum(lam, r / (SIZE_FLOOR * mean))
    return r, a, lam * (np.sum(a * r / lam) / mean)


def _hyper_erlang_fit(ppf, mean: float):
    """Hyper-Erlang ``(orders, alpha, lam)`` approximating the law with quantile
    function ``ppf`` and mean ``mean`` (matched exactly).

    Least squares on the horizontal (log-size) distance between the two
    distribution functions at 120 probabilities uniform in logit over
    [1e-3, 1 - 1e-6]: residual ``(F_fit(x_k) - u_k) / (x f(x))_k`` (tail
    side by the survival functions, so 1 - 1e-6 keeps its precision), which
    is ``log x_fit(u_k) - log x_k`` to first order.  Started from weighted EM
    on a finer grid; the best of ``_FIT_STRUCTURES`` (rms plus a quarter of
    the maximum residual) is kept.
    """
    targets = _fit_targets(ppf, mean)
    best = None
    for orders in _FIT_STRUCTURES:
        got = _fit_structure(targets, orders)
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], np.asarray(orders), got[1], got[2])
        if best is not None and best[0] < 0.005:
            break
    if best is None:
        raise ValueError("distribution fit failed")
    return _finish_fit(best[1], best[2], best[3], mean)


def _logit_grid(lo: float, hi: float, n: int) -> np.ndarray:
    """``n`` probabilities uniform in logit(u) from ``lo`` to ``hi``."""
    z = np.linspace(np.log(lo / (1 - lo)), np.log(hi / (1 - hi)), n)
    return 1.0 / (1.0 + np.exp(-z))


def _probability_below(ppf, x: float) -> float:
    """P(S < x) from the quantile function alone (bisection in logit(u), to 1e-4 in logit)."""
    lo, hi = -40.0, 40.0
    if float(ppf(1.0 / (1.0 + math.exp(-lo)))) >= x:
        return 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if float(ppf(1.0 / (1.0 + math.exp(-mid)))) < x:
            lo = mid
        else:
            hi = mid
    return 1.0 / (1.0 + math.exp(-lo))


def _hyper_erlang_ph(orders: np.ndarray, alpha: np.ndarray, lam: np.ndarray, m: int):
    """PH ``(beta, Tm)`` of a hyper-Erlang, padded to ``m`` phases."""
    beta = np.zeros(m)
    tm = -np.eye(m)
    k = 0
    for r, a, mu in zip(orders, alpha, lam):
        beta[k] = a
        for j in range(k, k + r):
            tm[j, j] = -mu
            if j < k + r - 1:
                tm[j, j + 1] = mu
        k += r
    return beta, tm


#: The scv grid of the shipped fits (``capacity/tables/ph_fits.npz``, built by
#: ``tools/build_ph_fits.py``): log-spaced from 0.01 to 50 at 1/6 of the step of the quantile
#: tables' scv grid (0.04 to 25 in 17 steps), so that grid's nodes are among these.
FIT_TABLE_SCV = 0.04 * np.exp(np.arange(-22, 114) * (np.log(25.0 / 0.04) / 17 / 6))
_FIT_TABLE_BRANCHES = max(len(s) for s in _FIT_STRUCTURES)
_FIT_TABLE: dict | None = None


def _load_fit_table() -> dict:
    global _FIT_TABLE
    if _FIT_TABLE is None:
        path = Path(__file__).with_name("tables") / "ph_fits.npz"
        try:
            with np.load(path) as data:
                _FIT_TABLE = {k: data[k] for k in data.files}
        except OSError:  # not built: every fit is made live
            _FIT_TABLE = {}
    return _FIT_TABLE


def _table_fit(family: str, scv: float):
    """The shipped hyper-Erlang fit ``(orders, alpha, lam)`` of a mean-1 lognormal or gamma
    law at ``scv``, or None off the table's range.

    At a node: the live fit of that scv, as :func:`_hyper_erlang_fit` makes it.  Between two
    nodes: the left node's branch structure, ``log alpha`` and ``log lam`` interpolated
    linearly in ``log scv`` between its fit at the left node and its re-fit at the right one,
    then normalised and the mean restored.  ``tools/build_ph_fits.py --check`` measures the
    quantile error of the result against the law between the nodes.
    """
    table = _load_fit_table()
    key = f"{family}_node"
    if key not in table:
        return None
    grid = np.log(table["scv"])
    x = math.log(scv)
    if not grid[0] - 1e-9 <= x <= grid[-1] + 1e-9:
        return None
    i = int(np.clip(np.searchsorted(grid, x) - 1, 0, grid.size - 2))
    w = (x - grid[i]) / (grid[i + 1] - grid[i])
    structures = table[f"{family}_node_structure"]

    def unpack(structure, params):
        orders = np.asarray(_FIT_STRUCTURES[int(structure)])
        params = params[:orders.size]
        alpha = np.exp(params[:, 0] - params[:, 0].max())
        return orders, alpha / alpha.sum(), params[:, 1]

    if abs(w) < 1e-9 or abs(w - 1) < 1e-9:
        j = i if abs(w) < 1e-9 else i + 1
        orders, alpha, log_lam = unpack(structures[j], table[key][j])
        return _finish_fit(orders, alpha, np.exp(log_lam), 1.0)
    # Between nodes the interpolated parameters of the left node's structure, and the right
    # node's fit when its structure differs, each start one least-squares run of their structure
    # (the interpolation alone can leave the path of the best fit, up to 3x off in a quantile
    # of heavy-tailed gamma); the better one is kept.  Each converges in a few steps.
    candidates = [unpack(structures[i], (1 - w) * table[key][i] + w * table[f"{family}_right"][i])]
    if structures[i + 1] != structures[i]:
        candidates.append(unpack(structures[i + 1], table[key][i + 1]))
    unit = Service.lognormal(1.0, scv) if family == "lognormal" else Service.gamma(1.0, scv)
    targets = _fit_targets(unit.ppf, 1.0)
    best = None
    for orders, alpha, log_lam in candidates:
        start = np.concatenate([np.log(np.maximum(alpha[1:], 1e-300) / max(alpha[0], 1e-300)), log_lam])
        got = _fit_structure(targets, orders, starts=[start])
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], orders, got[1], got[2])
    if best is None:
        return None
    return _finish_fit(best[1], best[2], best[3], 1.0)


def _distribution_fit(svc: Service) -> tuple[np.ndarray, np.ndarray]:
    """Hyper-Erlang PH fit of the whole distribution, per parameter point.

    Lognormal and gamma are scale families: the fit is made once per scv at
    mean 1 (cached) and rescaled.  Empirical and scalar scipy laws are fitted
    directly; a scipy law with array parameters gets the moment fit.
    """
    fam, p = svc.family, svc._params
    if fam in ("lognormal", "gamma"):
        mean, scv = np.broadcast_arrays(np.asarray(p["mean"], float), np.asarray(p["scv"], float))
        fits = []
        for c in scv.ravel():
            key = (fam, float(c))
            if key not in _FIT_CACHE:
                fit = _table_fit(fam, float(c))
                if fit is None:
                    unit = Service.lognormal(1.0, c) if fam == "lognormal" else Service.gamma(1.0, c)
                    fit = _hyper_erlang_fit(unit.ppf, 1.0)
                _FIT_CACHE[key] = fit
            fits.append(_FIT_CACHE[key])
        m = max(int(np.sum(f[0])) for f in fits)
        beta = np.empty(mean.shape + (m,))
        tm = np.empty(mean.shape + (m, m))
        bf, tf = beta.reshape(-1, m), tm.reshape(-1, m, m)
        for i, (f, mu) in enumerate(zip(fits, mean.ravel())):
            b, t = _hyper_erlang_ph(f[0], f[1], f[2], m)
            bf[i], tf[i] = b, t / mu
        return beta, tm
    if svc.shape != ():
        return _moment_fit(svc.moment(1), svc.moment(2), svc.moment(3))
    # The fit takes ~0.5 s and every quantile call needs it: keep it with the object.
    try:
        cached = _OBJECT_FITS.get(svc)
    except TypeError:  # unhashable
        cached = None
    if cached is None:
        orders, alpha, lam = _hyper_erlang_fit(svc.ppf, float(svc.mean))
        cached = _hyper_erlang_ph(orders, alpha, lam, int(np.sum(orders)))
        try:
            _OBJECT_FITS[svc] = cached
        except TypeError:  # not weak-referenceable: no cache
            pass
    return cached[0].copy(), cached[1].copy()
