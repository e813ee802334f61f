#!/usr/bin/env python3
"""Record GPU memory incidents into tests/corpus/<half>/<case>/ on a machine with one NVIDIA GPU.

    python3 tools/corpus/record.py --half tune --out /tmp/corpus [--tgz FILE] [--deadline S] [--only A,B]
    python3 tools/corpus/record.py --list

For each case it starts the case's nvidia-smi loggers (each to its own file), waits 3 s, runs the
case's job(s) -- each one `tools/corpus/workloads.py KIND ...`, run in a fork of this process so
that `import torch` is paid once per call (CUDA is never initialised here) -- kills or stops what the
case says, keeps the loggers 4 s after the last job ends (unless the case stops them first), and
writes truth.json and README.md from the side file (tools/corpus/truth.py). The side file
(`<out>/_runs/<half>/<case>.jsonl`) holds the workloads' own facts and this recorder's events.

Runs as root (memory cgroup for the host-memory case, dmesg). Each case is isolated: an error or a
time-out costs that case only, and the output is packed into --tgz after every case.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(HERE.parent)]   # tools/: recorder_common.py

import truth as truthmod  # noqa: E402
from recorder_common import MemoryCgroup, iso, read_rows, sh, stop_groups, zone_name  # noqa: E402

WIDE_Q = ("timestamp,name,pci.bus_id,driver_version,pstate,temperature.gpu,utilization.gpu,"
          "utilization.memory,memory.total,memory.free,memory.used")
LOGGERS = {
    "wide500": ("nvidia-smi-wide.csv", f"nvidia-smi --query-gpu={WIDE_Q} --format=csv -lms 500"),
    "wide1": ("nvidia-smi-wide-l1.csv", f"nvidia-smi --query-gpu={WIDE_Q} --format=csv -l 1"),
    "script5": ("gpu-mem-5s.csv",
                "nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total --format=csv,noheader,nounits -l 5"),
    "script1": ("gpu-mem-1s.csv",
                "nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total --format=csv,noheader,nounits -l 1"),
    "classic": ("nvidia-smi-l1.csv", "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv -l 1"),
    "ms250": ("nvidia-smi-250ms.csv",
              "nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total --format=csv -lms 250"),
    "apps": ("compute-apps.csv",
             "nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory --format=csv -l 1"),
    "apps2": ("compute-apps.csv",
              "nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_memory --format=csv -l 1"),
    "dmon": ("dmon.txt", "nvidia-smi dmon -s m -o DT"),
    "dmon_mu": ("dmon.txt", "nvidia-smi dmon -s mu -o DT"),
    "used5": ("gpu-used-5s.csv", "nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -l 5"),
    # held-out set 9: the full query's memory and processes, repeated (asctime stamps, whole seconds)
    "q1": ("nvidia-smi-q.txt", "nvidia-smi -q -d MEMORY,PIDS -l 1"),
}

T0 = time.monotonic()
LOGFILE: Path | None = None


def say(msg: str) -> None:
    line = f"[{time.monotonic() - T0:6.1f}s {time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    if LOGFILE:
        with open(LOGFILE, "a") as f:
            f.write(line + "\n")


def probe() -> dict:
    env = {"tz": zone_name(), "utc_offset": time.strftime("%z"), "date": iso(time.time()),
           "python": sys.version.split()[0]}
    rc, out = sh("nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid --format=csv,noheader")
    env["gpu_line"] = out.strip()
    env["kernel"] = sh("uname -sr")[1].strip()
    try:
        import torch
        env["torch"] = torch.__version__
    except Exception as e:  # noqa: BLE001
        env["torch"] = f"unavailable: {e}"
    for mod in ("transformers", "pytorch_lightning", "lightning"):
        rc, out = sh(f"{shlex.quote(sys.executable)} -c 'import importlib.metadata as m; print(m.version(\"{mod}\"))'")
        env[mod] = out.strip().splitlines()[-1] if rc == 0 and out.strip() else None
    env["nvidia_smi_version"] = sh("nvidia-smi --version")[1].strip()
    env["cgroup_fs"] = sh("stat -fc %T /sys/fs/cgroup")[1].strip()
    return env


def gpu_busy() -> bool:
    rc, out = sh("nvidia-smi --query-compute-apps=pid --format=csv,noheader", timeout=15)
    apps = [x for x in out.split() if x.strip().isdigit()]
    rc2, out2 = sh("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits", timeout=15)
    try:
        used = int(out2.split()[0])
    except (ValueError, IndexError):
        used = 0
    return bool(apps) or used > 64


class CaseTimeout(Exception):
    pass


class Terminated(BaseException):
    """SIGTERM (the outer `timeout`): stop the case in hand cleanly, pack, and leave."""


PIDS_FILE: Path | None = None


def remember_pid(pid: int) -> None:
    """Every process this recorder starts, so the calling shell can end leftovers by pid."""
    if PIDS_FILE:
        with open(PIDS_FILE, "a") as f:
            f.write(f"{pid}\n")


class Job:
    def __init__(self, pid, kind, argv, role, leaks, out, err, append, t_fork):
        self.pid, self.kind, self.argv, self.role, self.leaks = pid, kind, argv, role, leaks
        self.out, self.err, self.append, self.t_fork = out, err, append, t_fork
        self.status = None
        self.t_end = None


class Ctx:
    """What a case's scenario can do: start jobs, wait for steps, kill, stop the loggers."""

    def __init__(self, rec: "Recorder", case, folder: Path, sidefile: Path, timeout: float):
        self.rec, self.case, self.folder, self.sidefile = rec, case, folder, sidefile
        self.deadline = time.time() + timeout
        self.jobs: list[Job] = []
        self.extra_pids: set[int] = set()
        self.loggers: list[tuple[str, subprocess.Popen, object, object]] = []
        self.loggers_running = False

    # -- side file --
    def ev(self, ev: str, **kw) -> None:
        with open(self.sidefile, "a") as f:
            f.write(json.dumps({"ev": ev, "t": time.time(), "pid": os.getpid(), **kw}) + "\n")

    def rows(self) -> list[dict]:
        return read_rows(self.sidefile)

    # -- loggers --
    def start_loggers(self, keys: list[str]) -> None:
        errdir = self.rec.out / "_runs" / self.case.half / "logger-stderr"
        errdir.mkdir(parents=True, exist_ok=True)
        for key in keys:
            fname, cmd = LOGGERS[key]
            out = open(self.folder / fname, "w")
            err = open(errdir / f"{self.case.name}.{fname}.stderr", "w")
            p = subprocess.Popen(shlex.split(cmd), stdout=out, stderr=err, start_new_session=True)
            self.loggers.append((fname, p, out, err))
            remember_pid(p.pid)
            self.ev("rec_logger_start", key=key, file=fname, command=f"{cmd} > {fname}", logger_pid=p.pid)
        self.loggers_running = bool(keys)

    def stop_loggers(self, reason: str = "after_job") -> None:
        if not self.loggers_running:
            return
        self.ev("rec_loggers_stop", reason=reason)
        stop_groups([p for _, p, _, _ in self.loggers])
        for fname, p, out, err in self.loggers:
            out.close()
            err.close()
            self.ev("rec_logger_exit", file=fname, returncode=p.returncode)
        self.loggers_running = False
        if reason != "after_job":
            say(f"  loggers stopped ({reason})")

    # -- jobs --
    def job(self, kind: str, args: str, role: str = "train", leaks: bool = False, out: str = "train.log",
            err: str = "stderr.log", append: bool = False, env: dict | None = None,
            cgroup_procs: str | None = None) -> Job:
        argv = [kind, *shlex.split(args)]
        needs_dir = kind == "lightning_leak" or "--tensorboard" in argv or "--monitor-file" in argv or any(
            "+" in a for a in argv)         # files besides stdout: Lightning's CSV, TensorBoard, extra styles
        if needs_dir:
            argv += ["--csv-dir", str(self.folder)]
        outp, errp = self.folder / out, self.folder / err
        child_env = {"GFC_SIDE": str(self.sidefile), "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
                     "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", **(env or {})}
        sys.stdout.flush()
        sys.stderr.flush()
        t = time.time()
        pid = os.fork()
        if pid == 0:
            run_child(argv, outp, errp, append, child_env, cgroup_procs)   # never returns
        remember_pid(pid)
        j = Job(pid, kind, argv, role, leaks, out, err, append, t)
        self.jobs.append(j)
        shown = " ".join(shlex.quote(a) for a in argv if not a.startswith(str(self.folder)))
        if needs_dir:
            shown = " ".join(shlex.quote(a) for a in argv[:-2]) + " --csv-dir <case folder>"
        redir = ">>" if append else ">"
        self.ev("rec_fork", job_pid=pid, kind=kind, argv=argv, role=role, leaks=leaks, out=out, err=err,
                append=append, command=f"python3 tools/corpus/workloads.py {shown} {redir} {out} 2{redir} {err}",
                cgroup=cgroup_procs)
        say(f"  fork {role} pid {pid}: {kind} {args}")
        return j

    def poll(self) -> None:
        for j in self.jobs:
            if j.status is None:
                try:
                    pid, st = os.waitpid(j.pid, os.WNOHANG)
                except ChildProcessError:
                    pid, st = j.pid, 0
                    self.ev("rec_note", note=f"pid {j.pid} could not be waited for")
                if pid:
                    j.t_end = time.time()
                    j.status = (os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st)) if pid == j.pid else None
                    self.ev("rec_exit", job_pid=j.pid, status=j.status)
                    say(f"  pid {j.pid} ({j.role}) ended, status {j.status}")
        for p in list(self.extra_pids):
            try:
                pid, st = os.waitpid(p, os.WNOHANG)
                if pid:
                    self.extra_pids.discard(p)
                    self.ev("rec_reaped", job_pid=p, status=os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st))
            except ChildProcessError:
                pass                           # not (yet) our child: its parent is alive

    def check(self) -> None:
        self.poll()
        if time.time() > self.deadline:
            raise CaseTimeout("case time limit reached")

    def sleep(self, s: float) -> None:
        end = time.time() + s
        while time.time() < end:
            self.check()
            time.sleep(min(0.05, max(0.0, end - time.time())))

    def wait_exit(self, j: Job) -> None:
        while j.status is None:
            self.check()
            time.sleep(0.05)

    def last_step(self, j: Job) -> int:
        steps = [r.get("step", 0) for r in self.rows() if r.get("ev") == "step" and r.get("pid") == j.pid]
        return max(steps) if steps else 0

    def wait_step(self, j: Job, n: int) -> bool:
        while j.status is None:
            if self.last_step(j) >= n:
                return True
            for r in self.rows():
                if r.get("ev") == "worker_ready" and r["pid"] not in self.extra_pids:
                    remember_pid(r["pid"])
                    self.extra_pids.add(r["pid"])
            self.check()
            time.sleep(0.1)
        return False

    def wait_event(self, ev: str) -> dict | None:
        while True:
            for r in self.rows():
                if r.get("ev") == ev:
                    return r
            self.check()
            if all(j.status is not None for j in self.jobs):
                return None
            time.sleep(0.1)

    def kill(self, pid: int, what: str = "job") -> None:
        try:
            os.kill(pid, signal.SIGKILL)
            self.ev("rec_kill", job_pid=pid, signal=9, what=what)
            say(f"  SIGKILL {what} pid {pid}")
        except ProcessLookupError:
            self.ev("rec_note", note=f"pid {pid} was already gone when the recorder meant to kill it")

    def note(self, text: str) -> None:
        self.ev("rec_note", note=text)

    def supervisor_line(self, out: str, text: str) -> None:
        with open(self.folder / out, "a") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} supervisor: {text}\n")
        self.ev("rec_supervisor_line", file=out, text=text)

    def cleanup(self) -> None:
        for j in self.jobs:
            if j.status is None:
                for fn in (lambda: os.killpg(j.pid, signal.SIGKILL), lambda: os.kill(j.pid, signal.SIGKILL)):
                    try:
                        fn()
                    except (ProcessLookupError, PermissionError):
                        pass
                self.ev("rec_cleanup_kill", job_pid=j.pid)
        for p in list(self.extra_pids):
            try:
                os.kill(p, signal.SIGKILL)
                self.ev("rec_cleanup_kill", job_pid=p)
            except ProcessLookupError:
                pass
        end = time.time() + 5
        while time.time() < end and any(j.status is None for j in self.jobs):
            self.poll()
            time.sleep(0.05)
        # anything orphaned to us (subreaper) in the meantime
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if not pid:
                    break
        except ChildProcessError:
            pass


