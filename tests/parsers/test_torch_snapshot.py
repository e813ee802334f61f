"""PyTorch memory snapshots (parsers/torch/snapshot.py): every layout the reader tolerates, on
synthetic snapshots made the way PyTorch makes them (tests/parsers/snapshots.py); the real recordings'
facts; the same result whether trace entries are read one opcode at a time or in runs from the bytes;
and nothing but a clean one-line message for a damaged, hostile or foreign pickle."""
from __future__ import annotations

import gzip
import io
import os
import pickle
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import SAMPLE_LOGS
from forensics import ingest
from forensics.detect.allocations import allocation_findings
from forensics.errors import InputError
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.torch import snapshot
from forensics.parsers.torch.snapshot_pickle import PlainUnpickler
from forensics.parsers.torch.snapshot_reader import TraceReader
from snapshots import MiB, Loop, loop

UTC = Options(tz="UTC")


def write(tmp_path: Path, snap, name="snapshot.pickle", protocol=4, compress=False) -> Path:
    data = pickle.dumps(snap, protocol=protocol)
    p = tmp_path / name
    p.write_bytes(gzip.compress(data) if compress else data)
    return p


def read(path: Path, opts: Options = UTC):
    info, results = ingest.parse_one(Source.open(path, str(path)), opts)
    return info, results[0]


def findings(parsed) -> list:
    return allocation_findings(parsed.events.with_columns(pl.lit("snap").alias("source")), parsed.samples)


def kinds(found, kind):
    return [f for f in found if f.kind == kind]


# -- layouts ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_leaking_loop_is_one_allocation_leak_and_the_weights_are_footprint(tmp_path, protocol):
    snap, truth = loop(Loop(steps=40))
    info, p = read(write(tmp_path, snap, protocol=protocol))
    assert info.format == "pytorch-memory-snapshot" and info.error is None
    found = findings(p)
    (leak,) = kinds(found, "allocation_leak")
    assert leak.allocation["site"] == "train.py:30"
    assert leak.allocation["count"] == 40 and leak.bytes == 40 * 2 * MiB
    assert leak.rate_bytes_per_step == pytest.approx(2 * MiB, rel=0.05)   # 40 Optimizer.step annotations
    (foot,) = kinds(found, "allocation_footprint")
    assert foot.allocation["sites"][0]["site"] == "model.py:10" and foot.allocation["sites"][0]["count"] == 3
    assert any("time_us" in n for n in info.notes)


def test_no_leak_no_allocation_leak(tmp_path):
    snap, _ = loop(Loop(steps=40, leak_bytes=0))
    _, p = read(write(tmp_path, snap))
    found = findings(p)
    assert not kinds(found, "allocation_leak")
    assert kinds(found, "allocation_footprint")[0].bytes == 3 * 16 * MiB


def test_allocated_is_rebuilt_backwards_from_the_dump_even_when_the_start_was_dropped(tmp_path):
    snap, truth = loop(Loop(steps=60, max_entries=300))
    info, p = read(write(tmp_path, snap))
    assert any("starts mid-run" in n for n in info.notes)
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("seq")
    got = dict(zip(alloc["seq"].to_list(), alloc["bytes"].to_list()))
    for seq, value in got.items():
        if seq:   # (seq 0 holds the value before the first change)
            assert value == truth["allocated"][seq], seq
    assert alloc["bytes"][-1] == truth["allocated_end"]


def test_outputs_kept_after_a_pause_without_annotations_are_a_leak_site(tmp_path):
    # the model is built, data loads for 60 s, then 60 steps run in well under a second, each keeping
    # its output: on the trace's clock every survivor is in its last quarter, over its entries they
    # come all through it; no Optimizer.step annotations, the steps are the trace's own rhythm
    snap, _ = loop(Loop(steps=60, annotations=False, pause_us=60_000_000))
    found = findings(read(write(tmp_path, snap))[1])
    (leak,) = kinds(found, "allocation_leak")
    assert leak.allocation["site"] == "train.py:30" and leak.allocation["survivors"] == 60
    assert leak.allocation["steps"] == 60 and leak.rate_bytes_per_step == 2 * MiB
    (foot,) = kinds(found, "allocation_footprint")
    assert [s["site"] for s in foot.allocation["sites"]] == ["model.py:10"]


def test_without_steps_a_weight_made_once_stays_footprint(tmp_path):
    # no leak, no annotations: the weights (allocated 3 times at one line before the steps) are footprint
    snap, _ = loop(Loop(steps=40, leak_bytes=0, annotations=False, pause_us=60_000_000))
    found = findings(read(write(tmp_path, snap))[1])
    assert not kinds(found, "allocation_leak") and kinds(found, "allocation_footprint")


