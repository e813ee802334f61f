"""Which charts the report draws and what is on them (series, markers, onsets, jobs, close-ups), as plain data."""
from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

import polars as pl

from forensics.detect.events import EVENT_ORDER
from forensics.detect.measure import HOST_SERIES, gpu_of_unnamed
from forensics.frames import rows_where
from forensics.detect.jobs import FATAL_KINDS
from forensics.detect.leaks import series_words
from forensics.report.events import EVENT_STYLE, event_label
from forensics.report.formatting import Clock, base_name, clip, epoch, lookup, natural, xround
from forensics.report.limits import (MARKER_COLUMNS, MAX_GPU_CHARTS, MAX_MARKERS_PER_CHART, MAX_MARKERS_PROCESS,
                                     MAX_MARKERS_ZOOM, MAX_OTHER_CHARTS, MAX_PROCESS_CHARTS, MAX_SERIES_PER_CHART,
                                     PLOT_BUCKETS, PROCESS_BUCKETS, ZOOM_BUCKETS, ZOOM_MIN_READINGS)
from forensics.report.series import SERIES_KEY, envelopes, series_table, sparkline
from forensics.units import human

SERIES_COLORS = {
    "memory.used": "#1f6fb4",
    "process.used": "#7b4fb3",
    "allocated": "#2e9a3a",
    "reserved": "#e07b10",
    "max_allocated": "#8fcf8f",
    "max_reserved": "#f5b971",
    "host.rss": "#8c5a3c",
    "host.used": "#5f6b73",
}
FALLBACK_COLORS = ("#1f6fb4", "#e07b10", "#2e9a3a", "#c0392b", "#7b4fb3", "#8c5a3c", "#d45fa8", "#5f6b73",
                   "#a8a81a", "#16a3b8")


def _chart_group(row: dict) -> tuple:
    if row["pid"] is not None:
        return ("process", row["host"], row["pid"])
    if row["gpu"] is not None:
        return ("gpu", row["host"], row["gpu"])
    return ("source", row["host"], row["source"])


def _merge_unplaced(groups: dict) -> None:
    """A framework log that names no GPU (train.log's allocated/reserved) joins the chart of the GPU
    it belongs to, by the detector's rule (detect.measure.gpu_of_unnamed), so both views share a time axis."""
    gpus = {(g["host"], gpu) for g in groups.values() for gpu in g["gpus"]}
    for cid in [c for c in groups if c[0] == "source"]:
        if _host_only(groups[cid]):
            continue    # the host's memory is no GPU's: its chart stays its own
        kind, host, _, xkind = cid
        place = gpu_of_unnamed(host, gpus)
        target = ("gpu", *place, xkind) if place else None
        if target not in groups:
            continue
        src = groups.pop(cid)
        groups[target]["series"].extend(src["series"])
        groups[target]["sources"] |= src["sources"]


def _series_results(analysis) -> dict[tuple, object]:
    """The detector's per-series results keyed like our series (source, host, gpu, pid, series, label)."""
    out = {}
    for sr in lookup(analysis, "series", default=None) or []:
        key = lookup(sr, "key")
        if isinstance(key, dict):
            k = tuple(key.get(n) for n in SERIES_KEY)
        elif isinstance(key, (tuple, list)) and len(key) == len(SERIES_KEY):
            k = tuple(key)
        elif key is not None and all(hasattr(key, n) for n in SERIES_KEY):
            k = tuple(getattr(key, n) for n in SERIES_KEY)
        else:
            k = tuple(lookup(sr, n) for n in SERIES_KEY)
        out[k] = sr
    return out


