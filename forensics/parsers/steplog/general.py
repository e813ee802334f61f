"""The general reader of memory lines in free text: any training script's print, read by the line's
structure instead of one pattern per style (docs/formats.md, "General memory lines").

A line is a clock prefix, then text in which numbers stand after keys: `key=value`, `key: value`,
`Key value`, `'key': value` (a Python or JSON dict), `| mem allocated 12 MiB reserved 20 MiB`. A number
is a memory quantity when its key holds a memory word (MEMORY_WORDS) and it has a size unit: its own
(`1.2GB`, `3.71G`, `1234 MiB`), its key's (`mem_gb`, `allocated (MiB)`, `bytes_in_use`) or one a
framework's source documents for that key (documented.py). A table whose header names a memory column
(ultralytics' `GPU_mem`) gives its rows' column the same way. Counters (`step`, `iter`, `it`,
`global_step`, `Epoch [e/E], Step [s/S]`), a phase (`before forward`, `after step`, `phase: post_forward`),
a GPU (`cuda:1`, `GPU 1`) and rank words come from the same line.

Speed: a line's *shape* is its text with every digit run replaced by `0`; the lines of one shape have
the same keys at the same places, so each shape is analysed once in Python (`plan_line`, on its first
line). The lines are grouped by the finer mask of each digit (one pass): the lines of one such mask have
every number (the n-th number of the line) at the same bytes, found once in Python, and the values are
then cut out of all its lines at once with polars. Only lines holding a memory word (a literal search)
are looked at.

A series is kept only if its line form (its keys, units and clock layout) recurs in the file: a
one-off sentence that names memory is counted as skipped, as is a memory key whose number has no unit.
The phase goes into the samples' `label` (each label is a series of its own).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

import polars as pl

from forensics import clock
from forensics.frames import masked_digits
from forensics.model import Skipped
from forensics.parsers import ranks
from forensics.parsers.steplog.counters import NUM, bar_end, epoch_steps, lead_number, lead_steps, read_counters
from forensics.parsers.steplog.documented import TORCH_API, documented
from forensics.parsers.steplog.generic import PHASE_KEY, block_heads, block_steps

# A number as both polars and Python's re find it (no lookaround: the same matches in both engines).
_NUM_RE = re.compile(NUM)
_NUM_BYTES = re.compile(NUM.encode())
_RUNS = re.compile("0+")   # (in a digit mask: each run of digits)

# Lines worth a look hold one of these (any case): a literal search, no regex; or a size over a size
# (SIZE_OVER_SIZE, whose key may name no memory: _capacity_pairs)
MEMORY_WORDS = ["mem", "alloc", "reserv", "cache", "used", "free", "total", "peak", "vram", "in_use", "usage", "gpu"]

_UNIT_FACTORS = {"b": 1, "byte": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
                 "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
                 "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
# a unit right after a number (`1.2GB`, `3.71G`, `1234 MiB`, `12 bytes`, YOLOX's `6736Mb`: no training
# log prints bits); `%` marks a share, not a size
_VALUE_UNIT = re.compile(r"[ \t]?([KMGT]i?B|[KMGTkmgt]i?b|[KMGT]|[Bb]ytes|B|%)(?![A-Za-z])")
# a unit in brackets after a key: `allocated (MiB)`, `[in GB]`, and VISSL's `peak_mem(M)` (a unit letter alone,
# as after a number: detectron2's `max_mem: 14728M`)
_KEY_PAREN_UNIT = re.compile(r"[\(\[](?:in[ \t]+)?([KMGT]i?B|[kmgt]i?b|[KMGT]|[Bb]ytes|B)[\)\]]")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.\-/ ]*")
# the key right before a number: the last words of the text since the previous number
_KEY_AT_END = re.compile(r"[A-Za-z][A-Za-z0-9_.\-/ ]*(?:[ \t]*\([^()]*\))?$")

# Blanks aligning a colon in a report (`Used                 : 1234 MiB`, nvidia-smi -q): a report's row,
# another parser's business, not a print of the training loop
_ALIGNED = re.compile(r"[A-Za-z)][ \t]{2,}:[ \t]*$")

# What a memory key names. Words outside the GPU's memory (host RAM, CPU) or not a size make no reading;
# `cudaMalloc retries`, `Cuda Malloc retires : 0` count calls of the allocator, not bytes; a logger's source
# location (`[/cache/verl/workers/megatron_workers.py:103]`) is a file, not a key; a size after `to free`,
# `to allocate`, `to reserve` is an amount asked for (Forge's `Trying to free 5797.46 MB for cuda:0`,
# PyTorch's `Tried to allocate 20.00 MiB`), not what the device holds.
_NOT_SIZE = re.compile(r"cpu|host|\bram\b|rss|swap|disk|util|percent|frac|ratio|time|speed|throughput|num|count"
                       r"|frag|tokens|samples|param|loss|\blr\b|grad|clock|temp|power|bandwidth|\bbw\b|per[ _]sec"
                       r"|malloc|retr|\bto (?:free|alloc|reserv)|\.(?:py|cc|cpp|cu|h|rs|go|java)$")
# a host allocator or the CPU named before a colon ahead of a key (`tcmalloc: large alloc 1151959040 bytes`,
# `CPU: used 3 GB`): who prints it, and its sizes are the host's
_HOST_SCOPE = re.compile(r"(?i)\b[a-z]*(?:cpu|host|\bram\b|rss|swap|malloc)[\w.\-]*[ \t]*:[ \t]*$")
# (a key that is the device alone, `GPU: 7.9GB`, names its memory: DEVICE_KEY)
_WORD = re.compile(r"alloc|reserv|cache|\bused\b|usage|\bfree\b|total|peak|\bmem\b|memory|vram|in[ _]use|limit"
                   r"|capacity|max[ _]?mem|gpu[ _]?mem|^gpu$")
# the key of a dict whose sizes are the host's (`cpu_memory: {`, `"host": {`)
_HOST_DICT = re.compile(r"(?i)(?:cpu|host|\bram\b|rss|swap|system)[\w .\-]*['\"]?[ \t]*[:=]?[ \t]*$")
# A key that names only the device is its memory when a size unit says so (`start: GPU: 6.761GB CPU: …`);
# without one it is the device's index or count (`GPU: 0`), neither memory nor a line to count as unread.
DEVICE_KEY = re.compile(r"(?i)gpu")
# A line tagged as a memory print (`[MEM] after init: current=6.19GB  peak_since_reset=6.19GB`): a size
# under any key that names nothing else is memory (memory.used, the key not saying which)
MEMORY_TAG = re.compile(r"(?i)\[(?:mem|memory|vram|(?:gpu|cuda)[ _-]?mem(?:ory)?)\]")

# a phase: `before forward`, `after optimizer step`, `after model load`, `while training` (one or two
# words after it, an article aside: `before entering the train`)
_PHASE = re.compile(r"(?i)\b(before|after|while|during|start of|end of)[ \t]+(?:the[ \t]+)?"
                    r"([A-Za-z_]+(?:[ \t]+(?:the[ \t]+)?[A-Za-z_]+)?)")
# a key naming the phase, whose value is a word (`phase: post_forward`): the phase as written
_PHASE_KEY = re.compile(PHASE_KEY)
_GPU = re.compile(r"(?i)(?:\bcuda:|\bgpu[ _#]?|\bdevice[ \t]*[:=#]?[ \t]*)(" + NUM + r")\b")

# Clock layouts at the start of a line, as Python's re reads one line of a shape (`_plan`) and as
# polars reads every line of that shape (`_times`); year-less ones take their year as syslog does.
# a logger's name or a rank in brackets may stand before the clock (torchtitan's `[titan] 2025-06-16 22:30:48,735`,
# `[RANK 3] 2025-…`) or a level word (vLLM's `INFO 05-06 10:00:00 [monitor.py:57]`)
_TAG = r"(?:\[[A-Za-z_][A-Za-z0-9_.\-]*(?:[ ][0-9]{1,6})?\][ \t]*|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[ \t]+)?"
_LAYOUTS = {
    # Python logging with or without ms, ISO with T and a zone, `[2024-05-01 10:00:00 TP0]`, loguru
    "iso": r"^[ \t]*" + _TAG + r"\[?(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[T ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})"
           r"(?:[.,](?P<frac>[0-9]{1,9}))?(?P<zone>Z|[ ]?[+-][0-9]{2}:?[0-9]{2}\b)?(?:[ \t]+TP[0-9]+)?\]?",
    # `%Y/%m/%d %H:%M:%S` (mmengine's default clock)
    "ymd_slash": r"^[ \t]*" + _TAG + r"\[?(?P<date>[0-9]{4}/[0-9]{2}/[0-9]{2})[ ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})"
                 r"(?:[.,](?P<frac>[0-9]{1,9}))?(?P<zone>Z|[ ]?[+-][0-9]{2}:?[0-9]{2}\b)?\]?",
    "us": r"^[ \t]*" + _TAG + r"\[?(?P<mon>[0-9]{2})/(?P<day>[0-9]{2})/(?P<year>[0-9]{4})[ ,]+(?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})"
          r"(?:[.,](?P<frac>[0-9]{1,9}))?\]?",
    # `%m/%d %H:%M:%S` (no year; mmengine, detectron2)
    "md_slash": r"^[ \t]*" + _TAG + r"\[?(?P<mon>[0-9]{2})/(?P<day>[0-9]{2})[ ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})"
                r"(?:[.,](?P<frac>[0-9]{1,9}))?\]?",
    # `%m-%d %H:%M:%S` (no year)
    "md": r"^[ \t]*" + _TAG + r"\[?(?P<mon>[0-9]{2})-(?P<day>[0-9]{2})[ ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?\]?",
    # glog `I0506 10:00:00.123456` (no year)
    "glog": r"^[ \t]*" + _TAG + r"[IWEF](?P<mon>[0-9]{2})(?P<day>[0-9]{2})[ ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<frac>[0-9]{1,9}))?",
    # syslog `May  6 10:00:00` (no year)
    "syslog": r"^[ \t]*" + _TAG + r"(?P<mname>[A-Z][a-z]{2})[ ]{1,2}(?P<day>[0-9]{1,2})[ ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})",
}
_LAYOUT_RES = {k: re.compile(v) for k, v in _LAYOUTS.items()}
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                       "Nov", "Dec"), 1)}
YEARLESS = ("md", "md_slash", "glog", "syslog")


# the same reason as the generic shapes' (generic.py), so one count tells all such lines
UNITLESS = "memory value without a unit"
NEGATIVE = "negative memory value"


@dataclass(frozen=True)
class Reading:
    idx: int            # which number of the line
    series: str
    factor: int
    key: str            # as written, for the notes
    unit: str           # as written ('' for a unit from the key or a documented one)
    total_idx: int | None = None
    source: str | None = None   # the framework source that gives its meaning (Documented, TORCH_API)
    label: str | None = None    # its key, where another key of its line names the same figure


@dataclass
class Plan:
    """What one shape's lines hold."""
    layout: str | None = None
    readings: list[Reading] = field(default_factory=list)
    step_idx: int | None = None
    epoch_idx: int | None = None
    steps_per_epoch_idx: int | None = None
    lead_idx: int | None = None   # a bare whole number opening the line: its form's step if it counts (lead_steps)
    gpu_idx: int | None = None
    phase: str | None = None
    unread: list[str] = field(default_factory=list)   # memory keys whose number has no unit
    negative: list[str] = field(default_factory=list)  # memory keys with a signed number (no size)
    memory_tag: bool = False   # the line is tagged as a memory print (MEMORY_TAG)
    indented: bool = False     # the line starts with a blank: it may stand inside a dict opened above it

    def form(self) -> tuple:
        """What makes lines one form: their keys, units and clock; the phase is their label."""
        return (self.layout, tuple((r.series, r.key, r.unit) for r in self.readings))


