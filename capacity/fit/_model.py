"""Model layer of the fits: the forward models a fit inverts, and nothing about data or search.

* :class:`QueueModel` -- Poisson arrivals to one queue of ``servers`` (FCFS, PS or event-loop
  round robin), service time from a mean-and-scv family, plus an optional non-CPU delay: the
  predicted response-time quantiles for a batch of parameter sets.  The one place where a fit
  dispatches on the discipline (:func:`queue_quantile`, :func:`queue_sf`).
* :func:`mva_curves`, :func:`usl`, :func:`usl_peak` -- the closed-loop models of
  :func:`capacity.fit.from_loadtest`.

The utilisation law of :func:`capacity.fit.from_utilization` (busy cores = background + E[S] x
rate) is a straight line; its robust regression lives in :mod:`capacity.fit._solve`.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..closed import mva
from ..distributions import Service

__all__ = [
    "FAMILIES",
    "MEASURED_AT",
    "check_measured_at",
    "SCV_DOMAIN",
    "TWO_PARAM",
    "QueueModel",
    "lognormal_delay_quantiles",
    "make_service",
    "measured_quantiles",
    "mva_curves",
    "queue_quantile",
    "queue_sf",
    "usl",
    "usl_peak",
]

#: Service-time families a percentile fit can use, each parametrised by mean and scv.
FAMILIES = ("lognormal", "gamma", "hyperexponential", "exponential", "deterministic")
#: Families whose scv is a free parameter (exponential has 1, deterministic 0).
TWO_PARAM = ("lognormal", "gamma", "hyperexponential")
#: The scv each two-parameter family can take in a fit (hyperexponential has scv >= 1).
SCV_DOMAIN = {"lognormal": (1e-3, 100.0), "gamma": (1e-3, 100.0), "hyperexponential": (1.0, 100.0)}
#: Where a latency can be measured, and so which part of the response time it holds.
MEASURED_AT = ("client", "proxy", "in_process")
#: Families whose PS (and rr) quantiles are computed point by point unless a shipped table covers them.
SLOW_PS = ("lognormal", "gamma", "hyperexponential")

_GH_NODES = 32            # Gauss-Hermite nodes over log(delay) for the lognormal-delay convolution
_SF_GRID = 96             # response-time sf grid points for the convolution
_X_GRID = 512             # grid of the summed latency, on which its cdf is inverted


def make_service(family: str, mean, scv) -> Service:
    """The service law of ``family`` with this mean and scv (:meth:`Service.from_moments`, the one rule)."""
    return Service.from_moments(mean, scv, family)


# ---------------------------------------------------------------------- open queue: one dispatch
def queue_quantile(discipline, q, lam, servers, svc, slices=1, admission="fifo", slice_delay=0.0):
    """Response-time quantile(s) of the queue, from capacity.fcfs, capacity.ps or capacity.rr."""
    if discipline == "rr" and np.ndim(slices) == 0 and slices == 1:
        discipline = "fcfs"        # one slice is FCFS exactly; its tabled path, not the direct inversion
    if discipline == "rr":
        from .. import rr
        return np.asarray(rr.response_quantile(q, lam, svc, servers, slices=slices, admission=admission,
                                               slice_delay=slice_delay), dtype=float)
    if discipline == "fcfs":
        from .. import _quantile_table, fcfs
        # One core, lognormal or gamma: the shipped table of exact M/G/1 quantiles (interpolation
        # error <= 0.2 %, see from_percentiles); the rest, and points off the table, exactly.
        return _quantile_table.tabled_or_direct("fcfs", q, lam, svc, servers, fcfs.response_quantile)
    from .. import _quantile_table, ps
    # Hyperexponential and exponential (its scv-1 node): the shipped phase-type PS table (the exact
    # transform costs 40-80 ms a point, the M/M/1-PS chain ~12 ms a batch: seconds a fit); lognormal
    # and gamma are tabled inside capacity.ps itself; the rest exactly.
    return _quantile_table.tabled_or_direct(_quantile_table.PS_PHASE_TYPE, q, lam, svc, servers,
                                            ps.response_quantile)


def queue_sf(discipline, t, lam, servers, svc, slices=1, admission="fifo", slice_delay=0.0):
    """Response-time survival function P(T > t) of the queue (same dispatch as :func:`queue_quantile`)."""
    if discipline == "rr":
        from .. import rr
        return np.asarray(rr.response_sf(t, lam, svc, servers, slices=slices, admission=admission,
                                         slice_delay=slice_delay), dtype=float)
    if discipline == "fcfs":
        from .. import fcfs
        return np.asarray(fcfs.response_sf(t, lam, svc, servers), dtype=float)
    from .. import ps
    return np.asarray(ps.response_sf(t, lam, svc, servers), dtype=float)


def lognormal_delay_quantiles(discipline, q, lam, servers, svc, d_mean, d_scv, t_lo, t_hi, slices=1,
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
    sf = queue_sf(discipline, tg, lam_u[:, None], srv_u[:, None], svc3, slices, admission,
                  slice_delay)                                     # (K, J, G)
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
        # Beyond the grid, extend the log-sf linearly in t (exponential tail of a stable queue);
        # never upward: far in the tail the sf is round-off (1e-13 after exact zeros), whose
        # log can rise, and a rising line would overflow.
        slope = np.minimum((ls[:, -1] - ls[:, -2]) / (tg[-1] - tg[-2]), 0.0)
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


@dataclasses.dataclass(frozen=True)
class QueueModel:
    """The forward model of a percentile fit: natural parameters -> predicted response quantiles.

    Parameters
    ----------
    discipline : {"fcfs", "ps", "rr"}
    family : str
        One of :data:`FAMILIES`.
    delay : {None, "constant", "lognormal"}
        Non-CPU latency added to every response (it holds no CPU, so it does not queue).
    slices, admission, slice_delay
        The round-robin model's settings (:mod:`capacity.rr`); ignored for fcfs and ps.
    sf_grid : (float, float)
        Time range (seconds) of the response-time grid of the lognormal-delay convolution.
    """

    discipline: str
    family: str
    delay: str | None = None
    slices: int = 1
    admission: str = "fifo"
    slice_delay: float = 0.0
    sf_grid: tuple[float, float] = (1e-6, 1.0)

    def with_slices(self, slices: int) -> QueueModel:
        """The same model with another number of round-robin slices."""
        return dataclasses.replace(self, slices=int(slices))

    @property
    def slow(self) -> bool:
        """Whether one evaluation is computed point by point (no shipped table covers it)."""
        # rr evaluates one PS quantile per point (except slices=1, which is FCFS).
        # Lognormal and gamma come from the shipped PS table (capacity._quantile_table) when it covers them.
        from .._quantile_table import PS_PHASE_TYPE, families

        # The phase-type PS table serves the PS fits and rr's PS half (capacity.rr._ps_quantile).
        tabled = families("ps") + families(PS_PHASE_TYPE)
        return (self.discipline == "ps" or (self.discipline == "rr" and self.slices > 1)) \
            and self.family in SLOW_PS and self.family not in tabled

    def service(self, params: dict) -> Service:
        """The batch of service laws, parameters of shape (K, 1), from ``params['mean']``/``['scv']`` (K,)."""
        return make_service(self.family, params["mean"][:, None], params["scv"][:, None])

    def quantiles(self, params: dict, q, lam, servers) -> np.ndarray:
        """Predicted response quantiles, shape (K, N), for K parameter sets and N (q, rate, servers).

        ``params`` holds arrays of shape (K,): ``mean`` and ``scv`` of the service, and
        ``delay`` (constant) or ``delay_mean``/``delay_scv`` (lognormal) when the model has one.
        """
        if self.delay != "lognormal" and self.discipline in ("fcfs", "ps") and self.family in ("lognormal", "gamma"):
            from .._quantile_table import one_core_batch

            # The hot path of a fit on one core: the table read without building the laws.
            x = one_core_batch(self.discipline, self.family, np.asarray(q, dtype=float), np.asarray(lam, dtype=float),
                               np.asarray(servers), params["mean"][:, None], params["scv"][:, None])
            if x is not None:
                return x + params["delay"][:, None] if self.delay == "constant" else x
        svc = self.service(params)
        if self.delay == "lognormal":
            return lognormal_delay_quantiles(self.discipline, q, lam, servers, svc,
                                             params["delay_mean"][:, None], params["delay_scv"][:, None],
                                             self.sf_grid[0], self.sf_grid[1],
                                             self.slices, self.admission, self.slice_delay)
        x = queue_quantile(self.discipline, q, lam, servers, svc, self.slices, self.admission,
                           self.slice_delay)
        x = np.broadcast_to(x, (params["mean"].shape[0], np.size(q)))
        if self.delay == "constant":
            x = x + params["delay"][:, None]
        return x


def measured_quantiles(model: QueueModel, params: dict, q, lam, servers, measured_at: str) -> np.ndarray:
    """Quantiles (K, N) of the time as measured at ``measured_at`` (see :data:`MEASURED_AT`).

    ``client`` and ``proxy`` see the whole response (queue, CPU and delay).  A timer in the
    server's own middleware (``in_process``) starts when the request reaches the handler: for a
    blocking handler (``fcfs``) the queue is in front of it, so it measures the CPU time plus
    the delay alone; under processor sharing every request is in the loop at once, so it measures
    the whole sojourn; under event-loop round robin (FIFO admission) it misses the wait for the
    first slice, about one k-th of the queueing (:mod:`capacity._rr_in_process`).  Round robin
    with idle admission and a lognormal delay in-process are not modelled: refused by
    :func:`check_measured_at`.
    """
    if measured_at == "in_process" and model.discipline in ("fcfs", "rr"):
        svc = model.service(params)
        x = np.asarray(svc.ppf(np.asarray(q, dtype=float)[None, :]), dtype=float)
        x = np.broadcast_to(x, (params["mean"].shape[0], np.size(q)))
        x = x + params["delay"][:, None] if model.delay == "constant" else x
        if model.discipline == "fcfs" or model.slices == 1:
            return x
        from .._rr_in_process import in_process_quantile

        # The response less the wait for the first slice (capacity._rr_in_process); the
        # constant delay is in both the response and the service part, so it passes through.
        return in_process_quantile(model.quantiles(params, q, lam, servers), x, model.slices,
                                   model.slice_delay, model.admission)
    return model.quantiles(params, q, lam, servers)


def check_measured_at(measured_at: str, discipline: str, delay, admission: str = "fifo") -> str:
    """``measured_at`` checked against what the models can say about it (a ValueError naming it)."""
    from .._checks import check_choice

    measured_at = check_choice(measured_at, "measured_at", MEASURED_AT)
    if measured_at != "in_process":
        return measured_at
    if discipline == "rr" and admission != "fifo":
        raise ValueError(f"measured_at='in_process' with discipline='rr' and admission={admission!r} is "
                         "not modelled (with idle admission the wait for a request's first slice, which "
                         "the middleware does not see, depends on the load and the slice delay); use "
                         "admission='fifo', or fit the client's or the proxy's latencies")
    if delay == "lognormal":
        raise ValueError("measured_at='in_process' with delay='lognormal' is not modelled; use no delay, "
                         "a constant delay or the client's latencies")
    return measured_at


# ---------------------------------------------------------------------- closed loop
def mva_curves(demand: np.ndarray, think: np.ndarray, users: np.ndarray):
    """Single-station MVA throughput and response time at ``users`` for a batch of (D, Z)."""
    res = mva(demand[:, None], think, int(users.max()))
    idx = users.astype(np.int64) - 1
    return res.throughput[:, idx], res.response[:, idx]


def usl(n, lam, sigma, kappa):
    """Universal Scalability Law X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)); broadcasts."""
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def usl_peak(sigma: float, kappa: float) -> float:
    """N* = sqrt((1 - sigma) / kappa), where dX/dN = 0; inf without coherency delay."""
    if kappa <= 0 or sigma >= 1:
        return math.inf
    return math.sqrt((1.0 - sigma) / kappa)
