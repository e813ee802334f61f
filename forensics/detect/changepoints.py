"""Change points of one bounded series: where a piecewise-linear fit changes slope or level.

Binary segmentation with a one-line-per-segment least-squares cost on at most MAX_BUCKETS bucket
means, then a merge pass; the segments it leaves and the jumps between them. docs/detection.md,
"Change points".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from forensics.detect import robust
from forensics.detect.thresholds import (LEVEL_RESOLUTION, MIN_SEGMENT, PENALTY_PER_CHANGE, RAMP_OFFSET_INTERVALS,
                                         ZERO_VARIANCE)


@dataclass
class Segment:
    i0: int            # bucket index range [i0, i1)
    i1: int
    x0: float
    x1: float
    slope: float       # bytes per x unit
    y0: float          # fitted value at x0
    y1: float          # fitted value at x1
    kind: str = "flat"  # flat | growth | decline | release


class LinearCost:
    """Residual sum of squares of one straight line per segment, O(1) per segment via prefix sums.

    A mean-shift cost (ruptures' l2 / linear kernel) cuts a ramp into a staircase of dozens of pieces;
    a line per segment keeps a ramp one piece, so a change point means the slope or level changed.
    (x, y) are scaled to about [0, 1]; the cost is returned in units of the noise variance (`scale` is
    (range / sigma)^2).
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, scale: float = 1.0):
        self.scale = scale

        def pre(a):
            return np.concatenate([[0.0], np.cumsum(a)])
        self._a = (pre(np.ones_like(x)), pre(x), pre(y), pre(x * x), pre(x * y), pre(y * y))
        self._s = tuple(a.tolist() for a in self._a)   # scalar lookups: Python floats are faster to index

    def error(self, start, end):
        p1, px, py, pxx, pxy, pyy = self._s
        s1 = p1[end] - p1[start]
        sx = px[end] - px[start]
        sy = py[end] - py[start]
        sxx = pxx[end] - pxx[start]
        sxy = pxy[end] - pxy[start]
        syy = pyy[end] - pyy[start]
        if s1 <= 0:
            return 0.0
        vx = sxx - sx * sx / s1
        cxy = sxy - sx * sy / s1
        vy = syy - sy * sy / s1
        sse = vy - (cxy * cxy / vx if vx > ZERO_VARIANCE else 0.0)
        return max(sse, 0.0) * self.scale

    def errors_from(self, start, ends):
        """`error(start, end)` for every end in the array `ends`: the same operations, in the same order,
        elementwise (IEEE arithmetic in numpy rounds as Python's floats do), so the same values."""
        p1, px, py, pxx, pxy, pyy = self._a
        return self._sse(p1[ends] - p1[start], px[ends] - px[start], py[ends] - py[start],
                         pxx[ends] - pxx[start], pxy[ends] - pxy[start], pyy[ends] - pyy[start])

    def errors_to(self, starts, end):
        """`error(start, end)` for every start in the array `starts` (as errors_from)."""
        p1, px, py, pxx, pxy, pyy = self._a
        return self._sse(p1[end] - p1[starts], px[end] - px[starts], py[end] - py[starts],
                         pxx[end] - pxx[starts], pxy[end] - pxy[starts], pyy[end] - pyy[starts])

    def _sse(self, s1, sx, sy, sxx, sxy, syy):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            vx = sxx - sx * sx / s1
            cxy = sxy - sx * sy / s1
            vy = syy - sy * sy / s1
            sse = vy - np.where(vx > ZERO_VARIANCE, cxy * cxy / vx, 0.0)
        return np.where(s1 <= 0, 0.0, np.maximum(sse, 0.0) * self.scale)

    def best_split(self, start: int, end: int) -> tuple[int | None, float]:
        """The split of [start, end) that lowers the cost most, and by how much: every admissible split
        priced in one pass; among equal gains the latest (as ruptures' max over (gain, split) pairs).
        (None, 0) when the segment is too short to split."""
        splits = np.arange(start + MIN_SEGMENT, end - MIN_SEGMENT + 1)
        if splits.size == 0:
            return None, 0
        gains = (self.error(start, end) - self.errors_from(start, splits)) - self.errors_to(splits, end)
        i = int(np.flatnonzero(gains == gains.max())[-1])
        return int(splits[i]), float(gains[i])


