"""Format "nvtop": what `nvtop -s` / `--snapshot` prints (since 3.2), and `nvtop -l` / `--loop`, the
same snapshot printed again at every refresh (docs/formats.md §9.6). A snapshot is a JSON array, one
object per device, one key per line (src/interface.c `print_snapshot`):

    [
      {
       "device_name": "NVIDIA GeForce RTX 5060 Ti",
       "gpu_clock": "210MHz",
       ...
       "mem_util": "35%",
       "mem_total": "21197180928",
       "mem_used": "7585398784",
       "mem_free": "13611782144",
       "processes" : [
         {
           "pid": "75257",
           "cmdline": "Hyprland --watchdog-fd 4",
           ...
           "gpu_mem_bytes_alloc": "295473152",
           ...
         }
       ]
      }
    ]

Memory is in bytes, as strings (`mem_*` since 3.3, the `processes` array since 3.3; the open PR nvtop#445
prints `"20464.0 MiB"`, read too). 3.3.0 printed no commas after `mem_util` and the keys below it
(nvtop#438): the file is read token by token, not as a JSON document, so those files, a loop's
concatenated arrays and a paste cut short are read alike. A device becomes a `memory.used` reading
of the GPU named by its position in the array (nvtop's own order; its `device_name` goes to the
notes), `mem_total` as capacity; each process a `process.used` reading of that GPU with its pid and
its command line (else its user) as label. nvtop prints no time and no separator between a loop's
snapshots: each `[` starts the next one, untimed, in order (--start/--interval place them). A device
without `mem_used` (nvtop 3.2 prints only `mem_util`, a percentage) is counted, never guessed.
"""
from __future__ import annotations

import re

import polars as pl

from forensics.model import IMPLAUSIBLE, MAX_PLAUSIBLE_BYTES, Parsed, samples_frame
from forensics.parsers.contract import Format

NAME = "nvtop"

# one token of the snapshot: `"key": value` (a `[` value opens the processes array) or a bracket;
# what follows it (a comma, or none where 3.3.0 left it out) is passed over
_TOKEN = re.compile(r'\s*(?:"(?P<key>[A-Za-z_]{1,40})"\s*:\s*(?P<val>"(?:[^"\\]|\\.)*"|null|true|false|'
                    r'-?[0-9][0-9.eE+-]*|\[)|(?P<punct>[\[\]{}]))\s*,?\s*')
_KEY = re.compile(r'"(?P<key>device_name|gpu_clock|mem_clock|gpu_util|mem_used)"\s*:')
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE = re.compile(r"^(?P<num>[0-9]{1,19}(?:\.[0-9]{1,6})?)(?:\s*(?P<unit>B|KiB|MiB|GiB|TiB))?$")

NO_BYTES = "a device without memory bytes (no mem_used: nvtop before 3.3 prints only mem_util, a percentage), not read"


def sniff(head: list[str]) -> str | None:
    found = {}
    for i, line in enumerate(head, 1):
        for m in _KEY.finditer(line[:4096]):
            found.setdefault(m["key"], i)
    if "device_name" in found and len(found) >= 3:
        return f"nvtop --snapshot JSON (device_name on line {found['device_name']})"
    return None


def _tokens(text: str) -> list[tuple[str | None, str]] | None:
    """The tokens of a line, or None when something in it is not nvtop's JSON."""
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            return None
        out.append((m["key"], m["val"]) if m["key"] else (None, m["punct"]))
        pos = m.end()
    return out


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}   # the ones print_snapshot writes, and \\ \"


def _string(val: str) -> str | None:
    if val.startswith('"'):
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), val[1:-1])
    return None if val in ("null", "true", "false") else val


def _bytes(val: str | None) -> int | None:
    m = _SIZE.match(val.strip()) if val else None
    if not m:
        return None
    return round(float(m["num"]) * _UNITS[m["unit"] or "B"])


