"""Time columns as epoch microseconds and back, ISO text and durations for the notes, the span of
each source, and the zone a file's clock is read in.
"""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl

from forensics.frames import partitions
from forensics.options import Options


MIB = 1 << 20
US = 1_000_000


def epoch_us(col: str = "time") -> pl.Expr:
    return pl.col(col).dt.epoch("us")


def from_us(expr: pl.Expr) -> pl.Expr:
    return pl.from_epoch(expr.cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC")


def uptime_us() -> pl.Expr:
    return (pl.col("uptime") * US).round(0).cast(pl.Int64)


def iso(us: int | float | datetime | None) -> str:
    if us is None:
        return "?"
    t = us if isinstance(us, datetime) else datetime.fromtimestamp(us / US, tz=timezone.utc)
    t = t.astimezone(timezone.utc)
    return t.isoformat(timespec="milliseconds" if t.microsecond else "seconds").replace("+00:00", "Z")


def seconds(x: float) -> str:
    ax = abs(x)
    if ax >= 3600:
        return f"{x / 3600:.2f} h"
    if ax >= 120:
        return f"{x / 60:.1f} min"
    return f"{x:.1f} s" if ax >= 1 else f"{x:.3f} s"


def times(samples: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """source, line, time of every row of both tables."""
    return pl.concat([samples.select("source", "line", "time"), events.select("source", "line", "time")])


def spans(samples: pl.DataFrame, events: pl.DataFrame) -> dict[str, tuple[datetime, datetime]]:
    """(first, last) time of each source that has one, over both tables."""
    out: dict[str, tuple[datetime, datetime]] = {}
    for df in (samples, events):
        for src, part in _by_source(df, ("time",)):
            start, end = part["time"].min(), part["time"].max()
            if start is None:
                continue
            if src in out:
                start, end = min(start, out[src][0]), max(end, out[src][1])
            out[src] = (start, end)
    return out


def sources_with(samples: pl.DataFrame, events: pl.DataFrame, cols: tuple[str, ...] = ("time",)) -> dict:
    """The sources that have rows in either table (key None) and, for each column of `cols`, those with
    a value in it."""
    out: dict = {None: set(), **{c: set() for c in cols}}
    for df in (samples, events):
        for src, part in _by_source(df, cols):
            out[None].add(src)
            for c in cols:
                if part[c].null_count() < part.height:
                    out[c].add(src)
    return out


def _by_source(df: pl.DataFrame, cols: tuple[str, ...]) -> list[tuple[str | None, pl.DataFrame]]:
    """The table's `cols` split by source, in Python (a job's tables hold a few sources): a grouping
    query for each table and question cost more than the split of the columns asked."""
    if not df.height:
        return []
    asked = pl.DataFrame([df["source"], *(df[c] for c in cols)])   # (a frame of Series: no query)
    return [(key[0], part) for key, part in partitions(asked, "source").items()]


def zone_reason(path: str, opts: Options) -> tuple[str, str]:
    """(zone, why) for a file whose clock carries no zone."""
    zone = opts.tz_for(path)
    for pattern, z in opts.tz_overrides.items():
        if Options(tz="", tz_overrides={pattern: z}).tz_for(path) == z:
            return zone, f"--tz {pattern}={z}"
    if opts.tz_from_user:
        return zone, "--tz"
    return zone, "this machine's zone; pass --tz ZONE if the log was written elsewhere"
