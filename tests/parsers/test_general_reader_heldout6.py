"""Held-out set 6 of the general reader (tests/heldout/general-reader-6/): real pastes whose expected
series were written, from each framework's source, before the reader was run on them; run once after
the sixth session's merges, result in docs/benchmarks.md."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from general_summary import matches
from test_general_reader import _parse_claimed

HELDOUT6_DIR = Path(__file__).parent.parent / "heldout" / "general-reader-6"
HELDOUT6 = json.loads((HELDOUT6_DIR / "expected.json").read_text())
# Held-out set 6, to be run once: what the reader got wrong, as run (filled in after the run).
# Held-out set 6, run once at 617d08d (expectations of 07e1669; docs/benchmarks.md): 5 of 8 right. Missed as run:
# rocm-smi's bare bytes (`"GPU memory use": "17453056"`) not read; verl's lines read by the generic shapes (no phase,
# no clock, its `used/total (GB)` pair and its host `cpu_memory` dict misread); xgboost's `4572MB remaining` not read
# and `Allocated 0MB on [0]` read as allocated. Mended since (a tune set from then on): rocm-smi documented. Left:
# Mended since (v39): verl's Ray-prefixed lines (the prefix and `[Rank 0 | Local Rank 0]` skipped before the clock,
# the general reader reading the lines whose figures it reads more of than the generic shapes do).
# (xgboost_gpu_allocated_remaining_3031.txt: its `4572MB remaining`, a key after its value, is read as free since g39,
# and its `Allocated 0MB on [0]`, one allocation's size, is no reading since h39: test_general_reader_tune7.py)
HELDOUT6_FAILED: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(k for k in HELDOUT6 if not k.startswith("_")))
def test_heldout6_style(name):
    if name in HELDOUT6_FAILED:
        pytest.xfail(HELDOUT6_FAILED[name])
    assert matches(_parse_claimed(HELDOUT6_DIR / name), HELDOUT6[name]) == []
