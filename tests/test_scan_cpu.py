"""A scan job's fixed costs outside the step-log reader (issue 43 item 4): each cut gives what the code
before it gave, and the work it removed stays removed."""
from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import queries_run
from forensics import pipeline
from forensics import report as rep
from forensics import scan as sc
from forensics.detect import measure
from forensics.model import SAMPLES_SCHEMA, conform
from forensics.options import Options
from forensics.parsers.nvsmi import csvlog

ROOT = Path(__file__).resolve().parent
CSV_SAMPLES = sorted((ROOT / "samples" / "nvidia-smi-csv").glob("*.txt"))


def _counted_label_plans(monkeypatch) -> list:
    calls: list = []
    real = measure._label_plan

    def counted(samples):
        calls.append(samples.height)
        return real(samples)

    monkeypatch.setattr(measure, "_label_plan", counted)
    return calls


def _labelled(n: int) -> pl.DataFrame:
    """Two GPUs' series, one of them labelled `step N` on every reading (a label that names no series)."""
    i = pl.int_range(n, eager=True)
    return conform(pl.DataFrame({"source": pl.repeat("train.log", n, eager=True), "gpu": (i % 2).cast(pl.String),
                                 "series": pl.repeat("allocated", n, eager=True), "bytes": i * 2**20, "line": i + 1})
                   .with_columns(pl.when(pl.col("gpu") == "0").then(pl.format("step {}", pl.col("line"))).alias("label")),
                   SAMPLES_SCHEMA)


def test_a_job_decides_its_series_labels_once(monkeypatch, tmp_path):
    """The series budget, detection and the report's series table ask about one samples table: the
    label rule runs once for it (it ran three times)."""
    calls = _counted_label_plans(monkeypatch)
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text("".join(f"2026-11-01 00:00:{s:02d},000 INFO [step {s}] allocated: {100 + 3 * s} MB\n"
                                           for s in range(40)))
    row = sc.process_job(str(job), "job", str(tmp_path / "out"), Options(tz="UTC"), "all", "fp")
    assert row["status"] == "ok" and row["report"]
    assert len(calls) == 1


def test_label_plan_decides_again_for_another_frame(monkeypatch):
    """The remembered answer is the frame's own: another frame (a filtered copy, equal contents) is
    decided afresh, and the answer goes when its frame does."""
    calls = _counted_label_plans(monkeypatch)
    df = _labelled(400)
    first = measure.label_plan(df)
    assert measure.label_plan(df) is first and len(calls) == 1
    half = df.filter(pl.col("line") <= 200)
    got = measure.label_plan(half)
    assert len(calls) == 2 and got[1] == measure._label_plan(half)[1]
    same = df.clone()
    measure.label_plan(same)
    assert len(calls) == 4   # (the direct call above, then the clone: a frame of its own)
    del half, same, got
    gc.collect()
    measure.label_plan(df)
    assert measure._last_plan is not None and measure._last_plan[0]() is df
    del df, first
    gc.collect()
    assert measure._last_plan is None


@pytest.mark.parametrize("path", CSV_SAMPLES, ids=lambda p: p.name)
def test_start_lines_read_in_python_are_the_grouped_ones(path, monkeypatch):
    """nvidia-smi CSV start lines (headers, commands) matched to their ids in Python for a few of them,
    by a grouping query for many: the same readings, events and notes either way."""
    want = _summary(path)
    monkeypatch.setattr(csvlog, "SMALL_START_ROWS", -1)
    assert _summary(path) == want


def test_many_start_lines_take_the_grouped_path_and_agree(tmp_path, monkeypatch):
    """A log that repeats its header and command on every few rows (a loop around nvidia-smi), with
    header-like lines that start nothing, past SMALL_START_ROWS of them: both paths agree."""
    lines = []
    for k in range(3 * csvlog.SMALL_START_ROWS):
        if k % 3 == 0:
            lines.append("$ nvidia-smi --query-gpu=timestamp,index,memory.used --format=csv")
        lines.append("timestamp, index, memory.used [MiB]" if k % 5 else "timestamp, index, memory.used [MiB], name")
        lines.append(f"2026/11/01 00:{k // 60:02d}:{k % 60:02d}.000, 0, {1000 + 7 * k} MiB" + ("" if k % 5 else ", H100"))
    log = tmp_path / "gpu.csv"
    log.write_text("\n".join(lines) + "\n")
    seen: list[int] = []
    real = csvlog.Reader._start_rows

    def watched(self, df):
        out = real(self, df)
        seen.append(out.height)
        return out

    monkeypatch.setattr(csvlog.Reader, "_start_rows", watched)
    want = _summary(log)
    assert max(seen) > csvlog.SMALL_START_ROWS
    monkeypatch.setattr(csvlog, "SMALL_START_ROWS", 10**9)
    assert _summary(log) == want


