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

# -- change points (changepoints.py) --
PENALTY_PER_CHANGE = 4.0  # times ln(buckets) in bucket-noise variances: a BIC-like penalty, fitted on the synthetic suite
EVENT_SIGMAS = 3.0        # a segment's rise or fall exceeds this many bucket-noise sigmas (3-sigma: noise rarely does)
JUMP_SIGMAS = 4.0         # a jump between segments exceeds this many bucket-noise sigmas (one more than a rise: one point)

# -- noise, resolution, spikes (robust.py) --
QUANTUM_MIN_MOVING = 0.05   # a resolution is read only when at least this share of readings change
QUANTUM_MAX_FRACTION = 0.005  # a resolution is below this share of the level (a staircase's step is not one)
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
RAMP_JOIN_SHARE = 0.1     # pieces of one ramp may be offset by up to this share of their rise
SIMILAR_SLOPE = 2.5       # adjacent ramps with slopes within this factor are one linear growth
DECELERATION = 0.3        # a rise whose final slope fell below this share of its mean slope is settling (a warm-up)
STAIR_TAIL_FACTOR = 1.5   # a staircase is still growing when its last step is this many intervals recent
STEP_HEIGHT_RATIO = 4.0   # steps of one staircase differ in height by less than this factor
FIRST_STEP_RATIO = 2.0    # a first step this unlike the later ones is the job's first epoch, not a stair
STAIR_FLAT_SHARE = 0.2    # between stairs, drift and falls add up to less than this share of the rise
STAIR_SPLIT_SHARE = 0.5   # a stair caught mid-way rises over two readings, the smaller part at most this share of a stair
OSCILLATION_MIN_FRACTION = 0.02  # a fall counts towards a sawtooth when it exceeds this share of the level
FLOOR_RISE_SHARE = 0.3    # a sawtooth leaks when its floor rose by this share of a tooth's depth
TOOTH_RANGE_SHARE = 0.25  # a tooth read on the raw readings falls by at least this share of the range

# -- short series (series.py; docs/detection.md "Few samples") --
SHORT_MIN = 4             # fewer readings than this are too short: three points cannot tell a trend from noise
SHORT_RUN = 3             # a short job leaks when its last this many reading-to-reading changes all rose
SHORT_MAX = 12            # short rules up to this many readings: three segments of three cannot place an onset
SHORT_SIMILAR = 1.4       # a steady rise per reading varies by the sampling jitter; 40 % faster is the start-up
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

# -- job lifetimes (lifetimes.py) --
IDLE_BAND = 0.01          # readings within this share of the range above the lowest one are idle
IDLE_NOISE = 4.0          # readings within this many times the idle readings' own spread are idle
IDLE_SHARE = 0.05         # the lowest level is idle only when below this share of the jobs' level
IDLE_CONFIRM = 2          # idle readings in a row that show the idle level is the GPU without the job
STEP_RESET = 2            # a step counter that goes back by more than this restarted

# -- growth into a CUDA out-of-memory error (leaks.py) --
OOM_READINGS = 3          # an OOM this many readings after a job's last one is still that job's (logger lag)
DOUBLING = (1.6, 2.5)     # a stair this many times the one before it doubles the pool (2x, with the cap's and page rounding)
DOUBLINGS_MIN = 2         # this many doubling stairs in a row name a pool that grows by doubling
LEVEL_SHARE = 0.02        # readings within this share of a level's value are that level

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
