"""Every public name follows docs/glossary.md: one name per quantity.

The test walks every public signature of the package (functions, classes and their public
methods, re-exported from the modules' ``__all__``) and every CLI flag, and checks each
parameter name against the glossary's terms.  It also checks that each old name kept for one
release (``__deprecated_parameters__``, ``__deprecated__`` marks) is listed among the renames,
is no longer a live parameter, and warns with the new name when used.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import pathlib
import re
import warnings

import pytest

from capacity._result import Result

ROOT = pathlib.Path(__file__).resolve().parents[1]
GLOSSARY = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
TERMS = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", GLOSSARY))
FLAGS = set(re.findall(r"`(--[a-z][a-z0-9-]*)", GLOSSARY))
RENAMES = GLOSSARY[GLOSSARY.index("## Renamed in this release"):]

PUBLIC_MODULES = [
    "capacity", "capacity.closed", "capacity.distributions", "capacity.erlang", "capacity.fcfs",
    "capacity.fit", "capacity.incident", "capacity.logs", "capacity.overload", "capacity.plan", "capacity.ps", "capacity.rr",
    "capacity.sim", "capacity.symbolic", "capacity.units", "capacity.phasetype",
]


def _public_callables():
    """(qualified name, callable) for every public function, class and public method."""
    seen = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.ismodule(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                yield f"{module_name}.{name}", obj
            elif inspect.isclass(obj):
                # A result's constructor is the package's, not the user's; its methods are public.
                if not issubclass(obj, Result) and obj.__init__ is not object.__init__:
                    yield f"{module_name}.{name}", obj
                for attr, value in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                    if inspect.isfunction(func):
                        yield f"{module_name}.{name}.{attr}", func


CALLABLES = sorted(_public_callables(), key=lambda item: item[0])


def _parameters(func):
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return []
    return [p for p in sig.parameters if p not in ("self", "cls")]


def test_the_walk_sees_the_package():
    names = {name for name, _ in CALLABLES}
    # A broken walk (an import error swallowed, an empty __all__) must not pass for a clean one.
    assert len(CALLABLES) > 120
    for expected in ("capacity.fcfs.response_quantile", "capacity.plan.qps_ceiling", "capacity.simulate",
                     "capacity.fit.from_percentiles", "capacity.Service.from_moments"):
        assert expected in names


@pytest.mark.parametrize("name, func", CALLABLES, ids=[name for name, _ in CALLABLES])
def test_every_parameter_is_a_glossary_term(name, func):
    unknown = [p for p in _parameters(func) if p not in TERMS]
    assert not unknown, f"{name}: parameters {unknown} are not defined in docs/glossary.md"


def _deprecated_parameters():
    for name, func in CALLABLES:
        for old, new in getattr(func, "__deprecated_parameters__", {}).items():
            yield name, func, old, new


DEPRECATED = list(_deprecated_parameters())


@pytest.mark.parametrize("name, func, old, new", DEPRECATED, ids=[f"{n}:{o}" for n, _, o, _ in DEPRECATED])
def test_an_old_parameter_is_listed_and_no_longer_live(name, func, old, new):
    assert f"`{old}`" in RENAMES or old in RENAMES, f"{name}: old parameter {old!r} missing from the renames"
    params = _parameters(func)
    assert old not in params, f"{name}: {old!r} is still a live parameter"
    assert new in params, f"{name}: {old!r} points at {new!r}, which is not a parameter"


def test_an_old_parameter_warns_and_names_the_new_one():
    if not DEPRECATED:
        pytest.skip("no renamed parameters in this release")
    from capacity._deprecation import renamed_parameters

    @renamed_parameters(old_name="new_name")
    def f(new_name=0):
        return new_name

    with pytest.warns(DeprecationWarning, match="'old_name' is now 'new_name'"):
        assert f(old_name=3) == 3
    with pytest.raises(TypeError, match="both"):
        f(old_name=1, new_name=2)


def _cli_flags():
    from capacity import cli

    parser = cli.build_parser()
    flags = set()
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
            elif not isinstance(action, argparse._HelpAction):
                flags.update(o for o in action.option_strings if o.startswith("--"))
    return flags


def test_every_cli_flag_is_in_the_glossary():
    flags = _cli_flags()
    assert "--slo" in flags and "--cpu" in flags  # the walk reached the subcommands
    hidden = {f for f in flags if f in RENAMES}  # old flags kept for one release
    unknown = sorted(flags - FLAGS - hidden)
    assert not unknown, f"CLI flags {unknown} are not in docs/glossary.md"


def test_no_term_has_two_names_in_the_renames_table():
    # Each old name maps to one new name: a row per rename, no old name twice.
    rows = [line for line in RENAMES.splitlines() if line.startswith("| `")]
    olds = [re.findall(r"`([^`]+)`", row.split("|")[1]) for row in rows]
    flat = [o for group in olds for o in group]
    assert len(flat) == len(set(flat)), "an old name is listed twice among the renames"


def test_deprecated_aliases_warn_with_the_new_name():
    """Module-level old names (moved or renamed functions and classes) warn and still work."""
    checked = 0
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        getter = getattr(module, "__getattr__", None)
        moved = getattr(getter, "__deprecated__", {}) if getter else {}
        for old, target in moved.items():
            new = target.split(":")[-1]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                obj = getattr(module, old)
            assert obj is not None
            assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught), \
                f"{module_name}.{old} does not warn with {new!r}"
            assert old in RENAMES, f"{module_name}.{old} is not listed among the renames"
            checked += 1
    if checked == 0:
        pytest.skip("no moved module-level names in this release")
