#!/usr/bin/env python3
"""Record real GPU memory incidents into sample_logs/<incident>/ folders.

Runs on a Linux machine with one NVIDIA GPU, nvidia-smi, PyTorch (for workloads.py), nvcc and
compute-sanitizer, as root (for the memory cgroup and dmesg). Standard library only.

For each incident it starts the nvidia-smi loggers people use, runs one workload from workloads.py
(stdout = step-marker training log, stderr = its errors), stops the loggers a few seconds after the
workload ends, and writes the folder's README.md from what the workload itself recorded in its side
file (pid, step times, allocator numbers, the step where the leak begins). No log is edited.

    python3 record.py --out /tmp/rec [--only NAME,NAME] [--deadline SECONDS] [--tgz FILE]

sample_logs/README.md describes the folders and the README front matter.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # tools/: recorder_common.py

from recorder_common import MemoryCgroup, iso, read_rows, sh, stop_groups, zone_name  # noqa: E402

MiB = 2**20
GiB = 2**30

GPU_QUERY = "timestamp,index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free"
APPS_QUERY = "timestamp,gpu_uuid,pid,process_name,used_memory"
APPS_QUERY_NO_TIME = "gpu_uuid,pid,process_name,used_memory"
LOGGER_FILES = ("nvidia-smi.csv", "nvidia-smi-l1.csv", "compute-apps.csv", "dmon.txt")
KERNEL_FILES = ("dmesg.txt", "dmesg-T.txt", "dmesg-iso.txt")
KERNEL_MAX_BYTES = 200_000
KERNEL_TAIL_LINES = 1500
CGROUP_LIMIT = "4G"


@dataclass
class Incident:
    name: str
    kind: str                        # a workloads.py kind, or "sanitizer_cpp"
    args: list[str] = field(default_factory=list)
    verdict: str = "no_leak"
    findings: list[str] = field(default_factory=list)
    pattern: str | None = None
    story: str = ""
    estimate: float = 40.0           # seconds, for the deadline
    timeout: float = 120.0
    loggers: bool = True
    sanitizer: bool = False          # run the workload under compute-sanitizer --leak-check full
    kernel: bool = False             # capture dmesg (raw, -T, iso) and the clocks afterwards
    cgroup: bool = False             # run inside a small memory cgroup
    residual: bool = False
    snapshots: bool = False
    onset_from_data: bool = False    # the onset is where allocated starts to grow, not where the code's bug starts


INCIDENTS = [
    Incident(
        "environment", "environment", loggers=False, estimate=15,
        story="Snapshots of the idle machine before any workload: the plain `nvidia-smi` table, "
              "`nvidia-smi -q -d MEMORY`, `compute-sanitizer --version` and `--help`, and the versions "
              "of the software used. Not an incident: there is no expected verdict here; the files are "
              "real samples for the parsers."),
    Incident(
        "sanitizer_cpp_text", "sanitizer_cpp", loggers=False, verdict="leak", findings=["sanitizer_leak"],
        estimate=30,
        story="`tools/record/leaky.cu`, a small CUDA C++ program with two known leaks at distinct call sites "
              "(`make_scratch`: one 1 MiB buffer never freed; `load_table`: called three times, 256 KiB "
              "each, none freed), built with `nvcc -lineinfo -g -Xcompiler -rdynamic` and run under "
              "`compute-sanitizer --leak-check full`; stdout and stderr of the run together in "
              "`sanitizer.txt`. The program calls `cudaDeviceReset()` before it returns, so the leak "
              "check runs at that point."),
    Incident(
        "sanitizer_cpp_xml", "sanitizer_cpp", loggers=False, verdict="leak", findings=["sanitizer_leak"],
        estimate=15,
        story="The same program as `sanitizer_cpp_text`, run once more under "
              "`compute-sanitizer --leak-check full` with XML output to `leaky.xml`. That run also printed "
              "the same report as text on the terminal; it is not kept here (the text form is in "
              "`sanitizer_cpp_text`), so this folder holds each leak once."),
    Incident(
        "leak_linear_oom", "linear_oom", ["--steps", "400", "--period", "0.3", "--onset", "20",
                                          "--fraction", "0.09"],
        verdict="leak", findings=["leak", "gpu_oom"], pattern="linear", estimate=60, timeout=150,
        story="A training loop (MLP 4096-4096-4096, Adam, batch 4096) that, from the onset step on, "
              "computes a monitoring loss on a fixed batch with autograd on and adds it to a running "
              "total without `.item()` (`monitor_total += mse(model(x_mon), y_mon)`). Every step's graph "
              "stays alive with the activations it saved, so `allocated` grows by the same amount each "
              "step until the process reaches the cap set with "
              "`torch.cuda.set_per_process_memory_fraction(0.09)` and dies of a CUDA OOM (the real "
              "traceback is at the end of `stderr.log`)."),
    Incident(
        "leak_linear", "linear", ["--steps", "100", "--period", "0.25", "--onset", "21"],
        verdict="leak", findings=["leak"], pattern="linear", estimate=45,
        story="A training loop (one Linear 1024->6400, SGD, batch 4096) that, from the onset step on, "
              "appends each step's logits (4096 x 6400 fp32 = 100 MiB) to a list for an epoch-end "
              "metric, without `.detach().cpu()`. `allocated` grows 100 MiB a step; the run ends "
              "normally after its last step and the memory goes back when the process exits."),
    Incident(
        "leak_staircase_optimizer", "staircase", ["--steps", "84", "--steps-per-epoch", "12",
                                                  "--period", "0.3"],
        verdict="leak", findings=["leak"], pattern="step", estimate=45,
        story="A training loop (MLP 8192-8192-8192, 2 x 256 MiB of weights) that builds a new Adam "
              "optimizer and CosineAnnealingLR scheduler at the start of every epoch and appends the "
              "scheduler to a list; each kept scheduler holds its optimizer and that optimizer's state "
              "(exp_avg and exp_avg_sq, 1 GiB), which Adam allocates at the epoch's first step. Memory "
              "rises by one stair per epoch. The first epoch's optimizer state is legitimate; the leak "
              "begins with the second optimizer (the onset step)."),
    Incident(
        "host_oom_pin_memory", "pin_memory", ["--steps", "150", "--period", "0.25"],
        verdict="no_leak", findings=["oom_kill"], estimate=40, timeout=90, cgroup=True, kernel=True,
        story="A DataLoader (2 workers, `pin_memory=True`, batches of 64 MiB) whose batches are appended "
              "to a replay list: the pinned host buffers pile up by 64 MiB a step. The process runs in a "
              f"memory cgroup limited to {CGROUP_LIMIT}, so the kernel kills it when the cgroup is full "
              "(the kernel's lines are in the dmesg files). GPU memory stays flat all along: the leak is "
              "in host memory, so the GPU verdict is no leak, and the finding that matters is the kernel "
              "kill of the training process."),
    Incident(
        "residual_worker", "residual", ["--steps", "400", "--period", "0.3", "--worker-gib", "6"],
        verdict="leak", findings=["residual_process"], estimate=45, timeout=90, residual=True,
        story="A trainer starts a `torch.multiprocessing` (spawn) eval worker that allocates 6 GiB on the "
              "GPU and waits. The trainer is killed with SIGKILL after about 20 steps; the worker lives "
              "on, orphaned, and keeps its 6 GiB, as seen in `compute-apps.csv` after the trainer's pid "
              "is gone. The worker is killed about 12 s later (by the recorder, SIGKILL)."),
    Incident(
        "healthy_sawtooth", "sawtooth", ["--steps", "80", "--period", "0.3"],
        verdict="no_leak", estimate=40,
        story="A training loop that buffers predictions (300 MiB a step) over a 10-step evaluation "
              "window, then reduces them, clears the buffer and calls `torch.cuda.empty_cache()`: memory "
              "climbs for 10 steps and returns to the same baseline, 8 times. Not a leak."),
    Incident(
        "healthy_stable_footprint", "stable", ["--steps", "70", "--period", "0.3", "--gib", "100"],
        verdict="no_leak", estimate=40, snapshots=True,
        story="A process that takes a large footprint at start (100 GiB: weights and a preallocated "
              "cache) and then trains with flat memory. High memory, no growth: not a leak. The plain "
              "`nvidia-smi` table and `nvidia-smi -q -d MEMORY` were captured while it ran."),
    Incident(
        "healthy_warmup", "warmup", ["--steps", "80", "--period", "0.3"],
        verdict="no_leak", estimate=40,
        story="A bounded feature cache fills during the first 15 steps, each step adding less than the "
              "step before (512 MiB x 0.75^k, about 2 GiB in all), and nothing after: warm-up growth "
              "that flattens. Not a leak."),
    Incident(
        "cache_growth_fragmentation", "cache_growth", ["--steps", "80", "--period", "0.3"],
        verdict="cache_growth", findings=["cache_growth"], estimate=40,
        story="Batches sorted by length: each step needs a temporary buffer 8 MiB larger than the step "
              "before (64 MiB + 8 MiB x step), freed at once. No cached block is ever large enough, so "
              "PyTorch's caching allocator reserves a new segment every step and keeps the freed ones "
              "cached: `cached` (reserved) and nvidia-smi's memory.used grow while `allocated` at the "
              "end of each step stays flat. The caching allocator, not a leak."),
    Incident(
        "sanitizer_torch_cache", "alloc_cache", ["--steps", "3"], loggers=False, sanitizer=True,
        verdict="no_leak", findings=["sanitizer_leak"], estimate=120, timeout=240,
        story="A short PyTorch program under `compute-sanitizer --leak-check full`: three steps that "
              "each allocate 2 x 256 MiB, compute, and free the tensors. PyTorch's caching allocator keeps "
              "the freed segments cached and nothing calls `torch.cuda.empty_cache()` before exit, so the "
              "sanitizer reports the allocator's cached segments as unfreed at exit (`sanitizer.log`). "
              "`allocated` is 0 at every step: no tensor leaked; what the sanitizer lists is the cache."),
    Incident(
        "sanitizer_torch_train_oom", "linear_oom", ["--steps", "400", "--period", "0.3", "--onset", "20",
                                                    "--fraction", "0.09"],
        verdict="leak", findings=["leak", "gpu_oom"], pattern="linear", estimate=120, timeout=300,
        sanitizer=True, kernel=True, onset_from_data=True,
        story="The training workload of `leak_linear_oom` (a monitoring loss summed without `.item()` from "
              "step 20 on) run under `compute-sanitizer --leak-check full --log-file sanitizer.log`, with "
              "the nvidia-smi loggers around it and the kernel log captured afterwards. Under the sanitizer "
              "the run behaved differently from the plain one: `allocated` grew from the first steps on "
              "(the memory of each step's forward and backward pass was not given back to PyTorch's "
              "allocator while the sanitizer ran; the cause was not established), faster still once the "
              "monitoring leak began at step 20, until the process reached its cap and died of a CUDA OOM. "
              "The sanitizer then reported that the process did not terminate successfully and listed no "
              "leak records. The dmesg files were taken on a machine that had run `host_oom_pin_memory` "
              "earlier in the same boot, so they also hold that incident's kernel kill lines, minutes "
              "before this run began."),
    Incident(
        "leak_eval_oom", "eval_oom", ["--steps", "400", "--period", "0.3", "--onset", "20", "--fraction", "0.09"],
        verdict="leak", findings=["leak", "gpu_oom"], pattern="linear", estimate=50, timeout=150,
        story="An evaluation job (MLP 4096-4096-4096, forward only, batches of 4096) that, after 19 warm-up "
              "batches, adds each batch's loss to a running total without `.item()` and outside "
              "`torch.no_grad()` (`total += loss`): every step's graph stays alive with the tensors it "
              "saved, so `allocated` grows by the same amount each step until the process reaches the cap "
              "set with `torch.cuda.set_per_process_memory_fraction(0.09)` and dies of a CUDA OOM (the real "
              "traceback is at the end of `stderr.log`). No compute-sanitizer: the plain twin of "
              "`sanitizer_torch_eval_oom`."),
    Incident(
        "sanitizer_torch_eval_oom", "eval_oom", ["--steps", "400", "--period", "0.3", "--onset", "20",
                                                 "--fraction", "0.09"],
        verdict="leak", findings=["leak", "gpu_oom", "sanitizer_leak"], pattern="linear",
        estimate=150, timeout=300, sanitizer=True, kernel=True, onset_from_data=True,
        story="The evaluation job of `leak_eval_oom` (from step 20 on, each batch's loss is summed without "
              "`.item()` and outside `torch.no_grad()`) run under `compute-sanitizer --leak-check full "
              "--log-file sanitizer.log`, with the nvidia-smi loggers around it and the kernel log captured "
              "afterwards on a freshly booted machine. Under the sanitizer, `allocated` grew from the second "
              "step on, before the code's own leak began (the graphs of the warm-up batches, dropped after "
              "`.item()`, did not give their memory back while the sanitizer ran; the plain run of the same "
              "workload, `leak_eval_oom`, stays flat until step 20; the cause was not established), and "
              "faster from step 20 on, until the process reached its cap and died of a CUDA OOM. At exit "
              "the sanitizer listed every segment PyTorch still held (the first 100 of them printed, with "
              "host backtraces down to the Python line that allocated them)."),
    Incident(
        "incident_linear_oom", "preprocess_oom", ["--steps", "400", "--period", "0.3", "--onset", "20",
                                                  "--fraction", "0.09"],
        verdict="leak", findings=["leak", "gpu_oom", "sanitizer_leak"], pattern="linear",
        estimate=150, timeout=300, sanitizer=True, kernel=True,
        story="The project's showcase: one run that produced all four kinds of input. A GPU feature-"
              "preprocessing job (elementwise: normalize and squash batches of 256 MiB) that, after 19 "
              "warm-up batches, keeps every processed batch in a list on the GPU to export at the end "
              "(`processed.append(feats)`): `allocated` grows by the same amount each step until the "
              "process reaches the cap set with `torch.cuda.set_per_process_memory_fraction(0.09)` and "
              "dies of a CUDA OOM (the real traceback is at the end of `stderr.log`). It ran under "
              "`compute-sanitizer --leak-check full --log-file sanitizer.log`, with the nvidia-smi loggers "
              "around it and the kernel log captured afterwards. At exit the sanitizer lists the segments "
              "PyTorch still held, with host backtraces down to the Python line that allocated them."),
]


# ---- small helpers -----------------------------------------------------------------------------

T0 = time.monotonic()
LOG: list[str] = []


def say(msg: str) -> None:
    line = f"[{time.monotonic() - T0:6.1f}s] {msg}"
    print(line, flush=True)
    LOG.append(line)


def gpu_apps() -> list[str]:
    rc, out = sh(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], timeout=15)
    return [x.strip() for x in out.splitlines() if x.strip().isdigit()] if rc == 0 else []


def wait_gpu_idle(limit: float = 15) -> None:
    end = time.time() + limit
    while time.time() < end and gpu_apps():
        time.sleep(0.5)


# ---- loggers -----------------------------------------------------------------------------------

class Loggers:
    """The nvidia-smi loggers people run beside a job, each writing its own file."""

    def __init__(self, folder: Path, errdir: Path, apps_query: str):
        self.procs: list[subprocess.Popen] = []
        self.files = []
        cmds = {
            "nvidia-smi.csv": ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv", "-lms", "500"],
            "nvidia-smi-l1.csv": ["nvidia-smi", "--query-gpu=index,memory.used,memory.total",
                                  "--format=csv", "-l", "1"],
            # the way people log per-process memory: a shell loop appending, headers repeated
            "compute-apps.csv": ["sh", "-c", f"while :; do nvidia-smi --query-compute-apps={apps_query} "
                                             f"--format=csv; sleep 0.5; done"],
            "dmon.txt": ["nvidia-smi", "dmon", "-s", "m", "-o", "DT"],
        }
        self.commands = {name: " ".join(cmd) if cmd[0] != "sh" else cmd[2] for name, cmd in cmds.items()}
        for name, cmd in cmds.items():
            out = open(folder / name, "w")
            err = open(errdir / f"{folder.name}.{name}.stderr", "w")
            self.files += [out, err]
            self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True))

    def stop(self) -> None:
        stop_groups(self.procs)
        for f in self.files:
            f.close()


# ---- kernel log and memory cgroup --------------------------------------------------------------

def capture_kernel(folder: Path, clock_file: Path, notes: list[str]) -> dict:
    """dmesg three ways at the same moment, and the clocks that tie uptime to wall time (written beside
    the side files, not in the incident folder: that folder holds the logs a user would have, only)."""
    clock = []
    for cmd in ("date --iso-8601=ns", "date -u --iso-8601=ns", "date +%s.%N", "grep btime /proc/stat",
                "cat /proc/uptime", "uptime"):
        rc, out = sh(cmd, timeout=10)
        clock.append(f"$ {cmd}\n{out.rstrip()}\n")
    outs = {}
    for name, cmd in zip(KERNEL_FILES, (["dmesg"], ["dmesg", "-T"], ["dmesg", "--time-format", "iso"])):
        rc, out = sh(cmd, timeout=20)
        if rc != 0:
            notes.append(f"`{' '.join(cmd)}` failed (exit {rc}): {out.strip()[:200]}")
            continue
        outs[name] = out
    clock_file.write_text("".join(clock))
    if any(len(o) > KERNEL_MAX_BYTES for o in outs.values()):
        notes.append(f"the dmesg files keep the last {KERNEL_TAIL_LINES} lines of the ring buffer "
                     f"(`dmesg ... | tail -n {KERNEL_TAIL_LINES}`), to stay small")
        outs = {k: "\n".join(v.splitlines()[-KERNEL_TAIL_LINES:]) + "\n" for k, v in outs.items()}
    for name, out in outs.items():
        (folder / name).write_text(out)
    return kernel_facts(folder)


def kernel_facts(folder: Path) -> dict:
    """The kernel's kills as the dmesg files show them: the first one, and any after it."""
    def read(name):
        p = folder / name
        return p.read_text(errors="replace") if p.exists() else ""
    kills = []
    for i, line in enumerate(read("dmesg.txt").splitlines(), 1):
        m = re.search(r"Killed process (\d+) \((.*?)\)", line)
        if m:
            up = re.match(r"\[\s*(\d+\.\d+)\]", line)
            kills.append({"pid": int(m.group(1)), "comm": m.group(2), "line": i, "uptime": up and up.group(1)})
    times = {}
    for line in read("dmesg-iso.txt").splitlines():
        m = re.match(r"(\S+) .*Killed process (\d+) ", line)
        if m:
            times.setdefault(int(m.group(2)), m.group(1))
    if not kills:
        return {}
    first = kills[0]
    return {"killed_pid": first["pid"], "killed_comm": first["comm"], "kill_line": first["line"],
            "kill_uptime": first["uptime"], "kill_time_local": times.get(first["pid"]),
            "later_kills": [f"pid {k['pid']} ({k['comm']}) at uptime {k['uptime']} s, dmesg.txt line {k['line']}"
                            for k in kills[1:]]}


