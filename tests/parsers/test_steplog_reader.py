"""The step-log reader (forensics/parsers/steplog/reader.py): lines fed in batches of 1, 7 or all at once
give the same Parsed, the same as extracting from every line, for each of the four step-log formats."""
from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from conftest import REALWORLD
from forensics import parsers
from forensics.errors import InputError
from forensics.io import lines as io_lines
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.scanners import Scanners
from forensics.parsers.steplog import deepspeed, generic, hf_trainer, markers, megatron
from forensics.parsers.steplog import reader as reader_mod
from forensics.parsers.steplog.reader import extract_all

ROOT = Path(__file__).resolve().parents[2]
MODULES = {m.NAME: m for m in (markers, deepspeed, megatron, hf_trainer)}
OPTS = Options(tz="Europe/Berlin")


def _samples_by_format() -> dict[str, list[Path]]:
    files = [f for d in (REALWORLD, ROOT / "sample_logs", ROOT / "tests" / "corpus") for f in sorted(d.rglob("*"))
             if f.is_file() and f.suffix not in (".md", ".json")]
    out: dict[str, list[Path]] = {name: [] for name in MODULES}
    for f in files:
        try:
            fmt, _ = parsers.claim(Source.open(f).head())
        except InputError:
            continue
        if fmt is not None and fmt.name in out:
            out[fmt.name].append(f)
    return out


SAMPLES = _samples_by_format()


def _read(fmt, src, frame: pl.DataFrame, size: int):
    reader = fmt.reader(src, OPTS)
    for at in range(0, frame.height, size):
        reader.feed(frame.slice(at, size))
    return reader.finish()


def assert_same_parsed(got, want) -> None:
    assert_frame_equal(got.samples, want.samples)
    assert_frame_equal(got.events, want.events)
    assert (got.skipped.counts, got.skipped.examples, got.notes, got.meta, got.clock) == \
        (want.skipped.counts, want.skipped.examples, want.notes, want.meta, want.clock)


def test_every_format_has_samples():
    for name, files in SAMPLES.items():
        assert files, name


