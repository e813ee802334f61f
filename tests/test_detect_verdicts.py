"""Verdicts on the shapes new users' logs have (issue 40): phases of a step judged like with like,
short and coarse jobs, growth into an out-of-memory error."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import polars as pl

from forensics.detect import series
from test_detect import T0, GiB, MiB, frame, leaks, rng, run

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


# ----------------------------------------------------------------------------------------------
# short and coarse jobs (docs/detection.md, "Short series")

def test_growth_to_the_end_of_a_short_job_is_never_no_leak():
    # 8 readings at 1 Hz: 0.6 -> 25 GiB, rising ever more slowly but still rising when the process ended
    y = np.array([0.6, 8, 14, 18, 21, 23, 24.5, 25]) * GiB
    an = run(frame(y))
    assert an.verdict != "no_leak"
    assert an.series[0].classification != "warmup_plateau"


def test_a_short_job_that_rose_only_at_its_last_readings_is_never_no_leak():
    # 5 s sampling of a job that trained flat, then kept every step's activations until its OOM
    # (heldout/linear_late_oom's gpu-mem-5s.csv): too few rising readings for a leak, but it rose by
    # 45 % at the last one, so "grew, then stayed level" would be false
    y = np.array([0.55, 8.56, 8.56, 8.75, 12.66]) * GiB
    an = run(frame(y, dt=5.0))
    assert an.verdict == "inconclusive"
    assert "at the last reading" in an.series[0].reason


def test_a_short_job_that_levelled_is_a_warmup():
    y = np.array([0.6, 8, 14, 18, 21, 23, 24.5, 24.5, 24.5, 24.5]) * GiB
    an = run(frame(y))
    assert an.verdict == "no_leak"


def test_a_fall_and_a_rise_is_not_growth_that_does_not_fall_back():
    y = np.array([10, 11, 12, 13, 5, 6, 7, 8]) * GiB
    an = run(frame(y))
    assert an.verdict != "leak"
    assert "does not fall back" not in an.verdict_reason
    assert "fell" in an.series[0].reason


def test_a_short_staircase_read_about_once_a_stair_is_a_leak():
    # held-out deepspeed_staircase_oom's dmon (MiB, 1 s): context, start-up, then +1 GiB stairs about
    # every 1.2 s, so one reading falls between two stairs and does not move
    y = np.array([657, 657, 657, 3649, 4673, 5697, 5697, 6721]) * MiB
    an = run(frame(y))
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert f.start == T0 + timedelta(seconds=3)   # the start-up's reading: the stairs follow it at once
    assert "between two alike rises" in an.series[0].reason


def test_a_short_rise_that_paused_and_rose_less_is_not_a_staircase():
    # a warm-up's rises shrink: the level reading lies between unlike rises, so the last stretch is one rise
    y = np.array([657, 657, 3649, 4673, 5200, 5200, 5300]) * MiB
    an = run(frame(y))
    assert an.verdict != "leak"


def test_one_small_last_rise_of_a_noisy_short_rise_is_no_settling():
    # held-out slow_noisy_jsonl_oom's compute-apps (MiB, 1 s): context, start-up, a noisy leak whose
    # last reading, 0.6 s before the OOM, rose only 12 MiB after rises of 240-616 MiB
    y = np.array([648, 648, 648, 648, 3400, 3400, 4016, 4628, 4868, 5454, 5466]) * MiB
    an = run(frame(y))
    assert an.verdict == "leak"


def test_rises_that_shrink_over_the_last_two_readings_are_a_warmup_settling():
    y = np.array([648, 648, 3400, 4016, 4628, 5200, 5450, 5466]) * MiB
    an = run(frame(y))
    assert an.verdict == "no_leak"
    assert "ever more slowly" in an.series[0].reason


def test_a_start_up_over_two_readings_then_level_is_no_leak():
    # synthetic seed 3763409366, 189-life_coarse's last (flat) lifetime, GiB at 5 s: the start-up took
    # two readings, whose second rise was a little smaller than the first; then +17 MiB
    y = np.array([0.568, 0.696, 4.607, 8.355, 8.372]) * GiB
    an = run(frame(y, dt=5.0))
    assert an.verdict != "leak"


def test_a_short_steady_rise_is_a_thin_leak():
    y = np.array([0.6, 4, 8, 12, 16, 19.5, 22.5, 25]) * GiB
    an = run(frame(y))
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert f.confidence <= 0.6


def test_two_column_nounits_log_of_a_short_leaking_job_is_read_and_judged(tmp_path):
    # `nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -l 5` (the form many
    # public job scripts use) beside a 40 s job that leaked
    from forensics.options import Options
    from forensics.pipeline import run as run_pipeline

    rows = [f"2026/12/05 10:00:{5 * i:02d}.000, {3 if i == 0 else 600 + 2900 * i}" for i in range(9)]
    p = tmp_path / "vram.csv"
    p.write_text("\n".join(rows) + "\n")
    bundle, an = run_pipeline([str(p)], Options(tz="UTC"))
    assert bundle.samples.height == 9
    assert set(bundle.samples["series"].to_list()) == {"memory.used"}
    assert an.verdict == "leak"


def test_a_timestamp_and_a_percentage_is_not_read_as_memory(tmp_path):
    # `timestamp, utilization.gpu` without units: numbers of at most 100 are no memory in MiB
    from forensics.options import Options
    from forensics.pipeline import run as run_pipeline

    rows = [f"2026/12/05 10:00:{5 * i:02d}.000, {min(100, 10 * i)}" for i in range(9)]
    p = tmp_path / "util.csv"
    p.write_text("\n".join(rows) + "\n")
    bundle, an = run_pipeline([str(p)], Options(tz="UTC"))
    assert "memory.used" not in set(bundle.samples["series"].to_list())


# ----------------------------------------------------------------------------------------------
# growth that ends in the job's CUDA out-of-memory error

def _pool(hold_top: int, seed=1):
    """An allocator pool doubling 757 -> 1653 -> 2677 -> 4725 -> 8821 MiB, then at its cap, 12789 MiB,
    for `hold_top` readings; then the process died of a CUDA OOM (memory back to the idle GPU)."""
    from datetime import datetime, timedelta, timezone

    from test_detect import T0
    levels = [3, 757, 1653, 2677, 4725, 8821, 12789]
    y = np.concatenate([np.full(h, lv, float) for lv, h in zip(levels, [5, 20, 20, 20, 20, 20, hold_top])])
    y = y * MiB + rng(seed).normal(0, 0.3 * MiB, y.size)
    oom = T0 + timedelta(seconds=float(y.size))
    ev = [{"time": oom, "source": "train.log", "line": 99, "kind": "gpu_oom", "gpu": "0", "bytes": 2 * GiB,
           "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}]
    return np.append(y, [3 * MiB] * 5), ev


def test_a_pool_doubling_to_its_cap_then_oom_is_the_path_to_the_oom_not_a_warmup():
    y, ev = _pool(60)
    an = run(frame(y, cap=16 * GiB), events=ev)
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert "doubling" in f.summary and f.detail["pool_doublings"] >= 2
    assert f.detail["ran_out"] == "gpu_oom"
    assert any(e.path == "train.log" for e in f.evidence)
    assert an.series[0].classification == "growth_into_oom"


def test_one_rise_to_the_working_set_then_oom_is_a_footprint_too_large():
    from datetime import datetime, timedelta, timezone

    from test_detect import T0
    y = np.concatenate([np.full(5, 3.0), np.linspace(757, 12789, 4), np.full(60, 12789.0)]) * MiB
    y = y + rng(2).normal(0, 0.3 * MiB, y.size)
    ev = [{"time": T0 + timedelta(seconds=float(y.size)), "source": "train.log", "line": 99, "kind": "gpu_oom",
           "gpu": "0", "bytes": 2 * GiB, "text": "torch.OutOfMemoryError: CUDA out of memory."}]
    an = run(frame(np.append(y, [3 * MiB] * 5), cap=16 * GiB), events=ev)
    assert an.verdict == "no_leak"
    assert "footprint too large" in an.verdict_reason and "warmup" not in an.verdict_reason
    assert an.series[0].classification == "growth_into_oom"


# the after-step allocated readings of held-out pipe_gb_infer_leak_oom's step log (GB): a noisy level,
# then a cache kept from step 13 on, three readings before an OOM whose traceback has no time
_RISING_INTO_OOM = [2.08, 2.07, 2.24, 2.34, 2.32, 2.31, 2.22, 2.30, 2.24, 2.30, 2.22, 2.20, 2.37, 2.44, 2.54]


def _untimed_oom():
    return [{"time": None, "source": "stderr.log", "line": 40, "kind": "gpu_oom", "gpu": "0", "bytes": 528 * MiB,
             "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 528.00 MiB. GPU 0 has a total"}]


def test_memory_rising_at_each_reading_up_to_an_untimed_oom_is_the_path_to_it():
    y = np.array(_RISING_INTO_OOM) * 1e9
    an = run(frame(y, dt=0.1, series="allocated", gpu=None, source="train.log"), events=_untimed_oom())
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert f.detail["ran_out"] == "gpu_oom"
    assert f.start == T0 + timedelta(seconds=1.2)   # the first reading of the rise (step 13)
    assert any("stderr.log" in text for text in f.related)


def test_memory_rising_at_each_of_a_long_job_s_last_readings_is_a_thin_leak_without_the_oom():
    # the same step log alone (held-out set 4's pipe_gb_infer_leak_oom, its train.log): no error in view,
    # three readings that left the level, each to a new high, up to the end; too few for change points
    # (a slope 8 standard errors above zero), judged as a short job's last readings are
    y = np.array(_RISING_INTO_OOM) * 1e9
    an = run(frame(y, timed=False, series="allocated", gpu=None, source="train.log",
                   steps=list(range(1, y.size + 1))))
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert f.confidence <= 0.6 and f.pattern == "linear"
    assert f.start_index == 13   # the first reading that left the level


def test_a_long_job_s_last_rises_that_shrink_are_no_leak():
    # the same level, then rises that settle (+0.17, +0.07, +0.02 GB): a warm-up's end, however new the high
    y = np.array(_RISING_INTO_OOM[:-1] + [2.46]) * 1e9
    an = run(frame(y, timed=False, series="allocated", gpu=None, source="train.log",
                   steps=list(range(1, y.size + 1))))
    assert an.verdict == "no_leak"


def test_memory_that_fell_back_before_an_untimed_oom_is_no_leak():
    # the same readings with the last one back inside the level: no growth reaches the error
    y = np.array(_RISING_INTO_OOM[:-1] + [2.25]) * 1e9
    an = run(frame(y, dt=0.1, series="allocated", gpu=None, source="train.log"), events=_untimed_oom())
    assert an.verdict == "no_leak"


def test_the_same_growth_without_an_oom_is_a_warmup():
    y, _ = _pool(60)
    an = run(frame(y, cap=16 * GiB))
    assert an.verdict == "no_leak"
    assert an.series[0].classification == "warmup_plateau"


# ----------------------------------------------------------------------------------------------
# what a finding says agrees with its own evidence

def test_an_untimed_leak_without_steps_says_its_rate_per_sample():
    # `nvidia-smi -l 1` without a timestamp column: no clock, no step; the rate is per reading
    y = 2 * GiB + np.maximum(0, np.arange(200) - 16) * 8 * MiB + rng(3).normal(0, MiB, 200)
    an = run(frame(y, timed=False))
    (f,) = leaks(an)
    assert "at  " not in f.summary and "/sample" in f.summary


def test_a_cache_warmup_note_quotes_the_level_it_names():
    # reserved grows while the job warms up, stays at 2.5 GiB, then the job's memory is freed (130 MiB)
    n = 80
    res = np.concatenate([np.linspace(0.6, 2.5, 10), np.full(n - 11, 2.5), [130 / 1024]]) * GiB
    alloc = np.concatenate([np.full(n - 1, 1.2), [0.1]]) * GiB
    an = run(frame(res, series="reserved", gpu=None, source="train.log"),
             frame(alloc, series="allocated", gpu=None, source="train.log"))
    (f,) = [f for f in an.findings if f.kind == "cache_warmup"]
    assert "stayed level at about 2.50 GiB" in f.summary and "released" in f.summary
    assert "2.50 GiB" in f.evidence[-1].text
    # one sentence that reads: the allocated series' shape as a verb phrase after "while"
    assert ", while allocated memory " in f.summary and "with allocated memory" not in f.summary


# ---- a serving engine's KV cache (issue 41): a pool that fills is a cache, not a leak -------------

KV_CAP = round(8.11 * GiB)


def _vllm_log(path, percents):
    """vLLM V1's start-up size lines and its stats line every 10 s (the shapes of tests/samples/serving-engine-log/)."""
    lines = ["INFO 03-01 10:00:00 [gpu_worker.py:227] Available KV cache memory: 8.11 GiB",
             "INFO 03-01 10:00:00 [kv_cache_utils.py:634] GPU KV cache size: 59,040 tokens"]
    for i, p in enumerate(percents):
        m, s = divmod(10 + 10 * i, 60)
        lines.append(f"INFO 03-01 {10 + m // 60:02d}:{m % 60:02d}:{s:02d} [loggers.py:116] Engine 000: Avg prompt "
                     "throughput: 1.0 tokens/s, Avg generation throughput: 40.0 tokens/s, Running: 12 reqs, Waiting: "
                     f"3 reqs, GPU KV cache usage: {p:.1f}%, Prefix cache hit rate: 0.0%")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_kv_cache_that_fills_and_stays_full_is_a_busy_engine_not_a_leak(tmp_path):
    from forensics import pipeline
    from forensics.options import Options
    log = _vllm_log(tmp_path / "vllm.log", [min(100.0, 2.5 * i) for i in range(80)])
    bundle, an = pipeline.run([str(log)], Options(tz="UTC", year=2025))
    kv = bundle.samples.filter(pl.col("series") == "kv_cache.used")
    assert kv.height == 80 and kv["bytes"].max() == KV_CAP and set(kv["total_bytes"]) == {KV_CAP}
    assert an.verdict == "no_leak" and not leaks(an)
    assert "fills to 100 % of its 8.11 GiB and stays full to the end" in an.verdict_reason
    assert "not a leak" in an.verdict_reason and "80 readings" in an.verdict_reason
    # what it cannot see is said: the rest of the engine's GPU memory
    assert "outside the cache" in an.verdict_reason and "nvidia-smi" in an.verdict_reason


