"""One timeline from clocks that disagree: `align(bundle, opts)` (align.py, which says how, step by step)."""
from forensics.timeline.align import align
from forensics.timeline.gpus import gpu_key, unify_gpus
from forensics.timeline.merge import (dedupe_events, dedupe_samples, in_reading_order, merge_twin_events,
                                      merge_twin_samples)
from forensics.timeline.untimed import match_curve
from forensics.timeline.uptime import message_key
from forensics.timeline.write import aligned_targets, write_aligned

__all__ = ["align", "aligned_targets", "dedupe_events", "dedupe_samples", "gpu_key", "in_reading_order", "match_curve",
           "merge_twin_events", "merge_twin_samples", "message_key", "unify_gpus", "write_aligned"]
