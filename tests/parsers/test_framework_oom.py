"""framework-oom: the out-of-memory errors of JAX/XLA, TensorFlow, the CUDA runtime and driver APIs,
ggml/llama.cpp and CuPy (real pastes in tests/samples/framework-oom/), claimed as files and found by
the scan inside any other log."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import parse_file, realworld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import pipeline
from forensics.options import Options
from forensics.parsers.oom import frameworks
from forensics.parsers.scanners import Scanners
from forensics.report import build_context
from forensics.io.sources import Source

NAME = frameworks.NAME


def ooms(parsed) -> list[dict]:
    rows = parsed.events.filter(pl.col("kind") == "gpu_oom").to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return rows


# file, line, framework, gpu, requested bytes, facts the detail must hold
EXPECTED = [
    ("jax_oom_01.txt", 2, "jax", None, 7406166528, {"exception": "jaxlib.xla_extension.XlaRuntimeError"}),
    ("jax_oom_02.txt", 6, "jax", None, 6291456,
     {"site": "/media/gccrcv/Data/Opensources/multinerf/internal/models.py:689", "shape": "f32[4096,128,3]",
      "peak_buffer_bytes": 6291456, "xla_total_allocation": 12 * 2**20}),
    ("jax_oom_03.txt", 7, "jax", "0", 3206250496, {}),
    ("jax_oom_04.txt", 2, "jax", None, 20029400304, {}),
    ("tf_oom_01.txt", 2, "tensorflow", "1", None,
     {"shape": "[]", "node": "Sum_1", "printed_at": [2, 8],
      "exception": "tensorflow.python.framework.errors_impl.ResourceExhaustedError"}),
    ("tf_oom_02.txt", 2, "tensorflow", "0", 64 * 2016 * 9 * 9 * 4,
     {"allocator": "GPU_0_bfc", "dtype": "float", "node": "SecondStageFeatureExtractor/cell_12/AvgPool_1"}),
    ("tf_oom_03.txt", 2, "tensorflow", "0", 320000 * 512 * 4, {"shape": "[320000,512]"}),
    ("tf_oom_04.txt", 10, "tensorflow", "0", 16 * 892800 * 8 * 4 * 2 * 2 * 4,
     {"limit": 10625279591, "in_use": 7350513920}),
    ("tf_oom_05.txt", 3, "tensorflow", "0", 16 * 112 * 112 * 147 * 4,
     {"node": "resnet_v1_50/conv1/ExtractImagePatches", "printed_at": [3, 10]}),
    ("cuda_oom_01.txt", 2, "cuda", None, 19104890880, {"error": "CUDA_ERROR_OUT_OF_MEMORY"}),
    ("cuda_oom_02.txt", 2, "cuda", None, None, {"error": "cudaMalloc", "exception": "RuntimeError"}),
    ("cuda_oom_03.txt", 2, "cuda", None, None,
     {"error": "cudaErrorMemoryAllocation", "exception": "cupy.cuda.runtime.CUDARuntimeError"}),
    ("cuda_oom_04.txt", 2, "cuda", None, None, {"error": "cudaMalloc"}),
    ("ggml_oom_01.txt", 5, "ggml", "0", 151851674624, {"allocator": "CUDA0", "error": "cudaMalloc"}),
    ("ggml_oom_02.txt", 3, "ggml", "1", 10345253120, {"allocator": "CUDA1"}),
    ("ggml_oom_03.txt", 7, "ggml", "0", 292926534144, {"allocator": "CUDA0"}),
    ("ggml_oom_04.txt", 6, "ggml", "4", 150995968, {"allocator": "CUDA4", "error": "cudaMalloc"}),
    ("cupy_oom_01.txt", 2, "cupy", None, 1073741824,
     {"in_use": 12373894656, "exception": "cupy.cuda.memory.OutOfMemoryError"}),
    ("cupy_oom_02.txt", 2, "cupy", None, 25600000, {"in_use": 3635267072}),
    ("cupy_oom_03.txt", 7, "cupy", None, 163840000, {"in_use": 1673061376}),
]


def test_every_sample_has_its_expectation():
    folder = realworld("jax_oom_01.txt").parent
    assert sorted(p.name for p in folder.glob("*.txt")) == sorted(e[0] for e in EXPECTED)
    for framework in ("jax", "tensorflow", "cuda", "ggml", "cupy"):
        assert sum(e[2] == framework for e in EXPECTED) >= 3, framework


@pytest.mark.parametrize("name, line, framework, gpu, requested, facts", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_each_sample_is_one_oom_with_its_facts(name, line, framework, gpu, requested, facts):
    _, p = parse_file(realworld(name), expect=NAME)
    (ev,) = ooms(p)
    d = ev["detail"]
    assert (ev["line"], d["framework"], ev["gpu"], ev["bytes"]) == (line, framework, gpu, requested)
    assert d.get("requested") == requested
    for k, v in facts.items():
        assert d.get(k) == v, k


def test_tensorflow_node_defined_at_and_op(tmp_path):
    p = tmp_path / "tf.log"
    p.write_text(
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError:  OOM when allocating tensor with "
        "shape[8,512,512] and type half on /job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc\n"
        "\t [[node model/dense/MatMul (defined at /home/u/train.py:42) ]] [Op:__inference_train_function_1234]\n")
    _, parsed = parse_file(p, expect=NAME)
    (ev,) = ooms(parsed)
    d = ev["detail"]
    assert (ev["gpu"], ev["bytes"], d["node"], d["site"]) == ("1", 8 * 512 * 512 * 2, "model/dense/MatMul",
                                                             "/home/u/train.py:42")


def test_the_allocator_names_the_gpu_of_an_xla_oom(tmp_path):
    p = tmp_path / "jax.log"
    p.write_text("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 32.00MiB "
                 "with allocator GPU_0_bfc\n")
    _, parsed = parse_file(p, expect=NAME)
    (ev,) = ooms(parsed)
    assert (ev["gpu"], ev["bytes"], ev["detail"]["allocator"]) == ("0", 32 * 2**20, "GPU_0_bfc")


def test_warnings_and_prose_are_not_ooms(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text(
        "2020-09-24 21:35:23.363348: W tensorflow/core/common_runtime/bfc_allocator.cc:246] Allocator (GPU_0_bfc) "
        "ran out of memory trying to allocate 1.02GiB with freed_by_count=0. The caller indicates that this is "
        "not a failure, but may mean that there could be performance gains if more memory were available.\n"
        "ggml_gallocr_reserve_n: failed to allocate CPU buffer of size 1024\n"
        "we talked about cudaMalloc yesterday\n")
    src = Source.open(p, str(p))
    out = frameworks.scan(src.frame(), src, Options(tz="UTC"))
    assert out.events.height == 0


def _step_log(tmp_path: Path, tail: str) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    lines = [f"2026-01-05 10:{i // 60:02d}:{i % 60:02d} step {i} loss 1.0 mem_allocated {1000 + 40 * i} MiB"
             for i in range(120)]
    (folder / "train.log").write_text("\n".join(lines) + "\n" + tail)
    return folder


@pytest.mark.parametrize("tail, name", [
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 32.00MiB "
     "with allocator GPU_0_bfc\n", "JAX/XLA out of memory"),
    ("cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 25,600,000 bytes (allocated so far: "
     "3,635,267,072 bytes).\n", "CuPy out of memory"),
])
def test_a_log_that_grew_until_it_ran_out_has_an_oom(tmp_path, tail, name):
    """The OOM at the end of a training log another parser claims is found by the scan, the growth ran
    out in it, and the report's "What ended the job" names it (not a green "No leak found" beside it)."""
    bundle, analysis = pipeline.run([str(_step_log(tmp_path, tail))], Options(tz="UTC"))
    ooms_found = [f for f in analysis.findings if f.kind == "gpu_oom"]
    assert len(ooms_found) == 1 and ooms_found[0].bytes and ooms_found[0].summary.startswith(name)
    assert analysis.verdict == "leak"
    assert [f.detail.get("ran_out") for f in analysis.findings if f.kind == "leak"] == ["gpu_oom"]
    assert analysis.ended_by is not None and analysis.tone == "critical"
    fatal = build_context(bundle, analysis, Options(tz="UTC"))["verdict"]["fatal"]
    assert fatal is not None and fatal["label"].startswith(name)


