"""Printed torch.cuda.memory_stats() dicts: the real PyTorch 2.11 recordings (a repr behind a logging
prefix between step markers, JSON, a plain dict at the end), every repr and multi-line shape, counter
rises as events, files of dicts alone and dicts inside other logs, and one reading per step when a
log prints both a step marker and the dict."""
from __future__ import annotations

import ast
import collections
import json
import pprint
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT, SAMPLE_LOGS, parse_file, realworld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import ingest, pipeline
from forensics.detect.measure import series_frames
from forensics.io.sources import Source
from forensics.model import Parsed
from forensics.options import Options
from forensics.parsers.torch import memstats

NAME = "pytorch-memory-stats"
RECORDED = {"snapshot_leak": "repr", "snapshot_healthy": "json", "snapshot_legacy": "dict"}
KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
        "num_ooms", "num_alloc_retries")


def front_matter(folder: Path) -> dict:
    text = (folder / "README.md").read_text()
    body = text.split("---")[1]
    return dict(ln.split(": ", 1) for ln in body.strip().splitlines())


def printed_dicts(path: Path) -> dict[int, dict]:
    """line -> the dict printed on it, read back with Python's own parsers (the oracle)."""
    out = {}
    for i, ln in enumerate(path.read_text().splitlines(), 1):
        m = re.search(r"(OrderedDict\(|\{)", ln)
        if not m or "active.all.allocated" not in ln:
            continue
        literal = ln[m.start():]
        if literal.startswith("OrderedDict("):
            literal = literal[len("OrderedDict("):-1]
        out[i] = json.loads(literal) if literal.startswith('{"') else dict(ast.literal_eval(literal))
    return out


def scanned(path: Path, tz: str = "UTC") -> Parsed:
    """What the free-text scanner finds in a file (the hinted lines, as parsers/scanners.py gives them)."""
    src = Source.open(path, str(path))
    lines = src.frame().filter(pl.col("text").str.contains(memstats.SCAN_HINT))
    return memstats.scan(lines, src, Options(tz=tz))


def by_line(p: Parsed) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for r in p.samples.iter_rows(named=True):
        out.setdefault(r["line"], {})[r["series"]] = r["bytes"]
    return out


# ---- the real recordings -------------------------------------------------------------------------

@pytest.mark.parametrize("folder", sorted(RECORDED))
def test_recorded_dicts_are_read_exactly(folder):
    path = SAMPLE_LOGS / folder / "train.log"
    oracle = printed_dicts(path)
    p = scanned(path)
    assert p.meta["memory_stats_dicts"] == len(oracle)
    if "memory_stats_lines" in (meta := front_matter(SAMPLE_LOGS / folder)):
        assert len(oracle) == int(meta["memory_stats_lines"])
    got = by_line(p)
    assert set(got) == set(oracle)
    for line, d in oracle.items():
        assert got[line] == {"allocated": d["allocated_bytes.all.current"], "reserved": d["reserved_bytes.all.current"],
                             "active": d["active_bytes.all.current"]}
    assert p.skipped.total == 0
    assert set(p.samples["label"].to_list()) == {"memory_stats"}


@pytest.mark.parametrize("folder", ["snapshot_leak", "snapshot_healthy"])
def test_recorded_steps_times_and_values_match_the_workloads_own_record(folder):
    truth = [json.loads(ln) for ln in (ROOT / "tools/record/runs" / f"{folder}.jsonl").read_text().splitlines()]
    truth = [t for t in truth if t["ev"] == "memory_stats"]
    p = scanned(SAMPLE_LOGS / folder / "train.log")
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("line")
    assert alloc["step"].to_list() == [t["step"] for t in truth]
    assert alloc["bytes"].to_list() == [t["allocated_bytes.all.current"] for t in truth]
    # the logging clock (milliseconds) of each dict is the moment the workload recorded it
    for t, at in zip(truth, alloc["time"].to_list()):
        assert abs(at.timestamp() - t["t"]) < 0.002
    assert p.clock == "wall-assumed"


