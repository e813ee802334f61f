"""Errors the tool reports to people: one line, `path:line: what, why, what to do`."""
from __future__ import annotations


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
