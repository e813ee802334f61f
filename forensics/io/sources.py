"""Finding input files and reading them as lines: decompression, decoding, wrapper stripping.

A `Source` is one input file. Parsers ask it for its lines as a polars frame (`line`, `text`) and
never open files themselves, so compression, encodings and wrappers are handled once, here.

Reading never trusts the file: it streams (memory stays bounded by what is kept, not by the file),
a line longer than MAX_LINE_CHARS is dropped and counted (one 100 MB line must not cost the regexes
minutes), a compressed stream cut short keeps the lines read before the cut, NUL runs (what a crash
leaves where unflushed log data should be) are removed, UTF-16 and BOMs are recognized, and anything
that is not text is refused with a reason.
"""
from __future__ import annotations

import bz2
import codecs
import errno
import lzma
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import polars as pl

from forensics.io import wrappers
from forensics.io.lines import CUT_AT_END, LINE_TOO_LONG, MAX_LINE_CHARS, cleaned_batches, read_frame
from forensics.errors import InputError, os_error, permission_error
from forensics.model import Skipped
from forensics.units import human

HEAD_LINES = 200
# Blank lines do not count towards HEAD_LINES (a log may start with hundreds of them), up to this many
# lines in all: what the sniffers see of a file that starts with more blank lines than this is blank.
HEAD_MAX_LINES = 64 * HEAD_LINES
HEAD_BYTES = 256 * 1024
# How far head() reads past dropped over-long lines before it gives up looking for the first lines.
HEAD_RAW_LIMIT = 32 << 20
# What the head keeps of an over-long line: its start, for the sniffers (a JSON document saved by curl
# is one line, often over MAX_LINE_CHARS, and its first characters say what it is). The line is still
# dropped from the lines a parser reads.
HEAD_CUT_CHARS = 64 << 10
# The most a whole-document format (read_bytes) reads into memory unless --max-document-size says
# otherwise (Options.max_document_bytes).
MAX_DOCUMENT_BYTES = 512 << 20
_CHUNK = 4 << 20
_HEAD_CHUNK = 64 << 10


_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bz2"),
)
_ZIP_MAGIC = (b"PK\x03\x04", b"\x7fELF", b"\x89PNG", b"PAR1")
# Signatures of binary files people pass by mistake, with what to do instead.
_BINARY_KINDS = (
    (b"PK\x03\x04", "a zip archive (or a torch.save file)", "unpack it (unzip FILE) and pass the folder"),
    (b"LPKSHHRH", "a binary systemd journal", "export it: journalctl --file FILE -o short-iso-precise > kern.txt"),
    (b"\x93NUMPY", "a NumPy array file", "pass the text logs; array files are never loaded"),
    (b"SQLite format 3\x00", "an SQLite database", "pass the text logs instead"),
    (b"ARROW1", "an Arrow file", "pass the text logs instead"),
    (b"\x89HDF", "an HDF5 file", "pass the text logs instead"),
    (b"\x7fELF", "an executable or core dump", "pass the text log instead"),
)
_PICKLE = re.compile(rb"^\x80[\x02-\x05]")
# control characters that do not occur in text logs (tab, LF, VT, FF, CR, BS and ESC do; NUL is
# handled on its own)
_BAD_CONTROLS = {c: None for c in [*range(1, 8), 14, 15, *range(16, 27), 28, 29, 30, 31, 127]}


def compression_of(path: Path) -> str | None:
    with open(path, "rb") as fh:
        return compression_of_bytes(fh.read(6))


def compression_of_bytes(magic: bytes) -> str | None:
    """The compression a stream's first bytes announce (gzip, zstd, xz, bz2), else None."""
    for sig, name in _MAGIC:
        if magic.startswith(sig):
            return name
    return None


class TooMuchDecompressed(OSError):
    """A compressed file gave more than its budget of decompressed bytes (--max-decompressed)."""

    def __init__(self, limit: int):
        super().__init__(f"more than {limit} bytes after decompression")
        self.limit = limit


