"""Log text that would drive the terminal (issue 45 D-I1 D-I3): console markup in log values and
paths is printed literally, terminal escapes reach stderr and sniff's stdout as \\xNN."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import hostile_cases
from conftest import ROOT


@pytest.fixture(scope="module")
def inject(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile")
    hostile_cases.inject(out)
    return out / "inject"


def _run(*args):
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("case", ["rich_markup_process", "rich_markup_prom", "rich_markup_folder/job[/]"])
def test_console_markup_in_log_values_is_printed_literally(inject, tmp_path, case):
    res = _run("report", str(inject / case), "-o", str(tmp_path / "c.html"))
    assert res.returncode == 0 and "Traceback" not in res.stderr and "verdict:" in res.stderr, res.stderr


def test_terminal_escapes_never_reach_the_terminal(inject, tmp_path):
    job = next((inject / "ansi_job").iterdir())
    res = _run("report", str(job), "-o", str(tmp_path / "c.html"))
    assert "Traceback" not in res.stderr and "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "\\x1b]0;pwned-title" in res.stderr
    res = _run("sniff", str(job))
    assert res.returncode == 0 and "\x1b" not in res.stdout and "\x07" not in res.stdout


def test_formulas_reach_no_csv(inject, tmp_path):
    """D-I2: a cell starting = + - @ tab or CR is run by a spreadsheet: summary.csv and the timeline CSVs
    prefix it with '."""
    import csv

    from forensics import scan as sc
    from forensics.options import Options

    out = tmp_path / "scan"
    sc.run_scan(sc.ScanConfig(archive=inject / "scan_archive", out_dir=out, workers=1, reports="none",
                              opts=Options(tz="UTC", tz_from_user=True)))
    res = _run("timeline", str(inject / "formula_lines"), "-o", str(tmp_path / "tl.csv"))
    assert res.returncode == 0, res.stderr
    cells = []
    for p in (out / "summary.csv", tmp_path / "tl.samples.csv", tmp_path / "tl.events.csv"):
        with open(p, newline="") as fh:
            cells += [c for row in list(csv.reader(fh))[1:] for c in row]
    assert any(c.startswith("'=") for c in cells)
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _number(c))]


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _inline_tokens(md: str):
    """The text a linkifier reads: markdown-it's text tokens before text_join merges the escaped
    characters back in (linkify runs before it), as GFM's autolinker reads cmark's text nodes."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable("table")
    parser.disable("text_join")
    toks = parser.parse(md)
    return toks, [c for t in toks if t.type == "inline" for c in t.children]


# what GFM autolinks or markdown-it's linkify (linkify-it's defaults, fuzzy links on) would turn into a
# link in a text node: a scheme, `//`, `www.`, `mailto:`, a domain ending in a 2-letter or a default gTLD
_LINKABLE = (r"(?i:[a-z]://|//|www\.|mailto:|\w\.(?:[a-z]{2}|biz|com|edu|gov|net|org|pro|web|xxx|aero|asia|coop"
             r"|info|museum|name|shop)(?![\w-]))")


@pytest.mark.parametrize("case", ["md_heading/# Heading injected", "md_job"])
def test_markdown_from_folder_names_and_log_text_renders_as_text(inject, tmp_path, case):
    """D-I4: a `# Heading` folder became an <h1> in the Problems list; `[click](https://…)` in a log
    line, escaped for CommonMark, was still a link under GFM's linkify."""
    import re

    where, name = (inject / case).parent, (inject / case).name
    res = subprocess.run([sys.executable, "-m", "forensics", "report", name, "-o", "", "--md", str(tmp_path / "r.md")],
                         capture_output=True, text=True, timeout=300, cwd=where,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "r.md").read_text()
    toks, inline = _inline_tokens(md)
    assert {t.tag for t in toks if t.type == "heading_open"} <= {"h2", "h3"}
    assert not [t for t in inline if t.type in ("link_open", "image", "html_inline")]
    assert not [t.content for t in inline if t.type == "text" and re.search(_LINKABLE, t.content)]
    assert ("Heading injected" if "Heading" in case else "evil.example") in md   # (shown, as text)


@pytest.mark.parametrize("text", ["# H", "## H", "1. item", "7) item", "- item", "+ item", "---", "==="])
def test_markdown_text_starts_no_block(text):
    from markdown_it import MarkdownIt

    from forensics.report.markdown import md_text

    toks = MarkdownIt("commonmark").parse("para\n" + md_text(text) + "\n\n- " + md_text(text))
    assert [t.type for t in toks] == ["paragraph_open", "inline", "paragraph_close", "bullet_list_open",
                                      "list_item_open", "paragraph_open", "inline", "paragraph_close",
                                      "list_item_close", "bullet_list_close"]
    assert [t.content.replace("\\", "") for t in toks if t.type == "inline"] == ["para\n" + text, text]
