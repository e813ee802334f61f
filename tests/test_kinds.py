"""The finding-kind registry (forensics/kinds.py) is the one declaration of a kind: the JSON Schema's kind
section and the docs table are generated from it (forensics/report/schema.py), the detectors' findings
and the report's and scan's uses of a kind agree with it."""
from __future__ import annotations

import ast
import json
import re
from importlib import resources

import pytest

from conftest import ROOT
from forensics.detect.findings import Finding, finding_json
from forensics.kinds import KINDS, SEVERITY_RANK, schema_section
from forensics.report import schema
from forensics.report.sections import finding_ctx
from forensics.report.formatting import Clock
from forensics.scan import SUMMARY_SCHEMA, _row_from_summary

SCHEMA = schema.committed()
DETECT = ROOT / "forensics" / "detect"


def test_the_committed_schema_is_what_the_registry_generates():
    """Its kind section is generated (`python -m forensics.report.schema`): never edited by hand."""
    text = resources.files("forensics.report").joinpath("summary.schema.json").read_text(encoding="utf-8")
    assert text == schema.schema_text(SCHEMA), (
        "forensics/report/summary.schema.json is stale: run `python -m forensics.report.schema` in the repository")
    want = schema_section()
    assert SCHEMA["$defs"]["finding"]["properties"]["kind"]["enum"] == want["enum"] == list(KINDS)
    assert SCHEMA["$defs"]["finding"]["allOf"] == want["allOf"]
    assert all(SCHEMA["$defs"][name] == d for name, d in want["$defs"].items())


def test_regenerating_drops_a_kind_taken_out_and_keeps_the_rest():
    stale = json.loads(json.dumps(SCHEMA))
    stale["$defs"]["finding"]["allOf"].append({"if": {}, "then": {"$ref": "#/$defs/gone_kind"}})
    stale["$defs"]["gone_kind"] = {"description": "a kind no longer declared"}
    stale["$defs"]["leak"]["description"] = "edited by hand"
    assert schema.with_kinds(stale) == SCHEMA


def test_the_docs_table_is_what_the_registry_generates():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert text == schema.with_table(text, SCHEMA), (
        "docs/design.md's kinds table is stale: run `python -m forensics.report.schema` in the repository")
    rows = [line for line in schema.kinds_table(SCHEMA["$defs"]).splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `([a-z_]+)`", r).group(1) for r in rows] == list(KINDS)
    for row, k in zip(rows, KINDS.values()):
        named = re.findall(r"`([a-z_]+)`", row.split(" | ")[3])
        facts = [f.name for f in k.facts]
        assert list(dict.fromkeys(n for n in named if n in facts)) == facts, k.name


def test_regenerating_writes_both_files(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "forensics" / "report").mkdir(parents=True)
    (tmp_path / "docs" / "design.md").write_text(f"intro\n{schema.TABLE_START}\n| old |\n{schema.TABLE_END}\nend\n")
    stale = json.loads(json.dumps(SCHEMA))
    del stale["$defs"]["xid"]
    (tmp_path / "forensics" / "report" / "summary.schema.json").write_text(json.dumps(stale))
    assert schema.main(tmp_path) == 0
    assert json.loads((tmp_path / "forensics" / "report" / "summary.schema.json").read_text()) == SCHEMA
    assert (tmp_path / "docs" / "design.md").read_text() == f"intro\n{schema.kinds_table(SCHEMA['$defs'])}\nend\n"
    assert schema.main(tmp_path / "elsewhere") == 2


def _findings_made() -> list[tuple[str, set[str], str]]:
    """(kind, the severities written beside it, where) for every Finding(kind="...") in the detectors."""
    out = []
    for path in sorted(DETECT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding"):
                continue
            args = {k.arg: k.value for k in node.keywords}
            kind = args.get("kind")
            assert isinstance(kind, ast.Constant), f"{path.name}:{node.lineno}: a finding's kind is written as a literal"
            sev = {n.value for n in ast.walk(args["severity"]) if isinstance(n, ast.Constant)}
            out.append((kind.value, sev, f"{path.name}:{node.lineno}"))
    return out


def test_every_kind_a_detector_makes_is_declared_with_its_severities():
    made = _findings_made()
    assert made
    for kind, severities, where in made:
        assert kind in KINDS, f"{where}: finding kind {kind!r} is not declared in forensics/kinds.py"
        assert severities <= set(KINDS[kind].severities), f"{where}: {kind} made {severities}"
    assert {k for k, _, _ in made} == set(KINDS), "a declared kind no detector makes"


def test_declarations_are_well_formed():
    for k in KINDS.values():
        assert k.severities and set(k.severities) <= set(SEVERITY_RANK), k.name
        names = [f.name for f in k.facts]
        assert len(names) == len(set(names)), k.name
        assert all(f.read or f.type.read for f in k.facts), f"{k.name}: a custom fact without its reader"
        assert k.description and "\n" not in k.description, k.name


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_empty_detail_gives_every_fact_of_its_kind(kind):
    """Every finding of a kind has all its kind's fields, null (or empty) when the logs do not say."""
    d = finding_json(Finding(kind=kind, severity=KINDS[kind].severity, summary="x"))
    for f in KINDS[kind].facts:
        assert f.name in d
        assert d[f.name] in (None, [], False), (kind, f.name, d[f.name])


def test_a_fact_is_typed_as_its_declaration_says():
    detail = {"requested": 2.0 * 2**30, "total": "n/a", "count": 3, "traceback": [{"file": "t.py", "line": 7.0, "func": "f"}]}
    d = finding_json(Finding(kind="gpu_oom", severity="critical", summary="x", detail=detail))
    assert d["requested_bytes"] == 2**31 and isinstance(d["requested_bytes"], int)
    assert d["capacity_bytes"] is None      # not a number: unknown, never a string in a bytes field
    assert d["traceback"] == [{"file": "t.py", "line": 7, "function": "f", "code": None}]


def test_the_report_and_the_scan_use_the_registry():
    templates = (ROOT / "templates" / "report.html.j2").read_text()
    for k in KINDS.values():
        if k.section:
            assert f"ctx.{k.section}" in templates, f"{k.name}: report section {k.section!r}"
        if k.index_column:
            assert k.index_column in SUMMARY_SCHEMA, f"{k.name}: scan index column {k.index_column!r}"
    summary = {"verdict": "inconclusive", "inputs": [],
               "findings": [finding_json(Finding(kind=k, severity=KINDS[k].severity, summary="x")) for k in KINDS]}
    row = _row_from_summary(summary)
    assert {c: row[c] for c in SUMMARY_SCHEMA if c in {k.index_column for k in KINDS.values()}} == {
        k.index_column: 1 for k in KINDS.values() if k.index_column}
    f = Finding(kind="oom_kill", severity="critical", summary="x", bytes=2**30)
    assert ["Resident memory (RSS) when killed", "1.00 GiB"] in finding_ctx(f, Clock("UTC")).facts


def test_an_events_detail_is_read_back_typed():
    """Event facts travel as JSON text in the events frame; read back through the registry, a value of
    the wrong type is unknown rather than a string compared with a number."""
    d = KINDS["kv_cache_leak"].event_detail(json.dumps({"engine": "sglang", "available_tokens": 35244.0,
                                                          "total_tokens": "42308", "sizes_line": 3}))
    assert d == {"engine": "sglang", "available_tokens": 35244, "total_tokens": None, "sizes_line": 3}
    assert KINDS["kv_cache_leak"].event_detail("not json") == {}
