"""generic.extract_generic for a few lines, in plain Python: the same rows from the same regexes.

A job of many one-line logs paid extract_generic's ~27 polars queries twice a file (sniff and read),
and each query's fixed cost is many times the work on a few lines. Below SMALL_LINES lines of plain
ASCII text of bounded length (SQUARED_CHARS), Python's `re` runs each regex of generic.py one line at
a time. On that text the two engines agree on these patterns: leftmost-first alternation and greedy
repeats in both, and without letters outside ASCII `(?i)`, `\\w`, `\\s` and `\\b` mean the same (a
control character other than tab and `\\r`, or a letter outside ASCII, sends the lines to polars).
Clocks go to generic.with_line_time (its DST rule and stamp parser are polars'), on the few lines that
hold one. readings.extract chooses the path; tests/parsers/test_steplog_paths.py holds the paths to the
same rows.

A piece's readings and context are found once, as places in its line (piece_readings, piece_context):
this path cuts the values from each line, shapes.py applies them to every line of a masked shape.
"""
from __future__ import annotations

import math
import re

import polars as pl

from forensics.frames import columns
from forensics.model import Skipped
from forensics.parsers import ranks
from forensics.parsers.steplog import families, general
from forensics.parsers.steplog import generic as g
from forensics.units import unit_factor

# Past this many lines polars' vectorized queries cost less than Python's line-by-line regexes.
SMALL_LINES = 64
# Python's `re` backtracks: a few of these patterns (`[ \t]*[:=]?[ \t]*`) take time quadratic in a
# line's length where it fails, which polars' automata never do. The sum of the lines' squared lengths
# bounds that time (about a tenth of a second at this budget); past it, polars reads the lines.
SQUARED_CHARS = 1 << 22
PLAIN = re.compile(r"[\t\r\x20-\x7e]*")

ANY_READING = re.compile(g.ANY_READING)
NOT_OURS = re.compile(g.NOT_OURS)
GENERIC_HINT = re.compile(g.GENERIC_HINT)
TS_ISO = re.compile(g.TS_ISO)
TS_US = re.compile(g.TS_US)
STEP_MARKER = re.compile(g.STEP_MARKER)
RANK_SPLIT = re.compile(r"(\S)[ \t]*(\[Rank [0-9]+\])")
KEY_PAIR = re.compile(g.KEY_PAIR)
KV = re.compile(g.KV)
MEM_ABBR = re.compile(g.MEM_ABBR)
GPU_USED_TOTAL = re.compile(g.GPU_USED_TOTAL)
TORCH_RAW = re.compile(g.TORCH_RAW)
NVSMI_PRINT = re.compile(g.NVSMI_PRINT)
FREE = re.compile(g.FREE)
TOTAL = re.compile(g.TOTAL)
HEADER_UNIT = re.compile(g.HEADER_UNIT)
LEVEL = re.compile(g.LEVEL)
RANK_HEAD = re.compile(r"^\s*\[Rank [0-9]+\]")
TAG = re.compile(r"\[([^\[\]]+)\][\s|:\-]*$")
PHASE_KEY = re.compile(g.PHASE_KEY)
EPOCH = re.compile(rf"(?i:['\"]?\bepoch['\"]?)[ \t]*[:=][ \t]*({g.NUM})")
STEP_IN_TAG = re.compile(g.STEP_IN_TAG)
DICT_STEP = re.compile(r"['\"](?:global_)?step['\"]\s*:\s*([0-9]+)\b")
DEVICE_IN_TAG = re.compile(g.DEVICE_IN_TAG)
RANK_WORD = re.compile(ranks.RANK_WORD)
LOCAL_WORD = re.compile(ranks.LOCAL_WORD)
DIGITS = re.compile(r"([0-9]+)")
LINE_PREFIX = re.compile(ranks.LINE_PREFIX)
# (the reader's and the sniff's tests of the lines the general reader looks at)
FAMILY_MEMORY_LINES = re.compile(families.FAMILY_MEMORY_LINES)
TABLE_ROW = re.compile(general.TABLE_ROW)
BLOCK_HEAD = re.compile(g.BLOCK_HEAD)

