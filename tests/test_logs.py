"""Tests of capacity.logs: nginx access logs and CSV per-request tables.

Reference values are hand-derived from the lines written in each test (the expected timestamps are the
written local times shifted by the written UTC offset; upstream sums are added by hand), never taken from
the implementation's output.  Line numbers of bad lines come from the position where the test wrote them.
"""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from capacity.logs import (
    COMBINED,
    COMBINED_WITH_TIMES,
    MalformedLinesWarning,
    UndecodableLinesWarning,
    iter_nginx,
    iter_requests,
    read_nginx,
    read_requests,
)

UTC = "UTC"

# (bytes of the line without newline, expected record or None when malformed)
GOOD_1 = (b'192.168.1.10 - - [10/Oct/2023:13:55:36 +0200] "GET /api/users?id=7 HTTP/1.1" 200 2326 '
          b'"http://example.com/start" "Mozilla/5.0 (X11; Linux x86_64)" 0.045 0.040')
IPV6 = (b'2001:db8:85a3::8a2e:370:7334 - alice [10/Oct/2023:13:55:36 +0200] "POST /api/orders HTTP/2.0" '
        b'201 512 "-" "curl/8.4.0" 0.120 0.110')
NO_TIMES = b'::1 - - [10/Oct/2023:13:55:37 +0200] "GET /health HTTP/1.1" 200 2 "-" "kube-probe/1.28" - -'
MULTI_COMMA = (b'10.0.0.5 - - [10/Oct/2023:13:55:37 +0200] "GET /api/search?q=a%20b HTTP/1.1" 200 77 "-" '
               b'"curl/8.4.0" 0.035 0.010, 0.020')
MULTI_COLON = (b'10.0.0.6 - - [10/Oct/2023:13:55:38 +0200] "GET /x-accel HTTP/1.1" 200 5 "-" "curl/8.4.0" '
               b'0.050 0.010 : 0.020')
GARBAGE = b"this is not a log line at all"
MISSING_FIELDS = b'10.0.0.7 - - [10/Oct/2023:13:55:38 +0200] "GET / HTTP/1.1" 200'
BROKEN_QUOTE = (b'10.0.0.8 - - [10/Oct/2023:13:55:38 +0200] "GET /broken HTTP/1.1 200 10 "-" "curl/8.4.0" '
                b'0.010 0.009')
BAD_UTF8 = (b'10.0.0.9 - - [10/Oct/2023:13:55:39 +0200] "GET /utf HTTP/1.1" 200 9 "-" "Bot\xff\xfe/1.0" '
            b'0.002 0.001')
BAD_DATE = (b'10.0.0.10 - - [10/Foo/2023:13:55:39 +0200] "GET /date HTTP/1.1" 200 9 "-" "curl/8.4.0" '
            b'0.002 0.001')
BAD_NUMBER = (b'10.0.0.11 - - [10/Oct/2023:13:55:39 +0200] "GET /num HTTP/1.1" 200 9 "-" "curl/8.4.0" '
              b'1.2.3 0.001')
TLS_PROBE = (b'203.0.113.4 - - [10/Oct/2023:13:55:40 +0200] "\\x16\\x03\\x01\\x00\\xF4\\x01" 400 157 "-" "-" '
             b'0.001 -')
BLANK = b""
TRUNCATED = b'10.0.0.12 - - [10/Oct/2023:13:55:41 +0200] "GET /cut HTTP/1.1" 200 1'  # no final newline

LINES = [GOOD_1, IPV6, GARBAGE, NO_TIMES, MULTI_COMMA, MISSING_FIELDS, MULTI_COLON, BROKEN_QUOTE, BAD_UTF8,
         BAD_DATE, BLANK, BAD_NUMBER, TLS_PROBE, TRUNCATED]
BAD = {GARBAGE, MISSING_FIELDS, BROKEN_QUOTE, BAD_DATE, BLANK, BAD_NUMBER, TRUNCATED}
BAD_LINE_NUMBERS = [i + 1 for i, line in enumerate(LINES) if line in BAD]  # 1-based, in file order


def write_log(path, lines=LINES, final_newline=False):
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    path.write_bytes(data)
    return path


@pytest.fixture
def messy_log(tmp_path):
    return write_log(tmp_path / "access.log")


def read_quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return read_nginx(*args, **kwargs)


