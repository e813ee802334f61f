"""Kernel logs (dmesg, kern.log/syslog/messages, journalctl exports, OpenWrt, Talos, Cloud Logging):
the OOM killer's messages -> `oom_invoked`, `oom_kill`, `oom_reaped` events (docs/formats.md §3.2), the task
table -> `host.rss` samples, and NVRM Xid lines (kernel/xid.py). This module is the format's entry:
it claims the file; kernel/reader.py reads it, kernel/oom.py knows the OOM killer's messages.

What an `oom_kill` event carries, and which kernel generations are read, is in kernel/oom.py.
"""
from __future__ import annotations

import polars as pl

from forensics.frames import rows_where
from forensics.io.lines import read_whole
from forensics.model import Parsed
from forensics.options import Options
from forensics.parsers.kernel import oom
from forensics.parsers.kernel import prefix as kp
from forensics.parsers.kernel import sniff_fast
from forensics.parsers.kernel.reader import KernelReader as Reader
from forensics.parsers.contract import Format, Scan

NAME = "kernel-log"
COVERS = ("nvrm-xid",)
SCAN_HINT = oom.OOM_SCAN_HINT
# what every SCAN_HINT line holds, for the one prefilter over all scanners (parsers/scanners.py)
SCAN_PREFILTER = (r"invoked oom-killer:|Kill|oom-kill:constraint=|,global_oom,|,oom_memcg=|oom_reaper: reaped process|"
                  r"killed as a result of limit of")
SCAN_BLOCK_LITERALS = ("oom", "kill")
# each hint line is an event: a scan keeps the first scanners.MAX_EVENT_LINES of them per file
SCAN_EVENT_LINES = True
# Bare (unprefixed) messages that make a file a kernel log for sniffing.
_KERNEL_MSG = SCAN_HINT + r"|^Out of Memory: Killed process|^Tasks state \(memory values in pages\)"


def sniff(head: list[str]) -> str | None:
    if sniff_fast.kernel_impossible(head, _KERNEL_MSG):   # most files are no kernel log: no polars work
        return None
    prof = kp.head_profile(head)
    body = rows_where(prof, ~pl.col("junk") & ~pl.col("blank"))
    if body.height == 0:
        return None
    payload = body.filter(pl.col("family") == "gce-json")
    if payload.height:
        kern = payload.filter(pl.col("uptime").is_not_null() | pl.col("msg").str.contains(_KERNEL_MSG)).height
        if kern >= max(1, 0.5 * payload.height):
            return f"{kern} of {payload.height} textPayload entries are kernel messages (Cloud Logging export)"
    system = body.filter(pl.col("family").is_in(list(kp.SYSTEM_FAMILIES)))
    if system.height >= max(1, 0.5 * body.height):
        top = system["family"].value_counts(sort=True)["family"][0]
        return f"{system.height} of {body.height} head lines are {kp.FAMILY_DESCRIPTION[top]}"
    kern = body.filter(pl.col("msg").str.contains(_KERNEL_MSG) | (pl.col("family") == "trimmed")).height
    if kern >= max(1, 0.5 * body.height):
        return f"{kern} of {body.height} head lines are kernel messages (OOM killer, or trimmed to 'kernel:')"
    return None


def parse(src, opts: Options) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts: Options) -> Parsed:
    dec = kp.decode(lines, opts, src.path, src.mtime, join=False)
    events, _, _ = oom.oom_events(dec.kernel_records())
    if events.height == 0:
        return Parsed()
    return Parsed(events=events, clock=dec.clock, notes=dec.notes)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, event_lines=SCAN_EVENT_LINES),
    covers=COVERS,
    files="kernel logs: raw dmesg, `dmesg -T`, `--time-format iso`, syslog/kern.log, journalctl (short, "
          "short-iso, JSON), RFC 3339, Talos, OpenWrt, Cloud Logging",
    yields="`oom_invoked`, `oom_kill` (victim, RSS breakdown, cgroup scope), `oom_reaped`, task-table RSS",
)