def binseg(cost: LinearCost, n: int, pen: float) -> list[int]:
    """Binary segmentation with a penalty: split the segment whose best split gains most while that
    gain exceeds `pen`. The algorithm of ruptures' `Binseg(jump=1).predict(pen=...)`, the same splits
    and tie-breaks; written here because it is a few lines over `best_split`, and ruptures' import
    loads scipy (more CPU than the rest of a day's run) for costs we do not use."""
    best: dict[tuple[int, int], tuple[int | None, float]] = {}
    bkps = [n]
    while True:
        for seg in zip([0] + bkps[:-1], bkps):
            if seg not in best:
                best[seg] = cost.best_split(*seg)
        bkp, gain = max((best[seg] for seg in zip([0] + bkps[:-1], bkps)), key=lambda s: s[1])
        if bkp is None or not gain > pen:
            return bkps
        bkps = sorted(bkps + [bkp])


def change_points(xb: np.ndarray, yb: np.ndarray, sigma: float) -> list[int]:
    """Bucket indexes where a piecewise-linear fit changes (ends of segments, last = len).

    Binary segmentation with the linear cost, then a bottom-up merge pass that removes any change
    point worth less than the penalty (binary segmentation is greedy)."""
    n = xb.size
    if n < 2 * MIN_SEGMENT:
        return [n]
    xr = float(xb[-1] - xb[0]) or 1.0
    y0 = float(yb.min())
    yr = float(yb.max() - y0)
    if yr <= 0:
        return [n]
    sigma = max(sigma, yr * LEVEL_RESOLUTION)   # keeps prefix sums numerically meaningful
    cost = LinearCost((xb - xb[0]) / xr, (yb - y0) / yr, scale=(yr / sigma) ** 2)
    pen = PENALTY_PER_CHANGE * math.log(max(n, 3))
    bkps = binseg(cost, n, pen)
    # bottom-up: merge the cheapest adjacent pair while the merge costs less than the penalty
    while len(bkps) > 1:
        starts = [0] + bkps[:-1]
        best, best_i = None, -1
        for i in range(len(bkps) - 1):
            a, m, b = starts[i], bkps[i], bkps[i + 1]
            gain = cost.error(a, b) - cost.error(a, m) - cost.error(m, b)
            if best is None or gain < best:
                best, best_i = gain, i
        if best is None or best >= pen:
            break
        del bkps[best_i]
    return bkps


def segments(xb: np.ndarray, yb: np.ndarray, bkps: list[int]) -> list[Segment]:
    segs = []
    start = 0
    for end in bkps:
        xs, ys = xb[start:end], yb[start:end]
        b, a = robust.line_fit(xs, ys)
        x0, x1 = float(xs[0]), float(xs[-1])
        segs.append(Segment(start, end, x0, x1, b, a + b * x0, a + b * x1))
        start = end
    return segs


def seg_jump(a: Segment, b: Segment) -> float:
    """The level change between two adjacent segments, both lines taken to the middle of the gap
    between them (sparse samples leave a gap that a ramp's slope also crosses). A short piece (a step
    inside a bucket) extrapolates badly: it borrows its long neighbour's slope, or none."""
    long_a, long_b = (a.i1 - a.i0) > MIN_SEGMENT + 1, (b.i1 - b.i0) > MIN_SEGMENT + 1
    sa = a.slope if long_a else (b.slope if long_b else 0.0)
    sb = b.slope if long_b else (a.slope if long_a else 0.0)
    xm = 0.5 * (a.x1 + b.x0)
    return (b.y0 + sb * (xm - b.x0)) - (a.y1 + sa * (xm - a.x1))


def ramp_offset(a: Segment, b: Segment, gap: float) -> float:
    """How far two pieces of one rising ramp may sit apart: a job's memory moves in steps, and a
    logger that samples out of step with them sees the same ramp ahead or behind by up to one
    sampling interval's growth (+512, +512, +256 MiB ...). Flat pieces (a staircase) get none."""
    slope = max(a.slope, b.slope, 0.0)
    # the span between the pieces too: seg_jump does not extend a short piece's own slope across it
    return slope * ((b.x0 - a.x1) + RAMP_OFFSET_INTERVALS * gap)


def fitted(xb: np.ndarray, segs: list[Segment]) -> np.ndarray:
    f = np.empty_like(xb)
    for s in segs:
        f[s.i0:s.i1] = s.y0 + s.slope * (xb[s.i0:s.i1] - s.x0)
    return f
