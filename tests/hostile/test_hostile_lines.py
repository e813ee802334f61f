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
    assert module.name == parser
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


@pytest.mark.parametrize("n", [20, 200])
def test_many_small_untimed_files_are_placed_with_a_fixed_number_of_whole_frame_filters(tmp_path, monkeypatch, n):
    """D-L3: placing untimed sources filtered the whole frame once per source (1 000 one-line files
    40 s, 4 000 past 300 s); the count of filters must not grow with the number of files."""
    from datetime import datetime, timezone

    from forensics import pipeline
    from forensics.options import Options
    from forensics.timeline import untimed

    for i in range(n):
        (tmp_path / f"f{i:04d}.log").write_text(f"[step {i}] allocated: {i} MB\n")
    calls = []
    real = untimed.rows_where
    monkeypatch.setattr(untimed, "rows_where", lambda df, pred: calls.append(df.height) or real(df, pred))
    opts = Options(tz="UTC", start=datetime(2026, 11, 30, 4, tzinfo=timezone.utc), interval=1.0)
    bundle = pipeline.load([str(tmp_path)], opts)
    assert len(calls) <= 3
    assert all(i.anchor.startswith("placed from --start") for i in bundle.inputs)
    assert bundle.samples["time"].null_count() == 0 and bundle.samples.height == n


@pytest.mark.parametrize("streamed", [False, True])
def test_a_log_that_grows_while_it_is_read_is_read_to_its_size_at_open(tmp_path, monkeypatch, streamed):
    """D-L4: a log another process appends to was read until the writer paused (a fast writer: without
    end). It is read up to the size it had when it was opened, the line being written then to its end,
    and one line says how much was left."""
    from forensics import ingest, parsers
    from forensics.io import lines as io_lines
    from forensics.io.sources import Source
    from forensics.options import Options

    p = tmp_path / "train.log"
    text = train_log(60)
    p.write_text(text + "2026-11-30 04:01:00,000 INFO train: [step 60] allocated: 35")   # a line half written
    src = Source.open(p)
    with open(p, "a") as fh:
        fh.write("50.00 MB, cached: 4864.00 MB\n" + text * 50)
    if streamed:
        monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 1)
        monkeypatch.setattr(io_lines, "BATCH_BYTES", 1024)
    module, _ = parsers.claim(src.head())
    parsed, _ = ingest.read_source(src, module, Options())
    assert parsed.samples.filter(parsed.samples["series"] == "allocated")["bytes"].to_list()[-1] == 3550 << 20
    assert parsed.samples.height == 2 * 61
    assert src.problems == [f"{p}:62: file grew while it was read, its 61 lines up to the size it had when it "
                            f"was opened were read, the {_human(len(text) * 50)} written since were not, read it "
                            "again once the job has stopped writing to it"]


def _human(n: int) -> str:
    from forensics.units import human
    return human(n)


def test_report_of_a_folder_without_subfolders_sniffs_its_files_once(tmp_path, monkeypatch):
    """lines/line_1MiB_chars_4MB_bytes: after the report, the check for a folder of job folders sniffed
    the folder's files again (3 s more for a first line of a million characters)."""
    from forensics import cli
    from forensics.scan import parsers as scan_parsers

    for i in range(3):
        (tmp_path / f"f{i}.log").write_text(f"[step {i}] allocated: {i} MB\n")
    sniffed = []
    monkeypatch.setattr(scan_parsers, "claim_file", lambda src: sniffed.append(src.path) or (None, ""))
    cli._suggest_scan([str(tmp_path)])
    assert sniffed == []
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.log").write_text("[step 1] allocated: 1 MB\n")
    cli._suggest_scan([str(tmp_path)])
    assert sniffed
