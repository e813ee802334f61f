"""Time columns as epoch microseconds and back, ISO text and durations for the notes, the span of
each source, and the zone a file's clock is read in.
"""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl

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
    t = times(samples, events).drop_nulls("time").group_by("source").agg(
        pl.col("time").min().alias("start"), pl.col("time").max().alias("end"))
    return {r["source"]: (r["start"], r["end"]) for r in t.iter_rows(named=True)}


def zone_reason(path: str, opts: Options) -> tuple[str, str]:
    """(zone, why) for a file whose clock carries no zone."""
    zone = opts.tz_for(path)
    for pattern, z in opts.tz_overrides.items():
        if Options(tz="", tz_overrides={pattern: z}).tz_for(path) == z:
            return zone, f"--tz {pattern}={z}"
    if opts.tz_from_user:
        return zone, "--tz"
    return zone, "this machine's zone; pass --tz ZONE if the log was written elsewhere"
