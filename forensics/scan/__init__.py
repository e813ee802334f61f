"""Batch scans of job archives: one folder per job, each analyzed exactly as `report` would.

Outputs under OUT_DIR: `jobs/<job-id>/report.html`, `jobs/<job-id>/summary.json` (the job's JSON
summary, the same document `report --json` writes), `jobs/<job-id>/scan-state.json` (the job's row and
the fingerprint of its inputs and options, for reruns), `index.html` (one self-contained page),
`summary.csv` and `summary.parquet` (one row per job). Every file is written atomically (temp file +
rename), so an interrupted scan -- even `kill -9` -- leaves no half-written file; a rerun skips jobs whose
fingerprint is unchanged and redoes the rest.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import time
import itertools
from datetime import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import polars as pl

from forensics.report import write as outputs
from forensics import parsers
from forensics.errors import InputError, UsageError
from forensics.detect.findings import SEVERITY_RANK
from forensics.options import Options, unused_flags
from forensics.io import archives
from forensics.io.sources import SKIP_SUFFIXES, Source, discover, outside_note
from forensics.frames import csv_safe
from forensics.version import __version__

STATE_NAME = "scan-state.json"
SUMMARY_NAME = "summary.json"
VERDICT_RANK = {"leak": 4, "cache_growth": 2, "inconclusive": 1, "no_leak": 0}

SUMMARY_SCHEMA = {
    "job": pl.String, "path": pl.String, "status": pl.String, "verdict": pl.String,
    "severity": pl.String, "severity_rank": pl.Int64, "worst_finding": pl.String,
    "onset": pl.String, "rate_bytes_per_hour": pl.Float64, "rate_span_seconds": pl.Float64, "peak_bytes": pl.Int64,
    "oom_kills": pl.Int64, "gpu_ooms": pl.Int64, "xids": pl.Int64, "findings": pl.Int64,
    "inputs": pl.Int64, "input_errors": pl.Int64, "skipped_lines": pl.Int64, "error": pl.String,
    "report": pl.String, "fingerprint": pl.String, "seconds": pl.Float64,
}


@dataclass
class ScanConfig:
    archive: Path
    out_dir: Path
    depth: int | None = None              # jobs are the folders exactly this deep below the archive
    job_pattern: str | None = None        # regex on the folder name that marks a job
    reports: str = "all"                  # "all", "none" or a --fail-on level (report.verdict.reaches): per-job HTML for these
    workers: int = field(default_factory=lambda: usable_cpus())
    opts: Options = field(default_factory=Options)
    force: bool = False
    fail_on: str = "never"
    retry_failed: bool = False            # redo the jobs that failed last time (else a rerun keeps their row)
    max_worker_bytes: int | None = None   # address space of each worker process (RLIMIT_AS); None: no limit
    follow_links_out: bool = False        # read what links lead to outside the archive (else a note per link)

    def options_key(self) -> str:
        """Every option that shapes what a job's folder holds, for the rerun fingerprint: the Options
        (zones, year, boot time, clock anchors), which reports are written and --fail-on (#29: a rerun
        with other options is redone, so a job's files always come from the options of the last run)."""
        facts = dataclasses.asdict(self.opts)
        facts.update(reports=self.reports, fail_on=self.fail_on)
        return json.dumps(facts, sort_keys=True, default=str)


# -- jobs ----------------------------------------------------------------------------------------

def _is_log_name(name: str) -> bool:
    return not name.startswith(".") and not name.lower().endswith(SKIP_SUFFIXES)


def _is_log(path: Path) -> bool:
    """A file some parser claims, or one that cannot be read (its failure is then listed with its job);
    only a readable file nobody recognizes (a script, notes) is not a log."""
    try:
        return parsers.claim_file(Source.open(path, str(path)))[0] is not None
    except InputError:
        return True


def find_jobs(archive: Path, depth: int | None = None, job_pattern: str | None = None,
              not_jobs: list[Path] | None = None, outside: list[tuple[str, str]] | None = None) -> list[Path]:
    """The job folders under `archive`.

    Default: the top-most folders that directly hold a log (their subfolders belong to them); a folder
    whose files are all readable and recognized by no parser (code, notes) is not a job and is added to
    `not_jobs` (its subfolders are still searched); a `.tar.gz`/`.zip` bundle in a folder that is no job
    is a job of its own; the archive itself is a job only when it holds a log
    and no job folder below. `depth` picks folders at exactly that depth; `job_pattern` picks folders
    whose name matches (top-most match wins): those are jobs whatever they hold. With `outside` given,
    links that lead out of the archive are not followed (not even to sniff a file): each is added to it
    as (path, where it leads)."""
    if not archive.is_dir():
        raise UsageError(f"{archive}: not a folder, give the folder that holds one folder per job")
    rx = re.compile(job_pattern) if job_pattern else None
    fence = archive.resolve()
    jobs: list[Path] = []
    seen: set[tuple[int, int]] = set()

    # a loop, not recursion: an archive may be thousands of folders deep
    stack: list[tuple[Path, int]] = [(archive, 0)]
    while stack:
        d, level = stack.pop()
        try:
            st = d.stat()
            key = (st.st_dev, st.st_ino)
            if key in seen:  # link loop, or a folder reached again through a link
                continue
            seen.add(key)
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            if level > 0:
                jobs.append(d)  # unreadable: still a job, so its failure is listed
            continue
        if outside is not None:
            entries = [e for e in entries if not _leads_out(e, fence, outside)]
        subdirs = [Path(e.path) for e in entries if _safe_is_dir(e) and not e.name.startswith(".")]
        files = [Path(e.path) for e in entries if not _safe_is_dir(e) and _is_log_name(e.name)]
        # a .tar.gz / .zip beside no other log is a job of its own (a job bundle); beside logs it is
        # part of their job
        bundles = [f for f in files if archives.kind_of(f.name)]
        files = [f for f in files if not archives.kind_of(f.name)]
        if depth is not None:
            if level == depth:
                jobs.append(d)
                continue
        elif rx is not None:
            if level > 0 and rx.search(d.name):
                jobs.append(d)
                continue
        elif level > 0 and files:
            if any(_is_log(f) for f in files):
                jobs.append(d)
                continue
            if not_jobs is not None:
                not_jobs.append(d)
        if depth is None and rx is None:
            jobs.extend(bundles)
        stack.extend((s, level + 1) for s in reversed(subdirs))
    if not jobs and depth is None and rx is None:
        try:
            if any(e.is_file() and _is_log_name(e.name) and not (outside is not None and _leads_out(e, fence, []))
                   and _is_log(Path(e.path)) for e in os.scandir(archive)):
                jobs.append(archive)
        except OSError:
            pass
    return jobs


def _leads_out(e: os.DirEntry, fence: Path, outside: list[tuple[str, str]]) -> bool:
    """Whether `e` is a link that leads out of `fence` (then added to `outside`)."""
    try:
        if not e.is_symlink():
            return False
    except OSError:
        return False
    real = Path(os.path.realpath(e.path))
    if real.is_relative_to(fence):
        return False
    outside.append((e.path, str(real)))
    return True


def _safe_is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir()
    except OSError:
        return False


def job_id(archive: Path, job: Path) -> str:
    rel = os.path.relpath(job, archive)
    ident = "root" if rel == "." else rel.replace(os.sep, "__")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", ident)
    # a name that had to be changed or cut gets a hash of the original, so two jobs never share an
    # output folder (jöb and jäb, two long names alike at the start); and no id is `..` or hidden
    # ("a/b" and a folder named "a__b" both read a__b: the one whose name holds "__" gets the hash)
    if safe != ident or len(safe) > 180 or safe.startswith(".") or "__" in rel:
        digest = hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=5).hexdigest()
        safe = f"{safe[:160].lstrip('.') or 'job'}-{digest}"
    return safe


