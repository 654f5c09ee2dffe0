"""Streaming per-window aggregation of request logs: bounded memory, both cores, every skipped line counted.

:func:`capacity.logs.aggregate` reads nginx access logs (any ``log_format``; plain, gzip, zstd, bz2,
xz), CSV and Parquet request tables -- one file, a glob or a directory -- in chunks of at most
``chunk_lines`` lines, and keeps only per-window, per-endpoint counts: requests, 5xx answers, the
duration's sum and its histogram on fixed log-spaced bucket edges.  What it holds does not grow with
the size of the log, only with the number of (window, endpoint) pairs.

Engine (measured, ``benchmarks/bench_logs.py``): the reading thread reads 8 MB blocks of whole lines
straight into arrays (no copy, no scan of its own); a parsing thread per core finds the block's newlines (numpy) and hands its lines to
polars as one Arrow array without copying.  Each chunk is then two polars queries with a few Python calls
between them, so the GIL is free nearly all the time and the threads overlap: (1) an anchored, one-pass
regular expression (Rust ``regex``: its one-pass DFA resolves the capture groups without backtracking)
cuts every line, the captures are typed and every line gets its kind (parsed or one skipped kind);
(2) the parsed lines are grouped by (window, bucket, endpoint) -- by the request's pieces, the endpoint
being made on the few groups rather than on every line.  The regular expression takes about two
thirds of a chunk's CPU time and half of the whole run's (2 M lines, ``bench_logs.py``).  The aggregates are a :class:`LogAggregates` (:mod:`._log_aggregates`); CSV and Parquet
tables go through :mod:`._log_columns` (their column and unit rules) chunk by chunk.  Given a Dask client,
each file is one task on the cluster (:func:`_file_state`) and the results are folded here in the files'
order (:meth:`_Accumulator.merge`), which gives what one machine reading them in turn gives.
"""
from __future__ import annotations

import collections
import glob
import importlib.util
import io
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ._log_aggregates import LogAggregates, _Accumulator, _default_edges, _fold, _group
from ._log_format import (_FLOAT_VARS, _INT_VARS, _MULTI_FLOAT_VARS, _TIME_PATTERNS, _TIME_VARS, _VAR_RE,
                          _normalise_format)
from ._log_io import _check_max_examples, decompressed

__all__: list[str] = []   # private: capacity.logs is the public face

_BLOCK_BYTES = 8 << 20
_SLACK_BYTES = 64 << 10   # room to finish the last line of a block without copying it
_DEFAULT_CHUNK_LINES = 100_000
_NUM = r"(?:[0-9.]+|-)"
_MULTI_SEP = r"(?:, | : )"
_META = set("\\.^$|?*+()[]{}-#&~")


def _need_polars():
    if importlib.util.find_spec("polars") is None or importlib.util.find_spec("pyarrow") is None:
        raise ImportError(
            "capacity.logs.aggregate and `capacity logs convert` need the optional packages polars and "
            "pyarrow, which are not installed: `pip install 'capacity[logs]'` (or `pip install polars "
            "pyarrow zstandard`); logs.read_nginx and logs.read_requests work without them")
    import polars as pl
    import pyarrow as pa

    return pl, pa


# ---------------------------------------------------------------------------------------------------------
# The log_format as one anchored regular expression for Rust's regex crate
# ---------------------------------------------------------------------------------------------------------

def _escape(text: str) -> str:
    return "".join("\\" + c if c in _META else ("\\n" if c == "\n" else c) for c in text)


