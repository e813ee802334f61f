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
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import polars as pl

from forensics.errors import InputError, permission_error
from forensics.io import wrappers
from forensics.units import human

# A line longer than this is not a log line (a binary blob, a progress bar without newlines): it is
# dropped and counted as "line too long", so no regex ever runs over more than a MiB of one line.
MAX_LINE_CHARS = 1 << 20
LINE_TOO_LONG = f"line too long (over {MAX_LINE_CHARS >> 20} MiB), not read"
CUT_AT_END = "last line cut off where the stream ends"

# Pieces handed to the CSV reader: big enough for its threads, small enough to bound memory.
BATCH_BYTES = 64 << 20
PIECE_CACHE = 256 << 20
# A piece of short lines is read in parts of at most this many lines: a frame row costs tens of bytes
# whatever the line's length, so 64 MB of blank lines would be a frame of gigabytes.
MAX_BATCH_LINES = 1 << 22
_BOM = codecs.BOM_UTF8


@dataclass
class ReadStats:
    lines: int = 0
    overlong: list[int] = field(default_factory=list)   # line numbers dropped for being too long
    cut: BaseException | None = None
    cut_partial: bool = False
    nuls: int = 0
    decode_errors: int = 0
    grew: int = 0   # bytes written to the file after it was opened, not read
    # the bytes the last batch was read from, as (buffer, end of its whole lines), when its lines are
    # exactly those bytes (no NUL removed, no wrapper, nothing emptied): a parser may cut them again
    raw: tuple[bytes, int] | None = None


def _python_lines(part: bytes) -> pl.DataFrame:
    """The slow way, for a piece the CSV reader refuses."""
    lines = part.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return pl.DataFrame({"text": [ln[:-1] if ln.endswith("\r") else ln for ln in lines]}, schema={"text": pl.String})


def parse_buffer(buf: bytes, end: int, first_line: int, stats: ReadStats,
                 piece_newlines: np.ndarray | None = None) -> pl.DataFrame:
    """`line`, `text` of the whole lines in buf[:end] (the rest of buf is a partial line, left out:
    the buffer is read as it is, without copying its whole lines out first). `piece_newlines`:
    newline_counts(buf, end) when the caller has them (raw_batches' `parse` signature; not needed here)."""
    stats.raw = None
    if buf.find(b"\x00", 0, end) >= 0:
        stats.nuls += buf.count(b"\x00", 0, end)
        buf = buf[:end].replace(b"\x00", b"")
        end = len(buf)
    if buf.startswith(_BOM):
        # the reader would take a byte order mark at the start of its input for its own: give it a
        # blank first line to drop instead
        return parse_buffer(b"\n" + buf[:end], end + 1, first_line - 1, stats).slice(1)
    if end == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    try:
        df = pl.read_csv(buf, has_header=False, separator="\x00", quote_char=None, schema={"text": pl.String},
                         encoding="utf8-lossy")
        if end < len(buf):
            df = df.slice(0, df.height - 1)
        stats.raw = (buf, end)
    except pl.exceptions.PolarsError:
        df = _python_lines(buf[:end])
    df = df.select(pl.int_range(first_line, first_line + pl.len(), dtype=pl.Int64).alias("line"),
                   pl.col("text").fill_null(""))
    if not buf.isascii():
        stats.decode_errors += int(df.select(pl.col("text").str.count_matches("\ufffd", literal=True).sum()).item() or 0)
    return df


# newlines are counted in pieces of this many bytes, which stay in the CPU's cache
NEWLINE_PIECE = 1 << 18


def newline_counts(buf: bytes, end: int) -> np.ndarray:
    """The newlines in each NEWLINE_PIECE bytes of buf[:end] (the last piece may be shorter)."""
    a = np.frombuffer(buf, np.uint8, count=end)
    return np.array([np.count_nonzero(a[i:i + NEWLINE_PIECE] == 10) for i in range(0, end, NEWLINE_PIECE)],
                    dtype=np.int64)