def fingerprint(job: Path, options_key: str = "", opts: Options | None = None) -> str:
    """A fingerprint of every file the job's analysis reads (names and bytes: the files `discover`
    finds, through linked folders too), of the options that shape its results (`ScanConfig.options_key`)
    and of this tool's version: a rerun with any of them changed is redone."""
    h = hashlib.blake2b(digest_size=16)
    h.update(__version__.encode() + b"\0" + options_key.encode() + b"\0")
    if job.is_file():   # a job bundle (.tar.gz, .zip): its bytes
        _hash_file(h, job, job.name)
        return h.hexdigest()
    found = discover([str(job)], within=opts.read_within if opts else None, skip=opts.never_read if opts else ())
    for p, shown in found.files:
        _hash_file(h, p, os.path.relpath(shown, job))
    for problem in found.problems:
        h.update(str(problem).encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def _hash_file(h, p: Path, rel: str) -> None:
    h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
    try:
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except OSError as e:
        h.update(f"unreadable:{e.errno}".encode())


# -- one job (runs in a worker process) -----------------------------------------------------------

def _want_report(reports: str, row: dict) -> bool:
    from forensics.report.verdict import reaches

    return reports == "all" or reaches(reports, row.get("verdict"), row.get("kinds") or (), [row.get("severity")])


def process_job(job: str, jid: str, out_dir: str, opts: Options, reports: str, fp: str | None,
                options_key: str = "") -> dict:
    """Analyze one job and write its outputs; returns its summary row. Never raises. `fp`: the job's
    fingerprint, computed here (from `options_key`) when None."""
    from forensics import pipeline
    from forensics import report as rep

    if fp is None:
        fp = fingerprint(Path(job), options_key, opts)
    started = time.perf_counter()
    job_dir = Path(out_dir) / "jobs" / jid
    row = {k: None for k in SUMMARY_SCHEMA}
    row.update(job=jid, path=job, fingerprint=fp)
    try:
        bundle, analysis = pipeline.run([job], opts)
        summary = rep.summary(bundle, analysis)
        row.update(_row_from_summary(summary))
        row["peak_bytes"] = _peak_bytes(bundle)
        row["unused_options"] = [flag for flag, _ in unused_flags(opts, bundle.inputs)]   # (not a column)
        row["status"] = "ok" if any(i.format for i in bundle.inputs) else "failed"
        if row["status"] == "failed":
            reasons = [i.error for i in bundle.inputs if i.error] or [
                f"{job}: nothing to analyze, no file in the job was recognized as a log, "
                f"run `gpu-forensics sniff {job}` to see what each file was taken for"]
            row["error"] = reasons[0] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
        if _want_report(reports, row) and row["status"] == "ok":
            ctx = rep.build_context(bundle, analysis, opts)
            outputs.replace_file(job_dir / "report.html", rep.render_html(ctx))
            row["report"] = f"jobs/{jid}/report.html"
        row["sparkline"] = _sparkline_points(analysis)
    except Exception as e:  # one bad job never stops the scan
        row.update(status="failed", error=f"{job}: not analyzed, {type(e).__name__}: {e}, "
                   f"run `gpu-forensics report {job}` to see the details")
        summary = None
    row["seconds"] = round(time.perf_counter() - started, 3)
    try:
        if summary is not None:
            outputs.replace_file(job_dir / SUMMARY_NAME, rep.summary_text(summary))
        outputs.replace_file(job_dir / STATE_NAME, json.dumps({"fingerprint": fp, "row": row}, default=str))
    except OSError as e:   # the output folder went away or filled up: this job's row says so
        row.update(status="failed", error=f"{job_dir}: cannot write the job's outputs, {e.strerror or e}, "
                   "check free space and permissions of the output folder")
    return row


def _row_from_summary(summary: dict) -> dict:
    findings = summary["findings"]
    worst = max(findings, key=lambda f: SEVERITY_RANK.get(f["severity"], 0)) if findings else None
    leaks = [f for f in findings if f["kind"] == "leak"]
    lead = max(leaks, key=lambda f: f.get("rate_bytes_per_hour") or 0) if leaks else None
    kinds = [f["kind"] for f in findings]
    return {
        "verdict": summary["verdict"],
        "severity": worst["severity"] if worst else None,
        "severity_rank": SEVERITY_RANK.get(worst["severity"], 0) if worst else 0,
        "worst_finding": worst["summary"] if worst else None,
        "onset": (lead.get("start") or (f"index {lead['start_index']}" if lead.get("start_index") is not None else None)) if lead else None,
        "rate_bytes_per_hour": lead.get("rate_bytes_per_hour") if lead else None,
        "rate_span_seconds": _span_seconds(lead) if lead else None,   # picks the rate's unit, as the report does
        "oom_kills": kinds.count("oom_kill"),
        "gpu_ooms": kinds.count("gpu_oom"),
        "xids": kinds.count("xid"),
        "findings": len(findings),
        "kinds": sorted(set(kinds)),   # for --fail-on (not a column of the tables)
        "inputs": len(summary["inputs"]),
        "input_errors": sum(1 for i in summary["inputs"] if i.get("error")),
        "skipped_lines": sum(i.get("skipped") or 0 for i in summary["inputs"]),
    }


def _span_seconds(finding: dict) -> float | None:
    try:
        a, b = (datetime.fromisoformat(str(finding[k]).replace("Z", "+00:00")) for k in ("start", "end"))
    except (KeyError, TypeError, ValueError):
        return None
    return (b - a).total_seconds()


def _peak_bytes(bundle) -> int | None:
    """The highest GPU memory reading: nvidia-smi's per-GPU use when logged, else the framework's."""
    order = ("memory.used", "process.used", "reserved", "allocated")
    # one query for the four series: no copy of their rows, no grouping
    peaks = bundle.samples.select(pl.col("bytes").filter(pl.col("series") == s).max().alias(s) for s in order).row(0)
    return next((int(p) for p in peaks if p is not None), None)


def _sparkline_points(analysis, n: int = 48) -> list[float]:
    """The memory curve of the job's most telling series, reduced to n values for a sparkline."""
    best = None
    for s in getattr(analysis, "series", []) or []:
        if not getattr(s, "n", 0):   # no readings: no points (counted first: points are made on use)
            continue
        rank = 2 if getattr(s, "classification", "") in ("linear_growth", "staircase") else 1
        if best is None or rank > best[0]:
            best = (rank, s)
    if best is None:
        return []
    ys = [float(y) for y in best[1].point_bytes if y is not None]
    if len(ys) <= n:
        return ys
    step = len(ys) / n
    return [max(ys[int(i * step): max(int((i + 1) * step), int(i * step) + 1)]) for i in range(n)]


# -- the scan --------------------------------------------------------------------------------------

@dataclass
class ScanResult:
    rows: list[dict]
    reused: int
    analyzed: int
    failed: int
    seconds: float
    not_jobs: list[str] = field(default_factory=list)   # one line per folder not taken as a job, and why


EXIT_SIGINT, EXIT_SIGTERM = 130, 143   # 128 + the signal, as a shell reports it


class Terminated(BaseException):
    """SIGTERM reached the scan (as `timeout` or a batch system sends it); like KeyboardInterrupt, not an
    Exception, so that no `except Exception` of a job takes it for that job's failure."""


class Interrupted(Exception):
    """The scan was stopped (Ctrl-C, SIGTERM) after `done` of `total` jobs; their results were written."""

    def __init__(self, exit_code: int, done: int, total: int):
        self.exit_code, self.done, self.total = exit_code, done, total
        super().__init__(f"interrupted after {done} of {total} jobs, {total - done} left: the index and "
                         "summary tables list the jobs done; run the same command again to do the rest "
                         "(the jobs done are reused)")


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM stops the scan the way Ctrl-C does (the results so far are written), in the main thread."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated()

    prev = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, prev)


