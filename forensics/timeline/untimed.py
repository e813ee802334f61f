"""Sources without a clock stay on their sample index unless a sound anchor places them: --start or
--end with --interval, or the same memory curve in a timed source (offset and interval fitted,
accepted only on a close, unique fit). Their events take the time of the nearest sample line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timezone

import numpy as np
import polars as pl

from forensics.model import InputInfo
from forensics.options import Options
from forensics.frames import partitions, rows_where
from forensics.timeline import stamps
from forensics.timeline.stamps import MIB, US


# curve matching (untimed -> timed)
MIN_CURVE_POINTS = 20
MIN_CURVE_RANGE = 16 * MIB
MIN_R = 0.98
MIN_FIT = 0.95            # 1 - mse / variance, with the values compared as they are (same GPU, same bytes)
MIN_BRACKETED = 0.9       # share of readings between the timed readings just before and after them
BRACKET_SLACK = 16 * MIB  # nvidia-smi rounds to MiB; allocator noise between two readings
MIN_COVERED = 0.5         # share of the untimed readings that the timed series verifies
COARSE_POSITIONS = 4096    # positions of the untimed series in the coarse search
COARSE_GRID = 1 << 17      # grid points of the timed series in the coarse search
REFINE_POINTS = 2000
CURVE_SERIES = ("memory.used", "process.used", "allocated", "reserved")
COMMON_INTERVALS = (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)


@dataclass
class CurveFit:
    t0: float          # seconds since epoch of position 0
    dt: float          # seconds per position
    r: float
    rmse: float        # bytes
    fit: float         # 1 - mse / variance
    n: int             # positions compared
    bracketed: float   # share of readings lying between the timed readings around them
    covered: float     # share of the untimed readings inside the timed span


def _sliding_sums(U: np.ndarray, WU: np.ndarray, V: np.ndarray, WV: np.ndarray):
    """For every lag k (index k + len(U) - 1), sums over the overlap of U[i] and V[i + k]: the count of
    valid pairs, sum u², sum v², sum uv (masked by WU and WV; U and V are zero where invalid)."""
    size = 1 << (len(U) + len(V) - 2).bit_length()
    full = len(U) + len(V) - 1
    fa = {name: np.fft.rfft(x[::-1], size) for name, x in (("w", WU), ("u", U), ("uu", U * U))}
    fb = {name: np.fft.rfft(x, size) for name, x in (("w", WV), ("v", V), ("vv", V * V))}

    def corr(a: str, b: str) -> np.ndarray:
        return np.fft.irfft(fa[a] * fb[b], size)[:full]

    return np.rint(corr("w", "w")), corr("uu", "w"), corr("w", "vv"), corr("u", "v")


def match_curve(u_pos: np.ndarray, u_val: np.ndarray, t_sec: np.ndarray, t_val: np.ndarray,
                interval: float | None = None) -> tuple[CurveFit | None, str]:
    """Place an untimed series (integer positions, values) on a timed one of the same quantity: find the
    time of position 0 and the seconds per position that make the values agree. Returns (fit, why not)."""
    ok = np.isfinite(u_val)
    u_pos, u_val = u_pos[ok].astype(np.int64), u_val[ok].astype(np.float64)
    ok = np.isfinite(t_val) & np.isfinite(t_sec)
    t_sec, t_val = t_sec[ok].astype(np.float64), t_val[ok].astype(np.float64)
    if len(u_val) < MIN_CURVE_POINTS or len(t_val) < MIN_CURVE_POINTS:
        return None, "too few samples to compare"
    if np.ptp(u_val) < MIN_CURVE_RANGE:
        return None, "its curve is too flat to match (no distinct structure)"
    order = np.argsort(t_sec, kind="stable")
    t_sec, t_val = t_sec[order], t_val[order]
    t_sec, first = np.unique(t_sec, return_index=True)
    t_val = t_val[first]
    if len(t_sec) < MIN_CURVE_POINTS:
        return None, "too few distinct times in the timed series"
    u_pos = u_pos - u_pos.min()
    n_pos = int(u_pos.max()) + 1
    ref, scale = float(np.mean(u_val)), float(np.std(u_val)) or 1.0
    v_norm = (t_val - ref) / scale
    dt_t = float(np.median(np.diff(t_sec))) if len(t_sec) > 1 else 1.0
    span = t_sec[-1] - t_sec[0]
    cands = [interval] if interval else sorted(set(COMMON_INTERVALS) | {round(dt_t, 6)})
    best = None
    for dt in cands:
        # the coarse search works on at most a few thousand positions and ~100k grid points: both
        # series are thinned by the same stride, the fine alignment is left to _refine
        stride = max(1, math.ceil(n_pos / COARSE_POSITIONS), math.ceil(span / dt / COARSE_GRID))
        step = dt * stride
        m = int(span / step) + 1
        if m < MIN_CURVE_POINTS:
            continue
        keep = u_pos % stride == 0
        pos = u_pos[keep] // stride
        n = int(pos.max()) + 1
        U, WU = np.zeros(n), np.zeros(n)
        U[pos] = (u_val[keep] - ref) / scale
        WU[pos] = 1.0
        grid = t_sec[0] + np.arange(m) * step
        V = np.interp(grid, t_sec, v_norm)
        j = np.clip(np.searchsorted(t_sec, grid), 1, len(t_sec) - 1)
        near = np.minimum(np.abs(grid - t_sec[j]), np.abs(grid - t_sec[j - 1]))
        WV = (near <= max(2 * dt_t, step)).astype(np.float64)   # no made-up values across logging gaps
        V = V * WV
        N, Suu, Svv, Suv = _sliding_sums(U, WU, V, WV)
        min_overlap = max(MIN_CURVE_POINTS, 0.5 * min(WU.sum(), WV.sum()))
        valid = N >= min_overlap
        if not valid.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            mse = np.where(valid, np.maximum(Suu - 2 * Suv + Svv, 0) / N, np.inf)
        k = int(np.argmin(mse))
        if best is None or mse[k] < best[0]:
            best = (float(mse[k]), dt, k, grid[0], mse, n, stride)
    if best is None:
        return None, "the series do not overlap enough"
    mse_best, dt, k, g0, mse, n, stride = best
    # unique: every lag that fits nearly as well lies next to the best one
    close = np.flatnonzero(mse <= 2 * mse_best + 1e-4)
    width = max(3, int(0.02 * n))
    if close.min() < k - width or close.max() > k + width:
        return None, "the curve fits several offsets equally well (not distinctive enough)"
    lag = k - (n - 1)
    t0 = g0 + lag * dt * stride
    t0, dt = _refine(u_pos, u_val, t_sec, t_val, t0, dt, max(2, stride))
    fit = _score(u_pos, u_val, t_sec, t_val, t0, dt)
    if fit is None:
        return None, "the series do not overlap enough"
    if fit.covered < MIN_COVERED:
        return None, f"the best fit overlaps only {fit.covered:.0%} of its readings"
    if fit.r < MIN_R or fit.fit < MIN_FIT or fit.bracketed < MIN_BRACKETED:
        return None, (f"best fit r={fit.r:.3f}, {fit.bracketed:.0%} of readings agree with the timed ones around "
                      f"them: not close enough (needs r ≥ {MIN_R} and {MIN_BRACKETED:.0%})")
    return fit, ""


def _score(u_pos, u_val, t_sec, t_val, t0: float, dt: float) -> CurveFit | None:
    t = t0 + u_pos * dt
    inside = (t >= t_sec[0]) & (t <= t_sec[-1])
    if inside.sum() < MIN_CURVE_POINTS:
        return None
    a, tt = u_val[inside], t[inside]
    b = np.interp(tt, t_sec, t_val)
    # a reading placed right lies between the timed readings just before and after it
    j = np.clip(np.searchsorted(t_sec, tt), 1, len(t_sec) - 1)
    lo = np.minimum(t_val[j - 1], t_val[j]) - BRACKET_SLACK
    hi = np.maximum(t_val[j - 1], t_val[j]) + BRACKET_SLACK
    mse = float(np.mean((a - b) ** 2))
    var = float(np.var(a))
    r = float(np.corrcoef(a, b)[0, 1]) if var > 0 and np.var(b) > 0 else 0.0
    return CurveFit(t0=t0, dt=dt, r=r, rmse=math.sqrt(mse), fit=1 - mse / var if var > 0 else 0.0,
                    n=int(inside.sum()), bracketed=float(np.mean((a >= lo) & (a <= hi))),
                    covered=float(inside.mean()))


def _refine(u_pos, u_val, t_sec, t_val, t0: float, dt: float, shift: float) -> tuple[float, float]:
    """Least squares over (offset, interval) near the coarse match (within `shift` positions): loggers
    drift (-l 1 ticks every ~1.004 s), and the coarse search saw thinned series."""
    if len(u_pos) > REFINE_POINTS:
        sel = np.linspace(0, len(u_pos) - 1, REFINE_POINTS).astype(int)
        u_pos, u_val = u_pos[sel], u_val[sel]
    c = float(np.median(u_pos))
    tc = t0 + c * dt
    # nearest to the current estimate first, so that a flat cost (a plateau) keeps the estimate
    steps = np.linspace(-1, 1, 31)
    steps = steps[np.argsort(np.abs(steps), kind="stable")]
    for rel, reach in ((0.01, shift), (0.0005, shift / 10), (0.00005, shift / 100)):
        dts = dt * (1 + rel * steps)
        tcs = tc + dt * reach * steps
        best = (np.inf, tc, dt)
        for d in dts:
            t = tcs[:, None] + (u_pos[None, :] - c) * d
            inside = (t >= t_sec[0]) & (t <= t_sec[-1])
            err = np.where(inside, (np.interp(t, t_sec, t_val) - u_val[None, :]) ** 2, 0.0)
            cnt = inside.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                cost = np.where(cnt >= MIN_CURVE_POINTS, err.sum(axis=1) / cnt, np.inf)
            i = int(np.argmin(cost))
            if cost[i] < best[0]:
                best = (cost[i], tcs[i], d)
        _, tc, dt = best
    return tc - c * dt, dt


def _index_column(df: pl.DataFrame) -> pl.Expr:
    """The sample index of an untimed source: seq, else the line order."""
    if df["seq"].null_count() < df.height:
        return pl.col("seq")
    return pl.col("line").rank("dense").cast(pl.Int64) - 1


def place_untimed(samples, events, infos: dict[str, InputInfo], opts: Options):
    interval, end = opts.interval, opts.end
    have = stamps.sources_with(samples, events, ("time", "uptime"))
    timed, with_uptime, has_rows = have["time"], have["uptime"], have[None]
    untimed = [p for p in infos if p in has_rows and p not in timed and p not in with_uptime]
    if not untimed:
        return samples, events
    # each source's rows split once, and the new times written in one pass at the end: a filter of the
    # whole frame per source made a job of many small files quadratic
    by_source = _split(samples, untimed)
    events_by_source = _split(events, untimed)
    ref = _curve_reference(samples, timed)
    sample_times, event_times = [], []
    for path in untimed:
        info = infos[path]
        rows = by_source.get(path)
        if rows is None:
            info.anchor = "no clock: analyzed in file order (no samples to place)"
            continue
        # (seq as it is: no query per file for what most sources hold)
        has_seq = rows["seq"].null_count() < rows.height
        idx = rows["seq"] if has_seq else rows.select(_index_column(rows).alias("i"))["i"]
        i0, i1 = idx.min(), idx.max()
        steps = rows["step"].null_count() < rows.height
        on_index = "step index" if steps and not has_seq else "sample index"
        placed = None
        if opts.start is not None and interval:
            t0 = opts.start.astimezone(timezone.utc).timestamp()
            placed = (t0 - i0 * interval, interval,
                      f"placed from --start {stamps.iso(opts.start)} with --interval {interval:g} s (sample n at start + n × interval)")
        elif end is not None and interval:
            t1 = end.astimezone(timezone.utc).timestamp()
            placed = (t1 - i1 * interval, interval,
                      f"placed from --end {stamps.iso(end)} with --interval {interval:g} s (last sample at the end)")
        else:
            placed, why_not = _place_by_curve(rows, ref, interval)
            if placed is None and why_not:
                info.notes.append(why_not)
        if placed is None:
            hint = "" if opts.start or end else "; pass --start (or --end) with --interval to place it on the clock"
            if (opts.start or end) and not interval:
                hint = "; --start/--end need --interval to place it"
            info.anchor = f"no clock: analyzed on its {on_index}{hint}"
            continue
        t0, dt, how = placed
        rows = _place_rows(rows, _index_column(rows), t0, dt)
        sample_times.append(rows.select("_r", "time"))
        if path in events_by_source:
            event_times.append(_place_events_by_line(events_by_source[path], rows))
        info.anchor = how
    return _scatter(samples, sample_times), _scatter(events, event_times)


def _split(df: pl.DataFrame, sources: list[str]) -> dict[str, pl.DataFrame]:
    """The rows of each of `sources`, with `_r` their row number in `df`."""
    part = rows_where(df.with_row_index("_r"), pl.col("source").is_in(sources))
    return {k[0]: v for k, v in partitions(part, "source").items()}


def _scatter(df: pl.DataFrame, times: list[pl.DataFrame]) -> pl.DataFrame:
    """df with `time` set at the rows (`_r`) that `times` hold."""
    if not times:
        return df
    new = pl.concat(times)
    return df.with_columns(df["time"].scatter(new["_r"].cast(pl.Int64), new["time"]).alias("time"))


def _place_rows(rows: pl.DataFrame, index: pl.Expr, t0: float, dt: float) -> pl.DataFrame:
    t_us = rows.select(((pl.lit(t0) + index.cast(pl.Float64) * dt) * US).round(0).cast(pl.Int64).alias("t"))["t"]
    new = pl.DataFrame({"t": t_us}).select(stamps.from_us(pl.col("t")).alias("time"))["time"]
    return rows.with_columns(new.cast(rows["time"].dtype).alias("time"))


def _place_events_by_line(part: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Events of a just-placed source (`part`) take the time of the nearest sample line (`rows`, that
    source's placed samples) before them, else after. Returns `_r`, `time`."""
    ref = rows.select("line", pl.col("time").alias("_t")).drop_nulls().sort("line")
    ref = ref.unique("line", keep="first").sort("line")
    part = part.sort("line")
    back = part.join_asof(ref, on="line", strategy="backward").select("_r", "_t")
    fwd = part.join_asof(ref, on="line", strategy="forward").select("_r", pl.col("_t").alias("_f"))
    return back.join(fwd, on="_r").select("_r", pl.coalesce("_t", "_f").cast(part["time"].dtype).alias("time"))


