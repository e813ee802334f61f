"""The generic step-log shapes: memory readings that training scripts print between steps, in any
free-text log, and the helpers that the framework families (families.py) share.

The spine form is `[<tag>] allocated: <x> MB, cached: <y> MB` (also `reserved`, `max allocated`, any
order), plain or behind a logging prefix with a clock. Around it, a tolerant scanner reads the other
shapes people print: `memory (MB) | allocated: 20.4 | ...` (unit in a header), `GPU: 2798.0/11011.5 MiB`
(torch.cuda.memory_reserved / device total, DeepLabCut), tqdm postfixes refreshed with `\\r`, raw byte
prints `torch.cuda.memory_allocated(0) 318986240`, `nvidia-smi GPU-1 memory (MB) 1494`,
`occupied memory: 2.47 GB / reserved: 16.69 GB`, `Free GPU ram: 12800.5` and HF Trainer `on_log` dicts.

Why these shapes stay beside the general reader (general.py): they read a single line, and they are
what `scan` reads in the files of other formats, where the general reader does not run (a memory word
beside a number is that format's business there): a training log that ends in an OOM traceback is the
OOM parser's file, and its readings are found only so. Each also reads what the general reader reads
otherwise or not at all (said at each shape), except MEM_ABBR, kept for that scan alone.

Readings need a key *and* a colon/equals sign directly after it, so prose such as the CUDA OOM message
("8.57 MiB already allocated", "is allocated by PyTorch") and `nvidia-smi -q` rows
("Reserved        : 336 MiB", several spaces before the colon) are never readings.

Beside the regexes, the literals that every line they match holds: the prefilters (reader.PREFILTER,
markers.SCAN_*) are built from them, and tests/parsers/test_steplog_prefilters.py holds them to it.
"""
from __future__ import annotations

import re

import polars as pl

from forensics import clock
from forensics.model import Parsed, Skipped
from forensics.parsers import ranks
from forensics.units import bytes_expr
from forensics.frames import owned, rows_where
from forensics.parsers.free import FALL, FALL_NOTE

# -- shared pieces --------------------------------------------------------------------------------

NUM = r"[-+]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
UNIT = r"(?:[KMGTP]i?B|[kmgtp]i?b|[Bb]ytes|B)"

# A clock at the start of a line: python logging `2026-11-30 03:04:08,405`, `[2026-11-30 03:04:08]`,
# ISO with T and an optional zone; and the `%m/%d/%Y %H:%M:%S` that the HF example scripts configure.
TS_ISO = (r"^\s*\[?(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[T ](?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?"
          r"(?P<zone>Z|[ ]?[+-][0-9]{2}:?[0-9]{2}\b|[ ]UTC\b)?\]?")
TS_US = r"^\s*\[?(?P<mon>[0-9]{2})/(?P<day>[0-9]{2})/(?P<year>[0-9]{4})[ ,]+(?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?\]?"
LEVEL = r"^\s*[\[(]?(?:INFO|DEBUG|WARNING|WARN|ERROR|CRITICAL|TRACE|NOTICE)[\])]?\s*[:|\-]?\s*"

# A step taken from the text in front of a reading (its tag) or from a marker line of its own.
STEP_IN_TAG = (r"(?i:\b(?:global[ _]step|step|iteration|iter|it)['\"]?\s*[:=#]?\s*([0-9]+)\b"
                r"|\b([0-9]+)\s+iterations?\b)")
# (Composer's console block header `[batch=12/400]:`: `batch=` only, as `batch 32` is often a batch's size)
_COUNTER_WORDS = r"global[ _]step|step|iteration|iter"
_STEP_WORD = rf"(?:{_COUNTER_WORDS}|batch=)"
STEP_MARKER = r"(?i)^\W*" + _STEP_WORD + r"\s*[:=#]?\s*([0-9]+)\b"
# A line that holds nothing but a step counter heads a block (Composer's console logger prints `[batch=12/400]:`
# and then one indented `Train memory/allocated_mem: 1.4440` line per key): the general reader's readings of the
# block without a counter of their own take its step (a restarted job's counter going back is then seen); one
# that holds nothing but an epoch (Keras' `Epoch 2/8` above its bar's lines) gives the epoch of the block's
# step counters that restart each epoch
BLOCK_HEAD = (rf"(?i)^[ \t]*\[?(?:{_COUNTER_WORDS}|batch|epoch)[ \t]*[:=#]?[ \t]*([0-9]+)"
              r"(?:[ \t]*/[ \t]*[0-9]+)?\]?[ \t]*:?[ \t]*$")
_EPOCH_HEAD = r"(?i)^[ \t]*\[?epoch\b"
# A key naming the phase of its line, whose value is a word (ORTModule's `phase: post_forward`, `stage=eval`):
# that word is the readings' label, so each phase is a series of its own (a number, `stage: 3`, names none).
# No (?i): `s` would also match the long s outside ASCII, and _pieces_hold's words stand for ASCII only.
PHASE_KEY = r"\b(?:[Pp]hase|PHASE|[Ss]tage|STAGE)['\"]?[ \t]*[:=][ \t]*['\"]?([A-Za-z][A-Za-z_\-]*)\b"
# A rank in the tag is not a GPU (on more than one node, or with CUDA_VISIBLE_DEVICES, it names none):
# parsers/ranks.py reads it, and forensics/ranks.py gives the rank the GPU that the logs say it used.
DEVICE_IN_TAG = r"(?i:\bcuda:([0-9]+)\b|\bgpu[ \t]*#?([0-9]+)\b|\bdevice[ \t]*[:=#]?[ \t]*([0-9]+)\b)"

