"""NVRM Xid lines: every real snippet, the driver generations of docs/formats.md §3.3, UUID mapping, the
fallen-off-the-bus message without an Xid, and Xids found inside other files."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from conftest import REALWORLD, parse_file, realworld
from forensics import ingest, xid_catalog
from forensics.options import Options
from forensics.parsers.kernel import nvrm_log
from forensics.parsers.kernel import syslog as kernel
from forensics.io.sources import Source

NAME = "nvrm-xid"
UTC = Options(tz="UTC")


def utc(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc)


def xids(parsed) -> list[dict]:
    rows = parsed.events.filter(pl.col("kind") == "xid").sort("line").to_dicts()
    for r in rows:
        r["d"] = json.loads(r["detail"])
    return rows


def write(tmp_path: Path, text: str, name: str = "dmesg.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("xid_*.txt")))
def test_every_xid_snippet_is_claimed_and_yields_xids(name):
    _, p = parse_file(realworld(name), UTC, expect=NAME)
    assert xids(p)


def test_xid_01_fallen_off_without_xid_line_and_the_xid_form():
    _, p = parse_file(realworld("xid_01.txt"), UTC, expect=NAME)
    a, b = xids(p)
    # the three-line message (continuations indented, no stamp) is one event without a code
    assert (a["d"]["code"], a["gpu"], a["d"]["pci"], a["line"]) == (None, "0000:b3:00", "0000:b3:00", 2)
    assert a["d"]["meaning"] == "GPU has fallen off the bus" and a["uptime"] == pytest.approx(1843.308145)
    assert "fallen off the bus" in a["text"] and a["text"].count("\n") == 2
    assert (b["d"]["code"], b["pid"], b["gpu"]) == (79, None, "0000:44:00")


def test_xid_02_unknown_pid_and_uuid_mapping():
    _, p = parse_file(realworld("xid_02.txt"), Options(tz="UTC"), expect=NAME)
    (x,) = xids(p)  # the "GPU 0000:a1:00.0: GPU has fallen off the bus." next to it is the same event
    assert (x["d"]["code"], x["pid"], x["process"]) == (79, None, None)
    assert x["d"]["pci"] == "0000:a1:00"
    assert x["gpu"] == x["d"]["uuid"] == "GPU-979426f2-893a-7cbb-c4cf-81472f89a462"
    assert x["time"] == utc("2024-04-05T21:29:39Z")
    assert x["d"]["message"] == "GPU has fallen off the bus."


def test_xid_04_bare_lines_redacted_uuid_not_mapped():
    _, p = parse_file(realworld("xid_04.txt"), UTC, expect=NAME)
    a, b = xids(p)
    assert [(x["d"]["code"], x["pid"], x["process"]) for x in (a, b)] == [(31, 169800, "chrome"), (31, 174421, "chrome")]
    assert a["gpu"] == "0000:08:00" and a["d"]["uuid"] is None  # "GPU-UID" is not a UUID
    assert a["d"]["channel"] == "00000023" and "FAULT_PTE" in a["d"]["message"]
    assert p.clock == "none" and a["time"] is None


def test_xid_05_chained_cause():
    _, p = parse_file(realworld("xid_05.txt"), UTC, expect=NAME)
    got = [(x["d"]["code"], x["pid"], x["process"], x["gpu"], x["d"]["caused_by_xid"]) for x in xids(p)]
    assert got[0] == (45, 1818990, "python3", "0000:dc:00", 149)
    assert got[1] == (45, 1818992, "python3", "0000:ed:00", 145)
    assert len(got) == 7
    assert "process dies" in xids(p)[0]["d"]["weight"]


def test_xid_07_syslog_dbe():
    _, p = parse_file(realworld("xid_07.txt"), Options(tz="UTC", year=2024), expect=NAME)
    (x,) = xids(p)
    assert (x["d"]["code"], x["pid"], x["gpu"], x["d"]["host"]) == (48, None, "0000:07:00", "worker4")
    assert x["time"] == utc("2024-12-02T10:43:35Z") and x["uptime"] == pytest.approx(240314.528856)
    assert x["d"]["weight"] == "HW"


def test_xid_08_dmesg_ctime_triplet_and_context_switch_timeout():
    _, p = parse_file(realworld("xid_08.txt"), UTC, expect=NAME)
    got = xids(p)
    assert [x["d"]["code"] for x in got] == [13, 13, 13, 109]
    assert got[3]["pid"] == 1797828 and got[3]["process"] == "pt_main_thread"
    assert got[3]["d"]["meaning"].startswith("Context switch timeout")
    assert got[0]["time"] == utc("2024-08-30T11:43:09Z")


def test_xid_10_old_driver_form_without_pid():
    _, p = parse_file(realworld("xid_10.txt"), Options(tz="UTC", year=2019), expect=NAME)
    got = xids(p)
    assert [x["d"]["code"] for x in got] == [69, 69, 69, 31]
    assert all(x["pid"] is None for x in got)
    assert got[3]["d"]["message"].startswith("Ch 0000003b, intr 10000000. MMU Fault")


def test_xid_11_r570_no_pid_name_and_uuid():
    _, p = parse_file(realworld("xid_11.txt"), UTC, expect=NAME)
    (x,) = xids(p)
    assert x["d"]["code"] == 79 and x["gpu"] == "GPU-0b6b7808-c002-f593-ac86-cd8e57757b94"
    assert x["d"]["weight"].startswith("HW/power/PCIe")


def test_mig_old_driver_uppercase_and_unknown_shapes(tmp_path):
    text = ("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, name=python, Contained: CE User Channel (0x9). RST: No, D-RST: No\n"
            "NVRM: Xid (0000:03:00): 14, Channel 00000001\n"
            "NVRM: Xid (PCI:0000:A1:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.\n"
            "NVRM: Xid (43, pid: 5678): synthetic\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    a, b, c = xids(p)
    assert (a["d"]["code"], a["d"]["gpu_instance"], a["pid"], a["gpu"]) == (94, 5, 7194, "0000:01:00")
    assert "Contained ECC" in a["d"]["meaning"]  # 94 is an uncorrectable contained error, not informational
    assert (b["d"]["code"], b["pid"], b["d"]["message"]) == (14, None, "Channel 00000001")
    assert c["gpu"] == "0000:a1:00" and c["d"]["code"] == 63
    assert p.skipped.counts["Xid line in an unknown shape"] == 1


def test_driver_2008_form_and_mig_compute_instance(tmp_path):
    """`NVRM: Xid (0003:00): 8, Channel 00000001` (driver 169.09, forums.developer.nvidia.com/t/2574:
    no domain, kept as printed) and the `GPU-I:nn GPU-CI:nn` attribution krcReportXid prints for a MIG
    compute instance (open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/rc/kernel_rc.c)."""
    text = ("NVRM: Xid (0003:00): 8, Channel 00000001\n"
            "NVRM: Xid (PCI:0000:47:00 GPU-I:03 GPU-CI:01): 31, pid=20211, name=python3, Ch 00000010, intr 00000000. "
            "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f41_2a000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    old, mig = xids(p)
    assert (old["d"]["code"], old["gpu"], old["d"]["pci"], old["d"]["channel"]) == (8, "0003:00", "0003:00", "00000001")
    assert (mig["d"]["code"], mig["gpu"], mig["pid"], mig["process"]) == (31, "0000:47:00", 20211, "python3")
    assert (mig["d"]["gpu_instance"], mig["d"]["compute_instance"], mig["d"]["channel"]) == (3, 1, "00000010")
    assert p.skipped.total == 0


def test_uuid_mapping_takes_the_latest_before(tmp_path):
    text = ("[ 1.000000] NVRM: GPU at PCI:0000:a1:00: GPU-11111111-2222-3333-4444-555555555555\n"
            "[ 2.000000] NVRM: Xid (PCI:0000:a1:00): 13, pid=10, name=a, Graphics Exception\n"
            "[ 3.000000] NVRM: Xid (PCI:0000:b1:00): 13, pid=11, name=b, Graphics Exception\n"
            "[ 4.000000] NVRM: GPU at PCI:0000:b1:00: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    a, b = xids(p)
    assert a["gpu"] == "GPU-11111111-2222-3333-4444-555555555555"
    assert b["gpu"] == "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"  # printed after: still the same GPU


def test_xids_inside_a_full_kernel_log_come_from_kernel_log(tmp_path):
    text = ("[ 10.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n" * 5
            + "[ 11.000000] NVRM: Xid (PCI:0000:cb:00): 31, pid=42, name=python, Ch 00000010, intr 00000000. MMU Fault\n"
            + "[ 12.000000] Out of memory: Killed process 42 (python) total-vm:10kB, anon-rss:5kB, file-rss:0kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect="kernel-log")
    (x,) = xids(p)
    assert (x["d"]["code"], x["pid"], x["line"], x["uptime"]) == (31, 42, 6, pytest.approx(11.0))
    assert p.events.filter(pl.col("kind") == "oom_kill")["pid"].to_list() == [42]
    assert "nvrm-xid" in kernel.COVERS and "kernel-log" in nvrm_log.COVERS


def test_xid_scan_in_a_training_log(tmp_path):
    text = ("step 1 loss 2.0\n" * 20
            + "Apr 25 19:05:01 node kernel: [ 7097.004932] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, DBE\n"
            + "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
            + "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
            + "               NVRM: fallen off the bus and is not responding to commands.\n"
            + "step 2 loss 1.9\n")
    src = Source.open(write(tmp_path, text, "train.log"))
    assert nvrm_log.sniff(src.head()) is None and kernel.sniff(src.head()) is None
    _, results = ingest.parse_one(src, Options(tz="UTC", year=2023))
    got = sorted((e for r in results for e in r.events.to_dicts() if e["kind"] == "xid"), key=lambda e: e["line"])
    assert [(e["line"], json.loads(e["detail"])["code"], e["gpu"]) for e in got] == [
        (21, 48, "0000:07:00"), (22, None, "0000:b3:00")]
    assert got[0]["time"] == utc("2023-04-25T19:05:01Z")


def test_meaning_table():
    assert xid_catalog.meaning(79)[0] == "GPU has fallen off the bus"
    assert xid_catalog.meaning(9999) == (xid_catalog.UNKNOWN_MEANING, "unknown")
    assert set(xid_catalog.XIDS) == {13, 31, 43, 45, 48, 62, 63, 64, 69, 74, 79, 92, 94, 95, 109, 119, 120, 140, 154}
