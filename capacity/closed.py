"""Closed-loop models: what a load test with a fixed number of users measures.

Load generators such as ``ab -c N``, ``wrk -c N`` or k6 with a fixed number of
virtual users run a *closed* loop: each of ``users`` clients sends a request,
waits for the answer, optionally thinks (or waits on IO) for ``think_time``
seconds, and only then sends the next one.  Such a system is a closed queueing
network.  For product-form stations (FCFS with exponential service, or
processor sharing with any service distribution) the exact mean throughput and
latency follow from Mean Value Analysis (:func:`mva`); the asymptotic bounds
(:func:`bounds`) give the two straight lines the MVA curve bends between.

A station is described by its *service demand* ``D_k = V_k S_k``: the total
service seconds one request needs there (visits per request times seconds per
visit).  Units: seconds and requests per second.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import gammaln

from ._checks import check_nonnegative, check_positive
from ._deprecation import deprecated_property
from ._result import Result

__all__ = ["BoundsResult", "MVAResult", "bounds", "mva"]

ArrayLike = Any


# ---------------------------------------------------------------------- input checks
def _check_demands(demands: ArrayLike) -> np.ndarray:
    """Demands as a float array of shape ``(..., K)``; a scalar is one station."""
    arr = check_positive(demands, "demands")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.shape[-1] == 0:
        raise ValueError(f"demands must name at least one station, got {demands!r}")
    return arr


def _check_users(users: ArrayLike) -> int:
    """A single population size, an integer >= 1."""
    if users is None:
        raise ValueError("users is required: the number of concurrent clients (an integer >= 1)")
    if isinstance(users, (bool, np.bool_)):
        raise ValueError(f"users must be a positive integer, got {users!r}")
    if isinstance(users, numbers.Integral):
        value = int(users)
    else:
        arr = np.asarray(users)
        if arr.ndim != 0 or arr.dtype.kind not in "iuf":
            raise ValueError(f"users must be a single positive integer, got {users!r}")
        as_float = float(arr)
        if not np.isfinite(as_float) or as_float != round(as_float):
            raise ValueError(f"users must be a positive integer, got {users!r}")
        value = int(as_float)
    if value < 1:
        raise ValueError(f"users must be a positive integer, got {users!r}")
    return value


def _prepare(demands: ArrayLike, think_time: ArrayLike) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Validate and broadcast; returns demands ``batch + (K,)``, think time ``batch``, batch."""
    d = _check_demands(demands)
    z = check_nonnegative(think_time, "think_time")
    batch = np.broadcast_shapes(d.shape[:-1], z.shape)
    d = np.broadcast_to(d, batch + d.shape[-1:])
    z = np.broadcast_to(z, batch)
    return d, z, batch


