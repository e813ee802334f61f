"""`gpu-forensics record -- COMMAND...`: run a job with every logger the report wants beside it.

Into one fresh folder:
- `stdout.log`, `stderr.log`: the command's output (memory markers of forensics.markers land in stdout);
- `nvidia-smi.csv`: `nvidia-smi --query-gpu=timestamp,index,uuid,memory.used,memory.total --format=csv -lms N`,
  one long-running nvidia-smi, so the cadence is the driver's own;
- `compute-apps.csv`: `nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_memory,gpu_uuid
  --format=csv` once per interval, appended: each run prints its header, so a header alone says "no
  process at that time", which is how the parser sees a process go (a `-l` loop prints nothing then);
- `kernel.log`: the kernel log's lines of the run (`dmesg --follow --time-format iso`, else
  `journalctl -k -f -o short-iso-precise`), when this user may read it; job.json says which, or why not;
- `job.json`: command, pid, start/end (UTC), exit status, signals forwarded, host, GPUs, time zone of
  the naive clocks (nvidia-smi's timestamps are the host's local time).

The loggers start two intervals before the command and stop two intervals after it, so the curves
show the idle GPU before and the memory coming back after (or a process that keeps it). They run in
their own sessions (a Ctrl-C in the terminal reaches the recorder, which forwards it to the command,
and the loggers keep logging its shutdown), and on Linux they die with the recorder even if it is
killed outright. The command runs in its own process group: a forwarded signal reaches its children
too, as a terminal's would, and only once.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from forensics.errors import UsageError
from forensics.options import local_zone_name
from forensics.report.write import replace_file

GPU_QUERY = "timestamp,index,uuid,memory.used,memory.total"
APPS_QUERY = "timestamp,pid,process_name,used_memory,gpu_uuid"
FORWARDED = (signal.SIGINT, signal.SIGTERM)
LEAD_INTERVALS = 2      # idle samples before the command starts and after it ends
STOP_WAIT_S = 5         # a logger that ignores SIGTERM this long is killed

LOGS = ("stdout.log", "stderr.log", "nvidia-smi.csv", "compute-apps.csv", "kernel.log")


def _die_with_parent() -> None:
    """preexec for the loggers: SIGTERM when the recorder dies (Linux prctl PR_SET_PDEATHSIG)."""
    _PRCTL(1, signal.SIGTERM)


if sys.platform.startswith("linux"):
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl   # looked up now: a preexec function must not load libraries
    LOGGER_PREEXEC: Callable[[], None] | None = _die_with_parent
else:
    LOGGER_PREEXEC = None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def default_dir() -> str:
    return "gpu-record-" + _now().strftime("%Y%m%dT%H%M%SZ")


def check(out_dir: str, command: list[str], interval: float) -> tuple[str, str]:
    """The paths of nvidia-smi and of the command; every usage error before anything starts."""
    if not command:
        raise UsageError("record: no command given, write it after `--` (e.g. gpu-forensics record -- python train.py)")
    if not (0 < interval <= 3600):
        raise UsageError(f"--interval {interval}: not a sampling interval, give the seconds between nvidia-smi "
                         "samples (e.g. 1)")
    if interval < 0.1:
        raise UsageError(f"--interval {interval}: below nvidia-smi's shortest loop (-lms 100), give 0.1 or more")
    nvsmi = shutil.which("nvidia-smi")
    if nvsmi is None:
        raise UsageError("nvidia-smi: not found on PATH, record logs GPU memory with it, install the NVIDIA driver's "
                         "utilities or add the folder that holds nvidia-smi to PATH")
    exe = shutil.which(command[0])
    if exe is None:
        raise UsageError(f"{command[0]}: command not found (nor an executable file), check its name or give its path")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out_dir}: is a file, record writes a folder, give a folder name")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(f"-o {out_dir}: the folder is not empty, a recording needs a fresh one (the report reads "
                         "everything in it), give a new name or empty it")
    if not out.parent.is_dir():
        raise UsageError(f"-o {out_dir}: the folder {out.parent} does not exist, create it first or give a path in an "
                         "existing folder")
    return nvsmi, exe


@dataclass
class Job:
    """What job.json holds."""
    command: list[str]
    interval: float
    host: str = field(default_factory=socket.gethostname)
    tz: str = field(default_factory=local_zone_name)
    pid: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    returncode: int | None = None
    signal: str | None = None
    forwarded: list[str] = field(default_factory=list)
    gpus: list[dict] = field(default_factory=list)
    kernel_log: str | None = None
    kernel_log_missing: str | None = None
    loggers_failed: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)     # logs that stayed empty, not kept

    def json(self) -> str:
        return json.dumps({
            "tool": "gpu-forensics record", "command": self.command, "pid": self.pid, "host": self.host,
            "start": _iso(self.start), "end": _iso(self.end), "exit_code": self.returncode,
            "signal": self.signal, "signals_forwarded": self.forwarded, "interval_s": self.interval,
            "gpus": self.gpus, "tz": self.tz, "kernel_log": self.kernel_log,
            "kernel_log_missing": self.kernel_log_missing, "loggers_failed": self.loggers_failed,
            "empty_logs_removed": self.empty,
        }, indent=2) + "\n"


def _gpus(nvsmi: str) -> list[dict]:
    """index, uuid, name, total memory of each GPU now ([] when nvidia-smi cannot tell)."""
    try:
        out = subprocess.run([nvsmi, "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for row in out.stdout.splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) == 4 and cells[0].isdigit():
            total = int(cells[3]) << 20 if cells[3].isdigit() else None
            gpus.append({"index": int(cells[0]), "uuid": cells[1], "name": cells[2], "memory_total_bytes": total})
    return gpus


class _Process:
    """A long-running logger: its stdout goes to a file, filtered line by line when `keep` is given."""

    def __init__(self, name: str, argv: list[str], path: Path, keep: Callable[[str], bool] | None = None):
        self.name = name
        self.fh = open(path, "ab")
        self.keep = keep
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE if keep else self.fh,
                                     start_new_session=True, preexec_fn=LOGGER_PREEXEC)
        self.thread = None
        if keep:
            self.thread = threading.Thread(target=self._pump, name=f"record-{name}", daemon=True)
            self.thread.start()

    def _pump(self) -> None:
        for raw in self.proc.stdout:
            if self.keep(raw.decode("utf-8", "replace")):
                self.fh.write(raw)
                self.fh.flush()

    def stop(self) -> str | None:
        """Stop it; a reason when it had stopped on its own with an error."""
        early = self.proc.poll()
        if early is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.thread:
            self.thread.join()
        self.fh.close()
        if early is not None:   # a logger that follows the run never ends on its own, even with status 0
            return f"{self.name} stopped during the run with exit status {early}, its log ends early"
        return None


class _Ticker:
    """A command run once per interval, its output appended to a file (compute-apps)."""

    def __init__(self, name: str, argv: list[str], path: Path, interval: float):
        self.name, self.argv, self.interval = name, argv, interval
        self.fh = open(path, "ab")
        self.stopping = threading.Event()
        self.failures: list[int] = []
        self.thread = threading.Thread(target=self._loop, name=f"record-{name}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        due = time.monotonic()
        while not self.stopping.is_set():
            try:
                rc = subprocess.run(self.argv, stdin=subprocess.DEVNULL, stdout=self.fh, stderr=subprocess.STDOUT,
                                    timeout=max(10.0, 5 * self.interval)).returncode
            except subprocess.TimeoutExpired:   # a hung driver: the gap in the file shows it
                rc = -1
            if rc:
                self.failures.append(rc)
            self.fh.flush()
            due += self.interval
            self.stopping.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> str | None:
        self.stopping.set()
        self.thread.join()
        self.fh.close()
        if self.failures:
            return f"{self.name} failed {len(self.failures)} times (last exit status {self.failures[-1]})"
        return None


_HAS_STAMP = re.compile(rb"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d")


def _stamp(raw: bytes, now: datetime) -> bytes:
    """A line of the command's output with its arrival time in front (in brackets: a bare RFC 3339 stamp
    before `RuntimeError: ...` would read as a syslog line), so the step-log readers place the job's own
    prints on the clock; a line that carries its own time (forensics.markers) keeps it alone."""
    if _HAS_STAMP.match(raw):
        return raw
    return f"[{now.strftime('%Y-%m-%dT%H:%M:%S.')}{now.microsecond // 1000:03d}Z] ".encode() + raw


def _pump_stamped(pipe, fh) -> None:
    for raw in pipe:
        fh.write(_stamp(raw, _now()))
        fh.flush()


def is_own_output(path: str) -> bool:
    """The command's stdout.log / stderr.log in a folder `record` wrote (its job.json beside them): the
    job's own output, which need not hold anything a parser reads."""
    p = Path(path)
    return p.name in ("stdout.log", "stderr.log") and (p.parent / "job.json").is_file()


