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
* ``c`` cores (and one core) with exponential service: exact, by a tagged-request Markov chain.
* ``c > 1`` cores with any other service law: the same chain with the tagged request's
  own CPU time (phase-type; deterministic: its extra delay over a fixed clock) among others
  that leave as if exponential, and its exact CPU-time law wherever it never shares a
  core -- an approximation whose error against simulation
  (``tools/measure_mgc_ps.py``) is in :func:`response_quantile`.  The means stay exact.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _quantile_table as _table
from ._checks import check_broadcast, check_nonnegative, check_quantile, scalar_out
from ._common import prepare
# The machinery lives in private modules; the chain's helpers stay importable from here (tests).
from ._ps_chain import _mmc_cond_mean_modes, _mmc_sf_pdf, _mmc_sf_pdf_sweep  # noqa: F401
from . import _ps_deterministic_table as _det_table, _ps_many_cores
from ._ps_many_cores import _EXACT_PH, _det_sf_pdf, _mgc_sf_pdf, _NoShareSwap, _tagged_sizes
from ._ps_inversion import one_queue as _one_queue
from ._ps_inversion import service_rows as _service_rows, solve_quantile as _solve_quantile
from . import _ps_inversion
from ._ps_near_constant import NearConstant, near_constant
from . import _ps_narrow_many_cores as _narrow
from ._ps_transform import _pad_ph, _ph_size_horizon, _ps1_sf_flat
from .distributions import Service
from .erlang import erlang_c
from .phasetype import phase_type

__all__ = ["conditional_mean_response", "mean_number", "mean_response", "response_quantile", "response_sf"]

ArrayLike = Any


# ---------------------------------------------------------------------------
# Shared evaluation of P(T > t) on a broadcast batch
# ---------------------------------------------------------------------------
# One core: the exact sojourn transform is cheaper than a chain of more states.
# Several cores: the chain is exact, so keep it until memory and time forbid.
_CHAIN_MAX_STATES_ONE_CORE = 5_000
_CHAIN_MAX_STATES = 50_000
# With PH service each state costs one tridiagonal row per phase (up to 24 phases).
_CHAIN_MAX_STATES_PH = 10_000


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
        self.expo = expo = svc.family == "exponential"
        # Several cores: the tagged-request chain (exact for exponential service; for other
        # laws the tagged request keeps its PH size and the others leave exponentially);
        # one core: the exact sojourn transform for non-exponential service.
        self.many = stable & ((servers > 1) | expo)
        self.one = stable & ~self.many
        # The chain needs ~35/(1 - rho) states, so its time and memory grow without
        # bound as rho -> 1.  Past its limit (rho > 0.993 on one core, where the
        # transform is exact too; rho > 0.9993 on several, 0.9965 with PH service) a point
        # goes through the one-core sojourn transform, which costs the same at any load.  With
        # c > 1 cores it treats the c cores as one core c times faster: in heavy traffic n >> c
        # requests share the cores, each getting c/n, so the relative error is O(c (1 - rho)).
        mean_flat = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()
        with np.errstate(divide="ignore", invalid="ignore"):
            rho_flat = lam * mean_flat / servers
            states = np.log(1e-15) / np.log(np.where(stable, rho_flat, 0.5))
        limit = np.where(servers == 1, _CHAIN_MAX_STATES_ONE_CORE,
                         _CHAIN_MAX_STATES if expo else _CHAIN_MAX_STATES_PH)
        heavy = self.many & (states > limit)
        self.many &= ~heavy
        self.one |= heavy
        self.fast_core = np.where(heavy, servers, 1.0)
        if self.many.any():
            self.mean_many = mean_flat[self.many]
            self.rho_many = rho_flat[self.many]
            self.c_many = servers[self.many]
            self.lam_many = lam[self.many]
            # Deterministic CPU: the extra delay T - x of a fixed clock (_det_sf_pdf), unless the
            # former Erlang-pair path is asked for (private switch, kept as the tests' reference).
            self.det_x = None
            if svc.family == "deterministic" and _ps_many_cores.DETERMINISTIC_DELAY:
                self.det_x = mean_flat[self.many]
                self.det_orders = (_ps_many_cores.DETERMINISTIC_DELAY_ORDERS, False)   # (orders, coarse)
            elif not expo:
                self.tagged = _tagged_sizes(svc, shape, self.many)
                self.no_share = None
                if svc.family not in _EXACT_PH:
                    self.no_share = _NoShareSwap(svc, shape, self.many, self.lam_many, 1.0 / self.mean_many,
                                                 self.c_many, self.tagged)
        # Near-constant CPU on one core (gamma, Erlang, lognormal below scv 0.1): the tagged
        # request's exact size law, which no hyper-Erlang fit of 16-24 phases can represent.
        self.near = self.one & (servers == 1) & near_constant(svc, shape)
        self.one &= ~self.near
        if self.near.any():
            self.near_model = NearConstant(svc, shape, np.flatnonzero(self.near), lam[self.near])
        if self.one.any():
            one_svc = svc if not self.near.any() else _service_rows(svc, shape, self.one)
            beta, tm = phase_type(one_svc, fit="distribution")
            if one_svc is svc:
                beta, tm = _pad_ph(beta, tm, shape)
                beta, tm = beta[self.one], tm[self.one]
            self.beta, self.tm = beta, tm * self.fast_core[self.one][:, None, None]
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
        if self.near.any():
            sel = self.near & pos
            if sel.any():
                sf[sel], pdf[sel] = self.near_model.both(t[sel], pos[self.near])
        if self.many.any():
            sel = self.many & pos
            sub = pos[self.many]
            if sel.any():
                es = self.mean_many[sub]
                if self.expo:
                    a, b = _mmc_sf_pdf(t[sel] / es, self.rho_many[sub], self.c_many[sub])
                    sf[sel], pdf[sel] = a, b / es
                elif self.det_x is not None:
                    sf[sel], pdf[sel] = _det_sf_pdf(t[sel], self.lam_many[sub], 1.0 / es, self.c_many[sub],
                                                    self.det_x[sub], *self.det_orders)
                else:
                    sf[sel], pdf[sel] = 0.0, 0.0
                    for weight, beta, rate, onward in self.tagged:
                        a, b = _mgc_sf_pdf(t[sel], self.lam_many[sub], 1.0 / es, self.c_many[sub],
                                           beta[sub], rate[sub], onward[sub])
                        sf[sel] += weight * a
                        pdf[sel] += weight * b
                    if self.no_share is not None:
                        d_sf, d_pdf = self.no_share(t, sel, sub)
                        sf[sel] += d_sf
                        pdf[sel] += d_pdf
        return np.clip(sf, 0.0, 1.0), np.maximum(pdf, 0.0)

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return self.both(t)[0].reshape(self.shape)


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
    shape = check_broadcast(size=x, **{"arrival_rate/service/servers": np.broadcast_to(0.0, q.shape)})
    xs = np.broadcast_to(x, shape)
    rho = np.broadcast_to(q.utilization, shape)
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