# -- reading shapes -------------------------------------------------------------------------------

_KEY = r"(?i:(?:max[ _]?)?(?:memory[ _])?(?:allocated|reserved|cached)|occupied(?:[ _]memory)?)"
# KV stays for Megatron's `report_memory` (`memory (MB) | allocated: 1570.7 | reserved: …`): one unit in
# front of several keys, a structure the general reader does not model (it reads the other KV logs alike).
# key, optional "(GB)" after the key (HF dicts), at most one blank, ':' or '=', number, optional
# "/total", optional unit
KV = (rf"\b(?P<key>{_KEY})(?:[ \t]*\((?P<punit>{UNIT})\))?['\"]?[ \t]?[:=][ \t]*(?P<num>{NUM})"
      rf"(?:[ \t]*/[ \t]*(?P<total>{NUM}))?(?:[ \t]*(?P<unit>{UNIT})\b)?")
# The end of a number that ends a reading: `\b` alone would let the regex back off into a shorter
# number ("12" of "12.5x", "1" of "1,234"); polars' regex engine has no lookahead, so the character
# after the number is matched (never part of a group)
_NUM_END = r"(?:$|[^\w.,]|[.,](?:$|[^0-9]))"
# DeepLabCut: torch.cuda.memory_reserved() / device total, in the epoch line and the tqdm postfix (its
# source says reserved; to the general reader a bare `GPU` key is memory.used)
GPU_USED_TOTAL = (rf"(?i:\bgpu)[ \t]*[:=][ \t]*(?P<num>{NUM})[ \t]*/[ \t]*(?P<total>{NUM})[ \t]*"
                  rf"(?P<unit>{UNIT})\b")
# the key is a call, `torch.cuda.memory_allocated(0) 318986240`: its device argument is no number of the
# print's, and its bare number is bytes because of the function it names
TORCH_RAW = (r"torch\.cuda\.(?P<max>max_)?memory_(?P<kind>allocated|reserved|cached)\((?P<dev>[^)]*)\)"
             r"[ \t]*[:=]?[ \t]*(?P<num>[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)" + _NUM_END)
# `nvidia-smi GPU-1 memory (MB) 1494`: the GPU's index inside the key (the general reader reads none of
# stepmem_torch_02's five)
NVSMI_PRINT = (rf"nvidia-smi[ \t]+GPU-?(?P<dev>[0-9]+)[ \t]+memory[ \t]*\((?P<punit>{UNIT})\)[ \t]*[:=]?[ \t]*"
               rf"(?P<num>{NUM})" + _NUM_END)
# `Free GPU ram: 12800.5`: no unit printed, MiB from its one producer's source (below); the general
# reader would count it as a value without a unit
FREE = (rf"(?i:\bfree[ _]gpu[ _](?:ram|memory|mem))(?:[ \t]*\((?P<punit>{UNIT})\))?[ \t]*[:=][ \t]*"
        rf"(?P<num>{NUM})(?:[ \t]*(?P<unit>{UNIT})\b)?")
TOTAL = (rf"(?i:\btotal[ _]memory(?:[ _]available)?)(?:[ \t]*\((?P<punit>{UNIT})\))?['\"]?[ \t]?[:=][ \t]*"
         rf"(?P<num>{NUM})(?:[ \t]*(?P<unit>{UNIT})\b)?")
# (Kept for `scan` alone: the general reader reads the 7 recorded logs of this shape with the same samples,
# but not a log that another parser claims, tests/parsers/test_framework_oom.py's JAX and CuPy cases.)
# `step 12 | loss 0.05 | mem_alloc 1.25 GB | mem_reserved 1.69 GB`: the short `mem_` keys people
# print, with or without ':'/'=', and always a unit (which keeps prose out)
MEM_ABBR = (rf"\b(?P<key>(?i:mem_(?:alloc(?:ated)?|reserved|cached)))[ \t]*[:=]?[ \t]*(?P<num>{NUM})[ \t]*"
            rf"(?P<unit>{UNIT})\b")
# `Allocated / Reserved: 4162.88MB / 23816.00MB`: two keys and two values, one reading each (KV alone
# would take the second key with the first value, and the second value as its capacity)
KEY_PAIR = (rf"\b(?P<k1>{_KEY})[ \t]*/[ \t]*(?P<k2>{_KEY})[ \t]*[:=][ \t]*(?P<n1>{NUM})[ \t]*(?P<u1>{UNIT})?"
            rf"[ \t]*/[ \t]*(?P<n2>{NUM})[ \t]*(?P<u2>{UNIT})?")
