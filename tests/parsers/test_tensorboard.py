"""tensorboard-events: memory scalars of TensorBoard event files become series on their step and wall
time. The files are written by tensorboardX (tests/tb_events.py), the optional extra `tensorboard`,
which the `test` extra installs."""
from __future__ import annotations

import struct
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import REALWORLD

from forensics import pipeline
from forensics.errors import InputError
from forensics.io.sources import Source
from forensics.options import Options
from forensics import parsers
from forensics.parsers.metrics import tensorboard

from tb_events import T0, write_scalars

SAMPLE = REALWORLD / "tensorboard-events" / "events.out.tfevents.1767607200.sample"
MIB, GIB = 1 << 20, 1 << 30


def read(path: Path):
    src = Source.open(path, str(path))
    module, _ = parsers.claim_file(src)
    assert module is tensorboard.FORMAT
    return module.parse(src, Options(tz="UTC"))


def test_the_sample_gives_its_memory_series_on_step_and_wall_time():
    out = read(SAMPLE)
    by = {s: g.sort("step") for (s,), g in out.samples.group_by("series")}
    assert set(by) == {"allocated", "reserved", "max_allocated"}
    allocated = by["allocated"]
    assert allocated["bytes"].to_list() == [(2048 + 8 * s) * MIB for s in range(30)]
    assert allocated["step"].to_list() == list(range(30))
    assert allocated["time"][1] == datetime.fromtimestamp(T0 + 10, timezone.utc)
    assert set(allocated["label"]) == {"memory/allocated_mib"}
    # TF2's tensor scalars, float_val and tensor_content alike
    assert by["reserved"]["bytes"].to_list() == [3 * GIB] * 10 + [int(3.5 * GIB)] * 20
    assert by["max_allocated"]["bytes"][0] == 2100 * MIB
    assert out.clock == "wall"
    assert any("gpu/mem_reserved_gb" in n and "GiB" in n for n in out.notes)
    assert out.skipped.counts[tensorboard.SKIP_NO_UNIT] == 30
    assert out.skipped.counts[tensorboard.SKIP_NOT_IN_USE] == 30
    assert out.lines == 1 + 30 * 6


def test_the_sample_is_claimed_by_its_bytes_alone():
    first = SAMPLE.read_bytes()[:64]
    assert tensorboard.sniff_bytes(first)
    assert tensorboard.sniff_bytes(b"\x80\x04" + first[2:]) is None
    assert tensorboard.sniff_bytes(b"step 1 allocated 3 GiB\n") is None


def test_a_file_cut_short_keeps_the_records_before_the_cut(tmp_path):
    data = SAMPLE.read_bytes()
    cut = tmp_path / "events.out.tfevents.1.cut"
    cut.write_bytes(data[: len(data) - 7])
    out = read(cut)
    assert out.skipped.counts[tensorboard.SKIP_CUT] == 1
    assert out.samples.height == 3 * 30 and out.lines == 1 + 30 * 6   # the last record, cut, was the loss


def test_a_damaged_length_keeps_what_came_before_and_says_where(tmp_path):
    data = bytearray(SAMPLE.read_bytes())
    at = 0
    for _ in range(7):        # to the 8th record: the version, then step 0's six scalars
        (n,) = struct.unpack_from("<Q", data, at)
        at += 16 + n
    data[at] ^= 0x40
    bad = tmp_path / "events.out.tfevents.1.bad"
    bad.write_bytes(bytes(data))
    out = read(bad)
    assert out.samples["step"].to_list() == [0, 0, 0]
    assert out.skipped.counts[tensorboard.SKIP_DAMAGED] == 1
    assert any("record 8" in n and f"byte {at}" in n for n in out.notes)


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setattr(tensorboard, "_library", lambda: None)
    with pytest.raises(InputError) as e:
        read(SAMPLE)
    assert "gpu-forensics[tensorboard]" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("tag, series, factor", [
    ("memory/allocated_mib", "allocated", MIB),
    ("gpu0/mem_reserved_gb", "reserved", GIB),
    ("cuda/max_memory_allocated (MiB)", "max_allocated", MIB),
    ("system/gpu.0.memory_used_bytes", "memory.used", 1),
    ("vram_mb", "memory.used", MIB),
])
def test_tag_names_give_series_and_unit(tmp_path, tag, series, factor):
    path = write_scalars(tmp_path / "run", {tag: [10.0, 20.0]}, tensor_tags=(tag,) if "vram" in tag else ())
    out = read(path)
    assert out.samples["series"].to_list() == [series] * 2
    assert out.samples["bytes"].to_list() == [10 * factor, 20 * factor]


def test_a_leaking_job_logged_to_tensorboard_is_a_leak(tmp_path):
    folder = tmp_path / "job"
    write_scalars(folder, {"memory/allocated_mib": [1024.0 + 16 * s for s in range(200)]})
    _, analysis = pipeline.run([str(folder)], Options(tz="UTC"))
    assert analysis.verdict == "leak"
    assert any(f.kind == "leak" and f.series == "allocated" for f in analysis.findings)


def test_a_wall_time_out_of_any_clocks_range_is_a_skipped_record(tmp_path):
    """Found by bench/fuzz.py (2026-12-07): a mutated record's wall time of ~1e300 s raised OverflowError
    out of the reader; each such record is counted as skipped with its reason, the good ones are read."""
    write_scalars(tmp_path / "run", {"memory/allocated_mib": [10.0, 20.0]}, t0=1e300)
    bad = read(next((tmp_path / "run").glob("events.out.tfevents.*")))
    assert bad.samples.height == 0
    assert bad.skipped.counts.get(tensorboard.SKIP_NO_TIME) == 2
    good = read(write_scalars(tmp_path / "good", {"memory/allocated_mib": [10.0, 20.0]}))
    assert good.samples["bytes"].to_list() == [10 * MIB, 20 * MIB]