def test_recorded_oom_and_retry_rise_at_the_step_of_the_last_dict():
    folder = SAMPLE_LOGS / "snapshot_leak"
    meta = front_matter(folder)
    p = scanned(folder / "train.log")
    lines = (folder / "train.log").read_text().splitlines()
    ev = {r["kind"]: r for r in p.events.iter_rows(named=True)}
    assert set(ev) == {"gpu_oom_counted", "alloc_retry"}
    step = int(meta["num_alloc_retries_first_step"])
    for kind, counter in (("gpu_oom_counted", "num_ooms"), ("alloc_retry", "num_alloc_retries")):
        e, d = ev[kind], json.loads(ev[kind]["detail"])
        assert f"step {step} memory_stats" in lines[e["line"] - 1]
        assert d["counter"] == counter and d["value"] == int(meta[counter]) and d["previous"] == 0
        assert d["step"] == step and d["previous_step"] == 45 and d["next_line"] is None
        assert f"'{counter}': {d['value']}" in e["text"] and e["text"].startswith("2026-12-02 15:07:09,558")
    assert p.meta["num_ooms_max"] == 1 and p.meta["num_alloc_retries_max"] == 1


def test_no_counter_event_without_a_rise():
    assert scanned(SAMPLE_LOGS / "snapshot_healthy" / "train.log").events.height == 0
    assert scanned(SAMPLE_LOGS / "snapshot_legacy" / "train.log").events.height == 0   # one dict, counters 0


def test_step_marker_reader_leaves_the_dicts_alone():
    # the step-marker reader used to read 'active.all.allocated': 253 as a reading without a unit
    for folder in RECORDED:
        _, p = parse_file(SAMPLE_LOGS / folder / "train.log", expect="step-markers")
        assert p.skipped.total == 0, p.skipped.counts
        assert "active" not in set(p.samples["series"].to_list())


def test_a_log_with_step_markers_and_dicts_gives_one_series_per_name():
    bundle, analysis = pipeline.run([str(SAMPLE_LOGS / "snapshot_leak")], Options(tz="UTC"))
    train = bundle.samples.filter(pl.col("source").str.ends_with("train.log"))
    keys = [k for k, _ in series_frames(train)]
    assert sorted(k[4] for k in keys) == ["active", "allocated", "reserved"]
    alloc = train.filter(pl.col("series") == "allocated").sort("step")
    # one reading per step: the step markers' at steps 1-47 (the dicts of steps 5..45 repeat them),
    # and the dict printed at the OOM, at step 48, where no marker was printed
    assert alloc["step"].to_list() == list(range(1, 49))
    assert alloc.filter(pl.col("step") == 48)["line"].to_list() == [58]
    assert alloc.filter(pl.col("step") == 45)["line"].to_list() == [54]
    info = next(i for i in bundle.inputs if i.path.endswith("train.log"))
    assert any("18 readings (allocated, reserved) printed twice" in n for n in info.notes)
    # the OOM the allocator counted is the one whose traceback is in stderr.log and whose `oom` entry is in
    # the snapshot: one finding, three evidence lines
    ooms = [f for f in analysis.findings if f.kind == "gpu_oom"]
    assert len(ooms) == 1
    assert [(Path(e.path).name, e.line) for e in ooms[0].evidence] == [
        ("snapshot.pickle", 1492), ("stderr.log", 26), ("train.log", 58)]
    assert "num_ooms 0 → 1" in ooms[0].detail["counted_by_allocator"]


def test_readings_without_a_step_are_not_taken_for_repeats():
    bundle, _ = pipeline.run([str(SAMPLE_LOGS / "snapshot_legacy" / "train.log")], Options(tz="UTC"))
    s = bundle.samples
    assert s.filter((pl.col("line") == 31) & (pl.col("label") == "memory_stats")).height == 3
    assert not any("printed twice" in n for i in bundle.inputs for n in i.notes)