def _x_of(value, xkind: str) -> float | None:
    """A change point / onset as given by the detector -> our x (epoch s, step or index)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return epoch(value) if xkind == "time" else None
    if isinstance(value, dict):
        return _x_of(lookup(value, "time" if xkind == "time" else "x", "index", "step", "x"), xkind)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    for name in ("time", "x", "index", "step"):
        if hasattr(value, name):
            return _x_of(getattr(value, name), xkind)
    return None


def _series_name(row: dict, chart_kind: str) -> str:
    name = series_words(row["series"]) if row["series"] else "memory"
    if chart_kind == "process" and row["gpu"] is not None:
        name += f" on GPU {row['gpu']}"
    return name


def _host_only(group: dict) -> bool:
    return all(r["series"] in HOST_SERIES for r in group["series"])


def _chart_title(kind: str, host, ident, labels: list[str], xkind: str, multi_host: bool,
                 host_memory: bool = False) -> str:
    where = f" on {host}" if multi_host and host else ""
    if kind == "gpu":
        title = f"GPU {ident}{where}"
    elif kind == "process":
        names = ", ".join(sorted({x for x in labels if x}))[:80]
        title = f"Process {ident}" + (f" ({names})" if names else "") + where
    else:
        title = ("Host memory, " if host_memory else "") + f"{base_name(ident)}{where}"
    if xkind == "step":
        title += ", by step (no clock)"
    elif xkind == "index":
        title += ", by sample number (no clock)"
    return title


def _events_for_charts(events: pl.DataFrame) -> list[dict]:
    drawn = [k for k, v in EVENT_STYLE.items() if v[2]]
    ev = rows_where(events, pl.col("time").is_not_null() & pl.col("kind").is_in(drawn))
    if ev.is_empty():
        return []
    # markers merged at one pixel name the first event: ties at one instant by EVENT_ORDER, not by chance
    ev = ev.sort(EVENT_ORDER, maintain_order=True).with_columns(
        (pl.col("time").dt.epoch("us").cast(pl.Float64) / 1e6).alias("x"))
    return ev.select("x", "kind", "pid", "process", "gpu", "bytes", "detail", "text", "source", "line").to_dicts()


def _markers(evs: list[dict], lo: float, hi: float, clock: Clock, buckets: int,
             cap: int = MAX_MARKERS_PER_CHART) -> tuple[list, dict]:
    """Events in [lo, hi] as chart markers, merged per pixel column and kind; plus counts per kind."""
    span = (hi - lo) or 1.0
    merged: dict[tuple, dict] = {}
    counts: Counter = Counter()
    for e in evs:
        if e["x"] < lo or e["x"] > hi:
            continue
        counts[e["kind"]] += 1
        col = int((e["x"] - lo) / span * buckets)
        key = (col, e["kind"])
        m = merged.get(key)
        if m is None:
            w = clock.when(e["x"])
            merged[key] = {
                "x": round(e["x"], 3), "kind": e["kind"], "count": 1, "label": event_label(e),
                "when": w["local"] if w else None,
                "where": f"{e['source']}:{e['line']}" if e.get("line") is not None else (e.get("source") or ""),
                # the log line only where it matters most (the events table has all of them)
                "text": clip(e.get("text"), 120) if e["kind"] in FATAL_KINDS or e["kind"] == "xid" else "",
                "fatal": e["kind"] in FATAL_KINDS,
            }
        else:
            m["count"] += 1
    # the rarest, most serious kinds survive the cap first
    order = sorted(merged.values(), key=lambda m: (not m["fatal"], m["kind"] == "marker", m["x"]))
    kept = sorted(order[:cap], key=lambda m: m["x"])
    return kept, dict(sorted(counts.items()))


def _event_applies(e: dict, chart: dict, pid_gpus: dict) -> bool:
    """Events of a GPU go on its charts; an event of a process without a GPU goes on the GPUs that
    process was seen on (else on every GPU); host-wide ones go everywhere."""
    if chart["kind"] == "gpu":
        if e["gpu"] is None and e["pid"] is not None and e["pid"] in pid_gpus:
            return chart["gpu"] in pid_gpus[e["pid"]]
        return e["gpu"] is None or e["gpu"] == chart["gpu"]
    if chart["kind"] == "process":  # its own events, and the job's markers
        return e["pid"] == chart["pid"] or (e["pid"] is None and e["gpu"] is None and e["kind"] == "marker")
    return e["source"] == chart["source"] or (e["gpu"] is None and e["pid"] is None)


def build_charts(bundle, analysis, clock: Clock) -> tuple[list, list, dict]:
    """Charts per GPU, per process and per untied source; also returns the omitted ones and the row data
    that zoom panels need."""
    rows, table = series_table(bundle.samples)
    if table.is_empty():
        return [], [], {"rows": rows, "charts": {}}
    multi_host = table["host"].n_unique() > 1
    results = _series_results(analysis)
    findings = list(lookup(analysis, "findings", default=None) or [])
    gpu_capacity: dict[tuple, int] = {}
    for r in rows_where(table, pl.col("series") == "memory.used").iter_rows(named=True):
        if r["capacity"]:
            k = (r["host"], r["gpu"])
            gpu_capacity[k] = max(gpu_capacity.get(k, 0), r["capacity"])

    pid_gpus: dict[int, set] = defaultdict(set)
    for r in rows_where(table, pl.col("pid").is_not_null() & pl.col("gpu").is_not_null()).iter_rows(named=True):
        pid_gpus[r["pid"]].add(r["gpu"])
    groups: dict[tuple, dict] = {}
    for r in table.iter_rows(named=True):
        kind, host, ident = _chart_group(r)
        cid = (kind, host, ident, r["xkind"])
        g = groups.setdefault(cid, {"kind": kind, "host": host, "ident": ident, "xkind": r["xkind"],
                                    "series": [], "gpus": set(), "labels": [], "sources": set()})
        g["series"].append(r)
        g["sources"].add(r["source"])
        if r["gpu"] is not None:
            g["gpus"].add(r["gpu"])
        if r["label"]:
            g["labels"].append(r["label"])
    _merge_unplaced(groups)

    # the findings a chart could show, by the key finding_on_chart compares first (every finding
    # against every chart: 25 M calls for 5,000 GPUs)
    by_key: dict[tuple, list] = defaultdict(list)
    for f in findings:
        by_key["pid", f.pid].append(f)
        by_key["gpu", f.gpu].append(f)
        by_key["series", f.series].append(f)

    def mentioned(g) -> bool:
        probe = {"kind": g["kind"], "pid": g["ident"], "gpu": g["ident"], "source": g["ident"],
                 "series": [{"series": s["series"]} for s in g["series"]]}
        key = {"process": "pid", "gpu": "gpu"}.get(g["kind"])
        near = (by_key.get((key, g["ident"]), []) if key else
                [f for name in {s["series"] for s in g["series"]} for f in by_key.get(("series", name), [])])
        return any(finding_on_chart(f, probe) for f in near)

    def rank(g):
        return (not mentioned(g), {"time": 0, "step": 1, "index": 2}[g["xkind"]],
                -max(s["peak"] or 0 for s in g["series"]))

    by_kind = defaultdict(list)
    for g in groups.values():
        by_kind[g["kind"]].append(g)
    chosen, omitted = [], []
    limits = {"gpu": MAX_GPU_CHARTS, "process": MAX_PROCESS_CHARTS, "source": MAX_OTHER_CHARTS}
    for kind in ("gpu", "process", "source"):
        gs = sorted(by_kind.get(kind, []), key=rank)
        # one reading of a process (e.g. a line of the OOM killer's task table) is not a timeline; a
        # GPU's single reading still shows how full it was
        drawable = [g for g in gs if kind == "gpu" or (max(s["n"] for s in g["series"]) >= 2
                                                          and max(s["x1"] for s in g["series"]) > min(s["x0"] for s in g["series"]))]
        keep = drawable[: limits[kind]]
        if kind == "gpu":  # GPUs read best in index order
            keep.sort(key=lambda g: (natural(g["host"]), natural(g["ident"]), g["xkind"]))
        chosen.extend(keep)
        kept = {id(g) for g in keep}
        for g in gs:
            if id(g) not in kept:
                omitted.append({
                    "kind": kind, "title": _chart_title(kind, g["host"], g["ident"], g["labels"], g["xkind"], multi_host, _host_only(g)),
                    "peak": human(max(s["peak"] or 0 for s in g["series"])),
                    "readings": max(s["n"] for s in g["series"]),
                })

    events = _events_for_charts(bundle.events)
    charts, raw = [], {}
    for n, g in enumerate(chosen, start=1):
        series = sorted(g["series"], key=lambda s: (
            not any((f.series == s["series"]) for f in findings), -(s["peak"] or 0)))[:MAX_SERIES_PER_CHART]
        series.sort(key=lambda s: (list(SERIES_COLORS).index(s["series"]) if s["series"] in SERIES_COLORS else 99,
                                   natural(s["gpu"]), natural(s["source"])))
        lo = min(s["x0"] for s in series)
        hi = max(s["x1"] for s in series)
        chart = {
            "id": f"chart{n}", "kind": g["kind"], "host": g["host"], "xkind": g["xkind"],
            "gpu": g["ident"] if g["kind"] == "gpu" else None,
            "pid": g["ident"] if g["kind"] == "process" else None,
            "source": g["ident"] if g["kind"] == "source" else None,
            "gpus": sorted(g["gpus"], key=natural),
            "title": _chart_title(g["kind"], g["host"], g["ident"], g["labels"], g["xkind"], multi_host,
                                   _host_only(g)),
        }
        # events just past the data (the kill usually comes after the last sample) widen the range
        if g["xkind"] == "time":
            margin = max((hi - lo) * 0.1, 120.0)
            near = [e for e in events if lo - margin <= e["x"] <= hi + margin and _event_applies(e, chart, pid_gpus)]
            if near:
                lo, hi = min(lo, near[0]["x"]), max(hi, near[-1]["x"])
        else:
            near = []
        chart.update({"x0": xround(lo), "x1": xround(hi)})
        capacity = max((s["capacity"] or 0 for s in series), default=0) or None
        if capacity is None and g["kind"] == "process":
            capacity = max((gpu_capacity.get((g["host"], gp), 0) for gp in g["gpus"]), default=0) or None
        peak = max(s["peak"] or 0 for s in series)
        chart["capacity"] = capacity
        # a line at capacity would squash a series that peaks far below it: then it is only named
        chart["capacity_drawn"] = bool(capacity and peak >= 0.25 * capacity)
        chart["_series_rows"] = series
        chart["_events"] = near
        charts.append(chart)

    # one vectorized pass for all series of all charts
    env = envelopes(rows, {s["sid"]: (c["x0"], c["x1"]) for c in charts if c["kind"] != "process"
                            for s in c["_series_rows"]}, PLOT_BUCKETS)
    env.update(envelopes(rows, {s["sid"]: (c["x0"], c["x1"]) for c in charts if c["kind"] == "process"
                                 for s in c["_series_rows"]}, PROCESS_BUCKETS))
    for c in charts:
        c["series"] = _series_ctx(c, env, results, findings)
        c["y_min"] = 0
        # an idle GPU (all zeros) still gets a readable axis
        c["y_max"] = max([s["peak"] for s in c["series"]] + ([c["capacity"]] if c["capacity_drawn"] else []) + [1 << 20])
        c["markers"], c["event_counts"] = _markers(
            c["_events"], c["x0"], c["x1"], clock, MARKER_COLUMNS,
            MAX_MARKERS_PROCESS if c["kind"] == "process" else MAX_MARKERS_PER_CHART)
        c["onsets"] = _onsets(c, findings, results, clock)
        # change points of the series the chart is about (every source's own would blur together)
        _, lead = _lead(c, findings)
        c["lead"] = lead["name"] if lead else None
        c["jobs"] = lead["jobs"] if lead else []
        c["change_points"] = _spread(sorted(lead["change_points"]) if lead else [], (c["x1"] - c["x0"]) * 0.01)
        main = c["series"][0] if c["series"] else None
        c["sparkline"] = sparkline(main["runs"], c["x0"], c["x1"]) if main else ""
        c["range"] = _range_text(c["x0"], c["x1"], c["xkind"], clock)
        raw[c["id"]] = {"sids": [s["sid"] for s in c["_series_rows"]], "events": c["_events"],
                        "series_rows": c["_series_rows"]}
    for c in charts:
        del c["_series_rows"], c["_events"]
    return charts, omitted, {"rows": rows, "charts": raw}


def _series_ctx(chart: dict, env: dict, results: dict, findings: list) -> list[dict]:
    out = []
    names = [_series_name(s, chart["kind"]) for s in chart["_series_rows"]]
    dup = {n for n in names if names.count(n) > 1}
    used_colors: set = set()
    for s, name in zip(chart["_series_rows"], names):
        if name in dup:
            # tell same-named series apart by what differs: their label, else their file
            twins = [t for t, n in zip(chart["_series_rows"], names) if n == name]
            if len({t["label"] for t in twins}) == len(twins) and s["label"]:
                extra = s["label"]
            else:
                extra = base_name(s["source"]) + (f", {s['label']}" if s["label"] and chart["kind"] != "process" else "")
            name = f"{name} ({clip(extra, 60)})"
        color = SERIES_COLORS.get(s["series"])
        if color is None or color in used_colors:
            color = next((c for c in FALLBACK_COLORS if c not in used_colors), FALLBACK_COLORS[0])
        used_colors.add(color)
        key = tuple(s[k] for k in SERIES_KEY)
        sr = results.get(key)
        cps = []
        onset = None
        classification = None
        if sr is not None:
            classification = lookup(sr, "classification", "pattern", "kind")
            cps = [x for x in (_x_of(v, chart["xkind"]) for v in (lookup(sr, "change_points", "changepoints", default=None) or [])) if x is not None]
            onset = _x_of(lookup(sr, "onset"), chart["xkind"])
        out.append({
            "sid": s["sid"], "name": name, "series": s["series"], "source": s["source"], "gpu": s["gpu"],
            "pid": s["pid"], "label": s["label"], "color": color,
            "dashed": bool(s["series"] and s["series"].startswith("max_")),
            "n": s["n"], "first": s["first"], "last": s["last"], "low": s["low"], "peak": s["peak"],
            "summary": f"{human(s['first'])} → {human(s['last'])}, peak {human(s['peak'])}",
            "classification": _legend_class(classification, lookup(sr, "lifetimes", default=None) if sr is not None else None),
            "jobs": _jobs_ctx(lookup(sr, "lifetimes", default=None) if sr is not None else None, chart["xkind"]),
            "change_points": [xround(x) for x in cps],
            "onset": xround(onset) if onset is not None else None,
            "runs": env.get(s["sid"], []),
        })
    return out


def _jobs_ctx(lifetimes, xkind: str) -> list[dict]:
    """Each job of a series that holds several, as a band on the chart with its own judgement."""
    if not lifetimes or len(lifetimes) < 2:
        return []
    out = []
    for k, lt in enumerate(lifetimes, 1):
        x0, x1 = _x_of(lt.get("start"), xkind), _x_of(lt.get("end"), xkind)
        if x0 is None or x1 is None:
            continue
        out.append({"x0": xround(x0), "x1": xround(x1), "number": k,
                    "label": f"job {k}: {str(lt.get('classification', '')).replace('_', ' ')}"})
    return out


def _legend_class(classification, lifetimes) -> str | None:
    """The legend's word for a series: the detector's classification of it, and with several jobs in
    the log, each job's own."""
    if not classification:
        return None
    text = str(classification).replace("_", " ")
    if lifetimes and len(lifetimes) > 1:
        words = [str(lt.get("classification", "")).replace("_", " ") for lt in lifetimes]
        text += f" ({len(lifetimes)} jobs: {', '.join(words)})"
    return text