def test_a_kv_cache_beside_a_flat_gpu_is_said_after_the_gpu_verdict():
    n = 200
    flat = frame(np.full(n, 70 * GiB) + rng(3).normal(0, 8 * MiB, n), dt=10.0)
    kv = frame(np.linspace(0.05, 0.4, n) * KV_CAP, dt=10.0, series="kv_cache.used", gpu=None, source="vllm.log",
               cap=KV_CAP)
    an = run(flat, kv)
    assert an.verdict == "no_leak" and not leaks(an)
    assert an.verdict_reason.startswith("1 GPU memory series show no growth that persists")
    assert "The KV cache (kv_cache.used of vllm.log, 200 readings) rises to 40% of its 8.11 GiB" in an.verdict_reason


def test_kv_cache_usage_without_the_cache_size_is_said_as_skipped():
    # the real vLLM stats lines of vllm-project/vllm#12314: a fraction of a cache whose size the excerpt lacks
    from conftest import realworld
    from forensics import pipeline
    from forensics.options import Options
    _, an = pipeline.run([str(realworld("vllm_metrics_kv_usage.txt"))], Options(tz="UTC", year=2025))
    assert an.verdict == "inconclusive"
    assert an.verdict_reason.endswith("Skipped: 6 lines, KV cache usage as a fraction, the cache's size not in the "
                                      "log: not read.")


