"""A PyTorch memory snapshot of any size whose trace varies the way a long real run's does.

    python bench/snapshot_gen.py OUT.pickle --mb 1000 [--stacks 2000] [--seed 1]

Every distribution comes from the three real snapshots in sample_logs/ (PyTorch 2.11, an H200:
snapshot_leak, snapshot_healthy, snapshot_legacy), not from one batch of entries repeated:

- call paths: the real allocation call paths, weighted as often as they allocate there, and
  `--stacks` in all: each real path with frames has variants, its user frames at other lines (the
  layers of a bigger model), which appear through the whole run (so new frames keep coming, as in a
  real run that reaches new code late); library frames stay the shared ones; frees have the real
  free call path of their allocation's path (no frames for about a third, as in the real ones);
- sizes: each path's real allocation sizes; lifetimes: each path's real lifetimes (entries from the
  allocation to its free); leaks: the leaking paths of snapshot_leak, at their real rate scaled down
  so that what leaks over the whole trace fits a device (`LEAK_BUDGET`);
- actions: alloc, then free_requested and free_completed side by side (same address and call path
  list, as PyTorch writes them), segment_alloc before an allocation at the real rate with the real
  segment sizes (that allocation shares its list), addresses handed out again after their free (the
  caching allocator: a freed block of the same size is reused, 80-95 % of allocations in the real ones);
- time: each gap between entries drawn from the real gaps (the steps' pauses included);
- the trace begins mid-run, as a ring buffer does: the run is simulated from before the first kept
  entry, so the trace starts with frees of allocations it never saw;
- the dump: the real footprint segments of snapshot_leak, a segment per segment_alloc of the trace,
  and the blocks of every allocation still live (each sharing its allocation's frames list, which
  the trace's entry then refers to, as PyTorch's pickle does); Optimizer.step annotations at the
  real step rhythm.

The bytes are the opcodes `pickle.dump` (protocol 4) writes for such a snapshot: memo, FRAMEs of
64 KiB cut between objects, APPENDS batches of 1000, every container and string memoized, the key and
action strings written once and referred to. Entries whose frames are all known are encoded many at
once (numpy); an entry with a frame seen for the first time is written the plain way. The run is
simulated twice with the same seed (the blocks of the survivors come first in the file), so memory
stays a few hundred MB whatever the size. `check()` loads a small one with `pickle.loads` and
compares it with the simulated trace.
"""
from __future__ import annotations

import argparse
import heapq
import pickle
import struct
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REAL = [ROOT / "sample_logs" / n / "snapshot.pickle" for n in ("snapshot_leak", "snapshot_healthy", "snapshot_legacy")]
FRAME = 64 * 1024      # pickle's frame size target
BATCH = 1000           # pickle.dump's APPENDS / SETITEMS batch
CHUNK = 200_000        # allocations simulated at a time
WARMUP = 2_000         # allocations simulated before the first kept entry
LEAK_BUDGET = 32 << 30  # bytes the leaking paths may keep over the whole trace
SEG_BUDGET = 32 << 30   # bytes of segments the trace may allocate
BYTES_PER_ENTRY = 104  # about, for sizing (measured on what this writes)
ADDR_BASE = 0x7A00_0000_0000
KEYS = ("action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata", "frames")
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc")
ALLOC, FREE_REQ, FREE_DONE, SEG = range(4)


# -- the real distributions ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _is_user(filename: str) -> bool:
    from forensics.parsers.torch.snapshot_trace import is_library
    return not is_library(filename)


@dataclass
class Model:
    frames: list                 # frame tuples (filename, line, name); a frame id indexes it
    stacks: list                 # call paths: tuples of frame ids (innermost first)
    base_weight: np.ndarray      # per real allocation path (index into bases): how often it allocates
    bases: list                  # real allocation paths: stack ids
    sizes: list                  # per base: (sizes, probabilities)
    lifetimes: list              # per base: lifetimes in entries (empty: none freed in the trace)
    leak_p: np.ndarray           # per base: chance an allocation is never freed (snapshot_leak)
    free_of: list                # per base: (free stack ids, probabilities)
    gaps: np.ndarray             # time between entries, microseconds
    seg_p: float                 # chance of a segment_alloc before an allocation
    seg_sizes: np.ndarray
    entries_per_step: float
    start_us: int
    footprint: list              # snapshot_leak's segments (the footprint at the dump)
    settings: dict

    def frame_id(self, t: tuple) -> int:
        i = self._ids.get(t)
        if i is None:
            i = self._ids[t] = len(self.frames)
            self.frames.append(t)
        return i

    def stack_id(self, frame_ids: tuple) -> int:
        i = self._stack_ids.get(frame_ids)
        if i is None:
            i = self._stack_ids[frame_ids] = len(self.stacks)
            self.stacks.append(frame_ids)
        return i


