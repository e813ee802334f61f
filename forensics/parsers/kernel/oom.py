"""What a kernel log says about memory, in any of its shapes (kernel/prefix.py decodes those):
the OOM killer's messages -> `oom_invoked`, `oom_kill`, `oom_reaped` events (docs/formats.md §3.2), the task
table -> `host.rss` samples, and NVRM Xid lines via xid.py.

An `oom_kill` event carries the victim (pid, comm; a comm may itself contain parentheses), `bytes` =
anon-rss + file-rss + shmem-rss (the kernel's kB are KiB), and in `detail`: scope ("global" | "memcg"),
the memcg path, constraint, total_vm / anon_rss / file_rss / shmem_rss / pgtables (all in bytes), uid,
oom_score_adj, the triggering comm of the preceding `invoked oom-killer` line, the `oom-kill:` summary's
fields and the victim's task-table row. All kernel generations are read: the modern one-liner, the old
`Kill process N (x) score S or sacrifice child` + `Killed process` pair, the 2.4 `Out of Memory: Killed
process N (x).`, the pre-4.19 `Task in /x killed as a result of limit of /y`, and the early-4.19
summary split over two records. When a log ends before the `Killed process` line (a truncated paste),
the summary or the selection line still yields the kill, marked `inferred` in its detail (in words) and
`inferred_from` (`oom_kill_summary` | `kill_process_line`: which line named the victim).

Task-table values are in pages; they are converted with 4096-byte pages (the page size of x86-64 and
of most arm64 distribution kernels; 16K/64K-page kernels read 4x/16x too low), `pgtables_bytes` is
already in bytes.
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics.model import Parsed, events_frame, samples_frame
from forensics.parsers.kernel import prefix as kp
from forensics.parsers.kernel import xid
from forensics.frames import rows_where

# OOM-killer lines worth reading inside any other text file (a job log with pasted dmesg)
# (early 4.19 printed the summary's second half as a record of its own: `,global_oom,task_memcg=...`)
OOM_SCAN_HINT = (r"invoked oom-killer:|Killed process [0-9]+ \(|Kill process [0-9]+ \(|oom-kill:constraint=|"
             r",global_oom,task_memcg=|,oom_memcg=|oom_reaper: reaped process|killed as a result of limit of")

INVOKED_RE = r"^(?P<comm>.+?) invoked oom-killer:(?P<args>.*)$"
CPUSET_RE = r"^(?P<comm>.+?) cpuset=(?P<cpuset>\S*) mems_allowed=(?P<mems>\S+)\s*$"
CPU_RE = r"^CPU: [0-9]+ (?:UID: [0-9]+ )?PID: (?P<pid>[0-9]+) Comm: (?P<comm>.+?) (?:Not tainted|Tainted|Kdump)"
_MSG = r"(?P<msg>Out of [Mm]emory(?: \(oom_kill_allocating_task\))?|Memory cgroup out of memory)"
SELECT_RE = r"^" + _MSG + r": Kill process (?P<pid>[0-9]{1,10}) \((?P<comm>.*)\) score (?P<score>-?[0-9]{1,12}) or sacrifice child"
KILLED_RE = (
    r"^(?:" + _MSG + r": )?Killed process (?P<pid>[0-9]{1,10}) \((?P<comm>.*)\),?\s*(?:total-vm|vsz):(?P<tvm>[0-9]+)kB,"
    r"\s*anon-rss:(?P<anon>[0-9]+)kB,\s*file-rss:(?P<file>[0-9]+)kB(?:,\s*shmem-rss:(?P<shmem>[0-9]+)kB)?"
    r"(?:,?\s*UID:(?P<uid>[0-9]+))?(?:,?\s*pgtables:(?P<pgt>[0-9]+)kB)?(?:,?\s*oom_score_adj:(?P<adj>-?[0-9]+))?"
)
# the 2.4 form, and modern lines cut before their numbers
KILLED_SHORT_RE = r"^(?:" + _MSG + r": )?Killed process (?P<pid>[0-9]{1,10}) \((?P<comm>.*?)\)(?:[.,\s]|$)"
REAPED_RE = (r"^oom_reaper: reaped process (?P<pid>[0-9]{1,10}) \((?P<comm>.*)\),?\s*now anon-rss:(?P<anon>[0-9]+)kB,"
             r"\s*file-rss:(?P<file>[0-9]+)kB,\s*shmem-rss:(?P<shmem>[0-9]+)kB")
REAPED_SHORT_RE = r"^oom_reaper: reaped process (?P<pid>[0-9]+) \((?P<comm>.*?)\)(?:[.,\s]|$)"
SUMMARY_RE = r"^oom-kill:(?P<body>constraint=.*)$"
TASK_IN_RE = r"^Task in (?P<task_memcg>\S+) killed as a result of limit of (?P<oom_memcg>\S+)"
MEMCG_USAGE_RE = r"^memory: usage (?P<usage>[0-9]+)kB, limit (?P<limit>[0-9]+)kB, failcnt (?P<failcnt>[0-9]+)"
MEMCG_STATS_RE = r"^Memory cgroup stats for (?P<path>[^:\s]+):"
TABLE_HEADER_RE = r"^\[\s*pid\s*\]\s+uid\s+tgid\s+total_vm\s+rss\s+(?P<cols>.*?)\s*name\s*$"
TABLE_ROW_RE = r"^\[\s*(?P<pid>[0-9]+)\]\s+(?P<nums>-?[0-9]+(?:\s+-?[0-9]+){5,})\s+(?P<name>\S.*?)\s*$"
# What the prefilter keeps for the per-record pass (everything else in a kernel log is context).
_OOM_HINT = (
    r"invoked oom-killer:|Kill process [0-9]+ \(|Killed process [0-9]+ \(|"
    r"^oom-kill:|^,(?:global_oom|oom_memcg=)|^oom_reaper: reaped|killed as a result of limit of|"
    r"^memory: usage [0-9]+kB|^Memory cgroup stats for|^\[\s*pid\s*\]"
)
# Lines about the trigger that only count right after an `invoked oom-killer` line (CPU: lines are
# printed by every kernel warning).
_TRIGGER_HINT = r"^CPU: [0-9]+ |cpuset=\S* mems_allowed="

PAGE_NOTE = ("task-table rss and total_vm are in pages, converted with 4096-byte pages "
             "(16K/64K-page kernels would read 4x/16x too low)")
_CPU_LOOKAHEAD = 5  # the CPU: line follows the invoked line within a few records


def _m(rx: str, s: str) -> dict | None:
    m = re.search(rx, s)
    return m.groupdict() if m else None


def _kib(v: str | None) -> int | None:
    return int(v) * 1024 if v is not None and len(v) <= 15 else None  # more digits: garbage, not an Int64


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and re.fullmatch(r"-?[0-9]{1,18}", v) else None


def parse_summary(body: str) -> dict:
    """The fields of an `oom-kill:constraint=...` summary."""
    def field(key: str) -> str | None:
        m = re.search(r"(?:^|,)" + key + r"=([^,]*)", body)
        return m.group(1) if m else None
    return {
        "constraint": field("constraint"), "nodemask": field("nodemask"), "cpuset": field("cpuset"),
        "mems_allowed": field("mems_allowed"), "global_oom": bool(re.search(r"(?:^|,)global_oom(?:,|$)", body)),
        "oom_memcg": field("oom_memcg"), "task_memcg": field("task_memcg"), "task": field("task"),
        "pid": _int(field("pid")), "uid": _int(field("uid")),
    }


# -- task table --------------------------------------------------------------------------------

def task_rows(records: pl.DataFrame) -> pl.DataFrame:
    """Task-table rows with their header's columns: pid, uid, tgid, total_vm/rss (pages), the rest by
    name; a row printed without its header (kernlog_oom_13) is read by its number of columns."""
    cand = rows_where(records, pl.col("msg").str.contains(r"^\[\s*(?:pid\s*\]|[0-9]+\]\s+-?[0-9]+\s)"))
    if cand.height == 0:
        return pl.DataFrame()
    headers = cand.filter(pl.col("msg").str.contains(TABLE_HEADER_RE)).select(
        "line", pl.col("msg").str.extract(TABLE_HEADER_RE, 1).str.split(" ").list.eval(
            pl.element().filter(pl.element() != "")).alias("cols"))
    rows = cand.with_columns(pl.col("msg").str.extract_groups(TABLE_ROW_RE).alias("r")).unnest("r").filter(
        pl.col("pid").is_not_null())
    if rows.height == 0:
        return pl.DataFrame()
    rows = rows.with_columns(pl.col("nums").str.split(" ").list.eval(pl.element().filter(pl.element() != "")).alias("nums"))
    if headers.height:
        rows = rows.sort("line").join_asof(headers.sort("line").rename({"line": "header_line"}),
                                           left_on="line", right_on="header_line", strategy="backward")
    else:
        rows = rows.with_columns(pl.lit(None, dtype=pl.Int64).alias("header_line"),
                                 pl.lit(None, dtype=pl.List(pl.String)).alias("cols"))
    return rows


def row_dict(row: dict) -> dict | None:
    """One task-table row as named values (pages converted to bytes)."""
    if len(row["pid"] or "") > 18 or any(len(x) > 18 for x in row["nums"]):
        return None  # a digit run no Int64 holds: garbage, not a task-table row
    nums = [int(x) for x in row["nums"]]
    extra = row["cols"]
    if extra is None or len(extra) + 4 != len(nums):
        # no header (or it does not fit): 7 numbers is the classic layout, 10 the rss_anon/file/shmem one
        if len(nums) == 7:
            pg = nums[4]
            extra = ["pgtables_bytes" if pg and pg % 4096 == 0 else "nr_ptes", "swapents", "oom_score_adj"]
        elif len(nums) == 10:
            extra = ["rss_anon", "rss_file", "rss_shmem", "pgtables_bytes", "swapents", "oom_score_adj"]
        else:
            return None
    out = {"pid": int(row["pid"]), "uid": nums[0], "tgid": nums[1], "total_vm_pages": nums[2],
           "rss_pages": nums[3], "name": row["name"]}
    for col, v in zip(extra, nums[4:]):
        out[col] = v
    out["rss_bytes"] = nums[3] * kp.PAGE_BYTES
    out["total_vm_bytes"] = nums[2] * kp.PAGE_BYTES
    return out


def rss_samples(rows: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """`host.rss` per process from the task tables (one reading per process per OOM report)."""
    if rows.height == 0:
        return samples_frame([])
    return samples_frame(rows.select(
        "time", "uptime", "line", "host",
        pl.col("pid").cast(pl.Int64, strict=False),
        pl.lit("host.rss").alias("series"),
        (pl.col("nums").list.get(3).cast(pl.Int64, strict=False) * kp.PAGE_BYTES).alias("bytes"),
        pl.col("name").alias("label"),
    ).with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64)))


# -- the OOM sequence --------------------------------------------------------------------------

class _Episode:
    """What the kernel printed about one OOM so far, until the kill that ends it."""

    def __init__(self) -> None:
        self.invoked: dict | None = None      # the oom_invoked event (dict) of this episode
        self.task_in: dict | None = None
        self.usage: dict | None = None
        self.stats_path: str | None = None
        self.summary: dict | None = None
        self.selection: dict | None = None
        self.evidence: list[int] = []         # line numbers quoted by the kill event

    def touch(self, line: int) -> None:
        self.evidence.append(line)


def oom_events(records: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, set[int]]:
    """OOM-killer events and task-table samples from decoded records; also the record lines used."""
    rows = task_rows(records)
    samples = rss_samples(rows, records)
    ri = pl.int_range(pl.len())
    last_invoked = pl.when(pl.col("msg").str.contains("invoked oom-killer:")).then(ri).forward_fill()
    hits = rows_where(records, pl.col("msg").str.contains(_OOM_HINT) | (
        pl.col("msg").str.contains(_TRIGGER_HINT) & ((ri - last_invoked) <= _CPU_LOOKAHEAD).fill_null(False)))
    events: list[dict] = []
    used: set[int] = set(rows["line"].to_list()) if rows.height else set()
    if hits.height == 0:
        return events_frame([]), samples, used
    recs = list(hits.iter_rows(named=True))
    # early 4.19 printed the summary as two records: `oom-kill:constraint=...` + `,global_oom,...`
    merged: list[dict] = []
    for r in recs:
        if merged and r["msg"].startswith(",") and merged[-1]["msg"].startswith("oom-kill:"):
            prev = dict(merged[-1])
            prev["msg"] = prev["msg"] + r["msg"]
            prev["text"] = prev["text"] + "\n" + r["text"]
            prev["_extra_lines"] = prev.get("_extra_lines", []) + [r["line"]]
            merged[-1] = prev
            used.add(r["line"])
            continue
        merged.append(r)

    ep = _Episode()
    last_kill_line = 0

    def flush(reason_end: str) -> None:
        """An episode that stated its victim (summary or selection) but whose Killed line is missing."""
        nonlocal ep
        if ep.summary or ep.selection:
            src = ep.summary or ep.selection
            pid = (ep.summary or {}).get("pid") if ep.summary else None
            if pid is None and ep.selection:
                pid = ep.selection["pid"]
            comm = (ep.summary or {}).get("task") if ep.summary else None
            if comm is None and ep.selection:
                comm = ep.selection["comm"]
            events.append(_kill_event(src["_rec"], ep, None, pid, comm, rows, last_kill_line,
                                      inferred=f"from the {'oom-kill summary' if ep.summary else 'Kill process'} "
                                               f"line; the Killed process line is not in the log ({reason_end})",
                                      inferred_from="oom_kill_summary" if ep.summary else "kill_process_line"))
        ep = _Episode()

    for r in merged:
        msg = r["msg"]
        line = r["line"]
        if (m := _m(INVOKED_RE, msg)) and "invoked oom-killer:" in msg:
            flush("a new OOM report starts")
            args = m["args"]
            ev = _event(r, "oom_invoked", None, m["comm"], None, {
                "gfp_mask": _field(args, r"gfp_mask=([^,\s]+)"),
                "order": _int(_field(args, r"order=(-?[0-9]+)")),
                "oom_score_adj": _int(_field(args, r"oom_score_adj=(-?[0-9]+)")),
                "nodemask": _field(args, r"nodemask=([^,\s]*)"),
                "host": r["host"],
            })
            events.append(ev)
            ep.invoked = ev
            ep.touch(line)
            used.add(line)
        elif m := _m(CPU_RE, msg):
            # the triggering task's pid is on the CPU: line right after the invoked line
            if ep.invoked is not None and ep.invoked["pid"] is None \
                    and m["comm"].strip() == (ep.invoked["process"] or "").strip():
                ep.invoked["pid"] = int(m["pid"])
                used.add(line)
        elif (m := _m(CPUSET_RE, msg)) and ep.invoked is not None:
            _merge_detail(ep.invoked, {"cpuset": m["cpuset"], "mems_allowed": m["mems"]})
            used.add(line)
        elif m := _m(TASK_IN_RE, msg):
            ep.task_in = m
            ep.touch(line)
            used.add(line)
        elif m := _m(MEMCG_USAGE_RE, msg):
            ep.usage = m
            ep.touch(line)
            used.add(line)
        elif m := _m(MEMCG_STATS_RE, msg):
            if ep.stats_path is None:  # the OOMing memcg is printed first, then its children
                ep.stats_path = m["path"]
            used.add(line)
        elif m := _m(SUMMARY_RE, msg):
            if ep.summary is not None:
                flush("another summary follows")
            ep.summary = parse_summary(m["body"])
            ep.summary["_rec"] = r
            ep.touch(line)
            used.update([line, *r.get("_extra_lines", [])])
        elif m := _m(SELECT_RE, msg):
            if ep.selection is not None:
                flush("another Kill process line follows")
            ep.selection = {"pid": int(m["pid"]), "comm": m["comm"], "score": int(m["score"]),
                            "msg": m["msg"], "_rec": r}
            ep.touch(line)
            used.add(line)
        elif m := (_m(KILLED_RE, msg) or _m(KILLED_SHORT_RE, msg)):
            pid = int(m["pid"])
            if ep.summary is not None and ep.summary.get("pid") not in (None, pid):
                # a summary about another task: that kill's own line is missing
                keep_sel = ep.selection
                ep.selection = None
                flush("the next Killed process line is about another pid")
                ep.selection = keep_sel
            events.append(_kill_event(r, ep, m, pid, m["comm"], rows, last_kill_line))
            last_kill_line = line
            used.add(line)
            ep = _Episode()
        elif m := (_m(REAPED_RE, msg) or _m(REAPED_SHORT_RE, msg)):
            parts = [_kib(m.get("anon")), _kib(m.get("file")), _kib(m.get("shmem"))]
            known = [p for p in parts if p is not None]
            events.append(_event(r, "oom_reaped", int(m["pid"]), m["comm"], sum(known) if known else None, {
                "anon_rss": parts[0], "file_rss": parts[1], "shmem_rss": parts[2], "host": r["host"]}))
            used.add(line)
    flush("the log ends")
    return events_frame(events), samples, used


def _field(s: str, rx: str) -> str | None:
    m = re.search(rx, s)
    return m.group(1) if m else None


def _merge_detail(ev: dict, extra: dict) -> None:
    d = json.loads(ev["detail"])
    d.update(extra)
    ev["detail"] = json.dumps(d)


def _event(r: dict, kind: str, pid, process, nbytes, detail: dict) -> dict:
    return {"time": r["time"], "uptime": r["uptime"], "line": r["line"], "kind": kind, "pid": pid,
            "process": process, "gpu": None, "bytes": nbytes, "detail": json.dumps(detail), "text": r["text"]}


def _victim_row(rows: pl.DataFrame, pid: int | None, before_line: int, after_line: int) -> dict | None:
    """The victim's row from the task table printed for this kill (by pid, else by tgid)."""
    if pid is None or rows.height == 0:
        return None
    window = rows.filter((pl.col("line") < before_line) & (pl.col("line") > after_line))
    for key in ("pid", "tgid"):
        if key == "pid":
            hit = window.filter(pl.col("pid").cast(pl.Int64, strict=False) == pid)
        else:
            hit = window.filter(pl.col("nums").list.get(1).cast(pl.Int64, strict=False) == pid)
        if hit.height:
            row = row_dict(hit.row(-1, named=True))
            return row | {"line": int(hit["line"][-1])} if row is not None else None
    return None


