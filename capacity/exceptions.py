"""Warning classes: how capacity says "do not trust this number blindly".

A fit never returns a silent number.  When the data cannot support what was
asked, the fitting functions still return their best estimate but emit one of
the warnings below (and record the message in the result's ``warnings_``
list), so a planning script can escalate them with :mod:`warnings` filters::

    import warnings
    from capacity.exceptions import CapacityWarning
    warnings.simplefilter("error", CapacityWarning)   # make every caveat fatal

Bad *input* (NaN, negative rates, too few points) is not a warning: it raises
``ValueError`` naming the parameter.
"""
from __future__ import annotations

__all__ = ["CapacityWarning", "FitWarning", "IdentifiabilityWarning", "OverloadWarning", "SourceError"]


class CapacityWarning(UserWarning):
    """Base class of every warning capacity emits."""


class FitWarning(CapacityWarning):
    """A fit whose result is numerically or statistically doubtful.

    Raised when the optimiser did not converge, when the residuals are large
    compared with the data (the model does not describe it), when many
    observations were flagged as outliers, or when a parameter that should be
    positive (a CPU cost per request) is not significantly above zero.
    """


class IdentifiabilityWarning(CapacityWarning):
    """The data cannot pin down a parameter.

    Example: CPU utilisation measured at (nearly) one QPS level cannot separate
    the per-request CPU cost from the background load; a load test that never
    approached saturation cannot tell service demand from think time, nor
    locate the throughput ceiling.  The estimate is returned but its interval
    is wide or meaningless.
    """


class OverloadWarning(CapacityWarning):
    """The observed or requested load is at or beyond the modelled capacity.

    Queue formulas return ``inf`` for unstable input instead of raising; a fit
    or planning helper emits this warning when the data themselves sit at
    saturation (e.g. CPU pinned at 100 %), where averages hide an unbounded
    queue.
    """


class SourceError(RuntimeError):
    """A data source (a Prometheus server, a saved query result) could not give what was asked.

    The message says what failed and what to change: the server unreachable, a query the
    server refused (its own error text), a range over the server's 11,000-points limit, a
    metric with no series.  Bad arguments are ``ValueError`` as everywhere else.
    """
