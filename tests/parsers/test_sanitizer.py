"""compute-sanitizer / cuda-memcheck text reports: every real snippet, the three frame layouts, a real
recording, prefixes, the LEAK SUMMARY cross-check, and properties over arbitrary input."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import ingest
from forensics.options import Options
from forensics.parsers.sanitizer import text as sanitizer
from forensics.io.sources import Source
from conftest import REALWORLD, parse_file, realworld

NAME = "compute-sanitizer"

# Recorded on an NVIDIA H200 with Compute Sanitizer 2025.3.1 (CUDA 13.0, driver 580):
# `compute-sanitizer --leak-check full ./leak` on a program with an out-of-bounds write, a
# cudaMallocManaged and a cudaMalloc (through a helper) that are never freed. Verbatim.
RECORDED_CUDA = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at fill(float *, int)+0xc0 in leak.cu:2
=========     by thread (255,0,0) in block (3,0,0)
=========     Access to 0x7ff0f4800ffc is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7ff0f4800000 of size 4,092 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main in leak.cu:8 [0x8dae] in leak
========= 
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: main in leak.cu:9 [0x8db3] in leak
========= 
========= Leaked 8,388,608 bytes at 0x7ff0cc000000
=========     Saved host backtrace up to driver entry point at allocation time
=========         Host Frame: cudaMallocManaged [0x4caac] in leak
=========         Host Frame: cudaError cudaMallocManaged<float>(float**, unsigned long, unsigned int) in cuda_runtime.h:705 [0x915b] in leak
=========         Host Frame: main in leak.cu:7 [0x8d3b] in leak
========= 
========= Leaked 4,092 bytes at 0x7ff0f4800000
=========     Saved host backtrace up to driver entry point at allocation time
=========         Host Frame: cudaMalloc [0x4cca6] in leak
=========         Host Frame: cudaError cudaMalloc<float>(float**, unsigned long) in cuda_runtime.h:879 [0x9130] in leak
=========         Host Frame: make_buffer(unsigned long) in leak.cu:3 [0x8cb5] in leak
=========         Host Frame: main in leak.cu:5 [0x8cf4] in leak
========= 
program output line
========= LEAK SUMMARY: 8392700 bytes leaked in 2 allocations
========= ERROR SUMMARY: 4 errors
"""

