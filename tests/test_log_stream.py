"""Tests of the streaming log aggregation (capacity.logs.aggregate / convert, `capacity logs convert`).

Expected counts are worked by hand from the lines each test writes; the independent reference for whole
files is the pandas reader (read_nginx / read_requests) grouped by window.
"""
from __future__ import annotations

import gzip
import warnings

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")
pytest.importorskip("pyarrow")

from _cli import run_cli  # noqa: E402
from capacity import logs  # noqa: E402
from capacity.logs import MalformedLinesWarning  # noqa: E402


def line(sec, path="/a", status=200, rt="0.050", up="0.040", method="GET", day="10/Oct/2023:13"):
    return (f'10.0.0.1 - - [{day}:{sec // 60:02d}:{sec % 60:02d} +0000] "{method} {path} HTTP/1.1" {status} 5 '
            f'"-" "curl/8" {rt} {up}')


def write(path, lines, newline=True):
    path.write_text("\n".join(lines) + ("\n" if newline else ""))
    return path


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return logs.aggregate(*args, **kwargs)


# Hand-worked: minute 0 has /a x2 (0.050 s, 0.200 s) and /b x1 (503, '-' duration); minute 1 has /a x1 (2.5 s).
HAND = [line(5), line(30, rt="0.200", up="0.1, 0.05"), line(59, path="/b?x=1", status=503, rt="-", up="-"),
        line(61, rt="2.5", up="2.4")]


def test_hand_worked_counts_and_buckets(tmp_path):
    agg = logs.aggregate(write(tmp_path / "a.log", HAND), window=60, edges=[0.1, 1.0])
    t = agg.table.set_index([agg.table["start"].dt.minute, "endpoint"])
    assert t.loc[(0, "GET /a"), ["requests", "errors", "le_0.1", "le_1", "le_inf"]].tolist() == [2, 0, 1, 1, 0]
    assert t.loc[(0, "GET /b"), ["requests", "errors", "no_duration", "le_0.1"]].tolist() == [1, 1, 1, 0]
    assert t.loc[(1, "GET /a"), ["requests", "le_0.1", "le_1", "le_inf"]].tolist() == [1, 0, 0, 1]
    assert t.loc[(0, "GET /a"), "duration_sum"] == pytest.approx(0.25)
    assert agg.lines == 4 and agg.skipped == 0
    up = logs.aggregate(tmp_path / "a.log", window=60, edges=[0.1, 1.0], timing="upstream", by_endpoint=False)
    assert up.table["le_0.1"].tolist() == [1, 0] and up.table["le_1"].tolist() == [1, 0]   # 0.04; 0.15 summed


def test_malformed_lines_counted_by_kind(tmp_path):
    lines = [line(1), "garbage", "", line(2).replace("10/Oct", "10/Foo"), line(3, rt="1.2.3"),
             line(4, up="0.1, x"), line(5)[:40]]
    path = write(tmp_path / "m.log", lines, newline=False)
    with pytest.warns(MalformedLinesWarning, match="no_match: 2"):
        agg = logs.aggregate(path, max_examples=10)
    # "0.1, x" is not an upstream list at all (no match); "1.2.3" has the shape of a number but is not one
    assert agg.skipped_by_kind == {"no_match": 2, "blank": 1, "bad_time": 1, "bad_number": 1, "truncated": 1}
    assert agg.lines == 7 and agg.requests == 1
    assert [e[1] for e in agg.skipped_examples] == [2, 3, 4, 5, 6, 7]
    ref = pd.DataFrame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = logs.read_nginx(path)
    assert ref.attrs["skipped"] == agg.skipped


def test_undecodable_bytes_counted_and_kept(tmp_path):
    path = tmp_path / "u.log"
    path.write_bytes((line(1) + "\n").encode() + line(2).replace("curl/8", "c\xff").encode("latin-1") + b"\n")
    with pytest.warns(logs.UndecodableLinesWarning):
        agg = logs.aggregate(path)
    assert agg.undecodable == 1 and agg.requests == 2


