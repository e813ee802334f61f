"""The drawn series: one table of every memory series with its stats, and min/max envelopes to draw."""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import polars as pl

from forensics.detect.measure import constant_keys, series_labels
from forensics.frames import rows_where
from forensics.report.formatting import xround
from forensics.report.limits import SPARK_CELLS

SERIES_KEY = ("source", "host", "gpu", "pid", "series", "label")
# rows up to which a chart's envelopes are cut by numpy, not a polars query (whose fixed cost and
# grouping dominate on a chart's few thousand rows)
NUMPY_ROWS = 100_000


def series_table(samples: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows with sid and x, one row per series with its stats). x is epoch seconds, step or sample index.

    Grouping tens of millions of rows on six nullable text keys is slow, so rows are grouped on a
    64-bit hash of the keys instead, and the keys are read back once per series; the rows of one
    series are not grouped at all."""
    keys = list(SERIES_KEY)
    s = rows_where(samples, pl.col("bytes").is_not_null()) if samples["bytes"].null_count() else samples
    if s.is_empty():
        return s.select(pl.lit(0, pl.Int64).alias("sid"), pl.lit(0.0).alias("x"), pl.col("bytes").alias("y")), pl.DataFrame()
    # as detect.series_frames does: a label that changes with nearly every reading ("step 17") does
    # not name a series; such labels are dropped so the readings form one series, as the detector sees it
    labels = series_labels(s)   # (of the frame detection decided, before the copy: decided once a job)
    s = s.clone()   # (a copy of the column list, not of the data: the caller's frame keeps its labels)
    s.replace_column(s.get_column_index("label"), labels)
    # the detector's rule: time when (nearly) every reading has it, else step, else the sample order
    first_and_axes = [*[pl.col(k).first() for k in keys],
                      (pl.col("time").null_count() <= 0.1 * pl.len()).alias("has_time"),
                      (pl.col("step").null_count() <= 0.1 * pl.len()).alias("has_step")]
    # one series (a step log's millions of readings): its keys and stats read off the rows, not grouped
    one = constant_keys(s, keys)
    if one:
        flags = s.select(first_and_axes)
    else:
        # the rows grouped on a 64-bit hash of their keys (grouping millions of rows on six nullable text
        # keys is slow); each column hashed on its own and combined, which holds no row of all six at
        # once. The hashes only group rows; series ids come from sorting the keys below
        s = s.hstack(s.select(functools.reduce(operator.xor, (pl.col(k).hash(20240601 + i) for i, k in enumerate(keys)))
                              .alias("_h")))
        flags = s.group_by("_h").agg(first_and_axes)
    flags = flags.with_columns(
        pl.when(pl.col("has_time")).then(pl.lit("time"))
        .when(pl.col("has_step")).then(pl.lit("step"))
        .otherwise(pl.lit("index")).alias("xkind")
    ).sort(keys, nulls_last=False)
    flags.insert_column(0, pl.Series("sid", range(flags.height), dtype=pl.Int64))   # (a cast would be a query)
    # each row's series id and x looked up from its hash, in the rows' order: a join would copy every
    # row's columns (hundreds of MB for millions of step lines) to add two
    sid = (pl.lit(0, dtype=pl.Int64) if one
           else pl.col("_h").replace_strict(flags["_h"], flags["sid"], return_dtype=pl.Int64))
    x_of = {"time": pl.col("time").dt.epoch("us").cast(pl.Float64) / 1e6, "step": pl.col("step").cast(pl.Float64),
            "index": pl.coalesce(pl.col("seq"), pl.col("line")).cast(pl.Float64)}
    kinds = flags["xkind"].unique(maintain_order=True).to_list()
    if len(kinds) == 1:
        x = x_of[kinds[0]]
    else:
        xkind = pl.col("_h").replace_strict(flags["_h"], flags["xkind"], return_dtype=pl.String)
        x = pl.when(xkind == "time").then(x_of["time"]).when(xkind == "step").then(x_of["step"]).otherwise(x_of["index"])
    rows = s.select(sid.alias("sid"), x.alias("x"), pl.col("bytes").alias("y"), "total_bytes")
    if rows["x"].null_count():
        rows = rows_where(rows, pl.col("x").is_not_null())
    stats = [
        pl.len().alias("n"),
        pl.col("x").min().alias("x0"),
        pl.col("x").max().alias("x1"),
        pl.col("y").min().alias("low"),
        pl.col("y").max().alias("peak"),
        pl.col("y").get(pl.col("x").arg_min()).alias("first"),
        pl.col("y").get(pl.col("x").arg_max()).alias("last"),
        pl.col("total_bytes").max().alias("capacity"),
    ]
    # (one series' stats in a select: grouped, each aggregate gathers its group's rows, a column's copy)
    stats = (rows.select(pl.lit(0, dtype=pl.Int64).alias("sid"), *stats) if one and rows.height
             else rows.group_by("sid").agg(stats))
    table = flags.drop("_h", strict=False).join(stats, on="sid", how="inner").sort("sid")
    return rows.select("sid", "x", "y"), table


def envelopes(rows: pl.DataFrame, ranges: dict[int, tuple[float, float]], buckets: int) -> dict[int, list]:
    """Min/max per bucket for each series id in `ranges` (sid -> (x0, x1)): the points to draw, in x
    order, in runs split where data is missing for a while."""
    if not ranges:
        return {}
    cols = _extremes(rows, ranges, buckets) if rows.height <= NUMPY_ROWS else None
    if cols is None:
        agg = _grouped_extremes(rows, ranges, buckets)
        cols = [agg[c].to_list() for c in ("sid", "b", "xmin", "ymin", "xmax", "ymax")]
    if not cols[0]:
        return {}
    out: dict[int, list] = {}
    # plain lists, grouped here (sorted by sid): no per-series frame, no per-value Series access
    for sid, grp in itertools.groupby(zip(*cols), key=lambda r: r[0]):
        pts_by_bucket = []
        for _, b, xa, ya, xb, yb in grp:
            pair = sorted({(xa, ya), (xb, yb)})
            pts_by_bucket.append((b, pair))
        # a gap wider than a few typical gaps means no data there: do not draw a line across it
        gaps = sorted(b2 - b1 for (b1, _), (b2, _) in zip(pts_by_bucket, pts_by_bucket[1:]))
        typical = gaps[len(gaps) // 2] if gaps else 1
        limit = max(4, 5 * typical)
        runs, run, prev_b = [], [], None
        for b, pair in pts_by_bucket:
            if prev_b is not None and b - prev_b > limit:
                runs.append(run)
                run = []
            run.extend(pair)
            prev_b = b
        runs.append(run)
        out[sid] = [_thin(r) for r in runs if r]
    return out


def _grouped_extremes(rows: pl.DataFrame, ranges: dict[int, tuple[float, float]], buckets: int) -> pl.DataFrame:
    """Each bucket's extremes by polars' grouping: _buckets, or _sorted_buckets for one series' rows in x order."""
    if len(ranges) == 1:   # one series (a step log's millions of readings): its rows alone
        (sid, (lo, hi)), = ranges.items()
        ids = rows["sid"]
        rows = rows if ids.min() == ids.max() == sid else rows_where(rows, pl.col("sid") == sid)
        if rows["x"].is_sorted():
            return _sorted_buckets(rows, sid, lo, hi, buckets)
    return _buckets(rows, ranges, buckets)


