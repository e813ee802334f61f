"""torch-distributed: NCCL and gloo collective errors, torchrun's agent lines and failure records, and
the lines that say which pid and GPU a rank is: every real snippet, the two-rank recording, the
rank prefixes, clocks without a year, and properties (any batching, any garbage)."""
from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from conftest import SAMPLE_LOGS, parse_file, realworld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import ingest
from forensics.options import Options
from forensics.parsers import ranks
from forensics.parsers.torch import distributed

NAME = "torch-distributed"


def events(p, kind=None) -> list[dict]:
    rows = p.events.to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return [r for r in rows if kind is None or r["kind"] == kind]


def scan_text(tmp_path, text: str, opts: Options | None = None, name: str = "x.log"):
    """What the scanner finds in a file of these lines (the path every other parser's file takes)."""
    path = tmp_path / name
    path.write_text(text)
    frame = pl.DataFrame({"text": text.splitlines()}, schema={"text": pl.String}).with_row_index("line", offset=1)
    frame = frame.with_columns(pl.col("line").cast(pl.Int64))
    hinted = frame.filter(pl.col("text").str.contains(distributed.SCAN_HINT))
    return distributed.scan(hinted, SimpleNamespace(path=str(path), mtime=path.stat().st_mtime), opts or Options(tz="UTC"))


# -- the real snippets ------------------------------------------------------------------------------

def test_watchdog_timeouts_with_rank_prefix_and_glog_stamps():
    _, p = parse_file(realworld("nccl_watchdog_01.txt"), Options(tz="UTC", year=2025), expect=NAME)
    ev = events(p, "collective_error")
    timeouts = [e for e in ev if e["detail"]["error"] == "timeout"]
    assert [e["detail"]["rank"] for e in timeouts] == [1, 0, 2]
    t = timeouts[0]["detail"]
    assert (t["backend"], t["op"], t["seq"], t["timeout_ms"], t["ran_ms"], t.get("numel_in")) == (
        "nccl", "ALLREDUCE", 808, 600000, 600020, 9801523)
    detected = [e for e in ev if e["detail"]["error"] == "watchdog_detected"]
    assert [(e["detail"]["rank"], e["detail"]["seq"], e["detail"]["last_completed"]) for e in detected] == [
        (1, 808, 807), (0, 808, 807)]
    # `[E626 06:24:44.903881913 ...]`: June 26 (no year: --year), nanoseconds cut to microseconds
    assert timeouts[0]["time"] == datetime(2025, 6, 26, 6, 24, 44, 903881, tzinfo=timezone.utc)
    assert p.clock == "wall-assumed"


def test_older_watchdog_form_without_stamp_or_prefix_takes_the_message_rank():
    _, p = parse_file(realworld("nccl_watchdog_02.txt"), expect=NAME)
    ev = events(p, "collective_error")
    assert [e["detail"]["rank"] for e in ev] == [1, 3, 2, 6, 7]
    assert all(e["time"] is None and "numel_in" not in e["detail"] for e in ev)
    assert ev[0]["detail"]["timeout_ms"] == 1800000 and p.clock == "none"


def test_watchdog_stuck_is_a_hang_not_a_timeout():
    _, p = parse_file(realworld("nccl_watchdog_stuck_01.txt"), Options(tz="UTC", year=2025), expect=NAME)
    ev = events(p, "collective_error")
    assert [(e["detail"]["rank"], e["detail"]["error"]) for e in ev] == [(7, "watchdog_stuck"), (2, "timeout")]
    assert ev[0]["detail"]["stuck_seconds"] == 480 and ev[1]["detail"]["op"] == "_ALLGATHER_BASE"


def test_torchrun_failure_summary_records():
    _, p = parse_file(realworld("torchrun_childfailed_01.txt"), expect=NAME)
    ex = events(p, "rank_exit")
    got = [(e["detail"]["rank"], e["detail"]["local_rank"], e["pid"], e["detail"]["exitcode"], e["detail"]["root_cause"],
            e["detail"]["host"]) for e in ex]
    assert got == [(1, 1, 78971, 1, False, "n136-117-136.byted.org"), (0, 0, 78970, 1, True, "n136-117-136.byted.org")]
    # each record is timed by its own `time` field (the agent's local clock) and quoted on its `rank` line
    assert ex[1]["time"] == datetime(2023, 5, 19, 16, 39, 58, tzinfo=timezone.utc)
    assert ex[1]["text"].strip() == "rank      : 0 (local_rank: 0)" and ex[1]["line"] == 19
    assert p.clock == "wall-assumed"