HEADER_UNIT = rf"\((?:in[ \t]+)?({UNIT})\)"
# a piece's header unit (`memory (MB)`): the unit of its readings that carry none
_PIECE_HEADER_UNIT = pl.col("piece_text").str.extract(HEADER_UNIT).alias("header_unit")


def unnamed(rx: str) -> str:
    """The same regex without group names, so several can share one alternation."""
    return re.sub(r"\(\?P<\w+>", "(?:", rx)


ANY_READING = "|".join(unnamed(r) for r in (KV, GPU_USED_TOTAL, TORCH_RAW, NVSMI_PRINT, FREE, MEM_ABBR))
# Lines that are another parser's business even though they mention allocated/reserved memory.
NOT_OURS = (r"(?i:out of memory|OutOfMemoryError)|^\s*\|.*\|\s*$|(?i:CUDA memory summary)"
            r"|(?i:\bpages reserved\b)"
            # torch.cuda.memory_stats() keys such as 'active.all.allocated' (a count; torch/memstats.py)
            r"|\.allocated['\"][ \t]?:")

# -- what the prefilters are built from -----------------------------------------------------------

# Every line that a reading shape matches holds one of READING_WORDS in any case (KV's keys,
# GPU_USED_TOTAL, FREE, MEM_ABBR) or one of READING_LITERALS as written (TORCH_RAW, NVSMI_PRINT);
# lowercased, one of READING_BLOCK_LITERALS (the kernel fast path tests whole blocks that way).
READING_WORDS = r"allocated|reserved|cached|occupied|gpu[ \t]*[:=]|free[ _]gpu|mem_"
READING_LITERALS = r"torch\.cuda\.|nvidia-smi"
READING_BLOCK_LITERALS = ("allocated", "reserved", "cached", "occupied", "gpu:", "gpu=", "gpu ", "gpu\t",
                          "free gpu", "free_gpu", "mem_", "torch.cuda.", "nvidia-smi")
# A step marker of GENERIC_HINT holds one of these words (in any case; lowercased: "iter", "step" or "batch=").
STEP_WORDS = r"(?:\b(?:iter|iteration|step)\b|\bbatch=)"
STEP_BLOCK_LITERALS = ("iter", "step", "batch=")
# A STEP_MARKER line (or a BLOCK_HEAD's epoch) up to its word: the clocks that strip_line_time removes, one after
# the other.
MARKER_PREFILTER = (rf"^(?:{ranks.LINE_PREFIX.removeprefix('^')})?(?:{unnamed(TS_ISO).removeprefix('^')})?"
                    rf"(?:{unnamed(TS_US).removeprefix('^')})?\W*(?i:{_STEP_WORD}|epoch\b)")

# Generic part of the scan hint: a reading, or a step marker line that gives readings a step.
GENERIC_HINT = ANY_READING + r"|(?i:" + STEP_WORDS + r"\s*[:=#]?\s*[0-9])"

_SERIES_OF_KEY = {
    "allocated": "allocated", "reserved": "reserved", "cached": "reserved", "occupied": "allocated",
    "max allocated": "max_allocated", "max reserved": "max_reserved", "max cached": "max_reserved",
}


# -- time -----------------------------------------------------------------------------------------

def with_line_time(df: pl.DataFrame, zone: str, text: str = "text") -> pl.DataFrame:
    """Add `time` (UTC) and `zoned` (the clock carried its own zone) from a clock at the line start.
    Naive clocks are local time in `zone` (Options.tz_for of the file)."""
    # (no line with a clock's date: a small text is searched in Python, without the queries below)
    if df.height == 0 or not (_may_hold(df[text], ISO_DATE_ANYWHERE, ("-",)) or has_us_clock(df[text])):
        return df.with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("time"),
                               pl.lit(None, dtype=pl.Boolean).alias("zoned"))
    # each regex's groups extracted once (each use of a struct field of the expression would extract them again)
    df = df.with_columns(pl.col(text).str.extract_groups(TS_ISO).alias("_iso"))
    iso = pl.col("_iso")
    if has_us_clock(df[text]):
        df = df.with_columns(pl.col(text).str.extract_groups(TS_US).alias("_usg"))
        us = pl.col("_usg")
        us_naive = (us.struct.field("year") + "-" + us.struct.field("mon") + "-" + us.struct.field("day") + " "
                    + us.struct.field("hms") + "." + us.struct.field("frac").fill_null("0"))
    else:   # (TS_US needs a '/': without one no line has that clock, and its regex is not run)
        us_naive = pl.lit(None, dtype=pl.String)
    df = df.with_columns(
        iso.struct.field("date").alias("_d"), iso.struct.field("hms").alias("_t"),
        iso.struct.field("frac").fill_null("0").alias("_f"),
        iso.struct.field("zone").str.strip_chars().str.replace("UTC", "Z", literal=True).alias("_z"),
        us_naive.alias("_us"),
    )
    naive = pl.coalesce(
        (pl.col("_d") + " " + pl.col("_t") + "." + pl.col("_f")),
        pl.col("_us"),
    ).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    time = clock.localize(naive, zone)
    if df["_z"].null_count() < df.height:   # (most logs carry no zone: the offset parser's regexes are not run)
        zoned = clock.parse_offset_datetime(pl.col("_d") + "T" + pl.col("_t") + "." + pl.col("_f") + pl.col("_z"))
        time = pl.when(pl.col("_z").is_not_null()).then(zoned).otherwise(time)
    df = df.with_columns(time.alias("time"))
    return df.with_columns(
        pl.when(pl.col("time").is_not_null()).then(pl.col("_z").is_not_null()).alias("zoned"),
    ).drop("_d", "_t", "_f", "_z", "_us", "_iso", "_usg", strict=False)


