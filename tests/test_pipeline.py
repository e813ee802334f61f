"""The pipeline keeps one copy of each kernel event: rotated files overlap, dmesg views repeat."""
from __future__ import annotations

import gzip

from forensics import pipeline
from forensics.options import Options

KILL = ("{stamp} node kernel: [{up}] Out of memory: Killed process {pid} (python3) total-vm:1000kB, "
        "anon-rss:{rss}kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:10kB oom_score_adj:0\n")


def test_rotated_overlap_gives_one_finding_per_kill(tmp_path):
    a = KILL.format(stamp="May 15 10:00:00", up=" 1000.000001", pid=11, rss=1024)
    b = KILL.format(stamp="May 15 11:00:00", up=" 4600.000001", pid=12, rss=2048)
    c = KILL.format(stamp="May 15 12:00:00", up=" 8200.000001", pid=13, rss=4096)
    (tmp_path / "kern.log.2.gz").write_bytes(gzip.compress(a.encode()))
    (tmp_path / "kern.log.1").write_text(a + b)          # copytruncate: a is in both
    (tmp_path / "kern.log").write_text(b + c)
    (tmp_path / "dmesg").write_text("[ 8200.000001] Out of memory: Killed process 13 (python3) total-vm:1000kB, "
                                    "anon-rss:4096kB, file-rss:0kB, shmem-rss:0kB\n")
    _, analysis = pipeline.run([str(tmp_path)], Options(tz="UTC", year=2024))
    kills = sorted(f.pid for f in analysis.findings if f.kind == "oom_kill")
    assert kills == [11, 12, 13]


_IMPORT_PROBE = """
import sys
from forensics import pipeline
from forensics.options import Options
_, analysis = pipeline.run([sys.argv[1]], Options(tz="UTC"))
print(sorted({f.kind for f in analysis.findings}))
print(sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "ruptures")))
"""


def test_change_points_are_searched_without_importing_scipy_or_ruptures(tmp_path):
    """ruptures' import loads scipy (more CPU than the rest of a day's run) for costs we never use: the
    run finds its leak with our own binary segmentation, and neither package is loaded."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, str(root / "sample_logs" / "leak_linear")],
                         capture_output=True, text=True, cwd=root, check=True).stdout.strip().splitlines()
    assert "leak" in out[-2]
    assert out[-1] == "[]"


def test_timeline_writes_each_kernel_event_once(tmp_path):
    """`timeline` reads through the same pipeline as `report`: the host OOM incident's kernel events,
    repeated by kern.log, dmesg and dmesg -T, are written once each (the report counts 2 kills)."""
    import subprocess
    import sys
    from pathlib import Path

    import polars as pl

    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "forensics", "timeline", str(root / "sample_logs" / "host_oom_pin_memory"),
                    "-o", str(tmp_path / "aligned.csv"), "--tz", "UTC", "-q"], cwd=root, check=True)
    events = pl.read_csv(tmp_path / "aligned.events.csv")
    assert events.filter(pl.col("kind") == "oom_kill").height == 2
    _, analysis = pipeline.run([str(root / "sample_logs" / "host_oom_pin_memory")], Options(tz="UTC"))
    assert sum(f.kind == "oom_kill" for f in analysis.findings) == 2
