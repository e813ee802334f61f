"""Detection accuracy, measured: a seeded, labeled synthetic suite plus the recorded incidents.

    python bench/accuracy.py [--seed N] [--scale X | --quick] [--family NAME] [--verbose]
                             [--heldout-seed N] [--heldout-share X]
                             [--corpus tune|heldout|all|none] [--recordings DIR ...]

The synthetic suite has hundreds of memory series: sampling every 0.25 s to 60 s, minutes to weeks,
1 to 8 GPUs, noise and sawtooth of several amplitudes, leaks from steep to below the per-sample noise,
staircases of several periods, warm-ups, plateaus near capacity, OOM crashes that drop to zero,
caching-allocator growth and logs without a clock. The `life_*` families are what real nvidia-smi
logs look like: job lifetimes (memory rises off the idle baseline and returns to it when the job
exits, is SIGKILLed or dies of a CUDA OOM), several jobs per log with idle gaps (some leaking, some
not), crash loops (the same leaky job restarted, dying at the cap each time), start-up ramps (0 ->
CUDA context -> working set, flat, then the leak: the truth onset is the leak's beginning, not the
job's), coarse sampling (5 s, 5-10 samples a lifetime), logger gaps, a log that stops while the job
runs; and their healthy look-alikes (warm-up then plateau then release, a bounded cache, eval spikes,
a gradient-accumulation sawtooth, a large stable footprint then release).

Two synthetic shares: the tune share, drawn from the fixed --seed (the rules were fitted on it), and a
held-out share drawn from a fresh seed each run (printed; --heldout-seed reruns a draw), scored on its
own: its F1 and false leak verdicts are the figures no rule was tuned on. A leak finding counts for a
GPU's leak only when it lies in a leaking job: one in a healthy job of a multi-job log is a false alarm
there and leaves the leak missed.

Recordings: sample_logs/*/README.md front matter and tests/corpus/{tune,heldout}/*/truth.json, each
run in every view a user may have (all files; the timed nvidia-smi CSV; the untimed `-l 1` CSV; the
step log; dmon; compute-apps), told apart by sniffing each file's format (not its name).

It prints a table per family and one overall: precision, recall and F1 of leak findings per GPU,
pattern accuracy, onsets within target (5 s or 2 % of the lifetime, whichever is larger), rate error,
false alarms on healthy series, verdict accuracy, analyze() time per case; then recording x view.
Targets are those of docs/detection.md.
"""
from __future__ import annotations

import argparse
import math
import secrets
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
from forensics.detect.thresholds import F1_TARGET, IDLE_BAND, SHORT_MIN  # noqa: E402
from forensics.model import Bundle  # noqa: E402
from forensics.model import events_frame, samples_frame  # noqa: E402

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


