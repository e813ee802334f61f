"""`gpu-forensics compare` on the real recorded pair (sample_logs/compare_fix_before and _after, made
by `gpu-forensics record` on an H200: the same training loop with a kept-graph leak and with the fix),
on the sanitizer runs (leak sites by call path), and as a command (outputs, exit codes, bad input)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import compare as cmp
from forensics.detect import callpaths
from forensics.options import Options
from conftest import SAMPLE_LOGS

from evaluation.recordings import front_matter  # the README front matter, read one way

BEFORE, AFTER = SAMPLE_LOGS / "compare_fix_before", SAMPLE_LOGS / "compare_fix_after"
RATE_TOLERANCE = 0.25
_SIDES: dict = {}


def side(name: str, folder: Path) -> cmp.Side:
    if (name, folder) not in _SIDES:
        tz = front_matter(folder / "README.md").get("tz", "UTC")
        _SIDES[(name, folder)] = cmp.analyze(name, [str(folder)], Options(tz=tz))
    return _SIDES[(name, folder)]


def compared(before: Path, after: Path):
    return cmp.build(side("before", before), side("after", after))


def test_the_recorded_fix_is_fixed_with_the_real_rate():
    doc, _ = compared(BEFORE, AFTER)
    truth = front_matter(BEFORE / "README.md")
    assert front_matter(AFTER / "README.md")["compare_outcome"] == truth["compare_outcome"] == "fixed"
    assert doc["outcome"] == "fixed", doc["outcome_reason"]
    assert doc["before"]["verdict"] == "leak" and doc["after"]["verdict"] == "no_leak"
    rate = doc["leak_rate_before"]
    want_step, want_hour = int(truth["leak_bytes_per_step"]), int(truth["leak_bytes_per_hour"])
    assert abs(rate["bytes_per_step"] - want_step) <= RATE_TOLERANCE * want_step
    assert abs(rate["bytes_per_hour"] - want_hour) <= RATE_TOLERANCE * want_hour
    assert doc["leak_rate_after"] is None
    assert "is gone after" in doc["outcome_reason"]


def test_series_are_matched_across_runs_not_by_pid():
    doc, extra = compared(BEFORE, AFTER)
    rows = {(r["series"], r["file"]): r for r in doc["series"]}
    for key in (("memory.used", "nvidia-smi.csv"), ("process.used", "compute-apps.csv"),
                ("allocated", "stdout.log"), ("reserved", "stdout.log")):
        row = rows[key]
        assert row["before"]["pattern"] == "linear" and row["before"]["rate_bytes_per_hour"] > 0, key
        assert row["after"] is not None and row["after"]["pattern"] is None, key
        assert row["before"]["peak_bytes"] > 4 * row["after"]["peak_bytes"], key
    proc = rows[("process.used", "compute-apps.csv")]
    assert proc["before"]["pid"] != proc["after"]["pid"]          # two runs, two pids, one row
    axes = {c["title"].split(" — ")[0]: c["axis"] for c in extra["charts"]}
    assert axes["GPU 0 allocated [train]"] == "step"               # both runs print steps
    assert axes["GPU 0 memory.used"] == "time"                     # nvidia-smi has none
    assert all({l["side"] for l in c["lines"]} == {"before", "after"} for c in extra["charts"])


@pytest.mark.parametrize("before, after, outcome", [
    (AFTER, BEFORE, "regressed"), (BEFORE, BEFORE, "still_leaking"), (AFTER, AFTER, "no_leak")])
def test_the_other_outcomes(before, after, outcome):
    doc, _ = compared(before, after)
    assert doc["outcome"] == outcome
    if outcome == "still_leaking":
        assert doc["leak_rate_before"]["bytes_per_hour"] == doc["leak_rate_after"]["bytes_per_hour"]
        assert "100% of what it was" in doc["outcome_reason"]


def test_leak_sites_match_by_call_path_across_report_formats():
    # the same program's leaks, reported as text and as XML: other spellings, the same two sites
    doc, _ = compared(SAMPLE_LOGS / "sanitizer_cpp_text", SAMPLE_LOGS / "sanitizer_cpp_xml")
    sites = {tuple(s["call_path"]): s for s in doc["leak_sites"]}
    assert set(sites) == {("load_table (leaky.cu)",), ("make_scratch (leaky.cu)",)}
    assert {s["status"] for s in sites.values()} == {"still"}
    path = ("load_table (leaky.cu)",)
    assert sites[path]["before"] == sites[path]["after"] == {"count": 3, "bytes": 786432}
    assert doc["outcome"] == "still_leaking"


def test_a_site_keeps_its_name_when_a_fix_moves_its_lines():
    a = {"function": "f", "file": "/src/a.cu", "line": 10, "offset": "0x1"}
    b = {"function": "f", "file": "/build/a.cu", "line": 14, "offset": "0x9"}
    assert callpaths.frame_key(a, exact=False) == callpaths.frame_key(b, exact=False) == ("f", "a.cu", None)
    assert callpaths.frame_key(a) != callpaths.frame_key(b)


def test_leak_sites_split_the_same_way_on_both_sides(tmp_path):
    # before: a helper leaks through two callers (recorded); after: process_batch fixed, and the fix moved
    # the other lines (the recorded first leak with its lines moved by one): the helper's one caller left
    # is still the site `make_buffer ← main`, not a new one named by the helper alone
    first = (SAMPLE_LOGS / "sanitizer_cpp_shared_helper" / "sanitizer.txt").read_text().split("========= \n")[0]
    moved = first.replace("shared_helper.cu:17", "shared_helper.cu:18").replace("shared_helper.cu:45", "shared_helper.cu:46")
    (tmp_path / "sanitizer.txt").write_text(moved + "========= \n========= LEAK SUMMARY: 1048576 bytes leaked in 1 "
                                            "allocations\n========= ERROR SUMMARY: 1 error\n")
    doc, _ = cmp.build(side("before", SAMPLE_LOGS / "sanitizer_cpp_shared_helper"),
                       cmp.analyze("after", [str(tmp_path)], Options(tz="UTC")))
    sites = {tuple(s["call_path"]): s for s in doc["leak_sites"]}
    assert {k: s["status"] for k, s in sites.items()} == {
        ("make_buffer (shared_helper.cu)", "process_batch (shared_helper.cu)"): "gone",
        ("make_buffer (shared_helper.cu)", "main (shared_helper.cu)"): "still"}
    assert sites[("make_buffer (shared_helper.cu)", "process_batch (shared_helper.cu)")]["before"] == \
        {"count": 5, "bytes": 5 * 4194304}


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "forensics", "compare", *map(str, args)],
                          capture_output=True, text=True, timeout=300, **kw)


def test_the_command_writes_html_json_and_one_screen_of_markdown(tmp_path):
    html, js, md = tmp_path / "c.html", tmp_path / "c.json", tmp_path / "c.md"
    r = _cli(BEFORE, AFTER, "-o", html, "--json", js, "--md", md, "--tz", "UTC", "--fail-on", "leak")
    assert r.returncode == 0, r.stderr                              # the after run has no leak
    doc = json.loads(js.read_text())
    assert doc["outcome"] == "fixed" and {"before", "after"} <= set(doc)
    assert doc["before"]["tool"] == "gpu-forensics" and doc["before"]["findings"]
    text = md.read_text()
    assert len(text.splitlines()) <= 24 and "**fixed**" in text
    page = html.read_text()
    assert page.count("<svg") == 4 and "<polyline" in page
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert re.findall(r"<script[^>]*>", page) == ['<script type="application/json" id="compare-summary">']


def test_exit_code_follows_fail_on_on_the_after_side():
    assert _cli(AFTER, BEFORE, "-o", "", "--tz", "UTC", "--fail-on", "leak").returncode == 1
    assert _cli(AFTER, BEFORE, "-o", "", "--tz", "UTC").returncode == 0


def test_log_text_is_escaped(tmp_path):
    from forensics.markers import marker_line

    for name, grow in (("before", 64), ("after", 0)):
        d = tmp_path / name
        d.mkdir()
        lines = [marker_line("<img src=x onerror=alert(1)>", (1000 + grow * i) << 20, 4096 << 20, step=i)
                 for i in range(1, 40)]
        (d / "train.log").write_text("\n".join(lines) + "\n")
    html = tmp_path / "c.html"
    r = _cli(tmp_path / "before", tmp_path / "after", "-o", html, "--tz", "UTC")
    assert r.returncode == 0, r.stderr
    page = html.read_text()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_side_with_nothing_to_read_is_one_line(tmp_path):
    r = _cli(tmp_path / "missing", AFTER, "-o", "")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"{tmp_path / 'missing'}: nothing to analyze in the BEFORE run")


def test_a_snapshots_leak_sites_gone_after_the_fix():
    opts = Options(tz="Etc/UTC")
    doc, _ = cmp.build(cmp.analyze("before", [str(SAMPLE_LOGS / "snapshot_leak")], opts),
                       cmp.analyze("after", [str(SAMPLE_LOGS / "snapshot_healthy")], opts))
    assert doc["outcome"] == "fixed"
    gone = {r["site"]: r for r in doc["leak_sites"] if r["status"] == "gone"}
    assert set(gone) == {"torch_memory.py:94", "torch_memory.py:87"}
    assert gone["torch_memory.py:94"]["call_path"][0] == "train_step (torch_memory.py)"
