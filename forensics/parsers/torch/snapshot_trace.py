"""What a memory snapshot's trace and segments say, as numbers: call paths, the allocations still live
at the dump grouped by call path, and allocated / reserved memory over the trace.

The trace is a ring buffer: the allocator keeps only its last `max_entries` events, so it often begins
mid-run. The totals at the dump are known exactly (the segments and their blocks), so the memory
curves are anchored there and rebuilt backwards, event by event; nothing before the first kept event
is needed. A free of an address the trace never saw allocated says the start was dropped.

An allocation is the user's until the free is requested (`free_requested`: the block may still wait
for other streams, `free_completed`); that is what `torch.cuda.memory_allocated()` counts (a block's
state `active_allocated`), so `allocated` falls at the request and the survivors are the allocations
with no request after them.
"""
from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot")
CODE = {a: i for i, a in enumerate(ACTIONS)}
ALLOC, FREE_REQUESTED = CODE["alloc"], CODE["free_requested"]
SEGMENT_GROW = (CODE["segment_alloc"], CODE["segment_map"])
SEGMENT_SHRINK = (CODE["segment_free"], CODE["segment_unmap"])
OOM = CODE["oom"]
NO_TIME = np.iinfo(np.int64).min
NO_PATH = -1
REPEAT_MIN = 4           # a call path allocating fewer times than this is no step's rhythm
REPEAT_PATHS = 2         # ... and one path alone is a loop inside a step, not the step
HISTOGRAM_BINS = 64      # how a site's survivors spread over the trace (quarters are exact: 64 = 4 x 16)

# Frames that are not the user's: PyTorch (a `torch/` folder) and installed packages, the standard
# library (`lib/python3.X/`) and the interpreter's own (<frozen ...>, <string>), and native (C++)
# frames, which name no .py file.
_LIBRARY = re.compile(r"(?:^|[/\\])(?:torch|site-packages|dist-packages)[/\\]"
                      r"|[/\\]lib(?:64)?[/\\]python3(?:\.[0-9]+)?[/\\]|^<")


@lru_cache(maxsize=1 << 16)   # a trace names a few hundred files in millions of frames
def is_library(filename: str) -> bool:
    return bool(_LIBRARY.search(filename)) or not filename.endswith(".py")


@dataclass(frozen=True)
class CallPath:
    """Where allocations come from: the user's frames (file, line, function; innermost first), whether
    library frames were folded away, and the innermost library frame (what names a site that has no
    frame of the user's, e.g. inside a library's own thread)."""
    id: int
    frames: tuple
    folded: bool
    first_library: tuple | None

    def site(self) -> str:
        """The innermost user frame as `file.py:line`, else the innermost library one."""
        f = self.frames[0] if self.frames else self.first_library
        if f is None:
            return "(no Python frames)"
        return f"{f[0].replace(chr(92), '/').rsplit('/', 1)[-1]}:{f[1]}"

    def describe(self, most: int = 8) -> list[str]:
        """The frames as people read them, innermost first, library frames folded."""
        out = [f"{f[0].replace(chr(92), '/').rsplit('/', 1)[-1]}:{f[1]} {f[2]}" for f in self.frames[:most]]
        if not self.frames and self.first_library is not None:
            f = self.first_library
            out.append(f"{f[0]}:{f[1]} {f[2]} (library)")
        if self.folded:
            out.append("(library frames folded)")
        return out


NO_FRAMES = CallPath(NO_PATH, (), False, None)


def frame_tuple(f) -> tuple | None:
    """(filename, line, name) of a frame dict, None when it is not one."""
    if type(f) is not dict:
        return None
    filename, line, name = f.get("filename"), f.get("line"), f.get("name")
    return (filename if isinstance(filename, str) else "?",
            line if type(line) is int else None,
            name if isinstance(name, str) else "?")


class Paths:
    """Call paths, one id per distinct folded path (ids index `all`)."""

    def __init__(self):
        self.all: list[CallPath] = []
        self._by_key: dict[tuple, CallPath] = {}
        self._by_list: dict[int, tuple[object, CallPath]] = {}   # id(list) -> (the list, kept alive; path)

    def of_frames(self, frames) -> CallPath | None:
        """The path of a frames value (a list of frame dicts, or a path already made); None when it is
        not one."""
        if type(frames) is CallPath:
            return frames
        if type(frames) is not list:
            return None
        known = self._by_list.get(id(frames))
        if known is not None:
            return known[1]
        tuples = [frame_tuple(f) for f in frames]
        if any(t is None for t in tuples):
            return None
        path = self.of_tuples(tuples)
        self._by_list[id(frames)] = (frames, path)
        return path

    def of_tuples(self, tuples: list[tuple]) -> CallPath:
        if not tuples:
            return NO_FRAMES
        lib = [is_library(t[0]) for t in tuples]
        user = tuple(t for t, x in zip(tuples, lib) if not x)
        first_lib = next((t for t, x in zip(tuples, lib) if x), None)
        key = (user, None if user else first_lib)
        path = self._by_key.get(key)
        if path is None:
            path = CallPath(len(self.all), user, first_lib is not None, first_lib)
            self.all.append(path)
            self._by_key[key] = path
        return path


