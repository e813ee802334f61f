"""Generic step-marker memory lines (forensics/parsers/steplog/markers.py, generic.py): real snippets, the spine format,
the tolerant scanner, and what it must leave alone."""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest
from conftest import REALWORLD, parse_file, realworld

from forensics.options import Options
from forensics.parsers.steplog import generic, readings
from forensics.parsers.steplog import markers as stepmem
from forensics.io.sources import Source

MiB, GiB = 1 << 20, 1 << 30
NAME = "step-markers"


def mib(x: float) -> int:
    return round(x * MiB)


def gib(x: float) -> int:
    return round(x * GiB)


def parse_text(tmp_path, text: str, opts: Options | None = None, name: str = "train.log"):
    p = tmp_path / name
    p.write_text(text)
    return parse_file(p, opts, expect=NAME)[1]


def series(parsed, name: str, gpu: str | None = None) -> pl.DataFrame:
    s = parsed.samples.filter(pl.col("series") == name)
    if gpu is not None:
        s = s.filter(pl.col("gpu") == gpu)
    return s.sort("seq")


# -- real-world snippets ------------------------------------------------------------------------

def test_torch_01_megatron_like_user_log_creeps_up():
    _, p = parse_file(realworld("stepmem_torch_01.txt"), expect=NAME)
    alloc = series(p, "allocated")
    assert alloc.height == 13
    expected = [20.4, 20.5, 20.5, 20.6, 20.6, 20.6, 20.7, 20.7, 20.8, 20.8, 20.9, 20.9, 21.0]
    assert alloc["bytes"].to_list() == [mib(x) for x in expected]
    assert alloc["line"].to_list() == list(range(2, 15))
    assert alloc["seq"].to_list() == list(range(13))
    assert series(p, "reserved")["bytes"].to_list() == [mib(26)] * 6 + [mib(28)] * 7
    assert series(p, "max_allocated")["bytes"][0] == mib(21.8)
    assert series(p, "max_reserved")["bytes"][-1] == mib(28)
    assert p.samples["step"].is_null().all() and p.samples["time"].is_null().all()
    assert p.clock == "none"
    assert p.skipped.total == 0
    assert any("ordered by their place" in n for n in p.notes)


def test_torch_02_raw_bytes_per_device_with_iter_markers():
    _, p = parse_file(realworld("stepmem_torch_02.txt"), expect=NAME)
    a0 = series(p, "allocated", "0")
    assert a0["bytes"].to_list() == [318986240, 318986240]
    assert a0["step"].to_list() == [8, 9]
    a1 = series(p, "allocated", "1")
    assert a1["bytes"].to_list() == [10997248, 10997248]
    assert series(p, "max_allocated", "1")["bytes"].to_list() == [530863104, 530863104]
    # the reading before the first `Iter N` has no step
    r1 = series(p, "reserved", "1")
    assert r1["bytes"].to_list() == [608174080] * 3
    assert r1["step"].to_list() == [None, 8, 9]
    smi1 = series(p, "memory.used", "1")
    assert smi1["bytes"].to_list() == [mib(1494), mib(1495), mib(1497)]
    assert series(p, "memory.used", "0")["bytes"].to_list() == [mib(2796), mib(2798)]
    # gc.get_count() and gc.collect() lines are not readings
    assert set(p.samples["series"]) == {"allocated", "reserved", "max_allocated", "max_reserved", "memory.used"}


def test_torch_raw_byte_counts_printed_as_floats(tmp_path):
    # `print(name, torch.cuda.memory_allocated(0) / 1)` prints a float: the whole number is the
    # reading, not its digits before the point (3.0e2 was read as 3 bytes; found by a property test)
    p = parse_text(tmp_path, "\n".join([
        "torch.cuda.memory_allocated(0) 3.0e2",
        "torch.cuda.memory_allocated(0) 1.5e9",
        "torch.cuda.memory_allocated(0) 318986240.0",
        "torch.cuda.memory_allocated(0) 318986240",
    ]) + "\n", Options(tz="UTC"))
    assert series(p, "allocated", "0")["bytes"].to_list() == [300, 1_500_000_000, 318986240, 318986240]


