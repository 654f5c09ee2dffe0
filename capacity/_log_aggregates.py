"""Per-window, per-endpoint aggregates of a request log, and their accumulation chunk by chunk.

:class:`LogAggregates` is what :func:`capacity.logs.aggregate` returns: per (window, endpoint) the
requests, 5xx answers, the durations' sum and their histogram on fixed log-spaced bucket edges, plus
every skipped line counted by kind.  :meth:`LogAggregates.windows` turns it into the ``windows`` input
of :func:`capacity.fit.from_histograms`; :meth:`LogAggregates.to_parquet` stores it and
:func:`capacity.logs.aggregate` reads such a file back.  :class:`_Accumulator` merges chunk partials
so memory grows with the number of (window, endpoint) pairs, never with the number of lines.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd

from ._log_io import MalformedLinesWarning, UndecodableLinesWarning

__all__: list[str] = []   # private: capacity.logs is the public face

_META_KEY = b"capacity.aggregates"
_MERGE_EVERY = 16   # chunk partials kept before they are merged into one


def _default_edges() -> np.ndarray:
    """Bucket bounds in seconds: 10 per decade from 100 us to 100 s (each bucket ~26 % wide)."""
    return 10.0 ** (np.arange(-40, 21) / 10.0)


def _check_edges(edges) -> np.ndarray:
    try:
        arr = np.asarray(edges, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"edges must be increasing positive seconds, got {edges!r}") from None
    if arr.ndim != 1 or arr.size < 1 or not np.all(np.isfinite(arr)) or np.any(arr <= 0) \
            or np.any(np.diff(arr) <= 0):
        raise ValueError(f"edges must be a non-empty list of increasing, finite, positive seconds, got {edges!r}")
    return arr


def _bucket_names(edges: np.ndarray) -> list[str]:
    return [f"le_{e:.6g}" for e in edges] + ["le_inf"]


class LogAggregates:
    """Per-window (and per-endpoint) request counts and duration histograms of a log.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (window, endpoint) with requests: ``start`` (the window's start: a UTC timestamp
        when the log's times are dates, else seconds), ``endpoint`` (when aggregated by endpoint:
        ``"METHOD /path"`` without the query string for nginx, the endpoint column for tables; ``None``
        when the request line was not ``METHOD URI``), ``requests``, ``errors`` (status >= 500),
        ``duration_sum`` (seconds, over requests with a duration), ``no_duration`` (requests logged
        with ``-``), and one column per bucket, ``le_<bound>`` ... ``le_inf``: the requests whose
        duration is above the previous bound and at most this one (Prometheus ``le`` convention, not
        cumulative).
    window : float
        Window length in seconds; windows start at multiples of it (since the epoch for dates).
    edges : numpy.ndarray
        The bucket bounds in seconds (the ``+Inf`` bucket is implied).
    timing : str
        ``"duration"`` (``$request_time``) or ``"upstream"`` (``$upstream_response_time``).
    lines, skipped : int
        Lines (rows) read and skipped.
    skipped_by_kind : dict
        Skipped lines by kind: ``no_match`` (does not match the format), ``blank``, ``truncated`` (last
        line without its newline), ``bad_time`` (a date that does not convert), ``bad_number`` (a timing
        that does not convert), ``bad_row`` (a table row with a missing or unparsable time or duration).
    skipped_examples : list of (file, line, kind, text)
        The first ones, 1-based line numbers.
    undecodable, undecodable_examples
        Lines with bytes invalid in UTF-8 (decoded with replacement, kept if they parse) and where.
    largest_chunk : int
        The most lines held at once in one chunk (bounded by ``chunk_lines``).
    first_time, last_time : float
        Earliest and latest request time read, seconds (since the epoch for dates).
    """

    def __init__(self, table, *, window, edges, timing, epoch, first_time, last_time, lines, skipped_by_kind,
                 skipped_examples, undecodable, undecodable_examples, largest_chunk, source, by_endpoint):
        self.table, self.window, self.edges, self.timing = table, float(window), np.asarray(edges), timing
        self.epoch, self.first_time, self.last_time = bool(epoch), float(first_time), float(last_time)
        self.lines, self.skipped_by_kind = int(lines), dict(skipped_by_kind)
        self.skipped_examples, self.undecodable = list(skipped_examples), int(undecodable)
        self.undecodable_examples, self.largest_chunk = list(undecodable_examples), int(largest_chunk)
        self.source, self.by_endpoint = source, bool(by_endpoint)

    @property
    def skipped(self) -> int:
        return int(sum(self.skipped_by_kind.values()))

    @property
    def requests(self) -> int:
        return int(self.table["requests"].sum())

    def __repr__(self) -> str:
        return (f"LogAggregates({self.source!r}: {self.requests} requests in {self.table['start'].nunique()} "
                f"windows of {self.window:g} s, {self.skipped} of {self.lines} lines skipped)")

    def to_frame(self) -> pd.DataFrame:
        """The per-window table (a copy)."""
        return self.table.copy()

    def histogram_counts(self) -> np.ndarray:
        """The bucket counts as an array, one row per row of :attr:`table`."""
        return self.table[_bucket_names(self.edges)].to_numpy(dtype=np.int64)

    def windows(self, endpoint: str | None = None, utilization: pd.Series | None = None,
                complete_only: bool = True) -> list[dict]:
        """The ``windows`` input of :func:`capacity.fit.from_histograms`, one record per window.

        Parameters
        ----------
        endpoint : str, optional
            Count only this endpoint's durations (``arrival_rate`` stays the whole service's: the
            endpoints share the queue).  Default: every request.
        utilization : pandas.Series, optional
            Measured CPU busy fraction of the servers per window, indexed by window start (as in
            ``table["start"]``); windows it does not list get none.
        complete_only : bool, default True
            Leave out the first and the last window when the log covers them only partly (it starts after
            the first window's start, or ends more than one second before the last window's end), since
            their request rate would be underestimated.

        Returns
        -------
        list of dict
            ``{"bounds": edges, "counts": per-bucket counts (the last above the largest bound),
            "arrival_rate": requests / window, "start": window start}``, plus ``"utilization"`` when given.

        Notes
        -----
        Assumes the requests of a window arrived during it: nginx logs a request when it ends, so a
        request longer than the window is counted in a later one.  Requests logged without a duration
        count in the rate, not in the histogram.
        """
        if endpoint is not None and (not self.by_endpoint or endpoint not in set(self.table["endpoint"])):
            raise ValueError(f"endpoint={endpoint!r} is not among the aggregated endpoints"
                             + ("" if self.by_endpoint else " (aggregated with by_endpoint=False)"))
        if not isinstance(complete_only, bool):
            raise ValueError(f"complete_only must be True or False, got {complete_only!r}")
        names = _bucket_names(self.edges)
        per = self.table.groupby("start", sort=True)
        rate = per["requests"].sum() / self.window
        rows = self.table if endpoint is None else self.table[self.table["endpoint"] == endpoint]
        counts = rows.groupby("start")[names].sum().reindex(rate.index, fill_value=0)
        starts = list(rate.index)
        if complete_only and starts:
            first = self._seconds(starts[0])
            last = self._seconds(starts[-1])
            drop = {starts[0]} if self.first_time > first else set()
            if self.last_time < last + self.window - 1.0:
                drop.add(starts[-1])
            starts = [s for s in starts if s not in drop]
        out = []
        for s in starts:
            record = {"bounds": self.edges.tolist(), "counts": counts.loc[s].to_numpy(dtype=float).tolist(),
                      "arrival_rate": float(rate.loc[s]), "start": s}
            if utilization is not None and s in utilization.index and pd.notna(utilization.loc[s]):
                record["utilization"] = float(utilization.loc[s])
            out.append(record)
        if not out:
            raise ValueError(f"{self.source}: no complete window of {self.window:g} s in the log (it spans "
                             f"{self.last_time - self.first_time:g} s); use a shorter window or "
                             "complete_only=False")
        return out

    def _seconds(self, start) -> float:
        return start.value / 1e9 if isinstance(start, pd.Timestamp) else float(start)

    # ------------------------------------------------------------------ Parquet
    def _meta(self) -> dict:
        return {"window": self.window, "edges": self.edges.tolist(), "timing": self.timing, "epoch": self.epoch,
                "first_time": self.first_time, "last_time": self.last_time, "lines": self.lines,
                "skipped_by_kind": self.skipped_by_kind,
                "skipped_examples": [list(e) for e in self.skipped_examples], "undecodable": self.undecodable,
                "undecodable_examples": [list(e) for e in self.undecodable_examples],
                "largest_chunk": self.largest_chunk, "source": self.source, "by_endpoint": self.by_endpoint}

    def to_parquet(self, path) -> None:
        """Write the table to Parquet with the rest (window, edges, skipped lines) in its metadata;
        :func:`capacity.logs.aggregate` reads it back."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.table, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_META_KEY] = json.dumps(self._meta()).encode()
        pq.write_table(table.replace_schema_metadata(meta), path)

    @staticmethod
    def _is_aggregates_file(path) -> bool:
        import pyarrow.parquet as pq

        return _META_KEY in (pq.read_schema(path).metadata or {})

    @classmethod
    def _merge_files(cls, paths) -> "LogAggregates":
        import pyarrow.parquet as pq

        parts = []
        for p in paths:
            t = pq.read_table(p)
            meta = json.loads(t.schema.metadata[_META_KEY])
            parts.append(cls(t.to_pandas(), **{k: meta[k] for k in meta}))
        first = parts[0]
        for p in parts[1:]:
            if p.window != first.window or p.edges.tolist() != first.edges.tolist() or p.timing != first.timing \
                    or p.by_endpoint != first.by_endpoint:
                raise ValueError(f"{p.source}: its window, bucket edges, timing or endpoints differ from "
                                 f"{first.source}'s; aggregate the logs again with the same options")
        if len(parts) == 1:
            return first
        keys = ["start"] + (["endpoint"] if first.by_endpoint else [])
        table = pd.concat([p.table for p in parts]).groupby(keys, sort=True, dropna=False).sum().reset_index()
        kinds: dict = {}
        for p in parts:
            for k, v in p.skipped_by_kind.items():
                kinds[k] = kinds.get(k, 0) + v
        return cls(table, window=first.window, edges=first.edges, timing=first.timing, epoch=first.epoch,
                   first_time=min(p.first_time for p in parts), last_time=max(p.last_time for p in parts),
                   lines=sum(p.lines for p in parts), skipped_by_kind=kinds,
                   skipped_examples=[e for p in parts for e in p.skipped_examples][:5],
                   undecodable=sum(p.undecodable for p in parts),
                   undecodable_examples=[e for p in parts for e in p.undecodable_examples][:5],
                   largest_chunk=max(p.largest_chunk for p in parts), source=f"{len(parts)} files",
                   by_endpoint=first.by_endpoint)


