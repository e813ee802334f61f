"""Command line. Thin: parses options, calls the pipeline, turns errors into messages and exit codes.

Exit codes: 0 = done and no finding at or above --fail-on; 1 = findings at or above --fail-on;
2 = usage error, or no input could be read at all.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from . import __version__
from .errors import ForensicsError, UsageError
from .options import Options, check_zone

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Forensics of GPU memory leaks: read a job's logs, find where memory began to grow and why, "
    "write one self-contained HTML incident report.",
)
err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class FailOn(str, Enum):
    leak = "leak"
    oom = "oom"
    any = "any"
    never = "never"


def _parse_time(value: str | None, flag: str) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{flag} {value}: not an ISO-8601 time, write e.g. 2026-11-30T03:04:05Z or 2026-11-30T04:04:05+01:00")
    if t.tzinfo is None:
        raise UsageError(f"{flag} {value}: no zone given, add one (e.g. Z for UTC or +01:00)")
    return t.astimezone(timezone.utc)


def build_options(tz: list[str] | None, year: int | None, boot_time: str | None, start: str | None,
                  end: str | None = None, interval: float | None = None) -> Options:
    opts = Options()
    for item in tz or []:
        if "=" in item:
            pattern, zone = item.rsplit("=", 1)
            opts.tz_overrides[pattern] = check_zone(zone)
        else:
            opts.tz = check_zone(item)
            opts.tz_from_user = True
    if year is not None and not (1970 <= year <= 2200):
        raise UsageError(f"--year {year}: not a plausible year, give the four-digit year of the syslog lines")
    opts.year = year
    opts.boot_time = _parse_time(boot_time, "--boot-time")
    opts.start = _parse_time(start, "--start")
    opts.end = _parse_time(end, "--end")
    if interval is not None and not (0 < interval < 86400):
        raise UsageError(f"--interval {interval}: not a sampling interval, give seconds between samples (e.g. 1 for nvidia-smi -l 1)")
    opts.interval = interval
    return opts


def should_fail(analysis, fail_on: FailOn) -> bool:
    kinds = {f.kind for f in analysis.findings}
    if fail_on is FailOn.never:
        return False
    if fail_on is FailOn.oom:
        return bool(kinds & {"oom_kill", "gpu_oom"})
    if fail_on is FailOn.leak:
        return analysis.verdict == "leak" or bool(kinds & {"leak", "oom_kill", "gpu_oom"})
    return any(f.severity in ("warning", "critical") for f in analysis.findings)


def _progress():
    """A per-file progress callback on stderr when it is a terminal, else nothing."""
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    prog = Progress(SpinnerColumn(), TextColumn("reading {task.description}"), TimeElapsedColumn(), console=err, transient=True)
    task = prog.add_task("", total=None)
    return prog, (lambda path: prog.update(task, description=path))


def _print_problems(bundle) -> None:
    for msg in bundle.problems:
        err.print(msg, markup=False)


def _print_summary(bundle, analysis) -> None:
    from .units import human

    err.print(f"verdict: [bold]{analysis.verdict}[/bold] — {analysis.verdict_reason or ''}", markup=True)
    for f in analysis.findings[:20]:
        err.print(f"  {f.severity:8} {f.kind:17} {f.summary}", markup=False)
    if len(analysis.findings) > 20:
        err.print(f"  … and {len(analysis.findings) - 20} more findings (see the report)", markup=False)
    read = sum(1 for i in bundle.inputs if i.format and not i.error)
    skipped_files = sum(1 for i in bundle.inputs if not i.format and not i.error)
    failed = sum(1 for i in bundle.inputs if i.error)
    err.print(f"inputs: {read} read, {skipped_files} not recognized, {failed} unreadable; "
              f"{sum(i.skipped for i in bundle.inputs)} lines skipped", markup=False)
    del human


def _write(dest: str, text: str) -> None:
    from .report import write_atomic

    if dest == "-":
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        try:
            write_atomic(Path(dest), text)
        except OSError as e:  # a missing folder, a full disk: a message, not a traceback
            raise UsageError(f"{dest}: cannot write the output, {e.strerror or e}, "
                             "check that its folder exists and is writable")


# The options that `report`, `timeline` and `scan` share, each written once
TzOption = Annotated[Optional[list[str]], typer.Option(
    "--tz", help="Zone of clocks without one (IANA name), or FILE=ZONE for one file (glob allowed). Repeatable.")]
BootTimeOption = Annotated[Optional[str], typer.Option(
    "--boot-time", help="Boot time (ISO-8601 with zone) for dmesg uptime stamps.")]
YearOption = Annotated[Optional[int], typer.Option(
    "--year", help="Year of the last line of syslog files that carry none (earlier lines walk back across New Year); "
                   "default: the file's mtime.")]
StartOption = Annotated[Optional[str], typer.Option(
    "--start", help="Clock time (ISO-8601 with zone) of the first sample of untimed logs (with --interval).")]
EndOption = Annotated[Optional[str], typer.Option(
    "--end", help="Clock time (ISO-8601 with zone) of the last sample of untimed logs (with --interval).")]
IntervalOption = Annotated[Optional[float], typer.Option(
    "--interval", help="Seconds between samples of untimed logs (e.g. 1 for nvidia-smi -l 1).")]


@app.command()
def report(
    paths: Annotated[list[str], typer.Argument(help="Log files or folders (read recursively).")],
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="HTML report file (default report.html; '' for none).")] = "report.html",
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the JSON summary to FILE, or - for stdout.")] = None,
    md_out: Annotated[Optional[str], typer.Option("--md", help="Write the Markdown summary to FILE, or - for stdout.")] = None,
    tz: TzOption = None,
    boot_time: BootTimeOption = None,
    year: YearOption = None,
    start: StartOption = None,
    end: EndOption = None,
    interval: IntervalOption = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when findings reach this level.")] = FailOn.never,
) -> None:
    """Analyze logs and write the incident report (HTML, and optionally JSON and Markdown)."""
    from . import pipeline, report as rep

    opts = build_options(tz, year, boot_time, start, end, interval)
    prog, cb = _progress()
    if prog:
        with prog:
            bundle, analysis = pipeline.run(paths, opts, progress=cb)
    else:
        bundle, analysis = pipeline.run(paths, opts)
    _print_problems(bundle)
    if not any(i.format for i in bundle.inputs):
        why = "every input failed" if bundle.inputs and all(i.error for i in bundle.inputs) else "no file was recognized"
        err.print(f"{', '.join(paths)}: nothing to analyze, {why}, "
                  "pass the job's log files (nvidia-smi CSV, kern.log, training log, sanitizer output); "
                  "`gpu-forensics sniff PATH` shows what each file was taken for", markup=False)
        raise typer.Exit(EXIT_USAGE)
    ctx = rep.build_context(bundle, analysis, opts)
    if output:
        _write(output, rep.render_html(ctx))
        err.print(f"report: {output}", markup=False)
    if md_out:
        _write(md_out, rep.render_markdown(ctx))
    if json_out:
        _write(json_out, json.dumps(rep.summary(bundle, analysis), indent=2, ensure_ascii=False) + "\n")
    _print_summary(bundle, analysis)
    raise typer.Exit(EXIT_FINDINGS if should_fail(analysis, fail_on) else EXIT_OK)


@app.command()
def sniff(paths: Annotated[list[str], typer.Argument(help="Files or folders.")]) -> None:
    """Show which parser claims each file, and why (or why none does)."""
    from . import parsers
    from .errors import InputError
    from .sources import Source, discover

    found = discover(paths)

    class _Plain:  # tab-separated lines, so the output can be cut/awk'ed (rich would expand tabs)
        @staticmethod
        def print(text: str, markup: bool = False) -> None:
            print(text)

    out = _Plain()
    for e in found.problems:
        out.print(f"{e.path}\t-\t{e}", markup=False)
    for shown, why in found.ignored:
        out.print(f"{shown}\t-\t{why}", markup=False)
    for real, shown in found.files:
        try:
            src = Source.open(real, shown)
            module, reason = parsers.claim(src.head())
        except InputError as e:
            out.print(f"{shown}\t-\t{e}", markup=False)
            continue
        extra = []
        if src.compression:
            extra.append(src.compression)
        if src.wrapper:
            extra.append(f"wrapper: {src.wrapper.describe()}")
        suffix = f" ({'; '.join(extra)})" if extra else ""
        out.print(f"{shown}\t{module.NAME if module else '-'}\t{reason}{suffix}", markup=False)


@app.command()
def timeline(
    paths: Annotated[list[str], typer.Argument(help="Log files or folders.")],
    output: Annotated[str, typer.Option("-o", "--output", help="aligned.parquet or aligned.csv")],
    tz: TzOption = None,
    boot_time: BootTimeOption = None,
    year: YearOption = None,
    start: StartOption = None,
    end: EndOption = None,
    interval: IntervalOption = None,
) -> None:
    """Write the normalized, aligned samples and events tables for your own analysis."""
    from . import ingest, timeline as tl

    if not output.endswith((".parquet", ".csv")):
        raise UsageError(f"-o {output}: unknown table format, end the name in .parquet or .csv")
    opts = build_options(tz, year, boot_time, start, end, interval)
    bundle = tl.align(ingest.load(paths, opts), opts)
    _print_problems(bundle)
    written = tl.write_aligned(bundle, Path(output))
    for p in written or [output]:
        err.print(f"wrote {p}", markup=False)


class Reports(str, Enum):
    all = "all"
    critical = "critical"
    warning = "warning"
    info = "info"
    none = "none"


class Engine(str, Enum):
    local = "local"
    dask = "dask"


@app.command()
def scan(
    archive: Annotated[str, typer.Argument(help="Folder of job folders (rotated, compressed logs welcome).")],
    output: Annotated[str, typer.Option("-o", "--output", help="Output folder (index.html, summary.csv/.parquet, jobs/).")] = "scan-out",
    workers: Annotated[int, typer.Option("--workers", "-j", help="Parallel worker processes (default: all cores).")] = 0,
    depth: Annotated[Optional[int], typer.Option("--depth", help="Jobs are the folders exactly this deep below ARCHIVE.")] = None,
    job_pattern: Annotated[Optional[str], typer.Option("--job-pattern", help="Regex on folder names that marks a job folder.")] = None,
    reports: Annotated[Reports, typer.Option("--reports", help="Write a per-job HTML report for all jobs, none, or those with findings at or above a severity.")] = Reports.all,
    tz: TzOption = None,
    year: YearOption = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when any job's findings reach this level.")] = FailOn.never,
    force: Annotated[bool, typer.Option("--force", help="Redo every job, even those whose inputs did not change.")] = False,
    engine: Annotated[Engine, typer.Option("--engine", help="local processes, or dask (optional extra) for a cluster.")] = Engine.local,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address (with --engine dask).")] = None,
) -> None:
    """Scan an archive of job folders: a report per job, an index page, and a summary table.

    Exit 0 when every job was read and none reaches --fail-on; 1 when a job reaches --fail-on or a job could not be read at all (it is listed with its reason); 2 on usage errors."""
    # (that paragraph is one line: typer's help keeps a docstring's line breaks)
    import re as _re

    from . import scan as sc

    if job_pattern:
        try:
            _re.compile(job_pattern)
        except _re.error as e:
            raise UsageError(f"--job-pattern {job_pattern}: not a valid regular expression ({e})")
    opts = build_options(tz, year, None, None)
    cfg = sc.ScanConfig(archive=Path(archive), out_dir=Path(output), depth=depth, job_pattern=job_pattern,
                        reports=reports.value, workers=workers or sc.usable_cpus(), opts=opts, force=force)
    client = None
    if engine is Engine.dask:
        try:
            from dask.distributed import Client
        except ImportError:
            raise UsageError("--engine dask needs the optional extra: pip install 'gpu-forensics[dask]'")
        client = Client(scheduler) if scheduler else Client(n_workers=cfg.workers, threads_per_worker=1)
    try:
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[rate]:.1f} jobs/s"), TimeRemainingColumn(), console=err) as prog:
                task = prog.add_task("scan", total=None, rate=0.0)
                import time as _t

                t0 = _t.perf_counter()

                def cb(done, total, row):
                    el = max(_t.perf_counter() - t0, 1e-6)
                    prog.update(task, completed=done, total=total, rate=done / el)

                result = sc.run_scan(cfg, cb, executor=engine.value if client else "process")
        else:
            result = sc.run_scan(cfg, None, executor="dask" if client else "process")
    finally:
        if client is not None:
            client.close()
    _print_scan_table(result, output)
    failed = result.failed
    hit = any(_row_reaches(r, fail_on) for r in result.rows)
    raise typer.Exit(EXIT_FINDINGS if (hit or failed) else EXIT_OK)


def _row_reaches(row: dict, fail_on: FailOn) -> bool:
    if fail_on is FailOn.never or row.get("status") != "ok":
        return False
    if fail_on is FailOn.oom:
        return bool(row.get("oom_kills") or row.get("gpu_ooms"))
    if fail_on is FailOn.leak:
        return row.get("verdict") == "leak" or bool(row.get("oom_kills") or row.get("gpu_ooms"))
    return row.get("severity") in ("warning", "critical")


def _print_scan_table(result, output: str) -> None:
    from rich.table import Table

    counts: dict[str, int] = {}
    for r in result.rows:
        key = r.get("verdict") if r.get("status") == "ok" else "failed"
        counts[key or "failed"] = counts.get(key or "failed", 0) + 1
    t = Table(title=f"{len(result.rows)} jobs in {result.seconds:.1f} s "
                    f"({result.analyzed} analyzed, {result.reused} unchanged and reused)")
    t.add_column("verdict")
    t.add_column("jobs", justify="right")
    for k in ("leak", "cache_growth", "inconclusive", "no_leak", "failed"):
        if counts.get(k):
            t.add_row(k, str(counts[k]))
    err.print(t)
    for r in result.rows:
        if r.get("status") == "failed":
            err.print(f"failed: {r.get('error')}", markup=False)
    err.print(f"index: {Path(output) / 'index.html'}", markup=False)


def version_callback(value: bool):
    if value:
        print(f"gpu-forensics {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True)] = False):
    pass


def main() -> None:
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except ForensicsError as e:
        err.print(f"error: {e}", markup=False)
        sys.exit(EXIT_USAGE)
    except Exception as e:  # click usage errors and the like
        # typer 0.2x ships its own copy of click (and no longer installs click): a usage error is told
        # by what it can do (show itself, carry an exit code), whichever click raised it
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(EXIT_USAGE)
        if isinstance(e, typer.Abort):   # click's Abort, under either copy
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
