"""One row per kernel event and task-table reading that several files repeat: rotated files that
overlap (dedupe_events, before alignment too) and several views of one ring buffer (raw `dmesg`,
`dmesg -T`, `dmesg --time-format iso`, kern.log) once they are aligned (merge_twin_events).
"""
from __future__ import annotations

import json

import polars as pl

from forensics.frames import rows_where


KERNEL_KINDS = ("oom_kill", "oom_invoked", "oom_reaped", "xid")
TWIN_WINDOW_S = 2.0  # dmesg -T truncates to the second; two real kills of one pid are never this close


def merge_twin_events(events: pl.DataFrame) -> pl.DataFrame:
    """One row per kernel event that several views of the same ring buffer repeat (raw `dmesg`,
    `dmesg -T`, `dmesg --time-format iso`, kern.log): same kind, pid and bytes, from different files,
    within TWIN_WINDOW_S once aligned. Kept: the copy with the finest clock (sub-second, then an
    explicit one), the others' file:line go into its detail as `twins` so the report can quote them."""
    kernel = rows_where(events, pl.col("kind").is_in(KERNEL_KINDS) & pl.col("time").is_not_null())
    if kernel.height < 2 or kernel["source"].n_unique() < 2:
        return events
    kernel = kernel.with_row_index("_k").with_columns(
        (pl.col("time").dt.microsecond() == 0).alias("_coarse"),
        pl.col("time").dt.epoch("us").alias("_us"),
    )
    # (copies at one instant in input order: which group a copy joins must not be left to the sort)
    rows = kernel.sort(["kind", "pid", "bytes", "_us", "_k"]).to_dicts()
    drop, twins = set(), {}
    groups: list[list[dict]] = []
    open_: list[list[dict]] = []   # the groups of this kind, pid and bytes a later copy may still join
    for r in rows:
        key = (r["kind"], r["pid"], r["bytes"])
        open_ = [g for g in open_ if (g[0]["kind"], g[0]["pid"], g[0]["bytes"]) == key
                 and r["_us"] - g[0]["_us"] <= TWIN_WINDOW_S * 1e6]
        # the copy joins the nearest group that lacks its file (the earliest on a tie): two events in
        # one second of `dmesg -T` are two groups, and each finer copy finds its own, not just the last
        fits = [g for g in open_ if r["source"] not in {x["source"] for x in g}]
        if fits:
            min(fits, key=lambda g: abs(r["_us"] - g[0]["_us"])).append(r)
        else:
            groups.append([r])
            open_.append(groups[-1])
    for g in groups:
        if len(g) < 2:
            continue
        keep = min(g, key=lambda x: (x["_coarse"], x["_k"]))
        for x in g:
            if x is not keep:
                drop.add((x["source"], x["line"], x["kind"]))
        twins[(keep["source"], keep["line"], keep["kind"])] = [f"{x['source']}:{x['line']}" for x in g if x is not keep]
    if not drop:
        return events

    def with_twins(row: dict) -> str | None:
        extra = twins.get((row["source"], row["line"], row["kind"]))
        if not extra:
            return row["detail"]
        try:
            d = json.loads(row["detail"]) if row["detail"] else {}
        except ValueError:
            d = {}
        d["twins"] = extra
        return json.dumps(d)

    keys = ["source", "line", "kind"]
    key_schema = {"source": pl.String, "line": pl.Int64, "kind": pl.String}
    out = events.join(pl.DataFrame(list(drop), schema=key_schema, orient="row"), on=keys, how="anti", nulls_equal=True)
    kept = pl.DataFrame(list(twins), schema=key_schema, orient="row")
    rows = out.join(kept, on=keys, how="semi").select(*keys, "detail").to_dicts()
    patched = pl.DataFrame({**{k: [r[k] for r in rows] for k in keys}, "_d": [with_twins(r) for r in rows]},
                           schema={**key_schema, "_d": pl.String})
    return (out.join(patched, on=keys, how="left", nulls_equal=True)
            .with_columns(pl.coalesce("_d", "detail").alias("detail")).drop("_d"))


def in_reading_order(events: pl.DataFrame) -> pl.DataFrame:
    """The events as a reader meets them: files in the order they came, each by line, the events of one
    line by pid, then kind (two pids gone from one compute-apps sample). Whatever "first" means
    downstream (a finding's first evidence, a table's order) then follows from the inputs, not from
    the order in which the readers' queries (group_by, join) happened to leave rows."""
    if events.height < 2:
        return events
    order = {src: i for i, src in enumerate(events["source"].unique(maintain_order=True).to_list())}
    return (events.with_columns(pl.col("source").replace_strict(order, return_dtype=pl.Int64).alias("_src"))
            .sort(["_src", "line", "pid", "kind"], nulls_last=True, maintain_order=True).drop("_src"))


