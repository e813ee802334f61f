"""The generic shapes' three paths (readings.extract) must give the same rows, the same skipped lines
and the same carried step marker: generic.extract_generic's polars queries, the plain-Python reading of
a few lines (small.py) and the reading once per line shape (shapes.py). Issue 45's many_files_N
(one-line logs: the queries' fixed cost twice a file) and five_million_lines (one shape, 5 M times)
are the cases they were made for."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from forensics.model import Skipped
from forensics.options import Options
from forensics.parsers.steplog import families, generic, markers, readings, shapes, small
from forensics.parsers.steplog import reader as steplog

HUGE = 1 << 62
# (small.SMALL_LINES, shapes.LINES_PER_SHAPE) that send every frame down one path
PATHS = {"queries": (-1, HUGE), "python": (HUGE, HUGE), "shapes": (-1, 0)}


@contextmanager
def _path(name: str):
    saved = small.SMALL_LINES, shapes.LINES_PER_SHAPE
    small.SMALL_LINES, shapes.LINES_PER_SHAPE = PATHS[name]
    try:
        yield
    finally:
        small.SMALL_LINES, shapes.LINES_PER_SHAPE = saved


def _extract(frame: pl.DataFrame, path: str, zone: str, series_only: bool):
    skipped, unitless, carry = Skipped(), [], {}
    with _path(path):
        out = readings.extract(frame, zone, skipped, series_only=series_only, unitless=unitless, carry=carry)
    return out, skipped.counts, skipped.examples, sorted(unitless), carry.get("line")


def _assert_paths_agree(frame: pl.DataFrame, zone: str = "UTC") -> None:
    for series_only, paths in ((False, ("python", "shapes")), (True, ("python",))):
        want = _extract(frame, "queries", zone, series_only)
        for path in paths:
            got = _extract(frame, path, zone, series_only)
            assert_frame_equal(got[0], want[0])
            assert got[1:4] == want[1:4], (path, got[1:4], want[1:4])
            assert (got[4] is None) == (want[4] is None), path
            if want[4] is not None:
                assert_frame_equal(got[4], want[4])


def _frame(lines: list[str], first: int = 1) -> pl.DataFrame:
    return pl.DataFrame({"line": range(first, first + len(lines)), "text": lines},
                        schema={"line": pl.Int64, "text": pl.String})


_ROTATE = str.maketrans("0123456789", "3456789012")


def _with_other_digits(lines: list[str]) -> list[str]:
    """The lines, then the same lines with other digits: the same shapes with other values."""
    return lines + [x.translate(_ROTATE) for x in lines]


# -- generated lines: the shapes generic.py reads, with clocks, tags, ranks, units and numbers around them

_CLOCK = st.sampled_from(["", "2026-11-30 03:04:08,405 ", "[2026-11-30 03:04:08] ", "2026-03-29T02:30:00+01:00 ",
                          "11/30/2026 03:04:08 ", "2026-10-25 02:30:00 ", "2026-13-45 99:04:08 ", "INFO: ",
                          "[2026-11-30T03:04:08Z] "])
_TAG = st.sampled_from(["", "[step 12] ", "iter 5 | ", "[GPU 1] ", "cuda:0 ", "rank 3 ", "local_rank=1 ", "epoch: 2 ",
                        "{'step': 7, ", "[epoch 1 step 2] ", "[Rank 0] ", "Iteration 99999999999999999999: ",
                        "device #2 ", "[before forward] ", "x" * 60 + " ", "x" * 61 + " ", "phase: post_forward | ",
                        "stage=3 ", "'phase': 'eval', "])
_KEY = st.sampled_from(["allocated", "reserved", "cached", "max allocated", "Max_Memory_Reserved", "occupied memory",
                        "memory_allocated (GB)", "max occupied", "MaxAllocated", "memory reserved", "'allocated'"])
_SEP = st.sampled_from([": ", "=", ":", " : ", "': ", " "])
_NUM = st.sampled_from(["12", "12.5", "1,234.5", "-3", "3.0e2", "99999999999999999999", "1e400", "007", "0.5",
                        "2.5", "1,2", "12.", "9223372036854775807"]) | st.from_regex(r"[0-9]{1,7}(\.[0-9]{1,3})?",
                                                                                         fullmatch=True)
_UNIT = st.sampled_from(["", " MB", "MiB", " GB", " KB", " B", " bytes", "/11011.5 MiB", " / 80 GB", " kb", "MBx"])
_READING = st.builds("".join, st.tuples(_KEY, _SEP, _NUM, _UNIT)) | st.sampled_from([
    "GPU: 2798.0/11011.5 MiB", "torch.cuda.memory_allocated(0) 318986240", "torch.cuda.max_memory_cached(cuda:1): 12",
    "torch.cuda.memory_reserved() 12.5x", "nvidia-smi GPU-1 memory (MB) 1494", "Free GPU ram: 12800.5",
    "free_gpu_memory (GB) = 3", "mem_alloc 1.25 GB | mem_reserved 1.69 GB", "Allocated / Reserved: 4162.88MB / 23816.00MB",
    "memory (MB) | allocated: 20.4 | reserved: 30", "total_memory: 80 GB", "occupied memory: 2.47 GB / reserved: 16.69 GB",
    "'allocated': 1, 'reserved': 2", "allocated: 1 MB, allocated: 2 MB, allocated: 3 MB"])
_JOIN = st.sampled_from([", ", " | ", "\r", " [Rank 2] ", "\r[Rank 1] ", " "])
_OTHER = st.sampled_from(["Iter 8 Time 0.575", "step 12", "iteration: 99999999999999999999", "[step 3]", "loss 0.5",
                          "| allocated: 3 MB |", "CUDA out of memory. allocated: 3 MB", "é allocated: 3 MB", "\t",
                          "2026-11-30 03:04:08 step 4", "11/30/2026 03:04:08 Iter 9", "", "step",
                          "'active.all.allocated': 3", "[default1]:[rank1]: allocated: 4 MB"])
_LINE = st.builds(lambda clock, tag, readings, join, tail: clock + tag + join.join(readings) + tail,
                  _CLOCK, _TAG, st.lists(_READING, min_size=1, max_size=3), _JOIN,
                  st.sampled_from(["", " loss 0.1", " epoch: 3", " total_memory (GB): 40"])) | _OTHER


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=10), st.sampled_from(["UTC", "Europe/Berlin"]))
@example(["[step 1] allocated: 5 MB"], "UTC")
@example(["Iter 8", "allocated: 12.5", "memory (MB) | allocated: 1,234.5"], "UTC")
@example(["rank-0 step 5 memory (MiB) | phase: post_forward | allocated: 8162 | max allocated: 9039"], "UTC")
def test_the_three_paths_read_generated_lines_alike(lines, zone):
    _assert_paths_agree(_frame(_with_other_digits(lines)), zone)


_STEP_LOG_SAMPLES = sorted(p for d in ("step-markers", "deepspeed-memory", "hf-trainer-memory", "megatron-memory",
                                       "torch-distributed", "framework-oom", "serving-engine-log")
                           for p in (Path(__file__).parents[1] / "samples" / d).glob("*") if p.is_file())


@pytest.mark.parametrize("path", _STEP_LOG_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_three_paths_read_every_step_log_sample_alike(path):
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    _assert_paths_agree(_frame(lines))


def test_the_samples_are_read_by_the_paths_they_test():
    """The sample test above compares something: most samples' lines are plain enough for Python."""
    plain = [p for p in _STEP_LOG_SAMPLES
             if small.rows(_frame(p.read_text(encoding="utf-8", errors="replace").splitlines()).head(64))]
    assert len(plain) >= 0.8 * len(_STEP_LOG_SAMPLES)


