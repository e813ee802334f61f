"""Format "serving-engine-log": the memory lines of vLLM's and SGLang's logs (docs/formats.md §13), in
their own log or inside any other (as a scanner).

- vLLM's start-up memory profile, as a `marker` event with the footprint breakdown in its detail and
  a note: the one-line form (`model weights take 21.21GiB; non_torch_memory takes 0.20GiB; PyTorch
  activation peak memory takes 0.37GiB; the rest of the memory reserved for KV Cache is 1.57GiB.`, after
  `the current vLLM instance can use total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) =
  23.35GiB`), the table form (`model weights take   14.96GiB`, `non_torch_memory     1.79GiB`, ...,
  `available_kv_cache_memory    53.29GiB`) and V1's `Model loading took 14.9889 GiB`, `Available KV
  cache memory: 8.11 GiB`, `GPU KV cache size: 178,880 tokens`.
- vLLM's every-10-s stats line `... GPU KV cache usage: 0.3%, ...` and SGLang's batch lines `Decode
  batch. #running-req: 1, #token: 101, token usage: 0.00, ...` as a `kv_cache.used` series: the
  fraction times the cache's size, with that size as capacity, where the log gives the size (vLLM's
  KV cache memory above; SGLang's `KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23
  GB`, GB = 2^30); without it the fraction holds no byte count and is counted, not read.
- SGLang's own leak check, `KV cache pool leak detected!` (with `available_size=35244,
  max_total_num_token=42308` where its warning gives them) and `token_to_kv_pool_allocator memory leak
  detected! available_size=..., self.max_total_num_tokens=...`: a `kv_cache_leak` event.

Clocks: vLLM stamps `INFO 12-13 19:54:18` (month-day, local, no year: --year, else the file's mtime
dates the last line), SGLang `[2025-10-22 20:21:38 TP0]` (local). `(VllmWorkerProcess pid=521)` and
SGLang's `TP0` name the worker (pid, tensor-parallel rank).
"""
from __future__ import annotations

import json
import re
from datetime import datetime

import polars as pl

from forensics import clock
from forensics.io.lines import read_whole
from forensics.parsers.hint_reader import PROVENANCE, HintReader
from forensics.model import Parsed, events_frame, samples_frame
from forensics.parsers.contract import Format, Scan

NAME = "serving-engine-log"
GIB = 1 << 30

_ONE_LINE = re.compile(r"model weights take (?P<weights>[0-9.]+) ?GiB; non_torch_memory takes (?P<non_torch>[0-9.]+) ?GiB; "
                       r"PyTorch activation peak memory takes (?P<activation_peak>[0-9.]+) ?GiB; the rest of the memory "
                       r"reserved for KV Cache is (?P<kv_cache>-?[0-9.]+) ?GiB")
_CAN_USE = re.compile(r"the current vLLM instance can use total_gpu_memory \((?P<total>[0-9.]+) ?GiB\) x "
                      r"gpu_memory_utilization \((?P<util>[0-9.]+)\) = (?P<usable>[0-9.]+) ?GiB")
_TABLE = re.compile(r"\] (?P<k>total_gpu_memory|the current vLLM instance can use|model weights take|non_torch_memory|"
                    r"PyTorch activation peak memory|available_kv_cache_memory)\s+(?P<v>-?[0-9.]+) ?GiB\s*$")
_TABLE_KEYS = {"total_gpu_memory": "total", "the current vLLM instance can use": "usable", "model weights take": "weights",
               "non_torch_memory": "non_torch", "PyTorch activation peak memory": "activation_peak",
               "available_kv_cache_memory": "kv_cache"}
