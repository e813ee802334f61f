"""How long reading a big PyTorch memory snapshot takes, and how much memory it needs.

    python bench/snapshot_read.py                    # ~100 MB and ~1 GB snapshots in a temporary folder
    python bench/snapshot_read.py --sizes 100 --pickle-load   # also time pickle.load (what memory_viz does)

The snapshots are made from the real one in sample_logs/snapshot_leak/ (PyTorch 2.11, an H200): the
same keys, frames and actions, its first 1000 trace entries (one APPENDS batch) repeated, each copy
moved in time and to its own addresses, the optimizer-step annotations with them, and a block at the
dump for every allocation that no copy frees (so the segments agree with the trace). The bytes are the
opcodes `pickle.dump` writes for such a snapshot (PROTO 4, memo, FRAMEs, batches of 1000), written
directly so that a 1 GB file takes a minute to make and little memory; a small one is checked to load
with `pickle.loads` to what it should be.

Each read runs in its own process (`gpu-forensics`'s parser, as `report` calls it), which reports its
wall time and its peak RSS; the table goes to stdout.
"""
from __future__ import annotations

import argparse
import io
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_logs" / "snapshot_leak" / "snapshot.pickle"
UNIT = 1000            # trace entries per repeated copy: one APPENDS batch of pickle.dump
FRAME = 64 * 1024      # pickle's frame size target
ADDR_STEP = 1 << 32    # each copy's addresses lie this far below the previous copy's


class Writer:
    """The opcodes pickle.dump (protocol 4) writes for plain data, into FRAMEs. Objects given with
    share=True are written once and referred to by memo index after; every container and string
    takes a memo slot, as pickle's do."""

    def __init__(self, fh):
        self.fh = fh
        self.cur = bytearray()
        self.memo: dict[int, tuple[int, object]] = {}
        self.share: set[int] = set()     # ids of objects to write once (PyTorch shares them)
        self.framing = True              # off while one copy of the trace is made (it is one frame)
        self.n = 0
        fh.write(b"\x80\x04")

    def commit(self) -> None:
        if self.cur:
            self.fh.write(b"\x95" + struct.pack("<Q", len(self.cur)) + self.cur)
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
        if self.framing and len(self.cur) >= FRAME:
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
            self.items(obj, lambda x: self.save(x), b"a", b"e")
        elif type(obj) is dict:
            self.cur += b"}"
            self.memoize(obj, share)
            # keys, and text values, are strings PyTorch makes once and reuses
            self.items(list(obj.items()), lambda kv: (self.save(kv[0], True), self.save(kv[1], type(kv[1]) is str)),
                       b"s", b"u")
        else:
            raise TypeError(type(obj).__name__)

    def items(self, items, save_one, one: bytes, many: bytes) -> None:
        for i in range(0, len(items), UNIT):
            batch = items[i:i + UNIT]
            if len(batch) > 1:
                self.cur += b"("
            for x in batch:
                save_one(x)
            self.cur += many if len(batch) > 1 else one


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


def _unit_template(w: Writer, entries: list[dict], copy: int, span: int) -> tuple[bytes, list, int]:
    """One copy's bytes as the writer makes them (its addresses and times moved for that copy), the
    places to patch to make a later copy of it ((offset, what, width)), and the memo slots it took."""
    w.commit()
    w.framing = False
    start_n = w.n
    patches = []
    lists: dict[int, int] = {}    # id of a template frames list -> its memo index in this copy
    w.cur += b"("
    for e in entries:
        w.cur += b"}"
        w.memoize(e, False)
        w.cur += b"("
        for k, v in e.items():
            w.save(k, True)
            if k in ("addr", "time_us") and type(v) is int and int_bytes(v)[0] == 0x8A:   # a LONG1 to patch
                v = v - copy * ADDR_STEP if k == "addr" else v + copy * span
                patches.append((len(w.cur) + 2, k, len(int_bytes(v)) - 2))
                w.cur += int_bytes(v)
            elif k == "frames":
                if id(v) in lists:
                    patches.append((len(w.cur) + 1, "memo", 4))
                    w.cur += b"j" + struct.pack("<I", lists[id(v)])
                else:
                    lists[id(v)] = w.n
                    w.cur += b"]"
                    w.memoize(v, False)
                    w.items(v, lambda f: w.save(f, True), b"a", b"e")
            elif k == "compile_context":
                w.save("".join(v))    # a new string per entry, as PyTorch makes
            else:
                w.save(v, True)
        w.cur += b"u"
    w.cur += b"e"
    body = bytes(w.cur)
    w.cur = bytearray()
    w.framing = True
    return body, patches, w.n - start_n


