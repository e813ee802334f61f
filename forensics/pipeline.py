"""The pipeline: ingest -> timeline -> detect. Report rendering is separate (report.py)."""
from __future__ import annotations

from . import detect, ingest, timeline
from .parsers import kernel
from .options import Options


def run(paths: list[str], opts: Options, progress: ingest.ProgressFn | None = None):
    """Read, align and analyze everything under `paths`. Returns (bundle, analysis)."""
    bundle = place(ingest.load(paths, opts, progress=progress), opts)
    return bundle, detect.analyze(bundle, opts)


def place(bundle, opts: Options):
    """The bundle on one timeline, each kernel event and reading once."""
    bundle = timeline.align(bundle, opts)
    # One finding per kernel event, not one per copy: rotated files overlap (copytruncate) and a
    # dmesg dump repeats kern.log (same uptime); dmesg, dmesg -T and --time-format iso are three views
    # of one ring buffer (same instant once aligned). After alignment, so the copies could anchor clocks.
    bundle.events = timeline.merge_twin_events(kernel.dedupe_events(bundle.events))
    bundle.samples = timeline.merge_twin_samples(kernel.dedupe_samples(bundle.samples))
    return bundle
