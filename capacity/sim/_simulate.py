"""The public entry of the simulator: :func:`simulate` checks its arguments, draws the arrivals
and sizes, and hands them to the drivers."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._deprecation import renamed_parameters
from ..distributions import Service
from ._drivers import _run
from ._inputs import _draw_arrivals
from ._options import _options, _scalar_service
from ._storage import DEFAULT_MAX_MEMORY
from .result import SimulationResult


@renamed_parameters(duration="horizon")
def simulate(arrivals: Any, service: Service | float, discipline: str = "fcfs", servers: int = 1,
             processes: int = 1, dispatch: str = "round_robin", machines: int = 1,
             timeout: float | None = None, on_timeout: str = "continue", queue: str = "fifo",
             retries: int = 0, retry_backoff: float = 1.0, horizon: float | None = None,
             seed: Any = None, progress: Callable[[float, float], Any] | None = None, *,
             queue_delay_bound: float | None = None, retry_backoff_factor: float = 1.0,
             drain: bool = True, slices: int = 1, slice_delay: float | Service = 0.0,
             admission: str = "fifo", keep: str = "auto",
             max_memory: float | str | None = DEFAULT_MAX_MEMORY) -> SimulationResult:
    """Simulate a service exactly, request by request, in or out of overload.

    Parameters
    ----------
    arrivals : float, array_like or pandas.Series
        A Poisson arrival rate in requests/s (then ``horizon`` is required);
        or the arrival times in seconds (one-dimensional, non-decreasing,
        finite, >= 0); or a pandas Series of per-second rates (req/s) indexed
        by seconds ``0, 1, 2, ...`` or by a DatetimeIndex at 1 s frequency:
        Poisson arrivals at a rate that is constant within each second
        (``horizon`` defaults to the series length).
    service : Service or float
        CPU time per request in seconds: a :class:`~capacity.Service` with
        scalar parameters, or a bare number meaning an exponential with that
        mean.  A retry needs the same CPU time as its original request.
    discipline : {"fcfs", "ps", "rr"}
        Inside each worker process: first come first served, processor
        sharing where each of the ``n`` requests present is served at rate
        ``min(1, servers/n)``, or event-loop round robin: each request's CPU
        is ``slices`` equal slices through one FIFO run queue (see
        ``slices``).
    servers : int
        Cores per worker process (>= 1).  A Node.js process is one core.
    processes : int
        Worker processes per machine, each with its own queue (>= 1).
    dispatch : {"round_robin", "random", "least_connections"}
        How each arriving request (retries included) picks one of the
        ``machines * processes`` worker processes, numbered
        ``g = machine * processes + local``.  ``"round_robin"``: the k-th
        dispatched request (k = 0, 1, ...) goes to machine ``k mod machines``
        and there to process ``(k // machines) mod processes`` (a front
        balancer rotating over machines, each machine's cluster primary --
        Node.js's default on Linux -- rotating over its processes).
        ``"random"``: uniform over all processes.  ``"least_connections"``:
        the process with the fewest open connections, ties to the lowest
        ``g`` (nginx ``least_conn`` over all processes; nginx breaks ties by
        weighted round robin instead).  A connection is open from arrival
        until the completion or until the client gives up or gets an error,
        whichever comes first: the proxy closes its upstream connection at
        its timeout even when the server keeps computing.
    machines : int
        Machines, each running ``processes`` worker processes (>= 1).
    timeout : float, optional
        Client timeout in seconds (> 0), per attempt.  A request completed at
        or before ``arrival + timeout`` is ``"ok"``; otherwise its client
        gives up at exactly ``arrival + timeout``.
    on_timeout : {"continue", "drop", "deadline"}
        What the server does about it.  ``"continue"``: nothing, it finishes
        the request for nobody (Node.js: the proxy's 504 does not stop the
        handler); the outcome is ``"timed_out"`` with a completion time.
        ``"drop"``: the request leaves the server at ``arrival + timeout``,
        from the queue or from service, releasing its CPU (outcome
        ``"dropped"``).  ``"deadline"``: a FCFS server about to start a request
        at time ``f`` skips it (departure ``f``, outcome ``"dropped"``, never
        started) if ``f + service > arrival + timeout``; the server is assumed
        to know each request's CPU cost, so it never starts work that cannot
        finish in time and never wastes a core-second -- the best any
        deadline-aware server can do, and the "all of capacity" case of the
        overload analysis.  (The variant without known sizes, skipping only
        when ``f >= arrival + timeout``, wastes the work of the requests that
        start just before their deadline.)  A request skipped before its
        deadline returns an error to its client at once.  Processor sharing
        has no start to skip, so for PS ``"deadline"`` behaves as ``"drop"``.
        Ignored without a timeout.
    queue : {"fifo", "adaptive_lifo"}
        Queue order of a FCFS process.  ``"adaptive_lifo"``: when a core
        frees at time ``f``, it takes the oldest queued request if that one
        has waited at most ``queue_delay_bound``, else the newest (the queue
        is "congested": serving the newest gives it a chance to finish
        before its client gives up, while the old ones are lost anyway).
        With ``on_timeout`` ``"drop"``/``"deadline"``, queued requests whose
        deadline has passed (or that can no longer finish in time) are
        removed first, so only live requests decide the mode.  As in
        Maurer (2015), where adaptive LIFO switches on when the queue has not
        drained for a while, with a CoDel-like delay bound (Nichols and
        Jacobson 2012); here the trigger is the head-of-line delay, the
        quantity CoDel controls.  Not available for PS (no queue).
    retries : int
        After a failed attempt (timed out, or dropped/skipped by the server)
        the client retries up to ``retries`` times (>= 0); needs a timeout.
        Retry ``k`` (1, 2, ...) arrives ``retry_backoff *
        retry_backoff_factor ** (k - 1)`` seconds after the failure (the
        timeout instant, or an earlier error from a ``"deadline"`` skip),
        goes through the dispatcher again, and gets a new row
        (``attempt = k``, same ``request_id``, same CPU size), appended after
        the original requests.
    retry_backoff : float
        First back-off in seconds (>= 0).
    horizon : float, optional
        Length of the arrival window in seconds.  Required with a Poisson
        rate (the arrivals fall in ``[0, horizon]``); with explicit arrival
        times it must be at least the last arrival; with a rate series it
        defaults to the series length.  (Called ``duration`` before this
        release; the old keyword still works, with a ``DeprecationWarning``.)
    seed : None, int, or numpy.random.Generator
        Anything :func:`numpy.random.default_rng` accepts.  One generator
        draws the arrival times, then the sizes, then the random dispatch of
        the original requests, then (in blocks) that of the retries, so a
        fixed seed reproduces the run.
    progress : callable, optional
        ``progress(simulated_seconds, total_seconds)``, called about once a
        second of wall time (checked every 4096 events; the first call comes
        after the first 4096 events) and once at the end with
        ``(end, end)``.  If it returns ``False`` (exactly), the run stops
        there: requests that had not arrived yet are left out, requests still
        in the servers get outcome ``"in_flight"`` (or ``"timed_out"`` if
        their client's timeout had already expired), and ``.stopped`` is
        True.  Giving ``progress`` selects the global event engine (slower
        than the vectorised one-queue engines, same results; see
        ``benchmarks/bench_sim.py`` for the figures).
    queue_delay_bound : float, optional
        Keyword only.  The head-of-line wait (s) above which an adaptive-LIFO
        queue serves newest first; defaults to ``0.1 * timeout``.
    retry_backoff_factor : float
        Keyword only.  Multiplier of the back-off per further retry
        (1 = constant, 2 = exponential doubling); >= 1.
    drain : bool
        Keyword only.  True (default): after the arrival window the run
        continues until every request (and retry) has left the servers.
        False: the run ends at ``horizon`` and what is still in the servers
        is ``"in_flight"`` (or ``"timed_out"``).
    slices : int
        Keyword only, ``discipline="rr"``.  A request of CPU size ``x`` runs
        as ``slices`` slices of ``x / slices`` seconds (the code between two
        ``await`` points of a Node.js handler).  It joins the back of the
        process's FIFO run queue on arrival; a free core takes the request at
        the head and runs one slice; when the slice ends the request leaves
        (last slice) or, after ``slice_delay``, joins the back of the run
        queue again.  ``slices=1`` is FCFS (same table).  For large
        ``slices`` every request present gets one slice per cycle, i.e. CPU
        in proportion to its size: the limit is processor sharing only when
        all sizes are equal (deterministic service); otherwise it is a
        discriminatory processor sharing with weights proportional to the
        sizes, in which every request needs the same number of cycles.
    slice_delay : float or Service
        Keyword only, ``discipline="rr"``.  Non-CPU delay between two slices
        of a request (a zero-delay timer's ~1 ms, an I/O wait), seconds: a
        constant, or a :class:`~capacity.Service` drawn afresh for every gap.
        During the delay the request holds no core and is not in the run
        queue; other requests run.  Default 0.
    admission : {"fifo", "idle"}
        Keyword only, ``discipline="rr"``.  When an arriving request enters
        the run queue.  ``"fifo"`` (default): at once, behind everything
        queued -- a loop that reads its sockets between every two slices
        (Node.js handlers yielding with ``setImmediate``).  ``"idle"``: only
        when a free core finds the run queue empty; then every request
        waiting is admitted in arrival order.  Requests already in flight
        therefore go first, and a new request waits until the loop would
        otherwise idle -- while a request sleeps through its
        ``slice_delay`` and nothing else is runnable, or when the process
        empties.  Measured on Node.js 20 (libuv 1.46) with handlers that
        ``await`` a ``setTimeout(0)``: once two requests are in flight, each
        one's timer expires while the other's slice runs, and libuv re-runs
        the overdue timer handle without polling the sockets, so new
        connections are not read until the in-flight set drains to one
        (``validation/README.md``).  ``slices=1``: both rules are FCFS.
    keep : {"auto", "requests", "summary"}
        Keyword only.  What the result keeps.  ``"requests"``: the
        per-request table (:attr:`SimulationResult.requests`, 72 bytes a
        row: times in float64, integers in the smallest type that holds
        them).  ``"summary"``: no table; the statistics are computed in one
        pass at the end of the run and kept (``.keep == "summary"``;
        ``.requests`` then raises a ``ValueError`` saying so): the
        per-second table, utilisation and mean number exactly, the mean
        response exactly, quantiles from a log-binned histogram within
        ``capacity.sim.RELATIVE_RESOLUTION`` (0.05 %) of the exact empirical
        quantile, a ``warmup`` rounded up to a whole *segment* of arrival
        time (1 s, or ``ceil(end / segments)`` seconds for long runs, at most
        1024 segments), batch means over batches of whole segments in arrival
        order (with retries the table's batches are in row order instead, so
        the half-widths differ).  ``"auto"`` (default): the table if the run
        is estimated to fit in ``max_memory``, else the summary.
    max_memory : int, float, str or None
        Keyword only.  Ceiling on the memory of the run, in bytes (a number,
        or text with a unit: ``"1GB"``, ``"512MiB"``; a bare number is
        bytes); default 1 GB; None for no ceiling.  The estimate is
        ``rows x`` bytes per row measured in
        ``benchmarks/bench_sim_memory.py`` (engine arrays, then the table and
        its statistics' temporaries, or the summary pass), where ``rows``
        counts every possible retry (``n (1 + retries)``).  A run that would
        not fit even as a summary (or as a table with
        ``keep="requests"``) is refused with a ``ValueError`` naming
        ``max_memory``, before it starts.  The per-second table is not
        counted: it has one row (about 80 bytes) per second of ``end``.

    Returns
    -------
    SimulationResult
        ``.requests`` (one row per request, see :class:`SimulationResult`
        for the columns; not kept with ``keep="summary"``), ``.keep``, ``.per_second`` (arrivals, completions, goodput,
        timeouts, drops, in_flight, cpu_busy, latency_p50/p99/max),
        ``.discipline``, ``.servers``, ``.processes``, ``.machines``,
        ``.timeout``, ``.horizon``, ``.end``, ``.stopped``, and the methods
        :meth:`~SimulationResult.mean_response`,
        :meth:`~SimulationResult.response_quantile`,
        :meth:`~SimulationResult.confidence_interval` (batch means),
        :meth:`~SimulationResult.utilization`,
        :meth:`~SimulationResult.mean_number`.

    Notes
    -----
    Exact event-driven simulation, no time step.  Every request ends with
    exactly one outcome.

    * FCFS, one server: Lindley's recursion
      ``W_n = max(0, W_{n-1} + S_{n-1} - (A_n - A_{n-1}))``, solved in
      vectorised form as a running minimum of partial sums, restarted every
      1024 requests so that rounding does not grow with the run length
      (measured over 10^6 M/M/1 requests, mean service 1 s: at most
      6e-13 s from the plain loop at rho = 0.5 and 0.9, against 6e-10 s for
      one running sum over the whole run).
    * FCFS, ``c`` servers: requests start in queue order on the earliest
      free core (a heap), O(log c) per request.
    * PS, ``c`` servers: all requests present share the same rate
      ``r(n) = min(1, c/n)``, so a global virtual clock ``dV/dt = r(n)``
      measures everyone's attained service; a request arriving at virtual
      time ``V_a`` with size ``x`` leaves when ``V = V_a + x``.  A heap of
      those finish times makes each event O(log n); a drop at the timeout
      is a lazy deletion from it.  Simultaneous arrivals are handled
      exactly: 30 requests of 1 s arriving together on one core all leave
      at 30 s (FCFS: at 1, 2, ..., 30 s).
    * Round robin (``"rr"``): one loop over the slices (about ``slices``
      events per request); one core without delay follows the core's clock
      alone, otherwise heaps of slice ends and wake-ups.  At equal times
      slice ends come first, then wake-ups, then arrivals, then free cores
      pick from the run queue.  With ``on_timeout`` ``"drop"`` (and
      ``"deadline"``, which behaves as ``"drop"``: the finish time of a
      sliced request is not known when it starts) the request leaves at its
      deadline from the run queue, from a delay, or from a core (the slice
      is cut short).  Adaptive LIFO is not available (FCFS only).
      ``start`` is the start of the first slice.
    * Several processes: with round-robin or random dispatch and a server
      that ignores timeouts, each process is simulated on its own with the
      engines above (dispatch does not depend on the state).  Least
      connections, retries, or ``progress`` use one event loop over all
      processes with a heap of each process's next event, so the open
      connection counts are exact at every arrival.  At equal times,
      completions come before deadlines (``completion == arrival +
      timeout`` is ``"ok"``), and both before arrivals.

    The servers start empty, so early requests see less congestion than in
    steady state: discard a warm-up period when comparing with
    steady-state formulas.

    References
    ----------
    D. V. Lindley, "The theory of queues with a single server", Proc.
    Cambridge Philos. Soc. 48 (1952) 277-289.

    L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*,
    Wiley (1976), ch. 4 (processor sharing).

    M. Harchol-Balter, *Performance Modeling and Design of Computer
    Systems*, Cambridge University Press (2013), part VII (scheduling,
    processor sharing).

    B. Maurer, "Fail at scale", ACM Queue 13(8) (2015), section
    "Adaptive LIFO" and "Controlled delay".

    K. Nichols and V. Jacobson, "Controlling queue delay", ACM Queue 10(5)
    (2012).

    L. Kleinrock, *Queueing Systems, Volume 2* (1976), sec. 4.4 (round
    robin with a finite quantum and its processor-sharing limit).

    Examples
    --------
    Two 2-second requests in two slices each (event-loop round robin):

    >>> from capacity import Service
    >>> from capacity.sim import simulate
    >>> rr = simulate([0.0, 0.5], Service.deterministic(2.0), discipline="rr", slices=2)
    >>> rr.requests["completion"].tolist()
    [3.0, 4.0]

    Thirty 1-second requests arriving together on one core:

    >>> from capacity import Service
    >>> from capacity.sim import simulate
    >>> ps = simulate([0.0] * 30, Service.deterministic(1.0), discipline="ps")
    >>> sorted(set(ps.requests["completion"]))
    [30.0]
    >>> fcfs = simulate([0.0] * 30, Service.deterministic(1.0))
    >>> fcfs.requests["completion"].tolist()[:3]
    [1.0, 2.0, 3.0]

    With a 10 s client timeout, PS answers nobody in time, FCFS ten:

    >>> ps = simulate([0.0] * 30, Service.deterministic(1.0), discipline="ps", timeout=10)
    >>> ps.requests["outcome"].value_counts()["timed_out"]
    np.int64(30)
    >>> fcfs = simulate([0.0] * 30, Service.deterministic(1.0), timeout=10, on_timeout="drop")
    >>> fcfs.requests["outcome"].value_counts().to_dict()
    {'dropped': 20, 'ok': 10, 'timed_out': 0, 'in_flight': 0}

    An M/M/1 queue at utilisation 0.5 (theory: mean response 2 s):

    >>> run = simulate(0.5, 1.0, horizon=200_000, seed=1)
    >>> ci = run.confidence_interval(warmup=100)
    >>> bool(ci.low < 2.0 < ci.high), round(run.utilization(), 2)
    (True, 0.5)
    """
    options = _options(discipline=discipline, servers=servers, processes=processes, machines=machines,
                       dispatch=dispatch, timeout=timeout, on_timeout=on_timeout, queue=queue,
                       queue_delay_bound=queue_delay_bound, retries=retries, retry_backoff=retry_backoff,
                       retry_backoff_factor=retry_backoff_factor, drain=drain, progress=progress,
                       slices=slices, slice_delay=slice_delay, admission=admission, keep=keep,
                       max_memory=max_memory)
    svc = _scalar_service(service, "service")
    rng = np.random.default_rng(seed)
    times, horizon, origin = _draw_arrivals(arrivals, horizon, options.drain, rng)
    sizes = np.asarray(svc.sample(times.size, rng), dtype=float).reshape(-1)
    return _run(times, sizes, options.discipline, options.servers, horizon, options, rng, origin)
