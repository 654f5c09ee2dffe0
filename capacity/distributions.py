"""Service-time distributions: the CPU seconds one request needs.

A :class:`Service` is a frozen distribution in the sense of ``scipy.stats``:
its parameters may be numpy arrays, and every method broadcasts them against
its own argument.  It is built from the two numbers a capacity planner
usually has -- the mean and the squared coefficient of variation
``scv = Var[S] / E[S]**2`` -- and delegates to ``scipy.stats`` wherever scipy
has the family.

Families and their variability:

=================  =============  ===========================================
constructor        scv            typical use
=================  =============  ===========================================
deterministic      0              a fixed amount of work (benchmarks, M/D/1)
erlang(k)          1/k            work made of k similar steps
gamma(scv)         any > 0        a smooth fit by two moments
exponential        1              the memoryless textbook case (M/M/1)
hyperexponential   >= 1           a mix of cheap and expensive requests
lognormal(scv)     any > 0        what measured request costs usually look like
empirical          from data      measured CPU times, used as they are
=================  =============  ===========================================
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from scipy import special

from ._checks import as_float_array, check_broadcast, check_positive, check_quantile, scalar_out

__all__ = ["Service", "as_service"]

ArrayLike = Any


#: Families whose cdf, sf and ppf come from scipy.special directly (Service._closed_form).
_CLOSED_FORM = ("exponential", "erlang", "gamma", "lognormal")


def _stats():
    """``scipy.stats``, imported when a law is first evaluated: it takes half a second to import,
    and a CLI call or a planning script that never asks a quantile of it should not pay for it."""
    from scipy import stats

    return stats


def _clog1p(z: np.ndarray) -> np.ndarray:
    """log(1 + z) for complex or real z, accurate for small |z| (numpy's
    complex log1p loses the real part's relative precision)."""
    z = np.asarray(z)
    if not np.iscomplexobj(z):
        return np.log1p(z)
    x, y = z.real, z.imag
    return 0.5 * np.log1p(2.0 * x + x * x + y * y) + 1j * np.arctan2(y, 1.0 + x)


class Service:
    """Distribution of the CPU time one request needs, in seconds.

    Do not call the constructor directly; use one of the class methods
    (:meth:`exponential`, :meth:`deterministic`, :meth:`erlang`,
    :meth:`gamma`, :meth:`lognormal`, :meth:`hyperexponential`,
    :meth:`empirical`, :meth:`from_scipy`).

    Attributes
    ----------
    family : str
        Name of the family (``"exponential"``, ``"lognormal"``, ...).
    mean : float or ndarray
        E[S] in seconds.
    scv : float or ndarray
        Squared coefficient of variation Var[S] / E[S]^2.

    Examples
    --------
    >>> from capacity import Service
    >>> s = Service.lognormal(0.025, scv=2.0)
    >>> round(s.mean, 6), round(s.scv, 6)
    (0.025, 2.0)
    >>> round(float(s.moment(2)), 8)  # E[S^2] = (1 + scv) E[S]^2
    0.001875
    """

    def __init__(self, family: str, params: dict[str, np.ndarray], *,
                 frozen: Any = None, samples: np.ndarray | None = None) -> None:
        self.family = family
        self._params = params
        # ``frozen`` is a frozen scipy distribution or a zero-argument callable making one: freezing
        # costs ~0.7 ms (scipy builds its docstrings), and formulas that only need the parameters
        # (every queue model of a slider move creates Services) should not pay for it.
        self._frozen_obj = None if callable(frozen) and not hasattr(frozen, "dist") else frozen
        self._frozen_make = frozen if self._frozen_obj is None else None
        self._samples = samples

    @property
    def _frozen(self) -> Any:
        if self._frozen_obj is None and self._frozen_make is not None:
            self._frozen_obj = self._frozen_make()
        return self._frozen_obj

    # ------------------------------------------------------------------ constructors
    @classmethod
    def deterministic(cls, mean: ArrayLike) -> "Service":
        """Every request needs exactly ``mean`` seconds (scv = 0)."""
        m = check_positive(mean, "mean")
        return cls("deterministic", {"mean": m})

    @classmethod
    def exponential(cls, mean: ArrayLike) -> "Service":
        """Exponential service time with the given mean (scv = 1)."""
        m = check_positive(mean, "mean")
        return cls("exponential", {"mean": m}, frozen=lambda: _stats().expon(scale=m))

    @classmethod
    def erlang(cls, mean: ArrayLike, k: ArrayLike) -> "Service":
        """Erlang-k: the sum of ``k`` exponential phases (scv = 1/k)."""
        m = check_positive(mean, "mean")
        k_arr = check_positive(k, "k")
        if np.any(k_arr != np.round(k_arr)):
            bad = k_arr[k_arr != np.round(k_arr)].flat[0].item() if k_arr.ndim else k_arr.item()
            raise ValueError(f"k must be a positive integer, got {bad!r}")
        shape = check_broadcast(mean=m, k=k_arr)
        m, k_arr = np.broadcast_to(m, shape), np.broadcast_to(k_arr, shape)
        return cls("erlang", {"mean": m, "k": k_arr},
                   frozen=lambda: _stats().gamma(a=k_arr, scale=m / k_arr))

    @classmethod
    def gamma(cls, mean: ArrayLike, scv: ArrayLike) -> "Service":
        """Gamma service time with the given mean and scv (shape 1/scv)."""
        m = check_positive(mean, "mean")
        c2 = check_positive(scv, "scv")
        shape = check_broadcast(mean=m, scv=c2)
        m, c2 = np.broadcast_to(m, shape), np.broadcast_to(c2, shape)
        return cls("gamma", {"mean": m, "scv": c2},
                   frozen=lambda: _stats().gamma(a=1.0 / c2, scale=m * c2))

    @classmethod
    def lognormal(cls, mean: ArrayLike, scv: ArrayLike) -> "Service":
        """Lognormal service time with the given mean and scv.

        ``sigma**2 = log(1 + scv)`` and ``mu = log(mean) - sigma**2 / 2``.
        """
        m = check_positive(mean, "mean")
        c2 = check_positive(scv, "scv")
        shape = check_broadcast(mean=m, scv=c2)
        m, c2 = np.broadcast_to(m, shape), np.broadcast_to(c2, shape)
        sigma = np.sqrt(np.log1p(c2))
        scale = m * np.exp(-0.5 * sigma**2)
        return cls("lognormal", {"mean": m, "scv": c2},
                   frozen=lambda: _stats().lognorm(s=sigma, scale=scale))

    @classmethod
    def hyperexponential(cls, mean: ArrayLike, scv: ArrayLike) -> "Service":
        """Two-phase hyperexponential with balanced means (scv >= 1).

        With probability ``p`` the request is exponential with rate
        ``2p/mean``, otherwise with rate ``2(1-p)/mean``, where
        ``p = (1 + sqrt((scv - 1)/(scv + 1))) / 2``; each branch carries half
        of the mean (Whitt's balanced-means fit).

        References
        ----------
        W. Whitt, "Approximating a point process by a renewal process, I",
        Operations Research 30 (1982) 125-147, eq. (3.7).
        """
        m = check_positive(mean, "mean")
        c2 = check_positive(scv, "scv")
        if np.any(c2 < 1):
            bad = c2[c2 < 1].flat[0].item() if c2.ndim else c2.item()
            raise ValueError(f"scv must be >= 1 for a hyperexponential service, got {bad!r}")
        shape = check_broadcast(mean=m, scv=c2)
        m, c2 = np.broadcast_to(m, shape), np.broadcast_to(c2, shape)
        p = 0.5 * (1.0 + np.sqrt((c2 - 1.0) / (c2 + 1.0)))
        return cls("hyperexponential", {"mean": m, "scv": c2, "p": p,
                                        "rate1": 2.0 * p / m, "rate2": 2.0 * (1.0 - p) / m})

    #: Families :meth:`from_moments` can build from a mean and an scv.
    MOMENT_FAMILIES = ("deterministic", "exponential", "erlang", "gamma", "lognormal", "hyperexponential")

    @classmethod
    def from_moments(cls, mean: ArrayLike, scv: ArrayLike = 1.0, family: str | None = None) -> "Service":
        """The service law with this mean and squared coefficient of variation.

        The one rule by which capacity turns the two numbers a planner has into a
        distribution; the CLI, the planners, the fits and the notebooks all call it.

        Parameters
        ----------
        mean : float or array_like
            E[S], seconds (> 0).
        scv : float or array_like, default 1
            Var[S] / E[S]^2 (>= 0).
        family : str, optional
            One of :attr:`MOMENT_FAMILIES`.  When omitted, the family follows the scv:

            ============  ==================  ==========================================
            scv           family              why
            ============  ==================  ==========================================
            0             deterministic       a fixed amount of work
            1             exponential         the memoryless case, exact formulas
            (0, 1)        gamma               a sum of similar steps (Erlang-like)
            > 1           lognormal           what measured request costs look like,
                                              and the family the fits default to
            ============  ==================  ==========================================

            An array of scv values must then lie on one side of 1 (or be all 0 or all 1);
            mixed arrays need an explicit ``family``.

        Returns
        -------
        Service

        Raises
        ------
        ValueError
            When ``scv`` does not suit the family (deterministic needs 0, exponential 1,
            erlang ``1/k`` for an integer ``k``, hyperexponential ``>= 1``, every other > 0).

        Examples
        --------
        >>> Service.from_moments(0.025).family
        'exponential'
        >>> Service.from_moments(0.025, 0.2).family, Service.from_moments(0.025, 4).family
        ('gamma', 'lognormal')
        >>> round(Service.from_moments(0.025, 0.25, family="erlang").scv, 6)
        0.25
        """
        m = check_positive(mean, "mean")
        c2 = as_float_array(scv, "scv")
        bad = ~np.isfinite(c2) | (c2 < 0)
        if bad.any():
            raise ValueError(f"scv must be non-negative and finite, got {c2[bad].flat[0].item()!r}")
        if family is None:
            if np.all(c2 == 0):
                family = "deterministic"
            elif np.all(c2 == 1):
                family = "exponential"
            elif np.all((c2 > 0) & (c2 <= 1)):
                family = "gamma"
            elif np.all(c2 >= 1):
                family = "lognormal"
            else:
                raise ValueError(f"scv spans both sides of 1 (and 0 or 1 with others), got {scv!r}: pass "
                                 f"family= (one of {list(cls.MOMENT_FAMILIES)}) to use one law for them all")
        if family not in cls.MOMENT_FAMILIES:
            raise ValueError(f"family must be one of {sorted(cls.MOMENT_FAMILIES)}, got {family!r}")
        if family == "deterministic":
            if np.any(c2 != 0):
                raise ValueError(f"scv must be 0 for the deterministic family, got {scv!r}")
            return cls.deterministic(np.broadcast_to(m, check_broadcast(mean=m, scv=c2)))
        if family == "exponential":
            if np.any(c2 != 1):
                raise ValueError(f"scv must be 1 for the exponential family, got {scv!r}")
            return cls.exponential(np.broadcast_to(m, check_broadcast(mean=m, scv=c2)))
        if np.any(c2 <= 0):
            raise ValueError(f"scv must be > 0 for the {family} family, got {scv!r}")
        if family == "erlang":
            k = 1.0 / c2
            if np.any(np.abs(k - np.round(k)) > 1e-9 * k):
                raise ValueError(f"scv must be 1/k for an integer k for the erlang family, got {scv!r}")
            return cls.erlang(m, np.round(k))
        return getattr(cls, family)(m, c2)

    @classmethod
    def empirical(cls, samples: ArrayLike) -> "Service":
        """The empirical distribution of measured CPU times (seconds).

        ``samples`` is a one-dimensional array of non-negative, finite values
        with a positive mean.  Every sample has weight ``1/n``.
        """
        x = as_float_array(samples, "samples")
        if x.ndim != 1 or x.size == 0:
            raise ValueError(f"samples must be a non-empty one-dimensional array, got shape {x.shape}")
        bad = ~np.isfinite(x) | (x < 0)
        if bad.any():
            raise ValueError(f"samples must be non-negative and finite, got {x[bad][0]!r}")
        if not x.mean() > 0:
            raise ValueError("samples must have a positive mean, got all zeros")
        x = np.sort(x)
        return cls("empirical", {}, samples=x)

    @classmethod
    def from_scipy(cls, frozen: Any) -> "Service":
        """Wrap a frozen ``scipy.stats`` distribution on [0, inf).

        Moments come from ``frozen.moment``; there is no closed-form Laplace
        transform, so formulas that need one compute it numerically.  Array
        parameters of the frozen distribution are not broadcast against the
        queue formulas' inputs: use scalar parameters.
        """
        for attr in ("cdf", "sf", "ppf", "rvs", "moment", "support"):
            if not hasattr(frozen, attr):
                raise ValueError(f"frozen must be a frozen scipy.stats distribution, got {frozen!r}")
        low = np.asarray(frozen.support()[0], dtype=float)
        if np.any(low < 0):
            raise ValueError(f"frozen must have support on [0, inf), its support starts at {low!r}")
        mean = np.asarray(frozen.mean(), dtype=float)
        if not np.all(np.isfinite(mean) & (mean > 0)):
            raise ValueError(f"frozen must have a positive finite mean, got {mean!r}")
        return cls("scipy", {}, frozen=frozen)

    # ------------------------------------------------------------------ moments
    @property
    def shape(self) -> tuple[int, ...]:
        """Broadcast shape of the parameters (``()`` for scalars)."""
        if self.family == "scipy":
            return np.shape(self._frozen.mean())
        if self.family == "empirical":
            return ()
        return np.shape(self._params["mean"])

    @property
    def mean(self):
        """E[S], seconds."""
        return scalar_out(self.moment(1))

    @property
    def variance(self):
        """Var[S], seconds squared."""
        m1 = np.asarray(self.moment(1))
        return scalar_out(np.maximum(np.asarray(self.moment(2)) - m1**2, 0.0))

    @property
    def scv(self):
        """Squared coefficient of variation Var[S] / E[S]^2."""
        if "scv" in self._params:
            return scalar_out(self._params["scv"])
        fam = self.family
        if fam == "deterministic":
            return scalar_out(np.zeros_like(self._params["mean"]))
        if fam == "exponential":
            return scalar_out(np.ones_like(self._params["mean"]))
        if fam == "erlang":
            return scalar_out(1.0 / self._params["k"])
        return scalar_out(np.asarray(self.variance) / np.asarray(self.mean) ** 2)

    def moment(self, k: int):
        """Raw moment E[S^k] in seconds^k, for integer k >= 1."""
        if isinstance(k, (bool, np.bool_)) or not float(k).is_integer() or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        k = int(k)
        fam, p = self.family, self._params
        if k == 1 and "mean" in p:
            # The families are parametrised by their mean: return it exactly, so
            # rho = rate * mean is exactly 1 at capacity (not 0.9999999999999999).
            return scalar_out(np.array(p["mean"], dtype=float))
        if fam == "deterministic":
            return scalar_out(p["mean"] ** k)
        if fam == "exponential":
            return scalar_out(math.factorial(k) * p["mean"] ** k)
        if fam in ("erlang", "gamma"):
            shape = p["k"] if fam == "erlang" else 1.0 / p["scv"]
            scale = p["mean"] / shape
            # E[S^k] = scale^k Gamma(a + k) / Gamma(a), in logs to survive large a.
            return scalar_out(np.exp(k * np.log(scale) + special.gammaln(shape + k) - special.gammaln(shape)))
        if fam == "lognormal":
            sigma2 = np.log1p(p["scv"])
            mu = np.log(p["mean"]) - 0.5 * sigma2
            return scalar_out(np.exp(k * mu + 0.5 * k * k * sigma2))
        if fam == "hyperexponential":
            return scalar_out(math.factorial(k) * (p["p"] / p["rate1"] ** k + (1 - p["p"]) / p["rate2"] ** k))
        if fam == "empirical":
            return float(np.mean(self._samples**k))
        return scalar_out(np.asarray(self._frozen.moment(k), dtype=float))

    # ------------------------------------------------------------------ distribution functions
    def cdf(self, t: ArrayLike):
        """P(S <= t)."""
        t = as_float_array(t, "t")
        fam, p = self.family, self._params
        if fam == "deterministic":
            return scalar_out((t >= p["mean"]).astype(float))
        if fam == "hyperexponential":
            return scalar_out(-(p["p"] * np.expm1(-p["rate1"] * np.maximum(t, 0))
                          + (1 - p["p"]) * np.expm1(-p["rate2"] * np.maximum(t, 0))))
        if fam == "empirical":
            x = self._samples
            return scalar_out(np.searchsorted(x, t, side="right") / x.size)
        if fam in _CLOSED_FORM:
            return scalar_out(self._closed_form("cdf", t))
        return scalar_out(self._frozen.cdf(t))

    def sf(self, t: ArrayLike):
        """P(S > t), accurate in the far tail."""
        t = as_float_array(t, "t")
        fam, p = self.family, self._params
        if fam == "deterministic":
            return scalar_out((t < p["mean"]).astype(float))
        if fam == "hyperexponential":
            tt = np.maximum(t, 0)
            return scalar_out(p["p"] * np.exp(-p["rate1"] * tt) + (1 - p["p"]) * np.exp(-p["rate2"] * tt))
        if fam == "empirical":
            x = self._samples
            return scalar_out(1.0 - np.searchsorted(x, t, side="right") / x.size)
        if fam in _CLOSED_FORM:
            return scalar_out(self._closed_form("sf", t))
        return scalar_out(self._frozen.sf(t))

    def ppf(self, q: ArrayLike):
        """Quantile: the smallest t with P(S <= t) >= q, for q in (0, 1)."""
        q = check_quantile(q, "q")
        fam, p = self.family, self._params
        if fam == "deterministic":
            return scalar_out(np.broadcast_to(p["mean"], np.broadcast(p["mean"], q).shape).copy())
        if fam == "hyperexponential":
            return scalar_out(self._hyperexponential_ppf(q))
        if fam == "empirical":
            return scalar_out(np.quantile(self._samples, q, method="inverted_cdf"))
        if fam in _CLOSED_FORM:
            return scalar_out(self._closed_form("ppf", q))
        return scalar_out(self._frozen.ppf(q))

    def _closed_form(self, what: str, x: np.ndarray) -> np.ndarray:
        """cdf, sf or ppf of the exponential, Erlang, gamma and lognormal laws from
        ``scipy.special``, the same formulas ``scipy.stats`` evaluates (``gammainc``/``gammaincc``/
        ``gammaincinv``; ``ndtr``/``ndtri`` of ``log t``), without importing ``scipy.stats``
        (half a second: the first queue answer of a fresh process paid it)."""
        fam, p = self.family, self._params
        if fam == "lognormal":
            sigma = np.sqrt(np.log1p(p["scv"]))
            mu = np.log(p["mean"]) - 0.5 * sigma ** 2
            if what == "ppf":
                return np.exp(mu + sigma * special.ndtri(x))
            with np.errstate(divide="ignore", invalid="ignore"):
                z = (np.log(np.maximum(x, 0.0)) - mu) / sigma
            return special.ndtr(z) if what == "cdf" else special.ndtr(-z)
        shape = 1.0 if fam == "exponential" else (p["k"] if fam == "erlang" else 1.0 / p["scv"])
        scale = p["mean"] / shape
        if what == "ppf":
            return scale * special.gammaincinv(shape, x)
        u = np.maximum(x, 0.0) / scale
        return special.gammainc(shape, u) if what == "cdf" else special.gammaincc(shape, u)

    def _hyperexponential_ppf(self, q: np.ndarray) -> np.ndarray:
        # The sf lies between exp(-r_max t) and exp(-r_min t): bisect on
        # log t inside that bracket, 64 halvings reach double precision.
        p = self._params
        r1, r2 = np.broadcast_arrays(p["rate1"], p["rate2"])
        target = -np.log1p(-q)
        lo = np.log(target / np.maximum(r1, r2))
        hi = np.log(target / np.minimum(r1, r2))
        lo, hi = np.broadcast_arrays(lo, hi)
        lo, hi = lo.copy(), hi.copy()
        log_sf_target = np.log1p(-q)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            t = np.exp(mid)
            too_short = np.log(self.sf(t)) > log_sf_target
            lo = np.where(too_short, mid, lo)
            hi = np.where(too_short, hi, mid)
        return np.exp(0.5 * (lo + hi))

    def sample(self, n: int, rng: Any = None) -> np.ndarray:
        """``n`` independent draws, shape ``(n,) + self.shape``.

        ``rng`` is anything ``numpy.random.default_rng`` accepts (a seed or a
        Generator).
        """
        if isinstance(n, (bool, np.bool_)) or not float(n).is_integer() or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        n = int(n)
        rng = np.random.default_rng(rng)
        size = (n,) + self.shape
        fam, p = self.family, self._params
        if fam == "deterministic":
            return np.broadcast_to(p["mean"], size).copy()
        if fam == "exponential":
            return rng.exponential(1.0, size) * p["mean"]
        if fam in ("erlang", "gamma"):
            shape = p["k"] if fam == "erlang" else 1.0 / p["scv"]
            return rng.gamma(np.broadcast_to(shape, size), 1.0) * (p["mean"] / shape)
        if fam == "lognormal":
            sigma = np.sqrt(np.log1p(p["scv"]))
            return np.exp(np.log(p["mean"]) - 0.5 * sigma**2 + sigma * rng.standard_normal(size))
        if fam == "hyperexponential":
            first = rng.random(size) < p["p"]
            rate = np.where(first, p["rate1"], p["rate2"])
            return rng.exponential(1.0, size) / rate
        if fam == "empirical":
            return rng.choice(self._samples, size=size, replace=True)
        return np.asarray(self._frozen.rvs(size=size, random_state=rng), dtype=float)

    # ------------------------------------------------------------------ transforms
    @property
    def has_lst(self) -> bool:
        """True when :meth:`lst` has a closed form for this family."""
        return self.family in ("deterministic", "exponential", "erlang", "gamma",
                               "hyperexponential", "empirical")

    def lst(self, s: ArrayLike):
        """Laplace-Stieltjes transform E[exp(-s S)] for complex or real ``s``.

        Closed forms: deterministic ``exp(-s m)``; exponential
        ``1/(1 + s m)``; gamma and Erlang ``(1 + s theta)^(-a)``;
        hyperexponential ``sum p_i r_i / (r_i + s)``; empirical
        ``mean(exp(-s x_i))``.  Lognormal and wrapped scipy distributions have
        none and raise ``NotImplementedError``.

        ``s`` broadcasts against the parameters with numpy rules.
        """
        s = np.asarray(s)
        if not np.iscomplexobj(s):
            s = s.astype(float)
        fam, p = self.family, self._params
        if fam == "deterministic":
            return scalar_out(np.exp(-s * p["mean"]))
        if fam == "exponential":
            return scalar_out(1.0 / (1.0 + s * p["mean"]))
        if fam in ("erlang", "gamma"):
            shape = p["k"] if fam == "erlang" else 1.0 / p["scv"]
            scale = p["mean"] / shape
            return scalar_out(np.exp(-shape * _clog1p(s * scale)))
        if fam == "hyperexponential":
            r1, r2, q = p["rate1"], p["rate2"], p["p"]
            return scalar_out(q * r1 / (r1 + s) + (1 - q) * r2 / (r2 + s))
        if fam == "empirical":
            values, counts = np.unique(self._samples, return_counts=True)
            w = counts / counts.sum()
            return scalar_out(np.exp(-s[..., None] * values) @ w)
        raise NotImplementedError(
            f"the {self.family} family has no closed-form Laplace transform")

    # ------------------------------------------------------------------ helpers for formulas
    def _expand(self, ndim: int) -> "Service":
        """The same distribution with ``ndim`` trailing axes of length 1 on
        every parameter, so formulas can add an axis (quadrature nodes,
        time grids) without the parameters broadcasting against it."""
        if ndim == 0 or self.family in ("empirical", "scipy"):
            return self
        extra = (1,) * ndim
        params = {k: np.reshape(v, np.shape(v) + extra) for k, v in self._params.items()}
        ctor: dict[str, Callable[..., Service]] = {
            "deterministic": lambda: Service.deterministic(params["mean"]),
            "exponential": lambda: Service.exponential(params["mean"]),
            "erlang": lambda: Service.erlang(params["mean"], params["k"]),
            "gamma": lambda: Service.gamma(params["mean"], params["scv"]),
            "lognormal": lambda: Service.lognormal(params["mean"], params["scv"]),
            "hyperexponential": lambda: Service.hyperexponential(params["mean"], params["scv"]),
        }
        return ctor[self.family]()

    def __repr__(self) -> str:
        if self.family == "empirical":
            return f"Service.empirical(<{self._samples.size} samples, mean={self.mean:.6g}s>)"
        if self.family == "scipy":
            return f"Service.from_scipy({self._frozen.dist.name})"
        shown = {k: v for k, v in self._params.items() if k in ("mean", "scv", "k")}
        if self.family == "hyperexponential":
            shown = {"mean": shown["mean"], "scv": shown["scv"]}
        args = ", ".join(f"{k}={np.array2string(np.asarray(v), precision=6) if np.ndim(v) else f'{float(v):.6g}'}"
                         for k, v in shown.items())
        return f"Service.{self.family}({args})"


def as_service(service: Any, name: str = "service") -> Service:
    """A :class:`Service`, or a bare number (array) read as the mean of an
    exponential service time in seconds."""
    if isinstance(service, Service):
        return service
    if isinstance(service, (bool, np.bool_)):
        raise ValueError(f"{name} must be a Service or a mean service time in seconds, got {service!r}")
    try:
        arr = np.asarray(service, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a Service or a mean service time in seconds, got {service!r}") from None
    if np.isnan(arr).any() or np.any(arr <= 0) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a Service or a positive mean service time in seconds, got {service!r}")
    return Service.exponential(arr)
