"""Leak sites from a memory snapshot's trace: which call paths keep adding live allocations.

Each `allocation_site` event (parsers/torch/snapshot.py) is one call path with memory live at the
dump: its live blocks, and the allocations of the trace that are still live, spread over the trace (a
histogram of 64 equal parts of its span). A leak is code that runs every step and keeps what it
allocated: its surviving allocations were made all through the trace, so every quarter of the trace
added some. What is allocated once and kept (weights, optimizer state, a cache made at the start)
has no survivors in the trace, or only at one time; the working set of the step running at the dump
survives only at the end. Both are the footprint, listed, not judged.

Quarters only say "steady" when the trace holds several steps: a trace shorter than a few steps (a
small `max_entries`) is judged only when its steps are unknown, and says so. Quarters are of the
trace's clock or of its entries (a pause holds none). Steps come from the snapshot's own
`Optimizer.step` annotations, else from the trace's own rhythm (the allocation count that most
repeating call paths share), else from a step log on the same clock (any memory series with step
numbers that covers the trace).
"""
from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import polars as pl

from forensics.detect.findings import Evidence, Finding
from forensics.detect.thresholds import SITE_MATCH, SITE_MIN_STEPS, SITE_QUARTERS
from forensics.frames import partitions, rows_where
from forensics.model import detail_dict
from forensics.units import human, rate_text

FOOTPRINT_SITES = 12     # footprint sites named in its finding


def _utc(text) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return None


def _steps_from_log(samples: pl.DataFrame, t0: datetime, t1: datetime) -> tuple[float, str] | None:
    """Steps done between t0 and t1 by a series that counts steps on a clock (a step log's memory
    lines): its pace of steps per second over the readings inside the window (or around it)."""
    if samples.height == 0 or t1 <= t0:
        return None
    s = rows_where(samples, pl.col("step").is_not_null() & pl.col("time").is_not_null())
    if s.height < 2:
        return None
    best = None
    for (src,), g in partitions(s, "source").items():
        g = g.sort("time").unique(["step"], keep="first", maintain_order=True)
        inside = g.filter(pl.col("time").is_between(t0, t1))
        use = inside if inside.height >= 2 else g
        if use.height < 2 or g["time"][0] > t1 or g["time"][-1] < t0:
            continue
        dt = (use["time"][-1] - use["time"][0]).total_seconds()
        ds = int(use["step"][-1]) - int(use["step"][0])
        if dt <= 0 or ds <= 0:
            continue
        steps = ds / dt * (t1 - t0).total_seconds()
        if best is None or inside.height > best[2]:
            best = (steps, str(src), inside.height)
    return (best[0], f"the step numbers of {best[1]}") if best else None


def _evidence(row: dict, d: dict) -> list[Evidence]:
    """The first and the latest allocation of the site still live at the dump."""
    out = [Evidence(path=row["source"] or "?", line=int(row["line"] or 0), text=row["text"] or "")]
    first = d.get("first_line")
    if isinstance(first, int) and first != row["line"] and isinstance(d.get("first_text"), str):
        out.insert(0, Evidence(path=row["source"] or "?", line=first, text=d["first_text"]))
    return out


def allocation_findings(events: pl.DataFrame, samples: pl.DataFrame) -> list[Finding]:
    sites = rows_where(events, pl.col("kind") == "allocation_site")
    if sites.height == 0:
        return []
    out: list[Finding] = []
    footprint: dict[tuple, list[tuple[dict, dict]]] = {}
    for row in sites.iter_rows(named=True):
        d = detail_dict(row["detail"])
        trace = d.get("trace") if isinstance(d.get("trace"), dict) else {}
        hist = d.get("histogram") if isinstance(d.get("histogram"), list) else []
        counts = np.array([h[0] if isinstance(h, list) and h and isinstance(h[0], int) else 0 for h in hist])
        quarters = ([int(q.sum()) for q in np.array_split(counts, SITE_QUARTERS)] if counts.size >= SITE_QUARTERS
                    else [0] * SITE_QUARTERS)
        t0, t1 = _utc(trace.get("start")), _utc(trace.get("end"))
        steps, steps_from = trace.get("steps"), trace.get("steps_from")
        rhythm = isinstance(steps_from, str) and steps_from.startswith("the trace's own rhythm")
        if (steps is None or rhythm) and t0 is not None and t1 is not None:   # a step log counts them better
            got = _steps_from_log(samples, t0, t1)
            if got is not None:
                steps, steps_from = got
        by_entries = d.get("entry_quarters") if isinstance(d.get("entry_quarters"), list) else []
        # steady on the trace's clock, or over its entries: a pause (data loading before the first step)
        # holds a quarter of the clock and no allocations
        steady = all(q > 0 for q in quarters) or (len(by_entries) == SITE_QUARTERS and all(q > 0 for q in by_entries))
        if steady and (steps is None or steps >= SITE_MIN_STEPS):
            out.append(_leak(row, d, trace, quarters, steps, steps_from, t0, t1))
        elif (d.get("live_bytes") or 0) > 0:
            footprint.setdefault((row["source"], trace.get("device")), []).append((row, d))
    for (source, device), items in footprint.items():
        out.append(_footprint(source, device, items))
    return out


