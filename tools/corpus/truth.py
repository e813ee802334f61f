#!/usr/bin/env python3
"""truth.json and README.md of a corpus case, computed from its side file (standard library only).

    python3 tools/corpus/truth.py --runs RUNS_DIR --corpus CORPUS_DIR [--half tune|heldout]

rewrites every case's truth.json and README.md from `RUNS_DIR/<half>/<case>.jsonl` (the workloads'
own rows and the recorder's `rec_*` events) and the kernel log files in the case folder. Nothing here
is typed by hand: the case's story, verdict and findings come from cases.py through the side file's
`rec_case` row; every number from the rows.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools/: recorder_common.py

from recorder_common import iso, read_rows  # noqa: E402

MiB = 2**20

# Workloads whose kept tensor of step s is also held by a local variable when step s logs its marker
# (linear_late: `h`, infer: `out`, both rebound only at the next step): the memory the bug keeps first
# shows at the marker of step s + 1, which is the onset; step s is `code_leak_step`.
ALIASED_AT_MARKER = {"linear_late", "infer"}


def mib(b) -> str:
    return "?" if b is None else f"{b / MiB:.1f} MiB"


def kernel_kills(folder: Path, since: float) -> list[dict]:
    """'Killed process N' lines of dmesg-iso.txt at or after `since` (and their dmesg.txt line)."""
    kills = []
    p = folder / "dmesg-iso.txt"
    if not p.exists():
        return kills
    for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)[,.](\d+)([+-]\d\d:?\d\d) .*Killed process (\d+) \(([^)]*)\)", line)
        if not m:
            continue
        stamp = datetime.fromisoformat(f"{m.group(1)}.{m.group(2)[:6]}{m.group(3)}")
        t = stamp.timestamp()
        if t + 1 < since:
            continue
        kills.append({"pid": int(m.group(4)), "comm": m.group(5), "time": iso(t), "time_as_written": line.split()[0],
                      "dmesg_iso_line": i})
    raw = folder / "dmesg.txt"
    if raw.exists():
        lines = raw.read_text(errors="replace").splitlines()
        for k in kills:
            for i, line in enumerate(lines, 1):
                if f"Killed process {k['pid']} " in line:
                    k["dmesg_line"] = i
                    up = re.match(r"\[\s*(\d+\.\d+)\]", line)
                    k["uptime_s"] = float(up.group(1)) if up else None
                    break
    return kills


def job_facts(j: dict, steps: list[dict], rows: list[dict], meta: dict) -> dict:
    pid = j["pid"]
    mine = [r for r in rows if r.get("pid") == pid]
    start = next((r for r in mine if r["ev"] == "start"), {})
    if steps:
        a = [s["allocated"] for s in steps]
        r_ = [s["reserved"] for s in steps]
        j.update(steps=len(steps), first_step=steps[0]["step"], last_step=steps[-1]["step"],
                 first_step_time=iso(steps[0]["t"]), last_step_time=iso(steps[-1]["t"]),
                 allocated_first=a[0], allocated_max=max(a), allocated_last=a[-1],
                 reserved_first=r_[0], reserved_max=max(r_), reserved_last=r_[-1])
        if len(steps) > 2:
            j["step_seconds_median"] = round(statistics.median(b["t"] - x["t"] for x, b in zip(steps, steps[1:])), 4)
    for k in ("cap_bytes", "working", "leak_bytes", "stair_bytes", "out_bytes", "worker_bytes", "transformers",
              "lightning", "gpu_name", "gpu_total", "torch"):
        if start.get(k) is not None:
            j[k if k != "working" else "working_set_bytes"] = start[k]
    if start:
        j["workload_ready_time"] = iso(start["t"])
    oom = next((r for r in mine if r["ev"] == "oom"), None)
    if oom:
        j.update(oom_step=oom["step"], oom_time=iso(oom["t"]), oom_allocated=oom["allocated"],
                 oom_reserved=oom["reserved"])
    if not j["leaks"] or not steps:
        return j
    by = {s["step"]: s for s in steps}
    use_kept = all(isinstance(s.get("kept"), (int, float)) for s in steps)
    if use_kept:
        onset = next((s for s in steps if s["kept"] > 0), None)
    else:
        onset = next((s for s in steps if (s.get("kept_tensors") or 0) > 0), None)
    ls = next((r for r in mine if r["ev"] == "leak_start"), None)
    if ls:
        j["code_leak_step"] = ls["step"]
    if onset is not None:
        j["first_kept_step"] = onset["step"]
        if j["kind"] in ALIASED_AT_MARKER:
            onset = next((s for s in steps if s["step"] > onset["step"]), None)
    if onset is None:
        j["leak_onset_step"] = None
        return j
    k = onset["step"]
    j["leak_onset_step"] = k
    j["leak_onset_time"] = iso(onset["t"])
    prev = by.get(k - 1)
    if prev:
        j["allocated_jump_at_onset"] = onset["allocated"] - prev["allocated"]
    last = steps[-1]
    base = prev or onset
    y = (lambda s: s["kept"]) if use_kept else (lambda s: s["allocated"])
    j["rate_source"] = ("bytes the bug keeps alive (tensor sizes counted by the workload)" if use_kept
                        else "torch.cuda.memory_allocated() at the step markers")
    if last["step"] > base["step"]:
        growth = y(last) - y(base)
        j["leak_growth_bytes"] = growth
        j["leak_steps"] = last["step"] - base["step"]
        j["leak_seconds"] = round(last["t"] - base["t"], 3)
        j["rate_bytes_per_step"] = int(round(growth / (last["step"] - base["step"])))
        if last["t"] > base["t"]:
            j["rate_bytes_per_second"] = int(round(growth / (last["t"] - base["t"])))
        ga = last["allocated"] - base["allocated"]
        j["allocated_growth_bytes"] = ga
        # when the allocator's pool (what device memory sees) rose during the leak: the seconds from its
        # first rise to its last (one jump, then level, is a one-off allocation's shape to a device view)
        rises = [b["t"] for a, b in zip(steps, steps[1:]) if b["step"] > base["step"] and b["reserved"] > a["reserved"]]
        if rises:
            j["pool_rises_after_onset"] = len(rises)
            j["pool_rise_seconds"] = round(rises[-1] - rises[0], 3)
    stairs = [r for r in mine if r["ev"] == "stair"]
    if stairs:
        j["stairs"] = len(stairs)
        j["stair_bytes"] = int(statistics.median(r["bytes"] for r in stairs))
        j["stair_steps"] = [r["step"] for r in stairs]
    if use_kept:
        j["kept_bytes_at_end"] = last["kept"]
    return j


def compute(folder: Path, rows: list[dict]) -> dict:
    meta = next(r for r in rows if r["ev"] == "rec_case")
    env = meta.get("env", {})
    stop = next((r for r in rows if r["ev"] == "rec_loggers_stop"), None)
    logger_stopped = bool(stop and stop.get("reason") == "logger_stopped")
    logger_starts = [r for r in rows if r["ev"] == "rec_logger_start"]
    kills = {r["job_pid"]: r for r in rows if r["ev"] == "rec_kill"}
    exits = {r["job_pid"]: r for r in rows if r["ev"] == "rec_exit"}
    reaped = {r["job_pid"]: r for r in rows if r["ev"] in ("rec_reaped",)}
    t_case = min(r["t"] for r in rows)
    kkills = kernel_kills(folder, t_case) if meta.get("kernel") else []
    notes = [r["note"] for r in rows if r["ev"] == "rec_note"]
    for r in rows:
        if r["ev"] == "dropped_kwargs":
            notes.append(f"{r['cls']} of this version has no {', '.join(r['names'])}: left out")
    jobs = []
    files: dict[str, str] = {}
    for r in logger_starts:
        files[r["file"]] = r["command"]
    for f in (r for r in rows if r["ev"] == "rec_fork"):
        pid = f["job_pid"]
        files.setdefault(f["out"], f["command"])
        files.setdefault(f["err"], f["command"] + "  (its stderr)")
        j = {"pid": pid, "role": f["role"], "kind": f["kind"], "command": f["command"], "start": iso(f["t"]),
             "end": None, "exit_status": None, "leaks": bool(f["leaks"]), "stdout": f["out"], "err": f["err"]}
        ex = exits.get(pid)
        if ex:
            j["end"] = iso(ex["t"])
            j["exit_status"] = ex["status"]
        steps = sorted((r for r in rows if r["ev"] == "step" and r.get("pid") == pid), key=lambda s: s["step"])
        job_facts(j, steps, rows, meta)
        st = j["exit_status"]
        if pid in kills:
            ending = "sigkill"
            j["killed_time"] = iso(kills[pid]["t"])
        elif j.get("oom_step") is not None:
            ending = "cuda_oom"
        elif st == -9 and any(k["pid"] == pid for k in kkills):
            ending = "oom_kill"
        elif st == 0:
            ending = "exit"
        elif st is None:
            ending = "unknown"
        elif st < 0:
            ending = f"signal_{-st}"
        else:
            ending = f"exit_status_{st}"
        if logger_stopped and ex and ex["t"] > stop["t"]:
            j["ending_after_logs"] = ending
            ending = "logger_stopped"
            seen = [s for s in steps if s["t"] <= stop["t"]]
            if seen:
                j["last_step_before_logs_end"] = seen[-1]["step"]
                j["allocated_at_logs_end"] = seen[-1]["allocated"]
                j["reserved_at_logs_end"] = seen[-1]["reserved"]
        j["ending"] = ending
        jobs.append(j)
        if steps and f["kind"] == "pinned_host":
            host = [s.get("host_rss") for s in steps if s.get("host_rss")]
            if len(host) > 2:
                j["host_bytes_per_step"] = int(statistics.median(b - a for a, b in zip(host, host[1:])))
                j["host_rss_first"], j["host_rss_last"] = host[0], host[-1]
            j["host_kept_bytes_at_end"] = steps[-1].get("host_kept")
            j["pinned"] = all(s.get("pinned") for s in steps)
    # a residual worker, seen through its own rows
    for w in (r for r in rows if r["ev"] == "worker_ready"):
        wpid = w["pid"]
        ws = next((r for r in rows if r["ev"] == "worker_start" and r["pid"] == wpid), None)
        end = reaped.get(wpid) or kills.get(wpid)
        parent = next((j for j in jobs if j["role"] == "trainer"), None)
        jobs.append({"pid": wpid, "role": "worker", "kind": "residual worker (torch.multiprocessing fork)",
                     "command": f"forked by pid {parent['pid'] if parent else '?'} (workloads._worker)",
                     "start": iso(ws["t"]) if ws else None, "ready_time": iso(w["t"]),
                     "end": iso(end["t"]) if end else None, "holds_bytes": w["bytes"],
                     "allocated": w.get("allocated"), "reserved": w.get("reserved"),
                     "ending": "sigkill" if wpid in kills else "unknown", "leaks": True,
                     "killed_time": iso(kills[wpid]["t"]) if wpid in kills else None,
                     "outlived_parent_seconds": round(kills[wpid]["t"] - exits[parent["pid"]]["t"], 3)
                     if (wpid in kills and parent and parent["pid"] in exits) else None})
    for r in rows:
        if r["ev"] == "rec_file":
            files[r["file"]] = r["command"]
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_file() and rel not in files and rel not in ("truth.json", "README.md"):
            if rel.startswith("lightning_logs/"):
                files[rel] = ("written by Lightning's CSVLogger(save_dir=<case folder>, name='lightning_logs', "
                              "version=0) inside the job")
            else:
                files[rel] = "(not described by the recorder)"
    files = {k: files[k] for k in sorted(files) if (folder / k).exists()}

    leaking = [j for j in jobs if j["leaks"] and j["role"] != "worker"]
    first = leaking[0] if leaking else None
    pattern = meta.get("pattern")
    t = {
        "case": meta["case"], "half": meta["half"], "expected_verdict": meta["expected_verdict"],
        "expected_findings": meta["expected_findings"], "pattern": pattern,
        "leak_onset_time": first.get("leak_onset_time") if first and pattern else None,
        "leak_onset_step": first.get("leak_onset_step") if first and pattern else None,
        "rate_bytes_per_step": first.get("rate_bytes_per_step") if first and pattern else None,
        "rate_bytes_per_second": first.get("rate_bytes_per_second") if first and pattern else None,
        "stairs": first.get("stairs") if first and pattern == "step" else None,
        "stair_period_steps": meta.get("stair_period_steps") if pattern == "step" else None,
        "stair_bytes": first.get("stair_bytes") if first and pattern == "step" else None,
        "stairs_before_logs_end": (sum(1 for x in first.get("stair_steps", []) if x <= first["last_step_before_logs_end"])
                                   if first and pattern == "step" and first.get("last_step_before_logs_end") else None),
        "leaking_pid": first["pid"] if first and pattern else None,
        "jobs": jobs,
        "gpu": 0,
        "tz": env.get("tz"),
        "logs_start": iso(min(r["t"] for r in logger_starts)) if logger_starts else None,
        "logs_end": iso(stop["t"]) if stop else None,
        "logger_stopped": logger_stopped,
        "files": files,
    }
    workers = [j for j in jobs if j["role"] == "worker"]
    if workers:
        w = workers[0]
        trainer = next((j for j in jobs if j["role"] == "trainer"), {})
        t["residual"] = {"worker_pid": w["pid"], "worker_bytes": w["holds_bytes"], "trainer_pid": trainer.get("pid"),
                         "trainer_killed_time": trainer.get("killed_time"), "worker_killed_time": w.get("killed_time"),
                         "outlived_parent_seconds": w.get("outlived_parent_seconds")}
    if meta["expected_verdict"] == "cache_growth" and jobs and "steps" in jobs[0]:
        j = jobs[0]
        srows = sorted((r for r in rows if r["ev"] == "step" and r.get("pid") == j["pid"]), key=lambda s: s["step"])
        body = [s for s in srows if not s.get("after_empty_cache")]
        after = [s for s in srows if s.get("after_empty_cache")]
        t["cache_growth"] = {
            "allocated_first": body[0]["allocated"], "allocated_last": body[-1]["allocated"],
            "reserved_first": body[0]["reserved"], "reserved_last": body[-1]["reserved"],
            "reserved_growth_bytes_per_step": int((body[-1]["reserved"] - body[0]["reserved"]) /
                                                  max(1, body[-1]["step"] - body[0]["step"])),
            "reserved_growth_bytes_per_second": int((body[-1]["reserved"] - body[0]["reserved"]) /
                                                    max(1e-9, body[-1]["t"] - body[0]["t"])),
            "empty_cache_at_end": bool(after),
            "reserved_after_empty_cache": after[0]["reserved"] if after else None,
            "empty_cache_time": iso(after[0]["t"]) if after else None,
        }
    hosts = [j for j in jobs if j["kind"] == "pinned_host"]
    if hosts:
        h = hosts[0]
        k = next((k for k in kkills if k["pid"] == h["pid"]), kkills[0] if kkills else None)
        t["host_memory"] = {"pid": h["pid"], "host_bytes_per_step": h.get("host_bytes_per_step"),
                            "host_rss_first": h.get("host_rss_first"), "host_rss_last": h.get("host_rss_last"),
                            "pinned": h.get("pinned"),
                            "cgroup": next((r.get("how") for r in rows if r["ev"] == "rec_cgroup"), None),
                            "cgroup_events": next((r.get("events") for r in rows if r["ev"] == "rec_cgroup_events"), None),
                            "kernel_kill": k, "later_kernel_kills": [x for x in kkills if x is not k]}
    for j in jobs:
        if j.get("first_kept_step") is not None and j.get("leak_onset_step") not in (None, j["first_kept_step"]):
            notes.append(f"pid {j['pid']}: the bug keeps its first tensor at step {j['first_kept_step']}, but that "
                         f"tensor is still held by a local variable when step {j['first_kept_step']} logs, so the "
                         f"kept memory first shows at step {j['leak_onset_step']} (the onset)")
        if j["leaks"] and j.get("allocated_jump_at_onset") is not None and j.get("role") != "worker":
            notes.append(f"pid {j['pid']}: at its onset step {j['leak_onset_step']} `allocated` changed by "
                         f"{mib(j['allocated_jump_at_onset'])} from the step before")
    if any(f["kind"] != "selftest" for f in (r for r in rows if r["ev"] == "rec_fork")):
        notes.append("each job ran as a fork of tools/corpus/record.py (torch imported there once, CUDA not "
                     "initialised before the fork), with stdout and stderr sent to the files named; that is the "
                     "command shown in `files`, and its tracebacks start at workloads.main")
    for j in jobs:
        if j.get("ending") == "cuda_oom" or j.get("ending_after_logs") == "cuda_oom":
            notes.append(f"pid {j['pid']}: the CUDA OOM traceback is in {j.get('err', 'its stderr file')}")
    t["notes"] = notes
    t["recorded_on"] = {k: env.get(k) for k in ("gpu_line", "kernel", "torch", "transformers", "pytorch_lightning",
                                                  "lightning", "date", "utc_offset", "nvidia_smi_version")}
    t["story"] = meta["story"]
    return t


def readme(t: dict) -> str:
    out = [f"# {t['case']}\n\n", f"Half: `{t['half']}`. Expected verdict: `{t['expected_verdict']}`; findings that must "
           f"be present: {', '.join('`%s`' % f for f in t['expected_findings']) or 'none in particular'}"
           + (f"; pattern `{t['pattern']}`" if t["pattern"] else "") + ".\n\n",
           "## What happened\n\n", t["story"] + "\n\n", "## Numbers (from the side file)\n\n"]
    for j in t["jobs"]:
        line = (f"- pid {j['pid']} ({j['role']}, `{j['kind']}`): started {j['start']}, ended {j.get('end')}, "
                f"ending `{j['ending']}`")
        if j.get("ending_after_logs"):
            line += f" (after the logs ended: `{j['ending_after_logs']}`)"
        if j.get("exit_status") is not None:
            line += f", exit status {j['exit_status']}"
        if j.get("steps"):
            line += (f"; {j['steps']} steps ({j['first_step_time']} .. {j['last_step_time']}), allocated "
                     f"{mib(j['allocated_first'])} -> max {mib(j['allocated_max'])}, reserved max {mib(j['reserved_max'])}")
        if j.get("holds_bytes"):
            line += f"; holds {mib(j['holds_bytes'])} on the GPU, outlived its parent by {j.get('outlived_parent_seconds')} s"
        if j.get("leak_onset_step") is not None:
            line += (f"; leak onset step {j['leak_onset_step']} at {j['leak_onset_time']}, "
                     f"{j.get('rate_bytes_per_step')} B/step ({mib(j.get('rate_bytes_per_step'))}), "
                     f"{j.get('rate_bytes_per_second')} B/s")
        if j.get("stairs"):
            line += f"; {j['stairs']} stairs of {mib(j['stair_bytes'])} at steps {j['stair_steps']}"
        if j.get("oom_step") is not None:
            line += f"; CUDA OOM during step {j['oom_step']} at {j['oom_time']} (cap {mib(j.get('cap_bytes'))})"
        out.append(line + ".\n")
    if t.get("logger_stopped"):
        out.append(f"- The nvidia-smi loggers were stopped at {t['logs_end']}, before the job ended.\n")
    elif t.get("logs_start"):
        out.append(f"- Loggers ran from {t['logs_start']} to {t['logs_end']}.\n")
    if t.get("cache_growth"):
        c = t["cache_growth"]
        out.append(f"- Reserved grew from {mib(c['reserved_first'])} to {mib(c['reserved_last'])} "
                   f"({c['reserved_growth_bytes_per_step']} B/step) while allocated went {mib(c['allocated_first'])} -> "
                   f"{mib(c['allocated_last'])}" + (f"; after empty_cache(): {mib(c['reserved_after_empty_cache'])} reserved"
                                                   if c["empty_cache_at_end"] else "") + ".\n")
    if t.get("host_memory"):
        h = t["host_memory"]
        out.append(f"- Host RSS {mib(h.get('host_rss_first'))} -> {mib(h.get('host_rss_last'))} "
                   f"({mib(h.get('host_bytes_per_step'))}/step, pinned: {h.get('pinned')}); {h.get('cgroup')}; "
                   f"kernel kill: {h.get('kernel_kill')}.\n")
    out.append(f"- Times in the logs without a zone are local time of the machine: `{t['tz']}`.\n\n")
    out.append("## Files\n\n")
    for k, v in t["files"].items():
        out.append(f"- `{k}`: `{v}`\n")
    if t["notes"]:
        out.append("\n## Notes\n\n" + "".join(f"- {n}\n" for n in t["notes"]))
    out.append("\n`truth.json` holds all of this in machine form; both were written by `tools/corpus/truth.py` "
               "from the side file, the logs are as the tools wrote them.\n")
    return "".join(out)


def write_case(folder: Path, sidefile: Path) -> dict:
    rows = read_rows(sidefile)
    t = compute(folder, rows)
    (folder / "truth.json").write_text(json.dumps(t, indent=1) + "\n")
    (folder / "README.md").write_text(readme(t))
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, required=True)
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--half", action="append")
    a = p.parse_args()
    for half in a.half or ["tune", "heldout"]:
        for side in sorted((a.runs / half).glob("*.jsonl")):
            folder = a.corpus / half / side.stem
            if folder.is_dir():
                t = write_case(folder, side)
                print(f"{half}/{side.stem}: {t['expected_verdict']} onset {t['leak_onset_step']} "
                      f"rate {t['rate_bytes_per_step']} jobs {[(j['pid'], j['ending']) for j in t['jobs']]}")


if __name__ == "__main__":
    main()
