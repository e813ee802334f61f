"""Hostile archive shapes for `scan` (issue 45 D-S1 D-S4)."""
from __future__ import annotations

import os

from hostile_cases import leak_csv, w
from forensics import scan as sc
from forensics.options import Options


def _cfg(arch, out):
    return sc.ScanConfig(archive=arch, out_dir=out, opts=Options(tz="UTC", tz_from_user=True), workers=1,
                         reports="none")


def test_an_output_folder_named_like_a_prefix_of_the_archive_keeps_every_job(tmp_path):
    """D-S1: `scan arch -o ar` dropped every job (paths compared as strings)."""
    w(tmp_path / "arch" / "job1" / "nvidia-smi.csv", leak_csv(120))
    w(tmp_path / "arch" / "job2" / "nvidia-smi.csv", leak_csv(120, step_mib=0))
    res = sc.run_scan(_cfg(tmp_path / "arch", tmp_path / "ar"))
    assert sorted(r["job"] for r in res.rows) == ["job1", "job2"]


def test_an_archive_deeper_than_the_recursion_limit(tmp_path):
    """D-S4: find_jobs recursed once per folder (RecursionError past ~1000 levels)."""
    cur = str(tmp_path / "arch" / "job")
    os.makedirs(cur)
    for _ in range(1100):
        cur += "/d"
        os.mkdir(cur)
    w(tmp_path / "arch" / "other" / "nvidia-smi.csv", leak_csv(120))
    with open(cur + "/nvidia-smi.csv", "w") as fh:
        fh.write(leak_csv(120))
    try:
        jobs = sc.find_jobs(tmp_path / "arch")
        assert [p.name for p in jobs] == ["d", "other"] and str(jobs[0]).count("/d") == 1100
    finally:   # (shutil.rmtree of Python 3.11 recurses too: pytest could not clean this up)
        os.unlink(cur + "/nvidia-smi.csv")
        while cur.endswith("/d"):
            os.rmdir(cur)
            cur = cur[:-2]


def test_a_rerun_sees_a_change_in_a_linked_folder(tmp_path):
    """D-S2: the fingerprint walked the job without entering linked folders, which the analysis reads."""
    data = tmp_path / "linked_data" / "logs"
    w(data / "nvidia-smi.csv", leak_csv(120, step_mib=0))
    job = tmp_path / "arch" / "job1"
    w(job / "train.log", "".join(f"[step {i}] allocated: 500 MB\n" for i in range(60)))
    os.symlink(os.path.relpath(data, job), job / "logs")
    before = sc.fingerprint(job)
    w(data / "nvidia-smi.csv", leak_csv(120, step_mib=300))
    assert sc.fingerprint(job) != before


def test_a_folder_link_dag_is_walked_once(tmp_path):
    """D-S3: levels L0..L39, each with two links to the next level: 2^39 walks before."""
    from forensics.io.sources import discover

    job = tmp_path / "job1"
    for i in range(40):
        (job / f"L{i}").mkdir(parents=True)
        if i:
            os.symlink(f"../L{i}", job / f"L{i - 1}" / "a")
            os.symlink(f"../L{i}", job / f"L{i - 1}" / "b")
    w(job / "L39" / "nvidia-smi.csv", leak_csv(120))
    found = discover([str(job)])
    assert len(found.files) == 1 and not found.problems


def test_the_scan_outputs_inside_a_single_job_archive_are_never_inputs(tmp_path):
    """D-S7: `-o` inside the archive: the job read its own summary.json, scan-state.json and
    summary.csv, so it was never reused."""
    arch = tmp_path / "arch"
    w(arch / "nvidia-smi.csv", leak_csv(120))
    out = arch / "out"
    first = sc.run_scan(_cfg(arch, out))
    assert [r["job"] for r in first.rows] == ["root"] and first.rows[0]["inputs"] == 1
    again = sc.run_scan(_cfg(arch, out))
    assert again.reused == 1 and again.analyzed == 0


def test_links_out_of_the_archive_are_not_followed_unless_asked(tmp_path):
    """D-S8: `passwd -> /etc/passwd` and `logs -> ../../outside_data/secret` were read as the job's."""
    import dataclasses
    import json

    w(tmp_path / "outside" / "secret" / "nvidia-smi.csv", leak_csv(120))
    job = tmp_path / "arch" / "job1"
    w(job / "train.log", "".join(f"[step {i}] allocated: 500 MB\n" for i in range(60)))
    os.symlink("../../outside/secret", job / "logs")
    os.symlink("/etc/passwd", job / "passwd")
    w(tmp_path / "arch" / "common" / "more.log", "".join(f"[step {i}] allocated: 600 MB\n" for i in range(60)))
    os.symlink("../common/more.log", job / "inside.log")   # a link inside the archive is followed
    out = tmp_path / "s"
    res = sc.run_scan(_cfg(tmp_path / "arch", out))
    row = next(r for r in res.rows if r["job"] == "job1")
    summary = json.loads((out / "jobs" / "job1" / "summary.json").read_text())
    assert sorted(os.path.basename(i["path"]) for i in summary["inputs"]) == ["inside.log", "train.log"]
    assert row["inputs"] == 2
    from forensics import pipeline

    # what the job's report and the index say: one line per link not followed
    opts = dataclasses.replace(Options(tz="UTC", tz_from_user=True), read_within=str((tmp_path / "arch").resolve()))
    bundle = pipeline.load([str(job)], opts)
    notes = [p for p in bundle.problems if "a link out of the archive" in p]
    assert len(notes) == 2 and any("/etc/passwd" in p and "--follow-links-out" in p for p in notes)
    cfg = dataclasses.replace(_cfg(tmp_path / "arch", out), follow_links_out=True, force=True)
    res = sc.run_scan(cfg)
    summary = json.loads((out / "jobs" / "job1" / "summary.json").read_text())
    assert sorted(os.path.basename(i["path"]) for i in summary["inputs"]) == [
        "inside.log", "nvidia-smi.csv", "passwd", "train.log"]


def test_finding_jobs_does_not_follow_links_out_of_the_archive(tmp_path):
    """D-S8: a folder link out of the archive was walked (its files sniffed) to find jobs."""
    w(tmp_path / "outside" / "secret" / "nvidia-smi.csv", leak_csv(120))
    arch = tmp_path / "arch"
    w(arch / "job1" / "nvidia-smi.csv", leak_csv(120))
    os.symlink("../outside/secret", arch / "elsewhere")
    outside: list = []
    assert [p.name for p in sc.find_jobs(arch, outside=outside)] == ["job1"]
    assert outside == [(str(arch / "elsewhere"), str((tmp_path / "outside" / "secret").resolve()))]
    assert [p.name for p in sc.find_jobs(arch)] == ["elsewhere", "job1"]
    res = sc.run_scan(_cfg(arch, tmp_path / "s"))
    assert [r["job"] for r in res.rows] == ["job1"]
    assert len(res.not_jobs) == 1 and "a link out of the archive" in res.not_jobs[0]
