"""What a simulation returns: :class:`SimulationResult` and its :class:`ConfidenceInterval`.

The result holds the per-request table of the run and computes everything else from it: the
per-second summary, the response-time statistics, batch-means confidence intervals, the
measured utilisation and the time-average number in the servers.

References
----------
A. M. Law, *Simulation Modeling and Analysis*, 5th ed., McGraw-Hill (2015), sec. 9.5.3 (the
method of batch means).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, ClassVar, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from .._checks import check_choice, check_count, check_nonnegative, check_quantile
from .._deprecation import deprecated_property
from .._result import Result, _short, jsonable
from ..units import format_time
from ._summary import OUTCOMES, _integral, _rr_busy_path, _RunSummary

__all__ = ["OUTCOMES", "ConfidenceInterval", "SimulationResult"]



class ConfidenceInterval(NamedTuple):
    """A point estimate with a two-sided confidence interval (seconds).

    A named tuple (``estimate, half_width, low, high, level, batches``) with the
    result protocol's ``str``, ``to_dict()`` and ``to_frame()``.
    """

    estimate: float
    half_width: float
    low: float
    high: float
    level: float
    batches: int

    def __str__(self) -> str:
        return (f"{format_time(self.estimate)} +/- {format_time(self.half_width)} "
                f"({100 * self.level:g} % confidence, batch means over {self.batches} batches)")

    def to_dict(self) -> dict:
        """The six fields, JSON-ready."""
        return jsonable(self._asdict())

    def to_frame(self) -> pd.DataFrame:
        """One row with the six fields."""
        return pd.DataFrame([self._asdict()])


def _busy_path(begin: np.ndarray, finish: np.ndarray, process: np.ndarray,
               cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Total busy cores as a step function: event times ``T`` (sorted) and the
    number of busy cores ``B`` just after each.

    Each request occupies one unit of ``[begin, finish)`` in its process, and
    a process keeps ``min(units, cap)`` cores busy: for FCFS the units are
    the requests in service (never more than ``cap``); for PS they are the
    requests present, sharing ``min(n, c)`` busy cores.
    """
    n = begin.size
    times = np.concatenate([begin, finish])
    steps = np.concatenate([np.ones(n), -np.ones(n)])
    proc = np.concatenate([process, process])
    # Within a process: by time, arrivals before departures at equal times
    # (keeps the count non-negative; zero-length segments carry no area).
    order = np.lexsort((-steps, times, proc))
    count = np.cumsum(steps[order])  # each process's intervals sum to 0, so this restarts per process
    capped = np.minimum(count, cap)
    delta = np.diff(capped, prepend=0.0)
    t = times[order]
    by_time = np.argsort(t, kind="stable")
    return t[by_time], np.cumsum(delta[by_time])