def model() -> Model:
    snaps = [pickle.loads(p.read_bytes()) for p in REAL]
    m = Model([], [], None, [], [], [], None, [], None, 0.0, None, 0.0, 0, snaps[0]["segments"],
              snaps[0]["allocator_settings"])
    m._ids, m._stack_ids = {}, {}
    base_of: dict[int, int] = {}
    counts, sizes, lives, leaks, frees = [], [], [], [], []
    gaps, seg_sizes, n_allocs, n_segs, steps, entries = [], [], 0, 0, 0, 0
    for snap in snaps:
        trace = snap["device_traces"][0]
        stack = [m.stack_id(tuple(m.frame_id((f["filename"], f["line"], f["name"])) for f in e["frames"]))
                 for e in trace]
        live: dict[int, tuple[int, int]] = {}
        t = np.array([e["time_us"] for e in trace])
        gaps.append(np.diff(t))
        m.start_us = m.start_us or int(t[0])
        leak_sample = snap is snaps[0]
        for i, e in enumerate(trace):
            if e["action"] == "alloc":
                b = base_of.setdefault(stack[i], len(base_of))
                if b == len(counts):
                    counts.append(0), sizes.append([]), lives.append([]), leaks.append(0), frees.append([])
                counts[b] += 1
                sizes[b].append(e["size"])
                live[e["addr"]] = (b, i)
                n_allocs += 1
            elif e["action"] == "free_requested" and e["addr"] in live:
                b, at = live.pop(e["addr"])
                lives[b].append(i - at)
                frees[b].append(stack[i])
            elif e["action"] == "segment_alloc":
                seg_sizes.append(e["size"])
                n_segs += 1
        if leak_sample:
            # what still lives at the dump of the run that leaked, but for its last step (the end of
            # any trace holds the allocations of the step in flight)
            for b, at in live.values():
                if at < len(trace) - 100:
                    leaks[b] += 1
        inside = [a for a in snap.get("external_annotations", []) if a["stage"] == "START"
                  and a["name"].startswith("Optimizer.step") and t[0] <= a["time_us"] <= t[-1]]
        steps += len(inside)
        entries += len(trace) if inside else 0
    m.bases = list(base_of)
    m.base_weight = np.array(counts, dtype=np.float64) / sum(counts)
    for b in range(len(counts)):
        vals, c = np.unique(sizes[b], return_counts=True)
        m.sizes.append((vals, c / c.sum()))
        m.lifetimes.append(np.array(lives[b], dtype=np.int64))
        fv, fc = np.unique(frees[b] or [m.stack_id(())], return_counts=True)
        m.free_of.append((fv, fc / fc.sum()))
    m.all_lifetimes = np.concatenate(m.lifetimes)
    m.leak_p = np.array(leaks, dtype=np.float64) / np.array(counts)
    m.gaps = np.concatenate(gaps)
    m.seg_p = n_segs / n_allocs
    m.seg_sizes = np.array(seg_sizes, dtype=np.int64)
    m.entries_per_step = entries / max(steps, 1)
    return m


