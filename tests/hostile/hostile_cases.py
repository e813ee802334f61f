#!/usr/bin/env python3
"""Hostile inputs for gpu-forensics: the case generator of the reliability and security pass of
2026-12-05 (issue 45), kept here so each defect it found has a test made from its case.

    python3 tests/hostile/hostile_cases.py OUT_DIR [FAMILY ...]

recreates every case under OUT_DIR/<family>/<case> (FAMILY: pickles bombs lines redos inject time
numbers scan; default all). Big cases (decompression bombs, 100k files, sparse files) are small on
disk. Keep OUT_DIR outside the repository and outside this folder's tree. Each case is named after what
it attacks; issue 45 says what each did before it was fixed. Standard library only (zstd
bombs use the `zstd` command when it is there), so it runs with any python3 >= 3.9.
"""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import pickle
import shutil
import struct
import subprocess
import sys
from pathlib import Path

# -- small helpers --------------------------------------------------------------------------------


def w(path: Path, data: bytes | str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    if mode is not None:
        os.chmod(path, mode)
    return path


def five_million_lines(folder: Path) -> Path:
    """D-L5's job folder: a step log of 5,000,000 `[step N] allocated: M MB` lines (163 MB), written in pieces."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "train.log").open("w") as f:
        for at in range(0, 5_000_000, 100_000):
            f.write("".join(f"[step {i}] allocated: {i % 977} MB\n" for i in range(at, at + 100_000)))
    return folder


def memory_cgroup(limit: int, tag: str) -> Path | None:
    """A cgroup v1 memory group limited to `limit` bytes, where this machine lets a process make one (root,
    a writable memory hierarchy); None elsewhere. A process joins it by writing its pid to `cgroup.procs`."""
    base = Path("/sys/fs/cgroup/memory")
    if os.geteuid() != 0 or not (base / "cgroup.procs").exists():
        return None
    g = base / f"gpu_forensics_{tag}_{os.getpid()}"
    try:
        g.mkdir(exist_ok=True)
        (g / "memory.limit_in_bytes").write_text(str(limit))
    except OSError:
        return None
    return g


GPU_UUID = "GPU-bc02d1d6-a25c-9e27-e55f-c95fd4aeb5eb"
CSV_HEADER = ("timestamp, index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB], "
              "memory.free [MiB]\n")


def nvsmi_row(ts: str, used: int | str, total: int | str = 81920, idx: int | str = 0,
              name: str = "NVIDIA H100 80GB HBM3", uuid: str = GPU_UUID, unit: str = "MiB") -> str:
    u = f"{used} {unit}" if isinstance(used, int) else used
    t = f"{total} {unit}" if isinstance(total, int) else total
    free = (f"{total - used} {unit}" if isinstance(used, int) and isinstance(total, int) else "[N/A]")
    return f"{ts}, {idx}, {uuid}, 00000000:3B:00.0, {name}, {t}, {u}, {free}\n"


def leak_csv(n: int = 120, start: str = "2026/11/30 04:", step_mib: int = 200, name: str = "NVIDIA H100 80GB HBM3",
             uuid: str = GPU_UUID) -> str:
    """A plain linear leak, one reading per second (minutes:seconds after `start`)."""
    rows = [CSV_HEADER]
    for i in range(n):
        rows.append(nvsmi_row(_ts(start, i), 1000 + step_mib * i, name=name, uuid=uuid))
    return "".join(rows)


def _ts(start: str, i: int) -> str:
    # start like "2026/11/30 04:" -> minutes/seconds from i
    return f"{start}{i // 60:02d}:{i % 60:02d}.000"


def train_log(n: int = 60) -> str:
    return "".join(f"2026-11-30 04:00:{i:02d},000 INFO train: [step {i}] allocated: {500 + 50 * i}.00 MB, "
                   f"cached: {1024 + 64 * i}.00 MB\n" for i in range(n))


TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total "
             "capacity of 79.10 GiB of which 12.00 MiB is free. Including non-PyTorch memory, this process has "
             "79.08 GiB memory in use. Of the allocated memory 77.50 GiB is allocated by PyTorch, and 1.20 GiB "
             "is reserved by PyTorch but unallocated.\n")


# -- pickle helpers -------------------------------------------------------------------------------

def s8(s: str) -> bytes:
    b = s.encode("utf-8")
    return (b"\x8c" + bytes([len(b)]) + b) if len(b) < 256 else (b"X" + struct.pack("<I", len(b)) + b)


def pint(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if 0 <= n < 65536:
        return b"M" + struct.pack("<H", n)
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    if len(raw) < 256:
        return b"\x8a" + bytes([len(raw)]) + raw
    return b"\x8b" + struct.pack("<i", len(raw)) + raw


def snap_wrap(extra_items: bytes = b"", segments: bytes = b"]", traces: bytes = b"]", proto: int = 4) -> bytes:
    """A snapshot dict {segments: ..., device_traces: ..., <extra>}; its keys come first so the tool
    claims it as a memory snapshot."""
    return (b"\x80" + bytes([proto]) + b"}(" + s8("segments") + segments + s8("device_traces") + traces
            + extra_items + b"u.")


def valid_snapshot(n_entries: int = 400, frames_file: str = "train.py") -> dict:
    """A plausible snapshot as torch.cuda.memory._snapshot() returns it: one segment, a trace that leaks."""
    fr = [{"filename": frames_file, "line": 42, "name": "step"},
          {"filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1, "name": "_call_impl"}]
    t0 = 1_764_475_200_000_000  # 2025-11-30 in microseconds
    trace, live = [{"action": "segment_alloc", "addr": 1 << 32, "size": 1 << 30, "stream": 0, "time_us": t0, "frames": fr}], []
    for i in range(n_entries):
        a = (1 << 32) + i * 4096
        trace.append({"action": "alloc", "addr": a, "size": 4096, "stream": 0, "time_us": t0 + 1000 * i, "frames": fr})
        if i % 3:
            trace.append({"action": "free_requested", "addr": a, "size": 4096, "stream": 0, "time_us": t0 + 1000 * i + 1,
                          "frames": fr})
            trace.append({"action": "free_completed", "addr": a, "size": 4096, "stream": 0, "time_us": t0 + 1000 * i + 2,
                          "frames": fr})
        else:
            live.append({"size": 4096, "requested_size": 4096, "state": "active_allocated", "address": a, "frames": fr})
    seg = {"device": 0, "address": 1 << 32, "total_size": 1 << 30, "allocated_size": 4096 * len(live),
           "active_size": 4096 * len(live), "stream": 0, "segment_type": "large", "blocks": live}
    return {"segments": [seg], "device_traces": [trace]}


class Evil:
    """What a hostile snapshot carries: pickle.dumps writes GLOBAL/STACK_GLOBAL + REDUCE for it."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class EvilNew:
    """NEWOBJ (protocol 2+) with a BUILD of state."""

    def __init__(self):
        self.x = 1

    def __reduce_ex__(self, proto):
        import copyreg
        return (copyreg.__newobj__, (EvilNew,), {"x": 1})


def pickles(out: Path) -> None:
    d = out / "pickles"
    marker_dir = d / "markers"
    marker_dir.mkdir(parents=True, exist_ok=True)

    # P01-P24: real pickle.dumps of a snapshot carrying a code-running object, protocols 2-5 (0/1 do not
    # start with PROTO: the tool does not claim them as snapshots, they are read as text), at three depths
    for proto in range(0, 6):
        for depth in ("top", "block", "deep60"):
            marker = marker_dir / f"PWNED-reduce-p{proto}-{depth}"
            snap = valid_snapshot(50)
            evil = Evil(str(marker))
            if depth == "top":
                snap["allocator_settings"] = evil
            elif depth == "block":
                snap["segments"][0]["blocks"][0]["frames"][0]["name"] = evil
            else:
                x: object = evil
                for _ in range(60):
                    x = [x]
                snap["segments"][0]["blocks"][0]["extra"] = x
            w(d / f"reduce_p{proto}_{depth}.pickle", pickle.dumps(snap, protocol=proto))
        snap = valid_snapshot(50)
        snap["segments"][0]["blocks"][0]["obj"] = EvilNew()
        w(d / f"newobj_build_p{proto}.pickle", pickle.dumps(snap, protocol=proto))
    # hand-made opcodes at top level of a valid snapshot, protocol 4: INST, OBJ, NEWOBJ_EX, BUILD,
    # EXT1, PERSID, BINPERSID, NEXT_BUFFER (p5), GLOBAL+REDUCE of builtins.eval
    mk = str(marker_dir / "PWNED-handmade")
    cmd = f"touch {mk}".encode()
    hand = {
        "inst": b"(V" + cmd + b"\nios\nsystem\n",
        "obj": b"(cos\nsystem\nV" + cmd + b"\no",
        "global_reduce_eval": b"cbuiltins\neval\n(V__import__('os').system('" + cmd + b"')\ntR",
        "stack_global": s8("os") + s8("system") + b"\x93" + s8(cmd.decode()) + b"\x85R",
        "newobj_ex": s8("builtins") + s8("object") + b"\x93)}\x92",
        "build": b"}}b",
        "ext1": b"\x82\x01",
        "persid": b"Pfoo\n",
        "binpersid": s8("foo") + b"Q",
        "next_buffer": b"\x97",
        "readonly_buffer": b"\x98",
        "binbytes8_2p60": b"\x8e" + struct.pack("<Q", 1 << 60),
    }
    for name, payload in hand.items():
        w(d / f"op_{name}.pickle", snap_wrap(s8("x") + payload, proto=5 if "buffer" in name else 4))
    # the same opcodes 50 lists deep inside a block
    for name in ("inst", "obj", "stack_global", "build"):
        seg = b"]}(" + s8("blocks") + b"]" + b"(" * 50 + b"]" + hand[name] + b"a" + b"l" * 50 + b"a" + b"u" + b"a"
        w(d / f"deep_op_{name}.pickle", snap_wrap(segments=seg))

    # P30: memo bomb, segments x blocks: [seg] * K where seg.blocks = [blk] * K (K*K blocks from ~4K bytes)
    for k in (2_000, 20_000):
        blk = {"size": 4096, "state": "active_allocated", "address": 1 << 32}
        seg = {"device": 0, "address": 1 << 32, "total_size": 1 << 30, "blocks": [blk] * k}
        w(d / f"memo_bomb_segments_{k}x{k}.pickle", pickle.dumps({"segments": [seg] * k, "device_traces": []}, protocol=4))
    # P31: one trace list referenced by every device: device_traces = [trace] * K
    snap = valid_snapshot(20_000)
    snap["device_traces"] = snap["device_traces"] * 3000
    w(d / "memo_bomb_device_traces_3000.pickle", pickle.dumps(snap, protocol=4))
    # P32: exponential list DAG (L_i = [L_{i-1}, L_{i-1}], 200 levels) as a block's frames and as extra keys
    x = []
    for _ in range(200):
        x = [x, x]
    snap = valid_snapshot(50)
    snap["segments"][0]["blocks"][0]["frames"] = x
    snap["external_annotations"] = x
    snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "a", "x": x}
    w(d / "list_dag_200.pickle", pickle.dumps(snap, protocol=4))
    # P33: tuple DAG (t_i = (t_{i-1}, t_{i-1}), 100 levels) as a dict key: hashing it walks 2^100 nodes
    key = b")" + b"2\x86" * 100
    w(d / "tuple_dag_key_100.pickle", snap_wrap(s8("allocator_settings") + b"}(" + key + b"K\x01u"))
    # P34: a tuple nested 200k deep as a dict key (hash recursion in C)
    key = b")" + b"\x85" * 200_000
    w(d / "deep_tuple_key_200k.pickle", snap_wrap(s8("allocator_settings") + b"}(" + key + b"K\x01u"))
    # P35/P36: 100k nested lists and dicts as values
    w(d / "deep_list_100k.pickle", snap_wrap(s8("x") + b"(" * 100_000 + b"]" + b"l" * 100_000))
    w(d / "deep_dict_100k.pickle", snap_wrap(s8("x") + (b"}(" + s8("a")) * 100_000 + b"N" + b"u" * 100_000))
    # 1M deep list as the segments list itself
    w(d / "deep_list_segments_1m.pickle", snap_wrap(segments=b"(" * 1_000_000 + b"]" + b"l" * 1_000_000))
    # P37: huge claimed lengths
    w(d / "binunicode8_2p60.pickle", snap_wrap(s8("x") + b"\x8d" + struct.pack("<Q", 1 << 60) + b"abc"))
    w(d / "binunicode_4g.pickle", snap_wrap(s8("x") + b"X" + struct.pack("<I", 0xFFFFFFFF) + b"abc"))
    w(d / "long4_2g.pickle", snap_wrap(s8("x") + b"\x8b" + struct.pack("<i", 2**31 - 1) + b"\x01" * 16))
    w(d / "frame_2p60.pickle", b"\x80\x04\x95" + struct.pack("<Q", 1 << 60) + snap_wrap()[2:])
    # BINUNICODE8 claiming 2^60 bytes in a .gz whose stream goes on with 6 GB of zeros (6 MB on disk):
    # the read asked for is not bounded by --max-snapshot-size
    head = snap_wrap(s8("x") + b"\x8d" + struct.pack("<Q", 1 << 60))[:-2]
    _gzip_bomb(d / "binunicode8_2p60_then_6GB.pickle.gz", head, b"\0", 6 << 30)
    _gzip_bomb(d / "long4_2g_then_6GB.pickle.gz", snap_wrap(s8("x") + b"\x8b" + struct.pack("<i", 2**31 - 1))[:-2],
               b"\0", 6 << 30)
    # P38: LONG4 ints where the tool computes with them
    big = 1 << 100_000
    snap = valid_snapshot(50)
    snap["segments"][0]["blocks"][0]["size"] = big
    w(d / "long4_block_size.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["segments"][0]["total_size"] = big
    w(d / "long4_total_size.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(0)
    snap["device_traces"] = []
    snap["segments"][0]["blocks"] = [{"size": 2**64, "state": "active_allocated", "address": 2**70}]
    w(d / "block_2p64_no_trace.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["segments"][0]["blocks"][0]["size"] = 2**63
    w(d / "block_2p63_with_trace.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["external_annotations"] = [{"stage": "START", "name": "Optimizer.step#SGD", "time_us": 1 << 80, "device": 0}]
    w(d / "annotation_time_2p80.pickle", pickle.dumps(snap, protocol=4))
    for name, val in (("int", 5), ("none_device", [{"stage": "START", "name": "Optimizer.step", "time_us": 1,
                                                     "device": None}]), ("dict", {"a": 1}), ("float", 1.5)):
        snap = valid_snapshot(50)
        snap["external_annotations"] = val
        w(d / f"annotations_{name}.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["segments"][0]["device"] = 2**70
    w(d / "segment_device_2p70.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["segments"][0]["device"] = -5
    snap["segments"][0]["address"] = -(1 << 70)
    w(d / "segment_device_negative.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["device_traces"][0][3]["time_us"] = 1 << 62
    snap["device_traces"][0][4]["time_us"] = -(1 << 62)
    w(d / "trace_time_extremes.pickle", pickle.dumps(snap, protocol=4))
    snap = valid_snapshot(50)
    snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "<script>alert(1)</script>"}
    for e in snap["device_traces"][0]:
        e["frames"] = [{"filename": "<img src=x onerror=alert(1)>.py", "line": 1, "name": "<script>alert(2)</script>"}]
    w(d / "html_in_frames.pickle", pickle.dumps(snap, protocol=4))
    # P39: protocol 6, truncated, empty, non-snapshot pickles
    w(d / "proto6.pickle", b"\x80\x06" + snap_wrap()[2:])
    full = pickle.dumps(valid_snapshot(2000), protocol=5)
    w(d / "truncated_half.pickle", full[: len(full) // 2])
    w(d / "truncated_in_frame_header.pickle", full[:11])
    w(d / "proto5_frames_corrupt_len.pickle", full[:2] + b"\x95" + struct.pack("<Q", 3) + full[11:])
    # P40: int keys that all hash to 0 (hash(k * (2**61 - 1)) == 0): quadratic dict building
    m = 2**61 - 1
    for n in (30_000, 60_000, 120_000):
        items = b"".join(pint(k * m) + b"N" for k in range(1, n + 1))
        w(d / f"int_hash_collision_{n // 1000}k.pickle", snap_wrap(s8("allocator_settings") + b"}(" + items + b"u"))
    # float/str keys fine; NaN keys
    # P41: DUP / MEMOIZE floods (bounded by the reader's checks?)
    w(d / "dup_flood_40M.pickle", snap_wrap(s8("x") + b"N" + b"2" * 40_000_000 + b"t"))
    w(d / "memoize_flood_40M.pickle", snap_wrap(s8("x") + b"N" + b"\x94" * 40_000_000))
    # P42: a list that holds itself, a dict that holds itself (reference cycles)
    lst: list = []
    lst.append(lst)
    snap = valid_snapshot(50)
    snap["segments"].append({"blocks": lst, "device": 0})
    snap["segments"][0]["blocks"][0]["frames"] = lst
    w(d / "self_reference.pickle", pickle.dumps(snap, protocol=4))
    # P43: byte-flip fuzz of a real snapshot (the sample of the repository when run from it)
    base = pickle.dumps(valid_snapshot(3000), protocol=4)
    import random
    rnd = random.Random(20261205)
    for i in range(40):
        b = bytearray(base)
        for _ in range(rnd.choice((1, 4, 32))):
            b[rnd.randrange(40, len(b))] = rnd.randrange(256)
        w(d / "fuzz" / f"flip_{i:02d}.pickle", bytes(b))


def _repeat(head: bytes, unit: bytes, total: int, tail: bytes, compress, block_bytes: int = (64 << 20) - 4096) -> tuple:
    """head, `total` bytes of `unit` repeated, tail: as concatenated compressed members (gzip -c >>,
    xz and bz2 streams, zstd frames), one member per block compressed once and written many times
    (quick to make, and a concatenation is what the tool claims to read)."""
    block = unit * max(1, block_bytes // len(unit))
    full, rest = divmod(total, len(block))
    one = compress(block)
    parts = [compress(head)] if head else []
    return parts, one, full, (compress(block[:rest]) if rest else b""), (compress(tail) if tail else b"")


def _write_bomb(path: Path, compress, head: bytes, unit: bytes, total: int, tail: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    parts, one, full, rest, end = _repeat(head, unit, total, tail, compress)
    with open(path, "wb") as fh:
        for p in parts:
            fh.write(p)
        for _ in range(full):
            fh.write(one)
        fh.write(rest)
        fh.write(end)


def _gzip_bomb(path: Path, head: bytes, unit: bytes, total: int, tail: bytes = b"") -> None:
    """One gzip member (a multi-member stream trips the tool's gzip reader, see report.md): deflate
    blocks ended by a full flush are self-contained, so one block of 64 MiB is compressed once and
    repeated; the trailer's CRC is computed over everything."""
    import zlib
    path.parent.mkdir(parents=True, exist_ok=True)
    block = unit * max(1, ((64 << 20) - 4096) // len(unit))
    full, rest = divmod(total, len(block))

    def deflate(b: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(b) + c.flush(zlib.Z_FULL_FLUSH)

    one = deflate(block)
    crc, size = 0, 0
    with open(path, "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        for piece in (head,):
            if piece:
                fh.write(deflate(piece))
                crc, size = zlib.crc32(piece, crc), size + len(piece)
        for _ in range(full):
            fh.write(one)
            crc, size = zlib.crc32(block, crc), size + len(block)
        for piece in (block[:rest], tail):
            if piece:
                fh.write(deflate(piece))
                crc, size = zlib.crc32(piece, crc), size + len(piece)
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        fh.write(c.flush(zlib.Z_FINISH))
        fh.write(struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF))


def _xz_bomb(path: Path, head: bytes, unit: bytes, total: int) -> None:
    _write_bomb(path, lambda b: lzma.compress(b, preset=9), head, unit, total)


def _bz2_bomb(path: Path, head: bytes, unit: bytes, total: int) -> None:
    _write_bomb(path, lambda b: bz2.compress(b, compresslevel=9), head, unit, total)


def _zstd_rle_bomb(path: Path, byte: int, total: int) -> None:
    """A zstd frame of RLE blocks written by hand: 4 bytes per 128 KiB of output (no library needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = bytearray(b"\x28\xb5\x2f\xfd")
    out += bytes([0x00])            # frame header descriptor: no content size, no checksum, window follows
    out += bytes([0x58])            # window descriptor: 2^(10+11) = 2 MiB window
    block = 128 << 10
    n = total // block
    # block header: last(1 bit) | type (2 bits: 1 = RLE) | size (21 bits)
    hdr = lambda last: ((block << 3) | (1 << 1) | last).to_bytes(3, "little")
    with open(path, "wb") as fh:
        fh.write(out)
        chunk = (hdr(0) + bytes([byte])) * 65536
        left = n - 1
        while left > 0:
            k = min(left, 65536)
            fh.write(chunk[: 4 * k])
            left -= k
        fh.write(hdr(1) + bytes([byte]))


def bombs(out: Path) -> None:
    d = out / "bombs"
    line = nvsmi_row("2026/11/30 04:00:00.000", 1000).encode()
    # B01: 12 GB of one repeated CSV row behind a header (.gz 12 MB)
    _gzip_bomb(d / "csv_row_12GB" / "nvidia-smi.csv.gz", CSV_HEADER.encode(), line, 12 << 30)
    # B02: 12 GB without one newline
    _gzip_bomb(d / "one_line_12GB" / "train.log.gz", b"[step 1] allocated: 1 MB", b"A", 12 << 30)
    # B03: 12 GB of newlines only
    _gzip_bomb(d / "newlines_12GB" / "train.log.gz", b"", b"\n", 12 << 30)
    # B04: zstd RLE blocks: 20 GB of 'A' (no newline) from 640 KB; and 20 GB of '\n'
    _zstd_rle_bomb(d / "zstd_rle_A_20GB" / "train.log.zst", ord("A"), 20 << 30)
    _zstd_rle_bomb(d / "zstd_rle_nl_20GB" / "train.log.zst", ord("\n"), 20 << 30)
    # B05: xz and bz2 of 4 GB one line
    _xz_bomb(d / "xz_one_line_4GB" / "train.log.xz", b"x", b"A", 4 << 30)
    _bz2_bomb(d / "bz2_one_line_4GB" / "train.log.bz2", b"x", b"A", 4 << 30)
    # B06: multi-member gzip (gzip -c a >> b): 3 members, each a third of a valid CSV
    csv = leak_csv(180).encode()
    third = len(csv) // 3
    cut = [0, csv.index(b"\n", third) + 1, csv.index(b"\n", 2 * third) + 1, len(csv)]
    w(d / "multi_member" / "nvidia-smi.csv.gz", b"".join(gzip.compress(csv[a:b]) for a, b in zip(cut, cut[1:])))
    # B07: corrupt tail (last 100 bytes garbage), truncated stream, garbage after the stream, NUL padding
    good = gzip.compress(csv)
    w(d / "corrupt_tail" / "nvidia-smi.csv.gz", good[:-100] + os.urandom(100))
    w(d / "truncated" / "nvidia-smi.csv.gz", good[: len(good) // 2])
    w(d / "garbage_after" / "nvidia-smi.csv.gz", good + b"garbage that is not gzip")
    w(d / "nul_padding" / "nvidia-smi.csv.gz", good + b"\0" * 10000)
    w(d / "only_gzip_header" / "nvidia-smi.csv.gz", good[:10])
    w(d / "zero_len_gz" / "nvidia-smi.csv.gz", b"")
    w(d / "zstd_truncated" / "nvidia-smi.csv.zst", _zstd_compress(csv)[:-20] if shutil.which("zstd") else b"\x28\xb5\x2f\xfd")
    w(d / "xz_truncated" / "nvidia-smi.csv.xz", lzma.compress(csv)[:-30])
    w(d / "bz2_truncated" / "nvidia-smi.csv.bz2", bz2.compress(csv)[:-30])
    # B08: gzip inside gzip (a .gz of a .gz): the inner one is read as text?
    w(d / "gz_in_gz" / "nvidia-smi.csv.gz", gzip.compress(gzip.compress(csv)))
    # B09: a Prometheus JSON document of 1.9 GB (mostly spaces) in 2 MB of gzip: read whole
    head = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"0"},"values":[[1764475200,"1000"]]}]}'
    _gzip_bomb(d / "prom_json_1_9GB" / "prom.json.gz", head[:-1], b" ", 1900 << 20, tail=b"}")
    # B11: gzip members whose decompressed size is a multiple of 4 MiB (the tool's read size): two members
    # of 8 MiB each (40 KB on disk), and an 8 MiB member followed by 1000 distinct step lines
    def exact(n: int, unit: bytes) -> bytes:
        b = unit * (n // len(unit))
        return b + b"\n" * (n - len(b))
    w(d / "gz_members_8MiB_x2" / "train.log.gz", gzip.compress(exact(8 << 20, b"[step 1] allocated: 1 MB\n"))
      + gzip.compress(exact(8 << 20, b"[step 2] allocated: 2 MB\n")))
    m1 = exact(8 << 20, b"# padding line of a log\n")
    m2 = b"".join(b"[step %d] allocated: %d MB\n" % (i, 100 + i) for i in range(1000))
    w(d / "gz_member_8MiB_then_steps" / "train.log.gz", gzip.compress(m1) + gzip.compress(m2))
    w(d / "gz_member_8MiB_then_steps_plain" / "train.log", m1 + m2)
    # B10: event lines repeated: CUDA OOM messages (6 GB and 500 MB), Xid lines (500 MB: a GPU that fell
    # off the bus repeats its Xid for days)
    _gzip_bomb(d / "oom_lines_6GB" / "stderr.log.gz", b"", TORCH_OOM.encode(), 6 << 30)
    _gzip_bomb(d / "oom_lines_500MB" / "stderr.log.gz", b"", TORCH_OOM.encode(), 500 << 20)
    xid = (b"Nov 30 04:01:01 host kernel: [ 101.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, "
           b"GPU has fallen off the bus.\n")
    _gzip_bomb(d / "xid_lines_500MB" / "kern.log.gz", b"", xid, 500 << 20)
    # B12: many short lines that are skipped: blank lines alone (plain 64 and 128 MB; 256 MB in gzip), a
    # good CSV followed by 1 GB of blank lines, a good CSV followed by 256 MB of "x" lines
    for mb in (64, 128):
        w(d / f"blank_lines_{mb}MB" / "train.log", b"\n" * (mb << 20))
    _gzip_bomb(d / "blank_lines_256MB_gz" / "train.log.gz", b"", b"\n", 256 << 20)
    _gzip_bomb(d / "csv_then_1GB_blank" / "nvidia-smi.csv.gz", leak_csv(120).encode(), b"\n", 1 << 30)
    _gzip_bomb(d / "csv_then_256MB_x_lines" / "nvidia-smi.csv.gz", leak_csv(120).encode(), b"x\n", 256 << 20)


def _zstd_compress(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


def lines(out: Path) -> None:
    d = out / "lines"
    base = leak_csv(120)
    # L01: a 100 MB line without newline, alone and in the middle of a good CSV
    w(d / "line_100MB_alone" / "train.log", b"[step 1] allocated: 1 MB " + b"x" * (100 << 20))
    w(d / "line_100MB_middle" / "nvidia-smi.csv", base[:2000].rsplit("\n", 1)[0] + "\n" + "9" * (100 << 20) + "\n"
      + base[2000:].split("\n", 1)[1])
    # a line just under / over the 1 MiB limit, multibyte (4 MB of bytes, 1M chars)
    w(d / "line_1MiB_chars_4MB_bytes" / "train.log", "[step 1] allocated: 1 MB " + "\U0001F600" * ((1 << 20) - 30) + "\n" + train_log())
    # L02: NUL bytes: runs, inside lines, a file of only NULs, a sparse 20 GB file of NULs
    w(d / "nul_runs" / "nvidia-smi.csv", base[:3000] + "\0" * 50000 + base[3000:])
    w(d / "nul_inside_lines" / "nvidia-smi.csv", base.replace(", ", ",\0 "))
    w(d / "only_nuls" / "train.log", b"\0" * 100000)
    p = d / "sparse_20GB" / "kern.log"
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "wb") as fh:
        fh.truncate(20 << 30)
    # L03: invalid UTF-8 (lone continuation bytes, overlongs, surrogates) in every line
    bad = "".join(ln[:-1] + "\udcff\udcc0\udc80\n" for ln in base.splitlines(keepends=True)).encode("utf-8", "surrogateescape")
    w(d / "invalid_utf8" / "nvidia-smi.csv", bad)
    w(d / "latin1" / "nvidia-smi.csv", base.replace("NVIDIA", "NVIDIA\u00e9").encode("latin-1"))
    # L04: UTF-16 LE/BE with BOM, UTF-16 without BOM, UTF-8 BOM, UTF-32
    w(d / "utf16le_bom" / "nvidia-smi.csv", b"\xff\xfe" + base.encode("utf-16-le"))
    w(d / "utf16be_bom" / "nvidia-smi.csv", b"\xfe\xff" + base.encode("utf-16-be"))
    w(d / "utf16le_nobom" / "nvidia-smi.csv", base.encode("utf-16-le"))
    w(d / "utf8_bom" / "nvidia-smi.csv", b"\xef\xbb\xbf" + base.encode())
    w(d / "utf32_bom" / "nvidia-smi.csv", base.encode("utf-32"))
    w(d / "utf16_odd_length" / "nvidia-smi.csv", b"\xff\xfe" + base.encode("utf-16-le") + b"\x41")
    # L05: line endings
    w(d / "crlf" / "nvidia-smi.csv", base.replace("\n", "\r\n"))
    w(d / "cr_only" / "nvidia-smi.csv", base.replace("\n", "\r"))
    w(d / "cr_only_train" / "train.log", train_log().replace("\n", "\r"))
    w(d / "mixed_eol" / "nvidia-smi.csv", "".join(ln + ("\r\n", "\n", "\r", "\n\r")[i % 4] for i, ln in enumerate(base.splitlines())))
    w(d / "no_final_newline" / "nvidia-smi.csv", base.rstrip("\n"))
    w(d / "progress_bar_cr" / "train.log", "".join(f"epoch 1: {i}%|####| [step {i}] allocated: {i} MB\r" for i in range(100)) + "\n")
    # L06: control characters / ANSI colours in an otherwise good step log
    w(d / "ansi_colored" / "train.log", "".join(f"\x1b[32m{ln}\x1b[0m\n" for ln in train_log().splitlines()))
    w(d / "vt_ff_bs" / "train.log", train_log().replace(" ", "\x0b", 3).replace("INFO", "IN\bFO"))
    # L07: 100k tiny files in one job folder
    many = d / "many_files_100k"
    many.mkdir(parents=True, exist_ok=True)
    for i in range(100_000):
        (many / f"f{i:06d}.log").write_text(f"[step {i}] allocated: {i} MB\n")
    for n in (250, 500, 1000, 4000):
        for i in range(n):
            w(d / f"many_files_{n}" / f"f{i:06d}.log", f"[step {i}] allocated: {i} MB\n")
    # L08: a file of 5 million short lines (each a step marker)
    five_million_lines(d / "five_million_lines")
    # L11: 200 blank lines before a good CSV / step log (199 as the control)
    for n in (199, 200):
        w(d / f"blank_head_{n}" / "nvidia-smi.csv", "\n" * n + base)
        w(d / f"blank_head_{n}" / "train.log", "\n" * n + train_log())
    # L09: empty, whitespace-only, one newline, a single byte
    w(d / "empty" / "nvidia-smi.csv", b"")
    w(d / "spaces_only" / "train.log", b" \t \n" * 10000)
    w(d / "header_only" / "nvidia-smi.csv", CSV_HEADER)
    # L10: binary look-alikes: ELF / zip / png header followed by text
    w(d / "png_then_text" / "train.log", b"\x89PNG\r\n\x1a\n" + train_log().encode())
    w(d / "random_bytes" / "train.log", os.urandom(1 << 20))
    # special files made by the script: FIFO, links
    s = d / "special"
    s.mkdir(parents=True, exist_ok=True)
    for name in ("fifo",):
        try:
            os.mkfifo(s / name)
        except FileExistsError:
            pass
    for name, target in (("devzero", "/dev/zero"), ("devurandom", "/dev/urandom"), ("devnull", "/dev/null"),
                         ("self_loop", "self_loop"), ("dangling", "does-not-exist"),
                         ("proc_kmsg", "/proc/kmsg"), ("proc_self_mem", "/proc/self/mem")):
        try:
            os.symlink(target, s / name)
        except FileExistsError:
            pass
    # unreadable (exercised as a non-root user: chmod 000 file and a folder without x)
    w(d / "unreadable" / "nvidia-smi.csv", base, mode=0o000)
    w(d / "untraversable" / "inner" / "nvidia-smi.csv", base)
    os.chmod(d / "untraversable" / "inner", 0o600)
    # a file another process keeps appending to while it is read: tools/grow.sh-like, done by the runner


def redos(out: Path) -> None:
    d = out / "redos"
    n = 200_000
    cases = {
        # grafana: a selector header cell of letters without `=`: exporters._LABEL_PAIR.findall is O(n^2)
        "grafana_label_letters": '"Time","DCGM_FI_DEV_FB_USED{' + "a" * n + '}"\n1764475200000,1000\n',
        "grafana_label_letters_1m": '"Time","DCGM_FI_DEV_FB_USED{' + "a" * ((1 << 20) - 100) + '}"\n1764475200000,1000\n',
        "grafana_label_eq_quotes": '"Time","DCGM_FI_DEV_FB_USED{' + 'a="\\' * (n // 4) + '}"\n1764475200000,1000\n',
        "digits": "1" * n + "\n",
        "spaces_then_x": " " * n + "x\n",
        "rank_prefixes": "[rank1]:" * (n // 8) + " [step 1] allocated: 1 MB\n",
        "default_prefixes": "[default1]:" * (n // 11) + "x\n",
        "nested_brackets": "[" * n + "step 1" + "]" * n + "\n",
        "mib_seq": "1 MiB " * (n // 6) + "\n",
        "mib_no_space": "1MiB" * (n // 4) + "x\n",
        "memory_words": "allocated: " * (n // 11) + "\n",
        "nccl_error_spaces": "NCCL error: " + " " * n + "x\n",
        "query_gpu_spaces": "nvidia-smi --query-gpu= " + " " * n + "!\n",
        "legacy_symbol": "========= Leaked 1 bytes at 0x7f\n=========     Saved host backtrace up to driver entry point\n"
                         "=========     Host Frame:" + " (" * (n // 2) + "\n",
        "sanitizer_frame_spaces": "========= Leaked 1 bytes at 0x7f\n=========     Host Frame:" + " " * n + "x\n",
        "json_row_key": '{' + '"key": "' * (n // 8) + "\n",
        "wandb_hint": "{" + '"system.gpu.' * (n // 12) + "\n",
        "oom_tried": ("CUDA out of memory. Tried to allocate " + "1" * n + " MiB\n"),
        "oom_repeat": "CUDA out of memory. Tried to allocate 1.00 MiB " * (n // 48) + "\n",
        "kernel_prefix": "[" + " " * n + "1.000000] x\n",
        "kernel_oom_words": "Killed process 1 (" + "(" * n + ") total-vm:1kB\n",
        "xid_long": "NVRM: Xid (PCI:0000:01:00): 79, pid=" + "1" * n + ", name=" + "a" * n + "\n",
        "memstats_keys": "{'active.all.allocated': " + "1, 'a': " * (n // 8) + "\n",
        "megatron": "[Rank 0] (after 1 iterations) memory (MB) | allocated: " + "1 | " * (n // 4) + "\n",
        "deepspeed": "[2026-01-01 00:00:00,000] [INFO] [utils.py:1:see_memory_usage] MA " + "1.0 GB " * (n // 7) + "\n",
        "torchrun_rank": "[rank" + "1" * n + "]: x\n",
        "step_marker_long_num": "[step 1] allocated: " + "9" * n + " MB, cached: 1 MB\n",
        "pipes": "| " * (n // 2) + "\n",
        "table_row": "|   0  NVIDIA H100" + " " * n + "|\n",
        "dmon_hash": "# gpu " + "x " * (n // 2) + "\n",
        "prom_key_no_end": '{"resultType":"matrix","data":{"result":[' + '{"values":[' * (n // 12) + "\n",
    }
    for name, text in cases.items():
        w(d / name / "train.log", text)
    # each hostile line also inside a file after a valid nvidia-smi header (other parsers' paths)
    for name in ("digits", "mib_seq", "spaces_then_x", "pipes", "nested_brackets"):
        w(d / (name + "_in_csv") / "nvidia-smi.csv", CSV_HEADER + nvsmi_row("2026/11/30 04:00:00.000", 1) + cases[name])
    # (a header cell over 131 072 characters is not claimed as Grafana: the csv module's field limit)
    w(d / "grafana_label_letters_csv" / "panel.csv", cases["grafana_label_letters"])
    w(d / "grafana_label_letters_1m_csv" / "panel.csv", cases["grafana_label_letters_1m"])
    # the confirmed slow lines, at sizes that show the growth (see report.md for the timings)
    for n in (1000, 2000, 3000, 20000):   # nvsmi GPU_QUERY_RE: cubic in a run of blanks after --query-gpu=
        w(d / f"query_gpu_prompt_{n}" / "nvidia-smi.csv", "$ nvidia-smi --query-gpu= " + " " * n + "!\n")
        w(d / f"query_apps_prompt_{n}" / "apps.csv", "$ nvidia-smi --query-compute-apps= " + " " * n + "!\n")
    for n in (20000, 40000, 130000):      # grafana header cell: exporters._LABEL_PAIR.findall is quadratic
        w(d / f"grafana_label_{n}" / "panel.csv", '"Time","DCGM_FI_DEV_FB_USED{' + "a" * n + '}"\n'
          "1764475200000,1000\n1764475215000,1100\n")
    cells = ",".join('"DCGM_FI_DEV_FB_USED{' + chr(97 + i) * 130000 + '}"' for i in range(7))
    w(d / "grafana_label_7x130000" / "panel.csv", '"Time",' + cells + "\n1764475200000" + ",1000" * 7 + "\n")
    for n in (8000, 30000, 200000):       # torch-distributed scanner: _NCCL_ERROR on blanks, any log
        w(d / f"nccl_error_blanks_{n}" / "train.log", "[step 1] allocated: 1 MB\nNCCL error: " + " " * n
          + "x\n[step 2] allocated: 2 MB\n")
    for n in (200_000, (1 << 20) - 64):   # mlflow sniff: _JSON_ROW on the first line of every file
        w(d / f"json_row_first_line_{n}" / "metrics.jsonl", "{" + '"key": "' * (n // 8) + "\n")
    w(d / "path_cell_100k" / "gpu.csv", "0, " + "a/" * 50000 + " x, 1\n")   # nvsmi sniff: cell_kind path pattern
    w(d / "sanitizer_legacy_symbol_100k" / "sanitizer.log",   # sanitizer frame: _LEGACY_SYMBOL
      "========= COMPUTE-SANITIZER\n========= Leaked 1024 bytes at 0x7f0000000000\n"
      "=========     Saved host backtrace up to driver entry point at cudaMalloc\n"
      "=========     Host Frame:m" + " (" * 50000 + ") [0x1234]\n=========\n"
      "========= LEAK SUMMARY: 1024 bytes leaked in 1 allocations\n========= ERROR SUMMARY: 1 error\n")
    w(d / "nccl_comm_digits_100k" / "train.log", "[step 1] allocated: 1 MB\n" + "1" * 100000
      + " NCCL INFO comm 0x1 rank x\n[step 2] allocated: 2 MB\n")


# -- injection ------------------------------------------------------------------------------------

XSS = '<script>alert(1)</script><img src=x onerror=alert(2)>"\'`${7*7}{{7*7}}'
MD = "[click](https://evil.example/x) ![img](https://evil.example/p.png) <b>b</b> | col | # H\n## heading"
FORMULA = '=HYPERLINK("https://evil.example","x")'
ANSI = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31mRED\x1b[0m"


def inject(out: Path) -> None:
    d = out / "inject"
    # I01: a job whose every field carries HTML/JS: GPU name, process name, step-log tags, OOM text,
    # kernel comm names, sanitizer frames, Xid process names; file and folder names too
    job = d / "xss_job" / ("job-" + "<svg onload=alert(3)>")
    name = "H100 " + XSS
    csv = [CSV_HEADER]
    for i in range(120):
        csv.append(nvsmi_row(_ts("2026/11/30 04:", i), 1000 + 200 * i, name=name))
    w(job / "nvidia-smi.csv", "".join(csv))
    apps = ["timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"]
    for i in range(120):
        apps.append(f"{_ts('2026/11/30 04:', i)}, {GPU_UUID}, 4242, /opt/{XSS}/python3, {900 + 200 * i} MiB\n")
    w(job / "compute-apps.csv", "".join(apps))
    w(job / "train.log", "".join(f"2026-11-30 04:00:{i:02d},000 INFO {XSS}: [step {i}] allocated: {500 + 50 * i}.00 MB, "
                                 f"cached: {1024 + 64 * i}.00 MB\n" for i in range(60)))
    w(job / "stderr.log", "Traceback (most recent call last):\n  File \"" + XSS + ".py\", line 1, in <module>\n"
      + TORCH_OOM.replace("GPU 0", "GPU 0 " + XSS))
    w(job / "kern.log", "".join([
        f"Nov 30 04:01:00 host kernel: [ 100.000000] {XSS} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n",
        f"Nov 30 04:01:00 host kernel: [ 100.000100] Out of memory: Killed process 4242 ({XSS[:15]}) total-vm:100kB, anon-rss:50kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0\n",
        f"Nov 30 04:01:01 host kernel: [ 101.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name={XSS}, GPU has fallen off the bus.\n",
    ]))
    w(job / ("<img src=x onerror=alert(4)>.log"), train_log())
    w(job / "sanitizer.log", "========= COMPUTE-SANITIZER\n========= Leaked 1024 bytes at 0x7f0000000000\n"
      "=========     Saved host backtrace up to driver entry point at cudaMalloc\n"
      f"=========     Host Frame:{XSS} [0x1234]\n"
      f"=========                in /usr/lib/{XSS}.so\n"
      f"=========     Host Frame:main [0x1]\n=========                in /src/{XSS}\n"
      "=========\n========= LEAK SUMMARY: 1024 bytes leaked in 1 allocations\n========= ERROR SUMMARY: 1 error\n")
    # the same job with Markdown injection, formula and ANSI payloads instead
    for tag, payload in (("md", MD), ("formula", FORMULA), ("ansi", ANSI)):
        j = d / f"{tag}_job" / ("job" + payload.replace("/", "_").replace("\n", " ")[:80])
        flat = payload.replace("\n", " ")
        w(j / "nvidia-smi.csv", leak_csv(120, name="H100 " + flat.replace(",", ";")))
        w(j / "train.log", "".join(f"2026-11-30 04:00:{i:02d},000 INFO {flat}: [step {i}] allocated: {500 + 50 * i}.00 MB\n"
                                   for i in range(60)))
        w(j / "stderr.log", flat + "\n" + TORCH_OOM.replace("GPU 0", "GPU 0 (" + flat + ")"))
        w(j / (payload.replace("/", "_").replace("\n", " ")[:60] + ".log"), train_log())
        # the driver error line is quoted on stderr by the tool
        w(j / "nvidia-smi-err.csv", CSV_HEADER + nvsmi_row("2026/11/30 04:00:00.000", 1)
          + f"Unable to determine the device handle for GPU 0000:3B:00.0: {flat}\n" + nvsmi_row("2026/11/30 04:00:01.000", 2))
    # Prometheus JSON with hostile labels (pod, namespace, Hostname, modelName, exported_pod)
    def prom(labels: dict) -> str:
        vals = [[1764475200 + 15 * i, str((1000 + 100 * i) * 1)] for i in range(200)]
        return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", **labels}, "values": vals}]}})
    w(d / "prom_labels" / "prom.json", prom({"gpu": "0", "UUID": GPU_UUID, "Hostname": XSS, "modelName": XSS,
                                            "pod": XSS, "namespace": MD.replace("\n", " "), "container": FORMULA,
                                            "exported_pod": ANSI}))
    # Grafana CSV with a hostile series name
    rows = "".join(f"{(1764475200 + 15 * i) * 1000},{1000 + 100 * i}\n" for i in range(200))
    w(d / "grafana_labels" / "panel.csv", f'"Time","DCGM_FI_DEV_FB_USED{{Hostname=""{XSS.replace(chr(34), "")}"", gpu=""0""}}"\n' + rows)
    # W&B, MLflow, Lightning with hostile names
    w(d / "lightning" / "metrics.csv", "epoch,step,DeviceStatsMonitor.on_train_batch_start/" + XSS.replace(",", ";")
      + ",DeviceStatsMonitor.on_train_batch_start/allocated_bytes.all.current\n"
      + "".join(f"0,{i},1,{1000000 * (i + 1)}\n" for i in range(100)))
    # memory snapshot with HTML in frames (see pickles/html_in_frames.pickle)
    # a sanitizer XML with hostile frames
    w(d / "sanitizer_xml" / "report.xml", '<?xml version="1.0"?>\n<ComputeSanitizerOutput>\n<record>\n<kind>Leak</kind>\n'
      f'<what><text>Leaked 64 bytes at 0x1</text><size>64</size></what>\n<hostStack><frame><function>{_xml_escape(XSS)}</function>'
      f'<module>{_xml_escape(XSS)}</module></frame></hostStack>\n</record>\n</ComputeSanitizerOutput>\n')
    # torchrun / NCCL with hostile hostnames and error text
    w(d / "torchrun" / "train.log", "[default0]:[rank0]:[E1130 04:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] "
      f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType={XSS}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "============================================================\ntrain.py FAILED\n"
      "------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n"
      f"  time      : 2026-11-30_04:00:01\n  host      : {XSS}\n  rank      : 0 (local_rank: 0)\n  exitcode  : -9 (pid: 4242)\n"
      "  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 4242\n"
      "============================================================\n")
    # compare: two runs with hostile folder names
    for side in ("before", "after"):
        j = d / "compare" / f"{side}{XSS.replace('/', '_')}"
        w(j / "nvidia-smi.csv", leak_csv(120, step_mib=200 if side == "before" else 0, name=name))
    # scan archive whose job folder names are formulas and HTML (CSV injection in summary.csv)
    for jname in ("=1+2", "+1+2", "-1+2", "@SUM(A1)", '=HYPERLINK("http:__evil","x")', "<b>job</b>", "\t=1+2"):
        w(d / "scan_archive" / jname / "nvidia-smi.csv", leak_csv(120))
    # rich console markup in values the CLI prints with markup on (the verdict line): a Prometheus label,
    # a compute-apps process name, a folder name ending in "[" (its path then holds "[/")
    vals = [[1764475200 + 15 * i, str(1000 + 100 * i)] for i in range(200)]
    w(d / "rich_markup_prom" / "prom.json", json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0", "Hostname": "node[/bold]1", "pod": "train[/]"},
         "values": vals}]}}))
    apps = ["timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"]
    for i in range(120):
        apps.append(f"{_ts('2026/11/30 04:', i)}, {GPU_UUID}, 4242, [/usr/bin/python3], {900 + 200 * i} MiB\n")
    w(d / "rich_markup_process" / "compute-apps.csv", "".join(apps))
    w(d / "rich_markup_folder" / "job[" / "]" / "nvidia-smi.csv", leak_csv(2))
    w(d / "rich_markup_folder2" / "[red]job" / "nvidia-smi.csv", leak_csv(2))
    # a log line that starts with a formula reaches timeline's events CSV
    w(d / "formula_lines" / "stderr.log", FORMULA + "\n" + "=1+2 " + TORCH_OOM)
    # Markdown: a folder whose name starts with "# " (its problems line becomes "- # ...", a heading)
    w(d / "md_heading" / "# Heading injected" / "empty.log", "")
    w(d / "md_heading" / "# Heading injected" / "nvidia-smi.csv", leak_csv(120))
    # compute-sanitizer XML: entity expansion, external entity, deep nesting, truncated
    x = d / "sanitizer_xml_attacks"
    lol = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
           + "".join(f'<!ENTITY lol{i} "{("&lol%s;" % ("" if i == 1 else i - 1)) * 10}">' for i in range(1, 10))
           + ']>\n<ComputeSanitizerOutput><record><kind>Leak</kind><what><text>Leaked 64 bytes at 0x1 &lol9;</text>'
           "<size>64</size></what></record></ComputeSanitizerOutput>\n")
    w(x / "billion_laughs.xml", lol)
    w(x / "xxe.xml", '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n<ComputeSanitizerOutput>'
      "<record><kind>Leak</kind><what><text>Leaked 64 bytes at 0x1 &xxe;</text><size>64</size></what></record>"
      "</ComputeSanitizerOutput>\n")
    w(x / "deep.xml", '<?xml version="1.0"?>\n<ComputeSanitizerOutput>' + "<record>" * 200000 + "</record>" * 200000
      + "</ComputeSanitizerOutput>\n")
    # a job whose file fails with an error message that starts with the job path (relative scan)
    w(d / "scan_archive" / "=cmd|' _C calc'!A0" / "nvidia-smi.csv.gz", b"\x1f\x8b garbage")


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# -- time and numbers -----------------------------------------------------------------------------

def time_cases(out: Path) -> None:
    d = out / "time"

    def csv_at(stamps: list[str]) -> str:
        return CSV_HEADER + "".join(nvsmi_row(t, 1000 + 100 * i) for i, t in enumerate(stamps))

    w(d / "year_1970" / "nvidia-smi.csv", csv_at([f"1970/01/01 00:00:{i:02d}.000" for i in range(60)]))
    w(d / "year_1969" / "nvidia-smi.csv", csv_at([f"1969/12/31 23:59:{i:02d}.000" for i in range(60)]))
    w(d / "year_2100" / "nvidia-smi.csv", csv_at([f"2100/01/01 00:00:{i:02d}.000" for i in range(60)]))
    w(d / "year_2200" / "nvidia-smi.csv", csv_at([f"2200/12/31 23:59:{i:02d}.000" for i in range(60)]))
    w(d / "year_9999" / "nvidia-smi.csv", csv_at([f"9999/12/31 23:59:{i:02d}.000" for i in range(60)]))
    w(d / "year_0001" / "nvidia-smi.csv", csv_at([f"0001/01/01 00:00:{i:02d}.000" for i in range(60)]))
    w(d / "mixed_1970_2026" / "nvidia-smi.csv", csv_at([f"{'1970/01/01' if i % 2 else '2026/11/30'} 00:00:{i:02d}.000"
                                                        for i in range(60)]))
    # epoch stamps (Grafana/Prometheus/W&B): negative, 0, huge
    def prom(ts: list[float]) -> str:
        return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0"}, "values": [[t, str(1000 + i)] for i, t in enumerate(ts)]}]}})
    w(d / "prom_negative_epoch" / "prom.json", prom([-1e9 + 15 * i for i in range(100)]))
    w(d / "prom_epoch_1e12" / "prom.json", prom([1e12 + 15 * i for i in range(100)]))
    w(d / "prom_epoch_1e18" / "prom.json", prom([1e18 + 15 * i for i in range(100)]))
    w(d / "prom_epoch_inf" / "prom.json", prom([1764475200 + 15 * i for i in range(99)] + [1e400]))
    w(d / "prom_epoch_nan_str" / "prom.json", prom([1764475200 + 15 * i for i in range(99)]).replace("1764475200,", '"NaN",', 1))
    w(d / "grafana_epoch_negative" / "panel.csv", '"Time","DCGM_FI_DEV_FB_USED{gpu=""0""}"\n'
      + "".join(f"{-10**15 + 15000 * i},{1000 + i}\n" for i in range(100)))
    w(d / "grafana_epoch_huge" / "panel.csv", '"Time","DCGM_FI_DEV_FB_USED{gpu=""0""}"\n'
      + "".join(f"{10**19 + 15000 * i},{1000 + i}\n" for i in range(100)))
    # DST gap (Europe/Berlin 2026-03-29 02:00-03:00 does not exist) and overlap (2026-10-25 02:00-03:00 twice)
    w(d / "dst_gap" / "nvidia-smi.csv", csv_at([f"2026/03/29 0{1 + (i // 60)}:{i % 60:02d}:00.000" for i in range(180)]))
    w(d / "dst_overlap" / "nvidia-smi.csv", csv_at([f"2026/10/25 02:{i % 60:02d}:00.000" for i in range(120)]))
    # unsorted, duplicate, reversed, all the same time
    st = [_ts("2026/11/30 04:", i) for i in range(120)]
    import random
    rnd = random.Random(5)
    sh = st[:]
    rnd.shuffle(sh)
    w(d / "unsorted" / "nvidia-smi.csv", csv_at(sh))
    w(d / "reversed" / "nvidia-smi.csv", csv_at(st[::-1]))
    w(d / "all_same_time" / "nvidia-smi.csv", csv_at([st[0]] * 120))
    w(d / "duplicates" / "nvidia-smi.csv", CSV_HEADER + "".join(nvsmi_row(t, 1000 + 100 * i) * 3 for i, t in enumerate(st)))
    # a 10-year span in one CSV (one reading a day), and 2 readings 10 years apart
    from datetime import datetime, timedelta
    t0 = datetime(2016, 1, 1)
    w(d / "ten_years_daily" / "nvidia-smi.csv", csv_at([(t0 + timedelta(days=i)).strftime("%Y/%m/%d %H:%M:%S.000")
                                                        for i in range(3653)]))
    w(d / "two_points_ten_years" / "nvidia-smi.csv", csv_at(["2016/01/01 00:00:00.000", "2026/01/01 00:00:00.000"]))
    # a long run at 1 s: 400k seconds
    w(d / "long_run_400k" / "nvidia-smi.csv", csv_at([(t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.000")
                                                      for i in range(400_000)]))
    # mixed time zones in one file: ISO with offsets in a kern.log and a train log
    w(d / "mixed_zones" / "kern.log", "".join(
        f"2026-11-30T04:00:{i:02d}.000000{('+00:00', '+05:30', '-08:00', 'Z')[i % 4]} host kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=python, Graphics Exception\n"
        for i in range(40)))
    w(d / "mixed_zones_csv" / "nvidia-smi.csv", csv_at([f"2026-11-30T04:00:{i:02d}{('+00:00', '+05:30', '-08:00')[i % 3]}"
                                                       for i in range(60)]))
    # dmesg uptime stamps: huge, negative, going back
    w(d / "dmesg_uptime_huge" / "dmesg.txt", "".join(f"[{10**15 + i}.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=python, x\n" for i in range(20)))
    w(d / "dmesg_uptime_back" / "dmesg.txt", "".join(f"[{(50 - i) * 10}.000000] Out of memory: Killed process {i} (python) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n" for i in range(20)))
    # syslog without year across New Year, Feb 29
    w(d / "syslog_feb29" / "kern.log", "".join(f"Feb 29 04:00:{i:02d} host kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=python, x\n" for i in range(20)))
    # step log timestamps in 1970 / 9999
    w(d / "steplog_9999" / "train.log", "".join(f"9999-12-31 23:59:{i:02d},000 INFO [step {i}] allocated: {100 * i} MB\n" for i in range(60)))
    w(d / "steplog_2300" / "train.log", "".join(f"2300-12-31 23:59:{i:02d},000 INFO [step {i}] allocated: {100 * i} MB\n" for i in range(60)))
    w(d / "csv_2300" / "nvidia-smi.csv", csv_at([f"2300/01/01 00:00:{i:02d}.000" for i in range(60)]))
    w(d / "steplog_1970" / "train.log", "".join(f"1970-01-01 00:00:{i:02d},000 INFO [step {i}] allocated: {100 * i} MB\n" for i in range(60)))


def numbers(out: Path) -> None:
    d = out / "numbers"
    st = [_ts("2026/11/30 04:", i) for i in range(120)]

    def csv_vals(used: list[str], total: str | list[str] = "81920 MiB", idx: list | None = None) -> str:
        rows = [CSV_HEADER]
        for i, (t, u) in enumerate(zip(st, used)):
            tot = total[i] if isinstance(total, list) else total
            rows.append(f"{t}, {idx[i] if idx else 0}, {GPU_UUID}, 00000000:3B:00.0, NVIDIA H100, {tot}, {u}, [N/A]\n")
        return "".join(rows)

    w(d / "used_gt_total" / "nvidia-smi.csv", csv_vals([f"{90000 + 100 * i} MiB" for i in range(120)]))
    w(d / "negative" / "nvidia-smi.csv", csv_vals([f"{-1000 - 10 * i} MiB" for i in range(120)]))
    w(d / "huge_1e30" / "nvidia-smi.csv", csv_vals(["1e30 MiB"] * 60 + [f"{1000 + i} MiB" for i in range(60)]))
    w(d / "huge_int_40_digits" / "nvidia-smi.csv", csv_vals(["9" * 40 + " MiB"] * 60 + [f"{1000 + i} MiB" for i in range(60)]))
    w(d / "nan_inf" / "nvidia-smi.csv", csv_vals(["nan MiB", "inf MiB", "-inf MiB", "NaN MiB"] * 30))
    w(d / "na_not_supported" / "nvidia-smi.csv", csv_vals(["[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU is lost]"] * 30))
    w(d / "all_na" / "nvidia-smi.csv", csv_vals(["[N/A]"] * 120, total="[N/A]"))
    w(d / "unit_mix" / "nvidia-smi.csv", csv_vals([f"{1000 + i} {('MiB', 'MB', 'GiB', 'KiB')[i % 4]}" for i in range(120)]))
    w(d / "total_zero" / "nvidia-smi.csv", csv_vals([f"{1000 + i} MiB" for i in range(120)], total="0 MiB"))
    w(d / "total_changes" / "nvidia-smi.csv", csv_vals([f"{1000 + i} MiB" for i in range(120)],
                                                        total=[f"{81920 + 1000 * (i % 7)} MiB" for i in range(120)]))
    w(d / "gpu_index_999999" / "nvidia-smi.csv", csv_vals([f"{1000 + 100 * i} MiB" for i in range(120)], idx=[999999] * 120))
    w(d / "gpu_index_negative" / "nvidia-smi.csv", csv_vals([f"{1000 + 100 * i} MiB" for i in range(120)], idx=[-3] * 120))
    w(d / "gpu_index_huge" / "nvidia-smi.csv", csv_vals([f"{1000 + 100 * i} MiB" for i in range(120)], idx=[10**30] * 120))
    # many GPUs: 200k distinct indices, one reading each, and 5000 GPUs x 40 readings
    rows = [CSV_HEADER] + [f"2026/11/30 04:00:00.000, {g}, GPU-{g:08x}-0000-0000-0000-000000000000, 00000000:3B:00.0, H100, 81920 MiB, {g % 80000} MiB, [N/A]\n"
                           for g in range(200_000)]
    w(d / "gpus_200k_distinct" / "nvidia-smi.csv", "".join(rows))
    rows = [CSV_HEADER]
    for i in range(40):
        for g in range(5000):
            rows.append(f"{_ts('2026/11/30 04:', i)}, {g}, GPU-{g:08x}-0000-0000-0000-000000000000, 00000000:3B:00.0, H100, 81920 MiB, {1000 + 100 * i + g} MiB, [N/A]\n")
    w(d / "gpus_5000x40" / "nvidia-smi.csv", "".join(rows))
    # step logs with absurd numbers
    w(d / "steplog_huge" / "train.log", "".join(f"[step {i}] allocated: {'9' * 30} MB, cached: 1e300 MB\n" for i in range(60)))
    w(d / "steplog_step_huge" / "train.log", "".join(f"[step {10**25 + i}] allocated: {100 + i} MB\n" for i in range(60)))
    w(d / "steplog_negative_step" / "train.log", "".join(f"[step {-i}] allocated: {100 + i} MB\n" for i in range(60)))
    w(d / "oom_huge" / "stderr.log", TORCH_OOM.replace("256.00 MiB", "1e308 GiB").replace("79.10 GiB", "99999999999999999999 GiB"))
    w(d / "oom_negative" / "stderr.log", TORCH_OOM.replace("256.00 MiB", "-256.00 MiB"))
    w(d / "memstats_huge" / "train.log", "{'allocated_bytes.all.current': " + "9" * 50 + ", 'reserved_bytes.all.current': -1, "
      "'active_bytes.all.current': 1e400, 'num_ooms': " + "9" * 30 + "}\n")
    # Prometheus values
    def prom(vals: list[str]) -> str:
        return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0"}, "values": [[1764475200 + 15 * i, v] for i, v in enumerate(vals)]}]}})
    w(d / "prom_values_weird" / "prom.json", prom(["NaN", "+Inf", "-Inf", "1e308", "-5", "9" * 40, "0x10", ""] * 20))
    w(d / "prom_gpu_label_huge" / "prom.json", json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": str(g)}, "values": [[1764475200, "1"]]} for g in range(50_000)]}}))
    for n in (2000, 4000, 8000):
        w(d / f"prom_series_{n}" / "prom.json", json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": str(g)}, "values": [[1764475200, "1"]]} for g in range(n)]}}))
    w(d / "prom_deep_nesting" / "prom.json", '{"status":"success","data":{"resultType":"matrix","result":' + "[" * 100_000 + "]" * 100_000 + "}}")
    w(d / "json_deep_wandb" / "wandb-events.jsonl", '{"system.gpu.0.memoryAllocatedBytes": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    w(d / "memstats_deep" / "train.log", "{'allocated_bytes.all.current': " + "[" * 50_000 + "]" * 50_000 + "}\n")


# -- scan archives --------------------------------------------------------------------------------

def scan_cases(out: Path) -> None:
    d = out / "scan"
    # S01: a folder symlink loop and a symlink to a parent
    a = d / "loop_archive"
    w(a / "job1" / "nvidia-smi.csv", leak_csv(120))
    _symlink(a / "job1" / "loop", "..")
    _symlink(a / "job1" / "self", ".")
    # S02: a symlink DAG: 40 levels, each with two links to the next level: 2^40 paths, 40 folders
    g = d / "dag_archive" / "job1"
    w(g / "nvidia-smi.csv", leak_csv(120))
    for i in range(40):
        (g / f"L{i}").mkdir(parents=True, exist_ok=True)
    for i in range(39):
        _symlink(g / f"L{i}" / "a", f"../L{i + 1}")
        _symlink(g / f"L{i}" / "b", f"../L{i + 1}")
    w(g / "L39" / "train.log", train_log())
    # the same DAG given directly to `report`
    # S03: a file symlink and a folder symlink pointing outside the archive
    outside = d / "outside_data"
    w(outside / "secret" / "nvidia-smi.csv", leak_csv(120, step_mib=0))
    w(outside / "secret.txt", "root:$6$not-a-real-hash:19000:0:99999:7:::\n")
    o = d / "outside_archive" / "job1"
    w(o / "train.log", train_log())
    _symlink(o / "logs", os.path.relpath(outside / "secret", o))
    _symlink(o / "shadow.txt", os.path.relpath(outside / "secret.txt", o))
    _symlink(o / "passwd", "/etc/passwd")
    # S04: a folder tree 1500 deep (deeper than Python's recursion limit) with a log at the bottom
    deep = str(d / "deep_archive" / "job") + "/d" * 1500    # (pathlib recurses on such a path: strings)
    try:
        cur = str(d / "deep_archive" / "job")
        os.makedirs(cur, exist_ok=True)
        for _ in range(1500):          # (os.makedirs recurses too)
            cur += "/d"
            if not os.path.isdir(cur):
                os.mkdir(cur)
        with open(deep + "/nvidia-smi.csv", "w") as fh:
            fh.write(leak_csv(120))
    except OSError as e:
        print("deep_archive:", e, file=sys.stderr)
    # S05: output folder whose name is a prefix of the archive's (scan arch -o ar): see report.md
    w(d / "prefix" / "arch" / "job1" / "nvidia-smi.csv", leak_csv(120))
    w(d / "prefix" / "arch" / "job2" / "nvidia-smi.csv", leak_csv(120, step_mib=0))
    # S06: 300 jobs for interruption / concurrency tests
    for i in range(300):
        w(d / "many_jobs" / f"job{i:03d}" / "nvidia-smi.csv", leak_csv(120, step_mib=(200 if i % 2 else 0)))
        w(d / "many_jobs" / f"job{i:03d}" / "train.log", train_log())
    # S07: a job whose logs are in a linked folder (stale rerun after the linked data changes)
    w(d / "linked_data" / "logs" / "nvidia-smi.csv", leak_csv(120, step_mib=0))
    la = d / "linked_archive" / "job1"
    la.mkdir(parents=True, exist_ok=True)
    w(la / "train.log", "".join(f"[step {i}] allocated: 500 MB\n" for i in range(60)))   # a flat step log
    _symlink(la / "logs", os.path.relpath(d / "linked_data" / "logs", la))
    # S08: hidden files and folders inside a job
    w(d / "hidden_archive" / "job1" / ".nvidia-smi.csv", leak_csv(120))
    w(d / "hidden_archive" / "job1" / ".logs" / "train.log", train_log())
    w(d / "hidden_archive" / "job1" / "visible.log", train_log())
    # S10: an archive that is itself one job (logs at its top): scanned with -o inside it
    w(d / "single_job_archive" / "nvidia-smi.csv", leak_csv(120))
    # S09: a job whose files fail in the worker (a huge pickle bomb job next to normal jobs)
    w(d / "mixed_archive" / "good" / "nvidia-smi.csv", leak_csv(120))
    w(d / "mixed_archive" / "bad" / "snapshot.pickle", (out / "pickles" / "memo_bomb_segments_20000x20000.pickle").read_bytes()
      if (out / "pickles" / "memo_bomb_segments_20000x20000.pickle").exists() else b"")


def _symlink(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.symlink(target, link)
    except FileExistsError:
        pass


FAMILIES = {"pickles": pickles, "bombs": bombs, "lines": lines, "redos": redos, "inject": inject,
            "time": time_cases, "numbers": numbers, "scan": scan_cases}


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    here = Path(__file__).resolve().parents[1]     # <parent>/<this folder>/make_cases.py
    if out == here or here in out.parents:
        sys.exit(f"keep the generated cases out of {here}")
    names = sys.argv[2:] or list(FAMILIES)
    for n in names:
        print(f"{n} ...", file=sys.stderr, flush=True)
        FAMILIES[n](out)


if __name__ == "__main__":
    main()
