"""`.tar` (plain or gzip/xz/bz2/zstd-compressed) and `.zip` archives read as folders, without
unpacking them.

Each member becomes a `Source` that streams its bytes: a tar is read once, front to back, each member
kept in a spool (memory, or a temporary file past SPOOL_MEMORY) only while it is parsed; a zip member
is opened again from the archive whenever it is read. A member compressed on its own (`kern.log.gz`
in a `.tar`) is decompressed as a file would be.

Nothing in an archive is trusted: a member whose name leaves the archive (absolute, `..`), a link,
a device or an archive inside the archive is not read and said; the members read and the bytes they
hold are capped (Options.archive_max_members / archive_max_bytes, --archive-max-members /
--archive-max-size), past the cap the rest is not read and said in one line.
"""
from __future__ import annotations

import os
import tarfile
import tempfile
import time
import zipfile
import zlib
import lzma
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from forensics.errors import InputError, os_error, permission_error
from forensics.io.sources import (Source, compression_of, compression_of_bytes, decompressed, open_stream,
                                  rotation_key, skipped_by_name)
from forensics.units import human

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".tzst")
ZIP_SUFFIXES = (".zip",)
# a member bigger than this is spooled to a temporary file, not kept in memory, while it is read
SPOOL_MEMORY = 64 << 20
_COPY = 1 << 20
_TRUNCATED = (EOFError, OSError, tarfile.TarError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)


def kind_of(name: str) -> str | None:
    """"tar" or "zip" for a name with an archive's suffix, else None."""
    low = name.lower()
    if low.endswith(TAR_SUFFIXES):
        return "tar"
    if low.endswith(ZIP_SUFFIXES):
        return "zip"
    return None


class MemberSource(Source):
    """A Source whose bytes come from an archive member (`opener` gives a fresh binary stream)."""

    def __init__(self, path: str, opener: Callable, size: int, mtime: float):
        super().__init__(path=path, real_path=Path(path), size=size, mtime=mtime)
        self._opener = opener
        with opener() as fh:
            magic = fh.read(6)
        self.compression = compression_of_bytes(magic)

    def _stream(self):
        return decompressed(self._opener(), self.compression, self.max_decompressed)

    def plain_file(self) -> Path | None:
        return None


