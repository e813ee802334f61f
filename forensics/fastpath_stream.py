"""Big inputs parsed in one streamed pass over their lines, in bounded memory.

ingest.parse_one hands a source of STREAM_MIN_BYTES or more here. Its lines come in batches
(Source.iter_frames); each batch goes to the claiming parser's consumer and to the free-text scanners'
prefilters, and only what they keep stays in memory:

- nvidia-smi CSV: the parser's own Reader (parsers/nvsmi/csvlog.py) takes the batches, with their
  bytes, and its `prepare` reads the next batches' cells in threads while one is taken.
- kernel logs: only the lines around OOM-killer reports, NVRM messages and boots (with context), the
  first and last lines and the lines where the month changes are decoded in full; the rest is counted.
  Most batches are not even cut into lines: fastpath_kernel.py finds in their bytes the few blocks
  that can hold such a line (or one for the scanners) and decodes only what is kept.
- step logs: only lines the step-log families look at (their scan hints), the line before each (DeepSpeed
  labels), and of the step-marker lines the last one before each reading (the only one a reading takes
  its step from). A cheap prefilter (_STEP_PREFILTER) leaves the lines that can be a family line, a
  reading or a step marker before the exact regexes run.
Other formats are not streamed (their files are small).
"""
from __future__ import annotations

import numpy as np
import polars as pl

from forensics import parsers
from forensics.model import Parsed
from forensics.frames import rows_where

# Files at least this big (decompressed size estimated at 5x for compressed ones) are streamed.
STREAM_MIN_BYTES = 16 << 20


def is_big(src) -> bool:
    return src.encoding == "utf-8" and src.size * (5 if src.compression else 1) >= STREAM_MIN_BYTES


def _own(df: pl.DataFrame) -> pl.DataFrame:
    """df with its text in buffers of its own. A filter or a slice of a batch shares the batch's string
    buffers, so a few lines kept of each batch would keep every batch in memory (a month of step log:
    1 GB held); the kept lines are copied out instead (concat_str with "" writes new strings)."""
    cols = [c for c, t in df.schema.items() if t == pl.String]
    if not cols or not df.height:
        return df
    return df.with_columns(pl.concat_str(pl.col(c), pl.lit("")).alias(c) for c in cols)


# The case-sensitive part of the step-markers prefilter below, shared with its quick pass (_QUICK).
_STEP_LITERALS = (r"torch\.cuda\.|nvidia-smi|see_memory_usage\]|\] mp: |Max_MA|CPU Virtual Memory:|\] datetime: |"
                  r"\*{5}|mem_")

# Literals that every line a scanner's SCAN_HINT matches contains: one pass of these (the regex engine
# runs literal alternations at memory speed) leaves the full hints a few lines. Keyed by the hint's
# hash: a scanner whose hint has changed since is prefiltered by its hint itself.
_LITERALS = {
    "b007ddc0f645": r"NVRM: ",
    "1f8bfe8133b7": r"invoked oom-killer:|Kill|oom-kill:constraint=|oom_reaper: reaped process|"
                    r"killed as a result of limit of",
    "09a89e59ff07": r"=========",
    # and a line whose first non-blank is `|` (_PIPE_ROWS; a `|` anywhere passed most lines of step
    # logs that print `step 7 | loss ...`, an anchored `^\s*\|` here slows the whole alternation 5x)
    "a0719ffb2774": r"PyTorch CUDA memory summary, device ID|CUDA OOMs:",
    "d092d4f40949": r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|Allocation on device ",
    "0a95f7384364": r"(?i:allocated|reserved|cached|occupied|gpu[ \t]*[:=]|free[ _]gpu|\b(?:iter|iteration|step)\b)|"
                    + _STEP_LITERALS,
}


# Hints whose prefilter above also takes the lines that start with `|` after blanks (a summary row).
_PIPE_ROWS = {"a0719ffb2774"}


