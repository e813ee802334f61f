"""The report's sections below the charts, each a dataclass of plain values: findings, events, sanitizer leak sites,
OOM kills, CUDA OOMs, Xids and inputs."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from forensics.detect.callpaths import sanitizer_groups
from forensics.detect.events import EVENT_ORDER
from forensics.frames import rows_where
from forensics.kinds import KINDS
from forensics.detect.jobs import xid_is_fatal
from forensics.detect.leaks import series_words
from forensics.report.events import EVENT_STYLE, RAN_OUT, event_label
from forensics.model import detail_dict
from forensics.report.formatting import (Clock, base_name, clip, duration, growth_span, per_unit,
                                         plain)
from forensics.report.limits import (MAX_DETAIL_ITEMS, MAX_EVENT_ROWS, MAX_EVIDENCE, MAX_FRAMES, MAX_INPUT_ROWS,
                                     MAX_SANITIZER_GROUPS, MAX_TABLE_ROWS)
from forensics.units import human, rate_text

# Library modules in a host backtrace: frames from these are not where the user allocated.
_LIB_FRAME = re.compile(
    r"libcuda|libcudart|nvcuda|libcublas|libcudnn|libnccl|libtorch|libc10|libcaffe2|_C\.(?:cpython|so)|"
    r"libpython|python3?(?:\.[0-9]+)?$|ld-linux|libc\.so|libstdc\+\+|cudart_static|libcupy|cupy_backends|"
    r"\bcuMem|\bcudaMalloc|\bcudaHostAlloc|\bcuMemHostAlloc|\bcudaMallocManaged", re.IGNORECASE)


_BYTES_KEY = re.compile(r"bytes|rss|total_vm|pgtables|^(requested|total|free|allocated|reserved|cached|capacity|"
                        r"used|limit|allowed|private_pools|memcg_usage|memcg_limit)$|"
                        r"_(in_use|used|free|reserved|allocated|unallocated|capacity|limit|size)$")



def _detail_value(key: str, v, clock: Clock) -> str | int | None:
    """One extra fact for people; nested records (the detector's per-series list) are left to the
    JSON summary, and empty values are not shown."""
    if isinstance(v, datetime):
        w = clock.when(v)
        return w["local"] if w else None
    v = plain(v)
    if v is None or isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v)):
        return None
    if isinstance(v, list):
        if not v:
            return None
        return clip(", ".join(str(x) for x in v[:6]) + (f" (+{len(v) - 6})" if len(v) > 6 else ""), 200)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if _BYTES_KEY.search(key):
            return human(v)
        if key.endswith("hours"):
            return duration(v)
        if isinstance(v, int):  # pids, uids, codes, counts: as written
            return v
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return clip(v, 200) if v != "" else None


# detail keys said in words in the HTML (the JSON keeps the keys); others read as their words, capitalized
_DETAIL_LABELS = {
    "capacity_bytes": "GPU capacity", "log_hours": "Logged for", "ran_out": "Ran out as",
    "start_step": "Onset step", "steps_at": "Steps at", "device_growth_bytes": "Device growth",
    "rate_bytes_per_sample": "Rate per sample", "this_process_in_use": "In use by this process",
    "reserved_unallocated": "Reserved but unallocated", "torch_era": "PyTorch message format",
    "device_api": "Device API", "in_use": "In use by the allocator", "xla_total_allocation": "XLA program's total allocation",
    "total_vm": "Total virtual memory", "pgtables": "Page tables", "anon_rss": "Anonymous RSS",
    "file_rss": "File RSS", "shmem_rss": "Shared-memory RSS", "oom_score_adj": "OOM score adjustment",
    "bus_id": "PCI bus id", "uid": "User id", "pid": "Process id", "r2": "Fit (R²)",
    "pids": "Process ids", "gpu_uuid": "GPU UUID", "gpu_instance": "MIG GPU instance",
    "compute_instance": "MIG compute instance", "caused_by_xid": "Caused by Xid",
}
# codes for machines whose sentence is shown beside them (`inferred` says what `inferred_from` codes)
_SAID_IN_WORDS = {"inferred_from"}


def _detail_label(key: str) -> str:
    if key in _DETAIL_LABELS:
        return _DETAIL_LABELS[key]
    words = re.sub(r"_bytes$", "", key).replace("_", " ").strip() or key
    return words[:1].upper() + words[1:]


def _detail_text(v):
    """An event kind given as a value (`ran_out: gpu_oom`) reads as the kind's name."""
    return EVENT_STYLE[v][0] if isinstance(v, str) and v in EVENT_STYLE else v


# facts that label rather than measure: shown after the figures, so a capped list keeps the sizes
_LABEL_FACTS = {"framework", "device_api", "torch_era", "exception"}


def _details(d: dict, clock: Clock, skip=(), evidence_texts=()) -> list[list]:
    out = []
    for k, v in sorted(d.items(), key=lambda kv: kv[0] in _LABEL_FACTS):
        if k in skip or k in _SAID_IN_WORDS:
            continue
        # a message that only repeats the quoted log line adds nothing
        if isinstance(v, str) and len(v) > 40 and any(v[:60] in t for t in evidence_texts):
            continue
        v = _detail_value(str(k), v, clock)
        if v is not None:
            out.append([_detail_label(str(k)), _detail_text(v)])
        if len(out) >= MAX_DETAIL_ITEMS:
            break
    return out


@dataclass
class EvidenceLine:
    path: str
    line: int
    text: str


@dataclass
class FindingView:
    """A finding as the report shows it (the templates read these fields, the golden files hold them)."""
    kind: str
    severity: str
    summary: str
    facts: list[list[str]]      # [label, text]: the common fields, in a fixed order
    details: list[list]         # [label, text or number]: the finding's own facts
    evidence: list[EvidenceLine]
    evidence_more: int          # evidence lines left out (the JSON summary has them)
    causes: list[str]
    checks: list[str]
    related: list[str]


def finding_ctx(f, clock: Clock) -> FindingView:
    facts = []
    where = []
    if getattr(f, "rank", None) is not None:
        where.append(f"rank {f.rank}")
    if f.gpu is not None:
        where.append(f"GPU {f.gpu}")
    if f.pid is not None:
        where.append(f"pid {f.pid}")
    if f.series:
        where.append(series_words(f.series))
    if where:
        facts.append(["Where", ", ".join(where)])
    if f.pattern:
        facts.append(["Pattern", f.pattern])
    start = clock.when(f.start)
    if start:
        facts.append(["Start", start["local"] + ("" if clock.is_utc else f" ({start['utc']})")])
    elif f.start_index is not None:
        facts.append(["Start", f"step/sample {f.start_index}"])
    end = clock.when(f.end)
    if end:
        facts.append(["End", end["local"] + ("" if clock.is_utc else f" ({end['utc']})")])
    if f.rate_bytes_per_hour is not None:
        facts.append(["Rate", rate_text(f.rate_bytes_per_hour, growth_span(f))])
    if getattr(f, "stairs", None):
        every = [v for v in (duration(f.stair_period_seconds / 3600) if f.stair_period_seconds else None,
                             f"{f.stair_period_steps:.0f} steps" if f.stair_period_steps else None) if v]
        facts.append(["Stairs", f"{f.stairs}" + (f", one every {' or '.join(every)}" if every else "")])
    life = [clock.when(v) if isinstance(v, datetime) else ({"local": f"step/sample {v}"} if v is not None else None)
            for v in (getattr(f, "lifetime_start", None), getattr(f, "lifetime_end", None))]
    if life[0] and life[1]:
        ended = {"release": "its memory was released", "log_end": "the log ends",
                 "restart": "the job restarted"}.get(getattr(f, "lifetime_ended", None) or "", "")
        facts.append(["Job", f"{life[0]['local']} to {life[1]['local']}" + (f" ({ended})" if ended else "")])
    if f.rate_bytes_per_step is not None:
        facts.append(["Rate per step", per_unit(f.rate_bytes_per_step, "step")])
    if f.growth_bytes is not None:
        facts.append(["Growth", human(f.growth_bytes)])
    if f.bytes is not None:
        # what a finding's `bytes` is, by kind: a bare "Bytes" tells the reader nothing
        facts.append([KINDS[f.kind].bytes_label if f.kind in KINDS else "Size", human(f.bytes)])
    if RAN_OUT.get((f.detail or {}).get("ran_out")):
        at = clock.when(f.exhaust_at)
        facts.append(["Memory", f"ran out ({RAN_OUT[f.detail['ran_out']]})" + (f" — {at['local']}" if at else "")])
    elif f.exhaust_in_hours is not None or f.exhaust_at is not None:
        text = duration(f.exhaust_in_hours) or ""
        at = clock.when(f.exhaust_at)
        if at:
            text = (text + " — " if text else "") + at["local"]
        ended = getattr(f, "lifetime_ended", None) in ("release", "restart")
        facts.append(["At this pace, full in" if ended else "Memory runs out", text])
    if f.confidence is not None:
        facts.append(["Confidence", f"{f.confidence:.0%}" if f.confidence <= 1 else str(f.confidence)])
    after = getattr(f, "consequence_of", None)
    if after:
        facts.append(["Consequence of", f"rank {after.get('rank')}'s {EVENT_STYLE.get(after.get('kind'), (after.get('kind'),))[0]}"
                                        f" ({base_name(str(after.get('path')))}:{after.get('line')})"])
    # "ran_out" is said by the "Memory" fact above
    details = _details(f.detail or {}, clock, skip=("ran_out",) if RAN_OUT.get((f.detail or {}).get("ran_out")) else (),
                       evidence_texts=[e.text or "" for e in f.evidence])
    return FindingView(
        kind=f.kind, severity=f.severity, summary=clip(f.summary, 600), facts=facts, details=details,
        evidence=[EvidenceLine(e.path, e.line, clip(e.text)) for e in f.evidence[:MAX_EVIDENCE]],
        evidence_more=max(0, len(f.evidence) - MAX_EVIDENCE), causes=[clip(c, 300) for c in f.causes[:10]],
        checks=[clip(c, 300) for c in f.checks[:10]], related=[clip(c, 300) for c in f.related[:10]])


@dataclass
class EventKindCount:
    kind: str
    label: str
    count: int
    first: str | None       # local time text
    last: str | None


@dataclass
class EventLine:
    """An event on the report's timeline of what happened."""
    kind: str
    label: str
    when: dict | None
    path: str
    line: int
    text: str


@dataclass
class EventsView:
    total: int
    by_kind: list[EventKindCount]
    rows: list[EventLine]
    omitted: int            # timeline rows left out
    untimed: int            # events without a clock


def events_ctx(events: pl.DataFrame, clock: Clock) -> EventsView:
    if events.is_empty():
        return EventsView(total=0, by_kind=[], rows=[], omitted=0, untimed=0)
    by_kind = events.group_by("kind").agg(
        pl.len().alias("count"), pl.col("time").min().alias("first"), pl.col("time").max().alias("last"),
    ).sort("count", "kind", descending=[True, False])
    kinds = []
    for r in by_kind.iter_rows(named=True):
        f, l = clock.when(r["first"]), clock.when(r["last"])
        kinds.append(EventKindCount(kind=r["kind"], label=EVENT_STYLE.get(r["kind"], (r["kind"],))[0], count=r["count"],
                                    first=f["local"] if f else None, last=l["local"] if l else None))
    # sanitizer leak records and a snapshot's call paths get their own sections; here the timeline of
    # things that happened
    timeline_events = rows_where(events, ~pl.col("kind").is_in(["sanitizer_leak", "allocation_site"]))
    ordered = timeline_events.sort(EVENT_ORDER, nulls_last=True, maintain_order=True).head(MAX_EVENT_ROWS)
    rows = []
    for e in ordered.iter_rows(named=True):
        w = clock.when(e["time"])
        rows.append(EventLine(kind=e["kind"], label=event_label(e), when=w, path=e["source"], line=e["line"],
                              text=clip(e["text"])))
    return EventsView(total=events.height, by_kind=kinds, rows=rows,
                             omitted=max(0, timeline_events.height - len(rows)),
                             untimed=int(events["time"].null_count()))


def _frame_text(frame) -> str:
    """`symbol at file:line in module` (module by its base name), or the frame as given."""
    if isinstance(frame, dict):
        sym = frame.get("symbol") or frame.get("function") or frame.get("name")
        text = sym or (f"[{frame['offset']}]" if frame.get("offset") else "?")
        src = frame.get("file") or frame.get("filename")
        if src:
            text += f" at {src}" + (f":{frame['line']}" if frame.get("line") is not None else "")
        if frame.get("module"):
            text += f" in {base_name(str(frame['module']).replace(chr(92), '/'))}"
        return clip(text, 300)
    return clip(frame, 300)


def _is_user_frame(frame) -> bool:
    if isinstance(frame, dict) and "user" in frame:
        return bool(frame["user"])
    return not _LIB_FRAME.search(_frame_text(frame))


@dataclass
class SanitizerSite:
    """compute-sanitizer's leaks of one call path."""
    site: str
    count: int
    bytes: int | None
    bytes_text: str
    expected: bool              # the caching allocator's own segments at exit
    truncated: bool
    user_frames: list[str]
    library_frames: list[str]
    frames_more: int
    evidence: EvidenceLine      # its first leak


@dataclass
class SanitizerView:
    groups: list[SanitizerSite]
    groups_omitted: int
    allocations: int
    bytes: int
    bytes_text: str
    expected_allocations: int
    expected_bytes_text: str | None


def sanitizer_ctx(events: pl.DataFrame, findings=()) -> SanitizerView | None:
    """The leak sites table: the findings' groups (detect/callpaths.py), most bytes first. A group the
    detector found to be a leak's site (detect/allocations.py: one allocation of the leak's size a
    step) is no longer the allocator's cache at exit."""
    leaks = rows_where(events, pl.col("kind") == "sanitizer_leak")
    if leaks.is_empty():
        return None
    sites = {f.detail.get("site") for f in findings if f.kind == "sanitizer_leak" and f.detail.get("expected") is False}
    groups = sanitizer_groups(leaks)
    for g in groups:
        g.expected = g.expected and g.label not in sites
    # most bytes first; ties keep the groups' own order (of their first leak in the report)
    groups = sorted(groups, key=lambda g: (g.expected, -_known_bytes(g), -len(g.rows)))
    out = []
    for g in groups[:MAX_SANITIZER_GROUPS]:
        frames = g.details[0].get("stack") or g.details[0].get("frames") or []
        if not isinstance(frames, list):
            frames = []
        user = [_frame_text(fr) for fr in frames if _is_user_frame(fr)]
        lib = [_frame_text(fr) for fr in frames if not _is_user_frame(fr)]
        known = [r["bytes"] for r in g.rows if r["bytes"] is not None]
        first = g.rows[0]
        out.append(SanitizerSite(
            site=clip(g.label, 300) if g.label else "(no backtrace)", count=len(g.rows),
            bytes=sum(known) if known else None, bytes_text=human(sum(known)) if known else "—",
            expected=g.expected, truncated=g.truncated, user_frames=user[:MAX_FRAMES], library_frames=lib[:MAX_FRAMES],
            frames_more=max(0, len(user) - MAX_FRAMES) + max(0, len(lib) - MAX_FRAMES),
            evidence=EvidenceLine(first["source"], first["line"], clip(first["text"]))))
    total = leaks["bytes"].sum()
    expected = [r for g in groups if g.expected for r in g.rows]
    return SanitizerView(
        groups=out, groups_omitted=max(0, len(groups) - len(out)), allocations=leaks.height, bytes=total,
        bytes_text=human(total), expected_allocations=len(expected),
        expected_bytes_text=human(sum(r["bytes"] or 0 for r in expected)) if expected else None)


@dataclass
class AllocationRow:
    """A call path of a memory snapshot: an allocation_leak's, or one of an allocation_footprint's sites."""
    leak: bool
    site: str | None
    frames: list[str]
    count: int | None
    bytes_text: str
    growth_text: str | None     # leaks: what the trace added
    rate: str | None
    quarters: list[int] | None
    evidence: EvidenceLine | None


@dataclass
class AllocationsView:
    rows: list[AllocationRow]
    leaks: int
    leak_bytes_text: str
    footprint_bytes_text: str
    footprint_sites: int        # paths in all
    footprint_shown: int


def allocations_ctx(findings: list) -> AllocationsView | None:
    """A memory snapshot's live allocations by call path: the sites that keep accumulating (leaks)
    first, then the footprint (allocated once and kept)."""
    leaks = [f for f in findings if f.kind == "allocation_leak" and f.allocation]
    prints = [f for f in findings if f.kind == "allocation_footprint" and f.allocation]
    if not leaks and not prints:
        return None
    rows = []
    for f in sorted(leaks, key=lambda f: -(f.growth_bytes or 0))[:MAX_SANITIZER_GROUPS]:
        a = f.allocation
        rate = ", ".join(x for x in (per_unit(f.rate_bytes_per_step, "step") if f.rate_bytes_per_step else None,
                                     rate_text(f.rate_bytes_per_hour, a.get("seconds")) if f.rate_bytes_per_hour else None)
                         if x)
        ev = f.evidence[-1] if f.evidence else None
        rows.append(AllocationRow(
            leak=True, site=clip(a.get("site"), 300), frames=[clip(x, 300) for x in (a.get("path") or [])[:MAX_FRAMES]],
            count=a.get("count"), bytes_text=human(f.bytes or 0),
            growth_text=f"+{human(f.growth_bytes or 0)} in {a.get('survivors')} allocation(s)", rate=rate or None,
            quarters=a.get("quarters"), evidence=EvidenceLine(ev.path, ev.line, clip(ev.text)) if ev else None))
    for f in prints:
        for s in f.allocation.get("sites") or []:
            rows.append(AllocationRow(
                leak=False, site=clip(s.get("site"), 300),
                frames=[clip(x, 300) for x in (s.get("path") or [])[:MAX_FRAMES]], count=s.get("count"),
                bytes_text=human(s.get("bytes") or 0), growth_text=None, rate=None, quarters=None,
                evidence=EvidenceLine(f.source, s.get("line"), clip(s.get("text")))))
    return AllocationsView(
        rows=rows, leaks=len(leaks), leak_bytes_text=human(sum(f.bytes or 0 for f in leaks)),
        footprint_bytes_text=human(sum(f.bytes or 0 for f in prints)),
        footprint_sites=sum(f.allocation.get("sites_total") or 0 for f in prints),
        footprint_shown=sum(len(f.allocation.get("sites") or []) for f in prints))


def _known_bytes(g) -> int:
    return sum(r["bytes"] or 0 for r in g.rows)


@dataclass
class OomKillRow:
    when: dict | None               # Clock.when's local and UTC text
    pid: int | None
    process: str | None
    bytes_text: str | None
    facts: list[list]               # [label, text]
    path: str
    line: int
    text: str


@dataclass
class GpuOomRow:
    when: dict | None
    gpu: str | None
    pid: int | None
    bytes_text: str | None
    facts: list[list]
    path: str
    line: int
    text: str


@dataclass
class EventTable:
    rows: list
    total: int
    omitted: int                    # rows left out


_OOM_KEYS = ("anon_rss", "file_rss", "shmem_rss", "total_vm", "pgtables", "rss", "oom_score_adj", "uid",
             "scope", "constraint", "memcg", "task_memcg", "oom_memcg", "cpuset", "nodemask", "global_oom")


def _sorted_by_time(df: pl.DataFrame) -> pl.DataFrame:
    """df in EVENT_ORDER, nulls last (no query for the usual zero or one row)."""
    return df if df.height < 2 else df.sort(EVENT_ORDER, nulls_last=True, maintain_order=True)


def oom_kills_ctx(events: pl.DataFrame, clock: Clock) -> EventTable:
    kills = _sorted_by_time(rows_where(events, pl.col("kind") == "oom_kill"))
    rows = []
    for e in kills.head(MAX_TABLE_ROWS).iter_rows(named=True):
        d = detail_dict(e["detail"])
        ordered = {k: d[k] for k in _OOM_KEYS if k in d}
        ordered.update(d)
        facts = _details(ordered, clock, skip=("pid", "process", "victim", "message", "host", "evidence_lines"),
                         evidence_texts=[e["text"] or ""])
        rows.append(OomKillRow(when=clock.when(e["time"]), pid=e["pid"], process=clip(e["process"], 120),
                             bytes_text=human(e["bytes"]) if e["bytes"] is not None else None, facts=facts,
                             path=e["source"], line=e["line"], text=clip(e["text"])))
    return EventTable(rows, kills.height, max(0, kills.height - len(rows)))


def gpu_ooms_ctx(events: pl.DataFrame, clock: Clock) -> EventTable:
    ooms = _sorted_by_time(rows_where(events, pl.col("kind") == "gpu_oom"))
    rows = []
    for e in ooms.head(MAX_TABLE_ROWS).iter_rows(named=True):
        facts = _details(detail_dict(e["detail"]), clock, skip=("host",), evidence_texts=[e["text"] or ""])
        rows.append(GpuOomRow(when=clock.when(e["time"]), gpu=e["gpu"], pid=e["pid"],
                              bytes_text=human(e["bytes"]) if e["bytes"] is not None else None, facts=facts,
                              path=e["source"], line=e["line"], text=clip(e["text"])))
    return EventTable(rows, ooms.height, max(0, ooms.height - len(rows)))


@dataclass
class XidGroup:
    """One GPU's Xids of one code."""
    gpu: str | None
    code: str | None        # as the event's detail gives it
    meaning: str | None
    weight: str | None
    count: int
    first: dict | None
    last: dict | None
    pids: list[int]
    processes: list[str]
    fatal: bool
    path: str               # the first line's
    line: int
    text: str


@dataclass
class XidTable:
    groups: list[XidGroup]
    total: int
    omitted: int            # groups left out


def xids_ctx(events: pl.DataFrame, clock: Clock) -> XidTable:
    xids = events.filter(pl.col("kind") == "xid")
    if xids.is_empty():
        return XidTable([], 0, 0)
    # a group's first line and the groups' order: the events' order, not the rows' order of arrival
    xids = xids.sort(EVENT_ORDER, nulls_last=True, maintain_order=True).with_row_index("_i").with_columns(
        pl.col("detail").str.json_path_match("$.code").alias("_code"),
        pl.col("detail").str.json_path_match("$.meaning").alias("_meaning"),
        pl.col("detail").str.json_path_match("$.weight").alias("_weight"),
    )
    groups = xids.group_by("gpu", "_code").agg(
        pl.len().alias("count"),
        pl.col("time").min().alias("first"), pl.col("time").max().alias("last"),
        pl.col("_meaning").drop_nulls().first().alias("meaning"),
        pl.col("_weight").drop_nulls().first().alias("weight"),
        pl.col("pid").drop_nulls().unique().sort().head(5).alias("pids"),
        pl.col("process").drop_nulls().unique().sort().head(5).alias("processes"),
        pl.col("source").sort_by("_i").first().alias("path"),
        pl.col("line").sort_by("_i").first().alias("line"),
        pl.col("text").sort_by("_i").first().alias("text"),
        pl.col("_i").min().alias("_first"),
    ).sort("_first")
    out = []
    for g in groups.head(MAX_TABLE_ROWS).iter_rows(named=True):
        code = g["_code"]
        fatal = xid_is_fatal(code)
        out.append(XidGroup(gpu=g["gpu"], code=code, meaning=clip(g["meaning"], 300) if g["meaning"] else None,
                            weight=clip(g["weight"], 300) if g["weight"] else None, count=g["count"],
                            first=clock.when(g["first"]), last=clock.when(g["last"]), pids=g["pids"],
                            processes=[clip(p, 80) for p in g["processes"]], fatal=fatal, path=g["path"],
                            line=g["line"], text=clip(g["text"])))
    return XidTable(out, xids.height, max(0, groups.height - len(out)))


@dataclass
class SkipReason:
    reason: str
    count: int
    examples: list[int]     # the first few line numbers


@dataclass
class InputRow:
    path: str
    format: str | None
    reason: str | None      # why its parser claimed it, or why none did
    lines: int
    records: int
    skipped: int
    skip_reasons: list[SkipReason]
    start: dict | None
    end: dict | None
    range: dict | None      # Clock.span: local and UTC text
    clock: str
    anchor: str | None
    compression: str | None
    wrapper: str | None
    notes: list[str]
    error: str | None
    used: bool


@dataclass
class InputsView:
    rows: list[InputRow]
    omitted: int
    total: int
    lines: int
    records: int
    skipped: int
    unreadable: int
    unrecognized: int


def inputs_ctx(inputs: list, clock: Clock) -> InputsView:
    rows = []
    for i in inputs[:MAX_INPUT_ROWS]:
        s, e = clock.when(i.start), clock.when(i.end)
        reasons = []
        for reason, n in sorted((i.skip_reasons or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
            ex = (getattr(i, "skip_examples", None) or {}).get(reason) or []
            reasons.append(SkipReason(clip(reason, 200), n, list(ex)[:5]))
        rows.append(InputRow(
            path=i.path, format=i.format, reason=clip(i.reason, 200), lines=i.lines, records=i.records,
            skipped=i.skipped, skip_reasons=reasons, start=s, end=e, range=clock.span(i.start, i.end), clock=i.clock,
            anchor=clip(i.anchor, 300) if i.anchor else None, compression=i.compression,
            wrapper=clip(i.wrapper, 200) if i.wrapper else None, notes=[clip(n, 300) for n in (i.notes or [])[:10]],
            error=clip(i.error, 600) if i.error else None, used=bool(i.format) and not i.error))
    return InputsView(
        rows=rows, omitted=max(0, len(inputs) - len(rows)), total=len(inputs), lines=sum(i.lines for i in inputs),
        records=sum(i.records for i in inputs), skipped=sum(i.skipped for i in inputs),
        unreadable=sum(1 for i in inputs if i.error),
        unrecognized=sum(1 for i in inputs if not i.format and not i.error))