def test_messy_log_good_lines_exact_values(messy_log):
    df = read_quietly(messy_log)
    assert len(df) == len(LINES) - len(BAD) == 7
    assert list(df["remote_addr"]) == ["192.168.1.10", "2001:db8:85a3::8a2e:370:7334", "::1", "10.0.0.5",
                                       "10.0.0.6", "10.0.0.9", "203.0.113.4"]
    # 13:55:36 at +0200 is 11:55:36 UTC
    assert df["time"].iloc[0] == pd.Timestamp("2023-10-10 11:55:36", tz=UTC)
    assert df["time"].iloc[6] == pd.Timestamp("2023-10-10 11:55:40", tz=UTC)
    assert str(df["time"].dt.tz) == "UTC"
    assert list(df["method"].iloc[:6]) == ["GET", "POST", "GET", "GET", "GET", "GET"]
    assert list(df["path"].iloc[:2]) == ["/api/users?id=7", "/api/orders"]
    assert df["path"].iloc[3] == "/api/search?q=a%20b"
    assert list(df["status"]) == [200, 201, 200, 200, 200, 200, 400]
    assert df["status"].dtype == np.int64
    assert list(df["bytes"]) == [2326, 512, 2, 77, 5, 9, 157]
    assert df["remote_user"].iloc[1] == "alice"
    assert df["http_referer"].iloc[0] == "http://example.com/start"
    assert df["http_user_agent"].iloc[0] == "Mozilla/5.0 (X11; Linux x86_64)"
    rt = df["request_time"].to_numpy()
    np.testing.assert_array_equal(rt[[0, 1, 3, 4, 5, 6]], [0.045, 0.120, 0.035, 0.050, 0.002, 0.001])
    assert math.isnan(rt[2])  # "-" is kept as NaN, not malformed
    up = df["upstream_response_time"].to_numpy()
    np.testing.assert_allclose(up[[0, 1, 3, 4, 5]], [0.040, 0.110, 0.030, 0.030, 0.001], rtol=0, atol=1e-15)
    assert math.isnan(up[2]) and math.isnan(up[6])
    assert list(df["upstream_attempts"]) == [1, 1, 0, 2, 2, 1, 0]


def test_messy_log_every_bad_line_counted_and_reported(messy_log):
    with pytest.warns(MalformedLinesWarning, match=r"skipped 7 of 14 lines") as record:
        df = read_quietly_but(messy_log, UndecodableLinesWarning, max_examples=5)
    assert df.attrs["lines"] == 14
    assert df.attrs["skipped"] == len(BAD) == 7
    examples = df.attrs["skipped_examples"]
    assert [n for n, _ in examples] == BAD_LINE_NUMBERS[:5] == [3, 6, 8, 10, 11]
    assert examples[0][1] == GARBAGE.decode()
    assert examples[1][1] == MISSING_FIELDS.decode()
    assert examples[4][1] == ""  # the blank line
    message = str(next(w.message for w in record if w.category is MalformedLinesWarning))
    assert "line 3: 'this is not a log line at all'" in message
    assert str(messy_log) in message


def test_truncated_last_line_is_malformed(tmp_path):
    # Even a last line that matches the format is not trusted without its newline: "0.01" may be "0.012" cut.
    complete = GOOD_1
    path = write_log(tmp_path / "cut.log", [IPV6, complete], final_newline=False)
    with pytest.warns(MalformedLinesWarning, match="skipped 1 of 2"):
        df = read_nginx(path)
    assert len(df) == 1 and df.attrs["skipped_examples"] == [(2, complete.decode())]
    path = write_log(tmp_path / "whole.log", [IPV6, complete], final_newline=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_nginx(path)) == 2


def test_undecodable_bytes_counted_but_line_kept(messy_log):
    with pytest.warns(UndecodableLinesWarning, match=r"1 line\(s\)"):
        df = read_quietly_but(messy_log, MalformedLinesWarning)
    assert df.attrs["undecodable"] == 1
    assert df.attrs["undecodable_examples"] == [LINES.index(BAD_UTF8) + 1]
    assert df.loc[df["path"] == "/utf", "http_user_agent"].item() == "Bot\ufffd\ufffd/1.0"


def read_quietly_but(path, category, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category)
        return read_nginx(path, **kwargs)


def test_strict_decoding_names_the_line(messy_log):
    with pytest.raises(ValueError, match=rf"line {LINES.index(BAD_UTF8) + 1} is not valid utf-8"):
        read_nginx(messy_log, errors="strict")