def _group(pl, frame):
    return frame.group_by(["w", "endpoint", "b"]).agg(pl.col("n").sum(), pl.col("errors").sum(),
                                                     pl.col("dsum").sum())


def _fold(pl, time: np.ndarray, duration: np.ndarray, endpoint, status, window: float, edges: np.ndarray):
    """One chunk's rows as counts per (window index, endpoint, bucket); None without rows.

    ``time`` and ``duration`` in seconds (NaN: no duration, counted in bucket ``len(edges) + 1``),
    ``endpoint`` a polars string Series or None, ``status`` integers or None.  Returns the partial
    frame, the earliest and the latest time.
    """
    if time.size == 0:
        return None, math.inf, -math.inf
    k = edges.size
    bucket = np.searchsorted(edges, duration, side="left").astype(np.int16)
    bucket[np.isnan(duration)] = k + 1
    frame = pl.DataFrame({
        "w": np.floor(time / window).astype(np.int64),
        "endpoint": endpoint if endpoint is not None else pl.repeat("", time.size, dtype=pl.String, eager=True),
        "b": bucket,
        "e": (np.asarray(status) >= 500) if status is not None else np.zeros(time.size, dtype=bool),
        "d": np.nan_to_num(duration, nan=0.0)})
    partial = frame.group_by(["w", "endpoint", "b"]).agg(n=pl.len(), errors=pl.col("e").sum(),
                                                        dsum=pl.col("d").sum())
    return partial, float(np.min(time)), float(np.max(time))