# Same machine: `compute-sanitizer --leak-check full python3 tleak.py` with torch 2.11 (x = torch.ones(
# 1 << 20, device="cuda"); x.sum().item()). Verbatim excerpt: banner, program output, the first of
# three leak records, then the run's summary lines (so the listed leaks do NOT add up to the summary).
RECORDED_TORCH_EXCERPT = """========= COMPUTE-SANITIZER
sum 1048576.0
========= Leaked 20,971,520 bytes at 0x7f4a8a800000
=========     Saved host backtrace up to driver entry point at allocation time
=========         Host Frame:  [0x41b5d] in libcudart.so.13
=========         Host Frame:  [0x146f2] in libcudart.so.13
=========         Host Frame: cudaMalloc [0x50c56] in libcudart.so.13
=========         Host Frame: c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::AllocParams&, bool, std::shared_ptr<c10::GatheredContext> const&, std::unique_lock<std::recursive_mutex>&) [0x2f4ca] in libc10_cuda.so
=========         Host Frame: c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*) [0x42727] in libc10_cuda.so
=========         Host Frame: c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*) [0x445e1] in libc10_cuda.so
=========         Host Frame: c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long) [0x44c9e] in libc10_cuda.so
=========         Host Frame: at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>) [0x197746b] in libtorch_cpu.so
=========         Host Frame: at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>) [0xcd035e] in libtorch_cuda.so
=========         Host Frame: at::detail::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0xcd056d] in libtorch_cuda.so
=========         Host Frame: at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0xfea1f2] in libtorch_cuda.so
=========         Host Frame: at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0x36aa701] in libtorch_cuda.so
=========         Host Frame: c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>), &at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty>, at::Tensor, c10::guts::typelist::typelist<c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat> > >, at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)>::call(c10::OperatorKernel*, c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0x36aa81b] in libtorch_cuda.so
=========         Host Frame: at::_ops::empty_memory_format::redispatch(c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0x2aafcf5] in libtorch_cpu.so
=========         Host Frame: c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>), &at::(anonymous namespace)::empty_memory_format>, at::Tensor, c10::guts::typelist::typelist<c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat> > >, at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)>::call(c10::OperatorKernel*, c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0x2f19ec8] in libtorch_cpu.so
=========         Host Frame: at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>) [0x2b84833] in libtorch_cpu.so
=========         Host Frame: at::empty(c10::ArrayRef<long>, c10::TensorOptions, std::optional<c10::MemoryFormat>) [clone .constprop.0] [0x21f0160] in libtorch_cpu.so
=========         Host Frame: at::native::full(c10::ArrayRef<long>, c10::Scalar const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) [0x21f54af] in libtorch_cpu.so
=========         Host Frame: at::native::ones(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) [0x21f55bc] in libtorch_cpu.so
=========         Host Frame: c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>), &at::(anonymous namespace)::(anonymous namespace)::wrapper_CompositeExplicitAutograd__ones>, at::Tensor, c10::guts::typelist::typelist<c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool> > >, at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)>::call(c10::OperatorKernel*, c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) [0x31d71d9] in libtorch_cpu.so
=========         Host Frame: at::_ops::ones::redispatch(c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) [0x28f2cb0] in libtorch_cpu.so
=========         Host Frame: c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>), &at::(anonymous namespace)::ones>, at::Tensor, c10::guts::typelist::typelist<c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool> > >, at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)>::call(c10::OperatorKernel*, c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) [0x2f1895e] in libtorch_cpu.so
=========         Host Frame: at::_ops::ones::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) [0x29b1fb6] in libtorch_cpu.so
=========         Host Frame: torch::autograd::THPVariable_ones(_object*, _object*, _object*) [0x520c3a] in libtorch_python.so
=========         Host Frame:  [0x18216e] in python3
=========         Host Frame: _PyObject_MakeTpCall [0x14907d] in python3
=========         Host Frame: _PyEval_EvalFrameDefault [0x1d710e] in python3
=========         Host Frame: PyEval_EvalCode [0x1d55ea] in python3
=========         Host Frame:  [0x208851] in python3
=========         Host Frame:  [0x2b50d2] in python3
=========         Host Frame: _PyRun_SimpleFileObject [0x2b4e39] in python3
=========         Host Frame: _PyRun_AnyFileObject [0x2b4c6e] in python3
=========         Host Frame: Py_RunMain [0x2bccd4] in python3
=========         Host Frame: Py_BytesMain [0x2bc7bc] in python3
=========         Host Frame:  [0x2a1c9] in libc.so.6
=========         Host Frame: __libc_start_main [0x2a28a] in libc.so.6
=========         Host Frame: _start [0x257a04] in python3
=========         Host Frame: <module> in tleak.py:2
========= 
========= LEAK SUMMARY: 23068676 bytes leaked in 3 allocations
========= ERROR SUMMARY: 3 errors
"""


def write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def events(parsed, kind=None):
    rows = parsed.events.to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"]) if r["detail"] else {}
    return [r for r in rows if kind is None or r["kind"] == kind]


# -- the real-world snippets --------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("sanitizer_*.txt")))
def test_every_snippet_is_claimed_and_parsed(name):
    module, parsed = parse_file(realworld(name), expect=NAME)
    assert parsed.clock == "none"
    assert parsed.records > 0
    assert parsed.events["time"].null_count() == parsed.events.height
    assert parsed.events["line"].is_sorted()


