"""PyTorch CUDA OOM messages: every real snippet and era, a real torch 2.11 recording, prefixes and
clocks, wrapped messages, the scan path through a long training log, and properties."""
from __future__ import annotations

import json
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from conftest import REALWORLD, parse_file, realworld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import ingest
from forensics import units
from forensics.options import Options
from forensics.parsers.torch import oom as torch_oom
from forensics.io.sources import Source

NAME = "pytorch-oom"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def gib(x: float) -> int:
    return round(x * GiB)


def mib(x: float) -> int:
    return round(x * MiB)


# Recorded on an NVIDIA H200 with torch 2.11.0+cu130 (python3 oom.py: torch.ones(1 << 28) on the GPU,
# then torch.empty(400 GiB)). Verbatim stderr.
RECORDED_PLAIN = """Traceback (most recent call last):
  File "/tmp/oom.py", line 12, in <module>
    step(400 * 2**30)
  File "/tmp/oom.py", line 11, in step
    return torch.empty(n, dtype=torch.uint8, device="cuda")
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 400.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 138.20 GiB is free. Including non-PyTorch memory, this process has 1.60 GiB memory in use. Of the allocated memory 1024.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)
"""
# Same, after torch.cuda.set_per_process_memory_fraction(0.5): the message line only.
RECORDED_FRACTION = """torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 400.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 138.20 GiB is free. Including non-PyTorch memory, this process has 1.60 GiB memory in use. 69.90 GiB allowed; Of the allocated memory 1024.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)
"""
# Same, with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: the multi-line form of that backend.
RECORDED_ASYNC = """Traceback (most recent call last):
  File "/tmp/oom.py", line 12, in <module>
    step(400 * 2**30)
  File "/tmp/oom.py", line 11, in step
    return torch.empty(n, dtype=torch.uint8, device="cuda")
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)
Currently allocated     : 1024.00 MiB
Requested               : 400.00 GiB
Device limit            : 139.80 GiB
Free (according to CUDA): 138.13 GiB
PyTorch limit (set by user-supplied memory fraction)
                        : 17179869184.00 GiB
"""

MODERN = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
          "capacity of 23.64 GiB of which 3.06 MiB is free. Including non-PyTorch memory, this process has "
          "23.62 GiB memory in use. Of the allocated memory 22.81 GiB is allocated by PyTorch, and 353.29 MiB "
          "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
          "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def ooms(parsed):
    rows = parsed.events.filter(pl.col("kind") == "gpu_oom").to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return rows


def one(path, **kw):
    _, p = parse_file(path, expect=NAME, **kw)
    (ev,) = ooms(p)
    return ev, p


# -- the real-world snippets --------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("torch_oom_*.txt")))
def test_every_snippet_is_claimed_with_sizes(name):
    _, p = parse_file(realworld(name), expect=NAME)
    evs = ooms(p)
    assert evs
    for ev in evs:
        assert ev["bytes"] is not None and ev["bytes"] == ev["detail"]["requested"]
        assert ev["gpu"] is not None and ev["detail"]["total"] is not None
        assert ev["detail"]["torch_era"] != "unknown"


def test_oom_10_vllm_worker_in_a_container():
    ev, p = one(realworld("torch_oom_10.txt"))
    assert ev["bytes"] == 1342177280 and ev["gpu"] == "1"
    assert ev["process"] == "VllmWorker rank=1" and ev["pid"] == 254 and ev["detail"]["rank"] == 1
    d = ev["detail"]
    assert d["total"] == gib(93.02) and d["free"] == gib(1.18)
    assert d["other_processes"] == [{"pid": 2752205, "bytes": gib(91.82)}]
    assert d["this_process_in_use"] is None
    assert d["allocated"] == gib(90.63) and d["reserved_unallocated"] == mib(120.54)
    assert d["reserved"] == gib(90.63) + mib(120.54)
    assert d["exception"] == "torch.OutOfMemoryError" and d["torch_era"] == "2.4-2.7"
    assert ev["time"] is None and p.clock == "none"