# A clock with a year at the line start (TS_ISO, TS_US and general.py's layouts with a year:
# `2026-11-30 04:00:00`, `2026/11/30 04:00:00`, `11/30/2026 04:00:00`), behind an optional logger tag.
_DATED_CLOCK = (r"^[ \t]*(?:\[[A-Za-z_][A-Za-z0-9_.\-]*\][ \t]*)?\[?(?:(?P<y1>[0-9]{4})[-/](?P<m1>[0-9]{2})[-/]"
                r"(?P<d1>[0-9]{2})[T ](?P<t1>[0-9]{2}:[0-9]{2}:[0-9]{2})|(?P<m2>[0-9]{2})/(?P<d2>[0-9]{2})/"
                r"(?P<y2>[0-9]{4})[ ,]+(?P<t2>[0-9]{2}:[0-9]{2}:[0-9]{2}))")
UNREADABLE_TIME = "unreadable timestamp"
# What a line with a _DATED_CLOCK clock, and one with a TS_ISO clock, holds somewhere (for Python's re,
# which matches these, [0-9] and literals alone, as polars does)
_DATED_CLOCK_ANYWHERE = re.compile(r"[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}[T ][0-9]{2}:|[0-9]{2}/[0-9]{2}/[0-9]{4}")
ISO_DATE_ANYWHERE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _may_hold(text: pl.Series, rx: re.Pattern, literals: tuple[str, ...]) -> bool:
    """Whether a line of `text` may match `rx`, every match of which holds one of `literals`: a small
    text (small_text) is searched for `rx`, a big one for the literals (a literal search of every line
    costs a fraction of a regex's)."""
    small = small_text(text)
    if small is not None:
        return rx.search(small) is not None
    return any(text.str.contains(x, literal=True).any() for x in literals)


def drop_unreadable_clocks(frame: pl.DataFrame, skipped: Skipped) -> pl.DataFrame:
    """`frame` (line, text) without the lines whose clock is no time (month 13, hour 25) or names a
    year outside 1970..2200, counted as skipped as an nvidia-smi CSV counts them: the readers take
    such a stamp for no time, and its readings would be analyzed on their steps as if the log had
    no clock, without a word."""
    if not frame.height or not _may_hold(frame["text"], _DATED_CLOCK_ANYWHERE, ("-", "/")):
        return frame
    # the groups extracted once (each use of a struct field of the expression would extract them again)
    g = frame.select("line", pl.col("text").str.extract_groups(_DATED_CLOCK).alias("g")).unnest("g")

    def part(name: str) -> pl.Expr:
        return pl.coalesce(name + "1", name + "2")

    stamp = part("y") + "-" + part("m") + "-" + part("d") + " " + part("t")
    when = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
    bad = rows_where(g, stamp.is_not_null() & ~when.dt.year().is_between(1970, 2200).fill_null(False))["line"]
    if not bad.len():
        return frame
    skipped.add_lines(UNREADABLE_TIME, bad)
    return frame.filter(~pl.col("line").is_in(bad.implode()))


def strip_line_time(text: pl.Expr, us: bool = True, iso: bool = True) -> pl.Expr:
    """The line without its leading clock. `us=False` when no line has a TS_US clock (has_us_clock),
    `iso=False` when none has a TS_ISO date."""
    text = text.str.replace(TS_ISO, "") if iso else text
    return text.str.replace(TS_US, "") if us else text


def has_us_clock(text: pl.Series) -> bool:
    """Whether a line may start with the `%m/%d/%Y` clock (TS_US): it needs a '/'."""
    return _holds(text, "/", small_text(text))


def _holds(text: pl.Series, literal: str, small: str | None) -> bool:
    """Whether a line of `text` holds `literal`; `small`: small_text(text), searched in Python if not None."""
    return literal in small if small is not None else bool(text.str.contains(literal, literal=True).any())


# Text up to this size is searched for literals in Python, as one string: each polars query has a fixed
# cost that is many times the search of a small text (a job of many one-line logs pays it per file).
SMALL_TEXT_BYTES = 1 << 16
# Frames of up to this many rows are looked at in Python (the same reason)
SMALL_ROWS = 256


def small_text(text: pl.Series) -> str | None:
    """The lines of `text` joined by newlines, if they are small (SMALL_TEXT_BYTES); else None (search
    them with polars). A literal without a newline is in the string iff it is in one of the lines."""
    if text.estimated_size() > SMALL_TEXT_BYTES:
        return None
    return "\n".join(x for x in text.to_list() if x is not None)


