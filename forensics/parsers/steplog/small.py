"""generic.extract_generic for a few lines, in plain Python: the same rows from the same regexes.

A job of many one-line logs pays extract_generic's ~27 polars queries twice a file (sniff and read),
and each query's fixed cost is many times the work on a few lines. Below SMALL_LINES lines of plain
ASCII text of bounded length (SQUARED_CHARS), Python's `re` runs each regex of generic.py one line at a time. On that text the two
engines agree on these patterns: leftmost-first alternation and greedy repeats in both, and without
letters outside ASCII `(?i)`, `\\w`, `\\s` and `\\b` mean the same (a control character other than tab
and `\\r`, or a letter outside ASCII, sends the lines to polars). Clocks go to generic.with_line_time
(its DST rule and stamp parser are polars'), on the few lines that hold one.
tests/parsers/test_steplog_small.py holds the two paths to the same rows.
"""
from __future__ import annotations

import math
import re

import polars as pl

from forensics.model import Skipped
from forensics.parsers import ranks
from forensics.parsers.steplog import generic as g
from forensics.units import _FACTORS

# Past this many lines polars' vectorized queries cost less than Python's line-by-line regexes.
SMALL_LINES = 64
# Python's `re` backtracks: a few of these patterns (`[ \t]*[:=]?[ \t]*`) take time quadratic in a
# line's length where it fails, which polars' automata never do. The sum of the lines' squared lengths
# bounds that time (about a tenth of a second at this budget); past it, polars reads the lines.
SQUARED_CHARS = 1 << 22
_PLAIN = re.compile(r"[\t\r\x20-\x7e]*")

_ANY_READING = re.compile(g.ANY_READING)
_NOT_OURS = re.compile(g.NOT_OURS)
_GENERIC_HINT = re.compile(g.GENERIC_HINT)
_TS_ISO = re.compile(g.TS_ISO)
_TS_US = re.compile(g.TS_US)
_STEP_MARKER = re.compile(g.STEP_MARKER)
_RANK_SPLIT = re.compile(r"(\S)[ \t]*(\[Rank [0-9]+\])")
_KEY_PAIR = re.compile(g.KEY_PAIR)
_KV = re.compile(g.KV)
_MEM_ABBR = re.compile(g.MEM_ABBR)
_GPU_USED_TOTAL = re.compile(g.GPU_USED_TOTAL)
_TORCH_RAW = re.compile(g.TORCH_RAW)
_NVSMI_PRINT = re.compile(g.NVSMI_PRINT)
_FREE = re.compile(g.FREE)
_TOTAL = re.compile(g.TOTAL)
_HEADER_UNIT = re.compile(g._HEADER_UNIT)
_LEVEL = re.compile(g._LEVEL)
_RANK_HEAD = re.compile(r"^\s*\[Rank [0-9]+\]")
_TAG = re.compile(r"\[([^\[\]]+)\][\s|:\-]*$")
_EPOCH = re.compile(rf"(?i:['\"]?\bepoch['\"]?)[ \t]*[:=][ \t]*({g.NUM})")
_STEP_IN_TAG = re.compile(g.STEP_IN_TAG)
_DICT_STEP = re.compile(r"['\"](?:global_)?step['\"]\s*:\s*([0-9]+)\b")
_DEVICE_IN_TAG = re.compile(g.DEVICE_IN_TAG)
_RANK_WORD = re.compile(ranks.RANK_WORD)
_LOCAL_WORD = re.compile(ranks.LOCAL_WORD)
_DIGITS = re.compile(r"([0-9]+)")

_I64 = 1 << 63
_OUT = {"line": pl.Int64, "piece": pl.Int64, "k": pl.Int64, "time": pl.Datetime("us", "UTC"), "zoned": pl.Boolean,
        "series": pl.String, "bytes": pl.Int64, "total_bytes": pl.Int64, "step": pl.Int64, "label": pl.String,
        "gpu": pl.String, "rank": pl.Int64, "local_rank": pl.Int64, "step_tag": pl.Boolean}


def rows(df: pl.DataFrame) -> list[tuple[int, str | None]] | None:
    """(line, text) of `df` if the Python path may read it, else None."""
    if df.height > SMALL_LINES:
        return None
    out = list(zip(df["line"].to_list(), df["text"].to_list()))
    if sum(len(t) ** 2 for _, t in out if t is not None) > SQUARED_CHARS:
        return None
    if any(t is not None and not _PLAIN.fullmatch(t) for _, t in out):
        return None
    return out


def _int(s: str | None) -> int | None:
    """cast(pl.Int64, strict=False) of digits."""
    if s is None:
        return None
    v = int(s)
    return v if -_I64 <= v < _I64 else None