@pytest.mark.parametrize("prefix, pid", [
    ("VllmWorker rank=-0 pid=254) ", 254),          # not a worker tag (rank=-0): the bare pid= is read
    ("2026-11-30 10:00:01 host pid: 31337 ", 31337),
])
def test_a_pid_outside_a_worker_tag(tmp_path, prefix, pid):
    # the worker tag's own `pid=` search once shadowed this one's regex: IndexError (found by bench/fuzz.py)
    ev, _ = one(write(tmp_path, prefix + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. "
                      "GPU 0 has a total capacity of 79.15 GiB of which 3.69 MiB is free.\n"))
    assert ev["pid"] == pid and ev["bytes"] == mib(20)


def test_oom_02_oldest_cached_form():
    ev, _ = one(realworld("torch_oom_02.txt"))
    d = ev["detail"]
    assert ev["bytes"] == mib(12.5) and ev["gpu"] == "0"
    assert (d["total"], d["allocated"], d["free"], d["reserved"]) == (gib(10.92), mib(8.57), gib(9.28), mib(4.68))
    assert d["exception"] == "RuntimeError" and d["torch_era"] == "~1.0-1.3"


def test_oom_01_reserved_in_total_without_class():
    ev, _ = one(realworld("torch_oom_01.txt"))
    d = ev["detail"]
    assert ev["bytes"] == gib(2.26)
    assert (d["total"], d["allocated"], d["free"], d["reserved"]) == (gib(6.0), mib(781.59), gib(3.03), gib(1.24))
    assert d["reserved_unallocated"] == gib(1.24) - mib(781.59)
    assert d["exception"] is None


def test_oom_04_capacty_typo_and_zero_bytes_free():
    ev, _ = one(realworld("torch_oom_04.txt"))
    d = ev["detail"]
    assert ev["bytes"] == gib(1.70) and d["total"] == gib(6.0)
    assert d["free"] == 0  # "0 bytes is free": zero, not missing
    assert d["allocated"] == gib(2.93) and d["reserved_unallocated"] == gib(2.30)
    assert d["torch_era"] == "2.1" and d["exception"] == "torch.cuda.OutOfMemoryError"


def test_oom_05_allocated_above_capacity_is_kept_as_printed():
    ev, _ = one(realworld("torch_oom_05.txt"))
    d = ev["detail"]
    assert d["allocated"] == gib(17.20) > d["total"] == gib(8.0)
    assert d["reserved"] == gib(19.15) and d["torch_era"] == "1.13-2.0"


def test_oom_07_this_process_clause():
    ev, _ = one(realworld("torch_oom_07.txt"))
    assert ev["bytes"] == mib(32) and ev["detail"]["this_process_in_use"] == gib(3.44)
    assert ev["detail"]["free"] == mib(41.56) and ev["detail"]["reserved_unallocated"] == mib(1.90)


def test_oom_08_bare_message_followed_by_app_output():
    ev, p = one(realworld("torch_oom_08.txt"))
    assert ev["bytes"] == gib(30.29) and ev["detail"]["exception"] is None
    assert ev["detail"]["torch_era"] == "2.2-2.7"
    assert "lines" not in ev["detail"]  # "Unloaded DynamicSwap_LlamaModel" is not part of the message
    assert p.skipped.counts["not part of an out-of-memory message"] == 6  # 5 app lines + the provenance line


def test_oom_11_private_pools_two_processes_grep_prefix():
    ev, _ = one(realworld("torch_oom_11.txt"))
    d = ev["detail"]
    assert ev["gpu"] == "4" and ev["bytes"] == gib(25.96) and ev["line"] == 3
    assert d["private_pools"] == mib(1.38)
    assert d["other_processes"] == [{"pid": 7478, "bytes": gib(4.08)}]
    assert d["this_process_in_use"] == gib(52.02)
    assert d["torch_era"] == "2.8+"


