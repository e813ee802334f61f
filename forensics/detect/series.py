"""One series, numbers only: bound it, find its change points, classify it, and measure a leak.

Everything here works on two float arrays, `x` (seconds since the series' first sample, or step, or
sample index) and `y` (bytes), sorted by x. The thresholds are explained in docs/detection.md; every
noise-relative one is in units of the series' own noise, estimated robustly (MAD of first differences).
"""
from __future__ import annotations

import functools
import importlib
import math
import sys
import threading
import types
from dataclasses import dataclass, field

import numpy as np

# Bounding the work
MIN_POINTS = 8            # fewer samples than this get no change-point search ...
SHORT_MIN = 4             # ... but from this many a steady rise to the end is judged, with low confidence,
SHORT_RUN = 3             # ... when its last this many readings-to-readings all rose, and
SHORT_MAX = 12            # ... up to this many (three segments of three cannot place a start-up and an onset)
SHORT_SIMILAR = 1.4       # a steady leak's rise per reading varies by the sampling jitter: a reading
                          # that rose 40 % faster than the median of the later ones is the start-up
DECIMATE_ABOVE = 250_000  # longer series are first reduced by medians of 5 (bounded, O(n) work)
MAX_BUCKETS = 500         # change-point search runs on at most this many bucket means
MIN_SEGMENT = 3           # buckets; a single spiky bucket cannot become a segment
# Noise, resolution, spikes
QUANTUM_MIN_MOVING = 0.05  # a resolution is read only when at least this share of readings change
QUANTUM_MAX_FRACTION = 0.005  # ... and the smallest change is below this share of the level
SPIKE_SIGMAS = 6.0        # a sample this far from its running median of 5 is a spike ...
SPIKE_MIN_FRACTION = 0.002  # ... when also this share of the level away
# Change points
PENALTY_PER_CHANGE = 4.0  # times ln(buckets), in units of the bucket noise variance
EVENT_SIGMAS = 3.0        # a segment's rise or fall must exceed this many bucket-noise sigmas
JUMP_SIGMAS = 4.0         # a jump between segments must exceed this many bucket-noise sigmas
# Start and end of the job inside the series
RELEASE_FRACTION = 0.5    # a release falls below mid-range ...
RELEASE_DROP = 0.4        # ... by at least this share of the range, in a few samples,
RELEASE_NOISE_SIGMAS = 10.0  # ... and by at least this many sample-noise sigmas
RELEASE_DRAWDOWN = 0.25   # a job that never fell by this share of its range before releases at the end
# What counts as a leak
LEAK_Z = 8.0              # a leak's slope must be this many standard errors above zero ...
LEAK_SIGMAS = 3.0         # ... its growth must exceed this many bucket-noise sigmas ...
LEAK_MIN_FRACTION = 0.01  # ... and this fraction of the series' typical level ...
LEAK_MIN_QUANTA = 3.0     # ... and this many resolution steps of the source (1 MiB for nvidia-smi)
NEW_HIGH_SHARE = 0.5      # at least this share of a leak's growth lies above all earlier levels
TAIL_QUIET_FRACTION = 0.05  # a ramp is still growing when it ends within this share of the duration ...
RAMP_TAIL_SHARE = 0.5     # ... or has been flat for less than this share of the ramp's own length
RAMP_JOIN_SHARE = 0.1     # pieces of one ramp may be offset by up to this share of their rise
SIMILAR_SLOPE = 2.5       # adjacent ramps with slopes within this factor are one linear growth
DECELERATION = 0.3        # a ramp whose final slope fell below this share of its mean slope is settling
STAIR_TAIL_FACTOR = 1.5   # a staircase is still growing when its last step is this recent (x interval)
STEP_HEIGHT_RATIO = 4.0   # steps of one staircase differ in height by less than this factor
FIRST_STEP_RATIO = 2.0    # a first step this unlike the later ones is the job's first epoch, not a stair
RAW_STAIRS_MAX = 20_000   # staircases are read on the samples themselves up to this many
STAIR_FLAT_SHARE = 0.2    # between stairs, drift and falls add up to less than this share of the rise
OSCILLATION_MIN_FRACTION = 0.02  # a fall counts towards a sawtooth when it exceeds this share of the level
FLOOR_RISE_SHARE = 0.3    # a sawtooth leaks when its floor rose by this share of a tooth's depth


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


@dataclass
class Leak:
    pattern: str               # linear | step
    onset: float               # x
    end: float                 # x of the last sample of the growing part
    rate: float                # bytes per x unit
    growth: float              # bytes grown from onset to end
    start_level: float
    end_level: float
    confidence: float
    steps: list[float] = field(default_factory=list)   # x of each step (staircase)
    z: float = 0.0             # growth in noise sigmas


@dataclass
class SeriesFit:
    classification: str        # flat | linear_growth | staircase | sawtooth | warmup_plateau | decline | release | too_short
    reason: str
    n: int
    segments: list[Segment] = field(default_factory=list)
    change_points: list[float] = field(default_factory=list)
    leak: Leak | None = None
    release_x: float | None = None     # x of the first sample after a terminal release (process death, job end)
    start_x: float | None = None       # x of the first sample after idle lead-in (job start)
    end_x: float | None = None         # last x of the analyzed body
    noise: float = 0.0                 # per-sample noise (bytes)
    bucket_noise: float = 0.0
    level: float = 0.0                 # median of the body
    peak: float = 0.0
    persistent_growth: float = 0.0     # growth that did not fall back, over the whole body
    oscillating: bool = False


# ----------------------------------------------------------------------------------------------
# small numeric helpers

def _median(values) -> float:
    """np.median of a 1-D sequence, the same value (the middle one, or the mean of the middle two; nan
    when any is nan): without np.median's any-axis machinery, ~4 µs a call instead of ~15, and
    detection takes a few hundred medians of short arrays per job."""
    a = np.asarray(values, dtype=np.float64)
    n = a.size
    if n == 0:
        return float("nan")
    h = n // 2
    p = np.partition(a, (h, n - 1) if n % 2 else (h - 1, h, n - 1))
    if np.isnan(p[-1]):   # as np.median: a nan sorts last
        return float("nan")
    return float(p[h]) if n % 2 else float((p[h - 1] + p[h]) / 2)