def key_words(key: str) -> str:
    """A key's words, lowercased: `-`, `_` and a camelCase boundary part them (DeepSpeed's `MemAllocated`
    is `mem allocated`, not the `malloc` of `cudaMalloc retries`)."""
    return _CAMEL.sub(" ", key).lower().replace("-", " ").replace("_", " ")


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def series_of(key: str) -> str | None:
    """The series a memory key names, or None for a key that names no GPU memory size."""
    k = key_words(key)
    if _NOT_SIZE.search(k) or not _WORD.search(k):
        return None
    peak = bool(re.search(r"max|peak|high", k))
    if re.search(r"limit|capacity|total", k) and not re.search(r"alloc|reserv|used|in[ _]use", k):
        return "total"
    if re.search(r"reserv|cache", k):
        return "max_reserved" if peak else "reserved"
    if re.search(r"alloc|in[ _]use", k):
        return "max_allocated" if peak else "allocated"
    if re.search(r"\bfree\b", k):
        return "free"
    if peak and re.search(r"\bactive\b", k):   # (axolotl's `memory/max_mem_active(gib)`: memory_stats' active peak)
        return "max_active"
    # `used`, `mem`, `memory`, `gpu_mem`, `vram`: a device figure whose key does not say which allocator.
    # A peak of it is an allocator's high-water mark (torch.cuda.max_memory_allocated, JAX's
    # peak_bytes_in_use, mlx's get_peak_memory): NVML keeps no peak for a process to print
    return "max_allocated" if peak else "memory.used"


def _key_unit(key: str) -> tuple[str, int | None]:
    """The key without a unit it names, and that unit's factor (`mem_gb` -> 2**30, `allocated (MiB)`)."""
    m = _KEY_PAREN_UNIT.search(key)
    if m:
        return (key[:m.start()] + key[m.end():]).strip(), _UNIT_FACTORS[m[1].lower()]
    words = re.split(r"[ _.\-/]+", key)
    for i, w in enumerate(words):
        if w.lower() in _UNIT_FACTORS and len(w) > 1:
            return "_".join(words[:i] + words[i + 1:]), _UNIT_FACTORS[w.lower()]
    return key, None


