"""`nvidia-bug-report.log(.gz)`, what the driver's nvidia-bug-report.sh writes (docs/formats.md, "Bundles"):
one text file of sections, each after a line of underscores, then a blank line and what the section
holds (a command, `*** /proc/meminfo`, `dmesg:`). This reader splits the sections and hands each to
the reader of its format, evidence lines keeping their numbers in the report:

- the `nvidia-smi --query` section (`$nvidia_smi --query`, and any other section holding nvidia-smi
  output: `-q`, its XML, a table) -> the nvidia-smi readers (parsers/nvsmi);
- `dmesg:` and the "Scanning kernel log files for NVIDIA kernel messages:" section (kern.log/journal
  lines grepped for NVRM) -> the kernel reader, as one log: kern.log lines that carry both a clock and
  the kernel's uptime anchor the dmesg's boot (timeline/uptime.py). The report's `Date:` line gives a
  bound only (the report was made after the last dmesg line: boot <= Date - last uptime), said in a note;
- `*** /proc/meminfo` -> `meta["meminfo"]` (MemTotal, MemAvailable, ... in bytes) and a note.
Every other section (lspci, X logs, modules, ...) holds no memory reading and is not read; its lines
are counted as skipped by section.
"""
from __future__ import annotations

import copy
import dataclasses
import re
from datetime import datetime, timezone

import polars as pl

from forensics.model import Parsed, Skipped
from forensics.options import Options
from forensics.parsers.kernel.reader import KernelReader
from forensics.parsers.nvsmi import common as nvsmi
from forensics.units import human
from forensics.parsers.contract import Format

NAME = "nvidia-bug-report"
# its sections are read by these formats' readers: their free-text scanners must not read them again
COVERS = ("kernel-log", "nvrm-xid", "nvidia-smi-q", "nvidia-smi-table")

_START = "Start of NVIDIA bug report log file"
_SEPARATOR = r"^_{20,}\s*$"
_NVSMI_TITLE = r"nvidia-smi\s+(?:--query|-q)\b"
# the script writes `--query` and `--query --unit` (`-q`, `-q -u` before) one after the other with no
# separator between them: a command line at the start of a line opens a section of its own
_NVSMI_COMMAND = r"^(?:\S*/)?nvidia-smi\s+(?:--query|-q)\b"
_UNITS = r"\s(?:--unit|-u)\b"   # the S-class units' report, no GPU memory in it
# the kernel messages section's title changed with the script's versions
_KERNEL_TITLES = ("dmesg:", "Scanning kernel log files for NVIDIA kernel messages:",
                  "Scanning kernel log files for NVRM messages:")
_MEMINFO_TITLE = "*** /proc/meminfo"
_MEMINFO_RE = r"^(?<key>[A-Za-z_()0-9]+):\s+(?<kib>[0-9]+) kB\s*$"
_DATE_RE = re.compile(r"^Date:\s*(?P<date>.+?)\s*$")
# the parts of `date`'s output in any locale that date the report: a year, and an English or CJK month and day
_YEAR_RE = re.compile(r"(?<![0-9])(?:19[89][0-9]|20[0-9]{2})(?![0-9])")   # `2019年` has no word boundary
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_EN_DAY_RE = re.compile(r"\b(?P<mon>" + "|".join(_MONTHS) + r")[a-z]*\.?\s+(?P<day>[0-9]{1,2})\b", re.IGNORECASE)
_CJK_DAY_RE = re.compile(r"(?P<mon>[0-9]{1,2})月\s*(?P<day>[0-9]{1,2})日")
UNREAD = "section of the bug report that holds no memory readings, not read"


def sniff(head: list[str]) -> str | None:
    for i, line in enumerate(head[:12], 1):
        if line.startswith(_START):
            return f"nvidia-bug-report.sh log ('{_START}' on line {i})"
    return None


def _sections(df: pl.DataFrame) -> pl.DataFrame:
    """line, text, sec (section number), title (the section's first non-blank line)."""
    t = pl.col("text")
    df = df.with_columns((t.str.contains(_SEPARATOR) | t.str.contains(_NVSMI_COMMAND)).cum_sum().alias("sec"))
    body = df.filter(~pl.col("text").str.contains(_SEPARATOR))
    titles = (body.filter(pl.col("text").str.strip_chars() != "").group_by("sec")
              .agg(pl.col("text").first().str.strip_chars().alias("title")))
    return body.join(titles, on="sec", how="left")


def _meminfo(lines: pl.DataFrame, p: Parsed) -> None:
    kv = (lines.select(pl.col("text").str.extract_groups(_MEMINFO_RE).alias("g")).unnest("g")
          .drop_nulls())
    if not kv.height:
        return
    info = {k: int(v) * 1024 for k, v in kv.iter_rows()}
    p.meta["meminfo"] = info
    total, avail = info.get("MemTotal"), info.get("MemAvailable")
    if total and avail is not None:
        p.notes.append(f"host memory when the report was made (/proc/meminfo): {human(total - avail)} in use of "
                       f"{human(total)} ({human(avail)} available)")


def _report_day(date: str) -> tuple[int, int | None, int | None] | None:
    """(year, month, day) of the report's `Date:` line; month and day None where the locale's month
    name is not read (the year alone is then known)."""
    years = _YEAR_RE.findall(date)
    if not years:
        return None
    year = int(years[-1])
    if m := _EN_DAY_RE.search(date):
        return year, _MONTHS.index(m["mon"][:3].lower()) + 1, int(m["day"])
    if m := _CJK_DAY_RE.search(date):
        return year, int(m["mon"]), int(m["day"])
    return year, None, None


