"""Errors the tool reports to people: one line, `path:line: what, why, what to do`."""
from __future__ import annotations

import errno
import os


class ForensicsError(Exception):
    """Base of every error the CLI turns into a message and an exit code."""


class InputError(ForensicsError):
    """An input that cannot be read or used. The rest of the work goes on."""

    def __init__(self, path: str, what: str, why: str, todo: str, line: int | None = None):
        self.path, self.line, self.what, self.why, self.todo = path, line, what, why, todo
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else f"{self.path}"
        return f"{where}: {self.what}, {self.why}, {self.todo}"


class UsageError(ForensicsError):
    """Bad command-line use (exit code 2)."""


def permission_error(shown: str) -> InputError:
    return InputError(shown, "cannot read the file", "permission denied",
                      "fix its permissions (chmod +r) or run as a user who can read it")


def os_error(shown: str, e: OSError) -> InputError:
    if e.errno == errno.ELOOP:
        return InputError(shown, "symbolic link loop", "the link leads (through other links) back to itself",
                          "remove the link or pass the file it should point to")
    if e.errno == errno.ENOENT and os.path.islink(shown):
        return InputError(shown, "broken symbolic link", "the file it points to does not exist",
                          "pass the file itself, or fix the link")
    if e.errno == errno.EISDIR:
        return InputError(shown, "not a regular file", "it is a folder", "pass the files in it")
    return InputError(shown, "cannot read the file", " ".join((e.strerror or str(e)).split()),
                      "check that the path exists and is a regular file")