def _bytes(number: str | None, unit: str | None) -> int | None:
    """units.bytes_expr of one value."""
    if number is None or unit is None:
        return None
    factor = _FACTORS.get(unit.strip().lower())
    if factor is None:
        return None
    try:
        x = float(number.replace(",", "").strip()) * factor
    except ValueError:
        return None
    if not math.isfinite(x):
        return None
    v = round(x)   # (half to even, as polars' round)
    return v if -_I64 <= v < _I64 else None


def _first(*xs):
    return next((x for x in xs if x is not None), None)


def _strip_time(text: str, us: bool, iso: bool = True) -> str:
    """generic.strip_line_time of one line."""
    if iso:
        text = _TS_ISO.sub("", text, count=1)
    return _TS_US.sub("", text, count=1) if us else text


def extract(lines: list[tuple[int, str | None]], zone: str, skipped: Skipped, series_only: bool,
            unitless: list[int] | None, carry: dict | None) -> pl.DataFrame:
    """generic.extract_generic of `lines` (from `rows`)."""
    hint_rx = _ANY_READING if series_only else _GENERIC_HINT
    hint = sorted(((ln, t) for ln, t in lines if t is not None and hint_rx.search(t) and not _NOT_OURS.search(t)),
                  key=lambda r: r[0])
    if not hint:
        return pl.DataFrame()
    reading = [_ANY_READING.search(t) is not None for _, t in hint]
    marker_step: list[int | None] = []
    times: list = [None] * len(hint)
    zoned: list = [None] * len(hint)
    if not series_only:
        us = any("/" in t for _, t in hint)
        for (ln, t), r in zip(hint, reading):
            m = None if r else _STEP_MARKER.search(_strip_time(t, us))
            marker_step.append(_int(m.group(1)) if m else None)
        if carry is not None:
            last = [i for i, s in enumerate(marker_step) if s is not None]
            if last:
                ln, t = hint[last[-1]]
                carry["line"] = pl.DataFrame({"line": [ln], "text": [t]}, schema={"line": pl.Int64, "text": pl.String})
        if not any(reading):
            return pl.DataFrame()
        if any(g._ISO_DATE_ANYWHERE.search(t) or "/" in t for _, t in hint):   # (else no line has a clock)
            timed = g.with_line_time(pl.DataFrame({"line": [ln for ln, _ in hint], "text": [t for _, t in hint]},
                                                  schema={"line": pl.Int64, "text": pl.String}), zone)
            times, zoned = timed["time"].to_list(), timed["zoned"].to_list()
        last_step = None
        for i, s in enumerate(marker_step):   # forward fill
            last_step = s if s is not None else last_step
            marker_step[i] = last_step
    else:
        marker_step = [None] * len(hint)

    # _pieces
    rd = [i for i, r in enumerate(reading) if r]
    texts = [hint[i][1] for i in rd]
    slash = any("/" in t for t in texts)
    iso = any(g._ISO_DATE_ANYWHERE.search(t) for t in texts)
    rank_split = any("[Rank " in t for t in texts)
    pieces = []   # (hint index, piece number, text)
    for i, t in zip(rd, texts):
        body = _strip_time(t, slash, iso).replace("\r", "\n")
        if rank_split:
            body = _RANK_SPLIT.sub(r"\1\n\2", body)
        if slash:
            body = _KEY_PAIR.sub(r"\g<k1>: \g<n1>\g<u1>, \g<k2>: \g<n2>\g<u2>", body)
        pieces.extend((i, p, x) for p, x in enumerate(body.split("\n")))

    # _readings: (piece index, k, series, num, total, unit, gpu_arg, default_unit), in generic's order
    readings = []
    for j, (_, _, x) in enumerate(pieces):
        for k, m in enumerate(_KV.finditer(x)):
            d = _KV.search(m.group(0)).groupdict()   # (extract_groups of the match, as _all_matches)
            readings.append((j, k, g._series_of_key(d["key"]), d["num"], d["total"], _first(d["unit"], d["punit"]),
                             None, None))
    low = "\n".join(x for _, _, x in pieces).lower()
    if "mem_" in low:
        for j, (_, _, x) in enumerate(pieces):
            for k, m in enumerate(_MEM_ABBR.finditer(x)):
                d = _MEM_ABBR.search(m.group(0)).groupdict()
                readings.append((j, 200 + k, "allocated" if "alloc" in d["key"].lower() else "reserved", d["num"],
                                 None, d["unit"], None, None))

    def single(rx: re.Pattern, word: str, k: int, read) -> None:
        if word not in low:
            return
        for j, (_, _, x) in enumerate(pieces):
            m = rx.search(x)
            if m:
                readings.append((j, k, *read(m.groupdict())))

    single(_GPU_USED_TOTAL, "gpu", 100, lambda d: ("reserved", d["num"], d["total"], d["unit"], None, None))
    single(_TORCH_RAW, "torch.cuda.", 101,
           lambda d: (("max_" if d["max"] is not None else "") + ("reserved" if d["kind"] == "cached" else d["kind"]),
                      d["num"], None, "B", _first(*_DIGITS.findall(d["dev"])[:1]), None))
    single(_NVSMI_PRINT, "nvidia-smi", 102, lambda d: ("memory.used", d["num"], None, d["punit"], d["dev"], None))
    single(_FREE, "free", 103, lambda d: ("free", d["num"], None, _first(d["unit"], d["punit"]), None, "MiB"))
    if not readings:
        return pl.DataFrame()

    ctx = {}   # piece index -> its context (header_unit first)
    for j in sorted({r[0] for r in readings}):
        x = pieces[j][2]
        hu = _HEADER_UNIT.search(x)
        ctx[j] = (hu.group(1) if hu else None,) + (() if series_only else _context(x))

    # the readings with their unit, bytes and checks (extract_generic's `r`)
    r = []
    for j, k, series, num, total, unit, gpu_arg, default_unit in readings:
        unit = _first(unit, ctx[j][0], default_unit)
        r.append((j, k, series, unit, _bytes(num, unit), _bytes(total, unit), gpu_arg))
    checks = {
        "memory value without a unit": lambda x: x[2] is not None and x[3] is None,
        "memory value out of range": lambda x: x[2] is not None and x[3] is not None and x[4] is None,
        "negative memory value": lambda x: x[4] is not None and x[4] < 0,
        "unknown memory key": lambda x: x[2] is None,
    }
    failed = {why: any(c(x) for x in r) for why, c in checks.items()}

    def line_of(x) -> int:
        return hint[pieces[x[0]][0]][0]

    if unitless is not None and failed["memory value without a unit"]:
        every = {}
        for x in r:
            ln = line_of(x)
            every[ln] = every.get(ln, True) and checks["memory value without a unit"](x)
        left = [ln for ln, all_ in every.items() if all_]
        unitless.extend(left)
        r = [x for x in r if line_of(x) not in left]
    for why, check in checks.items():
        if failed[why]:
            skipped.add_lines(why, list(dict.fromkeys(line_of(x) for x in r if check(x))))
    if any(failed.values()):
        r = [x for x in r if x[2] is not None and x[4] is not None and x[4] >= 0]
    if series_only:
        return pl.DataFrame({"line": [line_of(x) for x in r], "series": [x[2] for x in r]},
                            schema={"line": pl.Int64, "series": pl.String})
    out = {c: [] for c in _OUT}
    for j, k, series, unit, value, total_bytes, gpu_arg in r:
        i, piece, _ = pieces[j]
        _, label, tag_step, tag_gpu, rank, local, piece_total = ctx[j]
        for c, v in (("line", hint[i][0]), ("piece", piece), ("k", k), ("time", times[i]), ("zoned", zoned[i]),
                     ("series", series), ("bytes", value), ("total_bytes", _first(total_bytes, piece_total)),
                     ("step", _first(tag_step, marker_step[i])), ("label", label), ("gpu", _first(gpu_arg, tag_gpu)),
                     ("rank", rank), ("local_rank", local), ("step_tag", tag_step is not None)):
            out[c].append(v)
    return pl.DataFrame(out, schema=_OUT)