# ---------------------------------------------------------------------- MVA
@dataclass(frozen=True, repr=False)
class MVAResult(Result):
    """Mean performance of a closed network for every population 1..N.

    With a batch of demand vectors of shape ``batch + (K,)`` every array below
    carries the batch axes first.

    Attributes
    ----------
    users : ndarray of int, shape (N,)
        Population sizes 1..N.
    throughput : ndarray, shape batch + (N,)
        X(n), requests per second.
    response : ndarray, shape batch + (N,)
        R(n) = sum_k R_k(n), the response time in seconds per request, excluding think time.
    residence_time : ndarray, shape batch + (N, K)
        R_k(n), seconds a request spends at station k (queueing + service).
    mean_number : ndarray, shape batch + (N, K)
        Q_k(n), mean number of requests at station k (waiting + in service).
    utilization : ndarray, shape batch + (N, K)
        U_k(n) = X(n) D_k, the fraction of time station k is busy.
    demands : ndarray, shape batch + (K,)
        The service demands D_k, seconds.
    think_time : ndarray, shape batch
        Z, seconds.
    """

    users: np.ndarray
    throughput: np.ndarray
    response: np.ndarray
    residence_time: np.ndarray
    mean_number: np.ndarray
    utilization: np.ndarray
    demands: np.ndarray
    think_time: np.ndarray

    _headline: ClassVar[tuple[str, ...]] = ("users", "throughput", "response")
    response_time = deprecated_property("response")
    queue_length = deprecated_property("mean_number")

    def __repr__(self) -> str:
        batch = self.throughput.shape[:-1]
        shape = f", batch {'x'.join(map(str, batch))}" if batch else ""
        return (f"MVAResult(users=1..{self.users.size}, stations={self.demands.shape[-1]}{shape}, "
                f"max throughput={float(np.max(self.throughput)):.4g}/s)")

    def __str__(self) -> str:
        if self.throughput.shape[:-1]:
            return repr(self) + ": a batch of closed networks; see to_frame()"
        n, x, r = self.users[-1], float(self.throughput[-1]), float(self.response[-1])
        bottleneck = int(np.argmax(self.demands))
        return (f"With {n} users and {self.think_time:.4g} s of think time, the closed network completes "
                f"{x:.4g} requests/s at a mean response time of {r:.4g} s; station {bottleneck} is the "
                f"bottleneck ({100 * float(self.utilization[-1, bottleneck]):.1f} % busy), which caps throughput "
                f"at {1 / float(np.max(self.demands)):.4g} requests/s however many users are added.")

    def to_frame(self):
        """The result as a :class:`pandas.DataFrame`, one row per population.

        Columns ``throughput``, ``response`` and, for each station ``k``,
        ``mean_number_k``, ``residence_time_k`` and ``utilization_k``.  The
        index is ``users``; with a batch of demand vectors it is a
        MultiIndex ``(batch_0, ..., users)``.
        """
        import pandas as pd

        batch = self.throughput.shape[:-1]
        n_users = self.users.size
        if batch:
            grids = np.indices(batch + (n_users,)).reshape(len(batch) + 1, -1)
            levels = [grids[i] for i in range(len(batch))] + [self.users[grids[-1]]]
            names = [f"batch_{i}" for i in range(len(batch))] + ["users"]
            index = pd.MultiIndex.from_arrays(levels, names=names)
        else:
            index = pd.Index(self.users, name="users")
        columns: dict[str, np.ndarray] = {
            "throughput": self.throughput.reshape(-1),
            "response": self.response.reshape(-1),
        }
        for k in range(self.mean_number.shape[-1]):
            columns[f"mean_number_{k}"] = self.mean_number[..., k].reshape(-1)
            columns[f"residence_time_{k}"] = self.residence_time[..., k].reshape(-1)
            columns[f"utilization_{k}"] = self.utilization[..., k].reshape(-1)
        return pd.DataFrame(columns, index=index)


def _mva(d: np.ndarray, z: np.ndarray, n_users: int):
    """Exact MVA recursion; ``d`` has shape batch + (K,), ``z`` shape batch."""
    batch, k = d.shape[:-1], d.shape[-1]
    x = np.empty(batch + (n_users,))
    r_k = np.empty(batch + (n_users, k))
    q_k = np.empty(batch + (n_users, k))
    q_prev = np.zeros(batch + (k,))
    for i, n in enumerate(range(1, n_users + 1)):
        # Arrival theorem: an arriving request sees the network in equilibrium with n-1 users.
        r = d * (1.0 + q_prev)
        xn = n / (z + r.sum(axis=-1))
        q_prev = xn[..., None] * r
        x[..., i] = xn
        r_k[..., i, :] = r
        q_k[..., i, :] = q_prev
    return x, r_k, q_k


# Above this population the recursion (sequential in n, ~6 us a step in numpy) gives way to the
# normalising constant in log space, computed in blocks by np.logaddexp.accumulate.
_RECURSION_MAX_USERS = 20_000
_BLOCK = 4096
# Result arrays above this many bytes are refused: users x stations x batch grows without bound.
_MAX_RESULT_BYTES = 1e9


def _log_geometric_filter(log_x: np.ndarray, log_d: np.ndarray) -> np.ndarray:
    """log y for y(n) = x(n) + d y(n - 1), y(-1) = 0, along the last axis, in log space.

    ``log_d`` (<= 0) has the batch shape.  Within a block of length L starting at n0,
    y(n) d^-(n - n0) is a running sum, so log y(n) = logaddexp.accumulate(log x(n) - (n - n0) log d)
    + (n - n0) log d, the carry from the previous block entering as the first term.  Blocks keep
    the shifted values small (|(n - n0) log d| <= L |log d|), so float64 loses no precision to
    their size.
    """
    out = np.empty_like(log_x)
    n = log_x.shape[-1]
    carry = np.full(log_x.shape[:-1], -np.inf)
    ld = log_d[..., None]
    for lo in range(0, n, _BLOCK):
        hi = min(lo + _BLOCK, n)
        steps = np.arange(1, hi - lo + 1, dtype=float)  # powers of d since the carry at lo - 1
        # y(lo + i) = sum_{j<=i} d^(i-j) x(lo + j) + d^(i+1) y(lo - 1)
        shifted = log_x[..., lo:hi] - (steps - 1.0) * ld
        first = np.logaddexp(shifted[..., 0], carry + ld[..., 0])
        shifted[..., 0] = first
        with np.errstate(invalid="ignore"):  # -inf - -inf where d = 0 stays -inf below
            acc = np.logaddexp.accumulate(shifted, axis=-1) + (steps - 1.0) * ld
        out[..., lo:hi] = acc
        carry = acc[..., -1]
    return out


