"""The report: context as plain data, escaping, no external resource, bounded size, Markdown, JSON."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

import forensics
from forensics import report
from forensics.report import limits
from forensics.report.formatting import Clock
from forensics.report.html import _BytecodeCache, _new_env, script_json
from forensics.report.markdown import _fence, md_text
from forensics.report.series import sparkline
from forensics.report.svg import svg_model
from forensics.detect.findings import VERDICTS
from forensics.model import Bundle
from forensics.model import samples_frame
from test_report_cases import (GiB, MiB, T0, XSS_LINE, XSS_NAME, XSS_PATH, empty_case, leak_case, no_leak_case,
                               opts, worst_day_case)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def leak():
    bundle, analysis = leak_case()
    ctx = report.build_context(bundle, analysis, opts())
    return bundle, analysis, ctx


@pytest.fixture(scope="module")
def leak_html(leak):
    return report.render_html(leak[2])


def _walk_plain(value, path="ctx"):
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            _walk_plain(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str), f"{path}: key {k!r} is not a str"
            _walk_plain(v, f"{path}.{k}")
        return
    raise AssertionError(f"{path} is a {type(value).__name__}, not plain data")


# ---- the context -----------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [leak_case, no_leak_case, empty_case])
def test_context_is_plain_data(make):
    bundle, analysis = make()
    ctx = report.build_context(bundle, analysis, opts())
    _walk_plain(ctx)
    assert json.loads(json.dumps(ctx)) == ctx


def test_verdict_banner_has_the_numbers_that_matter(leak):
    _, _, ctx = leak
    v = ctx["verdict"]
    assert (v["code"], v["tone"]) == ("leak", "critical")
    numbers = {n["label"]: n for n in v["numbers"]}
    assert numbers["Onset"]["value"] == "2024-06-01 12:00:00 CEST"          # 10:00 UTC in Berlin summer time
    assert numbers["Onset"]["sub"] == "2024-06-01 10:00:00 UTC"
    assert numbers["Growth rate"]["value"] == "15.00 GiB/h"
    assert numbers["Peak"]["value"] == "74.01 GiB" and "80.00 GiB (93%)" in numbers["Peak"]["sub"]
    assert numbers["Time to exhaustion"]["value"] == "4 h 00 min"
    # the CUDA OOM came 25 s before the kernel killed the process: it is what ended the job
    assert numbers["What ended the job"]["value"].startswith("CUDA out of memory")
    assert numbers["What ended the job"]["sub"] == "logs/stderr.txt:900"


def test_charts_per_gpu_and_per_process(leak):
    _, _, ctx = leak
    titles = [c["title"] for c in ctx["charts"]]
    assert titles[:2] == ["GPU 0", "GPU 1"]
    assert f"Process 4242 ({XSS_NAME})" in titles and "Process 5151 (python worker.py)" in titles
    assert "train.log, by step (no clock)" in titles
    gpu0, gpu1 = ctx["charts"][0], ctx["charts"][1]
    assert gpu0["capacity"] == 80 * GiB and gpu0["capacity_drawn"]
    kinds0 = {m["kind"] for m in gpu0["markers"]}
    kinds1 = {m["kind"] for m in gpu1["markers"]}
    assert {"oom_kill", "gpu_oom", "marker"} <= kinds0 and "xid" not in kinds0
    # the OOM-killed pid ran on GPU 0 only; the Xid was on GPU 1
    assert "oom_kill" not in kinds1 and "xid" in kinds1
    onset = datetime(2024, 6, 1, 10, 0, tzinfo=timezone.utc).timestamp()
    assert [o["x"] for o in gpu0["onsets"]] == [onset]
    assert gpu0["change_points"] == [onset]
    assert gpu0["series"][0]["classification"] == "linear growth"
    # the kill 5 s after the last sample widens the range so it is drawn
    assert gpu0["x1"] == (T0 + timedelta(hours=6, seconds=5)).timestamp()
    step = next(c for c in ctx["charts"] if c["xkind"] == "step")
    assert step["change_points"] == [50, 100, 150] and step["onsets"][0]["x"] == 50
    assert step["markers"] == []


def test_drawn_points_are_bounded_and_keep_peaks():
    n = 200_000
    rows = pl.DataFrame({
        "time": pl.datetime_range(T0, T0 + timedelta(seconds=n - 1), timedelta(seconds=1), eager=True,
                                  time_unit="us"),
        "seq": pl.int_range(0, n, eager=True), "line": pl.int_range(1, n + 1, eager=True),
        "bytes": pl.Series([GiB] * n).scatter([123_457], [5 * GiB]),
    }).with_columns(pl.lit("a.csv").alias("source"), pl.lit("0").alias("gpu"), pl.lit("memory.used").alias("series"))
    bundle = Bundle(samples=samples_frame(rows))
    ctx = report.build_context(bundle, SimpleNamespace(verdict="no_leak", findings=[], series=[]), opts("UTC"))
    s = ctx["charts"][0]["series"][0]
    pts = [p for run in s["runs"] for p in run]
    assert len(pts) <= 2 * limits.PLOT_BUCKETS
    assert max(p[1] for p in pts) == 5 * GiB          # a one-second spike survives downsampling
    assert len(pts) < 10                               # a flat line needs few points


def test_a_long_gap_breaks_the_line():
    rows = [{"time": T0 + timedelta(seconds=10 * i), "seq": i, "source": "a", "line": i, "gpu": "0",
             "series": "memory.used", "bytes": GiB + i * MiB} for i in list(range(100)) + list(range(900, 1000))]
    ctx = report.build_context(Bundle(samples=samples_frame(rows)),
                               SimpleNamespace(verdict="no_leak", findings=[], series=[]), opts("UTC"))
    assert len(ctx["charts"][0]["series"][0]["runs"]) == 2


def test_detector_series_may_be_keyed_by_dict_or_object():
    for key in ({"source": "run/nvidia-smi.log", "host": None, "gpu": "0", "pid": None, "series": "memory.used",
                 "label": None},
                SimpleNamespace(source="run/nvidia-smi.log", host=None, gpu="0", pid=None, series="memory.used",
                                label=None)):
        bundle, analysis = no_leak_case()
        analysis.series = [SimpleNamespace(key=key, classification="sawtooth", change_points=[T0 + timedelta(minutes=5)],
                                           onset=None)]
        ctx = report.build_context(bundle, analysis, opts())
        c = ctx["charts"][0]
        assert c["series"][0]["classification"] == "sawtooth"
        assert c["change_points"] == [(T0 + timedelta(minutes=5)).timestamp()]


def test_zoom_panels_around_onset_and_end(leak):
    _, _, ctx = leak
    zooms = {z["zoom"]: z for z in ctx["zooms"]}
    assert set(zooms) == {"onset", "end"}
    onset = datetime(2024, 6, 1, 10, 0, tzinfo=timezone.utc).timestamp()
    assert zooms["onset"]["x0"] < onset < zooms["onset"]["x1"]
    assert [o["x"] for o in zooms["onset"]["onsets"]] == [onset]
    # the close-up's y axis spans the data, not 0..capacity
    assert zooms["onset"]["y_min"] > 10 * GiB and not zooms["onset"]["capacity_drawn"]
    assert {m["kind"] for m in zooms["end"]["markers"]} >= {"oom_kill", "gpu_oom"}
    assert zooms["end"]["capacity_drawn"]


def test_findings_carry_evidence_causes_and_checks(leak):
    _, _, ctx = leak
    first = ctx["findings"][0]
    assert first["kind"] == "leak" and first["severity"] == "critical"
    assert first["evidence"][0] == {"path": "logs/nvidia-smi.csv", "line": 1442,
                                    "text": "2024/06/01 12:00:00.000, 0, 14336 MiB, 81920 MiB"}
    assert first["causes"] and first["checks"][1] == XSS_LINE
    facts = dict(first["facts"])
    assert facts["Rate"] == "15.00 GiB/h" and facts["Growth"] == "60.00 GiB"
    assert ["Baseline", "14.00 GiB"] in first["details"]   # keys said in words (#29), bytes as bytes
    san = next(f for f in ctx["findings"] if f["kind"] == "sanitizer_leak")
    assert len(san["evidence"]) == limits.MAX_EVIDENCE and san["evidence_more"] == 12 - limits.MAX_EVIDENCE
    assert [f["severity"] for f in ctx["findings"]] == sorted(
        [f["severity"] for f in ctx["findings"]], key=lambda s: {"critical": 0, "warning": 1, "info": 2}[s])


def test_sanitizer_leaks_grouped_by_stack_user_frames_first(leak):
    _, _, ctx = leak
    san = ctx["sanitizer"]
    assert san["allocations"] == 6 and san["expected_allocations"] == 1
    first, second = san["groups"]
    assert (first["count"], first["bytes"], first["expected"]) == (5, 5 * 512 * MiB, False)
    assert first["site"] == "make_buffer(int) in train_ext.so"
    assert first["user_frames"] == ["make_buffer(int) in train_ext.so", "main in train"]
    assert first["library_frames"] == ["cudaMalloc in libcudart.so.12"]
    assert first["evidence"]["path"] == "logs/sanitizer.txt" and first["evidence"]["line"] == 40
    assert second["expected"] and second["user_frames"] == []


def test_oom_kill_gpu_oom_and_xid_details(leak):
    _, _, ctx = leak
    kill = ctx["oom_kills"]["rows"][0]
    assert kill["pid"] == 4242 and kill["process"] == XSS_NAME
    facts = dict(kill["facts"])
    assert facts["Anonymous RSS"] == "75.00 GiB" and facts["Scope"] == "global"
    assert facts["Memcg"] == "/system.slice/job-42.scope"
    oom = ctx["gpu_ooms"]["rows"][0]
    assert oom["gpu"] == "0" and oom["bytes_text"] == "2.00 GiB" and dict(oom["facts"])["Free"] == "300.00 MiB"
    xid = ctx["xids"]["groups"][0]
    assert (xid["gpu"], xid["code"], xid["meaning"], xid["count"], xid["fatal"]) == (
        "1", "31", "GPU memory page fault", 1, False)


def test_inputs_table_counts_and_reasons(leak):
    _, _, ctx = leak
    ins = ctx["inputs"]
    assert (ins["total"], ins["unreadable"], ins["unrecognized"], ins["skipped"]) == (8, 1, 1, 3)
    smi = ins["rows"][0]
    assert smi["skip_reasons"] == [{"reason": "placeholder [N/A]", "count": 2, "examples": [10, 11]},
                                   {"reason": "repeated header", "count": 1, "examples": [400]}]
    assert smi["range"] == {"local": "2024-06-01 10:00:00 → 15:59:50 CEST",
                            "utc": "2024-06-01 08:00:00 → 13:59:50 UTC"}
    assert smi["clock"] == "wall-assumed" and smi["anchor"] == "zone Europe/Berlin (--tz)"
    assert ctx["problems"][1].startswith(XSS_PATH)


def test_report_states_clock_and_unit_choices(leak):
    _, _, ctx = leak
    notes = " ".join(ctx["clock_notes"])
    assert "Times are shown in Europe/Berlin (UTC+02:00 when the data starts) and in UTC" in notes
    assert "--tz" in notes and "MiB/GiB" in notes
    assert "drawn by step or sample number" in notes
    ctx2 = report.build_context(*no_leak_case(), SimpleNamespace(tz="UTC", tz_from_user=False))
    assert "this machine's zone" in ctx2["clock_notes"][0]


def test_empty_report_says_nothing_was_readable_and_why():
    bundle, analysis = empty_case()
    ctx = report.build_context(bundle, analysis, opts())
    assert ctx["empty"] and ctx["charts"] == [] and ctx["verdict"]["tone"] == "empty"
    assert ctx["empty_reasons"] == [
        "job/core.gz: cannot decompress, the gzip stream is truncated, copy the file again",
        "job/notes.txt: no parser recognizes its first lines",
        "job/empty.log: empty file",
    ]
    html = report.render_html(ctx)
    assert "Nothing readable" in html and "the gzip stream is truncated" in html
    md = report.render_markdown(ctx)
    assert "nothing readable" in md and "job/notes.txt" in md
    none = report.build_context(Bundle(), analysis, opts())
    assert none["empty_reasons"] == ["No input files were given or found."]
    report.render_html(none)


def test_analysis_may_be_empty_or_odd():
    bundle, _ = leak_case()
    for analysis in (SimpleNamespace(verdict=None, findings=None, series=None), SimpleNamespace()):
        ctx = report.build_context(bundle, analysis, None)
        assert ctx["verdict"]["code"] == "inconclusive" and ctx["zone"]["name"] == "UTC"
        report.render_html(ctx)
        report.render_markdown(ctx)


# ---- HTML: escaping and self-containment -----------------------------------------------------------

class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self._in = tag if tag in ("script", "style") else None

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)


ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "nav", "main", "section", "article", "footer",
    "h1", "h2", "h3", "h4", "p", "ul", "ol", "li", "dl", "dt", "dd", "div", "span", "small", "strong", "em", "a",
    "br", "wbr", "code", "time", "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "figure",
    "figcaption", "output", "script", "colgroup", "col",
    "svg", "rect", "line", "text", "path", "g", "circle",
}
URL_ATTRS = {"src", "href", "xlink:href", "action", "formaction", "srcset", "poster", "data", "background",
             "ping", "manifest", "cite", "codebase", "longdesc", "usemap", "icon", "lowsrc", "dynsrc"}


def _parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    p.close()
    return p


def test_html_has_no_reference_to_anything_outside_itself(leak_html):
    p = _parse(leak_html)
    for tag, attrs in p.tags:
        assert tag in ALLOWED_TAGS, tag
        for name, value in attrs:
            if name in URL_ATTRS:
                assert value is not None and value.startswith("#"), (tag, name, value)
            if name == "style":
                assert "url(" not in value.lower() and "@import" not in value.lower()
    css = " ".join(p.styles).lower()
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    # the policy forbids every load, even if something slipped through
    csp = next(dict(a)["content"] for t, a in p.tags if t == "meta" and dict(a).get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    # the only scripts: the escaped JSON summary (not executable) and ours, allowed by hash
    scripts = [(t, dict(a)) for t, a in p.tags if t == "script"]
    assert [a.get("type") for _, a in scripts] == ["application/json", None]
    assert not re.search(r"https?://|//[a-z]", " ".join(p.scripts[1:]))


def test_log_text_is_escaped_everywhere(leak_html, leak):
    html = leak_html
    for raw in (XSS_NAME, XSS_LINE, XSS_PATH, "<img", "<svg onload"):
        assert raw not in html, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    p = _parse(html)
    for tag, attrs in p.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
    # inside SVG: the process chart's aria-label and <title>, the markers' tooltips
    chart = re.search(r'<svg class="chart"[^>]*aria-label="Process 4242 \(([^"]*)\)"', html)
    assert chart and chart.group(1) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert "<title>OOM kill (&lt;script&gt;alert(1)&lt;/script&gt;, pid 4242)" in html
    # the JSON block: no way out of the script element
    block = html.split('<script type="application/json" id="gpu-forensics-summary">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block
    data = json.loads(block)
    kill = next(f for f in data["findings"] if f["kind"] == "oom_kill")
    assert kill["summary"] == f"The kernel OOM killer killed pid 4242 ({XSS_NAME})"
    assert len(re.findall(r"<script\b", html)) == 2


def test_script_json_cannot_close_its_element():
    text = script_json({"a": "</script><!-- <script>&\u2028\u2029"})
    assert "</" not in text and "<!--" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- <script>&\u2028\u2029"}


def test_script_hash_in_policy_matches_the_script(leak_html):
    import base64
    import hashlib
    script = leak_html.split("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in leak_html


def test_time_axis_in_the_users_zone_and_utc(leak):
    _, _, ctx = leak
    model = svg_model(ctx["charts"][0], Clock("Europe/Berlin"), 260)
    labels = [(t["label"], t["utc"]) for t in model["xticks"]]
    assert ("12:00", "10:00Z") in labels
    assert model["unit"] == "GiB" and model["capacity"] is not None
    assert [t["label"] for t in model["yticks"]][:3] == ["0", "20 GiB", "40 GiB"]
    utc = svg_model(ctx["charts"][0], Clock("UTC"), 260)
    assert all(t["utc"] is None for t in utc["xticks"])


def test_html_renders_sections(leak_html):
    for heading in ("Timeline", "Close-ups", "Findings", "Out of memory", "compute-sanitizer leaks by allocation stack",
                    "NVIDIA Xid errors (1)", "Events", "Inputs", "Problems", "How to read this report"):
        assert f">{heading}</h2>" in leak_html, heading
    assert "logs/kern.log:120" in leak_html and "expected: allocator cache at exit" in leak_html


# ---- the worst day: size and caps ------------------------------------------------------------------

def test_worst_day_report_stays_small():
    bundle, analysis = worst_day_case()
    started = time.perf_counter()
    ctx = report.build_context(bundle, analysis, opts())
    html = report.render_html(ctx)
    md = report.render_markdown(ctx)
    elapsed = time.perf_counter() - started
    size = len(html.encode())
    assert size < 500_000, size
    assert len(md.encode()) < 60_000
    assert elapsed < 30
    assert len([c for c in ctx["charts"] if c["kind"] == "gpu"]) == 8
    assert len([c for c in ctx["charts"] if c["kind"] == "process"]) == limits.MAX_PROCESS_CHARTS
    assert len(ctx["charts_omitted"]) == 40 - limits.MAX_PROCESS_CHARTS
    assert len(ctx["findings"]) == limits.MAX_FINDINGS
    assert sum(o["count"] for o in ctx["findings_omitted"]) == 300 - limits.MAX_FINDINGS
    assert len(ctx["events"]["rows"]) == limits.MAX_EVENT_ROWS and ctx["events"]["omitted"] > 4000
    assert len(ctx["inputs"]["rows"]) == limits.MAX_INPUT_ROWS and ctx["inputs"]["omitted"] == 600 - limits.MAX_INPUT_ROWS
    assert len(ctx["problems"]) == limits.MAX_PROBLEMS and ctx["problems_omitted"] == 400
    assert ctx["sanitizer"]["groups_omitted"] > 0
    assert all(len(c["markers"]) <= limits.MAX_MARKERS_PER_CHART for c in ctx["charts"])
    assert ctx["summary"]["findings_omitted"] == 300 - limits.EMBED_FINDINGS
    assert ctx["summary"]["inputs_omitted"] == 600 - limits.EMBED_INPUTS
    for raw in (XSS_NAME, XSS_LINE):
        assert raw not in html


# ---- Markdown and JSON -----------------------------------------------------------------------------

def _outside_fences(md: str) -> str:
    out, fence = [], None
    for line in md.splitlines():
        m = re.match(r"\s*(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        out.append(line)
    return "\n".join(out)


def test_markdown_summary(leak):
    _, _, ctx = leak
    md = report.render_markdown(ctx)
    assert md.startswith("## GPU memory report: Memory leak\n")
    assert "| Growth rate | 15.00 GiB/h |" in md
    assert re.search(r"GPU 0, memory\.used: `[▁▂▃▄▅▆▇█ ]+` 14\.00 GiB → 74\.01 GiB", md)
    assert "   logs/nvidia-smi.csv:1442: 2024/06/01 12:00:00.000, 0, 14336 MiB, 81920 MiB" in md
    # hostile text is inert outside code blocks; inside them it is literal
    outside = _outside_fences(md)
    assert "<" not in outside and ">" not in outside.replace("→", "")
    assert f"logs/kern.log:120: Out of memory: Killed process 4242 ({XSS_NAME})" in md


def test_markdown_fence_outgrows_backticks_in_log_text():
    block = _fence(["a ``` b", "````"])
    assert block.splitlines()[0] == "`````text" and block.splitlines()[-1] == "`````"
    assert md_text("a|b *c* [d](e) <x> `f`") == r"a\|b \*c\* \[d\](e) &lt;x&gt; \`f\`"


def test_markdown_sparkline_shape():
    runs = [[[0, 1000], [50, 1050], [100, 1100]]]   # far below any capacity: the shape still shows
    line = sparkline(runs, 0, 100)
    assert len(line) == limits.SPARK_CELLS and line[0] == "▁" and line[-1] == "█"
    assert list(line) == sorted(line)
    assert sparkline([[[0, 5], [10, 5]], [[90, 5], [100, 5]]], 0, 100).count(" ") > 10
    assert set(sparkline([[[0, 1000], [100, 1010]]], 0, 100)) == {"▁"}   # flat within 2 %


def test_summary_json_is_the_public_contract(leak):
    bundle, analysis, _ = leak
    s = report.summary(bundle, analysis)
    assert list(s)[:5] == ["tool", "version", "verdict", "inputs", "findings"]
    assert s["tool"] == "gpu-forensics" and s["version"] == forensics.__version__ and s["verdict"] in VERDICTS
    assert set(s["inputs"][0]) >= {"path", "format", "lines", "records", "skipped", "start", "end", "error"}
    assert s["inputs"][0]["start"] == "2024-06-01T08:00:00Z"
    f = s["findings"][0]
    assert set(f) >= {"kind", "severity", "summary", "gpu", "pid", "series", "pattern", "start", "end", "start_index",
                      "rate_bytes_per_hour", "rate_bytes_per_step", "growth_bytes", "bytes", "evidence"}
    assert f["start"] == "2024-06-01T10:00:00Z" and f["evidence"][0] == {
        "path": "logs/nvidia-smi.csv", "line": 1442, "text": "2024/06/01 12:00:00.000, 0, 14336 MiB, 81920 MiB"}
    json.dumps(s)
    assert len(s["findings"][4]["evidence"]) == 12   # the JSON keeps everything; only the HTML caps


# ---- output and packaging --------------------------------------------------------------------------

def test_templates_load_from_the_installed_package_layout(tmp_path):
    """In a wheel the templates sit at forensics/templates (pyproject force-include)."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "forensics", site / "forensics", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", site / "forensics" / "templates")
    code = (f"import sys; sys.path.append({str(ROOT / 'tests')!r});"
            "from forensics import report; from test_report_cases import leak_case, opts;"
            "from forensics.report.html import template_dirs; d = template_dirs(); assert d[0].as_posix().endswith('site/forensics/templates'), d;"
            "b, a = leak_case(); h = report.render_html(report.build_context(b, a, opts()));"
            "assert 'Memory leak' in h; print('ok')")
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


