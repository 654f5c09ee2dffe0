"""Overload: bursts, backlogs, timeouts, retries (being split into modules of one idea)."""
from ._goodput import *  # noqa: F401,F403 - the split into modules follows in the next commits
from ._goodput import __all__  # noqa: F401
