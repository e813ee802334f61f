"""Detection accuracy, measured: a seeded, labeled synthetic suite plus the recorded incidents.

    python bench/accuracy.py [--seed N] [--cases N] [--quick]

The synthetic suite has hundreds of memory series: sampling every 0.25 s to 60 s, minutes to weeks,
1 to 8 GPUs, noise and sawtooth of several amplitudes, leaks from steep to below the per-sample noise,
staircases of several periods, warm-ups, plateaus near capacity, OOM crashes that drop to zero,
caching-allocator growth and logs without a clock. Every real incident under sample_logs/ whose
README.md states the expected verdict is run through forensics.pipeline.run as well.

It prints one table: precision, recall and F1 of leak findings per GPU, pattern accuracy, onset
error (share of the series' duration), rate error, false alarms on healthy series, verdict accuracy,
and the time taken. Targets are those of docs/detection.md.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.detect import analyze  # noqa: E402
from forensics.ingest import Bundle  # noqa: E402
from forensics.schema import events_frame, samples_frame  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20
MAX_POINTS = 150_000          # per series; longer logs are sampled more coarsely
T0 = datetime(2024, 3, 1, 8, 0, tzinfo=timezone.utc)


@dataclass
class GpuTruth:
    leak: bool
    pattern: str | None = None
    onset: float | None = None      # seconds (or index when untimed)
    rate: float | None = None       # bytes per second (or per sample / step)


@dataclass
class Case:
    name: str
    family: str
    verdict: str
    gpus: dict[str | None, GpuTruth]
    timed: bool
    duration: float                 # seconds, or samples/steps when untimed
    samples: pl.DataFrame
    events: pl.DataFrame = field(default_factory=lambda: events_frame([]))


# ----------------------------------------------------------------------------------------------
# signal shapes (x in seconds or index; all return bytes as float)

def _grid(rng, timed=True, min_points=80):
    """(x, interval, duration) with 0.25 s..60 s sampling and minutes..weeks of duration."""
    interval = float(np.exp(rng.uniform(np.log(0.25), np.log(60))))
    duration = float(np.exp(rng.uniform(np.log(600), np.log(14 * 86400))))
    n = duration / interval
    if n > MAX_POINTS:
        interval = duration / MAX_POINTS
    if n < min_points:
        interval = max(0.25, duration / min_points)
        duration = max(duration, min_points * interval)
    n = int(duration / interval)
    x = np.arange(n) * interval
    # real loggers jitter a little
    x = x + rng.uniform(0, 0.1 * interval, n)
    x.sort()
    if not timed:
        x = np.arange(n, dtype=float)
        interval, duration = 1.0, float(n - 1)
    return x, interval, float(x[-1] - x[0])


def _noise(rng, n, level, frac):
    y = rng.normal(0, frac * level, n)
    # rare spikes: another process touching the GPU for one sample
    k = rng.binomial(n, 0.001)
    if k:
        y[rng.integers(0, n, k)] += rng.choice([-1, 1], k) * level * rng.uniform(0.02, 0.08, k)
    return y


def _sawtooth(x, period, amp, phase):
    # a tooth spans at least 12 samples: a faster one aliases into a slow wave that no reader of the
    # log could tell from growth, so it would not be a fair label
    period = max(period, 12 * float(np.median(np.diff(x))))
    return amp * (((x / period) + phase) % 1.0)


def _warmup(x, tau, amp):
    return amp * (1 - np.exp(-x / tau))


def _quantize(y):
    return np.round(np.maximum(y, 0) / MiB) * MiB


# ----------------------------------------------------------------------------------------------
# one GPU's series by family

def _healthy(rng, x, dur, base, cap, noise):
    """A healthy shape: flat, sawtooth, warm-up then plateau, near capacity, one-off allocation."""
    kind = rng.choice(["flat", "sawtooth", "warmup", "near_capacity", "oneoff"])
    n = x.size
    if kind == "near_capacity":
        base = cap * rng.uniform(0.9, 0.97)
        noise = min(noise, 0.003)
    y = np.full(n, base) + _noise(rng, n, base, noise)
    if kind == "sawtooth":
        amp = base * rng.choice([0.05, 0.15, 0.4])
        period = dur / rng.uniform(8, 400)
        y += _sawtooth(x, period, amp, rng.uniform())
    elif kind == "warmup":
        y += _warmup(x - x[0], dur * rng.uniform(1 / 300, 1 / 15), base * rng.uniform(0.1, 0.8))
    elif kind == "oneoff":
        at = x[0] + dur * rng.uniform(0.05, 0.4)
        y += np.where(x >= at, base * rng.uniform(0.05, 0.3), 0.0)
    return y, "healthy_" + kind


def _leak_linear(rng, x, dur, base, cap, noise, below_noise=False):
    n = x.size
    t0 = x[0] + dur * (rng.uniform(0, 0.6) if rng.uniform() < 0.8 else 0.0)
    headroom = cap - base
    if below_noise:
        # below the per-sample noise, yet long enough for the slope to stand out (>= 20 standard errors)
        # and above the documented floor of 1% of the level
        grow = base * max(noise * rng.uniform(0.8, 2.0), 0.015)
    else:
        grow = min(headroom * 0.9, base * float(np.exp(rng.uniform(np.log(0.04), np.log(1.5)))))
    grow = _detectable(grow, noise * base, int((x >= t0).sum()), headroom)
    rate = grow / (x[-1] - t0)
    y = base + np.maximum(0, x - t0) * rate + _noise(rng, n, base, noise)
    return y, GpuTruth(True, "linear", t0 - x[0], rate)


def _detectable(grow, sigma, n_ramp, headroom):
    """Every labeled leak is detectable in principle: its slope stands at least 12 standard errors
    above zero (otherwise no method could tell it from noise, and the label would be unfair)."""
    return min(max(grow, 12 * sigma * math.sqrt(12.0 / max(n_ramp, 3))), 0.95 * headroom)


def _leak_warmup_linear(rng, x, dur, base, cap, noise):
    n = x.size
    tau = dur * rng.uniform(1 / 300, 1 / 40)
    amp = base * rng.uniform(0.1, 0.5)
    t0 = x[0] + dur * rng.uniform(0.25, 0.6)
    grow = min((cap - base - amp) * 0.9, base * float(np.exp(rng.uniform(np.log(0.05), np.log(1.0)))))
    grow = _detectable(grow, noise * base, int((x >= t0).sum()), cap - base - amp)
    rate = grow / (x[-1] - t0)
    y = base + _warmup(x - x[0], tau, amp) + np.maximum(0, x - t0) * rate + _noise(rng, n, base, noise)
    return y, GpuTruth(True, "linear", t0 - x[0], rate)


def _leak_stairs(rng, x, dur, base, cap, noise):
    n = x.size
    k = int(rng.integers(3, 13))
    t0 = x[0] + dur * rng.uniform(0.02, 0.5)
    period = (x[-1] - t0) / (k - 1 + rng.uniform(0.2, 0.9))
    grow = min((cap - base) * 0.9, base * float(np.exp(rng.uniform(np.log(0.1), np.log(1.0)))))
    h = grow / k
    h = max(h, 5 * noise * base)
    steps = np.floor(np.maximum(0, x - t0) / period) + (x >= t0)
    y = base + steps * h + _noise(rng, n, base, noise)
    return y, GpuTruth(True, "step", t0 - x[0], h / period)


def _leak_sawtooth(rng, x, dur, base, cap, noise):
    n = x.size
    amp = base * rng.choice([0.05, 0.15, 0.3])
    period = dur / rng.uniform(15, 120)
    t0 = x[0] + dur * (rng.uniform(0, 0.5) if rng.uniform() < 0.7 else 0.0)
    grow = min((cap - base - amp) * 0.9, base * float(np.exp(rng.uniform(np.log(0.15), np.log(1.0)))))
    # the floor is seen once per tooth: the slope must stand out over the teeth, not the samples
    teeth = max(3, int((x[-1] - t0) / period))
    grow = _detectable(grow, max(noise * base, 0.02 * amp), teeth, cap - base - amp)
    rate = grow / (x[-1] - t0)
    y = base + _sawtooth(x, period, amp, rng.uniform()) + np.maximum(0, x - t0) * rate + _noise(rng, n, base, noise)
    return y, GpuTruth(True, "linear", t0 - x[0], rate)


def _leak_oom(rng, x, dur, base, cap, noise):
    """Linear leak that reaches capacity, the process dies and the GPU drops to (almost) zero."""
    n = x.size
    t0 = x[0] + dur * rng.uniform(0, 0.4)
    t_oom = x[0] + dur * rng.uniform(max(0.5, (t0 - x[0]) / dur + 0.2), 0.97)
    rate = (cap * 0.99 - base) / (t_oom - t0)
    y = base + np.maximum(0, x - t0) * rate + _noise(rng, n, base, noise)
    y = np.minimum(y, cap)
    dead = x >= t_oom
    y[dead] = rng.uniform(0, 5) * MiB
    return y, GpuTruth(True, "linear", t0 - x[0], rate), t_oom


# ----------------------------------------------------------------------------------------------
# cases

def _frame(x, ys: dict, timed: bool, series="memory.used", source="nvsmi.csv", cap=None, steps=None, pid=None):
    parts = []
    for gpu, y in ys.items():
        n = x.size
        d = {
            "time": [T0 + timedelta(seconds=float(v)) for v in x] if timed and n < 20000 else None,
            "seq": np.arange(n), "source": [source] * n, "line": np.arange(n) + 2,
            "gpu": [gpu] * n, "series": [series] * n, "bytes": _quantize(y).astype(np.int64),
            "total_bytes": [cap] * n if cap else None, "pid": [pid] * n,
            "step": steps if steps is not None else None,
        }
        df = pl.DataFrame({k: v for k, v in d.items() if v is not None})
        if timed and n >= 20000:   # fast path: build the datetime column vectorized
            us = (np.asarray(x) * 1e6).astype(np.int64) + int(T0.timestamp() * 1e6)
            df = df.with_columns(pl.Series("time", us).cast(pl.Datetime("us", "UTC")))
        parts.append(samples_frame(df))
    return pl.concat(parts)


def make_case(rng, idx: int, family: str) -> Case:
    timed = family not in ("untimed_leak", "untimed_healthy")
    # a leak below the per-sample noise needs many samples for its slope to stand out
    x, interval, dur = _grid(rng, timed, 20_000 if family == "leak_below_noise" else 80)
    cap = int(rng.choice([16, 24, 40, 80, 141])) * GiB
    n_gpu = int(rng.choice([1, 1, 2, 4, 8]))
    noise = float(rng.choice([0.0, 0.001, 0.005, 0.02]))
    gpus = [str(i) for i in range(n_gpu)]
    ys, truth = {}, {}
    events = []
    leaking = set()
    if family not in ("healthy", "untimed_healthy", "cache_growth"):
        leaking = set(rng.choice(gpus, size=int(rng.integers(1, n_gpu + 1)), replace=False).tolist())
    name = family
    for g in gpus:
        base = cap * rng.uniform(0.08, 0.6)
        if g not in leaking:
            y, name_h = _healthy(rng, x, dur, base, cap, noise)
            ys[g], truth[g] = y, GpuTruth(False)
            if family in ("healthy", "untimed_healthy"):
                name = name_h
            continue
        if family in ("leak_linear", "untimed_leak"):
            y, t = _leak_linear(rng, x, dur, base, cap, noise)
        elif family == "leak_below_noise":
            y, t = _leak_linear(rng, x, dur, base, cap, max(noise, 0.01), below_noise=True)
        elif family == "leak_warmup":
            y, t = _leak_warmup_linear(rng, x, dur, base, cap, noise)
        elif family == "leak_stairs":
            y, t = _leak_stairs(rng, x, dur, base, cap, noise)
        elif family == "leak_sawtooth":
            y, t = _leak_sawtooth(rng, x, dur, base, cap, noise)
        elif family == "leak_oom":
            y, t, t_oom = _leak_oom(rng, x, dur, base, cap, noise)
            i = int(np.searchsorted(x, t_oom))
            events.append({"time": T0 + timedelta(seconds=float(x[min(i, x.size - 1)])) if timed else None,
                           "source": "train.log", "line": 1000 + len(events), "kind": "gpu_oom", "gpu": g,
                           "bytes": 2 * GiB, "text": f"torch.OutOfMemoryError: CUDA out of memory. GPU {g} ..."})
        else:
            raise ValueError(family)
        ys[g], truth[g] = y, t
    samples = _frame(x, ys, timed, cap=cap)
    verdict = "leak" if leaking else "no_leak"
    if family == "cache_growth":
        # the framework log: allocated flat (with per-step wiggle), reserved grows; nvidia-smi follows reserved
        g = gpus[0]
        base = cap * rng.uniform(0.1, 0.4)
        steps = np.arange(x.size) * int(rng.integers(1, 20))
        alloc = base + _noise(rng, x.size, base, max(noise, 0.002)) + _sawtooth(x, dur / rng.uniform(50, 300), base * 0.05, 0)
        lin, t = _leak_linear(rng, x, dur, base * 1.2, cap, noise)
        if rng.uniform() < 0.5:
            lin, t = _leak_stairs(rng, x, dur, base * 1.2, cap, noise)
        fw = pl.concat([_frame(x, {None: alloc}, timed, series="allocated", source="train.log", steps=steps),
                        _frame(x, {None: lin}, timed, series="reserved", source="train.log", steps=steps)])
        dev = _frame(x, {g: lin + 0.5 * GiB}, timed, cap=cap)
        samples = pl.concat([samples.filter(pl.col("gpu") != g), dev, fw])
        truth[g] = GpuTruth(False)
        verdict = "cache_growth"
    return Case(f"{idx:03d}-{name}", family, verdict, truth, timed, dur if timed else float(x.size - 1),
                samples, events_frame(events))


FAMILIES = [("healthy", 70), ("leak_linear", 45), ("leak_below_noise", 20), ("leak_warmup", 20),
            ("leak_stairs", 35), ("leak_sawtooth", 20), ("leak_oom", 25), ("cache_growth", 15),
            ("untimed_leak", 15), ("untimed_healthy", 15)]


def suite(seed: int, scale: float = 1.0, only: str | None = None):
    rng = np.random.default_rng(seed)
    idx = 0
    for family, count in FAMILIES:
        for _ in range(max(1, int(round(count * scale)))):
            case = make_case(rng, idx, family)   # always generated: the seed sequence stays the same
            if only is None or family == only:
                yield case
            idx += 1


# ----------------------------------------------------------------------------------------------
# scoring

@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    healthy_false: int = 0
    healthy_total: int = 0
    pattern_ok: int = 0
    pattern_n: int = 0
    onset_err: list = field(default_factory=list)
    rate_err: list = field(default_factory=list)
    verdict_ok: int = 0
    verdict_n: int = 0
    false_leak_verdicts: int = 0
    healthy_cases: int = 0
    times: list = field(default_factory=list)
    misses: list = field(default_factory=list)


def _finding_x(f, case: Case) -> float | None:
    if case.timed:
        return (f.start - T0).total_seconds() if f.start is not None else None
    return float(f.start_index) if f.start_index is not None else None


def _finding_rate(f, case: Case) -> float | None:
    if case.timed:
        return f.rate_bytes_per_hour / 3600.0 if f.rate_bytes_per_hour is not None else None
    return f.detail.get("rate_bytes_per_sample") or f.rate_bytes_per_step


def score_case(case: Case, sc: Score) -> None:
    t = time.perf_counter()
    an = analyze(Bundle(samples=case.samples, events=case.events), None)
    sc.times.append(time.perf_counter() - t)
    leaks = {f.gpu: f for f in an.findings if f.kind == "leak"}
    for gpu, truth in case.gpus.items():
        f = leaks.pop(gpu, None)
        if truth.leak:
            if f is None:
                sc.fn += 1
                sc.misses.append(f"{case.name} GPU {gpu}: missed")
                continue
            sc.tp += 1
            sc.pattern_n += 1
            sc.pattern_ok += f.pattern == truth.pattern
            if f.pattern != truth.pattern:
                sc.misses.append(f"{case.name} GPU {gpu}: pattern {f.pattern} (truth {truth.pattern})")
            ox, rate = _finding_x(f, case), _finding_rate(f, case)
            if ox is not None:
                err = abs(ox - truth.onset) / case.duration
                sc.onset_err.append(err)
                if err > 0.05:
                    sc.misses.append(f"{case.name} GPU {gpu}: onset error {err:.1%}")
            if rate:
                err = abs(rate - truth.rate) / truth.rate
                sc.rate_err.append(err)
                if err > 0.1:
                    sc.misses.append(f"{case.name} GPU {gpu}: rate error {err:.1%}")
        else:
            sc.healthy_total += 1
            if f is not None:
                sc.fp += 1
                sc.healthy_false += 1
                sc.misses.append(f"{case.name} GPU {gpu}: false leak ({f.summary})")
            else:
                sc.tn += 1
    for gpu, f in leaks.items():   # findings on something that has no truth entry
        sc.fp += 1
        sc.misses.append(f"{case.name}: unexpected leak on {gpu}")
    sc.verdict_n += 1
    sc.verdict_ok += an.verdict == case.verdict
    if an.verdict != case.verdict:
        sc.misses.append(f"{case.name}: verdict {an.verdict} (truth {case.verdict}): {an.verdict_reason}")
    if case.verdict != "leak":
        sc.healthy_cases += 1
        sc.false_leak_verdicts += an.verdict == "leak"


def real_incidents() -> tuple[list[tuple[str, str, str]], str | None]:
    """(folder, expected, got) for each recorded incident; a note when they cannot be run."""
    base = ROOT / "sample_logs"
    readmes = sorted(base.glob("*/README.md")) if base.exists() else []
    if not readmes:
        return [], "no recorded incidents under sample_logs/ yet"
    try:
        from forensics import pipeline
        from forensics.options import Options
    except Exception as e:  # another stage not written yet
        return [], f"pipeline not importable ({type(e).__name__}: {e})"
    out = []
    pat = re.compile(r"verdict\W{0,6}(?:is\W{0,3}|should be\W{0,3}|:\W{0,3})?\W{0,3}(leak|no_leak|cache_growth|inconclusive)\b", re.I)
    for rd in readmes:
        m = pat.search(rd.read_text(errors="replace"))
        if not m:
            continue
        expected = m.group(1).lower()
        try:
            _, an = pipeline.run([str(rd.parent)], Options(tz="UTC"))
            got = an.verdict
        except Exception as e:
            got = f"error: {type(e).__name__}: {e}"
        out.append((rd.parent.name, expected, got))
    return out, None


def _pct(v, q):
    return float(np.percentile(v, q)) if len(v) else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20240301)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of cases")
    ap.add_argument("--verbose", action="store_true", help="list every miss")
    ap.add_argument("--family", help="run one family of cases only (e.g. leak_sawtooth)")
    args = ap.parse_args()
    sc = Score()
    t0 = time.perf_counter()
    n_series = 0
    for case in suite(args.seed, args.scale, args.family):
        n_series += len(case.gpus)
        score_case(case, sc)
    real, note = real_incidents() if args.family is None else ([], "skipped (--family)")
    wall = time.perf_counter() - t0
    prec = sc.tp / (sc.tp + sc.fp) if sc.tp + sc.fp else 1.0
    rec = sc.tp / (sc.tp + sc.fn) if sc.tp + sc.fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    rows = [
        ("cases / GPU series", f"{sc.verdict_n} / {n_series}", "hundreds", True),
        ("leak precision", f"{prec:.3f}", "", True),
        ("leak recall", f"{rec:.3f}", "", True),
        ("leak F1", f"{f1:.3f}", ">= 0.97", f1 >= 0.97),
        ("pattern accuracy", f"{sc.pattern_ok / max(sc.pattern_n, 1):.3f}", "", True),
        ("onset error, median", f"{_pct(sc.onset_err, 50):.2%}", "<= 2%", _pct(sc.onset_err, 50) <= 0.02),
        ("onset error, p90", f"{_pct(sc.onset_err, 90):.2%}", "<= 5%", _pct(sc.onset_err, 90) <= 0.05),
        ("rate error, median", f"{_pct(sc.rate_err, 50):.2%}", "<= 5%", _pct(sc.rate_err, 50) <= 0.05),
        ("rate error, p90", f"{_pct(sc.rate_err, 90):.2%}", "", True),
        ("false leaks on healthy series", f"{sc.healthy_false} / {sc.healthy_total}", "0", sc.healthy_false == 0),
        ("false leak verdicts (no-leak cases)", f"{sc.false_leak_verdicts} / {sc.healthy_cases}", "0",
         sc.false_leak_verdicts == 0),
        ("verdict accuracy", f"{sc.verdict_ok / max(sc.verdict_n, 1):.3f}", "", True),
        ("analyze() time per case, median / max", f"{_pct(sc.times, 50):.3f} s / {max(sc.times):.2f} s", "", True),
    ]
    if real:
        ok = sum(e == g for _, e, g in real)
        rows.append(("recorded incidents, verdict right", f"{ok} / {len(real)}", "all", ok == len(real)))
    else:
        rows.append(("recorded incidents", note or "none", "", True))
    rows.append(("total wall time", f"{wall:.0f} s", "a few minutes", True))
    w = max(len(r[0]) for r in rows)
    print(f"{'metric':<{w}}  {'value':>22}  {'target':>13}  ok")
    print("-" * (w + 44))
    for name, val, target, ok in rows:
        print(f"{name:<{w}}  {val:>22}  {target:>13}  {'yes' if ok else 'NO'}")
    for folder, e, g in real:
        if e != g:
            print(f"  incident {folder}: expected {e}, got {g}")
    if args.verbose:
        for m in sc.misses:
            print("  " + m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
