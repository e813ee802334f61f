"""The pipeline: ingest -> timeline -> detect. Report rendering is separate (report.py)."""
from __future__ import annotations

from . import detect, ingest, timeline
from .options import Options


def run(paths: list[str], opts: Options, progress: ingest.ProgressFn | None = None):
    """Read, align and analyze everything under `paths`. Returns (bundle, analysis)."""
    bundle = ingest.load(paths, opts, progress=progress)
    bundle = timeline.align(bundle, opts)
    # one finding per kernel event, not one per view of the ring buffer (dmesg, dmesg -T, kern.log)
    bundle.events = timeline.merge_twin_events(bundle.events)
    bundle.samples = timeline.merge_twin_samples(bundle.samples)
    analysis = detect.analyze(bundle, opts)
    return bundle, analysis
