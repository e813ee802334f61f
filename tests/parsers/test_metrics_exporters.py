"""The Prometheus GPU exporters' series, from the HTTP API's JSON (prometheus-json) and from a Grafana
panel's CSV download (grafana-csv): the facts each sample holds, the pod that holds the memory, big
and cut documents, and properties (garbage never raises; batching, layout and series order change
nothing)."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from conftest import parse_file, realworld
from forensics import ingest, pipeline
from forensics.errors import InputError
from forensics.io.sources import MAX_LINE_CHARS, Source
from forensics.options import Options
from forensics.parsers.metrics import common, exporters, grafana_csv, prometheus

MiB = 1 << 20
UTC = Options(tz="UTC")
# a few dozen examples per run keep the suite fast; METRICS_PROPERTY_EXAMPLES=2000 for a deep search
SETTINGS = settings(max_examples=int(os.environ.get("METRICS_PROPERTY_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=list(HealthCheck))
POD = "pod ml-team/trainer-7f9c8-xk2lp/pytorch"
T0 = 1767225600   # 2026-01-01 00:00:00 UTC
GPU0 = {"gpu": "0", "UUID": "GPU-5f1e6c0e-9f0a-4c32-8d1e-0c6b1d2a3b4c", "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "gpu-node-07"}
POD_LABELS = {"namespace": "ml-team", "pod": "trainer-7f9c8-xk2lp", "container": "pytorch"}


def _by_series(p) -> dict:
    return {(r["gpu"], r["series"], r["label"]): r for r in p.samples.group_by("gpu", "series", "label").agg(
        pl.len().alias("n"), pl.col("bytes").min().alias("lo"), pl.col("bytes").max().alias("hi"),
        pl.col("total_bytes").max().alias("total"), pl.col("host").first(), pl.col("pid").first(),
        pl.col("line").min().alias("line")).to_dicts()}


# -- the samples ---------------------------------------------------------------------------------

def test_dcgm_range_query_names_the_pod_and_the_capacity():
    _, p = parse_file(realworld("dcgm_query_range_k8s.json"), UTC, expect="prometheus-json")
    s = _by_series(p)
    held = s[("0", "process.used", POD)]
    assert (held["n"], held["lo"], held["host"]) == (40, 20480 * MiB, "gpu-node-07")
    assert held["total"] == 81559 * MiB            # used + free, both MiB (default-counters.csv)
    idle = s[("1", "memory.used", None)]
    assert (idle["lo"], idle["hi"], idle["total"]) == (0, 0, 81559 * MiB)
    assert p.clock == "wall" and p.samples["time"].min() == datetime(2026, 1, 5, 13, 0, tzinfo=timezone.utc)
    assert p.meta["gpu_map"]["GPU-5f1e6c0e-9f0a-4c32-8d1e-0c6b1d2a3b4c"] == "0"


def test_exported_labels_name_the_workload_not_the_exporter_pod():
    """Scraped without honorLabels, `pod` is dcgm-exporter's own pod and exported_pod the workload's."""
    _, p = parse_file(realworld("dcgm_query_vector_jq.json"), UTC, expect="prometheus-json")
    labels = set(p.samples["label"].drop_nulls())
    assert labels == {"pod inference/vllm-llama-70b-0/vllm"}
    s = _by_series(p)
    # capacity = used + free + reserved (FB_RESERVED is among the series)
    assert s[("0", "process.used", "pod inference/vllm-llama-70b-0/vllm")]["total"] == (72011 + 8964 + 584) * MiB
    # jq's pretty print: each reading cites the line holding its value
    text = realworld("dcgm_query_vector_jq.json").read_text().splitlines()
    for r in p.samples.iter_rows(named=True):
        assert text[r["line"] - 1].strip() == f'"{r["bytes"] // MiB}"', r


def test_timesharing_gives_device_and_per_pod_series():
    _, p = parse_file(realworld("dcgm_timesharing_result.json"), UTC, expect="prometheus-json")
    s = _by_series(p)
    assert ("0", "memory.used", None) in s
    pods = {k[2] for k in s if k[1] == "process.used"}
    assert pods == {"pod search/embedder-5d8f9-2xq7c/embedder", "pod search/reranker-66b7c-p9wz4/reranker"}
    assert s[("0", "memory.used", None)]["host"] == "gpu-node-12"     # the renamed `hostname` label


def test_nvidia_gpu_exporter_bytes_process_and_index():
    _, p = parse_file(realworld("nvidia_gpu_exporter_range_data.json"), UTC, expect="prometheus-json")
    s = _by_series(p)
    dev = s[("0", "memory.used", None)]      # index from nvidia_smi_gpu_info, uuid without GPU-
    assert dev["lo"] == 224395264 and dev["total"] == 25769803776 and dev["host"] == "workstation"
    proc = s[("0", "process.used", "/opt/conda/bin/python")]
    assert proc["pid"] == 48213 and proc["n"] == 18
    assert any("nvidia_smi_utilization_gpu_ratio" in n for n in p.notes)


def test_grafana_joined_by_time():
    _, p = parse_file(realworld("dcgm_fb_used_joined_by_time.csv"), UTC, expect="grafana-csv")
    s = _by_series(p)
    assert s[("0", "process.used", POD)]["n"] == 39           # one blank cell: no point at that time
    assert s[("1", "memory.used", None)]["n"] == 40
    assert s[("0", "process.used", POD)]["line"] == 2 and p.clock == "wall"
    assert p.skipped.counts == {"blank line": 1}


def test_grafana6_series_as_rows_with_old_label_names_and_offsets():
    _, p = parse_file(realworld("dcgm_series_as_rows_grafana6.csv"), UTC, expect="grafana-csv")
    s = _by_series(p)
    held = s[("0", "process.used", POD)]            # pod_name / pod_namespace / container_name
    assert held["n"] == 20 and held["total"] == 81559 * MiB
    assert p.samples["time"].min() == datetime(2026, 1, 5, 13, 0, tzinfo=timezone.utc)   # +01:00 read


def test_grafana_frames_one_after_another_formatted_times_in_the_files_zone():
    path = realworld("nvidia_gpu_exporter_frames_formatted.csv")
    _, utc = parse_file(path, UTC, expect="grafana-csv")
    _, berlin = parse_file(path, Options(tz="Europe/Berlin"))
    assert utc.clock == "wall-assumed" and utc.samples.height == 12
    assert utc.samples["total_bytes"].drop_nulls().unique().to_list() == [25769803776]
    assert (utc.samples["time"].min() - berlin.samples["time"].min()).total_seconds() == 3600


# -- behaviour -----------------------------------------------------------------------------------

def _matrix(result: list[dict]) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _series(name: str, labels: dict, values: list) -> dict:
    return {"metric": {"__name__": name, **labels}, "values": [[T0 + 15 * i, str(v)] for i, v in enumerate(values)]}


def _leaking_dcgm(n: int = 2880) -> dict:
    """A pod's job on GPU 0 whose memory grows 1 GiB/h over 12 h (15 s scrapes), after 10 idle minutes."""
    used = [0 if i < 40 else round(20480 + (i - 40) * 1024 * 15 / 3600) + i % 3 for i in range(n)]
    return _matrix([_series("DCGM_FI_DEV_FB_USED", {**GPU0, **POD_LABELS}, used),
                    _series("DCGM_FI_DEV_FB_FREE", {**GPU0, **POD_LABELS}, [81559 - u for u in used])])