def _layout(body: str) -> tuple[str | None, int]:
    for name, rx in _LAYOUT_RES.items():
        m = rx.match(body)
        if m:
            return name, m.end()
    return None, 0


def phase_of(body: str, start: int = 0) -> str | None:
    """The phase a line names: a phase key's word (`phase: post_forward`), else `before|after|…` and one or
    two words (`after optimizer step`)."""
    named = _PHASE_KEY.search(body, start)
    if named:
        return named[1]
    p = _PHASE.search(body, start)
    if not p:
        return None
    words = [w for w in p[2].split() if w.lower() != "the"]
    # `after step: allocated`: a memory word is no part of the phase
    while words and _WORD.search(words[-1].lower()):
        words.pop()
    return f"{p[1].lower()} {' '.join(words).lower().replace('_', ' ')}" if words else None


def plan_line(body: str, header: list[str] | None = None) -> Plan:
    """Analyse one line (without its rank prefix). `header`: the column names of the table this line
    is a row of."""
    plan = Plan()
    plan.layout, start = _layout(body)
    body = body[:bar_end(body, start)]   # (a print run on at the end of a progress bar's line is not the bar's)
    plan.memory_tag = bool(MEMORY_TAG.search(body, start))
    nums = list(_NUM_RE.finditer(body))
    first = next((i for i, m in enumerate(nums) if m.start() >= start), len(nums))
    at = {m.start(): i for i, m in enumerate(nums)}
    used: set[int] = set(range(first))
    read_counters(plan, body, start, nums, at, used, header)
    g = _GPU.search(body, start)
    if g and at.get(g.start(1)) is not None:
        plan.gpu_idx = at[g.start(1)]
        used.add(plan.gpu_idx)
    plan.phase = phase_of(body, start)
    plan.indented = body[:1] in (" ", "\t")
    if header is not None:
        _plan_row(plan, body, nums, used, header)
        return _twins(plan)
    prev_end = start
    i = first
    host = False   # inside a dict under a host key (`cpu_memory: {'total': '1511.10 GB', …}`): the host's sizes
    while i < len(nums):
        m = nums[i]
        seg, prev_end = body[prev_end:m.start()], m.end()
        opened, closed = seg.rfind("{"), seg.rfind("}")
        if opened > closed:
            host = bool(_HOST_DICT.search(seg[:opened]))
        elif closed >= 0:
            host = False
        if i in used or (m.start() > 0 and body[m.start() - 1].isalpha()):   # `fp16`, `cuda:0` read above
            i += 1
            continue
        u = _VALUE_UNIT.match(body, m.end())
        unit = u[1] if u else ""
        if u:
            prev_end = u.end()
        total_idx, total_unit = None, unit
        slash = re.match(r"[ \t]*/[ \t]*", body[prev_end:])
        if slash and i + 1 < len(nums) and nums[i + 1].start() == prev_end + slash.end():
            total_idx = i + 1
            tu = _VALUE_UNIT.match(body, nums[i + 1].end())
            if tu:
                total_unit = tu[1]
            if not unit and tu:
                unit = tu[1]
            prev_end = tu.end() if tu else nums[i + 1].end()
        # `-3 MB` (a sign, not `1-3` or `fp-3`): a memory size is never below zero
        signed = body[m.start() - 1:m.start()] == "-" and not body[max(m.start() - 2, 0):m.start() - 1].isalnum()
        if not host:
            before = len(plan.readings) + len(plan.unread)
            _add(plan, seg, i, unit, total_idx, m[0], body[prev_end:prev_end + 40], signed, total_unit)
            after_key = _KEY_AFTER.match(body, prev_end) if total_idx is None else None
            if after_key and len(plan.readings) + len(plan.unread) == before:
                _add_key_after(plan, i, after_key[1], unit, signed)
        i = total_idx + 1 if total_idx is not None else i + 1
    plan.lead_idx = lead_number(plan, body, start, at)
    return _twins(plan)


def _twins(plan: Plan) -> Plan:
    """Keys of one line that name the same figure (Liger's `step_peak_memory_allocated_MB` and
    `total_peak_memory_allocated_MB`) are a series each: each reading is labelled with its key."""
    counts = Counter(r.series for r in plan.readings)
    plan.readings = [replace(r, label=r.key) if counts[r.series] > 1 else r for r in plan.readings]
    return plan


def _add(plan: Plan, seg: str, i: int, unit: str, total_idx: int | None, value: str = "", after: str = "",
         signed: bool = False, total_unit: str = "") -> None:
    """The number `i` (`value` as written, `after`: the text after it and its unit) after the text
    `seg` (since the previous number) as a reading, if its key is a memory key. `total_idx`: the
    number after a `/` (`total_unit` its unit)."""
    # (`phase=fwd allocated=`: the phase's word is no part of the key)
    part = _PHASE_KEY.sub(" ", re.split(r"[,|;{}\[\]<>]|\)(?!['\"]?[ \t]*[:=])", seg)[-1])
    if _ALIGNED.search(part):
        return
    part = part.strip(" \t:='\"#-(")
    key_m = _KEY_AT_END.search(part)
    if not key_m or unit == "%":
        return
    if _HOST_SCOPE.search(part, 0, key_m.start()):
        return
    key = _PHASE.sub(lambda m: m[0] if _WORD.search(m[2].lower()) else "", key_m[0])
    # `Max CUDA memory allocated was 21 GB`: the verb is no part of the key
    key = re.sub(r"(?i)[ \t]+(?:was|is|are|were)$", "", key.strip())
    # a key about something else (`CPU Total Peak Memory consumed during the train (max)`) stays so when
    # only its last words are kept
    if _NOT_SIZE.search(key_words(key)):
        return
    key = " ".join(key.split()[-4:]).strip(" .-/")
    if not key or (_ALLOCATED.fullmatch(key) and _ALLOCATION_ACT.search(seg) and _PUT.match(after)):
        return
    # (a unit the key names, `used/total (GB)`, is both halves')
    paren = _KEY_PAREN_UNIT.search(key)
    pair = [k.strip() + (f" {paren[0]}:" if paren else "") for k in _KEY_PAREN_UNIT.sub("", key).split("/")]
    if total_idx is not None and len(pair) == 2 and all(series_of(_key_unit(k)[0]) for k in pair):
        # `Allocated / Reserved: 4162.88MB / 23816.00MB`, `device memory used/total (GB): 2.07/60.96`: one
        # reading per key (a `total` the capacity of the line's readings), not a value and its capacity
        _add(plan, pair[0], i, unit, None, value, after, signed)
        _add(plan, pair[1], total_idx, total_unit, None, "", after)
        return
    bare, key_factor = _key_unit(key)
    series = series_of(bare)
    if series is None and plan.memory_tag and unit and not _NOT_SIZE.search(bare.lower()):
        series = "memory.used"
    # a size over a size (`58.32 GB / 79.19 GB`) on a line that names a phase, whatever its key: the device's use
    # of its capacity (EasyR1's `Before vllm offload in sharding manager: 58.32 GB / 79.19 GB.`), if the file's
    # lines of its form bear it out (_capacity_pairs)
    pair = series is None and total_idx is not None and bool(unit) and bool(total_unit) and plan.phase is not None
    series = "memory.used" if pair else series
    # (a documented print's key may be no memory word: TensorFlow's `{'current': N, 'peak': N}`)
    doc = documented(key, seg, after, unit)
    series = series if series is not None or doc is None else doc.series
    if series is None or (not unit and DEVICE_KEY.fullmatch(bare)):
        return
    source = doc.source if doc else CAPACITY_PAIR if pair else None
    if unit:
        factor = _UNIT_FACTORS.get(unit.lower())
    elif key_factor is not None:
        factor = key_factor
    elif key.lower() in TORCH_API and value.isdigit():   # (bytes, whatever print it is)
        factor, series, doc = 1, TORCH_API[key.lower()], None
        source = f"`{key}` is torch.cuda.{key.lower()}() in bytes (as its docstring says)"
    elif doc is not None:
        factor = doc.factor
    else:
        if series != "total":   # (`Total persistent parameters: 483840` names no size)
            plan.unread.append(key)
        return
    if factor is None:
        return
    if signed:
        plan.negative.append(key)
        return
    if doc is not None:
        series = doc.series
    plan.readings.append(Reading(i, series, factor, key, unit, total_idx, source))


