"""Findings, the verdict, and the JSON summary (a public interface: keep its fields' meaning stable)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}
VERDICTS = ("leak", "no_leak", "cache_growth", "inconclusive")


@dataclass
class Evidence:
    path: str
    line: int
    text: str


@dataclass
class Finding:
    kind: str                       # leak, cache_growth, gpu_oom, oom_kill, residual_process, sanitizer_leak, xid, slowdown,
                                    # allocation_leak, allocation_footprint
    severity: str                   # critical | warning | info
    summary: str                    # one sentence
    gpu: str | None = None
    pid: int | None = None
    series: str | None = None
    pattern: str | None = None      # linear | step | None
    start: datetime | None = None
    end: datetime | None = None
    start_index: int | None = None  # sample or step number when there is no clock
    rate_bytes_per_hour: float | None = None
    rate_bytes_per_step: float | None = None
    growth_bytes: int | None = None
    bytes: int | None = None
    evidence: list[Evidence] = field(default_factory=list)
    # Beyond the JSON contract's base fields (added fields are allowed; none change meaning):
    confidence: float | None = None
    exhaust_at: datetime | None = None      # projected time the GPU runs out at this rate
    exhaust_in_hours: float | None = None
    causes: list[str] = field(default_factory=list)     # likely causes, most likely first
    checks: list[str] = field(default_factory=list)     # what to check
    related: list[str] = field(default_factory=list)    # links to other findings, in words
    source: str | None = None
    detail: dict = field(default_factory=dict)          # extra numbers for the report
    # the job lifetime a growth finding is about: where its memory rose off the idle GPU (or the log
    # began) and where it was released (or the log ended); datetime, or step/sample number untimed
    lifetime_start: object = None
    lifetime_end: object = None
    lifetime_ended: str | None = None   # release | log_end | restart
    stairs: int | None = None           # a staircase's stairs ...
    stair_period_seconds: float | None = None   # ... and their spacing
    stair_period_steps: float | None = None
    # an allocation_leak's call path and counts, an allocation_footprint's sites (memory snapshots)
    allocation: dict | None = None


def iso(t) -> str | None:
    """ISO-8601 UTC with Z, or None."""
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        t = t.astimezone(timezone.utc)
        s = t.isoformat(timespec="milliseconds" if t.microsecond else "seconds")
        return s.replace("+00:00", "Z")
    return str(t)


def _num(x):
    if x is None:
        return None
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return x
    return x


def finding_json(f: Finding) -> dict:
    d = {
        "kind": f.kind,
        "severity": f.severity,
        "summary": f.summary,
        "gpu": f.gpu,
        "pid": f.pid,
        "series": f.series,
        "pattern": f.pattern,
        "start": iso(f.start),
        "end": iso(f.end),
        "start_index": f.start_index,
        "rate_bytes_per_hour": _num(f.rate_bytes_per_hour),
        "rate_bytes_per_step": _num(f.rate_bytes_per_step),
        "growth_bytes": f.growth_bytes,
        "bytes": f.bytes,
        "evidence": [asdict(e) for e in f.evidence],
        # added fields
        "confidence": f.confidence,
        "exhaust_at": iso(f.exhaust_at),
        "causes": list(f.causes),
        "checks": list(f.checks),
        "related": list(f.related),
        "lifetime_start": _when(f.lifetime_start),
        "lifetime_end": _when(f.lifetime_end),
        "lifetime_ended": f.lifetime_ended,
        "stairs": f.stairs,
        "stair_period_seconds": f.stair_period_seconds,
        "stair_period_steps": f.stair_period_steps,
        "allocation": f.allocation,
    }
    return d


def _when(v):
    """A time as ISO-8601, a step or sample number as it is."""
    return iso(v) if isinstance(v, datetime) or v is None else v


def summary_json(version: str, verdict: str, inputs: list, findings: list[Finding], verdict_reason: str | None = None) -> dict:
    """The JSON summary exactly as docs/design.md fixes it (plus added fields)."""
    return {
        "tool": "gpu-forensics",
        "version": version,
        "verdict": verdict,
        "inputs": [
            {
                "path": i.path,
                "format": i.format,
                "lines": i.lines,
                "records": i.records,
                "skipped": i.skipped,
                "start": iso(i.start),
                "end": iso(i.end),
                "error": i.error,
                # added fields
                "clock": i.clock,
                "anchor": i.anchor,
                "skip_reasons": dict(i.skip_reasons),
            }
            for i in inputs
        ],
        "findings": [finding_json(f) for f in findings],
        "verdict_reason": verdict_reason,
    }


def worst_severity(findings: list[Finding]) -> str | None:
    if not findings:
        return None
    return max(findings, key=lambda f: SEVERITY_RANK.get(f.severity, 0)).severity
