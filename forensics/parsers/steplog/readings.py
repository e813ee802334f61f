"""The generic shapes' readings of a frame of lines, by whichever of three exact paths costs least:
a few plain lines in Python (small.py), many lines of a few shapes once per shape (shapes.py), else
generic.extract_generic's polars queries. tests/parsers/test_steplog_paths.py holds them to the same
rows."""
from __future__ import annotations

import polars as pl

from forensics.model import Skipped
from forensics.parsers.steplog import generic, shapes, small


def extract(df: pl.DataFrame | list[tuple[int, str]], zone: str, skipped: Skipped, series_only: bool = False,
            unitless: list[int] | None = None, carry: dict | None = None) -> pl.DataFrame:
    """generic.extract_generic(df, ...) (its arguments and rows); `df` may be the rows (line, text) of a
    frame that small.rows takes."""
    if (lines := small.rows(df)) is not None:   # (a few lines: the same rows without a polars query)
        return small.extract(lines, zone, skipped, series_only, unitless, carry)
    if not series_only and (by_shape := shapes.extract(df, zone, skipped, unitless, carry)) is not None:
        return by_shape   # (many lines of a few shapes: each shape read once)
    return generic.extract_generic(df, zone, skipped, series_only, unitless, carry)


def head_readings(head: list[str] | pl.DataFrame) -> pl.DataFrame:
    """Generic readings in the first lines, or in their generic.head_frame (for sniffing)."""
    skipped = Skipped()
    if isinstance(head, list):   # (a few plain lines go to small.py without being made a frame first)
        head = small.rows(list(enumerate(head, 1))) or generic.head_frame(head)
    try:
        return extract(head, "UTC", skipped, series_only=True)
    except pl.exceptions.PolarsError:
        return pl.DataFrame()
