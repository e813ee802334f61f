"""Events as the report names them (which of them end a job: detect/jobs.py)."""
from __future__ import annotations

from forensics.detect.events import oom_name
from forensics.model import detail_dict
from forensics.report.formatting import clip
from forensics.units import human

RAN_OUT = {"gpu_oom": "CUDA OOM", "oom_kill": "host OOM kill"}


EVENT_STYLE = {
    # kind: (label, colour, drawn on charts)
    "oom_kill": ("OOM kill", "#c0392b", True),
    "oom_invoked": ("OOM killer invoked", "#e8897f", True),
    "oom_reaped": ("OOM reaped", "#e8897f", False),
    "gpu_oom": ("CUDA out of memory", "#d4237a", True),
    "xid": ("Xid", "#6d4c41", True),
    "driver_error": ("driver error", "#6d4c41", True),
    "marker": ("marker", "#5f6b73", True),
    "process_start": ("process start", "#16a3b8", True),
    "process_gone": ("process gone", "#a8a81a", True),
    "sanitizer_leak": ("sanitizer leak", "#7b4fb3", False),
    "sanitizer_summary": ("sanitizer summary", "#7b4fb3", False),
    "sanitizer_error": ("sanitizer error", "#7b4fb3", True),
    "allocation_site": ("live allocations of a call path", "#2e9a3a", False),
    "collective_error": ("collective error", "#e67e22", True),
    "rank_exit": ("rank exit", "#a04000", True),
    "rank_signal": ("rank signalled", "#a8a81a", True),
    "rank_info": ("rank identity", "#5f6b73", False),
    "gpu_oom_counted": ("CUDA OOM counted by the allocator", "#d4237a", True),
    "alloc_retry": ("allocator retry", "#e67e22", True),
    "job_killed": ("killed by a signal", "#a04000", True),
    "kv_cache_leak": ("KV cache pool leak detected by the engine", "#7b4fb3", True),
}
# what a counter of torch.cuda.memory_stats() that rose means (its events' detail names the counter)
COUNTER_MEANING = {
    "alloc_retry": "a cudaMalloc failed, the caching allocator freed its cached blocks and retried: memory "
                   "was nearly full",
    "gpu_oom_counted": "an OutOfMemoryError was raised",
}


def event_label(e: dict) -> str:
    kind = e.get("kind") or "event"
    label = EVENT_STYLE.get(kind, (kind,))[0]
    d = detail_dict(e.get("detail"))
    if kind == "xid" and d.get("code") is not None:
        label = f"Xid {d.get('code')}" + (f": {d['meaning']}" if d.get("meaning") else "")
    elif kind == "collective_error" and d.get("error"):
        label = f"{d.get('backend') or 'collective'} {str(d['error']).replace('_', ' ')}"
    elif kind == "rank_signal" and d.get("signal"):
        label = f"torchrun sent {d['signal']}"
    elif kind == "job_killed":
        label = f"killed by {d.get('signal') or 'a signal'}"
        if not d.get("cause_recorded"):
            label += ", cause not recorded"
        elif d.get("reason"):
            label += f" ({d['reason']})"
    elif kind == "marker" and (d.get("label") or d.get("name") or d.get("what")):
        label = f"marker: {d.get('label') or d.get('name') or d.get('what')}"
    elif kind == "gpu_oom":
        label = oom_name(d)
    elif kind in COUNTER_MEANING and d.get("counter"):
        label += f" ({d['counter']} {d.get('previous')} → {d.get('value')}: {COUNTER_MEANING[kind]})"
    who = []
    if d.get("rank") is not None:
        who.append(f"rank {d['rank']}")
    if e.get("process"):
        who.append(str(e["process"]))
    if e.get("pid") is not None:
        who.append(f"pid {e['pid']}")
    if e.get("gpu") is not None and kind in ("gpu_oom", "gpu_oom_counted", "alloc_retry", "xid", "driver_error"):
        who.append(f"GPU {e['gpu']}")
    if who:
        label += " (" + ", ".join(who) + ")"
    if e.get("bytes") is not None and kind in ("gpu_oom",):
        label += f", tried to allocate {human(e['bytes'])}"
    return clip(label, 160)