def test_a_leaking_pod_gives_a_leak_finding_named_by_the_pod(tmp_path):
    path = tmp_path / "fb.json"
    path.write_text(json.dumps(_leaking_dcgm(), separators=(",", ":")))
    _, analysis = pipeline.run([str(path)], UTC)
    assert analysis.verdict == "leak"
    leak = next(f for f in analysis.findings if f.kind == "leak")
    assert leak.gpu == "0" and POD in leak.summary and "gpu-node-07" in leak.summary
    assert all(POD in e.text for e in leak.evidence)
    assert abs(leak.rate_bytes_per_hour - (1 << 30)) < 0.05 * (1 << 30)
    # and as a field of the JSON summary, for scripts
    assert leak.pod == POD[len("pod "):] and leak.host == "gpu-node-07"


def test_a_leak_in_a_grafana_download_gives_a_leak(tmp_path):
    doc = _leaking_dcgm()
    header = ['"Time"'] + ['"' + (r["metric"]["__name__"] + "{" + ", ".join(
        f'{k}="{v}"' for k, v in sorted(r["metric"].items()) if k != "__name__") + "}").replace('"', '""') + '"'
        for r in doc["data"]["result"]]
    rows = [",".join(header)] + [f"{t * 1000},{u},{f}" for (t, u), (_, f) in zip(
        doc["data"]["result"][0]["values"], doc["data"]["result"][1]["values"])]
    path = tmp_path / "GPU memory-data-2026-01-01.csv"
    path.write_text("\r\n".join(rows) + "\r\n")
    _, analysis = pipeline.run([str(path)], UTC)
    assert analysis.verdict == "leak"
    assert POD in next(f for f in analysis.findings if f.kind == "leak").summary


