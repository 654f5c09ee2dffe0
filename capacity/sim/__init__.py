"""An exact discrete-event simulator of a backend service, in and out of overload.

:func:`simulate` feeds a stream of requests (Poisson at a rate, Poisson at a
per-second rate series, or arrival times you give) with CPU sizes drawn from
a :class:`~capacity.Service` through one or more worker processes and
returns one row per request (:attr:`SimulationResult.requests`) and a
per-second summary (:attr:`SimulationResult.per_second`).  There is no time
step and no approximation: every start, completion, timeout and drop is
computed exactly (up to floating-point rounding) from the arrival times and
sizes.

Disciplines (inside one worker process)
----------------------------------------
``"fcfs"``
    First come, first served with ``servers`` identical cores and one shared
    queue (M/G/c).  One core: the vectorised Lindley recursion.  Several
    cores: a heap of the times the cores become free.
``"ps"``
    Processor sharing (M/G/c-PS): with ``n`` requests in the process each one
    is served at rate ``min(1, c/n)`` -- the CPU is shared equally, and a
    request can use at most one core at a time, which is how a
    single-threaded request handler behaves on a ``c``-core machine (and how
    a Node.js process interleaves the requests it has accepted).
``"rr"``
    Event-loop round robin: each request is ``slices`` equal slices of CPU
    through one FIFO run queue, with an optional non-CPU ``slice_delay``
    between slices -- how a Node.js process really schedules handlers that
    ``await``.  ``slices=1`` is FCFS.  ``admission`` says when a new request
    enters the run queue: on arrival (``"fifo"``), or only when the run
    queue is empty (``"idle"``: requests already in flight go first, as in
    Node.js 20 when handlers yield with ``setTimeout``; see :func:`simulate`).

Topology, timeouts, retries
---------------------------
``machines`` x ``processes`` worker processes, each with its own queue and
``servers`` cores, behind one dispatcher (round robin, uniform random or
least connections); a client timeout with three server behaviours
(``on_timeout``: keep computing, drop at the timeout, skip at start what can
no longer finish in time); adaptive LIFO for FCFS queues; client retries
with back-off.  See :func:`simulate` for the exact rules.

Engines
-------
Three exact engines give the same answer where they overlap (tested):

1. the vectorised one-queue engines (``_engines``: Lindley for one FCFS
   core, a core heap for several, a virtual-time heap for PS, round robin
   over slices), run once per process when dispatch does not depend on the
   state (round robin, random) and the server never reacts to a timeout;
2. per-process event objects (``_processes``: FCFS, PS and round-robin
   processes writing into one book of per-request records) run one process
   at a time, when the server drops or skips requests or uses adaptive LIFO
   but dispatch is still state-free and nobody retries;
3. a global event loop over all processes (least-connections dispatch needs
   every process's live connection count at each arrival; retries are new
   arrivals created by timeouts), also used whenever ``progress`` is given
   because it advances simulated time monotonically and can stop anywhere.

Layout
------
``_simulate``
    :func:`simulate`: checks the arguments, draws arrivals and sizes.
``_inputs``
    The arrival process: a Poisson rate, a per-second rate series, given times.
``_options``
    The choices (:data:`DISPATCH`, :data:`ON_TIMEOUT`, :data:`QUEUES`) and the
    validated options the drivers read.
``_drivers``
    Picks engine 1, 2 or 3 and assembles the per-request table.
``_storage``, ``_summary``
    What a run keeps under its ``max_memory`` (the table, or a summary computed in one
    pass: per-second table, exact means, log-binned histograms).
``_engines``, ``_processes``
    The engines above.
``result``
    :class:`SimulationResult` and :class:`ConfidenceInterval`.

References
----------
D. V. Lindley, "The theory of queues with a single server", Proc. Cambridge
Philos. Soc. 48 (1952) 277-289.

L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley
(1976), ch. 4 (processor sharing).

M. Harchol-Balter, *Performance Modeling and Design of Computer Systems*,
Cambridge University Press (2013), part VII (scheduling, processor sharing).

A. M. Law, *Simulation Modeling and Analysis*, 5th ed., McGraw-Hill (2015),
sec. 9.5.3 (the method of batch means).

B. Maurer, "Fail at scale", ACM Queue 13(8) (2015) (adaptive LIFO and
controlled delay in Facebook's servers).

K. Nichols and V. Jacobson, "Controlling queue delay", ACM Queue 10(5)
(2012) (CoDel: act on the queueing delay, not the queue length).
"""
from .._checks import ADMISSIONS
from ._options import DISPATCH, ON_TIMEOUT, QUEUES
from ._simulate import simulate
from ._storage import KEEP
from ._summary import RELATIVE_RESOLUTION
from .result import OUTCOMES, ConfidenceInterval, SimulationResult

__all__ = ["ConfidenceInterval", "SimulationResult", "simulate",
           "OUTCOMES", "DISPATCH", "ON_TIMEOUT", "QUEUES", "ADMISSIONS", "KEEP", "RELATIVE_RESOLUTION"]