def test_a_signal_exit_record():
    _, p = parse_file(realworld("torchrun_childfailed_02.txt"), expect=NAME)
    (e,) = events(p, "rank_exit")
    assert (e["detail"]["exitcode"], e["detail"]["signal"], e["pid"], e["detail"]["root_cause"]) == (-9, 9, 14750, True)
    assert e["detail"]["message"] == "Signal 9 (SIGKILL) received by PID 14750"


def test_agent_lines_through_python_logging():
    _, p = parse_file(realworld("torchrun_agent_01.txt"), Options(tz="UTC"), expect=NAME)
    sig, ex = events(p, "rank_signal"), events(p, "rank_exit")
    assert [(e["pid"], e["detail"]["signal"]) for e in sig] == [(5938, "SIGTERM")]
    assert [(e["pid"], e["detail"]["local_rank"], e["detail"]["exitcode"], e["detail"]["root_cause"]) for e in ex] == [
        (5939, 2, 1, True)]
    assert sig[0]["time"] == datetime(2024, 5, 8, 8, 47, 31, 261000, tzinfo=timezone.utc)


def test_gloo_peer_closed_at_the_end_of_a_traceback():
    _, p = parse_file(realworld("gloo_peer_closed_01.txt"), expect=NAME)
    (e,) = events(p, "collective_error")
    assert (e["detail"]["backend"], e["detail"]["error"]) == ("gloo", "peer_closed")
    assert e["detail"]["message"] == "Connection closed by peer [172.28.0.12]:43185"
    assert p.skipped.counts == {"not a line about the distributed job": 14,
                                "not a log line (provenance, separator, shell prompt)": 1}


def test_dist_backend_error_with_nccls_code():
    _, p = parse_file(realworld("nccl_distbackend_01.txt"), expect=NAME)
    ev = events(p, "collective_error")
    assert ev[0]["detail"]["error"] == "nccl_error" and ev[0]["detail"]["reason"] == "unhandled cuda error"
    assert ev[0]["detail"]["where"] == "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77"
    assert ev[1]["detail"]["code"] == "ncclUnhandledCudaError"


# -- snippets inside other logs ------------------------------------------------------------------------

# https://github.com/NVIDIA/nccl/issues/1029 (NCCL 2.18, NCCL_DEBUG=INFO, a `host: ` wrapper of the launcher in
# front): the communicator lines say which host, pid, CUDA device, NVML device and bus each rank is
NCCL_INIT = """\
rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19484:21054 [0] NCCL INFO comm 0x557e83314500 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 4f000 commId 0x9ad9b5e4ab2566da - Init START
rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19485:21058 [1] NCCL INFO comm 0x55d8ac4ad300 rank 1 nranks 16 cudaDev 1 nvmlDev 1 busId 52000 commId 0x9ad9b5e4ab2566da - Init START
"""
# https://github.com/NVIDIA/nccl/issues/629 (older NCCL: no nvmlDev, `Init COMPLETE`)
NCCL_INIT_OLD = """\
A03-R28-I49-3-9000018:193027:193119 [7] NCCL INFO comm 0x7fdf08000d00 rank 15 nranks 16 cudaDev 7 busId e7000 - Init COMPLETE
"""


def test_nccl_communicator_lines_say_which_pid_and_gpu_a_rank_is(tmp_path):
    p = scan_text(tmp_path, NCCL_INIT + NCCL_INIT_OLD)
    info = events(p, "rank_info")
    assert [(e["detail"]["rank"], e["pid"], e["gpu"], e["detail"]["host"], e["detail"]["nranks"]) for e in info] == [
        (0, 19484, "0", "rdma-gpu-train-worker-0", 16), (1, 19485, "1", "rdma-gpu-train-worker-0", 16),
        (15, 193027, "0000:e7:00.0", "A03-R28-I49-3-9000018", 16)]   # without nvmlDev: the PCI bus id


def test_a_ranks_own_line_with_its_pid_and_device(tmp_path):
    # a worker prefix of vLLM (https://github.com/vllm-project/vllm, `(VllmWorker rank=1 pid=254)`), and a
    # training script's own line with CUDA_VISIBLE_DEVICES: cuda:1 of "4,5" is GPU 5
    p = scan_text(tmp_path, "(VllmWorker rank=1 pid=254) INFO 01-02 03:04:05 worker started\n"
                            "[default1]:rank 1 local_rank 1 pid 777 device cuda:1 CUDA_VISIBLE_DEVICES=4,5\n"
                            "[default0]:rank 0 pid 776 device cuda:0 CUDA_VISIBLE_DEVICES=(unset)\n")
    got = [(e["detail"]["rank"], e["detail"].get("local_rank"), e["pid"], e["gpu"]) for e in events(p, "rank_info")]
    assert got == [(1, None, 254, None), (1, 1, 777, "5"), (0, 0, 776, "0")]


