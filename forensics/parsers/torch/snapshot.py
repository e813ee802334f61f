"""PyTorch memory snapshots (docs/formats.md §4.3): the pickle `torch.cuda.memory._dump_snapshot()`
writes, or `pickle.dump(torch.cuda.memory._snapshot())`; gzip and the other compressions too.

Claimed by its first bytes (a pickle, and the snapshot's keys in its head), before any text is read
(`sniff_bytes`). Read as plain data only (snapshot_pickle.py: nothing in the file can run), streamed,
the bulk of the trace straight from the bytes (snapshot_fast.py), keeping per trace entry only what
the analysis uses (action, address, size, stream, time, call path).

What it gives:
- samples `allocated` and `reserved` over the trace, rebuilt backwards from the totals at the dump
  (snapshot_trace.py), on the wall clock of `time_us`, else on the entry number (`seq`);
- a `gpu_oom` event per `oom` entry, with the device's free memory it reported;
- an `allocation_site` event per call path with memory live at the dump: its live blocks and bytes,
  and the allocations of the trace that survived, spread over the trace (a histogram), which is what
  detect/allocations.py tells a leak from a footprint by.

`line` is a record number: 1..N are the trace entries in file order (device 0 first), N+1.. the blocks
of the segments at the dump, in order. The device index is the process's own CUDA ordinal, which is
not the GPU's index on the machine when CUDA_VISIBLE_DEVICES is set, so `gpu` stays empty (a trace
of several devices labels its series `cuda:N`).
"""
from __future__ import annotations

import json
import zlib
import lzma
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from forensics.errors import InputError
from forensics.io.sources import Source, TooMuchDecompressed
from forensics.model import Parsed, Skipped, events_frame, samples_frame
from forensics.options import Options
from forensics.parsers.torch import snapshot_trace as T
from forensics.parsers.torch.snapshot_pickle import Malformed, PlainUnpickler, Refused, TooBig
from forensics.parsers.torch.snapshot_reader import TraceReader
from forensics.thinning import MAX_READINGS, thin_mask
from forensics.units import human
from forensics.parsers.contract import Format

NAME = "pytorch-memory-snapshot"

_HEAD_KEYS = (b"segments", b"device_traces")
_SEGMENT_KEYS = (b"total_size", b"blocks")   # a list of segments (torch.cuda.memory_snapshot())
_PENDING = ("active_pending_free", "active_awaiting_free")   # the code's name and the docstring's
# time_us is microseconds of the wall clock since PyTorch stamps it so; older ones wrote none
_WALL_US = (int(datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp() * 1e6),
            int(datetime(2200, 1, 1, tzinfo=timezone.utc).timestamp() * 1e6))
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MAX_SITES = 500
NOT_ENTRY = "trace entry that is not a dict with a known action"


def sniff_bytes(first: bytes) -> str | None:
    """Every pickle: a snapshot is read, any other pickle gets told why it is not one."""
    if len(first) < 2 or first[0] != 0x80 or not 2 <= first[1] <= 5:
        return None
    if not _snapshot_head(first):
        return "a Python pickle"
    return ("a pickle holding segments and device_traces: PyTorch's memory snapshot"
            if any(k in first[:4096] for k in _HEAD_KEYS) else "a pickle of segments (torch.cuda.memory_snapshot())")


def _snapshot_head(first: bytes) -> bool:
    """The first objects of the pickle are a snapshot's (its keys are written first)."""
    head = first[:4096]
    return any(k in head for k in _HEAD_KEYS) or all(k in head for k in _SEGMENT_KEYS)


def _not_snapshot(path: str, why: str) -> InputError:
    return InputError(path, "not a PyTorch memory snapshot", why,
                      "pass the file torch.cuda.memory._dump_snapshot() wrote (it was not loaded: pickles are "
                      "read as plain data here, nothing in them runs)")


