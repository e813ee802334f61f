"""Hostile clocks and numbers in step logs (issue 45 D-T1 D-N1)."""
from __future__ import annotations

import pytest

from conftest import parse_file


def _steplog(year: str, n: int = 60) -> str:
    return "".join(f"{year}-12-31 23:59:{i:02d},000 INFO [step {i}] allocated: {100 * i} MB\n" for i in range(n))


@pytest.mark.parametrize("year", ["2300", "9999", "1969", "0001"])
def test_a_step_log_clock_outside_1970_2200_is_counted_as_skipped(tmp_path, year):
    """D-T1: the readings were analyzed on their steps as if the log had no clock, skipped 0, no note."""
    p = tmp_path / "train.log"
    p.write_text(_steplog(year))
    _, parsed = parse_file(p, expect="step-markers")
    assert parsed.skipped.counts == {"unreadable timestamp": 60}
    assert parsed.samples.height == 0


def test_only_the_lines_with_a_bad_clock_are_skipped(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(_steplog("2026", 50) + _steplog("2300", 10).replace("23:59:0", "23:59:5")
                 + "11/30/9999 04:00:00 INFO [step 70] allocated: 10 MB\n")
    _, parsed = parse_file(p, expect="step-markers")
    assert parsed.skipped.counts == {"unreadable timestamp": 11}
    assert parsed.samples.height == 50 and parsed.samples["time"].null_count() == 0