class _NginxSpec:
    """The compiled format: the regex (capture groups named after what they feed) and what it has."""

    def __init__(self, log_format: str):
        if not isinstance(log_format, str):
            raise ValueError(f"log_format must be an nginx log_format string, got {log_format!r}")
        fmt = _normalise_format(log_format)
        parts = _VAR_RE.split(fmt)
        literals = parts[0::3]
        names = [a or b for a, b in zip(parts[1::3], parts[2::3])]
        self.log_format = fmt
        self.time_var = next((v for v in _TIME_VARS if v in names), None)
        if self.time_var is None:
            raise ValueError(f"log_format must contain $time_local, $time_iso8601 or $msec to place requests in "
                             f"windows, got {log_format!r}")
        if "request_time" not in names and "upstream_response_time" not in names:
            raise ValueError("log_format must contain $request_time or $upstream_response_time (the durations "
                             f"the histograms count), got {log_format!r}")
        wanted = {self.time_var: "time", "request": "request", "status": "status",
                  "request_time": "request_time", "upstream_response_time": "upstream"}
        pieces, seen = ["^"], set()
        for i, var in enumerate(names):
            before, after = literals[i], literals[i + 1]
            pieces.append(_escape(before))
            quoted = before.endswith('"') and after[:1] == '"'
            stop = _escape(after[:1]) if after else ""
            plain = rf'[^{stop}"\n]'
            if var == "request" and quoted and var not in seen:
                # "METHOD /path?query PROTO" cut at its first space, '?' and next space; every string
                # matches, and one way only, so the regex stays one-pass (see _endpoint)
                pieces.append(r'(?P<method>[^ "\n]*)'
                              r'(?: (?P<path>[^ ?"\n]*)(?:\?[^ "\n]*)?(?P<proto> [^"\n]*)?)?')
                seen.add(var)
                continue
            if var == "request" and not quoted:
                sub = rf'(?:[A-Za-z]+ [^ {stop}"\n]+(?: [^ {stop}"\n]+)?|{plain}*)'
            elif var in _TIME_PATTERNS:
                sub = _TIME_PATTERNS[var].replace(r"\d", "[0-9]")
            elif var == "status":
                sub = "[0-9]{3}"
            elif var in _FLOAT_VARS or var in _INT_VARS:
                sub = _NUM
            elif var in _MULTI_FLOAT_VARS:
                sub = rf"{_NUM}(?:{_MULTI_SEP}{_NUM})*"
            elif var.startswith("upstream_"):
                one = rf'[^ ,{stop}"\n]+'
                sub = rf"{one}(?:{_MULTI_SEP}{one})*"
            elif quoted:
                sub = r'[^"\n]*'
            else:
                sub = plain + "+"
            if var in wanted and var not in seen:
                pieces.append(f"(?P<{wanted[var]}>{sub})")
            else:
                pieces.append(f"(?:{sub})")
            seen.add(var)
        pieces.append(_escape(literals[-1]) + r"\r?\n$")
        self.regex = "".join(pieces)
        self.groups = [wanted[v] for v in dict.fromkeys(names) if v in wanted]
        self.split_request = "(?P<method>" in self.regex


# ---------------------------------------------------------------------------------------------------------
# Sources: a file, a glob or a directory; compressed streams
# ---------------------------------------------------------------------------------------------------------

