"""The verdict banner (what the report says first, with its key numbers) and the `--fail-on` rule."""
from __future__ import annotations

from datetime import datetime

from forensics.detect.findings import SEVERITY_RANK
from forensics.report.charts import finding_on_chart
from forensics.report.events import RAN_OUT, event_label
from forensics.report.formatting import Clock, clip, duration, epoch, growth_span, lookup, per_unit
from forensics.units import human, rate_text

VERDICT_LABELS = {
    "leak": "Memory leak",
    "cache_growth": "Allocator cache growth, not a leak",
    "no_leak": "No leak found",
    "inconclusive": "Inconclusive",
}


def _same_text(a: str | None, b: str | None) -> bool:
    """The detector's verdict reason often is the lead finding's sentence (plus a count): say it once."""
    if not a or not b:
        return False
    a, b = a.strip().rstrip("."), b.strip().rstrip(".")
    return a in b or b in a


def _chart_for(f, charts: list) -> dict | None:
    """The chart that shows a finding best: the one drawing its own series, else its GPU, else its process."""
    if f is None:
        return None

    def draws(c):
        return any(s["series"] == f.series for s in c["series"])

    for pred in (
        lambda c: finding_on_chart(f, c) and draws(c) and (c["kind"] != "process" or f.series == "process.used"),
        lambda c: f.gpu is not None and c["kind"] == "gpu" and c["gpu"] == f.gpu,
        lambda c: finding_on_chart(f, c),
        lambda c: draws(c),
    ):
        for c in charts:
            if pred(c):
                return c
    return None


def _event_ctx(e: dict, clock: Clock, count: int) -> dict:
    return {"label": event_label(e), "when": clock.when(e["time"]), "x": epoch(e["time"]),
            "path": e["source"], "line": e["line"], "text": clip(e["text"]), "kind": e["kind"], "count": count}


