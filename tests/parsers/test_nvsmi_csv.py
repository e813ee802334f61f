"""nvidia-smi --query-gpu CSV (forensics/parsers/nvsmi_csv.py): the real snippets, and the variants
of docs/formats.md §1.1 inline (header or not, units or not, timestamp or not, repeated and changing
headers, driver error lines, several GPUs interleaved, placeholders)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
import pytest
from conftest import parse_file, realworld

from forensics.options import Options
from forensics.parsers.nvsmi import csvcells

NAME = "nvidia-smi-csv"
MiB = 1 << 20


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def parse_text(tmp_path, text: str, tz: str = "UTC", expect: str = NAME):
    path = tmp_path / "gpu.csv"
    path.write_text(text)
    return parse_file(path, Options(tz=tz), expect=expect)[1]


def one(df: pl.DataFrame, **eq) -> dict:
    for k, v in eq.items():
        df = df.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
    assert df.height == 1, df
    return df.row(0, named=True)


# -- real snippets ------------------------------------------------------------------------------

def test_csv_01_two_gpus_told_apart_by_name_prompt_line_skipped():
    _, p = parse_file(realworld("nvsmi_csv_01.txt"), expect=NAME)
    s = p.samples
    assert s.height == 2 and set(s["series"]) == {"memory.used"}
    gtx1080 = one(s, gpu="GeForce GTX 1080 Ti")
    assert gtx1080["bytes"] == 2856 * MiB and gtx1080["total_bytes"] == 11175 * MiB and gtx1080["line"] == 4
    assert one(s, gpu="GeForce GTX 1060 6GB")["bytes"] == 4 * MiB
    assert p.skipped.counts.get("shell prompt") == 1  # the prompt line that swallowed a header
    assert p.clock == "none" and s["time"].null_count() == 2
    assert s["seq"].to_list() == [1, 1]


def test_csv_02_headerless_omniopt_keyed_by_bus_id():
    _, p = parse_file(realworld("nvsmi_csv_02.txt"), expect=NAME)
    s = p.samples
    assert s.height == 8
    assert set(s["gpu"]) == {"00000000:3B:00.0", "00000000:8B:00.0", "00000000:0B:00.0"}
    r = one(s, gpu="00000000:8B:00.0", line=6)
    assert r["bytes"] == 38803 * MiB and r["total_bytes"] == 40960 * MiB
    assert r["time"] == utc(2024, 6, 1, 11, 27, 15, 309000)
    # the third sample lacks 0B: 3B is still keyed right, never by position
    assert one(s, line=10)["gpu"] == "00000000:3B:00.0" and one(s, line=10)["bytes"] == 39427 * MiB
    assert s.sort("line")["seq"].to_list() == [1, 1, 1, 2, 2, 2, 3, 3]
    assert p.clock == "wall-assumed"
    assert any("OmniOpt" in n for n in p.notes)
    assert {g["bus_id"] for g in p.meta["gpus"]} == set(s["gpu"])


def test_csv_02_local_time_is_localized():
    _, p = parse_file(realworld("nvsmi_csv_02.txt"), Options(tz="Europe/Berlin"), expect=NAME)
    assert one(p.samples, line=6)["time"] == utc(2024, 6, 1, 9, 27, 15, 309000)


def test_csv_04_na_in_other_column_does_not_matter():
    _, p = parse_file(realworld("nvsmi_csv_04.txt"), expect=NAME)
    r = one(p.samples)
    assert r["bytes"] == 1048 * MiB and r["total_bytes"] == 8188 * MiB and r["gpu"] is None


def test_csv_05_metaflow_prefix_stripped():
    _, p = parse_file(realworld("nvsmi_csv_05.txt"), expect=NAME)
    r = one(p.samples)
    assert (r["gpu"], r["bytes"], r["total_bytes"], r["line"]) == ("0", 2 * MiB, 16160 * MiB, 3)
    assert p.meta["gpus"][0]["name"] == "Tesla V100-SXM2-16GB"


def test_csv_07_sections_gpu_row_apps_rows_and_driver_error():
    _, p = parse_file(realworld("nvsmi_csv_07.txt"), expect=NAME)
    gpu = one(p.samples, series="memory.used")
    assert (gpu["gpu"], gpu["bytes"], gpu["total_bytes"]) == ("0", 327 * MiB, 2002 * MiB)
    assert p.meta["gpu_map"] == {"GPU-8dd637a2-1795-5579-b092-2eda825636d2": "0"}
    procs = p.samples.filter(pl.col("series") == "process.used")
    assert one(procs, pid=17676)["bytes"] == 15846 * MiB
    assert one(procs, pid=23492)["bytes"] is None  # Windows WDDM [N/A]: null, never 0
    ev = one(p.events)
    assert ev["kind"] == "driver_error" and ev["line"] == 7 and ev["gpu"] == "00000000:01:00.0"
    assert "fallen off the bus" in json.loads(ev["detail"])["message"]
    assert p.skipped.counts["driver error"] == 1 and p.skipped.counts["separator"] == 2


def test_csv_08_header_once_then_rows_and_a_nounits_row_under_its_command():
    _, p = parse_file(realworld("nvsmi_csv_08.txt"), expect=NAME)
    s = p.samples.sort("line")
    assert s["bytes"].to_list() == [2163 * MiB] * 4
    assert s["time"].to_list()[:3] == [utc(2026, 8, 17, 22, 35, 54, 844000), utc(2026, 8, 17, 22, 35, 55, 848000),
                                       utc(2026, 8, 17, 22, 35, 56, 848000)]
    # `44.94, 2163` under `--query-gpu=power.draw,memory.used --format=csv,noheader,nounits`
    assert one(s, line=8)["time"] is None
    assert p.skipped.counts["shell prompt"] == 2


def test_dmon_02_csv_section_read_by_the_csv_parser():
    # the dmon parser claims the file; its appended CSV section is handed to this parser
    _, p = parse_file(realworld("nvsmi_dmon_02.txt"), expect="nvidia-smi-dmon")
    csv = p.samples.filter(pl.col("line") >= 12).sort("line")
    assert csv["bytes"].to_list() == [21 * MiB, 7 * MiB, 7 * MiB, 7 * MiB, 21 * MiB]
    assert csv["total_bytes"].unique().to_list() == [23028 * MiB]


# -- inline variants ----------------------------------------------------------------------------

def test_seed_style_no_timestamp_interleaved_gpus_numbered_by_sample(tmp_path):
    text = ("index, memory.used [MiB], memory.total [MiB]\n"
            "0, 100 MiB, 16160 MiB\n1, 200 MiB, 16160 MiB\n"
            "1, 210 MiB, 16160 MiB\n0, 110 MiB, 16160 MiB\n"
            "0, 120 MiB, 16160 MiB\n1, 220 MiB, 16160 MiB\n")
    p = parse_text(tmp_path, text)
    s = p.samples.sort("line")
    assert s["gpu"].to_list() == ["0", "1", "1", "0", "0", "1"]
    assert s["seq"].to_list() == [1, 1, 2, 2, 3, 3]
    assert s.filter(pl.col("gpu") == "1")["bytes"].to_list() == [200 * MiB, 210 * MiB, 220 * MiB]
    assert p.clock == "none" and s["time"].null_count() == 6
    assert s["total_bytes"].unique().to_list() == [16160 * MiB]


def test_nounits_takes_units_from_header_brackets(tmp_path):
    p = parse_text(tmp_path, "index, memory.used [MiB], memory.total [GiB]\n0, 1500, 16\n")
    r = one(p.samples)
    assert r["bytes"] == 1500 * MiB and r["total_bytes"] == 16 << 30


def test_nounits_without_brackets_is_mib_for_memory(tmp_path):
    p = parse_text(tmp_path, "$ nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits\n3, 42\n")
    r = one(p.samples)
    assert (r["gpu"], r["bytes"]) == ("3", 42 * MiB)


def test_timestamp_and_aliases(tmp_path):
    text = ("timestamp, gpu_name, gpu_bus_id, memory.used [MiB]\n"
            "2024/06/01 11:27:05.177, NVIDIA A100, 0000:3b:00.0, 10 MiB\n")
    p = parse_text(tmp_path, text, tz="America/New_York")
    r = one(p.samples)
    assert r["gpu"] == "00000000:3B:00.0"  # aliases gpu_bus_id -> pci.bus_id; bus id normalised
    assert r["time"] == utc(2024, 6, 1, 15, 27, 5, 177000)
    assert p.clock == "wall-assumed"
    assert p.meta["gpus"][0]["name"] == "NVIDIA A100"


def test_repeated_headers_blank_lines_separators_counted(tmp_path):
    header = "timestamp, index, memory.used [MiB]\n"
    text = (header + "2024/01/01 00:00:00.000, 0, 1 MiB\n\n---- run 2 ----\n" + header
            + "2024/01/01 00:00:01.000, 0, 2 MiB\n" + header + "2024/01/01 00:00:02.000, 0, 3 MiB\n")
    p = parse_text(tmp_path, text)
    assert p.samples["bytes"].to_list() == [1 * MiB, 2 * MiB, 3 * MiB]
    assert p.skipped.counts == {"repeated header": 2, "blank line": 1, "separator": 1}


def test_header_change_mid_file_switches_the_column_map(tmp_path):
    text = ("index, memory.used [MiB], memory.total [MiB]\n0, 5 MiB, 100 MiB\n"
            "timestamp, uuid, memory.total [MiB], memory.free [MiB], memory.used [MiB], index\n"
            "2024/01/01 00:00:00.000, GPU-11111111-2222-3333-4444-555555555555, 100 MiB, 90 MiB, 7 MiB, 0\n")
    p = parse_text(tmp_path, text)
    s = p.samples.sort("line")
    assert s["bytes"].to_list() == [5 * MiB, 7 * MiB]
    assert s["total_bytes"].to_list() == [100 * MiB, 100 * MiB]
    assert s["gpu"].to_list() == ["0", "0"]  # index preferred over uuid
    assert p.meta["gpu_map"] == {"GPU-11111111-2222-3333-4444-555555555555": "0"}
    assert p.skipped.counts["header changed (other columns than the header before)"] == 1


def test_driver_error_lines_are_events_timed_after_the_previous_row(tmp_path):
    text = ("timestamp, index, memory.used [MiB]\n"
            "2024/01/01 00:00:00.000, 0, 1 MiB\n"
            "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.\n"
            "No devices were found\n")
    p = parse_text(tmp_path, text)
    assert p.samples.height == 1
    ev = p.events.sort("line")
    assert ev["kind"].to_list() == ["driver_error"] * 3
    assert ev["gpu"].to_list() == ["00000000:3B:00.0", None, None]
    assert ev["time"].to_list() == [utc(2024, 1, 1)] * 3
    assert json.loads(ev["detail"][0])["reason"] == "Unknown Error"
    assert p.skipped.counts == {"driver error": 3}


def test_file_of_only_driver_errors_is_claimed(tmp_path):
    p = parse_text(tmp_path, "No devices were found\nNo devices were found\n")
    assert p.events.height == 2 and p.samples.height == 0


@pytest.mark.parametrize("ph", ["[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]"])
def test_placeholders_are_null_never_zero(tmp_path, ph):
    text = f"index, name, memory.used [MiB], memory.total [MiB]\n0, NVIDIA GB10, {ph}, {ph}\n1, NVIDIA X, 5 MiB, {ph}\n"
    p = parse_text(tmp_path, text)
    assert one(p.samples, gpu="0")["bytes"] is None and one(p.samples, gpu="0")["total_bytes"] is None
    assert one(p.samples, gpu="1")["bytes"] == 5 * MiB
    assert 0 not in p.samples["bytes"].drop_nulls().to_list()


def test_unified_memory_gpu_says_so(tmp_path):
    p = parse_text(tmp_path, "name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\nNVIDIA GB10, 0 %, [N/A], [N/A]\n")
    assert p.samples["bytes"].to_list() == [None]
    assert any("placeholder" in n for n in p.notes)


def test_garbage_never_becomes_a_number(tmp_path):
    text = ("index, memory.used [MiB]\n0, 12a MiB\n0, inf MiB\n0, -5 MiB\n0, 1e3\n0, 7 MiB\n0, , \n")
    p = parse_text(tmp_path, text)
    assert p.samples["bytes"].to_list() == [7 * MiB]
    assert p.skipped.counts["row does not fit the columns"] == 5


def test_mixed_gpus_unordered_keyed_on_uuid_not_position(tmp_path):
    a, b = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"
    text = (f"uuid, memory.used [MiB]\n{a}, 1 MiB\n{b}, 2 MiB\n{b}, 3 MiB\n{a}, 4 MiB\n")
    s = parse_text(tmp_path, text).samples
    assert s.filter(pl.col("gpu") == a)["bytes"].to_list() == [1 * MiB, 4 * MiB]
    assert s.filter(pl.col("gpu") == b)["bytes"].to_list() == [2 * MiB, 3 * MiB]


def test_headerless_seed_shape_infers_used_and_total(tmp_path):
    p = parse_text(tmp_path, "0, 1234 MiB, 16160 MiB\n1, 10 MiB, 16160 MiB\n0, 1300 MiB, 16160 MiB\n")
    s = p.samples.sort("line")
    assert s["bytes"].to_list() == [1234 * MiB, 10 * MiB, 1300 * MiB]
    assert s["total_bytes"].unique().to_list() == [16160 * MiB]
    assert any("assumed" in n or "read as" in n for n in p.notes)


def test_headerless_three_mib_columns_of_unknown_order_emit_no_memory(tmp_path):
    text = "0, 40960 MiB, 100 MiB, 40000 MiB\n0, 40960 MiB, 300 MiB, 39800 MiB\n"
    p = parse_text(tmp_path, text)
    assert p.samples.height == 0
    assert any("cannot tell" in n for n in p.notes)


def test_memory_free_only(tmp_path):
    """memory.free without memory.used is read as it is, and its fall below the GPU's highest beside it."""
    p = parse_text(tmp_path, "index, memory.free [MiB]\n0, 500 MiB\n0, 300 MiB\n")
    assert p.samples.filter(pl.col("series") == "memory.free")["bytes"].to_list() == [500 * 2**20, 300 * 2**20]
    assert p.samples.filter(pl.col("series") == "free.fall")["bytes"].to_list() == [0, 200 * 2**20]
    assert any("free.fall" in n for n in p.notes)


