"""Writing the files a user names (`report -o/--json/--md`, `timeline -o`, `scan -o`).

A regular file (or a name that does not exist yet) is replaced atomically: the data goes to a temporary
file in the same folder, is flushed to disk and renamed over the target, so a reader sees the old file or
the whole new one. A symlink is followed (its target is replaced, the link stays a link, a dangling link
creates its target). A FIFO or a character device (`/dev/null`, `/dev/stdout`, a terminal) is written
through: renaming over it would replace the device node or leave the FIFO's reader with nothing. `-` is
stdout. Anything else (a folder, a socket, a block device) and a missing parent folder are one-line
usage errors, raised by `target()` before any work is done; no folder is ever created for a file.
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from forensics.errors import UsageError

STDOUT = "-"


@dataclass(frozen=True)
class Target:
    flag: str            # the option that named it, for messages
    shown: str           # as the user wrote it
    path: Path | None    # the real path (links followed); None for stdout
    direct: bool         # written through in place, no temporary file and rename

    def where(self) -> str:
        return f"{self.flag} {self.shown}"


def target(dest: str, flag: str) -> Target:
    """Where `dest` will be written, checked now so that a bad name fails before the analysis."""
    if dest == STDOUT:
        if sys.stdout is None:   # started with stdout closed (>&-): fails now, not after the analysis
            raise UsageError(f"{flag} -: cannot write the output, stdout is closed, "
                             "give a file name or run without closing stdout")
        return Target(flag, dest, None, True)
    real = Path(os.path.realpath(dest))   # every link followed, a dangling one to the name it points at
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        if not real.parent.is_dir():
            raise UsageError(f"{flag} {dest}: cannot write the output, the folder {real.parent} does not exist, "
                             "create it first or give a path in an existing folder")
        return Target(flag, dest, real, False)
    except OSError as e:
        raise UsageError(f"{flag} {dest}: cannot write the output, {e.strerror or e}, give another path")
    if stat.S_ISREG(mode):
        return Target(flag, dest, real, False)
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return Target(flag, dest, real, True)
    if stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {dest}: cannot write the output, it is a folder, give a file name "
                         f"(e.g. {os.path.join(dest, 'report.html')})")
    raise UsageError(f"{flag} {dest}: cannot write the output, it is neither a file, a FIFO nor a character "
                     "device, give a file name")


def write(t: Target, fill: Callable[[BinaryIO], None]) -> None:
    """Write what `fill` writes to a binary file object to the target; a failure (a full disk, a closed
    pipe, no permission) is one usage error line."""
    try:
        if t.path is None:
            fill(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        elif t.direct:
            with open(t.path, "wb") as fh:
                fill(fh)
        else:
            replace(t.path, fill)
    except OSError as e:
        raise UsageError(f"{t.where()}: cannot write the output, {e.strerror or e}, check free space and "
                         "permissions or give another path")


def write_text(t: Target, text: str) -> None:
    if t.path is None:
        if not text.endswith("\n"):   # the shell prompt after it starts on its own line
            text += "\n"
        try:   # as text: sys.stdout may be a text stream with no bytes under it (a test's capture)
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError as e:
            raise UsageError(f"{t.where()}: cannot write the output, {e.strerror or e}, "
                             "check what reads the standard output")
        return
    data = text.encode("utf-8")
    write(t, lambda fh: fh.write(data))


def replace(path: Path, fill: Callable[[BinaryIO], None]) -> None:
    """Replace the regular file `path` (links already followed) atomically. The new file keeps the old
    one's permissions, or gets the umask's for a new name. Raises OSError."""
    try:
        keep = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        keep = 0o666 & ~umask
    # `.NAME.tmp-XXXX`: hidden, and the pattern scan's clean-up of an interrupted run looks for
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def replace_file(path: Path, data: str | bytes | Callable[[BinaryIO], None]) -> None:
    """Replace a file the tool names itself (scan's files under its output folder): its folder is made
    when missing, and a link there is followed as `target()` would. `data` is the text or bytes, or a
    function that writes them to a binary file object. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(path))
    if isinstance(data, (str, bytes)):
        blob = data.encode("utf-8") if isinstance(data, str) else data
        replace(real, lambda fh: fh.write(blob))
    else:
        replace(real, data)


def output_targets(named: list[tuple[str, str | None]], inputs: list[str]) -> dict[str, Target]:
    """The outputs (flag, name) the user gave, checked before any work: a missing folder or a folder
    given as a file fails now, not after the analysis; two documents cannot share stdout."""
    on_stdout = [flag for flag, dest in named if dest == STDOUT]
    if len(on_stdout) > 1:
        raise UsageError(f"{' and '.join(f'{f} -' for f in on_stdout)}: only one output can go to stdout "
                         "(the documents would run together), write the others to files")
    outs = {flag: target(dest, flag) for flag, dest in named if dest}
    refuse_clashes(list(outs.values()), inputs)
    return outs


def refuse_clashes(outs: list[Target], inputs: list[str]) -> None:
    """Outputs compared after resolving links: two naming one file would keep only the last, and one
    naming an input file would replace the log it is made from. Devices (/dev/null) are exempt."""
    from forensics.io.sources import discover

    files = [t for t in outs if t.path is not None and not t.direct]
    seen: dict[Path, Target] = {}
    for t in files:
        first = seen.setdefault(t.path, t)
        if first is not t:
            raise UsageError(f"{first.where()} and {t.where()}: both name the file {t.path}, only the last would "
                             "be kept, give each output its own name")
    read = {p.resolve(): shown for p, shown in discover(inputs).files}
    for t in files:
        if t.path in read:
            raise UsageError(f"{t.where()}: names the input {read[t.path]}, writing it would replace that log, "
                             "give the output another name")
