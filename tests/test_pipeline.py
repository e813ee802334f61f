"""The pipeline keeps one copy of each kernel event: rotated files overlap, dmesg views repeat."""
from __future__ import annotations

import gzip

import pytest

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


def test_ruptures_is_imported_after_reading_a_big_file(monkeypatch):
    """A file big enough to keep both cores busy while it is read does not start the import alongside
    (it would compete with the reading); a small one does, and a compressed one counts 5x its size."""
    from forensics import detect_series, pipeline

    started = []
    monkeypatch.setattr(detect_series, "warm_up", lambda: started.append(True))

    class Src:
        def __init__(self, size, compression=None):
            self.size, self.compression = size, compression

    for src, warm in [(Src(77 << 20), True), (Src(2300 << 20), False), (Src(60 << 20, "zst"), False),
                      (Src(40 << 20, "gzip"), True)]:
        started.clear()
        pipeline._on_claim("nvidia-smi-csv", src)
        assert bool(started) == warm, (src.size, src.compression)
        started.clear()
        pipeline._on_claim("kernel-log", src)
        assert not started


@pytest.mark.parametrize("big", [False, True])
def test_ruptures_import_starts_after_reading_when_a_file_is_big(monkeypatch, big):
    """A small series file starts the import while it is read; with a big one it starts once everything
    is read (before the timeline and detection)."""
    from pathlib import Path

    from forensics import detect_series, ingest, pipeline
    from forensics.options import Options

    steps = []
    real_load = ingest.load

    def load(*a, **k):
        out = real_load(*a, **k)
        steps.append("read")
        return out

    monkeypatch.setattr(ingest, "load", load)
    monkeypatch.setattr(detect_series, "warm_up", lambda: steps.append("import"))
    if big:
        monkeypatch.setattr(pipeline, "WARM_MAX_BYTES", 0)
    pipeline.run([str(Path(__file__).resolve().parent.parent / "sample_logs" / "leak_linear")], Options(tz="UTC"))
    assert "import" in steps[steps.index("read"):]
    assert ("import" in steps[:steps.index("read")]) is not big