def test_misc_01_deeplabcut_epochs_tqdm_and_hf_on_log_dict():
    _, p = parse_file(realworld("stepmem_misc_01.txt"), expect=NAME)
    res = series(p, "reserved")
    assert res["bytes"].to_list() == [mib(2798.0), mib(3166.0), mib(3232.0)]
    assert res["total_bytes"].to_list() == [mib(11011.5)] * 3
    assert res["label"][0] == "Epoch 1/100 (lr=0.0001), train loss 0.10713"
    hf_alloc = series(p, "allocated")
    assert hf_alloc["bytes"].to_list() == [gib(3.82)]
    assert hf_alloc["total_bytes"].to_list() == [gib(29.85)]
    assert hf_alloc["label"].to_list() == ["epoch 0.09"]
    assert series(p, "max_allocated")["bytes"].to_list() == [gib(6.32)]
    assert hf_alloc["line"][0] == 7


# -- the spine format ---------------------------------------------------------------------------

def test_spine_plain_with_tags_and_cached_as_reserved(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "[after forward] allocated: 12.5 MB, cached: 40 MB",
        "[step 120] reserved: 41 MB, allocated: 13 MB, max allocated: 20 MB, max reserved: 44 MB",
        "[epoch 3 step 40] cached: 42.5 MB allocated: 14 MB",
        "[it 5] allocated: 2 GiB, reserved: 3 GiB",
    ]) + "\n")
    a = series(p, "allocated")
    assert a["bytes"].to_list() == [mib(12.5), mib(13), mib(14), gib(2)]
    assert a["step"].to_list() == [None, 120, 40, 5]
    assert a["label"].to_list() == ["after forward", "step 120", "epoch 3 step 40", "it 5"]
    assert series(p, "reserved")["bytes"].to_list() == [mib(40), mib(41), mib(42.5), gib(3)]
    assert series(p, "max_allocated")["bytes"].to_list() == [mib(20)]
    assert series(p, "max_reserved")["bytes"].to_list() == [mib(44)]
    # allocated and reserved of one line are one reading: the same seq
    assert p.samples.group_by("line").agg(pl.col("seq").n_unique())["seq"].to_list() == [1, 1, 1, 1]
    assert p.clock == "none"


def test_spine_without_tags_is_ordered_by_seq(tmp_path):
    p = parse_text(tmp_path, "".join(f"allocated: {100 + i} MB, cached: 200 MB\n" for i in range(5)))
    a = series(p, "allocated")
    assert a["seq"].to_list() == [0, 1, 2, 3, 4]
    assert a["step"].is_null().all()
    assert a["label"].is_null().all()
    assert a["bytes"].to_list() == [mib(100 + i) for i in range(5)]


def test_spine_behind_python_logging_prefix_is_local_time(tmp_path):
    text = ("2026-11-30 03:04:08,405 INFO train: [step 120] allocated: 10 MB, cached: 20 MB\n"
            "2026-11-30 03:04:09,405 INFO train: [step 121] allocated: 11 MB, cached: 20 MB\n")
    p = parse_text(tmp_path, text, Options(tz="Europe/Berlin"))
    a = series(p, "allocated")
    assert a["time"].to_list() == [datetime(2026, 11, 30, 2, 4, 8, 405000, tzinfo=timezone.utc),
                                   datetime(2026, 11, 30, 2, 4, 9, 405000, tzinfo=timezone.utc)]
    assert a["step"].to_list() == [120, 121]
    assert a["label"].to_list() == ["step 120", "step 121"]
    assert p.clock == "wall-assumed"


def test_spine_per_file_zone_override(tmp_path):
    text = "[2026-07-01 12:00:00] [step 1] allocated: 10 MB\n"
    opts = Options(tz="UTC", tz_overrides={"train.log": "America/New_York"})
    p = parse_text(tmp_path, text, opts)
    assert p.samples["time"][0] == datetime(2026, 7, 1, 16, 0, tzinfo=timezone.utc)


