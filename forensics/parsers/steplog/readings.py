"""The generic shapes' readings of a frame of lines, by whichever of three exact paths costs least:
a few plain lines in Python (small.py), many lines of a few shapes once per shape (shapes.py), else
generic.extract_generic's polars queries. tests/parsers/test_steplog_paths.py holds them to the same
rows. A sniffed head's series (series_only) of many plain lines of a few shapes are read once per shape
in Python, without a frame (series_by_shape)."""
from __future__ import annotations

import polars as pl

from forensics.frames import columns
from forensics.model import Skipped
from forensics.parsers.steplog import generic, shapes, small

# every digit masked to 0: a line's shape (shapes.py says why its lines match each regex alike)
_MASK = str.maketrans("123456789", "000000000")
# A sniffed head is read by shape up to this many shapes: each shape's template costs Python time, and
# up to this many cost about what extract_generic's queries cost on a head of any length.
HEAD_SHAPES = 24


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
    if isinstance(head, list):   # (plain lines go to small.py or by shape without being made a frame first)
        numbered = list(enumerate(head, 1))
        few = small.rows(numbered)
        if (few is None and (plain := small.rows(numbered, most=len(numbered))) is not None
                and (by_shape := series_by_shape(plain)) is not None):
            return by_shape
        head = few or generic.head_frame(head)
    try:
        return extract(head, "UTC", skipped, series_only=True)
    except pl.exceptions.PolarsError:
        return pl.DataFrame()


def series_by_shape(lines: list[tuple[int, str]]) -> pl.DataFrame | None:
    """extract_generic(..., series_only=True)'s rows (line, series) of plain lines (small.rows' rule, any
    count), each shape's readings found once (shapes.template) and each reading's value cut from its
    line: kept where generic.checked keeps it (a known key, a unit, a value in range and not negative;
    no count of skipped lines is asked for when sniffing). None where the shapes are too many (HEAD_SHAPES)
    or one is not modelled."""
    shape_of = [text.translate(_MASK) for _, text in lines]
    distinct = set(shape_of)
    if len(distinct) > HEAD_SHAPES or sum(len(x) ** 2 for x in distinct) > small.SQUARED_CHARS:
        return None
    templates = {}
    for shape in distinct:
        if (tp := shapes.template(shape)) is None:
            return None
        templates[shape] = tp
    found = []   # (part, line, piece, k, series): extract_generic's order
    for (line, text), shape in zip(lines, shape_of):
        _, reading, _, rows = templates[shape]
        for r in rows if reading else ():
            value = None if r["num"] is None else small.size_bytes(text[r["num"][0]:r["num"][1]], r["unit"])
            if r["series"] is not None and value is not None and value >= 0:
                found.append((r["part"], line, r["piece"], r["k"], r["series"]))
    found.sort(key=lambda x: x[:4])
    return columns({"line": [x[1] for x in found], "series": [x[4] for x in found]},
                   {"line": pl.Int64, "series": pl.String})
