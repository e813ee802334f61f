"""A distributed job's incident: the rank that leaks, the failure that came first, and the other ranks'
errors marked as its consequences (docs/detection.md §4.1). On the real two-rank recordings and on
synthetic logs made of real NCCL and torchrun lines (their sources in tests/samples/torch-distributed/)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLE_LOGS

from forensics import pipeline, report
from forensics.options import Options

_RUNS: dict = {}


def run(folder: Path | str, **opts):
    key = (str(folder), tuple(sorted(opts.items())))
    if key not in _RUNS:
        _RUNS[key] = pipeline.run([str(folder)], Options(tz=opts.pop("tz", "Etc/UTC"), **opts))
    return _RUNS[key]


def of_kind(analysis, kind):
    return [f for f in analysis.findings if f.kind == kind]


# -- the recording: rank 1 leaks until its CUDA OOM, rank 0 then fails in gloo ----------------------------

REC = SAMPLE_LOGS / "ddp_gloo_rank1_leak"


def test_the_leaking_rank_its_gpu_pid_and_onset():
    _, a = run(REC)
    (leak,) = of_kind(a, "leak")
    assert (leak.rank, leak.gpu, leak.pid) == (1, "0", 1571)
    assert leak.detail["start_step"] == 11 and leak.series == "allocated"
    assert "rank 1" in leak.summary
    # rank 0's counts are flat: no finding names it as growing
    assert not [f for f in a.findings if f.kind == "leak" and f.rank == 0]


def test_the_failure_order_and_its_consequences():
    _, a = run(REC)
    (chain,) = of_kind(a, "distributed_failure")
    assert chain.rank == 1 and chain.severity == "critical"
    first = chain.detail["first_failure"]
    assert (first["kind"], first["rank"], Path(first["path"]).name, first["line"]) == ("gpu_oom", 1, "stderr.log", 20)
    seq = [(s["kind"], s["rank"], s["line"]) for s in chain.detail["sequence"]]
    # the OOM, then rank 0's gloo error, then torchrun's SIGTERM to rank 0 and rank 0's exit by it
    assert seq == [("gpu_oom", 1, 20), ("collective_error", 0, 36), ("rank_signal", 0, 37), ("rank_exit", 0, 63)]
    assert chain.detail["torchrun_root_cause_rank"] == 1 and "agrees" in chain.summary
    # every claim quoted: the OOM, each consequence, torchrun's record and the line that says rank 1 is pid 1571
    quoted = {(Path(e.path).name, e.line) for e in chain.evidence}
    assert {("stderr.log", 20), ("stderr.log", 36), ("stderr.log", 37), ("stderr.log", 72), ("train.log", 2)} <= quoted
    (err,) = of_kind(a, "collective_error")
    assert (err.rank, err.pid, err.severity) == (0, 1570, "info")
    assert err.consequence_of == {"kind": "gpu_oom", "rank": 1, "path": str(REC / "stderr.log"), "line": 20}
    (oom,) = of_kind(a, "gpu_oom")
    assert (oom.rank, oom.pid) == (1, 1571)
    assert any("first failure" in r for r in oom.related)


def test_the_json_summary_names_ranks_and_consequences():
    b, a = run(REC)
    s = report.summary(b, a)
    by_kind = {f["kind"]: f for f in s["findings"]}
    assert by_kind["leak"]["rank"] == 1 and by_kind["leak"]["consequence_of"] is None
    assert by_kind["collective_error"]["consequence_of"]["line"] == 20
    assert by_kind["distributed_failure"]["first_failure"]["kind"] == "gpu_oom"
    assert [r["rank"] for r in by_kind["distributed_failure"]["ranks"]] == [0, 1]


def test_healthy_interleaved_ranks_give_no_leak():
    _, a = run(SAMPLE_LOGS / "ddp_gloo_healthy")
    assert a.verdict == "no_leak", a.verdict_reason
    assert not of_kind(a, "distributed_failure") and not of_kind(a, "leak")
    ranked = [s for s in a.series if s.series == "allocated"]
    assert sorted(s.rank for s in ranked) == [0, 1] and all(s.pid is not None for s in ranked)


def test_a_bug_of_every_rank_is_a_leak_per_rank():
    _, a = run(SAMPLE_LOGS / "ddp_gloo_both_leak")
    ranked = sorted((f.rank, f.pid) for f in of_kind(a, "leak") if f.rank is not None)
    assert ranked == [(0, 766), (1, 767)]
    (chain,) = of_kind(a, "distributed_failure")
    assert "each failed on its own" in chain.summary and "do not tell which came first" in chain.summary
    assert [f["rank"] for f in chain.detail["own_failures"]] == [1]


# -- synthetic: two nodes, an OOM on node 2, NCCL watchdog timeouts ten minutes later on node 1 ------------

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB "
       "of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.04 GiB memory in use. Of the "
       "allocated memory 75.02 GiB is allocated by PyTorch, and 1.51 GiB is reserved by PyTorch but unallocated. If "
       "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
       "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
# c10d's lines as PyTorch 2.6 prints them (tests/samples/torch-distributed/nccl_watchdog_01.txt)
WATCHDOG = ("[rank{r}]:[E626 {t} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for "
            "600020 milliseconds before timing out.")
TERMINATED = ("[rank{r}]:[E626 {t} ProcessGroupNCCL.cpp:1515] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group "
              "watchdog thread terminated with exception: [Rank {r}] Watchdog caught collective operation timeout: "
              "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for "
              "600020 milliseconds before timing out.")


def _job(tmp_path: Path, oom_line: str | None = None, node1_first: str = "06:24:44") -> Path:
    job = tmp_path / "job"
    (job / "node2").mkdir(parents=True)
    (job / "node1").mkdir(parents=True)
    node2 = ["W0626 06:04:01.000000 4242 torch/distributed/run.py:851] *****",
             "[default0]:[rank2]: Traceback (most recent call last):",
             '[default0]:[rank2]:   File "/job/train.py", line 88, in <module>',
             "[default0]:[rank2]:     loss.backward()",
             oom_line if oom_line is not None else f"[default0]:[rank2]: {OOM}",
             "W0626 06:14:45.100000 4242 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4301 "
             "closing signal SIGTERM",
             "E0626 06:14:45.400000 4242 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
             "local_rank: 0 (pid: 4300) of binary: /usr/bin/python"]
    (job / "node2" / "stderr.log").write_text("\n".join(node2) + "\n")
    node1 = ["W0626 06:04:01.000000 3131 torch/distributed/run.py:851] *****",
             WATCHDOG.format(r=1, t=f"{node1_first}.903881913"), WATCHDOG.format(r=0, t="06:24:44.159932949"),
             TERMINATED.format(r=1, t="06:24:44.906457629"), TERMINATED.format(r=0, t="06:24:44.160366013")]
    (job / "node1" / "stderr.log").write_text("\n".join(node1) + "\n")
    return job


def test_watchdog_timeouts_on_other_ranks_are_consequences_of_the_oom(tmp_path):
    _, a = pipeline.run([str(_job(tmp_path))], Options(tz="UTC", year=2025))
    (chain,) = of_kind(a, "distributed_failure")
    assert chain.detail["first_failure"]["kind"] == "gpu_oom" and chain.rank == 2
    errors = of_kind(a, "collective_error")
    assert sorted(f.rank for f in errors) == [0, 1]
    assert all(f.consequence_of and f.consequence_of["rank"] == 2 and f.severity == "info" for f in errors)
    assert all("consequence of rank 2" in f.summary for f in errors)
    seq = [(s["kind"], s["rank"]) for s in chain.detail["sequence"]]
    assert seq[0] == ("gpu_oom", 2) and ("collective_error", 0) in seq and ("collective_error", 1) in seq
    assert any(s["kind"] == "rank_signal" for s in chain.detail["sequence"])    # SIGTERM to pid 4301 (rank 3)
    assert "order_note" not in chain.detail


def test_a_timeout_before_the_oom_is_not_its_consequence(tmp_path):
    # the OOM logged with its clock (python logging), after a rank's timeout: the order is then in doubt
    line = f"[default0]:2025-06-26 06:30:00,000 ERROR [rank2]: {OOM}"
    _, a = pipeline.run([str(_job(tmp_path, oom_line=line))], Options(tz="UTC", year=2025))
    (chain,) = of_kind(a, "distributed_failure")
    assert chain.detail["first_failure"]["kind"] == "gpu_oom"
    assert "came before it" in chain.detail["order_note"]
    errors = of_kind(a, "collective_error")
    assert errors and all(f.consequence_of is None and f.severity == "warning" for f in errors)


def test_timeouts_and_no_rank_failure_is_a_hang(tmp_path):
    job = tmp_path / "hang"
    job.mkdir()
    init = "".join(f"node1:{300 + r}:{400 + r} [{r}] NCCL INFO comm 0x55d8ac4ad30{r} rank {r} nranks 4 cudaDev {r} "
                   f"nvmlDev {r} busId {r + 1}b000 commId 0x9ad9b5e4ab2566da - Init COMPLETE\n" for r in range(4))
    (job / "train.log").write_text(init)
    (job / "stderr.log").write_text("W0626 06:04:01.000000 3131 torch/distributed/run.py:851] *****\n"
                                    + "\n".join(WATCHDOG.format(r=r, t=f"06:24:4{r}.000000000") for r in (0, 1, 3)) + "\n")
    _, a = pipeline.run([str(job)], Options(tz="UTC", year=2025))
    (hang,) = of_kind(a, "distributed_failure")
    assert hang.severity == "warning" and "hang" in hang.summary
    assert (hang.detail["ranks_with_errors"], hang.detail["ranks_without"]) == ([0, 1, 3], [2])
    errors = of_kind(a, "collective_error")
    assert sorted(f.rank for f in errors) == [0, 1, 3] and all(f.pid == 300 + f.rank for f in errors)
    assert all(f.gpu == str(f.rank) for f in errors)     # nvmlDev: the GPU as nvidia-smi numbers it


@pytest.mark.parametrize("shift", [0, 1])
def test_healthy_interleaved_two_rank_log_gives_no_leak(tmp_path, shift):
    lines = [f"[default{r}]:2026-12-02 15:09:{20 + s // 5:02d},{(s % 5) * 200:03d} INFO train: [rank {r}] [step {s}] "
             f"allocated: {217.07 + (s % 3) * 0.5 + r:.2f} MB, cached: {290 + r * 16:.2f} MB"
             for s in range(1, 81) for r in ((0, 1) if (s + shift) % 2 else (1, 0))]
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text("\n".join(lines) + "\n")
    _, a = pipeline.run([str(job)], Options(tz="UTC"))
    assert a.verdict == "no_leak", a.verdict_reason
    assert sorted(s.label for s in a.series if s.series == "allocated") == ["rank 0", "rank 1"]


def test_a_job_of_one_rank_is_no_distributed_failure(tmp_path):
    job = tmp_path / "one"
    job.mkdir()
    (job / "stderr.log").write_text(
        f"[default0]:[rank0]: {OOM}\n"
        "E0626 06:14:45.400000 4242 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
        "local_rank: 0 (pid: 4300) of binary: /usr/bin/python\n")
    _, a = pipeline.run([str(job)], Options(tz="UTC", year=2025))
    assert of_kind(a, "gpu_oom") and not of_kind(a, "distributed_failure")
