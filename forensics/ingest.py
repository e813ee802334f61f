"""Ingest: find the files, let each be claimed by a parser, parse, and collect the two tables.

One bad file never stops the rest: its problem becomes a one-line message in `Bundle.problems` and an
`error` in its input row.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Callable

import numpy as np
import polars as pl

from forensics.io import archives, lines
from forensics import parsers
from forensics.errors import InputError
from forensics.options import Options
from forensics.model import (
    IMPLAUSIBLE,
    MAX_PLAUSIBLE_BYTES,
    Bundle,
    InputInfo,
    EVENTS_SCHEMA,
    SAMPLES_SCHEMA,
    Parsed,
    Skipped,
    conform,
)
from forensics.io.sources import CUT_AT_END, Source, discover, outside_note
from forensics.parsers.contract import Format
from forensics.parsers.scanners import Scanners
from forensics.frames import partitions, rows_where


def _tag(df: pl.DataFrame, schema: dict, path: str) -> pl.DataFrame:
    """df in `schema`, its source set to `path` (a column replaced on a copy: `with_columns` would be a
    query per table per file)."""
    df = conform(df, schema).clone()
    df.replace_column(df.get_column_index("source"),
                      pl.Series("source", [path], dtype=pl.String).new_from_index(0, df.height))
    return df


# Files at least this big are read batch by batch, in bounded memory; smaller ones are one batch. A
# compressed file is always streamed: its size says nothing of what it holds (a few KB of gzip can hold
# a gigabyte of blank lines).
STREAM_MIN_BYTES = 16 << 20
# For a reader with `prepare`: batches whose stateless work runs ahead of the one being taken, and
# their size (two smaller batches ahead keep both cores busy in less memory than one big one).
PREPARED_AHEAD = 2
PREPARED_BATCH_BYTES = 32 << 20


def streamed(src: Source) -> bool:
    return src.encoding == "utf-8" and (bool(src.compression) or src.size >= STREAM_MIN_BYTES)


def _batches(src: Source, batch_bytes: int | None = None, parse=lines.parse_buffer):
    """(lines, raw bytes of the batch or None) of the whole source; counts its lines on the way."""
    stats = lines.ReadStats()
    # BATCH_BYTES read at call time (tests shrink it); a smaller size only for the default
    size = lines.BATCH_BYTES if batch_bytes is None else min(batch_bytes, lines.BATCH_BYTES)
    for batch in lines.cleaned_batches(src, size, stats=stats, parse=parse):
        yield batch, stats.raw
    src.streamed_lines = stats.lines


def _feed_streamed(src: Source, reader, scanners: Scanners) -> None:
    """Every batch of a big source to the reader and the scanners, in file order. The scanners read a
    batch in a thread while the reader takes the next (polars lets go of the GIL: two cores); a reader
    with `prepare` also gets the next batches' stateless work started in threads meanwhile; one that
    says it takes bytes (`TAKES_BYTES`) gets its batches as lines.ByteLines where the bytes allow (cut
    into lines only if it or the scanners need them). A batch the reader says it took whole as data
    rows of its format, or as blank lines (feed returns True), holds nothing for the scanners."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    prepare = getattr(reader, "prepare", None)
    with ThreadPoolExecutor(1) as pool, ThreadPoolExecutor(PREPARED_AHEAD) as prep_pool:
        scanned = None
        waiting: deque = deque()

        def take(batch, raw, prepared) -> None:
            nonlocal scanned
            taken = reader.feed(batch, raw) if prepared is None else reader.feed(batch, raw, prepared)
            if scanned is not None:
                scanned.result()
            scanned = None if taken else pool.submit(_scan, scanners, batch, raw)

        # (a wrapper is stripped from each line: its lines are not their bytes)
        as_bytes = getattr(reader, "TAKES_BYTES", False) and src.wrapper is None
        batches = lines.prefetched(_batches(src, PREPARED_BATCH_BYTES if prepare else None,
                                            lines.parse_bytes if as_bytes else lines.parse_buffer), depth=1)
        for batch, raw in batches:
            waiting.append((batch, raw, prepare(prep_pool, batch, raw) if prepare else None))
            if len(waiting) > (PREPARED_AHEAD if prepare else 0):
                take(*waiting.popleft())
        while waiting:
            take(*waiting.popleft())
        if scanned is not None:
            scanned.result()


