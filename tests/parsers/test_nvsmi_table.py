"""Plain nvidia-smi tables (forensics/parsers/nvsmi_table.py): old and new layouts, the process
table, MIG devices, and many snapshots appended (a watch log)."""
from __future__ import annotations

import re
from datetime import datetime, timezone

import polars as pl
from conftest import SAMPLE_LOGS, parse_file, realworld

from forensics.options import Options

NAME = "nvidia-smi-table"
MiB = 1 << 20


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def parse_text(tmp_path, text: str, tz: str = "UTC"):
    path = tmp_path / "smi.txt"
    path.write_text(text)
    return parse_file(path, Options(tz=tz), expect=NAME)[1]


def test_table_01_old_layout():
    _, p = parse_file(realworld("nvsmi_table_01.txt"), expect=NAME)
    r = p.samples.row(0, named=True)
    assert p.samples.height == 1
    assert (r["gpu"], r["bytes"], r["total_bytes"], r["line"]) == ("0", 12799 * MiB, 16280 * MiB, 9)
    assert r["time"] is None and p.clock == "none"
    assert p.meta["gpu_map"] == {"00000000:05:00.0": "0"}


def test_a_mig_devices_section_pasted_alone():
    _, p = parse_file(realworld("nvsmi_table_mig_01.txt"), expect=NAME)
    s = p.samples.sort("line")
    assert s["gpu"].to_list() == ["1/3/0", "1/5/0", "1/6/0"] and set(s["label"]) == {"MIG"}
    assert s["bytes"].to_list() == [14366 * MiB, 9826 * MiB, 13 * MiB]
    assert set(s["total_bytes"]) == {19968 * MiB} and s["line"].to_list() == [9, 12, 15]


def test_a_table_pasted_from_its_middle(tmp_path):
    rows = realworld("nvsmi_table_01.txt").read_text().splitlines()
    for start in (4, 7):    # from the column headers; from the first GPU row (no header, no top border)
        p = parse_text(tmp_path, "\n".join(rows[start:]) + "\n")
        assert p.samples["bytes"].to_list() == [12799 * MiB] and p.samples["total_bytes"].to_list() == [16280 * MiB]


def test_table_02_new_layout_date_line_azure_domains():
    _, p = parse_file(realworld("nvsmi_table_02.txt"), Options(tz="UTC"), expect=NAME)
    s = p.samples.sort("line")
    assert s["gpu"].to_list() == ["0", "1"]
    assert s["bytes"].to_list() == [1 * MiB, 1 * MiB] and s["total_bytes"].to_list() == [40960 * MiB] * 2
    assert s["time"].to_list() == [utc(2024, 9, 27, 20, 41, 52)] * 2
    assert p.meta["gpu_map"] == {"00000001:00:00.0": "0", "00000002:00:00.0": "1"}
    assert p.skipped.counts.get("shell prompt") == 1


def snapshot(date: str, used0: int, proc_mib: int) -> str:
    return f"""{date}
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   37C    P0             56W /  700W |   {used0:5d}MiB /  81559MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A   3543111      C   VLLM::EngineCore                             {proc_mib}MiB |
|    0   N/A  N/A      5432    C+G   ...wekyb3d8bbwe\\XboxGameBarWidgets.exe      N/A      |
+-----------------------------------------------------------------------------------------+
"""


def test_watch_log_is_a_time_series_with_processes(tmp_path):
    text = ("Every 1.0s: nvidia-smi                         gpu-node-7: Fri Sep 27 20:41:52 2024\n\n"
            + snapshot("Fri Sep 27 20:41:52 2024", 30000, 29708)
            + snapshot("Fri Sep 27 20:41:53 2024", 31000, 30708))
    p = parse_text(tmp_path, text, tz="Europe/Paris")
    mem = p.samples.filter(pl.col("series") == "memory.used").sort("line")
    assert mem["bytes"].to_list() == [30000 * MiB, 31000 * MiB]
    assert mem["time"].to_list() == [utc(2024, 9, 27, 18, 41, 52), utc(2024, 9, 27, 18, 41, 53)]
    assert mem["seq"].to_list() == [1, 2]
    procs = p.samples.filter(pl.col("series") == "process.used").sort("line")
    vllm = procs.filter(pl.col("pid") == 3543111)
    assert vllm["bytes"].to_list() == [29708 * MiB, 30708 * MiB]
    assert vllm["label"].to_list() == ["VLLM::EngineCore"] * 2 and vllm["gpu"].to_list() == ["0", "0"]
    assert procs.filter(pl.col("pid") == 5432)["bytes"].to_list() == [None, None]  # Windows N/A
    assert p.clock == "wall-assumed"
    # the boxes' own date lines are used; watch's header line then says nothing new
    assert p.skipped.counts == {"date line": 1, "blank line": 3}


def test_old_process_rows_mig_devices_and_driver_error(tmp_path):
    text = """Unable to determine the device handle for GPU0000:86:00.0: GPU is lost.  Reboot the system to recover this GPU
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   1  NVIDIA A100-PCI...  On   | 00000000:3B:00.0 Off |                   On |
| N/A   41C    P0    62W / 250W |  14380MiB / 40536MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| MIG devices:                                                                |
+------------------+----------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|
|                  |                      |        ECC|                       |
|==================+======================+===========+=======================|
|  1    3   0   0  |  14366MiB / 19968MiB | 28      0 |  2   0    1    0    0 |
|                  |      5MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    1     12345      C   python                                      1234MiB |
+-----------------------------------------------------------------------------+
"""
    p = parse_text(tmp_path, text)
    s = p.samples
    assert s.filter((pl.col("series") == "memory.used") & (pl.col("gpu") == "1"))["bytes"].to_list() == [14380 * MiB]
    mig = s.filter(pl.col("gpu") == "1/3/0")
    assert mig["bytes"].to_list() == [14366 * MiB] and mig["total_bytes"].to_list() == [19968 * MiB]
    assert 5 * MiB not in s["bytes"].drop_nulls().to_list()  # the BAR1 cell is not memory use
    proc = s.filter(pl.col("series") == "process.used").row(0, named=True)
    assert (proc["pid"], proc["gpu"], proc["bytes"], proc["label"]) == (12345, "1", 1234 * MiB, "python")
    ev = p.events.row(0, named=True)
    assert ev["kind"] == "driver_error" and ev["gpu"] == "00000000:86:00.0" and ev["line"] == 1
    assert p.skipped.counts == {"driver error": 1, "blank line": 2}


