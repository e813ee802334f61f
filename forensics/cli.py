"""Command line. Thin: parses options, calls the pipeline, turns errors into messages and exit codes.

Exit codes: 0 = done and no finding at or above --fail-on; 1 = findings at or above --fail-on;
2 = usage error, or no input could be read at all.
"""
from __future__ import annotations

import atexit
import gc
import os
import re
import sys
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
import typer.core
from rich.console import Console

from forensics import startup
from forensics.errors import ForensicsError, UsageError
from forensics.options import Options, check_columns, check_zone, unused_flags
from forensics.units import parse_size

_CLICK_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT"}


def _click_type(p, ctx) -> str | None:
    if getattr(p, "is_flag", False) or getattr(p, "count", False) or p.metavar == "":
        return None
    if p.metavar is not None and p.param_type_name == "option":
        return p.metavar
    t = p.display_type(ctx).strip("<>")
    t = t[5:-1] if t.startswith("list[") else t
    return f"[{t}]" if "|" in t else _CLICK_WORDS.get(t, t.upper())


def _tidy_help(params: list) -> list:
    """The help reads the same on every typer the floors allow: newer ones (0.28+) print a Python type per
    parameter (`<list[str]>`, `<bool>` on plain flags) and `{paths}...` in the usage line; older ones print
    click's TEXT and PATHS..., which the newer ones are given here too (a flag gets no type)."""
    for p in params:
        if not hasattr(p, "display_type_rich"):   # an older typer: click's words already
            continue
        p.display_type_rich = lambda ctx, p=p: _click_type(p, ctx)
        if p.param_type_name == "argument":
            name = p.metavar or p.name.upper() + ("..." if p.nargs != 1 else "")
            p.get_usage_pieces = lambda ctx, name=name, req=p.required: [name if req else f"[{name}]"]
    return params


class _Command(typer.core.TyperCommand):
    def get_params(self, ctx):
        return _tidy_help(super().get_params(ctx))


class _Group(typer.core.TyperGroup):
    def get_params(self, ctx):
        return _tidy_help(super().get_params(ctx))


app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    rich_markup_mode="rich",   # (so no `[...]` in help texts: rich would read it as a style tag)
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Forensics of GPU memory leaks: read a job's logs, find where memory began to grow and why, "
    "write one self-contained HTML incident report.",
    epilog="Examples:\n\n"
    "  gpu-forensics report job-1234/ -o report.html --md -   # one job's logs in, one report out\n\n"
    "  gpu-forensics sniff job-1234/   # which parser takes each file, and why\n\n"
    "  gpu-forensics scan /archive/jobs -o scan-out   # a report per job and an index\n\n"
    "  gpu-forensics compare before/ after/   # did the fix work?\n\n"
    "  gpu-forensics record -o run-1 -- python train.py   # run a job with the loggers beside it\n\n"
    "Each command's --help has more examples.",
)
# C0/C1 control characters but tab and newline: from log text or a file name they would drive the
# terminal (set its title, clear the screen); shown as \xNN instead
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _Console(Console):
    """stderr: what is printed passes through `printable` (rich's own styling still reaches the terminal)."""

    def print(self, *objects, **kw) -> None:
        super().print(*(printable(o) if isinstance(o, str) else o for o in objects), **kw)


err = _Console(stderr=True, highlight=False, soft_wrap=True)


class _Say:
    """How much goes to stderr: -q only errors, -v also what each stage did and how long it took."""

    QUIET, NORMAL, VERBOSE = 0, 1, 2
    level = NORMAL

    def set(self, quiet: bool, verbose: bool) -> None:
        if quiet and verbose:
            raise UsageError("-q/--quiet and -v/--verbose: both given, pick one")
        self.level = self.QUIET if quiet else self.VERBOSE if verbose else self.NORMAL

    def info(self, text: str, markup: bool = False) -> None:
        if self.level >= self.NORMAL:
            err.print(text, markup=markup)

    def stage(self, name: str, seconds: float, what: str) -> None:
        if self.level >= self.VERBOSE:
            err.print(f"{name}: {what} ({seconds:.2f} s)", markup=False)


say = _Say()


EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class FailOn(str, Enum):
    """How bad a result must be (forensics.report.verdict.reaches); `--fail-on` and `scan --reports` share it."""
    never = "never"
    leak = "leak"
    oom = "oom"
    critical = "critical"
    warning = "warning"
    any = "any"


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
                  end: str | None = None, interval: float | None = None, columns: str | None = None,
                  max_snapshot: str | None = None, archive_max_size: str | None = None,
                  archive_max_members: int | None = None, max_snapshot_objects: int | None = None,
                  max_decompressed: str | None = None, max_series: int | None = None,
                  max_document: str | None = None) -> Options:
    opts = Options()
    # budgets: (flag, value given, Options field, a size or a count, the example a message gives)
    budgets = [("--max-series", max_series, "max_series", False, None),
               ("--max-decompressed", max_decompressed, "max_decompressed_bytes", True, "200GiB"),
               ("--max-document-size", max_document, "max_document_bytes", True, "2GiB"),
               ("--max-snapshot-objects", max_snapshot_objects, "max_snapshot_objects", False, None),
               ("--archive-max-size", archive_max_size, "archive_max_bytes", True, "200GiB"),
               ("--archive-max-members", archive_max_members, "archive_max_members", False, None),
               ("--max-snapshot-size", max_snapshot, "max_snapshot_bytes", True, "8GiB or 500MiB")]
    for flag, value, field, is_size, example in budgets:
        if value is None:
            continue
        if is_size:
            size = parse_size(value)
            if size is None or size <= 0:
                raise UsageError(f"{flag} {value}: not a size, give e.g. {example}")
            value = size
        elif value < 1:
            raise UsageError(f"{flag} {value}: give a count from 1 up")
        setattr(opts, field, value)
    if columns is not None:
        opts.columns = check_columns(columns)
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
    # a clock anchor is a time AND a pace: one without the other used to be dropped without a word
    if opts.start is not None and opts.end is not None:
        raise UsageError(f"--start {start} --end {end}: both given, an untimed log is placed from one of them "
                         "(with --interval), drop the other")
    if (opts.start is not None or opts.end is not None) and interval is None:
        flag = f"--start {start}" if opts.start is not None else f"--end {end}"
        raise UsageError(f"{flag}: needs --interval, the seconds between samples, to place the other samples "
                         "(e.g. --interval 1 for nvidia-smi -l 1)")
    return opts


def check_tz_patterns(opts: Options, bundle) -> None:
    """A `--tz FILE=ZONE` that names no input is a typo the user would never notice."""
    paths = [i.path for i in bundle.inputs]
    for pattern, zone in opts.tz_overrides.items():
        if not any(Options(tz="", tz_overrides={pattern: zone}).tz_for(path) == zone for path in paths):
            raise UsageError(f"--tz {pattern}={zone}: matches no input file, give a file name or glob of one of "
                             f"the inputs (e.g. --tz 'kern.log={zone}'); `gpu-forensics sniff PATH` lists them")


def warn_unused(opts: Options, bundle) -> None:
    """Say (one line each) which options no input needed, instead of ignoring them without a word."""
    for flag, why in unused_flags(opts, bundle.inputs):
        say.info(f"warning: {flag}: not used, {why}; `gpu-forensics sniff PATH` shows what each file was taken for")


def should_fail(analysis, fail_on: FailOn) -> bool:
    from forensics.report.verdict import reaches

    return reaches(fail_on.value, analysis.verdict, [f.kind for f in analysis.findings],
                 [f.severity for f in analysis.findings])


def _progress():
    """A per-file progress callback on stderr when it is a terminal (and not -q), else nothing."""
    if not sys.stderr.isatty() or say.level == say.QUIET:
        return None, None
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    prog = Progress(SpinnerColumn(), TextColumn("reading {task.description}"), TimeElapsedColumn(), console=err, transient=True)
    task = prog.add_task("", total=None)
    return prog, (lambda path: prog.update(task, description=escape(printable(path))))


def _print_problems(bundle) -> None:
    if say.level == say.QUIET:   # only the inputs that could not be read at all
        for i in bundle.inputs:
            if i.error:
                err.print(i.error, markup=False)
        return
    for msg in grouped_problems(bundle.problems, [i.path for i in bundle.inputs]):
        err.print(msg, markup=False)


def grouped_problems(problems: list[str], paths: list[str], shown: int = 3) -> list[str]:
    """One line per cause: messages that differ only in the file they name (twelve empty stderr.log files)
    become one counted line naming the first few, so the causes that differ stand out."""
    causes: dict[str, list[str]] = {}
    for msg in problems:
        where = next((p for p in sorted(paths, key=len, reverse=True) if msg.startswith(f"{p}:")), None)
        if where is None:
            causes.setdefault(msg, [])
            continue
        rest = msg[len(where) + 1:]
        line, _, tail = rest.partition(": ")
        if line.isdigit():   # path:line: the line number is part of the place, not of the cause
            where, rest = f"{where}:{line}", tail
        causes.setdefault(rest.lstrip(), []).append(where)
    out = []
    for cause, wheres in causes.items():
        if len(wheres) <= 1:
            out.append(f"{wheres[0]}: {cause}" if wheres else cause)
            continue
        names = ", ".join(wheres[:shown]) + (f", … ({len(wheres) - shown} more)" if len(wheres) > shown else "")
        out.append(f"{len(wheres)} files: {cause} ({names})")
    return out


def _print_summary(bundle, analysis) -> None:
    from rich.markup import escape

    from forensics.report.formatting import verdict_words

    say.info(f"verdict: [bold]{verdict_words(analysis.verdict)}[/bold] — {escape(analysis.verdict_reason or '')}",
             markup=True)
    for f in analysis.findings[:20]:
        say.info(f"  {f.severity:8} {f.kind:17} {f.summary}")
    if len(analysis.findings) > 20:
        say.info(f"  … and {len(analysis.findings) - 20} more findings (see the report)")
    read = sum(1 for i in bundle.inputs if i.format and not i.error)
    skipped_files = sum(1 for i in bundle.inputs if not i.format and not i.error)
    failed = sum(1 for i in bundle.inputs if i.error)
    say.info(f"inputs: {read} read, {skipped_files} not recognized, {failed} unreadable; "
             f"{sum(i.skipped for i in bundle.inputs)} lines skipped")