def test_lines_outside_plain_ascii_go_to_the_queries():
    lines = ["[step 1] allocated: 5 MB"] * 40
    assert small.rows(_frame(lines[:1])) is not None
    assert small.rows(_frame(["[step 1] allocated: 5 MB ✓"])) is None
    assert small.rows(_frame(lines[:1] * (small.SMALL_LINES + 1))) is None
    skipped = Skipped()
    assert shapes.extract(_frame(lines), "UTC", skipped, None, None) is not None
    assert shapes.extract(_frame([x + " \u212a" for x in lines]), "UTC", skipped, None, None) is None   # (Kelvin sign)
    # KEY_PAIR rewrites the text: its readings are no places in the line
    assert shapes.extract(_frame(["Allocated / Reserved: 4162.88MB / 23816.00MB"] * 40), "UTC", skipped, None,
                          None) is None
    # many shapes for their lines
    assert shapes.extract(_frame([f"allocated: {'1' * i} MB" for i in range(40)]), "UTC", skipped, None, None) is None


def _no_queries(monkeypatch) -> None:
    """extract_generic's polars path fails the test if it runs."""
    def fail(*_):
        raise AssertionError("extract_generic ran its queries")
    monkeypatch.setattr(generic, "_pieces", fail)


def test_a_one_line_step_log_is_sniffed_and_read_without_the_queries(tmp_path, monkeypatch):
    """many_files_N: each one-line log paid extract_generic's ~27 queries twice (sniff and read)."""
    from forensics.io.sources import Source

    log = tmp_path / "f000001.log"
    log.write_text("[step 1] allocated: 1 MB\n")
    _no_queries(monkeypatch)
    assert markers.sniff(log.read_text().splitlines()).startswith("memory readings (allocated)")
    parsed = markers.parse(Source.open(log), Options(tz="UTC"))
    assert parsed.samples["bytes"].to_list() == [1 << 20]
    assert parsed.samples["label"].to_list() == ["step 1"]


