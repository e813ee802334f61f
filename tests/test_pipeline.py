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


def test_series_formats_are_parser_names():
    from forensics import parsers

    assert pipeline.SERIES_FORMATS <= set(parsers.BY_NAME)


_WARM_PROBE = """
import sys, threading
from forensics import detect_series, pipeline
from forensics.options import Options
seen = []
real = detect_series._ruptures_linear_cost
def probe():
    seen.append(threading.current_thread().name)
    return real()
detect_series._ruptures_linear_cost = probe
pipeline.run([sys.argv[1]], Options(tz="UTC"))
print(sorted(set(seen)))
"""


def test_ruptures_is_imported_while_the_files_are_read_only_when_a_series_format_is_there(tmp_path):
    """A file of a series format starts the import of ruptures (seconds: scipy) in a thread while the
    rest is read; a run without one (a kernel log alone) never imports it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    kern = tmp_path / "kern-only"
    kern.mkdir()
    (kern / "kern.log").write_bytes((root / "sample_logs" / "incident_linear_oom" / "dmesg.txt").read_bytes())

    def threads(folder) -> str:
        out = subprocess.run([sys.executable, "-c", _WARM_PROBE, str(folder)], capture_output=True, text=True,
                             cwd=root, check=True)
        return out.stdout.strip().splitlines()[-1]

    assert "import-ruptures" in threads(root / "sample_logs" / "leak_linear")
    assert threads(kern) == "[]"
