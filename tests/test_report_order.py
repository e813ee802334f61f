"""A report is a function of its inputs: events tied at one instant (two ranks' processes gone from one
compute-apps sample, ranks exiting in one second) come in one stated order, whatever the order in which
the rows arrive (detect.events.EVENT_ORDER: time, source, line, pid, kind)."""
from __future__ import annotations

import os

import polars as pl
import pytest

from forensics import pipeline, report
from forensics.detect.events import event_findings
from conftest import ROOT, SAMPLE_LOGS
from test_report_cases import opts


@pytest.fixture(scope="module")
def gloo():
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return pipeline.run([str((SAMPLE_LOGS / "ddp_gloo_both_leak").relative_to(ROOT))], opts("Etc/UTC"))
    finally:
        os.chdir(cwd)


def _context(bundle, analysis) -> dict:
    ctx = report.build_context(bundle, analysis, opts("Etc/UTC"))
    ctx["generated_at"] = None
    return ctx


def _permuted(bundle, events: pl.DataFrame):
    return type(bundle)(**{**vars(bundle), "events": events})


def test_the_recording_has_ties_at_one_instant(gloo):
    bundle, _ = gloo
    gone = bundle.events.filter(pl.col("kind") == "process_gone")
    assert gone.height == 2 and gone["time"].n_unique() == 1 and gone["line"].n_unique() == 1


def test_report_does_not_depend_on_the_events_row_order(gloo):
    bundle, analysis = gloo
    assert _context(_permuted(bundle, bundle.events.reverse()), analysis) == _context(bundle, analysis)


def test_tied_events_are_ordered_by_pid_in_the_table_and_on_the_charts(gloo):
    bundle, analysis = gloo
    ctx = _context(_permuted(bundle, bundle.events.reverse()), analysis)
    gone = [r["label"] for r in ctx["events"]["rows"] if r["kind"] == "process_gone"]
    assert len(gone) == 2 and "pid 766" in gone[0] and "pid 767" in gone[1]
    merged = [m for c in ctx["charts"] for m in c["markers"] if m["kind"] == "process_gone" and m["count"] == 2]
    assert merged and all("pid 766" in m["label"] for m in merged)


def test_event_findings_do_not_depend_on_the_events_row_order(gloo):
    bundle, _ = gloo
    summaries = [[f.summary for f in event_findings(ev)]
                 for ev in (bundle.events, bundle.events.reverse())]
    assert summaries[0] and summaries[0] == summaries[1]
