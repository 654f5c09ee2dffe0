"""Readers for per-request logs: nginx access logs and CSV/Parquet request tables.

Capacity fits start from what a team already records: one line per request with
its time and its duration.  This module turns those records into typed pandas
DataFrames (times as UTC timestamps, durations in seconds) and never loses a
line silently: lines that do not parse are counted, the first few are kept with
their 1-based line numbers, and a warning says so.

Both readers work chunk by chunk (``iter_nginx`` / ``iter_requests`` yield one
DataFrame per chunk), so memory stays bounded on files larger than RAM.

Speed: ``read_nginx`` parses a whole chunk with a single multiline regular
expression and converts each column with vectorised pandas/numpy
(:mod:`capacity._log_nginx`); ``benchmarks/bench_logs.py`` measures it against the
plain per-line loop.  ``aggregate`` and ``convert`` stream logs of any size into
per-window aggregates or Parquet (:mod:`capacity._log_stream`, polars), on a Dask
cluster when given a client.

This module is the public face only; the engines live in private modules, one idea
each: :mod:`._log_format` (an nginx ``log_format`` into a regular expression),
:mod:`._log_nginx` (a chunk of nginx lines into a typed DataFrame), :mod:`._log_columns`
and :mod:`._log_tables` (request tables: column and unit rules, the CSV/Parquet
reader), :mod:`._log_io` (opening, decoding, counting skipped lines, the warnings),
:mod:`._log_stream` and :mod:`._log_aggregates` (the streaming aggregation).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import IO, Union

import pandas as pd

from ._log_aggregates import LogAggregates
from ._log_io import (LogReadWarning, MalformedLinesWarning, UndecodableLinesWarning, _check_max_examples,
                      _describe, _Stats)
from ._log_nginx import _iter_nginx
from ._log_tables import _check_units, _iter_requests

__all__ = [
    "COMBINED",
    "COMBINED_WITH_TIMES",
    "LogAggregates",
    "LogReadWarning",
    "aggregate",
    "convert",
    "MalformedLinesWarning",
    "UndecodableLinesWarning",
    "iter_nginx",
    "iter_requests",
    "read_nginx",
    "read_requests",
]

#: nginx's predefined ``combined`` log format.
COMBINED = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent"'
)
#: ``combined`` extended with the two timings a capacity fit needs (the default of ``read_nginx``).
COMBINED_WITH_TIMES = COMBINED + " $request_time $upstream_response_time"

_DEFAULT_CHUNK_LINES = 50_000

#: What the readers accept as input: a path, or an open file (binary or text).
LogSource = Union[str, "os.PathLike[str]", IO[bytes], IO[str]]


def iter_nginx(
    path: LogSource,
    log_format: str = COMBINED_WITH_TIMES,
    *,
    chunk_lines: int = _DEFAULT_CHUNK_LINES,
    encoding: str = "utf-8",
    errors: str = "replace",
    max_examples: int = 5,
    usecols: Sequence[str] | None = None,
) -> Iterator[pd.DataFrame]:
    """Read an nginx access log chunk by chunk, yielding one typed DataFrame per chunk.

    Memory stays bounded by ``chunk_lines``, so a caller can aggregate (e.g. per second) a log larger than
    RAM.

    Parameters
    ----------
    path, log_format, chunk_lines, encoding, errors, max_examples, usecols
        As in :func:`read_nginx`; ``chunk_lines`` is also the number of lines behind each yielded frame.

    Yields
    ------
    pandas.DataFrame
        The parsed lines of one chunk (possibly zero rows if every line of the chunk was malformed).
        ``.attrs`` describes that chunk: ``first_line`` (1-based), ``lines``, ``skipped``,
        ``skipped_examples`` (the chunk's first ``max_examples`` malformed lines as
        ``[(line_no, text), ...]``, line numbers counted from the start of the file),
        ``undecodable``, ``undecodable_examples`` (line numbers), ``source``.

    Raises
    ------
    ValueError
        At the first step if the file is empty; after the last chunk if no line at all parsed.

    Warns
    -----
    MalformedLinesWarning, UndecodableLinesWarning
        Once, after the last chunk, with the totals for the whole file.

    Examples
    --------
    >>> import io
    >>> log = io.StringIO(
    ...     '10.0.0.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a HTTP/1.1" 200 512 "-" "curl/8" 0.120 0.100\\n'
    ...     '10.0.0.2 - - [10/Oct/2023:13:55:37 +0000] "GET /b HTTP/1.1" 200 128 "-" "curl/8" 0.030 -\\n'
    ...     '10.0.0.3 - - [10/Oct/2023:13:55:37 +0000] "POST /c HTTP/1.1" 201 64 "-" "curl/8" 0.250 0.240\\n')
    >>> import pandas as pd
    >>> counts = [chunk.groupby(chunk["time"].dt.floor("s")).size()
    ...           for chunk in iter_nginx(log, chunk_lines=2)]
    >>> pd.concat(counts).groupby(level=0).sum().tolist()  # requests per second
    [1, 2]
    """
    stats = _Stats(_describe(path), _check_max_examples(max_examples))
    yield from _iter_nginx(path, log_format, chunk_lines, encoding, errors, max_examples, usecols, stats)
    stats.warn("lines", stacklevel=2)


def read_nginx(
    path: LogSource,
    log_format: str = COMBINED_WITH_TIMES,
    *,
    chunk_lines: int = _DEFAULT_CHUNK_LINES,
    encoding: str = "utf-8",
    errors: str = "replace",
    max_examples: int = 5,
    usecols: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Read an nginx access log into a typed DataFrame, one row per request.

    Parameters
    ----------
    path : str, os.PathLike or file-like
        The log file.  gzip, bzip2 and xz files are recognised by their magic bytes and decompressed on the
        fly.  A file object may be binary or text (e.g. ``io.StringIO``).
    log_format : str, optional
        The nginx ``log_format`` the file was written with: a format string such as
        ``'$remote_addr [$time_local] "$request" $status $request_time'``, or a pasted directive
        ``log_format main '...' '...';``.  Default :data:`COMBINED_WITH_TIMES`: nginx's ``combined``
        followed by ``$request_time $upstream_response_time``.
    chunk_lines : int, optional
        Lines parsed per chunk (bounds the memory used while reading).  The result does not depend on it.
    encoding : str, optional
        Text encoding of the file (default UTF-8).
    errors : str, optional
        Decoding error handler.  Default ``"replace"``: a line with invalid bytes is decoded with U+FFFD,
        counted in ``.attrs["undecodable"]``, and kept if the rest of it parses.  ``"strict"`` raises
        ``ValueError`` naming the line.
    max_examples : int, optional
        How many malformed lines to keep (with their line numbers) for the report.
    usecols : sequence of str, optional
        Output columns to keep (e.g. ``["time", "request_time"]``); others are neither captured nor
        converted, which is faster and smaller.

    Returns
    -------
    pandas.DataFrame
        Columns in the order of the format, typed:

        - ``time``: ``datetime64[us, UTC]``, from ``$msec`` (millisecond resolution) if present, else
          ``$time_iso8601``, else ``$time_local``, converted to UTC using the offset nginx wrote.  nginx
          logs a request when it *finishes*: ``time - request_time`` is when it arrived.
        - ``method``, ``path`` (the URI with its query string), ``protocol`` from ``$request``; all missing
          when the request line is not ``METHOD URI [PROTOCOL]`` (scanners, TLS on a plain port: nginx
          answers those with 400 and they are kept).
        - ``status`` (int64); ``bytes`` from ``$body_bytes_sent`` and other byte/length counters (Int64).
        - ``request_time`` (float seconds; ``-`` gives NaN, the row is kept).
        - ``upstream_response_time`` (float seconds; ``-`` -- not proxied -- gives NaN) and
          ``upstream_attempts`` (number of upstream servers tried, 0 for ``-``).  Also
          ``upstream_connect_time``, ``upstream_header_time`` (float seconds) when logged.
        - everything else (``remote_addr`` -- IPv4 or IPv6 --, ``remote_user``, ``http_referer``,
          ``http_user_agent``, ...) as strings (object dtype), verbatim, ``-`` included.

        ``.attrs``: ``lines`` (lines read), ``skipped`` (malformed lines), ``skipped_examples``
        (``[(line_no, text), ...]``, the first ``max_examples``, 1-based line numbers), ``undecodable``,
        ``undecodable_examples`` (line numbers), ``source``.

    Raises
    ------
    ValueError
        If the file is empty or no line matches ``log_format`` (the message names the file and shows the
        first lines), or for invalid arguments.

    Warns
    -----
    MalformedLinesWarning
        When lines were skipped, with their count and the first ones.
    UndecodableLinesWarning
        When lines held bytes invalid in ``encoding``.

    Notes
    -----
    A line is malformed when it does not match the format (garbage, missing fields, a broken quote), when a
    typed field does not convert (a date like ``31/Foo/2023``, a number like ``1.2.3``), or when it is the
    last line and has no final newline: nginx writes each record together with its newline, so such a line
    was cut off (log still being written, truncated copy) and even if it matched, its last number could be
    a truncated value.  Blank lines are malformed too.  Malformed lines are never dropped silently.

    Several upstream values.  When nginx tried more than one upstream server (``proxy_next_upstream``) it
    logs one time per attempt separated by ``", "``; an internal redirect to another upstream group adds
    ``" : "``.  The attempts run one after the other, so ``upstream_response_time`` is their **sum** -- the
    total time the request spent waiting on upstreams, comparable with ``request_time`` -- and
    ``upstream_attempts`` their number (filter ``upstream_attempts == 1`` to study a single server's
    service time).  ``-`` entries (no response time for that attempt) add nothing.

    Quoted fields rely on nginx's default escaping, which writes a ``"`` inside a value as ``\\x22``;
    formats declared with ``escape=json`` are not supported.  An unquoted variable ends at the first
    character of the literal text that follows it in the format, so an unquoted value that may contain
    that character (e.g. ``$http_x_forwarded_for``, a list joined by ``", "``, followed by a space) should
    be quoted in the format; otherwise its lines are reported as malformed.  The timing and byte-count
    variables and the ``$upstream_*`` lists are recognised by name and need no quotes.

    Parsing is chunk-wise: one multiline regular expression over the chunk's text, then vectorised column
    conversion.  ``benchmarks/bench_logs.py`` measures the lines per second (all columns, and the five
    columns a fit needs) against the plain per-line loop.

    Examples
    --------
    >>> import io
    >>> log = io.StringIO(
    ...     '2001:db8::1 - - [10/Oct/2023:13:55:36 -0700] "GET /api/users?id=7 HTTP/1.1" 200 2326 '
    ...     '"-" "Mozilla/5.0" 0.045 0.010, 0.030\\n'
    ...     '10.0.0.2 - bob [10/Oct/2023:13:55:37 -0700] "POST /api/orders HTTP/2.0" 503 0 '
    ...     '"https://example.com/" "curl/8.4.0" - -\\n')
    >>> df = read_nginx(log)
    >>> df[["method", "path", "status", "request_time", "upstream_response_time"]]
      method             path  status  request_time  upstream_response_time
    0    GET  /api/users?id=7     200         0.045                    0.04
    1   POST      /api/orders     503           NaN                     NaN
    >>> str(df["time"].iloc[0])
    '2023-10-10 20:55:36+00:00'
    >>> df.attrs["skipped"]
    0
    """
    stats = _Stats(_describe(path), _check_max_examples(max_examples))
    chunks = list(_iter_nginx(path, log_format, chunk_lines, encoding, errors, max_examples, usecols, stats))
    nonempty = [c for c in chunks if len(c)]
    if len(nonempty) == 1:
        df = nonempty[0]
    else:
        df = pd.concat(nonempty, ignore_index=True)
    df.attrs = stats.attrs()
    stats.warn("lines", stacklevel=2)
    return df