def _expand(source) -> list[str]:
    """The files behind ``source`` (a path, a glob, a directory or a list of them), sorted."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("source must name at least one file, got an empty list")
        return [f for s in source for f in _expand(s)]
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"source must be a path, a glob or a directory (or a list of them), got {source!r}")
    path = os.fspath(source)
    if os.path.isdir(path):
        files = sorted(p for p in glob.glob(os.path.join(path, "*")) if os.path.isfile(p)
                       and not os.path.basename(p).startswith("."))
        if not files:
            raise ValueError(f"source={path!r} is a directory with no files")
        return files
    if os.path.exists(path):
        return [path]
    if glob.has_magic(path):
        files = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not files:
            raise ValueError(f"source={path!r}: the pattern matches no file")
        return files
    raise FileNotFoundError(2, "No such file or directory", path)


def _open_stream(path: str):
    """A binary stream of the decompressed content; compression recognised by its magic bytes."""
    with open(path, "rb") as probe:
        magic = probe.read(6)
    if magic[:4] == b"\x28\xb5\x2f\xfd":
        if importlib.util.find_spec("zstandard") is None:
            raise ImportError(f"{path} is zstd-compressed: reading it needs the optional package zstandard "
                              "(`pip install 'capacity[logs]'` or `pip install zstandard`)")
        import zstandard

        raw = open(path, "rb")
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True))
    return decompressed(open(path, "rb"))     # gzip, bz2, xz by their magic bytes, as every reader


def _kind_of(path: str, fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    low = path.lower()
    if low.endswith((".parquet", ".pq", ".parq")):
        return "parquet"
    with open(path, "rb") as probe:
        if probe.read(4) == b"PAR1":
            return "parquet"
    stem = re.sub(r"\.(gz|zst|zstd|bz2|xz)$", "", low)
    return "csv" if stem.endswith((".csv", ".tsv")) else "nginx"


def _byte_blocks(path: str):
    """Blocks of whole lines, about ``_BLOCK_BYTES`` each, as uint8 arrays; the last may end without a
    newline (a cut-off last line).  Each block is read straight into a fresh uninitialised array and
    completed to its line's end by ``readline``, so nothing is copied or scanned here: this thread only
    waits for the disk or the decompressor, the parsing threads find the newlines."""
    with _open_stream(path) as f:
        while True:
            block = np.empty(_BLOCK_BYTES + _SLACK_BYTES, dtype=np.uint8)
            n = f.readinto(memoryview(block)[:_BLOCK_BYTES])
            if not n:
                return
            if block[n - 1] != 10:
                tail = f.readline()
                if n + len(tail) > block.size:   # a line longer than the slack: rare, one copy
                    block = np.concatenate([block[:n], np.frombuffer(tail, np.uint8)])
                else:
                    block[n:n + len(tail)] = np.frombuffer(tail, np.uint8)
                n += len(tail)
            yield block[:n]


# ---------------------------------------------------------------------------------------------------------
# One chunk of nginx lines -> its partial aggregate and its malformed lines by kind, in two polars queries
# ---------------------------------------------------------------------------------------------------------

#: Kinds of skipped nginx lines, in the order a line is classified (codes 1, 2, ...; 0 is a parsed line).
_KINDS = ("blank", "truncated", "no_match", "bad_time", "bad_number")
_ENDPOINT = r"^([A-Za-z]+ [^ ?]*)(?:\?[^ ]*)?(?: [^ ]+)?$"   # "METHOD /path" without the query string


def _converted(pl, spec: _NginxSpec, endpoint: str | None):
    """The expressions typing the captured strings (evaluated by polars without the GIL).  ``endpoint``:
    "line" (one per line), "pieces" (the request's pieces, made endpoints after grouping) or None."""
    col = pl.col
    if spec.time_var == "msec":
        secs = col("time").cast(pl.Float64, strict=False)
    else:
        fmt = "%d/%b/%Y:%H:%M:%S %z" if spec.time_var == "time_local" else "%Y-%m-%dT%H:%M:%S%:z"
        secs = col("time").str.strptime(pl.Datetime("us", "UTC"), fmt, strict=False).dt.epoch("us") / 1e6
    out = [col("line"), secs.alias("secs"), col("time").is_not_null().alias("matched")]

    def unparsed(name):
        return (col(name).cast(pl.Float64, strict=False).is_null() & col(name).is_not_null()
                & (col(name) != "-")).fill_null(False)

    if "request_time" in spec.groups:
        out += [col("request_time").cast(pl.Float64, strict=False).alias("rt"), unparsed("request_time").alias("rt_bad")]
    if "upstream" in spec.groups:
        out += [col("upstream").cast(pl.Float64, strict=False).alias("up"),
                pl.when(unparsed("upstream")).then(col("upstream")).alias("up_multi")]
    if endpoint == "line":
        out.append(_endpoint(pl, spec).alias("endpoint"))
    elif endpoint == "pieces":
        out += [col("method"), col("path"), col("proto")]
    if "status" in spec.groups:
        out.append(col("status").cast(pl.Int16, strict=False).alias("status"))
    return out


def _endpoint(pl, spec: _NginxSpec):
    """"METHOD /path" (query string and protocol dropped), null unless the request line has that shape:
    ``_ENDPOINT`` matches it.  A quoted request comes cut in pieces by the line's regex (method, path, the
    protocol with its space): checking the pieces is cheaper than a second regex over each request."""
    col = pl.col
    if not spec.split_request:
        return col("request").str.extract(_ENDPOINT, 1)
    shaped = (col("method").str.contains(r"^[A-Za-z]+$") & col("path").is_not_null()
              & (col("proto").is_null() | col("proto").str.contains(r"^ [^ ]+$")))
    return pl.when(shaped).then(pl.concat_str([col("method"), col("path")], separator=" "))


def _upstream_lists(pl, frame):
    """Seconds from upstream time lists ("0.010, 0.020 : 0.005", the rows where ``up_multi`` is set, few):
    ``up`` becomes their sum (null when every value is '-'), and a parsed line whose list holds a value
    that is not a number becomes 'bad_number'.  Only those rows are split: single values cost nothing."""
    multi = frame["up_multi"]
    if multi.null_count() == len(multi):
        return frame
    idx = multi.is_not_null().arg_true()
    parts = pl.DataFrame({"p": multi.gather(idx).str.replace_all(" : ", ", ", literal=True).str.split(", ")})
    value = pl.element().cast(pl.Float64, strict=False)
    p = pl.col("p")
    lists = parts.select(
        up=pl.when(p.list.eval(value.is_not_null()).list.any()).then(p.list.eval(value).list.sum()),
        bad=p.list.eval(value.is_null() & (pl.element() != "-")).list.any())
    kind = frame["kind"].gather(idx).to_numpy()
    kind = pl.Series(np.where((kind == 0) & lists["bad"].to_numpy(), _KINDS.index("bad_number") + 1, kind)
                     .astype(np.uint8))
    return frame.with_columns(frame["up"].clone().scatter(idx, lists["up"]),
                              frame["kind"].clone().scatter(idx, kind))


class _ChunkPlan:
    """What every chunk of one run computes, as polars expressions built once: the typed columns, the kind
    of each line, and its (window, endpoint, bucket) keys.  :meth:`run` evaluates them on a chunk in two
    polars queries, so the Python between them is a few calls per chunk and parsing threads overlap."""

    def __init__(self, pl, spec: _NginxSpec, timing: str, by_endpoint: bool, window: float, edges: np.ndarray,
                 keep_rows: bool):
        col = pl.col
        self.pl, self.spec, self.keep_rows = pl, spec, keep_rows
        endpoint = None
        if "request" in spec.groups and (keep_rows or by_endpoint):
            # grouping by the request's pieces costs what grouping by one string does, and spares the
            # endpoint's checks and concatenation on every line: they run on the groups
            endpoint = "pieces" if spec.split_request and not keep_rows else "line"
        self.typed = _converted(pl, spec, endpoint)
        bad = col("rt_bad") if "rt_bad" in _names(self.typed) else pl.lit(False)
        # the when-chain follows _KINDS: a cut-off last line is 'truncated' even when blank; a bad upstream
        # list is found later (_upstream_lists), it can only turn a parsed line (0) into 'bad_number'
        self.kind = (pl.when(col("cut")).then(2).when((col("line") == "\n") | (col("line") == "\r\n")).then(1)
                     .when(~col("matched")).then(3).when(col("secs").is_null()).then(4).when(bad).then(5)
                     .otherwise(0).cast(pl.UInt8).alias("kind"))
        dur = col("rt" if timing == "duration" else "up")
        # bucket i holds edges[i-1] < d <= edges[i] (numpy's searchsorted 'left'); len(edges) + 1: no duration
        bucket = pl.lit(pl.Series("edges", edges, dtype=pl.Float64)).search_sorted(dur, side="left")
        self.keys = [(col("secs") / window).floor().cast(pl.Int64).alias("w"),
                     pl.when(dur.is_null()).then(edges.size + 1).otherwise(bucket).cast(pl.Int16).alias("b")]
        if endpoint == "pieces":
            self.keys += [col("method"), col("path"), col("proto")]
        else:
            self.keys.append(col("endpoint") if endpoint == "line"
                             else pl.lit("", dtype=pl.String).alias("endpoint"))
        self.pieces = endpoint == "pieces"
        errors = col("status") >= 500 if "status" in spec.groups else pl.lit(False)
        self.sums = [pl.len().alias("n"), errors.sum().alias("errors"),
                     dur.fill_null(0.0).sum().alias("dsum"), col("secs").min().alias("t0"),
                     col("secs").max().alias("t1")]
        self.rows = [c for c in ("secs", "endpoint", "status", "rt", "up") if c in _names(self.typed)]
        self.engine = _in_memory(pl)

    def run(self, lines, cut: bool, max_examples: int):
        """One chunk (a polars String Series of lines, newlines kept): its partial aggregate (or its parsed
        rows), first and last time, skipped lines by kind, the first ``max_examples`` of them (index in the
        chunk, kind, text)."""
        pl, col = self.pl, self.pl.col
        last = (pl.int_range(pl.len()) == len(lines) - 1) if cut else pl.lit(False)
        f = (pl.LazyFrame({"line": lines})
             .with_columns(col("line").str.extract_groups(self.spec.regex).alias("g")).unnest("g")
             .select(self.typed).with_columns(last.alias("cut")).with_columns(self.kind)
             .collect(**self.engine))
        if "up_multi" in f.columns:
            f = _upstream_lists(pl, f)
        kind = f["kind"].to_numpy()
        per_kind = np.bincount(kind, minlength=len(_KINDS) + 1)
        counts = {k: int(per_kind[i + 1]) for i, k in enumerate(_KINDS) if per_kind[i + 1]}
        first = np.flatnonzero(kind)[:max_examples]
        examples = [(int(i), _KINDS[kind[i] - 1], t.rstrip("\r\n"))
                    for i, t in zip(first, f["line"].gather(first).to_list())]
        if per_kind[0] == 0:
            return None, math.inf, -math.inf, counts, examples
        parsed = f.lazy().filter(col("kind") == 0)
        if self.keep_rows:
            return parsed.select(self.rows).collect(**self.engine), 0.0, 0.0, counts, examples
        grouped = parsed.group_by(self.keys).agg(self.sums)
        if self.pieces:
            grouped = (grouped.with_columns(_endpoint(pl, self.spec).alias("endpoint"))
                       .group_by("w", "endpoint", "b").agg(col("n", "errors", "dsum").sum(), col("t0").min(),
                                                          col("t1").max()))
        out = grouped.select("w", "endpoint", "b", "n", "errors", "dsum", "t0", "t1").collect(**self.engine)
        return out.drop("t0", "t1"), out["t0"].min(), out["t1"].max(), counts, examples


def _in_memory(pl) -> dict:
    """``collect`` arguments for polars' in-memory engine: per chunk it wastes less CPU than the streaming
    one (measured), and polars versions before the engine choice run it anyway."""
    try:
        pl.LazyFrame({"x": [1]}).collect(engine="in-memory")
        return {"engine": "in-memory"}
    except (TypeError, ValueError):
        return {}


def _names(exprs) -> set:
    return {e.meta.output_name() for e in exprs}


def _lines(pl, pa, block: np.ndarray, offsets: np.ndarray, undecodable: list):
    """The lines between ``offsets`` (newline included) as a polars String Series, without copying the
    block; a line with bytes invalid in UTF-8 is decoded with replacement and its index noted."""
    n = offsets.size - 1
    raw = pl.from_arrow(pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                                     pa.py_buffer(block)]))
    try:
        return raw.cast(pl.String)
    except pl.exceptions.ComputeError as exc:   # invalid UTF-8: decode line by line, as read_nginx does
        if "utf8" not in str(exc).lower().replace("-", ""):
            raise
    texts = []
    for i in range(n):
        data = block[offsets[i]:offsets[i + 1]].tobytes()
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            undecodable.append(i)
            texts.append(data.decode("utf-8", "replace"))
    return pl.Series(texts, dtype=pl.String)