class Cgroup(MemoryCgroup):
    """The memory cgroup of the host OOM workload, which joins it through a shell (`wrap`)."""

    def wrap(self, cmd: list[str]) -> list[str]:
        if not self.procs:
            return cmd
        # the shell joins the cgroup, then becomes the workload: the workload's pid is the shell's
        return ["sh", "-c", 'echo $$ > "$GF_CGROUP_PROCS" && exec "$@"', "sh", *cmd]

    def env(self) -> dict:
        return {"GF_CGROUP_PROCS": self.procs} if self.procs else {}


# ---- facts from the side file ------------------------------------------------------------------

def leak_facts(rows: list[dict], inc: Incident) -> dict:
    """What the workload measured: pid, steps, onset, leak per step (from allocator numbers)."""
    start = next((r for r in rows if r["ev"] == "start"), None)
    facts: dict = {}
    if not start:
        return facts
    pid = start["pid"]
    steps = [r for r in rows if r["ev"] == "step" and r["pid"] == pid]
    facts.update(pid=pid, start_time=start["t"], torch=start.get("torch"), gpu_name=start.get("gpu"),
                 gpu_total=start.get("gpu_total"))
    if len(steps) > 1:     # measured pace (a workload without pacing has none worth stating)
        pace = statistics.median(b["t"] - a["t"] for a, b in zip(steps, steps[1:]))
        facts["step_seconds"] = round(pace, 3) if pace > 0.05 else None
    if steps:
        facts.update(allocated_min=min(s["allocated"] for s in steps), allocated_max=max(s["allocated"] for s in steps),
                     reserved_first=steps[0]["reserved"], reserved_max=max(s["reserved"] for s in steps))
        facts.update(steps=len(steps), first_step_time=steps[0]["t"], last_step_time=steps[-1]["t"],
                     last_step=steps[-1]["step"], last_allocated=steps[-1]["allocated"],
                     last_reserved=steps[-1]["reserved"])
        facts["max_allocated_step"] = max(s["allocated"] for s in steps)
        facts["max_reserved_step"] = max(s["reserved"] for s in steps)
    onset = next((r for r in rows if r["ev"] == "leak_start"), None)
    by_step = {s["step"]: s for s in steps}
    if onset and inc.pattern:
        # the onset is the first step marker that shows the growth: at or after the step where the code
        # starts keeping memory, or anywhere when something else (the sanitizer) made it grow earlier
        facts["code_leak_step"] = onset["step"]
        first = 1 if inc.onset_from_data else onset["step"]
        growing = [s for s in sorted(by_step) if s >= first and s - 1 in by_step
                   and by_step[s]["allocated"] - by_step[s - 1]["allocated"] > 16 * MiB]
        onset = {"step": growing[0]} if growing else onset
    if onset and inc.pattern:
        k = onset["step"]
        facts["onset_step"] = k
        if k in by_step:
            facts["onset_time"] = by_step[k]["t"]
        before = by_step.get(k - 1)
        deltas = [by_step[s]["allocated"] - by_step[s - 1]["allocated"]
                  for s in sorted(by_step) if s >= k and s - 1 in by_step]
        if inc.pattern == "step":
            firsts = [r["first_step"] for r in rows if r["ev"] == "epoch" and r["first_step"] >= k]
            jumps = [by_step[s]["allocated"] - by_step[s - 1]["allocated"]
                     for s in firsts if s in by_step and s - 1 in by_step]
            if jumps:
                facts["leak_bytes_per_epoch"] = int(statistics.median(jumps))
                facts["epochs_leaked"] = len(jumps)
            facts["steps_per_epoch"] = start.get("steps_per_epoch")
        elif deltas:
            facts["leak_bytes_per_step"] = int(statistics.median(deltas))
        if before and steps and steps[-1]["step"] > k:
            last = steps[-1]
            growth = last["allocated"] - before["allocated"]
            span = last["t"] - before["t"]
            facts["leak_growth_bytes"] = growth
            if span > 0:
                facts["leak_bytes_per_hour"] = int(growth / span * 3600)
            if inc.pattern == "step":
                facts["leak_bytes_per_step"] = int(growth / (last["step"] - before["step"]))
    if inc.kind == "pin_memory" and steps:
        host = [s.get("host", {}).get("VmRSS") for s in steps]
        host = [h for h in host if h]
        if len(host) > 2:
            deltas = [b - a for a, b in zip(host, host[1:])]
            facts["host_bytes_per_step"] = int(statistics.median(deltas))
            facts["host_rss_first"], facts["host_rss_last"] = host[0], host[-1]
        facts["pinned"] = all(s.get("pinned") for s in steps)
        lk = next((r for r in rows if r["ev"] == "leak_start"), {})
        facts["loader_worker_pids"] = lk.get("worker_pids")
    oom = next((r for r in rows if r["ev"] == "oom"), None)
    if oom:
        facts.update(oom_step=oom["step"], oom_time=oom["t"], oom_allocated=oom["allocated"],
                     oom_reserved=oom["reserved"], cap_bytes=start.get("cap_bytes"))
    ready = next((r for r in rows if r["ev"] == "worker_ready"), None)
    if ready:
        facts.update(worker_pid=ready["pid"], worker_bytes=ready["bytes"], worker_ready_time=ready["t"])
    return facts


