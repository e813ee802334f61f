"""Yearless syslog: a rotated set (kern.log.2.gz, kern.log.1, kern.log) is made to continue itself (an
older file ends before the next one starts); without --year, a set whose mtime-given years overlap
no input with an explicit year, while exactly one other year would, takes that year.
"""
from __future__ import annotations

import calendar
import os
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from forensics.clock import localize
from forensics.model import InputInfo
from forensics.options import Options
from forensics.io.sources import rotation_key
from forensics.timeline import stamps


# a rotated file may overlap its successor by a few duplicated lines (copytruncate)
ROTATION_OVERLAP = timedelta(hours=1)


def _shift_years(df: pl.DataFrame, path: str, years: int, zone: str) -> pl.DataFrame:
    """Move a source's rows by whole years on its local calendar (DST read again for the new dates)."""
    mask = (df["source"] == path).fill_null(False)
    if not mask.any():
        return df
    naive = pl.col("time").dt.convert_time_zone(zone).dt.replace_time_zone(None).dt.offset_by(f"{years}y")
    moved = df.filter(mask).select(localize(naive, zone).alias("time"))["time"]
    return df.with_columns(df["time"].scatter(pl.Series(np.flatnonzero(mask.to_numpy())), moved).alias("time"))


def _add_years(t: datetime, years: int) -> datetime:
    try:
        return t.replace(year=t.year + years)
    except ValueError:  # 29 February
        return t.replace(year=t.year + years, day=28)


def _feb29_years(samples, events, path: str, zone: str) -> list[int]:
    local = stamps.times(samples, events).filter(pl.col("source") == path).drop_nulls("time").select(
        pl.col("time").dt.convert_time_zone(zone).alias("t"))
    return local.filter((pl.col("t").dt.month() == 2) & (pl.col("t").dt.day() == 29))["t"].dt.year().unique().to_list()


def _rotated_sets(infos: dict[str, InputInfo]) -> list[list[str]]:
    """Yearless inputs grouped by rotated set (same folder and base name), oldest first."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path, info in infos.items():
        if info.clock == "wall-yearless":
            base = rotation_key(os.path.basename(path))[0]
            groups.setdefault((os.path.dirname(path), base), []).append(path)
    return [sorted(paths, key=lambda p: rotation_key(os.path.basename(p))) for paths in groups.values()]


def continue_rotated_sets(samples, events, infos: dict[str, InputInfo], opts: Options):
    """Each older file of a rotated yearless set must end before the next newer one starts. Walking from
    the newest, an older file that does not is moved back by whole years: each file's year came from its
    own mtime (or --year, which names the last year only), and copied files lose their mtimes."""
    for members in _rotated_sets(infos):
        spans = stamps.spans(samples, events)
        members = [m for m in members if m in spans]
        for older, newer in reversed(list(zip(members, members[1:]))):
            start_newer, end_older = spans[newer][0], spans[older][1]
            back = 0
            while back < 30 and _add_years(end_older, -back) - ROTATION_OVERLAP > start_newer:
                back += 1
            if not back:
                continue
            zone = opts.tz_for(older)
            info = infos[older]
            if any(not calendar.isleap(y - back) for y in _feb29_years(samples, events, older, zone)):
                info.notes.append(f"it ends after {newer} starts, but moving it back {back} year(s) would put "
                                  "29 February in a non-leap year: years left as they were, pass --year")
                continue
            samples = _shift_years(samples, older, -back, zone)
            events = _shift_years(events, older, -back, zone)
            msg = f"moved back {back} year{'s' if back > 1 else ''} to end before {newer} starts (rotated set)"
            info.notes.append(f"syslog years {msg}")
            if info.anchor:
                info.anchor += f"; {msg}"
            spans = stamps.spans(samples, events)
    return samples, events


def agree_years_with_bundle(samples, events, infos: dict[str, InputInfo], opts: Options):
    """A yearless set whose (mtime-given) years overlap no input with an explicit year, while exactly one
    other year would make it overlap one, takes that year: mtimes are lost by copying, printed years are not."""
    spans = stamps.spans(samples, events)
    explicit = [(p, spans[p]) for p, i in infos.items() if i.clock in ("wall", "wall-assumed") and p in spans]
    if not explicit:
        return samples, events
    slack = timedelta(hours=1)

    def overlapping(lo: datetime, hi: datetime) -> list[str]:
        return [p for p, (s, e) in explicit if lo - slack <= e and s <= hi + slack]

    for members in _rotated_sets(infos):
        members = [m for m in members if m in spans]
        if not members:
            continue
        lo = min(spans[m][0] for m in members)
        hi = max(spans[m][1] for m in members)
        if overlapping(lo, hi):
            continue
        fits = {}
        for k in range(-10, 11):
            if k == 0:
                continue
            hits = overlapping(_add_years(lo, k), _add_years(hi, k))
            if hits:
                fits[k] = hits
        if len(fits) != 1:
            continue
        (k, hits), = fits.items()
        for m in members:
            zone = opts.tz_for(m)
            samples = _shift_years(samples, m, k, zone)
            events = _shift_years(events, m, k, zone)
            year = lo.year + k
            msg = (f"syslog year {year} taken from {hits[0]}, which has an explicit year and overlaps it then "
                   f"(its mtime gave {lo.year}, when no input with a year overlaps it)")
            infos[m].notes.append(msg)
            zone_, why = stamps.zone_reason(m, opts)
            infos[m].anchor = f"{msg}; local time read as {zone_} ({why})"
    return samples, events