def _scan(scanners: Scanners, batch, raw) -> None:
    """The scanners' feed of a batch; of one line repeated, the first copy tells whether any copy holds
    something for them."""
    if isinstance(batch, lines.ByteLines) and batch.unit() is not None:
        if not scanners.feed(batch.head(1)):
            return
        batch, raw = batch.after(1), None
    scanners.feed(lines.frame_of(batch), raw)


def read_source(src: Source, fmt: Format, opts: Options) -> tuple[Parsed, list[Parsed]]:
    """(what the claiming parser read, what the free-text scanners found) in one pass over the source.

    A format with a `reader` gets the source's lines batch by batch (one batch for a small file); one
    without reads its (small) files whole with `parse`. The scanners get every batch the reader does
    not say it took whole as its own data rows."""
    if fmt.reads_whole:
        # one document (a JSON response) or a binary file, read by its parse: no log lines for the scanners
        return fmt.parse(src, opts), []
    scanners = Scanners({fmt.name, *fmt.covers})
    make = fmt.reader
    if make is None:
        primary = fmt.parse(src, opts)
        scanners.feed(src.frame())
        return primary, scanners.finish(src, opts)
    reader = make(src, opts)
    if not streamed(src) or src.is_read:
        frame = src.frame()
        if not reader.feed(frame):
            scanners.feed(frame)
    else:
        raw = reader.raw_batches(scanners) if hasattr(reader, "raw_batches") else None
        if raw is None:
            _feed_streamed(src, reader, scanners)
        else:
            for batch in raw:
                if isinstance(batch, pl.DataFrame):
                    reader.feed(batch)
                    scanners.feed(batch)
                else:
                    reader.feed_raw(batch, scanners)
    return reader.finish(), scanners.finish(src, opts)


def scan_free_text(src: Source, opts: Options) -> list[Parsed]:
    """What the free-text scanners find in a file no parser claims (streamed when it is big)."""
    scanners = Scanners(set())
    if streamed(src) and not src.is_read:
        for batch, raw in _batches(src):
            scanners.feed(batch, raw)
    else:
        scanners.feed(src.frame())
    return scanners.finish(src, opts)


# A time stamp outside these years is a damaged one (a digit lost or added: `7/11/30`, `20261/...`).
MIN_YEAR, MAX_YEAR = 1970, 2200
IMPLAUSIBLE_TIME = f"implausible time stamp (year before {MIN_YEAR} or after {MAX_YEAR}), time dropped"