def run_child(argv, outp, errp, append, env, cgroup_procs) -> None:
    code = 1
    try:
        os.setsid()
        if cgroup_procs:
            with open(cgroup_procs, "w") as f:
                f.write(str(os.getpid()))
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        fo = os.open(outp, flags, 0o644)
        fe = os.open(errp, flags, 0o644) if errp != outp else fo
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        try:
            sys.stdout.reconfigure(line_buffering=True)
            sys.stderr.reconfigure(line_buffering=True)
        except Exception:  # noqa: BLE001
            pass
        os.environ.update(env)
        sys.argv = [str(HERE / "workloads.py"), *argv]
        import workloads
        workloads.main(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001
        try:
            et, ev, tb = sys.exc_info()
            if tb is not None and tb.tb_next is not None:    # from workloads.main on, as `python3 workloads.py` shows
                ev = ev.with_traceback(tb.tb_next)
            sys.excepthook(et, ev, ev.__traceback__)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code)


def cgroup(limit: str, ctx: Ctx) -> MemoryCgroup:
    """The host-memory case's memory cgroup; what could not be set up is in the case's notes."""
    notes: list[str] = []
    cg = MemoryCgroup(limit, "gfc_pin", notes)
    for n in notes:
        ctx.note(n)
    ctx.ev("rec_cgroup", how=cg.how)
    return cg


