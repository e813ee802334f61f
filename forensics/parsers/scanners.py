"""The free-text scanners run together: facts that turn up in any text file (a CUDA OOM at the end of a
training log, an OOM-killer report pasted into a job's stderr) are looked for in every input.

Each scanner declares, beside its `SCAN_HINT` regex, what every line the hint matches holds:
`SCAN_PREFILTER` (a regex, mostly a literal alternation, which the regex engine runs at memory speed),
optionally `SCAN_QUICK` (a cheaper superset of it, tried first), `SCAN_BLOCK_LITERALS` (lowercase
literals for readers that test whole blocks of bytes, kernel/blocks.py) and `SCAN_PIPE_ROWS` (the lines
whose first non-blank is `|` count too). One pass of all the prefilters together leaves a few lines,
and each hint runs on those only. tests/parsers/test_scanners.py checks the declarations against every
sample line, so a hint edited without its prefilter fails there instead of losing lines.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from forensics import parsers
from forensics.frames import owned, rows_where
from forensics.model import Parsed

# Hint lines kept per file by a scanner whose every hint line is an event (it declares
# SCAN_EVENT_LINES = True): a GPU that fell off the bus repeats its Xid, a job that loops on a CUDA OOM
# its message, for as long as it runs; past this many they are counted, not kept, and a note says so.
MAX_EVENT_LINES = 10_000


class Scanners:
    """The scanners not in `skip`, fed batch by batch; finish() gives their results."""

    def __init__(self, skip: set[str]):
        self.mods = [m for m in parsers.SCANNERS if m.NAME not in skip]
        self.hits: dict[str, list[pl.DataFrame]] = {m.NAME: [] for m in self.mods}
        self.capped = {m.NAME for m in self.mods if getattr(m, "SCAN_EVENT_LINES", False)}
        self.kept = dict.fromkeys(self.capped, 0)
        self.unkept = dict.fromkeys(self.capped, 0)
        self.prefilter = "|".join(f"(?:{m.SCAN_PREFILTER})" for m in self.mods)
        self.quick = "|".join(f"(?:{getattr(m, 'SCAN_QUICK', m.SCAN_PREFILTER)})" for m in self.mods)
        self.pipe_rows = any(getattr(m, "SCAN_PIPE_ROWS", False) for m in self.mods)

    def block_literals(self) -> list[str]:
        """The lowercase literals one of which every line worth a scanner's look holds."""
        out: list[str] = []
        for m in self.mods:
            out += [x for x in m.SCAN_BLOCK_LITERALS if x not in out]
        return out

    def feed(self, batch: pl.DataFrame, raw: tuple[bytes, int] | None = None) -> None:
        """`raw`: the batch's bytes (buf, end) when its lines are exactly buf[:end]: a `|` is then
        looked for in them first (a `|` byte is a `|` in the lines, whatever else the reader replaced)."""
        if not self.mods or not batch.height:
            return
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
                hit = batch["text"].gather(passed).to_frame().select(t.str.contains(self.prefilter))["text"]
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
        cand = rows_where(batch, keep)
        if not cand.height:
            return
        # every hint in one query: a query's fixed cost, not the regex, is most of a hint's cost on a
        # batch's few candidate lines
        hints = cand.select(pl.col("text").str.contains(m.SCAN_HINT).alias(str(i)) for i, m in enumerate(self.mods))
        for m, mask in zip(self.mods, hints.iter_columns()):
            if not mask.any():
                continue
            h = rows_where(cand, mask)
            if h.height and m.NAME in self.capped:
                room = MAX_EVENT_LINES - self.kept[m.NAME]
                if h.height > room:
                    self.unkept[m.NAME] += h.height - room
                    h = h.head(room)
                self.kept[m.NAME] += h.height
            if h.height:
                self.hits[m.NAME].append(owned(h))

    def finish(self, src, opts) -> list[Parsed]:
        out = []
        for m in self.mods:
            if self.hits[m.NAME]:
                p = m.scan(pl.concat(self.hits[m.NAME]), src, opts)
                if p is not None and p.records:
                    out.append(p)
            if self.unkept.get(m.NAME):
                src.problems.append(f"{src.path}: {self.unkept[m.NAME]} more {m.NAME} lines after the first "
                                    f"{MAX_EVENT_LINES} were counted, not read (at most {MAX_EVENT_LINES} are kept "
                                    "per file: counts of their events stop there)")
        return out