def finding_on_chart(f, chart: dict) -> bool:
    """Does this finding speak about what this chart draws?"""
    if chart["kind"] == "process":
        return f.pid is not None and f.pid == chart["pid"]
    if chart["kind"] == "gpu":
        return f.gpu is not None and f.gpu == chart["gpu"]
    names = {s["series"] for s in chart.get("series", [])}
    return f.series in names and (f.source == chart["source"] or (f.gpu is None and f.pid is None))


def _lead(chart: dict, findings: list) -> tuple[object, dict | None]:
    """The growth finding this chart illustrates (first in the detector's order) and the drawn series
    it names; without one, no finding and the chart's first series."""
    for f in findings:
        if f.kind in ("leak", "cache_growth") and finding_on_chart(f, chart):
            named = [s for s in chart["series"] if s["series"] == f.series]
            same = [s for s in named if f.source is None or s["source"] == f.source]
            if same or named:
                return f, (same or named)[0]
    return None, (chart["series"][0] if chart["series"] else None)


def _onsets(chart: dict, findings: list, results: dict, clock: Clock) -> list[dict]:
    """One onset line per growth finding about this chart, where the finding says growth began;
    without a finding, the earliest onset the detector gives any drawn series. Several lines a few
    seconds apart (one per source of the same GPU) would only blur the point."""
    out = []
    for f in findings:
        if f.kind in ("leak", "cache_growth") and finding_on_chart(f, chart) \
                and any(s["series"] == f.series for s in chart["series"]):
            x = epoch(f.start) if chart["xkind"] == "time" else (
                float(f.start_index) if f.start_index is not None else None)
            if x is not None and chart["x0"] <= x <= chart["x1"] and all(o["kind"] != f.kind for o in out):
                out.append({"x": xround(x), "label": "onset" if f.kind == "leak" else "cache growth starts",
                            "kind": f.kind, "series": series_words(f.series)})
    if not out:
        cache = {(f.source, f.series) for f in findings if f.kind == "cache_growth"}
        cands = sorted(((s["onset"], s) for s in chart["series"]
                        if s["onset"] is not None and chart["x0"] <= s["onset"] <= chart["x1"]),
                       key=lambda c: c[0])  # equal onsets: the first drawn series wins (dicts do not compare)
        if cands:
            x, s = cands[0]
            is_cache = (s["source"], s["series"]) in cache
            out.append({"x": x, "label": "cache growth starts" if is_cache else "onset",
                        "kind": "cache_growth" if is_cache else "leak", "series": series_words(s["series"])})
    return sorted(out, key=lambda o: o["x"])


