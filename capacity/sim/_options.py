"""What a run is asked to do: the choices of :func:`capacity.sim.simulate`, the checks of its
options (:func:`_options`, each error naming its parameter) and the validated options
(:class:`_Options`) the drivers read."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .._checks import check_choice, check_count, check_nonnegative, check_positive, check_rr, check_servers
from ..distributions import Service, as_service
from ._storage import KEEP, check_max_memory

#: Dispatch policies across the ``machines x processes`` worker processes.
DISPATCH = ("round_robin", "random", "least_connections")
#: What the server does with a request whose client timed out.
ON_TIMEOUT = ("continue", "drop", "deadline")
#: Queue orders of a FCFS process.
QUEUES = ("fifo", "adaptive_lifo")


@dataclass
class _Options:
    """Validated run options (see :func:`simulate`)."""

    discipline: str = "fcfs"
    servers: int = 1
    processes: int = 1
    machines: int = 1
    dispatch: str = "round_robin"
    timeout: float | None = None
    on_timeout: str = "continue"
    queue: str = "fifo"
    queue_delay_bound: float | None = None
    retries: int = 0
    retry_backoff: float = 1.0
    retry_backoff_factor: float = 1.0
    drain: bool = True
    progress: Callable[[float, float], Any] | None = None
    engine: str | None = None  # force "static", "objects" or "global" (tests compare them)
    slices: int = 1  # round robin: slices per request
    slice_delay: float = 0.0  # round robin: constant delay between slices (s)
    delay_service: Service | None = None  # round robin: delay distribution (overrides slice_delay)
    admission: str = "fifo"  # round robin: when a new request enters the run queue
    keep: str = "requests"  # "auto", "requests" or "summary" (see capacity.sim._storage)
    max_memory: float = float("inf")  # bytes

    @property
    def n_proc(self) -> int:
        return self.machines * self.processes

    @property
    def server_reacts(self) -> bool:
        """Does the server's behaviour depend on timeouts or queue order?"""
        return (self.timeout is not None and self.on_timeout != "continue") or self.queue != "fifo"


def _scalar_service(value: Any, name: str) -> Service:
    """A :class:`~capacity.Service` with scalar parameters (a bare number: an exponential with that mean)."""
    svc = as_service(value)
    if svc.shape != ():
        raise ValueError(f"{name} must have scalar parameters for a simulation, got parameter shape "
                         f"{svc.shape}")
    return svc


def _slicing(discipline: Any, slices: Any, slice_delay: Any,
             admission: Any) -> tuple[int, float, Service | None, str]:
    """Round robin's slices, slice delay and admission rule; the delay is a constant (s) or a
    :class:`~capacity.Service` drawn afresh for every gap (returned apart, its mean as the delay)."""
    delay_service = None
    if isinstance(slice_delay, Service):
        delay_service = _scalar_service(slice_delay, "slice_delay")
        slice_delay = delay_service.mean
    elif np.ndim(slice_delay) != 0:
        raise ValueError(f"slice_delay must be one finite number of seconds >= 0 or a Service, "
                         f"got {slice_delay!r}")
    slices, delay, admission = check_rr(discipline, slices, slice_delay, admission)
    return slices, delay, delay_service, admission


def _client(timeout: Any, retries: Any, retry_backoff: Any,
            retry_backoff_factor: Any) -> tuple[float | None, int, float, float]:
    """The client's timeout (s, or None) and its retry rule."""
    if timeout is not None:
        timeout = float(check_positive(timeout, "timeout"))
    retries = check_count(retries, "retries", 0)
    if retries and timeout is None:
        raise ValueError(f"retries needs a timeout (retries happen after a timeout), got retries={retries!r} "
                         f"and timeout=None")
    retry_backoff = float(check_nonnegative(retry_backoff, "retry_backoff"))
    retry_backoff_factor = float(check_positive(retry_backoff_factor, "retry_backoff_factor"))
    if retry_backoff_factor < 1:
        raise ValueError(f"retry_backoff_factor must be >= 1, got {retry_backoff_factor!r}")
    return timeout, retries, retry_backoff, retry_backoff_factor


def _queue_delay_bound(queue: str, discipline: str, timeout: float | None, bound: Any) -> float | None:
    """The head-of-line wait (s) above which adaptive LIFO serves newest first (0.1 x timeout by default)."""
    if queue == "adaptive_lifo":
        if discipline != "fcfs":
            raise ValueError(f"queue='adaptive_lifo' needs discipline='fcfs' (a PS process has no "
                             f"queue), got discipline={discipline!r}")
        if bound is None:
            if timeout is None:
                raise ValueError("queue_delay_bound must be given for queue='adaptive_lifo' without a "
                                 "timeout (its default is 0.1 * timeout), got None")
            bound = 0.1 * timeout
    return None if bound is None else float(check_nonnegative(bound, "queue_delay_bound"))


def _options(*, discipline: Any, servers: Any, processes: Any, machines: Any, dispatch: Any, timeout: Any,
             on_timeout: Any, queue: Any, queue_delay_bound: Any, retries: Any, retry_backoff: Any,
             retry_backoff_factor: Any, drain: Any, progress: Any, slices: Any, slice_delay: Any,
             admission: Any, keep: Any = "requests", max_memory: Any = float("inf")) -> _Options:
    """:func:`~capacity.sim.simulate`'s run options, checked (see it for their meaning)."""
    slices, delay, delay_service, admission = _slicing(discipline, slices, slice_delay, admission)
    c = check_servers(servers, "servers")
    if c.ndim != 0:
        raise ValueError(f"servers must be a single integer, got {servers!r}")
    processes = check_count(processes, "processes", 1)
    machines = check_count(machines, "machines", 1)
    dispatch = check_choice(dispatch, "dispatch", DISPATCH)
    on_timeout = check_choice(on_timeout, "on_timeout", ON_TIMEOUT)
    queue = check_choice(queue, "queue", QUEUES)
    timeout, retries, retry_backoff, retry_backoff_factor = _client(timeout, retries, retry_backoff,
                                                                    retry_backoff_factor)
    bound = _queue_delay_bound(queue, discipline, timeout, queue_delay_bound)
    if progress is not None and not callable(progress):
        raise ValueError(f"progress must be a callable or None, got {progress!r}")
    if not isinstance(drain, (bool, np.bool_)):
        raise ValueError(f"drain must be True or False, got {drain!r}")
    keep = check_choice(keep, "keep", KEEP)
    max_memory = float("inf") if max_memory is None else check_max_memory(max_memory)
    return _Options(discipline=discipline, servers=int(c), processes=processes, machines=machines,
                    dispatch=dispatch, timeout=timeout, on_timeout=on_timeout, queue=queue,
                    queue_delay_bound=bound, retries=retries, retry_backoff=retry_backoff,
                    retry_backoff_factor=retry_backoff_factor, drain=bool(drain), progress=progress,
                    slices=slices, slice_delay=delay, delay_service=delay_service, admission=admission,
                    keep=keep, max_memory=max_memory)
