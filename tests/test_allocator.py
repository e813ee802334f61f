"""forensics/allocator.py: polars' allocator keeps freed pages 10 s for speed, unless the process runs under
a memory limit (a container's or a batch job's cgroup) or on a machine below TIGHT_MEMORY, where kept pages
count against the limit: the 5 M-line step log was killed by the kernel under a 1 GiB cgroup with them, and
finished within it with freed pages handed back at once."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import allocator

ROOT = Path(__file__).resolve().parent.parent


def _tree(tmp_path: Path, proc: str, files: dict[str, str]) -> tuple[str, str]:
    (tmp_path / "cgroup").write_text(proc)
    for rel, text in files.items():
        f = tmp_path / "sys" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text + "\n")
    return str(tmp_path / "cgroup"), str(tmp_path / "sys")


def test_a_v1_memory_limit_is_the_lowest_of_the_cgroup_and_its_parents(tmp_path):
    proc = "12:pids:/a\n4:memory:/slurm/uid_1/job_7\n1:cpu,cpuacct:/slurm\n"
    args = _tree(tmp_path, proc, {"memory/memory.limit_in_bytes": "9223372036854771712",
                                  "memory/slurm/memory.limit_in_bytes": "9223372036854771712",
                                  "memory/slurm/uid_1/job_7/memory.limit_in_bytes": str(3 << 30),
                                  "memory/slurm/uid_1/memory.limit_in_bytes": str(8 << 30)})
    assert allocator.memory_limit(*args) == 3 << 30


def test_a_v2_memory_max_of_a_parent_holds_when_the_cgroup_says_max(tmp_path):
    args = _tree(tmp_path, "0::/user.slice/job.scope\n", {"user.slice/job.scope/memory.max": "max",
                                                           "user.slice/memory.max": str(1 << 30)})
    assert allocator.memory_limit(*args) == 1 << 30


@pytest.mark.parametrize("proc, files", [
    ("0::/\n", {}),                                                          # nothing to read
    ("4:memory:/\n", {"memory/memory.limit_in_bytes": "9223372036854771712"}),  # v1's "no limit"
    ("0::/x\n", {"x/memory.max": "max"}),
    ("4:memory:/../../etc\n", {}),                                           # a path that climbs out
])
def test_no_limit_set_is_none(tmp_path, proc, files):
    assert allocator.memory_limit(*_tree(tmp_path, proc, files)) is None


def test_an_unreadable_cgroup_file_is_no_limit(tmp_path):
    assert allocator.memory_limit(str(tmp_path / "missing"), str(tmp_path)) is None


@pytest.mark.parametrize("limit, physical, want", [
    (None, 64 << 30, allocator.KEEP_FREED),
    (8 << 30, 64 << 30, allocator.KEEP_FREED),
    (1 << 30, 64 << 30, allocator.HAND_BACK),       # a 1 GiB container on a big machine
    (None, 2 << 30, allocator.HAND_BACK),           # a small machine with no cgroup limit
    (None, None, allocator.KEEP_FREED),
])
def test_a_tight_memory_hands_freed_pages_back_at_once(limit, physical, want):
    assert allocator.setting(limit, physical) == want


def test_the_users_own_setting_comes_after_the_packages_and_wins(monkeypatch):
    monkeypatch.setattr(allocator, "memory_limit", lambda: 1 << 30)
    env = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:700"}
    allocator.configure(env)
    assert env["_RJEM_MALLOC_CONF"] == allocator.HAND_BACK + ",dirty_decay_ms:700"


def _memory_cgroup(limit: int) -> Path | None:
    """A cgroup v1 memory group with `limit`, where this machine lets the tests make one (root, a writable
    memory hierarchy); None elsewhere."""
    base = Path("/sys/fs/cgroup/memory")
    if os.geteuid() != 0 or not (base / "cgroup.procs").exists():
        return None
    g = base / f"gpu_forensics_test_{os.getpid()}"
    try:
        g.mkdir(exist_ok=True)
        (g / "memory.limit_in_bytes").write_text(str(limit))
    except OSError:
        return None
    return g


@pytest.mark.hostile_heavy
def test_five_million_step_lines_report_under_a_one_gibibyte_cgroup(tmp_path):
    """The hostile `five_million_lines` (D-L5) under a 1 GiB memory cgroup: killed by the kernel with the
    pages the allocator kept (exit -9, no message); the report within the limit now."""
    g = _memory_cgroup(1 << 30)
    if g is None:
        pytest.skip("no writable cgroup v1 memory hierarchy here (needs root): nothing to run under a limit")
    d = tmp_path / "five_million_lines"
    d.mkdir()
    with (d / "train.log").open("w") as f:
        for at in range(0, 5_000_000, 100_000):
            f.write("".join(f"[step {i}] allocated: {i % 977} MB\n" for i in range(at, at + 100_000)))
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
