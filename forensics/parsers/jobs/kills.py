"""Format "job-kill-records": what says a job was killed, in the job's own output (docs/formats.md §12),
in a file of its own or inside any other log (as a scanner):

- Slurm's step daemon and srun: `slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some
  of the step tasks have been OOM Killed.`, the older `Detected 2 oom-kill event(s) in step 3756240.batch
  cgroup.` / `in StepId=191.batch cgroup.`, `srun: error: node1: task 0: Out Of Memory`: an `oom_kill` of
  the step's cgroup (the host memory the job was given ran out, not the GPU's);
- Slurm's `*** STEP 3495064.0 ON orion-01-01 CANCELLED AT 2021-10-27T19:35:36 ***` and `*** JOB 42 ON n1
  CANCELLED AT ... DUE TO TIME LIMIT ***`: a `job_killed` (the controller's local time, read in --tz);
- a shell's `slurm_script: line 28:  8156 Killed   python3 main.py`, PyTorch's `DataLoader worker (pid
  19597) is killed by signal: Killed.`, a launcher's `... exits with return code = -9`: a `job_killed`
  with the signal, whose cause the line does not record (a SIGKILL is often, not always, the OOM killer).

A line that starts with its logger's date and time (DeepSpeed's launcher) is timed by it, in --tz;
the others carry no time of their own.

`detail`: `scope` ("memcg" for Slurm's OOM records: a cgroup's limit, as the kernel's oom_kill events say), `reporter` (slurm, shell, dataloader, launcher),
`job`, `step`, `node`, `task`, `count` (OOM kills the record counts), `signal`, `exit_code`,
`cause_recorded` (False where a kill does not say why).
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics import clock
from forensics.io.lines import read_whole
from forensics.parsers.hint_reader import PROVENANCE, HintReader
from forensics.model import Parsed, events_frame
from forensics.parsers.contract import Format, Scan

NAME = "job-kill-records"

_SLURM_OOM = re.compile(r"Detected (?P<n>[0-9]+) oom[_-]kill events?(?:\(s\))? in (?:StepId=|step )(?P<step>[0-9A-Za-z_.+]+?)"
                        r"\.?(?: cgroup|\s|$)")
_SRUN_OOM = re.compile(r"srun: error: (?P<node>[^:\s]+): tasks? (?P<task>[0-9][0-9,\-]*): Out Of Memory")
_CANCELLED = re.compile(r"\*\*\* (?P<what>STEP|JOB) (?P<id>\S+) ON (?P<node>\S+) CANCELLED AT "
                        r"(?P<at>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?P<why> DUE TO [A-Z ]+?)?"
                        r"(?: \*\*\*|$)")
# a logger's own date and time at the start of a line (DeepSpeed's launcher: `[2023-04-14 13:11:27,885] [ERROR]`)
_LINE_STAMP = re.compile(r"^\W{0,3}(?P<d>[0-9]{4}-[0-9]{2}-[0-9]{2})[ T](?P<t>[0-9]{2}:[0-9]{2}:[0-9]{2})\b")
_SHELL_KILLED = re.compile(r"line [0-9]+: +(?P<pid>[0-9]+) Killed +(?P<cmd>\S.*?)\s*$")
_WORKER_KILLED = re.compile(r"DataLoader worker \(pid (?P<pid>[0-9]+)\) is killed by signal: (?P<sig>[A-Za-z][A-Za-z ]*?)\.")
_RETURN_CODE = re.compile(r"exits with return code = (?P<code>-[0-9]+)\b")
# signal names as Python's strsignal words them (the DataLoader message) -> the SIG name
_SIGNAL_WORDS = {"Killed": "SIGKILL", "Terminated": "SIGTERM", "Aborted": "SIGABRT", "Segmentation fault": "SIGSEGV",
                 "Bus error": "SIGBUS", "Interrupt": "SIGINT", "Hangup": "SIGHUP"}
_SIGNAL_NUMBERS = {9: "SIGKILL", 15: "SIGTERM", 6: "SIGABRT", 11: "SIGSEGV", 7: "SIGBUS", 2: "SIGINT", 1: "SIGHUP"}

SCAN_HINT = "|".join([r"Detected [0-9]+ oom[_-]kill event", r"srun: error: .*: Out Of Memory",
                      r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT", r"line [0-9]+: +[0-9]+ Killed ",
                      r"DataLoader worker \(pid [0-9]+\) is killed by signal", r"exits with return code = -[0-9]"])
SCAN_PREFILTER = "oom_kill event|oom-kill event|Out Of Memory|CANCELLED AT| Killed |is killed by signal|exits with return code"
SCAN_BLOCK_LITERALS = ("oom_kill event", "oom-kill event", "out of memory", "cancelled at", " killed ",
                       "is killed by signal", "exits with return code")
# each hint line is an event: a scan keeps the first scanners.MAX_EVENT_LINES of them per file
SCAN_EVENT_LINES = True

_SNIFF = re.compile(SCAN_HINT)


def sniff(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        m = _SNIFF.search(line)
        if m:
            return f"kill record ({m.group(0).strip()}) on line {i}"
    return None


class Reader(HintReader):
    other_reason = "not a kill or exit record"

    def __init__(self, src, opts):
        super().__init__(src, opts, SCAN_PREFILTER, SCAN_HINT, read)


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts) -> Parsed:
    return read(lines, src, opts)


def event_of(text: str) -> dict | None:
    """One line's record (kind, pid, process, `d` for detail, `at` a naive local time), or None."""
    if m := _SLURM_OOM.search(text):
        job, _, step = m["step"].partition(".")
        return {"kind": "oom_kill", "process": f"Slurm step {m['step']}",
                "d": {"reporter": "slurm", "scope": "memcg", "ran_out": "host", "job": job, "step": step or None,
                      "count": int(m["n"])}}
    if m := _SRUN_OOM.search(text):
        return {"kind": "oom_kill", "process": f"Slurm task {m['task']} on {m['node']}",
                "d": {"reporter": "slurm", "scope": "memcg", "ran_out": "host", "node": m["node"], "task": m["task"]}}
    if m := _CANCELLED.search(text):
        job, _, step = m["id"].partition(".")
        why = (m["why"] or "").replace(" DUE TO ", "").strip().lower() or None
        return {"kind": "job_killed", "process": f"Slurm {m['what'].lower()} {m['id']}", "at": m["at"],
                "d": {"reporter": "slurm", "job": job, "step": step or None, "node": m["node"], "reason": why,
                      "signal": "SIGTERM", "cause_recorded": why is not None}}
    if m := _WORKER_KILLED.search(text):
        return {"kind": "job_killed", "pid": int(m["pid"]), "process": "DataLoader worker",
                "d": {"reporter": "dataloader", "signal": _SIGNAL_WORDS.get(m["sig"], m["sig"]), "cause_recorded": False}}
    if m := _SHELL_KILLED.search(text):
        return {"kind": "job_killed", "pid": int(m["pid"]), "process": m["cmd"][:200],
                "d": {"reporter": "shell", "signal": "SIGKILL", "cause_recorded": False}}
    if m := _RETURN_CODE.search(text):
        code = int(m["code"])
        return {"kind": "job_killed", "d": {"reporter": "launcher", "exit_code": code,
                                            "signal": _SIGNAL_NUMBERS.get(-code, f"signal {-code}"),
                                            "cause_recorded": False}}
    return None