def _has_subfolder(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(e.is_dir() for e in entries)
    except OSError:
        return False


def _suggest_scan(paths: list[str]) -> None:
    """A folder of job folders read as one job merges unrelated runs into one verdict: say so."""
    from forensics.scan import find_jobs

    for p in paths:
        # (a folder without subfolders is one job at most: its files are not sniffed a second time)
        if Path(p).is_dir() and _has_subfolder(p):
            jobs = find_jobs(Path(p))
            if len(jobs) > 1:
                say.info(f"warning: {p}: holds {len(jobs)} job folders, read here as one job (one verdict for all); "
                         f"`gpu-forensics scan {p}` writes a report per job and an index")


# The options that `report`, `timeline` and `scan` share, each written once
TzOption = Annotated[Optional[list[str]], typer.Option(
    "--tz", help="Zone of clocks without one (IANA name), or FILE=ZONE for one file (glob allowed; it must match an input). Repeatable.")]
BootTimeOption = Annotated[Optional[str], typer.Option(
    "--boot-time", help="Boot time (ISO-8601 with zone) for dmesg uptime stamps.")]
YearOption = Annotated[Optional[int], typer.Option(
    "--year", help="Year of the last line of syslog files that carry none (earlier lines walk back across New Year); "
                   "default: the file's mtime.")]
StartOption = Annotated[Optional[str], typer.Option(
    "--start", help="Clock time (ISO-8601 with zone) of the first sample of untimed logs; needs --interval.")]
EndOption = Annotated[Optional[str], typer.Option(
    "--end", help="Clock time (ISO-8601 with zone) of the last sample of untimed logs; needs --interval.")]
IntervalOption = Annotated[Optional[float], typer.Option(
    "--interval", help="Seconds between samples of untimed logs (e.g. 1 for nvidia-smi -l 1): with --start or --end "
                       "it places them; alone it fixes their pace when their curve is matched against a timed log.")]
ColumnsOption = Annotated[Optional[str], typer.Option(
    "--columns", help="The columns of headerless nvidia-smi CSV (--format=csv,noheader), in their order, e.g. "
                      "timestamp,index,memory.used,memory.total; default: inferred from the values.")]
MaxSnapshotOption = Annotated[Optional[str], typer.Option(
    "--max-snapshot-size", help="Read PyTorch memory snapshots up to this size (decompressed), e.g. 8GiB; default 2GiB "
                                "(about 20 s and 1 GiB of memory per GiB).")]
MaxSnapshotObjectsOption = Annotated[Optional[int], typer.Option(
    "--max-snapshot-objects", help="Walk at most this many trace entries and blocks of a PyTorch memory snapshot (a "
                                   "list its pickle refers to again counts again); default 50000000.")]
MaxDecompressedOption = Annotated[Optional[str], typer.Option(
    "--max-decompressed", help="Read each compressed file (.gz, .xz, .bz2, .zst) up to this many bytes after "
                               "decompression, e.g. 200GiB; default 64GiB.")]
ArchiveMaxSizeOption = Annotated[Optional[str], typer.Option(
    "--archive-max-size", help="Read at most this many bytes (members' sizes) of each .tar/.zip archive, e.g. 200GiB; "
                               "default 64GiB.")]
ArchiveMaxMembersOption = Annotated[Optional[int], typer.Option(
    "--archive-max-members", help="Read at most this many files of each .tar/.zip archive; default 10000.")]
MaxDocumentOption = Annotated[Optional[str], typer.Option(
    "--max-document-size", help="Read a one-document file (a JSON export) up to this size, whole, e.g. 2GiB; default "
                                "512MiB (about three times its size in memory).")]
MaxSeriesOption = Annotated[Optional[int], typer.Option(
    "--max-series", help="Analyze at most this many memory series (the ones that grow most); default 5000.")]
QuietOption = Annotated[bool, typer.Option("-q", "--quiet", help="Print only errors on stderr.")]
VerboseOption = Annotated[bool, typer.Option("-v", "--verbose", help="Also print what each stage did and how long it took.")]

# typer's rich help joins the lines of a paragraph and keeps paragraphs ("\n\n") apart, one line each
_EXIT_CODES = ("Exit codes: 0 done, and no finding at or above --fail-on; 1 findings at or above --fail-on; "
               "2 usage error, or no input could be read at all.")


def _examples(*lines: str) -> str:
    return "Examples:\n\n" + "\n\n".join(f"  {line}" for line in lines)


@app.command(cls=_Command, epilog=_examples(
    "gpu-forensics report job-1234/ -o report.html --md -",
    "gpu-forensics report nvidia-smi.csv kern.log train.log --tz Europe/Berlin --json summary.json",
    "gpu-forensics report job-1234/ -o '' --json - --fail-on leak   # a CI gate: exit 1 on a leak",
) + "\n\n" + _EXIT_CODES)
def report(
    paths: Annotated[list[str], typer.Argument(help="Log files or folders (read recursively).")],
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="HTML report file, or - for stdout ('' for none).")] = "report.html",
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the JSON summary to FILE, or - for stdout.")] = None,
    md_out: Annotated[Optional[str], typer.Option("--md", help="Write the Markdown summary to FILE, or - for stdout.")] = None,
    tz: TzOption = None,
    boot_time: BootTimeOption = None,
    year: YearOption = None,
    start: StartOption = None,
    end: EndOption = None,
    interval: IntervalOption = None,
    columns: ColumnsOption = None,
    max_snapshot_size: MaxSnapshotOption = None,
    max_snapshot_objects: MaxSnapshotObjectsOption = None,
    max_decompressed: MaxDecompressedOption = None,
    max_document_size: MaxDocumentOption = None,
    archive_max_size: ArchiveMaxSizeOption = None,
    archive_max_members: ArchiveMaxMembersOption = None,
    max_series: MaxSeriesOption = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when the result reaches this level: never; leak (a leak); oom (an OOM); critical or warning (a finding that severe or worse); any (any finding).")] = FailOn.never,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Analyze logs and write the incident report (HTML, and optionally JSON and Markdown)."""
    import time

    from forensics import pipeline
    from forensics import report as rep
    from forensics.report.write import output_targets, write_text

    startup.imported()
    say.set(quiet, verbose)
    opts = build_options(tz, year, boot_time, start, end, interval, columns, max_snapshot_size, archive_max_size,
                         archive_max_members, max_snapshot_objects, max_decompressed, max_series, max_document_size)
    outs = output_targets([("-o", output), ("--json", json_out), ("--md", md_out)], paths)
    prog, cb = _progress()
    if prog:
        with prog:
            bundle, analysis = pipeline.run(paths, opts, progress=cb, stage=say.stage)
    else:
        bundle, analysis = pipeline.run(paths, opts, stage=say.stage)
    _print_problems(bundle)
    if not any(i.format for i in bundle.inputs):
        why = "every input failed" if bundle.inputs and all(i.error for i in bundle.inputs) else "no file was recognized"
        err.print(f"{', '.join(paths)}: nothing to analyze, {why}, "
                  "pass the job's log files (nvidia-smi CSV, kern.log, training log, sanitizer output); "
                  "`gpu-forensics sniff PATH` shows what each file was taken for", markup=False)
        raise typer.Exit(EXIT_USAGE)
    check_tz_patterns(opts, bundle)
    warn_unused(opts, bundle)
    _suggest_scan(paths)
    t0 = time.perf_counter()
    ctx = rep.build_context(bundle, analysis, opts)
    renders = {"-o": rep.render_html, "--md": rep.render_markdown,
               "--json": lambda _ctx: rep.summary_text(rep.summary(bundle, analysis))}
    for flag, t in outs.items():
        write_text(t, renders[flag](ctx))
        if flag == "-o" and t.path is not None:
            say.info(f"report: {output}")
    say.stage("write", time.perf_counter() - t0, ", ".join(f"{flag} {t.shown}" for flag, t in outs.items()) or "nothing asked")
    _print_summary(bundle, analysis)
    raise typer.Exit(EXIT_FINDINGS if should_fail(analysis, fail_on) else EXIT_OK)


