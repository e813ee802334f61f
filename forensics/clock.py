"""Vectorized clock helpers the parsers use to turn the many timestamp shapes into UTC.

Policy (design.md, Timeline rules): everything is UTC inside; a clock without a zone is read in the
file's zone (`Options.tz_for`); a syslog clock without a year gets its year from `--year` or from the
file's modification time for its last line, walking backwards across Dec->Jan; dmesg uptime stamps stay
in the `uptime` column until the timeline anchors them to a boot time.
"""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl

MONTHS = {
    # English and the localized abbreviations journalctl prints (lowercased before lookup)
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10,
    "nov": 11, "dec": 12,
    # German, French, Spanish, Italian, Portuguese, Dutch, Russian-translit common forms
    "mär": 3, "mrz": 3, "mai": 5, "okt": 10, "dez": 12,
    "janv": 1, "févr": 2, "fevr": 2, "mars": 3, "avr": 4, "juin": 6, "juil": 7, "août": 8, "aout": 8,
    "sept": 9, "déc": 12,
    "ene": 1, "abr": 4, "ago": 8, "dic": 12, "set": 9, "out": 10, "gen": 1, "mag": 5, "giu": 6, "lug": 7,
    "ott": 10, "fev": 2, "dez.": 12, "mrt": 3, "mei": 5,
}


def localize(naive: pl.Expr, zone: str) -> pl.Expr:
    """A naive local Datetime column in `zone` -> Datetime[us, UTC]. In the DST fold the earlier
    instant is taken; a wall time that does not exist (spring-forward gap) is shifted forward by the
    gap, as clocks that were not yet adjusted write it."""
    if zone in ("UTC", "Etc/UTC", "Z"):
        return naive.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    return (
        naive.cast(pl.Datetime("us"))
        .dt.replace_time_zone(zone, ambiguous="earliest", non_existent="null")
        .fill_null(
            (naive.cast(pl.Datetime("us")) + pl.duration(hours=1)).dt.replace_time_zone(
                zone, ambiguous="earliest", non_existent="null"
            )
        )
        .dt.convert_time_zone("UTC")
    )


def parse_offset_datetime(text: pl.Expr) -> pl.Expr:
    """ISO-8601 with an offset (`+02:00`, `+0200`, `Z`; a comma or dot before the fraction) -> UTC."""
    norm = (
        text.str.replace(r",(\d)", r".$1")
        .str.replace(r"([+-]\d\d)(\d\d)$", r"$1:$2")
        .str.replace(r"Z$", "+00:00")
        .str.replace(r"(\.\d{6})\d+", r"$1")  # nanoseconds (Talos) -> microseconds
    )
    return norm.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone("UTC")


def month_number(name: pl.Expr) -> pl.Expr:
    return name.str.to_lowercase().str.strip_chars(".").replace_strict(MONTHS, default=None, return_dtype=pl.Int32)


def infer_years(month: pl.Series, anchor_year: int, anchor_month: int | None = None) -> pl.Series:
    """Years for a yearless month sequence that ends near the anchor (the file's mtime).

    Walking backwards from the last line, the year drops by one each time the month increases
    (a Dec line before a Jan line belongs to the year before). If the last line's month is after the
    anchor's month, the log ended in the previous year (a file copied in January).
    """
    m = month.cast(pl.Int32)
    if m.len() == 0:
        return pl.Series(month.name, [], dtype=pl.Int32)
    filled = m.fill_null(strategy="forward").fill_null(strategy="backward")
    rev = filled.reverse()
    # a rollover going backwards: month increases compared with the next (later) line
    prev = rev.shift(1)
    drops = ((rev > prev) & ((rev - prev) > 0)).fill_null(False).cast(pl.Int32).cum_sum()
    last_month = filled[-1]
    base = anchor_year - (1 if (anchor_month is not None and last_month is not None and last_month > anchor_month) else 0)
    years = (pl.lit(base) - drops).alias("year") if False else (base - drops)
    return years.reverse().cast(pl.Int32).alias("year")


def mtime_anchor(mtime: float) -> tuple[int, int]:
    t = datetime.fromtimestamp(mtime, tz=timezone.utc)
    return t.year, t.month