def _load_state(out_dir: Path, jid: str) -> dict | None:
    p = out_dir / "jobs" / jid / STATE_NAME
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _clean_stale_temps(out_dir: Path) -> None:
    """Temp files of an interrupted scan (they were never renamed into place)."""
    if not out_dir.exists():
        return
    for p in out_dir.rglob(".*.tmp-*"):
        try:
            p.unlink()
        except OSError:
            pass


def _check_out_dir(cfg: ScanConfig) -> None:
    """The output folder: an existing folder (a link to one is followed), or a new one in an existing
    folder; anything else is a one-line usage error, as for every command's outputs."""
    if not cfg.archive.is_dir():
        raise UsageError(f"{cfg.archive}: not a folder, give the folder that holds one folder per job")
    arch, out = cfg.archive.resolve(), cfg.out_dir.resolve()
    if out == arch:
        raise UsageError(f"-o {cfg.out_dir}: the output folder is the archive itself, choose another folder")
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {cfg.out_dir}: cannot write there, it exists and is not a folder, "
                         "give a new name or an existing folder for the scan's reports")
    if not out.exists():
        if not out.parent.is_dir():
            raise UsageError(f"-o {cfg.out_dir}: cannot write there, the folder {out.parent} does not exist, "
                             "create it first or give a path in an existing folder")
        try:
            out.mkdir()
        except OSError as e:
            raise UsageError(f"-o {cfg.out_dir}: cannot create the folder, {e.strerror or e}, "
                             "check the permissions or give another path")


