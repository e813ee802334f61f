"""What reading many jobs' files of one format in one pass would buy: an estimate for the owners.

    POLARS_MAX_THREADS=1 taskset -c 1 python bench/one_pass.py   # as a scan worker runs (1 core, 1 thread)

A scan reads each job's files on their own: ~15-25 ms of CPU per small file whatever its size
(docs/batch-speed.md). The alternative is to read the files of many jobs in one pass (a job column
next to the line number) and split the results afterwards. This does not build that; it estimates it.
For each format, the files of bench/batch.py's job templates that claim it are parsed one by one,
then all concatenated into one file and parsed once; the second cost divided by the number of files
is what a one-pass reader could at best approach. The synthetic jobs' files (a few MB) are also
concatenated by name, 6 at a time (below the streamed reader's 16 MB). Then the stages that
come after reading (timeline, detection, report) are timed per job, so the second table can project
a job's CPU and the jobs per second of 2 workers if reading cost only the one-pass figure.
"""
from __future__ import annotations

import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from batch import templates  # noqa: E402

from forensics import detect
from forensics import ingest
from forensics import pipeline
from forensics import report as rep  # noqa: E402
from forensics.options import Options  # noqa: E402
from forensics.io.sources import Source  # noqa: E402

OPTS = Options(tz="UTC")
SYNTHETIC_PER_PASS = 6


def parse_cpu(path: Path, repeat: int = 2) -> tuple[float, str | None]:
    """Best CPU seconds of parse_one(path) after a warm-up, and the format that claimed it."""
    info, _ = ingest.parse_one(Source.open(path), OPTS)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        ingest.parse_one(Source.open(path), OPTS)
        best = min(best, time.process_time() - t0)
    return best, info.format


def concatenated(files: list[Path], dest: Path) -> Path:
    with dest.open("wb") as out:
        for f in files:
            data = f.read_bytes()
            out.write(data if data.endswith(b"\n") else data + b"\n")
    return dest


def after_reading_cpu(job: Path) -> float:
    """CPU seconds of timeline, detection, the report's context and its HTML for one job."""
    bundle = ingest.load([str(job)], OPTS)
    t0 = time.process_time()
    bundle = pipeline.place(bundle, OPTS)
    analysis = detect.analyze(bundle, OPTS)
    rep.summary(bundle, analysis)
    rep.render_html(rep.build_context(bundle, analysis, OPTS))
    return time.process_time() - t0


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="gf-onepass-"))
    try:
        report(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(work: Path) -> None:
    tpls = templates(work, 12)
    synthetic = [t for t in tpls if t.name.startswith("synthetic-")]
    samples = [t for t in tpls if t not in synthetic]

    groups: dict[str, list[tuple[Path, float]]] = collections.defaultdict(list)
    job_files: dict[Path, list[tuple[str, float]]] = collections.defaultdict(list)
    for t in tpls:
        for f in sorted(p for p in t.rglob("*") if p.is_file() and p.name != "README.md"):
            cpu, fmt = parse_cpu(f)
            key = f"synthetic {f.name}" if t in synthetic else (fmt or "(not a log)")
            groups[key].append((f, cpu))
            job_files[t].append((key, cpu))

    one_pass: dict[str, float] = {}
    print(f"\nReading files one by one, and all of a format in one pass (polars {pl.__version__}, "
          f"POLARS_MAX_THREADS={os.environ.get('POLARS_MAX_THREADS', 'all')})")
    print(f"{'format':<24} {'files':>5} {'lines':>8} {'alone ms/file':>14} {'one pass ms/file':>17}")
    for key, fc in sorted(groups.items()):
        files = [f for f, _ in fc]
        if key.startswith("synthetic"):
            files = files[:SYNTHETIC_PER_PASS]
        if key == "(not a log)":   # sniffed and set aside: counted at its cost alone
            one_pass[key] = sum(c for _, c in fc) / len(fc)
            print(f"{key:<24} {len(fc):>5} {'':>8} {one_pass[key] * 1000:>14.1f} {one_pass[key] * 1000:>17.1f}")
            continue
        cat = concatenated(files, work / f"cat-{len(one_pass)}-{files[0].name}")
        cpu, fmt = parse_cpu(cat)
        one_pass[key] = cpu / len(files)
        lines = cat.read_bytes().count(b"\n")
        claimed = "" if key.startswith("synthetic") or fmt == key else f"  (read as {fmt})"
        print(f"{key:<24} {len(fc):>5} {lines:>8} {sum(c for _, c in fc) / len(fc) * 1000:>14.1f} "
              f"{one_pass[key] * 1000:>17.1f}{claimed}")

    print("\nA job's CPU now and with every file read at its format's one-pass cost (the other stages as now)")
    print(f"{'jobs':<22} {'reading ms':>11} {'one-pass reading ms':>20} {'other stages ms':>16} "
          f"{'job ms now':>11} {'job ms projected':>17} {'2-worker jobs/s projected':>26}")
    for name, group in (("samples (17)", samples), ("synthetic, ~2.7 MB (12)", synthetic), ("the bench's mix", tpls)):
        reading = sum(c for t in group for _, c in job_files[t]) / len(group)
        projected = sum(one_pass[k] for t in group for k, _ in job_files[t]) / len(group)
        other = sum(min(after_reading_cpu(t) for _ in range(2)) for t in group) / len(group)
        print(f"{name:<22} {reading * 1000:>11.1f} {projected * 1000:>20.1f} {other * 1000:>16.1f} "
              f"{(reading + other) * 1000:>11.1f} {(projected + other) * 1000:>17.1f} {2 / (projected + other):>26.1f}")
    print("\n(jobs/s projected: 2 workers that lose nothing to the scan's own work; the measured scans reach "
          "77-86 % of that.)")


if __name__ == "__main__":
    main()