def _summary(path: Path) -> str:
    bundle, analysis = pipeline.run([str(path)], Options(tz="UTC"))
    return rep.summary_text(rep.summary(bundle, analysis))


def test_peak_bytes_is_the_grouped_maximum():
    """A job's peak for the index: the first of nvidia-smi's per-GPU use, per-process use, reserved and
    allocated that has a reading, in one query over the samples (nulls and absent series included)."""
    order = ("memory.used", "process.used", "reserved", "allocated")

    def grouped(samples):
        peaks = dict(samples.filter(pl.col("series").is_in(list(order))).group_by("series")
                     .agg(pl.col("bytes").max()).iter_rows())
        return next((int(peaks[s]) for s in order if peaks.get(s) is not None), None)

    cases = [
        {"series": ["allocated", "reserved", "reserved"], "bytes": [5, 3, 9]},
        {"series": ["memory.used", "allocated", "memory.used"], "bytes": [None, 50, None]},
        {"series": ["memory.used", "process.used", "other"], "bytes": [None, 7, 10**12]},
        {"series": ["other"], "bytes": [4]},
        {"series": [], "bytes": []},
    ]
    for case in cases:
        samples = conform(pl.DataFrame(case, schema={"series": pl.String, "bytes": pl.Int64}), SAMPLES_SCHEMA)
        bundle = type("B", (), {"samples": samples})()
        assert sc._peak_bytes(bundle) == grouped(samples), case


@pytest.mark.parametrize("folder", ["leak_linear_oom", "snapshot_leak", "ddp_gloo_rank1_leak"])
def test_sparkline_bytes_are_the_drawn_points_bytes(folder):
    """The scan's sparkline reads each drawn point's bytes without making the point's datetime: the
    same values as the points, and no points made for them."""
    _, analysis = pipeline.run([str(ROOT.parent / "sample_logs" / folder)], Options(tz="UTC"))
    assert analysis.series
    for s in analysis.series:
        got = s.point_bytes
        assert s._points is None or not s.n
        assert got == [p[1] for p in s.points]


def test_scanners_quick_pass_is_one_pattern_and_keeps_each_hint_s_lines():
    """The scanners' quick pass is one pattern whichever scanners a file skips (polars' cache of compiled
    regexes keeps it from file to file); each set of scanners still gets exactly the lines its hints
    match, on every sample line."""
    from forensics import parsers
    from forensics.parsers.scanners import Scanners

    texts = [ln for f in sorted((ROOT / "samples").rglob("*")) if f.is_file() and f.suffix not in (".gz", ".zst", ".xz", ".bz2")
             for ln in f.read_bytes().decode("utf-8", "replace").splitlines()]
    frame = pl.DataFrame({"line": range(1, len(texts) + 1), "text": texts}, schema={"line": pl.Int64, "text": pl.String})
    skips = [set()] + [{f.name, *f.covers} for f in parsers.PARSERS]
    assert len(skips) > 5
    quicks = set()
    for skip in skips:
        sc = Scanners(skip)
        quicks.add(sc.quick)
        sc.feed(frame)
        for m in sc.mods:
            got = pl.concat(sc.hits[m.name])["line"].to_list() if sc.hits[m.name] else []
            assert got == frame.filter(pl.col("text").str.contains(m.scan.hint))["line"].to_list(), (skip, m.name)
    assert len(quicks) == 1


def _scanner_hits(skip: set, frame: pl.DataFrame) -> dict:
    from forensics.parsers.scanners import Scanners

    sc = Scanners(skip)
    sc.feed(frame)
    return {m.name: pl.concat(sc.hits[m.name])["line"].to_list() if sc.hits[m.name] else [] for m in sc.mods}