def run_scan(cfg: ScanConfig, on_progress: Callable[[int, int, dict | None], None] | None = None,
             executor: str = "process") -> ScanResult:
    """Scan every job of the archive; returns the rows (one per job) in job order."""
    _check_out_dir(cfg)
    _clean_stale_temps(cfg.out_dir)
    started = time.perf_counter()
    skipped_dirs: list[Path] = []
    outside: list[tuple[str, str]] | None = None if cfg.follow_links_out else []
    jobs = find_jobs(cfg.archive, cfg.depth, cfg.job_pattern, skipped_dirs, outside)
    out_resolved = cfg.out_dir.resolve()
    # the scan's outputs are never a job's inputs (-o inside the archive), and an uploaded archive's
    # links do not make a job read what lies outside it unless asked
    cfg = dataclasses.replace(cfg, opts=dataclasses.replace(
        cfg.opts, never_read=(str(out_resolved),),
        read_within=None if cfg.follow_links_out else str(cfg.archive.resolve())))
    # compared by path parts: -o ar must not take arch/job1 for a folder inside ar
    jobs = [j for j in jobs if not j.resolve().is_relative_to(out_resolved)]
    ids = [job_id(cfg.archive, j) for j in jobs]
    rows: dict[str, dict] = {}
    todo: list[tuple[Path, str, str | None]] = []
    key = cfg.options_key()
    for job, jid in zip(jobs, ids):
        state = None if cfg.force else _load_state(cfg.out_dir, jid)
        if not state:
            # nothing to compare with: the worker fingerprints the job (in parallel, and the pool
            # starts at once instead of after hashing the whole archive here)
            todo.append((job, jid, None))
            continue
        fp = fingerprint(job, key, cfg.opts)
        prev = state.get("row", {})
        # an ok row without `kinds` was written before --fail-on read them: redo it
        if state.get("fingerprint") == fp and ((prev.get("status") == "failed" and not cfg.retry_failed)
                                               or (prev.get("status") == "ok" and "kinds" in prev)):
            row = dict(state["row"])
            row["reused"] = True
            rows[jid] = row
        else:
            todo.append((job, jid, fp))
    done = len(rows)
    total = len(jobs)
    if on_progress:
        on_progress(done, total, None)
    interrupted = None
    try:
        with _sigterm_as_interrupt():
            for row in _execute(cfg, todo, executor):
                rows[row["job"]] = row
                done += 1
                if on_progress:
                    on_progress(done, total, row)
    except (KeyboardInterrupt, Terminated) as e:
        # the jobs done so far are kept: the index and tables list them, and a rerun reuses them
        interrupted = Interrupted(EXIT_SIGTERM if isinstance(e, Terminated) else EXIT_SIGINT, done, total)
    ordered = [rows[j] for j in ids if j in rows]
    try:
        write_outputs(cfg.out_dir, ordered)
    except OSError as e:
        raise UsageError(f"-o {cfg.out_dir}: cannot write the index and summary tables, {e.strerror or e}, "
                         "check free space and permissions of the output folder")
    if interrupted is not None:
        raise interrupted
    notes = [f"{d}: not a job, none of its files is a log this tool reads, name it with --job-pattern or "
             "--depth to scan it anyway" for d in skipped_dirs]
    # (a link inside a job folder is said by that job; these are the ones above any job)
    notes += [outside_note(p, target) for p, target in outside or () if not any(Path(p).parent == j for j in jobs)]
    return ScanResult(rows=ordered, reused=total - len(todo), analyzed=len(todo),
                      failed=sum(1 for r in ordered if r["status"] == "failed"),
                      seconds=time.perf_counter() - started, not_jobs=notes)