# ---- files of dicts alone ------------------------------------------------------------------------

def test_python311_repr_file_is_claimed_and_leaks():
    path = realworld("memstats_py311_01.txt")
    _, p = parse_file(path, expect=NAME)
    oracle = printed_dicts(path)
    assert by_line(p) == {ln: {"allocated": d["allocated_bytes.all.current"], "reserved": d["reserved_bytes.all.current"],
                               "active": d["active_bytes.all.current"]} for ln, d in oracle.items()}
    assert p.skipped.counts == {memstats.SKIP_OTHER: 1}     # the provenance line
    _, analysis = pipeline.run([str(path)], Options(tz="UTC"))
    assert analysis.verdict == "leak"
    (oom,) = [f for f in analysis.findings if f.kind == "gpu_oom"]
    assert oom.severity == "critical" and "between step 45 and step 48" in oom.summary
    assert "no out-of-memory message" in oom.summary


def test_pprint_file_is_read_key_by_key():
    path = realworld("memstats_pprint_01.txt")
    _, p = parse_file(path, expect=NAME)
    lines = path.read_text().splitlines()
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("line")
    assert alloc["step"].to_list() == [30, 35, 40, 45, 48]
    for r in alloc.iter_rows(named=True):   # each reading's line is the line of its key
        assert lines[r["line"] - 1].strip().startswith("('allocated_bytes.all.current', ")
        assert str(r["bytes"]) in lines[r["line"] - 1]
    assert alloc["time"].null_count() == 0   # the clock of the dict's first line
    (retry,) = p.events.filter(pl.col("kind") == "alloc_retry").iter_rows(named=True)
    assert retry["text"].strip() == "('num_alloc_retries', 1),"
    assert p.skipped.total == 1


def test_the_recorded_training_logs_are_not_claimed_as_dict_files():
    for folder in RECORDED:
        assert memstats.sniff(Source.open(SAMPLE_LOGS / folder / "train.log").head()) is None


# ---- every shape people print ----------------------------------------------------------------------

STATS = collections.OrderedDict(sorted({
    "active.all.allocated": 10, "active.all.current": 4, "active_bytes.all.current": 3 << 20,
    "allocated_bytes.all.current": 3 << 20, "allocated_bytes.all.peak": 5 << 20, "max_split_size": -1,
    "num_alloc_retries": 2, "num_ooms": 1, "reserved_bytes.all.current": 20 << 20,
    "segment.all.current": 1}.items()))
WANT = {"allocated": 3 << 20, "reserved": 20 << 20, "active": 3 << 20}
PREFIX = "2026-12-02 10:00:00,123 INFO train: step 7 memory_stats: "


def _one_line_reprs() -> dict[str, str]:
    pairs = ", ".join(f"({k!r}, {v!r})" for k, v in STATS.items())
    items = ", ".join(f"{k!r}: {v!r}" for k, v in STATS.items())
    return {"dict": "{" + items + "}", "ordereddict_311": f"OrderedDict([{pairs}])",
            "ordereddict_312": "OrderedDict({" + items + "})", "json": json.dumps(STATS)}


@pytest.mark.parametrize("shape", sorted(_one_line_reprs()))
def test_one_line_shapes(tmp_path, shape):
    f = tmp_path / "stats.log"
    f.write_text(PREFIX + _one_line_reprs()[shape] + "\n")
    _, p = parse_file(f, expect=NAME)
    assert by_line(p) == {1: WANT}
    row = p.samples.row(0, named=True)
    assert row["step"] == 7 and row["time"].isoformat() == "2026-12-02T10:00:00.123000+00:00"
    assert {r["kind"] for r in p.events.iter_rows(named=True)} == {"gpu_oom_counted", "alloc_retry"}
    assert p.skipped.total == 0


