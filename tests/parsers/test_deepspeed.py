"""DeepSpeed see_memory_usage lines (forensics/parsers/deepspeed.py)."""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from conftest import parse_file, realworld

from forensics.options import Options
from forensics.parsers.steplog import deepspeed

GiB, MiB = 1 << 30, 1 << 20
NAME = "deepspeed-memory"


def gib(x: float) -> int:
    return round(x * GiB)


def series(parsed, name: str) -> pl.DataFrame:
    return parsed.samples.filter(pl.col("series") == name).sort("seq")


def parse_text(tmp_path, text: str, opts: Options | None = None):
    p = tmp_path / "ds.log"
    p.write_text(text)
    return parse_file(p, opts, expect=NAME)[1]


def test_deepspeed_01_old_three_line_form():
    _, p = parse_file(realworld("deepspeed_mem_01.txt"), expect=NAME)
    ma = series(p, "allocated")
    assert ma["bytes"].to_list() == [gib(4.96), gib(4.89), gib(4.89), gib(5.19)]
    assert series(p, "max_allocated")["bytes"].to_list() == [gib(5.09), gib(5.55), gib(4.89), gib(5.31)]
    assert series(p, "reserved")["bytes"].to_list() == [gib(6.39), gib(6.39), gib(6.68), gib(6.68)]
    # Max_CA is rounded to whole GiB by DeepSpeed
    assert series(p, "max_reserved")["bytes"].to_list() == [6 * GiB, 6 * GiB, 7 * GiB, 7 * GiB]
    assert ma["gpu"].unique().to_list() == ["0"]
    # the excerpt starts at an MA line: its message is not in the file
    assert ma["label"].to_list() == [None, "before optimizer 1", "before forward 1", "before backward 1"]
    assert ma["time"][0] == datetime(2022, 2, 21, 23, 35, 27, 338000, tzinfo=timezone.utc)
    host = series(p, "host.used")
    assert host["bytes"].to_list() == [gib(50.5), gib(50.5), gib(50.45), gib(50.45)]
    assert host["gpu"].is_null().all()
    assert host["label"].to_list() == [None, "before optimizer 1", "before forward 1", "before backward 1"]
    assert p.clock == "wall-assumed"
    assert p.events.height == 0
    assert any("GiB" in n for n in p.notes)


def test_deepspeed_02_labels_and_interleaved_line():
    _, p = parse_file(realworld("deepspeed_mem_02.txt"), expect=NAME)
    ma = series(p, "allocated")
    assert ma["label"].to_list() == ["DeepSpeedZeRoOffload initialize [begin]",
                                     "DeepSpeedZeRoOffload initialize [end]", "Before creating fp16 partitions"]
    assert ma["bytes"].to_list() == [gib(26.38), gib(0.58), gib(0.58)]
    assert series(p, "max_allocated")["bytes"].to_list() == [gib(26.38), gib(26.38), gib(0.58)]
    assert series(p, "max_reserved")["bytes"].to_list() == [27 * GiB] * 3
    assert series(p, "host.used")["bytes"][0] == gib(322.57)
    # "Parameter Offload: ..." is neither a reading nor a label
    assert 5 not in p.samples["line"].to_list()
    assert p.samples["line"].unique().sort().to_list() == [3, 4, 7, 8, 10, 11]


def test_deepspeed_04_trailing_space_in_message_and_zone(tmp_path):
    _, p = parse_file(realworld("deepspeed_mem_04.txt"), Options(tz="America/Chicago"), expect=NAME)
    ma = series(p, "allocated")
    assert ma["label"].to_list() == ["before get_layer_state_dict", "after get_layer_state_dict"]
    assert ma["bytes"].to_list() == [gib(0.14), gib(0.14)]
    assert series(p, "max_reserved")["bytes"].to_list() == [GiB, GiB]
    # 2021-03-24 15:15:37.641 in Chicago (CDT, UTC-5)
    assert ma["time"][0] == datetime(2021, 3, 24, 20, 15, 37, 641000, tzinfo=timezone.utc)


def test_fork_form_with_rank_nv_and_cpu_on_one_line(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "[3] mp: after forward",
        "[3] mp: MA 1.50 GB | Max_MA 2.00 GB | CA 3.00 GB | Max_CA 4.00 GB | NV 5.25 GB | "
        "CPU Virtual Memory:  used = 10.5 GB, percent = 12.5%",
    ]) + "\n")
    assert series(p, "allocated")["bytes"].to_list() == [gib(1.5)]
    assert series(p, "max_reserved")["bytes"].to_list() == [gib(4)]
    nv = series(p, "memory.used")
    assert nv["bytes"].to_list() == [gib(5.25)] and nv["gpu"].to_list() == ["3"]
    assert series(p, "allocated")["label"].to_list() == ["after forward"]
    host = series(p, "host.used")
    assert host["bytes"].to_list() == [gib(10.5)] and host["label"].to_list() == ["after forward"]
    assert any("memory.used" in n for n in p.notes)


def test_print_copy_in_mb_and_log_dist_message_on_the_ma_line(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "before alloc",
        "MA 0.0 MB         Max_MA 0.0 MB         CA 0.0 MB         Max_CA 0 MB ",
        "CPU Virtual Memory: used = 3.1 GB, percent = 5.0%",
        "[2024-01-02 03:04:05,678] [INFO] [logging.py:96:log_dist] [Rank 0] after step MA 12.5 MB "
        "        Max_MA 20.0 MB         CA 64.0 MB         Max_CA 64 MB         PEAK_MA 20.0 MB    ",
    ]) + "\n")
    ma = series(p, "allocated")
    assert ma["bytes"].to_list() == [0, round(12.5 * MiB)]
    assert ma["label"].to_list() == ["before alloc", "after step"]
    assert series(p, "max_reserved")["bytes"].to_list() == [0, 64 * MiB]
    assert set(p.samples["series"]) == {"allocated", "max_allocated", "reserved", "max_reserved", "host.used"}


def test_generic_lines_in_a_deepspeed_log_are_read_too(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "[2024-01-02 03:04:05,678] [INFO] [real_accelerator.py:191:get_accelerator] Setting ds_accelerator to cuda",
        "[2024-01-02 03:04:06,000] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.14.0",
        "[step 1] allocated: 10 MB, reserved: 20 MB",
    ]) + "\n")
    assert series(p, "allocated")["step"].to_list() == [1]


def test_sniff():
    assert deepspeed.sniff(["# source: x", "MA 1 GB Max_MA 2 GB CA 3 GB Max_CA 4 GB"])
    assert deepspeed.sniff(["[2024-01-02 03:04:05,678] [INFO] [engine.py:100:__init__] DeepSpeed Flops Profiler"])
    assert deepspeed.sniff(["MA is a state", "CA 3 GB"]) is None
    # the logger format alone, without any DeepSpeed word, is not enough
    assert deepspeed.sniff(["[2024-01-02 03:04:05,678] [INFO] [app.py:10:main] hello"]) is None
