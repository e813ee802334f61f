"""Out-of-memory errors of JAX/XLA, TensorFlow, the CUDA runtime and driver APIs, ggml/llama.cpp and CuPy,
wherever they appear (docs/formats.md "framework-oom"). PyTorch's own messages (CUDA and ROCm's HIP) are
parsers/torch/oom.py.

Like the PyTorch reader, the important entry point is `scan` (an OOM ends a long log another parser
claims); `sniff`/`parse` take a file that is just the error and its traceback. Each message is one
`gpu_oom` event: bytes = the requested allocation where the text gives it, detail = `framework`, and
what the dialect states: the allocator (`GPU_0_bfc`), the device, TensorFlow's tensor shape, node and
`defined at file:line`, the BFC allocator's `Limit`/`InUse` stats printed above the error, XLA's
"Peak buffers" (the first one's `source_file:source_line` and shape is the allocation site), CuPy's
"allocated so far". One error printed several times in a row (TensorFlow logs it, then raises it, then
repeats it "see above for traceback") is one event, unless a progress bar in front of it moved on between
the prints (two failures, one after the other).
"""
from __future__ import annotations

import json
import re
from math import prod

import polars as pl

from forensics import units
from forensics.io.sources import Source
from forensics.model import Parsed, events_frame
from forensics.options import Options
from forensics.parsers import hint_reader
from forensics.parsers.torch import oom as torch_oom
from forensics.parsers.contract import Format, Scan

NAME = "framework-oom"

_GGML_BACKENDS = r"(?:CUDA|ROCm|HIP|SYCL|Vulkan|Metal|MUSA|CANN)"
SCAN_HINT = (r"RESOURCE_EXHAUSTED: (?:Out of memory|Failed to allocate request)|Resource exhausted: Out of memory"
             r"|OOM when allocating tensor|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
             r"|(?:cudaMalloc|cuMemAlloc)[^\n]*out of memory|failed to allocate " + _GGML_BACKENDS
             + r"[0-9]* buffer of size|[Oo]ut of memory (?:allocating|to allocate) [0-9]"
             r"|CUDA (?:failure|error) 2\b[^\n]*out of memory|Out of memory error on GPU [0-9]"
             r"|Error allocating [0-9]+ bytes of device memory \(out of memory\)")
# what every SCAN_HINT line holds (parsers/scanners.py)
SCAN_PREFILTER = (r"RESOURCE_EXHAUSTED|Resource exhausted|OOM when allocating|CUDA_ERROR_OUT_OF_MEMORY"
                  r"|cudaErrorMemoryAllocation|ut of memory|buffer of size")
SCAN_BLOCK_LITERALS = ("resource_exhausted", "resource exhausted", "oom when allocating", "cuda_error_out_of_memory",
                       "cudaerrormemoryallocation", "out of memory", "buffer of size")
# each hint line is an event: a scan keeps the first scanners.MAX_EVENT_LINES of them per file
SCAN_EVENT_LINES = True
_PREFILTER = re.compile(SCAN_PREFILTER)

# possessive: a long run of digits or blanks is read once (no backtracking through it)
_SIZE = r"[0-9][0-9,]*+(?:\.[0-9]+)?+(?:\s*+(?:bytes|[KMGTP]i?B|B|[KMGT])\b)?"
# JAX/XLA (jaxlib's XlaRuntimeError; "Resource exhausted" before 2020)
_XLA = re.compile(
    r"(?:RESOURCE_EXHAUSTED|Resource exhausted):\s*(?:Out of memory (?:while trying to allocate|allocating)\s+"
    r"(?P<size>" + _SIZE + r")(?:\.?\s+with allocator\s+(?P<alloc>\w+))?"
    r"|Failed to allocate request for\s+(?P<req>" + _SIZE + r")\s*+(?:\((?P<exact>[0-9]+)B\))?"
    r"(?:\s*on device ordinal\s+(?P<ordinal>[0-9]+))?)")
