"""One real job printed the same memory readings in seven step-log styles at once, to TensorBoard and
from an NVML monitor thread (sample_logs/multi_style_leak, recorded on an H100): each file alone must
tell the same leak with the same figures — whatever the style, the reading is the same."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from conftest import SAMPLE_LOGS

from forensics import pipeline
from forensics.options import Options

FOLDER = SAMPLE_LOGS / "multi_style_leak"
ONSET_STEP, PER_STEP = 22, 48 * 2**20                      # from the recorder's side file
ONSET = datetime(2026, 12, 6, 6, 58, 51, 356000, tzinfo=timezone.utc)
STEP_LOGS = ["train.log", "tutorial.log", "fairseq_tail.log", "phases.log", "jsonl.log", "absl.log", "spine.log",
             "tb"]
TB_OTHER = "event without a memory scalar (the version record, other tags, images, graphs)"
TIMED = {"train.log", "fairseq_tail.log", "absl.log", "spine.log", "tb", "monitor.log"}


def _leak(name):
    bundle, an = pipeline.run([str(FOLDER / name)], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "leak", (name, an.verdict_reason)
    leaks = [f for f in an.findings if f.kind == "leak"]
    assert len(leaks) >= 1
    (info,) = bundle.inputs
    # every line of every style is read (TensorBoard's other records, loss and the version, are said)
    assert set(info.skip_reasons) <= {TB_OTHER}, (name, info.skip_reasons)
    return leaks[0]


@pytest.mark.parametrize("name", STEP_LOGS)
def test_each_style_alone_gives_the_same_leak(name):
    f = _leak(name)
    assert f.pattern == "linear"
    assert abs(f.rate_bytes_per_step - PER_STEP) <= 0.02 * PER_STEP, (name, f.rate_bytes_per_step)
    step = f.start_index if f.start_index is not None else (f.detail or {}).get("start_step")
    assert step is not None and abs(step - ONSET_STEP) <= 1, (name, step)
    if name in TIMED:
        assert abs((f.start - ONSET).total_seconds()) <= 1.0, (name, f.start)


def test_the_monitor_threads_year_less_clock_is_read():
    # `INFO 12-06 06:58:47 [monitor.py:57] GPU 0 memory: used=3181MiB total=81559MiB`: a level word
    # before a clock without a year
    f = _leak("monitor.log")
    assert f.start is not None and f.start.year == 2026
    assert abs((f.start - ONSET).total_seconds()) <= 5.0


def _monitor(tmp_path, values, name):
    # a vLLM-style monitor thread: `INFO mm-dd HH:MM:SS [file:line]` (whole seconds), two readings a second
    f = tmp_path / name
    f.write_text("".join(f"INFO 12-06 06:53:{10 + i // 2:02d} [monitor.py:57] GPU 0 memory: used={v}MiB total=81559MiB\n"
                         for i, v in enumerate(values)))
    bundle, _ = pipeline.run([str(f)], Options(tz="UTC", tz_from_user=True))
    (info,) = bundle.inputs
    return info


def test_readings_faster_than_the_clock_ticks_are_no_duplicates(tmp_path):
    # two values within one printed second show the sampling is finer than the stamp: the equal pairs
    # are readings too (a real 0.5 s monitor, bench/heldout2/monitor_infer_leak_sigkill)
    info = _monitor(tmp_path, [5229, 6673, 6673, 6673, 6673, 7025, 7377, 7377, 7377, 7377, 8145, 8145], "fast.log")
    assert info.skipped == 0 and info.records == 12


def test_every_line_twice_is_still_a_duplicate(tmp_path):
    # two loggers appending the same readings to one file: no second ever holds two values
    values = [v for v in (5229, 6673, 7025, 7377, 8145, 8833) for _ in range(2)]
    info = _monitor(tmp_path, values, "twice.log")
    assert info.skipped == 6 and info.records == 6
