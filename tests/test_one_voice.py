"""Every output speaks with one voice (forensics/report/formatting.py): verdict words, not keys; instants
as people read them, not raw ISO; one rule for a rate's unit; findings ordered by severity then size;
nothing drawn over the data."""
import re

from forensics import compare as cmp
from forensics import report
from forensics.detect.analyze import analyze
from forensics.report.formatting import instant, rate_text, verdict_words
from forensics.scan import SUMMARY_SCHEMA, render_index
from test_compare import AFTER, BEFORE, compared
from test_report_cases import leak_case, opts

RAW_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
KEYS = re.compile(r"\b(no_leak|cache_growth|still_leaking)\b")


def _visible(html: str) -> str:
    """The text a reader sees: no script or style, no tags (attributes hold keys for sorting and styling)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def test_words():
    assert verdict_words("no_leak") == "no leak" and verdict_words("still_leaking") == "still leaking"
    assert instant("2026-11-30T04:44:42.157Z") == "2026-11-30 04:44:42 UTC"
    assert instant("index 12") == "index 12"


def test_scan_index_has_no_raw_keys_or_iso_and_rates_follow_the_report_rule():
    blank = dict.fromkeys(SUMMARY_SCHEMA)
    rows = [blank | {"job": "a", "status": "ok", "verdict": "leak", "severity": "critical", "severity_rank": 3,
             "onset": "2026-11-30T04:44:42.157Z", "rate_bytes_per_hour": 853.27 * 2**20 * 3600,
             "rate_span_seconds": 20.0, "peak_bytes": 2**34},
            blank | {"job": "b", "status": "ok", "verdict": "no_leak", "severity": None, "severity_rank": 0}]
    text = _visible(render_index(rows))
    assert not RAW_ISO.search(text) and not KEYS.search(text), text
    assert "no leak: 1" in text and "2026-11-30 04:44:42 UTC" in text
    assert rate_text(rows[0]["rate_bytes_per_hour"], 20.0) == "853.27 MiB/s" and "853.27 MiB/s" in text


def test_compare_page_and_markdown_have_no_raw_keys_or_iso():
    doc, extra = compared(BEFORE, AFTER)
    md = cmp.render_markdown(doc, extra)
    html = _visible(cmp.render_html(doc, extra))
    for text in (md, html):
        assert not RAW_ISO.search(text), RAW_ISO.search(text)
        assert not KEYS.search(text.replace("compare_fix", "")), KEYS.search(text)


def test_findings_name_their_bytes_and_show_code_as_code():
    bundle, _ = leak_case()
    analysis = analyze(bundle, opts())
    ctx = report.build_context(bundle, analysis, opts())
    html = report.render_html(ctx)
    assert ">Bytes<" not in html and "Bytes:" not in report.render_markdown(ctx)
    assert "`" not in re.sub(r"<script.*?</script>", "", html, flags=re.S).split("Likely cause")[-1].split("</ul>")[0]


def test_findings_ordered_by_severity_then_size():
    bundle, _ = leak_case()
    findings = analyze(bundle, opts()).findings
    from forensics.detect.findings import SEVERITY_RANK

    ranks = [-SEVERITY_RANK[f.severity] for f in findings]
    assert ranks == sorted(ranks)
    leaks = [f for f in findings if f.kind == "leak" and f.severity == findings[0].severity]
    sizes = [f.growth_bytes or 0 for f in leaks]
    assert sizes == sorted(sizes, reverse=True)


def test_nothing_drawn_over_the_lines_and_the_onset_has_its_own_colour():
    bundle, _ = leak_case()
    ctx = report.build_context(bundle, analyze(bundle, opts()), opts())
    html = report.render_html(ctx)
    assert "(off scale) ↑" not in html
    css = html.split("<style>")[1].split("</style>")[0]
    onset = re.search(r"--onset:\s*(#[0-9a-fA-F]+)", css).group(1).lower()
    from forensics.report.charts import FALLBACK_COLORS, SERIES_COLORS

    assert onset not in {c.lower() for c in (*FALLBACK_COLORS, *SERIES_COLORS.values())}
    assert re.search(r"\.onset line \{ stroke: var\(--onset\)", css)


def test_a_twin_dmesg_dump_counts_each_oom_killer_invocation_once():
    """dmesg -T (whole seconds) holds two invocations in one second; dmesg --time-format iso the same
    two: two invocations, not three (each finer copy joins its own coarse twin)."""
    import polars as pl

    import forensics
    from test_compare import BEFORE

    result = forensics.analyze(BEFORE.parent / "host_oom_pin_memory", tz="UTC")
    invoked = result.events.filter(pl.col("kind") == "oom_invoked")
    assert invoked.height == 2, invoked.select("source", "line")
