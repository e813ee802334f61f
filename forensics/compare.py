"""`gpu-forensics compare BEFORE AFTER`: did the fix work?

Each side is analyzed exactly as `report` analyzes it (forensics.pipeline.run, then the report's JSON
summary), and the two are put side by side:
- `outcome`: `fixed` (a leak before, none after), `regressed` (none before, a leak after),
  `still_leaking` (both; with the leak rate of each), `no_leak` (neither). "A leak" is the side's
  verdict `leak`, as `report` states it;
- per memory series (GPU, process, allocator readings) its growth rate, peak, growth and onset on
  each side, matched by what the series is (file name, GPU, series, process name or marker tag), never
  by pid: the fixed run has other pids;
- CUDA OOMs and kernel OOM kills on each side;
- leak sites matched by call path: both runs' compute-sanitizer leaks grouped together the way the
  report groups them (detect/callpaths.py: the helper and the caller that differs), and the call paths
  of a memory snapshot's allocation_leak findings, with frames known by function and file only, without line numbers or offsets (which a fix moves) or parameter lists
  (which the text and XML reports spell differently);
- the memory curves of each matched series overlaid on one axis: the step when both sides' series
  carry steps, else the seconds since the side's job started (its first job lifetime's start, else its
  first reading).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from forensics import pipeline
from forensics import report as rep
from forensics.detect.callpaths import sanitizer_groups
from forensics.frames import rows_where
from forensics.report.formatting import instant, verdict_words
from forensics.report.html import environment, script_json
from forensics.report.markdown import md_text
from forensics.detect.findings import iso
from forensics.kinds import KINDS
from forensics.options import Options
from forensics.units import human, rate_text
from forensics.version import __version__

OUTCOMES = ("fixed", "regressed", "still_leaking", "no_leak")
MAX_ROWS = 16          # series rows in the table
MAX_CHARTS = 6         # overlaid charts
MAX_SITES = 20         # leak sites
CURVE_BUCKETS = 200    # min/max buckets per curve: the file stays small whatever the run's length
SERIES_ORDER = {"memory.used": 0, "process.used": 1, "allocated": 2, "reserved": 3}
FATAL = ("gpu_oom", "oom_kill")
SERIES_KEY = ("source", "host", "gpu", "pid", "series", "label")


@dataclass
class Side:
    name: str              # before | after
    paths: list[str]
    bundle: object
    analysis: object
    summary: dict


def analyze(name: str, paths: list[str], opts: Options, stage=None) -> Side:
    bundle, analysis = pipeline.run(paths, opts, stage=stage)
    return Side(name, list(paths), bundle, analysis, rep.summary(bundle, analysis))


# ---- what each side says ---------------------------------------------------------------------------

def _leak_rate(summary: dict) -> dict | None:
    """The fastest leak finding's rate (per hour and per step), or None."""
    leaks = [f for f in summary["findings"] if f["kind"] == "leak" and f.get("rate_bytes_per_hour") is not None]
    if not leaks:
        return None
    f = max(leaks, key=lambda f: f["rate_bytes_per_hour"])
    return {"bytes_per_hour": f["rate_bytes_per_hour"], "bytes_per_step": f.get("rate_bytes_per_step"),
            "series": f.get("series"), "gpu": f.get("gpu"), "pattern": f.get("pattern"),
            "start": f.get("start"), "start_index": f.get("start_index"), "summary": f["summary"]}


def outcome(before: dict, after: dict) -> str:
    leak_before, leak_after = before["verdict"] == "leak", after["verdict"] == "leak"
    if leak_before and leak_after:
        return "still_leaking"
    if leak_before:
        return "fixed"
    if leak_after:
        return "regressed"
    return "no_leak"


def _rate_words(rate: dict | None) -> str:
    if not rate:
        return "—"
    text = rate_text(rate["bytes_per_hour"], 60.0) or "?"
    if rate.get("bytes_per_step") is not None:
        text += f", {human(rate['bytes_per_step'])}/step"
    return text


def _onset_words(rate: dict | None) -> str:
    if not rate:
        return "—"
    if rate["start"]:
        return instant(rate["start"])
    return f"sample/step {rate['start_index']}" if rate["start_index"] is not None else "—"