@pytest.mark.parametrize("name", sorted(MODULES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batches_of_1_7_or_all_lines_give_the_same_parsed(name, data):
    """An excerpt of one of the format's samples (its own line numbers), read in batches of 1, 7 and
    all lines: one result, and the one that extracting from every line of the excerpt gives."""
    module = MODULES[name]
    path = data.draw(st.sampled_from(SAMPLES[name]), label="sample")
    src = Source.open(path)
    frame = src.frame()
    start = data.draw(st.integers(0, max(frame.height - 1, 0)), label="start")
    frame = frame.slice(start, data.draw(st.integers(1, frame.height), label="length"))
    whole = _read(module.FORMAT, src, frame, max(frame.height, 1))
    for size in (1, 7):
        assert_same_parsed(_read(module.FORMAT, src, frame, size), whole)
    every_line = extract_all(frame, OPTS.tz_for(src.path))
    every_line.notes.extend(module.notes(every_line))
    assert_same_parsed(whole, every_line)


# A big step log of the shapes people print (its own step markers, readings, lines nobody reads, the
# other shapes and lines another parser reads), with every recorded family's lines in the middle.
_SHAPES = [
    "2026-10-01 10:00:00,123 INFO train: step {i} | loss 2.31 | lr 3.0e-04",
    "2026-10-01 10:00:00,123 INFO train: [step {i}] allocated: {m}.5 MB, cached: {m}0 MB",
    "Iter {i} Time 0.575",
    "global_step {i}",
    "  STEP: {i}",
    "[2026-10-01 10:00:01] step {i}",
    "10/01/2026 10:00:02 - iteration {i}",
    "10/01/2026 10:00:02 Step={i}",
    "memory (MB) | allocated: {m}.4 | max allocated: {m}9.1 | reserved: {m}00 | max reserved: {m}00",
    "Epoch 1: 10%|#  | {i}/1000 [00:10<01:30, GPU: 2798.0/11011.5 MiB]",
    "torch.cuda.memory_allocated(0) 3189{i}",
    "nvidia-smi GPU-1 memory (MB) 1494",
    "occupied memory: 2.47 GB / reserved: 16.69 GB",
    "Free GPU ram: 12800.5",
    "{{'loss': 1.2, 'step': {i}, 'gpu_mem_allocated_GB': 3.1}}",
    "| Allocated memory |  1024 MB | 2048 MB |",
    "step {i} | data 0.1s | fwd 0.2s",
    "Step {i}/100 pages reserved: 5",
    "MEM_ALLOC {m} MB",
]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_big_log_read_in_batches_of_its_bytes(tmp_path, seed):
    """The batches a driver gives (io.lines.cleaned_batches of a few KB): what parse gives."""
    rng = random.Random(seed)
    lines = [rng.choice(_SHAPES).format(i=i, m=rng.randint(100, 999)) for i in range(3000)]
    for f in sorted(REALWORLD.rglob("stepmem_*.txt")) + sorted(REALWORLD.rglob("deepspeed_*.txt")):
        at = rng.randint(100, len(lines))
        lines[at:at] = f.read_text(errors="replace").splitlines()[:200]
    path = tmp_path / "train.log"
    path.write_text("2026-10-01 10:00:00,000 INFO train: [step 0] allocated: 10 MB, cached: 20 MB\n"
                    + "\n".join(lines) + "\n")
    src = Source.open(path)
    module, _ = parsers.claim(src.head())
    want = module.parse(src, OPTS)
    assert want.samples.height > 1000 and want.events.height > 0
    src = Source.open(path)
    reader = module.reader(src, OPTS)
    n = 0
    for batch in io_lines.cleaned_batches(src, 4096):
        reader.feed(batch)
        n += 1
    assert n > 20
    assert_same_parsed(reader.finish(), want)


@pytest.mark.parametrize("batch_bytes", [4096, 80_000])
def test_a_big_log_read_through_raw_batches(tmp_path, batch_bytes):
    """The driver's path for a big file (raw_batches, feed_raw): one search of every line for the
    reader and the free-text scanners together, the scanners fed only what it leaves. The reader gives
    what parse gives, and the scanners (OOMs, a memory summary's `|` rows, a compute-sanitizer report in
    the middle of the log) find what they find when fed every line. (Batches of 80 kB are big ones,
    whose found lines are copied out of the batch: _looked.)"""
    rng = random.Random(3)
    lines = [rng.choice(_SHAPES).format(i=i, m=rng.randint(100, 999)) for i in range(3000)]
    extra = [*sorted((ROOT / "tests" / "samples" / "pytorch-oom").glob("*"))[:2],
             *sorted((ROOT / "tests" / "samples" / "pytorch-memory-summary").glob("*"))[:1],
             *sorted((ROOT / "tests" / "samples" / "framework-oom").glob("*"))[:3],
             # lines with no memory word (`=========     Host Frame: …`): found by the scanners' part of the search
             *sorted((ROOT / "tests" / "samples" / "compute-sanitizer").glob("*"))[:1]]
    for f in extra + sorted(REALWORLD.rglob("stepmem_*.txt"))[:4]:
        at = rng.randint(100, len(lines))
        lines[at:at] = f.read_text(errors="replace").splitlines()[1:200]
    path = tmp_path / "train.log"
    path.write_text("2026-10-01 10:00:00,000 INFO train: [step 0] allocated: 10 MB, cached: 20 MB\n"
                    + "\n".join(lines) + "\n")
    src = Source.open(path)
    fmt, _ = parsers.claim(src.head())
    want = fmt.parse(src, OPTS)
    every = Scanners({fmt.name, *fmt.covers})
    every.feed(Source.open(path).frame())
    want_found = every.finish(Source.open(path), OPTS)
    assert len(want_found) >= 2

    src = Source.open(path)
    reader, scanners = fmt.reader(src, OPTS), Scanners({fmt.name, *fmt.covers})
    n = 0
    for item in reader.raw_batches(scanners, batch_bytes):
        reader.feed_raw(item, scanners)
        n += 1
    assert n > (20 if batch_bytes == 4096 else 1) and src.streamed_lines == len(lines) + 1
    assert_same_parsed(reader.finish(), want)
    found = scanners.finish(src, OPTS)
    assert [p.records for p in found] == [p.records for p in want_found]
    for got, exp in zip(found, want_found):
        assert_same_parsed(got, exp)


def test_the_lines_a_big_batchs_search_finds_are_copied_out(monkeypatch):
    """_looked: the lines the search finds are the batch's rows it matches, and of a big batch (more text than
    generic.SMALL_TEXT_BYTES) they are copied out of its buffers (frames.owned) when they are few, where they
    lie one in tens over the batch and every pass over them after the search would wait on memory for each;
    a small batch's are not (a copy is a query, whose fixed cost a small file pays per batch), nor those of a
    batch whose every line is found (next to each other already: the copy would only add)."""
    copied = []
    monkeypatch.setattr(reader_mod, "owned", lambda df: copied.append(df.height) or df)
    i = pl.int_range(20_000, dtype=pl.Int64)
    batch = pl.select((i + 1).alias("line"), pl.when(i % 31 == 5).then(
        pl.lit("2026-10-01 00:00:00,000 INFO train: step=7 loss=2.4 gpu_mem_alloc=20.0GB gpu_mem_reserved=24.0GB"))
        .otherwise(pl.concat_str(pl.lit("2026-10-01 00:00:00,000 INFO train: step 7 | loss 2.4 | lr 3e-4 | "),
                                 i.cast(pl.String))).alias("text"))
    assert batch["text"].estimated_size() > generic.SMALL_TEXT_BYTES
    want = batch.filter(pl.col("text").str.contains(reader_mod.LOOK))
    assert want.height == 645
    assert_frame_equal(reader_mod._looked(batch, reader_mod.LOOK), want)
    assert copied == [645]
    small = batch.head(200)
    assert_frame_equal(reader_mod._looked(small, reader_mod.LOOK), small.filter(pl.col("text").str.contains(reader_mod.LOOK)))
    dense = pl.concat([batch.filter(pl.col("text").str.contains("gpu_mem", literal=True))] * 2)
    assert dense["text"].estimated_size() > generic.SMALL_TEXT_BYTES
    assert_frame_equal(reader_mod._looked(dense, reader_mod.LOOK), dense)
    assert copied == [645]


def test_a_streamed_step_log_reads_as_one_read_whole(tmp_path, monkeypatch):
    """Through the driver (ingest.parse_one): a step log streamed in many batches gives the readings and
    the free-text scanners' findings that the same file read whole does."""
    from forensics import ingest

    text = "".join(f"2026-10-01 10:00:{i % 60:02d},000 INFO train: step={i} gpu_mem_alloc={1 + i / 100:.2f}GB\n"
                   f"2026-10-01 10:00:{i % 60:02d},500 INFO train: step {i} | loss 0.5\n" for i in range(2000))
    path = tmp_path / "train.log"
    path.write_text(text + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 1 << 62)
    want = ingest.parse_one(Source.open(path, str(path)), OPTS)[1]
    monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(io_lines, "BATCH_BYTES", 8192)
    fed = []
    feed_raw = reader_mod.StepLogReader.feed_raw
    monkeypatch.setattr(reader_mod.StepLogReader, "feed_raw",
                        lambda self, item, scanners: (fed.append(item.frame.height), feed_raw(self, item, scanners)))
    got = ingest.parse_one(Source.open(path, str(path)), OPTS)[1]
    assert len(fed) > 10 and sum(fed) == 4001
    assert len(got) == len(want) >= 2 and want[0].samples.height == 2000
    for g, w in zip(got, want):
        assert_frame_equal(g.samples, w.samples)
        assert_frame_equal(g.events, w.events)


def _read_in_parts(monkeypatch, fmt, src, frame: pl.DataFrame, part: int, size: int):
    """`_read` with the kept lines read in parts of `part` lines; also how many parts were read."""
    parts = []
    monkeypatch.setattr(reader_mod, "PART_LINES", part)
    read = reader_mod.Parts.read
    monkeypatch.setattr(reader_mod.Parts, "read", lambda self, f: (parts.append(f.height), read(self, f)))
    got = _read(fmt, src, frame, size)
    monkeypatch.undo()
    return got, len(parts)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_sample_read_in_parts_gives_what_one_part_gives(monkeypatch, name):
    """Kept lines read a few at a time (what a big file's are, PART_LINES at a time): the DeepSpeed
    labels, step markers, general forms, tables and year-less clocks that span the parts carry over."""
    parts = 0
    for path in SAMPLES[name]:
        src = Source.open(path)
        frame = src.frame()
        got, n = _read_in_parts(monkeypatch, MODULES[name].FORMAT, src, frame, 2, 3)
        assert_same_parsed(got, _read(MODULES[name].FORMAT, src, frame, max(frame.height, 1)))
        parts += n
    assert parts > len(SAMPLES[name])   # (some file was cut: an HF Trainer block is never cut)


def test_what_spans_the_parts_of_a_general_log(monkeypatch, tmp_path):
    """A table's header before the cut and its rows after it, a form's two lines on either side of a
    cut (it recurs: read) and one in the whole file (a one-off: skipped), year-less clocks whose walk
    crosses New Year over several parts."""
    rows = [f"12-31 23:5{i % 10}:00 monitor: used={1000 + i} MiB total=81559 MiB" for i in range(20)]
    rows += [f"01-01 00:0{i % 10}:00 monitor: used={2000 + i} MiB total=81559 MiB" for i in range(20)]
    rows += ["done loading, gpu_mem_used=7.5GB"]
    rows += ["      Epoch    GPU_mem   box_loss   cls_loss  Instances       Size"]
    rows += [f"      {e}/100      {3 + e / 10:.2f}G      1.234      2.345         42        640" for e in range(1, 30)]
    rows += ["note: peak mem 4.5 GB", "noise"] * 3
    path = tmp_path / "train.log"
    path.write_text("\n".join(rows) + "\n")
    src = Source.open(path)
    module, _ = parsers.claim(src.head())
    frame = src.frame()
    whole = _read(module, src, frame, frame.height)
    assert whole.samples.group_by("series").len().sort("series").rows() == \
        [("max_allocated", 3), ("memory.used", 40), ("reserved", 29)]
    assert whole.skipped.total == 1   # the one-off line
    assert whole.samples["time"].dt.convert_time_zone("Europe/Berlin").dt.year().drop_nulls().n_unique() == 2
    got, n = _read_in_parts(monkeypatch, module, src, frame, 4, 5)
    assert n > 10
    assert_same_parsed(got, whole)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_small_text_searched_in_python_gives_what_polars_gives(monkeypatch, name):
    """The literal tests run in Python on a small text (generic.small_text: the family passes, clock
    and word tests it skips) leave the result as the queries give it: every sample read with that path
    on, and with it off (every text taken for a big one)."""
    for path in SAMPLES[name]:
        src = Source.open(path)
        frame = src.frame()
        small = _read(MODULES[name].FORMAT, src, frame, max(frame.height, 1))
        with monkeypatch.context() as m:
            m.setattr(generic, "SMALL_TEXT_BYTES", -1)
            assert generic.small_text(frame["text"]) is None
            assert_same_parsed(_read(MODULES[name].FORMAT, src, frame, max(frame.height, 1)), small)


def test_a_step_marker_the_general_reader_also_keeps_still_gives_its_step(monkeypatch, tmp_path):
    """A step marker with a memory word (`Step 3 gpu report`) is kept twice, for the generic shapes and
    for the general reader; held back at a batch's end, it comes again in the next batch. The generic
    shapes (Parts.read) must still see it: the readings after it take its step, in batches of any size
    and parts of any size, as when every line is read at once."""
    lines = []
    for i in range(1, 13):
        lines += [f"Step {i} gpu mem report", f"allocated: {100 + i} MB", "noise line"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    src = Source.open(path)
    module, _ = parsers.claim(src.head())
    frame = src.frame()
    every_line = extract_all(frame, OPTS.tz_for(src.path))
    assert every_line.samples["step"].to_list() == list(range(1, 13))
    whole = _read(module, src, frame, frame.height)
    assert_frame_equal(whole.samples, every_line.samples)
    for size in (1, 2, 4):
        assert_same_parsed(_read(module, src, frame, size), whole)
        got, n = _read_in_parts(monkeypatch, module, src, frame, 2, size)
        assert n > 3
        assert_same_parsed(got, whole)


# Lines that the generic shapes, the general reader, both or neither keep (markers with and without a
# memory word, readings of either reader, a DeepSpeed line and its label, noise)
_MIXED = [
    "Step {i} gpu mem report",
    "step {i}",
    "allocated: {m} MB",
    "2026-10-01 10:00:{s:02d},000 INFO train: step={i} gpu_mem_alloc={m}.5GB",
    "2026-10-01 10:00:{s:02d},000 INFO train: step={i} loss=0.5",
    "[rank1]: Step {i} free memory check",
    "[rank1]: allocated: {m} MB",
    "see_memory_usage] after forward",
    "[2026-10-01 10:00:{s:02d},000] [INFO] [utils.py:782:see_memory_usage] MA {m}.1 GB         Max_MA 4.2 GB         CA 5.3 GB         Max_CA 6 GB",
    "noise line {i}",
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_lines_kept_for_either_reader_read_as_every_line_is(monkeypatch, tmp_path, data):
    """A log mixing lines that the generic shapes, the general reader, both or neither keep, fed in
    batches of any size and read in parts of any size: what extracting from every line gives."""
    picks = data.draw(st.lists(st.sampled_from(range(len(_MIXED))), min_size=1, max_size=40), label="lines")
    lines = [_MIXED[p].format(i=i, m=100 + i, s=i % 60) for i, p in enumerate(picks)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    src = Source.open(path)
    frame = src.frame()
    every_line = extract_all(frame, OPTS.tz_for(src.path))
    every_line.notes.extend(markers.notes(every_line))
    fmt = markers.FORMAT
    size = data.draw(st.integers(1, 8), label="batch")
    part = data.draw(st.integers(1, 8), label="part")
    assert_same_parsed(_read(fmt, src, frame, size), every_line)
    got, _ = _read_in_parts(monkeypatch, fmt, src, frame, part, size)
    assert_same_parsed(got, every_line)