def test_latin1_encoding(tmp_path):
    line = (b'10.0.0.1 - - [10/Oct/2023:13:55:36 +0000] "GET /caf\xe9 HTTP/1.1" 200 1 "-" "M\xfcller" '
            b"0.010 0.009\n")
    (tmp_path / "l1.log").write_bytes(line)
    df = read_nginx(tmp_path / "l1.log", encoding="latin-1")
    assert df["path"].item() == "/caf\u00e9" and df["http_user_agent"].item() == "M\u00fcller"
    assert df.attrs["undecodable"] == 0


def test_unsplittable_request_line_kept_without_method(messy_log):
    df = read_quietly(messy_log)
    probe = df[df["status"] == 400]
    assert len(probe) == 1
    assert probe["method"].isna().item() and probe["path"].isna().item()
    assert probe["remote_addr"].item() == "203.0.113.4"


def test_empty_file_raises_naming_path(tmp_path):
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.log.*empty"):
        read_nginx(path)
    with pytest.raises(ValueError, match=r"empty\.log"):
        list(iter_nginx(path))


def test_no_parseable_line_raises(tmp_path):
    path = write_log(tmp_path / "junk.log", [GARBAGE, MISSING_FIELDS], final_newline=True)
    with pytest.raises(ValueError, match=r"junk\.log.*none of the 2 lines.*line 1"):
        read_nginx(path)


def test_chunk_boundaries_do_not_change_result(messy_log):
    whole = read_quietly(messy_log, chunk_lines=1_000)
    for chunk_lines in (1, 3, 4):
        part = read_quietly(messy_log, chunk_lines=chunk_lines)
        pd.testing.assert_frame_equal(part, whole)
        assert part.attrs == whole.attrs


def test_iter_nginx_aggregates_to_same_totals(messy_log):
    whole = read_quietly(messy_log)
    with pytest.warns(MalformedLinesWarning), pytest.warns(UndecodableLinesWarning):
        chunks = list(iter_nginx(messy_log, chunk_lines=3))
    assert len(chunks) == math.ceil(len(LINES) / 3)
    assert [c.attrs["first_line"] for c in chunks] == [1, 4, 7, 10, 13]
    assert sum(c.attrs["lines"] for c in chunks) == len(LINES)
    assert sum(c.attrs["skipped"] for c in chunks) == len(BAD)
    assert [n for c in chunks for n, _ in c.attrs["skipped_examples"]] == BAD_LINE_NUMBERS
    assert sum(len(c) for c in chunks) == len(whole)
    assert sum(c["bytes"].sum() for c in chunks) == whole["bytes"].sum() == 2326 + 512 + 2 + 77 + 5 + 9 + 157
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole, check_dtype=True)


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed_files_transparent(tmp_path, messy_log, compress):
    packed = tmp_path / "access.log.1"  # no telling extension: recognised by magic bytes
    packed.write_bytes(compress(messy_log.read_bytes()))
    df = read_quietly(packed)
    pd.testing.assert_frame_equal(df, read_quietly(messy_log))
    assert df.attrs["skipped"] == len(BAD)


def test_custom_log_format(tmp_path):
    fmt = '$remote_addr [$time_local] "$request" $status $request_time'
    path = tmp_path / "custom.log"
    path.write_text(
        '10.1.1.1 [01/Mar/2024:00:00:01 -0500] "GET /a HTTP/1.1" 200 0.250\n'
        '[::ffff:10.1.1.2] [01/Mar/2024:00:00:02 -0500] "DELETE /b/1 HTTP/1.1" 204 -\n'
        '10.1.1.3 [01/Mar/2024:00:00:03 -0500] "GET /c HTTP/1.1" 200 0.125 extra\n'
    )
    with pytest.warns(MalformedLinesWarning, match="skipped 1 of 3"):
        df = read_nginx(path, fmt)
    assert list(df.columns) == ["remote_addr", "time", "method", "path", "protocol", "status", "request_time"]
    assert list(df["time"]) == [pd.Timestamp("2024-03-01 05:00:01", tz=UTC),
                                pd.Timestamp("2024-03-01 05:00:02", tz=UTC)]
    assert list(df["method"]) == ["GET", "DELETE"]
    assert df["request_time"].iloc[0] == 0.25 and math.isnan(df["request_time"].iloc[1])
    assert df.attrs["skipped_examples"][0][0] == 3


