"""`torch.cuda.memory_summary()` tables (docs/formats.md §4.2), one or many per file, anywhere in a log.

Each table becomes samples `allocated` / `reserved` (the "Cur Usage" column of "Allocated memory" and
"GPU reserved memory") and `max_allocated` / `max_reserved` ("Peak Usage"), all with the device id as
`gpu` and the table's ordinal as `seq`; plus one `marker` event with the counters ("CUDA OOMs",
"cudaMalloc retries") and every row's four figures in its detail.

Cells are the summary's own `f"{sz:6d} {unit}"`: integers already divided down (`//= 1024`) to the
unit printed, so values are exact to one unit of that cell. Old releases print B/KB/MB (read as
1024-based, units.py), new ones B/KiB/MiB/GiB. Under the cudaMallocAsync backend the Tot Alloc/Freed
columns and most counters stay 0; the marker says so.
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics import units
from forensics.options import Options
from forensics.model import Parsed, events_frame, samples_frame
from forensics.io.sources import Source
from forensics.parsers.contract import Format, Scan

NAME = "pytorch-memory-summary"

_HEADER = r"PyTorch CUDA memory summary, device ID ([0-9]+)"
_COUNTERS = r"CUDA OOMs:\s*([0-9]{1,12})\s*\|\s*cudaMalloc retries:\s*([0-9]{1,12})\b"
_METRICS = (
    "Allocated memory", "Active memory", "Requested memory", "GPU reserved memory", "Non-releasable memory",
    "Allocations", "Active allocs", "GPU reserved segments", "Non-releasable allocs", "Oversize allocations",
    "Oversize GPU segments",
)
_ROW = (r"^\s*\|\s*(" + "|".join(re.escape(m) for m in _METRICS) + r")\s*\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|\s*$")
_CELL = r"^\s*([0-9]+)\s*([KMGTP]i?B|B|[KM])?\s*$"
SCAN_HINT = _HEADER + "|" + _COUNTERS + "|" + r"^\s*\|\s*(?:" + "|".join(re.escape(m) for m in _METRICS) + r")\s*\|"
# what every SCAN_HINT line holds, for the one prefilter over all scanners (parsers/scanners.py); the
# table rows are the lines whose first non-blank is `|` (SCAN_PIPE_ROWS: tested apart, as an anchored
# `^\s*\|` in the alternation would slow all of it down)
SCAN_PREFILTER = r"PyTorch CUDA memory summary, device ID|CUDA OOMs:"
SCAN_BLOCK_LITERALS = ("cuda",)
SCAN_PIPE_ROWS = True

# (row, column) -> series
_SERIES = {
    ("Allocated memory", "cur"): "allocated",
    ("GPU reserved memory", "cur"): "reserved",
    ("Allocated memory", "peak"): "max_allocated",
    ("GPU reserved memory", "peak"): "max_reserved",
}
_COLUMNS = ("cur", "peak", "alloc", "freed")
_SIZE_ROWS = {"Allocated memory", "Active memory", "Requested memory", "GPU reserved memory", "Non-releasable memory"}


def sniff(head: list[str]) -> str | None:
    rx = re.compile(_HEADER)
    for i, line in enumerate(head, 1):
        if not line.startswith("# source:") and rx.search(line):
            return f"torch.cuda.memory_summary() table at line {i}"
    return None


def parse(src: Source, opts: Options) -> Parsed:
    frame = src.frame()
    hits = frame.filter(pl.col("text").str.contains(SCAN_HINT))
    out = _read(hits)
    # rules, column titles and pool sub-rows are table lines too, just not read
    other = frame.filter(~pl.col("text").str.contains(SCAN_HINT) & (pl.col("text").str.strip_chars() != "")
                         & ~pl.col("text").str.contains(r"^\s*\|.*\|\s*$"))
    out.skipped.add_lines("not part of a memory summary", other["line"])
    return out


def scan(lines: pl.DataFrame, src: Source, opts: Options) -> Parsed:
    """memory_summary() tables printed inside a training log that another parser claims."""
    return _read(lines)


def _read(hits: pl.DataFrame) -> Parsed:
    out = Parsed(clock="none")
    if hits.height == 0:
        return out
    rows = hits.select(
        "line", "text",
        pl.col("text").str.extract(_HEADER, 1).alias("device"),
        pl.col("text").str.extract_groups(_COUNTERS).alias("counters"),
        pl.col("text").str.extract_groups(_ROW).alias("row"),
    ).unnest("counters").rename({"1": "ooms", "2": "retries"}).unnest("row").rename(
        {"1": "metric", "2": "c_cur", "3": "c_peak", "4": "c_alloc", "5": "c_freed"})
    # Each row belongs to the latest header above it; rows before any header form table 0.
    rows = rows.with_columns(
        pl.col("device").is_not_null().cum_sum().alias("table"),
        pl.col("device").forward_fill().alias("gpu"),
    )
    tables: dict[int, dict] = {}
    for r in rows.iter_rows(named=True):
        t = tables.setdefault(r["table"], {"gpu": r["gpu"], "line": r["line"], "header": None, "rows": {},
                                           "row_lines": {}, "ooms": None, "retries": None, "bad": []})
        if r["device"] is not None:
            t["header"], t["line"] = r["text"], r["line"]
        elif r["ooms"] is not None:
            t["ooms"], t["retries"] = int(r["ooms"]), int(r["retries"])
        elif r["metric"] is not None:
            values = {}
            for col in _COLUMNS:
                values[col] = _cell(r[f"c_{col}"], r["metric"] in _SIZE_ROWS)
                if values[col] is None:
                    t["bad"].append(r["line"])
            t["rows"][r["metric"]] = values
            t["row_lines"][r["metric"]] = r["line"]

    samples, events = [], []
    async_like = False
    for index, (table_id, t) in enumerate(sorted(tables.items()), start=1):
        if not t["rows"] and t["header"] is None:
            continue
        for (metric, col), series in _SERIES.items():
            value = t["rows"].get(metric, {}).get(col)
            if value is None:
                continue
            samples.append({"seq": index, "line": t["row_lines"][metric], "gpu": t["gpu"], "series": series,
                            "bytes": value, "label": "memory_summary"})
        for line in t["bad"]:
            out.skipped.add("unreadable memory_summary cell", line)
        alloc = t["rows"].get("Allocated memory", {})
        stats_zero = bool(alloc) and (alloc.get("cur") or 0) > 0 and alloc.get("alloc") == 0 and alloc.get("freed") == 0
        async_like |= stats_zero
        detail = {"what": "memory_summary", "table": index, "device": t["gpu"], "cuda_ooms": t["ooms"],
                  "cudamalloc_retries": t["retries"], "rows": t["rows"]}
        if stats_zero:
            detail["backend"] = "cudaMallocAsync (Tot Alloc/Freed are 0: the allocator keeps no such statistics)"
        events.append({"line": t["line"], "kind": "marker", "gpu": t["gpu"],
                       "text": t["header"] or "memory_summary table (header not in the excerpt)",
                       "detail": json.dumps(detail)})
    out.samples = samples_frame(samples)
    out.events = events_frame(events)
    out.meta["memory_summaries"] = len(events)
    ooms = [json.loads(e["detail"])["cuda_ooms"] for e in events]
    if any(o for o in ooms if o):
        out.meta["cuda_ooms_max"] = max(o for o in ooms if o is not None)
    if async_like:
        out.notes.append("memory_summary under the cudaMallocAsync backend: Tot Alloc/Freed and most counters "
                         "are 0, only Cur/Peak usage is meaningful")
    if events:
        out.notes.append("memory_summary values are whole numbers of the unit printed (e.g. 659155 KB): "
                         "exact to one unit")
    return out


def _cell(text: str | None, is_size: bool) -> int | None:
    if text is None:
        return None
    m = re.match(_CELL, text)
    if not m:
        return None
    number, unit = m.group(1), m.group(2)
    if not is_size:
        # counts: f"{cnt:7d} {prefix} " with prefixes " ", "K", "M" (1000-based)
        return int(number) * {None: 1, "K": 1000, "M": 1000 ** 2}.get(unit, 1) if unit in (None, "K", "M") else None
    if unit in ("K", "M"):
        return None
    return units.parse_size(f"{number} {unit or 'B'}")


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, pipe_rows=SCAN_PIPE_ROWS),
    files="`torch.cuda.memory_summary()` tables",
    yields="allocated / reserved / peaks",
    # a summary file often also holds the OOM it explains (found by that format's scan)
    before=("pytorch-oom",),
)
