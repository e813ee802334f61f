"""nvidia-bug-report.log(.gz): its sections read by the readers of their formats, evidence lines keeping
their numbers in the report; the other sections counted, not read."""
from __future__ import annotations

import gzip
from pathlib import Path

from conftest import REALWORLD, parse_file
from forensics import ingest, pipeline
from forensics.options import Options
from forensics.parsers import bugreport

UTC = Options(tz="UTC", tz_from_user=True)
SAMPLE = REALWORLD / "nvidia-bug-report" / "nvidia-bug-report_01.txt"
SEP = "_" * 44


def test_the_sample_reads_nvidia_smi_query_and_dmesg_at_their_lines():
    _, p = parse_file(SAMPLE, UTC, expect="nvidia-bug-report")
    text = SAMPLE.read_text().splitlines()
    (used,) = p.samples.filter(p.samples["series"] == "memory.used").iter_rows(named=True)
    assert used["bytes"] == 74624 << 20 and used["total_bytes"] == 81559 << 20
    assert text[used["line"] - 1].strip().startswith("Used") and "74624" in text[used["line"] - 1]
    (xid,) = p.events.iter_rows(named=True)
    assert xid["kind"] == "xid" and xid["uptime"] == 1843.308145 and "NVRM" in text[xid["line"] - 1]
    assert p.meta["report_date"] == "Thu Oct 27 08:50:11 PM -03 2022"
    assert any("at least 1843 s" in n for n in p.notes)
    # the sysfs section and the --unit report hold no GPU memory: counted, never read as readings
    assert p.skipped.counts[bugreport.UNREAD] > 0


def _report(tmp_path: Path) -> Path:
    lines = [SEP, "", "Start of NVIDIA bug report log file.  Please include this file, along", "",
             "Date: Mon Dec  1 10:00:00 UTC 2026", "", SEP, "",
             "Scanning kernel log files for NVIDIA kernel messages:", "",
             "  journalctl -b -0:",
             "Dec 01 09:10:00 gpu01 kernel: [ 5000.000000] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, "
             "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f00_00000000. "
             "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ", "", SEP, "", "dmesg:", "",
             "[ 5000.000000] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. "
             "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f00_00000000. Fault is of type FAULT_PDE "
             "ACCESS_TYPE_VIRT_READ",
             "[ 5400.000000] Out of memory: Killed process 4242 (python3) total-vm:53312244kB, anon-rss:31451456kB, "
             "file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69000kB oom_score_adj:0", "",
             SEP, "", "*** /proc/meminfo", "*** ls: -r--r--r-- 1 root root 0 2026-12-01 10:00:01.000000000 +0000 /proc/meminfo",
             "MemTotal:       527952016 kB", "MemFree:         1204420 kB", "MemAvailable:    2811592 kB", "",
             SEP, "", "/usr/sbin/lspci -nn", "", "3b:00.0 3D controller [0302]: NVIDIA Corporation GH100 [10de:2330] (rev a1)", ""]
    path = tmp_path / "nvidia-bug-report.log.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def test_a_gzipped_report_its_meminfo_and_its_dmesg_placed_by_the_kernel_log_lines(tmp_path):
    path = _report(tmp_path)
    bundle, analysis = pipeline.run([str(path)], UTC)
    (info,) = bundle.inputs
    assert info.format == "nvidia-bug-report" and info.compression == "gzip"
    assert info.meta["meminfo"]["MemTotal"] == 527952016 * 1024
    assert any("in use of" in n for n in info.notes)
    kill = bundle.events.filter(bundle.events["kind"] == "oom_kill").row(0, named=True)
    # the kern.log line gives uptime 5000 s = 09:10:00: the dmesg's boot, so the kill is at 09:16:40
    assert str(kill["time"]).startswith("2026-12-01 09:16:40")
    assert [f for f in analysis.findings if f.kind == "oom_kill"]


def test_an_empty_or_cut_report_never_raises(tmp_path):
    for text in (SEP + "\n\nStart of NVIDIA bug report log file.\n", "Start of NVIDIA bug report log file.\n" + SEP):
        p = tmp_path / "r.log"
        p.write_text(text)
        bundle = ingest.load([str(p)], UTC)
        assert bundle.inputs[0].format == "nvidia-bug-report" and not bundle.inputs[0].error