def clock_of(*frames: pl.DataFrame) -> str:
    """Parsed.clock from the `zoned` flags of the rows: wall (all clocks zoned), wall-assumed, none."""
    cols = [f["zoned"] for f in frames if f is not None and "zoned" in f.columns]
    if sum(c.len() for c in cols) <= SMALL_ROWS:   # (a few rows: in Python, without a query each)
        flags = [x for c in cols for x in c.to_list() if x is not None]
        return "none" if not flags else "wall" if all(flags) else "wall-assumed"
    flags = [c.drop_nulls() for c in cols]
    flags = [s for s in flags if s.len()]
    if not flags:
        return "none"
    allz = pl.concat(flags)
    return "wall" if bool(allz.all()) else "wall-assumed"


def json_detail(*exprs: pl.Expr) -> pl.Expr:
    """A JSON object string from the given (aliased) expressions; nulls are dropped by the reader."""
    return pl.struct(*exprs).struct.json_encode()


# -- generic readings -----------------------------------------------------------------------------

def _pieces(df: pl.DataFrame) -> pl.DataFrame:
    """One row per reading context: tqdm refreshes (`\\r`) and ranks glued on one line
    (`...21534.0[Rank 0] (after 1 iterations)...`) are separate pieces of the same line."""
    small = small_text(df["text"])
    slash = _holds(df["text"], "/", small)
    iso = small is None or ISO_DATE_ANYWHERE.search(small) is not None
    body = strip_line_time(pl.col("text"), slash, iso).str.replace_all("\r", "\n", literal=True)
    if _holds(df["text"], "[Rank ", small):   # (else no regex to compile)
        body = body.str.replace_all(r"(\S)[ \t]*(\[Rank [0-9]+\])", "$1\n$2")
    if slash:   # (KEY_PAIR needs a `/`; so does TS_US, has_us_clock)
        body = body.str.replace_all(KEY_PAIR, "${k1}: ${n1}${u1}, ${k2}: ${n2}${u2}")
    split = body.str.split("\n")
    return (df.lazy().with_columns(split.alias("piece_text"))   # (one query: its fixed cost once)
            .explode("piece_text")
            .with_columns(_run_index("line").alias("piece")).collect())


def _run_index(*keys: str) -> pl.Expr:
    """`int_range(pl.len()).over(keys)` for rows whose groups are runs of neighbours (the rows one
    row became by explode): the same numbers without a group-by (2x faster on a month of readings)."""
    i = pl.int_range(pl.len(), dtype=pl.Int64)
    new = pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys])
    return i - pl.when(new).then(i).forward_fill()


def series_of_key(key: str) -> str | None:
    """`Max_Memory_Allocated` -> max_allocated. In Python: a handful of spellings, and each polars
    regex is compiled again once 32 others have been used since (its per-thread cache)."""
    k = key.lower().replace("_", " ").replace("memory ", "", 1)
    k = re.sub(r" memory$", "", re.sub(r"^max(\S)", r"max \1", k, count=1), count=1)
    return _SERIES_OF_KEY.get(k)


def _folded(pieces: pl.DataFrame) -> pl.DataFrame | str:
    """All the pieces' text, lowercased, as one string (for _pieces_hold): a literal search of one
    string costs a fraction of a case-insensitive search of each piece. (Small pieces: a Python string;
    past FOLD_BYTES, each piece lowercased on its own: a string of polars holds at most 4 GiB.)"""
    t = pl.col("piece_text")
    small = small_text(pieces["piece_text"])
    if small is not None:
        return small.lower()
    if (pieces.select(t.str.len_bytes().sum()).item() or 0) > FOLD_BYTES:
        return pieces.select(t.str.to_lowercase())
    return pieces.select(t.str.join("\n").str.to_lowercase())


FOLD_BYTES = 1 << 30


def _pieces_hold(folded: pl.DataFrame | str, words: dict[str, list[str]]) -> dict[str, bool]:
    """For each name: whether some piece holds one of its words, in any case (one query over _folded's
    string; its lowercasing also folds a few letters outside ASCII, which only lets a regex run). A
    word stands for a (?i) regex only if it has no k or s, which (?i) also matches outside ASCII (K, ſ)."""
    if isinstance(folded, str):   # (small pieces: _folded's string)
        return {name: any(x.lower() in folded for x in w) for name, w in words.items()}
    t = pl.col("piece_text")
    return dict(zip(words, folded.select(
        pl.any_horizontal([t.str.contains(x.lower(), literal=True) for x in w]).any().alias(name)
        for name, w in words.items()).row(0)))


def _all_matches(pieces: pl.DataFrame, rx: str) -> pl.DataFrame:
    """Every match of `rx` in each piece, one row each: line, piece and the named groups."""
    return (pieces.lazy().select("line", "piece", pl.col("piece_text").str.extract_all(rx).alias("m"))
            .explode("m").drop_nulls("m")
            .with_columns(pl.col("m").str.extract_groups(rx).alias("g")).unnest("g").collect())


