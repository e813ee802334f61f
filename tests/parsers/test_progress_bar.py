"""A progress bar (tqdm) in a log file: every refresh is written after a `\\r` on one physical line, so a
step log whose only memory figure is a bar's postfix (`mem=2.29G`) is one line of many readings. Each
refresh is a reading, its counter the bar's `n/total` (within the epoch the bar names); the form recurs
across refreshes. The recorded sample is held-out set 7's tqdm_warmup_exit (a warm-up, then flat)."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import parse_file

from forensics import pipeline
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.steplog import markers
from forensics.parsers.steplog.reader import extract_all

SAMPLE = Path(__file__).parent.parent / "samples" / "step-markers" / "tqdm_bar_recorded.txt"
BAR = "\rEpoch {e}: {p:3d}%|##        | {n}/{t} [00:0{n}<00:09,  7.51it/s, loss=0.048, mem={g:.2f}G]"


def _bar_file(tmp_path, epochs=1, total=8, grow=0.0):
    text = "training\n" + "".join(BAR.format(e=e, p=100 * n // total, n=n, t=total, g=1.0 + grow * ((e - 1) * total + n))
                                  for e in range(1, epochs + 1) for n in range(1, total + 1)) + "\n"
    p = tmp_path / "train.log"
    p.write_text(text)
    return p


def test_one_line_of_refreshes_is_claimed_and_read_per_refresh(tmp_path):
    p = _bar_file(tmp_path, epochs=2)
    src = Source.open(p, p.name)
    assert markers.sniff(src.head())
    parsed = markers.parse(src, Options(tz="UTC"))
    s = parsed.samples.sort("seq")
    assert s.height == 16 and s["line"].unique().to_list() == [2]
    # the bar's `n/total`, counted on across the epochs it names
    assert s["step"].to_list() == list(range(1, 17))


def test_a_bar_that_keeps_rising_is_a_leak_and_a_level_one_is_not(tmp_path):
    _, an = pipeline.run([str(_bar_file(tmp_path, total=40, grow=0.1))], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "leak"
    flat = tmp_path / "flat"
    flat.mkdir()
    _, an = pipeline.run([str(_bar_file(flat, total=40))], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "no_leak"


def test_the_recorded_bar_is_a_warmup_not_a_leak():
    _, parsed = parse_file(SAMPLE, expect="step-markers")
    assert parsed.samples.height == 90 and parsed.samples["step"].max() == 90
    _, an = pipeline.run([str(SAMPLE)], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "no_leak" and "warmup plateau" in an.verdict_reason


SAMPLES = Path(__file__).parent.parent / "samples" / "step-markers"


def test_an_epoch_counted_from_zero_counts_its_steps_from_one(tmp_path):
    """Lightning's bar names its epochs from 0 (`Epoch 0: …| 5/8 [`): step 5 of epoch 0 is step 5, not -3
    (held-out set 10's crash loop said "since step -95")."""
    p = tmp_path / "train.log"
    # (the bar's fill grows, so the refreshes of one form have several shapes: epoch 1's may share none with
    # epoch 0's, and the form's first epoch still says where its epochs start)
    bar = "\rEpoch {e}: {p:3d}%|{fill:<8}| {n}/8 [00:0{n}<00:09,  7.51it/s, loss=0.048, mem=1.00G]"
    p.write_text("training\n" + "".join(bar.format(e=e, p=100 * n // 8, n=n, fill="#" * (n if e else 1))
                                        for e in (0, 1) for n in range(1, 9)) + "\n")
    _, parsed = parse_file(p, expect="step-markers")
    assert parsed.samples.sort("seq")["step"].to_list() == list(range(1, 17))


def test_a_table_rows_bar_counts_the_batches_of_its_epoch_column():
    """ultralytics' bar under its `Epoch GPU_mem …` header, refreshed with `\\r` (held-out set 11: unread, then
    every refresh on step 1 of epoch `1/8`): a reading a batch, and the leak from batch 15 found."""
    sample = SAMPLES / "style_ultralytics_bar_heldout11.txt"
    _, parsed = parse_file(sample, expect="step-markers")
    assert parsed.samples.sort("seq")["step"].to_list() == list(range(1, 31))
    _, an = pipeline.run([str(sample)], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "leak"


def test_keras_bar_lines_count_on_under_their_epoch_line():
    """Keras' `12/50 ━━━ … - gpu_alloc_mb: …` lines restart at 1 each epoch under an `Epoch e/E` line: epoch 2's
    first step is 51 (two lines run into the script's own print: test_a_print_run_on_at_the_end_of_a_keras_bar_line_is_not_the_bars)."""
    _, parsed = parse_file(SAMPLES / "style_keras_progbar_heldout11.txt", expect="step-markers")
    steps = parsed.samples.filter(series="allocated").sort("seq")["step"].to_list()
    assert steps[-6:] == [49, 50, 51, 52, 53, 54] and steps[:3] == [1, 2, 3]


def test_a_crash_loop_of_keras_runs_is_three_leaking_jobs():
    """Held-out set 11's crash loop: three runs' Keras bars in one file without a clock (each 1..15 of its first
    epoch): `no_leak`, a sawtooth, while the bar's counter was unread; each run is a job, each a leak."""
    sample = SAMPLES / "keras_crashloop_heldout11.txt"
    _, parsed = parse_file(sample, expect="step-markers")
    assert parsed.samples.filter(series="allocated").sort("seq")["step"].to_list() == list(range(1, 16)) * 3
    _, an = pipeline.run([str(sample)], Options(tz="UTC", tz_from_user=True))
    assert an.verdict == "leak"
    assert sum(f.kind == "leak" for f in an.findings) == 3


def _keras_lines() -> list[str]:
    return (SAMPLES / "style_keras_progbar_heldout11.txt").read_text().splitlines()[1:]


def _bar_readings(lines: list[str]):
    frame = pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines}, schema={"line": pl.Int64, "text": pl.String})
    return extract_all(frame, "UTC").samples.sort("line", "series").select("line", "series", "bytes", "step")


@pytest.mark.parametrize("tail", ["saved best-model snapshot at step 20 (1 kept)",   # (the recording's)
                                  "   saved best-model snapshot at step 20 (1 kept)",  # (after Progbar's padding)
                                  "freed 512 MiB of cache at step 20"])
def test_a_print_run_on_at_the_end_of_a_keras_bar_line_is_not_the_bars(tail):
    """Keras' Progbar writes its newline before each update, so the script's next print lands at the end of the
    bar's line (held-out set 11, `… gpu_reserved_mb: 2898.0000saved best-model snapshot at step 20 (1 kept)`): the
    bar's `19/50` is the line's counter, not the glued `step 20`, and the glued text adds no reading."""
    lines = _keras_lines()
    at = next(i for i, x in enumerate(lines) if "saved best-model snapshot at step 20" in x)
    bar = lines[at][:lines[at].index("saved")]
    plain = _bar_readings(lines[at - 3:at] + [bar] + lines[at + 1:at + 3])
    glued = _bar_readings(lines[at - 3:at] + [bar + tail] + lines[at + 1:at + 3])
    assert glued.equals(plain)
    assert glued.filter(line=4)["step"].to_list() == [19, 19]


def test_the_keras_recordings_steps_rise_through_its_glued_lines():
    """The whole recorded sample: each reading's step one above the one before (epoch 1's 1..50, epoch 2's 51..54),
    its two glued lines included."""
    _, parsed = parse_file(SAMPLES / "style_keras_progbar_heldout11.txt", expect="step-markers")
    for series in ("allocated", "reserved"):
        assert parsed.samples.filter(series=series).sort("seq")["step"].to_list() == list(range(1, 55))
