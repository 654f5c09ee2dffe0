"""The per-line nginx reader's engine: one chunk of log lines into a typed pandas DataFrame.

:func:`capacity.logs.read_nginx` and :func:`capacity.logs.iter_nginx` are the public face; this module
holds what they run.  A chunk is parsed with a single multiline regular expression (``re.findall`` runs
the per-line loop in C; the pattern is built by :mod:`._log_format`) and each column is converted with
vectorised pandas/numpy; values that repeat (timestamps, status codes, response times at millisecond
resolution) are converted once per distinct value.  Every line that does not parse is counted in the
reader's :class:`._log_io._Stats` with its line number, never dropped silently.
"""
from __future__ import annotations

import codecs
import gc
import itertools
import re

import numpy as np
import pandas as pd

from ._log_format import _FLOAT_VARS, _INT_VARS, _MULTI_FLOAT_VARS, _RENAME, _compile_format, _CompiledFormat
from ._log_io import _decode_chunk, _open_binary_or_text, _Stats

__all__: list[str] = []   # private: capacity.logs is the public face


# ---------------------------------------------------------------------------------------------------------
# Column conversion (vectorised; distinct values converted once)
# ---------------------------------------------------------------------------------------------------------

def _via_uniques(values: np.ndarray, convert) -> np.ndarray:
    """Apply ``convert`` to the distinct values only: log columns repeat heavily."""
    codes, uniques = pd.factorize(values)
    return np.asarray(convert(uniques))[codes]


def _to_float(uniques: np.ndarray) -> np.ndarray:
    try:
        # float() per element in C: ~2x faster than to_numeric when every value is a number.
        return np.asarray(uniques, dtype=object).astype(float)
    except (ValueError, TypeError):
        pass
    out = pd.to_numeric(uniques, errors="coerce").astype(float)
    return np.asarray(out, dtype=float)


