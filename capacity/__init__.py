"""capacity: how much traffic can this service take before it falls over?

Queueing models of a backend service -- service-time distributions,
closed-form queue formulas (M/G/1 FCFS, processor sharing, Erlang B/C,
closed-loop MVA) and an exact simulator that checks them.  Units everywhere:
seconds and requests per second.
"""
from ._version import __version__
from .distributions import Service

__all__ = ["Service", "__version__"]