def test_spine_iso_clocks_with_and_without_zone(tmp_path):
    zoned = ("2026-11-30T03:04:11.5+01:00 [step 1] allocated: 17 MB\n"
             "2026-11-30T03:04:12Z [step 2] allocated=18MB max_reserved=100MB\n")
    p = parse_text(tmp_path, zoned, Options(tz="Asia/Tokyo"))
    assert series(p, "allocated")["time"].to_list() == [
        datetime(2026, 11, 30, 2, 4, 11, 500000, tzinfo=timezone.utc),
        datetime(2026, 11, 30, 3, 4, 12, tzinfo=timezone.utc)]
    assert series(p, "max_reserved")["bytes"].to_list() == [mib(100)]
    assert p.clock == "wall"
    naive = parse_text(tmp_path, "2026-11-30T03:04:12 [step 2] allocated: 18 MB\n", Options(tz="Asia/Tokyo"),
                       name="naive.log")
    assert naive.samples["time"][0] == datetime(2026, 11, 29, 18, 4, 12, tzinfo=timezone.utc)
    assert naive.clock == "wall-assumed"


def test_step_from_marker_lines_and_tag_wins(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "allocated: 1 MB",
        "Iter 7 Time 0.5",
        "cuda:1 allocated: 2 MB",
        "allocated: 3 MB",
        "Step 9: allocated: 1,234.5 MB reserved: 2,000 MB",
    ]) + "\n")
    a = series(p, "allocated")
    assert a["step"].to_list() == [None, 7, 7, 9]
    assert a["gpu"].to_list() == [None, "1", None, None]
    assert a["bytes"].to_list() == [mib(1), mib(2), mib(3), mib(1234.5)]
    assert series(p, "reserved")["bytes"].to_list() == [mib(2000)]


def test_other_free_text_shapes(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "2021-06-02 17:50:09 dev-ssh-geza root[26709] DEBUG Free GPU ram: 13722.5",
        "2021-06-02 17:50:29 dev-ssh-geza root[26709] DEBUG Free GPU ram: 12800.5",
        "iter 3 | occupied memory: 2.47 GB / reserved: 16.69 GB",
        " 11%|###   | 1280/11178 [00:21<02:49, 58.23it/s, GPU=3232.0/11011.5 MiB]\r 12%|###   | 1290/11178 "
        "[00:22<02:49, 58.23it/s, GPU=3240.0/11011.5 MiB]",
    ]) + "\n", Options(tz="UTC"))
    free = series(p, "free")
    assert free["bytes"].to_list() == [mib(13722.5), mib(12800.5)]
    assert free["time"][1] == datetime(2021, 6, 2, 17, 50, 29, tzinfo=timezone.utc)
    assert series(p, "allocated")["bytes"].to_list() == [gib(2.47)]
    res = series(p, "reserved")
    # each tqdm refresh after a carriage return is its own reading on the same line
    assert res["bytes"].to_list() == [gib(16.69), mib(3232.0), mib(3240.0)]
    assert res["line"].to_list() == [3, 4, 4]
    assert res["seq"].n_unique() == 3
    assert any("MiB" in n for n in p.notes)


def test_near_misses_are_counted_not_guessed(tmp_path):
    p = parse_text(tmp_path, "\n".join([
        "[step 1] allocated: 10 MB",
        "[step 2] allocated: 20",            # no unit anywhere: not a reading
        "[step 3] allocated: 1e400 GB",      # not a finite size
        "[step 4] allocated: N/A",           # placeholder: no number at all
        "[step 5] allocated: -5 MB",         # no memory holds less than nothing
        "[step 6] re\u017ferved: 30 MB",     # a long s: (?i) reads it as a key of no series
    ]) + "\n")
    assert series(p, "allocated")["bytes"].to_list() == [mib(10)]
    assert p.skipped.counts == {"memory value without a unit": 1, "memory value out of range": 1,
                                "negative memory value": 1, "unknown memory key": 1}
    assert p.skipped.examples["memory value without a unit"] == [2]
    assert p.skipped.examples["negative memory value"] == [5]
    assert p.skipped.examples["unknown memory key"] == [6]


