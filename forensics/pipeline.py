"""The pipeline: ingest -> timeline -> detect, one path for `report`, `timeline` and `scan`.
Report rendering is separate (forensics/report)."""
from __future__ import annotations

import time
from typing import Callable

import polars as pl

from forensics import detect
from forensics.detect.measure import label_plan
from forensics import ingest
from forensics import timeline
from forensics.options import Options

# told what each stage did and how long it took (`-v`): stage name, seconds, one line of what it did
StageFn = Callable[[str, float, str], None]


def load(paths: list[str], opts: Options, progress: ingest.ProgressFn | None = None,
         stage: StageFn | None = None):
    """Read everything under `paths` and put it on one timeline, each kernel event and reading once."""
    t0 = time.perf_counter()
    bundle = ingest.load(paths, opts, progress=progress)
    t1 = time.perf_counter()
    if stage:
        read = sum(1 for i in bundle.inputs if i.format)
        stage("read", t1 - t0, f"{len(bundle.inputs)} files, {read} recognized, "
                               f"{bundle.samples.height:,} readings, {bundle.events.height:,} events")
    bundle = place(bundle, opts)
    if stage:
        clocked = sum(1 for i in bundle.inputs if i.format and i.start is not None)
        stage("align", time.perf_counter() - t1, f"{clocked} files on the clock, {bundle.samples.height:,} "
                                                 f"readings and {bundle.events.height:,} events after merging copies")
    return bundle


def place(bundle, opts: Options):
    """What was read, put on one timeline, each kernel event and reading once, within the series budget."""
    bundle = timeline.align(bundle, opts)
    # One finding per kernel event, not one per copy: rotated files overlap (copytruncate) and a
    # dmesg dump repeats kern.log (same uptime); dmesg, dmesg -T and --time-format iso are three views
    # of one ring buffer (same instant once aligned). After alignment, so the copies could anchor clocks.
    bundle.events = timeline.in_reading_order(timeline.merge_twin_events(timeline.dedupe_events(bundle.events)))
    bundle.samples = timeline.merge_twin_samples(timeline.dedupe_samples(bundle.samples))
    _series_budget(bundle, opts)
    return bundle


SERIES_KEY = ["source", "host", "gpu", "pid", "series", "label"]


def _series_budget(bundle, opts: Options) -> None:
    """At most opts.max_series memory series go on to detection: those that grow most (highest minus
    lowest reading); a problem line names the limit and the option that raises it."""
    # a series as detection keys it: a label that changes with nearly every sample names none; counted
    # without grouping the rows by series, which costs memory per row (millions of step lines)
    labels, series = label_plan(bundle.samples)
    if series <= opts.max_series:
        return
    keyed = bundle.samples.select(*SERIES_KEY[:-1], "bytes").with_columns(labels)
    per = keyed.group_by(SERIES_KEY).agg((pl.col("bytes").max() - pl.col("bytes").min()).alias("growth"))
    # (equal growers in the order of their keys: group_by's order differs from run to run, and 100,000
    # one-reading files kept another 5,000 of them each time)
    keep = (per.sort(["growth", *SERIES_KEY], descending=[True] + [False] * len(SERIES_KEY), nulls_last=True)
            .head(opts.max_series).drop("growth"))
    before = bundle.samples.height
    kept = keyed.select(SERIES_KEY).join(keep.with_columns(pl.lit(True).alias("_keep")), on=SERIES_KEY, how="left",
                                         nulls_equal=True, maintain_order="left")["_keep"].fill_null(False)
    bundle.samples = bundle.samples.filter(kept)
    bundle.problems.append(
        f"{per.height} memory series, more than the limit of {opts.max_series} (--max-series): the {opts.max_series} "
        f"that grow most were analyzed, the other {per.height - opts.max_series} ({before - bundle.samples.height} "
        f"readings) were left out; pass --max-series {per.height} to analyze all")


def run(paths: list[str], opts: Options, progress: ingest.ProgressFn | None = None,
        stage: StageFn | None = None):
    """Read, align and analyze everything under `paths`. Returns (bundle, analysis)."""
    bundle = load(paths, opts, progress=progress, stage=stage)
    t0 = time.perf_counter()
    analysis = detect.analyze(bundle, opts)
    if stage:
        stage("detect", time.perf_counter() - t0, f"verdict {analysis.verdict}, {len(analysis.findings)} findings")
    return bundle, analysis