def verdict_ctx(analysis, charts: list, clock: Clock, empty: bool) -> tuple[dict, dict | None]:
    code = lookup(analysis, "verdict", default="inconclusive") or "inconclusive"
    label = VERDICT_LABELS.get(code, str(code))
    top = lookup(analysis, "top_finding", default=None)
    # the banner's numbers (onset, rate, exhaustion) are a growth finding's
    top_growth = top if top is not None and top.kind in ("leak", "cache_growth") else None
    chart = _chart_for(top_growth, charts) or (charts[0] if charts else None)
    numbers = []
    primary = None
    if top_growth is not None:
        start = clock.when(top_growth.start)
        if start:
            numbers.append({"label": "Onset", "value": start["local"], "sub": None if clock.is_utc else start["utc"]})
        elif top_growth.start_index is not None:
            numbers.append({"label": "Onset", "value": f"step/sample {top_growth.start_index}", "sub": "no clock in this log"})
        rate = rate_text(top_growth.rate_bytes_per_hour, growth_span(top_growth))
        per_step = per_unit(top_growth.rate_bytes_per_step, "step")
        # no clock and no step number: per reading is what is known
        per_sample = per_unit((top_growth.detail or {}).get("rate_bytes_per_sample"), "sample")
        if rate or per_step or per_sample:
            numbers.append({"label": "Growth rate", "value": rate or per_step or per_sample,
                            "sub": per_step if rate else None})
    if chart is not None:
        main = max(chart["series"], key=lambda s: s["peak"] or 0) if chart["series"] else None
        if main is not None:
            sub = chart["title"]
            if chart["capacity"]:
                sub = f"of {human(chart['capacity'])} ({main['peak'] / chart['capacity']:.0%}), {chart['title']}"
            numbers.append({"label": "Peak", "value": human(main["peak"]), "sub": sub})
    ended = lookup(analysis, "ended_by", default=None)
    fatal = _event_ctx(ended, clock, ended["count"]) if ended else None
    context = [_event_ctx(e, clock, 1) for e in lookup(analysis, "context_events", default=None) or []]
    ran_out = RAN_OUT.get((top_growth.detail or {}).get("ran_out")) if top_growth is not None else None
    if ran_out is not None:
        at = clock.when(top_growth.exhaust_at)
        numbers.append({"label": "Memory", "value": f"ran out ({ran_out})", "sub": at["local"] if at else None})
    elif top_growth is not None and (top_growth.exhaust_in_hours is not None or top_growth.exhaust_at is not None):
        at = clock.when(top_growth.exhaust_at)
        # a job that ended (its memory released) did not run out: say what its pace would have done
        ended = getattr(top_growth, "lifetime_ended", None) in ("release", "restart")
        numbers.append({"label": "At this pace, full in" if ended else "Time to exhaustion",
                        "value": duration(top_growth.exhaust_in_hours) or (at["local"] if at else "—"),
                        "sub": at["local"] if at and top_growth.exhaust_in_hours is not None else None})
    elif fatal is not None and top_growth is not None:
        numbers.append({"label": "Time to exhaustion", "value": "reached",
                        "sub": fatal["when"]["local"] if fatal["when"] else "memory ran out (see below)"})
    if fatal is not None:
        numbers.append({"label": "What ended the job", "value": fatal["label"],
                        "sub": f"{fatal['path']}:{fatal['line']}" if fatal["line"] is not None else fatal["path"]})
    elif not empty:
        numbers.append({"label": "What ended the job", "value": "nothing fatal found",
                        "sub": "no OOM kill, CUDA OOM or fatal Xid of this job in these logs"})
    for c in context[:3]:
        # another process's kill outside the job's lifetime: said beside, never as the cause
        when = c["when"]["local"] if c["when"] else "at an unknown time"
        after = fatal["x"] if fatal else None
        if top_growth is not None and isinstance(top_growth.lifetime_start, datetime):
            after = epoch(top_growth.lifetime_start)
        earlier = after is not None and c["x"] is not None and c["x"] < after
        numbers.append({"label": "Earlier on this host" if earlier else "Also on this host",
                        "value": f"{c['label']}, {when} (another process, not this job)",
                        "sub": f"{c['path']}:{c['line']}" if c["line"] is not None else c["path"]})
    if chart is not None:
        onset_x = None
        if top_growth is not None:
            onset_x = epoch(top_growth.start) if chart["xkind"] == "time" else (
                float(top_growth.start_index) if top_growth.start_index is not None else None)
        if onset_x is None:
            onset_x = next((o["x"] for o in chart["onsets"]), None)
        # the end that matters: what killed the job, else where the growth stopped (memory released
        # after the job is not the story)
        end_x = None
        if chart["xkind"] == "time":
            end_x = fatal["x"] if fatal else None
            if end_x is None and top_growth is not None:
                end_x = epoch(top_growth.end)
        primary = {"chart_id": chart["id"], "onset_x": onset_x, "fatal": fatal is not None, "end_x": end_x}
    reason = lookup(analysis, "verdict_reason", default=None)
    if fatal is not None and code == "no_leak":
        label = f"No GPU memory leak found; the job was ended by {fatal['label']}"
    verdict = {"code": code, "label": label, "tone": lookup(analysis, "tone", default="neutral"),
               "reason": clip(reason, 800) if reason else None, "numbers": numbers,
               "top_finding": clip(top.summary, 600) if top is not None and not _same_text(top.summary, reason) else None,
               "fatal": fatal, "context_events": context}
    return verdict, primary



# The one vocabulary of "how bad", for `--fail-on` (exit 1) and `scan --reports` (write the job's report)
# alike: a level is reached by what it names (`scan --reports none` is `never`).
LEVELS = ("never", "leak", "oom", "critical", "warning", "any")
_ALIASES = {"none": "never"}


def reaches(level: str, verdict: str | None, kinds, severities) -> bool:
    """Does a result with this verdict and these findings' kinds and severities reach `level`? `leak`: a
    leak verdict or finding (an OOM alone is not a leak: that is `oom`); `oom`: an OOM kill or a CUDA OOM;
    `critical`, `warning`: a finding of that severity or worse; `any`: any finding, info included."""
    level = _ALIASES.get(level, level)
    kinds = set(kinds)
    if level == "never":
        return False
    if level == "leak":
        return verdict == "leak" or "leak" in kinds
    if level == "oom":
        return bool(kinds & {"oom_kill", "gpu_oom"})
    floor = SEVERITY_RANK["info" if level == "any" else level]
    return any(SEVERITY_RANK.get(s or "", 0) >= floor for s in severities)
