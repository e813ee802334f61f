"""Detection: every memory series classified, leaks measured, events turned into findings, one verdict.

`analyze(bundle, opts)` is the stage interface. The numbers of one series are worked out in
detect_series.py; events, residual processes and slowdowns in detect_events.py; this module groups
series by GPU (one leak finding per GPU), tells a leak from caching-allocator growth, links findings
(the leak that led to an OOM), and picks the verdict. Thresholds and their reasons: docs/detection.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from forensics.detect import events as detect_events
from forensics.detect import lifetimes
from forensics.detect.series import MIN_POINTS, SeriesFit, analyze_xy
from forensics.detect.findings import SEVERITY_RANK, Evidence, Finding
from forensics.units import human, rate_text
from forensics.frames import rows_where

DRAW_POINTS = 2000            # points kept per series for the report's chart (min-max per bucket)
LEAK_CLASSES = ("linear_growth", "staircase")
# series whose growth is a leak; running peaks (max_allocated, ...) only repeat what these show
LEAK_SERIES = ("allocated", "reserved", "memory.used", "process.used", "host.rss")
FRAMEWORK_SERIES = ("allocated", "reserved")
DEVICE_SERIES = ("memory.used", "process.used")
# which series speaks first for a GPU's leak: the framework's own count is the strongest evidence
EVIDENCE_ORDER = {"allocated": 0, "memory.used": 1, "process.used": 2, "reserved": 3, "host.rss": 4}
EVIDENCE_MAX = 8              # evidence lines quoted per leak finding
SETTLED_WORDS = {"flat": "stays flat", "warmup_plateau": "levels off after a warm-up",
                 "sawtooth": "swings around a steady floor", "decline": "declines", "release": "is released"}
KIND_ORDER = {"leak": 0, "gpu_oom": 1, "oom_kill": 2, "residual_process": 3, "cache_growth": 4,
              "slowdown": 5, "xid": 6, "sanitizer_leak": 7, "cache_warmup": 8}


@dataclass
class SeriesResult:
    """One memory series as the report draws it: plain data only."""
    key: tuple                       # (source, host, gpu, pid, series, label)
    source: str | None
    host: str | None
    gpu: str | None
    pid: int | None
    series: str
    label: str | None
    n: int
    x_kind: str                      # time | step | index
    classification: str              # flat | linear_growth | staircase | sawtooth | warmup_plateau | decline | release | too_short
    reason: str = ""
    # (start_x, end_x, kind, slope): x as datetime for time, else step or index; slope in slope_unit
    segments: list[tuple] = field(default_factory=list)
    change_points: list = field(default_factory=list)
    onset: object = None             # datetime | int | None (start of the leak)
    capacity: int | None = None      # total_bytes when known
    slope_unit: str = "bytes/hour"   # bytes/hour | bytes/step | bytes/sample
    first_x: object = None
    last_x: object = None
    release_at: object = None        # x where the memory was released at the end (process death, job end)
    peak_bytes: int | None = None
    level_bytes: int | None = None   # median while the job held memory
    noise_bytes: float | None = None
    growth_bytes: int | None = None  # growth that did not fall back
    leak: dict | None = None         # pattern, onset, rate_bytes_per_hour, rate_bytes_per_step, growth_bytes, confidence
    lifetimes: list[dict] = field(default_factory=list)   # one per job in the series: start, end, began, ended, classification, leak
    _draw: tuple | None = field(default=None, repr=False, compare=False)   # (x, y, t0) that `points` is made from
    _points: list | None = field(default=None, repr=False, compare=False)

    @property
    def points(self) -> list[tuple]:
        """(x, bytes), at most DRAW_POINTS, made on first use: a datetime per point costs more than
        the rest of the series' result, and only the batch scan's sparkline reads them (for one series)."""
        if self._points is None:
            self._points = _draw_points(*self._draw) if self._draw is not None else []
        return self._points


@dataclass
class Analysis:
    verdict: str                     # leak | no_leak | cache_growth | inconclusive
    verdict_reason: str
    findings: list[Finding] = field(default_factory=list)
    series: list[SeriesResult] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# one series

@dataclass
class _Series:
    """A series with its raw arrays kept for evidence and linking (not part of the result).

    `x` is the axis the analysis ran on: seconds since t0, or the step number when every sample has
    one (memory follows the work done, and a step log's clock has pauses and jitter that are not
    memory's doing), or the sample index. `sec` maps each sample to seconds since t0 when there is
    a clock."""
    result: SeriesResult
    fit: SeriesFit
    axis: str                        # time | step | index
    x: np.ndarray
    y: np.ndarray
    lines: np.ndarray
    steps: np.ndarray | None         # step numbers aligned with x (float, nan when unknown)
    t0: datetime | None
    sec: np.ndarray | None
    parts: list = field(default_factory=list)   # one _Series per job lifetime (the whole series only)
    lifetime: lifetimes.Lifetime | None = None  # which lifetime this is (a part only) ...
    job_number: int = 1                           # ... the how-many-th of the series' jobs
    job_count: int = 1

    def seconds(self, v: float) -> float:
        if self.axis == "time":
            return float(v)
        return float(np.interp(v, self.x, self.sec))

    def to_x(self, v: float | None):
        """An analysis-axis value as the report shows it (datetime, or int step/index)."""
        if v is None:
            return None
        if self.sec is not None:
            return self.t0 + timedelta(seconds=self.seconds(v))
        return int(round(v))

    def nearest(self, v: float) -> int:
        i = int(np.searchsorted(self.x, v))
        return min(max(i, 0), self.x.size - 1)

    def epoch(self) -> np.ndarray:
        """Seconds since the Unix epoch of every sample (timed series only)."""
        return self.sec + self.t0.timestamp()

    def span_hours(self) -> float:
        return float(self.sec[-1] - self.sec[0]) / 3600.0 if self.sec is not None and self.sec.size else 0.0

    def per_hour(self, rate: float, lo: float, hi: float) -> float | None:
        """A rate per unit of the analysis axis, per hour over [lo, hi] (None without a clock)."""
        if self.sec is None:
            return None
        if self.axis == "time":
            return float(rate * 3600.0)
        dt = self.seconds(hi) - self.seconds(lo)
        return float(rate * (hi - lo) / dt * 3600.0) if dt > 0 and hi > lo else None


def _sorted_by(df: pl.DataFrame, col: str, then: list[str]) -> pl.DataFrame:
    nulls = df[col].null_count()
    if nulls:
        df = df.filter(pl.col(col).is_not_null())
    if df[col].is_sorted():   # the usual case: a log is written in order; skip the sort
        return df
    return df.sort([col, *then], nulls_last=True, maintain_order=True)


def _pick_x(df: pl.DataFrame) -> tuple[str, pl.DataFrame]:
    """Time when (nearly) every row has it; else the step; else the order within the source.
    Untimed step logs stay in the file's order: a restarted job's step counter goes back, and that
    is where one lifetime ends (sorting by step would interleave the two jobs)."""
    n = df.height
    if df["time"].null_count() <= 0.1 * n:
        return "time", _sorted_by(df, "time", ["seq", "line"])
    order = "seq" if df["seq"].null_count() == 0 else "line"
    if df["step"].null_count() <= 0.1 * n:
        return "step", _sorted_by(df.filter(pl.col("step").is_not_null()), order, [])
    return "index", _sorted_by(df, order, [])


def _analyze_series(key: tuple, df: pl.DataFrame) -> _Series:
    """The whole series (kept for drawing and for residual processes) and its job lifetimes, each
    analyzed on its own (`parts`); the series' result shows the lifetime that matters most."""
    source, host, gpu, pid, series, label = key
    df = rows_where(df, pl.col("bytes").is_not_null())
    kind, df = _pick_x(df) if df.height else ("index", df)
    t0 = None
    if kind == "time" and df.height:
        us0 = int(df["time"].dt.epoch("us")[0])
        t0 = datetime.fromtimestamp(us0 // 1_000_000, tz=timezone.utc) + timedelta(microseconds=us0 % 1_000_000)
    cap = df["total_bytes"].max() if df.height else None
    res = SeriesResult(key=key, source=source, host=host, gpu=gpu, pid=pid, series=series, label=label,
                       n=df.height, x_kind=kind, classification="too_short",
                       capacity=int(cap) if cap is not None else None,
                       slope_unit={"time": "bytes/hour", "step": "bytes/step"}.get(kind, "bytes/sample"))
    whole = _arrays(res, df, kind, t0)
    y = whole.y
    if series in FRAMEWORK_SERIES or (whole.steps is not None and series not in DEVICE_SERIES):
        spans = lifetimes.step_lifetimes(whole.steps, y.size)
    else:
        spans = lifetimes.device_lifetimes(y)
    for lt in spans:
        pres = SeriesResult(key=key, source=source, host=host, gpu=gpu, pid=pid, series=series, label=label,
                            n=lt.n, x_kind=kind, classification="too_short",
                            capacity=res.capacity, slope_unit=res.slope_unit)
        part = _part(whole, pres, lt)
        part.lifetime, part.job_number, part.job_count = lt, len(whole.parts) + 1, len(spans)
        part.fit = analyze_xy(part.x, part.y, discrete=part.axis != "time")
        pres.classification, pres.reason = part.fit.classification, part.fit.reason
        _fill_result(part)
        whole.parts.append(part)
    _fill_whole(whole)
    return whole


def _arrays(res: SeriesResult, df: pl.DataFrame, kind: str, t0: datetime | None) -> _Series:
    """The whole series' arrays in the file's (or the clock's) order: seconds since t0 when timed,
    the step numbers of an untimed step log, else the sample index. Its lifetimes are cut from these
    (`_part`), so a restarted step counter is still seen going back."""
    sec = None
    steps = df["step"].to_numpy().astype(np.float64) if df["step"].null_count() < df.height else None
    if kind == "time" and df.height:
        us = df["time"].dt.epoch("us").to_numpy().astype(np.int64)
        t0_us = (t0 - _EPOCH) // timedelta(microseconds=1) if t0 is not None else int(us[0])
        sec = (us - t0_us).astype(np.float64) / 1e6
        x = sec
    elif kind == "step":
        x = steps
    else:
        col = "seq" if df["seq"].null_count() == 0 else "line"
        x = df[col].fill_null(0).to_numpy().astype(np.float64) if df.height else np.zeros(0)
        if x.size and (np.diff(x) <= 0).any():
            x = np.arange(x.size, dtype=np.float64)
    y = df["bytes"].to_numpy().astype(np.float64)
    lines = df["line"].fill_null(0).to_numpy()
    return _Series(res, None, kind, x, y, lines, steps, t0, sec)


def _part(whole: _Series, res: SeriesResult, lt: lifetimes.Lifetime) -> _Series:
    """One lifetime of the whole series, on its analysis axis: seconds, or the step when every
    sample has one and steps only go forward (memory follows the work done, and a step log's clock
    has pauses and jitter that are not memory's doing), or the sample index."""
    sl = slice(lt.i0, lt.i1)
    x, y, lines = whole.x[sl], whole.y[sl], whole.lines[sl]
    steps = whole.steps[sl] if whole.steps is not None else None
    sec = whole.sec[sl] if whole.sec is not None else None
    axis = whole.axis
    if axis == "time":
        if (steps is not None and np.isfinite(steps).all() and np.all(np.diff(steps) >= 0)
                and np.unique(steps).size >= MIN_POINTS):
            axis, x = "step", steps
    elif axis == "step" and x.size and (np.diff(x) < 0).any():   # a step printed late (a rank's line)
        order = np.argsort(x, kind="stable")
        x, y, lines, steps = x[order], y[order], lines[order], steps[order]
    return _Series(res, None, axis, x, y, lines, steps, whole.t0, sec)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# which lifetime a series' own label shows: a leak first, then what says most about the job
_CLASS_RANK = {"linear_growth": 0, "staircase": 0, "warmup_plateau": 1, "sawtooth": 2, "decline": 3,
               "flat": 4, "release": 5, "too_short": 9}


def _judged(parts: list[_Series]) -> _Series:
    """The lifetime the series is labelled by: the leak that grew most, else the longest judged one."""
    leaking = [p for p in parts if p.fit.leak is not None]
    if leaking:
        return max(leaking, key=lambda p: p.fit.leak.growth)
    return min(parts, key=lambda p: (_CLASS_RANK.get(p.fit.classification, 8), -p.y.size))


def _fill_whole(s: _Series) -> None:
    """The series' result: drawn whole, labelled by its judged lifetime, one entry per lifetime."""
    r = s.result
    if s.x.size:
        r.first_x, r.last_x = s.to_x(float(s.x[0])), s.to_x(float(s.x[-1]))
        r._draw = _draw_arrays(s)
    judged = _judged(s.parts)   # every series has at least one lifetime (lifetimes.whole)
    s.fit = judged.fit
    jr = judged.result
    r.classification, r.reason = jr.classification, jr.reason
    r.onset, r.leak = jr.onset, jr.leak
    r.peak_bytes, r.level_bytes, r.noise_bytes, r.growth_bytes = jr.peak_bytes, jr.level_bytes, jr.noise_bytes, jr.growth_bytes
    for p in s.parts:
        r.segments.extend(p.result.segments)
        r.change_points.extend(p.result.change_points)
        r.lifetimes.append(_lifetime_entry(p))
    # where each job ended: memory released at the end of a lifetime (not the last one of the log)
    ends = [p.result.last_x for p in s.parts if p.lifetime.ended == "release"]
    r.release_at = ends[-1] if ends else jr.release_at
    if len(s.parts) > 1:
        r.reason = f"{jr.reason} (the {_ordinal(s.parts.index(judged))} of {len(s.parts)} jobs in this log)"


def _ordinal(i: int) -> str:
    return {0: "first", 1: "second", 2: "third"}.get(i, f"{i + 1}th")


def _lifetime_entry(p: _Series) -> dict:
    """One job's lifetime as the report and the JSON show it."""
    lt, r = p.lifetime, p.result
    return {"start": r.first_x, "end": r.last_x, "began": lt.began, "ended": lt.ended, "samples": lt.n,
            "classification": r.classification, "reason": r.reason, "leak": r.leak,
            "peak_bytes": r.peak_bytes}


def _display_slope(s: _Series, slope: float, lo: float, hi: float) -> float | None:
    if s.result.x_kind == "time":
        return s.per_hour(slope, lo, hi)
    return float(slope)


def _fill_result(s: _Series) -> None:
    r, fit = s.result, s.fit
    if s.x.size:
        r.first_x, r.last_x = s.to_x(float(s.x[0])), s.to_x(float(s.x[-1]))
    r.segments = [(s.to_x(g.x0), s.to_x(g.x1), g.kind, _display_slope(s, g.slope, g.x0, g.x1))
                  for g in fit.segments]
    if fit.release_x is not None:
        r.segments.append((s.to_x(fit.release_x), r.last_x, "release", None))
    r.change_points = [s.to_x(c) for c in fit.change_points]
    r.release_at = s.to_x(fit.release_x)
    if fit.classification != "too_short" and s.y.size:
        r.peak_bytes = int(fit.peak)
        r.level_bytes = int(fit.level)
        r.noise_bytes = float(fit.noise)
        r.growth_bytes = int(max(fit.persistent_growth, 0.0))
    if fit.leak is not None:
        lk = fit.leak
        r.onset = s.to_x(lk.onset)
        r.leak = {"pattern": lk.pattern, "onset": r.onset,
                  "rate_bytes_per_hour": s.per_hour(lk.rate, lk.onset, lk.end),
                  "rate_bytes_per_step": _rate_per_step(s), "growth_bytes": int(lk.growth),
                  "confidence": lk.confidence}


def _rate_per_step(s: _Series) -> float | None:
    lk = s.fit.leak
    if lk is None:
        return None
    if s.axis == "step":
        return float(lk.rate)
    if s.steps is None:
        return None
    sel = (s.x >= lk.onset) & (s.x <= lk.end) & np.isfinite(s.steps)
    if sel.sum() < 2:
        return None
    xs, st = s.x[sel], s.steps[sel]
    dstep, dx = st[-1] - st[0], xs[-1] - xs[0]
    if dstep <= 0 or dx <= 0:
        return None
    return float(lk.rate * dx / dstep)


def _draw_arrays(s: _Series) -> tuple[np.ndarray, np.ndarray, datetime | None]:
    """The series thinned to at most DRAW_POINTS (x, y), and t0 when x is seconds since it."""
    x, y = (s.sec if s.sec is not None else s.x), s.y
    if x.size > DRAW_POINTS:
        from tsdownsample import MinMaxLTTBDownsampler
        xs = x if np.all(np.diff(x) >= 0) else np.sort(x)
        idx = MinMaxLTTBDownsampler().downsample(xs, y, n_out=DRAW_POINTS)
        x, y = xs[idx], y[idx]
    return x, y, (s.t0 if s.sec is not None else None)


def _draw_points(x: np.ndarray, y: np.ndarray, t0: datetime | None) -> list[tuple]:
    if t0 is not None:
        return [(t0 + timedelta(seconds=float(a)), int(b)) for a, b in zip(x, y)]
    return [(int(round(a)), int(b)) for a, b in zip(x, y)]


def series_frames(samples: pl.DataFrame):
    """(key, frame) per series: per source, host, GPU, process, series name and label.

    A label that changes with nearly every sample (a step number kept in the tag, "step 17") does not
    name a series: such labels are dropped, so the samples form one series instead of hundreds."""
    if samples.height == 0:
        return []
    keys = ["source", "host", "gpu", "pid", "series"]
    cols = keys + ["label", "time", "seq", "line", "step", "bytes", "total_bytes"]
    out = []
    for k, df in samples.select(cols).partition_by(keys, as_dict=True, maintain_order=True).items():
        if k[4] is None:
            continue
        counts = df.group_by("label").len()["len"]
        if counts.len() == 1:
            out.append((tuple(k) + (df["label"][0],), df))
            continue
        if float(counts.median()) < MIN_POINTS:
            out.append((tuple(k) + (None,), df.with_columns(pl.lit(None, dtype=pl.String).alias("label"))))
            continue
        for (label,), part in df.partition_by("label", as_dict=True, maintain_order=True).items():
            out.append((tuple(k) + (label,), part))
    return out


# ----------------------------------------------------------------------------------------------
# evidence

def render_sample(s: _Series, i: int) -> str:
    r = s.result
    where = []
    if r.gpu is not None:
        where.append(f"GPU {r.gpu}")
    if r.pid is not None:
        where.append(f"pid {r.pid}")
    if r.label:
        where.append(r.label)
    at = s.to_x(float(s.x[i]))
    if isinstance(at, datetime):
        at_s = at.strftime("%Y-%m-%d %H:%M:%S UTC")
        if s.steps is not None and np.isfinite(s.steps[i]):
            at_s += f" (step {int(s.steps[i])})"
    else:
        at_s = f"{'step' if r.x_kind == 'step' else 'sample'} {at}"
    return f"{r.series} = {human(s.y[i])}" + (f" ({', '.join(where)})" if where else "") + f" at {at_s}"


def sample_evidence(s: _Series, i: int) -> Evidence:
    return Evidence(path=s.result.source or "?", line=int(s.lines[i]), text=render_sample(s, i))


def _leak_evidence(s: _Series) -> list[Evidence]:
    lk = s.fit.leak
    i0 = s.nearest(lk.onset)
    body_end = s.nearest(lk.end)
    peak = int(np.argmax(s.y[i0: body_end + 1])) + i0 if body_end >= i0 else body_end
    out = [sample_evidence(s, i0 - 1)] if i0 > 0 else []   # the last reading before the growth
    out.append(sample_evidence(s, i0))
    for j in (peak, body_end):
        if j != i0 and all(e.line != int(s.lines[j]) for e in out):
            out.append(sample_evidence(s, j))
    return out


# ----------------------------------------------------------------------------------------------
# leaks, grouped per GPU

def _span_seconds(s: _Series) -> float | None:
    """How long the series' job ran: the span the rate is measured over."""
    return float(s.sec[-1] - s.sec[0]) if s.sec is not None and s.sec.size else None


def _stair_every(f: Finding) -> str:
    parts = []
    if f.stair_period_seconds is not None:
        parts.append(detect_events.fmt_seconds(f.stair_period_seconds))
    if f.stair_period_steps is not None:
        n = f.stair_period_steps
        parts.append(f"{n:.0f} steps" if n >= 1.5 else "step")
    return " or ".join(parts)


def _fmt_rate(rate_h: float | None, rate_step: float | None, span_seconds: float | None = None) -> str:
    parts = []
    if rate_h is not None:
        parts.append(rate_text(rate_h, span_seconds))
    if rate_step is not None:
        parts.append(f"{human(rate_step)}/step")
    return " (".join(parts) + (")" if len(parts) == 2 else "")


def _where(gpu: str | None, host: str | None) -> str:
    w = f"GPU {gpu}" if gpu is not None else "GPU memory"
    return w + (f" on {host}" if host else "")


def _group_key(s: _Series) -> tuple:
    r = s.result
    if r.series == "host.rss":
        return (r.host, "host")
    return (r.host, r.gpu)


def _merge_unplaced(groups: dict) -> dict:
    """Framework series without a GPU join the one GPU group they can belong to."""
    placed = {k: v for k, v in groups.items() if k[1] is not None}
    for k, members in groups.items():
        if k[1] is not None:
            continue
        cands = [g for g in placed if g[1] != "host" and (k[0] is None or g[0] in (None, k[0]))]
        if len(cands) == 1:
            placed[cands[0]] = placed[cands[0]] + members
        else:
            placed[k] = members
    return placed


def _leak_finding(members: list[_Series], capacity: int | None, device: list[_Series]) -> Finding:
    members = sorted(members, key=lambda s: (EVIDENCE_ORDER.get(s.result.series, 9), -s.fit.leak.growth))
    primary = members[0]
    r = primary.result
    timed = next((s for s in members if s.result.x_kind == "time"), None)
    lk = primary.fit.leak
    rate_h = next((s.result.leak["rate_bytes_per_hour"] for s in members if s.result.leak["rate_bytes_per_hour"] is not None), None)
    rate_step = next((s.result.leak["rate_bytes_per_step"] for s in members if s.result.leak["rate_bytes_per_step"] is not None), None)
    proc = [s for s in members if s.result.series == "process.used" and s.result.pid is not None]
    pid = max(proc, key=lambda s: s.fit.leak.growth).result.pid if proc else r.pid
    gpu = next((s.result.gpu for s in members if s.result.gpu is not None), None)
    host = next((s.result.host for s in members if s.result.host is not None), None)
    f = Finding(kind="leak", severity="warning", summary="", gpu=gpu, pid=pid, series=r.series,
                pattern=lk.pattern, growth_bytes=int(lk.growth), bytes=int(primary.fit.peak),
                confidence=max(s.fit.leak.confidence for s in members), source=r.source)
    f.rate_bytes_per_hour = rate_h
    f.rate_bytes_per_step = rate_step
    if timed is not None:
        f.start = timed.to_x(timed.fit.leak.onset)
        f.end = timed.to_x(timed.fit.leak.end)
    if r.x_kind != "time":
        f.start_index = primary.to_x(lk.onset)
    if r.x_kind == "index":
        f.detail["rate_bytes_per_sample"] = float(lk.rate)
    if primary.steps is not None and np.isfinite(primary.steps[primary.nearest(lk.onset)]):
        f.detail["start_step"] = int(primary.steps[primary.nearest(lk.onset)])
    # projection: the device's own series when there is one (it sees every allocator), else the primary
    proj = next((s for s in members if s.result.series == "memory.used"), None) or timed or primary
    plk = proj.fit.leak
    cap = capacity or proj.result.capacity
    if cap:
        remaining = cap - plk.end_level
        f.detail["capacity_bytes"] = int(cap)
        proj_rate_h = proj.per_hour(plk.rate, plk.onset, plk.end)
        if proj_rate_h and proj_rate_h > 0:
            hours = max(remaining, 0.0) / proj_rate_h
            f.exhaust_in_hours = hours
            f.exhaust_at = proj.to_x(plk.end) + timedelta(hours=hours)
            duration_h = proj.span_hours()
            f.detail["log_hours"] = duration_h
            if hours <= duration_h:
                f.severity = "critical"
        elif plk.rate > 0:
            n_steps = max(remaining, 0.0) / plk.rate
            f.detail["exhaust_in_" + ("steps" if proj.result.x_kind == "step" else "samples")] = n_steps
            if n_steps <= proj.x[-1] - proj.x[0]:
                f.severity = "critical"
    f.detail["series"] = [
        {"series": s.result.series, "source": s.result.source, "pid": s.result.pid, "label": s.result.label,
         "pattern": s.fit.leak.pattern, "growth_bytes": int(s.fit.leak.growth),
         "rate_bytes_per_hour": s.result.leak["rate_bytes_per_hour"],
         "rate_bytes_per_step": s.result.leak["rate_bytes_per_step"], "onset": s.result.onset,
         "classification": s.result.classification}
        for s in members]
    f.detail["steps_at"] = [primary.to_x(v) for v in lk.steps]
    _lifetime_facts(f, timed or primary, members)
    for s in members[:3]:
        f.evidence.extend(_leak_evidence(s))
    del f.evidence[EVIDENCE_MAX:]
    where = _where(gpu, host) if r.series != "host.rss" else "Host memory" + (f" on {host}" if host else "")
    span = _span_seconds(timed) if timed is not None else None
    rate_txt = _fmt_rate(rate_h, rate_step, span)
    if lk.pattern == "linear":
        how = f"linearly at {rate_txt}"
    else:
        every = _stair_every(f)
        how = (f"in {f.stairs or len(lk.steps)} stairs of about {human(lk.growth / max(len(lk.steps), 1))}"
               + (f", one every {every}" if every else "") + f" (on average {rate_txt.replace(' (', ', ').rstrip(')')})")
    since = (f" since {f.start.strftime('%Y-%m-%d %H:%M:%S')} UTC" if f.start is not None
             else f" since {'step' if r.x_kind == 'step' else 'sample'} {f.start_index}")
    ending = {"release": ", and did not fall back until the job's memory was released",
              "restart": ", and did not fall back until the job restarted"}.get(f.lifetime_ended, ", and does not fall back")
    job = f.detail.get("job") or {}
    f.summary = (f"{where} ({r.series}) grows {how}{since}, +{human(lk.growth)}"
                 + (f", in pid {pid}" if pid is not None else "") + ending
                 + (f" (job {job['number']} of {job['of']} in this log)" if job.get("of", 1) > 1 else "") + ".")
    f.causes, f.checks = _leak_causes(f, members, device)
    return f


def _lifetime_facts(f: Finding, s: _Series, members: list[_Series]) -> None:
    """Which job the growth belongs to, and a staircase's stairs and spacing."""
    lt = s.lifetime
    if lt is not None:
        f.lifetime_start, f.lifetime_end = s.result.first_x, s.result.last_x
        f.lifetime_ended = lt.ended
        f.detail["job"] = {"number": s.job_number, "of": s.job_count}
    lk = s.fit.leak
    if lk.pattern == "step" and len(lk.steps) >= 2:
        f.stairs = len(lk.steps)
        gaps = np.diff(lk.steps)
        period = float(np.median(gaps))
        if s.axis == "time":
            f.stair_period_seconds = period
        elif s.axis == "step":
            f.stair_period_steps = period
        if s.axis == "time" and s.steps is not None and np.isfinite(s.steps).any():
            at = [s.steps[s.nearest(v)] for v in lk.steps]
            if all(np.isfinite(at)):
                f.stair_period_steps = float(np.median(np.diff(at)))
        elif s.axis == "step" and s.sec is not None:
            f.stair_period_seconds = float(np.median(np.diff([s.seconds(v) for v in lk.steps])))


def _leak_causes(f: Finding, members: list[_Series], device: list[_Series]) -> tuple[list[str], list[str]]:
    causes, checks = [], []
    names = {s.result.series for s in members}
    if "host.rss" in names:
        causes.append("Host memory grows: DataLoader workers with pin_memory=True keep pinned buffers "
                      "(each worker and its pinned batches add up), or Python objects kept across steps.")
        checks.append("Try pin_memory=False or fewer num_workers; watch each worker's RSS (ps -o rss); "
                      "check the kernel OOM-killer lines for the killed process.")
        return causes, checks
    alloc = next((s for s in members if s.result.series == "allocated"), None)
    if f.pattern == "linear":
        causes.append("Growth every iteration: tensors kept alive across steps, e.g. `total_loss += loss` "
                      "instead of `total_loss += loss.item()`, or outputs/losses appended to a list "
                      "with their autograd graph.")
        checks.append("Search the training loop for accumulators of tensors; use .item() or .detach(); "
                      "take torch.cuda.memory._record_memory_history() snapshots two steps apart and diff them.")
    else:
        causes.append("A step up at a regular interval (each epoch or evaluation): an optimizer, LR "
                      "scheduler, model copy or per-epoch object re-created and still referenced.")
        checks.append("Create optimizers and schedulers once, outside the epoch loop; look for objects "
                      "stored per epoch (lists of models, metrics holding tensors); compare "
                      "torch.cuda.memory_summary() at two epoch boundaries.")
    if alloc is None and "reserved" in names and "memory.used" not in names:
        causes.append("Only the reserved (cached) memory is known: part of this may be the caching "
                      "allocator rather than live tensors.")
        checks.append("Log torch.cuda.memory_allocated() next to memory_reserved() to tell them apart.")
    if names <= set(DEVICE_SERIES):
        causes.append("nvidia-smi counts what PyTorch's caching allocator reserved, not only live tensors: "
                      "without the framework's own allocated count, a cache that keeps growing "
                      "(fragmentation from varying shapes) raises memory.used the same way.")
        checks.append("Log torch.cuda.memory_allocated() and torch.cuda.memory_reserved() at each step: "
                      "allocated growing is a leak; only reserved growing is the cache.")
    if "process.used" in names and f.pid is not None:
        checks.append(f"nvidia-smi --query-compute-apps=pid,used_memory --format=csv shows pid {f.pid} growing.")
    return causes, checks


def _cache_finding(reserved: _Series, alloc: _Series | None, device: _Series | None) -> Finding:
    grow = reserved if reserved.fit.leak is not None else device
    lk = grow.fit.leak
    r = grow.result
    f = Finding(kind="cache_growth", severity="info", summary="", gpu=r.gpu, pid=r.pid, series=r.series,
                pattern=lk.pattern, growth_bytes=int(lk.growth), bytes=int(grow.fit.peak), source=r.source,
                confidence=lk.confidence)
    f.rate_bytes_per_hour = r.leak["rate_bytes_per_hour"]
    f.rate_bytes_per_step = r.leak["rate_bytes_per_step"]
    if r.x_kind == "time":
        f.start, f.end = grow.to_x(lk.onset), grow.to_x(lk.end)
    else:
        f.start_index = grow.to_x(lk.onset)
    f.evidence.extend(_leak_evidence(grow))
    flat_txt = ""
    if alloc is not None:
        f.evidence.append(sample_evidence(alloc, 0))
        f.evidence.append(sample_evidence(alloc, alloc.x.size - 1))
        flat_txt = (f" while allocated memory {SETTLED_WORDS.get(alloc.result.classification, 'stays level')} "
                    f"(about {human(alloc.fit.level)})")
    released = " until it was released (empty_cache() or the job's end)" if grow.fit.release_x is not None else ""
    f.summary = (f"{_where(r.gpu, r.host)}: {r.series} grows by {human(lk.growth)}{released}{flat_txt}: the caching "
                 "allocator holds freed blocks, which is not a leak.")
    f.causes = ["The caching allocator keeps freed blocks reserved for reuse; varying tensor shapes "
                "fragment its segments so reserved memory creeps up while live tensors do not."]
    f.checks = ["Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation.",
                "Compare torch.cuda.memory_allocated() with memory_reserved(); call "
                "torch.cuda.empty_cache() only to confirm, not as a fix."]
    return f


def _cache_warmup_note(reserved: _Series, alloc: _Series) -> Finding:
    """Reserved memory that grew while the job warmed up and then stayed level: the allocator's
    working cache, worth knowing (its size), not a finding against the job."""
    r, fit = reserved.result, reserved.fit
    top = int(fit.peak)
    f = Finding(kind="cache_warmup", severity="info", gpu=r.gpu, pid=r.pid, series=r.series, source=r.source,
                bytes=top, growth_bytes=int(max(fit.persistent_growth, 0.0)),
                summary=(f"{_where(r.gpu, r.host)}: reserved memory grew by {human(fit.persistent_growth)} while the "
                         f"job warmed up, then stayed level at about {human(top)}, with allocated memory "
                         f"{SETTLED_WORDS.get(alloc.fit.classification, 'level')} (about {human(alloc.fit.level)}): "
                         "the caching allocator's working cache, not a leak."))
    i_top = int(np.argmax(reserved.y))
    f.evidence = [sample_evidence(reserved, 0), sample_evidence(reserved, i_top), sample_evidence(reserved, reserved.x.size - 1)]
    if reserved.sec is not None:
        f.start, f.end = reserved.to_x(float(reserved.x[0])), reserved.to_x(float(reserved.x[-1]))
    f.checks = ["If the cache is larger than the job needs, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                "reduces fragmentation; the size itself is not a leak."]
    return f


def _outside_allocator_note(f: Finding) -> None:
    f.causes.insert(0, "The device's memory grows while PyTorch's own allocated and reserved counts stay "
                       "flat: the growth is outside the caching allocator (another process, NCCL or cuDNN "
                       "workspaces, CUDA graphs, a native extension's cudaMalloc).")
    f.checks.insert(0, "Compare nvidia-smi per-process memory with torch.cuda.memory_reserved(); list "
                       "other processes on the GPU; run the native code under compute-sanitizer --leak-check full.")


def _growing(s: _Series) -> bool:
    return s.fit.leak is not None


def _settled(s: _Series) -> bool:
    """Known and not growing (enough data to say so)."""
    return s.fit.classification not in LEAK_CLASSES and s.fit.classification != "too_short"


def _gpu_findings(all_series: list[_Series]) -> tuple[list[Finding], list[Finding]]:
    """Leak and cache-growth findings: one leak per GPU."""
    leaks_by_group: dict[tuple, list[_Series]] = {}
    cache: list[Finding] = []
    eligible = [s for s in all_series if s.result.series in LEAK_SERIES]
    # framework pairs: allocated and reserved from the same source and process
    fw: dict[tuple, dict[str, _Series]] = {}
    for s in eligible:
        r = s.result
        if r.series in FRAMEWORK_SERIES:
            fw.setdefault((r.source, r.host, r.gpu, r.pid, r.label, s.lifetime.i0 if s.lifetime else 0), {})[r.series] = s
    excluded = set()
    for pair in fw.values():
        a, res = pair.get("allocated"), pair.get("reserved")
        if res is not None and _growing(res) and a is not None and _settled(a):
            cache.append(_cache_finding(res, a, None))
            excluded.add(id(res))
        elif res is not None and res.fit.classification == "warmup_plateau" and a is not None and _settled(a):
            cache.append(_cache_warmup_note(res, a))
    allocs = [s for s in eligible if s.result.series == "allocated"]
    reserveds = [s for s in eligible if s.result.series == "reserved"]
    for s in eligible:
        if id(s) in excluded or not _growing(s):
            continue
        leaks_by_group.setdefault(_group_key(s), []).append(s)
    groups = _merge_unplaced(leaks_by_group)
    leaks = []
    device_all = [s for s in all_series if s.result.series in DEVICE_SERIES]
    for (host, gpu), members in _by_job(groups):
        names = {m.result.series for m in members}
        # device memory grows but the framework's allocated count (same GPU or unplaced) stays flat
        if not names & set(FRAMEWORK_SERIES) and gpu != "host":
            fa = [a for a in allocs if a.result.gpu in (None, gpu) and (host is None or a.result.host in (None, host))]
            fr = [a for a in reserveds if a.result.gpu in (None, gpu) and (host is None or a.result.host in (None, host))]
            if fa and all(_settled(a) for a in fa):
                dev = next((m for m in members if m.result.series == "memory.used"), members[0])
                if fr and all(_settled(a) for a in fr):
                    f = _leak_finding(members, _capacity(device_all, host, gpu), device_all)
                    _outside_allocator_note(f)
                    leaks.append(f)
                    continue
                same = [c for c in cache if c.gpu in (None, gpu)]
                if same:   # the framework's own cache finding: the device's growth is its evidence
                    c = same[0]
                    c.gpu = gpu
                    c.evidence.extend(_leak_evidence(dev)[:2])
                    c.detail["device_growth_bytes"] = int(dev.fit.leak.growth)
                    c.summary = c.summary.replace("GPU memory:", f"{_where(gpu, host)}:", 1)
                else:
                    cache.append(_cache_finding(dev, fa[0], dev))
                continue
        leaks.append(_leak_finding(members, _capacity(device_all, host, gpu), device_all))
    return leaks, cache


def _by_job(groups: dict) -> list[tuple[tuple, list[_Series]]]:
    """Each GPU's leaking lifetimes, one group per job: lifetimes of the GPU's series that overlap in
    time are one job seen by several loggers; a crash loop's restarts are one job each. Lifetimes
    without a clock join the only job there is, else the one that grew most."""
    out = []
    for key, members in groups.items():
        timed = sorted((m for m in members if m.sec is not None and m.sec.size), key=lambda m: m.epoch()[0])
        untimed = [m for m in members if m.sec is None or not m.sec.size]
        jobs: list[list[_Series]] = []
        end = -math.inf
        for m in timed:
            t = m.epoch()
            slack = 2.0 * float(np.median(np.diff(t))) if t.size > 1 else 1.0
            if jobs and t[0] <= end + slack:
                jobs[-1].append(m)
                end = max(end, float(t[-1]))
            else:
                jobs.append([m])
                end = float(t[-1])
        if jobs and untimed:
            max(jobs, key=lambda j: sum(m.fit.leak.growth for m in j)).extend(untimed)
        elif untimed:
            per_source = {}
            for m in untimed:
                per_source.setdefault(m.result.source, []).append(m)
            jobs = [untimed] if all(len(v) == 1 for v in per_source.values()) else [[m] for m in untimed]
        out.extend((key, j) for j in jobs)
    return out


def _capacity(device: list[_Series], host, gpu) -> int | None:
    caps = [s.result.capacity for s in device if s.result.capacity and s.result.gpu == gpu
            and (host is None or s.result.host in (None, host))]
    return max(caps) if caps else None


# ----------------------------------------------------------------------------------------------
# the verdict

def _verdict(series: list[_Series], parts: list[_Series], findings: list[Finding], n_events: int) -> tuple[str, str]:
    """The verdict is about GPU memory: host-memory findings are reported, not judged here."""
    leaks = [f for f in findings if f.kind == "leak" and f.series != "host.rss"]
    if leaks:
        lead = sorted(leaks, key=lambda f: (-SEVERITY_RANK[f.severity], -(f.growth_bytes or 0)))[0]
        more = f" ({len(leaks) - 1} more leak finding{'s' if len(leaks) > 2 else ''})" if len(leaks) > 1 else ""
        return "leak", lead.summary[:-1] + more + "."
    residual = [f for f in findings if f.kind == "residual_process"]
    if residual:
        return "leak", residual[0].summary[:-1] + ": GPU memory held by a process whose job is gone."
    san = [f for f in findings if f.kind == "sanitizer_leak" and f.severity != "info"]
    if san:
        total = sum(f.bytes or 0 for f in san)
        return "leak", (f"compute-sanitizer reports allocations never freed at {len(san)} site"
                        f"{'s' if len(san) > 1 else ''} ({human(total)} in all).")
    cache = [f for f in findings if f.kind == "cache_growth"]   # (a cache_warmup note is no verdict)
    if cache:
        return "cache_growth", cache[0].summary
    usable = [s for s in series if s.result.series in LEAK_SERIES and s.result.series != "host.rss"
              and s.result.classification != "too_short"]
    host = [f for f in findings if f.kind == "leak" and f.series == "host.rss"]
    host_txt = " Host memory does grow (see the host-memory finding)." if host else ""
    if usable:
        classes = sorted({p.fit.classification.replace("_", " ") for s in usable for p in s.parts
                          if p.fit.classification != "too_short"})
        kinds = {f.kind for f in findings}
        tail = ""
        if "gpu_oom" in kinds:
            tail = " The CUDA out-of-memory came from a footprint that was too large, not from GPU memory growth."
        elif "oom_kill" in kinds:
            tail = (" The kernel's OOM killer ended the job: host memory ran out, not GPU memory"
                    + (" (host memory grew: see the host-memory finding)." if host else "."))
            host_txt = ""
        return "no_leak", (f"{len(usable)} GPU memory series show no growth that persists "
                           f"({', '.join(classes)}).{host_txt}{tail}")
    expected = [f for f in findings if f.kind == "sanitizer_leak"]
    if expected:
        return "no_leak", ("compute-sanitizer's unfreed allocations are the caching allocator's own "
                           "segments, still held at exit: not a leak.")
    short = [p for p in parts if p.fit.classification == "too_short"]
    if short:
        best = max(short, key=lambda s: s.result.n)
        return "inconclusive", (f"Too little data: in the longest memory series ({best.result.series} of "
                                f"{best.result.source}) {best.fit.reason}.{host_txt}")
    if n_events:
        return "inconclusive", ("No memory readings over time in the inputs (only events), so growth "
                                "cannot be measured." + host_txt)
    return "inconclusive", "No memory readings and no events were found in the inputs."


# ----------------------------------------------------------------------------------------------
# the stage

def analyze(bundle, opts=None) -> Analysis:
    samples = bundle.samples
    events = bundle.events
    series = [_analyze_series(k, df) for k, df in series_frames(samples)]
    # growth is judged per job lifetime; residual processes need each process' whole series
    parts = [p for s in series for p in s.parts]
    leaks, cache = _gpu_findings(parts)
    findings: list[Finding] = leaks + cache
    findings.extend(detect_events.event_findings(events))
    findings.extend(detect_events.residual_findings(series, events))
    findings.extend(detect_events.slowdown_findings(parts, samples))
    detect_events.link(findings)
    findings.sort(key=lambda f: (-SEVERITY_RANK.get(f.severity, 0), KIND_ORDER.get(f.kind, 99),
                                 f.start.timestamp() if isinstance(f.start, datetime) else float("inf")))
    verdict, reason = _verdict(series, parts, findings, events.height)
    return Analysis(verdict=verdict, verdict_reason=reason, findings=findings,
                    series=[s.result for s in series])