def count_newlines(buf: bytes, end: int) -> int:
    """buf.count(b"\\n", 0, end), 5x faster."""
    return int(newline_counts(buf, end).sum())


class ByteLines:
    """The whole lines of a batch left in their bytes, buf[:end]: lines first .. first + height - 1,
    ASCII without NUL or CR and none over-long, so each line is its bytes (parse_bytes makes one only
    then). A reader that reads the bytes itself (nvsmi/csvcells.read_clean) has the batch cut into
    lines only when it asks: text() cuts the text alone, frame() the (line, text) frame parse_buffer
    gives."""

    def __init__(self, buf: bytes, end: int, first: int, height: int):
        self.buf, self.end, self.first, self.height = buf, end, first, height
        self._frame: pl.DataFrame | None = None
        self._text: pl.Series | None = None
        self._unit: bytes | None | bool = False

    @property
    def blank(self) -> bool:
        """Every line is empty (the bytes are nothing but newlines)."""
        return self.end == self.height and self.buf[self.end - 1:self.end] == b"\n"

    def unit(self) -> bytes | None:
        """The line (with its newline) when the batch is that one line repeated, else None."""
        if self._unit is False:
            self._unit = None
            size = self.buf.find(b"\n", 0, self.end) + 1
            if size and self.end % size == 0 and self.height > 1:
                a = np.frombuffer(self.buf, np.uint8, count=self.end).reshape(-1, size)
                if (a == a[0]).all():
                    self._unit = self.buf[:size]
        return self._unit

    def after(self, k: int) -> "ByteLines":
        """The lines after the first k of a batch of one line repeated (unit())."""
        size = len(self.unit())
        return ByteLines(self.buf[k * size:self.end], self.end - k * size, self.first + k, self.height - k)

    def frame(self) -> pl.DataFrame:
        if self._frame is None:
            self._frame = parse_buffer(self.buf, self.end, self.first, ReadStats())
        return self._frame

    def text(self) -> pl.Series:
        if self._frame is not None:
            return self._frame["text"]
        if self._text is None:
            try:
                text = pl.read_csv(self.buf, has_header=False, separator="\x00", quote_char=None,
                                   schema={"text": pl.String})["text"]
            except pl.exceptions.PolarsError:
                return self.frame()["text"]
            self._text = text.head(self.height).fill_null("")
        return self._text

    def head(self, n: int) -> pl.DataFrame:
        """The first n lines (only their bytes cut)."""
        at = 0
        for _ in range(n):
            nl = self.buf.find(b"\n", at, self.end)
            if nl < 0:
                at = self.end
                break
            at = nl + 1
        return parse_buffer(self.buf[:at], at, self.first, ReadStats())


