"""compute-sanitizer `--leak-check full` and legacy cuda-memcheck text reports (docs/formats.md §2).

Every tool line starts with exactly nine `=` and a space (`=========     Host Frame: ...`); anything
before them (CI indentation, a timestamp) is ignored, and program output that the tool interleaves
without the prefix is skipped. Three generations of host-frame layout are read (§2.2):

  (a) legacy   `Host Frame:/usr/lib/libcuda.so.1 (cuMemAlloc_v2 + 0x1b7) [0x2b8257]`
  (b) 2023-24  `Host Frame:cublasCreate_v2 [0x7f66f1]` + next line `in /path/module`
  (c) newest   `Host Frame: main in leak.cu:8 [0x8dae] in leak`, and for Python programs
               `Host Frame: <module> in train.py:3` (no pc, no module)

The tool has no clock: events carry line numbers only (clock "none").
"""
from __future__ import annotations

import functools
import json
import re

import polars as pl

from forensics.options import Options
from forensics.model import Parsed, events_frame
from forensics.io.sources import Source
from forensics.parsers.contract import Format, Scan

NAME = "compute-sanitizer"

# Tool lines: the first run of '=' in the line is exactly nine, followed by the end of the line or a
# space (a longer rule such as pytest's banners is not one).
SCAN_HINT = r"={9}(?:[ \t]|$)"
# what every SCAN_HINT line holds, for the one prefilter over all scanners (parsers/scanners.py)
SCAN_PREFILTER = r"========="
SCAN_BLOCK_LITERALS = ("=========",)

_SNIFF = re.compile(
    r"(?:^|[^=])={9} (?:COMPUTE-SANITIZER|CUDA-MEMCHECK|LEAK SUMMARY: [0-9,]+ bytes|ERROR SUMMARY: [0-9,]+ error"
    r"|Leaked [0-9,]+ bytes at 0x|Invalid __\w+__ (?:read|write)|Program hit cuda\w+ \(error [0-9]+\))"
)