@app.command(cls=_Command, epilog=_examples(
    "gpu-forensics sniff job-1234/",
    "gpu-forensics sniff kern.log.2.gz | cut -f2   # just the parser names",
) + "\n\nOutput: one tab-separated line per file: path, parser (- for none), the reason. "
    "Exit codes: 0 done (files no parser claims are listed, not errors); 2 usage error.")
def sniff(paths: Annotated[list[str], typer.Argument(help="Files or folders.")]) -> None:
    """Show which parser claims each file, and why (or why none does)."""
    from forensics import parsers
    from forensics.errors import InputError
    from forensics.io import archives
    from forensics.io.sources import Source, discover

    startup.imported()

    if sys.stdout is None:   # started with stdout closed (>&-): the listing would be lost
        raise UsageError("sniff: cannot write the listing, stdout is closed, run it without closing stdout")
    for p in paths:
        if not os.path.lexists(p):
            raise UsageError(f"{p}: no such file or folder, check the path")
    found = discover(paths)
    if not (found.files or found.ignored or found.problems):
        raise UsageError(f"{', '.join(paths)}: no files in it, nothing to sniff, give the folder or files of a job's logs")
    # tab-separated lines on stdout, so the output can be cut/awk'ed (rich would expand tabs)
    for e in found.problems:
        print(printable(f"{e.path}\t-\t{e}"))
    for shown, why in found.ignored:
        print(printable(f"{shown}\t-\t{why}"))

    def members():
        """(shown, opener) of each file, an archive's members in its place (io/archives.py)."""
        for real, shown in found.files:
            if not archives.kind_of(real.name):
                yield shown, lambda r=real, s=shown: Source.open(r, s)
                continue
            arch = archives.Archive(real, shown, Options().archive_max_members, Options().archive_max_bytes)
            try:
                for src in arch.sources():
                    yield src.path, lambda m=src: m
            except InputError as e:
                arch.problems.append(e)
            for e in arch.problems:
                print(printable(f"{e.path}\t-\t{e}"))

    for shown, open_src in members():
        try:
            src = open_src()
            fmt, reason = parsers.claim_file(src)
        except InputError as e:
            print(printable(f"{shown}\t-\t{e}"))
            continue
        extra = []
        if src.compression:
            extra.append(src.compression)
        if src.wrapper and not (fmt is not None and fmt.reads_whole):
            extra.append(f"wrapper: {src.wrapper.describe()}")
        suffix = f" ({'; '.join(extra)})" if extra else ""
        print(printable(f"{shown}\t{fmt.name if fmt else '-'}\t{reason}{suffix}"))


