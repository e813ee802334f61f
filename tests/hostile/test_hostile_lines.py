"""Hostile line shapes (issue 45 D-L1): a log that starts with many blank lines is still read."""
from __future__ import annotations

import pytest

from hostile_cases import leak_csv, train_log
from conftest import parse_file


@pytest.mark.parametrize("blank", [199, 200, 1000])
@pytest.mark.parametrize("name,text,parser", [
    ("nvidia-smi.csv", leak_csv(120), "nvidia-smi-csv"),
    ("train.log", train_log(), "step-markers"),
])
def test_a_log_after_many_blank_lines_is_read(tmp_path, blank, name, text, parser):
    p = tmp_path / name
    p.write_text("\n" * blank + text)
    module, parsed = parse_file(p)
    assert module.NAME == parser
    assert parsed.samples.height >= 60


def test_a_link_to_a_kernel_pseudo_file_is_refused_at_once(tmp_path):
    """D-L2: /proc/kmsg is a regular file that blocks on read: a link to it hung the run."""
    import os

    from forensics.io.sources import discover

    os.symlink("/proc/kmsg", tmp_path / "kmsg")
    os.symlink("/proc/self/status", tmp_path / "status")
    found = discover([str(tmp_path)])
    assert not found.files and len(found.problems) == 2
    assert all("kernel pseudo-file" in str(p) for p in found.problems)


def test_hidden_files_are_listed_not_silently_left_out(tmp_path):
    """D-S9: .nvidia-smi.csv and .logs/ of a job appeared nowhere."""
    from forensics.io.sources import discover

    (tmp_path / ".nvidia-smi.csv").write_text(leak_csv(120))
    (tmp_path / ".logs").mkdir()
    (tmp_path / "visible.log").write_text(train_log())
    found = discover([str(tmp_path)])
    assert [s for _, s in found.files] == [str(tmp_path / "visible.log")]
    hidden = sorted(shown for shown, why in found.ignored if why.startswith("hidden"))
    assert hidden == [str(tmp_path / ".logs"), str(tmp_path / ".nvidia-smi.csv")]


def test_a_series_whose_readings_all_share_one_step_is_drawn():
    """Found by `bench/fuzz.py --hostile bombs` (gz_members_8MiB_x2): 335,544 readings of `[step 1]` made
    the chart's thinning (tsdownsample, bins over x) panic: an x without range has no bins."""
    from forensics import report as rep
    from forensics.detect import analyze
    from forensics.model import Bundle, samples_frame
    import polars as pl

    n = 20_000   # (at 5,000 readings it did not panic)
    df = samples_frame(pl.DataFrame({
        "seq": range(n), "line": range(1, n + 1), "source": ["train.log"] * n, "series": ["allocated"] * n,
        "bytes": [1 << 20] * n, "step": [1] * n}))
    an = analyze(Bundle(samples=df))
    (s,) = an.series
    assert 0 < len(s.points) <= 2000
    assert s.points[0][0] == 1
    rep.render_html(rep.build_context(Bundle(samples=df), an, None))