_BFC_GPU = re.compile(r"\bGPU_([0-9]+)_bfc\b")
# TensorFlow
_TF = re.compile(r"OOM when allocating tensor with shape\s*(?P<shape>\[[0-9, ]{0,200}\])(?:\s*and type (?P<dtype>\w+))?"
                 r"(?:\s*on (?P<dev>\S+))?(?:\s*by allocator (?P<alloc>\w+))?")
_TF_GPU = re.compile(r"(?:device:GPU|/gpu):([0-9]+)", re.IGNORECASE)
_TF_NODE = re.compile(r"\[\[\s*+(?:\{\{)?\s*[Nn]ode[: ]\s*(?P<node>[^\s=(}]+)")
_TF_OP = re.compile(r"\[Op:(?P<op>\w+)\]")
_TF_DEFINED = re.compile(r"\(defined at (?P<file>[^()\s]+):(?P<line>[0-9]{1,9})\s*\)")
_TF_LIMIT = re.compile(r"\bLimit:\s+([0-9]{1,20})\s*$")
_TF_IN_USE = re.compile(r"\bInUse:\s+([0-9]{1,20})\s*$")
_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
                "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
                "bool": 1, "complex64": 8, "complex128": 16}
# ggml/llama.cpp: the buffer a backend could not allocate (a CPU buffer is host memory: not taken)
_GGML = re.compile(r"failed to allocate (?P<backend>" + _GGML_BACKENDS + r")(?P<dev>[0-9]*) buffer of size (?P<size>[0-9]{1,20})")
# CuPy: "Out of memory allocating N bytes (allocated so far: M bytes)"; before v7 "(total M bytes)"
_CUPY = re.compile(r"[Oo]ut of memory (?:allocating|to allocate) (?P<req>[0-9][0-9,]*) bytes\s*"
                   r"\((?:allocated so far:?|total)\s*(?P<held>[0-9][0-9,]*) bytes\)")
# PaddlePaddle's allocator (paddle/fluid/memory/allocation/cuda_allocator.cc): sizes by HumanReadableSize, binary
# units; "allocated" is the device's use (total - available from cudaMemGetInfo), not Paddle's alone
_PADDLE = re.compile(r"Out of memory error on GPU (?P<dev>[0-9]{1,3})\. Cannot allocate (?P<req>" + _SIZE
                     + r") memory on GPU [0-9]{1,3}, (?P<held>" + _SIZE + r") memory has been allocated and available "
                     r"memory is only (?P<avail>" + _SIZE + ")")
# Theano's GPU back end (libgpuarray): the request, then what the driver reports free of the device's total
_GPUARRAY = re.compile(r"Error allocating (?P<req>[0-9]{1,20}) bytes of device memory \(out of memory\)"
                       r"(?:\.?\s*Driver report (?P<free>[0-9]{1,20}) bytes free and (?P<total>[0-9]{1,20}) bytes total)?")
