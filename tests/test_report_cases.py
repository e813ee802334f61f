"""Small incidents built directly in the two fixed schemas, for the report tests.

They do not need any parser or the detector's rules: the verdict is given, and detect.decided settles
what it decides (the finding it speaks of, what ended the job, its tone), as detect.analyze does. Log
text in them is hostile on purpose (a process may be called `<script>`).
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import polars as pl

from forensics.detect import Analysis, decided
from forensics.detect.findings import Evidence, Finding
from forensics.model import Bundle, InputInfo
from forensics.options import Options
from forensics.model import events_frame, samples_frame

GiB = 1 << 30
MiB = 1 << 20
T0 = datetime(2024, 6, 1, 8, 0, 0, tzinfo=timezone.utc)
XSS_NAME = "<script>alert(1)</script>"
XSS_LINE = '"><img src=x onerror=alert(1)>'
XSS_PATH = 'logs/"><svg onload=alert(2)>.log'


def opts(tz: str = "Europe/Berlin") -> Options:
    return Options(tz=tz, tz_from_user=True)


def _series_result(key, x_kind, classification, change_points=(), onset=None, capacity=None):
    """The shape of detect.SeriesResult (the fields the report reads)."""
    return SimpleNamespace(key=key, x_kind=x_kind, classification=classification, segments=[],
                           change_points=list(change_points), onset=onset, capacity=capacity)


def leak_case() -> tuple[Bundle, Analysis]:
    """GPU 0 leaks linearly from 2 h in until the OOM killer ends the job; GPU 1 is flat."""
    smi = "logs/nvidia-smi.csv"
    rows = []
    n = 6 * 360  # 6 hours, one reading every 10 s
    onset_i = 2 * 360
    for i in range(n):
        t = T0 + timedelta(seconds=10 * i)
        grow = max(0, i - onset_i) * (60 * GiB) // (n - onset_i)
        wobble = (i % 7) * 16 * MiB
        rows.append({"time": t, "seq": i, "source": smi, "line": 2 + 2 * i, "gpu": "0", "series": "memory.used",
                     "bytes": 14 * GiB + grow + wobble, "total_bytes": 80 * GiB})
        rows.append({"time": t, "seq": i, "source": smi, "line": 3 + 2 * i, "gpu": "1", "series": "memory.used",
                     "bytes": 30 * GiB + (i % 5) * MiB, "total_bytes": 80 * GiB})
    apps = "logs/apps.csv"
    for i in range(0, n, 6):
        t = T0 + timedelta(seconds=10 * i)
        grow = max(0, i - onset_i) * (60 * GiB) // (n - onset_i)
        rows.append({"time": t, "seq": i, "source": apps, "line": 2 + i, "gpu": "0", "pid": 4242,
                     "series": "process.used", "bytes": 13 * GiB + grow, "label": XSS_NAME})
        rows.append({"time": t, "seq": i, "source": apps, "line": 3 + i, "gpu": "1", "pid": 5151,
                     "series": "process.used", "bytes": 29 * GiB, "label": "python worker.py"})
    train = "logs/train.log"
    for step in range(0, 400):
        rows.append({"seq": step, "source": train, "line": 10 + step, "series": "allocated", "step": step,
                     "bytes": 2 * GiB + step * 40 * MiB})
        rows.append({"seq": step, "source": train, "line": 10 + step, "series": "reserved", "step": step,
                     "bytes": 4 * GiB + (step // 50) * 2 * GiB})
    samples = samples_frame(rows)
    end = T0 + timedelta(seconds=10 * n)
    kern = "logs/kern.log"
    oom_detail = {"anon_rss": 75 * GiB, "file_rss": 12 * MiB, "shmem_rss": 0, "total_vm": 90 * GiB,
                  "oom_score_adj": 0, "scope": "global", "constraint": "CONSTRAINT_NONE",
                  "memcg": "/system.slice/job-42.scope"}
    events = [
        {"time": T0 + timedelta(minutes=30), "source": train, "line": 5, "kind": "marker",
         "detail": json.dumps({"label": "epoch 1"}), "text": "=== epoch 1 ==="},
        {"time": T0 + timedelta(hours=3), "source": kern, "line": 77, "kind": "xid", "gpu": "1", "pid": 5151,
         "process": "python worker.py", "detail": json.dumps({"code": 31, "meaning": "GPU memory page fault"}),
         "text": "NVRM: Xid (PCI:0000:3b:00): 31, pid=5151, name=python, Ch 00000010"},
        {"time": end - timedelta(seconds=20), "source": "logs/stderr.txt", "line": 900, "kind": "gpu_oom",
         "gpu": "0", "pid": 4242, "bytes": 2 * GiB,
         "detail": json.dumps({"total_bytes": 80 * GiB, "free_bytes": 300 * MiB, "allocated_bytes": 74 * GiB}),
         "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. " + XSS_LINE},
        {"time": end + timedelta(seconds=5), "source": kern, "line": 120, "kind": "oom_kill", "pid": 4242,
         "process": XSS_NAME, "bytes": 75 * GiB, "detail": json.dumps(oom_detail),
         "text": f"Out of memory: Killed process 4242 ({XSS_NAME}) total-vm:94371840kB, anon-rss:78643200kB"},
    ]
    san = "logs/sanitizer.txt"
    # the sanitizer parser's shape: "stack" of frames with symbol, module, offset, file, line
    frames_user = [{"symbol": "cudaMalloc", "module": "/usr/local/cuda/lib64/libcudart.so.12", "offset": "0x3dab7"},
                   {"symbol": "make_buffer(int)", "module": "/opt/job/train_ext.so", "offset": "0x1b7"},
                   {"symbol": "main", "module": "/opt/job/train", "offset": "0x89bb"}]
    frames_cache = [{"symbol": "cuMemAlloc_v2", "module": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "offset": "0x2b8257"},
                    {"symbol": "c10::cuda::CUDACachingAllocator::malloc", "module": "libc10_cuda.so", "offset": "0x10"}]
    for k in range(5):
        events.append({"source": san, "line": 40 + 6 * k, "kind": "sanitizer_leak", "bytes": 512 * MiB,
                       "detail": json.dumps({"stack": frames_user, "site": frames_user[1],
                                             "site_label": "make_buffer(int) in train_ext.so",
                                             "user_frames": [{"function": "make_buffer", "module": "train_ext.so",
                                                              "offset": "0x1b7"},
                                                             {"function": "main", "module": "train", "offset": "0x89bb"}],
                                             "allocator_cache_at_exit": False}),
                       "text": f"========= Leaked 536870912 bytes at 0x7f00{k:08x}"})
    events.append({"source": san, "line": 90, "kind": "sanitizer_leak", "bytes": 2 * GiB,
                   "detail": json.dumps({"stack": frames_cache, "site": None,
                                         "site_label": XSS_NAME, "allocator_cache_at_exit": True}),
                   "text": "========= Leaked 2147483648 bytes at 0x7f0100000000"})
    events = events_frame(events)
    inputs = [
        InputInfo(path=smi, format="nvsmi_csv", reason="header names memory.used", lines=2 * n + 1,
                  records=2 * n, skipped=3, skip_reasons={"placeholder [N/A]": 2, "repeated header": 1},
                  skip_examples={"placeholder [N/A]": [10, 11], "repeated header": [400]},
                  start=T0, end=end - timedelta(seconds=10), clock="wall-assumed", anchor="zone Europe/Berlin (--tz)"),
        InputInfo(path=apps, format="nvsmi_apps", reason="header names used_gpu_memory", lines=n // 3 + 1,
                  records=n // 3, start=T0, end=end, clock="wall-assumed"),
        InputInfo(path=train, format="stepmem", reason="allocated: N MB lines", lines=420, records=800, clock="none"),
        InputInfo(path=kern, format="kernel", reason="kernel log lines", lines=200, records=2, skipped=0,
                  start=T0 + timedelta(hours=3), end=end + timedelta(seconds=5), clock="wall-yearless",
                  anchor="year from file mtime 2024"),
        InputInfo(path="logs/stderr.txt", format="text", reason="free text with gpu_oom lines", lines=1000, records=1,
                  clock="wall"),
        InputInfo(path=san, format="sanitizer", reason="COMPUTE-SANITIZER banner", lines=120, records=6),
        InputInfo(path=XSS_PATH, format=None, reason="no parser recognizes its first lines", lines=3),
        InputInfo(path="logs/core.bin", error="logs/core.bin: binary file, not a log, skip it or pass the text logs"),
    ]
    bundle = Bundle(inputs=inputs, samples=samples, events=events,
                    problems=["logs/core.bin: binary file, not a log, skip it or pass the text logs",
                              f"{XSS_PATH}:1: {XSS_LINE}, not recognized, nothing to do"])
    onset = T0 + timedelta(seconds=10 * onset_i)
    leak = Finding(
        kind="leak", severity="critical",
        summary=f"GPU 0 memory grew linearly by 60.0 GiB from {onset:%H:%M} UTC until the OOM kill",
        gpu="0", series="memory.used", pattern="linear", start=onset, end=end,
        rate_bytes_per_hour=15 * GiB, growth_bytes=60 * GiB, confidence=0.93,
        exhaust_at=end, exhaust_in_hours=4.0,
        evidence=[Evidence(smi, 2 + 2 * onset_i, "2024/06/01 12:00:00.000, 0, 14336 MiB, 81920 MiB"),
                  Evidence(smi, 2 + 2 * (n - 1), "2024/06/01 13:59:50.000, 0, 75000 MiB, 81920 MiB")],
        causes=["A tensor kept alive across steps (e.g. total_loss += loss without .item())"],
        checks=["Look at what is appended to lists every step", XSS_LINE],
        detail={"r2": 0.998, "baseline_bytes": 14 * GiB},
    )
    proc = Finding(kind="leak", severity="warning", summary=f"Process 4242 ({XSS_NAME}) grew with GPU 0",
                   gpu="0", pid=4242, series="process.used", pattern="linear", start=onset,
                   rate_bytes_per_hour=15 * GiB,
                   evidence=[Evidence(apps, 2 + onset_i, f"4242, {XSS_NAME}, 14000 MiB")])
    step = Finding(kind="cache_growth", severity="info", summary="reserved grows in steps while allocated tracks it",
                   series="reserved", pattern="step", start_index=50, rate_bytes_per_step=40 * MiB,
                   source=train, evidence=[Evidence(train, 60, "step 50 allocated: 4096 MB reserved: 6144 MB")])
    kill = Finding(kind="oom_kill", severity="critical",
                   summary=f"The kernel OOM killer killed pid 4242 ({XSS_NAME})", pid=4242,
                   start=end + timedelta(seconds=5), bytes=75 * GiB,
                   evidence=[Evidence(kern, 120, events.filter(pl.col("kind") == "oom_kill")["text"][0])])
    sanf = Finding(kind="sanitizer_leak", severity="warning", summary="2.50 GiB leaked at make_buffer(int)",
                   bytes=int(2.5 * GiB), evidence=[Evidence(san, 40 + 6 * k, "========= Leaked 536870912 bytes")
                                                   for k in range(12)])
    xid = Finding(kind="xid", severity="warning", summary="Xid 31 (GPU memory page fault) on GPU 1", gpu="1",
                  start=T0 + timedelta(hours=3), evidence=[Evidence(kern, 77, "NVRM: Xid (PCI:0000:3b:00): 31")])
    series = [
        _series_result((smi, None, "0", None, "memory.used", None), "time", "linear_growth",
                       change_points=[onset], onset=onset, capacity=80 * GiB),
        _series_result((smi, None, "1", None, "memory.used", None), "time", "flat", capacity=80 * GiB),
        _series_result((train, None, None, None, "reserved", None), "step", "staircase",
                       change_points=[50, 100, 150]),
    ]
    analysis = decided("leak", "GPU 0 memory.used grows linearly and never falls back",
                       [leak, proc, step, kill, sanf, xid], series, bundle.events)
    return bundle, analysis


def no_leak_case() -> tuple[Bundle, Analysis]:
    """A sawtooth that returns to its baseline on one GPU: not a leak."""
    src = "run/nvidia-smi.log"
    rows = []
    for i in range(720):
        rows.append({"time": T0 + timedelta(seconds=5 * i), "seq": i, "source": src, "line": i + 2, "gpu": "0",
                     "series": "memory.used", "bytes": 8 * GiB + (i % 60) * 100 * MiB, "total_bytes": 24 * GiB})
    bundle = Bundle(inputs=[InputInfo(path=src, format="nvsmi_csv", reason="header", lines=721, records=720,
                                      start=T0, end=T0 + timedelta(seconds=5 * 719), clock="wall")],
                    samples=samples_frame(rows))
    analysis = decided("no_leak", "memory returns to its baseline (sawtooth)", [],
                       [_series_result((src, None, "0", None, "memory.used", None), "time", "sawtooth")],
                       bundle.events)
    return bundle, analysis


def empty_case() -> tuple[Bundle, Analysis]:
    """Nothing readable: one unreadable file, one unrecognized, one empty."""
    inputs = [
        InputInfo(path="job/core.gz", error="job/core.gz: cannot decompress, the gzip stream is truncated, "
                                            "copy the file again"),
        InputInfo(path="job/notes.txt", reason="no parser recognizes its first lines", lines=12),
        InputInfo(path="job/empty.log", reason="empty file", lines=0),
    ]
    bundle = Bundle(inputs=inputs, problems=[inputs[0].error])
    analysis = decided("inconclusive", "no memory readings in the inputs", [], [], bundle.events, empty=True)
    return bundle, analysis


def worst_day_case(gpus: int = 8, days: int = 30, period_s: int = 60, pids: int = 40,
                   n_events: int = 6000, n_findings: int = 300) -> tuple[Bundle, Analysis]:
    """Many GPUs over a month, dozens of processes, thousands of events and findings. The period is
    coarser than 1 Hz to keep the test fast: the drawing is bucketed, so its size does not depend on it."""
    n = days * 86400 // period_s
    start = pl.datetime_range(T0, T0 + timedelta(seconds=period_s * (n - 1)), timedelta(seconds=period_s),
                              eager=True, time_unit="us")
    idx = pl.int_range(0, n, eager=True)
    parts = []
    for g in range(gpus):
        parts.append(pl.DataFrame({
            "time": start, "seq": idx, "line": idx + 2,
            "bytes": (10 * GiB + (idx * (g + 1) * 997) % (3 * GiB) + idx * (g * 1000)).cast(pl.Int64),
        }).with_columns(pl.lit("month/nvidia-smi.csv").alias("source"), pl.lit(str(g)).alias("gpu"),
                        pl.lit("memory.used").alias("series"), pl.lit(80 * GiB).alias("total_bytes")))
    step = max(1, n // 2000)
    for p in range(pids):
        sub = pl.DataFrame({"time": start[::step], "seq": idx[::step], "line": idx[::step] + 2,
                            "bytes": (idx[::step] * (p + 3) * 131) % (2 * GiB) + GiB})
        parts.append(sub.with_columns(pl.lit("month/apps.csv").alias("source"), pl.lit(str(p % gpus)).alias("gpu"),
                                      pl.lit(1000 + p).alias("pid"), pl.lit("process.used").alias("series"),
                                      pl.lit(f"worker-{p} {XSS_NAME}").alias("label")))
    samples = samples_frame(pl.concat([samples_frame(x) for x in parts]))
    ev = []
    kinds = ["xid", "marker", "process_start", "process_gone", "oom_kill", "gpu_oom", "sanitizer_leak"]
    for k in range(n_events):
        kind = kinds[k % len(kinds)]
        ev.append({"time": T0 + timedelta(seconds=(k * 433) % (days * 86400)), "source": "month/kern.log",
                   "line": k + 1, "kind": kind, "gpu": str(k % gpus), "pid": 1000 + k % pids,
                   "process": XSS_NAME, "bytes": GiB,
                   "detail": json.dumps({"code": 13 + k % 5, "meaning": "x", "frames": [f"f{k % 40}"],
                                         "user_frames": [{"function": f"f{k % 40}", "file": "job.py", "line": k % 40}],
                                         "allocator_cache_at_exit": False}),
                   "text": f"line {k} {XSS_LINE}"})
    events = events_frame(ev)
    inputs = [InputInfo(path=f"month/part-{i}.log", format="kernel", lines=1000, records=10, skipped=1,
                        skip_reasons={"garbage": 1}) for i in range(600)]
    findings = [Finding(kind="xid" if i % 2 else "leak", severity=("critical", "warning", "info")[i % 3],
                        summary=f"finding {i} {XSS_NAME}", gpu=str(i % gpus), start=T0 + timedelta(hours=i),
                        evidence=[Evidence("month/kern.log", j, f"{XSS_LINE} {j}") for j in range(30)])
                for i in range(n_findings)]
    analysis = decided("leak", "many things", findings, [], events)
    return Bundle(inputs=inputs, samples=samples, events=events,
                  problems=[f"problem {i} {XSS_LINE}" for i in range(500)]), analysis


def test_cases_are_well_formed():
    for make in (leak_case, no_leak_case, empty_case):
        bundle, analysis = make()
        assert analysis.verdict in ("leak", "no_leak", "cache_growth", "inconclusive")
        assert all(math.isfinite(b) for b in bundle.samples["bytes"].to_list())
