"""forensics/allocator.py: polars' allocator keeps freed pages 10 s for speed, unless the process runs under
a memory limit (a container's or a batch job's cgroup) or on a machine below TIGHT_MEMORY, where kept pages
count against the limit: the 5 M-line step log was killed by the kernel under a 1 GiB cgroup with them, and
finished within it with freed pages handed back at once."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics import allocator


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
