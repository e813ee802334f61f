"""Seeded synthetic memory series with known truth: every leak's onset, rate and pattern, every job's lifetime.

`suite(seed, scale, family)` yields the cases bench/accuracy.py scores (the tune share from the fixed seed,
the held-out share from a fresh one): sampling every 0.25 s to 60 s, minutes to weeks, 1 to 8 GPUs, noise
and sawtooth of several amplitudes, leaks from steep to below the per-sample noise, staircases, warm-ups,
plateaus near capacity, OOM crashes that drop to zero, caching-allocator growth and logs without a clock.
The `life_*` families are what real nvidia-smi logs look like: job lifetimes (memory rises off the idle
baseline and returns to it when the job exits, is SIGKILLed or dies of a CUDA OOM), several jobs per log,
crash loops, start-up ramps (the truth onset is the leak's beginning, not the job's), coarse sampling,
logger gaps, a log that stops while the job runs; and their healthy look-alikes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from forensics.model import events_frame, samples_frame

GiB = 1 << 30
MiB = 1 << 20
MAX_POINTS = 150_000          # per series; longer logs are sampled more coarsely
T0 = datetime(2024, 3, 1, 8, 0, tzinfo=timezone.utc)


@dataclass
class Lifetime:
    """One job on one GPU: memory rises off the idle baseline at `start` and returns to it at `end`
    (or the log stops first: ending `running`). Seconds since T0 (index when untimed)."""
    start: float
    end: float
    leak: bool
    kind: str                       # linear | step | flat | warmup | bounded_cache | eval_spikes | grad_accum | stable
    ending: str                     # exit | sigkill | oom | running
    onset: float | None = None      # where the leak begins (not where the job starts)
    rate: float | None = None       # bytes per second
    onset_spread: float = 0.0       # how far off the samples themselves leave the onset (onset_spread())


@dataclass
class GpuTruth:
    leak: bool
    pattern: str | None = None
    onset: float | None = None      # seconds (or index when untimed)
    rate: float | None = None       # bytes per second (or per sample / step)
    lifetimes: list[Lifetime] = field(default_factory=list)   # empty: the whole log is one lifetime
    onset_spread: float = 0.0       # how far off the samples themselves leave the onset (onset_spread())


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
    return y, GpuTruth(True, "linear", t0 - x[0], rate, onset_spread=onset_spread(x, t0, rate, noise * base))


def _detectable(grow, sigma, n_ramp, headroom):
    """Every labeled leak is detectable in principle: its slope stands at least 12 standard errors
    above zero (otherwise no method could tell it from noise, and the label would be unfair)."""
    return min(max(grow, 12 * sigma * math.sqrt(12.0 / max(n_ramp, 3))), 0.95 * headroom)


def onset_spread(x: np.ndarray, onset: float, rate: float, sigma: float) -> float:
    """How far from the truth the samples themselves leave a ramp's onset: 3 standard errors (3-sigma:
    what noise rarely exceeds) of the onset of a level-then-ramp hinge, at its least (the Cramér-Rao
    bound: Gaussian noise of `sigma` plus the 1-MiB rounding, the true rate, the sample times `x`). A slow
    ramp under noise bends away from its level so gently that no method places its start closer; a
    steep or quiet one gives ~0 (the 5 s / 2 % target holds)."""
    x = np.asarray(x, dtype=float)
    after = x > onset
    if rate <= 0 or after.sum() < 2 or after.all():
        return 0.0
    var = sigma * sigma + MiB * MiB / 12.0
    J = np.column_stack([np.ones_like(x), np.maximum(0.0, x - onset), -rate * after])
    try:
        cov = np.linalg.inv(J.T @ J / var)
    except np.linalg.LinAlgError:
        return 0.0
    return 3.0 * math.sqrt(max(float(cov[2, 2]), 0.0))


def _leak_warmup_linear(rng, x, dur, base, cap, noise):
    n = x.size
    tau = dur * rng.uniform(1 / 300, 1 / 40)
    amp = base * rng.uniform(0.1, 0.5)
    t0 = x[0] + dur * rng.uniform(0.25, 0.6)
    grow = min((cap - base - amp) * 0.9, base * float(np.exp(rng.uniform(np.log(0.05), np.log(1.0)))))
    grow = _detectable(grow, noise * base, int((x >= t0).sum()), cap - base - amp)
    rate = grow / (x[-1] - t0)
    y = base + _warmup(x - x[0], tau, amp) + np.maximum(0, x - t0) * rate + _noise(rng, n, base, noise)
    return y, GpuTruth(True, "linear", t0 - x[0], rate, onset_spread=onset_spread(x, t0, rate, noise * base))


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
    # the floor is seen once per tooth: its onset is known to a tooth (the period _sawtooth uses)
    tooth = max(period, 12 * float(np.median(np.diff(x))))
    return y, GpuTruth(True, "linear", t0 - x[0], rate, onset_spread=tooth)


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
    spread = onset_spread(x[~dead], t0, rate, noise * base)
    return y, GpuTruth(True, "linear", t0 - x[0], rate, onset_spread=spread), t_oom


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


# ----------------------------------------------------------------------------------------------
# job lifetimes: what real nvidia-smi logs look like (memory rises off the idle baseline when a job
# starts and returns to it when the job ends: exit, SIGKILL, CUDA OOM), several jobs per log,
# crash loops, start-up ramps, coarse sampling, logger gaps, a log that stops while the job runs

LEAK_KINDS = ("linear", "step")
HEALTHY_KINDS = ("flat", "warmup", "bounded_cache", "eval_spikes", "grad_accum", "stable")


def _startup(rng, t, interval, level, ramp=(2, 6)):
    """0 -> CUDA context (~500 MiB) at the first sample -> the working set over 2-5 samples.
    Returns (y, seconds until the working set is reached)."""
    ctx = 500 * MiB * rng.uniform(0.8, 1.2)
    r1 = interval * 1.0
    r2 = r1 + interval * int(rng.integers(*ramp))
    y = np.where(t < r1, ctx, ctx + (level - ctx) * np.clip((t - r1) / (r2 - r1), 0, 1))
    return y, r2


def _job(rng, t, D, kind, ending, base, cap, noise, interval, onset_after=(0.02, 0.3), min_grow=0.0, ramp=(2, 6)):
    """One lifetime's memory (t: seconds since the job started, at its samples) and its truth
    (onset since the job start, rate in bytes per second, onset_spread)."""
    n = t.size
    if kind == "stable":
        base = cap * rng.uniform(0.85, 0.95)
        noise = min(noise, 0.002)
    y, t_ws = _startup(rng, t, interval, base, ramp)
    onset = rate = None
    body = t >= t_ws
    if kind == "linear":
        onset = t_ws + (D - t_ws) * rng.uniform(*onset_after)
        if ending == "oom":
            rate = (0.99 * cap - base) / max(D - onset, interval)
        else:
            grow = min(0.9 * (cap - base), base * float(np.exp(rng.uniform(np.log(0.1), np.log(1.0)))))
            grow = _detectable(max(grow, min_grow * base), noise * base, int((t >= onset).sum()), cap - base)
            rate = grow / max(D - onset, interval)
        y = y + np.maximum(0.0, t - onset) * rate
    elif kind == "step":
        onset = t_ws + (D - t_ws) * rng.uniform(*onset_after)
        k = int(rng.integers(3, 9))
        period = (D - onset) / (k - 1 + rng.uniform(0.3, 0.9))
        grow = min(0.9 * (cap - base), base * float(np.exp(rng.uniform(np.log(0.15), np.log(1.0)))))
        h = max(grow / k, 5 * noise * base, 16 * MiB)
        steps = np.floor(np.maximum(0, t - onset) / period) + (t >= onset)
        y = y + steps * h
        rate = h / period
    elif kind == "warmup":
        amp, tau = base * rng.uniform(0.1, 0.5), (D - t_ws) * rng.uniform(1 / 40, 1 / 10)
        y = y + np.where(body, amp * (1 - np.exp(-np.maximum(0, t - t_ws) / tau)), 0.0)
    elif kind == "bounded_cache":
        # grows to a cap over a tenth to a quarter of the job, then stays there (plateau >= 3x the growth)
        g = (D - t_ws) * rng.uniform(0.1, 0.25)
        amp = base * rng.uniform(0.1, 0.4)
        y = y + amp * np.clip((t - t_ws) / g, 0, 1)
    elif kind == "eval_spikes":
        period = (D - t_ws) / rng.uniform(4, 10)
        width = interval * int(rng.integers(3, 7))
        phase = (t - t_ws) % period
        y = y + np.where(body & (phase >= period - width), base * rng.uniform(0.1, 0.3), 0.0)
    elif kind == "grad_accum":
        period = max(12 * interval, (D - t_ws) / rng.uniform(8, 60))
        y = y + np.where(body, _sawtooth(t - t_ws, period, base * rng.uniform(0.05, 0.3), 0.0), 0.0)
    y = y + np.where(t >= interval, _noise(rng, n, base, noise), 0.0)
    if ending == "oom":
        y = np.minimum(y, cap * 0.995)
    spread = onset_spread(t[t >= t_ws], onset, rate, noise * base) if kind == "linear" else 0.0
    return y, onset, rate, spread


def _life_layout(rng, family):
    """(interval, [(start, duration)], total): the jobs of one log, with idle gaps between them."""
    interval = 5.0 if family == "life_coarse" else float(rng.choice([0.5, 1.0, 1.0, 2.0, 5.0]))
    n_jobs = {"life_multi_job": int(rng.integers(2, 4)), "life_crash_loop": int(rng.integers(3, 6)),
              "life_coarse": int(rng.integers(1, 4))}.get(family, int(rng.integers(1, 3)) if family in (
                  "life_gaps", "life_warmup_release", "life_bounded_cache", "life_eval_spikes", "life_grad_accum",
                  "life_stable_release") else 1)
    jobs, t = [], interval * int(rng.integers(2, 30))          # idle lead-in
    for j in range(n_jobs):
        if family == "life_coarse":
            samples = int(rng.integers(5, 11))
        elif family == "life_crash_loop":
            samples = int(rng.integers(40, 400))
        else:
            samples = int(np.exp(rng.uniform(np.log(80), np.log(3000))))
        D = samples * interval
        jobs.append((t, D))
        gap = int(rng.integers(2, 6)) if family == "life_crash_loop" else int(rng.integers(5, 120))
        t += D + gap * interval
    tail = 0.0 if family == "life_log_stops" else interval * int(rng.integers(3, 30))
    total = jobs[-1][0] + jobs[-1][1] + tail
    return interval, jobs, total


# the healthy lifetime families and the one kind of job each draws
HEALTHY_LIFE_KINDS = {"life_warmup_release": "warmup", "life_bounded_cache": "bounded_cache",
                      "life_eval_spikes": "eval_spikes", "life_grad_accum": "grad_accum",
                      "life_stable_release": "stable"}


def _leak_flags(rng, family: str, n_jobs: int) -> list[bool]:
    """Which jobs of a leaking GPU leak: some of several (at least one, not all), at least one of a coarse
    log's, else every one."""
    if family == "life_multi_job":
        flags = [bool(v) for v in rng.uniform(size=n_jobs) < 0.5]
        if not any(flags):
            flags[int(rng.integers(0, n_jobs))] = True
        if all(flags) and n_jobs > 1:
            flags[int(rng.integers(0, n_jobs))] = False
        return flags
    if family == "life_coarse":
        flags = [True] + [bool(v) for v in rng.uniform(size=n_jobs - 1) < 0.5]
        rng.shuffle(flags)
        return flags
    return [True] * n_jobs


