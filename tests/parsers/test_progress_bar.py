"""A progress bar (tqdm) in a log file: every refresh is written after a `\\r` on one physical line, so a
step log whose only memory figure is a bar's postfix (`mem=2.29G`) is one line of many readings. Each
refresh is a reading, its counter the bar's `n/total` (within the epoch the bar names); the form recurs
across refreshes. The recorded sample is held-out set 7's tqdm_warmup_exit (a warm-up, then flat)."""
from __future__ import annotations

from pathlib import Path

from conftest import parse_file

from forensics import pipeline
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.steplog import markers

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
