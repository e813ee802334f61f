"""Format "torch-distributed": what a distributed PyTorch job's launcher and collectives write when a
rank fails (docs/formats.md §11), in a torchrun log or inside any other file.

Events, each with the rank its line names (parsers/ranks.py) in `detail`:

- `collective_error`: c10d's NCCL watchdog (`Watchdog caught collective operation timeout:
  WorkNCCL(SeqNum=5, OpType=ALLREDUCE, ...) ran for 600013 milliseconds before timing out.`, `Timeout
  at NCCL work: ...`, `Exception (either an error or timeout) detected by watchdog at work: ...`,
  `ProcessGroupNCCL's watchdog got stuck for 480 seconds ...`, `Process group watchdog thread terminated
  with exception: ...`, `Some NCCL operations have failed or timed out.`), NCCL's own errors (`NCCL
  error in: ...`, `ncclRemoteError: ...`), `DistBackendError`, and gloo's transport errors (`[.../gloo/
  transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:33415`, `Connection reset by peer`,
  `Timed out waiting 1800000ms for recv operation to complete`). `detail.error` says which (a rank's
  own CUDA error, or a wait for a peer: timeout, peer_closed, ...), with the collective's figures.
- `rank_exit`: torchrun's elastic agent, `failed (exitcode: 1) local_rank: 1 (pid: 1571) of binary:
  ...` (the first failure it saw), and each record of its ChildFailedError summary (`Root Cause (first
  observed failure):` then `time`, `host`, `rank : 1 (local_rank: 1)`, `exitcode : 1 (pid: 1571)`,
  `error_file`, `traceback`), timed by the record's `time` (the agent's local clock, 1 s resolution).
- `rank_signal`: the agent closing the other workers, `Sending process 1570 closing signal SIGTERM`,
  `Closing process 1570 via signal SIGTERM`, `Unable to shutdown process ... forcefully exiting via
  SIGKILL`.
- `rank_info`: a line that says which process or GPU a rank is: NCCL's communicator line under
  NCCL_DEBUG=INFO (`host:pid:tid [dev] NCCL INFO comm 0x... rank 1 nranks 8 cudaDev 1 nvmlDev 1 busId
  1b000 ...`), or a rank's own line that states its pid or CUDA device (`rank 1 local_rank 1 pid 1571
  device cuda:0 CUDA_VISIBLE_DEVICES=(unset)`, vLLM's `(VllmWorker rank=1 pid=254)`).

Clocks: PyTorch's C++ and Python loggers stamp `E1202 15:09:46.158000 1524 file.py:986]` (month, day,
local time; no year: it is taken from --year, else from a dated line of the same file such as the
summary's `time`, else from the file's mtime), python logging stamps carry the date.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import polars as pl

from forensics import clock
from forensics.io.lines import read_whole
from forensics.parsers.hint_reader import PROVENANCE, HintReader
from forensics.model import Parsed, events_frame
from forensics.parsers import ranks
from forensics.parsers.contract import Format, Scan

NAME = "torch-distributed"

_WATCHDOG_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\((?P<work>.*?)\) ran for (?P<ran>[0-9]+) milliseconds")
_WORK_FIELD = re.compile(r"(?P<k>SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))=(?P<v>[^,)\s]+)")
_WORK_AT = re.compile(r"(?:Timeout at NCCL work|detected by watchdog at work): (?P<seq>[0-9]+), last enqueued NCCL "
                      r"work: (?P<enq>-?[0-9]+), last completed NCCL work: (?P<done>-?[0-9]+)")
_STUCK = re.compile(r"ProcessGroupNCCL's watchdog got stuck for (?P<s>[0-9]+) seconds")
_TERMINATED = re.compile(r"Process group watchdog thread terminated with exception: (?P<what>.*)")
# the reason and the blanks after it bounded: a lazy reason before an unbounded \s* was quadratic on a
# run of blanks (issue 45 D-R4)
_NCCL_ERROR = re.compile(r"NCCL error(?: in: (?P<where>\S+?),?)?:? (?P<reason>[^(]{0,2000}?)\s{0,16}"
                         r"(?:\(run with NCCL_DEBUG|, NCCL version|$)")
_NCCL_CODE = re.compile(r"\b(?P<code>nccl(?:UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error)\b")
_GLOO = re.compile(r"gloo/transport/\S*?\] (?P<msg>.*)")
_SIGNAL = re.compile(r"(?:Sending process (?P<p1>[0-9]+) closing signal (?P<s1>SIG[A-Z]+)"
                     r"|Closing process (?P<p2>[0-9]+) via signal (?P<s2>SIG[A-Z]+)"
                     r"|Unable to shutdown process (?P<p3>[0-9]+) via \S+?, forcefully exiting via (?P<s3>SIG[A-Z]+))")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?[0-9]+)\) local_rank: (?P<local>[0-9]+) \(pid: (?P<pid>[0-9]+)\)"
                           r" of (?:binary|fn): (?P<what>\S+)")
# a ChildFailedError record, one field a line (errors/__init__.py's template, two spaces in)
_RECORD = re.compile(r"^\s*(?P<k>time|host|rank|exitcode|error_file|traceback)\s*: (?P<v>.*?)\s*$")
_SECTION = re.compile(r"Root Cause \(first observed failure\):|^\s*Failures:\s*$")
_NCCL_COMM = re.compile(
    r"(?:(?P<host>[\w.-]+):(?P<pid>[0-9]+):(?P<tid>[0-9]+) \[(?P<dev>[0-9]+)\] )?NCCL INFO (?:ncclCommInitRank\w* )?"
    r"comm 0x[0-9a-f]+ rank (?P<rank>[0-9]+) nranks (?P<nranks>[0-9]+) cudaDev (?P<cuda>[0-9]+)"
    r"(?: nvmlDev (?P<nvml>[0-9]+))?(?: busId (?P<bus>[0-9a-f]+))?", re.IGNORECASE)
_PID = re.compile(r"\bpid[ \t]*[=:]?[ \t]*([0-9]{1,10})\b", re.IGNORECASE)
_CUDA_DEV = re.compile(r"\bcuda:([0-9]{1,3})\b")
_VISIBLE = re.compile(r"CUDA_VISIBLE_DEVICES=(?P<v>\S*)")

# Which lines are worth a look (all the shapes above), and the literals one of which each holds.
SCAN_HINT = "|".join([
    r"Watchdog caught collective operation timeout", r"Timeout at NCCL work:", r"detected by watchdog at work:",
    r"watchdog got stuck for", r"watchdog thread terminated with exception", r"Some NCCL operations have failed",
    r"NCCL error", r"nccl(?:UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error", r"DistBackendError",
    r"gloo/transport/\S*\] ", r"closing signal SIG", r"Closing process [0-9]+ via signal", r"Unable to shutdown process",
    r"failed \(exitcode: -?[0-9]+\) local_rank:", r"Root Cause \(first observed failure\):", r"^\s*Failures:\s*$",
    r"^\s*(?:time {6}|host {6}|rank {6}|exitcode {2}|error_file|traceback ): ",
    r"NCCL INFO (?:ncclCommInitRank\w* )?comm 0x[0-9a-f]+ rank [0-9]+ nranks",
    r"(?i:(?:\brank\b|\[rank[0-9]+\]:|local_rank).*(?:\bpid[ \t]*[=:]?[ \t]*[0-9]|\bcuda:[0-9])"
    r"|\bpid[ \t]*[=:]?[ \t]*[0-9].*\brank\b)",
])
SCAN_PREFILTER = ("(?i:rank)|atchdog|NCCL|nccl|DistBackendError|gloo/|closing signal|Closing process|"
                  "Unable to shutdown|Root Cause|Failures:|time      : |host      : |exitcode  : |error_file: |traceback : ")
SCAN_BLOCK_LITERALS = ("rank", "atchdog", "nccl", "distbackenderror", "gloo/", "closing signal", "closing process",
                       "unable to shutdown", "root cause", "failures:", "time      : ", "host      : ",
                       "exitcode  : ", "error_file: ", "traceback : ")
# each hint line is an event: a scan keeps the first scanners.MAX_EVENT_LINES of them per file
SCAN_EVENT_LINES = True

# the first line of a snippet pasted with where it came from (tests/samples)
# what the head of a launcher's or collective's own log shows
_SNIFF = re.compile(r"torch/distributed/(?:run|elastic/)|torch\.distributed\.elastic|ProcessGroupNCCL\.cpp|"
                    r"Watchdog caught collective operation timeout|ChildFailedError|Root Cause \(first observed failure\)|"
                    r"DistBackendError|NCCL error in: |gloo/transport/\S*\] ")


def sniff(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        m = _SNIFF.search(line)
        if m:
            return f"torchrun / c10d line ({m.group(0)}) on line {i}"
    return None


class Reader(HintReader):
    note_reason = "not a log line (provenance, separator, shell prompt)"
    other_reason = "not a line about the distributed job"

    def __init__(self, src, opts):
        super().__init__(src, opts, SCAN_PREFILTER, SCAN_HINT, read)


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts) -> Parsed:
    return read(lines, src, opts)


# -- reading ----------------------------------------------------------------------------------------

# c10's C++ logger writes the month unpadded (`E626` is June 26, `E1206` December 6), torch._logging `%m%d`
_GLOG = re.compile(r"(?:^|[\[\s:])(?P<lvl>[IWEF])(?P<mo>1[0-2]|0?[1-9])(?P<d>[0-3][0-9]) "
                   r"(?P<hms>[0-2][0-9]:[0-5][0-9]:[0-6][0-9])\.(?P<frac>[0-9]{1,9})\b")
_ISO = re.compile(r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[ T_](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?"
                  r"(?P<zone>Z|[+-][0-9]{2}:?[0-9]{2})?")
_STAMP_WITHIN = 120   # a line's own stamp is in its first characters, not in the message


def read(lines: pl.DataFrame, src, opts) -> Parsed:
    """Events from the hinted lines (line, text) of one file."""
    out = Parsed(clock="none")
    rows: list[dict] = []
    record: dict | None = None
    section = None
    for line_no, raw in lines.sort("line").select("line", "text").iter_rows():
        text = raw or ""
        if re.match(PROVENANCE, text):
            continue
        if _SECTION.search(text):
            section = "root" if "Root Cause" in text else "other"
            record = None
            continue
        f = _RECORD.match(text)
        if f and section is not None:
            if record is None or f["k"] in record["fields"] or line_no > record["last"] + 2:
                record = {"fields": {}, "last": line_no, "root": section == "root", "lines": {}}
                rows.append({"_record": record})
            record["fields"][f["k"]] = f["v"]
            record["lines"][f["k"]] = (line_no, text)
            record["last"] = line_no
            continue
        ev = _event(text)
        if ev is not None:
            ev.update(line=line_no, text=text)
            rows.append(ev)
    events = [_record_event(r["_record"]) if "_record" in r else r for r in rows]
    events = [e for e in events if e is not None]
    if not events:
        return out
    _stamp(events, src, opts, out)
    for e in events:
        e["detail"] = json.dumps({k: v for k, v in e.pop("d").items() if v is not None})
    out.events = events_frame(events)
    return out


def _event(text: str) -> dict | None:
    """One line's event (kind, pid, gpu, `d` for detail), or None."""
    who = ranks.of_line(text)
    if m := _AGENT_FAILED.search(text):
        return _exit(int(m["code"]), int(m["local"]), int(m["pid"]), who.get("rank"), None, True,
                     {"binary": m["what"], "how": "torchrun's agent: the first failure it saw"})
    if m := _SIGNAL.search(text):
        pid, sig = next((int(m[f"p{i}"]), m[f"s{i}"]) for i in (1, 2, 3) if m[f"p{i}"])
        return {"kind": "rank_signal", "pid": pid, "d": {"signal": sig, "forced": bool(m["p3"])}}
    if m := _NCCL_COMM.search(text):
        gpu = m["nvml"] if m["nvml"] is not None else _bus_id(m["bus"])
        return {"kind": "rank_info", "pid": int(m["pid"]) if m["pid"] else None, "gpu": gpu,
                "d": {"rank": int(m["rank"]), "nranks": int(m["nranks"]), "cuda_device": int(m["cuda"]),
                      "host": m["host"], "how": "NCCL's communicator line (NCCL_DEBUG=INFO)"}}
    err = _collective(text)
    if err is not None:
        err.update({k: who.get(k) for k in ("rank", "local_rank", "pg", "pg_rank")})
        return {"kind": "collective_error", "d": err}
    return _rank_info(text, who)


