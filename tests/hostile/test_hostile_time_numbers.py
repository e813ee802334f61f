"""Hostile clocks and numbers in step logs (issue 45 D-T1 D-N1)."""
from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import parse_file


def _steplog(year: str, n: int = 60) -> str:
    return "".join(f"{year}-12-31 23:59:{i:02d},000 INFO [step {i}] allocated: {100 * i} MB\n" for i in range(n))


@pytest.mark.parametrize("year", ["2300", "9999", "1969", "0001"])
def test_a_step_log_clock_outside_1970_2200_is_counted_as_skipped(tmp_path, year):
    """D-T1: the readings were analyzed on their steps as if the log had no clock, skipped 0, no note."""
    p = tmp_path / "train.log"
    p.write_text(_steplog(year))
    _, parsed = parse_file(p, expect="step-markers")
    assert parsed.skipped.counts == {"unreadable timestamp": 60}
    assert parsed.samples.height == 0


def test_only_the_lines_with_a_bad_clock_are_skipped(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(_steplog("2026", 50) + _steplog("2300", 10).replace("23:59:0", "23:59:5")
                 + "11/30/9999 04:00:00 INFO [step 70] allocated: 10 MB\n"
                 + "2026-13-31 04:00:00,000 INFO [step 71] allocated: 10 MB\n"
                 + "[titan] 2026/11/30 25:00:00 INFO [step 72] allocated: 10 MB\n")
    _, parsed = parse_file(p, expect="step-markers")
    assert parsed.skipped.counts == {"unreadable timestamp": 13}
    assert parsed.samples.height == 50 and parsed.samples["time"].null_count() == 0


def test_step_numbers_beyond_64_bits_leave_no_blank_rate(tmp_path):
    """D-N1: `grows linearly at  since sample 0` in the verdict, the finding and the Markdown."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text("".join(f"[step {10**25 + i}] allocated: {100 + i} MB\n" for i in range(60)))
    res = subprocess.run([sys.executable, "-m", "forensics", "report", str(job), "-o", str(tmp_path / "c.html"),
                          "--md", str(tmp_path / "c.md"), "--json", str(tmp_path / "c.json")],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    leak = next(f for f in doc["findings"] if f["kind"] == "leak")
    assert leak["rate_bytes_per_step"] is None and leak["rate_bytes_per_sample"] == 1 << 20
    texts = [res.stderr, (tmp_path / "c.md").read_text(), (tmp_path / "c.html").read_text(), doc["verdict_reason"],
             leak["summary"]]
    assert "1.00 MiB/sample" in leak["summary"] and "| Growth rate | 1.00 MiB/sample |" in texts[1]
    assert not [t for t in texts if "at  " in t or " at since" in t or "average )" in t]


@pytest.mark.parametrize("rates", [(None, None, None), (float("inf"), None, None), (None, float("nan"), None)])
def test_a_leak_no_rate_can_be_given_for_says_so(rates):
    from forensics.detect import leaks

    assert leaks._fmt_rate(rates[0], rates[1], 60.0, rates[2]) is None
    assert leaks._fmt_rate(rates[0], rates[1], 60.0, 1 << 20) == "1.00 MiB/sample"


def test_many_gpus_each_leak_names_its_own_gpu_capacity(tmp_path):
    """gpus_5000x40 (5,000 GPUs x 40 readings, 12 s): each GPU's leak looked up its capacity, and each
    chart whether a finding names it, by a pass over every series or finding. A smaller copy: each
    GPU's finding still has its own GPU's total, and the charts left out are of GPUs without one."""
    from hostile_cases import CSV_HEADER, _ts

    from forensics import pipeline
    from forensics.options import Options
    from forensics.report.charts import build_charts
    from forensics.report.formatting import Clock

    gpus = 30
    rows = [CSV_HEADER] + [
        f"{_ts('2026/11/30 04:', i)}, {g}, GPU-{g:08x}-0000-0000-0000-000000000000, 00000000:3B:00.0, H100, "
        f"{81920 + 1024 * g} MiB, {1000 + (100 * i if g % 2 else 0) + g} MiB, [N/A]\n"
        for i in range(40) for g in range(gpus)]
    (tmp_path / "nvidia-smi.csv").write_text("".join(rows))
    bundle, analysis = pipeline.run([str(tmp_path)], Options(tz="UTC"))
    leaks = {f.gpu: f for f in analysis.findings if f.kind == "leak"}
    assert sorted(leaks, key=int) == [str(g) for g in range(1, gpus, 2)]
    assert all(f.detail["capacity_bytes"] == (81920 + 1024 * int(g)) << 20 for g, f in leaks.items())
    charts, omitted, _ = build_charts(bundle, analysis, Clock("UTC"))
    assert omitted and set(leaks) <= {c["gpu"] for c in charts if c["kind"] == "gpu"}


_EDGE_BYTES = [None, 0, 1, -1, 2**50, 2**50 + 1, -(2**63), 2**63 - 1]
_EDGE_US = [None, 0, -1, 7_289_654_399_999_999, 7_289_654_400_000_000, 1_767_225_600_000_000, -(2**62)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_EDGE_BYTES), st.sampled_from(_EDGE_BYTES), st.sampled_from(_EDGE_US),
                          st.sampled_from(["allocated", "delta.allocated", None])), min_size=1, max_size=12))
def test_the_plausibility_check_skips_its_query_only_for_plausible_tables(rows):
    """ingest._plausible asks each table's lowest and highest values first (no query) and runs its own
    check only when one is off: the same rows kept, values dropped and lines counted either way."""
    from forensics import ingest
    from forensics.model import SAMPLES_SCHEMA, Parsed, Skipped, conform

    df = conform(pl.DataFrame({"bytes": [r[0] for r in rows], "total_bytes": [r[1] for r in rows],
                               "time": pl.Series([r[2] for r in rows], dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
                               "series": [r[3] for r in rows], "line": list(range(1, len(rows) + 1))}), SAMPLES_SCHEMA)
    got, want = Parsed(samples=df), Parsed(samples=df)
    got_skipped, want_skipped = Skipped(), Skipped()
    ingest._plausible(got, got_skipped)
    surely = ingest._surely_plausible
    try:
        ingest._surely_plausible = lambda *a: False
        ingest._plausible(want, want_skipped)
    finally:
        ingest._surely_plausible = surely
    assert got.samples.equals(want.samples) and got_skipped.counts == want_skipped.counts
    if surely(df, ("bytes", "total_bytes")):
        assert not want_skipped.counts


@pytest.mark.parametrize("timed", [0, 1, 2, 3])
def test_copies_are_looked_for_only_among_timed_readings(timed):
    """ingest._consistency returns at once, without a query, for a table with fewer than two times (a step
    log without a clock): a copy needs a time. Two equal readings with a time are still one copy."""
    from datetime import datetime, timezone

    from forensics import ingest
    from forensics.model import SAMPLES_SCHEMA, InputInfo, Parsed, Skipped, conform

    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [dict(time=t if i < timed else None, step=1, series="allocated", bytes=5 << 20, line=i + 1) for i in range(4)]
    p = Parsed(samples=conform(pl.DataFrame(rows), SAMPLES_SCHEMA))
    skipped = Skipped()
    ingest._consistency(p, "train.log", skipped, InputInfo(path="train.log"))
    assert skipped.counts.get(ingest.DUPLICATE, 0) == max(0, timed - 1)
    assert p.samples.height == 4 - max(0, timed - 1)
