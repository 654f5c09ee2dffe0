"""Slow wall-clock setups of different test modules, run side by side instead of one after another.

test_prometheus.py, test_prometheus_server.py and test_fleet.py each start their own real Prometheus
scraping their own exporter while a load is played into it in wall-clock time (about 45 s each,
almost all of it waiting).  The three are independent -- their own ports, config, data directory,
metrics and seeds -- so nothing one module queries can see another's data; they only need not
wait in turn.

A module registers its setup (a context manager function yielding what its module-scoped fixture
yields) under the fixture's name at import time.  The first such fixture to be set up starts,
each in its own thread, every registered setup that a collected test uses, so they all run at
once.  Each fixture then waits until all started setups are ready -- no test runs while a load is
still being played -- yields its own setup's value unchanged, and on teardown lets its thread
leave the context (stopping that Prometheus).  The session-scoped ``concurrent_setups`` fixture
(conftest.py) stops any left at the session's end.

What the setups cost one another: the two simulated-load setups (test_prometheus.py and
test_fleet.py) use about 1 s of CPU in all over their 45 s (Python feed loops and two idle
Prometheus servers), so the Node.js server of test_prometheus_server.py, whose in-process
latencies are wall-clock times and would show CPU contention, runs next to ~2 % of one core
instead of nothing.

An exception in a setup (a ``pytest.skip`` included) is raised again in its fixture, so the
module's tests error or skip exactly as when the setup ran in the fixture itself.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, ContextManager

_SETUPS: dict[str, Callable[[], ContextManager[Any]]] = {}


def register(fixture: str, setup: Callable[[], ContextManager[Any]]) -> None:
    """Run ``setup`` (a context manager function) concurrently with the other registered setups
    when the module-scoped fixture named ``fixture`` asks for it through :meth:`Runner.enter`."""
    _SETUPS[fixture] = setup


class _Run:
    def __init__(self, name: str, setup: Callable[[], ContextManager[Any]]):
        self.name, self.setup = name, setup
        self.ready, self.release = threading.Event(), threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None       # raised while entering the setup
        self.exit_error: BaseException | None = None  # raised while leaving it
        self.thread = threading.Thread(target=self._main, name=f"setup:{name}", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        entered = False
        try:
            with self.setup() as value:
                self.value, entered = value, True
                self.ready.set()
                self.release.wait()
        except BaseException as exc:  # noqa: BLE001 -- handed to the fixture (pytest.skip's Skipped included)
            if entered:
                self.exit_error = exc
            else:
                self.error = exc
        finally:
            self.ready.set()

    def stop(self, timeout: float = 120.0) -> None:
        self.release.set()
        self.thread.join(timeout)


class Runner:
    """The session's registry of started setups (see the module's docstring)."""

    def __init__(self, session):
        self._session = session
        self._runs: dict[str, _Run] = {}
        self._started = False
        self._lock = threading.Lock()

    def _start(self, name: str) -> _Run:
        with self._lock:
            if not self._started:
                self._started = True
                used = {fixture for item in self._session.items
                        for fixture in getattr(item, "fixturenames", ())}
                for other, setup in _SETUPS.items():
                    if other in used and other not in self._runs:
                        self._runs[other] = _Run(other, setup)
            if name not in self._runs:
                self._runs[name] = _Run(name, _SETUPS[name])
            return self._runs[name]

    @contextlib.contextmanager
    def enter(self, name: str):
        """Wait for the setup registered as ``name`` (starting the session's setups on the first call),
        yield its value, and stop it when the caller's context ends."""
        run = self._start(name)
        # every started setup, not only this one: no test runs while another setup's load still plays
        for started in list(self._runs.values()):
            started.ready.wait()
        if run.error is not None:
            raise run.error
        try:
            yield run.value
        finally:
            run.stop()
            if run.exit_error is not None:
                raise run.exit_error

    def close(self) -> None:
        for run in self._runs.values():
            run.stop()