def _collective(text: str) -> dict | None:
    """The collective failure a line reports, as detail fields; None if it reports none."""
    if m := _TERMINATED.search(text):
        inner = _collective(m["what"]) or {}
        what = inner.get("error")
        if what is None:
            what = "cuda_error" if "CUDA error" in m["what"] or "HIP error" in m["what"] else "watchdog_exception"
        return {**inner, "backend": "nccl", "error": what, "message": _clip(m["what"]), "watchdog_terminated": True}
    if m := _WATCHDOG_TIMEOUT.search(text):
        work = {f["k"]: f["v"] for f in _WORK_FIELD.finditer(m["work"])}
        return {"backend": "nccl", "error": "timeout", "op": work.get("OpType"), "seq": _int(work.get("SeqNum")),
                "timeout_ms": _int(work.get("Timeout(ms)")), "ran_ms": int(m["ran"]),
                "numel_in": _int(work.get("NumelIn")), "numel_out": _int(work.get("NumelOut"))}
    if m := _WORK_AT.search(text):
        return {"backend": "nccl", "error": "timeout" if "Timeout at" in text else "watchdog_detected",
                "seq": int(m["seq"]), "last_enqueued": int(m["enq"]), "last_completed": int(m["done"])}
    if m := _STUCK.search(text):
        return {"backend": "nccl", "error": "watchdog_stuck", "stuck_seconds": int(m["s"])}
    if "Some NCCL operations have failed or timed out" in text:
        return {"backend": "nccl", "error": "aborted"}
    if m := _GLOO.search(text):
        msg = m["msg"]
        error = ("peer_closed" if "closed by peer" in msg else "peer_reset" if "reset by peer" in msg
                 else "timeout" if "Timed out" in msg else "transport_error")
        return {"backend": "gloo", "error": error, "message": _clip(msg)}
    code = _NCCL_CODE.search(text)
    m = _NCCL_ERROR.search(text)
    if m or code:
        reason = (m["reason"].strip() if m else "") or None
        remote = (code and code["code"] == "ncclRemoteError") or (reason and "remote process" in reason)
        return {"backend": "nccl", "error": "remote" if remote else "nccl_error", "reason": reason,
                "where": m["where"] if m else None, "code": code["code"] if code else None}
    if "DistBackendError" in text:
        return {"backend": None, "error": "backend_error", "message": _clip(text.split("DistBackendError", 1)[1].lstrip(": "))}
    return None