def _variants(m: Model, n_stacks: int) -> tuple[np.ndarray, np.ndarray]:
    """The allocation paths of the run: per real path (base) and variant v, its stack id (variant 0 the
    real one; the others its user frames at other lines); and how many variants each base has (one for
    a path without user frames)."""
    with_frames = [b for b, s in enumerate(m.bases) if any(_is_user(m.frames[f][0]) for f in m.stacks[s])]
    per = max(1, -(-(n_stacks - len(m.bases)) // max(1, len(with_frames))) + 1)
    table = np.full((len(m.bases), per), -1, dtype=np.int64)
    nvar = np.ones(len(m.bases), dtype=np.int64)
    for b, s in enumerate(m.bases):
        table[b, 0] = s
        if b in with_frames:
            nvar[b] = per
            for v in range(1, per):
                table[b, v] = m.stack_id(_moved(m, m.stacks[s], v))
    return table, nvar


def _moved(m: Model, stack: tuple, v: int) -> tuple:
    """The stack with its user frames at other lines (variant v): another layer's code path."""
    out = []
    for f in stack:
        filename, line, name = m.frames[f]
        out.append(m.frame_id((filename, line + 1000 * v, name)) if _is_user(filename) else f)
    return tuple(out)


# -- the run --------------------------------------------------------------------------------------------

@dataclass
class Plan:
    """One stretch of the trace, entry by entry."""
    action: np.ndarray   # int8
    addr: np.ndarray
    size: np.ndarray
    time: np.ndarray
    stack: np.ndarray    # stack id of the frames
    list_src: np.ndarray  # -1 a new list; -2 the previous entry's list; >= 0 the list of that block
    alloc_id: np.ndarray  # global allocation number (frees: of their allocation), -1 for segments


def simulate(m: Model, n_allocs: int, n_stacks: int, seed: int, survivors: dict | None = None):
    """Yields Plans for a trace of n_allocs allocations (after the warm-up), then returns (as the
    generator's value) what is live at the dump, {allocation number: (address, size, stack)}, and the
    (address, size) of every segment_alloc of the trace. `survivors` (allocation number -> block
    number), on the second run, makes their entries refer to their block's frames list."""
    rng = np.random.default_rng(seed)
    table, nvar = _variants(m, n_stacks)
    # a long run keeps only what a device holds: the real rates of leaking and of new segments,
    # scaled down where over the whole trace they would pass that
    mean_size = float(sum(w * (s[0] * s[1]).sum() for w, s in zip(m.base_weight, m.sizes)))
    expected_leak = float((m.base_weight * m.leak_p).sum()) * n_allocs * mean_size
    leak_p = m.leak_p * min(1.0, LEAK_BUDGET / max(expected_leak, 1.0))
    seg_p = m.seg_p * min(1.0, SEG_BUDGET / max(m.seg_p * n_allocs * float(m.seg_sizes.mean()), 1.0))
    segments = []                # (address, size) of every segment_alloc of the trace
    moved: dict[tuple[int, int], int] = {}   # (free path, variant) -> its stack
    pending: list = []           # heap of (free clock, allocation number, address, size, free stack)
    pools: dict[int, list] = {}  # size -> freed addresses
    fresh = ADDR_BASE
    live: dict[int, tuple] = {}  # allocation number -> (address, size, stack) not yet freed
    t_now = m.start_us
    total = WARMUP + n_allocs
    for c0 in range(0, total, CHUNK):
        k = min(CHUNK, total - c0)
        clock = np.arange(c0, c0 + k)
        base = rng.choice(len(m.bases), size=k, p=m.base_weight)
        # variants appear through the run: at clock c, the first (c / total) of them are in use
        avail = np.maximum(1, (nvar[base] * np.minimum(1.0, (clock + 1) / (0.9 * total))).astype(np.int64))
        var = (rng.random(k) * avail).astype(np.int64)
        stack = table[base, var]
        size = np.empty(k, dtype=np.int64)
        life = np.empty(k, dtype=np.int64)
        free_stack = np.empty(k, dtype=np.int64)
        for b in np.unique(base).tolist():
            sel = np.flatnonzero(base == b)
            vals, p = m.sizes[b]
            size[sel] = rng.choice(vals, size=sel.size, p=p)
            lt = m.lifetimes[b]
            # lifetimes in entries; an allocation takes about 3 entries of the trace (alloc and a free pair)
            life[sel] = np.maximum(1, rng.choice(lt if lt.size else m.all_lifetimes, size=sel.size) // 3)
            fv, fp = m.free_of[b]
            fs = rng.choice(fv, size=sel.size, p=fp)
            # a variant's free path is its allocation's variant when the free path has user frames
            free_stack[sel] = [moved[f, v] if (f, v) in moved else moved.setdefault((f, v), m.stack_id(_moved(m, m.stacks[f], v)))
                               for f, v in zip(fs.tolist(), var[sel].tolist())]
        leak = rng.random(k) < leak_p[base]
        seg = rng.random(k) < seg_p
        seg_size = rng.choice(m.seg_sizes, size=k)
        gaps = rng.choice(m.gaps, size=4 * k)
        acts, addrs, sizes, stacks, srcs, ids = [], [], [], [], [], []
        for j, due, sz, st, lf, lk, sg, ss in zip(clock.tolist(), (clock + life).tolist(), size.tolist(), stack.tolist(),
                                                  life.tolist(), leak.tolist(), seg.tolist(), seg_size.tolist()):
            while pending and pending[0][0] <= j:
                _, aid, a, s, fst = heapq.heappop(pending)
                del live[aid]
                pools.setdefault(s, []).append(a)
                if j >= WARMUP:
                    acts += (FREE_REQ, FREE_DONE)
                    addrs += (a, a)
                    sizes += (s, s)
                    stacks += (fst, fst)
                    srcs += (-1, -2)
                    ids += (aid, aid)
            if sg:
                a = fresh
                fresh += max(ss, sz) + (1 << 21)
                if j >= WARMUP:
                    segments.append((a, ss))
                    acts.append(SEG)
                    addrs.append(a)
                    sizes.append(ss)
                    stacks.append(st)
                    srcs.append(-1)
                    ids.append(-1)
            else:
                pool = pools.get(sz)
                if pool:
                    a = pool.pop()
                else:
                    a = fresh
                    fresh += (sz + 511) // 512 * 512
            live[j] = (a, sz, st)
            if not lk:
                heapq.heappush(pending, (j + lf, j, a, sz, int(free_stack[j - c0])))
            if j >= WARMUP:
                acts.append(ALLOC)
                addrs.append(a)
                sizes.append(sz)
                stacks.append(st)
                srcs.append(-2 if sg else -1)
                ids.append(j)
        n = len(acts)
        if not n:
            continue
        time = t_now + np.cumsum(gaps[:n] if n <= gaps.size else rng.choice(m.gaps, size=n))
        t_now = int(time[-1])
        src = np.array(srcs, dtype=np.int64)
        aid = np.array(ids, dtype=np.int64)
        if survivors is not None:
            # an allocation still live at the dump shares its block's list (the segment_alloc before it too)
            blk = np.array([survivors.get(i, -1) for i in aid.tolist()], dtype=np.int64)
            act = np.array(acts, dtype=np.int8)
            own = (blk >= 0) & (act == ALLOC)
            src[own] = blk[own]
            before = np.flatnonzero(own[1:] & (act[:-1] == SEG))
            src[before] = blk[before + 1]
        yield Plan(np.array(acts, dtype=np.int8), np.array(addrs, dtype=np.int64), np.array(sizes, dtype=np.int64),
                   time, np.array(stacks, dtype=np.int64), src, aid)
    return live, segments


# -- the bytes ------------------------------------------------------------------------------------------

class Writer:
    """The opcodes pickle.dump (protocol 4) writes for plain data, in FRAMEs. Objects given with
    share=True (and those whose id is in `share`) are written once and referred to by memo index
    after; every container and string takes a memo slot, as pickle's do."""

    def __init__(self, fh):
        self.fh = fh
        self.cur = bytearray()
        self.memo: dict[int, tuple[int, object]] = {}
        self.share: set[int] = set()
        self.n = 0
        self.size = 2
        fh.write(b"\x80\x04")

    def commit(self) -> None:
        if self.cur:
            self.fh.write(b"\x95" + struct.pack("<Q", len(self.cur)) + self.cur)
            self.size += 9 + len(self.cur)
            self.cur = bytearray()

    def memoize(self, obj, share: bool) -> None:
        self.cur += b"\x94"
        if share or id(obj) in self.share:
            self.memo[id(obj)] = (self.n, obj)
        self.n += 1

    @staticmethod
    def ref(idx: int) -> bytes:
        return b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx)

    def save(self, obj, share: bool = False) -> None:
        if len(self.cur) >= FRAME:
            self.commit()
        known = self.memo.get(id(obj))
        if known is not None:
            self.cur += self.ref(known[0])
            return
        if obj is None:
            self.cur += b"N"
        elif obj is True or obj is False:
            self.cur += b"\x88" if obj else b"\x89"
        elif type(obj) is int:
            self.cur += int_bytes(obj)
        elif type(obj) is float:
            self.cur += b"G" + struct.pack(">d", obj)
        elif type(obj) is str:
            raw = obj.encode("utf-8", "surrogatepass")
            self.cur += (b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))) + raw
            self.memoize(obj, share)
        elif type(obj) is tuple:
            if not obj:
                self.cur += b")"
                return
            if len(obj) > 3:
                self.cur += b"("
            for x in obj:
                self.save(x)
            self.cur += b"t" if len(obj) > 3 else bytes([0x84 + len(obj)])
            self.memoize(obj, share)
        elif type(obj) is list:
            self.cur += b"]"
            self.memoize(obj, share)
            self.items(obj, self.save, b"a", b"e")
        elif type(obj) is dict:
            self.cur += b"}"
            self.memoize(obj, share)
            # keys, and text values, are strings PyTorch makes once and reuses
            self.items(list(obj.items()), lambda kv: (self.save(kv[0], True), self.save(kv[1], type(kv[1]) is str)),
                       b"s", b"u")
        else:
            raise TypeError(type(obj).__name__)

    def items(self, items, save_one, one: bytes, many: bytes) -> None:
        for i in range(0, len(items), BATCH):
            batch = items[i:i + BATCH]
            if len(batch) > 1:
                self.cur += b"("
            for x in batch:
                save_one(x)
            self.cur += many if len(batch) > 1 else one

    def put(self, data: bytes, cuts: np.ndarray) -> None:
        """Bytes of many objects at once; `cuts` are the offsets in data where an object starts (a
        frame may end there, as pickle.dump's does)."""
        at = 0
        while at < len(data):
            need = FRAME - len(self.cur)
            if len(data) - at < need:
                self.cur += data[at:]
                return
            i = int(np.searchsorted(cuts, at + max(need, 1)))
            if i >= cuts.size:
                self.cur += data[at:]
                return
            cut = int(cuts[i])
            self.cur += data[at:cut]
            at = cut
            self.commit()


