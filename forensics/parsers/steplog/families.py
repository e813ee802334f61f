"""The line extractors of the framework step-log families, DeepSpeed, Megatron-LM and HF Trainer (each
format is described in its entry module: deepspeed.py, megatron.py, hf_trainer.py), and their sniffs.

Each stays beside the general reader (general.py) for a structure it does not model: DeepSpeed's `MA`/`CA`
keys name no memory word and its label is the line before; Megatron's lines hold no memory figure, its
iteration line gives the clock of the readings printed before it; HF Trainer's metrics block is printed
once (a one-off form to the general reader) and its `*_delta` keys are changes, which may be negative.

Beside each family's regexes, the lines its extractor reads (`*_LINES`: the reader keeps all of them)
and the literals that every such line holds (FAMILY_LITERALS, for the reader's prefilter); and the
lines worth a look for `scan` (FAMILY_HINT) with their literals.
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics import clock
from forensics.frames import rows_where
from forensics.parsers.steplog import generic
from forensics.parsers.steplog.generic import NUM, UNIT
from forensics.units import bytes_expr

# -- DeepSpeed see_memory_usage --------------------------------------------------------------------

_MA_LINE = rf"(?:^|[\s|:\]])MA[ \t]+{NUM}[ \t]*{UNIT}\b.*\bMax_MA\b"
_CPU = rf"CPU Virtual Memory:\s+used\s*=\s*(?P<num>{NUM})\s*(?P<unit>{UNIT})"
_SEE = r"see_memory_usage\]"
_MP = r"^\s*\[(?P<rank>[0-9]+)\] mp: "
_FIELDS = (("MA", "allocated"), ("Max_MA", "max_allocated"), ("CA", "reserved"), ("Max_CA", "max_reserved"),
           ("NV", "memory.used"))
_LOGGER = r"^\s*\[[^\]]*\]\s*\[(?:INFO|WARNING|DEBUG|ERROR|CRITICAL)\]\s*\[[\w.\-]+:[0-9]+:\w+\]\s?"
_RANK = r"\[Rank ([0-9]+)\]"

# DeepSpeed's own logger format, and words that only DeepSpeed logs use
_DS_LOGGER_RE = re.compile(r"^\s*\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}\] \[(?:INFO|WARNING|DEBUG|ERROR)\] "
                           r"\[[\w.\-]+:[0-9]+:\w+\] ")
_DS_WORDS_RE = re.compile(r"DeepSpeed|deepspeed|log_dist|real_accelerator\.py|ds_accelerator")


def sniff_deepspeed(head: list[str]) -> str | None:
    # (every test below needs one of these literals: most heads hold none, and are passed in one search)
    text = "\n".join(head)
    if "Max_MA" not in text and "see_memory_usage]" not in text and not _DS_WORDS_RE.search(text):
        return None
    return _sniff_deepspeed_lines(head)


def _sniff_deepspeed_lines(head: list[str]) -> str | None:
    ma = re.compile(_MA_LINE)
    for i, ln in enumerate(head, 1):
        if ma.search(ln):
            return f"DeepSpeed see_memory_usage reading 'MA … Max_MA …' on line {i}"
        if "see_memory_usage]" in ln:
            return f"DeepSpeed see_memory_usage log line on line {i}"
    logger = [i for i, ln in enumerate(head, 1) if _DS_LOGGER_RE.match(ln)]
    if logger and any(_DS_WORDS_RE.search(ln) for ln in head):
        return f"DeepSpeed logger lines ('[time] [LEVEL] [file.py:N:func]') from line {logger[0]}"
    return None


def _body(text: pl.Expr) -> pl.Expr:
    """The message of a line: without clock, DeepSpeed logger prefix, `[rank] mp:` and `[Rank N]`."""
    t = text.str.replace(r"^.*?" + _SEE + r"\s?", "")
    t = generic.strip_line_time(t.str.replace(_MP, "")).str.replace(_LOGGER, "")
    return t.str.replace(r"^\s*(?:\[(?:INFO|WARNING|DEBUG|ERROR)\]\s*)?(?:\[[\w.\-]+:[0-9]+:\w+\]\s*)?", "") \
        .str.replace(r"^\s*" + _RANK + r"\s*", "").str.replace(r"^\s*\[[0-9]+\] mp: ", "")


def extract_deepspeed(frame: pl.DataFrame, zone: str) -> pl.DataFrame:
    """Sample rows (line, piece, k, time, zoned, series, bytes, step, label, gpu) of every
    see_memory_usage line in `frame`; the message lines they use are included as rows with no series
    so that the caller can leave them out of the generic pass."""
    t = pl.col("text")
    work = frame.with_columns(t.shift(1).alias("prev_text"), pl.col("line").shift(1).alias("prev_line"))
    is_ma, is_cpu, is_see, is_mp = (t.str.contains(_MA_LINE), t.str.contains(_CPU), t.str.contains(_SEE),
                                    t.str.contains(_MP))
    rows = rows_where(work, is_ma | is_cpu | is_see | is_mp).sort("line")
    if not rows.height:
        return pl.DataFrame(schema={"line": pl.Int64})
    rows = generic.with_line_time(rows, zone).with_columns(
        is_ma.alias("is_ma"), is_cpu.alias("is_cpu"), _body(t).alias("body"),
        pl.coalesce(t.str.extract(_MP), t.str.extract(_RANK), pl.lit("0")).alias("gpu"),
    )
    rows = rows.with_columns((~pl.col("is_ma") & ~pl.col("is_cpu")).alias("is_msg"))
    ma_at = pl.col("body").str.find(r"(?:^|[\s|:\]])MA[ \t]+[0-9]")
    same_line = pl.col("body").str.slice(0, ma_at).str.strip_chars(" \t|:-")
    prev_msg = pl.when(pl.col("is_msg").shift(1)).then(pl.col("body").shift(1).str.strip_chars())
    # print() copies have no logger: the message is simply the line before
    plain_prev = pl.when(
        (pl.col("prev_line") == pl.col("line") - 1) & pl.col("text").str.contains(r"^\s*MA[ \t]")
        & ~pl.col("prev_text").str.contains(r"MA[ \t]+[0-9.]|CPU Virtual Memory|^\s*$")
    ).then(pl.col("prev_text").str.strip_chars())
    rows = rows.with_columns(
        pl.when(pl.col("is_ma")).then(pl.coalesce(
            pl.when(same_line.str.len_chars() > 0).then(same_line), prev_msg, plain_prev)).alias("label"))
    # the CPU line belongs to the call of the MA line before it (on the same line in the fork form)
    rows = rows.with_columns(
        pl.when(pl.col("is_cpu") & ~pl.col("is_ma") & pl.col("is_ma").shift(1))
        .then(pl.col("label").shift(1)).otherwise(pl.col("label")).alias("label"))

    parts = []
    ma_rows = rows.filter(pl.col("is_ma"))
    for k, (field, series) in enumerate(_FIELDS):
        rx = rf"(?:^|[\s|:\]]){field}[ \t]+(?P<num>{NUM})[ \t]*(?P<unit>{UNIT})\b"
        g = ma_rows.filter(t.str.contains(rx)).with_columns(t.str.extract_groups(rx).alias("g")).unnest("g")
        parts.append(g.select("line", pl.lit(k).alias("k"), "time", "zoned", pl.lit(series).alias("series"),
                              _ds_bytes(), "label", "gpu"))
    cpu = rows.filter(pl.col("is_cpu")).with_columns(t.str.extract_groups(_CPU).alias("g")).unnest("g")
    parts.append(cpu.select("line", pl.lit(len(_FIELDS)).alias("k"), "time", "zoned",
                            pl.lit("host.used").alias("series"), _ds_bytes(), "label",
                            pl.lit(None, dtype=pl.String).alias("gpu")))
    out = pl.concat([p.with_columns(pl.col("k").cast(pl.Int64)) for p in parts], how="vertical")
    # message lines travel along without a series so that the generic pass leaves them alone
    msgs = rows.filter(pl.col("is_msg")).select("line")
    out = pl.concat([out, msgs], how="diagonal")
    return out.with_columns(pl.lit(0, dtype=pl.Int64).alias("piece")).filter(
        pl.col("series").is_null() | pl.col("bytes").is_not_null())


def _ds_bytes() -> pl.Expr:
    return bytes_expr(pl.col("num"), pl.col("unit")).alias("bytes")


# -- Megatron-LM datetime and iteration lines ------------------------------------------------------

_DATETIME = r"^\s*\[(?P<what>[^\]]+)\] datetime: (?P<dt>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2})"
_ITERATION = r"\biteration\s+(?P<step>[0-9]+)\s*/\s*(?P<of>[0-9]+)\s*\|"
_STEP_MS = rf"elapsed time per iteration \(ms\):\s*(?P<ms>{NUM})"

_SIGNS = (
    (re.compile(r"\[Rank [0-9]+\] .*memory \((?:MB|GB)\) \| allocated: "), "Megatron report_memory line"),
    (re.compile(_DATETIME), "Megatron '[...] datetime:' line"),
    (re.compile(_ITERATION + r".*consumed samples:"), "Megatron iteration log line"),
    (re.compile(r"^-{8,} arguments -{8,}$"), "Megatron argument dump"),
    (re.compile(r"^using world size: [0-9]+, data-parallel[- ]size: [0-9]+"), "Megatron parallel-size banner"),
    (re.compile(r"^Theoretical memory footprints: weight and optimizer="), "Megatron memory estimate"),
    (re.compile(r"^> (?:initializing torch distributed|building \S+ model|compiling dataset index builder)"),
     "Megatron start-up line"),
)
# A literal that every match of each sign holds, in _SIGNS' order (a head holding none is no Megatron log's)
_SIGN_LITERALS = ("| allocated: ", "] datetime: ", "consumed samples:", " arguments ", "using world size: ",
                  "Theoretical memory footprints: ", "> initializing torch distributed", "> building ",
                  "> compiling dataset index builder")


def sniff_megatron(head: list[str]) -> str | None:
    text = "\n".join(head)
    if not any(x in text for x in _SIGN_LITERALS):
        return None
    return _sniff_megatron_lines(head)


def _sniff_megatron_lines(head: list[str]) -> str | None:
    for i, ln in enumerate(head, 1):
        for rx, what in _SIGNS:
            if rx.search(ln):
                return f"{what} on line {i}"
    return None


# (an empty frame's copy costs a fraction of making one from its schema: a small file's reading pays it)
_NO_TIMES = pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64, "time": pl.Datetime("us", "UTC"),
                                 "zoned": pl.Boolean})


def extract_megatron(frame: pl.DataFrame, zone: str, text: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(marker events, iteration clocks: line, step, time, zoned) from `frame` (line, text). `text`: the
    frame's lines as one string (generic.small_text), if small: a pass whose literal it lacks is not run."""
    t = pl.col("text")
    events = []
    dt = rows_where(frame, t.str.contains(_DATETIME)) if holds_any(text, MEGATRON_LITERALS[:1]) else frame.clear()
    if dt.height:
        g = dt.with_columns(t.str.extract_groups(_DATETIME).alias("g")).unnest("g")
        naive = pl.col("dt").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
        events.append(g.select(
            clock.localize(naive, zone).alias("time"), "line", pl.lit("marker").alias("kind"),
            generic.json_detail(pl.col("what").str.strip_chars().alias("what")).alias("detail"),
            t.alias("text"), pl.lit(False).alias("zoned"),
        ))
    it = rows_where(frame, t.str.contains(_ITERATION)) if holds_any(text, MEGATRON_LITERALS[1:]) else frame.clear()
    times = _NO_TIMES.clear()
    if it.height:
        g = generic.with_line_time(it, zone).with_columns(
            t.str.extract_groups(_ITERATION).alias("g"), t.str.extract(_STEP_MS).cast(pl.Float64, strict=False)
            .alias("step_ms")).unnest("g")
        g = g.with_columns(pl.col("step").cast(pl.Int64, strict=False), pl.col("of").cast(pl.Int64, strict=False))
        events.append(g.select(
            "time", "line", pl.lit("marker").alias("kind"),
            generic.json_detail(pl.lit("iteration").alias("what"), "step", "of", "step_ms").alias("detail"),
            t.alias("text"), "zoned",
        ))
        times = g.filter(pl.col("time").is_not_null()).select("line", "step", "time", "zoned")
    ev = pl.concat(events, how="vertical") if events else pl.DataFrame(schema={"line": pl.Int64})
    return ev, times