def _rank_info(text: str, who: dict) -> dict | None:
    """A rank's own line that states its pid or CUDA device (docs/formats.md §11.5)."""
    if who.get("rank") is None and who.get("local_rank") is None:
        return None
    pid, dev = _PID.search(text), _CUDA_DEV.search(text)
    if not pid and not dev:
        return None
    gpu = None
    if dev:
        gpu = dev[1]
        vis = _VISIBLE.search(text)
        listed = [x for x in (vis["v"].split(",") if vis and vis["v"] not in ("", "(unset)", "None") else []) if x]
        if listed:
            gpu = listed[int(dev[1])] if int(dev[1]) < len(listed) else None
    return {"kind": "rank_info", "pid": int(pid[1]) if pid else None, "gpu": gpu,
            "d": {"rank": who.get("rank"), "local_rank": who.get("local_rank"), "cuda_device": int(dev[1]) if dev else None,
                  "how": "a line of the rank's own log"}}


def _exit(code: int, local: int | None, pid: int | None, rank: int | None, host: str | None, root: bool,
          extra: dict) -> dict:
    d = {"rank": rank, "local_rank": local, "exitcode": code, "host": host, "root_cause": root, **extra}
    if code < 0:
        d["signal"] = -code
    return {"kind": "rank_exit", "pid": pid, "d": d}