def _kill_event(r: dict, ep: _Episode, m: dict | None, pid: int | None, comm: str | None,
                rows: pl.DataFrame, last_kill_line: int, inferred: str | None = None,
                inferred_from: str | None = None) -> dict:
    summ = ep.summary or {}
    sel = ep.selection or {}
    message = (m or {}).get("msg") or sel.get("msg")
    memcg = summ.get("oom_memcg") or (ep.task_in or {}).get("oom_memcg") or ep.stats_path
    if summ.get("constraint") == "CONSTRAINT_MEMCG" or summ.get("oom_memcg") or ep.task_in \
            or (message or "").startswith("Memory cgroup"):
        scope = "memcg"
    elif summ or message:
        scope = "global"
    else:
        scope = None  # a bare `Killed process` line does not say
    if scope != "memcg":
        memcg = None
    anon, file_, shmem = (_kib((m or {}).get(k)) for k in ("anon", "file", "shmem"))
    row = _victim_row(rows, pid, r["line"] + 1, last_kill_line)
    parts = [p for p in (anon, file_, shmem) if p is not None]
    nbytes = sum(parts) if parts else (row["rss_bytes"] if row else None)
    uid = _int((m or {}).get("uid"))
    if uid is None:
        uid = summ.get("uid") if summ.get("uid") is not None else (row or {}).get("uid")
    adj = _int((m or {}).get("adj"))
    if adj is None and row:
        adj = row.get("oom_score_adj")
    usage = ep.usage or {}
    inv = ep.invoked
    detail = {
        "scope": scope, "memcg": memcg, "task_memcg": summ.get("task_memcg") or (ep.task_in or {}).get("task_memcg"),
        "constraint": summ.get("constraint"), "message": message,
        "total_vm": _kib((m or {}).get("tvm")), "anon_rss": anon, "file_rss": file_, "shmem_rss": shmem,
        "pgtables": _kib((m or {}).get("pgt")), "uid": uid, "oom_score_adj": adj,
        "trigger": inv["process"] if inv else None, "trigger_pid": inv["pid"] if inv else None,
        "gfp_mask": json.loads(inv["detail"]).get("gfp_mask") if inv else None,
        "selected_pid": sel.get("pid"), "score": sel.get("score"),
        "nodemask": summ.get("nodemask"), "cpuset": summ.get("cpuset"), "mems_allowed": summ.get("mems_allowed"),
        "memcg_usage": _kib(usage.get("usage")), "memcg_limit": _kib(usage.get("limit")),
        "memcg_failcnt": _int(usage.get("failcnt")),
        "task": row, "host": r["host"],
        "evidence_lines": sorted(set(ep.evidence + ([row["line"]] if row else []) + [r["line"]])),
    }
    if inferred:
        detail["inferred"] = inferred
        detail["inferred_from"] = inferred_from
    return _event(r, "oom_kill", pid, comm, nbytes, detail)

def parse_decoded(dec: kp.Decoded) -> Parsed:
    """Everything a kernel log says: OOM events, task-table samples, Xids."""
    recs = dec.kernel_records()
    oom, samples, used = oom_events(recs)
    xids, xid_used, unreadable = xid.xid_events(recs)
    used |= xid_used
    skipped = dec.skipped
    skipped.add_lines("Xid line in an unknown shape", unreadable)
    skipped.add_lines("no log prefix", dec.unused_unstamped(used))
    events = pl.concat([oom, xids]).sort("line") if xids.height else oom
    notes = list(dec.notes)
    if samples.height:
        notes.append(PAGE_NOTE)
    meta = dict(dec.meta)
    meta["oom_kills"] = int((events["kind"] == "oom_kill").sum())
    meta["xids"] = int((events["kind"] == "xid").sum())
    return Parsed(samples=samples, events=events, skipped=skipped, clock=dec.clock, notes=notes, meta=meta)