def _readings(pieces: pl.DataFrame, folded: pl.DataFrame) -> pl.DataFrame:
    """All readings in the pieces (`folded`: their _folded text): line, piece, k, series, num, total,
    unit, gpu_arg."""
    t = pl.col("piece_text")
    parts = []
    kv = _all_matches(pieces, KV)
    if kv.height:
        # the series of each distinct key spelling (few), not of every reading
        series_of = {k: series_of_key(k) for k in set(kv["key"].to_list()) - {None}}
        parts.append(kv.select(
            "line", "piece", _run_index("line", "piece").alias("k"),
            pl.col("key").replace_strict(series_of, default=None, return_dtype=pl.String).alias("series"),
            "num", "total", pl.coalesce("unit", "punit").alias("unit"),
            pl.lit(None, dtype=pl.String).alias("gpu_arg"), pl.lit(None, dtype=pl.String).alias("default_unit"),
        ))

    # a shape whose word no piece holds is skipped, its regex not even compiled
    present = _pieces_hold(folded, {w: [w] for w in ("gpu", "torch.cuda.", "nvidia-smi", "free", "mem_")})
    if present["mem_"]:
        ab = _all_matches(pieces.filter(t.str.contains(MEM_ABBR)), MEM_ABBR)
        if ab.height:
            key = pl.col("key").str.to_lowercase()
            parts.append(ab.select(
                "line", "piece", (200 + _run_index("line", "piece")).alias("k"),
                pl.when(key.str.contains("alloc")).then(pl.lit("allocated")).otherwise(pl.lit("reserved")).alias("series"),
                "num", pl.lit(None, dtype=pl.String).alias("total"), "unit",
                pl.lit(None, dtype=pl.String).alias("gpu_arg"), pl.lit(None, dtype=pl.String).alias("default_unit"),
            ))

    def single(rx: str, word: str, k: int, series: pl.Expr, unit: pl.Expr, gpu: pl.Expr | None,
               default_unit: str | None, total: bool = False) -> None:
        if not present[word]:
            return
        hit = pieces.filter(t.str.contains(rx))
        if not hit.height:
            return
        g = hit.select("line", "piece", t.str.extract_groups(rx).alias("g")).unnest("g")
        parts.append(g.select(
            "line", "piece", pl.lit(k, dtype=pl.Int64).alias("k"), series.alias("series"), "num",
            (pl.col("total") if total else pl.lit(None, dtype=pl.String)).alias("total"), unit.alias("unit"),
            (gpu if gpu is not None else pl.lit(None, dtype=pl.String)).alias("gpu_arg"),
            pl.lit(default_unit, dtype=pl.String).alias("default_unit"),
        ))

    single(GPU_USED_TOTAL, "gpu", 100, pl.lit("reserved"), pl.col("unit"), None, None, total=True)
    single(TORCH_RAW, "torch.cuda.", 101,
           pl.when(pl.col("max").is_not_null()).then(pl.lit("max_")).otherwise(pl.lit(""))
           + pl.col("kind").replace({"cached": "reserved"}),
           pl.lit("B"), pl.col("dev").str.extract(r"([0-9]+)"), None)
    single(NVSMI_PRINT, "nvidia-smi", 102, pl.lit("memory.used"), pl.col("punit"), pl.col("dev"), None)
    # the one known producer computes MiB (available_cuda_memory_in_mbytes, MinkowskiEngine#359)
    single(FREE, "free", 103, pl.lit("free"), pl.coalesce("unit", "punit"), None, "MiB")
    if not parts:
        return pl.DataFrame(schema={"line": pl.Int64, "piece": pl.Int64, "k": pl.Int64, "series": pl.String,
                                    "num": pl.String, "total": pl.String, "unit": pl.String,
                                    "gpu_arg": pl.String, "default_unit": pl.String})
    return pl.concat(parts, how="vertical_relaxed").with_columns(pl.col("piece").cast(pl.Int64),
                                                                  pl.col("k").cast(pl.Int64))