def _no_line_over(buf: bytes, end: int, limit: int) -> bool:
    """No newline-free run of `limit` bytes in buf[:end] (a sufficient test: a run of half of it
    without a newline fails it)."""
    half = max(1, limit // 2)
    return end <= half or all(buf.find(b"\n", i, i + half) >= 0 for i in range(0, end - half + 1, half))


def parse_bytes(buf: bytes, end: int, first_line: int, stats: ReadStats, piece_newlines: np.ndarray | None = None):
    """raw_batches' `parse` for a reader that takes ByteLines: the whole lines in buf[:end] as ByteLines
    where their bytes are their text (ASCII, no NUL, no CR, none over-long), else parse_buffer's frame.
    `piece_newlines`: newline_counts(buf, end) when the caller has them (counting 64 MB costs a few ms)."""
    if end == 0 or not buf.isascii() or buf.find(b"\x00", 0, end) >= 0 or buf.find(b"\r", 0, end) >= 0 \
            or not _no_line_over(buf, end, MAX_LINE_CHARS):
        return parse_buffer(buf, end, first_line, stats)
    n = count_newlines(buf, end) if piece_newlines is None else int(piece_newlines.sum())
    height = n + (buf[end - 1:end] != b"\n")
    stats.raw = (buf, end)
    return ByteLines(buf, end, first_line, height)


def frame_of(batch) -> pl.DataFrame:
    """A batch's (line, text) frame, whether it came as a frame or as ByteLines."""
    return batch.frame() if isinstance(batch, ByteLines) else batch


def _parsed(parse, buf: bytes, end: int, first_line: int, stats: ReadStats) -> Iterator:
    """parse(buf, end, ...) in parts of at most about MAX_BATCH_LINES whole lines."""
    counts = newline_counts(buf, end)
    n = int(counts.sum())
    if n <= MAX_BATCH_LINES:
        yield parse(buf, end, first_line, stats, piece_newlines=counts)
        return
    step = max(1, end * MAX_BATCH_LINES // n)   # bytes that hold about MAX_BATCH_LINES lines
    start = 0
    while start < end:
        stop = end if end - start <= step else buf.rfind(b"\n", start, start + step) + 1
        if stop <= start:
            stop = buf.find(b"\n", start + step, end) + 1 or end
        piece = buf[start:stop]
        df = parse(piece, len(piece), first_line, stats)
        first_line += df.height
        yield df
        start = stop


def _plain_chunks(src, size: int, stats: ReadStats | None = None) -> Iterator[bytes]:
    """An uncompressed file in pieces, up to the size it had when it was opened (a log still being
    written is read that far, and the line being written then to its end: `stats.grew` counts the bytes
    written since); a read error ends them, returned as the generator's value."""
    try:
        fh = open(src.real_path, "rb")
    except PermissionError:
        raise permission_error(src.path)
    # a sparse file's holes read as NUL bytes: counted, not read (a crash can leave a log whose size
    # runs past its last written block; 20 GB of hole took 40 s to read), and a piece stops at a hole
    probe = _hole_probe(src, fh) if stats is not None else None
    # the pieces given since the caller last sent a partial line back: (where, length, NULs of the
    # hole skipped before it), to find in the file a partial line that spans a hole
    given: deque[tuple[int, int, int]] = deque()
    given_bytes = 0
    try:
        with fh:
            left = src.size
            while True:
                want = min(size, left)
                skipped = 0
                if probe is not None and left > 0:
                    pos = fh.tell()
                    data, hole = _data_extent(probe, pos, pos + left)
                    if data > pos:
                        skipped = data - pos
                        stats.nuls += skipped
                        left -= skipped
                        fh.seek(data)
                    want = min(want, hole - data)
                try:
                    chunk = fh.read(want) if want > 0 else b""
                except PermissionError:
                    raise permission_error(src.path)
                except OSError as e:
                    return e
                if not chunk:
                    break
                if probe is not None:
                    given.append((fh.tell() - len(chunk), len(chunk), skipped))
                    given_bytes += len(chunk)
                    # (a partial line sent back is shorter than what the caller reads before it cuts)
                    while given_bytes - given[0][1] > 2 * size:
                        given_bytes -= given.popleft()[1]
                left -= len(chunk)
                back = yield chunk
                if back and probe is None:
                    # the caller keeps only whole lines: read its partial last line again with the next piece
                    fh.seek(-back, 1)
                    left += back
                elif back:
                    # (the same, across the holes skipped within it, whose NULs are then counted again)
                    while back > given[-1][1]:
                        at, n, nuls = given.pop()
                        back -= n
                        stats.nuls -= nuls
                    at, n, _ = given[-1]
                    fh.seek(at + n - back)
                    left = src.size - fh.tell()
                    given.clear()
                    given_bytes = 0
            try:
                grown = os.fstat(fh.fileno()).st_size - fh.tell()
                if grown <= 0 or stats is None:
                    return None
                rest = _rest_of_line(fh)
            except OSError:
                return None
            if rest:
                yield rest
            stats.grew = grown - len(rest)
    finally:
        if probe is not None:
            os.close(probe)
    return None


def _hole_probe(src, fh) -> int | None:
    """A descriptor of its own (its offset is not `fh`'s) to ask where a file with holes has data;
    None for a file without holes."""
    try:
        st = os.fstat(fh.fileno())
        if not hasattr(os, "SEEK_DATA") or st.st_blocks * 512 >= st.st_size:
            return None
        return os.open(src.real_path, os.O_RDONLY)
    except OSError:
        return None


def _data_extent(probe: int, pos: int, end: int) -> tuple[int, int]:
    """(where data starts at or after pos, where the next hole after it starts), both at most end."""
    try:
        data = min(os.lseek(probe, pos, os.SEEK_DATA), end)
        return data, (min(os.lseek(probe, data, os.SEEK_HOLE), end) if data < end else end)
    except OSError:   # ENXIO: hole up to the end of the file
        return end, end


def _rest_of_line(fh) -> bytes:
    """The bytes up to the next newline (included) when the last byte read was not one; b"" when it
    was, or when no newline comes within a line's length."""
    at = fh.tell()
    if at == 0:
        return b""
    fh.seek(at - 1)
    if fh.read(1) == b"\n":
        return b""
    rest = b""
    while len(rest) <= 4 * MAX_LINE_CHARS:
        piece = fh.read(1 << 16)
        nl = piece.find(b"\n")
        if nl >= 0:
            return rest + piece[:nl + 1]
        if not piece:
            break
        rest += piece
    fh.seek(at)
    return b""


_MALLOC_TUNED = False


def _reuse_big_buffers() -> None:
    """Let glibc keep freed pieces for the next read instead of unmapping them: a fresh 64 MB buffer
    costs thousands of page faults, which on a virtual machine can cost more than the read itself.
    Process-wide; at most PIECE_CACHE bytes stay held."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, PIECE_CACHE)
        libc.mallopt(m_trim_threshold, PIECE_CACHE)
    except (OSError, AttributeError):
        pass   # not glibc: reading is slower, nothing else changes


def prefetched(gen, depth: int = 16):
    """The pieces of `gen` decompressed by a thread of their own (zlib and zstandard let go of the GIL),
    so decompressing the next piece overlaps with reading this one; the generator's return value (a
    read error) comes through. Consumed with send(None) like the plain reader."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work():
        try:
            while not stop.is_set():
                try:
                    q.put(next(gen))
                except StopIteration as e:
                    q.put((done, e.value, None))
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the reader, which raises it
            q.put((done, None, e))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if isinstance(item, tuple) and item[0] is done:
                if item[2] is not None:
                    raise item[2]
                return item[1]
            yield item
    finally:
        stop.set()
        while t.is_alive():   # let the thread see the stop flag (it may wait on a full queue)
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.01)