def _execute(cfg: ScanConfig, todo: list[tuple[Path, str, str | None]], executor: str) -> Iterator[dict]:
    key = cfg.options_key()
    args = [(str(job), jid, str(cfg.out_dir), cfg.opts, cfg.reports, fp, key) for job, jid, fp in todo]
    if not args:
        return
    if executor == "dask":
        yield from _execute_dask(args)
        return
    if cfg.workers <= 1 or len(args) == 1:
        for a in args:
            yield process_job(*a)
        return
    yield from _run_pool(cfg.workers, args, cfg.max_worker_bytes)


def _run_pool(workers: int, args: list[tuple], max_bytes: int | None) -> Iterator[dict]:
    """The jobs on `workers` processes, one job at a time each. A worker that dies (a signal, the
    memory limit) fails only its own job, whose row says why; a new worker takes its place. The workers
    die with this process (a kill of the scan leaves none behind) and are stopped when it stops."""
    import multiprocessing as mp
    from multiprocessing.connection import wait as mp_wait

    # spawn, not fork: polars' thread pool does not survive a fork; and a spawned worker's parent is
    # this process, so it can ask to die with it
    ctx = mp.get_context("spawn")
    todo = iter(args)
    idle: list = []
    busy: dict = {}      # connection -> (process, the job's args)
    try:
        with _worker_env(workers):
            for _ in range(min(workers, len(args))):
                idle.append(_start_worker(ctx, max_bytes))
        while True:
            while idle:
                a = next(todo, None)
                if a is None:
                    break
                proc, conn = idle.pop()
                try:
                    conn.send(a)
                except OSError:   # it died idle: a new one takes the job
                    proc.join()
                    with _worker_env(workers):
                        idle.append(_start_worker(ctx, max_bytes))
                    todo = itertools.chain([a], todo)
                    continue
                busy[conn] = (proc, a)
            if not busy:
                return
            for conn in mp_wait(list(busy)):
                proc, a = busy.pop(conn)
                try:
                    yield conn.recv()
                    idle.append((proc, conn))
                except (EOFError, OSError):
                    proc.join()
                    conn.close()
                    yield _dead_worker_row(a, proc.exitcode, max_bytes)
                    with _worker_env(workers):
                        idle.append(_start_worker(ctx, max_bytes))
    finally:   # the scan ends or is interrupted: no worker outlives it
        procs = [p for p, _ in idle] + [p for p, _ in busy.values()]
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.join()