def test_oom_13_allowed_wrapped_and_windows_sentinel():
    _, p = parse_file(realworld("torch_oom_13.txt"), expect=NAME)
    capped, wrapped, windows = ooms(p)
    assert capped["detail"]["allowed"] == gib(17.69) and capped["bytes"] == mib(996)
    assert capped["detail"]["exception"] == "OutOfMemoryError"
    assert capped["detail"]["other_processes"] == [{"pid": 2102129, "bytes": gib(17.54)}]
    # a message the user broke over three lines is read as one
    assert wrapped["line"] == 4 and wrapped["detail"]["lines"] == [4, 6]
    assert wrapped["bytes"] == gib(1.60) and wrapped["detail"]["total"] == gib(8.0)
    assert wrapped["detail"]["free"] == mib(453) and wrapped["detail"]["allowed"] == gib(6.80)
    assert wrapped["detail"]["allocated"] == gib(6.41)
    # NVML's "not available" (2^64 bytes) becomes null, never a number
    assert windows["detail"]["this_process_in_use"] is None
    assert windows["detail"]["other_processes"] == [{"pid": 9132, "bytes": None}]
    assert windows["detail"]["sentinel_fields"] == ["this_process_in_use", "process 9132"]
    assert windows["detail"]["allowed"] == gib(2.63) and windows["detail"]["reserved_unallocated"] == 0


def test_oom_14_old_form_with_allowed():
    _, p = parse_file(realworld("torch_oom_14.txt"), expect=NAME)
    quoted, capped, hinted = ooms(p)
    assert quoted["bytes"] == gib(37.25) and quoted["detail"]["allowed"] == gib(2.37)
    assert capped["bytes"] == gib(5.59) and capped["detail"]["allowed"] == gib(5.59)
    assert capped["detail"]["allocated"] == 0 and capped["detail"]["reserved"] == 0
    assert hinted["detail"]["torch_era"] == "1.10-2.0"


# -- a real recording ---------------------------------------------------------------------------

def test_recorded_torch_2_11_with_traceback(tmp_path):
    ev, _ = one(write(tmp_path, RECORDED_PLAIN))
    d = ev["detail"]
    assert ev["line"] == 7 and ev["bytes"] == gib(400) and ev["gpu"] == "0"
    assert d["total"] == gib(139.80) and d["free"] == gib(138.20) and d["this_process_in_use"] == gib(1.60)
    assert d["allocated"] == mib(1024) and d["reserved_unallocated"] == 0 and d["reserved"] == mib(1024)
    assert d["torch_era"] == "2.8+"
    assert d["traceback"] == [
        {"file": "/tmp/oom.py", "line": 12, "func": "<module>", "code": "step(400 * 2**30)"},
        {"file": "/tmp/oom.py", "line": 11, "func": "step",
         "code": 'return torch.empty(n, dtype=torch.uint8, device="cuda")'},
    ]
    assert d["site"] == "/tmp/oom.py:11 in step"


def test_recorded_fraction_cap(tmp_path):
    ev, _ = one(write(tmp_path, RECORDED_FRACTION))
    assert ev["detail"]["allowed"] == gib(69.90)


def test_recorded_cudamallocasync_backend(tmp_path):
    ev, _ = one(write(tmp_path, RECORDED_ASYNC))
    d = ev["detail"]
    assert ev["bytes"] == gib(400) and ev["gpu"] == "0" and d["lines"] == [7, 13]
    assert (d["total"], d["free"], d["allocated"]) == (gib(139.80), gib(138.13), mib(1024))
    assert d["allowed"] is None and d["sentinel_fields"] == ["allowed"]  # "no limit" printed as 2^64
    assert d["torch_era"] == "cudaMallocAsync backend"


def test_memsummary_04_bare_cudamallocasync_oom_found_by_scan():
    src = Source.open(realworld("torch_memsummary_04.txt"))
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    assert info.format == "pytorch-memory-summary"
    evs = [e for p in results for e in ooms(p)]
    assert len(evs) == 1 and evs[0]["line"] == 4 and evs[0]["bytes"] is None
    assert evs[0]["detail"]["exception"] == "torch.OutOfMemoryError"
    assert "states no sizes" in evs[0]["detail"]["note"]


# -- prefixes, clocks, wrapping ----------------------------------------------------------------------

def test_python_logging_prefix_gives_a_local_time(tmp_path):
    line = "2026-10-11 01:43:11,472 | ERROR | Model failed: tabpfn | " + MODERN.split(": ", 1)[1]
    ev, p = one(write(tmp_path, line + "\n"), opts=Options(tz="Europe/Berlin"))
    assert ev["time"] == datetime(2026, 10, 10, 23, 43, 11, 472000, tzinfo=timezone.utc)
    assert p.clock == "wall-assumed" and ev["bytes"] == mib(20) and ev["detail"]["exception"] is None