_LOADING = re.compile(r"(?:Model loading|Loading model weights) took (?P<weights>[0-9.]+) ?Gi?B")
_AVAILABLE_KV = re.compile(r"Available KV cache memory: (?P<kv_cache>-?[0-9.]+) ?GiB")
_KV_TOKENS = re.compile(r"GPU KV cache size: (?P<tokens>[0-9,]+) tokens")
_VLLM_USAGE = re.compile(r"GPU KV cache usage: (?P<pct>[0-9.]+)%")
_SGL_ALLOC = re.compile(r"KV Cache is allocated\. #tokens: (?P<tokens>[0-9]+), K size: (?P<k>[0-9.]+) GB, V size: (?P<v>[0-9.]+) GB")
_SGL_USAGE = re.compile(r"(?:Prefill|Decode) batch[.,] .*?\b(?:full )?token usage: (?P<frac>[0-9.]+)")
_SGL_LEAK = re.compile(r"(?:KV cache pool leak detected!|token_to_kv_pool_allocator memory leak detected!)")
_SGL_LEAK_SIZES = re.compile(r"available_size=(?P<avail>[0-9]+).*?max_total_num_tokens?=(?P<max>[0-9]+)")
# SGLang 0.1 warned the pool's sizes on the line before its leak message

_VLLM_STAMP = re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG) (?P<mo>[01][0-9])-(?P<d>[0-3][0-9]) (?P<hms>[0-2][0-9]:[0-5][0-9]:[0-6][0-9])")
_SGL_STAMP = re.compile(r"^\[(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}) (?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})(?: (?P<tp>TP[0-9]+))?")
_WORKER_PID = re.compile(r"\((?:VllmWorkerProcess|VllmWorker[^)]*?|EngineCore[^)]*?) pid=(?P<pid>[0-9]+)\)")

SCAN_HINT = "|".join([r"model weights take [0-9.]+ ?GiB", r"the current vLLM instance can use", _TABLE.pattern,
                      r"(?:Model loading|Loading model weights) took [0-9.]+ ?Gi?B", r"Available KV cache memory: ",
                      r"GPU KV cache size: [0-9,]+ tokens", r"GPU KV cache usage: [0-9.]+%", r"KV Cache is allocated\. ",
                      r"(?:Prefill|Decode) batch[.,] .*token usage: ", r"leak detected!",
                      r"available_size=[0-9]+.*max_total_num_tokens?="])
SCAN_PREFILTER = ("model weights take|vLLM instance can use|total_gpu_memory|non_torch_memory|activation peak memory|"
                  "available_kv_cache_memory|Model loading took|Loading model weights took|KV cache memory|KV cache size|KV cache usage|KV Cache is allocated|"
                  "token usage|leak detected!|available_size=")
SCAN_BLOCK_LITERALS = ("model weights take", "vllm instance can use", "total_gpu_memory", "non_torch_memory",
                       "activation peak memory", "available_kv_cache_memory", "model loading took",
                       "loading model weights took", "kv cache memory", "kv cache size",
                       "kv cache usage", "kv cache is allocated", "token usage", "leak detected!",
                       "available_size=")

_SNIFF = re.compile(SCAN_HINT)
_PREFILTER = re.compile(SCAN_PREFILTER)


def sniff(head: list[str]) -> str | None:
    if not _PREFILTER.search("\n".join(head)):   # (every SCAN_HINT line holds one of its literals)
        return None
    return _sniff_lines(head)


def _sniff_lines(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        if _SNIFF.search(line):
            return f"vLLM / SGLang memory line on line {i}"
    return None


class Reader(HintReader):
    other_reason = "not a memory line of the engine"

    def __init__(self, src, opts):
        super().__init__(src, opts, SCAN_PREFILTER, SCAN_HINT, read)


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts) -> Parsed:
    return read(lines, src, opts)


def _gib(x: str) -> int:
    return round(float(x) * GIB)