_I64 = 1 << 63
_OUT = {"line": pl.Int64, "piece": pl.Int64, "k": pl.Int64, "time": pl.Datetime("us", "UTC"), "zoned": pl.Boolean,
        "series": pl.String, "bytes": pl.Int64, "total_bytes": pl.Int64, "step": pl.Int64, "label": pl.String,
        "gpu": pl.String, "rank": pl.Int64, "local_rank": pl.Int64, "step_tag": pl.Boolean}


def rows(df: pl.DataFrame | list[tuple[int, str | None]], most: int | None = None
         ) -> list[tuple[int, str | None]] | None:
    """(line, text) of `df` (a frame, or its rows) if the Python path may read it, else None. `most`: the
    lines it may hold (SMALL_LINES unless given; the engines agree line by line, whatever the count)."""
    if len(df) > (SMALL_LINES if most is None else most):
        return None
    out = df if isinstance(df, list) else list(zip(df["line"].to_list(), df["text"].to_list()))
    if sum(len(t) ** 2 for _, t in out if t is not None) > SQUARED_CHARS:
        return None
    if any(t is not None and not PLAIN.fullmatch(t) for _, t in out):
        return None
    return out


def _int(s: str | None) -> int | None:
    """cast(pl.Int64, strict=False) of digits."""
    if s is None:
        return None
    v = int(s)
    return v if -_I64 <= v < _I64 else None


def size_bytes(number: str | None, unit: str | None) -> int | None:
    """units.bytes_expr of one value."""
    if number is None or unit is None:
        return None
    factor = unit_factor(unit)
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


def first(*xs):
    """The first of `xs` that is not None (coalesce)."""
    return next((x for x in xs if x is not None), None)


def _strip_time(text: str, us: bool, iso: bool = True) -> str:
    """generic.strip_line_time of one line."""
    if iso:
        text = TS_ISO.sub("", text, count=1)
    return TS_US.sub("", text, count=1) if us else text


def memory_word(text: str) -> bool:
    """general.candidates of a plain line: an ASCII case-insensitive search for a memory word, or a size over a size."""
    low = text.lower()
    return any(w in low for w in general.MEMORY_WORDS) or _SIZE_OVER_SIZE.search(text) is not None


_SIZE_OVER_SIZE = re.compile(general.SIZE_OVER_SIZE)


def marker_step(text: str) -> int | None:
    """The step of a step-marker line, with its rank prefix and clock (the reader's test of a line that
    only the step marker can keep): generic.STEP_MARKER's number, as an Int64 or None."""
    m = STEP_MARKER.search(_strip_time(LINE_PREFIX.sub("", text, count=1), us=True))
    return None if m is None else _int(m.group(1))


def extract(lines: list[tuple[int, str | None]], zone: str, skipped: Skipped, series_only: bool,
            unitless: list[int] | None, carry: dict | None) -> pl.DataFrame:
    """generic.extract_generic of `lines` (from `rows`)."""
    hint_rx = ANY_READING if series_only else GENERIC_HINT
    hint = sorted(((ln, t) for ln, t in lines if t is not None and hint_rx.search(t) and not NOT_OURS.search(t)),
                  key=lambda r: r[0])
    if not hint:
        return pl.DataFrame()
    reading = [ANY_READING.search(t) is not None for _, t in hint]
    if series_only:
        marker_step, times, zoned = [None] * len(hint), [None] * len(hint), [None] * len(hint)
    else:
        marker_step = _markers(hint, reading, carry)
        if not any(reading):
            return pl.DataFrame()
        times, zoned = _times(hint, zone)
    pieces = _pieces(hint, reading)
    readings = _readings(pieces)
    if not readings:
        return pl.DataFrame()
    ctx = {}   # piece index -> its context (header_unit first)
    for j in sorted({r[0] for r in readings}):
        x = pieces[j][2]
        if series_only:   # (a header unit is the only context that decides whether a reading counts)
            hu = HEADER_UNIT.search(x)
            ctx[j] = (hu.group(1) if hu else None,)
        else:
            ctx[j] = _context(x)
    r = []   # the readings with their unit and bytes (extract_generic's `r`)
    for j, k, series, num, total, unit, gpu_arg, default_unit in readings:
        unit = first(unit, ctx[j][0], default_unit)
        r.append((j, k, series, unit, size_bytes(num, unit), size_bytes(total, unit), gpu_arg))

    def line_of(x) -> int:
        return hint[pieces[x[0]][0]][0]

    r = _checked(r, line_of, skipped, unitless)
    if series_only:
        return columns({"line": [line_of(x) for x in r], "series": [x[2] for x in r]},
                       {"line": pl.Int64, "series": pl.String})
    out = {c: [] for c in _OUT}
    for j, k, series, unit, value, total_bytes, gpu_arg in r:
        i, piece, _ = pieces[j]
        _, label, tag_step, tag_gpu, rank, local, piece_total = ctx[j]
        for c, v in (("line", hint[i][0]), ("piece", piece), ("k", k), ("time", times[i]), ("zoned", zoned[i]),
                     ("series", series), ("bytes", value), ("total_bytes", first(total_bytes, piece_total)),
                     ("step", first(tag_step, marker_step[i])), ("label", label), ("gpu", first(gpu_arg, tag_gpu)),
                     ("rank", rank), ("local_rank", local), ("step_tag", tag_step is not None)):
            out[c].append(v)
    return pl.DataFrame([pl.Series(c, out[c], pl.Int64).cast(t) if c == "time" else pl.Series(c, out[c], t)
                         for c, t in _OUT.items()])


