"""A GPU leak names its code (detect/allocations.py `name_leak_sites`): the memory snapshot's leak site
or the compute-sanitizer call path whose bytes per step match the leak's own."""
from __future__ import annotations

import pytest

from conftest import SAMPLE_LOGS
from forensics import ingest
from forensics.detect.allocations import name_leak_sites
from forensics.detect.analyze import analyze
from forensics.detect.findings import Evidence, Finding, finding_json
from forensics.options import Options

MiB = 1 << 20


def findings_of(case: str) -> list[Finding]:
    return analyze(ingest.load([str(SAMPLE_LOGS / case)], Options(tz="UTC"))).findings


def test_the_showcase_leak_names_the_line_whose_segments_are_one_a_step():
    # 49 x 256 MiB at workloads.py:259 through the caching allocator, the leak's 256 MiB a step: the
    # pool grew for tensors kept there, not the allocator's cache at exit
    found = findings_of("incident_linear_oom")
    # the step log's leak (the one with a rate per step; nvidia-smi's views have none)
    (leak,) = [f for f in found if f.kind == "leak" and f.rate_bytes_per_step]
    site = finding_json(leak)["site"]
    assert site["site"] == "preprocess_oom (workloads.py:259)" and site["from"] == "sanitizer_leak"
    assert site["bytes_per_step"] == 256 * MiB and "workloads.py:259" in leak.summary
    assert any(e.path.endswith("sanitizer.log") and e.line == site["line"] for e in leak.evidence)
    san = {f.detail["site"]: f for f in found if f.kind == "sanitizer_leak"}
    assert san["preprocess_oom (workloads.py:259)"].severity == "warning"
    assert not san["preprocess_oom (workloads.py:259)"].detail["expected"]
    # the one-off segments beside it stay the cache at exit
    assert all(f.detail["expected"] for s, f in san.items() if "259" not in s)


def test_two_snapshot_sites_that_add_up_to_the_leak_are_both_named():
    # train_step keeps 8 MiB a step, validate 12 MiB: the step log's 20 MiB a step is both
    (leak,) = [f for f in findings_of("snapshot_leak") if f.kind == "leak" and f.rate_bytes_per_step]
    sites = finding_json(leak)["sites"]
    assert {s["site"] for s in sites} == {"torch_memory.py:87", "torch_memory.py:94"}


def _leak(per_step, gpu="0") -> Finding:
    return Finding(kind="leak", severity="critical", summary="GPU 0 grows.", gpu=gpu, series="allocated",
                   rate_bytes_per_step=per_step)


def _sanitizer(count, each, expected=True) -> Finding:
    return Finding(kind="sanitizer_leak", severity="info", summary="s.", bytes=count * each,
                   evidence=[Evidence("sanitizer.log", 10, "Leaked")],
                   detail={"site": "f (a.py:1)", "count": count, "expected": expected})


@pytest.mark.parametrize("count, each, per_step", [(49, 256 * MiB, 100 * MiB), (2, 256 * MiB, 256 * MiB)])
def test_a_site_of_another_size_or_of_too_few_steps_is_not_the_leaks(count, each, per_step):
    lk, san = _leak(per_step), _sanitizer(count, each)
    name_leak_sites([lk, san])
    assert "site" not in lk.detail and san.detail["expected"] and lk.summary == "GPU 0 grows."


def test_a_site_on_another_gpu_is_not_the_leaks():
    lk, san = _leak(256 * MiB, gpu="1"), _sanitizer(49, 256 * MiB)
    san.gpu = "0"
    name_leak_sites([lk, san])
    assert "site" not in lk.detail