# -- compiled templates kept between runs (html._BytecodeCache) -----------------------------------

def _compiles(env, monkeypatch) -> int:
    """How often env compiles report.html.j2 from its source when asked for it."""
    calls = []
    compile_ = env.compile
    monkeypatch.setattr(env, "compile", lambda *a, **k: calls.append(1) or compile_(*a, **k))
    env.get_template("report.html.j2")
    return len(calls)


def test_compiled_report_template_is_kept_between_runs(tmp_path, monkeypatch):
    cache = _BytecodeCache(str(tmp_path))
    assert _compiles(_new_env(cache), monkeypatch) == 1
    assert len(list(tmp_path.glob("__jinja2_*.cache"))) == 1
    assert _compiles(_new_env(cache), monkeypatch) == 0   # a later run (a new environment) loads it


def test_a_damaged_or_unwritable_template_cache_is_passed_over(tmp_path, monkeypatch):
    from jinja2.bccache import bc_magic

    cache = _BytecodeCache(str(tmp_path))
    _new_env(cache).get_template("report.html.j2")
    for damage in (b"garbage", bc_magic + b"\x80\x04garbage", bc_magic):
        for f in tmp_path.glob("__jinja2_*.cache"):
            f.write_bytes(damage)
        assert _compiles(_new_env(cache), monkeypatch) == 1
    gone = _BytecodeCache(str(tmp_path / "missing" / "folder"))   # every write fails
    assert _compiles(_new_env(gone), monkeypatch) == 1
    assert _compiles(_new_env(gone), monkeypatch) == 1


