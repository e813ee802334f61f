"""compute-sanitizer --xml --save output: a real recording, PyTorch leak records, and untrusted input
(entity expansion, external entities, truncation) refused with a clean one-line error."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import parse_file

from forensics import ingest
from forensics.errors import InputError
from forensics.options import Options
from forensics.parsers.sanitizer import text as sanitizer
from forensics.parsers.sanitizer import xml_report as sanitizer_xml
from forensics.io.sources import Source

NAME = "compute-sanitizer-xml"

# Recorded on an NVIDIA H200, Compute Sanitizer 2025.3.1 (CUDA 13.0): `compute-sanitizer --leak-check
# full --xml --save out.xml ./leak` (an out-of-bounds write, a cudaMallocManaged and a cudaMalloc
# through a helper, never freed). Verbatim.
RECORDED_XML = """<?xml version="1.0" encoding="utf-8"?>
<ComputeSanitizerOutput>
  <record>
    <kind>Precise</kind>
    <level>Error</level>
    <who>
      <threadIdx>
        <x>255</x>
        <y>0</y>
        <z>0</z>
      </threadIdx>
      <blockIdx>
        <x>3</x>
        <y>0</y>
        <z>0</z>
      </blockIdx>
    </who>
    <what>
      <text>Invalid __global__ write of size 4 bytes is out of bounds</text>
      <space>__global__</space>
      <size>4</size>
      <direction>write</direction>
      <error>out of bounds</error>
      <address>0x7f24bc800ffc</address>
    </what>
    <where>
      <func>fill</func>
      <path>/tmp/leak.cu</path>
      <line>2</line>
      <pc>0xc0</pc>
    </where>
    <hostStack>
      <saveLocation>kernel launch time</saveLocation>
      <frame>
        <func>cuLaunchKernel</func>
        <pc>0x39fb94</pc>
        <module>/usr/local/nvidia/lib64/libcuda.so.1</module>
      </frame>
      <frame>
        <func>libcudart_static_4d8b33a106dceb3c07a56e26de61f2d53bb62a68</func>
        <pc>0xe1b3</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>cudaLaunchKernel</func>
        <pc>0x70607</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>__cudaLaunchKernel_helper</func>
        <path>/usr/local/cuda/bin/../targets/x86_64-linux/include/crt/device_functions.h</path>
        <line>2963</line>
        <pc>0x8c6d</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>__device_stub__Z4fillPfi</func>
        <path>/tmp/tmpxft_000001ad_00000000-6_leak.cudafe1.stub.c</path>
        <line>13</line>
        <pc>0x8fc5</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>fill</func>
        <path>/tmp/leak.cu</path>
        <line>2</line>
        <pc>0x9046</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>main</func>
        <path>/tmp/leak.cu</path>
        <line>8</line>
        <pc>0x8dae</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <pc>0x2a1c9</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>__libc_start_main</func>
        <pc>0x2a28a</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>_start</func>
        <pc>0x8ae4</pc>
        <module>/tmp/./leak</module>
      </frame>
    </hostStack>
  </record>
  <record>
    <kind>Api</kind>
    <what>
      <text>Program hit cudaErrorLaunchFailure (error 719) due to &quot;unspecified launch failure&quot; on CUDA API call to cudaDeviceSynchronize.</text>
      <api>cudaDeviceSynchronize</api>
      <error>cudaErrorLaunchFailure</error>
      <message>unspecified launch failure</message>
      <result>719</result>
    </what>
    <hostStack>
      <saveLocation>error</saveLocation>
      <frame>
        <pc>0x4cb045</pc>
        <module>/usr/local/nvidia/lib64/libcuda.so.1</module>
      </frame>
      <frame>
        <func>cudaDeviceSynchronize</func>
        <pc>0x406a0</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>main</func>
        <path>/tmp/leak.cu</path>
        <line>9</line>
        <pc>0x8db3</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <pc>0x2a1c9</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>__libc_start_main</func>
        <pc>0x2a28a</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>_start</func>
        <pc>0x8ae4</pc>
        <module>/tmp/./leak</module>
      </frame>
    </hostStack>
  </record>
  <record>
    <kind>Leak</kind>
    <what>
      <text>Leaked 8388608 bytes</text>
      <address>0x7f2494000000</address>
      <size>8388608</size>
      <type>generic</type>
    </what>
    <hostStack>
      <saveLocation>allocation time</saveLocation>
      <frame>
        <func>cuMemAllocManaged</func>
        <pc>0x32bfdf</pc>
        <module>/usr/local/nvidia/lib64/libcuda.so.1</module>
      </frame>
      <frame>
        <func>libcudart_static_dd7c6bfd64e486ac0b13293679bb2b3a416f8f8b</func>
        <pc>0x3da7f</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>libcudart_static_adb5f783e09f4d4accc321198548f260c18bac90</func>
        <pc>0xefdd</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>cudaMallocManaged</func>
        <pc>0x4caac</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>cudaError cudaMallocManaged&lt;float&gt;</func>
        <path>/usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h</path>
        <line>705</line>
        <pc>0x915b</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>main</func>
        <path>/tmp/leak.cu</path>
        <line>7</line>
        <pc>0x8d3b</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <pc>0x2a1c9</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>__libc_start_main</func>
        <pc>0x2a28a</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>_start</func>
        <pc>0x8ae4</pc>
        <module>/tmp/./leak</module>
      </frame>
    </hostStack>
  </record>
  <record>
    <kind>Leak</kind>
    <what>
      <text>Leaked 4092 bytes</text>
      <address>0x7f24bc800000</address>
      <size>4092</size>
      <type>generic</type>
    </what>
    <hostStack>
      <saveLocation>allocation time</saveLocation>
      <frame>
        <func>cuMemAlloc_v2</func>
        <pc>0x32b91f</pc>
        <module>/usr/local/nvidia/lib64/libcuda.so.1</module>
      </frame>
      <frame>
        <func>libcudart_static_5382377d5c772c9d197c0cda9fd9742ee6ad893c</func>
        <pc>0x3da2d</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>libcudart_static_f74e2f2bcf2cf49bd1a61332e1d15bd1e748f9cf</func>
        <pc>0xf082</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>cudaMalloc</func>
        <pc>0x4cca6</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>cudaError cudaMalloc&lt;float&gt;</func>
        <path>/usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h</path>
        <line>879</line>
        <pc>0x9130</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>make_buffer</func>
        <path>/tmp/leak.cu</path>
        <line>3</line>
        <pc>0x8cb5</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <func>main</func>
        <path>/tmp/leak.cu</path>
        <line>5</line>
        <pc>0x8cf4</pc>
        <module>/tmp/./leak</module>
      </frame>
      <frame>
        <pc>0x2a1c9</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>__libc_start_main</func>
        <pc>0x2a28a</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>_start</func>
        <pc>0x8ae4</pc>
        <module>/tmp/./leak</module>
      </frame>
    </hostStack>
  </record>
