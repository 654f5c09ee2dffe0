"""What a run is asked to do: the choices of :func:`capacity.sim.simulate` and the validated
options (:class:`_Options`) the drivers read."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..distributions import Service

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

    @property
    def n_proc(self) -> int:
        return self.machines * self.processes

    @property
    def server_reacts(self) -> bool:
        """Does the server's behaviour depend on timeouts or queue order?"""
        return (self.timeout is not None and self.on_timeout != "continue") or self.queue != "fifo"
