"""The data files under data/ parse, carry the documented columns and units, and
agree with the seed articles they were transcribed from (data/README.md).

The seed articles live outside the repository (../shared/seeds, read-only).
Checks that need them are skipped when that folder is absent."""
import math
import re
from pathlib import Path

import pandas as pd
import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SEEDS = ROOT.parent / "shared" / "seeds"
KINDS = {"measured", "stated", "inferred"}

LOG_COLUMNS = ["time", "duration_s", "endpoint"]
GC_COLUMNS = [
    "semi_space_mb", "gc_cpu_share", "gc_time_share_gctrace", "gc_count_3min", "scavenge_count_3min",
    "gc_time_3min_s", "mean_gc_pause_low_s", "mean_gc_pause_high_s", "scavenge_time_low_s",
    "scavenge_time_high_s", "qps", "qps_change_vs_16mb", "notes",
]


def _seed(prefix: str) -> str:
    if not SEEDS.is_dir():
        pytest.skip(f"seed articles not present at {SEEDS}")
    found = sorted(SEEDS.glob(f"{prefix}_*.txt"))
    if not found:
        pytest.skip(f"seed {prefix}_*.txt not present in {SEEDS}")
    return found[0].read_text(encoding="utf-8")


def _toml(name: str) -> dict:
    with open(DATA / name, "rb") as f:
        return tomllib.load(f)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return pd.read_csv(DATA / "incident_request_log.csv")


@pytest.fixture(scope="module")
def facts() -> dict:
    return _toml("incident_facts.toml")


@pytest.fixture(scope="module")
def gc() -> pd.DataFrame:
    return pd.read_csv(DATA / "gc_semispace.csv")


@pytest.fixture(scope="module")
def rules() -> dict:
    return _toml("timeout_rules.toml")


# ---------------------------------------------------------------- request log

def test_log_columns_and_types(log):
    assert list(log.columns) == LOG_COLUMNS
    assert log["duration_s"].dtype.kind == "f"
    assert log["time"].str.fullmatch(r"\d\d:\d\d:\d\d").all()
    assert (log["endpoint"] == "/api/xxx/list").all()


def test_log_rows_positive_and_ordered(log):
    assert len(log) == 49
    assert (log["duration_s"] > 0).all()
    seconds = pd.to_timedelta(log["time"]).dt.total_seconds()
    assert seconds.is_monotonic_increasing  # non-decreasing, 1 s resolution
    assert log["duration_s"].max() == pytest.approx(30.001)  # nginx gives up at 30 s


def test_log_first_and_last_rows(log):
    assert log.iloc[0].tolist() == ["09:20:25", pytest.approx(0.091), "/api/xxx/list"]
    assert log.iloc[-1].tolist() == ["09:20:59", pytest.approx(30.000), "/api/xxx/list"]
    assert (log["time"] == "09:20:25").sum() == 9
    assert (log["time"] == "09:20:50").sum() == 11


def test_log_matches_the_article_line_by_line():
    text = _seed("000")
    printed = re.findall(r"^\s*(\d\d:\d\d:\d\d)\s+(\d+\.\d+)\s+(/api/\S+)\s*$", text, flags=re.M)
    assert len(printed) == 49
    raw = pd.read_csv(DATA / "incident_request_log.csv", dtype=str)  # exact strings, e.g. "30.000"
    assert [tuple(r) for r in raw.itertuples(index=False)] == printed


# ---------------------------------------------------------------- incident facts

def test_facts_have_the_documented_keys(facts):
    assert facts["source"]["file"] == "shared/seeds/000_3cf4021f715b2fb5.txt"
    entries = facts["fact"] + facts["experiment"]
    ids = [f["id"] for f in entries]
    assert len(ids) == len(set(ids))
    for f in entries:
        assert {"id", "what", "kind", "quote", "where"} <= f.keys(), f["id"]
        assert f["kind"] in KINDS, f["id"]
        if "low" in f or "high" in f:
            assert f["low"] <= f["high"], f["id"]
        if "value" in f or "low" in f:
            assert "unit" in f, f["id"]
    assert {f["kind"] for f in facts["fact"]} == KINDS


