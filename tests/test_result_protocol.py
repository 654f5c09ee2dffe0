"""The pieces every module shares: the Result protocol, the deprecation helpers, jsonable."""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import types
import warnings
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from capacity import Service
from capacity._deprecation import deprecated_alias, deprecated_property, module_getattr, renamed_parameters
from capacity._result import Result, jsonable


@dataclasses.dataclass(frozen=True, repr=False)
class _Answer(Result):
    qps: object
    capacity_qps: object
    rates: dict
    discipline: str
    explanation: str
    _headline: ClassVar[tuple[str, ...]] = ("qps", "discipline")


def test_repr_is_one_short_line_of_the_headline_fields():
    a = _Answer(np.arange(1000.0), 40.0, {0.99: np.arange(1000.0)}, "ps", "It holds up to 26 QPS.")
    assert repr(a) == "_Answer(qps=<array 1000>, discipline='ps')"
    small = _Answer(26.371234, 40.0, {}, "ps", "x")
    assert repr(small) == "_Answer(qps=26.37, discipline='ps')"


def test_str_is_the_explanation():
    assert str(_Answer(1.0, 2.0, {}, "ps", "It holds up to 26 QPS.")) == "It holds up to 26 QPS."


def test_to_frame_gives_one_row_per_configuration():
    a = _Answer(np.array([10.0, 20.0]), np.array([40.0, 80.0]), {0.99: np.array([10.0, 25.0])}, "fcfs", "...")
    frame = a.to_frame()
    assert list(frame.columns) == ["qps", "capacity_qps", "rates[0.99]", "discipline"]
    assert frame["qps"].tolist() == [10.0, 20.0] and frame["discipline"].tolist() == ["fcfs", "fcfs"]
    assert frame["rates[0.99]"].tolist() == [10.0, 25.0]
    assert len(_Answer(1.0, 2.0, {}, "ps", "x").to_frame()) == 1


def test_to_dict_is_json_ready():
    a = _Answer(np.array([10.0, np.inf]), math.nan, {0.999: np.float64(3.0)}, "ps", "x")
    d = a.to_dict()
    assert json.loads(json.dumps(d)) == {"qps": [10.0, "inf"], "capacity_qps": None, "rates": {"0.999": 3.0},
                                         "discipline": "ps", "explanation": "x"}


def test_jsonable_handles_services_frames_and_nested_results():
    svc = jsonable(Service.lognormal(0.02, 2.0))
    assert svc == {"family": "lognormal", "mean_s": pytest.approx(0.02), "scv": pytest.approx(2.0)}
    frame = pd.DataFrame({"a": [1.0, -np.inf]}, index=pd.Index([5, 6], name="k"))
    assert jsonable(frame) == [{"k": 5, "a": 1.0}, {"k": 6, "a": "-inf"}]
    nested = jsonable({"inner": _Answer(1.0, 2.0, {}, "ps", "x")})
    assert nested["inner"]["qps"] == 1.0


def test_renamed_parameters_map_the_old_keyword_and_warn_once_per_call():
    @renamed_parameters(a="offered_load", c="servers")
    def f(servers=1, offered_load=0.0):
        return servers, offered_load

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert f(c=3, a=2.0) == (3, 2.0)
    assert len(caught) == 1 and caught[0].category is DeprecationWarning
    assert "'a' is now 'offered_load'" in str(caught[0].message) and "'c' is now 'servers'" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller, not at the helper
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(servers=2) == (2, 0.0)  # the new names never warn
    with pytest.raises(TypeError, match="both 'c'"):
        f(c=1, servers=2)
    import inspect
    assert list(inspect.signature(f).parameters) == ["servers", "offered_load"]
    assert f.__deprecated_parameters__ == {"a": "offered_load", "c": "servers"}


def test_deprecated_alias_and_property_warn_with_the_new_name():
    def response_curve(x):
        return 2 * x

    old = deprecated_alias(response_curve, "capacity.plan.latency_curve", "capacity.plan.response_curve")
    with pytest.warns(DeprecationWarning, match="latency_curve is now capacity.plan.response_curve"):
        assert old(2) == 4
    assert old.__name__ == "latency_curve" and old.__deprecated__ == "capacity.plan.response_curve"

    class Curve:
        response = 7
        latency = deprecated_property("response")

    with pytest.warns(DeprecationWarning, match=r"Curve.latency is now .response"):
        assert Curve().latency == 7
    assert isinstance(Curve.latency, deprecated_property)


def test_module_getattr_serves_moved_names_and_refuses_others():
    target = types.ModuleType("_capacity_target_module")
    target.new_thing = object()
    sys.modules["_capacity_target_module"] = target
    try:
        getter = module_getattr("capacity.old", {"old_thing": "_capacity_target_module:new_thing"})
        with pytest.warns(DeprecationWarning, match="capacity.old.old_thing is now _capacity_target_module.new_thing"):
            assert getter("old_thing") is target.new_thing
        with pytest.raises(AttributeError, match="no attribute 'other'"):
            getter("other")
    finally:
        del sys.modules["_capacity_target_module"]