@app.command(cls=_Command, epilog=_examples(
    "gpu-forensics formats                  # every format, in the order they are tried",
    "gpu-forensics formats kernel-log       # one format's reference",
) + "\n\nOutput: one tab-separated line per format: name, the files it reads, what it gets from them; "
    "with NAME, that format's declaration and reference. Exit codes: 0 done; 2 no such format.")
def formats(name: Annotated[str | None, typer.Argument(help="A format's name: print its reference.")] = None) -> None:
    """List the log formats read (from each parser's own declaration), or one format's reference."""
    from forensics import parsers

    if name is not None and name not in parsers.BY_NAME:
        raise UsageError(f"{name}: no such format, `gpu-forensics formats` lists them")
    print(parsers.described(parsers.BY_NAME[name]) if name else
          "\n".join(f"{f.name}\t{f.files}\t{f.yields}" for f in parsers.PARSERS))


@app.command(cls=_Command, epilog=_examples(
    "gpu-forensics timeline job-1234/ -o aligned.parquet",
    "gpu-forensics timeline nvidia-smi.csv dmesg.txt --boot-time 2026-11-30T01:02:03Z -o aligned.csv",
) + "\n\nA .csv name writes NAME.samples.csv and NAME.events.csv beside it. "
    "Exit codes: 0 done; 2 usage error, or no input could be read at all.")