# The verb alone before a size that is then put somewhere (XGBoost's bulk_allocator: `Allocated 0MB on [0] GeForce GTX
# 1080, 4572MB remaining.`, `size / mb_size` of the one cudaMalloc it made, src/common/device_helpers.cuh; `preallocated
# 6144 MB for weights`): the size of one allocation, an act, not the memory the device holds
_ALLOCATED = re.compile(r"(?i)(?:pre)?allocated")
_ALLOCATION_ACT = re.compile(r"(?i)(?:pre)?allocated[ \t]+$")
_PUT = re.compile(r"[ \t]+(?:on|for|to)\b", re.I)

# A key after its size (`4572MB remaining`, `642.43 GB used`): a word of a device's level right after a size unit,
# no key of a number after it (`reserved` in `allocated 3 MiB reserved 5 MiB` is the next number's)
_KEY_AFTER = re.compile(r"[ \t]+(free|remaining|available|used)\b(?![ \t]*[:=]?[ \t]*[0-9])", re.I)
_KEY_AFTER_SERIES = {"free": "free", "remaining": "free", "available": "free", "used": "memory.used"}


def _add_key_after(plan: Plan, i: int, word: str, unit: str, signed: bool) -> None:
    """The number `i`, with its size `unit`, as the reading its following `word` names (_KEY_AFTER), where
    the text before it named none."""
    factor = _UNIT_FACTORS.get(unit.lower())
    if factor is None:
        return
    if signed:
        plan.negative.append(word)
        return
    plan.readings.append(Reading(i, _KEY_AFTER_SERIES[word.lower()], factor, word, unit))


def _plan_row(plan: Plan, body: str, nums, used: set[int], header: list[str]) -> None:
    """A table row: the value in a memory column (by its position among the row's fields)."""
    fields = body.split()
    pos = {m.start(): i for i, m in enumerate(nums)}
    starts = [m.start() for m in re.finditer(r"\S+", body)]
    for col, name in enumerate(header):
        if col >= len(fields):
            break
        i = pos.get(starts[col])
        if i is None or i in used:
            continue
        if name.lower() in ("epoch", "step", "iter", "iteration"):
            # `1/100` under `Epoch`: the counter of the row
            if name.lower() == "epoch":
                plan.epoch_idx = i
            else:
                plan.step_idx = i
            continue
        u = _VALUE_UNIT.match(body, nums[i].end())
        unit = u[1] if u else ""
        bare, key_factor = _key_unit(name)
        series = series_of(bare)
        if series is None or unit == "%":
            continue
        factor = _UNIT_FACTORS.get(unit.lower()) if unit else key_factor
        if factor is None:
            plan.unread.append(name)
            continue
        doc = documented(name, "", "", unit)
        plan.readings.append(Reading(i, doc.series if doc else series, factor, name, unit, None,
                                     doc.source if doc else None))


def header_of(body: str) -> list[str] | None:
    """The column names of a table header line (`Epoch GPU_mem box_loss ...`) that names a memory
    column, else None."""
    cols = body.split()
    if len(cols) < 3 or any(c[0].isdigit() for c in cols) or not all(_KEY.fullmatch(c) for c in cols):
        return None
    return cols if any(series_of(_key_unit(c)[0]) for c in cols) else None


# -- reading a file's lines -----------------------------------------------------------------------

_OUT = {"line": pl.Int64, "piece": pl.Int64, "k": pl.Int64, "time": pl.Datetime("us", "UTC"),
        "zoned": pl.Boolean, "series": pl.String, "bytes": pl.Int64, "total_bytes": pl.Int64,
        "step": pl.Int64, "label": pl.String, "gpu": pl.String, "rank": pl.Int64, "local_rank": pl.Int64,
        "step_tag": pl.Boolean}
# a reading's step within its epoch, the epoch, its steps (counters.epoch_steps); its line's leading number (lead_steps)
_COUNTERS = ("inner", "epoch", "per_epoch", "lead")
_NO_READINGS = pl.DataFrame(schema=_OUT)   # (copied: a frame made from a schema costs several times as much)


# a size unit, a slash and a number: the pair of sizes that a line without a memory word may hold (`58.32 GB / 79.19 GB`)
SIZE_OVER_SIZE = r"[KMGT]i?B[ \t]*/[ \t]*[0-9]"


def candidates(text: pl.Expr) -> pl.Expr:
    """The lines the general reader looks at: those holding a memory word (a literal search) or a size over a size."""
    return text.str.contains_any(MEMORY_WORDS, ascii_case_insensitive=True) | text.str.contains(SIZE_OVER_SIZE)


# A regex that finds every line `candidates` finds (and a few more: see reader.LOOK)
CANDIDATE_REGEX = "(?i:" + "|".join(re.escape(w) for w in MEMORY_WORDS) + ")|" + SIZE_OVER_SIZE
TABLE_ROW = r"(?:^|\r)[ \t]*[0-9]"   # a line that may be a row of a table (a number first, or after a tqdm `\r`)


def table_rows(text: pl.Expr) -> pl.Expr:
    """Lines that may be rows of a table (a number first), read only after a header names memory."""
    return text.str.contains(TABLE_ROW)