def raw_batches(src, stats: ReadStats, batch_bytes: int = BATCH_BYTES, parse=parse_buffer) -> Iterator[pl.DataFrame]:
    """(line, text) frames of a UTF-8 source, in file order, text not yet unwrapped. `stats` is
    complete once the iterator is exhausted.

    Pieces of about batch_bytes are read (an uncompressed file straight, a compressed one from the
    streaming decompressor) and handed to read_csv whole, the partial line at their end left for the
    next piece. (polars' own scan_csv of the file would save a copy, but when it meets a NUL byte or
    invalid UTF-8 it can hand out a wrong batch before it raises.) `parse` turns a piece's whole lines
    into what is yielded (anything with a `height`: kernel/blocks.py keeps most pieces as bytes)."""
    # a line of more than this many bytes has more than MAX_LINE_CHARS characters for sure
    max_line_bytes = 4 * MAX_LINE_CHARS
    if batch_bytes >= 1 << 20:
        _reuse_big_buffers()
    plain = src.plain_file() is not None
    gen = _plain_chunks(src, batch_bytes, stats) if plain else prefetched(src.chunks(min(batch_bytes, 4 << 20)))
    back = None
    pieces: list[bytes] = []
    size = 0
    dropping = False   # inside an over-long line: discard up to its newline
    first = True
    next_line = 1
    while True:
        try:
            chunk = gen.send(back)
        except StopIteration as stop:
            stats.cut = stop.value
            break
        back = None
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
        pieces.append(chunk)
        size += len(chunk)
        if size < batch_bytes:
            continue
        buf = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        end = buf.rfind(b"\n") + 1
        if end:
            for df in _parsed(parse, buf, end, next_line, stats):
                next_line += df.height
                yield df
            if plain and end < len(buf):
                back, pieces, size = len(buf) - end, [], 0
            else:
                tail = buf[end:]
                pieces, size = ([tail], len(tail)) if tail else ([], 0)
        else:
            pieces = [buf]
        if size > max_line_bytes:
            stats.overlong.append(next_line)
            stats.raw = None
            yield pl.DataFrame({"line": [next_line], "text": [""]}, schema={"line": pl.Int64, "text": pl.String})
            next_line += 1
            pieces, size, dropping = [], 0, True
    if pieces:
        buf = b"".join(pieces)
        end = buf.rfind(b"\n") + 1
        if stats.cut is None:
            end = len(buf)   # the last line, without its newline
        elif end < len(buf):
            stats.cut_partial = True   # the end of a cut stream: a partial line, never read as data
        if end:
            for df in _parsed(parse, buf, end, next_line, stats):
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