def _extremes(rows: pl.DataFrame, ranges: dict[int, tuple[float, float]], buckets: int) -> list[list] | None:
    """_buckets' columns (sid, b, xmin, ymin, xmax, ymax) as lists, by numpy: the same float operations
    in the same order give the same buckets, and a stable sort keeps each bucket's rows in their order,
    so the first of equal extremes is the one polars' arg_min / arg_max takes. None for rows with a null
    or a NaN (polars' rules for them are not numpy's)."""
    if any(rows[c].null_count() for c in ("sid", "x", "y")):
        return None
    sid, x, y = (rows[c].to_numpy() for c in ("sid", "x", "y"))
    if np.isnan(x).any() or (y.dtype.kind == "f" and np.isnan(y).any()):
        return None
    sid_of = np.array(list(ranges), dtype=np.int64)
    lo_of = np.array([r[0] for r in ranges.values()], dtype=np.float64)
    hi_of = np.array([r[1] for r in ranges.values()], dtype=np.float64)
    order = np.argsort(sid_of, kind="stable")
    at = np.searchsorted(sid_of[order], sid)
    at = np.minimum(at, sid_of.size - 1)
    known = sid_of[order][at] == sid
    r = order[at]
    # ranges come rounded to the millisecond: a reading on the edge must not fall out
    keep = known & (x >= lo_of[r] - 0.001) & (x <= hi_of[r] + 0.001)
    sid, x, y, lo, hi = sid[keep], x[keep], y[keep], lo_of[r][keep], hi_of[r][keep]
    width = np.where(hi > lo, hi - lo, 1.0)
    b = np.clip(np.floor((x - lo) / width * buckets), 0, buckets - 1).astype(np.int64)
    # each row's (series, bucket) as one key: a stable sort keeps a bucket's rows in their order (a key
    # of 16 bits is radix-sorted)
    key = at[keep] * buckets + b   # (at: the series' place in sid order)
    by = np.argsort(key.astype(np.int16) if sid_of.size * buckets <= 2**15 else key, kind="stable")
    sid, b, x, y = sid[by], b[by], x[by], y[by]
    if not sid.size:
        return [[] for _ in range(6)]
    starts = np.flatnonzero(np.r_[True, (sid[1:] != sid[:-1]) | (b[1:] != b[:-1])])
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, sid.size]))
    ymin, ymax = np.minimum.reduceat(y, starts), np.maximum.reduceat(y, starts)

    def first_x(at_extreme: np.ndarray) -> np.ndarray:
        hits = np.flatnonzero(at_extreme)
        return x[hits[np.r_[True, group[hits][1:] != group[hits][:-1]]]]

    return [sid[starts].tolist(), b[starts].tolist(), first_x(y == ymin[group]).tolist(), ymin.tolist(),
            first_x(y == ymax[group]).tolist(), ymax.tolist()]


