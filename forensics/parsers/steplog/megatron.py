"""Megatron-LM training logs (docs/formats.md §4.4).

`report_memory` prints, per rank, after the first logged iteration:

    [Rank 0] (after 20 iterations) memory (MB) | allocated: 1570.77001953125 | max allocated: ... | reserved: 4020.0 | max reserved: 4020.0

(MB = value/2**20; ranks writing to one stdout can glue two records on one line.) The step is the
iteration count, the gpu is the rank (the global rank: on more than one node it is not a local device
index). Those lines are read by the shared step-marker extraction; this module adds what only Megatron
prints: the `[before the start of training step] datetime: 2025-08-01 09:31:11` lines (markers, local
time) and the per-iteration lines
` [2025-08-01 07:19:37] iteration        1/    5000 | consumed samples: 128 | elapsed time per iteration (ms): 19138.8 | ...`
(markers with the step and its duration, the clock that times the memory report of the same iteration).
"""
from __future__ import annotations

import re

import polars as pl

from forensics import clock
from forensics.parsers.steplog import markers as stepmem
from forensics.parsers.steplog.markers import NUM
from forensics.frames import rows_where

NAME = "megatron-memory"
COVERS = ("step-markers",)

_DATETIME = r"^\s*\[(?P<what>[^\]]+)\] datetime: (?P<dt>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2})"
_ITERATION = r"\biteration\s+(?P<step>[0-9]+)\s*/\s*(?P<of>[0-9]+)\s*\|"
_STEP_MS = rf"elapsed time per iteration \(ms\):\s*(?P<ms>{NUM})"

_SIGNS = (
    (re.compile(r"\[Rank [0-9]+\] .*memory \((?:MB|GB)\) \| allocated: "), "Megatron report_memory line"),
    (re.compile(_DATETIME), "Megatron '[...] datetime:' line"),
    (re.compile(_ITERATION + r".*consumed samples:"), "Megatron iteration log line"),
    (re.compile(r"^-{8,} arguments -{8,}$"), "Megatron argument dump"),
    (re.compile(r"^using world size: [0-9]+, data-parallel[- ]size: [0-9]+"), "Megatron parallel-size banner"),
    (re.compile(r"^Theoretical memory footprints: weight and optimizer="), "Megatron memory estimate"),
    (re.compile(r"^> (?:initializing torch distributed|building \S+ model|compiling dataset index builder)"),
     "Megatron start-up line"),
)


def sniff(head: list[str]) -> str | None:
    for i, ln in enumerate(head, 1):
        for rx, what in _SIGNS:
            if rx.search(ln):
                return f"{what} on line {i}"
    return None


def extract(frame: pl.DataFrame, zone: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(marker events, iteration clocks: line, step, time, zoned) from `frame` (line, text)."""
    t = pl.col("text")
    events = []
    dt = rows_where(frame, t.str.contains(_DATETIME))
    if dt.height:
        g = dt.with_columns(t.str.extract_groups(_DATETIME).alias("g")).unnest("g")
        naive = pl.col("dt").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
        events.append(g.select(
            clock.localize(naive, zone).alias("time"), "line", pl.lit("marker").alias("kind"),
            stepmem.json_detail(pl.col("what").str.strip_chars().alias("what")).alias("detail"),
            t.alias("text"), pl.lit(False).alias("zoned"),
        ))
    it = rows_where(frame, t.str.contains(_ITERATION))
    times = pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64, "time": pl.Datetime("us", "UTC"),
                                 "zoned": pl.Boolean})
    if it.height:
        g = stepmem.with_line_time(it, zone).with_columns(
            t.str.extract_groups(_ITERATION).alias("g"), t.str.extract(_STEP_MS).cast(pl.Float64, strict=False)
            .alias("step_ms")).unnest("g")
        g = g.with_columns(pl.col("step").cast(pl.Int64, strict=False), pl.col("of").cast(pl.Int64, strict=False))
        events.append(g.select(
            "time", "line", pl.lit("marker").alias("kind"),
            stepmem.json_detail(pl.lit("iteration").alias("what"), "step", "of", "step_ms").alias("detail"),
            t.alias("text"), "zoned",
        ))
        times = g.filter(pl.col("time").is_not_null()).select("line", "step", "time", "zoned")
    ev = pl.concat(events, how="vertical") if events else pl.DataFrame(schema={"line": pl.Int64})
    return ev, times


def parse(src, opts):
    parsed = stepmem.extract_all(src.frame(), src, opts)
    parsed.notes.append("Megatron MB are MiB (value/2**20); the gpu of a report_memory line is its global rank")
    if parsed.samples.height and parsed.samples["time"].is_not_null().any():
        parsed.notes.append("memory reports are timed by the iteration line that follows them")
    parsed.notes.extend(stepmem.notes(parsed, units=False))
    return parsed