def _parse_nginx_block(plan: _ChunkPlan, block: np.ndarray, last_of_file: bool, chunk_lines: int,
                       max_examples: int):
    """Parse and fold a block of lines, at most ``chunk_lines`` at a time (runs on a worker thread).

    Returns the partial aggregates (or, for ``plan.keep_rows``, a list of Arrow tables of parsed requests),
    the first and last time, the lines, the skipped counts by kind, the first examples and the undecodable
    lines (line indices counted from 0 at the block's start) and the most lines held at once."""
    pl, pa = _need_polars()
    ends = np.flatnonzero(block == 10)
    cut_off = block.size > 0 and block[-1] != 10
    n_total = ends.size + int(cut_off)
    offsets = np.empty(n_total + 1, dtype=np.int32)
    offsets[0] = 0
    offsets[1:ends.size + 1] = ends + 1
    offsets[-1] = block.size
    parts, t0, t1, kinds, examples, undecodable, largest = [], math.inf, -math.inf, {}, [], [], 0
    for k in range(0, n_total, chunk_lines):
        stop = min(k + chunk_lines, n_total)
        bad_bytes: list = []
        lines = _lines(pl, pa, block, offsets[k:stop + 1], bad_bytes)
        out, lo, hi, counts, ex = plan.run(lines, last_of_file and cut_off and stop == n_total,
                                           max_examples - len(examples))
        largest = max(largest, stop - k)
        if out is not None:
            parts.append(_arrow_rows(_row_arrays(out), True) if plan.keep_rows else out)
        t0, t1 = min(t0, lo), max(t1, hi)
        for key, v in counts.items():
            kinds[key] = kinds.get(key, 0) + v
        examples.extend((k + i, kind, text) for i, kind, text in ex)
        undecodable.extend(k + i for i in bad_bytes)
    if plan.keep_rows:
        return parts, t0, t1, n_total, kinds, examples, undecodable, largest
    partial = parts[0] if len(parts) == 1 else (_group(pl, pl.concat(parts)) if parts else None)
    return partial, t0, t1, n_total, kinds, examples, undecodable, largest