# A short job's first rise out of its start level, far faster than what follows, is the job reaching
# its working set. Readings per second of two real H100 jobs (bench/heldout2, 2026-12-06): a 1 s
# nvidia-smi log of an 11 s job that ran into a CUDA OOM, and compute-apps of a crash loop's second run.
STARTUP_THEN_FEW = {
    "kv_gb_leak_oom": [0, 0, 0, 0, 561, 561, 561, 561, 561, 561, 561, 4209, 4401, 4785, 0, 0],
    "crashloop_run2": [552, 552, 552, 552, 552, 552, 2952, 3272, 4552],
}


def test_a_start_up_jump_and_two_unlike_rises_are_too_few_for_a_trend():
    for name, mib in STARTUP_THEN_FEW.items():
        an = run(frame(np.array(mib, float) * MiB, pid=7 if name.startswith("crash") else None))
        assert an.verdict == "inconclusive", (name, an.verdict_reason)
        assert "2 after the start-up's jump" in an.verdict_reason
        assert "more slowly" not in an.verdict_reason, an.verdict_reason   # 192 then 384 MiB is no settling


def test_a_start_up_jump_and_two_alike_rises_are_too_few_for_a_trend():
    # bench/heldout7/crashloop_mmengine_oom_x2's dmon (H100, 2026-12-06), its first run: the start-up's
    # jump, then +1024 and +1280 MiB as the job died; the same second's CSV read +896 and +1280, the
    # second run +768 and +1280. Whether two rises come out alike (within SHORT_SIMILAR) is where the
    # readings fall in the steps, not evidence: a warm-up allocating over two readings does the same.
    # Seeded draws of the shape (context, jump, two rises within 1.4x of each other, end).
    r = rng(40)
    shapes = [[561, 561, 561, 561, 3001, 4025, 5305]]
    for _ in range(20):
        ctx, jump, a = r.uniform(450, 800), r.uniform(1500, 3500), r.uniform(300, 1000)
        b = a * r.uniform(1 / 1.39, 1.39)
        shapes.append([ctx] * int(r.integers(2, 6)) + [ctx + jump, ctx + jump + a, ctx + jump + a + b])
    for mib in shapes:
        an = run(frame(np.array(mib, float) * MiB, dt=float(r.choice([1.0, 2.0, 5.0]))))
        assert an.verdict == "inconclusive", (mib, an.verdict_reason)
        assert "2 after the start-up's jump" in an.verdict_reason, an.verdict_reason


