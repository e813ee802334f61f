"""Job lifetimes: a job's release at its end is the end of the job, not memory falling back.

Real recordings (sample_logs/) read one file at a time, as a user who has only that file would, and
seeded series with known lifetimes and onsets (as ruptures' own tests make signals with known
breakpoints)."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from forensics.detect import lifetimes
from forensics import pipeline
from forensics import report
from forensics.detect import analyze
from forensics.detect.series import analyze_xy
from forensics.model import Bundle
from forensics.options import Options
from forensics.model import events_frame, samples_frame

from evaluation.recordings import front_matter, read_recordings, view_expectation, view_of

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
MiB = 1 << 20
GiB = 1 << 30


def _truth(folder: Path) -> dict:
    return front_matter(folder / "README.md")


# ----------------------------------------------------------------------------------------------
# cutting series into lifetimes

def test_idle_job_idle_is_one_lifetime_without_the_idle_readings():
    y = np.array([0, 0, 0, 500, 1600, 1600, 2000, 2400, 2800, 0, 0], dtype=float) * MiB
    (lt,) = lifetimes.device_lifetimes(y)
    assert (lt.i0, lt.i1, lt.began, lt.ended) == (3, 9, "rise", "release")


def test_two_jobs_with_an_idle_gap_are_two_lifetimes():
    y = np.array([0, 0, 900, 900, 900, 0, 0, 700, 800, 900, 1000, 0], dtype=float) * MiB
    got = [(lt.i0, lt.i1, lt.ended) for lt in lifetimes.device_lifetimes(y)]
    assert got == [(2, 5, "release"), (7, 11, "release")]


def test_a_sawtooth_whose_floor_is_the_jobs_own_is_not_cut():
    # a log that starts and ends mid-job: its lowest level is the job's floor, far above idle
    y = np.tile([4000, 6000, 8000, 10000], 6).astype(float) * MiB
    assert lifetimes.device_lifetimes(y) == lifetimes.whole(y.size)


def test_a_job_running_through_the_whole_log_is_one_lifetime():
    y = np.linspace(10 * GiB, 20 * GiB, 50)
    assert lifetimes.device_lifetimes(y) == lifetimes.whole(50)


def test_step_counter_going_back_is_a_restart():
    steps = np.array([1, 2, 3, 4, 5, 1, 2, 3, 10, 11], dtype=float)
    got = [(lt.i0, lt.i1, lt.began, lt.ended) for lt in lifetimes.step_lifetimes(steps, steps.size)]
    assert got == [(0, 5, "log_start", "restart"), (5, 10, "restart", "log_end")]


# ----------------------------------------------------------------------------------------------
# seeded series: growth, then release to the idle GPU

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)


def _bundle(y_mib, dt=1.0, t0=T0, gpu="0", series="memory.used", pid=None, total=80 * 1024):
    rows = [{"time": t0 + timedelta(seconds=i * dt), "seq": i, "source": "gpu.csv", "line": i + 2, "gpu": gpu,
             "pid": pid, "series": series, "bytes": int(v * MiB), "total_bytes": total * MiB}
            for i, v in enumerate(y_mib)]
    return rows


def _analyze(rows, events=None):
    return analyze(Bundle(samples=samples_frame(rows), events=events if events is not None else events_frame([])))


def _job(start_flat: int, leak: int, rate: float, level=2000.0, tail_idle=5, head_idle=5, rng=None):
    """idle, start-up (context, then the working set), flat, then growth at `rate` MiB a sample, then
    the process ends and memory goes back to 0."""
    y = [0.0] * head_idle + [520.0, level] + [level] * start_flat
    y += [level + rate * (k + 1) for k in range(leak)]
    y += [0.0] * tail_idle
    y = np.array(y)
    if rng is not None:
        y[y > 0] += rng.integers(-2, 3, size=(y > 0).sum())
    return y


@pytest.mark.parametrize("seed", range(6))
def test_leak_that_ends_in_a_release_to_zero_is_a_leak_with_its_onset(seed):
    rng = np.random.default_rng(seed)
    flat, leak = int(rng.integers(10, 40)), int(rng.integers(20, 80))
    y = _job(flat, leak, rate=float(rng.uniform(30, 300)), rng=rng)
    a = _analyze(_bundle(y))
    assert a.verdict == "leak"
    (f,) = [f for f in a.findings if f.kind == "leak"]
    onset_s = (f.start - T0).total_seconds()
    truth = 5 + 2 + flat - 1          # the last flat reading; growth shows from the next one
    lifetime = 2 + flat + leak
    assert abs(onset_s - truth) <= max(5.0, 0.02 * lifetime) + 1.0, (onset_s, truth)
    assert f.lifetime_ended == "release"
    assert (f.lifetime_start - T0).total_seconds() == 5.0


def test_several_jobs_in_one_log_are_judged_one_by_one():
    healthy = _job(60, 0, 0.0)
    leaky = _job(10, 50, 100.0, head_idle=3)
    a = _analyze(_bundle(np.concatenate([healthy, leaky])))
    assert a.verdict == "leak"
    (sr,) = a.series
    assert [lt["classification"] for lt in sr.lifetimes] == ["flat", "linear_growth"]
    (f,) = [f for f in a.findings if f.kind == "leak"]
    # the leak's onset lies in the second job, not at the log's start
    assert (f.start - T0).total_seconds() > healthy.size


def test_warmup_then_plateau_then_release_is_not_a_leak():
    y = [0.0] * 5 + [520.0] + [2000 + 3000 * (1 - np.exp(-k / 4)) for k in range(15)] + [5000.0] * 60 + [0.0] * 5
    a = _analyze(_bundle(y))
    assert a.verdict == "no_leak"


def test_staircase_at_the_samples_resolution_with_its_stairs_and_period():
    y = [0.0] * 5 + [520.0, 2000.0] + [2000.0] * 5
    for k in range(6):
        y += [2000.0 + 512 * (k + 1)] * 20
    y += [0.0] * 4
    a = _analyze(_bundle(y))
    (f,) = [f for f in a.findings if f.kind == "leak"]
    assert f.pattern == "step"
    assert f.stairs >= 5
    assert f.stair_period_seconds == pytest.approx(20.0, abs=1.0)


def test_short_coarse_lifetime_is_judged_with_a_low_confidence():
    y = [0.0, 557.0, 1599.0, 2099.0, 4099.0, 6099.0, 8099.0, 0.0]
    a = _analyze(_bundle(y, dt=5.0))
    assert a.verdict == "leak"
    (f,) = [f for f in a.findings if f.kind == "leak"]
    assert f.confidence is not None and f.confidence <= 0.6
    assert (f.start - T0).total_seconds() == pytest.approx(13.75, abs=5.0)


def test_short_lifetime_that_stays_level_is_not_inconclusive():
    y = [0.0, 557.0, 3000.0, 3000.0, 3000.0, 3000.0, 0.0]
    a = _analyze(_bundle(y, dt=5.0))
    assert a.verdict == "no_leak"


def test_too_few_readings_say_what_to_do():
    fit = analyze_xy(np.arange(3.0), np.array([1.0, 2.0, 3.0]) * GiB)
    assert fit.classification == "too_short" and "-l 1" in fit.reason


def test_noise_free_quantized_sawtooth_with_a_rising_floor_does_not_crash():
    x = np.arange(200.0)
    y = (1000 + (x % 10) * 100 + (x // 10) * 64) * MiB
    analyze_xy(x, y)


def test_residual_worker_first_seen_after_its_parents_last_row():
    # compute-apps polled every second: the worker's first row comes one sample after the
    # trainer's last one (the overlap was missed), and it keeps 6 GiB until the end
    parent = _bundle([3000.0] * 20, series="process.used", pid=100)
    worker = [dict(r, pid=200, bytes=6 * GiB, time=r["time"] + timedelta(seconds=21), seq=r["seq"] + 21)
              for r in _bundle([6144.0] * 15, series="process.used", pid=200)]
    a = _analyze(parent + worker)
    res = [f for f in a.findings if f.kind == "residual_process"]
    assert res and res[0].pid == 200
    assert a.verdict == "leak"


# ----------------------------------------------------------------------------------------------
# real recordings, one file at a time

VIEW_FILES = ("nvidia-smi.csv", "nvidia-smi-l1.csv", "dmon.txt", "compute-apps.csv", "train.log")


def _views():
    recordings = {rec.folder.name: rec for rec in read_recordings(SAMPLES, "sample_logs")}
    for folder in sorted(p for p in SAMPLES.iterdir() if (p / "README.md").exists()):
        truth = _truth(folder)
        if truth.get("expected_verdict") != "leak" or "pattern" not in truth:
            continue
        for name in VIEW_FILES:
            if not (folder / name).exists():
                continue
            # a view that does not hold the evidence, by the rule the README states (evaluation.recordings)
            if view_expectation(recordings[folder.name], view_of(folder / name)[0])[0] is None:
                continue
            yield pytest.param(folder, name, truth, id=f"{folder.name}/{name}")


@pytest.mark.parametrize("folder,name,truth", list(_views()))
def test_each_view_of_a_recorded_leak_is_a_leak_with_its_pattern(folder, name, truth):
    _, a = pipeline.run([str(folder / name)], Options())
    leaks = [f for f in a.findings if f.kind == "leak"]
    assert a.verdict == "leak", a.verdict_reason
    assert leaks[0].pattern == truth["pattern"]
    onset = truth.get("onset_time")
    if onset and leaks[0].start is not None:
        t = datetime.fromisoformat(onset.replace("Z", "+00:00"))
        start = datetime.fromisoformat(truth["start"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(truth["end"].replace("Z", "+00:00"))
        allowed = max(5.0, 0.02 * (end - start).total_seconds())
        assert abs((leaks[0].start - t).total_seconds()) <= allowed


def _healthy_views():
    for folder in sorted(p for p in SAMPLES.iterdir() if (p / "README.md").exists()):
        if _truth(folder).get("expected_verdict") == "no_leak":
            for name in VIEW_FILES:
                if (folder / name).exists():
                    yield pytest.param(folder, name, id=f"{folder.name}/{name}")


@pytest.mark.parametrize("folder,name", list(_healthy_views()))
def test_each_view_of_a_healthy_recording_is_not_a_leak(folder, name):
    _, a = pipeline.run([str(folder / name)], Options())
    assert a.verdict != "leak", a.verdict_reason
    assert not [f for f in a.findings if f.kind == "leak" and f.series != "host.rss"]


# ----------------------------------------------------------------------------------------------
# what the report says agrees with the data

def _context(paths):
    bundle, a = pipeline.run([str(p) for p in paths], Options())
    return a, report.build_context(bundle, a, Options())


def _every_view():
    for folder in sorted(p for p in SAMPLES.iterdir() if (p / "README.md").exists()):
        if _truth(folder).get("expected_verdict"):
            yield pytest.param(folder, None, id=f"{folder.name}/all")
            for name in VIEW_FILES:
                if (folder / name).exists():
                    yield pytest.param(folder, name, id=f"{folder.name}/{name}")


def _recovered_falls(y: np.ndarray) -> int:
    """Falls of at least a quarter of the range that the lines climb back from by half: teeth, as a
    reader sees them on the chart (written apart from the detector)."""
    rng_ = float(y.max() - y.min())
    if rng_ <= 0:
        return 0
    n, i = 0, 0
    while i < y.size - 1:
        j = i + 1
        while j < y.size and y[j] <= y[j - 1]:   # one fall, over however many readings
            j += 1
        fall = float(y[i] - y[j - 1])
        if fall >= 0.25 * rng_ and j < y.size and float(y[j:].max()) - float(y[j - 1]) >= 0.5 * fall:
            n += 1
        i = j
    return n


@pytest.mark.parametrize("folder,name", list(_every_view()))
def test_legend_label_agrees_with_the_lines_drawn(folder, name):
    """The label a chart gives a series must fit the lines it draws, in every view of a recording:
    lines that fall and climb back again and again are a sawtooth (or a leak whose floor rises), never
    "flat" or "warmup plateau"; a leak's label is a growth's."""
    a, ctx = _context([folder / name] if name else [folder])
    drawn = 0
    for chart in ctx["charts"]:
        for s in chart["series"]:
            matches = [sr for sr in a.series if sr.series == s["series"] and sr.source == s["source"]
                       and sr.gpu == s["gpu"] and sr.pid == s["pid"] and sr.label == s["label"]]
            if len(matches) != 1 or not s["classification"] or len(matches[0].lifetimes) > 1:
                continue
            sr = matches[0]
            y = np.array([p[1] for p in sr.points], dtype=float)
            label = s["classification"]
            drawn += 1
            if sr.leak is not None:
                assert label.startswith(("linear growth", "staircase")), label
            elif _recovered_falls(y) >= 3:
                assert label.startswith("sawtooth"), f"{label}: {_recovered_falls(y)} falls in the lines"
    assert drawn or not ctx["charts"]


def test_rates_fit_the_job_and_an_oom_is_named_not_zero_seconds():
    _, ctx = _context([SAMPLES / "incident_linear_oom"])
    numbers = {n["label"]: n for n in ctx["verdict"]["numbers"]}
    assert not re.search(r"TiB/h|GiB/h", numbers["Growth rate"]["value"])
    assert numbers["Memory"]["value"] == "ran out (CUDA OOM)"
    assert "Time to exhaustion" not in numbers


def test_banner_is_never_green_beside_an_oom_kill():
    a, ctx = _context([SAMPLES / "host_oom_pin_memory"])
    assert a.verdict == "no_leak"
    assert ctx["verdict"]["tone"] != "ok"
    assert "OOM" in ctx["verdict"]["label"] or "killed" in ctx["verdict"]["label"].lower()
    assert "host memory ran out" in a.verdict_reason


def test_slowdown_with_steps_printed_out_of_order_warns_nothing():
    import warnings

    steps = [1, 2, 3, 5, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
    rows = [{"time": T0 + timedelta(seconds=i * (1 + i / 10)), "seq": i, "source": "train.log", "line": i + 1,
             "gpu": None, "pid": None, "series": "allocated", "bytes": (1000 + 100 * i) * MiB, "total_bytes": None,
             "step": st} for i, st in enumerate(steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _analyze(rows)


def test_untimed_step_log_with_a_restart_is_two_jobs():
    # a `print` step log without a clock: the job restarted (its step counter went back to 1) and
    # leaked only the second time; sorting by step would have interleaved the two runs
    first = [(st, 2000.0) for st in range(1, 41)]
    second = [(st, 2000.0 + (64.0 * (st - 10) if st > 10 else 0.0)) for st in range(1, 41)]
    rows = [{"time": None, "seq": i, "source": "train.log", "line": i + 1, "gpu": None, "pid": None,
             "series": "allocated", "bytes": int(v * MiB), "total_bytes": None, "step": st}
            for i, (st, v) in enumerate(first + second)]
    a = _analyze(rows)
    (sr,) = a.series
    assert [lt["classification"] for lt in sr.lifetimes] == ["flat", "linear_growth"]
    (f,) = [f for f in a.findings if f.kind == "leak"]
    assert f.lifetime_ended == "log_end" and f.start_index in (10, 11)


# ----------------------------------------------------------------------------------------------
# a job's wind-down: part of its memory freed in its last readings, before the process exits

def _ramp_then(tail: list[float]) -> np.ndarray:
    # a CUDA context and working set, then +32 MiB a reading for 20 readings (a leak), then the tail
    ramp = [1000.0 + 32 * k for k in range(20)]
    return np.array(ramp + tail) * MiB


def test_a_leak_whose_job_frees_part_of_its_memory_before_exiting_is_a_leak():
    # the shape of sample_logs/lightning_leak/nvidia-smi.csv: the last readings 170 MiB lower, level
    y = _ramp_then([1440.0] * 4)
    fit = analyze_xy(np.arange(y.size) * 0.5, y, discrete=False)
    assert fit.classification == "linear_growth", fit.reason
    assert fit.leak.rate == pytest.approx(64 * MiB, rel=0.1)   # per second: 32 MiB a half second


def test_a_flat_top_at_the_end_is_no_wind_down():
    # a warm-up that reached its level and stayed there is still judged on its whole plateau
    y = np.array([1000.0 + 300 * k for k in range(6)] + [2500.0] * 18) * MiB
    assert analyze_xy(np.arange(y.size) * 0.5, y, discrete=False).leak is None



def test_a_reading_off_the_loggers_cadence_is_not_a_slowing_down():
    # memory_stats() every 5 steps, and once more at the OOM step one step later: a steady 8 MiB a step
    x = np.array([5, 10, 15, 20, 25, 30, 35, 36.0])
    fit = analyze_xy(x, (1000 + 8 * x) * MiB)
    assert fit.classification == "linear_growth", fit.reason
