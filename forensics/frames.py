"""Frame helpers used on hot paths.

rows_where: `DataFrame.filter` runs as a one-node lazy query whose work is handed to polars' thread
pool while the caller waits, a fixed cost per call whatever the frame's size (a thread wake-up on each
side). Evaluating the predicate with `select` (which polars runs on the calling thread for small
frames) and filtering each column as a Series avoids it. A job's small logs run hundreds of filters on
frames of a few hundred rows, where that adds up; big frames gain nothing and lose nothing.

partitions: `partition_by(..., as_dict=True)` reads each partition's key with a query of its own (one
per series, per source, ...); the keys are read from each partition's first row instead.

owned: a copy of kept rows out of a batch's string buffers (see its docstring).

columns: `pl.DataFrame(dict_of_lists, schema=...)` a Series at a time, at a fraction of the dict
constructor's fixed cost (a small file's readings, built in Python).

translated: every line's bytes mapped by a `bytes.translate` table, at the cost of a copy of the text,
where polars' replace_many walks each line and writes each match; masked_digits, a line's shape (each digit 0).

csv_safe: text cells a spreadsheet would run as a formula, made inert for a CSV.
"""
from __future__ import annotations

import polars as pl


def rows_where(df: pl.DataFrame, predicate: pl.Expr | pl.Series) -> pl.DataFrame:
    """df.filter(predicate) for one predicate: the rows where it is true (null keeps no row)."""
    if isinstance(predicate, pl.Series):
        mask = predicate
    else:
        picked = df.select(predicate)
        if picked.width != 1:
            return df.filter(predicate)   # several columns: filter's own rule
        mask = picked.to_series()
    if mask.len() != df.height:
        if mask.len() != 1:
            return df.filter(mask)   # filter's own error
        return df if mask[0] is True else df.clear()
    if mask.dtype != pl.Boolean or not df.width:
        return df.filter(mask)
    return pl.DataFrame([s.filter(mask) for s in df.iter_columns()])


def columns(values: dict[str, list], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """pl.DataFrame(values, schema=schema): a column of each schema entry, of the values of its name."""
    return pl.DataFrame([pl.Series(name, values[name], dtype) for name, dtype in schema.items()])


def partitions(df: pl.DataFrame, *by: str) -> dict[tuple, pl.DataFrame]:
    """df.partition_by(by, as_dict=True, maintain_order=True): {key values: rows}, in order of first appearance."""
    return {tuple(part.get_column(c)[0] for c in by): part for part in df.partition_by(list(by), maintain_order=True)}


def owned(df: pl.DataFrame) -> pl.DataFrame:
    """df with its text in buffers of its own. A filter or a slice of a batch shares the batch's string
    buffers, so a few lines kept of each batch would keep every batch in memory; the kept lines are
    copied out instead (concat_str with "" writes new strings)."""
    cols = [c for c, t in df.schema.items() if t == pl.String]
    if not cols or not df.height:
        return df
    return df.with_columns(pl.concat_str(pl.col(c), pl.lit("")).alias(c) for c in cols)


def translated(text: pl.Series, table: bytes) -> pl.Series:
    """Each string of `text` with its bytes mapped by `table` (bytes.maketrans of ASCII to ASCII, so UTF-8
    stays valid and each string keeps its length): the strings joined by newlines, mapped at once, and cut
    into lines again by polars' CSV reader. Strings the cutting would not give back as they were (one
    holding a newline, a CR or a NUL, a null) take polars' replace_many."""
    if not text.len():
        return text
    if not text.null_count() and not text.str.contains_any(["\n", "\r", "\x00"]).any():
        # (a first line of its own: the CSV reader would take a byte order mark at the start for its own)
        joined = ("-\n" + text.str.join("\n").item()).encode().translate(table)
        out = pl.read_csv(joined, has_header=False, separator="\x00", quote_char=None,
                          schema={text.name: pl.String}).to_series().slice(1).fill_null("")
        if out.len() == text.len():
            return out
    changed = [b for b in range(128) if table[b] != b]
    return text.str.replace_many([chr(b) for b in changed], [chr(table[b]) for b in changed])


_DIGITS_TO_0 = bytes.maketrans(b"123456789", b"000000000")


def masked_digits(text: pl.Series) -> pl.Series:
    """Each string of `text` with every ASCII digit made 0: lines of one print, numbers aside, mask alike."""
    return translated(text, _DIGITS_TO_0)


# what a spreadsheet opening a CSV takes for the start of a formula (OWASP's list)
_FORMULA_START = r"^[=+\-@\t\r]"


def csv_safe(df: pl.DataFrame) -> pl.DataFrame:
    """Text cells that start like a formula (= + - @ tab CR) get a leading ' so a spreadsheet shows
    them as text: log text, paths and folder names are untrusted. Numbers are left as they are."""
    text = [c for c, t in df.schema.items() if t == pl.String]
    if not text:
        return df
    return df.with_columns(
        pl.when(pl.col(c).str.contains(_FORMULA_START)).then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in text)