def test_pasted_log_format_directive_iso8601_and_braces():
    directive = """log_format timed '$remote_addr $time_iso8601 "$request" '
                        '$status ${request_time}s up=$upstream_response_time';"""
    log = io.StringIO('10.0.0.1 2024-03-01T10:00:00+01:00 "GET /a HTTP/1.1" 200 0.500s up=0.300, 0.100\n')
    df = read_nginx(log, directive)
    assert df["time"].item() == pd.Timestamp("2024-03-01 09:00:00", tz=UTC)
    assert df["request_time"].item() == 0.5
    assert df["upstream_response_time"].item() == pytest.approx(0.4, abs=1e-15)


def test_msec_time_and_usecols():
    fmt = "$msec $request_time $upstream_addr $status"
    log = io.StringIO("1700000000.123 0.010 10.0.0.1:8080, 10.0.0.2:8080 502\n"
                      "1700000001.000 0.020 unix:/tmp/app.sock 200\n")
    df = read_nginx(log, fmt)
    assert df["time"].iloc[0] == pd.Timestamp(1700000000123, unit="ms", tz=UTC)
    assert df["upstream_addr"].iloc[0] == "10.0.0.1:8080, 10.0.0.2:8080"
    log.seek(0)
    small = read_nginx(log, fmt, usecols=["time", "request_time"])
    assert list(small.columns) == ["time", "request_time"]
    assert list(small["request_time"]) == [0.010, 0.020]
    with pytest.raises(ValueError, match="usecols"):
        read_nginx(io.StringIO("x\n"), fmt, usecols=["nope"])


def test_realistic_documentation_line():
    # The canonical combined-format example line (Apache/nginx documentation style).
    line = ('127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 '
            '"http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"\n')
    df = read_nginx(io.StringIO(line), COMBINED)
    row = df.iloc[0]
    assert row["remote_addr"] == "127.0.0.1" and row["remote_user"] == "frank"
    assert row["time"] == pd.Timestamp("2000-10-10 20:55:36", tz=UTC)
    assert (row["method"], row["path"], row["protocol"]) == ("GET", "/apache_pb.gif", "HTTP/1.0")
    assert row["status"] == 200 and row["bytes"] == 2326
    assert row["http_user_agent"] == "Mozilla/4.08 [en] (Win98; I ;Nav)"
    # The same line with the two timings appended parses with the default format.
    timed = line.rstrip("\n") + " 0.004 0.003\n"
    assert read_nginx(io.StringIO(timed))["request_time"].item() == 0.004
    assert COMBINED_WITH_TIMES.startswith(COMBINED)


def test_binary_file_object_and_text_object_agree(messy_log):
    with open(messy_log, "rb") as f:
        a = read_quietly(f)
    b = read_quietly(io.StringIO(messy_log.read_bytes().decode("utf-8", "replace")))
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("kwargs", [{"chunk_lines": 0}, {"chunk_lines": 2.5}, {"max_examples": -1},
                                    {"encoding": "no-such-codec"}, {"errors": "no-such-handler"}])