def _utc_us(year: int) -> int:
    return (datetime(year, 1, 1, tzinfo=timezone.utc) - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


# the plausible times as the schemas hold them (µs, UTC): from the first instant of MIN_YEAR to before MAX_YEAR + 1's
_PLAUSIBLE_US = (_utc_us(MIN_YEAR), _utc_us(MAX_YEAR + 1))


def _surely_plausible(df: pl.DataFrame, cols: tuple[str, ...]) -> bool:
    """True when every byte count lies in 0..MAX_PLAUSIBLE_BYTES and every time in MIN_YEAR..MAX_YEAR,
    told by each column's lowest and highest value (Series methods, no query); False leaves it to
    _plausible's own check (a negative delta series is fine there)."""
    for c in cols:
        v = df[c] if c in df.columns else None
        if v is not None and v.null_count() < v.len() and not (0 <= v.min() and v.max() <= MAX_PLAUSIBLE_BYTES):
            return False
    t = df["time"]
    if t.null_count() == t.len():
        return True
    us = t.cast(pl.Int64)
    return _PLAUSIBLE_US[0] <= us.min() and us.max() < _PLAUSIBLE_US[1]


def _plausible(parsed: Parsed, skipped: Skipped) -> None:
    """Null byte counts no memory can have and times no log was written at, counting them as skipped
    (the row itself stays)."""
    for attr, cols, schema in (("samples", ("bytes", "total_bytes"), SAMPLES_SCHEMA), ("events", ("bytes",), EVENTS_SCHEMA)):
        df = getattr(parsed, attr)
        if df is None or not df.height:
            continue
        df = conform(df, schema)
        if _surely_plausible(df, cols):
            continue
        negative_ok = pl.col("series").str.contains("delta").fill_null(False) if "series" in df.columns else pl.lit(False)
        # one query says whether anything is off (almost never): only then find the lines and fix
        years = pl.col("time").dt.year()
        checks = [(pl.col(c).abs() > MAX_PLAUSIBLE_BYTES) | ((pl.col(c) < 0) & ~negative_ok if c == "bytes" else pl.col(c) < 0)
                  for c in cols if c in df.columns]
        checks.append(pl.col("time").is_not_null() & ((years < MIN_YEAR) | (years > MAX_YEAR)))
        if not df.select(pl.any_horizontal([c.fill_null(False) for c in checks]).any()).item():
            continue
        fixes = []
        for col in cols:
            if col not in df.columns:
                continue
            v = pl.col(col)
            bad = (v.abs() > MAX_PLAUSIBLE_BYTES) | ((v < 0) & ~negative_ok if col == "bytes" else v < 0)
            bad_lines = df.filter(bad.fill_null(False))["line"].to_list()
            if bad_lines:
                skipped.add_lines(IMPLAUSIBLE, bad_lines)
                fixes.append(pl.when(bad.fill_null(False)).then(None).otherwise(v).alias(col))
        years = pl.col("time").dt.year()
        bad_time = pl.col("time").is_not_null() & ((years < MIN_YEAR) | (years > MAX_YEAR))
        bad_lines = df.filter(bad_time)["line"].to_list()
        if bad_lines:
            skipped.add_lines(IMPLAUSIBLE_TIME, bad_lines)
            fixes.append(pl.when(bad_time).then(None).otherwise(pl.col("time")).alias("time"))
        if fixes:
            setattr(parsed, attr, df.with_columns(fixes))


def parse_one(src: Source, opts: Options) -> tuple[InputInfo, list[Parsed]]:
    """Claim and parse one source. Raises InputError for an unreadable file.

    Whatever happens to the file (not recognized, empty, truncated, lines too long) is counted in the
    returned InputInfo (`skip_reasons`) and said in one line in `InputInfo.problems`."""
    info = InputInfo(path=src.path, compression=src.compression)
    # a binary format claims its files by their bytes, before any text is decoded
    fmt, reason = parsers.claim_file(src)
    binary = fmt is not None and fmt.sniff_bytes is not None
    info.reason = reason
    if src.wrapper and not (fmt is not None and fmt.reads_whole):
        # a format read from its bytes has no line wrapper stripped (jq's indent is no CI log's)
        info.wrapper = src.wrapper.describe()
    results: list[Parsed] = []
    skipped = Skipped()
    if fmt is not None:
        info.format = fmt.name
        primary, found = read_source(src, fmt, opts)
        results.append(primary)
        results.extend(found)
        info.clock = primary.clock
        info.notes.extend(primary.notes)
        info.meta.update(primary.meta)
        skipped.merge(primary.skipped)
    elif reason != "empty file":
        found = scan_free_text(src, opts)
        if found:
            kinds = sorted({k for p in found for k in p.events["kind"].unique().to_list()})
            info.format = "text"
            info.reason = "free text with " + ", ".join(kinds) + " lines"
            info.clock = found[0].clock
            results.extend(found)
    info.lines = (results[0].lines or 0) if binary else src.line_count
    for p in results:
        _plausible(p, skipped)
        _consistency(p, src.path, skipped, info)
    _once_per_step(results, info)
    info.records = sum(p.records for p in results)
    if info.format and not info.records and results and results[0].meta.get("unread"):
        # a file its reader recognized but could not read says why, and what to do, not only that it was empty
        info.problems.append(f"{src.path}: read as {info.format}, but no memory readings or events came out of "
                             f"its lines: {results[0].meta['unread']}")
    skipped.merge(src.skipped)
    info.problems.extend(src.problems)
    explained = {CUT_AT_END}  # said by the reader's own message
    if info.format is None:
        explained.add(_not_read(src, info, reason, skipped))
    elif _driver_errors(results, src.path, info):
        explained.add("driver error")
    _skipped_message(src.path, skipped, explained, info)
    info.skipped = skipped.total
    info.skip_reasons = dict(skipped.counts)
    info.skip_examples = dict(skipped.examples)
    if src.decode_errors:
        info.notes.append(f"{src.decode_errors} bytes were not valid {(src.encoding or 'utf-8').upper()} and were replaced")
    if src.nul_bytes:
        info.notes.append(f"{src.nul_bytes} NUL bytes were removed (a crash leaves them where unflushed log lines "
                          "should be)")
    info.problems = [_one_line(m) for m in info.problems]
    return info, results


DUPLICATE = "duplicate reading (same time, step, GPU, series and value as an earlier line), kept once"
_SERIES_KEY = ["host", "gpu", "pid", "series", "label"]
_MAX_MESSAGES_PER_INPUT = 5


def _duration(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    if seconds < 2 * 86400:
        return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
    return f"{seconds // 86400:.0f} d {seconds % 86400 // 3600:.0f} h"


def _row_hash(cols: list[str]) -> pl.Expr:
    """One 64-bit hash per row from per-column hashes (faster than pl.struct(cols).hash(): 1.3 s
    against 1.7 s on 5 M readings)."""
    h = None
    for i, c in enumerate(cols):
        x = pl.col(c).hash(i + 1)
        h = x if h is None else (h * 1_000_003) ^ x
    return h


def _sampled_within_a_tick(s: pl.DataFrame) -> bool:
    """A series printed with two values at one printed time is read faster than its clock ticks (a
    0.5 s monitor behind a whole-second stamp): its equal readings at one time are readings, not copies."""
    timed = rows_where(s, pl.col("time").is_not_null())
    return bool(timed.height) and timed.group_by(["time", "step", *_SERIES_KEY]).agg(
        pl.col("bytes").n_unique().alias("_n"))["_n"].max() > 1


def _consistency(p: Parsed, path: str, skipped: Skipped, info: InputInfo) -> None:
    """Duplicated readings are dropped (two loggers appending to one file would double-weight them);
    a clock that goes back and GPUs that vanish or appear mid-log are said, since they change how the
    timeline reads (nothing else is changed)."""
    s = p.samples
    # a copy needs a time (`dup` below), and so do the clock and GPU checks: a log with fewer than two
    # times (a step log without a clock) has nothing to check, and costs no query
    if s is None or s.height < 2 or "time" not in s.columns or s.height - s["time"].null_count() < 2:
        return
    s = conform(s, SAMPLES_SCHEMA).with_row_index("_row")
    # "earlier" is by line; the rows keep their order (most parsers emit them in line order already)
    lines = s["line"]
    in_order = s if lines.null_count() == 0 and lines.is_sorted() else s.sort("line", maintain_order=True)
    # the step is part of a reading: a log whose clock counts whole seconds prints several steps, often
    # with the same value, within one second
    key = ["time", "step", *_SERIES_KEY, "bytes"]
    dup = pl.col("time").is_not_null() & ~pl.struct(key).is_first_distinct()
    # only rows whose cheap per-column hash repeats can be duplicates: the exact struct comparison
    # runs on those (usually none; 3x faster on a month of readings)
    cand = rows_where(in_order, _row_hash(key).is_duplicated())
    dups = rows_where(cand, dup) if cand.height else cand
    if dups.height and _sampled_within_a_tick(in_order):
        dups = dups.clear()
    if dups.height:
        skipped.add_lines(DUPLICATE, sorted(dups["line"].to_list()))
        p.samples = s.filter(~pl.col("_row").is_in(dups["_row"].implode())).drop("_row")
        in_order = in_order.filter(~pl.col("_row").is_in(dups["_row"].implode()))
    timed = in_order if not in_order["time"].null_count() else rows_where(in_order, pl.col("time").is_not_null())
    if timed.height < 2:
        return
    messages: list[str] = []
    prev = pl.col("time").shift(1).over(_SERIES_KEY)
    # A reading can be more than 1 s older than an earlier one of its series only if it is more than
    # 1 s older than the latest time read before it: when no row is, skip the per-series window.
    us = timed["time"].to_numpy().view(np.int64)   # µs (SAMPLES_SCHEMA's unit), no nulls: numpy, no query
    lag = int((np.maximum.accumulate(us) - us).max())
    if lag <= 1_000_000:
        back = timed.clear()
    else:
        back = timed.with_columns(((prev - pl.col("time")).dt.total_microseconds() / 1e6).alias("_back"),
                                  prev.alias("_prev")).filter(pl.col("_back") > 1.0)
    if back.height:
        first = back.row(0, named=True)
        more = f" ({back.height} times in all)" if back.height > 1 else ""
        messages.append(f"{path}:{first['line']}: clock goes back {_duration(first['_back'])}{more}, "
                        f"from {first['_prev']:%Y-%m-%d %H:%M:%S} to {first['time']:%H:%M:%S} UTC as read: the machine's "
                        "clock was set back (NTP step, end of summer time in a log read with a fixed offset) or two runs "
                        "were appended to one file; readings keep their own stamps, check the timeline around this line "
                        "(or pass --tz with the zone the log was written in)")
    else:
        messages.extend(_gpu_presence(timed, path))
    for m in messages[:_MAX_MESSAGES_PER_INPUT]:
        info.problems.append(m)
        info.notes.append(m.split(": ", 1)[1])


_STEP_KEY = ["host", "gpu", "pid", "series", "step"]


def _once_per_step(results: list[Parsed], info: InputInfo) -> None:
    """Readings of one series of one process at one step that two parsers of the same file read (a loop
    that prints a step marker and memory_stats() at the end of a step: both are the allocator's one
    counter) are one reading printed twice: the copy on the earlier line is kept, the other parsers'
    copies are dropped (and said in a note), so the series is neither counted twice at that step nor
    split into twins. Readings without a step are left alone: nothing says when they were taken."""
    stepped = [(i, p.samples) for i, p in enumerate(results)
               if p.samples is not None and p.samples.height and p.samples["step"].null_count() < p.samples.height]
    if len(stepped) < 2:   # (the usual case: one parser's readings per file) nothing to compare, no query
        return
    parts = [conform(s, SAMPLES_SCHEMA).select(*_STEP_KEY, "line")
             .with_columns(pl.lit(i).alias("_p"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_r"))
             for i, s in stepped]
    rows = pl.concat(parts).filter(pl.col("step").is_not_null())
    shared = rows.group_by(_STEP_KEY).agg(pl.col("_p").n_unique().alias("_n")).filter(pl.col("_n") > 1)
    if not shared.height:
        return
    rows = rows.join(shared.select(_STEP_KEY), on=_STEP_KEY, nulls_equal=True)
    first = rows.sort("line").group_by(_STEP_KEY).agg(pl.col("_p").first().alias("_keep"))
    drop = rows.join(first, on=_STEP_KEY, nulls_equal=True).filter(pl.col("_p") != pl.col("_keep"))
    for (i,), gone in partitions(drop, "_p").items():
        p = results[i]
        p.samples = (conform(p.samples, SAMPLES_SCHEMA).with_row_index("_r")
                     .filter(~pl.col("_r").cast(pl.Int64).is_in(gone["_r"].implode())).drop("_r"))
    series = ", ".join(sorted(drop["series"].unique().to_list()))
    info.notes.append(f"{drop.height} readings ({series}) printed twice at the same step, by two formats "
                      "of this file, are kept once (the one on the earlier line)")


def _gpu_presence(timed: pl.DataFrame, path: str) -> list[str]:
    """GPUs of an nvidia-smi log that vanish, come back or appear late while the others go on."""
    per_gpu = rows_where(timed, (pl.col("series") == "memory.used") & pl.col("gpu").is_not_null())
    if per_gpu["gpu"].n_unique() < 2:
        return []
    secs = pl.col("time").dt.epoch("us") / 1e6
    stats = (per_gpu.sort("line").with_columns(secs.alias("_t"))
             .with_columns(pl.col("_t").diff().over("gpu").alias("_gap"))
             .group_by("gpu", maintain_order=True)
             .agg(pl.col("_t").min().alias("first"), pl.col("_t").max().alias("last"),
                  pl.col("line").first().alias("first_line"), pl.col("line").last().alias("last_line"),
                  pl.col("_gap").median().alias("step"), pl.col("_gap").max().alias("gap"),
                  pl.col("line").sort_by(pl.col("_gap").fill_null(-1.0)).last().alias("gap_line")))
    start, end = stats["first"].min(), stats["last"].max()
    steps = [x for x in stats["step"].to_list() if x is not None and x > 0]
    if not steps:
        return []
    tolerance = max(5 * sorted(steps)[len(steps) // 2], 5.0)
    out = []
    for r in stats.iter_rows(named=True):
        gpu = r["gpu"]
        if r["first"] - start > tolerance:
            out.append(f"{path}:{r['first_line']}: GPU {gpu} first appears {_duration(r['first'] - start)} after the log "
                       "starts, it became visible late (a reset, a MIG change, or another nvidia-smi run appended); "
                       "its readings are analyzed from here")
        if r["gap"] is not None and r["gap"] > tolerance:
            out.append(f"{path}:{r['gap_line']}: GPU {gpu} has no readings for {_duration(r['gap'])} before this line "
                       "while the other GPUs go on, nvidia-smi lost it (fallen off the bus, a reset, a driver error); "
                       "look for Xid lines in kern.log around then")
        if end - r["last"] > tolerance:
            out.append(f"{path}:{r['last_line']}: GPU {gpu} has no readings after this line, {_duration(end - r['last'])} "
                       "before the log ends, nvidia-smi lost it (fallen off the bus, a reset, a driver error); "
                       "look for Xid lines in kern.log around then")
    return out


# Lines a format is expected to have besides its readings: counted and shown in the inputs table,
# but not worth a message on stderr (a looped nvidia-smi log repeats its header every sample).
EXPECTED_SKIPS = frozenset({
    "repeated header", "blank line", "GPU without process (row of -)", "not a log line (provenance, separator, shell prompt)",
    "shell prompt", "program output (not a sanitizer line)", "not part of a memory summary",
    "not part of an out-of-memory message", "not part of a memory_stats dict", "not a line about the distributed job",
})


def _skipped_message(path: str, skipped: Skipped, explained: set[str], info: InputInfo) -> None:
    """One line for the lines of a file that were skipped and that no other message explains."""
    rest = {r: n for r, n in skipped.counts.items() if r not in explained and r not in EXPECTED_SKIPS and n}
    if not rest:
        return
    first = min((ln for r in rest for ln in skipped.examples.get(r, [])), default=None)
    where = f"{path}:{first}" if first is not None else path
    total = sum(rest.values())
    reasons = "; ".join(f"{n} {r}" for r, n in sorted(rest.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
    more = f"; and {len(rest) - 4} other reasons" if len(rest) > 4 else ""
    info.problems.append(f"{where}: {total} line{'s' if total > 1 else ''} skipped, {reasons}{more}, the rest was "
                         "analyzed (the report's inputs table lists the line numbers)")


def _driver_errors(results: list[Parsed], path: str, info: InputInfo) -> bool:
    """One line per input that holds driver errors (nvidia-smi could not talk to a GPU)."""
    errs = [p.events.filter(pl.col("kind") == "driver_error") for p in results if p.events.height]
    errs = [e for e in errs if e.height]
    if not errs:
        return False
    ev = pl.concat(errs, how="vertical").sort("line")
    first = ev.row(0, named=True)
    text = " ".join((first["text"] or "").split())
    text = text if len(text) <= 200 else text[:199] + "…"
    more = f" ({ev.height} such lines)" if ev.height > 1 else ""
    where = f"GPU {first['gpu']}" if first.get("gpu") else "the GPUs"
    info.problems.append(f"{path}:{first['line']}: nvidia-smi could not read {where}{more}, it printed “{text}”, check "
                         "the GPU and driver (nvidia-smi -q; dmesg | grep -i xid); the other lines were analyzed")
    return True


def _not_read(src: Source, info: InputInfo, reason: str, skipped: Skipped) -> str:
    """A file nobody could use: all its lines are skipped, with the reason, and one line says so."""
    blank = reason == "empty file"
    if blank and src.nul_bytes:
        why, label = f"it holds only NUL bytes ({src.nul_bytes}), what a crash leaves before the log is flushed", \
            "only NUL bytes"
    elif blank:
        why = "it holds no text" if info.lines == 0 else f"its {info.lines} lines are all blank"
        label = "empty file"
    else:
        why, label = reason, f"not recognized ({reason})"
    # counts over the lines a parser would have seen, not over what the reader already dropped
    n = max(info.lines - sum(src.skipped.counts.values()), 0)
    skipped.add(label, None, n)
    todo = ("check that the job really wrote this log (a killed job may not flush it); the rest is analyzed"
            # (not "run sniff": sniff would only repeat the reason this line already gives)
            if blank else "it was skipped; `gpu-forensics sniff PATH` shows what each parser looked for, and the "
            "README's \"Adding a log format\" says how to teach the tool a new one")
    from forensics.record import is_own_output

    if not is_own_output(src.path):   # the job's own output, as `record` captured it: not a log to report
        info.problems.append(str(InputError(src.path, "empty file" if blank else "not recognized", why, todo)))
    return label


ProgressFn = Callable[[str], None]


def _one_line(msg: str, limit: int = 1000) -> str:
    """A message as one line: a path or a log excerpt inside it may hold newlines."""
    msg = _WS.sub(" ", msg).strip()
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def load(paths: list[str], opts: Options, progress: ProgressFn | None = None) -> Bundle:
    """Read everything under `paths` into one Bundle. No file can stop the others: an unreadable one
    becomes a one-line problem and an input row with `error`; a parser crash too (saying so)."""
    found = discover(paths, within=opts.read_within, skip=opts.never_read)
    bundle = Bundle()
    for err in found.problems:
        msg = _one_line(str(err))
        bundle.problems.append(msg)
        bundle.inputs.append(InputInfo(path=err.path, error=msg))
    bundle.problems.extend(_one_line(outside_note(shown, target)) for shown, target in found.outside)
    sample_parts, event_parts = _Parts(), _Parts()

    def read(shown: str, open_src: Callable[[], Source]) -> None:
        if progress:
            progress(shown)
        src = None
        try:
            src = open_src()
            info, results = parse_one(src, opts)
        except InputError as e:
            _failed(bundle, shown, str(e))
            return
        except MemoryError:
            size = f"{src.size / 2**30:.1f} GiB" if src is not None else "its size"
            _failed(bundle, shown, f"{shown}: out of memory while reading it, the file ({size}) does not fit in this "
                    "machine's memory, split it (split -l) or run on a machine with more memory")
            return
        except RecursionError as e:
            _failed(bundle, shown, f"{shown}: internal error while parsing, RecursionError: {e}, "
                    "please report it with this file attached")
            return
        except Exception as e:  # a parser bug must not cost the other files
            _failed(bundle, shown, f"{shown}: internal error while parsing, {type(e).__name__}: {e}, "
                    "please report it with this file attached")
            return
        finally:
            if src is not None:
                src.release()
        info.problems = [_one_line(m) for m in info.problems]
        bundle.problems.extend(info.problems)
        bundle.inputs.append(info)
        for p in results:
            if p.samples.height:
                sample_parts.append(_tag(p.samples, SAMPLES_SCHEMA, shown))
            if p.events.height:
                event_parts.append(_tag(p.events, EVENTS_SCHEMA, shown))

    for real, shown in found.files:
        if archives.kind_of(real.name):
            _read_archive(bundle, archives.Archive(real, shown, opts.archive_max_members, opts.archive_max_bytes), read,
                          opts)
        else:
            read(shown, lambda: _open(real, shown, opts))
    if sample_parts.frames:
        bundle.samples = sample_parts.frame()
    if event_parts.frames:
        bundle.events = event_parts.frame()
    return bundle


class _Parts:
    """The files' frames of one table, put together as they come: a frame costs a few KB whatever its rows,
    so a folder of many small files held one per file until the end, most of what it held.
    Every FRAMES_HELD frames since the last time are made one; what is held is then at most FRAMES_HELD
    frames and one per FRAMES_HELD files, and each row is copied once more."""

    FRAMES_HELD = 512

    def __init__(self):
        self.frames: list[pl.DataFrame] = []
        self._joined = 0   # the frames before this one are each FRAMES_HELD files' frames made one

    def append(self, frame: pl.DataFrame) -> None:
        self.frames.append(frame)
        if len(self.frames) - self._joined >= self.FRAMES_HELD:
            self.frames[self._joined:] = [pl.concat(self.frames[self._joined:], how="vertical", rechunk=True)]
            self._joined += 1

    def frame(self) -> pl.DataFrame:
        return pl.concat(self.frames, how="vertical")


def _read_archive(bundle: Bundle, arch: "archives.Archive", read: Callable, opts: Options) -> None:
    """Each member of an archive read as a file of a folder would be (io/archives.py)."""
    try:
        for src in arch.sources():
            src.max_decompressed = opts.max_decompressed_bytes
            src.max_document = opts.max_document_bytes
            read(src.path, lambda s=src: s)
    except InputError as e:
        arch.problems.append(e)
    for err in arch.problems:
        _failed(bundle, err.path, str(err))


def _failed(bundle: Bundle, shown: str, msg: str) -> None:
    msg = _one_line(msg)
    bundle.problems.append(msg)
    bundle.inputs.append(InputInfo(path=shown, error=msg))


_WS = re.compile(r"\s+")


def _open(real, shown: str, opts: Options) -> Source:
    src = Source.open(real, shown)
    src.max_decompressed = opts.max_decompressed_bytes
    src.max_document = opts.max_document_bytes
    return src
