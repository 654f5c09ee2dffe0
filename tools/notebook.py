#!/usr/bin/env python
"""Execute, clean and convert the notebooks in ``notebooks/`` reproducibly.

Usage (from the repository root)::

    python tools/notebook.py run notebooks/01_*.ipynb     # execute in place, strip, print run time
    python tools/notebook.py strip notebooks/*.ipynb      # only strip widget state / volatile metadata
    python tools/notebook.py to-script NB.ipynb > NB.py   # percent format ("# %%"), for editing
    python tools/notebook.py from-script NB.py NB.ipynb   # back to a notebook (outputs empty; then `run`)

``run`` is what to do before committing a notebook: it executes every cell
top to bottom in a fresh kernel of *this* Python (the stored outputs nbval
compares against come from a clean run), then strips the saved widget state,
widget-view outputs and volatile metadata (:func:`capacity.notebook.strip_notebook`),
and writes the file with stable formatting.  A cell that calls a name this
release deprecates fails the run, as it fails ``tests/test_notebooks.py``
(a ``DeprecationWarning`` raised from a cell is an error in the kernel).
Equivalent by hand:
``jupyter nbconvert --to notebook --execute --inplace NB.ipynb`` followed by
``strip``.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.notebook import strip_notebook  # noqa: E402

_MARKDOWN = "# %% [markdown]"
_CODE = "# %%"


def _use_this_python() -> None:
    # The "python3" kernelspec launches `python` from PATH: make it this interpreter,
    # so the notebooks run against the package installed here.
    bindir = os.path.dirname(sys.executable)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    # A deprecated name called from a cell (module __main__ in the kernel) raises instead of warning.
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"),
                                                          "error::DeprecationWarning:__main__"]))


def _write(nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.validate(nb)
    text = nbformat.writes(nb, version=4)
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")


def run(paths: list[Path], timeout: int = 300) -> int:
    from nbclient import NotebookClient

    _use_this_python()
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        elapsed = time.perf_counter() - t0
        _write(strip_notebook(nb), path)
        print(f"{path}: executed in {elapsed:.1f} s")
    return 0


def strip(paths: list[Path]) -> int:
    for path in paths:
        _write(strip_notebook(nbformat.read(path, as_version=4)), path)
        print(f"{path}: stripped")
    return 0


def to_script(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    chunks = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            body = "\n".join(("# " + line) if line else "#" for line in cell.source.splitlines())
            chunks.append(f"{_MARKDOWN}\n{body}")
        else:
            chunks.append(f"{_CODE}\n{cell.source}")
    sys.stdout.write("\n\n".join(chunks) + "\n")
    return 0


def from_script(src: Path, dest: Path) -> int:
    text = src.read_text(encoding="utf-8")
    blocks = re.split(r"^(# %%(?: \[markdown\])?)[ \t]*\n", text, flags=re.M)
    cells = []
    # re.split with a group gives [preamble, marker, body, marker, body, ...].
    for marker, body in zip(blocks[1::2], blocks[2::2]):
        body = body.strip("\n")
        if marker == _MARKDOWN:
            lines = [re.sub(r"^# ?", "", line) for line in body.splitlines()]
            cell = nbformat.v4.new_markdown_cell("\n".join(lines))
        else:
            cell = nbformat.v4.new_code_cell(body)
        cell.id = f"cell-{len(cells) + 1:02d}"  # stable ids: clean diffs
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    })
    _write(nb, dest)
    print(f"{dest}: {len(cells)} cells")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="execute in place, then strip")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    p = sub.add_parser("strip", help="strip widget state and volatile metadata")
    p.add_argument("paths", nargs="+", type=Path)
    p = sub.add_parser("to-script", help="print the notebook in percent format")
    p.add_argument("path", type=Path)
    p = sub.add_parser("from-script", help="percent-format script to notebook (no outputs)")
    p.add_argument("src", type=Path)
    p.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "run":
        return run(args.paths, args.timeout)
    if args.cmd == "strip":
        return strip(args.paths)
    if args.cmd == "to-script":
        return to_script(args.path)
    return from_script(args.src, args.dest)


if __name__ == "__main__":
    sys.exit(main())