@dataclass
class Result:
    samples: pl.DataFrame
    notes: list[str]
    forms: list[str]          # what was read, for sniff: `allocated from "mem allocated …MiB"`
    handled: pl.Series = field(default_factory=lambda: pl.Series("line", [], pl.Int64))  # lines read or counted


def read(frame: pl.DataFrame, zone: str, skipped: Skipped, *, year: int | None = None,
         mtime: float | None = None) -> Result:
    """Readings of the general shapes in `frame` (line, text; the rank prefix already cut off).
    Lines of a shape that none of these read are left alone."""
    reader = Reader(zone, skipped, year=year, mtime=mtime)
    handled = reader.feed(frame)
    return reader.finish(handled)


ANSI_CODE = r"\x1b\[[0-9;?]*[A-Za-z]"   # a terminal's control sequence (CSI): colors, cursor moves
_ONE_OFF = "a memory line whose form does not recur in the file: a one-off sentence makes no series"


class Reader:
    """`read` of a file in parts (feed each part, in file order; then finish), in memory bounded by what
    the parts read. Whether a form recurs is known only at the end: each part's readings are kept with
    their plan until then, with the count of lines of each form and, while a form has one line, that
    line (a one-off, counted as skipped at the end). A table's header carries over to the next part;
    a year-less clock gets its year at the end, from the walk over all the lines that are read."""

    def __init__(self, zone: str, skipped: Skipped, *, year: int | None = None, mtime: float | None = None):
        self.zone, self.skipped, self.year, self.mtime = zone, skipped, year, mtime
        self._headers: list[list[str]] = []
        self._last_hdr: int | None = None
        self._pids: dict[tuple[str, int], int] = {}
        self._plans: list[Plan] = []
        self._form_ids: dict[tuple, int] = {}
        self._form_of: list[int] = []          # pid -> form
        self._lines: dict[int, int] = {}       # form -> lines read so far
        self._first: dict[int, list[tuple[int, int]]] = {}   # form of one line so far -> (pid, line)
        self._parts: list[pl.DataFrame] = []   # readings of plans with readings (with pid, per part)
        self._yearless: list[pl.DataFrame] = []   # per line of a year-less clock: its month, day, time of day
        self._blocks: list[pl.DataFrame] = []     # per block head (generic.BLOCK_HEAD): its step or epoch
        self._scopes: list[pl.DataFrame] = []     # per dict head (dict_scopes): its phase; the lines ending one

    def feed(self, frame: pl.DataFrame) -> pl.Series:
        """Read one part (line, text); returns its lines of a known shape (read or counted)."""
        none = pl.Series("line", [], pl.Int64)
        if not frame.height:
            return none
        # a tqdm bar refreshed with `\r` is several readings on one line: each refresh a piece
        if frame.select(pl.col("text").str.contains("\r", literal=True).any()).item():
            df = frame.select("line", pl.col("text").str.split("\r").alias("text")).explode("text")
            df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("line").alias("piece"))
        else:   # (most logs: one piece a line, and no window to compute)
            df = frame.select("line", "text", pl.lit(0, dtype=pl.Int64).alias("piece"))
        t = pl.col("text")
        # a terminal's colors (torchtitan's default metrics line: `\x1b[38;2;54;234;195mmemory: 2.02GiB`) are
        # no part of what a line says
        if df.select(t.str.contains("\x1b", literal=True).any()).item():
            df = df.with_columns(t.str.replace_all(ANSI_CODE, ""))
        # a comment line (`# source: …` above a pasted log, a config dump) is no print of the training loop
        df = df.filter(t.str.strip_chars().str.len_chars() > 0, ~t.str.contains(r"^[ \t]*#"))
        self._note_heads(df)
        # each digit masked (`digits`): the lines of one such shape have their numbers (NUM) at the same
        # places, so each is found once and cut out of all its lines (_samples); its shape with each digit
        # run masked is what a plan is made for
        df = df.with_columns(masked_digits(df["text"]).alias("digits"))
        headers, df, self._last_hdr = _with_headers(df, len(self._headers), self._last_hdr)
        self._headers.extend(headers)
        firsts = df.group_by("digits", "hdr", maintain_order=True).first()
        planned: set[tuple[str, int]] = set()   # (the first line of a shape in the part is its plan's)
        keys: list[tuple[str, int, int, int]] = []   # digits, hdr, pid, its number in this part
        for digits, hdr, text in firsts.select("digits", "hdr", "text").iter_rows():
            shape = _RUNS.sub("0", digits)
            if (shape, hdr) not in self._pids and (shape, hdr) not in planned:
                planned.add((shape, hdr))
                plan = plan_line(text, self._headers[hdr] if hdr >= 0 else None)
                if plan.readings or plan.unread or plan.negative:
                    self._pids[(shape, hdr)] = len(self._plans)
                    self._plans.append(plan)
                    self._form_of.append(self._form_ids.setdefault(plan.form(), len(self._form_ids)))
            if (shape, hdr) in self._pids:
                keys.append((digits, hdr, self._pids[(shape, hdr)], len(keys)))
        if not keys:
            return none
        df = df.join(pl.DataFrame(keys, schema={"digits": pl.String, "hdr": pl.Int64, "pid": pl.Int64,
                                                "did": pl.Int64}, orient="row"),
                     on=["digits", "hdr"], how="inner")
        if not df.height:
            return none
        # a form must recur to make a series: count the lines of each form (a progress bar's refreshes,
        # pieces of one line, each count)
        df = df.with_columns(pl.col("pid").replace_strict(dict(enumerate(self._form_of)),
                                                          return_dtype=pl.Int64).alias("form"))
        pids = df["pid"].unique(maintain_order=True).sort().to_list()
        for form, n in df.group_by("form").agg(pl.struct("line", "piece").n_unique()).iter_rows():
            before = self._lines.get(form, 0)
            self._lines[form] = before + n
            if before == 0 and n == 1:
                self._first[form] = [(pid, ln) for pid, ln in
                                     df.filter(pl.col("form") == form).select("pid", "line").unique().iter_rows()]
            else:
                self._first.pop(form, None)
        for pid in pids:
            p = self._plans[pid]
            if p.unread or p.negative:
                lines = df.filter(pl.col("pid") == pid)["line"].unique(maintain_order=True)
                if p.unread:
                    self.skipped.add_lines(UNITLESS, lines)
                if p.negative:
                    self.skipped.add_lines(NEGATIVE, lines)
        read = [pid for pid in pids if self._plans[pid].readings]
        if read:
            part = df.filter(pl.col("pid").is_in(read))
            # (in bytes: only digits differ between the lines of a mask, each one byte, so their
            # numbers' bytes are at the same places too, and a slice of bytes costs nothing per row where
            # one of characters walks the line: a hostile line of many readings made it quadratic)
            spans = {did: [m.span() for m in _NUM_BYTES.finditer(digits.encode())] for digits, _, pid, did in keys
                     if self._plans[pid].readings}
            samples, yearless = _samples(part, self._plans, spans, self.zone)
            self._parts.append(samples)
            if yearless.height:
                self._yearless.append(yearless)
        return df["line"]

    def _note_heads(self, df: pl.DataFrame) -> None:
        """The block heads (their step) and the dict heads (their phase) among a part's lines."""
        self._blocks.extend(block_heads(df))
        self._scopes.extend(dict_scopes(df, bool(self._scopes)))

    def finish(self, handled: pl.Series | None = None) -> Result:
        """The readings of the forms that recur; the one-off lines counted as skipped."""
        handled = handled if handled is not None else pl.Series("line", [], pl.Int64)
        plans = self._plans
        one_off = sorted((pid, ln) for form, first in self._first.items() if self._lines[form] < 2 for pid, ln in first
                         if plans[pid].readings)
        for pid in dict.fromkeys(pid for pid, _ in one_off):
            self.skipped.add_lines(_ONE_OFF, [ln for p, ln in one_off if p == pid])
        good = [pid for pid, p in enumerate(plans) if p.readings and self._lines.get(self._form_of[pid], 0) >= 2]
        if not good:
            return Result(_NO_READINGS.clear(), [], [], handled)
        keep = pl.col("pid").is_in(good)
        r, good = _capacity_pairs(pl.concat(self._parts, how="vertical").filter(keep), plans, good, self._form_of)
        if not good:
            return Result(_NO_READINGS.clear(), [], [], handled)
        r = _allocated_below_reserved(r, plans, good)
        heads = pl.concat(self._blocks) if self._blocks else None
        if any(plans[pid].steps_per_epoch_idx is not None for pid in good):   # (else no step restarts per epoch)
            r = epoch_steps(r, heads, self._form_of)
        if any(plans[pid].lead_idx is not None for pid in good):
            r = lead_steps(r, self._form_of)
        if heads is not None:
            r = block_steps(r, heads)
        if self._scopes:
            r = _dict_phases(r, pl.concat(self._scopes),
                             [pid for pid in good if plans[pid].indented and plans[pid].phase is None])
        if self._yearless:
            r = _year_times(r, pl.concat(self._yearless, how="vertical").filter(keep), self.zone, self.year,
                            self.mtime)
        out = r.select([pl.col(c).cast(tp) for c, tp in _OUT.items()]).sort("line", "piece", "k")
        return Result(out, _notes(plans, good), _forms(plans, good), handled)