@pytest.mark.parametrize("shape", ["pprint_dict", "pprint_ordereddict", "json_indent"])
def test_multi_line_shapes(tmp_path, shape):
    if shape == "pprint_dict":
        text = PREFIX + pprint.pformat(dict(STATS))
    elif shape == "pprint_ordereddict":
        text = PREFIX + pprint.pformat(STATS)
    else:
        text = PREFIX + json.dumps(STATS, indent=2)
    f = tmp_path / "stats.log"
    f.write_text(text + "\n")
    _, p = parse_file(f, expect=NAME)
    got = {r["series"]: r["bytes"] for r in p.samples.iter_rows(named=True)}
    assert got == WANT
    if shape == "json_indent":
        # the `{` line holds the clock and the step; the dict is read from its first key on
        assert p.samples["step"].null_count() == p.samples.height
    else:
        assert set(p.samples["step"].to_list()) == {7}
    assert p.skipped.total == 0


def test_several_devices_are_series_and_counters_of_their_own(tmp_path):
    def line(dev, alloc, ooms):
        d = dict(STATS, **{"allocated_bytes.all.current": alloc, "num_ooms": ooms})
        return f"cuda:{dev} step 1 memory_stats: {d}"
    f = tmp_path / "stats.log"
    f.write_text("\n".join([line(0, 1, 0), line(1, 2, 1), line(0, 3, 0), line(1, 4, 1), line(0, 5, 2)]) + "\n")
    _, p = parse_file(f, expect=NAME)
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("line")
    assert list(zip(alloc["gpu"].to_list(), alloc["bytes"].to_list())) == [("0", 1), ("1", 2), ("0", 3), ("1", 4), ("0", 5)]
    ooms = p.events.filter(pl.col("kind") == "gpu_oom_counted").sort("line")
    # GPU 1: 1 before its first dict; GPU 0: 0 -> 0 -> 2 at line 5
    assert [(r["gpu"], r["line"], json.loads(r["detail"])["rise"]) for r in ooms.iter_rows(named=True)] == \
        [("1", 2, 1), ("0", 5, 2)]


def test_a_counter_that_falls_was_reset(tmp_path):
    f = tmp_path / "stats.log"
    f.write_text("\n".join(f"step {i} memory_stats: {dict(STATS, num_alloc_retries=n)}"
                           for i, n in enumerate([3, 3, 0, 1], 1)) + "\n")
    _, p = parse_file(f, expect=NAME)
    rises = [(r["line"], json.loads(r["detail"])["previous"]) for r in
             p.events.filter(pl.col("kind") == "alloc_retry").iter_rows(named=True)]
    assert rises == [(1, 0), (4, 0)]


def test_key_lines_outside_a_dict_are_counted(tmp_path):
    # a list of pairs a script made from the dict (its values may be scaled): not read as bytes
    text = "\n".join([PREFIX + _one_line_reprs()["dict"],
                      "[('allocated_bytes.all.current', 5861), ('reserved_bytes.all.current', 5866)]",
                      "    'num_ooms': 4,"]) + "\n"
    f = tmp_path / "stats.log"
    f.write_text(text)
    _, p = parse_file(f, expect=NAME)
    assert by_line(p) == {1: WANT}
    assert p.skipped.counts == {memstats.SKIP_OUTSIDE: 2} and p.skipped.examples[memstats.SKIP_OUTSIDE] == [2, 3]


def test_a_cut_number_is_not_a_reading(tmp_path):
    f = tmp_path / "stats.log"
    full = _one_line_reprs()["dict"]
    cut = full[: full.index("'reserved_bytes.all.current': ") + len("'reserved_bytes.all.current': 2097")]
    f.write_text(PREFIX + cut)   # the log ends inside a value
    _, p = parse_file(f, expect=NAME)
    assert by_line(p) == {1: {"allocated": WANT["allocated"], "active": WANT["active"]}}


# ---- dicts inside another parser's file ------------------------------------------------------------

