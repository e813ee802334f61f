"""Experiment trackers' and frameworks' metric files: W&B system metrics (JSON lines, CSV), MLflow
system metrics (FileStore files, history CSV and JSON lines), Lightning's metrics.csv with
DeviceStatsMonitor columns. The facts each sample holds, a leak in each, and properties (garbage never
raises, batching changes nothing)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from conftest import parse_file, realworld
from forensics import pipeline
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.metrics import lightning, mlflow, wandb

UTC = Options(tz="UTC")
# a few dozen examples per run keep the suite fast; METRICS_PROPERTY_EXAMPLES=2000 for a deep search
SETTINGS = settings(max_examples=int(os.environ.get("METRICS_PROPERTY_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=list(HealthCheck))
T0 = 1767225600
GiB = 1 << 30


def _by_series(p) -> dict:
    return {(r["gpu"], r["series"], r["label"]): r for r in p.samples.group_by("gpu", "series", "label").agg(
        pl.len().alias("n"), pl.col("bytes").min().alias("lo"), pl.col("bytes").max().alias("hi"),
        pl.col("total_bytes").max().alias("total"), pl.col("host").first(), pl.col("step").max().alias("last_step"),
        pl.col("time").min().alias("t0")).to_dicts()}


# -- W&B ------------------------------------------------------------------------------------------

def test_wandb_events_bytes_and_the_capacity_from_the_percentage():
    _, p = parse_file(realworld("wandb-events.jsonl"), UTC, expect="wandb-system-metrics")
    s = _by_series(p)
    assert set(s) == {("0", "memory.used", None), ("1", "memory.used", None),   # gpu.process.* not twice
                      (None, "host.rss", None)}
    assert s[(None, "host.rss", None)]["lo"] == round(5123.7 * (1 << 20))   # rssMB is MiB (rss / 1024 / 1024)
    assert s[("0", "memory.used", None)]["n"] == 30 and s[("0", "memory.used", None)]["lo"] == 30064771072
    assert s[("0", "memory.used", None)]["total"] == 85520809984 == s[("1", "memory.used", None)]["total"]
    assert p.clock == "wall"


def test_wandb_history_csv_reads_as_the_events_do():
    _, a = parse_file(realworld("wandb-events.jsonl"), UTC)
    _, b = parse_file(realworld("run_history_system.csv"), UTC, expect="wandb-system-metrics")
    assert_frame_equal(a.samples.drop("line", "seq"), b.samples.drop("line", "seq"))


def test_wandb_percent_only_is_said_and_counted_not_guessed():
    _, p = parse_file(realworld("wandb-events-sdk0.12.jsonl"), UTC, expect="wandb-system-metrics")
    assert p.samples.filter(pl.col("gpu").is_not_null()).height == 0
    assert p.skipped.counts == {wandb.PERCENT_SKIP: 20}
    assert any("percentage" in n for n in p.notes)


def _wandb_leak(path, n=1440):
    rows = []
    for i in range(n):
        used = 20 * GiB + (i * 15 / 3600) * GiB + (i % 4) * (1 << 20)
        rows.append({"_wandb": True, "_timestamp": T0 + 15 * i + 0.31, "_runtime": 15 * i,
                     "system.gpu.0.memoryAllocatedBytes": used, "system.gpu.0.memoryAllocated": used / (80 * GiB) * 100,
                     "system.gpu.0.memory": 37, "system.cpu": 12.5})
    path.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n")


def test_a_leak_in_wandb_system_metrics(tmp_path):
    path = tmp_path / "wandb-events.jsonl"
    _wandb_leak(path)
    _, analysis = pipeline.run([str(path)], UTC)
    assert analysis.verdict == "leak"
    leak = next(f for f in analysis.findings if f.kind == "leak")
    assert leak.gpu == "0" and abs(leak.rate_bytes_per_hour - GiB) < 0.05 * GiB


def test_wandb_host_memory_of_the_process_and_of_the_host():
    _, p = parse_file(realworld("wandb-events-sdk0.12.jsonl"), UTC, expect="wandb-system-metrics")
    s = _by_series(p)
    assert s[(None, "host.rss", None)]["lo"] == round(3920.1 * (1 << 20))
    # availableMB 48211.3 at 23.9 % used: total = available / (1 - 0.239), used = total - available
    total = 48211.3 / (1 - 0.239) * (1 << 20)
    assert abs(s[(None, "host.used", None)]["total"] - total) < 1e3
    assert abs(s[(None, "host.used", None)]["lo"] - (total - 48211.3 * (1 << 20))) < 1e3


def _wandb_host_leak(path, n=1440):
    """Real wandb-core rows (keys of wandb-events.jsonl): GPU memory flat, the process's RSS growing
    1 GiB an hour, the host's available memory shrinking with it."""
    rows = []
    for i in range(n):
        rss_mb = 5000 + i * 15 / 3600 * 1024 + (i % 3)
        avail = 200_000 - (rss_mb - 5000)
        rows.append({"_wandb": True, "_timestamp": T0 + 15 * i + 0.31, "_runtime": 15 * i,
                     "system.memory_percent": round((1 - avail / 262_144) * 100, 1),
                     "system.proc.memory.availableMB": avail, "system.proc.memory.rssMB": rss_mb,
                     "system.gpu.0.memoryAllocatedBytes": 30 * GiB + (i % 4) * (1 << 20),
                     "system.gpu.0.memoryAllocated": (30 * GiB + (i % 4) * (1 << 20)) / (80 * GiB) * 100})
    path.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n")


