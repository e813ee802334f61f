"""The reader of a format whose lines are picked out by its scan hint (the same lines its free-text scan
reads inside other logs): torch/distributed, jobs/kills, serving/engines (HintReader, batch by batch), and
torch/oom, oom/frameworks (parse_used, small files read whole). Format-free: each format gives its
prefilter, hint and `read(lines, src, opts)`."""
from __future__ import annotations

import numpy as np
import polars as pl

from forensics.frames import owned, rows_where
from forensics.model import Parsed, Skipped

# line 1 of a sample says where it came from
PROVENANCE = r"^\s*#\s*source:"


class HintReader:
    """Keeps the lines the hint matches, batch by batch, and reads them at the end; a provenance line and
    every other non-blank line are counted as skipped, with the subclass's reasons."""

    note_reason = "not a log line (provenance)"
    other_reason = "not a line of this format"

    def __init__(self, src, opts, prefilter: str, hint: str, read):
        self.src, self.opts = src, opts
        self.prefilter, self.hint, self.read = prefilter, hint, read
        self.kept: list[pl.DataFrame] = []
        self.skipped = Skipped()

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        t = pl.col("text")
        note = batch.select(t.str.contains(PROVENANCE))["text"]
        hit = batch.select(t.str.contains(self.prefilter) & t.str.contains(self.hint) & ~note)["text"]
        self.kept.append(owned(rows_where(batch.select("line", "text"), hit)))
        self.skipped.add_lines(self.note_reason, rows_where(batch, note)["line"])
        other = rows_where(batch, ~hit & ~note & (t.str.strip_chars() != ""))
        self.skipped.add_lines(self.other_reason, other["line"])

    def finish(self) -> Parsed:
        kept = [k for k in self.kept if k.height]
        lines = pl.concat(kept) if kept else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
        out = self.read(lines, self.src, self.opts)
        out.skipped.merge(self.skipped)
        return out


def parse_used(src, opts, hint: str, read, other_reason: str) -> Parsed:
    """A file read whole: the lines its hint picks out go to `read`, which names the lines it used in
    `meta["_used_lines"]`; every other non-blank line is counted as skipped with `other_reason`."""
    frame = src.frame()
    out = read(frame.filter(pl.col("text").str.contains(hint)), src, opts)
    used = set(out.meta.pop("_used_lines", ()))
    rest = frame.filter(~pl.col("line").is_in(list(used)) & (pl.col("text").str.strip_chars() != ""))
    out.skipped.add_lines(other_reason, rest["line"])
    return out


def scan_used(lines: pl.DataFrame, src, opts, read) -> Parsed:
    """The same reader on the hinted lines of another format's file (what it used is no matter there)."""
    out = read(lines, src, opts)
    out.meta.pop("_used_lines", None)
    return out


def near(src, lines: pl.Series, before: int, after: int) -> dict[int, str]:
    """The text of each of `lines` and of the `before` lines above and `after` below it, by line
    number. A source not in memory (a big or compressed file, streamed) is read again for them, keeping
    only those: its whole frame would be the whole file in memory (a job that loops on a CUDA OOM
    prints gigabytes of it)."""
    from forensics import ingest   # (ingest imports the parsers)
    from forensics.io import lines as io_lines

    at = lines.to_numpy()
    if not at.size:
        return {}
    wanted = pl.Series("line", np.unique((at[:, None] + np.arange(-before, after + 1)).ravel()))
    keep = pl.col("line").is_in(wanted.implode())
    if src.is_read or not ingest.streamed(src):
        kept = src.frame().filter(keep)
    else:
        parts, last = [], int(wanted[-1])
        for b in io_lines.cleaned_batches(src):
            if b.height and b["line"][0] > last:
                break
            parts.append(b.select("line", "text").filter(keep))
        kept = pl.concat(parts) if parts else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return dict(zip(kept["line"].to_list(), kept["text"].to_list()))


def between(near_lines: dict[int, str], start: int, stop: int) -> list[str]:
    """The texts of lines start .. stop - 1 of a `near` result (as far as the file goes)."""
    return [near_lines[i] for i in range(start, stop) if i in near_lines]