# A cheaper first pass for the prefilters above that the regex engine cannot run as a literal search
# (a case-insensitive alternation reads ~400 MB/s, 150 ms of every 64 MB of CSV): two letters that
# each case-insensitive word holds, in their four cases (allocated: ll, reserved: rv, cached: ch,
# occupied: cc, gpu: pu, iter/step: te; no k or s, which also match non-ASCII letters under (?i)),
# and the case-sensitive literals as they are. Lines it passes then go through the prefilter.
_QUICK = {
    "0a95f7384364": "|".join(sorted({a + b for pair in ("ll", "rv", "ch", "cc", "pu", "te")
                                     for a in (pair[0], pair[0].upper()) for b in (pair[1], pair[1].upper())}))
                    + "|" + _STEP_LITERALS,
}


def _prefilter(hint: str) -> str:
    return _LITERALS.get(_hint_key(hint), hint)


def _quick(hint: str) -> str:
    return _QUICK.get(_hint_key(hint)) or _prefilter(hint)


def _hint_key(hint: str) -> str:
    import hashlib

    return hashlib.sha1(hint.encode()).hexdigest()[:12]


class _Scanners:
    """The free-text scanners of ingest._scan_free_text, fed batch by batch: one pass of a quick literal
    filter and the prefilters for all of them together, then each scanner's own hint on the few lines
    that passed."""

    def __init__(self, skip: set[str]):
        self.mods = [m for m in parsers.SCANNERS if m.NAME not in skip]
        self.hits: dict[str, list[pl.DataFrame]] = {m.NAME: [] for m in self.mods}
        self.any_hint = "|".join(f"(?:{_prefilter(m.SCAN_HINT)})" for m in self.mods)
        self.quick = "|".join(f"(?:{_quick(m.SCAN_HINT)})" for m in self.mods)
        self.pipe_rows = any(_hint_key(m.SCAN_HINT) in _PIPE_ROWS for m in self.mods)

    def feed(self, batch: pl.DataFrame, raw: tuple | None = None) -> None:
        """`raw`: the batch's bytes as _batches gives them ((buf, end): its lines are exactly buf[:end]),
        when known: a `|` is then looked for in them first (memchr, ~1 ms per 32 MB against ~10 ms for
        the lines; a `|` byte is a `|` in the lines, whatever else the reader replaced)."""
        if not self.mods:
            return
        t = pl.col("text")
        if self.quick == self.any_hint:
            keep = batch.select(t.str.contains(self.any_hint))["text"]
        else:
            keep = batch.select(t.str.contains(self.quick))["text"]
            passed = keep.arg_true()
            if 4 * passed.len() > batch.height:
                # most lines hold the two letters (a kernel log's "gpuhost", English text): the quick
                # pass only adds to the prefilter's cost, here and in the batches that follow
                self.quick = self.any_hint
            if passed.len():   # the prefilter proper on the lines the quick pass let through
                hit = batch["text"].gather(passed).to_frame().select(t.str.contains(self.any_hint))["text"]
                keep = pl.Series("text", np.zeros(batch.height, dtype=bool))
                keep.scatter(passed.filter(hit), True)
        if self.pipe_rows and (raw is None or raw[0].find(b"|", 0, raw[1]) >= 0):
            # `^\s*\|` in two cheap steps: the lines with a `|`, then of those the ones it starts
            # (strip_chars strips what `\s` matches: Unicode White_Space)
            pipe = batch.select(t.str.contains("|", literal=True))["text"]
            if pipe.any():
                starts = batch.filter(pipe).select(t.str.strip_chars_start().str.starts_with("|"))["text"]
                rows = np.zeros(batch.height, dtype=bool)
                rows[pipe.arg_true().to_numpy()] = starts.to_numpy()
                keep = keep | pl.Series(rows)
        cand = rows_where(batch, keep)
        if not cand.height:
            return
        for m in self.mods:
            h = rows_where(cand, pl.col("text").str.contains(m.SCAN_HINT))
            if h.height:
                self.hits[m.NAME].append(_own(h))

    def finish(self, src, opts) -> list[Parsed]:
        out = []
        for m in self.mods:
            if self.hits[m.NAME]:
                p = m.scan(pl.concat(self.hits[m.NAME]), src, opts)
                if p is not None and p.records:
                    out.append(p)
        return out


def scan_lines(frame: pl.DataFrame, src, opts, skip: set[str]) -> list[Parsed]:
    """ingest._scan_free_text for a file read whole: its lines as one batch."""
    sc = _Scanners(skip)
    sc.feed(frame)
    return sc.finish(src, opts)