def _leak(row: dict, d: dict, trace: dict, quarters: list[int], steps, steps_from, t0, t1) -> Finding:
    site = d.get("site") or "?"
    grown = int(d.get("survivor_bytes") or 0)
    survivors = int(d.get("survivors") or 0)
    seconds = trace.get("seconds")
    per_hour = grown / seconds * 3600.0 if isinstance(seconds, (int, float)) and seconds > 0 else None
    per_step = grown / steps if steps else None
    span = (f"{steps:.0f} steps" if steps else
            f"{seconds:.1f} s" if isinstance(seconds, (int, float)) else f"{trace.get('entries', '?')} entries")
    rates = [x for x in (f"{human(per_step)}/step" if per_step else None,
                         rate_text(per_hour, seconds) if per_hour else None) if x]
    f = Finding(kind="allocation_leak", severity="warning", summary="", source=row["source"],
                bytes=int(d.get("live_bytes") or 0),
                growth_bytes=grown, rate_bytes_per_hour=per_hour, rate_bytes_per_step=per_step,
                start=t0, end=t1, start_index=None if t0 is not None else trace.get("start"))
    f.summary = (f"Allocations from {site} keep accumulating: {survivors} made during the trace's {span} are still "
                 f"live at the dump (+{human(grown)}{', ' + ', '.join(rates) if rates else ''}), "
                 f"{d.get('live_count', 0)} in all ({human(f.bytes)}).")
    f.evidence = _evidence(row, d)
    f.allocation = {"site": site, "path": d.get("frames") or [], "count": d.get("live_count"),
                    "live_bytes": d.get("live_bytes"), "survivors": survivors, "survivor_bytes": grown,
                    "allocations": d.get("allocs"), "quarters": quarters, "steps": steps, "steps_from": steps_from,
                    "device": trace.get("device"), "trace_start": trace.get("start"), "trace_end": trace.get("end"),
                    "seconds": trace.get("seconds"),
                    "start_dropped": trace.get("start_dropped")}
    f.detail = {"site": site, "frames": d.get("frames") or [], "live_count": d.get("live_count"),
                "survivors_per_quarter": quarters, "steps_in_trace": round(steps, 1) if steps else None,
                "steps_from": steps_from}
    if steps is None:
        f.checks.append("The trace's steps are unknown (no Optimizer.step annotations, no step log on the same "
                        "clock): a trace shorter than a few steps can show one step's working set this way.")
    f.causes = [f"Tensors allocated at {site} are kept across steps: appended to a list, stored on a module or "
                "an object that outlives the step, or a loss or output kept with its autograd graph."]
    f.checks.insert(0, f"Follow what the code at {site} returns: where it is stored, and whether it is "
                       ".detach()ed or converted with .item(); compare two snapshots a few steps apart.")
    return f