def test_leak_11_newest_layout():
    _, p = parse_file(realworld("sanitizer_leak_11.txt"), expect=NAME)
    leaks = events(p, "sanitizer_leak")
    assert len(leaks) == 1
    leak = leaks[0]
    assert leak["bytes"] == 4092 and leak["line"] == 18
    assert leak["detail"]["address"] == "0x7b95b4000000"
    assert leak["detail"]["layout"] == "c"
    assert leak["detail"]["site"]["symbol"] == "main"
    assert leak["detail"]["site"]["module"] == "cs-writeValidMem"
    assert leak["detail"]["site_label"] == "main (cs-writeValidMem)"
    assert [f["symbol"] for f in leak["detail"]["stack"]] == ["cudaMallocManaged", "main"]
    assert leak["detail"]["allocator_cache_at_exit"] is False
    (summary,) = events(p, "sanitizer_summary")
    assert summary["bytes"] == 4092 and summary["detail"]["consistent"] is True
    assert p.meta["leak_summary_bytes"] == 4092 and p.meta["leak_summary_allocations"] == 1
    assert p.meta["leaks_listed_bytes"] == 4092 and p.meta["leaks_listed"] == 1
    assert p.meta["consistent"] is True
    errors = events(p, "sanitizer_error")
    categories = [e["detail"]["category"] for e in errors]
    assert categories == ["memory_access", "api_error", "error_summary"]
    assert errors[0]["text"].endswith("Invalid __global__ read of size 4 bytes")
    assert errors[0]["detail"]["at"] == "scaleArray(float *, float)+0x70 in writeValidMem.cu:6"
    assert errors[1]["detail"]["cuda_error"] == "cudaErrorLaunchFailure" and errors[1]["detail"]["code"] == 719
    assert errors[1]["detail"]["api"] == "cudaDeviceSynchronize"
    assert errors[2]["detail"]["errors"] == 3
    # the unprefixed program output ("Before: Array ...") is skipped, with a reason
    assert p.skipped.counts["program output (not a sanitizer line)"] >= 2