# a line that opens a dict printed over the lines below it (`Memory before training start: {`, finetrainers'
# json.dumps(…, indent=4))
_DICT_HEAD = r"\{[ \t]*$"


def dict_scopes(df: pl.DataFrame, seen: bool) -> list[pl.DataFrame]:
    """The lines of `df` (line, text) that open a dict over the lines below, with the phase they name
    (`scope`), and from the first of them on (`seen`: one was in an earlier part) every unindented line,
    which ends a dict's lines (`scope` null): none, or one frame."""
    t = pl.col("text")
    marks = df.select("line", "text", t.str.contains(_DICT_HEAD).alias("head"))
    if not seen:
        if not marks["head"].any():
            return []
        marks = marks.filter(pl.col("line") >= marks.filter("head")["line"].min())
    rows = marks.filter(pl.col("head") | ~t.str.contains(r"^[ \t]"))
    phases = {ln: phase_of(x) for ln, x in rows.filter("head").select("line", "text").iter_rows()}
    return [rows.select("line", pl.col("line").replace_strict(phases, default=None, return_dtype=pl.String)
                        .alias("scope"))]


def _dict_phases(r: pl.DataFrame, scopes: pl.DataFrame, inside: list[int]) -> pl.DataFrame:
    """The readings of indented lines without a phase of their own (`inside`: their plans) take the phase
    of the dict opened above them (dict_scopes), up to the next unindented line."""
    if not inside:
        return r
    r = r.sort("line").join_asof(scopes.sort("line"), on="line", strategy="backward", check_sortedness=False)
    return r.with_columns(pl.when(pl.col("pid").is_in(inside) & pl.col("scope").is_not_null())
                          .then(pl.concat_str("scope", "label", separator=", ", ignore_nulls=True))
                          .otherwise("label").alias("label")).drop("scope")


CAPACITY_PAIR = ("a size over a size whose key names no memory, on a line naming a phase (`Before vllm offload in "
                 "sharding manager: 58.32 GB / 79.19 GB.`), read as memory.used of the device's capacity: the second "
                 "size is the same on every line of its print and never below the first (torch.cuda.mem_get_info's "
                 "used / total, as verl's print_gpu_memory_usage prints it)")


def _capacity_pairs(r: pl.DataFrame, plans: list[Plan], good: list[int], form_of: list[int]
                    ) -> tuple[pl.DataFrame, list[int]]:
    """Keyless sizes over sizes (CAPACITY_PAIR) stay readings only where their form's second size is one capacity:
    the same on every line of the form and never below the first; else (a download's progress, two sizes of
    something else) they are dropped from `r` and their plans. Returns `r` and the plans left with readings."""
    pairs = [(pid, k + 300) for pid in good for k, x in enumerate(plans[pid].readings) if x.source == CAPACITY_PAIR]
    if not pairs:
        return r, good
    form = pl.col("pid").replace_strict(dict(enumerate(form_of)), return_dtype=pl.Int64).alias("form")
    keys = pl.DataFrame(pairs, schema={"pid": pl.Int64, "k": pl.Int64}, orient="row").with_columns(form)
    held = (r.join(keys, on=["pid", "k"], how="semi").group_by(form)
            .agg(((pl.col("total_bytes").n_unique() == 1) & (pl.col("bytes") <= pl.col("total_bytes")).all())
                 .alias("one_capacity")))
    dropped = keys.join(held.filter(~pl.col("one_capacity")), on="form", how="semi").drop("form")
    for pid in set(dropped["pid"].to_list()):
        plans[pid].readings = [x for x in plans[pid].readings if x.source != CAPACITY_PAIR]
    return r.join(dropped, on=["pid", "k"], how="anti"), [pid for pid in good if plans[pid].readings]


BELOW_RESERVED = ("read as allocated: below `reserved` on every line of its print, and a device's use is at least "
                  "what its allocator reserved: only the allocated part can be less")