def _footprint(source: str, device, items: list[tuple[dict, dict]]) -> Finding:
    items = sorted(items, key=lambda x: -(x[1].get("live_bytes") or 0))
    total = sum(d.get("live_bytes") or 0 for _, d in items)
    sites = [{"site": d.get("site"), "path": d.get("frames") or [], "count": d.get("live_count"),
              "bytes": d.get("live_bytes"), "line": r["line"], "text": r["text"]} for r, d in items[:FOOTPRINT_SITES]]
    named = ", ".join(f"{s['site']} {human(s['bytes'] or 0)}" for s in sites[:4])
    f = Finding(kind="allocation_footprint", severity="info", source=source, bytes=total,
                summary=(f"At the dump, {human(total)} is held at {len(items)} call path"
                         f"{'s' if len(items) != 1 else ''} that allocated once and kept it, or hold the step's "
                         f"working set (weights, optimizer state, caches): {named}; not a leak."))
    f.evidence = [Evidence(path=r["source"] or "?", line=int(r["line"] or 0), text=r["text"] or "")
                  for r, _ in items[:3]]
    f.allocation = {"device": device, "sites": sites, "sites_total": len(items)}
    return f


def _close(a: float, b: float) -> bool:
    return a > 0 and b > 0 and abs(a - b) <= SITE_MATCH * max(a, b)


def _same_gpu(site: Finding, lk: Finding) -> bool:
    return site.gpu is None or lk.gpu is None or str(site.gpu) == str(lk.gpu)


def _name(lk: Finding, sites: list[tuple[Finding, str, float]]) -> None:
    """The leak's text and JSON name its sites (the first in `site`, all in `sites`), their evidence added."""
    said = []
    for site_f, site, each in sites:
        ev = site_f.evidence[0] if site_f.evidence else None
        item = {"site": site, "bytes_per_step": each, "from": site_f.kind,
                "path": ev.path if ev else site_f.source, "line": ev.line if ev else None}
        lk.detail.setdefault("site", item)
        lk.detail.setdefault("sites", []).append(item)
        said.append(f"{site} ({human(each)} a step, {site_f.kind.replace('_', ' ')})")
        if ev is not None:
            lk.evidence.append(ev)
    lk.summary = lk.summary[:-1] + f"; the code: {' and '.join(said)}."


def name_leak_sites(findings: list[Finding]) -> None:
    """A GPU leak names the code that leaks: the snapshot's leak site, or the compute-sanitizer call
    path, whose bytes per step match the leak's own. A sanitizer path of the caching allocator is its
    cache at exit only when nothing says otherwise: one allocation of the leak's size per step, for
    several steps, is the pool growing for tensors kept there (freed ones would have been reused)."""
    leaks = [f for f in findings if f.kind == "leak" and f.series != "host.rss" and f.rate_bytes_per_step]
    for lk in leaks:
        per = float(lk.rate_bytes_per_step)
        cands = []
        for f in findings:
            if not _same_gpu(f, lk):
                continue
            if f.kind == "allocation_leak" and f.rate_bytes_per_step and _close(f.rate_bytes_per_step, per):
                cands.append((abs(f.rate_bytes_per_step - per), f, f.allocation["site"], f.rate_bytes_per_step))
            elif f.kind == "sanitizer_leak" and (f.detail.get("count") or 0) >= SITE_MIN_STEPS and f.bytes:
                each = f.bytes / f.detail["count"]
                if _close(each, per):
                    cands.append((abs(each - per), f, f.detail.get("site") or "?", each))
        sites = [f for f in findings if f.kind == "allocation_leak" and f.rate_bytes_per_step and _same_gpu(f, lk)]
        if not cands and len(sites) > 1 and _close(sum(f.rate_bytes_per_step for f in sites), per):
            # two bugs in one step (a list of features, a loss kept with its graph): together the leak
            _name(lk, [(f, f.allocation["site"], f.rate_bytes_per_step) for f in sites])
            continue
        if not cands:
            continue
        _, site_f, site, each = min(cands, key=lambda c: c[0])
        _name(lk, [(site_f, site, each)])
        if site_f.kind == "sanitizer_leak" and site_f.detail.get("expected"):
            n = site_f.detail["count"]
            site_f.detail["expected"] = False
            site_f.severity = "warning"
            site_f.summary = (f"compute-sanitizer: {n} allocations never freed ({human(site_f.bytes)}) from {site}: "
                              f"one of {human(each)} a step, the leak's own growth per step: the caching allocator "
                              "grew its pool for tensors kept there (freed ones would have been reused), not a "
                              "cache at exit.")
            site_f.causes = [f"Tensors allocated at {site} are kept across steps (appended to a list, stored on an "
                             "object that outlives the step)."]
