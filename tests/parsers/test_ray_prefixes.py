"""Ray-prefixed worker logs (verl, OpenRLHF, Ray Train): Ray's `(ActorName pid=N, ip=A) ` and a logger's
`[Rank R | Local Rank L] ` in front of the clock (parsers/ranks.py), the pid and rank they give the readings
(steplog/reader.py), the general reader reading the lines whose figures it reads more of than the generic shapes
(reader._read_wider), and the real pastes of tests/parsers/ray_pastes/ that no parser claims."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from general_summary import matches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_general_reader import _parse_claimed

from forensics.parsers import ranks
from forensics.parsers.steplog.reader import extract_all

HERE = Path(__file__).parent
PASTES = HERE / "ray_pastes"
EXPECTED = json.loads((PASTES / "expected.json").read_text())
# (easyr1_worker_offload_gb_9.txt, whose `{phase} in sharding manager: U GB / T GB.` holds no memory word, is read
# since h39: a size over a size is a line the general reader looks at, general.candidates)
MISSED: dict[str, str] = {}


@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=MISSED[k])) if k in MISSED
                                  else k for k in sorted(EXPECTED) if not k.startswith("_")])
def test_unclaimed_ray_pastes(name):
    assert matches(_parse_claimed(PASTES / name), EXPECTED[name]) == []


@pytest.mark.parametrize("line, body, rank, local, pid", [
    ("(WorkerDict pid=393228, ip=172.16.0.197) [Rank 0 | Local Rank 0] 2025-12-04 09:23:53,901 INFO x",
     "2025-12-04 09:23:53,901 INFO x", 0, 0, 393228),
    ("(pid=1234) step:3 - perf/max_memory_allocated_gb:1.5", "step:3 - perf/max_memory_allocated_gb:1.5", None, None, 1234),
    ("(RayTrainWorker pid=77, ip=10.0.0.2) allocated: 1 GB [repeated 3x across cluster]", "allocated: 1 GB", None, None, 77),
    ("\x1b[36m(main_task pid=2345)\x1b[0m step:0 - a", "step:0 - a", None, None, 2345),
    ("[36m(MyActor(rank=1) pid=9, ip=::1)[0m y", "y", None, None, 9),   # (a paste that lost the escape character)
    ("(VllmWorkerProcess pid=521) INFO 04-12 08:21:19 z", "INFO 04-12 08:21:19 z", None, None, 521),
    ("[Rank 3 | Local rank 1] 2025-01-01 00:00:00 w", "2025-01-01 00:00:00 w", 3, 1, None),
    ("[default1]:[rank1]: x", "x", 1, 1, None),
    # a pid in the text is no prefix; nor a bracket that is no rank block
    ("ray::WorkerDict.update() (pid=118847, ip=10.1.1.7)", "ray::WorkerDict.update() (pid=118847, ip=10.1.1.7)",
     None, None, None),
    ("[Rank 0] (after 2 iterations) memory (MB) | allocated: 1.5", "[Rank 0] (after 2 iterations) memory (MB) | allocated: 1.5",
     None, None, None),
])
def test_prefix_split(line, body, rank, local, pid):
    out = ranks.split_prefix(pl.DataFrame({"line": [1], "text": [line]}))
    assert out.row(0, named=True) == {"line": 1, "text": body, "line_rank": rank, "line_local_rank": local, "line_pid": pid}


def test_rank_block_is_the_lines_rank():
    assert ranks.of_line("(WorkerDict pid=5) [Rank 2 | Local Rank 0] 2025-12-04 09:23:53,901 INFO y") == \
        {"rank": 2, "local_rank": 0}


def test_a_rank_tag_before_the_clock():
    # `[RANK 3] <clock>`: the tag stays in the text (a rank word, as Megatron's `[Rank N]`) and the clock behind it is read
    s = _read([f"[RANK 3] 2025-01-01 10:00:0{i},000 INFO step={i} gpu_mem_alloc=1.{i}GB" for i in (1, 2)])
    assert s["time"].null_count() == 0 and set(s["label"].to_list()) == {"rank 3"} and s["step"].to_list() == [1, 2]


def _verl(pid: int, rank: int, sec: int, phase: str, alloc: float, used: float) -> str:
    # the shape of verl's log_gpu_memory_usage behind Ray's prefix (tests/heldout/general-reader-6/verl_megatron_gpu_memory_3992.txt)
    return (f"(WorkerDict pid={pid}, ip=10.0.0.1) [Rank {rank} | Local Rank {rank}] 2025-12-04 09:23:{sec:02d},901 INFO "
            f"[/verl/workers/fsdp_workers.py:103] => {phase}, memory allocated (GB): {alloc:.2f}, memory reserved (GB): "
            f"50.00, device memory used/total (GB): {used:.2f}/80.00, cpu_memory: {{'total': '1511.10 GB', 'used': '620.85 GB'}}")


def _read(lines: list[str]):
    return extract_all(pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines},
                                    schema={"line": pl.Int64, "text": pl.String}), "UTC").samples


def test_workers_are_series_of_their_own_with_clock_pid_rank_and_phase():
    s = _read([_verl(11, 0, 1, "After rollout", 40, 10), _verl(12, 1, 2, "After rollout", 41, 11),
               _verl(11, 0, 3, "Before update_actor", 42, 12), _verl(12, 1, 4, "Before update_actor", 43, 13)])
    got = {(r["pid"], r["label"], r["series"]) for r in s.iter_rows(named=True)}
    assert (11, "rank 0 after rollout", "allocated") in got and (12, "rank 1 before update actor", "memory.used") in got
    assert s["time"].null_count() == 0 and s["series"].n_unique() == 3   # allocated, reserved, memory.used: no host size
    used = s.filter(pl.col("series") == "memory.used").sort("line")
    assert used["bytes"].to_list() == [round(x * 2 ** 30) for x in (10, 11, 12, 13)]
    assert used["total_bytes"].unique().to_list() == [80 * 2 ** 30]


def test_a_line_goes_to_the_reader_that_reads_more_of_it():
    # the generic shapes read both keys of the first form: it stays theirs (its tag is the label); the second has a
    # figure only the general reader reads, which then reads the whole line (its phase is the label)
    s = _read(["[step 1] allocated: 1 MB, cached: 2 MB", "[step 2] allocated: 1 MB, cached: 3 MB",
               "after forward allocated: 1 MB, cached: 2 MB, used: 5 MB", "after forward allocated: 1 MB, cached: 2 MB, used: 6 MB"])
    by_line = {ln: sorted(g["series"].to_list()) for (ln,), g in s.group_by("line")}
    assert by_line[1] == ["allocated", "reserved"] and by_line[3] == ["allocated", "memory.used", "reserved"]
    assert set(s.filter(pl.col("line") >= 3)["label"].to_list()) == {"after forward"}
    assert s.filter(pl.col("line") == 1)["step"].to_list() == [1, 1]


_NAMES = st.sampled_from(["WorkerDict", "TaskRunner", "RayTrainWorker", "ActorModelRayActor", "MyActor(rank=0)", ""])
_BODIES = st.sampled_from([
    "2026-10-01 10:00:05,000 INFO step={i} gpu_mem_alloc={m}.5GB",
    "[step {i}] allocated: {m} MB, cached: 9 MB",
    "step:{i} - perf/max_memory_allocated_gb:{m}.1 - perf/max_memory_reserved_gb:70.5",
    "2026-10-01 10:00:05,000 INFO => After rollout, memory allocated (GB): {m}.1, device memory used/total (GB): 2.0/80.0",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_NAMES, st.integers(1, 4_000_000), st.booleans(), st.integers(0, 7), st.booleans(),
                          st.booleans()), min_size=2, max_size=8), _BODIES)
def test_prefixed_lines_read_as_their_body(workers, body):
    """A worker's line reads as the same line without Ray's prefix, rank block and deduplication mark: the same
    series, bytes, steps and times, with the prefix's pid and the block's rank (properties of ranks.split_prefix
    and reader.Parts)."""
    plain, prefixed = [], []
    for i, (name, pid, ip, rank, block, repeated) in enumerate(workers, 1):
        text = body.format(i=i, m=i + 10)
        plain.append(text)
        head = f"({name + ' ' if name else ''}pid={pid}{', ip=10.0.0.1' if ip else ''}) "
        prefixed.append(head + (f"[Rank {rank} | Local Rank {rank}] " if block else "")
                        + text + (" [repeated 2x across cluster]" if repeated else ""))
    a, b = _read(plain), _read(prefixed)
    cols = ["line", "series", "bytes", "total_bytes", "step", "time"]
    assert a.select(cols).equals(b.select(cols))
    pids = {ln: pid for ln, (_, pid, *_) in enumerate(workers, 1)}
    assert b["pid"].to_list() == [pids[ln] for ln in b["line"].to_list()]
    blocks = {ln: w[3] for ln, w in enumerate(workers, 1) if w[4]}
    for ln, label in zip(b["line"].to_list(), b["label"].to_list()):
        assert (ln in blocks) == (label is not None and label.startswith(f"rank {blocks.get(ln)}"))