def test_header_only_file_gives_nothing_and_no_error(tmp_path):
    p = parse_text(tmp_path, "index, memory.used [MiB]\n")
    assert p.samples.height == 0 and p.skipped.total == 0


def test_date_lines_of_a_shell_loop_give_an_untimed_csv_its_clock(tmp_path):
    text = ("Mon Jun  3 11:27:05 UTC 2024\n0, 100 MiB, 16160 MiB\n"
            "Mon Jun  3 11:28:05 UTC 2024\n0, 150 MiB, 16160 MiB\n")
    p = parse_text(tmp_path, text, tz="Asia/Tokyo")
    assert p.samples.sort("line")["time"].to_list() == [utc(2024, 6, 3, 11, 27, 5), utc(2024, 6, 3, 11, 28, 5)]
    assert p.clock == "wall-assumed" and "date line" not in p.skipped.counts


def test_parse_lines_directly_matches_parse(tmp_path):
    # the parser is column-wise; a chunk boundary must not change anything
    text = "index, memory.used [MiB]\n" + "".join(f"{i % 2}, {i} MiB\n" for i in range(50))
    path = tmp_path / "g.csv"
    path.write_text(text)
    whole = parse_file(path, expect=NAME)[1].samples
    old = csvcells.CHUNK_ROWS
    try:
        csvcells.CHUNK_ROWS = 7
        chunked = parse_file(path, expect=NAME)[1].samples
    finally:
        csvcells.CHUNK_ROWS = old
    assert whole.equals(chunked)