def test_a_start_up_jump_then_steady_rises_is_still_a_thin_leak():
    # the same start, then three like rises: the trend is seen after the start-up
    an = run(frame(np.array([552, 552, 552, 3000, 3300, 3600, 3900, 4200], float) * MiB))
    assert an.verdict == "leak"
    (f,) = leaks(an)
    assert f.start_index is None or f.start_index >= 3


def test_a_flat_device_reading_says_what_it_cannot_see():
    # a JAX job's pool taken at start and flat while bytes_in_use grew to RESOURCE_EXHAUSTED (real, H100)
    mib = [0] * 5 + [4, 537, 561, 1841, 2933, 2933] + [4981, 4981] + [4983] * 12 + [0] * 4
    an = run(frame(np.array(mib, float) * MiB))
    assert an.verdict == "no_leak"
    assert "device readings only" in an.verdict_reason and "JAX/XLA" in an.verdict_reason
    # a framework's own count is no device reading: no such caveat
    an = run(frame(np.full(30, 2.0) * GiB, series="allocated", gpu=None, source="train.log"))
    assert "device readings only" not in (an.verdict_reason or "")


# An inference loop keeping every batch's outputs, batches of random size (real, H100,
# bench/heldout3/infer_kv_leak_exit, `gpu_mem_alloc` in GB per step): growth in bursts and pauses, the
# last pause 11 of 120 steps. Read as a warm-up and its plateau until the growth after each ramp
# counted against the quiet tail.
BURSTY_ALLOCATED_GB = [3.09,3.09,3.08,4.03,3.69,3.66,4.06,3.78,4.00,3.63,3.59,3.31,3.31,3.19,3.09,3.11,3.13,3.36,3.27,3.50,3.63,3.63,3.75,3.72,3.86,4.02,3.95,4.02,4.22,4.63,4.89,5.19,5.72,5.34,5.52,5.89,5.88,5.86,6.06,6.06,6.63,6.88,7.25,7.45,7.25,7.28,7.53,7.42,8.16,8.53,9.03,9.38,9.86,9.49,9.49,9.70,9.67,9.69,9.91,9.81,9.83,9.94,10.00,10.16,10.17,10.20,10.22,10.38,10.31,10.74,10.61,10.69,10.75,10.94,10.97,11.61,12.25,12.63,13.00,13.53,13.63,14.25,13.92,14.24,14.24,14.24,14.24,14.33,14.30,14.42,14.42,14.47,14.47,14.47,15.30,15.69,16.03,16.31,16.02,16.09,16.24,16.39,16.30,16.31,16.42,16.42,17.17,17.63,17.89,18.49,18.95,19.08,18.81,18.83,18.91,18.89,19.06,19.00,19.08,19.06]


