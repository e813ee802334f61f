"""Memory series of every shape, and the sanity checks detection must pass on each of them.

Shared by tests/test_detect_properties.py (hypothesis properties at modest example counts) and
`bench/fuzz.py --detect N` (the same properties at high counts, every failure counted). Nothing here
knows how the detector works inside: it uses only the public entry points
(`detect.series.analyze_xy`, `detect.analyze`, and the report's `build_context` / `render_html` /
`render_markdown` / `summary`).

A case is built from a small spec (shape name and a few numbers), so a failing case prints as
something a person can rebuild: `SeriesCase(shape='sawtooth', ...)`.

Checks (each raises AssertionError with a one-line reason, or lets the detector's exception through):
- no exception from analyze_xy, analyze(), build_context, render_html, render_markdown, summary;
- the verdict is one of VERDICTS, every finding's severity is one of SEVERITY_RANK;
- the JSON summary is strict JSON (no NaN/inf) and survives a round trip;
- a leak (finding or fit) has growth >= 0 and finite rates, onset and confidence;
- a series that never goes up (constant included) is never a leak, nor is a bundle whose every
  series never goes up.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl
from hypothesis import strategies as st

MiB = 1 << 20
GiB = 1 << 30
INT64_MAX = (1 << 63) - 1
T0 = datetime(2024, 3, 1, 8, 0, tzinfo=timezone.utc)
# sample counts around the detector's own limits (8 = MIN_POINTS) and a few longer ones
SIZES = [0, 1, 2, 3, 5, 7, 8, 9, 12, 16, 40, 120, 600]
LEVELS = [0, 1, MiB, 500 * MiB, 8 * GiB, 80 * GiB, 10 ** 15, 1 << 62, INT64_MAX - 1]
SHAPES = ("constant", "quantized", "two_values", "step", "sawtooth", "ramp_drop", "jobs",
          "decreasing", "raw", "huge_ramp", "negative", "single")
X_KINDS = ("regular", "jitter", "duplicates", "gaps", "all_equal", "unsorted", "step_reset")


# ----------------------------------------------------------------------------------------------
# shapes: y in bytes (float64, exact integers), from a spec

def _clip_i64(y: np.ndarray) -> np.ndarray:
    return np.clip(np.round(y), -(1 << 62), INT64_MAX - 1024)


def make_y(shape: str, n: int, level: int, p: dict) -> np.ndarray:
    i = np.arange(n, dtype=np.float64)
    q = float(p.get("quantum", MiB))
    if shape == "constant":
        y = np.full(n, float(level))
    elif shape == "single":
        y = np.full(min(n, 1), float(level))
    elif shape == "quantized":
        ks = p.get("ks") or [0]
        y = float(level) + q * np.asarray([ks[j % len(ks)] for j in range(n)], dtype=np.float64)
    elif shape == "two_values":
        a, b = float(level), float(level) + q * p.get("k", 1)
        pick = p.get("pick") or [0, 1]
        y = np.asarray([b if pick[j % len(pick)] else a for j in range(n)], dtype=np.float64)
    elif shape == "step":
        at = int(p.get("at", n // 2))
        y = np.where(i >= at, float(level) + q * p.get("k", 100), float(level))
    elif shape == "sawtooth":
        # teeth of `period` samples rising `k` quanta a sample; the floor rises `rise` quanta a tooth
        period = max(1, int(p.get("period", 12)))
        tooth = i % period
        teeth = np.floor(i / period)
        y = float(level) + q * (p.get("k", 10) * tooth + p.get("rise", 0) * teeth)
    elif shape == "ramp_drop":
        # idle, a ramp of `k` quanta a sample, then the job ends and memory drops to 0
        a, b = int(p.get("a", n // 5)), int(p.get("b", 4 * n // 5))
        y = np.where((i >= a) & (i < b), float(level) + q * p.get("k", 64) * (i - a), 0.0)
    elif shape == "jobs":
        # several lifetimes on an idle baseline of 0, each its own level and growth
        y = np.zeros(n)
        jobs = p.get("jobs") or [(0.1, 0.4, 0), (0.5, 0.9, 8)]
        for s, e, k in jobs:
            a, b = int(s * n), int(e * n)
            y[a:b] = float(level) + q * k * (i[a:b] - a)
    elif shape == "decreasing":
        drops = p.get("drops") or [1]
        y = float(level) - q * np.cumsum([abs(drops[j % len(drops)]) for j in range(n)])
    elif shape == "raw":
        vals = p.get("vals") or [0]
        y = np.asarray([vals[j % len(vals)] for j in range(n)], dtype=np.float64)
    elif shape == "huge_ramp":
        y = float(level) + q * p.get("k", 1) * i
    elif shape == "negative":
        y = -float(level) - q * p.get("k", 1) * (i % max(1, int(p.get("period", 5))))
    else:
        raise ValueError(shape)
    return _clip_i64(y)


def make_x(kind: str, n: int, dt: float, seed: int) -> np.ndarray:
    """x in the samples' order (not necessarily sorted: that is the point of some kinds)."""
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=np.float64)
    if kind == "regular":
        return i * dt
    if kind == "jitter":
        return np.round(i * dt + rng.uniform(0, 0.3 * dt, n), 3)
    if kind == "duplicates":
        return np.floor(i / 2) * dt          # every time twice
    if kind == "gaps":
        x = i * dt
        if n > 4:
            for _ in range(1 + n // 50):
                x[int(rng.integers(1, n)):] += dt * float(rng.integers(20, 2000))
        return x
    if kind == "all_equal":
        return np.zeros(n)
    if kind == "unsorted":
        return rng.permutation(n).astype(np.float64) * dt
    if kind == "step_reset":
        k = max(1, n // 3)
        return (i % k) * dt                  # a step counter that restarts (a resumed job)
    raise ValueError(kind)


def never_up(y: np.ndarray) -> bool:
    return bool(y.size == 0 or np.all(np.diff(y) <= 0))


@dataclass
class SeriesCase:
    shape: str
    n: int
    level: int
    params: dict
    x_kind: str
    dt: float
    seed: int = 0

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) sorted by x (stable), as detect hands them to analyze_xy."""
        y = make_y(self.shape, self.n, self.level, self.params)
        x = make_x(self.x_kind, y.size, self.dt, self.seed)
        order = np.argsort(x, kind="stable")
        return x[order], y[order]


def _params(draw, shape: str, n: int) -> dict:
    small = st.integers(-3, 40)
    if shape == "quantized":
        return {"ks": draw(st.lists(st.integers(0, 8), min_size=1, max_size=8))}
    if shape == "two_values":
        return {"k": draw(st.integers(1, 4)), "pick": draw(st.lists(st.integers(0, 1), min_size=1, max_size=9))}
    if shape == "step":
        return {"at": draw(st.integers(0, max(n, 1))), "k": draw(st.integers(-2000, 20000))}
    if shape == "sawtooth":
        return {"period": draw(st.integers(2, 40)), "k": draw(st.integers(0, 64)), "rise": draw(st.integers(0, 64))}
    if shape == "ramp_drop":
        a = draw(st.integers(0, max(n - 1, 0)))
        return {"a": a, "b": draw(st.integers(a, max(n, a))), "k": draw(st.integers(0, 512))}
    if shape == "jobs":
        jobs, t = [], 0.0
        for _ in range(draw(st.integers(1, 4))):
            s = t + draw(st.floats(0.0, 0.2))
            e = min(1.0, s + draw(st.floats(0.05, 0.5)))
            jobs.append((round(s, 3), round(e, 3), draw(st.integers(0, 32))))
            t = e
        return {"jobs": jobs}
    if shape == "decreasing":
        return {"drops": draw(st.lists(st.integers(0, 3), min_size=1, max_size=6))}
    if shape == "raw":
        return {"vals": draw(st.lists(st.one_of(st.integers(-(1 << 40), 1 << 62), st.sampled_from(LEVELS)),
                                      min_size=1, max_size=12))}
    if shape in ("huge_ramp", "negative"):
        return {"k": draw(small), "period": draw(st.integers(1, 9))}
    return {}


@st.composite
def series_cases(draw, shapes=SHAPES, x_kinds=X_KINDS) -> SeriesCase:
    shape = draw(st.sampled_from(shapes))
    n = draw(st.one_of(st.sampled_from(SIZES), st.integers(0, 300)))
    level = draw(st.sampled_from(LEVELS) if shape not in ("huge_ramp",) else st.sampled_from([10 ** 15, 1 << 62, INT64_MAX - (1 << 40)]))
    params = _params(draw, shape, n)
    if draw(st.booleans()):
        params["quantum"] = draw(st.sampled_from([1, MiB, 1 << 30, 1000, 7]))
    return SeriesCase(shape, n, level, params, draw(st.sampled_from(x_kinds)),
                      draw(st.sampled_from([1.0, 0.5, 5.0, 60.0, 1e-3])), draw(st.integers(0, 3)))


# ----------------------------------------------------------------------------------------------
# bundles: many series (GPUs, pids, framework counts), with the flaws of real logs

@dataclass
class BundleCase:
    series: list[SeriesCase]                 # one per (gpu, pid, series name)
    names: list[str]                         # memory.used | process.used | allocated | reserved | host.rss
    gpus: list[str | None]
    pids: list[int | None]
    timed: bool = True
    null_time_share: float = 0.0             # share of rows without a time
    steps: str = "none"                      # none | increasing | reset
    total_small: bool = False                # total_bytes smaller than bytes
    events: list[str] = field(default_factory=list)   # gpu_oom | oom_kill | process_gone | xid

    def build(self):
        """(Bundle, every series never goes up and is read in its own order)."""
        from forensics.model import Bundle, InputInfo
        from forensics.model import events_frame, samples_frame

        frames, monotone, keys = [], True, set()
        for k, (sc, name, gpu, pid) in enumerate(zip(self.series, self.names, self.gpus, self.pids)):
            y = make_y(sc.shape, sc.n, sc.level, sc.params)
            n = y.size
            x = make_x(sc.x_kind, n, sc.dt, sc.seed)
            rng = np.random.default_rng(sc.seed + 17 * k)
            in_order = sc.x_kind not in ("unsorted", "step_reset")
            src = {"memory.used": "nvidia-smi.csv", "process.used": "compute-apps.csv",
                   "host.rss": "host.log"}.get(name, "train.log")
            d = {"seq": np.arange(n, dtype=np.int64), "source": [src] * n,
                 "line": np.arange(n, dtype=np.int64) + 2, "gpu": [gpu] * n, "pid": [pid] * n,
                 "series": [name] * n, "bytes": y.astype(np.int64)}
            if self.timed:
                us = (np.clip(x, -1e9, 1e10) * 1e6).astype(np.int64) + int(T0.timestamp() * 1e6)
                t = pl.Series("time", us).cast(pl.Datetime("us", "UTC"))
                if self.null_time_share and n:
                    drop = rng.uniform(size=n) < self.null_time_share
                    t = pl.select(pl.when(pl.Series(drop)).then(None).otherwise(t)).to_series().alias("time")
                d["time"] = t
            if self.steps == "increasing":
                d["step"] = np.arange(n, dtype=np.int64) * 3
            elif self.steps == "reset":
                d["step"] = np.arange(n, dtype=np.int64) % max(1, n // 3)
                in_order = False
            if self.total_small:
                d["total_bytes"] = np.full(n, max(int(np.nanmax(y)) // 2, 1) if n else 1, dtype=np.int64)
            else:
                d["total_bytes"] = np.full(n, 141 * GiB, dtype=np.int64)
            frames.append(samples_frame(pl.DataFrame(d)))
            # two specs with one key are one series to the detector: monotone only if each is alone
            key = (src, gpu, pid, name)
            monotone = monotone and in_order and never_up(y) and key not in keys
            keys.add(key)
        samples = pl.concat(frames) if frames else samples_frame([])
        events = []
        t_end = T0 + timedelta(seconds=600)
        for j, kind in enumerate(self.events):
            ev = {"time": t_end if self.timed else None, "source": "stderr.log", "line": 100 + j, "kind": kind,
                  "gpu": self.gpus[0] if self.gpus else "0", "pid": next((p for p in self.pids if p), 4242),
                  "text": f"{kind} line"}
            if kind == "gpu_oom":
                ev["bytes"] = 2 * GiB
                ev["text"] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
            elif kind == "xid":
                ev["detail"] = json.dumps({"code": 79})
            elif kind == "oom_kill":
                ev["process"] = "python"
            events.append(ev)
        inputs = [InputInfo(path=s, format="synthetic", lines=samples.filter(pl.col("source") == s).height + 1,
                            records=samples.filter(pl.col("source") == s).height, clock="wall" if self.timed else "none")
                  for s in sorted(set(samples["source"].to_list()))]
        if events:
            inputs.append(InputInfo(path="stderr.log", format="synthetic", lines=len(events), records=len(events)))
        return Bundle(inputs=inputs, samples=samples, events=events_frame(events)), monotone


@st.composite
def bundle_cases(draw, max_series: int = 6) -> BundleCase:
    k = draw(st.integers(0, max_series))
    series = [draw(series_cases()) for _ in range(k)]
    names = [draw(st.sampled_from(["memory.used", "memory.used", "process.used", "allocated", "reserved", "host.rss"]))
             for _ in range(k)]
    gpus = [draw(st.sampled_from(["0", "1", "7", None, "GPU-abc"])) for _ in range(k)]
    pids = [draw(st.sampled_from([None, 100, 101, 4242])) if nm == "process.used" else None for nm in names]
    return BundleCase(series, names, gpus, pids, timed=draw(st.booleans()),
                      null_time_share=draw(st.sampled_from([0.0, 0.0, 0.05, 0.5, 1.0])),
                      steps=draw(st.sampled_from(["none", "increasing", "reset"])),
                      total_small=draw(st.booleans()),
                      events=draw(st.lists(st.sampled_from(["gpu_oom", "oom_kill", "process_gone", "xid"]), max_size=3)))


def many_gpus_case(gpus: int = 8, pids: int = 12, n: int = 60) -> BundleCase:
    """Many GPUs and processes in one bundle: leaks, sawtooths and flats side by side."""
    series, names, g, p = [], [], [], []
    shapes = ["huge_ramp", "sawtooth", "constant", "ramp_drop", "jobs", "step"]
    for i in range(gpus):
        series.append(SeriesCase(shapes[i % len(shapes)], n, 8 * GiB, {"k": 8, "period": 12, "rise": 2}, "jitter", 1.0, i))
        names.append("memory.used"); g.append(str(i)); p.append(None)
    for j in range(pids):
        series.append(SeriesCase(shapes[j % len(shapes)], n, GiB, {"k": 4}, "regular", 1.0, j))
        names.append("process.used"); g.append(str(j % gpus)); p.append(1000 + j)
    return BundleCase(series, names, g, p, timed=True, events=["gpu_oom"])


# ----------------------------------------------------------------------------------------------
# the checks

def _finite(v) -> bool:
    return v is None or (isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)))


def check_fit(fit, x: np.ndarray, y: np.ndarray) -> None:
    assert isinstance(fit.classification, str) and fit.classification, f"classification {fit.classification!r}"
    lk = fit.leak
    if lk is not None:
        assert lk.pattern in ("linear", "step"), f"leak pattern {lk.pattern!r}"
        assert math.isfinite(lk.growth) and lk.growth >= 0, f"leak growth {lk.growth}"
        assert math.isfinite(lk.rate), f"leak rate {lk.rate}"
        assert math.isfinite(lk.onset), f"leak onset {lk.onset}"
        assert 0.0 <= lk.confidence <= 1.0, f"confidence {lk.confidence}"
        assert not never_up(y), f"a series that never goes up is a leak ({fit.classification}, growth {lk.growth})"


def check_series(case: SeriesCase) -> bool:
    """analyze_xy on one series; True when it found a leak."""
    from forensics.detect.series import analyze_xy
    x, y = case.arrays()
    fit = analyze_xy(x, y)
    check_fit(fit, x, y)
    return fit.leak is not None


def check_analysis(bundle, an, monotone: bool) -> None:
    from forensics.detect.findings import SEVERITY_RANK, VERDICTS
    assert an.verdict in VERDICTS, f"verdict {an.verdict!r}"
    assert isinstance(an.verdict_reason, str) and an.verdict_reason, "empty verdict reason"
    for f in an.findings:
        assert f.severity in SEVERITY_RANK, f"{f.kind} severity {f.severity!r}"
        if f.kind in ("leak", "cache_growth"):
            assert f.growth_bytes is None or f.growth_bytes >= 0, f"{f.kind} growth_bytes {f.growth_bytes}"
            rates = [f.rate_bytes_per_hour, f.rate_bytes_per_step, f.exhaust_in_hours, f.confidence,
                     f.detail.get("rate_bytes_per_sample")]
            assert all(_finite(r) for r in rates), f"{f.kind} non-finite rate among {rates}"
    if monotone:
        leaks = [f for f in an.findings if f.kind == "leak" and f.series != "host.rss"]
        assert not leaks, f"no series goes up, yet a leak: {leaks[0].summary}"
        assert an.verdict != "leak" or any(f.kind in ("residual_process", "sanitizer_leak") for f in an.findings), \
            f"no series goes up, yet verdict leak: {an.verdict_reason}"


def check_report(bundle, an) -> None:
    from forensics import report
    from forensics.options import Options
    ctx = report.build_context(bundle, an, Options(tz="UTC", tz_from_user=True))
    html = report.render_html(ctx)
    assert "<html" in html.lower(), "no HTML"
    md = report.render_markdown(ctx)
    assert isinstance(md, str) and md, "no Markdown"
    s = report.summary(bundle, an)
    text = json.dumps(s, allow_nan=False)
    assert json.loads(text)["verdict"] == an.verdict, "summary verdict differs"
    json.dumps(ctx.get("summary"), allow_nan=False)


def check_bundle(case: BundleCase, render: bool = True) -> bool:
    """analyze() on a bundle, then the report; True when the verdict is leak."""
    from forensics.detect import analyze
    bundle, monotone = case.build()
    an = analyze(bundle, None)
    check_analysis(bundle, an, monotone)
    if render:
        check_report(bundle, an)
    return an.verdict == "leak"


def bundle_of(case: SeriesCase, name: str = "memory.used", timed: bool = True, steps: str = "none") -> BundleCase:
    """One series as a bundle (nvidia-smi memory.used of GPU 0 by default)."""
    return BundleCase([case], [name], ["0"], [None], timed=timed, steps=steps)


def check_one(case: SeriesCase) -> bool:
    """A series through analyze_xy, then as a timed nvidia-smi bundle and an untimed step log, with
    the report each time."""
    hit = check_series(case)
    check_bundle(bundle_of(case))
    check_bundle(bundle_of(case, "allocated", timed=False, steps="increasing"), render=False)
    return hit
