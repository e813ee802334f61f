"""Which growth pattern a fitted series shows, measured as a Leak: a ramp (linear), a staircase
(steps, on the buckets or on the readings themselves) or a sawtooth whose floor rises.

Works on the bucket means, their segments and the envelope (the future minimum of the fitted curve)
that series.analyze_xy computes. docs/detection.md, "Growth that does not fall back".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from forensics.detect import changepoints, robust
from forensics.detect.changepoints import Segment
from forensics.detect.thresholds import (LEVEL_RESOLUTION, ZERO_VARIANCE, HINGE_PRICE, CURVE_MIN_POINTS,
                                         DECELERATION, EVENT_SIGMAS, FIRST_STAIR_FROM,
                                         FIRST_STEP_RATIO, FLOOR_RISE_SHARE, GROWTH_PAUSE_SHARE, HINGE_BETTER, HINGE_CANDIDATES,
                                         JUMP_SIGMAS, LEAK_MIN_FRACTION, LEAK_MIN_QUANTA, LEAK_Z, MAX_BUCKETS,
                                         MERGE_INTERVALS, MERGE_SHARE, MIN_POINTS, MIN_SEGMENT, MIN_STAIRS,
                                         NEW_HIGH_SHARE, ONSET_SNAP, PENALTY_PER_CHANGE, RAMP_JOIN_SHARE,
                                         RAMP_TAIL_SHARE, RATE_MIN_POINTS, RAW_STAIRS_MAX, RECOVERY_SHARE,
                                         REFINE_MIN_POINTS, SAWTOOTH_CONF, SHORT_SIMILAR, SIMILAR_SLOPE,
                                         STAIR_FLAT_SHARE, STAIR_GAP_RATIO, STAIR_SPLIT_SHARE, STAIR_TAIL_FACTOR, STAIR_TAIL_SHARE,
                                         STARTUP_JUMP_RATIO, STEP_HEIGHT_RATIO, STEP_SPAN_SHARE, SUDDEN_SHARE, TAIL_QUIET_FRACTION,
                                         TOOTH_RANGE_SHARE, TOOTH_READINGS, TROUGH_WINDOW, TWO_STAIRS_CONF)


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


def has_drop(segs: list[Segment], size: float) -> bool:
    return any(changepoints.seg_jump(a, b) <= -size for a, b in zip(segs, segs[1:]))


def troughs(xb, yb, f, segs: list[Segment], fall_min: float) -> tuple[list[int], list[float]]:
    """Bucket indexes of the bottoms after each significant fall that is followed by a recovery,
    and the depth of each fall. A fall must be in the data, not only between two fitted lines: the
    pieces of an uneven rise (+64, +64, +0, +64 MiB a step) are offset from each other, yet memory
    never went down."""
    falls: dict[int, tuple[float, int]] = {}
    for k, s in enumerate(segs):
        if k > 0:
            jump = changepoints.seg_jump(segs[k - 1], s)
            if jump <= -fall_min:
                falls[s.i0] = (-jump, max(0, s.i0 - MIN_SEGMENT))
        if s.y1 - s.y0 <= -fall_min:
            falls[s.i1 - 1] = (s.y0 - s.y1, s.i0)
    out, depths = [], []
    for i in sorted(falls):
        depth, lo = falls[i]
        if float(yb[lo: i + 1].max()) - float(yb[i]) < RECOVERY_SHARE * fall_min:
            continue
        # recovered: the curve comes back up by at least half of a fall afterwards
        if i + 1 < f.size and float(f[i + 1:].max()) - float(f[i]) >= RECOVERY_SHARE * fall_min:
            out.append(i)
            depths.append(depth)
    return out, depths


def raw_teeth(y: np.ndarray, fall_min: float) -> int:
    """Teeth read on the readings themselves (before despiking: a clean tooth's bottom is one reading):
    a fall of at least `fall_min` and a quarter of the range whose next reading climbs on from the
    bottom, still below where it fell from by half the fall (a glitch comes straight back), and that
    later recovers half the fall. Teeth of a sawtooth sampled too coarsely for change points (three
    readings a tooth at `nvidia-smi -l 1`) that the bucket fit smooths into a level."""
    if y.size < TOOTH_READINGS:
        return 0
    fall = max(fall_min, TOOTH_RANGE_SHARE * float(y.max() - y.min()))
    d = np.diff(y)
    i = np.nonzero(d[:-1] <= -fall)[0]          # falls from reading i to i + 1, with a reading after
    later = np.maximum.accumulate(y[::-1])[::-1]
    depth = y[i] - y[i + 1]
    climbs = (y[i + 2] >= y[i + 1]) & (y[i] - y[i + 2] >= RECOVERY_SHARE * depth)
    recovers = later[i + 2] - y[i + 1] >= RECOVERY_SHARE * depth
    return int(np.count_nonzero(climbs & recovers))


def raw_floor(bx, by, edges, troughs, depths, sigma):
    """The bottom of each tooth read on the raw samples (bucket means alias a fast sawtooth, and
    their troughs wander): (x, y) near each trough, the typical tooth depth, and the noise of one
    floor reading (a median of w samples)."""
    t = np.asarray(troughs)
    half = max(1, int(TROUGH_WINDOW * robust.median(np.diff(t)))) if t.size > 1 else 1
    xs, ys, ws = [], [], []
    m = edges.size - 1
    for i in t:
        lo, hi = edges[max(0, i - half)], edges[min(m, i + half + 1)]
        if hi <= lo:
            continue
        j = lo + int(np.argmin(by[lo:hi]))
        # the median of the window's lowest readings (the new tooth's first ones): the minimum alone
        # is the noisiest one, and the readings right after it may be a spike that the minimum came
        # just before (an evaluation's memory on a level floor), not the floor
        w = max(1, (hi - lo) // 8)
        xs.append(bx[j])
        ys.append(float(robust.median(np.partition(by[lo:hi], w - 1)[:w])))
        ws.append(w)
    point_noise = 1.2533 * sigma / math.sqrt(max(1.0, float(robust.median(ws)))) if ws else sigma
    return np.asarray(xs), np.asarray(ys), float(robust.median(depths)), point_noise


def find_leak(xb, yb, env, sigma_b, leak_min, floor, bx, by, discrete=True) -> Leak | None:
    """The growing part at the end of the envelope: a ramp that is still rising, or a staircase whose
    steps keep coming. Returns None when growth stopped long enough ago (warm-up, one-off allocation)."""
    n = env.size
    if n < 2 * MIN_SEGMENT or env[-1] - env[0] < leak_min:
        return None
    duration = float(bx[-1] - bx[0])
    bkps = changepoints.change_points(xb, env, sigma_b)
    segs = changepoints.segments(xb, env, bkps)
    event = EVENT_SIGMAS * sigma_b
    # growth events: a jump into a segment, or a segment's own rise
    events = []   # (x_start, x_end, rise, kind, segment index)
    gap = _interval(xb)
    for k, s in enumerate(segs):
        if k > 0:
            jump = changepoints.seg_jump(segs[k - 1], s)
            if jump >= max(JUMP_SIGMAS * sigma_b, changepoints.ramp_offset(segs[k - 1], s, gap)):
                events.append((segs[k - 1].x1, s.x0, jump, "jump", k))
        rise = s.y1 - s.y0
        if rise >= event:
            short = (s.i1 - s.i0) <= MIN_SEGMENT + 1 and (s.x1 - s.x0) <= SUDDEN_SHARE * duration
            events.append((s.x0, s.x1, rise, "jump" if short else "ramp", k))
    if not events:
        return None
    events = _merge_close(events, xb, duration)
    end_x = float(xb[-1])
    if floor is not None:
        return _sawtooth_leak(float(bx[0]), floor, leak_min)
    stair = _stair_leak(xb, yb, events, leak_min, sigma_b, duration, end_x)
    # still growing: the ramp ends at the end, or flattened (at a cap, before an OOM, or as the job
    # wound down) for less than half of its own length; a warm-up is followed by a plateau far longer
    # than itself. The largest such ramp speaks, not merely the last: a short slower piece at the
    # very end (the last steps of a job) must not hide the growth before it.
    # The quiet tail is measured against the whole ramp its pieces join into.
    ramps = [e for e in events if e[3] == "ramp"]
    ramp = _still_growing(xb, yb, segs, events, ramps, leak_min, sigma_b, discrete, duration, end_x, False)
    if ramp is None and stair is None:
        # growth that went on after every ramp, as much again as half of it, is no plateau after it:
        # a leak whose steps vary comes in bursts and pauses, none of them a ramp that reaches the end
        ramp = _still_growing(xb, yb, segs, events, ramps, leak_min, sigma_b, discrete, duration, end_x, True)
    if ramp is not None:
        ramp = _growth_it_continues(xb, yb, segs, events, ramp, leak_min, sigma_b, discrete) or ramp
    if stair is not None and ramp is not None:
        # the pattern that accounts for more of the growth (a final step can look like a short ramp)
        return stair if stair.growth >= ramp.growth else ramp
    return stair or ramp


def _growth_it_continues(xb, yb, segs, events, leak, leak_min, sigma_b, discrete) -> Leak | None:
    """The linear leak from the earlier growth that `leak` continues, or None. A warm-up's rise is
    followed by a plateau far longer than itself; growth that resumed sooner never levelled (an
    allocator's pool reaching the largest batch it has seen while a leak grows from the first steps rises
    fast, then at the leak's rate, pausing while its slack lasts), and the leak began with it: the
    earliest ramp from a level the job held after its start-up, after which every pause up to the leak
    was shorter than GROWTH_PAUSE_SHARE times the time the growth had taken since it began."""
    for first in sorted((e for e in events if e[1] <= leak.onset and e[3] == "ramp"), key=lambda e: e[0]):
        found = _ramp_segments(xb, segs, first, sigma_b)
        if found is None or not _after_start_up(xb, segs, found[0], sigma_b):
            continue
        k = found[0]
        if not _never_levelled(xb, yb, segs[k].i0 if k == 1 else segs[k].i0 - 1, leak.onset, sigma_b):
            continue
        # the onset is where that ramp's rise begins: a hinge (one slope) fitted across the pauses and
        # the slower rise after them would bend early, to fit the curve
        joined = _linear_leak(xb, yb, segs, found[0], leak_min, sigma_b, discrete, fit_to=segs[found[1]].i1)
        if joined is not None and joined.onset < leak.onset:
            return joined
    return None


def _never_levelled(xb, yb, i: int, until: float, sigma_b: float) -> bool:
    """Whether memory, from reading i on, rose to new highs (by an event's size) until `until` with no
    pause as long as GROWTH_PAUSE_SHARE times the time it had been rising: paused, not levelled. Readings
    are judged one by one: a rise and the flat readings after it inside one fitted segment are a pause too."""
    gap = _interval(xb)
    top, begin, last = float(yb[i]), None, None
    for j in range(i + 1, xb.size):
        if xb[j] >= until:
            break
        if yb[j] > top + EVENT_SIGMAS * sigma_b:
            if begin is None:
                begin = float(xb[j - 1])
            elif xb[j] - last - gap >= GROWTH_PAUSE_SHARE * (last - begin):
                return False
            last = float(xb[j])
        top = max(top, float(yb[j]))
    return last is not None and until - last - gap < GROWTH_PAUSE_SHARE * (last - begin)


def _after_start_up(xb, segs, k: int, sigma_b: float) -> bool:
    """Whether segment k rises after the job's start-up: from a level held after it (a level that is not
    the one the series starts at), or within the segment the start-up's jump led into. The first rise
    from the starting level (the bare context) to the working set is the start-up itself."""
    if k == 0 or segs[k - 1].y1 - segs[k - 1].y0 >= EVENT_SIGMAS * sigma_b:
        return False
    if k >= 2:
        return True
    gap = _interval(xb)
    return changepoints.seg_jump(segs[0], segs[1]) >= max(JUMP_SIGMAS * sigma_b,
                                                          changepoints.ramp_offset(segs[0], segs[1], gap))


def _interval(xb) -> float:
    """The buckets' typical spacing (0 for fewer than two)."""
    return float(robust.median(np.diff(xb))) if xb.size > 1 else 0.0


def _still_growing(xb, yb, segs, events, ramps, leak_min, sigma_b, discrete, duration, end_x, bursts) -> Leak | None:
    """The largest ramp that was still growing at the end: it reaches the end, or its quiet tail is
    short against its length. With `bursts`, the tail starts where the growth after the ramp ended, if
    that growth was at least half the ramp's."""
    for cand in sorted(ramps, key=lambda e: -e[2]):
        grown_to = cand[1]
        later = [e for e in events if e[0] >= cand[1]]
        if bursts and later and sum(e[2] for e in later) >= RAMP_TAIL_SHARE * cand[2]:
            grown_to = max(e[1] for e in later)
        if end_x - grown_to > max(TAIL_QUIET_FRACTION * duration, RAMP_TAIL_SHARE * (grown_to - float(xb[0]))):
            continue   # a quiet tail too long for a ramp from the series' start: no need to measure this one
        ramp = _ramp_leak(xb, yb, segs, cand, leak_min, sigma_b, discrete)
        if ramp is not None and end_x - grown_to <= max(TAIL_QUIET_FRACTION * duration,
                                                        RAMP_TAIL_SHARE * (grown_to - min(ramp.onset, cand[0]))):
            return ramp
    return None


def new_high(xb, f, leak: Leak) -> bool:
    """A leak takes memory where it has not been before: at least half of its growth lies above the
    highest level before its onset (the rising half of a slow wave is not a leak)."""
    before = f[xb < leak.onset]
    if before.size == 0:
        return True
    return float(f[-1]) - float(before.max()) >= NEW_HIGH_SHARE * leak.growth


def _merge_close(events: list[tuple], xb, duration) -> list[tuple]:
    """One step seen as a jump, a short steep segment and another jump (a step inside a bucket)
    becomes one event."""
    near = max(MERGE_INTERVALS * float(robust.median(np.diff(xb))), MERGE_SHARE * duration) if xb.size > 1 else 0.0
    out = [events[0]]
    for e in events[1:]:
        p = out[-1]
        if e[0] - p[1] <= near and (p[3] == "jump" or e[3] == "jump"):
            kind = "ramp" if (e[1] - p[0]) > STEP_SPAN_SHARE * duration else "jump"
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
    found = _ramp_segments(xb, segs, ramp, sigma_b)
    if found is None:
        return None
    first_k, k_last = found
    i0 = segs[first_k].i0
    # still settling? a ramp whose slope keeps falling is a warm-up, not a leak; so is one that only
    # continues, ever slower, the longer and steeper rise before it (a leak starts or speeds up growth).
    # A flat top after the ramp counts as the slope falling unless the rise stopped at once: a straight
    # rise after which no segment rises by an event's size (a pool that stopped growing, a cap) is
    # judged up to its end, its flat top being the quiet tail (`_still_growing`); a curve that goes on
    # rising ever more slowly after the ramp is a warm-up bending into its plateau
    i1 = segs[k_last].i1
    stopped = not any(t.y1 - t.y0 >= EVENT_SIGMAS * sigma_b for t in segs[k_last + 1:])
    if _decelerating(xb[i0:], yb[i0:], sigma_b) and (not stopped or _decelerating(xb[i0:i1], yb[i0:i1], sigma_b)):
        return None
    if first_k > 0:
        prev = segs[first_k - 1]
        if (prev.i1 - prev.i0 > MIN_SEGMENT + 1 and prev.y1 - prev.y0 >= EVENT_SIGMAS * sigma_b
                and prev.slope > segs[first_k].slope and _decelerating(xb[prev.i0:], yb[prev.i0:], sigma_b)):
            return None
    return _linear_leak(xb, yb, segs, first_k, leak_min, sigma_b, discrete)


def _ramp_segments(xb, segs, ramp, sigma_b) -> tuple[int, int] | None:
    """The first and the last rising segment of the ramp event `ramp`: the last long one sets the slope,
    earlier pieces of one ramp join it (`_ramp_first_segment`)."""
    rising = [k for k, s in enumerate(segs)
              if s.y1 - s.y0 >= EVENT_SIGMAS * sigma_b and s.x0 >= ramp[0] and s.x1 <= ramp[1]]
    if not rising:
        return None
    long_rising = [k for k in rising if segs[k].i1 - segs[k].i0 > MIN_SEGMENT + 1]
    k_last = (long_rising or rising)[-1]
    return _ramp_first_segment(xb, segs, k_last, sigma_b), k_last


def _linear_leak(xb, yb, segs, first_k, leak_min, sigma_b, discrete, fit_to=None) -> Leak | None:
    """A linear leak whose growth begins in segment `first_k`: its onset, rate, growth and evidence. The
    onset's hinge is fitted on the buckets before `fit_to` (all when None)."""
    i0 = segs[first_k].i0
    onset, start_level = _refine_onset(xb[:fit_to], yb[:fit_to], segs, first_k, sigma_b)
    # the start-up's jump may be the step into the ramp's first segment, which a continuous hinge
    # cannot fit: it is looked for from the reading before that segment on
    past = _past_startup_jump(xb, yb, min(onset, float(xb[max(i0 - 1, 0)])), leak_min, sigma_b)
    if past is not None:
        onset, start_level = past
    if discrete and first_k > 0 and xb.size <= MAX_BUCKETS and xb.size > 1:
        # discrete samples (a step log): the onset is the first sample that shows the growth
        gap = float(robust.median(np.diff(xb)))
        after = np.nonzero(xb >= onset + ONSET_SNAP * gap)[0]
        if after.size:
            onset = float(xb[after[0]])
    sel = xb >= onset
    if sel.sum() < RATE_MIN_POINTS:
        sel = np.arange(xb.size) >= i0
    rate = robust.theil_sen(xb[sel], yb[sel])
    if rate <= 0:
        return None
    end = float(xb[-1])
    n_ramp = int(sel.sum())
    sigma_z = sigma_b
    if past is not None:
        # the start-up's jump inflated the whole series' noise estimate: the slope is judged against
        # the noise of the readings it was fitted on
        level = float(robust.median(np.abs(yb[sel])))
        sigma_z = min(sigma_b, max(robust.noise(xb[sel], yb[sel]), LEVEL_RESOLUTION * level, 1.0))
    # the slope's standard error on n_ramp evenly spread buckets is sigma * sqrt(12 / n) / span
    z = rate * (end - onset) / (sigma_z * math.sqrt(12.0 / max(n_ramp, 2)))
    # growth so far: as measured (end level minus onset level), not as extrapolated from the rate
    end_level = float(robust.median(yb[-3:]))
    growth = end_level - start_level
    if growth < leak_min or z < LEAK_Z:
        return None
    return Leak("linear", onset, end, rate, growth, start_level, end_level, _confidence(z, LEAK_Z), z=z)


def _ramp_first_segment(xb, segs, k_last: int, sigma_b: float) -> int:
    """The first segment of the ramp that ends with segment `k_last`: walking back over contiguous
    growing segments whose slope is like its own (one linear growth), or like the next one's when that
    steps up from it and is steeper (a growth that sped up)."""
    slope_last = segs[k_last].slope
    first_k = k_last
    k = k_last - 1
    gap = _interval(xb)

    def joins(s: Segment, nxt: Segment) -> bool:
        # a small offset between two pieces of one ramp (a logger's drifting clock, or sampling out
        # of step with the job) does not part them
        jump = changepoints.seg_jump(s, nxt)
        tolerance = max(JUMP_SIGMAS * sigma_b, RAMP_JOIN_SHARE * min(s.y1 - s.y0, nxt.y1 - nxt.y0),
                        changepoints.ramp_offset(s, nxt, gap))
        # a rise that speeds up (a jump up into a steeper piece) never paused: it is one ramp too
        sped_up = jump > 0 and nxt.slope >= s.slope and s.slope * SIMILAR_SLOPE >= nxt.slope
        alike = 1 / SIMILAR_SLOPE <= s.slope / slope_last <= SIMILAR_SLOPE
        return s.slope > 0 and ((abs(jump) < tolerance and alike) or sped_up)

    while k >= 0:
        if joins(segs[k], segs[first_k]):
            first_k = k
            k -= 1
        elif (k >= 1 and segs[k].i1 - segs[k].i0 <= MIN_SEGMENT + 1 and segs[k - 1].i1 - segs[k - 1].i0 > MIN_SEGMENT + 1
              and joins(segs[k - 1], segs[first_k])):
            # a shortest piece that parts two pieces of one ramp (a reading or two off the line: a
            # spike the running median kept) is part of it
            first_k = k - 1
            k -= 2
        else:
            break
    return first_k


def _past_startup_jump(xb, yb, onset, leak_min, sigma_b) -> tuple[float, float] | None:
    """Where the steady rise begins, and its level, when the fitted ramp starts with the job's start-up:
    level readings, one jump (the working set allocated at once, far above every other change; seen in one
    reading or two), then the leak a few readings later, too few for a segment of their own. A hinge
    (level, then the steady rise) fitted on the readings after the jump; None when the ramp does not start
    that way."""
    i0 = int(np.searchsorted(xb, onset))
    d = np.diff(yb[i0:])
    if d.size < MIN_STAIRS:
        return None
    j = int(np.argmax(d))
    # a logger reading while the working set is allocated sees the start-up in two parts: a next
    # rise well above the steady rises after it (SHORT_SIMILAR) is the start-up's rest
    k = j + 1 if d.size > j + 2 and d[j + 1] > SHORT_SIMILAR * float(robust.median(d[j + 2:])) > 0 else j
    ax, ay = xb[i0 + k + 1:], yb[i0 + k + 1:]
    if ax.size <= RATE_MIN_POINTS:
        return None
    others = np.abs(np.delete(d, range(j, k + 1)))
    if (float(yb[i0 + j] - yb[i0]) >= leak_min      # it rose before the jump: no start-up there
            or float(d[j]) < max(JUMP_SIGMAS * sigma_b, STARTUP_JUMP_RATIO * float(others.max()))):
        return None
    cands = np.linspace(float(ax[0]), float(ax[-RATE_MIN_POINTS]), HINGE_CANDIDATES)
    stack = np.empty((cands.size, ax.size, 2))
    stack[:, :, 0] = 1.0
    stack[:, :, 1] = np.maximum(0.0, ax[None, :] - cands[:, None])
    coefs = robust.lstsq_each(stack, ay)
    sse = [float(((A @ c - ay) ** 2).sum()) for A, c in zip(stack, coefs)]
    k = int(np.argmin(sse))
    return float(cands[k]), float(coefs[k][0])


def _decelerating(x: np.ndarray, y: np.ndarray, sigma_b: float) -> bool:
    """True when a quadratic fits the ramp clearly better and its end slope is a small share of the
    mean slope: the curve of a warm-up approaching its plateau."""
    if x.size < CURVE_MIN_POINTS:
        return False
    u = (x - x[0]) / ((x[-1] - x[0]) or 1.0)
    A = np.column_stack([np.ones_like(u), u, u * u])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    sse_q = float(((A @ coef - y) ** 2).sum())
    b, a = robust.line_fit(u, y)
    sse_l = float(((a + b * u - y) ** 2).sum())
    if (sse_l - sse_q) / (sigma_b ** 2) < PENALTY_PER_CHANGE * math.log(x.size):
        return False
    mean_slope = coef[1] + coef[2]          # (y(1) - y(0)) of the quadratic
    end_slope = coef[1] + 2 * coef[2]
    return mean_slope > 0 and end_slope < DECELERATION * mean_slope


def _refine_onset(xb, yb, segs, first_k, sigma_b) -> tuple[float, float]:
    """Where the growth starts, to better than a bucket, and the level there: a continuous hinge
    fitted on the buckets from the previous segment's start to the end (previous trend + a slope
    change at t0; a level + the slope from t0 when the previous segment is level)."""
    s = segs[first_k]
    if first_k == 0:
        return _level_then_ramp(xb[s.i0:s.i1], yb[s.i0:s.i1], sigma_b) or (float(xb[0]), float(s.y0))
    prev = segs[first_k - 1]
    lo_i = prev.i0
    x = xb[lo_i:]
    y = yb[lo_i:]
    span_lo = prev.x0 + 0.5 * (prev.x1 - prev.x0)
    span_hi = s.x0 + 0.5 * (s.x1 - s.x0)
    level_before = abs(prev.y1 - prev.y0) < EVENT_SIGMAS * sigma_b
    gap = _interval(xb)
    if level_before and changepoints.seg_jump(prev, s) >= max(JUMP_SIGMAS * sigma_b,
                                                              changepoints.ramp_offset(prev, s, gap)):
        # a jump from a level into the ramp's segment (the start-up reaching its working set): a continuous
        # hinge cannot fit a jump and, fitted across it, takes the jump for the ramp's first rise; the
        # ramp begins within its own segment, after the jump: level, then the slope, as after a level
        t0, level, _ = _best_hinge(xb[s.i0:], yb[s.i0:], float(s.x0), span_hi)
        return t0, level
    if not level_before and prev.slope > SIMILAR_SLOPE * s.slope:
        # a rise far steeper than the ramp, which the ramp's walk back did not join (the start-up reaching
        # its working set over a few readings): the growth starts from the level that rise reached, as
        # after a jump; a hinge bending from the steep rise into the slope would cut the pause between them
        t0, level, _ = _best_hinge(xb[prev.i1 - 1:], yb[prev.i1 - 1:], float(prev.x1), span_hi)
        return t0, level
    if level_before:
        # a level before the growth (it neither rose nor fell by an event's size): the hinge is level,
        # then the slope; a trend of its own fitted to that level is a free parameter that only the
        # noise moves, and it moves the kink with it (slow leaks under noise placed 3-4 standard
        # errors early or late)
        t0, level, _ = _best_hinge(x, y, span_lo, span_hi)
        return t0, level
    cands = np.linspace(span_lo, span_hi, HINGE_CANDIDATES)
    # the design matrices at once (each column as np.column_stack makes it), solved by one call
    stack = np.empty((cands.size, x.size, 3))
    stack[:, :, 0] = 1.0
    stack[:, :, 1] = x - x[0]
    stack[:, :, 2] = np.maximum(0.0, x[None, :] - cands[:, None])
    coefs = robust.lstsq_each(stack, y)
    best, best_t, level = None, s.x0, s.y0
    for t0, A, coef in zip(cands, stack, coefs):
        sse = float(((A @ coef - y) ** 2).sum())
        if best is None or sse < best:
            best, best_t, level = sse, float(t0), float(coef[0] + coef[1] * (t0 - x[0]))
    return best_t, level


def _level_then_ramp(x, y, sigma_b) -> tuple[float, float] | None:
    """Where a ramp that is the series' first segment begins, and its level there: a slow leak under
    noise starts a while after the log does, yet the change-point search, which prices a whole new
    segment, keeps the flat stretch before it in the ramp's segment. A hinge (level, then the slope)
    places it when its fit beats the straight line by its price: two of a change point's three
    parameters (the kink's position and the slope's change; no jump in level), `HINGE_PRICE` of
    `PENALTY_PER_CHANGE`; else (None) the ramp begins with the log."""
    if x.size < CURVE_MIN_POINTS:
        return None
    b, a = robust.line_fit(x - x[0], y)
    sse_line = float(((a + b * (x - x[0]) - y) ** 2).sum())
    t0, level, sse = _best_hinge(x, y, float(x[0]), float(x[-RATE_MIN_POINTS]))
    if sse_line - sse < HINGE_PRICE * PENALTY_PER_CHANGE * math.log(x.size) * sigma_b ** 2:
        return None
    return t0, level


def _best_hinge(x, y, lo, hi) -> tuple[float, float, float]:
    """The level-then-ramp hinge (y on 1 and max(0, x - t0)) that fits best with t0 in [lo, hi]: its
    t0, its level and its residual sum of squares. The grid is tried again between the best
    candidate's neighbours: over a long log, one 120th of the span is more than an onset may be off."""
    cands = np.linspace(lo, hi, HINGE_CANDIDATES)
    sse, level = _hinge_sse(x, y, cands)
    k = int(np.argmin(sse))
    fine = np.linspace(float(cands[max(k - 1, 0)]), float(cands[min(k + 1, cands.size - 1)]), HINGE_CANDIDATES)
    sse_f, level_f = _hinge_sse(x, y, fine)
    j = int(np.argmin(sse_f))
    if sse_f[j] <= sse[k]:
        return float(fine[j]), float(level_f[j]), float(sse_f[j])
    return float(cands[k]), float(level[k]), float(sse[k])


def _hinge_sse(x, y, cands) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate t0, the residual sum of squares of y on (1, max(0, x - t0)) and the fitted
    level, in closed form (all at once)."""
    h = np.maximum(0.0, x[None, :] - cands[:, None])
    mean = float(y.mean())
    yc = y - mean                        # centred: the sums of squares keep their precision
    n = float(x.size)
    sh, shh, shy = h.sum(axis=1), (h * h).sum(axis=1), h @ yc
    det = n * shh - sh * sh
    ok = det > ZERO_VARIANCE * n * n
    slope = np.where(ok, n * shy / np.where(ok, det, 1.0), 0.0)
    level = mean - slope * sh / n
    sse = np.where(ok, float(yc @ yc) - slope * shy, np.inf)
    return sse, level


def _stair_leak(xb, yb, events, leak_min, sigma_b, duration, end_x, edge=None) -> Leak | None:
    """Repeated steps up, the last one recent compared with the spacing of the steps."""
    # a steep short rise counts as a step too (a step spread over a few buckets); a rise within the
    # first buckets may be the job starting or an edge effect of the fit: it is a stair only when it
    # matches the stairs after it (`_first_stair`)
    if edge is None:
        edge = xb[min(2 * MIN_SEGMENT, xb.size - 1)]
    steps = [e for e in events if (e[3] == "jump" or (e[1] - e[0]) <= STEP_SPAN_SHARE * duration)]
    if len(steps) < MIN_STAIRS:
        return None
    # a small last rise (an unfinished tooth, a partial step) does not start the staircase
    h_all = float(robust.median([e[2] for e in steps]))
    while len(steps) > MIN_STAIRS and steps[-1][2] < h_all / STEP_HEIGHT_RATIO:
        steps = steps[:-1]
    xs = [0.5 * (e[0] + e[1]) for e in steps]
    hs = [_stair_height(xb, yb, events, e) for e in steps]
    # walk back while the steps stay alike: regular spacing (a long quiet gap ends the staircase)
    # and similar heights (a one-off allocation or warm-up is not one of the steps)
    run = [len(steps) - 1]
    for k in range(len(steps) - 2, -1, -1):
        gap = xs[run[-1]] - xs[k]
        intervals = [xs[run[i]] - xs[run[i + 1]] for i in range(len(run) - 1)]
        typical = float(robust.median(intervals)) if intervals else gap
        if len(intervals) >= MIN_STAIRS and gap > STAIR_GAP_RATIO * typical:
            break
        h_typ = float(robust.median([hs[i] for i in run]))
        if not (h_typ / STEP_HEIGHT_RATIO <= hs[k] <= h_typ * STEP_HEIGHT_RATIO):
            break
        run.append(k)
    run = _first_stair(xb, steps, hs, sorted(run), edge)
    if len(run) < MIN_STAIRS:
        return None
    sx = [xs[k] for k in run]
    sh = [hs[k] for k in run]
    interval = float(robust.median(np.diff(sx)))
    # recent against the stairs' mean spacing: an allocator's stairs come unevenly (a few close, a pause)
    spacing = (sx[-1] - sx[0]) / (len(sx) - 1)
    if interval <= 0 or end_x - sx[-1] > STAIR_TAIL_FACTOR * max(interval, spacing) + STAIR_TAIL_SHARE * duration:
        return None
    growth = float(sum(sh))
    if growth < leak_min:
        return None
    rate = float(sum(sh[1:]) / (sx[-1] - sx[0])) if sx[-1] > sx[0] else growth / max(end_x - sx[0], 1e-9)
    # the first stair is placed between the rises next to it: the job's start-up, a larger rise
    # within half a spacing before it, would otherwise be the best split of the window
    first = steps[run[0]]
    after = max((e[1] for e in events if e[1] <= first[0]), default=-math.inf)
    before = min((e[0] for e in events if e[0] >= first[1]), default=math.inf)
    onset = _refine_step(xb, yb, sx[0], interval, after, before)
    pre = yb[xb < onset]
    start_level = float(pre[-3:].mean()) if pre.size else float(yb[0])
    z = growth / sigma_b
    regular = 1.0 if len(run) >= FIRST_STAIR_FROM else TWO_STAIRS_CONF
    return Leak("step", onset, float(xb[-1]), rate, growth, start_level, start_level + growth,
                _confidence(z, 2 * JUMP_SIGMAS, regular), steps=sx, z=z)


def _first_stair(xb, steps, hs, run: list[int], edge: float) -> list[int]:
    """The staircase `run` (indexes into `steps`, heights `hs`) less a first step that is not one of its
    stairs. The first step up of a job is its first epoch's own allocation (optimizer state, first eval
    buffers) unless it matches the stairs that follow; one within the first buckets (`edge`: the job
    starting, or an edge effect of the fit) must also rise from a level held for a segment's length and
    have two stairs after it to be compared with."""
    while run:
        first = steps[run[0]]
        held = int(np.count_nonzero(xb <= first[0]))
        if (first[0] + first[1]) / 2 <= edge and (held < MIN_SEGMENT or len(run) < FIRST_STAIR_FROM):
            run = run[1:]
            continue
        if len(run) >= FIRST_STAIR_FROM:
            later = float(robust.median([hs[i] for i in run[1:]]))
            if not later / FIRST_STEP_RATIO <= hs[run[0]] <= later * FIRST_STEP_RATIO:
                run = run[1:]
        return run
    return run


def _stair_height(xb, yb, events, e) -> float:
    """A stair's height: the level after it minus the level before it (medians of the buckets between it
    and the events next to it, at least MIN_SEGMENT on each side). The change points may split one stair
    into a steep short segment and a jump after it that the ramp's offset tolerance does not count; the
    event's own rise is then only part of the stair."""
    before = max((o[1] for o in events if o[1] <= e[0]), default=-math.inf)
    after = min((o[0] for o in events if o[0] >= e[1]), default=math.inf)
    lo = yb[(xb >= before) & (xb < e[0])]
    hi = yb[(xb > e[1]) & (xb <= after)]
    if min(lo.size, hi.size) < MIN_SEGMENT:
        return e[2]   # a level of a reading or two is as noisy as the rise itself
    return float(robust.median(hi)) - float(robust.median(lo))


