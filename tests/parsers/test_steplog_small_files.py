"""A small step log is read without polars queries (issue 45's many_files_N: a job folder of thousands
of one-line logs paid ~30 queries' fixed cost a file): the reader keeps a batch of a few plain lines in
Python (StepLogReader._feed_few) and reads a small part's general-reader lines, columns and order
numbers without a query (Parts.read, Parts.result). Both paths must give the same Parsed, whatever the
lines and however they are cut into batches and parts; and a one-line log must stay at a few queries."""
from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REALWORLD, queries_run
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.steplog import markers, shapes, small
from forensics.parsers.steplog import reader as reader_mod

from test_steplog_reader import assert_same_parsed

OPTS = Options(tz="Europe/Berlin")

# Lines of every kind the reader keeps or drops: step markers (with a clock, a rank prefix, held back at
# a batch's end), readings of the generic shapes (with and without a unit), DeepSpeed lines and their
# labels, an HF Trainer block, Megatron's clock, the general reader's free text and a table (its header
# and rows), a progress bar's refreshes, lines outside plain ASCII (the queries read those), noise.
_POOL = [
    "[step {i}] allocated: {m} MB",
    "step {i}",
    "Step {i} gpu mem report",
    "2026-10-01 10:00:{s:02d},000 INFO train: global_step {i}",
    "[rank1]: step {i}",
    "[rank1]: allocated: {m} MB",
    "10/01/2026 10:00:{s:02d} Step={i}",
    "allocated: {m}",
    "reserved: -{m} MB",
    "2026-10-01 10:00:{s:02d},000 INFO train: step={i} gpu_mem_alloc={m}.5GB",
    "see_memory_usage] after forward",
    "[2026-10-01 10:00:{s:02d},000] [INFO] [utils.py:782:see_memory_usage] MA {m}.1 GB         Max_MA 4.2 GB"
    "         CA 5.3 GB         Max_CA 6 GB",
    "***** train metrics *****",
    "  train_mem_gpu_alloc_delta =      {m}MB",
    "  epoch                    =        3.0",
    " iteration      {i}/    1000 | consumed samples: 64 | elapsed time per iteration (ms): 575.2",
    "[Rank 0] (after {i} iterations) memory (MB) | allocated: {m}.4 | max allocated: {m}9.1 | reserved: 2000",
    "peak GPU memory {m}.5 GiB at step {i}",
    "mem used {m} MiB, mem total 81920 MiB",
    "GPU  used_mb  total_mb",
    "0  {m}  81920",
    "Epoch 1: 10%|#  | {i}/1000 [00:10<01:30, GPU: {m}.0/11011.5 MiB]\rEpoch 1: 11%|#  | {i}/1000 [GPU: {m}.5/11011.5 MiB]",
    "allocated: {m} MB caf\u00e9",
    # Ray's prefixes (a worker's pid, verl's rank block before the clock, the deduplication mark), and a line the
    # general reader takes from the generic shapes (its `used/total` pair: test_ray_prefixes.py)
    "(WorkerDict pid=39{i}, ip=10.0.0.1) [Rank 0 | Local Rank 0] 2026-10-01 10:00:{s:02d},000 INFO => After rollout,"
    " memory allocated (GB): {m}.1, memory reserved (GB): 9.5, device memory used/total (GB): {m}.2/80.0",
    "(TaskRunner pid=87) step:{i} - perf/max_memory_allocated_gb:{m}.1 [repeated 2x across cluster]",
    "noise line {i} loss=0.5",
    "",
]


@contextmanager
def _few_lines(most: int, per_shape: int | None = None):
    """Frames of up to `most` lines read in Python (small.SMALL_LINES), the others by polars."""
    saved = small.SMALL_LINES, shapes.LINES_PER_SHAPE
    small.SMALL_LINES = most
    shapes.LINES_PER_SHAPE = saved[1] if per_shape is None else per_shape
    try:
        yield
    finally:
        small.SMALL_LINES, shapes.LINES_PER_SHAPE = saved


def _queries():
    """Every frame read by polars queries, none in Python (small.rows never takes one)."""
    return _few_lines(-1, 1 << 62)


def _batches(frame: pl.DataFrame, sizes: list[int]):
    """`frame` cut into batches of the sizes, in turn."""
    at, i = 0, 0
    while at < frame.height:
        yield frame.slice(at, sizes[i % len(sizes)])
        at, i = at + sizes[i % len(sizes)], i + 1


