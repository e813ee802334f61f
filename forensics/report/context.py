"""The report's context: everything the HTML and Markdown show, built from the bundle and the analysis.

`build_context` does all the work of choosing, downsampling and formatting into a ReportContext (its
sections are sections.py's dataclasses); it returns that as str/int/float/bool/list/dict/None, so it can
be compared with a golden file. The renderers (html, markdown) only lay that data out.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, fields, is_dataclass
from datetime import datetime, timezone

from forensics.detect.findings import SEVERITY_RANK, iso
from forensics.report.charts import build_charts, zoom_panels
from forensics.report.formatting import Clock, clip, lookup
from forensics.report.limits import MAX_FINDINGS, MAX_INPUT_ROWS, MAX_PROBLEMS
from forensics.report.sections import (AllocationsView, EventsView, EventTable, FindingView, InputsView,
                                       SanitizerView, XidTable, allocations_ctx, events_ctx, finding_ctx,
                                       gpu_ooms_ctx, inputs_ctx, oom_kills_ctx, sanitizer_ctx, xids_ctx)
from forensics.report.summary import embedded_summary
from forensics.report.verdict import verdict_ctx
from forensics.version import __version__


@dataclass
class ReportContext:
    """What the HTML and Markdown show; each section as forensics/report/sections.py's view of it."""
    tool: str
    version: str
    generated_at: str
    title: str
    zone: dict                  # name, is_utc, from_user, offset
    clock_notes: list[str]
    empty: bool                 # no readings and no events
    empty_reasons: list[str]
    verdict: dict               # verdict.py
    counts: dict                # inputs, samples, events, findings, series
    charts: list[dict]          # charts.py
    charts_omitted: list
    zooms: list[dict]
    findings: list[FindingView]     # most severe first, capped
    findings_omitted: list[dict]    # kind, severity, count
    sanitizer: SanitizerView | None
    allocations: AllocationsView | None
    oom_kills: EventTable           # of OomKillRow
    gpu_ooms: EventTable            # of GpuOomRow
    xids: XidTable
    events: EventsView
    inputs: InputsView
    problems: list[str]
    problems_omitted: int
    summary: dict               # the embedded JSON summary


def build_context(bundle, analysis, opts) -> dict:
    """Everything the HTML and Markdown show, as plain data."""
    zone = getattr(opts, "tz", None) or "UTC"
    clock = Clock(zone)
    samples, events = bundle.samples, bundle.events
    empty = samples.is_empty() and events.is_empty()
    charts, omitted, raw = build_charts(bundle, analysis, clock)
    verdict, primary = verdict_ctx(analysis, charts, clock, empty)
    zooms = zoom_panels(primary, charts, raw, clock, analysis)
    findings = list(lookup(analysis, "findings", default=None) or [])
    order = sorted(range(len(findings)), key=lambda i: (-SEVERITY_RANK.get(findings[i].severity, 0), i))
    shown = [findings[i] for i in order[:MAX_FINDINGS]]
    rest = Counter((findings[i].kind, findings[i].severity) for i in order[MAX_FINDINGS:])
    inputs = inputs_ctx(bundle.inputs, clock)
    untimed_series = sum(1 for c in charts if c["xkind"] != "time")
    now = datetime.now(timezone.utc)
    # the zone's offset when the data starts (not today's, which may differ by DST)
    starts = [t for t in (samples["time"].min() if samples.height else None,
                          events["time"].min() if events.height else None) if t is not None]
    data_start = min(starts) if starts else None
    clock_notes = [
        f"Times are shown in {clock.name}"
        + (f" ({clock.offset(data_start)} when the data starts)" if data_start and not clock.is_utc else "")
        + ("" if clock.is_utc else " and in UTC")
        + (", the zone you gave with --tz." if getattr(opts, "tz_from_user", False)
           else ", this machine's zone; logs without a zone were read in it too (change with --tz)."),
        "Sizes printed as MB/GB in logs are read as MiB/GiB (2^20/2^30 bytes), as nvidia-smi, DeepSpeed, "
        "Megatron and the HF Trainer mean them; a print() that meant 10^6 is off by at most 7.4%.",
    ]
    if untimed_series:
        clock_notes.append(f"{untimed_series} chart(s) come from logs without a clock and are drawn by step or "
                           "sample number; events cannot be placed on them.")
    clock_notes.extend(clip(f"{i.path}: clock {i.clock}, {i.anchor}", 300)
                       for i in bundle.inputs if i.anchor and i.clock not in ("wall", "none"))
    empty_reasons = []
    if empty:
        if not bundle.inputs:
            empty_reasons.append("No input files were given or found.")
        for i in bundle.inputs[:MAX_INPUT_ROWS]:
            if i.error:
                empty_reasons.append(clip(i.error, 400))
            elif not i.format:
                empty_reasons.append(clip(f"{i.path}: {i.reason or 'not recognized'}", 400))
            else:
                empty_reasons.append(clip(f"{i.path}: read as {i.format}, but no memory readings or events "
                                           f"were found ({i.skipped} lines skipped)", 400))
    ctx = ReportContext(
        tool="gpu-forensics",
        version=__version__,
        generated_at=iso(now.replace(microsecond=0)),
        title=f"GPU memory report: {verdict['label']}" if not empty else "GPU memory report: nothing readable",
        zone={"name": clock.name, "is_utc": clock.is_utc, "from_user": bool(getattr(opts, "tz_from_user", False)),
              "offset": clock.offset(data_start) if data_start else None},
        clock_notes=clock_notes,
        empty=empty,
        empty_reasons=empty_reasons,
        verdict=verdict,
        counts={"inputs": len(bundle.inputs), "samples": samples.height, "events": events.height,
                "findings": len(findings), "series": sum(len(c["series"]) for c in charts)},
        charts=charts,
        charts_omitted=omitted,
        zooms=zooms,
        findings=[finding_ctx(f, clock) for f in shown],
        findings_omitted=[{"kind": k, "severity": s, "count": n} for (k, s), n in sorted(rest.items())],
        sanitizer=sanitizer_ctx(events, findings),
        allocations=allocations_ctx(findings),
        oom_kills=oom_kills_ctx(events, clock),
        gpu_ooms=gpu_ooms_ctx(events, clock),
        xids=xids_ctx(events, clock),
        events=events_ctx(events, clock),
        inputs=inputs,
        problems=[clip(p, 600) for p in bundle.problems[:MAX_PROBLEMS]],
        problems_omitted=max(0, len(bundle.problems) - MAX_PROBLEMS),
        summary=embedded_summary(bundle, analysis),
    )
    return {f.name: _plain(getattr(ctx, f.name)) for f in fields(ctx)}


def _plain(v):
    """A section's view as plain data (the charts and the verdict are plain data already: not copied)."""
    if is_dataclass(v):
        return asdict(v)
    if isinstance(v, list):
        return [asdict(x) if is_dataclass(x) else x for x in v]
    return v
