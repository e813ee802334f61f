"""TensorBoard event files (`events.out.tfevents.*`): the memory scalars a training script logged
(`writer.add_scalar("memory/allocated_mib", ...)`, `tf.summary.scalar("gpu/mem_reserved_gb", ...)`)
become memory series on their step and wall time (docs/formats.md "tensorboard-events").

The file is a sequence of TFRecords, each an `Event` protobuf; its first record is always the
`file_version` event ("brain.Event:2"), which is how the file is claimed by its bytes. The Event is
decoded by tensorboardX's generated protobuf classes and each record's length is checked with its
CRC-32C (tensorboardX's `masked_crc32c`); tensorboardX is the optional extra `tensorboard`, so the base
install pulls no protobuf. The framing around the Event (length, its CRC, payload, the payload's CRC)
is four fixed fields, read with struct: no library offers a reader without the full TensorBoard or
TensorFlow stack. The payload's own CRC is not checked (tensorboardX computes CRC-32C in Python: over
a whole file of images it would dominate the read); a damaged payload fails to decode instead.

A scalar is read from `simple_value` (TF1, tensorboardX, torch.utils.tensorboard) or from a rank-0
`tensor` (TF2's `tf.summary.scalar`). A memory scalar is one whose tag names memory (mem, memory,
vram, alloc, reserved, cached, bytes_in_use) and its unit (`_mib`, `_gb`, `(MiB)`, `/bytes`, or a
`bytes` word: GB read as GiB, as everywhere here); its series: `reserved` (reserved, cached),
`allocated` (alloc), `max_` of either for a peak or max tag, else `memory.used`. Tags of free or total
memory, percentages and utilizations are not memory in use and are counted as skipped.

Evidence `line` numbers count records: record 1 is the file_version event.
"""
from __future__ import annotations

import re
import struct
from datetime import datetime, timezone

import numpy as np

from forensics import units
from forensics.errors import InputError
from forensics.io.sources import Source
from forensics.model import Parsed, samples_frame
from forensics.options import Options
from forensics.parsers.contract import Format

NAME = "tensorboard-events"
EXTRA = "pip install 'gpu-forensics[tensorboard]'"

_VERSION_MARK = b"brain.Event:"
# the file_version event: its wall_time (field 1, a double: tag 0x09) first, the version string, at most
# the writer's name after it; a few dozen bytes
_MAX_FIRST_RECORD = 256
_MEMORY = re.compile(r"mem|vram|alloc|reserved|cached|bytes_in_use", re.IGNORECASE)
_NOT_IN_USE = re.compile(r"free|total|capacity|limit|percent|pct|%|util|frac|ratio|bandwidth|clock|temp",
                         re.IGNORECASE)
# tensorboardX's add_scalar writes "mem (MiB)" as "mem__MiB_" (it cleans tags to TF's name charset)
_UNIT = re.compile(r"(?:^|[_/ .(\[-])(?P<unit>bytes|b|kib|kb|mib|mb|gib|gb|tib|tb)[)\]_]?$", re.IGNORECASE)
_GPU = re.compile(r"(?:gpu|cuda|device)[_:/ .-]?([0-9]{1,3})\b", re.IGNORECASE)
# DataType codes of a scalar tensor (tensorflow/core/framework/types.proto) and how they are stored
_TENSOR_DTYPES = {1: ("<f4", "float_val"), 2: ("<f8", "double_val"), 3: ("<i4", "int_val"),
                  9: ("<i8", "int64_val"), 19: ("<f2", "half_val")}

SKIP_OTHER = "event without a memory scalar (the version record, other tags, images, graphs)"
SKIP_NO_UNIT = "memory scalar whose tag names no unit (e.g. _mib, _gb): its size cannot be read"
SKIP_NOT_IN_USE = "memory scalar of free or total memory, or a percentage: not memory in use"
SKIP_NOT_A_SIZE = "memory scalar whose value is no size (NaN, infinite or negative)"
SKIP_BAD = "record that does not decode as an Event (damaged)"
SKIP_NO_TIME = "event whose wall time is no time (out of any clock's range, or NaN): a damaged record"
SKIP_DAMAGED = "record whose length fails its CRC (the file is damaged there; nothing after it is read)"
SKIP_CUT = "record cut short at the end of the file (it was still being written)"


def sniff_bytes(first: bytes) -> str | None:
    if len(first) < 12:
        return None
    (n,) = struct.unpack_from("<Q", first)
    if not 0 < n <= _MAX_FIRST_RECORD or first[12:13] != b"\x09" or _VERSION_MARK not in first[12:12 + n]:
        return None
    return "a TensorBoard event file (TFRecords of Event protobufs, its first the file version)"


def _library():
    try:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.record_writer import masked_crc32c
    except ImportError:
        return None
    return Event, masked_crc32c


