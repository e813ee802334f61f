"""Which events are the job's own: an OOM kill, a CUDA OOM or an Xid belongs to the job the report is
about when its time falls in the job's lifetime, or when it names the job's pid; any other is context
(an earlier job's kill in the same dmesg), never what ended this job. Rules: docs/detection.md, "Events
and their job"."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from forensics.detect.findings import Finding

EVENT_KINDS = ("oom_kill", "gpu_oom", "xid")
GROWTH_KINDS = ("leak", "cache_growth")
# an event this close to the job's first or last reading is at its edge: a kill comes before the reading
# that shows the memory released, up to a sampling interval later (two, for jitter), at least 10 s
EDGE = timedelta(seconds=10)
EDGE_INTERVALS = 2


@dataclass
class Job:
    start: datetime
    end: datetime
    pids: set[int] = field(default_factory=set)
    edge: timedelta = EDGE


def job_of(parts: list, findings: list[Finding]) -> Job | None:
    """The job's lifetime: the lead growth finding's, else the last job lifetime of the timed memory
    series (with those overlapping it); None when no memory series has a clock."""
    gaps = [float(np.median(np.diff(p.x))) for p in parts if p.axis == "time" and p.x.size > 1]
    edge = max(EDGE, timedelta(seconds=EDGE_INTERVALS * max(gaps, default=0.0)))
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
    return Job(start, end, pids, edge)


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
            f.job_event = job.start - job.edge <= f.start <= job.end + job.edge
            if not f.job_event:
                when = "before" if f.start < job.start else "after"
                f.summary = f.summary[:-1] + f", {when} this job's lifetime: another process's, context, not what ended this job."
                f.severity = "info"