def _step_lines(n: int) -> list[str]:
    return [f"[step {i}] allocated: {i % 977} MB" for i in range(n)]


def _read(lines: list[str]):
    rd = steplog.StepLogReader(SimpleNamespace(path="train.log"), Options(tz="UTC"))
    for at in range(0, len(lines), 1 << 14):
        rd.feed(_frame(lines[at:at + (1 << 14)], at + 1))
    return rd.finish()


def test_a_long_log_of_one_shape_is_read_once_per_shape(monkeypatch):
    """five_million_lines: each line was parsed by every query; one shape is now read once."""
    lines = _step_lines(20_000)
    with _path("queries"):
        want = _read(lines)
    _no_queries(monkeypatch)
    got = _read(lines)
    assert got.samples.height == 20_000
    assert_frame_equal(got.samples, want.samples)
    assert got.skipped.counts == want.skipped.counts


@pytest.mark.hostile_heavy
def test_many_one_line_logs_are_read_without_the_queries(tmp_path, monkeypatch):
    """many_files_4000 at full size: not one of its files runs extract_generic's queries."""
    from forensics import pipeline

    for i in range(4000):
        (tmp_path / f"f{i:06d}.log").write_text(f"[step {i}] allocated: {i} MB\n")
    _no_queries(monkeypatch)
    bundle = pipeline.load([str(tmp_path)], Options(tz="UTC"))
    assert bundle.samples.height == 4000