def test_two_keys_over_two_values_are_two_readings(tmp_path):
    # min-max-gpt's memory_profile_utils (held-out 2, min_max_gpt_block_5.txt): `Allocated / Reserved: A / R`
    # was read as reserved = A with a capacity of R
    p = parse_text(tmp_path, "".join(f"[step {i}] Allocated / Reserved: {4162.88 + i:.2f}MB / 23816.00MB\n"
                                     f"[step {i}] Max Allocated / Max Reserved: 18706.66MB / 23816.00MB\n"
                                     for i in range(3)))
    assert series(p, "allocated")["bytes"].to_list() == [mib(4162.88 + i) for i in range(3)]
    assert series(p, "reserved")["bytes"].to_list() == [mib(23816.0)] * 3
    assert series(p, "max_allocated")["bytes"].to_list() == [mib(18706.66)] * 3
    assert series(p, "max_reserved")["bytes"].to_list() == [mib(23816.0)] * 3
    assert p.samples["total_bytes"].is_null().all()
    assert p.samples["step"].to_list() == [i for i in range(3) for _ in range(4)]


def test_unit_from_the_line_header(tmp_path):
    p = parse_text(tmp_path, "rank 3 step 5 memory (GB) | allocated: 1.5 | reserved: 2\n")
    assert series(p, "allocated")["bytes"].to_list() == [gib(1.5)]
    assert p.samples["step"].unique().to_list() == [5]
    assert p.samples["label"].unique().to_list() == ["rank 3"] and p.samples["gpu"].is_null().all()


def test_a_phase_key_is_the_label_of_its_line(tmp_path):
    # ORTModule's memory log (held-out 4, ort_phases_19620.txt): four phases of a step, each a series of its own
    p = parse_text(tmp_path, "".join(f"rank-0 step {i} memory (MiB) | phase: {ph} | allocated: {100 * i + k} | "
                                     f"cached: 900\n" for i in range(1, 4) for k, ph in enumerate(("pre_forward", "post_forward"))))
    got = series(p, "allocated")
    assert got.filter(pl.col("label") == "post_forward")["bytes"].to_list() == [mib(100 * i + 1) for i in range(1, 4)]
    assert got.filter(pl.col("label") == "pre_forward")["step"].to_list() == [1, 2, 3]
    # a number is no phase (`stage: 3`, ZeRO's stage): the label stays the text in front
    p = parse_text(tmp_path, "".join(f"step {i} stage: 3 | allocated: {i} MB\n" for i in range(3)))
    assert p.samples["label"].to_list() == [f"step {i} stage: 3" for i in range(3)]


# -- what it must not claim -----------------------------------------------------------------------

OTHER_FAMILIES = ("nvsmi_", "kernlog_", "xid_", "sanitizer_", "torch_", "journal_")


def _others():
    return sorted(p.name for p in REALWORLD.rglob("*.txt") if p.name.startswith(OTHER_FAMILIES))


@pytest.mark.parametrize("name", _others())
def test_step_log_sniffs_and_scan_leave_other_families_alone(name):
    from forensics.parsers.steplog import deepspeed
    from forensics.parsers.steplog import hf_trainer
    from forensics.parsers.steplog import megatron

    src = Source.open(realworld(name), name)
    head = src.head()
    for module in (stepmem, deepspeed, megatron, hf_trainer):
        assert module.sniff(head) is None, f"{module.NAME} claims {name}"
    hits = src.frame().filter(pl.col("text").str.contains(stepmem.SCAN_HINT))
    assert stepmem.scan(hits, src, Options(tz="UTC")).records == 0


