"""Detection: every memory series classified, leaks measured, events turned into findings, one verdict.

The stage is `analyze(bundle, opts)` (analyze.py). Inside: measure.py cuts each series into job
lifetimes and fits each (series.py, with robust.py, changepoints.py and patterns.py); leaks.py groups
growth per GPU; events.py turns events into findings; findings.py is the finding and its JSON.
"""
from forensics.detect.analyze import Analysis, analyze, decided
from forensics.detect.measure import DRAW_POINTS, SeriesResult

__all__ = ["DRAW_POINTS", "Analysis", "SeriesResult", "analyze", "decided"]
