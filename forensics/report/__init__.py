"""The incident report: first a plain-data context (unit- and golden-tested), then HTML, Markdown, JSON.

`build_context` does all the work of choosing, downsampling and formatting; its result holds only
str/int/float/bool/list/dict/None, so it can be compared with a golden file. `render_html` and
`render_markdown` only lay that data out. Every piece of log text reaches the HTML through jinja2 with
autoescape on (also inside SVG), and the one JSON block in a <script> tag has `<`, `>` and `&` escaped.

Size is bounded whatever the input: series are drawn from a fixed number of min/max buckets (never
the raw rows), and every list (charts, findings, evidence, events, sanitizer stacks, inputs,
problems) is capped, with the rest summarized as counts.
"""
from __future__ import annotations

import base64
import hashlib
import functools
import json
import itertools
import math
import os
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jinja2
import polars as pl
from markupsafe import Markup

import forensics

from forensics.detect.series import MIN_POINTS
from forensics.detect.measure import gpu_of_unnamed
from forensics.detect.findings import SEVERITY_RANK, iso, summary_json
from forensics.units import human, rate_text
from forensics.frames import rows_where

# ---- limits: they keep the report small on the worst day -------------------------------------------
PLOT_BUCKETS = 250          # min/max buckets per series across a chart's width
PROCESS_BUCKETS = 120       # process charts are drawn smaller
MARKER_COLUMNS = 120        # events closer than 1/120 of the width merge into one marker
ZOOM_BUCKETS = 200
ZOOM_MIN_READINGS = 40      # close-ups only for series long enough to need them
SPARK_CELLS = 32            # characters in a Markdown sparkline
MAX_GPU_CHARTS = 16
MAX_PROCESS_CHARTS = 12
MAX_OTHER_CHARTS = 8
MAX_SERIES_PER_CHART = 8
MAX_MARKERS_PER_CHART = 24  # per GPU chart; process charts and close-ups get fewer
MAX_MARKERS_PROCESS = 10
MAX_MARKERS_ZOOM = 16
MAX_FINDINGS = 30
MAX_EVIDENCE = 6
MAX_EVENT_ROWS = 80
MAX_TABLE_ROWS = 20         # OOM kills, CUDA OOMs, Xid groups
MAX_SANITIZER_GROUPS = 30
MAX_FRAMES = 16
MAX_INPUT_ROWS = 100
MAX_PROBLEMS = 100
MAX_TEXT = 400              # characters of one quoted log line
MAX_DETAIL_ITEMS = 14
EMBED_FINDINGS = 20
EMBED_EVIDENCE = 2          # evidence lines per finding in the JSON embedded in the HTML
EMBED_INPUTS = 50

SERIES_KEY = ("source", "host", "gpu", "pid", "series", "label")

RAN_OUT = {"gpu_oom": "CUDA OOM", "oom_kill": "host OOM kill"}
VERDICT_LABELS = {
    "leak": ("Memory leak", "critical"),
    "cache_growth": ("Allocator cache growth, not a leak", "warning"),
    "no_leak": ("No leak found", "ok"),
    "inconclusive": ("Inconclusive", "neutral"),
}

SERIES_COLORS = {
    "memory.used": "#1f6fb4",
    "process.used": "#7b4fb3",
    "allocated": "#2e9a3a",
    "reserved": "#e07b10",
    "max_allocated": "#8fcf8f",
    "max_reserved": "#f5b971",
    "host.rss": "#8c5a3c",
}
FALLBACK_COLORS = ("#1f6fb4", "#e07b10", "#2e9a3a", "#c0392b", "#7b4fb3", "#8c5a3c", "#d45fa8", "#5f6b73",
                   "#a8a81a", "#16a3b8")

EVENT_STYLE = {
    # kind: (label, colour, drawn on charts)
    "oom_kill": ("OOM kill", "#c0392b", True),
    "oom_invoked": ("OOM killer invoked", "#e8897f", True),
    "oom_reaped": ("OOM reaped", "#e8897f", False),
    "gpu_oom": ("CUDA out of memory", "#d4237a", True),
    "xid": ("Xid", "#6d4c41", True),
    "driver_error": ("driver error", "#6d4c41", True),
    "marker": ("marker", "#5f6b73", True),
    "process_start": ("process start", "#16a3b8", True),
    "process_gone": ("process gone", "#a8a81a", True),
    "sanitizer_leak": ("sanitizer leak", "#7b4fb3", False),
    "sanitizer_summary": ("sanitizer summary", "#7b4fb3", False),
    "sanitizer_error": ("sanitizer error", "#7b4fb3", True),
}
FATAL_KINDS = ("oom_kill", "gpu_oom")
# Xid codes after which a job is gone (fallen off the bus, double-bit ECC, contained/uncontained ECC,
# GSP/RM errors that need a reset)
FATAL_XIDS = {48, 62, 64, 74, 79, 92, 94, 95, 119, 120, 140}

# Library modules in a host backtrace: frames from these are not where the user allocated.
_LIB_FRAME = re.compile(
    r"libcuda|libcudart|nvcuda|libcublas|libcudnn|libnccl|libtorch|libc10|libcaffe2|_C\.(?:cpython|so)|"
    r"libpython|python3?(?:\.[0-9]+)?$|ld-linux|libc\.so|libstdc\+\+|cudart_static|libcupy|cupy_backends|"
    r"\bcuMem|\bcudaMalloc|\bcudaHostAlloc|\bcuMemHostAlloc|\bcudaMallocManaged", re.IGNORECASE)


# ---- small helpers ---------------------------------------------------------------------------------

def _get(obj, *names, default=None):
    """Attribute or key by the first name that exists (the analysis is duck-typed)."""
    for name in names:
        if isinstance(obj, dict):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return default


def _clip(text, limit: int = MAX_TEXT) -> str:
    if text is None:
        return ""
    # one line always: the HTML is written with its indentation stripped, which is safe only so
    text = str(text).replace("\r", "").replace("\x00", "").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(value):
    """Any value -> plain data (str/int/float/bool/list/dict/None)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return str(value)


def _natural(text) -> tuple:
    """Sort "2" before "10", numbers before names."""
    text = "" if text is None else str(text)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", text) if p)


def _base(path: str | None) -> str:
    return os.path.basename(path or "") or (path or "")


def _rate(n: float | None, per: str) -> str | None:
    if n is None:
        return None
    return f"{human(n)}/{per}"


def _span(f) -> float | None:
    """Seconds of the job a growth finding was measured over (its lifetime, else its growth)."""
    for a, b in ((getattr(f, "lifetime_start", None), getattr(f, "lifetime_end", None)), (f.start, f.end)):
        if isinstance(a, datetime) and isinstance(b, datetime):
            return (b - a).total_seconds()
    return None


def _duration(hours: float | None) -> str | None:
    if hours is None or not math.isfinite(hours):
        return None
    if hours < 0:
        return "already past"
    minutes = hours * 60
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 90:
        return f"{minutes:.0f} min"
    if hours < 48:
        h = int(hours)
        return f"{h} h {round((hours - h) * 60):02d} min"
    return f"{hours / 24:.1f} days"


def _json_detail(text) -> dict:
    if not text:
        return {}
    try:
        d = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


class _Clock:
    """Formats instants in the user's zone and in UTC."""

    def __init__(self, zone: str):
        try:
            self.zone = ZoneInfo(zone)
            self.name = zone
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            self.zone, self.name = ZoneInfo("UTC"), "UTC"
        self.is_utc = self.name in ("UTC", "Etc/UTC", "Z", "Etc/Zulu", "Zulu", "GMT", "Etc/GMT")

    def when(self, t) -> dict | None:
        if t is None:
            return None
        if isinstance(t, (int, float)):
            t = datetime.fromtimestamp(t, timezone.utc)
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        t = t.astimezone(timezone.utc)
        local = t.astimezone(self.zone)
        return {
            "iso": iso(t),
            "local": local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or self.name),
            "utc": t.strftime("%Y-%m-%d %H:%M:%S UTC"),
        }

    def offset(self, t: datetime | None = None) -> str:
        t = t or datetime.now(timezone.utc)
        off = t.astimezone(self.zone).utcoffset() or timedelta(0)
        minutes = int(off.total_seconds() // 60)
        sign = "+" if minutes >= 0 else "-"
        return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


    def span(self, a, b) -> dict | None:
        """`2024-06-01 10:00:00 → 15:59:50 CEST` (the date once when both ends share it), and in UTC."""
        if a is None or b is None:
            return None

        def as_utc(t):
            if isinstance(t, (int, float)):
                return datetime.fromtimestamp(t, timezone.utc)
            return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)

        a, b = as_utc(a), as_utc(b)

        def fmt(x, y, zone_label_x, zone_label_y):
            left = x.strftime("%Y-%m-%d %H:%M:%S")
            right = y.strftime("%H:%M:%S") if x.date() == y.date() else y.strftime("%Y-%m-%d %H:%M:%S")
            if zone_label_x != zone_label_y:
                return f"{left} {zone_label_x} → {right} {zone_label_y}"
            return f"{left} → {right} {zone_label_x}"

        la, lb = a.astimezone(self.zone), b.astimezone(self.zone)
        return {"local": fmt(la, lb, la.tzname() or self.name, lb.tzname() or self.name),
                "utc": None if self.is_utc else fmt(a, b, "UTC", "UTC")}