def _kind_and_ending(rng, family: str, leaks: bool, last: bool) -> tuple[str, str]:
    """A job's kind (LEAK_KINDS or HEALTHY_KINDS) and how it ends (exit, sigkill, oom; running: the log
    stops first)."""
    if leaks:
        kind = "linear" if family in ("life_crash_loop", "life_coarse") or rng.uniform() < 0.7 else "step"
    elif family in HEALTHY_LIFE_KINDS:
        kind = HEALTHY_LIFE_KINDS[family]
    elif family == "life_coarse":
        kind = str(rng.choice(["flat", "stable"]))
    else:
        kind = str(rng.choice(HEALTHY_KINDS))
    if family == "life_log_stops" and last:
        return kind, "running"
    if family == "life_crash_loop" and leaks:
        return kind, "oom"
    if leaks:
        return kind, str(rng.choice(["exit", "sigkill", "oom"]))
    return kind, "oom" if kind == "stable" and rng.uniform() < 0.3 else str(rng.choice(["exit", "sigkill"]))


def _without_gaps(x: np.ndarray, gaps: list[tuple[float, float]], lives: list[Lifetime], interval: float) -> np.ndarray:
    """The readings a logger that stopped in `gaps` (start, seconds) kept; a gap near a leak's onset, or one
    that would hide most of a leak's growth (no evidence of it left: not a fair label), is not applied."""
    keep = np.ones(x.size, dtype=bool)
    for at, width in gaps:
        if any(lf.onset is not None and abs(lf.onset - at) < width + 10 * interval for lf in lives):
            continue
        gap = (x >= at) & (x < at + width)
        if any(lf.leak and lf.onset is not None
               and (keep & ~gap & (x >= lf.onset) & (x < lf.end)).sum() < 0.5 * ((x >= lf.onset) & (x < lf.end)).sum()
               for lf in lives):
            continue
        keep &= ~gap
    return keep