def _patched(body: bytes, patches, copy: int, slots: int, span_us: int) -> bytes:
    out = bytearray(body)
    for at, what, width in patches:
        v = int.from_bytes(out[at:at + width], "little", signed=what != "memo")
        v = v + copy * slots if what == "memo" else v - copy * ADDR_STEP if what == "addr" else v + copy * span_us
        raw = v.to_bytes(width, "little", signed=what != "memo")
        out[at:at + width] = raw
    return bytes(out)


def _copy_of(real: dict) -> tuple[list, list]:
    """The entries of one copy (one APPENDS batch: UNIT entries) and its survivors. A copy is the
    real trace's allocations and frees (not its segment calls, nor its frees of memory allocated
    before it began: repeated, those would make the segments disagree with the trace), starting with
    the frees of the previous copy's survivors, so that the copies do not pile up: a steady loop."""
    seen: set[int] = set()
    trace = []
    for e in real["device_traces"][0]:
        if e["action"] == "alloc":
            seen.add(e["addr"])
        if e["action"] in ("alloc", "free_requested", "free_completed") and (e["action"] == "alloc" or e["addr"] in seen):
            trace.append(e)
    n = UNIT
    while True:
        live: dict[int, dict] = {}
        for e in trace[:n]:
            if e["action"] == "alloc":
                live[e["addr"]] = e
            elif e["action"] == "free_requested":
                live.pop(e["addr"], None)
        if n + 2 * len(live) <= UNIT:
            break
        n -= 1
    body = trace[:n]
    # (the completions of frees of the survivors' allocations fall outside the copy: a few more
    # entries that change nothing live fill the batch to UNIT)
    body += [e for e in trace[n:] if e["action"] == "free_completed" and e["addr"] not in live][:UNIT - n - 2 * len(live)]
    release = next(e for e in body if e["action"] == "free_requested" and e["frames"])
    frees = []
    for s in live.values():
        frames = list(release["frames"])
        for action in ("free_requested", "free_completed"):
            # (an address of the copy before: each copy's addresses lie ADDR_STEP below the last's)
            frees.append(dict(s, action=action, addr=s["addr"] + ADDR_STEP, time_us=body[0]["time_us"],
                              frames=frames))
    return frees + body, list(live.values())


def make(path: Path, target_bytes: int) -> dict:
    """A snapshot of about target_bytes at path; returns what it holds."""
    real = pickle.loads(SAMPLE.read_bytes())
    entries, survivors = _copy_of(real)
    t0, t1 = entries[0]["time_us"], entries[-1]["time_us"]
    span = t1 - t0 + 1000
    annotations = [a for a in real["external_annotations"] if t0 <= a["time_us"] <= t1]
    sizes = [_write(io.BytesIO(), real, entries, annotations, survivors, n, span) for n in (2, 4)]
    copies = max(2, round(2 + (target_bytes - sizes[0]) / ((sizes[1] - sizes[0]) / 2)))
    with open(path, "wb") as fh:
        _write(fh, real, entries, annotations, survivors, copies, span)
    return {"copies": copies, "entries": copies * len(entries), "bytes": path.stat().st_size}


