"""A step log of a distributed job: each rank's readings a series of their own, whatever says the rank
(torchrun's prefix, PyTorch's, a rank word in the message), and the clock behind the prefix read."""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from conftest import SAMPLE_LOGS, parse_file

from forensics.options import Options

MiB = 1 << 20


def parse_text(tmp_path, text: str, opts: Options | None = None, expect: str = "step-markers"):
    path = tmp_path / "train.log"
    path.write_text(text)
    return parse_file(path, opts or Options(tz="UTC"), expect=expect)[1]


def test_interleaved_ranks_are_split_and_keep_their_clock(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "[default0]:2026-12-02 15:09:22,103 INFO train: [rank 0] [step 1] allocated: 217.07 MB, cached: 274.00 MB",
        "[default1]:2026-12-02 15:09:22,102 INFO train: [rank 1] [step 1] allocated: 217.07 MB, cached: 274.00 MB",
        "[default1]:2026-12-02 15:09:22,311 INFO train: [rank 1] [step 2] allocated: 225.07 MB, cached: 290.00 MB",
        "[default0]:2026-12-02 15:09:22,311 INFO train: [rank 0] [step 2] allocated: 217.07 MB, cached: 290.00 MB",
    ]) + "\n")
    a = p.samples.filter(pl.col("series") == "allocated").sort("line")
    assert a["label"].to_list() == ["rank 0", "rank 1", "rank 1", "rank 0"]
    assert a["step"].to_list() == [1, 1, 2, 2]
    assert a["time"][1] == datetime(2026, 12, 2, 15, 9, 22, 102000, tzinfo=timezone.utc)
    assert a["gpu"].is_null().all() and a["pid"].is_null().all()   # the ranks' own lines would say (forensics/ranks.py)
    assert p.clock == "wall-assumed"


def test_the_launchers_prefix_alone_gives_the_local_rank(tmp_path):
    p = parse_text(tmp_path, "[default3]:[step 5] allocated: 10 MB\n[default2]:[step 5] allocated: 20 MB\n")
    assert p.samples.sort("line")["label"].to_list() == ["local rank 3", "local rank 2"]


def test_pytorchs_prefix_gives_the_global_rank_and_a_tag_stays(tmp_path):
    p = parse_text(tmp_path, "[default1]:[rank9]: [after forward] allocated: 10 MB\n"
                             "[default1]:[rank9]: [step 4] allocated: 11 MB\n")
    # a tag that is no step number stays after the rank; one that only numbers the step does not
    assert p.samples.sort("line")["label"].to_list() == ["rank 9 after forward", "rank 9"]


def test_rank_words_in_the_message(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "rank=2 step 5 allocated: 1 GB",
        "Rank 3 | step 5 | allocated: 2 GB",
        "[Rank 0] (after 5 iterations) memory (MB) | allocated: 100.5 | reserved: 200.0",
        "local_rank 1 step 5 allocated: 3 GB",
    ]) + "\n", expect="megatron-memory")   # (its report_memory line claims the file; the same reader reads it)
    got = dict(zip(p.samples.filter(pl.col("series") == "allocated").sort("line")["label"],
                   p.samples.filter(pl.col("series") == "allocated").sort("line")["line"]))
    assert got == {"rank 2": 1, "rank 3": 2, "rank 0": 3, "local rank 1": 4}


def test_a_marker_line_behind_a_prefix_still_gives_the_step(tmp_path):
    p = parse_text(tmp_path, "[default0]:Iter 7 Time 0.5\n[default0]:allocated: 2 MB\n")
    assert p.samples["step"].to_list() == [7]


def test_recorded_two_rank_log():
    _, p = parse_file(SAMPLE_LOGS / "ddp_gloo_rank1_leak" / "train.log", Options(tz="Etc/UTC"), expect="step-markers")
    counts = p.samples.group_by("series", "label").len().sort("series", "label").rows()
    assert counts == [("allocated", "rank 0", 124), ("allocated", "rank 1", 124),
                      ("reserved", "rank 0", 124), ("reserved", "rank 1", 124)]
    a = p.samples.filter((pl.col("series") == "allocated")).sort("step")
    r0, r1 = (a.filter(pl.col("label") == f"rank {r}")["bytes"] for r in (0, 1))
    assert r0.min() == r0.max() == round(217.07 * MiB)                    # rank 0 stays flat
    assert r1[-1] - r1[9] == round((1129.07 - 217.07) * MiB)              # rank 1 keeps 8 MiB a step from step 11
    assert p.samples["time"].null_count() == 0
