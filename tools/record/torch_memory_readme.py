"""README.md for each folder recorded by torch_memory.py, from the workload's side file (<name>.jsonl beside the
folders) and the LEAK-SITE lines of the sources. Standard library only."""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # tools/: recorder_common.py

from recorder_common import iso, read_rows  # noqa: E402

MiB = 2**20

STORIES = {
    "snapshot_leak": (
        "leak", "leak, gpu_oom, allocation_leak", "linear",
        "A training loop (MLP 2048-wide, 5 layers, Adam, batch 1024) run with "
        "`torch.cuda.memory._record_memory_history(max_entries=1500, stacks=\"python\")` under a 1.5 GiB cap "
        "(`set_per_process_memory_fraction`). Two bugs keep memory from step 1 on, each at its own call path: "
        "`train_step` keeps each step's first-layer features in a list (`keep_features`, 8 MiB a step), and "
        "`validate` computes a validation loss with autograd on and keeps the loss, with its graph and the "
        "activations it saved. The weights, Adam's state and a 256 MiB cache made once at the start are the "
        "footprint. Every 5 steps the loop logs `torch.cuda.memory_stats()` (its OrderedDict repr). At the "
        "CUDA OOM it logs the stats once more (`num_ooms` 1, `num_alloc_retries` 1), dumps the snapshot "
        "(`_dump_snapshot`) and re-raises: the traceback is in `stderr.log`. The ring buffer kept the last "
        "1500 allocator events, so the trace begins mid-run."),
    "snapshot_healthy": (
        "no_leak", "none", None,
        "The loop of `snapshot_leak` without its two bugs (validation under `torch.no_grad()` with `.item()`, "
        "no list of features), with `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, for 60 steps; "
        "`memory_stats()` logged as JSON every 5 steps; the snapshot dumped at the normal end. The weights, "
        "Adam's state and the 256 MiB cache are allocated once and kept: footprint, not a leak."),
    "snapshot_legacy": (
        "leak", "leak, allocation_leak", "linear",
        "The legacy API: `torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=400, "
        "trace_alloc_record_context=True)`, then `pickle.dump(torch.cuda.memory._snapshot(), f)`. A loop "
        "(no autograd) keeps each step's output (512 x 1024 fp32, 2 MiB) in a list for 30 steps, then "
        "prints `dict(torch.cuda.memory_stats())` once."),
    "lightning_leak": (   # no pattern: the run logged no clocked step times to check an onset against
        "leak", "leak", None,
        "A LightningModule (Linear 2048-2048, ReLU, Linear, SGD, batch 1024, 80 steps, one epoch) trained "
        "with the `DeviceStatsMonitor` callback and a `CSVLogger` (`log_every_n_steps=1`); its "
        "`training_step` appends each step's output to `self.outputs` (8 MiB a step) and never clears it. "
        "`metrics.csv` is the CSVLogger's file as Lightning wrote it (copied out of "
        "`lightning_logs/version_0/`); `stderr.log` holds Lightning's own messages."),
    "lightning_healthy": (
        "no_leak", "none", None,
        "The module of `lightning_leak` without the list (60 steps), with the same callback and logger."),
    "ddp_gloo_rank1_leak": (
        "leak", "leak, gpu_oom, distributed_failure, collective_error", "linear",
        "`torchrun --nproc-per-node 2 --tee 3` of a DistributedDataParallel job (MLP 2048-wide, SGD, batch 1024, "
        "gloo backend: NCCL refuses two ranks on one GPU, so both ranks share GPU 0). Rank 1 keeps each step's "
        "output (8 MiB) from step 10 on, under a 1.2 GiB cap (`set_per_process_memory_fraction`); rank 0 keeps "
        "nothing. Each rank logs `rank R local_rank L pid P device cuda:0` once, then `[rank R] [step N] "
        "allocated: X MB, cached: Y MB` every step; torchrun prefixes every line with `[defaultL]:`, and "
        "PyTorch's excepthook prefixes each rank's traceback with `[rankR]:`. Rank 1 dies of a CUDA OOM in "
        "`backward` (`stderr.log`); rank 0's next all-reduce then fails with gloo's `Connection closed by peer`; "
        "torchrun sends SIGTERM to rank 0 and prints its summary of the failures, with rank 1 as the root cause."),
    "ddp_gloo_healthy": (
        "no_leak", "none", None,
        "The job of `ddp_gloo_rank1_leak` for 60 steps with no rank keeping anything: two interleaved, flat "
        "ranks on GPU 0, and a clean exit."),
    "ddp_gloo_both_leak": (   # no pattern: two leaks, one per rank (the rank_* keys give them)
        "leak", "leak, gpu_oom, distributed_failure", None,
        "The job of `ddp_gloo_rank1_leak` with a bug that every rank runs: each rank keeps each step's output "
        "from step 10 on, under its own 1.2 GiB cap. Both ranks hit their cap in the same step and each dies "
        "of its own CUDA OOM; torchrun names rank 0 as the root cause (the two exits fall in the same second)."),
    "sanitizer_cpp_shared_helper": (
        "leak", "sanitizer_leak", None,
        "`tools/record/shared_helper.cu`: every device buffer comes from one helper, `make_buffer()`. "
        "`process_batch()` leaks the 4 MiB it gets on each of its 5 calls, `main()` leaks the 1 MiB it gets "
        "once, `checksum()` frees its buffer. Built with `nvcc -lineinfo -g -Xcompiler -rdynamic` and run "
        "under `compute-sanitizer --leak-check full`. Grouping leaks by their innermost user frame would name "
        "only `make_buffer`; the callers are what differ."),
}

