"""The real incidents in sample_logs/ get the verdict and the facts their README states.

Each incident folder was recorded on a real GPU by tools/record/record.py; its README.md front
matter says what really happened (format: sample_logs/README.md). Every folder is analyzed the way a
user would run the tool on it: `pipeline.run([folder], Options(tz=...))`.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from forensics import pipeline
from forensics.options import Options

from conftest import SAMPLE_LOGS
from evaluation.recordings import front_matter  # the README front matter, read one way

MAX_FOLDER_BYTES = 1_000_000
# the binary kinds a sample folder may hold, small enough to keep in git: a memory snapshot pickle ...
SNAPSHOT_SUFFIX, MAX_SNAPSHOT_BYTES = ".pickle", 2_000_000
TFEVENTS_PREFIX = "events.out.tfevents."   # and a TensorBoard event file (a training log in binary)
ONSET_STEPS = 3          # how far the onset may be off, in steps (when the finding counts steps)
RATE_TOLERANCE = 0.25    # relative error allowed on the leak rate


def listed(value: str | None) -> list[str]:
    if not value or value == "none":
        return []
    return [x.strip() for x in value.split(",") if x.strip()]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


FOLDERS = sorted(p.parent for p in SAMPLE_LOGS.glob("*/README.md"))
INCIDENTS = [p for p in FOLDERS if "expected_verdict" in front_matter(p / "README.md")]
IDS = [p.name for p in INCIDENTS]
_RESULTS: dict[Path, tuple] = {}


def analyzed(folder: Path):
    """(meta, bundle, analysis) of one folder, computed once per test session."""
    if folder not in _RESULTS:
        meta = front_matter(folder / "README.md")
        bundle, analysis = pipeline.run([str(folder)], Options(tz=meta.get("tz", "UTC")))
        _RESULTS[folder] = (meta, bundle, analysis)
    return _RESULTS[folder]


def of_kind(analysis, kind: str) -> list:
    return [f for f in analysis.findings if f.kind == kind]


# ---- the collection itself ---------------------------------------------------------------------

def test_the_recorded_incidents_are_here():
    names = {p.name for p in INCIDENTS}
    # the spine's showcase, a leak of each shape, the kernel kill, the residual worker, each
    # healthy look-alike and the sanitizer runs
    for name in ("incident_linear_oom", "leak_linear", "leak_linear_oom", "leak_staircase_optimizer",
                 "host_oom_pin_memory", "residual_worker", "healthy_sawtooth", "healthy_stable_footprint",
                 "healthy_warmup", "cache_growth_fragmentation", "sanitizer_cpp_text", "sanitizer_cpp_xml",
                 "sanitizer_torch_cache", "ddp_gloo_rank1_leak", "ddp_gloo_healthy", "ddp_gloo_both_leak"):
        assert name in names, f"sample_logs/{name}/README.md with an expected_verdict is missing"


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_folder_is_small_text_with_its_inputs(folder):
    meta = front_matter(folder / "README.md")
    assert meta.get("incident") == folder.name, "README front matter must name its folder"
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < MAX_FOLDER_BYTES
    for p in files:
        if p.suffix == SNAPSHOT_SUFFIX:
            assert p.stat().st_size < MAX_SNAPSHOT_BYTES
            assert p.read_bytes()[:1] == b"\x80", f"{p.name}: a .pickle here must be a pickle (a memory snapshot)"
            continue
        if p.name.startswith(TFEVENTS_PREFIX):
            assert p.stat().st_size < MAX_SNAPSHOT_BYTES
            continue
        p.read_bytes().decode("utf-8")          # logs only: no other binaries in sample folders
    inputs = listed(meta.get("inputs"))
    assert inputs, "README must list the inputs the tool has to recognize"
    for name in inputs:
        assert (folder / name).is_file(), f"{name} is listed in the README but not in the folder"


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_every_listed_input_is_recognized(folder):
    meta = front_matter(folder / "README.md")
    bundle, _ = pipeline.run([str(folder)], Options(tz=meta.get("tz", "UTC"))) if folder not in INCIDENTS \
        else analyzed(folder)[1:]
    for problem in bundle.problems:     # files that are not logs (README.md, clock.txt) may be listed
        if any(word in problem for word in ("not recognized", "empty file", "cannot read", "binary", "internal error")):
            assert not any(f"/{name}:" in problem for name in listed(meta.get("inputs"))), problem
    # an input in a subfolder (a TensorBoard run's tb/) is listed by its path in the folder
    by_name = {Path(i.path).resolve().relative_to(folder.resolve()).as_posix(): i for i in bundle.inputs}
    for name in listed(meta.get("inputs")):
        info = by_name.get(name)
        assert info is not None, f"{name} was not read"
        assert info.error is None, f"{name}: {info.error}"
        assert info.format is not None, f"{name}: no parser recognized it ({info.reason})"
        if not name.startswith("dmesg"):     # a kernel log of a quiet boot has nothing to report
            assert info.records > 0, f"{name}: recognized as {info.format} but nothing was read from it"


# ---- verdicts and findings ---------------------------------------------------------------------

@pytest.mark.parametrize("folder", INCIDENTS, ids=IDS)
def test_verdict(folder):
    meta, _, analysis = analyzed(folder)
    assert analysis.verdict == meta["expected_verdict"], analysis.verdict_reason


@pytest.mark.parametrize("folder", INCIDENTS, ids=IDS)
def test_expected_findings(folder):
    meta, _, analysis = analyzed(folder)
    kinds = {f.kind for f in analysis.findings}
    for kind in listed(meta.get("expected_findings")):
        assert kind in kinds, f"no {kind} finding; found {sorted(kinds)}"
    if meta["expected_verdict"] != "leak":
        assert "leak" not in kinds, [f.summary for f in of_kind(analysis, "leak")]


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if front_matter(p / "README.md").get("pattern")],
                         ids=lambda p: p.name)
def test_leak_pattern_onset_and_rate(folder):
    meta, _, analysis = analyzed(folder)
    leaks = of_kind(analysis, "leak")
    assert leaks, analysis.verdict_reason
    assert any(f.pattern == meta["pattern"] for f in leaks), [(f.series, f.pattern) for f in leaks]
    leak = next(f for f in leaks if f.pattern == meta["pattern"])
    pid = int(meta["pid"])
    assert all(f.pid in (None, pid) for f in leaks), "a leak was put on the wrong process"

    onset_step = int(meta["onset_step"])
    if leak.start_index is not None and leak.start is None:
        assert abs(leak.start_index - onset_step) <= ONSET_STEPS
    else:
        assert leak.start is not None, "a leak in clocked logs needs its onset time"
        slack = ONSET_STEPS * float(meta["step_seconds"]) + 1.5   # nvidia-smi samples every 0.5 s
        off = (leak.start - utc(meta["onset_time"])).total_seconds()
        assert abs(off) <= slack, f"onset {leak.start} is {off:+.1f} s from the real one ({meta['onset_time']})"

    if leak.rate_bytes_per_step is not None and meta.get("leak_bytes_per_step"):
        want = int(meta["leak_bytes_per_step"])
        assert abs(leak.rate_bytes_per_step - want) <= RATE_TOLERANCE * want
    else:
        want = int(meta["leak_bytes_per_hour"])
        assert leak.rate_bytes_per_hour is not None
        assert abs(leak.rate_bytes_per_hour - want) <= RATE_TOLERANCE * want, \
            f"rate {leak.rate_bytes_per_hour:.3g} B/h, really {want:.3g} B/h"


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if "killed_pid" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_kernel_kill_names_the_training_process(folder):
    meta, _, analysis = analyzed(folder)
    pid = int(meta["killed_pid"])
    kills = [f for f in of_kind(analysis, "oom_kill") if f.pid == pid]
    assert kills, f"no oom_kill finding for pid {pid}"
    # raw dmesg, dmesg -T and dmesg --time-format iso of the same kill must land on the same second
    # (the iso form writes a comma before the microseconds)
    real = utc(meta["kill_time"].replace(",", "."))
    for f in kills:
        assert f.start is not None, f"{f.source}: the kill has no time"
        assert abs((f.start - real).total_seconds()) < 1.0, f"{f.source}: {f.start} vs {real}"


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if "worker_pid" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_residual_worker_is_named(folder):
    meta, _, analysis = analyzed(folder)
    residual = of_kind(analysis, "residual_process")
    assert int(meta["worker_pid"]) in {f.pid for f in residual}, [f.summary for f in residual]


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if "leak_sites" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_sanitizer_leak_sites_and_bytes(folder):
    meta, _, analysis = analyzed(folder)
    leaks = of_kind(analysis, "sanitizer_leak")
    assert sum(f.bytes or 0 for f in leaks) == int(meta["leaked_bytes"])
    for site in meta["leak_sites"].split(";"):
        name, line = site.split()[0].split(":")          # leaky.cu:24
        # the site is named by file and line, in whatever words the finding uses
        assert any(name in f"{f.summary} {f.detail}"
                   and re.search(rf"(:|line\W{{1,4}}){line}\b", f"{f.summary} {f.detail}") for f in leaks), \
            f"{name}:{line} is not named by any sanitizer_leak finding"


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if "allocation_leak_sites" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_allocation_leak_sites_are_named(folder):
    meta, _, analysis = analyzed(folder)
    leaks = of_kind(analysis, "allocation_leak")
    for site in meta["allocation_leak_sites"].split(";"):
        name = site.split()[0]                             # torch_memory.py:94
        assert any(f.allocation and f.allocation["site"] == name for f in leaks), \
            f"{name} is not named by any allocation_leak finding: {[f.summary for f in leaks]}"
    # and no other call path is called a leak
    assert len(leaks) == len(meta["allocation_leak_sites"].split(";")), [f.summary for f in leaks]


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if "oom_step" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_cuda_oom_is_found(folder):
    _, _, analysis = analyzed(folder)
    assert of_kind(analysis, "gpu_oom")


@pytest.mark.parametrize("folder", [p for p in INCIDENTS if "memory_stats_lines" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_memory_stats_dicts_and_their_counters(folder):
    meta, bundle, _ = analyzed(folder)
    dicts = bundle.samples.filter(pl.col("label") == "memory_stats")
    assert dicts["line"].n_unique() == int(meta["memory_stats_lines"])   # every dict gives its `active`
    for counter, kind in (("num_ooms", "gpu_oom_counted"), ("num_alloc_retries", "alloc_retry")):
        rises = [json.loads(d) for d in bundle.events.filter(pl.col("kind") == kind)["detail"].to_list()]
        assert sum(r["rise"] for r in rises) == int(meta[counter]), counter
    if "num_alloc_retries_first_step" in meta:
        first = json.loads(bundle.events.filter(pl.col("kind") == "alloc_retry").sort("line")["detail"][0])
        assert first["step"] == int(meta["num_alloc_retries_first_step"])


# ---- distributed jobs (the rank keys of the front matter) ------------------------------------------

def pairs(value: str) -> dict[int, int]:
    """`0:1570, 1:1571` -> {0: 1570, 1: 1571}."""
    return {int(k): int(v) for k, v in (x.split(":") for x in listed(value))}


RANKED = [p for p in INCIDENTS if "rank_pids" in front_matter(p / "README.md")]


@pytest.mark.parametrize("folder", RANKED, ids=lambda p: p.name)
def test_each_rank_is_its_own_series_with_its_pid(folder):
    meta, _, analysis = analyzed(folder)
    pids = pairs(meta["rank_pids"])
    framework = [s for s in analysis.series if s.series == "allocated"]
    assert {s.rank: s.pid for s in framework} == pids, [(s.label, s.rank, s.pid) for s in framework]
    assert len(pids) == int(meta["ranks"])


@pytest.mark.parametrize("folder", [p for p in RANKED if "leaking_rank" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_the_leaking_ranks_are_named(folder):
    meta, _, analysis = analyzed(folder)
    pids = pairs(meta["rank_pids"])
    leaking = {int(r) for r in listed(meta["leaking_rank"])}
    ranked = {f.rank: f for f in of_kind(analysis, "leak") if f.rank is not None}
    assert set(ranked) == leaking, [f.summary for f in of_kind(analysis, "leak")]
    for rank, f in ranked.items():
        assert f.pid == pids[rank] and f"rank {rank}" in f.summary
    onsets = pairs(meta.get("rank_onset_steps", "")) or {int(meta["leaking_rank"]): int(meta["onset_step"])}
    rates = pairs(meta.get("rank_bytes_per_step", "")) or {int(meta["leaking_rank"]): int(meta["leak_bytes_per_step"])}
    for rank, f in ranked.items():
        assert abs(f.detail["start_step"] - onsets[rank]) <= ONSET_STEPS
        assert abs(f.rate_bytes_per_step - rates[rank]) <= RATE_TOLERANCE * rates[rank]


@pytest.mark.parametrize("folder", [p for p in RANKED if "first_failure" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_the_first_failure_and_its_consequences(folder):
    meta, _, analysis = analyzed(folder)
    rank, kind = meta["first_failure"].split()[1:]
    (chain,) = of_kind(analysis, "distributed_failure")
    first = chain.detail["first_failure"]
    assert (first["rank"], first["kind"]) == (int(rank), kind), chain.summary
    others = [f for f in of_kind(analysis, "collective_error") if f.rank != int(rank)]
    assert others, "the other ranks' collective errors are findings"
    assert all(f.consequence_of and f.consequence_of["rank"] == int(rank) for f in others)
    # torchrun's own view, where the run failed: the rank it names first is the same
    assert chain.detail["torchrun_root_cause_rank"] == int(rank)


@pytest.mark.parametrize("folder", [p for p in RANKED if "failed_ranks" in front_matter(p / "README.md")],
                         ids=lambda p: p.name)
def test_every_rank_that_failed_on_its_own_is_named(folder):
    meta, _, analysis = analyzed(folder)
    failed = {int(r) for r in listed(meta["failed_ranks"])}
    assert {f.rank for f in of_kind(analysis, "gpu_oom")} == failed
    (chain,) = of_kind(analysis, "distributed_failure")
    assert {chain.rank} | {f["rank"] for f in chain.detail["own_failures"]} == failed
