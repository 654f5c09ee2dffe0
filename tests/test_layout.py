"""The package stays a house a newcomer can live in (issue 13): modules of one idea, no import
circle, short public functions, one result protocol.

These are static checks of the source tree, so they fail the moment a change breaks the layout
rather than when a newcomer trips over it.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pathlib

import pytest

from capacity._result import Result

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "capacity"
MAX_MODULE_LINES = 900        # shipped tables (.npz) are data, not modules
MAX_FUNCTION_CODE_LINES = 80  # a public function that needs more is doing several jobs


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_900_lines(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines; split it by idea"


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """capacity modules that ``name`` imports anywhere in its body (lazy imports included: a
    function-level import hides a circle, it does not remove it)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("capacity"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not module.startswith("capacity"):
                continue
            for alias in node.names:
                # "from . import fcfs" imports the submodule, not the package's __init__.
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in MODULES else module)
    found.discard(name)
    return {m for m in found if m in MODULES}


def test_no_import_circle():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    # A package's __init__ importing its own submodules is how re-exports work, and a submodule
    # importing a sibling through "from . import x" resolves to the sibling; so cycles through a
    # package __init__ that only re-exports are not circles between ideas.  Drop edges from a
    # submodule to its own parent package.
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            assert cycle is None, "import circle: " + " -> ".join(cycle)


def _code_lines(lines: list[str], node: ast.AST) -> int:
    body = node.body
    skip = set()
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        skip = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i in range(node.lineno, node.end_lineno + 1)
               if i not in skip and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def _public_functions():
    for name, path in MODULES.items():
        if any(part.startswith("_") for part in name.split(".")[1:]):
            continue  # private modules hold no public function
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                yield f"{name}.{node.name}", _code_lines(lines, node)
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                        yield f"{name}.{node.name}.{item.name}", _code_lines(lines, item)


def test_no_public_function_is_over_80_lines_of_code():
    long = {name: n for name, n in _public_functions() if n > MAX_FUNCTION_CODE_LINES}
    assert not long, f"public functions over {MAX_FUNCTION_CODE_LINES} lines of code: {long}"


RESULT_MODULES = ["capacity.closed", "capacity.fit", "capacity.incident", "capacity.overload", "capacity.plan",
                  "capacity.sim"]


def _result_classes():
    for module_name in RESULT_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isclass(obj) and (name.endswith(("Result", "Fit", "Analysis")) or issubclass(obj, Result)
                                         or hasattr(obj, "explanation")):
                yield f"{module_name}.{name}", obj


@pytest.mark.parametrize("name, cls", list(_result_classes()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_result_class_follows_the_result_protocol(name, cls):
    assert issubclass(cls, Result), f"{name} does not subclass capacity._result.Result"
    for method in ("__repr__", "__str__", "to_frame", "to_dict"):
        assert callable(getattr(cls, method, None)), f"{name} has no {method}"