def iter_requests(
    path: LogSource | pd.DataFrame,
    *,
    time_column: str | None = None,
    duration_column: str | None = None,
    endpoint_column: str | None = None,
    upstream_column: str | None = None,
    duration_unit: str | None = None,
    upstream_unit: str | None = None,
    time_unit: str | None = None,
    chunksize: int = 1_000_000,
    format: str | None = None,
    sep: str = ",",
    max_examples: int = 5,
    **read_kwargs,
) -> Iterator[pd.DataFrame]:
    """Read a per-request table chunk by chunk; same parameters and columns as :func:`read_requests`.

    Yields
    ------
    pandas.DataFrame
        One normalised chunk (``time``, ``duration``, and ``endpoint``, ``upstream_time``, ``status`` when
        present).  Warnings and the empty-input error come once, for the whole input.

    Examples
    --------
    >>> import io
    >>> csv = io.StringIO("ts,latency_ms\\n1.0,120\\n1.5,80\\n2.2,95\\n")
    >>> [len(c) for c in iter_requests(csv, chunksize=2)]
    [2, 1]
    """
    stats = _Stats(_describe(path), _check_max_examples(max_examples))
    for rc, frame in _iter_requests(path, time_column, duration_column, endpoint_column, upstream_column,
                                    duration_unit, upstream_unit, time_unit, chunksize, format, sep, stats,
                                    **read_kwargs):
        _check_units(rc, frame)
        yield frame
    if stats.parsed == 0:
        raise ValueError(f"{stats.source}: none of the {stats.lines} rows has a valid time and duration")
    stats.warn("rows", stacklevel=2)