def test_fact_spot_values(facts):
    by_id = {f["id"]: f for f in facts["fact"]}
    assert by_id["peak_qps"]["value"] == 67 and by_id["peak_qps"]["unit"] == "1/s"
    assert by_id["peak_qps"]["duration_s"] == 1
    assert (by_id["daily_qps"]["low"], by_id["daily_qps"]["high"]) == (6, 10)
    assert by_id["burst_qps_each_minute"]["value"] == 20
    assert (by_id["normal_latency"]["low"], by_id["normal_latency"]["high"]) == (0.040, 0.050)
    assert by_id["fraction_under_100ms"]["value"] == 0.995
    assert by_id["nginx_timeout"]["value"] == 30 and by_id["nginx_timeout"]["unit"] == "s"
    assert by_id["host_cpu"]["value"] == 0.30
    assert (by_id["process_cpu"]["low"], by_id["process_cpu"]["high"]) == (0.16, 0.25)
    assert by_id["fault_window"]["duration_s"] == 900
    assert by_id["slow_requests_per_day"]["value"] == 1000
    assert by_id["max_response_time"]["value"] == 118.36
    fix = by_id["fix_redis_cache"]
    assert (fix["before_low"], fix["before_high"]) == (0.15, 0.25)
    assert (fix["after_low"], fix["after_high"]) == (0.04, 0.05)


def test_experiments_as_printed(facts):
    exp = {e["id"]: e for e in facts["experiment"]}
    for e in exp.values():
        assert sorted(e["request_index"]) == list(range(30))
        assert len(e["completion_s"]) == 30 == e["requests"]
        assert e["completion_s"] == sorted(e["completion_s"])  # printed in completion order
    fcfs, ps = exp["blocking_1s_cpu"]["completion_s"], exp["sliced_1s_cpu"]["completion_s"]
    assert (fcfs[0], fcfs[-1]) == (0.842, 23.064)
    assert (ps[0], ps[-1]) == (27.696, 27.973)
    assert exp["blocking_1s_cpu"]["request_index"][:8] == [0, 1, 2, 3, 4, 5, 7, 6]
    assert exp["sliced_1s_cpu"]["request_index"] == list(range(30))


def test_experiment_values_match_the_article(facts):
    text = _seed("000")
    pattern = r"第(\d+)条请求完成,\s*耗时(\d+)毫秒"
    printed = [(int(i), int(ms) / 1000) for i, ms in re.findall(pattern, text)]
    assert len(printed) == 60
    exp = {e["id"]: e for e in facts["experiment"]}
    for e, block in ((exp["blocking_1s_cpu"], printed[:30]), (exp["sliced_1s_cpu"], printed[30:])):
        assert list(zip(e["request_index"], e["completion_s"])) == block


# ---------------------------------------------------------------- GC table

def test_gc_columns_and_units(gc):
    assert list(gc.columns) == GC_COLUMNS
    assert gc["semi_space_mb"].tolist() == [16, 64, 128, 256]
    for col in GC_COLUMNS[1:-1]:
        assert gc[col].dtype.kind in "if", col
    shares = gc["gc_cpu_share"]
    assert shares.between(0, 1).all() and shares.is_monotonic_decreasing
    for low, high in (("mean_gc_pause_low_s", "mean_gc_pause_high_s"),
                      ("scavenge_time_low_s", "scavenge_time_high_s")):
        both = gc[[low, high]].dropna()
        assert (both[low] <= both[high]).all()
        assert (gc[[low, high]].dropna(how="all").max(axis=None) < 1.0)  # seconds, not ms
    assert gc["notes"].str.len().gt(20).all()


def test_gc_spot_values(gc):
    row = gc.set_index("semi_space_mb")
    assert row.loc[16, "gc_cpu_share"] == 0.275
    assert row.loc[16, "gc_time_share_gctrace"] == 0.2687
    assert row.loc[64, "gc_cpu_share"] == 0.0714
    assert row.loc[128, "gc_cpu_share"] == 0.0671
    assert row.loc[256, "gc_cpu_share"] == 0.0599
    assert row["gc_count_3min"].tolist()[:3] == [1008, 312, 145]
    assert math.isnan(row.loc[256, "gc_count_3min"])  # only "下降了一倍" in the article
    assert (row.loc[16, "gc_time_3min_s"], row.loc[64, "gc_time_3min_s"]) == (47.7, 11.8)
    assert (row.loc[16, "mean_gc_pause_low_s"], row.loc[16, "mean_gc_pause_high_s"]) == (0.050, 0.060)
    assert row.loc[128, "scavenge_time_high_s"] == 0.100
    assert row.loc[256, "scavenge_time_high_s"] == 0.150
    assert row.loc[64, "qps_change_vs_16mb"] == 0.10
    assert row.loc[16, "qps"] == 320


