"""evaluation.recordings reads recordings (README front matter, tests/corpus truth.json) and tells each
file's view by sniffing its format, not its name. A fake corpus in a temp folder, made of sample_logs
files under other names."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evaluation import recordings, scoring

ROOT = Path(__file__).resolve().parent.parent

SRC = ROOT / "sample_logs" / "leak_linear"


@pytest.fixture
def corpus(tmp_path):
    if not SRC.is_dir():
        pytest.skip("sample_logs/leak_linear is not here")
    tune = tmp_path / "tune"
    case = tune / "case_a"
    case.mkdir(parents=True)
    for name, new in (("nvidia-smi.csv", "query_timed.txt"), ("nvidia-smi-l1.csv", "q.log"),
                      ("train.log", "stdout.txt"), ("dmon.txt", "mon.out"), ("compute-apps.csv", "apps.txt")):
        shutil.copy(SRC / name, case / new)
    (case / "truth.json").write_text(json.dumps({
        "case": "case_a", "half": "tune", "expected_verdict": "leak", "expected_findings": ["leak"],
        "pattern": "linear", "leak_onset_time": "2026-11-30T04:30:18.022Z", "leak_onset_step": 22,
        "rate_bytes_per_step": 104857600, "rate_bytes_per_second": None, "stairs": None,
        "stair_period_steps": None, "gpu": 0, "tz": "Etc/UTC", "files": {}, "notes": "",
        "jobs": [{"pid": 943, "start": "2026-11-30T04:30:05Z", "end": "2026-11-30T04:30:40Z",
                  "ending": "exit", "leaks": True}]}))
    other = tune / "residual"
    other.mkdir()
    (other / "truth.json").write_text(json.dumps({"case": "residual", "expected_verdict": "leak",
                                                  "expected_findings": ["residual_process"], "jobs": []}))
    (tune / "not_a_case").mkdir()
    return tune


def test_truth_json_is_read(corpus):
    recs = {r.name: r for r in recordings.read_recordings(corpus, "tune")}
    assert set(recs) == {"case_a", "residual"}
    a = recs["case_a"]
    assert a.expected == "leak" and a.findings == ["leak"] and a.tz == "Etc/UTC"
    assert a.onset.isoformat() == "2026-11-30T04:30:18.022000+00:00"
    assert len(a.jobs) == 1 and (a.jobs[0][1] - a.jobs[0][0]).total_seconds() == 35


def test_views_by_format_not_name(corpus):
    files = recordings.view_files(corpus / "case_a")
    names = {v: sorted(Path(p).name for p in ps) for v, ps in files.items() if v != "all"}
    assert names == {"smi_csv": ["query_timed.txt"], "smi_l1": ["q.log"], "steplog": ["stdout.txt"],
                     "dmon": ["mon.out"], "apps": ["apps.txt"]}


def test_view_expectations():
    rec = recordings.Recording("r", "tune", Path("."), "leak", ["residual_process"])
    assert recordings.view_expectation(rec, "apps") == ("leak", "")
    assert recordings.view_expectation(rec, "smi_csv")[0] is None
    host = recordings.Recording("h", "tune", Path("."), "no_leak", ["oom_kill"])
    assert recordings.view_expectation(host, "steplog")[0] is None
    assert recordings.view_expectation(host, "dmon") == ("no_leak", "")
    san = recordings.Recording("s", "tune", Path("."), "leak", ["sanitizer_leak"])
    assert recordings.view_expectation(san, "steplog")[0] is None
    assert recordings.view_expectation(san, "all") == ("leak", "")
    cache = recordings.Recording("c", "tune", Path("."), "cache_growth", ["cache_growth"])
    assert recordings.view_expectation(cache, "steplog") == ("cache_growth", "")
    assert recordings.view_expectation(cache, "smi_csv")[0] is None


def test_onset_target():
    assert scoring.onset_target(100) == 5.0
    assert scoring.onset_target(3600) == pytest.approx(72.0)
