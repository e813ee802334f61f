"""evaluation.recordings reads recordings (README front matter, tests/corpus truth.json) and tells each
file's view by sniffing its format, not its name. A fake corpus in a temp folder, made of sample_logs
files under other names."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
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
    # a job's printed memory_stats() dicts (JAX's too) are its step log
    jax = ROOT / "tests" / "samples" / "pytorch-memory-stats" / "jax_memstats_pprint_01.txt"
    assert recordings.view_of(jax) == ("steplog", "pytorch-memory-stats")


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


def test_the_step_logs_are_the_files_the_jobs_commands_wrote_them_to():
    """truth.json's jobs name their stdout and command (tools/corpus/workloads.py): `--style none` prints no
    step log, `--style a+b` also writes b.log, `--monitor` prints NVML lines to stdout or `--monitor-file`."""
    cmd = "python3 tools/corpus/workloads.py linear_late --steps 90 {} > {} 2> stderr.log"
    jobs = [{"command": cmd.format("--style kv_gb+tutorial+jsonl", "train.log"), "stdout": "train.log"},
            {"command": cmd.format("--style none", "quiet.log"), "stdout": "quiet.log"},
            {"command": cmd.format("--style none --monitor 0.5", "mon.log"), "stdout": "mon.log"},
            {"command": cmd.format("--monitor 1 --monitor-file monitor.log", "job.log"), "stdout": "job.log"},
            {"command": cmd.format("--style none --monitor 0 --monitor-file unused.log", "off.log"), "stdout": "off.log"},
            {"pid": 7, "role": "residual worker", "stdout": None}]
    assert recordings.step_logs(jobs) == ["train.log", "tutorial.log", "jsonl.log", "mon.log", "job.log", "monitor.log"]


def _with_step_log(corpus, text: str) -> recordings.Recording:
    case = corpus / "case_a"
    truth = json.loads((case / "truth.json").read_text())
    truth["jobs"][0].update(stdout="stdout.txt", command="python3 tools/corpus/workloads.py linear_late --style "
                                                         "tfinfo > stdout.txt 2> stderr.log")
    (case / "truth.json").write_text(json.dumps(truth))
    (case / "stdout.txt").write_text(text)
    return next(r for r in recordings.read_recordings(corpus, "tune") if r.name == "case_a")


def test_a_step_log_no_step_log_reader_reads_is_a_miss_of_the_step_log_view(corpus):
    """The job's step log went to stdout.txt; when no reader claims it, or one of another format does, the
    step-log view is a miss ("not recognized", with the file and what read it), not a view the case lacks."""
    rec = _with_step_log(corpus, "".join(f"epoch {i} finished, saving the checkpoint\n" for i in range(40)))
    assert rec.step_logs == ["stdout.txt"]
    assert recordings.unread_step_logs(rec) == ["stdout.txt (no reader claims it)"]
    views = {r.view: r for r in scoring.run_recording(rec)}
    assert views["steplog"].got == recordings.NOT_RECOGNIZED and views["steplog"].ok is False
    assert views["steplog"].unread == ["stdout.txt (no reader claims it)"]
    assert views["smi_csv"].ok is True and views["all"].ok is True   # the other views run as before
    rec = _with_step_log(corpus, (SRC / "nvidia-smi.csv").read_text())
    assert recordings.unread_step_logs(rec) == ["stdout.txt (read as nvidia-smi-csv)"]


def test_a_read_step_log_and_a_readme_recording_keep_their_step_log_view(corpus):
    rec = _with_step_log(corpus, (SRC / "train.log").read_text())
    assert recordings.unread_step_logs(rec) == []
    assert {r.view: r for r in scoring.run_recording(rec)}["steplog"].ok is True
    readme = next(r for r in recordings.read_recordings(ROOT / "sample_logs", "sample_logs") if r.name == "leak_linear")
    assert readme.step_logs is None and recordings.unread_step_logs(readme) == []


def test_a_step_log_that_prints_no_reserved_memory_holds_no_cache_growth():
    """heldout12/tracemalloc_cache_growth_exit: TorchTracemalloc's summary prints allocated figures only, so the
    allocator's growth is not in it (`n/a`), while a style that prints reserved memory must show it."""
    cmd = "python3 tools/corpus/workloads.py cache_growth --steps 85 --style {} > train.log 2> stderr.log"
    assert recordings.prints_no_reserved([{"command": cmd.format("tracemalloc")}])
    assert not recordings.prints_no_reserved([{"command": cmd.format("tracemalloc+kv_gb")}])
    assert not recordings.prints_no_reserved([{"command": cmd.format("none")}, {"pid": 7}])
    rec = recordings.Recording("c", "t", Path("."), "cache_growth", ["cache_growth"], no_reserved=True)
    assert recordings.view_expectation(rec, "steplog")[0] is None
    assert recordings.view_expectation(replace(rec, no_reserved=False), "steplog") == ("cache_growth", "")