def _allocated_below_reserved(r: pl.DataFrame, plans: list[Plan], good: list[int]) -> pl.DataFrame:
    """A figure whose key names no pool (`gpu_mem 0.135G | reserved 0.268G`), printed beside `reserved`
    and never above it (below it at least once), is the allocated memory (BELOW_RESERVED): `r`'s readings
    and the plan renamed so."""
    for pid in good:
        rs = plans[pid].readings
        vague = [k for k, x in enumerate(rs) if x.series == "memory.used"]
        held = [k for k, x in enumerate(rs) if x.series == "reserved"]
        # (a print that names its allocated figure does not print it again under a vaguer key: verl's device
        # `used` beside `memory allocated`, `memory reserved`)
        if len(vague) != 1 or len(held) != 1 or any(x.series == "allocated" for x in rs):
            continue
        mine = r.filter(pl.col("pid") == pid)
        both = (mine.filter(pl.col("k") == vague[0] + 300).select("line", "piece", "bytes")
                .join(mine.filter(pl.col("k") == held[0] + 300).select("line", "piece", pl.col("bytes").alias("res")),
                      on=["line", "piece"], how="inner"))
        if not both.height or not both.select((pl.col("bytes") <= pl.col("res")).all()
                                             & (pl.col("bytes") < pl.col("res")).any()).item():
            continue
        was = rs[vague[0]]
        rs[vague[0]] = replace(was, series="allocated", source=f"`{was.key}` {BELOW_RESERVED}")
        r = r.with_columns(pl.when((pl.col("pid") == pid) & (pl.col("k") == vague[0] + 300)).then(pl.lit("allocated"))
                           .otherwise(pl.col("series")).alias("series"))
    return r


def _with_headers(df: pl.DataFrame, first_id: int = 0, last: int | None = None
                  ) -> tuple[list[list[str]], pl.DataFrame, int | None]:
    """Table headers that name a memory column (numbered from `first_id`), `df` with `hdr`: the header
    whose row each line is (an index into the headers; -1 for a line that is no table row), and the
    header whose rows the next part's first lines may be. `last`: that header of the part before."""
    t = pl.col("text")
    found = [(ln, pc, header_of(tx)) for ln, pc, tx in
             df.filter(~t.str.contains("[0-9]")).select("line", "piece", "text").iter_rows()]
    found = [(ln, pc, h) for ln, pc, h in found if h]
    if not found and last is None:
        return [], df.with_columns(pl.lit(-1, dtype=pl.Int64).alias("hdr")), None
    heads = pl.DataFrame({"line": [f[0] for f in found], "piece": [f[1] for f in found],
                          "hdr_id": list(range(first_id, first_id + len(found)))},
                         schema={"line": pl.Int64, "piece": pl.Int64, "hdr_id": pl.Int64})
    df = df.join(heads, on=["line", "piece"], how="left").sort("line", "piece")
    hdr = pl.col("hdr_id").forward_fill()
    df = df.with_columns(hdr if last is None else hdr.fill_null(last))
    df = df.with_columns(pl.when(table_rows(t) & pl.col("hdr_id").is_not_null()).then(pl.col("hdr_id"))
                         .otherwise(-1).cast(pl.Int64).alias("hdr")).drop("hdr_id")
    return [f[2] for f in found], df, first_id + len(found) - 1 if found else last


def _samples(df: pl.DataFrame, plans: list[Plan], spans: dict[int, list[tuple[int, int]]], zone: str
             ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The readings of `df`'s lines (with their `pid` and `did`, the number of their digit mask, whose
    numbers are at `spans[did]`, (start, end) in bytes), and per line of a year-less clock what its time is made of
    (`_year_times` gives it the year)."""
    pid_of = dict(df.select("did", "pid").unique().iter_rows())

    def at(did: int, idx: int | None) -> tuple[int | None, int | None]:
        """Where number `idx` of the lines of `did` is (start, length in bytes); nulls: no such number."""
        places = spans[did]
        if idx is None or idx >= len(places):
            return None, None
        a, b = places[idx]
        return a, b - a

    # what a line gives once (its clock, counters, GPU, rank) is read per line, then its readings
    dids = sorted(d for d in spans if d in pid_of)
    per_line = pl.DataFrame([(did, *at(did, p.step_idx), *at(did, p.epoch_idx), *at(did, p.steps_per_epoch_idx),
                              *at(did, p.lead_idx), *at(did, p.gpu_idx), p.step_idx is not None, p.phase, p.layout)
                             for did, p in ((d, plans[pid_of[d]]) for d in dids)],
                            schema={"did": pl.Int64, "step_at": pl.Int64, "step_len": pl.Int64,
                                    "epoch_at": pl.Int64, "epoch_len": pl.Int64, "spe_at": pl.Int64,
                                    "spe_len": pl.Int64, "lead_at": pl.Int64, "lead_len": pl.Int64,
                                    "gpu_at": pl.Int64, "gpu_len": pl.Int64,
                                    "has_step": pl.Boolean, "label": pl.String, "layout": pl.String}, orient="row")
    readings = pl.DataFrame([(did, k, *at(did, r.idx), r.series, r.factor, *at(did, r.total_idx), r.label)
                             for did in dids for k, r in enumerate(plans[pid_of[did]].readings)],
                            schema={"did": pl.Int64, "k": pl.Int64, "value_at": pl.Int64, "value_len": pl.Int64,
                                    "series": pl.String, "factor": pl.Int64, "total_at": pl.Int64,
                                    "total_len": pl.Int64, "rlabel": pl.String}, orient="row")

    def num(name: str) -> pl.Expr:
        """The number at `{name}_at` of each line, as a float (null: none there)."""
        cut = pl.col("text").cast(pl.Binary).bin.slice(pl.col(f"{name}_at"), pl.col(f"{name}_len")).cast(pl.String)
        return pl.when(pl.col(f"{name}_at").is_not_null()).then(
            cut.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False))

    def whole(x: pl.Expr) -> pl.Expr:
        """A counter is a whole number: HF Trainer's fractional `epoch` (0.00016) counts nothing."""
        return pl.when(x == x.floor()).then(x).cast(pl.Int64, strict=False)

    rank, local = ranks.words(pl.col("text"))
    # each number taken out once (an eager select computes an expression again at each use)
    lines = df.join(per_line, on="did", how="inner").with_columns(
        num("step").alias("_step"), num("epoch").alias("_epoch"), num("spe").alias("_spe"), num("lead").alias("_lead"),
        num("gpu").cast(pl.Int64, strict=False).cast(pl.String).alias("gpu"),
        rank.alias("rank"), local.alias("local_rank"))
    step, epoch, spe = whole(pl.col("_step")), whole(pl.col("_epoch")), whole(pl.col("_spe"))
    # (a counter that restarts each epoch counts on across epochs: finish's epoch_steps, once the whole file
    # says whether epochs count from 0 and which block head each line is under)
    lines = lines.with_columns(pl.coalesce(step, pl.when(~pl.col("has_step")).then(epoch)).alias("step"),
                               step.alias("inner"), epoch.alias("epoch"), spe.alias("per_epoch"),
                               whole(pl.col("_lead")).alias("lead"))
    lines, yearless = _times(lines, zone)
    lines = lines.drop("digits", "layout", "has_step", "_step", "_epoch", "_spe", "_lead",
                       *(f"{n}_{e}" for n in ("step", "epoch", "spe", "lead", "gpu") for e in ("at", "len")), strict=False)
    # each reading's number cut from its line by its place (the join copies a view of a line's text per
    # reading, not its bytes; only the numbers that readings take are cut and converted)
    r = lines.join(readings, on="did", how="inner")
    r = r.with_columns(num("value").alias("_value"), num("total").alias("_total")).drop("text")
    r = r.with_columns(
        (pl.col("_value") * pl.col("factor")).round(0).cast(pl.Int64, strict=False).alias("bytes"),
        (pl.col("_total") * pl.col("factor")).round(0).cast(pl.Int64, strict=False).alias("total_bytes"),
        pl.when(pl.col("rlabel").is_null()).then(pl.col("label"))
        .otherwise(pl.concat_str("label", "rlabel", separator=", ", ignore_nulls=True)).alias("label"),
    ).drop("_value", "_total")
    # a `total` key is the capacity of the other readings on its line, not a series
    totals = r.filter(pl.col("series") == "total").group_by("line", "piece").agg(pl.col("bytes").first().alias("_cap"))
    r = r.filter(pl.col("series") != "total").join(totals, on=["line", "piece"], how="left")
    r = r.with_columns(pl.coalesce("total_bytes", "_cap").alias("total_bytes"),
                       pl.lit(False).alias("step_tag"), (pl.col("k") + 300).alias("k"))
    return r.filter(pl.col("bytes").is_not_null() & (pl.col("bytes") >= 0)).select(*_OUT, "pid", *_COUNTERS), yearless


