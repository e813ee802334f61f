"""PyTorch CUDA (and ROCm's HIP) out-of-memory messages of every era (docs/formats.md §4.1), wherever they appear.

The OOM usually sits at the end of a long training log that another parser claims, so the important
entry point is `scan` (run over the lines that match SCAN_HINT in any file); `sniff`/`parse` handle a
file that is just a traceback ending in an OOM.

Each message becomes one `gpu_oom` event: bytes = the requested allocation, detail = every figure the
message states (total, free, allocated and reserved by PyTorch, private pools, the per-process cap,
this process's and other processes' usage), the exception class, a guess of the PyTorch era, the last
Python frames of the traceback above it and the user-code site they point to. A message that a
terminal or a person wrapped over several lines is joined back before it is read. Sizes are PyTorch's
`format_size` output: 1024-based `bytes`/`KiB`/`MiB`/`GiB`.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import polars as pl

from forensics import units
from forensics.options import Options
from forensics.model import Parsed, events_frame
from forensics.io.sources import Source
from forensics.parsers import hint_reader, ranks
from forensics.parsers.contract import Format, Scan

NAME = "pytorch-oom"

SCAN_HINT = r"CUDA out of memory|HIP out of memory|OutOfMemoryError|CUDA error: out of memory|Allocation on device [0-9]+ would exceed"
# what every SCAN_HINT line holds, for the one prefilter over all scanners (parsers/scanners.py)
SCAN_PREFILTER = r"CUDA out of memory|HIP out of memory|OutOfMemoryError|CUDA error: out of memory|Allocation on device "
SCAN_BLOCK_LITERALS = ("cuda", "hip out of memory", "outofmemoryerror", "allocat")
# each hint line is an event: a scan keeps the first scanners.MAX_EVENT_LINES of them per file
SCAN_EVENT_LINES = True

# Where a message starts. "Allocation on device" alone is the cudaMallocAsync backend's message; it is
# only taken after the exception class or as the documented "would exceed" sentence.
_START = re.compile(
    r"(?P<cls>(?:torch\.cuda\.|torch\.)?OutOfMemoryError|(?:torch\.)?AcceleratorError|RuntimeError)?\s*:?\s*"
    r"(?P<body>(?:CUDA|HIP) out of memory\b|CUDA error: out of memory\b|Allocation on device\b)"
)
_BODY = re.compile(r"(?:CUDA|HIP) out of memory\b|CUDA error: out of memory\b|Allocation on device\b")
_CLASSES = ("torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError", "OutOfMemoryError", "torch.AcceleratorError",
            "AcceleratorError", "RuntimeError")   # _START's `cls`, longest first
# a sample's provenance (`# source: …`, `# https://…`), or a file banner naming its source: a comment, no error
PROVENANCE = re.compile(r"^\s*(?:#\s*(?:source:|https?://)|-{4}\s.*source:.*-{4}\s*$)")


def _start(line: str) -> re.Match | None:
    r"""`_START.search(line)` in linear time: searched as it is, its `\s*:?\s*` tries every split of
    every run of blanks at every position (2000 blanks: 37 s). Its leftmost match has the first body
    in the line (nothing before a body can be part of one) and starts where the longest tail of the
    text before that body that reads `cls? blanks :? blanks` starts; matched there, it is found at once."""
    body = _BODY.search(line)
    if body is None:
        return None
    head = line[: body.start()].rstrip()
    if head.endswith(":"):
        head = head[:-1].rstrip()
    start = len(head) - next((len(c) for c in _CLASSES if head.endswith(c)), 0)
    return _START.match(line, start)

# the lookbehind makes a search start only at the first digit of a run: linear, not quadratic, on a
# line of a million digits (and never reads the tail of a longer number)
_NUM = r"(?<![0-9,.])([0-9][0-9,]*(?:\.[0-9]+)?)\s*(bytes|[KMGTP]iB|[KMGTP]B|B)\b"
_FIELDS: dict[str, list[re.Pattern]] = {
    "requested": [re.compile(r"Tried to allocate\s+" + _NUM), re.compile(r"Requested\s*:\s*" + _NUM)],
    "total": [re.compile(_NUM + r"\s+total capacity"), re.compile(r"total capac(?:i)?ty of\s+" + _NUM),
              re.compile(r"Device limit\s*:\s*" + _NUM)],
    "free": [re.compile(r"of which\s+" + _NUM + r"\s+is free"), re.compile(_NUM + r"\s+free\s*[;)]"),
             re.compile(r"Free \(according to CUDA\)\s*:\s*" + _NUM)],
    "allocated": [re.compile(_NUM + r"\s+already allocated"),
                  re.compile(r"Of the allocated memory\s+" + _NUM + r"\s+is allocated by PyTorch"),
                  re.compile(r"Currently allocated\s*:\s*" + _NUM)],
    "reserved": [re.compile(_NUM + r"\s+reserved in total by PyTorch"), re.compile(_NUM + r"\s+cached\s*\)")],
    "reserved_unallocated": [re.compile(_NUM + r"\s+is reserved by PyTorch but unallocated")],
    "private_pools": [re.compile(r"with\s+" + _NUM + r"\s+allocated in private pools")],
    "allowed": [re.compile(_NUM + r"\s+allowed\s*;"),
                re.compile(r"PyTorch limit \(set by user-supplied memory fraction\)\s*:\s*" + _NUM)],
    "this_process_in_use": [re.compile(r"this process has\s+" + _NUM + r"\s+memory in use")],
}
_GPU = [re.compile(r"\(GPU ([0-9]+)\s*;"), re.compile(r"\bGPU ([0-9]+) has a total capac"),
        re.compile(r"Allocation on device ([0-9]+)")]
_OTHER_PROCESS = re.compile(r"Process ([0-9]{1,10}) has\s+" + _NUM + r"\s+memory in use")
# NVML's "not available" value (2^64-1 bytes) printed as 17179869184.00 GiB on Windows/WSL, and
# cudaMallocAsync's "no limit": no real GPU has 2^60 bytes.
_SENTINEL = 1 << 60

# Complete messages: the last clause of each era, or a truncation mark.
_COMPLETE = re.compile(
    r"(?:PYTORCH_CUDA_ALLOC_CONF\.?|\(https?://[^)\s]*\)|\.\.\.|(?:cached|by PyTorch)\)"
    r"|Allocation on device|CUDA error: out of memory|memory fraction\)\s*:\s*[0-9.,]+\s*\w+)\s*$"
)
# _COMPLETE.search(msg) in linear time (searched as it is, its number-and-unit and URL parts are
# quadratic: 20 000 digits after "memory fraction):" take 10 s). A match must end the text (bar blanks).
_ENDINGS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF.", "...", "cached)", "by PyTorch)",
            "Allocation on device", "CUDA error: out of memory")
_URL_START = re.compile(r"\(https?://")
# `\s*:\s*[\d.,]+\s*\w+` with one way to match: a digit is both a [\d.,] and a \w
_FRACTION_TAIL = re.compile(r"\s*:\s*[0-9.,]++(?:\s++\w++|[^\W0-9]\w*+|(?<=[0-9.,][0-9]))")


def _complete(msg: str) -> bool:
    text = msg.rstrip()
    if text.endswith(_ENDINGS):
        return True
    if text.endswith(")"):
        # `\(https?://[^)\s]*\)`: a URL start after the last `)` or blank before the closing one
        start = len(text) - 1
        while start > 0 and text[start - 1] != ")" and not text[start - 1].isspace():
            start -= 1
        if _URL_START.search(text, start, len(text) - 1):
            return True
    # nothing after it may hold a `)`: only the last "memory fraction)" can end the message
    at = text.rfind("memory fraction)")
    return at >= 0 and _FRACTION_TAIL.fullmatch(text, at + len("memory fraction)")) is not None


_NEW_RECORD = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|File \"|During handling|The above exception|\[?[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"|[\w.]+(?:Error|Exception|Warning)\s*:|\||={3,}|-{4}|\$ |>>> )"
)
_VOCAB = re.compile(
    r"GiB|MiB|KiB|bytes|\bGPU\b|PyTorch|allocat|capac|memory|free|reserved|PYTORCH_CUDA_ALLOC_CONF|https?://"
    r"|documentation|fragmentation|expandable|private pools|cached|Process [0-9]+|limit|Requested|Management|cuda\.html",
    re.IGNORECASE,
)

# Prefixes that say who printed the line and when.
_WORKER = re.compile(r"\(?(?P<proc>[A-Za-z_][\w.-]*(?: rank=(?P<rank>[0-9]{1,9}))?)\s+pid=(?P<pid>[0-9]{1,10})(?:,\s*ip=[^)]*)?\)")
_PID = re.compile(r"\bpid[=: ]\s*(?P<pid>[0-9]{1,10})\b", re.IGNORECASE)
COMPOSE = re.compile(r"^(?P<svc>[A-Za-z0-9][\w.-]*)\s+\|\s")
_SYSLOG_TAG = re.compile(r"\s(?P<proc>[\w.-]+)\[(?P<pid>[0-9]{1,10})\]:\s")  # journal/syslog "python3[1234]: "
# ISO-like logging stamps, and the HF example scripts' "%m/%d/%Y %H:%M:%S" (month first).
_TIME = re.compile(
    r"(?:(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})|(?P<us>[0-9]{2}/[0-9]{2}/[0-9]{4}))[ T](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?"
    r"\s*(?P<zone>Z|[+-][0-9]{2}:?[0-9]{2})?"
)
_LINE_PREFIX = re.compile(
    r"^(?:[A-Za-z0-9][\w.-]*\s+\|\s|\(?[A-Za-z_][\w.-]*(?: rank=[0-9]+)?\s+pid=[0-9]+(?:,\s*ip=[^)]*)?\)\s?"
    r"|(?:\[(?:rank|default|trainer|worker)[0-9]+\]:\s?)+)"   # torchrun's and PyTorch's, stacked (parsers/ranks.py)
)

_WORKER_PID = re.compile(r"(?<=\s)pid=")
_RANK_END = re.compile(r" rank=[0-9]{1,9}\Z")
_PROC_START = re.compile(r"[A-Za-z_]")


def worker_tag(text: str) -> re.Match | None:
    r"""`_WORKER.search(text)` in linear time (searched as it is, every start inside a long word reads
    the rest of the word again). A match ends its tag with `\s+pid=`: each such "pid=" is a candidate,
    in order. Its tag starts in the word ([\w.-]) right before the blanks, or before a " rank=N" there,
    at the word's first [A-Za-z_] (one "(" before it when that is where the word starts): the first
    candidate that matches from there is the leftmost match."""
    last_paren = text.rfind(")")
    for cand in _WORKER_PID.finditer(text):
        if cand.start() > last_paren:
            return None   # the tag ends with ")"
        blanks = cand.start()
        while blanks > 0 and text[blanks - 1].isspace():
            blanks -= 1
        ends = [blanks]
        rank = _RANK_END.search(text, max(0, blanks - 15), blanks)
        if rank:
            ends.insert(0, rank.start())
        for end in ends:
            start = end
            while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
                start -= 1
            first = _PROC_START.search(text, start, end)
            if first is None:
                continue
            at = first.start() - (1 if first.start() == start and start > 0 and text[start - 1] == "(" else 0)
            m = _WORKER.match(text, at)
            if m:
                return m
    return None


TB_START = re.compile(r"^\s*Traceback \(most recent call last\):")
_TB_FRAME = re.compile(r"^\s*File \"(?P<file>[^\"]+)\", line (?P<line>[0-9]{1,9}), in (?P<func>.+?)\s*$")
_LIBRARY_PATH = re.compile(r"site-packages|dist-packages|[\\/]lib[\\/]python[0-9]|[\\/]torch[\\/]|<frozen |^<")
TRACEBACK_LOOKBACK = 400
MAX_FRAMES = 6
MAX_CONTINUATION = 8


def sniff(head: list[str]) -> str | None:
    """Claim a file that is (mostly) a traceback ending in a CUDA OOM; an OOM at the end of a longer
    log is left to the log's own parser and found by `scan`."""
    for i, line in enumerate(head):
        if PROVENANCE.match(line) or not re.search(SCAN_HINT, line):
            continue
        m = _start(line)
        if not m or not _is_message(m, line):
            continue
        whole_file = len(head) < 200
        after_traceback = any(TB_START.match(x) for x in head[max(0, i - 60):i])
        if whole_file or after_traceback:
            return f"{'HIP' if m['body'].startswith('HIP') else 'CUDA'} out-of-memory message at line {i + 1}"
    return None


