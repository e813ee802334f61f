"""The Markdown summary renders as meant in a CommonMark (+ GFM tables) renderer (#29): headers are
headers, every detail of a finding is its own list item, tables have a header row, and no escape
backslash or backtick shows literally."""
from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from forensics import pipeline
from forensics import report
from forensics.report.events import EVENT_STYLE
from forensics.options import Options

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def markdown() -> str:
    opts = Options(tz="UTC")
    bundle, analysis = pipeline.run([str(ROOT / "sample_logs" / "incident_linear_oom")], opts)
    return report.render_markdown(report.build_context(bundle, analysis, opts))


def tokens(md: str):
    return MarkdownIt("commonmark").enable("table").parse(md)


def inline_texts(toks) -> list[str]:
    """What a reader sees as plain text (code spans and blocks excluded)."""
    return [c.content for t in toks if t.type == "inline" for c in t.children if c.type == "text"]


def test_headers_are_headers(markdown):
    toks = tokens(markdown)
    heads = [(t.tag, toks[i + 1].content) for i, t in enumerate(toks) if t.type == "heading_open"]
    assert heads[0] == ("h2", "GPU memory report: Memory leak")
    assert ("h3", "Findings") in heads and ("h3", "Inputs") in heads
    assert not any(line.startswith("#") for line in inline_texts(toks))


def test_each_detail_of_a_finding_is_its_own_list_item(markdown):
    toks = tokens(markdown)
    items, depth = [], 0
    for i, t in enumerate(toks):
        if t.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif t.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif t.type == "inline" and depth == 2:
            items.append(t.content)
    assert any(x.startswith("Pattern: linear") for x in items), items
    assert any(x.startswith("Likely cause: ") for x in items)
    assert any(x.startswith("Check: ") for x in items)
    for x in items:   # one detail per item: nothing merged into a neighbour's paragraph
        assert x.count("Likely cause:") + x.count("Check:") + x.count("Pattern:") <= 1, x


def test_no_escape_shows_literally_and_code_stays_code(markdown):
    toks = tokens(markdown)
    for text in inline_texts(toks):
        assert "\\" not in text and "`" not in text, text
    codes = [c.content for t in toks if t.type == "inline" for c in t.children if c.type == "code_inline"]
    assert "total_loss += loss.item()" in codes
    assert any(t.type == "fence" and "train.log:" in t.content for t in toks)


def test_tables_have_a_header_row_that_says_something(markdown):
    toks = tokens(markdown)
    heads, cell, in_head = [], [], False
    for i, t in enumerate(toks):
        if t.type == "thead_open":
            in_head, cell = True, []
        elif t.type == "thead_close":
            in_head = False
            heads.append(cell)
        elif in_head and t.type == "inline":
            cell.append(t.content)
    assert len(heads) >= 2
    for row in heads:
        assert all(c.strip() for c in row), row


def test_the_html_shows_labels_not_internal_keys():
    import re

    opts = Options(tz="UTC")
    bundle, analysis = pipeline.run([str(ROOT / "sample_logs" / "incident_linear_oom")], opts)
    html = report.render_html(report.build_context(bundle, analysis, opts))
    facts = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", html)
    assert ("Logged for", "22 s") in facts and ("Memory", "ran out (CUDA OOM) — 2026-11-30 04:44:55 UTC") in facts
    assert not [label for label, _ in facts if label == "Ran out as"]   # said once, by the fact
    for label, value in facts:
        assert "_" not in label, label
        assert value not in EVENT_STYLE, (label, value)
    assert re.search(r"\b1 (lines|files|records|events|memory readings)\b", html) is None
    assert "sample_logs/<wbr>incident_linear_oom/<wbr>train.log:22" in html   # wraps at slashes only
