"""Format "slurm-seff": Slurm's job efficiency summary, `seff <jobid>` (contribs/seff; docs/formats.md
§12.4), pasted as printed, indented, or kept as `# ` comments under a batch script:

    Job ID: 35582785
    Cluster: openmind7
    State: OUT_OF_MEMORY (exit code 0)
    ...
    Memory Utilized: 47.64 GB
    Memory Efficiency: 119.11% of 40.00 GB

`State` OUT_OF_MEMORY is an `oom_kill` of the job's cgroup (scope `memcg`: the host memory the job was
given ran out, not a GPU's) with `Memory Utilized` (seff's peak of the steps' MaxRSS; `GB` = 2^30, as
seff's kbytes2str divides by 1024) and its line in its detail; CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, DEADLINE a
`job_killed`. Each job's memory used of its request is said in a note. seff prints no time: the events
are untimed.
"""
from __future__ import annotations

import json
import re

from forensics.model import Parsed, events_frame
from forensics.units import human
from forensics.parsers.contract import Format

NAME = "slurm-seff"

_PREFIX = r"^\s*(?:#\s*)?"
_FIELD = re.compile(_PREFIX + r"(?P<k>Job ID|Array Job ID|Cluster|User/Group|State|Nodes|Cores per node|Cores|"
                    r"CPU Utilized|CPU Efficiency|Job Wall-clock time|Memory Utilized|Memory Efficiency):\s*(?P<v>.*?)\s*$")
_STATE = re.compile(r"^(?P<state>[A-Z_]+)(?: by [0-9]+)?(?: \(exit code (?P<code>[0-9]+(?::[0-9]+)?)\))?")
_SIZE = re.compile(r"^(?P<n>[0-9]+(?:\.[0-9]+)?) (?P<u>[KMGTP]?)B\b")
_EFFICIENCY = re.compile(r"^(?P<pct>[0-9.]+)% of (?P<n>[0-9]+(?:\.[0-9]+)?) (?P<u>[KMGTP]?)B\b")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_KILLED = ("CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "DEADLINE")


def sniff(head: list[str]) -> str | None:
    keys = {m["k"] for ln in head if (m := _FIELD.match(ln))}
    if {"Job ID", "State"} <= keys and keys & {"Memory Utilized", "Memory Efficiency", "CPU Efficiency"}:
        return "seff job summary (Job ID, State, efficiencies)"
    return None


def _bytes(m: re.Match | None) -> int | None:
    return round(float(m["n"]) * _SCALE[m["u"]]) if m else None


def _close(job: dict | None, events: list, notes: list) -> None:
    if not job or "state" not in job:
        return
    used, asked = job.get("used"), job.get("requested")
    if used is not None:
        notes.append(f"seff: job {job['id']} used {human(used)} of host memory"
                     + (f" of the {human(asked)} it asked for" if asked else "") + f" ({job['state']}, line {job['used_line']})")
    state = job["state"]
    if state != "OUT_OF_MEMORY" and state not in _KILLED:
        return
    code = job.get("code")
    d = {"reporter": "slurm", "job": job["id"], "state": state,
         "exit_code": int(code) if code and code.isdigit() else code,
         "requested_bytes": asked, "cluster": job.get("cluster")}
    if state == "OUT_OF_MEMORY":
        # the memory used stands on its own line (`Memory Utilized`), not the State line the event cites
        kind, bytes_, d = "oom_kill", None, {**d, "scope": "memcg", "ran_out": "host", "used_bytes": used,
                                             "used_line": job.get("used_line") if used is not None else None}
    else:
        kind, bytes_, d = "job_killed", None, {**d, "reason": state.lower(), "cause_recorded": state != "CANCELLED"}
    events.append({"kind": kind, "time": None, "line": job["state_line"], "text": job["state_text"],
                   "process": f"Slurm job {job['id']}", "bytes": bytes_,
                   "detail": json.dumps({k: v for k, v in d.items() if v is not None})})


def parse(src, opts) -> Parsed:
    p = Parsed(clock="none")
    events: list[dict] = []
    job: dict | None = None
    for line_no, raw in src.frame().select("line", "text").iter_rows():
        text = raw or ""
        if not text.strip() or text.lstrip().startswith("# source:"):
            continue
        f = _FIELD.match(text)
        if not f:
            p.skipped.add("not a line of seff's summary", line_no)
            continue
        k, v = f["k"], f["v"]
        if k == "Job ID":
            _close(job, events, p.notes)
            job = {"id": v}
        elif job is None:
            p.skipped.add("a seff field before its Job ID", line_no)
        elif k == "Cluster":
            job["cluster"] = v or None
        elif k == "State" and (s := _STATE.match(v)):
            job.update(state=s["state"], code=s["code"], state_line=line_no, state_text=text)
        elif k == "Memory Utilized":
            job.update(used=_bytes(_SIZE.match(v)), used_line=line_no)
        elif k == "Memory Efficiency":
            job["requested"] = _bytes(_EFFICIENCY.match(v))
    _close(job, events, p.notes)
    if events:
        p.events = events_frame(events)
    elif not p.notes:
        p.notes.append("no seff job summary with a State was found")
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="Slurm's `seff` summary, printed, indented or as `# ` comments (`State: OUT_OF_MEMORY`, `Memory "
          "Utilized`, `Memory Efficiency`)",
    yields="`oom_kill` with the memory used, `job_killed`, a note of used of requested",
)
