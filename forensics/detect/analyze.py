"""The detection stage: every series measured, findings made and linked, one verdict.

`analyze(bundle, opts)` is the stage interface. Series: measure.py (fits: series.py); leaks and
cache growth per GPU: leaks.py; events, residual processes and slowdowns: events.py. The verdict is
picked here, once: the finding it speaks of, what ended the job and its tone with it (the report
only formats them). Thresholds and their reasons: docs/detection.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from forensics.detect import distributed
from forensics.detect import events as detect_events
from forensics.detect import jobs
from forensics.detect.allocations import allocation_findings, name_leak_sites
from forensics.detect.findings import SEVERITY_RANK, Finding
from forensics.detect.leaks import gpu_findings, growth_into_oom, judged
from forensics.detect.measure import DEVICE_SERIES, HOST_SERIES, POOL_SERIES, Series, SeriesResult, measure_series, series_frames
from forensics.detect.thresholds import POOL_FULL
from forensics.kinds import KINDS
from forensics.ranks import RankMap
from forensics.units import human

KIND_ORDER = {k.name: k.order for k in KINDS.values()}


VERDICT_TONES = {"leak": "critical", "cache_growth": "warning", "no_leak": "ok", "inconclusive": "neutral"}


@dataclass
class Analysis:
    verdict: str                     # leak | no_leak | cache_growth | inconclusive
    verdict_reason: str
    findings: list[Finding] = field(default_factory=list)
    series: list[SeriesResult] = field(default_factory=list)
    top_finding: Finding | None = None   # the finding the verdict speaks of (the report's banner quotes it)
    tone: str = "neutral"            # critical | warning | ok | neutral | empty: how the verdict is shown
    ended_by: dict | None = None     # the job's own event that ended it (an events row, with `count`)
    context_events: list[dict] = field(default_factory=list)   # other processes' such events (rows)


def decided(verdict: str, verdict_reason: str, findings: list[Finding], series: list[SeriesResult],
            events: pl.DataFrame, empty: bool = False) -> Analysis:
    """The analysis with everything the verdict decides: the finding it speaks of, what ended the job,
    and its tone: never green beside what ended the job; `empty` when there was nothing to read."""
    ended, context = jobs.ended_by(events, findings)
    tone = VERDICT_TONES.get(verdict, "neutral")
    if empty:
        tone = "empty"
    elif ended is not None and tone == "ok":
        tone = "warning"
    return Analysis(verdict=verdict, verdict_reason=verdict_reason, findings=findings, series=series,
                    top_finding=lead_finding(verdict, findings), tone=tone, ended_by=ended, context_events=context)


def _leads(findings: list[Finding]) -> list[list[Finding]]:
    """What makes a leak verdict, strongest evidence first, each list led by the finding it speaks of.
    The verdict is about GPU memory: host-memory findings are reported, not judged here."""
    leaks = sorted((f for f in findings if f.kind == "leak" and f.series not in HOST_SERIES),
                   key=lambda f: (-SEVERITY_RANK[f.severity], -(f.growth_bytes or 0)))
    return [leaks, [f for f in findings if f.kind == "residual_process"],
            [f for f in findings if f.kind == "allocation_leak"],
            [f for f in findings if f.kind == "sanitizer_leak" and f.severity != "info"],
            [f for f in findings if f.kind == "kv_cache_leak"]]


def lead_finding(verdict: str, findings: list[Finding]) -> Finding | None:
    """The finding a verdict speaks of: a leak verdict's lead, the cache growth; otherwise (no leak,
    inconclusive) the growth finding, else the most severe one (what the report quotes beside it)."""
    if verdict == "leak":
        lead = next((group[0] for group in _leads(findings) if group), None)
        if lead is not None:
            return lead
    if verdict == "cache_growth":
        cache = [f for f in findings if f.kind == "cache_growth"]
        if cache:
            return cache[0]
    ranked = sorted(findings, key=lambda f: ({"leak": 0, "cache_growth": 1}.get(f.kind, 2),
                                             -SEVERITY_RANK.get(f.severity, 0), -(f.confidence or 0),
                                             -(f.rate_bytes_per_hour or 0)))
    return ranked[0] if ranked else None


def _pool_words(pools: list[Series]) -> str:
    """One sentence on a serving engine's KV cache: how full it got, and that filling is no leak."""
    measured = [s for s in pools if s.result.classification != "too_short" and s.y.size]
    if not measured:
        return ""
    s = max(measured, key=lambda p: (p.result.capacity or 0, p.result.n))
    cap, peak, last = s.result.capacity, float(s.y.max()), float(s.y[-1])
    if cap:
        how = (f"fills to 100 % of its {human(cap)}" if peak >= POOL_FULL * cap
               else f"rises to {peak / cap:.0%} of its {human(cap)}")
        how += (" and stays full to the end" if last >= POOL_FULL * cap
                else f", {last / cap:.0%} at the end" if peak >= POOL_FULL * cap else "")
    else:
        how = f"reaches {human(int(peak))}"
    return (f"The KV cache ({s.result.series} of {s.result.source}, {s.result.n} readings) {how}: a serving engine "
            "reserves it at start-up and fills it with its requests' tokens, so a full cache is a busy engine, "
            "not a leak.")