</ComputeSanitizerOutput>
"""

# Same machine, torch 2.11: `compute-sanitizer --leak-check full --xml --save out.xml python3 tleak.py`.
# The last of its three records, verbatim, inside the root element.
RECORDED_TORCH_XML = """<?xml version="1.0" encoding="utf-8"?>
<ComputeSanitizerOutput>
  <record>
    <kind>Leak</kind>
    <what>
      <text>Leaked 4 bytes</text>
      <address>0x7fd635400000</address>
      <size>4</size>
      <type>generic</type>
    </what>
    <hostStack>
      <saveLocation>allocation time</saveLocation>
      <frame>
        <pc>0x41c5d</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/../../nvidia/cu13/lib/libcudart.so.13</module>
      </frame>
      <frame>
        <pc>0x14815</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/../../nvidia/cu13/lib/libcudart.so.13</module>
      </frame>
      <frame>
        <func>cudaHostAlloc</func>
        <pc>0x51cd9</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/../../nvidia/cu13/lib/libcudart.so.13</module>
      </frame>
      <frame>
        <func>at::cuda::</func>
        <pc>0xcc0bd2</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so</module>
      </frame>
      <frame>
        <func>at::CachingHostAllocatorImpl&lt;c10::cuda::CUDAStream, std::unique_ptr&lt;c10::cuda::CUDAEvent, std::function&lt;void </func>
        <pc>0xcc962a</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so</module>
      </frame>
      <frame>
        <func>at::CachingHostAllocatorInterface&lt;at::cuda::</func>
        <pc>0xcbfa73</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so</module>
      </frame>
      <frame>
        <func>at::detail::empty_generic</func>
        <pc>0x197746b</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>at::detail::empty_cpu</func>
        <pc>0x1977b1c</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>at::detail::empty_cpu</func>
        <pc>0x1977c58</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>at::native::_local_scalar_dense_cuda const [clone .isra.0]</func>
        <pc>0x16a7776</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so</module>
      </frame>
      <frame>
        <func>at::native::_local_scalar_dense_cuda</func>
        <pc>0x16a7cd4</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so</module>
      </frame>
      <frame>
        <func>c10::impl::wrap_kernel_functor_unboxed_&lt;c10::impl::detail::WrapFunctionIntoFunctor_&lt;c10::CompileTimeFunctionPointer&lt;c10::Scalar </func>
        <pc>0x36c14dc</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so</module>
      </frame>
      <frame>
        <func>at::_ops::_local_scalar_dense::redispatch</func>
        <pc>0x2ace70d</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>c10::impl::wrap_kernel_functor_unboxed_&lt;c10::impl::detail::WrapFunctionIntoFunctor_&lt;c10::CompileTimeFunctionPointer&lt;c10::Scalar </func>
        <pc>0x54074c5</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>at::_ops::_local_scalar_dense::call</func>
        <pc>0x2b45cb4</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>at::native::item</func>
        <pc>0x2108f99</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>c10::impl::wrap_kernel_functor_unboxed_&lt;c10::impl::detail::WrapFunctionIntoFunctor_&lt;c10::CompileTimeFunctionPointer&lt;c10::Scalar </func>
        <pc>0x33048fb</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>at::_ops::item::call</func>
        <pc>0x29752a4</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so</module>
      </frame>
      <frame>
        <func>torch::autograd::THPVariable_item</func>
        <pc>0x4663fc</pc>
        <module>/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_python.so</module>
      </frame>
      <frame>
        <pc>0x151590</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>PyObject_Vectorcall</func>
        <pc>0x1499b4</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>_PyEval_EvalFrameDefault</func>
        <pc>0x1d710e</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>PyEval_EvalCode</func>
        <pc>0x1d55ea</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <pc>0x208851</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <pc>0x2b50d2</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>_PyRun_SimpleFileObject</func>
        <pc>0x2b4e39</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>_PyRun_AnyFileObject</func>
        <pc>0x2b4c6e</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>Py_RunMain</func>
        <pc>0x2bccd4</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>Py_BytesMain</func>
        <pc>0x2bc7bc</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <pc>0x2a1c9</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>__libc_start_main</func>
        <pc>0x2a28a</pc>
        <module>/lib/x86_64-linux-gnu/libc.so.6</module>
      </frame>
      <frame>
        <func>_start</func>
        <pc>0x257a04</pc>
        <module>/opt/torch/.venv/bin/python3</module>
      </frame>
      <frame>
        <func>&lt;module&gt;</func>
        <path>/tmp/tleak.py</path>
        <line>3</line>
      </frame>
    </hostStack>
  </record>
