"""One series, numbers only: bound it, find its change points, classify it, and measure a leak.

Everything here works on two float arrays, `x` (seconds since the series' first sample, or step, or
sample index) and `y` (bytes), sorted by x. The thresholds are explained in docs/detection.md; every
noise-relative one is in units of the series' own noise, estimated robustly (MAD of first differences).
Noise and bounding: robust.py; change points: changepoints.py; growth patterns: patterns.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from forensics.detect import changepoints, patterns, robust
from forensics.detect.changepoints import Segment
from forensics.detect.patterns import Leak
from forensics.detect.thresholds import (DECELERATION, EVENT_SIGMAS, FLOOR_QUANTILE, FLOOR_SHARE, FLOOR_SIGMAS,
                                         KINK_SHARE, KINK_SPREAD, LEAD_IN_SHARE, LEAK_MIN_FRACTION, LEAK_MIN_QUANTA,
                                         LEAK_SIGMAS, LEVEL_RESOLUTION, LEVEL_SIGMAS, MAX_BUCKETS, MIN_POINTS,
                                         MIN_TEETH, OSCILLATION_MIN_FRACTION, RANGE_QUANTILE, RANGE_SAMPLE,
                                         RAW_STAIR_SHARE, RELEASE_DRAWDOWN, RELEASE_DROP, RELEASE_FRACTION,
                                         RELEASE_NOISE_SIGMAS, RISE_SIGMAS, SHORT_CONF_BASE, SHORT_CONF_MAX,
                                         SHORT_CONF_PER_READING, SHORT_MAX, SHORT_MIN, SHORT_RUN, SHORT_SIMILAR,
                                         SUDDEN_SHARE, WIND_DOWN_KEPT, WIND_DOWN_MIN_FALL, WIND_DOWN_SHARE)
from forensics.units import human


@dataclass
class SeriesFit:
    classification: str        # flat | linear_growth | staircase | sawtooth | warmup_plateau | decline | release | too_short
                               # (and growth_into_oom, set by leaks.growth_into_oom when the job's OOM is known)
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


def _range(y: np.ndarray) -> tuple[float, float]:
    ys = y if y.size <= RANGE_SAMPLE else y[:: y.size // RANGE_SAMPLE + 1]
    lo, hi = np.quantile(ys, [RANGE_QUANTILE, 1 - RANGE_QUANTILE])
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
    before = float(robust.median(y[max(0, last - 2): last + 1]))
    after = float(robust.median(y[last + 1: last + 4]))
    if before - after < max(RELEASE_DROP * rng, RELEASE_NOISE_SIGMAS * sigma):
        return None
    return last + 1


def wind_down(y: np.ndarray, sigma: float) -> int | None:
    """Index of the first sample of a job's wind-down, or None: after its highest reading, a fall to a
    level that it keeps or goes below until the end, in the job's last readings, keeping at least half
    of the growth before it, in a job that never fell back before. As a job ends it frees part of its
    memory (activations, optimizer state, loader buffers) before the process exits; that fall says
    nothing about the growth before it, which is what counts."""
    n = y.size
    if n < MIN_POINTS:
        return None
    p = n - 1 - int(np.argmax(y[::-1]))   # the last reading at the peak
    tail, body = y[p + 1:], y[: p + 1]
    if tail.size == 0 or tail.size > WIND_DOWN_SHARE * n:
        return None
    lo = float(body.min())
    growth = float(y[p]) - lo
    drawdown = float(np.max(np.maximum.accumulate(body) - body))
    if (float(y[p] - tail.max()) < max(RELEASE_NOISE_SIGMAS * sigma, WIND_DOWN_MIN_FALL * growth)
            or np.any(np.diff(tail) > RISE_SIGMAS * sigma)               # it rises again: not an end
            or float(tail.min()) - lo < WIND_DOWN_KEPT * growth  # fell back: a release, not a wind-down
            or drawdown > RELEASE_DRAWDOWN * growth):
        return None
    return p + 1


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
    body_level = float(robust.median(y[first:]))
    before = float(robust.median(y[max(0, first - 3): first]))
    after = float(robust.median(y[first: first + 3]))
    if (after - before < max(RELEASE_DROP * rng, RELEASE_NOISE_SIGMAS * sigma)
            or before > LEAD_IN_SHARE * body_level):
        return 0
    return first


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

    raw_sigma = robust.mad_sigma(robust.sample_diffs(y))
    rel = terminal_release(y, raw_sigma)
    if rel is not None:
        # freed below anything the job itself went down to; a sawtooth's last fall back to its
        # floor is not a release
        st = idle_lead_in(y[:rel], raw_sigma)
        lo, hi = _range(y)
        floor = float(np.quantile(y[st:rel], FLOOR_QUANTILE)) if rel - st >= MIN_POINTS else float("inf")
        # ... unless it never fell before: then the one fall at the end is the release (reserved
        # memory handed back by empty_cache(), a job's memory freed at its end), not a tooth
        body = y[st:rel]
        drawdown = float(np.max(np.maximum.accumulate(body) - body)) if body.size else 0.0
        if (float(robust.median(y[rel: rel + 3])) > floor - max(FLOOR_SIGMAS * raw_sigma, FLOOR_SHARE * (hi - lo))
                and drawdown > RELEASE_DRAWDOWN * (hi - lo)):
            rel = None
    hi_end = rel if rel is not None else (wind_down(y, raw_sigma) or n)
    start = idle_lead_in(y[:hi_end], raw_sigma)
    bx, by = robust.decimate(x[start:hi_end], y[start:hi_end])
    fit = SeriesFit("flat", "", n)
    fit.release_x = float(x[rel]) if rel is not None else None
    fit.start_x = float(x[start]) if start else None
    if bx.size < MIN_POINTS or bx[-1] <= bx[0]:
        fit.classification = "too_short" if rel is None else "release"
        fit.reason = (f"only {bx.size} samples before memory was released" if rel is not None
                      else f"only {bx.size} samples while the job held memory")
        return fit

    sigma = robust.noise(bx, by)
    by = robust.despike(by, sigma)
    level = float(robust.median(np.abs(by)))
    # the resolution is read after despiking: a lone spike's jump is not the source's resolution
    quantum = robust.quantum(robust.sample_diffs(by), level)
    xb, yb, edges = robust.buckets(bx, by, MAX_BUCKETS)
    per_bucket = max(1.0, bx.size / xb.size)
    sigma_b = max(robust.noise(xb, yb), sigma / math.sqrt(per_bucket), quantum / math.sqrt(12.0),
                  LEVEL_RESOLUTION * level, 1.0)
    fit.noise, fit.bucket_noise, fit.level = sigma, sigma_b, level
    fit.peak = float(by.max())
    fit.end_x = float(bx[-1])

    bkps = changepoints.change_points(xb, yb, sigma_b)
    segs = changepoints.segments(xb, yb, bkps)
    f = changepoints.fitted(xb, segs)
    event = EVENT_SIGMAS * sigma_b
    for s in segs:
        rise = s.y1 - s.y0
        s.kind = "growth" if rise >= event else "decline" if rise <= -event else "flat"
    fit.segments = segs
    fit.change_points = [float(xb[b]) for b in bkps[:-1]]

    # A sawtooth: repeated falls that are followed by recoveries. Growth is then judged on the floor.
    fall_min = max(event, OSCILLATION_MIN_FRACTION * level)
    troughs, depths = patterns.troughs(xb, yb, f, segs, fall_min)
    fit.oscillating = len(troughs) >= MIN_TEETH
    end_i = xb.size
    if fit.oscillating:
        end_i = troughs[-1] + 1   # the last tooth is unfinished: its rise says nothing yet
    # growth that does not fall back: the future minimum of the fitted curve
    env = np.minimum.accumulate(f[:end_i][::-1])[::-1]
    fit.persistent_growth = float(env[-1] - env[0])
    leak_min = max(LEAK_SIGMAS * sigma_b, LEAK_MIN_FRACTION * level, LEAK_MIN_QUANTA * quantum)

    floor = patterns.raw_floor(bx, by, edges, troughs, depths, sigma) if fit.oscillating else None
    leak = patterns.find_leak(xb[:end_i], yb[:end_i], env, sigma_b, leak_min, floor, bx, by, discrete)
    if floor is None:
        # at the data's own resolution, growth in discrete jumps between flat runs is a staircase,
        # however the buckets smoothed it
        stair = patterns.raw_stair(bx, by, sigma, quantum, level, leak_min, sigma_b)
        if stair is not None and (leak is None or stair.growth >= RAW_STAIR_SHARE * leak.growth):
            leak = stair
    if leak is not None and floor is None and not patterns.new_high(xb, f, leak):
        leak = None
    duration = float(bx[-1] - bx[0])
    if leak is not None:
        fit.leak = leak
        fit.classification = "staircase" if leak.pattern == "step" else "linear_growth"
        fit.reason = "memory grows and does not fall back"
        return fit

    total_change = float(f[-1] - f[0])
    teeth = 0 if fit.oscillating else patterns.raw_teeth(y[start:hi_end], fall_min)
    tail = None if fit.oscillating or teeth >= MIN_TEETH else _rising_to_end(bx, by, sigma, leak_min, discrete)
    if tail is not None:
        fit.leak = tail
        fit.classification = "linear_growth"
        rises = int(np.sum(bx >= tail.onset))
        fit.reason = (f"memory rose at each of its last {rises} readings to a new high, to the end, and does not "
                      "fall back (too few readings after the level for change points: a thin trend)")
    elif fit.oscillating or teeth >= MIN_TEETH:
        fit.classification = "sawtooth"
        fit.reason = f"{max(len(troughs), teeth)} falls back to a steady floor"
    elif fit.persistent_growth >= leak_min:
        fit.classification = "warmup_plateau"
        fit.reason = "memory grew, then stayed level"
    elif total_change <= -leak_min:
        sharp = any(s.kind == "decline" and (s.x1 - s.x0) <= SUDDEN_SHARE * duration for s in segs) or patterns.has_drop(segs, leak_min)
        fit.classification = "release" if sharp else "decline"
        fit.reason = "memory was freed" if sharp else "memory declines"
    elif fit.release_x is not None:
        fit.classification = "release"
        fit.reason = "memory stayed level, then was freed"
    else:
        fit.classification = "flat"
        fit.reason = "memory stays level"
    return fit


def rising_into(y: np.ndarray, noise: float) -> int | None:
    """The reading the growth at the end of `y` rose from, when it is still growing at the end: each of
    at least the last SHORT_RUN readings rose, to a new high, by more than noise over that stretch
    (LEVEL_SIGMAS sample sigmas); else None."""
    d = np.diff(y)
    r = 0
    while r < d.size and d[d.size - 1 - r] > 0:
        r += 1
    i = y.size - 1 - r
    if r < SHORT_RUN or float(y[-1] - y[i]) < LEVEL_SIGMAS * noise or float(y[-1]) <= float(y[:i + 1].max()):
        return None
    return i


def _slowing(trend: np.ndarray) -> bool:
    """Rises (per unit of x) that settle: the last below DECELERATION of their mean, right after a rise no
    larger than the one before it (settling shows over two rises that shrink, not one small last rise:
    that is the unevenness of a steady rise, a pool grown by the chunk, a reading taken early)."""
    return (trend.size >= SHORT_RUN and float(trend[-1]) < DECELERATION * float(trend.mean())
            and (not trend[:-2].size or float(trend[-2]) <= float(trend[-3])))


def _rising_to_end(x: np.ndarray, y: np.ndarray, sigma: float, leak_min: float, discrete: bool) -> Leak | None:
    """A job's last readings judged as a short job's are (`_short_fit`, rule a) when the change points
    cannot judge them: each of at least SHORT_RUN rose, to a new high above every reading before, by more
    than noise and a leak's size over the stretch, without slowing, up to the end. Growth to the end of a
    job is never a warm-up that levelled; the level before it makes the onset the reading that left it.
    The change points need a slope LEAK_Z standard errors above zero, which three or four readings of a
    noisy log cannot give however far they climbed."""
    i = rising_into(y, sigma)
    if i is None:
        return None
    xs, ys = x[i:], y[i:]
    if _slowing(np.diff(ys) / np.maximum(np.diff(xs), 1e-12)) or float(ys[-1] - ys[0]) < leak_min:
        return None
    rate = robust.theil_sen(xs, ys)
    if rate <= 0:
        return None
    # on steps, the first reading that shows the growth is the onset; on a clock, a first rise smaller
    # than one interval's growth says the leak began within that interval (as in `_short_fit`)
    onset = float(xs[1])
    rise = float(ys[1] - ys[0])
    if not discrete and rise < rate * float(xs[1] - xs[0]):
        onset -= rise / rate
    conf = round(min(SHORT_CONF_MAX, SHORT_CONF_BASE + SHORT_CONF_PER_READING * xs.size), 2)
    return Leak("linear", onset, float(xs[-1]), rate, float(ys[-1] - ys[0]), float(ys[0]), float(ys[-1]), conf)


def _start_level_end(y: np.ndarray, tiny: float) -> int:
    """The last reading of the level the job started at (within `tiny` of the first)."""
    i = 0
    while i + 1 < y.size and abs(float(y[i + 1] - y[0])) <= tiny:
        i += 1
    return i


def _startup_jump(y: np.ndarray, r: int, run_slope: np.ndarray) -> bool:
    """Whether the rising stretch of the last `r` changes begins with the start-up: the first rise out of
    the job's starting level (a CUDA context, a job not yet allocating), far faster than the rises after
    it, is the job reaching its working set (the model loaded, the first step's buffers), not part of any
    trend, neither a leak's nor a warm-up's settling."""
    if r < SHORT_RUN:
        return False
    i = _start_level_end(y, max(LEVEL_RESOLUTION * float(robust.median(np.abs(y))), 1.0))
    return r == y.size - 1 - i and float(run_slope[0]) > SHORT_SIMILAR * float(robust.median(run_slope[1:]))


def _steady_start(sl: np.ndarray, startup: bool) -> int:
    """Where the steady rise of a short job's last rising stretch begins (an index into its slopes `sl`),
    or -1 for none."""
    # walk back from the end while each reading's slope stays close to the later ones' (a start-up
    # reading rises faster, a partial one slower)
    k = sl.size - 1
    while k > 0 and 1 / SHORT_SIMILAR <= sl[k - 1] / float(robust.median(sl[k:])) <= SHORT_SIMILAR:
        k -= 1
    if sl.size - k < SHORT_RUN - 1:
        # no two alike (noise makes neighbouring rises differ): the trend begins after the last
        # rise far faster than the median of the rises after it (the start-up reaching its working
        # set, over one reading or more), else the whole rising stretch is the trend; after the
        # start-up's jump, fewer unlike rises than a trend has (SHORT_RUN) are none
        fast = [j + 1 for j in range(sl.size - (SHORT_RUN - 1))
                if sl[j] > SHORT_SIMILAR * float(robust.median(sl[j + 1:]))]
        k = fast[-1] if fast else 0
        if startup and sl.size - k < SHORT_RUN:
            k = -1
    return k


def _short_onset(xs: np.ndarray, ys: np.ndarray, k: int, rate: float) -> float:
    """Where a short job's steady rise from reading `k` began: that reading, or within the interval before
    it when readings k-1 -> k rose only part of one interval's growth (a larger rise there is the start-up
    reaching its working set)."""
    rise_before = float(ys[k] - ys[k - 1]) if k > 0 else 0.0
    if 0 < rise_before <= rate * float(xs[k] - xs[k - 1]):
        return float(xs[k]) - rise_before / rate
    return float(xs[k])


def _slope_kink(x: np.ndarray, y: np.ndarray) -> tuple[int, float] | None:
    """Where a short job's steady-looking rise changed its slope, as (the reading it changed at, the
    time the two lines meet), or None: the rises per unit of x split into an earlier and a later run
    (two or more each) that differ by more than KINK_SPREAD times the spread within either run and by
    KINK_SHARE of the slope. A start-up that rose to its working set at nearly the leak's pace (within
    SHORT_SIMILAR) and the leak right after it read as one trend; clean readings still show the kink."""
    sl = np.diff(y) / np.maximum(np.diff(x), 1e-12)
    best, best_ratio = None, 0.0
    for m in range(SHORT_RUN - 1, sl.size - 1):
        a, b = sl[:m], sl[m:]
        between = abs(float(b.mean() - a.mean()))
        within = max(float(np.ptp(a)), float(np.ptp(b)))
        if between <= KINK_SHARE * max(float(a.mean()), float(b.mean())) or between <= KINK_SPREAD * within:
            continue
        ratio = between / max(within, 1e-12)
        if ratio > best_ratio:
            best, best_ratio = m, ratio
    if best is None:
        return None
    sa, ia = robust.line_fit(x[:best + 1], y[:best + 1])
    sb, ib = robust.line_fit(x[best:], y[best:])
    meet = (ia - ib) / (sb - sa) if sb != sa else float(x[best])
    return best, float(np.clip(meet, x[best - 1], x[best + 1]))


def _working_readings(y: np.ndarray, tiny: float) -> int:
    """How many readings show the job's working set: all, unless it sat at a start level and left it by a
    rise more than SHORT_SIMILAR times the median change after it (the start-up reaching its working set,
    as in `_startup_jump`): then those from that rise on."""
    i = _start_level_end(y, tiny)
    after = np.abs(np.diff(y[i + 1:]))
    if after.size and float(y[i + 1] - y[i]) > SHORT_SIMILAR * float(robust.median(after)):
        return int(y.size - (i + 1))
    return int(y.size)


def _stair_pauses(d: np.ndarray, tiny: float) -> list[int]:
    """The readings of a staircase sampled about once per stair that did not move between two alike
    rises (within SHORT_SIMILAR): the next stair had not yet come, no pause in the growth."""
    moved = d > tiny
    return [j + 1 for j in range(1, d.size - 1) if abs(float(d[j])) <= tiny and moved[j - 1] and moved[j + 1]
            and max(d[j - 1], d[j + 1]) <= SHORT_SIMILAR * min(d[j - 1], d[j + 1])]


def _short_fit(x: np.ndarray, y: np.ndarray) -> SeriesFit:
    """A job seen in only a few readings (coarse sampling, a short job): too few for change points,
    enough to say whether memory rose at every reading of its last stretch, up to the end, without
    slowing down; with a confidence that says how thin that is. The readings before that stretch (a
    CUDA context waiting for the job to start, the start-up) are not part of the trend."""
    n = int(x.size)
    fit = SeriesFit("flat", "", n)
    d = np.diff(y)
    level = float(robust.median(np.abs(y)))
    fit.level, fit.peak, fit.end_x = level, float(y.max()), float(x[-1])
    fit.noise = fit.bucket_noise = robust.mad_sigma(d) if d.size >= 2 else 0.0
    growth = float(y[-1] - y[0])
    tiny = max(LEVEL_RESOLUTION * level, 1.0)
    paused = _stair_pauses(d, tiny)
    fit.segments = [Segment(0, n, float(x[0]), float(x[-1]), growth / float(x[-1] - x[0] or 1.0),
                            float(y[0]), float(y[-1]), "growth" if growth > LEAK_MIN_FRACTION * level else "flat")]
    env = np.minimum.accumulate(y[::-1])[::-1]
    fit.persistent_growth = float(env[-1] - env[0])
    few = f"only {n} samples in this job"
    x, y = np.delete(x, paused), np.delete(y, paused)   # the rising stretch is judged without them
    n, d = int(x.size), np.diff(y)
    rising = d > tiny
    # the rising stretch that reaches the last reading
    r = 0
    while r < d.size and rising[d.size - 1 - r]:
        r += 1
    run = d[d.size - r:]
    # slowing down is judged per unit of x (time or step), not per reading: a reading taken off the
    # logger's cadence (a dict printed at the OOM step) rises less only because less time passed
    run_slope = run / np.maximum(np.diff(x[n - 1 - r:]), 1e-12) if r else run
    startup = _startup_jump(y, r, run_slope)
    trend = run_slope[1:] if startup else run_slope
    # settling shows over the last two rises, not one: a small last rise right after a rise larger
    # than the one before it is the unevenness of a steady rise (a pool grown by the chunk, a reading
    # taken early), not rises that shrink
    slowing = r >= SHORT_RUN and _slowing(trend)
    fall = float(-d.min()) if d.size else 0.0
    if r >= SHORT_RUN and fall > OSCILLATION_MIN_FRACTION * level:
        # a fall and then a rise: "does not fall back" cannot be said of it, nor a cycle told apart
        fit.classification = "too_short"
        fit.reason = (f"memory fell by {human(fall)} and then rose to the end ({few}: too few to tell a "
                      "leak from a cycle; log memory more often, e.g. nvidia-smi -l 1)")
        return fit
    # the start-up's jump counts for no trend: a trend needs SHORT_RUN rises after it as before it
    if r - startup >= SHORT_RUN and not slowing:
        xs, ys = x[n - 1 - r:], y[n - 1 - r:]
        k = _steady_start(run / np.maximum(np.diff(xs), 1e-12), startup)
        kink = _slope_kink(xs[k:], ys[k:]) if k >= 0 else None
        if kink is not None:
            k += kink[0]
        rate = robust.theil_sen(xs[k:], ys[k:]) if k >= 0 else 0.0
        grown = float(ys[-1] - ys[k]) if k >= 0 else 0.0
        if rate > 0 and grown >= LEAK_MIN_FRACTION * level:
            onset = kink[1] if kink is not None else _short_onset(xs, ys, k, rate)
            conf = round(min(SHORT_CONF_MAX, SHORT_CONF_BASE + SHORT_CONF_PER_READING * n), 2)
            fit.leak = Leak("linear", onset, float(xs[-1]), rate, grown, float(ys[k]), float(ys[-1]), conf)
            fit.classification = "linear_growth"
            every = (f"every reading but {len(paused)} between two alike rises (a staircase read about once a stair)"
                     if paused else "every reading")
            fit.reason = f"memory grows at {every} to the end and does not fall back ({few}: a thin trend)"
            return fit
    if r and float(d[-1]) > LEAK_MIN_FRACTION * level:
        # still rising at the last reading: a warm-up that was never seen to settle is no warm-up yet
        fit.classification = "too_short"
        how = ", ever more slowly" if slowing else ""
        after = f", {r - 1} after the start-up's jump" if startup else ""
        fit.reason = (f"memory still rose by {human(float(d[-1]))} at the last reading{how} ({few}{after}: "
                      "too few to tell a warm-up that had not settled from a leak)")
        return fit
    return _short_level(fit, y, tiny, slowing, growth, few)


def _short_level(fit: SeriesFit, y: np.ndarray, tiny: float, slowing: bool, growth: float, few: str) -> SeriesFit:
    """A short job that did not rise to its end (`_short_fit`): a warm-up, a decline or a level."""
    level = fit.level
    working = _working_readings(y, tiny)
    if working < SHORT_MIN:
        # a level or a warm-up is said of the job's working set: a reading at the start level (a CUDA
        # context, a job not yet allocating) left by the start-up's jump shows none of it
        fit.classification = "too_short"
        fit.reason = (f"only {working} readings after the start-up's jump ({few}: too few to tell a warm-up "
                      "that settled from a pause in growth; log memory more often, e.g. nvidia-smi -l 1)")
    elif slowing:
        fit.classification, fit.reason = "warmup_plateau", f"memory grows ever more slowly ({few}: a warm-up settling)"
    elif fit.persistent_growth >= LEAK_MIN_FRACTION * level:
        fit.classification, fit.reason = "warmup_plateau", f"memory grew, then stayed level ({few})"
    elif growth <= -LEAK_MIN_FRACTION * level:
        fit.classification, fit.reason = "decline", f"memory declines ({few})"
    else:
        fit.classification, fit.reason = "flat", f"memory stays level ({few})"
    return fit
