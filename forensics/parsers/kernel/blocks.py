"""A kernel log read without cutting it into lines: only the few blocks that can hold a line worth
reading are decoded.

The kernel reader (kernel/reader.py) needs, of a month of kern.log, the lines that match its hint or a
free-text scanner's prefilter (a few hundred), the lines around them, the first and last lines and the
line count. Cutting a gigabyte into millions of polars rows to find them costs more than everything
else together, so each batch's bytes are left whole: they are cut into blocks of about 256 kB at
newlines, and a block is decoded into (line, text) rows only when

- it is not ASCII (then nothing below is assumed), or
- its lowercased text holds one of the declared literals, which every line that matches the hint or a
  scanner's prefilter holds (case-insensitively: the scanners' prefilters have `(?i:...)` parts;
  lowercasing and two case-sensitive passes of literals cost less than the case-insensitive regexes), or
- it holds a `|` (kept out of the literal pass: a one-byte literal slows the whole alternation down).

Blocks are tested by two worker threads (polars lets go of the GIL), a batch while the next one is
read; they also check that the bytes are UTF-8 without NULs. Line numbers come from counting newlines
(numpy, per block). Everything else a batch needs (the lines around the hits, the first and last
lines, an OOM report's task table) is decoded from its blocks with io/lines.parse_buffer, the same
line reader as everywhere. A batch that this does not fit (a NUL byte, invalid UTF-8, a byte order
mark, a line that may be over-long) is handed out as lines instead.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from forensics.io import lines as line_reader
from forensics.io.lines import MAX_LINE_CHARS

# Blocks are tested whole: one per piece of line_reader.NEWLINE_PIECE bytes (256 kB: small enough that
# a hit decodes few lines, big enough that the 256 of a batch make a cheap Series). Block k ends at the
# last newline of piece k, so that its newlines are those the line reader counted in that piece
# (newline_counts). A piece without one is a newline-free run of its size, which may be an over-long
# line: the general path drops and counts those (a line over MAX_LINE_CHARS holds whole pieces).
assert line_reader.NEWLINE_PIECE * 4 <= MAX_LINE_CHARS
_BOM = b"\xef\xbb\xbf"

def block_prefilter(literals: list[str], pipe: bool) -> tuple[list[str], bool]:
    """(the regexes over lowercased blocks, whether `|` is tested too) for these lowercase literals,
    one of which every line worth reading holds (declared beside the regexes they stand for)."""
    lits: list[str] = []
    for x in literals:
        if x not in lits:
            lits.append(x)
    # a literal that holds another is redundant ("killed process" holds "kill")
    lits = [x for x in lits if not any(y != x and y in x for y in lits)]
    # two alternations, the longer literals and the shorter ones: the regex engine's literal search
    # stays fast (one alternation of all of them is slower)
    lits.sort(key=len, reverse=True)
    half = (len(lits) + 1) // 2
    groups = [lits[:half], lits[half:]]
    return ["|".join(re.escape(x) for x in g) for g in groups if g], pipe


def _test_blocks(buf: bytes, offs: list[int], regexes: list[str], pipe: bool) -> tuple[np.ndarray, int] | None:
    """Which of the blocks buf[offs[k]:offs[k + 1]] may hold a line worth reading, and the replacement
    characters in them (what the general reader counts as bytes that were not UTF-8); None when the
    general reader must read them (invalid UTF-8, a NUL, a byte order mark). Run by a worker thread."""
    blocks = pl.Series([buf[a:b] for a, b in zip(offs, offs[1:])], dtype=pl.Binary)
    try:
        s = blocks.cast(pl.String)
    except pl.exceptions.PolarsError:
        return None   # not UTF-8
    if s.str.contains("\x00", literal=True).any():
        return None
    # a block that is not ASCII is read whole: its lowercased text proves nothing (a regex's (?i)
    # matches more than to_lowercase gives: `ſ` for `s`)
    hit = s.str.len_bytes() != s.str.len_chars()
    fffd = 0
    if hit.any():
        odd = s.filter(hit)
        if odd.str.contains("\ufeff", literal=True).any():
            return None   # a block starting with it would lose it
        fffd = int(odd.str.count_matches("\ufffd", literal=True).sum() or 0)
    low = s.str.to_lowercase()
    for rx in regexes:
        hit = hit | low.str.contains(rx)
    if pipe:
        hit = hit | s.str.contains("|", literal=True)
    return hit.to_numpy(), fffd


class RawBatch:
    """The whole lines of a batch, still bytes: buf[:end], lines first .. first + height - 1, cut into
    blocks at offs (block k is buf[offs[k]:offs[k + 1]], its first line firsts[k])."""

    def __init__(self, buf: bytes, end: int, first: int, offs: list[int], counts: np.ndarray, partial: bool):
        self.buf, self.end, self.first = buf, end, first
        self.offs = offs
        self.firsts = first + np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.height = int(counts.sum()) + (1 if partial else 0)
        self.partial = partial
        # the last line has no newline (the end of the file): it is one more line of the last block
        self.firsts[-1] += 1 if partial else 0
        self._frames: dict[int, pl.DataFrame] = {}

    @property
    def last(self) -> int:
        return self.first + self.height - 1

    def analysis(self) -> np.ndarray | None:
        """Which blocks may hold a line worth reading; None when the general reader must read this
        batch (general_frame()). Counts the batch's replacement characters."""
        out = [p.result() for p in self.parts]
        if any(r is None for r in out):
            return None
        self.stats.decode_errors += sum(r[1] for r in out)
        return np.concatenate([r[0] for r in out])

    def general_frame(self) -> pl.DataFrame:
        """The batch as the general reader reads it (counting its NULs and replaced bytes)."""
        return line_reader.parse_buffer(self.buf, self.end, self.first, self.stats)

    def block(self, k: int) -> pl.DataFrame:
        f = self._frames.get(k)
        if f is None:
            piece = self.buf[self.offs[k]:self.offs[k + 1]]
            f = line_reader.parse_buffer(piece, len(piece), int(self.firsts[k]), line_reader.ReadStats())
            self._frames[k] = f
        return f

    def blocks(self, ks) -> pl.DataFrame:
        parts = [self.block(int(k)) for k in ks]
        if not parts:
            return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
        return pl.concat(parts) if len(parts) > 1 else parts[0]

    def frame(self) -> pl.DataFrame:
        """All the lines (read at once: faster than block by block)."""
        return line_reader.parse_buffer(self.buf, self.end, self.first, line_reader.ReadStats())

    def first_text(self) -> str:
        """The text of the first line."""
        if 0 in self._frames:
            return self._frames[0]["text"][0]
        nl = self.buf.find(b"\n", 0, self.end)
        piece = self.buf[:nl + 1 if nl >= 0 else self.end]
        return line_reader.parse_buffer(piece, len(piece), self.first, line_reader.ReadStats())["text"][0]

    def tail(self, n: int) -> pl.DataFrame:
        """The last n lines (only their bytes decoded)."""
        n = min(n, self.height)
        start, pos = 0, self.end - (0 if self.partial else 1)
        for _ in range(n):
            pos = self.buf.rfind(b"\n", 0, pos)
            if pos < 0:
                start = 0
                break
            start = pos + 1
        piece = self.buf[start:self.end]
        return line_reader.parse_buffer(piece, len(piece), self.last - n + 1, line_reader.ReadStats())

    def lines_in(self, ranges: list[tuple[int, int]]) -> pl.DataFrame:
        """The lines of this batch inside any of these (first, last) line ranges."""
        lo = np.array([max(a, self.first) for a, b in ranges], dtype=np.int64)
        hi = np.array([min(b, self.last) for a, b in ranges], dtype=np.int64)
        ok = lo <= hi
        lo, hi = lo[ok], hi[ok]
        if not lo.size:
            return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
        # the blocks that hold a line of a range: [firsts[k], firsts[k + 1]) meets [lo, hi]
        starts, ends = self.firsts[:-1], self.firsts[1:] - 1
        first_k = np.searchsorted(ends, lo, side="left")
        last_k = np.searchsorted(starts, hi, side="right") - 1
        want = np.zeros(starts.size + 1, dtype=np.int64)
        np.add.at(want, first_k, 1)
        np.add.at(want, last_k + 1, -1)
        ks = np.flatnonzero(np.cumsum(want)[:-1] > 0)
        df = self.blocks(ks)
        line = df["line"].to_numpy()
        mark = np.zeros(line.size + 1, dtype=np.int64)
        np.add.at(mark, np.searchsorted(line, lo, side="left"), 1)
        np.add.at(mark, np.searchsorted(line, hi, side="right"), -1)
        return df.filter(pl.Series(np.cumsum(mark)[:-1] > 0))


