"""The prefilters the scanners and the kernel reader declare beside their regexes hold every line those
regexes match: a regex edited without its prefilter fails here, instead of losing lines."""
from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics import parsers
from forensics.parsers.kernel import reader as kernel_reader
from forensics.parsers.scanners import Scanners

ROOT = Path(__file__).resolve().parents[2]

# lines of each scanner's kind in shapes the samples may lack
EXTRA_LINES = [
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "RuntimeError: CUDA error: out of memory",
    "Allocation on device 0 would exceed allowed memory. (out of memory)",
    "[STEP 120] ALLOCATED: 2048.5 MB, Cached: 4096 MB",
    "Iteration 7 | Reserved=3.2 GB",
    "|  Allocated memory      |   1024 MB  |   2048 MB  |",
    "| PyTorch CUDA memory summary, device ID 0                                  |",
    "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |",
    "========= Leaked 1024 bytes at 0x7f00 on the device",
    "GPU: 2798.0/11011.5 MiB",
    "torch.cuda.memory_allocated(0) 318986240",
    "Free GPU ram: 12800.5",
    "mem_alloc 3.2 GB | mem_reserved 4.0 GB",
    "python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
    "Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1kB, anon-rss:1kB, file-rss:0kB",
    "Task in /slurm/uid_1000/job_42 killed as a result of limit of /slurm/uid_1000/job_42",
    "oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    "NVRM: Xid (PCI:0000:48:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "NVRM: GPU 0000:48:00.0: GPU has fallen off the bus.",
]


def _sample_lines() -> list[str]:
    files = [f for d in ("sample_logs", "tests/samples", "tests/corpus") for f in sorted((ROOT / d).rglob("*"))
             if f.is_file() and f.suffix not in (".json", ".gz", ".zst", ".xz", ".bz2")]
    out = []
    for f in files:
        out += f.read_bytes().decode("utf-8", "replace").splitlines()
    return out + EXTRA_LINES


LINES = pl.DataFrame({"text": _sample_lines()}, schema={"text": pl.String}).unique()
# block literals are tested on ASCII text only (a block that is not ASCII is always decoded)
ASCII = LINES.filter(pl.col("text").str.len_bytes() == pl.col("text").str.len_chars())


def _held(m) -> pl.Expr:
    """A line passes m's declared prefilter (a `|`-led row counts for scan.pipe_rows)."""
    t = pl.col("text")
    pipe = t.str.strip_chars_start().str.starts_with("|") if m.scan.pipe_rows else pl.lit(False)
    return t.str.contains(m.scan.prefilter) | pipe


@pytest.mark.parametrize("m", parsers.SCANNERS, ids=lambda m: m.name)
def test_every_hinted_line_passes_the_declared_prefilters(m):
    t = pl.col("text")
    hinted = LINES.filter(t.str.contains(m.scan.hint))
    assert hinted.height >= 3, f"{m.name}: too few sample lines to check its prefilter"
    missed = hinted.filter(~_held(m))
    assert missed.height == 0, f"{m.name}: scan.prefilter misses {missed['text'].to_list()[:5]}"
    quick = m.scan.quick
    if quick is not None:
        missed = hinted.filter(_held(m) & ~t.str.contains(quick)
                               & ~(t.str.strip_chars_start().str.starts_with("|") & m.scan.pipe_rows))
        assert missed.height == 0, f"{m.name}: scan.quick misses {missed['text'].to_list()[:5]}"
    # the block literals must hold every line the prefilter passes (blocks are tested before lines)
    passed = ASCII.filter(_held(m))
    low = t.str.to_lowercase()
    held = pl.any_horizontal([low.str.contains(x, literal=True) for x in m.scan.block_literals])
    if m.scan.pipe_rows:
        held = held | t.str.contains("|", literal=True)
    missed = passed.filter(~held)
    assert missed.height == 0, f"{m.name}: scan.block_literals miss {missed['text'].to_list()[:5]}"
    assert all(x == x.lower() and "\n" not in x for x in m.scan.block_literals)


def test_kernel_keep_hint_lines_hold_its_block_literals():
    t = pl.col("text")
    hinted = ASCII.filter(t.str.contains(kernel_reader.KEEP_HINT))
    assert hinted.height > 100
    low = t.str.to_lowercase()
    held = pl.any_horizontal([low.str.contains(x, literal=True) for x in kernel_reader.KEEP_BLOCK_LITERALS])
    missed = hinted.filter(~held)
    assert missed.height == 0, missed["text"].to_list()[:5]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EXTRA_LINES), st.text(alphabet=st.characters(codec="ascii"), max_size=20),
       st.text(alphabet=st.characters(codec="ascii"), max_size=20))