def scan_streamed(src, opts, skip: set[str]) -> list[Parsed]:
    """ingest._scan_free_text for a big file: one streamed pass."""
    sc = _Scanners(skip)
    for batch, _ in _batches(src):
        sc.feed(batch)
    return sc.finish(src, opts)


def _batches(src, batch_bytes: int | None = None):
    """(lines, raw bytes of the batch or None) of the whole source; counts its lines on the way."""
    from forensics.io import lines as fastpath

    stats = fastpath.ReadStats()
    # BATCH_BYTES read at call time (tests shrink it); a smaller size only for the default
    size = fastpath.BATCH_BYTES if batch_bytes is None else min(batch_bytes, fastpath.BATCH_BYTES)
    for batch in fastpath.cleaned_batches(src, size, stats=stats):
        yield batch, stats.raw
    src._n_lines = stats.lines


def parse_streamed(src, module, opts, covered: set[str]) -> tuple[Parsed, list[Parsed]] | None:
    """(the claiming parser's result, the scanners' results) from one streamed pass, or None when
    this source is not streamed (small, not UTF-8, or a format without a consumer)."""
    if not is_big(src):
        return None
    make = _CONSUMERS.get(module.NAME)
    consumer = make(src, opts, module) if make else None
    if consumer is None:
        return None
    sc = _Scanners(covered)
    reader = consumer.raw_reader(sc) if hasattr(consumer, "raw_reader") else None
    if reader is not None:
        # a kernel log: most of its bytes are never cut into lines (fastpath_kernel.py)
        for batch in reader.batches():
            if isinstance(batch, pl.DataFrame):
                consumer.feed(batch)
                sc.feed(batch)
            else:
                consumer.feed_raw(batch, sc)
        return consumer.finish(), sc.finish(src, opts)
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    # the scanners read a batch while the parser reads it too (polars lets go of the GIL: two cores);
    # one batch at a time, in file order. A consumer with `prepare` also gets the next batch's
    # stateless work started in a thread while it takes this one.
    prepare = getattr(consumer, "prepare", None)
    with ThreadPoolExecutor(1) as pool, ThreadPoolExecutor(PREPARED_AHEAD) as prep_pool:
        scanned = None
        waiting: deque = deque()

        def take(batch, raw, prepared) -> None:
            nonlocal scanned
            if scanned is not None:
                scanned.result()
            scanned = pool.submit(sc.feed, batch, raw)
            if prepared is None:
                consumer.feed(batch, raw)
            else:
                consumer.feed(batch, raw, prepared)

        for batch, raw in _prefetched_batches(src, PREPARED_BATCH_BYTES if prepare else None):
            waiting.append((batch, raw, prepare(prep_pool, batch, raw) if prepare else None))
            if len(waiting) > (PREPARED_AHEAD if prepare else 0):
                take(*waiting.popleft())
        while waiting:
            take(*waiting.popleft())
        if scanned is not None:
            scanned.result()
    return consumer.finish(), sc.finish(src, opts)


# For a consumer with `prepare`: batches whose stateless work runs ahead of the one being taken, and
# their size (two 32 MB batches ahead: 25% faster than one 64 MB one on 2 cores, in less memory).
PREPARED_AHEAD = 2
PREPARED_BATCH_BYTES = 32 << 20


def _prefetched_batches(src, batch_bytes: int | None = None):
    """_batches(src), the next batch read (cut into lines) by a thread of its own meanwhile."""
    from forensics.io import lines as fastpath

    return fastpath._prefetched(_batches(src, batch_bytes), depth=1)


# -- kernel logs -------------------------------------------------------------------------------------

# A line worth decoding, with the lines around it: the OOM killer's report, the driver, boots. (The
# task table between a report's first and last line is kept as part of the report.)
_KERNEL_HINT = (r"oom|Killed process|Kill process|killed as a result of limit|Memory cgroup|memory: usage|"
                r"NVRM|Tasks state|Linux version|fallen off the bus")
