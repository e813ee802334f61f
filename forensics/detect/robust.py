"""Robust statistics of one series: noise, resolution, spikes, bounding, line fits.

Two float arrays, `x` and `y` (bytes), sorted by x; every estimate is robust to the steps, spikes and
gaps that memory logs have. Thresholds and their reasons: docs/detection.md.
"""
from __future__ import annotations

import math

import numpy as np

from forensics.detect.thresholds import (DECIMATE_ABOVE, MEDIAN_WINDOW, NOISE_CHUNKED_FROM, NOISE_CHUNKS,
                                         NOISE_CHUNK_PERCENTILE, QUANTUM_MAX_FRACTION, QUANTUM_MIN_CHANGES,
                                         QUANTUM_MIN_MOVING, QUANTUM_MULTIPLES, QUANTUM_SAMPLE, QUANTUM_TOLERANCE,
                                         SPIKE_MIN_FRACTION, SPIKE_SIGMAS)


def median(values) -> float:
    """np.median of a 1-D sequence, the same value (the middle one, or the mean of the middle two; nan
    when any is nan), without np.median's any-axis machinery: detection takes a few hundred medians
    of short arrays per job."""
    a = np.asarray(values, dtype=np.float64)
    n = a.size
    if n == 0:
        return float("nan")
    h = n // 2
    p = np.partition(a, (h, n - 1) if n % 2 else (h - 1, h, n - 1))
    if np.isnan(p[-1]):   # as np.median: a nan sorts last
        return float("nan")
    return float(p[h]) if n % 2 else float((p[h - 1] + p[h]) / 2)


def mad_sigma(d: np.ndarray) -> float:
    """Robust standard deviation of first differences, scaled to one sample's noise. It is 0 when
    more than half of the readings repeat exactly; the source's resolution then sets the floor."""
    if d.size == 0:
        return 0.0
    med = median(d)
    dev = np.abs(d - med)
    mad = float(median(dev))
    return float(1.4826 * mad / math.sqrt(2.0))


def sample_diffs(y: np.ndarray, cap: int = 1_000_000) -> np.ndarray:
    """First differences, of at most `cap` evenly spread pairs of neighbours."""
    if y.size - 1 <= cap:
        return np.diff(y)
    idx = np.linspace(0, y.size - 2, cap).astype(np.int64)
    return y[idx + 1] - y[idx]


def _trend_diffs(x: np.ndarray, y: np.ndarray, cap: int = 1_000_000) -> np.ndarray:
    """First differences less the typical slope times the x step: with irregular sampling (a
    logger's jitter, gaps) a steady ramp is not noise."""
    dx, dy = np.diff(x), np.diff(y)
    if dx.size > cap:
        k = dx.size // cap + 1
        dx, dy = dx[::k], dy[::k]
    ok = dx > 0
    if not ok.any():
        return dy
    slope = float(median(dy[ok] / dx[ok]))
    return dy - slope * dx


def level_noise(d: np.ndarray) -> float:
    """The noise of the changes between jumps: the changes split into the two groups that are each
    tightest (the smallest summed squared deviation), and the one-sample noise of the lower group. A
    staircase of two readings a stair jumps at every other reading, so a noise estimate taken over all
    first differences counts its jumps as half of the noise."""
    ds = np.sort(d - median(d))
    n = ds.size
    k = np.arange(2, n - 1)                      # the lower group's size: at least two in each
    if k.size == 0:
        return mad_sigma(d)
    c1, c2 = np.cumsum(ds), np.cumsum(ds * ds)
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    # the split leaves the jumps out of the lower group: its plain spread is the noise (a MAD of a
    # dozen changes between stairs is too loose)
    return float(np.std(ds[: int(k[np.argmin(left + right)])]) / math.sqrt(2.0))


