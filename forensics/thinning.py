"""Thinning a samples frame to bounded size: per series, the lowest and the highest reading of every
`window` consecutive readings (the first of equals), and the first reading without a value. The rows
kept are real rows (each with its own source line, so evidence still quotes source:line), in file
order. Thinning a thinned frame with a multiple of its window gives what thinning the original would,
so a reader can thin as it goes and double the window when too much is kept (Thinner).

Format-free: a series is the rows with the same host, gpu, pid and series (the columns present).
"""
from __future__ import annotations

import numpy as np
import polars as pl

# Readings kept at full resolution; beyond, series are thinned. A few hours of 1 Hz readings of 8 GPUs
# are kept whole; a week of them keeps one reading in 32 (the lowest and the highest of every 64: a
# point every ~30 s per GPU), a month one in 128 (every ~2 minutes: finer than any chart draws, and
# bench/perf.py's planted onset is still found within 0.2 % of the span). What comes after reading
# (GPU ids, detection, the report's tables) costs time in proportion to it (docs/benchmarks.md).
MAX_READINGS = 250_000

SERIES_KEYS = ("host", "gpu", "pid", "series")


def series_ids(df: pl.DataFrame) -> np.ndarray:
    """A small integer per row naming its series (numbered in order of appearance)."""
    keys = [c for c in SERIES_KEYS if c in df.columns]
    if not keys or not df.height:
        return np.zeros(df.height, dtype=np.int64)
    return df.select(pl.struct(keys).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()


def thin(df: pl.DataFrame, window: int) -> pl.DataFrame:
    """`df` (any samples frame, in file order) thinned with this window."""
    if window <= 1 or df.height == 0:
        return df
    sid = series_ids(df)
    index = RunningCount().rank(sid)
    return df.filter(pl.Series(thin_mask(sid, index, df["bytes"].is_null().to_numpy(),
                                         df["bytes"].fill_null(0).to_numpy(), window)))


class RunningCount:
    """Each row's rank among the rows of its key, counted across calls as in one pass (numpy; keys are
    small non-negative integers)."""

    def __init__(self):
        self.counts: dict[int, int] = {}

    def rank(self, keys: np.ndarray) -> np.ndarray:
        if not keys.size:
            return np.zeros(0, dtype=np.int64)
        period = periodic(keys)
        if period:
            # each block of `period` rows lists the same keys in the same order: ranks are arithmetic
            phases = keys[:period]
            step = np.arange(-(-keys.size // period), dtype=np.int64)[:, None]
            rank = (step + self.carried(phases)).ravel()[:keys.size]
            for j, k in enumerate(phases.tolist()):
                self.counts[k] = self.counts.get(k, 0) + (keys.size - j + period - 1) // period
            return rank
        order = by_key(keys)
        ordered = keys[order]
        new = np.empty(keys.size, dtype=bool)
        new[0] = True
        new[1:] = ordered[1:] != ordered[:-1]
        starts = np.flatnonzero(new)
        sizes = np.diff(np.append(starts, keys.size))
        rank = np.empty(keys.size, dtype=np.int64)
        rank[order] = np.arange(keys.size) - np.repeat(starts, sizes)
        rank += self.carried(keys)
        for k, c in zip(ordered[starts].tolist(), sizes.tolist()):
            self.counts[k] = self.counts.get(k, 0) + c
        return rank

    def carried(self, keys: np.ndarray) -> np.ndarray:
        """The rows counted so far for each of the keys."""
        lut = np.zeros(int(keys.max()) + 1, dtype=np.int64)
        for k, v in self.counts.items():
            if k < lut.size:
                lut[k] = v
        return lut[keys]


class Thinner:
    """Rows added batch by batch, in file order, each series thinned with the current window; when more
    than `limit` are kept, the window doubles and what is kept is thinned again. The result is that of
    thinning all rows at once with the final window."""

    def __init__(self, limit: int | None = None):
        self.limit = limit or MAX_READINGS
        self.window = 1
        self.readings = 0
        self.kept = 0
        self.parts: list[pl.DataFrame] = []
        self.index = RunningCount()
        self.names: dict[tuple, int] = {}

    def expect(self, readings: float) -> None:
        """Start with the window that this many readings will need (rather than thinning all that is
        kept again each time the window doubles)."""
        while readings * 2 / self.window > self.limit:
            self.window *= 2

    def add(self, df: pl.DataFrame, sid: np.ndarray | None = None) -> None:
        """`sid`: the rows' series as small integers, when the caller has them (else from the columns)."""
        if not df.height:
            return
        if sid is None:
            sid = self._ids(df)
        keep, index = self.select(sid, df["bytes"])
        if keep is not None:
            df, sid, index = df.filter(pl.Series(keep)), sid[keep], index[keep]
        self.hold(df, sid, index)

    def select(self, sid: np.ndarray, values: pl.Series) -> tuple[np.ndarray | None, np.ndarray]:
        """For rows about to be added (their series ids and bytes): which of them the current window
        keeps (None: all) and each row's index in its series. Counts them as read."""
        index = self.index.rank(sid)
        self.readings += sid.size
        if self.window <= 1:
            return None, index
        return thin_mask(sid, index, values.is_null().to_numpy(), values.fill_null(0).to_numpy(), self.window), index

    def hold(self, df: pl.DataFrame, sid: np.ndarray, index: np.ndarray) -> None:
        """Keep the rows select() let through (with their series ids and indexes)."""
        if not df.height:
            return
        self.parts.append(df.with_columns(pl.Series("_sid", sid, dtype=pl.Int64), pl.Series("_i", index, dtype=pl.Int64)))
        self.kept += df.height
        # (a window longer than all readings keeps at most three per series: doubling on takes no more off)
        while self.kept > self.limit and self.window < self.readings:
            self.window *= 2
            self.parts = [self._thinned()]
            self.kept = self.parts[0].height

    def _thinned(self) -> pl.DataFrame:
        """All that is kept thinned again with the current window (batches thinned alone each keep the
        extremes of the windows they share with the batches next to them)."""
        whole = pl.concat(self.parts)
        if self.window <= 1:
            return whole
        return whole.filter(pl.Series(thin_mask(
            whole["_sid"].to_numpy(), whole["_i"].to_numpy(), whole["bytes"].is_null().to_numpy(),
            whole["bytes"].fill_null(0).to_numpy(), self.window)))

    def _ids(self, df: pl.DataFrame) -> np.ndarray:
        keys = [c for c in SERIES_KEYS if c in df.columns]
        if not keys:
            return np.zeros(df.height, dtype=np.int64)
        uniq = df.select(keys).unique(maintain_order=True)
        ids = pl.Series("_id", [self.names.setdefault(k, len(self.names)) for k in uniq.rows()], dtype=pl.Int64)
        return df.select(keys).join(uniq.with_columns(ids), on=keys, how="left", nulls_equal=True,
                                    maintain_order="left")["_id"].to_numpy()

    def result(self) -> pl.DataFrame | None:
        """The rows kept (without the helper columns), None when none were added."""
        if not self.parts:
            return None
        return self._thinned().drop("_sid", "_i")

    def note(self, kept: int) -> tuple[str, dict] | None:
        """What thinning did, for the input's notes and meta (None when it kept everything)."""
        if self.window <= 1:
            return None
        return (f"{self.readings} readings: for analysis each GPU's series was thinned to the lowest and highest "
                f"reading of every {self.window} consecutive ones ({kept} kept, each with its own line); every "
                "line was read and checked",
                {"readings": self.readings, "kept": kept, "window": self.window})


def by_key(keys: np.ndarray) -> np.ndarray:
    """The stable sort of rows by key (radix sort for small ids, 3x faster than a merge sort)."""
    top = keys.max()
    return np.argsort(keys.astype(np.int16) if top < 1 << 15 else keys.astype(np.int32) if top < 1 << 31 else keys,
                      kind="stable")


def periodic(keys: np.ndarray) -> int | None:
    """p when the keys repeat with period p (keys[r] == keys[r % p]) and the first p are distinct: each
    block lists the same keys in the same order. None otherwise (or when there is not more than one
    period)."""
    head = keys[:256]
    again = np.flatnonzero(head[1:] == head[0])
    if not again.size:
        return None
    p = int(again[0]) + 1
    if keys.size <= p or np.unique(keys[:p]).size != p or not np.array_equal(keys[p:], keys[:-p]):
        return None
    return p


def thin_mask(sid, index, none, value, window: int) -> np.ndarray:
    """The rows thinning keeps, as a mask (numpy arrays: series id, index in its series, no value, value)."""
    period = periodic(sid) if not none.any() else None
    if period and not np.array_equal(index[period:], index[:-period] + 1):
        # rows already thinned (a Thinner's window doubling): series that alternate in the rows kept have
        # gaps in their indexes, and the matrix's columns would not be their windows
        period = None
    if period:
        return _periodic_mask(index, value, period, window)
    # rows are in file order, where the index grows within each series: a stable sort by series suffices
    order = by_key(sid)
    key = sid[order] * (1 << 40) + index[order] // window
    none = none[order]
    value = value[order]
    new = np.empty(key.size, dtype=bool)
    new[0] = True
    new[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(new)
    grp = np.cumsum(new) - 1
    keep = np.zeros(key.size, dtype=bool)
    if not none.any():
        # every reading has a value (a clean log): the first lowest and highest of each window are the
        # smallest positions holding the window's min and max
        at = np.arange(key.size)
        for extreme in (np.minimum, np.maximum):
            hit = value == extreme.reduceat(value, starts)[grp]
            keep[np.minimum.reduceat(np.where(hit, at, key.size), starts)] = True
    else:
        big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        lo_src, hi_src = np.where(none, big, value), np.where(none, small, value)
        lo = ~none & (lo_src == np.minimum.reduceat(lo_src, starts)[grp])
        hi = ~none & (hi_src == np.maximum.reduceat(hi_src, starts)[grp])
        for flag in (lo, hi, none):
            pos = np.flatnonzero(flag)
            if pos.size:
                g = grp[pos]
                first = np.empty(pos.size, dtype=bool)
                first[0] = True
                first[1:] = g[1:] != g[:-1]
                keep[pos[first]] = True
    mask = np.zeros(key.size, dtype=bool)
    mask[order[keep]] = True
    return mask


def _periodic_mask(index, value, period: int, window: int) -> np.ndarray:
    """thin_mask when row r is a reading of series r % period (each block of rows lists the same series
    in the same order, every reading with a value): each series is a column of a (blocks x period)
    matrix, thinned with a reshape, 10x faster than sorting the rows by series."""
    h = value.size
    keep = np.zeros(h, dtype=bool)
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for j in range(period):
        col = value[j::period]
        # windows of the series' index: pad the front so that they start at multiples of the window
        pad = int(index[j]) % window
        full = -(-(pad + col.size) // window) * window
        for fill, pick in ((big, np.argmin), (small, np.argmax)):
            m = np.full(full, fill, dtype=np.int64)
            m[pad:pad + col.size] = col
            first = pick(m.reshape(-1, window), axis=1) + np.arange(0, full, window) - pad   # first of equals
            keep[j + period * first] = True
    return keep
