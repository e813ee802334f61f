"""Format "nvitop": what `nvitop -1` / `nvitop --once` prints (docs/formats.md §9.5), or a screen of
its monitor pasted as text: nvidia-smi's device table redrawn in box characters (`│ ╒ ╞ ╘`; `|`, `+` with
`-U`/`--ascii`), under a banner `│ NVITOP 1.4.2  Driver Version: ...` (before 0.5 the banner still said
`NVIDIA-SMI 460.32.03`), then the host's CPU and memory bars, then the process table:

    │   0  H800                Off  │ 00000000:18:00.0 Off │ Disabled           0 │ MEM: ▏ 0.0%        │
    │ N/A   36C    P0    85W / 700W │   3.50MiB / 79.65GiB │      0%      Default │ UTL: ▏ 0%          │
    ...
    │ GPU     PID      USER  GPU-MEM %SM %GMBW  %CPU  %MEM  TIME  COMMAND         │
    │   0   18830 C phungk+  9316MiB  76    53   0.0   1.2  5:39  /usr/local/bi.. │

A device's memory cell (used / total, in nvitop's human units: `0B`, `3.50MiB`, `79.65GiB`, 2^10 steps)
becomes a `memory.used` reading of the GPU whose index starts its row (the row above it in the full
layout, the same row in `--compact`), the total as capacity; each process row a `process.used` reading
of its GPU with its pid, its command (as nvitop cut it) as label. `[ MEM: ... USED: 5.82GiB ]` is the
host's used memory, a `host.used` reading. A snapshot is timed by the asctime line nvitop prints above
its box (local, read in --tz); a banner or that line starts the next snapshot.
"""
from __future__ import annotations

import re

import polars as pl

from forensics import clock
from forensics.model import Parsed, samples_frame
from forensics.parsers.contract import Format

NAME = "nvitop"

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}
_SIZE = r"[0-9]+(?:\.[0-9]+)?(?:B|KiB|MiB|GiB|TiB|PiB)"
_BANNER = re.compile(r"^\s*[│|]\s*(?:NVITOP [0-9]|NVIDIA-SMI [0-9])")
_WHEN = re.compile(r"^\s*(?P<when>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                   r" [ 0-3]?[0-9] [0-2][0-9]:[0-5][0-9]:[0-6][0-9] [0-9]{4})\s*$")
# box drawing, a rule of the table (`╞═══╪`, `+----+`, `|=====|`) or a column heading
_RULE = re.compile(r"^\s*[╒╞├╘+|│][═─=\-+╤╪┼╧╕╡┤╛┬┴│|\s]*$")
_HEADING = re.compile(r"^\s*[│|]\s*(?:GPU\s+Name|Fan\s+Temp|GPU\s+Fan\s+Temp|GPU\s+PID\s+USER|Processes:|"
                      r"No running processes found|Gathering process status)")
_MEM_CELL = re.compile(rf"^(?P<used>{_SIZE})\s*/\s*(?P<total>{_SIZE})$")
_INDEX = re.compile(r"^(?P<idx>[0-9]{1,3})\s")   # a fan speed (`28%`) or `N/A` starts the full layout's second row
_PROC = re.compile(rf"^\s*[│|]\s*(?P<gpu>[0-9]{{1,3}})\s+(?P<pid>[0-9]{{1,10}})\s+(?:(?:C\+G|[CGX])\s+)?(?P<user>\S+)\s+"
                   rf"(?P<mem>{_SIZE}|N/A|WDDM:N/A)\s+(?P<rest>.*)$")
_HOST_MEM = re.compile(rf"^\s*\[\s*MEM:.*?USED:\s*(?P<used>{_SIZE})\s*\]")
_HOST_LINE = re.compile(r"^\s*\[\s*(?:CPU|MEM|SWP):")
# the process row's TIME column, the last before the command (`5:39`, `1:02:03`, `2-03:04:05`, `N/A`)
_TIME = re.compile(r"^(?:[0-9]+(?:-[0-9]{2})?(?::[0-9]{2}){1,2}|N/A)$")


def _bytes(text: str) -> int | None:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(B|KiB|MiB|GiB|TiB|PiB)", text)
    return round(float(m[1]) * _UNITS[m[2]]) if m else None