FILES = {
    "nvidia-smi.csv": "`nvidia-smi --query-gpu=timestamp,index,uuid,pci.bus_id,name,memory.total,memory.used,"
                      "memory.free --format=csv -lms 500`",
    "compute-apps.csv": "`while :; do nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,"
                        "used_memory --format=csv; sleep 0.5; done`",
    "train.log": "the workload's stdout (python logging, step markers `[step N] allocated: X MB, cached: Y MB`)",
    "stderr.log": "the workload's stderr",
    "snapshot.pickle": "the allocator snapshot (see What happened)",
    "metrics.csv": "Lightning's CSVLogger file",
    "sanitizer.txt": "`compute-sanitizer --leak-check full ./shared_helper > sanitizer.txt 2>&1`",
}


# torchrun's own files (`--tee 3`): every rank's lines, each behind its prefix
DDP_FILES = {
    "train.log": "torchrun's stdout: each rank's python logging behind `[defaultL]:` (`--tee 3`), step markers "
                 "`[rank R] [step N] allocated: X MB, cached: Y MB`",
    "stderr.log": "torchrun's stderr: its agent's own lines, and each rank's behind `[defaultL]:` (tracebacks "
                  "also behind PyTorch's `[rankR]:`)",
}


LIGHTNING_FILES = {
    "train.log": "the workload's stdout: Lightning's own messages through python logging (no memory reading)",
    "stderr.log": "the workload's stderr: Lightning's warnings (no memory reading)",
}


def leak_sites(source: Path) -> dict[str, int]:
    """name -> line of each `# LEAK-SITE name:` comment (a name used twice would name the wrong line)."""
    out = {}
    for n, line in enumerate(source.read_text().splitlines(), 1):
        m = re.search(r"LEAK-SITE (\w+)", line)
        if m and "LEAK-SITE name" not in line:
            if m.group(1) in out:
                raise SystemExit(f"{source}:{n}: LEAK-SITE {m.group(1)} named twice; give each site its own name")
            out[m.group(1)] = n
    return out