def raw_stair(x, y, sigma, quantum, level, leak_min, sigma_b) -> Leak | None:
    """A staircase read on the samples themselves: the readings stay level (within the noise or the
    source's resolution) between jumps, and the jumps carry the growth. A ramp spread over every
    sample, or a series that also falls, is not one."""
    if x.size < MIN_POINTS or x.size > RAW_STAIRS_MAX:
        return None
    d = np.diff(y)
    leak = _raw_stair(x, y, d, sigma, quantum, level, leak_min, sigma_b)
    if leak is None:
        # jumps every other reading inflate a noise read on all the changes: read it between the jumps
        quiet = robust.level_noise(d)
        if quiet < sigma:
            leak = _raw_stair(x, y, d, quiet, quantum, level, leak_min, sigma_b)
    return leak


def _raw_stair(x, y, d, sigma, quantum, level, leak_min, sigma_b) -> Leak | None:
    thr = max(JUMP_SIGMAS * sigma, LEAK_MIN_QUANTA * quantum, LEAK_MIN_FRACTION * level)
    up = d > thr
    if up.sum() < MIN_STAIRS:
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
    if len(groups) < MIN_STAIRS or any(g.size > 2 for g in groups[1:]):
        return None
    # ... when it is one stair caught mid-way, whose smaller part is at most half a stair: two whole
    # stairs back to back are growth at nearly every reading (a leak every step, read a little faster
    # than the steps come), a ramp
    single = [float(d[g[0]]) for g in groups[1:] if g.size == 1]
    smaller = [float(d[g].min()) for g in groups[1:] if g.size == 2]
    if single and smaller and max(smaller) > STAIR_SPLIT_SHARE * float(robust.median(single)):
        return None
    # level between the jumps per unit of x too, not only per reading: a ramp read at uneven intervals
    # (short, long, short, ...) rises little over each short one, yet at the jumps' own rate. Two
    # readings a stair (coarse logging) are a staircase when the stair between its jumps holds level.
    dx = np.diff(x)
    jumps_x, quiet_x = float(dx[up].sum()), float(dx[quiet].sum())
    if quiet_x <= 0 or float(np.abs(d[quiet]).sum()) * jumps_x > STAIR_FLAT_SHARE * rise * quiet_x:
        return None
    events = [(float(x[g[0]]), float(x[g[-1] + 1]), float(y[g[-1] + 1] - y[g[0]]), "jump", -1) for g in groups]
    duration = float(x[-1] - x[0])
    # no fit, so no edge effect: every jump counts, and the job's own start-up (its first jump, unlike
    # the stairs after it) is left out by the first-stair rule
    return _stair_leak(x, y, events, leak_min, sigma_b, duration, float(x[-1]), edge=float(x[0]) - 1.0)


