"""Synthetic PyTorch memory snapshots for the tests, made the way PyTorch makes them: plain dicts and
lists, one string object per key name, frame dicts shared between tracebacks, the free of a block
(free_requested, free_completed) sharing one traceback list, and the trace as a ring buffer of the
last `max_entries` events. `pickle.dump` of the result writes what `_dump_snapshot` writes.

`loop(...)` simulates a training loop and returns the snapshot and the truth: allocated bytes after
every kept trace entry, and what each call path keeps per step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1 << 20
T0_US = 1_796_224_000_000_000   # 2026-12-02, wall-clock microseconds

TORCH = "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"
USER = "/home/me/train.py"
MODEL = "/home/me/model.py"


def _frames(*user: tuple[str, int, str], library: bool = True) -> list[dict]:
    lib = [{"filename": TORCH, "line": 125, "name": "forward"}] if library else []
    return lib + [{"filename": f, "line": n, "name": name} for f, n, name in user]


@dataclass
class Loop:
    steps: int = 30
    leak_bytes: int = 2 * MiB            # kept per step at train.py:30 (0: no leak)
    act_bytes: int = 4 * MiB             # activations, freed each step
    weights: int = 3                     # 16 MiB blocks made once at model.py:10
    max_entries: int | None = None       # ring buffer
    era: str = "modern"                  # modern | legacy (blocks with history, no time_us)
    pending_name: str = "active_pending_free"
    expandable: bool = False
    oom: bool = False                    # end with an oom entry
    devices: int = 1
    extra_keys: dict = field(default_factory=dict)   # added to every trace entry (pool_id, user_metadata)
    annotations: bool = True
    pause_us: int = 0                    # between building the model and the first step (data loading)


def loop(cfg: Loop) -> tuple[dict, dict]:
    build = _frames((MODEL, 10, "build"), (USER, 50, "main"))
    forward = _frames((USER, 21, "step"), (USER, 52, "main"))
    keep = _frames((USER, 30, "step"), (USER, 52, "main"))
    inp = _frames((USER, 20, "step"), (USER, 52, "main"), library=False)
    freeing = _frames((USER, 40, "step"), (USER, 52, "main"), library=False)
    traces, segments, truth = [], [], {"allocated": [], "kept_per_step": {"train.py:30": cfg.leak_bytes}}
    annotations = []
    for dev in range(cfg.devices):
        trace: list[dict] = []
        live: dict[int, tuple[int, list]] = {}
        allocated = 0
        addr = [0x7F0000000000 + dev * (1 << 40)]
        t = [T0_US]

        def entry(action, a, size, frames):
            nonlocal allocated
            t[0] += 10
            e = {"action": action, ("device_free" if action == "oom" else "addr"): a, "size": size, "stream": 0}
            if cfg.era == "modern":
                e["time_us"] = t[0]
                e["compile_context"] = "".join(["N/", "A"])   # a new string per entry, as PyTorch makes
                e["user_metadata"] = ""
            e.update(cfg.extra_keys)
            e["frames"] = frames
            if action == "alloc":
                allocated += size
            elif action == "free_requested":
                allocated -= size
            trace.append(e)
            if dev == 0:
                truth["allocated"].append(allocated)

        def alloc(size, frames):
            a = addr[0]
            addr[0] += size
            if cfg.expandable:
                entry("segment_map", a, size, frames)
            else:
                entry("segment_alloc", a, size, frames)
            entry("alloc", a, size, frames)
            live[a] = (size, frames)
            return a

        def free(a):
            size, _ = live.pop(a)
            tb = list(freeing)
            entry("free_requested", a, size, tb)
            entry("free_completed", a, size, tb)
            entry("segment_unmap" if cfg.expandable else "segment_free", a, size, tb)

        for _ in range(cfg.weights):
            alloc(16 * MiB, list(build))
        t[0] += cfg.pause_us
        for step in range(cfg.steps):
            if cfg.annotations and cfg.era == "modern":
                annotations.append({"stage": "START", "name": "Optimizer.step#SGD.step", "device": dev,
                                    "time_us": t[0] + 1})
            x = alloc(MiB, list(inp))
            acts = [alloc(cfg.act_bytes, list(forward)) for _ in range(3)]
            if cfg.leak_bytes:
                alloc(cfg.leak_bytes, list(keep))
            for a in acts + [x]:
                free(a)
        if cfg.oom:
            entry("oom", 1 << 30, 64 * MiB, list(forward))
        if cfg.max_entries is not None and len(trace) > cfg.max_entries:
            cut = len(trace) - cfg.max_entries
            trace = trace[cut:]
            if dev == 0:
                truth["allocated"] = truth["allocated"][cut:]
        traces.append(trace)
        for a, (size, frames) in live.items():
            if cfg.era == "modern":
                block = {"address": a, "size": size, "requested_size": size, "state": "active_allocated",
                         "frames": frames}
            else:
                block = {"size": size, "requested_size": size, "state": "active_allocated",
                         "history": [{"addr": a, "real_size": size, "frames": frames}]}
            free_block = {"size": 2 * MiB, "requested_size": 0, "state": cfg.pending_name, "frames": []} \
                if cfg.era == "modern" else {"size": 2 * MiB, "requested_size": 0, "state": cfg.pending_name}
            segments.append({"device": dev, "address": a, "total_size": size + 2 * MiB, "allocated_size": size,
                             "active_size": size, "requested_size": size, "stream": 0, "segment_type": "large",
                             "segment_pool_id": (0, 0), "is_expandable": cfg.expandable,
                             "frames": [], "blocks": [block, free_block]})
        if dev == 0:
            truth["allocated_end"] = allocated
    snap = {"segments": segments, "device_traces": traces}
    if cfg.era == "modern":
        snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if cfg.expandable else "",
                                      "expandable_segments": cfg.expandable}
        snap["external_annotations"] = annotations
    return snap, truth