def _mad_sigma(d: np.ndarray) -> float:
    """Robust standard deviation of first differences, scaled to one sample's noise. It is 0 when
    more than half of the readings repeat exactly; the source's resolution then sets the floor."""
    if d.size == 0:
        return 0.0
    med = _median(d)
    dev = np.abs(d - med)
    mad = float(_median(dev))
    return float(1.4826 * mad / math.sqrt(2.0))


def _sample_diffs(y: np.ndarray, cap: int = 1_000_000) -> np.ndarray:
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
    slope = float(_median(dy[ok] / dx[ok]))
    return dy - slope * dx


def _quantum(d: np.ndarray, level: float) -> float:
    """The source's resolution (e.g. 1 MiB for nvidia-smi) when readings move on a lattice: many of
    them change, and every change is a multiple of the smallest one. 0 otherwise (a noise-free
    staircase moves rarely, and its steps are not a resolution)."""
    nz = np.abs(d[d != 0])
    if nz.size < max(3, QUANTUM_MIN_MOVING * d.size):
        return 0.0
    q = float(nz.min())
    if q > QUANTUM_MAX_FRACTION * level:   # that is a step of the signal, not a resolution
        return 0.0
    sub = nz if nz.size <= 10_000 else nz[:: nz.size // 10_000 + 1]
    # the smallest change may be a few resolution steps (a ramp moving 2 or 3 MiB a sample)
    for k in range(1, 9):
        r = sub / (q / k)
        if float(np.abs(r - np.round(r)).max()) < 0.02:
            return q / k
    return 0.0


def _noise(x: np.ndarray, y: np.ndarray) -> float:
    """Per-sample noise: the MAD of trend-corrected first differences, over the whole series and in
    eight chunks; the larger of the global value and the chunks' upper quartile, so that a quiet
    part (an idle GPU) does not hide the noise of a busy one."""
    d = _trend_diffs(x, y)
    sig = _mad_sigma(d)
    if d.size >= 64:
        chunks = [_mad_sigma(c) for c in np.array_split(d, 8)]
        sig = max(sig, float(np.percentile(chunks, 75)))
    return sig


def _median5(y: np.ndarray) -> np.ndarray:
    """Running median of 5, vectorized with a min/max network: O(n), no sort. The series is padded at
    each end by continuing the trend of its first or last five samples (a robust line), so a ramp's
    ends stay as they are while a glitch in the first or last sample is still a glitch."""
    if y.size < 5:
        return y.copy()

    def pad(e: np.ndarray, side: int) -> np.ndarray:
        i, j = np.triu_indices(5, k=1)
        slope = float(_median((e[j] - e[i]) / (j - i)))
        mid = float(_median(e - slope * np.arange(5)))
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
    thr = max(SPIKE_SIGMAS * sigma, SPIKE_MIN_FRACTION * float(_median(np.abs(y))))
    spike = np.abs(y - med) > thr
    if not spike.any() or spike.all():
        return y
    # filled in from the nearest good neighbours (the running median lags a steep ramp by a sample)
    idx = np.arange(y.size)
    out = y.copy()
    out[spike] = np.interp(idx[spike], idx[~spike], y[~spike])
    return out


def _buckets(x: np.ndarray, y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    return float(_median((y[j] - y[i])[ok] / dx[ok]))


class _LinearCost:
    """Residual sum of squares of one straight line per segment, O(1) per segment via prefix sums.

    A mean-shift cost (ruptures' l2 / linear kernel) cuts a ramp into a staircase of dozens of pieces;
    a line per segment keeps a ramp one piece, so a change point means the slope or level changed.
    The signal is (x, y) scaled to about [0, 1]; the cost is returned in units of the noise variance.
    """
    model = "linear_prefix"
    min_size = MIN_SEGMENT

    def __init__(self, scale: float = 1.0):
        self.scale = scale   # (range / sigma)^2: turns scaled SSE into noise-variance units

    def fit(self, signal):
        signal = np.asarray(signal, dtype=float)
        self.signal = signal
        x, y = signal[:, 0], signal[:, 1]

        def pre(a):
            return np.concatenate([[0.0], np.cumsum(a)])
        self._a = (pre(np.ones_like(x)), pre(x), pre(y), pre(x * x), pre(x * y), pre(y * y))
        self._s = tuple(a.tolist() for a in self._a)   # scalar lookups: Python floats are faster to index
        return self

    def error(self, start, end):
        # unrolled (no generator): Binseg calls this ~10^4 times per series; same arithmetic
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
        sse = vy - (cxy * cxy / vx if vx > 1e-18 else 0.0)
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
            sse = vy - np.where(vx > 1e-18, cxy * cxy / vx, 0.0)
        return np.where(s1 <= 0, 0.0, np.maximum(sse, 0.0) * self.scale)


# ruptures' package import loads every cost and search it ships, and three of their modules take
# functions from scipy (rank, rbf and cosine costs, the window search): ~1.3 s of CPU, more than the
# rest of a day's run. We use Binseg with our own cost only. While ruptures is imported, those scipy
# modules are stood in for by ones whose functions import the real module when first called (so the
# costs we do not use still work); the stand-ins are gone once ruptures is loaded.
_SCIPY_USED_BY_RUPTURES = ("scipy.spatial.distance", "scipy.stats.mstats", "scipy.signal")


def _deferred_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def deferred(*args, **kwargs):
            return getattr(importlib.import_module(name), attr)(*args, **kwargs)

        deferred.__name__ = deferred.__qualname__ = attr
        return deferred

    module.__getattr__ = __getattr__
    return module


_IMPORT_LOCK = threading.Lock()


def _import_ruptures() -> types.ModuleType:
    with _IMPORT_LOCK:
        if "ruptures" in sys.modules:
            return sys.modules["ruptures"]
        placed = {name: _deferred_module(name) for name in _SCIPY_USED_BY_RUPTURES if name not in sys.modules}
        sys.modules.update(placed)
        try:
            import ruptures
        finally:
            for name, module in placed.items():
                if sys.modules.get(name) is module:
                    del sys.modules[name]
    return ruptures


@functools.cache
def _ruptures_linear_cost() -> type:
    """_LinearCost as a ruptures cost (Binseg takes a custom cost only if it is a BaseCost)."""
    return type("LinearCost", (_LinearCost, _import_ruptures().base.BaseCost), {})


@functools.cache
def _binseg() -> type:
    """ruptures' Binseg whose search for the best split of a segment prices every candidate split in
    one numpy pass instead of two cost calls from Python per candidate (~10^4 per series: a few
    percent of a scanned job). Same candidates, same gains, same pick (the largest gain, the
    latest split among equal gains, as ruptures' max over (gain, bkp) tuples). Needs jump=1 and a
    cost with errors_from/errors_to; a NaN gain goes to ruptures' own loop (its order of NaNs)."""
    binseg = _import_ruptures().Binseg

    class Binseg(binseg):
        @functools.lru_cache(maxsize=None)   # as ruptures' own: fit() calls single_bkp.cache_clear()
        def single_bkp(self, start, end):
            segment_cost = self.cost.error(start, end)
            if np.isinf(segment_cost) and segment_cost < 0:
                return None, 0
            bkps = np.arange(start + self.min_size, end - self.min_size + 1)
            if bkps.size == 0:
                return None, 0
            gains = (segment_cost - self.cost.errors_from(start, bkps)) - self.cost.errors_to(bkps, end)
            best = gains.max()
            if np.isnan(best):
                return binseg.single_bkp.__wrapped__(self, start, end)
            i = int(np.flatnonzero(gains == best)[-1])
            return int(bkps[i]), float(gains[i])

    return Binseg


def change_points(xb: np.ndarray, yb: np.ndarray, sigma: float) -> list[int]:
    """Bucket indexes where a piecewise-linear fit changes (ends of segments, last = len).

    ruptures' binary segmentation with the linear cost, then a bottom-up merge pass that removes any
    change point worth less than the penalty (binary segmentation is greedy)."""
    n = xb.size
    if n < 2 * MIN_SEGMENT:
        return [n]
    xr = float(xb[-1] - xb[0]) or 1.0
    y0 = float(yb.min())
    yr = float(yb.max() - y0)
    if yr <= 0:
        return [n]
    sigma = max(sigma, yr * 1e-6)   # keeps prefix sums numerically meaningful
    signal = np.column_stack([(xb - xb[0]) / xr, (yb - y0) / yr])
    cost = _ruptures_linear_cost()(scale=(yr / sigma) ** 2)
    pen = PENALTY_PER_CHANGE * math.log(max(n, 3))
    algo = _binseg()(custom_cost=cost, min_size=MIN_SEGMENT, jump=1).fit(signal)
    try:
        bkps = algo.predict(pen=pen)
    except Exception:   # ruptures refuses when no admissible split exists
        bkps = [n]
    bkps = sorted(set(int(b) for b in bkps if 0 < b <= n) | {n})
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


def _segments(xb: np.ndarray, yb: np.ndarray, bkps: list[int]) -> list[Segment]:
    segs = []
    start = 0
    for end in bkps:
        xs, ys = xb[start:end], yb[start:end]
        b, a = line_fit(xs, ys)
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
    return slope * ((b.x0 - a.x1) + 1.5 * gap)


def _fitted(xb: np.ndarray, segs: list[Segment]) -> np.ndarray:
    f = np.empty_like(xb)
    for s in segs:
        f[s.i0:s.i1] = s.y0 + s.slope * (xb[s.i0:s.i1] - s.x0)
    return f


# ----------------------------------------------------------------------------------------------
# start and end of the job inside the series

def _range(y: np.ndarray) -> tuple[float, float]:
    ys = y if y.size <= 200_000 else y[:: y.size // 200_000 + 1]
    lo, hi = np.quantile(ys, [0.005, 0.995])
    return float(lo), float(hi)


def terminal_release(y: np.ndarray, sigma: float) -> int | None:
    """Index of the first sample of a final sharp fall that never recovers (process death, OOM kill,
    job end), or None. The growth before it is what counts; the fall itself is not a decline."""
    n = y.size
    if n < MIN_POINTS:
        return None
    lo, hi = _range(y)
    rng = hi - lo
    if rng <= 0:
        return None
    thr = lo + RELEASE_FRACTION * rng
    above = np.nonzero(y > thr)[0]
    if above.size == 0:
        return None
    last = int(above[-1])
    if last >= n - 1:
        return None
    before = float(_median(y[max(0, last - 2): last + 1]))
    after = float(_median(y[last + 1: last + 4]))
    if before - after < max(RELEASE_DROP * rng, RELEASE_NOISE_SIGMAS * sigma):
        return None
    return last + 1


def idle_lead_in(y: np.ndarray, sigma: float) -> int:
    """Index of the first sample after an idle lead-in (GPU near empty before the job allocated)."""
    n = y.size
    if n < MIN_POINTS:
        return 0
    lo, hi = _range(y)
    rng = hi - lo
    if rng <= 0:
        return 0
    thr = lo + RELEASE_FRACTION * rng
    above = np.nonzero(y > thr)[0]
    if above.size == 0 or above[0] == 0:
        return 0
    first = int(above[0])
    body_level = float(_median(y[first:]))
    before = float(_median(y[max(0, first - 3): first]))
    after = float(_median(y[first: first + 3]))
    if (after - before < max(RELEASE_DROP * rng, RELEASE_NOISE_SIGMAS * sigma)
            or before > 0.1 * body_level):
        return 0
    return first


# ----------------------------------------------------------------------------------------------
# the analysis

def analyze_xy(x: np.ndarray, y: np.ndarray, discrete: bool = True) -> SeriesFit:
    """`discrete`: x counts steps or samples, so an onset is the first sample that shows the growth;
    on a clock (False) the onset stays where the fitted hinge puts it, between two readings."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.all():
        x, y = x[ok], y[ok]
    n = int(x.size)
    if n >= 2 and x[-1] <= x[0]:
        return SeriesFit("too_short", "all samples share one time or index", n)
    if n < SHORT_MIN:
        return SeriesFit("too_short", f"only {n} sample{'s' if n != 1 else ''} in this job (at least "
                         f"{SHORT_MIN} are needed to see a trend: log memory more often, e.g. nvidia-smi -l 1)", n)
    if n < SHORT_MAX:
        return _short_fit(x, y)

    raw_sigma = _mad_sigma(_sample_diffs(y))
    rel = terminal_release(y, raw_sigma)
    if rel is not None:
        # freed below anything the job itself went down to; a sawtooth's last fall back to its
        # floor is not a release
        st = idle_lead_in(y[:rel], raw_sigma)
        lo, hi = _range(y)
        floor = float(np.quantile(y[st:rel], 0.01)) if rel - st >= MIN_POINTS else float("inf")
        # ... unless it never fell before: then the one fall at the end is the release (reserved
        # memory handed back by empty_cache(), a job's memory freed at its end), not a tooth
        body = y[st:rel]
        drawdown = float(np.max(np.maximum.accumulate(body) - body)) if body.size else 0.0
        if (float(_median(y[rel: rel + 3])) > floor - max(5 * raw_sigma, 0.05 * (hi - lo))
                and drawdown > RELEASE_DRAWDOWN * (hi - lo)):
            rel = None
    hi_end = rel if rel is not None else n
    start = idle_lead_in(y[:hi_end], raw_sigma)
    bx, by = decimate(x[start:hi_end], y[start:hi_end])
    fit = SeriesFit("flat", "", n)
    fit.release_x = float(x[rel]) if rel is not None else None
    fit.start_x = float(x[start]) if start else None
    if bx.size < MIN_POINTS or bx[-1] <= bx[0]:
        fit.classification = "too_short" if rel is None else "release"
        fit.reason = (f"only {bx.size} samples before memory was released" if rel is not None
                      else f"only {bx.size} samples while the job held memory")
        return fit

    sigma = _noise(bx, by)
    by = despike(by, sigma)
    level = float(_median(np.abs(by)))
    # the resolution is read after despiking: a lone spike's jump is not the source's resolution
    quantum = _quantum(_sample_diffs(by), level)
    xb, yb, edges = _buckets(bx, by, MAX_BUCKETS)
    per_bucket = max(1.0, bx.size / xb.size)
    sigma_b = max(_noise(xb, yb), sigma / math.sqrt(per_bucket), quantum / math.sqrt(12.0),
                  1e-6 * level, 1.0)
    fit.noise, fit.bucket_noise, fit.level = sigma, sigma_b, level
    fit.peak = float(by.max())
    fit.end_x = float(bx[-1])

    bkps = change_points(xb, yb, sigma_b)
    segs = _segments(xb, yb, bkps)
    f = _fitted(xb, segs)
    event = EVENT_SIGMAS * sigma_b
    for s in segs:
        rise = s.y1 - s.y0
        s.kind = "growth" if rise >= event else "decline" if rise <= -event else "flat"
    fit.segments = segs
    fit.change_points = [float(xb[b]) for b in bkps[:-1]]

    # A sawtooth: repeated falls that are followed by recoveries. Growth is then judged on the floor.
    fall_min = max(event, OSCILLATION_MIN_FRACTION * level)
    troughs, depths = _troughs(xb, yb, f, segs, fall_min)
    fit.oscillating = len(troughs) >= 2
    end_i = xb.size
    if fit.oscillating:
        end_i = troughs[-1] + 1   # the last tooth is unfinished: its rise says nothing yet
    # growth that does not fall back: the future minimum of the fitted curve
    env = np.minimum.accumulate(f[:end_i][::-1])[::-1]
    fit.persistent_growth = float(env[-1] - env[0])
    leak_min = max(LEAK_SIGMAS * sigma_b, LEAK_MIN_FRACTION * level, LEAK_MIN_QUANTA * quantum)

    floor = _raw_floor(bx, by, edges, troughs, depths, sigma) if fit.oscillating else None
    leak = _find_leak(xb[:end_i], yb[:end_i], env, sigma_b, leak_min, floor, bx, by, discrete)
    if floor is None:
        # at the data's own resolution, growth in discrete jumps between flat runs is a staircase,
        # however the buckets smoothed it
        stair = _raw_stair(bx, by, sigma, quantum, level, leak_min, sigma_b)
        if stair is not None and (leak is None or stair.growth >= 0.5 * leak.growth):
            leak = stair
    if leak is not None and floor is None and not _new_high(xb, f, leak):
        leak = None
    duration = float(bx[-1] - bx[0])
    if leak is not None:
        fit.leak = leak
        fit.classification = "staircase" if leak.pattern == "step" else "linear_growth"
        fit.reason = "memory grows and does not fall back"
        return fit

    total_change = float(f[-1] - f[0])
    if fit.oscillating:
        fit.classification = "sawtooth"
        fit.reason = f"{len(troughs)} falls back to a steady floor"
    elif fit.persistent_growth >= leak_min:
        fit.classification = "warmup_plateau"
        fit.reason = "memory grew, then stayed level"
    elif total_change <= -leak_min:
        sharp = any(s.kind == "decline" and (s.x1 - s.x0) <= 0.02 * duration for s in segs) or _has_drop(segs, leak_min)
        fit.classification = "release" if sharp else "decline"
        fit.reason = "memory was freed" if sharp else "memory declines"
    elif fit.release_x is not None:
        fit.classification = "release"
        fit.reason = "memory stayed level, then was freed"
    else:
        fit.classification = "flat"
        fit.reason = "memory stays level"
    return fit


def _short_fit(x: np.ndarray, y: np.ndarray) -> SeriesFit:
    """A job seen in only a few readings (coarse sampling, a short job): too few for change points,
    enough to say whether memory rose at every reading of its last stretch, up to the end, without
    slowing down; with a confidence that says how thin that is. The readings before that stretch (a
    CUDA context waiting for the job to start, the start-up) are not part of the trend."""
    n = int(x.size)
    fit = SeriesFit("flat", "", n)
    d = np.diff(y)
    level = float(_median(np.abs(y)))
    fit.level, fit.peak, fit.end_x = level, float(y.max()), float(x[-1])
    fit.noise = fit.bucket_noise = _mad_sigma(d) if d.size >= 2 else 0.0
    growth = float(y[-1] - y[0])
    tiny = max(1e-6 * level, 1.0)
    rising = d > tiny
    # the rising stretch that reaches the last reading
    r = 0
    while r < d.size and rising[d.size - 1 - r]:
        r += 1
    fit.segments = [Segment(0, n, float(x[0]), float(x[-1]), growth / float(x[-1] - x[0] or 1.0),
                            float(y[0]), float(y[-1]), "growth" if growth > LEAK_MIN_FRACTION * level else "flat")]
    env = np.minimum.accumulate(y[::-1])[::-1]
    fit.persistent_growth = float(env[-1] - env[0])
    few = f"only {n} samples in this job"
    run = d[d.size - r:]
    slowing = r >= SHORT_RUN and float(run[-1]) < DECELERATION * float(run.mean())
    if r >= SHORT_RUN and not slowing:
        xs, ys = x[n - 1 - r:], y[n - 1 - r:]
        sl = run / np.maximum(np.diff(xs), 1e-12)
        # where the steady rise begins: walk back from the end while each reading's slope stays
        # close to the later ones' (a start-up reading rises faster, a partial one slower)
        k = sl.size - 1
        while k > 0 and 1 / SHORT_SIMILAR <= sl[k - 1] / float(_median(sl[k:])) <= SHORT_SIMILAR:
            k -= 1
        if sl.size - k < SHORT_RUN - 1:   # no two alike: the whole rising stretch is the trend
            k = 0
        rate = theil_sen(xs[k:], ys[k:])
        grown = float(ys[-1] - ys[k])
        if rate > 0 and grown >= LEAK_MIN_FRACTION * level:
            onset = float(xs[k])
            rise_before = float(ys[k] - ys[k - 1]) if k > 0 else 0.0
            if 0 < rise_before <= rate * float(xs[k] - xs[k - 1]):
                # readings k-1 -> k rose only part of one interval's growth: the leak began between
                # them (a larger rise there is the start-up reaching its working set)
                onset = float(xs[k]) - rise_before / rate
            conf = round(min(0.6, 0.25 + 0.05 * n), 2)
            fit.leak = Leak("linear", onset, float(xs[-1]), rate, grown, float(ys[k]), float(ys[-1]), conf)
            fit.classification = "linear_growth"
            fit.reason = f"memory grows at every reading to the end and does not fall back ({few}: a thin trend)"
            return fit
    if slowing:
        fit.classification, fit.reason = "warmup_plateau", f"memory grows ever more slowly ({few}: a warm-up settling)"
    elif fit.persistent_growth >= LEAK_MIN_FRACTION * level:
        fit.classification, fit.reason = "warmup_plateau", f"memory grew, then stayed level ({few})"
    elif growth <= -LEAK_MIN_FRACTION * level:
        fit.classification, fit.reason = "decline", f"memory declines ({few})"
    else:
        fit.classification, fit.reason = "flat", f"memory stays level ({few})"
    return fit


def _has_drop(segs: list[Segment], size: float) -> bool:
    return any(seg_jump(a, b) <= -size for a, b in zip(segs, segs[1:]))


def _troughs(xb, yb, f, segs: list[Segment], fall_min: float) -> tuple[list[int], list[float]]:
    """Bucket indexes of the bottoms after each significant fall that is followed by a recovery,
    and the depth of each fall. A fall must be in the data, not only between two fitted lines: the
    pieces of an uneven rise (+64, +64, +0, +64 MiB a step) are offset from each other, yet memory
    never went down."""
    falls: dict[int, tuple[float, int]] = {}
    for k, s in enumerate(segs):
        if k > 0:
            jump = seg_jump(segs[k - 1], s)
            if jump <= -fall_min:
                falls[s.i0] = (-jump, max(0, s.i0 - MIN_SEGMENT))
        if s.y1 - s.y0 <= -fall_min:
            falls[s.i1 - 1] = (s.y0 - s.y1, s.i0)
    out, depths = [], []
    for i in sorted(falls):
        depth, lo = falls[i]
        if float(yb[lo: i + 1].max()) - float(yb[i]) < 0.5 * fall_min:
            continue
        # recovered: the curve comes back up by at least half of a fall afterwards
        if i + 1 < f.size and float(f[i + 1:].max()) - float(f[i]) >= 0.5 * fall_min:
            out.append(i)
            depths.append(depth)
    return out, depths


def _raw_floor(bx, by, edges, troughs, depths, sigma):
    """The bottom of each tooth read on the raw samples (bucket means alias a fast sawtooth, and
    their troughs wander): (x, y) near each trough, the typical tooth depth, and the noise of one
    floor reading (a median of w samples)."""
    t = np.asarray(troughs)
    half = max(1, int(0.25 * _median(np.diff(t)))) if t.size > 1 else 1
    xs, ys, ws = [], [], []
    m = edges.size - 1
    for i in t:
        lo, hi = edges[max(0, i - half)], edges[min(m, i + half + 1)]
        if hi <= lo:
            continue
        j = lo + int(np.argmin(by[lo:hi]))
        # the median of the first readings of the new tooth: the minimum alone is the noisiest one
        w = max(1, (hi - lo) // 8)
        xs.append(bx[j])
        ys.append(float(_median(by[j: j + w])))
        ws.append(min(w, by.size - j))
    point_noise = 1.2533 * sigma / math.sqrt(max(1.0, float(_median(ws)))) if ws else sigma
    return np.asarray(xs), np.asarray(ys), float(_median(depths)), point_noise


def _find_leak(xb, yb, env, sigma_b, leak_min, floor, bx, by, discrete=True) -> Leak | None:
    """The growing part at the end of the envelope: a ramp that is still rising, or a staircase whose
    steps keep coming. Returns None when growth stopped long enough ago (warm-up, one-off allocation)."""
    n = env.size
    if n < 2 * MIN_SEGMENT or env[-1] - env[0] < leak_min:
        return None
    duration = float(bx[-1] - bx[0])
    bkps = change_points(xb, env, sigma_b)
    segs = _segments(xb, env, bkps)
    event = EVENT_SIGMAS * sigma_b
    # growth events: a jump into a segment, or a segment's own rise
    events = []   # (x_start, x_end, rise, kind, segment index)
    gap = float(_median(np.diff(xb))) if xb.size > 1 else 0.0
    for k, s in enumerate(segs):
        if k > 0:
            jump = seg_jump(segs[k - 1], s)
            if jump >= max(JUMP_SIGMAS * sigma_b, ramp_offset(segs[k - 1], s, gap)):
                events.append((segs[k - 1].x1, s.x0, jump, "jump", k))
        rise = s.y1 - s.y0
        if rise >= event:
            short = (s.i1 - s.i0) <= MIN_SEGMENT + 1 and (s.x1 - s.x0) <= 0.02 * duration
            events.append((s.x0, s.x1, rise, "jump" if short else "ramp", k))
    if not events:
        return None
    events = _merge_close(events, xb, duration)
    end_x = float(xb[-1])
    last = events[-1]
    if floor is not None:
        return _sawtooth_leak(float(bx[0]), floor, leak_min)
    stair = _stair_leak(xb, yb, events, leak_min, sigma_b, duration, end_x)
    ramp = None
    # still growing: the ramp ends at the end, or flattened (at a cap, before an OOM, or as the job
    # wound down) for less than half of its own length; a warm-up is followed by a plateau far longer
    # than itself. The largest such ramp speaks, not merely the last: a short slower piece at the
    # very end (the last steps of a job) must not hide the growth before it.
    # The quiet tail is measured against the whole ramp its pieces join into.
    ramps = [e for e in events if e[3] == "ramp"]
    for cand in sorted(ramps, key=lambda e: -e[2]):
        ramp = _ramp_leak(xb, yb, segs, cand, leak_min, sigma_b, discrete)
        if ramp is not None and end_x - cand[1] <= max(TAIL_QUIET_FRACTION * duration,
                                                       RAMP_TAIL_SHARE * (cand[1] - min(ramp.onset, cand[0]))):
            break
        ramp = None
    if stair is not None and ramp is not None:
        # the pattern that accounts for more of the growth (a final step can look like a short ramp)
        return stair if stair.growth >= ramp.growth else ramp
    return stair or ramp


def _new_high(xb, f, leak: Leak) -> bool:
    """A leak takes memory where it has not been before: at least half of its growth lies above the
    highest level before its onset (the rising half of a slow wave is not a leak)."""
    before = f[xb < leak.onset]
    if before.size == 0:
        return True
    return float(f[-1]) - float(before.max()) >= NEW_HIGH_SHARE * leak.growth


def _merge_close(events: list[tuple], xb, duration) -> list[tuple]:
    """One step seen as a jump, a short steep segment and another jump (a step inside a bucket)
    becomes one event."""
    near = max(3.0 * float(_median(np.diff(xb))), 0.005 * duration) if xb.size > 1 else 0.0
    out = [events[0]]
    for e in events[1:]:
        p = out[-1]
        if e[0] - p[1] <= near and (p[3] == "jump" or e[3] == "jump"):
            kind = "ramp" if (e[1] - p[0]) > 0.05 * duration else "jump"
            out[-1] = (p[0], e[1], p[2] + e[2], kind, e[4])
        else:
            out.append(e)
    return out


def _confidence(z: float, z_min: float, extra: float = 1.0) -> float:
    """0..1 from the evidence in standard errors: 0.5 at the detection threshold z_min, 0.89 at twice
    it, 0.98 at three times; times a shape factor below 1 for weaker patterns."""
    c = 1.0 - 0.5 * math.exp(-1.5 * (z / z_min - 1.0))
    return round(max(0.05, min(0.99, c * extra)), 2)


def _ramp_leak(xb, yb, segs, ramp, leak_min, sigma_b, discrete=True) -> Leak | None:
    """The ramp event `ramp` (x0, x1, rise, kind, k) as a linear leak: its last rising segment sets
    the slope (a flat top at a memory cap, or a short piece of an unfinished sawtooth tooth, may
    follow it); earlier pieces of one ramp join it."""
    rising = [k for k, s in enumerate(segs)
              if s.y1 - s.y0 >= EVENT_SIGMAS * sigma_b and s.x0 >= ramp[0] and s.x1 <= ramp[1]]
    if not rising:
        return None
    long_rising = [k for k in rising if segs[k].i1 - segs[k].i0 > MIN_SEGMENT + 1]
    k_last = (long_rising or rising)[-1]
    slope_last = segs[k_last].slope
    first_k = k_last
    # walk back over contiguous growing segments whose slope is similar (one linear growth)
    k = k_last - 1
    gap = float(_median(np.diff(xb))) if xb.size > 1 else 0.0
    while k >= 0:
        s = segs[k]
        jump = seg_jump(s, segs[k + 1])
        # a small offset between two pieces of one ramp (a logger's drifting clock, or sampling out
        # of step with the job) does not part them
        tolerance = max(JUMP_SIGMAS * sigma_b, RAMP_JOIN_SHARE * min(s.y1 - s.y0, segs[k + 1].y1 - segs[k + 1].y0),
                        ramp_offset(s, segs[k + 1], gap))
        if s.slope <= 0 or abs(jump) >= tolerance:
            break
        ratio = s.slope / slope_last
        if not (1 / SIMILAR_SLOPE <= ratio <= SIMILAR_SLOPE):
            break
        first_k = k
        k -= 1
    i0 = segs[first_k].i0
    # still settling? a ramp whose slope keeps falling is a warm-up, not a leak; so is one that only
    # continues, ever slower, the longer and steeper rise before it (a leak starts or speeds up growth)
    if _decelerating(xb[i0:], yb[i0:], sigma_b):
        return None
    if first_k > 0:
        prev = segs[first_k - 1]
        if (prev.i1 - prev.i0 > MIN_SEGMENT + 1 and prev.y1 - prev.y0 >= EVENT_SIGMAS * sigma_b
                and prev.slope > segs[first_k].slope and _decelerating(xb[prev.i0:], yb[prev.i0:], sigma_b)):
            return None
    onset, start_level = _refine_onset(xb, yb, segs, first_k)
    if discrete and first_k > 0 and xb.size <= MAX_BUCKETS and xb.size > 1:
        # discrete samples (a step log): the onset is the first sample that shows the growth
        gap = float(_median(np.diff(xb)))
        after = np.nonzero(xb >= onset + 0.1 * gap)[0]
        if after.size:
            onset = float(xb[after[0]])
    sel = xb >= onset
    if sel.sum() < 3:
        sel = np.arange(xb.size) >= i0
    rate = theil_sen(xb[sel], yb[sel])
    if rate <= 0:
        return None
    end = float(xb[-1])
    n_ramp = int(sel.sum())
    # the slope's standard error on n_ramp evenly spread buckets is sigma_b * sqrt(12 / n) / span
    z = rate * (end - onset) / (sigma_b * math.sqrt(12.0 / max(n_ramp, 2)))
    # growth so far: as measured (end level minus onset level), not as extrapolated from the rate
    end_level = float(_median(yb[-3:]))
    growth = end_level - start_level
    if growth < leak_min or z < LEAK_Z:
        return None
    return Leak("linear", onset, end, rate, growth, start_level, end_level, _confidence(z, LEAK_Z), z=z)


def _decelerating(x: np.ndarray, y: np.ndarray, sigma_b: float) -> bool:
    """True when a quadratic fits the ramp clearly better and its end slope is a small share of the
    mean slope: the curve of a warm-up approaching its plateau."""
    if x.size < 8:
        return False
    u = (x - x[0]) / ((x[-1] - x[0]) or 1.0)
    A = np.column_stack([np.ones_like(u), u, u * u])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    sse_q = float(((A @ coef - y) ** 2).sum())
    b, a = line_fit(u, y)
    sse_l = float(((a + b * u - y) ** 2).sum())
    if (sse_l - sse_q) / (sigma_b ** 2) < PENALTY_PER_CHANGE * math.log(max(x.size, 3)):
        return False
    mean_slope = coef[1] + coef[2]          # (y(1) - y(0)) of the quadratic
    end_slope = coef[1] + 2 * coef[2]
    return mean_slope > 0 and end_slope < DECELERATION * mean_slope


def _refine_onset(xb, yb, segs, first_k) -> tuple[float, float]:
    """Where the growth starts, to better than a bucket, and the level there: a continuous hinge
    fitted on the buckets from the previous segment's start to the end (previous trend + a slope
    change at t0)."""
    s = segs[first_k]
    if first_k == 0:
        return float(xb[0]), float(s.y0)
    prev = segs[first_k - 1]
    lo_i = prev.i0
    x = xb[lo_i:]
    y = yb[lo_i:]
    span_lo = prev.x0 + 0.5 * (prev.x1 - prev.x0)
    span_hi = s.x0 + 0.5 * (s.x1 - s.x0)
    cands = np.linspace(span_lo, span_hi, 120)
    # the 120 design matrices at once (each column as np.column_stack makes it), solved by one call
    stack = np.empty((cands.size, x.size, 3))
    stack[:, :, 0] = 1.0
    stack[:, :, 1] = x - x[0]
    stack[:, :, 2] = np.maximum(0.0, x[None, :] - cands[:, None])
    coefs = lstsq_each(stack, y)
    best, best_t, level = None, s.x0, s.y0
    for t0, A, coef in zip(cands, stack, coefs):
        sse = float(((A @ coef - y) ** 2).sum())
        if best is None or sse < best:
            best, best_t, level = sse, float(t0), float(coef[0] + coef[1] * (t0 - x[0]))
    return best_t, level


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


def _stair_leak(xb, yb, events, leak_min, sigma_b, duration, end_x, edge=None) -> Leak | None:
    """Repeated steps up, the last one recent compared with the spacing of the steps."""
    # a steep short rise counts as a step too (a step spread over a few buckets); a rise within the
    # first buckets is the job starting (or an edge effect of the fit), not a step of a leak
    if edge is None:
        edge = xb[min(2 * MIN_SEGMENT, xb.size - 1)]
    steps = [e for e in events if (e[3] == "jump" or (e[1] - e[0]) <= 0.05 * duration)
             and 0.5 * (e[0] + e[1]) > edge]
    if len(steps) < 2:
        return None
    # a small last rise (an unfinished tooth, a partial step) does not start the staircase
    h_all = float(_median([e[2] for e in steps]))
    while len(steps) > 2 and steps[-1][2] < h_all / STEP_HEIGHT_RATIO:
        steps = steps[:-1]
    xs = [0.5 * (e[0] + e[1]) for e in steps]
    hs = [e[2] for e in steps]
    # walk back while the steps stay alike: regular spacing (a long quiet gap ends the staircase)
    # and similar heights (a one-off allocation or warm-up is not one of the steps)
    run = [len(steps) - 1]
    for k in range(len(steps) - 2, -1, -1):
        gap = xs[run[-1]] - xs[k]
        intervals = [xs[run[i]] - xs[run[i + 1]] for i in range(len(run) - 1)]
        typical = float(_median(intervals)) if intervals else gap
        if intervals and gap > 2.0 * typical:
            break
        h_typ = float(_median([hs[i] for i in run]))
        if not (h_typ / STEP_HEIGHT_RATIO <= hs[k] <= h_typ * STEP_HEIGHT_RATIO):
            break
        run.append(k)
    run = sorted(run)
    # the first step up of a job is its first epoch's own allocation (optimizer state, first eval
    # buffers) unless it matches the stairs that follow
    if len(run) >= 3:
        later = float(_median([hs[i] for i in run[1:]]))
        if not (later / FIRST_STEP_RATIO <= hs[run[0]] <= later * FIRST_STEP_RATIO):
            run = run[1:]
    if len(run) < 2:
        return None
    sx = [xs[k] for k in run]
    sh = [hs[k] for k in run]
    interval = float(_median(np.diff(sx)))
    if interval <= 0 or end_x - sx[-1] > STAIR_TAIL_FACTOR * interval + 0.01 * duration:
        return None
    growth = float(sum(sh))
    if growth < leak_min:
        return None
    rate = float(sum(sh[1:]) / (sx[-1] - sx[0])) if sx[-1] > sx[0] else growth / max(end_x - sx[0], 1e-9)
    onset = _refine_step(xb, yb, sx[0], interval)
    pre = yb[xb < onset]
    start_level = float(pre[-3:].mean()) if pre.size else float(yb[0])
    z = growth / sigma_b
    regular = 1.0 if len(run) >= 3 else 0.85
    return Leak("step", onset, float(xb[-1]), rate, growth, start_level, start_level + growth,
                _confidence(z, 2 * JUMP_SIGMAS, regular), steps=sx, z=z)


def _raw_stair(x, y, sigma, quantum, level, leak_min, sigma_b) -> Leak | None:
    """A staircase read on the samples themselves: the readings stay level (within the noise or the
    source's resolution) between jumps, and the jumps carry the growth. A ramp spread over every
    sample, or a series that also falls, is not one."""
    if x.size < MIN_POINTS or x.size > RAW_STAIRS_MAX:
        return None
    d = np.diff(y)
    thr = max(JUMP_SIGMAS * sigma, LEAK_MIN_QUANTA * quantum, LEAK_MIN_FRACTION * level)
    up = d > thr
    if up.sum() < 2:
        return None
    rise = float(d[up].sum())
    quiet = ~up
    # flat between the jumps: the other readings neither drift nor fall much
    if float(np.abs(d[quiet]).sum()) > STAIR_FLAT_SHARE * rise or float(-d[d < -thr].sum()) > STAIR_FLAT_SHARE * rise:
        return None
    # a jump spread over two readings (a sample caught mid-allocation) is one stair
    idx = np.nonzero(up)[0]
    groups = np.split(idx, np.nonzero(np.diff(idx) > 1)[0] + 1)
    # ... but a rise over more readings than that is a ramp (the first one may be the start-up)
    if len(groups) < 2 or any(g.size > 2 for g in groups[1:]):
        return None
    runs = np.diff([g[0] for g in groups])
    if float(_median(runs)) < 3:   # a jump at nearly every reading: growth spread evenly, a ramp
        return None
    events = [(float(x[g[0]]), float(x[g[-1] + 1]), float(y[g[-1] + 1] - y[g[0]]), "jump", -1) for g in groups]
    duration = float(x[-1] - x[0])
    # no fit, so no edge effect: every jump counts, and the job's own start-up (its first jump, unlike
    # the stairs after it) is left out by the first-stair rule
    return _stair_leak(x, y, events, leak_min, sigma_b, duration, float(x[-1]), edge=float(x[0]) - 1.0)


def _refine_step(xb, yb, x_step, interval) -> float:
    """Where the first step happens: the split that best separates two levels near it."""
    lo, hi = x_step - 0.5 * interval, x_step + 0.5 * interval
    sel = np.nonzero((xb >= lo) & (xb <= hi))[0]
    if sel.size < 4:
        return x_step
    y = yb[sel]
    best, best_k = None, None
    for k in range(1, y.size):
        sse = float(((y[:k] - y[:k].mean()) ** 2).sum() + ((y[k:] - y[k:].mean()) ** 2).sum())
        if best is None or sse < best:
            best, best_k = sse, k
    return float(0.5 * (xb[sel[best_k - 1]] + xb[sel[best_k]]))


def _sawtooth_leak(x_start, floor, leak_min) -> Leak | None:
    """A sawtooth whose floor keeps rising: the floor (bottom of each tooth) is the leak. The floor
    must rise by a good share of a tooth's depth: a wandering floor is not growth."""
    tx, ty, depth, point_noise = floor
    if tx.size < 3:
        return None
    # onset: a hinge on the troughs (floor level, then rising); the first trough means "from the start"
    best, onset, j_best = None, float(tx[0]), 0
    for j in range(0, tx.size - 2):
        h = np.maximum(0.0, tx - tx[j])
        A = np.column_stack([np.ones_like(tx), h])
        coef, *_ = np.linalg.lstsq(A, ty, rcond=None)
        sse = float(((A @ coef - ty) ** 2).sum())
        if best is None or sse < best * 0.999:
            best, onset, j_best = sse, float(tx[j]), j
    sel = tx >= onset
    rate = theil_sen(tx[sel], ty[sel])
    growth = rate * float(tx[-1] - onset)
    if j_best == 0:
        onset = x_start
    if rate <= 0 or growth < max(leak_min, FLOOR_RISE_SHARE * depth):
        return None
    b, a = line_fit(tx[sel], ty[sel])
    resid = float(np.sqrt(np.mean((ty[sel] - (a + b * tx[sel])) ** 2)))
    # a noise-free, quantized floor has neither residual nor point noise: one byte is the floor
    z = growth / (max(resid, point_noise, 1.0) * math.sqrt(12.0 / max(int(sel.sum()), 2)))
    if z < LEAK_Z:
        return None
    start_level = float(ty[sel][0])
    return Leak("linear", onset, float(tx[-1]), rate, growth, start_level, start_level + growth,
                _confidence(z, LEAK_Z, 0.9), z=z)
