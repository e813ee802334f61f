"""Selecting a frame's rows without a trip through polars' thread pool.

`DataFrame.filter` runs as a one-node lazy query whose work is handed to polars' thread pool while the
caller waits: ~150-300 µs per call whatever the frame's size on this project's 2-core virtual machine
(a thread wake-up on each side), where evaluating the predicate (`select`, which polars runs on the
calling thread for small frames) and filtering each column as a Series costs ~25 µs. A job's small
logs run hundreds of filters on frames of a few hundred rows: ~85 ms of a job's ~300 ms of CPU
(bench/batch.py's templates, one process on an otherwise idle machine; in a scan that keeps every core
busy the hand-off costs less), now ~10 ms. rows_where() is used where that adds up; big frames gain nothing
and lose nothing (the same kernels, one column after another instead of in parallel, and their
predicate costs the same).
"""
from __future__ import annotations

import polars as pl


def rows_where(df: pl.DataFrame, predicate: pl.Expr | pl.Series) -> pl.DataFrame:
    """df.filter(predicate) for one predicate: the rows where it is true (null keeps no row)."""
    if isinstance(predicate, pl.Series):
        mask = predicate
    else:
        picked = df.select(predicate)
        if picked.width != 1:
            return df.filter(predicate)   # several columns: filter's own rule
        mask = picked.to_series()
    if mask.len() != df.height:
        if mask.len() != 1:
            return df.filter(mask)   # filter's own error
        return df if mask[0] is True else df.clear()
    if mask.dtype != pl.Boolean or not df.width:
        return df.filter(mask)
    return pl.DataFrame([s.filter(mask) for s in df.iter_columns()])
