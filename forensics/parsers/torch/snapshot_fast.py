"""Runs of a memory snapshot's trace entries read straight from the pickle's bytes, many at once (numpy).

A snapshot of a long run holds millions of trace entries, each a dict that `pickle.dump` writes the
same way: EMPTY_DICT MEMOIZE MARK, key and value pairs, SETITEMS. The keys are strings the pickle wrote
once and refers to by memo index since (PyTorch makes one string object per key name); the values are
integers, memo references (the action names, a traceback list seen before), short new strings
(compile_context, user_metadata) or new lists of references to frame dicts seen before. Read one
opcode at a time in Python that costs minutes per GB; here every entry of a stretch is decoded at
once, and an entry written any other way (the first of each action name or frame, an integer beyond
64 bits) ends the run and is left to the plain reader (snapshot_pickle.py).

Where the entries are: each starts with the same bytes (EMPTY_DICT MEMOIZE MARK and the reference to
its first key), so every place those bytes occur is a candidate; each candidate is decoded and the run
is the chain of candidates that starts where the previous one ends (a candidate inside another
entry's data is never on it). Between two APPENDS batches of the list the pickle writes APPENDS MARK,
which leaves the reader's state as it was: the chain goes on across it. FRAME headers (protocol 4+)
may fall between any two opcodes: they are taken out of the bytes first.

A run gives back each entry's fields (key memo index, value kind, value), the new traceback lists it
made (their references, and a key telling equal ones apart), and the memo slots the entries made, in
order, for the plain reader's memo (later opcodes refer to them: a traceback list is shared by the
entries of one free, by a block and its allocation).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

# value kinds
INT, REF, NEW_STR, NEW_LIST, CONST = 1, 2, 3, 4, 5
# memo slots a run made: the entry dict, a new string, else the id of a new list (>= 0)
SLOT_DICT, SLOT_STR = -2, -1
WINDOW = 8 << 20      # bytes a Scan decodes: bounds its work and memory when it finds no run
MIN_RUN = 64          # a shorter run is left to the plain reader (the numpy work costs more)
_ENTRY_HEAD = b"}\x94("
_MAX_FIELDS = 32
_FIELD_MAX_BYTES = 262   # the longest field written the regular way (a short string's key and value)
_PAD = 2 * _FIELD_MAX_BYTES + 16   # zero bytes after the data: reads past the end need no bounds checks
_BINGET, _LONG_BINGET, _MEMOIZE = 0x68, 0x6a, 0x94


@dataclass
class Run:
    n: int                  # entries read
    ends: np.ndarray        # buffer offset after each entry
    frame_ends: np.ndarray  # the end (buffer offset) of the FRAME in force after each entry, -1 none
    keys: np.ndarray        # (n, fields) key memo index, -1 past an entry's last field
    kinds: np.ndarray       # (n, fields) value kind (0 past the last field)
    values: np.ndarray      # (n, fields) the integer, the memo index referred to, or the new list's id
    list_start: np.ndarray  # new list i refers to memo indices refs[list_start[i]:][:list_count[i]]
    list_count: np.ndarray
    refs: np.ndarray

    def cut(self, n: int) -> "Run":
        """The first n entries of the run."""
        lists = int((self.kinds[:n] == NEW_LIST).sum())
        top = int(self.list_start[lists]) if lists < self.list_start.size else self.refs.size
        return Run(n, self.ends[:n], self.frame_ends[:n], self.keys[:n], self.kinds[:n], self.values[:n],
                   self.list_start[:lists], self.list_count[:lists], self.refs[:top])

    def slots(self) -> np.ndarray:
        """The memo slots the run's entries made, in order: SLOT_DICT, SLOT_STR or a new list's id."""
        made = np.where(self.kinds == NEW_STR, SLOT_STR, np.where(self.kinds == NEW_LIST, self.values, -3))
        both = np.concatenate([np.full((self.n, 1), SLOT_DICT, dtype=np.int64), made], axis=1).ravel()
        return both[both != -3]

    def list_keys(self) -> np.ndarray:
        """Per new list, (count, hash, hash) of its references: equal lists get equal rows."""
        count = self.list_count
        owner = np.repeat(np.arange(count.size), count)
        at = np.arange(self.refs.size) - np.repeat(self.list_start, count)
        u = self.refs.astype(np.uint64) + np.uint64(1)
        p = at.astype(np.uint64)
        with np.errstate(over="ignore"):
            x1 = (u * np.uint64(0x9E3779B97F4A7C15)) ^ (p * np.uint64(0xC2B2AE3D27D4EB4F))
            x2 = (u ^ np.uint64(0x165667B19E3779F9)) * np.uint64(0xD6E8FEB86659FD93) + p
            x1 ^= x1 >> np.uint64(29)
            x2 ^= x2 >> np.uint64(31)
            h1 = np.zeros(count.size, dtype=np.uint64)
            h2 = np.zeros(count.size, dtype=np.uint64)
            np.add.at(h1, owner, x1)
            np.add.at(h2, owner, x2 * np.uint64(0x9FB21C651E98DF25))
        return np.stack([count.astype(np.uint64), h1, h2], axis=1)


def _deframe(buf: bytes, pos: int, stop: int, frame_end: int | None):
    """buf[pos:stop] with FRAME headers taken out: (data, where each piece starts in data, where it
    starts in buf, where the frame of each piece ends in buf). Hops from frame to frame while a FRAME
    header is where the previous frame ends."""
    if frame_end is None or frame_end >= stop:
        return buf[pos:stop], np.array([0]), np.array([pos]), np.array([-1 if frame_end is None else frame_end])
    pieces, at_data, at_buf, ends = [buf[pos:frame_end]], [0], [pos], [frame_end]
    size = frame_end - pos
    end = frame_end
    while end + 9 <= stop and buf[end] == 0x95:
        start = end + 9
        end = start + int.from_bytes(buf[end + 1:end + 9], "little")
        piece = buf[start:min(end, stop)]
        at_data.append(size)
        at_buf.append(start)
        ends.append(end)
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces), np.array(at_data), np.array(at_buf), np.array(ends)


def _u32(b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each p: one gather of 4-byte rows of a strided view of b."""
    rows = as_strided(b, shape=(b.size - 3, 4), strides=(1, 1))
    return rows[p].view("<u4").ravel().astype(np.int64)