def test_compute_apps_section_after_the_gpu_rows_is_read_too(tmp_path):
    text = ("index, uuid, memory.used [MiB]\n0, GPU-aaaaaaaa-0000-0000-0000-000000000000, 5 MiB\n\n"
            "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            "GPU-aaaaaaaa-0000-0000-0000-000000000000, 123, python, 4 MiB\n")
    p = parse_text(tmp_path, text)
    assert one(p.samples, series="memory.used")["bytes"] == 5 * MiB
    proc = one(p.samples, series="process.used")
    assert (proc["pid"], proc["bytes"], proc["label"]) == (123, 4 * MiB, "python")
    assert p.skipped.counts == {"blank line": 1}


def test_plain_stamps_match_strptime():
    stamps = ["2026/10/01 00:00:00.473", "2024/02/29 23:59:59.999", "2026/02/29 00:00:00.000", "2026/13/01 00:00:00.000",
              "2026/10/01 24:00:00.000", "2026/10/01 00:60:00.000", "1969/12/31 23:59:59.999"]
    for extra in ([], ["2026/10/01 00:00:60.000"], [" 2026/10/01 00:00:01.5"], ["2026/10/01 00:00:01"], ["garbage"]):
        s = pl.Series("t", stamps + extra)
        want = s.str.strip_chars().str.strptime(pl.Datetime("us"), csvcells.TS_FORMAT, strict=False)
        assert csvcells.parse_stamps(s).equals(want), extra
