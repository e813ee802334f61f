"""Big-input benchmark: `gpu-forensics report` on a week and a month of logs, against two floors.

    python bench/perf.py                                    # week and month of every input
    python bench/perf.py --quick                            # a day of each: a smoke run
    python bench/perf.py --sizes week --only usual,wide     # some shapes
    python bench/perf.py --sizes week --only csv            # the four CSV shapes
    python bench/perf.py --sizes month --compressed zst,gz --keep --dir /tmp/gf-perf

Generates (seeded, vectorized, streamed to disk a day at a time) under /tmp (never in the repo):
- nvidia-smi `--query-gpu` CSV, 1 Hz, 8 GPUs, a slow leak on GPU 3, in four shapes people log:
  `bench`   timestamp, index, name, pci.bus_id, memory.total, memory.used, memory.free, utilization.gpu,
            temperature.gpu (this benchmark's shape of old; a month is ~20.7 M rows, ~2.5 GB);
  `usual`   timestamp, index, uuid, name, memory.used, memory.total, utilization.gpu;
  `wide`    the monitoring query: timestamp, name, pci.bus_id, driver_version, pstate, temperature.gpu,
            utilization.gpu, utilization.memory, memory.total, memory.free, memory.used;
  `nounits` `--format=csv,noheader,nounits` of timestamp, index, memory.used, memory.total (as scripts
            write it; its columns are inferred from the values);
- kern: a syslog kern.log of ordinary kernel lines with a few complete OOM-killer reports and Xids
  (a month is 1 GB);
- step: a training log of loss/throughput lines with a memory line every tenth step (a month is 1 GB);
- freetext: the same log with its memory line in a style no family reads, `step=N loss=… gpu_mem_alloc=1.25GB
  gpu_mem_reserved=2.00GB` behind a Python logging prefix (read by the general reader).
Then times, each as its own process, back to back (peak RSS from /usr/bin/time -v, else getrusage):
- `gpu-forensics report` end to end on each input (and on .zst / .gz forms with --compressed);
- for a CSV two floors: a bare `polars.read_csv` of all columns as strings, and a lazy polars scan that
  parses only the columns the tool needs (the clock, the GPU id, memory.used); for the kern.log
  `grep -c` of its OOM lines, for the step log `grep -c` of its memory lines, for the free-text log a
  polars regex scan of its lines for one key (`gpu_mem_alloc=…GB` extracted as a number); each
  decompressor alone.
Targets: a CSV report <= 1.5x the projected scan on the month, <= 2x on the week; the kern.log <= 2x
grep; the free-text log <= 2x its polars regex scan; peak RSS <= 1.5 GB on the month. Timings are the
medians of `--repeat` runs, a report and its floors taking turns (a shared machine's speed drifts), so
the ratios are measured in one run; the load average is printed with them. Each report is also checked
against what was planted (a `planted` row): a CSV's verdict is a leak, found on GPU 3 alone, linear, its
onset within 2 % of the span of the planted one (the month is thinned before it is analyzed); the
kern.log's OOM kills are the planted ones (the victims' pids), as many as `grep -c` counts reports.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400
SIZES = {"day": 1, "week": 7, "month": 30}
GPUS = 8
LEAK_GPU = 3
T0 = datetime(2026, 10, 1, tzinfo=timezone.utc)
# a month of kern.log / step log is this big; a day or a week is the same share of it
MONTH_BYTES = 1 << 30
OOM_GREP = r"invoked oom-killer|Killed process|oom-kill:|oom_reaper"
STEP_GREP = r"allocated:"
FREETEXT_KEY = r"gpu_mem_alloc=([0-9.]+)GB"
FREETEXT_TARGET = 2.0


# -- generators ------------------------------------------------------------------------------------

def _epoch_us(seconds: np.ndarray) -> pl.Series:
    return pl.Series((int(T0.timestamp()) + seconds) * 1_000_000, dtype=pl.Int64)


# name -> (header or None, the cells of a row as polars expressions (columns t, gpu, used, util, temp),
# positions of (clock, GPU id, memory.used) for the projected floor)
def _bus(gpu: pl.Expr) -> pl.Expr:
    return pl.concat_str([pl.lit("00000000:"), gpu.replace_strict({g: f"{g * 16 + 0x18:02X}" for g in range(GPUS)},
                                                                  return_dtype=pl.String), pl.lit(":00.0")])


def _s(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.String)


TOTAL_MIB = 81559
CSV_SHAPES = {
    "bench": ("timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
              "utilization.gpu [%], temperature.gpu",
              lambda: [pl.col("t"), _s(pl.col("gpu")), pl.lit("NVIDIA H100 80GB HBM3"), _bus(pl.col("gpu")),
                       pl.lit(f"{TOTAL_MIB} MiB"), _s(pl.col("used")) + " MiB", _s(TOTAL_MIB - pl.col("used")) + " MiB",
                       _s(pl.col("util")) + " %", _s(pl.col("temp"))],
              (0, 1, 5)),
    "usual": ("timestamp, index, uuid, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]",
              lambda: [pl.col("t"), _s(pl.col("gpu")),
                       pl.concat_str([pl.lit("GPU-"), _s(pl.col("gpu") + 0x1a2b3c00), pl.lit("-1795-5579-b092-2eda825636d2")]),
                       pl.lit("NVIDIA H100 80GB HBM3"), _s(pl.col("used")) + " MiB", pl.lit(f"{TOTAL_MIB} MiB"),
                       _s(pl.col("util")) + " %"],
              (0, 1, 4)),
    "wide": ("timestamp, name, pci.bus_id, driver_version, pstate, temperature.gpu, utilization.gpu [%], "
             "utilization.memory [%], memory.total [MiB], memory.free [MiB], memory.used [MiB]",
             lambda: [pl.col("t"), pl.lit("NVIDIA H100 80GB HBM3"), _bus(pl.col("gpu")), pl.lit("550.90.07"), pl.lit("P0"),
                      _s(pl.col("temp")), _s(pl.col("util")) + " %", _s(pl.col("util") // 2) + " %",
                      pl.lit(f"{TOTAL_MIB} MiB"), _s(TOTAL_MIB - pl.col("used")) + " MiB", _s(pl.col("used")) + " MiB"],
             (0, 2, 10)),
    "nounits": (None,
                lambda: [pl.col("t"), _s(pl.col("gpu")), _s(pl.col("used")), pl.lit(str(TOTAL_MIB))],
                (0, 1, 2)),
}


LEAK_ONSET = 0.4   # the share of the span before GPU 3 starts to leak


def gen_csv(path: Path, days: int, shape: str = "bench", seed: int = 1) -> int:
    """1 Hz, 8 GPUs; GPU 3 leaks linearly from LEAK_ONSET of the span to +16 GiB at its end."""
    header, cells, _ = CSV_SHAPES[shape]
    total_s = days * DAY
    onset = int(total_s * LEAK_ONSET)
    with open(path, "wb") as fh:
        if header:
            fh.write((header + "\n").encode())
        for d in range(days):
            rng = np.random.default_rng([seed, d])
            sec = np.repeat(np.arange(d * DAY, (d + 1) * DAY, dtype=np.int64), GPUS)
            gpu = np.tile(np.arange(GPUS, dtype=np.int64), DAY)
            ms = np.repeat(rng.integers(0, 1000, DAY), GPUS)
            # training: a steady footprint with small allocator noise
            used = 61000 + gpu * 300 + rng.integers(0, 48, sec.size)
            leak = np.where((gpu == LEAK_GPU) & (sec >= onset), (sec - onset) * 16384 // max(total_s - onset, 1), 0)
            used = np.minimum(used + leak, TOTAL_MIB)
            df = pl.DataFrame({
                "t": (pl.from_epoch(_epoch_us(sec) + pl.Series(ms * 1000), "us")
                      .dt.strftime("%Y/%m/%d %H:%M:%S%.3f")),
                "gpu": gpu, "used": used, "util": rng.integers(85, 100, sec.size), "temp": rng.integers(55, 75, sec.size),
            })
            line = pl.concat_str(cells(), separator=", ")
            fh.write(df.select(line.str.join("\n"))["t"][0].encode())
            fh.write(b"\n")
    return path.stat().st_size


_KERN_ORDINARY = [
    "eth0: NIC Link is Up 100 Gbps, Flow Control: ON - receive & transmit",
    "audit: type=1400 audit({a}.{b:03d}:{c}): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.docker\" name=\"/proc/{c}/mounts\" pid={c} comm=\"dockerd\"",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
    "usb 3-1: new SuperSpeed USB device number {b} using xhci_hcd",
    "IPv6: ADDRCONF(NETDEV_CHANGE): veth{a:x}: link becomes ready",
    "docker0: port {b}(veth{a:x}) entered forwarding state",
    "nvidia-nvlink: Unregistered Nvlink Core, major device number {b}",
    "mlx5_core 0000:{b:02x}:00.0: mlx5_port_module_event:1136: Port module event: module 0, Cable plugged",
    "perf: interrupt took too long ({c} > {a}), lowering kernel.perf_event_max_sample_rate to {b}000",
    "xfs filesystem being remounted at /run/containerd/io.containerd.runtime.v2.task/k8s.io/{a:x}/rootfs",
]


def _oom_report(victim_pid: int, rss_kb: int) -> list[str]:
    """The kernel's OOM report, as 5.x prints it (messages only; the prefix is added per line)."""
    out = [
        "python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
        f"CPU: 17 PID: {victim_pid} Comm: python3 Tainted: P           OE     5.15.0-105-generic #115-Ubuntu",
        "Hardware name: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/05/2024",
        "Call Trace:",
        " <TASK>", " dump_stack_lvl+0x4a/0x63", " dump_header+0x4a/0x1f4", " oom_kill_process.cold+0xb/0x10",
        " out_of_memory+0x106/0x2e0", " __alloc_pages_slowpath.constprop.0+0x9a4/0xa50", " </TASK>",
        "Mem-Info:",
        "Tasks state (memory values in pages):",
        "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
    ]
    for i, (pid, name, rss) in enumerate([(812, "systemd-journal", 24000), (1520, "dockerd", 31000),
                                          (victim_pid, "python3", rss_kb // 4)]):
        out.append(f"[{pid:>7}]     0 {pid:>5} {rss * 3:>8} {rss:>8}  {rss * 8 // 4096 * 4096:>13} {0:>8} {0:>13} {name}")
    out += [
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,"
        f"task_memcg=/user.slice/user-1000.slice/session-3.scope,task=python3,pid={victim_pid},uid=1000",
        f"Out of memory: Killed process {victim_pid} (python3) total-vm:{rss_kb * 3}kB, anon-rss:{rss_kb}kB, "
        f"file-rss:74816kB, shmem-rss:12296kB, UID:1000 pgtables:{rss_kb // 512}kB oom_score_adj:0",
        f"oom_reaper: reaped process {victim_pid} (python3), now anon-rss:0kB, file-rss:74732kB, shmem-rss:12296kB",
    ]
    return out


def _syslog_lines(sec: np.ndarray, up_us: np.ndarray, msgs: pl.Series) -> pl.Series:
    stamp = pl.from_epoch(_epoch_us(sec), "us").dt.strftime("%b %e %H:%M:%S")
    up = pl.Series(up_us // 1_000_000).cast(pl.String).str.pad_start(5, " ")
    frac = pl.Series(up_us % 1_000_000).cast(pl.String).str.pad_start(6, "0")
    return pl.select(pl.concat_str([stamp, pl.lit(" gpunode07 kernel: ["), up, pl.lit("."), frac, pl.lit("] "),
                                    msgs])).to_series()


def oom_days(days: int, seed: int = 2) -> set[int]:
    """The days gen_kern puts an OOM report on (its victim's pid is 40000 + the day)."""
    rng = np.random.default_rng(seed)
    return set(rng.choice(days, max(1, days // 6), replace=False).tolist())


def gen_kern(path: Path, days: int, seed: int = 2) -> int:
    """A syslog kern.log of `days`/30 GB with an OOM report every ~6 days (at least one) and Xids."""
    target = MONTH_BYTES * days // 30
    per_day = target // days
    ooms = oom_days(days, seed)
    boot_s = 3 * DAY  # booted three days before the log starts
    with open(path, "wb") as fh:
        for d in range(days):
            r = np.random.default_rng([seed, d])
            n = per_day // 128
            us = np.sort(r.integers(0, DAY * 1_000_000, n))
            sec = d * DAY + us // 1_000_000
            up_us = (d * DAY + boot_s) * 1_000_000 + us
            which = r.integers(0, len(_KERN_ORDINARY), n).tolist()
            a, b, c = (r.integers(0, 1 << 28, n).tolist(), r.integers(0, 255, n).tolist(),
                       r.integers(1000, 99999, n).tolist())
            msgs = pl.Series([_KERN_ORDINARY[w].format(a=x, b=y, c=z) for w, x, y, z in zip(which, a, b, c)],
                             dtype=pl.String)
            lines = _syslog_lines(sec, up_us, msgs)
            if d in ooms:
                at = n // 2
                pid = 40000 + d
                rep = _oom_report(pid, 1_900_000_000 // 1024 * 31)
                k = len(rep)
                rsec = np.full(k, sec[at])
                rup = np.full(k, up_us[at]) + np.arange(k) * 37
                report = _syslog_lines(rsec, rup, pl.Series(rep))
                xid = _syslog_lines(np.array([sec[at]]), np.array([up_us[at] + 900_000]), pl.Series([
                    "NVRM: Xid (PCI:0000:48:00): 43, pid=%d, name=python3, Ch 00000008" % pid]))
                lines = pl.concat([lines.head(at), report, xid, lines.slice(at)])
            fh.write(lines.str.join("\n")[0].encode())
            fh.write(b"\n")
    return path.stat().st_size


def gen_step(path: Path, days: int, seed: int = 3, style: str = "markers") -> int:
    """A training log: per step a loss line, a timing line and a loader line; a memory line every
    tenth step (allocated creeping up: a slow leak on rank 0), as a `[step N] allocated: … MB` marker
    or (`style="general"`) as `key=value` pairs with GB units."""
    target = MONTH_BYTES * days // 30
    per_day = target // days
    with open(path, "wb") as fh:
        step0 = 0
        for d in range(days):
            r = np.random.default_rng([seed, d])
            n_steps = per_day // 385
            s = step0 + np.arange(n_steps)
            us = np.arange(n_steps) * (DAY * 1_000_000 // n_steps) + r.integers(0, 1000, n_steps)
            ts = (pl.from_epoch(_epoch_us(np.full(n_steps, d * DAY)) + pl.Series(us), "us")
                  .dt.strftime("%Y-%m-%d %H:%M:%S,%3f"))
            df = pl.DataFrame({"ts": ts, "s": s, "loss": 2.0 + r.random(n_steps), "g": r.random(n_steps),
                               "tps": r.integers(90000, 120000, n_steps), "dt": r.random(n_steps) / 10,
                               "ft": r.random(n_steps), "bt": r.random(n_steps) * 2, "w": r.integers(0, 8, n_steps),
                               "shard": r.integers(0, 99999, n_steps), "n": r.integers(900, 1100, n_steps)})
            alloc = 20480.0 + (s / 1e4) + r.random(n_steps)
            l1 = pl.concat_str([pl.col("ts"), pl.lit(" INFO train: step "), pl.col("s").cast(pl.String),
                                pl.lit(" | loss "), pl.col("loss").round(4).cast(pl.String), pl.lit(" | lr 3.0e-04 | grad_norm "),
                                pl.col("g").round(3).cast(pl.String), pl.lit(" | tokens/s "), pl.col("tps").cast(pl.String)])
            l2 = pl.concat_str([pl.col("ts"), pl.lit(" INFO train: step "), pl.col("s").cast(pl.String),
                                pl.lit(" | data "), pl.col("dt").round(3).cast(pl.String), pl.lit("s | fwd "),
                                pl.col("ft").round(3).cast(pl.String), pl.lit("s | bwd "), pl.col("bt").round(3).cast(pl.String),
                                pl.lit("s | opt 0.011s")])
            l3 = pl.concat_str([pl.col("ts"), pl.lit(" DEBUG dataloader: worker "), pl.col("w").cast(pl.String),
                                pl.lit(" prefetched shard "), pl.col("shard").cast(pl.String), pl.lit(" ("),
                                pl.col("n").cast(pl.String), pl.lit(" samples) from /data/shards/part-"),
                                pl.col("shard").cast(pl.String), pl.lit(".arrow")])
            mem = pl.concat_str([pl.col("ts"), pl.lit(" INFO train: [step "), pl.col("s").cast(pl.String),
                                 pl.lit("] allocated: "), pl.Series(alloc).round(2).cast(pl.String),
                                 pl.lit(" MB, cached: "), pl.Series(alloc + 4096).round(2).cast(pl.String),
                                 pl.lit(" MB")])
            if style == "general":
                mem = pl.concat_str([pl.col("ts"), pl.lit(" INFO train: step="), pl.col("s").cast(pl.String),
                                     pl.lit(" loss="), pl.col("loss").round(4).cast(pl.String), pl.lit(" gpu_mem_alloc="),
                                     (pl.Series(alloc) / 1024).round(3).cast(pl.String), pl.lit("GB gpu_mem_reserved="),
                                     ((pl.Series(alloc) + 4096) / 1024).round(3).cast(pl.String), pl.lit("GB")])
            is_mem = (pl.col("s") % 10) == 0
            out = df.select(pl.concat_list([l1, l2, l3, pl.when(is_mem).then(mem)]).list.drop_nulls()
                            .list.join("\n").alias("x"))["x"]
            fh.write(out.str.join("\n")[0].encode())
            fh.write(b"\n")
            step0 += n_steps
    return path.stat().st_size


# input -> (file name, generator(path, days))
GENERATORS = {
    **{shape: (f"nvidia-smi-{shape}.csv", lambda path, days, shape=shape: gen_csv(path, days, shape)) for shape in CSV_SHAPES},
    "kern": ("kern.log", gen_kern),
    "step": ("train.log", gen_step),
    "freetext": ("freetext.log", lambda path, days: gen_step(path, days, style="general")),
}


# -- measuring ---------------------------------------------------------------------------------------

# Runs `gpu-forensics report` in this child process, timing the change-point search inside it.
_REPORT_CHILD = r"""
import sys, time, atexit
sys.path.insert(0, {root!r})
from forensics.detect import changepoints
spent = [0.0]
orig = changepoints.change_points
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return orig(*a, **k)
    finally:
        spent[0] += time.perf_counter() - t
changepoints.change_points = timed
atexit.register(lambda: print(f"CHANGE_POINTS {{spent[0]:.3f}}", file=sys.stderr))
from forensics.cli import main
sys.argv = ["gpu-forensics", "report", *sys.argv[1:]]
main()
"""

# The free-text floor: every line read by polars and one key's number extracted with a regex.
_FLOOR_REGEX = r"""
import sys, polars as pl
df = pl.scan_csv(sys.argv[1], has_header=False, separator="\x1f", quote_char=None, infer_schema=False,
                 new_columns=["text"]).select(pl.col("text").str.extract(sys.argv[2]).cast(pl.Float64)).drop_nulls()
print(df.collect().height)
"""
_FLOOR_CSV = "import sys, polars as pl; print(pl.read_csv(sys.argv[1], infer_schema=False, has_header=False).height)"
# A lazy scan that parses only what the tool needs: the clock, the GPU id, memory.used (by position).
_FLOOR_PROJECTED = r"""
import sys, polars as pl
path, header, (t, g, u) = sys.argv[1], sys.argv[2] == "1", map(int, sys.argv[3:6])
c = pl.nth
df = pl.scan_csv(path, has_header=False, skip_rows=int(header), infer_schema=False).select(
    c(t).str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S%.f"), c(g).str.strip_chars(),
    c(u).str.strip_chars().str.strip_suffix(" MiB").cast(pl.Int64)).collect()
print(df.height)
"""
_TIME = shutil.which("time") and Path("/usr/bin/time").exists()


@dataclass
class Run:
    seconds: float
    peak_mb: float
    out: str
    cpu: float | None = None    # user + system seconds (with /usr/bin/time): steadier than wall on a shared machine
    status: int = 0


def measure(cmd: list[str], stdout=None, check: bool = True) -> Run:
    """Wall time, CPU time and peak RSS of one command (a process of its own); `check`: a failed command
    raises."""
    if _TIME:
        cmd = ["/usr/bin/time", "-f", "PEAK_KB %M CPU %U %S", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    m = re.search(r"PEAK_KB (\d+) CPU ([\d.]+) ([\d.]+)", p.stderr or "")
    # without /usr/bin/time: the largest child so far (an upper bound of this one's), no CPU time
    peak = int(m.group(1)) if m else max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    cpu = float(m.group(2)) + float(m.group(3)) if m else None
    return Run(dt, peak / 1024, (p.stdout or "") + (p.stderr or ""), cpu, p.returncode)


def _median(runs: list[Run]) -> Run:
    """The run of median time (the lower middle one of an even number), with the highest peak of all."""
    mid = sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]
    mid.peak_mb = max(r.peak_mb for r in runs)
    return mid


def report_run(path: Path, work: Path, repeat: int, floors: list[list[str]],
               floor_stdout=None) -> tuple[Run, float | None, int, list[Run], dict]:
    """(the run, seconds of change-point search inside it, HTML size, the floors' runs, the JSON summary).
    The report and its floors run in turn, so that a change in the machine's speed (a shared VM's speed
    drifts by tens of percent over minutes) falls on both sides of the ratios."""
    html, js = work / f"{path.name}.html", work / f"{path.name}.json"
    cmd = [sys.executable, "-c", _REPORT_CHILD.format(root=str(ROOT)), str(path), "-o", str(html), "--json", str(js)]
    runs, floor_runs = [], [[] for _ in floors]
    for _ in range(repeat):
        runs.append(measure(cmd))
        for f, out in zip(floors, floor_runs):
            out.append(measure(f, floor_stdout))
    run = _median(runs)
    m = re.findall(r"CHANGE_POINTS ([\d.]+)", run.out)
    summary = json.loads(js.read_text())
    run.out = summary.get("verdict") or ""
    return run, (float(m[-1]) if m else None), html.stat().st_size, [_median(r) for r in floor_runs], summary


def planted_leak(summary: dict, days: int, shape: str) -> tuple[bool, str]:
    """Whether the report found the leak gen_csv planted: verdict leak, one leak finding, on GPU 3 (its
    index, or its bus id where the query has no index), linear, its onset within 2 % of the span."""
    leaks = [f for f in summary.get("findings", []) if f.get("kind") == "leak"]
    ids = {str(LEAK_GPU), f"00000000:{LEAK_GPU * 16 + 0x18:02X}:00.0"}
    planted = T0.timestamp() + LEAK_ONSET * days * DAY
    if not leaks:
        return False, f"verdict {summary.get('verdict')}, no leak finding"
    f = leaks[0]
    onset = datetime.fromisoformat(f["start"].replace("Z", "+00:00")).timestamp() if f.get("start") else None
    off = None if onset is None else (onset - planted) / (days * DAY)
    ok = (summary.get("verdict") == "leak" and len(leaks) == 1 and f.get("gpu") in ids
          and f.get("pattern") == "linear" and off is not None and abs(off) <= 0.02)
    where = "no onset" if off is None else f"onset {off * 100:+.2f} % of the span"
    return ok, f"{summary.get('verdict')}: {len(leaks)} leak(s), GPU {f.get('gpu')}, {f.get('pattern')}, {where}"


def planted_ooms(summary: dict, days: int, grep_out: str) -> tuple[bool, str]:
    """Whether the report's OOM kills are gen_kern's (their victims' pids), one per report grep counts
    (four of its lines per report)."""
    want = sorted(40000 + d for d in oom_days(days))
    got = sorted(f.get("pid") for f in summary.get("findings", []) if f.get("kind") == "oom_kill")
    grep_lines = int(grep_out.split()[0]) if grep_out.strip() else -1
    ok = got == want and grep_lines == 4 * len(want)
    return ok, f"OOM kills of pids {got} (planted {want}); grep -c: {grep_lines} lines"


def compress(path: Path, kind: str) -> Path:
    out = path.with_name(path.name + (".zst" if kind == "zst" else ".gz"))
    if not out.exists():
        with open(out, "wb") as fh:
            cmd = ["zstd", "-q", "-c", "-3", "-T0", str(path)] if kind == "zst" else ["gzip", "-c", "-6", str(path)]
            subprocess.run(cmd, stdout=fh, check=True)
    return out


def decompress_cmd(path: Path) -> list[str]:
    return (["zstd", "-q", "-d", "-c", str(path)] if path.suffix == ".zst" else ["gzip", "-d", "-c", str(path)])


@dataclass
class Row:
    input: str
    size_mb: float
    what: str
    seconds: float
    peak_mb: float | None
    floor: str = ""
    floor_s: float | None = None
    ratio: float | None = None
    target: str = ""
    ok: bool | None = None
    note: str = ""
    cpu: float | None = None      # user + system seconds of the timed command
    floor_cpu: float | None = None


def _fmt(rows: list[Row]) -> str:
    head = (f"{'input':<26} {'MB':>7} {'what':<30} {'s':>7} {'CPU s':>6} {'peak MB':>8} {'floor':<24} {'floor s':>7} "
            f"{'CPU s':>6} {'ratio':>6} {'target':<9} ok")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.input:<26} {r.size_mb:>7.0f} {r.what:<30} {r.seconds:>7.2f} "
            f"{(f'{r.cpu:.2f}' if r.cpu is not None else ''):>6} "
            f"{(f'{r.peak_mb:.0f}' if r.peak_mb is not None else ''):>8} {r.floor:<24} "
            f"{(f'{r.floor_s:.2f}' if r.floor_s is not None else ''):>7} "
            f"{(f'{r.floor_cpu:.2f}' if r.floor_cpu is not None else ''):>6} "
            f"{(f'{r.ratio:.2f}' if r.ratio is not None else ''):>6} {r.target:<9} "
            f"{'' if r.ok is None else ('yes' if r.ok else 'NO')}{('  ' + r.note) if r.note else ''}")
    return "\n".join(lines)


def _load() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


# the targets: input kind -> size -> the most report / floor may be
CSV_TARGETS = {"week": 2.0, "month": 1.5}
KERN_TARGET = 2.0
PEAK_MB = 1536


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="week,month", help="comma list of day, week, month")
    ap.add_argument("--only", default=",".join(GENERATORS),
                    help="comma list of " + ", ".join(GENERATORS) + "; csv: every CSV shape")
    ap.add_argument("--quick", action="store_true", help="a smoke run: a day of each input, one run each")
    ap.add_argument("--compressed", default="", help="compressed forms (zst,gz) timed at the largest size")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    ap.add_argument("--dir", default=None, help="work folder (default: a new one under /tmp, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeat = "day", 1
    sizes = [s for s in args.sizes.split(",") if s]
    kinds = [s for k in args.only.split(",") if k for s in (CSV_SHAPES if k == "csv" else [k])]
    packs = [c for c in args.compressed.split(",") if c]
    if set(sizes) - set(SIZES) or set(kinds) - set(GENERATORS) or set(packs) - {"zst", "gz"}:
        ap.error("unknown size, input or compression")
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="gf-perf-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    # the package's bytecode, as `pip install` leaves it: where PYTHONDONTWRITEBYTECODE is set (CI
    # images, this project's machines) every timed run would otherwise compile the sources (~0.3 s)
    compileall.compile_dir(ROOT / "forensics", quiet=1)
    load_before = _load()
    started = time.perf_counter()
    try:
        for kind in kinds:
            name, gen = GENERATORS[kind]
            for size in sizes:
                path = work / f"{size}-{name}"
                if not path.exists():
                    t = time.perf_counter()
                    gen(path, SIZES[size])
                    print(f"generated {path} ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s",
                          file=sys.stderr)
                mb = path.stat().st_size / 1e6
                label = f"{kind} {size}"
                if kind in CSV_SHAPES:
                    header, _, cols = CSV_SHAPES[kind]
                    floors = [[sys.executable, "-c", _FLOOR_PROJECTED, str(path), str(int(header is not None)),
                               *map(str, cols)],
                              [sys.executable, "-c", _FLOOR_CSV, str(path)]]
                    names = ["lazy scan of 3 columns", "polars.read_csv (str)"]
                elif kind == "kern":
                    floors, names = [["grep", "-c", "-E", OOM_GREP, str(path)]], ["grep -c -E (OOM lines)"]
                elif kind == "freetext":
                    floors = [[sys.executable, "-c", _FLOOR_REGEX, str(path), FREETEXT_KEY]]
                    names = ["polars regex scan (one key)"]
                else:
                    floors, names = [["grep", "-c", STEP_GREP, str(path)]], ["grep -c (memory lines)"]
                print(f"timing {label} ...", file=sys.stderr)
                run, cp, html, fl, summary = report_run(path, work, args.repeat, floors)
                row = Row(label, mb, f"report -> {run.out}", run.seconds, run.peak_mb, names[0], fl[0].seconds,
                          run.seconds / fl[0].seconds, cpu=run.cpu, floor_cpu=fl[0].cpu)
                limit = CSV_TARGETS.get(size) if kind in CSV_SHAPES else KERN_TARGET if kind == "kern" and \
                    size == "month" else FREETEXT_TARGET if kind == "freetext" else None
                if limit is not None:
                    row.target, row.ok = f"<= {limit}", row.ratio <= limit
                rows.append(row)
                for n, f in zip(names[1:], fl[1:]):
                    rows.append(Row(label, mb, "  vs " + n, run.seconds, None, n, f.seconds, run.seconds / f.seconds,
                                    cpu=run.cpu, floor_cpu=f.cpu))
                for n, f in zip(names, fl):
                    rows.append(Row(label, mb, "  floor: " + n, f.seconds, f.peak_mb, cpu=f.cpu))
                if kind in CSV_SHAPES or kind == "kern":
                    ok, note = (planted_leak(summary, SIZES[size], kind) if kind in CSV_SHAPES
                                else planted_ooms(summary, SIZES[size], fl[0].out))
                    rows.append(Row(label, mb, "  planted: what was found", run.seconds, None,
                                    target="as planted", ok=ok, note=note))
                if size == "month":
                    rows.append(Row(label, mb, "  peak memory", run.seconds, run.peak_mb, target=f"<= {PEAK_MB} MB",
                                    ok=run.peak_mb <= PEAK_MB))
                if cp is not None:
                    rows.append(Row(label, mb, "  change-point search", cp, None, target="<= 2 s", ok=cp <= 2.0))
                rows.append(Row(label, mb, "  report HTML size (kB)", html / 1e3, None, target="< 500", ok=html < 500e3))
                if size == sizes[-1]:
                    for pack in packs:
                        cpath = compress(path, pack)
                        crun, _, _, (dec,), _ = report_run(cpath, work, args.repeat, [decompress_cmd(cpath)],
                                                        floor_stdout=subprocess.DEVNULL)
                        over = (crun.seconds - run.seconds) / dec.seconds
                        rows.append(Row(f"{label} .{pack}", cpath.stat().st_size / 1e6, f"report -> {crun.out}",
                                        crun.seconds, crun.peak_mb, f"{decompress_cmd(cpath)[0]} -dc alone", dec.seconds,
                                        over, "<= 1.3", over <= 1.3, f"ratio: (report.{pack} - report) / decompress"))
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(_fmt(rows))
    print(f"\nload average before {load_before}, after {_load()} on {os.cpu_count()} cores (a shared machine: "
          f"timings are the medians of {args.repeat}, each report back to back with its floors); "
          f"total {time.perf_counter() - started:.0f} s")
    print("reproduce: python bench/perf.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
