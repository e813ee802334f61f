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
HELDOUT5_FAILED: dict[str, str] = {
    "pith_train_peak_gpu_memory_7.txt": "read, values and steps right, but named max_memory.used: `peak-gpu-memory` names neither allocated nor reserved (PithTrain's source: max_memory_allocated)",
    "prime_rl_sft_peak_mem_999.txt": "read, values and steps right, but named max_memory.used: `Peak Mem.` names neither allocated nor reserved (prime-rl's source: max_memory_allocated)",
    "llm_foundry_composer_memory_monitor_244.txt": "not read: Composer's console logger prints `memory/reserved_mem: 8.5794` bare (GB of 1e9 bytes in its source), not among the documented prints",
}


@pytest.mark.parametrize("name", sorted(k for k in HELDOUT5 if not k.startswith("_")))
def test_heldout5_style(name):
    if name in HELDOUT5_FAILED:
        pytest.xfail(HELDOUT5_FAILED[name])
    assert matches(_parse_claimed(HELDOUT5_DIR / name), HELDOUT5[name]) == []