_REPORT_OPEN = "invoked oom-killer:"
_REPORT_CLOSE = ("Killed process", "oom_reaper: reaped")
_CONTEXT = 8             # lines kept before and after each hint line
_MAX_REPORT = 50_000     # an OOM report (with its task table) is never longer than this
_EDGE = 200              # first and last lines kept (the file's first/last time, the year anchor)
_MONTH_MARKS = 1000      # at most this many month-change lines per batch


class _Kernel:
    def __init__(self, src, opts, module):
        from forensics.parsers.kernel import syslog as kernel

        self.src, self.opts, self.kernel = src, opts, kernel
        self.kept: list[pl.DataFrame] = []
        self.tail: pl.DataFrame | None = None       # the last lines seen (context before the next batch)
        self.after_until = 0                          # keep lines up to this one (context after a hint)
        self.report_open_at: int | None = None        # line of an `invoked oom-killer` whose report goes on
        self.prev_month: str | None = None
        self.lines = 0

    def _ranges(self, hits: pl.DataFrame) -> list[tuple[int, int]]:
        """Line ranges to keep for these hint lines: each with its context, each OOM report whole."""
        out = []
        for line, text in hits.iter_rows():
            out.append((line - _CONTEXT, line + _CONTEXT))
            if _REPORT_OPEN in text:
                self.report_open_at = line
            elif self.report_open_at is not None and any(c in text for c in _REPORT_CLOSE):
                out.append((self.report_open_at, line))
                self.report_open_at = None
        return out

    def _plan(self, hits: pl.DataFrame, first: int, last: int) -> list[tuple[int, int]]:
        """The line ranges to keep of the batch first..last with these hint lines."""
        self.lines = last
        ranges = [(0, _EDGE), (0, self.after_until)]
        if hits.height:
            ranges += self._ranges(hits)
            self.after_until = max(self.after_until, int(hits["line"][-1]) + _CONTEXT)
            if self.tail is not None and int(hits["line"][0]) - _CONTEXT < first:
                self.kept.append(_own(self.tail.filter(pl.col("line") >= int(hits["line"][0]) - _CONTEXT)))
        if self.report_open_at is not None:
            if last - self.report_open_at > _MAX_REPORT:
                self.report_open_at = None
            else:
                ranges.append((self.report_open_at, last))
        return ranges

    def raw_reader(self, sc: _Scanners):
        """A fastpath_kernel.Reader for this source, or None where it does not apply."""
        from forensics.parsers.kernel import blocks as fastpath_kernel

        if self.src.wrapper is not None:
            return None
        pre = fastpath_kernel.block_prefilter(_KERNEL_HINT, [m.SCAN_HINT for m in sc.mods])
        return fastpath_kernel.Reader(self.src, *pre) if pre is not None else None

    def feed_raw(self, rb, sc: _Scanners) -> None:
        """feed() and the scanners' feed for a fastpath_kernel.RawBatch: the same lines kept, from the
        few blocks that can hold a hint line (every other line of the batch holds none)."""
        if not rb.height:
            return
        found = rb.analysis()
        if found is None:   # bytes the general reader must read (not UTF-8, NULs)
            frame = rb.general_frame()
            self.feed(frame)
            sc.feed(frame)
            return
        cand = rb.blocks(found.nonzero()[0])
        sc.feed(cand)
        tail = rb.tail(_EDGE)
        months = (rb.first_text()[:3], tail["text"][-1][:3])
        if months[0] != months[1] or (self.prev_month is not None and months[0] != self.prev_month):
            self.feed(rb.frame())   # a month changes in this batch: the general path finds where
            return
        hits = cand.filter(pl.col("text").str.contains(_KERNEL_HINT)).select("line", "text")
        ranges = self._plan(hits, rb.first, rb.last)
        self.prev_month = months[1]
        self.kept.append(rb.lines_in(ranges))
        self.tail = tail

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        if not batch.height:
            return
        first, last = int(batch["line"][0]), int(batch["line"][-1])
        hits = batch.filter(pl.col("text").str.contains(_KERNEL_HINT))
        ranges = self._plan(hits, first, last)
        lo = np.array([r[0] for r in ranges])
        hi = np.array([r[1] for r in ranges])
        line = batch["line"].to_numpy()
        keep = np.zeros(line.size, dtype=bool)
        for a, b in zip(lo, hi):
            if b >= first and a <= last:
                keep[max(a, first) - first: min(b, last) - first + 1] = True
        # the lines where a syslog month changes (the year inference walks them)
        months = (batch["text"][0][:3], batch["text"][-1][:3])
        if months[0] != months[1] or (self.prev_month is not None and months[0] != self.prev_month):
            month = pl.col("text").str.slice(0, 3)
            change = batch.select((month != month.shift(1).fill_null(self.prev_month or "")).alias("c"))["c"]
            if change.sum() <= _MONTH_MARKS:
                keep |= change.to_numpy()
        self.prev_month = months[1]
        self.kept.append(_own(batch.filter(pl.Series(keep))))
        self.tail = _own(batch.tail(_EDGE))

    def finish(self) -> Parsed:
        from forensics.parsers.kernel import prefix as kp

        kept = [k for k in self.kept if k.height]
        if self.tail is not None:
            kept.append(self.tail)
        lines = (pl.concat(kept).unique("line").sort("line") if kept
                 else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String}))
        # a blank line where lines were left out, so no record is joined across the gap
        gaps = lines.filter(pl.col("line").diff().fill_null(pl.col("line")) > 1).select(
            (pl.col("line") - 1).alias("line"), pl.lit("").alias("text"))
        lines = pl.concat([lines, gaps]).sort("line")
        decoded = lines.height - gaps.height
        dec = kp.decode(lines, self.opts, self.src.path, self.src.mtime)
        p = self.kernel.parse_decoded(dec)
        p.notes.append(f"a big kernel log: of its {self.lines} lines, the {decoded} around OOM-killer reports, "
                       "NVRM and boot messages (and the first and last lines) were decoded in full; the others "
                       "hold none of those and were only counted")
        p.meta["decoded_lines"] = decoded
        return p