def _start_worker(ctx, max_bytes: int | None):
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_worker_main, args=(theirs, max_bytes), daemon=True)
    proc.start()
    theirs.close()
    return proc, mine


def _worker_main(conn, max_bytes: int | None) -> None:
    """A scan worker: jobs in, rows out, until the pipe closes."""
    import signal

    # Ctrl-C reaches the whole process group: the scan decides what to do, not each worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    if max_bytes:
        import resource

        # (a limit the scan itself runs under, `ulimit -v`, cannot be raised: the lower one holds)
        resource.setrlimit(resource.RLIMIT_AS, (min(max_bytes, _hard_address_limit() or max_bytes),) * 2)
    # the analysis' modules imported once, before the first job: every job of this worker finds them
    # loaded, and the first job's `seconds` is its own work, not the imports
    from forensics import pipeline, report  # noqa: F401
    while True:
        try:
            a = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(process_job(*a))


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the scan's process ends, however it ends (SIGKILL too)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)    # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):  # not Linux: the scan's finally still stops its workers
        pass


def _dead_worker_row(args: tuple, exitcode: int | None, max_bytes: int | None) -> dict:
    """The failed row of a job whose worker died: which signal, and what to do about it."""
    import signal

    job = args[0]
    if exitcode is not None and exitcode < 0:
        try:
            how = f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exited with status {exitcode}"
    hint = (f"it may have reached the memory limit of {max_bytes / 2**30:.1f} GiB per worker "
            "(--max-worker-memory raises it); " if max_bytes else "")
    row = {k: None for k in SUMMARY_SCHEMA}
    fp = args[5] or fingerprint(Path(job), args[6])
    row.update(job=args[1], path=job, status="failed", fingerprint=fp,
               error=f"{job}: not analyzed, its worker process died ({how}), {hint}"
                     f"run `gpu-forensics report {job}` alone to see the details; a rerun skips it "
                     "unless given --retry-failed")
    try:   # the worker could not write the job's state: written here, so a rerun knows the job
        outputs.replace_file(Path(args[2]) / "jobs" / args[1] / STATE_NAME,
                             json.dumps({"fingerprint": fp, "row": row}, default=str))
    except OSError:
        pass   # the index still lists the job; a rerun then tries it again
    return row