@dataclass
class GpuTruth:
    leak: bool
    pattern: str | None = None
    onset: float | None = None      # seconds (or index when untimed)
    rate: float | None = None       # bytes per second (or per sample / step)
    lifetimes: list[Lifetime] = field(default_factory=list)   # empty: the whole log is one lifetime


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
    (onset since the job start, rate in bytes per second)."""
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
    return y, onset, rate


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


def make_life_case(rng, idx: int, family: str) -> Case:
    interval, jobs, total = _life_layout(rng, family)
    n = int(total / interval) + 1
    x = np.arange(n) * interval + rng.uniform(0, 0.05 * interval, n)
    x.sort()
    keep = np.ones(n, dtype=bool)
    cap = int(rng.choice([24, 40, 80, 141])) * GiB
    n_gpu = int(rng.choice([1, 1, 2, 4]))
    noise = float(rng.choice([0.0, 0.0, 0.001, 0.005]))
    gpus = [str(i) for i in range(n_gpu)]
    healthy_family = family in ("life_warmup_release", "life_bounded_cache", "life_eval_spikes",
                                "life_grad_accum", "life_stable_release")
    leaking = set() if healthy_family else set(
        rng.choice(gpus, size=int(rng.integers(1, n_gpu + 1)), replace=False).tolist())
    ys, truth, events, pids_rows = {}, {}, [], []
    gaps, all_lives = [], []
    with_pids = rng.uniform() < 0.35
    for g in gpus:
        base = cap * rng.uniform(0.1, 0.5)
        idle = float(rng.choice([0, 0, 2, 7])) * MiB
        y = np.full(n, idle)
        lives = []
        # which jobs of this GPU leak
        if g in leaking:
            if family == "life_multi_job":
                flags = [bool(v) for v in rng.uniform(size=len(jobs)) < 0.5]
                if not any(flags):
                    flags[int(rng.integers(0, len(jobs)))] = True
                if all(flags) and len(jobs) > 1:
                    flags[int(rng.integers(0, len(jobs)))] = False
            elif family == "life_coarse":
                flags = [True] + [bool(v) for v in rng.uniform(size=len(jobs) - 1) < 0.5]
                rng.shuffle(flags)
            else:
                flags = [True] * len(jobs)
        else:
            flags = [False] * len(jobs)
        for j, ((start, D), lk) in enumerate(zip(jobs, flags)):
            sel = (x >= start) & (x < start + D)
            t = x[sel] - start
            if lk:
                kind = "linear" if family in ("life_crash_loop", "life_coarse") or rng.uniform() < 0.7 else "step"
            elif healthy_family:
                kind = {"life_warmup_release": "warmup", "life_bounded_cache": "bounded_cache",
                        "life_eval_spikes": "eval_spikes", "life_grad_accum": "grad_accum",
                        "life_stable_release": "stable"}[family]
            elif family == "life_coarse":
                kind = str(rng.choice(["flat", "stable"]))
            else:
                kind = str(rng.choice(HEALTHY_KINDS))
            last = j == len(jobs) - 1
            if family == "life_log_stops" and last:
                ending = "running"
            elif family == "life_crash_loop" and lk:
                ending = "oom"
            elif lk:
                ending = str(rng.choice(["exit", "sigkill", "oom"]))
            else:
                ending = "oom" if kind == "stable" and rng.uniform() < 0.3 else str(rng.choice(["exit", "sigkill"]))
            onset_after = (0.2, 0.5) if family == "life_startup_ramp" else (0.02, 0.3)
            if family == "life_coarse":
                onset_after = (0.0, 0.0)
            # 5-10 samples (coarse): a start-up of 1-2 samples, and only a steep leak is a fair label
            # (+30 % of the working set or more)
            coarse = family == "life_coarse"
            yj, onset, rate = _job(rng, t, D, kind, ending, base, cap, noise, interval, onset_after,
                                   min_grow=0.3 if coarse else 0.0, ramp=(1, 3) if coarse else (2, 6))
            y[sel] = yj
            lives.append(Lifetime(start, start + D, lk, kind, ending,
                                  start + onset if onset is not None else None, rate))
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
                            first.rate if first else None, lives)
    for at, width in gaps:
        if any(lf.onset is not None and abs(lf.onset - at) < width + 10 * interval for lf in all_lives):
            continue
        gap = (x >= at) & (x < at + width)
        # a gap that hides most of a leak's growth leaves no evidence of it: not a fair label
        if any(lf.leak and lf.onset is not None
               and (keep & ~gap & (x >= lf.onset) & (x < lf.end)).sum() < 0.5 * ((x >= lf.onset) & (x < lf.end)).sum()
               for lf in all_lives):
            continue
        keep &= ~gap
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


# ----------------------------------------------------------------------------------------------
# scoring

# the fresh-seed share: cases no rule was tuned on, drawn anew each run (docs/detection.md's targets)
HELDOUT_SHARE = 0.5
HELDOUT_F1 = 0.98
ONSET_TARGET_S = 5.0          # an onset is right within 5 s ...
ONSET_TARGET_SHARE = 0.02     # ... or 2 % of its lifetime, whichever is larger


def onset_target(lifetime: float, timed: bool = True) -> float:
    """The onset error allowed: 5 s or 2 % of the lifetime, whichever is larger (untimed: 1 sample)."""
    return max(ONSET_TARGET_S if timed else 1.0, ONSET_TARGET_SHARE * lifetime)


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
    onset_in_target: int = 0
    onset_n: int = 0
    rate_err: list = field(default_factory=list)
    lifetimes_found: int = 0          # leaking lifetimes with a leak finding whose onset lies in them
    lifetimes_leaking: int = 0
    healthy_lifetime_hits: int = 0    # leak findings whose onset lies in a healthy lifetime of a leaking GPU
    verdict_ok: int = 0
    verdict_n: int = 0
    false_leak_verdicts: int = 0
    healthy_cases: int = 0
    series: int = 0
    times: list = field(default_factory=list)
    misses: list = field(default_factory=list)

    def prf(self) -> tuple[float, float, float]:
        prec = self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0
        rec = self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        return prec, rec, f1


def _finding_x(f, case: Case) -> float | None:
    if case.timed:
        return (f.start - T0).total_seconds() if f.start is not None else None
    return float(f.start_index) if f.start_index is not None else None


def _finding_rate(f, case: Case) -> float | None:
    if case.timed:
        return f.rate_bytes_per_hour / 3600.0 if f.rate_bytes_per_hour is not None else None
    return f.detail.get("rate_bytes_per_sample") or f.rate_bytes_per_step


def _lives(truth: GpuTruth, case: Case) -> list[Lifetime]:
    """The GPU's lifetimes; an old-style case is one lifetime over the whole log."""
    if truth.lifetimes:
        return truth.lifetimes
    return [Lifetime(0.0, case.duration, truth.leak, truth.pattern or "flat", "running", truth.onset, truth.rate)]