def cleaned_batches(src, batch_bytes: int = BATCH_BYTES, stats: ReadStats | None = None, parse=parse_buffer) -> Iterator[pl.DataFrame]:
    """What Source.frame() holds, in batches: over-long lines emptied, wrapper removed. When the
    iterator is exhausted, the source's counts (decode errors, NULs, skipped lines, problems) are set,
    once per source however often it is read."""
    src.head()
    stats = stats if stats is not None else ReadStats()
    long_lines: list[int] = []
    for df in raw_batches(src, stats, batch_bytes, parse):
        if not isinstance(df, pl.DataFrame):
            yield df   # a `parse` of kernel/blocks.py: whole lines left in their bytes, nothing to clean
            continue
        too_long = pl.col("text").str.len_bytes() > MAX_LINE_CHARS
        if df.select(too_long.any()).item():
            too_long = too_long & (pl.col("text").str.len_chars() > MAX_LINE_CHARS)
            long_lines.extend(df.filter(too_long)["line"].to_list())
            df = df.with_columns(pl.when(too_long).then(pl.lit("")).otherwise(pl.col("text")).alias("text"))
            stats.raw = None
        if src.wrapper is not None:
            stats.raw = None
        yield unwrap(src.wrapper, df)
    if stats.cut is not None and stats.lines == 0:
        raise src.cut_error(stats.cut, 0)
    if src.read_accounted:
        return
    src.read_accounted = True
    src.decode_errors, src.nul_bytes = stats.decode_errors, stats.nuls
    overlong = sorted(set(stats.overlong) | set(long_lines))
    if overlong:
        src.skipped.add_lines(LINE_TOO_LONG, overlong)
    if stats.cut is not None:
        if stats.cut_partial:
            src.skipped.add(CUT_AT_END, stats.lines + 1)
        src.problems.append(str(src.cut_error(stats.cut, stats.lines)))
    if stats.grew:
        src.problems.append(str(InputError(
            src.path, "file grew while it was read", f"its {stats.lines} lines up to the size it had when it was "
            f"opened were read, the {human(stats.grew)} written since were not",
            "read it again once the job has stopped writing to it", line=stats.lines + 1)))


def read_frame(src) -> pl.DataFrame:
    parts = list(cleaned_batches(src))
    if not parts:
        return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return pl.concat(parts, how="vertical", rechunk=len(parts) > 1)


def read_whole(reader, src):
    """What a parser's reader makes of the whole source fed as one batch (a parser's `parse`; ingest
    feeds readers batch by batch itself)."""
    reader.feed(src.frame())
    return reader.finish()