def test_offset_timestamp_and_torchrun_rank(tmp_path):
    line = "[2024-03-01T10:00:00.250+01:00] [rank3]: " + MODERN
    ev, p = one(write(tmp_path, line + "\n"), opts=Options(tz="America/New_York"))
    assert ev["time"] == datetime(2024, 3, 1, 9, 0, 0, 250000, tzinfo=timezone.utc)
    assert p.clock == "wall" and ev["detail"]["rank"] == 3


def test_logger_record_before_the_traceback_dates_the_oom(tmp_path):
    text = "\n".join([
        "2024-05-01 12:00:00,000 ERROR trainer: step 812 failed",
        "Traceback (most recent call last):",
        '  File "/home/u/proj/train.py", line 88, in train_step',
        "    loss = model(batch)",
        '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1553, in _call_impl',
        "    return forward_call(*args, **kwargs)",
        MODERN,
    ]) + "\n"
    ev, _ = one(write(tmp_path, text))
    assert ev["time"] == datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert ev["detail"]["time_from_line"] == 1
    assert ev["detail"]["site"] == "/home/u/proj/train.py:88 in train_step"  # not the torch frame
    assert len(ev["detail"]["traceback"]) == 2


def test_ray_and_docker_prefixes(tmp_path):
    ev, _ = one(write(tmp_path, "(RayWorkerWrapper pid=4711, ip=10.0.0.3) " + MODERN + "\n"))
    assert ev["process"] == "RayWorkerWrapper" and ev["pid"] == 4711
    # a compose prefix on some lines only (so not stripped as a wrapper) names the service
    text = "Traceback (most recent call last):\nother output\ntrainer-1  | " + MODERN + "\n"
    ev, _ = one(write(tmp_path, text, "compose.txt"))
    assert ev["process"] == "trainer-1" and ev["bytes"] == mib(20)


def test_journal_tag_names_the_process(tmp_path):
    src = Source.open(write(tmp_path, "Mar 02 10:00:01 gpu7 python3[88123]: " + MODERN + "\n"))
    _, results = ingest.parse_one(src, Options(tz="UTC"))  # a syslog file: the kernel-log parser claims it
    (ev,) = [e for p in results for e in ooms(p)]
    assert ev["process"] == "python3" and ev["pid"] == 88123
    assert ev["time"] is None  # a syslog stamp has no year: left to the timeline, not guessed here


def test_hf_example_script_time_format(tmp_path):
    line = "05/17/2024 14:03:09 - ERROR - __main__ - " + MODERN
    ev, p = one(write(tmp_path, line + "\n"), opts=Options(tz="UTC"))
    assert ev["time"] == datetime(2024, 5, 17, 14, 3, 9, tzinfo=timezone.utc) and p.clock == "wall-assumed"


def test_collapsed_and_double_spaces_read_alike(tmp_path):
    collapsed = re.sub(r"\s+", " ", MODERN)
    a, _ = one(write(tmp_path, MODERN + "\n", "a.txt"))
    b, _ = one(write(tmp_path, collapsed + "\n", "b.txt"))
    keys = ("requested", "total", "free", "allocated", "reserved", "this_process_in_use")
    assert [a["detail"][k] for k in keys] == [b["detail"][k] for k in keys]
    assert a["detail"]["total"] == gib(23.64)


def test_terminal_hard_wrap_is_joined(tmp_path):
    wrapped = "\n".join(MODERN[i:i + 80] for i in range(0, len(MODERN), 80))
    ev, _ = one(write(tmp_path, "Traceback (most recent call last):\n" + wrapped + "\nnext program line\n"))
    d = ev["detail"]
    assert ev["bytes"] == mib(20) and d["total"] == gib(23.64) and d["free"] == mib(3.06)
    assert d["this_process_in_use"] == gib(23.62) and d["reserved_unallocated"] == mib(353.29)
    assert d["lines"][0] == 2 and d["lines"][1] == 1 + len(range(0, len(MODERN), 80))