def _at_least_the_service(values: np.ndarray, shape: tuple, of_service: Callable) -> np.ndarray:
    """Under PS every request's response is at least its own service time (T >= S path by path),
    so P(T > t) >= P(S > t) and each quantile of T is at least the same quantile of S.  The PH
    fit of the service (3-8 % quantile error) can break that near light load, where T -> S: take
    the exact bound there (``of_service()`` gives the service's own sf or ppf).  Applied to the
    direct computation; the lognormal table is left smooth (strictly increasing in load) and
    keeps its documented light-load error (up to 4.5 % below the bound at p99, scv 3)."""
    try:
        bound = np.broadcast_to(np.asarray(of_service(), dtype=float), shape)
    except (NotImplementedError, ValueError, TypeError):  # a law without ppf/sf: nothing to add
        return values
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(bound), np.maximum(values, bound), values)


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
    of the same chain: 1e-9 (``tests/test_ps.py``).  Every chain keeps only the counts within
    ``12 sqrt(a) + 40`` of the offered load ``a = lambda E[S]`` (the rest carry below 1e-30),
    so 10^7 cores cost ~4e4 states, not 10^7, and where that band ends below ``c - 1`` nobody
    shares a core (T = S); against the chains over every count: 1e-9
    (``tests/test_ps_many_cores.py``).

    **Other service laws, c > 1 cores (approximation)**: the chain above with
    the tagged request's phase ``i`` of its own PH CPU time in the state: in
    state (others n, phase i) it moves on at ``min(1, c/(n+1)) (-Tm_ii)``, and
    the others arrive at ``lambda`` and leave at ``n min(1, c/(n+1)) / E[S]``,
    as if their CPU times were exponential with the true mean.  At the tagged
    arrival n has the M/M/c law, which is exact for any law (the M/G/c-PS queue
    is symmetric, so insensitive).  The transform is one tridiagonal solve per
    phase (``_mgc_sf_pdf``; Erlang runs share one LU factorisation).  Where the
    request never shares a core (it and the others stay at most c) its response
    time is its CPU time: that part of P(T > t), ``E[P0(S); S > t]`` with P0(x)
    the probability of never sharing during x (the others' chain below c,
    killed at c, by its eigenmodes), is taken with the exact law of S instead of
    its PH fit (closed forms for deterministic and gamma, the sum over the
    samples for empirical, 40-node Gauss-Laguerre in the tail level
    otherwise).  **Deterministic service** (``_ps_many_cores._det_sf_pdf``): in the tagged
    request's attained service the others' chain has generator ``H = Sh^-1 Q`` and real time
    runs at ``1/share``, so ``T = x + R``, ``E[exp(-sR)] = alpha expm(x (H - sD)) 1`` with
    ``D = Sh^-1 - I`` (zero while nobody shares); P(T > t) = P(R > t - x) is inverted in
    ``t - x``, so the jump at ``x`` (the never-share atom) causes no ringing, and ``expm`` is
    the three-term Richardson combination of 16, 8 and 4 backward-Euler steps (Erlang clocks;
    28 tridiagonal solves).  Against the exact ``expm`` of the same chain (dense eigen-
    decomposition): within 0.2 % of P(T > t) above 1e-2, 5 % down to 1e-4; quantiles within
    0.6 % of orders (64, 32, 16) over c = 2, 4, 8, rho 0.05-0.95, p50-p99.9.  (It replaced the
    Erlang pair ``2 E(64) - E(32)`` for the size, 5-9x slower and up to 8.5 % off the exact
    chain at light-load tails: p99.9 at c = 8, rho = 0.5 was 1.539 s for 1.682 s, E[S] = 1 s.)
    Past 10,000 chain states
    (utilisation above ~0.9965) the c cores are one core c times faster, as
    for exponential service.  Checked against a dense Kronecker generator
    propagated by ``expm`` (2e-8) and the exact M/M/c chain (1e-9;
    ``tests/test_ps_many_cores.py``).

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
    shape = check_broadcast(t=t_arr, **{"arrival_rate/service/servers": np.broadcast_to(0.0, q.shape)})
    tb = np.broadcast_to(t_arr, shape)
    table = _table.Coverage("ps", q, shape)
    if q.service.family == "deterministic" and _det_table.available():   # M/D/1-PS: its table
        out = _det_table.sf_or_direct(tb, q, shape, lambda t, sub, sh: _at_least_the_service(
            _SfEvaluator(sub, sh)(t), sh, lambda: sub.service.sf(t)))
    elif table.mask is None:
        out = _at_least_the_service(_sf_direct(tb, q, shape), shape, lambda: q.service.sf(tb))
    else:
        flat = np.ones(table.size)
        tf = tb.ravel()
        m = table.mask
        flat[m] = table.sf(tf[m], m)
        # PS never beats the CPU time (T >= S path by path): between its nodes the spline can dip
        # ~0.1 % below the service's own law at light load, where T -> S.
        flat[m] = np.maximum(flat[m], table.service(m).sf(tf[m]))   # NaN (off the levels) stays NaN
        # Tabled points whose answer lies beyond the table's levels, and points outside it:
        # computed directly.
        flat[np.isnan(flat) & (tf <= 0)] = 1.0
        rest = table.stable & ~(table.mask & np.isfinite(flat)) & (tf > 0)
        if rest.any():
            sub = table.subset(rest)
            flat[rest] = table.sf_held_to_levels(tf, rest, _at_least_the_service(
                _sf_direct(tf[rest], sub, sub.shape), sub.shape, lambda: sub.service.sf(tf[rest])))
        out = flat.reshape(shape)
    out = _service_alone_when_idle(out, q, shape, lambda: q.service.sf(t_arr))
    return scalar_out(out)


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
    tail quantiles are reliable to about q = 1 - 1e-6).  Exception: with exponential service on
    ``c > 1`` cores above utilisation 0.9993 (other laws above 0.9965: where the exact chain would
    need more than 50,000 states) the cores are one core ``c`` times faster -- the heavy-traffic
    limit, relative error O(c (1 - rho)): for c = 3 at 0.993, 1.6 % at p50, 0.3 % at p99.

    Other service distributions on one core are approximations: near-constant laws (see below),
    lognormal (through a table, see below), gamma, empirical and scipy laws use a hyper-Erlang PH fit of the whole
    distribution (:func:`capacity.phasetype.phase_type` with
    ``fit="distribution"``: at most 16 phases, mean exact, quantiles within
    3-8 % from p1 to p99.999); deterministic service uses the exact size for
    the tagged request and an Erlang-24 for the others (one core: read from a table of that
    computation with its atom at S exact, :mod:`capacity._ps_deterministic_table`, where its
    error is stated; at light-load tails it is closer to simulation).  Measured relative
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
        gamma scv 2      0.5   -0.3% (1.0%)   -0.4% (1.1%)   -0.7% (1.6%)   +0.3% (2.6%)
        gamma scv 2      0.8   -0.2% (1.6%)   -0.3% (2.1%)   -0.3% (3.1%)   +0.4% (5.0%)
        gamma scv 6      0.5   -1.7% (1.8%)   +1.7% (1.5%)   +0.3% (2.6%)   +2.3% (4.9%)
        gamma scv 6      0.8   +0.5% (3.3%)   +0.9% (3.5%)   -1.4% (4.8%)   -2.7% (7.4%)
        gamma scv 10     0.5   +0.1% (3.6%)   +1.4% (1.8%)   -1.0% (2.1%)   +0.2% (4.5%)
        gamma scv 10     0.8   -1.2% (4.1%)   -0.9% (4.3%)   -2.4% (5.4%)   -0.5% (6.2%)
        gamma scv 25     0.5   (see below)    -5.0% (2.9%)   -3.8% (3.5%)   +0.3% (5.2%)
        gamma scv 25     0.8   (see below)    -3.7% (6.4%)   -4.7% (8.5%)   -1.8% (11.8%)

    (gamma rows: 2e6 s runs.)  Sizes below ``phasetype.SIZE_FLOOR`` (1e-6)
    x the mean are fitted as that size: heavy-tailed gamma puts much of its
    mass there (scv 25: its median is 4e-7 x the mean), where the response
    is a few microseconds and the model only guarantees the bound below --
    the gamma scv 25 median is 4.4e-6 s against 6e-7 s simulated.  Every
    directly computed quantile is at least the service's own quantile of
    the same level (PS never beats the CPU time); before the floor, heavy-
    tailed gamma fits had rates up to 1e59 / mean and returned p99 = 0.048 s
    for scv 10 at rho 0.5 (simulation: 34.5 s).

    **Several cores, non-exponential service** (the approximation of
    :func:`response_sf`).  Worst relative error against exact PS simulation
    over c = 2, 4, 16, 64 and utilisation 0.3, 0.6, 0.8, 0.95 (E[S] = 1 s,
    3e6 requests per run, ``tools/measure_mgc_ps.py``; 99 % batch-means
    half-widths 0.1-3 % below utilisation 0.95, 2-24 % at 0.95, where most
    of the worst cases lie within them)::

        service            p50     p90     p99     p99.9
        deterministic      +2.2%   +2.4%   +8.0%   +10.6%
        gamma scv 0.1      -1.2%   +2.6%   +4.1%    +7.0%
        lognormal scv 0.5  +2.1%   +3.0%   +4.2%    +3.7%
        lognormal scv 4    -4.0%   -4.6%   -8.9%   -14.4%   (rho 0.95, CI 22 %)
        gamma scv 10       -3.5%   +6.8%   -2.4%   -12.2%   (c 2, rho 0.8, CI 6 %)
        gamma scv 20       +9.4%   +8.2%   -9.3%   -18.1%   (c 2, rho 0.95, CI 22 %)

    Below utilisation 0.95 every cell is within 6 % except the far tail of heavy-tailed laws on
    2-4 cores (gamma scv 10-20, p99.9 at rho 0.6-0.8: -6 % to -12 %: the others' long requests,
    taken as exponential, make the slowdown less persistent than it is) and deterministic p99.9
    at c 16, rho 0.6 (-8.4 %).  With many cores at light load nobody shares and the quantiles
    are the service's own, exactly.

    **Lognormal and gamma on 2, 4, 8, 16, 32 and 64 cores come from shipped tables** of that
    computation (:data:`capacity._quantile_table.PS_MANY_CORES`: 27 utilisations from 0.001 to
    0.991 x scv nodes from 0.0088, to 25 for lognormal and 8.0 for gamma x 40 levels; 0.1-0.7 s per
    load directly, 4-14 s above utilisation 0.99, so a fit on 4 cores took 4-20 s).  Against the
    direct computation midway between the nodes from scv 0.04 (``tools/build_quantile_tables.py
    --check ps_c2`` etc., every other cell, p50 / p90 / p99 / p99.9)::

        c   lognormal (117 points)      gamma (91 points)          gamma but scv 0.1
        2   0.9 / 1.8 / 1.5 / 2.0 %     1.7 / 1.8 / 3.3 / 4.8 %    0.4 / 0.2 / 0.4 / 0.9 %
        4   1.5 / 2.4 / 1.9 / 2.1 %     1.6 / 2.3 / 3.4 / 4.9 %    0.6 / 0.2 / 0.4 / 0.8 %
        8   1.7 / 2.5 / 2.5 / 2.2 %     1.5 / 2.3 / 4.2 / 5.5 %    0.9 / 0.2 / 0.3 / 1.1 %
        16  2.1 / 3.2 / 2.6 / 2.7 %     1.4 / 2.8 / 4.9 / 5.6 %    1.1 / 0.3 / 0.7 / 1.5 %
        32  2.3 / 3.3 / 2.8 / 2.8 %     1.3 / 3.1 / 4.6 / 5.9 %    (143 and 117 points,
        64  2.3 / 3.6 / 3.1 / 2.3 %     1.5 / 3.1 / 5.5 / 7.0 %     scv from 0.011)

    with medians of 1e-5 to 4e-4.  The largest differences are where the direct computation jumps
    between nearby scv values as its phase-type fit changes structure (lognormal near scv 1: at
    c 16, rho 0.79 its p90 falls from 2.209 to 2.188 as the scv rises from 0.9 to 1.1, then leaps
    to 2.349 at 1.21, where the table rises smoothly from 2.235 to 2.316; gamma near 0.1), and
    there the table is the better of the two: gamma scv 0.103, c 4, rho 0.79
    against exact PS simulation (3e6 requests), table -0.5 / -0.2 / -0.6 / -1.3 %, direct
    -0.2 / -1.3 / -3.5 / -5.6 % (99 % half-widths 0.4 / 1.1 / 2.3 / 5.0 %;
    ``tests/test_quantile_table.py``).

    **Nearly constant CPU on several cores** (gamma and lognormal below scv 0.04; a busy loop's
    handler): ``log t`` linear in the coefficient of variation between deterministic CPU (the
    extra-delay path below) and the same law at scv 0.04 (:mod:`capacity._ps_narrow_many_cores`;
    the tables' rows below 0.04 are this rule).  The phase-type path cannot follow a law this narrow
    and was far off: gamma scv 0.0106 on 4 cores at utilisation 0.8 gave p50 / p90 / p99 / p99.9
    0.996 / 1.29 / 2.90 / 4.95 s for 1.37 / 3.08 / 5.68 / 8.53 simulated (E[S] = 1 s).  Against
    exact PS simulation the rule is within -2.3 % to +9.5 % (p50-p99.9, 2-8 cores, utilisation
    0.5-0.95; high in the tails, as the law at scv 0.04 is on many cores; table in that module).

    **Core counts between those tables** (3, 5-7, 9-15, 17-31, 33-63) are read from the two either
    side (a labelled approximation, :func:`capacity._quantile_table._log_t_between`: each table's
    quantile over the M/M/c mean response, its log linear in ``1 / c``): against the direct
    computation at most 6.1 % (median 0-0.6 %; c = 3-48, lognormal scv 0.015-15, gamma 0.015-4,
    utilisation 0.1-0.95, p50-p99.9; table in that docstring), against exact PS simulation (1.5e6
    requests, ``tests/test_ps_many_cores.py``) lognormal scv 2, 6 cores, rho 0.85 within 2.6 %
    (direct 2.0 %), gamma scv 0.1, 3 cores, rho 0.5 within 2.4 % (direct 4.6 %).  A fit on 3 or 6
    cores took 8-9 s directly, 0.2-0.3 s this way.  Above utilisation 0.991, to 0.999, the tables
    are carried to the heavy-traffic limit (:func:`capacity._quantile_table._log_t_heavy`): at
    0.993-0.995 on 2-16 cores within 1.2 % (lognormal p50-p99) / 2.8 % (gamma) of the direct
    computation, 6.5 % at worst (gamma scv 6 at p10, 3.3 % off at the top already), where that took
    35-50 s for 40 points (``tools/measure_heavy_traffic.py``).  Deterministic CPU on several cores
    is read from the same tables (:mod:`capacity._ps_deterministic_table`: within 0.5 %, 4.4 %
    between core counts; above 64 cores towards infinitely many, to utilisation 0.85, within 3.9 %:
    :data:`capacity._quantile_table.BEYOND_LARGEST_TOP`).  Other points are computed directly.

    The deterministic row was measured on the former Erlang-pair path; the extra-delay path
    that replaced it (:func:`response_sf`; 5-9x faster, and exact for the chain to 0.6 %) against
    exact PS simulation (3e6 requests per run, 99 % batch-means half-widths in brackets)::

        c  rho   p50            p90            p99            p99.9          former p99.9
        4  0.3   +0.0% (0.0%)   -0.4% (0.1%)   +1.4% (0.4%)   +4.1% (1.3%)   +0.5%
        8  0.5   +0.0% (0.0%)   -0.3% (0.1%)   +1.3% (0.6%)   +3.3% (1.8%)   -5.6%
        2  0.8   -0.4% (0.7%)   +0.5% (1.1%)   +0.7% (2.7%)   -0.0% (8.6%)   +0.1%
        4  0.9   -0.1% (1.4%)   -0.2% (2.6%)   -1.3% (5.4%)   -0.7% (7.4%)   -0.4%

    At light-load tails the remaining error is the model's (the others as exponential: the
    exact chain gives +4.0 % at c 4, rho 0.3, p99.9), which the former path's own error
    (-3.4 % there against the exact chain, -8.5 % at c 8, rho 0.5) partly offset or doubled.

    **Near-constant CPU on one core** (gamma and Erlang below scv 0.16, lognormal below 0.8;
    fixed-work handlers): conditioned on the tagged request's exact size, the others as the
    two-moment Erlang mixture of the same law (Erlang-24 below scv 1/24;
    :mod:`capacity._ps_near_constant`).  Exact where that mixture is the law (Erlang-k, k <= 24:
    1e-5 against the general transform).  Against exact PS simulation (2e7 s runs, 4e7 s at
    rho 0.98-0.99; 99 % batch-means half-widths in brackets)::

        service              rho   p50            p90            p99            p99.9
        gamma scv 0.002      0.3   -0.0% (0.0%)   -0.1% (0.2%)   +0.1% (0.4%)   -0.1% (1.3%)
        gamma scv 0.002      0.8   -0.1% (0.4%)   -0.2% (0.6%)   -0.6% (1.2%)   -2.1% (2.9%)
        gamma scv 0.01       0.7   +0.2% (0.3%)   +0.3% (0.4%)   +0.1% (1.0%)   -0.4% (1.9%)
        gamma scv 0.05       0.95  -0.0% (1.0%)   -0.2% (2.1%)   +0.3% (3.2%)   +0.9% (5.2%)
        lognormal scv 0.002  0.05  -0.0% (0.0%)   -0.1% (0.2%)   +0.5% (0.2%)   +0.9% (1.2%)
        lognormal scv 0.05   0.8   +0.3% (0.3%)   +0.3% (0.6%)   +0.4% (1.0%)   +0.9% (2.0%)
        lognormal scv 0.09   0.9   +0.1% (0.6%)   +0.4% (0.8%)   +1.5% (1.4%)   +2.9% (2.1%)
        lognormal scv 0.15   0.8   -0.0% (0.3%)   -0.1% (0.5%)   -0.6% (0.6%)   -0.9% (1.3%)
        lognormal scv 0.3    0.8   -0.0% (0.4%)   +0.1% (0.5%)   -0.3% (0.7%)   -0.4% (0.9%)
        lognormal scv 0.5    0.9   -0.0% (0.8%)   +0.0% (1.2%)   +0.1% (1.8%)   -0.1% (3.1%)
        lognormal scv 0.46   0.98  -0.3% (2.6%)   +0.4% (2.9%)   +1.9% (3.8%)   +3.9% (4.5%)
        lognormal scv 0.8    0.9   -0.0% (0.9%)   +0.2% (1.3%)   +0.2% (2.0%)   +0.1% (3.1%)
        lognormal scv 0.8    0.99  +0.1% (6.4%)   +0.3% (9.1%)   -0.2% (12%)    -1.6% (13%)

    The hyper-Erlang path these lognormal laws took before was 2-4 % off at rho 0.8 (scv 0.15:
    -2.0 % / -3.6 % at p99 / p99.9).  The tagged sizes are integrated on equally spaced nodes at
    most a quarter of the law's standard deviation apart (at least 161, at most 1281): with 161
    over the whole range the wide laws were up to 13 % off at rho 0.99 (lognormal scv 0.46, p50).

    (``tests/test_ps_near_constant.py``.)  Before, these laws were answered by a hyper-Erlang
    of 16-24 phases: scv 0.01 and 0.002 gave one answer, 11 % high at p50 (scv 0.002, rho 0.3).
    Below utilisation 0.1, ``P(T > t)`` of such a law is resolved to about 1e-6 absolute (the
    inversion rings at the near-steps of the others' CPU), so quantiles beyond q = 1 - 1e-5
    there are not reliable.  This computation costs 0.1-0.5 s per point, so gamma from scv 0.01
    and lognormal from 0.01 come from a **table of it** (``ps_near_constant_quantiles.npz``,
    ``tools/build_near_constant_table.py``: 44 utilisations x 9 gamma / 13 lognormal scv values x
    72 levels), blended into the main table over gamma scv 0.117-0.16 and lognormal 0.67-0.8.
    Against the computation midway between its nodes (``--check``, 220 points, q = 0.1-0.9999):
    median 1e-5; within 0.3 % at every level except p99-p99.9 at light load (up to 0.8 %, rho
    below 0.01 at scv 0.012: the knee of a nearly deterministic law) and p10 at rho 0.999
    (2 %, lognormal scv 0.46).  At its nodes within 0.45 % (the build's inversion of
    ``P(T > t)`` on 224 times).

    (The former three-moment fit was off by +31 % / -23 % / +20 % at
    p50 / p99 / p99.9 for lognormal scv 4 at rho 0.5: the PS tail depends
    on the whole size distribution, not on its first moments.)

    **Lognormal and gamma service on one core come from a shipped table** of that
    computation (:mod:`capacity._quantile_table`: 32 utilisations from 0.001
    to 0.999 x scv values evenly spaced in log scv -- lognormal 0.57 to 25 (11 nodes), gamma
    0.085 to 5.5 (12 nodes) -- x 40 levels from q = 0.001 to 1 - 1e-6, read by a cubic spline;
    :func:`response_sf` solves the same spline for the level), because the
    direct computation is slow for these laws (``benchmarks/bench_ps.py``).
    From utilisation 0.999 to 0.9999, p10 and up hold the top's ``(1 - rho) t_q`` (heavy-traffic
    limit, :func:`capacity._quantile_table._log_t_one_core_heavy`: within 3.4 % of the direct
    computation, 0.2-2 s a point there); other points off the table (rho > 0.9999, lower levels
    there, scv outside, q beyond the levels) directly.  Below these scv values the near-constant
    table above answers (the lognormal row at scv 0.469 below was measured on this main table,
    before it).  No tabled answer is below the service's own quantile (T >= S): at light load the
    spline dipped 4.5 % below it (lognormal scv 3, p99, rho 0.001-0.03); the floor holds it there.
    At the nodes the table reproduces the direct
    computation (to 0.2 %); between them it is smoother than it: the
    hyper-Erlang fit changes structure with scv, so the direct result jumps
    by a few per cent between nearby scv values (at light load, where
    ``T -> S``, the direct p90 is 9 % off the lognormal's own at scv 3.1, the
    table 2 %).  Against exact PS simulation between the nodes (p50 / p90 /
    p99 / p99.9; lognormal: 4 x 1.5e6 s runs, standard errors 0.1-1.2 %, 1.2-2.2 % at
    rho 0.935; gamma: 1e7 s runs, 95 % half-widths in brackets)::

        lognormal
        scv    rho   table                          direct computation
        0.469  0.79  +0.9% -0.2% -0.5% -0.9%        -0.3% -1.8% -0.6% +0.1%
        1.46   0.79  +0.4% +0.6% +0.9% +1.5%        +0.1% +0.9% +0.7% +1.5%
        4.55   0.935 -1.4% -0.9% -1.6% -1.6%        -1.4% -1.0% -1.5% -1.7%
        gamma (table)
        0.15   0.8   -0.1% (0.4)  +0.2% (0.6)  +0.3% (1.1)  +0.1% (2.1)
        0.3    0.8   +0.2% (0.4)  +0.5% (0.5)  +0.4% (0.9)  -0.6% (1.4)
        0.7    0.6   +0.0% (0.2)  -0.1% (0.4)  -0.0% (0.5)  +0.2% (1.0)
        1.1    0.9   +0.0% (1.2)  -0.2% (1.6)  -0.7% (2.1)  -1.4% (3.0)
        1.5    0.9   -0.3% (1.4)  -0.7% (2.0)  -1.7% (2.9)  -2.6% (4.3)   (99 % half-widths
        3.0    0.8   -0.2% (0.8)  -0.1% (1.0)  -1.0% (1.6)  +0.5% (2.6)    from here on)
        5.0    0.6   -0.0% (0.8)  +0.3% (0.8)  -0.8% (1.2)  -0.8% (2.3)

    The gamma table against the direct computation between its nodes
    (``tools/build_quantile_tables.py --check ps gamma``, 64 points): within 0.6 % above scv
    0.124 (median 0.05 %); between 0.085 and 0.124 up to 7 % apart, where the direct
    computation is the one off -- its hyper-Erlang fit of a shape-10 gamma is poor -- as
    simulation shows at scv 0.103 (1e6 requests, rho 0.02 / 0.3 / 0.7: table within 1.8 %,
    direct -4 % to -9 % at p99 and p99.9).  From scv 1.2 to 5.5: within 0.7 % of the direct
    computation between the nodes, except p50 below utilisation 0.1 at scv ~4.5 (2 %) and p99.9
    above 0.98 (0.9 %); there, above rho = 0.986, the levels beyond q = 1 - 4e-5 are extrapolated
    along the exponential tail (the transform resolves P(T > t) to ~1e-6 at those t).  Gamma
    from scv 5.5 and lognormal from 25 to 53 come from a heavy-tail piece of the table, its body
    from the small-request limit (accuracy against simulation in
    :data:`capacity._quantile_table.PS_HEAVY_TAIL`: p30-p99 within 3.8 %); above, directly.
    Below scv 0.57 the lognormal's hyper-Erlang fits are too uneven to interpolate
    (measured at scv 0.15, rho 0.79: -5.6 % / -9.3 % at p99 / p99.9 from a
    table, -2.3 % / -4.7 % directly), so those points are computed directly.
    Speed: ``benchmarks/bench_ps.py`` times four quantiles at one point from
    the table and directly for each service family.  Many levels of one
    queue computed directly (32 or more on one core: a latency curve, rr's
    blend over many levels) are read from one grid of ``P(T > t)`` in
    ``log t`` with a cubic Hermite inverse instead of a solve per level:
    within 1e-5 of the per-level solve for H2 and Erlang laws, 6e-5 for a
    gamma of scv 20; 200 levels of an H2 law in about 0.5 s instead of
    3.6 s (``bench_ps.py --many-levels``).

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
    shape = check_broadcast(q=qq, **{"arrival_rate/service/servers": np.broadcast_to(0.0, inp.shape)})
    stable = np.broadcast_to(inp.stable, shape)
    if not stable.any():
        return scalar_out(np.full(shape, np.inf))
    qb = np.broadcast_to(qq, shape)
    table = _table.Coverage("ps", inp, shape)
    if inp.service.family == "deterministic" and _det_table.available():   # M/D/1-PS: its table
        res = _det_table.quantile_or_direct(qb, inp, shape, _direct_quantile)
    elif table.mask is None:
        res = _quantile_direct(qb, inp, shape, stable)
    else:
        qf = qb.ravel()
        flat = np.full(table.size, np.inf)
        m = table.mask
        flat[m] = table.quantile(qf[m], m)
        # Never below the service's own quantile (T >= S; see response_sf); NaN (a level off the
        # table) stays NaN and is computed directly below.
        flat[m] = np.maximum(flat[m], table.service(m).ppf(qf[m]))
        rest = table.stable & ~(m & np.isfinite(flat))
        if rest.any():
            sub = table.subset(rest)
            flat[rest] = table.held_to_levels(qf, rest, _quantile_direct(qf[rest], sub, sub.shape, sub.stable))
        res = flat.reshape(shape)
    res = _service_alone_when_idle(res, inp, shape, lambda: inp.service.ppf(qb))
    return scalar_out(np.where(stable, res, np.inf))


