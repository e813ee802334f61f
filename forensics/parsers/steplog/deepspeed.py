"""DeepSpeed `see_memory_usage` lines (deepspeed/runtime/utils.py; docs/formats.md §4.4).

Three log lines a call, only on rank 0:

    [2023-11-17 11:03:46,600] [INFO] [utils.py:802:see_memory_usage] DeepSpeedZeRoOffload initialize [begin]
    [2023-11-17 11:03:46,601] [INFO] [utils.py:803:see_memory_usage] MA 26.38 GB         Max_MA 26.38 GB         CA 26.71 GB         Max_CA 27 GB
    [2023-11-17 11:03:46,602] [INFO] [utils.py:810:see_memory_usage] CPU Virtual Memory:  used = 322.57 GB, percent = 17.1%

GB is value/2**30 (GiB); Max_CA is rounded to a whole number. The message line before the MA line is the
label. Copies of the function print without the logger (`print(message)`, MB or B units), put the
message on the MA line (`log_dist(f"{message} MA ...")`), or use the fork form
`[{rank}] mp: MA 0.00 GB | Max_MA ... | CA ... | Max_CA ... | NV ... GB | CPU Virtual Memory: ...`.

Series: MA -> allocated, Max_MA -> max_allocated, CA -> reserved (torch.cuda.memory_reserved),
Max_CA -> max_reserved, NV -> memory.used (NVML's device-wide used memory, the figure nvidia-smi shows),
CPU Virtual Memory used -> host.used (total - available, not this process). PEAK_MA (a running maximum
some copies add) is not read: Max_MA already carries the peak between calls.
"""
from __future__ import annotations

import re

import polars as pl

from forensics.units import bytes_expr
from forensics.parsers.steplog import markers as stepmem
from forensics.parsers.steplog.markers import NUM, UNIT
from forensics.frames import rows_where

NAME = "deepspeed-memory"
COVERS = ("step-markers",)  # parse reads the generic step-marker lines too

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


def sniff(head: list[str]) -> str | None:
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
    t = stepmem.strip_line_time(t.str.replace(_MP, "")).str.replace(_LOGGER, "")
    return t.str.replace(r"^\s*(?:\[(?:INFO|WARNING|DEBUG|ERROR)\]\s*)?(?:\[[\w.\-]+:[0-9]+:\w+\]\s*)?", "") \
        .str.replace(r"^\s*" + _RANK + r"\s*", "").str.replace(r"^\s*\[[0-9]+\] mp: ", "")


def extract(frame: pl.DataFrame, zone: str) -> pl.DataFrame:
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
    rows = stepmem.with_line_time(rows, zone).with_columns(
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
                              _bytes(), "label", "gpu"))
    cpu = rows.filter(pl.col("is_cpu")).with_columns(t.str.extract_groups(_CPU).alias("g")).unnest("g")
    parts.append(cpu.select("line", pl.lit(len(_FIELDS)).alias("k"), "time", "zoned",
                            pl.lit("host.used").alias("series"), _bytes(), "label",
                            pl.lit(None, dtype=pl.String).alias("gpu")))
    out = pl.concat([p.with_columns(pl.col("k").cast(pl.Int64)) for p in parts], how="vertical")
    # message lines travel along without a series so that the generic pass leaves them alone
    msgs = rows.filter(pl.col("is_msg")).select("line")
    out = pl.concat([out, msgs], how="diagonal")
    return out.with_columns(pl.lit(0, dtype=pl.Int64).alias("piece")).filter(
        pl.col("series").is_null() | pl.col("bytes").is_not_null())


def _bytes() -> pl.Expr:
    return bytes_expr(pl.col("num"), pl.col("unit")).alias("bytes")


def parse(src, opts):
    parsed = stepmem.extract_all(src.frame(), src, opts)
    parsed.notes.append("DeepSpeed GB are GiB (value/2**30); Max_CA is rounded to a whole GiB")
    if (parsed.samples["series"] == "memory.used").any():
        parsed.notes.append("NV (NVML used memory of the whole device) is read as memory.used")
    if (parsed.samples["series"] == "host.used").any():
        parsed.notes.append("'CPU Virtual Memory used' is the host's used memory (total - available), "
                            "not this process's")
    parsed.notes.extend(stepmem.notes(parsed, units=False))
    return parsed
