"""How polars' allocator (jemalloc) hands freed memory back, chosen before polars is imported: jemalloc
reads `_RJEM_MALLOC_CONF` once, when polars loads. Kept light (os only): `gpu-forensics --help` runs it."""
from __future__ import annotations

import os

# A big file is read in columns that are freed and allocated again every few hundred ms; each page
# handed back at once costs a fault on its reuse (a tenth of a big CSV's run), so freed pages are kept a
# second: that keeps nearly all of the reuse, while pages kept longer add up to most of a big step log's
# peak (docs/benchmarks.md, tenth session).
KEEP_FREED = "dirty_decay_ms:1000,muzzy_decay_ms:1000"
# Under a memory limit the kept pages count against the limit and cannot be reclaimed: a job with a
# limit of 1 GiB was killed by the kernel (SIGKILL, no message) on that step log, and finished within it
# with freed pages handed back at once.
HAND_BACK = "dirty_decay_ms:0,muzzy_decay_ms:0"
# bound: below this much memory for the process, the pages kept a second are a share worth the CPU
TIGHT_MEMORY = 4 << 30
_NO_LIMIT = 1 << 60     # cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages)


def memory_limit(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """The lowest memory limit set on this process' cgroup or any cgroup above it (v2 `memory.max`, v1
    `memory.limit_in_bytes`); None when none is set or none can be read."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    dirs = []
    for line in lines:
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hier == "0" and not controllers:
            dirs.append((root, path, "memory.max"))
        elif "memory" in controllers.split(","):
            dirs.append((os.path.join(root, "memory"), path, "memory.limit_in_bytes"))
    limits = []
    for base, path, name in dirs:
        parts = [p for p in path.split("/") if p and p not in (".", "..")]
        for depth in range(len(parts), -1, -1):
            try:
                with open(os.path.join(base, *parts[:depth], name)) as f:
                    text = f.read().strip()
            except OSError:
                continue
            if text.isdigit() and int(text) < _NO_LIMIT:
                limits.append(int(text))
    return min(limits) if limits else None


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def setting(limit: int | None, physical: int | None) -> str:
    """The package's jemalloc setting for a process that may use `limit` bytes on a machine of `physical`."""
    room = min((m for m in (limit, physical) if m), default=None)
    return HAND_BACK if room is not None and room < TIGHT_MEMORY else KEEP_FREED


def configure(environ=os.environ) -> None:
    """Set `_RJEM_MALLOC_CONF` for polars, to be called before polars is imported; a value the user set
    comes after the package's and wins."""
    mine = setting(memory_limit(), _physical_memory())
    theirs = environ.get("_RJEM_MALLOC_CONF")
    environ["_RJEM_MALLOC_CONF"] = mine + ("," + theirs if theirs else "")