def _leak_words(summary: dict, rate: dict | None) -> str:
    """A leak in a few words: its rate, else (a sanitizer's or a residual process's leak) the verdict's reason."""
    return _rate_words(rate) if rate else (summary.get("verdict_reason") or "a leak").rstrip(".")


def _outcome_reason(kind: str, before: dict, after: dict, rb: dict | None, ra: dict | None) -> str:
    if kind == "fixed":
        text = f"The leak before ({_leak_words(before, rb)}) is gone after: verdict {verdict_words(after['verdict'])}."
    elif kind == "regressed":
        text = f"No leak before (verdict {verdict_words(before['verdict'])}); after, a leak: {_leak_words(after, ra)}."
    elif kind == "still_leaking":
        text = f"Still leaking: {_leak_words(before, rb)} before; {_leak_words(after, ra)} after."
        if rb and ra and rb["bytes_per_hour"] and ra["bytes_per_hour"]:
            text += f" The rate is {ra['bytes_per_hour'] / rb['bytes_per_hour']:.0%} of what it was."
    else:
        text = f"No leak on either side (verdicts {verdict_words(before['verdict'])} and {verdict_words(after['verdict'])})."
    if after["verdict"] == "inconclusive":
        text += " The after run is inconclusive: it holds too little data to rule a leak out, record it longer."
    return text


def _counts(summary: dict) -> dict:
    kinds = [f["kind"] for f in summary["findings"]]
    return {k.name: kinds.count(k.name) for k in KINDS.values() if k.compared}


# ---- series, matched across the two runs -----------------------------------------------------------

def _role(r) -> tuple:
    """What a series is, the same in both runs: file name, GPU, series, and the process name or tag."""
    return (os.path.basename(r.source or ""), r.gpu, r.series, r.label)


def _series_by_role(side: Side) -> dict[tuple, object]:
    """The judged series of each role; of several (pids of the same name), the one that grew most."""
    out: dict[tuple, object] = {}
    for r in side.analysis.series:
        if r.classification == "too_short":
            continue
        key = _role(r)
        if key not in out or (r.growth_bytes or 0) > (out[key].growth_bytes or 0):
            out[key] = r
    return out


def _when(v):
    """A time as ISO-8601 UTC, a step or sample number as it is."""
    return iso(v) if isinstance(v, datetime) else v


def _series_facts(r) -> dict | None:
    if r is None:
        return None
    leak = r.leak or {}
    return {"pid": r.pid, "classification": r.classification, "pattern": leak.get("pattern"),
            "rate_bytes_per_hour": leak.get("rate_bytes_per_hour"),
            "rate_bytes_per_step": leak.get("rate_bytes_per_step"),
            "growth_bytes": r.growth_bytes, "peak_bytes": r.peak_bytes, "onset": _when(r.onset),
            "readings": r.n}


def _rows(before: Side, after: Side) -> list[dict]:
    b, a = _series_by_role(before), _series_by_role(after)
    rows = []
    for key in set(b) | set(a):
        file, gpu, series, label = key
        rb, ra = b.get(key), a.get(key)
        rows.append({"file": file, "gpu": gpu, "series": series, "label": label,
                     "before": _series_facts(rb), "after": _series_facts(ra), "_b": rb, "_a": ra})

    def rank(row):
        leaking = any(row[s] and row[s]["pattern"] for s in ("before", "after"))
        return (not leaking, SERIES_ORDER.get(row["series"], 9), str(row["gpu"]), row["file"], str(row["label"]))
    rows.sort(key=rank)
    return rows


# ---- leak sites ------------------------------------------------------------------------------------

def _snapshot_path(frames: list) -> tuple:
    """A snapshot call path (`file.py:line function`, innermost first) as `function (file.py)`."""
    out = []
    for fr in frames:
        where, _, name = str(fr).partition(" ")
        if where.startswith("("):      # "(library frames folded)"
            continue
        out.append(f"{name} ({where.rsplit(':', 1)[0]})")
    return tuple(out)