def _mva_convolution(d: np.ndarray, z: np.ndarray, n_users: int):
    """The MVA quantities from Buzen's normalising constant, for large populations.

    G(n) = sum over n_0 + n_1 + ... + n_K = n of Z^n_0 / n_0! prod_k D_k^n_k (the think stage an
    infinite-server station); with every demand scaled by D_max (d_k = D_k / D_max <= 1,
    zeta = Z / D_max): X(n) = G(n-1) / (D_max G(n)), and Q_k(n) = d_k G+k(n-1) / G(n), where G+k
    is the constant of the network with station k duplicated (Lazowska et al. 1984, sec. 8.3).
    Each station multiplies the generating function by 1/(1 - d_k z): the filter
    y(n) = x(n) + d_k y(n-1), run in log space (:func:`_log_geometric_filter`).
    """
    batch, k = d.shape[:-1], d.shape[-1]
    scale = d.max(axis=-1)
    logd = np.log(d / scale[..., None])
    zeta = z / scale
    n = np.arange(n_users + 1, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log(zeta^n / n!), with 0^0 = 1 when there is no think time
        log_g = np.where(n == 0, 0.0, n * np.log(zeta)[..., None] - gammaln(n + 1.0))
    log_g = np.broadcast_to(log_g, batch + (n_users + 1,)).copy()
    for j in range(k):
        log_g = _log_geometric_filter(log_g, logd[..., j])
    x = np.exp(log_g[..., :-1] - log_g[..., 1:]) / scale[..., None]
    q_k = np.empty(batch + (n_users, k))
    for j in range(k):
        log_plus = _log_geometric_filter(log_g, logd[..., j])  # G+j(0..N)
        q_k[..., j] = np.exp(logd[..., j, None] + log_plus[..., :-1] - log_g[..., 1:])
    q_prev = np.concatenate([np.zeros(batch + (1, k)), q_k[..., :-1, :]], axis=-2)
    r_k = d[..., None, :] * (1.0 + q_prev)  # arrival theorem
    return x, r_k, q_k


def mva(demands: ArrayLike, think_time: ArrayLike = 0.0, users: int | None = None) -> MVAResult:
    """Exact Mean Value Analysis of a closed load test with ``users`` clients.

    Parameters
    ----------
    demands : float or array_like, shape (..., K)
        Service demand D_k of each queueing station, seconds of service one
        request needs there in total (visits x seconds per visit).  A scalar
        is a single station; the last axis lists stations, any leading axes
        are a batch of independent networks solved in the same call (to sweep
        one station's demand, pass shape ``(M, 1)``).
    think_time : float or array_like, default 0.0
        Z, seconds each client waits between receiving a response and sending
        its next request (think time, pacing, or IO wait outside the
        stations).  Broadcasts against the batch axes of ``demands``.
    users : int
        N, the number of concurrent clients (``ab -c N``, k6 VUs).  Results
        are returned for every population 1..N.

    Returns
    -------
    MVAResult
        Arrays over populations 1..N: ``throughput`` (requests/s),
        ``response`` (s, without think time), ``mean_number``,
        ``residence_time`` and ``utilization`` per station; ``.to_frame()``
        gives a DataFrame.

    Notes
    -----
    For n = 1..N (Reiser & Lavenberg 1980), starting from Q_k(0) = 0::

        R_k(n) = D_k (1 + Q_k(n-1))          arrival theorem
        X(n)   = n / (Z + sum_k R_k(n))      response-time law
        Q_k(n) = X(n) R_k(n)                 Little's law

    Exact for a single-class closed product-form network: every station is
    a single server, either FCFS with exponential service or processor
    sharing with any service distribution; the think-time stage is an
    infinite-server (delay) station with any distribution.  Multi-core
    stations (load-dependent rates) are not covered by this recursion.  The
    recursion over n is sequential (cost O(N K) per network); stations and
    batch axes are vectorised.  Above 20,000 users the same quantities come
    from Buzen's normalising constant G(n), computed in log space in blocks
    (``np.logaddexp.accumulate``): X(n) = G(n-1)/G(n), Q_k(n) = D_k
    G+k(n-1)/G(n) with station k duplicated in G+k (Lazowska et al. 1984,
    sec. 8.3); it agrees with the recursion to 1e-10 relative (measured at
    20,000 users, think time up to 1e5 D_max) and takes about 2.6 s for
    10^7 users at two stations.  Result arrays over 1 GB (every population
    1..N is kept) are refused with a ``ValueError``.

    *Why a closed-loop load test overstates capacity.*  With N users the
    population is capped: at most N requests are ever in the system, and a
    slow response delays that client's next request (coordinated omission),
    so queueing throttles itself.  Past the knee N* = (D + Z)/D_max
    throughput saturates at 1/D_max and latency only grows linearly,
    R(N) ~ N D_max - Z.  Production traffic is an open stream: requests keep
    arriving whether or not earlier ones have finished, so bursts are not
    throttled and near saturation the queue and latency grow without bound
    (R = D/(1 - rho) for one PS station).  Example: D = 10 ms, Z = 0,
    N = 10 users measures X = 100 req/s at R = 0.1 s; an open Poisson stream
    at 99 req/s (rho = 0.99) has R = 1 s and unbounded R at 100 req/s.  Read a
    closed test's throughput as a ceiling, not as a safe operating rate.

    References
    ----------
    M. Reiser and S. S. Lavenberg, "Mean-value analysis of closed multichain
    queueing networks", J. ACM 27(2):313-322, 1980.
    E. D. Lazowska, J. Zahorjan, G. S. Graham, K. C. Sevcik, *Quantitative
    System Performance*, Prentice-Hall 1984, ch. 6 (MVA, Algorithm 6.1).
    B. Schroeder, A. Wierman, M. Harchol-Balter, "Open versus closed: a
    cautionary tale", NSDI 2006.

    Examples
    --------
    A 10 ms CPU demand plus 5 ms of database time, 90 ms of client think time:

    >>> from capacity.closed import mva
    >>> res = mva([0.010, 0.005], think_time=0.090, users=20)
    >>> round(float(res.throughput[0]), 4)  # one user: 1 / (0.015 + 0.090)
    9.5238
    >>> round(float(res.throughput[-1]), 2), round(float(res.response[-1]), 4)
    (99.72, 0.1106)
    >>> res.mean_number.shape
    (20, 2)

    A batch of three CPU demands in one call:

    >>> mva([[0.01], [0.02], [0.04]], think_time=0.1, users=5).throughput.shape
    (3, 5)
    """
    d, z, batch = _prepare(demands, think_time)
    n_users = _check_users(users)
    k = d.shape[-1]
    size = 8.0 * n_users * (3 * k + 2) * max(1, int(np.prod(batch)))
    if size > _MAX_RESULT_BYTES:
        raise ValueError(f"users={n_users} with {k} station(s){' and a batch of ' + str(batch) if batch else ''} "
                         f"needs {size / 1e9:.1f} GB of result arrays (every population 1..users is kept); "
                         f"past the knee throughput stays at 1/D_max and the response grows by D_max per "
                         f"user (capacity.closed.bounds), so ask for fewer users")
    if n_users <= _RECURSION_MAX_USERS:
        x, r_k, q_k = _mva(d, z, n_users)
    else:
        x, r_k, q_k = _mva_convolution(d, z, n_users)
    return MVAResult(
        users=np.arange(1, n_users + 1),
        throughput=x,
        response=r_k.sum(axis=-1),
        residence_time=r_k,
        mean_number=q_k,
        utilization=x[..., None] * d[..., None, :],
        demands=np.array(d),
        think_time=np.array(z),
    )


# ---------------------------------------------------------------------- bounds
@dataclass(frozen=True, repr=False)
class BoundsResult(Result):
    """Asymptotic (and pessimistic) bounds for populations 1..N.

    Attributes
    ----------
    users : ndarray of int, shape (N,)
    throughput_upper : ndarray, shape batch + (N,)
        min(n / (D + Z), 1 / D_max), requests/s.
    throughput_lower : ndarray, shape batch + (N,)
        n / (n D + Z), requests/s (every other request ahead of you everywhere).
    response_lower : ndarray, shape batch + (N,)
        max(D, n D_max - Z), seconds.
    response_upper : ndarray, shape batch + (N,)
        n D, seconds.
    knee : ndarray or float, shape batch
        N* = (D + Z) / D_max, the population where the two optimistic
        asymptotes cross.
    """

    users: np.ndarray
    throughput_upper: np.ndarray
    throughput_lower: np.ndarray
    response_lower: np.ndarray
    response_upper: np.ndarray
    knee: Any

    _headline: ClassVar[tuple[str, ...]] = ("knee",)
    response_time_lower = deprecated_property("response_lower")
    response_time_upper = deprecated_property("response_upper")

    def __repr__(self) -> str:
        return f"BoundsResult(users=1..{self.users.size}, knee={np.round(self.knee, 4).tolist()})"

    def __str__(self) -> str:
        if np.ndim(self.knee):
            return repr(self) + ": a batch of closed networks; see to_frame()"
        return (f"Throughput rises at most linearly with users up to the knee at {float(self.knee):.3g} users, "
                f"then stays below {float(self.throughput_upper[-1]):.4g} requests/s; past the knee each added user "
                f"only adds response time (at least {float(self.response_lower[-1]):.4g} s with "
                f"{self.users[-1]} users).")

    def to_frame(self):
        """One row per population (index ``users``; a MultiIndex with a batch of networks)."""
        import pandas as pd

        names = ["throughput_upper", "throughput_lower", "response_lower", "response_upper"]
        batch = self.throughput_upper.shape[:-1]
        n_users = self.users.size
        if batch:
            grids = np.indices(batch + (n_users,)).reshape(len(batch) + 1, -1)
            levels = [grids[i] for i in range(len(batch))] + [self.users[grids[-1]]]
            index = pd.MultiIndex.from_arrays(levels, names=[f"batch_{i}" for i in range(len(batch))] + ["users"])
        else:
            index = pd.Index(self.users, name="users")
        return pd.DataFrame({n: getattr(self, n).reshape(-1) for n in names}, index=index)


def bounds(demands: ArrayLike, think_time: ArrayLike = 0.0, users: int | None = None) -> BoundsResult:
    """Asymptotic bounds on throughput and response time of a closed network.

    Parameters
    ----------
    demands : float or array_like, shape (..., K)
        Service demands D_k, seconds (as in :func:`mva`).
    think_time : float or array_like, default 0.0
        Z, seconds between a response and the client's next request.
    users : int
        N, the number of clients; bounds are returned for 1..N.

    Returns
    -------
    BoundsResult
        ``throughput_upper``, ``throughput_lower``, ``response_lower``,
        ``response_upper`` over populations 1..N, and ``knee``.

    Notes
    -----
    With D = sum_k D_k and D_max = max_k D_k (asymptotic bound analysis)::

        n / (n D + Z) <= X(n) <= min(n / (D + Z), 1 / D_max)
        max(D, n D_max - Z) <= R(n) <= n D

    The optimistic asymptotes cross at the knee N* = (D + Z) / D_max: below
    it clients are mostly thinking, above it the bottleneck station (the one
    with D_max) is saturated.  The bounds hold for any closed network whose
    stations are single servers with demands D_k (no product form needed).

    References
    ----------
    E. D. Lazowska, J. Zahorjan, G. S. Graham, K. C. Sevcik, *Quantitative
    System Performance*, Prentice-Hall 1984, ch. 5 (asymptotic bounds,
    Table 5.1 / Algorithm 5.1).

    Examples
    --------
    >>> from capacity.closed import bounds
    >>> b = bounds([0.010, 0.005], think_time=0.090, users=20)
    >>> round(float(b.knee), 2)  # (0.015 + 0.090) / 0.010
    10.5
    >>> round(float(b.throughput_upper[-1]), 2), round(float(b.response_lower[-1]), 3)
    (100.0, 0.11)
    """
    d, z, _ = _prepare(demands, think_time)
    n_users = _check_users(users)
    n = np.arange(1, n_users + 1, dtype=float)
    total = d.sum(axis=-1)[..., None]
    d_max = d.max(axis=-1)[..., None]
    zz = z[..., None]
    knee = ((total + zz) / d_max)[..., 0]
    return BoundsResult(
        users=np.arange(1, n_users + 1),
        throughput_upper=np.minimum(n / (total + zz), 1.0 / d_max),
        throughput_lower=n / (n * total + zz),
        response_lower=np.maximum(total, n * d_max - zz),
        response_upper=n * total,
        knee=knee.item() if knee.ndim == 0 else knee,
    )