def read_requests(
    path: LogSource | pd.DataFrame,
    *,
    time_column: str | None = None,
    duration_column: str | None = None,
    endpoint_column: str | None = None,
    upstream_column: str | None = None,
    duration_unit: str | None = None,
    upstream_unit: str | None = None,
    time_unit: str | None = None,
    chunksize: int = 1_000_000,
    format: str | None = None,
    sep: str = ",",
    max_examples: int = 5,
    **read_kwargs,
) -> pd.DataFrame:
    """Read per-request records (CSV, Parquet or a DataFrame) into a normalised DataFrame.

    Parameters
    ----------
    path : str, os.PathLike, file-like or pandas.DataFrame
        A CSV file (compressed CSV too, by extension), a Parquet file (``.parquet``/``.pq`` or ``PAR1``
        magic; needs the optional package pyarrow), a file object holding CSV, or a DataFrame to normalise.
    time_column, duration_column : str, optional
        Column names; detected when omitted.  Time: the first of ``time``, ``timestamp``, ``ts``, ``start``,
        ``start_time``, ``datetime``, ``date``, ... (case-insensitive).  Duration: ``duration``, ``latency``,
        ``request_time``, ``response_time``, ``elapsed``, ``took``, ..., each optionally with a unit suffix.
    endpoint_column, upstream_column : str or False, optional
        Optional columns, detected when omitted (``endpoint``, ``route``, ``path``, ``url``, ``uri``, ...;
        ``upstream_time``, ``upstream_response_time``, ``backend_time``, ...); ``False`` ignores them.
    duration_unit, upstream_unit : {"s", "ms", "us", "ns"}, optional
        Unit of the duration/upstream column.  By default read from the column name's suffix (``_ms``,
        ``_us``, ``_ns``, ``_s``, ``_sec``, ``_seconds``, ...); seconds for nginx's ``request_time`` and
        ``upstream_response_time`` (and ``upstream_time``), which are seconds by definition.  Any other
        name without a unit is refused (``ValueError`` naming the column and how to state it): a
        ``latency`` of 25 is 25 ms as often as 25 s, and the unit is never guessed.
    time_unit : {"s", "ms", "us", "ns"}, optional
        Unit of a *numeric* time column (epoch or relative); the result is in seconds.
    chunksize : int, optional
        Rows per chunk while reading (bounds memory).
    format : {"csv", "parquet"}, optional
        Force the file type (useful for file objects).
    sep : str, optional
        CSV field separator.
    max_examples : int, optional
        How many bad rows to keep for the report.
    **read_kwargs
        Passed to :func:`pandas.read_csv`.

    Returns
    -------
    pandas.DataFrame
        ``time`` (``datetime64[us, UTC]`` when the column holds dates -- naive ones are taken as UTC --, or
        float seconds when it holds numbers), ``duration`` (float seconds; NaN where missing), and when
        present ``endpoint`` (strings), ``upstream_time`` (float seconds), ``status`` (Int64).
        ``.attrs`` as in :func:`read_nginx`: ``lines`` (rows read), ``skipped``, ``skipped_examples``
        (``[(line_no, text), ...]``: the 1-based line in the CSV file with the header as line 1, assuming one
        record per line; for a DataFrame or Parquet, the 0-based row position), ``source``.

    Raises
    ------
    ValueError
        Empty input, no usable time/duration column (the message lists the columns), no valid row.
    ImportError
        Parquet input without pyarrow installed.

    Warns
    -----
    MalformedLinesWarning
        Rows whose time is missing or unparsable, or whose duration (or upstream time) is unparsable or
        negative, are skipped, counted and reported.  A missing duration is kept as NaN.

    Examples
    --------
    >>> import io
    >>> csv = io.StringIO(
    ...     "timestamp,route,latency_ms,upstream_ms\\n"
    ...     "2024-03-01T10:00:00.120Z,/api/a,45,30\\n"
    ...     "2024-03-01T10:00:00.480Z,/api/b,120.5,\\n")
    >>> df = read_requests(csv)
    >>> df[["endpoint", "duration", "upstream_time"]]
      endpoint  duration  upstream_time
    0   /api/a    0.0450           0.03
    1   /api/b    0.1205            NaN
    >>> str(df["time"].iloc[1])
    '2024-03-01 10:00:00.480000+00:00'
    """
    stats = _Stats(_describe(path), _check_max_examples(max_examples))
    rc = None
    frames = []
    for rc, frame in _iter_requests(path, time_column, duration_column, endpoint_column, upstream_column,
                                    duration_unit, upstream_unit, time_unit, chunksize, format, sep, stats,
                                    **read_kwargs):
        frames.append(frame)
    if stats.parsed == 0:
        raise ValueError(f"{stats.source}: none of the {stats.lines} rows has a valid time and duration")
    frames = [f for f in frames if len(f)]
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    _check_units(rc, df)
    df.attrs = stats.attrs()
    del df.attrs["undecodable"], df.attrs["undecodable_examples"]
    stats.warn("rows", stacklevel=2)
    return df