def _bucket(lo_c: pl.Expr, hi_c: pl.Expr, buckets: int) -> pl.Expr:
    width = pl.when(hi_c > lo_c).then(hi_c - lo_c).otherwise(1.0)
    return ((pl.col("x") - lo_c) / width * buckets).floor().clip(0, buckets - 1).cast(pl.Int64).alias("b")


# each bucket's lowest and highest reading with its x (the first of equal ones in the rows' order)
_EXTREMES = [pl.col("x").get(pl.col("y").arg_min()).alias("xmin"), pl.col("y").min().alias("ymin"),
             pl.col("x").get(pl.col("y").arg_max()).alias("xmax"), pl.col("y").max().alias("ymax")]


def _sorted_buckets(rows: pl.DataFrame, sid: int, lo: float, hi: float, buckets: int) -> pl.DataFrame:
    """_buckets of one series' rows in x order: its range is a slice of them and its buckets runs of
    the slice, grouped as runs (the query copied the rows twice and held an index of each row)."""
    x = rows["x"]
    # (the rows _buckets' filters keep: lo - 0.001 <= x <= hi + 0.001)
    start, end = x.search_sorted(lo - 0.001, "left"), x.search_sorted(hi + 0.001, "right")
    b = _bucket(pl.lit(lo, dtype=pl.Float64), pl.lit(hi, dtype=pl.Float64), buckets)
    return (rows.slice(start, end - start).lazy().select(b.set_sorted(), "x", "y").group_by("b").agg(*_EXTREMES)
            .sort("b").select(pl.lit(sid, dtype=pl.Int64).alias("sid"), pl.all()).collect())