def _times(r: pl.DataFrame, zone: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`time` (UTC) and `zoned` from each line's clock layout; a year-less clock's lines are left
    without a time and returned apart (line, piece, pid, layout, _mon, _day, _hms) for `_year_times`."""
    null_t = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    r = r.with_columns(null_t.alias("time"), pl.lit(None, dtype=pl.Boolean).alias("zoned"))
    layouts = [x for x in r["layout"].unique().drop_nulls().to_list()]
    parts = [r.filter(pl.col("layout").is_null())]
    yearless = [pl.DataFrame(schema={"line": pl.Int64, "piece": pl.Int64, "pid": pl.Int64, "layout": pl.String,
                                     "_mon": pl.Int32, "_day": pl.Int32, "_hms": pl.String})]
    for name in layouts:
        # the groups extracted once (each use of a struct field of the expression would extract them again)
        sub = r.filter(pl.col("layout") == name).with_columns(pl.col("text").str.extract_groups(_LAYOUTS[name])
                                                              .alias("_g"))
        g = pl.col("_g")
        frac = g.struct.field("frac").fill_null("0") if "frac" in _LAYOUT_RES[name].groupindex else pl.lit("0")
        if name in YEARLESS:
            if name == "syslog":
                mon = g.struct.field("mname").replace_strict(_MONTHS, default=None, return_dtype=pl.Int32)
            else:
                mon = g.struct.field("mon").cast(pl.Int32, strict=False)
            yearless.append(sub.select("line", "piece", "pid", "layout", mon.alias("_mon"),
                                       g.struct.field("day").cast(pl.Int32, strict=False).alias("_day"),
                                       (g.struct.field("hms") + "." + frac).alias("_hms")))
            sub = sub.with_columns(pl.lit(False).alias("zoned"))
        elif name == "us":
            naive = (g.struct.field("year") + "-" + g.struct.field("mon") + "-" + g.struct.field("day") + " "
                     + g.struct.field("hms") + "." + frac).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False,
                                                                            time_unit="us")
            sub = sub.with_columns(clock.localize(naive, zone).alias("time"), pl.lit(False).alias("zoned"))
        else:
            zone_g = g.struct.field("zone").str.strip_chars()
            day = g.struct.field("date").str.replace_all("/", "-", literal=True)   # (ymd_slash)
            naive = (day + " " + g.struct.field("hms") + "." + frac).str.to_datetime(
                "%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
            sub = sub.with_columns(zone_g.alias("_zone"))
            if sub["_zone"].is_null().all():   # (most logs: no zone, no offset to parse)
                sub = sub.with_columns(clock.localize(naive, zone).alias("time"), pl.lit(False).alias("zoned"))
            else:
                aware = clock.parse_offset_datetime(day + "T" + g.struct.field("hms") + "." + frac
                                                    + pl.col("_zone").fill_null(""))
                sub = sub.with_columns(pl.when(pl.col("_zone").is_not_null()).then(aware)
                                       .otherwise(clock.localize(naive, zone)).alias("time"),
                                       pl.col("_zone").is_not_null().alias("zoned"))
            sub = sub.drop("_zone")
        parts.append(sub.drop("_g"))
    return pl.concat(parts, how="vertical"), pl.concat(yearless, how="vertical")


def _year_times(r: pl.DataFrame, yearless: pl.DataFrame, zone: str, year, mtime) -> pl.DataFrame:
    """`r` with the time of its year-less clocks: per layout, the years of all its lines read, walked
    in file order as syslog's are."""
    done = []
    for name in yearless["layout"].unique().to_list():
        sub = yearless.filter(pl.col("layout") == name).sort("line", "piece")
        years = clock.syslog_years(sub["_mon"], sub["_day"], mtime=mtime, year=year, zone=zone).years
        date = (years.cast(pl.String) + "-" + sub["_mon"].cast(pl.String).str.zfill(2) + "-"
                + sub["_day"].cast(pl.String).str.zfill(2))
        naive = (date + " " + sub["_hms"]).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
        done.append(sub.select("line", "piece").with_columns(clock.localize(pl.lit(naive), zone).alias("_time")))
    if not done:   # (the year-less lines were none of the lines kept)
        return r
    times = pl.concat(done, how="vertical")
    return (r.join(times, on=["line", "piece"], how="left", maintain_order="left")
            .with_columns(pl.coalesce("time", "_time").alias("time")).drop("_time"))


def _forms(plans: list[Plan], good: list[int]) -> list[str]:
    seen = dict.fromkeys(f"{r.series} from `{r.key}`" + (f" ({r.unit})" if r.unit else "")
                         for pid in good for r in plans[pid].readings)
    return list(seen)


def _notes(plans: list[Plan], good: list[int]) -> list[str]:
    out = ["general reader: " + "; ".join(_forms(plans, good))]
    units = {r.unit for pid in good for r in plans[pid].readings}
    if units & {"MB", "GB", "KB", "TB", "mb", "gb", "kb", "M", "G", "K", "T"}:
        out.append("MB/GB (and M/G) in these lines are read as MiB/GiB")
    docs = {r.source for pid in good for r in plans[pid].readings if r.source}
    out.extend(sorted(docs))
    if any(r.series.startswith("memory.used") for pid in good for r in plans[pid].readings):
        out.append("a memory figure whose key does not say which (`mem`, `used`, `vram`) is read as memory.used")
    if any(r.series == "total" for pid in good for r in plans[pid].readings):
        out.append("a `total`/`limit` figure is the capacity of the readings on its line, not a series")
    return out