def _command(rest: str) -> str | None:
    """The COMMAND column of a process row: what follows its TIME column."""
    tokens = rest.rstrip().rstrip("│|").split()
    at = [i for i, t in enumerate(tokens[:-1]) if _TIME.match(t)]
    return " ".join(tokens[at[-1] + 1:]) if at else None


def sniff(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        if _BANNER.match(line) and ("NVITOP" in line or "│" in line):
            return f"nvitop's device table (banner on line {i})"
    return None


def _cells(text: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│|]", text.strip().strip("│|"))]


def parse(src, opts) -> Parsed:
    p = Parsed(clock="none")
    rows = []
    snap, when, gpu, in_procs, seen = 0, None, None, False, False
    for line_no, raw in src.frame().select("line", "text").iter_rows():
        text = (raw or "").rstrip()
        if not text.strip() or text.lstrip().startswith("# source:"):
            continue
        if w := _WHEN.match(text):
            snap, when, gpu, in_procs, seen = snap + 1, w["when"], None, False, True
            continue
        if _BANNER.match(text):
            if not seen:     # a banner without the time line above it: the next snapshot, untimed
                snap, when = snap + 1, None
            gpu, in_procs, seen = None, False, False
            continue
        base = {"line": line_no, "snap": snap, "when": when}
        if h := _HOST_MEM.match(text):
            rows.append({**base, "gpu": None, "series": "host.used", "bytes": _bytes(h["used"]), "total_bytes": None,
                         "pid": None, "label": None})
            continue
        if _HOST_LINE.match(text):
            continue
        if "Processes:" in text:
            in_procs = True
            continue
        if _RULE.match(text) or _HEADING.match(text):
            continue
        if in_procs and (m := _PROC.match(text)):
            mem = _bytes(m["mem"])
            if mem is None:
                p.skipped.add("a process whose GPU memory nvitop could not read (N/A), not read", line_no)
                continue
            rows.append({**base, "gpu": m["gpu"], "series": "process.used", "bytes": mem, "total_bytes": None,
                         "pid": int(m["pid"]), "label": _command(m["rest"]) or m["user"]})
            continue
        cells = _cells(text) if text.lstrip()[:1] in "│|" else []
        if len(cells) < 3:
            p.skipped.add("not a line of nvitop's tables", line_no)
            continue
        if idx := _INDEX.match(cells[0]):
            gpu = idx["idx"]
        mem = next((c for c in cells[1:3] if _MEM_CELL.match(c)), None)
        if mem is None:
            continue      # the row of the device's name and bus id
        if gpu is None:
            p.skipped.add("a memory cell with no GPU index above it", line_no)
            continue
        m = _MEM_CELL.match(mem)
        rows.append({**base, "gpu": gpu, "series": "memory.used", "bytes": _bytes(m["used"]),
                     "total_bytes": _bytes(m["total"]), "pid": None, "label": None})
    if not rows:
        return p
    df = pl.DataFrame(rows, schema={"line": pl.Int64, "snap": pl.Int64, "when": pl.String, "gpu": pl.String,
                                    "series": pl.String, "bytes": pl.Int64, "total_bytes": pl.Int64,
                                    "pid": pl.Int64, "label": pl.String})
    naive = pl.col("when").str.replace_all(r"\s+", " ").str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False)
    df = df.with_columns(clock.localize(naive, opts.tz_for(src.path)).alias("time"),
                         pl.col("snap").rank("dense").cast(pl.Int64).alias("seq"))
    # a process's memory is of its GPU: the device's total is its capacity
    totals = df.filter(pl.col("series") == "memory.used").group_by("snap", "gpu").agg(
        pl.col("total_bytes").first().alias("_total"))
    df = df.join(totals, on=["snap", "gpu"], how="left", maintain_order="left").with_columns(
        pl.when(pl.col("series") == "process.used").then(pl.col("_total")).otherwise(pl.col("total_bytes"))
        .alias("total_bytes")).drop("_total")
    if df["time"].null_count() < df.height:
        p.clock = "wall-assumed"
    p.samples = samples_frame(df.drop("snap", "when"))
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="nvitop `-1` / `--once` (unicode, `--ascii`, `--compact`, the early NVIDIA-SMI banner)",
    yields="`memory.used` per GPU with capacity, `process.used` per process (pid, command), `host.used`",
)
