"""The free-text scanners run together: facts that turn up in any text file (a CUDA OOM at the end of a
training log, an OOM-killer report pasted into a job's stderr) are looked for in every input.

Each format's `Scan` (parsers/contract.py) declares, beside its `hint` regex, what every line the hint
matches holds: `prefilter` (a regex, mostly a literal alternation, which the regex engine runs at memory
speed), optionally `quick` (a cheaper superset of it, tried first), `block_literals` (lowercase literals
for readers that test whole blocks of bytes, kernel/blocks.py) and `pipe_rows` (the lines whose first
non-blank is `|` count too). One pass of all the prefilters together leaves a few lines, and each hint
runs on those only. tests/parsers/test_scanners.py checks the declarations against every
sample line, so a hint edited without its prefilter fails there instead of losing lines.

A batch of a few plain lines (steplog/small.py's rule: up to SMALL_LINES lines of plain ASCII, of
bounded length) is tested with Python's `re` instead, which on that text reads these patterns as polars
does (small.py says why): each query's fixed cost, and compiling the patterns again after polars' cache
of 32 compiled regexes lost them, were most of such a batch's cost. Python keeps its compiled patterns
for the whole process.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import polars as pl

from forensics import parsers
from forensics.frames import owned, rows_where
from forensics.model import Parsed
from forensics.parsers.steplog import small

# Hint lines kept per file by a scanner whose every hint line is an event (it declares
# `event_lines`): a GPU that fell off the bus repeats its Xid, a job that loops on a CUDA OOM
# its message, for as long as it runs; past this many they are counted, not kept, and a note says so.
MAX_EVENT_LINES = 10_000
# candidate lines up to which the scanners whose hints run on them are picked by their literals
HINT_PICK_LINES = 1000

# each prefilter and hint, compiled once per process for the few-lines path
_python_regex = functools.cache(re.compile)


def _few_plain(texts: pl.Series) -> list[str | None] | None:
    """The texts when Python's `re` reads them as polars does (small.rows' rule: a few plain lines)."""
    if texts.len() > small.SMALL_LINES:
        return None
    few = small.rows(list(enumerate(texts.to_list())))
    return None if few is None else [t for _, t in few]


class Scanners:
    """The scanners not in `skip`, fed batch by batch; finish() gives their results."""

    def __init__(self, skip: set[str]):
        self.mods = [f for f in parsers.SCANNERS if f.name not in skip]
        self.hits: dict[str, list[pl.DataFrame]] = {f.name: [] for f in self.mods}
        self.capped = {f.name for f in self.mods if f.scan.event_lines}
        self.kept = dict.fromkeys(self.capped, 0)
        self.unkept = dict.fromkeys(self.capped, 0)
        self.prefilter = "|".join(f"(?:{f.scan.prefilter})" for f in self.mods)
        # every scanner's quick pass, whichever are skipped (a superset of these scanners' prefilter, so
        # the prefilter, on the lines it passes, decides as before): one pattern for every file, which
        # polars' cache of compiled regexes keeps from file to file, where one per set of scanners was
        # compiled again for each file
        self.quick = "|".join(f"(?:{f.scan.quick or f.scan.prefilter})" for f in parsers.SCANNERS)
        self.pipe_rows = any(f.scan.pipe_rows for f in self.mods)

    def block_literals(self) -> list[str]:
        """The lowercase literals one of which every line worth a scanner's look holds."""
        out: list[str] = []
        for f in self.mods:
            out += [x for x in f.scan.block_literals if x not in out]
        return out

    def feed(self, batch: pl.DataFrame, raw: tuple[bytes, int] | None = None) -> bool:
        """`raw`: the batch's bytes (buf, end) when its lines are exactly buf[:end]: a `|` is then
        looked for in them first (a `|` byte is a `|` in the lines, whatever else the reader replaced).
        Whether a line passed the prefilters (a scanner's hint was tried on it)."""
        if not self.mods or not batch.height:
            return False
        few = _few_plain(batch["text"])
        cand = rows_where(batch, self._passed(batch, raw) if few is None else self._passed_few(few))
        if not cand.height:
            return False
        mods = self._held_by(cand["text"])
        if (few := _few_plain(cand["text"])) is not None:   # (most batches, big ones too, leave a few lines)
            for f in mods:
                hint = _python_regex(f.scan.hint)
                mask = [t is not None and hint.search(t) is not None for t in few]
                if any(mask):
                    self._keep(f, rows_where(cand, pl.Series(mask, dtype=pl.Boolean)))
            return True
        if not mods:
            return True
        # every hint in one query: a query's fixed cost, not the regex, is most of a hint's cost on a
        # batch's candidate lines
        hints = cand.select(pl.col("text").str.contains(f.scan.hint).alias(str(i)) for i, f in enumerate(mods))
        for f, mask in zip(mods, hints.iter_columns()):
            if mask.any():
                self._keep(f, rows_where(cand, mask))
        return True

    def _passed_few(self, texts: list[str | None]) -> pl.Series:
        """Which of a few plain lines (their texts) pass the prefilters, by Python's `re`."""
        pre, pipes = _python_regex(self.prefilter), self.pipe_rows
        return pl.Series([t is not None and (pre.search(t) is not None or (pipes and t.lstrip().startswith("|")))
                          for t in texts], dtype=pl.Boolean)

    def _passed(self, batch: pl.DataFrame, raw: tuple[bytes, int] | None) -> pl.Series:
        """Which lines of the batch pass the prefilters (the quick pass first), by polars."""
        t = pl.col("text")
        if self.quick == self.prefilter:
            keep = batch.select(t.str.contains(self.prefilter))["text"]
        else:
            keep = batch.select(t.str.contains(self.quick))["text"]
            passed = keep.arg_true()
            if 4 * passed.len() > batch.height:
                # most lines pass the quick test (a kernel log's "gpuhost", English text): it only
                # adds to the prefilter's cost, here and in the batches that follow
                self.quick = self.prefilter
            if passed.len():
                survivors = batch["text"].gather(passed)
                few = _few_plain(survivors)
                hit = (survivors.to_frame().select(t.str.contains(self.prefilter))["text"] if few is None
                       else pl.Series([_python_regex(self.prefilter).search(x) is not None for x in few]))
                keep = pl.Series("text", np.zeros(batch.height, dtype=bool))
                keep.scatter(passed.filter(hit), True)
        if self.pipe_rows and (raw is None or raw[0].find(b"|", 0, raw[1]) >= 0):
            # `^\s*\|` in two cheap steps: the lines with a `|`, then of those the ones it starts
            pipe = batch.select(t.str.contains("|", literal=True))["text"]
            if pipe.any():
                starts = batch.filter(pipe).select(t.str.strip_chars_start().str.starts_with("|"))["text"]
                rows = np.zeros(batch.height, dtype=bool)
                rows[pipe.arg_true().to_numpy()] = starts.to_numpy()
                keep = keep | pl.Series(rows)
        return keep

    def _keep(self, f, h: pl.DataFrame) -> None:
        """Keep a scanner's hint lines of a batch (past MAX_EVENT_LINES of an event scanner's, counted)."""
        if h.height and f.name in self.capped:
            room = MAX_EVENT_LINES - self.kept[f.name]
            if h.height > room:
                self.unkept[f.name] += h.height - room
                h = h.head(room)
            self.kept[f.name] += h.height
        if h.height:
            self.hits[f.name].append(owned(h))

    def _held_by(self, cand: pl.Series) -> list:
        """The scanners whose hint may match some of these candidate lines' texts: on a few lines of ASCII text,
        those with one of their block literals (every line a scanner's prefilter passes holds one, in
        lowercase; a `|` for those that take pipe rows) somewhere in them. A hint left out is never
        compiled: polars keeps few compiled regexes, and the eleven hints were compiled again for each
        file. (On other text a pattern's case folding reaches past ASCII: every scanner.)"""
        if len(cand) > HINT_PICK_LINES:
            return self.mods
        low = "\n".join(t for t in cand.to_list() if t is not None).lower()
        if not low.isascii():
            return self.mods
        return [f for f in self.mods
                if any(x in low for x in f.scan.block_literals) or (f.scan.pipe_rows and "|" in low)]

    def finish(self, src, opts) -> list[Parsed]:
        out = []
        for f in self.mods:
            if self.hits[f.name]:
                p = f.scan.read(pl.concat(self.hits[f.name]), src, opts)
                if p is not None and p.records:
                    out.append(p)
            if self.unkept.get(f.name):
                src.problems.append(f"{src.path}: {self.unkept[f.name]} more {f.name} lines after the first "
                                    f"{MAX_EVENT_LINES} were counted, not read (at most {MAX_EVENT_LINES} are kept "
                                    "per file: counts of their events stop there)")
        return out
