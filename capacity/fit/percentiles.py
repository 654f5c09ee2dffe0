"""CPU service-time distribution from observed latency percentiles (p50/p90/p99/p99.9 at known loads)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import optimize

from .._checks import as_float_array, check_discipline, check_positive, check_rr, check_servers
from ..distributions import Service
from ..exceptions import FitWarning, IdentifiabilityWarning
from ._result import FitResult

__all__ = ["PercentileFit", "from_percentiles"]

ArrayLike = Any

_FAMILIES = ("lognormal", "gamma", "hyperexponential", "exponential", "deterministic")
_TWO_PARAM = ("lognormal", "gamma", "hyperexponential")
_SCV_BOUNDS = {"lognormal": (1e-3, 100.0), "gamma": (1e-3, 100.0), "hyperexponential": (1.0, 100.0)}
_RHO_MAX = 0.999          # upper bound of the utilisation at the busiest observation during the search
_JAC_STEP = 1e-4          # forward-difference step in the (log) parameters
_RESID_CAP = 20.0         # log-residual used where a trial point is unstable (inf quantile)
_RESTART_RMS = 0.02      # RMS relative error above which the fit is restarted from a grid
_MAX_RMS = 0.10           # RMS relative error above which the model "does not describe" the percentiles
_DASHBOARD_PRECISION = 0.01   # 1 % relative error assumed for percentiles without n_requests
_UNIDENTIFIED_FACTOR = 2.0    # a parameter free to move by this factor at that precision is not identified
_DELAY_UNIDENTIFIED = 0.25    # ... or a delay free to move by 25 % of the smallest observed percentile
_GH_NODES = 32            # Gauss-Hermite nodes over log(delay) for the lognormal-delay convolution
_SF_GRID = 96             # response-time sf grid points for the convolution
_X_GRID = 512             # grid of the summed latency, on which its cdf is inverted
_SLOW_PS = ("lognormal", "gamma", "hyperexponential")
_SLOW_PS_SCV = (0.05, 20.0)   # scv search range for those (PS evaluation cost grows outside)


# ---------------------------------------------------------------------- inputs
class _Obs:
    """All observed percentiles flattened: one row per (observation, percentile)."""

    def __init__(self, q, t, lam, servers, obs_index, n_requests, utilization, n_obs):
        self.q, self.t, self.lam, self.servers = q, t, lam, servers
        self.obs_index = obs_index
        self.n_requests = n_requests          # per row (NaN: unknown)
        self.utilization = utilization        # per observation (NaN: unknown)
        self.n_obs = n_obs


def _one_percentile_map(p, where: str):
    if not isinstance(p, Mapping) or not p:
        raise ValueError(f"percentiles{where} must be a non-empty mapping {{q: seconds}}, got {p!r}")
    qs = as_float_array(list(p.keys()), f"percentiles{where} quantile")
    ts = as_float_array(list(p.values()), f"percentiles{where} latency")
    bad = ~((qs > 0) & (qs < 1))
    if bad.any():
        raise ValueError(f"percentiles{where}: quantile q must lie strictly between 0 and 1, "
                         f"got {qs[bad][0]!r}")
    bad = ~((ts > 0) & np.isfinite(ts))
    if bad.any():
        raise ValueError(f"percentiles{where}: latencies must be positive and finite seconds, "
                         f"got {ts[bad][0]!r}")
    order = np.argsort(qs)
    qs, ts = qs[order], ts[order]
    if np.any(np.diff(qs) == 0):
        raise ValueError(f"percentiles{where}: quantile listed twice ({qs[np.diff(qs) == 0][0]!r})")
    dec = np.diff(ts) < 0
    if dec.any():
        k = int(np.argmax(dec))
        raise ValueError(f"percentiles{where}: latencies must not decrease as q increases, got "
                         f"q={qs[k]:g}: {ts[k]:g} s but q={qs[k + 1]:g}: {ts[k + 1]:g} s")
    return qs, ts


def _per_obs(value, name: str, n: int, default=math.nan):
    if value is None:
        return np.full(n, default)
    arr = as_float_array(value, name)
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must be one number or one per observation ({n}), got shape {arr.shape}")
    return arr.astype(float)


def _parse(percentiles, arrival_rate, servers, utilization, n_requests) -> _Obs:
    records = []
    if isinstance(percentiles, Mapping):
        items = [percentiles]
        single = True
    elif isinstance(percentiles, Sequence) and not isinstance(percentiles, (str, bytes)):
        items = list(percentiles)
        single = False
        if not items:
            raise ValueError("percentiles must not be empty")
    else:
        raise ValueError("percentiles must be a mapping {q: seconds} or a list of them, "
                         f"got {percentiles!r}")
    n = len(items)
    lam_in = [None] * n
    util_in = [None] * n
    nreq_in = [None] * n
    srv_in = [None] * n
    for i, it in enumerate(items):
        where = "" if single else f"[{i}]"
        if isinstance(it, Mapping) and "percentiles" in it:
            unknown = set(it) - {"percentiles", "arrival_rate", "utilization", "n_requests", "servers"}
            if unknown:
                raise ValueError(f"percentiles{where} has unknown keys {sorted(unknown)!r}")
            records.append(_one_percentile_map(it["percentiles"], where))
            lam_in[i] = it.get("arrival_rate")
            util_in[i] = it.get("utilization")
            nreq_in[i] = it.get("n_requests")
            srv_in[i] = it.get("servers")
        else:
            records.append(_one_percentile_map(it, where))
    lam = _per_obs(arrival_rate, "arrival_rate", n) if arrival_rate is not None else np.full(n, math.nan)
    for i, v in enumerate(lam_in):
        if v is not None:
            lam[i] = float(as_float_array(v, f"percentiles[{i}]['arrival_rate']"))
    if np.isnan(lam).any():
        raise ValueError("arrival_rate must be given (requests/s), as an argument or per observation")
    bad = ~((lam > 0) & np.isfinite(lam))
    if bad.any():
        raise ValueError(f"arrival_rate must be positive and finite requests/s, got {lam[bad][0]!r}")
    util = _per_obs(utilization, "utilization", n)
    for i, v in enumerate(util_in):
        if v is not None:
            util[i] = float(as_float_array(v, f"percentiles[{i}]['utilization']"))
    bad = ~np.isnan(util) & ~((util > 0) & (util <= 1))
    if bad.any():
        raise ValueError(f"utilization must be a CPU busy fraction in (0, 1], got {util[bad][0]!r}")
    if np.isnan(util).any() and not np.isnan(util).all():
        raise ValueError("utilization must be given for every observation or for none")
    nreq = _per_obs(n_requests, "n_requests", n)
    for i, v in enumerate(nreq_in):
        if v is not None:
            nreq[i] = float(as_float_array(v, f"percentiles[{i}]['n_requests']"))
    bad = ~np.isnan(nreq) & ~((nreq >= 1) & np.isfinite(nreq))
    if bad.any():
        raise ValueError(f"n_requests must be a count >= 1, got {nreq[bad][0]!r}")
    if np.isnan(nreq).any() and not np.isnan(nreq).all():
        raise ValueError("n_requests must be given for every observation or for none")
    srv = check_servers(servers, "servers")
    srv = np.broadcast_to(srv, (n,)).astype(np.int64).copy() if srv.ndim <= 1 and srv.size in (1, n) else None
    if srv is None:
        raise ValueError(f"servers must be one integer or one per observation ({n}), got {servers!r}")
    for i, v in enumerate(srv_in):
        if v is not None:
            srv[i] = int(check_servers(v, f"percentiles[{i}]['servers']"))
    sizes = [len(r[0]) for r in records]
    idx = np.repeat(np.arange(n), sizes)
    return _Obs(np.concatenate([r[0] for r in records]), np.concatenate([r[1] for r in records]),
                lam[idx], srv[idx], idx, nreq[idx], util, n)


# ---------------------------------------------------------------------- the model (math)
def _make_service(family: str, mean: np.ndarray, scv: np.ndarray) -> Service:
    if family == "exponential":
        return Service.exponential(mean)
    if family == "deterministic":
        return Service.deterministic(mean)
    return getattr(Service, family)(mean, scv)


def _queue_quantile(discipline, q, lam, servers, svc, slices=1, admission="fifo", slice_delay=0.0):
    if discipline == "rr":
        from .. import rr
        return np.asarray(rr.response_quantile(q, lam, svc, servers, slices=slices, admission=admission,
                                               slice_delay=slice_delay), dtype=float)
    if discipline == "fcfs":
        from .. import _quantile_table, fcfs
        # One core, lognormal or gamma: the shipped table of exact M/G/1 quantiles (interpolation
        # error <= 0.2 %, see from_percentiles); the rest, and points off the table, exactly.
        x = _quantile_table.tabled_quantile("fcfs", q, lam, svc, servers)
        if x is None:
            return np.asarray(fcfs.response_quantile(q, lam, svc, servers), dtype=float)
        miss = np.isnan(x)
        if miss.any():
            x = np.where(miss, np.asarray(fcfs.response_quantile(q, lam, svc, servers), dtype=float), x)
        return x
    from .. import ps
    return np.asarray(ps.response_quantile(q, lam, svc, servers), dtype=float)


def _queue_sf(discipline, t, lam, servers, svc, slices=1, admission="fifo", slice_delay=0.0):
    if discipline == "rr":
        from .. import rr
        return np.asarray(rr.response_sf(t, lam, svc, servers, slices=slices, admission=admission,
                                         slice_delay=slice_delay), dtype=float)
    if discipline == "fcfs":
        from .. import fcfs
        return np.asarray(fcfs.response_sf(t, lam, svc, servers), dtype=float)
    from .. import ps
    return np.asarray(ps.response_sf(t, lam, svc, servers), dtype=float)


def _lognormal_delay_quantiles(discipline, q, lam, servers, svc, d_mean, d_scv, t_lo, t_hi, slices=1,
                               admission="fifo", slice_delay=0.0):
    """Quantiles of T + D, T the queue response, D an independent lognormal delay.

    ``svc`` parameters and ``d_mean``/``d_scv`` have shape (K, 1); q/lam/servers shape (N,).
    Numerical convolution: P(T + D <= x) = E[F_T(x - D)], the expectation over log D by
    Gauss-Hermite quadrature, F_T interpolated (log-sf linear in log t) from one vectorised
    ``response_sf`` call on a log grid; the cdf of the sum is evaluated on a finer log grid and
    inverted by linear interpolation.
    """
    keys, inv = np.unique(np.stack([lam, servers.astype(float)]), axis=1, return_inverse=True)
    inv = inv.ravel()
    lam_u, srv_u = keys[0], keys[1].astype(np.int64)
    tg = np.geomspace(t_lo, t_hi, _SF_GRID)
    svc3 = svc._expand(1)                                          # params (K, 1, 1)
    sf = _queue_sf(discipline, tg, lam_u[:, None], srv_u[:, None], svc3, slices, admission,
                   slice_delay)                                   # (K, J, G)
    sf = np.broadcast_to(sf, (svc.shape[0], lam_u.size, tg.size))
    logsf = np.log(np.clip(sf, 1e-300, 1.0))
    u, w = np.polynomial.hermite.hermgauss(_GH_NODES)
    w = w / math.sqrt(math.pi)
    s2 = np.log1p(d_scv)                                          # (K, 1)
    mu = np.log(d_mean) - s2 / 2
    dnodes = np.exp(mu + math.sqrt(2.0) * np.sqrt(s2) * u)       # (K, nodes)
    xg = np.geomspace(t_lo, 2 * t_hi, _X_GRID)
    y = xg[None, :, None] - dnodes[:, None, :]                    # (K, X, nodes)
    logy = np.log(np.where(y > 0, y, t_lo))
    lt = np.log(tg)
    pos = np.clip((logy - lt[0]) / (lt[1] - lt[0]), 0, tg.size - 1 - 1e-9)
    i0 = pos.astype(np.int64)
    fr = pos - i0
    K = svc.shape[0]
    kk = np.arange(K)[:, None, None]
    cdf = np.empty((K, lam_u.size, xg.size))
    for j in range(lam_u.size):      # few distinct loads; vectorised over K, grid and nodes
        ls = logsf[:, j, :]
        v = ls[kk, i0] * (1 - fr) + ls[kk, np.minimum(i0 + 1, tg.size - 1)] * fr
        # Beyond the grid, extend the log-sf linearly in t (exponential tail of a stable queue).
        slope = (ls[:, -1] - ls[:, -2]) / (tg[-1] - tg[-2])
        beyond = y > tg[-1]
        v = np.where(beyond, ls[:, -1][:, None, None] + slope[:, None, None] * (y - tg[-1]), v)
        f = np.where(y > t_lo, -np.expm1(v), 0.0)
        cdf[:, j, :] = np.einsum("kxn,n->kx", f, w)
    out = np.empty((K, q.size))
    lx = np.log(xg)
    for n in range(q.size):
        c = np.maximum.accumulate(cdf[:, inv[n], :], axis=1)
        for k in range(K):
            out[k, n] = math.exp(np.interp(q[n], c[k], lx, left=lx[0], right=math.inf))
    return out


class _Model:
    """Free parameters in a search space; ``quantiles(Theta)`` is vectorised over parameter sets."""

    def __init__(self, obs: _Obs, discipline, family, delay, scv_fixed, mean_fixed, delay_fixed, slices=1,
                 admission="fifo", slice_delay=0.0):
        self.obs, self.discipline, self.family, self.delay = obs, discipline, family, delay
        self.slices = int(slices)
        self.admission = admission
        self.slice_delay = float(slice_delay)
        self.mean_fixed, self.scv_fixed, self.delay_fixed = mean_fixed, scv_fixed, delay_fixed
        self.t_ref = float(obs.t.min())
        names, lo, hi = [], [], []
        rho_cap = float(np.min(obs.servers / obs.lam)) * _RHO_MAX
        if mean_fixed is None:
            names.append("log_mean")
            lo.append(math.log(rho_cap) - 25.0)
            hi.append(math.log(rho_cap))
        if family in _TWO_PARAM and scv_fixed is None:
            names.append("log_scv")
            a, b = _SCV_BOUNDS[family]
            if discipline in ("ps", "rr") and family in _SLOW_PS:
                # The PS transform's phase-type fit grows with 1/scv and with scv: bound the
                # search where one evaluation stays within seconds -- or, for a family the
                # shipped PS table covers, to the table's scv range (milliseconds per evaluation).
                from .._quantile_table import scv_range

                a, b = max(a, _SLOW_PS_SCV[0]), min(b, _SLOW_PS_SCV[1])
                tabled = scv_range("ps", family)
                if tabled is not None:
                    a, b = max(a, tabled[0]), min(b, tabled[1])
            lo.append(math.log(a))
            hi.append(math.log(b))
        if delay == "constant" and delay_fixed is None:
            names.append("delay")      # in units of the smallest observed percentile
            lo.append(0.0)
            hi.append(0.999)
        elif delay == "lognormal":
            names += ["log_delay_mean", "log_delay_scv"]
            lo += [math.log(self.t_ref * 1e-4), math.log(1e-3)]
            hi += [math.log(self.t_ref * 0.999), math.log(100.0)]
        self.names = names
        self.lo, self.hi = np.array(lo), np.array(hi)

    @property
    def slow(self) -> bool:
        # rr evaluates one PS quantile per point (except slices=1, which is FCFS).
        # Lognormal and gamma come from the shipped PS table (capacity._quantile_table) when it covers them.
        from .._quantile_table import families

        return (self.discipline == "ps" or (self.discipline == "rr" and self.slices > 1)) \
            and self.family in _SLOW_PS and self.family not in families("ps")

    def unpack(self, theta: np.ndarray) -> dict:
        """Natural parameters from a (K, p) batch; each value has shape (K,)."""
        K = theta.shape[0]
        col = {n: theta[:, i] for i, n in enumerate(self.names)}
        out = {}
        out["mean"] = np.exp(col["log_mean"]) if "log_mean" in col else np.full(K, self.mean_fixed)
        if self.family in _TWO_PARAM:
            out["scv"] = np.exp(col["log_scv"]) if "log_scv" in col else np.full(K, self.scv_fixed)
        else:
            out["scv"] = np.full(K, 1.0 if self.family == "exponential" else 0.0)
        if self.delay == "constant":
            out["delay"] = col["delay"] * self.t_ref if "delay" in col else np.full(K, self.delay_fixed)
        elif self.delay == "lognormal":
            out["delay_mean"] = np.exp(col["log_delay_mean"])
            out["delay_scv"] = np.exp(col["log_delay_scv"])
        return out

    def service(self, p: dict) -> Service:
        return _make_service(self.family, p["mean"][:, None], p["scv"][:, None])

    def quantiles_at(self, theta, q, lam, servers) -> np.ndarray:
        theta = np.atleast_2d(theta)
        p = self.unpack(theta)
        svc = self.service(p)
        if self.delay == "lognormal":
            return _lognormal_delay_quantiles(self.discipline, q, lam, servers, svc,
                                              p["delay_mean"][:, None], p["delay_scv"][:, None],
                                              self.t_ref * 1e-3, float(self.obs.t.max()) * 30,
                                              self.slices, self.admission, self.slice_delay)
        x = _queue_quantile(self.discipline, q, lam, servers, svc, self.slices, self.admission,
                            self.slice_delay)
        x = np.broadcast_to(x, (theta.shape[0], np.size(q)))
        if self.delay == "constant":
            x = x + p["delay"][:, None]
        return x

    def quantiles(self, theta) -> np.ndarray:
        o = self.obs
        return self.quantiles_at(theta, o.q, o.lam, o.servers)

    def residuals(self, theta) -> np.ndarray:
        """log(model) - log(observed) for a (K, p) batch, finite (unstable points capped)."""
        x = self.quantiles(theta)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(x) - np.log(self.obs.t)
        return np.where(np.isfinite(r), r, _RESID_CAP)

    def with_jacobian(self, theta: np.ndarray):
        """Residuals and their forward-difference Jacobian from ONE batched forward call."""
        p = theta.size
        steps = np.where(theta + _JAC_STEP <= self.hi, _JAC_STEP, -_JAC_STEP)
        batch = np.vstack([theta, theta + np.diag(steps)])
        r = self.residuals(batch)
        return r[0], ((r[1:] - r[0]) / steps[:, None]).T if p else np.empty((r.shape[1], 0))


def _start(model: _Model, obs: _Obs) -> np.ndarray:
    """Closed-form two-moment start (Pollaczek-Khinchine or PS mean, lognormal response)."""
    # Response-time moments from a lognormal through the percentiles of the lightest observation.
    from scipy.special import ndtri

    j = int(np.argmin([obs.lam[obs.obs_index == i][0] * 1.0 for i in range(obs.n_obs)]))
    m = obs.obs_index == j
    z, lt = ndtri(obs.q[m]), np.log(obs.t[m])
    if m.sum() >= 2 and np.ptp(z) > 0:
        sig = max(float(np.polyfit(z, lt, 1)[0]), 0.05)
    else:
        sig = 0.6
    mu = float(np.mean(lt - sig * z))
    lam, c = float(obs.lam[m][0]), float(obs.servers[m][0])
    d0 = 0.3 * float(obs.t.min()) if model.delay is not None else 0.0
    # the slice gaps hold no CPU: at low load they add (k - 1) d to every response
    d_gaps = (model.slices - 1) * model.slice_delay if model.discipline == "rr" else 0.0
    et = max(math.exp(mu + sig * sig / 2) - d0 - d_gaps, 1e-3 * math.exp(mu))
    cs = min(max(math.expm1(sig * sig), 0.2), 20.0)
    # Per-core: E[T] ~ E[S] (1 + (1 + cs)/2 * rho/(1 - rho)) (FCFS, Pollaczek-Khinchine) or
    # E[S]/(1 - rho) (PS); solve for E[S] by bisection on rho.
    k = (1 + cs) / 2 if model.discipline == "fcfs" else 1.0
    if model.discipline == "rr":
        # Between FCFS and PS with the mean's weight g(k) = 1 - k^-0.69 (capacity.rr docstring).
        g = 1.0 - model.slices ** -0.6908
        k = (1 - g) * (1 + cs) / 2 + g
    lo_r, hi_r = 0.0, _RHO_MAX
    for _ in range(60):
        r = (lo_r + hi_r) / 2
        es = r * c / lam
        if es * (1 + k * r / (1 - r) / c) < et:
            lo_r = r
        else:
            hi_r = r
    mean0 = lo_r * c / lam
    base = {"log_mean": math.log(max(mean0, 1e-12)), "log_scv": math.log(cs),
            "delay": d0 / model.t_ref,
            "log_delay_mean": math.log(max(d0, model.t_ref * 1e-3)), "log_delay_scv": math.log(0.5)}
    return np.clip(np.array([base[n] for n in model.names]), model.lo, model.hi)


def _grid_start(model: _Model, theta0: np.ndarray) -> np.ndarray:
    """Best of a small grid around ``theta0`` (one batched call): the restart after a poor fit."""
    mult = {"log_mean": np.log([0.5, 1.0, 1.5]), "log_scv": np.log([0.3, 1.0, 3.0]),
            "delay": np.array([-0.25, 0.0, 0.4]), "log_delay_mean": np.log([0.5, 1.0, 2.0]),
            "log_delay_scv": np.array([0.0])}
    grids = np.meshgrid(*[theta0[i] + mult[n] for i, n in enumerate(model.names)], indexing="ij")
    cand = np.clip(np.stack([g.ravel() for g in grids], axis=1), model.lo, model.hi)
    ssr = np.sum(model.residuals(cand) ** 2, axis=1)
    return cand[int(np.argmin(ssr))]


def _fit_model(model: _Model, obs: _Obs, max_nfev: int, theta0: np.ndarray | None = None):
    """Least-squares fit of one model: (theta, residuals, Jacobian, evaluations, converged).

    ``theta0``: a warm start (the optimum of a neighbouring slice count in the profile); then a
    large residual is expected for a wrong k and triggers no grid restart, only a failure does.
    """
    m = obs.q.size
    if not model.names:
        theta = np.empty(0)
        return theta, model.residuals(theta[None, :])[0], np.empty((m, 0)), 1, True
    warm = theta0 is not None
    theta0 = _start(model, obs) if theta0 is None else np.clip(theta0, model.lo, model.hi)
    sol = _solve(model, theta0, max_nfev)
    nfev = sol.nfev
    rms0 = math.sqrt(2 * sol.cost / m)
    if ((rms0 > _RESTART_RMS and not warm) or sol.status <= 0) and not model.slow:
        # A poor local optimum (or none): restart once from the best point of a small grid.
        sol2 = _solve(model, _grid_start(model, theta0), max_nfev)
        nfev += sol2.nfev + 1
        if sol2.cost < sol.cost:
            sol = sol2
    theta = sol.x
    r, J = sol.cached if sol.cached is not None else model.with_jacobian(theta)
    return theta, r, J, nfev, sol.status > 0


def _solve(model: _Model, theta0: np.ndarray, max_nfev: int):
    """Bounded trust-region least squares; fast models get residuals + Jacobian in one batched call."""
    if model.slow:
        # Each PS point costs ~0.15-1 s here: compute the Jacobian only where the solver asks.
        last: dict = {}

        def fun(theta):
            last.clear()
            last[theta.tobytes()] = r = model.residuals(theta[None, :])[0]
            return r

        def jac(theta):
            r0 = last.get(theta.tobytes())
            if r0 is None:
                r0 = fun(theta)
            steps = np.where(theta + _JAC_STEP <= model.hi, _JAC_STEP, -_JAC_STEP)
            rk = model.residuals(theta + np.diag(steps))
            return ((rk - r0) / steps[:, None]).T
    else:
        cache: dict = {}

        def fun(theta):
            key = theta.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = model.with_jacobian(theta)
            return cache[key][0]

        def jac(theta):
            fun(theta)
            return cache[theta.tobytes()][1]

    sol = optimize.least_squares(fun, theta0, jac=jac, bounds=(model.lo, model.hi), method="trf",
                                 x_scale=1.0, xtol=1e-7, ftol=1e-9, gtol=1e-9, max_nfev=max_nfev)
    sol.cached = None if model.slow else cache.get(sol.x.tobytes())
    return sol


_SLICE_CANDIDATES = (1, 2, 3, 5, 8, 13, 20, 50)
# Relative error of the rr quantile approximation itself on p90-p99.9 (capacity.rr docstring:
# p90 within 7 %, p99 within 5 %, p99.9 within 18 %, mostly 2-4 %): a noise floor below which
# residual differences between slice counts say nothing.
_RR_MODEL_ERROR = 0.03
_CHI2_1_95 = 3.841        # 95 % point of chi-square with 1 degree of freedom
# "Cannot tell": the consistent counts span more than half of the FCFS-to-limit scale
# g(k) = 1 - k^-0.6 (the rr interpolation weight near p99), e.g. 1..8 (0 to 0.71) or 2..50, but
# not 3..20 (0.48 to 0.83).
_SLICES_G_SPREAD = 0.5
_SLICES_BETA = 0.6


def _check_fit_slices(discipline: str, slices) -> tuple[int | None, tuple[int, ...] | None]:
    """``(slices_fixed, profile_candidates)``: one of them is None."""
    if slices is None or (isinstance(slices, str) and slices == "fit"):
        if discipline != "rr":
            if slices is None:
                return 1, None
            raise ValueError(f"slices='fit' applies to discipline='rr' only, got {discipline!r}")
        return None, _SLICE_CANDIDATES
    if isinstance(slices, (str, bytes, bool, np.bool_)) or np.ndim(slices) != 0:
        raise ValueError(f"slices must be an integer >= 1, 'fit' or None, got {slices!r}")
    try:
        k = float(slices)
    except (TypeError, ValueError):
        raise ValueError(f"slices must be an integer >= 1, 'fit' or None, got {slices!r}") from None
    if not (math.isfinite(k) and k >= 1 and k.is_integer()):
        raise ValueError(f"slices must be an integer >= 1, 'fit' or None, got {slices!r}")
    if discipline != "rr" and k != 1:
        raise ValueError(f"slices applies to discipline='rr' only, got slices={slices!r} with "
                         f"discipline={discipline!r}")
    return int(k), None


def _consistent_slices(rms_k: dict, m: int, noise: float) -> list:
    """Slice counts whose fit is not worse than the best by more than the noise allows.

    Profile-likelihood rule: with m log-percentiles of independent relative error ``sigma``,
    ``m (RMS_k^2 - RMS_min^2) / sigma^2`` is approximately chi-square(1) for the true k; keep k
    where it is below the 95 % point.  ``sigma^2 = noise^2 + _RR_MODEL_ERROR^2``.
    """
    sig2 = noise ** 2 + _RR_MODEL_ERROR ** 2
    best = min(rms_k.values())
    return [k for k, v in rms_k.items() if m * (v ** 2 - best ** 2) <= _CHI2_1_95 * sig2]


# ---------------------------------------------------------------------- result
class PercentileFit(FitResult):
    """Result of :func:`from_percentiles`.

    Attributes
    ----------
    service_ : capacity.Service
        The fitted CPU service-time distribution (the queue's service).
    cpu_per_request_ : float
        E[S], CPU seconds per request.
    scv_ : float
        Squared coefficient of variation of the service time (fixed by the
        family for exponential, 1, and deterministic, 0).
    delay_ : float, capacity.Service or None
        The non-CPU latency: seconds (``delay="constant"``), a lognormal
        :class:`~capacity.Service` (``delay="lognormal"``; a distribution of
        latency, it holds no CPU), or None.
    capacity_qps_ : float
        ``servers / cpu_per_request_``: the request rate at which the CPU is
        100 % busy (the hard ceiling, not a safe operating point).
    residuals_ : ndarray
        log(model / observed) per percentile.
    comparison_ : pandas.DataFrame
        Observed vs model per percentile (also in ``tables_``).
    covariance_ : ndarray or None
        Covariance of the search parameters (log mean, log scv, ...) from the
        sampling error of the percentiles; None without ``n_requests``.
    sensitivity_ : pandas.Series
        How far each parameter can move (a factor, or seconds for a constant
        delay) while the model percentiles change by at most 1 % RMS: the
        identifiability diagnostic that does not need a sample size.
    slices_, slices_range_, admission_, slice_delay_
        ``discipline="rr"`` only (None otherwise): the fitted or held slice
        count, the counts consistent with the data, and the admission rule
        and slice delay (seconds) the model used, as given.
    """

    discipline: str
    servers: Any
    family: str

    def predict(self, q: ArrayLike, arrival_rate: ArrayLike, servers: ArrayLike | None = None):
        """Model latency quantile(s) at ``arrival_rate`` (req/s), seconds; broadcasts q and rate.

        Includes the fitted non-CPU delay.  ``inf`` where the load is unstable.
        """
        from .._checks import check_quantile

        qq = check_quantile(q, "q")
        lam = check_positive(arrival_rate, "arrival_rate")
        srv = check_servers(self._servers_default if servers is None else servers, "servers")
        shape = np.broadcast_shapes(qq.shape, lam.shape, srv.shape)
        qb, lb, sb = (np.broadcast_to(a, shape).ravel() for a in (qq, lam, srv))
        out = self._model.quantiles_at(self._theta[None, :], qb, lb, sb.astype(np.int64))[0].reshape(shape)
        return out.item() if out.ndim == 0 else out

    def ceiling(self, slo: Mapping[float, float]):
        """Highest request rate meeting ``slo`` ({q: seconds}), via :func:`capacity.plan.qps_ceiling`.

        Only for no delay or a constant delay (which shrinks each threshold).
        """
        from ..plan import qps_ceiling

        if isinstance(self.delay_, Service):
            raise NotImplementedError("ceiling() supports no delay or a constant delay; "
                                      "use predict() on a grid")
        extra = ({"slices": self.slices_, "admission": self.admission_, "slice_delay": self.slice_delay_}
                 if self.discipline == "rr" else {})
        return qps_ceiling(self.service_, self._servers_default, slo, discipline=self.discipline,
                           delay=float(self.delay_ or 0.0), **extra)


# ---------------------------------------------------------------------- public
def from_percentiles(
    percentiles: Mapping[float, float] | Sequence[Any],
    arrival_rate: ArrayLike | None = None,
    servers: ArrayLike = 1,
    discipline: str = "ps",
    family: str = "lognormal",
    utilization: ArrayLike | None = None,
    delay: str | float | None = None,
    *,
    scv: float | None = None,
    n_requests: ArrayLike | None = None,
    confidence: float = 0.95,
    max_nfev: int = 60,
    slices: int | str | None = None,
    admission: str = "fifo",
    slice_delay: float = 0.0,
) -> PercentileFit:
    """Fit the CPU service-time distribution (and a non-CPU delay) to latency percentiles.

    Parameters
    ----------
    percentiles : mapping or list
        Observed response-time percentiles in seconds, ``{q: t}`` with q in
        (0, 1), e.g. ``{0.5: 0.045, 0.9: 0.08, 0.99: 0.3}``.  Several
        observations (e.g. one per hour of a day) fit jointly: a list of such
        mappings (then ``arrival_rate`` etc. are one value per observation),
        or a list of records ``{"percentiles": {...}, "arrival_rate": 8.0,
        "utilization": 0.2, "n_requests": 28800, "servers": 1}``.
    arrival_rate : float or array_like, optional
        Requests/s during each observation (required unless every record has it).
    servers : int or array_like, default 1
        Cores or worker processes serving the queue.
    discipline : {"ps", "fcfs", "rr"}, default "ps"
        Processor sharing (a time-sliced CPU), first come first served (a
        blocking worker pool) or event-loop round robin
        (:mod:`capacity.rr`: each request's CPU in ``slices`` slices through
        a FIFO run queue; fit it on p90 and above, its median is poor).
    family : {"lognormal", "gamma", "hyperexponential", "exponential", "deterministic"}
        Service-time family, parametrised by mean and scv.
    utilization : float or array_like, optional
        Measured CPU busy fraction in (0, 1] of ``servers`` during each
        observation.  Holds the mean through the utilisation law
        ``E[S] = sum(U_i servers_i) / sum(lambda_i)`` (so CPU spent outside
        requests -- GC, timers -- counts as request cost; see
        :func:`capacity.fit.from_utilization` to separate it).
    delay : None, "constant", "lognormal" or float
        Non-CPU latency added to every response (IO, database, network; it
        holds no CPU so it does not queue).  A number holds it fixed (seconds).
    scv : float, optional
        Hold the service scv fixed instead of fitting it.
    n_requests : float or array_like, optional
        Number of requests behind each observation's percentiles; enables the
        confidence intervals (see Notes).  Without it, intervals are NaN.
    confidence : float, default 0.95
        Coverage of the intervals.
    max_nfev : int, default 60
        Budget of forward evaluations (each one batched call of the queue model).
    slices : int, "fit" or None
        ``discipline="rr"`` only: CPU slices per request, held fixed (an
        integer >= 1), or estimated (``"fit"`` or None): one fit per k in
        (1, 2, 3, 5, 8, 13, 20, 50), the best RMS wins.  Sets ``slices_``,
        ``slices_range_`` (the counts consistent with the data) and
        ``slice_profile_`` (k -> RMS relative residual, also in ``tables_``).
        Without ``slice_delay``, with ``admission="fifo"`` a constant ``delay``
        absorbs the ``(k - 1) * slice_delay`` of :mod:`capacity.rr` exactly;
        with ``"idle"`` only approximately (there the slice delay also changes
        who waits): give it.
    admission : {"fifo", "idle"}, default "fifo"
        ``discipline="rr"`` only: when a new request joins the run queue --
        at once (``"fifo"``) or only when no request in flight is runnable
        (``"idle"``: Node.js 20 handlers awaiting ``setTimeout``; see
        :func:`capacity.rr.mean_response`).  Held, not fitted; recorded in
        ``admission_`` (None for other disciplines) and the model name.
    slice_delay : float, default 0
        ``discipline="rr"`` only: non-CPU seconds between two slices of a
        request (a zero-delay timer's ~1 ms on Node.js, a fast IO call),
        held fixed and part of the rr model (:func:`capacity.rr.response_quantile`);
        recorded in ``slice_delay_``.  Measure it with a zero-work twin of the
        handler (``validation/run.py`` does): its median latency over a bare
        request's, per gap.

    Returns
    -------
    PercentileFit
        ``service_``, ``cpu_per_request_``, ``scv_``, ``delay_``,
        ``capacity_qps_``, ``summary``, ``print_summary()``, ``comparison_``
        (observed vs model), ``predict(q, arrival_rate)``, ``ceiling(slo)``.

    Raises
    ------
    ValueError
        Quantiles outside (0, 1), latencies not positive or decreasing in q,
        utilisation outside (0, 1], fewer percentiles than free parameters
        (the message names the parameters), an unknown discipline or family.

    Warns
    -----
    IdentifiabilityWarning
        A parameter the percentiles cannot pin down: it can move by a factor
        of 2 (a constant delay: by a quarter of the smallest percentile) while
        the model percentiles change by less than 1 % RMS -- e.g. p50 and p90
        at low load cannot split the latency into CPU and IO; or, with
        ``n_requests``, its interval spans more than a factor of 2.
    FitWarning
        The optimiser did not converge, the RMS relative residual exceeds 10 %,
        or a parameter sits on its search bound.

    Notes
    -----
    Model: Poisson arrivals at ``arrival_rate`` to one queue of ``servers``;
    response = queue response time of the service S (exact M/G/1 FCFS from
    :func:`capacity.fcfs.response_quantile`, the M/G/c approximation there for
    ``servers > 1``; PS from :func:`capacity.ps.response_quantile`, exact for
    exponential, hyperexponential and Erlang/integer-shape gamma, a PH moment
    fit otherwise) plus an independent delay D.  Constant D adds to every
    quantile exactly.  Lognormal D: the quantile of the sum comes from a
    numerical convolution, P(T + D <= x) = E[F_T(x - D)] with 32-node
    Gauss-Hermite quadrature over log D and F_T interpolated on a 96-point log
    grid of :func:`response_sf` values, inverted on a 512-point grid
    (measured against 10^6-sample Monte Carlo in the tests: within 1 %).

    Objective: least squares on ``log(model) - log(observed)`` (relative
    errors; each percentile counts equally), parameters ``log E[S]``,
    ``log scv``, the delay, searched by :func:`scipy.optimize.least_squares`
    (trust-region reflective, bounded so that the busiest observation stays
    below utilisation 0.999; scv in [0.001, 100], or [0.05, 20] for PS with
    non-exponential service, and within the shipped table's range, 0.39-20,
    for PS with lognormal service).  On one core the model's quantiles come from
    shipped tables (:mod:`capacity._quantile_table`) where they cover the
    point: for FCFS with lognormal or gamma CPU a table of the exact M/G/1
    quantiles (cubic interpolation, within 0.2 % of the exact value between
    the nodes; gamma with scv ~20 at the p50: 2 %), for PS with lognormal CPU
    the table that :func:`capacity.ps.response_quantile` itself uses.  Other cases, and
    points off the tables, are computed directly.  Each evaluation computes the residuals and
    their forward-difference Jacobian in ONE batched call of the queue model
    (the parameter sets are an extra array axis), from a start chosen by the
    two-moment closed form (Pollaczek-Khinchine / PS mean with a lognormal
    through the percentiles).  If that ends with more than 2 % RMS error, the
    search restarts once from the best point of a small grid around the start
    (one batched call).  For PS with gamma or hyperexponential CPU (computed
    point by point, 0.1-1.7 s per evaluation) the Jacobian is computed only at
    points the solver accepts, and there is no restart.

    Identifiability without a sample size: ``sensitivity_`` linearises the
    model at the optimum, J the Jacobian of the log-percentiles, and reports
    ``delta * sqrt(m * [(J^T J)^-1]_kk)`` with ``delta = 1 %`` and m
    percentiles: how far parameter k can move, the others re-adjusting,
    before the percentiles change by 1 % RMS.

    Intervals (only with ``n_requests``): an empirical q-quantile of n i.i.d.
    latencies has asymptotic variance ``q(1-q) / (n f(x_q)^2)``, covariance
    ``p(1-q) / (n f(x_p) f(x_q))`` for p < q (same sample), with the density
    f taken from the fitted model (dx/dq by a finite difference).  These give
    the covariance of the log-percentiles, propagated by the sandwich
    (delta-method) formula ``(J^T J)^-1 J^T Sigma J (J^T J)^-1``, inflated by
    the reduced chi-square of the residuals when above 1 (misfit), and
    mapped to Wald intervals on the log scale.  Caveat: latencies of
    consecutive requests in a queue are positively correlated (a busy period
    slows them all), so n overstates the information -- the intervals are
    optimistic, more so at high load.

    Slices (``discipline="rr"``, ``slices="fit"``): a profile over k, each
    fit warm-started from the previous k's optimum.  k is consistent with the
    data when ``m (RMS_k^2 - RMS_min^2) / sigma^2`` is below the 95 % point of
    chi-square(1) (3.84), ``sigma^2`` the squared relative precision of a
    percentile (from ``n_requests``, else 1 %) plus ``0.03^2`` for the rr
    approximation's own quantile error; an ``IdentifiabilityWarning`` says
    the data cannot tell when the consistent counts span more than half of
    the FCFS-to-limit scale ``g(k) = 1 - k^-0.6`` (e.g. 1..8, or everything
    at low load, where all disciplines coincide).  Measured
    (``tests/test_fit_rr.py``, exact rr simulation with k = 5, exponential
    10 ms CPU, 4e5 requests at utilisation 0.5 and 0.8, p90/p99/p99.9, five
    seeds): E[S] within 2.4 % (k free) and 0.6 % (k = 5 held); best k 3, 5,
    5, 5, 13, consistent range always containing 5 and excluding 1; about
    2 s for the eight fits.

    Speed (``benchmarks/bench_fit.py``, 2-core machine with a background
    job): four percentiles at one load, E[S] = 50 ms -- FCFS lognormal (mean
    and scv free) 4 ms, three loads jointly 5 ms, plus a constant delay 8 ms;
    PS exponential 40 ms; PS lognormal 5 ms (4-5 evaluations each).  PS with
    gamma or hyperexponential CPU is computed point by point
    (:func:`capacity.ps.response_quantile`, 0.1-1.7 s per evaluation): seconds
    to minutes per fit; so are FCFS fits on several cores (M/G/c, ~0.2 s).  A
    naive fit (Nelder-Mead, one scalar call per percentile to the public
    quantile functions) takes 10-320 times longer.

    References
    ----------
    R. J. Serfling, *Approximation Theorems of Mathematical Statistics*,
    Wiley 1980, sec. 2.3 (asymptotic distribution of sample quantiles).
    M. A. Branch, T. F. Coleman, Y. Li, "A subspace, interior, and conjugate
    gradient method for large-scale bound-constrained minimization
    problems", SIAM J. Sci. Comput. 21, 1999 (the trust-region reflective
    algorithm).

    Examples
    --------
    Percentiles produced by an M/G/1 FCFS queue with 50 ms lognormal CPU
    (scv 2) at 8 req/s are fitted back:

    >>> from capacity import Service, fcfs
    >>> from capacity.fit import from_percentiles
    >>> svc = Service.lognormal(0.05, 2.0)
    >>> qs = [0.5, 0.9, 0.99, 0.999]
    >>> obs = dict(zip(qs, fcfs.response_quantile(qs, 8.0, svc)))
    >>> res = from_percentiles(obs, 8.0, discipline="fcfs")
    >>> round(res.cpu_per_request_, 4), round(res.scv_, 2)
    (0.05, 2.0)
    >>> round(res.predict(0.99, 12.0), 3) == round(fcfs.response_quantile(0.99, 12.0, svc), 3)
    True
    """
    check_discipline(discipline)
    slices_fixed, profile_ks = _check_fit_slices(discipline, slices)

    # the planner's checks of the event-loop arguments (slices are checked above: they may be "fit")
    _, slice_delay, admission = check_rr(discipline, 1, slice_delay, admission)
    if family not in _FAMILIES:
        raise ValueError(f"family must be one of {_FAMILIES}, got {family!r}")
    if not (0 < confidence < 1) or isinstance(confidence, bool):
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    delay_fixed = None
    if delay is not None and not isinstance(delay, str):
        delay_fixed = float(as_float_array(delay, "delay"))
        if not (delay_fixed >= 0 and math.isfinite(delay_fixed)):
            raise ValueError(f"delay must be None, 'constant', 'lognormal' or non-negative seconds, "
                             f"got {delay!r}")
        delay = "constant"
    elif delay not in (None, "constant", "lognormal"):
        raise ValueError(f"delay must be None, 'constant', 'lognormal' or non-negative seconds, "
                         f"got {delay!r}")
    scv_fixed = None
    if scv is not None:
        if family not in _TWO_PARAM:
            raise ValueError(f"scv can only be held for lognormal, gamma or hyperexponential, not {family!r}")
        scv_fixed = float(check_positive(scv, "scv"))
        lo_s, hi_s = _SCV_BOUNDS[family]
        if not lo_s <= scv_fixed <= hi_s:
            raise ValueError(f"scv must lie in [{lo_s:g}, {hi_s:g}] for {family}, got {scv!r}")
    obs = _parse(percentiles, arrival_rate, servers, utilization, n_requests)
    if delay_fixed is not None and delay_fixed >= obs.t.min():
        raise ValueError(f"delay={delay_fixed!r} s is not below the smallest observed percentile "
                         f"{obs.t.min():g} s")

    mean_fixed = None
    util_spread = 0.0
    util = obs.utilization
    if not np.isnan(util).any():
        first = np.array([np.flatnonzero(obs.obs_index == i)[0] for i in range(obs.n_obs)])
        lam_o, srv_o = obs.lam[first], obs.servers[first]
        per = util * srv_o / lam_o
        mean_fixed = float(np.sum(util * srv_o) / np.sum(lam_o))
        util_spread = float(np.ptp(per) / mean_fixed) if per.size > 1 else 0.0
    model = _Model(obs, discipline, family, delay, scv_fixed, mean_fixed, delay_fixed,
                   slices=1 if slices_fixed is None else slices_fixed, admission=admission,
                   slice_delay=slice_delay)
    if mean_fixed is not None and np.any(obs.lam * mean_fixed >= obs.servers):
        raise ValueError(f"utilization implies E[S] = {mean_fixed:g} s, which saturates the busiest "
                         "observation (utilisation >= 1)")
    p = len(model.names)
    m = obs.q.size
    if m < p:
        raise ValueError(
            f"percentiles: {m} value(s) cannot identify {p} free parameters ({', '.join(model.names)}); "
            "give more percentiles or loads, or fix some (utilization=, scv=, delay=<seconds>, family=)")

    rr_name = ""
    if discipline == "rr":
        rr_name = f"{slices_fixed} slices" if profile_ks is None else "slices fitted"
        rr_name = f" ({rr_name}{', idle admission' if admission == 'idle' else ''})"
    res = PercentileFit(
        f"{discipline.upper()} queue{rr_name}, {family} CPU time"
        + ("" if delay is None else f" + {delay} delay"),
        confidence_level=confidence, n_observations=obs.n_obs,
        method="least squares on log percentiles (scipy trust-region reflective); "
               + ("delta-method intervals from n_requests" if not np.isnan(obs.n_requests).any()
                  else "no intervals (n_requests not given)"),
    )
    res.discipline, res.family = discipline, family
    res.servers = np.unique(obs.servers).item() if np.unique(obs.servers).size == 1 else obs.servers
    res._servers_default = int(np.max(obs.servers))
    res._model = model

    if profile_ks is None:
        theta, r, J, nfev, converged = _fit_model(model, obs, max_nfev)
    else:
        # Profile over the number of slices: one full fit per candidate k (a loop over a few
        # model variants; each fit is vectorised over its parameter sets and percentiles).
        fits = {}
        prev = None
        for k in profile_ks:   # ascending: each fit starts from its neighbour's optimum
            mk = _Model(obs, discipline, family, delay, scv_fixed, mean_fixed, delay_fixed, slices=k,
                        admission=admission, slice_delay=slice_delay)
            fits[k] = (mk,) + _fit_model(mk, obs, max_nfev, prev)
            prev = fits[k][1]
        rms_k = {k: float(np.sqrt(np.mean(f[2] ** 2))) for k, f in fits.items()}
        best = min(profile_ks, key=lambda k: (rms_k[k], k))
        model, theta, r, J, nfev, converged = fits[best]
        nfev = sum(f[4] for f in fits.values())
        res._model = model
    res._theta = theta
    pars = model.unpack(theta[None, :])
    mean = float(pars["mean"][0])
    scv_hat = float(pars["scv"][0])
    svc = _make_service(family, mean, scv_hat)
    res.service_ = svc
    res.cpu_per_request_ = mean
    res.scv_ = scv_hat
    if delay == "constant":
        res.delay_ = float(pars["delay"][0])
    elif delay == "lognormal":
        res.delay_ = Service.lognormal(float(pars["delay_mean"][0]), float(pars["delay_scv"][0]))
    else:
        res.delay_ = None
    srv_max = float(np.max(obs.servers))
    res.capacity_qps_ = srv_max / mean
    res.residuals_ = r
    res.n_function_evaluations_ = nfev

    # ---- linearised diagnostics
    sens = {}
    cov = None
    JTJ_inv = np.linalg.pinv(J.T @ J) if p else np.empty((0, 0))
    for k, name in enumerate(model.names):
        step = _DASHBOARD_PRECISION * math.sqrt(m * max(JTJ_inv[k, k], 0.0))
        sens[name] = step * model.t_ref if name == "delay" else math.exp(min(step, 700.0))
    import pandas as pd

    res.sensitivity_ = pd.Series(sens, dtype=float, name="within 1% RMS")
    have_n = not np.isnan(obs.n_requests).any()
    if have_n and p:
        # d log x / d q of the fitted model, for the sampling variance of each empirical quantile.
        h = np.minimum(1e-4, 0.1 * np.minimum(obs.q, 1 - obs.q))
        both = model.quantiles_at(np.vstack([theta, theta]), np.concatenate([obs.q - h, obs.q + h]),
                                  np.concatenate([obs.lam, obs.lam]),
                                  np.concatenate([obs.servers, obs.servers]))[0]
        g = (np.log(both[m:]) - np.log(both[:m])) / (2 * h)
        qi, qj = obs.q[:, None], obs.q[None, :]
        same = obs.obs_index[:, None] == obs.obs_index[None, :]
        sigma = np.where(same, np.minimum(qi, qj) * (1 - np.maximum(qi, qj)), 0.0)
        sigma = sigma * g[:, None] * g[None, :] / obs.n_requests[:, None]
        bread = JTJ_inv @ J.T
        cov = bread @ sigma @ bread.T
        dof = m - p
        chi2 = math.nan
        if dof > 0:
            try:
                chi2 = float(r @ np.linalg.solve(sigma, r)) / dof
            except np.linalg.LinAlgError:
                chi2 = math.nan
            if math.isfinite(chi2) and chi2 > 1:
                cov = cov * chi2
        res._set_quality("reduced_chi2", chi2)
    res.covariance_ = cov

    # ---- slices: the fitted (or held) number of slices and, when profiled, its consistent range
    res.slices_ = model.slices if discipline == "rr" else None
    res.admission_ = admission if discipline == "rr" else None
    res.slice_delay_ = slice_delay if discipline == "rr" else None
    res.slice_profile_ = None
    slices_range = None
    if profile_ks is not None:
        noise = _DASHBOARD_PRECISION
        if have_n and p:
            noise = float(np.sqrt(np.mean(np.diag(sigma))))
        consistent = _consistent_slices(rms_k, m, noise)
        slices_range = (min(consistent), max(consistent))
        res.slice_profile_ = pd.DataFrame(
            {"slices": list(profile_ks), "rms_rel_error": [rms_k[k] for k in profile_ks],
             "consistent": [k in consistent for k in profile_ks]}).set_index("slices")
        res._add_table("slices profile", res.slice_profile_)
        res.slices_range_ = slices_range
    else:
        res.slices_range_ = (res.slices_, res.slices_) if discipline == "rr" else None

    from scipy.special import ndtri

    zc = float(ndtri(0.5 + confidence / 2))

    def interval(name, value, log=True):
        if cov is None or name not in model.names:
            return math.nan, math.nan
        k = model.names.index(name)
        se = math.sqrt(max(cov[k, k], 0.0))
        if log:
            # A parameter the data barely constrain has a huge standard error:
            # its upper bound is infinite (and said so by the identifiability
            # warning), not an OverflowError.
            spread = zc * se
            if spread > 700.0:
                return 0.0, math.inf
            return value * math.exp(-spread), value * math.exp(spread)
        s = se * model.t_ref
        return max(value - zc * s, 0.0), value + zc * s

    fixed_note = "held fixed" if mean_fixed is None else "from the utilisation law (held)"
    lo_m, hi_m = interval("log_mean", mean)
    res._add_parameter("cpu_per_request", mean, lo_m, hi_m, unit="s",
                       note="CPU seconds per request" if "log_mean" in model.names else fixed_note)
    if family in _TWO_PARAM:
        res._add_parameter("scv", scv_hat, *interval("log_scv", scv_hat), unit="",
                           note="service-time scv" if "log_scv" in model.names else "held fixed")
    else:
        res._add_parameter("scv", scv_hat, unit="", note=f"fixed by the {family} family")
    if delay == "constant":
        res._add_parameter("delay", res.delay_, *interval("delay", res.delay_, log=False), unit="s",
                           note="non-CPU latency" if "delay" in model.names else "held fixed")
    elif delay == "lognormal":
        dm, ds = float(pars["delay_mean"][0]), float(pars["delay_scv"][0])
        res._add_parameter("delay_mean", dm, *interval("log_delay_mean", dm), unit="s",
                           note="lognormal delay")
        res._add_parameter("delay_scv", ds, *interval("log_delay_scv", ds), unit="", note="lognormal delay")
    def _rate(mean_bound):  # servers / E[S] bound; a 0 s lower bound on E[S] gives an infinite rate
        if mean_bound != mean_bound:
            return math.nan
        return srv_max / mean_bound if mean_bound > 0 else math.inf

    res._add_parameter("capacity_qps", res.capacity_qps_, _rate(hi_m), _rate(lo_m), unit="req/s",
                       note=f"{srv_max:g} servers / E[S] (100% CPU)")
    if discipline == "rr":
        if slices_range is None:
            res._add_parameter("slices", res.slices_, unit="", note="held fixed")
        else:
            res._add_parameter("slices", res.slices_, slices_range[0], slices_range[1], unit="",
                               note=f"best of {list(profile_ks)}; interval: counts consistent "
                                    "with the data (profile)")

    # ---- observed vs model
    model_x = np.exp(np.log(obs.t) + r)
    comp = pd.DataFrame({"observation": obs.obs_index, "arrival_rate": obs.lam, "q": obs.q,
                         "observed": obs.t, "model": model_x, "rel_error": model_x / obs.t - 1.0})
    res.comparison_ = comp
    res._add_table("observed vs model", comp)
    rms = float(np.sqrt(np.mean(r ** 2)))
    res._set_quality("rms_rel_error", rms)
    res._set_quality("max_abs_rel_error", float(np.max(np.abs(comp["rel_error"]))))
    res._set_quality("n_percentiles", m)
    res._set_quality("n_free_parameters", p)
    res._set_quality("function_evaluations", nfev)
    res._set_quality("max_utilization", float(np.max(obs.lam * mean / obs.servers)))

    # ---- caveats
    g_lo, g_hi = (1.0 - np.asarray(slices_range or (1, 1), float) ** -_SLICES_BETA)
    if slices_range is not None and g_hi - g_lo > _SLICES_G_SPREAD:
        lo_util = float(np.max(obs.lam * mean / obs.servers))
        res._warn(IdentifiabilityWarning,
                  f"slices is not identified by these percentiles: every count from {slices_range[0]} "
                  f"to {slices_range[1]} fits within the noise (percentile precision plus the "
                  f"{_RR_MODEL_ERROR:.0%} error of the rr approximation); best {res.slices_}"
                  + (f"; the busiest observation is at utilisation {lo_util:.2f}, where FCFS, round "
                     "robin and PS nearly coincide: add percentiles at higher load"
                     if lo_util < 0.5 else "; add percentiles at other loads, or give slices="))
    if mean_fixed is not None and util_spread > 0.2:
        res._warn(FitWarning, f"the utilisation law gives per-observation CPU costs that differ by "
                              f"{util_spread:.0%} of their mean: background CPU (GC, timers) or a changing "
                              "request mix; use from_utilization to separate the background")
    if not converged:
        res._warn(FitWarning, f"the optimiser did not converge within {max_nfev} evaluations; "
                              "the estimates are the best point reached")
    if rms > _MAX_RMS:
        res._warn(FitWarning, f"large residuals: the model misses the percentiles by {rms:.0%} RMS "
                              f"(worst {np.max(np.abs(comp['rel_error'])):.0%}); the {discipline} queue with "
                              f"{family} CPU time{'' if delay else ' and no delay'} does not describe "
                              "these data")
    for k, name in enumerate(model.names):
        tol = 1e-3 * max(1.0, model.hi[k] - model.lo[k]) if name != "delay" else 1e-4
        at_lo = theta[k] <= model.lo[k] + tol
        at_hi = theta[k] >= model.hi[k] - tol
        if name == "delay" and at_lo:
            continue   # no delay is a legitimate answer
        if at_lo or at_hi:
            what = {"log_mean": "E[S] (utilisation 0.999 at the busiest load)" if at_hi else "E[S]",
                    "log_scv": "the scv", "delay": "the delay (the smallest percentile)"}.get(name, name)
            res._warn(FitWarning, f"{name} sits on its search bound ({what}): the data push the model "
                                  "to an extreme; check the inputs or the model choice")
    for name, value in sens.items():
        if name == "delay":
            bad = value > _DELAY_UNIDENTIFIED * model.t_ref
            size = f"{value:.3g} s"
        else:
            bad = value > _UNIDENTIFIED_FACTOR
            size = f"a factor {value:.3g}" if value < 1e6 else "an unbounded factor"
        if bad:
            res._warn(IdentifiabilityWarning,
                      f"{name} is not identified by these percentiles: it can move by {size} while the "
                      "model percentiles change by less than 1 % RMS"
                      + (" (CPU and non-CPU latency cannot be separated: add percentiles at higher load, "
                         "or give utilization=)" if delay is not None else "")
                      + "; fix it or add percentiles at other loads")
    if cov is not None:
        for k, name in enumerate(model.names):
            se = math.sqrt(max(cov[k, k], 0.0))
            if name != "delay" and zc * se > math.log(_UNIDENTIFIED_FACTOR):
                res._warn(IdentifiabilityWarning,
                          f"{name}: the {confidence:.0%} interval spans more than a factor "
                          f"{_UNIDENTIFIED_FACTOR:g} either way; the percentiles do not pin it down")
    res._emit_warnings(stacklevel=3)
    return res
