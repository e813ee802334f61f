"""Golden files of the report context and of the Markdown summary, versions and dates scrubbed.

Regenerate after an intended change with:
    GPU_FORENSICS_UPDATE_GOLDEN=1 python -m pytest tests/test_report_golden.py
and read the diff before keeping it.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

import forensics
from forensics import pipeline, report
from conftest import ROOT, SAMPLE_LOGS
from test_report_cases import empty_case, leak_case, no_leak_case, opts

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("GPU_FORENSICS_UPDATE_GOLDEN") == "1"


def snapshot_case():
    """A real recording with a memory snapshot: the live allocations by call path, the snapshot's
    memory on the timeline (paths relative to the repository, as a user in it would type them)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return pipeline.run([str((SAMPLE_LOGS / "snapshot_leak").relative_to(ROOT))], opts("Etc/UTC"))
    finally:
        os.chdir(cwd)


CASES = {"leak": leak_case, "no_leak": no_leak_case, "empty": empty_case, "snapshot": snapshot_case}


def scrub_context(ctx: dict) -> dict:
    """Drop what changes from run to run (version, clock) and shorten drawn point lists to their outline."""
    ctx = copy.deepcopy(ctx)
    ctx["version"] = "<version>"
    ctx["generated_at"] = "<generated_at>"
    ctx["summary"]["version"] = "<version>"
    for chart in ctx["charts"] + ctx["zooms"]:
        for s in chart["series"]:
            pts = [p for run in s["runs"] for p in run]
            s["runs"] = {"runs": len(s["runs"]), "points": len(pts), "first": pts[0] if pts else None,
                         "last": pts[-1] if pts else None, "min_y": min((p[1] for p in pts), default=None),
                         "max_y": max((p[1] for p in pts), default=None)}
    return ctx


def scrub_markdown(md: str) -> str:
    return md.replace(f"gpu-forensics {forensics.__version__}", "gpu-forensics <version>")


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"{path} is missing; create it with GPU_FORENSICS_UPDATE_GOLDEN=1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from the golden file (GPU_FORENSICS_UPDATE_GOLDEN=1 to accept)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_context_golden(name):
    bundle, analysis = CASES[name]()
    ctx = scrub_context(report.build_context(bundle, analysis, opts("Etc/UTC" if name == "snapshot" else "Europe/Berlin")))
    check(f"report-{name}.context.json", json.dumps(ctx, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_markdown_golden(name):
    bundle, analysis = CASES[name]()
    md = scrub_markdown(report.render_markdown(report.build_context(
        bundle, analysis, opts("Etc/UTC" if name == "snapshot" else "Europe/Berlin"))))
    check(f"report-{name}.md", md)