# -- HF Trainer metrics blocks ---------------------------------------------------------------------

_BANNER = r"\*{5} (?P<split>\w+) metrics \*{5}"
# "  key = value" as log_metrics writes it: key after two blanks at the start of the message
_KV_LINE = r"(?:^|[^\w\s\"'(]\s)\s+(?P<key>[A-Za-z_]\w*)\s+=\s+(?P<val>[^=\s][^=]*?)\s*$"
_MEM_VALUE = r"^(?P<num>-?[0-9]+)\s*(?P<unit>[KMGT]?i?B)$"

_BANNER_RE = re.compile(_BANNER)
_MEM_LINE_RE = re.compile(r"(?:^|\s)\w+_mem_\w+\s+=\s+-?[0-9]+\s*[KMGT]?i?B\s*$")
_RUNNING_RE = re.compile(r"\*{5} Running (?:training|Evaluation|Prediction) \*{5}")


def sniff_hf_trainer(head: list[str]) -> str | None:
    # (the banner and the running line hold `*****`, a memory metric `_mem_`: most heads hold neither)
    text = "\n".join(head)
    if HF_BANNER not in text and "_mem_" not in text:
        return None
    return _sniff_hf_trainer_lines(head)


def _sniff_hf_trainer_lines(head: list[str]) -> str | None:
    for i, ln in enumerate(head, 1):
        if _BANNER_RE.search(ln):
            return f"HF Trainer metrics block on line {i}"
        if _MEM_LINE_RE.search(ln):
            return f"HF Trainer memory metric ('..._mem_... = N MB') on line {i}"
        if _RUNNING_RE.search(ln):
            return f"HF Trainer banner on line {i} (its metrics come at the end)"
    return None