def _row_arrays(frame) -> dict:
    """A chunk's parsed requests (from :meth:`_ChunkPlan.run` with ``keep_rows``) as the columns of
    :func:`_arrow_rows`."""
    rows = {"time": frame["secs"].to_numpy()}
    if "endpoint" in frame.columns:
        rows["endpoint"] = frame["endpoint"]
    if "status" in frame.columns:
        rows["status"] = frame["status"].to_numpy()
    if "rt" in frame.columns:
        rows["request_time"] = frame["rt"].to_numpy().astype(float)
    if "up" in frame.columns:
        rows["upstream_time"] = frame["up"].to_numpy().astype(float)
    return rows


# ---------------------------------------------------------------------------------------------------------
# CSV and Parquet tables through the request-table rules
# ---------------------------------------------------------------------------------------------------------

def _table_rows(path: str, kind: str, timing: str, chunk_lines: int, options: dict, acc: _Accumulator,
                table_reader):
    """Rows of a CSV/Parquet request table, normalised chunk by chunk by ``table_reader`` (the request-table
    reader of :mod:`capacity.logs`, which applies the :mod:`._log_columns` rules)."""
    from ._log_io import _Stats

    stats = _Stats(path, acc.max_examples)
    opts = dict(options)
    keys = ("time_column", "duration_column", "endpoint_column", "upstream_column", "duration_unit",
            "upstream_unit", "time_unit")
    args = [opts.pop(k, None) for k in keys]
    sep = opts.pop("sep", ",")
    seen = 0
    for rc, frame in table_reader(path, *args, chunk_lines, kind, sep, stats, **opts):
        _check_timing_column(rc, timing)
        acc.note_chunk(len(frame) + stats.skipped - seen)
        acc.add_table_skips(path, stats, seen)
        seen = stats.skipped
        yield _table_columns(frame, timing, path)
    acc.add_lines(stats.lines)


