"""The general reader's mends made on held-out set 7 after its one run (tests/heldout/general-reader-7/,
a tune set since; each line below is copied from one of its files, whose line 1 gives the thread): a unit
letter in brackets after a key, an amount asked for (`to free`), a host allocator's sizes, finetrainers'
documented GiB, and the phase of a dict opened on the line above its keys (docs/formats.md §4.4.1)."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.model import Skipped
from forensics.parsers.steplog import general
from forensics.parsers.steplog.reader import extract_all

SET7 = Path(__file__).parent.parent / "heldout" / "general-reader-7"


def _lines(name: str) -> list[str]:
    """A set-7 file's lines after its provenance line."""
    return (SET7 / name).read_text().splitlines()[1:]


def _read(lines: list[str]):
    df = pl.DataFrame({"line": list(range(1, len(lines) + 1)), "text": lines},
                      schema={"line": pl.Int64, "text": pl.String})
    return general.read(df, "UTC", Skipped())


def test_a_unit_letter_in_brackets_after_the_key_is_its_unit():
    vissl = _lines("vissl_semicolon_peak_mem_480.txt")[0]
    (r,) = general.plan_line(vissl).readings
    assert (r.series, r.factor) == ("max_allocated", 1 << 20)
    res = _read(_lines("vissl_stdout_json_peak_mem_554.txt"))
    assert res.samples["bytes"].to_list() == [8184 << 20] * 3
    assert res.samples["step"].to_list() == [0, 1, 5]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(letter=st.sampled_from("KMGT"), values=st.lists(st.integers(0, 99999), min_size=2, max_size=5),
       sep=st.sampled_from([": ", "="]))
def test_any_bracketed_unit_letter_round_trips_to_bytes(letter, values, sep):
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[letter]
    res = _read([f"iter: {i}; loss: 2.9; peak_mem({letter}){sep}{v};" for i, v in enumerate(values)])
    assert res.samples["bytes"].to_list() == [v * factor for v in values]


def test_an_amount_asked_for_is_no_reading():
    lines = _lines("forge_unload_free_memory_1598.txt")
    asked = general.plan_line(lines[9])   # `Trying to free 5797.46 MB for cuda:0 … Current free memory is 3235.60 MB`
    assert [(r.series, r.key) for r in asked.readings] == [("free", "Current free memory")] * 2
    assert general.plan_line(lines[0]).form() == asked.form()
    assert not general.plan_line("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB.").readings


def test_a_host_allocator_or_the_cpu_before_the_key_is_no_gpu_reading():
    tcmalloc = _lines("sockeye_checkpoint_gpu_line_tcmalloc_528.txt")[6]
    assert tcmalloc.startswith("tcmalloc: large alloc")
    assert not general.plan_line(tcmalloc).readings
    assert not general.plan_line("CPU: used 3.5 GB").readings
    assert [r.series for r in general.plan_line("GPU: used 3.5 GB").readings] == ["memory.used"]
    # a phase before the colon is no host (`generation` holds `ratio`, a word of _NOT_SIZE)
    assert general.plan_line("[MEM] after rollout generation: current=6.19GB").readings


def test_finetrainers_bare_decimals_are_gib_and_a_whole_number_stays_bytes():
    (r,) = general.plan_line('    "memory_allocated": 15.934,').readings
    assert (r.series, r.factor) == ("allocated", 1 << 30)
    (b,) = general.plan_line('    "memory_allocated": 17109002224,').readings
    assert (b.series, b.factor) == ("allocated", 1)


def test_a_dict_opened_above_gives_its_phase_to_its_indented_keys():
    res = _read(_lines("finetrainers_memory_dict_phases_184.txt"))
    got = res.samples.select("series", "label", "bytes").rows()
    assert ("allocated", "before training start", round(15.934 * 2**30)) in got
    assert ("max_allocated", "after epoch", round(18.45 * 2**30)) in got
    assert len(got) == 8


def test_an_unindented_line_ends_the_dicts_phase():
    lines = ["Memory after epoch 1: {", '    "memory_allocated": 17.177,', "}",
             "step 1 memory_allocated (GB): 3.5", "step 2 memory_allocated (GB): 3.6",
             "Memory after epoch 2: {", '    "memory_allocated": 17.2,', "}"]
    got = _read(lines).samples.select("line", "label").rows()
    assert got == [(2, "after epoch"), (4, None), (5, None), (7, "after epoch")]


def test_a_key_after_its_size_names_it():
    # tests/heldout/general-reader-6/xgboost_gpu_allocated_remaining_3031.txt (dmlc/xgboost#3031)
    xgb = general.plan_line("[17:41:55] Allocated 0MB on [0] GeForce GTX 1080, 4572MB remaining.")
    assert [(r.series, r.key, r.factor) for r in xgb.readings] == [("free", "remaining", 1 << 20)]
    # tests/heldout/general-reader-2/tinygrad_llama_13803.txt (tinygrad/tinygrad#13803)
    (used,) = general.plan_line("    1 93.44 s run, 11.8750 loss, 0.000000000001 LR, 642.43 GB used,  19644.30 GFLOPS").readings
    assert (used.series, used.factor) == ("memory.used", 1 << 30)
    # a word after a size that is the key of the next number is that number's
    mmcv = general.plan_line("| mem allocated 1200 MiB reserved 2048 MiB")
    assert [r.series for r in mmcv.readings] == ["allocated", "reserved"]