def test_scanners_run_only_the_hints_whose_literals_the_lines_hold(monkeypatch):
    """The hints run on a batch's candidate lines are those of the scanners whose block literals the
    lines hold (ASCII text): the same hits as every hint, batch by batch of the samples, fewer hints
    compiled; text beyond ASCII runs every hint."""
    from forensics import parsers
    from forensics.parsers import scanners

    texts = [ln for f in sorted((ROOT / "samples").rglob("*")) if f.is_file() and f.suffix not in (".gz", ".zst", ".xz", ".bz2")
             for ln in f.read_bytes().decode("utf-8", "replace").splitlines()]
    texts += ["python3 invoked oom-killer: gfp_mask=0x100cca, order=0, oom_score_adj=0 ſtep",
              "KILLED process 7 (python3) ſ", "NVRM: Xid (PCI:0000:48:00): 79, GPU has fallen off the bus."]
    frame = pl.DataFrame({"line": range(1, len(texts) + 1), "text": texts}, schema={"line": pl.Int64, "text": pl.String})
    batches = [frame.slice(at, 50) for at in range(0, frame.height, 50)] + [frame]
    picked: list[int] = []
    real = scanners.Scanners._held_by

    def counted(self, cand):
        out = real(self, cand)
        picked.append(len(out) < len(self.mods))
        return out

    for skip in [set()] + [{f.name, *f.covers} for f in parsers.PARSERS][::5]:
        for batch in batches:
            monkeypatch.setattr(scanners.Scanners, "_held_by", counted)
            got = _scanner_hits(skip, batch)
            monkeypatch.setattr(scanners.Scanners, "_held_by", lambda self, cand: self.mods)
            assert got == _scanner_hits(skip, batch), skip
    assert sum(picked) > len(picked) / 2   # most batches ran fewer hints than all
    monkeypatch.setattr(scanners.Scanners, "_held_by", real)
    sc = scanners.Scanners(set())
    oom = pl.DataFrame({"text": ["Out of memory: Killed process 4242 (python3) total-vm:1kB"]})
    assert 0 < len(sc._held_by(oom["text"])) < len(sc.mods)
    assert sc._held_by(oom["text"] + " ſ") == sc.mods


# -- eighth session: a few plain lines for the scanners in Python; a chart's envelopes by numpy ------------