def aggregate(
    source,
    window: float = 60.0,
    *,
    log_format: str = COMBINED_WITH_TIMES,
    format: str | None = None,
    timing: str = "duration",
    edges: Sequence[float] | None = None,
    by_endpoint: bool = True,
    chunk_lines: int = 100_000,
    threads: int | None = None,
    max_examples: int = 5,
    client=None,
    **table_options,
) -> LogAggregates:
    """Stream a log of any size into per-window, per-endpoint counts and duration histograms.

    Memory does not grow with the log: lines are read, parsed and folded in chunks of at most
    ``chunk_lines``, and only the aggregates are kept.  Needs the optional packages polars and pyarrow
    (``pip install 'capacity[logs]'``); zstd files also need zstandard.

    Parameters
    ----------
    source : str, os.PathLike or list of them
        A file, a glob (``"logs/access.log-*.gz"``) or a directory (every file in it, sorted by name):
        nginx access logs (plain, gzip, zstd, bz2 or xz, recognised by their magic bytes), CSV request
        tables (``.csv``/``.tsv``, optionally compressed), Parquet request tables, or Parquet files written
        by :meth:`LogAggregates.to_parquet` (read back and merged).
    window : float, default 60
        Window length in seconds.  Windows start at multiples of it since the epoch.
    log_format : str, optional
        The nginx ``log_format`` (as in :func:`read_nginx`); it must hold a time (``$time_local``,
        ``$time_iso8601`` or ``$msec``) and ``$request_time`` or ``$upstream_response_time``.
    format : {"nginx", "csv", "parquet"}, optional
        Force the kind of every file (default: from the name and the magic bytes; nginx otherwise).
    timing : {"duration", "upstream"}, default "duration"
        What the histograms count: the whole request time (``$request_time``, a table's duration column)
        or the upstream (backend) time (``$upstream_response_time`` summed over the servers tried).
    edges : sequence of float, optional
        Bucket bounds in seconds, increasing.  Default: 10 per decade from 100 us to 100 s.
    by_endpoint : bool, default True
        Keep one row per endpoint within each window (``"METHOD /path"``, query string dropped).
    chunk_lines : int, default 100000
        Most lines (rows) parsed at once; with ``threads`` it bounds the memory used.
    threads : int, optional
        Chunks parsed at the same time (default: the cores, at most 4).
    max_examples : int, default 5
        Skipped lines kept with their file and line number for the report.
    client : dask.distributed.Client, optional
        Aggregate each file on this Dask cluster (the files must be readable there) and fold them here:
        the same result as without it (``pip install 'capacity[dask]'``).
    **table_options
        For CSV and Parquet tables: ``time_column``, ``duration_column``, ``endpoint_column``,
        ``upstream_column``, ``duration_unit``, ``upstream_unit``, ``time_unit``, ``sep`` and
        :func:`pandas.read_csv` arguments, as in :func:`read_requests`.

    Returns
    -------
    LogAggregates
        ``table`` (per window and endpoint: requests, errors, duration_sum, no_duration and the bucket
        counts), ``skipped_by_kind``, ``windows()`` (the input of :func:`capacity.fit.from_histograms`),
        ``to_parquet(path)``.

    Raises
    ------
    ValueError
        Bad arguments (named); an empty log; no line parsed; a table duration column whose unit cannot be
        read from its name (state it with ``duration_unit=``).
    FileNotFoundError
        A path that does not exist.
    ImportError
        Without polars and pyarrow (the message says how to install them).

    Warns
    -----
    MalformedLinesWarning
        Skipped lines, by kind, with the first ones.  No line is dropped silently.
    UndecodableLinesWarning
        Lines with bytes invalid in UTF-8.

    Notes
    -----
    Assumes nginx's default escaping (a ``"`` inside any value is written ``\\x22``), as
    :func:`read_nginx` does; a raw ``"`` in an unquoted value makes the line malformed here.  The
    counts are those of :func:`read_nginx` grouped by window: the same lines are skipped.  Times are
    request *end* times, as nginx logs them.

    Examples
    --------
    >>> import os, tempfile
    >>> lines = ['10.0.0.1 - - [10/Oct/2023:13:55:36 +0000] "GET /a?x=1 HTTP/1.1" 200 5 "-" "c" 0.120 0.100',
    ...          '10.0.0.2 - - [10/Oct/2023:13:55:37 +0000] "GET /b HTTP/1.1" 503 5 "-" "c" 0.030 -',
    ...          'garbage']
    >>> path = os.path.join(tempfile.mkdtemp(), "access.log")
    >>> with open(path, "w") as f:
    ...     _ = f.write("\\n".join(lines) + "\\n")
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     agg = aggregate(path, window=60)
    >>> agg.table[["endpoint", "requests", "errors"]]
      endpoint  requests  errors
    0   GET /a         1       0
    1   GET /b         1       1
    >>> agg.skipped_by_kind
    {'no_match': 1}
    """
    from ._log_stream import _aggregate

    return _aggregate(source, window=window, log_format=log_format, fmt=format, timing=timing, edges=edges,
                      by_endpoint=by_endpoint, chunk_lines=chunk_lines, threads=threads, client=client,
                      max_examples=max_examples, options=table_options, table_reader=_iter_requests)