def _epoch(t) -> float | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return round(t.timestamp(), 3)
    if isinstance(t, (int, float)):
        return float(t)
    return None


# ---- the series table and downsampling ------------------------------------------------------------

def _series_table(samples: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows with sid and x, one row per series with its stats). x is epoch seconds, step or sample index.

    Grouping 20 M rows on six nullable text keys is slow (tens of seconds), so rows are grouped on a
    64-bit hash of the keys instead, and the keys are read back once per series."""
    keys = list(SERIES_KEY)
    s = rows_where(samples, pl.col("bytes").is_not_null())
    if s.is_empty():
        return s.select(pl.lit(0, pl.Int64).alias("sid"), pl.lit(0.0).alias("x"), pl.col("bytes").alias("y")), pl.DataFrame()
    # the key columns hashed as they are: half the cost of casting them to categorical codes first
    # (the hashes only group rows; series ids come from sorting the keys below)
    s = s.with_columns(pl.struct(keys[:5]).hash(20240601).alias("_h5"))
    s = s.with_columns(pl.struct("_h5", keys[5]).hash(20240601).alias("_h6"))
    # as detect.series_frames does: a label that changes with nearly every reading ("step 17") does
    # not name a series; such labels are dropped so the readings form one series, as the detector sees it
    per_label = s.group_by("_h5", "_h6").agg(pl.len().alias("c")).group_by("_h5").agg(
        pl.len().alias("labels"), pl.col("c").median().alias("median"))
    loose = rows_where(per_label, (pl.col("labels") > 1) & (pl.col("median") < MIN_POINTS))["_h5"]
    s = s.with_columns(
        pl.when(pl.col("_h5").is_in(loose.implode())).then(None).otherwise(pl.col("label")).alias("label"),
        pl.when(pl.col("_h5").is_in(loose.implode())).then(pl.col("_h5")).otherwise(pl.col("_h6")).alias("_h"),
    )
    # the detector's rule: time when (nearly) every reading has it, else step, else the sample order
    flags = s.group_by("_h").agg(
        *[pl.col(k).first() for k in keys],
        (pl.col("time").null_count() <= 0.1 * pl.len()).alias("has_time"),
        (pl.col("step").null_count() <= 0.1 * pl.len()).alias("has_step"),
    ).with_columns(
        pl.when(pl.col("has_time")).then(pl.lit("time"))
        .when(pl.col("has_step")).then(pl.lit("step"))
        .otherwise(pl.lit("index")).alias("xkind")
    ).sort(keys, nulls_last=False).with_row_index("sid").with_columns(pl.col("sid").cast(pl.Int64))
    rows = s.select("_h", "time", "step", "seq", "line", "bytes", "total_bytes").join(
        flags.select("_h", "sid", "xkind"), on="_h", how="inner")
    rows = rows.with_columns(
        pl.when(pl.col("xkind") == "time").then(pl.col("time").dt.epoch("us").cast(pl.Float64) / 1e6)
        .when(pl.col("xkind") == "step").then(pl.col("step").cast(pl.Float64))
        .otherwise(pl.coalesce(pl.col("seq"), pl.col("line")).cast(pl.Float64)).alias("x")
    )
    rows = rows_where(rows, pl.col("x").is_not_null()).select("sid", "x", pl.col("bytes").alias("y"), "total_bytes")
    stats = rows.group_by("sid").agg(
        pl.len().alias("n"),
        pl.col("x").min().alias("x0"),
        pl.col("x").max().alias("x1"),
        pl.col("y").min().alias("low"),
        pl.col("y").max().alias("peak"),
        pl.col("y").get(pl.col("x").arg_min()).alias("first"),
        pl.col("y").get(pl.col("x").arg_max()).alias("last"),
        pl.col("total_bytes").max().alias("capacity"),
    )
    table = flags.drop("_h").join(stats, on="sid", how="inner").sort("sid")
    return rows.select("sid", "x", "y"), table


def _envelopes(rows: pl.DataFrame, ranges: dict[int, tuple[float, float]], buckets: int) -> dict[int, list]:
    """Min/max per bucket for each series id in `ranges` (sid -> (x0, x1)): the points to draw, in x
    order, in runs split where data is missing for a while."""
    if not ranges:
        return {}
    rng = pl.DataFrame({"sid": list(ranges), "lo": [r[0] for r in ranges.values()],
                        "hi": [r[1] for r in ranges.values()]},
                       schema={"sid": pl.Int64, "lo": pl.Float64, "hi": pl.Float64})
    # a close-up needs a sliver of the rows: cut them down before the join
    lo_all, hi_all = min(r[0] for r in ranges.values()) - 0.001, max(r[1] for r in ranges.values()) + 0.001
    rows = rows_where(rows, pl.col("sid").is_in(list(ranges)) & pl.col("x").is_between(lo_all, hi_all))
    # ranges come rounded to the millisecond: a reading on the edge must not fall out
    part = rows_where(rows.join(rng, on="sid", how="inner"),
        (pl.col("x") >= pl.col("lo") - 0.001) & (pl.col("x") <= pl.col("hi") + 0.001))
    if part.is_empty():
        return {}
    width = pl.when(pl.col("hi") > pl.col("lo")).then(pl.col("hi") - pl.col("lo")).otherwise(1.0)
    part = part.with_columns(
        ((pl.col("x") - pl.col("lo")) / width * buckets).floor().clip(0, buckets - 1).cast(pl.Int64).alias("b")
    )
    agg = part.group_by("sid", "b").agg(
        pl.col("x").get(pl.col("y").arg_min()).alias("xmin"),
        pl.col("y").min().alias("ymin"),
        pl.col("x").get(pl.col("y").arg_max()).alias("xmax"),
        pl.col("y").max().alias("ymax"),
    ).sort("sid", "b")
    out: dict[int, list] = {}
    # plain lists, grouped here (agg is sorted by sid): no per-series frame, no per-value Series access
    cols = [agg[c].to_list() for c in ("sid", "b", "xmin", "ymin", "xmax", "ymax")]
    for sid, grp in itertools.groupby(zip(*cols), key=lambda r: r[0]):
        pts_by_bucket = []
        for _, b, xa, ya, xb, yb in grp:
            pair = sorted({(xa, ya), (xb, yb)})
            pts_by_bucket.append((b, pair))
        # a gap wider than a few typical gaps means no data there: do not draw a line across it
        gaps = sorted(b2 - b1 for (b1, _), (b2, _) in zip(pts_by_bucket, pts_by_bucket[1:]))
        typical = gaps[len(gaps) // 2] if gaps else 1
        limit = max(4, 5 * typical)
        runs, run, prev_b = [], [], None
        for b, pair in pts_by_bucket:
            if prev_b is not None and b - prev_b > limit:
                runs.append(run)
                run = []
            run.extend(pair)
            prev_b = b
        runs.append(run)
        out[sid] = [_thin(r) for r in runs if r]
    return out


def _thin(points: list) -> list:
    """Drop points in the middle of a flat stretch (same y before and after): a flat line needs two."""
    if len(points) <= 2:
        return [[_xround(x), int(y)] for x, y in points]
    keep = [points[0]]
    for i in range(1, len(points) - 1):
        if not (points[i - 1][1] == points[i][1] == points[i + 1][1]):
            keep.append(points[i])
    keep.append(points[-1])
    return [[_xround(x), int(y)] for x, y in keep]


def _xround(x: float):
    return int(x) if float(x).is_integer() else round(float(x), 3)


def _sparkline(runs: list, lo: float, hi: float) -> str:
    """The line sampled at SPARK_CELLS cell centres (max of the points in a cell, else the line between
    its neighbours), drawn with ▁..█ from its own lowest to its highest value, so the shape shows even
    far below capacity (the numbers beside it say where it sits); cells without data are spaces."""
    blocks = "▁▂▃▄▅▆▇█"
    cells: list[float | None] = [None] * SPARK_CELLS
    span = (hi - lo) or 1.0

    last = SPARK_CELLS - 1
    for run in runs:
        # each point's cell once (the same formula as before, computed per point not per use)
        cs = [min(last, max(0, int((x - lo) / span * SPARK_CELLS))) for x, _ in run]
        for i in range(len(run) - 1):
            ca, cb = cs[i], cs[i + 1]
            if cb <= ca + 1:
                continue
            (xa, ya), (xb, yb) = run[i], run[i + 1]
            for c in range(ca + 1, cb):
                xc = lo + (c + 0.5) / SPARK_CELLS * span
                y = ya + (yb - ya) * (xc - xa) / ((xb - xa) or 1)
                cells[c] = y if cells[c] is None else max(cells[c], y)
        for (x, y), c in zip(run, cs):
            cur = cells[c]
            cells[c] = y if cur is None else max(cur, y)
    values = [c for c in cells if c is not None]
    if not values:
        return ""
    floor, top = min(values), max(values)
    if top - floor <= 0.02 * abs(top):  # flat within 2 %: a flat line, not magnified noise
        top = floor
    out = []
    for c in cells:
        if c is None:
            out.append(" ")
        elif top == floor:
            out.append(blocks[0])
        else:
            out.append(blocks[min(7, max(0, int((c - floor) / (top - floor) * 7.999)))])
    return "".join(out).rstrip()


# ---- charts ----------------------------------------------------------------------------------------

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
    for sr in _get(analysis, "series", default=None) or []:
        key = _get(sr, "key")
        if isinstance(key, dict):
            k = tuple(key.get(n) for n in SERIES_KEY)
        elif isinstance(key, (tuple, list)) and len(key) == len(SERIES_KEY):
            k = tuple(key)
        elif key is not None and all(hasattr(key, n) for n in SERIES_KEY):
            k = tuple(getattr(key, n) for n in SERIES_KEY)
        else:
            k = tuple(_get(sr, n) for n in SERIES_KEY)
        out[k] = sr
    return out


def _x_of(value, xkind: str) -> float | None:
    """A change point / onset as given by the detector -> our x (epoch s, step or index)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return _epoch(value) if xkind == "time" else None
    if isinstance(value, dict):
        return _x_of(_get(value, "time" if xkind == "time" else "x", "index", "step", "x"), xkind)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    for name in ("time", "x", "index", "step"):
        if hasattr(value, name):
            return _x_of(getattr(value, name), xkind)
    return None