def test_bad_arguments(messy_log, kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        read_nginx(messy_log, **kwargs)


def test_bad_log_format():
    with pytest.raises(ValueError, match="log_format"):
        read_nginx(io.StringIO("x\n"), "no variables here")


# ----------------------------------------------------------------------------------------------------------
# read_requests
# ----------------------------------------------------------------------------------------------------------

def test_requests_csv_in_ms_with_detection_and_bad_rows(tmp_path):
    path = tmp_path / "req.csv"
    path.write_text(
        "Timestamp,route,latency_ms,upstream_ms,status\n"       # line 1
        "2024-03-01T10:00:00.000Z,/a,45,30,200\n"                 # 2
        "2024-03-01T10:00:00.250Z,/b,120.5,,200\n"               # 3
        "not a time,/a,10,5,200\n"                               # 4 bad time
        "2024-03-01T10:00:01.000Z,/a,abc,5,500\n"                # 5 bad duration
        "2024-03-01T10:00:01.500Z,/b,-3,1,200\n"                 # 6 negative duration
        "2024-03-01T10:00:02.000Z,/a,,1,504\n"                   # 7 missing duration: kept as NaN
        ",/a,5,1,200\n"                                          # 8 missing time
    )
    with pytest.warns(MalformedLinesWarning, match="skipped 4 of 7 rows"):
        df = read_requests(path)
    assert list(df.columns) == ["time", "duration", "endpoint", "upstream_time", "status"]
    assert list(df["time"]) == [pd.Timestamp("2024-03-01 10:00:00", tz=UTC),
                                pd.Timestamp("2024-03-01 10:00:00.250", tz=UTC),
                                pd.Timestamp("2024-03-01 10:00:02", tz=UTC)]
    np.testing.assert_allclose(df["duration"].to_numpy()[:2], [0.045, 0.1205], rtol=1e-15)
    assert math.isnan(df["duration"].iloc[2])
    np.testing.assert_allclose(df["upstream_time"].to_numpy()[[0, 2]], [0.030, 0.001], rtol=1e-15)
    assert math.isnan(df["upstream_time"].iloc[1])
    assert list(df["endpoint"]) == ["/a", "/b", "/a"]
    assert list(df["status"]) == [200, 200, 504]
    assert df.attrs["skipped"] == 4
    assert [n for n, _ in df.attrs["skipped_examples"]] == [4, 5, 6, 8]
    assert df.attrs["skipped_examples"][0][1].startswith("not a time,/a,10")


def test_requests_csv_seconds_numeric_time_and_chunks(tmp_path):
    path = tmp_path / "req_s.csv"
    rows = [(1000.0 + 0.1 * i, 0.01 * (i + 1)) for i in range(7)]
    path.write_text("ts,duration_s\n" + "".join(f"{t},{d}\n" for t, d in rows))
    df = read_requests(path)
    np.testing.assert_allclose(df["time"], [t for t, _ in rows], rtol=1e-15)
    np.testing.assert_allclose(df["duration"], [d for _, d in rows], rtol=1e-15)
    pd.testing.assert_frame_equal(read_requests(path, chunksize=3), df)
    assert [len(c) for c in iter_requests(path, chunksize=3)] == [3, 3, 1]


def test_requests_units_from_suffix_and_argument():
    base = "start,elapsed{suffix}\n2024-01-01 00:00:00,1500\n"
    assert read_requests(io.StringIO(base.format(suffix="_us")))["duration"].item() == pytest.approx(1.5e-3)
    assert read_requests(io.StringIO(base.format(suffix="_ms")))["duration"].item() == pytest.approx(1.5)
    assert read_requests(io.StringIO(base.format(suffix="")), duration_unit="ms")["duration"].item() == 1.5
    # A unit-less column is refused, not read as 1500 s (nor as anything else): rule 1.
    with pytest.raises(ValueError, match=r"'elapsed' has no unit.*duration_unit='ms'.*elapsed_ms"):
        read_requests(io.StringIO(base.format(suffix="")))
    # ... whatever its values: 0.025 is 25 ms as plausibly as 25 us.
    with pytest.raises(ValueError, match="has no unit in its name"):
        read_requests(io.StringIO("time,latency\n1,0.025\n"))
    # An upstream column without a unit too (its message names no CLI flag: there is none for it).
    with pytest.raises(ValueError, match=r"upstream column 'backend_time' has no unit.*upstream_unit='ms'") as err:
        read_requests(io.StringIO("time,duration_ms,backend_time\n1,25,20\n"))
    assert "--duration-unit" not in str(err.value)
    # nginx's $request_time is seconds by its format's definition, so that name is read as seconds.
    assert read_requests(io.StringIO("time,request_time\n1,0.025\n"))["duration"].item() == 0.025
    # ... and a median above a minute under that name is said, not silently taken as seconds.
    with pytest.warns(UserWarning, match=r"'request_time' is read as seconds.*duration_unit='ms'"):
        read_requests(io.StringIO("time,request_time\n1,250\n2,300\n"))


def test_requests_explicit_columns_and_dataframe_input():
    frame = pd.DataFrame({"when": pd.to_datetime(["2024-01-01 00:00:00", "2024-01-01 00:00:01"]),
                          "rt": [0.2, 0.3], "Handler": ["h1", "h2"]})
    df = read_requests(frame, time_column="when", duration_column="rt", duration_unit="s")
    assert list(df.columns) == ["time", "duration", "endpoint"]
    assert df["time"].iloc[1] == pd.Timestamp("2024-01-01 00:00:01", tz=UTC)  # naive taken as UTC
    assert list(df["duration"]) == [0.2, 0.3]
    assert list(df["endpoint"]) == ["h1", "h2"]


def test_requests_missing_columns_and_empty(tmp_path):
    with pytest.raises(ValueError, match=r"cannot find the duration column.*duration_column"):
        read_requests(io.StringIO("time,foo\n1,2\n"))
    with pytest.raises(ValueError, match="time_column='nope'"):
        read_requests(io.StringIO("time,duration_s\n1,2\n"), time_column="nope")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.csv.*empty"):
        read_requests(empty)
    header_only = tmp_path / "header.csv"
    header_only.write_text("time,duration_s\n")
    with pytest.raises(ValueError, match=r"header\.csv"):
        read_requests(header_only)


def test_requests_parquet(tmp_path):
    import importlib.util

    path = tmp_path / "req.parquet"
    if importlib.util.find_spec("pyarrow") is None:
        path.write_bytes(b"PAR1")
        with pytest.raises(ImportError, match="pyarrow"):
            read_requests(path)
        return
    frame = pd.DataFrame({"timestamp": pd.to_datetime(["2024-01-01T00:00:00Z"]), "duration_ms": [250.0]})
    frame.to_parquet(path)
    df = read_requests(path)
    assert df["duration"].item() == 0.25


# ----------------------------------------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_POOL = [GOOD_1, IPV6, NO_TIMES, MULTI_COMMA, MULTI_COLON, TLS_PROBE, GARBAGE, MISSING_FIELDS, BROKEN_QUOTE,
         BAD_DATE, BLANK, BAD_NUMBER]


