"""Old public names kept for one release, each with a ``DeprecationWarning`` naming the new one.

docs/glossary.md gives every quantity one name; where a release renames a public parameter,
function, attribute or module name, the old one keeps working for one release through the
helpers here, and the warning says what to write instead.  The glossary test reads the marks
these helpers leave (``__deprecated_parameters__``, ``__deprecated__``) to check that every old
name points at a live new one.
"""
from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any, Callable

__all__ = ["deprecated_alias", "deprecated_property", "module_getattr", "renamed_parameters"]

_NOTE = "the old name will be removed in the next release"


def _warn(message: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{message}; {_NOTE}", DeprecationWarning, stacklevel=stacklevel)


def renamed_parameters(**renames: str) -> Callable[[Callable], Callable]:
    """Decorator: accept each old keyword (``old="new"``) with a warning, as the new one.

    The wrapped function's signature (``inspect.signature``) shows only the new names.
    Passing both the old and the new name is a ``TypeError``, as a duplicate argument is.
    """
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            used = [(old, new) for old, new in renames.items() if old in kwargs]
            if used:
                for old, new in used:
                    if new in kwargs:
                        raise TypeError(f"{func.__name__}() got both {old!r} (the old name) and {new!r}")
                    kwargs[new] = kwargs.pop(old)
                # One warning per call, naming every old keyword it used.
                _warn(f"{func.__qualname__}(): " + ", ".join(f"parameter {o!r} is now {n!r}" for o, n in used))
            return func(*args, **kwargs)

        wrapper.__deprecated_parameters__ = {**getattr(func, "__deprecated_parameters__", {}), **renames}
        return wrapper

    return decorate


def deprecated_alias(func: Callable, old: str, new: str) -> Callable:
    """``func`` under its old name ``old``; calling it warns that it is now ``new``."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _warn(f"{old} is now {new}")
        return func(*args, **kwargs)

    wrapper.__name__ = old.rsplit(".", 1)[-1]
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__deprecated__ = new
    wrapper.__doc__ = f"Deprecated: use :func:`{new}`."
    return wrapper


class deprecated_property:  # noqa: N801 - used like ``property``
    """A read-only attribute under its old name that returns ``self.<new>`` with a warning."""

    def __init__(self, new: str) -> None:
        self.__deprecated__ = new
        self.__doc__ = f"Deprecated: use ``{new}``."
        self.old = "?"

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        _warn(f"{type(obj).__name__}.{self.old} is now .{self.__deprecated__}")
        return getattr(obj, self.__deprecated__)


def module_getattr(module: str, moved: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving old names: ``{"old": "package.module:new"}``.

    The target is imported on first use, so a module may keep an old name for something that
    now lives in a module importing it.
    """
    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        target_module, _, target = moved[name].partition(":")
        _warn(f"{module}.{name} is now {target_module}.{target}", stacklevel=3)
        return getattr(importlib.import_module(target_module), target)

    __getattr__.__deprecated__ = dict(moved)  # type: ignore[attr-defined]
    return __getattr__