def _iso_line_time(line: str) -> datetime | None:
    """The time of a `dmesg --time-format iso` / `journalctl -o short-iso-precise` line."""
    head = line.split(" ", 1)[0].replace(",", ".")
    try:
        t = datetime.fromisoformat(head)
    except ValueError:
        return None
    return t if t.tzinfo else None


def _since(start: datetime) -> Callable[[str], bool]:
    """Keep the lines stamped from `start` on (a follow first prints the whole ring buffer); a line
    without a stamp goes with the line before it."""
    state = {"keep": False}

    def keep(line: str) -> bool:
        t = _iso_line_time(line)
        if t is not None:
            state["keep"] = t >= start
        return state["keep"]
    return keep


def _readable(argv: list[str]) -> tuple[bool, str]:
    """Whether a one-shot read of this kernel log works here, and why not."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{argv[0]}: {e}"
    text = (r.stderr or "").strip().splitlines()
    if r.returncode != 0:
        return False, f"{' '.join(argv)}: {text[-1] if text else f'exit status {r.returncode}'}"
    if not r.stdout.strip():
        return False, f"{' '.join(argv)}: printed nothing" + (f" ({text[-1]})" if text else "")
    return True, ""


def _kernel_logger(path: Path, start: datetime) -> tuple[_Process | None, str | None, str | None]:
    """(logger, what it runs, why there is none)."""
    whys = []
    dmesg = shutil.which("dmesg")
    if dmesg:
        ok, why = _readable([dmesg, "--time-format", "iso"])
        if ok:
            argv = [dmesg, "--follow", "--time-format", "iso"]
            return _Process("dmesg", argv, path, keep=_since(start)), "dmesg --follow --time-format iso", None
        whys.append(why)
    else:
        whys.append("dmesg: not found")
    journalctl = shutil.which("journalctl")
    if journalctl:
        ok, why = _readable([journalctl, "-k", "-b", "-q", "--no-pager", "-n", "5", "-o", "short-iso-precise"])
        if ok:
            argv = [journalctl, "-k", "-f", "-q", "--no-pager", "-n", "all", "-o", "short-iso-precise",
                    "--since", f"@{int(start.timestamp())}"]
            return _Process("journalctl", argv, path, keep=_since(start)), "journalctl -k -f -o short-iso-precise", None
        whys.append(why)
    else:
        whys.append("journalctl: not found")
    return None, None, "; ".join(whys)


def record(out_dir: str, command: list[str], interval: float, say: Callable[[str], None] = lambda s: None) -> int:
    """Run `command` with the loggers; returns its exit status (128 + N when signal N ended it)."""
    nvsmi, exe = check(out_dir, command, interval)
    out = Path(out_dir)
    out.mkdir(exist_ok=True)
    job = Job(command=list(command), interval=interval)
    job.gpus = _gpus(nvsmi)
    job.start = _now()
    replace_file(out / "job.json", job.json())

    loggers: list = []
    child: subprocess.Popen | None = None
    wake = threading.Event()      # set by a signal: ends the lead or the tail early
    early: list[int] = []         # a signal before the command started: it is not started
    old: dict = {}

    def forward(signum, _frame):
        if child is not None and child.poll() is None:
            job.forwarded.append(signal.Signals(signum).name)
            try:
                os.killpg(child.pid, signum)
            except ProcessLookupError:
                pass
            return
        if child is None:
            early.append(signum)
        wake.set()

    try:
        for sig in FORWARDED:
            old[sig] = signal.signal(sig, forward)
        ms = max(100, int(round(interval * 1000)))
        loggers.append(_Process("nvidia-smi --query-gpu", [nvsmi, f"--query-gpu={GPU_QUERY}", "--format=csv",
                                                           f"-lms={ms}"], out / "nvidia-smi.csv"))
        kernel, job.kernel_log, job.kernel_log_missing = _kernel_logger(out / "kernel.log", job.start)
        if kernel:
            loggers.append(kernel)
        else:
            say(f"kernel log: not readable here ({job.kernel_log_missing}); host OOM kills will not be in the "
                "report, run as root (or with sysctl kernel.dmesg_restrict=0) to have them")
        loggers.append(_Ticker("nvidia-smi --query-compute-apps",
                               [nvsmi, f"--query-compute-apps={APPS_QUERY}", "--format=csv"],
                               out / "compute-apps.csv", interval))
        wake.wait(LEAD_INTERVALS * interval)
        if early:
            job.returncode, job.end = -early[0], _now()
        else:
            with open(out / "stdout.log", "ab") as so, open(out / "stderr.log", "ab") as se:
                # the terminal stays the recorder's: the command's process group is not the foreground one
                stdin = subprocess.DEVNULL if sys.stdin is None or sys.stdin.isatty() else None
                child = subprocess.Popen([exe, *command[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         stdin=stdin, process_group=0)
                pumps = [threading.Thread(target=_pump_stamped, args=(pipe, fh), daemon=True)
                         for pipe, fh in ((child.stdout, so), (child.stderr, se))]
                for t in pumps:
                    t.start()
                job.pid = child.pid
                replace_file(out / "job.json", job.json())
                say(f"recording pid {child.pid} into {out}/ (every {interval:g} s)")
                job.returncode = child.wait()
                for t in pumps:   # the last lines still in the pipes
                    t.join()
                job.end = _now()
            wake.clear()
            wake.wait(LEAD_INTERVALS * interval)
        if job.returncode < 0:
            job.signal = signal.Signals(-job.returncode).name if -job.returncode in signal.valid_signals() \
                else str(-job.returncode)
    finally:
        if child is not None and child.poll() is None:   # the recorder itself failed: leave nothing running
            os.killpg(child.pid, signal.SIGTERM)
            child.wait()
        for lg in loggers:
            problem = lg.stop()
            if problem:
                job.loggers_failed.append(problem)
                say(f"{out}/: {problem}")
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for name in LOGS:   # an empty log would only be reported as "empty file, check the job"
            path = out / name
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
                job.empty.append(name)
        replace_file(out / "job.json", job.json())
    rc = job.returncode
    return 128 - rc if rc < 0 else rc