def _is_message(m: re.Match, line: str) -> bool:
    """The error itself, not prose that mentions it ("retrying after CUDA out of memory")."""
    if m["cls"]:
        return True
    rest = line[m.start("body"):]
    if m["body"] in ("CUDA out of memory", "HIP out of memory"):
        return bool(re.match(r"(?:CUDA|HIP) out of memory\.\s*(?:Tri|T?$)", rest))  # "Tri|$": hard-wrapped there
    if m["body"] == "Allocation on device":
        return "would exceed" in rest
    return line[: m.start("body")].strip() in ("", "RuntimeError:")


def parse(src: Source, opts: Options) -> Parsed:
    return hint_reader.parse_used(src, opts, SCAN_HINT, _read, "not part of an out-of-memory message")


def scan(lines: pl.DataFrame, src: Source, opts: Options) -> Parsed:
    return hint_reader.scan_used(lines, src, opts, _read)


# -- reading -----------------------------------------------------------------------------------

def _size(num: str, unit: str) -> int | None:
    return units.parse_size(f"{num} {unit}")


def _fields(msg: str) -> tuple[dict, list[str]]:
    values: dict = {}
    sentinels = []
    for name, patterns in _FIELDS.items():
        for rx in patterns:
            m = rx.search(msg)
            if m:
                n = _size(m.group(1), m.group(2))
                if n is not None and n >= _SENTINEL:
                    sentinels.append(name)
                    n = None
                values[name] = n
                break
    others = []
    for m in _OTHER_PROCESS.finditer(msg):
        n = _size(m.group(2), m.group(3))
        if n is not None and n >= _SENTINEL:
            sentinels.append(f"process {m.group(1)}")
            n = None
        others.append({"pid": int(m.group(1)), "bytes": n})
    values["other_processes"] = others
    return values, sentinels