def parse(src: Source, opts: Options) -> Parsed:
    if not _snapshot_head(src.first_bytes()):
        raise _not_snapshot(src.path, "its first objects hold neither segments nor device_traces")
    limit = opts.max_snapshot_bytes
    reader = TraceReader()
    try:
        with src.open_binary() as fh:
            unpickler = PlainUnpickler(fh.read, limit, reader.on_items, reader.skip)
            top = unpickler.load()
    except Refused as e:
        raise _not_snapshot(src.path, f"its pickle holds {e.what} at byte {e.offset}, which a snapshot never does")
    except Malformed as e:
        raise InputError(src.path, "cannot read the snapshot", f"{e.what} at byte {e.offset}",
                         "re-copy the file from where it was written (a copy cut short ends this way)")
    except TooBig as e:
        if e.claim is not None:
            raise InputError(src.path, "snapshot too big",
                             f"an argument at byte {e.offset} claims {e.claim:,} bytes, more than the "
                             f"{human(limit)} read (--max-snapshot-size) holds",
                             "re-copy the file if it is damaged; pass a larger --max-snapshot-size if it really "
                             "holds that much")
        raise InputError(src.path, "snapshot too big", f"it holds more than {human(limit)} (--max-snapshot-size)",
                         f"pass --max-snapshot-size {human(4 * limit).replace(' ', '')} to read it (about 20 s "
                         "and 1 GiB of memory per GiB of snapshot)")
    except TooMuchDecompressed as e:
        raise src.cut_error(e, 0) from None
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
        raise InputError(src.path, "cannot read the snapshot", f"its compressed stream is damaged ({e})",
                         "re-copy the file from where it was written")
    by_bytes = max(1, unpickler.offset) // _BYTES_PER_BLOCK
    # what reading needed (the memo: a few slots per trace entry; the last chunk and scan) goes
    # before the trace is replayed
    unpickler.release()
    reader.release()
    try:
        return _results(src, top, reader, min(by_bytes, opts.max_snapshot_objects))
    except _MemoBomb as e:
        if e.records > opts.max_snapshot_objects:
            n = opts.max_snapshot_objects
            raise InputError(src.path, "snapshot too big",
                             f"it lists more than {n:,} trace entries and blocks (--max-snapshot-objects)",
                             f"pass --max-snapshot-objects {4 * n} to read it (memory grows by about 80 bytes "
                             "per entry)")
        raise InputError(src.path, "not a PyTorch memory snapshot",
                         f"it lists {e.records} or more trace entries and blocks (counted up to its {e.what}) in "
                         f"{unpickler.offset} bytes, more than one per {_BYTES_PER_BLOCK} bytes: the same lists "
                         "referred to again and again, which "
                         "torch.cuda.memory._snapshot() never writes",
                         "pass the file torch.cuda.memory._dump_snapshot() wrote; it was not read further")


# -- results ------------------------------------------------------------------------------------------

def _iso_us(us: int) -> str:
    t = _EPOCH + timedelta(microseconds=int(us))
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _MemoBomb(Exception):
    """More records (trace entries, then blocks) than the budget: past what the snapshot's bytes could
    hold, its memo refers to the same lists again and again; else past --max-snapshot-objects."""

    def __init__(self, what: str, records: int):
        self.what, self.records = what, records


_MAX_DEVICE_BYTES = 1 << 62
# bytes a block takes at least in a real snapshot's pickle (a dict of size, state, address, ...)
_BYTES_PER_BLOCK = 16


