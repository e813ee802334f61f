"""Outputs that clash (issue 45 D-O1 D-O2): an output naming an input, two outputs naming one file
(after links are followed) are refused with one line, exit 2, before anything is written."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hostile_cases import leak_csv
from conftest import ROOT


def _run(cwd, *args):
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("args,words", [
    (["report", "in.csv", "-o", "in.csv", "-q"], "-o in.csv: names the input in.csv"),
    (["report", "in.csv", "-o", "", "--json", "in.csv", "-q"], "--json in.csv: names the input in.csv"),
    (["report", ".", "-o", "", "--md", "./in.csv", "-q"], "--md ./in.csv: names the input ./in.csv"),
    (["timeline", "in.csv", "in.samples.csv", "-o", "in.csv"], "-o in.samples.csv: names the input in.samples.csv"),
    (["report", "in.csv", "-o", "same.out", "--json", "same.out", "-q"], "-o same.out and --json same.out: both name"),
    (["report", "in.csv", "-o", "real.html", "--json", "alias.html", "-q"], "-o real.html and --json alias.html"),
])
def test_clashing_outputs_are_refused_and_nothing_is_replaced(tmp_path, args, words):
    log = leak_csv(120)
    (tmp_path / "in.csv").write_text(log)
    (tmp_path / "in.samples.csv").write_text(log)
    os.symlink("real.html", tmp_path / "alias.html")
    res = _run(tmp_path, *args)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and words in res.stderr, res.stderr
    assert (tmp_path / "in.csv").read_text() == log and (tmp_path / "in.samples.csv").read_text() == log
    assert not (tmp_path / "real.html").exists() and not (tmp_path / "same.out").exists()


@pytest.mark.parametrize("args", [["report", "in.csv", "-o", "-"], ["report", "in.csv", "-o", "", "--json", "-"],
                                  ["sniff", "in.csv"]])
def test_a_closed_stdout_is_one_line_exit_2(tmp_path, args):
    """D-O3: a traceback (report), or the listing lost silently (sniff)."""
    (tmp_path / "in.csv").write_text(leak_csv(120))
    res = subprocess.run([sys.executable, "-m", "forensics", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         preexec_fn=lambda: os.close(1))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "stdout is closed" in res.stderr, res.stderr
