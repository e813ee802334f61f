"""The one reader of kernel logs (dmesg, kern.log/syslog, journal exports), for any size.

A kernel log is mostly lines that say nothing about memory. The reader keeps, batch by batch, the
lines worth decoding: the OOM killer's reports (each whole, with its task table), NVRM driver messages
and boots, each with CONTEXT lines around it, the first and last EDGE lines (the log's first and last
time, the year anchor) and the lines where a syslog month changes (the year inference walks them). At
the end those lines are decoded (kernel/prefix.py) and read (kernel/oom.py, kernel/xid.py); a blank line
stands where lines were left out, so no record is joined across the gap. Every line is counted.

A reader fed lines (`feed`) and one fed bytes (`feed_raw`, for an uncompressed UTF-8 file: most of its
bytes are never cut into lines, kernel/blocks.py finds the few blocks that can hold a line worth
keeping) keep the same lines.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from forensics.frames import owned
from forensics.model import Parsed
from forensics.options import Options
from forensics.parsers.kernel import blocks, oom
from forensics.parsers.kernel import prefix as kp

# A line worth decoding, with the lines around it: the OOM killer's report, the driver, boots. (The
# task table between a report's first and last line is kept as part of the report.)
KEEP_HINT = (r"oom|Killed process|Kill process|killed as a result of limit|Memory cgroup|memory: usage|"
             r"NVRM|Tasks state|Linux version|fallen off the bus")
# what every KEEP_HINT line holds, lowercased (for kernel/blocks.py)
KEEP_BLOCK_LITERALS = ("oom", "kill", "killed as a result of limit", "memory cgroup", "memory: usage", "nvrm",
                       "tasks state", "linux version", "fallen off the bus")
REPORT_OPEN = "invoked oom-killer:"
REPORT_CLOSE = ("Killed process", "oom_reaper: reaped")
CONTEXT = 8             # lines kept before and after each hint line
MAX_REPORT = 50_000     # an OOM report (with its task table) is never longer than this
EDGE = 200              # first and last lines kept
MONTH_MARKS = 1000      # at most this many month-change lines per batch
# Driver lines kept (with their context): a GPU that fell off the bus repeats its Xid for as long as the
# driver logs, so past this many the driver lines are counted, not kept (a note says so).
MAX_DRIVER_LINES = 10_000
_DRIVER = r"NVRM|fallen off the bus"

_EMPTY = {"line": pl.Int64, "text": pl.String}


class KernelReader:
    def __init__(self, src, opts: Options):
        self.src, self.opts = src, opts
        self.kept: list[pl.DataFrame] = []
        self.tail: pl.DataFrame | None = None       # the last lines seen (context before the next batch)
        self.after_until = 0                          # keep lines up to this one (context after a hint)
        self.report_open_at: int | None = None        # line of an `invoked oom-killer` whose report goes on
        self.prev_month: str | None = None
        self.lines = 0
        self.driver_kept = 0
        self.driver_unkept = 0

    def _ranges(self, hits: pl.DataFrame) -> list[tuple[int, int]]:
        """Line ranges to keep for these hint lines: each with its context, each OOM report whole."""
        out = []
        for line, text in hits.iter_rows():
            out.append((line - CONTEXT, line + CONTEXT))
            if REPORT_OPEN in text:
                self.report_open_at = line
            elif self.report_open_at is not None and any(c in text for c in REPORT_CLOSE):
                out.append((self.report_open_at, line))
                self.report_open_at = None
        return out

    def _plan(self, hits: pl.DataFrame, first: int, last: int) -> list[tuple[int, int]]:
        """The line ranges to keep of the batch first..last with these hint lines."""
        self.lines = last
        ranges = [(0, EDGE), (0, self.after_until)]
        driver = hits["text"].str.contains(_DRIVER)
        n = int(driver.sum())
        if n:
            room = max(MAX_DRIVER_LINES - self.driver_kept, 0)
            if n > room:
                hits = hits.filter(~driver | (driver.cum_sum() <= room))
                self.driver_unkept += n - room
            self.driver_kept += min(n, room)
        if hits.height:
            ranges += self._ranges(hits)
            self.after_until = max(self.after_until, int(hits["line"][-1]) + CONTEXT)
            if self.tail is not None and int(hits["line"][0]) - CONTEXT < first:
                self.kept.append(owned(self.tail.filter(pl.col("line") >= int(hits["line"][0]) - CONTEXT)))
        if self.report_open_at is not None:
            if last - self.report_open_at > MAX_REPORT:
                self.report_open_at = None
            else:
                ranges.append((self.report_open_at, last))
        return ranges

    def raw_batches(self, scanners, batch_bytes: int | None = None):
        """The source as kernel/blocks.py batches (bytes where they allow, else line frames), testing
        blocks for this reader's hint and the scanners' literals; None where bytes cannot be read
        straight (a wrapper to strip, an encoding other than UTF-8)."""
        if self.src.wrapper is not None or self.src.encoding != "utf-8":
            return None
        regexes, pipe = blocks.block_prefilter([*KEEP_BLOCK_LITERALS, *scanners.block_literals()],
                                               scanners.pipe_rows)
        return blocks.Reader(self.src, regexes, pipe, batch_bytes).batches()

    def feed_raw(self, rb: blocks.RawBatch, scanners) -> None:
        """feed() and the scanners' feed for a RawBatch: the same lines kept, from the few blocks that
        can hold a hint line (every other line of the batch holds none)."""
        if not rb.height:
            return
        found = rb.analysis()
        if found is None:   # bytes the general reader must read (not UTF-8, NULs)
            frame = rb.general_frame()
            self.feed(frame)
            scanners.feed(frame)
            return
        cand = rb.blocks(found.nonzero()[0])
        scanners.feed(cand)
        tail = rb.tail(EDGE)
        months = (rb.first_text()[:3], tail["text"][-1][:3])
        if months[0] != months[1] or (self.prev_month is not None and months[0] != self.prev_month):
            self.feed(rb.frame())   # a month changes in this batch: the line path finds where
            return
        hits = cand.filter(pl.col("text").str.contains(KEEP_HINT)).select("line", "text")
        ranges = self._plan(hits, rb.first, rb.last)
        self.prev_month = months[1]
        self.kept.append(rb.lines_in(ranges))
        self._keep_tail(tail)

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        if not batch.height:
            return
        first, last = int(batch["line"][0]), int(batch["line"][-1])
        hits = batch.filter(pl.col("text").str.contains(KEEP_HINT))
        ranges = self._plan(hits, first, last)
        line = batch["line"].to_numpy()
        keep = np.zeros(line.size, dtype=bool)
        for a, b in ranges:
            if b >= first and a <= last:
                keep[max(a, first) - first: min(b, last) - first + 1] = True
        months = (batch["text"][0][:3], batch["text"][-1][:3])
        if months[0] != months[1] or (self.prev_month is not None and months[0] != self.prev_month):
            month = pl.col("text").str.slice(0, 3)
            change = batch.select((month != month.shift(1).fill_null(self.prev_month or "")).alias("c"))["c"]
            if change.sum() <= MONTH_MARKS:
                keep |= change.to_numpy()
        self.prev_month = months[1]
        self.kept.append(owned(batch.filter(pl.Series(keep))))
        self._keep_tail(owned(batch.tail(EDGE)))

    def _keep_tail(self, tail: pl.DataFrame) -> None:
        """The last EDGE lines seen, across batches however short."""
        if self.tail is not None and tail.height < EDGE:
            tail = pl.concat([self.tail, tail]).tail(EDGE)
        self.tail = tail

    def finish(self) -> Parsed:
        kept = [k for k in self.kept if k.height]
        if self.tail is not None:
            kept.append(self.tail)
        lines = pl.concat(kept).unique("line").sort("line") if kept else pl.DataFrame(schema=_EMPTY)
        gaps = lines.filter(pl.col("line").diff().fill_null(pl.col("line")) > 1).select(
            (pl.col("line") - 1).alias("line"), pl.lit("").alias("text"))
        lines = pl.concat([lines, gaps]).sort("line")
        decoded = lines.height - gaps.height
        dec = kp.decode(lines, self.opts, self.src.path, self.src.mtime)
        p = oom.parse_decoded(dec)
        if decoded < self.lines:
            p.notes.append(f"of its {self.lines} lines, the {decoded} around OOM-killer reports, NVRM and boot "
                           "messages (and the first and last lines) were decoded in full; the others hold none "
                           "of those and were only counted")
        if self.driver_unkept:
            p.notes.append(f"{self.driver_unkept} NVRM driver lines after the first {MAX_DRIVER_LINES} were counted, "
                           f"not read (at most {MAX_DRIVER_LINES} driver lines are kept per log)")
        p.meta["decoded_lines"] = decoded
        return p
