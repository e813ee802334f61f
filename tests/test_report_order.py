"""A report is a function of its inputs: events tied at one instant (two ranks' processes gone from one
compute-apps sample, ranks exiting in one second) come in one stated order, whatever the order in which
the rows arrive: the timeline puts events in reading order (timeline.in_reading_order: file, line, pid,
kind) and the report shows them in detect.events.EVENT_ORDER (time, source, line, pid, kind)."""
from __future__ import annotations

import os

import polars as pl
import pytest

from forensics import detect, pipeline, report, timeline
from forensics.detect.events import event_findings
from conftest import ROOT, SAMPLE_LOGS
from test_report_cases import opts


def _run(name: str):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return pipeline.run([str((SAMPLE_LOGS / name).relative_to(ROOT))], opts("Etc/UTC"))
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def gloo():
    return _run("ddp_gloo_both_leak")


def _context(bundle, analysis) -> dict:
    ctx = report.build_context(bundle, analysis, opts("Etc/UTC"))
    ctx["generated_at"] = None
    return ctx


def _permuted(bundle, events: pl.DataFrame):
    return type(bundle)(**{**vars(bundle), "events": events})


@pytest.mark.parametrize("name", ["ddp_gloo_both_leak", "ddp_gloo_rank1_leak"])
def test_two_runs_give_the_same_html_and_summary(name):
    """The two recordings whose reports once varied from run to run (polars' thread pool at its default)."""
    outs = []
    for _ in range(2):
        bundle, analysis = _run(name)
        outs.append((report.render_html(_context(bundle, analysis)), report.summary(bundle, analysis)))
    assert outs[0] == outs[1]


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


def _each_file_backwards(events: pl.DataFrame) -> pl.DataFrame:
    """The rows of each file in reverse, the files in their order: what a reader's query that keeps no
    order (a group_by, a join) may hand on."""
    first = {s: i for i, s in enumerate(events["source"].unique(maintain_order=True).to_list())}
    return (events.with_row_index("_r")
            .with_columns(pl.col("source").replace_strict(first, return_dtype=pl.Int64).alias("_s"))
            .sort(["_s", "_r"], descending=[False, True]).drop("_s", "_r"))


def test_findings_do_not_depend_on_the_order_the_readers_leave_rows_in(gloo):
    bundle, analysis = gloo
    moved = _each_file_backwards(bundle.events)
    assert not moved.equals(bundle.events)
    again = _permuted(bundle, timeline.in_reading_order(moved))
    assert again.events.equals(bundle.events)
    assert _context(again, detect.analyze(again, opts("Etc/UTC"))) == _context(bundle, analysis)
