"""The literals that the step-log modules declare beside their regexes hold: every line a regex matches
passes the prefilter built for it (reader.PREFILTER for the reader; markers.SCAN_PREFILTER, SCAN_QUICK
and SCAN_BLOCK_LITERALS for the free-text scanner). A regex edited so that it matches a line its
prefilter drops fails here: on the recorded lines, the examples below, and lines made up of the shapes'
fragments in any case."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stepmem_properties import line_strategy

from conftest import REALWORLD
from forensics.parsers import ranks
from forensics.parsers.steplog import families, generic, markers, reader

ROOT = Path(__file__).resolve().parents[2]

EXAMPLES = [
    "2026-10-01 10:00:00,123 INFO train: [step 7] allocated: 512.5 MB, cached: 1024 MB",
    "Iter 8 Time 0.575", "  STEP: 9", "[2026-10-01 10:00:01] step 10", "10/01/2026 10:00:02 - iteration 11",
    "2026-03-29T02:30:00+01:00 global_step 12", "10/01/2026 10:00:02 Step=13",
    "memory (MB) | allocated: 20.4 | max allocated: 21.8 | reserved: 26.0 | max reserved: 26.0",
    "Epoch 1: 10%|#  | 5/1000 [00:10<01:30, GPU: 2798.0/11011.5 MiB]",
    "torch.cuda.memory_allocated(0) 318986240", "nvidia-smi GPU-1 memory (MB) 1494",
    "occupied memory: 2.47 GB / reserved: 16.69 GB", "Free GPU ram: 12800.5", "free_gpu_mem = 5 GB",
    "{'loss': 0.6188, 'epoch': 0.09, 'memory_allocated (GB)': 3.82}",
    "step 1 | loss 0.0560 | MEM_ALLOC 1.25 GB", "Mem_Reserved 1.69 GB",
    "[2023-11-17 11:03:46,600] [INFO] [utils.py:802:see_memory_usage] DeepSpeedZeRoOffload initialize [begin]",
    "MA 26.38 GB         Max_MA 26.38 GB         CA 26.71 GB         Max_CA 27 GB",
    "CPU Virtual Memory:  used = 322.57 GB, percent = 17.1%", "CPU Virtual Memory:  used=3.5 GB", "cached: 2048 MB", "occupied: 2.47 GB",
    "[0] mp: init", "[3] mp: MA 0.00 GB | Max_MA 0.00 GB | CA 0.00 GB | Max_CA 0 GB | NV 1.2 GB",
    "[before the start of training step] datetime: 2025-08-01 09:31:11",
    " [2025-08-01 07:19:37] iteration        1/    5000 | consumed samples: 128 | elapsed time per iteration (ms): 1.8 |",
    "[Rank 0] (after 20 iterations) memory (MB) | allocated: 1570.7 | max allocated: 1.0 | reserved: 4020.0",
    "***** train metrics *****", "  epoch                    =        3.0", "  train_runtime\t=\t0:05:55.12",
    "  train_mem_gpu_alloc_delta  =     -153MB", "x_mem_y=5MB",
    # step markers behind a distributed job's rank prefix (ranks.LINE_PREFIX)
    "[default1]:[rank1]: 2026-10-01 10:00:00,123 step 14", "(WorkerDict pid=4242) Iter: 15",
    "[Rank 0 | Local Rank 0] [2026-10-01 10:00:01] global_step=16",
]


def _recorded_lines() -> list[str]:
    files = [f for d in (REALWORLD, ROOT / "sample_logs", ROOT / "tests" / "corpus") for f in sorted(d.rglob("*"))
             if f.is_file() and f.suffix not in (".gz", ".zst", ".bz2", ".xz")]
    return [ln for f in files for ln in f.read_bytes().decode("utf-8", "replace").splitlines()]


LINES = pl.DataFrame({"text": _recorded_lines() + EXAMPLES}, schema={"text": pl.String})
T = pl.col("text")
MARKER_LINE = generic.strip_line_time(T).str.contains(generic.STEP_MARKER)
READING_PREFILTER = f"(?i:{generic.READING_WORDS})|{generic.READING_LITERALS}"

# (what matches, the prefilter every line it matches must pass)
INCLUSIONS = {
    "reader: family lines": (T.str.contains(families.FAMILY_LINES), T.str.contains(families.FAMILY_LITERALS)),
    "reader: readings": (T.str.contains(generic.ANY_READING), T.str.contains(READING_PREFILTER)),
    "reader: step markers": (MARKER_LINE, T.str.contains(generic.MARKER_PREFILTER)),
    # (what StepLogReader._keep extracts, behind a rank prefix too: only lines that pass MARKER_PREFILTER are tried)
    "reader: step markers behind a prefix": (generic.strip_line_time(ranks.strip_prefix(T)).str.contains(generic.STEP_MARKER),
                                             T.str.contains(generic.MARKER_PREFILTER)),
    "reader: all it keeps": (T.str.contains(families.FAMILY_LINES) | T.str.contains(generic.ANY_READING)
                             | MARKER_LINE, T.str.contains(reader.PREFILTER)),
    "scan: generic hint": (T.str.contains(generic.GENERIC_HINT),
                           T.str.contains(f"(?i:{generic.READING_WORDS}|{generic.STEP_WORDS})|{generic.READING_LITERALS}")),
    "scan: family hint": (T.str.contains(families.FAMILY_HINT), T.str.contains(families.FAMILY_HINT_LITERALS)),
    "scan: prefilter": (T.str.contains(markers.SCAN_HINT), T.str.contains(markers.SCAN_PREFILTER)),
    "scan: quick": (T.str.contains(markers.SCAN_HINT) | T.str.contains(markers.SCAN_PREFILTER),
                    T.str.contains(markers.SCAN_QUICK)),
    # blocks of text that is not ASCII are read whole by the kernel fast path: lowercasing proves nothing there
    "scan: block literals": ((T.str.contains(markers.SCAN_HINT) | T.str.contains(markers.SCAN_PREFILTER))
                             & (T.str.len_bytes() == T.str.len_chars()),
                             T.str.to_lowercase().str.contains_any(list(markers.SCAN_BLOCK_LITERALS))),
}


def _missed(lines: pl.DataFrame, name: str) -> list[str]:
    matched, passed = INCLUSIONS[name]
    return lines.filter(matched & ~passed)["text"].to_list()


@pytest.mark.parametrize("name", sorted(INCLUSIONS))
def test_recorded_and_example_lines_pass_their_prefilter(name):
    assert LINES.filter(INCLUSIONS[name][0]).height > 20, name
    assert not _missed(LINES, name)[:5]


def _flip_case(line: str, mask: int) -> str:
    return "".join(c.swapcase() if mask >> (i % 30) & 1 else c for i, c in enumerate(line))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(EXAMPLES) | line_strategy, st.integers(0, 2**30)), min_size=1, max_size=8))
def test_made_up_lines_pass_their_prefilter(lines):
    """Lines near the shapes (the property tests' fragments) with letters in random cases."""
    frame = pl.DataFrame({"text": [_flip_case(ln, mask) for ln, mask in lines]}, schema={"text": pl.String})
    for name in INCLUSIONS:
        assert not _missed(frame, name), name


# Each declared alternative is needed by some line above (else this file could not tell it was dropped).
DECLARED = [
    ("READING_WORDS", generic.READING_WORDS, generic.ANY_READING, True),
    ("READING_LITERALS", generic.READING_LITERALS, generic.ANY_READING, False),
    ("FAMILY_LITERALS", families.FAMILY_LITERALS, families.FAMILY_LINES, False),
    ("FAMILY_HINT_LITERALS", families.FAMILY_HINT_LITERALS, families.FAMILY_HINT, False),
]


@pytest.mark.parametrize("what, alternation, regex, any_case", DECLARED, ids=[d[0] for d in DECLARED])
def test_every_declared_literal_is_needed_by_some_line(what, alternation, regex, any_case):
    parts = alternation.split("|")
    lines = LINES.filter(T.str.contains(regex))
    for i, part in enumerate(parts):
        rest = "|".join(parts[:i] + parts[i + 1:])
        wrap = (lambda rx: f"(?i:{rx})") if any_case else (lambda rx: rx)
        only = lines.filter(T.str.contains(wrap(part)) & ~T.str.contains(wrap(rest)))
        assert only.height, f"{what}: no line needs {part!r}"
