"""Held-out set 8 of the general reader (tests/heldout/general-reader-8/): real pastes whose expected
series were written, from each paste and its framework's source, before the reader was run on them;
to be run once (eleventh session), the result recorded in docs/benchmarks.md."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from general_summary import matches
from test_general_reader import _parse_claimed

HELDOUT8_DIR = Path(__file__).parent.parent / "heldout" / "general-reader-8"
HELDOUT8 = json.loads((HELDOUT8_DIR / "expected.json").read_text())
# Held-out set 8: expectations committed alone, before any run of the reader on these files. The set is run once;
# what it misses then is recorded here with the reason and in docs/benchmarks.md, not tuned away in the same session.
# Run once at 33de1d5 (expectations of 38e73c7; docs/benchmarks.md): 4 of 13 right, the four that must give no series.
HELDOUT8_FAILED: dict[str, str] = {
    "invokeai_graph_stats_vram_used_4287.txt": "no reader claims it: a table whose `VRAM Used` column (`0.244G`) "
    "sits under a header behind InvokeAI's `[stamp]::[InvokeAI]::INFO --> ` prefix",
    "itex_xpu_smi_dump_memory_used_64.txt": "no reader claims it: xpu-smi dump's CSV (`GPU Memory Used (MiB)` "
    "column, a year-less `12:39:00.000` clock) is no format the tool knows",
    "scepter_nvidia_smi_iter_log_48.txt": "no reader claims it: `nvidia-smi: 9885.4000(9885.4000)` is a bare "
    "number whose MiB only scepter's source gives",
    "tensorrt_llm_context_memory_ranks_2683.txt": "no reader claims it: `now: CPU 0, GPU 46523 (MiB)` puts its "
    "unit after the pair",
    "tensorrt_trtexec_memusagechange_2217.txt": "no reader claims it: `now: CPU 269, GPU 1793 (MiB)` as above",
    "torch_xpu_ops_xpu_smi_memory_used_ranks_1745.txt": "no reader claims it: xpu-smi's memory line in a "
    "rank-prefixed log",
    "unsloth_gpu_stats_memory_reserved_6.txt": "`7.783 GB of memory reserved.` (a key after its size, past "
    "`of memory`) unread; `Max memory = 79.189 GB` (the card's total) read as max_allocated",
    "xpumanager_query_gpu_csv_147.txt": "no reader claims it: xpumanager's query CSV is no format the tool knows",
    "yolov7_gpu_mem_epoch_rows_849.txt": "read right but its steps: the epochs counted from 1 (9440..9735), the "
    "expectation from 0 (9735..10030)",
}


@pytest.mark.parametrize("name", sorted(k for k in HELDOUT8 if not k.startswith("_")))
def test_heldout8_style(name):
    if name in HELDOUT8_FAILED:
        pytest.xfail(HELDOUT8_FAILED[name])
    assert matches(_parse_claimed(HELDOUT8_DIR / name), HELDOUT8[name]) == []