def _markers(hint: list[tuple[int, str]], reading: list[bool], carry: dict | None) -> list[int | None]:
    """Each hint line's step marker, forward filled (extract_generic's marker_step); `carry` as there."""
    us = any("/" in t for _, t in hint)
    marker_step = []
    for (_, t), r in zip(hint, reading):
        m = None if r else STEP_MARKER.search(_strip_time(t, us))
        marker_step.append(_int(m.group(1)) if m else None)
    last = [i for i, st in enumerate(marker_step) if st is not None]
    if carry is not None and last:
        ln, t = hint[last[-1]]
        carry["line"] = columns({"line": [ln], "text": [t]}, {"line": pl.Int64, "text": pl.String})
    last_step = None
    for i, st in enumerate(marker_step):   # forward fill
        last_step = st if st is not None else last_step
        marker_step[i] = last_step
    return marker_step


def _times(hint: list[tuple[int, str]], zone: str) -> tuple[list, list]:
    """Each hint line's time (µs since the epoch, UTC: a column of Python datetimes with a zone costs
    two queries to make) and zoned flag: generic.with_line_time, where a line may hold a clock."""
    if not any(g.ISO_DATE_ANYWHERE.search(t) or "/" in t for _, t in hint):
        return [None] * len(hint), [None] * len(hint)
    timed = g.with_line_time(pl.DataFrame({"line": [ln for ln, _ in hint], "text": [t for _, t in hint]},
                                          schema={"line": pl.Int64, "text": pl.String}), zone)
    return timed["time"].cast(pl.Int64).to_list(), timed["zoned"].to_list()


def _pieces(hint: list[tuple[int, str]], reading: list[bool]) -> list[tuple[int, int, str]]:
    """generic._pieces of the reading lines: (hint index, piece number, text)."""
    rd = [i for i, r in enumerate(reading) if r]
    texts = [hint[i][1] for i in rd]
    slash = any("/" in t for t in texts)
    iso = any(g.ISO_DATE_ANYWHERE.search(t) for t in texts)
    rank_split = any("[Rank " in t for t in texts)
    pieces = []
    for i, t in zip(rd, texts):
        body = _strip_time(t, slash, iso).replace("\r", "\n")
        if rank_split:
            body = RANK_SPLIT.sub(r"\1\n\2", body)
        if slash:
            body = KEY_PAIR.sub(r"\g<k1>: \g<n1>\g<u1>, \g<k2>: \g<n2>\g<u2>", body)
        pieces.extend((i, p, x) for p, x in enumerate(body.split("\n")))
    return pieces


def _cut(text: str, place: tuple[int, int] | None) -> str | None:
    return None if place is None else text[place[0]:place[1]]