def _multi_float(uniques: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum of a multi-valued timing ("0.010, 0.020 : 0.005"), number of values, and an 'unparsable' flag."""
    total = _to_float(uniques)
    attempts = np.ones(len(uniques), dtype=np.int64)
    bad = np.zeros(len(uniques), dtype=bool)
    for j in np.flatnonzero(np.isnan(total)):
        text = uniques[j]
        if text == "-":
            attempts[j] = 0
            continue
        parts = re.split(r"\s*[,:]\s*", text)
        attempts[j] = len(parts)
        nums = []
        for p in parts:
            if p == "-":
                continue
            try:
                nums.append(float(p))
            except ValueError:
                bad[j] = True
                break
        if nums and not bad[j]:
            total[j] = sum(nums)
    return total, attempts, bad


def _time_column(var: str, values: np.ndarray) -> pd.Series:
    if var == "msec":
        secs = pd.to_numeric(values, errors="coerce")
        ms = np.round(np.asarray(secs, dtype=float) * 1e3)
        t = pd.to_datetime(ms, unit="ms", utc=True, errors="coerce")
    else:
        # Many requests share a second: parse each distinct stamp once.
        fmt = "%d/%b/%Y:%H:%M:%S %z" if var == "time_local" else "%Y-%m-%dT%H:%M:%S%z"
        codes, uniques = pd.factorize(values)
        parsed = pd.to_datetime(pd.Series(uniques, dtype=object), format=fmt, utc=True, errors="coerce",
                                cache=False)
        t = pd.DatetimeIndex(parsed).take(codes)
    return pd.Series(t).dt.as_unit("us").reset_index(drop=True)


def _convert(cf: _CompiledFormat, cols: np.ndarray, good: np.ndarray) -> tuple[dict, np.ndarray]:
    """Typed columns for the rows in ``good``; returns them and a mask (over ``good``) of rows that failed."""
    n = int(good.sum())
    allgood = n == len(good)
    gi = {g: i for i, g in enumerate(cf.group_names)}
    failed = np.zeros(n, dtype=bool)
    out: dict[str, object] = {}

    def col(g):
        c = cols[:, gi[g]]
        return c if allgood else c[good]

    for f in cf.fields:
        var = f.var
        if var == "request":
            method, path, protocol, _unsplit_text = (col(g) for g in f.groups)
            method, path, protocol = (np.array(a, dtype=object) for a in (method, path, protocol))
            # A request line that is not "METHOD URI [PROTOCOL]" (scanners, TLS on a plain port) is a real
            # request nginx answered (usually 400): keep the line, with no method/path.
            unsplit = method == ""
            if unsplit.any():
                method[unsplit] = None
                path[unsplit] = None
            protocol[protocol == ""] = None
            out["method"], out["path"], out["protocol"] = method, path, protocol
        elif var == cf.time_var:
            t = _time_column(var, col(f.groups[0]))
            failed |= t.isna().to_numpy()
            out["time"] = t
        elif var == "status":
            out["status"] = _via_uniques(col(f.groups[0]), lambda u: np.asarray(u).astype(np.int64))
        elif var in _FLOAT_VARS:
            raw = col(f.groups[0])
            vals = _via_uniques(raw, _to_float)
            failed |= np.isnan(vals) & (raw != "-")
            out[var] = vals
        elif var in _MULTI_FLOAT_VARS:
            codes, uniques = pd.factorize(col(f.groups[0]))
            total, attempts, bad = _multi_float(uniques)
            out[var] = total[codes]
            failed |= bad[codes]
            if "upstream_attempts" in f.columns and "upstream_attempts" in cf.columns:
                out["upstream_attempts"] = attempts[codes]
        elif var in _INT_VARS:
            raw = col(f.groups[0])
            vals = _to_float(raw)  # byte counts are mostly distinct: factorizing would not pay
            nan = np.isnan(vals)
            failed |= nan & (raw != "-")
            out[_RENAME.get(var, var)] = pd.arrays.IntegerArray(np.where(nan, 0, vals).astype(np.int64), nan)
        else:
            out[_RENAME.get(var, var)] = np.array(col(f.groups[0]), dtype=object)
    return {c: out[c] for c in cf.columns if c in out}, failed


def _empty_frame(cf: _CompiledFormat) -> pd.DataFrame:
    dtypes = {"time": "datetime64[us, UTC]", "status": "int64", "request_time": "float64",
              "upstream_attempts": "int64", "bytes": "Int64"}
    for v in _MULTI_FLOAT_VARS:
        dtypes[v] = "float64"
    for v in _INT_VARS:
        dtypes.setdefault(_RENAME.get(v, v), "Int64")
    return pd.DataFrame({c: pd.Series([], dtype=dtypes.get(c, object)) for c in cf.columns})


def _frame(columns: dict, cf: _CompiledFormat) -> pd.DataFrame:
    if not columns or len(next(iter(columns.values()))) == 0:
        return _empty_frame(cf)
    data = {}
    for c, v in columns.items():
        if isinstance(v, np.ndarray) and v.dtype == object:
            data[c] = pd.Series(v, dtype=object, copy=False)
        else:
            data[c] = v
    return pd.DataFrame(data, copy=False)


def _parse_chunk(cf: _CompiledFormat, lines: list, first_line: int, encoding: str, errors: str,
                 stats: _Stats) -> pd.DataFrame:
    # findall builds one tuple per line: with the cyclic garbage collector on, those allocations trigger
    # repeated generation scans that cost ~40% of the parse.  Nothing here creates reference cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_chunk_nogc(cf, lines, first_line, encoding, errors, stats)
    finally:
        if was_enabled:
            gc.enable()


def _parse_chunk_nogc(cf: _CompiledFormat, lines: list, first_line: int, encoding: str, errors: str,
                      stats: _Stats) -> pd.DataFrame:
    text = _decode_chunk(lines, first_line, encoding, errors, stats)
    rows = cf.regex.findall(text)
    n = len(lines)
    # findall yields exactly one tuple per line (the catch-all alternative matches anything), plus one
    # empty match after a final newline: drop it.
    del rows[n:]
    if len(rows) != n:  # pragma: no cover - guarded by the pattern's construction
        raise RuntimeError(f"internal error: {len(rows)} matches for {n} lines")
    width = len(cf.group_names)
    # (lines x groups) object matrix; fromiter over the flattened tuples is ~2x faster than np.array(rows)
    cols = np.fromiter(itertools.chain.from_iterable(rows), dtype=object, count=n * width).reshape(n, width)
    del rows
    good = cols[:, cf.witness] != ""
    last = lines[-1]
    if not (last.endswith(b"\n") if isinstance(last, bytes) else last.endswith("\n")):
        # nginx writes each record with its newline in one write(): a last line without one was cut off
        # (file still being written, truncated copy).  Even if it happens to match, its final field may be
        # a cut number, so it is counted as malformed rather than trusted.
        good[-1] = False
    columns, failed = _convert(cf, cols, good)
    if failed.any():
        keep = ~failed
        columns = {c: (v[keep] if not isinstance(v, pd.Series) else v[keep].reset_index(drop=True))
                   for c, v in columns.items()}
        good_idx = np.flatnonzero(good)
        good[good_idx[failed]] = False
    bad_idx = np.flatnonzero(~good)
    if len(bad_idx):
        texts = [(lines[i].decode(encoding, "replace") if isinstance(lines[i], bytes) else lines[i])
                 .rstrip("\r\n") for i in bad_idx[: stats.max_examples]]
        stats.add_bad([first_line + int(i) for i in bad_idx], texts)
    stats.lines += n
    stats.parsed += n - len(bad_idx)
    return _frame(columns, cf)


def _chunk_attrs(stats: _Stats, before: tuple) -> dict:
    lines0, skipped0, und0, nund0 = before
    return {
        "source": stats.source,
        "first_line": lines0 + 1,
        "lines": stats.lines - lines0,
        "skipped": stats.skipped - skipped0,
        "skipped_examples": list(stats.chunk_examples),
        "undecodable": stats.undecodable - und0,
        "undecodable_examples": stats.undecodable_examples[nund0:],
    }


def _iter_nginx(path, log_format, chunk_lines, encoding, errors, max_examples, usecols, stats: _Stats):
    if not isinstance(chunk_lines, (int, np.integer)) or isinstance(chunk_lines, bool) or chunk_lines < 1:
        raise ValueError(f"chunk_lines must be a positive integer, got {chunk_lines!r}")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"encoding must be a Python codec name, got {encoding!r}") from None
    try:
        codecs.lookup_error(errors)
    except LookupError:
        raise ValueError(f"errors must be a codec error handler ('replace', 'strict', ...), got {errors!r}") \
            from None
    cf = _compile_format(log_format, usecols)
    f, must_close = _open_binary_or_text(path)
    try:
        while True:
            lines = list(itertools.islice(f, int(chunk_lines)))
            if not lines:
                break
            before = (stats.lines, stats.skipped, stats.undecodable, len(stats.undecodable_examples))
            stats.chunk_examples = []
            df = _parse_chunk(cf, lines, stats.lines + 1, encoding, errors, stats)
            df.attrs = _chunk_attrs(stats, before)
            yield df
    finally:
        if must_close:
            f.close()
    if stats.lines == 0:
        raise ValueError(f"{stats.source}: the file is empty, there are no log lines to read")
    if stats.parsed == 0:
        shown = "; ".join(f"line {n}: {t[:120]!r}" for n, t in stats.examples[:3])
        raise ValueError(
            f"{stats.source}: none of the {stats.lines} lines matches the log format {cf.log_format!r} "
            f"(wrong log_format?); first lines: {shown}"
        )
