"""Finding input files and reading them as lines: decompression, decoding, wrapper stripping.

A `Source` is one input file. Parsers ask it for its lines as a polars frame (`line`, `text`) and
never open files themselves, so compression, encodings and wrappers are handled once, here.
"""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import polars as pl

from . import wrappers
from .errors import InputError

HEAD_LINES = 200
HEAD_BYTES = 256 * 1024

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bz2"),
)
_ZIP_MAGIC = (b"PK\x03\x04", b"\x7fELF", b"\x89PNG", b"PAR1")


def compression_of(path: Path) -> str | None:
    with open(path, "rb") as fh:
        magic = fh.read(6)
    for sig, name in _MAGIC:
        if magic.startswith(sig):
            return name
    return None


def open_stream(path: Path, compression: str | None) -> io.BufferedIOBase:
    """A binary stream of the decompressed content (streamed, never fully in memory here)."""
    if compression == "gzip":
        return gzip.open(path, "rb")
    if compression == "xz":
        return lzma.open(path, "rb")
    if compression == "bz2":
        return bz2.open(path, "rb")
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
    return open(path, "rb")


@dataclass
class Source:
    path: str                 # as shown to people (relative to what they typed)
    real_path: Path
    size: int
    mtime: float
    compression: str | None = None
    wrapper: wrappers.Wrapper | None = None
    _head: list[str] | None = field(default=None, repr=False)
    _frame: pl.DataFrame | None = field(default=None, repr=False)
    decode_errors: int = 0

    @classmethod
    def open(cls, real_path: Path, shown: str | None = None) -> "Source":
        shown = shown or str(real_path)
        try:
            st = real_path.stat()
            comp = compression_of(real_path)
        except PermissionError:
            raise InputError(shown, "cannot read the file", "permission denied",
                             "fix its permissions (chmod +r) or run as a user who can read it")
        except OSError as e:
            raise InputError(shown, "cannot read the file", e.strerror or str(e), "check that the path exists and is a regular file")
        return cls(path=shown, real_path=real_path, size=st.st_size, mtime=st.st_mtime, compression=comp)

    # -- raw reading -------------------------------------------------------------------------
    def _read_bytes(self, limit: int | None = None) -> bytes:
        try:
            with open_stream(self.real_path, self.compression) as fh:
                return fh.read() if limit is None else fh.read(limit)
        except PermissionError:
            raise InputError(self.path, "cannot read the file", "permission denied",
                             "fix its permissions (chmod +r) or run as a user who can read it")
        except (EOFError, OSError, lzma.LZMAError, ValueError) as e:
            kind = self.compression or "file"
            raise InputError(self.path, f"cannot read the {kind} stream", f"it is truncated or corrupt ({e})",
                             "re-copy the file from its origin, or decompress what is left by hand")
        except Exception as e:  # zstandard.ZstdError and friends
            raise InputError(self.path, f"cannot read the {self.compression or 'file'} stream",
                             f"it is truncated or corrupt ({type(e).__name__}: {e})",
                             "re-copy the file from its origin")

    def head(self) -> list[str]:
        """The first lines, decoded and unwrapped: what `sniff` looks at."""
        if self._head is None:
            if self._frame is not None:
                self._head = self._frame["text"].head(HEAD_LINES).to_list()
            else:
                try:
                    raw = self._read_bytes(HEAD_BYTES)
                except InputError:
                    if self.compression:
                        raw = self._partial_bytes(HEAD_BYTES)
                    else:
                        raise
                check_binary(self.path, raw)
                lines = raw.decode("utf-8", errors="replace").split("\n")[:HEAD_LINES]
                if len(raw) == HEAD_BYTES and len(lines) > 1:
                    lines = lines[:-1]  # the last one may be cut
                self.wrapper = wrappers.detect([ln.rstrip("\r") for ln in lines])
                self._head = wrappers.strip_lines(self.wrapper, lines)
        return self._head

    def _partial_bytes(self, limit: int) -> bytes:
        """What can be decompressed of a truncated stream (used only for sniffing)."""
        out = bytearray()
        try:
            with open_stream(self.real_path, self.compression) as fh:
                while len(out) < limit:
                    chunk = fh.read(65536)
                    if not chunk:
                        break
                    out += chunk
        except Exception:
            pass
        return bytes(out)

    def frame(self) -> pl.DataFrame:
        """All lines: `line` (1-based Int64) and `text` (decoded, CR and wrapper removed)."""
        if self._frame is None:
            self.head()
            raw = self._read_bytes()
            check_binary(self.path, raw[:HEAD_BYTES])
            text = raw.decode("utf-8", errors="replace")
            del raw
            self.decode_errors = text.count("\ufffd")
            lines = text.split("\n")
            del text
            if lines and lines[-1] == "":
                lines.pop()
            df = pl.DataFrame({"text": lines}, schema={"text": pl.String})
            del lines
            df = df.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
            self._frame = df.with_columns(wrappers.strip_expr(self.wrapper, pl.col("text")).alias("text"))
        return self._frame

    def iter_frames(self, batch_lines: int = 2_000_000) -> Iterator[pl.DataFrame]:
        """The lines in batches (line numbers continue across batches)."""
        df = self.frame()
        for off in range(0, df.height, batch_lines):
            yield df.slice(off, batch_lines)

    @property
    def line_count(self) -> int:
        return self.frame().height

    def release(self) -> None:
        self._frame = None