class _Decompressed:
    """The decompressed bytes of a gzip/xz/bz2/zstd file, streamed with bounded memory.

    Unlike gzip.open, a stream cut short first yields everything that can be decompressed, then raises
    EOFError; concatenated members (gzip -c a >> b, zstd frames) are read one after another. Past
    `limit` bytes out it raises TooMuchDecompressed: a few MB of gzip can hold terabytes."""

    _RAW = 64 << 10
    _OUT = 4 << 20

    def __init__(self, fh, kind: str, limit: int | None = None):
        self._fh, self.kind, self._limit = fh, kind, limit
        self._out = 0
        self._in = b""
        self._obj = self._new()
        self._error: Exception | None = None
        self._zpiece = 256

    def _new(self):
        if self.kind == "gzip":
            return zlib.decompressobj(wbits=31)
        if self.kind == "xz":
            return lzma.LZMADecompressor()
        if self.kind == "bz2":
            return bz2.BZ2Decompressor()
        import zstandard

        # output in pieces of 1 MiB, not of its default 128 KiB joined per call: with the reader's
        # allocator settings (lines._reuse_big_buffers) those joins, made in the prefetching thread,
        # were never reused (2 GB of one line held 6.3 GB)
        return zstandard.ZstdDecompressor().decompressobj(write_size=1 << 20)

    def _feed(self) -> bytes:
        if self.kind == "gzip":
            out = self._obj.decompress(self._in, self._OUT)
            # at a member's end the bytes after it are in unused_data, and (when the output bound cut
            # the call) in unconsumed_tail as well: taken from unused_data only, else read twice
            self._in = b"" if self._obj.eof else self._obj.unconsumed_tail
            return out
        if self.kind in ("xz", "bz2"):
            out = self._obj.decompress(self._in, max_length=self._OUT)
            self._in = b""
            return out
        # zstd's decompressobj has no output bound: feed it pieces of up to 16 KiB (4 KiB pieces cost 3x
        # zstd's own decompression time in calls, 16 KiB about 1x); 16 KiB of crafted RLE blocks
        # inflate to ~512 MiB, so pieces start at 256 bytes (at most ~8 MiB out) and double only while
        # what comes out stays under 4 MiB; one that gives more than 32 MiB sends them back to 256
        piece, self._in = self._in[:self._zpiece], self._in[self._zpiece:]
        out = self._obj.decompress(piece)
        if len(out) > 8 * self._OUT:
            self._zpiece = 256
        elif len(out) < self._OUT and self._zpiece < 16384:
            self._zpiece *= 2
        return out

    def _needs_input(self) -> bool:
        if self._in:
            return False
        return getattr(self._obj, "needs_input", True)

    def read(self, size: int = -1) -> bytes:
        """About `size` bytes (one piece when size <= 0); b"" at the end. An error after some data
        is raised on the next call, so the data before it is never lost."""
        if self._error is not None:
            e, self._error = self._error, None
            raise e
        parts: list[bytes] = []
        n = 0
        while True:
            try:
                out = self._next()
            except Exception as e:
                if not parts:
                    raise
                self._error = e
                break
            if not out:
                break
            self._out += len(out)
            over = self._out - self._limit if self._limit is not None else 0
            if over > 0:   # the bytes up to the limit are given, then the error
                if over < len(out):
                    parts.append(out[:len(out) - over])
                if not parts:
                    raise TooMuchDecompressed(self._limit)
                self._error = TooMuchDecompressed(self._limit)
                break
            parts.append(out)
            n += len(out)
            if size <= 0 or n >= size:
                break
        return b"".join(parts)

    def _next(self) -> bytes:
        while True:
            if self._obj.eof:
                self._in = self._obj.unused_data + self._in
                if not self._in:
                    self._in = self._fh.read(self._RAW)
                # the end, or the NUL padding that tar and dd leave after the last member
                if not self._in.strip(b"\x00"):
                    if self._in and self._fh.read(1):
                        raise OSError("data after the NUL padding that follows the compressed stream")
                    return b""
                self._obj = self._new()
            if self._needs_input():
                self._in = self._fh.read(self._RAW)
                if not self._in:
                    if self.kind == "gzip":
                        rest = self._obj.flush()
                        if rest:
                            return rest
                    raise EOFError(f"the {self.kind} stream ends before its end marker")
            out = self._feed()
            if out:
                return out

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_stream(path: Path, compression: str | None, limit: int | None = None):
    """A binary stream of the decompressed content (streamed, never fully in memory here). Its
    `read()` returns the next piece; a truncated compressed stream raises EOFError after its data."""
    return decompressed(open(path, "rb"), compression, limit)