def synthetic(n, seed=1):
    rng = np.random.default_rng(seed)
    paths = np.array(["/a", "/b?q=1", "/c/7", "/d"])
    out = []
    for i in range(n):
        rt = rng.lognormal(-3, 1)
        up = "-" if i % 17 == 0 else (f"{rt * 0.3:.3f}, {rt * 0.5:.3f}" if i % 11 == 0 else f"{rt * 0.9:.3f}")
        out.append(line(i // 20 % 3600, path=paths[i % 4], status=(503 if i % 13 == 0 else 200),
                        rt=f"{rt:.3f}", up=up, method="POST" if i % 3 == 0 else "GET"))
    return out


def reference(df, window, edges, timing="request_time"):
    """The aggregates from the pandas reader, computed here independently."""
    secs = df["time"].astype("int64").to_numpy() / 1e6
    ep = df["method"] + " " + df["path"].str.split("?").str[0]
    d = df[timing].to_numpy()
    b = np.where(np.isnan(d), -1, np.searchsorted(edges, d, side="left"))
    return pd.DataFrame({"w": np.floor(secs / window).astype(int), "endpoint": ep, "b": b}).value_counts()


@pytest.mark.parametrize("chunk_lines", [37, 100_000])
def test_equal_to_the_pandas_reader_and_chunk_size_honoured(tmp_path, chunk_lines):
    path = write(tmp_path / "s.log", synthetic(3000))
    edges = np.array([0.01, 0.03, 0.1, 0.3])
    agg = logs.aggregate(path, window=30, edges=edges, chunk_lines=chunk_lines, threads=2)
    assert agg.largest_chunk <= chunk_lines
    ref = reference(logs.read_nginx(path), 30, edges)
    t = agg.table
    names = ["le_0.01", "le_0.03", "le_0.1", "le_0.3", "le_inf"]
    got = {}
    for _, row in t.iterrows():
        w = int(row["start"].value // 1_000_000_000 // 30)
        for b, name in enumerate(names):
            if row[name]:
                got[(w, row["endpoint"], b)] = row[name]
    assert got == {k: v for k, v in ref.items() if k[2] >= 0}
    assert t["requests"].sum() == 3000 and t["errors"].sum() == sum(1 for i in range(3000) if i % 13 == 0)


def test_gzip_zstd_glob_and_directory(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    lines = synthetic(400)
    data = ("\n".join(lines) + "\n").encode()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.log.gz").write_bytes(gzip.compress(data[: data.index(b"\n", 20000) + 1]))
    (tmp_path / "d" / "b.log.zst").write_bytes(zstandard.ZstdCompressor().compress(data[data.index(b"\n", 20000) + 1:]))
    plain = logs.aggregate(write(tmp_path / "all.log", lines))
    for source in (tmp_path / "d", str(tmp_path / "d" / "*.*")):
        agg = logs.aggregate(source)
        assert agg.lines == 400
        pd.testing.assert_frame_equal(agg.table, plain.table)


def test_csv_unit_refused_and_stated(tmp_path):
    csv = tmp_path / "r.csv"
    csv.write_text("timestamp,latency,route\n2024-03-01T10:00:00Z,120,/a\n2024-03-01T10:00:30Z,80,/a\n")
    with pytest.raises(ValueError, match="duration_unit="):
        logs.aggregate(csv)
    agg = logs.aggregate(csv, duration_unit="ms", edges=[0.1])
    assert agg.table[["requests", "le_0.1", "le_inf"]].values.tolist() == [[2, 1, 1]]


def test_parquet_round_trip_and_fit_ready(tmp_path):
    path = write(tmp_path / "s.log", synthetic(2000))
    agg = logs.aggregate(path, window=30)
    report = logs.convert(path, tmp_path / "r.parquet")
    assert report["rows"] == 2000 and report["skipped"] == 0
    back = logs.read_requests(tmp_path / "r.parquet")
    ref = logs.read_nginx(path)
    assert np.allclose(back["duration"], ref["request_time"]) and (back["status"] == ref["status"]).all()
    again = logs.aggregate(tmp_path / "r.parquet", window=30)
    pd.testing.assert_frame_equal(again.table.drop(columns="duration_sum"), agg.table.drop(columns="duration_sum"))
    logs.convert(path, tmp_path / "agg.parquet", aggregate=True, window=30)
    stored = logs.aggregate(tmp_path / "agg.parquet")
    pd.testing.assert_frame_equal(stored.table, agg.table, check_dtype=False)
    windows = agg.windows()
    # the log starts on a window boundary (13:00:00) and ends 20 s into its last 30 s window: only that one is left out
    assert len(windows) == agg.table["start"].nunique() - 1
    assert windows[-1]["start"] < agg.table["start"].max()
    w0 = windows[0]
    rows = agg.table[agg.table["start"] == w0["start"]]
    assert w0["arrival_rate"] == rows["requests"].sum() / 30
    assert len(w0["counts"]) == len(w0["bounds"]) + 1 and sum(w0["counts"]) == rows["requests"].sum()
    from capacity.fit.histograms import _parse_windows
    parsed = _parse_windows(windows, 1)          # what from_histograms validates
    assert parsed.size == len(windows)


def test_bad_arguments_named(tmp_path):
    path = write(tmp_path / "a.log", HAND)
    for kwargs, name in [({"window": 0}, "window"), ({"chunk_lines": 0}, "chunk_lines"), ({"timing": "x"}, "timing"),
                         ({"edges": [1, 0.5]}, "edges"), ({"format": "json"}, "format")]:
        with pytest.raises(ValueError, match=name):
            logs.aggregate(path, **kwargs)
    with pytest.raises(FileNotFoundError):
        logs.aggregate(tmp_path / "missing.log")


def test_cli_convert_end_to_end(tmp_path):
    path = write(tmp_path / "a.log", HAND + ["garbage"])
    code, out, err = run_cli("logs", "convert", str(path), "--out", str(tmp_path / "r.parquet"))
    assert code == 0 and "wrote 4 rows" in out and "skipped 1 (no_match 1)" in out
    assert len(logs.read_requests(tmp_path / "r.parquet")) == 4
    code, out, _ = run_cli("logs", "convert", str(path), "--out", str(tmp_path / "g.parquet"), "--aggregate",
                            "--window", "1min")
    assert code == 0 and quiet(tmp_path / "g.parquet").requests == 4
    code, out, err = run_cli("logs", "convert", str(tmp_path / "nope.log"), "--out", str(tmp_path / "x.parquet"))
    assert code == 2 and "No such file" in err and "Traceback" not in err + out


def test_request_lines_that_are_not_method_uri_are_counted(tmp_path):
    # three parsed lines, two of them without a "METHOD URI" request: they count with endpoint None
    lines = [line(1), line(2).replace('"GET /a HTTP/1.1"', '"weird"'), line(3).replace('"GET /a', '"GET  /a')]
    agg = logs.aggregate(write(tmp_path / "w.log", lines), window=60)
    assert agg.requests == 3 and agg.skipped == 0
    # "GET  /a HTTP/1.1" (two spaces): an empty path and then two words, not "METHOD /path PROTO" either
    assert agg.table[["endpoint", "requests"]].values.tolist() == [["GET /a", 1], [None, 2]]


def test_small_blocks_give_the_same_counts_and_line_numbers(tmp_path, monkeypatch):
    from capacity import _log_stream

    lines = synthetic(700)
    lines[5], lines[333], lines[699] = "garbage", "", line(3)[:30]
    path = write(tmp_path / "b.log", lines, newline=False)
    whole = quiet(path, window=30, max_examples=10)
    # blocks of ~1 kB (a few lines each) and lines longer than the slack: every block edge case is hit
    monkeypatch.setattr(_log_stream, "_BLOCK_BYTES", 1000)
    monkeypatch.setattr(_log_stream, "_SLACK_BYTES", 16)
    small = quiet(path, window=30, max_examples=10, threads=2)
    pd.testing.assert_frame_equal(small.table, whole.table)
    assert small.skipped_by_kind == whole.skipped_by_kind == {"no_match": 1, "blank": 1, "truncated": 1}
    assert [e[1:3] for e in small.skipped_examples] == [(6, "no_match"), (334, "blank"), (700, "truncated")]
    assert small.lines == 700 and small.largest_chunk < 20


def test_memory_does_not_grow_with_the_log(tmp_path):
    """The reader keeps per-window counts and a few 8 MB blocks in flight, so a log four times as
    long (80 -> 320 MB) is read with the same peak memory: each size is aggregated in a fresh
    process and its peak resident set (ru_maxrss, which sees polars' and Arrow's native memory)
    compared; the bigger may take at most a tenth of its extra 240 MB.  Measured at 40 / 160 /
    320 MB: 314 / 336 / 338 MB (the thread pools fill up over the first blocks, then it is flat)."""
    import subprocess
    import sys

    block = ("\n".join(synthetic(20_000)) + "\n").encode()
    sizes = {}
    for copies in (2, 8):
        path = tmp_path / f"x{copies}.log"
        with open(path, "wb") as f:
            for _ in range(copies * max(1, (40 << 20) // len(block))):
                f.write(block)
        code = ("import resource, warnings; warnings.simplefilter('ignore'); from capacity import logs; "
                f"a = logs.aggregate({str(path)!r}, window=60); "
                "print(a.lines, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        sizes[copies] = (int(out[0]), int(out[1]) * 1024, path.stat().st_size)
    (n1, rss1, b1), (n4, rss4, b4) = sizes[2], sizes[8]
    assert n4 == 4 * n1 and b4 > 300 << 20
    assert rss4 - rss1 < 0.1 * (b4 - b1), (rss1 >> 20, rss4 >> 20)


def test_cli_convert_of_a_request_table_keeps_every_time_and_reads_back(tmp_path):
    """A CSV request table through ``capacity logs convert``: the Parquet it writes holds each
    request's time, duration and upstream time in seconds (it once kept the time and endpoint only,
    and the file could not be read back), under names read back as seconds.  A table whose duration
    column has no unit in its name is refused until --duration-unit states it; never guessed."""
    csv = tmp_path / "r.csv"
    csv.write_text("time,latency_ms,upstream_time_ms,endpoint,status\n"
                   "1.0,20,15,/a,200\n2.0,35,30,/b,200\n3.5,1500,1490,/a,504\n")
    code, out, err = run_cli("logs", "convert", str(csv), "--out", str(tmp_path / "r.parquet"))
    assert code == 0 and "wrote 3 rows" in out, err
    back = logs.read_requests(tmp_path / "r.parquet")
    np.testing.assert_allclose(back["duration"], [0.020, 0.035, 1.5], rtol=1e-12)
    np.testing.assert_allclose(back["upstream_time"], [0.015, 0.030, 1.49], rtol=1e-12)
    assert list(back["endpoint"]) == ["/a", "/b", "/a"] and list(back["status"]) == [200, 200, 504]
    bare = tmp_path / "bare.csv"
    bare.write_text("time,latency\n1.0,20\n2.0,35\n")
    code, _, err = run_cli("logs", "convert", str(bare), "--out", str(tmp_path / "b.parquet"))
    assert code == 2 and "'latency' has no unit in its name" in err and "Traceback" not in err
    code, out, err = run_cli("logs", "convert", str(bare), "--out", str(tmp_path / "b.parquet"),
                             "--duration-unit", "ms")
    assert code == 0, err
    np.testing.assert_allclose(logs.read_requests(tmp_path / "b.parquet")["duration"], [0.020, 0.035])