def _blocks(segments: list, paths: T.Paths, first_record: int,
            max_blocks: int = 1 << 62) -> tuple[dict, dict, dict, list[str]]:
    """Blocks per device, reserved bytes per device, what the segments' layout says (for the era
    note), and the reasons of records not understood. Past `max_blocks` (counted as they are walked,
    the same list referred to twice counted twice): _MemoBomb."""
    blocks: dict[int, list[T.Block]] = {}
    reserved: dict[int, int] = {}
    layout = {"frames": 0, "history": 0, "pending": set(), "expandable": 0, "blocks": 0}
    bad: list[str] = []
    record = first_record
    for seg in segments:
        if type(seg) is not dict:
            bad.append("segment that is not a dict")
            continue
        dev = seg.get("device") if type(seg.get("device")) is int else 0
        total = seg.get("total_size")
        reserved[dev] = reserved.get(dev, 0) + (total if type(total) is int and total >= 0 else 0)
        layout["expandable"] += bool(seg.get("is_expandable"))
        at = seg.get("address") if type(seg.get("address")) is int else 0
        seg_blocks = seg.get("blocks")
        if not isinstance(seg_blocks, list):
            bad.append("segment without a list of blocks")
            continue
        max_blocks -= len(seg_blocks)
        if max_blocks < 0:
            raise _MemoBomb("segments", record - 1 + len(seg_blocks))
        for b in seg_blocks:
            if type(b) is not dict:
                bad.append("block that is not a dict")
                record += 1
                layout["blocks"] += 1
                continue
            size = b.get("size") if type(b.get("size")) is int and b.get("size") >= 0 else 0
            state = b.get("state") if isinstance(b.get("state"), str) else "?"
            if state in _PENDING:
                layout["pending"].add(state)
            hist = b.get("history")
            frames = None
            if "frames" in b:
                layout["frames"] += 1
                frames = b.get("frames")
            elif isinstance(hist, list) and hist and type(hist[0]) is dict:
                # the older layout: the latest allocation of the block first (_memory_viz._block_extra_legacy)
                layout["history"] += 1
                frames = hist[0].get("frames")
            address = b.get("address") if type(b.get("address")) is int else at
            path = paths.of_frames(frames) if frames is not None else None
            blocks.setdefault(dev, []).append(T.Block(address, size, state, path, record))
            layout["blocks"] += 1
            at = address + size
            record += 1
    return blocks, reserved, layout, bad


def _results(src: Source, top, reader: TraceReader, max_records: int) -> Parsed:
    path = src.path
    if isinstance(top, list):
        top = {"segments": top}
    if not isinstance(top, dict) or not ({"segments", "device_traces"} & set(top)):
        what = type(top).__name__
        raise _not_snapshot(path, f"its top level is a {what} without segments or device_traces")
    traces_obj = top.get("device_traces") if isinstance(top.get("device_traces"), list) else []
    traces = []
    skipped = Skipped()
    first = 1
    for d, lst in enumerate(traces_obj):
        known = reader.traces.get(id(lst)) if type(lst) is list else None
        # counted before its columns are copied: the same trace listed again is copied again
        if known is not None and first - 1 + len(known[1]) > max_records:
            raise _MemoBomb("device_traces", first - 1 + len(known[1]))
        cols = known[1].arrays() if known is not None else T.Columns().arrays()
        if known is not None and id(known[1]) in reader.skipped:
            skipped.add_lines(NOT_ENTRY, [first + i for i in reader.skipped[id(known[1])]])
        traces.append((d, cols))
        first += cols["action"].size
    n_entries = first - 1
    segments = top.get("segments") if isinstance(top.get("segments"), list) else []
    blocks, reserved, layout, bad_records = _blocks(segments, reader.paths, n_entries + 1, max_records - n_entries)
    out = Parsed()
    for why in bad_records:
        skipped.add(why)
    multi = len([1 for _, c in traces if c["action"].size]) > 1
    samples, events, notes = [], [], []
    timed_all = True
    record = 1
    by_device = dict(traces)
    for d in sorted(set(by_device) | set(blocks)):
        cols = by_device.get(d) or T.Columns().arrays()
        n = cols["action"].size
        dev_blocks = blocks.get(d, [])
        alloc_end = sum(b.size for b in dev_blocks if b.state == "active_allocated")
        # the replay counts bytes in 64-bit integers; no device holds anywhere near 2^62 bytes
        if max(alloc_end, reserved.get(d, 0)) >= _MAX_DEVICE_BYTES:
            raise _not_snapshot(path, f"the segments of device {d} add up to 2^62 bytes or more (4 EiB), more "
                                      "than any device holds")
        if n:
            s, e, device_notes, timed = _device(d, cols, record, dev_blocks, alloc_end, reserved.get(d, 0),
                                                reader.paths, multi, _optimizer_steps(top, d))
            samples.append(s)
            events.extend(e)
            notes.extend(device_notes)
            timed_all &= timed
        elif dev_blocks:   # no trace (recording was off): what is live at the dump, by call path
            rp = T.replay(cols, alloc_end, reserved.get(d, 0))
            by_record = {b.record: b for b in dev_blocks}
            events.extend(_site_events(T.sites(cols, rp, dev_blocks, reader.paths, record, np.zeros(0)),
                                       {"device": d, "entries": 0},
                                       lambda r, d=d: _block_text(d, by_record[r], reader.paths), False))
        record += n
    out.samples = samples_frame(pl.concat(samples)) if samples else out.samples
    out.events = events_frame(events) if events else out.events
    out.clock = "wall" if samples and timed_all else "none"
    out.skipped = skipped
    out.lines = n_entries + layout["blocks"]
    records = [f"1–{n_entries} the trace entries (device by device)" if n_entries else None,
               f"{n_entries + 1}–{n_entries + layout['blocks']} the blocks of the segments at the dump"
               if layout["blocks"] else None]
    out.notes = [_era(top, reader, layout), *notes,
                 "Evidence lines are record numbers: " + (", ".join(r for r in records if r) or "none") + "."]
    out.meta["snapshot"] = {"entries": n_entries, "blocks": layout["blocks"], "segments": len(segments),
                            "entries_read_from_bytes": reader.from_bytes}
    return out