@pytest.mark.hostile_heavy
def test_five_million_step_lines_are_read_by_shape(tmp_path):
    """five_million_lines at full size (150 MB), read as ingest reads it (streamed, in batches): by shape,
    every reading kept. Its peak with freed pages handed back at once (what the reading holds, not what
    the allocator keeps of what it freed: ~1.5 GB with the package's setting): 1.12 GB when the readings'
    order numbers were a query over the parts' chunks (a copy of every column at once) and the parts kept
    columns of nulls, 0.77 GB now (D-L5 found 3.2 GB; this test read the file whole until its source was
    sniffed first)."""
    import os
    import subprocess
    import sys

    log = tmp_path / "train.log"
    with log.open("w") as f:
        for at in range(0, 5_000_000, 100_000):
            f.write("".join(f"[step {i}] allocated: {i % 977} MB\n" for i in range(at, at + 100_000)))
    code = f"""
from pathlib import Path
from forensics import ingest
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.steplog import generic, markers
def fail(*_):
    raise AssertionError("extract_generic ran its queries")
generic._pieces = fail
src = Source.open(Path({str(log)!r}))
src.head()   # (as ingest's sniff does: the encoding it finds makes the source streamed, not read whole)
parsed, _ = ingest.read_source(src, markers.FORMAT, Options(tz="UTC"))
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) >> 10
print(parsed.samples.height, parsed.samples["bytes"].sum(), hwm)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "_RJEM_MALLOC_CONF": _FREED_AT_ONCE})
    assert out.returncode == 0, out.stderr[-500:]
    rows, total, peak_mb = map(int, out.stdout.split())
    assert rows == 5_000_000
    assert total == sum(i % 977 for i in range(5_000_000)) << 20
    assert peak_mb < 900, peak_mb


# polars' allocator setting that hands freed pages back at once (a value the user sets wins over the
# package's, forensics/__init__.py): a peak measured so is what the code holds, not what the allocator
# keeps of what it freed
_FREED_AT_ONCE = "dirty_decay_ms:0,muzzy_decay_ms:0"


def test_the_parts_keep_no_column_without_a_value():
    """five_million_lines: each part's readings waited for the end with a clock, a capacity and a GPU
    column of nulls (a third of what they held); a column no part has a value in is made once at the end.
    The same rows as one part gives."""
    from forensics.parsers.steplog import reader

    lines = pl.DataFrame({"line": range(1, 201), "text": [f"[step {i}] allocated: {i % 7} MB" for i in range(200)]})
    parts = reader.Parts("UTC")
    for at in range(0, 200, 50):
        parts.read(lines.slice(at, 50))
    assert all(not {"time", "total_bytes", "gpu"} & set(p.columns) for p in parts._samples)
    whole = reader.Parts("UTC")
    whole.read(lines)
    assert_frame_equal(parts.result().samples, whole.result().samples)


def test_the_readings_of_many_parts_are_put_together_one_column_at_a_time():
    """five_million_lines: the readings' order numbers were a query over the chunks of the parts (a big
    file's readings come in hundreds of parts), which copied every column into one chunk at once:
    +420 MB at the end of the reading. 6 parts of 65,536 step lines: the end holds less than the
    readings' size over them (36 MB over a 25 MB frame before, 6 after)."""
    import os
    import subprocess
    import sys

    code = """
import polars as pl
from forensics.parsers.steplog import reader
parts = reader.Parts("UTC")
size = reader.PART_LINES
for at in range(0, 6 * size, size):
    parts.read(pl.DataFrame({"line": range(at + 1, at + size + 1),
                             "text": [f"[step {i}] allocated: {i % 977} MB" for i in range(at, at + size)]}))
rss = lambda key: int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1]) >> 10
base = rss("VmRSS")
open("/proc/self/clear_refs", "w").write("5")
s = parts.result().samples
grew = rss("VmHWM") - base
print(s.height, s["seq"].equals(pl.int_range(s.height, eager=True), check_dtypes=False, check_names=False), grew,
      s.estimated_size() >> 20)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "_RJEM_MALLOC_CONF": _FREED_AT_ONCE})
    assert out.returncode == 0, out.stderr[-500:]
    rows, in_order, grew_mb, frame_mb = out.stdout.split()
    assert (rows, in_order) == (str(6 * 65536), "True")
    assert int(grew_mb) < int(frame_mb) * 3 // 4, (grew_mb, frame_mb)


def test_a_thousands_separator_in_a_shape_is_read_as_the_queries_read_it():
    lines = [f"allocated: {i},{i:03d}.5 MB" for i in range(1, 40)] + ["allocated: 1,2 MB", "allocated: 1,2345 MB"]
    _assert_paths_agree(_frame(lines))


_FAMILY_SAMPLES = [p for p in _STEP_LOG_SAMPLES if p.parent.name in ("deepspeed-memory", "hf-trainer-memory",
                                                                    "megatron-memory")]


@pytest.mark.parametrize("path", _FAMILY_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_big_part_skips_the_family_passes_whose_literals_it_lacks_as_a_small_one_does(path, monkeypatch):
    """A part past small_text's size is searched for the families' literals (families.literals_held);
    it reads as it would with every pass run."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    lines = lines * (1 + generic.SMALL_TEXT_BYTES // max(1, sum(len(x) + 1 for x in lines)))
    got = _read(lines)
    every = "\n".join([*families._HELD, " = "])
    monkeypatch.setattr(families, "literals_held", lambda frame: every)
    want = _read(lines)
    assert_frame_equal(got.samples, want.samples)
    assert_frame_equal(got.events, want.events)
    assert got.skipped.counts == want.skipped.counts


