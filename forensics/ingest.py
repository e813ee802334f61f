"""Ingest: find the files, let each be claimed by a parser, parse, and collect the two tables.

One bad file never stops the rest: its problem becomes a one-line message in `Bundle.problems` and an
`error` in its input row.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import polars as pl

from . import parsers
from .errors import InputError
from .options import Options
from .schema import EVENTS_SCHEMA, SAMPLES_SCHEMA, Parsed, Skipped, conform, empty_events, empty_samples
from .sources import Source, discover


@dataclass
class InputInfo:
    """One row of the inputs table (and of the JSON summary's `inputs`)."""
    path: str
    format: str | None = None
    reason: str = ""            # why this parser claimed it (or why none did)
    lines: int = 0
    records: int = 0
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    skip_examples: dict[str, list[int]] = field(default_factory=dict)
    start: object = None        # datetime | None, filled by the timeline
    end: object = None
    error: str | None = None
    clock: str = "none"
    anchor: str | None = None   # how the clock was placed on the timeline (timeline fills it)
    compression: str | None = None
    wrapper: str | None = None
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one-line messages about this input (also in Bundle.problems)


@dataclass
class Bundle:
    inputs: list[InputInfo] = field(default_factory=list)
    samples: pl.DataFrame = field(default_factory=empty_samples)
    events: pl.DataFrame = field(default_factory=empty_events)
    problems: list[str] = field(default_factory=list)   # one-line messages for people


def _tag(df: pl.DataFrame, schema: dict, path: str) -> pl.DataFrame:
    df = conform(df, schema)
    return df.with_columns(pl.lit(path, dtype=pl.String).alias("source"))


def _scan_free_text(src: Source, opts: Options, skip: set[str]) -> list[Parsed]:
    """Run the free-text event scanners over the lines that pass their prefilter."""
    results = []
    frame = src.frame()
    for m in parsers.SCANNERS:
        if m.NAME in skip:
            continue
        hits = frame.filter(pl.col("text").str.contains(m.SCAN_HINT))
        if hits.height:
            p = m.scan(hits, src, opts)
            if p is not None and p.records:
                results.append(p)
    return results


# A byte count outside these bounds is garbage read as a number (no GPU or host holds 2^50 bytes,
# and only the `*_delta` summary figures of HF Trainer can be negative).
MAX_PLAUSIBLE_BYTES = 1 << 50
IMPLAUSIBLE = "implausible byte count (negative or over 1 PiB), value dropped"


def _plausible(parsed: Parsed, skipped: Skipped) -> None:
    """Null byte counts no memory can have, counting them as skipped (the row itself stays)."""
    for attr, cols, schema in (("samples", ("bytes", "total_bytes"), SAMPLES_SCHEMA), ("events", ("bytes",), EVENTS_SCHEMA)):
        df = getattr(parsed, attr)
        if df is None or not df.height:
            continue
        df = conform(df, schema)
        negative_ok = pl.col("series").str.contains("delta").fill_null(False) if "series" in df.columns else pl.lit(False)
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
        if fixes:
            setattr(parsed, attr, df.with_columns(fixes))


def parse_one(src: Source, opts: Options) -> tuple[InputInfo, list[Parsed]]:
    """Claim and parse one source. Raises InputError for an unreadable file.

    Whatever happens to the file (not recognized, empty, truncated, lines too long) is counted in the
    returned InputInfo (`skip_reasons`) and said in one line in `InputInfo.problems`."""
    info = InputInfo(path=src.path, compression=src.compression)
    head = src.head()
    info.wrapper = src.wrapper.describe() if src.wrapper else None
    module, reason = parsers.claim(head)
    info.reason = reason
    results: list[Parsed] = []
    skipped = Skipped()
    if module is not None:
        info.format = module.NAME
        primary = module.parse(src, opts)
        results.append(primary)
        covered = {module.NAME, *getattr(module, "COVERS", ())}
        results.extend(_scan_free_text(src, opts, covered))
        info.clock = primary.clock
        info.notes.extend(primary.notes)
        info.meta.update(primary.meta)
        skipped.merge(primary.skipped)
    elif reason != "empty file":
        found = _scan_free_text(src, opts, set())
        if found:
            kinds = sorted({k for p in found for k in p.events["kind"].unique().to_list()})
            info.format = "text"
            info.reason = "free text with " + ", ".join(kinds) + " lines"
            info.clock = found[0].clock
            results.extend(found)
    info.lines = src.line_count
    for p in results:
        _plausible(p, skipped)
    info.records = sum(p.records for p in results)
    skipped.merge(src.skipped)
    info.problems.extend(src.problems)
    if info.format is None:
        _not_read(src, info, reason, skipped)
    info.skipped = skipped.total
    info.skip_reasons = dict(skipped.counts)
    info.skip_examples = dict(skipped.examples)
    if src.decode_errors:
        info.notes.append(f"{src.decode_errors} bytes were not valid {(src.encoding or 'utf-8').upper()} and were replaced")
    if src.nul_bytes:
        info.notes.append(f"{src.nul_bytes} NUL bytes were removed (a crash leaves them where unflushed log lines "
                          "should be)")
    return info, results


def _not_read(src: Source, info: InputInfo, reason: str, skipped: Skipped) -> None:
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
            if blank else f"if it is a log this tool should read, run `gpu-forensics sniff {src.path}` to see why "
            "not and report it with the file; it was skipped")
    info.problems.append(str(InputError(src.path, "empty file" if blank else "not recognized", why, todo)))