def test_legacy_layout_blocks_with_history_and_no_time(tmp_path):
    snap, _ = loop(Loop(steps=30, era="legacy"))
    info, p = read(write(tmp_path, snap, protocol=2))
    assert any("history" in n for n in info.notes) and any("without time_us" in n for n in info.notes)
    assert p.samples["time"].null_count() == p.samples.height and info.clock == "none"
    found = findings(p)
    (leak,) = kinds(found, "allocation_leak")
    assert leak.allocation["site"] == "train.py:30" and leak.rate_bytes_per_hour is None
    # no annotations and no clock: the steps are the trace's own rhythm (train.py:20 and :30 allocate
    # once a step), so the rate per step is the truth's
    assert leak.allocation["steps"] == 30 and leak.allocation["steps_from"].startswith("the trace's own rhythm")
    assert leak.rate_bytes_per_step == 2 * MiB
    (foot,) = kinds(found, "allocation_footprint")
    assert foot.allocation["sites"][0]["site"] == "model.py:10"


@pytest.mark.parametrize("name", ["active_pending_free", "active_awaiting_free"])
def test_either_name_of_a_block_waiting_for_other_streams(tmp_path, name):
    snap, _ = loop(Loop(steps=10, pending_name=name))
    info, _ = read(write(tmp_path, snap))
    assert any(name in n for n in info.notes)


def test_expandable_segments_map_and_unmap(tmp_path):
    snap, _ = loop(Loop(steps=10, expandable=True))
    info, p = read(write(tmp_path, snap))
    reserved = p.samples.filter(pl.col("series") == "reserved")
    assert reserved.height > 10 and reserved["bytes"].n_unique() > 2
    assert any("expandable segments" in n for n in info.notes)


def test_keys_of_other_versions_are_tolerated(tmp_path):
    snap, _ = loop(Loop(steps=20, extra_keys={"pool_id": (0, 0), "user_metadata": "epoch 3"}))
    info, p = read(write(tmp_path, snap))
    assert any("pool_id" in n for n in info.notes)
    assert kinds(findings(p), "allocation_leak")


def test_an_oom_entry_is_a_gpu_oom_with_the_free_memory(tmp_path):
    snap, _ = loop(Loop(steps=10, oom=True))
    _, p = read(write(tmp_path, snap))
    (oom,) = p.events.filter(pl.col("kind") == "gpu_oom").iter_rows(named=True)
    assert oom["bytes"] == 64 * MiB and oom["time"] is not None
    assert '"device_free_bytes": 1073741824' in oom["detail"] and "train.py:21" in oom["text"]


def test_several_devices_are_labelled_by_their_ordinal(tmp_path):
    snap, _ = loop(Loop(steps=10, devices=2))
    _, p = read(write(tmp_path, snap))
    assert set(p.samples["label"].unique().to_list()) == {"cuda:0", "cuda:1"}
    assert p.samples["gpu"].null_count() == p.samples.height   # a process's ordinal is not the GPU's index


def test_a_list_of_segments_alone(tmp_path):
    snap, _ = loop(Loop(steps=10))
    info, p = read(write(tmp_path, snap["segments"], name="segments.pkl"))
    assert info.format == "pytorch-memory-snapshot"
    assert p.samples.height == 0 and p.events.filter(pl.col("kind") == "allocation_site").height


def test_a_gzipped_snapshot_reads_the_same(tmp_path):
    snap, _ = loop(Loop(steps=20))
    _, plain = read(write(tmp_path, snap))
    _, zipped = read(write(tmp_path, snap, name="snapshot.pickle.gz", compress=True))
    assert plain.samples.equals(zipped.samples) and plain.events.equals(zipped.events)


def test_evidence_lines_are_record_numbers(tmp_path):
    snap, _ = loop(Loop(steps=20, max_entries=100))   # the weights were made before the trace
    info, p = read(write(tmp_path, snap))
    entries = len(snap["device_traces"][0])
    blocks = sum(len(s["blocks"]) for s in snap["segments"])
    assert info.lines == entries + blocks and p.lines == entries + blocks
    assert p.samples["line"].max() <= entries
    sites = p.events.filter(pl.col("kind") == "allocation_site")
    # a site without survivors in the trace quotes one of its blocks, numbered after the entries
    assert sites["line"].max() > entries