def test_leak_01_two_line_layout_with_ci_indentation():
    _, p = parse_file(realworld("sanitizer_leak_01.txt"), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 512 and leak["detail"]["address"] == "0x7f6059e00000"
    assert leak["detail"]["layout"] == "b"
    stack = leak["detail"]["stack"]
    assert stack[0]["module"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.1" and stack[0]["symbol"] is None
    assert stack[0]["offset"] == "0x28e3ce"
    assert stack[1]["symbol"].startswith("libcudart_static_")
    assert stack[1]["module"].endswith("cub.cpp17.test.block_radix_rank")
    # only the driver and the statically linked runtime are in this truncated stack: no user frame
    assert leak["detail"]["site"] is None
    assert "cub.cpp17.test.block_radix_rank" in leak["detail"]["site_label"]
    assert p.meta["consistent"] is None  # no LEAK SUMMARY in the excerpt
    assert any("no LEAK SUMMARY" in n for n in p.notes)


def test_leak_02_site_is_the_test_function():
    _, p = parse_file(realworld("sanitizer_leak_02.txt"), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 4
    assert leak["detail"]["site"]["symbol"] == "C_A_T_C_H_T_E_S_T_0()"
    assert leak["detail"]["site_label"] == "C_A_T_C_H_T_E_S_T_0 (cub.cpp17.test.nvrtc)"
    assert len(leak["detail"]["stack"]) == 3


def test_leak_07_legacy_memcheck_through_pytorch_allocator():
    _, p = parse_file(realworld("sanitizer_leak_07.txt"), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 2097152 and leak["detail"]["address"] == "0x7efecac00000"
    assert leak["detail"]["layout"] == "a"
    assert leak["detail"]["save_location"] == "cudaMalloc time"
    first = leak["detail"]["stack"][0]
    assert first == {"symbol": "cuMemAlloc_v2", "module": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                     "offset": "0x2b8257", "file": None, "line": None, "symbol_offset": "0x1b7"}
    assert leak["detail"]["stack"][-1]["module"].endswith("torch/lib/libc10_cuda.so")
    assert leak["detail"]["allocator_cache_at_exit"] is True
    assert leak["detail"]["site"] is None
    assert p.meta["tool"] == "cuda-memcheck"
    # python warnings and prints in between are program output, not tool lines
    assert p.skipped.counts["program output (not a sanitizer line)"] >= 6


def test_leak_08_windows_one_line_frames():
    _, p = parse_file(realworld("sanitizer_leak_08.txt"), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 4 and leak["detail"]["address"] == "0xdf6e00000"
    assert leak["detail"]["stack"][0] == {"symbol": "cuMemHostAlloc", "module": "nvcuda64.dll",
                                          "offset": "0x7fff5d00d5f5", "file": None, "line": None}
    assert leak["detail"]["site"]["module"] == "tensorrt_rtx_1_1.dll"
    assert leak["detail"]["site_label"] == "getBuilderPluginRegistry (tensorrt_rtx_1_1.dll)"


def test_leak_10_three_runs_cross_checked_separately():
    _, p = parse_file(realworld("sanitizer_leak_10.txt"), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 10 and leak["detail"]["address"] == "0x1303d80000"
    assert leak["detail"]["site"]["module"] == "./leak" and leak["detail"]["site"]["offset"] == "0x2bab3"
    assert leak["detail"]["site_label"] == "leak+0x2bab3"
    summaries = events(p, "sanitizer_summary")
    assert [(s["bytes"], s["detail"]["allocations"], s["detail"]["consistent"]) for s in summaries] == [
        (10, 1, True), (0, 0, True)]
    assert p.meta["consistent"] is True and p.meta["leak_summary_bytes"] == 10
    assert p.meta["runs"] == 3
    errors = events(p, "sanitizer_error")
    api = [e for e in errors if e["detail"]["category"] == "api_error"]
    assert len(api) == 1 and api[0]["detail"]["api"] == "cudaFree" and api[0]["line"] == 16
    # the failure-to-instrument lines say the check did not run: events and notes
    not_run = [e for e in errors if e["detail"]["category"] == "not_instrumented"]
    assert [e["line"] for e in not_run] == [28, 29, 30]
    assert sum("did not check the program" in n for n in p.notes) == 3
    assert [e["detail"]["errors"] for e in errors if e["detail"]["category"] == "error_summary"] == [1, 3]


def test_summary_only_snippets_are_inconsistent_with_nothing_listed():
    _, p4 = parse_file(realworld("sanitizer_leak_04.txt"), expect=NAME)
    (s,) = events(p4, "sanitizer_summary")
    assert s["bytes"] == 7536 and s["detail"]["allocations"] == 14
    assert p4.meta["consistent"] is False and p4.meta["leaks_listed"] == 0
    assert any("7536 bytes in 14 allocations" in n for n in p4.notes)
    _, p5 = parse_file(realworld("sanitizer_leak_05.txt"), expect=NAME)
    sums = events(p5, "sanitizer_summary")
    assert [x["bytes"] for x in sums] == [1006959488, 0]
    assert p5.meta["leak_summary_bytes"] == 1006959488 and p5.meta["leak_summary_allocations"] == 10
    assert p5.meta["consistent"] is False


# -- a real recording ---------------------------------------------------------------------------

def test_recorded_cuda_program(tmp_path):
    _, p = parse_file(write(tmp_path, RECORDED_CUDA), expect=NAME)
    leaks = events(p, "sanitizer_leak")
    assert [(x["bytes"], x["detail"]["address"]) for x in leaks] == [
        (8388608, "0x7ff0cc000000"), (4092, "0x7ff0f4800000")]
    # `Host Frame: cudaError cudaMalloc<float>(...) in cuda_runtime.h:879 [0x9130] in leak` is the
    # runtime's template wrapper, not the user's code
    assert leaks[0]["detail"]["site_label"] == "main (leak.cu:7)"
    assert leaks[1]["detail"]["site_label"] == "make_buffer (leak.cu:3)"
    assert leaks[1]["detail"]["site"] == {"symbol": "make_buffer(unsigned long)", "module": "leak",
                                          "offset": "0x8cb5", "file": "leak.cu", "line": 3}
    assert p.meta["consistent"] is True and p.meta["leak_summary_bytes"] == 8392700
    errors = events(p, "sanitizer_error")
    assert errors[0]["detail"]["category"] == "memory_access"
    assert errors[0]["detail"]["site_label"] == "main (leak.cu:8)"
    assert errors[-1]["detail"] == {"category": "error_summary", "errors": 4, "run": 0}


def test_recorded_pytorch_program_excerpt(tmp_path):
    _, p = parse_file(write(tmp_path, RECORDED_TORCH_EXCERPT), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 20971520
    # the newest tool appends the Python stack: the site is the user's script line
    assert leak["detail"]["site"] == {"symbol": "<module>", "module": None, "offset": None,
                                      "file": "tleak.py", "line": 2}
    assert leak["detail"]["site_label"] == "<module> (tleak.py:2)"
    assert leak["detail"]["allocator_cache_at_exit"] is True
    assert "caching allocator" in leak["detail"]["expected"]
    # frames with an empty symbol and a [clone ...] suffix are read
    assert leak["detail"]["stack"][0] == {"symbol": None, "module": "libcudart.so.13", "offset": "0x41b5d",
                                          "file": None, "line": None}
    # 38 frames of long C++ symbols: the stored stack keeps the innermost 16 and the outermost 4
    assert leak["detail"]["stack_frames"] == 38 and len(leak["detail"]["stack"]) == 20
    assert leak["detail"]["stack"][-1]["file"] == "tleak.py"
    assert max(len(f["symbol"] or "") for f in leak["detail"]["stack"]) <= sanitizer.SYMBOL_CHARS + 1
    # 1 of 3 records kept: the summary does not add up, and the report is told so
    assert p.meta["consistent"] is False
    assert p.meta["leak_summary_bytes"] == 23068676 and p.meta["leaks_listed_bytes"] == 20971520
    assert any("truncated" in n for n in p.notes)


# -- layouts, prefixes, odd input ------------------------------------------------------------------

def test_prefixed_lines_and_crlf(tmp_path):
    stamp = "2026-01-15T18:10:29.2167389Z "
    text = "\r\n".join([
        "build step 1", "build step 2", "build step 3", "running tests",
        stamp + "========= COMPUTE-SANITIZER",
        "some program output",
        stamp + "========= Leaked 1,048,576 bytes at 0x7f0000000000",
        stamp + "=========     Saved host backtrace up to driver entry point at allocation time",
        stamp + "=========         Host Frame: cudaMalloc [0x1234] in app",
        stamp + "=========         Host Frame: Trainer::alloc_buffers(int) [0x5678] in app",
        stamp + "========= ",
        stamp + "========= LEAK SUMMARY: 1048576 bytes leaked in 1 allocations",
        stamp + "========= ERROR SUMMARY: 1 error",
    ]) + "\r\n"
    _, p = parse_file(write(tmp_path, text), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 1048576
    assert leak["detail"]["site_label"] == "Trainer::alloc_buffers (app)"
    assert p.meta["consistent"] is True


def test_python_interpreter_and_torch_frames_are_skipped():
    frames = [
        {"symbol": "cudaMalloc", "module": "libcudart.so.12"},
        {"symbol": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
         "module": "libc10_cuda.so"},
        {"symbol": "at::native::empty_cuda()", "module": "libtorch_cuda.so"},
        {"symbol": "_PyEval_EvalFrameDefault", "module": "python3.10"},
        {"symbol": "PyObject_Call", "module": "libpython3.10.so.1.0"},
        {"symbol": "step", "file": "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "line": 3},
        {"symbol": "train_step", "file": "train.py", "line": 88},
    ]
    site, label = sanitizer.allocation_site(frames)
    assert site["symbol"] == "train_step" and label == "train_step (train.py:88)"
    assert sanitizer.through_caching_allocator(frames)
    assert not sanitizer.through_caching_allocator(frames[2:])


def test_legacy_frame_parsing():
    frame, layout = sanitizer.parse_host_frame("/lib64/libc.so.6 (__libc_start_main + 0xf5) [0x22505]")
    assert layout == "a" and frame["module"] == "/lib64/libc.so.6" and frame["symbol"] == "__libc_start_main"
    frame, layout = sanitizer.parse_host_frame("./leak [0x3174]")
    assert layout == "a" and frame["module"] == "./leak" and frame["symbol"] is None
    frame, layout = sanitizer.parse_host_frame("ggml_init in /src/ggml.c:2428 [0x159070]")
    assert layout == "b?" and frame["symbol"] == "ggml_init" and frame["file"] == "/src/ggml.c"
    assert frame["line"] == 2428


def test_detail_lines_without_a_record_are_counted(tmp_path):
    text = "=========     Host Frame: main [0x1] in app\n=========         in /x\n"
    _, p = parse_file(write(tmp_path, "========= COMPUTE-SANITIZER\n" + text), expect=NAME)
    assert p.events.height == 0
    assert p.skipped.counts["sanitizer detail line outside a record (excerpt starts mid-record?)"] == 2


def test_scan_finds_a_report_inside_another_log(tmp_path):
    lines = [f"[ctest] building target {i}" for i in range(400)]
    lines += ["========= COMPUTE-SANITIZER", "========= Leaked 64 bytes at 0x10",
              "=========     Saved host backtrace up to driver entry point at allocation time",
              "=========         Host Frame: make_table [0x10] in app",
              "========= LEAK SUMMARY: 64 bytes leaked in 1 allocations"]
    src = Source.open(write(tmp_path, "\n".join(lines) + "\n"))
    assert sanitizer.sniff(src.head()) is None  # the report is past the head
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    leaks = [r for p in results for r in events(p, "sanitizer_leak")]
    assert [(x["line"], x["bytes"], x["detail"]["site_label"]) for x in leaks] == [(402, 64, "make_table (app)")]


FAMILIES = ("nvsmi_", "kernlog_", "xid_", "stepmem_", "deepspeed_", "journal_", "torch_")


@pytest.mark.parametrize("path", sorted(p for p in REALWORLD.rglob("*.txt") if p.name.startswith(FAMILIES)),
                         ids=lambda p: p.name)
def test_sniffs_leave_other_families_alone(path):
    head = Source.open(path).head()
    assert sanitizer.sniff(head) is None


# -- properties ---------------------------------------------------------------------------------

_SAN_LINES = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r\n"), max_size=80),
    st.builds(lambda n, a: f"========= Leaked {n:,} bytes at 0x{a:x}", st.integers(0, 2**40), st.integers(0, 2**48)),
    st.builds(lambda n, a: f"========= Leaked {n} bytes at 0x{a:x}", st.integers(0, 2**40), st.integers(0, 2**48)),
    st.builds(lambda n, m: f"========= LEAK SUMMARY: {n} bytes leaked in {m} allocations",
              st.integers(0, 2**40), st.integers(0, 999)),
    st.sampled_from([
        "========= COMPUTE-SANITIZER", "========= CUDA-MEMCHECK", "=========", "========= ",
        "=========     Saved host backtrace up to driver entry point at allocation time",
        "=========         Host Frame: main [0x8a94] in app", "=========     Host Frame: [0x28e3ce]",
        "=========                in /usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "=========     Host Frame:/lib64/libcuda.so.1 (cuMemAlloc_v2 + 0x1b7) [0x26ec97]",
        "=========     Host Frame:", "========= Host Frame: ( + 0x) [0x]", "========= ERROR SUMMARY: 2 errors",
        "========= Program hit cudaErrorInvalidValue (error 1) due to \"x\" on CUDA API call to cudaFree.",
        "========= Invalid __global__ read of size 4 bytes", "========= Error: No attachable process found.",
        "========= Leaked ,,, bytes at 0x", "========= Leaked 1,2,3 bytes at 0xZZ",
    ]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_SAN_LINES, max_size=25))
def test_arbitrary_lines_never_raise_and_bytes_come_from_the_line(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        src = Source.open(path)
        sanitizer.sniff(src.head())
        parsed = sanitizer.parse(src, Options(tz="UTC"))
        for ev in parsed.events.to_dicts():
            json.loads(ev["detail"])
            if ev["bytes"] is not None:
                numbers = {int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", ev["text"])}
                assert ev["bytes"] in numbers, ev