def test_prose_mentions_are_not_ooms(tmp_path):
    text = "\n".join([
        "INFO retrying after CUDA out of memory with a smaller batch",
        "  File \"/x/torch/cuda/memory.py\", line 9, in f",
        "    raise torch.OutOfMemoryError",
        "see docs about OutOfMemoryError handling",
    ]) + "\n"
    src = Source.open(write(tmp_path, text))
    hits = src.frame().filter(pl.col("text").str.contains(torch_oom.SCAN_HINT))
    assert hits.height == 3
    assert torch_oom.scan(hits, src, Options(tz="UTC")).events.height == 0
    assert torch_oom.sniff(src.head()) is None


def test_cuda_runtime_oom_without_sizes(tmp_path):
    text = "Traceback (most recent call last):\ntorch.AcceleratorError: CUDA error: out of memory\n"
    ev, _ = one(write(tmp_path, text))
    assert ev["bytes"] is None and ev["detail"]["exception"] == "torch.AcceleratorError"
    assert ev["detail"]["torch_era"].startswith("CUDA runtime error")


def test_scan_finds_the_oom_at_the_end_of_a_long_training_log(tmp_path):
    lines = [f"epoch {i // 500} | iter {i} | loss {2.5 - i / 4000:.4f} | lr 3.0e-04 | 1.92 it/s"
             for i in range(4990)]
    lines += [
        "Traceback (most recent call last):",
        '  File "/srv/job/train.py", line 212, in <module>',
        "    main()",
        '  File "/srv/job/train.py", line 147, in main',
        "    out = model(x)",
        "    ^^^^^^^^^^^^^^",
        MODERN,
        "[W CUDAGuardImpl.h:119] Warning: process exiting",
    ]
    path = write(tmp_path, "\n".join(lines) + "\n", "train.log")
    src = Source.open(path)
    assert torch_oom.sniff(src.head()) is None  # the head is ordinary training output
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    assert info.format != NAME
    evs = [e for p in results for e in ooms(p)]
    assert len(evs) == 1
    ev = evs[0]
    assert ev["line"] == 4997 and ev["bytes"] == mib(20)
    assert ev["detail"]["site"] == "/srv/job/train.py:147 in main"
    # the same through the scan entry point on the prefiltered lines only
    hits = src.frame().filter(pl.col("text").str.contains(torch_oom.SCAN_HINT))
    assert hits["line"].to_list() == [4997]
    assert ooms(torch_oom.scan(hits, src, Options(tz="UTC")))[0]["line"] == 4997


FAMILIES = ("nvsmi_", "kernlog_", "xid_", "stepmem_", "deepspeed_", "journal_", "sanitizer_")


@pytest.mark.parametrize("path", sorted(p for p in REALWORLD.rglob("*.txt") if p.name.startswith(FAMILIES)),
                         ids=lambda p: p.name)
def test_sniff_leaves_other_families_alone(path):
    assert torch_oom.sniff(Source.open(path).head()) is None


# -- properties -----------------------------------------------------------------------------------

_SIZE = st.builds(
    lambda v, u: f"{v:.2f} {u}" if u != "bytes" else f"{int(v)} bytes",
    st.floats(0, 200000, allow_nan=False), st.sampled_from(["bytes", "KiB", "MiB", "GiB"]))