ProgressFn = Callable[[str], None]


def _one_line(msg: str, limit: int = 1000) -> str:
    """A message as one line: a path or a log excerpt inside it may hold newlines."""
    msg = _WS.sub(" ", msg).strip()
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def load(paths: list[str], opts: Options, progress: ProgressFn | None = None) -> Bundle:
    """Read everything under `paths` into one Bundle. No file can stop the others: an unreadable one
    becomes a one-line problem and an input row with `error`; a parser crash too (saying so)."""
    found = discover(paths)
    bundle = Bundle()
    for err in found.problems:
        msg = _one_line(str(err))
        bundle.problems.append(msg)
        bundle.inputs.append(InputInfo(path=err.path, error=msg))
    sample_parts, event_parts = [], []
    for real, shown in found.files:
        if progress:
            progress(shown)
        src = None
        try:
            src = Source.open(real, shown)
            info, results = parse_one(src, opts)
        except InputError as e:
            _failed(bundle, shown, str(e))
            continue
        except MemoryError:
            size = f"{src.size / 2**30:.1f} GiB" if src is not None else "its size"
            _failed(bundle, shown, f"{shown}: out of memory while reading it, the file ({size}) does not fit in this "
                    "machine's memory, split it (split -l) or run on a machine with more memory")
            continue
        except RecursionError as e:
            _failed(bundle, shown, f"{shown}: internal error while parsing, RecursionError: {e}, "
                    "please report it with this file attached")
            continue
        except Exception as e:  # a parser bug must not cost the other files
            _failed(bundle, shown, f"{shown}: internal error while parsing, {type(e).__name__}: {e}, "
                    "please report it with this file attached")
            continue
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
    if sample_parts:
        bundle.samples = pl.concat(sample_parts, how="vertical")
    if event_parts:
        bundle.events = pl.concat(event_parts, how="vertical")
    return bundle


def _failed(bundle: Bundle, shown: str, msg: str) -> None:
    msg = _one_line(msg)
    bundle.problems.append(msg)
    bundle.inputs.append(InputInfo(path=shown, error=msg))


def skipped_summary(skipped: Skipped) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.counts.items(), key=lambda kv: -kv[1]))


_WS = re.compile(r"\s+")