def int_bytes(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(1 << 31) <= v < 1 << 31:
        return b"J" + struct.pack("<i", v)
    raw = v.to_bytes((v.bit_length() >> 3) + 1, "little", signed=True)
    if v < 0 and len(raw) > 1 and raw[-1] == 0xFF and raw[-2] & 0x80:
        raw = raw[:-1]
    return b"\x8a" + bytes([len(raw)]) + raw


def _ref_piece(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BINGET / LONG_BINGET of each memo index: (n, 5) bytes and their lengths."""
    out = np.zeros((idx.size, 5), dtype=np.uint8)
    short = idx < 256
    out[:, 0] = np.where(short, 0x68, 0x6A)
    out[:, 1:5] = idx.astype("<u4").view(np.uint8).reshape(-1, 4)
    return out, np.where(short, 2, 5)


def _int_piece(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BININT1 / BININT2 / BININT / LONG1 of each (non-negative) integer, as pickle writes it."""
    out = np.zeros((v.size, 10), dtype=np.uint8)
    raw = v.astype("<i8").view(np.uint8).reshape(-1, 8)
    n = 1 + sum((v >= (1 << (8 * k - 1))).astype(np.int64) for k in range(1, 8))
    op = np.select([v < 256, v < 65536, v < (1 << 31)], [0x4B, 0x4D, 0x4A], 0x8A)
    out[:, 0] = op
    long = op == 0x8A
    out[:, 1:9] = raw
    out[long, 1] = n[long]
    out[long, 2:10] = raw[long]
    return out, np.select([op == 0x4B, op == 0x4D, op == 0x4A], [2, 3, 5], 2 + n)


def _const(n: int, b: bytes) -> tuple[np.ndarray, np.ndarray]:
    return np.broadcast_to(np.frombuffer(b, dtype=np.uint8), (n, len(b))), np.full(n, len(b))


class TraceWriter:
    """A device trace's entries into the pickle: many at once where every frame they name is
    already written, one at a time (Writer) where one is new."""

    def __init__(self, w: Writer, m: Model, n_entries: int):
        self.w, self.m, self.total = w, m, n_entries
        self.keys = {k: "".join(k) for k in KEYS}            # PyTorch's own key strings, one object each
        self.actions = {a: "".join(a) for a in ACTIONS}
        self.empty = "".join("")
        self.frame_obj: dict[int, dict] = {}
        self.frame_memo = np.full(1 << 16, -1, dtype=np.int64)
        self.block_memo = np.zeros(0, dtype=np.int64)
        self.written = 0
        self.last_list = -1

    def frame(self, f: int) -> dict:
        d = self.frame_obj.get(f)
        if d is None:
            filename, line, name = self.m.frames[f]
            # new strings per frame dict, as PyTorch makes them
            d = self.frame_obj[f] = {self.keys.setdefault("name", "name"): "".join(name),
                                     self.keys.setdefault("filename", "filename"): "".join(filename),
                                     self.keys.setdefault("line", "line"): line}
            self.w.share.add(id(d))
        return d

    def note_frames(self, which=None) -> None:
        """The memo index of the frames written (of `which`, else of all)."""
        need = len(self.m.frames)
        if need > self.frame_memo.size:
            self.frame_memo = np.concatenate([self.frame_memo, np.full(need, -1, dtype=np.int64)])
        for f in (which if which is not None else list(self.frame_obj)):
            d = self.frame_obj[f]
            if self.frame_memo[f] < 0 and id(d) in self.w.memo:
                self.frame_memo[f] = self.w.memo[id(d)][0]

    def write(self, p: Plan) -> None:
        m = self.m
        n = p.action.size
        self.note_frames()
        stacks = m.stacks
        lens = np.array([len(s) for s in stacks], dtype=np.int64)
        width = int(lens.max()) if lens.size else 0
        sf = np.full((len(stacks), max(width, 1)), -1, dtype=np.int64)
        for i, s in enumerate(stacks):
            sf[i, :len(s)] = s
        # irregular: the first entry, and the first new list naming each frame not yet written
        new_list = p.list_src == -1
        ef = sf[p.stack]
        ef_new = (ef >= 0) & (self.frame_memo[np.maximum(ef, 0)] < 0) & new_list[:, None]
        rows, cols = np.nonzero(ef_new)
        _, first = np.unique(ef[rows, cols], return_index=True)
        odd = set(rows[first].tolist())
        acts = [self.actions[a] for a in ACTIONS]
        for code, name in enumerate(ACTIONS):
            if id(acts[code]) not in self.w.memo:
                hit = np.flatnonzero(p.action == code)
                if hit.size:
                    odd.add(int(hit[0]))
        if self.written == 0:
            odd.add(0)
        at = 0
        for i in sorted(odd):
            if i > at:
                self._many(p, at, i, sf, lens)
            self._one(p, i)
            at = i + 1
        if at < n:
            self._many(p, at, n, sf, lens)

    def _prefix(self, i: int) -> bytes:
        """What comes before entry number i of the list: the batch's MARK, the APPENDS of the one before."""
        if i % BATCH:
            return b""
        last_alone = i == self.total - 1 and self.total % BATCH == 1
        return (b"e" if i else b"") + (b"" if last_alone else b"(")

    def _one(self, p: Plan, i: int) -> None:
        w = self.w
        w.cur += self._prefix(self.written)
        w.cur += b"}"
        w.memoize(None, False)
        w.cur += b"("
        values = (self.actions[ACTIONS[p.action[i]]], int(p.addr[i]), int(p.size[i]), 0, int(p.time[i]),
                  "".join("N/A"), self.empty)
        for key, v in zip(KEYS, values):
            w.save(self.keys[key], True)
            w.save(v, v is self.empty or key == "action")
        w.save(self.keys["frames"], True)
        src = int(p.list_src[i])
        if src == -1:
            self.last_list = w.n
            w.cur += b"]"
            w.memoize(None, False)
            frames = self.m.stacks[p.stack[i]]
            w.items([self.frame(f) for f in frames], lambda d: w.save(d, True), b"a", b"e")
            self.note_frames(frames)
        else:
            target = self.last_list if src == -2 else int(self.block_memo[src])
            w.cur += w.ref(target)
            self.last_list = target
        w.cur += b"u"
        self._end_entry(1)

    def _end_entry(self, k: int) -> None:
        self.written += k
        if self.written == self.total:
            self.w.cur += b"e" if self.total % BATCH != 1 else b"a"

    def _many(self, p: Plan, a: int, b: int, sf: np.ndarray, lens: np.ndarray) -> None:
        w = self.w
        n = b - a
        sl = slice(a, b)
        km = {k: w.memo[id(self.keys[k])][0] for k in KEYS}
        acts = np.array([w.memo[id(self.actions[x])][0] if id(self.actions[x]) in w.memo else -1 for x in ACTIONS])
        src = p.list_src[sl]
        new = src == -1
        slots = 2 + new                       # the dict, compile_context's string, a new list
        base = w.n + np.concatenate([[0], np.cumsum(slots)[:-1]])
        # the list each entry refers to: its own, the previous entry's, or its block's
        own = np.where(new, base + 2, -1)
        blk = src >= 0
        own[blk] = self.block_memo[src[blk]]
        idx = np.arange(n)
        filled = np.where(own >= 0, idx, -1)
        np.maximum.accumulate(filled, out=filled)
        target = np.where(filled >= 0, own[np.maximum(filled, 0)], self.last_list)
        pieces = []
        index = self.written + np.arange(n)
        head = np.zeros((n, 2), dtype=np.uint8)
        hlen = np.zeros(n, dtype=np.int64)
        starts = index % BATCH == 0
        for j in np.flatnonzero(starts).tolist():
            pre = self._prefix(int(index[j]))
            head[j, :len(pre)] = np.frombuffer(pre, dtype=np.uint8)
            hlen[j] = len(pre)
        pieces.append((head, hlen))
        pieces.append(_const(n, b"}\x94("))

        def key(k):
            return _ref_piece(np.full(n, km[k], dtype=np.int64))

        pieces += [key("action"), _ref_piece(acts[p.action[sl]]),
                   key("addr"), _int_piece(p.addr[sl]), key("size"), _int_piece(p.size[sl]),
                   key("stream"), _const(n, b"K\x00"), key("time_us"), _int_piece(p.time[sl]),
                   key("compile_context"), _const(n, b"\x8c\x03N/A\x94"),
                   key("user_metadata"), _ref_piece(np.full(n, w.memo[id(self.empty)][0], dtype=np.int64)),
                   key("frames")]
        # the frames: a new list (EMPTY_LIST MEMOIZE, then nothing, one reference and APPEND, or MARK,
        # references, APPENDS) or a reference to a list written before
        k = np.where(new, lens[p.stack[sl]], 0)
        listhead = np.zeros((n, 5), dtype=np.uint8)
        lh_len = np.zeros(n, dtype=np.int64)
        listhead[new, 0], listhead[new, 1] = 0x5D, 0x94
        lh_len[new] = 2
        many = new & (k > 1)
        listhead[many, 2] = 0x28
        lh_len[many] = 3
        r, rl = _ref_piece(np.maximum(target, 0))
        old = ~new
        listhead[old] = r[old]
        lh_len[old] = rl[old]
        pieces.append((listhead, lh_len))
        fr = sf[p.stack[sl]]
        for c in range(sf.shape[1]):
            on = c < k
            r, rl = _ref_piece(self.frame_memo[np.maximum(fr[:, c], 0)])
            pieces.append((r, np.where(on, rl, 0)))
        tail = np.zeros((n, 2), dtype=np.uint8)
        tail[:, 0] = np.where(k == 1, 0x61, np.where(k > 1, 0x65, 0x75))
        tail[:, 1] = 0x75
        pieces.append((tail, np.where(k >= 1, 2, 1)))
        arr = np.hstack([pc[0] for pc in pieces])
        lengths = np.stack([pc[1] for pc in pieces], axis=1)
        mask = np.hstack([np.arange(pc[0].shape[1])[None, :] < pc[1][:, None] for pc in pieces])
        data = arr[mask].tobytes()
        flat = lengths.ravel()
        cuts = np.concatenate([[0], np.cumsum(flat)[:-1]])[flat > 0]
        w.put(data, cuts)
        w.n += int(slots.sum())
        self.last_list = int(target[-1])
        self._end_entry(n)


def _first_run(m: Model, n_allocs: int, n_stacks: int, seed: int):
    """The run without writing: its number of entries, what is live at the dump, its segments."""
    gen = simulate(m, n_allocs, n_stacks, seed)
    n = 0
    while True:
        try:
            n += next(gen).action.size
        except StopIteration as stop:
            return (n, *stop.value)


def make(path: Path, target_bytes: int, n_stacks: int = 2000, seed: int = 1, m: Model | None = None) -> dict:
    """A snapshot of about target_bytes at path; returns what it holds."""
    m = m or model()
    n_allocs = max(200, int(target_bytes / BYTES_PER_ENTRY / 2.97))
    n_entries, live, segs = _first_run(m, n_allocs, n_stacks, seed)
    survivors = {aid: i for i, aid in enumerate(sorted(live))}
    with open(path, "wb") as fh:
        w = Writer(fh)
        tw = TraceWriter(w, m, n_entries)
        w.cur += b"}"
        w.memoize(None, False)
        w.cur += b"("
        w.save("segments", True)
        blocks, lists = [], []
        for aid in sorted(live):
            a, size, st = live[aid]
            frames = [tw.frame(f) for f in m.stacks[st]]
            lists.append(frames)
            w.share.add(id(frames))
            blocks.append({"address": a, "size": size, "requested_size": size, "state": "active_allocated",
                           "frames": frames})
        segments = list(m.footprint)
        for i in range(0, len(blocks), 64):   # the survivors, 64 blocks a segment
            part = blocks[i:i + 64]
            total = sum(b["size"] for b in part)
            segments.append(_segment(min(b["address"] for b in part), total, total, part))
        for a, size in segs:                  # what the trace's segment_allocs reserved, unused at the dump
            segments.append(_segment(a, size, 0, [{"address": a, "size": size, "requested_size": 0,
                                                   "state": "inactive", "frames": []}]))
        w.save(segments)
        tw.block_memo = np.array([w.memo[id(x)][0] for x in lists], dtype=np.int64)
        w.save("device_traces", True)
        w.cur += b"]"
        w.memoize(None, False)
        w.cur += b"]"
        w.memoize(None, False)
        t0 = t1 = None
        for plan in simulate(m, n_allocs, n_stacks, seed, survivors):
            tw.write(plan)
            t0 = t0 if t0 is not None else int(plan.time[0])
            t1 = int(plan.time[-1])
        w.cur += b"a"    # the device's trace into device_traces
        w.save("allocator_settings", True)
        w.save(m.settings)
        w.save("external_annotations", True)
        _annotations(w, m, t0, t1, n_entries)
        w.cur += b"u."
        w.commit()
    return {"entries": n_entries, "bytes": path.stat().st_size, "survivors": len(live), "stacks": len(m.stacks),
            "frames": len(m.frames), "allocs": n_allocs, "seed": seed, "n_stacks": n_stacks}


def _segment(address: int, total: int, allocated: int, blocks: list) -> dict:
    return {"device": 0, "address": address, "total_size": total, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}


def _annotations(w: Writer, m: Model, t0: int, t1: int, n_entries: int) -> None:
    """Optimizer.step START/END pairs at the real step rhythm over the trace, written as a list."""
    steps = max(1, int(n_entries / m.entries_per_step))
    times = np.linspace(t0, t1, steps).astype(np.int64).tolist()
    w.cur += b"]"
    w.memoize(None, False)
    names = ("".join("Optimizer.step#Adam.step"), "".join("START"), "".join("END"))
    items = [(stage, t) for t in times for stage in (1, 2)]
    for i in range(0, len(items), BATCH):
        batch = items[i:i + BATCH]
        if len(batch) > 1:
            w.cur += b"("
        for stage, t in batch:
            w.save({"stage": names[stage], "name": names[0], "device": 0, "time_us": t + (stage - 1) * 50})
        w.cur += b"e" if len(batch) > 1 else b"a"


def check(path: Path, info: dict, m: Model) -> None:
    """A small generated snapshot loads (pickle.loads) to the simulated trace; the free pairs share
    one list, the survivors share their block's."""
    snap = pickle.loads(path.read_bytes())
    trace = snap["device_traces"][0]
    _, live, _ = _first_run(m, info["allocs"], info["n_stacks"], info["seed"])
    survivors = {aid: i for i, aid in enumerate(sorted(live))}
    block_lists = {id(b["frames"]) for s in snap["segments"] for b in s["blocks"]}
    i = 0
    for p in simulate(m, info["allocs"], info["n_stacks"], info["seed"], survivors):
        for j in range(p.action.size):
            e = trace[i]
            want = m.stacks[p.stack[j]]
            assert e["action"] == ACTIONS[p.action[j]] and e["addr"] == p.addr[j] and e["size"] == p.size[j], i
            assert e["time_us"] == p.time[j] and e["compile_context"] == "N/A" and e["user_metadata"] == "", i
            assert [(f["filename"], f["line"], f["name"]) for f in e["frames"]] == [m.frames[f] for f in want], i
            if p.list_src[j] == -2:
                assert e["frames"] is trace[i - 1]["frames"], i
            assert (p.list_src[j] >= 0) == (id(e["frames"]) in block_lists), i
            i += 1
    assert i == len(trace) == info["entries"]
    assert sum(len(s["blocks"]) for s in snap["segments"]) >= len(live)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--stacks", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="load it back with pickle.loads and compare (small only)")
    args = ap.parse_args(argv)
    m = model()
    info = make(args.out, int(args.mb * 1e6), args.stacks, args.seed, m)
    print(info)
    if args.check:
        check(args.out, info, m)
        print("checked")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