def _series_name(row: dict, chart_kind: str) -> str:
    name = row["series"] or "memory"
    if chart_kind == "process" and row["gpu"] is not None:
        name += f" on GPU {row['gpu']}"
    return name


def _chart_title(kind: str, host, ident, labels: list[str], xkind: str, multi_host: bool) -> str:
    where = f" on {host}" if multi_host and host else ""
    if kind == "gpu":
        title = f"GPU {ident}{where}"
    elif kind == "process":
        names = ", ".join(sorted({x for x in labels if x}))[:80]
        title = f"Process {ident}" + (f" ({names})" if names else "") + where
    else:
        title = f"{_base(ident)}{where}"
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
    ev = ev.with_columns((pl.col("time").dt.epoch("us").cast(pl.Float64) / 1e6).alias("x")).sort("x")
    return ev.select("x", "kind", "pid", "process", "gpu", "bytes", "detail", "text", "source", "line").to_dicts()


def _event_label(e: dict) -> str:
    kind = e.get("kind") or "event"
    label = EVENT_STYLE.get(kind, (kind,))[0]
    d = _json_detail(e.get("detail"))
    if kind == "xid" and d.get("code") is not None:
        label = f"Xid {d.get('code')}" + (f": {d['meaning']}" if d.get("meaning") else "")
    elif kind == "marker" and (d.get("label") or d.get("name") or d.get("what")):
        label = f"marker: {d.get('label') or d.get('name') or d.get('what')}"
    who = []
    if e.get("process"):
        who.append(str(e["process"]))
    if e.get("pid") is not None:
        who.append(f"pid {e['pid']}")
    if e.get("gpu") is not None and kind in ("gpu_oom", "xid", "driver_error"):
        who.append(f"GPU {e['gpu']}")
    if who:
        label += " (" + ", ".join(who) + ")"
    if e.get("bytes") is not None and kind in ("gpu_oom",):
        label += f", tried to allocate {human(e['bytes'])}"
    return _clip(label, 160)