def _profile_text(f: dict) -> str:
    names = (("weights", "model weights"), ("non_torch", "non-torch memory"), ("activation_peak", "activation peak"),
             ("kv_cache", "KV cache"))
    parts = [f"{label} {f[k] / GIB:.2f} GiB" for k, label in names if f.get(k) is not None]
    of = f" of {f['usable'] / GIB:.2f} GiB usable" if f.get("usable") else ""
    of += f" ({f['total'] / GIB:.2f} GiB total)" if f.get("total") else ""
    return ", ".join(parts) + of


def read(lines: pl.DataFrame, src, opts) -> Parsed:
    out = Parsed(clock="none")
    rows: list[dict] = []          # each a line's record: kind ("profile", "usage", "leak", "size"), ...
    for line_no, text in lines.sort("line").select("line", "text").iter_rows():
        if not text or re.match(PROVENANCE, text):
            continue
        rec = _record(text)
        if rec is None:
            out.skipped.add("a memory word in a line the engine's forms do not match", line_no)
            continue
        rec.update(line=line_no, text=text, **_who(text))
        rows.append(rec)
    if not rows:
        return out
    _stamp(rows, src, opts, out)
    events, samples = [], []
    profile: dict = {}
    capacity = None
    pending_sizes = None
    for r in rows:
        f = r.get("fields", {})
        if r["what"] == "profile":
            profile.update(f)
            if f.get("kv_cache") is not None:
                capacity = f["kv_cache"]
            if {"weights", "kv_cache"} <= profile.keys() or r.get("closes"):
                events.append(_event(r, "marker", {"what": "vLLM memory profile", "label": "vLLM memory profile: "
                                                   + _profile_text(profile), **profile}))
                out.notes.append(f"vLLM memory profile (line {r['line']}): {_profile_text(profile)}")
                profile = {}
        elif r["what"] == "size":
            capacity = f["kv_cache"]
            events.append(_event(r, "marker", {"what": "SGLang KV cache allocated", "label": "SGLang KV cache: "
                                               f"{f['kv_cache'] / GIB:.2f} GiB for {f['tokens']} tokens", **f}))
        elif r["what"] == "usage":
            if capacity is None:
                out.skipped.add("KV cache usage as a fraction, the cache's size not in the log: not read", r["line"])
                continue
            samples.append({"time": r.get("time"), "line": r["line"], "pid": r.get("pid"), "series": "kv_cache.used",
                            "bytes": round(f["fraction"] * capacity), "total_bytes": capacity, "label": r.get("rank")})
        elif r["what"] == "leak_sizes":
            pending_sizes = (r["line"], f)
        elif r["what"] == "leak":
            if not f and pending_sizes is not None and pending_sizes[0] >= r["line"] - 2:
                f = {**pending_sizes[1], "sizes_line": pending_sizes[0]}
            events.append(_event(r, "kv_cache_leak", {"engine": "sglang", **f}))
    if profile:   # a profile whose last line fell outside the excerpt
        last = rows[-1]
        events.append(_event(last, "marker", {"what": "vLLM memory profile", "label": "vLLM memory profile: "
                                              + _profile_text(profile), **profile}))
        out.notes.append(f"vLLM memory profile: {_profile_text(profile)}")
    out.events = events_frame(events)
    if samples:
        df = samples_frame(samples)
        out.samples = df.with_columns(pl.int_range(1, df.height + 1, dtype=pl.Int64).alias("seq"))
    return out


def _event(r: dict, kind: str, d: dict) -> dict:
    return {"time": r.get("time"), "line": r["line"], "text": r["text"], "kind": kind, "pid": r.get("pid"),
            "detail": json.dumps({k: v for k, v in {**d, "rank": r.get("rank")}.items() if v is not None})}