# -- the trace read in runs from the bytes, or one opcode at a time ------------------------------------

def _columns(data: bytes, runs: bool):
    r = TraceReader()
    top = PlainUnpickler(io.BytesIO(data).read, 1 << 40, r.on_items, r.skip if runs else None).load()
    cols = [r.traces[id(t)][1].arrays() for t in top["device_traces"] if id(t) in r.traces]
    paths = [[r.paths.all[i].frames if i >= 0 else None for i in c["path"].tolist()] for c in cols]
    return [{k: v for k, v in c.items() if k != "path"} for c in cols], paths, r.from_bytes


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.integers(120, 260), leak=st.sampled_from([0, 3 * MiB, 5 * MiB + 12]), protocol=st.sampled_from([4, 5]),
       max_entries=st.one_of(st.none(), st.integers(1500, 3000)), oom=st.booleans(),
       extra=st.sampled_from([{}, {"pool_id": (0, 0)}, {"user_metadata": "x" * 300}]))
def test_runs_from_the_bytes_give_what_the_plain_reader_gives(steps, leak, protocol, max_entries, oom, extra):
    snap, _ = loop(Loop(steps=steps, leak_bytes=leak, max_entries=max_entries, oom=oom, extra_keys=extra))
    data = pickle.dumps(snap, protocol=protocol)
    a, pa, n_fast = _columns(data, True)
    b, pb, _ = _columns(data, False)
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x) and pa == pb
    if not extra.get("user_metadata"):   # (a 300-character string is written the long way: plain reader)
        assert n_fast > 0


def test_real_snapshots_read_the_same_both_ways():
    for name in ("snapshot_leak", "snapshot_healthy", "snapshot_legacy"):
        data = (SAMPLE_LOGS / name / "snapshot.pickle").read_bytes()
        a, pa, _ = _columns(data, True)
        b, pb, _ = _columns(data, False)
        assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x) and pa == pb, name
        assert len(a[0]["action"]) == len(pickle.loads(data)["device_traces"][0])



def test_frames_seen_for_the_first_time_all_through_the_trace_stay_a_few_entries_each():
    """A long run reaches new code all the time: an entry with a new frame is written the plain way
    (inline), and the entries after it are regular again; they come from the bytes, not a stretch of
    hundreds read one opcode at a time, and read the same as the plain reader reads them."""
    snap, _ = loop(Loop(steps=300))
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc"]
    for i, e in enumerate(allocs[::50]):   # a new frame about every 150 entries
        e["frames"] = [{"filename": "/home/me/layer.py", "line": 1000 + i, "name": "forward"}] + e["frames"]
    new = len(allocs[::50])
    data = pickle.dumps(snap, protocol=4)
    a, pa, n_fast = _columns(data, True)
    b, pb, _ = _columns(data, False)
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x) and pa == pb
    assert new > 30 and n_fast >= 0.75 * len(trace)   # (before: 11 %, 64 KiB read the slow way per new frame)

# -- the real recordings --------------------------------------------------------------------------------

def _front(name: str) -> dict:
    text = (SAMPLE_LOGS / name / "README.md").read_text()
    return dict(re.findall(r"^(\w+): (.*)$", text.split("---")[1], re.M))


def test_recorded_leak_two_sites_their_bytes_per_step_the_oom_and_the_dropped_start():
    info, p = read(SAMPLE_LOGS / "snapshot_leak" / "snapshot.pickle")
    kept = dict(x.strip().split(" ") for x in _front("snapshot_leak")["kept_bytes_per_step"].split(";"))
    found = findings(p)
    by_site = {f.allocation["site"]: f for f in kinds(found, "allocation_leak")}
    assert set(by_site) == {"torch_memory.py:94", "torch_memory.py:87"}
    for site, fn in (("torch_memory.py:94", "train_step"), ("torch_memory.py:87", "validate")):
        want = int(kept[fn])
        assert abs(by_site[site].rate_bytes_per_step - want) <= 0.25 * want, (site, by_site[site].rate_bytes_per_step)
    (oom,) = p.events.filter(pl.col("kind") == "gpu_oom").iter_rows(named=True)
    assert oom["bytes"] == 16 * MiB and "device_free_bytes" in oom["detail"]
    assert any("starts mid-run" in n for n in info.notes)
    footprint = kinds(found, "allocation_footprint")[0].allocation["sites"]
    assert footprint[0]["site"] == "torch_memory.py:111" and footprint[0]["bytes"] == 256 * MiB   # the cache