class Columns:
    """A device trace's entries, compact: appended a row at a time (the plain reader) or an array at
    a time (runs read from the bytes); `arrays()` gives them in order. The runs go straight into one
    array per column, grown by a quarter when full (a long trace's many small pieces, kept apart,
    would leave their memory behind in the heap once joined)."""

    NAMES = ("action", "addr", "size", "stream", "time", "path")
    TYPES = ("b", "q", "q", "q", "q", "i")
    DTYPES = (np.int8, np.int64, np.int64, np.int64, np.int64, np.int32)

    def __init__(self):
        self._rows = [array(t) for t in self.TYPES]
        self._cols = [np.zeros(0, dtype=d) for d in self.DTYPES]
        self._n = 0

    def add(self, action: int, addr: int, size: int, stream: int, time: int, path: int) -> None:
        a = self._rows
        a[0].append(action)
        a[1].append(addr)
        a[2].append(size)
        a[3].append(stream)
        a[4].append(time)
        a[5].append(path)

    def _flush_rows(self) -> None:
        if len(self._rows[0]):
            rows = [np.frombuffer(a, dtype=d) for a, d in zip(self._rows, self.DTYPES)]
            self._rows = [array(t) for t in self.TYPES]
            self.add_arrays(rows)

    def add_arrays(self, cols: list[np.ndarray]) -> None:
        if len(self._rows[0]):
            self._flush_rows()
        k = cols[0].size
        need = self._n + k
        if need > self._cols[0].size:
            size = max(need, self._cols[0].size * 5 // 4, 1024)
            for i, old in enumerate(self._cols):   # one column at a time: its old copy goes first
                grown = np.empty(size, dtype=old.dtype)
                grown[:self._n] = old[:self._n]
                self._cols[i] = grown
                del old, grown
        for col, part in zip(self._cols, cols):
            col[self._n:need] = part
        self._n = need

    def __len__(self) -> int:
        return self._n + len(self._rows[0])

    def arrays(self) -> dict[str, np.ndarray]:
        self._flush_rows()
        for i, col in enumerate(self._cols):   # the room left over given back, a column at a time
            if col.size != self._n:
                self._cols[i] = col[:self._n].copy()
                del col
        return dict(zip(self.NAMES, self._cols))


@dataclass
class Block:
    """A block of a segment at the dump."""
    address: int
    size: int
    state: str
    path: CallPath | None
    record: int          # its record number (the evidence line)


@dataclass
class Site:
    """The allocations of one call path live at the dump, and how they came to be."""
    path: CallPath
    live_count: int = 0          # blocks live at the dump (segments)
    live_bytes: int = 0
    allocs: int = 0              # allocations from this path in the trace
    survivors: int = 0           # of them, still live at the dump
    survivor_bytes: int = 0
    first_record: int | None = None   # the first and last surviving allocation (evidence lines)
    last_record: int | None = None
    last_time: int | None = None
    histogram: list = field(default_factory=list)   # [count, bytes] of survivors per 1/64 of the trace
    # survivors per quarter of the trace's entries: its activity, where a pause (data loading, a
    # checkpoint) that takes a quarter of its clock holds no entries
    entry_quarters: list = field(default_factory=lambda: [0, 0, 0, 0])
    block_record: int | None = None   # a live block of this path (evidence when the trace has none)


@dataclass
class Replay:
    """What the trace of one device says once replayed."""
    survivors: np.ndarray        # entry indices of allocations still live at the dump
    freed_unseen: int            # frees of addresses the trace never saw allocated
    allocated: np.ndarray        # allocated bytes after each entry (anchored at the dump)
    reserved: np.ndarray
    allocated_start: int
    reserved_start: int
    negative: bool               # the backward curve went below zero: trace and segments disagree


def replay(cols: dict[str, np.ndarray], allocated_end: int, reserved_end: int) -> Replay:
    action, addr, size = cols["action"], cols["addr"], cols["size"]
    n = action.size
    alloc = action == ALLOC
    freed = action == FREE_REQUESTED
    # per address, in trace order: an allocation is freed when the next event on its address is a
    # free request; a free whose address had no allocation before it in the trace freed older memory
    ev = np.flatnonzero(alloc | freed)
    order = ev[np.lexsort((ev, addr[ev]))]
    a_ord, f_ord = alloc[order], freed[order]
    same_next = np.zeros(order.size, dtype=bool)
    if order.size > 1:
        same_next[:-1] = addr[order[1:]] == addr[order[:-1]]
    next_is_free = np.zeros(order.size, dtype=bool)
    next_is_free[:-1] = same_next[:-1] & f_ord[1:]
    survivors = np.sort(order[a_ord & ~next_is_free & ~same_next])
    prev_same = np.zeros(order.size, dtype=bool)
    prev_same[1:] = same_next[:-1]
    prev_alloc = np.zeros(order.size, dtype=bool)
    prev_alloc[1:] = a_ord[:-1]
    freed_unseen = int((f_ord & ~(prev_same & prev_alloc)).sum())
    # (a long trace's per-entry arrays are let go before the next ones are made: memory is a few
    # arrays of the trace's length at a time)
    del ev, order, a_ord, f_ord, same_next, next_is_free, prev_same, prev_alloc
    # value after entry i = value at the dump minus what the entries after i changed (a running sum
    # made in place)
    a_after = np.zeros(n, dtype=np.int64)
    np.copyto(a_after, size, where=alloc)
    np.subtract(a_after, size, out=a_after, where=freed)
    del alloc, freed
    a_total = a_after.sum()
    np.cumsum(a_after, out=a_after)
    a_after -= a_total   # (in int64 as the sums are: any order gives the same values)
    a_after += allocated_end
    r_after = np.zeros(n, dtype=np.int64)
    np.copyto(r_after, size, where=np.isin(action, SEGMENT_GROW))
    np.subtract(r_after, size, out=r_after, where=np.isin(action, SEGMENT_SHRINK))
    r_total = r_after.sum()
    np.cumsum(r_after, out=r_after)
    r_after -= r_total
    r_after += reserved_end
    a0 = int(allocated_end - a_total) if n else allocated_end
    r0 = int(reserved_end - r_total) if n else reserved_end
    negative = bool(min(a0, r0) < 0 or (n and (a_after.min() < 0 or r_after.min() < 0)))
    return Replay(survivors, freed_unseen, a_after, r_after, a0, r0, negative)


def repeats(cols: dict[str, np.ndarray]) -> tuple[int, int] | None:
    """Steps from the trace's own rhythm, for a trace without Optimizer.step annotations: a training
    step runs the same lines once each, so the number of allocations that most call paths allocating
    again and again share is the number of steps the trace holds (with how many paths share it)."""
    allocs = cols["path"][cols["action"] == ALLOC]
    _, counts = np.unique(allocs[allocs >= 0], return_counts=True)
    counts = counts[counts >= REPEAT_MIN]
    if not counts.size:
        return None
    vals, paths = np.unique(counts, return_counts=True)
    best = int(paths.argmax())
    return (int(vals[best]), int(paths[best])) if paths[best] >= REPEAT_PATHS else None


def sites(cols: dict[str, np.ndarray], rp: Replay, blocks: list[Block], paths: Paths, first_record: int,
          axis: np.ndarray) -> list[Site]:
    """The sites of one device: every call path with blocks live at the dump or allocations that
    survived in the trace. `axis` is each entry's position on the trace's axis (time or index), for
    the histograms; `first_record` the record number of the trace's first entry."""
    path_col, size = cols["path"], cols["size"]
    by_path: dict[int, Site] = {}

    def site_of(pid: int) -> Site:
        s = by_path.get(pid)
        if s is None:
            s = by_path[pid] = Site(paths.all[pid] if pid >= 0 else NO_FRAMES,
                                    histogram=[[0, 0] for _ in range(HISTOGRAM_BINS)])
        return s

    allocs = np.flatnonzero(cols["action"] == ALLOC)
    ids, counts = np.unique(path_col[allocs], return_counts=True)
    for pid, c in zip(ids.tolist(), counts.tolist()):
        site_of(pid).allocs = c
    surv = rp.survivors
    lo, hi = (float(axis.min()), float(axis.max())) if axis.size else (0.0, 1.0)
    span = (hi - lo) or 1.0
    bins = np.minimum(((axis[surv] - lo) / span * HISTOGRAM_BINS).astype(np.int64), HISTOGRAM_BINS - 1)
    survivor_path = {}
    times = cols["time"]
    quarter = (surv * 4 // max(1, path_col.size)).tolist()
    for i, pid, b, sz, q in zip(surv.tolist(), path_col[surv].tolist(), bins.tolist(), size[surv].tolist(), quarter):
        s = site_of(pid)
        s.survivors += 1
        s.entry_quarters[q] += 1
        s.survivor_bytes += sz
        s.histogram[b][0] += 1
        s.histogram[b][1] += sz
        rec = first_record + i
        if s.first_record is None:
            s.first_record = rec
        s.last_record, s.last_time = rec, int(times[i])
        survivor_path[int(cols["addr"][i])] = pid
    for blk in blocks:
        if blk.state != "active_allocated":
            continue
        path = blk.path
        pid = path.id if path is not None else survivor_path.get(blk.address, NO_PATH)
        s = site_of(pid)
        s.live_count += 1
        s.live_bytes += blk.size
        if s.block_record is None:
            s.block_record = blk.record
    return list(by_path.values())