def capture_kernel(ctx: Ctx) -> None:
    clock = []
    for cmd in ("date --iso-8601=ns", "date -u --iso-8601=ns", "date +%s.%N", "grep btime /proc/stat",
                "cat /proc/uptime"):
        rc, out = sh(cmd)
        clock.append(f"$ {cmd}\n{out.rstrip()}\n")
    (ctx.folder / "clock.txt").write_text("".join(clock))
    for fname, cmd in (("dmesg.txt", "dmesg"), ("dmesg-T.txt", "dmesg -T"), ("dmesg-iso.txt", "dmesg --time-format iso")):
        rc, out = sh(cmd)
        if rc != 0:
            ctx.note(f"`{cmd}` failed (exit {rc}): {out.strip()[:200]}")
            continue
        lines = out.splitlines()
        shown = f"{cmd} > {fname}"
        if len(out) > 250_000:
            lines = lines[-2000:]
            out = "\n".join(lines) + "\n"
            shown = f"{cmd} | tail -n 2000 > {fname}"
        (ctx.folder / fname).write_text(out)
        ctx.ev("rec_file", file=fname, command=shown + "  (taken right after the job ended)")
    ctx.ev("rec_file", file="clock.txt", command="date --iso-8601=ns; date -u --iso-8601=ns; date +%s.%N; "
                                                 "grep btime /proc/stat; cat /proc/uptime  (with the dmesg files)")


