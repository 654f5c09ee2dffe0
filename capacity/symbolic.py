"""The key queueing formulas as sympy expressions, with LaTeX for notebooks.

Each function returns a sympy expression.  Called without arguments it is
fully symbolic (the module-level symbols below); pass numbers or other
expressions for any argument to substitute them.  ``FORMULAS`` maps a name to
``(equation, one-line description)``, and :func:`latex` renders an entry with
readable symbol names (``\\mathbb{E}[S^{2}]`` rather than ``ES2``), ready for
``IPython.display.Math`` or a Markdown ``$$...$$`` cell.

These are the textbook forms, meant for reading and teaching; the numeric
modules (:mod:`capacity.fcfs`, :mod:`capacity.erlang`, :mod:`capacity.ps`,
:mod:`capacity.closed`) evaluate the same quantities stably and vectorised.

Examples
--------
>>> import sympy
>>> from capacity import symbolic as sy
>>> W = sy.pollaczek_khinchine_mean_wait()   # in lambda, E[S], E[S^2]
>>> W.subs({sy.lam: 2, sy.ES: sympy.Rational(1, 10), sy.ES2: sympy.Rational(3, 100)})
3/80
>>> float(sy.erlang_c(14, 10).doit())  # doctest: +ELLIPSIS
0.17413...
>>> print(sy.latex("ps_mean_response"))
T = \\frac{\\mathbb{E}[S]}{1 - \\rho}
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import sympy

from ._deprecation import _warn as _warn_renamed
from ._deprecation import renamed_parameters

__all__ = [
    "FORMULAS",
    "MVAStep",
    "erlang_b",
    "erlang_b_step",
    "erlang_c",
    "erlang_c_from_b",
    "latex",
    "mm1_mean_wait",
    "mm1_response_quantile",
    "mm1_response_sf",
    "mva_step",
    "pollaczek_khinchine_mean_wait",
    "ps_conditional_mean_response",
    "ps_mean_response",
]

# ---------------------------------------------------------------------- symbols
lam = sympy.Symbol("lambda", positive=True)        # arrival rate, requests/s
mu = sympy.Symbol("mu", positive=True)             # service rate 1/E[S], requests/s
ES = sympy.Symbol("ES", positive=True)             # E[S], mean service time, s
ES2 = sympy.Symbol("ES2", positive=True)           # E[S^2], s^2
rho = sympy.Symbol("rho", positive=True)           # utilization
c = sympy.Symbol("c", positive=True, integer=True)  # servers
a = sympy.Symbol("a", positive=True)               # offered load lambda E[S], Erlangs
x = sympy.Symbol("x", positive=True)               # job size, s
t = sympy.Symbol("t", positive=True)               # time, s
q = sympy.Symbol("q", positive=True)               # quantile level in (0, 1)
D = sympy.Symbol("D", positive=True)               # service demand, s
Z = sympy.Symbol("Z", positive=True)               # think time, s
N = sympy.Symbol("N", positive=True, integer=True)  # users
k = sympy.Symbol("k", nonnegative=True, integer=True)  # summation index
B_prev = sympy.Symbol("B_prev", positive=True)     # Erlang B with one server fewer
B = sympy.Symbol("B", positive=True)               # Erlang B at c servers
Q_prev = sympy.Symbol("Q_prev", nonnegative=True)  # MVA queue length with N-1 users

# How the symbols print in LaTeX (sympy would otherwise write ES2 as "ES_{2}").
_LATEX_NAMES = {
    ES: r"\mathbb{E}[S]",
    ES2: r"\mathbb{E}[S^{2}]",
    B_prev: r"B(c-1, a)",
    B: r"B(c, a)",
    Q_prev: r"Q(N-1)",
}


def _exact(*values: Any) -> tuple:
    """Sympify arguments so that Python ints stay exact (10/14 must not become a float)."""
    return tuple(sympy.sympify(v) for v in values)


# ---------------------------------------------------------------------- open queues
def pollaczek_khinchine_mean_wait(arrival_rate: Any = lam, mean_service: Any = ES,
                                  second_moment: Any = ES2) -> sympy.Expr:
    """Mean wait in queue of M/G/1 FCFS (Pollaczek-Khinchine), seconds.

    Parameters
    ----------
    arrival_rate : sympy expression or number, default lambda
        Poisson arrival rate, requests/s.
    mean_service : default E[S]
        Mean service time, s.
    second_moment : default E[S^2]
        Second moment of the service time, s^2.

    Returns
    -------
    sympy.Expr
        W = lambda E[S^2] / (2 (1 - rho)) with rho = lambda E[S] written out.

    Notes
    -----
    Exact for Poisson arrivals, i.i.d. service, one server, FCFS, rho < 1.

    References
    ----------
    L. Kleinrock, *Queueing Systems* vol. 1 (1975), ch. 5 (the P-K
    mean-value formula).

    Examples
    --------
    >>> from capacity.symbolic import pollaczek_khinchine_mean_wait
    >>> pollaczek_khinchine_mean_wait(8, 0.1, 0.02)  # exponential, E[S] = 0.1 s
    0.400000000000000
    """
    arrival_rate, mean_service, second_moment = _exact(arrival_rate, mean_service, second_moment)
    return arrival_rate * second_moment / (2 * (1 - arrival_rate * mean_service))


def mm1_mean_wait(arrival_rate: Any = lam, service_rate: Any = mu) -> sympy.Expr:
    """Mean wait in queue of M/M/1 FCFS, rho / (mu - lambda), seconds.

    ``service_rate`` is mu = 1/E[S] (requests/s).  Reference: Kleinrock
    vol. 1, sec. 3.2.
    """
    arrival_rate, service_rate = _exact(arrival_rate, service_rate)
    return (arrival_rate / service_rate) / (service_rate - arrival_rate)


@renamed_parameters(c="servers", a="offered_load")
def erlang_b(servers: Any = c, offered_load: Any = a) -> sympy.Expr:
    """Erlang B blocking probability of M/M/c/c, (a^c/c!) / sum_{k=0}^{c} a^k/k!.

    Parameters
    ----------
    servers : default symbol c
        Number of servers (a positive integer).
    offered_load : default symbol a
        Offered load lambda E[S], Erlangs.

    Returns
    -------
    sympy.Expr
        With an unevaluated ``sympy.Sum``; ``.doit()`` expands it for an
        integer ``c``.  For numbers use :func:`capacity.erlang.erlang_b`
        (stable; never the factorials).

    References
    ----------
    L. Kleinrock, *Queueing Systems* vol. 1 (1975), sec. 3.7 (Erlang's loss
    formula).
    """
    c_, a_ = _exact(servers, offered_load)
    return (a_**c_ / sympy.factorial(c_)) / sympy.Sum(a_**k / sympy.factorial(k), (k, 0, c_))


@renamed_parameters(k="servers", a="offered_load")
def erlang_b_step(servers: Any = c, offered_load: Any = a, previous: Any = B_prev) -> sympy.Expr:
    """One step of the stable Erlang B recursion over servers.

    B(c, a) = a B(c-1, a) / (c + a B(c-1, a)), starting from B(0, a) = 1, with c = ``servers``
    and a = ``offered_load``; ``previous`` is B(c-1, a).  Every step stays in [0, 1], which is why the
    numeric code uses it instead of the factorial form.
    """
    c_, a_, previous = _exact(servers, offered_load, previous)
    return a_ * previous / (c_ + a_ * previous)


@renamed_parameters(c="servers", a="offered_load")
def erlang_c(servers: Any = c, offered_load: Any = a) -> sympy.Expr:
    """Erlang C, the probability that an arrival has to wait in M/M/c.

    Parameters
    ----------
    servers : default symbol c
        Number of servers (a positive integer).
    offered_load : default symbol a
        Offered load lambda E[S] < c, Erlangs.

    Returns
    -------
    sympy.Expr
        C(c, a) = (a^c/c!)(c/(c-a)) / (sum_{k<c} a^k/k! + (a^c/c!)(c/(c-a))),
        with an unevaluated ``sympy.Sum``; ``.doit()`` gives an exact
        rational for integer ``c`` and rational ``a``.

    References
    ----------
    L. Kleinrock, *Queueing Systems* vol. 1 (1975), sec. 3.5 (Erlang's C
    formula).

    Examples
    --------
    >>> from capacity.symbolic import erlang_c
    >>> round(float(erlang_c(14, 10).doit()), 7)
    0.1741319
    """
    c_, a_ = _exact(servers, offered_load)
    top = a_**c_ / sympy.factorial(c_) * c_ / (c_ - a_)
    return top / (sympy.Sum(a_**k / sympy.factorial(k), (k, 0, c_ - 1)) + top)


@renamed_parameters(c="servers", a="offered_load")
def erlang_c_from_b(servers: Any = c, offered_load: Any = a, blocking: Any = B) -> sympy.Expr:
    """Erlang C from Erlang B (``blocking``) at the same servers c and offered load a:
    C = B / (1 - (a/c)(1 - B)).

    The route the numeric code takes (B by its stable recursion, then C).
    """
    c_, a_, blocking = _exact(servers, offered_load, blocking)
    return blocking / (1 - (a_ / c_) * (1 - blocking))


def ps_mean_response(arrival_rate: Any = lam, mean_service: Any = ES) -> sympy.Expr:
    """Mean response time of M/G/1 processor sharing, E[S] / (1 - rho), seconds.

    Parameters
    ----------
    arrival_rate : default lambda
        Poisson arrival rate, requests/s.
    mean_service : default E[S]
        Mean service time, s.

    Returns
    -------
    sympy.Expr
        E[S] / (1 - lambda E[S]).

    Notes
    -----
    Insensitive: exact for any service distribution with this mean.

    References
    ----------
    L. Kleinrock, *Queueing Systems* vol. 2 (1976), ch. 4 (processor
    sharing).
    """
    arrival_rate, mean_service = _exact(arrival_rate, mean_service)
    return mean_service / (1 - arrival_rate * mean_service)


def ps_conditional_mean_response(size: Any = x, arrival_rate: Any = lam,
                                 mean_service: Any = ES) -> sympy.Expr:
    """Mean response time of a job of size ``size`` (s) in M/G/1-PS, x / (1 - rho), seconds.

    Every job is slowed down by the same factor 1/(1 - rho), whatever its
    size.  Reference: Kleinrock vol. 2 (1976), ch. 4.
    """
    size, arrival_rate, mean_service = _exact(size, arrival_rate, mean_service)
    return size / (1 - arrival_rate * mean_service)


def mm1_response_sf(t: Any = t, arrival_rate: Any = lam, service_rate: Any = mu) -> sympy.Expr:
    """P(T > t) for the M/M/1 FCFS response time T, exp(-(mu - lambda) t).

    T is exponential with rate mu - lambda.  Reference: Kleinrock vol. 1,
    ch. 5 (waiting-time distribution of M/M/1).
    """
    t, arrival_rate, service_rate = _exact(t, arrival_rate, service_rate)
    return sympy.exp(-(service_rate - arrival_rate) * t)


def mm1_response_quantile(q: Any = q, arrival_rate: Any = lam, service_rate: Any = mu) -> sympy.Expr:
    """q-quantile of the M/M/1 FCFS response time, ln(1/(1-q)) / (mu - lambda), seconds.

    The inverse of :func:`mm1_response_sf` at 1 - q.

    Examples
    --------
    >>> from capacity.symbolic import mm1_response_quantile
    >>> round(float(mm1_response_quantile(0.99, 80, 100)), 4)  # p99 at 80 % load, E[S] = 10 ms
    0.2303
    """
    q, arrival_rate, service_rate = _exact(q, arrival_rate, service_rate)
    return sympy.log(1 / (1 - q)) / (service_rate - arrival_rate)


# ---------------------------------------------------------------------- closed networks
class MVAStep(NamedTuple):
    """One step of exact MVA, from population N-1 to N.

    ``residence_time`` and ``mean_number`` (Q_k, the mean number at each station) are single
    expressions for one station and tuples for several; ``response`` is R = sum_k R_k.
    """

    residence_time: Any
    response: sympy.Expr
    throughput: sympy.Expr
    mean_number: Any

    # The names of the previous release (docs/glossary.md); a NamedTuple cannot take a descriptor
    # with __set_name__, so each old name is a plain property that warns.
    @property
    def response_time(self) -> sympy.Expr:
        _warn_renamed("MVAStep.response_time is now .response")
        return self.response

    @property
    def queue_length(self) -> Any:
        _warn_renamed("MVAStep.queue_length is now .mean_number")
        return self.mean_number


def mva_step(demands: Any = D, think_time: Any = Z, users: Any = N,
             previous_queue: Any = Q_prev) -> MVAStep:
    """One step of the exact MVA recursion (Reiser & Lavenberg 1980).

    R_k = D_k (1 + Q_k(N-1)),  X = N / (Z + sum_k R_k),  Q_k(N) = X R_k.

    ``demands`` and ``previous_queue`` are a single value (one station) or
    sequences of equal length (one entry per station).  Feeding
    ``mean_number`` back as ``previous_queue`` for N = 1, 2, ... reproduces
    :func:`capacity.closed.mva` exactly (with rational inputs, in exact
    arithmetic).
    """
    several = not isinstance(demands, sympy.Basic) and np.ndim(demands) > 0
    d = [sympy.sympify(v) for v in demands] if several else [sympy.sympify(demands)]
    qp = list(previous_queue) if several else [previous_queue]
    if len(qp) != len(d):
        raise ValueError(f"previous_queue must have one entry per station ({len(d)}), got {previous_queue!r}")
    r = [dk * (1 + qk) for dk, qk in zip(d, qp)]
    total = sympy.Add(*r)
    xn = users / (think_time + total)
    qn = [xn * rk for rk in r]
    if several:
        return MVAStep(tuple(r), total, xn, tuple(qn))
    return MVAStep(r[0], total, xn, qn[0])


# ---------------------------------------------------------------------- catalogue
# Display forms, built unevaluated so they read like the textbook (sympy would
# otherwise expand 2(1 - rho) into 2 - 2 rho).  Substituting rho = lambda E[S]
# (or lambda / mu) gives back the functions above; the tests check that.
_power_term = a**c / sympy.factorial(c)
_sum_to_c = sympy.Sum(a**k / sympy.factorial(k), (k, 0, c))
_sum_below_c = sympy.Sum(a**k / sympy.factorial(k), (k, 0, sympy.Add(c, -1, evaluate=False)))
_erlang_b = a**c / (sympy.factorial(c) * _sum_to_c)
with sympy.evaluate(False):
    _pk = lam * ES2 / (2 * (1 - rho))
    _mm1_wait = rho / (mu - lam)
    _erlang_b_step = a * B_prev / (c + a * B_prev)
    _erlang_c_top = _power_term * (c / (c - a))
    _erlang_c = _erlang_c_top / (_sum_below_c + _erlang_c_top)
    _erlang_c_from_b = B / (1 - (a / c) * (1 - B))
    _ps = ES / (1 - rho)
    _ps_x = x / (1 - rho)
    _mm1_sf = sympy.exp(-(mu - lam) * t)
    _mm1_q = sympy.log(1 / (1 - q)) / (mu - lam)
    _mva_r = D * (1 + Q_prev)

_R, _X, _Q = sympy.Symbol("R(N)"), sympy.Symbol("X(N)"), sympy.Symbol("Q(N)")

FORMULAS: dict[str, tuple[sympy.Eq, str]] = {
    "pollaczek_khinchine_mean_wait": (
        sympy.Eq(sympy.Symbol("W"), _pk, evaluate=False),
        "M/G/1 FCFS mean wait in queue (Pollaczek-Khinchine), rho = lambda E[S]",
    ),
    "mm1_mean_wait": (
        sympy.Eq(sympy.Symbol("W"), _mm1_wait, evaluate=False),
        "M/M/1 FCFS mean wait in queue, rho = lambda / mu",
    ),
    "erlang_b": (
        sympy.Eq(sympy.Function("B")(c, a), _erlang_b, evaluate=False),
        "Erlang B: probability that all c servers are busy in M/M/c/c (blocking)",
    ),
    "erlang_b_recursion": (
        sympy.Eq(B, _erlang_b_step, evaluate=False),
        "stable Erlang B recursion over servers, starting from B(0, a) = 1",
    ),
    "erlang_c": (
        sympy.Eq(sympy.Function("C")(c, a), _erlang_c, evaluate=False),
        "Erlang C: probability that an arrival waits in M/M/c, offered load a = lambda E[S] < c",
    ),
    "erlang_c_from_b": (
        sympy.Eq(sympy.Function("C")(c, a), _erlang_c_from_b, evaluate=False),
        "Erlang C from Erlang B at the same c and a",
    ),
    "ps_mean_response": (
        sympy.Eq(sympy.Symbol("T"), _ps, evaluate=False),
        "M/G/1 processor sharing mean response time (insensitive to the service distribution)",
    ),
    "ps_conditional_mean_response": (
        sympy.Eq(sympy.Symbol("T(x)"), _ps_x, evaluate=False),
        "M/G/1 processor sharing mean response time of a job of size x",
    ),
    "mm1_response_sf": (
        sympy.Eq(sympy.Symbol("P(T > t)"), _mm1_sf, evaluate=False),
        "M/M/1 FCFS response-time tail: exponential with rate mu - lambda",
    ),
    "mm1_response_quantile": (
        sympy.Eq(sympy.Symbol("t_q"), _mm1_q, evaluate=False),
        "M/M/1 FCFS response-time q-quantile",
    ),
    "mva_residence_time": (
        sympy.Eq(_R, _mva_r, evaluate=False),
        "MVA arrival theorem: an arrival sees the queue of the network with N-1 users",
    ),
    "mva_throughput": (
        sympy.Eq(_X, N / (Z + _R), evaluate=False),
        "MVA throughput from the interactive response-time law",
    ),
    "mva_queue_length": (
        sympy.Eq(_Q, _X * _R, evaluate=False),
        "MVA queue length from Little's law",
    ),
}


def latex(name: str) -> str:
    """LaTeX of ``FORMULAS[name]`` as ``lhs = rhs`` (no surrounding ``$$``).

    Examples
    --------
    >>> from capacity.symbolic import latex
    >>> print(latex("mm1_response_quantile"))
    t_{q} = \\frac{\\log{\\left(\\frac{1}{1 - q} \\right)}}{\\mu - \\lambda}
    """
    try:
        equation, _ = FORMULAS[name]
    except KeyError:
        raise ValueError(f"name must be one of {sorted(FORMULAS)}, got {name!r}") from None
    return sympy.latex(equation, symbol_names=_LATEX_NAMES, order="none")


# ---------------------------------------------------------------------- overload (issue 3)
alpha = sympy.Symbol("alpha", positive=True)     # growth rate of the number present, requests/s
u = sympy.Symbol("u", positive=True)             # arrival time into the overload, s
s_lap = sympy.Symbol("s", positive=True)         # Laplace variable, 1/s
_LST = sympy.Function("L")                       # L(s) = E[exp(-s S)]


def ps_overload_growth_rate(arrival_rate: Any = lam, lst: Any = _LST) -> sympy.Eq:
    """Fixed-point equation of the growth rate of an overloaded M/G/1-PS queue.

    ``alpha = lambda * (1 - L(alpha))`` with ``L(s) = E[exp(-s S)]``;
    ``N(t) / t -> alpha`` when ``rho > 1`` (Jean-Marie & Robert 1994).

    Derivation (fluid).  Suppose ``N(t) = alpha t``.  Each request present is
    served at rate ``1/N(t) = 1/(alpha t)``, so one that arrived at ``u`` has
    attained ``int_u^t dr / (alpha r) = ln(t/u) / alpha`` by ``t``.  It is
    still present iff its size exceeds that: ``S > ln(t/u) / alpha``.
    Counting the arrivals in ``[0, t]`` still present,

    ``N(t) = int_0^t lambda P(S > ln(t/u)/alpha) du``;

    substituting ``u = t exp(-alpha y)``, ``du = alpha t exp(-alpha y) dy``,

    ``N(t) = lambda t alpha int_0^oo P(S > y) exp(-alpha y) dy
           = lambda t (1 - L(alpha))``,

    and self-consistency ``N(t) = alpha t`` gives the equation.  (``alpha = 0``
    always solves it; the positive root exists iff ``lambda E[S] > 1`` since
    the right side is concave with slope ``lambda E[S]`` at 0.)  With ``c``
    cores replace ``L(alpha)`` by ``L(alpha / c)``.

    Parameters
    ----------
    arrival_rate : default lambda
    lst : sympy Function or callable, default L
        The service-time Laplace-Stieltjes transform, e.g.
        ``lambda s: mu / (mu + s)`` for exponential service.

    Returns
    -------
    sympy.Eq

    References
    ----------
    A. Jean-Marie and P. Robert, "On the transient behavior of the
    processor sharing queue", Queueing Systems 17 (1994) 129-136.

    Examples
    --------
    >>> import sympy
    >>> from capacity import symbolic as sy
    >>> eq = sy.ps_overload_growth_rate(sy.lam, lambda s: sy.mu / (sy.mu + s))
    >>> sympy.solve(eq, sy.alpha)        # exponential service: alpha = lambda - mu
    [lambda - mu]
    """
    (arrival_rate,) = _exact(arrival_rate)
    return sympy.Eq(alpha, arrival_rate * (1 - lst(alpha)))


def ps_overload_completion_time(u: Any = u, size: Any = x, growth_rate: Any = alpha) -> sympy.Expr:
    """Fluid completion time ``u * exp(alpha x)`` of a request arriving ``u`` s into a PS overload.

    Derivation: with ``N(r) = alpha r`` present (see
    :func:`ps_overload_growth_rate`) the request attains ``ln(t/u)/alpha``
    by time ``t``; setting this equal to its size ``x`` gives
    ``t = u exp(alpha x)``, so its sojourn is ``u (exp(alpha x) - 1)``.  The
    tests check ``d(attained)/dt = 1/(alpha t)`` at this solution.  Valid for
    ``alpha u >> 1`` (many requests present when it arrives) and while the
    overload lasts.

    Examples
    --------
    >>> import sympy
    >>> from capacity import symbolic as sy
    >>> sy.ps_overload_completion_time(10, 2, sympy.Rational(1, 2))
    10*E
    """
    u, size, growth_rate = _exact(u, size, growth_rate)
    return u * sympy.exp(growth_rate * size)


def fcfs_overload_wait(u: Any = u, arrival_rate: Any = lam, mean_service: Any = ES,
                       servers: Any = 1) -> sympy.Expr:
    """Fluid FCFS wait ``(rho - 1) u`` of a request arriving ``u`` s into an overload.

    Derivation: from an empty queue at time 0, work arrives at rate
    ``lambda E[S]`` and ``c`` cores remove it at rate ``c``, so the backlog at
    ``u`` is ``(lambda E[S] - c) u`` and a FCFS arrival waits
    ``backlog / c = (rho - 1) u`` with ``rho = lambda E[S] / c``; then it is
    served at full speed.  (Stochastic corrections are O(sqrt(u)).)

    Examples
    --------
    >>> import sympy
    >>> from capacity import symbolic as sy
    >>> sy.fcfs_overload_wait(100, sympy.Rational(3, 2), 1)
    50
    """
    u, arrival_rate, mean_service, servers = _exact(u, arrival_rate, mean_service, servers)
    return (arrival_rate * mean_service / servers - 1) * u