class _Accumulator:
    """Chunk partials, merged as they come; the skipped lines by kind with their first examples."""

    def __init__(self, *, window, edges, by_endpoint, max_examples, source, timing, out=None):
        self.window, self.edges, self.by_endpoint = window, _check_edges(edges), by_endpoint
        self.max_examples, self.source, self.timing = max_examples, source, timing
        self.lines, self.kinds, self.examples = 0, {}, []
        self.undecodable, self.undecodable_examples = 0, []
        self.largest_chunk, self.first_time, self.last_time = 0, math.inf, -math.inf
        self.epoch = None
        self.parts: list = []
        self.out, self.writer, self.rows = out, (None if out is None else False), 0

    def write(self, tables) -> None:
        """Append parsed requests (Arrow tables) to the Parquet file ``out`` (opened at the first rows)."""
        import pyarrow.parquet as pq

        for table in tables:
            if not self.writer:
                self.writer = pq.ParquetWriter(self.out, table.schema)
            self.writer.write_table(table.cast(self.writer.schema))
            self.rows += table.num_rows

    def close(self) -> dict:
        """Finish writing requests: warn about skipped lines, close the file, report what was read."""
        self.warn()
        if self.writer:
            self.writer.close()
        if self.lines == 0:
            raise ValueError(f"{self.source}: the log is empty, there are no lines to read")
        if self.rows == 0:
            raise ValueError(f"{self.source}: none of the {self.lines} lines parsed (wrong log_format or columns?)")
        return {"source": self.source, "out": str(self.out), "lines": self.lines, "rows": self.rows,
                "skipped": sum(self.kinds.values()), "skipped_by_kind": dict(self.kinds),
                "undecodable": self.undecodable}

    def note_chunk(self, n: int) -> None:
        self.largest_chunk = max(self.largest_chunk, int(n))

    def add_lines(self, n: int) -> None:
        self.lines += int(n)

    def _skip(self, kind: str, n: int) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + int(n)

    def add_nginx_skips(self, path, n, counts, examples, undecodable) -> None:
        self.lines += n
        for k, v in counts.items():
            self._skip(k, v)
        room = self.max_examples - len(self.examples)
        self.examples.extend((path, line, kind, text) for line, kind, text in examples[:max(room, 0)])
        self.undecodable += len(undecodable)
        room = self.max_examples - len(self.undecodable_examples)
        self.undecodable_examples.extend((path, line) for line in undecodable[:max(room, 0)])

    def add_table_skips(self, path, stats, seen: int) -> None:
        new = stats.skipped - seen
        if new > 0:
            self._skip("bad_row", new)
            room = self.max_examples - len(self.examples)
            self.examples.extend((path, line, "bad_row", text) for line, text in stats.chunk_examples[:max(room, 0)])

    def add(self, pl, partial, first_time: float, last_time: float, epoch: bool) -> None:
        """Fold one chunk's partial aggregate (from :func:`_fold`)."""
        if self.epoch is not None and epoch != self.epoch:
            raise ValueError(f"{self.source}: some files give dates and others numbers as times")
        self.epoch = epoch
        if partial is None:
            return
        self.first_time = min(self.first_time, first_time)
        self.last_time = max(self.last_time, last_time)
        self.parts.append(partial)
        if len(self.parts) >= _MERGE_EVERY:
            self.parts = [_group(pl, pl.concat(self.parts))]

    def state(self, pl) -> dict:
        """What was read, picklable (one merged partial): what a Dask worker sends back for one file."""
        partial = _group(pl, pl.concat(self.parts)) if self.parts else None
        return {"partial": partial, "first_time": self.first_time, "last_time": self.last_time,
                "epoch": self.epoch, "lines": self.lines, "kinds": dict(self.kinds),
                "examples": self.examples, "undecodable": self.undecodable,
                "undecodable_examples": self.undecodable_examples, "largest_chunk": self.largest_chunk}

    def merge(self, pl, state: dict) -> None:
        """Fold a :meth:`state` in, as if its file had been read here after the ones already folded."""
        self.lines += state["lines"]
        for k, v in state["kinds"].items():
            self._skip(k, v)
        self.examples.extend(state["examples"][:max(self.max_examples - len(self.examples), 0)])
        self.undecodable += state["undecodable"]
        room = max(self.max_examples - len(self.undecodable_examples), 0)
        self.undecodable_examples.extend(state["undecodable_examples"][:room])
        self.note_chunk(state["largest_chunk"])
        if state["epoch"] is not None:
            self.add(pl, state["partial"], state["first_time"], state["last_time"], state["epoch"])

    def result(self) -> LogAggregates:
        self.warn()
        if self.lines == 0:
            raise ValueError(f"{self.source}: the log is empty, there are no lines to read")
        if not self.parts:
            shown = "; ".join(f"{f} line {n} ({k}): {t[:120]!r}" for f, n, k, t in self.examples[:3])
            raise ValueError(f"{self.source}: none of the {self.lines} lines parsed (wrong log_format or "
                             f"columns?); first ones: {shown}")
        import polars as pl

        k = self.edges.size
        names = _bucket_names(self.edges)
        # one row per (window, endpoint), in polars: pandas' pivot_table would drop the requests whose
        # endpoint is None (a request line that is not "METHOD URI"), and no request may vanish
        n, b = pl.col("n"), pl.col("b")
        wide = (_group(pl, pl.concat(self.parts)).group_by("w", "endpoint")
                .agg(n.sum().alias("requests"), pl.col("errors").sum(), pl.col("dsum").sum(),
                     *[n.filter(b == i).sum().alias(f"h{i}") for i in range(k + 2)])
                .sort("w", "endpoint", nulls_last=True))
        w = wide["w"].to_numpy()
        starts = w * self.window
        table = pd.DataFrame({
            "start": pd.to_datetime(np.round(starts * 1e6).astype(np.int64), unit="us", utc=True)
            if self.epoch else starts,
            "endpoint": pd.Series(wide["endpoint"].to_list(), dtype=object),
            "requests": wide["requests"].to_numpy().astype(np.int64),
            "errors": wide["errors"].to_numpy().astype(np.int64),
            "duration_sum": wide["dsum"].to_numpy().astype(float),
            "no_duration": wide[f"h{k + 1}"].to_numpy().astype(np.int64),
            **{name: wide[f"h{i}"].to_numpy().astype(np.int64) for i, name in enumerate(names)}})
        if not self.by_endpoint:
            table = table.drop(columns="endpoint")
        return LogAggregates(table.reset_index(drop=True), window=self.window, edges=self.edges,
                             timing=self.timing, epoch=self.epoch, first_time=self.first_time,
                             last_time=self.last_time, lines=self.lines, skipped_by_kind=self.kinds,
                             skipped_examples=self.examples, undecodable=self.undecodable,
                             undecodable_examples=self.undecodable_examples, largest_chunk=self.largest_chunk,
                             source=self.source, by_endpoint=self.by_endpoint)

    def warn(self) -> None:
        skipped = sum(self.kinds.values())
        if skipped:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.kinds.items()))
            shown = "\n".join(f"  {f} line {n} ({k}): {t[:200]!r}" for f, n, k, t in self.examples)
            warnings.warn(f"{self.source}: skipped {skipped} of {self.lines} lines that did not parse ({kinds}); "
                          f"first ones:\n{shown}", MalformedLinesWarning, stacklevel=4)
        if self.undecodable:
            where = ", ".join(f"{f} line {n}" for f, n in self.undecodable_examples)
            warnings.warn(f"{self.source}: {self.undecodable} line(s) held bytes that are not valid UTF-8 and "
                          f"were decoded with replacement characters ({where}"
                          f"{', ...' if self.undecodable > len(self.undecodable_examples) else ''})",
                          UndecodableLinesWarning, stacklevel=4)
