"""Input handling of the log readers: opening paths or handles (compressed or not), decoding
chunk by chunk, and counting what could not be read so that no line is dropped silently.

The warning classes live here because :class:`_Stats` emits them; :mod:`capacity.logs` is their
public home and re-exports them.
"""
from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__: list[str] = []   # private: capacity.logs is the public face


class LogReadWarning(UserWarning):
    """Base class of the warnings emitted while reading request logs."""

    __module__ = "capacity.logs"   # the public home (re-exported there); defined here for _Stats


class MalformedLinesWarning(LogReadWarning):
    """Some lines (or rows) could not be parsed and were skipped; they are counted, not lost."""

    __module__ = "capacity.logs"


class UndecodableLinesWarning(LogReadWarning):
    """Some lines held bytes invalid in the declared encoding; they were decoded with replacement."""

    __module__ = "capacity.logs"


def _check_max_examples(max_examples) -> int:
    if isinstance(max_examples, bool) or not isinstance(max_examples, (int, np.integer)) or max_examples < 0:
        raise ValueError(f"max_examples must be a non-negative integer, got {max_examples!r}")
    return int(max_examples)


def _describe(source) -> str:
    if isinstance(source, pd.DataFrame):
        return "<DataFrame>"
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", None) or f"<{type(source).__name__}>"


def _open_binary_or_text(source):
    """Open ``source`` for reading; returns (file, must_close).

    Compressed files are recognised by their magic bytes, not their name.
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        with open(path, "rb") as probe:
            magic = probe.read(6)
        if magic[:2] == b"\x1f\x8b":
            return gzip.open(path, "rb"), True
        if magic[:3] == b"BZh":
            return bz2.open(path, "rb"), True
        if magic == b"\xfd7zXZ\x00":
            return lzma.open(path, "rb"), True
        return open(path, "rb"), True
    if hasattr(source, "read"):
        return decompressed(source), False
    raise ValueError(f"path must be a file path or a file-like object, got {source!r}")


def decompressed(handle):
    """A binary handle on gzip, bz2 or xz data as a handle on the data itself (recognised by the
    magic bytes, as for paths); any other handle unchanged.  Needs a handle that can peek or seek:
    others are read as they come."""
    if isinstance(handle, io.TextIOBase):
        return handle
    if hasattr(handle, "peek"):
        magic = handle.peek(6)[:6]
    elif getattr(handle, "seekable", lambda: False)():
        at = handle.tell()
        magic = handle.read(6)
        handle.seek(at)
    else:
        return handle
    if not isinstance(magic, bytes):
        return handle
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(handle, "rb")
    if magic[:3] == b"BZh":
        return bz2.open(handle, "rb")
    if magic == b"\xfd7zXZ\x00":
        return lzma.open(handle, "rb")
    return handle


@dataclass
class _Stats:
    source: str
    max_examples: int
    lines: int = 0
    parsed: int = 0
    skipped: int = 0
    examples: list = field(default_factory=list)
    chunk_examples: list = field(default_factory=list)
    undecodable: int = 0
    undecodable_examples: list = field(default_factory=list)

    def add_bad(self, line_nos, texts) -> None:
        """Count bad lines; ``texts`` holds (at least) the first ``max_examples`` of them."""
        self.skipped += len(line_nos)
        self.chunk_examples = list(zip(line_nos[: self.max_examples], texts[: self.max_examples]))
        room = self.max_examples - len(self.examples)
        if room > 0:
            self.examples.extend(self.chunk_examples[:room])

    def add_undecodable(self, line_nos) -> None:
        self.undecodable += len(line_nos)
        room = self.max_examples - len(self.undecodable_examples)
        if room > 0:
            self.undecodable_examples.extend(line_nos[:room])

    def attrs(self) -> dict:
        return {
            "source": self.source,
            "lines": self.lines,
            "skipped": self.skipped,
            "skipped_examples": list(self.examples),
            "undecodable": self.undecodable,
            "undecodable_examples": list(self.undecodable_examples),
        }

    def warn(self, what: str, stacklevel: int) -> None:
        if self.skipped:
            shown = "\n".join(f"  line {n}: {t[:200]!r}" for n, t in self.examples)
            warnings.warn(
                f"{self.source}: skipped {self.skipped} of {self.lines} {what} that did not parse "
                f"(see .attrs['skipped_examples']); first ones:\n{shown}",
                MalformedLinesWarning,
                stacklevel=stacklevel + 1,
            )
        if self.undecodable:
            warnings.warn(
                f"{self.source}: {self.undecodable} line(s) held bytes that are not valid in the declared "
                f"encoding and were decoded with replacement characters (lines "
                f"{', '.join(map(str, self.undecodable_examples))}"
                f"{', ...' if self.undecodable > len(self.undecodable_examples) else ''})",
                UndecodableLinesWarning,
                stacklevel=stacklevel + 1,
            )


def _decode_chunk(lines: list, first_line: int, encoding: str, errors: str, stats: _Stats) -> str:
    if not lines or isinstance(lines[0], str):
        return "".join(lines)
    blob = b"".join(lines)
    try:
        return blob.decode(encoding)
    except UnicodeDecodeError:
        pass
    decoder = codecs.getdecoder(encoding)
    bad = []
    for i, raw in enumerate(lines):
        try:
            decoder(raw, "strict")
        except UnicodeDecodeError as exc:
            if errors == "strict":
                raise ValueError(
                    f"{stats.source}: line {first_line + i} is not valid {encoding}: {exc}") from None
            bad.append(first_line + i)
    stats.add_undecodable(bad)
    return blob.decode(encoding, errors)
