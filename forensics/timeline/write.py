"""The aligned tables written for the user's own analysis (`gpu-forensics timeline`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl

from forensics.report import write as outputs
from forensics.errors import UsageError
from forensics.frames import csv_safe
from forensics.model import Bundle, InputInfo
from forensics.model import EVENTS_SCHEMA, SAMPLES_SCHEMA, conform
from forensics.timeline import stamps


def aligned_targets(path: str | os.PathLike) -> list[outputs.Target]:
    """The files `write_aligned` writes for `path`, checked (see outputs.target); a usage error for a
    name that is neither .parquet nor .csv."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".parquet":
        return [outputs.target(str(p), "-o")]
    if ext == ".csv":
        return [outputs.target(str(p.with_name(f"{p.stem}.{name}.csv")), "-o") for name in ("samples", "events")]
    raise UsageError(f"-o {path}: unknown output type {ext or '(none)'}, use a .parquet or .csv name")


def write_aligned(bundle: Bundle, path: str | os.PathLike) -> list[str]:
    """Write the aligned tables; returns the paths written.

    `.parquet`: ONE file at exactly `path` holding both tables, told apart by the first column `table`
    ("samples" or "events"); columns of the other table are null (read one back with
    `pl.read_parquet(p).filter(pl.col("table") == "events")`). The file's key-value metadata
    `gpu_forensics.inputs` holds the inputs (path, format, clock, anchor, start, end, notes) as JSON.
    `.csv`: two files beside `path`, `<stem>.samples.csv` and `<stem>.events.csv` (`path` itself is not
    written), times as ISO-8601 UTC with `Z`.
    Every row keeps `source` and `line`. Each file is written as outputs.write writes (a regular file
    atomically, a FIFO or device through), so a reader never sees half a file."""
    targets = aligned_targets(path)
    samples = conform(bundle.samples, SAMPLES_SCHEMA)
    events = conform(bundle.events, EVENTS_SCHEMA)
    if len(targets) == 1:
        both = pl.concat([samples.with_columns(pl.lit("samples").alias("table")),
                          events.with_columns(pl.lit("events").alias("table"))], how="diagonal")
        both = both.select("table", *[c for c in both.columns if c != "table"])
        meta = {"gpu_forensics.inputs": json.dumps([_input_meta(i) for i in bundle.inputs])}
        outputs.write(targets[0], lambda fh: both.write_parquet(fh, metadata=meta))
    else:
        for t, df in zip(targets, (samples, events)):
            outputs.write(t, lambda fh, df=csv_safe(df): df.write_csv(fh, datetime_format="%Y-%m-%dT%H:%M:%S%.6fZ"))
    return [t.shown for t in targets]


def _input_meta(info: InputInfo) -> dict:
    return {"path": info.path, "format": info.format, "clock": info.clock, "anchor": info.anchor,
            "start": stamps.iso(info.start) if info.start else None, "end": stamps.iso(info.end) if info.end else None,
            "notes": info.notes, "skew_seconds": info.meta.get("skew_seconds")}