def _snapshot_rows(before: Side, after: Side) -> list[dict]:
    """A memory snapshot's allocation_leak sites of both runs, matched by call path."""
    per: dict[tuple, dict] = {}
    for side in (before, after):
        for f in side.analysis.findings:
            if f.kind != "allocation_leak" or not f.allocation:
                continue
            e = per.setdefault(_snapshot_path(f.allocation.get("path") or []),
                               {"site": f.allocation.get("site"), "before": None, "after": None})
            c = e[side.name] = e[side.name] or {"count": 0, "bytes": 0}
            c["count"] += int(f.allocation.get("count") or 0)
            c["bytes"] += f.bytes or 0
    return [{"call_path": list(path), "site": e["site"], "expected": False, "before": e["before"],
             "after": e["after"], "status": "still" if e["before"] and e["after"] else "gone" if e["before"] else "new"}
            for path, e in per.items()]


def _site_rows(before: Side, after: Side) -> list[dict]:
    """The leak sites of both runs, grouped together by call path (detect/callpaths.py, frames known
    by function and file: a fix moves lines) so that a site splits the same way on both sides, then
    counted per side."""
    parts = [rows_where(side.bundle.events, pl.col("kind") == "sanitizer_leak").with_columns(
        pl.lit(side.name).alias("_side")) for side in (before, after)]
    parts = [p for p in parts if p.height]
    rows = _snapshot_rows(before, after)
    for g in (sanitizer_groups(pl.concat(parts), exact=False) if parts else []):
        per: dict[str, dict] = {}
        for r in g.rows:
            c = per.setdefault(r["_side"], {"count": 0, "bytes": 0})
            c["count"] += 1
            c["bytes"] += r["bytes"] or 0
        sb, sa = per.get("before"), per.get("after")
        status = "still" if sb and sa else "gone" if sb else "new"
        rows.append({"call_path": [f"{name} ({where})" if where else name for name, where, _ in g.path],
                     "site": g.label, "status": status, "expected": g.expected, "before": sb, "after": sa})
    rows.sort(key=lambda r: (r["expected"], {"new": 0, "still": 1, "gone": 2}[r["status"]],
                             -max((r[s] or {}).get("bytes", 0) for s in ("before", "after"))))
    return rows


# ---- curves ----------------------------------------------------------------------------------------

def _job_start(side: Side) -> datetime | None:
    starts = [lt.get("start") for r in side.analysis.series for lt in (r.lifetimes or [])]
    starts = [s for s in starts if isinstance(s, datetime)]
    if starts:
        return min(starts)
    times = side.bundle.samples["time"].drop_nulls()
    return times.min() if times.len() else None


def _points(side: Side, r) -> pl.DataFrame:
    s = side.bundle.samples
    cond = pl.lit(True)
    for k in SERIES_KEY:
        v = getattr(r, k)
        cond = cond & (pl.col(k).is_null() if v is None else (pl.col(k) == v))
    return s.filter(cond & pl.col("bytes").is_not_null()).select("time", "step", "seq", "bytes")


