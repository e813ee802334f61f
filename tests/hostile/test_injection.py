"""Log text that would drive the terminal (issue 45 D-I1 D-I3): console markup in log values and
paths is printed literally, terminal escapes reach stderr and sniff's stdout as \\xNN."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import hostile_cases
from conftest import ROOT


@pytest.fixture(scope="module")
def inject(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile")
    hostile_cases.inject(out)
    return out / "inject"


def _run(*args):
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("case", ["rich_markup_process", "rich_markup_prom", "rich_markup_folder/job[/]"])
def test_console_markup_in_log_values_is_printed_literally(inject, tmp_path, case):
    res = _run("report", str(inject / case), "-o", str(tmp_path / "c.html"))
    assert res.returncode == 0 and "Traceback" not in res.stderr and "verdict:" in res.stderr, res.stderr


def test_terminal_escapes_never_reach_the_terminal(inject, tmp_path):
    job = next((inject / "ansi_job").iterdir())
    res = _run("report", str(job), "-o", str(tmp_path / "c.html"))
    assert "Traceback" not in res.stderr and "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "\\x1b]0;pwned-title" in res.stderr
    res = _run("sniff", str(job))
    assert res.returncode == 0 and "\x1b" not in res.stdout and "\x07" not in res.stdout
