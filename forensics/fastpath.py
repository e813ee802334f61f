"""Reading big inputs fast and in bounded memory.

Lines are cut by polars' native CSV reader (one String column, NUL as the separator, no quoting),
fed with pieces of the (decompressed) stream that end on a newline. A 2.5 GB log never becomes one Python string and
the reading runs on all cores. `Source.frame()` and `Source.iter_frames()` use it for UTF-8
input; the result is the same as the line-by-line reader's (blank lines kept, one CR before the LF
removed, invalid bytes replaced and counted, NULs removed and counted, over-long lines dropped and
counted, a truncated stream keeps the lines before the cut).
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Iterator

import polars as pl

from . import wrappers

# Pieces handed to the CSV reader: big enough for its threads, small enough to bound memory.
BATCH_BYTES = 64 << 20
_BOM = codecs.BOM_UTF8


@dataclass
class ReadStats:
    lines: int = 0
    overlong: list[int] = field(default_factory=list)   # line numbers dropped for being too long
    cut: BaseException | None = None
    cut_partial: bool = False
    nuls: int = 0
    decode_errors: int = 0


def _python_lines(part: bytes) -> pl.DataFrame:
    """The slow way, for a piece the CSV reader refuses (a line holding the separator)."""
    lines = part.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return pl.DataFrame({"text": [ln[:-1] if ln.endswith("\r") else ln for ln in lines]}, schema={"text": pl.String})


def _parse_part(part: bytes, first_line: int, stats: ReadStats) -> pl.DataFrame:
    """`line`, `text` of a piece of whole lines (it ends with a newline, or is the file's last line)."""
    if b"\x00" in part:
        stats.nuls += part.count(b"\x00")
        part = part.replace(b"\x00", b"")
    if part.startswith(_BOM):
        # the reader would take a byte order mark at the start of its input for its own: give it a
        # blank first line to drop instead
        return _parse_part(b"\n" + part, first_line - 1, stats).slice(1)
    try:
        df = pl.read_csv(part, has_header=False, separator="\x00", quote_char=None, schema={"text": pl.String},
                         encoding="utf8-lossy")
    except pl.exceptions.PolarsError:
        df = _python_lines(part)
    text = pl.col("text").fill_null("")
    df = df.select(pl.int_range(first_line, first_line + pl.len(), dtype=pl.Int64).alias("line"), text.alias("text"))
    if not part.isascii():
        stats.decode_errors += int(df.select(pl.col("text").str.count_matches("\ufffd", literal=True).sum()).item() or 0)
    return df


def raw_batches(src, stats: ReadStats, batch_bytes: int = BATCH_BYTES) -> Iterator[pl.DataFrame]:
    """(line, text) frames of a UTF-8 source, in file order, text not yet unwrapped. `stats` is
    complete once the iterator is exhausted.

    (polars' own scan_csv of the file would save one copy, but when it meets a NUL byte or invalid
    UTF-8 it can hand out a wrong batch before it raises: pieces fed to read_csv are safe.)"""
    yield from _piece_batches(src, stats, batch_bytes, 1, 0)


def _piece_batches(src, stats: ReadStats, batch_bytes: int, next_line: int, offset: int) -> Iterator[pl.DataFrame]:
    """Pieces of the decompressed stream, cut after their last newline, each read by read_csv."""
    from .sources import MAX_LINE_CHARS

    # a line of more than this many bytes has more than MAX_LINE_CHARS characters for sure
    max_line_bytes = 4 * MAX_LINE_CHARS
    gen = src._chunks(batch_bytes)
    carry = b""
    dropping = False
    first = True
    while True:
        try:
            chunk = next(gen)
        except StopIteration as stop:
            stats.cut = stop.value
            break
        if offset:
            if len(chunk) <= offset:
                offset -= len(chunk)
                continue
            chunk, offset, first = chunk[offset:], 0, False
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
        if dropping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1:]
            dropping = False
        buf = carry + chunk if carry else chunk
        cut = buf.rfind(b"\n")
        if cut < 0:
            carry = buf
        else:
            carry = buf[cut + 1:]
            df = _parse_part(buf[: cut + 1], next_line, stats)
            next_line += df.height
            yield df
        if len(carry) > max_line_bytes:
            stats.overlong.append(next_line)
            yield pl.DataFrame({"line": [next_line], "text": [""]}, schema={"line": pl.Int64, "text": pl.String})
            next_line += 1
            carry, dropping = b"", True
    if carry and not dropping:
        if stats.cut is not None:
            stats.cut_partial = True   # the end of a cut stream: a partial line, never read as data
        else:
            df = _parse_part(carry, next_line, stats)
            next_line += df.height
            yield df
    stats.lines = next_line - 1


def unwrap(w, df: pl.DataFrame) -> pl.DataFrame:
    """The wrapper removed from each line (the reader already removed one CR before the LF, which
    is all wrappers.strip_expr removes first)."""
    if w is None:
        return df
    text = pl.col("text")
    if df.select(text.str.ends_with("\r").any()).item():
        text = pl.concat_str([text, pl.lit("\r")])   # so that strip_expr's own CR removal is a no-op
    return df.with_columns(wrappers.strip_expr(w, text).alias("text"))


def cleaned_batches(src, batch_bytes: int = BATCH_BYTES) -> Iterator[pl.DataFrame]:
    """What Source.frame() holds, in batches: over-long lines emptied, wrapper removed. When the
    iterator is exhausted, the source's counts (decode errors, NULs, skipped lines, problems) are set,
    once per source however often it is read."""
    from .sources import MAX_LINE_CHARS

    src.head()
    stats = ReadStats()
    long_lines: list[int] = []
    for df in raw_batches(src, stats, batch_bytes):
        too_long = pl.col("text").str.len_bytes() > MAX_LINE_CHARS
        if df.select(too_long.any()).item():
            too_long = too_long & (pl.col("text").str.len_chars() > MAX_LINE_CHARS)
            long_lines.extend(df.filter(too_long)["line"].to_list())
            df = df.with_columns(pl.when(too_long).then(pl.lit("")).otherwise(pl.col("text")).alias("text"))
        yield unwrap(src.wrapper, df)
    if stats.cut is not None and stats.lines == 0:
        raise src._cut_error(stats.cut, 0)
    if getattr(src, "_read_accounted", False):
        return
    src._read_accounted = True
    src.decode_errors, src.nul_bytes = stats.decode_errors, stats.nuls
    overlong = sorted(set(stats.overlong) | set(long_lines))
    if overlong:
        from .sources import LINE_TOO_LONG

        src.skipped.add_lines(LINE_TOO_LONG, overlong)
    if stats.cut is not None:
        from .sources import CUT_AT_END

        if stats.cut_partial:
            src.skipped.add(CUT_AT_END, stats.lines + 1)
        src.problems.append(str(src._cut_error(stats.cut, stats.lines)))


def read_frame(src) -> pl.DataFrame:
    parts = list(cleaned_batches(src))
    if not parts:
        return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return pl.concat(parts, how="vertical", rechunk=len(parts) > 1)
