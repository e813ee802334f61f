"""Every number a detection rule uses, each with its reason: a mechanism, a bound, or what it was
fitted on. docs/detection.md's threshold table is this module, printed (`python -m
forensics.detect.thresholds`; tests/test_thresholds.py checks they agree). The rules themselves are
in the modules named by each section.
"""
from __future__ import annotations

import re
from pathlib import Path

# -- bounding the work (changepoints.py, robust.py) --
MIN_POINTS = 8            # fewer samples than this get no change-point search (the short-series rules apply)
MAX_BUCKETS = 500         # bound: the change-point search runs on at most this many bucket means
MIN_SEGMENT = 3           # buckets in a segment: a single spiky bucket cannot become one
DECIMATE_ABOVE = 250_000  # bound: longer series are first reduced by medians of 5 (O(n) work)
RAW_STAIRS_MAX = 20_000   # bound: staircases are read on the samples themselves up to this many
RANGE_SAMPLE = 200_000    # bound: a series' range (its quantiles) is read on at most this many readings
QUANTUM_SAMPLE = 10_000   # bound: a resolution is checked on at most this many changes

# -- change points (changepoints.py) --
PENALTY_PER_CHANGE = 4.0  # times ln(buckets) in bucket-noise variances: a BIC-like penalty, fitted on the synthetic suite
EVENT_SIGMAS = 3.0        # a segment's rise or fall exceeds this many bucket-noise sigmas (3-sigma: noise rarely does)
RAMP_OFFSET_INTERVALS = 1.5  # two pieces of one ramp may sit apart by its growth over the gap plus this many sampling intervals
JUMP_SIGMAS = 4.0         # a jump between segments exceeds this many bucket-noise sigmas (one more than a rise: one point)
HINGE_PRICE = 2 / 3       # share of a change point's price a hinge pays: two of its three parameters (the kink's place, the slope's change; no jump)
ZERO_VARIANCE = 1e-18     # bound: a spread of x below this is none (floating point), no slope is fitted

# -- noise, resolution, spikes (robust.py) --
QUANTUM_MIN_MOVING = 0.05   # a resolution is read only when at least this share of readings change
QUANTUM_MAX_FRACTION = 0.005  # a resolution is below this share of the level (a staircase's step is not one)
QUANTUM_MIN_CHANGES = 3     # a resolution is read from at least this many changes (one or two can be anything)
QUANTUM_TOLERANCE = 0.02    # changes are whole multiples of a resolution within this share of it (MiB read as bytes)
NOISE_CHUNKED_FROM = 64     # changes from which the noise is also read in eight chunks (8 each: a MAD needs a few)
LEVEL_RESOLUTION = 1e-6     # the noise is at least this share of the level (or range): exact repeats are not over-split
NOISE_CHUNKS = 8            # the noise is also read in this many chunks, the upper quartile of theirs counting ...
NOISE_CHUNK_PERCENTILE = 75.0  # ... this percentile of the chunks' noise: a quiet part (an idle GPU) hides no busy one
QUANTUM_MULTIPLES = 8       # the smallest change may be up to this many resolution steps (a ramp moving a few MiB a reading)
MEDIAN_WINDOW = 5           # readings of the running median spikes are measured against (a spike lasts one or two)
SPIKE_SIGMAS = 6.0          # a reading this many sigmas from its running median of 5 is a spike candidate
SPIKE_MIN_FRACTION = 0.002  # a spike is also this share of the level away (1-MiB wobbles are no spikes)

