"""What the metric-export readers share: CSV header cells (quoted, any of the usual delimiters),
data cells as columns, numbers and epoch clocks.
"""
from __future__ import annotations

import csv

import polars as pl

UTC = pl.Datetime("us", "UTC")
BLANK = "blank line"
# A time outside these years is a damaged one (ingest drops the same as implausible).
_MIN_S, _MAX_S = 0.0, 7.3e9     # 1970 .. 2200


def without_blank(rows: pl.DataFrame, skipped) -> pl.DataFrame:
    """`rows` (line, text) without its blank lines, which are counted in `skipped`."""
    blank = rows["text"].str.strip_chars() == ""
    skipped.add_lines(BLANK, rows.filter(blank)["line"])
    return rows.filter(~blank)


def header_cells(line: str, delimiter: str) -> list[str]:
    """The cells of one CSV header line (quotes and doubled quotes as CSV writers write them)."""
    try:
        return next(csv.reader([line], delimiter=delimiter))
    except (csv.Error, StopIteration):
        return line.split(delimiter)


def delimiter_of(line: str, choices: str = ",;\t") -> str:
    """The delimiter a header line uses: the choice that splits it into most cells outside quotes."""
    best, most = ",", 0
    for d in choices:
        n = len(header_cells(line, d))
        if n > most:
            best, most = d, n
    return best


def cells(text: pl.Expr, delimiter: str, n: int, only: set[int] | None = None) -> list[pl.Expr]:
    """The first n cells of CSV data rows, without their quotes (data cells of these exports are
    numbers and times: no delimiter inside a cell); of those, only the indices in `only` when given
    (a wide export reads a few of its hundreds of columns)."""
    parts = text.str.split(delimiter)
    return [parts.list.get(i, null_on_oob=True).str.strip_chars().str.strip_chars('"').alias(f"c{i}")
            for i in range(n) if only is None or i in only]


def epoch(seconds: pl.Expr) -> pl.Expr:
    """Unix seconds (float) -> Datetime UTC; null outside 1970..2200."""
    s = pl.when(seconds.is_between(_MIN_S, _MAX_S)).then(seconds)
    return (s * 1e6).round().cast(pl.Int64).cast(UTC)


def number(cell: pl.Expr) -> pl.Expr:
    """A number cell as Float64 (null when blank or not a number)."""
    return cell.str.strip_chars().cast(pl.Float64, strict=False)
