"""Job lifetimes: where, inside one memory series, a job held the GPU.

A job's memory rises off the idle baseline when it starts and falls back to it when its process ends
(a normal exit, a kill, a crash after a CUDA OOM). That fall is the end of the job, never evidence
against a leak: growth is judged inside each lifetime. A log holding several jobs (a crash loop, the
next job on the GPU) has several lifetimes; a log that stops while the job still runs ends its last
lifetime at the log's end.

Two kinds of series are cut differently:
- the device's view (nvidia-smi `memory.used`, a process's `process.used`): a lifetime is a run of
  readings above the idle baseline. A live CUDA process never drops to the no-process level (its
  context alone holds hundreds of MiB), so a reading at that level between two runs is a job boundary;
- a framework's own counts (a step log's `allocated`/`reserved`): they come from inside one process,
  whose allocated memory may legitimately drop low between steps; a lifetime ends where the step
  counter starts again (a restart).
Thresholds and their reasons: docs/detection.md, "Job lifetimes".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forensics.detect.thresholds import (IDLE_BAND, IDLE_CONFIRM, IDLE_NOISE, IDLE_SHARE, LIFETIME_MIN_READINGS,
                                         STEP_RESET)


@dataclass
class Lifetime:
    i0: int               # first sample of the job (index into the series)
    i1: int               # one past its last sample
    began: str            # log_start | rise | restart
    ended: str            # log_end | release | restart

    @property
    def n(self) -> int:
        return self.i1 - self.i0


def whole(n: int) -> list[Lifetime]:
    return [Lifetime(0, n, "log_start", "log_end")]


def device_lifetimes(y: np.ndarray) -> list[Lifetime]:
    """Runs of readings above the idle baseline (see the module's docstring)."""
    n = int(y.size)
    if n < LIFETIME_MIN_READINGS:
        return whole(n)
    lo = float(np.min(y))
    hi = float(np.max(y))
    rng = hi - lo
    if not np.isfinite(rng) or rng <= 0:
        return whole(n)
    near = y <= lo + IDLE_BAND * rng
    spread = float(np.std(y[near])) if near.sum() > 1 else 0.0
    idle = y <= lo + max(IDLE_BAND * rng, IDLE_NOISE * spread)
    if idle.all() or not idle.any():
        return whole(n)
    active_level = float(np.median(y[~idle]))
    # the lowest level of a log that starts and ends mid-job is the job's own floor (a sawtooth's
    # bottom), not an idle GPU: only a level far below the job's counts as the GPU without it
    if lo > IDLE_SHARE * active_level:
        return whole(n)
    runs = _runs(idle)
    # ... and it must be seen as such: at the log's start or end (loggers are started before the job
    # and stopped after it), or held for a few readings in a row between two jobs. A single low
    # reading between two runs is then a boundary too (a restart seen at coarse sampling).
    if not any(v and ((b - a) >= IDLE_CONFIRM or a == 0 or b == n) for v, a, b in runs):
        return whole(n)
    out = []
    for v, a, b in runs:
        if v:
            continue
        out.append(Lifetime(a, b, "log_start" if a == 0 else "rise", "log_end" if b == n else "release"))
    return out or whole(n)


def step_lifetimes(steps: np.ndarray | None, n: int) -> list[Lifetime]:
    """Cut where the step counter goes back (a restarted job), in the file's order."""
    if steps is None or n < 2:
        return whole(n)
    s = np.asarray(steps, dtype=np.float64)
    ok = np.isfinite(s)
    if ok.sum() < 2:
        return whole(n)
    idx = np.nonzero(ok)[0]
    back = np.nonzero(np.diff(s[idx]) < -STEP_RESET)[0]
    if back.size == 0:
        return whole(n)
    cuts = [0] + [int(idx[k + 1]) for k in back] + [n]
    out = []
    for j, (a, b) in enumerate(zip(cuts, cuts[1:])):
        if b > a:
            out.append(Lifetime(a, b, "log_start" if j == 0 else "restart",
                                "log_end" if b == n else "restart"))
    return out


def _runs(mask: np.ndarray) -> list[tuple[bool, int, int]]:
    """(value, start, end) of each run of equal values."""
    change = np.nonzero(np.diff(mask.astype(np.int8)))[0] + 1
    edges = np.concatenate([[0], change, [mask.size]])
    return [(bool(mask[a]), int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