# -- step logs -----------------------------------------------------------------------------------------

# What every line holds that stepmem's family hints, ANY_READING or a step marker (_STEP_MARKER after
# strip_line_time) match, for the stepmem regexes of these sha1s (another version: no prefilter).
_STEP_PREFILTER = {
    "dec6b1f8def2": r"see_memory_usage\]|\] mp: |Max_MA |CPU Virtual Memory:|\] datetime: |iteration|\*{5}|mem_"
                    r"|(?i:allocated|reserved|cached|occupied|gpu[ \t]*[:=]|free[ _]gpu)|torch\.cuda\.|nvidia-smi"
                    r"|^(?:{iso})?(?:{us})?\W*(?i:global[ _]step|step|iteration|iter)",
}


def _step_sources(S) -> str:
    import hashlib

    parts = [S.SCAN_HINT, S.GENERIC_HINT, S.ANY_READING, S.TS_ISO, S.TS_US, S._STEP_MARKER]
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def _step_prefilter(S) -> str | None:
    rx = _STEP_PREFILTER.get(_step_sources(S))
    if rx is None:
        return None
    # the clocks strip_line_time removes, one after the other (TS_US without its own `^`)
    return rx.replace("{iso}", S._unnamed(S.TS_ISO)).replace("{us}", S._unnamed(S.TS_US).removeprefix("^"))


