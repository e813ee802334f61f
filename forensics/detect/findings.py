"""Findings, the verdict, and the JSON summary (a public interface: keep its fields' meaning stable)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

from forensics.kinds import KINDS, SEVERITY_RANK, iso
from forensics.kinds import json_int as _int, json_num as _num, json_str as _str, json_when as _when

VERDICTS = ("leak", "no_leak", "cache_growth", "inconclusive")


@dataclass
class Evidence:
    path: str
    line: int
    text: str


@dataclass
class Finding:
    kind: str                       # one of forensics/kinds.py's KINDS
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
    # who and where, when the data names them (a series' host and process label, an event's)
    host: str | None = None
    process: str | None = None
    pod: str | None = None
    # a distributed job: the rank the finding is about, and for an error that followed another rank's
    # failure, that failure ({"kind", "rank", "path", "line"}: its first evidence line)
    rank: int | None = None
    consequence_of: dict | None = None
    # an allocation_leak's call path and counts, an allocation_footprint's sites (memory snapshots)
    allocation: dict | None = None
    # an event's tie to the job (detect/jobs.py): True when it falls in the job's lifetime or names its
    # pid, False when it is another process's, outside it (context, never the cause); None: no clock to tell
    job_event: bool | None = None


def _ref(x) -> dict | None:
    """A finding's `consequence_of`: the first evidence line of the failure it followed."""
    if not isinstance(x, dict):
        return None
    return {"kind": _str(x.get("kind")), "rank": _int(x.get("rank")), "path": _str(x.get("path")),
            "line": _int(x.get("line"))}


# The facts each kind of finding carries in the JSON summary beyond the common fields (forensics/kinds.py
# declares them): (field, reader of the finding's `detail`)
KIND_FACTS: dict[str, tuple[tuple[str, object], ...]] = {
    k.name: tuple((f.name, f.value) for f in k.facts) for k in KINDS.values()}
FINDING_KINDS = tuple(KINDS)


def finding_json(f: Finding) -> dict:
    d = {
        "kind": f.kind,
        "severity": f.severity,
        "summary": f.summary,
        "gpu": _str(f.gpu),
        "pid": _int(f.pid),
        "series": f.series,
        "pattern": f.pattern,
        "start": iso(f.start),
        "end": iso(f.end),
        "start_index": _int(f.start_index),
        "rate_bytes_per_hour": _num(f.rate_bytes_per_hour),
        "rate_bytes_per_step": _num(f.rate_bytes_per_step),
        "growth_bytes": _int(f.growth_bytes),
        "bytes": _int(f.bytes),
        "evidence": [asdict(e) for e in f.evidence],
        # added fields
        "confidence": _num(f.confidence),
        "exhaust_at": iso(f.exhaust_at),
        "causes": list(f.causes),
        "checks": list(f.checks),
        "related": list(f.related),
        "lifetime_start": _when(f.lifetime_start),
        "lifetime_end": _when(f.lifetime_end),
        "lifetime_ended": f.lifetime_ended,
        "stairs": _int(f.stairs),
        "stair_period_seconds": _num(f.stair_period_seconds),
        "stair_period_steps": _num(f.stair_period_steps),
        "exhaust_in_hours": _num(f.exhaust_in_hours),
        "source": f.source,
        "host": _str(f.host),
        "process": _str(f.process),
        "pod": _str(f.pod),
        "rank": _int(f.rank),
        "consequence_of": _ref(f.consequence_of),
        "allocation": f.allocation,
        "job_event": f.job_event,
    }
    if f.kind in KINDS:
        d.update(KINDS[f.kind].json_facts(f.detail or {}))
    return d


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
                "skip_examples": {k: list(v) for k, v in (i.skip_examples or {}).items()},
                "reason": i.reason or None,
                "compression": i.compression,
                "wrapper": i.wrapper,
                "notes": list(i.notes or []),
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