# -- what counts as a leak (patterns.py) --
LEAK_Z = 8.0              # a leak's slope is this many standard errors above zero (fitted on the synthetic suite)
LEAK_SIGMAS = 3.0         # a leak's growth exceeds this many bucket-noise sigmas (3-sigma)
LEAK_MIN_FRACTION = 0.01  # a leak's growth exceeds this share of the series' typical level (below it: noise of the job)
LEAK_MIN_QUANTA = 3.0     # a leak's growth exceeds this many resolution steps of the source (1 MiB for nvidia-smi)
NEW_HIGH_SHARE = 0.5      # at least this share of a leak's growth lies above all earlier levels (else a recovery)
TAIL_QUIET_FRACTION = 0.05  # a ramp is still growing when it ends within this share of the duration
RAMP_TAIL_SHARE = 0.5     # a ramp is still growing when flat for less than this share of its own length
GROWTH_PAUSE_SHARE = 2.0  # growth that resumed after a pause shorter than this many times as long as it had risen is one growth (a warm-up's plateau lasts far longer)
RAMP_JOIN_SHARE = 0.1     # pieces of one ramp may be offset by up to this share of their rise
SIMILAR_SLOPE = 2.5       # adjacent ramps with slopes within this factor are one linear growth
DECELERATION = 0.3        # a rise whose final slope fell below this share of its mean slope is settling (a warm-up)
STAIR_TAIL_FACTOR = 1.5   # a staircase is still growing when its last step is this many intervals recent
STEP_HEIGHT_RATIO = 4.0   # steps of one staircase differ in height by less than this factor
FIRST_STEP_RATIO = 2.0    # a first step this unlike the later ones is the job's first epoch, not a stair
STAIR_FLAT_SHARE = 0.2    # between stairs, drift and falls add up to less than this share of the rise
STAIR_SPLIT_SHARE = 0.5   # a stair caught mid-way rises over two readings, the smaller part at most this share of a stair
MERGE_INTERVALS = 3.0     # rises this many sampling intervals apart (or MERGE_SHARE of the duration) are one step ...
MERGE_SHARE = 0.005       # ... seen as a jump, a short steep segment and another jump (a step inside a bucket)
TWO_STAIRS_CONF = 0.85    # a staircase of only two stairs is this much less sure (no spacing to compare)
SAWTOOTH_CONF = 0.9       # a leak under a sawtooth is this much less sure (its floor is known to a tooth)
HINGE_CANDIDATES = 120    # bound: onsets tried between two segments (a fine grid, solved at once)
TROUGH_WINDOW = 0.25      # a tooth's bottom is sought within this share of the teeth's spacing around its trough
MIN_STAIRS = 2            # a staircase has at least this many stairs: a single step is a one-off allocation
FIRST_STAIR_FROM = 3      # stairs from which the first one is judged against the rest (it needs two to compare with)
STAIR_GAP_RATIO = 2.0     # a gap over this many typical spacings between stairs ends the staircase
STAIR_TAIL_SHARE = 0.01   # ... plus this share of the duration: a last stair within it is recent (bucket rounding)
STEP_SPAN_SHARE = 0.05    # a rise within this share of the duration is one stair; a longer one is a ramp
SUDDEN_SHARE = 0.02       # a short segment within this share of the duration is sudden: a jump, a release, not a ramp
RAW_STAIR_SHARE = 0.5     # a staircase read on the readings wins over a bucket ramp that grew less than twice its growth
STARTUP_JUMP_RATIO = 3.0  # a ramp's first rise this many times its every other change is the start-up's working set, not the leak
ONSET_SNAP = 0.1          # a discrete onset is the first sample this share of an interval past the fitted hinge
RATE_MIN_POINTS = 3       # a leak's rate is fitted on at least this many points (two always fit a line)
CURVE_MIN_POINTS = 8      # fewer buckets than this are not judged for a warm-up's curve (a quadratic needs more than a line)
REFINE_MIN_POINTS = 4     # a stair's position is refined on at least this many buckets (two on each side)
HINGE_BETTER = 0.999      # a later hinge on a sawtooth's floor replaces an earlier one only when it fits this much better
OSCILLATION_MIN_FRACTION = 0.02  # a fall counts towards a sawtooth when it exceeds this share of the level
FLOOR_RISE_SHARE = 0.3    # a sawtooth leaks when its floor rose by this share of a tooth's depth
TOOTH_RANGE_SHARE = 0.25  # a tooth read on the raw readings falls by at least this share of the range
MIN_TEETH = 2             # a sawtooth has at least this many falls that recover
RECOVERY_SHARE = 0.5      # a fall is a tooth when memory comes back by this share of it (a glitch comes straight back)
TOOTH_READINGS = 3        # a tooth read on the readings: the reading it fell from, its bottom and the one after

# -- short series (series.py; docs/detection.md "Few samples") --
SHORT_MIN = 4             # fewer readings than this are too short: three points cannot tell a trend from noise
SHORT_RUN = 3             # a short job leaks when its last this many reading-to-reading changes all rose (and memory rising so into an OOM grew into it)
SHORT_MAX = 12            # short rules up to this many readings: three segments of three cannot place an onset
SHORT_SIMILAR = 1.4       # a steady rise per reading varies by the sampling jitter; 40 % faster is the start-up (within it: alike stairs)
KINK_SPREAD = 4.0         # a short rise's slope changed when it moved by this many times the spread of the slopes on either side
KINK_SHARE = 0.1          # ... and by this share of the slope: less is the unevenness of a steady rise (steps, a logger's clock)
SHORT_CONF_MAX = 0.6      # a short job's leak is at most this confident: it is a thin trend
SHORT_CONF_BASE = 0.25    # a short job's leak confidence starts here ...
SHORT_CONF_PER_READING = 0.05  # ... and grows by this per reading (7 readings reach the cap)
# -- start and end of a job inside a series (series.py) --
RELEASE_FRACTION = 0.5    # a release falls below mid-range
RELEASE_DROP = 0.4        # a release falls by at least this share of the range, in a few samples
RELEASE_NOISE_SIGMAS = 10.0  # a release falls by at least this many sample-noise sigmas
RELEASE_DRAWDOWN = 0.25   # a job that never fell by this share of its range before releases at the end
WIND_DOWN_SHARE = 0.25    # a job's wind-down lies in this last share of its readings
WIND_DOWN_KEPT = 0.5      # a wind-down keeps at least this share of the growth before it
WIND_DOWN_MIN_FALL = 0.05  # a wind-down falls by at least this share of the growth (a flat top is no wind-down)
RISE_SIGMAS = 3.0         # a reading-to-reading rise beyond this many sample-noise sigmas is a rise (3-sigma)
LEAD_IN_SHARE = 0.1       # before a job's lead-in rise the GPU held less than this share of the job's level
RANGE_QUANTILE = 0.005    # a series' range runs between this quantile and its complement (a spike sets neither)
FLOOR_QUANTILE = 0.01     # a job's floor is this quantile of its readings (one low glitch does not set it)
FLOOR_SIGMAS = 5.0        # a last fall to within this many sample-noise sigmas of the job's floor is a tooth's ...
FLOOR_SHARE = 0.05        # ... or within this share of the range: a sawtooth's last fall, not a release
AXIS_MISSING_SHARE = 0.1  # a series is on the clock (or steps) when at most this share of its readings lack one

