"""A memory snapshot's trace entries into compact columns as the pickle is read (numpy only).

The plain reader (snapshot_pickle.py) calls `on_items` when items are appended to a list: a list whose
first item is a dict with an `action` is a device trace, and its entries go into a Columns of six
integers each (action, address, size, stream, time, call path) instead of into the list; and it calls
`skip` at each dict inside a trace's items, where a run of entries is read straight from the bytes
(snapshot_fast.py) when they are written the regular way. Either way each entry gives the same row;
the memo slots a run made hold what later opcodes may need of them (a traceback's call path).
"""
from __future__ import annotations

import numpy as np

from forensics.parsers.torch import snapshot_fast as fast
from forensics.parsers.torch import snapshot_trace as T
from forensics.parsers.torch.snapshot_pickle import PlainUnpickler

TEXT_NOT_KEPT = "(text not kept)"   # a string read from the bytes that the analysis does not use
_BACKOFF = 512        # bytes the plain reader reads after a failed try before the next (a few entries)


class TraceReader:
    """The plain reader's hooks: trace entries go into compact columns instead of lists of dicts."""

    def __init__(self):
        self.paths = T.Paths()
        self.traces: dict[int, tuple[list, T.Columns]] = {}   # id(trace list) -> (the list, its entries)
        self.keys: set[str] = set()
        self.skipped: dict[int, list[int]] = {}   # id(its Columns) -> a trace's entries not understood (0-based)
        self.from_bytes = 0               # entries read in runs straight from the bytes
        self._by_key: dict[tuple, T.CallPath | None] = {}   # a list of frames' key (fast.Run.list_keys) -> path
        self._rewrites = 0
        self._retry_at = 0
        self._backoff = _BACKOFF
        self._scan: fast.Scan | None = None

    def release(self) -> None:
        """Let go of what only reading needed (the last scan, the cache of call paths by key)."""
        self._scan = None
        self._by_key = {}

    def on_items(self, lst: list, items: list) -> bool:
        known = self.traces.get(id(lst))
        if known is None:
            first = items[0]
            if lst or type(first) is not dict or "action" not in first:
                return False
            known = self.traces[id(lst)] = (lst, T.Columns())
        for e in items:
            self._entry(known[1], e)
        return True

    def _entry(self, cols: T.Columns, e) -> None:
        code = T.CODE.get(e.get("action")) if type(e) is dict and isinstance(e.get("action"), str) else None
        if code is None:
            self.skipped.setdefault(id(cols), []).append(len(cols))
            cols.add(-1, 0, 0, 0, T.NO_TIME, T.NO_PATH)
            return
        self.keys.update(k for k in e if isinstance(k, str))
        get = e.get
        addr, size, stream, t = get("device_free" if code == T.OOM else "addr"), get("size"), get("stream"), get("time_us")
        path = self.paths.of_frames(get("frames"))
        cols.add(code, addr if type(addr) is int and -(1 << 63) <= addr < 1 << 63 else 0,
                 size if type(size) is int and 0 <= size < 1 << 62 else 0,
                 stream if type(stream) is int and -(1 << 63) <= stream < 1 << 63 else 0,
                 t if type(t) is int and -(1 << 63) < t < 1 << 63 else T.NO_TIME,
                 path.id if path is not None else T.NO_PATH)
        e.clear()   # its memo slot keeps the dict; its contents are not needed again

    def skip(self, vm: PlainUnpickler) -> bool:
        """A run of entries of a known trace read straight from the bytes (snapshot_fast); after a
        try that found none, the plain reader reads on a while before the next (doubling the while
        from a few entries: in a long trace most failures are one entry written the plain way, a
        frame seen for the first time, and the entries after it are regular again). A stretch of
        the buffer is scanned once; the runs on both sides of such an entry come from that scan."""
        k = vm.marks[-1]
        known = self.traces.get(id(vm.stack[k - 1]))
        if known is None or vm.offset < self._retry_at:
            return False
        if self._scan is None or not self._scan.covers(vm.buf, vm.pos):
            frame_end = vm.frame_end - vm.base if vm.frame_end is not None else None
            self._scan = fast.Scan(vm.buf, vm.pos, frame_end)
        run = self._scan.run_at(vm.pos)
        taken = self._run(run, vm.memo, vm.rewrites) if run is not None else None
        if taken is None:
            self._retry_at = vm.offset + self._backoff
            self._backoff = min(2 * self._backoff, 16 << 20)
            return False
        self._backoff = _BACKOFF
        run, cols, slots = taken
        # the entries of this batch the plain reader made before the run come first
        for e in vm.stack[k:]:
            self._entry(known[1], e)
        del vm.stack[k:]
        known[1].add_arrays(cols)
        vm.memo.extend(slots)
        self.from_bytes += run.n
        vm.pos = int(run.ends[-1])
        fe = int(run.frame_ends[-1])
        vm.frame_end = vm.base + fe if fe >= 0 else None
        return True

    def _run(self, run: fast.Run, memo: list, rewrites: int):
        """(the run cut before its first entry this reader cannot take, its columns, the memo slots
        it made) or None when too little of it is usable."""
        base = len(memo)
        names = {}
        # the keys of each field: one in (nearly) every column, so look before sorting
        distinct: set[int] = set()
        for j in range(run.keys.shape[1]):
            col = run.keys[:, j]
            same = col[0] >= 0 and bool((col == col[0]).all())
            distinct.update([int(col[0])] if same else np.unique(col[col >= 0]).tolist())
        for k in sorted(distinct):
            obj = memo[k] if k < base else None
            if not isinstance(obj, str) or obj == TEXT_NOT_KEPT:
                return None    # a key the plain reader has not seen as a string: not this reader's run
            names[k] = obj
        n = run.n
        rows = np.arange(n)
        # the field each key name is in, per entry: keys come in the same order in nearly every
        # entry, so a column that holds one key in all of them is that key's (no search)
        code_of = {name: i for i, name in enumerate(sorted(set(names.values())))}
        lut = np.full(max(names) + 2, -1, dtype=np.int64)
        for k, name in names.items():
            lut[k] = code_of[name]
        named = lut[np.where(run.keys >= 0, run.keys, lut.size - 1)]
        column_of = {}
        for j in range(named.shape[1]):
            col = named[:, j]
            if col[0] >= 0 and (col == col[0]).all():
                column_of[int(col[0])] = j

        def field(name: str):
            code = code_of.get(name)
            if code is None:
                return np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int8), np.zeros(n, dtype=np.int64)
            j = column_of.get(code)
            if j is not None:
                return np.ones(n, dtype=bool), run.kinds[:, j], run.values[:, j]
            hit = named == code
            has = hit.any(axis=1)
            col = hit.argmax(axis=1)
            return has, run.kinds[rows, col], run.values[rows, col]

        bad = np.zeros(n, dtype=bool)
        has, kind, val = field("action")
        action = np.full(n, -1, dtype=np.int64)
        bad |= ~has | (kind != fast.REF)
        for idx in np.unique(val[has & (kind == fast.REF)]).tolist():
            obj = memo[idx] if idx < base else None
            code = T.CODE.get(obj) if isinstance(obj, str) else None
            sel = has & (kind == fast.REF) & (val == idx)
            if code is None:
                bad |= sel
            else:
                action[sel] = code
        out = {}
        for name in ("addr", "device_free", "size", "stream", "time_us"):
            has_f, kind_f, val_f = field(name)
            bad |= has_f & (kind_f != fast.INT)
            out[name] = (has_f, val_f)
        bad |= out["size"][1] < 0
        slots = run.slots()
        path, bad_paths = self._paths(run, memo, base, slots, field, rewrites)
        bad |= bad_paths
        cut = int(np.argmax(bad)) if bad.any() else n
        if cut < fast.MIN_RUN:
            return None
        if cut < n:
            run = run.cut(cut)
            slots = run.slots()
            action, path = action[:cut], path[:cut]
            out = {k: (h[:cut], v[:cut]) for k, (h, v) in out.items()}
        self.keys.update(names.values())
        oom = action == T.OOM
        addr = np.where(oom, np.where(out["device_free"][0], out["device_free"][1], 0),
                        np.where(out["addr"][0], out["addr"][1], 0))
        time = np.where(out["time_us"][0], out["time_us"][1], T.NO_TIME)
        cols = [action.astype(np.int8), addr, np.where(out["size"][0], out["size"][1], 0),
                np.where(out["stream"][0], out["stream"][1], 0), time, path.astype(np.int32)]
        # what the run's memo slots hold from now on: nothing for an entry, a placeholder for a string,
        # the path for a traceback list (a later reference needs only that)
        table = np.empty(len(self._list_paths) + 2, dtype=object)
        table[:-2] = self._list_paths
        table[-2], table[-1] = TEXT_NOT_KEPT, None
        objs = table[np.where(slots >= 0, slots, np.where(slots == fast.SLOT_STR, -2, -1))].tolist()
        return run, cols, objs

    def _paths(self, run: fast.Run, memo: list, base: int, slots: np.ndarray, field, rewrites: int):
        """Each entry's call path id, and which entries have frames this reader cannot take. Sets
        `_list_paths`: the CallPath of each new list of the run (what its memo slot will hold)."""
        n = run.n
        has, kind, val = field("frames")
        path = np.full(n, T.NO_PATH, dtype=np.int64)
        bad = has & (kind != fast.REF) & (kind != fast.NEW_LIST)
        # new lists: one path per distinct list of references, from a representative
        list_key = run.list_keys()
        # one 64-bit hash tells the lists apart; the other and the count check that it did
        _, first, inverse = np.unique(list_key[:, 1], return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        if not (list_key[first[inverse]] == list_key).all():
            _, first, inverse = np.unique(list_key, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.ravel()
        rep_paths: list[T.CallPath | None] = []
        # the same frames again (most lists of a long trace): their path by the key of their
        # references, as long as the memo has not been written over since (pickle.dump never does)
        if self._rewrites != rewrites:
            self._by_key.clear()
            self._rewrites = rewrites
        cache = self._by_key
        for i, key in zip(first.tolist(), map(tuple, list_key[first].tolist())):
            hit = cache.get(key, False)
            if hit is not False:
                rep_paths.append(hit)
                continue
            s, c = int(run.list_start[i]), int(run.list_count[i])
            refs = run.refs[s:s + c].tolist()
            frames = [T.frame_tuple(memo[r]) if r < base else None for r in refs]
            made = None if any(f is None for f in frames) else self.paths.of_tuples(frames)
            if all(r < base for r in refs):   # (a run's own objects are other objects in the next run)
                cache[key] = made
            rep_paths.append(made)
        # per distinct list: its path id (-2: frames this reader cannot take); per list: its own
        rep_id = np.array([p.id if p is not None else -2 for p in rep_paths], dtype=np.int64)
        table = np.empty(len(rep_paths), dtype=object)
        table[:] = rep_paths
        self._list_paths = table[inverse].tolist()
        list_id = rep_id[inverse] if inverse.size else np.zeros(0, dtype=np.int64)
        new = has & (kind == fast.NEW_LIST)
        got = list_id[val[new]] if list_id.size else np.zeros(0, dtype=np.int64)
        bad[new] |= got == -2
        path[new] = np.where(got == -2, T.NO_PATH, got)
        # references: to a new list of this run (most: a free's second entry shares the first's
        # traceback), else to a list the plain reader made or a path a run made before
        ref = np.flatnonzero(has & (kind == fast.REF))
        idx = val[ref]
        mine = idx >= base
        slot = np.where(mine, idx - base, 0)
        inside = mine & (slot < slots.size)
        slot_list = np.where(inside, slots[np.minimum(slot, max(slots.size - 1, 0))] if slots.size else -1, -1)
        got = np.full(ref.size, -2, dtype=np.int64)
        ok = inside & (slot_list >= 0)
        got[ok] = list_id[slot_list[ok]]
        old = np.flatnonzero(~mine)
        if old.size:
            uniq, inv = np.unique(idx[old], return_inverse=True)
            ids = np.array([(lambda p: p.id if p is not None else -2)(self.paths.of_frames(memo[i]))
                            for i in uniq.tolist()], dtype=np.int64)
            got[old] = ids[inv.ravel()]
        bad[ref] |= got == -2
        path[ref] = np.where(got == -2, T.NO_PATH, got)
        return path, bad
