"""logs.aggregate on a Dask cluster (issue 18): the same aggregates as one machine reading the files.

The reference is the single-machine run of the same call; the files hold malformed and undecodable lines so
that the skipped counts, the first examples (across files, in order) and the line numbers are compared too.
"""
from __future__ import annotations

import gzip
import io
import warnings
from contextlib import redirect_stderr, redirect_stdout

import pandas as pd
import pytest

pytest.importorskip("polars")
pytest.importorskip("pyarrow")
distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed")

from capacity import cli, logs  # noqa: E402


def line(sec, path="/a", status=200, rt="0.050", up="0.040"):
    return (f'10.0.0.1 - - [10/Oct/2023:13:{sec // 60:02d}:{sec % 60:02d} +0000] "GET {path} HTTP/1.1" {status} 5 '
            f'"-" "curl/8" {rt} {up}')


def files(tmp_path):
    (tmp_path / "logs").mkdir()
    for k in range(4):
        rows = [line(k * 300 + i, path=f"/p{i % 3}", status=503 if i % 7 == 0 else 200, rt=f"0.{i % 9 + 1:03d}")
                for i in range(250)]
        rows[10 + k] = "garbage"
        rows[20] = line(k * 300 + 20, up="0.1, 1.2.3")
        data = ("\n".join(rows) + "\n").encode()
        if k == 1:
            data = data.replace(b"curl/8", b"c\xff", 1)
        target = tmp_path / "logs" / f"access-{k}.log"
        if k == 2:
            target = target.with_suffix(".log.gz")
            data = gzip.compress(data)
        target.write_bytes(data)
    (tmp_path / "logs" / "requests.csv").write_text(
        "time,duration_ms,endpoint\n2023-10-10T13:05:00Z,12,/csv\n2023-10-10T13:05:30Z,not-a-number,/csv\n")
    return tmp_path / "logs"


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return logs.aggregate(*args, **kwargs)


def test_aggregate_on_a_local_cluster_equals_one_machine(tmp_path):
    source = files(tmp_path)
    one = quiet(source, window=60, max_examples=6)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        many = quiet(source, window=60, max_examples=6, client=client)
        code = cli.main(["logs", "convert", str(source), "--out", str(tmp_path / "agg.parquet"), "--aggregate",
                         "--scheduler", cluster.scheduler_address])
    pd.testing.assert_frame_equal(many.table, one.table)   # duration_sum to rounding, every count exactly
    assert many.lines == one.lines == 4 * 250 + 2
    assert many.skipped_by_kind == one.skipped_by_kind == {"no_match": 4, "bad_number": 4, "bad_row": 1}
    assert many.skipped_examples == one.skipped_examples
    assert [(e[0].rsplit("/", 1)[-1], e[1]) for e in many.skipped_examples[:3]] == \
        [("access-0.log", 11), ("access-0.log", 21), ("access-1.log", 12)]
    assert many.undecodable == one.undecodable == 1 and many.undecodable_examples == one.undecodable_examples
    assert (many.first_time, many.last_time) == (one.first_time, one.last_time)
    assert code == 0
    stored = quiet(tmp_path / "agg.parquet")
    pd.testing.assert_frame_equal(stored.table, one.table, check_dtype=False)


def test_client_checked_and_scheduler_needs_aggregate(tmp_path):
    path = tmp_path / "a.log"
    path.write_text(line(1) + "\n")
    with pytest.raises(ValueError, match="client"):
        logs.aggregate(path, client="tcp://127.0.0.1:8786")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["logs", "convert", str(path), "--out", str(tmp_path / "r.parquet"),
                         "--scheduler", "tcp://127.0.0.1:1"])
    assert code == 2 and "--scheduler" in err.getvalue() and "Traceback" not in err.getvalue()