def test_recorded_healthy_has_no_allocation_leak_and_lists_its_footprint():
    _, p = read(SAMPLE_LOGS / "snapshot_healthy" / "snapshot.pickle")
    found = findings(p)
    assert not kinds(found, "allocation_leak")
    sites = {s["site"] for s in kinds(found, "allocation_footprint")[0].allocation["sites"]}
    assert {"torch_memory.py:111", "torch_memory.py:70", "torch_memory.py:101"} <= sites   # cache, weights, Adam


def test_recorded_legacy_one_site():
    _, p = read(SAMPLE_LOGS / "snapshot_legacy" / "snapshot.pickle")
    (leak,) = kinds(findings(p), "allocation_leak")
    assert leak.allocation["site"] == "torch_memory.py:166"


# -- bad input ------------------------------------------------------------------------------------------

def test_a_pickle_that_is_not_a_snapshot_says_so(tmp_path):
    p = tmp_path / "cache.pkl"
    p.write_bytes(pickle.dumps([1, 2, {"a": "b"}], protocol=4))
    with pytest.raises(InputError) as e:
        read(p)
    assert "not a PyTorch memory snapshot" in str(e.value) and "\n" not in str(e.value)


class _Boom:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_a_reduce_payload_inside_a_snapshot_never_runs(tmp_path, protocol):
    marker = tmp_path / "PWNED"
    snap, _ = loop(Loop(steps=5))
    snap["segments"][0]["blocks"][0]["frames"] = _Boom(marker)
    p = write(tmp_path, snap, protocol=protocol)
    with pytest.raises(InputError) as e:
        read(p)
    assert "not a PyTorch memory snapshot" in str(e.value) and "GLOBAL" in str(e.value)
    assert not marker.exists()


def test_the_size_cap_and_how_to_raise_it(tmp_path):
    snap, _ = loop(Loop(steps=200))
    p = write(tmp_path, snap)
    with pytest.raises(InputError) as e:
        read(p, Options(tz="UTC", max_snapshot_bytes=64 << 10))
    assert "snapshot too big" in str(e.value) and "--max-snapshot-size" in str(e.value)
    read(p, Options(tz="UTC", max_snapshot_bytes=64 << 20))


def test_a_truncated_snapshot_is_one_clean_message(tmp_path):
    data = (SAMPLE_LOGS / "snapshot_leak" / "snapshot.pickle").read_bytes()
    for cut in (3, 100, len(data) // 3, len(data) - 1):
        p = tmp_path / "cut.pickle"
        p.write_bytes(data[:cut])
        with pytest.raises(InputError) as e:
            read(p)
        assert "cannot read the snapshot" in str(e.value) or "not a PyTorch memory snapshot" in str(e.value)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=600), st.sampled_from([2, 3, 4, 5]))
def test_garbage_after_a_pickle_header_is_a_message_never_a_crash(garbage, protocol):
    src = _memory_source(bytes([0x80, protocol]) + b"}\x94(\x8c\x08segments" + garbage)
    try:
        snapshot.parse(src, UTC)
    except InputError as e:
        assert "\n" not in str(e)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 160_000))
def test_every_cut_of_a_real_snapshot_is_a_message(cut):
    data = (SAMPLE_LOGS / "snapshot_legacy" / "snapshot.pickle").read_bytes()
    src = _memory_source(data[:cut])
    try:
        snapshot.parse(src, UTC)
    except InputError as e:
        assert "\n" not in str(e)


def _memory_source(data: bytes):
    """A Source over bytes in memory (hypothesis runs too many examples for temporary files)."""
    class Mem(Source):
        def first_bytes(self):
            return data[:64 << 10]

        def open_binary(self):
            return io.BytesIO(data)

    return Mem(path="mem.pickle", real_path=Path("mem.pickle"), size=len(data), mtime=0.0)


def test_entries_and_blocks_it_cannot_read_are_counted_by_record(tmp_path):
    snap, _ = loop(Loop(steps=5, devices=2))
    snap["device_traces"][1][3] = {"action": "teleport", "addr": 1}   # an action no PyTorch writes
    snap["segments"][0]["blocks"].append("not a block")
    info, p = read(write(tmp_path, snap))
    first_of_device_1 = len(snap["device_traces"][0]) + 1
    assert info.skip_reasons[snapshot.NOT_ENTRY] == 1
    assert info.skip_examples[snapshot.NOT_ENTRY] == [first_of_device_1 + 3]
    assert info.skip_reasons["block that is not a dict"] == 1
