"""An exact discrete-event simulator of a backend service, in and out of overload.

The code lives in ``capacity/sim/_processes.py`` while the package is being split into
modules of one idea; :func:`simulate` and the result classes are re-exported here.
"""
from ._processes import (  # noqa: F401 - private names kept for the tests and benchmarks until the split
    _ENGINES,
    ADMISSIONS,
    DISPATCH,
    ON_TIMEOUT,
    OUTCOMES,
    QUEUES,
    ConfidenceInterval,
    SimulationResult,
    _fcfs_many,
    _lindley_waits,
    _Options,
    _rr,
    _rr_many,
    _run,
    simulate,
)

__all__ = ["ConfidenceInterval", "SimulationResult", "simulate",
           "OUTCOMES", "DISPATCH", "ON_TIMEOUT", "QUEUES", "ADMISSIONS"]