class _State:
    def __init__(self, p: Parsed):
        self.p, self.rows, self.names = p, [], {}
        self.snap, self.open, self.dev = 0, False, -1
        self.device: dict | None = None
        self.proc: dict | None = None
        self.procs: list[dict] = []
        self.in_procs = False

    def start_snapshot(self) -> None:
        self.close_device()
        self.snap, self.open, self.dev, self.in_procs = self.snap + 1, True, -1, False

    def punct(self, ch: str, line: int) -> None:
        if ch == "[":
            self.start_snapshot()
        elif ch == "]":
            if self.in_procs:
                self.close_proc()
                self.in_procs = False
            else:
                self.close_device()
                self.open = False
        elif ch == "{":
            if self.in_procs and self.device is not None:
                self.close_proc()
                self.proc = {"_line": line}
            else:
                if not self.open:      # a paste that lost its `[`
                    self.start_snapshot()
                self.close_device()
                self.dev += 1
                self.device, self.procs = {"_line": line}, []
        elif self.proc is not None:
            self.close_proc()
        else:
            self.close_device()

    def value(self, key: str, val: str, line: int) -> None:
        if val == "[":
            if key == "processes" and self.device is not None:
                self.in_procs = True
            return
        target = self.proc if self.proc is not None else self.device
        if target is not None:
            target[key] = (_string(val), line)

    def close_proc(self) -> None:
        if self.proc is not None:
            self.procs.append(self.proc)
            self.proc = None

    def close_device(self) -> None:
        self.close_proc()
        d, self.device = self.device, None
        if d is None:
            return
        gpu = str(self.dev)
        name = d.get("device_name", (None, 0))[0]
        if name:
            self.names.setdefault(gpu, name)
        used, used_line = d.get("mem_used", (None, d.get("device_name", (None, d["_line"]))[1]))
        total = _bytes(d.get("mem_total", (None, 0))[0])
        base = {"snap": self.snap, "gpu": gpu, "total_bytes": total}
        if (used_bytes := _bytes(used)) is None:
            self.p.skipped.add(NO_BYTES, used_line)
        else:
            self.add({**base, "line": used_line, "series": "memory.used", "bytes": used_bytes, "pid": None, "label": None})
        for proc in self.procs:
            mem, mem_line = proc.get("gpu_mem_bytes_alloc", (None, proc["_line"]))
            if (mem_bytes := _bytes(mem)) is None:
                self.p.skipped.add("a process whose GPU memory nvtop could not read (gpu_mem_bytes_alloc null), not read",
                                   mem_line)
                continue
            pid = proc.get("pid", (None, 0))[0]
            label = proc.get("cmdline", (None, 0))[0] or proc.get("user", (None, 0))[0]
            self.add({**base, "line": mem_line, "series": "process.used", "bytes": mem_bytes,
                      "pid": int(pid) if pid and re.fullmatch(r"[0-9]{1,10}", pid) else None, "label": label})
        self.procs = []

    def add(self, row: dict) -> None:
        if not 0 <= row["bytes"] <= MAX_PLAUSIBLE_BYTES:
            self.p.skipped.add(IMPLAUSIBLE, row["line"])
            return
        if row["total_bytes"] is not None and not 0 < row["total_bytes"] <= MAX_PLAUSIBLE_BYTES:
            row["total_bytes"] = None
        self.rows.append(row)


def parse(src, opts) -> Parsed:
    p = Parsed(clock="none")
    st = _State(p)
    for line_no, raw in src.frame().select("line", "text").iter_rows():
        text = (raw or "").rstrip()
        if not text.strip():
            continue
        tokens = _tokens(text)
        if tokens is None:
            p.skipped.add("not a line of nvtop's snapshot JSON", line_no)
            continue
        for key, val in tokens:
            if key is None:
                st.punct(val, line_no)
            else:
                st.value(key, val, line_no)
    st.close_device()        # a paste cut inside its last device
    if st.names:
        p.meta["devices"] = dict(st.names)
        p.notes.append("devices by their position in nvtop's array: "
                       + ", ".join(f"GPU {g} = {n}" for g, n in st.names.items()))
    if p.skipped.counts.get(NO_BYTES):
        p.notes.append(f"{p.skipped.counts[NO_BYTES]} device reading(s) without memory bytes: nvtop 3.3 or later "
                       "prints mem_used and mem_total; mem_util alone is a percentage with no total, not read")
    if not st.rows:
        return p
    df = pl.DataFrame(st.rows, schema={"line": pl.Int64, "snap": pl.Int64, "gpu": pl.String, "series": pl.String,
                                       "bytes": pl.Int64, "total_bytes": pl.Int64, "pid": pl.Int64,
                                       "label": pl.String})
    snaps = df["snap"].n_unique()
    p.notes.append(f"{snaps} snapshot(s) without time stamps (nvtop prints none): ordered, untimed")
    df = df.with_columns(pl.col("snap").rank("dense").cast(pl.Int64).alias("seq"))
    p.samples = samples_frame(df.drop("snap"))
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="nvtop `-s` / `--snapshot`, `-l` / `--loop` JSON (3.2+, 3.3.0 without commas)",
    yields="`memory.used` per GPU with capacity, `process.used` per process (pid, command); devices without "
           "memory bytes counted",
)
