"""torch.cuda.memory_summary() tables: old and new unit labels, abbreviated tables, the cudaMallocAsync
backend, several tables per file as a series, counters, and tables inside other logs."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from conftest import REALWORLD, parse_file, realworld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import ingest
from forensics.options import Options
from forensics.parsers.torch import memsummary as torch_memsummary
from forensics.io.sources import Source

NAME = "pytorch-memory-summary"
KiB, MiB = 1 << 10, 1 << 20

# Recorded on an NVIDIA H200 with torch 2.11.0+cu130: print(torch.cuda.memory_summary()) then
# print(torch.cuda.memory_summary(abbreviated=True)) with one 1 GiB tensor alive. Verbatim.
RECORDED = """|===========================================================================|
|                  PyTorch CUDA memory summary, device ID 0                 |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from large pool |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Active memory         |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from large pool |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Requested memory      |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from large pool |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 B   |
|---------------------------------------------------------------------------|
| GPU reserved memory   |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from large pool |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Non-releasable memory |      0 B   |      0 B   |      0 B   |      0 B   |
|       from large pool |      0 B   |      0 B   |      0 B   |      0 B   |
|       from small pool |      0 B   |      0 B   |      0 B   |      0 B   |
|---------------------------------------------------------------------------|
| Allocations           |       1    |       1    |       1    |       0    |
|       from large pool |       1    |       1    |       1    |       0    |
|       from small pool |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Active allocs         |       1    |       1    |       1    |       0    |
|       from large pool |       1    |       1    |       1    |       0    |
|       from small pool |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| GPU reserved segments |       1    |       1    |       1    |       0    |
|       from large pool |       1    |       1    |       1    |       0    |
|       from small pool |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Non-releasable allocs |       0    |       0    |       0    |       0    |
|       from large pool |       0    |       0    |       0    |       0    |
|       from small pool |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize allocations  |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize GPU segments |       0    |       0    |       0    |       0    |
|===========================================================================|