def _buckets(rows: pl.DataFrame, ranges: dict[int, tuple[float, float]], buckets: int) -> pl.DataFrame:
    """Per series id and bucket of its range, the lowest and the highest reading with their x."""
    # a close-up needs a sliver of the rows: cut them down before the join. One lazy query: a chart
    # asks for a few envelopes of a few hundred rows each, where each query's fixed cost dominates
    lo_all, hi_all = min(r[0] for r in ranges.values()) - 0.001, max(r[1] for r in ranges.values()) + 0.001
    picked = rows.lazy().filter(pl.col("sid").is_in(list(ranges)) & pl.col("x").is_between(lo_all, hi_all))
    if len(ranges) == 1:
        # one series (a step log's millions of readings): its range as constants, not joined to every
        # row (the join held a copy of the rows, two columns more, while the groups were built)
        (lo, hi), = ranges.values()
        lo_c, hi_c = pl.lit(lo, dtype=pl.Float64), pl.lit(hi, dtype=pl.Float64)
    else:
        rng = pl.DataFrame({"sid": list(ranges), "lo": [r[0] for r in ranges.values()],
                            "hi": [r[1] for r in ranges.values()]},
                           schema={"sid": pl.Int64, "lo": pl.Float64, "hi": pl.Float64})
        picked = picked.join(rng.lazy(), on="sid", how="inner", maintain_order="left")
        lo_c, hi_c = pl.col("lo"), pl.col("hi")
    # ranges come rounded to the millisecond: a reading on the edge must not fall out
    return (picked.filter((pl.col("x") >= lo_c - 0.001) & (pl.col("x") <= hi_c + 0.001))
            .group_by("sid", _bucket(lo_c, hi_c, buckets)).agg(*_EXTREMES).sort("sid", "b").collect())


def _thin(points: list) -> list:
    """Drop points in the middle of a flat stretch (same y before and after): a flat line needs two."""
    if len(points) <= 2:
        return [[xround(x), int(y)] for x, y in points]
    keep = [points[0]]
    for i in range(1, len(points) - 1):
        if not (points[i - 1][1] == points[i][1] == points[i + 1][1]):
            keep.append(points[i])
    keep.append(points[-1])
    return [[xround(x), int(y)] for x, y in keep]


def sparkline(runs: list, lo: float, hi: float) -> str:
    """The line sampled at SPARK_CELLS cell centres (max of the points in a cell, else the line between
    its neighbours), drawn with ▁..█ from its own lowest to its highest value, so the shape shows even
    far below capacity (the numbers beside it say where it sits); cells without data are spaces."""
    blocks = "▁▂▃▄▅▆▇█"
    cells: list[float | None] = [None] * SPARK_CELLS
    span = (hi - lo) or 1.0

    last = SPARK_CELLS - 1
    for run in runs:
        # each point's cell once (the same formula as before, computed per point not per use)
        cs = [min(last, max(0, int((x - lo) / span * SPARK_CELLS))) for x, _ in run]
        for i in range(len(run) - 1):
            ca, cb = cs[i], cs[i + 1]
            if cb <= ca + 1:
                continue
            (xa, ya), (xb, yb) = run[i], run[i + 1]
            for c in range(ca + 1, cb):
                xc = lo + (c + 0.5) / SPARK_CELLS * span
                y = ya + (yb - ya) * (xc - xa) / ((xb - xa) or 1)
                cells[c] = y if cells[c] is None else max(cells[c], y)
        for (x, y), c in zip(run, cs):
            cur = cells[c]
            cells[c] = y if cur is None else max(cur, y)
    values = [c for c in cells if c is not None]
    if not values:
        return ""
    floor, top = min(values), max(values)
    if top - floor <= 0.02 * abs(top):  # flat within 2 %: a flat line, not magnified noise
        top = floor
    out = []
    for c in cells:
        if c is None:
            out.append(" ")
        elif top == floor:
            out.append(blocks[0])
        else:
            out.append(blocks[min(7, max(0, int((c - floor) / (top - floor) * 7.999)))])
    return "".join(out).rstrip()