def _bucketed(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 points (min and max) per bucket across the x range, in x order."""
    if len(x) <= 2 * CURVE_BUCKETS:
        return x, y
    edges = np.linspace(x[0], x[-1], CURVE_BUCKETS + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, CURVE_BUCKETS - 1)
    keep = []
    for b in np.unique(idx):
        members = np.flatnonzero(idx == b)
        lo, hi = members[np.argmin(y[members])], members[np.argmax(y[members])]
        keep.extend(sorted({lo, hi}))
    keep = np.array(keep)
    return x[keep], y[keep]


def _curve(side: Side, r, axis: str) -> tuple[np.ndarray, np.ndarray] | None:
    df = _points(side, r)
    if axis == "step":
        df = df.filter(pl.col("step").is_not_null()).sort("step", "seq")
        x = df["step"].cast(pl.Float64).to_numpy()
    else:
        t0 = _job_start(side)
        df = df.filter(pl.col("time").is_not_null()).sort("time")
        if t0 is None or not df.height:
            return None
        x = ((df["time"] - t0).dt.total_microseconds() / 1e6).to_numpy()
    if not df.height:
        return None
    return _bucketed(x, df["bytes"].cast(pl.Float64).to_numpy())


def _has_steps(side: Side, r) -> bool:
    return r is not None and _points(side, r)["step"].drop_nulls().len() >= 2


_W, _H = 720, 240
_L, _R, _T, _B = 64, 12, 12, 34


def _nice(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _chart(row: dict, before: Side, after: Side) -> dict | None:
    rb, ra = row["_b"], row["_a"]
    axis = "step" if _has_steps(before, rb) and _has_steps(after, ra) else "time"
    curves = {}
    for name, side, r in (("before", before, rb), ("after", after, ra)):
        if r is not None:
            c = _curve(side, r, axis)
            if c is not None and len(c[0]):
                curves[name] = c
    if not curves:
        return None
    x_lo = min(float(c[0].min()) for c in curves.values())
    x_hi = max(float(c[0].max()) for c in curves.values())
    y_hi = max(float(c[1].max()) for c in curves.values()) or 1.0
    x_hi = x_hi if x_hi > x_lo else x_lo + 1
    unit, factor = next(((u, f) for u, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)) if y_hi >= f),
                        ("B", 1))
    ystep = _nice(y_hi / factor)
    y_top = math.ceil(y_hi / factor / ystep) * ystep * factor
    px = lambda x: _L + (x - x_lo) / (x_hi - x_lo) * (_W - _L - _R)   # noqa: E731
    py = lambda y: _H - _B - y / y_top * (_H - _T - _B)               # noqa: E731
    lines = []
    for name, (x, y) in curves.items():
        pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, y))
        lines.append({"side": name, "points": pts})
    xstep = _nice(x_hi - x_lo)
    xticks = []
    v = math.ceil(x_lo / xstep) * xstep
    while v <= x_hi + 1e-9:
        xticks.append({"px": round(px(v), 1), "label": f"{v:g}" if axis == "step" else f"{v:g} s"})
        v += xstep
    yticks = [{"py": round(py(i * ystep * factor), 1), "label": f"{i * ystep:g} {unit}"}
              for i in range(int(round(y_top / factor / ystep)) + 1)]
    what = row["label"] if row["series"] != "process.used" else os.path.basename(str(row["label"] or "?"))
    title = f"GPU {row['gpu']} {row['series']}" + (f" [{what}]" if row["label"] else "") + f" — {row['file']}"
    return {"title": title, "axis": axis,
            "axis_label": "step" if axis == "step" else "seconds since the job started",
            "w": _W, "h": _H, "left": _L, "right": _W - _R, "top": _T, "bottom": _H - _B,
            "lines": lines, "xticks": xticks, "yticks": yticks}


# ---- the document ----------------------------------------------------------------------------------

def build(before: Side, after: Side) -> tuple[dict, dict]:
    """(the JSON document, the extra context the HTML and Markdown need)."""
    sb, sa = before.summary, after.summary
    kind = outcome(sb, sa)
    rb, ra = _leak_rate(sb), _leak_rate(sa)
    rows = _rows(before, after)
    sites = _site_rows(before, after)
    doc = {
        "tool": "gpu-forensics", "version": __version__, "document": "compare",
        "outcome": kind, "outcome_reason": _outcome_reason(kind, sb, sa, rb, ra),
        "leak_rate_before": rb, "leak_rate_after": ra,
        "events": {"before": _counts(sb), "after": _counts(sa)},
        "series": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
        "leak_sites": sites,
        "before": sb, "after": sa,
    }
    charts = []
    for row in rows:
        if len(charts) >= MAX_CHARTS:
            break
        c = _chart(row, before, after)
        if c is not None:
            charts.append(c)
    extra = {"charts": charts, "paths": {"before": before.paths, "after": after.paths}}
    return doc, extra


def _rate_cell(facts: dict | None) -> str:
    if not facts:
        return "—"
    if facts["rate_bytes_per_hour"] is None:
        return verdict_words(facts["classification"])
    text = rate_text(facts["rate_bytes_per_hour"], 60.0) or verdict_words(facts["classification"])
    if facts["rate_bytes_per_step"] is not None:
        text += f" ({human(facts['rate_bytes_per_step'])}/step)"
    return text


def _view_rows(doc: dict) -> list[dict]:
    out = []
    for r in doc["series"][:MAX_ROWS]:
        who = os.path.basename(str(r["label"])) if r["series"] == "process.used" and r["label"] else r["label"]
        cells = {}
        for s in ("before", "after"):
            f = r[s]
            cells[s] = {"rate": _rate_cell(f), "peak": human(f["peak_bytes"]) if f else "—",
                        "onset": instant(f["onset"]) if f and f["onset"] is not None and f["pattern"] else "—",
                        "pid": f["pid"] if f else None}
        out.append({"name": f"GPU {r['gpu']} {r['series']}" + (f" [{who}]" if who else ""), "file": r["file"], **cells})
    return out


def _view(doc: dict, extra: dict) -> dict:
    sides = {}
    for s in ("before", "after"):
        summ = doc[s]
        sides[s] = {"verdict": verdict_words(summ["verdict"]), "reason": summ.get("verdict_reason") or "",
                    "rate": _rate_words(doc[f"leak_rate_{s}"]), "events": doc["events"][s],
                    "paths": extra["paths"][s],
                    "inputs": sum(1 for i in summ["inputs"] if i["format"]),
                    "unread": sum(1 for i in summ["inputs"] if not i["format"])}
    return {"doc": doc, "outcome_text": verdict_words(doc["outcome"]), "sides": sides, "rows": _view_rows(doc), "charts": extra["charts"],
            "sites": doc["leak_sites"][:MAX_SITES], "sites_omitted": max(0, len(doc["leak_sites"]) - MAX_SITES)}


def render_html(doc: dict, extra: dict) -> str:
    return environment().get_template("compare.html.j2").render(v=_view(doc, extra),
                                                         summary_json=script_json(_embedded(doc)))


def _embedded(doc: dict) -> dict:
    """The JSON in the HTML, without the two full summaries' evidence (the reports carry that)."""
    slim = dict(doc)
    for s in ("before", "after"):
        slim[s] = {k: v for k, v in doc[s].items() if k != "findings"} | {
            "findings": [{k: v for k, v in f.items() if k != "evidence"} for f in doc[s]["findings"]]}
    return slim


def render_markdown(doc: dict, extra: dict) -> str:
    v = _view(doc, extra)
    t = md_text
    lines = [f"### gpu-forensics compare: **{verdict_words(doc['outcome'])}**", "", t(doc["outcome_reason"]), "",
             "| | before | after |", "| --- | --- | --- |"]
    sb, sa = v["sides"]["before"], v["sides"]["after"]
    lines.append(f"| verdict | {t(sb['verdict'])} | {t(sa['verdict'])} |")
    lines.append(f"| leak rate | {t(sb['rate'])} | {t(sa['rate'])} |")
    lines.append(f"| leak onset | {t(_onset_words(doc['leak_rate_before']))} | {t(_onset_words(doc['leak_rate_after']))} |")
    for key, label in (("gpu_oom", "CUDA OOMs"), ("oom_kill", "OOM kills"), ("residual_process", "residual processes")):
        if sb["events"][key] or sa["events"][key]:
            lines.append(f"| {label} | {sb['events'][key]} | {sa['events'][key]} |")
    for r in v["rows"][:6]:
        lines.append(f"| {t(r['name'])} | {t(r['before']['rate'])}, peak {t(r['before']['peak'])} "
                     f"| {t(r['after']['rate'])}, peak {t(r['after']['peak'])} |")
    if v["sites"]:
        gone = sum(1 for s in v["sites"] if s["status"] == "gone")
        still = sum(1 for s in v["sites"] if s["status"] == "still")
        new = sum(1 for s in v["sites"] if s["status"] == "new")
        lines.append(f"| leak sites | {gone + still} | {still + new} ({gone} gone, {new} new) |")
    lines += ["", f"Before: {t(', '.join(sb['paths']))} · after: {t(', '.join(sa['paths']))}"]
    return "\n".join(lines) + "\n"