|===========================================================================|
|                  PyTorch CUDA memory summary, device ID 0                 |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Active memory         |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Requested memory      |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|---------------------------------------------------------------------------|
| GPU reserved memory   |   1024 MiB |   1024 MiB |   1024 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Non-releasable memory |      0 B   |      0 B   |      0 B   |      0 B   |
|---------------------------------------------------------------------------|
| Allocations           |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| Active allocs         |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| GPU reserved segments |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| Non-releasable allocs |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize allocations  |       0    |       0    |       0    |       0    |
|---------------------------------------------------------------------------|
| Oversize GPU segments |       0    |       0    |       0    |       0    |
|===========================================================================|
"""


def write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def series(parsed) -> dict:
    return {(r["seq"], r["series"]): r["bytes"] for r in parsed.samples.to_dicts()}


def markers(parsed):
    rows = parsed.events.filter(pl.col("kind") == "marker").to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return rows


@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("torch_memsummary_*.txt")))
def test_every_snippet_is_claimed(name):
    _, p = parse_file(realworld(name), expect=NAME)
    assert p.samples.height >= 2 and set(p.samples["gpu"].to_list()) == {"0"}
    assert p.clock == "none" and p.samples["time"].null_count() == p.samples.height


def test_old_kb_mb_labels():
    _, p = parse_file(realworld("torch_memsummary_01.txt"), expect=NAME)
    assert series(p) == {(1, "allocated"): 659155 * KiB, (1, "max_allocated"): 4460 * MiB}
    (m,) = markers(p)
    assert m["detail"]["cuda_ooms"] == 0 and m["detail"]["cudamalloc_retries"] == 0
    assert m["detail"]["rows"]["Allocated memory"] == {"cur": 659155 * KiB, "peak": 4460 * MiB,
                                                       "alloc": 12439 * MiB, "freed": 11795 * MiB}
    assert m["line"] == 3 and "device ID 0" in m["text"]


def test_byte_labels_and_reserved_row():
    _, p = parse_file(realworld("torch_memsummary_02.txt"), expect=NAME)
    assert series(p) == {(1, "allocated"): 1024, (1, "max_allocated"): 133632,
                         (1, "reserved"): 2048 * KiB, (1, "max_reserved"): 2048 * KiB}
    rows = p.samples.filter(pl.col("series") == "reserved")
    assert rows["line"].to_list() == [17]


def test_cudamallocasync_table_with_docker_prefix():
    _, p = parse_file(realworld("torch_memsummary_04.txt"), expect=NAME)
    assert series(p) == {(1, "allocated"): 3116 * MiB, (1, "max_allocated"): 21865 * MiB,
                         (1, "reserved"): 3424 * MiB, (1, "max_reserved"): 22208 * MiB}
    (m,) = markers(p)
    assert "cudaMallocAsync" in m["detail"]["backend"]
    assert m["detail"]["rows"]["Allocations"] == {"cur": 0, "peak": 0, "alloc": 0, "freed": 0}
    assert any("cudaMallocAsync" in n for n in p.notes)


def test_recorded_full_and_abbreviated_tables(tmp_path):
    _, p = parse_file(write(tmp_path, RECORDED), expect=NAME)
    s = series(p)
    for seq in (1, 2):
        for name in ("allocated", "reserved", "max_allocated", "max_reserved"):
            assert s[(seq, name)] == 1024 * MiB
    m1, m2 = markers(p)
    assert m1["detail"]["rows"]["Requested memory"]["cur"] == 1024 * MiB
    assert m2["detail"]["rows"]["GPU reserved segments"] == {"cur": 1, "peak": 1, "alloc": 1, "freed": 0}
    assert "backend" not in m1["detail"]


def _table(device: int, cur: str, peak: str, reserved: str, ooms: int, retries: int) -> str:
    return "\n".join([
        "|===========================================================================|",
        f"|                  PyTorch CUDA memory summary, device ID {device}                 |",
        "|---------------------------------------------------------------------------|",
        f"|            CUDA OOMs: {ooms}            |        cudaMalloc retries: {retries}         |",
        "|===========================================================================|",
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
        "|---------------------------------------------------------------------------|",
        f"| Allocated memory      | {cur} | {peak} |  22536 MiB |  16911 MiB |",
        "|       from large pool |   5543 MiB |   5589 MiB |   8875 MiB |   3332 MiB |",
        "|---------------------------------------------------------------------------|",
        f"| GPU reserved memory   | {reserved} | {reserved} |  22536 MiB |  16911 MiB |",
        "|===========================================================================|",
    ])


def test_several_tables_are_a_series_per_device(tmp_path):
    text = "\n".join([
        "step 100 done",
        _table(0, "  5624 MiB", "  5673 MiB", "  6000 MiB", 0, 0),
        "step 200 done",
        _table(1, "  5700 MiB", "  5800 MiB", "  6100 MiB", 2, 5),
        _table(0, "     6 GiB", "     7 GiB", "     8 GiB", 1, 3),
    ]) + "\n"
    _, p = parse_file(write(tmp_path, text), expect=NAME)
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("seq")
    assert alloc["seq"].to_list() == [1, 2, 3]
    assert alloc["gpu"].to_list() == ["0", "1", "0"]
    assert alloc["bytes"].to_list() == [5624 * MiB, 5700 * MiB, 6 << 30]
    ms = markers(p)
    assert [(m["detail"]["cuda_ooms"], m["detail"]["cudamalloc_retries"]) for m in ms] == [(0, 0), (2, 5), (1, 3)]
    assert p.meta["memory_summaries"] == 3 and p.meta["cuda_ooms_max"] == 2
    assert p.skipped.counts["not part of a memory summary"] == 2


def test_tables_inside_a_training_log_are_scanned(tmp_path):
    lines = [f"2024-01-01 00:00:{i % 60:02d} step {i} loss 0.1" for i in range(300)]
    lines += _table(3, "  5624 MiB", "  5673 MiB", "  6000 MiB", 0, 0).split("\n")
    src = Source.open(write(tmp_path, "\n".join(lines) + "\n"))
    assert torch_memsummary.sniff(src.head()) is None
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    got = [r for p in results for r in p.samples.to_dicts() if r["label"] == "memory_summary"]
    assert {(r["series"], r["gpu"], r["bytes"]) for r in got} == {
        ("allocated", "3", 5624 * MiB), ("max_allocated", "3", 5673 * MiB),
        ("reserved", "3", 6000 * MiB), ("max_reserved", "3", 6000 * MiB)}


def test_garbage_cells_are_skipped_not_zero(tmp_path):
    text = _table(0, "   N/A    ", "  5673 MiB", "  6000 MiB", 0, 0) + "\n"
    _, p = parse_file(write(tmp_path, text), expect=NAME)
    s = series(p)
    assert (1, "allocated") not in s and s[(1, "max_allocated")] == 5673 * MiB
    assert p.skipped.counts["unreadable memory_summary cell"] == 1


FAMILIES = ("nvsmi_", "kernlog_", "xid_", "stepmem_", "deepspeed_", "journal_", "sanitizer_", "torch_oom_")


@pytest.mark.parametrize("path", sorted(p for p in REALWORLD.rglob("*.txt") if p.name.startswith(FAMILIES)),
                         ids=lambda p: p.name)
def test_sniff_leaves_other_families_alone(path):
    assert torch_memsummary.sniff(Source.open(path).head()) is None


_ROWS = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r\n"), max_size=80),
    st.builds(lambda d: f"|   PyTorch CUDA memory summary, device ID {d}   |", st.integers(0, 99)),
    st.builds(lambda a, b, c, d: f"| Allocated memory      | {a} | {b} | {c} | {d} |",
              *[st.sampled_from(["  12 MiB", "0 B  ", "x", "  9 GiB ", " 1,2 KB", "", "  7 K"])] * 4),
    st.builds(lambda a: f"| GPU reserved memory   | {a} MiB | 1 MiB | 1 MiB | 1 MiB |", st.integers(0, 2**40)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ROWS, max_size=20))
def test_arbitrary_lines_never_raise_and_bytes_have_a_source(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        src = Source.open(path)
        torch_memsummary.sniff(src.head())
        parsed = torch_memsummary.parse(src, Options(tz="UTC"))
        text = src.frame()
        for r in parsed.samples.to_dicts():
            line = text.filter(pl.col("line") == r["line"])["text"][0]
            assert r["bytes"] == 0 or any(ch.isdigit() and ch != "0" for ch in line)