# the CUDA runtime and driver APIs, as C/C++ programs and libraries print their errors; error code 2 is
# cudaErrorMemoryAllocation (CNTK's and ONNX Runtime's CUDA_CALL: `CUDA failure 2: out of memory ; GPU=0 ; …`)
_CUDA_ERROR = re.compile(r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUDA (?:failure|error) 2\b(?=[^\n]*out of memory)")
_CUDA_API = re.compile(r"cudaMalloc\w*|cuMemAlloc\w*")   # with "out of memory" after it
_CUDA_SIZE = [re.compile(r"failed to allocate\s+" + _SIZE + r"\s*\((?P<exact>[0-9]+) bytes\)"),
              re.compile(r"allocating\s+(?P<size>[0-9][0-9,]*(?:\.[0-9]+)?\s*(?:[KMGT]i?B|bytes))")]
_CUDA_DEVICE = re.compile(r"\bdevice:?\s+([0-9]{1,3})\b|\bGPU=([0-9]{1,3})\b")
# TensorFlow's OOM on a CPU device or by its `cpu` allocator is the host's memory, not a GPU's
_TF_HOST = re.compile(r"device:CPU:|^cpu$", re.IGNORECASE)
HOST_OOM = "an out-of-memory error of the host's memory (a CPU device or allocator), not a GPU's"

# the exception class before the message ("RuntimeError: Error while calling cudaMalloc(...)": the last one)
_CLASS = re.compile(r"(?<![\w.])(?P<cls>[A-Za-z_][\w.]{0,120}(?:Error|Exception)):")
# no allocation asks for a petabyte: a shape's product or a size that big is garbage, not a request
_IMPLAUSIBLE = 1 << 50
LOOKAHEAD = 80      # lines after the error that may hold XLA's peak buffers or TensorFlow's node
NODE_LOOKAHEAD = 4  # TensorFlow prints the node on the error line or right after it
STATS_LOOKBACK = 40  # the BFC allocator's Stats block ends right above its error


def sniff(head: list[str]) -> str | None:
    """Claim a file that is (mostly) an error ending in one of these OOMs; an OOM at the end of a longer
    log is left to the log's own parser and found by `scan`."""
    if not _PREFILTER.search("\n".join(head)):   # (every SCAN_HINT line holds one of its literals)
        return None
    return _sniff_lines(head)


def _sniff_lines(head: list[str]) -> str | None:
    for i, line in enumerate(head):
        if torch_oom.PROVENANCE.match(line) or not re.search(SCAN_HINT, line):
            continue
        found = _dialect(line)
        if found is None:
            continue
        if len(head) < 200 or any(torch_oom.TB_START.match(x) for x in head[max(0, i - 60):i]):
            return f"{found[0]} out-of-memory error at line {i + 1}"
    return None


def parse(src: Source, opts: Options) -> Parsed:
    return hint_reader.parse_used(src, opts, SCAN_HINT, _read, "not part of an out-of-memory message")


def scan(lines: pl.DataFrame, src: Source, opts: Options) -> Parsed:
    return hint_reader.scan_used(lines, src, opts, _read)


def _dialect(line: str) -> tuple[str, re.Match] | None:
    """(framework, the match) of the first dialect that reads the line."""
    for framework, rx in (("jax", _XLA), ("tensorflow", _TF), ("ggml", _GGML), ("cupy", _CUPY), ("paddle", _PADDLE),
                          ("gpuarray", _GPUARRAY)):
        m = rx.search(line)
        if m:
            return framework, m
    m = _CUDA_ERROR.search(line) or _CUDA_API.search(line)
    if m and (m.re is _CUDA_ERROR or "out of memory" in line[m.end():]):
        return "cuda", m
    return None


def _size(text: str | None) -> int | None:
    return units.parse_size(text.replace(",", "")) if text else None


def _facts(framework: str, m: re.Match, line: str, after: list[str], above: list[str]) -> dict:
    d: dict = {"framework": framework}
    if framework == "jax":
        d["requested"] = int(m["exact"]) if m["exact"] else _size(m["size"] or m["req"])
        d["allocator"] = m["alloc"]
        if m["alloc"] and (g := _BFC_GPU.search(m["alloc"])):
            d["gpu"] = g[1]
        elif m["ordinal"]:
            d["gpu"] = m["ordinal"]
        d.update(_peak_buffer(after))
    elif framework == "tensorflow":
        d["shape"] = m["shape"].replace(" ", "")
        d["dtype"] = m["dtype"]
        d["allocator"] = m["alloc"]
        dims = [int(x) for x in d["shape"].strip("[]").split(",") if x]
        if m["dtype"] in _DTYPE_BYTES and len(dims) == d["shape"].count(",") + 1:
            d["requested"] = prod(dims) * _DTYPE_BYTES[m["dtype"]]
            d["requested_from"] = "shape × dtype size"
        if m["dev"] and (g := _TF_GPU.search(m["dev"])):
            d["gpu"] = g[1]
        for text in [line[m.end():], *after[:NODE_LOOKAHEAD]]:
            if "node" not in d and (n := _TF_NODE.search(text)):
                d["node"] = n["node"]
                if "gpu" not in d and (g := _TF_GPU.search(text)):
                    d["gpu"] = g[1]
            if "op" not in d and (o := _TF_OP.search(text)):
                d["op"] = o["op"]
            if "site" not in d and (s := _TF_DEFINED.search(text)):
                d["site"] = f"{s['file']}:{s['line']}"
        for text in reversed(above[-STATS_LOOKBACK:]):
            if "limit" not in d and (s := _TF_LIMIT.search(text)):
                d["limit"] = int(s[1])
            if "in_use" not in d and (s := _TF_IN_USE.search(text)):
                d["in_use"] = int(s[1])
    elif framework == "ggml":
        d["requested"] = int(m["size"])
        d["allocator"] = f"{m['backend']}{m['dev']}"
        if m["dev"] and m["backend"] != "Metal":
            d["gpu"] = m["dev"]
    elif framework == "cupy":
        d["requested"] = _size(m["req"])
        d["in_use"] = _size(m["held"])   # bytes the memory pool had allocated when it failed
    elif framework == "paddle":
        d["requested"], d["gpu"] = _size(m["req"]), m["dev"]
        d["in_use"], d["free"] = _size(m["held"]), _size(m["avail"])   # the device's, as cudaMemGetInfo gave them
    elif framework == "gpuarray":
        d["requested"] = int(m["req"])
        if m["total"]:
            d["free"], d["total"] = int(m["free"]), int(m["total"])
    else:
        d["error"] = m[0]
        for rx in _CUDA_SIZE:
            if s := rx.search(line):
                d["requested"] = int(s["exact"]) if "exact" in rx.groupindex else _size(s["size"])
                break
        if g := _CUDA_DEVICE.search(line):
            d["gpu"] = g[1] or g[2]
    return d


def _peak_buffer(after: list[str]) -> dict:
    """XLA's BufferAssignment OOM listing: its first peak buffer (the largest) with a source line."""
    d: dict = {}
    in_peaks = False
    size = shape = None
    for n, text in enumerate(after[:LOOKAHEAD], 1):
        t = text.strip()
        if t.startswith("total allocation:"):
            d["xla_total_allocation"] = _size(t.split(":", 1)[1].strip())
        elif t.startswith("Peak buffers:"):
            in_peaks = True
        elif not in_peaks:
            continue
        elif t.startswith("Size:"):
            size = _size(t.split(":", 1)[1].strip())
        elif t.startswith("Shape:"):
            shape = t.split(":", 1)[1].strip()
        elif (f := re.search(r'source_file="([^"]{1,500})" source_line=([0-9]{1,9})', t)) and "site" not in d:
            d["site"] = f"{f[1]}:{f[2]}"
            d["peak_buffer_bytes"] = size
        elif t.startswith("=====") and "site" in d:
            d["shape"] = shape
            d["_listing_lines"] = n
            break
        elif t.startswith("====="):
            size = shape = None
    return d


# a progress bar's count in front of a message (tqdm's `| 1732/1744 [`): a bar that moved on between two prints
# of one error says the job went on between them, so they are two failures (ONNX Runtime's CUDA error 2 on one
# frame after another), not one error logged and raised
_BAR_COUNT = re.compile(r"\|[ \t]*([0-9]+)[ \t]*/[ \t]*[0-9]+[ \t]*\[")


def _same(a: dict, b: dict) -> bool:
    """The same error: one framework, size and shape, and no two different GPUs (one print may omit it)."""
    return (a["framework"], a.get("requested"), a.get("shape")) == (b["framework"], b.get("requested"), b.get("shape")) \
        and (a.get("gpu") is None or b.get("gpu") is None or a["gpu"] == b["gpu"])


def _read(hits: pl.DataFrame, src: Source, opts: Options) -> Parsed:
    out = Parsed(clock="none")
    near = hint_reader.near(src, hits["line"], torch_oom.TRACEBACK_LOOKBACK, LOOKAHEAD)
    zone = opts.tz_for(src.path)
    events: list[dict] = []
    details: list[dict] = []
    bars: list[str | None] = []   # per event: the progress bar's count in front of its message (_BAR_COUNT)
    used: list[int] = []
    clocks = set()
    for line_no, raw in hits.select("line", "text").iter_rows():
        if torch_oom.PROVENANCE.match(raw):
            continue
        found = _dialect(raw)
        if found is None:
            out.skipped.add("mentions running out of memory without an error this reader knows", line_no)
            continue
        framework, m = found
        if framework == "tensorflow" and any(x and _TF_HOST.search(x) for x in (m["dev"], m["alloc"])):
            out.skipped.add(HOST_OOM, line_no)
            continue
        after = hint_reader.between(near, line_no + 1, line_no + 1 + LOOKAHEAD)
        if framework == "cuda" and any(_GGML.search(x) for x in after[:2]):
            used.append(line_no)   # ggml's cudaMalloc line: the buffer line after it is the error
            continue
        above = hint_reader.between(near, line_no - torch_oom.TRACEBACK_LOOKBACK, line_no)
        d = _facts(framework, m, raw, after, above)
        if framework == "ggml" and above and (c := _dialect(above[-1])) and c[0] == "cuda":
            d["error"] = c[1][0]   # the cudaMalloc line ggml prints right before
        prefix = raw[: m.start()]
        if classes := _CLASS.findall(prefix[-300:]):
            d["exception"] = classes[-1]
        tb = torch_oom.traceback_frames(above)
        if tb:
            d["traceback"] = tb
            d.setdefault("site", torch_oom.user_site(tb))
        d["message"] = raw[m.start():].strip()
        used.extend(range(line_no, line_no + 1 + d.pop("_listing_lines", 0)))
        prev = details[-1] if details else None
        bar = b[1] if (b := _BAR_COUNT.search(prefix)) else None
        if (prev is not None and _same(prev, d) and line_no - events[-1]["line"] <= torch_oom.TRACEBACK_LOOKBACK
                and (bar is None or bars[-1] is None or bar == bars[-1])):
            # the same error printed again (logged, raised, "see above for traceback"): one OOM
            for k, v in d.items():
                if prev.get(k) is None:
                    prev[k] = v
            prev["printed_at"] = prev.get("printed_at", [events[-1]["line"]]) + [line_no]
            events[-1].update(detail=json.dumps(prev), gpu=prev.get("gpu"), bytes=prev.get("requested"))
            continue
        process = pid = None
        if w := torch_oom.worker_tag(prefix):
            process, pid = w["proc"], int(w["pid"])
        elif c := torch_oom.COMPOSE.match(prefix):
            process = c["svc"]
        when, clock = torch_oom.line_time(prefix, zone)
        if clock:
            clocks.add(clock)
        details.append(d)
        bars.append(bar)
        if (d.get("requested") or 0) > _IMPLAUSIBLE:
            d["implausible_requested"], d["requested"] = d["requested"], None
        events.append({"time": when, "line": line_no, "kind": "gpu_oom", "gpu": d.get("gpu"), "pid": pid,
                       "process": process, "bytes": d.get("requested"), "text": raw, "detail": json.dumps(d)})
    out.events = events_frame(events)
    out.clock = "wall" if clocks == {"wall"} else ("wall-assumed" if clocks else "none")
    out.meta["_used_lines"] = used
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
    files="other frameworks' out-of-memory errors: JAX/XLA `RESOURCE_EXHAUSTED` (with its peak buffers), "
          "TensorFlow `OOM when allocating tensor` (with the BFC `Limit`/`InUse` stats), CUDA runtime/driver API "
          "(`cudaMalloc ... out of memory`, `CUDA_ERROR_OUT_OF_MEMORY`, `cudaErrorMemoryAllocation`, CNTK's and "
          "ONNX Runtime's `CUDA failure 2: out of memory`), ggml/llama.cpp `failed to allocate CUDA0 buffer`, CuPy "
          "`OutOfMemoryError`, PaddlePaddle `Out of memory error on GPU 0`, Theano/libgpuarray `Error allocating N "
          "bytes of device memory`; also inside any other log",
    yields="`gpu_oom` with framework, requested bytes, device, allocator, limit, in use, shape, node and "
           "allocation site",
)