_RANK_FIELD = re.compile(r"^(?P<rank>-?[0-9]+) \(local_rank: (?P<local>-?[0-9]+)\)")
_EXIT_FIELD = re.compile(r"^(?P<code>-?[0-9]+) \(pid: (?P<pid>[0-9]+)\)")


def _record_event(rec: dict) -> dict | None:
    """One ChildFailedError record (its fields as read) -> a rank_exit event on its `rank` line."""
    f = rec["fields"]
    r, x = _RANK_FIELD.match(f.get("rank", "")), _EXIT_FIELD.match(f.get("exitcode", ""))
    if not r or not x:
        return None
    line, text = rec["lines"]["rank"]
    ev = _exit(int(x["code"]), int(r["local"]), int(x["pid"]), int(r["rank"]), f.get("host"), rec["root"],
               {"failure_time": f.get("time"), "message": _clip(f.get("traceback")),
                "error_file": f.get("error_file") if f.get("error_file") not in (None, "<N/A>") else None,
                "how": "torchrun's failure summary" + (" (root cause)" if rec["root"] else "")})
    ev.update(line=line, text=text, stamp=_iso_parts(f.get("time", "")))
    return ev


def _stamp(events: list[dict], src, opts, out: Parsed) -> None:
    """`time` of each event: its record's time, else its line's own stamp. A glog stamp has no year: it
    takes --year, else the latest dated line of the file (the summary's `time`), else the file's mtime."""
    zone = opts.tz_for(src.path)
    for e in events:
        if "stamp" not in e:
            head = e["text"][:_STAMP_WITHIN]
            e["stamp"] = _iso_parts(head) or _glog_parts(head)
    dated = [e["stamp"][0] for e in events if e["stamp"] and e["stamp"][0] is not None]
    year = opts.year if opts.year is not None else (max(dated) if dated else None)
    yearless = [e for e in events if e["stamp"] and e["stamp"][0] is None]
    if yearless:
        guess = clock.syslog_years(pl.Series([e["stamp"][1] for e in yearless]),
                                   pl.Series([e["stamp"][2] for e in yearless]),
                                   mtime=getattr(src, "mtime", None), year=year, zone=zone)
        for e, y in zip(yearless, guess.years.to_list()):
            e["stamp"] = (y,) + e["stamp"][1:]
        if year is None:
            out.meta["year_from"] = guess.how.replace("syslog year", "year of the glog stamps")
            out.notes.extend(guess.notes)
    naive, zones = [], []
    for e in events:
        s = e.pop("stamp")
        try:
            naive.append(datetime(*s[:7]) if s else None)
        except (TypeError, ValueError):   # a damaged date (month 13)
            naive.append(None)
        zones.append(s[7] if s else None)
    if all(t is None for t in naive):
        return
    # file order, as localize's DST rule wants; a stamp with its own offset is read with it
    local = pl.DataFrame({"t": [None if z else t for t, z in zip(naive, zones)]},
                         schema={"t": pl.Datetime("us")}).select(clock.localize(pl.col("t"), zone))["t"].to_list()
    for e, t, z, loc in zip(events, naive, zones, local):
        e["time"] = t.replace(tzinfo=z).astimezone(timezone.utc) if (t is not None and z is not None) else loc
    kinds = {"wall" if z is not None else "wall-assumed" for t, z in zip(naive, zones) if t is not None}
    out.clock = "wall" if kinds == {"wall"} else ("wall-yearless" if yearless and year is None else "wall-assumed")


