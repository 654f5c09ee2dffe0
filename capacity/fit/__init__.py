"""Fit queueing models to the numbers a team already has.

Every fit returns a result object (lifelines style): fitted values end in
``_``, ``summary`` is a DataFrame of estimates with confidence intervals,
``print_summary()`` prints it with the fit quality, and ``warnings_`` lists
the caveats emitted as :mod:`capacity.exceptions` warnings.  Results follow the
package's result protocol: short ``repr``, ``str`` (the printed summary),
``to_frame()`` (the summary) and ``to_dict()`` (JSON-ready).

Each public ``from_*`` is a short pipeline over private layers, one module each:
``_inputs`` (check and parse what the user gives into typed records), ``_model``
(the forward models a fit inverts: the open queue with its one fcfs/ps/rr dispatch,
MVA, the USL), ``_solve`` (search space, bounds, starting points, least squares and
robust lines), ``_intervals`` (delta method, profile, Gauss-Newton, bootstrap),
``_diagnostics`` (fit quality, residual tables, warnings) and ``_result``
(:class:`FitResult`).

:func:`fleet` fits many services at once (their logs, or one Prometheus histogram grouped by
``job``) and answers each one's QPS ceiling at an SLO in one table, on a Dask cluster if given.
"""
from ._result import FitResult
from .fleet import FleetReport, fleet
from .histograms import HistogramFit, from_histograms
from .k6 import from_k6
from .loadtest import LoadTestFit, from_loadtest
from .percentiles import PercentileFit, Prediction, from_percentiles
from .prometheus import from_prometheus, from_prometheus_json
from .requests import RequestsFit, from_requests
from .timeseries import from_timeseries
from .utilization import UtilizationFit, from_utilization

__all__ = [
    "FitResult",
    "FleetReport",
    "HistogramFit",
    "LoadTestFit",
    "PercentileFit",
    "Prediction",
    "RequestsFit",
    "UtilizationFit",
    "fleet",
    "from_histograms",
    "from_k6",
    "from_loadtest",
    "from_percentiles",
    "from_prometheus",
    "from_prometheus_json",
    "from_requests",
    "from_timeseries",
    "from_utilization",
]