def test_a_size_over_a_size_on_a_line_naming_a_phase_is_use_of_capacity():
    # tests/parsers/ray_pastes/easyr1_worker_offload_gb_9.txt (mcpdev0910/EasyR1#9), without its Ray prefix
    res = _read(["Before vllm offload in sharding manager: 58.32 GB / 79.19 GB.",
                 "After vllm offload in sharding manager: 13.54 GB / 79.19 GB."])
    assert res.samples.select("series", "label", "bytes", "total_bytes").rows() == [
        ("memory.used", "before vllm offload", round(58.32 * 2**30), round(79.19 * 2**30)),
        ("memory.used", "after vllm offload", round(13.54 * 2**30), round(79.19 * 2**30))]
    # without a phase, a keyless pair of sizes says nothing of whose they are
    assert not general.plan_line("model.safetensors: 1.2 GB / 4.5 GB").readings


@pytest.mark.parametrize("used, total, read", [
    ((58.32, 13.54, 60.1), (79.19, 79.19, 79.19), True),
    ((58.32, 13.54, 60.1), (79.19, 79.19, 80.0), False),    # the second size changes: no one device's capacity
    ((58.32, 93.54, 60.1), (79.19, 79.19, 79.19), False),   # above its capacity: no use of it
])
def test_a_keyless_size_over_a_size_is_use_of_capacity_only_where_the_forms_capacity_holds(used, total, read):
    lines = [f"{p} vllm offload in sharding manager: {u:.2f} GB / {t:.2f} GB."
             for p, u, t in zip(("Before", "After", "Before"), used, total)]
    res = _read(lines)
    assert res.samples.height == (3 if read else 0)
    assert any("mem_get_info" in n for n in res.notes) == read


def test_a_size_over_a_size_without_a_memory_word_reaches_the_general_reader():
    # tests/parsers/ray_pastes/easyr1_worker_offload_gb_9.txt, with its Ray prefix, through the step-log reader
    lines = ["(WorkerDict pid=118271) Before vllm offload in sharding manager: 58.32 GB / 79.19 GB.",
             "(Runner pid=104449) current_batch_size=128 >= rollout_batch_size=128. Finish generating.",
             "(WorkerDict pid=118271) After vllm offload in sharding manager: 13.54 GB / 79.19 GB."]
    s = extract_all(pl.DataFrame({"line": [1, 2, 3], "text": lines}), "UTC").samples
    assert s.select("line", "series", "pid", "total_bytes").rows() == [
        (1, "memory.used", 118271, round(79.19 * 2**30)), (3, "memory.used", 118271, round(79.19 * 2**30))]


def test_a_bare_number_opening_each_line_of_a_form_that_counts_by_one_is_its_step():
    # tests/heldout/general-reader-2/tinygrad_llama_13803.txt (tinygrad/tinygrad#13803): `    1 93.44 s run, …`
    lines = (Path(__file__).parent.parent / "heldout" / "general-reader-2" / "tinygrad_llama_13803.txt").read_text()
    res = _read(lines.splitlines()[1:])
    assert res.samples["step"].to_list() == list(range(1, 11))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leads=st.lists(st.integers(0, 2000), min_size=2, max_size=8), pad=st.booleans())
def test_a_leading_number_is_a_step_only_where_the_forms_lines_count_by_one(leads, pad):
    """The leading numbers of a form's lines are its step where each is one above the line before, across the
    file; a count, an index that starts over or a number that jumps (however the lines are padded) is none."""
    lines = [f"{n:5d}" if pad else f"{n}" for n in leads]
    res = _read([f"{n} {4 + k * 0.01:.2f} s run, 11.8750 loss, {600 + k}.43 GB used" for k, n in enumerate(lines)])
    counts = all(b - a == 1 for a, b in zip(leads, leads[1:]))
    assert res.samples["step"].to_list() == (leads if counts else [None] * len(leads))


def test_a_leading_number_that_starts_over_is_no_step():
    # a per-GPU print (`0 …`, `1 …` each round) counts by one within a round, not across the file
    res = _read([f"{g} memory used: {10 + r}.5 GB" for r in range(3) for g in range(2)])
    assert res.samples["step"].null_count() == 6


@pytest.mark.parametrize("line, series", [
    # XGBoost's bulk_allocator (dmlc/xgboost#3031): `Allocated` is the size of the one cudaMalloc it made
    ("[17:41:55] Allocated 0MB on [0] GeForce GTX 1080, 4572MB remaining.", ["free"]),
    ("preallocated 6144 MB for weights and cache", []),
    ("allocated 512 MiB to the KV cache", []),
    # the memory a pool holds, not one act of allocating
    ("allocated: 512 MiB on cuda:0", ["allocated"]),
    ("mem allocated 1200 MiB reserved 2048 MiB", ["allocated", "reserved"]),
    ("Memory allocated 3.5 GB, reserved 4 GB", ["allocated", "reserved"]),
])
def test_the_size_after_the_verb_allocated_and_put_somewhere_is_one_allocation(line, series):
    assert [r.series for r in general.plan_line(line).readings] == series
