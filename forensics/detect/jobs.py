"""Which events are the job's own: an OOM kill, a CUDA OOM or an Xid belongs to the job the report is
about when its time falls in the job's lifetime, or when it names the job's pid; any other is context
(an earlier job's kill in the same dmesg), never what ended this job. Rules: docs/detection.md, "Events
and their job"."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from forensics.detect.findings import Finding
from forensics.detect.thresholds import JOB_EDGE_INTERVALS, JOB_EDGE_S, JOB_START_SKEW_S
from forensics.frames import rows_where
from forensics import xid_catalog
from forensics.kinds import KINDS

EVENT_KINDS = tuple(k.name for k in KINDS.values() if k.job_event)
FATAL_KINDS = ("oom_kill", "gpu_oom")
# what ended a job when no OOM and no fatal Xid did: a kill whose cause the record does not give
KILL_KINDS = ("job_killed",)
GROWTH_KINDS = ("leak", "cache_growth")
EDGE = timedelta(seconds=JOB_EDGE_S)


@dataclass
class Job:
    start: datetime
    end: datetime
    pids: set[int] = field(default_factory=set)
    edge: timedelta = EDGE          # slack after the last reading
    before: timedelta = EDGE        # slack before the first reading


def job_of(parts: list, findings: list[Finding]) -> Job | None:
    """The job's lifetime: the lead growth finding's, else the last job lifetime of the timed memory
    series (with those overlapping it); None when no memory series has a clock."""
    gaps = [float(np.median(np.diff(p.x))) for p in parts if p.axis == "time" and p.x.size > 1]
    sampling = timedelta(seconds=JOB_EDGE_INTERVALS * max(gaps, default=0.0))
    edge, before = max(EDGE, sampling), max(timedelta(seconds=JOB_START_SKEW_S), sampling)
    growth = [f for f in findings if f.kind in GROWTH_KINDS and isinstance(f.lifetime_start, datetime)
              and isinstance(f.lifetime_end, datetime)]
    timed = [p.result for p in parts if p.result.series != "host.rss" and isinstance(p.result.first_x, datetime)
             and isinstance(p.result.last_x, datetime)]
    if growth:
        lead = max(growth, key=lambda f: (f.kind == "leak", f.growth_bytes or 0))
        start, end = lead.lifetime_start, lead.lifetime_end
    elif timed:
        # the last job the memory shows (the one whose end the logs hold), with the series beside it
        last = max(timed, key=lambda r: r.last_x)
        beside = [r for r in timed if r.first_x <= last.last_x and r.last_x >= last.first_x]
        start, end = min(r.first_x for r in beside), max(r.last_x for r in beside)
    else:
        return None
    # the job's pids: the processes whose memory series run inside its lifetime (not an earlier job's)
    pids = {r.pid for r in timed if r.pid is not None and r.first_x <= end and r.last_x >= start}
    return Job(start, end, pids, edge, before)


def tie_events(findings: list[Finding], job: Job | None) -> None:
    """Set each event finding's `job_event`: True (the job's), False (context), None (no clock to tell)."""
    if job is None:
        return
    for f in findings:
        if f.kind not in EVENT_KINDS:
            continue
        if f.pid is not None and f.pid in job.pids:
            f.job_event = True
        elif isinstance(f.start, datetime):
            f.job_event = job.start - job.before <= f.start <= job.end + job.edge
            if not f.job_event:
                when = "before" if f.start < job.start else "after"
                f.summary = f.summary[:-1] + f", {when} this job's lifetime: another process's, context, not what ended this job."
                f.severity = "info"


def xid_is_fatal(code) -> bool:
    """After this Xid (as its event detail gives the code) the job on that GPU could not go on."""
    try:
        return xid_catalog.info(None if code is None else int(code)).fatal
    except (TypeError, ValueError):
        return False


def ended_by(events: pl.DataFrame, findings: list[Finding]) -> tuple[dict | None, list[dict]]:
    """What ended the job: the first of its own OOM kills or CUDA OOMs (else a fatal Xid, else a kill by
    a signal), as its events row with `count`, how many such events of its own there were; and the other
    processes' such events (`tie_events` said so: context, never the cause), each a row."""
    others = {(e.path, e.line) for f in findings if f.job_event is False for e in f.evidence[:1]}
    cand = rows_where(events, pl.col("kind").is_in(list(FATAL_KINDS))).with_row_index("_i")
    if cand.is_empty():
        xids = rows_where(events, pl.col("kind") == "xid")
        # a few rows: the table's rule read per code (no code is a GPU fallen off the bus)
        fatal = pl.Series([xid_is_fatal(c) for c in xids["detail"].str.json_path_match("$.code")], dtype=pl.Boolean)
        cand = xids.filter(fatal).with_row_index("_i")
    if cand.is_empty():
        cand = rows_where(events, pl.col("kind").is_in(list(KILL_KINDS))).with_row_index("_i")
    rows = [{k: v for k, v in e.items() if k != "_i"} for e in cand.sort(["time", "_i"], nulls_last=True).to_dicts()]
    own = [e for e in rows if (e["source"], e["line"] or 0) not in others]
    context = [e for e in rows if (e["source"], e["line"] or 0) in others]
    return ({**own[0], "count": len(own)} if own else None), context