def _ref(b: np.ndarray, p: np.ndarray, op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(memo index, bytes) of the BINGET or LONG_BINGET at p (op is b[p])."""
    short = op == _BINGET
    idx = b[p + 1].astype(np.int64)
    far = np.flatnonzero(~short)
    if far.size:
        idx[far] = _u32(b, p[far] + 1)
    return idx, np.where(short, 2, 5)


def _is_ref(op: np.ndarray) -> np.ndarray:
    return (op == _BINGET) | (op == _LONG_BINGET)


def _long1(b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The LONG1 values (at most 8 bytes: little-endian two's complement) at p."""
    n = b[p + 1].astype(np.uint64)
    raw = as_strided(b, shape=(b.size - 7, 8), strides=(1, 1))[p + 2].view("<u8").ravel()
    short = n < 8
    low = (np.uint64(1) << (np.minimum(n, np.uint64(7)) * np.uint64(8))) - np.uint64(1)
    v = np.where(short, raw & low, raw)
    # the sign: the top bit of the last byte written, carried over the bytes not written
    neg = short & (n > 0) & ((v >> (np.maximum(n, np.uint64(1)) * np.uint64(8) - np.uint64(1))) & np.uint64(1) == 1)
    return np.where(neg, v | ~low, v).view(np.int64)


class Scan:
    """The candidate entries of a stretch of the buffer, decoded once: a run may start at any of
    them. A run ends before an entry written another way (a frame seen for the first time); the
    plain reader reads that one, and the run after it comes from the same scan."""

    def __init__(self, buf: bytes, pos: int, frame_end: int | None, window: int = WINDOW):
        self.buf, self.pos = buf, pos
        stop = min(len(buf), pos + window)
        data, self.at_data, self.at_buf, self.frame_of = _deframe(buf, pos, stop, frame_end)
        self.size = size = len(data)
        self.c = np.zeros(0, dtype=np.int64)
        if size < 16 or not data.startswith(_ENTRY_HEAD) or data[3] not in (_BINGET, _LONG_BINGET):
            return
        head = data[:5 if data[3] == _BINGET else 8]
        self.b = b = np.frombuffer(data + bytes(_PAD), dtype=np.uint8)
        c = np.flatnonzero(b[:size] == head[0])
        for j in range(1, len(head)):
            c = c[b[c + j] == head[j]]
        if c.size < MIN_RUN:
            return
        self.c = c
        self.end, self.keys, self.kinds, self.values, self.lists = _fields(b, c, size)

    def covers(self, buf: bytes, pos: int) -> bool:
        """Whether a run at buffer offset pos can come from this scan (it starts at one of its
        candidates, with most of the scan still ahead)."""
        if buf is not self.buf or not self.c.size or pos < self.pos:
            return False
        d = self._data_offset(pos)
        return d is not None and d < self.c[-1] - self.size // 4

    def _data_offset(self, pos: int) -> int | None:
        piece = int(np.searchsorted(self.at_buf, pos, side="right")) - 1
        if piece < 0:
            return None
        d = int(self.at_data[piece]) + pos - int(self.at_buf[piece])
        nxt = self.at_data[piece + 1] if piece + 1 < self.at_data.size else self.size
        return d if 0 <= d < nxt else None

    def run_at(self, pos: int) -> Run | None:
        """The run of trace entries that starts at buffer offset pos, or None when there is none
        worth reading this way."""
        d = self._data_offset(pos) if self.c.size else None
        if d is None:
            return None
        i = int(np.searchsorted(self.c, d))
        if i >= self.c.size or self.c[i] != d or self.end[i] < 0:
            return None
        chain = _chain(self.c, self.end, self.b, i)
        n = chain.size
        if n < MIN_RUN:
            return None
        owner, field, start, count, refs = self.lists
        # the run's new lists in memo order (entry, then field), numbered from 0
        rank = np.full(self.c.size, -1, dtype=np.int64)
        rank[chain] = np.arange(n)
        keep = np.flatnonzero(rank[owner] >= 0)
        keep = keep[np.lexsort((field[keep], rank[owner[keep]]))]
        renum = np.full(owner.size, -1, dtype=np.int64)
        renum[keep] = np.arange(keep.size)
        keys, kinds, values, end = self.keys[chain], self.kinds[chain], self.values[chain], self.end[chain]
        is_list = kinds == NEW_LIST
        values[is_list] = renum[values[is_list]]
        count = count[keep]
        list_start = np.zeros(keep.size, dtype=np.int64)
        if keep.size:
            list_start[1:] = np.cumsum(count)[:-1]
        # each kept list's references, gathered in the new order
        at = np.repeat(start[keep] - list_start, count) + np.arange(int(count.sum()))
        # entry ends back in the buffer's offsets (FRAME headers crossed included)
        piece = np.searchsorted(self.at_data, end, side="right") - 1
        ends = self.at_buf[piece] + end - self.at_data[piece]
        return Run(n, ends, self.frame_of[piece], keys, kinds, values, list_start, count, refs[at])


# per opcode of a value: its kind when that opcode alone says it, and its bytes when fixed
_KIND = np.zeros(256, dtype=np.int8)
_LEN = np.zeros(256, dtype=np.int64)
for _op, _kind, _len in ((0x4b, INT, 2), (0x4d, INT, 3), (0x4a, INT, 5), (_BINGET, REF, 2), (_LONG_BINGET, REF, 5),
                         (0x4e, CONST, 1), (0x88, CONST, 1), (0x89, CONST, 1)):
    _KIND[_op], _LEN[_op] = _kind, _len


def _fields(b: np.ndarray, c: np.ndarray, size: int):
    """Every candidate's fields, all at once: (end, keys, kinds, values, new lists). A candidate not
    written the regular way gets end -1. New lists: (owner candidate, field, where its references
    start in `refs`, how many, refs); a NEW_LIST value is the list's number here."""
    m = c.size
    end = np.full(m, -1, dtype=np.int64)
    cols_k, cols_t, cols_v = [], [], []
    lists = {"owner": [], "field": [], "start": [], "count": [], "refs": []}
    n_lists = n_refs = 0
    act = np.arange(m)
    p = c + 3
    for f in range(_MAX_FIELDS):
        op = b[p]
        done = op == 0x75                      # SETITEMS: the entry ends here
        end[act[done]] = p[done] + 1
        go = ~done & _is_ref(op) & (p < size)
        act, p, op = act[go], p[go], op[go]
        if not act.size:
            break
        kidx, klen = _ref(b, p, op)
        q = p + klen
        v = b[q]
        kind = _KIND[v]
        length = _LEN[v]
        val = np.zeros(act.size, dtype=np.int64)
        # only the opcodes this field holds (a field is nearly always written one way in every entry)
        for op_v in np.flatnonzero(np.bincount(v, minlength=256)).tolist():
            sel = slice(None) if v[0] == op_v and (v == op_v).all() else np.flatnonzero(v == op_v)
            qs = q[sel]
            if op_v == 0x4b:                         # BININT1
                val[sel] = b[qs + 1]
            elif op_v == 0x4d:                       # BININT2
                val[sel] = b[qs + 1].astype(np.int64) | (b[qs + 2].astype(np.int64) << 8)
            elif op_v == 0x4a:                       # BININT (signed)
                val[sel] = _u32(b, qs + 1).astype(np.uint32).view(np.int32)
            elif op_v in (_BINGET, _LONG_BINGET):    # a memo reference
                val[sel] = b[qs + 1] if op_v == _BINGET else _u32(b, qs + 1)
            elif op_v in (0x4e, 0x88, 0x89):         # None, True, False
                val[sel] = op_v
            elif op_v == 0x8a:                       # LONG1 of up to 8 bytes
                n = b[qs + 1].astype(np.int64)
                fits = n <= 8
                idx = np.arange(act.size)[sel][fits]
                kind[idx], length[idx] = INT, 2 + n[fits]
                val[idx] = _long1(b, qs[fits])
            elif op_v == 0x8c:                       # a new short string, memoized
                strlen = b[qs + 1].astype(np.int64)
                memoized = b[qs + 2 + strlen] == _MEMOIZE
                idx = np.arange(act.size)[sel][memoized]
                kind[idx], length[idx] = NEW_STR, 3 + strlen[memoized]
            elif op_v == 0x5d:                       # a new list, memoized
                sel = np.flatnonzero((v == 0x5d) & (b[q + 1] == _MEMOIZE))
                if not sel.size:
                    continue
                nbytes, cnt, refs = _new_lists(b, q[sel], size)
                ok = nbytes > 0
                good = sel[ok]
                kind[good], length[good] = NEW_LIST, nbytes[ok]
                val[good] = n_lists + np.arange(good.size)
                starts = np.zeros(sel.size, dtype=np.int64)
                starts[1:] = np.cumsum(cnt)[:-1]
                lists["owner"].append(act[good])
                lists["field"].append(np.full(good.size, f, dtype=np.int64))
                lists["start"].append(n_refs + starts[ok])
                lists["count"].append(cnt[ok])
                lists["refs"].append(refs)
                n_lists += good.size
                n_refs += refs.size
        k = np.full(m, -1, dtype=np.int64)
        t = np.zeros(m, dtype=np.int8)
        x = np.zeros(m, dtype=np.int64)
        ok = kind != 0
        act, p = act[ok], q[ok] + length[ok]
        k[act], t[act], x[act] = kidx[ok], kind[ok], val[ok]
        cols_k.append(k)
        cols_t.append(t)
        cols_v.append(x)
    end[end > size] = -1
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
    stack = (lambda cols, fill, dt: np.stack(cols, axis=1) if cols else np.full((m, 1), fill, dtype=dt))
    return (end, stack(cols_k, -1, np.int64), stack(cols_t, 0, np.int8), stack(cols_v, 0, np.int64),
            (cat(lists["owner"]), cat(lists["field"]), cat(lists["start"]), cat(lists["count"]), cat(lists["refs"])))


def _new_lists(b: np.ndarray, q: np.ndarray, size: int):
    """The new lists of references at q (EMPTY_LIST MEMOIZE, then nothing, one reference and APPEND,
    or MARK, references and APPENDS): (bytes each takes, -1 when written otherwise; reference count;
    every list's references, list after list)."""
    nbytes = np.full(q.size, 2, dtype=np.int64)     # empty unless items follow
    count = np.zeros(q.size, dtype=np.int64)
    steps = []                                      # (lists, memo index) of the k-th reference of each
    r = q + 2
    op = b[r]
    one = np.flatnonzero(_is_ref(op))
    if one.size:
        idx, rl = _ref(b, r[one], op[one])
        app = b[r[one] + rl] == 0x61
        # (a reference without APPEND after it is the next field's key: the list was empty)
        nbytes[one[app]] = 3 + rl[app]
        count[one[app]] = 1
        steps.append((one[app], idx[app]))
    many = np.flatnonzero(op == 0x28)
    nbytes[many] = -1
    s = r[many] + 1
    lst = many
    while lst.size:
        o = b[s]
        fin = o == 0x65                            # APPENDS: the list ends
        nbytes[lst[fin]] = s[fin] + 1 - q[lst[fin]]
        go = _is_ref(o) & (s < size)
        lst, s, o = lst[go], s[go], o[go]
        if not lst.size:
            break
        idx, rl = _ref(b, s, o)
        steps.append((lst, idx))
        count[lst] += 1
        s = s + rl
    count[nbytes < 0] = 0
    start = np.zeros(q.size, dtype=np.int64)
    start[1:] = np.cumsum(count)[:-1]
    refs = np.zeros(int(count.sum()), dtype=np.int64)
    # the k-th reference of list L goes to start[L] + k (a list of one came first, as step 0)
    seen = np.zeros(q.size, dtype=np.int64)
    for lst, idx in steps:
        keep = nbytes[lst] > 0
        lst, idx = lst[keep], idx[keep]
        refs[start[lst] + seen[lst]] = idx
        seen[lst] += 1
    return nbytes, count, refs


def _chain(c: np.ndarray, end: np.ndarray, b: np.ndarray, i: int = 0) -> np.ndarray:
    """The candidates, from candidate i, that follow one another: each starts where the one before
    ends, or two bytes later across APPENDS MARK (`e(`)."""
    ok = end >= 0
    e = np.where(ok, end, 0)
    nxt = e + 2 * ((b[e] == 0x65) & (b[e + 1] == 0x28))
    at = np.minimum(np.searchsorted(c, nxt), c.size - 1)
    succ = np.where(ok & (c[at] == nxt), at, -1)
    out = []
    while True:
        # a stretch where each candidate's successor is the next one needs no walking; only its last
        # one can be incomplete (an incomplete candidate has no successor)
        follows = succ[i:] == np.arange(i + 1, c.size + 1)
        j = i + (int(np.argmin(follows)) if not follows.all() else follows.size - 1)
        out.append(np.arange(i, j + (1 if ok[j] else 0)))
        if not ok[j] or succ[j] < 0:
            return np.concatenate(out)
        i = int(succ[j])