def test_a_month_on_one_line_is_claimed_and_read(tmp_path):
    """curl writes the response on one line: tens of MB, over the line reader's limit."""
    n = 40_000
    doc = _matrix([_series("DCGM_FI_DEV_FB_USED", {**GPU0, "gpu": str(g)}, [1000 + (i % 7) for i in range(n)])
                   for g in range(2)])
    path = tmp_path / "month.json"
    path.write_text(json.dumps(doc, separators=(",", ":")))
    assert path.stat().st_size > MAX_LINE_CHARS
    src = Source.open(path, str(path))
    info, results = ingest.parse_one(src, UTC)
    assert info.format == "prometheus-json" and info.lines == 1 and info.skipped == 0
    assert results[0].samples.height == 2 * n and len(results) == 1
    assert results[0].samples["line"].unique().to_list() == [1]


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_a_cut_document_is_one_line_saying_where(tmp_path, cut):
    data = json.dumps(_leaking_dcgm(200), separators=(",", ":")).encode()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(InputError) as e:
        parse_file(path, UTC)
    msg = str(e.value)
    assert "\n" not in msg and "cut off" in msg and "line 1 column" in msg
    bundle = ingest.load([str(path)], UTC)       # and the rest goes on: one input row with the error
    assert bundle.inputs[0].error and "cut off" in bundle.inputs[0].error


def test_a_failed_query_says_so(tmp_path):
    path = tmp_path / "err.json"
    path.write_text('{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": 1:1: parse error"}')
    # no resultType: not claimed as a result; an error response that says its type is
    assert prometheus.sniff([path.read_text()]) is None
    path.write_text('{"status":"error","errorType":"timeout","error":"query timed out","data":{"resultType":"matrix","result":[]}}')
    with pytest.raises(InputError, match="the query failed, Prometheus answered timeout"):
        parse_file(path, UTC)


def test_series_of_no_gpu_memory_metric_are_named_not_read(tmp_path):
    path = tmp_path / "util.json"
    path.write_text(json.dumps(_matrix([_series("DCGM_FI_DEV_GPU_UTIL", GPU0, [99, 98])])))
    _, p = parse_file(path, UTC, expect="prometheus-json")
    assert p.samples.height == 0 and "DCGM_FI_DEV_GPU_UTIL" in p.notes[0]


def test_nan_readings_are_counted_not_read(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(_matrix([_series("DCGM_FI_DEV_FB_USED", GPU0, [5, "NaN", "+Inf", 7])]), indent=1))
    _, p = parse_file(path, UTC)
    assert p.samples["bytes"].to_list() == [5 * MiB, 7 * MiB]
    assert p.skipped.counts == {exporters.NOT_A_NUMBER: 2}


