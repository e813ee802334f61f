"""The helpers both recorders use (tools/record and tools/corpus): one copy. Standard library only, so that it
runs in the GPU machine's plain python3 beside PyTorch.

Each script of the two folders puts this folder on sys.path (`sys.path.insert(0, str(HERE.parent))`)
and imports what it needs: `from recorder_common import iso, read_rows`.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path


def iso(t: float | None) -> str | None:
    """A time.time() value as the truth files write it: UTC, milliseconds, `Z`."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_rows(path: Path) -> list[dict]:
    """The rows of a side file (one JSON object a line); a missing file has none."""
    rows = []
    try:
        text = Path(path).read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass            # a line cut by a kill
    return rows


def sh(cmd: list[str] | str, timeout: float = 60, cwd: str | None = None) -> tuple[int, str]:
    """Run a command (a string through the shell), stdout and stderr together; never raises."""
    try:
        r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True,
                           timeout=timeout, cwd=cwd, errors="replace")
        return r.returncode, r.stdout + r.stderr
    except FileNotFoundError as e:
        return 127, f"{e}\n"
    except subprocess.TimeoutExpired as e:
        parts = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
        return 124, "".join(parts) + "\n[timed out]\n"


def zone_name() -> str:
    """The machine's local zone: the one nvidia-smi and python logging write their times in."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return name
    except OSError:
        pass
    target = os.path.realpath("/etc/localtime")
    if "zoneinfo/" in target:
        return target.split("zoneinfo/", 1)[1]
    if time.timezone == 0 and not time.daylight:
        return "Etc/UTC"
    return time.tzname[0]


def stop_groups(procs: list[subprocess.Popen], grace: float = 3.0) -> None:
    """SIGINT to each process's group (nvidia-smi then writes its last line), SIGKILL to what is still
    running `grace` seconds later; every one reaped."""
    for p in procs:
        _signal_group(p, signal.SIGINT)
    end = time.time() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass            # the group has ended already


class Pacer:
    """Keeps steps `period` seconds apart whatever each step's own work costs (`wait(p)`: this once, p)."""

    def __init__(self, period: float):
        self.period = period
        self.next = time.monotonic()

    def wait(self, period: float | None = None) -> None:
        self.next += self.period if period is None else period
        delay = self.next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            self.next = time.monotonic()


def append_row(path: str | None, ev: str, **fields) -> None:
    """One row of a side file: the event, the time, this process's pid and the facts. A single write of
    one line in append mode, so that a job's workers may append to the same file; no path, no row."""
    if not path:
        return
    line = json.dumps({"ev": ev, "t": time.time(), "pid": os.getpid(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class MemoryCgroup:
    """A small memory cgroup (v2, else v1) for a host-memory case (as root): `how` says what was set up,
    `procs` is the file a process writes its pid to to join it; neither when none could be (`notes` says
    why). $GF_CGROUP_ROOT stands for /sys/fs/cgroup in a dry run."""

    def __init__(self, limit: str, name: str, notes: list[str]):
        self.path: Path | None = None
        self.procs: str | None = None
        self.events: Path | None = None
        self.how: str | None = None
        root = Path(os.environ.get("GF_CGROUP_ROOT", "/sys/fs/cgroup"))
        try:
            if (root / "cgroup.controllers").exists():
                if "memory" not in (root / "cgroup.subtree_control").read_text().split():
                    (root / "cgroup.subtree_control").write_text("+memory")
                self.path = root / name
                self.path.mkdir(exist_ok=True)
                (self.path / "memory.max").write_text(limit)
                if (self.path / "memory.swap.max").exists():
                    (self.path / "memory.swap.max").write_text("0")
                self.events = self.path / "memory.events"
                self.how = f"cgroup v2: {self.path} with memory.max={limit}, memory.swap.max=0"
            elif (root / "memory").is_dir():
                self.path = root / "memory" / name
                self.path.mkdir(exist_ok=True)
                (self.path / "memory.limit_in_bytes").write_text(limit)
                self.events = self.path / "memory.oom_control"
                self.how = f"cgroup v1: {self.path} with memory.limit_in_bytes={limit}"
            else:
                notes.append(f"no memory cgroup controller under {root}")
            if self.how:
                self.procs = str(self.path / "cgroup.procs")
        except OSError as e:
            notes.append(f"could not set up a memory cgroup: {e}")
            self.how = None

    def read_events(self) -> str:
        try:
            return self.events.read_text() if self.events else ""
        except OSError:
            return ""

    def remove(self) -> None:
        if self.path:
            for _ in range(20):
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.25)