def test_a_host_memory_leak_in_wandb_is_named_host_memory(tmp_path):
    from forensics import report as rep

    path = tmp_path / "wandb-events.jsonl"
    _wandb_host_leak(path)
    bundle, analysis = pipeline.run([str(path)], UTC)
    # the host's series have a chart of their own: never drawn as, or measured against, GPU 0
    md = rep.render_markdown(rep.build_context(bundle, analysis, UTC))
    assert "Host memory, wandb-events.jsonl, host.rss" in md and "GPU 0, memory.used" in md
    assert not [ln for ln in md.splitlines() if ln.startswith("- GPU 0") and "host." in ln]
    host = [f for f in analysis.findings if f.kind == "leak" and f.series in ("host.rss", "host.used")]
    assert host and host[0].gpu is None and host[0].summary.startswith("Host memory")
    assert abs(host[0].rate_bytes_per_hour - GiB) < 0.1 * GiB
    assert not [f for f in analysis.findings if f.kind == "leak" and f.gpu is not None]
    assert analysis.verdict != "leak" and "Host memory does grow" in analysis.verdict_reason


# -- MLflow ---------------------------------------------------------------------------------------

def test_mlflow_filestore_file_is_decimal_megabytes_named_by_its_path():
    _, p = parse_file(realworld("gpu_0_memory_usage_megabytes"), UTC, expect="mlflow-system-metrics")
    s = _by_series(p)[("0", "memory.used", None)]
    assert s["lo"] == 30064700000 and s["n"] == 30      # 30064.7 MB = used / 1e6 (gpu_monitor.py)
    assert p.clock == "wall" and s["t0"].year == 2026


def test_mlflow_node_id_from_the_run_folder():
    _, p = parse_file(realworld("gpu_1_memory_usage_megabytes"), UTC, expect="mlflow-system-metrics")
    assert _by_series(p)[("1", "memory.used", None)]["host"] == "node_1"


def test_mlflow_percentage_file_alone_is_not_read():
    _, p = parse_file(realworld("gpu_0_memory_usage_percentage"), UTC, expect="mlflow-system-metrics")
    assert p.samples.height == 0 and p.skipped.total == 30 and any("megabytes file" in n for n in p.notes)


def test_mlflow_history_csv_gives_the_capacity_and_jsonl_the_readings():
    _, csv = parse_file(realworld("metric_history_gpu0.csv"), UTC, expect="mlflow-system-metrics")
    total = _by_series(csv)[("0", "memory.used", None)]["total"]
    assert abs(total - 85520809984) < 0.01 * 85520809984        # MB / (share rounded to 0.1 %)
    _, jl = parse_file(realworld("metric_history_gpu0.jsonl"), UTC, expect="mlflow-system-metrics")
    assert_frame_equal(jl.samples.drop("line", "seq", "total_bytes"), csv.samples.head(15).drop("line", "seq", "total_bytes"))


