"""Hostile snapshot pickles (issue 45, D-P1 D-P2 D-P6): dict keys a snapshot never has are refused
before they are hashed, at once, with the byte they are at."""
from __future__ import annotations

import gzip
import struct

import pytest

from hostile_cases import pint, s8, snap_wrap
from forensics.errors import InputError
from forensics.options import Options
from forensics.io.sources import Source
from forensics.parsers.torch import snapshot


def _read(tmp_path, data: bytes):
    p = tmp_path / "snapshot.pickle"
    p.write_bytes(data)
    return snapshot.parse(Source.open(p, str(p)), Options(tz="UTC"))


@pytest.mark.parametrize("key,kind", [
    (b")" + b"\x85" * 200_000, "tuple of more"),        # D-P1: hashing it recursed in C (SIGSEGV)
    (b")" + b"2\x86" * 100, "tuple of more"),          # D-P2: a DAG, 2^100 nodes to hash
    (pint(3 * (2**61 - 1)), "integer of 63 bits"),     # D-P6: a multiple of 2^61-1 hashes to 0
])
def test_keys_a_snapshot_never_has_are_refused(tmp_path, key, kind):
    with pytest.raises(InputError) as e:
        _read(tmp_path, snap_wrap(s8("allocator_settings") + b"}(" + key + b"K\x01u"))
    assert "a dict key that a snapshot never has" in str(e.value) and kind in str(e.value)


def test_colliding_int_keys_are_refused_at_the_first(tmp_path):
    m = 2**61 - 1
    items = b"".join(pint(k * m) + b"N" for k in range(1, 20_001))
    with pytest.raises(InputError, match="never has"):
        _read(tmp_path, snap_wrap(s8("allocator_settings") + b"}(" + items + b"u"))


def test_small_int_and_name_keys_still_read(tmp_path):
    parsed = _read(tmp_path, snap_wrap(s8("allocator_settings") + b"}(" + pint(7) + b"K\x01" + s8("a") + b"Nu"))
    assert parsed is not None


@pytest.mark.parametrize("annotations", [5, 1.5, {"a": 1},
                                         [{"stage": "START", "name": "Optimizer.step#SGD", "time_us": 1 << 80, "device": 0}]])
def test_annotations_of_another_shape_are_ignored(tmp_path, annotations):
    """D-P7: an int or float as external_annotations, or a time past 64 bits, was an internal error."""
    import pickle

    from hostile_cases import valid_snapshot

    snap = valid_snapshot(50)
    snap["external_annotations"] = annotations
    parsed = _read(tmp_path, pickle.dumps(snap, protocol=4))
    assert parsed.samples.height > 0


def test_a_memo_reference_bomb_is_refused_as_it_is_walked(tmp_path):
    """D-P3: pickle's memo writes a list once and refers to it: 2,000 segments x 2,000 blocks in 8 KB
    (20,000 x 20,000 in 80 KB took more than 12 GB)."""
    import pickle

    blk = {"size": 512, "state": "active_allocated", "address": 0, "frames": []}
    seg = {"device": 0, "address": 0, "total_size": 1 << 20, "blocks": [blk] * 2000}
    with pytest.raises(InputError, match="the same lists referred to again and again"):
        _read(tmp_path, pickle.dumps({"segments": [seg] * 2000, "device_traces": []}, protocol=4))


@pytest.mark.parametrize("claim", [
    b"\x8d" + struct.pack("<Q", 1 << 60),        # BINUNICODE8 claiming 2^60 bytes
    b"\x8b" + struct.pack("<i", 2**31 - 1),      # LONG4 claiming 2^31-1 bytes
])
def test_a_length_claimed_in_a_compressed_snapshot_is_refused_before_it_is_read(tmp_path, claim):
    """D-P5: the claimed length was asked of the decompressor at once, which gathered everything up to
    it (6 GB of zeros after the claim: 6.2 GB of memory), past --max-snapshot-size."""
    p = tmp_path / "snapshot.pickle.gz"
    head = snap_wrap()[:-2]   # the dict left open: the claim is one of its values
    p.write_bytes(gzip.compress(head + s8("allocator_settings") + claim + b"\x00" * (80 << 20), mtime=0))
    with pytest.raises(InputError) as e:
        snapshot.parse(Source.open(p, str(p)), Options(tz="UTC", max_snapshot_bytes=64 << 20))
    msg = str(e.value)
    assert "snapshot too big" in msg and "claims" in msg and "--max-snapshot-size" in msg


def _traces_listed_again(times: int, entries: int) -> bytes:
    """One trace listed `times` times in device_traces: pickle's memo writes it once."""
    import pickle

    from hostile_cases import valid_snapshot

    snap = valid_snapshot(entries)
    snap["device_traces"] = snap["device_traces"] * times
    return pickle.dumps(snap, protocol=4)


def test_a_trace_listed_again_and_again_is_refused_as_it_is_walked(tmp_path):
    """D-P4: a 20,000-entry trace listed 3,000 times (2.7 MB) took more than 12 GB."""
    with pytest.raises(InputError, match="the same lists referred to again and again"):
        _read(tmp_path, _traces_listed_again(2000, 300))


def test_the_objects_budget_names_its_option(tmp_path):
    p = tmp_path / "snapshot.pickle"
    p.write_bytes(_traces_listed_again(1, 3000))
    opts = Options(tz="UTC", max_snapshot_objects=1000)
    with pytest.raises(InputError) as e:
        snapshot.parse(Source.open(p, str(p)), opts)
    assert "more than 1,000 trace entries and blocks (--max-snapshot-objects)" in str(e.value)
    assert "pass --max-snapshot-objects 4000" in str(e.value)
    opts.max_snapshot_objects = 1 << 20
    assert snapshot.parse(Source.open(p, str(p)), opts).samples.height > 0


def test_max_snapshot_objects_is_an_option():
    from forensics.cli import build_options
    from forensics.errors import UsageError

    assert build_options(None, None, None, None, max_snapshot_objects=7).max_snapshot_objects == 7
    with pytest.raises(UsageError, match="--max-snapshot-objects 0: give a count from 1 up"):
        build_options(None, None, None, None, max_snapshot_objects=0)


@pytest.mark.parametrize("where", ["block", "segment"])
def test_sizes_past_64_bits_are_refused_in_one_line(tmp_path, where):
    """D-P7: a block or segment size past 2^63 was an internal error (OverflowError) in the replay."""
    import pickle

    from hostile_cases import valid_snapshot

    snap = valid_snapshot(30)
    seg = snap["segments"][0]
    if where == "block":
        seg["blocks"][0]["size"] = 1 << 63
    else:
        seg["total_size"] = 1 << 63
    with pytest.raises(InputError, match="more than any device holds"):
        _read(tmp_path, pickle.dumps(snap, protocol=4))


@pytest.mark.parametrize("flood", [b"2" * 4_000_000, b"\x94" * 4_000_000,
                                   pytest.param(b"2" * 40_000_000, marks=pytest.mark.hostile_heavy),
                                   pytest.param(b"\x94" * 40_000_000, marks=pytest.mark.hostile_heavy)])
def test_a_dup_or_memoize_flood_is_refused_as_it_builds(tmp_path, flood):
    """P41: 40 MB of DUP (or MEMOIZE) put 40 M references on the stack (or in the memo), 1 GB, and the
    MEMOIZE ones were read one opcode at a time (10 s); pickle.dump writes neither run."""
    with pytest.raises(InputError, match="more on the stack or in the memo than a snapshot holds"):
        _read(tmp_path, snap_wrap(s8("x") + b"N" + flood))
