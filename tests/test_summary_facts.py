"""The facts of each finding as typed JSON fields (docs/design.md, the JSON summary): a script that wants
"every job with Xid 79" or "which process was killed" reads a field, never the summary sentence."""
from __future__ import annotations

from pathlib import Path

from conftest import SAMPLE_LOGS, realworld
from forensics import pipeline, report
from forensics.options import Options

MiB = 1 << 20
UTC = Options(tz="UTC")


def findings(*paths, kind: str) -> list[dict]:
    bundle, analysis = pipeline.run([str(p) for p in paths], UTC)
    return [f for f in report.summary(bundle, analysis)["findings"] if f["kind"] == kind]


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_oom_kill_victim_cgroup_and_rss_figures():
    """host_oom_pin_memory (recorded): the trainer killed in its 4 GiB memory cgroup, then a loader worker."""
    first, second = findings(SAMPLE_LOGS / "host_oom_pin_memory", kind="oom_kill")
    assert (first["pid"], first["process"], second["pid"], second["process"]) == (1506, "python3", 1583, "pt_data_worker")
    assert (first["scope"], first["cgroup"], first["oom_cgroup"], first["constraint"]) == (
        "memcg", "/gf_pin", "/gf_pin", "CONSTRAINT_MEMCG")
    assert first["anon_rss_bytes"] + first["file_rss_bytes"] + first["shmem_rss_bytes"] == first["bytes"]
    assert first["cgroup_limit_bytes"] == 4 << 30 and first["trigger_process"] == "pt_data_worker"
    assert first["kill_line_missing"] is False and first["inferred_from"] is None


def test_a_kill_known_only_from_its_summary_says_the_kill_line_is_absent():
    (kill,) = findings(realworld("kernlog_oom_15.txt"), kind="oom_kill")
    assert (kill["pid"], kill["process"], kill["cgroup"], kill["scope"]) == (5096, "firewalld", "/", "global")
    assert kill["kill_line_missing"] is True and kill["inferred_from"] == "oom_kill_summary"
    assert "the Killed process line is not in the log" in kill["summary"]
    assert [e["line"] for e in kill["evidence"]] == [2]


def test_xid_code_bus_and_uuid_are_fields():
    (x,) = findings(realworld("xid_02.txt"), kind="xid")
    assert (x["code"], x["xid_name"], x["fatal"]) == (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", True)
    assert (x["bus_id"], x["gpu_uuid"], x["gpu"]) == ("0000:a1:00", "GPU-979426f2-893a-7cbb-c4cf-81472f89a462",
                                                       "GPU-979426f2-893a-7cbb-c4cf-81472f89a462")
    assert (x["pid"], x["pids"], x["processes"], x["count"]) == (None, [], [], 1)


def test_xid_older_and_mig_forms_keep_bus_and_instance(tmp_path):
    """The two shapes of the issue: no `PCI:` (older drivers) and a MIG GPU instance; two instances of
    one GPU are two findings (two jobs), each with its instance."""
    path = write(tmp_path, "dmesg.txt",
                 "[ 100.000000] NVRM: Xid (0000:03:00): 14, Channel 00000001\n"
                 "[ 200.000000] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 31, pid=1234, name=python, Ch 00000008, intr "
                 "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_00000000. Fault is of type FAULT_PDE\n"
                 "[ 201.000000] NVRM: Xid (PCI:0000:01:00 GPU-I:06): 31, pid=1240, name=python, Ch 00000009, intr "
                 "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_1 faulted @ 0x7f_10000000. Fault is of type FAULT_PDE\n")
    old, mig5, mig6 = sorted(findings(path, kind="xid"), key=lambda f: (f["bus_id"] != "0000:03:00", f["gpu_instance"] or 0))
    assert (old["code"], old["bus_id"], old["channel"], old["gpu_instance"]) == (14, "0000:03:00", "00000001", None)
    assert (mig5["code"], mig5["bus_id"], mig5["gpu_instance"], mig5["pid"], mig5["process"]) == (
        31, "0000:01:00", 5, 1234, "python")
    assert (mig6["gpu_instance"], mig6["pids"]) == (6, [1240])
    assert "MIG GPU instance 5" in mig5["summary"]


def test_cuda_oom_requested_and_allocator_figures():
    (oom,) = findings(SAMPLE_LOGS / "incident_linear_oom", kind="gpu_oom")
    assert oom["requested_bytes"] == oom["bytes"] == 256 * MiB
    assert oom["allocated_bytes"] <= oom["reserved_bytes"] < oom["capacity_bytes"]
    assert oom["exception"] == "torch.OutOfMemoryError" and oom["count"] == 1
    assert oom["site"].endswith("workloads.py:259 in preprocess_oom") and oom["traceback"][-1]["function"] == "preprocess_oom"


def test_leak_and_residual_processes_are_named():
    (leak,) = findings(SAMPLE_LOGS / "leak_staircase_optimizer", kind="leak")
    assert (leak["process"], leak["stairs"], leak["job_number"], leak["job_count"]) == (
        "/opt/torch/.venv/bin/python3", 6, 1, 1)
    assert leak["capacity_bytes"] == 143771 * MiB and len(leak["steps_at"]) == 6
    assert {s["series"] for s in leak["series_fits"]} >= {"allocated", "memory.used"}
    (res,) = findings(SAMPLE_LOGS / "residual_worker", kind="residual_process")
    assert (res["process"], res["parent_pid"], res["until_end_of_log"]) == ("/opt/torch/.venv/bin/python3", 1721, True)
    assert res["held_bytes"] == res["bytes"]


def test_sanitizer_site_and_count():
    sites = findings(SAMPLE_LOGS / "sanitizer_cpp_text", kind="sanitizer_leak")
    assert sum(f["count"] for f in sites) == 4 and sum(f["bytes"] for f in sites) == 1835008
    assert all(f["expected"] is False and f["site"] and f["stack"] for f in sites)


def test_the_host_a_log_names_reaches_the_finding(tmp_path):
    path = write(tmp_path, "kern.log",
                 "2026-11-30T03:04:01.200000+00:00 gpunode-17 kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),"
                 "cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=4242,uid=0\n"
                 "2026-11-30T03:04:01.300000+00:00 gpunode-17 kernel: Out of memory: Killed process 4242 (python3) "
                 "total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69000kB "
                 "oom_score_adj:0\n")
    (kill,) = findings(path, kind="oom_kill")
    assert (kill["host"], kill["cgroup"], kill["oom_cgroup"], kill["pgtables_bytes"]) == (
        "gpunode-17", "/user.slice", None, 69000 * 1024)
