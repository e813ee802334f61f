"""Each memory series measured: cut into job lifetimes, each lifetime fitted (series.analyze_xy),
the result the report draws, and the sample lines quoted as evidence.

`measure_series(key, frame)` returns a Series: the whole series' arrays, kept for evidence and for
residual processes, and one part per job lifetime; its SeriesResult is labelled by the lifetime that
matters most. Lifetimes: lifetimes.py; thresholds: docs/detection.md.
"""
from __future__ import annotations

import functools
import operator
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from forensics.detect import lifetimes
from forensics.detect.thresholds import AXIS_MISSING_SHARE, MIN_POINTS
from forensics.detect.findings import Evidence
from forensics.detect.series import SeriesFit, analyze_xy
from forensics.frames import partitions, rows_where
from forensics.units import human

DRAW_POINTS = 2000            # points kept per series for the report's chart (min-max per bucket)
FRAMEWORK_SERIES = ("allocated", "reserved")
DEVICE_SERIES = ("memory.used", "process.used")
# host memory, never a GPU's: a process's resident set (host.rss) and the host's used memory (host.used)
HOST_SERIES = ("host.rss", "host.used")
# a serving engine's KV cache: a pool of GPU memory reserved at start-up and filled with its requests'
# tokens; how full it is says how busy the engine is, never that memory leaks (the engine's own pool
# check, a kv_cache_leak event, is what says that)
POOL_SERIES = ("kv_cache.used",)


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
    classification: str              # flat | linear_growth | staircase | sawtooth | warmup_plateau | growth_into_oom | decline | release | too_short
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
    rank: int | None = None          # the distributed job's rank whose series it is (forensics/ranks.py)
    _draw: tuple | None = field(default=None, repr=False, compare=False)   # (x, y, t0) that `points` is made from
    _points: list | None = field(default=None, repr=False, compare=False)

    @property
    def points(self) -> list[tuple]:
        """(x, bytes), at most DRAW_POINTS, made on first use: a datetime per point costs more than
        the rest of the series' result, and only the batch scan's sparkline reads them (for one series)."""
        if self._points is None:
            self._points = _draw_points(*self._draw) if self._draw is not None else []
        return self._points

    @property
    def point_bytes(self) -> list[int]:
        """The bytes of `points` without their x (the batch scan's sparkline reads only these): no
        datetime made per point."""
        if self._points is None and self._draw is not None:
            return [int(b) for b in self._draw[1]]
        return [p[1] for p in self.points]


@dataclass
class Series:
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
    parts: list = field(default_factory=list)   # one Series per job lifetime (the whole series only)
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
    if df["time"].null_count() <= AXIS_MISSING_SHARE * n:
        return "time", _sorted_by(df, "time", ["seq", "line"])
    order = "seq" if df["seq"].null_count() == 0 else "line"
    if df["step"].null_count() <= AXIS_MISSING_SHARE * n:
        stepped = df.filter(pl.col("step").is_not_null()) if df["step"].null_count() else df
        return "step", _sorted_by(stepped, order, [])
    return "index", _sorted_by(df, order, [])