def _context(t: str) -> tuple:
    """generic._piece_context of one piece: label, tag_step, tag_gpu, rank, local rank, piece_total."""
    pre = _LEVEL.sub("", t[:_ANY_READING.search(t).start()], count=1)
    clean = _RANK_HEAD.sub("", pre, count=1).strip(" \t|:,;-=>")
    tag = _TAG.search(pre)
    epoch = _EPOCH.search(t)
    if tag is not None:
        label = tag.group(1).strip()
    elif 0 < len(clean) <= 60 and not clean.startswith("{"):
        label = clean
    elif epoch is not None:
        label = "epoch " + epoch.group(1)
    else:
        label = None
    sm, ds = _STEP_IN_TAG.search(pre), _DICT_STEP.search(t)
    tag_step = _int(_first(*(sm.groups() if sm else ()), ds.group(1) if ds else None))
    dm = _DEVICE_IN_TAG.search(pre)
    rw, lw = _RANK_WORD.search(pre), _LOCAL_WORD.search(pre)
    tm = _TOTAL.search(t)
    piece_total = _bytes(tm["num"], _first(tm["unit"], tm["punit"])) if tm else None
    return (label, tag_step, _first(*dm.groups()) if dm else None,
            _int(_first(*rw.groups())) if rw else None, _int(lw.group(1)) if lw else None, piece_total)
