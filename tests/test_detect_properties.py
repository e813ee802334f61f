"""Detection never crashes and stays sane, whatever the shape of the memory series (issue #28, item 9).

Series of every shape (evaluation/shapes.py: constant, quantized, two values, single points, 0..9
samples, huge and negative byte counts, steps, sawtooths, ramps that drop to zero, several jobs,
gaps, duplicate or unsorted times, step resets, null times, total_bytes below bytes, many GPUs and
pids) go through `detect.series.analyze_xy`, through `detect.analyze` on a Bundle, and through the
report (HTML, Markdown, JSON summary). The checks are in evaluation/shapes.py, shared with
`bench/fuzz.py --detect N`, which runs the same properties at high example counts.

Nothing here is marked xfail: a failure is a bug of the detector (see the @example cases).
"""
from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evaluation import shapes as ds
from evaluation.shapes import GiB, MiB, BundleCase, SeriesCase

SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.large_base_example])

# The known crash: a noise-free step log on exact MiB multiples, a sawtooth whose floor rises exactly
# linearly: the floor's residual and its point noise are both 0 -> ZeroDivisionError in
# detect.patterns._sawtooth_leak.
SAWTOOTH_NO_NOISE = SeriesCase("sawtooth", 60, 500 * MiB, {"period": 12, "k": 5, "rise": 4}, "regular", 1.0)


@settings(max_examples=150, **SETTINGS)
@given(ds.series_cases())
@example(SAWTOOTH_NO_NOISE)
@example(SeriesCase("constant", 0, 0, {}, "regular", 1.0))
@example(SeriesCase("constant", 9, 8 * GiB, {}, "regular", 1.0))
@example(SeriesCase("two_values", 600, 8 * GiB, {"k": 1, "pick": [0, 1, 1]}, "regular", 1.0))
@example(SeriesCase("huge_ramp", 120, ds.INT64_MAX - (1 << 40), {"k": 40}, "regular", 1.0))
@example(SeriesCase("ramp_drop", 120, 8 * GiB, {"a": 10, "b": 100, "k": 64}, "duplicates", 1.0))
def test_analyze_xy_is_sane(case):
    ds.check_series(case)


@settings(max_examples=80, **SETTINGS)
@given(ds.series_cases(shapes=("constant", "decreasing", "single", "two_values", "negative", "raw")))
@example(SeriesCase("decreasing", 300, 80 * GiB, {"drops": [0, 0, 1]}, "gaps", 5.0))
def test_never_increasing_is_never_a_leak(case):
    x, y = case.arrays()
    if not ds.never_up(y):
        return       # the shape is not monotone with these numbers (raw, two values): other tests cover it
    assert not ds.check_series(case)
    assert not ds.check_bundle(ds.bundle_of(case), render=False)


@settings(max_examples=60, **SETTINGS)
@given(ds.series_cases())
@example(SAWTOOTH_NO_NOISE)
def test_one_series_through_analyze_and_the_report(case):
    """A series as nvidia-smi memory.used (timed) and as a step log's `allocated` (untimed)."""
    ds.check_one(case)


@settings(max_examples=100, **SETTINGS)
@given(ds.bundle_cases())
@example(ds.bundle_of(SAWTOOTH_NO_NOISE, "allocated", timed=True, steps="increasing"))
@example(ds.many_gpus_case())
@example(BundleCase([SeriesCase("ramp_drop", 40, GiB, {"a": 2, "b": 30, "k": 64}, "step_reset", 1.0)],
                    ["memory.used"], ["0"], [None], timed=False, steps="reset"))
@example(BundleCase([SeriesCase("huge_ramp", 40, 10 ** 15, {"k": 3}, "regular", 1.0)],
                    ["memory.used"], ["0"], [None], timed=True, total_small=True, events=["gpu_oom"]))
# found by `bench/fuzz.py --detect`: readings just below zero (-1 MiB and -1 MiB - 1 byte, alternating)
# with a CUDA OOM event -> ZeroDivisionError in report._svg_model (a zero y span on the chart)
@example(BundleCase([SeriesCase("negative", 40, MiB, {"k": 1, "period": 2, "quantum": 1}, "regular", 1.0)],
                    ["memory.used"], ["0"], [None], timed=True, events=["gpu_oom"]))
@example(BundleCase([SeriesCase("jobs", 120, GiB, {"jobs": [(0.0, 0.3, 5), (0.4, 0.7, 0), (0.8, 1.0, 9)]},
                                "jitter", 1.0)], ["process.used"], ["0"], [100], null_time_share=0.05))
def test_bundles_are_sane(case):
    ds.check_bundle(case)


@settings(max_examples=60, **SETTINGS)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=12), st.integers(8, 200), st.sampled_from(ds.X_KINDS))
def test_quantized_readings(ks, n, x_kind):
    """Readings on a 1 MiB lattice (nvidia-smi): few distinct values, no noise at all."""
    ds.check_one(SeriesCase("quantized", n, 8 * GiB, {"ks": ks}, x_kind, 1.0))