def extract_hf_trainer(frame: pl.DataFrame, zone: str, skipped=None,
                       text: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples, marker events) of the metrics blocks in `frame` (line, text). A negative figure that
    is not a `*_delta` (no memory holds less than nothing) is left out and counted in `skipped`.
    `text` as extract_megatron's."""
    t = pl.col("text")
    none = pl.DataFrame(schema={"line": pl.Int64})
    if text is not None and HF_BANNER not in text and not re.search(HF_KEY_SIGN, text):
        return none, none
    rows = rows_where(frame, t.str.contains(_BANNER) | t.str.contains(_KV_LINE)).sort("line")
    if not rows.height:
        return none, none
    rows = rows.with_columns(
        t.str.extract(_BANNER).alias("split"),
        t.str.extract_groups(_KV_LINE).alias("kv"),
    ).unnest("kv").with_columns(
        pl.when(pl.col("split").is_not_null()).then(pl.lit(None, dtype=pl.String)).otherwise("key").alias("key"))
    is_kv = pl.col("key").is_not_null()
    # a block is a banner (or a first key line) and the key lines right below it
    rows = rows.with_columns(
        ((~is_kv) | (pl.col("line") != pl.col("line").shift(1) + 1) | pl.col("line").shift(1).is_null())
        .cum_sum().alias("block"))
    rows = rows.with_columns(
        (pl.col("split").first().over("block") + " metrics").alias("what"),
        pl.col("val").str.extract_groups(_MEM_VALUE).alias("mv"),
    ).unnest("mv")
    mem = rows.filter(is_kv & pl.col("key").str.contains("_mem_") & pl.col("num").is_not_null())
    blocks_with_content = rows.group_by("block").agg(
        pl.col("split").is_not_null().any().alias("has_banner"),
        (pl.col("key").str.contains("_mem_") & pl.col("num").is_not_null()).any().alias("has_mem"),
    ).filter(pl.col("has_banner") | pl.col("has_mem"))["block"]
    rows = generic.with_line_time(rows.filter(pl.col("block").is_in(blocks_with_content.implode())), zone)

    samples = none
    if mem.height:
        mem = rows.join(mem.select("line"), on="line", how="semi")
        samples = mem.select(
            "line", pl.lit(0).alias("piece"), pl.lit(0).alias("k"), "time", "zoned",
            (pl.lit("hf.") + pl.col("key")).alias("series"),
            bytes_expr(pl.col("num"), pl.col("unit")).alias("bytes"),
            pl.col("what").alias("label"),
        ).filter(pl.col("bytes").is_not_null())
        negative = (pl.col("bytes") < 0) & ~pl.col("series").str.ends_with("_delta")
        if skipped is not None:
            skipped.add_lines("negative memory value", samples.filter(negative)["line"].to_list())
        samples = samples.filter(~negative)

    events = []
    for block in rows.partition_by("block", maintain_order=True):  # a handful per file
        first = block.row(0, named=True)
        metrics = {r["key"]: r["val"] for r in block.iter_rows(named=True) if r["key"] is not None}
        detail = {"what": first["what"] or "metrics", "metrics": metrics}
        events.append({"time": first["time"], "line": first["line"], "kind": "marker",
                       "detail": json.dumps(detail), "text": first["text"], "zoned": first["zoned"]})
    ev = pl.DataFrame(events, schema={"time": pl.Datetime("us", "UTC"), "line": pl.Int64, "kind": pl.String,
                                      "detail": pl.String, "text": pl.String, "zoned": pl.Boolean}) if events else none
    return samples, ev


