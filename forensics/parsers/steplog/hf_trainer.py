"""HF Trainer memory metrics (`--skip_memory_metrics 0`; docs/formats.md §4.4, transformers PR #10225/#13915).

`Trainer.log_metrics` prints a block per split at the end of training / evaluation:

    ***** train metrics *****
      before_init_mem_cpu        =     1945MB
      train_mem_gpu_alloc_delta  =     -153MB
      train_mem_gpu_peaked_delta =     2012MB

Memory keys (`*_mem_*`) are formatted as `int(v) >> 20` followed by "MB", so MB is MiB; deltas can be
negative. These are summary figures of a whole phase, not a time series: each becomes one sample of the
series `hf.<key>` and each block one `marker` event whose detail carries all of the block's metrics.
The on_log dicts (`{'loss': ..., 'memory_allocated (GB)': 3.82, ...}`) are a time series and are read by
the shared step-marker extraction.
"""
from __future__ import annotations

import json
import re

import polars as pl

from forensics.units import bytes_expr
from forensics.parsers.steplog import markers as stepmem
from forensics.frames import rows_where

NAME = "hf-trainer-memory"
COVERS = ("step-markers",)

BANNER = r"\*{5} (?P<split>\w+) metrics \*{5}"
# "  key = value" as log_metrics writes it: key after two blanks at the start of the message
KV_LINE = r"(?:^|[^\w\s\"'(]\s)\s+(?P<key>[A-Za-z_]\w*)\s+=\s+(?P<val>[^=\s][^=]*?)\s*$"
_MEM_VALUE = r"^(?P<num>-?[0-9]+)\s*(?P<unit>[KMGT]?i?B)$"

_BANNER_RE = re.compile(BANNER)
_MEM_LINE_RE = re.compile(r"(?:^|\s)\w+_mem_\w+\s+=\s+-?[0-9]+\s*[KMGT]?i?B\s*$")
_RUNNING_RE = re.compile(r"\*{5} Running (?:training|Evaluation|Prediction) \*{5}")


def sniff(head: list[str]) -> str | None:
    for i, ln in enumerate(head, 1):
        if _BANNER_RE.search(ln):
            return f"HF Trainer metrics block on line {i}"
        if _MEM_LINE_RE.search(ln):
            return f"HF Trainer memory metric ('..._mem_... = N MB') on line {i}"
        if _RUNNING_RE.search(ln):
            return f"HF Trainer banner on line {i} (its metrics come at the end)"
    return None


def extract(frame: pl.DataFrame, zone: str, skipped=None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples, marker events) of the metrics blocks in `frame` (line, text). A negative figure that
    is not a `*_delta` (no memory holds less than nothing) is left out and counted in `skipped`."""
    t = pl.col("text")
    rows = rows_where(frame, t.str.contains(BANNER) | t.str.contains(KV_LINE)).sort("line")
    none = pl.DataFrame(schema={"line": pl.Int64})
    if not rows.height:
        return none, none
    rows = rows.with_columns(
        t.str.extract(BANNER).alias("split"),
        t.str.extract_groups(KV_LINE).alias("kv"),
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
    rows = stepmem.with_line_time(rows.filter(pl.col("block").is_in(blocks_with_content.implode())), zone)

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


def parse(src, opts):
    parsed = stepmem.extract_all(src.frame(), src, opts)
    if parsed.samples["series"].str.starts_with("hf.").any():
        parsed.notes.append("hf.* series are HF Trainer summary metrics (one figure per phase and block, MB = MiB), "
                            "not a time series")
    parsed.notes.extend(stepmem.notes(parsed))
    return parsed