def _pattern_of(kind: str) -> str:
    return "step" if kind == "step" else "linear"


def score_case(case: Case, sc: Score) -> None:
    t = time.perf_counter()
    an = analyze(Bundle(samples=case.samples, events=case.events), None)
    sc.times.append(time.perf_counter() - t)
    sc.series += len(case.gpus)
    by_gpu: dict = {}
    for f in an.findings:
        if f.kind == "leak":
            by_gpu.setdefault(f.gpu, []).append(f)
    for gpu, truth in case.gpus.items():
        found = by_gpu.pop(gpu, [])
        lives = _lives(truth, case)
        if truth.leak:
            leaking = [lf for lf in lives if lf.leak]
            sc.lifetimes_leaking += len(leaking)
            if not found:
                sc.fn += 1
                sc.misses.append(f"{case.name} GPU {gpu}: missed")
                continue
            hit = set()
            wrong_job = False
            for f in found:
                ox = _finding_x(f, case)
                # the truth lifetime this finding speaks of: the leaking one its onset lies in, else the
                # nearest onset; one whose onset lies only in healthy jobs is in the wrong job
                life = None
                if ox is not None:
                    inside = [lf for lf in lives if lf.start - onset_target(lf.end - lf.start, case.timed) <= ox
                              <= lf.end + onset_target(lf.end - lf.start, case.timed)]
                    if inside and not any(lf.leak for lf in inside):
                        sc.healthy_lifetime_hits += 1
                        wrong_job = True
                        sc.misses.append(f"{case.name} GPU {gpu}: leak found in a healthy {inside[0].kind} lifetime")
                        continue
                    life = min([lf for lf in inside if lf.leak] or leaking, key=lambda lf: abs(ox - lf.onset))
                else:
                    life = leaking[-1]
                hit.add(id(life))
                sc.pattern_n += 1
                ok = f.pattern == _pattern_of(life.kind)
                sc.pattern_ok += ok
                if not ok:
                    sc.misses.append(f"{case.name} GPU {gpu}: pattern {f.pattern} (truth {_pattern_of(life.kind)})")
                if ox is not None:
                    err = abs(ox - life.onset)
                    span = life.end - life.start
                    sc.onset_err.append(err / case.duration if case.duration else 0.0)
                    sc.onset_n += 1
                    within = err <= onset_target(span, case.timed)
                    sc.onset_in_target += within
                    if not within:
                        sc.misses.append(f"{case.name} GPU {gpu}: onset off by {err:.1f} (target "
                                         f"{onset_target(span, case.timed):.1f}, lifetime {span:.0f})")
                rate = _finding_rate(f, case)
                if rate and life.rate:
                    err = abs(rate - life.rate) / life.rate
                    sc.rate_err.append(err)
                    if err > 0.1:
                        sc.misses.append(f"{case.name} GPU {gpu}: rate error {err:.1%}")
            sc.lifetimes_found += len(hit)
            # a finding in the wrong job is a false alarm there, and no true positive for the leaking one
            if hit:
                sc.tp += 1
            else:
                sc.fn += 1
                sc.misses.append(f"{case.name} GPU {gpu}: missed (found only in a healthy job)")
            sc.fp += wrong_job
        else:
            sc.healthy_total += 1
            if found:
                sc.fp += 1
                sc.healthy_false += 1
                sc.misses.append(f"{case.name} GPU {gpu}: false leak ({found[0].summary})")
            else:
                sc.tn += 1
    for gpu, fs in by_gpu.items():   # findings on something that has no truth entry
        sc.fp += 1
        sc.misses.append(f"{case.name}: unexpected leak on {gpu}")
    sc.verdict_n += 1
    sc.verdict_ok += an.verdict == case.verdict
    if an.verdict != case.verdict:
        sc.misses.append(f"{case.name}: verdict {an.verdict} (truth {case.verdict}): {an.verdict_reason}")
    if case.verdict != "leak":
        sc.healthy_cases += 1
        sc.false_leak_verdicts += an.verdict == "leak"