def literals_held(frame: pl.DataFrame) -> str:
    """For a frame too big for small_text: the families' literals that its lines hold, one a line, in a
    query or two of literal searches. holds_any and extract_hf_trainer read it as they read a small frame's
    text: a literal is in it iff a line holds it (HF_KEY_SIGN's match, iff a line has one, as ` = `)."""
    t = pl.col("text")
    # (FAMILY_PLAIN_LITERALS is _HELD as a regex, which finds them several times faster than contains_any)
    some, kv = frame.select(t.str.contains(FAMILY_PLAIN_LITERALS).any().alias("some"),
                            t.str.contains(HF_KEY_SIGN).any().alias("kv")).row(0)
    found = (frame.select(*(t.str.contains(x, literal=True).any().alias(str(i)) for i, x in enumerate(_HELD))).row(0)
             if some else [False] * len(_HELD))   # (one search for all of them first: most logs hold none)
    return "\n".join([x for x, hit in zip(_HELD, found) if hit] + ([" = "] if kv else []))


def holds_any(text: str | None, literals) -> bool:
    """Whether `text` (generic.small_text; None: not searched) may hold a line with one of `literals`."""
    return text is None or any(x in text for x in literals)


# -- what the reader keeps, what scan looks at -----------------------------------------------------

# The lines each extractor reads (DeepSpeed also takes a label from the line before each of its own).
DEEPSPEED_LINES = "|".join(generic.unnamed(r) for r in (_MA_LINE, _CPU, _SEE, _MP))
MEGATRON_LINES = "|".join(generic.unnamed(r) for r in (_DATETIME, _ITERATION))
HF_TRAINER_LINES = "|".join(generic.unnamed(r) for r in (_BANNER, _KV_LINE))
FAMILY_LINES = "|".join([DEEPSPEED_LINES, MEGATRON_LINES, HF_TRAINER_LINES])
# The family lines that hold the families' memory readings (Megatron's iteration and datetime lines
# give a step and a clock only: a memory key on them is the general reader's, e.g. NeMo's
# `iteration 8/29 | … | max_memory_reserved: 57466159104`)
FAMILY_MEMORY_LINES = "|".join([DEEPSPEED_LINES, HF_TRAINER_LINES])
# What every line of a family holds, as written: a DEEPSPEED_LINES line one of DEEPSPEED_LITERALS, a
# MEGATRON_LINES line one of MEGATRON_LITERALS, a HF_TRAINER_LINES line the banner's `*****` or `=` between
# blanks (HF_KEY_SIGN; Python's `\s` takes every blank that polars' does)
DEEPSPEED_LITERALS = ("Max_MA", "CPU Virtual Memory:", "see_memory_usage]", "] mp: ")
MEGATRON_LITERALS = ("] datetime: ", "iteration")
HF_BANNER = "*****"
HF_KEY_SIGN = r"\s=\s"
# the literals that the reader's passes test a part's text for (literals_held)
_HELD = (*DEEPSPEED_LITERALS, *MEGATRON_LITERALS, HF_BANNER)
# The plain ones (_HELD) as a regex, and all of them (for the reader's prefilter)
FAMILY_PLAIN_LITERALS = "|".join(re.escape(x) for x in _HELD)
FAMILY_LITERALS = f"{FAMILY_PLAIN_LITERALS}|{HF_KEY_SIGN}"

# The family lines that can hold a reading, for `scan` (which reads no label and no other metric).
FAMILY_HINT = "|".join([
    r"see_memory_usage\]|\] mp: |\bMax_MA [0-9.]+|CPU Virtual Memory:",     # DeepSpeed
    r"\] datetime: [0-9]{4}-|\biteration\s+[0-9]+\s*/\s*[0-9]+\s*\|",                # Megatron
    r"\*{5} \w+ metrics \*{5}|\w_mem_\w+\s*=\s*-?[0-9]+\s*[KMGT]?i?B",         # HF Trainer
])
# Every FAMILY_HINT line holds one of these as written; lowercased, one of the block literals.
FAMILY_HINT_LITERALS = r"see_memory_usage\]|\] mp: |Max_MA|CPU Virtual Memory:|\] datetime: |iteration|\*{5}|mem_"
FAMILY_HINT_BLOCK_LITERALS = ("see_memory_usage]", "] mp: ", "max_ma", "cpu virtual memory:", "] datetime: ",
                              "iteration", "*****", "mem_")