# -- rows grep'd out of the box (`nvidia-smi | grep -E 'MiB|python'`), often above a --query-gpu CSV ------

def grepped(path, pattern: str = r"MiB|python") -> list[str]:
    """The lines of a real table that `grep -E` keeps (the provenance comment is not nvidia-smi's)."""
    return [ln for ln in path.read_text().splitlines() if re.search(pattern, ln) and not ln.startswith("# source:")]


def test_grepped_rows_above_a_query_gpu_csv_are_both_read(tmp_path):
    """One real run (sample_logs/healthy_stable_footprint, driver 580.159.04): its table grep'd, then the
    head of its --query-gpu CSV, pasted together. The R580 process row cuts its memory to `10356...`."""
    run = SAMPLE_LOGS / "healthy_stable_footprint"
    csv = (run / "nvidia-smi.csv").read_text().splitlines()[:6]
    text = "\n".join(["$ nvidia-smi | grep -E 'MiB|python'", *grepped(run / "nvidia-smi-table.txt"),
                      "$ nvidia-smi --query-gpu=timestamp,index,uuid,pci.bus_id,name,memory.total,memory.used,"
                      "memory.free --format=csv", *csv]) + "\n"
    p = parse_text(tmp_path, text)
    table = p.samples.filter(pl.col("line") < 4).sort("line")
    assert table.select("line", "gpu", "series", "bytes", "total_bytes", "pid").rows() == [
        (2, "0", "memory.used", 103569 * MiB, 143771 * MiB, None), (3, "0", "process.used", None, None, 2255)]
    assert table["label"][1] == "/opt/torch/.venv/bin/python3"
    assert any("`10356...`" in n for n in p.notes) and any("grep'd" in n for n in p.notes)
    rows = p.samples.filter(pl.col("line") >= 6)
    assert rows.height == 5 and rows["time"].null_count() == 0 and set(rows["gpu"]) == {"0"}
    assert rows["time"][0] == utc(2026, 11, 30, 4, 33, 6, 18000)
    assert p.skipped.counts == {"shell prompt": 2}


def test_grepped_loop_of_two_gpus_nothing_else_claims(tmp_path):
    """`while :; do date; nvidia-smi | grep MiB; sleep 60; done` on a real 2x A100 table (nvsmi_table_02),
    a process row of each GPU, then a --query-gpu CSV: before, more than three unknown lines in front of
    the CSV made the paste unrecognized."""
    rows = grepped(realworld("nvsmi_table_02.txt"))
    procs = ["|    0   N/A  N/A     12345      C   python                                  36864MiB |",
             "|    1   N/A  N/A     12346      C   python                                  20480MiB |"]
    text = "\n".join(["Fri Sep 27 20:41:52 UTC 2024", *rows, *procs, "Fri Sep 27 20:42:52 UTC 2024", *rows, *procs,
                      "timestamp, index, memory.used [MiB], memory.total [MiB]",
                      "2024/09/27 20:43:52.101, 0, 36870 MiB, 40960 MiB",
                      "2024/09/27 20:43:52.102, 1, 20486 MiB, 40960 MiB"]) + "\n"
    p = parse_text(tmp_path, text)
    mem = p.samples.filter((pl.col("series") == "memory.used") & (pl.col("line") < 11)).sort("line")
    assert mem.select("gpu", "bytes", "total_bytes", "seq").rows() == [
        ("0", MiB, 40960 * MiB, 1), ("1", MiB, 40960 * MiB, 1), ("0", MiB, 40960 * MiB, 2), ("1", MiB, 40960 * MiB, 2)]
    assert mem["time"].to_list() == [utc(2024, 9, 27, 20, 41, 52)] * 2 + [utc(2024, 9, 27, 20, 42, 52)] * 2
    procs = p.samples.filter(pl.col("series") == "process.used")
    assert procs.select("gpu", "pid").unique().sort("gpu").rows() == [("0", 12345), ("1", 12346)]
    csv = p.samples.filter(pl.col("line") > 11)
    assert csv.select("gpu", "bytes").rows() == [("0", 36870 * MiB), ("1", 20486 * MiB)]


def test_one_grepped_row_of_another_gpu_is_named_by_its_processes(tmp_path):
    """`nvidia-smi -i 3 | grep -E 'MiB|python'`: one memory row, processes on GPU 3: that row is GPU 3.
    Two rows whose processes name a GPU beyond them cannot be numbered by their order: no GPU."""
    mem = "| N/A   36C    P0    41W / 300W |  12799MiB / 16280MiB |      0%      Default |"
    proc = "|    3     12345      C   python                                     12789MiB |"
    p = parse_text(tmp_path, "\n".join([mem, proc]) + "\n")
    assert p.samples.select("series", "gpu").rows() == [("memory.used", "3"), ("process.used", "3")]
    p = parse_text(tmp_path, "\n".join([mem, mem, proc]) + "\n")
    assert p.samples.filter(pl.col("series") == "memory.used")["gpu"].to_list() == [None, None]