def _check_timing_column(rc, timing: str) -> None:
    """The column ``timing`` asks for is there (its unit was checked when the columns were found:
    :func:`capacity._log_columns._duration_scale`, never guessed)."""
    if timing == "upstream" and rc.upstream is None:
        raise ValueError(f"timing={timing!r}: the table has no upstream time column; pass upstream_column=...")


def _table_columns(frame: pd.DataFrame, timing: str, path: str) -> dict:
    t = frame["time"]
    if pd.api.types.is_datetime64_any_dtype(t.dtype):
        secs = t.dt.as_unit("us").astype("int64").to_numpy() / 1e6
    else:
        secs = t.to_numpy(dtype=float)
    column = "duration" if timing == "duration" else "upstream_time"
    rows = {"time": secs, "duration": frame[column].to_numpy(dtype=float)}
    # What convert() writes of each request (:func:`_arrow_rows`), in seconds under names read back
    # as seconds: the whole time, and the upstream time where the table has one.
    rows["request_time"] = frame["duration"].to_numpy(dtype=float)
    if "upstream_time" in frame:
        rows["upstream_time"] = frame["upstream_time"].to_numpy(dtype=float)
    if "endpoint" in frame:
        import polars as pl

        ep = frame["endpoint"]
        rows["endpoint"] = pl.Series(ep.astype(str).where(ep.notna(), None).tolist(), dtype=pl.String)
    if "status" in frame:
        rows["status"] = frame["status"].astype("Float64").fillna(0).to_numpy(dtype=float)
    rows["epoch"] = pd.api.types.is_datetime64_any_dtype(t.dtype)
    return rows