def _era(msg: str, cls: str | None) -> str:
    """Which PyTorch release printed this (docs/formats.md §4.1 table); a guess from the wording."""
    if "Allocation on device" in msg:
        return "cudaMallocAsync backend"
    if "CUDA error: out of memory" in msg:
        return "CUDA runtime error outside the caching allocator"
    if re.search(r"cached\s*\)", msg):
        return "~1.0-1.3"
    if "reserved in total by PyTorch" in msg or "already allocated" in msg:
        if "If reserved memory is >>" in msg:
            return "1.13-2.0" if cls and "OutOfMemoryError" in cls else "1.10-2.0"
        if cls and "OutOfMemoryError" in cls:
            return "1.13-2.0"
        return "~1.4-1.12"
    if "capacty" in msg:
        return "2.1"
    if "total capacity of" in msg:
        if "private pools" in msg or "docs.pytorch.org" in msg:
            return "2.8+"
        if "expandable_segments" in msg or "pytorch.org/docs" in msg:
            return "2.4-2.7" if cls == "torch.OutOfMemoryError" else "2.2-2.7"
        return "2.4+" if cls == "torch.OutOfMemoryError" else "2.2+"
    return "unknown"


def _join(first: str, first_raw: str, following: list[str]) -> tuple[str, int]:
    """The message (`first`, from its start in the raw line `first_raw`) with its continuation lines;
    returns (message, number of lines joined)."""
    msg = first.rstrip()
    used = 0
    prev = first_raw
    for nxt_raw in following[:MAX_CONTINUATION]:
        if _complete(msg):
            break
        nxt = _LINE_PREFIX.sub("", nxt_raw, count=1)
        if not nxt.strip() or _NEW_RECORD.match(nxt) or _start(nxt):
            break
        hard_wrap = len(prev.rstrip("\n")) >= 70 and prev[-1:].isalnum() and nxt[:1].isalnum()
        if not (_VOCAB.search(nxt) or hard_wrap):
            break
        # a terminal keeps the spaces where it wraps; a person who wraps drops them
        sep = "" if (hard_wrap or prev[-1:].isspace() or nxt[:1].isspace()) else " "
        msg = msg + sep + nxt.rstrip()
        prev = nxt_raw
        used += 1
    return re.sub(r"\s+", " ", msg).strip(), used