def usable_cpus() -> int:
    """The CPUs this process may run on (taskset, cgroup cpusets), not all the machine has."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def default_worker_bytes(workers: int) -> int | None:
    """The machine's memory shared out among the workers, at least 8 GiB each (it bounds address space,
    and polars reserves far more than it uses; a job that fits the machine alone should not fail only
    because others run beside it); None where it cannot be told."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    share = max(8 << 30, total // max(1, workers))
    return min(share, _hard_address_limit() or share)   # (what a failed job's row names as its limit)


def _hard_address_limit() -> int | None:
    """The address-space limit this process runs under (`ulimit -v`), which no worker can raise; None: none."""
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    except (ImportError, OSError, ValueError):   # not POSIX
        return None
    return None if hard == resource.RLIM_INFINITY else hard


@contextlib.contextmanager
def _worker_env(workers: int):
    """Polars' threads per worker: the usable cores shared out (N workers x all-cores threads only contend).
    Polars reads POLARS_MAX_THREADS when it is imported, so it is put in the environment the worker
    processes start with; a value the user set is kept."""
    key = "POLARS_MAX_THREADS"
    prev = os.environ.get(key)
    if prev is None:
        os.environ[key] = str(max(1, usable_cpus() // max(1, workers)))
    try:
        yield
    finally:
        if prev is None:
            os.environ.pop(key, None)


def _failed_row(args: tuple, what: str, e: Exception) -> dict:
    """The row of a job whose worker died: named by its folder, so the failure says which job it was."""
    job, jid = args[0], args[1]
    row = {k: None for k in SUMMARY_SCHEMA}
    row.update(job=jid, path=job, status="failed",
               error=f"{job}: not analyzed, {what} ({type(e).__name__}: {e}), "
                     f"run `gpu-forensics report {job}` alone to see whether it needs more memory")
    return row


def _execute_dask(args: list[tuple]) -> Iterator[dict]:
    """Run the jobs on the current Dask client (distributed engine); the archive and output folder
    must be on a path every worker sees."""
    try:
        from dask.distributed import as_completed, get_client
    except ImportError:
        raise UsageError("--engine dask needs the optional extra: pip install 'gpu-forensics[dask]'")
    try:
        client = get_client()
    except ValueError:
        raise UsageError("--engine dask: no Dask client; pass --scheduler ADDRESS or start a cluster first")
    futures = {client.submit(process_job, *a, pure=False): a for a in args}
    for fut in as_completed(futures):
        try:
            yield fut.result()
        except Exception as e:
            yield _failed_row(futures[fut], "its Dask task failed", e)


# -- outputs ---------------------------------------------------------------------------------------

def sort_rows(rows: Iterable[dict]) -> list[dict]:
    """Most severe first: failures, then by severity, verdict, rate."""
    def key(r):
        return (
            -(r.get("severity_rank") or 0),
            -VERDICT_RANK.get(r.get("verdict") or "", 0),
            -(r.get("rate_bytes_per_hour") or 0.0),
            r.get("job") or "",
        )
    return sorted(rows, key=key)


def summary_frame(rows: list[dict]) -> pl.DataFrame:
    data = {k: [r.get(k) for r in rows] for k in SUMMARY_SCHEMA}
    return pl.DataFrame(data, schema=SUMMARY_SCHEMA)


def write_outputs(out_dir: Path, rows: list[dict]) -> None:
    ordered = sort_rows(rows)
    df = summary_frame(ordered)
    outputs.replace_file(out_dir / "summary.csv", csv_safe(df).write_csv)   # (the parquet keeps the values)
    outputs.replace_file(out_dir / "summary.parquet", df.write_parquet)
    outputs.replace_file(out_dir / "index.html", render_index(ordered))


def _spark_svg(values: list[float], w: int = 120, h: int = 24) -> str:
    """A tiny inline SVG polyline (numbers only, so nothing to escape)."""
    if len(values) < 2:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    pts = " ".join(f"{i * (w - 2) / (len(values) - 1) + 1:.1f},{h - 1 - (v - lo) / span * (h - 2):.1f}"
                   for i, v in enumerate(values))
    return (f'<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" aria-hidden="true">'
            f'<polyline fill="none" stroke="currentColor" stroke-width="1.2" points="{pts}"/></svg>')


def render_index(rows: list[dict]) -> str:
    from markupsafe import Markup

    from forensics.report.formatting import instant, rate_text, verdict_words
    from forensics.units import human

    view = []
    for r in rows:
        v = dict(r)
        v["spark_svg"] = Markup(_spark_svg(r.get("sparkline") or []))
        v["rate_text"] = rate_text(r["rate_bytes_per_hour"], r.get("rate_span_seconds")) if r.get("rate_bytes_per_hour") else ""
        v["peak_text"] = human(r["peak_bytes"]) if r.get("peak_bytes") else ""
        v["onset_text"] = instant(r["onset"]) if r.get("onset") else ""
        v["verdict_text"] = verdict_words(r["verdict"]) if r.get("verdict") else "—"
        view.append(v)
    counts: dict[str, int] = {}
    for r in rows:
        key = verdict_words(r.get("verdict") if r.get("status") == "ok" else "failed")
        counts[key] = counts.get(key, 0) + 1
    from forensics.report.html import environment

    return environment().get_template("scan_index.html.j2").render(
        rows=view, counts=counts, version=__version__, total=len(rows))