def test_the_slow_path_reads_what_the_fast_one_does(tmp_path):
    """A label value holding `"values":[` defeats the cut-out of the points: json reads it whole."""
    doc = _matrix([_series("DCGM_FI_DEV_FB_USED", {**GPU0, "note": 'x"values":[[1,"2"]] y'}, [1, 2, 3]),
                   _series("DCGM_FI_DEV_FB_USED", {**GPU0, "gpu": "1"}, [4, 5, 6])])
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    _, p = parse_file(path, UTC)
    assert sorted(p.samples["bytes"].to_list()) == [v * MiB for v in range(1, 7)]


# -- properties ----------------------------------------------------------------------------------

def _parse_bytes(tmp_path: Path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return ingest.load([str(path)], UTC)


_json_text = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(
        st.sampled_from(["metric", "values", "value", "__name__", "gpu", "data", "result", "status", "resultType"]),
        kids, max_size=4)), max_leaves=20)


@SETTINGS
@given(st.one_of(_json_text.map(json.dumps), st.text(max_size=400)), st.integers(0, 400))
def test_garbage_after_a_prometheus_start_never_raises(tmp_path_factory, body, cut):
    """Whatever follows a start that the sniffer claims, the input ends as samples or one error line."""
    head = '{"status":"success","data":{"resultType":"matrix","result":['
    data = (head + body)[: len(head) + cut].encode()
    bundle = _parse_bytes(tmp_path_factory.mktemp("p"), "x.json", data)
    assert bundle.inputs[0].format == "prometheus-json" or bundle.inputs[0].error
    assert not bundle.inputs[0].error or ("internal error" not in bundle.inputs[0].error)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["0", "1", "2"]), st.lists(
    st.one_of(st.integers(0, 80000), st.sampled_from(["NaN", "x", "-1", "1e3"])), min_size=1, max_size=8)),
    min_size=1, max_size=5), st.randoms(use_true_random=False), st.booleans())
def test_layout_and_series_order_change_nothing(tmp_path_factory, spec, rnd, pretty):
    result = [_series("DCGM_FI_DEV_FB_USED", {**GPU0, "gpu": g, "k": str(i)}, vals) for i, (g, vals) in enumerate(spec)]
    shuffled = list(result)
    rnd.shuffle(shuffled)
    d = tmp_path_factory.mktemp("o")
    a, b = d / "a.json", d / "b.json"
    a.write_text(json.dumps(_matrix(result), separators=(",", ":")))
    b.write_text(json.dumps(_matrix(shuffled), indent=2 if pretty else None))
    pa, pb = (parse_file(x, UTC)[1].samples.drop("line", "seq") for x in (a, b))
    key = ["time", "gpu", "bytes"]
    assert_frame_equal(pa.sort(key), pb.sort(key))


@SETTINGS
@given(st.lists(st.one_of(st.text(max_size=60), st.sampled_from(
    ["1767225600000,20480,512", "1767225600000,,", '"Time","DCGM_FI_DEV_FB_USED{gpu=""0""}"', "", "sep=;",
     "2026-01-01 00:00:00,5,6", "x,y,z", "1767225600000;1;2", '"Series";"Time";"Value"'])), max_size=30))
def test_grafana_garbage_rows_never_raise(lines):
    head = ['"Time","DCGM_FI_DEV_FB_USED{gpu=""0""}","DCGM_FI_DEV_FB_FREE{gpu=""0""}"']
    batch = pl.DataFrame({"line": range(1, len(lines) + 2), "text": head + lines},
                         schema={"line": pl.Int64, "text": pl.String})
    r = grafana_csv.Reader(_FakeSrc(), UTC)
    r.feed(batch)
    p = r.finish()
    assert p.samples["line"].is_in(batch["line"].implode()).all()


class _FakeSrc:
    path = "grafana.csv"


@SETTINGS
@given(st.sampled_from(["dcgm_fb_used_joined_by_time.csv", "dcgm_series_as_rows_grafana6.csv",
                        "nvidia_gpu_exporter_frames_formatted.csv"]), st.sampled_from([1, 2, 7]))