def _readings(pieces: list[tuple[int, int, str]]) -> list[tuple]:
    """generic._readings: (piece index, k, series, num, total, unit, gpu_arg, default_unit), in its order
    (piece_readings of each line's pieces, each regex's readings after the previous one's)."""
    rows = []
    start = 0
    while start < len(pieces):   # (a line's pieces, each read from its own start)
        end = start + 1
        while end < len(pieces) and pieces[end][0] == pieces[start][0]:
            end += 1
        texts = [x for _, _, x in pieces[start:end]]
        for r in piece_readings([(0, x) for x in texts]):
            x = texts[r["piece"]]
            rows.append((r["part"], start + r["piece"], r["k"], r["series"], _cut(x, r["num"]), _cut(x, r["total"]),
                         r["unit"], _cut(x, r["gpu"]), r["default_unit"]))
        start = end
    return [r[1:] for r in sorted(rows, key=lambda r: r[:3])]


def _context(x: str) -> tuple:
    """piece_context of one piece, its values cut out: header_unit, label, tag_step, tag_gpu, rank,
    local rank, piece_total."""
    c = piece_context(0, x)
    label = _cut(x, c["label"])
    return (c["header_unit"], label if label is None else (c["label_prefix"] or "") + label,
            _int(_cut(x, c["step"])), _cut(x, c["tag_gpu"]), _int(_cut(x, c["rank"])), _int(_cut(x, c["local"])),
            size_bytes(_cut(x, c["ptotal"]), c["ptotal_unit"]))


def span(m, group, base: int) -> tuple[int, int] | None:
    """The place of `group` of match `m` in the line, `m` run on the line's text from `base`."""
    if m is None or m.group(group) is None:
        return None
    a, b = m.span(group)
    return base + a, base + b


def _stripped(text: str, base: int, chars: str | None = None) -> tuple[int, int]:
    """The place of text.strip(chars), `text` starting at `base`."""
    left = len(text) - len(text.lstrip(chars))
    return base + left, base + left + len(text.strip(chars))


def piece_readings(pieces: list[tuple[int, str]]) -> list[dict]:
    """generic._readings of one line's pieces, (start in the line, text) each: a row a reading, its
    regex (`part`: extract_generic reads each regex's readings after the previous one's), piece, k,
    series, unit and default unit as read, its number, total and GPU as places in the line. The one
    reading of the generic shapes: this path cuts the values from its lines, shapes.py from all the
    lines of a shape."""
    rows = []
    for j, (base, x) in enumerate(pieces):
        for k, m in enumerate(KV.finditer(x)):
            d = KV.search(m.group(0))   # (extract_groups of the match, as generic._all_matches)
            at = base + m.start()
            rows.append(dict(part=0, piece=j, k=k, series=g.series_of_key(d["key"]), num=span(d, "num", at),
                             total=span(d, "total", at), unit=first(d["unit"], d["punit"]), gpu=None,
                             default_unit=None))
    low = "\n".join(x for _, x in pieces).lower()
    if "mem_" in low:
        for j, (base, x) in enumerate(pieces):
            for k, m in enumerate(MEM_ABBR.finditer(x)):
                d = MEM_ABBR.search(m.group(0))
                rows.append(dict(part=1, piece=j, k=200 + k,
                                 series="allocated" if "alloc" in d["key"].lower() else "reserved",
                                 num=span(d, "num", base + m.start()), total=None, unit=d["unit"], gpu=None,
                                 default_unit=None))

    def single(rx, word: str, part: int, k: int, read) -> None:
        if word in low:
            for j, (base, x) in enumerate(pieces):
                m = rx.search(x)
                if m:
                    rows.append(dict(part=part, piece=j, k=k, **read(m, base)))

    def dev_digits(m, base):
        d = DIGITS.search(m.group("dev"))
        return None if d is None else (base + m.start("dev") + d.start(), base + m.start("dev") + d.end())

    single(GPU_USED_TOTAL, "gpu", 2, 100, lambda m, b: dict(
        series="reserved", num=span(m, "num", b), total=span(m, "total", b), unit=m["unit"], gpu=None,
        default_unit=None))
    single(TORCH_RAW, "torch.cuda.", 3, 101, lambda m, b: dict(
        series=("max_" if m["max"] is not None else "") + ("reserved" if m["kind"] == "cached" else m["kind"]),
        num=span(m, "num", b), total=None, unit="B", gpu=dev_digits(m, b), default_unit=None))
    single(NVSMI_PRINT, "nvidia-smi", 4, 102, lambda m, b: dict(
        series="memory.used", num=span(m, "num", b), total=None, unit=m["punit"], gpu=span(m, "dev", b),
        default_unit=None))
    single(FREE, "free", 5, 103, lambda m, b: dict(
        series="free", num=span(m, "num", b), total=None, unit=first(m["unit"], m["punit"]), gpu=None,
        default_unit="MiB"))
    return rows