def merge(scores) -> Score:
    out = Score()
    for s in scores:
        for k, v in vars(s).items():
            setattr(out, k, getattr(out, k) + v)
    return out


# ----------------------------------------------------------------------------------------------
# recorded incidents: every recording, in every view a user may have

VIEWS = ("all", "smi_csv", "smi_l1", "steplog", "dmon", "apps")
VIEW_TITLES = {"all": "all files", "smi_csv": "nvidia-smi CSV", "smi_l1": "nvidia-smi -l 1",
               "steplog": "step log", "dmon": "dmon", "apps": "compute-apps"}
STEPLOG_FORMATS = ("step-markers", "hf-trainer-memory", "deepspeed-memory", "megatron-memory")


@dataclass
class Recording:
    name: str
    root: str                        # sample_logs | tune | heldout | a folder given with --recordings
    folder: Path
    expected: str
    findings: list[str]
    pattern: str | None = None
    onset: datetime | None = None    # the leak's onset, UTC
    jobs: list[tuple[datetime, datetime]] = field(default_factory=list)   # lifetimes, UTC
    tz: str = "UTC"
    flat_in_device_views: str | None = None   # why the device views do not hold the leak (README key)


def _utc(text) -> datetime | None:
    if not text or text in ("null", "None"):
        return None
    try:
        t = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace(",", "."))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def front_matter(readme: Path) -> dict[str, str]:
    """The `key: value` lines between the first two `---` lines (format: sample_logs/README.md)."""
    lines = readme.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    meta = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return meta
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return {}


def _listed(value) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if not value or value == "none":
        return []
    return [x.strip() for x in str(value).split(",") if x.strip()]