_JUNK = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r\n"), max_size=30)
_TEMPLATES = [
    "RuntimeError: CUDA out of memory. Tried to allocate {} (GPU 0; {} total capacity; {} already allocated; "
    "{} free; {} cached)",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {} (GPU 1; {} total capacity; {} already "
    "allocated; {} free; {} allowed; {} reserved in total by PyTorch) If reserved memory is >> allocated memory",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {}. GPU 2 has a total capacity of {} of which {} "
    "is free. Process 77 has {} memory in use. Including non-PyTorch memory, this process has {} memory in use. {} "
    "allowed; Of the allocated memory {} is allocated by PyTorch, with {} allocated in private pools (e.g., CUDA "
    "Graphs), and {} is reserved by PyTorch but unallocated.",
    "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory) Currently "
    "allocated : {} Requested : {} Device limit : {} Free (according to CUDA): {}",
]


@st.composite
def _messages(draw):
    """A real message shape with random sizes, then cut, spliced with junk, or prefixed."""
    template = draw(st.sampled_from(_TEMPLATES))
    text = template.format(*[draw(_SIZE) for _ in range(template.count("{}"))])
    cut = draw(st.integers(0, len(text)))
    if draw(st.booleans()):
        text = text[:cut]
    elif draw(st.booleans()):
        text = text[:cut] + draw(_JUNK) + text[cut:]
    prefix = draw(st.sampled_from(["", "(VllmWorker rank=1 pid=254) ", "2024-01-01 00:00:00,000 | ERROR | ",
                                   "[rank0]: ", "..."]))
    return prefix + text


_PIECES = st.one_of(
    _JUNK,
    st.sampled_from(["torch.OutOfMemoryError: ", "RuntimeError: ", "OutOfMemoryError: ", "CUDA out of memory. ",
                     "Allocation on device ", "CUDA error: out of memory", "(GPU 0; ", " total capacity; ",
                     " already allocated; ", " free; ", " reserved in total by PyTorch)", " cached)",
                     "GPU 3 has a total capacity of ", " of which ", " is free. ", " allowed; ",
                     "Process 12 has ", " memory in use. ", "this process has ", "Of the allocated memory ",
                     " is allocated by PyTorch, and ", " is reserved by PyTorch but unallocated.",
                     "Tried to allocate "]),
    _SIZE,
)
_LINES = st.one_of(_messages(), st.lists(_PIECES, max_size=14).map("".join))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINES, min_size=1, max_size=6))
def test_arbitrary_lines_never_raise(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.log"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        src = Source.open(path)
        torch_oom.sniff(src.head())
        for parsed in (torch_oom.parse(src, Options(tz="UTC")),
                       torch_oom.scan(src.frame(), src, Options(tz="UTC"))):
            for ev in parsed.events.to_dicts():
                d = json.loads(ev["detail"])
                if ev["bytes"] is not None:
                    sizes = {units.parse_size(f"{n} {u}") for n, u in
                             re.findall(r"(\d[\d,]*(?:\.\d+)?)\s*(bytes|[KMGTP]iB|B)\b", d["message"])}
                    assert ev["bytes"] in sizes, ev


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_LINES)
def test_single_line_bytes_come_from_that_line(line):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.log"
        path.write_text(line + "\n", encoding="utf-8")
        src = Source.open(path)
        for ev in torch_oom.scan(src.frame(), src, Options(tz="UTC")).events.to_dicts():
            if ev["bytes"] is not None:
                sizes = {units.parse_size(f"{n} {u}") for n, u in
                         re.findall(r"(\d[\d,]*(?:\.\d+)?)\s*(bytes|[KMGTP]iB|B)\b", ev["text"])}
                assert ev["bytes"] in sizes, ev


_START_PIECES = [" ", "   ", "\t", "\u00a0", ":", "x", "My", ".", "1", "torch.", "cuda.", "OutOfMemoryError",
                 "AcceleratorError", "RuntimeError", "CUDA out of memory", "CUDA error: out of memory",
                 "Allocation on device"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_START_PIECES), max_size=10))
def test_start_finds_what_the_start_regex_finds(pieces):
    """_start is _START.search without its cubic blank runs: the same span, groups and body."""
    line = "".join(pieces)

    def key(m):
        return None if m is None else (m.span(), m.groupdict(), m.span("body"))

    assert key(torch_oom._start(line)) == key(torch_oom._START.search(line))


def test_long_runs_of_blanks_do_not_stall_the_reader(tmp_path):
    """A padded line (progress bars, aligned tables) after an OOM message or in the head: the message
    regex alone took 37 s on 2000 blanks and grew with their cube (found by bench/fuzz.py)."""
    import time

    pad = " " * 200_000
    p = tmp_path / "stderr.log"
    p.write_text("Traceback (most recent call last):\n"
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
                 "capacity of 79.19 GiB of which 3.94 MiB is free.\n"
                 f"memory{pad}x\n{pad}OutOfMemoryError{pad}:{pad}y\n")
    started = time.perf_counter()
    _, parsed = parse_file(p, expect=torch_oom.NAME)
    assert time.perf_counter() - started < 20
    assert parsed.events.height == 1 and parsed.events["bytes"][0] == 20 * 2**20