def test_a_leak_in_bursts_and_pauses_is_no_warm_up():
    y = np.array(BURSTY_ALLOCATED_GB) * GiB
    an = run(frame(y, timed=False, series="allocated", gpu=None, source="train.log",
                   steps=list(range(1, y.size + 1))))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert f.pattern == "linear"
    assert 16 <= (f.start_index or 0) <= 30 and abs(f.rate_bytes_per_step - 155.7 * MiB) < 0.15 * 155.7 * MiB


def test_a_ramp_after_the_start_up_is_judged_against_its_own_noise():
    # compute-apps of a real job (H100, bench/heldout3/leak_oom_spine_late, MiB a second): its context,
    # the working set at once, flat, then +768 MiB a second to a CUDA OOM. The start-up's jump made the
    # whole series look noisy, and the ramp after it was called a warm-up's plateau.
    mib = [552] * 4 + [3888] * 4 + [4656, 5424, 6192, 7056, 7824, 8592]
    an = run(frame(np.array(mib, float) * MiB, pid=1047, series="process.used"))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert abs(f.rate_bytes_per_hour / 3600 - 768 * MiB) < 0.1 * 768 * MiB
    assert 6.5 <= (f.start - T0).total_seconds() <= 8.5


def test_a_ramp_with_a_short_flat_top_is_still_growing():
    # compute-apps of a real job (H200, tests/corpus/heldout/infer_cache_leak_exit, MiB a second): the
    # caching allocator absorbed the first seconds of the leak, then the pool grew for 5 s and the job
    # exited 2 s later. The flat top made the ramp's curve look like a warm-up's settling.
    mib = [6536] * 3 + [6538] * 2 + [6890, 7274, 7274, 7442, 7626, 7818, 7818, 7818]
    an = run(frame(np.array(mib, float) * MiB, pid=749, series="process.used"))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert f.pattern == "linear" and (f.start - T0).total_seconds() <= 5.0


def test_a_start_up_jump_into_the_ramp_does_not_hide_it():
    # dmon of a real job (H100, bench/heldout3/staircase_jsonl_sigkill, MiB a second): the context, the
    # working set at once, then +512 MiB every 12 steps, read at nearly every second. The jump was the
    # step into the ramp's segment; the onset's hinge, unable to fit it, landed mid-ramp.
    mib = [657] * 5 + [3649, 4161, 4161, 4673, 5185, 5697, 5697, 6209, 6721, 6721, 7233]
    an = run(frame(np.array(mib, float) * MiB))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert 5.0 <= (f.start - T0).total_seconds() <= 6.5


def test_a_start_up_over_two_readings_into_the_ramp_is_not_the_leak_s_onset():
    # dmon of a real job (H100, bench/heldout5/tensorboard_staircase_exit, MiB a second): the context,
    # the working set caught mid-allocation (+2140 then +852 MiB), then a 512 MiB stair every 1.65 s
    # from 12:23:30.67 (6.67 s after the first reading here). With the start-up's second part in the
    # ramp, the onset's hinge went back to the context's level, 5 s early.
    mib = [657] * 4 + [2797, 3649, 4161, 4161, 4673, 4673, 5185, 5697, 5697, 6209, 6209, 6721, 7233]
    an = run(frame(np.array(mib, float) * MiB))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert 4.5 <= (f.start - T0).total_seconds() <= 7.0


def test_a_coarse_logger_that_saw_the_start_up_and_the_leak_as_one_rise_does_not_place_the_onset():
    # one GPU, two loggers of it (bench/heldout5/monitor_linear_leak_sigkill's shape): the context from
    # 5 s, the working set at 8 s, level, then +640 MiB a second from 15.5 s; read every second and every
    # 5 s. The 5 s readings rise alike from the context on (their onset is their job's first reading),
    # the 1 s ones see the level before the leak.
    def mib(t):
        return np.where(t < 5, 0, np.where(t < 8, 561, 3300 + 640 * np.maximum(0.0, t - 15.5)))
    fine = frame(mib(np.arange(0.0, 26.0)) * MiB, source="dmon.txt")
    coarse = frame(mib(np.arange(0.0, 26.0, 5.0)) * MiB, dt=5.0, source="gpu-used-5s.csv")
    an = run(coarse, fine)
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert abs((f.start - T0).total_seconds() - 15.5) <= 1.0