def _lines(texts: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame({"line": range(1, len(texts) + 1), "text": texts}, schema={"line": pl.Int64, "text": pl.String})


def _batched_hits(skip: set, texts: list[str | None], size: int) -> tuple[dict, list[bool]]:
    """Each scanner's kept lines (and what feed answered a batch) when `texts` come in batches of `size`."""
    from forensics.parsers.scanners import Scanners

    sc = Scanners(skip)
    frame = _lines(texts)
    answers = [sc.feed(frame.slice(at, size)) for at in range(0, frame.height, size)]
    return {m.name: pl.concat(sc.hits[m.name]).rows() if sc.hits[m.name] else [] for m in sc.mods}, answers


def test_scanners_read_a_few_plain_lines_without_a_query():
    """A batch of a few plain lines (steplog/small.py's rule) is tested by Python's `re`: no query for
    lines no hint keeps (the prefilter, the quick pass and the hints were three or more), one to copy the
    lines a hint keeps."""
    from forensics.parsers.scanners import Scanners

    noise = [f"epoch {i} loss 2.5{i} lr 1e-4" for i in range(20)] + ["rank 3 ready", "|  a table row  |", None]
    sc = Scanners(set())
    assert queries_run(lambda: sc.feed(_lines(noise))) == 0
    oom = noise + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"]
    sc = Scanners(set())
    assert queries_run(lambda: sc.feed(_lines(oom))) == 1
    assert pl.concat(sc.hits["pytorch-oom"])["line"].to_list() == [len(oom)]


def _sample_texts() -> list[str]:
    return [ln for f in sorted((ROOT / "samples").rglob("*")) if f.is_file() and f.suffix not in (".gz", ".zst", ".xz", ".bz2")
            for ln in f.read_bytes().decode("utf-8", "replace").splitlines()]


@pytest.mark.parametrize("size", [1, 7, 64])
def test_scanners_keep_the_same_lines_in_python_as_through_the_queries(size, monkeypatch):
    """Every sample line in batches of a few lines, for every set of scanners a format leaves: Python's
    `re` keeps what the queries keep (small.SMALL_LINES = 0 sends every batch to the queries)."""
    from forensics import parsers
    from forensics.parsers.steplog import small

    texts = _sample_texts()
    for skip in [set()] + [{f.name, *f.covers} for f in parsers.PARSERS][::4]:
        got = _batched_hits(skip, texts, size)
        with monkeypatch.context() as m:
            m.setattr(small, "SMALL_LINES", 0)
            assert got == _batched_hits(skip, texts, size), skip
    assert sum(len(v) for v in got[0].values()) > 100


_SCANNER_WORDS = ["allocated: 7 MB", "Reserved=3 GB", "CUDA out of memory", "OutOfMemoryError", "NVRM: Xid (PCI:0000:48:00): 79,",
                  "Killed process 42 (python3)", "invoked oom-killer:", "=========", "| Allocated memory | 1 MB |",
                  "CUDA OOMs: 0 | cudaMalloc retries: 0", "[rank 1]", "NCCL error", "Watchdog caught collective operation timeout",
                  "'num_ooms': 0,", "RESOURCE_EXHAUSTED: Out of memory", "KV cache usage", "srun: error: n1: Out Of Memory",
                  "iteration 7", "step 12", "batch=3", "*****", "torch.cuda.", "gpu: 3", "free_gpu", "mem_used"]


@given(st.lists(st.lists(st.sampled_from(_SCANNER_WORDS), max_size=3).flatmap(
           lambda ws: st.tuples(st.just(ws), st.text(alphabet="ab .:=[]|0123456789_\t\rKk", max_size=8))),
           min_size=1, max_size=70),
       st.sampled_from([1, 3, 64, 70]))
@settings(max_examples=150, deadline=None)
def test_scanners_python_path_matches_the_queries_on_made_up_lines(lines, size):
    """Lines of scanner words in any order with filler between (pipes, tabs, CR, case): each batch of a
    few lines gives the same kept lines in Python as through the queries."""
    from forensics.parsers.steplog import small

    texts = [filler.join(words) or filler for words, filler in lines]
    got = _batched_hits(set(), texts, size)
    saved = small.SMALL_LINES
    small.SMALL_LINES = 0
    try:
        assert got == _batched_hits(set(), texts, size)
    finally:
        small.SMALL_LINES = saved


def _chart_rows(n: int, series: int, seed: int, shuffled: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(0, 100, n), int(rng.integers(0, 3)))
    return pl.DataFrame({"sid": rng.integers(0, series + 1, n), "x": x if shuffled else np.sort(x),
                         "y": rng.integers(0, 6, n) * 2**20}, schema={"sid": pl.Int64, "x": pl.Float64, "y": pl.Int64})


@given(st.integers(0, 400), st.integers(1, 5), st.integers(0, 2**31), st.sampled_from([3, 120, 250]), st.booleans())
@settings(max_examples=300, deadline=None)
def test_envelopes_by_numpy_are_the_grouped_ones(n, series, seed, buckets, shuffled):
    """A chart's buckets by numpy: the same (sid, bucket, x and y of the lowest and the highest reading,
    the first of equal ones) as polars' grouping, for interleaved or sorted rows, ties, ranges of any
    width (zero too) in any sid order."""
    from forensics.report import series as rs

    rows = _chart_rows(n, series, seed, shuffled)
    rng = np.random.default_rng(seed + 1)
    ranges = {int(s): (lo, lo + float(rng.uniform(0, 80)) * int(rng.integers(0, 2)))
              for s in rng.permutation(series)[: int(rng.integers(1, series + 1))] for lo in [float(rng.uniform(-5, 60))]}
    agg = rs._grouped_extremes(rows, ranges, buckets)
    assert rs._extremes(rows, ranges, buckets) == [agg[c].to_list() for c in ("sid", "b", "xmin", "ymin", "xmax", "ymax")]


def test_envelopes_of_a_chart_run_no_query():
    """A chart's envelopes of a few thousand rows run no polars query (a grouping query each before);
    rows with a NaN x take polars' rules."""
    from forensics.report import series as rs

    rows = _chart_rows(3000, 3, 7, True)
    ranges = {0: (10.0, 90.0), 2: (0.0, 50.0)}
    got: dict = {}
    assert queries_run(lambda: got.update(rs.envelopes(rows, ranges, 250))) == 0
    assert set(got) == {0, 2} and all(got.values())
    nan = rows.with_columns(pl.when(pl.col("x") > 95).then(float("nan")).otherwise(pl.col("x")).alias("x"))
    assert rs._extremes(nan, ranges, 250) is None
    assert rs.envelopes(nan, ranges, 250) == got


def test_a_big_batch_s_few_survivors_are_read_in_python(monkeypatch):
    """A big batch (CSV rows) passes polars' quick pass; its few survivors are tested by the prefilter and
    the hints in Python: neither pattern reaches polars (whose cache of 32 compiled regexes had lost them
    since the last file), and the same lines are kept as through the queries."""
    from polars.expr.string import ExprStringNameSpace

    from forensics.parsers.scanners import Scanners
    from forensics.parsers.steplog import small

    rows = [f"2026/10/01 00:00:{i % 60:02d}.000, {i % 8}, NVIDIA H100 80GB HBM3, 81559 MiB, 30000 MiB" for i in range(400)]
    rows[50] = "[step 12] allocated: 1024.5 MB, cached: 2048 MB"
    rows[120] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
    patterns: list[str] = []
    real = ExprStringNameSpace.contains

    def recorded(self, pattern, *a, **k):
        if not k.get("literal"):
            patterns.append(pattern)
        return real(self, pattern, *a, **k)

    sc = Scanners({"nvidia-smi-csv"})
    with monkeypatch.context() as m:
        m.setattr(ExprStringNameSpace, "contains", recorded)
        got = _batched_hits({"nvidia-smi-csv"}, rows, 400)
    assert patterns == [sc.quick]
    assert {k: [r[0] for r in v] for k, v in got[0].items() if v} == {"step-markers": [51], "pytorch-oom": [121]}
    monkeypatch.setattr(small, "SMALL_LINES", 0)
    assert got == _batched_hits({"nvidia-smi-csv"}, rows, 400)


def _grouped_spans(samples: pl.DataFrame, events: pl.DataFrame) -> tuple[dict, dict]:
    """stamps.spans and stamps.sources_with(..., ("time", "uptime")) by polars' grouping (the code before)."""
    spans: dict = {}
    with_: dict = {None: set(), "time": set(), "uptime": set()}
    for df in (samples, events):
        if not df.height:
            continue
        for src, start, end, has_time, has_up in df.group_by("source").agg(
                pl.col("time").min(), pl.col("time").max().alias("end"), pl.col("time").is_not_null().any().alias("t"),
                pl.col("uptime").is_not_null().any()).iter_rows():
            with_[None].add(src)
            with_["time"] |= {src} if has_time else set()
            with_["uptime"] |= {src} if has_up else set()
            if start is not None:
                spans[src] = (min(start, spans[src][0]), max(end, spans[src][1])) if src in spans else (start, end)
    return spans, with_


@pytest.mark.parametrize("folder", ["leak_linear_oom", "ddp_gloo_rank1_leak", "host_oom_pin_memory", "incident_linear_oom"])
def test_source_spans_without_a_query_are_the_grouped_ones(folder):
    """Each source's first and last time, and the sources with times or uptimes, split by source in
    Python (a job's tables hold a few sources): the grouping's answers, and no query (four a job's
    timeline asked before)."""
    from forensics.model import EVENTS_SCHEMA
    from forensics.timeline import stamps

    bundle = pipeline.load([str(ROOT.parent / "sample_logs" / folder)], Options(tz="UTC"))
    samples, events = bundle.samples, bundle.events
    got: list = []
    assert queries_run(lambda: got.extend([stamps.spans(samples, events),
                                            stamps.sources_with(samples, events, ("time", "uptime"))])) == 0
    assert tuple(got) == _grouped_spans(samples, events)
    # a source without a time, one without a name
    t = pl.Series([None, None, None], dtype=events.schema["time"])
    odd = conform(pl.DataFrame({"source": ["a.log", None, "b.log"], "time": t, "line": [1, 2, 3]}), EVENTS_SCHEMA)
    odd = odd.with_columns(pl.when(pl.col("line") == 2).then(events["time"].max() if events.height else None)
                           .otherwise(pl.col("time")).alias("time"))
    assert (stamps.spans(samples, odd), stamps.sources_with(samples, odd, ("time", "uptime"))) == _grouped_spans(samples, odd)


def test_a_kernel_logs_line_columns_are_one_query_after_the_stage_one_columns():
    """kernel/prefix.line_columns: its steps after stage 1 are one lazy query (each eager step was a query
    of its own, paid by every sniffed head); the columns are the same as the eager steps gave (the
    kernel parser's tests hold them)."""
    from forensics.parsers.kernel import prefix as kp

    head = kp.head_frame([f"Nov  1 00:00:{i % 60:02d} gpuhost kernel: [{i + 100:>6}.000001] eth0: link is up"
                          for i in range(50)])
    stage_one = queries_run(lambda: kp._stage1(head.select("line", pl.col("text").alias("t"))))
    assert queries_run(lambda: kp.line_columns(head)) <= 1 + stage_one + 1
