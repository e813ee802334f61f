"""D-L5 under a memory limit: the hostile `five_million_lines` report in a real 1 GiB memory cgroup (where the
machine lets a test make one: root, a writable cgroup v1 memory hierarchy), which polars' allocator, keeping freed
pages 10 s, made the kernel kill; forensics/allocator.py hands them back at once under such a limit."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_cases import five_million_lines, memory_cgroup

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.hostile_heavy
def test_five_million_step_lines_report_under_a_one_gibibyte_cgroup(tmp_path):
    """The hostile `five_million_lines` (D-L5) under a 1 GiB memory cgroup: killed by the kernel with the
    pages the allocator kept (exit -9, no message); the report within the limit now."""
    g = memory_cgroup(1 << 30, "test")
    if g is None:
        pytest.skip("no writable cgroup v1 memory hierarchy here (needs root): nothing to run under a limit")
    d = five_million_lines(tmp_path / "five_million_lines")
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    try:
        out = subprocess.run(
            ["sh", "-c", f'echo $$ > {g}/cgroup.procs && exec "$0" -m forensics report "$1" -q -o "$2" --json "$3"',
             sys.executable, str(d), str(tmp_path / "r.html"), str(tmp_path / "r.json")],
            capture_output=True, text=True, timeout=600, env={**env, "PYTHONPATH": str(ROOT)})
    finally:
        g.rmdir() if not (g / "cgroup.procs").read_text().strip() else None
    assert out.returncode == 0, (out.returncode, out.stderr[-500:])
    assert (tmp_path / "r.json").exists()