def make_life_case(rng, idx: int, family: str) -> Case:
    interval, jobs, total = _life_layout(rng, family)
    n = int(total / interval) + 1
    x = np.arange(n) * interval + rng.uniform(0, 0.05 * interval, n)
    x.sort()
    cap = int(rng.choice([24, 40, 80, 141])) * GiB
    n_gpu = int(rng.choice([1, 1, 2, 4]))
    noise = float(rng.choice([0.0, 0.0, 0.001, 0.005]))
    gpus = [str(i) for i in range(n_gpu)]
    leaking = set() if family in HEALTHY_LIFE_KINDS else set(
        rng.choice(gpus, size=int(rng.integers(1, n_gpu + 1)), replace=False).tolist())
    ys, truth, events, pids_rows = {}, {}, [], []
    gaps, all_lives = [], []
    with_pids = rng.uniform() < 0.35
    for g in gpus:
        base = cap * rng.uniform(0.1, 0.5)
        idle = float(rng.choice([0, 0, 2, 7])) * MiB
        y = np.full(n, idle)
        lives = []
        flags = _leak_flags(rng, family, len(jobs)) if g in leaking else [False] * len(jobs)
        for j, ((start, D), lk) in enumerate(zip(jobs, flags)):
            sel = (x >= start) & (x < start + D)
            t = x[sel] - start
            kind, ending = _kind_and_ending(rng, family, lk, last=j == len(jobs) - 1)
            onset_after = (0.2, 0.5) if family == "life_startup_ramp" else (0.02, 0.3)
            if family == "life_coarse":
                onset_after = (0.0, 0.0)
            # 5-10 samples (coarse): a start-up of 1-2 samples, and only a steep leak is a fair label
            # (+30 % of the working set or more)
            coarse = family == "life_coarse"
            yj, onset, rate, spread = _job(rng, t, D, kind, ending, base, cap, noise, interval, onset_after,
                                   min_grow=0.3 if coarse else 0.0, ramp=(1, 3) if coarse else (2, 6))
            y[sel] = yj
            lives.append(Lifetime(start, start + D, lk, kind, ending,
                                  start + onset if onset is not None else None, rate, spread))
            if ending in ("oom",) and (lk or kind == "stable"):
                i_end = min(int(np.searchsorted(x, start + D)), n - 1)
                events.append({"time": T0 + timedelta(seconds=float(x[i_end])), "source": "train.log",
                               "line": 1000 + len(events), "kind": "gpu_oom", "gpu": g, "bytes": 2 * GiB,
                               "text": f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {g} ..."})
            if with_pids:
                pids_rows.append((g, 2000 + 10 * int(g) + j, np.nonzero(sel)[0], yj))
        if family == "life_gaps":
            # the logger stopped for 1-10 minutes, away from any leak's onset (drawn here, applied once
            # every GPU's lifetimes are known: the gap is in the one log of all GPUs)
            for _ in range(int(rng.integers(1, 4))):
                gaps.append((float(rng.uniform(x[0], x[-1])), float(rng.uniform(60, 600))))
        all_lives.extend(lives)
        ys[g] = y
        first = next((lf for lf in lives if lf.leak), None)
        truth[g] = GpuTruth(bool(first), first.kind if first else None, first.onset if first else None,
                            first.rate if first else None, lives, first.onset_spread if first else 0.0)
    keep = _without_gaps(x, gaps, all_lives, interval)
    xk = x[keep]
    samples = _frame(xk, {g: y[keep] for g, y in ys.items()}, True, cap=cap)
    if with_pids:
        parts = [samples]
        for g, pid, idx_rows, yj in pids_rows:
            k = keep[idx_rows]
            if k.sum() == 0:
                continue
            parts.append(_frame(x[idx_rows][k], {g: yj[k]}, True, series="process.used",
                                source="compute-apps.csv", pid=pid))
        samples = pl.concat(parts)
    verdict = "leak" if leaking else "no_leak"
    return Case(f"{idx:03d}-{family}", family, verdict, truth, True, float(xk[-1] - xk[0]), samples,
                events_frame(events))


LIFE_FAMILIES = [("life_release", 30), ("life_multi_job", 30), ("life_crash_loop", 15),
                 ("life_startup_ramp", 20), ("life_coarse", 20), ("life_gaps", 15), ("life_log_stops", 15),
                 ("life_warmup_release", 12), ("life_bounded_cache", 12), ("life_eval_spikes", 12),
                 ("life_grad_accum", 12), ("life_stable_release", 12)]
FAMILIES = [("healthy", 70), ("leak_linear", 45), ("leak_below_noise", 20), ("leak_warmup", 20),
            ("leak_stairs", 35), ("leak_sawtooth", 20), ("leak_oom", 25), ("cache_growth", 15),
            ("untimed_leak", 15), ("untimed_healthy", 15)] + LIFE_FAMILIES
LIFE_NAMES = {f for f, _ in LIFE_FAMILIES}


def suite(seed: int, scale: float = 1.0, only: str | None = None):
    rng = np.random.default_rng(seed)
    idx = 0
    for family, count in FAMILIES:
        for _ in range(max(1, int(round(count * scale)))):
            # always generated: the seed sequence stays the same (new families come after the old)
            case = make_life_case(rng, idx, family) if family in LIFE_NAMES else make_case(rng, idx, family)
            if only is None or family == only:
                yield case
            idx += 1