def _sf_direct(t: np.ndarray, inp, shape: tuple) -> np.ndarray:
    """P(T > t) from the transforms; nearly constant CPU on several cores by its own rule."""
    return _narrow.direct_sf(t, inp, shape, lambda x, i, sh: _SfEvaluator(i, sh)(x), response_quantile)


def _quantile_direct(qb: np.ndarray, inp, shape: tuple, stable: np.ndarray) -> np.ndarray:
    return _narrow.direct_quantile(qb, inp, shape, stable, _direct_quantile, response_quantile)


def _quantiles_on_grid(inp, shape: tuple, target: np.ndarray) -> np.ndarray | None:
    """Many levels of one queue from one grid of P(T > t) (:func:`capacity._ps_inversion.quantiles_on_grid`)."""
    return _ps_inversion.quantiles_on_grid(inp, shape, target, _SfEvaluator, _mean_response)


def _direct_quantile(qb: np.ndarray, inp, shape: tuple, stable: np.ndarray) -> np.ndarray:
    """response_quantile computed from the transform (no table), on broadcast inputs."""
    ev = _SfEvaluator(inp, shape)
    target = np.where(stable, -np.log1p(-qb), np.nan)
    finite = np.isfinite(target)
    if (finite.sum() >= _ps_inversion.GRID_FROM_LEVELS and ev.one[finite.ravel()].all() and inp.service.family != "deterministic"
            and _one_queue(inp, shape)):
        # Many levels of one queue (a latency curve, rr's blend over a fit's levels): one grid.
        grid = _quantiles_on_grid(inp, shape, target[finite])
        if grid is not None:
            res = np.full(shape, np.nan)
            res[finite] = grid
            return _at_least_the_service(res, shape, lambda: inp.service.ppf(qb))
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
    floor = None
    if inp.service.family == "deterministic":
        # T >= S = E[S] and T = E[S] with positive probability (nobody shares the CPU while the
        # request runs: (1 - rho) exp(-lambda E[S]) on one core), so every level up to that mass
        # has the quantile E[S] exactly.  The solver would bisect toward that jump of P(T > t)
        # for ~30 iterations; one evaluation just above it settles those levels and bounds the others.
        x = np.broadcast_to(np.asarray(inp.service.mean, dtype=float), shape).ravel()
        floor = x * (1.0 + 1e-9)
        tf = target.ravel()
        sf_above = ev.both(floor, np.isfinite(tf))[0]
        at_atom = np.isfinite(tf) & (-np.log(np.maximum(sf_above, 1e-300)) >= tf)
        target = np.where(at_atom.reshape(shape), np.nan, target)
        guess = np.maximum(guess, 1.5 * floor.reshape(shape))
    quadratic_tol = 0.0
    if getattr(ev, "det_x", None) is not None and ev.many.any():
        # Deterministic CPU on several cores (_det_sf_pdf): first solve with the cheap Erlang
        # orders of COARSE (a quarter of the solves, fewer nodes and states; quantiles mostly
        # within 3 % of the full ones, once 30 %; solved to 1e-3), then from there with the full
        # ones, which takes two or three Newton steps (stopped at a quadratic step below 1e-3:
        # error ~1e-6 relative, against ~3e-3 of the method).  Only those points: the others'
        # answers are unchanged.
        coarse_target = np.where(ev.many, target.ravel(), np.nan)
        full = ev.det_orders
        ev.det_orders = (_ps_many_cores.DETERMINISTIC_COARSE_ORDERS, True)
        try:
            coarse = _solve_quantile(ev, coarse_target, guess.ravel(), floor=floor, kinked=True, tol=1e-3)
        finally:
            ev.det_orders = full
        guess = np.where(np.isfinite(coarse_target), coarse, guess.ravel()).reshape(shape)
        quadratic_tol = np.where(ev.many, 1e-3, 0.0)
    res = _solve_quantile(ev, target.ravel(), guess.ravel(), floor=floor, kinked=floor is not None,
                          quadratic_tol=quadratic_tol).reshape(shape)
    if floor is not None:
        res = np.where(at_atom.reshape(shape), x.reshape(shape), res)
    return _at_least_the_service(res, shape, lambda: inp.service.ppf(qb))