def test_others_are_present():
    names = _others()
    for prefix in OTHER_FAMILIES:
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
    "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacity of "
    "6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB "
    "is reserved by PyTorch but unallocated.",
    "some app: CUDA out of memory; allocated: 3 GiB reserved: 4 GiB",
    "| Allocated memory      |  659155 KB |    4460 MB |   12439 MB |   11795 MB |",
    "| GPU reserved memory   |    2048 KB |    2048 KB |    2048 KB |       0 B  |",
    "        Reserved                          : 336 MiB",
    "[Mon Dec  8 17:51:31 2025] 63159 pages reserved",
    "Memory: 16335732K/16777216K available (14339K kernel code, 441484K reserved, 0K cma-reserved)",
    "Node 0 DMA32 free:12345kB min:100kB reserved_highatomic:0KB managed:4000kB",
])
def test_not_a_reading(line):
    head = ["# source: test", line]
    assert stepmem.sniff(head) is None
    assert readings.head_readings(head).height == 0


def test_scan_finds_readings_after_a_long_preamble(tmp_path):
    """A training log whose memory prints start after the sniff window: nobody claims it, the
    scanner still reads it."""
    path = tmp_path / "job.out"
    path.write_text("".join(f"config key_{i}: value\n" for i in range(300))
                    + "".join(f"[step {i}] allocated: {10 + i} MB\n" for i in range(3)))
    src = Source.open(path, str(path))
    assert stepmem.sniff(src.head()) is None
    hits = src.frame().filter(pl.col("text").str.contains(stepmem.SCAN_HINT))
    p = stepmem.scan(hits, src, Options(tz="UTC"))
    assert p.samples["bytes"].to_list() == [mib(10), mib(11), mib(12)]
    assert p.samples["line"].to_list() == [301, 302, 303]
    assert p.samples["step"].to_list() == [0, 1, 2]


def test_empty_and_blank_input(tmp_path):
    assert stepmem.sniff([]) is None
    assert stepmem.sniff(["", "   "]) is None
    path = tmp_path / "empty.log"
    path.write_text("")
    src = Source.open(path, str(path))
    p = stepmem.parse(src, Options(tz="UTC"))
    assert p.records == 0 and p.clock == "none"


def _step_log_snippets():
    return sorted(p.name for p in REALWORLD.rglob("*.txt") if p.name.startswith(("stepmem_", "deepspeed_mem_")))


def _expected_parser(name: str) -> str:
    if name.startswith("deepspeed_mem_"):
        return "deepspeed-memory"
    if name.startswith("stepmem_megatron_"):
        return "megatron-memory"
    if name.startswith("stepmem_hf_"):
        return "hf-trainer-memory"
    return NAME


@pytest.mark.parametrize("name", _step_log_snippets())
def test_every_step_log_snippet_is_claimed_by_its_parser_and_read(name):
    _, p = parse_file(realworld(name), expect=_expected_parser(name))
    assert p.samples.height > 0
    assert p.samples["bytes"].is_not_null().all()
    assert p.samples["line"].min() >= 2  # line 1 is the provenance note
    assert p.skipped.total == 0


def test_the_training_script_itself_is_not_a_log(tmp_path):
    """Its docstrings show the lines it prints; neither sniff nor scan reads them."""
    path = tmp_path / "train.py"
    path.write_text('"""Prints `[step 12] allocated: 1234.56 MB, cached: 2048.00 MB` each step."""\n'
                    "import torch\nfrom torch import nn\n\n\ndef main():\n"
                    '    log.info("[step %d] allocated: 5 MB", step)\n')
    src = Source.open(path, str(path))
    assert stepmem.sniff(src.head()) is None
    hits = src.frame().filter(pl.col("text").str.contains(stepmem.SCAN_HINT))
    assert hits.height == 2
    assert stepmem.scan(hits, src, Options(tz="UTC")).records == 0


def test_sniff_rejects_a_head_without_a_reading_line_in_one_query(monkeypatch):
    """A head with memory words but no line that is both a hint and a reading shape cannot give a
    reading: sniff says no without running the extraction (most files that reach it are such)."""
    def boom(*a, **k):
        raise AssertionError("extraction ran")

    monkeypatch.setattr(readings, "extract", boom)
    head = ["INFO starting run, allocated buffers", "step 3 done", '{"reserved": true, "note": "cached"}']
    assert stepmem.sniff(head) is None
    with pytest.raises(AssertionError, match="extraction ran"):
        stepmem.sniff(["step 7 | allocated: 1024.00 MB, reserved: 2048.00 MB"])