_COMPLETE_PIECES = [" ", "\t", "\n", ":", ".", ",", "1", "7", "\u0663", "\u00b2", "_", "x", "GiB", "!", ")", "(",
                    "(http://", "(https://", "/", "memory fraction)", "PYTORCH_CUDA_ALLOC_CONF", "...", "cached)",
                    "by PyTorch)", "Allocation on device", "CUDA error: out of memory", "\u00a0"]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_COMPLETE_PIECES), max_size=10))
def test_complete_says_what_the_complete_regex_says(pieces):
    """_complete is _COMPLETE.search without its quadratic number and URL parts."""
    msg = "".join(pieces)
    assert torch_oom._complete(msg) == bool(torch_oom._COMPLETE.search(msg))


def test_long_numbers_and_urls_do_not_stall_the_joining():
    """20 000 digits after "memory fraction):" took the regex 10 s, 20 000 "(http://" 24 s."""
    import time

    started = time.perf_counter()
    assert torch_oom._complete("PyTorch limit (set by user-supplied memory fraction): " + "1" * 1_000_000)
    assert not torch_oom._complete("memory fraction): " + "1" * 1_000_000 + "!")
    assert not torch_oom._complete("(http://" * 200_000)
    assert torch_oom._complete("see (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    assert time.perf_counter() - started < 5


def test_worker_tag_found_as_the_regex_finds_it_in_linear_time():
    """_worker is _WORKER.search (same span and groups) on text made of tag-like pieces, and a word of a
    million characters before a "pid=" costs no more than reading it (the regex re-read the word from
    each of its characters)."""
    import random
    import time

    rng = random.Random(12)
    junk = [" ", "(", ")", "=", "a", "1", "_", ".", "-", "\u00e9", "\t", ",", "x"]

    def tag() -> str:
        pick = rng.choice
        return (pick(["", "("]) + pick(["", "1", "-", "\u00e9"]) + pick(["RayWorker", "a", "_x", "Q.w-1", ""])
                + pick(["", " rank=3", " rank=1234567890", " rank=", "rank=2"]) + pick([" ", "  ", "\t", ""])
                + pick(["pid=", "pid", "pid=="]) + pick(["7", "12345678901", "", "x"])
                + pick(["", ", ip=1.2.3.4", ",ip=", ", ip=(x", ", i"]) + pick([")", "", " )"]))

    def key(m):
        return None if m is None else (m.span(), m.groupdict())

    found = 0
    for _ in range(20000):
        text = "".join("".join(rng.choice(junk) for _ in range(rng.randrange(0, 4))) + tag()
                       for _ in range(rng.randrange(1, 4)))
        want = torch_oom._WORKER.search(text)
        assert key(torch_oom.worker_tag(text)) == key(want), repr(text)
        found += want is not None
    assert found > 100
    started = time.perf_counter()
    assert torch_oom.worker_tag("a" * 1_000_000 + " pid=x)") is None
    assert torch_oom.worker_tag("(" + "a" * 1_000_000 + " pid=5)")["pid"] == "5"
    assert torch_oom.worker_tag("1 pid=2 " * 100_000 + ")") is None
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("name, requested, gpu, total, allowed", [
    ("torch_oom_hip_01.txt", "3.31 GiB", "0", "128.00 GiB", None),
    ("torch_oom_hip_02.txt", "2.00 MiB", "0", "255.98 GiB", "1.05 GiB"),
    ("torch_oom_hip_03.txt", "12.95 GiB", "0", "127.00 GiB", None),
    ("torch_oom_hip_04.txt", "16.00 GiB", "0", "15.24 GiB", None),
])
def test_rocm_hip_out_of_memory(name, requested, gpu, total, allowed):
    ev, _ = one(realworld(name))
    d = ev["detail"]
    size = units.parse_size
    assert (ev["bytes"], ev["gpu"], d["total"]) == (size(requested), gpu, size(total))
    assert d["allowed"] == (allowed and size(allowed))
    assert (d["framework"], d["device_api"], d["exception"]) == ("pytorch", "hip", "torch.OutOfMemoryError")