def decompressed(fh, compression: str | None, limit: int | None = None):
    """`fh` (a binary stream: a file, an archive member) read through its decompressor, if any, up to
    `limit` decompressed bytes."""
    if compression in ("gzip", "xz", "bz2", "zstd"):
        return _Decompressed(fh, compression, limit)
    return fh


def _detect_encoding(first: bytes) -> tuple[str, int]:
    """(codec, length of the byte order mark) from a file's first bytes. UTF-16 without a BOM is
    recognized by its NUL bytes at every other position (ASCII text written by Windows tools)."""
    if first.startswith(codecs.BOM_UTF8):
        return "utf-8", 3
    if first.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le", 2
    if first.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be", 2
    sample = first[:4096]
    half = len(sample) // 2
    if half >= 8:
        even_nul, odd_nul = sample[0::2].count(0), sample[1::2].count(0)
        if odd_nul > 0.4 * half and even_nul < 0.02 * half:
            return "utf-16-le", 0
        if even_nul > 0.4 * half and odd_nul < 0.02 * half:
            return "utf-16-be", 0
    return "utf-8", 0


def check_binary(path: str, raw: bytes, text: str | None = None) -> None:
    """Raise InputError when these first bytes (and their decoded text) are not a text log."""
    if not raw:
        return
    for sig, kind, todo in _BINARY_KINDS:
        if raw.startswith(sig):
            raise InputError(path, "binary file", f"it is {kind}, not text", todo)
    if _PICKLE.match(raw):
        raise InputError(path, "binary file", "it is a Python pickle, not text",
                         "pass the text logs; pickles are never loaded (loading one runs code)")
    if len(raw) > 262 and raw[257:262] == b"ustar":
        raise InputError(path, "binary file", "it is a tar archive", "unpack it (tar xf FILE) and pass the folder")
    if raw.startswith(_ZIP_MAGIC):
        raise InputError(path, "binary file", "it is not text (a binary signature)", "pass the text log instead")
    if text is None:
        text = raw[:_HEAD_CHUNK].decode("utf-8", errors="replace")
    text = text[:_HEAD_CHUNK]
    nul = text.count("\x00")
    rest = len(text) - nul
    if rest == 0:
        return  # only NUL bytes so far: what a crash leaves; the lines after them may be fine
    bad = text.count("\ufffd") + rest - len(text.translate(_BAD_CONTROLS)) + nul
    # NULs alone are not enough (a crashed syslog has runs of them), but with other junk they are
    if (bad - nul) > max(16, 0.10 * rest) or (nul > max(8, len(text) // 100) and (bad - nul) > max(8, 0.02 * rest)):
        raise InputError(path, "binary file",
                         "it is not text (control characters, invalid UTF-8 or NUL bytes)",
                         "pass the text log instead (for a journal: journalctl -o short-iso > kern.txt)")


@dataclass
class _Read:
    lines: list[str]
    overlong: list[int]        # line numbers dropped for being too long
    cut: BaseException | None  # why the stream ended early (truncated/corrupt), else None
    cut_partial: bool          # a partial last line was dropped at the cut
    nuls: int
    decode_errors: int
    whole: bool = False        # a head read that reached the stream's end: its lines are all the lines
    raw_bytes: int = 0         # bytes read (decompressed)


@dataclass
class Source:
    path: str                 # as shown to people (relative to what they typed)
    real_path: Path
    size: int
    mtime: float
    compression: str | None = None
    wrapper: wrappers.Wrapper | None = None
    max_decompressed: int | None = None   # bytes read of a compressed file (--max-decompressed)
    max_document: int = MAX_DOCUMENT_BYTES   # bytes a one-document format reads whole (--max-document-size)
    _head: list[str] | None = field(default=None, repr=False)
    _first: bytes | None = field(default=None, repr=False)
    _frame: pl.DataFrame | None = field(default=None, repr=False)
    _head_whole: bool = field(default=False, repr=False)   # the head holds every line (see head())
    streamed_lines: int | None = field(default=None, repr=False)        # lines counted while streaming
    read_accounted: bool = field(default=False, repr=False)      # counts of a whole read already taken
    decode_errors: int = 0
    encoding: str | None = None
    nul_bytes: int = 0
    # lines the reader itself could not use (too long, cut off at a truncated end), per reason
    skipped: Skipped = field(default_factory=Skipped)
    # one-line messages about the file as a whole (`path:line: what, why, what to do`)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, real_path: Path, shown: str | None = None) -> "Source":
        shown = shown or str(real_path)
        try:
            st = real_path.stat()
            if not stat.S_ISREG(st.st_mode):
                kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a pipe, socket or device"
                raise InputError(shown, "not a regular file", f"it is {kind}",
                                 "pass a file (copy a pipe's output into a file first)")
            comp = compression_of(real_path)
        except PermissionError:
            raise permission_error(shown)
        except OSError as e:
            raise os_error(shown, e)
        return cls(path=shown, real_path=real_path, size=st.st_size, mtime=st.st_mtime, compression=comp)

    # -- raw reading -------------------------------------------------------------------------
    def plain_file(self) -> Path | None:
        """The file the fast line reader reads as it is; None when the bytes must come through
        `chunks` (compressed, or an archive member: io/archives.py)."""
        return self.real_path if self.compression is None else None

    def _stream(self):
        try:
            return open_stream(self.real_path, self.compression, self.max_decompressed)
        except PermissionError:
            raise permission_error(self.path)
        except OSError as e:
            raise os_error(self.path, e)

    def first_bytes(self) -> bytes:
        """The first bytes of the content, decompressed (up to 64 KiB; fewer when the stream is cut):
        what a parser that claims files by their bytes looks at, before any text is decoded."""
        if self._first is None:
            parts, have = [], 0
            for chunk in self.chunks(_HEAD_CHUNK):
                parts.append(chunk)
                have += len(chunk)
                if have >= _HEAD_CHUNK:
                    break
            self._first = b"".join(parts)[:_HEAD_CHUNK]
        return self._first

    def open_binary(self):
        """The content as a binary stream (decompressed, streamed; `read(n)`, a context manager), for
        a parser that reads a file it claimed by its bytes."""
        return self._stream()

    def chunks(self, size: int) -> Iterator[bytes]:
        """Raw decompressed pieces; a read error after the first piece ends the iteration with the
        error as the generator's return value (the lines before it are kept)."""
        with self._stream() as fh:
            while True:
                try:
                    chunk = fh.read(size)
                except PermissionError:
                    raise permission_error(self.path)
                except (EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as e:
                    return e
                except Exception as e:  # zstandard.ZstdError
                    if type(e).__name__ != "ZstdError":
                        raise
                    return e
                if not chunk:
                    return None
                yield chunk

    def _decode(self, decoder, chunk: bytes) -> tuple:
        """The decoder, the text of one raw piece without its NULs, and their count; the first piece
        sets the encoding and shows whether the file is text at all."""
        if decoder is None:
            enc, bom = _detect_encoding(chunk)
            self.encoding = enc
            chunk = chunk[bom:]
            decoder = codecs.getincrementaldecoder(enc)(errors="replace")
            text = decoder.decode(chunk)
            check_binary(self.path, chunk, text)
        else:
            text = decoder.decode(chunk)
        n = text.count("\x00")
        return decoder, (text.replace("\x00", "") if n else text), n

    def _read_lines(self, head: bool) -> _Read:
        """Stream, decode and split into lines. For the head: stop after HEAD_LINES lines or
        HEAD_BYTES of text (or HEAD_RAW_LIMIT raw bytes), dropping the line cut by the stop."""
        lines: list[str] = []
        overlong: list[int] = []
        carry = ""
        dropping = False  # inside an over-long line: discard until its newline
        kept = raw_read = nuls = bad = nonblank = 0
        decoder = None
        cut: BaseException | None = None
        stopped = False
        gen = self.chunks(_HEAD_CHUNK if head else _CHUNK)
        while True:
            try:
                chunk = next(gen)
            except StopIteration as stop:
                cut = stop.value
                break
            if head:
                # a decompressed piece can be far bigger than asked for (16 KiB of zstd RLE blocks:
                # 512 MiB of newlines, half a billion lines to split): no more than the head reads
                chunk = chunk[:HEAD_RAW_LIMIT - raw_read]
            raw_read += len(chunk)
            decoder, text, n = self._decode(decoder, chunk)
            nuls += n
            bad += text.count("\ufffd")
            # (a head stops at HEAD_MAX_LINES lines: split no further, one part dropped and the carry aside)
            parts = text.split("\n", HEAD_MAX_LINES + 1) if head else text.split("\n")
            if dropping:
                if len(parts) == 1:
                    continue
                dropping = False
                parts = parts[1:]
            else:
                parts[0] = carry + parts[0]
            carry = parts.pop()
            if head:
                for p in parts:
                    if len(p) > MAX_LINE_CHARS:
                        overlong.append(len(lines) + 1)
                        p = p[:HEAD_CUT_CHARS]
                    lines.append(p)
                    kept += len(p)
                    if p.strip():
                        nonblank += 1
                    if nonblank >= HEAD_LINES or len(lines) >= HEAD_MAX_LINES or kept >= HEAD_BYTES:
                        stopped = True
                        break
            else:
                lines.extend(parts)
            if not stopped and len(carry) > MAX_LINE_CHARS:
                lines.append(carry[:HEAD_CUT_CHARS] if head else "")
                overlong.append(len(lines))
                carry, dropping = "", True
            if stopped or (head and raw_read >= HEAD_RAW_LIMIT):
                stopped = True
                gen.close()
                break
        cut_partial = False
        if not stopped:
            if decoder is not None and cut is None:
                tail = decoder.decode(b"", final=True)
                bad += tail.count("\ufffd")
                carry += tail.replace("\x00", "")
            if carry and not dropping:
                if cut is not None:
                    cut_partial = True  # the end of a cut stream: a partial line, never read as data
                elif len(carry) > MAX_LINE_CHARS:
                    lines.append("")
                    overlong.append(len(lines))
                else:
                    lines.append(carry)
        return _Read(lines, overlong, cut, cut_partial, nuls, bad, whole=not stopped and cut is None,
                     raw_bytes=raw_read)

    def head(self) -> list[str]:
        """The first lines, decoded and unwrapped: what `sniff` looks at."""
        if self._head is None:
            if self._frame is not None:
                self._head = _head_lines(self._frame["text"].head(HEAD_MAX_LINES).to_list())
            else:
                read = self._read_lines(head=True)
                if read.cut is not None and not read.lines and not read.cut_partial:
                    raise self.cut_error(read.cut, 0)
                lines = read.lines
                self.wrapper = wrappers.detect([ln.rstrip("\r") for ln in lines])
                self._head = wrappers.strip_lines(self.wrapper, lines)
                # a small file's head is the whole file: frame() takes its lines instead of reading the
                # file again (a job folder of thousands of one-line logs paid a second read for each);
                # only where both reads give the same lines and counts (nothing replaced, removed or cut,
                # and the file no bigger than when it was opened, which the line reader stops at)
                self._head_whole = (read.whole and self.wrapper is None and self.encoding == "utf-8"
                                    and not (read.overlong or read.nuls or read.decode_errors)
                                    and (self.compression is not None or read.raw_bytes == self.size))
        return self._head

    def frame(self) -> pl.DataFrame:
        """All lines: `line` (1-based Int64) and `text` (decoded, CR and wrapper removed)."""
        if self._frame is None:
            self.head()
            if self._head_whole:
                self.read_accounted = True   # nothing to count: nothing was replaced, removed or cut
                self._frame = pl.DataFrame({"line": range(1, len(self._head) + 1), "text": self._head},
                                           schema={"line": pl.Int64, "text": pl.String})
                return self._frame
            if self.encoding == "utf-8":
                # polars' native reader cuts the lines (io/lines.py): same lines, far faster
                self._frame = read_frame(self)
                return self._frame
            read = self._read_lines(head=False)
            if read.cut is not None and not read.lines:
                raise self.cut_error(read.cut, 0)
            self.decode_errors, self.nul_bytes = read.decode_errors, read.nuls
            df = pl.DataFrame({"text": read.lines}, schema={"text": pl.String})
            n_lines = len(read.lines)
            del read.lines
            df = df.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
            too_long = pl.col("text").str.len_chars() > MAX_LINE_CHARS
            long_lines = df.filter(too_long)["line"].to_list()
            if long_lines:
                df = df.with_columns(pl.when(too_long).then(pl.lit("")).otherwise(pl.col("text")).alias("text"))
            overlong = sorted(set(read.overlong) | set(long_lines))
            if not self.read_accounted:  # a re-read after release() must not count twice
                self.read_accounted = True
                if overlong:
                    self.skipped.add_lines(LINE_TOO_LONG, overlong)
                if read.cut is not None:
                    if read.cut_partial:
                        self.skipped.add(CUT_AT_END, n_lines + 1)
                    self.problems.append(str(self.cut_error(read.cut, n_lines)))
            self._frame = df.with_columns(wrappers.strip_expr(self.wrapper, pl.col("text")).alias("text"))
        return self._frame

    def cut_error(self, cut: BaseException, n_lines: int) -> InputError:
        kind = f"{self.compression} stream" if self.compression else "file"
        if isinstance(cut, TooMuchDecompressed):
            read = f"; the {n_lines} lines before were read, the rest was not" if n_lines else ""
            return InputError(self.path, f"{kind} too big", f"it decompresses to more than {human(cut.limit)} "
                              f"(--max-decompressed){read}",
                              f"pass --max-decompressed {human(4 * cut.limit).replace(' ', '')} to read on",
                              line=n_lines + 1)
        why = "it is truncated" if isinstance(cut, EOFError) else "it is corrupt"
        detail = " ".join(str(cut).split())[:160]
        if n_lines:
            return InputError(self.path, f"{kind} ends early", f"{why} ({detail}); the {n_lines} lines before were read, "
                              "the rest is lost", "re-copy the file from its origin if the rest matters",
                              line=n_lines + 1)
        return InputError(self.path, f"cannot read the {kind}", f"{why} ({detail}) and no line before the damage "
                          "could be read", "re-copy the file from its origin, or decompress what is left by hand")

    def read_bytes(self) -> tuple[bytes, BaseException | None]:
        """The whole decompressed content as UTF-8 bytes (a byte order mark removed, UTF-16 re-encoded),
        for formats that are one document rather than lines (a JSON response); and why the stream ended
        early (truncated, corrupt), else None. Its lines are counted (line_count) without reading them
        again. Raises InputError for a document over max_document bytes."""
        parts: list[bytes] = []
        size = 0
        gen = self.chunks(_CHUNK)
        cut: BaseException | None = None
        while True:
            try:
                chunk = next(gen)
            except StopIteration as stop:
                cut = stop.value
                break
            size += len(chunk)
            if size > self.max_document:
                gen.close()
                raise InputError(self.path, "document too big",
                                 f"it is over {human(self.max_document)} (--max-document-size) and one document is "
                                 "read whole (about three times its size in memory)",
                                 "export a shorter time range (or fewer series) per file, or pass "
                                 f"--max-document-size {human(4 * self.max_document).replace(' ', '')} to read it")
            parts.append(chunk)
        data = b"".join(parts)
        del parts
        enc, bom = _detect_encoding(data[:4096])
        self.encoding = enc
        if enc != "utf-8":
            data = data[bom:].decode(enc, errors="replace").encode("utf-8")
        elif bom:
            data = data[bom:]
        self.streamed_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        return data, cut

    def iter_frames(self, batch_lines: int = 2_000_000) -> Iterator[pl.DataFrame]:
        """The lines in batches (line numbers continue across batches). A UTF-8 file not yet read
        whole is streamed: memory holds one batch (about io/lines.BATCH_BYTES of text), not the file."""
        if self._frame is None:
            self.head()
            if self.encoding == "utf-8":
                n = 0
                for df in cleaned_batches(self):
                    n = int(df["line"][-1]) if df.height else n
                    yield df
                self.streamed_lines = n
                return
        df = self.frame()
        for off in range(0, df.height, batch_lines):
            yield df.slice(off, batch_lines)

    @property
    def line_count(self) -> int:
        if self._frame is None and self.streamed_lines is not None:
            return self.streamed_lines   # streamed: counted on the way
        if self._frame is None:
            self.head()   # (sets the encoding)
        if self._frame is None and self.encoding == "utf-8":
            # counted batch by batch (a file of millions of blank lines, claimed by no parser, is never held)
            for _ in self.iter_frames():
                pass
            return self.streamed_lines
        return self.frame().height

    @property
    def is_read(self) -> bool:
        """Whether the whole source is in memory (frame() costs nothing more)."""
        return self._frame is not None

    def release(self) -> None:
        self._frame = None


# -- discovery ----------------------------------------------------------------------------------

_ROTATED = re.compile(r"^(?P<base>.+?)(?:\.(?P<num>[0-9]+)|-(?P<date>[0-9]{8}))?(?P<ext>\.(?:gz|zst|xz|bz2))?$")
# job.json: what `gpu-forensics record` writes about the run beside its logs (no memory in it)
_SKIP_NAMES = {".DS_Store", "job.json"}
# (pickles are not among them: a memory snapshot is one, and any pickle is told apart by its content)
SKIP_SUFFIXES = (".md", ".html", ".png", ".jpg", ".jpeg", ".pdf", ".parquet", ".pyc", ".pt", ".pth")


def skipped_by_name(name: str) -> bool:
    """A file that is no log by its name (discover leaves it out, and so do archives)."""
    return name in _SKIP_NAMES or name.lower().endswith(SKIP_SUFFIXES)


_KERNEL_FILES = ("/proc/", "/sys/")


def rotation_key(name: str) -> tuple[str, int, str]:
    """Sort key that puts a rotated set in time order: kern.log.4.gz … kern.log.1, kern.log;
    messages-20160516, messages-20160523, messages."""
    m = _ROTATED.match(name)
    if not m:
        return (name, 0, "")
    base = m.group("base")
    if m.group("num"):
        return (base, -int(m.group("num")), "")
    if m.group("date"):
        return (base, -1, m.group("date"))  # dated ones are older than the live file
    return (base, 0, "~")


def _head_lines(lines: list[str]) -> list[str]:
    """The lines up to the HEAD_LINES-th that is not blank (as `_read_lines(head=True)` stops)."""
    nonblank = 0
    for i, line in enumerate(lines):
        if line.strip():
            nonblank += 1
            if nonblank >= HEAD_LINES:
                return lines[:i + 1]
    return lines


@dataclass
class Discovered:
    files: list[tuple[Path, str]] = field(default_factory=list)   # (real path, shown path)
    problems: list[InputError] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (shown path, why)
    # links not followed because they lead out of `within` (discover): (shown path, where it leads)
    outside: list[tuple[str, str]] = field(default_factory=list)


def outside_note(shown: str, target: str) -> str:
    """The one line that says a link out of the archive was not followed, and how to read it."""
    return (f"{shown}: not read, a link out of the archive (to {target}), which scan does not follow; "
            "pass --follow-links-out to read it")


def discover(paths: list[str], *, within: str | None = None, skip: tuple[str, ...] = ()) -> Discovered:
    """Files under the given paths, recursively, each once, in rotation-aware order per folder.
    Link loops, broken links, pipes and unreadable folders become problems, not crashes or hangs.
    `within` (a resolved folder): a link that leads out of it is not followed, it is listed in
    `outside` (an uploaded archive must not make the tool read /etc/passwd or another user's files).
    `skip` (resolved folders): never read, e.g. the scan's own output folder inside the archive."""
    out = Discovered()
    fence = Path(within) if within else None
    skipped_dirs = [Path(d) for d in skip]

    def allowed(p: Path, shown: str, is_dir: bool, is_link: bool) -> bool:
        """Whether `p` may be read: not a skipped folder, and (a link) not out of `within`. A plain
        file is inside the folder it was found in, which was checked."""
        if (fence is None and not skipped_dirs) or not (is_link or (is_dir and skipped_dirs)):
            return True
        real = Path(os.path.realpath(p))
        if any(real.is_relative_to(d) for d in skipped_dirs):
            out.ignored.append((shown, "the scan's own output folder, not read"))
            return False
        if fence is not None and is_link and not real.is_relative_to(fence):
            out.outside.append((shown, str(real)))
            out.ignored.append((shown, f"a link out of the archive (to {real}), not followed"))
            return False
        return True

    seen: set[tuple[int, int]] = set()
    # every folder is walked once: folder links that form a DAG (a, b -> the same next level, 40 deep)
    # would be walked 2^40 ways; its files are each read once anyway
    walked: set[tuple[int, int]] = set()

    def add_file(p: Path, shown: str) -> None:
        try:
            st = p.stat()
        except OSError as e:
            out.problems.append(os_error(shown, e) if e.errno != errno.ENOENT or p.is_symlink()
                                else InputError(shown, "cannot read the file", e.strerror or str(e),
                                                "check that the path exists and that links point somewhere"))
            return
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return
        seen.add(key)
        if skipped_by_name(p.name):
            out.ignored.append((shown, "not a log (by its name)"))
            return
        if not stat.S_ISREG(st.st_mode):
            # reading a FIFO would wait forever, a device may never end
            out.problems.append(InputError(shown, "not a regular file", "it is a pipe, socket or device",
                                           "copy what it holds into a file and pass that"))
            return
        if os.path.realpath(p).startswith(_KERNEL_FILES):
            # regular files in name only: /proc/kmsg blocks on read, others never end or change as read
            out.problems.append(InputError(shown, "not a regular file", "it is a kernel pseudo-file (/proc, /sys)",
                                           "copy what it holds into a file (e.g. dmesg > kern.log) and pass that"))
            return
        out.files.append((p, shown))

    def entries_of(d: Path, shown: str, ancestors: frozenset) -> tuple[list, frozenset] | None:
        try:
            st = d.stat()
            entries = sorted(os.scandir(d), key=lambda e: rotation_key(e.name))
        except OSError as e:
            out.problems.append(InputError(shown, "cannot read the folder", e.strerror or str(e),
                                           "fix its permissions or leave it out"))
            return None
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            out.problems.append(InputError(shown, "folder link loop", "a symbolic link points back to a parent folder",
                                           "remove the link or pass the folders you mean explicitly"))
            return None
        if key in walked:
            return None
        walked.add(key)
        hidden = [e for e in entries if e.name.startswith(".") and e.name not in _SKIP_NAMES]
        # not read, but said (sniff lists them): a job's .nvidia-smi.csv is not silently left out
        out.ignored.extend((os.path.join(shown, e.name), "hidden (its name starts with a dot), not read; "
                            "pass it by its path to read it") for e in hidden)
        return [e for e in entries if not e.name.startswith(".")], ancestors | {key}

    def walk(d: Path, shown: str) -> None:
        """Depth first, in rotation order; a loop, not recursion (a folder tree can be deeper than
        Python's recursion limit)."""
        first = entries_of(d, shown, frozenset())
        if first is None:
            return
        stack = [(iter(first[0]), shown, first[1])]
        while stack:
            it, folder_shown, ancestors = stack[-1]
            e = next(it, None)
            if e is None:
                stack.pop()
                continue
            child, child_shown = Path(e.path), os.path.join(folder_shown, e.name)
            try:
                is_dir = e.is_dir()
                is_link = e.is_symlink()
            except OSError:
                is_dir = is_link = False
            if not allowed(child, child_shown, is_dir, is_link):
                continue
            if is_dir:
                sub = entries_of(child, child_shown, ancestors)
                if sub is not None:
                    stack.append((iter(sub[0]), child_shown, sub[1]))
            else:
                add_file(child, child_shown)

    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            out.problems.append(InputError(raw, "no such file or folder", "the path does not exist",
                                           "check the spelling, or quote paths with spaces"))
        elif not allowed(p, raw, True, True):   # (a path given may itself lead anywhere)
            continue
        elif p.is_dir():
            walk(p, raw.rstrip("/") or raw)
        else:
            add_file(p, raw)
    return out
