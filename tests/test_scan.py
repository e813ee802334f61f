"""Batch scans: job discovery, outputs, failure isolation, resumable reruns, kill -9, Dask local mode."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from forensics import scan as sc
from forensics.options import Options
from test_cli import write_incident

ROOT = Path(__file__).resolve().parent.parent


def healthy_job(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["index, memory.used [MiB], memory.total [MiB]"]
    for i in range(200):
        rows.append(f"0, {40000 + (i * 13) % 9} MiB, 143771 MiB")
    (folder / "gpu.csv").write_text("\n".join(rows) + "\n")
    return folder


def broken_job(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "core.bin").write_bytes(os.urandom(4096).replace(b"\n", b"\x00") + b"\x00" * 512)
    good = gzip.compress(b"kernel: Out of memory: Killed process 1 (x)\n" * 1000)
    (folder / "kern.log.2.gz").write_bytes(good[:10])  # truncated archive, nothing readable before the cut
    return folder


@pytest.fixture
def archive(tmp_path) -> Path:
    arch = tmp_path / "archive"
    write_incident(arch / "2026-11" / "job-101")
    healthy_job(arch / "2026-11" / "job-102")
    broken_job(arch / "2026-12" / "job-103")
    return arch


def cfg_for(archive: Path, out: Path, **kw) -> sc.ScanConfig:
    return sc.ScanConfig(archive=archive, out_dir=out, opts=Options(tz="UTC", tz_from_user=True), workers=kw.pop("workers", 1), **kw)


def test_find_jobs_default_depth_and_pattern(archive):
    names = [p.name for p in sc.find_jobs(archive)]
    assert names == ["job-101", "job-102", "job-103"]
    assert [p.name for p in sc.find_jobs(archive, depth=1)] == ["2026-11", "2026-12"]
    assert [p.name for p in sc.find_jobs(archive, job_pattern=r"job-10[12]")] == ["job-101", "job-102"]


def test_scan_outputs_and_failure_isolation(archive, tmp_path):
    out = tmp_path / "out"
    res = sc.run_scan(cfg_for(archive, out, workers=2))
    assert len(res.rows) == 3 and res.analyzed == 3 and res.reused == 0
    by_job = {r["job"]: r for r in res.rows}
    assert by_job["2026-11__job-101"]["verdict"] == "leak"
    assert by_job["2026-11__job-101"]["oom_kills"] >= 1
    assert by_job["2026-11__job-102"]["verdict"] in ("no_leak", "inconclusive")
    bad = by_job["2026-12__job-103"]
    assert bad["status"] == "failed" and bad["error"]
    df = pl.read_csv(out / "summary.csv")
    assert df.height == 3
    assert df["job"][0] == "2026-11__job-101"  # most severe first
    assert pl.read_parquet(out / "summary.parquet").height == 3
    index = (out / "index.html").read_text()
    assert "job-103" in index and "jobs/2026-11__job-101/report.html" in index
    assert (out / "jobs" / "2026-11__job-101" / "report.html").exists()


def test_rerun_skips_unchanged_and_redoes_changed(archive, tmp_path):
    out = tmp_path / "out"
    sc.run_scan(cfg_for(archive, out))
    again = sc.run_scan(cfg_for(archive, out))
    assert again.reused == 3 and again.analyzed == 0
    csv = archive / "2026-11" / "job-102" / "gpu.csv"
    csv.write_text(csv.read_text() + "0, 40001 MiB, 143771 MiB\n")
    third = sc.run_scan(cfg_for(archive, out))
    assert third.analyzed == 1 and third.reused == 2


def test_reports_only_for_findings(archive, tmp_path):
    out = tmp_path / "out"
    sc.run_scan(cfg_for(archive, out, reports="critical"))
    assert (out / "jobs" / "2026-11__job-101" / "report.html").exists()
    assert not (out / "jobs" / "2026-11__job-102" / "report.html").exists()


def test_kill_9_leaves_nothing_half_written_and_resumes(tmp_path):
    arch = tmp_path / "archive"
    for i in range(40):
        write_incident(arch / f"job-{i:03d}")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "scan", str(arch), "-o", str(out), "-j", "2", "--tz", "UTC"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("jobs/*/scan-state.json"))) < 3:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = list(out.glob("jobs/*/scan-state.json"))
    assert 0 < len(done_before) < 40, "the scan finished or never started before the kill"
    for p in done_before:
        json.loads(p.read_text())  # every state file that exists is whole
    for p in out.glob("jobs/*/report.html"):
        assert p.read_text().rstrip().endswith("</html>")
    res = sc.run_scan(cfg_for(arch, out, workers=2))
    assert len(res.rows) == 40 and res.reused >= len(done_before) - 2
    assert not list(out.rglob(".*.tmp-*"))


def test_cli_scan_exit_codes(archive, tmp_path):
    res = subprocess.run([sys.executable, "-m", "forensics", "scan", str(archive), "-o", str(tmp_path / "o"), "-j", "1",
                          "--tz", "UTC"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 1, res.stderr  # one job could not be read
    assert "job-103" in res.stderr
    healthy = tmp_path / "ok"
    healthy_job(healthy / "a")
    res = subprocess.run([sys.executable, "-m", "forensics", "scan", str(healthy), "-o", str(tmp_path / "o2"), "-j", "1",
                          "--fail-on", "leak", "--tz", "UTC"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr


def test_dask_local_mode(archive, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None):
        res = sc.run_scan(cfg_for(archive, tmp_path / "out"), executor="dask")
    assert {r["job"] for r in res.rows} == {"2026-11__job-101", "2026-11__job-102", "2026-12__job-103"}
    assert (tmp_path / "out" / "index.html").exists()


def test_tar_gz_job_bundles_scan_as_their_folders(tmp_path):
    import tarfile
    folders, bundles = tmp_path / "folders", tmp_path / "bundles"
    write_incident(folders / "job-101")
    healthy_job(folders / "job-102")
    write_incident(folders / "job-103")
    (folders / "job-103" / "kern.log").unlink()       # a leak without the kill
    bundles.mkdir()
    for job in sorted(folders.iterdir()):
        with tarfile.open(bundles / f"{job.name}.tar.gz", "w:gz") as tf:
            tf.add(job, arcname=job.name)
    assert [p.name for p in sc.find_jobs(bundles)] == ["job-101.tar.gz", "job-102.tar.gz", "job-103.tar.gz"]
    unpacked = sc.run_scan(cfg_for(folders, tmp_path / "out-folders"))
    packed = sc.run_scan(cfg_for(bundles, tmp_path / "out-bundles"))
    keys = ("verdict", "severity", "worst_finding", "oom_kills", "findings", "inputs", "skipped_lines", "status")
    assert ({r["job"]: [r[k] for k in keys] for r in unpacked.rows}
            == {r["job"].removesuffix(".tar.gz"): [r[k] for k in keys] for r in packed.rows})
    assert {r["job"]: r["verdict"] for r in unpacked.rows}["job-101"] == "leak"
    again = sc.run_scan(cfg_for(bundles, tmp_path / "out-bundles"))
    assert again.reused == 3


def test_job_ids_never_collide(tmp_path):
    """Nested folders are joined with "__"; a folder whose own name holds "__" must not take the same id."""
    from forensics.scan import job_id

    a = tmp_path / "x" / "y"
    b = tmp_path / "x__y"
    c = tmp_path / "jöb"
    d = tmp_path / "jäb"
    ids = [job_id(tmp_path, p) for p in (a, b, c, d)]
    assert len(set(ids)) == 4, ids
    assert ids[0] == "x__y"
    assert all(".." not in i and "/" not in i for i in ids)


def test_sparkline_is_the_leaking_series_and_reads_points_of_that_one_only():
    from types import SimpleNamespace as NS

    class Drawn(NS):
        @property
        def point_bytes(self):
            reads.append(self.name)
            return [y for _, y in self.pts]

    reads: list[str] = []
    flat = Drawn(name="flat", n=5, classification="flat", pts=[(i, 7) for i in range(5)])
    empty = Drawn(name="empty", n=0, classification="linear_growth", pts=[])
    leak = Drawn(name="leak", n=96, classification="linear_growth", pts=[(i, i * 10) for i in range(96)])
    assert sc._sparkline_points(NS(series=[flat, empty, leak])) == [float(20 * i + 10) for i in range(48)]
    assert set(reads) == {"leak"}   # the others are never drawn
    assert sc._sparkline_points(NS(series=[empty])) == []
    assert sc._sparkline_points(NS(series=[flat])) == [7.0] * 5


def test_usable_cpus_follows_the_affinity_mask():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    assert sc.usable_cpus() == len(os.sched_getaffinity(0))
    assert sc.ScanConfig(archive=Path("."), out_dir=Path("o")).workers == sc.usable_cpus()


# ---- #29: reruns follow the options, the per-job summary is the contract, jobs are folders of logs ----

@pytest.mark.parametrize("change", [
    dict(opts=Options(tz="Europe/Berlin", tz_from_user=True)),
    dict(opts=Options(tz="UTC", tz_from_user=True, year=2024)),
    dict(opts=Options(tz="UTC", tz_from_user=True, tz_overrides={"kern.log": "Asia/Tokyo"})),
    dict(reports="critical"),
    dict(fail_on="leak"),
], ids=["tz", "year", "tz-file", "reports", "fail-on"])
def test_a_rerun_with_another_option_is_analyzed_again(archive, tmp_path, change):
    out = tmp_path / "out"
    sc.run_scan(cfg_for(archive, out))
    opts = change.pop("opts", None)
    cfg = cfg_for(archive, out, **change)
    if opts is not None:
        cfg.opts = opts
    again = sc.run_scan(cfg)
    assert again.analyzed == 3 and again.reused == 0
    assert sc.run_scan(cfg).reused == 3   # and the same options again are reused


def test_boot_time_is_part_of_the_fingerprint(archive):
    from datetime import datetime, timezone

    job = archive / "2026-11" / "job-101"
    plain = sc.ScanConfig(archive=archive, out_dir=archive.parent / "o", opts=Options(tz="UTC"))
    booted = sc.ScanConfig(archive=archive, out_dir=archive.parent / "o",
                           opts=Options(tz="UTC", boot_time=datetime(2026, 11, 30, tzinfo=timezone.utc)))
    assert sc.fingerprint(job, plain.options_key()) != sc.fingerprint(job, booted.options_key())


def test_the_per_job_summary_is_report_json(tmp_path):
    arch = tmp_path / "archive"
    job = write_incident(arch / "job-1")
    out = tmp_path / "out"
    run = lambda *a: subprocess.run([sys.executable, "-m", "forensics", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=ROOT, timeout=300)
    res = run("scan", str(arch), "-o", str(out), "-j", "1", "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    res = run("report", str(job), "-o", "", "--json", str(tmp_path / "r.json"), "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    scanned = json.loads((out / "jobs" / "job-1" / "summary.json").read_text())
    reported = json.loads((tmp_path / "r.json").read_text())
    for doc in (scanned, reported):   # the paths are the same files, named from where each command started
        for i in doc["inputs"]:
            i["path"] = Path(i["path"]).name
        for f in doc["findings"]:
            for e in f["evidence"]:
                e["path"] = Path(e["path"]).name
    assert scanned == reported and scanned["tool"] == "gpu-forensics"


def test_a_folder_of_code_and_notes_is_not_a_job_unless_named(tmp_path):
    arch = tmp_path / "archive"
    healthy_job(arch / "job-1")
    code = arch / "tools"
    code.mkdir(parents=True)
    (code / "record.py").write_text("import sys\nprint('recording')\n")
    (code / "notes.txt").write_text("how the jobs were recorded\n")
    not_jobs: list[Path] = []
    assert [p.name for p in sc.find_jobs(arch, not_jobs=not_jobs)] == ["job-1"]
    assert not_jobs == [code]
    assert [p.name for p in sc.find_jobs(arch, job_pattern="tools|job")] == ["job-1", "tools"]
    res = sc.run_scan(cfg_for(arch, tmp_path / "out"))
    assert [r["job"] for r in res.rows] == ["job-1"] and res.failed == 0
    assert res.not_jobs and res.not_jobs[0].startswith(f"{code}: not a job")


def test_the_showcase_folder_holds_jobs_only():
    not_jobs: list[Path] = []
    jobs = sc.find_jobs(ROOT / "sample_logs", not_jobs=not_jobs)
    assert not_jobs == [] and "record" not in {p.name for p in jobs}
    assert {p.parent for p in jobs} == {ROOT / "sample_logs"}


class _KillsItsWorker:
    """Options that abort the process that unpickles them: a job whose worker dies (SIGABRT)."""

    def __reduce__(self):
        return (os.abort, ())


def test_a_worker_that_dies_fails_its_job_only_and_a_rerun_skips_it(archive, tmp_path):
    """Issue 45 D-S5: a dead worker gave a traceback and no index, and every rerun failed the same way."""
    out = tmp_path / "out"
    out.mkdir()
    jobs = sc.find_jobs(archive)
    opts = Options(tz="UTC", tz_from_user=True)
    args = [(str(jobs[0]), "bad", str(out), _KillsItsWorker(), "none", None, "")]
    args += [(str(j), j.name, str(out), opts, "none", None, "") for j in jobs[1:]]
    rows = list(sc._run_pool(2, args, None))
    bad = [r for r in rows if r["job"] == "bad"]
    assert len(rows) == len(jobs) and len(bad) == 1
    assert bad[0]["status"] == "failed" and "worker process died (killed by signal SIGABRT)" in bad[0]["error"]
    others = [r for r in rows if r["job"] != "bad"]
    assert any(r["status"] == "ok" for r in others)
    assert not any("worker process died" in (r["error"] or "") for r in others)
    # the main process wrote the dead job's state: a rerun keeps its row, --retry-failed redoes it
    state = json.loads((out / "jobs" / "bad" / sc.STATE_NAME).read_text())
    assert state["row"]["status"] == "failed" and state["fingerprint"]


def test_sigterm_writes_the_jobs_done_and_leaves_no_worker(tmp_path):
    """Issue 42/45 D-S6: SIGTERM to the scan's process alone: exit 143, the index of the jobs done, the
    count left, and no worker left running."""
    arch = tmp_path / "archive"
    for i in range(40):
        write_incident(arch / f"job-{i:03d}")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "scan", str(arch), "-o", str(out), "-j", "2", "--tz", "UTC"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out.glob("jobs/*/scan-state.json"))) < 3:
        time.sleep(0.2)
    children = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr and "left" in stderr and "run the same command again" in stderr
    rows = (out / "summary.csv").read_text().splitlines()
    assert 1 < len(rows) < 41
    left = children
    for _ in range(50):   # the kernel takes a moment to end them
        left = [c for c in children if Path(f"/proc/{c}/cmdline").exists() and _alive(c)]
        if not left:
            break
        time.sleep(0.1)
    assert children and not left, [Path(f"/proc/{c}/cmdline").read_bytes() for c in left]


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cli_error(*args: str, cwd: Path) -> str:
    res = subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def test_scan_usage_errors_are_one_line(archive, tmp_path):
    assert "--engine dask" in _cli_error("scan", str(archive), "--scheduler", "tcp://127.0.0.1:1", cwd=tmp_path)
    assert "--depth" in _cli_error("scan", str(archive), "--depth", "1", "--job-pattern", "x", cwd=tmp_path)
    assert "--workers 0" in _cli_error("scan", str(archive), "--workers", "0", cwd=tmp_path)
    assert "not a folder" in _cli_error("scan", str(tmp_path / "nothing"), cwd=tmp_path)
    assert not (tmp_path / "scan-out").exists()


def test_an_unreachable_scheduler_is_one_line_exit_2(archive, tmp_path):
    pytest.importorskip("dask.distributed")
    line = _cli_error("scan", str(archive), "-o", str(tmp_path / "o"), "--engine", "dask",
                      "--scheduler", "tcp://127.0.0.1:1", cwd=tmp_path)
    assert "cannot reach the Dask scheduler" in line


def test_retry_failed_redoes_only_the_failed_jobs(archive, tmp_path):
    out = tmp_path / "out"
    first = sc.run_scan(cfg_for(archive, out))
    assert first.failed >= 1
    again = sc.run_scan(cfg_for(archive, out))
    assert again.analyzed == 0
    retried = sc.run_scan(cfg_for(archive, out, retry_failed=True))
    assert retried.analyzed == first.failed and retried.failed == first.failed


def test_workers_under_an_address_space_limit_they_cannot_raise(tmp_path):
    """A scan run under `ulimit -v` (as bench/fuzz.py runs the hostile cases) asked its workers for more
    address space than that: each worker died setting its limit, and every job failed. The lower limit holds."""
    import resource

    arch = tmp_path / "arch"
    for name in ("a", "b", "c"):
        healthy_job(arch / name)
    limit = 8 << 30

    def ulimit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    res = subprocess.run([sys.executable, "-m", "forensics", "scan", str(arch), "-o", str(tmp_path / "o"), "-j", "2",
                          "--max-worker-memory", "64GiB", "--tz", "UTC"], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, preexec_fn=ulimit)
    assert res.returncode == 0, res.stderr
    rows = pl.read_parquet(tmp_path / "o" / "summary.parquet")
    assert rows["status"].to_list() == ["ok"] * 3
    code = "import resource; resource.setrlimit(resource.RLIMIT_AS, (%d, %d)); from forensics import scan; " \
           "print(scan.default_worker_bytes(1))" % (limit, limit)
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert int(shown.stdout) == limit, shown.stderr   # what a dead worker's row names as its limit
