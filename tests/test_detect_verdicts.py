"""Verdicts on the shapes new users' logs have (issue 40): phases of a step judged like with like,
short and coarse jobs, growth into an out-of-memory error."""
from __future__ import annotations

import numpy as np
import polars as pl

from test_detect import GiB, MiB, frame, leaks, rng, run

# the `log_memory(step_name)` recipe: memory read at four points of every step
PHASES = {"before forward": 0.0, "after forward": 3.2, "after backward": 1.1, "after step": 0.0}


def phase_log(base_gib, *, seed=0, series=("allocated",), reserved_gib=None):
    """One frame per phase and series of an untimed step log, lines interleaved as the log writes them."""
    r = rng(seed)
    n = base_gib.size
    steps = np.arange(n)
    out = []
    for k, (ph, off) in enumerate(PHASES.items()):
        for j, name in enumerate(series):
            y = (base_gib + off + j * 0.5) * GiB + r.normal(0, 4 * MiB, n)
            out.append(frame(y, timed=False, series=name, gpu=None, source="train.log",
                             steps=steps.tolist(), label=ph)
                       .with_columns(pl.Series("line", 4 * steps + k + 1)))
        if reserved_gib is not None:
            out.append(frame(reserved_gib * GiB, timed=False, series="reserved", gpu=None, source="train.log",
                             steps=steps.tolist(), label=ph)
                       .with_columns(pl.Series("line", 4 * steps + k + 1)))
    return out


def test_after_step_allocated_rising_under_a_larger_swing_is_a_leak():
    # allocated after every step rises 1.06 -> 2.16 GiB over 140 steps; within a step it swings by
    # 3.2 GiB; reserved grows once (warm-up) and stays: one leak, not the cache
    n = 140
    base = np.linspace(1.06, 2.16, n)
    reserved = np.where(np.arange(n) > 3, 7.0, 6.5)
    an = run(*phase_log(base, reserved_gib=reserved))
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert f.series == "allocated"
    assert f.growth_bytes > 1.0 * GiB
    assert f.detail["phases"] == list(PHASES)
    assert "after step" in f.summary
    assert not [g for g in an.findings if g.kind == "cache_growth"]
    by_phase = {(s.series, s.label): s.classification for s in an.series}
    assert by_phase[("allocated", "after step")] == "linear_growth"


def test_one_leak_seen_at_every_phase_and_series_is_one_finding():
    # 4 phases x 3 series (allocated, reserved, max_allocated... as a log prints them) of one leak
    n = 140
    base = np.linspace(2.0, 6.0, n)
    an = run(*phase_log(base, series=("allocated", "reserved", "active")))
    (f,) = leaks(an)
    assert len(f.detail["series"]) == 8          # allocated and reserved at each of 4 phases
    assert an.verdict_reason.count("more leak finding") == 0


def test_phases_of_a_healthy_step_log_are_no_leak():
    n = 140
    an = run(*phase_log(np.full(n, 1.5), reserved_gib=np.full(n, 6.5)))
    assert an.verdict == "no_leak"
    assert not leaks(an)