def test_gloo_timeout_behind_a_launchers_prefix(tmp_path):
    # https://github.com/pytorch/gloo/issues/511: the recv timeout behind a launcher's `[trainer22|6]:`
    p = scan_text(tmp_path, "[trainer22|6]:RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                            "1800000ms for recv operation to complete\n")
    (e,) = events(p, "collective_error")
    assert (e["detail"]["backend"], e["detail"]["error"]) == ("gloo", "timeout")


def test_a_process_group_rank_is_not_the_jobs_rank(tmp_path):
    # code-index id 54907917001 (a training log's paste): c10d's log prefix of a sub-group, `[PG ID 4 PG GUID 45
    # Rank 1]`, behind the global `[rank9]:`
    p = scan_text(tmp_path, "[rank9]:[E318 08:49:08.969150748 ProcessGroupNCCL.cpp:2057] [PG ID 4 PG GUID 45 Rank 1] "
                            "Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective "
                            "operation timeout: WorkNCCL(SeqNum=2, OpType=_REDUCE_SCATTER_BASE, NumelIn=1179648, "
                            "NumelOut=589824, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n",
                  Options(tz="UTC", year=2025))
    (e,) = events(p, "collective_error")
    d = e["detail"]
    assert (d["rank"], d["pg"], d["pg_rank"], d["error"], d["watchdog_terminated"]) == (9, 4, 1, "timeout", True)


def test_a_cuda_error_in_the_watchdog_is_the_ranks_own(tmp_path):
    # code-index id 57018797972 (a vLLM issue's paste)
    p = scan_text(tmp_path, "[rank0]:[E122 07:39:51.324142902 ProcessGroupNCCL.cpp:1515] [PG 3 Rank 0] Process group "
                            "watchdog thread terminated with exception: CUDA error: an illegal memory access was "
                            "encountered\n")
    (e,) = events(p, "collective_error")
    assert e["detail"]["error"] == "cuda_error" and e["detail"]["rank"] == 0


def test_glog_stamps_take_the_year_of_a_dated_line_of_the_file(tmp_path):
    text = ("W1202 15:09:45.874000 1524 torch/distributed/elastic/multiprocessing/api.py:1012] Sending process 1570 "
            "closing signal SIGTERM\nFailures:\n  time      : 2026-12-02_15:09:46\n  host      : localhost\n"
            "  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 1570)\n")
    p = scan_text(tmp_path, text, Options(tz="Europe/Berlin"))
    sig = events(p, "rank_signal")[0]
    assert sig["time"] == datetime(2026, 12, 2, 14, 9, 45, 874000, tzinfo=timezone.utc)   # CET
    # without a dated line, the file's mtime dates it (and says so)
    p = scan_text(tmp_path, text.split("\n")[0] + "\n", name="y.log")
    assert p.clock == "wall-yearless" and "year of the glog stamps" in p.meta["year_from"]


# -- the recorded two-rank run -------------------------------------------------------------------------

def test_recorded_torchrun_stderr():
    _, p = parse_file(SAMPLE_LOGS / "ddp_gloo_rank1_leak" / "stderr.log", Options(tz="Etc/UTC"), expect=NAME)
    kinds = [(e["kind"], e["line"], e["pid"], e["detail"].get("rank"), e["detail"].get("local_rank")) for e in events(p)]
    assert kinds == [
        ("collective_error", 36, None, 0, 0),     # [default0]:[rank0]: RuntimeError: [...gloo...] Connection closed by peer
        ("rank_signal", 37, 1570, None, None),    # the agent's SIGTERM to rank 0
        ("rank_exit", 38, 1571, None, 1),         # failed (exitcode: 1) local_rank: 1 (pid: 1571)
        ("rank_exit", 63, 1570, 0, 0),            # the summary: rank 0 by SIGTERM ...
        ("rank_exit", 72, 1571, 1, 1),            # ... and the root cause, rank 1
    ]
    root = events(p, "rank_exit")[-1]
    assert root["detail"]["root_cause"] and root["time"] == datetime(2026, 12, 2, 15, 9, 45, tzinfo=timezone.utc)


def test_recorded_train_log_says_which_pid_each_rank_is():
    src = SAMPLE_LOGS / "ddp_gloo_rank1_leak" / "train.log"
    lines = src.read_text().splitlines()
    frame = pl.DataFrame({"text": lines}).with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))
    hinted = frame.filter(pl.col("text").str.contains(distributed.SCAN_HINT))
    p = distributed.scan(hinted, SimpleNamespace(path=str(src), mtime=0), Options(tz="Etc/UTC"))
    got = [(e["line"], e["detail"]["rank"], e["pid"], e["gpu"]) for e in events(p, "rank_info")]
    assert got == [(1, 0, 1570, "0"), (2, 1, 1571, "0")]
    assert hinted.height == 2     # the step markers ("[rank 1] [step 1] ...") are no rank facts


