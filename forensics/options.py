"""Options that reach every stage: time zones, year and boot-time anchors, declared CSV columns."""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from forensics.errors import UsageError


def local_zone_name() -> str:
    """The machine's IANA zone name (TZ, /etc/timezone, /etc/localtime link), else UTC."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and _valid_zone(tz):
        return tz
    try:
        name = Path("/etc/timezone").read_text().strip()
        if _valid_zone(name):
            return name
    except OSError:
        pass
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            name = target.split("zoneinfo/", 1)[1]
            if _valid_zone(name):
                return name
    except OSError:
        pass
    return "UTC"


def _valid_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError   # here: its import reads the platform's settings, which --help needs not

    try:
        ZoneInfo(name)
        return True
    except (ZoneInfoNotFoundError, ValueError):
        return False


def check_zone(name: str) -> str:
    if not _valid_zone(name):
        raise UsageError(f"--tz {name}: unknown time zone, use an IANA name such as Europe/Berlin or UTC")
    return name


def check_columns(spec: str) -> list[str]:
    """--columns a,b,c -> the column names; a UsageError that says how to fix a bad list."""
    from forensics.parsers.nvsmi.csvcolumns import parse_declared

    try:
        return parse_declared(spec)
    except ValueError as e:
        raise UsageError(str(e)) from None


@dataclass
class Options:
    tz: str = field(default_factory=local_zone_name)
    tz_from_user: bool = False
    tz_overrides: dict[str, str] = field(default_factory=dict)  # file name or glob -> zone
    year: int | None = None
    boot_time: datetime | None = None   # aware, UTC
    start: datetime | None = None       # clock anchor for untimed sources, aware
    end: datetime | None = None         # or their last sample's time, aware (with interval)
    interval: float | None = None       # seconds between samples of untimed sources (with start or end)
    year_from_mtime: bool = True
    columns: list[str] | None = None    # the columns of headerless nvidia-smi CSV (--columns)
    # the most (decompressed) bytes a file claimed by its bytes (a memory snapshot) is read to
    # (--max-snapshot-size): reading costs about 20 s and 1 GiB of memory per GiB
    max_snapshot_bytes: int = 2 << 30
    # the most trace entries and blocks a snapshot is walked to, counted as they are walked, a list
    # referred to again through the pickle's memo counted again (--max-snapshot-objects): a few MB of
    # memo references can list billions of them; a real 2 GiB snapshot holds far fewer
    max_snapshot_objects: int = 50_000_000
    # what is read of one .tar/.zip archive (--archive-max-members, --archive-max-size): a few
    # kilobytes of archive can claim terabytes or millions of members
    archive_max_members: int = 10_000
    archive_max_bytes: int = 64 << 30
    # the most bytes a compressed file (.gz, .xz, .bz2, .zst) is read to after decompression
    # (--max-decompressed): a few MB of gzip can hold terabytes of zeros
    max_decompressed_bytes: int = 64 << 30
    # the most bytes a one-document format (a JSON export) is read to, whole (--max-document-size):
    # parsing it costs about three times its size in memory, and a few MB of gzip can hold gigabytes
    max_document_bytes: int = 512 << 20
    # memory series analyzed per report (--max-series): detection costs time per series, and a
    # Prometheus export can hold tens of thousands; past it, the series that grow most are kept
    max_series: int = 5000
    # scan: the archive (resolved) that links must not lead out of (None: links are followed, as for
    # `report` of the user's own folder; scan --follow-links-out), and folders never read (its output)
    read_within: str | None = None
    never_read: tuple[str, ...] = ()

    def tz_for(self, path: str) -> str:
        """The zone of clocks without one in this file: a per-file override, else --tz."""
        base = os.path.basename(path)
        for pattern, zone in self.tz_overrides.items():
            if fnmatch.fnmatch(base, pattern) or fnmatch.fnmatch(path, pattern) or path.endswith("/" + pattern):
                return zone
        return self.tz


def unused_flags(opts: Options, inputs) -> list[tuple[str, str]]:
    """The clock and column options given that none of `inputs` (a bundle's) needed, each with why: such
    an option is likely aimed at a file that was not passed, or misread."""
    read = [i for i in inputs if i.format and not i.error]
    clocks = {i.clock for i in read}
    unused = []
    if opts.boot_time is not None and "uptime" not in clocks:
        unused.append(("--boot-time", "no input has seconds-since-boot stamps (dmesg without -T)"))
    if opts.year is not None and "wall-yearless" not in clocks:
        unused.append(("--year", "no input has syslog stamps without a year"))
    if opts.interval is not None and "none" not in clocks:
        unused.append(("--interval", "every input has its own clock"))
    if opts.columns is not None and not any("--columns" in n for i in read for n in i.notes):
        unused.append(("--columns", "no input is an nvidia-smi CSV without a header"))
    return unused