def measure_series(key: tuple, df: pl.DataFrame) -> Series:
    """The whole series (kept for drawing and for residual processes) and its job lifetimes, each
    analyzed on its own (`parts`); the series' result shows the lifetime that matters most."""
    source, host, gpu, pid, series, label = key
    if df["bytes"].null_count():
        df = rows_where(df, pl.col("bytes").is_not_null())
    kind, df = _pick_x(df) if df.height else ("index", df)
    t0 = us = None
    if kind == "time" and df.height:
        us = _epoch_us(df["time"])
        us0 = int(us[0])
        t0 = datetime.fromtimestamp(us0 // 1_000_000, tz=timezone.utc) + timedelta(microseconds=us0 % 1_000_000)
    cap = df["total_bytes"].max() if df.height else None
    res = SeriesResult(key=key, source=source, host=host, gpu=gpu, pid=pid, series=series, label=label,
                       n=df.height, x_kind=kind, classification="too_short",
                       capacity=int(cap) if cap is not None else None,
                       slope_unit={"time": "bytes/hour", "step": "bytes/step"}.get(kind, "bytes/sample"))
    whole = _arrays(res, df, kind, t0, us)
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


def _arrays(res: SeriesResult, df: pl.DataFrame, kind: str, t0: datetime | None, us: np.ndarray | None) -> Series:
    """The whole series' arrays in the file's (or the clock's) order: seconds since t0 when timed (`us`:
    the times in µs since the epoch), the step numbers of an untimed step log, else the sample index.
    Its lifetimes are cut from these (`_part`), so a restarted step counter is still seen going back."""
    sec = None
    steps = df["step"].to_numpy().astype(np.float64) if df["step"].null_count() < df.height else None
    if kind == "time" and df.height:
        t0_us = (t0 - _EPOCH) // timedelta(microseconds=1) if t0 is not None else int(us[0])
        sec = (us - t0_us).astype(np.float64) / 1e6
        x = sec
    elif kind == "step":
        x = steps
    else:
        col = "seq" if df["seq"].null_count() == 0 else "line"
        x = _no_nulls(df[col]).astype(np.float64) if df.height else np.zeros(0)
        if x.size and (np.diff(x) <= 0).any():
            x = np.arange(x.size, dtype=np.float64)
    y = df["bytes"].to_numpy().astype(np.float64)
    lines = _no_nulls(df["line"])
    return Series(res, None, kind, x, y, lines, steps, t0, sec)


def _epoch_us(times: pl.Series) -> np.ndarray:
    """µs since the epoch of a time column without nulls (numpy's view of the column: no query)."""
    if times.dtype == pl.Datetime("us", times.dtype.time_zone):
        return times.to_numpy().view(np.int64)
    return times.dt.epoch("us").to_numpy().astype(np.int64)


def _no_nulls(col: pl.Series) -> np.ndarray:
    """An integer column as numpy, nulls read as 0 (the fill is a query: only when there are nulls)."""
    return (col.fill_null(0) if col.null_count() else col).to_numpy()


def _part(whole: Series, res: SeriesResult, lt: lifetimes.Lifetime) -> Series:
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
    return Series(res, None, axis, x, y, lines, steps, whole.t0, sec)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# which lifetime a series' own label shows: a leak first, then what says most about the job
_CLASS_RANK = {"linear_growth": 0, "staircase": 0, "growth_into_oom": 0, "warmup_plateau": 1, "sawtooth": 2, "decline": 3,
               "flat": 4, "release": 5, "too_short": 9}


def _judged(parts: list[Series]) -> Series:
    """The lifetime the series is labelled by: the leak that grew most, else the longest judged one."""
    leaking = [p for p in parts if p.fit.leak is not None]
    if leaking:
        return max(leaking, key=lambda p: p.fit.leak.growth)
    return min(parts, key=lambda p: (_CLASS_RANK.get(p.fit.classification, 8), -p.y.size))


def _fill_whole(s: Series) -> None:
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


def _lifetime_entry(p: Series) -> dict:
    """One job's lifetime as the report and the JSON show it."""
    lt, r = p.lifetime, p.result
    return {"start": r.first_x, "end": r.last_x, "began": lt.began, "ended": lt.ended, "samples": lt.n,
            "classification": r.classification, "reason": r.reason, "leak": r.leak,
            "peak_bytes": r.peak_bytes}


def _display_slope(s: Series, slope: float, lo: float, hi: float) -> float | None:
    if s.result.x_kind == "time":
        return s.per_hour(slope, lo, hi)
    return float(slope)


def _fill_result(s: Series) -> None:
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


def _rate_per_step(s: Series) -> float | None:
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


def _draw_arrays(s: Series) -> tuple[np.ndarray, np.ndarray, datetime | None]:
    """The series thinned to at most DRAW_POINTS (x, y), and t0 when x is seconds since it."""
    x, y = (s.sec if s.sec is not None else s.x), s.y
    if x.size > DRAW_POINTS:
        from tsdownsample import MinMaxLTTBDownsampler
        if not np.all(np.diff(x) >= 0):
            order = np.argsort(x, kind="stable")
            x, y = x[order], y[order]
        # binned by x where x spreads; by position where readings share an x (tsdownsample's x bins
        # fail on an x without range: it panics)
        spread = np.all(np.diff(x) > 0)
        idx = MinMaxLTTBDownsampler().downsample(*((x, y) if spread else (y,)), n_out=DRAW_POINTS)
        x, y = x[idx], y[idx]
    return x, y, (s.t0 if s.sec is not None else None)


def _draw_points(x: np.ndarray, y: np.ndarray, t0: datetime | None) -> list[tuple]:
    if t0 is not None:
        return [(t0 + timedelta(seconds=float(a)), int(b)) for a, b in zip(x, y)]
    return [(int(round(a)), int(b)) for a, b in zip(x, y)]


def gpu_of_unnamed(host: str | None, gpus) -> tuple | None:
    """The (host, gpu) that a series naming no GPU (a training log's allocated/reserved) belongs to: the
    one GPU of its host among `gpus`, the (host, gpu) pairs the bundle's series name (a series without
    a host matches any host, a GPU without one any series). None unless there is exactly one: a
    framework log on a many-GPU host could be any rank's. Detection (leaks per GPU) and the report's
    charts both place such a series by this rule."""
    cands = {(h, g) for h, g in gpus if g is not None and (host is None or h is None or h == host)}
    return next(iter(cands)) if len(cands) == 1 else None


def series_labels(samples: pl.DataFrame) -> pl.Series:
    """Each sample's label as series_frames keys it: None where the labels of its (source, host, GPU,
    process, series) change with nearly every sample."""
    labels = samples["label"]
    if labels.null_count() == labels.len():   # no labels (most logs): nothing to decide, no query
        return labels
    return label_plan(samples)[0]


SERIES_KEYS = ["source", "host", "gpu", "pid", "series"]


# (a weak reference to the last frame label_plan decided, its answer): a job asks about one samples
# table three times (the series budget, detection, the report's series table); the entry goes when
# that frame does, so no job's labels outlive it
_last_plan: tuple | None = None


def _forget_plan(ref: weakref.ref) -> None:
    global _last_plan
    if _last_plan is not None and _last_plan[0] is ref:
        _last_plan = None


def label_plan(samples: pl.DataFrame) -> tuple[pl.Series, int]:
    """(series_labels, the number of series they make), decided once per frame (no code changes a
    samples table in place: a changed table is a new frame). The rule: a (source, host, GPU, process, series)
    whose samples carry more than one label, with a median count per label below MIN_POINTS, is one
    series without a label; otherwise each label is a series of its own.

    The samples are grouped on one 64-bit code of their keys (grouping millions of rows on
    five text columns, or joining a decision back to each row, costs about 200 bytes a row; on a job's
    few hundred rows the text grouping costs more too), and the per-label counts are only taken where
    the number of labels does not decide: with n samples and k labels the median count is at most 2n/k.
    The groups' decisions are read with Series methods, which run no query. Samples of one key set (a
    step log's millions of readings) are one group: no code, no grouping, the labels counted by hash."""
    global _last_plan
    last = _last_plan   # (one read: another thread may replace it)
    if last is not None and last[0]() is samples:
        return last[1]
    plan = _label_plan(samples)
    _last_plan = (weakref.ref(samples, _forget_plan), plan)
    return plan


def _label_plan(samples: pl.DataFrame) -> tuple[pl.Series, int]:
    labels = samples["label"]
    if constant_keys(samples, SERIES_KEYS):   # one (source, host, GPU, process, series)
        n, nulls = labels.len(), labels.null_count()
        if nulls == n or (not nulls and labels.min() == labels.max()):   # one label
            return labels, 1
        # (distinct labels have at least as many distinct hashes: more than 2n / MIN_POINTS of them
        # decide without the set of every label, which holds each label's text)
        if 2 * n < MIN_POINTS * labels.hash().n_unique():
            return pl.repeat(None, n, dtype=pl.String, eager=True).alias("label"), 1
    # (the code materialized first: grouping on it in the same lazy query holds twice the memory)
    code = samples.select(functools.reduce(operator.xor, [pl.col(c).hash(seed=i) for i, c in enumerate(SERIES_KEYS)])
                          .alias("_g")).to_series()
    per = samples.select(*SERIES_KEYS, "label").hstack([code]).group_by("_g").agg(
        pl.len().alias("_n"), pl.col("label").n_unique().alias("_k"),
        *[e for c in SERIES_KEYS for e in (pl.col(c).min().alias(f"_lo_{c}"), pl.col(c).max().alias(f"_hi_{c}"),
                                           pl.col(c).null_count().alias(f"_null_{c}"))])
    n, k, g = per["_n"], per["_k"], per["_g"]
    # two key sets with one code (a hash collision) would be one group: then the plain grouping decides
    for c in SERIES_KEYS:
        nulls = per[f"_null_{c}"]
        if not (((nulls == 0) & (per[f"_lo_{c}"] == per[f"_hi_{c}"])) | (nulls == n)).all():
            return _label_plan_grouped(samples)
    many = k > 1
    sure = many & (2 * n < MIN_POINTS * k)
    loose = g.filter(sure)
    open_ = g.filter(many & ~sure)
    if open_.len():
        counts = (pl.DataFrame([code, labels]).lazy().filter(pl.col("_g").is_in(open_.implode()))
                  .group_by("_g", "label").len().group_by("_g").agg(pl.col("len").median().alias("_median")).collect())
        loose = loose.append(counts["_g"].filter(counts["_median"] < MIN_POINTS))
    series = int(k.filter(~g.is_in(loose.implode())).sum()) + loose.len()
    if not loose.len():
        return labels, series
    if loose.len() == per.height:
        return pl.repeat(None, labels.len(), dtype=pl.String, eager=True).alias("label"), series
    return pl.DataFrame([code, labels]).select(
        pl.when(pl.col("_g").is_in(loose.implode())).then(None).otherwise(pl.col("label")).alias("label"))["label"], series


def _label_plan_grouped(samples: pl.DataFrame) -> tuple[pl.Series, int]:
    """label_plan by grouping the rows on their keys as they are."""
    keys = SERIES_KEYS
    labels = samples["label"]
    if labels.null_count() == labels.len():
        return labels, samples.group_by(keys).len().height
    per = samples.lazy().group_by(*keys, "label").len().group_by(keys).agg(
        pl.len().alias("_labels"), pl.col("len").median().alias("_median")).collect()
    # (counted on the few rows of `per` with Series methods, which run no query)
    loose_rows = (per["_labels"] > 1) & (per["_median"] < MIN_POINTS)
    n_loose = int(loose_rows.sum())
    series = n_loose + int(per["_labels"].filter(~loose_rows).sum())
    if not n_loose:
        return labels, series
    loose = (pl.col("_labels") > 1) & (pl.col("_median") < MIN_POINTS)
    named = samples.lazy().select(*keys, "label").join(per.lazy(), on=keys, how="left", nulls_equal=True,
                                                       maintain_order="left")
    return named.select(pl.when(loose).then(None).otherwise(pl.col("label")).alias("label")).collect()["label"], series


def series_frames(samples: pl.DataFrame):
    """(key, frame) per series: per source, host, GPU, process, series name and label, the label as
    series_labels keys it (a step number kept in the tag, "step 17", names no series: such samples form
    one series instead of hundreds)."""
    if samples.height == 0:
        return []
    keys = ["source", "host", "gpu", "pid", "series"]
    cols = keys + ["label", "time", "seq", "line", "step", "bytes", "total_bytes"]
    out = []
    named = samples.select(cols).with_columns(series_labels(samples))
    for k, df in _groups(named, keys).items():
        if k[4] is None:
            continue
        for (label,), part in _groups(df, ["label"]).items():
            out.append((tuple(k) + (label,), part))
    return out


def _groups(df: pl.DataFrame, keys: list[str]) -> dict[tuple, pl.DataFrame]:
    """partitions(df, *keys); a frame whose keys are the same on every row (a step log's one series of
    millions of readings) is its own group, not copied."""
    if constant_keys(df, keys):
        return {tuple(df.get_column(c)[0] for c in keys): df}
    return partitions(df, *keys)


def constant_keys(df: pl.DataFrame, keys: list[str]) -> bool:
    """Whether df has rows and each of `keys` holds one value (or only nulls) on every row (Series
    methods, which run no query)."""
    cols = [df.get_column(c) for c in keys]
    return df.height > 0 and all(c.null_count() == c.len() or (not c.null_count() and c.min() == c.max())
                                 for c in cols)


def render_sample(s: Series, i: int) -> str:
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


def sample_evidence(s: Series, i: int) -> Evidence:
    return Evidence(path=s.result.source or "?", line=int(s.lines[i]), text=render_sample(s, i))


def leak_evidence(s: Series) -> list[Evidence]:
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
