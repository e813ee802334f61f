"""README.md for each folder recorded by torch_memory.py, from the workload's side file (<name>.jsonl beside the
folders) and the LEAK-SITE lines of the sources. Standard library only."""
from __future__ import annotations

import json
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
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


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def leak_sites(source: Path) -> dict[str, int]:
    """name -> line of each `# LEAK-SITE name:` comment."""
    out = {}
    for n, line in enumerate(source.read_text().splitlines(), 1):
        m = re.search(r"LEAK-SITE (\w+)", line)
        if m and "LEAK-SITE name" not in line:
            out[m.group(1)] = n
    return out


def facts_of(name: str, rows: list[dict]) -> list[tuple[str, object]]:
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
    if snap and steps and name == "snapshot_legacy":
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


def write_readmes(root: Path) -> None:
    py_sites = leak_sites(HERE / "torch_memory.py")
    for name, (verdict, findings, pattern, story) in STORIES.items():
        folder = root / name
        if not folder.is_dir():
            continue
        rows = [json.loads(x) for x in (HERE / "runs" / f"{name}.jsonl").read_text().splitlines() if x.strip()]
        meta: list[tuple[str, object]] = [("incident", name), ("expected_verdict", verdict),
                                          ("expected_findings", findings), ("pattern", pattern)]
        meta += facts_of(name, rows)
        if name == "sanitizer_cpp_shared_helper":
            meta += [("leaked_bytes", 5 * 4 * MiB + MiB), ("leaked_allocations", 6),
                     ("leak_sites", "shared_helper.cu:24 (process_batch); shared_helper.cu:45 (main)")]
        elif name.startswith("snapshot"):
            sites = ["features", "val_graph"] if name == "snapshot_leak" else (
                ["outputs"] if name == "snapshot_legacy" else [])
            if sites:
                meta.append(("allocation_leak_sites", "; ".join(f"torch_memory.py:{py_sites[s]} ({s})" for s in sites)))
        meta.append(("tz", "Etc/UTC"))
        # Lightning's stdout and stderr hold its own messages, no memory reading: not inputs
        not_inputs = ("train.log", "stderr.log") if name.startswith("lightning") else ()
        inputs = sorted(p.name for p in folder.iterdir()
                        if p.name in FILES and p.name not in not_inputs and p.stat().st_size > 0)
        meta.append(("inputs", ", ".join(inputs)))
        lines = ["---"] + [f"{k}: {v}" for k, v in meta if v is not None] + ["---", "", f"# {name}", "",
                                                                              "## What happened", "", story, "",
                                                                              "## Files", ""]
        lines += [f"- `{f}`: {FILES[f]}" for f in inputs]
        lines += ["", "## Recorded on", "",
                  "- NVIDIA H200, driver 580.159.04, PyTorch 2.11.0+cu130, Lightning 2.6, compute-sanitizer "
                  "2025.3.1, local time zone Etc/UTC.",
                  "- By `tools/record/torch_memory.py` (this README by `torch_memory.py readme` from the workload's "
                  "side file, `tools/record/runs/" + name + ".jsonl`); no log was edited.", ""]
        (folder / "README.md").write_text("\n".join(lines))