def test_dicts_inside_a_log_another_parser_claims(tmp_path):
    text = "\n".join(["epoch 1 begins",
                      "[step 7] allocated: 3.00 MB, cached: 20.00 MB",
                      PREFIX + _one_line_reprs()["ordereddict_312"],
                      "Traceback (most recent call last):",
                      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total "
                      "capacity of 79.11 GiB of which 1.00 MiB is free."]) + "\n"
    f = tmp_path / "train.log"
    f.write_text(text)
    src = Source.open(f, str(f))
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    assert info.format not in (NAME, None)   # (the OOM's parser claims it)
    assert "memory value without a unit" not in info.skip_reasons, info.skip_reasons
    found = {k for r in results for k in r.events["kind"].to_list()}
    assert {"gpu_oom", "gpu_oom_counted", "alloc_retry"} <= found
    # allocated and reserved at step 7 once (the marker's line), active from the dict
    rows = pl.concat([r.samples for r in results if r.samples.height])
    assert sorted(zip(rows["series"].to_list(), rows["line"].to_list())) == \
        [("active", 3), ("allocated", 2), ("reserved", 2)]
    _, analysis = pipeline.run([str(f)], Options(tz="UTC"))
    assert len([x for x in analysis.findings if x.kind == "gpu_oom"]) == 1


def test_a_counted_oom_before_the_fatal_one_is_a_finding_of_its_own(tmp_path):
    # OOM caught at step 2 (the job went on), then the fatal one whose traceback is untimed in stderr
    log = tmp_path / "train.log"
    log.write_text("\n".join(
        f"2026-12-02 10:00:0{i},000 INFO step {i} memory_stats: {dict(STATS, num_ooms=n, num_alloc_retries=0)}"
        for i, n in ((1, 0), (2, 1), (3, 1), (4, 2))) + "\n")
    (tmp_path / "stderr.log").write_text("Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of "
                                         "memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 79.11 GiB "
                                         "of which 1.00 MiB is free.\n")
    _, analysis = pipeline.run([str(tmp_path)], Options(tz="UTC"))
    ooms = [f for f in analysis.findings if f.kind == "gpu_oom"]
    assert len(ooms) == 2
    caught, fatal = sorted(ooms, key=lambda f: f.summary.startswith("CUDA out of memory"))
    assert caught.summary.startswith("PyTorch's caching allocator counted 1") and caught.severity == "warning"
    assert "between step 1 and step 2" in caught.summary and "the job went on" in caught.summary
    assert fatal.summary.startswith("CUDA out of memory") and fatal.evidence[-1].line == 4


# ---- properties ------------------------------------------------------------------------------------

def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index("line", offset=1).with_columns(
        pl.col("line").cast(pl.Int64))


class _Src:
    path = "x.log"


def _read(lines: list[str], batch: int) -> Parsed:
    reader = memstats.Reader(_Src(), Options(tz="UTC"))
    frame = _frame(lines)
    for i in range(0, frame.height, batch):
        reader.feed(frame.slice(i, batch))
    return reader.finish()


_SAMPLE_LINES = realworld("memstats_pprint_01.txt").read_text().splitlines()[:300]
_FRAGMENTS = ["{", "}", "OrderedDict(", "OrderedDict([", "(", ")", "[", "]", "'", '"', ": ", ", ", " ",
              "'allocated_bytes.all.current'", "'num_ooms'", "'active.all.allocated'", "'reserved_bytes.all.current'",
              "\"active_bytes.all.current\"", "'num_alloc_retries'", "12", "-1", "99999999999999999999999", "7",
              "step 3 ", "cuda:1 ", "2026-12-02 10:00:00,123 ", "\t", "é"]
_line = st.one_of(st.sampled_from(_SAMPLE_LINES), st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join),
                  st.text(max_size=60))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_line, max_size=40), st.integers(1, 9))