def quantum(d: np.ndarray, level: float) -> float:
    """The source's resolution (e.g. 1 MiB for nvidia-smi) when readings move on a lattice: many of
    them change, and every change is a multiple of the smallest one. 0 otherwise (a noise-free
    staircase moves rarely, and its steps are not a resolution)."""
    nz = np.abs(d[d != 0])
    if nz.size < max(QUANTUM_MIN_CHANGES, QUANTUM_MIN_MOVING * d.size):
        return 0.0
    q = float(nz.min())
    if q > QUANTUM_MAX_FRACTION * level:   # that is a step of the signal, not a resolution
        return 0.0
    sub = nz if nz.size <= QUANTUM_SAMPLE else nz[:: nz.size // QUANTUM_SAMPLE + 1]
    # the smallest change may be a few resolution steps (a ramp moving 2 or 3 MiB a sample)
    for k in range(1, QUANTUM_MULTIPLES + 1):
        r = sub / (q / k)
        if float(np.abs(r - np.round(r)).max()) < QUANTUM_TOLERANCE:
            return q / k
    return 0.0


def noise(x: np.ndarray, y: np.ndarray) -> float:
    """Per-sample noise: the MAD of trend-corrected first differences, over the whole series and in
    eight chunks; the larger of the global value and the chunks' upper quartile, so that a quiet
    part (an idle GPU) does not hide the noise of a busy one."""
    d = _trend_diffs(x, y)
    sig = mad_sigma(d)
    if d.size >= NOISE_CHUNKED_FROM:
        chunks = [mad_sigma(c) for c in np.array_split(d, NOISE_CHUNKS)]
        sig = max(sig, float(np.percentile(chunks, NOISE_CHUNK_PERCENTILE)))
    return sig


def _median5(y: np.ndarray) -> np.ndarray:
    """Running median of 5, vectorized with a min/max network: O(n), no sort. The series is padded at
    each end by continuing the trend of its first or last five samples (a robust line), so a ramp's
    ends stay as they are while a glitch in the first or last sample is still a glitch."""
    if y.size < MEDIAN_WINDOW:
        return y.copy()

    def pad(e: np.ndarray, side: int) -> np.ndarray:
        i, j = np.triu_indices(5, k=1)
        slope = float(median((e[j] - e[i]) / (j - i)))
        mid = float(median(e - slope * np.arange(5)))
        steps = np.array([-2.0, -1.0]) if side < 0 else np.array([5.0, 6.0])
        return mid + slope * steps

    yp = np.concatenate([pad(y[:5], -1), y, pad(y[-5:], 1)])
    a, b, c, d, e = (yp[k: yp.size - 4 + k] for k in range(5))
    lo = np.maximum(np.minimum(a, b), np.minimum(d, e))
    hi = np.minimum(np.maximum(a, b), np.maximum(d, e))
    return np.maximum(np.minimum(c, lo), np.minimum(np.maximum(c, lo), hi))


def despike(y: np.ndarray, sigma: float) -> np.ndarray:
    """Replace one- and two-sample spikes (another process touching the GPU for a moment, a glitch):
    found against the running median of 5, filled in between their neighbours; a level that lasts
    three samples or more is kept."""
    med = _median5(y)
    thr = max(SPIKE_SIGMAS * sigma, SPIKE_MIN_FRACTION * float(median(np.abs(y))))
    spike = np.abs(y - med) > thr
    if not spike.any() or spike.all():
        return y
    # filled in from the nearest good neighbours (the running median lags a steep ramp by a sample)
    idx = np.arange(y.size)
    out = y.copy()
    out[spike] = np.interp(idx[spike], idx[~spike], y[~spike])
    return out


def buckets(x: np.ndarray, y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal-count bucket means (x, y) and the bucket edges (raw indexes); identity when small."""
    n = x.size
    if n <= m:
        return x.copy(), y.copy(), np.arange(n + 1)
    edges = np.linspace(0, n, m + 1).round().astype(np.int64)
    cnt = np.diff(edges).astype(float)
    xb = np.add.reduceat(x - x[0], edges[:-1]) / cnt + x[0]
    yb = np.add.reduceat(y - y[0], edges[:-1]) / cnt + y[0]
    return xb, yb, edges


def decimate(x: np.ndarray, y: np.ndarray, limit: int = DECIMATE_ABOVE) -> tuple[np.ndarray, np.ndarray]:
    """Bound a long series: the median of every 5 samples (at the middle one's x), repeated until at
    most `limit` remain. O(n) and robust: a one- or two-sample spike never survives a median of 5."""
    while y.size > limit:
        k = y.size // 5 * 5
        a, b, c, d, e = (y[i:k:5] for i in range(5))
        lo = np.maximum(np.minimum(a, b), np.minimum(d, e))
        hi = np.minimum(np.maximum(a, b), np.maximum(d, e))
        y = np.maximum(np.minimum(c, lo), np.minimum(np.maximum(c, lo), hi))
        x = x[2:k:5]
    return x, y


def line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept (intercept at x=0)."""
    if x.size < 2:
        return 0.0, float(y.mean()) if y.size else 0.0
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    if sxx <= 0:
        return 0.0, float(ym)
    b = float(((x - xm) * (y - ym)).sum() / sxx)
    return b, float(ym - b * xm)


def theil_sen(x: np.ndarray, y: np.ndarray, max_points: int = 300) -> float:
    """Median of pairwise slopes (robust to spikes), on an even subsample for bounded cost."""
    if x.size < 2:
        return 0.0
    if x.size > max_points:
        idx = np.linspace(0, x.size - 1, max_points).round().astype(np.int64)
        x, y = x[idx], y[idx]
    i, j = np.triu_indices(x.size, k=1)
    dx = x[j] - x[i]
    ok = dx > 0
    if not ok.any():
        return 0.0
    return float(median((y[j] - y[i])[ok] / dx[ok]))


def lstsq_each(stack: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """`np.linalg.lstsq(A, y, rcond=None)[0]` for every matrix A of `stack` (k, m, n), bit for bit:
    lstsq is numpy's LAPACK gufunc applied to one matrix, and applied to the stack it makes the same
    call (gelsd, the same workspace) for each, without lstsq's ~30 µs of Python per matrix (120 per
    leak onset). Where that gufunc is not there, or a matrix fails (lstsq's LinAlgError), the loop."""
    gufunc = getattr(getattr(np.linalg, "_umath_linalg", None), "lstsq", None)
    if gufunc is not None and stack.dtype == np.float64 and y.dtype == np.float64 and stack.shape[1] > 0:
        rcond = np.finfo(np.float64).eps * max(stack.shape[1:])
        try:
            with np.errstate(invalid="raise", over="ignore", divide="ignore", under="ignore"):
                coefs, *_ = gufunc(stack, y[:, None], rcond, signature="ddd->ddid")
            return list(coefs[:, :, 0])
        except (FloatingPointError, TypeError, ValueError):   # (a numpy whose gufunc differs: the loop)
            pass
    return [np.linalg.lstsq(A, y, rcond=None)[0] for A in stack]
