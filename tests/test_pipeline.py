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


_SCIPY_PROBE = """
import sys
from forensics import pipeline
from forensics.options import Options
_, analysis = pipeline.run([sys.argv[1]], Options(tz="UTC"))
print(sorted({f.kind for f in analysis.findings}))
print(sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy.")))
import numpy as np
import ruptures
from ruptures.costs import costrank, costrbf
# the costs we do not use still work: their scipy functions import scipy when called
print(costrank.rankdata(np.array([30.0, 10.0, 20.0])).tolist(), costrbf.pdist(np.array([[0.0], [3.0]])).tolist())
print("scipy.stats" in sys.modules, ruptures.Binseg.__name__)
"""


def test_change_points_are_searched_without_importing_scipy(tmp_path):
    """ruptures' import would load scipy (~1.3 s of CPU) for costs we never use: the run finds its
    leak with ruptures' Binseg and no scipy module, and ruptures' other costs still work after."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", _SCIPY_PROBE, str(root / "sample_logs" / "leak_linear")],
                         capture_output=True, text=True, cwd=root, check=True).stdout.strip().splitlines()
    assert "leak" in out[-4]
    assert out[-3] == "[]"
    assert out[-2] == "[3.0, 1.0, 2.0] [3.0]"
    assert out[-1] == "True Binseg"


def test_a_scipy_module_already_loaded_is_left_alone():
    import subprocess
    import sys

    code = ("import sys, scipy.signal; real = sys.modules['scipy.signal']\n"
            "from forensics.detect import series as detect_series\n"
            "detect_series._import_ruptures()\n"
            "import ruptures.detection.window as w\n"
            "print(sys.modules['scipy.signal'] is real, w.argrelmax is real.argrelmax)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]
