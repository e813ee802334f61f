"""Memory in use read from free memory, for a log whose only memory readings are free memory: a step log's
(fairseq's progress line `gb_free`, the device's total less the interval's peak allocated, fairseq/trainer.py;
a script's `Free GPU ram: N`) or an nvidia-smi CSV of `memory.free` without `memory.used`. Free memory falling
is memory in use growing, byte for byte, but the use itself is the device's capacity less the free memory (less
the driver's reservation), which such a log may not print. So each free reading is given a second time, as
series `free.fall`: how far it is below the highest free reading of its series (the same GPU, process, rank and
label), which is the use's growth since then, in bytes. The detection judges that series as it judges memory in
use; the free readings stay as they were read. The readers say which series holds their free readings."""
from __future__ import annotations

import polars as pl

FALL = "free.fall"
FALL_NOTE = (f"only free memory is printed: series {FALL}, how far each free reading is below its series' highest, "
             "is judged as memory in use growing (the device's capacity is not printed, so the use itself is not known)")
# the columns that tell one series of readings from another, where present
_SERIES_KEYS = ("host", "gpu", "pid", "rank", "local_rank", "label", "line_rank", "line_local_rank", "line_pid")


def with_fall(s: pl.DataFrame, free_series: str) -> pl.DataFrame:
    """`s` (a reader's readings: line, series, bytes, and where present piece, k, seq, the series keys) and,
    when its only memory series is `free_series`, the FALL readings beside them (each after its line's
    readings)."""
    series = s["series"]
    # (whether it is the only series, by a count: Series.unique was the dearest step of a one-line file's
    # reading, and several times the count on millions of rows)
    held = int(series.eq(free_series).sum())
    if not held or held != series.len() - series.null_count():
        return s
    keys = [c for c in _SERIES_KEYS if c in s.columns]
    free = s.filter(pl.col("series") == free_series)
    top = pl.col("bytes").max().over(keys) if keys else pl.col("bytes").max()
    cols = {"series": pl.lit(FALL), "bytes": (top - pl.col("bytes")).cast(s.schema["bytes"])}
    if "total_bytes" in s.columns:
        cols["total_bytes"] = pl.lit(None, dtype=s.schema["total_bytes"])
    if "k" in s.columns:   # (after the line's own readings, whose k are below 1000)
        cols["k"] = (pl.col("k") + 1000).cast(s.schema["k"])
    fall = free.with_columns(**cols)
    order = [c for c in ("line", "piece", "k") if c in s.columns]
    out = pl.concat([s, fall.select(s.columns)], how="vertical")
    return out.sort(order, maintain_order=True) if order else out