def test_grafana_batches_give_the_same_result(name, size):
    src = Source.open(realworld(name))
    frame = src.frame()
    whole = grafana_csv.Reader(src, UTC)
    whole.feed(frame)
    want = whole.finish()
    parts = grafana_csv.Reader(src, UTC)
    for at in range(0, frame.height, size):
        parts.feed(frame.slice(at, size))
    got = parts.finish()
    assert_frame_equal(got.samples, want.samples)
    assert (got.skipped.counts, got.notes, got.clock) == (want.skipped.counts, want.notes, want.clock)


def test_head_shows_the_start_of_an_over_long_first_line(tmp_path):
    path = tmp_path / "one.json"
    body = '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(
        ['{"metric":{"__name__":"DCGM_FI_DEV_FB_USED"},"values":[[1767225600,"1"]]}'] * 30000) + "]}}"
    path.write_text(body)
    head = Source.open(path).head()
    assert head[0].startswith('{"status":"success"') and len(head[0]) < MAX_LINE_CHARS
    assert prometheus.sniff(head)


def test_shuffled_grafana_columns_read_the_same(tmp_path):
    rows = realworld("dcgm_fb_used_joined_by_time.csv").read_text().splitlines()
    names = common.header_cells(rows[0], ",")
    order = [0, 2, 1]
    swapped = [",".join('"' + names[j].replace('"', '""') + '"' for j in order)]
    swapped += [",".join(r.split(",")[j] for j in order) for r in rows[1:] if r.count(",") == 2]
    path = tmp_path / "swapped.csv"
    path.write_text("\r\n".join(swapped) + "\r\n")
    _, a = parse_file(realworld("dcgm_fb_used_joined_by_time.csv"), UTC)
    _, b = parse_file(path, UTC)
    key = ["time", "gpu"]
    assert_frame_equal(a.samples.sort(key).drop("line", "seq"), b.samples.sort(key).drop("line", "seq"))


def test_a_value_no_gpu_holds_is_dropped_and_counted(tmp_path):
    # found by bench/fuzz.py: a damaged MiB figure scaled past 1 PiB
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0", "Hostname": "n1"},
         "values": [[1767618000, "1000"], [1767618015, "1767618000000"], [1767618030, "1010"]]}]}}
    path = tmp_path / "fb.json"
    path.write_text(json.dumps(doc, indent=2))
    _, p = parse_file(path, UTC, expect="prometheus-json")
    assert sorted(p.samples["bytes"].to_list()) == [1000 * MiB, 1010 * MiB]
    assert sum(n for r, n in p.skipped.counts.items() if "implausible" in r) == 1


def test_the_slow_path_cites_each_values_own_line():
    data = b'{\n "a": [\n  [1, "10"],\n  [2, "20"],\n  [3, "10"]\n ]\n}\n'
    assert prometheus._value_lines(data, ["10", "20", "10"]) == [3, 4, 5]


def test_a_negative_value_is_counted_not_read(tmp_path):
    """Found by `bench/fuzz.py --only forced` (a value mutated to -1): the reader emitted -1 MiB."""
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0"},
         "values": [[1767618000 + 15 * i, "-1" if i == 3 else str(1000 + i)] for i in range(6)]}]}}
    p = tmp_path / "prom.json"
    p.write_text(json.dumps(doc, indent=1))
    _, parsed = parse_file(p, UTC, expect="prometheus-json")
    assert parsed.samples.height == 5 and parsed.samples["bytes"].min() >= 0
    assert parsed.skipped.total == 1


def test_a_number_of_sixty_thousand_digits_is_a_one_line_error(tmp_path):
    """Found by fuzz.py's forced property: a document the fast path could not cut went to json, which
    refuses to convert such an integer: a ValueError that is no JSONDecodeError escaped the reader."""
    data = b'{"result":[{"metric":{},"value":[' + b"1" * 60_000 + b',"5"]}]'
    p = tmp_path / "prom.json"
    p.write_bytes(data)
    err = prometheus._not_json(Source.open(p, str(p)), data, None)
    assert isinstance(err, InputError) and "\n" not in str(err)