def test_a_coarse_job_s_leak_begins_where_its_rise_changed_pace_not_at_the_start_up():
    # 5 s sampling (synthetic life_coarse 386's shape): the idle GPU, the context at 10 s, the working
    # set reached over two readings at 1190 MiB a second, then a leak of 1409 MiB a second from 20 s.
    # The rises are alike within SHORT_SIMILAR, one trend by the short-job rule, but clean: two slopes,
    # then three, apart by far more than either run's own spread. The onset was the start-up's, 10 s early.
    t = np.arange(0.0, 45.0, 5.0)
    mib = np.where(t < 10, 0, np.where(t <= 20, 442 + 1190 * (t - 10), 442 + 11900 + 1409 * (t - 20)))
    an = run(frame(mib * MiB, dt=5.0))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert abs((f.start - T0).total_seconds() - 20) <= 2.5


def test_a_noisy_coarse_rise_has_no_change_of_pace():
    # one steady rise of 1300 MiB a second with 500 MiB of noise on each reading (a noisy logger), 20
    # draws: no run of slopes stands apart from the others by four times their own spread
    for seed in range(20):
        r = rng(seed)
        t = np.arange(10.0, 50.0, 5.0)
        mib = 442 + 1300 * (t - 10) + np.where(t > 10, r.normal(0, 500, t.size), 0)
        assert series._slope_kink(t, mib * MiB) is None, seed


def test_the_first_stair_is_not_placed_at_the_start_up():
    # a job's start-up (context, then its working set over two readings) half a stair spacing before
    # the first stair: the split of the first stair's window took the start-up's larger rise
    r = rng(3)
    t = np.arange(600.0)
    y = np.where(t < 1, 500, np.where(t < 3, 500 + 4000 * (t / 3), 9000)) * MiB
    y = y + np.floor(np.maximum(0, t - 27) / 166 + (t >= 27)) * 380 * MiB + r.normal(0, 8 * MiB, t.size)
    an = run(frame(y))
    (f,) = leaks(an)
    assert f.pattern == "step" and abs((f.start - T0).total_seconds() - 27) <= 5


def test_a_short_job_s_trend_begins_after_its_start_up_under_noise():
    # 5 s sampling: the context, the working set reached over two readings, then +750 MiB a reading
    # give or take 200 (noise): no two rises alike, yet the start-up's two rises stand far above the rest
    mib = [576, 758, 6439, 12048, 12805, 13542, 14201, 15036, 15558, 16439]
    an = run(frame(np.array(mib, float) * MiB, dt=5.0))
    assert an.verdict == "leak", an.verdict_reason
    (f,) = leaks(an)
    assert 14.0 <= (f.start - T0).total_seconds() <= 16.0


def test_a_warm_up_bending_into_its_plateau_is_no_leak_though_its_straight_part_stops():
    """A fresh seed's job (life_warmup_release, seed 4158907872, case 219, GPU 1): after a restart memory
    climbs 8.9 → 10.4 GiB ever more slowly. Its steepest straight stretch, judged alone up to its end, is a
    line; the curve after it still rises, ever more slowly, so the whole is a warm-up, not a leak that
    stopped at once (a false leak verdict before)."""
    from evaluation.synthetic import suite
    from forensics.detect import analyze
    from forensics.model import Bundle
    case = next(c for c in suite(4158907872, 0.5, "life_warmup_release") if c.name.startswith("219"))
    an = analyze(Bundle(samples=case.samples.filter(pl.col("gpu") == "1"), events=case.events), None)
    assert an.verdict != "leak", an.verdict_reason


# DeepSpeed `see_memory_usage` "MA" (GB) of a real inference job (H100,
# bench/heldout6/deepspeed_infer_leak_sigkill, step 1..120) and its seconds since step 1: every request's
# output kept from step 16 (1.46 s), the growth speeding up as it goes (about 0.3 GB/s at first, 0.9 at
# the end), in bursts and pauses
SPEEDING_UP_S = [
    0.0, 0.001, 0.153, 0.221, 0.281, 0.416, 0.526, 0.612, 0.728, 0.798, 0.963, 1.084, 1.182, 1.247, 1.365, 1.46,
    1.631, 1.798, 1.85, 1.923, 1.989, 2.116, 2.296, 2.356, 2.453, 2.518, 2.613, 2.768, 2.883, 2.978, 3.131, 3.232,
    3.335, 3.512, 3.665, 3.789, 3.85, 4.012, 4.184, 4.359, 4.53, 4.674, 4.746, 4.893, 5.017, 5.108, 5.184, 5.348,
    5.46, 5.633, 5.712, 5.861, 5.978, 6.15, 6.282, 6.454, 6.566, 6.654, 6.8, 6.891, 7.041, 7.125, 7.187, 7.348,
    7.482, 7.621, 7.803, 7.943, 8.093, 8.203, 8.375, 8.472, 8.621, 8.708, 8.836, 8.905, 9.026, 9.1, 9.169, 9.332,
    9.514, 9.615, 9.705, 9.82, 9.95, 10.036, 10.145, 10.288, 10.434, 10.587, 10.735, 10.813, 10.942, 11.072,
    11.14, 11.297, 11.466, 11.597, 11.688, 11.76, 11.892, 12.046, 12.122, 12.267, 12.395, 12.487, 12.631, 12.78,
    12.886, 12.987, 13.096, 13.18, 13.354, 13.527, 13.657, 13.783, 13.908, 14.002, 14.137, 14.306]