def _piece_context(pieces: pl.DataFrame, folded: pl.DataFrame | str) -> pl.LazyFrame:
    """Per piece (`folded`: their _folded text): label (the tag), step and gpu read from the text in front of the first reading,
    a header unit such as `memory (MB)`, and a `total_memory` figure (a lazy query: extract_generic
    joins it to the readings in the same query)."""
    t = pl.col("piece_text")
    # the words the regexes below need: a regex whose word no piece holds is not run (nor compiled)
    has = _pieces_hold(folded, {"epoch": ["epoch"], "step": ["tep", "it"], "dict_step": ["step"],
                                "gpu": ["cuda", "gpu", "dev"], "rank": ["ran"], "total": ["total"], "(": ["("],
                                "[Rank": ["[Rank"], "phase": ["phase", "stage"]})
    null = pl.lit(None, dtype=pl.String)
    # in stages: a select computes an expression once per use (the text in front is used 8 times); one
    # lazy query, whose fixed cost is paid once
    staged = pieces.lazy().with_columns(t.str.slice(0, t.str.find(ANY_READING)).str.replace(LEVEL, "").alias("_pre"))
    pre = pl.col("_pre")
    staged = staged.with_columns(
        (pre.str.replace(r"^\s*\[Rank [0-9]+\]", "") if has["[Rank"] else pre).str.strip_chars(" \t|:,;-=>")
        .alias("_clean"),
        pre.str.extract(r"\[([^\[\]]+)\][\s|:\-]*$").alias("_tag"),
        (t.str.extract(rf"(?i:['\"]?\bepoch['\"]?)[ \t]*[:=][ \t]*({NUM})") if has["epoch"] else null).alias("_epoch"),
        (t.str.extract(PHASE_KEY) if has["phase"] else null).alias("_phase"),
    )
    pre_clean, tag, epoch, phase = pl.col("_clean"), pl.col("_tag"), pl.col("_epoch"), pl.col("_phase")
    label = (pl.when(phase.is_not_null()).then(phase)
             .when(tag.is_not_null()).then(tag.str.strip_chars())
             .when((pre_clean.str.len_chars() > 0) & (pre_clean.str.len_chars() <= 60)
                   & ~pre_clean.str.starts_with("{"))
             .then(pre_clean)
             .when(epoch.is_not_null()).then(pl.lit("epoch ") + epoch)
             .otherwise(pl.lit(None, dtype=pl.String)))
    step_m = pre.str.extract_groups(STEP_IN_TAG) if has["step"] else None
    dict_step = t.str.extract(r"['\"](?:global_)?step['\"]\s*:\s*([0-9]+)\b") if has["dict_step"] else null
    gpu_m = pre.str.extract_groups(DEVICE_IN_TAG) if has["gpu"] else None
    rank, local = ranks.words(pre) if has["rank"] else (pl.lit(None, pl.Int64), pl.lit(None, pl.Int64))
    total = t.str.extract_groups(TOTAL) if has["total"] else None
    return staged.select(
        "line", "piece", "time", "zoned", "marker_step",
        label.alias("label"),
        (pl.coalesce(step_m.struct.field("1"), step_m.struct.field("2"), dict_step) if step_m is not None
         else dict_step).cast(pl.Int64, strict=False).alias("tag_step"),
        (pl.coalesce(*[gpu_m.struct.field(str(i)) for i in range(1, 4)]) if gpu_m is not None else null).alias("tag_gpu"),
        rank.alias("tag_rank"), local.alias("tag_local_rank"),
        _PIECE_HEADER_UNIT if has["("] else null.alias("header_unit"),
        (bytes_expr(total.struct.field("num"), pl.coalesce(total.struct.field("unit"), total.struct.field("punit")))
         if total is not None else pl.lit(None, dtype=pl.Int64)).alias("piece_total"),
    )


def extract_generic(df: pl.DataFrame, zone: str, skipped: Skipped, series_only: bool = False,
                    unitless: list[int] | None = None, carry: dict | None = None) -> pl.DataFrame:
    """Readings of the free-text shapes from `df` (line, text). Returns sample rows with the
    working columns line, piece, k, zoned. `series_only` (for sniffing): only `line` and `series` of
    the same rows, without what does not decide them (clocks, step markers, labels, totals).
    `unitless`: where to leave the lines whose every reading lacks a unit instead of counting them
    (the general reader may know the unit from the key, e.g. torch.cuda's function names).
    `carry["line"]` is set to the last step-marker line (line, text), for the part of a file that
    follows (reader.Parts puts it in front of that part's lines)."""
    has_reading = pl.col("text").str.contains(ANY_READING)
    # ANY_READING is part of GENERIC_HINT: without step markers, a line with a reading is all it takes
    # (and GENERIC_HINT, ~1.7 ms to compile, is not compiled for sniffing)
    hint = rows_where(df, (has_reading if series_only else pl.col("text").str.contains(GENERIC_HINT))
                      & ~pl.col("text").str.contains(NOT_OURS))
    if not hint.height:
        return pl.DataFrame()
    if not hint["line"].is_sorted():   # (a check without a query)
        hint = hint.sort("line")
    if not series_only:
        body = strip_line_time(pl.col("text"), has_us_clock(hint["text"]))
        # `Iter 8 Time 0.575` on a line of its own: the step of the readings that follow it
        hint = hint.lazy().with_columns(has_reading.alias("_reading")).with_columns(
            pl.when(~pl.col("_reading")).then(body.str.extract(STEP_MARKER).cast(pl.Int64, strict=False))
            .alias("marker_step")).collect()
        if carry is not None:
            last = hint.filter(pl.col("marker_step").is_not_null()).tail(1)
            if last.height:
                carry["line"] = owned(last.select("line", "text"))
        if not hint["_reading"].any():   # (step markers alone, as beside the general reader's lines: no clock to read)
            return pl.DataFrame()
        hint = with_line_time(hint.drop("_reading"), zone).with_columns(pl.col("marker_step").forward_fill())
    pieces = _pieces(rows_where(hint, has_reading))
    if not pieces.height:
        return pl.DataFrame()
    folded = _folded(pieces)
    readings = _readings(pieces, folded)
    if not readings.height:
        return pl.DataFrame()
    # a header unit (`memory (MB)`) is the only context that decides whether a reading counts
    ctx = (pieces.lazy().select("line", "piece", _PIECE_HEADER_UNIT) if series_only
           else _piece_context(pieces, folded))
    unit = pl.coalesce("unit", "header_unit", "default_unit")
    r = readings.lazy().join(ctx, on=["line", "piece"], how="left", maintain_order="left").with_columns(
        unit.alias("unit"),
        bytes_expr(pl.col("num"), unit).alias("bytes"),
        bytes_expr(pl.col("total"), unit).alias("total_bytes"),
    ).collect()
    return checked(r, skipped, series_only, unitless)


