"""Format "gpustat": what `gpustat` prints (docs/formats.md §9.4), once or repeated by `gpustat -i` /
`--watch` / a loop: a header `host  Tue Oct 30 20:50:35 2018  396.54` (host, local time as the C
locale's `%c`, driver version), then one line per GPU:

    [0] TITAN Xp         | 41'C,   0 % |  4479 / 12196 MB | user(4469M) alice:python/2231(30120M)

The memory cell is used / total in MiB (gpustat divides NVML's bytes by 1024²); each process is
`[user:][command][/pid](<MiB>M)` as the -u, -c, -p options add them (`user(4469M)` by default). A GPU
line becomes a `memory.used` reading with the total as capacity, each process a `process.used`
reading of that GPU (its pid where shown, its command or user as label). A snapshot is timed by its
header (read in --tz); without headers, a GPU's line seen again starts the next snapshot (untimed,
in order). Colour escapes (`--color`, `--watch` on a terminal) are removed first.
"""
from __future__ import annotations

import re

import polars as pl

from forensics import clock
from forensics.model import Parsed, samples_frame
from forensics.parsers.contract import Format

NAME = "gpustat"
MIB = 1 << 20

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_HEADER = re.compile(r"^(?P<host>\S+)\s+(?P<when>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                     r" [ 0-3]?[0-9] [0-2][0-9]:[0-5][0-9]:[0-6][0-9] [0-9]{4})(?:\s+(?P<driver>[0-9][0-9.]*))?\s*$")
_GPU = re.compile(r"^\[(?P<idx>[0-9]{1,3})\]\s+(?P<name>[^|]*?)\s*\|(?P<state>[^|]*)\|\s*(?P<used>[0-9]+)\s*/\s*"
                  r"(?P<total>[0-9]+)\s*MB\s*\|(?P<procs>.*)$")
_PROC = re.compile(r"(?P<who>[^\s()]*)\((?P<mem>[0-9]+|\?)M\)")
_WHO = re.compile(r"^(?:(?P<user>[^:/]+):)?(?P<cmd>[^/]*)(?:/(?P<pid>[0-9]+))?$")


def sniff(head: list[str]) -> str | None:
    lines = [_ANSI.sub("", ln) for ln in head]
    for i, line in enumerate(lines, 1):
        if _GPU.match(line.rstrip()) and re.search(r"(?:'C|°C|C),", line):
            return f"gpustat GPU line on line {i}"
    return None


def parse(src, opts) -> Parsed:
    p = Parsed(clock="none")
    rows = []
    snap, when, host, seen = 0, None, None, set()
    for line_no, raw in src.frame().select("line", "text").iter_rows():
        text = _ANSI.sub("", raw or "").rstrip()
        if not text.strip() or text.lstrip().startswith("# source:"):
            continue
        h = _HEADER.match(text)
        if h:
            snap, when, host, seen = snap + 1, h["when"], h["host"], set()
            continue
        g = _GPU.match(text)
        if not g:
            p.skipped.add("not a gpustat header or GPU line", line_no)
            continue
        gpu = g["idx"]
        if gpu in seen:       # a GPU seen again without a header between: the next snapshot
            snap, when, seen = snap + 1, None, set()
        seen.add(gpu)
        base = {"line": line_no, "snap": snap, "when": when, "host": host, "gpu": gpu}
        total = int(g["total"]) * MIB
        rows.append({**base, "series": "memory.used", "bytes": int(g["used"]) * MIB, "total_bytes": total,
                     "label": None, "pid": None})
        # token by token: a search over the whole cell would retry every start of a long garbage run
        for m in filter(None, (_PROC.fullmatch(tok) for tok in g["procs"].split())):
            if m["mem"] == "?":
                p.skipped.add("a process whose memory gpustat could not read (?M), not read", line_no)
                continue
            who = _WHO.match(m["who"])
            cmd = (who["cmd"] or who["user"] or None) if who else m["who"] or None
            rows.append({**base, "series": "process.used", "bytes": int(m["mem"]) * MIB, "total_bytes": total,
                         "label": cmd, "pid": int(who["pid"]) if who and who["pid"] else None})
    if not rows:
        return p
    df = pl.DataFrame(rows, schema={"line": pl.Int64, "snap": pl.Int64, "when": pl.String, "host": pl.String,
                                    "gpu": pl.String, "series": pl.String, "bytes": pl.Int64,
                                    "total_bytes": pl.Int64, "label": pl.String, "pid": pl.Int64})
    naive = pl.col("when").str.replace_all(r"\s+", " ").str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False)
    df = df.with_columns(clock.localize(naive, opts.tz_for(src.path)).alias("time"),
                         pl.col("snap").rank("dense").cast(pl.Int64).alias("seq"))
    if df["time"].null_count() < df.height:
        p.clock = "wall-assumed"
    p.samples = samples_frame(df.drop("snap", "when"))
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="gpustat lines (with or without its header, `-i` / `--watch`, `-upc`)",
    yields="`memory.used` per GPU with capacity, `process.used` per process",
)