def facts_of(rows: list[dict]) -> list[tuple[str, object]]:
    start = next((r for r in rows if r["ev"] == "start"), None)
    end = next((r for r in rows if r["ev"] == "recorder_end"), {})
    steps = [r for r in rows if r["ev"] == "step"]
    kept = {r["step"]: r for r in rows if r["ev"] == "kept"}
    facts: list[tuple[str, object]] = []
    if start:
        facts.append(("pid", start["pid"]))
    by_step = {s["step"]: s for s in steps}
    per_step = [k["train"] + k["val"] for k in kept.values()]
    leak = bool(start and start.get("leak"))
    if leak and len(by_step) > 2:
        # onset: the first step marker that shows the growth (allocated up by more than 16 MiB, or by half
        # of what the code keeps per step where that is less)
        threshold = min(16 * MiB, statistics.median(per_step) / 2) if per_step else 16 * MiB
        growing = [s for s in sorted(by_step) if s - 1 in by_step
                   and by_step[s]["allocated"] - by_step[s - 1]["allocated"] > threshold]
        if growing:
            k = growing[0]
            deltas = [by_step[s]["allocated"] - by_step[s - 1]["allocated"] for s in sorted(by_step)
                      if s >= k and s - 1 in by_step]
            last, before = steps[-1], by_step[k - 1]
            facts += [("onset_step", k), ("onset_time", iso(by_step[k]["t"])),
                      ("leak_bytes_per_step", int(statistics.median(deltas))),
                      ("leak_bytes_per_hour", int((last["allocated"] - before["allocated"])
                                                  / (last["t"] - before["t"]) * 3600)),
                      ("leak_growth_bytes", last["allocated"] - before["allocated"]),
                      ("code_leak_step", 1)]
    elif leak and start.get("features_bytes_per_step"):
        facts.append(("leak_bytes_per_step", start["features_bytes_per_step"]))
    if kept and leak:
        trains = [k["train"] for k in kept.values()]
        vals = [k["val"] for k in kept.values()]
        facts.append(("kept_bytes_per_step", f"train_step {int(statistics.median(trains))}; "
                                             f"validate {int(statistics.median(vals))}"))
    oom = next((r for r in rows if r["ev"] == "oom"), None)
    if oom:
        facts += [("oom_step", oom["step"]), ("oom_time", iso(oom["t"]))]
    stats = [r for r in rows if r["ev"] == "memory_stats"]
    if stats:
        facts += [("memory_stats_lines", len(stats)), ("num_ooms", stats[-1]["num_ooms"]),
                  ("num_alloc_retries", stats[-1]["num_alloc_retries"]),
                  ("num_alloc_retries_first_step", next((s["step"] for s in stats if s["num_alloc_retries"]), None))]
    snap = next((r for r in rows if r["ev"] == "snapshot"), None)
    # a leak whose memory then stays level longer than it grew (here: while the process writes its
    # snapshot) has a warm-up's shape in device memory: only the step log and the snapshot hold it
    if leak and snap and steps and snap["t"] - steps[-1]["t"] > steps[-1]["t"] - steps[0]["t"]:
        growth = steps[-1]["allocated"] - steps[0]["allocated"]
        facts.append(("flat_in_device_views",
                      f"the loop kept {growth // MiB} MiB over {steps[-1]['t'] - steps[0]['t']:.1f} s, then the "
                      f"process took {snap['t'] - steps[-1]['t']:.1f} s more to write its snapshot with memory "
                      "level: device memory shows a rise and a longer plateau (a warm-up's shape)"))
    if snap:
        facts += [("snapshot", snap["path"]), ("snapshot_max_entries", start.get("max_entries")),
                  ("snapshot_at", snap["at"])]
    if steps:
        facts += [("gpu", "0"), ("steps", len(steps)),
                  ("step_seconds", round(statistics.median(b["t"] - a["t"] for a, b in zip(steps, steps[1:])), 3)
                   if len(steps) > 1 else None)]
    facts += [("start", iso(start["t"]) if start else None), ("end", iso(end.get("t"))), ("exit", end.get("exit"))]
    return facts


def _onset(steps: list[dict]) -> dict | None:
    """A rank's leak as its step markers show it: the first step whose allocated memory rose by more than
    half of the median rise that follows, the median rise from there, and the growth and its pace."""
    by_step = {s["step"]: s for s in steps}
    rises = [by_step[k]["allocated"] - by_step[k - 1]["allocated"] for k in sorted(by_step) if k - 1 in by_step]
    positive = [d for d in rises if d > 0]
    if len(positive) < 3:
        return None
    half = statistics.median(positive) / 2
    k = next(k for k in sorted(by_step) if k - 1 in by_step
             and by_step[k]["allocated"] - by_step[k - 1]["allocated"] > half)
    deltas = [by_step[j]["allocated"] - by_step[j - 1]["allocated"] for j in sorted(by_step) if j >= k and j - 1 in by_step]
    last, before = steps[-1], by_step[k - 1]
    return {"step": k, "time": iso(by_step[k]["t"]), "per_step": int(statistics.median(deltas)),
            "per_hour": int((last["allocated"] - before["allocated"]) / (last["t"] - before["t"]) * 3600),
            "growth": last["allocated"] - before["allocated"], "last_step": last["step"]}


