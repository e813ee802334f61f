"""The Python API for notebooks and scripts (README "Python API")."""
import json
from pathlib import Path

import polars as pl
import pytest

import forensics
from forensics.errors import UsageError

SAMPLE = Path(__file__).resolve().parent.parent / "sample_logs" / "leak_linear"


@pytest.fixture(scope="module")
def result():
    return forensics.analyze(SAMPLE, tz="UTC")


def test_analyze_returns_data(result):
    assert isinstance(result, forensics.Result)
    assert result.verdict == "leak" and result.verdict_reason
    assert any(f.kind == "leak" for f in result.findings)
    assert isinstance(result.samples, pl.DataFrame) and result.samples.height > 0
    assert {"time", "series", "bytes"} <= set(result.samples.columns)
    assert result.reaches("leak") and not result.reaches("never")


def test_writers_take_the_result(result, tmp_path):
    doc = json.loads(result.to_json())
    assert doc["verdict"] == result.verdict == result.summary()["verdict"]
    assert result.to_markdown().startswith("#")
    out = result.write_html(tmp_path / "r.html")
    assert out.read_text().lstrip().lower().startswith("<!doctype html")


def test_bad_input_is_a_usage_error(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing a parser reads\n")
    with pytest.raises(UsageError, match="nothing to analyze"):
        forensics.analyze([tmp_path])
    with pytest.raises(UsageError, match="--year"):
        forensics.analyze(SAMPLE, year=12)
