"""The per-request table reader's engine: CSV, Parquet or a DataFrame, chunk by chunk, normalised.

:func:`capacity.logs.read_requests` and :func:`capacity.logs.iter_requests` are the public face (and
:func:`capacity.logs.aggregate` reads tables through :func:`_iter_requests` too); the column and unit
rules live in :mod:`._log_columns`.  Rows that do not convert are counted in the reader's
:class:`._log_io._Stats`, never dropped silently.
"""
from __future__ import annotations

import importlib.util
import os
import warnings

import numpy as np
import pandas as pd

from ._log_columns import _UNITS, _normalise_requests, _RequestColumns, _resolve_columns
from ._log_io import LogReadWarning, _Stats, decompressed

__all__: list[str] = []   # private: capacity.logs is the public face


def _is_parquet(source, fmt: str | None) -> bool:
    if fmt is not None:
        if fmt not in ("csv", "parquet"):
            raise ValueError(f"format must be 'csv', 'parquet' or None, got {fmt!r}")
        return fmt == "parquet"
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source).lower()
        if name.endswith((".parquet", ".pq", ".parq")):
            return True
        with open(name, "rb") as probe:
            return probe.read(4) == b"PAR1"
    return False


def _iter_requests(source, time_column, duration_column, endpoint_column, upstream_column, duration_unit,
                   upstream_unit, time_unit, chunksize, fmt, sep, stats: _Stats, **read_kwargs):
    if not isinstance(chunksize, (int, np.integer)) or isinstance(chunksize, bool) or chunksize < 1:
        raise ValueError(f"chunksize must be a positive integer, got {chunksize!r}")
    if time_unit is not None and time_unit not in _UNITS:
        raise ValueError(f"time_unit must be one of {sorted(_UNITS)!r}, got {time_unit!r}")

    def resolve(columns):
        return _resolve_columns(list(columns), time_column, duration_column, endpoint_column, upstream_column,
                                duration_unit, upstream_unit)

    if isinstance(source, pd.DataFrame):
        if len(source) == 0:
            raise ValueError("the DataFrame has no rows")
        rc = resolve(source.columns)
        for start in range(0, len(source), int(chunksize)):
            part = source.iloc[start:start + int(chunksize)]
            yield rc, _normalise_requests(part, rc, time_unit, stats, start, 0)
        return
    if _is_parquet(source, fmt):
        if importlib.util.find_spec("pyarrow") is None:
            raise ImportError(
                f"reading Parquet ({stats.source}) needs the optional package pyarrow, which is not "
                "installed: `pip install pyarrow`, or convert the file to CSV"
            )
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(source)
        rc = None
        start = 0
        for batch in pf.iter_batches(batch_size=int(chunksize)):
            part = batch.to_pandas()
            rc = rc or resolve(part.columns)
            yield rc, _normalise_requests(part, rc, time_unit, stats, start, 0)
            start += len(part)
        if stats.lines == 0:
            raise ValueError(f"{stats.source}: the file has no rows")
        return
    if hasattr(source, "read"):
        source = decompressed(source)   # a path's compression pandas infers from its name
    try:
        reader = pd.read_csv(source, chunksize=int(chunksize), sep=sep, dtype=object,
                             keep_default_na=False, na_values=[""], skip_blank_lines=False, **read_kwargs)
        rc = None
        start = 0
        with reader:
            for part in reader:
                rc = rc or resolve(part.columns)
                # +2: line 1 is the header, rows count from 0 (assumes one record per line, no quoted newlines)
                yield rc, _normalise_requests(part, rc, time_unit, stats, start, 2)
                start += len(part)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{stats.source}: the file is empty, there is no header nor data") from None
    except pd.errors.ParserError as exc:   # pandas' message names neither the file nor a likely cause
        raise ValueError(f"{stats.source}: not a CSV table (a binary file?): {str(exc).strip()}") from None
    except UnicodeDecodeError as exc:
        # Binary data (or text in another encoding) read as a CSV table: say which file and where.
        encoding = read_kwargs.get("encoding", "utf-8")
        raise ValueError(f"{stats.source}: not a text table in {encoding}: byte {exc.object[exc.start:exc.start + 1]!r} "
                         f"at byte offset {exc.start} of a chunk cannot be decoded (a binary or compressed file? "
                         f"give encoding= for other text encodings)") from None
    if stats.lines == 0:
        raise ValueError(f"{stats.source}: the file has a header but no rows")


def _check_units(rc: _RequestColumns, frame: pd.DataFrame) -> None:
    if rc.unit_from_name and len(frame) and np.nanmedian(frame["duration"].to_numpy()) > 60:
        warnings.warn(
            f"duration column {rc.duration!r} is read as seconds (nginx's unit for that name) but its "
            f"median is {np.nanmedian(frame['duration'].to_numpy()):.4g} s; if it is in milliseconds "
            "pass duration_unit='ms'",
            LogReadWarning,
            stacklevel=3,
        )
