"""Format "slurm-sacct": Slurm's accounting table, `sacct -j ID --format=JobID,State,ExitCode,MaxRSS,...`
as printed (fixed-width columns under a rule of dashes, long values cut to `OUT_OF_ME+`) or with
`--parsable` / `--parsable2` (`|` between fields) (docs/formats.md §12.3). One row per job and step
(`12345`, `12345.batch`, `12345.extern`, `12345.0`).

- `State` OUT_OF_MEMORY: an `oom_kill` of that step's cgroup (scope `memcg`), with its `MaxRSS` as the
  bytes it held (sacct polls RSS, so a sudden spike before the kill may be missed);
- CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, DEADLINE, or an `ExitCode` whose signal (after the `:`)
  is not 0: a `job_killed` with the reason and the signal;
- the step with the largest `MaxRSS` is said in a note (sacct's host-memory peak of the job).

Times: the row's `End` where the table has it (the controller's local time, in --tz).
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics import clock
from forensics.model import Parsed, events_frame
from forensics.units import human
from forensics.parsers.contract import Format

NAME = "slurm-sacct"

_RULE = re.compile(r"^\s*-{3,}(?: +-{3,})*\s*$")
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTP]?)$")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_NAMED_STEPS = ("batch", "extern", "interactive")
_KILLED = ("CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "DEADLINE")
_SIGNALS = {9: "SIGKILL", 15: "SIGTERM", 6: "SIGABRT", 11: "SIGSEGV", 7: "SIGBUS", 10: "SIGUSR1", 12: "SIGUSR2",
            1: "SIGHUP", 2: "SIGINT"}


def _is_header(cells: list[str]) -> bool:
    low = [c.strip().lower() for c in cells]
    return "jobid" in low and ("state" in low or "maxrss" in low)


def sniff(head: list[str]) -> str | None:
    lines = [ln for ln in head if ln.strip() and not ln.lstrip().startswith("# source:")]
    for i, line in enumerate(lines[:-1]):
        if "jobid" not in line.lower():   # a header names JobID (_is_header): most lines need no split
            continue
        if "|" in line and _is_header(line.split("|")):
            return "sacct --parsable table (JobID|...|State)"
        if _is_header(line.split()) and _RULE.match(lines[i + 1]):
            return "sacct table (JobID ... State, rule of dashes)"
    return None


def _rows(frame: pl.DataFrame, p: Parsed) -> list[tuple[int, dict, str]]:
    """(line, {column: cell}, text) of each data row; headers and rules are layout."""
    out, cols, spans, pipe = [], None, None, False
    lines = [(n, t or "") for n, t in frame.select("line", "text").iter_rows()]
    for k, (n, text) in enumerate(lines):
        if not text.strip() or text.lstrip().startswith("# source:"):
            continue
        if "|" in text and _is_header(text.split("|")):
            cols, pipe, spans = [c.strip() for c in text.rstrip("\n").split("|")], True, None
            continue
        nxt = lines[k + 1][1] if k + 1 < len(lines) else ""
        if _is_header(text.split()) and _RULE.match(nxt):
            cols, pipe = text.split(), False
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", nxt)]
            continue
        if _RULE.match(text):
            continue
        if cols is None:
            p.skipped.add("a line before the table's header", n)
            continue
        if pipe:
            cells = text.split("|")
        else:
            # a cell is the text under its dashes (values are right-aligned, names left)
            cells = [text[a:b + 1].strip() if a < len(text) else "" for a, b in spans]
        if len(cells) < len(cols) or not cells[0].strip():
            p.skipped.add("not a row of the table (fewer cells than the header)", n)
            continue
        out.append((n, {c.lower(): v.strip() for c, v in zip(cols, cells)}, text))
    return out


def _step(step: str) -> str:
    """A step name as Slurm names it: the 12-wide JobID column cuts `3764934.batch` to `3764934.bat+`
    and `40400241.extern` to `40400241.ex+`; the named steps are told apart by their first letters."""
    if step.endswith("+"):
        named = [s for s in _NAMED_STEPS if s.startswith(step[:-1])]
        if len(named) == 1:
            return named[0]
    return step


def _bytes(cell: str | None) -> int | None:
    m = _SIZE.match((cell or "").strip())
    return round(float(m[1]) * _SCALE[m[2]]) if m else None


def parse(src, opts) -> Parsed:
    p = Parsed(clock="none")
    rows = _rows(src.frame(), p)
    events, ends = [], []
    peak = None
    for line, r, text in rows:
        jobid = r.get("jobid", "")
        job, _, step = jobid.partition(".")
        step = _step(step)
        jobid = f"{job}.{step}" if step else job
        state = (r.get("state") or "").split(" ")[0].rstrip("+")
        code, _, sig = (r.get("exitcode") or "").partition(":")
        sig_n = int(sig) if sig.isdigit() and len(sig) <= 3 else 0   # (a signal number, not 10,000 digits)
        rss = _bytes(r.get("maxrss"))
        if rss is not None and (peak is None or rss > peak[1]):
            peak = (jobid, rss, line)
        d = {"reporter": "slurm", "job": job, "step": step or None, "state": r.get("state") or None,
             "exit_code": int(code) if code.isdigit() and len(code) <= 3 else None, "max_rss": rss,
             "node": r.get("nodelist") or None}
        if state.startswith("OUT_OF_ME"):     # OUT_OF_MEMORY, cut to OUT_OF_ME+ in a 10-wide column
            ev = {"kind": "oom_kill", "bytes": rss, "d": {**d, "scope": "memcg", "ran_out": "host"}}
        elif state in _KILLED or sig_n:
            ev = {"kind": "job_killed", "d": {**d, "reason": state.lower() or None,
                                              "cause_recorded": state in _KILLED and state != "CANCELLED",
                                              "signal": _SIGNALS.get(sig_n, f"signal {sig_n}") if sig_n else None}}
        else:
            continue
        ev.update(line=line, text=text, process=f"Slurm {'step' if step else 'job'} {jobid}")
        events.append(ev)
        ends.append(r.get("end"))
    if peak is not None:
        p.notes.append(f"largest MaxRSS (sacct's host-memory peak): {human(peak[1])} in {peak[0]} (line {peak[2]})")
    if not events:
        if rows:
            p.notes.append("no step ended out of memory or by a signal")
        return p
    naive = pl.Series("t", [e if e and e[:1].isdigit() else None for e in ends], dtype=pl.String).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S", strict=False)
    times = pl.DataFrame({"t": naive}).select(clock.localize(pl.col("t"), opts.tz_for(src.path)))["t"].to_list()
    for e, t in zip(events, times):
        e["time"] = t
        e["detail"] = json.dumps({k: v for k, v in e.pop("d").items() if v is not None})
    if any(t is not None for t in times):
        p.clock = "wall-assumed"
    p.events = events_frame(events)
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="Slurm's `sacct` table, printed or `--parsable` (`State` OUT_OF_MEMORY, CANCELLED, TIMEOUT, `ExitCode` "
          "signals, `MaxRSS`)",
    yields="`oom_kill` with the step's MaxRSS, `job_killed`",
)
