"""Wrong or inapplicable usage is refused or warned about in one line; warnings are one per cause."""
import subprocess
import sys
from pathlib import Path

from forensics.cli import grouped_problems

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_sniff_of_a_missing_path_exits_2(tmp_path):
    r = _cli("sniff", str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stdout == ""
    assert "no such file or folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_sniff_of_an_empty_folder_says_so(tmp_path):
    r = _cli("sniff", str(tmp_path))
    assert r.returncode == 2 and "no files in it" in r.stderr


def test_scan_of_a_folder_without_jobs_exits_2(tmp_path):
    (tmp_path / "a").mkdir()
    r = _cli("scan", str(tmp_path), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "no job folder found" in r.stderr


def test_unused_options_are_warned_about(tmp_path):
    r = _cli("report", str(SAMPLES / "leak_linear"), "-o", "", "--tz", "UTC", "--year", "2020",
             "--boot-time", "2026-01-01T00:00:00Z", "--columns", "timestamp,index,memory.used,memory.total")
    assert r.returncode == 0, r.stderr
    for flag in ("--year", "--boot-time", "--columns"):
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"warning: {flag}: not used")]
        assert len(lines) == 1, r.stderr


def test_scan_warns_about_options_no_job_used(tmp_path):
    # neither job has a clock without a year; --boot-time not given is not warned about
    import shutil

    arch = tmp_path / "arch"
    for name in ("leak_linear", "healthy_warmup"):
        shutil.copytree(SAMPLES / name, arch / name)   # (links out of the archive are not followed)
    r = _cli("scan", str(arch), "-o", str(tmp_path / "out"), "--tz", "UTC", "--year", "2020", "--reports", "none",
             "-j", "1")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: --year: not used by any job")]
    assert len(lines) == 1, r.stderr
    assert "--boot-time" not in r.stderr


def test_scan_reports_takes_the_fail_on_words_only():
    r = _cli("scan", "--help")
    assert "info" not in r.stdout.split("--reports", 1)[1].split("--tz", 1)[0]
    r = _cli("scan", "x", "--reports", "info")
    assert r.returncode == 2 and "info" in r.stderr


def test_report_of_a_folder_of_jobs_suggests_scan(tmp_path):
    for name in ("leak_linear", "healthy_warmup"):
        (tmp_path / name).symlink_to(SAMPLES / name)
    r = _cli("report", str(tmp_path), "-o", "", "--tz", "UTC")
    assert f"{tmp_path}: holds 2 job folders" in r.stderr and "gpu-forensics scan" in r.stderr


def test_warnings_are_one_line_per_cause_with_no_invented_url():
    msgs = [f"j{i}/stderr.log: empty file, it holds no text, check that the job really wrote this log" for i in range(7)]
    msgs.append("k/kern.log:12: 2 lines skipped, bad stamp")
    out = grouped_problems(msgs, [f"j{i}/stderr.log" for i in range(7)] + ["k/kern.log"])
    assert out[0].startswith("7 files: empty file, it holds no text") and "(4 more)" in out[0]
    assert out[1] == "k/kern.log:12: 2 lines skipped, bad stamp"
    r = _cli("report", str(SAMPLES / "environment"), str(SAMPLES / "leak_linear"), "-o", "", "--tz", "UTC")
    assert "github.com" not in r.stderr and "Adding a log format" in r.stderr
    assert sum(": not recognized," in ln for ln in r.stderr.splitlines()) == 1, r.stderr