def parse(src: Source, opts: Options) -> Parsed:
    lib = _library()
    if lib is None:
        raise InputError(src.path, "TensorBoard event file not read", "reading it needs the tensorboardX package",
                         f"install the optional extra: {EXTRA}")
    Event, masked_crc32c = lib
    out = Parsed(clock="none")
    rows: list[dict] = []
    tags: dict[str, tuple[str, str]] = {}
    record = offset = 0
    with src.open_binary() as fh:
        while True:
            header = fh.read(12)
            if not header:
                break
            record += 1
            if len(header) < 12:
                out.skipped.add(SKIP_CUT, record)
                break
            length, crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != crc:
                # no way to find the next record: what came before is kept, the rest is not read
                out.skipped.add(SKIP_DAMAGED, record)
                out.notes.append(f"record {record}'s length fails its CRC (byte {offset}): the file is damaged "
                                 "there and the records after it are not read; re-copy it from where it was written")
                break
            data = fh.read(length)
            tail = fh.read(4)
            if len(data) < length or len(tail) < 4:
                out.skipped.add(SKIP_CUT, record)
                break
            offset += 16 + length
            try:
                event = Event.FromString(data)
            except Exception:   # protobuf's DecodeError, and anything a damaged payload raises
                out.skipped.add(SKIP_BAD, record)
                continue
            skipped = sum(out.skipped.counts.values())
            got = _memory_scalars(event, record, tags, out)
            rows.extend(got)
            if not got and sum(out.skipped.counts.values()) == skipped:
                out.skipped.add(SKIP_OTHER, record)
    out.lines = record
    out.samples = samples_frame(rows)
    if rows:
        out.clock = "wall"
    for tag, (series, unit) in tags.items():
        out.notes.append(f"TensorBoard scalar `{tag}` read as {series} in {unit}"
                         + (" (GB read as GiB)" if unit.lower() in ("gb", "mb", "kb", "tb") else ""))
    return out


def _memory_scalars(event, record: int, tags: dict, out: Parsed) -> list[dict]:
    if not event.HasField("summary"):
        return []
    rows = []
    for v in event.summary.value:
        if not _MEMORY.search(v.tag):
            continue
        value = _scalar(v)
        if value is None:
            continue
        if _NOT_IN_USE.search(v.tag):
            out.skipped.add(SKIP_NOT_IN_USE, record)
            continue
        u = _UNIT.search(v.tag)
        if u is None:
            out.skipped.add(SKIP_NO_UNIT, record)
            continue
        n = units.to_bytes(value, u["unit"])
        if n is None or n < 0:
            out.skipped.add(SKIP_NOT_A_SIZE, record)
            continue
        try:
            when = datetime.fromtimestamp(event.wall_time, timezone.utc)
        except (OverflowError, OSError, ValueError):
            out.skipped.add(SKIP_NO_TIME, record)
            continue
        series = _series(v.tag)
        tags.setdefault(v.tag, (series, u["unit"]))
        g = _GPU.search(v.tag)
        rows.append({"time": when, "seq": record, "line": record,
                     "step": event.step, "series": series, "bytes": n, "label": v.tag, "gpu": g[1] if g else None})
    return rows


def _scalar(v) -> float | None:
    """A Value's number: `simple_value`, or a rank-0 tensor's one element (TF2 writes scalars so)."""
    if v.HasField("simple_value"):
        return float(v.simple_value)
    if not v.HasField("tensor") or len(v.tensor.tensor_shape.dim) != 0:
        return None
    kind = _TENSOR_DTYPES.get(v.tensor.dtype)
    if kind is None:
        return None
    dtype, field = kind
    if v.tensor.tensor_content:
        arr = np.frombuffer(v.tensor.tensor_content, dtype=dtype)
        return float(arr[0]) if arr.size == 1 else None
    vals = getattr(v.tensor, field)
    if len(vals) != 1:
        return None
    if field == "half_val":   # float16 bits stored in an int
        return float(np.array([vals[0]], dtype="<u2").view("<f2")[0])
    return float(vals[0])


def _series(tag: str) -> str:
    t = tag.lower()
    peak = "peak" in t or "max" in t
    if "reserved" in t or "cached" in t:
        return "max_reserved" if peak else "reserved"
    if "alloc" in t or "bytes_in_use" in t:
        return "max_allocated" if peak else "allocated"
    return "memory.used"


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff_bytes=sniff_bytes,
    parse=parse,
    files="TensorBoard event files (`events.out.tfevents.*`) with memory scalars (`memory/allocated_mib`, "
          "`gpu/mem_reserved_gb`; `add_scalar` and TF2 tensor scalars); needs the extra `pip install "
          "'gpu-forensics[tensorboard]'`",
    yields="allocated / reserved / used per step and wall time, unit from the tag",
)
