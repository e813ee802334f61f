"""Hostile input cannot run code, read files, write outside the output, or leave a half-written file.

- Log text (process names, file names, frame names, whole lines) is escaped in every output: the HTML
  report, the JSON embedded in its script tag, the Markdown summary, the scan index page.
- XML is read with a hardened parser: entity expansion and external entities are refused.
- No code-executing loader (pickle, marshal, eval, yaml.load, torch.load, np.load with pickles) is in
  the source; a pickle given as input is read as plain data (a PyTorch memory snapshot) or refused,
  never loaded: a payload that would run code is refused at its first opcode that names an object.
- Outputs are written atomically (temp file + rename): a failure mid-write leaves the old file whole;
  the scan's job folders cannot leave the output folder whatever the job folders are called.
"""
from __future__ import annotations

import ast
import errno
import json
import os
import pickle
import re
import sys
import time
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from forensics import ingest
from forensics.report import write as outputs
from forensics import pipeline
from forensics import report
from forensics import scan as sc
from forensics.errors import InputError
from forensics.detect.findings import Evidence, Finding
from forensics.options import Options
from forensics.io.sources import Source

ROOT = Path(__file__).resolve().parent.parent
UTC = Options(tz="UTC")

H_SCRIPT = "<script>alert(1)</script>"
H_IMG = '"><img src=x onerror=alert(1)>'
H_CLOSE = "</script><script>alert(3)</script>"
H_JS = "javascript:alert(4)"
H_SVG = "'><svg/onload=alert(5)>"
H_MD = "](javascript:alert(6)) [x](javascript:alert(7)) <javascript:alert(8)> ``` `code` *b* | p"
H_MISC = "</ScRiPt ><!-- \u2028\u2029 {{7*7}} &lt;"
HOSTILE = [H_SCRIPT, H_IMG, H_CLOSE, H_JS, H_SVG, H_MD, H_MISC]


# -- hostile inputs -----------------------------------------------------------------------------------