def _kernel_reader(src, opts: Options, date: str | None) -> tuple[KernelReader, bool]:
    """The kernel reader for the report's kernel lines. Their syslog stamps have no year: the report's
    date, not the file's (a copy's) mtime, is when they were written, so it dates them unless --year
    was given. Also whether it did."""
    day = _report_day(date) if date and opts.year is None else None
    if day is None:
        return KernelReader(src, opts), False
    year, month, mday = day
    if month is None:   # the year alone: the year of the last kernel line
        return KernelReader(src, dataclasses.replace(opts, year=year)), True
    try:
        noon = datetime(year, month, mday, 12, tzinfo=timezone.utc).timestamp()
    except ValueError:
        return KernelReader(src, dataclasses.replace(opts, year=year)), True
    dated = copy.copy(src)   # (an archive member's Source is no plain dataclass: copied, not replaced)
    dated.mtime = noon
    return KernelReader(dated, dataclasses.replace(opts, year_from_mtime=True)), True


def _date_note(header: pl.DataFrame, kernel: Parsed, p: Parsed) -> None:
    """The bound on the dmesg's boot that the report's date gives (the date's zone is an abbreviation
    or an offset as `date` printed it: parsed when it is an offset, else said as text)."""
    dates = [m.group("date") for t in header["text"].to_list() if (m := _DATE_RE.match(t))]
    if not dates:
        return
    p.meta["report_date"] = dates[0]
    up = kernel.events["uptime"].drop_nulls() if kernel.events.height else pl.Series([], dtype=pl.Float64)
    if kernel.samples.height:
        up = pl.concat([up, kernel.samples["uptime"].drop_nulls()])
    if up.len() and kernel.clock == "uptime":
        p.notes.append(f"the report was made on {dates[0]}: the dmesg's last boot began at least {up.max():.0f} s "
                       "before that (its last uptime stamp); pass --boot-time to place its uptime stamps when no "
                       "kernel log line in the report carries both a clock and an uptime")


def parse(src, opts: Options) -> Parsed:
    df = src.frame().select("line", "text")
    sec = _sections(df)
    p = Parsed(skipped=Skipped())
    read_secs: set[int] = set()
    parts: list[Parsed] = []
    head = sec.filter(pl.col("text").str.starts_with(_START))["sec"]
    first_sec = head[0] if head.len() else None

    nvsmi_secs = sec.filter((pl.col("title").str.contains(_NVSMI_TITLE)
                             | pl.col("text").str.contains(r"^=+NVSMI LOG=+\s*$|<nvidia_smi_log>"))
                            & ~pl.col("title").str.contains(_UNITS))["sec"].unique()
    for s in nvsmi_secs.sort().to_list():
        lines = sec.filter(pl.col("sec") == s).select("line", "text")
        fmt, _ = nvsmi.first_section(lines["text"].head(200).to_list())
        if fmt in nvsmi.SECTION_READERS:
            parts.append(nvsmi.SECTION_READERS[fmt](lines, src.path, opts, nested=True))
            read_secs.add(s)

    kernel_lines = sec.filter(pl.col("title").is_in(list(_KERNEL_TITLES)) & (pl.col("text").str.strip_chars() != "")
                              & ~pl.col("text").str.strip_chars().is_in(list(_KERNEL_TITLES)))
    kernel = Parsed()
    if kernel_lines.height:
        header = sec.filter(pl.col("sec") == first_sec)["text"].to_list() if first_sec is not None else []
        date = next((m.group("date") for t in header if (m := _DATE_RE.match(t))), None)
        reader, dated = _kernel_reader(src, opts, date)
        reader.feed(kernel_lines.select("line", "text"))
        kernel = reader.finish()
        if dated and "year_from" in kernel.meta:
            # said as what it is: the report's date, not a file time or --year
            kernel.meta["year_from"] = re.sub(r"^syslog year from [^:]*", f"syslog year from the report's Date ({date})",
                                              kernel.meta["year_from"])
        parts.append(kernel)
        read_secs.update(kernel_lines["sec"].unique().to_list())

    mem = sec.filter(pl.col("title") == _MEMINFO_TITLE)
    if mem.height:
        _meminfo(mem, p)
        read_secs.update(mem["sec"].unique().to_list())
    if first_sec is not None:
        _date_note(sec.filter(pl.col("sec") == first_sec), kernel, p)
        read_secs.add(first_sec)

    for part in parts:
        p.samples = pl.concat([p.samples, part.samples], how="vertical_relaxed")
        p.events = pl.concat([p.events, part.events], how="vertical_relaxed")
        p.skipped.merge(part.skipped)
        p.notes.extend(part.notes)
        for k, v in part.meta.items():
            p.meta.setdefault(k, v)
    p.clock = kernel.clock if kernel.records else next((x.clock for x in parts if x.records), "none")
    unread = sec.filter(~pl.col("sec").is_in(sorted(read_secs)) & (pl.col("text").str.strip_chars() != ""))
    p.skipped.add_lines(UNREAD, unread["line"])
    p.notes.append(f"{len(read_secs)} of {sec['sec'].n_unique()} sections read (nvidia-smi, kernel messages, "
                   "/proc/meminfo, the header); the others hold no memory readings")
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    covers=COVERS,
    files="`nvidia-bug-report.log(.gz)` (nvidia-bug-report.sh): read section by section",
    yields="its `nvidia-smi --query` section as `nvidia-smi-q`, its `dmesg:` and kernel-log sections as "
           "`kernel-log` (the dmesg placed by kern.log lines that carry clock and uptime), `/proc/meminfo` as "
           "facts",
)