def block_heads(lines: pl.DataFrame) -> list[pl.DataFrame]:
    """The block heads among `lines` (line, text), with their step (`block_step`) or their epoch
    (`block_epoch`): none, or one frame."""
    n = pl.col("text").str.extract(BLOCK_HEAD).cast(pl.Int64, strict=False)
    epoch = pl.col("text").str.contains(_EPOCH_HEAD)
    heads = lines.select("line", pl.when(~epoch).then(n).alias("block_step"), pl.when(epoch).then(n).alias("block_epoch"),
                         n.is_not_null().alias("head")).filter("head").drop("head")
    return [heads] if heads.height else []


def block_steps(r: pl.DataFrame, heads: pl.DataFrame) -> pl.DataFrame:
    """`r`'s readings without a step of their own take the step of the block head before them."""
    heads = heads.filter(pl.col("block_step").is_not_null()).select("line", "block_step").sort("line")
    if not heads.height:
        return r
    r = r.sort("line").join_asof(heads, on="line", strategy="backward", check_sortedness=False)
    return r.with_columns(pl.coalesce("step", "block_step").alias("step")).drop("block_step")


def checked(r: pl.DataFrame, skipped: Skipped, series_only: bool, unitless: list[int] | None) -> pl.DataFrame:
    """extract_generic's rows from its readings `r` (each with its context, unit and bytes), in the order
    counted: the readings that fail a check counted as skipped, or left in `unitless`."""
    series, unit, value = pl.col("series"), pl.col("unit"), pl.col("bytes")
    checks = {  # in the order they are counted
        "memory value without a unit": series.is_not_null() & unit.is_null(),
        "memory value out of range": series.is_not_null() & unit.is_not_null() & value.is_null(),
        "negative memory value": value < 0,
        "unknown memory key": series.is_null(),
    }
    # one query says which checks any reading fails (usually none); only those are looked up
    failed = r.select(c.fill_null(False).any().alias(why) for why, c in checks.items()).row(0, named=True)
    no_unit = checks["memory value without a unit"]
    if unitless is not None and failed["memory value without a unit"]:
        left = r.group_by("line").agg(no_unit.fill_null(False).all().alias("all")).filter("all")["line"]
        unitless.extend(left.to_list())
        r = r.filter(~pl.col("line").is_in(left.implode()))
    for why, check in checks.items():
        if failed[why]:
            skipped.add_lines(why, rows_where(r, check)["line"].unique(maintain_order=True))
    good = rows_where(r, series.is_not_null() & (value >= 0)) if any(failed.values()) else r
    if series_only:
        return good.select("line", "series")
    return good.select(
        "line", "piece", "k", "time", "zoned", "series", "bytes",
        pl.coalesce("total_bytes", "piece_total").alias("total_bytes"),
        pl.coalesce("tag_step", "marker_step").alias("step"),
        "label",
        pl.coalesce("gpu_arg", "tag_gpu").alias("gpu"),
        pl.col("tag_rank").alias("rank"), pl.col("tag_local_rank").alias("local_rank"),
        pl.col("tag_step").is_not_null().alias("step_tag"),
    )


# -- sniffing and notes -----------------------------------------------------------------------------

def head_frame(head: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line": range(1, len(head) + 1), "text": head}, schema={"line": pl.Int64, "text": pl.String})


# A job folder often holds the training script itself, whose docstrings and f-strings show the very
# lines it prints: source code is not a log.
_SOURCE_CODE = re.compile(r"^(?:import [\w.]+|from [\w.]+ import |def \w+\(|class \w+[:(]|#include\s*[<\"]"
                          r"|#!/usr/bin/env python)")


def looks_like_source_code(head: list[str]) -> bool:
    return sum(1 for ln in head if _SOURCE_CODE.match(ln)) >= 2


def notes(parsed: Parsed, units: bool = True) -> list[str]:
    """What a reader of the report should know about these readings."""
    out = []
    if parsed.samples.height <= SMALL_ROWS:   # (a few rows: in Python, without a query each)
        rows = [(x, st, tm) for x, st, tm in zip(*(parsed.samples[c].to_list() for c in ("series", "step", "time")))
                if x is not None and not x.startswith("hf.")]
        if not rows:
            return out
        untimed = all(st is None and tm is None for _, st, tm in rows)
        series = {x for x, _, _ in rows}
    else:
        s = rows_where(parsed.samples, ~pl.col("series").str.starts_with("hf."))
        if not s.height:
            return out
        untimed = s["step"].is_null().all() and s["time"].is_null().all()
        series = set(s["series"].unique().to_list())
    if untimed:
        out.append("memory readings carry neither a step nor a clock: they are ordered by their place in the file")
    if units and series & {"allocated", "reserved", "max_allocated", "max_reserved", "free"}:
        out.append("MB/GB in printed memory lines are read as MiB/GiB")
    if "free" in series:
        out.append("'Free GPU ram' without a unit is read as MiB")
    if FALL in series:
        out.append(FALL_NOTE)
    return out