def _read(frame: pl.DataFrame, sizes: list[int], fmt=markers.FORMAT):
    reader = fmt.reader(SimpleNamespace(path="train.log"), OPTS)
    for batch in _batches(frame, sizes):
        reader.feed(batch)
    return reader.finish()


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines}, schema={"line": pl.Int64, "text": pl.String})


def _kept(frame: pl.DataFrame, sizes: list[int]) -> list[tuple]:
    """What the reader holds after each batch: the lines kept, the step marker held back, the table seen."""
    reader = markers.FORMAT.reader(SimpleNamespace(path="train.log"), OPTS)
    held = []
    for batch in _batches(frame, sizes):
        reader.feed(batch)
        kept = [k for k in reader._kept if k.height]
        held.append((reader_mod._union(kept).rows() if kept else [],
                     None if reader._last_marker is None else reader._last_marker.rows(), reader._table))
    return held


def _lines(data) -> tuple[pl.DataFrame, list[int], int]:
    """Lines of the pool, the sizes of the batches they are fed in, and how many lines a batch read in
    Python may have (3: the batches of more go to the queries, the reader's state passes between both)."""
    picks = data.draw(st.lists(st.sampled_from(range(len(_POOL))), min_size=1, max_size=30), label="lines")
    sizes = data.draw(st.lists(st.sampled_from([1, 2, 3, 5, 7, 30]), min_size=1, max_size=4), label="batches")
    most = data.draw(st.sampled_from([small.SMALL_LINES, 3]), label="python_lines")
    return _frame([_POOL[p].format(i=i, m=100 + i, s=i % 60) for i, p in enumerate(picks)]), sizes, most


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_python_path_keeps_the_lines_the_queries_keep(data):
    """Batch by batch, the same lines kept (each with the same `generic`), the same step marker held
    back for the next batch and the same table state: a line kept or dropped that the result would not
    show (a marker before another marker) is still compared."""
    frame, sizes, most = _lines(data)
    with _few_lines(most):
        got = _kept(frame, sizes)
    with _queries():
        assert got == _kept(frame, sizes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_python_path_reads_what_the_queries_read(data):
    frame, sizes, most = _lines(data)
    part = data.draw(st.sampled_from([1, 3, reader_mod.PART_LINES]), label="part")
    saved = reader_mod.PART_LINES
    reader_mod.PART_LINES = part
    try:
        with _few_lines(most):
            got = _read(frame, sizes)
        with _queries():
            want = _read(frame, sizes)
    finally:
        reader_mod.PART_LINES = saved
    assert_same_parsed(got, want)


@pytest.mark.parametrize("family", ["step-markers", "deepspeed-memory", "hf-trainer-memory", "megatron-memory"])
def test_every_step_log_sample_in_small_batches_reads_as_the_queries_read_it(family):
    """Each sample cut into batches of a few lines (each kept in Python) and read whole (its parts read
    in Python where they are small): what the queries give."""
    from forensics import parsers

    for path in sorted((REALWORLD / family).iterdir()):
        src = Source.open(path)
        fmt, _ = parsers.claim(src.head())
        frame = src.frame()
        for size in (5, max(frame.height, 1)):
            got = _read(frame, [size], fmt)
            with _queries():
                want = _read(frame, [size], fmt)
            assert_same_parsed(got, want)


@pytest.mark.parametrize("line, most", [
    ("[step 7] allocated: 7 MB", 2), ("step 7 | loss 2.5", 2), ("noise line", 2), ("allocated: 7 MB, reserved: 9 MB", 2),
    # a clock is read by polars' stamp parser and DST rule (generic.with_line_time, drop_unreadable_clocks)
    ("2026-10-01 10:00:00,000 INFO [step 7] allocated: 7.5 GB, cached: 9 GB", 16)])
def test_a_one_line_step_log_runs_at_most_a_few_queries(line, most):
    """many_files_N's logs: 30 queries a file before, none now; a clocked line 13 with the zone
    Europe/Berlin (46 before)."""
    frame = _frame([line])
    _read(frame, [1])   # (imports and first-use caches out of the count)
    assert queries_run(lambda: _read(frame, [1])) <= most
