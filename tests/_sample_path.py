"""Sample-path checks shared by the simulator tests."""
from __future__ import annotations

import numpy as np


def number_in_system_area(requests) -> tuple[float, float]:
    """(time integral of the number of requests present over [0, last completion], sum of
    response times) for a fully drained run: Little's law on the sample path says they are equal."""
    end = requests["completion"].max()
    t = np.concatenate([requests["arrival"], requests["completion"]])
    s = np.concatenate([np.ones(len(requests)), -np.ones(len(requests))])
    o = np.argsort(t, kind="stable")
    area = float(np.sum(np.diff(np.append(t[o], end)) * np.cumsum(s[o])))
    return area, float(requests["response"].sum())