def _spread(items: list, gap: float, key=lambda v: v) -> list:
    """Items (sorted by key) without those closer than `gap` to the previous one kept."""
    kept = []
    for it in items:
        if not kept or key(it) - key(kept[-1]) > gap:
            kept.append(it)
    return kept


def _range_text(x0: float, x1: float, xkind: str, clock: Clock) -> str:
    if xkind == "time":
        sp = clock.span(x0, x1)
        return sp["local"] + (f" ({sp['utc']})" if sp["utc"] else "")
    unit = "step" if xkind == "step" else "sample"
    return f"{unit} {xround(x0)} → {xround(x1)}"


def zoom_panels(primary: dict | None, charts: list, raw: dict, clock: Clock, analysis) -> list[dict]:
    """Two close-ups of the chart the verdict is about: around the onset, and the end."""
    if primary is None or not charts:
        return []
    chart = next((c for c in charts if c["id"] == primary.get("chart_id")), None)
    if chart is None:
        return []
    span = chart["x1"] - chart["x0"]
    # a short series is fully readable on its own chart: a close-up would show two points
    if span <= 0 or max((s["n"] for s in chart["series"]), default=0) < ZOOM_MIN_READINGS:
        return []
    windows = []
    onset = primary.get("onset_x")
    if onset is not None:
        half = span * 0.08
        windows.append(("onset", "Around the onset", max(chart["x0"], onset - half), min(chart["x1"], onset + half)))
    if onset is not None or primary.get("fatal"):
        end = primary.get("end_x")
        end = chart["x1"] if end is None or not (chart["x0"] < end <= chart["x1"]) else end
        windows.append(("end", "The end", max(chart["x0"], end - span * 0.12), min(chart["x1"], end + span * 0.03)))
    info = raw["charts"][chart["id"]]
    results = _series_results(analysis)
    findings = list(lookup(analysis, "findings", default=None) or [])
    out = []
    for n, (what, title, lo, hi) in enumerate(windows, start=1):
        if hi <= lo:
            continue
        env = envelopes(raw["rows"], {sid: (lo, hi) for sid in info["sids"]}, ZOOM_BUCKETS)
        if sum(len(p) for runs in env.values() for p in runs) < 4:
            continue
        z = {k: chart[k] for k in ("kind", "host", "xkind", "gpu", "pid", "source", "gpus", "capacity", "capacity_drawn")}
        z.update({"id": f"{chart['id']}-{what}", "title": f"{title}: {chart['title']}", "x0": xround(lo),
                  "x1": xround(hi), "zoom": what})
        z["_series_rows"] = info["series_rows"]
        z["series"] = _series_ctx(z, env, results, findings)
        del z["_series_rows"]
        for s in z["series"]:
            s["change_points"] = [x for x in s["change_points"] if lo <= x <= hi]
            s["onset"] = s["onset"] if s["onset"] is not None and lo <= s["onset"] <= hi else None
        # a close-up is about the shape: its y axis spans the data, not 0..capacity; capacity joins in
        # only when it is near
        ys = [p[1] for s in z["series"] for r in s["runs"] for p in r]
        y_lo, y_hi = min(ys), max(ys)
        near = chart["capacity_drawn"] and chart["capacity"] - y_hi <= max(y_hi - y_lo, 0.1 * y_hi)
        if near:
            y_hi = chart["capacity"]
        pad = max((y_hi - y_lo) * 0.08, 0.01 * y_hi, 1 << 20)
        z["capacity_drawn"] = bool(near)
        z["y_min"] = int(max(0, y_lo - pad))
        z["y_max"] = int(y_hi + pad)
        z["markers"], z["event_counts"] = _markers(info["events"], lo, hi, clock, MARKER_COLUMNS, MAX_MARKERS_ZOOM)
        z["onsets"] = [o for o in chart["onsets"] if lo <= o["x"] <= hi]
        lead = next((s for s in z["series"] if s["name"] == chart["lead"]), None)
        z["lead"] = chart["lead"]
        z["change_points"] = _spread(sorted(lead["change_points"]) if lead else [], (hi - lo) * 0.01)
        z["sparkline"] = ""
        z["range"] = _range_text(lo, hi, chart["xkind"], clock)
        out.append(z)
    return out