# -- job lifetimes (lifetimes.py) --
IDLE_BAND = 0.01          # readings within this share of the range above the lowest one are idle
IDLE_NOISE = 4.0          # readings within this many times the idle readings' own spread are idle
IDLE_SHARE = 0.05         # the lowest level is idle only when below this share of the jobs' level
IDLE_CONFIRM = 2          # idle readings in a row that show the idle level is the GPU without the job
STEP_RESET = 2            # a step counter that goes back by more than this restarted
LIFETIME_MIN_READINGS = 3  # fewer readings are one lifetime: idle, job and idle again need three

# -- growth into a CUDA out-of-memory error (leaks.py) --
OOM_READINGS = 3          # an OOM this many readings after a job's last one is still that job's (logger lag)
DOUBLING = (1.6, 2.5)     # a stair this many times the one before it doubles the pool (2x, with the cap's and page rounding)
DOUBLINGS_MIN = 2         # this many doubling stairs in a row name a pool that grows by doubling
LEVEL_SHARE = 0.02        # readings within this share of a level's value are that level
OOM_PATH_CONF = 0.5       # a growth over several levels into the job's OOM is this sure a leak (the device shows only part)
LEVEL_SIGMAS = 3.0        # ... or within this many sample-noise sigmas of it (3-sigma)

# -- events, residual processes, slowdowns (events.py) --
FRAGMENTATION_SHARE = 0.25  # an OOM with more than this share of PyTorch's reserved memory unallocated names fragmentation
RESIDUAL_OVERLAP_SAMPLES = 2  # sampling intervals by which a worker's first row may miss its parent's last
RESIDUAL_INTERVALS = 3    # a process holds memory after another's end when it outlives it by more than this many intervals
JITTER_SHARE = 0.01       # a logger's sampling interval varies by this share (its clock is not exact)
SLOWDOWN_RATIO = 1.25     # late steps at least this much slower than early steps
SLOWDOWN_MIN_STEPS = 12   # timed steps needed to judge a slowdown: quarters of three steps
SLOWDOWN_SHARE = 0.75     # at least this share of the late steps are slower than the early median (one pause is not a trend)
KILL_AFTER_GROWTH_S = 300.0  # a kill this many seconds after the growth stopped still ended it ...
KILL_AFTER_GROWTH_SHARE = 0.05  # ... or within this share of the growth's span: a kill long after it is not its end

# -- events and their job (jobs.py) --
JOB_EDGE_S = 10.0         # an event this close after a job's last reading is at its end (a kill precedes the reading that shows it)
JOB_EDGE_INTERVALS = 2    # ... or within this many sampling intervals (one, and one more for jitter); also before its first reading
JOB_START_SKEW_S = 2.0    # ... before its first reading, only as far as two logs' clocks may disagree (whole seconds each): a job's own fatal event ends it, so none comes before it shows memory

# -- leak sites from a memory snapshot (allocations.py) --
SITE_QUARTERS = 4         # a leak site added survivors in every one of this many parts of the trace (all through it)
SITE_MIN_STEPS = 4        # a trace of fewer steps is not judged: its parts are parts of one step or two
SITE_MATCH = 0.15         # a site's bytes per step within this share of a leak's own are its (allocator rounding, a median of steps)

# -- serving engines' pools --
POOL_FULL = 0.99          # a KV cache this share of its size in use is full (engines print usage to 0.1 %)

# -- targets (bench/accuracy.py) --
F1_TARGET = 0.98          # leak F1 on the synthetic suite, the one target (issue 40)

_LINE = re.compile(r"^([A-Z][A-Z0-9_]*) = (.+?)\s+# (.+)$")


def table() -> str:
    """The thresholds as docs/detection.md shows them: a Markdown table, one row per number."""
    rows = ["| name | value | why |", "| --- | --- | --- |"]
    for line in Path(__file__).read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if m:
            rows.append(f"| `{m.group(1)}` | {m.group(2)} | {m.group(3).replace('|', '/')} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
