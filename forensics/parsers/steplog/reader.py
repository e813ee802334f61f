"""The one reader of the step-log formats: lines come in batches (a small file is one batch, a big one
many), only the lines that the families look at are kept, and they are read in parts of PART_LINES as
they come (a smaller file's in one part, at the end; `Parts` carries what a part needs of the lines
before it and settles what needs the whole file at the end), so memory is bounded by a part, a batch
and the readings, not by the file.

A step log is mostly lines that no family reads (losses, learning rates, progress bars). What can
change the result is kept: every line that an extractor reads (families.FAMILY_LINES), every memory
reading (generic.ANY_READING), the line before each DeepSpeed line (its label), and of the step-marker
lines the last one before each reading (the only one a reading takes its step from). A step-marker
line followed by another before any reading is dropped, as is a line that only looks like a marker.
PREFILTER, built from the literals the modules declare beside their regexes, leaves the lines that can
be any of those before the exact regexes run. The general reader's lines (general.py: a memory word;
a table's rows once a header may have been seen) are kept beside them. Both are found in one search of
every line (LOOK; for a big file with the free-text scanners' lines, which are fed only what it finds).
Each kept line says whether it was kept for the generic shapes (`generic`): the lines that only the
general reader wants (a free-text log's memory lines) skip the generic shapes' reading.
"""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import polars as pl

from forensics.frames import columns, owned, rows_where
from forensics.io import lines as line_reader
from forensics.model import (SAMPLES_SCHEMA, Parsed, Skipped, empty_events, empty_samples, events_frame,
                             samples_frame)
from forensics.parsers import free, ranks
from forensics.parsers.steplog import families, general, generic, readings, small

# A big file's kept lines are read in parts of about this many lines (a smaller file in one part): the
# memory that reading takes grows with the lines read at once. Each part is read as soon as it is full,
# while the threads of raw_batches cut and search the batches after it (read after the last batch, the
# reading would wait for the whole search); a part costs a few tens of queries, whatever its size.
PART_LINES = 1 << 16

# Every line the reader may keep matches this (tests/parsers/test_steplog_prefilters.py holds it to it):
# of the lines LOOK finds, the families' and the generic shapes' are looked for without it (_feed).
_PREFILTER_PARTS = [f"(?i:{generic.READING_WORDS})", generic.READING_LITERALS,
                    families.FAMILY_PLAIN_LITERALS, families.HF_KEY_SIGN, generic.MARKER_PREFILTER]
PREFILTER = "|".join(_PREFILTER_PARTS)
# What the reader looks at, in one search of every line: the prefilter's lines and the general
# reader's (a memory word, general.candidates, here as a regex: `(?i)` also takes the Kelvin sign for a
# `k` and the long s for an `s`, a few more lines for the exact tests). Every other test then runs on
# the few lines it leaves: each search of every line costs about what cutting the lines does.
LOOK = "|".join(f"(?:{p})" for p in [*_PREFILTER_PARTS, general.CANDIDATE_REGEX])
_DIGIT = re.compile("[0-9]")
# (Python's `\s` takes every blank that polars' does: a superset of the lines)
_FAMILY_LITERALS = re.compile(families.FAMILY_LITERALS)
# The same searches in Python, for a batch of a few plain lines (_feed_few)
_LOOK = re.compile(LOOK)
_FAMILY_LINES = re.compile(families.FAMILY_LINES)
_DEEPSPEED_LINES = re.compile(families.DEEPSPEED_LINES)
_MARKS = {"line": pl.Int64, "text": pl.String, "marker": pl.Boolean, "fam": pl.Boolean}
_KEPT_LINES = {"line": pl.Int64, "text": pl.String, "generic": pl.Boolean}
# A big file's batches (raw_batches), read by one thread while two others search the next ones.
BATCH_BYTES = 32 << 20
AHEAD = 2
# The lines a search finds are copied out of a big batch when at most one in this many is found (_looked):
# sparser than that, each found line is lines away from the last, past what the CPU reads ahead
SPARSE_FOUND = 4