_CHECKS = {  # generic.checked's, in the order they are counted: on (piece, k, series, unit, bytes, ...)
    "memory value without a unit": lambda x: x[2] is not None and x[3] is None,
    "memory value out of range": lambda x: x[2] is not None and x[3] is not None and x[4] is None,
    "negative memory value": lambda x: x[4] is not None and x[4] < 0,
    "unknown memory key": lambda x: x[2] is None,
}


def _checked(r: list[tuple], line_of, skipped: Skipped, unitless: list[int] | None) -> list[tuple]:
    """generic.checked of the readings `r`: the failed ones counted as skipped, or left in `unitless`."""
    failed = {why: any(c(x) for x in r) for why, c in _CHECKS.items()}
    if unitless is not None and failed["memory value without a unit"]:
        every = {}
        for x in r:
            ln = line_of(x)
            every[ln] = every.get(ln, True) and _CHECKS["memory value without a unit"](x)
        left = [ln for ln, all_ in every.items() if all_]
        unitless.extend(left)
        r = [x for x in r if line_of(x) not in left]
    for why, check in _CHECKS.items():
        if failed[why]:
            skipped.add_lines(why, list(dict.fromkeys(line_of(x) for x in r if check(x))))
    if any(failed.values()):
        r = [x for x in r if x[2] is not None and x[4] is not None and x[4] >= 0]
    return r


def piece_context(base: int, x: str) -> dict:
    """generic._piece_context of one piece (`x`, starting at `base` in its line), as places in the line."""
    hu = HEADER_UNIT.search(x)
    a = ANY_READING.search(x).start()
    lv = LEVEL.match(x[:a])   # (anchored: the sub removes a prefix)
    pre_at = lv.end() if lv else 0
    pre = x[pre_at:a]
    rh = RANK_HEAD.match(pre)
    clean_at = pre_at + (rh.end() if rh else 0)
    clean = pre[rh.end() if rh else 0:].strip(" \t|:,;-=>")
    tag = TAG.search(pre)
    epoch = EPOCH.search(x)
    phase = PHASE_KEY.search(x)
    prefix = None
    if phase is not None:
        label = span(phase, 1, base)
    elif tag is not None:
        label = _stripped(tag.group(1), base + pre_at + tag.start(1))
    elif 0 < len(clean) <= 60 and not clean.startswith("{"):
        label = _stripped(pre[rh.end() if rh else 0:], base + clean_at, " \t|:,;-=>")
    elif epoch is not None:
        prefix, label = "epoch ", span(epoch, 1, base)
    else:
        label = None
    sm, ds = STEP_IN_TAG.search(pre), DICT_STEP.search(x)
    step = first(span(sm, 1, base + pre_at), span(sm, 2, base + pre_at), span(ds, 1, base))
    dm = DEVICE_IN_TAG.search(pre)
    rw, lw = RANK_WORD.search(pre), LOCAL_WORD.search(pre)
    tm = TOTAL.search(x)
    return dict(header_unit=hu.group(1) if hu else None, label=label, label_prefix=prefix, step=step,
                tag_gpu=first(*(span(dm, i, base + pre_at) for i in (1, 2, 3))) if dm else None,
                rank=first(span(rw, 1, base + pre_at), span(rw, 2, base + pre_at)) if rw else None,
                local=span(lw, 1, base + pre_at), ptotal=span(tm, "num", base),
                ptotal_unit=first(tm["unit"], tm["punit"]) if tm else None)
