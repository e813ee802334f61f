"""`torch.cuda.memory_stats()` dicts printed in a log (docs/formats.md §4.5), one or many, anywhere in it;
and JAX's `Device.memory_stats()` dicts, printed the same ways.

memory_stats() is the caching allocator's counters of one device as one flat dict, its keys sorted
(`f"{stat}.{pool}.{metric}"` and plain counters such as `num_ooms`). Scripts print it through print
or logging (its repr), json.dumps or pprint, behind any prefix. Each dict becomes:
- samples `allocated`, `reserved`, `active` (label `memory_stats`) from `allocated_bytes.all.current`,
  `reserved_bytes.all.current`, `active_bytes.all.current`: exact bytes (memory_allocated() and
  memory_reserved() are the first two of the same dict), with the step and GPU read from the text in
  front of the dict (`step 10 memory_stats: `, `memory_stats step=10 `, `cuda:1`) and the line's clock;
- an event where a counter rose since the device's previous dict: `gpu_oom_counted` for `num_ooms` (an
  OutOfMemoryError was raised), `alloc_retry` for `num_alloc_retries` (a cudaMalloc failed, the
  allocator freed its cache and retried: memory was nearly full). Counters start at 0 in each process,
  so a first dict above 0 rose before it; a counter that falls was reset (or a new run began).

JAX's dict (PJRT's allocator stats: `bytes_in_use`, `peak_bytes_in_use`, `bytes_limit`, `num_allocs`,
`largest_alloc_size`, ...) becomes samples `allocated` (bytes_in_use) and `max_allocated`
(peak_bytes_in_use), each with `bytes_limit` as the device's capacity (`total_bytes`); the notes say
the dicts are JAX's.

Shapes: on one line, a dict `{'k': v, ...}`, `OrderedDict([('k', v), ...])` (Python <= 3.11 repr),
`OrderedDict({'k': v, ...})` (3.12 and later) or JSON; over several lines, pprint (the dict opens on
the first line with the first key, then one key a line) and json.dumps(indent=...) (the opening `{` on
a line of its own: the step and clock on that line are not read, the dict starts at its first key,
`active.all.allocated`, which memory_stats() sorts first). A key line that belongs to no dict read
here (a list of pairs, a filtered copy whose first line was not seen) is counted as skipped.
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics.frames import rows_where
from forensics.io.lines import read_whole
from forensics.model import Parsed, events_frame, samples_frame
from forensics.parsers import ranks
from forensics.parsers.steplog.generic import DEVICE_IN_TAG, STEP_IN_TAG, clock_of, strip_line_time, with_line_time
from forensics.parsers.contract import Format, Scan

NAME = "pytorch-memory-stats"

SERIES_OF_KEY = {"allocated_bytes.all.current": "allocated", "reserved_bytes.all.current": "reserved",
                 "active_bytes.all.current": "active"}
EVENT_OF_COUNTER = {"num_ooms": "gpu_oom_counted", "num_alloc_retries": "alloc_retry"}
FIRST_KEY = "active.all.allocated"   # memory_stats() sorts its keys: this one comes first
JAX_SERIES_OF_KEY = {"bytes_in_use": "allocated", "peak_bytes_in_use": "max_allocated"}
JAX_CAPACITY = "bytes_limit"
_READ = (*SERIES_OF_KEY, *EVENT_OF_COUNTER, *JAX_SERIES_OF_KEY, JAX_CAPACITY)
_LABEL = "memory_stats"

_Q = "['\"]"
# Every key memory_stats() has (its docstring): core stats by pool and metric, the oversize stats, the
# plain counters and max_split_size.
# JAX's keys (PJRT's AllocatorStats) follow them.
_STAT_KEY = (r"(?:[a-z_]+\.(?:all|large_pool|small_pool)|oversize_[a-z]+)\.(?:current|peak|allocated|freed)"
             r"|num_[a-z_]+|max_split_size"
             r"|(?:peak_)?bytes_(?:in_use|reserved)|bytes_(?:reservable_)?limit|largest_[a-z_]+|(?:peak_)?pool_bytes")
_KEY_VALUE = _Q + f"(?:{_STAT_KEY})" + _Q + r"[ \t]*[:,][ \t]*-?[0-9]"
# Where a dict opens: `{`, `OrderedDict([(` or `OrderedDict({` right before its first key.
_OPENING = r"(?:OrderedDict\((?:\[\(|\{)|\{)"
_FIRST_PAIR = r"[ \t]*" + _Q + f"(?:{_STAT_KEY})" + _Q + r"[ \t]*[:,]"
_OPEN = _OPENING + _FIRST_PAIR
_PREFIX = r"^(.*?)" + _OPEN                   # the text in front of the dict
_HEAD = r"^(.*?" + _OPENING + ")" + _FIRST_PAIR  # ... and its opening
# A dict that ends on this line: a value followed by `}`, `)]` or `})` (pprint's and json's other
# lines end with a comma).
_CLOSED = r"-?[0-9]+[ \t]*\)?[ \t]*[}\]]"


def _value_rx(key: str) -> str:
    """`'key': 123,` / `('key', 123)` / `"key": 123}`: the number, which must be followed by what
    ends a value (a line cut in the middle of a number gives none)."""
    return _Q + re.escape(key) + _Q + r"[ \t]*[:,][ \t]*(-?[0-9]{1,19})[ \t]*[,)}\]]"


def _pair_rx(key: str) -> str:
    return "(" + _Q + re.escape(key) + _Q + r"[ \t]*[:,][ \t]*-?[0-9]{1,19})"


SCAN_HINT = _Q + "(?:" + "|".join(re.escape(k) for k in (*_READ, FIRST_KEY)) + ")" + _Q + r"[ \t]*[:,]"
# what every SCAN_HINT line holds, for the one prefilter over all scanners (parsers/scanners.py)
SCAN_PREFILTER = r"bytes\.all\.current|num_ooms|num_alloc_retries|active\.all\.allocated|bytes_in_use|bytes_limit"
SCAN_BLOCK_LITERALS = ("bytes.all.current", "num_ooms", "num_alloc_retries", "active.all.allocated", "bytes_in_use",
                       "bytes_limit")

_KEY_VALUE_RE = re.compile(_KEY_VALUE)
# where a dict starts: its opening, or (json indent) its first key
_START_RE = re.compile(_OPEN + "|" + _Q + re.escape(FIRST_KEY) + _Q + r"[ \t]*:")
# lines of a dict that hold no key: a pprint/json opening or closing on a line of its own
_BRACKETS_ONLY = r"[{(\[][ \t]*$|^[ \t]*[})\]]+[ \t]*$"
SKIP_OUTSIDE = "memory_stats key outside a dict read here (a list of pairs, or a dict whose first line was not seen)"
SKIP_EMPTY = "memory_stats dict without the byte counts or counters read here (a filtered copy)"
SKIP_OTHER = "not part of a memory_stats dict"


def sniff(head: list[str]) -> str | None:
    """A file mostly of memory_stats() dicts (a training log with a few of them among other lines is
    another parser's; this module's scan reads the dicts there)."""
    # (a start holds `{`, `OrderedDict(` or FIRST_KEY, and no part of _START_RE matches a newline: the
    # joined head holds a start where one of its lines does)
    text = "\n".join(head)
    if not ("{" in text or "OrderedDict(" in text or FIRST_KEY in text) or not _START_RE.search(text):
        return None
    return _sniff_lines(head)


def _sniff_lines(head: list[str]) -> str | None:
    lines = [ln for ln in head if ln.strip() and not ln.startswith("# source:")]
    opened = next((i for i, ln in enumerate(head, 1) if _START_RE.search(ln)), None)
    if opened is None or not lines:
        return None
    keyed = sum(1 for ln in lines if _KEY_VALUE_RE.search(ln))
    if 2 * keyed <= len(lines):
        return None
    return f"memory_stats() dicts (PyTorch's or JAX's), first at line {opened}"


class Reader:
    """A file of memory_stats() dicts, batch by batch: the lines that hold a key read here become a few
    facts each (kept), the rest is counted; finish() pairs the facts into dicts."""

    def __init__(self, src, opts):
        self.zone = opts.tz_for(src.path)
        self.facts: list[pl.DataFrame] = []
        self.other: list[pl.Series] = []

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        t = pl.col("text")
        hinted = t.str.contains(SCAN_PREFILTER) & t.str.contains(SCAN_HINT)
        other = (t.str.strip_chars() != "") & ~t.str.contains(_KEY_VALUE) & ~t.str.contains(_BRACKETS_ONLY)
        marks = batch.select("line", hinted.alias("hint"), other.alias("other"))
        hit = rows_where(batch, marks["hint"])
        if hit.height:
            self.facts.append(line_facts(hit, self.zone))
        self.other.append(marks["line"].filter(~marks["hint"] & marks["other"]))

    def finish(self) -> Parsed:
        out = read_dicts(pl.concat(self.facts) if self.facts else None)
        for lines in self.other:
            out.skipped.add_lines(SKIP_OTHER, lines)
        return out


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


def scan(lines: pl.DataFrame, src, opts) -> Parsed:
    """memory_stats() dicts printed inside a log another parser claims (a training log)."""
    return read_dicts(line_facts(lines, opts.tz_for(src.path)))


def line_facts(lines: pl.DataFrame, zone: str) -> pl.DataFrame:
    """Per line that holds a key read here: what it says (the values, whether a dict opens or ends on
    it, the step, GPU and clock in front of the dict) and the evidence text of each counter. Row by
    row, so batches give the same facts as the whole file."""
    t = pl.col("text")
    # a rank's prefix (`[default1]:`, `[rank1]:`) goes before the clock; the rank is kept
    df = with_line_time(ranks.split_prefix(lines.select("line", "text")), zone)
    prefix = t.str.extract(_PREFIX, 1)
    body = strip_line_time(prefix)
    step = body.str.extract_groups(STEP_IN_TAG)
    gpu = body.str.extract_groups(DEVICE_IN_TAG)
    rank, local = ranks.words(body)
    values = [t.str.extract(_value_rx(k), 1).cast(pl.Int64, strict=False).alias(k) for k in _READ]
    df = df.with_columns(
        prefix.is_not_null().alias("opens"),
        t.str.contains(_CLOSED).alias("closed"),
        t.str.contains(_Q + re.escape(FIRST_KEY) + _Q).alias("first"),
        t.str.count_matches(_KEY_VALUE).alias("keys"),
        pl.coalesce(step.struct.field("1"), step.struct.field("2")).cast(pl.Int64, strict=False).alias("step"),
        pl.coalesce(*[gpu.struct.field(str(i)) for i in range(1, 4)]).alias("gpu"),
        ranks.label(pl.coalesce(rank, "line_rank"), pl.coalesce(local, "line_local_rank"), pl.lit(_LABEL),
                    pl.lit(True)).alias("label"),
        *values,
    )
    # a counter's evidence: the line itself when it is a line of its own (pprint), else the text in
    # front of the dict and the counter as written (a one-line dict runs to thousands of characters)
    head = t.str.extract(_HEAD, 1)
    evidence = [pl.when(pl.col(k).is_null()).then(None)
                .when(pl.col("keys") <= 1).then(t)
                .otherwise(pl.concat_str(head.fill_null(""), pl.lit("… "), t.str.extract(_pair_rx(k), 1), pl.lit(" …")))
                .alias(f"text_{k}") for k in EVENT_OF_COUNTER]
    return df.with_columns(evidence).drop("text", *ranks.PREFIX_COLUMNS)


def read_dicts(facts: pl.DataFrame | None) -> Parsed:
    """The dicts the line facts make (in line order), their samples and counter events."""
    out = Parsed()
    if facts is None or not facts.height:
        return out
    dicts: list[dict] = []
    current: dict | None = None
    for r in facts.sort("line").iter_rows(named=True):
        mine = [k for k in _READ if r[k] is not None] + ([FIRST_KEY] if r["first"] else [])
        if r["opens"] or (r["first"] and r["keys"] <= 1):
            # a dict opens here, or (json indent) at its first key on the line after its `{`
            current = {"line": r["line"], "time": r["time"], "zoned": r["zoned"], "step": r["step"],
                       "gpu": r["gpu"], "label": r["label"], "keys": {}, "lines": {}, "texts": {}}
            dicts.append(current)
        elif current is None or r["keys"] != 1 or any(k in current["keys"] for k in mine):
            # not one key of an open multi-line dict: a key line of something else
            out.skipped.add(SKIP_OUTSIDE, r["line"])
            current = None
            continue
        for k in mine:
            if k != FIRST_KEY:
                current["keys"][k] = r[k]
                current["lines"][k] = r["line"]
                current["texts"][k] = r.get(f"text_{k}")
        if r["closed"] or r["keys"] > 1:
            current = None   # a one-line dict, or the last line of a multi-line one
    for d in dicts:
        if not d["keys"]:
            out.skipped.add(SKIP_EMPTY, d["line"])
    dicts = [d for d in dicts if d["keys"]]
    samples = [{"seq": i, "line": d["lines"][k], "time": d["time"], "zoned": d["zoned"], "step": d["step"],
                "gpu": d["gpu"], "series": series, "bytes": d["keys"][k], "label": d["label"],
                "total_bytes": d["keys"].get(JAX_CAPACITY) if k in JAX_SERIES_OF_KEY else None}
               for i, d in enumerate(dicts, 1)
               for k, series in (*SERIES_OF_KEY.items(), *JAX_SERIES_OF_KEY.items()) if k in d["keys"]]
    out.samples = samples_frame(samples)
    out.events = events_frame(_counter_events(dicts))
    out.clock = clock_of(pl.DataFrame({"zoned": [d["zoned"] for d in dicts]}, schema={"zoned": pl.Boolean}))
    out.meta["memory_stats_dicts"] = len(dicts)
    for counter in EVENT_OF_COUNTER:
        seen = [d["keys"][counter] for d in dicts if counter in d["keys"]]
        if seen:
            out.meta[f"{counter}_max"] = max(seen)
    if any(k in d["keys"] for d in dicts for k in SERIES_OF_KEY):
        out.notes.append("memory_stats() figures are the caching allocator's exact byte counts "
                         "(memory_allocated() is its allocated_bytes.all.current)")
    if any(k in d["keys"] for d in dicts for k in JAX_SERIES_OF_KEY):
        out.notes.append("JAX Device.memory_stats() dicts: bytes_in_use read as allocated, peak_bytes_in_use as "
                         "max_allocated, bytes_limit as the device's capacity (exact bytes from XLA's allocator)")
    if dicts and all(d["step"] is None and d["time"] is None for d in dicts):
        out.notes.append("memory_stats dicts carry neither a step nor a clock: they are ordered by their place in the file")
    return out


def _counter_events(dicts: list[dict]) -> list[dict]:
    """One event per rise of a counter between two dicts of one device (and rank), with the readings around it
    (the counter rose after the one before and by this one; the one after says whether the job went on)."""
    events = []
    by_who: dict[tuple, list[dict]] = {}
    for d in dicts:
        by_who.setdefault((d["gpu"], d["label"]), []).append(d)
    for (gpu, _), seq in by_who.items():
        for counter, kind in EVENT_OF_COUNTER.items():
            have = [d for d in seq if counter in d["keys"]]
            for i, d in enumerate(have):
                prev = have[i - 1] if i else None
                after = have[i + 1] if i + 1 < len(have) else None
                before = prev["keys"][counter] if prev is not None else 0
                value = d["keys"][counter]
                if value <= before:
                    continue   # level, or reset (reset_accumulated_memory_stats, or a new process)
                detail = {"counter": counter, "value": value, "rise": value - before, "previous": before,
                          "step": d["step"], "previous_step": _get(prev, "step"),
                          "previous_line": prev["lines"][counter] if prev is not None else None,
                          "previous_time": _iso(_get(prev, "time")),
                          "next_line": after["lines"][counter] if after is not None else None,
                          "next_time": _iso(_get(after, "time"))}
                events.append({"line": d["lines"][counter], "time": d["time"], "kind": kind, "gpu": gpu,
                               "text": d["texts"][counter], "detail": json.dumps(detail)})
    return sorted(events, key=lambda e: e["line"])


def _get(d: dict | None, key: str):
    return d[key] if d is not None else None


def _iso(t) -> str | None:
    return t.isoformat() if t is not None else None


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    scan=Scan(read=scan, hint=SCAN_HINT, prefilter=SCAN_PREFILTER,
              block_literals=SCAN_BLOCK_LITERALS),
    files="printed `torch.cuda.memory_stats()` dicts (repr of every Python version, JSON, pprint), alone or "
          "inside a training log; JAX's `Device.memory_stats()` dicts the same",
    yields="exact allocated / reserved / active bytes per step; `num_ooms` and `num_alloc_retries` rises as "
           "events; JAX: allocated (`bytes_in_use`), peak, `bytes_limit` as capacity",
    # an OOM's traceback with the dicts printed under it is the OOM's
    after=("pytorch-oom", "framework-oom"),
)
