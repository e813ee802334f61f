"""compute-sanitizer leaks grouped by call path (forensics/detect/callpaths.py): a shared allocation helper
is named with each caller that leaks through it, in the findings, the report's table and compare alike;
a backtrace cut short to its outer frames is counted with the one group whose stacks it ends."""
from __future__ import annotations

import json

import polars as pl
from conftest import SAMPLE_LOGS

from forensics import pipeline, report
from forensics.detect.callpaths import sanitizer_groups
from forensics.model import events_frame
from forensics.options import Options

HELPER = SAMPLE_LOGS / "sanitizer_cpp_shared_helper"
MiB = 1 << 20


def _leaks(analysis):
    return sorted((f for f in analysis.findings if f.kind == "sanitizer_leak"), key=lambda f: f.bytes)


def test_the_recorded_helper_is_named_with_each_caller():
    bundle, analysis = pipeline.run([str(HELPER)], Options(tz="UTC"))
    main, batch = _leaks(analysis)
    assert (main.detail["count"], main.bytes) == (1, MiB)
    assert main.detail["site"] == "make_buffer ← main (shared_helper.cu:45)"
    assert (batch.detail["count"], batch.bytes) == (5, 20 * MiB)
    assert batch.detail["site"] == "make_buffer ← process_batch (shared_helper.cu:24)"
    assert batch.detail["call_path"] == ["make_buffer (shared_helper.cu:17)", "process_batch (shared_helper.cu:24)"]
    assert [e.line for e in batch.evidence] == [9, 17, 25, 33, 41]   # each `Leaked` line
    assert main.bytes + batch.bytes == 22020096          # LEAK SUMMARY
    ctx = report.build_context(bundle, analysis, Options(tz="UTC"))
    assert [(g["site"], g["count"], g["bytes"]) for g in ctx["sanitizer"]["groups"]] == [
        ("make_buffer ← process_batch (shared_helper.cu:24)", 5, 20 * MiB),
        ("make_buffer ← main (shared_helper.cu:45)", 1, MiB)]


def test_a_backtrace_cut_to_its_outer_frames_is_counted_with_its_callers_group(tmp_path):
    # the first process_batch leak saved without its two inner user frames: `main` at line 48 alone
    blocks = (HELPER / "sanitizer.txt").read_text().split("========= \n")
    blocks[1] = "".join(ln for ln in blocks[1].splitlines(keepends=True)
                        if "make_buffer(" not in ln and "process_batch(" not in ln)
    (tmp_path / "sanitizer.txt").write_text("========= \n".join(blocks))
    bundle, analysis = pipeline.run([str(tmp_path)], Options(tz="UTC"))
    main, batch = _leaks(analysis)
    assert (batch.detail["count"], batch.bytes, batch.detail["truncated_backtraces"]) == (5, 20 * MiB, 1)
    assert "1 of them with a backtrace cut short" in batch.summary
    assert (main.detail["count"], main.detail["truncated_backtraces"]) == (1, 0)
    ctx = report.build_context(bundle, analysis, Options(tz="UTC"))
    assert [g["truncated"] for g in ctx["sanitizer"]["groups"]] == [1, 0]


def _event(line: int, frames: list[tuple], nbytes: int = 1024, cache: bool = False) -> dict:
    user = [{"function": f, "file": "a.cu", "line": ln, "module": None, "offset": None} for f, ln in frames]
    return {"source": "s.txt", "line": line, "kind": "sanitizer_leak", "bytes": nbytes, "text": f"Leaked {nbytes}",
            "detail": json.dumps({"user_frames": user, "site_label": f"{frames[0][0]} (a.cu:{frames[0][1]})" if frames
                                  else "no host stack", "allocator_cache_at_exit": cache})}


def _groups(*events) -> list[tuple[str, list[int], int]]:
    return [(g.label, [r["line"] for r in g.rows], g.truncated)
            for g in sanitizer_groups(events_frame(list(events)))]


def test_split_once_at_the_first_frame_that_differs():
    h_a1 = [("h", 3), ("a", 10), ("main", 40)]
    h_a2 = [("h", 3), ("a", 10), ("main", 41)]      # a reached from another line of main: still a's group
    h_b = [("h", 3), ("b", 20), ("main", 42)]
    x = [("x", 7), ("main", 43)]                   # a site of its own, no helper
    assert _groups(_event(1, h_a1), _event(2, h_b), _event(3, h_a2), _event(4, x), _event(5, x)) == [
        ("h ← a (a.cu:10)", [1, 3], 0), ("h ← b (a.cu:20)", [2], 0), ("x (a.cu:7)", [4, 5], 0)]


def test_one_path_all_the_way_is_named_by_its_innermost_frame():
    p = [("h", 3), ("a", 10), ("main", 40)]
    assert _groups(_event(1, p), _event(2, p)) == [("h (a.cu:3)", [1, 2], 0)]


def test_a_long_shared_chain_is_shortened_in_the_name():
    a = [("h", 3), ("w1", 4), ("w2", 5), ("a", 10)]
    b = [("h", 3), ("w1", 4), ("w2", 5), ("b", 20)]
    assert [g[0] for g in _groups(_event(1, a), _event(2, b))] == ["h ← … ← a (a.cu:10)", "h ← … ← b (a.cu:20)"]


def test_a_cut_backtrace_that_two_groups_end_with_stays_apart():
    a = [("h", 3), ("a", 10), ("main", 40)]
    b = [("h", 3), ("b", 20), ("main", 40)]        # both callers reached from main:40
    cut = [("main", 40)]
    assert _groups(_event(1, a), _event(2, b), _event(3, cut)) == [
        ("h ← a (a.cu:10)", [1], 0), ("h ← b (a.cu:20)", [2], 0), ("main (a.cu:40)", [3], 0)]


def test_the_allocator_cache_and_stacks_without_user_frames_are_groups_of_their_own():
    p = [("h", 3), ("main", 40)]
    got = _groups(_event(1, p), _event(2, p, cache=True), _event(3, []), _event(4, []))
    assert got == [("h (a.cu:3)", [1], 0), ("no host stack", [3, 4], 0), ("h (a.cu:3)", [2], 0)]
    groups = sanitizer_groups(events_frame([_event(1, p), _event(2, p, cache=True)]))
    assert [g.expected for g in groups] == [False, True]


def test_every_leak_is_in_exactly_one_group():
    ev = [_event(i, [("h", 3), (f"c{i % 3}", 10 + i % 3), ("main", 40 + i % 2)], nbytes=1000 + i) for i in range(30)]
    ev += [_event(100, [("main", 41)]), _event(101, [])]
    groups = sanitizer_groups(events_frame(ev))
    lines = sorted(r["line"] for g in groups for r in g.rows)
    assert lines == sorted(e["line"] for e in ev)
    assert sum(r["bytes"] for g in groups for r in g.rows) == sum(e["bytes"] for e in ev)
    assert pl.DataFrame(ev)["line"].n_unique() == len(lines)
