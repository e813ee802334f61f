"""The JSON summary (a public interface: docs/design.md fixes its fields), and its copy embedded in the HTML."""
from __future__ import annotations

import json

from forensics.detect.findings import SEVERITY_RANK, summary_json
from forensics.report.formatting import clip, lookup, plain
from forensics.report.limits import EMBED_EVIDENCE, EMBED_FINDINGS, EMBED_INPUTS
from forensics.version import __version__


def embedded_summary(bundle, analysis) -> dict:
    """The JSON summary embedded in the HTML for machines, with findings capped to keep the file small."""
    s = summary(bundle, analysis)
    if len(s["findings"]) > EMBED_FINDINGS:
        s["findings_omitted"] = len(s["findings"]) - EMBED_FINDINGS
        s["findings"] = sorted(s["findings"], key=lambda f: -SEVERITY_RANK.get(f["severity"], 0))[:EMBED_FINDINGS]
    for f in s["findings"]:
        if len(f["evidence"]) > EMBED_EVIDENCE:
            f["evidence_omitted"] = len(f["evidence"]) - EMBED_EVIDENCE
            f["evidence"] = f["evidence"][:EMBED_EVIDENCE]
        for e in f["evidence"]:
            e["text"] = clip(e["text"], 200)
    if len(s["inputs"]) > EMBED_INPUTS:
        s["inputs_omitted"] = len(s["inputs"]) - EMBED_INPUTS
        s["inputs"] = s["inputs"][:EMBED_INPUTS]
    return plain(s)


def summary(bundle, analysis) -> dict:
    """The JSON summary, exactly as docs/design.md fixes it (forensics/report/summary.schema.json)."""
    return plain(summary_json(
        __version__,
        lookup(analysis, "verdict", default="inconclusive") or "inconclusive",
        bundle.inputs,
        list(lookup(analysis, "findings", default=None) or []),
        lookup(analysis, "verdict_reason", default=None),
    ))


def summary_text(summary_dict: dict) -> str:
    """The JSON summary as `report --json` writes it (and scan's per-job summary.json, the same bytes)."""
    return json.dumps(summary_dict, indent=2, ensure_ascii=False) + "\n"