def test_a_hinted_line_inside_any_text_still_passes(line, before, after):
    """What the hint finds inside a longer line (a prefix, trailing text), the prefilters find too."""
    text = before + line + after
    for m in parsers.SCANNERS:
        if re.search(m.scan.hint, text) and not (m.scan.pipe_rows and text.lstrip().startswith("|")):
            assert re.search(m.scan.prefilter, text), (m.name, text)
            assert any(x in text.lower() for x in m.scan.block_literals), (m.name, text)


_HINT_WORDS = ["allocated", "reserved", "cached", "occupied", "gpu:", "gpu =", "free gpu", "free_gpu", "iter",
               "iteration", "step", "torch.cuda.", "nvidia-smi", "Max_MA", "*****", "_mem_", "oom-kill:constraint=",
               "Kill", "NVRM: ", "=========", "CUDA out of memory", "Allocation on device "]


@given(st.lists(st.tuples(st.sampled_from(_HINT_WORDS), st.integers(0, 2**20)), min_size=1, max_size=4),
       st.text(alphabet="ab .:=[]|0123456789_\tKſ", max_size=12))
@settings(max_examples=300, deadline=None)
def test_quick_pass_holds_the_hints_in_any_case(words, filler):
    """A line made of hint words, each in a random mix of cases, with random text between them: what a
    scanner's hint or prefilter matches, its quick pass lets through."""
    parts = ["".join(c.upper() if mask >> (i % 20) & 1 else c for i, c in enumerate(word)) for word, mask in words]
    line = filler.join(parts) + f" {len(parts)} MiB"
    frame = pl.DataFrame({"text": [line]})
    t = pl.col("text")
    for m in parsers.SCANNERS:
        wanted = frame.select(t.str.contains(m.scan.hint) | t.str.contains(m.scan.prefilter)).item()
        quick = m.scan.quick or m.scan.prefilter
        if wanted and not (m.scan.pipe_rows and line.lstrip().startswith("|")):
            assert frame.select(t.str.contains(quick)).item(), (m.name, line)


def _hits(sc: Scanners) -> dict[str, list[int]]:
    return {m.name: pl.concat(sc.hits[m.name])["line"].to_list() if sc.hits[m.name] else [] for m in sc.mods}


def test_scanners_keep_what_each_hint_keeps_on_every_sample_line():
    """Through the prefilters, each scanner gets exactly the lines its own hint matches over all lines."""
    frame = LINES.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
    sc = Scanners(set())
    sc.feed(frame)
    got = _hits(sc)
    for m in sc.mods:
        assert got[m.name] == frame.filter(pl.col("text").str.contains(m.scan.hint))["line"].to_list(), m.name
    assert sum(len(v) for v in got.values()) > 100


def test_quick_pass_gives_the_same_hits_when_it_turns_itself_off():
    """Batches where most lines hold the quick pass's letters (it then stops), then CSV rows with a
    few hinted lines among them: the scanners keep exactly what their hints match over all lines."""
    rows = [f"2026/10/01 00:00:{i % 60:02d}.000, {i % 8}, NVIDIA H100 80GB HBM3, 81559 MiB, 30000 MiB" for i in range(400)]
    rows[50] = "[step 12] allocated: 1024.5 MB, cached: 2048 MB"
    rows[120] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
    rows[300] = "|  Allocated memory      |   1024 MB  |   2048 MB  |"
    chatty = [f"gpuhost kernel: [{i}.0] eth0: link is up, iteration {i}" for i in range(300)]
    for order in ([rows[:200], rows[200:]], [chatty, rows[:200], rows[200:]], [rows[:200], chatty, rows[200:]]):
        sc = Scanners(set())
        line = 0
        for part in order:
            sc.feed(pl.DataFrame({"line": range(line + 1, line + 1 + len(part)), "text": part}))
            line += len(part)
        every = [x for part in order for x in part]
        frame = pl.DataFrame({"line": range(1, len(every) + 1), "text": every})
        got = _hits(sc)
        for m in sc.mods:
            assert got[m.name] == frame.filter(pl.col("text").str.contains(m.scan.hint))["line"].to_list(), m.name
    assert sc.quick == sc.prefilter   # the chatty batch turned it off
