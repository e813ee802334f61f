"""job-kill-records and container-status: every real snippet read with the facts a person reads off it
(who was killed, by what, when, whether memory ran out), the scanner inside other logs, and what ends
a job in the report."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import polars as pl
import pytest
from conftest import parse_file, realworld

from forensics import pipeline
from forensics.options import Options
from forensics.parsers.jobs import containers, kills
from forensics.report import build_context


def events(p) -> list[dict]:
    rows = p.events.sort("line").to_dicts()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return rows


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def facts(rows: list[dict]) -> list[tuple]:
    return [(r["line"], r["kind"], r["pid"], r["process"], r["time"]) for r in rows]


# sample -> (line, kind, pid, process, time) of each record, then detail fields of the first
KILLS = {
    "slurm_oom_kill_stepid.txt": (
        [(2, "oom_kill", None, "Slurm step 11300781.0", None), (3, "oom_kill", None, "Slurm task 0 on sdumont6156", None)],
        {"job": "11300781", "step": "0", "count": 1, "scope": "memcg", "ran_out": "host"}),
    "slurm_oom_kill_old_cancelled.txt": (
        [(2, "oom_kill", None, "Slurm step 3495064.0", None), (3, "oom_kill", None, "Slurm task 4 on Orion-01-01", None),
         (5, "job_killed", None, "Slurm step 3495064.0", utc("2021-10-27T19:35:36")),
         (9, "job_killed", None, "Slurm step 3495450.0", utc("2021-10-27T20:22:22"))],
        {"job": "3495064", "step": "0", "count": 1, "scope": "memcg"}),
    "slurm_batch_shell_killed.txt": (
        [(2, "job_killed", 8156, None, None), (3, "oom_kill", None, "Slurm step 191.batch", None)],
        {"reporter": "shell", "signal": "SIGKILL", "cause_recorded": False}),
    "slurm_oom_kill_events_snakemake.txt": (
        [(10, "oom_kill", None, "Slurm step JOBID.13", None), (11, "oom_kill", None, "Slurm task 0 on NODE", None)],
        {"count": 2, "step": "13"}),
    "slurm_job_time_limit.txt": (
        [(2, "job_killed", None, "Slurm job 4191701", utc("2021-08-17T15:09:00"))],
        {"job": "4191701", "node": "c5-1", "reason": "time limit", "cause_recorded": True}),
    "dataloader_worker_killed.txt": (
        [(9, "job_killed", 19597, "DataLoader worker", None)],
        {"reporter": "dataloader", "signal": "SIGKILL", "cause_recorded": False}),
}


@pytest.mark.parametrize("name", sorted(KILLS))
def test_kill_records_read_with_their_facts(name):
    _, p = parse_file(realworld(name), expect="job-kill-records")
    rows = events(p)
    want, detail = KILLS[name]
    got = facts(rows)
    if name == "slurm_batch_shell_killed.txt":
        assert rows[0]["process"].startswith("python3 main.py --prop hform")
        got[0] = got[0][:3] + (None,) + got[0][4:]
    assert got == want
    assert detail.items() <= rows[0]["detail"].items()


def test_cancel_time_is_read_in_the_zone_given():
    _, p = parse_file(realworld("slurm_oom_kill_old_cancelled.txt"), Options(tz="America/Chicago"))
    cancel = [r for r in events(p) if r["kind"] == "job_killed"][0]
    assert cancel["time"] == utc("2021-10-28T00:35:36")   # CDT is UTC-5
    assert cancel["detail"]["node"] == "orion-01-01" and cancel["detail"]["cause_recorded"] is False


def _scan(tmp_path, text: str):
    frame = pl.DataFrame({"text": text.splitlines()}, schema={"text": pl.String}).with_row_index("line", offset=1)
    frame = frame.with_columns(pl.col("line").cast(pl.Int64)).filter(pl.col("text").str.contains(kills.SCAN_HINT))
    return kills.scan(frame, SimpleNamespace(path=str(tmp_path / "x.log")), Options(tz="UTC"))


def test_launcher_return_code_inside_a_deepspeed_log(tmp_path):
    # https://github.com/deepspeedai/DeepSpeed/issues/3232 (the launcher's lines, command shortened)
    text = ("[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266\n"
            "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
            "'--local_rank=0'] exits with return code = -9\n"
            "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['python3.10', '-u', 'trainCLM.py'] "
            "exits with return code = -11\n")
    rows = events(_scan(tmp_path, text))
    assert [(r["line"], r["time"], r["detail"]["signal"], r["detail"]["exit_code"]) for r in rows] == [
        (2, utc("2023-04-14T13:11:27"), "SIGKILL", -9), (3, utc("2023-07-10T04:26:35"), "SIGSEGV", -11)]


def test_scanner_ignores_lines_that_only_share_a_word(tmp_path):
    text = ("Epoch 3: Killed 4 zombie workers\nsrun: error: n1: task 0: Exited with exit code 1\n"
            "Slurm: *** JOB 42 ON n1 CANCELLED AT 2024-01-02T03:04:05 DUE TO TIME LIMIT ***\n")
    rows = events(_scan(tmp_path, text))
    assert [(r["line"], r["kind"], r["detail"].get("reason")) for r in rows] == [(3, "job_killed", "time limit")]
    assert rows[0]["detail"]["cause_recorded"] is True


CONTAINERS = {
    "describe_last_state_oomkilled.txt": [(3, "oom_kill", utc("2023-09-15T07:56:17"), 137, "OOMKilled")],
    "describe_crashloop_oomkilled.txt": [(5, "oom_kill", utc("2020-09-15T06:45:38"), 137, "OOMKilled")],
    "describe_137_reason_error.txt": [(6, "job_killed", utc("2023-11-13T02:50:55"), 137, "Error")],
    "describe_exit_code_2.txt": [],
    "describe_operator_oomkilled_137.txt": [(5, "oom_kill", None, 137, "OOMKilled")],
    "describe_gpu_operator_crashloop_oomkilled.txt": [(7, "oom_kill", None, None, "OOMKilled")],
    # OOMKilled true with ExitCode 0: the flag, not the exit code, says the cgroup's OOM killer fired
    "docker_inspect_json_state_oomkilled.txt": [
        (3, "oom_kill", datetime(2016, 6, 13, 13, 33, 43, 929282, tzinfo=timezone.utc), 0, None)],
    "docker_inspect_137.json.txt": [(20, "job_killed", datetime(2023, 5, 8, 8, 5, 5, 514785, tzinfo=timezone.utc), 137, None)],
    "docker_inspect_state_137.txt": [(10, "job_killed", datetime(2020, 7, 31, 22, 28, 17, 557863, tzinfo=timezone.utc), 137, None)],
}


@pytest.mark.parametrize("name", sorted(CONTAINERS))
def test_container_states_read_with_their_facts(name):
    _, p = parse_file(realworld(name), expect="container-status")
    rows = events(p)
    assert [(r["line"], r["kind"], r["time"], r["detail"].get("exit_code"), r["detail"].get("reason")) for r in rows] \
        == CONTAINERS[name]
    for r in rows:
        # a 137 without OOMKilled is a SIGKILL whose cause was not recorded, never an OOM
        assert r["detail"].get("signal") == ("SIGKILL" if r["detail"].get("exit_code") == 137 else None)
        assert r["detail"]["cause_recorded"] is (r["kind"] == "oom_kill")
        assert (r["detail"].get("scope"), r["detail"].get("ran_out")) == (
            ("memcg", "host") if r["kind"] == "oom_kill" else (None, None))


def test_describe_names_pod_and_container_and_restarts(tmp_path):
    # the layout of `kubectl describe pod` (kubernetes/kubernetes#68286, #10861), an OOMKilled last state
    path = tmp_path / "pod.txt"
    path.write_text("Name:         trainer-0\nNamespace:    ml\nContainers:\n  trainer:\n    Image:  img\n"
                    "    Limits:\n      memory:  40Gi\n    State:          Running\n"
                    "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
                    "      Finished:     Tue, 15 Sep 2020 08:45:38 +0200\n    Restart Count:  3\n"
                    "Volumes:\n  data:\n    Type:  EmptyDir\n")
    _, p = parse_file(path, expect="container-status")
    (r,) = events(p)
    assert (r["kind"], r["process"], r["line"]) == ("oom_kill", "pod ml/trainer-0/trainer", 10)
    assert r["detail"]["pod"] == "ml/trainer-0/trainer" and r["detail"]["restart_count"] == 3


def test_docker_oomkilled_true_is_an_oom_kill(tmp_path):
    # the State fields moby/moby#15621 describes ("OOMKilled": true and "ExitCode": 137)
    path = tmp_path / "inspect.json"
    path.write_text('[{"Id": "x",\n "State": {\n  "OOMKilled": true,\n  "ExitCode": 137,\n'
                    '  "StartedAt": "2015-08-16T10:00:00.1Z",\n  "FinishedAt": "2015-08-16T10:05:00.123456789Z"\n },\n'
                    ' "Name": "/waste"\n}]\n')
    _, p = parse_file(path, expect="container-status")
    (r,) = events(p)
    assert (r["kind"], r["line"], r["detail"]["scope"]) == ("oom_kill", 3, "memcg")
    assert r["time"] == datetime(2015, 8, 16, 10, 5, 0, 123456, tzinfo=timezone.utc)


def test_a_scheduler_oom_ends_the_job_in_the_report(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "slurm-191.err").write_text(realworld("slurm_batch_shell_killed.txt").read_text())
    bundle, analysis = pipeline.run([str(job)], Options(tz="UTC"))
    fatal = analysis.ended_by
    assert fatal is not None and fatal["kind"] == "oom_kill" and fatal["line"] == 3


def test_a_kill_without_oom_is_what_ended_the_job(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "pod.txt").write_text(realworld("describe_137_reason_error.txt").read_text())
    bundle, analysis = pipeline.run([str(job)], Options(tz="UTC"))
    assert analysis.ended_by["kind"] == "job_killed"
    fatal = build_context(bundle, analysis, Options(tz="UTC"))["verdict"]["fatal"]
    assert fatal["kind"] == "job_killed" and "cause not recorded" in fatal["label"]


def test_sniffers_claim_only_their_records():
    assert kills.sniff(["Epoch 3: the job was killed"]) is None
    assert containers.sniff(["State: Running", "Ready: True"]) is None
    assert containers.sniff(['{"ExitCode": 0}']) is None


# -- slurm-sacct ---------------------------------------------------------------------------------------

def test_sacct_parsable_cancelled_steps_with_their_signal():
    _, p = parse_file(realworld("sacct_parsable2_cancelled_steps.txt"), expect="slurm-sacct")
    rows = events(p)
    assert [(r["line"], r["kind"], r["process"], r["detail"]["signal"], r["detail"]["node"]) for r in rows] == [
        (6, "job_killed", "Slurm step 239023.0", "SIGUSR1", "galvani-cn001"),
        (10, "job_killed", "Slurm step 239024.0", "SIGUSR1", "galvani-cn001")]
    assert rows[0]["detail"]["cause_recorded"] is False


def test_sacct_fixed_width_maxrss_and_no_kill():
    _, p = parse_file(realworld("sacct_format_maxrss.txt"), expect="slurm-sacct")
    assert p.events.height == 0
    assert p.notes == ["largest MaxRSS (sacct's host-memory peak): 5.90 MiB in 19.0 (line 4)",
                       "no step ended out of memory or by a signal"]


def test_sacct_out_of_memory_cut_to_width_is_an_oom_kill_with_maxrss(tmp_path):
    # the default 10-wide columns cut OUT_OF_MEMORY and step names (`+`), as sacct prints them; State and
    # ExitCode 0:125 as galaxyproject/galaxy#6832 and qiita-spots/qiita#3521 report for OOM-killed jobs
    path = tmp_path / "sacct.txt"
    path.write_text("       JobID      State ExitCode     MaxRSS                 End \n"
                    "------------ ---------- -------- ---------- ------------------- \n"
                    "4242         OUT_OF_ME+    0:125            2024-05-01T10:00:05 \n"
                    "4242.batch   OUT_OF_ME+    0:125  47185920K 2024-05-01T10:00:05 \n"
                    "4242.extern   COMPLETED      0:0        84K 2024-05-01T10:00:05 \n"
                    "4243          TIMEOUT        0:0            2024-05-01T12:00:00 \n")
    _, p = parse_file(path, Options(tz="UTC"), expect="slurm-sacct")
    rows = events(p)
    assert [(r["line"], r["kind"], r["bytes"], r["process"]) for r in rows] == [
        (3, "oom_kill", None, "Slurm job 4242"), (4, "oom_kill", 47185920 * 1024, "Slurm step 4242.batch"),
        (6, "job_killed", None, "Slurm job 4243")]
    assert rows[1]["time"] == utc("2024-05-01T10:00:05") and rows[1]["detail"]["scope"] == "memcg"
    assert rows[2]["detail"]["reason"] == "timeout" and rows[2]["detail"]["cause_recorded"] is True


# real sacct tables of OOM-killed jobs (tests/samples/slurm-sacct/): (line, process, MaxRSS) of each oom_kill
SACCT_OOM = {
    # the 12-wide JobID column cuts `.batch` to `.bat+`: read as the batch step it is
    "sacct_out_of_memory_batch_step.txt": [(5, "Slurm job 3764934", None), (6, "Slurm step 3764934.batch", None)],
    # the job FAILED 1:0 (no signal: not a kill), its srun step ran out of memory
    "sacct_out_of_memory_srun_step.txt": [(8, "Slurm step 3851291.0", None)],
    "sacct_out_of_memory_mpi_step.txt": [(8, "Slurm step 3881361.0", None)],
    "sacct_out_of_memory_maxrss.txt": [(5, "Slurm job 1012", None), (6, "Slurm step 1012.batch", 1380 * 1024)],
}


@pytest.mark.parametrize("name", sorted(SACCT_OOM))
def test_sacct_real_out_of_memory_tables(name):
    _, p = parse_file(realworld(name), Options(tz="UTC"), expect="slurm-sacct")
    rows = events(p)
    assert [(r["line"], r["process"], r["bytes"]) for r in rows] == SACCT_OOM[name]
    text = realworld(name).read_text().splitlines()
    for r in rows:
        assert r["kind"] == "oom_kill" and (r["detail"]["scope"], r["detail"]["ran_out"]) == ("memcg", "host")
        assert "OUT_OF_ME+" in text[r["line"] - 1]
    # the command line pasted above the table is counted, not read
    assert p.skipped.counts == {"a line before the table's header": 1}


def test_sacct_real_oom_ends_the_job_in_the_report(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "sacct.txt").write_text(realworld("sacct_out_of_memory_srun_step.txt").read_text())
    bundle, analysis = pipeline.run([str(job)], Options(tz="UTC"))
    fatal = analysis.ended_by
    assert fatal is not None and fatal["kind"] == "oom_kill" and fatal["line"] == 8


def test_sacct_sniff_needs_its_header():
    from forensics.parsers.jobs import sacct
    assert sacct.sniff(["JobID|State", "1|COMPLETED"])
    assert sacct.sniff(["JobID State", "----- -----", "1 COMPLETED"])
    assert sacct.sniff(["the job state was", "-----"]) is None


# -- slurm-seff ----------------------------------------------------------------------------------------

def test_seff_out_of_memory_kept_as_comments_under_a_job_script():
    _, p = parse_file(realworld("seff_out_of_memory_in_job_script.txt"), Options(tz="UTC"), expect="slurm-seff")
    (r,) = events(p)
    assert (r["line"], r["kind"], r["process"], r["time"]) == (19, "oom_kill", "Slurm job 35582785", None)
    # the bytes used are on line 25, not the State line the event cites: they are in its detail with their line
    assert r["bytes"] is None
    assert r["detail"] == {"reporter": "slurm", "job": "35582785", "state": "OUT_OF_MEMORY", "exit_code": 0,
                           "requested_bytes": 40 << 30, "cluster": "openmind7", "scope": "memcg", "ran_out": "host",
                           "used_bytes": round(47.64 * (1 << 30)), "used_line": 25}
    assert p.notes == ["seff: job 35582785 used 47.64 GiB of host memory of the 40.00 GiB it asked for "
                       "(OUT_OF_MEMORY, line 25)"]
    # the batch script above the summary is counted, not read
    assert p.skipped.counts == {"not a line of seff's summary": 11}


@pytest.mark.parametrize("name, note", [
    ("seff_completed_per_node_request.txt",
     "seff: job 3765959 used 24.04 GiB of host memory of the 40.00 GiB it asked for (COMPLETED, line 11)"),
    ("seff_two_nodes_estimated.txt",
     "seff: job 64626 used 137.64 MiB of host memory of the 7.84 GiB it asked for (COMPLETED, line 12)"),
])
def test_seff_completed_jobs_say_their_memory_and_kill_nothing(name, note):
    _, p = parse_file(realworld(name), Options(tz="UTC"), expect="slurm-seff")
    assert p.events.height == 0 and p.notes == [note]


def test_seff_oom_ends_the_job_in_the_report(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "run.sh").write_text(realworld("seff_out_of_memory_in_job_script.txt").read_text())
    bundle, analysis = pipeline.run([str(job)], Options(tz="UTC"))
    fatal = analysis.ended_by
    assert fatal is not None and fatal["kind"] == "oom_kill" and fatal["line"] == 19


def test_seff_sniff_needs_job_state_and_efficiency():
    from forensics.parsers.jobs import seff
    assert seff.sniff(["Job ID: 1", "State: COMPLETED (exit code 0)", "Memory Utilized: 1.00 GB"])
    assert seff.sniff(["Job ID: 1", "State: RUNNING"]) is None
    assert seff.sniff(["State: OUT_OF_MEMORY", "Memory Utilized: 1 GB"]) is None


def test_sacct_exit_code_of_ten_thousand_digits_is_no_number(tmp_path):
    """Found by fuzz.py's forced property: int() of a 14,860-digit exit code raised past Python's limit."""
    p = tmp_path / "sacct.txt"
    p.write_text("JobID|JobName|State|ExitCode|MaxRSS\n1|train|OUT_OF_MEMORY|0:" + "9" * 14_860 + "|10G\n")
    _, parsed = parse_file(p, Options(tz="UTC"), expect="slurm-sacct")
    assert parsed.events.height == 1


@pytest.mark.parametrize("header", ["JobID|JobName|State|ExitCode", "JOBID|STATE", "       JobID    MaxRSS "])
def test_sacct_sniff_finds_a_header_deep_in_the_head_in_any_case(header):
    # the sniff splits only the lines that name JobID (most of a head does not): a header in capitals, or
    # below lines of other text, is still found
    from forensics.parsers.jobs import sacct

    rule = "------------ ---------- "
    head = [f"job log line {i}: nothing here" for i in range(150)] + [header, rule, "123 1G"]
    assert sacct.sniff(head)
    assert not sacct.sniff([ln.replace("JobID", "JobId2").replace("JOBID", "JOB") for ln in head])