_BACKTRACKING = ["nvidia-smi GPU-1 memory (MB)", "mem_alloc", "torch.cuda.memory_allocated(0)", "'step'",
                 "[step 1] rank", "allocated / reserved: 1", "device", "Iter"]


@pytest.mark.parametrize("lead", _BACKTRACKING)
def test_a_long_line_of_blanks_goes_to_the_automata(lead):
    """Python's `re` backtracks where polars' regex engine does not: `[ \\t]*[:=]?[ \\t]*` took time
    quadratic in the blanks after these leads (a 200,000-character line: minutes). Long lines are
    read by the queries (small.SQUARED_CHARS); the alarm is a hang guard, not a speed measurement."""
    import signal

    def hung(*_):
        raise TimeoutError("a pattern backtracked past the hang guard")

    line = lead + " " * 200_000
    prev = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        for lines in ([line], [line] * 40 + ["[step 1] allocated: 1 MB"] * 40):
            frame = _frame(lines)
            assert small.rows(frame) is None
            readings.extract(frame, "UTC", Skipped(), carry={})
            readings.extract(frame, "UTC", Skipped(), series_only=True)
            markers.sniff(lines)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, prev)


# -- a sniffed head's series, read once per shape (readings.series_by_shape)

def _series_rows(frame: pl.DataFrame) -> list[tuple[int, str]]:
    got = generic.extract_generic(frame, "UTC", Skipped(), True, None, None)
    return list(got.select("line", "series").iter_rows()) if got.height else []


def _by_shape_rows(lines: list[str]) -> list[tuple[int, str]] | None:
    saved, readings.HEAD_SHAPES = readings.HEAD_SHAPES, HUGE   # (any count of shapes: this path whatever its cost)
    try:
        got = readings.series_by_shape(list(enumerate(lines, 1)))
    finally:
        readings.HEAD_SHAPES = saved
    return None if got is None else list(got.iter_rows())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=10))
@example(["allocated: -0 MB", "allocated: -3 MB", "allocated: 1e400 MB", "allocated: 99999999999999999999 GB"])
def test_a_heads_series_by_shape_are_the_queries(lines):
    """The sniff's series by shape are extract_generic's (series_only) rows, values that fail its checks
    left out alike (-0 is not negative, 1e400 is out of range: the same shape as kept values)."""
    lines = [x for x in _with_other_digits(lines) if small.PLAIN.fullmatch(x)]
    got = _by_shape_rows(lines)
    if got is not None:   # (a shape shapes.py does not model goes to the queries)
        assert got == _series_rows(_frame(lines))


@pytest.mark.parametrize("path", _STEP_LOG_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_step_log_samples_head_series_by_shape_are_the_queries(path):
    head = path.read_text(encoding="utf-8", errors="replace").splitlines()[:200]
    if small.rows(list(enumerate(head, 1)), most=len(head)) is None:
        pytest.skip("not plain lines: the sniff reads them by the queries")
    got = _by_shape_rows(head)
    if got is not None:
        assert got == _series_rows(_frame(head))


def test_a_long_step_log_is_sniffed_without_the_queries(monkeypatch):
    """A step log's 200-line head of a few shapes (past small.py's lines): its series were extract_generic's
    ~30 queries, each shape is now read once in Python; one query (whether a line holds a reading) is left."""
    from conftest import queries_run

    head = [f"2026-11-01 00:00:{i % 60:02d},{i:03d} INFO [step {i}] allocated: {20000 + i}.25 MB, cached: 4096 MB"
            for i in range(200)]
    _no_queries(monkeypatch)
    reasons = []
    assert queries_run(lambda: reasons.append(markers.sniff(head))) == 1
    assert reasons == ["memory readings (allocated, reserved) in a free-text log, first on line 1"]