def ddp_facts(rows: list[dict]) -> list[tuple[str, object]]:
    """The ranks of a two-rank run: which leak, their pids, each leaking rank's onset and pace, and the
    step of its CUDA OOM (the step after its last marker: the OOM is raised in that step's backward,
    before the marker; the run then exits 1)."""
    starts = sorted((r for r in rows if r["ev"] == "start"), key=lambda r: r["rank"])
    end = next((r for r in rows if r["ev"] == "recorder_end"), {})
    steps = [r for r in rows if r["ev"] == "step"]
    leaking = [r for r in starts if r.get("leak")]
    facts: list[tuple[str, object]] = [
        ("ranks", len(starts)),
        ("rank_pids", ", ".join(f"{r['rank']}:{r['pid']}" for r in starts)),
        ("leaking_rank", ", ".join(str(r["rank"]) for r in leaking) or None),
    ]
    per_rank = {r["rank"]: _onset([s for s in steps if s["rank"] == r["rank"]]) for r in leaking}
    failed = end.get("exit") not in (0, None)
    if len(leaking) == 1 and per_rank[leaking[0]["rank"]]:
        o, r = per_rank[leaking[0]["rank"]], leaking[0]
        facts += [("pid", r["pid"]), ("onset_step", o["step"]), ("onset_time", o["time"]),
                  ("leak_bytes_per_step", o["per_step"]), ("leak_bytes_per_hour", o["per_hour"]),
                  ("leak_growth_bytes", o["growth"])]
        if failed:
            facts += [("oom_step", o["last_step"] + 1), ("first_failure", f"rank {r['rank']} gpu_oom")]
    elif len(leaking) > 1:
        facts.append(("rank_onset_steps", ", ".join(f"{k}:{o['step']}" for k, o in per_rank.items() if o)))
        facts.append(("rank_bytes_per_step", ", ".join(f"{k}:{o['per_step']}" for k, o in per_rank.items() if o)))
        if failed:
            facts.append(("failed_ranks", ", ".join(str(k) for k in per_rank)))
    if steps:
        by_rank = [s for s in steps if s["rank"] == starts[0]["rank"]]
        facts += [("gpu", "0"), ("steps", max(s["step"] for s in steps)),
                  ("step_seconds", round(statistics.median(b["t"] - a["t"] for a, b in zip(by_rank, by_rank[1:])), 3))]
    facts += [("start", iso(starts[0]["t"]) if starts else None), ("end", iso(end.get("t"))), ("exit", end.get("exit"))]
    return facts


def write_readmes(root: Path) -> None:
    py_sites = leak_sites(HERE / "torch_memory.py")
    for name, (verdict, findings, pattern, story) in STORIES.items():
        folder = root / name
        if not folder.is_dir():
            continue
        rows = read_rows(HERE / "runs" / f"{name}.jsonl")
        meta: list[tuple[str, object]] = [("incident", name), ("expected_verdict", verdict),
                                          ("expected_findings", findings), ("pattern", pattern)]
        meta += ddp_facts(rows) if name.startswith("ddp_") else facts_of(rows)
        if name == "sanitizer_cpp_shared_helper":
            meta += [("leaked_bytes", 5 * 4 * MiB + MiB), ("leaked_allocations", 6),
                     ("leak_sites", "shared_helper.cu:24 (process_batch); shared_helper.cu:45 (main)")]
        elif name.startswith("snapshot"):
            sites = ["features", "val_graph"] if name == "snapshot_leak" else (
                ["outputs"] if name == "snapshot_legacy" else [])
            if sites:
                meta.append(("allocation_leak_sites", "; ".join(f"torch_memory.py:{py_sites[s]} ({s})" for s in sites)))
        meta.append(("tz", "Etc/UTC"))
        # Lightning's stdout and stderr hold its own messages, no memory reading: not inputs; a clean
        # torchrun run's stderr holds only the launcher's start banner
        not_inputs = ("train.log", "stderr.log") if name.startswith("lightning") else (
            ("stderr.log",) if name.startswith("ddp_") and dict(meta).get("exit") == 0 else ())
        present = sorted(p.name for p in folder.iterdir() if p.name in FILES and p.stat().st_size > 0)
        inputs = [f for f in present if f not in not_inputs]
        meta.append(("inputs", ", ".join(inputs)))
        lines = ["---"] + [f"{k}: {v}" for k, v in meta if v is not None] + ["---", "", f"# {name}", "",
                                                                              "## What happened", "", story, "",
                                                                              "## Files", ""]
        files = {**FILES, **DDP_FILES} if name.startswith("ddp_") else (
            {**FILES, **LIGHTNING_FILES} if name.startswith("lightning") else FILES)
        lines += [f"- `{f}`: {files[f]}" for f in present]
        lines += ["", "## Recorded on", "",
                  "- NVIDIA H200, driver 580.159.04, PyTorch 2.11.0+cu130, Lightning 2.6, compute-sanitizer "
                  "2025.3.1, local time zone Etc/UTC.",
                  "- By `tools/record/torch_memory.py` (this README by `torch_memory.py readme` from the workload's "
                  "side file, `tools/record/runs/" + name + ".jsonl`); no log was edited.", ""]
        (folder / "README.md").write_text("\n".join(lines))