def _unread(inputs) -> str:
    """What the inputs held that was counted and not read, when nothing was read: the largest reason."""
    reasons: dict[str, int] = {}
    for i in inputs:
        for r, n in (i.skip_reasons or {}).items():
            if r != "blank line":
                reasons[r] = reasons.get(r, 0) + n
    if not reasons:
        return ""
    r, n = max(reasons.items(), key=lambda kv: kv[1])
    return f" Skipped: {n} line{'s' if n > 1 else ''}, {r}."


def _unjudged(series: list[Series]) -> str:
    """What was read when none of it is a series judged for growth."""
    names: dict[str, set[str]] = {}
    for s in series:
        names.setdefault(s.result.series, set()).add(s.result.source)
    read = "; ".join(f"{name} in {', '.join(sorted(src))}" for name, src in sorted(names.items()))
    return (f"The memory read ({read}) holds no series whose growth is judged. Only the device's, a process's or "
            "a framework's memory in use is judged for growth.")


def _verdict(series: list[Series], parts: list[Series], findings: list[Finding], n_events: int,
             inputs=()) -> tuple[str, str]:
    leaks, residual, kept, san, engine = _leads(findings)
    if leaks:
        more = f" ({len(leaks) - 1} more leak finding{'s' if len(leaks) > 2 else ''})" if len(leaks) > 1 else ""
        return "leak", leaks[0].summary[:-1] + more + "."
    if residual:
        return "leak", residual[0].summary[:-1] + ": GPU memory held by a process whose job is gone."
    if kept:
        more = f" ({len(kept) - 1} more call path{'s' if len(kept) > 2 else ''})" if len(kept) > 1 else ""
        return "leak", kept[0].summary[:-1] + more + "."
    if san:
        total = sum(f.bytes or 0 for f in san)
        return "leak", (f"compute-sanitizer reports allocations never freed at {len(san)} site"
                        f"{'s' if len(san) > 1 else ''} ({human(total)} in all).")
    if engine:
        return "leak", engine[0].summary
    cache = [f for f in findings if f.kind == "cache_growth"]   # (a cache_warmup note is no verdict)
    if cache:
        return "cache_growth", cache[0].summary
    usable = [s for s in judged(series) if s.result.series not in HOST_SERIES
              and s.result.classification != "too_short"]
    host = [f for f in findings if f.kind == "leak" and f.series in HOST_SERIES]
    host_txt = " Host memory does grow (see the host-memory finding)." if host else ""
    pool_txt = _pool_words([s for s in series if s.result.series in POOL_SERIES])
    short_gpu = [p for p in parts if p.fit.classification == "too_short"
                 and p.result.series not in POOL_SERIES and p.result.series not in HOST_SERIES]
    if pool_txt and not usable and not short_gpu:
        return "no_leak", (pool_txt + " The GPU memory outside the cache (weights, activations, the engine's own) "
                           "has no readings over time in these inputs: add nvidia-smi readings to judge it." + host_txt)
    if usable:
        classes = sorted({p.fit.classification.replace("_", " ") for s in usable for p in s.parts
                          if p.fit.classification != "too_short"})
        kinds = {f.kind for f in findings if f.job_event is not False}   # another job's kill is no cause
        into = [p for p in parts if p.fit.classification == "growth_into_oom"]
        if into:
            return "no_leak", f"The path to the CUDA out-of-memory error: {into[0].fit.reason}.{host_txt}"
        tail = ""
        if "gpu_oom" in kinds:
            tail = " The CUDA out-of-memory came from a footprint that was too large, not from GPU memory growth."
        elif "oom_kill" in kinds:
            tail = (" The kernel's OOM killer ended the job: host memory ran out, not GPU memory"
                    + (" (host memory grew: see the host-memory finding)." if host else "."))
            host_txt = ""
        scope = ""
        if all(s.result.series in DEVICE_SERIES for s in usable):
            # the driver's count: a framework that preallocates (JAX/XLA, TensorFlow) or caches (PyTorch)
            # grows inside what it already took, and that cannot show here
            scope = (" These are device readings only: growth inside a framework's memory pool (PyTorch's "
                     "cache, JAX/XLA's preallocated pool) does not show in them; the job's step log or stderr would.")
        return "no_leak", (f"{len(usable)} GPU memory series show no growth that persists "
                           f"({', '.join(classes)}).{host_txt}{tail}" + (f" {pool_txt}" if pool_txt else "") + scope)
    expected = [f for f in findings if f.kind == "sanitizer_leak"]
    if expected:
        return "no_leak", ("compute-sanitizer's unfreed allocations are the caching allocator's own "
                           "segments, still held at exit: not a leak.")
    short = [p for p in parts if p.fit.classification == "too_short"]
    if short:
        best = max(short, key=lambda s: s.result.n)
        return "inconclusive", (f"Too little data: in the longest memory series ({best.result.series} of "
                                f"{best.result.source}) {best.fit.reason}.{host_txt}" + (f" {pool_txt}" if pool_txt else ""))
    if series:   # (read, but none of them a series whose growth is judged)
        return "inconclusive", _unjudged(series) + host_txt
    if n_events:
        return "inconclusive", ("No memory readings over time in the inputs (only events), so growth "
                                "cannot be measured." + host_txt)
    return "inconclusive", "No memory readings and no events were found in the inputs." + _unread(inputs)