@dataclass(frozen=True, repr=False)
class SimulationResult(Result):
    """The outcome of :func:`simulate`.

    It follows the result protocol of every capacity result: a one-line
    ``repr`` (the configuration and the size of the table, never the table),
    ``str`` (the run in words: requests, outcomes, response times,
    utilisation), :meth:`to_frame` (the per-request table, a copy) and
    :meth:`to_dict` (configuration and summary statistics, JSON-ready, never
    the per-request rows).

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request (72 bytes a row): the original requests in arrival order, then
        the retries in the order they arrived.  Columns (times in seconds
        from the start of the run):

        ``arrival``
            When the request reached the dispatcher.
        ``start``
            FCFS and round robin: when it first got a core (NaN if it never
            did).  PS: NaN
            (service starts at arrival, at a shared rate; there is no
            waiting phase).
        ``completion``
            When the server finished it (NaN if it never did: dropped, or
            still running at the end of the run).
        ``response``
            ``completion - arrival`` (NaN without a completion).
        ``service``
            The CPU time the request needs (its size).
        ``outcome``
            Categorical, one of :data:`OUTCOMES`: ``"ok"`` (completed at or
            before ``arrival + timeout``), ``"timed_out"`` (the client gave up
            at ``arrival + timeout``; the server may still have completed it
            later, or still be running it), ``"dropped"`` (the server
            abandoned it: ``on_timeout="drop"`` or ``"deadline"``),
            ``"in_flight"`` (still in the server when the run ended and its
            client still waiting).
        ``attempt``
            0 for an original request, ``k`` for its ``k``-th retry.
        ``request_id``
            Row number of the original request this one belongs to.
        ``process``
            Global worker-process index, ``machine * processes + local``.
        ``machine``
            Machine index.
        ``departure``
            When it left the server: the completion, or the time it was
            dropped or skipped (NaN if still in the server at the end).
        ``cpu``
            CPU time it actually received (``service`` when completed; less
            when dropped or still running; 0 if never started).
        ``deadline``
            ``arrival + timeout`` (``inf`` without a timeout).
    discipline : str
        ``"fcfs"``, ``"ps"`` or ``"rr"``.
    servers : int
        Cores per worker process.
    horizon : float
        The observation window ``[0, horizon]`` in seconds: the arrival
        window of a Poisson run, the ``horizon`` you gave, or else the last
        completion time.  :meth:`utilization` and :meth:`mean_number`
        average over it.  (``duration`` before this release: the old name
        still reads it, with a ``DeprecationWarning``.)
    processes, machines : int
        The topology: ``machines x processes`` worker processes.
    timeout : float or None
        The client timeout (s).
    end : float
        When the run ended (s): after the last departure when draining, at
        ``horizon`` with ``drain=False``, or where ``progress`` stopped it.
    stopped : bool
        True if ``progress`` stopped the run early.
    origin : pandas.Timestamp or None
        The wall-clock time of second 0 when the arrivals were a rate
        series with a DatetimeIndex (``per_second`` stays indexed by seconds
        from 0; add ``origin`` to get timestamps).
    slices : int
        Round robin: slices per request (1 otherwise).
    slice_delay : float or Service
        Round robin: the delay between slices (s).
    core_busy : tuple of ndarray or None
        Round robin: the busy-core record ``(times, steps, process)`` (+1
        when a core starts working, -1 when it goes idle, NaN time: still
        busy at the end) behind :meth:`utilization` and ``cpu_busy``.
    admission : str
        Round robin: ``"fifo"`` or ``"idle"`` (see :func:`simulate`).
    keep : str
        ``"requests"`` or ``"summary"``: whether the table was kept or only the
        statistics (:func:`simulate`'s ``keep`` and ``max_memory``).  A summary
        answers every method and ``per_second``; ``requests`` and
        :meth:`to_frame` raise a ``ValueError`` saying why there is no table.
    max_memory : float
        The run's memory ceiling, bytes (``inf``: none).

    The integer columns of ``requests`` use the smallest type that holds
    them (``int8`` for a handful of processes): cast before arithmetic that
    could overflow it.
    """

    _table: pd.DataFrame | None
    discipline: str
    servers: int
    horizon: float
    processes: int = 1
    machines: int = 1
    timeout: float | None = None
    end: float = math.nan
    stopped: bool = False
    origin: Any = None
    slices: int = 1
    slice_delay: Any = 0.0
    core_busy: Any = None
    admission: str = "fifo"
    _digest: _RunSummary | None = None
    max_memory: float = math.inf

    _headline: ClassVar[tuple[str, ...]] = ("discipline", "servers", "processes", "machines", "timeout",
                                            "horizon", "requests")
    duration = deprecated_property("horizon")

    # ------------------------------------------------------------------ storage
    @property
    def keep(self) -> str:
        """``"requests"`` (the per-request table is kept) or ``"summary"`` (only the statistics
        are: see :func:`simulate`'s ``keep``)."""
        return "requests" if self._digest is None else "summary"

    @property
    def requests(self) -> pd.DataFrame:
        """The per-request table (see the class docstring); a ``keep="summary"`` result has none."""
        if self._digest is not None:
            raise ValueError(
                f"requests: this result keeps a summary, not the per-request table: "
                f"{self._digest.n_requests:,} rows would not fit in max_memory="
                f"{self.max_memory:.4g} bytes (or keep='summary' was asked for); simulate with "
                f"keep='requests' and a larger max_memory to keep the rows, or use per_second, "
                f"mean_response, response_quantile and confidence_interval, which a summary answers")
        return self._table

    def __repr__(self) -> str:
        if self._digest is None:
            return super().__repr__()
        head = ", ".join(f"{n}={_short(getattr(self, n))}" for n in self._headline if n != "requests")
        return f"{type(self).__name__}({head}, requests=<summary of {self._digest.n_requests} rows>)"

    # ------------------------------------------------------------------ helpers
    @property
    def _end(self) -> float:
        if not math.isnan(self.end):
            return self.end
        done = self.requests["departure"].to_numpy()
        return float(max(self.horizon, np.nanmax(done))) if done.size and not np.isnan(done).all() \
            else self.horizon

    def _values(self, metric: str, warmup: float) -> np.ndarray:
        warmup = float(check_nonnegative(warmup, "warmup"))
        if check_choice(metric, "metric", ("response", "wait")) == "response":
            col = self.requests["response"].to_numpy()
        else:
            if self.discipline != "fcfs":
                raise ValueError(f"metric 'wait' needs a FCFS run (a start of service), "
                                 f"this run is {self.discipline!r}")
            col = (self.requests["start"] - self.requests["arrival"]).to_numpy()
        keep = (self.requests["arrival"].to_numpy() >= warmup) & ~np.isnan(col)
        return col[keep]

    def _number_path(self) -> tuple[np.ndarray, np.ndarray]:
        """Event times and the number in the server just after each (a step path)."""
        arr = self.requests["arrival"].to_numpy()
        done = self.requests["departure"].to_numpy()
        done = done[~np.isnan(done)]
        times = np.concatenate([arr, done])
        steps = np.concatenate([np.ones(arr.size), -np.ones(done.size)])
        order = np.argsort(times, kind="stable")
        return times[order], np.cumsum(steps[order])

    def _time_average(self, func: Callable[[np.ndarray], np.ndarray]) -> float:
        """(1/T) * integral over [0, T] of func(N(t)) dt, T = horizon."""
        horizon = self.horizon
        if not horizon > 0:
            return math.nan
        times, number = self._number_path()
        ends = np.append(times[1:], horizon)
        lengths = np.clip(np.minimum(ends, horizon) - np.minimum(times, horizon), 0.0, None)
        return float(np.sum(func(number) * lengths) / horizon)

    def _busy(self) -> tuple[np.ndarray, np.ndarray]:
        """Busy cores of the whole cluster as a step function (see :func:`_busy_path`)."""
        req = self.requests
        end = self._end
        finish = req["departure"].to_numpy()
        finish = np.where(np.isnan(finish), end, finish)
        if self.discipline == "rr":
            return _rr_busy_path(self.core_busy, end)  # recorded by the engine
        if self.discipline == "fcfs":
            begin = req["start"].to_numpy()
            started = ~np.isnan(begin)
            begin, finish, proc = begin[started], finish[started], req["process"].to_numpy()[started]
        else:
            begin, proc = req["arrival"].to_numpy(), req["process"].to_numpy()
        return _busy_path(begin, finish, proc, self.servers)

    def _stream(self, metric: str) -> Any:
        """The summary's per-segment statistics of ``metric`` (summary mode)."""
        if check_choice(metric, "metric", ("response", "wait")) == "wait":
            if self.discipline != "fcfs":
                raise ValueError(f"metric 'wait' needs a FCFS run (a start of service), "
                                 f"this run is {self.discipline!r}")
            return self._digest.wait
        return self._digest.response

    @cached_property
    def per_second(self) -> pd.DataFrame:
        """Per-second summary of the run (computed on first access).

        One row per whole second ``k`` (index ``second``), covering
        ``[k, k + 1)`` for ``k = 0 .. ceil(end) - 1``, so the drain after the
        arrival window is included (slice ``.loc[:horizon - 1]`` for the
        window alone).  Events at exactly ``end`` (an integer) fall in the
        last row.  Columns:

        ``arrivals``
            Requests arriving (retries included).
        ``completions``
            Requests the server completed (late ones included).
        ``goodput``
            Completions with outcome ``"ok"`` (at or before the timeout).
        ``timeouts``
            Client-side failures: ``"timed_out"`` requests counted at
            ``arrival + timeout``, ``"dropped"`` ones at
            ``min(departure, arrival + timeout)``.
        ``drops``
            Requests the server dropped or skipped, at their departure.
        ``in_flight``
            Requests in the servers (queued or running, abandoned ones
            included) at the end of the second, ``min(k + 1, end)``.
        ``cpu_busy``
            Fraction of the cluster's core-seconds busy during the second:
            ``integral over [k, k+1) of busy cores / (cores per process x
            processes)``, exact from the service intervals (FCFS) or from
            ``min(n, c)`` per process with ``n`` requests present (PS).
        ``latency_p50``, ``latency_p99``, ``latency_max``
            Response time (s) of the requests completing in that second
            (NaN when none; linear-interpolation quantiles).
        """
        if self._digest is not None:
            return self._digest.per_second
        req = self.requests
        end = self._end
        n_rows = max(int(math.ceil(end)), 1)

        def bins(t: np.ndarray) -> np.ndarray:
            return np.minimum(np.floor(t).astype(np.int64), n_rows - 1)

        def count(t: np.ndarray) -> np.ndarray:
            t = t[~np.isnan(t)]
            return np.bincount(bins(t), minlength=n_rows)[:n_rows]

        arrival = req["arrival"].to_numpy()
        completion = req["completion"].to_numpy()
        departure = req["departure"].to_numpy()
        deadline = req["deadline"].to_numpy()
        code = req["outcome"].cat.codes.to_numpy()
        ok = code == 0
        timed_out = code == 1
        dropped = code == 2
        fail_time = np.where(timed_out, deadline, np.where(dropped, np.fmin(deadline, departure), np.nan))
        ends = np.minimum(np.arange(1, n_rows + 1, dtype=float), end)
        gone = np.sort(departure[~np.isnan(departure)])
        in_flight = (np.searchsorted(np.sort(arrival), ends, side="right")
                     - np.searchsorted(gone, ends, side="right"))
        T, B = self._busy()
        edges = np.arange(n_rows + 1, dtype=float)
        area = np.diff(_integral(T, B, edges))
        cores = self.servers * self.processes * self.machines
        done = ~np.isnan(completion)
        latency = pd.Series(completion[done] - arrival[done], index=bins(completion[done]))
        groups = latency.groupby(level=0)
        index = pd.RangeIndex(n_rows, name="second")
        table = pd.DataFrame({
            "arrivals": count(arrival),
            "completions": count(completion),
            "goodput": count(np.where(ok, completion, np.nan)),
            "timeouts": count(fail_time),
            "drops": count(np.where(dropped, departure, np.nan)),
            "in_flight": in_flight,
            "cpu_busy": area / cores,
        }, index=index)
        table["latency_p50"] = groups.quantile(0.5).reindex(index).to_numpy()
        table["latency_p99"] = groups.quantile(0.99).reindex(index).to_numpy()
        table["latency_max"] = groups.max().reindex(index).to_numpy()
        return table

    # ------------------------------------------------------------------ statistics
    def mean_response(self, warmup: float = 0.0) -> float:
        """Mean response time (s) of the completed requests arriving at or after ``warmup`` (s).

        A ``keep="summary"`` result applies ``warmup`` rounded up to a whole segment (see
        :func:`simulate`); the mean itself is exact."""
        if self._digest is not None:
            warmup = float(check_nonnegative(warmup, "warmup"))
            return self._digest.response.mean(self._digest.first_segment(warmup))
        x = self._values("response", warmup)
        return float(x.mean()) if x.size else math.nan

    def response_quantile(self, q: Any, warmup: float = 0.0) -> Any:
        """Empirical ``q``-quantile of the response time (s) of the completed
        requests arriving at or after ``warmup``; ``q`` may be an array.

        A ``keep="summary"`` result reads it from its histogram: within
        ``capacity.sim.RELATIVE_RESOLUTION`` (0.05 %) of the exact quantile, ``warmup``
        rounded up to a whole segment."""
        q = check_quantile(q, "q")
        if self._digest is not None:
            warmup = float(check_nonnegative(warmup, "warmup"))
            out = self._digest.response.quantile(q.reshape(-1), self._digest.first_segment(warmup))
            return float(out[0]) if q.ndim == 0 else out.reshape(q.shape)
        x = self._values("response", warmup)
        if x.size == 0:
            return math.nan if q.ndim == 0 else np.full(q.shape, np.nan)
        out = np.quantile(x, q)
        return float(out) if np.ndim(out) == 0 else out

    def utilization(self) -> float:
        """Measured busy fraction of all the cores over ``[0, horizon]``.

        Exact from the busy-core step function of :attr:`per_second`
        (``min(n, c)`` busy cores in a PS process with ``n`` requests; the
        requests in service in a FCFS process); with one process this is
        ``(1/(c T)) * integral of min(N(t), c) dt``.
        """
        horizon = self.horizon
        if not horizon > 0:
            return math.nan
        if self._digest is not None:
            return self._digest.busy_area / (horizon * self.servers * self.processes * self.machines)
        T, B = self._busy()
        busy = float(_integral(T, B, np.array([horizon]))[0])
        return busy / (horizon * self.servers * self.processes * self.machines)

    def mean_number(self) -> float:
        """Time-average number of requests in the servers over ``[0, horizon]``."""
        if self._digest is not None:
            return self._digest.number_area / self.horizon if self.horizon > 0 else math.nan
        return self._time_average(lambda n: n)

    def confidence_interval(self, stat: str | float = "mean", level: float = 0.99, batches: int = 30,
                            warmup: float = 0.0, metric: str = "response") -> ConfidenceInterval:
        """Confidence interval for the mean or a quantile, by batch means.

        Parameters
        ----------
        stat : "mean" or float
            ``"mean"``, or a quantile level in (0, 1) such as ``0.99``.
        level : float
            Confidence level in (0, 1).
        batches : int
            Number of batches (>= 2); 20 to 30 is the usual advice.
        warmup : float
            Requests arriving before ``warmup`` seconds are discarded
            (initial transient).
        metric : "response" or "wait"
            Response time, or waiting time before service (FCFS only).

        Returns
        -------
        ConfidenceInterval
            ``estimate`` (the statistic over all kept requests),
            ``half_width``, ``low``, ``high``, ``level``, ``batches``.

        Notes
        -----
        Successive response times are strongly correlated, so the iid
        standard error is far too small.  The kept requests are cut, in
        arrival order, into ``batches`` contiguous batches of (nearly) equal
        size; the statistic of each batch is treated as an independent
        normal sample, giving the half-width
        ``t_{b-1, (1+level)/2} * sd(batch stats) / sqrt(b)``.  The interval
        is centred on the statistic of all kept requests (sectioning), which
        for quantiles has less bias than the mean of batch quantiles.  The
        batches must be long compared with the busy-period correlation time
        for the interval to be honest: at high load use long runs.

        References
        ----------
        A. M. Law, *Simulation Modeling and Analysis*, 5th ed. (2015),
        sec. 9.5.3; S. Asmussen and P. W. Glynn, *Stochastic Simulation*,
        Springer (2007), ch. III (sectioning).
        """
        level_arr = check_quantile(level, "level")
        if level_arr.ndim:
            raise ValueError(f"level must be a single number, got {level!r}")
        level = float(level_arr)
        batches = check_count(batches, "batches", 2)
        if self._digest is not None:
            return self._summary_interval(stat, level, batches, warmup, metric)
        x = self._values(metric, warmup)
        if x.size < 2 * batches:
            raise ValueError(f"batches must leave at least 2 requests per batch: {x.size} requests "
                             f"after warmup, batches={batches!r}")
        if isinstance(stat, str):
            if stat != "mean":
                raise ValueError(f"stat must be 'mean' or a quantile level in (0, 1), got {stat!r}")
            func: Callable[[np.ndarray], float] = lambda y: float(np.mean(y))  # noqa: E731
        else:
            q = float(check_quantile(stat, "stat"))
            func = lambda y: float(np.quantile(y, q))  # noqa: E731
        per_batch = np.array([func(chunk) for chunk in np.array_split(x, batches)])
        estimate = func(x)
        half = float(stats.t.ppf(0.5 + 0.5 * level, batches - 1) * per_batch.std(ddof=1) / math.sqrt(batches))
        return ConfidenceInterval(estimate, half, estimate - half, estimate + half, level, batches)

    def _summary_interval(self, stat: str | float, level: float, batches: int, warmup: float,
                          metric: str) -> ConfidenceInterval:
        """:meth:`confidence_interval` of a ``keep="summary"`` result: batches of whole
        segments, quantiles from the histogram."""
        warmup = float(check_nonnegative(warmup, "warmup"))
        stream = self._stream(metric)
        first = self._digest.first_segment(warmup)
        n = stream.n(first)
        runs = stream.batches(first, batches) if n >= 2 * batches else []
        if not runs:
            raise ValueError(f"batches must leave at least 2 requests in each batch of whole "
                             f"{self._digest.segment:g}-second segments (keep='summary'): {n} requests "
                             f"after warmup, batches={batches!r}")
        if isinstance(stat, str):
            if stat != "mean":
                raise ValueError(f"stat must be 'mean' or a quantile level in (0, 1), got {stat!r}")
            per_batch = np.array([stream.mean(a, b) for a, b in runs])
            estimate = stream.mean(first)
        else:
            q = check_quantile(stat, "stat").reshape(1)
            per_batch = np.array([stream.quantile(q, a, b)[0] for a, b in runs])
            estimate = float(stream.quantile(q, first)[0])
        half = float(stats.t.ppf(0.5 + 0.5 * level, batches - 1) * per_batch.std(ddof=1) / math.sqrt(batches))
        return ConfidenceInterval(estimate, half, estimate - half, estimate + half, level, batches)

    # ------------------------------------------------------------------ the result protocol
    def to_frame(self) -> pd.DataFrame:
        """The per-request table (:attr:`requests`), a copy."""
        return self.requests.copy()

    def _summary(self) -> dict:
        """Counts and statistics of the whole run (no warm-up left out)."""
        levels = _SUMMARY_QUANTILES
        if self._digest is not None:
            d = self._digest
            quantiles = dict(zip(levels, d.response.quantile(np.array(levels), 0).tolist()))
            return {"n_requests": d.n_requests, "n_retries": d.n_retries, "outcomes": dict(d.outcomes),
                    "mean_response": d.response.mean(0), "response_quantile": quantiles,
                    "utilization": self.utilization(), "mean_number": self.mean_number()}
        req = self.requests
        outcomes = {name: int(count) for name, count in req["outcome"].value_counts(sort=False).items()}
        done = req["response"].to_numpy()
        done = done[~np.isnan(done)]
        quantiles = dict(zip(levels, np.quantile(done, levels).tolist())) if done.size \
            else dict.fromkeys(levels, math.nan)
        return {"n_requests": len(req), "n_retries": int((req["attempt"].to_numpy() > 0).sum()),
                "outcomes": outcomes, "mean_response": float(done.mean()) if done.size else math.nan,
                "response_quantile": quantiles, "utilization": self.utilization(),
                "mean_number": self.mean_number()}

    def to_dict(self) -> dict:
        """Configuration and summary statistics, JSON-ready (never the per-request rows).

        Keys: the configuration (``discipline``, ``servers``, ``processes``,
        ``machines``, ``timeout``, ``horizon``, ``end``, ``stopped``,
        ``origin`` as ISO text, ``slices``, ``slice_delay``, ``admission``),
        then ``n_requests`` (rows, retries included), ``n_retries``,
        ``outcomes`` (rows per outcome), ``mean_response``,
        ``response_quantile`` (p50, p90, p99, p99.9 of the completed
        requests, s), ``utilization`` and ``mean_number`` (over
        ``[0, horizon]``).
        """
        config = {name: getattr(self, name) for name in ("discipline", "servers", "processes", "machines",
                                                          "timeout", "horizon", "end", "stopped", "slices",
                                                          "slice_delay", "admission")}
        config["origin"] = None if self.origin is None else self.origin.isoformat()
        return jsonable({**config, **self._summary()})

    def __str__(self) -> str:
        s = self._summary()
        words = {"ok": "ok", "timed_out": "timed out", "dropped": "dropped", "in_flight": "still in flight"}
        outcomes = ", ".join(f"{n:,} {words[k]}" for k, n in s["outcomes"].items() if n) or "none"
        retries = f" (of which {s['n_retries']:,} retries)" if s["n_retries"] else ""
        if math.isnan(s["mean_response"]):
            response = "No request completed"
        else:
            response = (f"Mean response {format_time(s['mean_response'])}, "
                        f"p99 {format_time(s['response_quantile'][0.99])}")
        ended = f"; progress stopped it at {self.end:.6g} s" if self.stopped else ""
        return (f"Simulated {s['n_requests']:,} requests{retries} over a horizon of {self.horizon:.6g} s "
                f"({self._setup()}{ended}).  Outcomes: {outcomes}.  {response}; the cores were "
                f"{100 * s['utilization']:.1f} % busy over the horizon.")

    def _setup(self) -> str:
        """The configuration in words."""
        names = {"fcfs": "FCFS", "ps": "processor sharing", "rr": "event-loop round robin"}
        text = names[self.discipline]
        if self.discipline == "rr":
            text += f" over {self.slices} slices, {self.admission} admission"
        text += (f", {self.servers} core{'s' * (self.servers != 1)} per process, "
                 f"{self.processes} process{'es' * (self.processes != 1)} "
                 f"on {self.machines} machine{'s' * (self.machines != 1)}")
        timeout = "no client timeout" if self.timeout is None else \
            f"client timeout {format_time(self.timeout)}"
        return f"{text}, {timeout}"


#: The response-time quantiles of :meth:`SimulationResult.to_dict` and ``str``.
_SUMMARY_QUANTILES = (0.5, 0.9, 0.99, 0.999)
