"""The incident report: a plain-data context (context.py, unit- and golden-tested), laid out as HTML
(html.py, with svg.py's chart geometry), Markdown (markdown.py) and the JSON summary (summary.py); every
output file goes through write.py.

The names below are what the command line, scan and the benchmarks call.
"""
from forensics.report.context import build_context
from forensics.report.html import render_html
from forensics.report.markdown import render_markdown
from forensics.report.summary import summary, summary_text

__all__ = ["build_context", "render_html", "render_markdown", "summary", "summary_text"]