def _write(fh, real: dict, trace: list, annotations: list, survivors: list, copies: int, span: int) -> int:
    w = Writer(fh)
    w.cur += b"}"
    w.memoize({}, False)
    w.cur += b"("
    w.save("segments", True)
    # the dump: the real segments, and one holding the last copy's survivors; a block's frames list
    # is its allocation's (PyTorch shares it), the frame dicts in it the sample's shared ones
    w.share.update(id(fr) for e in trace for fr in e["frames"])
    last = copies - 1
    blocks = [{"address": e["addr"] - last * ADDR_STEP, "size": e["size"], "requested_size": e["size"],
               "state": "active_allocated", "frames": list(e["frames"])} for e in survivors]
    total = sum(b["size"] for b in blocks)
    w.save(real["segments"] + [{
        "device": 0, "address": min(b["address"] for b in blocks), "total_size": total, "allocated_size": total,
        "active_size": total, "requested_size": total, "stream": 0, "segment_type": "large",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}])
    w.save("device_traces", True)
    w.cur += b"]"
    w.memoize([], False)
    w.cur += b"]"
    w.memoize([], False)
    # the first copy writes the keys, action names and frames the others refer to; the second is
    # the template of the rest
    for c in range(min(copies, 2)):
        body, patches, slots = _unit_template(w, trace, c, span)
        w.fh.write(b"\x95" + struct.pack("<Q", len(body)) + body)
    for c in range(2, copies):
        unit = _patched(body, patches, c - 1, slots, span)
        w.fh.write(b"\x95" + struct.pack("<Q", len(unit)) + unit)
        w.n += slots
    w.cur += b"a"    # the device's trace into device_traces
    w.save("allocator_settings", True)
    w.save(real["allocator_settings"])
    w.save("external_annotations", True)
    every = [dict(a, time_us=a["time_us"] + c * span) for c in range(copies) for a in annotations]
    w.save(every)
    w.cur += b"u."
    w.commit()
    return fh.tell() if hasattr(fh, "tell") else 0


def _check(path: Path) -> None:
    """A small generated snapshot loads (pickle.loads) with its copies where they should be."""
    snap = pickle.loads(path.read_bytes())
    trace = snap["device_traces"][0]
    assert len(trace) % UNIT == 0 and trace[UNIT]["action"] == trace[0]["action"]
    assert trace[UNIT]["time_us"] > trace[UNIT - 1]["time_us"]
    assert trace[UNIT].get("addr", 0) == trace[0].get("addr", 0) - ADDR_STEP
    assert trace[2 * UNIT]["frames"] is not trace[UNIT]["frames"] or not trace[UNIT]["frames"]
    assert all(a is b for a, b in zip(trace[2 * UNIT]["frames"], trace[UNIT]["frames"]))   # shared frame dicts


READ = r"""
import json, resource, sys, time
from pathlib import Path
t = time.perf_counter()
if sys.argv[2] == "pickle":
    import pickle
    with open(sys.argv[1], "rb") as f:
        pickle.load(f)
    out = {}
else:
    from forensics import ingest
    from forensics.io.sources import Source
    from forensics.options import Options
    info, res = ingest.parse_one(Source.open(Path(sys.argv[1])), Options(tz="UTC", max_snapshot_bytes=1 << 40))
    out = {"entries": res[0].meta["snapshot"]["entries"], "from_bytes": res[0].meta["snapshot"]["entries_read_from_bytes"],
           "samples": res[0].samples.height, "events": res[0].events.height}
out.update(seconds=time.perf_counter() - t, peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
print(json.dumps(out))
"""


def read(path: Path, how: str) -> dict:
    import json

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", READ, str(path), how], capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit(f"{how} read of {path} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000", help="snapshot sizes in MB, comma-separated (default 100,1000)")
    ap.add_argument("--pickle-load", action="store_true", help="also time pickle.load (memory: ~7x the file)")
    ap.add_argument("--keep", help="write the snapshots here and keep them")
    args = ap.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="snapshot-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    small = folder / "check.pickle"
    make(small, 2 << 20)
    _check(small)
    small.unlink()
    print(f"{'size':>9} {'entries':>11} {'make s':>7} {'read s':>7} {'MB/s':>6} {'peak RSS':>9}  read by")
    for mb in (int(x) for x in args.sizes.split(",")):
        path = folder / f"snapshot-{mb}MB.pickle"
        t = time.perf_counter()
        info = make(path, mb * 1_000_000)
        made = time.perf_counter() - t
        for how in ("gpu-forensics", *(("pickle",) if args.pickle_load else ())):
            got = read(path, how)
            print(f"{info['bytes'] / 1e6:8.0f}M {info['entries']:11,} {made:7.1f} {got['seconds']:7.1f} "
                  f"{info['bytes'] / 1e6 / got['seconds']:6.0f} {got['peak_rss'] / 2**30:8.2f}G  {how}", flush=True)
        if not args.keep:
            path.unlink()
    if not args.keep:
        folder.rmdir()


if __name__ == "__main__":
    main()
