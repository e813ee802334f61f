"""Files that are mostly NVIDIA driver (NVRM) messages (`dmesg | grep NVRM`), and NVRM Xid lines inside
any other text file. The Xid shapes and their meanings are in kernel/xid.py; such a file is read whole
by the kernel reader (OOM-killer lines in it count too).
"""
from __future__ import annotations

import polars as pl

from forensics.io.lines import read_whole
from forensics.model import Parsed
from forensics.options import Options
from forensics.parsers.kernel import prefix as kp
from forensics.parsers.kernel import xid
from forensics.parsers.kernel.reader import KernelReader as Reader
from forensics.parsers.contract import Format, Scan

NAME = "nvrm-xid"
# the reader reads the whole kernel log (OOM killer too), so the kernel scanner is not needed
COVERS = ("kernel-log",)
SCAN_HINT = xid.XID_SCAN_HINT
# what every SCAN_HINT line holds, for the one prefilter over all scanners (parsers/scanners.py)
SCAN_PREFILTER = r"NVRM: "
SCAN_BLOCK_LITERALS = ("nvrm: ",)
# each hint line is an event: a scan keeps the first scanners.MAX_EVENT_LINES of them per file
SCAN_EVENT_LINES = True


def sniff(head: list[str]) -> str | None:
    # Cheap reject before any polars work: a message starting `NVRM: ` needs the letters NVRM in the
    # line (cleaning only deletes runs of spaces, hence the check without spaces), or a Cloud Logging
    # `textPayload` whose JSON escapes could spell them.
    flat = "\n".join(head).replace(" ", "")
    if "NVRM" not in flat and "textPayload" not in flat:
        return None
    prof = kp.head_profile(head)
    body = prof.filter(~pl.col("junk") & ~pl.col("blank"))
    if body.height == 0:
        return None
    nv = body.filter(pl.col("msg").str.contains(r"^\s*NVRM: ")).height
    if nv >= max(1, 0.5 * body.height):
        return f"{nv} of {body.height} head lines are NVIDIA driver (NVRM) messages"
    return None


def parse(src, opts: Options) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts: Options) -> Parsed:
    dec = kp.decode(lines, opts, src.path, src.mtime, join=False)
    events, _, _ = xid.xid_events(dec.kernel_records())
    return Parsed(events=events, clock=dec.clock if events.height else "none", notes=dec.notes if events.height else [])


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, event_lines=SCAN_EVENT_LINES),
    covers=COVERS,
    files="NVRM Xid lines (every driver generation, MIG `GPU-I`/`GPU-CI`)",
    yields="`xid` events with code, pid, process, PCI id / GPU UUID, MIG instance and the code's meaning",
    # NVRM lines under a syslog prefix are kernel messages: a file mostly of them is read here whole
    before=("kernel-log",),
)