class StepLogReader:
    """feed(batch) any number of times (batches of `line` Int64, `text` String, in file order), then
    finish() -> Parsed: the same result as reading all the lines at once. `notes(parsed)` are the
    notes of the format that the reader reads for."""

    def __init__(self, src, opts, notes: Callable[[Parsed], list[str]] = generic.notes):
        self.src, self.opts, self.notes = src, opts, notes
        self._kept: list[pl.DataFrame] = []
        self._new: list[pl.DataFrame] = []   # this batch's kept lines, copied out of it together at its end
        # the last step marker seen, while no reading has come after it (it may be in the next batch)
        self._last_marker: pl.DataFrame | None = None
        # the last line of the previous batch: the line before a DeepSpeed line that starts this one
        self._prev_tail: pl.DataFrame | None = None
        # whether a line that may be a table header (a memory word, no digit) was seen: from then on
        # lines that start with a number may be its rows (general.py)
        self._table = False
        self._parts: Parts | None = None   # made when the first part is read

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        """`raw` (the batch's bytes, where a driver has them) is not needed."""
        if (lines := small.rows(batch)) is not None:   # (a few plain lines: the same lines kept, in Python)
            self._feed_few(batch, lines)
        else:
            self._feed(batch, _looked(batch, LOOK))

    def raw_batches(self, scanners, batch_bytes: int | None = None):
        """The source's batches for feed_raw, each with its search for LOOK and the scanners' lines
        started in threads ahead (the driver's hook for a reader that feeds the scanners itself): the
        scanners get only the lines that search leaves, not every line of the file."""
        look = LOOK
        if scanners.mods:
            look = "|".join([look, f"(?:{scanners.prefilter})"] + ([r"^\s*\|"] if scanners.pipe_rows else []))
        # (the line reader's BATCH_BYTES read at call time, as the driver does: tests shrink it)
        return self._batches(look, min(batch_bytes or BATCH_BYTES, line_reader.BATCH_BYTES))

    def _batches(self, look: str, size: int):
        stats = line_reader.ReadStats()
        with ThreadPoolExecutor(AHEAD) as pool:
            waiting: deque[_Batch] = deque()
            for batch in line_reader.prefetched(line_reader.cleaned_batches(self.src, size, stats=stats), depth=1):
                waiting.append(_Batch(batch, pool.submit(_looked, batch, look)))
                if len(waiting) > AHEAD:
                    yield waiting.popleft()
            yield from waiting
        self.src.streamed_lines = stats.lines

    def feed_raw(self, item: _Batch, scanners) -> None:
        """feed() of a raw_batches batch, and the scanners' feed of the lines its search left (every
        line a scanner looks at is among them)."""
        scanners.feed(self._feed(item.frame, item.looked.result()))

    def _feed(self, batch: pl.DataFrame, looked: pl.DataFrame) -> pl.DataFrame:
        """Keep what matters of `batch` (`looked`: _looked's lines of it, those that LOOK, or a regex it is
        part of, finds); returns those lines (line, text)."""
        t = pl.col("text")
        # (few queries a batch: each has a fixed cost, which is what a small file's reading is made of)
        fam_or_gen = pl.col("fam") | pl.col("gen")
        # (a small text without a family literal has no family line: FAMILY_LINES is not even compiled)
        joined = generic.small_text(looked["text"])
        fam = (t.str.contains(families.FAMILY_LINES) if joined is None or _FAMILY_LITERALS.search(joined)
               else pl.lit(False))
        # the families' and the generic shapes' lines among all that LOOK found, with no search for
        # PREFILTER's parts first: a line that fails PREFILTER is no family line, holds no reading and
        # is no step marker, so _keep drops it as it drops a line that only looks like a marker
        marks = looked.lazy().select(
            "line", "text",
            fam.alias("fam"),
            (t.str.contains(generic.GENERIC_HINT) & ~t.str.contains(generic.NOT_OURS)).alias("gen")
        ).filter(fam_or_gen).collect()
        if marks.height:
            self._keep(batch, marks)
        self._keep_general(batch, rows_where(looked, general.candidates(t) | t.str.contains(generic.BLOCK_HEAD)))
        # (the lines kept are copied out of a big batch, which they would keep in memory; a small one is
        # kept whole at no cost)
        own = owned if batch["text"].estimated_size() > generic.SMALL_TEXT_BYTES else _same
        new = _general_only_once([k for k in self._new if k.height])
        if new:
            self._kept.append(own(_union(new)))
        self._new = []
        self._prev_tail = own(batch[["line", "text"]].tail(1))
        self._read()
        return looked

    def _feed_few(self, batch: pl.DataFrame, lines: list[tuple[int, str | None]]) -> None:
        """_feed of a batch of a few plain lines (small.rows), each tested in Python (small.py: on such
        text Python's `re` reads these patterns as polars does): the same lines kept and the same state
        carried, the kept lines made one frame, where _feed's dozen queries each cost a fixed cost many
        times the work on a few lines (a job of many one-line logs pays them per file)."""
        looked = [(ln, t) for ln, t in lines if t is not None and _LOOK.search(t)]
        family = _FAMILY_LINES if _FAMILY_LITERALS.search("\n".join(t for _, t in looked)) else None
        new: dict[int, tuple[str | None, bool]] = {}   # line -> (text, generic), as _union makes them
        # _keep's `rel`: (line, text, marker, fam), the step marker held back by the last batch first
        rel = [(*self._last_marker.row(0)[:2], True, False)] if self._last_marker is not None else []
        for ln, t in looked:
            fam = family is not None and family.search(t) is not None
            gen = small.GENERIC_HINT.search(t) is not None and not small.NOT_OURS.search(t)
            pure = gen and not fam and not small.ANY_READING.search(t)
            marker = pure and small.marker_step(t) is not None
            if (fam or gen) and (not pure or marker):
                rel.append((ln, t, marker, fam))
        for i, (ln, t, marker, _) in enumerate(rel):   # a marker counts if the next line kept is none
            if not marker or (i + 1 < len(rel) and not rel[i + 1][2]):
                new[ln] = (t, True)
        self._last_marker = None
        if rel and rel[-1][2]:
            ln, t, _, _ = rel[-1]
            self._last_marker = columns({"line": [ln], "text": [t], "marker": [True], "fam": [False]}, _MARKS)
        ds = [ln for ln, t, _, fam in rel if fam and _DEEPSPEED_LINES.search(t)]
        if ds:   # the line before each DeepSpeed line (its label)
            labels = {x - 1 for x in ds}
            new.update((ln, (t, True)) for ln, t in lines if ln in labels)
            tail = self._prev_tail
            if tail is not None and tail.height and ds[0] - 1 == tail["line"][0]:
                new[ds[0] - 1] = (tail["text"][0], True)
        # _keep_general's: the lines with a memory word, a block's head and, from a table's header on, the
        # rows that may be its
        words = [(ln, t) for ln, t in looked if small.memory_word(t) or small.BLOCK_HEAD.search(t)]
        self._table = self._table or any(not _DIGIT.search(t) for _, t in words)
        if self._table:
            words += [(ln, t) for ln, t in lines if t is not None and small.TABLE_ROW.search(t)]
        for ln, t in words:
            new.setdefault(ln, (t, False))
        if new:
            kept = sorted(new.items())
            self._kept.append(columns({"line": [ln for ln, _ in kept], "text": [t for _, (t, _) in kept],
                                       "generic": [g for _, (_, g) in kept]}, _KEPT_LINES))
        self._prev_tail = pl.DataFrame([batch["line"].tail(1), batch["text"].tail(1)])
        self._read()

    def _keep_general(self, batch: pl.DataFrame, kept: pl.DataFrame) -> None:
        """The lines the general reader looks at (general.py): `kept`, the batch's lines with a memory
        word, and a table's rows."""
        t = pl.col("text")
        self._new.append(kept.select("line", "text", _GENERAL_ONLY))
        if not self._table:   # (a header has no digit; a few lines are tested in Python)
            lines = kept["text"]
            if lines.estimated_size() <= generic.SMALL_TEXT_BYTES:
                self._table = any(x is not None and not _DIGIT.search(x) for x in lines.to_list())
            else:
                self._table = bool(kept.select(~t.str.contains("[0-9]")).to_series().any())
        if self._table:   # (from the header's batch on) the batch's rows
            self._new.append(rows_where(batch, general.table_rows(t)).select("line", "text", _GENERAL_ONLY))

    def _keep(self, batch: pl.DataFrame, marks: pl.DataFrame) -> None:
        t = pl.col("text")
        # a line of the generic hint that neither a family nor a reading uses matters only as a step
        # marker, and only if it gives a step
        pure = pl.col("gen") & ~pl.col("fam") & ~pl.col("reading")
        rel = marks.lazy().with_columns(t.str.contains(generic.ANY_READING).alias("reading")).filter(
            # (a line that fails MARKER_PREFILTER gives no step: the step's extraction, several times the cost
            # of that one anchored search, runs only on the lines that pass it; a log whose every memory line
            # has a `step=N` in it has thousands of pure lines and no marker among them)
            ~pure | t.str.contains(generic.MARKER_PREFILTER)
        ).with_columns(
            pl.when(pure).then(generic.strip_line_time(ranks.strip_prefix(t)).str.extract(generic.STEP_MARKER)
                               .cast(pl.Int64, strict=False).is_not_null())
            .otherwise(False).alias("marker")
        ).filter(~pure | pl.col("marker")).select("line", "text", "marker", "fam").collect()
        if self._last_marker is not None:
            rel = pl.concat([self._last_marker, rel])
        # a marker counts if the next line that matters is not another marker; the last one waits
        is_last_of_run = ~pl.col("marker").shift(-1).fill_null(True)
        self._new.append(rows_where(rel, ~pl.col("marker") | is_last_of_run).select("line", "text", _FOR_GENERIC))
        self._last_marker = owned(rel.tail(1)) if rel.height and rel["marker"][-1] else None
        # the line before each DeepSpeed line (its label, for the copies that print it on a line of its own)
        if not rel["fam"].any():   # (no family line: no DeepSpeed line, and no query to say so)
            return
        ds = rows_where(rel, pl.col("fam") & pl.col("text").str.contains(families.DEEPSPEED_LINES))["line"]
        if ds.len():
            before = rows_where(batch, pl.col("line").is_in((ds - 1).implode())).select("line", "text", _FOR_GENERIC)
            tail = self._prev_tail
            if tail is not None and tail.height and int(ds[0]) - 1 == int(tail["line"][0]):
                before = pl.concat([tail.with_columns(_FOR_GENERIC), before])
            self._new.append(before)

    def finish(self) -> Parsed:
        self._read(final=True)
        parsed = self._reader().result()
        parsed.notes.extend(self.notes(parsed))
        return parsed

    def _read(self, final: bool = False) -> None:
        """Read the kept lines in parts of about PART_LINES, each up to a place where nothing before
        depends on what comes after (all of them at the end), keeping the rest for the next part."""
        if not final and sum(k.height for k in self._kept) < PART_LINES:
            return
        kept = [k for k in self._kept if k.height]
        frame = _union(kept) if kept else pl.DataFrame(schema={**_LINES, "generic": pl.Boolean})
        while frame.height >= (1 if final else PART_LINES):
            cut = frame.height if final else self._cut(frame)
            if not cut:
                break
            self._reader().read(frame.slice(0, cut))
            frame = frame.slice(cut)
        self._kept = [frame]

    def _reader(self) -> Parts:
        if self._parts is None:
            opts, src = self.opts, self.src
            self._parts = Parts(opts.tz_for(src.path), year=opts.year,
                                mtime=getattr(src, "mtime", None) if opts.year_from_mtime else None)
        return self._parts

    def _cut(self, frame: pl.DataFrame) -> int:
        """Where the lines of `frame` (kept, sorted) may be cut into a part and the rest: about PART_LINES
        in, not inside a run of HF Trainer metrics lines (a block is read whole), and before any line
        that a later batch may still add before it (the step marker held back, the batch's last line:
        the label of a DeepSpeed line that starts the next batch). 0: no such place yet."""
        limit = int(self._prev_tail["line"][0]) if self._prev_tail is not None and self._prev_tail.height else 0
        if self._last_marker is not None:
            limit = min(limit, int(self._last_marker["line"][0]))
        end = min(frame.height, int(frame["line"].search_sorted(limit)), PART_LINES)
        t = pl.col("text")
        window = 1 << 12
        while end > 1:
            start = max(0, end - window)
            hf = frame.slice(start, end - start + 1).select(
                t.str.contains(families.HF_TRAINER_LINES)
                | ranks.strip_prefix(t).str.contains(families.HF_TRAINER_LINES)).to_series()
            free = ~(hf & hf.shift(1, fill_value=True))
            free[0] = False   # (a cut at `start` is the previous window's to check)
            at = free.arg_true()
            if at.len():
                return start + int(at[-1])
            end = start
        return 0


