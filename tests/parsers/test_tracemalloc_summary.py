"""The PEFT/Accelerate examples' TorchTracemalloc summary (documented.py): bare MB that only the example's
source gives a unit (b2mb), keys that are sentences, a train and an eval block an epoch (held-out set 12 of the
recordings read none of them)."""
from __future__ import annotations

from pathlib import Path

from general_summary import summarize
from test_general_reader import _parse_claimed

from forensics.parsers.steplog.general import phase_of, plan_line

SAMPLES = Path(__file__).parent.parent / "samples" / "step-markers"
MiB = 2**20


def test_the_summary_reads_allocated_at_each_block_s_start_and_its_peak_per_phase():
    got = summarize(_parse_claimed(SAMPLES / "peft_tracemalloc_readme.txt"))
    assert {k: v["first"] for k, v in got.items()} == {
        "allocated@before entering train": 1916 * MiB, "max_allocated@during train": 9404 * MiB,
        "allocated@before entering eval": 1982 * MiB, "max_allocated@during eval": 2654 * MiB}


def test_differences_and_host_memory_are_no_reading():
    for line in ("GPU Memory consumed at the end of the train (end-begin): 66",
                 "GPU Peak Memory consumed during the train (max-begin): 7488",
                 "CPU Memory before entering the train : 19411",
                 "CPU Total Peak Memory consumed during the train (max): 19411"):
        assert plan_line(line).readings == [], line


def test_accelerate_names_the_device_type():
    (r,) = plan_line("XPU Memory before entering the train : 1024").readings
    assert (r.series, r.factor) == ("allocated", MiB)
    assert plan_line("GPU Memory before entering the train : 1024 MB").readings[0].unit == "MB"


def test_a_phase_skips_its_article():
    """`before entering the train` and `... the eval` are two phases, not one `before entering the`."""
    assert phase_of("GPU Memory before entering the train : 1") == "before entering train"
    assert phase_of("GPU Memory before entering the eval : 1") == "before entering eval"
    assert phase_of("[after the optimizer step] allocated 1 GB") == "after optimizer step"
