"""Held-out set 5 of the general reader (tests/heldout/general-reader-5/): 8 real pastes whose expected
series were written, from each framework's source, before the reader was run on them; run once after
the fifth session's merges, result in docs/benchmarks.md."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from general_summary import matches
from test_general_reader import _parse_claimed

HELDOUT5_DIR = Path(__file__).parent.parent / "heldout" / "general-reader-5"
HELDOUT5 = json.loads((HELDOUT5_DIR / "expected.json").read_text())
# Held-out set 5, run once at e1cafc8 (docs/benchmarks.md): 5 of 8 right; what the reader got wrong, as run.
HELDOUT5_FAILED: dict[str, str] = {}
# Mended since (a tune set from that run on): PithTrain's `peak-gpu-memory` and prime-rl's `Peak Mem.` (a peak
# whose key names no pool is an allocator's high-water mark, max_allocated), Composer's bare
# `memory/reserved_mem` (documented: bytes / 1e9; its expectation corrected from GiB, see expected.json)


@pytest.mark.parametrize("name", sorted(k for k in HELDOUT5 if not k.startswith("_")))
def test_heldout5_style(name):
    if name in HELDOUT5_FAILED:
        pytest.xfail(HELDOUT5_FAILED[name])
    assert matches(_parse_claimed(HELDOUT5_DIR / name), HELDOUT5[name]) == []
