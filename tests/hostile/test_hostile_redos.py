"""Patterns that backtracked without bound on one long line (issue 45 D-R1..D-R6), each run on the
line that made it hang. The lines are sized so that the old patterns take minutes and the new ones
milliseconds: the alarm is a hang guard, not a speed measurement."""
from __future__ import annotations

import signal

import pytest

from conftest import parse_file

from forensics.parsers.metrics import exporters, mlflow
from forensics.parsers.nvsmi import common as nvsmi
from forensics.parsers.sanitizer import text as sanitizer
from forensics.parsers.torch import distributed

N = 200_000


@pytest.fixture(autouse=True)
def hang_guard():
    def hung(*_):
        raise TimeoutError("a pattern backtracked past the hang guard")
    prev = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, prev)


def test_query_gpu_prompt_with_blanks():                     # D-R1
    assert nvsmi.query_list("$ nvidia-smi --query-gpu= " + " " * N + "!", "gpu") is None
    assert nvsmi.query_list("$ nvidia-smi --query-compute-apps= " + " " * N + "!", "apps") is None
    assert nvsmi.query_list("nvidia-smi --query-gpu=timestamp, memory.used --format=csv -l 1", "gpu") == [
        "timestamp", "memory.used"]


def test_nccl_error_then_blanks():                           # D-R4
    m = distributed._NCCL_ERROR.search("NCCL error: " + " " * 1000 + "x")
    assert m and m["reason"].strip() == "x"
    distributed._NCCL_ERROR.search("NCCL error: " + " " * N + "x")   # (a hang before)
    m = distributed._NCCL_ERROR.search("NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled cuda error, NCCL version 2.14.3")
    assert m and m["reason"] == "unhandled cuda error"


def test_json_looking_first_line():                          # D-R2
    assert mlflow.sniff(["{" + '"key": "' * (N // 8)]) is None


def test_grafana_label_cell_of_letters():                    # D-R3
    assert exporters._LABEL_PAIR.findall("a" * N) == []
    assert exporters._LABEL_PAIR.findall('DCGM_FI_DEV_FB_USED{gpu="0", Hostname="h1"}') == [("gpu", "0"), ("Hostname", "h1")]


def test_headerless_csv_path_cell():                         # D-R5
    assert nvsmi.cell_kind("a/" * (N // 4) + " x") == "text"
    assert nvsmi.cell_kind("/usr/bin/python3") == "path" and nvsmi.cell_kind("bin/python") == "path"


def test_legacy_sanitizer_frame(tmp_path):                   # D-R6
    p = tmp_path / "sanitizer.log"
    p.write_text("========= COMPUTE-SANITIZER\n========= Leaked 1024 bytes at 0x7f0000000000\n"
                 "=========     Saved host backtrace up to driver entry point at cudaMalloc\n"
                 "=========     Host Frame:m" + " (" * (N // 4) + ") [0x1234]\n=========\n"
                 "========= LEAK SUMMARY: 1024 bytes leaked in 1 allocations\n========= ERROR SUMMARY: 1 error\n")
    module, parsed = parse_file(p)
    assert module is sanitizer.FORMAT
