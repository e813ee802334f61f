"""nvidia-smi dmon / pmon (forensics/parsers/nvsmi_dmon.py): columns by header name, `-` as null,
Date/Time columns, blank lines and re-printed headers, pmon per-process frame buffer."""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from conftest import parse_file, realworld

from forensics.options import Options

NAME = "nvidia-smi-dmon"
MiB = 1 << 20


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def parse_text(tmp_path, text: str, tz: str = "UTC"):
    path = tmp_path / "dmon.log"
    path.write_text(text)
    return parse_file(path, Options(tz=tz), expect=NAME)[1]


def test_dmon_01_four_gpus_fb_column():
    _, p = parse_file(realworld("nvsmi_dmon_01.txt"), expect=NAME)
    s = p.samples.sort("gpu")
    assert s["gpu"].to_list() == ["0", "1", "2", "3"]
    assert s["bytes"].to_list() == [11651 * MiB, 11653 * MiB, 11653 * MiB, 11660 * MiB]
    assert set(s["series"]) == {"memory.used"} and s["seq"].unique().to_list() == [1]
    assert p.clock == "none"


def test_dmon_02_date_time_columns_blank_line_between_samples():
    _, p = parse_file(realworld("nvsmi_dmon_02.txt"), Options(tz="Asia/Shanghai"), expect=NAME)
    d = p.samples.filter(pl.col("line") < 10).sort("line")
    assert d["bytes"].to_list() == [239 * MiB, 74 * MiB, 7 * MiB, 478 * MiB]
    assert d["time"].to_list() == [utc(2024, 1, 4, 5, 54, s) for s in (35, 36, 37, 38)]
    assert d["seq"].to_list() == [1, 2, 3, 4]
    assert p.clock == "wall-assumed"
    assert p.skipped.counts["blank line"] == 1


PMON = """# gpu        pid  type    sm   mem   enc   dec    fb   command
# Idx          #   C/G     %     %     %     %    MB   name
    0      12345     C    45    20     0     0  1024   python
    0      12346     G     -     -     -     -    12   Xorg
    1          -     -     -     -     -     -     -   -
# gpu        pid  type    sm   mem   enc   dec    fb   command
# Idx          #   C/G     %     %     %     %    MB   name
    0      12345     C    45    20     0     0  2048   python
    0      12346     G     -     -     -     -     -   Xorg
    1          -     -     -     -     -     -     -   -
"""


def test_pmon_frame_buffer_per_process_and_rows_of_dashes(tmp_path):
    p = parse_text(tmp_path, PMON)
    s = p.samples.sort("line")
    assert set(s["series"]) == {"process.used"}
    assert s.filter(pl.col("pid") == 12345)["bytes"].to_list() == [1024 * MiB, 2048 * MiB]
    assert s.filter(pl.col("pid") == 12346)["bytes"].to_list() == [12 * MiB, None]
    assert s.filter(pl.col("pid") == 12345)["label"].to_list() == ["python", "python"]
    assert s.filter(pl.col("pid") == 12345)["seq"].to_list() == [1, 2]
    assert p.skipped.counts == {"GPU without process (row of -)": 2, "repeated header": 2}


def test_pmon_utilization_mem_column_is_not_memory(tmp_path):
    text = ("# gpu        pid  type    sm   mem   enc   dec   command\n"
            "# Idx          #   C/G     %     %     %     %   name\n"
            "    0      12345     C    45    20     0     0   python\n")
    s = parse_text(tmp_path, text).samples
    assert s["pid"].to_list() == [12345] and s["bytes"].to_list() == [None]


def test_pmon_with_date_and_time(tmp_path):
    text = ("#Date       Time        gpu        pid  type    fb   command\n"
            "#YYYYMMDD   HH:MM:SS    Idx          #   C/G    MB   name\n"
            " 20240104   13:54:35      0      12345     C   300   python train.py\n")
    p = parse_text(tmp_path, text, tz="Europe/Berlin")
    r = p.samples.row(0, named=True)
    assert r["time"] == utc(2024, 1, 4, 12, 54, 35) and r["bytes"] == 300 * MiB and r["label"] == "python train.py"


def test_time_only_column_has_no_date(tmp_path):
    text = ("#Time        gpu    fb\n#HH:MM:SS    Idx    MB\n 13:54:35      0   100\n 13:54:36      0   101\n")
    p = parse_text(tmp_path, text)
    assert p.samples["time"].null_count() == 2 and p.samples["seq"].to_list() == [1, 2]
    assert p.clock == "none" and any("no date" in n for n in p.notes)


def test_dash_in_fb_is_null_and_garbage_is_skipped(tmp_path):
    text = ("# gpu   pwr    fb\n# Idx     W    MB\n    0   100     -\n    0   100   12x\n    0   100   300\n"
            "garbage here\n")
    p = parse_text(tmp_path, text)
    assert p.samples["bytes"].to_list() == [None, 300 * MiB]
    assert p.skipped.counts == {"row does not fit the columns": 1, "unrecognized line": 1}


def test_a_header_without_a_memory_column_beside_one_with_it(tmp_path):
    """Two dmon runs in one file, one without `fb` (`-s p`): its rows give no readings and the other's
    are read (the empty part once made the parser fail; found by bench/fuzz.py)."""
    p = tmp_path / "dmon.txt"
    p.write_text("# gpu   pwr  temp    sm\n# Idx     W     C     %\n    0   111    83    25\n"
                 "# gpu    fb  bar1\n# Idx    MB    MB\n    0 11651     2\n    1 11653     2\n")
    _, parsed = parse_file(p, expect="nvidia-smi-dmon")
    assert parsed.samples["bytes"].to_list() == [11651 << 20, 11653 << 20]