def traceback_frames(above: list[str]) -> list[dict]:
    """Python frames of the traceback that ends right above the OOM line (innermost last)."""
    frames: list[dict] = []
    code_after: str | None = None
    for raw in reversed(above):
        line = _LINE_PREFIX.sub("", raw, count=1)
        if TB_START.match(line):
            break
        m = _TB_FRAME.match(line)
        if m:
            frames.append({"file": m["file"], "line": int(m["line"]), "func": m["func"],
                           "code": code_after})
            code_after = None
            continue
        if not line.strip():
            if frames:
                break
            continue
        if not line[:1].isspace() and not line.startswith("[Previous line repeated"):
            break  # left the traceback (an unindented line that is no frame)
        stripped = line.strip()
        if stripped and not re.fullmatch(r"[\^~ ]+", stripped) and not stripped.startswith("..."):
            code_after = stripped
    frames.reverse()
    return frames[-MAX_FRAMES:]


def user_site(frames: list[dict]) -> str | None:
    for fr in reversed(frames):
        if not _LIBRARY_PATH.search(fr["file"]):
            return f"{fr['file']}:{fr['line']} in {fr['func']}"
    if frames:
        fr = frames[-1]
        return f"{fr['file']}:{fr['line']} in {fr['func']}"
    return None


def line_time(text: str, zone: str, at_start: bool = False) -> tuple[datetime | None, str | None]:
    m = _TIME.search(text)
    if not m or (at_start and m.start() > 3):
        return None, None
    frac = (m["frac"] or "0")[:6].ljust(6, "0")
    date = m["date"] or "{2}-{0}-{1}".format(*m["us"].split("/"))
    try:
        naive = datetime.strptime(f"{date} {m['time']}.{frac}", "%Y-%m-%d %H:%M:%S.%f")
    except ValueError:
        return None, None
    if m["zone"]:
        z = m["zone"]
        if z == "Z":
            return naive.replace(tzinfo=timezone.utc), "wall"
        z = z if ":" in z else z[:3] + ":" + z[3:]
        try:
            aware = datetime.fromisoformat(naive.isoformat() + z)
        except ValueError:
            return None, None
        return aware.astimezone(timezone.utc), "wall"
    try:
        local = naive.replace(tzinfo=ZoneInfo(zone), fold=0)
    except Exception:
        return None, None
    return local.astimezone(timezone.utc), "wall-assumed"