# -- rank prefixes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, want", [
    ("[default1]:[rank1]: Traceback (most recent call last):", {"rank": 1, "local_rank": 1}),
    ("[default0]:2026-12-02 15:09:15,927 INFO train: rank 0 local_rank 0 pid 1570", {"rank": 0, "local_rank": 0}),
    ("[rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog", {"rank": 7}),
    ("[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught", {"rank": 3}),
    ("[PG 0 (default_pg) Rank 7] Exception", {"rank": 7}),
    ("[PG ID 2 PG GUID 9 Rank 7] Exception", {"pg": 2, "pg_rank": 7}),
    ("nranks 16 cudaDev 3", {}),
    ("[step1]: allocated: 1 MB", {}),            # a tag is no launcher's prefix
])
def test_rank_of_a_line(line, want):
    assert ranks.of_line(line) == want


def test_prefixes_are_read_then_cut_off():
    frame = pl.DataFrame({"line": [1, 2, 3], "text": ["[default1]:[rank1]: x", "[trainer0]:y", "[step 3] z"]})
    out = ranks.split_prefix(frame)
    assert out["text"].to_list() == ["x", "y", "[step 3] z"]
    assert out["line_rank"].to_list() == [1, None, None] and out["line_local_rank"].to_list() == [1, 0, None]


# -- properties ---------------------------------------------------------------------------------------

_PIECES = st.sampled_from([
    "[default1]:", "[rank0]:", "[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] ", "[Rank 1] ",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, Timeout(ms)=600000)",
    " ran for 600020 milliseconds before timing out.", "Timeout at NCCL work: 5, last enqueued NCCL work: 6, ",
    "last completed NCCL work: 4.", "ProcessGroupNCCL's watchdog got stuck for 480 seconds",
    "Process group watchdog thread terminated with exception: ", "CUDA error: x", "NCCL error in: a.cpp:1, ",
    "unhandled cuda error", "ncclRemoteError", "DistBackendError: ", "[../third_party/gloo/gloo/transport/tcp/pair.cc:1] ",
    "Connection closed by peer", "W1202 15:09:45.874000 1524 x.py:1] ", "Sending process 12 closing signal SIGTERM",
    "failed (exitcode: -9) local_rank: 3 (pid: 44) of binary: /bin/p", "Root Cause (first observed failure):",
    "Failures:", "  time      : 2026-12-02_15:09:45", "  time      : 2026-13-99_99:99:99", "  host      : h",
    "  rank      : 1 (local_rank: 1)", "  exitcode  : 1 (pid: 1571)", "  exitcode  : x", "  error_file: <N/A>",
    "  traceback : Signal 15", "rank 1 pid 2 cuda:9 CUDA_VISIBLE_DEVICES=3", "NCCL INFO comm 0x1 rank 2 nranks 4 cudaDev 1 busId fffff",
    "[PG ID 4 PG GUID 45 Rank 1] ", "99999999999999999999", " ", "\t", "é", ":", "0",
])
_LINE = st.one_of(st.lists(_PIECES, max_size=6).map("".join), st.text(max_size=60))


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index("line", offset=1).with_columns(
        pl.col("line").cast(pl.Int64))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=14), st.integers(1, 5))
def test_the_same_events_whatever_the_batching(lines, size):
    lines = [ln.replace("\n", " ").replace("\r", " ") for ln in lines]
    frame = _frame(lines)
    src = SimpleNamespace(path="prop.log", mtime=1.8e9)
    whole = distributed.Reader(src, Options(tz="UTC"))
    whole.feed(frame)
    batched = distributed.Reader(src, Options(tz="UTC"))
    for at in range(0, frame.height, size):
        batched.feed(frame.slice(at, size))
    a, b = whole.finish(), batched.finish()
    assert a.events.equals(b.events) and a.skipped.counts == b.skipped.counts and a.clock == b.clock


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=10))
def test_arbitrary_lines_never_raise(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.log"
        path.write_text("W1202 15:09:10.985000 1524 torch/distributed/run.py:851] start\n"
                        + "\n".join(ln.replace("\r", " ") for ln in lines) + "\n")
        bundle = ingest.load([str(path)], Options(tz="UTC"))
        assert bundle.inputs[0].error is None
        for e in bundle.events.filter(pl.col("kind").is_in(["collective_error", "rank_exit", "rank_signal", "rank_info"])).iter_rows(named=True):
            assert e["line"] >= 1 and isinstance(json.loads(e["detail"]), dict)