</ComputeSanitizerOutput>
"""

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<ComputeSanitizerOutput><record><kind>Leak</kind><what><text>&lol9;</text><size>1</size></what></record></ComputeSanitizerOutput>
"""


def write(tmp_path: Path, text: str, name: str = "out.xml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def events(parsed, kind=None):
    rows = parsed.events.to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return [r for r in rows if kind is None or r["kind"] == kind]


def test_recorded_xml(tmp_path):
    _, p = parse_file(write(tmp_path, RECORDED_XML), expect=NAME)
    assert p.clock == "none"
    leaks = events(p, "sanitizer_leak")
    assert [(x["bytes"], x["detail"]["address"], x["detail"]["site_label"]) for x in leaks] == [
        (8388608, "0x7f2494000000", "main (leak.cu:7)"),
        (4092, "0x7f24bc800000", "make_buffer (leak.cu:3)"),
    ]
    four_k = leaks[1]
    assert four_k["detail"]["site"] == {"symbol": "make_buffer", "module": "/tmp/./leak", "offset": "0x8cb5",
                                        "file": "/tmp/leak.cu", "line": 3}
    assert four_k["detail"]["save_location"] == "allocation time"
    assert [f["symbol"] for f in four_k["detail"]["stack"][:2]] == [
        "cuMemAlloc_v2", "libcudart_static_5382377d5c772c9d197c0cda9fd9742ee6ad893c"]
    assert four_k["detail"]["allocator_cache_at_exit"] is False
    # the evidence line points at the record's <text> element
    lines = RECORDED_XML.split("\n")
    assert "Leaked 4092 bytes" in lines[four_k["line"] - 1]
    assert four_k["text"] == "Leaked 4092 bytes at 0x7f24bc800000"

    access, api = events(p, "sanitizer_error")
    assert access["detail"]["category"] == "memory_access" and access["detail"]["level"] == "Error"
    assert access["detail"]["at"] == {"func": "fill", "path": "/tmp/leak.cu", "line": 2, "pc": "0xc0"}
    assert access["detail"]["thread"] == [255, 0, 0] and access["detail"]["block"] == [3, 0, 0]
    assert access["detail"]["address"] == "0x7f24bc800ffc" and access["detail"]["size"] == 4
    assert api["detail"]["category"] == "api_error" and api["detail"]["api"] == "cudaDeviceSynchronize"
    assert api["detail"]["code"] == 719 and api["detail"]["cuda_error"] == "cudaErrorLaunchFailure"
    assert api["detail"]["site_label"] == "main (leak.cu:9)"

    assert p.meta["leaks_listed"] == 2 and p.meta["leaks_listed_bytes"] == 8392700
    assert p.meta["leak_summary_bytes"] is None and p.meta["consistent"] is None
    assert any("no LEAK SUMMARY" in n for n in p.notes)


def test_recorded_torch_record(tmp_path):
    _, p = parse_file(write(tmp_path, RECORDED_TORCH_XML), expect=NAME)
    (leak,) = events(p, "sanitizer_leak")
    assert leak["bytes"] == 4
    assert leak["detail"]["allocator_cache_at_exit"] is True
    assert leak["detail"]["site"]["file"] == "/tmp/tleak.py" and leak["detail"]["site"]["line"] == 3
    assert leak["detail"]["site_label"] == "<module> (tleak.py:3)"


def test_text_and_xml_sniffs_do_not_overlap(tmp_path):
    xml_head = Source.open(write(tmp_path, RECORDED_XML)).head()
    assert sanitizer.sniff(xml_head) is None
    text_head = ["========= COMPUTE-SANITIZER", "========= LEAK SUMMARY: 0 bytes leaked in 0 allocations"]
    assert sanitizer_xml.sniff(text_head) is None


def test_billion_laughs_is_refused_without_expansion(tmp_path):
    path = write(tmp_path, BILLION_LAUGHS)
    src = Source.open(path)
    assert sanitizer_xml.sniff(src.head())
    t0 = time.monotonic()
    with pytest.raises(InputError) as err:
        sanitizer_xml.parse(src, Options(tz="UTC"))
    assert time.monotonic() - t0 < 2
    assert "DTD" in str(err.value) and str(err.value).startswith(str(path))
    # through ingest: one line in problems, no traceback, other files unaffected
    ok = write(tmp_path, RECORDED_XML, "good.xml")
    bundle = ingest.load([str(path), str(ok)], Options(tz="UTC"))
    assert len(bundle.problems) == 1 and "refused to read this XML" in bundle.problems[0]
    assert "lol" not in bundle.problems[0]
    assert bundle.events.filter(bundle.events["kind"] == "sanitizer_leak").height == 2


def test_external_entity_is_refused(tmp_path):
    secret = write(tmp_path, "TOP-SECRET-CONTENT", "secret.txt")
    doc = (f'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file://{secret}">]>\n'
           "<ComputeSanitizerOutput><record><kind>Leak</kind><what><text>&x;</text><size>8</size></what>"
           "</record></ComputeSanitizerOutput>\n")
    path = write(tmp_path, doc)
    with pytest.raises(InputError) as err:
        sanitizer_xml.parse(Source.open(path), Options(tz="UTC"))
    assert "TOP-SECRET" not in str(err.value)


def test_truncated_xml_is_a_clean_error_with_a_line(tmp_path):
    path = write(tmp_path, RECORDED_XML[: len(RECORDED_XML) // 2])
    with pytest.raises(InputError) as err:
        sanitizer_xml.parse(Source.open(path), Options(tz="UTC"))
    assert err.value.line is not None and "not well-formed" in str(err.value)


def test_empty_output_and_unknown_record_kinds(tmp_path):
    _, p = parse_file(write(tmp_path, "<?xml version=\"1.0\"?>\n<ComputeSanitizerOutput/>\n"), expect=NAME)
    assert p.records == 0 and any("no records" in n for n in p.notes)
    doc = ("<ComputeSanitizerOutput>\n<record>\n<kind>Race</kind><level>Warning</level><futureTag>x</futureTag>"
           "\n<what><text>Race reported</text></what></record>\n"
           "<record><kind>Leak</kind><what><text>Leaked 1,024 bytes</text></what></record>\n"
           "</ComputeSanitizerOutput>\n")
    _, p = parse_file(write(tmp_path, doc, "b.xml"), expect=NAME)
    race, leak = events(p)
    assert race["kind"] == "sanitizer_error" and race["detail"]["category"] == "race" and race["line"] == 4  # its <text> line
    assert leak["bytes"] == 1024 and leak["line"] == 5  # size taken from the text when <size> is missing
    assert leak["detail"]["site"] is None and leak["detail"]["site_label"] == "no host stack"


def test_text_around_the_document_is_ignored(tmp_path):
    text = "job 12 started\n" + RECORDED_XML + "job 12 finished\n"
    _, p = parse_file(write(tmp_path, text), expect=NAME)
    leaks = events(p, "sanitizer_leak")
    assert [x["bytes"] for x in leaks] == [8388608, 4092]
    assert "Leaked 4092 bytes" in text.split("\n")[leaks[1]["line"] - 1]  # line numbers keep the offset
    assert any("ignored" in n for n in p.notes)


def test_doctype_without_declaration_is_still_refused(tmp_path):
    doc = BILLION_LAUGHS.split("\n", 1)[1]  # no <?xml ...?> line
    with pytest.raises(InputError):
        sanitizer_xml.parse(Source.open(write(tmp_path, doc)), Options(tz="UTC"))