def _markers(evs: list[dict], lo: float, hi: float, clock: _Clock, buckets: int,
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
                "x": round(e["x"], 3), "kind": e["kind"], "count": 1, "label": _event_label(e),
                "when": w["local"] if w else None,
                "where": f"{e['source']}:{e['line']}" if e.get("line") is not None else (e.get("source") or ""),
                # the log line only where it matters most (the events table has all of them)
                "text": _clip(e.get("text"), 120) if e["kind"] in FATAL_KINDS or e["kind"] == "xid" else "",
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


def _build_charts(bundle, analysis, clock: _Clock) -> tuple[list, list, dict]:
    """Charts per GPU, per process and per untied source; also returns the omitted ones and the row data
    that zoom panels need."""
    rows, table = _series_table(bundle.samples)
    if table.is_empty():
        return [], [], {"rows": rows, "charts": {}}
    multi_host = table["host"].n_unique() > 1
    results = _series_results(analysis)
    findings = list(_get(analysis, "findings", default=None) or [])
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

    def mentioned(g) -> bool:
        probe = {"kind": g["kind"], "pid": g["ident"], "gpu": g["ident"], "source": g["ident"],
                 "series": [{"series": s["series"]} for s in g["series"]]}
        return any(_finding_on_chart(f, probe) for f in findings)

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
            keep.sort(key=lambda g: (_natural(g["host"]), _natural(g["ident"]), g["xkind"]))
        chosen.extend(keep)
        kept = {id(g) for g in keep}
        for g in gs:
            if id(g) not in kept:
                omitted.append({
                    "kind": kind, "title": _chart_title(kind, g["host"], g["ident"], g["labels"], g["xkind"], multi_host),
                    "peak": human(max(s["peak"] or 0 for s in g["series"])),
                    "readings": max(s["n"] for s in g["series"]),
                })

    events = _events_for_charts(bundle.events)
    charts, raw = [], {}
    for n, g in enumerate(chosen, start=1):
        series = sorted(g["series"], key=lambda s: (
            not any((f.series == s["series"]) for f in findings), -(s["peak"] or 0)))[:MAX_SERIES_PER_CHART]
        series.sort(key=lambda s: (list(SERIES_COLORS).index(s["series"]) if s["series"] in SERIES_COLORS else 99,
                                   _natural(s["gpu"]), _natural(s["source"])))
        lo = min(s["x0"] for s in series)
        hi = max(s["x1"] for s in series)
        chart = {
            "id": f"chart{n}", "kind": g["kind"], "host": g["host"], "xkind": g["xkind"],
            "gpu": g["ident"] if g["kind"] == "gpu" else None,
            "pid": g["ident"] if g["kind"] == "process" else None,
            "source": g["ident"] if g["kind"] == "source" else None,
            "gpus": sorted(g["gpus"], key=_natural),
            "title": _chart_title(g["kind"], g["host"], g["ident"], g["labels"], g["xkind"], multi_host),
        }
        # events just past the data (the kill usually comes after the last sample) widen the range
        if g["xkind"] == "time":
            margin = max((hi - lo) * 0.1, 120.0)
            near = [e for e in events if lo - margin <= e["x"] <= hi + margin and _event_applies(e, chart, pid_gpus)]
            if near:
                lo, hi = min(lo, near[0]["x"]), max(hi, near[-1]["x"])
        else:
            near = []
        chart.update({"x0": _xround(lo), "x1": _xround(hi)})
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
    env = _envelopes(rows, {s["sid"]: (c["x0"], c["x1"]) for c in charts if c["kind"] != "process"
                            for s in c["_series_rows"]}, PLOT_BUCKETS)
    env.update(_envelopes(rows, {s["sid"]: (c["x0"], c["x1"]) for c in charts if c["kind"] == "process"
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
        c["sparkline"] = _sparkline(main["runs"], c["x0"], c["x1"]) if main else ""
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
                extra = _base(s["source"]) + (f", {s['label']}" if s["label"] and chart["kind"] != "process" else "")
            name = f"{name} ({_clip(extra, 60)})"
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
            classification = _get(sr, "classification", "pattern", "kind")
            cps = [x for x in (_x_of(v, chart["xkind"]) for v in (_get(sr, "change_points", "changepoints", default=None) or [])) if x is not None]
            onset = _x_of(_get(sr, "onset"), chart["xkind"])
        out.append({
            "sid": s["sid"], "name": name, "series": s["series"], "source": s["source"], "gpu": s["gpu"],
            "pid": s["pid"], "label": s["label"], "color": color,
            "dashed": bool(s["series"] and s["series"].startswith("max_")),
            "n": s["n"], "first": s["first"], "last": s["last"], "low": s["low"], "peak": s["peak"],
            "summary": f"{human(s['first'])} → {human(s['last'])}, peak {human(s['peak'])}",
            "classification": _legend_class(classification, _get(sr, "lifetimes", default=None) if sr is not None else None),
            "jobs": _jobs_ctx(_get(sr, "lifetimes", default=None) if sr is not None else None, chart["xkind"]),
            "change_points": [_xround(x) for x in cps],
            "onset": _xround(onset) if onset is not None else None,
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
        out.append({"x0": _xround(x0), "x1": _xround(x1), "number": k,
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


def _finding_on_chart(f, chart: dict) -> bool:
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
        if f.kind in ("leak", "cache_growth") and _finding_on_chart(f, chart):
            named = [s for s in chart["series"] if s["series"] == f.series]
            same = [s for s in named if f.source is None or s["source"] == f.source]
            if same or named:
                return f, (same or named)[0]
    return None, (chart["series"][0] if chart["series"] else None)


def _onsets(chart: dict, findings: list, results: dict, clock: _Clock) -> list[dict]:
    """One onset line per growth finding about this chart, where the finding says growth began;
    without a finding, the earliest onset the detector gives any drawn series. Several lines a few
    seconds apart (one per source of the same GPU) would only blur the point."""
    out = []
    for f in findings:
        if f.kind in ("leak", "cache_growth") and _finding_on_chart(f, chart) \
                and any(s["series"] == f.series for s in chart["series"]):
            x = _epoch(f.start) if chart["xkind"] == "time" else (
                float(f.start_index) if f.start_index is not None else None)
            if x is not None and chart["x0"] <= x <= chart["x1"] and all(o["kind"] != f.kind for o in out):
                out.append({"x": _xround(x), "label": "onset" if f.kind == "leak" else "cache growth starts",
                            "kind": f.kind, "series": f.series})
    if not out:
        cache = {(f.source, f.series) for f in findings if f.kind == "cache_growth"}
        cands = sorted(((s["onset"], s) for s in chart["series"]
                        if s["onset"] is not None and chart["x0"] <= s["onset"] <= chart["x1"]),
                       key=lambda c: c[0])  # equal onsets: the first drawn series wins (dicts do not compare)
        if cands:
            x, s = cands[0]
            is_cache = (s["source"], s["series"]) in cache
            out.append({"x": x, "label": "cache growth starts" if is_cache else "onset",
                        "kind": "cache_growth" if is_cache else "leak", "series": s["series"]})
    return sorted(out, key=lambda o: o["x"])


def _spread(items: list, gap: float, key=lambda v: v) -> list:
    """Items (sorted by key) without those closer than `gap` to the previous one kept."""
    kept = []
    for it in items:
        if not kept or key(it) - key(kept[-1]) > gap:
            kept.append(it)
    return kept


def _range_text(x0: float, x1: float, xkind: str, clock: _Clock) -> str:
    if xkind == "time":
        sp = clock.span(x0, x1)
        return sp["local"] + (f" ({sp['utc']})" if sp["utc"] else "")
    unit = "step" if xkind == "step" else "sample"
    return f"{unit} {_xround(x0)} → {_xround(x1)}"


def _zooms(primary: dict | None, charts: list, raw: dict, clock: _Clock, analysis) -> list[dict]:
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
    findings = list(_get(analysis, "findings", default=None) or [])
    out = []
    for n, (what, title, lo, hi) in enumerate(windows, start=1):
        if hi <= lo:
            continue
        env = _envelopes(raw["rows"], {sid: (lo, hi) for sid in info["sids"]}, ZOOM_BUCKETS)
        if sum(len(p) for runs in env.values() for p in runs) < 4:
            continue
        z = {k: chart[k] for k in ("kind", "host", "xkind", "gpu", "pid", "source", "gpus", "capacity", "capacity_drawn")}
        z.update({"id": f"{chart['id']}-{what}", "title": f"{title}: {chart['title']}", "x0": _xround(lo),
                  "x1": _xround(hi), "zoom": what})
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


# ---- findings, events, sanitizer, inputs -----------------------------------------------------------

# detail keys whose numbers are byte counts (the parsers store bytes, never MiB)
_BYTES_KEY = re.compile(r"bytes|rss|total_vm|pgtables|^(requested|total|free|allocated|reserved|cached|capacity|"
                        r"used|limit|allowed|private_pools|memcg_usage|memcg_limit)$|"
                        r"_(in_use|used|free|reserved|allocated|unallocated|capacity|limit|size)$")


def _detail_value(key: str, v, clock: _Clock) -> str | int | None:
    """One extra fact for people; nested records (the detector's per-series list) are left to the
    JSON summary, and empty values are not shown."""
    if isinstance(v, datetime):
        w = clock.when(v)
        return w["local"] if w else None
    v = _plain(v)
    if v is None or isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v)):
        return None
    if isinstance(v, list):
        if not v:
            return None
        return _clip(", ".join(str(x) for x in v[:6]) + (f" (+{len(v) - 6})" if len(v) > 6 else ""), 200)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if _BYTES_KEY.search(key):
            return human(v)
        if key.endswith("hours"):
            return _duration(v)
        if isinstance(v, int):  # pids, uids, codes, counts: as written
            return v
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return _clip(v, 200) if v != "" else None


# detail keys said in words in the HTML (the JSON keeps the keys); others read as their words, capitalized
_DETAIL_LABELS = {
    "capacity_bytes": "GPU capacity", "log_hours": "Logged for", "ran_out": "Ran out as",
    "start_step": "Onset step", "steps_at": "Steps at", "device_growth_bytes": "Device growth",
    "rate_bytes_per_sample": "Rate per sample", "this_process_in_use": "In use by this process",
    "reserved_unallocated": "Reserved but unallocated", "torch_era": "PyTorch message format",
    "total_vm": "Total virtual memory", "pgtables": "Page tables", "anon_rss": "Anonymous RSS",
    "file_rss": "File RSS", "shmem_rss": "Shared-memory RSS", "oom_score_adj": "OOM score adjustment",
    "bus_id": "PCI bus id", "uid": "User id", "pid": "Process id", "r2": "Fit (R²)",
}


def _detail_label(key: str) -> str:
    if key in _DETAIL_LABELS:
        return _DETAIL_LABELS[key]
    words = re.sub(r"_bytes$", "", key).replace("_", " ").strip() or key
    return words[:1].upper() + words[1:]


def _detail_text(v):
    """An event kind given as a value (`ran_out: gpu_oom`) reads as the kind's name."""
    return EVENT_STYLE[v][0] if isinstance(v, str) and v in EVENT_STYLE else v


def _details(d: dict, clock: _Clock, skip=(), evidence_texts=()) -> list[list]:
    out = []
    for k, v in d.items():
        if k in skip:
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


def _finding_ctx(f, clock: _Clock) -> dict:
    facts = []
    where = []
    if f.gpu is not None:
        where.append(f"GPU {f.gpu}")
    if f.pid is not None:
        where.append(f"pid {f.pid}")
    if f.series:
        where.append(f.series)
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
        facts.append(["Rate", rate_text(f.rate_bytes_per_hour, _span(f))])
    if getattr(f, "stairs", None):
        every = [v for v in (_duration(f.stair_period_seconds / 3600) if f.stair_period_seconds else None,
                             f"{f.stair_period_steps:.0f} steps" if f.stair_period_steps else None) if v]
        facts.append(["Stairs", f"{f.stairs}" + (f", one every {' or '.join(every)}" if every else "")])
    life = [clock.when(v) if isinstance(v, datetime) else ({"local": f"step/sample {v}"} if v is not None else None)
            for v in (getattr(f, "lifetime_start", None), getattr(f, "lifetime_end", None))]
    if life[0] and life[1]:
        ended = {"release": "its memory was released", "log_end": "the log ends",
                 "restart": "the job restarted"}.get(getattr(f, "lifetime_ended", None) or "", "")
        facts.append(["Job", f"{life[0]['local']} to {life[1]['local']}" + (f" ({ended})" if ended else "")])
    if f.rate_bytes_per_step is not None:
        facts.append(["Rate per step", _rate(f.rate_bytes_per_step, "step")])
    if f.growth_bytes is not None:
        facts.append(["Growth", human(f.growth_bytes)])
    if f.bytes is not None:
        facts.append(["Bytes", human(f.bytes)])
    if RAN_OUT.get((f.detail or {}).get("ran_out")):
        at = clock.when(f.exhaust_at)
        facts.append(["Memory", f"ran out ({RAN_OUT[f.detail['ran_out']]})" + (f" — {at['local']}" if at else "")])
    elif f.exhaust_in_hours is not None or f.exhaust_at is not None:
        text = _duration(f.exhaust_in_hours) or ""
        at = clock.when(f.exhaust_at)
        if at:
            text = (text + " — " if text else "") + at["local"]
        ended = getattr(f, "lifetime_ended", None) in ("release", "restart")
        facts.append(["At this pace, full in" if ended else "Memory runs out", text])
    if f.confidence is not None:
        facts.append(["Confidence", f"{f.confidence:.0%}" if f.confidence <= 1 else str(f.confidence)])
    # "ran_out" is said by the "Memory" fact above
    details = _details(f.detail or {}, clock, skip=("ran_out",) if RAN_OUT.get((f.detail or {}).get("ran_out")) else (),
                       evidence_texts=[e.text or "" for e in f.evidence])
    evidence = [{"path": e.path, "line": e.line, "text": _clip(e.text)} for e in f.evidence[:MAX_EVIDENCE]]
    return {
        "kind": f.kind, "severity": f.severity, "summary": _clip(f.summary, 600), "facts": facts,
        "details": details, "evidence": evidence, "evidence_more": max(0, len(f.evidence) - MAX_EVIDENCE),
        "causes": [_clip(c, 300) for c in f.causes[:10]], "checks": [_clip(c, 300) for c in f.checks[:10]],
        "related": [_clip(c, 300) for c in f.related[:10]],
    }


def _events_ctx(events: pl.DataFrame, clock: _Clock) -> dict:
    if events.is_empty():
        return {"total": 0, "by_kind": [], "rows": [], "omitted": 0, "untimed": 0}
    by_kind = events.group_by("kind").agg(
        pl.len().alias("count"), pl.col("time").min().alias("first"), pl.col("time").max().alias("last"),
    ).sort("count", "kind", descending=[True, False])
    kinds = []
    for r in by_kind.iter_rows(named=True):
        f, l = clock.when(r["first"]), clock.when(r["last"])
        kinds.append({"kind": r["kind"], "label": EVENT_STYLE.get(r["kind"], (r["kind"],))[0], "count": r["count"],
                      "first": f["local"] if f else None, "last": l["local"] if l else None})
    # sanitizer leak records get their own section; here the timeline of things that happened
    timeline_events = rows_where(events, ~pl.col("kind").is_in(["sanitizer_leak"]))
    ordered = timeline_events.with_row_index("_i").sort(["time", "_i"], nulls_last=True).head(MAX_EVENT_ROWS)
    rows = []
    for e in ordered.iter_rows(named=True):
        w = clock.when(e["time"])
        rows.append({"kind": e["kind"], "label": _event_label(e), "when": w, "path": e["source"], "line": e["line"],
                     "text": _clip(e["text"])})
    return {"total": events.height, "by_kind": kinds, "rows": rows,
            "omitted": max(0, timeline_events.height - len(rows)),
            "untimed": int(events["time"].null_count())}


def _frame_text(frame) -> str:
    """`symbol at file:line in module` (module by its base name), or the frame as given."""
    if isinstance(frame, dict):
        sym = frame.get("symbol") or frame.get("function") or frame.get("name")
        text = sym or (f"[{frame['offset']}]" if frame.get("offset") else "?")
        src = frame.get("file") or frame.get("filename")
        if src:
            text += f" at {src}" + (f":{frame['line']}" if frame.get("line") is not None else "")
        if frame.get("module"):
            text += f" in {_base(str(frame['module']).replace(chr(92), '/'))}"
        return _clip(text, 300)
    return _clip(frame, 300)


def _is_user_frame(frame) -> bool:
    if isinstance(frame, dict) and "user" in frame:
        return bool(frame["user"])
    return not _LIB_FRAME.search(_frame_text(frame))


def _sanitizer_ctx(events: pl.DataFrame) -> dict | None:
    leaks = rows_where(events, pl.col("kind") == "sanitizer_leak")
    if leaks.is_empty():
        return None
    leaks = leaks.with_columns(
        pl.coalesce(pl.col("detail").str.json_path_match("$.stack"),
                    pl.col("detail").str.json_path_match("$.frames")).fill_null("[]").alias("_frames"),
        pl.col("detail").str.json_path_match("$.allocator_cache_at_exit").fill_null("false").alias("_cache"),
    )
    groups = leaks.with_row_index("_i").group_by("_frames", "_cache").agg(
        pl.len().alias("count"),
        pl.col("bytes").sum().alias("bytes"),
        pl.col("bytes").null_count().alias("unknown_bytes"),
        pl.col("detail").sort_by("_i").first().alias("detail"),
        pl.col("source").sort_by("_i").first().alias("path"),
        pl.col("line").sort_by("_i").first().alias("line"),
        pl.col("text").sort_by("_i").first().alias("text"),
        pl.col("_i").min().alias("_first"),
    ).with_columns((pl.col("_cache") == "true").alias("expected"))
    groups = groups.sort(["expected", "bytes", "count", "_first"], descending=[False, True, True, False],
                         nulls_last=True)
    out = []
    for g in groups.head(MAX_SANITIZER_GROUPS).iter_rows(named=True):
        d = _json_detail(g["detail"])
        try:
            frames = json.loads(g["_frames"])
        except ValueError:
            frames = []
        if not isinstance(frames, list):
            frames = []
        user = [_frame_text(fr) for fr in frames if _is_user_frame(fr)]
        lib = [_frame_text(fr) for fr in frames if not _is_user_frame(fr)]
        site = d.get("site_label") or d.get("site") or (user[0] if user else (lib[0] if lib else None))
        if isinstance(site, dict):
            site = _frame_text(site)
        out.append({
            "site": _clip(site, 300) if site else "(no backtrace)",
            "count": g["count"], "bytes": g["bytes"], "bytes_text": human(g["bytes"]) if g["bytes"] is not None else "—",
            "expected": bool(g["expected"]),
            "user_frames": user[:MAX_FRAMES], "library_frames": lib[:MAX_FRAMES],
            "frames_more": max(0, len(user) - MAX_FRAMES) + max(0, len(lib) - MAX_FRAMES),
            "evidence": {"path": g["path"], "line": g["line"], "text": _clip(g["text"])},
        })
    total = leaks["bytes"].sum()
    expected = leaks.filter(pl.col("_cache") == "true")
    return {
        "groups": out, "groups_omitted": max(0, groups.height - len(out)),
        "allocations": leaks.height, "bytes": total, "bytes_text": human(total),
        "expected_allocations": expected.height, "expected_bytes_text": human(expected["bytes"].sum()) if expected.height else None,
    }


_OOM_KEYS = ("anon_rss", "file_rss", "shmem_rss", "total_vm", "pgtables", "rss", "oom_score_adj", "uid",
             "scope", "constraint", "memcg", "task_memcg", "oom_memcg", "cpuset", "nodemask", "global_oom")


def _oom_kills_ctx(events: pl.DataFrame, clock: _Clock) -> dict:
    kills = events.filter(pl.col("kind") == "oom_kill").sort("time", nulls_last=True)
    rows = []
    for e in kills.head(MAX_TABLE_ROWS).iter_rows(named=True):
        d = _json_detail(e["detail"])
        ordered = {k: d[k] for k in _OOM_KEYS if k in d}
        ordered.update(d)
        facts = _details(ordered, clock, skip=("pid", "process", "victim", "message", "host", "evidence_lines"),
                         evidence_texts=[e["text"] or ""])
        rows.append({"when": clock.when(e["time"]), "pid": e["pid"], "process": _clip(e["process"], 120),
                     "bytes_text": human(e["bytes"]) if e["bytes"] is not None else None, "facts": facts,
                     "path": e["source"], "line": e["line"], "text": _clip(e["text"])})
    return {"rows": rows, "total": kills.height, "omitted": max(0, kills.height - len(rows))}


def _gpu_ooms_ctx(events: pl.DataFrame, clock: _Clock) -> dict:
    ooms = events.filter(pl.col("kind") == "gpu_oom").sort("time", nulls_last=True)
    rows = []
    for e in ooms.head(MAX_TABLE_ROWS).iter_rows(named=True):
        facts = _details(_json_detail(e["detail"]), clock, skip=("host",), evidence_texts=[e["text"] or ""])
        rows.append({"when": clock.when(e["time"]), "gpu": e["gpu"], "pid": e["pid"],
                     "bytes_text": human(e["bytes"]) if e["bytes"] is not None else None, "facts": facts,
                     "path": e["source"], "line": e["line"], "text": _clip(e["text"])})
    return {"rows": rows, "total": ooms.height, "omitted": max(0, ooms.height - len(rows))}


def _xids_ctx(events: pl.DataFrame, clock: _Clock) -> dict:
    xids = events.filter(pl.col("kind") == "xid")
    if xids.is_empty():
        return {"groups": [], "total": 0, "omitted": 0}
    xids = xids.with_row_index("_i").with_columns(
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
        try:
            fatal = int(code) in FATAL_XIDS
        except (TypeError, ValueError):
            fatal = False
        fatal = fatal or "fallen off the bus" in (g["meaning"] or "").lower()
        out.append({"gpu": g["gpu"], "code": code, "meaning": _clip(g["meaning"], 300) if g["meaning"] else None,
                    "weight": _clip(g["weight"], 300) if g["weight"] else None,
                    "count": g["count"], "first": clock.when(g["first"]), "last": clock.when(g["last"]),
                    "pids": g["pids"], "processes": [_clip(p, 80) for p in g["processes"]], "fatal": fatal,
                    "path": g["path"], "line": g["line"], "text": _clip(g["text"])})
    return {"groups": out, "total": xids.height, "omitted": max(0, groups.height - len(out))}


def _inputs_ctx(inputs: list, clock: _Clock) -> dict:
    rows = []
    for i in inputs[:MAX_INPUT_ROWS]:
        s, e = clock.when(i.start), clock.when(i.end)
        reasons = []
        for reason, n in sorted((i.skip_reasons or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
            ex = (getattr(i, "skip_examples", None) or {}).get(reason) or []
            reasons.append({"reason": _clip(reason, 200), "count": n, "examples": list(ex)[:5]})
        rows.append({
            "path": i.path, "format": i.format, "reason": _clip(i.reason, 200), "lines": i.lines,
            "records": i.records, "skipped": i.skipped, "skip_reasons": reasons,
            "start": s, "end": e, "range": clock.span(i.start, i.end), "clock": i.clock, "anchor": _clip(i.anchor, 300) if i.anchor else None,
            "compression": i.compression, "wrapper": _clip(i.wrapper, 200) if i.wrapper else None,
            "notes": [_clip(n, 300) for n in (i.notes or [])[:10]], "error": _clip(i.error, 600) if i.error else None,
            "used": bool(i.format) and not i.error,
        })
    return {
        "rows": rows, "omitted": max(0, len(inputs) - len(rows)),
        "total": len(inputs),
        "lines": sum(i.lines for i in inputs), "records": sum(i.records for i in inputs),
        "skipped": sum(i.skipped for i in inputs),
        "unreadable": sum(1 for i in inputs if i.error),
        "unrecognized": sum(1 for i in inputs if not i.format and not i.error),
    }


# ---- the verdict banner ----------------------------------------------------------------------------

def _same_text(a: str | None, b: str | None) -> bool:
    """The detector's verdict reason often is the lead finding's sentence (plus a count): say it once."""
    if not a or not b:
        return False
    a, b = a.strip().rstrip("."), b.strip().rstrip(".")
    return a in b or b in a


def _top_finding(findings: list):
    def score(f):
        kind_rank = {"leak": 0, "cache_growth": 1}.get(f.kind, 2)
        return (kind_rank, -SEVERITY_RANK.get(f.severity, 0), -(f.confidence or 0), -(f.rate_bytes_per_hour or 0))
    ranked = sorted(findings, key=score)
    return ranked[0] if ranked else None


def _chart_for(f, charts: list) -> dict | None:
    """The chart that shows a finding best: the one drawing its own series, else its GPU, else its process."""
    if f is None:
        return None

    def draws(c):
        return any(s["series"] == f.series for s in c["series"])

    for pred in (
        lambda c: _finding_on_chart(f, c) and draws(c) and (c["kind"] != "process" or f.series == "process.used"),
        lambda c: f.gpu is not None and c["kind"] == "gpu" and c["gpu"] == f.gpu,
        lambda c: _finding_on_chart(f, c),
        lambda c: draws(c),
    ):
        for c in charts:
            if pred(c):
                return c
    return None


def _fatal_event(events: pl.DataFrame, clock: _Clock) -> dict | None:
    """What ended the job: the first OOM kill or CUDA OOM (else a fatal Xid), with its evidence."""
    cand = rows_where(events, pl.col("kind").is_in(list(FATAL_KINDS))).with_row_index("_i")
    if cand.is_empty():
        xids = events.filter(pl.col("kind") == "xid").with_columns(
            pl.col("detail").str.json_path_match("$.code").cast(pl.Int64, strict=False).alias("_code"))
        cand = rows_where(xids, pl.col("_code").is_in(list(FATAL_XIDS))).drop("_code").with_row_index("_i")
    if cand.is_empty():
        return None
    e = cand.sort(["time", "_i"], nulls_last=True).row(0, named=True)
    return {"label": _event_label(e), "when": clock.when(e["time"]), "x": _epoch(e["time"]),
            "path": e["source"], "line": e["line"],
            "text": _clip(e["text"]), "kind": e["kind"], "count": cand.height}


def _verdict_ctx(analysis, bundle, charts: list, clock: _Clock, empty: bool) -> tuple[dict, dict | None]:
    code = _get(analysis, "verdict", default="inconclusive") or "inconclusive"
    label, tone = VERDICT_LABELS.get(code, (str(code), "neutral"))
    findings = list(_get(analysis, "findings", default=None) or [])
    top = _top_finding(findings)
    if top is not None and top.kind not in ("leak", "cache_growth"):
        top_growth = None
    else:
        top_growth = top
    chart = _chart_for(top_growth, charts) or (charts[0] if charts else None)
    numbers = []
    primary = None
    if top_growth is not None:
        start = clock.when(top_growth.start)
        if start:
            numbers.append({"label": "Onset", "value": start["local"], "sub": None if clock.is_utc else start["utc"]})
        elif top_growth.start_index is not None:
            numbers.append({"label": "Onset", "value": f"step/sample {top_growth.start_index}", "sub": "no clock in this log"})
        rate = rate_text(top_growth.rate_bytes_per_hour, _span(top_growth))
        per_step = _rate(top_growth.rate_bytes_per_step, "step")
        if rate or per_step:
            numbers.append({"label": "Growth rate", "value": rate or per_step, "sub": per_step if rate else None})
    if chart is not None:
        main = max(chart["series"], key=lambda s: s["peak"] or 0) if chart["series"] else None
        if main is not None:
            sub = chart["title"]
            if chart["capacity"]:
                sub = f"of {human(chart['capacity'])} ({main['peak'] / chart['capacity']:.0%}), {chart['title']}"
            numbers.append({"label": "Peak", "value": human(main["peak"]), "sub": sub})
    fatal = _fatal_event(bundle.events, clock)
    ran_out = RAN_OUT.get((top_growth.detail or {}).get("ran_out")) if top_growth is not None else None
    if ran_out is not None:
        at = clock.when(top_growth.exhaust_at)
        numbers.append({"label": "Memory", "value": f"ran out ({ran_out})", "sub": at["local"] if at else None})
    elif top_growth is not None and (top_growth.exhaust_in_hours is not None or top_growth.exhaust_at is not None):
        at = clock.when(top_growth.exhaust_at)
        # a job that ended (its memory released) did not run out: say what its pace would have done
        ended = getattr(top_growth, "lifetime_ended", None) in ("release", "restart")
        numbers.append({"label": "At this pace, full in" if ended else "Time to exhaustion",
                        "value": _duration(top_growth.exhaust_in_hours) or (at["local"] if at else "—"),
                        "sub": at["local"] if at and top_growth.exhaust_in_hours is not None else None})
    elif fatal is not None and top_growth is not None:
        numbers.append({"label": "Time to exhaustion", "value": "reached",
                        "sub": fatal["when"]["local"] if fatal["when"] else "memory ran out (see below)"})
    if fatal is not None:
        numbers.append({"label": "What ended the job", "value": fatal["label"],
                        "sub": f"{fatal['path']}:{fatal['line']}" if fatal["line"] is not None else fatal["path"]})
    elif not empty:
        numbers.append({"label": "What ended the job", "value": "nothing fatal found",
                        "sub": "no OOM kill, CUDA OOM or fatal Xid in these logs"})
    if chart is not None:
        onset_x = None
        if top_growth is not None:
            onset_x = _epoch(top_growth.start) if chart["xkind"] == "time" else (
                float(top_growth.start_index) if top_growth.start_index is not None else None)
        if onset_x is None:
            onset_x = next((o["x"] for o in chart["onsets"]), None)
        # the end that matters: what killed the job, else where the growth stopped (memory released
        # after the job is not the story)
        end_x = None
        if chart["xkind"] == "time":
            end_x = fatal["x"] if fatal else None
            if end_x is None and top_growth is not None:
                end_x = _epoch(top_growth.end)
        primary = {"chart_id": chart["id"], "onset_x": onset_x, "fatal": fatal is not None, "end_x": end_x}
    reason = _get(analysis, "verdict_reason", default=None)
    if fatal is not None and tone == "ok":
        # never green beside what ended the job: say what did
        label, tone = f"No GPU memory leak found; the job was ended by {fatal['label']}", "warning"
    verdict = {"code": code, "label": label, "tone": "empty" if empty else tone,
               "reason": _clip(reason, 800) if reason else None, "numbers": numbers,
               "top_finding": _clip(top.summary, 600) if top is not None and not _same_text(top.summary, reason) else None,
               "fatal": fatal}
    return verdict, primary


# ---- the context -----------------------------------------------------------------------------------

def build_context(bundle, analysis, opts) -> dict:
    """Everything the HTML and Markdown show, as plain data."""
    zone = getattr(opts, "tz", None) or "UTC"
    clock = _Clock(zone)
    samples, events = bundle.samples, bundle.events
    empty = samples.is_empty() and events.is_empty()
    charts, omitted, raw = _build_charts(bundle, analysis, clock)
    verdict, primary = _verdict_ctx(analysis, bundle, charts, clock, empty)
    zooms = _zooms(primary, charts, raw, clock, analysis)
    findings = list(_get(analysis, "findings", default=None) or [])
    order = sorted(range(len(findings)), key=lambda i: (-SEVERITY_RANK.get(findings[i].severity, 0), i))
    shown = [findings[i] for i in order[:MAX_FINDINGS]]
    rest = Counter((findings[i].kind, findings[i].severity) for i in order[MAX_FINDINGS:])
    inputs = _inputs_ctx(bundle.inputs, clock)
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
    clock_notes.extend(_clip(f"{i.path}: clock {i.clock}, {i.anchor}", 300)
                       for i in bundle.inputs if i.anchor and i.clock not in ("wall", "none"))
    empty_reasons = []
    if empty:
        if not bundle.inputs:
            empty_reasons.append("No input files were given or found.")
        for i in bundle.inputs[:MAX_INPUT_ROWS]:
            if i.error:
                empty_reasons.append(_clip(i.error, 400))
            elif not i.format:
                empty_reasons.append(_clip(f"{i.path}: {i.reason or 'not recognized'}", 400))
            else:
                empty_reasons.append(_clip(f"{i.path}: read as {i.format}, but no memory readings or events "
                                           f"were found ({i.skipped} lines skipped)", 400))
    ctx = {
        "tool": "gpu-forensics",
        "version": forensics.__version__,
        "generated_at": iso(now.replace(microsecond=0)),
        "title": f"GPU memory report: {verdict['label']}" if not empty else "GPU memory report: nothing readable",
        "zone": {"name": clock.name, "is_utc": clock.is_utc, "from_user": bool(getattr(opts, "tz_from_user", False)),
                 "offset": clock.offset(data_start) if data_start else None},
        "clock_notes": clock_notes,
        "empty": empty,
        "empty_reasons": empty_reasons,
        "verdict": verdict,
        "counts": {"inputs": len(bundle.inputs), "samples": samples.height, "events": events.height,
                   "findings": len(findings), "series": sum(len(c["series"]) for c in charts)},
        "charts": charts,
        "charts_omitted": omitted,
        "zooms": zooms,
        "findings": [_finding_ctx(f, clock) for f in shown],
        "findings_omitted": [{"kind": k, "severity": s, "count": n} for (k, s), n in sorted(rest.items())],
        "sanitizer": _sanitizer_ctx(events),
        "oom_kills": _oom_kills_ctx(events, clock),
        "gpu_ooms": _gpu_ooms_ctx(events, clock),
        "xids": _xids_ctx(events, clock),
        "events": _events_ctx(events, clock),
        "inputs": inputs,
        "problems": [_clip(p, 600) for p in bundle.problems[:MAX_PROBLEMS]],
        "problems_omitted": max(0, len(bundle.problems) - MAX_PROBLEMS),
        "summary": _embedded_summary(bundle, analysis),
    }
    return ctx


def _embedded_summary(bundle, analysis) -> dict:
    """The JSON summary embedded in the HTML for machines, with findings capped to keep the file small."""
    s = summary(bundle, analysis)
    if len(s["findings"]) > EMBED_FINDINGS:
        s["findings_omitted"] = len(s["findings"]) - EMBED_FINDINGS
        s["findings"] = sorted(s["findings"], key=lambda f: -SEVERITY_RANK.get(f["severity"], 0))[:EMBED_FINDINGS]
    for f in s["findings"]:
        if len(f["evidence"]) > EMBED_EVIDENCE:
            f["evidence_omitted"] = len(f["evidence"]) - EMBED_EVIDENCE
            f["evidence"] = f["evidence"][:EMBED_EVIDENCE]
        for e in f["evidence"]:
            e["text"] = _clip(e["text"], 200)
    if len(s["inputs"]) > EMBED_INPUTS:
        s["inputs_omitted"] = len(s["inputs"]) - EMBED_INPUTS
        s["inputs"] = s["inputs"][:EMBED_INPUTS]
    return _plain(s)


def summary(bundle, analysis) -> dict:
    """The JSON summary, exactly as design.md fixes it."""
    return summary_json(
        forensics.__version__,
        _get(analysis, "verdict", default="inconclusive") or "inconclusive",
        bundle.inputs,
        list(_get(analysis, "findings", default=None) or []),
        _get(analysis, "verdict_reason", default=None),
    )


def summary_text(summary_dict: dict) -> str:
    """The JSON summary as `report --json` writes it (and scan's per-job summary.json, the same bytes)."""
    return json.dumps(summary_dict, indent=2, ensure_ascii=False) + "\n"


# ---- HTML ------------------------------------------------------------------------------------------

def template_dirs() -> list[Path]:
    """Where the templates are: inside the installed package first, then the checkout's templates/."""
    pkg = Path(forensics.__file__).resolve().parent
    dirs = [pkg / "templates", pkg.parent / "templates"]
    return [d for d in dirs if d.is_dir()]


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """The compiled templates kept between runs, in jinja2's per-user cache folder (compiling the report
    template is ~0.2 s of every `report` run; loading it ~5 ms). Keyed by the template's source, so an
    edited template is compiled again. A cache that cannot be read or written is passed over."""

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - unreadable or damaged entry: compile instead
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:  # a read-only or full disk: nothing is kept, nothing else changes
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _BytecodeCache()
    except (OSError, RuntimeError):  # no safe per-user folder (jinja2 checks its owner and mode)
        return None


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    """One environment per process: compiling the templates costs more than rendering them."""
    return _new_env(_bytecode_cache())


def _new_env(bytecode_cache: jinja2.BytecodeCache | None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs()]),
        bytecode_cache=bytecode_cache,
        autoescape=True,  # every file, whatever its name: log text is hostile
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["human"] = human
    env.filters["num"] = lambda n: "—" if n is None else f"{n:,}"
    env.filters["count"] = _count
    env.filters["path"] = _path_breaks
    return env


def script_json(data) -> str:
    """JSON safe inside <script type="application/json">: no `</`, `<!--`, `&` or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# chart geometry (SVG user units; the SVG scales to the page width)
_W = 960
_MARGIN = {"left": 70, "right": 16, "top": 22, "bottom": 44}


def _y_unit(y_max: float) -> tuple[str, int]:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if y_max >= factor:
            return unit, factor
    return "B", 1


def _nice_step(span: float, target: int) -> float:
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


_TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
               86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 91 * 86400, 182 * 86400, 364 * 86400]


def _time_ticks(x0: float, x1: float, clock: _Clock, target: int = 7) -> list[dict]:
    """Ticks on whole local minutes / hours / midnights, labelled in the user's zone and in UTC."""
    span = max(x1 - x0, 1e-3)
    step = next((s for s in _TIME_STEPS if span / s <= target), None)
    if step is None:  # years: whole numbers of 364-day "years" keep the ticks few
        step = _nice_step(span / (364 * 86400), target) * 364 * 86400
    if step >= 86400:
        # walk the local calendar so every tick is a local midnight, across DST changes too
        days = int(round(step / 86400))
        day = datetime.fromtimestamp(x0, clock.zone).date()
        times = []
        while len(times) < 40:
            t = datetime.combine(day, datetime.min.time(), clock.zone).timestamp()
            if t > x1 + 1e-6:
                break
            if t >= x0 - 1e-6:
                times.append(t)
            day += timedelta(days=days if times else 1)
    else:
        off = (datetime.fromtimestamp(x0, timezone.utc).astimezone(clock.zone).utcoffset() or timedelta(0)).total_seconds()
        first = math.ceil((x0 + off) / step) * step - off
        times = [first + k * step for k in range(40) if first + k * step <= x1 + 1e-6]
    multi_day = datetime.fromtimestamp(x0, clock.zone).date() != datetime.fromtimestamp(x1, clock.zone).date()
    fmt = "%H:%M:%S" if step < 60 else "%H:%M"
    if step >= 86400:
        fmt = "%Y-%m-%d"
    elif multi_day:
        fmt = "%m-%d " + fmt
    # a local midnight is not a UTC midnight: day ticks say the UTC hour too
    ufmt = "%m-%d %H:%M" if step >= 86400 else fmt
    ticks = []
    for t in times:
        u = datetime.fromtimestamp(t, timezone.utc)
        ticks.append({"x": t, "label": u.astimezone(clock.zone).strftime(fmt),
                      "utc": None if clock.is_utc else u.strftime(ufmt) + "Z"})
    return ticks


def _count(n, word: str) -> str:
    """`1 line`, `2 lines`: a count with its noun in the right number."""
    if n is None:
        return f"— {word}s"
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _path_breaks(path) -> Markup:
    """A path that may wrap after a slash only, never inside a name (escaped, then <wbr> after each /)."""
    return Markup("/<wbr>").join(Markup.escape(part) for part in str(path or "").split("/"))


def _num_ticks(x0: float, x1: float, target: int = 7) -> list[dict]:
    span = max(x1 - x0, 1)
    step = max(1.0, _nice_step(span, target))
    first = math.ceil(x0 / step) * step
    ticks, t = [], first
    while t <= x1 + 1e-9 and len(ticks) < 40:
        ticks.append({"x": t, "label": f"{t:,.0f}" if step >= 1 else f"{t:g}", "utc": None})
        t += step
    return ticks


def _svg_model(chart: dict, clock: _Clock, height: int) -> dict:
    """Pixel geometry of one chart for the template (all numbers, no text from logs)."""
    left, right, top, bottom = _MARGIN["left"], _W - _MARGIN["right"], _MARGIN["top"], height - _MARGIN["bottom"]
    x0, x1 = float(chart["x0"]), float(chart["x1"])
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    y_min = float(chart.get("y_min") or 0)
    y_max = float(chart["y_max"])
    if y_min == 0:
        y_max *= 1.05
    if y_max <= y_min:   # every reading the same (or below zero, from a Bundle built by hand)
        y_max = y_min + max(abs(y_min), 1 << 20)
    unit, factor = _y_unit(y_max)

    def px(x):
        return round(left + (float(x) - x0) / (x1 - x0) * (right - left), 1)

    def py(y):
        return round(bottom - (float(y) - y_min) / (y_max - y_min) * (bottom - top), 1)

    # px and py written out for the path points (thousands per report): the same arithmetic, in the
    # same order, without a call per coordinate
    x_span, x_px, y_span, y_px = x1 - x0, right - left, y_max - y_min, bottom - top
    paths = []
    for s in chart["series"]:
        parts, dots = [], []
        for run in s["runs"]:
            if len(run) == 1:
                dots.append({"x": px(run[0][0]), "y": py(run[0][1])})
                continue
            # "M x y x y ...": after a moveto, further pairs are linetos (shorter than an L each)
            # x on whole pixels (a bucket is several wide); y to a tenth, which the hover read-out reads back
            parts.append("M" + " ".join(
                f"{round(round(left + (x - x0) / x_span * x_px, 1))} {round(bottom - (y - y_min) / y_span * y_px, 1):g}"
                for x, y in run))
        paths.append({"d": "".join(parts), "dots": dots, "color": s["color"], "name": s["name"],
                      "dashed": s["dashed"]})
    ystep = _nice_step((y_max - y_min) / factor, max(4, min(5, (bottom - top) // 36))) * factor
    yticks = []
    v = math.ceil(y_min / ystep) * ystep
    while v <= y_max and len(yticks) < 12:
        yticks.append({"y": py(v), "label": f"{v / factor:g} {unit}" if v else "0"})
        v += ystep
    xticks = _time_ticks(x0, x1, clock) if chart["xkind"] == "time" else _num_ticks(x0, x1)
    for t in xticks:
        t["px"] = px(t["x"])
    markers = [dict(m, px=px(m["x"])) for m in chart["markers"]]
    return {
        "w": _W, "h": height, "left": left, "right": right, "top": top, "bottom": bottom,
        "paths": paths, "yticks": yticks, "xticks": [t for t in xticks if left - 1 <= t["px"] <= right + 1],
        "capacity": py(chart["capacity"]) if chart["capacity_drawn"] and chart["capacity"] else None,
        "capacity_label": f"capacity {human(chart['capacity'])}" if chart["capacity"] else None,
        "markers": markers,
        "onsets": [dict(o, px=px(o["x"])) for o in chart["onsets"]],
        "jobs": [dict(j, px0=px(max(j["x0"], x0)), px1=px(min(j["x1"], x1))) for j in chart.get("jobs", [])
                 if j["x1"] >= x0 and j["x0"] <= x1],
        "change_points": [px(x) for x in chart["change_points"]],
        "x0": x0, "x1": x1, "y_min": y_min, "y_max": y_max, "unit": unit, "factor": factor,
    }


def _static(name: str) -> str:
    for d in template_dirs():
        p = d / name
        if p.is_file():
            return p.read_text(encoding="utf-8")
    raise FileNotFoundError(name)


def render_html(ctx: dict) -> str:
    """One self-contained HTML file. Nothing is fetched: a CSP forbids any load, styles and the one
    script are inline, and the script is allowed by its hash only (an injected script would not run)."""
    clock = _Clock(ctx["zone"]["name"])
    env = _env()
    script = _INDENT.sub("\n", _static("report.js"))
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    svgs = {c["id"]: _svg_model(c, clock, 150 if c["kind"] == "process" else 260) for c in ctx["charts"]}
    svgs.update({z["id"]: _svg_model(z, clock, 200) for z in ctx["zooms"]})
    html = env.get_template("report.html.j2").render(
        ctx=ctx, svgs=svgs, event_style=EVENT_STYLE,
        script=Markup(script),
        # our own static files and JSON escaped by script_json: trusted, not log text
        script_hash=script_hash, css=Markup(_static("report.css")),
        summary_json=Markup(script_json(ctx["summary"])),
    )
    # template indentation is a tenth of the file; no text in it spans lines (see _clip), and the
    # script's own indentation is not hashed twice: the hash above is of the stripped script too
    return _INDENT.sub("\n", html)


_INDENT = re.compile(r"\n[ \t]+")


# ---- Markdown --------------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_text(text) -> str:
    """Log text as inert Markdown: one line, HTML escaped, Markdown punctuation backslash-escaped."""
    if text is None:
        return ""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_prose(text) -> str:
    """The tool's own sentences (likely causes, checks): their `code` stays a code span, which md_text
    would show as literal backticks; the rest is escaped as md_text escapes it."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:   # an odd backtick: no pairs to trust, all of it is plain text
        return md_text(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:   # md_text trims; the spaces between prose and a code span stay
            lead = " " if part[:1].isspace() else ""
            trail = " " if part[-1:].isspace() and part.strip() else ""
            out.append(lead + md_text(part) + trail)
        else:
            # a code span shows its content as is (no escapes, no HTML), and a space on both sides of the
            # content is stripped again: it lets the span start or end with a backtick-free edge safely
            out.append(f"`{' '.join(part.split())}`")
    return "".join(out)


def _fence(lines: list[str]) -> str:
    """A fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for line in lines for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + "text", *lines, fence])


def _md_evidence(path, line, text) -> str:
    where = f"{path}:{line}" if line is not None else (path or "")
    return " ".join(f"{where}: {_clip(text)}".split())


def render_markdown(ctx: dict) -> str:
    """A Markdown summary to paste into a ticket."""
    v = ctx["verdict"]
    out = [f"## GPU memory report: {md_text(v['label']) if not ctx['empty'] else 'nothing readable'}", ""]
    if ctx["empty"]:
        out.append("No memory readings or events could be read from the inputs:")
        out.append("")
        out.extend(f"- {md_text(r)}" for r in ctx["empty_reasons"][:20])
        out.append("")
    if v["reason"]:
        out += [f"**Verdict:** `{v['code']}`: {md_text(v['reason'])}", ""]
    else:
        out += [f"**Verdict:** `{v['code']}`", ""]
    if v["numbers"]:
        # a header row of its own: CommonMark renderers draw `| | |` as an empty first row
        out += ["| key number | value |", "|---|---|"]
        for n in v["numbers"]:
            val = md_text(n["value"]) + (f" — {md_text(n['sub'])}" if n["sub"] else "")
            out.append(f"| {md_text(n['label'])} | {val} |")
        out.append("")
    sparks = [c for c in ctx["charts"] if c["sparkline"]][:MAX_GPU_CHARTS + 4]
    if sparks:
        out += ["### Memory over time", ""]
        for c in sparks:
            main = c["series"][0]
            cap = f" of {human(c['capacity'])}" if c["capacity"] else ""
            out.append(f"- {md_text(c['title'])}, {md_text(main['series'])}: `{c['sparkline']}` "
                       f"{human(main['first'])} → {human(main['last'])}, peak {human(main['peak'])}{cap}")
        out.append("")
    if ctx["findings"]:
        out += ["### Findings", ""]
        for n, f in enumerate(ctx["findings"], start=1):
            out.append(f"{n}. **{f['severity']}** `{f['kind']}`: {md_text(f['summary'])}")
            # a nested list: each detail its own item (plain lines would merge into one paragraph)
            facts = [f"{md_text(k)}: {md_text(val)}" for k, val in f["facts"] if k != "Where"]
            if facts:
                out.append("   - " + "; ".join(facts))
            if f["causes"]:
                out.append("   - Likely cause: " + md_prose(f["causes"][0]))
            if f["checks"]:
                out.append("   - Check: " + md_prose(f["checks"][0]))
            if f["evidence"]:
                block = _fence([_md_evidence(e["path"], e["line"], e["text"]) for e in f["evidence"][:4]])
                out.append("\n".join("   " + line for line in block.splitlines()))
            out.append("")
        for o in ctx["findings_omitted"]:
            out.append(f"- and {o['count']} more {md_text(o['severity'])} {md_text(o['kind'])} finding(s)")
        if ctx["findings_omitted"]:
            out.append("")
    fatal = v.get("fatal")
    if fatal:
        out += ["### What ended the job", "", md_text(fatal["label"]) + (f", {fatal['when']['local']}" if fatal["when"] else ""), "",
                _fence([_md_evidence(fatal["path"], fatal["line"], fatal["text"])]), ""]
    san = ctx["sanitizer"]
    if san:
        out += ["### compute-sanitizer leaks by allocation site", ""]
        for g in san["groups"][:10]:
            tag = " (expected: allocator cache at exit)" if g["expected"] else ""
            out.append(f"- {g['bytes_text']} in {g['count']} allocation(s) at {md_text(g['site'])}{tag}")
        out.append("")
    ins = ctx["inputs"]
    out += ["### Inputs", "", "| file | format | lines | records | skipped | time range |", "|---|---|---:|---:|---:|---|"]
    for r in ins["rows"][:50]:
        rng = r["range"]["local"] if r["range"] else ""
        fmt = md_text(r["format"]) if r["format"] else ("**error**" if r["error"] else "not recognized")
        out.append(f"| {md_text(r['path'])} | {fmt} | {r['lines']:,} | {r['records']:,} | {r['skipped']:,} | {md_text(rng)} |")
    more = ins["total"] - min(50, len(ins["rows"]))
    if more > 0:
        out.append(f"| and {more} more | | | | | |")
    out.append("")
    if ctx["problems"]:
        out += ["### Problems", ""]
        out.extend(f"- {md_text(p)}" for p in ctx["problems"][:20])
        extra = len(ctx["problems"]) - 20 + ctx["problems_omitted"]
        if extra > 0:
            out.append(f"- and {extra} more")
        out.append("")
    out.append("_" + md_text(" ".join(ctx["clock_notes"][:2])) + f" Generated by {ctx['tool']} {md_text(ctx['version'])}._")
    return "\n".join(out) + "\n"