class Recorder:
    def __init__(self, out: Path, half: str, tgz: Path | None, deadline: float):
        self.out, self.half, self.tgz, self.deadline = out, half, tgz, deadline
        (out / half).mkdir(parents=True, exist_ok=True)
        (out / "_runs" / half).mkdir(parents=True, exist_ok=True)
        self.env = probe()
        (out / "_runs" / half / "env.json").write_text(json.dumps(self.env, indent=1))
        say(f"probe: {json.dumps(self.env)}")

    def pack(self) -> None:
        if not self.tgz:
            return
        tmp = self.tgz.with_name(self.tgz.name + ".tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(self.out, arcname="corpus")
        tmp.replace(self.tgz)

    def run_all(self, cases, only: list[str] | None) -> None:
        for case in cases:
            if only and case.name not in only:
                continue
            left = self.deadline - (time.monotonic() - T0)
            if case.estimate + 8 > left:
                say(f"SKIP {case.name}: needs ~{case.estimate:.0f}s, {left:.0f}s left")
                continue
            say(f"BEGIN {case.name} (estimate {case.estimate:.0f}s, {left:.0f}s left)")
            t = time.monotonic()
            try:
                self.record(case, min(case.timeout, left - 6))
            except Exception as e:  # noqa: BLE001
                say(f"ERROR {case.name}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            say(f"END {case.name} after {time.monotonic() - t:.1f}s")
            try:
                self.pack()
            except Exception as e:  # noqa: BLE001
                say(f"pack failed: {e}")

    def record(self, case, timeout: float) -> None:
        folder = self.out / case.half / case.name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        sidefile = self.out / "_runs" / case.half / f"{case.name}.jsonl"
        sidefile.unlink(missing_ok=True)
        w = time.time() + 15
        while gpu_busy() and time.time() < w:
            time.sleep(0.5)
        ctx = Ctx(self, case, folder, sidefile, timeout)
        ctx.ev("rec_case", **case.meta(), env=self.env, timeout=timeout)
        try:
            ctx.start_loggers(case.loggers)
            if case.loggers:
                ctx.sleep(3.0)
            case.scenario(ctx)
            if ctx.loggers_running:
                ctx.sleep(4.0)
        except CaseTimeout as e:
            ctx.note(f"the recorder stopped the case: {e}")
            say(f"  TIMEOUT {case.name}")
        except Exception as e:  # noqa: BLE001
            ctx.note(f"recorder error: {type(e).__name__}: {e}")
            say(f"  scenario error {case.name}: {traceback.format_exc()}")
        finally:
            ctx.cleanup()
            ctx.stop_loggers("after_job")
        if case.kernel:
            try:
                capture_kernel(ctx)
            except Exception as e:  # noqa: BLE001
                ctx.note(f"kernel log capture failed: {e}")
        ctx.ev("rec_case_end")
        try:
            t = truthmod.write_case(folder, sidefile)
            say(f"  truth: verdict {t['expected_verdict']} onset {t.get('leak_onset_step')} "
                f"{t.get('leak_onset_time')} rate/step {t.get('rate_bytes_per_step')} "
                f"jobs {[(j['pid'], j['ending']) for j in t['jobs']]}")
        except Exception:  # noqa: BLE001
            say(f"  truth failed: {traceback.format_exc()}")


def main() -> None:
    global LOGFILE, PIDS_FILE
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--half", help="a half of the cases module (--list shows them)")
    p.add_argument("--out", type=Path)
    p.add_argument("--tgz", type=Path)
    p.add_argument("--deadline", type=float, default=540.0)
    p.add_argument("--only", help="comma-separated case names")
    p.add_argument("--list", action="store_true")
    p.add_argument("--cases-module", default="cases", help=argparse.SUPPRESS)
    a = p.parse_args()
    import importlib
    cases = importlib.import_module(a.cases_module)
    if a.list:
        for half in cases.CASES:
            for c in cases.CASES[half]:
                print(f"{half:8s} {c.name:34s} ~{c.estimate:3.0f}s {c.verdict:12s} {','.join(c.loggers)}")
        return
    if not (a.half and a.out):
        p.error("--half and --out are needed")
    if a.half not in cases.CASES:
        p.error(f"--half {a.half}: not a half of {a.cases_module} (choose from {', '.join(cases.CASES)})")
    a.out.mkdir(parents=True, exist_ok=True)
    LOGFILE = a.out / "_runs" / f"{a.half}-driver.log"
    LOGFILE.parent.mkdir(parents=True, exist_ok=True)
    PIDS_FILE = a.out / "_runs" / f"{a.half}-pids.txt"

    def on_term(signum, frame):
        raise Terminated()
    signal.signal(signal.SIGTERM, on_term)
    try:   # orphans (a residual worker whose trainer was killed) are re-parented to us, so we can reap them
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)       # PR_SET_CHILD_SUBREAPER
    except Exception as e:  # noqa: BLE001
        say(f"no subreaper: {e}")
    t = time.monotonic()
    if a.cases_module == "cases":
        import torch  # noqa: F401  (imported once here; every forked job reuses it; CUDA is not initialised)
    say(f"import torch took {time.monotonic() - t:.1f}s")
    rec = Recorder(a.out, a.half, a.tgz, a.deadline)
    try:
        rec.run_all(cases.CASES[a.half], a.only.split(",") if a.only else None)
        say("done")
    except Terminated:
        say("terminated (SIGTERM)")
    finally:
        rec.pack()


if __name__ == "__main__":
    main()
