"""The fitters share their layers, follow the result protocol, and keep the renamed keywords
for one release.

* Renames (docs/glossary.md): each old keyword warns with a ``DeprecationWarning`` that names
  the new one and gives the same values as the new one.
* Result protocol: on one fit of each kind, ``repr`` is one short line, ``str`` is what
  ``print_summary`` prints, ``to_frame()`` is ``summary`` and ``to_dict()`` is JSON-ready with
  the parameters and their intervals, the fit quality, the warnings and the model.
* Layers: the public fit modules reach the package's planners only through ``capacity.plan``'s
  public names, and the planners never import the fits.
"""
from __future__ import annotations

import ast
import io
import json
import math
import pathlib
import warnings

import numpy as np
import pandas as pd
import pytest

from capacity import Service, fcfs
from capacity.closed import mva
from capacity.exceptions import CapacityWarning, FitWarning, OverloadWarning
from capacity.fit import (
    FitResult,
    from_loadtest,
    from_percentiles,
    from_requests,
    from_utilization,
)
from capacity.sim import simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]
QS = [0.5, 0.9, 0.99, 0.999]


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)
        return func(*args, **kwargs)


def _renamed(func, *args, **kwargs):
    """Call with old keywords: the DeprecationWarnings it raised, and the result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = func(*args, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)], res


def _same_fit(a: FitResult, b: FitResult) -> None:
    pd.testing.assert_frame_equal(a.summary, b.summary)
    pd.testing.assert_series_equal(a.fit_quality_, b.fit_quality_)
    assert a.warnings_ == b.warnings_


# ---------------------------------------------------------------------- data, one fit of each kind
def _percentiles_fit():
    svc = Service.lognormal(0.05, 2.0)
    obs = dict(zip(QS, fcfs.response_quantile(QS, 8.0, svc)))
    return from_percentiles(obs, 8.0, discipline="fcfs", n_requests=10_000)


def _request_log():
    rates = pd.Series(np.repeat([5.0, 10.0, 15.0], 2000))
    req = simulate(rates, Service.lognormal(0.04, 1.0), "fcfs", seed=1).requests
    return pd.DataFrame({"time": req["completion"], "duration": req["response"],
                         "upstream_time": 0.9 * req["response"]})


def _windows():
    rng = np.random.default_rng(3)
    rate = rng.uniform(5, 50, 120)
    return rate, np.clip(0.05 + 0.012 * rate + rng.normal(0, 0.01, rate.size), 0, 1)


SWEEP_USERS = np.array([1, 5, 10, 20, 40, 80, 160])
SWEEP = mva(0.004, 0.05, 160)


def _fits():
    rate, busy = _windows()
    return {
        "percentiles": _quiet(_percentiles_fit),
        "requests": _quiet(from_requests, _request_log(), discipline="fcfs", bins=3),
        "utilization": _quiet(from_utilization, rate, busy, n_bootstrap=100),
        "loadtest": _quiet(from_loadtest, SWEEP_USERS, SWEEP.throughput[SWEEP_USERS - 1],
                           SWEEP.response[SWEEP_USERS - 1]),
    }


@pytest.fixture(scope="module")
def fits():
    return _fits()


# ---------------------------------------------------------------------- renames
def test_from_loadtest_old_keywords_warn_and_give_the_same_fit():
    x, r = SWEEP.throughput[SWEEP_USERS - 1], SWEEP.response[SWEEP_USERS - 1]
    new = _quiet(from_loadtest, users=SWEEP_USERS, throughput=x, mean_response=r, model="mva")
    messages, old = _renamed(from_loadtest, concurrency=SWEEP_USERS, throughput=x, mean_latency=r, model="mva")
    assert any("'concurrency' is now 'users'" in m for m in messages)
    assert any("'mean_latency' is now 'mean_response'" in m for m in messages)
    _same_fit(new, old)
    with pytest.raises(TypeError, match="both"):
        from_loadtest(concurrency=SWEEP_USERS, users=SWEEP_USERS, throughput=x)


def test_loadtest_predict_old_keyword():
    fit = _quiet(from_loadtest, SWEEP_USERS, SWEEP.throughput[SWEEP_USERS - 1])
    messages, old = _renamed(fit.predict, concurrency=[1, 50])
    assert any("'concurrency' is now 'users'" in m for m in messages)
    pd.testing.assert_frame_equal(old, fit.predict(users=[1, 50]))


def test_from_utilization_old_keywords_warn_and_give_the_same_fit():
    rate, busy = _windows()
    new = _quiet(from_utilization, arrival_rate=rate, utilization=busy, n_bootstrap=100)
    messages, old = _renamed(from_utilization, qps=rate, cpu=busy, n_bootstrap=100)
    assert any("'qps' is now 'arrival_rate'" in m and "'cpu' is now 'utilization'" in m for m in messages)
    _same_fit(new, old)
    np.testing.assert_array_equal(new.bootstrap_["cpu_per_request"], old.bootstrap_["cpu_per_request"])
    messages, pred = _renamed(new.predict, qps=[10.0, 20.0])
    assert any("'qps' is now 'arrival_rate'" in m for m in messages)
    np.testing.assert_array_equal(pred, new.predict(arrival_rate=[10.0, 20.0]))


def test_from_requests_old_keyword_warns_and_gives_the_same_fit():
    log = _request_log()
    new = _quiet(from_requests, log, timing="upstream", discipline="fcfs", bins=3)
    messages, old = _renamed(from_requests, log, latency="upstream", discipline="fcfs", bins=3)
    assert any("'latency' is now 'timing'" in m for m in messages)
    _same_fit(new, old)
    # "upstream" models the upstream column: 0.9 of the duration here.
    whole = _quiet(from_requests, log, discipline="fcfs", bins=3)
    assert new.cpu_per_request_ < whole.cpu_per_request_
    with pytest.raises(ValueError, match="timing"):
        from_requests(log, timing="latency")


def test_old_messages_name_the_new_parameters():
    with pytest.raises(ValueError, match="^users must be >= 1"):
        from_loadtest([0, 2, 10], [5.0, 9.0, 40.0])
    with pytest.raises(ValueError, match="^mean_response must be positive"):
        from_loadtest([1, 2, 10], [5.0, 9.0, 40.0], [0.1, 0.0, 0.2])
    with pytest.raises(ValueError, match="pass utilization / 100"):
        from_utilization([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])


@pytest.mark.parametrize("call, category", [
    (lambda: from_utilization([100.0, 200.0, 300.0], [1.0, 1.0, 1.0], background=0.0), OverloadWarning),
    (lambda: from_loadtest([1, 10, 20], [20.0, 100.0, 110.0], [0.05, 0.2, 0.3], model="mva"), FitWarning),
    (lambda: from_requests(_request_log(), discipline="fcfs", bins=1), FitWarning),
    (lambda: from_percentiles({0.5: 0.01, 0.9: 0.011, 0.99: 0.012, 0.999: 1.0}, 10.0, discipline="fcfs",
                              utilization=0.1), FitWarning),
])
def test_warnings_point_at_the_callers_line_through_the_rename_wrapper(call, category):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    ours = [w for w in caught if issubclass(w.category, CapacityWarning)]
    assert any(issubclass(w.category, category) for w in ours)
    assert all(w.filename == __file__ for w in ours), [(w.filename, w.lineno) for w in ours]


# ---------------------------------------------------------------------- result protocol
KINDS = ["percentiles", "requests", "utilization", "loadtest"]


@pytest.mark.parametrize("kind", KINDS)
def test_repr_is_one_short_line(fits, kind):
    text = repr(fits[kind])
    assert "\n" not in text and len(text) < 300
    assert text.startswith(f"<{type(fits[kind]).__name__}: {fits[kind].model}")


@pytest.mark.parametrize("kind", KINDS)
def test_str_is_the_printed_summary(fits, kind):
    buf = io.StringIO()
    fits[kind].print_summary(file=buf)
    assert str(fits[kind]) == buf.getvalue()
    assert "fit quality" in str(fits[kind]) and "estimate" in str(fits[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_to_frame_is_the_summary(fits, kind):
    pd.testing.assert_frame_equal(fits[kind].to_frame(), fits[kind].summary)


@pytest.mark.parametrize("kind", KINDS)
def test_to_dict_is_json_with_parameters_quality_warnings_and_model(fits, kind):
    res = fits[kind]
    data = res.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data   # plain JSON, no NaN or inf floats
    assert data["result"] == type(res).__name__
    assert data["model"] == res.model and data["method"] == res.method
    assert data["confidence_level"] == res.confidence_level
    assert data["n_observations"] == res.n_observations
    assert list(data["parameters"]) == list(res.summary.index)
    for name, row in res.summary.iterrows():
        got = data["parameters"][name]
        assert set(got) == {"estimate", "lower", "upper", "unit", "note"}
        for key in ("estimate", "lower", "upper"):
            value = row[key]
            if math.isnan(value):
                assert got[key] is None
            elif math.isinf(value):
                assert got[key] == ("inf" if value > 0 else "-inf")
            else:
                assert got[key] == pytest.approx(value, rel=1e-15)
    assert set(data["fit_quality"]) == set(res.fit_quality_.index)
    assert data["warnings"] == res.warnings_


def test_to_dict_describes_each_model(fits):
    p = fits["percentiles"].to_dict()
    assert (p["discipline"], p["family"], p["servers"], p["delay"]) == ("fcfs", "lognormal", 1, None)
    assert p["parameters"]["cpu_per_request"]["lower"] < 0.05 < p["parameters"]["cpu_per_request"]["upper"]
    assert fits["utilization"].to_dict()["cores"] == 1.0
    assert fits["loadtest"].to_dict()["model_kind"] == "both"
    r = fits["requests"].to_dict()
    assert r["load_bins"] == len(fits["requests"].bins_) and isinstance(r["endpoints"], list)


def test_lognormal_delay_is_a_service_in_to_dict():
    svc = Service.lognormal(0.05, 1.0)
    recs = [{"percentiles": {q: t + 0.02 for q, t in zip(QS, fcfs.response_quantile(QS, lam, svc))},
             "arrival_rate": lam} for lam in (6.0, 12.0, 16.0)]
    res = _quiet(from_percentiles, recs, discipline="fcfs", delay="lognormal")
    data = res.to_dict()
    assert data["delay"] == "lognormal"
    assert set(data["parameters"]) >= {"delay_mean", "delay_scv"}
    json.dumps(data, allow_nan=False)


# ---------------------------------------------------------------------- one rule, one house
def test_fitted_services_come_from_the_one_rule(fits):
    res = fits["percentiles"]
    assert repr(res.service_) == repr(Service.from_moments(res.cpu_per_request_, res.scv_, "lognormal"))
    u = fits["utilization"]
    assert repr(u.service_) == repr(Service.from_moments(u.cpu_per_request_))


def _capacity_imports(path: pathlib.Path, package: str) -> set[tuple[str, str]]:
    """(module, name) pairs of every capacity import in ``path`` (relative ones resolved)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            module = ".".join(base[:len(base) - (node.level - 1)] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            out.update((module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update((alias.name, "") for alias in node.names)
    return {(m, n) for m, n in out if m.startswith("capacity")}


def test_fit_uses_only_public_plan_names_and_plan_never_imports_fit():
    import capacity.plan

    for path in sorted((ROOT / "capacity" / "fit").glob("*.py")):
        for module, name in _capacity_imports(path, "capacity.fit"):
            if module.startswith("capacity.plan"):
                assert module == "capacity.plan" and name in capacity.plan.__all__, (path.name, module, name)
            if module == "capacity" and name == "plan":
                pytest.fail(f"{path.name} imports capacity.plan as a module; import its public names")
    for path in sorted((ROOT / "capacity" / "plan").glob("*.py")):
        for module, name in _capacity_imports(path, "capacity.plan"):
            assert not module.startswith("capacity.fit") and not (module == "capacity" and name == "fit"), \
                (path.name, module, name)


def test_each_layer_is_one_private_module_shared_by_the_fitters():
    layers = ("_inputs", "_model", "_solve", "_intervals", "_diagnostics", "_result")
    fit_dir = ROOT / "capacity" / "fit"
    used = {layer: [] for layer in layers}
    for public in ("percentiles", "requests", "utilization", "loadtest"):
        imports = _capacity_imports(fit_dir / f"{public}.py", "capacity.fit")
        for layer in layers:
            if any(m == f"capacity.fit.{layer}" or (m == "capacity.fit" and n == layer) for m, n in imports):
                used[layer].append(public)
    assert all((fit_dir / f"{layer}.py").exists() for layer in layers)
    # every layer serves more than one fitter (requests reaches the solver through from_percentiles)
    assert all(len(users) >= 2 for users in used.values()), used