def test_scanner_declarations_hold_for_the_samples():
    folder = realworld("jax_oom_01.txt").parent
    scanners = Scanners(skip=set())
    for path in sorted(folder.glob("*.txt")):
        src = Source.open(path, str(path))
        hinted = src.frame().filter(pl.col("text").str.contains(frameworks.SCAN_HINT))
        for text in hinted["text"]:
            assert any(x in text.lower() for x in frameworks.SCAN_BLOCK_LITERALS), text
    assert frameworks.NAME in {f.name for f in scanners.mods}


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.text(max_size=200),
    st.sampled_from(["RESOURCE_EXHAUSTED: Out of memory while trying to allocate ", "OOM when allocating tensor with shape[",
                     "failed to allocate CUDA0 buffer of size ", "CUDA_ERROR_OUT_OF_MEMORY", "cudaMalloc failed: out of memory",
                     "Out of memory allocating 1,0 bytes (allocated so far: 9 bytes)", "Peak buffers:", "Limit: 99",
                     " source_file=\"a\" source_line=3", "==========", "[[node x (defined at a.py:1) ]]"]),
    st.from_regex(r"OOM when allocating tensor with shape\[[0-9,]{0,40}\] and type (float|half|int8)", fullmatch=True),
), max_size=12).map(lambda parts: "".join(parts)))
def test_arbitrary_lines_never_raise(text):
    with_lines = text.replace("\r", "\n").split("\n")
    frameworks.sniff(with_lines)
    for line in with_lines:
        found = frameworks._dialect(line)
        if found is not None:
            d = frameworks._facts(found[0], found[1], line, with_lines, with_lines)
            assert d.get("requested") is None or d["requested"] >= 0


@pytest.mark.parametrize("line, error", [
    ("CUDA driver error: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_OUT_OF_MEMORY"),
    ("cudaMallocManaged failed: out of memory (allocating 512 MiB on device 2)", "cudaMallocManaged"),
])
def test_cuda_api_errors_name_the_error(tmp_path, line, error):
    p = tmp_path / "app.log"
    p.write_text(line + "\n")
    _, parsed = parse_file(p, expect=NAME)
    (ev,) = ooms(parsed)
    assert ev["detail"]["error"] == error
    if "512 MiB" in line:
        assert (ev["bytes"], ev["gpu"]) == (512 * 2**20, "2")