def test_same_result_whatever_the_batching_and_never_an_exception(lines, batch):
    whole, parts = _read(lines, 10 ** 6), _read(lines, batch)
    assert whole.samples.equals(parts.samples) and whole.events.equals(parts.events)
    assert whole.skipped.counts == parts.skipped.counts
    for r in whole.samples.iter_rows(named=True):   # every byte count is a number written on its line
        assert re.search(rf"(?<![0-9]){r['bytes']}(?![0-9])", lines[r["line"] - 1])


def test_a_dict_with_nothing_read_here_is_counted(tmp_path):
    f = tmp_path / "stats.log"
    f.write_text(PREFIX + _one_line_reprs()["dict"] + "\n" + "step 8 memory_stats: {'active.all.allocated': 10}\n")
    _, p = parse_file(f, expect=NAME)
    assert by_line(p) == {1: WANT}
    assert p.skipped.counts == {memstats.SKIP_EMPTY: 1} and p.skipped.examples[memstats.SKIP_EMPTY] == [2]


def test_ranks_are_series_and_counters_of_their_own_not_gpus(tmp_path):
    # two ranks of a torchrun job in one file, each behind torchrun's prefix and a rank word: a rank is
    # not a GPU (forensics/ranks.py maps ranks to GPUs from what the logs say)
    def line(rank, alloc, ooms):
        d = dict(STATS, **{"allocated_bytes.all.current": alloc, "num_ooms": ooms})
        return f"[default{rank}]:2026-12-02 15:09:22,103 INFO train: [rank {rank}] step 1 memory_stats: {d}"
    f = tmp_path / "stats.log"
    f.write_text("\n".join([line(0, 1, 0), line(1, 2, 1), line(0, 3, 0), line(1, 4, 1), line(0, 5, 2)]) + "\n")
    _, p = parse_file(f, expect=NAME)
    alloc = p.samples.filter(pl.col("series") == "allocated").sort("line")
    assert alloc["gpu"].null_count() == alloc.height
    assert alloc["label"].to_list() == ["rank 0 memory_stats", "rank 1 memory_stats"] * 2 + ["rank 0 memory_stats"]
    assert alloc["time"].null_count() == 0          # the clock behind the prefix is read
    ooms = p.events.filter(pl.col("kind") == "gpu_oom_counted").sort("line")
    assert [(r["line"], json.loads(r["detail"])["rise"]) for r in ooms.iter_rows(named=True)] == [(2, 1), (5, 2)]


# ---- JAX's Device.memory_stats() -------------------------------------------------------------------

def test_jax_pprint_dicts_are_a_memory_series_with_the_limit_as_capacity():
    _, p = parse_file(realworld("jax_memstats_pprint_01.txt"), expect=NAME)
    rows = p.samples.sort("line").select("line", "series", "bytes", "total_bytes").rows()
    assert rows == [(6, "allocated", 12288, 33014415360), (13, "max_allocated", 12288, 33014415360),
                    (20, "allocated", 76288, 33014415360), (27, "max_allocated", 76800, 33014415360)]
    assert any("JAX" in n and "bytes_limit" in n for n in p.notes)
    assert not any("allocated_bytes.all.current" in n for n in p.notes)
    assert p.events.height == 0


def test_jax_dicts_printed_in_a_training_log_are_found_by_the_scan(tmp_path):
    # print() keeps PJRT's order (num_allocs first), unlike IPython's sorted pprint
    lines = [f"2026-01-05 10:00:{i:02d} step {i} {{'num_allocs': {3 + i}, 'bytes_in_use': {1000 * (i + 1)}, "
             f"'peak_bytes_in_use': {1000 * (i + 1)}, 'largest_alloc_size': 512, 'bytes_limit': 16000000000}}"
             for i in range(5)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(["epoch 1 starting", *lines]) + "\n")
    p = scanned(path)
    allocated = p.samples.filter(pl.col("series") == "allocated").sort("line")
    assert allocated["bytes"].to_list() == [1000, 2000, 3000, 4000, 5000]
    assert allocated["step"].to_list() == [0, 1, 2, 3, 4]
    assert set(allocated["total_bytes"]) == {16000000000}
