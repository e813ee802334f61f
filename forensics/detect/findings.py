"""Findings, the verdict, and the JSON summary (a public interface: keep its fields' meaning stable)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
import math
from datetime import datetime, timezone

SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}
VERDICTS = ("leak", "no_leak", "cache_growth", "inconclusive")
_INT64 = 2**63    # a whole float beyond int64 is no integer fact (JSON readers take int64)


@dataclass
class Evidence:
    path: str
    line: int
    text: str


@dataclass
class Finding:
    kind: str                       # leak, cache_growth, gpu_oom, oom_kill, residual_process, sanitizer_leak, xid, slowdown,
                                    # allocation_leak, allocation_footprint, distributed_failure, collective_error,
                                    # kv_cache_leak
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
    """A number as JSON holds it (not NaN or infinite; numpy scalars as Python's)."""
    if x is None or isinstance(x, bool):
        return None
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x if isinstance(x, int) else None


def _int(x):
    """An integer fact; a whole float (12.0) counts, anything else is unknown."""
    x = _num(x)
    if isinstance(x, float):
        return int(x) if x.is_integer() and abs(x) < _INT64 else None
    return x


def _str(x):
    return None if x is None or x == "" else str(x)


def _when(v):
    """A time as ISO-8601, a step or sample number as it is."""
    if isinstance(v, datetime) or v is None:
        return iso(v)
    return _num(v) if isinstance(v, (int, float)) or hasattr(v, "item") else str(v)


def _bool(x):
    return None if x is None else bool(x)


def _ints(xs):
    return [i for i in (_int(x) for x in xs or ()) if i is not None]


def _strs(xs):
    return [s for s in (_str(x) for x in xs or ()) if s is not None]


def _frame(fr) -> dict:
    """A stack frame as the summary gives it (a parser's frame dict, or a frame known only as text)."""
    fr = fr if isinstance(fr, dict) else {"symbol": fr}
    return {"symbol": _str(fr.get("symbol") or fr.get("function")), "module": _str(fr.get("module")),
            "offset": _str(fr.get("offset")), "file": _str(fr.get("file") or fr.get("filename")),
            "line": _int(fr.get("line"))}


def _py_frame(fr) -> dict:
    """A frame of a Python traceback."""
    fr = fr if isinstance(fr, dict) else {"code": fr}
    return {"file": _str(fr.get("file")), "line": _int(fr.get("line")), "function": _str(fr.get("func")),
            "code": _str(fr.get("code"))}


def _series_fit(s: dict) -> dict:
    return {"series": _str(s.get("series")), "source": _str(s.get("source")), "pid": _int(s.get("pid")),
            "label": _str(s.get("label")), "pattern": _str(s.get("pattern")), "growth_bytes": _int(s.get("growth_bytes")),
            "rate_bytes_per_hour": _num(s.get("rate_bytes_per_hour")),
            "rate_bytes_per_step": _num(s.get("rate_bytes_per_step")), "onset": _when(s.get("onset")),
            "classification": _str(s.get("classification"))}


def _step(e: dict) -> dict:
    """One step of a distributed job's failure sequence (detect/distributed.py)."""
    return {"kind": _str(e.get("kind")), "rank": _int(e.get("rank")), "path": _str(e.get("path")),
            "line": _int(e.get("line")), "what": _str(e.get("what")), "time": _when(e.get("time")) if e.get("time") else None,
            "consequence_of_first": _bool(e.get("consequence_of_first"))}


def _ref(x) -> dict | None:
    """A finding's `consequence_of`: the first evidence line of the failure it followed."""
    if not isinstance(x, dict):
        return None
    return {"kind": _str(x.get("kind")), "rank": _int(x.get("rank")), "path": _str(x.get("path")),
            "line": _int(x.get("line"))}


def _site(x) -> dict | None:
    """A leak's site: the call path whose bytes per step match the leak's (detect/allocations.py)."""
    if not isinstance(x, dict):
        return None
    return {"site": _str(x.get("site")), "bytes_per_step": _num(x.get("bytes_per_step")), "from": _str(x.get("from")),
            "path": _str(x.get("path")), "line": _int(x.get("line"))}


def _key(name: str, conv):
    return lambda d: conv(d.get(name))


def _job(part: str):
    return lambda d: _int((d.get("job") or {}).get(part))


def _list_of(name: str, conv):
    return lambda d: [conv(x) for x in d.get(name) or () if x is not None]


# The facts each kind of finding carries in the JSON summary beyond the common fields, read from the
# finding's `detail` (the detectors' and parsers' own names there) into stable names and types:
# every finding of a kind has all of its kind's fields, null when the logs do not say.
# docs/design.md lists them; forensics/report/summary.schema.json describes each.
KIND_FACTS: dict[str, tuple[tuple[str, object], ...]] = {
    "leak": (
        ("capacity_bytes", _key("capacity_bytes", _int)),
        ("log_hours", _key("log_hours", _num)),
        ("ran_out", _key("ran_out", _str)),
        ("start_step", _key("start_step", _int)),
        ("steps_at", _list_of("steps_at", _when)),
        ("rate_bytes_per_sample", _key("rate_bytes_per_sample", _num)),
        ("exhaust_in_steps", _key("exhaust_in_steps", _num)),
        ("exhaust_in_samples", _key("exhaust_in_samples", _num)),
        ("job_number", _job("number")),
        ("job_count", _job("of")),
        ("series_fits", _list_of("series", _series_fit)),
        ("site", lambda d: _site(d.get("site"))),
        ("sites", _list_of("sites", _site)),
    ),
    "cache_growth": (
        ("device_growth_bytes", _key("device_growth_bytes", _int)),
    ),
    "cache_warmup": (),
    "gpu_oom": (
        ("requested_bytes", _key("requested", _int)),
        ("capacity_bytes", _key("total", _int)),
        ("free_bytes", _key("free", _int)),
        ("allocated_bytes", _key("allocated", _int)),
        ("reserved_bytes", _key("reserved", _int)),
        ("reserved_unallocated_bytes", _key("reserved_unallocated", _int)),
        ("private_pools_bytes", _key("private_pools", _int)),
        ("allowed_bytes", _key("allowed", _int)),
        ("process_in_use_bytes", _key("this_process_in_use", _int)),
        ("other_processes", _list_of("other_processes",
                                     lambda o: {"pid": _int(o.get("pid")), "bytes": _int(o.get("bytes"))}
                                     if isinstance(o, dict) else {"pid": None, "bytes": None})),
        ("count", _key("count", _int)),
        ("site", _key("site", _str)),
        ("traceback", _list_of("traceback", _py_frame)),
        ("exception", _key("exception", _str)),
        ("torch_era", _key("torch_era", _str)),
        ("framework", _key("framework", _str)),
        ("device_api", _key("device_api", _str)),
        ("allocator", _key("allocator", _str)),
        ("limit_bytes", _key("limit", _int)),
        ("in_use_bytes", _key("in_use", _int)),
        ("shape", _key("shape", _str)),
        ("node", _key("node", _str)),
    ),
    "oom_kill": (
        ("scope", _key("scope", _str)),
        ("cgroup", _key("task_memcg", _str)),
        ("oom_cgroup", _key("memcg", _str)),
        ("constraint", _key("constraint", _str)),
        ("anon_rss_bytes", _key("anon_rss", _int)),
        ("file_rss_bytes", _key("file_rss", _int)),
        ("shmem_rss_bytes", _key("shmem_rss", _int)),
        ("total_vm_bytes", _key("total_vm", _int)),
        ("pgtables_bytes", _key("pgtables", _int)),
        ("uid", _key("uid", _int)),
        ("oom_score_adj", _key("oom_score_adj", _int)),
        ("score", _key("score", _int)),
        ("trigger_process", _key("trigger", _str)),
        ("trigger_pid", _key("trigger_pid", _int)),
        ("gfp_mask", _key("gfp_mask", _str)),
        ("cpuset", _key("cpuset", _str)),
        ("nodemask", _key("nodemask", _str)),
        ("mems_allowed", _key("mems_allowed", _str)),
        ("cgroup_usage_bytes", _key("memcg_usage", _int)),
        ("cgroup_limit_bytes", _key("memcg_limit", _int)),
        ("cgroup_failcnt", _key("memcg_failcnt", _int)),
        ("kill_line_missing", lambda d: bool(d.get("inferred_from"))),
        ("inferred_from", _key("inferred_from", _str)),
    ),
    "residual_process": (
        ("parent_pid", _key("parent_pid", _int)),
        ("held_bytes", _key("held_bytes", _int)),
        ("until_end_of_log", _key("until_end_of_log", _bool)),
    ),
    "sanitizer_leak": (
        ("site", _key("site", _str)),
        ("count", _key("count", _int)),
        ("expected", _key("expected", _bool)),
        ("stack", _list_of("stack", _frame)),
    ),
    "xid": (
        ("code", _key("code", _int)),
        ("xid_name", _key("xid_name", _str)),
        ("meaning", _key("meaning", _str)),
        ("fatal", _key("fatal", _bool)),
        ("bus_id", _key("bus_id", _str)),
        ("gpu_uuid", _key("gpu_uuid", _str)),
        ("gpu_instance", _key("gpu_instance", _int)),
        ("compute_instance", _key("compute_instance", _int)),
        ("channel", _key("channel", _str)),
        ("caused_by_xid", _key("caused_by_xid", _int)),
        ("message", _key("message", _str)),
        ("count", _key("count", _int)),
        ("pids", lambda d: _ints(d.get("pids"))),
        ("processes", lambda d: _strs(d.get("processes"))),
    ),
    "slowdown": (
        ("early_seconds_per_step", _key("early_seconds_per_step", _num)),
        ("late_seconds_per_step", _key("late_seconds_per_step", _num)),
        ("leak_onset", _key("leak_onset", _when)),
    ),
    "distributed_failure": (
        ("first_failure", lambda d: _step(d["first_failure"]) if isinstance(d.get("first_failure"), dict) else None),
        ("sequence", _list_of("sequence", _step)),
        ("torchrun_root_cause_rank", _key("torchrun_root_cause_rank", _int)),
        ("ranks", lambda d: [{"rank": int(r) if str(r).isdigit() else None, "pid": _int(v.get("pid")),
                              "gpu": _str(v.get("gpu"))} for r, v in (d.get("ranks") or {}).items() if isinstance(v, dict)]),
        ("order_note", _key("order_note", _str)),
        ("own_failures", _list_of("own_failures", _step)),
        ("ranks_with_errors", lambda d: _ints(d.get("ranks_with_errors"))),
        ("ranks_without", lambda d: _ints(d.get("ranks_without"))),
    ),
    "collective_error": (
        ("backend", _key("backend", _str)),
        ("error", _key("error", _str)),
        ("local_rank", _key("local_rank", _int)),
        ("pg", _key("pg", _int)),
        ("pg_rank", _key("pg_rank", _int)),
        ("op", _key("op", _str)),
        ("seq", _key("seq", _int)),
        ("timeout_ms", _key("timeout_ms", _int)),
        ("ran_ms", _key("ran_ms", _int)),
        ("last_enqueued", _key("last_enqueued", _int)),
        ("last_completed", _key("last_completed", _int)),
        ("stuck_seconds", _key("stuck_seconds", _int)),
        ("reason", _key("reason", _str)),
        ("code", _key("code", _str)),
        ("count", _key("count", _int)),
    ),
    # a memory snapshot's: their facts are the finding's `allocation` object
    "allocation_leak": (),
    "allocation_footprint": (),
    "kv_cache_leak": (
        ("engine", _key("engine", _str)),
        ("available_tokens", _key("available_tokens", _int)),
        ("total_tokens", _key("total_tokens", _int)),
    ),
}
FINDING_KINDS = tuple(KIND_FACTS)


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
    detail = f.detail or {}
    for name, read in KIND_FACTS.get(f.kind, ()):
        d[name] = read(detail)
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