# ---------------------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------------------

def _check_args(window, chunk_lines, timing, threads, by_endpoint):
    if isinstance(window, bool) or not isinstance(window, (int, float, np.integer, np.floating)) \
            or not (np.isfinite(window) and window > 0):
        raise ValueError(f"window must be a positive number of seconds, got {window!r}")
    if isinstance(chunk_lines, bool) or not isinstance(chunk_lines, (int, np.integer)) or chunk_lines < 1:
        raise ValueError(f"chunk_lines must be a positive integer, got {chunk_lines!r}")
    if timing not in ("duration", "upstream"):
        raise ValueError(f"timing must be 'duration' or 'upstream', got {timing!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer))
                                or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    if not isinstance(by_endpoint, bool):
        raise ValueError(f"by_endpoint must be True or False, got {by_endpoint!r}")


def _fold_nginx(path: str, plan: _ChunkPlan, chunk_lines: int, pool, threads: int, acc: _Accumulator) -> None:
    """Fold one nginx file; blocks parsed on ``pool``, at most ``threads + 1`` in flight, folded in order
    (which is where their line numbers are known)."""
    import polars as pl

    pending: collections.deque = collections.deque()
    line = 1
    blocks = _byte_blocks(path)
    nxt = next(blocks, None)
    while nxt is not None or pending:
        while nxt is not None and len(pending) <= threads:
            block = nxt
            nxt = next(blocks, None)
            pending.append(pool.submit(_parse_nginx_block, plan, block, nxt is None, chunk_lines,
                                       acc.max_examples))
        partial, t0, t1, n, counts, examples, undecodable, largest = pending.popleft().result()
        acc.note_chunk(largest)
        acc.add_nginx_skips(path, n, counts, [(line + i, kind, text) for i, kind, text in examples],
                            [line + i for i in undecodable])
        line += n
        if acc.writer is not None:
            acc.write(partial)
        else:
            acc.add(pl, partial, t0, t1, True)


def _arrow_rows(rows: dict, epoch: bool):
    """Parsed requests as an Arrow table with the columns :func:`capacity.logs.read_requests` finds."""
    import pyarrow as pa

    t = rows["time"]
    time = pa.array(np.round(t * 1e6).astype(np.int64), pa.timestamp("us", tz="UTC")) if epoch else pa.array(t)
    cols = {"time": time}
    if "endpoint" in rows:
        ep = rows["endpoint"]
        cols["endpoint"] = (ep.to_arrow() if hasattr(ep, "to_arrow") else pa.array(ep)).cast(pa.string())
    if "status" in rows:
        cols["status"] = pa.array(np.asarray(rows["status"]).astype(np.int16))
    for name, key in (("request_time", "request_time"), ("upstream_response_time", "upstream_time")):
        if key in rows:
            cols[name] = pa.array(rows[key], pa.float64(), from_pandas=True)
    return pa.table(cols)


def _aggregate(source, *, window, log_format, fmt, timing, edges, by_endpoint, chunk_lines, threads,
               max_examples, options, table_reader, out=None, client=None) -> LogAggregates:
    """Aggregate ``source``; with ``out`` (a path), write its parsed requests there as Parquet instead and
    return the reading report (a dict); with ``client`` (Dask), aggregate each file on the cluster."""
    _check_args(window, chunk_lines, timing, threads, by_endpoint)
    if fmt not in (None, "nginx", "csv", "parquet"):
        raise ValueError(f"format must be 'nginx', 'csv', 'parquet' or None, got {fmt!r}")
    if client is not None and not (callable(getattr(client, "map", None))
                                   and callable(getattr(client, "gather", None))):
        raise ValueError(f"client must be a dask.distributed.Client or None, got {client!r}")
    if client is not None and out is not None:
        raise ValueError("client applies to aggregates only: the requests go to one Parquet file, "
                         "written here")
    edges = _default_edges() if edges is None else edges
    files = _expand(source)
    pl, _ = _need_polars()
    kinds = {f: _kind_of(f, fmt) for f in files}
    stored = [f for f in files if kinds[f] == "parquet" and LogAggregates._is_aggregates_file(f)]
    if stored:
        if len(stored) != len(files):
            raise ValueError(f"source={source!r} mixes aggregate Parquet files with logs; aggregate them apart")
        if out is not None:
            raise ValueError(f"source={source!r} holds aggregates, not requests: there are no requests to write")
        return LogAggregates._merge_files(stored)
    spec = _NginxSpec(log_format) if "nginx" in kinds.values() else None
    if spec is not None and ("request_time" if timing == "duration" else "upstream") not in spec.groups:
        raise ValueError(f"timing={timing!r}: the log_format has no "
                         f"{'$request_time' if timing == 'duration' else '$upstream_response_time'}")
    acc = _Accumulator(window=float(window), edges=edges, by_endpoint=by_endpoint,
                       max_examples=_check_max_examples(max_examples), source=_describe(source, files),
                       timing=timing, out=out)
    settings = dict(window=acc.window, log_format=log_format, timing=timing, edges=acc.edges,
                    by_endpoint=by_endpoint, chunk_lines=chunk_lines, threads=threads,
                    max_examples=acc.max_examples, options=options, table_reader=table_reader)
    if client is not None:
        # one task per file, folded here in the files' order: the same sums, skipped counts and first
        # examples as one machine reading them one after the other
        tasks = client.map(_file_state, files, [kinds[f] for f in files], pure=False, **settings)
        states = client.gather(tasks)
        for state in states:
            acc.merge(pl, state)
        return acc.result()
    _fold_files(files, kinds, acc, **settings)
    return acc.result() if out is None else acc.close()


def _fold_files(files, kinds, acc: _Accumulator, *, window, log_format, timing, edges, by_endpoint,
                chunk_lines, threads, max_examples, options, table_reader) -> None:
    """Fold ``files`` into ``acc`` one after the other, nginx chunks parsed on a thread pool."""
    pl, _ = _need_polars()
    threads = int(threads or max(1, min(os.cpu_count() or 1, 4)))
    plan = None
    if "nginx" in kinds.values():
        plan = _ChunkPlan(pl, _NginxSpec(log_format), timing, by_endpoint, window, edges,
                          keep_rows=acc.writer is not None)
    with ThreadPoolExecutor(threads) as pool:
        for f in files:
            if kinds[f] == "nginx":
                _fold_nginx(f, plan, chunk_lines, pool, threads, acc)
                continue
            for rows in _table_rows(f, kinds[f], timing, chunk_lines, options, acc, table_reader):
                if acc.writer is not None:
                    acc.add(pl, None, 0.0, 0.0, rows["epoch"])
                    acc.write([_arrow_rows(rows, rows["epoch"])])
                    continue
                partial, t0, t1 = _fold(pl, rows["time"], rows["duration"],
                                        rows.get("endpoint") if acc.by_endpoint else None,
                                        rows.get("status"), acc.window, acc.edges)
                acc.add(pl, partial, t0, t1, rows["epoch"])


def _file_state(path: str, kind: str, **settings) -> dict:
    """One file aggregated alone, as its accumulator's state (:meth:`_Accumulator.state`): the task a Dask
    worker runs for :func:`_aggregate` with a ``client``."""
    pl, _ = _need_polars()
    acc = _Accumulator(window=settings["window"], edges=settings["edges"], source=path,
                       timing=settings["timing"], by_endpoint=settings["by_endpoint"],
                       max_examples=settings["max_examples"])
    _fold_files([path], {path: kind}, acc, **settings)
    return acc.state(pl)


def _describe(source, files) -> str:
    if isinstance(source, (list, tuple)):
        return f"{len(files)} files"
    return os.fspath(source)