def _era(top: dict, reader: TraceReader, layout: dict) -> str:
    """Which layout of the snapshot was read, by what its records hold."""
    parts = []
    if layout["frames"]:
        parts.append("blocks with their allocation's frames")
    if layout["history"]:
        parts.append("blocks with a history of allocations (the older layout, as torch.cuda._memory_viz "
                     "reads it for legacy snapshots)")
    if reader.keys:
        stamped = "time_us" in reader.keys
        parts.append("trace entries " + ("stamped with time_us (the wall clock)" if stamped else
                                          "without time_us (drawn by entry number)")
                     + "".join(f", {k}" for k in ("compile_context", "user_metadata", "pool_id") if k in reader.keys))
    for state in sorted(layout["pending"]):
        parts.append(f"blocks waiting on other streams named {state}")
    if layout["expandable"]:
        parts.append("expandable segments")
    extra = [k for k in ("allocator_settings", "external_annotations", "host_segments", "host_traces") if k in top]
    if extra:
        parts.append("also " + ", ".join(extra))
    settings = top.get("allocator_settings")
    conf = settings.get("PYTORCH_CUDA_ALLOC_CONF") if isinstance(settings, dict) else None
    if isinstance(conf, str) and conf:
        parts.append(f"PYTORCH_CUDA_ALLOC_CONF={conf[:120]}")
    return "Snapshot layout read: " + ("; ".join(parts) if parts else "no trace and no blocks") + "."


def _timed(cols: dict) -> bool:
    """Whether the trace is on the wall clock: every entry stamped with a plausible time_us."""
    t = cols["time"]
    return bool(t.size) and bool(((t >= _WALL_US[0]) & (t <= _WALL_US[1])).all())


def _positions(cols: dict, timed: bool) -> np.ndarray:
    """Each entry's place on the trace's axis: seconds, else its number."""
    t = cols["time"]
    return t / 1e6 if timed else np.arange(t.size, dtype=np.float64)