def test_an_mlflow_metric_file_of_another_metric_says_so(tmp_path):
    run = tmp_path / "mlruns" / "1" / "abc" / "metrics"
    run.mkdir(parents=True)
    (run / "train_loss").write_text("1767225600000 2.31 0\n1767225610000 2.29 1\n")
    _, p = parse_file(run / "train_loss", UTC, expect="mlflow-system-metrics")
    assert p.samples.height == 0 and "train_loss" in p.notes[0] and p.skipped.total == 2


def test_a_leak_in_an_mlflow_filestore_file(tmp_path):
    folder = tmp_path / "mlruns" / "3" / "f00d" / "metrics" / "system"
    folder.mkdir(parents=True)
    lines = [f"{(T0 + 10 * i) * 1000 + 7} {round(20000 + i * 10 * 1073.741824 / 3600, 1)} {i}" for i in range(2160)]
    (folder / "gpu_0_memory_usage_megabytes").write_text("\n".join(lines) + "\n")
    _, analysis = pipeline.run([str(tmp_path)], UTC)
    assert analysis.verdict == "leak"
    assert abs(next(f for f in analysis.findings if f.kind == "leak").rate_bytes_per_hour - GiB) < 0.05 * GiB


def test_mlflow_host_memory_is_host_used_with_its_total():
    _, p = parse_file(realworld("metric_history_system_memory.csv"), UTC, expect="mlflow-system-metrics")
    s = _by_series(p)
    assert set(s) == {(None, "host.used", None)}
    assert s[(None, "host.used", None)]["lo"] == 41_230_000_000                  # used / 1e6 (cpu_monitor.py)
    assert abs(s[(None, "host.used", None)]["total"] - 270_126e6) < 0.005 * 270_126e6


def test_a_host_memory_leak_in_an_mlflow_filestore_file(tmp_path):
    folder = tmp_path / "mlruns" / "3" / "f00d" / "metrics" / "system"
    folder.mkdir(parents=True)
    host = [f"{(T0 + 10 * i) * 1000 + 7} {round(40000 + i * 10 * 1073.741824 / 3600, 1)} {i}" for i in range(2160)]
    gpu = [f"{(T0 + 10 * i) * 1000 + 7} {20000.0 + (i % 3)} {i}" for i in range(2160)]
    (folder / "system_memory_usage_megabytes").write_text("\n".join(host) + "\n")
    (folder / "gpu_0_memory_usage_megabytes").write_text("\n".join(gpu) + "\n")
    _, analysis = pipeline.run([str(tmp_path)], UTC)
    leaks = [f for f in analysis.findings if f.kind == "leak"]
    assert [f.series for f in leaks] == ["host.used"] and leaks[0].gpu is None
    assert leaks[0].summary.startswith("Host memory") and "GPU 0" not in leaks[0].summary
    assert abs(leaks[0].rate_bytes_per_hour - GiB) < 0.05 * GiB
    assert analysis.verdict == "no_leak" and "Host memory does grow" in analysis.verdict_reason


# -- Lightning ------------------------------------------------------------------------------------

def test_device_stats_monitor_series_as_the_step_logs_name_them():
    _, p = parse_file(realworld("metrics.csv"), UTC, expect="lightning-csv")
    s = _by_series(p)
    assert {k[1] for k in s} == {"allocated", "reserved", "max_allocated", "max_reserved"}
    end = s[(None, "allocated", "on_train_batch_end")]
    assert end["n"] == 12 and end["last_step"] == 12 and end["lo"] == 2 * GiB + 32 * (1 << 20)
    assert p.clock == "none" and p.samples["time"].null_count() == p.samples.height
    assert any("not read" in n for n in p.notes)          # the other memory_stats() keys are named