def read_recordings(base: Path, root: str) -> list[Recording]:
    """Recordings under `base`: folders with a README.md front matter that states an expected verdict,
    or with a truth.json (tests/corpus format)."""
    import json
    out = []
    if not base.is_dir():
        return out
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        tj, rd = d / "truth.json", d / "README.md"
        if tj.is_file():
            try:
                t = json.loads(tj.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                print(f"  {tj}: unreadable ({e}), skipped", file=sys.stderr)
                continue
            if not t.get("expected_verdict"):
                continue
            jobs = [(a, b) for a, b in ((_utc(j.get("start")), _utc(j.get("end"))) for j in t.get("jobs") or [])
                    if a is not None and b is not None]
            out.append(Recording(t.get("case") or d.name, root, d, t["expected_verdict"],
                                 _listed(t.get("expected_findings")), t.get("pattern"),
                                 _utc(t.get("leak_onset_time")), jobs, t.get("tz") or "UTC"))
        elif rd.is_file():
            m = front_matter(rd)
            if not m.get("expected_verdict"):
                continue
            a, b = _utc(m.get("start")), _utc(m.get("end"))
            out.append(Recording(m.get("incident") or d.name, root, d, m["expected_verdict"],
                                 _listed(m.get("expected_findings")), m.get("pattern"), _utc(m.get("onset_time")),
                                 [(a, b)] if a and b else [], m.get("tz") or "UTC",
                                 m.get("flat_in_device_views")))
    return out


def view_of(path: Path) -> tuple[str | None, str | None]:
    """(view, format) of one file, by sniffing its head as `gpu-forensics sniff` does (not by name)."""
    from forensics import parsers
    from forensics.errors import InputError
    from forensics.io.sources import Source
    try:
        src = Source.open(path, str(path))
        fmt, _ = parsers.claim_file(src)
    except (InputError, OSError):
        return None, None
    if fmt is None:
        return None, None
    name = fmt.name
    if name == "nvidia-smi-csv":
        # the timed --query-gpu CSV has a timestamp column; the classic `-l 1` one has none
        header = next((ln for ln in src.head() if "memory" in ln.lower()), "")
        return ("smi_csv" if "timestamp" in header.lower() else "smi_l1"), name
    if name in STEPLOG_FORMATS:
        return "steplog", name
    if name == "nvidia-smi-dmon":
        return "dmon", name
    if name == "nvidia-smi-apps":
        return "apps", name
    return None, name


def view_files(folder: Path) -> dict[str, list[str]]:
    from forensics.io.sources import discover
    out: dict[str, list[str]] = {"all": [str(folder)]}
    for real, _shown in discover([str(folder)]).files:
        view, _ = view_of(Path(real))
        if view:
            out.setdefault(view, []).append(str(real))
    return out


def view_expectation(rec: Recording, view: str) -> tuple[str | None, str]:
    """The verdict a view must give, or None ("n/a") and why: a view that does not hold the evidence.

    The rule, by what the incident's evidence is:
    - all files: the recording's expected verdict;
    - a residual process (leak without memory growth): only per-process memory (compute-apps) shows
      a process outliving its job; the device total and the step log cannot;
    - compute-sanitizer only (no `leak` growth expected): the evidence is the sanitizer's report;
    - caching-allocator growth: only the step log (allocated vs reserved) tells it from a leak;
    - host memory (a kernel OOM kill, GPU flat): the device views show the GPU flat (no_leak); the step
      log's GPU counts are not the incident's evidence;
    - otherwise (GPU memory growth, or a healthy run): every memory view shows it;
    and whatever the incident (`run_recording`): a view with fewer readings of the job holding memory
    than the tool needs to see a trend (SHORT_MIN) holds too little of it: it must say `inconclusive`."""
    if view == "all":
        return rec.expected, ""
    kinds = set(rec.findings)
    if rec.expected == "leak" and "leak" not in kinds and "residual_process" in kinds:
        return ("leak", "") if view == "apps" else (None, "only per-process memory shows a residual process")
    if "sanitizer_leak" in kinds and "leak" not in kinds:
        return None, "the evidence is compute-sanitizer's report"
    if rec.expected == "cache_growth":
        return ("cache_growth", "") if view == "steplog" else (
            None, "device memory alone cannot tell the caching allocator from a leak")
    if rec.flat_in_device_views and view in ("smi_csv", "smi_l1", "dmon", "apps"):
        return None, rec.flat_in_device_views
    if rec.expected == "no_leak" and "oom_kill" in kinds:
        return (None, "a host-memory incident: the step log holds GPU counts only") if view == "steplog" else ("no_leak", "")
    return rec.expected, ""


@dataclass
class ViewResult:
    view: str
    expected: str | None
    why: str = ""
    got: str | None = None           # None: the view is not in the recording
    onset_err: float | None = None   # seconds
    onset_target: float | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool | None:
        if self.got is None or self.expected is None:
            return None
        return self.got == self.expected


def _lifetime_of(rec: Recording, t: datetime) -> float | None:
    for a, b in rec.jobs:
        if a <= t <= b:
            return (b - a).total_seconds()
    return (rec.jobs[0][1] - rec.jobs[0][0]).total_seconds() if rec.jobs else None


def readings_in_jobs(samples: pl.DataFrame, jobs: list[tuple[datetime, datetime]]) -> int | None:
    """The most readings one series holds inside the jobs' lifetimes while the job held memory (above the
    series' idle floor, as detection's lifetimes see it), or None when that cannot be told (no lifetimes
    known, or a file without a clock: its readings cannot be placed in a lifetime)."""
    if not jobs or "time" not in samples.columns or samples["time"].null_count():
        return None
    key = ["source", "series", "gpu", "pid"]
    lo, hi = pl.col("bytes").min().over(key), pl.col("bytes").max().over(key)
    held = samples.filter((pl.col("bytes") > lo + IDLE_BAND * (hi - lo)) | (hi == lo))
    inside = pl.any_horizontal([pl.col("time").is_between(a, b) for a, b in jobs])
    counts = held.filter(inside).group_by(key).len()
    return int(counts["len"].max() or 0) if counts.height else 0


def expectation_seen(rec: Recording, view: str, samples: pl.DataFrame) -> tuple[str | None, str]:
    """`view_expectation`, given what the view's files hold: fewer readings of the job than a trend
    needs (SHORT_MIN) is `inconclusive`."""
    exp, why = view_expectation(rec, view)
    seen = readings_in_jobs(samples, rec.jobs)
    if view != "all" and exp is not None and seen is not None and seen < SHORT_MIN:
        return "inconclusive", f"only {seen} readings of the job: too few to see a trend"
    return exp, why


def run_recording(rec: Recording) -> list[ViewResult]:
    from forensics import pipeline
    from forensics.options import Options
    files = view_files(rec.folder)
    out = []
    for view in VIEWS:
        exp, why = view_expectation(rec, view)
        r = ViewResult(view, exp, why)
        if view in files:
            t = time.perf_counter()
            try:
                bundle, an = pipeline.run(files[view], Options(tz=rec.tz, tz_from_user=True))
                r.got = an.verdict
                r.expected, r.why = expectation_seen(rec, view, bundle.samples)
                leaks = [f for f in an.findings if f.kind == "leak" and f.start is not None]
                if rec.onset is not None and leaks:
                    f = min(leaks, key=lambda f: abs((f.start - rec.onset).total_seconds()))
                    r.onset_err = (f.start - rec.onset).total_seconds()
                    span = _lifetime_of(rec, rec.onset)
                    r.onset_target = onset_target(span) if span else ONSET_TARGET_S
            except Exception as e:  # noqa: BLE001 - a crash is a result too
                r.got = f"error: {type(e).__name__}: {e}"
            r.seconds = time.perf_counter() - t
        out.append(r)
    return out


def recording_roots(corpus: str, extra: list[str]) -> list[tuple[Path, str]]:
    roots = []
    if corpus in ("tune", "all"):
        roots.append((ROOT / "sample_logs", "sample_logs"))
        roots.append((ROOT / "tests" / "corpus" / "tune", "tune"))
    if corpus in ("heldout", "all"):
        roots.append((ROOT / "tests" / "corpus" / "heldout", "heldout"))
    roots += [(Path(p), Path(p).name) for p in extra]
    return roots


def _cell(r: ViewResult) -> str:
    if r.got is None:
        return "-"
    if r.expected is None:
        return "n/a"
    mark = "✓" if r.ok else "✗" + (r.got if not r.got.startswith("error") else "error")
    if r.onset_err is not None:
        mark += f" {r.onset_err:+.0f}s" + ("" if abs(r.onset_err) <= (r.onset_target or 0) else "!")
    return mark


def print_recordings(results: list[tuple[Recording, list[ViewResult]]]) -> tuple[int, int]:
    """The table recording x view; returns (right in every view that holds the evidence, recordings)."""
    if not results:
        return 0, 0
    w = max(len(f"{rec.root}/{rec.name}") for rec, _ in results)
    cw = 16
    print("\nrecorded incidents: verdict per view (✓ right, ✗got, n/a: the view does not hold the evidence,"
          " -: no such file; ±Ns: onset error, ! beyond max(5 s, 2 % of the lifetime))")
    print(f"{'recording':<{w}}  {'expected':<12}" + "".join(f"  {VIEW_TITLES[v]:<{cw}}" for v in VIEWS))
    print("-" * (w + 14 + (cw + 2) * len(VIEWS)))
    right = 0
    notes = []
    for rec, views in results:
        print(f"{rec.root + '/' + rec.name:<{w}}  {rec.expected:<12}" + "".join(f"  {_cell(r):<{cw}}" for r in views))
        held = [r for r in views if r.ok is not None]
        right += bool(held) and all(r.ok for r in held)
        for r in views:
            if r.got is not None and r.expected is None:
                notes.append(f"  {rec.name} / {VIEW_TITLES[r.view]}: n/a ({r.why}; it says {r.got})")
            elif r.ok is False:
                notes.append(f"  {rec.name} / {VIEW_TITLES[r.view]}: expected {r.expected}, got {r.got}")
            elif r.why and r.got is not None:
                notes.append(f"  {rec.name} / {VIEW_TITLES[r.view]}: {r.expected} ({r.why}; it says {r.got})")
    print(f"{right}/{len(results)} recordings right in every view that holds the evidence")
    onsets = [r for _, vs in results for r in vs if r.onset_err is not None]
    if onsets:
        ok = sum(abs(r.onset_err) <= r.onset_target for r in onsets)
        print(f"onsets within max(5 s, 2 % of the lifetime): {ok}/{len(onsets)} (view results with a timed leak onset)")
    for n in notes:
        print(n)
    return right, len(results)


# ----------------------------------------------------------------------------------------------
# the tables

def _pct(v, q):
    return float(np.percentile(v, q)) if len(v) else float("nan")


def print_families(per: dict[str, Score]) -> None:
    cols = ("family", "cases", "GPUs", "prec", "recall", "F1", "false", "false v.", "onset ok", "lifetimes",
            "pattern", "verdict", "median s")
    w = max(len(f) for f in per) if per else 10
    print(f"{cols[0]:<{w}}  " + "  ".join(f"{c:>9}" for c in cols[1:]))
    print("-" * (w + 2 + 11 * (len(cols) - 1)))
    for fam, s in per.items():
        p, r, f1 = s.prf()
        onset = f"{s.onset_in_target}/{s.onset_n}" if s.onset_n else "-"
        lives = f"{s.lifetimes_found}/{s.lifetimes_leaking}" if s.lifetimes_leaking else "-"
        vals = (str(s.verdict_n), str(s.series), f"{p:.3f}", f"{r:.3f}", f"{f1:.3f}",
                f"{s.healthy_false}/{s.healthy_total}", f"{s.false_leak_verdicts}/{s.healthy_cases}", onset, lives,
                f"{s.pattern_ok / s.pattern_n:.3f}" if s.pattern_n else "-",
                f"{s.verdict_ok / max(s.verdict_n, 1):.3f}", f"{_pct(s.times, 50):.3f}")
        print(f"{fam:<{w}}  " + "  ".join(f"{v:>9}" for v in vals))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20240301)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of cases")
    ap.add_argument("--quick", action="store_true", help="a quarter of the cases (scale 0.25)")
    ap.add_argument("--verbose", action="store_true", help="list every miss")
    ap.add_argument("--family", help="run one family of cases only (e.g. leak_sawtooth, life_crash_loop)")
    ap.add_argument("--corpus", choices=("tune", "heldout", "all", "none"), default="tune",
                    help="recordings to run: tune = sample_logs + tests/corpus/tune (default); heldout = "
                         "tests/corpus/heldout only (held out: run it only when asked); all; none")
    ap.add_argument("--heldout-seed", type=int, default=None,
                    help="the held-out share's seed (default: a fresh one each run, printed; give it to rerun that draw)")
    ap.add_argument("--heldout-share", type=float, default=HELDOUT_SHARE,
                    help=f"the held-out share's size, as a share of the tune suite's cases (default {HELDOUT_SHARE}; 0: none)")
    ap.add_argument("--recordings", action="append", default=[], metavar="DIR",
                    help="also run the recordings under DIR (folders with truth.json or README.md front matter)")
    args = ap.parse_args()
    scale = 0.25 if args.quick else args.scale
    held_seed = args.heldout_seed if args.heldout_seed is not None else secrets.randbits(32)
    per: dict[str, Score] = {}
    t0 = time.perf_counter()
    for case in suite(args.seed, scale, args.family):
        score_case(case, per.setdefault(case.family, Score()))
    held: dict[str, Score] = {}
    if args.heldout_share > 0:
        print(f"held-out share: seed {held_seed} ({'given' if args.heldout_seed is not None else 'fresh'}; "
              f"rerun this draw with --heldout-seed {held_seed}); tune share: seed {args.seed}", flush=True)
        for case in suite(held_seed, scale * args.heldout_share, args.family):
            score_case(case, held.setdefault(case.family, Score()))
    synth_wall = time.perf_counter() - t0
    results = []
    if args.family is None and args.corpus != "none" or args.recordings:
        for base, root in recording_roots(args.corpus if args.family is None else "none", args.recordings):
            for rec in read_recordings(base, root):
                results.append((rec, run_recording(rec)))
    wall = time.perf_counter() - t0
    sc = merge(per.values())
    old = merge(s for f, s in per.items() if f not in LIFE_NAMES)
    new = merge(s for f, s in per.items() if f in LIFE_NAMES)
    prec, rec_, f1 = sc.prf()
    print_families(per)
    print()
    rows = [
        ("cases / GPU series", f"{sc.verdict_n} / {sc.series}", "hundreds", True),
        ("leak precision", f"{prec:.3f}", "", True),
        ("leak recall", f"{rec_:.3f}", "", True),
        ("leak F1", f"{f1:.3f}", f">= {F1_TARGET}", f1 >= F1_TARGET),
        ("leak F1, classic / lifetime families", f"{old.prf()[2]:.3f} / {new.prf()[2]:.3f}", f">= {F1_TARGET}",
         min(old.prf()[2], new.prf()[2]) >= F1_TARGET),
        ("pattern accuracy", f"{sc.pattern_ok / max(sc.pattern_n, 1):.3f}", "", True),
        ("onsets within max(5 s, 2 % lifetime)", f"{sc.onset_in_target} / {sc.onset_n}", "all",
         sc.onset_in_target == sc.onset_n),
        ("onset error, median (share of log)", f"{_pct(sc.onset_err, 50):.2%}", "<= 2%", _pct(sc.onset_err, 50) <= 0.02),
        ("onset error, p90 (share of log)", f"{_pct(sc.onset_err, 90):.2%}", "<= 5%", _pct(sc.onset_err, 90) <= 0.05),
        ("rate error, median", f"{_pct(sc.rate_err, 50):.2%}", "<= 5%", _pct(sc.rate_err, 50) <= 0.05),
        ("rate error, p90", f"{_pct(sc.rate_err, 90):.2%}", "", True),
        ("leaking lifetimes with a finding", f"{sc.lifetimes_found} / {sc.lifetimes_leaking}", "all",
         sc.lifetimes_found == sc.lifetimes_leaking),
        ("leak findings in healthy lifetimes", f"{sc.healthy_lifetime_hits}", "0", sc.healthy_lifetime_hits == 0),
        ("false leaks on healthy series", f"{sc.healthy_false} / {sc.healthy_total}", "0", sc.healthy_false == 0),
        ("false leak verdicts (no-leak cases)", f"{sc.false_leak_verdicts} / {sc.healthy_cases}", "0",
         sc.false_leak_verdicts == 0),
        ("verdict accuracy", f"{sc.verdict_ok / max(sc.verdict_n, 1):.3f}", "", True),
        ("analyze() time per case, median / max",
         f"{_pct(sc.times, 50):.3f} s / {max(sc.times, default=float('nan')):.2f} s", "no slower", True),
        ("analyze() median, classic / lifetime families", f"{_pct(old.times, 50):.3f} s / {_pct(new.times, 50):.3f} s",
         "no slower", True),
    ]
    if held:
        hs = merge(held.values())
        hf1 = hs.prf()[2]
        rows += [
            (f"held-out share (seed {held_seed}): cases", f"{hs.verdict_n} / {hs.series}", "", True),
            ("held-out share: leak F1", f"{hf1:.3f}", f">= {HELDOUT_F1}", hf1 >= HELDOUT_F1),
            ("held-out share: false leak verdicts", f"{hs.false_leak_verdicts} / {hs.healthy_cases}", "0",
             hs.false_leak_verdicts == 0),
            ("held-out share: leak findings in healthy lifetimes", f"{hs.healthy_lifetime_hits}", "0",
             hs.healthy_lifetime_hits == 0),
        ]
    if results:
        ok = sum(views[0].ok is True for _, views in results)
        rows.append(("recorded incidents, verdict right (all files)", f"{ok} / {len(results)}", "all", ok == len(results)))
    rows.append(("synthetic / total wall time", f"{synth_wall:.0f} s / {wall:.0f} s", "a few minutes", True))
    w = max(len(r[0]) for r in rows)
    print(f"{'metric':<{w}}  {'value':>22}  {'target':>13}  ok")
    print("-" * (w + 44))
    for name, val, target, ok in rows:
        print(f"{name:<{w}}  {val:>22}  {target:>13}  {'yes' if ok else 'NO'}")
    print_recordings(results)
    if args.verbose:
        for s in per.values():
            for m in s.misses:
                print("  " + m)
        for s in held.values():
            for m in s.misses:
                print("  held-out: " + m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