def _curve_reference(samples: pl.DataFrame, timed: set[str]) -> pl.DataFrame:
    """The timed readings an untimed curve may be matched against."""
    return rows_where(samples, pl.col("source").is_in(list(timed)) & pl.col("time").is_not_null()
                      & pl.col("bytes").is_not_null() & pl.col("series").is_in(CURVE_SERIES))


def _place_by_curve(rows: pl.DataFrame, ref: pl.DataFrame, interval):
    """Match the untimed source's memory curves against timed ones (`ref`, _curve_reference) of the same
    series, GPU and pid, the most varied curve first; the first curve with a close, unique fit places the
    whole source, by the timed source that agrees best with it."""
    if ref.is_empty():
        return None, ""
    rows = rows.with_columns(_index_column(rows).alias("_i")).drop_nulls(["bytes", "_i"])
    if rows.is_empty():
        return None, ""
    curves = []
    for (series, gpu, pid), part in rows_where(rows, pl.col("series").is_in(CURVE_SERIES)).group_by("series", "gpu", "pid", maintain_order=True):
        same = rows_where(ref, (pl.col("series") == series)
                          & (pl.col("gpu") == gpu if gpu is not None else pl.lit(True))
                          & (pl.col("pid") == pid if pid is not None else pl.col("pid").is_null()))
        if same.height:
            curves.append((float(part["bytes"].std() or 0), series, gpu, part, same))
    tried = []
    # (equally varied curves, two ranks' identical leaks, in order of first appearance)
    for _, series, gpu, part, same in sorted(curves, key=lambda c: -c[0]):
        idx = part["_i"].to_numpy()
        distinct = np.unique(idx)
        step = max(1, int(np.gcd.reduce(np.diff(distinct)))) if len(distinct) > 1 else 1
        label = f"{series} curve{' of GPU ' + str(gpu) if gpu is not None else ''}"
        fits = []
        for (other, _), opart in sorted(same.group_by("source", "gpu", maintain_order=True), key=lambda g: str(g[0][0])):
            opart = opart.sort("time", maintain_order=True)
            fit, why = match_curve((idx - idx.min()) // step, part["bytes"].to_numpy().astype(float),
                                   opart["time"].dt.epoch("us").to_numpy() / US,
                                   opart["bytes"].to_numpy().astype(float), interval * step if interval else None)
            if fit is None:
                tried.append(f"{label} vs {other}: {why}")
            else:
                fits.append((fit.rmse, other, fit))
        if not fits:
            continue
        _, other, fit = min(fits, key=lambda f: f[0])   # the timed source that agrees best
        dt_index = fit.dt / step
        how = (f"untimed, aligned to {other} by matching the {label} (r={fit.r:.3f}, rmse {fit.rmse / MIB:.1f} MiB "
               f"over {fit.n} samples, {fit.bracketed:.0%} of them between the timed readings around them; "
               f"first sample at {stamps.iso(fit.t0 * US)}, one every {fit.dt:.4g} s)")
        return (fit.t0 - idx.min() * dt_index, dt_index, how), ""
    if not tried:
        return None, ""
    return None, "no clock, and no timed source with the same curve to align it to: " + "; ".join(tried[:3])