def read(lines: pl.DataFrame, src, opts) -> Parsed:
    """Events from the hinted lines (line, text) of one file."""
    out = Parsed(clock="none")
    rows = []
    for line_no, text in lines.sort("line").select("line", "text").iter_rows():
        if not text or re.match(PROVENANCE, text):
            continue
        ev = event_of(text)
        if ev is None:
            out.skipped.add("a kill word in a line that is no kill record", line_no)
            continue
        stamp = _LINE_STAMP.match(text)
        if stamp and "at" not in ev:
            ev["at"] = f"{stamp['d']}T{stamp['t']}"
        ev.update(line=line_no, text=text)
        rows.append(ev)
    if not rows:
        return out
    stamps = [r.pop("at", None) for r in rows]
    if any(stamps):
        # Slurm writes the controller's local time without a zone
        naive = pl.Series("t", stamps, dtype=pl.String).str.to_datetime("%Y-%m-%dT%H:%M:%S", strict=False)
        times = pl.DataFrame({"t": naive}).select(clock.localize(pl.col("t"), opts.tz_for(src.path)))["t"].to_list()
        for r, t in zip(rows, times):
            r["time"] = t
        out.clock = "wall-assumed"
    for r in rows:
        r["detail"] = json.dumps({k: v for k, v in r.pop("d").items() if v is not None})
    out.events = events_frame(rows)
    return out


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, event_lines=SCAN_EVENT_LINES),
    files="Slurm's OOM and cancel records (`Detected 1 oom_kill event in StepId=…`, `srun: error: …: Out Of "
          "Memory`, `*** STEP … CANCELLED AT …`), a shell's `Killed` line, `DataLoader worker (pid N) is killed "
          "by signal`, a launcher's `exits with return code = -9`; also inside any other log",
    yields="`oom_kill` (the step's cgroup ran out of host memory), `job_killed` with the signal; the report's "
           "\"What ended the job\" uses them",
    # a kill record ends their files as often as any other log (a shell's Killed under a traceback or
    # a server's log, a launcher's return code under torchrun's lines)
    after=("serving-engine-log", "torch-distributed", "pytorch-oom", "framework-oom", "pytorch-memory-stats"),
)
