"""HF Trainer memory metrics blocks (forensics/parsers/hf_trainer.py)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
from conftest import parse_file, realworld

from forensics.parsers.steplog import hf_trainer

MiB = 1 << 20
NAME = "hf-trainer-memory"


def value(parsed, key: str) -> list[int]:
    return parsed.samples.filter(pl.col("series") == f"hf.{key}").sort("seq")["bytes"].to_list()


def test_hf_01_before_and_after_the_pr():
    _, p = parse_file(realworld("stepmem_hf_01.txt"), expect=NAME)
    assert value(p, "train_mem_gpu_alloc_delta") == [-153 * MiB]
    assert value(p, "train_mem_gpu_peaked_delta") == [2012 * MiB]
    assert value(p, "before_init_mem_cpu") == [1945 * MiB]
    assert value(p, "before_init_mem_gpu") == [0]
    assert p.samples["label"].to_list() == [None, None, "train metrics", "train metrics"]
    assert p.samples["line"].to_list() == [2, 3, 6, 7]
    # one marker per block: the banner-less excerpt, then the "train metrics" block
    assert p.events["kind"].to_list() == ["marker", "marker"]
    assert p.events["line"].to_list() == [2, 5]
    first, second = (json.loads(d) for d in p.events["detail"])
    assert first == {"what": "metrics", "metrics": {"train_mem_gpu_alloc_delta": "-153MB",
                                                    "train_mem_gpu_peaked_delta": "2012MB"}}
    assert second["what"] == "train metrics"
    assert second["metrics"] == {"before_init_mem_cpu": "1945MB", "before_init_mem_gpu": "0MB"}
    assert any("not a time series" in n for n in p.notes)


def test_block_behind_logging_prefix_with_other_metrics(tmp_path):
    path = tmp_path / "hf.log"
    path.write_text("\n".join([
        "11/30/2026 03:04:05 - INFO - transformers.trainer - ***** Running training *****",
        "11/30/2026 03:04:05 - INFO - transformers.trainer -   Num examples = 1000",
        "{'loss': 0.6188, 'learning_rate': 2.9e-05, 'epoch': 0.09, 'memory_allocated (GB)': 3.82}",
        "11/30/2026 03:10:00 - INFO - __main__ - ***** train metrics *****",
        "11/30/2026 03:10:00 - INFO - __main__ -   epoch                      =        3.0",
        "11/30/2026 03:10:00 - INFO - __main__ -   init_mem_gpu_alloc_delta   =      512MB",
        "11/30/2026 03:10:00 - INFO - __main__ -   train_mem_gpu_peaked_delta =     2012MB",
        "11/30/2026 03:10:00 - INFO - __main__ -   train_runtime              = 0:05:55.12",
        "some other output",
        "  x = 5",
    ]) + "\n")
    _, p = parse_file(path, expect=NAME)
    assert value(p, "init_mem_gpu_alloc_delta") == [512 * MiB]
    assert value(p, "train_mem_gpu_peaked_delta") == [2012 * MiB]
    # the on_log dict is a time series, read by the shared step-marker extraction
    assert p.samples.filter(pl.col("series") == "allocated")["bytes"].to_list() == [round(3.82 * (1 << 30))]
    markers = p.events.filter(pl.col("kind") == "marker")
    assert markers["line"].to_list() == [4]
    detail = json.loads(markers["detail"][0])
    assert detail["what"] == "train metrics"
    assert detail["metrics"]["epoch"] == "3.0" and detail["metrics"]["train_runtime"] == "0:05:55.12"
    assert "x" not in detail["metrics"]
    assert markers["time"][0] == datetime(2026, 11, 30, 3, 10, tzinfo=timezone.utc)


def test_sniff():
    assert hf_trainer.sniff(["# source: x", "***** eval metrics *****"])
    assert hf_trainer.sniff(["  train_mem_gpu_alloc_delta  =     -153MB"])
    assert hf_trainer.sniff(["***** Running training *****"])
    assert hf_trainer.sniff(['# note: "key = value" lines', "total = 5"]) is None


def test_a_negative_figure_that_is_not_a_delta_is_counted_not_read(tmp_path):
    # only *_delta figures can be negative; -1MB of CPU memory before init is garbage (found by bench/fuzz.py)
    path = tmp_path / "hf.log"
    path.write_text("***** train metrics *****\n"
                    "  before_init_mem_cpu        =     -1MB\n"
                    "  before_init_mem_gpu        =        0MB\n"
                    "  train_mem_gpu_alloc_delta  =     -153MB\n")
    _, p = parse_file(path, expect=NAME)
    assert value(p, "before_init_mem_cpu") == []
    assert value(p, "before_init_mem_gpu") == [0]
    assert value(p, "train_mem_gpu_alloc_delta") == [-153 * MiB]
    assert p.skipped.counts == {"negative memory value": 1} and p.skipped.examples["negative memory value"] == [2]