_BANNER = re.compile(r"^(COMPUTE-SANITIZER|CUDA-MEMCHECK)\s*$")
_LEAK = re.compile(r"^Leaked (?P<n>[0-9][0-9,]{0,24}) bytes at (?P<addr>0x[0-9a-fA-F]+)")
_LEAK_SUMMARY = re.compile(r"^LEAK SUMMARY: (?P<n>[0-9][0-9,]{0,24}) bytes leaked in (?P<m>[0-9][0-9,]{0,24}) allocations?")
_ERROR_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>[0-9][0-9,]{0,24}) errors?")
# The tool could not check anything (docs/formats.md §2.2, "Failure-to-instrument lines").
_NOT_INSTRUMENTED = re.compile(
    r"^(?:Error: Target application terminated before first instrumented API call"
    r"|Error: No attachable process found"
    r"|Tracking kernels launched by child processes requires the --target-processes all option"
    r"|Error: .*(?:timed-out|timed out|[Cc]ould not|[Uu]nable to|[Ff]ailed to|not supported))"
)
_HINT_LINES = re.compile(
    r"^(?:This tool is deprecated|Please use the compute-sanitizer|Default timeout can be adjusted"
    r"|Target application returned an error|NVIDIA \(R\)|Version [0-9]|Copyright)"
)
_ERROR_HEAD = re.compile(
    r"^(?:Invalid __\w+__ |Invalid \w+|Program hit |Misaligned |Out-of-range |Uninitialized |Race reported"
    r"|(?:Potential )?(?:RAW|WAR|WAW) hazard|Barrier error|Malloc/Free error|Cuda API error|Host API memory access error"
    r"|Unused memory|Hardware Exception|Device-side assertion|Error: |Warning: |\w[\w ]* error detected)"
)
_PROGRAM_HIT = re.compile(
    r"^Program hit (?P<err>\w+) \(error (?P<code>[0-9]{1,9})\) due to \"(?P<msg>[^\"]*)\" on CUDA API call to (?P<api>\w+)"
)
_SAVED = re.compile(r"^Saved host backtrace up to driver entry point(?: at (?P<where>.+?))?\s*$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_LEGACY_SYMBOL = re.compile(r"^(?P<module>.*?) \((?P<symbol>.*) \+ (?P<off>0x[0-9a-fA-F]+)\)$")
_LEGACY_END = re.compile(r" \+ 0x[0-9a-fA-F]+\)$")
_FILE_LINE = re.compile(r"^(?P<file>\S+):(?P<line>[0-9]{1,9})$")

# -- allocation site -------------------------------------------------------------------------------
# Frames that are never "the user's code": the driver and runtime, cuBLAS, PyTorch's own libraries
# (allocator and dispatch), the Python interpreter and libc's start-up frames.
_SKIP_MODULE = re.compile(
    r"^(?:libcuda\.so|nvcuda|libcudart|cudart(?:32|64)|libcublas|cublas(?:Lt)?(?:32|64)|libtorch|libc10|torch_cuda"
    r"|torch_cpu|c10(?:_cuda)?\.dll|python[0-9.]*(?:\.exe)?$|libpython|python3[0-9]*\.dll|libc\.so|ld-linux"
    r"|ntdll\.dll|kernel32\.dll)",
    re.IGNORECASE,
)
# CUDA runtime/driver entry points (cudaMalloc*, cuMemAlloc_v2, cudaLaunchKernel, also the C++ template
# wrappers `cudaError cudaMalloc<float>(float**, unsigned long)`), static-cudart internals, Python's C API.
_SKIP_SYMBOL = re.compile(
    r"^(?:[\w:]+\s+)?cu(?:da)?[A-Z]\w*(?:<[^>]*>)?(?:\(.*\))?$"
    r"|^libcudart_static_|^_?Py[A-Z_]\w*$|^_PyEval|^__libc_start|^_start$|^__cudaLaunch|^__device_stub__"
)
_SKIP_FILE = re.compile(r"(?:^|[\\/])(?:cuda_runtime(?:_api)?\.h|crt[\\/]|site-packages[\\/]|dist-packages[\\/]|<frozen )"
                        r"|\.stub\.c$|\.cudafe1\.")
# Stacks through these keep their memory on purpose until exit (PyTorch's caching allocators).
_CACHING_ALLOCATOR = re.compile(
    r"CUDACachingAllocator|CachingHostAllocator|CUDAMallocAsyncAllocator|CachingDeviceAllocator"
)


def _basename(path: str | None) -> str:
    if not path:
        return ""
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def is_library_frame(frame: dict) -> bool:
    """True for frames that belong to CUDA, PyTorch, the interpreter or libc, not to the user's code."""
    return _is_library(frame.get("symbol") or "", frame.get("module") or "", frame.get("file") or "")


@functools.lru_cache(maxsize=65536)  # the same frames recur in every leak of a run
def _is_library(symbol: str, module_path: str, file: str) -> bool:
    module = _basename(module_path)
    if module and _SKIP_MODULE.match(module):
        return True
    if symbol and _SKIP_SYMBOL.match(symbol):
        return True
    if file and _SKIP_FILE.search(file):
        return True
    if not symbol and not module and not file:
        return True
    return False


def _short_symbol(symbol: str) -> str:
    """`make_buffer(unsigned long)` -> `make_buffer`; keeps `<module>` and operator names readable."""
    if symbol.startswith("<"):
        return symbol
    depth, out = 0, []
    for i, ch in enumerate(symbol):
        if ch == "(" and depth == 0 and i > 0 and not symbol[:i].endswith("operator"):
            break
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        out.append(ch)
    short = "".join(out).strip()
    # drop a leading return type ("cudaError cudaMalloc<float>")
    if " " in short and "<" not in short.split(" ", 1)[0]:
        short = short.rsplit(" ", 1)[-1]
    return short or symbol


def site_label(frame: dict) -> str:
    symbol = frame.get("symbol") or ""
    where = ""
    if frame.get("file"):
        where = f"{_basename(frame['file'])}:{frame['line']}" if frame.get("line") else _basename(frame["file"])
    elif frame.get("module"):
        where = _basename(frame["module"])
    if symbol:
        return f"{_short_symbol(symbol)} ({where})" if where else _short_symbol(symbol)
    if frame.get("offset"):
        return f"{where}+{frame['offset']}" if where else frame["offset"]
    return where or "?"


def allocation_site(frames: list[dict]) -> tuple[dict | None, str]:
    """The first frame in the user's code, and a short label for it. When every frame is a library
    frame (a truncated stack, or a PyTorch program without Python frames), the site is None and the
    label says where the stack ended."""
    for frame in frames:
        if not is_library_frame(frame):
            return frame, site_label(frame)
    if not frames:
        return None, "no host stack"
    last_modules = [_basename(f.get("module")) for f in frames if f.get("module")]
    tail = f", last frame in {last_modules[-1]}" if last_modules else ""
    return None, f"no user frame in the stack{tail}"


STACK_HEAD, STACK_TAIL, SYMBOL_CHARS = 16, 4, 200
USER_FRAMES_MAX = 32   # a deep Python recursion: the innermost user frames name the call path


def user_frames(frames: list[dict]) -> list[dict]:
    """The stack's frames in the user's code, innermost first, for grouping leaks by call path
    (detect/callpaths.py): the function without its parameters, file and line, or module and offset."""
    out = []
    for fr in frames:
        if is_library_frame(fr):
            continue
        sym = _short_symbol(fr["symbol"]) if fr.get("symbol") else None
        out.append({"function": sym[:SYMBOL_CHARS] if sym else None, "file": fr.get("file"), "line": fr.get("line"),
                    "module": _basename(fr.get("module")) or None, "offset": fr.get("offset")})
        if len(out) == USER_FRAMES_MAX:
            break
    return out


def compact_stack(frames: list[dict]) -> list[dict]:
    """The stack as stored in an event: PyTorch stacks run to 40+ frames of 1,000-character template
    symbols, and a run can list thousands of leaks. Keep the innermost frames and the outermost few
    (where the newest tool puts the Python frames), with long symbols cut."""
    kept = frames if len(frames) <= STACK_HEAD + STACK_TAIL else frames[:STACK_HEAD] + frames[-STACK_TAIL:]
    out = []
    for fr in kept:
        sym = fr.get("symbol")
        if sym and len(sym) > SYMBOL_CHARS:
            fr = {**fr, "symbol": sym[:SYMBOL_CHARS] + "…"}
        out.append(fr)
    return out


def through_caching_allocator(frames: list[dict]) -> bool:
    return any(_allocator_frame(f.get("symbol") or "", f.get("module") or "") for f in frames)


@functools.lru_cache(maxsize=65536)
def _allocator_frame(symbol: str, module_path: str) -> bool:
    return bool(_CACHING_ALLOCATOR.search(symbol)) or \
        _basename(module_path).lower().startswith(("libc10_cuda", "c10_cuda"))


def _split_pc(rest: str) -> tuple[str, str, str | None] | None:
    """`body [0xPC]` or `body [0xPC] in module` -> (body, pc, module); None without a pc.
    String search, not a regex: symbols run to thousands of characters."""
    if rest.endswith("]"):
        k = rest.rfind("[")
        if k >= 0 and _HEX.match(rest[k + 1:-1]):
            return rest[:k].rstrip(), rest[k + 1:-1], None
        return None
    idx = rest.rfind("] in ")
    if idx < 0:
        return None
    k = rest.rfind("[", 0, idx)
    if k < 0 or not _HEX.match(rest[k + 1:idx]):
        return None
    return rest[:k].rstrip(), rest[k + 1:idx], rest[idx + 5:].strip() or None


def _source_location(body: str) -> tuple[str, str, int] | None:
    """`main in leak.cu:8` -> ("main", "leak.cu", 8)."""
    symbol, sep, where = body.rpartition(" in ")
    if not sep:
        return None
    m = _FILE_LINE.match(where)
    return (symbol, m["file"], int(m["line"])) if m else None


def parse_host_frame(rest: str) -> tuple[dict, str]:
    """One `Host Frame:` payload -> (frame, layout). Layout "a" = legacy module-first, "c" = one line
    with `in <module>`, "b?" = symbol first with the module still to come on the next line."""
    rest = rest.strip()
    split = _split_pc(rest)
    if split is None:
        # newest Python frame: `<module> in train.py:3`; or something unknown, kept as the symbol
        loc = _source_location(rest)
        if loc:
            return {"symbol": loc[0] or None, "module": None, "offset": None, "file": loc[1], "line": loc[2]}, "c"
        return {"symbol": rest or None, "module": None, "offset": None, "file": None, "line": None}, "c"
    body, pc, module = split
    frame = {"symbol": None, "module": None, "offset": pc, "file": None, "line": None}
    if module:
        frame["module"] = module
        layout = "c"
    else:
        # the end checked first: without it each " (" of a long frame was tried against the whole rest
        # (quadratic, issue 45 D-R6); with it the first try matches
        legacy = _LEGACY_SYMBOL.match(body) if _LEGACY_END.search(body) else None
        if legacy and _looks_like_module(legacy["module"]):
            frame["module"] = legacy["module"]
            frame["symbol"] = legacy["symbol"]
            frame["symbol_offset"] = legacy["off"]
            return frame, "a"
        if _looks_like_module(body) and " " not in body.strip():
            frame["module"] = body
            return frame, "a"
        layout = "b?"
    loc = _source_location(body)
    if loc:
        frame["symbol"] = loc[0] or None
        frame["file"], frame["line"] = loc[1], loc[2]
    else:
        frame["symbol"] = body or None
    return frame, layout


def _looks_like_module(text: str) -> bool:
    text = text.strip()
    return bool(text) and (
        text.startswith(("/", "./", "../", "~"))
        or bool(re.match(r"^[A-Za-z]:[\\/]", text))
        or bool(re.search(r"\.(?:so(?:\.[0-9]+)*|dll|exe|dylib)$", text, re.IGNORECASE))
    )


def _int(text: str) -> int:
    return int(text.replace(",", ""))


# -- sniff / parse -----------------------------------------------------------------------------------

def sniff(head: list[str]) -> str | None:
    if "========= " not in "\n".join(head):   # (what every _SNIFF match holds: `={9} `)
        return None
    return _sniff_lines(head)


def _sniff_lines(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        if line.startswith("# source:"):  # provenance line of a collected snippet, not log text
            continue
        m = _SNIFF.search(line)
        if m:
            what = m.group(0).lstrip("= ").split(":")[0]
            return f"compute-sanitizer/cuda-memcheck line ({what[:40]}) at line {i}"
    return None


def parse(src: Source, opts: Options) -> Parsed:
    return _parse_frame(src.frame(), primary=True)


def scan(lines: pl.DataFrame, src: Source, opts: Options) -> Parsed:
    """Sanitizer reports inside another log (a CI job, a test runner's output)."""
    return _parse_frame(lines, primary=False)


class _Run:
    def __init__(self, index: int):
        self.index = index
        self.tool: str | None = None
        self.leaks = 0
        self.leak_bytes = 0
        self.summary: tuple[int, int, int] | None = None  # bytes, allocations, line
        self.error_summary: int | None = None
        self.touched = False
        self.closed = False


def _parse_frame(frame: pl.DataFrame, primary: bool) -> Parsed:
    out = Parsed(clock="none")
    text = pl.col("text")
    pos = text.str.find("=========", literal=True)
    before = pl.when(pos > 0).then(text.str.slice(pos - 1, 1)).otherwise(pl.lit(""))
    after = text.str.slice(pos + 9, 1)
    parts = frame.select(
        "line", "text",
        (pos.is_not_null() & (before != "=") & after.is_in(["", " ", "\t"])).alias("is_tool"),
        text.str.slice(pos + 10).alias("rest"),
    )
    is_tool = pl.col("is_tool")
    if primary:
        program = parts.filter(~is_tool & (pl.col("text").str.strip_chars() != ""))
        out.skipped.add_lines("program output (not a sanitizer line)", program["line"])
    tool = parts.filter(is_tool)

    events: list[dict] = []
    runs: list[_Run] = [_Run(0)]
    current: dict | None = None
    last_frame_open = False  # layout (b): the module arrives on the next line

    def run() -> _Run:
        return runs[-1]

    def new_run_if_needed(force: bool = False) -> None:
        r = run()
        if r.closed or (force and r.touched):
            runs.append(_Run(len(runs)))

    def close() -> None:
        nonlocal current, last_frame_open
        if current is None:
            return
        rec, current, last_frame_open = current, None, False
        frames = rec["stack"]
        site, label = allocation_site(frames)
        layouts = sorted({lay for lay in rec["layouts"]})
        detail = {
            "stack": compact_stack(frames),
            "stack_frames": len(frames),
            "save_location": rec.get("save_location"),
            "site": site,
            "site_label": label,
            "user_frames": user_frames(frames),
            "run": rec["run"],
        }
        if layouts:
            detail["layout"] = "/".join(layouts)
        if rec["kind"] == "sanitizer_leak":
            detail["address"] = rec["address"]
            detail["allocator_cache_at_exit"] = through_caching_allocator(frames)
            if detail["allocator_cache_at_exit"]:
                detail["expected"] = ("allocated through PyTorch's caching allocator, which keeps its cache "
                                      "until the process exits; not a user leak by itself")
        else:
            detail.update(rec.get("extra", {}))
            if rec["details"]:
                detail["lines"] = rec["details"]
        events.append({"line": rec["line"], "kind": rec["kind"], "bytes": rec.get("bytes"),
                       "detail": json.dumps(detail), "text": rec["text"]})

    for line_no, raw, rest in tool.select("line", "text", "rest").iter_rows():
        rest = rest or ""
        body = rest.strip()
        depth = len(rest) - len(rest.lstrip(" \t"))
        if not body:
            close()
            continue
        if depth == 0:
            close()
            if m := _BANNER.match(body):
                new_run_if_needed(force=True)
                run().tool = "cuda-memcheck" if m.group(1) == "CUDA-MEMCHECK" else "compute-sanitizer"
                run().touched = True
                continue
            if _HINT_LINES.match(body):
                if body.startswith("Target application returned an error"):
                    out.notes.append(f"line {line_no}: the checked program itself exited with an error")
                continue
            if not (_LEAK.match(body) or _LEAK_SUMMARY.match(body) or _ERROR_SUMMARY.match(body)
                    or _NOT_INSTRUMENTED.match(body) or _ERROR_HEAD.match(body)):
                out.skipped.add("unrecognized sanitizer line", line_no)
                continue
            new_run_if_needed()
            r = run()
            r.touched = True
            if m := _LEAK.match(body):
                n = _int(m["n"])
                r.leaks += 1
                r.leak_bytes += n
                current = {"kind": "sanitizer_leak", "line": line_no, "text": raw, "bytes": n,
                           "address": m["addr"], "stack": [], "layouts": [], "details": [], "run": r.index}
            elif m := _LEAK_SUMMARY.match(body):
                n, allocs = _int(m["n"]), _int(m["m"])
                r.summary = (n, allocs, line_no)
                consistent = n == r.leak_bytes and allocs == r.leaks
                events.append({"line": line_no, "kind": "sanitizer_summary", "bytes": n, "text": raw,
                               "detail": json.dumps({"bytes": n, "allocations": allocs, "listed_bytes": r.leak_bytes,
                                                     "listed": r.leaks, "consistent": consistent, "run": r.index})})
            elif m := _ERROR_SUMMARY.match(body):
                r.error_summary = _int(m["n"])
                r.closed = True
                events.append({"line": line_no, "kind": "sanitizer_error", "text": raw,
                               "detail": json.dumps({"category": "error_summary", "errors": r.error_summary,
                                                     "run": r.index})})
            elif _NOT_INSTRUMENTED.match(body):
                events.append({"line": line_no, "kind": "sanitizer_error", "text": raw,
                               "detail": json.dumps({"category": "not_instrumented", "message": body,
                                                     "run": r.index})})
                out.notes.append(f"line {line_no}: the sanitizer did not check the program: {body}")
            else:
                extra: dict = {"category": "warning" if body.startswith("Warning") else "error", "message": body}
                if m := _PROGRAM_HIT.match(body):
                    extra.update(category="api_error", cuda_error=m["err"], code=int(m["code"]),
                                 reason=m["msg"], api=m["api"])
                elif body.startswith("Invalid "):
                    extra["category"] = "memory_access"
                current = {"kind": "sanitizer_error", "line": line_no, "text": raw, "stack": [], "layouts": [],
                           "details": [], "run": r.index, "extra": extra}
            continue
        # nested line: part of the current record
        if current is None:
            out.skipped.add("sanitizer detail line outside a record (excerpt starts mid-record?)", line_no)
            continue
        if body.startswith("Saved host backtrace") and (m := _SAVED.match(body)):
            current["save_location"] = m["where"]
        elif body.startswith("Host Frame:"):
            fr, layout = parse_host_frame(body[len("Host Frame:"):])
            current["stack"].append(fr)
            last_frame_open = layout == "b?"
            current["layouts"].append("b" if layout == "b?" else layout)
        elif last_frame_open and body.startswith("in ") and current["stack"]:
            current["stack"][-1]["module"] = body[3:].strip()
            last_frame_open = False
        else:
            last_frame_open = False
            if len(current["details"]) < 20:
                current["details"].append(body)
            if current["kind"] == "sanitizer_error" and body.startswith("at ") and "at" not in current["extra"]:
                current["extra"]["at"] = body[3:]
    close()

    out.events = events_frame(events)
    _cross_check(out, [r for r in runs if r.touched], primary)
    return out


def _cross_check(out: Parsed, runs: list[_Run], primary: bool) -> None:
    """Compare each run's LEAK SUMMARY with the leak records actually listed."""
    tools = sorted({r.tool for r in runs if r.tool})
    listed = sum(r.leaks for r in runs)
    listed_bytes = sum(r.leak_bytes for r in runs)
    with_summary = [r for r in runs if r.summary]
    meta: dict = {
        "tool": ", ".join(tools) or None,
        "runs": len(runs),
        "leaks_listed": listed,
        "leaks_listed_bytes": listed_bytes,
        "leak_summary_bytes": sum(r.summary[0] for r in with_summary) if with_summary else None,
        "leak_summary_allocations": sum(r.summary[1] for r in with_summary) if with_summary else None,
        "consistent": None,
    }
    errors = [r.error_summary for r in runs if r.error_summary is not None]
    meta["error_summary_errors"] = sum(errors) if errors else None
    if with_summary:
        bad = [r for r in with_summary if (r.summary[0], r.summary[1]) != (r.leak_bytes, r.leaks)]
        # leaks listed in a run without a summary cannot be checked; they make the total unknowable
        unchecked = [r for r in runs if not r.summary and r.leaks]
        meta["consistent"] = not bad and not unchecked
        for r in bad:
            out.notes.append(
                f"LEAK SUMMARY at line {r.summary[2]} says {r.summary[0]} bytes in {r.summary[1]} allocations, "
                f"but {r.leaks} leak record(s) with {r.leak_bytes} bytes are listed before it: the excerpt is "
                "probably truncated (or records were filtered); trust the summary for the total")
    elif listed:
        out.notes.append("no LEAK SUMMARY line: the leak total cannot be cross-checked (excerpt truncated, "
                         "or the run did not finish)")
    if primary or listed or with_summary:
        out.meta.update(meta)
    if primary and not runs:
        out.notes.append("no compute-sanitizer records found")


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS),
    files="compute-sanitizer / cuda-memcheck leak reports (all three layouts)",
    yields="`sanitizer_leak` per allocation with its host stack and user-code call path (leaks grouped by helper "
           "and caller), cross-checked against `LEAK SUMMARY`",
    # a sanitizer line inside a kernel log leaves the file a kernel log (this format's scan reads it there)
    after=("nvrm-xid", "kernel-log"),
)
