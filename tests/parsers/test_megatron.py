"""Megatron-LM report_memory, datetime and iteration lines (forensics/parsers/megatron.py)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
from conftest import parse_file, realworld

from forensics.options import Options
from forensics.parsers.steplog import megatron

MiB = 1 << 20
NAME = "megatron-memory"


def mib(x: float) -> int:
    return round(x * MiB)


def test_megatron_01_glued_ranks():
    _, p = parse_file(realworld("stepmem_megatron_01.txt"), expect=NAME)
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("seq")
    # rank 4 and rank 0 share line 9 (no newline between them), rank 2 is on line 11; a rank is no GPU
    # index (the logs do not say which GPU each rank used): each rank is a series of its own
    assert alloc["label"].to_list() == ["rank 4", "rank 0", "rank 2"]
    assert alloc["gpu"].is_null().all()
    assert alloc["line"].to_list() == [9, 9, 11]
    assert alloc["bytes"].to_list() == [mib(18598.7529296875), mib(20034.7529296875), mib(18598.7529296875)]
    assert alloc["step"].to_list() == [1, 1, 1]
    assert alloc["seq"].n_unique() == 3

    def by_rank(series: str) -> dict[str, int]:
        s = p.samples.filter(pl.col("series") == series)
        return dict(zip(s["label"], s["bytes"]))

    assert by_rank("max_allocated") == {"rank 4": mib(20931.01220703125), "rank 0": mib(30227.64599609375),
                                        "rank 2": mib(25079.2666015625)}
    assert by_rank("reserved") == {"rank 4": mib(21534.0), "rank 0": mib(31086.0), "rank 2": mib(25890.0)}
    assert by_rank("max_reserved") == by_rank("reserved")
    assert p.samples.height == 12
    # "Theoretical memory footprints: weight and optimizer=20029.52 MB" is an estimate, not a reading
    assert 8 not in p.samples["line"].to_list()
    ev = p.events
    assert ev["kind"].to_list() == ["marker"]
    assert json.loads(ev["detail"][0]) == {"what": "before the start of training step"}
    assert ev["time"][0] == datetime(2025, 8, 1, 9, 31, 11, tzinfo=timezone.utc)
    assert ev["line"][0] == 2


def test_datetime_marker_is_local_time():
    _, p = parse_file(realworld("stepmem_megatron_01.txt"), Options(tz="Asia/Shanghai"), expect=NAME)
    assert p.events["time"][0] == datetime(2025, 8, 1, 1, 31, 11, tzinfo=timezone.utc)
    assert p.clock == "wall-assumed"


def test_iteration_lines_are_step_markers_and_time_the_memory_report(tmp_path):
    path = tmp_path / "megatron.log"
    path.write_text("\n".join([
        "------------------------ arguments ------------------------",
        "  accumulate_allreduce_grads_in_fp32 .............. False",
        "-------------------- end of arguments ---------------------",
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 100.5 | max allocated: 200.0 | "
        "reserved: 300.0 | max reserved: 300.0",
        " [2025-08-01 07:19:37] iteration       10/    5000 | consumed samples:          128 | "
        "elapsed time per iteration (ms): 19138.8 | lm loss: 1.043863E+01 |",
        " [2025-08-01 07:19:50] iteration       20/    5000 | consumed samples:          256 | "
        "elapsed time per iteration (ms): 12936.1 | lm loss: 1.044022E+01 |",
        "[after training is done] datetime: 2025-08-01 07:30:00 ",
    ]) + "\n")
    _, p = parse_file(path, expect=NAME)
    alloc = p.samples.filter(pl.col("series") == "allocated")
    assert alloc["bytes"].to_list() == [mib(100.5)]
    assert alloc["time"].to_list() == [datetime(2025, 8, 1, 7, 19, 37, tzinfo=timezone.utc)]
    its = p.events.filter(pl.col("detail").str.contains('"iteration"'))
    details = [json.loads(d) for d in its["detail"]]
    assert [d["step"] for d in details] == [10, 20]
    assert [d["step_ms"] for d in details] == [19138.8, 12936.1]
    assert details[0]["of"] == 5000
    assert its["time"].to_list() == [datetime(2025, 8, 1, 7, 19, 37, tzinfo=timezone.utc),
                                     datetime(2025, 8, 1, 7, 19, 50, tzinfo=timezone.utc)]
    assert p.events["line"].to_list() == [5, 6, 7]
    assert p.clock == "wall-assumed"


def test_sniff_on_megatron_startup_lines():
    assert megatron.sniff(["# source: x", "using world size: 8, data-parallel size: 2, context-parallel size: 1"])
    assert megatron.sniff(["------------------------ arguments ------------------------"])
    assert megatron.sniff(["[Rank 0] (after 20 iterations) memory (MB) | allocated: 1.0 | reserved: 2.0"])
    # the same key/value layout without Megatron's rank prefix is a generic step log
    assert megatron.sniff(["Mem memory (MB) | allocated: 20.4 | max allocated: 21.8 | reserved: 26.0"]) is None
    assert megatron.sniff(["iteration 5 of my own loop"]) is None