# ---- README ------------------------------------------------------------------------------------

def inputs_of(folder: Path) -> list[str]:
    """The files of a folder that the tool must recognize (README's `inputs`)."""
    names = [n for n in (*LOGGER_FILES, "train.log", "nvidia-smi-table.txt", "nvidia-smi-q-memory.txt",
                         "sanitizer.log", "sanitizer.txt", "leaky.xml", *KERNEL_FILES)
             if (folder / n).exists() and (folder / n).stat().st_size]
    err = folder / "stderr.log"
    if err.exists() and "OutOfMemoryError" in err.read_text(errors="replace"):
        names.append("stderr.log")     # the CUDA OOM traceback
    return names


def old_readme(folder: Path) -> tuple[dict, dict, list[str]]:
    """Front matter, file descriptions and notes of a README written earlier by this script."""
    front, files, notes = {}, {}, []
    try:
        text = (folder / "README.md").read_text()
    except OSError:
        return front, files, notes
    head, _, body = text.partition("\n---\n")
    for line in head.splitlines()[1:]:
        k, _, v = line.partition(": ")
        front[k] = v
    section = ""
    for line in body.splitlines():
        if line.startswith("## "):
            section = line
        elif section == "## Files" and (m := re.match(r"- `([^`]+)`: (.*)", line)):
            files[m.group(1)] = m.group(2)
        elif section.startswith("## Notes") and line.startswith("- "):
            notes.append(line[2:])
    return front, files, notes