def convert(
    source,
    out,
    *,
    aggregate: bool = False,
    window: float = 60.0,
    log_format: str = COMBINED_WITH_TIMES,
    format: str | None = None,
    timing: str = "duration",
    chunk_lines: int = 100_000,
    threads: int | None = None,
    max_examples: int = 5,
    client=None,
    **table_options,
) -> dict:
    """Write a log's parsed requests (or, with ``aggregate=True``, its per-window aggregates) to Parquet.

    The log is parsed once, streaming, as by :func:`aggregate`; :func:`read_requests` reads the
    requests file back (``time``, ``endpoint``, ``status``, ``request_time``, ``upstream_response_time``,
    times in UTC, durations in seconds) and :func:`aggregate` the aggregates file.

    Parameters
    ----------
    source, window, log_format, format, timing, chunk_lines, threads, max_examples, client, **table_options
        As in :func:`aggregate` (``client`` with ``aggregate=True`` only).
    out : str or os.PathLike
        The Parquet file to write.
    aggregate : bool, default False
        Write the per-window, per-endpoint aggregates instead of one row per request.

    Returns
    -------
    dict
        ``source``, ``out``, ``lines`` (read), ``rows`` (written), ``skipped``, ``skipped_by_kind``,
        ``undecodable``.

    Raises
    ------
    ValueError, FileNotFoundError, ImportError
        As :func:`aggregate`.

    Warns
    -----
    MalformedLinesWarning, UndecodableLinesWarning
        As :func:`aggregate`: skipped lines are counted by kind and reported.
    """
    from ._log_stream import _aggregate

    if not isinstance(aggregate, bool):
        raise ValueError(f"aggregate must be True or False, got {aggregate!r}")
    if not isinstance(out, (str, os.PathLike)):
        raise ValueError(f"out must be a file path, got {out!r}")
    common = dict(window=window, log_format=log_format, fmt=format, timing=timing, edges=None,
                  by_endpoint=True, chunk_lines=chunk_lines, threads=threads, max_examples=max_examples,
                  options=table_options, table_reader=_iter_requests)
    if not aggregate:
        return _aggregate(source, out=out, client=client, **common)
    agg = _aggregate(source, client=client, **common)
    agg.to_parquet(out)
    return {"source": agg.source, "out": os.fspath(out), "lines": agg.lines, "rows": len(agg.table),
            "skipped": agg.skipped, "skipped_by_kind": dict(agg.skipped_by_kind), "undecodable": agg.undecodable}