def _read(hits: pl.DataFrame, src: Source, opts: Options) -> Parsed:
    out = Parsed(clock="none")
    near = hint_reader.near(src, hits["line"], TRACEBACK_LOOKBACK, MAX_CONTINUATION)
    zone = opts.tz_for(src.path)
    events = []
    used_lines: list[int] = []
    clocks = set()
    consumed_until = 0
    for line_no, raw in hits.select("line", "text").iter_rows():
        if line_no <= consumed_until or PROVENANCE.match(raw):
            continue
        m = _start(raw)
        if not m:
            out.skipped.add("mentions OutOfMemoryError without a CUDA OOM message", line_no)
            continue
        body = m["body"]
        if not _is_message(m, raw):
            out.skipped.add("mentions a CUDA OOM without being the error message", line_no)
            continue
        prefix = raw[: m.start()]
        cls = m["cls"]
        following = hint_reader.between(near, line_no + 1, line_no + 1 + MAX_CONTINUATION)
        msg, joined = _join(raw[m.start("body"):], raw, following)
        consumed_until = line_no + joined
        used_lines.extend(range(line_no, line_no + joined + 1))
        values, sentinels = _fields(msg)
        gpu = None
        for rx in _GPU:
            g = rx.search(msg)
            if g:
                gpu = g.group(1)
                break
        reserved, allocated, unalloc = values.get("reserved"), values.get("allocated"), values.get("reserved_unallocated")
        if reserved is None and allocated is not None and unalloc is not None:
            values["reserved"] = allocated + unalloc  # "allocated by PyTorch" already includes private pools
        elif unalloc is None and reserved is not None and allocated is not None and reserved >= allocated:
            values["reserved_unallocated"] = reserved - allocated

        detail: dict = {k: values.get(k) for k in (
            "requested", "total", "free", "allocated", "reserved", "reserved_unallocated", "private_pools",
            "allowed", "this_process_in_use")}
        detail["other_processes"] = values["other_processes"]
        detail["exception"] = cls
        detail["torch_era"] = _era(msg, cls)
        detail["framework"] = "pytorch"
        # a ROCm build of PyTorch says HIP where a CUDA build says CUDA
        detail["device_api"] = "hip" if body.startswith("HIP") else "cuda"
        detail["message"] = msg
        if joined:
            detail["lines"] = [line_no, line_no + joined]
        if sentinels:
            # printed as 17179869184.00 GiB (2^64 bytes): NVML's "not available", or cudaMallocAsync's "no limit"
            detail["sentinel_fields"] = sentinels
        if body == "Allocation on device" and values.get("requested") is None:
            detail["note"] = "cudaMallocAsync backend: the message states no sizes"

        process = pid = None
        w = worker_tag(prefix)
        if w:
            process, pid = w["proc"], int(w["pid"])
            if w["rank"]:
                detail["rank"] = int(w["rank"])
        elif t := _SYSLOG_TAG.search(prefix):
            process, pid = t["proc"], int(t["pid"])
        elif p := _PID.search(prefix):
            pid = int(p["pid"])
        # the global rank of a `[rankN]:` prefix, the node's rank of torchrun's `[defaultN]:`
        for key, value in ranks.of_line(prefix).items():
            if key in ("rank", "local_rank"):
                detail.setdefault(key, value)
        if process is None and (c := COMPOSE.match(prefix)):
            process = c["svc"]

        lo = max(0, line_no - 1 - TRACEBACK_LOOKBACK)
        above = hint_reader.between(near, lo + 1, line_no)
        tb = traceback_frames(above)
        if tb:
            detail["traceback"] = tb
            detail["site"] = user_site(tb)

        when, clock = line_time(prefix, zone)
        if when is None and tb:
            # a logger's record that holds the traceback: its stamp is on the line before "Traceback"
            start = len(above) - 1
            while start >= 0 and not TB_START.match(_LINE_PREFIX.sub("", above[start], count=1)):
                start -= 1
            if start >= 1:
                when, clock = line_time(above[start - 1], zone, at_start=True)
                if when is not None:
                    detail["time_from_line"] = lo + start  # 1-based number of above[start - 1]
        if clock:
            clocks.add(clock)
        events.append({
            "time": when, "line": line_no, "kind": "gpu_oom", "gpu": gpu, "pid": pid, "process": process,
            "bytes": values.get("requested"), "text": raw, "detail": json.dumps(detail),
        })
    out.events = events_frame(events)
    out.clock = "wall" if clocks == {"wall"} else ("wall-assumed" if clocks else "none")
    out.meta["_used_lines"] = used_lines
    if events:
        out.meta["gpu_ooms"] = len(events)
    return out


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS, event_lines=SCAN_EVENT_LINES),
    files="PyTorch CUDA OOM messages of every era (and ROCm's `HIP out of memory`), also inside any other log",
    yields="`gpu_oom` with requested, free, total, allocated, reserved bytes and other processes",
    # PyTorch's traceback may print the CUDA API's error under its own message
    before=("framework-oom",),
)
