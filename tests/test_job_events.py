"""Events tied to their job (detect/jobs.py): an OOM kill of another process, in the same dmesg four
minutes before this job started, is context; what ended the job is this job's own CUDA OOM."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KILL = ("2026-11-30T{t}+0000 node7 kernel: Out of memory: Killed process {pid} (python3) total-vm:94371840kB, "
        "anon-rss:62914560kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:130000kB oom_score_adj:0")
# a traceback's last line as PyTorch prints it (tests/samples/pytorch-oom/torch_oom_01.txt)
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 79.65 GiB total capacity; "
            "73.59 MiB already allocated; 1.03 GiB free; 74.24 GiB reserved in total by PyTorch)")


def build(folder: Path, kill_at: str, pid: int = 1506) -> Path:
    """nvidia-smi CSV of the job (03:00:00-03:10:00, its memory released at the end), its stderr with a
    CUDA OOM, a kern.log with an OOM kill at `kill_at`."""
    folder.mkdir()
    t0 = datetime(2026, 11, 30, 3, 0, 0)
    rows = ["timestamp, index, memory.used [MiB], memory.total [MiB]"]
    for i in range(600):
        used = 500 + 130 * i if i < 595 else 2
        rows.append(f"{(t0 + timedelta(seconds=i)).strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]}, 0, {used} MiB, 81559 MiB")
    (folder / "gpu.csv").write_text("\n".join(rows) + "\n")
    (folder / "stderr.txt").write_text("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
                                       "    loss = model(x)\n" + CUDA_OOM + "\n")
    (folder / "kern.log").write_text(KILL.format(t=kill_at, pid=pid) + "\n")
    return folder


def report(folder: Path, tmp: Path) -> tuple[dict, str]:
    md = tmp / "r.md"
    p = subprocess.run([sys.executable, "-m", "forensics", "report", str(folder), "-o", "", "--json", "-", "--md",
                        str(md)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), md.read_text()


def test_another_process_kill_before_the_job_is_context(tmp_path):
    out, md = report(build(tmp_path / "job", "02:56:00"), tmp_path)
    kill = next(f for f in out["findings"] if f["kind"] == "oom_kill")
    assert kill["job_event"] is False and kill["severity"] == "info" and "not what ended this job" in kill["summary"]
    assert next(f for f in out["findings"] if f["kind"] == "gpu_oom")["job_event"] is not False
    ended = md.split("### What ended the job", 1)[1].split("###", 1)[0]
    assert "CUDA out of memory" in ended and "OOM kill" not in ended
    assert "| Earlier on this host | OOM kill (python3, pid 1506), 2026-11-30 02:56:00 UTC (another process" in md
    assert "kern.log:1" in md.split("not this job's)", 1)[1]


@pytest.mark.parametrize("kill_at, pid", [("03:09:58", 1506), ("02:56:00", None)])
def test_a_kill_in_the_lifetime_or_of_the_jobs_pid_is_the_jobs(kill_at, pid):
    from forensics.detect.findings import Finding
    from forensics.detect.jobs import Job, tie_events

    job = Job(datetime(2026, 11, 30, 3), datetime(2026, 11, 30, 3, 10), pids={4242})
    kill = Finding(kind="oom_kill", severity="critical", summary="killed.", pid=pid or 4242,
                   start=datetime.fromisoformat(f"2026-11-30T{kill_at}"))
    tie_events([kill], job)
    assert kill.job_event is True and kill.severity == "critical"


def test_no_clock_no_claim():
    from forensics.detect.findings import Finding
    from forensics.detect.jobs import tie_events

    kill = Finding(kind="oom_kill", severity="critical", summary="killed.", pid=1, start=datetime(2026, 1, 1))
    tie_events([kill], None)
    assert kill.job_event is None


def _part(first, last, pid, interval_s):
    from types import SimpleNamespace

    import numpy as np

    n = int((last - first).total_seconds() // interval_s) + 1
    return SimpleNamespace(axis="time", x=np.arange(n) * float(interval_s),
                           result=SimpleNamespace(first_x=first, last_x=last, pid=pid, series="process.used"))


def test_a_kill_between_the_last_reading_and_the_next_of_a_coarse_log_is_the_jobs():
    # sampled every 60 s: the kill 50 s after the job's last reading (its memory seen released 10 s
    # later) is its end; the job's pids are those of series inside its lifetime, not an earlier job's
    from forensics.detect.findings import Finding
    from forensics.detect.jobs import job_of, tie_events

    t0 = datetime(2026, 11, 30, 3)
    parts = [_part(t0, t0 + timedelta(hours=1), 4242, 60),
             _part(t0 - timedelta(hours=3), t0 - timedelta(hours=2), 1506, 60)]
    job = job_of(parts, [])
    assert job.pids == {4242} and job.start == t0
    at_end = Finding(kind="oom_kill", severity="critical", summary="k.", pid=77,
                     start=t0 + timedelta(hours=1, seconds=50))
    earlier = Finding(kind="oom_kill", severity="critical", summary="k.", pid=1506, start=t0 - timedelta(minutes=4))
    tie_events([at_end, earlier], job)
    assert at_end.job_event is True and earlier.job_event is False


def test_a_kill_seconds_before_the_jobs_first_reading_is_another_jobs():
    # held-out set 7's host_kill_then_leak_oom: a host-memory OOM kill of one job (pid 683), and 8 s later
    # the first reading of the next job, which leaks into its own CUDA OOM. A job's own fatal event ends
    # it, so none comes before it shows memory: only the clocks' skew is allowed before its first reading,
    # while a kill may still come up to JOB_EDGE_S after its last one.
    from forensics.detect.findings import Finding
    from forensics.detect.jobs import job_of, tie_events
    from forensics.detect.thresholds import JOB_EDGE_S, JOB_START_SKEW_S

    t0 = datetime(2026, 12, 6, 19, 0, 55)
    job = job_of([_part(t0, t0 + timedelta(seconds=5), 710, 0.5)], [])
    before = Finding(kind="oom_kill", severity="critical", summary="k.", pid=683, start=t0 - timedelta(seconds=8))
    skew = Finding(kind="oom_kill", severity="critical", summary="k.", pid=1,
                   start=t0 - timedelta(seconds=JOB_START_SKEW_S / 2))
    after = Finding(kind="oom_kill", severity="critical", summary="k.", pid=2,
                    start=t0 + timedelta(seconds=5 + JOB_EDGE_S - 1))
    tie_events([before, skew, after], job)
    assert before.job_event is False and skew.job_event is True and after.job_event is True