def test_lightning_15_keys_and_gpustatsmonitor():
    _, old = parse_file(realworld("metrics_lightning15.csv"), UTC, expect="lightning-csv")
    # the 1.5 key form is read; of its two hooks, the batch's end is the evidence (one series per stat)
    assert (None, "reserved", "on_train_batch_end") in _by_series(old)
    assert not any(k[2] == "on_train_batch_start" for k in _by_series(old))
    assert any("on_train_batch_start" in n and "not used" in n for n in old.notes)
    _, g = parse_file(realworld("metrics_gpustatsmonitor.csv"), UTC, expect="lightning-csv")
    s = _by_series(g)[("0", "memory.used", None)]
    assert s["lo"] == 9811 << 20 and s["total"] == 24268 << 20 and s["last_step"] == 14


def test_a_leak_in_device_stats_monitor_columns(tmp_path):
    keys = sorted(["DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.current",
                   "DeviceStatsMonitor.on_train_batch_end/reserved_bytes.all.current", "epoch", "step", "train_loss"])
    rows = [",".join(keys)]
    for step in range(1, 401):
        alloc = 2 * GiB + step * (8 << 20)
        row = {keys[0]: alloc, keys[1]: alloc + GiB, "step": step}
        rows.append(",".join(str(row.get(k, "")) for k in keys))
        if step % 50 == 0:
            rows.append(",".join({"epoch": str(step // 50), "step": str(step), "train_loss": "0.5"}.get(k, "") for k in keys))
    path = tmp_path / "metrics.csv"
    path.write_text("\r\n".join(rows) + "\r\n")
    _, analysis = pipeline.run([str(path)], UTC)
    assert analysis.verdict == "leak"
    leak = next(f for f in analysis.findings if f.kind == "leak")
    assert leak.series == "allocated" and abs(leak.rate_bytes_per_step - (8 << 20)) < 0.05 * (8 << 20)


def test_only_the_read_columns_are_cut_out_of_a_wide_metrics_csv():
    # DeviceStatsMonitor logs every memory_stats() key: the reader cuts out the cells it reads (the step, the
    # four stats), wherever they sit among the others, and a row of another width is still counted
    stats = [f"DeviceStatsMonitor.on_train_batch_end/{k}" for k in
             ("active.all.current", "allocated_bytes.all.current", "inactive_split.all.peak", "reserved_bytes.all.peak")]
    header = ",".join([*stats[:2], "epoch", *[f"x{i}" for i in range(40)], "step", *stats[2:], "gpu_id: 1/memory.used (MB)"])
    rows = [header] + [",".join([str(7 * s), str(GiB + s), "0", *["9"] * 40, str(s), "5", str(2 * GiB + s), str(100 + s)])
                       for s in range(1, 6)] + ["1,2,3"]
    frame = pl.DataFrame({"line": range(1, len(rows) + 1), "text": rows})
    p = _feed(lightning, "metrics.csv", frame, None)
    s = _by_series(p)
    assert set(s) == {(None, "allocated", "on_train_batch_end"), (None, "max_reserved", "on_train_batch_end"),
                      ("1", "memory.used", None)}
    assert s[(None, "allocated", "on_train_batch_end")]["lo"] == GiB + 1
    assert s[(None, "max_reserved", "on_train_batch_end")]["hi"] == 2 * GiB + 5
    assert s[("1", "memory.used", None)]["lo"] == 101 << 20 and s[("1", "memory.used", None)]["last_step"] == 5
    assert p.skipped.counts["row does not fit the header, not read"] == 1


# -- properties -----------------------------------------------------------------------------------

class _Src:
    def __init__(self, path: str):
        self.path = path


def _feed(module, path: str, frame: pl.DataFrame, size: int | None):
    r = module.Reader(_Src(path), UTC)
    if size is None:
        r.feed(frame)
    else:
        for at in range(0, frame.height, size):
            r.feed(frame.slice(at, size))
    return r.finish()


SAMPLES = [(wandb, "wandb-events.jsonl"), (wandb, "run_history_system.csv"), (wandb, "wandb-events-sdk0.12.jsonl"),
           (mlflow, "gpu_0_memory_usage_megabytes"), (mlflow, "metric_history_gpu0.csv"),
           (mlflow, "metric_history_gpu0.jsonl"), (lightning, "metrics.csv"), (lightning, "metrics_gpustatsmonitor.csv")]


@SETTINGS
@given(st.sampled_from(SAMPLES), st.sampled_from([1, 2, 7]))
def test_batches_give_the_same_result(sample, size):
    module, name = sample
    path = realworld(name)
    frame = Source.open(path).frame()
    want, got = _feed(module, str(path), frame, None), _feed(module, str(path), frame, size)
    assert_frame_equal(got.samples, want.samples)
    assert (got.skipped.counts, got.skipped.examples, got.notes, got.clock) == \
        (want.skipped.counts, want.skipped.examples, want.notes, want.clock)


_cell = st.one_of(st.text(max_size=20), st.sampled_from(["", "nan", "NaN", "-1", "1e400", "1767225600", "True", ",,,", '"']),
                  st.integers(-10, 10 ** 20).map(str), st.floats().map(repr))


@SETTINGS
@given(st.sampled_from(SAMPLES), st.lists(st.one_of(st.lists(_cell, max_size=8).map(",".join), st.text(max_size=80),
                                                   _cell.map(lambda c: '{"_timestamp": ' + c + ', "system.gpu.0.memoryAllocatedBytes": ' + c + "}"),
                                                   _cell.map(lambda c: f"1767225600000 {c} 3"),
                                                   _cell.map(lambda c: f"system/gpu_0_memory_usage_megabytes,{c},1767225600000,1")),
                                         max_size=25), st.integers(0, 30))
def test_garbage_among_real_lines_never_raises(sample, junk, at):
    module, name = sample
    path = realworld(name)
    lines = Source.open(path).frame()["text"].to_list()
    lines[at:at] = junk
    frame = pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines}, schema={"line": pl.Int64, "text": pl.String})
    p = _feed(module, str(path), frame, None)
    assert p.samples["line"].is_between(1, len(lines)).all()
    assert (p.samples["bytes"].drop_nulls() >= 0).all()


@pytest.mark.parametrize("module, head", [
    (wandb, ['{"_wandb":true,"_timestamp":1767225600.1,"_runtime":1,"system.cpu":3}']),
    (mlflow, ["1767225600000 12.5 0", "1767225610000 12.6 1"]),
    (mlflow, ["key,value,timestamp,step", "system/gpu_0_memory_usage_megabytes,1.0,1767225600000,0"]),
    (lightning, ["DeviceStatsMonitor.on_train_batch_start/allocated_bytes.all.current,epoch,step"]),
])
def test_sniffs_claim_their_own_shapes(module, head):
    assert module.sniff(head)


@pytest.mark.parametrize("head", [["1767225600000 12.5 0 extra"], ["key,value", "a,1"], ["step,epoch,loss", "1,0,0.5"],
                                  ['{"_timestamp": 1}'], ["12 13 14"]])
def test_sniffs_leave_other_files_alone(head):
    assert not any(m.sniff(head) for m in (wandb, mlflow, lightning))


def test_a_real_lightning_recording(tmp_path):
    # sample_logs/lightning_leak: Lightning 2.6.6, DeviceStatsMonitor + CSVLogger on an H200, the module
    # keeping each step's output (8 MiB a step) for 80 steps
    root = Path(__file__).resolve().parents[2] / "sample_logs"
    _, p = parse_file(root / "lightning_leak" / "metrics.csv", UTC, expect="lightning-csv")
    s = _by_series(p)[(None, "allocated", "on_train_batch_end")]
    assert s["n"] == 80 and s["last_step"] == 79
    bundle, a = pipeline.run([str(root / "lightning_leak" / "metrics.csv")], Options(tz="UTC"))
    leak = next(f for f in a.findings if f.kind == "leak" and f.series == "allocated")
    assert leak.rate_bytes_per_step == pytest.approx(8 << 20, rel=0.05)
    _, healthy = pipeline.run([str(root / "lightning_healthy" / "metrics.csv")], Options(tz="UTC"))
    assert healthy.verdict == "no_leak"
