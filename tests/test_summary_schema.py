"""The JSON summary against the schema shipped in the package (forensics/report/summary.schema.json).

Consumers validate with the schema as shipped, which accepts fields added later. Here a strict copy
(no property the schema does not name) validates the summary of every recorded incident and every
real-world snippet, so a field we emit without documenting it fails, and so does a documented field
of the wrong type."""
from __future__ import annotations

import copy
import json
from importlib import resources

import jsonschema
import pytest

from conftest import REALWORLD, ROOT, SAMPLE_LOGS
from forensics import pipeline, report
from forensics.detect.findings import FINDING_KINDS, KIND_FACTS, Finding, finding_json
from forensics.options import Options
from test_cli import run_cli, write_incident
from test_samples import INCIDENTS, analyzed

SCHEMA = json.loads(resources.files("forensics.report").joinpath("summary.schema.json").read_text())


def strict(schema: dict) -> dict:
    """The schema with every open object closed: a property it does not describe is an error."""
    out = copy.deepcopy(schema)

    def close(node):
        if isinstance(node, dict):
            for key in ("additionalProperties", "unevaluatedProperties"):
                if node.get(key) is True:
                    node[key] = False
            for v in node.values():
                close(v)
        elif isinstance(node, list):
            for v in node:
                close(v)
    close(out)
    return out


STRICT = jsonschema.Draft202012Validator(strict(SCHEMA), format_checker=jsonschema.FormatChecker())


def check(summary: dict) -> None:
    errors = sorted(STRICT.iter_errors(summary), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_strict_copy_rejects_an_undocumented_field():
    f = finding_json(Finding(kind="xid", severity="warning", summary="x", detail={"code": 79, "count": 1}))
    s = {"tool": "gpu-forensics", "version": "0", "verdict": "inconclusive", "verdict_reason": None,
         "inputs": [], "findings": [f]}
    check(s)
    jsonschema.validate(dict(s, future_field=1), SCHEMA)   # a consumer's validator takes added fields
    for bad in ({**f, "anon_rss_bytes": 1},            # another kind's field
                {**f, "code": "79"},                   # the wrong type
                {k: v for k, v in f.items() if k != "bus_id"}):   # a field of its kind left out
        with pytest.raises(AssertionError):
            check(dict(s, findings=[bad]))
    with pytest.raises(AssertionError):
        check(dict(s, future_field=1))


def test_kind_fields_agree_with_the_schema_and_the_docs():
    defs = SCHEMA["$defs"]
    assert list(defs["finding"]["properties"]["kind"]["enum"]) == list(FINDING_KINDS)
    design = (ROOT / "docs" / "design.md").read_text()
    for kind, facts in KIND_FACTS.items():
        names = [n for n, _ in facts]
        assert names == (defs[kind]["required"] if kind in defs else []), kind
        for n in names:
            assert f"`{n}`" in design, f"docs/design.md does not name {kind}'s `{n}`"
    for n in defs["finding"]["required"] + defs["input"]["required"] + list(defs["input"]["properties"]):
        assert f"`{n}`" in design or f'"{n}"' in design, f"docs/design.md does not name `{n}`"


@pytest.mark.parametrize("folder", INCIDENTS, ids=[p.name for p in INCIDENTS])
def test_every_recorded_incident_validates(folder):
    _, bundle, analysis = analyzed(folder)
    s = report.summary(bundle, analysis)
    check(s)
    check(json.loads(report.summary_text(s)))


@pytest.mark.parametrize("path", sorted(REALWORLD.glob("*/*.txt")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_world_snippet_validates(path):
    bundle, analysis = pipeline.run([str(path)], Options(tz="UTC"))
    check(report.summary(bundle, analysis))


def test_the_embedded_copy_validates():
    bundle, analysis = pipeline.run([str(SAMPLE_LOGS / "incident_linear_oom")], Options(tz="UTC"))
    check(report.build_context(bundle, analysis, Options(tz="UTC"))["summary"])


def test_report_json_output_validates(tmp_path):
    job = write_incident(tmp_path / "job")
    res = run_cli("report", str(job), "-o", "", "--json", "-", "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    check(s)
    kill = next(f for f in s["findings"] if f["kind"] == "oom_kill")
    assert (kill["process"], kill["cgroup"], kill["scope"], kill["anon_rss_bytes"]) == (
        "python3", "/job", "memcg", 31451456 * 1024)
    assert kill["host"] == "gpuhost" and kill["kill_line_missing"] is False


def test_compare_json_holds_two_valid_summaries(tmp_path):
    out = tmp_path / "c.json"
    res = run_cli("compare", str(SAMPLE_LOGS / "compare_fix_before"), str(SAMPLE_LOGS / "compare_fix_after"),
                  "-o", str(tmp_path / "c.html"), "--json", str(out))
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(out.read_text())
    check(doc["before"])
    check(doc["after"])