@settings(max_examples=30, deadline=None)
@given(picks=st.lists(st.integers(0, len(_POOL) - 1), min_size=1, max_size=25),
       chunk_lines=st.integers(1, 30), max_examples=st.integers(0, 4))
def test_property_counts_and_chunk_invariance(picks, chunk_lines, max_examples):
    """Any mixture of known-good and known-bad lines: every bad line counted at its own line number, and the
    result is the same whatever the chunk size."""
    lines = [_POOL[i] for i in picks]
    expected_bad = [n + 1 for n, line in enumerate(lines) if line in BAD]
    data = io.BytesIO(b"\n".join(lines) + b"\n")
    if len(expected_bad) == len(lines):
        with pytest.raises(ValueError, match="none of the"):
            read_quietly(data, chunk_lines=chunk_lines)
        return
    df = read_quietly(data, chunk_lines=chunk_lines, max_examples=max_examples)
    assert len(df) == len(lines) - len(expected_bad)
    assert df.attrs["skipped"] == len(expected_bad)
    assert [n for n, _ in df.attrs["skipped_examples"]] == expected_bad[:max_examples]
    data.seek(0)
    pd.testing.assert_frame_equal(df, read_quietly(data, chunk_lines=10_000))


# ------------------------------------------------------------------ issue 14: bad input that slipped through
@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_request_table_from_a_binary_handle_on_compressed_data(tmp_path, compress):
    """A binary handle on a .gz/.bz2/.xz CSV is decompressed (by its magic bytes, as paths are); before,
    pandas read the compressed bytes as text and raised UnicodeDecodeError."""
    raw = b"time,duration_ms\n1.0,10\n2.0,12\n3.0,11\n"
    path = tmp_path / "requests.csv.gz"
    path.write_bytes(compress(raw))
    with open(path, "rb") as handle:
        got = read_requests(handle)
    assert got["duration"].tolist() == pytest.approx([0.010, 0.012, 0.011])
    assert read_requests(io.BytesIO(compress(raw)))["duration"].tolist() == pytest.approx([0.010, 0.012, 0.011])


def test_binary_file_read_as_a_table_names_the_file(tmp_path):
    path = tmp_path / "not_a_table.csv"
    path.write_bytes(bytes(range(128, 256)) * 40)
    with pytest.raises(ValueError, match=r"not_a_table\.csv: not a text table in utf-8: byte b'\\x80' at byte "
                                         r"offset 0"):
        read_requests(path)


def test_a_binary_file_is_refused_naming_it(tmp_path):
    """Bytes that are no CSV table: a ValueError that names the file (pandas' ParserError named
    neither the file nor a cause)."""
    path = tmp_path / "blob.log"
    path.write_bytes(bytes(range(256)) * 100)
    with pytest.raises(ValueError, match=r"blob\.log: not a CSV table \(a binary file\?\)"):
        read_requests(path)