class _StepLog:
    def __init__(self, src, opts, module):
        from forensics.parsers.steplog import markers as S

        self.src, self.opts, self.module, self.S = src, opts, module, S
        self.kept: list[pl.DataFrame] = []
        self.last_marker: pl.DataFrame | None = None
        self.prev_tail: pl.DataFrame | None = None
        gen = S.GENERIC_HINT
        # the families' own hints (SCAN_HINT is the generic one, then theirs)
        self.family_hint = S.SCAN_HINT[len(gen) + 1:] if S.SCAN_HINT.startswith(gen + "|") else None
        self.prefilter = _step_prefilter(S) if self.family_hint is not None else None

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        S = self.S
        t = pl.col("text")
        if self.family_hint is None:
            self.kept.append(_own(batch.filter(t.str.contains(S.SCAN_HINT))))
            return
        # only a family line, a reading or a step marker changes what is kept (a pure line that gives
        # no step is dropped below): one cheap pass leaves those, the exact regexes run on them
        cand = batch.filter(t.str.contains(self.prefilter)) if self.prefilter is not None else batch
        marks = cand.select(
            "line", "text",
            t.str.contains(self.family_hint).alias("fam"),
            (t.str.contains(S.GENERIC_HINT) & ~t.str.contains(S._NOT_OURS)).alias("gen"))
        marks = marks.filter(pl.col("fam") | pl.col("gen"))
        if not marks.height:
            return
        marks = marks.with_columns(t.str.contains(S.ANY_READING).alias("reading"))
        pure = pl.col("gen") & ~pl.col("fam") & ~pl.col("reading")
        # a pure step-marker line counts only if it gives a step, and only the last before a reading
        marks = marks.with_columns(
            pl.when(pure).then(S.strip_line_time(t).str.extract(S._STEP_MARKER).cast(pl.Int64, strict=False)
                               .is_not_null())
            .otherwise(False).alias("marker"))
        if self.last_marker is not None:
            marks = pl.concat([self.last_marker.with_columns(pl.lit(True).alias("_old")),
                               marks.with_columns(pl.lit(False).alias("_old"))], how="diagonal")
        else:
            marks = marks.with_columns(pl.lit(False).alias("_old"))
        nxt_reading = pl.when(pl.col("reading") | pl.col("fam")).then(pl.col("line")).backward_fill()
        nxt_marker = pl.when(pl.col("marker")).then(pl.col("line")).shift(-1).backward_fill()
        marks = marks.with_columns(nxt_reading.alias("_nr"), nxt_marker.alias("_nm"))
        markers = marks.filter(pl.col("marker"))
        useful = markers.filter(pl.col("_nr").is_not_null() & (pl.col("_nm").is_null() | (pl.col("_nm") > pl.col("_nr"))))
        # the batch's last marker may give its step to a reading of the next batch
        self.last_marker = (_own(markers.tail(1).select("line", "text", "fam", "gen", "reading", "marker"))
                            if markers.height and markers["_nr"][-1] is None else None)
        # a pure line that gives no step (a "step 7 | loss ..." line read by nobody) changes nothing
        keep = marks.filter(~pure & ~pl.col("_old")).select("line", "text")
        used = useful.select("line", "text")
        self.kept.append(_own(pl.concat([keep, used])))
        # the line before each family line (DeepSpeed takes a label from it)
        fam_lines = marks.filter(pl.col("fam") & ~pl.col("_old"))["line"]
        if fam_lines.len():
            prev = batch.filter(pl.col("line").is_in((fam_lines - 1).implode()))
            if self.prev_tail is not None and int(fam_lines[0]) - 1 == int(self.prev_tail["line"][0]):
                prev = pl.concat([self.prev_tail, prev])
            self.kept.append(_own(prev))
        self.prev_tail = _own(batch.tail(1))

    def finish(self) -> Parsed:
        kept = [k.select("line", "text") for k in self.kept if k.height]
        if self.last_marker is not None:
            kept.append(self.last_marker.select("line", "text"))
        frame = (pl.concat(kept).unique("line").sort("line") if kept
                 else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String}))
        return self.module.parse(_Lines(self.src, frame), self.opts)


def _nvsmi_csv(src, opts, module):
    from forensics.parsers.nvsmi import csvlog

    return csvlog.Reader(src, opts)


class _Lines:
    """A source whose frame() is the kept lines (parsers only call frame(), head(), path, mtime)."""

    def __init__(self, src, frame: pl.DataFrame):
        self._src, self._frame = src, frame
        self.path, self.mtime = src.path, src.mtime

    def frame(self) -> pl.DataFrame:
        return self._frame

    def head(self) -> list[str]:
        return self._src.head()

    def __getattr__(self, name):
        return getattr(self._src, name)


_CONSUMERS = {
    "nvidia-smi-csv": _nvsmi_csv,
    "kernel-log": _Kernel,
    "nvrm-xid": _Kernel,
    "step-markers": _StepLog,
    "deepspeed-memory": _StepLog,
    "megatron-memory": _StepLog,
    "hf-trainer-memory": _StepLog,
}