def timeline(
    paths: Annotated[list[str], typer.Argument(help="Log files or folders.")],
    output: Annotated[str, typer.Option("-o", "--output", help="aligned.parquet or aligned.csv")],
    tz: TzOption = None,
    boot_time: BootTimeOption = None,
    year: YearOption = None,
    start: StartOption = None,
    end: EndOption = None,
    interval: IntervalOption = None,
    columns: ColumnsOption = None,
    max_snapshot_size: MaxSnapshotOption = None,
    max_snapshot_objects: MaxSnapshotObjectsOption = None,
    max_decompressed: MaxDecompressedOption = None,
    max_document_size: MaxDocumentOption = None,
    archive_max_size: ArchiveMaxSizeOption = None,
    archive_max_members: ArchiveMaxMembersOption = None,
    max_series: MaxSeriesOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Write the normalized, aligned samples and events tables for your own analysis."""
    import time

    from forensics import pipeline
    from forensics import timeline as tl
    from forensics.report.write import refuse_clashes

    startup.imported()

    say.set(quiet, verbose)
    opts = build_options(tz, year, boot_time, start, end, interval, columns, max_snapshot_size, archive_max_size,
                         archive_max_members, max_snapshot_objects, max_decompressed, max_series, max_document_size)
    # a bad name, a missing folder or an input as output fails before the work
    refuse_clashes(tl.aligned_targets(output), paths)
    bundle = pipeline.load(paths, opts, stage=say.stage)
    _print_problems(bundle)
    if not any(i.format for i in bundle.inputs):
        err.print(f"{', '.join(paths)}: nothing to write, no input could be read, pass the job's log files; "
                  "`gpu-forensics sniff PATH` shows what each file was taken for", markup=False)
        raise typer.Exit(EXIT_USAGE)
    check_tz_patterns(opts, bundle)
    warn_unused(opts, bundle)
    t0 = time.perf_counter()
    written = tl.write_aligned(bundle, output)
    say.stage("write", time.perf_counter() - t0, ", ".join(written))
    for p in written:
        say.info(f"wrote {p}")


@app.command(cls=_Command, epilog=_examples(
    "gpu-forensics compare job-1234/ job-1240/ -o compare.html --md -",
    "gpu-forensics compare before/ after/ -o '' --json - --fail-on leak   # a CI gate on the fixed run",
) + "\n\nOutcome (JSON `outcome`): fixed, regressed, still_leaking or no_leak. Exit codes: 0 done, and no "
    "finding of AFTER at or above --fail-on; 1 findings of AFTER at or above --fail-on; 2 usage error, or nothing "
    "could be read on one side.")
def compare(
    before: Annotated[str, typer.Argument(help="The run with the problem: a log folder or file.")],
    after: Annotated[str, typer.Argument(help="The run with the fix: a log folder or file.")],
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="HTML file, or - for stdout ('' for none).")] = "compare.html",
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the JSON (both summaries and the outcome) to FILE, or - for stdout.")] = None,
    md_out: Annotated[Optional[str], typer.Option("--md", help="Write the Markdown summary to FILE, or - for stdout.")] = None,
    tz: TzOption = None,
    boot_time: BootTimeOption = None,
    year: YearOption = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when the AFTER run reaches this level (as for report --fail-on).")] = FailOn.never,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Compare a run before a fix with one after it: fixed, regressed, still leaking, or no leak."""
    from forensics import compare as cmp
    from forensics import report as rep
    from forensics.report.write import output_targets, write_text

    startup.imported()

    say.set(quiet, verbose)
    opts = build_options(tz, year, boot_time, None)
    outs = output_targets([("-o", output), ("--json", json_out), ("--md", md_out)], [before, after])
    sides = []
    for name, path in (("before", before), ("after", after)):
        side = cmp.analyze(name, [path], opts, stage=say.stage)
        _print_problems(side.bundle)
        if not any(i.format for i in side.bundle.inputs):
            err.print(f"{path}: nothing to analyze in the {name.upper()} run, no file was recognized, pass the job's "
                      "log folder or files; `gpu-forensics sniff PATH` shows what each file was taken for", markup=False)
            raise typer.Exit(EXIT_USAGE)
        check_tz_patterns(opts, side.bundle)
        warn_unused(opts, side.bundle)
        sides.append(side)
    doc, extra = cmp.build(*sides)
    renders = {"-o": cmp.render_html, "--md": cmp.render_markdown,
               "--json": lambda d, _e: rep.summary_text(d)}
    for flag, t in outs.items():
        write_text(t, renders[flag](doc, extra))
        if flag == "-o" and t.path is not None:
            say.info(f"compare: {output}")
    from rich.markup import escape

    from forensics.report.formatting import verdict_words

    say.info(f"outcome: [bold]{verdict_words(doc['outcome'])}[/bold] — {escape(doc['outcome_reason'])}", markup=True)
    raise typer.Exit(EXIT_FINDINGS if should_fail(sides[1].analysis, fail_on) else EXIT_OK)


@app.command(cls=_Command, context_settings={"allow_interspersed_args": False}, epilog=_examples(
    "gpu-forensics record -o run-1 -- python train.py --epochs 3",
    "gpu-forensics record --interval 0.5 -- torchrun --nproc-per-node 8 train.py",
) + "\n\nWrites stdout.log, stderr.log, nvidia-smi.csv, compute-apps.csv, kernel.log (where readable), job.json "
    "and, when the command ends, report.html. Exit code: the command's own (128+N when signal N ended it); "
    "2 usage error (e.g. no nvidia-smi).")
def record(
    command: Annotated[list[str], typer.Argument(help="The command to run, after --.", metavar="COMMAND...", show_default=False)],
    output: Annotated[Optional[str], typer.Option("-o", "--output", show_default=False,
                                                  help="Folder for the logs, new or empty (default: gpu-record-UTCTIME).")] = None,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between nvidia-smi samples.")] = 1.0,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Run a command with nvidia-smi, compute-apps and kernel-log loggers beside it, then write its report."""
    from forensics import record as rec

    startup.imported()

    for name in _SET_BY_MAIN:   # the user's command runs with the environment it was given
        os.environ.pop(name, None)
    say.set(quiet, verbose)
    folder = output or rec.default_dir()
    rc = rec.record(folder, command, interval, say=say.info)
    say.info(f"{command[0]}: exit status {rc}; logs in {folder}/")
    try:   # the same report as `gpu-forensics report FOLDER`; the exit code stays the command's
        report([folder], output=str(Path(folder) / "report.html"), json_out=None, md_out=None, tz=None,
               boot_time=None, year=None, start=None, end=None, interval=None, fail_on=FailOn.never,
               quiet=quiet, verbose=verbose)
    except typer.Exit:
        pass
    except ForensicsError as e:
        err.print(f"error: {e}", markup=False)
    raise typer.Exit(rc)


class Reports(str, Enum):
    """`all`, `none`, or the jobs that reach a --fail-on level."""
    all = "all"
    none = "none"
    leak = "leak"
    oom = "oom"
    critical = "critical"
    warning = "warning"
    any = "any"


class Engine(str, Enum):
    local = "local"
    dask = "dask"


@app.command(cls=_Command, epilog=_examples(
    "gpu-forensics scan /archive/jobs -o scan-out",
    "gpu-forensics scan /archive/jobs -o scan-out --reports warning --fail-on leak -j 8",
    "gpu-forensics scan /shared/jobs -o /shared/scan-out --engine dask --scheduler tcp://head:8786",
) + "\n\nExit codes: 0 every job was read and none reaches --fail-on; 1 a job reaches --fail-on or "
    "could not be read at all (it is listed with its reason); 2 usage error, or the engine cannot be reached.")
def scan(
    archive: Annotated[str, typer.Argument(help="Folder of job folders (rotated, compressed logs welcome).")],
    output: Annotated[str, typer.Option("-o", "--output", help="Output folder (index.html, summary.csv/.parquet, jobs/).")] = "scan-out",
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", show_default=False,
                                                   help="Parallel worker processes (default: the cores this process may use).")] = None,
    depth: Annotated[Optional[int], typer.Option("--depth", help="Jobs are the folders exactly this deep below ARCHIVE.")] = None,
    job_pattern: Annotated[Optional[str], typer.Option("--job-pattern", help="Regex on folder names that marks a job folder.")] = None,
    reports: Annotated[Reports, typer.Option("--reports", help="Write a per-job HTML report for all jobs, none, or the jobs that reach this --fail-on level.")] = Reports.all,
    tz: TzOption = None,
    year: YearOption = None,
    boot_time: BootTimeOption = None,
    columns: ColumnsOption = None,
    max_snapshot_size: MaxSnapshotOption = None,
    max_snapshot_objects: MaxSnapshotObjectsOption = None,
    max_decompressed: MaxDecompressedOption = None,
    max_document_size: MaxDocumentOption = None,
    archive_max_size: ArchiveMaxSizeOption = None,
    archive_max_members: ArchiveMaxMembersOption = None,
    max_series: MaxSeriesOption = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when any job reaches this level (as for report --fail-on).")] = FailOn.never,
    force: Annotated[bool, typer.Option("--force", help="Redo every job, even those whose inputs and options did not change.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Redo the jobs that failed last time (a rerun keeps their failed row otherwise).")] = False,
    follow_links_out: Annotated[bool, typer.Option("--follow-links-out", help="Follow symbolic links that lead outside ARCHIVE (by default they are not followed, not even to find jobs: each is named in its job's problems or the scan's notes).")] = False,
    max_worker_memory: Annotated[Optional[str], typer.Option(
        "--max-worker-memory", show_default=False,
        help="Address space each worker process may use, e.g. 8GiB; a job past it fails with that reason and "
             "the scan goes on. Default: the machine's memory shared out among the workers, at least 8GiB.")] = None,
    engine: Annotated[Engine, typer.Option("--engine", help="local processes, or dask (optional extra) for a cluster.")] = Engine.local,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address (needs --engine dask; default: a local cluster).")] = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Scan an archive of job folders: a report per job, an index page, and a summary table."""
    import re as _re
    import time as _t

    from forensics import scan as sc

    startup.imported()

    say.set(quiet, verbose)
    if job_pattern:
        try:
            _re.compile(job_pattern)
        except _re.error as e:
            raise UsageError(f"--job-pattern {job_pattern}: not a valid regular expression ({e}), fix the pattern")
    if depth is not None and job_pattern:
        raise UsageError(f"--depth {depth} --job-pattern {job_pattern}: both given, jobs are found one way, drop one")
    if depth is not None and depth < 0:
        raise UsageError(f"--depth {depth}: a depth below the archive is 0 or more, give e.g. --depth 1")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: at least one worker is needed, give a number from 1 up (or leave it out)")
    if scheduler and engine is not Engine.dask:
        raise UsageError(f"--scheduler {scheduler}: a Dask scheduler is used only by --engine dask, add it or drop --scheduler")
    opts = build_options(tz, year, boot_time, None, columns=columns, max_snapshot=max_snapshot_size,
                         archive_max_size=archive_max_size, archive_max_members=archive_max_members,
                         max_snapshot_objects=max_snapshot_objects, max_decompressed=max_decompressed,
                         max_series=max_series, max_document=max_document_size)
    n_workers = workers or sc.usable_cpus()
    if max_worker_memory is None:
        worker_bytes = sc.default_worker_bytes(n_workers)
    else:
        worker_bytes = parse_size(max_worker_memory)
        if worker_bytes is None or worker_bytes < 256 << 20:
            raise UsageError(f"--max-worker-memory {max_worker_memory}: not a size of at least 256MiB, give e.g. 8GiB")
    cfg = sc.ScanConfig(archive=Path(archive), out_dir=Path(output), depth=depth, job_pattern=job_pattern,
                        reports=reports.value, workers=n_workers, opts=opts, force=force,
                        fail_on=fail_on.value, retry_failed=retry_failed, max_worker_bytes=worker_bytes,
                        follow_links_out=follow_links_out)
    client = _dask_client(scheduler, cfg.workers) if engine is Engine.dask else None
    try:
        if sys.stderr.isatty() and say.level != say.QUIET:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[rate]:.1f} jobs/s"), TimeRemainingColumn(), console=err) as prog:
                task = prog.add_task("scan", total=None, rate=0.0)
                t0 = _t.perf_counter()
                reused: list[int] = []

                def cb(done, total, row):
                    if row is None:   # the first call: the jobs reused, which the rate does not count
                        reused.append(done)
                    el = max(_t.perf_counter() - t0, 1e-6)
                    prog.update(task, completed=done, total=total, rate=(done - reused[0]) / el)

                result = sc.run_scan(cfg, cb, executor="dask" if client else "process")
        else:
            result = sc.run_scan(cfg, None, executor="dask" if client else "process")
    except sc.Interrupted as e:
        err.print(f"{output}: {e}", markup=False)
        raise typer.Exit(e.exit_code)
    finally:
        if client is not None:
            client.close()
    if not result.rows:
        raise UsageError(f"{archive}: no job folder found (no folder below it holds a log this tool reads), give the "
                         "folder that holds one folder per job, or name them with --depth or --job-pattern")
    _print_scan_table(result, output)
    # an option is unused when no job needed it (a job analyzed before this was recorded tells nothing)
    unused = [r.get("unused_options") for r in result.rows]
    if unused and all(u is not None for u in unused):
        for flag, why in unused_flags(opts, []):
            if all(flag in u for u in unused):
                say.info(f"warning: {flag}: not used by any job, {why}; `gpu-forensics sniff JOB` shows what "
                         "each file was taken for")
    failed = result.failed
    hit = any(_row_reaches(r, fail_on) for r in result.rows)
    raise typer.Exit(EXIT_FINDINGS if (hit or failed) else EXIT_OK)