def _thinned(idx: np.ndarray, val: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """One curve thinned (thinning.thin_mask), a block of whole windows at a time: the same rows
    kept as thinning it at once, with memory for one block."""
    kept = np.zeros(idx.size, dtype=bool)
    step = window * max(1, (1 << 20) // window)
    for s0 in range(0, idx.size, step):
        part = val[s0:s0 + step]
        kept[s0:s0 + part.size] = thin_mask(np.zeros(part.size, dtype=np.int64), np.arange(s0, s0 + part.size),
                                            np.zeros(part.size, dtype=bool), part, window)
    return idx[kept], val[kept]


def _optimizer_steps(top: dict, d: int) -> np.ndarray:
    """When each optimizer step of device d began (time_us): the `Optimizer.step#...` START
    annotations that recent PyTorch records with the trace."""
    annotations = top.get("external_annotations")
    if type(annotations) is not list:   # absent, or not what PyTorch writes: no steps from it
        return np.array([], dtype=np.int64)
    out = [a.get("time_us") for a in annotations
           if type(a) is dict and a.get("stage") == "START" and a.get("device", d) == d
           and isinstance(a.get("name"), str) and a["name"].startswith("Optimizer.step")]
    return np.array([t for t in out if type(t) is int and -(1 << 63) <= t < 1 << 63], dtype=np.int64)


def _device(d: int, cols: dict, first: int, blocks: list, alloc_end: int, res_end: int,
            paths: T.Paths, multi: bool, step_starts: np.ndarray):
    """Samples, events and the note of one device's trace."""
    n = cols["action"].size
    rp = T.replay(cols, alloc_end, res_end)
    timed = _timed(cols)
    action = cols["action"]
    label = f"cuda:{d}" if multi else None
    curves = (("allocated", rp.allocated, rp.allocated_start, (T.ALLOC, T.FREE_REQUESTED)),
              ("reserved", rp.reserved, rp.reserved_start, (*T.SEGMENT_GROW, *T.SEGMENT_SHRINK)))
    sized = cols["size"] != 0

    def changes(kinds) -> np.ndarray:
        return np.flatnonzero(np.isin(action, kinds) & sized)

    # a long trace is thinned as any samples frame is (thinning.py), before the frame is made; each
    # curve is made and thinned in turn (memory: one curve of the trace's length at a time)
    points = 0
    for _, _, _, kinds in curves:
        idx = changes(kinds)
        points += idx.size + (not idx.size or idx[0] != 0)
    del idx
    window = 1
    while points * 2 / window > MAX_READINGS:
        window *= 2
    parts = []
    for series, values, start, kinds in curves:
        idx = changes(kinds)
        val = values[idx]
        if not idx.size or idx[0] != 0:   # where the trace starts, the value before its first change
            idx, val = np.concatenate([[0], idx]), np.concatenate([[start], val])
        if window > 1:
            idx, val = _thinned(idx, val, window)
        parts.append(pl.DataFrame({
            "time": (pl.Series(cols["time"][idx]).cast(pl.Datetime("us", "UTC")) if timed
                     else pl.Series([None] * idx.size, dtype=pl.Datetime("us", "UTC"))),
            "seq": idx.astype(np.int64), "line": (idx + first).astype(np.int64), "bytes": val.astype(np.int64),
        }).with_columns(pl.lit(series, dtype=pl.String).alias("series"), pl.lit(label, dtype=pl.String).alias("label")))
        del idx, val
    samples = pl.concat(parts)
    events = _oom_events(d, cols, first, rp, timed, paths)
    rp.allocated = rp.reserved = None   # (the curves and the OOMs had what they need of them)
    axis = _positions(cols, timed)
    span = float(axis.max() - axis.min()) if n else 0.0
    trace = {"device": d, "start_dropped": rp.freed_unseen > 0, "entries": n}
    if timed:
        trace.update(start=_iso_us(cols["time"][0]), end=_iso_us(cols["time"][-1]), seconds=span, axis="time")
        if step_starts.size:
            inside = (step_starts >= cols["time"][0]) & (step_starts <= cols["time"][-1])
            trace.update(steps=int(inside.sum()), steps_from="Optimizer.step annotations")
    else:
        trace.update(start=first, end=first + n - 1, axis="index")
    if "steps" not in trace:
        rhythm = T.repeats(cols)
        if rhythm is not None:
            trace.update(steps=rhythm[0], steps_from=f"the trace's own rhythm ({rhythm[1]} call paths allocate "
                                                     f"{rhythm[0]} times each)")

    def render(record: int) -> str:
        i = record - first
        if 0 <= i < n:
            return _entry_text(d, cols, i, paths)
        blk = next((b for b in blocks if b.record == record), None)
        return _block_text(d, blk, paths) if blk is not None else f"record {record}"

    events.extend(_site_events(T.sites(cols, rp, blocks, paths, first, axis), trace, render, timed))
    where = f"device {d}: " if multi or d else ""
    when = (f"from {_iso_us(cols['time'][0])} to {_iso_us(cols['time'][-1])} ({span:.1f} s)" if timed
            else "without time stamps (by entry number)")
    start = (f"the trace starts mid-run: {rp.freed_unseen} free{'s' if rp.freed_unseen != 1 else ''} of memory "
             "allocated before its first entry (the allocator keeps only the last max_entries events, or "
             "recording began late)" if rp.freed_unseen else
             "no free of memory the trace did not see allocated (it may hold the whole recording)")
    notes = [f"{where}{n} trace entries {when}; {rp.survivors.size} allocations of the trace still live at the dump.",
             f"{where}{start[:1].upper()}{start[1:]}.",
             f"{where}allocated and reserved over the trace are rebuilt backwards from the totals at the dump "
             f"({human(alloc_end)} allocated, {human(res_end)} reserved)"
             + ("; the trace and the segments disagree (the rebuilt curve goes below zero)" if rp.negative else "")
             + "."]
    return samples, events, notes, timed


def _where(paths: T.Paths, pid: int) -> str:
    return " ← ".join(paths.all[pid].describe(3)) if pid >= 0 else "no Python frames"


def _entry_text(d: int, cols: dict, i: int, paths: T.Paths) -> str:
    action = cols["action"][i]
    name = T.ACTIONS[action] if 0 <= action < len(T.ACTIONS) else "?"
    size = human(int(cols["size"][i]))
    t = int(cols["time"][i])
    when = f" at {_iso_us(t)}" if t != T.NO_TIME else ""
    where = _where(paths, int(cols["path"][i]))
    if action == T.OOM:
        return (f"device {d} trace entry {i + 1}: oom, {size} requested, {human(int(cols['addr'][i]))} free on the "
                f"device{when}, from {where}")
    return f"device {d} trace entry {i + 1}: {name} {size} at 0x{int(cols['addr'][i]) & (2**64 - 1):x}{when}, from {where}"


def _block_text(d: int, blk: T.Block, paths: T.Paths) -> str:
    where = _where(paths, blk.path.id) if blk.path is not None else "frames not recorded"
    return (f"device {d} block at the dump: {human(blk.size)} {blk.state} at 0x{blk.address & (2**64 - 1):x}, "
            f"from {where}")


def _oom_events(d: int, cols: dict, first: int, rp: T.Replay, timed: bool, paths: T.Paths) -> list[dict]:
    out = []
    for i in np.flatnonzero(cols["action"] == T.OOM).tolist():
        pid = int(cols["path"][i])
        detail = {"requested_bytes": int(cols["size"][i]), "device_free_bytes": int(cols["addr"][i]),
                  "allocated_bytes": int(rp.allocated[i]), "reserved_bytes": int(rp.reserved[i]),
                  "device": d, "stream": int(cols["stream"][i])}
        if pid >= 0:
            detail["site"] = paths.all[pid].site()
            detail["frames"] = paths.all[pid].describe()
        t = int(cols["time"][i])
        out.append({"time": _EPOCH + timedelta(microseconds=t) if timed else None, "line": first + i,
                    "kind": "gpu_oom", "bytes": int(cols["size"][i]), "detail": json.dumps(detail),
                    "text": _entry_text(d, cols, i, paths)})
    return out


def _site_events(site_list: list[T.Site], trace: dict, render, timed: bool) -> list[dict]:
    """One allocation_site event per call path with memory live at the dump (the largest first); its
    line and text are its latest surviving allocation, else one of its live blocks."""
    site_list = sorted(site_list, key=lambda s: (-s.survivors, -s.live_bytes))[:_MAX_SITES]
    out = []
    for s in site_list:
        if not s.live_count and not s.survivors:
            continue
        detail = {"site": s.path.site(), "frames": s.path.describe(), "live_count": s.live_count,
                  "live_bytes": s.live_bytes, "allocs": s.allocs, "survivors": s.survivors,
                  "survivor_bytes": s.survivor_bytes, "first_line": s.first_record, "last_line": s.last_record,
                  "histogram": s.histogram if s.survivors else [], "entry_quarters": s.entry_quarters,
                  "trace": trace}
        if s.first_record is not None and s.first_record != s.last_record:
            detail["first_text"] = render(s.first_record)
        line = s.last_record or s.block_record or 0
        t = s.last_time if timed and s.last_time is not None else None
        out.append({"time": _EPOCH + timedelta(microseconds=t) if t is not None else None, "line": line,
                    "kind": "allocation_site", "bytes": s.live_bytes, "detail": json.dumps(detail),
                    "text": render(line)})
    return out


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff_bytes=sniff_bytes,
    parse=parse,
    files="PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot()`, `pickle.dump(_snapshot())`, every "
          "layout since 2.0; claimed by content, read as plain data: nothing in a pickle runs)",
    yields="allocated / reserved over the trace (rebuilt from the dump), `gpu_oom` per `oom` entry, the live "
           "allocations per call path → `allocation_leak` (the path that keeps accumulating, with bytes per step)"
           " and the footprint",
)