class _Batch:
    """A batch of raw_batches: its lines and the search of them (a Future of _looked's lines)."""

    def __init__(self, frame: pl.DataFrame, looked: Future):
        self.frame, self.looked = frame, looked


def _same(df: pl.DataFrame) -> pl.DataFrame:
    return df


# A kept line's `generic`: whether the generic shapes may need it (_keep kept it: a family line, a
# reading, a step marker, a DeepSpeed line's label). A line that only the general reader keeps is no
# reading of the generic shapes and no step marker that a reading takes (_keep, which sees every such
# line, would have kept it), so Parts.read gives the generic shapes only the lines kept for them.
_FOR_GENERIC = pl.lit(True).alias("generic")
_GENERAL_ONLY = pl.lit(False).alias("generic")


def _general_only_once(frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """A batch's kept lines (each frame's `generic` the same on every row) without the general reader's
    rows of the lines that a frame for the generic shapes holds: _union would keep the generic row of such a
    line. In a log of readings every line is in both, and the union of the rest needs no sort (it was a
    sort of twice the batch's lines)."""
    kept = [f["line"] for f in frames if f["generic"][0]]
    if not kept or len(kept) == len(frames):
        return frames
    lines = pl.concat(kept) if len(kept) > 1 else kept[0]
    rest = (f if f["generic"][0] else rows_where(f, ~pl.col("line").is_in(lines.implode())) for f in frames)
    return [f for f in rest if f.height]


def _union(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The rows of `frames` (line, text, generic; each sorted by line, a line in several of them the
    same line) in line order, each line once with `generic` if any of its rows has it: a sort and a
    shift, without hashing every line."""
    if len(frames) == 1:   # (sorted, each line once)
        return frames[0]
    df = pl.concat(frames, how="vertical")
    line = df["line"]
    if line.is_sorted() and not (line.diff() == 0).any():   # (no line twice: nothing to merge)
        return df
    # (a line's row with `generic` first, the row kept: one key, which sorts as fast as `line` alone does
    # and several times faster than the two columns)
    df = df.sort(pl.col("line") * 2 + (~pl.col("generic")).cast(pl.Int64))
    return df.filter(pl.col("line").ne_missing(pl.col("line").shift(1)))


def _looked(batch: pl.DataFrame, regex: str) -> pl.DataFrame:
    """The lines (line, text) of `batch` that `regex` finds; of a big batch, when they are a few of its
    lines, copied out of its buffers. A filter's strings stay where they are: one line in tens of a batch of
    tens of MB, each of the dozen passes over them after the search (_feed, _keep, _keep_general, the
    scanners) would wait on memory for every line, several times the cost of the one copy (which runs in
    the search's thread). Where most lines are found they lie close together, and a copy would only add."""
    looked = rows_where(batch[["line", "text"]], pl.col("text").str.contains(regex))
    big = batch["text"].estimated_size() > generic.SMALL_TEXT_BYTES
    return owned(looked) if big and looked.height * SPARSE_FOUND <= batch.height else looked


# -- all families together ------------------------------------------------------------------------

_LINES = pl.Schema({"line": pl.Int64, "text": pl.String})
_WORK = {"line": pl.Int64, "piece": pl.Int64, "k": pl.Int64, "time": pl.Datetime("us", "UTC"),
         "zoned": pl.Boolean, "series": pl.String, "bytes": pl.Int64, "total_bytes": pl.Int64,
         "step": pl.Int64, "label": pl.String, "gpu": pl.String,
         # the rank words in front of a reading, and whether its tag only gave the step (generic.py)
         "rank": pl.Int64, "local_rank": pl.Int64, "step_tag": pl.Boolean}


_WORK_NAMES, _WORK_TYPES = list(_WORK), list(_WORK.values())   # (compared faster than a schema)


def _work(df: pl.DataFrame) -> pl.DataFrame:
    if df is None or df.height == 0:
        return pl.DataFrame(schema=_WORK)
    if df.columns == _WORK_NAMES and df.dtypes == _WORK_TYPES:   # (readings.extract's rows: no query)
        return df
    return df.select([pl.col(c).cast(t, strict=False) if c in df.columns else pl.lit(None, dtype=t).alias(c)
                      for c, t in _WORK.items()])


def extract_all(frame: pl.DataFrame, zone: str, *, use_general: bool = True, year: int | None = None,
                mtime: float | None = None) -> Parsed:
    """Every step-log memory reading and marker in `frame` (line, text): DeepSpeed, Megatron and
    HF Trainer lines first, then the generic shapes on the lines those did not use. A DeepSpeed, Megatron
    or HF Trainer log often carries the other families' lines too, so whichever module claims a file
    reads all of them (and `scan` finds them in files that another parser claimed or nobody did).
    Last, the general reader (general.py, `use_general`) reads the lines none of those used; a
    year-less clock takes its year from `year` (--year) else the file's `mtime`, as syslog's does."""
    parts = Parts(zone, use_general=use_general, year=year, mtime=mtime)
    parts.read(frame)
    return parts.result()


class Parts:
    """extract_all of a file's lines in parts, read one after the other in file order (StepLogReader
    never cuts inside an HF Trainer metrics block, which is read whole). What a part's lines need of the lines before
    is carried over: the last DeepSpeed rows (a reading's label is on the row before), the last step
    marker (the step of the readings after it), the general reader's state (general.Reader). What
    needs the whole file waits for `result`: the Megatron iteration clocks (printed after their
    readings), the general reader's forms that recur, the readings' order numbers and the clock kind."""

    def __init__(self, zone: str, *, use_general: bool = True, year: int | None = None, mtime: float | None = None):
        self.zone, self.use_general = zone, use_general
        self.skipped = Skipped()
        self.general = general.Reader(zone, self.skipped, year=year, mtime=mtime)
        self._samples: list[pl.DataFrame] = []
        self._events: list[pl.DataFrame] = []
        self._iteration_times: list[pl.DataFrame] = []
        self._ranks: list[pl.DataFrame] = []     # the prefix ranks of the general reader's lines that have one
        self._ds_context = pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
        self._marker: dict = {}   # "line": the last step-marker line (readings.extract's carry)
        self._wider: dict[str, int] = {}   # per line shape: how many figures the general reader reads (_read_wider)

    def read(self, frame: pl.DataFrame) -> None:
        """Read a part: `frame` (line, text), or StepLogReader's kept lines (with `generic`)."""
        zone, skipped = self.zone, self.skipped
        for_generic = None   # the lines the generic shapes read (None: all)
        if "generic" in frame.columns:   # (Series and columns: no query)
            if not frame["generic"].all():
                for_generic = frame["line"].filter(frame["generic"])
            frame = pl.DataFrame([c for c in frame.iter_columns() if c.name != "generic"])
        if frame.schema != _LINES or frame["text"].null_count():   # (the reader's own parts need no query)
            frame = frame.select(pl.col("line").cast(pl.Int64), pl.col("text").cast(pl.String).fill_null(""))
        if not frame.height:
            return
        first = int(frame["line"].min())
        # a distributed job's lines start with the rank's prefix (`[default1]:[rank1]: `, Ray's `(WorkerDict
        # pid=N) `, `[Rank 0 | Local Rank 0] `): read, then cut off, so that the clock behind it is the line's clock again
        joined = generic.small_text(frame["text"])
        if joined is not None and not any(x in joined for x in ranks.PREFIX_SIGNS):   # (split_prefix's nulls, no query)
            frame = frame.hstack([pl.Series(c, [None] * frame.height, pl.Int64) for c in ranks.PREFIX_COLUMNS])
        else:
            frame = ranks.split_prefix(frame)
        line_ranks = frame[["line", *ranks.PREFIX_COLUMNS]]
        frame = generic.drop_unreadable_clocks(frame[["line", "text"]], skipped)

        t = pl.col("text")
        ds_input = pl.concat([self._ds_context, frame]) if self._ds_context.height else frame
        # a small part's text, for the families to skip the passes whose literals it lacks
        text = generic.small_text(ds_input["text"])
        if text is None:   # (a big part: the literals it holds stand for its text)
            text = families.literals_held(ds_input)
        if families.holds_any(text, families.DEEPSPEED_LITERALS):
            ds = families.extract_deepspeed(ds_input, zone)
            if self._ds_context.height:
                ds = ds.filter(pl.col("line") >= first)
            # the last two DeepSpeed rows, the lines right before them and the part's last line: all that a
            # later row's label needs (the row before it, or the line before it)
            ds_rows = rows_where(ds_input, t.str.contains(families.DEEPSPEED_LINES))["line"].tail(2)
            self._ds_context = owned(rows_where(ds_input, pl.col("line").is_in(
                pl.concat([ds_rows - 1, ds_rows, frame["line"].tail(1)]).implode())))
        else:   # (no DeepSpeed line: the context is the part's last line)
            ds = pl.DataFrame(schema={"line": pl.Int64})
            self._ds_context = frame.tail(1) if joined is not None else owned(frame.tail(1))   # (as _feed's)
        hf_samples, hf_events = families.extract_hf_trainer(frame, zone, skipped, text=text)
        mg_events, iteration_times = families.extract_megatron(frame, zone, text=text)
        used = (pl.concat([ds.select("line"), hf_samples.select("line")]).unique()
                if ds.height or hf_samples.height else ds)
        rest = frame.join(used, on="line", how="anti") if used.height else frame
        unitless: list[int] = []
        marker = self._marker.get("line")
        if for_generic is not None:
            rest_g = rows_where(rest, pl.col("line").is_in(for_generic.implode())) if for_generic.len() else rest.clear()
        else:
            rest_g = rest
        gen = readings.extract(pl.concat([marker, rest_g]) if marker is not None else rest_g, zone, skipped,
                                      unitless=unitless if self.use_general else None, carry=self._marker)
        if marker is not None and gen.height:
            gen = gen.filter(pl.col("line") >= first)

        ds = ds.filter(pl.col("series").is_not_null()) if "series" in ds.columns else ds
        if self.use_general:
            wider = _read_wider(rest, gen, self._wider, joined)
            if wider:
                gen = gen.filter(~pl.col("line").is_in(wider))
            left = _for_general(rest, unitless + wider)
            handled = self.general.feed(left)
            if unitless:
                left_over = pl.Series("line", unitless, pl.Int64)
                skipped.add_lines(general.UNITLESS, left_over.filter(~left_over.is_in(handled.implode())))
            if left.height and line_ranks.height > min(line_ranks.null_count()[list(ranks.PREFIX_COLUMNS)].row(0)):
                lr = rows_where(line_ranks, pl.any_horizontal(pl.col(c).is_not_null() for c in ranks.PREFIX_COLUMNS))
                self._ranks.append(lr.join(left.select("line"), on="line", how="semi"))
        found = [_work(x) for x in (ds, hf_samples, gen) if x.height]   # (an empty one would cost a frame)
        if found:
            s = found[0] if len(found) == 1 else pl.concat(found, how="vertical")
            self._samples.append(_kept_columns(_with_ranks(s, line_ranks)))
        self._events.extend(e for e in (hf_events, mg_events) if e.height)
        if iteration_times.height:
            self._iteration_times.append(iteration_times)

    def result(self) -> Parsed:
        notes = []
        if self.use_general:
            res = self.general.finish()
            notes = res.notes
            if res.samples.height:
                line_ranks = (pl.concat(self._ranks) if self._ranks else pl.DataFrame(
                    schema={"line": pl.Int64, **dict.fromkeys(ranks.PREFIX_COLUMNS, pl.Int64)}))
                self._samples.append(_kept_columns(_with_ranks(_work(res.samples), line_ranks)))
        # each part is sorted and the parts come in file order: only the general reader's readings,
        # added last, make a sort of the whole necessary
        several = len(self._samples) > 1
        s = _put_together(self._samples)
        if several and self.use_general and res.samples.height:
            s = s.sort("line", "piece", "k")
        if s.height and self._iteration_times:
            iteration_times = pl.concat(self._iteration_times)
            # Megatron prints the iteration line (with its clock) right after the memory report of
            # the same iteration: that clock is the readings' time
            s = (s.join_asof(iteration_times.sort("line").rename({"line": "it_line", "time": "it_time",
                                                                    "zoned": "it_zoned"}),
                             left_on="line", right_on="it_line", by="step", strategy="forward",
                             check_sortedness=False)  # both sorted by line
                 .with_columns(pl.coalesce("time", "it_time").alias("time"),
                               pl.coalesce("zoned", "it_zoned").alias("zoned"))
                 .drop("it_line", "it_time", "it_zoned"))
        s = free.with_fall(s, "free")
        clock = generic.clock_of(s, *self._events)
        # (the frame made of its columns: a select is a query)
        s = pl.DataFrame([*(s[c] for c in SAMPLES_SCHEMA if c in s.columns), _seq(s["line"], s["piece"])])
        events = self._events
        return Parsed(
            samples=samples_frame(s) if s.height else empty_samples(),
            events=pl.concat([events_frame(e) for e in events]).sort("line") if events else _NO_EVENTS.clear(),
            skipped=self.skipped,
            clock=clock,
            notes=notes,
        )


def _for_general(rest: pl.DataFrame, unitless: list[int]) -> pl.DataFrame:
    """The lines of `rest` (a part's lines that no family used) for the general reader to read or count:
    a line of the generic shapes is generic.py's (read or counted as skipped there), but one that they
    could give no unit (`unitless`) is the general reader's; no other parser's line, no family's."""
    if (few := small.rows(rest)) is not None:   # (a few plain lines: the same test in Python)
        return rows_where(rest, pl.Series([
            (ln in unitless or not small.ANY_READING.search(x)) and not small.NOT_OURS.search(x)
            and not small.FAMILY_MEMORY_LINES.search(x) for ln, x in few], dtype=pl.Boolean))
    # (when/then: the other two regexes are not run where no line is left, as in a log of readings)
    t = pl.col("text")
    return rows_where(rest, pl.when(~t.str.contains(generic.ANY_READING) | pl.col("line").is_in(unitless))
                      .then(~t.str.contains(generic.NOT_OURS) & ~t.str.contains(families.FAMILY_MEMORY_LINES))
                      .otherwise(False))


# The memory words of figures that the general reader reads and no generic shape does (theirs are allocated,
# reserved, cached, occupied, `mem_`, a bare `GPU`, `Free GPU ram`): only a line holding one can be read more fully
_WIDER_WORDS = ["used", "usage", "free", "peak", "vram", "in_use", "in use"]
# (as a regex, ASCII letters in either case as contains_any's ascii_case_insensitive takes them: found
# several times faster)
_WIDER_WORDS_ASCII_CI = "(?i-u:" + "|".join(re.escape(w) for w in _WIDER_WORDS) + ")"


def _read_wider(rest: pl.DataFrame, gen: pl.DataFrame, plans: dict[str, int], joined: str | None) -> list[int]:
    """The lines of `rest` that the generic shapes read (`gen`) and the general reader reads more memory figures
    of (verl's `memory allocated (GB): …, device memory used/total (GB): 2.07/60.96`, whose device figure no
    generic shape reads, nor its phase): a line is read by one reader, the one that reads more of it. `plans`:
    per line shape, how many figures (not capacities) the general reader reads; `joined`: the part's text if small."""
    if not gen.height or (joined is not None and not any(w in joined.lower() for w in _WIDER_WORDS)):
        return []
    t = pl.col("text")
    # (a progress bar's refreshes are pieces of a line, which the two readers count apart: left to the shapes)
    cand = rows_where(rest, t.str.contains(_WIDER_WORDS_ASCII_CI)
                      & ~t.str.contains("\r", literal=True) & pl.col("line").is_in(gen["line"].unique().implode()))
    if not cand.height:
        return []
    cand = (cand.with_columns(t.str.replace_all("[0-9]+", "0").alias("shape"))
            .join(gen.group_by("line").len("generic"), on="line", how="inner"))
    for shape, text in cand.group_by("shape").agg(t.first()).iter_rows():
        if shape not in plans:
            plans[shape] = sum(r.series != "total" for r in general.plan_line(text).readings)
    wins = cand["shape"].replace_strict(plans, return_dtype=pl.Int64) > cand["generic"]
    return cand["line"].filter(wins).to_list()


def _seq(line: pl.Series, piece: pl.Series) -> pl.Series:
    """The order number of each reading's (line, piece), the readings sorted by them (Series methods: a
    query on the frame would copy what the query does not need)."""
    if line.len() <= generic.SMALL_ROWS:   # (a few rows: in Python, without a query each)
        seq, n, last = [], -1, (None, None)
        for at in zip(line.to_list(), piece.to_list()):
            n += at != last   # (as ne_missing: a null equals a null)
            seq.append(n)
            last = at
        return pl.Series("seq", seq, pl.Int64)
    new = line.ne_missing(line.shift(1)) | piece.ne_missing(piece.shift(1))
    return (new.cum_sum().cast(pl.Int64) - 1).alias("seq")


# (a copy of an empty frame costs a fraction of making one from its schema)
_NO_EVENTS = empty_events()


def _kept_columns(s: pl.DataFrame) -> pl.DataFrame:
    """A part's readings, sorted, without the columns that only _with_ranks reads nor those it has no
    value in (a step log's clock, capacity and GPU): a big file's readings wait in memory until the end."""
    s = pl.DataFrame([c for c in s.iter_columns() if c.name not in ("rank", "local_rank", "step_tag")
                      and (c.name in _ORDER or c.null_count() < c.len())])   # (columns: no query)
    return s.sort("line", "piece", "k") if s.height > 1 and not _few_in_order(s) else s


def _few_in_order(s: pl.DataFrame) -> bool:
    """Whether `s` holds a few readings already in (line, piece, k) order (a sort is a query)."""
    if s.height > generic.SMALL_ROWS:
        return False
    keys = list(zip(*(s[c].to_list() for c in _ORDER)))
    return all(None not in key for key in keys) and keys == sorted(keys)


_ORDER = ("line", "piece", "k")
# (and the pid of a Ray worker's prefix, which _with_ranks gives the readings of its lines)
_KEPT = {**{c: t for c, t in _WORK.items() if c not in ("rank", "local_rank", "step_tag")}, "pid": pl.Int64}


def _put_together(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The parts' readings (_kept_columns) as one frame, each column in one chunk, made one column at a
    time while the parts let go of theirs (the list is emptied): a concat of the parts' frames and a
    query over their chunks (hundreds in a big file) copied every column at once, twice the readings'
    size. A column that no part has a value in is made once, not per part."""
    # (each part's height taken first: a part whose every column has been let go has none left to say it)
    heights = [p.height for p in parts]
    n = sum(heights)
    cols = []
    for name, dtype in _KEPT.items():
        if not any(name in p.columns for p in parts):
            cols.append(_nulls(name, n, dtype))
        elif len(parts) == 1:   # (one part: nothing to concatenate or let go)
            cols.append(parts[0][name].rechunk())
        else:
            cols.append(pl.concat([p[name] if name in p.columns else _nulls(name, h, dtype)
                                   for p, h in zip(parts, heights)]).rechunk().alias(name))
            parts[:] = [p.drop(name, strict=False) for p in parts]
    parts.clear()
    return pl.DataFrame(cols)


def _nulls(name: str, n: int, dtype: pl.DataType) -> pl.Series:
    """A column of n nulls (a few made from a list: pl.repeat is a query)."""
    if n <= generic.SMALL_ROWS:
        return pl.Series(name, [None] * n, dtype=dtype)
    return pl.repeat(None, n, dtype=dtype, eager=True).alias(name)


def _with_ranks(s: pl.DataFrame, line_ranks: pl.DataFrame) -> pl.DataFrame:
    """Each reading's rank (its own rank words first, then its line's prefix) put first in its label,
    so that each rank's readings are a series of their own; the pid of its line's prefix (a Ray worker's)
    is its `pid`, so that each worker's are too."""
    def all_null(c: pl.Series) -> bool:   # (null_count: no query)
        return c.null_count() == c.len()

    if not s.height or (all_null(s["rank"]) and all_null(s["local_rank"])
                        and all(all_null(line_ranks[c]) for c in ranks.PREFIX_COLUMNS)):
        return s
    s = s.join(line_ranks, on="line", how="left")
    return s.with_columns(ranks.label(pl.coalesce("rank", "line_rank"), pl.coalesce("local_rank", "line_local_rank"),
                                      pl.col("label"), ~pl.col("step_tag").fill_null(False)).alias("label"),
                          pl.col("line_pid").alias("pid")).drop(*ranks.PREFIX_COLUMNS)