def test_the_free_fall_series_is_named_where_it_is_shown():
    """free.fall (memory in use read from free memory's fall) is not a name a reader knows: the chart's legend
    and line, the onset and change point marks, the finding's facts and the Markdown's series line say what it
    is, in the words of the finding's sentence (leaks.SERIES_WORDS)."""
    from forensics import pipeline
    from forensics.detect.leaks import SERIES_WORDS
    from forensics.options import Options
    words = SERIES_WORDS["free.fall"]
    shown = words.replace("'", "&#39;")   # (as the template escapes it)
    bundle, analysis = pipeline.run([str(ROOT / "tests" / "samples" / "nvidia-smi-csv" / "nvsmi_csv_free_only_leak.txt")],
                                    Options(tz="UTC"))
    ctx = report.build_context(bundle, analysis, opts())
    chart = next(c for c in ctx["charts"] if any(s["series"] == "free.fall" for s in c["series"]))
    assert [s["name"] for s in chart["series"] if s["series"] == "free.fall"] == [words]
    assert [o["series"] for o in chart["onsets"]] == [words] and chart["lead"] == words
    page = report.render_html(ctx)
    legend = page[page.index('<div class="legend">'):]
    assert shown in legend[:legend.index("</div>")]
    assert f"<dt>Where</dt><dd>GPU 0, {shown}</dd>" in page
    assert f", {md_text(words)}: `" in report.render_markdown(ctx)
