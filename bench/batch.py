"""Batch-scan benchmark: builds archives of N jobs of realistic size and times `scan` on them.

    python bench/batch.py                 # 250, 500 and 1000 jobs, all cores
    python bench/batch.py --jobs 1000 --workers 2
    python bench/batch.py --jobs 200 1000 --workers 2 --repeat 2   # best of two scans of each archive
    python bench/batch.py --stages        # where a job's CPU goes: per stage, in one process
    python bench/batch.py --regexes       # the regexes a job hands polars, and what compiling them again costs

Jobs are made from the recorded incidents in sample_logs/ and from seeded synthetic ones (a few MB
each: 1 Hz nvidia-smi CSV for several GPUs over hours, a training log with step markers, a kern.log).
Every job is a folder of its own files, never hard links, so no two jobs share cached pages: a
sample incident is copied byte for byte, and each synthetic job is generated from its own seed (its
own leak GPU, onset, rate and noise), so no two synthetic jobs hold the same bytes. `--synthetic`
sets the share: of every (samples + N) jobs, N are synthetic.
Prints one table: jobs, seconds, jobs/s, MB/s, peak memory of the main process and of the largest worker.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics import scan as sc  # noqa: E402
from forensics.options import Options  # noqa: E402


def synthetic_job(folder: Path, seed: int) -> None:
    """One job of a few MB: GPU CSV (1 Hz, 4 GPUs, ~2.5 h), a step log, a kern.log; some leak."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = datetime(2026, 11, 1) + timedelta(hours=seed)
    n = 9000
    leak_gpu = rng.randrange(4) if seed % 3 else None
    onset = rng.randrange(n // 4, n // 2)
    rate = rng.choice([2, 5, 20])  # MiB per second
    lines = ["timestamp, index, name, memory.total [MiB], memory.used [MiB]"]
    for i in range(n):
        ts = (t0 + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.") + f"{rng.randrange(1000):03d}"
        for g in range(4):
            used = 30000 + g * 1000 + rng.randrange(64)
            if g == leak_gpu and i >= onset:
                used += rate * (i - onset)
            lines.append(f"{ts}, {g}, NVIDIA H200, 143771 MiB, {min(used, 143771)} MiB")
    (folder / "gpu.csv").write_text("\n".join(lines) + "\n")
    steps = []
    for s in range(n // 3):
        ts = (t0 + timedelta(seconds=3 * s)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        alloc = 20000 + (rate * 3 * (3 * s - onset) if leak_gpu == 0 and 3 * s >= onset else 0) + rng.random()
        steps.append(f"{ts} INFO train: [step {s}] allocated: {alloc:.2f} MB, cached: {alloc + 4096:.2f} MB")
    (folder / "train.log").write_text("\n".join(steps) + "\n")
    kern = []
    for i in range(2000):
        ts = (t0 + timedelta(seconds=4 * i)).strftime("%b %d %H:%M:%S")
        kern.append(f"{ts} gpuhost kernel: [{4 * i + 100:>5}.{rng.randrange(10**6):06d}] eth0: link is up, 100 Gbps full duplex")
    if leak_gpu is not None and seed % 2:
        ts = (t0 + timedelta(seconds=n)).strftime("%b %d %H:%M:%S")
        kern.append(f"{ts} gpuhost kernel: [{n + 100:>5}.000001] Out of memory: Killed process 4242 (python3) "
                    "total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:690kB oom_score_adj:0")
    (folder / "kern.log").write_text("\n".join(kern) + "\n")


def build_archive(root: Path, jobs: int, templates: list[Path]) -> int:
    """`jobs` job folders, each of its own files (see the module's docstring); returns total bytes.
    A None template stands for a synthetic job, generated here from the job's number."""
    total = 0
    for j in range(jobs):
        tpl = templates[j % len(templates)]
        dest = root / f"2026-11-{1 + j % 28:02d}" / f"job-{j:05d}"
        if tpl is None:
            synthetic_job(dest, seed=j + 1)
            total += sum(f.stat().st_size for f in dest.iterdir())
            continue
        for f in tpl.rglob("*"):
            if f.is_file() and f.name != "README.md":
                target = dest / f.relative_to(tpl)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target)
                total += f.stat().st_size
    return total


def templates(work: Path, n_synthetic: int) -> list[Path]:
    """Synthetic job templates (for --stages, which runs over templates), then the sample incidents."""
    out = []
    for i in range(n_synthetic):
        d = work / "tpl" / f"synthetic-{i}"
        synthetic_job(d, seed=i + 1)
        out.append(d)
    return out + sample_incidents()


def sample_incidents() -> list[Path]:
    samples = ROOT / "sample_logs"
    if not samples.is_dir():
        return []
    return sorted(p for p in samples.iterdir() if p.is_dir() and (p / "README.md").exists())


def cpu_seconds() -> float:
    """CPU of this process and of its children that ended (a scan's workers end with it)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def peak_rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


class TreeMemory:
    """Samples the resident memory of every descendant process (getrusage's peak of the children is
    the largest one, not their sum): peak of one worker and of all."""

    def __init__(self, interval: float = 0.2):
        import threading

        self.interval, self.peak_one, self.peak_all, self.cpu = interval, 0, 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        me = os.getpid()
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(self.interval):
            kids = [rss for pid in self._descendants(me) if (rss := self._rss(pid, page)) is not None]
            if kids:
                self.peak_one = max(self.peak_one, max(kids))
                self.peak_all = max(self.peak_all, sum(kids) + (self._rss(me, page) or 0))
        # this thread's own CPU is the bench's, not the scan's: main() takes it out of the figure
        self.cpu = time.thread_time()

    @staticmethod
    def _descendants(pid: int) -> list[int]:
        """Every process under `pid`, through each thread's `children` list (walking all of /proc for
        parents cost this thread ~2 % of a scan's CPU)."""
        out, todo = [], [pid]
        while todo:
            p = todo.pop()
            try:
                tids = os.listdir(f"/proc/{p}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{p}/task/{tid}/children") as fh:
                        kids = [int(k) for k in fh.read().split()]
                except (OSError, ValueError):
                    continue
                out += kids
                todo += kids
        return out

    @staticmethod
    def _rss(pid: int, page: int) -> int | None:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                return int(fh.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            return None


def stage_table(tpls: list[Path], repeat: int = 2) -> None:
    """CPU per job by stage, in this process, over the templates (the last of `repeat` runs of each
    counted: the first pays imports and warms caches), with the polars queries each stage makes (eager calls and
    lazy collects) and
    the CPU spent inside them (the rest is Python: ours, polars' expression building, numpy, jinja)."""
    import json

    import polars as pl
    from polars.lazyframe import frame as lazy_frame

    from forensics import detect
    from forensics import ingest
    from forensics import pipeline
    from forensics import report as rep

    calls = {"n": 0, "cpu": 0.0, "depth": 0}
    # where every eager DataFrame call runs (polars 1.x, 2.x), and a lazy query's own collect: each a query
    collect, collect_lazy = lazy_frame.LazyFrame._collect_eager, lazy_frame.LazyFrame.collect

    def counting(real):
        def counted(self, *a, **k):
            if calls["depth"]:
                return real(self, *a, **k)
            calls["n"] += 1
            calls["depth"] += 1
            t0 = time.process_time()
            try:
                return real(self, *a, **k)
            finally:
                calls["cpu"] += time.process_time() - t0
                calls["depth"] -= 1
        return counted

    cpu: dict[str, float] = {}
    ncalls: dict[str, int] = {}
    in_calls: dict[str, float] = {}

    def stage(name, fn, *a):
        n0, c0, t0 = calls["n"], calls["cpu"], time.process_time()
        out = fn(*a)
        cpu[name] = cpu.get(name, 0.0) + time.process_time() - t0
        ncalls[name] = ncalls.get(name, 0) + calls["n"] - n0
        in_calls[name] = in_calls.get(name, 0.0) + calls["cpu"] - c0
        return out

    def write(html: str, summary: dict) -> None:
        (out / "r.html").write_text(html)
        (out / "s.json").write_text(json.dumps(summary, default=str))

    out = Path(tempfile.mkdtemp(prefix="gf-stages-"))
    lazy_frame.LazyFrame._collect_eager = counting(collect)
    lazy_frame.LazyFrame.collect = counting(collect_lazy)
    try:
        for r in range(repeat):
            cpu.clear()
            ncalls.clear()
            in_calls.clear()
            for t in tpls:
                opts = Options(tz="UTC")
                stage("fingerprint", sc.fingerprint, t)
                bundle = stage("ingest (read, sniff, parse, scan, check)", ingest.load, [str(t)], opts)
                bundle = stage("timeline (align, dedupe)", pipeline.place, bundle, opts)
                analysis = stage("detect", detect.analyze, bundle, opts)
                summary = stage("JSON summary", rep.summary, bundle, analysis)
                ctx = stage("report context", rep.build_context, bundle, analysis, opts)
                html = stage("report HTML", rep.render_html, ctx)
                stage("write", write, html, summary)
    finally:
        lazy_frame.LazyFrame._collect_eager, lazy_frame.LazyFrame.collect = collect, collect_lazy
        shutil.rmtree(out, ignore_errors=True)
    n, total = len(tpls), sum(cpu.values())
    print(f"\nCPU per job by stage, one process, {n} job templates (polars {pl.__version__}, "
          f"POLARS_MAX_THREADS={os.environ.get('POLARS_MAX_THREADS', 'all')})")
    print(f"{'stage':<42} {'ms/job':>7} {'share':>6} {'polars calls/job':>17} {'ms/job in them':>15}")
    for name in cpu:
        print(f"{name:<42} {cpu[name] / n * 1000:>7.1f} {cpu[name] / total:>6.0%} {ncalls[name] / n:>17.0f}"
              f" {in_calls[name] / n * 1000:>15.1f}")
    print(f"{'all':<42} {total / n * 1000:>7.1f} {1:>6.0%} {sum(ncalls.values()) / n:>17.0f}"
          f" {sum(in_calls.values()) / n * 1000:>15.1f}")


# polars keeps the regexes it compiled in a cache of this many per thread (least recently used goes)
POLARS_REGEX_CACHE = 32


def regex_table(tpls: list[Path], caches=(POLARS_REGEX_CACHE, 64, 128)) -> None:
    """The regexes the job templates hand polars (each string pattern given to a `str` method that takes
    one, in the order the expressions are built), the compiles a least-recently-used cache of each size
    in `caches` leaves per job, and their CPU: each distinct pattern's compile measured on a one-row frame
    (after other patterns pushed it out, less a use while it is cached). Building order stands for use
    order: an expression built once and used many times counts once."""
    import collections

    import polars as pl
    from polars.expr.string import ExprStringNameSpace

    uses: list[tuple[str, str]] = []
    recording = [False]

    def recorded(real):
        def wrapper(self, pattern, *a, **k):
            if recording[0] and isinstance(pattern, str) and not k.get("literal", False):
                f = sys._getframe(1)
                while f is not None and "/forensics/" not in f.f_code.co_filename:
                    f = f.f_back
                site = f"{f.f_code.co_filename.split('/forensics/')[1]}:{f.f_lineno}" if f else "?"
                uses.append((pattern, site))
            return real(self, pattern, *a, **k)
        return wrapper

    names = ["contains", "extract", "extract_groups", "extract_all", "replace", "replace_all", "count_matches", "find"]
    saved = {n: getattr(ExprStringNameSpace, n) for n in names}
    out = Path(tempfile.mkdtemp(prefix="gf-regexes-"))
    try:
        for n in names:
            setattr(ExprStringNameSpace, n, recorded(saved[n]))
        for rec in (False, True):   # the first pass imports and warms; the second is recorded
            recording[0] = rec
            for i, t in enumerate(tpls):
                sc.process_job(str(t), f"j{i}", str(out), Options(tz="UTC"), "all", "fp")
    finally:
        for n in names:
            setattr(ExprStringNameSpace, n, saved[n])
        shutil.rmtree(out, ignore_errors=True)
    frame = pl.DataFrame({"t": ["x"]})
    others = [f"^q{i}z$" for i in range(2 * max(caches))]

    def compile_cpu(pattern: str) -> float:
        try:
            frame.select(pl.col("t").str.contains(pattern))
        except Exception:  # noqa: BLE001 - a pattern that needs a column of its own type: not timed
            return 0.0
        best = float("inf")
        for _ in range(3):
            for o in others:
                frame.select(pl.col("t").str.contains(o))
            t0 = time.process_time()
            frame.select(pl.col("t").str.contains(pattern))
            cold = time.process_time() - t0
            t0 = time.process_time()
            frame.select(pl.col("t").str.contains(pattern))
            best = min(best, cold - (time.process_time() - t0))
        return max(best, 0.0)

    cost = {p: compile_cpu(p) for p in {p for p, _ in uses}}
    n = len(tpls)
    print(f"\nregexes handed to polars, {n} job templates: {len(uses) / n:.0f} uses a job, {len(cost)} distinct "
          f"patterns over all of them (polars {pl.__version__} keeps {POLARS_REGEX_CACHE} per thread)")
    for size in caches:
        lru: collections.OrderedDict = collections.OrderedDict()
        compiles, cpu, by_site = 0, 0.0, collections.Counter()
        for p, site in uses:
            if p in lru:
                lru.move_to_end(p)
                continue
            compiles, cpu = compiles + 1, cpu + cost[p]
            by_site[site] += cost[p]
            lru[p] = True
            if len(lru) > size:
                lru.popitem(last=False)
        print(f"a cache of {size:>3}: {compiles / n:5.1f} compiles a job, {cpu / n * 1000:5.1f} ms of CPU a job")
        if size == caches[0]:
            for site, c in by_site.most_common(8):
                print(f"    {c / n * 1000:5.2f} ms a job  {site}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="*", default=[250, 500, 1000])
    ap.add_argument("--workers", type=int, default=sc.usable_cpus())
    ap.add_argument("--synthetic", type=int, default=12,
                    help="synthetic jobs in each (sample incidents + N) jobs, each from its own seed")
    ap.add_argument("--repeat", type=int, default=1,
                    help="scans of each archive (each into a fresh output folder); the fastest is reported, as "
                         "this machine's speed drifts between runs")
    ap.add_argument("--keep", action="store_true", help="keep the archive folder")
    ap.add_argument("--stages", action="store_true",
                    help="instead of scanning: CPU per job by stage (and polars calls), in one process, over the "
                         "job templates")
    ap.add_argument("--regexes", action="store_true",
                    help="instead of scanning: the regexes the job templates hand polars, in one process, and the "
                         "CPU of compiling them again past polars' cache")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gf-batch-"))
    try:
        if args.stages:
            stage_table(templates(work, args.synthetic), max(2, args.repeat))
            return
        if args.regexes:
            regex_table(templates(work, args.synthetic))
            return
        # None: a synthetic job, generated for each job from its own seed
        tpls = [None] * args.synthetic + sample_incidents()
        rows = []
        for n in args.jobs:
            arch = work / f"archive-{n}"
            size = build_archive(arch, n, tpls)
            load = os.getloadavg()[0]   # other work on the machine, seen before the scans
            times, cpus, peak_one, peak_all = [], [], 0, 0
            for r in range(max(1, args.repeat)):
                out = work / f"out-{n}-{r}"   # a fresh folder: a rerun into the same one skips unchanged jobs
                cfg = sc.ScanConfig(archive=arch, out_dir=out, opts=Options(tz="UTC"), workers=args.workers)
                t, c = time.perf_counter(), cpu_seconds()
                with TreeMemory() as mem:
                    res = sc.run_scan(cfg)
                times.append(time.perf_counter() - t)
                cpus.append(cpu_seconds() - c - mem.cpu)
                peak_one, peak_all = max(peak_one, mem.peak_one), max(peak_all, mem.peak_all)
                shutil.rmtree(out, ignore_errors=True)
            dt = min(times)
            rows.append((n, dt, n / dt, size / dt / 1e6, size / n / 1e6, res.failed,
                         peak_one / 2**20, peak_all / 2**20, times, load, min(cpus) / n * 1000))
            shutil.rmtree(arch, ignore_errors=True)
        print(f"\nbatch scan, {args.workers} workers, every job distinct ({args.synthetic} synthetic in each "
              f"{len(tpls)}, the rest copies of the {len(tpls) - args.synthetic} sample incidents)"
              + (f", best of {args.repeat} scans" if args.repeat > 1 else ""))
        print(f"{'jobs':>6} {'MB/job':>7} {'seconds':>8} {'jobs/s':>7} {'MB/s':>7} {'failed':>6} "
              f"{'worker MB':>9} {'all MB':>7} {'load':>5} {'CPU ms/job':>10}" + ("  all runs (s)" if args.repeat > 1 else ""))
        for n, dt, jps, mbs, mbj, failed, one, total, times, load, cpu in rows:
            print(f"{n:>6} {mbj:>7.2f} {dt:>8.1f} {jps:>7.1f} {mbs:>7.1f} {failed:>6} {one:>9.0f} {total:>7.0f} {load:>5.2f}"
                  f" {cpu:>10.0f}"
                  + ("  " + " ".join(f"{x:.1f}" for x in times) if args.repeat > 1 else ""))
        print(f"peak memory of the main process: {peak_rss_mb(resource.RUSAGE_SELF):.0f} MB "
              "(worker MB: the largest worker; all MB: main process and workers together, sampled every 0.2 s; "
              "load: the 1-minute load average before the scans; CPU ms/job: the scan's processes, all of them, "
              "without the bench's memory sampler, the least of the runs)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