def _record(text: str) -> dict | None:
    if m := _ONE_LINE.search(text):
        return {"what": "profile", "closes": True, "fields": {k: _gib(v) for k, v in m.groupdict().items()}}
    if m := _CAN_USE.search(text):
        return {"what": "profile", "fields": {"total": _gib(m["total"]), "usable": _gib(m["usable"]),
                                              "utilization": float(m["util"])}}
    if m := _TABLE.search(text):
        return {"what": "profile", "fields": {_TABLE_KEYS[m["k"]]: _gib(m["v"])}}
    if m := _LOADING.search(text):
        # vLLM's V0 wrote GB for what it computed in GiB (bytes / 2**30)
        return {"what": "profile", "fields": {"weights": _gib(m["weights"])}}
    if m := _AVAILABLE_KV.search(text):
        return {"what": "profile", "fields": {"kv_cache": _gib(m["kv_cache"])}}
    if m := _KV_TOKENS.search(text):
        return {"what": "profile", "closes": True, "fields": {"kv_cache_tokens": int(m["tokens"].replace(",", ""))}}
    if m := _VLLM_USAGE.search(text):
        return {"what": "usage", "fields": {"fraction": float(m["pct"]) / 100}}
    if m := _SGL_ALLOC.search(text):
        return {"what": "size", "fields": {"kv_cache": _gib(m["k"]) + _gib(m["v"]), "tokens": int(m["tokens"])}}
    if m := _SGL_USAGE.search(text):
        return {"what": "usage", "fields": {"fraction": float(m["frac"])}}
    s = _SGL_LEAK_SIZES.search(text)
    sizes = {"available_tokens": int(s["avail"]), "total_tokens": int(s["max"])} if s else {}
    if _SGL_LEAK.search(text):
        return {"what": "leak", "fields": sizes}
    if sizes:
        return {"what": "leak_sizes", "fields": sizes}
    return None


def _who(text: str) -> dict:
    out = {}
    if m := _WORKER_PID.search(text):
        out["pid"] = int(m["pid"])
    if (m := _SGL_STAMP.match(text)) and m["tp"]:
        out["rank"] = m["tp"]
    return out


def _stamp(rows: list[dict], src, opts, out: Parsed) -> None:
    """Each record's time from its line's stamp (local, in --tz; vLLM's has no year)."""
    zone = opts.tz_for(src.path)
    parts = []
    for r in rows:
        if m := _SGL_STAMP.match(r["text"]):
            parts.append((int(m["date"][:4]), int(m["date"][5:7]), int(m["date"][8:10]), m["hms"]))
        elif m := _VLLM_STAMP.search(r["text"][:120]):
            parts.append((None, int(m["mo"]), int(m["d"]), m["hms"]))
        else:
            parts.append(None)
    yearless = [i for i, p in enumerate(parts) if p is not None and p[0] is None]
    if yearless:
        guess = clock.syslog_years(pl.Series([parts[i][1] for i in yearless]), pl.Series([parts[i][2] for i in yearless]),
                                   mtime=getattr(src, "mtime", None), year=opts.year, zone=zone)
        for i, y in zip(yearless, guess.years.to_list()):
            parts[i] = (y,) + parts[i][1:]
        out.meta["year_from"] = guess.how
        out.notes.extend(guess.notes)
    naive = []
    for p in parts:
        try:
            naive.append(datetime(p[0], p[1], p[2], *(int(x) for x in p[3].split(":"))) if p else None)
        except (TypeError, ValueError):
            naive.append(None)
    if all(t is None for t in naive):
        return
    local = pl.DataFrame({"t": naive}, schema={"t": pl.Datetime("us")}).select(clock.localize(pl.col("t"), zone))["t"]
    for r, t in zip(rows, local.to_list()):
        r["time"] = t
    out.clock = "wall-yearless" if yearless and opts.year is None else "wall-assumed"


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS),
    files="vLLM and SGLang logs: vLLM's start-up memory profile, `GPU KV cache usage`, SGLang's `token usage` and"
          " `KV cache pool leak detected!`; also inside any other log",
    yields="the memory footprint (weights, non-torch, activation peak, KV cache) as a marker and note, "
           "`kv_cache.used` with the cache's size as capacity, `kv_cache_leak`",
)
