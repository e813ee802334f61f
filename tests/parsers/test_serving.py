"""serving-engine-log: vLLM's memory profile (three forms), KV-cache usage as a series with the cache's
size as capacity, SGLang's token usage and its own leak check: every real snippet with its facts."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import polars as pl
from conftest import parse_file, realworld

from forensics import pipeline
from forensics.options import Options
from forensics.parsers.serving import engines

GIB = 1 << 30


def events(p, kind=None) -> list[dict]:
    rows = p.events.sort("line").to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return [r for r in rows if kind is None or r["kind"] == kind]


def gib(x: float) -> int:
    return round(x * GIB)


def test_profile_table_form():
    _, p = parse_file(realworld("vllm_profile_table.txt"), Options(tz="UTC", year=2024), expect="serving-engine-log")
    (m,) = events(p)
    assert (m["kind"], m["line"], m["time"]) == ("marker", 10, datetime(2024, 12, 13, 19, 54, 18, tzinfo=timezone.utc))
    d = m["detail"]
    assert (d["total"], d["usable"], d["weights"], d["non_torch"], d["activation_peak"], d["kv_cache"]) == (
        gib(79.22), gib(71.29), gib(14.96), gib(1.79), gib(1.26), gib(53.29))
    assert any("model weights 14.96 GiB, non-torch memory 1.79 GiB, activation peak 1.26 GiB, KV cache 53.29 GiB "
               "of 71.29 GiB usable (79.22 GiB total)" in n for n in p.notes)


def test_profile_one_line_form_per_worker():
    _, p = parse_file(realworld("vllm_profile_one_line_workers.txt"), Options(tz="UTC", year=2025))
    got = [(m["line"], m["pid"], m["detail"]["weights"], m["detail"]["kv_cache"], m["detail"]["usable"],
            m["detail"]["utilization"]) for m in events(p)]
    assert got == [(4, 507, gib(21.21), gib(1.57), gib(23.35), 0.99), (7, 577, gib(21.21), gib(1.57), gib(23.35), 0.99)]


def test_v1_weights_and_kv_tokens():
    _, p = parse_file(realworld("vllm_v1_model_loading.txt"), Options(tz="UTC", year=2025))
    (m,) = events(p)
    assert (m["line"], m["detail"]["weights"], m["detail"]["kv_cache_tokens"]) == (8, gib(14.9889), 158656)
    assert p.skipped.counts["not a memory line of the engine"] == 6


def test_kv_usage_without_the_cache_size_is_counted_not_read():
    _, p = parse_file(realworld("vllm_metrics_kv_usage.txt"), Options(tz="UTC", year=2025))
    assert p.samples.height == 0
    assert p.skipped.counts["KV cache usage as a fraction, the cache's size not in the log: not read"] == 6


def test_both_engines_kv_cache_sizes():
    _, p = parse_file(realworld("vllm_and_sglang_kv_cache_size.txt"))
    vllm, sgl = events(p)
    assert (vllm["line"], vllm["detail"]["kv_cache"], vllm["detail"]["kv_cache_tokens"]) == (3, gib(8.11), 178880)
    assert (sgl["line"], sgl["detail"]["kv_cache"], sgl["detail"]["tokens"]) == (4, gib(8.23) * 2, 367404)


def test_sglang_token_usage_without_pool_size():
    _, p = parse_file(realworld("sglang_decode_token_usage.txt"))
    assert p.samples.height == 0
    assert p.skipped.counts["KV cache usage as a fraction, the cache's size not in the log: not read"] == 5


def test_usage_with_the_cache_size_is_a_series(tmp_path):
    # the real lines of vllm-project/vllm#21348 (size) and sgl-project/sglang LMCache#869 (usage), one server
    path = tmp_path / "server.log"
    path.write_text("[2025-06-26 02:10:00 TP0] KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB\n"
                    "[2025-06-26 02:16:20 TP0] Decode batch. #running-req: 1, #token: 2102, token usage: 0.51, cuda graph: "
                    "True, gen throughput (token/s): 93.51, #queue-req: 0\n")
    _, p = parse_file(path, expect="serving-engine-log")
    (row,) = p.samples.to_dicts()
    cap = gib(8.23) * 2
    assert (row["series"], row["line"], row["bytes"], row["total_bytes"], row["label"]) == (
        "kv_cache.used", 2, round(0.51 * cap), cap, "TP0")
    assert row["time"] == datetime(2025, 6, 26, 2, 16, 20, tzinfo=timezone.utc)


def test_vllm_usage_after_its_profile(tmp_path):
    # vllm-project/vllm#10511's profile, then a stats line of the same 0.6 era (vllm-project/vllm#12314)
    text = realworld("vllm_profile_table.txt").read_text().split("\n", 1)[1]
    text += ("INFO 12-13 19:55:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
             "41.7 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.0%, CPU KV cache "
             "usage: 0.0%.\n")
    path = tmp_path / "vllm.log"
    path.write_text(text)
    _, p = parse_file(path, Options(tz="UTC", year=2024))
    (row,) = p.samples.to_dicts()
    assert (row["line"], row["bytes"], row["total_bytes"]) == (10, round(0.02 * gib(53.29)), gib(53.29))


def test_sglang_leak_warning_takes_the_sizes_of_the_line_before():
    _, p = parse_file(realworld("sglang_pool_leak_warning.txt"), expect="serving-engine-log")
    (e,) = events(p)
    assert (e["kind"], e["line"], e["detail"]["available_tokens"], e["detail"]["total_tokens"]) == (
        "kv_cache_leak", 3, 35244, 42308)


def test_sglang_allocator_leak_then_the_server_killed(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "server.log").write_text(realworld("sglang_allocator_leak_killed.txt").read_text())
    bundle, analysis = pipeline.run([str(job)], Options(tz="UTC"))
    kinds = sorted(bundle.events["kind"].to_list())
    assert kinds == ["job_killed", "kv_cache_leak"]
    (f,) = [f for f in analysis.findings if f.kind == "kv_cache_leak"]
    assert f.detail["available_tokens"] == 3189424 and f.detail["total_tokens"] == 3185200
    assert "freed twice" in f.summary and f.evidence[0].line == 2
    assert analysis.verdict == "leak"


def test_scanner_finds_engine_lines_inside_another_log(tmp_path):
    text = ("epoch 1 done\n(VllmWorkerProcess pid=493) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; "
            "non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory "
            "reserved for KV Cache is 1.57GiB.\nLoading took 3 s\n")
    frame = pl.DataFrame({"text": text.splitlines()}).with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
    frame = frame.filter(pl.col("text").str.contains(engines.SCAN_HINT))
    p = engines.scan(frame, SimpleNamespace(path=str(tmp_path / "x"), mtime=None), Options(tz="UTC", year=2025))
    assert [(e["line"], e["pid"]) for e in events(p)] == [(2, 493)]
