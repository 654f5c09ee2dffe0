"""Run the ``capacity`` command line in this process, as a test sees it (one helper for every test file)."""
from __future__ import annotations

import contextlib
import io

from capacity import cli


def run_cli(*args: str) -> tuple[int, str, str]:
    """``capacity ARGS``: (exit code, stdout, stderr); argparse's exits (--help, usage errors) included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()