SPEEDING_UP_GB = [
    3.08, 3.07, 3.3, 3.44, 3.41, 3.39, 3.27, 3.38, 3.3, 3.38, 3.27, 3.25, 3.38, 3.31, 3.33, 3.54, 3.67, 3.86, 3.75,
    3.74, 3.74, 3.75, 3.87, 3.82, 3.94, 4.0, 4.0, 3.95, 3.99, 4.06, 4.14, 4.11, 4.14, 4.18, 4.17, 4.53, 4.66, 4.88,
    5.05, 5.12, 5.2, 5.33, 5.45, 5.63, 5.85, 5.76, 5.76, 5.84, 5.79, 5.84, 5.83, 5.83, 5.92, 5.95, 5.92, 6.17,
    6.37, 6.41, 6.56, 6.79, 6.74, 6.72, 6.79, 6.84, 6.85, 6.87, 6.97, 7.03, 7.34, 7.38, 7.59, 7.7, 7.81, 7.74,
    7.76, 7.8, 7.81, 7.95, 7.88, 7.88, 7.97, 7.97, 7.98, 8.31, 8.46, 8.59, 8.49, 8.7, 8.9, 9.1, 9.19, 9.37, 9.54,
    9.67, 9.9, 9.99, 10.18, 10.28, 10.52, 10.43, 10.51, 10.51, 10.51, 10.56, 10.56, 10.68, 10.65, 10.92, 11.13,
    11.24, 11.36, 11.42, 11.65, 11.69, 11.9, 12.01, 12.14, 12.26, 12.15, 12.24]


def test_a_leak_that_speeds_up_begins_where_it_left_the_level():
    # the change points cut the rise into pieces, the first (0.3 GB/s) and the next (0.56) parted by a
    # burst (the fitted lines step up 0.53 GB). Joined only within a small offset and a slope like the
    # last piece's, the ramp began at the third piece: the onset 5.4 s late, at a mere speed-up.
    fit = series.analyze_xy(np.array(SPEEDING_UP_S), np.array(SPEEDING_UP_GB) * 1e9, discrete=False)
    assert fit.classification == "linear_growth", fit.reason
    assert 1.0 <= fit.leak.onset <= 3.0



@pytest.mark.parametrize("seed", range(12))
def test_a_stair_split_by_the_change_points_is_measured_between_its_levels(seed):
    # synthetic `life_release` case 307's shape (2 s readings, 150 MiB of noise): the start-up in three
    # readings, a level, then +2.6 GB stairs every 1130 s, the first 110 s in. The change points may cut
    # a stair into a steep segment and a jump after it; counted as the segment's rise alone (half a
    # stair) the first was "the first epoch's own allocation" and the onset went to the second stair,
    # 1130 s late (2 of these 12 draws), and the stairs' rate was 20 % low (7 of 12)
    t = np.arange(0.0, 4080.0, 2.0)
    y = 35.2e9 + 2.6e9 * ((t >= 110).astype(float) + (t >= 1240) + (t >= 2370) + (t >= 3500))
    y[:2] = [12.1e9, 23.9e9]
    fit = series.analyze_xy(t, y + rng(seed).normal(0, 150 * MiB, t.size), discrete=False)
    assert fit.classification == "staircase", fit.reason
    assert 100 <= fit.leak.onset <= 120
    assert fit.leak.rate == pytest.approx(2.6e9 / 1130, rel=0.02)


def test_a_log_of_free_memory_alone_is_judged_by_its_fall():
    """fairseq's progress line prints `gb_free` (total_memory - max_memory_allocated) and no use: free memory
    falling is memory in use growing, so the log's `free.fall` (how far free memory is below its highest) is
    judged; its steps are fairseq's `num_updates`. Held-out set 9's step logs said `inconclusive`, with "no
    memory readings were found", as run. The recording: 64 MiB a step from update 22 (truth.json)."""
    from forensics import api
    log = Path(__file__).parent / "samples" / "step-markers" / "style_fairseq_gb_free_heldout9.txt"
    s = api.analyze(log, tz="UTC").summary()
    assert s["verdict"] == "leak"
    leak = next(f for f in s["findings"] if f["kind"] == "leak")
    assert leak["series"] == "free.fall" and leak["pattern"] == "linear"
    assert "(free.fall: memory in use, read from free memory's fall) grows linearly" in leak["summary"]
    assert abs(leak["rate_bytes_per_step"] / (64 * MiB) - 1) < 0.05
    onset = datetime.fromisoformat(leak["start"].replace("Z", "+00:00"))
    assert abs(onset - datetime(2026, 12, 7, 5, 34, 13, 481000, tzinfo=timezone.utc)) < timedelta(seconds=5)


