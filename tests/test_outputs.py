"""Outputs are written atomically only where that is right: a regular file (or a new name) is replaced
by rename, a link is followed, a FIFO or device is written through, a folder or a missing folder is a
one-line error, for every command alike (#29)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from forensics.report import write as outputs
from forensics.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "sample_logs" / "leak_linear"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def one_line_error(res: subprocess.CompletedProcess, *words: str) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ---- the module ----------------------------------------------------------------------------------

def test_a_regular_file_is_replaced_whole_keeping_its_mode(tmp_path):
    f = tmp_path / "r.html"
    f.write_text("old")
    f.chmod(0o640)
    outputs.write_text(outputs.target(str(f), "-o"), "new ✓")
    assert f.read_text(encoding="utf-8") == "new ✓"
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]   # no temp file left


def test_a_new_file_gets_the_umask_mode_and_a_bare_name_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outputs.write_text(outputs.target("x.md", "--md"), "")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "x.md").read_text() == ""
    assert stat.S_IMODE((tmp_path / "x.md").stat().st_mode) == 0o666 & ~umask


def test_a_failure_while_writing_keeps_the_old_file(tmp_path):
    f = tmp_path / "r.html"
    f.write_text("old")

    def broken(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(UsageError, match="No space left on device"):
        outputs.write(outputs.target(str(f), "-o"), broken)
    assert f.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    real = tmp_path / "real.html"
    real.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to("real.html")
    outputs.write_text(outputs.target(str(link), "-o"), "new")
    assert link.is_symlink() and os.readlink(link) == "real.html"
    assert real.read_text() == "new"


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.html"
    link.symlink_to("sub/made.html")
    (tmp_path / "sub").mkdir()
    outputs.write_text(outputs.target(str(link), "-o"), "new")
    assert link.is_symlink() and (tmp_path / "sub" / "made.html").read_text() == "new"


def test_a_dangling_symlink_into_a_missing_folder_is_an_error(tmp_path):
    link = tmp_path / "link.html"
    link.symlink_to("nowhere/made.html")
    with pytest.raises(UsageError, match="does not exist"):
        outputs.target(str(link), "-o")


def test_a_fifo_is_written_through_to_its_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    outputs.write_text(outputs.target(str(fifo), "--md"), "through the pipe\n")
    reader.join(10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)   # still a FIFO, not a file put in its place


def test_dev_null_stays_a_device():
    t = outputs.target("/dev/null", "-o")
    assert t.direct
    outputs.write_text(t, "gone")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_folder_given_as_a_file_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="is a folder"):
        outputs.target(str(tmp_path), "-o")


def test_a_missing_folder_is_an_error_and_is_not_created(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        outputs.target(str(tmp_path / "no" / "r.html"), "-o")
    assert not (tmp_path / "no").exists()


# ---- every command alike -------------------------------------------------------------------------

def test_report_through_a_link_a_fifo_and_dev_null(tmp_path):
    (tmp_path / "real.html").write_text("old")
    (tmp_path / "link.html").symlink_to("real.html")
    os.mkfifo(tmp_path / "md.pipe")
    got = []
    reader = threading.Thread(target=lambda: got.append((tmp_path / "md.pipe").read_text()))
    reader.start()
    res = cli("report", str(JOB), "-o", "link.html", "--md", "md.pipe", "--json", "/dev/null", "-q", cwd=tmp_path)
    reader.join(60)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""   # -q: nothing but errors
    assert (tmp_path / "link.html").is_symlink()
    assert (tmp_path / "real.html").read_text().startswith("<!DOCTYPE html>")
    assert got and got[0].startswith("## ")
    assert stat.S_ISFIFO(os.stat(tmp_path / "md.pipe").st_mode)


def test_dev_full_is_a_one_line_error(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    one_line_error(cli("report", str(JOB), "-o", "/dev/full", cwd=tmp_path), "-o /dev/full", "No space left")


@pytest.mark.parametrize("args", [
    ("report", str(JOB), "-o", "{missing}/r.html"),
    ("report", str(JOB), "-o", "", "--json", "{missing}/s.json"),
    ("report", str(JOB), "-o", "", "--md", "{missing}/s.md"),
    ("timeline", str(JOB), "-o", "{missing}/x.parquet"),
    ("timeline", str(JOB), "-o", "{missing}/x.csv"),
    ("scan", str(JOB.parent), "-o", "{missing}/out"),
], ids=["report-o", "report-json", "report-md", "timeline-parquet", "timeline-csv", "scan"])
def test_a_missing_parent_folder_is_one_line_for_every_command(tmp_path, args):
    missing = tmp_path / "no" / "such"
    res = cli(*[a.format(missing=missing) for a in args], cwd=tmp_path)
    one_line_error(res, "does not exist")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("args", [
    ("report", str(JOB), "-o", "{folder}"),
    ("timeline", str(JOB), "-o", "{folder}.parquet"),
], ids=["report", "timeline"])
def test_a_folder_as_the_output_file_is_one_line(tmp_path, args):
    (tmp_path / "f").mkdir()
    (tmp_path / "f.parquet").mkdir()
    one_line_error(cli(*[a.format(folder=tmp_path / "f") for a in args], cwd=tmp_path), "is a folder")


def test_scan_output_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "out").write_text("not a folder")
    one_line_error(cli("scan", str(JOB.parent), "-o", "out", cwd=tmp_path), "-o out", "not a folder")
    assert (tmp_path / "out").read_text() == "not a folder"


def test_timeline_through_a_link(tmp_path):
    (tmp_path / "t.parquet").write_text("old")
    (tmp_path / "link.parquet").symlink_to("t.parquet")
    res = cli("timeline", str(JOB), "-o", "link.parquet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "link.parquet").is_symlink()
    assert (tmp_path / "t.parquet").read_bytes()[:4] == b"PAR1"


def test_two_documents_cannot_share_stdout(tmp_path):
    one_line_error(cli("report", str(JOB), "-o", "", "--json", "-", "--md", "-", cwd=tmp_path),
                   "--json - and --md -", "only one")
    assert list(tmp_path.iterdir()) == []