def _dask_client(scheduler: str | None, workers: int):
    """A client of the named scheduler, or of a local cluster; an unreachable one is a usage error."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise UsageError("--engine dask: needs the optional extra, which is not installed, "
                         "pip install 'gpu-forensics[dask]'")
    if not scheduler:
        return Client(n_workers=workers, threads_per_worker=1)
    try:
        return Client(scheduler, timeout=10)
    except (OSError, ValueError, TypeError) as e:   # refused, timed out (an OSError), or not an address
        raise UsageError(f"--scheduler {scheduler}: cannot reach the Dask scheduler, {e}, check the address "
                         "(e.g. tcp://host:8786) and that the scheduler runs")


def _row_reaches(row: dict, fail_on: FailOn) -> bool:
    from forensics.report.verdict import reaches

    # a job's worst severity stands for its findings' severities
    return row.get("status") == "ok" and reaches(fail_on.value, row.get("verdict"), row.get("kinds") or (),
                                               [row.get("severity")])


def _print_scan_table(result, output: str) -> None:
    from rich.table import Table

    for note in result.not_jobs:
        say.info(note)
    counts: dict[str, int] = {}
    for r in result.rows:
        key = r.get("verdict") if r.get("status") == "ok" else "failed"
        counts[key or "failed"] = counts.get(key or "failed", 0) + 1
    t = Table(title=f"{len(result.rows)} jobs in {result.seconds:.1f} s "
                    f"({result.analyzed} analyzed, {result.reused} unchanged and reused)")
    t.add_column("verdict")
    t.add_column("jobs", justify="right")
    from forensics.report.formatting import verdict_words

    for k in ("leak", "cache_growth", "inconclusive", "no_leak", "failed"):
        if counts.get(k):
            t.add_row(verdict_words(k), str(counts[k]))
    if say.level != say.QUIET:
        err.print(t)
    for r in result.rows:
        if r.get("status") == "failed":   # an error: shown even with -q
            err.print(r.get("error"), markup=False)
    say.info(f"index: {Path(output) / 'index.html'}")


def version_callback(value: bool):
    if value:
        from forensics.version import __version__

        print(f"gpu-forensics {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True,
                                                help="Print the version and exit.")] = False):
    pass


_SET_BY_MAIN: list[str] = []   # environment variables main() set, which `record` takes back from the user's command


def main() -> None:
    # OpenBLAS starts its threads when numpy is imported, a cost every report pays at start-up on a busy
    # machine (docs/benchmarks.md); the detectors' least squares have a few columns, one thread solves
    # them as fast, and scan's workers already take one core each. A value the user set wins.
    if "OPENBLAS_NUM_THREADS" not in os.environ:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        _SET_BY_MAIN.append("OPENBLAS_NUM_THREADS")
    # the last thing at exit (atexit runs the first registered last): the interpreter's final garbage
    # collections then pass over the heap that polars, numpy and the parsers built, instead of walking
    # all of it (a short run's exit, docs/benchmarks.md); the process ending frees it anyway
    atexit.register(gc.freeze)
    gc.disable()   # until the command's imports are done (startup.imported)
    if len(sys.argv) < 2 or not {"-h", "--help"}.isdisjoint(sys.argv[1:]):   # (no arguments: the help too)
        startup.import_help_renderer()
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except ForensicsError as e:
        err.print(f"error: {e}", markup=False)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # click usage errors and the like
        # typer 0.2x ships its own copy of click (and no longer installs click): a usage error is told
        # by what it can do (show itself, carry an exit code), whichever click raised it
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(EXIT_USAGE)
        if isinstance(e, typer.Abort):   # click's Abort, under either copy
            sys.exit(130)
        raise
    finally:
        gc.enable()   # (main() called in a process that goes on: a test's)


if __name__ == "__main__":
    main()
