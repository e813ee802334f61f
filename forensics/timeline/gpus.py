"""GPU identifiers: UUIDs and PCI bus ids become the indices that an nvidia-smi input maps them to
(`InputInfo.meta["gpu_map"]`), or the one index when every input names a single GPU.
"""
from __future__ import annotations

import polars as pl

from forensics.model import InputInfo


_BUS_RE = r"^(?:pci:|gpu\s*)?(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$"


def gpu_key(expr: pl.Expr) -> pl.Expr:
    """A canonical key for a GPU id: `gpu-<uuid>` lowercased, or `<domain>:<bus>:<dev>.<fn>` in
    lowercase hex without leading domain zeros (00000000:3B:00.0, PCI:0000:3b:00, 0000:3b:00.0 and
    3b:00.0 are one key); anything else (an index) maps to null."""
    low = expr.str.strip_chars().str.to_lowercase()
    bus = low.str.extract_groups(_BUS_RE)
    domain = bus.struct.field("1").fill_null("0").str.strip_chars_start("0")
    bus_key = pl.concat_str([
        domain, pl.lit(":"), bus.struct.field("2").str.zfill(2), pl.lit(":"),
        bus.struct.field("3").str.zfill(2), pl.lit("."), bus.struct.field("4").fill_null("0"),
    ])
    return (pl.when(low.str.starts_with("gpu-")).then(low)
            .when(bus.struct.field("2").is_not_null()).then(bus_key)
            .otherwise(None))


def _one_gpu_pairs(samples: pl.DataFrame, inputs: list[InputInfo]) -> list[tuple[str, str, str]]:
    """(id, index, path) for a job logged on one GPU by several loggers that name it differently (a
    monitoring query by its bus id, compute-apps by its UUID, dmon and `-l 1` by its index): when
    every input names a single GPU, one index in all, at most one UUID and one bus id, they are one
    GPU. Each input it applies to says so."""
    rows = samples.filter(pl.col("gpu").is_not_null()).select("source", "host", "gpu").unique()
    if rows.is_empty() or rows["host"].n_unique() > 1 or rows.group_by("source").len()["len"].max() > 1:
        return []
    keyed = rows.with_columns(gpu_key(pl.col("gpu")).alias("key"))
    indices = keyed.filter(pl.col("key").is_null())["gpu"].unique().to_list()
    ids = keyed.filter(pl.col("key").is_not_null())
    if len(indices) != 1 or ids.is_empty():
        return []
    kinds = ids.with_columns(pl.col("key").str.starts_with("gpu-").alias("uuid")).group_by("uuid").agg(pl.col("key").n_unique())
    if kinds["key"].max() > 1:
        return []
    by_path = {i.path: i for i in inputs}
    for r in ids.iter_rows(named=True):
        if r["source"] in by_path:
            by_path[r["source"]].notes.append(
                f"every input names one GPU: {r['gpu']} is taken as GPU {indices[0]}, the one the other inputs name")
    return [(r["gpu"], indices[0], r["source"]) for r in ids.iter_rows(named=True)]


def unify_gpus(samples: pl.DataFrame, events: pl.DataFrame, inputs: list[InputInfo]):
    """Rewrite UUIDs and bus ids to GPU indices where the inputs' gpu_map says which index they are,
    or where every input names a single GPU (`_one_gpu_pairs`)."""
    pairs = [(k, str(v), info.path) for info in inputs for k, v in (info.meta.get("gpu_map") or {}).items()
             if k is not None and v is not None]
    if not pairs:
        pairs = _one_gpu_pairs(samples, inputs)
    if not pairs:
        return samples, events
    m = pl.DataFrame(pairs, schema={"id": pl.String, "index": pl.String, "path": pl.String}, orient="row")
    m = m.with_columns(gpu_key(pl.col("id")).alias("key")).drop_nulls("key")
    per_key = m.group_by("key").agg(pl.col("index").unique().alias("indices"), pl.col("path").unique().alias("paths"))
    # (an input's notes by key: the group_by keeps no order)
    conflicting = per_key.filter(pl.col("indices").list.len() > 1).sort("key")
    for row in conflicting.iter_rows(named=True):
        for info in inputs:
            if info.path in row["paths"]:
                info.notes.append(f"GPU {row['key']} is index {' and '.join(sorted(row['indices']))} in different "
                                  "inputs (other hosts?): it is left as it is")
    mapping = {r["key"]: r["indices"][0] for r in per_key.filter(pl.col("indices").list.len() == 1).iter_rows(named=True)}
    if not mapping:
        return samples, events

    def rewrite(df: pl.DataFrame) -> pl.DataFrame:
        mapped = gpu_key(pl.col("gpu")).replace_strict(mapping, default=None, return_dtype=pl.String)
        return df.with_columns(pl.coalesce(mapped, pl.col("gpu")).alias("gpu"))

    return rewrite(samples), rewrite(events)
