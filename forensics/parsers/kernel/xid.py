"""NVIDIA driver (NVRM) Xid lines -> `xid` events (docs/formats.md §3.3).

`NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.`
gives code 79, pid null, bus 0000:a1:00, and the GPU's UUID when an `NVRM: GPU at PCI:0000:a1:00:
GPU-...` line maps it. The older shapes (no `PCI:`, no pid/name, the domain-less `(0003:00)` of 2008
drivers), the MIG `GPU-I:` / `GPU-I: GPU-CI:` forms (instances kept in the detail), the R590
`caused by previous Xid N` suffix and the multi-line "fallen off the bus" message printed without any
Xid line (xid_01) are read too.

kernel/nvrm_log.py claims files that are mostly NVRM lines (`dmesg | grep NVRM`) and finds Xids inside
any other text file; a full kernel log's reader calls `xid_events` itself (kernel/oom.py).
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics.model import events_frame
from forensics.xid_catalog import meaning
from forensics.frames import rows_where

# NVRM lines worth reading inside any other text file
XID_SCAN_HINT = r"NVRM: (?:Xid|GPU at PCI:|The NVIDIA GPU|GPU [0-9A-Fa-f]{4}:\S+: GPU has fallen|fallen off the bus)"

_BUS = r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
_UUID = r"GPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
# The attribution in parentheses: `PCI:dddd:bb:dd` (R450+), `dddd:bb:dd` (older drivers), `bbbb:dd`
# (drivers of 2008 and before, no domain: kept as printed); a MIG GPU adds ` GPU-I:nn` and ` GPU-CI:nn`
# (open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/rc/kernel_rc.c, krcReportXid).
XID_RE = (r"NVRM: Xid \((?:PCI:)?(?:(?P<bus>" + _BUS + r")(?:\.[0-9])?|(?P<bus_short>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}))"
          r"(?:\s+GPU-I:\s*(?P<gi>[0-9]{1,9}))?(?:\s+GPU-CI:\s*(?P<ci>[0-9]{1,9}))?\):\s*(?P<code>[0-9]{1,9})\b"
          r"(?:,\s*(?P<rest>.*))?$")
# drivers before about 440 write the pid alone: `13, pid=10635, Graphics SM Warp Exception ...`
_PID_NAME = r"^pid=(?P<pid>'<unknown>'|<unknown>|[0-9]{1,10})(?:,\s*name=(?P<name>[^,]*))?(?:,\s*(?P<text>.*))?$"
GPU_AT_RE = r"NVRM: GPU at PCI:(?P<bus>" + _BUS + r"): (?P<uuid>" + _UUID + r")"
FALLEN_MULTI_RE = r"NVRM: The NVIDIA GPU (?P<bus>" + _BUS + r")(?:\.[0-9])?\b.*fallen off the bus"
FALLEN_SHORT_RE = r"NVRM: GPU (?P<bus>" + _BUS + r")(?:\.[0-9])?: GPU has fallen off the bus"
FALLEN_BARE_RE = r"NVRM: fallen off the bus"
THE_GPU_RE = r"NVRM: The NVIDIA GPU (?P<bus>" + _BUS + r")"
_NEAR_LINES = 10  # a fallen-off message this close to an Xid 79 of the same GPU is the same event


def _uuid_lookup(records: pl.DataFrame) -> list[tuple[int, str, str]]:
    """(line, bus, uuid) from `NVRM: GPU at PCI:...: GPU-...` records."""
    maps = records.filter(pl.col("msg").str.contains("NVRM: GPU at PCI:")).with_columns(
        pl.col("msg").str.extract_groups(GPU_AT_RE).alias("g")).unnest("g").filter(pl.col("uuid").is_not_null())
    return [(ln, b.lower(), u) for ln, b, u in zip(maps["line"], maps["bus"], maps["uuid"])]


def _uuid_for(maps: list[tuple[int, str, str]], bus: str, line: int) -> str | None:
    """The mapping printed last before this line, else the first one after it."""
    before = [u for ln, b, u in maps if b == bus and ln <= line]
    if before:
        return before[-1]
    after = [u for ln, b, u in maps if b == bus and ln > line]
    return after[0] if after else None


def xid_events(records: pl.DataFrame) -> tuple[pl.DataFrame, set[int], list[int]]:
    """Xid events from decoded kernel records (`line`, `text`, `msg`, `time`, `uptime`, `host`).
    Returns the events, the record lines used, and lines that look like an Xid but cannot be read."""
    nv = rows_where(records, pl.col("msg").str.contains("NVRM:"))
    if nv.height == 0:
        return events_frame([]), set(), []
    maps = _uuid_lookup(nv)
    nv = nv.with_columns(pl.col("msg").str.extract_groups(XID_RE).alias("x")).unnest("x")
    rows: list[dict] = []
    used: set[int] = {ln for ln, _, _ in maps}
    unreadable: list[int] = []
    xid79: list[tuple[int, str]] = []
    for r in nv.filter(pl.col("code").is_not_null()).iter_rows(named=True):
        bus = (r["bus"] or r["bus_short"]).lower()
        code = int(r["code"])
        rest = r["rest"] or ""
        pid = name = None
        text = rest
        pn = _match(_PID_NAME, rest)
        if pn:
            pid = int(pn["pid"]) if pn["pid"].isdigit() else None
            name = pn["name"].strip() if pn["name"] and pn["name"].strip() != "<unknown>" else None
            text = pn["text"] or ""
        caused = _match(r"caused by previous Xid (?P<c>[0-9]{1,9})\b", text)
        channel = _match(r"\b(?:Ch|ChId|Channel) (?P<ch>[0-9A-Fa-f]+)\b", text)
        uuid = _uuid_for(maps, bus, r["line"])
        mean, weight = meaning(code)
        detail = {
            "code": code, "meaning": mean, "weight": weight, "pci": bus,
            "gpu_instance": int(r["gi"]) if r["gi"] else None,
            "compute_instance": int(r["ci"]) if r["ci"] else None, "uuid": uuid,
            "channel": channel["ch"] if channel else None,
            "caused_by_xid": int(caused["c"]) if caused else None,
            "message": text.strip(), "host": r["host"],
        }
        rows.append(_event(r, pid, name, uuid or bus, detail))
        used.add(r["line"])
        if code == 79:
            xid79.append((r["line"], bus))
    # lines that say Xid but are not in any shape we know (e.g. synthetic `NVRM: Xid (43, pid: 5678)`)
    for r in rows_where(nv, pl.col("code").is_null() & pl.col("msg").str.contains(r"NVRM: Xid\b")).iter_rows(named=True):
        unreadable.append(r["line"])
    rows.extend(_fallen_off_events(nv, maps, xid79, used))
    return events_frame(rows), used, unreadable


def _fallen_off_events(nv: pl.DataFrame, maps, xid79: list[tuple[int, str]], used: set[int]) -> list[dict]:
    """'fallen off the bus' messages printed without an Xid 79 line near them (xid_01)."""
    out = []
    last_the_gpu: tuple[dict, str] | None = None
    for r in nv.filter(pl.col("code").is_null()).iter_rows(named=True):
        msg = r["msg"]
        the_gpu = _match(THE_GPU_RE, msg)
        m = _match(FALLEN_MULTI_RE, msg) or _match(FALLEN_SHORT_RE, msg)
        bus = m["bus"].lower() if m else None
        if bus is None and re.search(FALLEN_BARE_RE, msg) and last_the_gpu and r["line"] - last_the_gpu[0]["line"] <= 3:
            # scanned lines are not joined: the message starts on the `The NVIDIA GPU <bus>` line
            first, bus = last_the_gpu
            r = dict(first, text=first["text"] + "\n" + r["text"])
        if the_gpu:
            last_the_gpu = (r, the_gpu["bus"].lower())
        if bus is None:
            continue
        if any(b == bus and abs(ln - r["line"]) <= _NEAR_LINES for ln, b in xid79):
            continue
        xid79.append((r["line"], bus))  # one event per incident, not per line of the message
        uuid = _uuid_for(maps, bus, r["line"])
        mean, weight = meaning(None)
        detail = {"code": None, "meaning": mean, "weight": weight, "pci": bus, "gpu_instance": None,
                  "compute_instance": None, "uuid": uuid, "channel": None, "caused_by_xid": None,
                  "message": "NVRM reported the GPU fallen off the bus without an Xid line",
                  "host": r["host"]}
        out.append(_event(r, None, None, uuid or bus, detail))
        used.add(r["line"])
    return out


def _event(r: dict, pid, process, gpu, detail: dict) -> dict:
    return {"time": r["time"], "uptime": r["uptime"], "line": r["line"], "kind": "xid", "pid": pid,
            "process": process, "gpu": gpu, "bytes": None, "detail": json.dumps(detail), "text": r["text"]}


def _match(rx: str, s: str | None) -> dict | None:
    """One regex on one record (these patterns read the same in Python's and polars' dialects)."""
    m = re.search(rx, s) if s else None
    return m.groupdict() if m else None
