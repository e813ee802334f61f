"""nvidia-smi --query-compute-apps CSV (forensics/parsers/nvsmi_apps.py): real snippets, header-only
files, looped logs where a process disappears, one pid on several GPUs, placeholders."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
from conftest import parse_file, realworld

from forensics.options import Options

NAME = "nvidia-smi-apps"
MiB = 1 << 20
U1 = "GPU-a44622e3-2296-6285-0a86-84d0f6c67900"
U2 = "GPU-28780eb0-24d5-1f13-59b8-ae5c23617a72"


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def parse_text(tmp_path, text: str, tz: str = "UTC"):
    path = tmp_path / "apps.csv"
    path.write_text(text)
    return parse_file(path, Options(tz=tz), expect=NAME)[1]


def test_apps_01_header_says_process_name_rows_without_memory():
    _, p = parse_file(realworld("nvsmi_apps_01.txt"), expect=NAME)
    s = p.samples.sort("line")
    assert s.height == 3 and set(s["series"]) == {"process.used"}
    assert s["gpu"].to_list() == ["GPU-d0180485-9584-433c-6782-c335d5df2cb3",
                                  "GPU-777ead31-954e-837f-590f-6c4974d8e571",
                                  "GPU-777ead31-954e-837f-590f-6c4974d8e571"]
    assert s["label"].to_list() == ["vgpu"] * 3
    assert s["bytes"].null_count() == 3  # not queried: null, never 0


def test_apps_02_timestamped_rows_and_a_nounits_row():
    _, p = parse_file(realworld("nvsmi_apps_02.txt"), expect=NAME)
    s = p.samples.sort("line")
    assert s["pid"].to_list() == [1106871, 1106871]
    assert s["bytes"].to_list() == [23342 * MiB, 23342 * MiB]
    assert s["label"].to_list() == ["/app/llama-server"] * 2
    assert s["time"].to_list() == [utc(2025, 9, 7, 22, 33, 21, 481000), utc(2025, 9, 7, 22, 37, 17, 908000)]
    assert p.clock == "wall-assumed"
    assert p.events.height == 0  # the pid never disappears


def test_header_only_file_is_no_processes_not_an_error(tmp_path):
    p = parse_text(tmp_path, "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n")
    assert p.samples.height == 0 and p.events.height == 0 and p.skipped.total == 0
    assert p.meta["empty_blocks"][0]["count"] == 1


def test_one_pid_on_several_gpus_not_found_name_and_used_memory_variant(tmp_path):
    text = ("pid, process_name, used_memory [MiB], gpu_uuid\n"
            f"1328667, /usr/local/bin/python3.10, 130004 MiB, {U1}\n"
            f"1328667, /usr/local/bin/python3.10, 1000 MiB, {U2}\n"
            f"1758887, [Not Found], 58060 MiB, {U2}\n")
    p = parse_text(tmp_path, text)
    s = p.samples.sort("line")
    assert s["gpu"].to_list() == [U1, U2, U2]
    assert s["pid"].to_list() == [1328667, 1328667, 1758887]
    assert s["bytes"].to_list() == [130004 * MiB, 1000 * MiB, 58060 * MiB]
    assert s["label"].to_list() == ["/usr/local/bin/python3.10"] * 2 + [None]


def test_windows_na_used_memory_is_null(tmp_path):
    text = ("pid, process_name, used_gpu_memory [MiB]\n"
            "23492, C:\\Windows\\SystemApps\\x\\TextInputHost.exe, [N/A]\n17676, E:\\llama\\llama-server.exe, 15846 MiB\n")
    s = parse_text(tmp_path, text).samples.sort("line")
    assert s["bytes"].to_list() == [None, 15846 * MiB]
    assert s["label"][0] == "C:\\Windows\\SystemApps\\x\\TextInputHost.exe"


def test_looped_log_pid_disappears_at_a_header_only_block(tmp_path):
    header = "timestamp, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]\n"
    text = (header + "2024/05/01 10:00:00.100, 00000000:3B:00.0, 111, python, 100 MiB\n"
            "2024/05/01 10:00:00.105, 00000000:3B:00.0, 222, worker, 50 MiB\n"
            + header + "2024/05/01 10:00:10.100, 00000000:3B:00.0, 111, python, 200 MiB\n"
            "2024/05/01 10:00:10.104, 00000000:3B:00.0, 222, worker, 50 MiB\n"
            + header + "2024/05/01 10:00:20.100, 00000000:3B:00.0, 222, worker, 50 MiB\n"
            + header + header
            + header + "2024/05/01 10:00:50.100, 00000000:3B:00.0, 333, python, 10 MiB\n")
    p = parse_text(tmp_path, text)
    s = p.samples
    assert s.filter(pl.col("pid") == 111)["bytes"].to_list() == [100 * MiB, 200 * MiB]
    assert s.filter(pl.col("pid") == 111)["seq"].to_list() == [1, 2]
    assert s["gpu"].unique().to_list() == ["00000000:3B:00.0"]
    gone = p.events.filter(pl.col("kind") == "process_gone").sort("pid")
    assert gone["pid"].to_list() == [111, 222]
    # 111 is absent from the block of 10:00:20; 222 from the header-only blocks, bounded by 10:00:50
    assert gone["time"].to_list() == [utc(2024, 5, 1, 10, 0, 20, 100000), utc(2024, 5, 1, 10, 0, 50, 100000)]
    d222 = json.loads(gone["detail"][1])
    assert d222["last_seen"].startswith("2024-05-01T10:00:20.1") and d222["last_seen_line"] == 8
    assert gone["line"][1] == 9  # the first header-only block
    assert p.meta["empty_blocks"] == [{"first_line": 9, "last_line": 10, "count": 2,
                                       "after": "2024-05-01T10:00:20.100000Z", "before": "2024-05-01T10:00:50.100000Z"}]
    assert p.meta["blocks"]["count"] == 6
    assert p.skipped.counts["repeated header"] == 5
    # 333 is still there when the log ends: nothing is said about it
    assert 333 not in gone["pid"].to_list()


def test_loop_with_one_header_splits_blocks_on_time_gaps(tmp_path):
    text = ("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            f"2024/05/01 10:00:00.100, {U1}, 1, a, 1 MiB\n"
            f"2024/05/01 10:00:00.101, {U1}, 2, b, 1 MiB\n"
            f"2024/05/01 10:00:01.100, {U1}, 1, a, 2 MiB\n")
    p = parse_text(tmp_path, text)
    gone = p.events.filter(pl.col("kind") == "process_gone")
    assert gone["pid"].to_list() == [2] and gone["time"].to_list() == [utc(2024, 5, 1, 10, 0, 1, 100000)]
    assert p.samples.sort("line")["seq"].to_list() == [1, 1, 2]


def test_headerless_rows_with_uuid(tmp_path):
    text = f"{U1}, 1328667, /usr/local/bin/python3.10, 130004 MiB\n{U2}, 1758887, [Not Found], 58060 MiB\n"
    s = parse_text(tmp_path, text).samples.sort("line")
    assert s["pid"].to_list() == [1328667, 1758887]
    assert s["gpu"].to_list() == [U1, U2]
    assert s["bytes"].to_list() == [130004 * MiB, 58060 * MiB]


def test_garbage_rows_are_skipped_not_zero(tmp_path):
    text = "pid, process_name, used_gpu_memory [MiB]\nabc, x, 5 MiB\n12, y, lots MiB\n13, z, 9 MiB\n"
    p = parse_text(tmp_path, text)
    assert p.samples["pid"].to_list() == [13] and p.samples["bytes"].to_list() == [9 * MiB]
    assert p.skipped.counts["row does not fit the columns"] == 2


def test_process_name_with_a_comma_takes_the_slack(tmp_path):
    text = "pid, process_name, used_gpu_memory [MiB]\n42, /bin/app --x a, b, 10 MiB\n43, python, 11 MiB\n"
    s = parse_text(tmp_path, text).samples.sort("line")
    assert s["label"].to_list() == ["/bin/app --x a, b", "python"]
    assert s["bytes"].to_list() == [10 * MiB, 11 * MiB]


def test_query_gpu_section_after_the_processes_is_read_too(tmp_path):
    text = (f"gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n{U1}, 123, python, 4 MiB\n"
            f"index, uuid, memory.used [MiB], memory.total [MiB]\n0, {U1}, 5 MiB, 80 MiB\n")
    p = parse_text(tmp_path, text)
    assert p.samples.filter(pl.col("series") == "process.used")["bytes"].to_list() == [4 * MiB]
    gpu = p.samples.filter(pl.col("series") == "memory.used").row(0, named=True)
    assert (gpu["gpu"], gpu["bytes"], gpu["total_bytes"]) == ("0", 5 * MiB, 80 * MiB)
    assert p.meta["gpu_map"] == {U1: "0"}
    assert p.skipped.total == 0


def test_recorded_residual_worker_gone_events_bracket_the_real_kills():
    # sample_logs/residual_worker: the trainer (1721) was SIGKILLed at 04:32:08.972Z, its orphaned
    # eval worker (1769, 6 GiB) at 04:32:21.078Z (README.md of the recording)
    from conftest import SAMPLE_LOGS

    path = SAMPLE_LOGS / "residual_worker" / "compute-apps.csv"
    if not path.exists():
        import pytest

        pytest.skip("sample_logs/residual_worker is not here")
    _, p = parse_file(path, Options(tz="UTC"), expect=NAME)
    gone = {r["pid"]: r for r in p.events.filter(pl.col("kind") == "process_gone").iter_rows(named=True)}
    assert set(gone) == {1721, 1769}
    d = json.loads(gone[1721]["detail"])
    assert datetime.fromisoformat(d["last_seen"]) < utc(2026, 11, 30, 4, 32, 8, 972000) <= gone[1721]["time"]
    worker = p.samples.filter(pl.col("pid") == 1769)
    assert worker["bytes"].max() >= 6 << 30
    # after the worker, only header-only blocks: it is gone, the time is when it was last seen
    assert json.loads(gone[1769]["detail"])["time_is"] == "last_seen"
    assert gone[1769]["time"] < utc(2026, 11, 30, 4, 32, 21, 78000)
    assert p.meta["empty_blocks"][-1]["after"] is not None and p.meta["empty_blocks"][-1]["before"] is None


def test_a_process_nvidia_smi_could_not_name_at_one_poll_keeps_its_name(tmp_path):
    # recorded (sample_logs/ddp_gloo_rank1_leak/compute-apps.csv): `[No data]` at the poll where the process exits
    text = ("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            f"2026/12/02 15:09:45.386, {U1}, 1570, /opt/torch/.venv/bin/python, 1102 MiB\n"
            "timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            f"2026/12/02 15:09:45.907, {U1}, 1570, [No data], 1102 MiB\n"
            f"2026/12/02 15:09:45.907, {U1}, 1571, [No data], 900 MiB\n")
    s = parse_text(tmp_path, text).samples.sort("line")
    assert s["label"].to_list() == ["/opt/torch/.venv/bin/python"] * 2 + [None]   # 1571 never had a name