def _iso_parts(text: str) -> tuple | None:
    m = _ISO.search(text or "")
    if not m:
        return None
    y, mo, d = (int(x) for x in m["date"].split("-"))
    h, mi, s = (int(x) for x in m["hms"].split(":"))
    us = int((m["frac"] or "0")[:6].ljust(6, "0"))
    return (y, mo, d, h, mi, s, us, _zone(m["zone"]))


def _glog_parts(text: str) -> tuple | None:
    m = _GLOG.search(text or "")
    if not m:
        return None
    h, mi, s = (int(x) for x in m["hms"].split(":"))
    return (None, int(m["mo"]), int(m["d"]), h, mi, s, int(m["frac"][:6].ljust(6, "0")), None)


def _zone(z: str | None):
    if not z:
        return None
    if z == "Z":
        return timezone.utc
    z = z.replace(":", "")
    sign = 1 if z[0] == "+" else -1
    return timezone(sign * timedelta(hours=int(z[1:3]), minutes=int(z[3:5])))


def _bus_id(bus: str | None) -> str | None:
    """NCCL's busId (`1b000`: domain, bus, device, function packed in hex) as a PCI bus id."""
    if not bus:
        return None
    v = int(bus, 16)
    return f"{v >> 20:04x}:{(v >> 12) & 0xff:02x}:{(v >> 4) & 0xff:02x}.{v & 0xf:x}"


def _int(v) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _clip(s: str | None, n: int = 300) -> str | None:
    if s is None:
        return None
    s = s.strip()
    return s if len(s) <= n else s[: n - 1] + "…"


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, event_lines=SCAN_EVENT_LINES),
    files="a distributed job's logs: torchrun's agent lines and failure summary (`Root Cause (first observed "
          "failure)`), NCCL watchdog timeouts and ProcessGroupNCCL errors, NCCL errors, `DistBackendError`, "
          "gloo's transport errors, NCCL_DEBUG=INFO communicator lines; also inside any other log",
    yields="`collective_error`, `rank_exit`, `rank_signal`, `rank_info` (which pid and GPU a rank is); each rank "
           "of an interleaved step log (`[default1]:`, `[rank1]:`, `[Rank 1]`, `rank 1`) is a series of its own",
    # a distributed job's traceback ends in its ranks' errors, an OOM among them
    before=("pytorch-oom",),
)