class _SpoolReader:
    """A read-only view of a spool from its start, as a fresh file handle would be."""

    def __init__(self, spool):
        self._spool, self._pos = spool, 0

    def read(self, size: int = -1) -> bytes:
        self._spool.seek(self._pos)
        data = self._spool.read(size)
        self._pos += len(data)
        return data

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _ZipMember:
    """A zip member's stream whose damage reads as an OSError (the line reader keeps what came before)."""

    def __init__(self, fh):
        self._fh = fh

    def read(self, size: int = -1) -> bytes:
        try:
            return self._fh.read(size)
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:
            raise OSError(f"damaged zip member ({e})") from None

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Archive:
    """One archive file. `sources()` yields its members one at a time (each valid until the next is
    asked for); `problems` and `ignored` fill as it goes."""

    def __init__(self, real: Path, shown: str, max_members: int, max_bytes: int):
        self.real, self.shown = real, shown.rstrip("/")
        self.kind = kind_of(real.name)
        self.max_members, self.max_bytes = max_members, max_bytes
        self.problems: list[InputError] = []
        self.ignored: list[tuple[str, str]] = []
        self._members = 0
        self._bytes = 0

    def _member_path(self, name: str) -> str | None:
        """The member's shown path, or None (said in problems) when its name leaves the archive."""
        pure = PurePosixPath(name.replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts or (pure.parts and ":" in pure.parts[0]):
            self.problems.append(InputError(
                f"{self.shown}/{name}", "member not read", "its path leaves the archive (absolute or with ..)",
                "unpack the archive by hand if you trust it, and pass the files"))
            return None
        parts = [p for p in pure.parts if p not in ("", ".")]
        return "/".join([self.shown, *parts])

    def _wanted(self, shown: str, size: int) -> bool:
        """Whether a regular member is read (as discover would read the file), counting it against the caps."""
        name = shown.rsplit("/", 1)[-1]
        if any(p.startswith(".") for p in shown[len(self.shown) + 1:].split("/")):
            return False
        if skipped_by_name(name):
            self.ignored.append((shown, "not a log (by its name)"))
            return False
        if kind_of(name):
            self.problems.append(InputError(shown, "archive inside an archive, not opened",
                                            "archives are opened one level deep",
                                            "unpack the outer archive and pass the folder"))
            return False
        if self._members >= self.max_members:
            if self._members == self.max_members:
                self.problems.append(InputError(
                    self.shown, "archive not read to its end", f"it holds more than {self.max_members} members "
                    "(the limit on members read from one archive)", "pass --archive-max-members with a higher count "
                    "to read the rest"))
                self._members += 1
            return False
        if self._bytes + size > self.max_bytes:
            if self._bytes <= self.max_bytes:
                self.problems.append(InputError(
                    shown, "archive not read to its end", f"its members hold more than {human(self.max_bytes)} "
                    "(the limit on bytes read from one archive)", "pass --archive-max-size with a higher size "
                    "to read the rest"))
                self._bytes = self.max_bytes + 1
            return False
        self._members += 1
        self._bytes += size
        return True

    def sources(self) -> Iterator[Source]:
        try:
            if self.kind == "zip":
                yield from self._zip()
            else:
                yield from self._tar()
        except PermissionError:
            raise permission_error(self.shown)
        except _TRUNCATED as e:
            detail = " ".join(str(e).split())[:160] or type(e).__name__
            self.problems.append(InputError(self.shown, "archive not read to its end",
                                            f"it is damaged or truncated ({detail}); the members before were read",
                                            "re-copy the archive from its origin if the rest matters"))

    def _tar(self) -> Iterator[Source]:
        try:
            raw = open_stream(self.real, compression_of(self.real))
        except OSError as e:
            raise os_error(self.shown, e)
        with raw, tarfile.open(fileobj=raw, mode="r|") as tf:
            for m in tf:
                if m.isdir():
                    continue
                shown = self._member_path(m.name)
                if shown is None:
                    continue
                if not m.isfile():
                    what = "a link" if m.issym() or m.islnk() else "not a regular file"
                    self.problems.append(InputError(shown, "member not read", f"it is {what}, links and devices "
                                                    "in archives are never followed", "pass the file it points to"))
                    continue
                if not self._wanted(shown, m.size):
                    continue
                with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY) as spool:
                    fh = tf.extractfile(m)
                    while chunk := fh.read(_COPY):
                        spool.write(chunk)
                    yield MemberSource(shown, lambda s=spool: _SpoolReader(s), m.size, float(m.mtime))

    def _zip(self) -> Iterator[Source]:
        try:
            zf = zipfile.ZipFile(self.real)
        except OSError as e:
            raise os_error(self.shown, e)
        with zf:
            infos = sorted(zf.infolist(), key=lambda i: (os.path.dirname(i.filename), rotation_key(os.path.basename(i.filename))))
            for info in infos:
                if info.is_dir():
                    continue
                shown = self._member_path(info.filename)
                if shown is None:
                    continue
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode != 0o100000:
                    self.problems.append(InputError(shown, "member not read", "it is a link or not a regular file, "
                                                    "links in archives are never followed", "pass the file it points to"))
                    continue
                if info.flag_bits & 0x1:
                    self.problems.append(InputError(shown, "member not read", "it is encrypted",
                                                    "unpack the archive with its password and pass the folder"))
                    continue
                if not self._wanted(shown, info.file_size):
                    continue
                try:
                    mtime = time.mktime((*info.date_time, 0, 0, -1))
                except (OverflowError, ValueError):
                    mtime = 0.0
                try:
                    src = MemberSource(shown, lambda i=info: _ZipMember(zf.open(i)), info.file_size, mtime)
                except (zipfile.BadZipFile, NotImplementedError, ValueError, OSError, zlib.error) as e:
                    # a damaged header or a compression method zipfile lacks (deflate64, ...): this member only
                    detail = " ".join(str(e).split())[:160] or type(e).__name__
                    self.problems.append(InputError(shown, "member not read", f"it cannot be opened ({detail})",
                                                    "unpack the archive with another tool and pass the folder"))
                    continue
                yield src