def write_hostile_job(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    t0 = datetime(2026, 11, 30, 3, 0, 0)
    rows = ["timestamp, index, name, memory.total [MiB], memory.used [MiB]"]
    for i in range(120):
        t = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        rows.append(f"{t}, 0, {H_IMG.replace(',', ' ')}, 143771 MiB, {20000 + 64 * i} MiB")
    (folder / "gpu.csv").write_text("\n".join(rows) + "\n")
    apps = ["timestamp, gpu_name, pid, process_name, used_gpu_memory [MiB]"]
    for i in range(60):
        t = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        apps.append(f"{t}, NVIDIA H200, 4242, {H_SCRIPT}, {1000 + 50 * i} MiB")
        apps.append(f"{t}, NVIDIA H200, 4343, {H_CLOSE}, {900 + 40 * i} MiB")
    (folder / "apps.csv").write_text("\n".join(apps) + "\n")
    # the file name itself is hostile, and so is the killed process
    (folder / f"{H_IMG}.log").write_text(
        f"2026-11-30T03:04:01.300000+00:00 gpuhost kernel: Out of memory: Killed process 4242 ({H_SCRIPT}) "
        "total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69000kB oom_score_adj:0\n"
        f"2026-11-30T03:04:02.300000+00:00 gpuhost kernel: NVRM: Xid (PCI:0000:0a:00): 79, pid=4242, name={H_SVG}, GPU has fallen off the bus.\n")
    (folder / "sanitizer.txt").write_text(
        "========= COMPUTE-SANITIZER\n"
        "========= Leaked 1,048,576 bytes at 0x7f0000000000\n"
        "=========     Saved host backtrace up to driver entry point at allocation time\n"
        "=========         Host Frame: cudaMalloc [0x527bb] in leaky\n"
        f"=========         Host Frame: {H_CLOSE}(int) [0x89bb] in {H_IMG}\n"
        f"=========         Host Frame: main{H_MD} [0x8a00] in leaky\n"
        "========= \n"
        "========= LEAK SUMMARY: 1048576 bytes leaked in 1 allocations\n")
    lines = [f"[step {s}] allocated: {18000 + 64 * s:.2f} MB, cached: {20000 + 64 * s:.2f} MB {H_MD}" for s in range(60)]
    lines.append(f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                 f"79.15 GiB of which 1.00 MiB is free. Process 4242 has 79.14 GiB memory in use. {H_SCRIPT}{H_MISC}")
    (folder / "train.log").write_text("\n".join(lines) + "\n")
    (folder / "<script>alert(2)<.bin").write_bytes(b"\x7fELF" + bytes(range(256)) * 4)  # an error naming it
    return folder


def hostile_outputs(tmp_path: Path) -> tuple[str, str, dict]:
    """The job through the pipeline, plus a finding and input notes made of hostile text in every
    text field, rendered to HTML, Markdown and the JSON summary."""
    bundle, analysis = pipeline.run([str(write_hostile_job(tmp_path / "job"))], UTC)
    # H_MD first: the Markdown shows the first evidence lines, and its ``` must not close the fence
    ev = [Evidence(path=f"{h}.log", line=7, text=h) for h in [H_MD, *HOSTILE]]
    analysis.findings.insert(0, Finding(
        kind="leak", severity="critical", summary=" ".join(HOSTILE), gpu=H_IMG, pid=4242, series=H_SCRIPT,
        pattern="linear", start=datetime(2026, 11, 30, 3, 0, 0), rate_bytes_per_hour=1e9, growth_bytes=1 << 30,
        bytes=1 << 30, evidence=ev, causes=list(HOSTILE), checks=list(HOSTILE), related=list(HOSTILE),
        source=H_CLOSE, detail={"label": H_SCRIPT, "process": H_IMG, "site": H_CLOSE}))
    analysis.verdict_reason = H_SCRIPT + " " + H_MD
    for info in bundle.inputs:
        info.notes.append(H_CLOSE + H_MD)
        info.skip_reasons = dict(info.skip_reasons) | {H_IMG: 1}
        info.skipped += 1
        info.anchor = H_SVG
        info.reason = H_SCRIPT
    bundle.problems.append(f"{H_IMG}.log:3: {H_SCRIPT}, {H_MD}, {H_JS}")
    ctx = report.build_context(bundle, analysis, UTC)
    return report.render_html(ctx), report.render_markdown(ctx), report.summary(bundle, analysis)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return hostile_outputs(tmp_path_factory.mktemp("hostile"))


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text.append(data)


def assert_html_inert(html: str, expect_scripts: int | None) -> _Tags:
    """No markup of the log's making: no foreign tags, no event handlers, no javascript: URLs, and
    the only scripts are our own."""
    for raw in ("<script>alert", "<img src=x", "</script><script>", "<svg/onload", "<!-- \u2028"):
        assert raw not in html, f"unescaped {raw!r} in the HTML"
    p = _Tags()
    p.feed(html)
    names = {t for t, _ in p.tags}
    assert not names & {"img", "iframe", "object", "embed", "form", "base", "link", "frame", "input"}, names
    for tag, attrs in p.tags:
        for k, v in attrs.items():
            assert not k.lower().startswith("on"), f"event handler {k} on <{tag}>"
            if k.lower() in ("href", "src", "action", "formaction", "xlink:href", "data"):
                assert not (v or "").strip().lower().startswith(("javascript:", "data:text/html", "vbscript:")), (tag, k, v)
    scripts = [a for t, a in p.tags if t == "script"]
    if expect_scripts is not None:
        assert len(scripts) == expect_scripts, scripts
    for a in scripts:
        assert a in ({}, {"type": "application/json", "id": "gpu-forensics-summary"}), a
    return p


def test_html_report_escapes_log_text(rendered):
    html, _, _ = rendered
    assert_html_inert(html, expect_scripts=2)
    # the hostile text did reach the page (escaped), so the test is not vacuous
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html or "&quot;&gt;&lt;img src=x" in html


def test_json_in_the_script_tag_cannot_close_it(rendered):
    html, _, summary = rendered
    m = re.search(r'<script type="application/json" id="gpu-forensics-summary">(.*?)</script>', html, re.S)
    assert m, "no embedded JSON summary"
    body = m.group(1)
    assert "</" not in body and "<!--" not in body and "\u2028" not in body and "<" not in body
    data = json.loads(body)
    assert H_CLOSE in json.dumps(data, ensure_ascii=False)  # kept, just escaped
    assert data["verdict"] == summary["verdict"]


def _outside_code(md: str) -> list[str]:
    """The Markdown lines that render as markup: outside fenced blocks, with inline code removed."""
    out, fence = [], None
    for line in md.splitlines():
        s = line.lstrip(" ")
        run = re.match(r"(`{3,}|~{3,})", s)
        if fence is None and run and len(line) - len(s) <= 3:
            fence = run.group(1)
            continue
        if fence is not None:
            if s.startswith(fence) and not s[len(fence):].strip():
                fence = None
            continue
        out.append(re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", line))
    assert fence is None, "a fenced block is never closed"
    return out


def test_markdown_neutralizes_html_and_links(rendered):
    _, md, _ = rendered
    rendering = _outside_code(md)
    for line in rendering:
        assert not re.search(r"<[A-Za-z/!?]", line), f"raw HTML in Markdown: {line}"
        assert not re.search(r"(?<!\\)\]\(", line), f"a Markdown link: {line}"
        assert "<javascript:" not in line.lower()
    text = "\n".join(rendering)
    assert "&lt;script&gt;alert(1)" in text or "alert(1)" in md  # it reached the summary
    # log lines quoted as evidence sit in fenced blocks whose fence outlasts any backtick run inside
    assert "```" in md


def test_scan_index_escapes_and_job_ids_stay_inside_the_output(tmp_path):
    arch = tmp_path / "archive"
    names = [H_IMG, "<script>alert(1)<", "jöb", "jäb", "x" * 200, "...", "-rf", "job one", "ジョブ"]
    for n in names:
        write_hostile_job(arch / n) if n in (H_IMG, "jöb") else _small_job(arch / n)
    (arch / "<img src=y>").mkdir()
    (arch / "<img src=y>" / "core").write_bytes(b"\x7fELF" + bytes(range(256)) * 4)  # a failed job
    out = tmp_path / "out"
    before = _tree(tmp_path)
    res = sc.run_scan(sc.ScanConfig(archive=arch, out_dir=out, opts=UTC, workers=1))
    # every job but the hidden one ("..." starts with a dot, like .git) is there
    assert len(res.rows) == len([n for n in names if not n.startswith(".")]) + 1, [r["job"] for r in res.rows]
    ids = [r["job"] for r in res.rows]
    assert len(set(ids)) == len(ids), ids  # no two jobs share an output folder
    for jid in ids:
        assert "/" not in jid and jid not in (".", "..") and not jid.startswith(".") and len(jid) < 200, jid
        assert (out / "jobs" / jid).resolve().parent == (out / "jobs").resolve()
    created = _tree(tmp_path) - before
    outside = [p for p in created if not p.startswith(str(out) + os.sep)]
    assert not outside, outside
    assert not [p for p in created if "/." in p[len(str(out)):]], "temp files left behind"
    html = (out / "index.html").read_text()
    assert_html_inert(html, expect_scripts=None)
    assert "archive/&lt;img src=y&gt;/core: binary file" in html  # the failed job's path, escaped
    for jid in ids:
        rep = out / "jobs" / jid / "report.html"
        if rep.exists():
            assert_html_inert(rep.read_text(), expect_scripts=2)


def _small_job(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["index, memory.used [MiB], memory.total [MiB]"] + [f"0, {4000 + i % 3} MiB, 81559 MiB" for i in range(30)]
    (folder / "gpu.csv").write_text("\n".join(rows) + "\n")


def _tree(root: Path) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files}


# -- hardened XML, no code-executing loaders ---------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
<!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
<!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
<!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]>
<ComputeSanitizerOutput><record><kind>Leak</kind><what><text>&lol9;</text><size>1</size></what></record>
</ComputeSanitizerOutput>
"""


@pytest.mark.parametrize("doc", [
    BILLION_LAUGHS,
    '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file://{secret}">]>\n'
    "<ComputeSanitizerOutput><record><kind>Leak</kind><what><text>&x;</text></what></record></ComputeSanitizerOutput>\n",
    '<?xml version="1.0"?>\n<!DOCTYPE r SYSTEM "http://127.0.0.1:9/evil.dtd">\n<ComputeSanitizerOutput/>\n',
    '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY % p SYSTEM "file://{secret}"> %p;]>\n<ComputeSanitizerOutput/>\n',
], ids=["billion-laughs", "external-entity", "external-dtd", "parameter-entity"])
def test_xml_entities_are_refused_through_ingest(tmp_path, doc):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE\n")
    p = tmp_path / "sanitizer.xml"
    p.write_text(doc.replace("{secret}", str(secret)))
    started = time.perf_counter()
    with pytest.raises(InputError) as e:
        ingest.parse_one(Source.open(p, "sanitizer.xml"), UTC)
    assert time.perf_counter() - started < 5
    msg = str(e.value)
    assert msg.startswith("sanitizer.xml") and "\n" not in msg and "TOP-SECRET" not in msg


# Calls that run code or load objects from data: none may exist in the package.
_FORBIDDEN_CALLS = {
    ("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"), ("cPickle", "loads"), ("_pickle", "loads"),
    ("marshal", "load"), ("marshal", "loads"), ("shelve", "open"), ("dill", "load"), ("dill", "loads"),
    ("cloudpickle", "load"), ("cloudpickle", "loads"), ("joblib", "load"), ("torch", "load"),
    ("jsonpickle", "decode"), ("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"), ("yaml", "load_all"),
    ("xml.etree.ElementTree", "parse"), ("xml.etree.ElementTree", "fromstring"), ("xml.etree.ElementTree", "XML"),
    ("xml.etree.ElementTree", "iterparse"), ("xml.etree.ElementTree", "XMLParser"), ("xml.dom.minidom", "parse"),
    ("xml.dom.minidom", "parseString"), ("xml.sax", "parse"), ("xml.sax", "parseString"), ("lxml.etree", "parse"),
    ("lxml.etree", "fromstring"), ("pandas", "read_pickle"),
}
_FORBIDDEN_BUILTINS = {"eval", "exec", "__import__", "compile"}


def _aliases(tree: ast.AST) -> dict[str, str]:
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def forbidden_calls(source: str) -> list[str]:
    tree = ast.parse(source)
    names = _aliases(tree)
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            full = names.get(f.id, f.id)
            if f.id in _FORBIDDEN_BUILTINS and f.id not in names:
                hits.append(f"{f.id}() at line {node.lineno}")
            elif "." in full and tuple(full.rsplit(".", 1)) in _FORBIDDEN_CALLS:
                hits.append(f"{full}() at line {node.lineno}")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, (ast.Name, ast.Attribute)):
            base = ast.unparse(f.value)
            module = names.get(base.split(".")[0], base.split(".")[0]) + base[len(base.split(".")[0]):]
            if (module, f.attr) in _FORBIDDEN_CALLS:
                hits.append(f"{module}.{f.attr}() at line {node.lineno}")
            if f.attr == "load" and module in ("numpy", "np") and any(
                    k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                    for k in node.keywords):
                hits.append(f"numpy.load(allow_pickle) at line {node.lineno}")
    return hits


def test_the_scanner_finds_what_it_looks_for():
    src = ("import pickle, yaml\nimport xml.etree.ElementTree as ET\nimport numpy as np\nfrom marshal import loads\n"
           "pickle.loads(b'')\nyaml.load(s)\nET.fromstring(t)\nnp.load(f, allow_pickle=True)\nloads(b'')\neval('1')\n")
    assert len(forbidden_calls(src)) == 6
    assert forbidden_calls("import defusedxml.ElementTree as SafeET\nSafeET.fromstring(t)\nnp.load(f)\n") == []


def test_no_code_executing_loader_in_the_package():
    hits = {}
    for p in sorted((ROOT / "forensics").rglob("*.py")):
        found = forbidden_calls(p.read_text(encoding="utf-8"))
        if found:
            hits[str(p.relative_to(ROOT))] = found
    assert not hits, hits


def test_a_pickle_given_as_input_is_refused_not_loaded(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "PWNED"),))

    for name in ("state.log", "state.pkl.gz"):
        data = pickle.dumps(Boom(), protocol=4)
        if name.endswith(".gz"):
            import gzip

            data = gzip.compress(data)
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(InputError) as e:
            ingest.parse_one(Source.open(p, name), UTC)
        assert "pickle" in str(e.value) or "binary" in str(e.value)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_a_snapshot_shaped_pickle_with_a_payload_never_runs_it(tmp_path, protocol):
    """Looks like a memory snapshot (its top dict has segments and device_traces), so it is read;
    the payload sits in a trace entry and would create a file if anything loaded it."""
    marker = tmp_path / "PWNED"

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(marker),))

    entry = {"action": "alloc", "addr": 1, "size": 2, "stream": 0, "frames": Boom()}
    p = tmp_path / "snapshot.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [[entry] * 3]}, protocol=protocol))
    if protocol < 2:
        # no protocol header (PyTorch writes protocol 4 or 5): not claimed as a pickle, read as text, not recognized
        info, _ = ingest.parse_one(Source.open(p, "snapshot.pickle"), UTC)
        assert info.format is None or info.format == "text"
    else:
        with pytest.raises(InputError) as e:
            ingest.parse_one(Source.open(p, "snapshot.pickle"), UTC)
        msg = str(e.value)
        assert msg.startswith("snapshot.pickle: not a PyTorch memory snapshot") and "\n" not in msg
        assert "GLOBAL" in msg and "nothing in them runs" in msg
    assert not marker.exists()


def test_every_object_building_opcode_is_refused():
    import io

    from forensics.parsers.torch.snapshot_pickle import BUILDS_OBJECTS, PlainUnpickler, Refused

    for op in sorted(BUILDS_OBJECTS):
        # a protocol header, then the opcode (its arguments do not matter: it is refused on sight)
        data = bytes([0x80, 4, op]) + b"os\nsystem\n" + b"." * 16
        with pytest.raises(Refused):
            PlainUnpickler(io.BytesIO(data).read, 1 << 20).load()


# -- atomic outputs ----------------------------------------------------------------------------------

def _small_input(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _small_job(folder)
    return folder / "gpu.csv"


def _cli(args, monkeypatch, capsys):
    from forensics import cli

    monkeypatch.setattr(sys, "argv", ["gpu-forensics", *args])
    with pytest.raises(SystemExit) as e:
        cli.main()
    return e.value.code, capsys.readouterr()


def test_cli_outputs_are_replaced_atomically_and_nothing_else_is_written(tmp_path, monkeypatch, capsys):
    src = _small_input(tmp_path / "in")
    outdir = tmp_path / "out"
    outdir.mkdir()
    written = []
    real = outputs.replace

    def spy(path, fill):
        written.append(Path(path).name)
        return real(path, fill)

    monkeypatch.setattr(outputs, "replace", spy)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code, _ = _cli(["report", str(src), "-o", str(outdir / "r.html"), "--json", str(outdir / "s.json"),
                    "--md", str(outdir / "s.md"), "--tz", "UTC"], monkeypatch, capsys)
    assert code == 0
    assert sorted(written) == ["r.html", "s.json", "s.md"]
    assert _tree(tmp_path) - before == {str(outdir / n) for n in ("r.html", "s.json", "s.md")}


def test_a_failed_write_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "report.html"
    target.write_text("OLD REPORT")

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        outputs.replace_file(target, "<html>" + "x" * 100_000)
    assert target.read_text() == "OLD REPORT"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temp file left

    monkeypatch.undo()

    def crash(src, dst):
        raise KeyboardInterrupt  # killed between the write and the rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        outputs.replace_file(target, "NEW")
    assert target.read_text() == "OLD REPORT"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_crash_while_rendering_keeps_the_old_report(tmp_path, monkeypatch, capsys):
    src = _small_input(tmp_path / "in")
    target = tmp_path / "r.html"
    target.write_text("OLD REPORT")

    def broken(ctx):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(report, "render_html", broken)
    with pytest.raises(RuntimeError):
        _cli(["report", str(src), "-o", str(target), "--tz", "UTC"], monkeypatch, capsys)
    assert target.read_text() == "OLD REPORT"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "r.html"]


def test_scan_state_files_are_atomic(tmp_path, monkeypatch):
    target = tmp_path / "jobs" / "a" / "summary.json"
    outputs.replace_file(target, '{"old": true}')

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        outputs.replace_file(target, '{"new": ' + "1" * 10_000)
    assert json.loads(target.read_text()) == {"old": True}
