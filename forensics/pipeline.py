"""The pipeline: ingest -> timeline -> detect. Report rendering is separate (report.py)."""
from __future__ import annotations

from . import detect, detect_series, ingest, timeline
from .parsers import kernel
from .options import Options


# Formats whose readings are memory series that detection searches for change points: once a file of
# one is claimed, ruptures (scipy: ~1.5 s) is imported in a thread while the files are read.
SERIES_FORMATS = {"nvidia-smi-csv", "nvidia-smi-dmon", "nvidia-smi-q", "nvidia-smi-apps", "step-markers",
                  "deepspeed-memory", "megatron-memory", "hf-trainer-memory"}
# ... unless the file is this big (decompressed size estimated at 5x): reading it keeps both cores busy,
# and the import only competes with it (a month of CSV: ~1 s slower than importing after reading; a day
# of it, 77 MB: 0.6 s faster with the import alongside). Then it starts once the files are read, alongside
# the timeline and the first steps of detection (one core).
WARM_MAX_BYTES = 256 << 20


def _on_claim(fmt: str, src) -> None:
    if fmt in SERIES_FORMATS and src.size * (5 if src.compression else 1) < WARM_MAX_BYTES:
        detect_series.warm_up()


def run(paths: list[str], opts: Options, progress: ingest.ProgressFn | None = None):
    """Read, align and analyze everything under `paths`. Returns (bundle, analysis)."""
    bundle = ingest.load(paths, opts, progress=progress, on_claim=_on_claim)
    if any(i.format in SERIES_FORMATS for i in bundle.inputs):
        detect_series.warm_up()   # a big file's (a no-op when it has started)
    bundle = timeline.align(bundle, opts)
    # One finding per kernel event, not one per copy: rotated files overlap (copytruncate) and a
    # dmesg dump repeats kern.log (same uptime); dmesg, dmesg -T and --time-format iso are three views
    # of one ring buffer (same instant once aligned). After alignment, so the copies could anchor clocks.
    bundle.events = timeline.merge_twin_events(kernel.dedupe_events(bundle.events))
    bundle.samples = timeline.merge_twin_samples(kernel.dedupe_samples(bundle.samples))
    analysis = detect.analyze(bundle, opts)
    return bundle, analysis