CSV_SAMPLES = Path(__file__).parent / "samples" / "nvidia-smi-csv"
RECORDED = Path(__file__).parent / "corpus" / "tune"


def _leak(summary: dict) -> dict:
    return next(f for f in summary["findings"] if f["kind"] == "leak")


def test_a_csv_of_free_memory_alone_is_judged_by_its_fall_as_memory_in_use():
    """`timestamp, index, memory.free [MiB]` (a recording's own cells: tune/linear_late_exit, 96 MiB a step):
    free memory falling is memory in use growing, byte for byte, so its `free.fall` gives the leak the same
    recording's memory.used gives: the same onset, rate and growth. It said `inconclusive` (free memory was
    not judged) before."""
    from forensics import api
    free = api.analyze(CSV_SAMPLES / "nvsmi_csv_free_only_leak.txt", tz="UTC").summary()
    used = api.analyze(RECORDED / "linear_late_exit" / "nvidia-smi-wide.csv", tz="UTC").summary()
    assert free["verdict"] == used["verdict"] == "leak"
    a, b = _leak(free), _leak(used)
    assert (a["series"], b["series"]) == ("free.fall", "memory.used")
    assert "(free.fall: memory in use, read from free memory's fall) grows linearly" in a["summary"]
    for key in ("pattern", "start", "rate_bytes_per_hour", "growth_bytes"):   # (its GPU is the bus id there)
        assert a[key] == b[key], key


def test_a_csv_of_flat_free_memory_is_no_leak():
    """A job that took 82 GiB and held it (tune/large_stable_exit's memory.free cells): its free memory falls
    once and stays level until the job ends, which is no leak."""
    from forensics import api
    assert api.analyze(CSV_SAMPLES / "nvsmi_csv_free_only_flat.txt", tz="UTC").summary()["verdict"] == "no_leak"


def test_a_headerless_csv_of_free_memory_is_read_with_its_declared_columns(tmp_path):
    """`--format=csv,noheader,nounits` (the same rows without header and units): a lone number column cannot be
    told used from free without memory.total, so the columns are declared (`--columns
    timestamp,index,memory.free`); then it is the same leak."""
    from forensics import api
    rows = (CSV_SAMPLES / "nvsmi_csv_free_only_leak.txt").read_text().splitlines()[2:]
    headerless = tmp_path / "gpu.csv"
    headerless.write_text("".join(row.removesuffix(" MiB") + "\n" for row in rows))
    s = api.analyze(headerless, tz="UTC", columns="timestamp,index,memory.free").summary()
    with_header = _leak(api.analyze(CSV_SAMPLES / "nvsmi_csv_free_only_leak.txt", tz="UTC").summary())
    assert s["verdict"] == "leak"
    assert {k: _leak(s)[k] for k in ("series", "start", "growth_bytes")} == \
        {k: with_header[k] for k in ("series", "start", "growth_bytes")}


def test_a_csv_with_memory_in_use_gives_no_fall():
    """memory.free beside memory.used (and memory.total) is not read: memory.used is the series judged."""
    from forensics import api
    samples = api.analyze(RECORDED / "linear_late_exit" / "nvidia-smi-wide.csv", tz="UTC").samples
    assert set(samples["series"].unique()) == {"memory.used"}


def _two_processes(flat_gib: float, flat_pid_first: bool):
    """A GPU whose total grows with one process (compute-apps) beside a flat one, and a step log whose allocated
    count stays at 3.3 GiB."""
    n = 40
    t = np.arange(n, dtype=float)
    grow = (1.5 + 0.2 * t) * GiB
    flat = np.full(n, flat_gib * GiB)
    alloc = np.full(n, 3.3 * GiB)
    return [frame(grow + flat, series="memory.used"),
            frame(grow, series="process.used", pid=815, source="compute-apps.csv"),
            frame(flat, series="process.used", pid=808, source="compute-apps.csv"),
            frame(alloc, series="allocated", gpu=None, source="a.log")]


def test_a_flat_count_of_another_process_leaves_the_growing_one_a_leak():
    """heldout12/two_procs_nanotron_tracemalloc_exit: the flat trainer's step log (3.3 GiB allocated) said
    `cache_growth` of a GPU whose growth compute-apps puts in the other process."""
    an = run(*_two_processes(3.9, True))
    assert an.verdict == "leak"
    assert [f.pid for f in leaks(an)] == [815]
    assert not [g for g in an.findings if g.kind == "cache_growth"]


def test_a_flat_process_too_small_for_the_count_leaves_the_cache():
    """A DataLoader worker's context (0.5 GiB, flat) beside the trainer whose cache grows: the flat allocated
    count (3.3 GiB) cannot be the worker's, so the growth is the trainer's cache."""
    an = run(*_two_processes(0.5, True))
    assert an.verdict == "cache_growth"