def merge_twin_samples(samples: pl.DataFrame) -> pl.DataFrame:
    """The kernel task-table readings (`host.rss`) that several views of one ring buffer repeat:
    same pid and bytes within TWIN_WINDOW_S from different files; the finest-clocked file's copy stays."""
    mine = pl.col("series") == "host.rss"
    rss = rows_where(samples, mine & pl.col("time").is_not_null())
    if rss.height < 2 or rss["source"].n_unique() < 2:
        return samples
    order = {src: i for i, src in enumerate(samples["source"].unique(maintain_order=True).to_list())}
    rss = (rss.with_columns(
        pl.col("time").dt.epoch("us").alias("_us"),
        (pl.col("time").dt.microsecond() == 0).alias("_coarse"),
        pl.col("source").replace_strict(order, return_dtype=pl.Int64).alias("_src"))
        .sort(["pid", "bytes", "_us"])
        .with_columns((((pl.col("_us").diff() > TWIN_WINDOW_S * 1e6) | (pl.col("pid") != pl.col("pid").shift())
                        | (pl.col("bytes") != pl.col("bytes").shift())).fill_null(True).cum_sum()).alias("_cluster")))
    best = (rss.sort(["_coarse", "_src"]).group_by("_cluster", maintain_order=True)
            .agg(pl.col("source").first().alias("_keep")))
    drop = rss.join(best, on="_cluster").filter(pl.col("source") != pl.col("_keep")).select("source", "line", "series")
    if drop.height == 0:
        return samples
    return samples.join(drop, on=["source", "line", "series"], how="anti", nulls_equal=True)


def dedupe_events(events: pl.DataFrame) -> pl.DataFrame:
    """Drop kernel events that a second input repeats: rotated files overlap (kern.log.1 and kern.log
    hold the same lines after a copytruncate; a dmesg dump repeats what kern.log has).

    Two rows are the same event when they come from different sources and have the same kind, pid and
    either the same uptime (µs resolution: another boot or host matching it by chance is not a
    practical concern) or the same wall time and evidence text. The row kept is the one with a wall
    clock, then the earliest source in input order. Repeats inside one source are real repeats and
    stay. Rows without any clock are never merged (two hosts' trimmed pastes can be identical)."""
    return _dedupe(events, pl.col("kind").is_in(KERNEL_KINDS),
                   [["kind", "pid", "uptime"], ["kind", "pid", "time", "text"]])


def dedupe_samples(samples: pl.DataFrame) -> pl.DataFrame:
    """The same for the task-table `host.rss` samples of overlapping kernel logs."""
    return _dedupe(samples, pl.col("series") == "host.rss",
                   [["series", "pid", "uptime", "bytes"], ["series", "pid", "time", "bytes"]])


def _dedupe(df: pl.DataFrame, mine: pl.Expr, key_sets: list[list[str]]) -> pl.DataFrame:
    if df.height == 0:
        return df
    df = df.with_row_index("_i")
    rows = rows_where(df, mine & (pl.col("time").is_not_null() | pl.col("uptime").is_not_null()))
    if rows.height == 0 or rows["source"].n_unique() < 2:   # copies are only told apart across files
        return df.drop("_i")
    src_order = {s: i for i, s in enumerate(df["source"].unique(maintain_order=True).to_list())}
    rows = rows.with_columns(
        pl.col("source").replace_strict(src_order, default=None, return_dtype=pl.Int64).alias("_src"),
        pl.col("time").is_null().alias("_no_time"),
    ).sort(["_no_time", "_src", "_i"])
    drop: set[int] = set()
    for keys in key_sets:
        clock_col = "uptime" if "uptime" in keys else "time"
        cand = rows.filter(pl.col(clock_col).is_not_null() & ~pl.col("_i").is_in(list(drop)))
        first_src = cand.group_by(keys, maintain_order=True).agg(pl.col("_src").first().alias("_keep_src"))
        dup = cand.join(first_src, on=keys, how="left", nulls_equal=True).filter(pl.col("_src") != pl.col("_keep_src"))
        drop.update(dup["_i"].to_list())
    return df.filter(~pl.col("_i").is_in(list(drop))).drop("_i")