def test_context_read_from_the_words_each_line_holds():
    """The step, GPU, label, total and clock that a reading takes from its line, each shape once (the
    context regexes run only when some line holds their word: a word test too narrow fails here)."""
    from forensics.model import Skipped

    lines = [
        "device: 2 | allocated: 5 MB, reserved: 8 MB",
        "[Rank 1] after step: allocated: 100 MB",
        "{'memory_allocated (GB)': 1.5, 'global_step': 40}",
        "03/04/2026 10:00:00 - INFO - [step 7] allocated: 12 MB",
        "2026-03-04 10:00:01 total memory: 80 GB | allocated: 13 MB",
        "Epoch: 3 | memory (MB) | allocated: 20.4 | reserved: 30",
        "allocated: 5 MB, 'epoch': 3",
    ]
    got = []
    for n, text in enumerate(lines, start=1):   # each line alone: no other line's word lets its regex run
        df = pl.DataFrame({"line": [n], "text": [text]}, schema={"line": pl.Int64, "text": pl.String})
        got += generic.extract_generic(df, "UTC", Skipped()).select(
            "line", pl.col("time").dt.strftime("%H:%M:%S"), "series", "bytes", "total_bytes", "step", "label",
            "gpu").rows()
    MB = 1 << 20
    assert got == [
        (1, None, "allocated", 5 * MB, None, None, "device: 2", "2"),
        (1, None, "reserved", 8 * MB, None, None, "device: 2", "2"),
        (2, None, "allocated", 100 * MB, None, None, "after step", None),   # a rank is no GPU
        (3, None, "allocated", 1536 * MB, None, 40, None, None),
        (4, "10:00:00", "allocated", 12 * MB, None, 7, "step 7", None),
        (5, "10:00:01", "allocated", 13 * MB, 80 << 30, None, "total memory: 80 GB", None),
        (6, None, "allocated", round(20.4 * MB), None, None, "Epoch: 3 | memory (MB)", None),
        (6, None, "reserved", 30 * MB, None, None, "Epoch: 3 | memory (MB)", None),
        (7, None, "allocated", 5 * MB, None, None, "epoch 3", None),
    ]


def test_short_mem_keys_without_colon(tmp_path):
    # recorded (tests/corpus/tune/two_procs_one_leaks_exit/b.log): `mem_alloc X GB | mem_reserved Y GB`
    text = ("2026-12-01 22:34:41,281 | INFO | model ready, working set 1024 MB; training 90 steps, batch 8192\n"
            "2026-12-01 22:34:41,606 | INFO | step 1 | loss 0.0560 | mem_alloc 1.25 GB | mem_reserved 1.69 GB\n"
            "2026-12-01 22:34:41,614 | INFO | step 2 | loss 0.0560 | mem_alloc 1.31 GB | mem_reserved 1.81 GB\n"
            "2026-12-01 22:34:41,765 | INFO | step 3 | mem_allocated=1.37 GB mem_cached=1.81 GB\n")
    p = parse_text(tmp_path, text)
    assert series(p, "allocated")["bytes"].to_list() == [gib(1.25), gib(1.31), gib(1.37)]
    assert series(p, "reserved")["bytes"].to_list() == [gib(1.69), gib(1.81), gib(1.81)]
    assert series(p, "allocated")["step"].to_list() == [1, 2, 3]


def test_short_mem_keys_need_a_unit(tmp_path):
    # without a unit a `mem_` word followed by a number is prose or an id, not a reading
    p = tmp_path / "train.log"
    p.write_text("2026-12-01 22:34:41,606 INFO step 1 mem_alloc 3 retries\n[step 1] allocated: 5 MB, cached: 6 MB\n")
    parsed = parse_file(p, None, expect=NAME)[1]
    assert series(parsed, "allocated")["bytes"].to_list() == [5 * MiB]
