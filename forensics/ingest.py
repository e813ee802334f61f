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


def parse_one(src: Source, opts: Options) -> tuple[InputInfo, list[Parsed]]:
    """Claim and parse one source. Raises InputError for an unreadable file."""
    info = InputInfo(path=src.path, compression=src.compression)
    head = src.head()
    info.wrapper = src.wrapper.describe() if src.wrapper else None
    module, reason = parsers.claim(head)
    info.reason = reason
    results: list[Parsed] = []
    if module is not None:
        info.format = module.NAME
        primary = module.parse(src, opts)
        results.append(primary)
        covered = {module.NAME, *getattr(module, "COVERS", ())}
        results.extend(_scan_free_text(src, opts, covered))
        info.clock = primary.clock
        info.notes.extend(primary.notes)
        info.meta.update(primary.meta)
        info.skipped = primary.skipped.total
        info.skip_reasons = dict(primary.skipped.counts)
        info.skip_examples = dict(primary.skipped.examples)
    elif reason != "empty file":
        found = _scan_free_text(src, opts, set())
        if found:
            kinds = sorted({k for p in found for k in p.events["kind"].unique().to_list()})
            if any(p.samples.height for p in found):
                kinds.append("memory reading")
            info.format = "text"
            info.reason = "free text with " + ", ".join(kinds) + " lines"
            info.clock = found[0].clock
            results.extend(found)
    info.lines = src.line_count if (module is not None or results) else len(head)
    info.records = sum(p.records for p in results)
    if src.decode_errors:
        info.notes.append(f"{src.decode_errors} bytes were not valid UTF-8 and were replaced")
    return info, results


ProgressFn = Callable[[str], None]


def load(paths: list[str], opts: Options, progress: ProgressFn | None = None) -> Bundle:
    """Read everything under `paths` into one Bundle."""
    found = discover(paths)
    bundle = Bundle()
    for err in found.problems:
        bundle.problems.append(str(err))
        bundle.inputs.append(InputInfo(path=err.path, error=str(err)))
    sample_parts, event_parts = [], []
    for real, shown in found.files:
        if progress:
            progress(shown)
        try:
            src = Source.open(real, shown)
            info, results = parse_one(src, opts)
        except InputError as e:
            bundle.problems.append(str(e))
            bundle.inputs.append(InputInfo(path=shown, error=str(e)))
            continue
        except Exception as e:  # a parser bug must not cost the other files
            msg = (f"{shown}: internal error while parsing, {type(e).__name__}: {e}, "
                   "please report it with this file attached")
            bundle.problems.append(msg)
            bundle.inputs.append(InputInfo(path=shown, error=msg))
            continue
        finally:
            pass
        if info.format is None:
            info.error = None
        bundle.inputs.append(info)
        for p in results:
            if p.samples.height:
                sample_parts.append(_tag(p.samples, SAMPLES_SCHEMA, shown))
            if p.events.height:
                event_parts.append(_tag(p.events, EVENTS_SCHEMA, shown))
        src.release()
    if sample_parts:
        bundle.samples = pl.concat(sample_parts, how="vertical")
    if event_parts:
        bundle.events = pl.concat(event_parts, how="vertical")
    return bundle


def skipped_summary(skipped: Skipped) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.counts.items(), key=lambda kv: -kv[1]))


_WS = re.compile(r"\s+")