def analyze(bundle, opts=None) -> Analysis:
    samples = bundle.samples
    events = bundle.events
    ranks = RankMap.from_events(events)
    series = [measure_series(k, df) for k, df in series_frames(samples)]
    distributed.series_ranks(series, ranks)
    # growth is judged per job lifetime; residual processes need each process' whole series
    parts = [p for s in series for p in s.parts]
    leaks, cache = gpu_findings(parts)
    findings: list[Finding] = leaks + cache
    findings.extend(detect_events.event_findings(events))
    findings.extend(allocation_findings(events, samples))
    findings.extend(growth_into_oom(series, findings))
    distributed.finding_ranks(findings, ranks)
    findings.extend(detect_events.residual_findings(series, events))
    findings.extend(detect_events.slowdown_findings(parts, samples))
    jobs.tie_events(findings, jobs.job_of(parts, findings))
    detect_events.link(findings)
    name_leak_sites(findings)
    findings.extend(distributed.distributed_findings(events, findings, ranks))
    # most severe first, then by kind, then the bigger first (a 20 MiB leak before a 1 MiB one)
    findings.sort(key=lambda f: (-SEVERITY_RANK.get(f.severity, 0), KIND_ORDER.get(f.kind, 99),
                                 -(f.growth_bytes or f.bytes or 0),
                                 f.start.timestamp() if isinstance(f.start, datetime) else float("inf")))
    verdict, reason = _verdict(series, parts, findings, events.height, bundle.inputs)
    return decided(verdict, reason, findings, [s.result for s in series], events,
                   empty=samples.is_empty() and events.is_empty())