def _refine_step(xb, yb, x_step, interval, after=-math.inf, before=math.inf) -> float:
    """Where the first step happens: the split that best separates two levels near it, between the
    rise before it (ending at `after`) and the one after it (starting at `before`), both left out."""
    lo, hi = x_step - 0.5 * interval, x_step + 0.5 * interval
    sel = np.nonzero((xb >= lo) & (xb <= hi) & (xb > after) & (xb < before))[0]
    if sel.size < REFINE_MIN_POINTS:
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
    if tx.size < RATE_MIN_POINTS:
        return None
    # onset: a hinge on the troughs (floor level, then rising); the first trough means "from the start"
    best, onset, j_best = None, float(tx[0]), 0
    for j in range(0, tx.size - 2):
        h = np.maximum(0.0, tx - tx[j])
        A = np.column_stack([np.ones_like(tx), h])
        coef, *_ = np.linalg.lstsq(A, ty, rcond=None)
        sse = float(((A @ coef - ty) ** 2).sum())
        if best is None or sse < best * HINGE_BETTER:
            best, onset, j_best = sse, float(tx[j]), j
    sel = tx >= onset
    rate = robust.theil_sen(tx[sel], ty[sel])
    growth = rate * float(tx[-1] - onset)
    if j_best == 0:
        onset = x_start
    if rate <= 0 or growth < max(leak_min, FLOOR_RISE_SHARE * depth):
        return None
    b, a = robust.line_fit(tx[sel], ty[sel])
    resid = float(np.sqrt(np.mean((ty[sel] - (a + b * tx[sel])) ** 2)))
    # a noise-free, quantized floor has neither residual nor point noise: one byte is the floor
    z = growth / (max(resid, point_noise, 1.0) * math.sqrt(12.0 / max(int(sel.sum()), 2)))
    if z < LEAK_Z:
        return None
    start_level = float(ty[sel][0])
    return Leak("linear", onset, float(tx[-1]), rate, growth, start_level, start_level + growth,
                _confidence(z, LEAK_Z, SAWTOOTH_CONF), z=z)
