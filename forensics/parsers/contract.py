"""What a parser module declares: one `FORMAT = Format(...)` at its end, the only name the parser list
(parsers/__init__.py) reads, and by which it finds the module. The declaration is checked when it is
made, so a format with a field missing or of the wrong type fails at import, naming the format and the
field; the list checks the declarations together (names unique, `covers`, `before` and `after` naming
known formats, a sniffing order without a cycle) and tests/parsers/test_formats.py what needs the
source tree (its samples folder).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# a format's name is shown to users, written to the JSON summary and names its default samples folder
NAME_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"


@dataclass(frozen=True)
class Scan:
    """How a format finds its facts inside any text file (a CUDA OOM at the end of a training log, an
    Xid inside a syslog); scanners.py runs every format's scan in one pass.

    `read(lines, src, opts) -> Parsed`: events from the lines `hint` (a regex) matches. Every such line
    holds a match of `prefilter` (a regex, mostly a literal alternation, run on all lines first), and
    of `quick` if given (a cheaper superset of `prefilter`, tried before it), and one of the lowercase
    `block_literals` (for readers that test whole blocks of bytes, kernel/blocks.py); with `pipe_rows`,
    lines whose first non-blank is `|` count too. With `event_lines`, every hint line is an event: a
    scan keeps the first scanners.MAX_EVENT_LINES of them per file and counts the rest in a note."""
    read: Callable
    hint: str
    prefilter: str
    block_literals: tuple[str, ...]
    quick: str | None = None
    pipe_rows: bool = False
    event_lines: bool = False

    def check(self, where: str) -> None:
        _need(callable(self.read), where, "scan.read must be a function (lines, src, opts) -> Parsed")
        for field in ("hint", "prefilter") + (("quick",) if self.quick is not None else ()):
            rx = getattr(self, field)
            _need(isinstance(rx, str) and rx != "", where, f"scan.{field} must be a non-empty regex")
            try:
                re.compile(rx)
            except re.error as e:
                raise TypeError(f"{where}: scan.{field} is not a valid regex ({e})") from None
        _need(isinstance(self.block_literals, tuple) and len(self.block_literals) > 0
              and all(isinstance(x, str) and x and x == x.lower() and "\n" not in x for x in self.block_literals),
              where, "scan.block_literals must be a non-empty tuple of lowercase one-line strings")
        _need(isinstance(self.pipe_rows, bool) and isinstance(self.event_lines, bool), where,
              "scan.pipe_rows and scan.event_lines must be True or False")


@dataclass(frozen=True)
class Format:
    """One log format.

    - `name`: shown to users and written to the JSON summary (`inputs[].format`).
    - `samples`: the folder of its real samples, relative to the repository root: tests/samples/<name>
      unless given (a format known only from recordings names its sample_logs/ folder).
    - `sniff(head: list[str]) -> str | None`: looks at the first lines (decoded, unwrapped) and returns
      the reason it claims the file, or None. A binary format (a pickle) has `sniff_bytes(first: bytes)`
      instead: it claims a file by its first bytes (decompressed, up to 64 KiB) before any text is
      decoded; its `parse` reads the file itself (`src.open_binary()`), no free-text scanner reads it,
      and its evidence `line` numbers count records (its module's docstring says what a record is,
      `Parsed.lines` how many there are).
    - `parse(src, opts) -> Parsed`: the whole file into the two fixed schemas.
    - `reader`: for a format whose files can be big, `reader(src, opts)` (a class or a function) gives
      an object with `feed(batch)` (the file's `line`, `text` rows, batch by batch, in order) and
      `finish() -> Parsed`; ingest feeds it a small file's lines as one batch and a big one's in many
      (its `parse` is mostly the same reader fed the whole file). `feed` may return True to say it took
      the batch whole as data rows of its format, which hold nothing for the scanners (they skip it).
    - `whole_document`: the files are one document rather than lines (a JSON response, often one line
      over the line reader's limit): `parse` reads `src.read_bytes()` and no scanner reads them.
    - `scan`: how the format's facts are found inside any text file (`Scan`), or None.
    - `covers`: the formats whose scans this format's own reader already does on its files (a kernel
      log's reader reads its Xid lines): those scans are not run on them again.
    - `files`, `yields`: one line each, what files it reads and what it gets from them; `gpu-forensics
      formats` lists them (the module's docstring is the format's reference).
    - `before`, `after`: the formats this one must be tried before (more generic ones whose sniff also
      answers on its files) or after (more specific ones it would take files from); `fallback`: it
      claims what no other format does and is tried last. parsers/__init__.py says the order they give.
    """
    name: str
    parse: Callable
    sniff: Callable | None = None
    sniff_bytes: Callable | None = None
    reader: Callable | None = None
    whole_document: bool = False
    scan: Scan | None = None
    covers: tuple[str, ...] = ()
    samples: str = ""
    files: str = ""
    yields: str = ""
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    fallback: bool = False

    def __post_init__(self) -> None:
        where = f"format {self.name!r}"
        _need(isinstance(self.name, str) and re.match(NAME_RE, self.name) is not None, where,
              "name must be lowercase words joined by '-'")
        _need((self.sniff is None) != (self.sniff_bytes is None), where, "give one of sniff and sniff_bytes")
        _need(callable(self.sniff or self.sniff_bytes), where, "sniff / sniff_bytes must be a function")
        _need(callable(self.parse), where, "parse must be a function (src, opts) -> Parsed")
        _need(isinstance(self.whole_document, bool), where, "whole_document must be True or False")
        if self.reader is not None:
            _need(callable(self.reader), where, "reader must be a class or function (src, opts)")
            _need(not self.reads_whole, where, "a format whose parse reads the file itself has no reader")
        if self.scan is not None:
            _need(isinstance(self.scan, Scan), where, "scan must be a Scan(...)")
            self.scan.check(where)
        for field in ("covers", "before", "after"):
            names = getattr(self, field)
            _need(isinstance(names, tuple) and all(isinstance(c, str) for c in names), where,
                  f"{field} must be a tuple of format names")
            _need(self.name not in names, where, f"{field} names the format itself")
        _need(isinstance(self.fallback, bool), where, "fallback must be True or False")
        _need(not (self.fallback and (self.before or self.after)), where,
              "a fallback format is tried after all others: it has no before or after")
        _need(isinstance(self.samples, str) and not self.samples.startswith("/"), where,
              "samples must be a folder relative to the repository root")
        if not self.samples:
            object.__setattr__(self, "samples", f"tests/samples/{self.name}")
        for field, what in (("files", "the files it reads"), ("yields", "what it gets from them")):
            text = getattr(self, field)
            _need(isinstance(text, str) and text.strip() != "" and "\n" not in text, where,
                  f"{field} must be one line saying {what}")

    @property
    def reads_whole(self) -> bool:
        """Its `parse` reads its files itself (one document, or a binary format): no text lines are fed
        to it, no free-text scanner reads its files, and no line wrapper is stripped from them."""
        return self.whole_document or self.sniff_bytes is not None


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise TypeError(f"{where}: {what}")