def test_gc_numbers_appear_in_the_article(gc):
    text = _seed("003")
    for number in ["27.5%", "7.14%", "6.71", "5.99", "26.87%", "1008", "312", "145", "988", "294",
                   "47.7s", "11.8s", "50~60ms", "40ms", "100ms", "150ms", "10%", "320", "16M"]:
        assert number in text, number


# ---------------------------------------------------------------- timeout rules

def test_timeout_rules(rules):
    by_id = {r["id"]: r for r in rules["rule"] + rules["result"]}
    for r in by_id.values():
        assert {"id", "what", "kind", "quote", "where"} <= r.keys(), r["id"]
        assert r["kind"] in KINDS, r["id"]
    assert by_id["timeout_core"]["p999_multiplier"] == 3.0
    assert by_id["timeout_noncore"]["p999_multiplier"] == 1.5
    assert by_id["timeout_core"]["cap"] == by_id["timeout_noncore"]["cap"] == "user_acceptable_wait_s"
    assert by_id["rate_limit_per_machine_and_cluster"]["levels"] == ["machine", "cluster"]
    assert by_id["timeout_equal_to_p999"]["timed_out_fraction"] == 0.001
    assert "retries" in rules["absent"]


# ---------------------------------------------------------------- quotes and README

@pytest.mark.parametrize("name, prefix, tables", [
    ("incident_facts.toml", "000", ("fact", "experiment")),
    ("timeout_rules.toml", "001", ("rule", "result")),
])
def test_quotes_are_verbatim(name, prefix, tables):
    text = _squash(_seed(prefix))
    data = _toml(name)
    for table in tables:
        for entry in data[table]:
            for fragment in re.split(r" / | \.\.\. ", entry["quote"]):
                assert _squash(fragment) in text, (entry["id"], fragment)


def test_readme_documents_every_file_and_column():
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for path in DATA.iterdir():
        if path.name != "README.md":
            assert f"`{path.name}`" in readme, path.name
    for column in LOG_COLUMNS + GC_COLUMNS:
        assert f"`{column}`" in readme, column


def test_node_yields_are_the_validation_harness_measurements():
    """The yield gaps notebook 02 uses are the ones validation/README.md reports, to the digit."""
    readme = _squash((ROOT / "validation" / "README.md").read_text(encoding="utf-8"))
    yields = {y["name"]: y for y in _toml("node_yields.toml")["yield"]}
    assert set(yields) == {"setImmediate", "setTimeout(0)"}
    assert yields["setImmediate"]["admission"] == "fifo" and yields["setTimeout(0)"]["admission"] == "idle"
    for name, y in yields.items():
        ms = f"{1e3 * y['slice_delay_s']:g} ms per `{name}`"
        assert ms in readme, ms
        assert y["kind"] == "measured" and "validation/" in y["where"]


def test_gc_whatif_inputs_are_the_stated_reading_of_the_table(gc):
    """gc_semispace_inputs.csv is derived, not transcribed: recompute it from gc_semispace.csv by the
    reading its rows state (pause = GC time / count, else the scavenge time; rate = count / 180 s,
    256 MB's count half of 128 MB's)."""
    inputs = pd.read_csv(DATA / "gc_semispace_inputs.csv").set_index("semi_space_mb")
    table = gc.set_index("semi_space_mb")
    assert list(inputs.index) == list(table.index)
    assert (inputs["kind"] == "inferred").all()
    for mb, row in table.iterrows():
        pause = row["gc_time_3min_s"] / row["gc_count_3min"] if pd.notna(row["gc_time_3min_s"]) \
            else row["scavenge_time_high_s"]
        count = row["gc_count_3min"] if pd.notna(row["gc_count_3min"]) else table.loc[128, "gc_count_3min"] / 2
        assert inputs.loc[mb, "gc_cpu_share"] == row["gc_cpu_share"]
        assert inputs.loc[mb, "pause_mean_s"] == pytest.approx(pause, rel=1e-15)
        assert inputs.loc[mb, "pause_rate_per_s"] == pytest.approx(count / 180.0, rel=1e-15)