def check_binary(path: str, raw: bytes) -> None:
    if not raw:
        return
    if raw.startswith(_ZIP_MAGIC) or raw.count(b"\x00") > max(8, len(raw) // 100):
        raise InputError(path, "binary file", "it is not text (NUL bytes or a binary signature)",
                         "pass the text log instead (for a journal: journalctl -o short-iso > kern.txt)")


# -- discovery ----------------------------------------------------------------------------------

_ROTATED = re.compile(r"^(?P<base>.+?)(?:\.(?P<num>\d+)|-(?P<date>\d{8}))?(?P<ext>\.(?:gz|zst|xz|bz2))?$")
_SKIP_NAMES = {".DS_Store"}
_SKIP_SUFFIXES = (".html", ".png", ".jpg", ".jpeg", ".pdf", ".parquet", ".pyc", ".pickle", ".pkl", ".pt", ".pth")


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


@dataclass
class Discovered:
    files: list[tuple[Path, str]] = field(default_factory=list)   # (real path, shown path)
    problems: list[InputError] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (shown path, why)


def discover(paths: list[str]) -> Discovered:
    """Files under the given paths, recursively, each once, in rotation-aware order per folder.
    Link loops and unreadable folders become problems, not crashes."""
    out = Discovered()
    seen: set[tuple[int, int]] = set()

    def add_file(p: Path, shown: str) -> None:
        try:
            st = p.stat()
        except OSError as e:
            out.problems.append(InputError(shown, "cannot read the file", e.strerror or str(e),
                                           "check that the path exists and that links point somewhere"))
            return
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return
        seen.add(key)
        if p.name in _SKIP_NAMES or p.name.lower().endswith(_SKIP_SUFFIXES):
            out.ignored.append((shown, "not a log (by its name)"))
            return
        out.files.append((p, shown))

    def walk(d: Path, shown: str, stack: set[tuple[int, int]]) -> None:
        try:
            st = d.stat()
            entries = sorted(os.scandir(d), key=lambda e: rotation_key(e.name))
        except OSError as e:
            out.problems.append(InputError(shown, "cannot read the folder", e.strerror or str(e),
                                           "fix its permissions or leave it out"))
            return
        key = (st.st_dev, st.st_ino)
        if key in stack:
            out.problems.append(InputError(shown, "folder link loop", "a symbolic link points back to a parent folder",
                                           "remove the link or pass the folders you mean explicitly"))
            return
        stack = stack | {key}
        for e in entries:
            if e.name.startswith(".") and e.name not in (".",):
                continue
            child = Path(e.path)
            child_shown = os.path.join(shown, e.name)
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                walk(child, child_shown, stack)
            else:
                add_file(child, child_shown)

    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            out.problems.append(InputError(raw, "no such file or folder", "the path does not exist",
                                           "check the spelling, or quote paths with spaces"))
        elif p.is_dir():
            walk(p, raw.rstrip("/") or raw, set())
        else:
            add_file(p, raw)
    return out
