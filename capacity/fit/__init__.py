"""Fit queueing models to the numbers a team already has.

Every fit returns a result object (lifelines style): fitted values end in
``_``, ``summary`` is a DataFrame of estimates with confidence intervals,
``print_summary()`` prints it with the fit quality, and ``warnings_`` lists
the caveats emitted as :mod:`capacity.exceptions` warnings.
"""
from ._result import FitResult
from .loadtest import LoadTestFit, from_loadtest
from .percentiles import PercentileFit, from_percentiles
from .requests import RequestsFit, from_requests
from .utilization import UtilizationFit, from_utilization

__all__ = [
    "FitResult",
    "LoadTestFit",
    "PercentileFit",
    "RequestsFit",
    "UtilizationFit",
    "from_loadtest",
    "from_percentiles",
    "from_requests",
    "from_utilization",
]