class Reader:
    """Batches of a source for the kernel reader: RawBatch where the bytes allow, else the general
    path's frames; lines counted and the source's counts set as line_reader.cleaned_batches does."""

    def __init__(self, src, regexes: list[str], pipe: bool, batch_bytes: int | None = None):
        self.src, self.regexes, self.pipe = src, regexes, pipe
        self.batch_bytes = batch_bytes or line_reader.BATCH_BYTES
        self.pool: ThreadPoolExecutor | None = None

    def _parse(self, buf: bytes, end: int, first_line: int, stats: line_reader.ReadStats,
               piece_newlines: np.ndarray | None = None):
        """line_reader.raw_batches' `parse`: a RawBatch, or the general reader's frame. (Whether the bytes
        are UTF-8 without NULs is found by the workers: a RawBatch that is not is read by the general
        reader when its turn comes, see RawBatch.analysis.) `piece_newlines`: the line reader's
        newline_counts(buf, end), which are the blocks' (counted here when not given)."""
        stats.raw = None
        if end == 0 or buf.startswith(_BOM):
            return line_reader.parse_buffer(buf, end, first_line, stats)
        counts = line_reader.newline_counts(buf, end) if piece_newlines is None else piece_newlines
        piece = line_reader.NEWLINE_PIECE
        if not counts[:end // piece].all():
            return line_reader.parse_buffer(buf, end, first_line, stats)   # a line that may be too long
        # (piece k - 1 holds a newline: block k - 1 ends after its last one)
        offs = [0, *(buf.rfind(b"\n", (k - 1) * piece, k * piece) + 1 for k in range(1, counts.size)), end]
        rb = RawBatch(buf, end, first_line, offs, counts, partial=buf[end - 1:end] != b"\n")
        rb.stats = stats
        # two workers, each half of the blocks
        h = len(offs) // 2
        rb.parts = [self.pool.submit(_test_blocks, buf, offs[:h + 1], self.regexes, self.pipe)]
        if len(offs) > h + 1:
            rb.parts.append(self.pool.submit(_test_blocks, buf, offs[h:], self.regexes, self.pipe))
        return rb

    def batches(self):
        """Frames and RawBatches in file order; a RawBatch is handed out once the next batch has been
        read, so that its blocks are tested while the next piece is read."""
        stats = line_reader.ReadStats()
        first_read = not self.src.read_accounted
        self.pool = ThreadPoolExecutor(2)
        try:
            held = None
            for item in line_reader.cleaned_batches(self.src, self.batch_bytes, stats=stats, parse=self._parse):
                if held is not None:
                    yield held
                held = item
            if held is not None:
                yield held
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
        self.src.streamed_lines = stats.lines
        if first_read:
            # counted by RawBatch.analysis after cleaned_batches set them (its last batch is handed out last)
            self.src.decode_errors, self.src.nul_bytes = stats.decode_errors, stats.nuls


