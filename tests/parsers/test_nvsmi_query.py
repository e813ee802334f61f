"""nvidia-smi -q (forensics/parsers/nvsmi_query.py): old and new layouts, appended reports, GPU
indexes from block order only when every attached GPU is listed, processes, the -x XML form."""
from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from conftest import parse_file, realworld

from forensics.options import Options

NAME = "nvidia-smi-q"
MiB = 1 << 20


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def parse_text(tmp_path, text: str, tz: str = "UTC", name: str = "q.txt"):
    path = tmp_path / name
    path.write_text(text)
    return parse_file(path, Options(tz=tz), expect=NAME)[1]


def test_q_01_old_layout_single_gpu_is_index_0():
    _, p = parse_file(realworld("nvsmi_q_01.txt"), expect=NAME)
    r = p.samples.row(0, named=True)
    assert p.samples.height == 1
    assert (r["gpu"], r["bytes"], r["total_bytes"]) == ("0", 1934 * MiB, 1995 * MiB)
    assert r["time"] == utc(2017, 8, 15, 16, 0, 35)
    assert p.meta["gpu_map"] == {"00000000:01:00.0": "0"}
    # the BAR1 section's Used (5 MiB) is not the frame buffer
    assert 5 * MiB not in p.samples["bytes"].to_list()


def test_q_02_one_of_eight_gpus_named_by_bus_id():
    _, p = parse_file(realworld("nvsmi_q_02.txt"), Options(tz="Asia/Tokyo"), expect=NAME)
    r = p.samples.row(0, named=True)
    assert (r["gpu"], r["bytes"], r["total_bytes"]) == ("00000000:0F:00.0", 74624 * MiB, 81559 * MiB)
    assert r["time"] == utc(2025, 1, 25, 13, 19, 18)
    assert "gpu_map" not in p.meta
    assert p.skipped.counts.get("shell prompt") == 1


def report(stamp: str, used0: str, used1: int, proc: int) -> str:
    return f"""
==============NVSMI LOG==============

Timestamp                                 : {stamp}
Driver Version                            : 550.90.07
CUDA Version                              : 12.4

Attached GPUs                             : 2
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    GPU UUID                              : GPU-11111111-2222-3333-4444-555555555555
    FB Memory Usage
        Total                             : 81559 MiB
        Reserved                          : 336 MiB
        Used                              : {used0}
        Free                              : 6601 MiB
    BAR1 Memory Usage
        Total                             : 131072 MiB
        Used                              : 4 MiB
        Free                              : 131068 MiB
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 4242
            Type                          : C
            Name                          : python train.py
            Used GPU Memory               : {proc} MiB

GPU 00000000:2A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    FB Memory Usage
        Total                             : 81559 MiB
        Reserved                          : 336 MiB
        Used                              : {used1} MiB
        Free                              : 100 MiB
    Processes                             : None
"""


def test_appended_reports_form_a_series_with_processes(tmp_path):
    text = report("Sat Jan 25 22:19:18 2025", "1000 MiB", 7, 900) + report("Sat Jan 25 22:19:28 2025", "N/A", 8, 950)
    p = parse_text(tmp_path, text)
    mem = p.samples.filter(pl.col("series") == "memory.used").sort("line")
    assert mem["gpu"].to_list() == ["0", "1", "0", "1"]
    assert mem["bytes"].to_list() == [1000 * MiB, 7 * MiB, None, 8 * MiB]  # N/A -> null
    assert mem["seq"].to_list() == [1, 1, 2, 2]
    assert mem["time"].to_list()[2] == utc(2025, 1, 25, 22, 19, 28)
    procs = p.samples.filter(pl.col("series") == "process.used").sort("line")
    assert procs["pid"].to_list() == [4242, 4242] and procs["bytes"].to_list() == [900 * MiB, 950 * MiB]
    assert procs["label"].to_list() == ["python train.py"] * 2 and procs["gpu"].to_list() == ["0", "0"]
    assert p.meta["gpu_map"]["GPU-11111111-2222-3333-4444-555555555555"] == "0"
    assert p.meta["gpu_map"]["00000000:2A:00.0"] == "1"
    assert p.clock == "wall-assumed"


XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">
<nvidia_smi_log>
	<timestamp>Sun Dec  1 15:30:44 2019</timestamp>
	<driver_version>440.33.01</driver_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:01:00.0">
		<product_name>GeForce GTX 1080</product_name>
		<uuid>GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee</uuid>
		<fb_memory_usage>
			<total>8119 MiB</total>
			<used>1234 MiB</used>
			<free>6885 MiB</free>
		</fb_memory_usage>
		<processes>
			<process_info>
				<pid>4242</pid>
				<type>C</type>
				<process_name>python</process_name>
				<used_memory>N/A</used_memory>
			</process_info>
		</processes>
	</gpu>
</nvidia_smi_log>
"""


def test_xml_reports(tmp_path):
    p = parse_text(tmp_path, XML + XML.replace("15:30:44", "15:31:44").replace("1234 MiB", "2234 MiB"), name="q.xml")
    mem = p.samples.filter(pl.col("series") == "memory.used").sort("seq")
    assert mem["bytes"].to_list() == [1234 * MiB, 2234 * MiB]
    assert mem["time"].to_list() == [utc(2019, 12, 1, 15, 30, 44), utc(2019, 12, 1, 15, 31, 44)]
    # each reading cites the line that holds its bytes (`<used>1234 MiB</used>`), not the `<gpu id>` line
    assert mem["gpu"].to_list() == ["0", "0"] and mem["line"].to_list() == [12, 36]
    proc = p.samples.filter(pl.col("series") == "process.used")
    assert proc["pid"].to_list() == [4242, 4242] and proc["bytes"].null_count() == 2
    assert p.meta["gpu_map"] == {"00000000:01:00.0": "0", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee": "0"}


def test_broken_xml_is_counted_not_a_traceback(tmp_path):
    p = parse_text(tmp_path, "<nvidia_smi_log>\n<timestamp>x</timestamp><gpu id='1'>\n</nvidia_smi_log>\n", name="q.xml")
    assert p.samples.height == 0 and p.skipped.counts == {"unreadable XML report": 1}


def test_real_xml_report_of_a_tesla_t4():
    _, p = parse_file(realworld("nvsmi_q_xml_01.txt"), Options(tz="UTC"), expect="nvidia-smi-q")
    (r,) = p.samples.iter_rows(named=True)
    assert (r["gpu"], r["series"], r["bytes"], r["total_bytes"]) == ("0", "memory.used", 1032 << 20, 15360 << 20)
    assert str(r["time"]) == "2023-04-24 16:22:39+00:00"
    assert p.meta["gpu_map"]["GPU-d37e67a5-91dd-3774-a5cb-99096249601a"] == "0"
