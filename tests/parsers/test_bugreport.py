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


# ---- reports committed to public repositories (tests/samples/nvidia-bug-report/, provenance on line 1) ----

def _sample(n: str):
    path = REALWORLD / "nvidia-bug-report" / f"nvidia-bug-report_{n}.txt"
    _, p = parse_file(path, UTC, expect="nvidia-bug-report")
    return path.read_text().splitlines(), p


def _mib(x: int) -> int:
    return x << 20


def test_2017_report_four_idle_gpus_and_the_unit_report_in_the_same_section():
    text, p = _sample("02")
    used = p.samples.filter(p.samples["series"] == "memory.used")
    assert used["gpu"].to_list() == ["0", "1", "2", "3"]
    assert set(used["bytes"]) == {0} and set(used["total_bytes"]) == {_mib(11172)}
    assert all("10:55:26" in str(t) for t in used["time"])
    # `--query --unit` follows `--query` with no separator: a report of its own, holding no GPU
    assert not any("nvidia-smi -q reports" in n for n in p.notes)
    assert [g["uuid"] for g in p.meta["gpus"]][0] == "GPU-bc54db68-a3cb-54e9-7287-b95c69e41cf1"
    assert p.meta["meminfo"]["MemTotal"] == 65867128 * 1024
    assert p.meta["year_from"].startswith("syslog year from the report's Date (Thu Sep  7 10:55:12 CST 2017)")


def test_2019_report_the_process_that_holds_three_gpus_and_the_xids_of_an_earlier_boot():
    text, p = _sample("03")
    procs = p.samples.filter(p.samples["series"] == "process.used")
    assert procs.select("gpu", "pid", "label", "bytes").rows() == [
        ("0", 5578, "python", _mib(9229)), ("2", 5578, "python", _mib(9201)), ("3", 5578, "python", _mib(10995))]
    (gpu3,) = p.samples.filter((p.samples["series"] == "memory.used") & (p.samples["gpu"] == "3")).iter_rows(named=True)
    assert gpu3["bytes"] == _mib(11008) and gpu3["total_bytes"] == _mib(11019)
    assert "11008 MiB" in text[gpu3["line"] - 1]
    # the Xid 13s of kern.log: the pid without a name (drivers before 440), the GPU by the `GPU at PCI` line,
    # the year from the report's localized Date, not from the file's time
    first = p.events.row(0, named=True)
    assert first["kind"] == "xid" and first["pid"] == 10635 and first["gpu"] == "GPU-cdf24e17-1c00-eee5-6474-a217091f12ec"
    assert str(first["time"]).startswith("2019-11-15 12:43:10")
    assert "2019年" in p.meta["year_from"]
    # the journal of boot -2 prints its month as `11月`: its Xids are read, untimed
    last = p.events.row(-1, named=True)
    assert last["pid"] == 4563 and last["time"] is None and "32, pid=4563" in text[last["line"] - 1]
    assert p.meta["meminfo"]["MemAvailable"] == 37372084 * 1024


def test_2015_report_its_older_section_titles():
    text, p = _sample("04")
    procs = p.samples.filter(p.samples["series"] == "process.used")
    assert procs.select("pid", "bytes").rows() == [(878, _mib(198)), (1804, _mib(156)), (8822, _mib(114))]
    assert procs["label"].to_list()[:2] == ["/usr/bin/X", "compiz"]
    (used,) = p.samples.filter(p.samples["series"] == "memory.used").iter_rows(named=True)
    assert used["bytes"] == _mib(496) and used["total_bytes"] == _mib(12284)
    assert not any("nvidia-smi -q reports" in n for n in p.notes)   # `-q -u` is the units' report
    # `Scanning kernel log files for NVRM messages:` is read as kernel lines: what is left unread is the
    # provenance line, the `-q -u` report (6 lines) and nvidia-debugdump's (2)
    assert p.skipped.counts[bugreport.UNREAD] == 9
    assert p.meta["year_from"].startswith("syslog year from the report's Date (Mon Dec 21 01:42:03 MST 2015)")


def test_a_report_inside_a_job_bundle_archive_is_dated_by_its_date(tmp_path):
    import tarfile
    bundle_path = tmp_path / "job.tar.gz"
    with tarfile.open(bundle_path, "w:gz") as tar:
        tar.add(REALWORLD / "nvidia-bug-report" / "nvidia-bug-report_03.txt", arcname="job/nvidia-bug-report.log")
    bundle, _ = pipeline.run([str(bundle_path)], UTC)
    (info,) = bundle.inputs
    assert info.format == "nvidia-bug-report" and not info.error
    xids = bundle.events.filter(bundle.events["kind"] == "xid")["time"].drop_nulls()
    assert xids.len() and set(xids.dt.year()) == {2019}