def front_matter(pairs: list[tuple[str, object]]) -> str:
    lines = ["---"]
    for k, v in pairs:
        if v is None or v == [] or v == "":
            continue
        if isinstance(v, (list, tuple)):
            v = ", ".join(str(x) for x in v)
        lines.append(f"{k}: {v}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def mib(b) -> str:
    return f"{b / MiB:.1f} MiB" if b is not None else "?"


def write_readme(folder: Path, inc: Incident, facts: dict, env: dict, files: dict[str, str],
                 inputs: list[str], notes: list[str]) -> None:
    meta: list[tuple[str, object]] = [("incident", inc.name)]
    if inc.name != "environment":
        meta += [("expected_verdict", inc.verdict), ("expected_findings", inc.findings or "none")]
    meta += [
        ("pattern", inc.pattern),
        ("onset_step", facts.get("onset_step")),
        ("onset_time", iso(facts.get("onset_time"))),
        ("leak_bytes_per_step", facts.get("leak_bytes_per_step")),
        ("leak_bytes_per_epoch", facts.get("leak_bytes_per_epoch")),
        ("steps_per_epoch", facts.get("steps_per_epoch") if inc.pattern == "step" else None),
        ("leak_bytes_per_hour", facts.get("leak_bytes_per_hour")),
        ("leak_growth_bytes", facts.get("leak_growth_bytes")),
        ("pid", facts.get("pid")),
        ("worker_pid", facts.get("worker_pid")),
        ("worker_bytes", facts.get("worker_bytes")),
        ("parent_killed_time", iso(facts.get("parent_killed_at"))),
        ("worker_killed_time", iso(facts.get("worker_killed_at"))),
        ("oom_step", facts.get("oom_step")),
        ("oom_time", iso(facts.get("oom_time"))),
        ("killed_pid", facts.get("killed_pid") if inc.cgroup else None),
        ("kill_time", facts.get("kill_time_local") if inc.cgroup else None),
        ("host_bytes_per_step", facts.get("host_bytes_per_step")),
        ("leaked_bytes", facts.get("leaked_bytes")),
        ("leaked_allocations", facts.get("leaked_allocations")),
        ("leak_sites", facts.get("leak_sites")),
        ("code_leak_step", facts.get("code_leak_step")),
        ("gpu", "0" if inc.loggers else None),
        ("steps", facts.get("steps")),
        ("step_seconds", facts.get("step_seconds")),
        ("start", iso(facts.get("start_time"))),
        ("end", iso(facts.get("end_time"))),
        ("exit", facts.get("exit")),
        ("tz", env["tz"]),
        ("inputs", inputs),
    ]
    out = [front_matter(meta), f"\n# {inc.name}\n", "\n## What happened\n\n", inc.story + "\n"]
    numbers = []
    if facts.get("pid"):
        pace = f", {facts['step_seconds']} s apart" if facts.get("step_seconds") else ""
        numbers.append(f"- Workload pid {facts['pid']}; {facts.get('steps', 0)} steps logged{pace}; started "
                       f"{iso(facts.get('start_time'))}, ended {iso(facts.get('end_time'))} (UTC).")
    if facts.get("allocated_max") is not None:
        numbers.append(f"- At the step markers `allocated` ranged from {mib(facts['allocated_min'])} to "
                       f"{mib(facts['allocated_max'])}; `cached` (reserved) went from {mib(facts['reserved_first'])} "
                       f"at the first step to at most {mib(facts['reserved_max'])}.")
    if facts.get("onset_step"):
        k, c, when = facts["onset_step"], facts.get("code_leak_step"), iso(facts.get("onset_time"))
        if c is None or c == k:
            numbers.append(f"- The leak begins at step {k} ({when} UTC, the time of that step's marker line).")
        elif c < k:
            numbers.append(f"- The code starts keeping memory at step {c}; the first step marker that shows "
                           f"the growth is step {k} ({when} UTC), the onset given above.")
        else:
            numbers.append(f"- `allocated` grows from step {k} on ({when} UTC), before the code's own leak "
                           f"begins at step {c} (see What happened).")
    if facts.get("leak_bytes_per_step") and inc.pattern == "linear":
        numbers.append(f"- Measured leak: {facts['leak_bytes_per_step']} bytes "
                       f"({mib(facts['leak_bytes_per_step'])}) per step, the median step-to-step change of "
                       f"`torch.cuda.memory_allocated()` from the onset on; "
                       f"{facts.get('leak_bytes_per_hour')} bytes per hour at this pace.")
    if facts.get("leak_bytes_per_epoch"):
        numbers.append(f"- Measured leak: {facts['leak_bytes_per_epoch']} bytes "
                       f"({mib(facts['leak_bytes_per_epoch'])}) per epoch, at the first step of each epoch "
                       f"from the onset on ({facts.get('epochs_leaked')} stairs); "
                       f"{facts.get('leak_bytes_per_step')} bytes per step on average.")
    if facts.get("oom_step"):
        numbers.append(f"- The process hit its cap at step {facts['oom_step']} ({iso(facts['oom_time'])} UTC) "
                       f"with {mib(facts.get('oom_allocated'))} allocated and {mib(facts.get('oom_reserved'))} "
                       f"reserved; the cap was {mib(facts.get('cap_bytes'))}.")
    if facts.get("worker_pid"):
        numbers.append(f"- Trainer pid {facts['pid']} started eval worker pid {facts['worker_pid']} "
                       f"({mib(facts.get('worker_bytes'))}). Trainer SIGKILLed at "
                       f"{iso(facts.get('parent_killed_at'))}, worker SIGKILLed at "
                       f"{iso(facts.get('worker_killed_at'))} (UTC).")
    if inc.kind == "pin_memory":
        if facts.get("host_bytes_per_step"):
            numbers.append(f"- Host memory (VmRSS of the training process) grew {facts['host_bytes_per_step']} "
                           f"bytes ({mib(facts['host_bytes_per_step'])}) per step, from "
                           f"{mib(facts.get('host_rss_first'))} to {mib(facts.get('host_rss_last'))}; the "
                           f"batches were pinned: {facts.get('pinned')}. DataLoader worker pids: "
                           f"{facts.get('loader_worker_pids')}.")
        if facts.get("killed_pid"):
            numbers.append(f"- The kernel killed pid {facts['killed_pid']} ({facts.get('killed_comm')}) at "
                           f"{facts.get('kill_time_local')} (dmesg.txt line {facts.get('kill_line')}, uptime "
                           f"{facts.get('kill_uptime')} s); the memory cgroup was: {facts.get('cgroup')}.")
        if facts.get("later_kills"):
            numbers.append("- Then the kernel also killed " + "; ".join(facts["later_kills"]) + ".")
        if facts.get("cgroup_events"):
            numbers.append(f"- The cgroup's event counters afterwards: `{facts['cgroup_events']}`.")
    if facts.get("leaked_bytes") is not None:
        numbers.append(f"- Known leaks in the source: {facts.get('leak_sites')}; "
                       f"{facts['leaked_bytes']} bytes in {facts.get('leaked_allocations')} allocations.")
    if facts.get("exit") is not None:
        who = "compute-sanitizer (which ran the workload)" if inc.sanitizer or inc.kind == "sanitizer_cpp" \
            else "the workload"
        numbers.append(f"- Exit status of {who}: {facts['exit']}.")
    if numbers:
        out += ["\n## Numbers\n\nMeasured by the workload itself (its side file) or, for the CUDA program, known "
                "from its source.\n\n", "\n".join(numbers) + "\n"]
    out.append("\n## Files\n\n")
    for name in sorted(files):
        out.append(f"- `{name}`: {files[name]}\n")
    out.append("\n## Recorded on\n\n")
    out.append(f"- {env.get('gpu_line')}; {env.get('kernel')}; PyTorch {facts.get('torch') or env.get('torch')}; "
               f"recorded {env.get('date')}.\n")
    out.append(f"- Local time zone of the machine (the zone of nvidia-smi timestamps and of the "
               f"training log's times): {env['tz']} (UTC offset {env.get('utc_offset')}).\n")
    out.append("- Recorded by `tools/record/record.py` (see `sample_logs/README.md`); the README is "
               "written by that script from the workload's own side file, the logs are as the tools wrote "
               "them.\n")
    if notes:
        out.append("\n## Notes: what could not be recorded, or was done differently\n\n")
        out += [f"- {n}\n" for n in notes]
    (folder / "README.md").write_text("".join(out))


def cpp_facts() -> dict:
    """The known leaks of leaky.cu: its LEAK-SITE lines, 1 MiB once and 256 KiB three times."""
    lines = (HERE / "leaky.cu").read_text().splitlines()
    sites = [f"leaky.cu:{i} ({m.group(1)})" for i, line in enumerate(lines, 1)
             if (m := re.search(r"cudaMalloc\(.*LEAK-SITE (\w+)", line))]
    return {"leak_sites": "; ".join(sites), "leaked_bytes": 1048576 + 3 * 262144, "leaked_allocations": 4}


def rewrite(root: Path, pairs: list[str]) -> None:
    """Write READMEs again from a recording's own side files (no workload runs): `SRC=DEST` also
    renames the folder SRC, recorded under another incident name, to DEST."""
    env_file = root / "_driver" / "env.json"
    log = (root / "_driver" / "driver.log").read_text()
    if env_file.exists():
        env = json.loads(env_file.read_text())
    else:
        import ast
        env = ast.literal_eval(re.search(r"probe: (\{.*\})", log).group(1))
    by_name = {i.name: i for i in INCIDENTS}
    for pair in pairs:
        src, _, dest = pair.partition("=")
        dest = dest or src
        inc = by_name[dest]
        folder = root / dest
        if src != dest:
            (root / src).rename(folder)
        front, files, notes = old_readme(folder)
        if inc.kind == "sanitizer_cpp":
            facts = {**cpp_facts(), "exit": front.get("exit")}
        else:
            found = re.findall(rf"  {re.escape(src)}: facts (\{{.*\}})", log)
            facts = json.loads(found[-1]) if found else {}
            if inc.cgroup and "cgroup" not in facts:    # recorded before the driver logged these
                text = (folder / "README.md").read_text()
                if m := re.search(r"the memory cgroup was: (.*)\.$", text, re.M):
                    facts["cgroup"] = m.group(1)
                if m := re.search(r"event counters afterwards: `(.*)`", text):
                    facts["cgroup_events"] = m.group(1)
            facts = {k: v for k, v in facts.items() if k not in ("onset_step", "onset_time", "leak_bytes_per_step",
                                                                 "leak_bytes_per_hour", "leak_growth_bytes",
                                                                 "step_seconds")}
            truth = root / "_truth" / f"{src}.jsonl"
            facts.update({k: v for k, v in leak_facts(read_rows(truth), inc).items() if v is not None})
            if src != dest:
                truth.rename(root / "_truth" / f"{dest}.jsonl")
            if inc.kernel:
                facts = {k: v for k, v in facts.items() if not k.startswith("kill")}
                facts.update(kernel_facts(folder))
        files = {n: d for n, d in files.items() if (folder / n).exists()}
        inputs = inputs_of(folder) if inc.kind != "sanitizer_cpp" else [n for n in ("sanitizer.txt", "leaky.xml")
                                                                        if (folder / n).exists()]
        write_readme(folder, inc, facts, env, files, inputs, notes)
        say(f"rewrote {folder / 'README.md'}")


# ---- the recorder ------------------------------------------------------------------------------

class Recorder:
    def __init__(self, out: Path, tgz: Path | None, deadline: float, python: str, workloads: Path):
        self.out = out
        self.tgz = tgz
        self.deadline = deadline
        self.python = python
        self.workloads = workloads
        self.truth_dir = out / "_truth"
        self.err_dir = out / "_driver"
        self.truth_dir.mkdir(parents=True, exist_ok=True)
        self.err_dir.mkdir(parents=True, exist_ok=True)
        self.env = self.probe()

    def probe(self) -> dict:
        env = {"tz": zone_name(), "utc_offset": time.strftime("%z"), "date": iso(time.time())}
        rc, out = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
        env["gpu_line"] = f"NVIDIA GPU: {out.strip()}" if rc == 0 else f"nvidia-smi failed: {out.strip()}"
        env["kernel"] = "Linux " + sh(["uname", "-r"])[1].strip()
        rc, out = sh([self.python, "-c", "import torch; print(torch.__version__)"], timeout=120)
        env["torch"] = out.strip().splitlines()[-1] if rc == 0 and out.strip() else "?"
        rc, out = sh(["nvidia-smi", f"--query-compute-apps={APPS_QUERY}", "--format=csv"])
        env["apps_query"] = APPS_QUERY if rc == 0 and out.startswith("timestamp") else APPS_QUERY_NO_TIME
        say(f"probe: {env}")
        (self.err_dir / "env.json").write_text(json.dumps(env, indent=1))
        return env

    def pack(self) -> None:
        (self.out / "_driver" / "driver.log").write_text("\n".join(LOG) + "\n")
        if self.tgz:
            tmp = self.tgz.with_suffix(".tmp")
            with tarfile.open(tmp, "w:gz") as tar:
                tar.add(self.out, arcname="rec")
            tmp.replace(self.tgz)

    def run_all(self, names: list[str] | None) -> None:
        for inc in INCIDENTS:
            if names and inc.name not in names:
                continue
            left = self.deadline - (time.monotonic() - T0)
            if inc.estimate > left:
                say(f"SKIP {inc.name}: needs ~{inc.estimate:.0f}s, {left:.0f}s left")
                continue
            say(f"BEGIN {inc.name}")
            try:
                self.record(inc, min(inc.timeout, max(10.0, left - 10)))
            except Exception as e:  # one broken incident must not cost the others
                say(f"ERROR {inc.name}: {type(e).__name__}: {e}")
            say(f"END {inc.name}")
            self.pack()

    def record(self, inc: Incident, timeout: float) -> None:
        folder = self.out / inc.name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        if inc.kind == "environment":
            return self.environment(folder, inc)
        if inc.kind == "sanitizer_cpp":
            return self.sanitizer_cpp(folder, inc)
        if inc.cgroup:
            return self.host_oom(folder, inc, timeout)
        notes: list[str] = []
        facts, files, inputs = self.run_workload(folder, inc, timeout, notes)
        write_readme(folder, inc, facts, self.env, files, inputs, notes)

    # -- one workload with its loggers --
    def run_workload(self, folder: Path, inc: Incident, timeout: float, notes: list[str],
                     extra_env: dict | None = None, cgroup: Cgroup | None = None):
        wait_gpu_idle()
        truth = self.truth_dir / f"{inc.name}.jsonl"
        truth.unlink(missing_ok=True)
        env = dict(os.environ, GF_TRUTH=str(truth), PYTHONUNBUFFERED="1", **(extra_env or {}))
        cmd = [self.python, str(self.workloads), inc.kind, *inc.args]
        files: dict[str, str] = {}
        shown = "python3 workloads.py " + " ".join([inc.kind, *inc.args])
        if inc.sanitizer:
            cmd = ["compute-sanitizer", "--leak-check", "full", "--log-file", str(folder / "sanitizer.log"), *cmd]
            shown = "compute-sanitizer --leak-check full --log-file sanitizer.log " + shown
            files["sanitizer.log"] = ("compute-sanitizer's report (`--log-file`), leak records at exit")
        if cgroup:
            cmd = cgroup.wrap(cmd)
            env.update(cgroup.env())
        loggers = Loggers(folder, self.err_dir, self.env["apps_query"]) if inc.loggers else None
        if loggers:
            for name in LOGGER_FILES:
                files[name] = f"`{loggers.commands[name]} > {name}`, started before the workload, stopped ~4 s after it"
            time.sleep(2.0)          # a little idle baseline before the job
        files["train.log"] = f"stdout of `{shown}`: python logging, step markers and epoch lines"
        files["stderr.log"] = "stderr of the same process (tracebacks and warnings)"
        facts: dict = {}
        with open(folder / "train.log", "w") as so, open(folder / "stderr.log", "w") as se:
            t_start = time.time()
            proc = subprocess.Popen(cmd, stdout=so, stderr=se, env=env, start_new_session=True,
                                    cwd=str(self.workloads.parent))
            say(f"  {inc.name}: pid {proc.pid}: {' '.join(cmd)}")
            if inc.residual:
                self.kill_parent_keep_worker(proc, truth, facts)
            elif inc.snapshots:
                self.snapshots_while_running(proc, truth, folder, files)
            try:
                proc.wait(timeout=max(1.0, timeout - (time.time() - t_start)))
            except subprocess.TimeoutExpired:
                notes.append(f"the workload was stopped by the recorder after {timeout:.0f} s (time limit)")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            facts["exit"] = proc.returncode if proc.returncode >= 0 else f"killed by signal {-proc.returncode}"
            facts["end_time"] = time.time()
        try:                         # whatever the workload left behind in its session
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if loggers:
            time.sleep(4.0)          # let the loggers see the memory come back
            loggers.stop()
        facts.update({k: v for k, v in leak_facts(read_rows(truth), inc).items() if v is not None})
        if inc.kernel:
            for name in KERNEL_FILES:
                files[name] = {"dmesg.txt": "`dmesg` (raw, seconds since boot)",
                               "dmesg-T.txt": "`dmesg -T` (wall clock, local time)",
                               "dmesg-iso.txt": "`dmesg --time-format iso`"}[name] + ", taken right after the workload ended"
            facts.update(capture_kernel(folder, self.truth_dir / f"{inc.name}.clock.txt", notes))
        for name in list(files):
            p = folder / name
            if not p.exists():
                files.pop(name)
        inputs = inputs_of(folder)
        say(f"  {inc.name}: facts {json.dumps({k: v for k, v in facts.items() if k != 'loader_worker_pids'})}")
        return facts, files, inputs

    def kill_parent_keep_worker(self, proc, truth: Path, facts: dict) -> None:
        end = time.time() + 60
        while time.time() < end and proc.poll() is None:
            rows = read_rows(truth)
            steps = [r for r in rows if r["ev"] == "step"]
            if any(r["ev"] == "worker_ready" for r in rows) and steps and steps[-1]["step"] >= 20:
                break
            time.sleep(0.2)
        rows = read_rows(truth)
        worker = next((r["worker_pid"] for r in rows if r["ev"] == "start"), None)
        facts["parent_killed_at"] = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        say(f"  killed trainer {proc.pid}; worker {worker} keeps running")
        time.sleep(12.0)
        facts["worker_killed_at"] = time.time()
        if worker:
            try:
                os.kill(worker, signal.SIGKILL)
            except ProcessLookupError:
                facts["worker_gone_early"] = True
        time.sleep(0.5)

    def snapshots_while_running(self, proc, truth: Path, folder: Path, files: dict) -> None:
        end = time.time() + 60
        while time.time() < end and proc.poll() is None:
            steps = [r for r in read_rows(truth) if r["ev"] == "step"]
            if steps and steps[-1]["step"] >= 30:
                break
            time.sleep(0.2)
        for name, cmd in (("nvidia-smi-table.txt", ["nvidia-smi"]),
                          ("nvidia-smi-q-memory.txt", ["nvidia-smi", "-q", "-d", "MEMORY"])):
            rc, out = sh(cmd, timeout=20)
            (folder / name).write_text(out)
            files[name] = f"`{' '.join(cmd)}`, taken once while the workload ran (after its step 30)"

    # -- host OOM inside a memory cgroup --
    def host_oom(self, folder: Path, inc: Incident, timeout: float) -> None:
        notes: list[str] = []
        attempts = [({}, "pinned buffers from PyTorch's default pinned allocator (cudaHostAlloc)"),
                    ({"PYTORCH_CUDA_ALLOC_CONF": "pinned_use_cuda_host_register:True"},
                     "PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True (malloc + cudaHostRegister)")]
        for i, (extra, what) in enumerate(attempts):
            cg = Cgroup(CGROUP_LIMIT, "gf_pin", notes)
            if not cg.procs:
                notes.append("without a memory cgroup the host OOM would need the whole machine's memory; "
                             "the workload ran with its step cap only and was not killed")
            facts, files, inputs = self.run_workload(folder, inc, timeout, notes, extra_env=extra, cgroup=cg)
            facts["cgroup"] = cg.how or "none"
            facts["cgroup_events"] = " ".join(cg.read_events().split())
            say(f"  {inc.name}: facts {json.dumps({k: v for k, v in facts.items() if k != 'loader_worker_pids'})}")
            cg.remove()
            killed = facts.get("killed_pid") or str(facts.get("exit")).startswith("killed")
            if killed or not cg.procs or i == len(attempts) - 1:
                if i:
                    notes.append(f"pinned memory was set up with {what}")
                break
            notes.append(f"a first attempt with {what} ran {facts.get('steps')} steps inside the cgroup "
                         f"without being killed (exit {facts.get('exit')}): those pinned pages were not "
                         f"charged to the cgroup, so it was run again (this folder)")
            say(f"  {inc.name}: no kill on attempt {i + 1}, retrying")
            for p in folder.iterdir():
                p.unlink()
        write_readme(folder, inc, facts, self.env, files, inputs, notes)

    # -- compute-sanitizer on the CUDA C++ program --
    def sanitizer_cpp(self, folder: Path, inc: Incident) -> None:
        notes: list[str] = []
        src = HERE / "leaky.cu"
        build = Path("/tmp/gf_build")
        build.mkdir(exist_ok=True)
        binary = build / "leaky"
        if not binary.exists():
            shutil.copy(src, build / "leaky.cu")
            rc, out = sh(["nvcc", "-lineinfo", "-g", "-Xcompiler", "-rdynamic", "-o", "leaky", "leaky.cu"],
                         timeout=120, cwd=str(build))
            say(f"  nvcc: rc {rc} {out.strip()[:500]}")
        facts = cpp_facts()
        files: dict[str, str] = {}
        if inc.name == "sanitizer_cpp_text":
            rc, out = sh(["compute-sanitizer", "--leak-check", "full", "./leaky"], timeout=120, cwd=str(build))
            (folder / "sanitizer.txt").write_text(out)
            files["sanitizer.txt"] = "`compute-sanitizer --leak-check full ./leaky > sanitizer.txt 2>&1`"
            facts["exit"] = rc
            inputs = ["sanitizer.txt"]
        else:
            xml = folder / "leaky.xml"
            tries = [["--xml", "--log-file", str(xml)], ["--xml", "yes", "--log-file", str(xml)],
                     ["--xml", "--save", str(xml)]]
            used = None
            for opt in tries:
                xml.unlink(missing_ok=True)
                rc, out = sh(["compute-sanitizer", "--leak-check", "full", *opt, "./leaky"], timeout=120,
                             cwd=str(build))
                if xml.exists() and xml.read_bytes()[:200].lstrip().startswith(b"<"):
                    used = opt       # the terminal got the same report as text: sanitizer_cpp_text has that form
                    facts["exit"] = rc
                    break
                notes.append(f"`compute-sanitizer --leak-check full {' '.join(opt).replace(str(xml), 'leaky.xml')} "
                             f"./leaky` gave no XML (exit {rc}): {out.strip()[:300]}")
            if used is None:
                xml.unlink(missing_ok=True)
                notes.append("no XML output could be produced with this compute-sanitizer; see environment/"
                             "compute-sanitizer-help.txt")
                inputs = []
            else:
                files["leaky.xml"] = ("`compute-sanitizer --leak-check full "
                                      + " ".join(used).replace(str(xml), "leaky.xml") + " ./leaky`")
                inputs = ["leaky.xml"]
        files_note = "the program's source is `tools/record/leaky.cu` (its binary is not kept)"
        notes.insert(0, files_note)
        write_readme(folder, inc, facts, self.env, files, inputs, notes)

    # -- snapshots of the idle machine --
    def environment(self, folder: Path, inc: Incident) -> None:
        files = {}
        for name, cmd in (("nvidia-smi.txt", ["nvidia-smi"]),
                          ("nvidia-smi-q-memory.txt", ["nvidia-smi", "-q", "-d", "MEMORY"]),
                          ("compute-sanitizer-version.txt", ["compute-sanitizer", "--version"]),
                          ("compute-sanitizer-help.txt", ["compute-sanitizer", "--help"])):
            rc, out = sh(cmd, timeout=30)
            (folder / name).write_text(out)
            files[name] = f"`{' '.join(cmd)}` (exit {rc})"
        versions = []
        for cmd in ("date", "date -u", "cat /etc/timezone", "readlink -f /etc/localtime", "uname -a",
                    "nvidia-smi --version", "nvcc --version", f"{self.python} --version",
                    f"{self.python} -c 'import torch; print(torch.__version__, torch.version.cuda)'",
                    "stat -fc %T /sys/fs/cgroup", "cat /sys/fs/cgroup/cgroup.controllers",
                    "cat /sys/fs/cgroup/cgroup.subtree_control", "grep -E 'MemTotal|MemAvailable|SwapTotal' /proc/meminfo",
                    "nproc"):
            rc, out = sh(cmd, timeout=60)
            versions.append(f"$ {cmd}\n{out.rstrip()}\n")
        (folder / "versions.txt").write_text("".join(versions))
        files["versions.txt"] = "versions and settings of the machine, each command followed by its output"
        write_readme(folder, inc, {}, self.env, files, ["nvidia-smi.txt", "nvidia-smi-q-memory.txt"], [])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="folder for the incident folders")
    p.add_argument("--tgz", type=Path, help="also pack everything into this .tgz after each incident")
    p.add_argument("--only", help="comma-separated incident names")
    p.add_argument("--deadline", type=float, default=560.0, help="seconds; incidents that would run past it are skipped")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--workloads", type=Path, default=HERE / "workloads.py")
    p.add_argument("--list", action="store_true", help="list the incidents and exit")
    p.add_argument("--rewrite", metavar="SRC[=DEST],...",
                   help="write the READMEs under --out again from the side files there (runs nothing)")
    a = p.parse_args()
    if a.list:
        for inc in INCIDENTS:
            print(f"{inc.name:28s} {inc.kind:14s} ~{inc.estimate:.0f}s  {inc.verdict}")
        return
    if not a.out:
        p.error("--out is required")
    if a.rewrite:
        return rewrite(a.out, a.rewrite.split(","))
    names = a.only.split(",") if a.only else None
    if names:
        unknown = set(names) - {i.name for i in INCIDENTS}
        if unknown:
            p.error(f"unknown incidents: {', '.join(sorted(unknown))}")
    rec = Recorder(a.out, a.tgz, a.deadline, a.python, a.workloads.resolve())
    rec.run_all(names)
    rec.pack()
    say("done")


if __name__ == "__main__":
    main()
