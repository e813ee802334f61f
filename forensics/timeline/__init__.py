"""One timeline from clocks that disagree.

`align(bundle, opts)` puts every row that can have a UTC `time` on one clock and says, per input, how
(`InputInfo.anchor`, a sentence) and what looked wrong (`InputInfo.notes`). Steps, in order:

1. GPU identifiers: UUIDs and PCI bus ids become indices where an nvidia-smi input maps them
   (`InputInfo.meta["gpu_map"]`), in every table.
2. Yearless syslog: a rotated set (kern.log.2.gz, kern.log.1, kern.log) is made to continue itself
   (an older file ends before the next one starts); without --year, a set whose mtime-given years
   overlap no input with an explicit year, while exactly one other year would, takes that year.
3. dmesg uptime stamps: each boot (uptime going backwards starts a new one) is anchored by --boot-time
   (the last boot of a source), by the source's own lines carrying clock and uptime, by lines of another
   source with the same text and the same uptime (kern.log), or by lines of a wall-clock twin with the
   same text (dmesg -T, dmesg --time-format iso). A boot without anchor keeps its uptime and no time.
4. Sources without a clock stay on their sample index unless a sound anchor places them: --start or
   --end with --interval, or the same memory curve in a timed source (offset and interval fitted,
   accepted only on a close, unique fit). Their events take the time of the nearest sample line.
5. Clock skew: an incident seen by two sources (an oom_kill of a pid vs the pid vanishing from an
   nvidia-smi process list, or vs the fall of its GPU's memory.used; a CUDA OOM stamped after the GPU
   memory already fell) measures how far their clocks disagree. It is
   reported (note + meta["skew_seconds"]) and never applied: one incident is thin evidence for moving
   every row of a file, and the usual cause, a zone, is fixed by the user with --tz FILE=ZONE.

`write_aligned(bundle, path)` writes the aligned tables (see there for the layout).
"""
from __future__ import annotations

import calendar
import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl

from forensics.report import write as outputs
from forensics.clock import localize
from forensics.errors import UsageError
from forensics.model import Bundle, InputInfo
from forensics.options import Options
from forensics.model import EVENTS_SCHEMA, SAMPLES_SCHEMA, conform
from forensics.io.sources import rotation_key
from forensics.frames import rows_where

MIB = 1 << 20
US = 1_000_000

# uptime falling by more than this between consecutive lines is a reboot (printk stamps of different
# CPUs can be a little out of order)
REBOOT_DROP_S = 1.0
# wall-clock twins of an uptime source: offsets (time - uptime) of lines of one boot agree within this
TWIN_WINDOW_S = 2.0
# offsets spread wider than this within one boot mean the clock moved against uptime (suspend, NTP step):
# each line then takes the offset of its nearest paired line instead of the boot's median
DRIFT_S = 2.0
# texts repeated more often than this in a source are useless for matching twins
MAX_REPEATS = 20
# curve matching (untimed -> timed)
MIN_CURVE_POINTS = 20
MIN_CURVE_RANGE = 16 * MIB
MIN_R = 0.98
MIN_FIT = 0.95            # 1 - mse / variance, with the values compared as they are (same GPU, same bytes)
MIN_BRACKETED = 0.9       # share of readings between the timed readings just before and after them
BRACKET_SLACK = 16 * MIB  # nvidia-smi rounds to MiB; allocator noise between two readings
MIN_COVERED = 0.5         # share of the untimed readings that the timed series verifies
COARSE_POSITIONS = 4096    # positions of the untimed series in the coarse search
COARSE_GRID = 1 << 17      # grid points of the timed series in the coarse search
REFINE_POINTS = 2000
CURVE_SERIES = ("memory.used", "process.used", "allocated", "reserved")
COMMON_INTERVALS = (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)
# a rotated file may overlap its successor by a few duplicated lines (copytruncate)
ROTATION_OVERLAP = timedelta(hours=1)

_CTIME_PREFIX = r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\]"


# --------------------------------------------------------------------------------------------------
# entry point


def align(bundle: Bundle, opts: Options) -> Bundle:
    """UTC `time` for every row that can have one; InputInfo.start/end/anchor/notes filled."""
    samples = conform(bundle.samples, SAMPLES_SCHEMA)
    events = conform(bundle.events, EVENTS_SCHEMA)
    infos = {i.path: i for i in bundle.inputs if i.error is None}
    for info in infos.values():
        info.anchor = None

    samples, events = unify_gpus(samples, events, list(infos.values()))
    _base_anchors(samples, events, infos, opts)
    samples, events = continue_rotated_sets(samples, events, infos, opts)
    if opts.year is None:
        samples, events = agree_years_with_bundle(samples, events, infos, opts)
    samples, events = anchor_uptime(samples, events, infos, opts)
    samples, events = place_untimed(samples, events, infos, opts)
    detect_skew(samples, events, infos)
    _fill_spans(samples, events, infos)
    return Bundle(inputs=bundle.inputs, samples=samples, events=events, problems=bundle.problems)


TWIN_KINDS = ("oom_kill", "oom_invoked", "oom_reaped", "xid")
TWIN_WINDOW_S = 2.0  # dmesg -T truncates to the second; two real kills of one pid are never this close


def merge_twin_events(events: pl.DataFrame) -> pl.DataFrame:
    """One row per kernel event that several views of the same ring buffer repeat (raw `dmesg`,
    `dmesg -T`, `dmesg --time-format iso`, kern.log): same kind, pid and bytes, from different files,
    within TWIN_WINDOW_S once aligned. Kept: the copy with the finest clock (sub-second, then an
    explicit one), the others' file:line go into its detail as `twins` so the report can quote them."""
    kernel = rows_where(events, pl.col("kind").is_in(TWIN_KINDS) & pl.col("time").is_not_null())
    if kernel.height < 2 or kernel["source"].n_unique() < 2:
        return events
    kernel = kernel.with_row_index("_k").with_columns(
        (pl.col("time").dt.microsecond() == 0).alias("_coarse"),
        pl.col("time").dt.epoch("us").alias("_us"),
    )
    rows = kernel.sort(["kind", "pid", "bytes", "_us"]).to_dicts()
    drop, twins = set(), {}
    groups: list[list[dict]] = []
    for r in rows:
        g = groups[-1] if groups else None
        if (g and (r["kind"], r["pid"], r["bytes"]) == (g[0]["kind"], g[0]["pid"], g[0]["bytes"])
                and r["_us"] - g[0]["_us"] <= TWIN_WINDOW_S * 1e6
                and r["source"] not in {x["source"] for x in g}):
            g.append(r)
        else:
            groups.append([r])
    for g in groups:
        if len(g) < 2:
            continue
        keep = min(g, key=lambda x: (x["_coarse"], x["_k"]))
        for x in g:
            if x is not keep:
                drop.add((x["source"], x["line"], x["kind"]))
        twins[(keep["source"], keep["line"], keep["kind"])] = [f"{x['source']}:{x['line']}" for x in g if x is not keep]
    if not drop:
        return events

    def with_twins(row: dict) -> str | None:
        extra = twins.get((row["source"], row["line"], row["kind"]))
        if not extra:
            return row["detail"]
        try:
            d = json.loads(row["detail"]) if row["detail"] else {}
        except ValueError:
            d = {}
        d["twins"] = extra
        return json.dumps(d)

    keys = ["source", "line", "kind"]
    key_schema = {"source": pl.String, "line": pl.Int64, "kind": pl.String}
    out = events.join(pl.DataFrame(list(drop), schema=key_schema, orient="row"), on=keys, how="anti", nulls_equal=True)
    kept = pl.DataFrame(list(twins), schema=key_schema, orient="row")
    rows = out.join(kept, on=keys, how="semi").select(*keys, "detail").to_dicts()
    patched = pl.DataFrame({**{k: [r[k] for r in rows] for k in keys}, "_d": [with_twins(r) for r in rows]},
                           schema={**key_schema, "_d": pl.String})
    return (out.join(patched, on=keys, how="left", nulls_equal=True)
            .with_columns(pl.coalesce("_d", "detail").alias("detail")).drop("_d"))


def merge_twin_samples(samples: pl.DataFrame) -> pl.DataFrame:
    """The kernel task-table readings (`host.rss`) that several views of one ring buffer repeat:
    same pid and bytes within TWIN_WINDOW_S from different files; the finest-clocked file's copy stays."""
    mine = pl.col("series") == "host.rss"
    rss = rows_where(samples, mine & pl.col("time").is_not_null())
    if rss.height < 2 or rss["source"].n_unique() < 2:
        return samples
    order = {src: i for i, src in enumerate(samples["source"].unique(maintain_order=True).to_list())}
    rss = (rss.with_columns(
        pl.col("time").dt.epoch("us").alias("_us"),
        (pl.col("time").dt.microsecond() == 0).alias("_coarse"),
        pl.col("source").replace_strict(order, return_dtype=pl.Int64).alias("_src"))
        .sort(["pid", "bytes", "_us"])
        .with_columns((((pl.col("_us").diff() > TWIN_WINDOW_S * 1e6) | (pl.col("pid") != pl.col("pid").shift())
                        | (pl.col("bytes") != pl.col("bytes").shift())).fill_null(True).cum_sum()).alias("_cluster")))
    best = (rss.sort(["_coarse", "_src"]).group_by("_cluster", maintain_order=True)
            .agg(pl.col("source").first().alias("_keep")))
    drop = rss.join(best, on="_cluster").filter(pl.col("source") != pl.col("_keep")).select("source", "line", "series")
    if drop.height == 0:
        return samples
    return samples.join(drop, on=["source", "line", "series"], how="anti", nulls_equal=True)


# --------------------------------------------------------------------------------------------------
# helpers


def _epoch_us(col: str = "time") -> pl.Expr:
    return pl.col(col).dt.epoch("us")


def _from_us(expr: pl.Expr) -> pl.Expr:
    return pl.from_epoch(expr.cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC")


def _uptime_us() -> pl.Expr:
    return (pl.col("uptime") * US).round(0).cast(pl.Int64)


def _iso(us: int | float | datetime | None) -> str:
    if us is None:
        return "?"
    t = us if isinstance(us, datetime) else datetime.fromtimestamp(us / US, tz=timezone.utc)
    t = t.astimezone(timezone.utc)
    return t.isoformat(timespec="milliseconds" if t.microsecond else "seconds").replace("+00:00", "Z")


def _seconds(x: float) -> str:
    ax = abs(x)
    if ax >= 3600:
        return f"{x / 3600:.2f} h"
    if ax >= 120:
        return f"{x / 60:.1f} min"
    return f"{x:.1f} s" if ax >= 1 else f"{x:.3f} s"


def _times(samples: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """source, line, time of every row of both tables."""
    return pl.concat([samples.select("source", "line", "time"), events.select("source", "line", "time")])


def _spans(samples: pl.DataFrame, events: pl.DataFrame) -> dict[str, tuple[datetime, datetime]]:
    t = _times(samples, events).drop_nulls("time").group_by("source").agg(
        pl.col("time").min().alias("start"), pl.col("time").max().alias("end"))
    return {r["source"]: (r["start"], r["end"]) for r in t.iter_rows(named=True)}


def _zone_reason(path: str, opts: Options) -> tuple[str, str]:
    """(zone, why) for a file whose clock carries no zone."""
    zone = opts.tz_for(path)
    for pattern, z in opts.tz_overrides.items():
        if Options(tz="", tz_overrides={pattern: z}).tz_for(path) == z:
            return zone, f"--tz {pattern}={z}"
    if opts.tz_from_user:
        return zone, "--tz"
    return zone, "this machine's zone; pass --tz ZONE if the log was written elsewhere"


def _is_ctime_source(events: pl.DataFrame, path: str) -> bool:
    """A `dmesg -T` output: its stamps are computed by dmesg from the current boot time."""
    texts = rows_where(events, pl.col("source") == path)["text"].drop_nulls().head(200)
    return texts.len() > 0 and bool(texts.str.contains(_CTIME_PREFIX).mean() > 0.5)


_DMESG_T_CAVEAT = ("dmesg -T stamps are boot time + uptime, and uptime stops while the machine sleeps: "
                   "after a suspend they run early by the time spent asleep")


# --------------------------------------------------------------------------------------------------
# 1. GPU identifiers

_BUS_RE = r"^(?:pci:|gpu\s*)?(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$"


def gpu_key(expr: pl.Expr) -> pl.Expr:
    """A canonical key for a GPU id: `gpu-<uuid>` lowercased, or `<domain>:<bus>:<dev>.<fn>` in
    lowercase hex without leading domain zeros (00000000:3B:00.0, PCI:0000:3b:00, 0000:3b:00.0 and
    3b:00.0 are one key); anything else (an index) maps to null."""
    low = expr.str.strip_chars().str.to_lowercase()
    bus = low.str.extract_groups(_BUS_RE)
    domain = bus.struct.field("1").fill_null("0").str.strip_chars_start("0")
    bus_key = pl.concat_str([
        domain, pl.lit(":"), bus.struct.field("2").str.zfill(2), pl.lit(":"),
        bus.struct.field("3").str.zfill(2), pl.lit("."), bus.struct.field("4").fill_null("0"),
    ])
    return (pl.when(low.str.starts_with("gpu-")).then(low)
            .when(bus.struct.field("2").is_not_null()).then(bus_key)
            .otherwise(None))


def _one_gpu_pairs(samples: pl.DataFrame, inputs: list[InputInfo]) -> list[tuple[str, str, str]]:
    """(id, index, path) for a job logged on one GPU by several loggers that name it differently (a
    monitoring query by its bus id, compute-apps by its UUID, dmon and `-l 1` by its index): when
    every input names a single GPU, one index in all, at most one UUID and one bus id, they are one
    GPU. Each input it applies to says so."""
    rows = samples.filter(pl.col("gpu").is_not_null()).select("source", "host", "gpu").unique()
    if rows.is_empty() or rows["host"].n_unique() > 1 or rows.group_by("source").len()["len"].max() > 1:
        return []
    keyed = rows.with_columns(gpu_key(pl.col("gpu")).alias("key"))
    indices = keyed.filter(pl.col("key").is_null())["gpu"].unique().to_list()
    ids = keyed.filter(pl.col("key").is_not_null())
    if len(indices) != 1 or ids.is_empty():
        return []
    kinds = ids.with_columns(pl.col("key").str.starts_with("gpu-").alias("uuid")).group_by("uuid").agg(pl.col("key").n_unique())
    if kinds["key"].max() > 1:
        return []
    by_path = {i.path: i for i in inputs}
    for r in ids.iter_rows(named=True):
        if r["source"] in by_path:
            by_path[r["source"]].notes.append(
                f"every input names one GPU: {r['gpu']} is taken as GPU {indices[0]}, the one the other inputs name")
    return [(r["gpu"], indices[0], r["source"]) for r in ids.iter_rows(named=True)]


def unify_gpus(samples: pl.DataFrame, events: pl.DataFrame, inputs: list[InputInfo]):
    """Rewrite UUIDs and bus ids to GPU indices where the inputs' gpu_map says which index they are,
    or where every input names a single GPU (`_one_gpu_pairs`)."""
    pairs = [(k, str(v), info.path) for info in inputs for k, v in (info.meta.get("gpu_map") or {}).items()
             if k is not None and v is not None]
    if not pairs:
        pairs = _one_gpu_pairs(samples, inputs)
    if not pairs:
        return samples, events
    m = pl.DataFrame(pairs, schema={"id": pl.String, "index": pl.String, "path": pl.String}, orient="row")
    m = m.with_columns(gpu_key(pl.col("id")).alias("key")).drop_nulls("key")
    per_key = m.group_by("key").agg(pl.col("index").unique().alias("indices"), pl.col("path").unique().alias("paths"))
    conflicting = per_key.filter(pl.col("indices").list.len() > 1)
    for row in conflicting.iter_rows(named=True):
        for info in inputs:
            if info.path in row["paths"]:
                info.notes.append(f"GPU {row['key']} is index {' and '.join(sorted(row['indices']))} in different "
                                  "inputs (other hosts?): it is left as it is")
    mapping = {r["key"]: r["indices"][0] for r in per_key.filter(pl.col("indices").list.len() == 1).iter_rows(named=True)}
    if not mapping:
        return samples, events

    def rewrite(df: pl.DataFrame) -> pl.DataFrame:
        mapped = gpu_key(pl.col("gpu")).replace_strict(mapping, default=None, return_dtype=pl.String)
        return df.with_columns(pl.coalesce(mapped, pl.col("gpu")).alias("gpu"))

    return rewrite(samples), rewrite(events)


# --------------------------------------------------------------------------------------------------
# base anchors (what the parsers already did)


def _base_anchors(samples, events, infos: dict[str, InputInfo], opts: Options) -> None:
    timed = set(_times(samples, events).drop_nulls("time")["source"].unique().to_list())
    for path, info in infos.items():
        if path not in timed:
            continue
        if info.clock == "wall":
            info.anchor = "explicit offset in the timestamps"
        elif info.clock in ("wall-assumed", "wall-yearless"):
            zone, why = _zone_reason(path, opts)
            local = f"local time read as {zone} ({why})"
            if info.clock == "wall-yearless":
                year_from = info.meta.get("year_from") or (
                    f"syslog year from --year {opts.year}" if opts.year else "syslog year from the file's mtime")
                info.anchor = f"{year_from}; {local}"
            else:
                info.anchor = local
            if _is_ctime_source(events, path):
                info.anchor += f"; {_DMESG_T_CAVEAT}"
        else:
            info.anchor = "clock from the log's own timestamps"


# --------------------------------------------------------------------------------------------------
# 2. yearless syslog: rotated sets and explicit years elsewhere in the bundle


def _shift_years(df: pl.DataFrame, path: str, years: int, zone: str) -> pl.DataFrame:
    """Move a source's rows by whole years on its local calendar (DST read again for the new dates)."""
    mask = (df["source"] == path).fill_null(False)
    if not mask.any():
        return df
    naive = pl.col("time").dt.convert_time_zone(zone).dt.replace_time_zone(None).dt.offset_by(f"{years}y")
    moved = df.filter(mask).select(localize(naive, zone).alias("time"))["time"]
    return df.with_columns(df["time"].scatter(pl.Series(np.flatnonzero(mask.to_numpy())), moved).alias("time"))


def _add_years(t: datetime, years: int) -> datetime:
    try:
        return t.replace(year=t.year + years)
    except ValueError:  # 29 February
        return t.replace(year=t.year + years, day=28)


def _feb29_years(samples, events, path: str, zone: str) -> list[int]:
    local = _times(samples, events).filter(pl.col("source") == path).drop_nulls("time").select(
        pl.col("time").dt.convert_time_zone(zone).alias("t"))
    return local.filter((pl.col("t").dt.month() == 2) & (pl.col("t").dt.day() == 29))["t"].dt.year().unique().to_list()


def _rotated_sets(infos: dict[str, InputInfo]) -> list[list[str]]:
    """Yearless inputs grouped by rotated set (same folder and base name), oldest first."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path, info in infos.items():
        if info.clock == "wall-yearless":
            base = rotation_key(os.path.basename(path))[0]
            groups.setdefault((os.path.dirname(path), base), []).append(path)
    return [sorted(paths, key=lambda p: rotation_key(os.path.basename(p))) for paths in groups.values()]


def continue_rotated_sets(samples, events, infos: dict[str, InputInfo], opts: Options):
    """Each older file of a rotated yearless set must end before the next newer one starts. Walking from
    the newest, an older file that does not is moved back by whole years: each file's year came from its
    own mtime (or --year, which names the last year only), and copied files lose their mtimes."""
    for members in _rotated_sets(infos):
        spans = _spans(samples, events)
        members = [m for m in members if m in spans]
        for older, newer in reversed(list(zip(members, members[1:]))):
            start_newer, end_older = spans[newer][0], spans[older][1]
            back = 0
            while back < 30 and _add_years(end_older, -back) - ROTATION_OVERLAP > start_newer:
                back += 1
            if not back:
                continue
            zone = opts.tz_for(older)
            info = infos[older]
            if any(not calendar.isleap(y - back) for y in _feb29_years(samples, events, older, zone)):
                info.notes.append(f"it ends after {newer} starts, but moving it back {back} year(s) would put "
                                  "29 February in a non-leap year: years left as they were, pass --year")
                continue
            samples = _shift_years(samples, older, -back, zone)
            events = _shift_years(events, older, -back, zone)
            msg = f"moved back {back} year{'s' if back > 1 else ''} to end before {newer} starts (rotated set)"
            info.notes.append(f"syslog years {msg}")
            if info.anchor:
                info.anchor += f"; {msg}"
            spans = _spans(samples, events)
    return samples, events


def agree_years_with_bundle(samples, events, infos: dict[str, InputInfo], opts: Options):
    """A yearless set whose (mtime-given) years overlap no input with an explicit year, while exactly one
    other year would make it overlap one, takes that year: mtimes are lost by copying, printed years are not."""
    spans = _spans(samples, events)
    explicit = [(p, spans[p]) for p, i in infos.items() if i.clock in ("wall", "wall-assumed") and p in spans]
    if not explicit:
        return samples, events
    slack = timedelta(hours=1)

    def overlapping(lo: datetime, hi: datetime) -> list[str]:
        return [p for p, (s, e) in explicit if lo - slack <= e and s <= hi + slack]

    for members in _rotated_sets(infos):
        members = [m for m in members if m in spans]
        if not members:
            continue
        lo = min(spans[m][0] for m in members)
        hi = max(spans[m][1] for m in members)
        if overlapping(lo, hi):
            continue
        fits = {}
        for k in range(-10, 11):
            if k == 0:
                continue
            hits = overlapping(_add_years(lo, k), _add_years(hi, k))
            if hits:
                fits[k] = hits
        if len(fits) != 1:
            continue
        (k, hits), = fits.items()
        for m in members:
            zone = opts.tz_for(m)
            samples = _shift_years(samples, m, k, zone)
            events = _shift_years(events, m, k, zone)
            year = lo.year + k
            msg = (f"syslog year {year} taken from {hits[0]}, which has an explicit year and overlaps it then "
                   f"(its mtime gave {lo.year}, when no input with a year overlaps it)")
            infos[m].notes.append(msg)
            zone_, why = _zone_reason(m, opts)
            infos[m].anchor = f"{msg}; local time read as {zone_} ({why})"
    return samples, events


# --------------------------------------------------------------------------------------------------
# 3. dmesg uptime stamps


def message_key(text: pl.Expr) -> pl.Expr:
    """The kernel message without its stamps and prefixes, for matching one line across outputs
    (raw dmesg, dmesg -T, dmesg --time-format iso, kern.log, journal)."""
    return (
        text.str.replace(r"^<[0-9]+>", "")
        .str.replace(r"^[^\[]{0,120}?\bkernel:\s*", "")
        .str.replace(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.,]+(?:[zZ]|[+-][0-9]{2}:?[0-9]{2})?\s+", "")
        .str.replace(r"^(?:\s*\[[^\]]*\])+", "")
        .str.replace(r"^\s*\S+ kernel:\s*", "")   # journalctl -o short-monotonic: `[ 12.3] host kernel: `
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


@dataclass
class BootAnchor:
    source: str
    boot: int
    boot_us: int | None          # boot instant, µs since epoch
    how: str                     # sentence fragment
    nearest: bool = False        # place rows by their nearest paired line (clock drifted against uptime)


def _boot_from_offsets(off_us: np.ndarray, whole_seconds: bool) -> int:
    """Boot instant from offsets (clock - uptime). Clocks printed to the second are truncated: each line
    says boot is in [t - u, t + 1 - u); the intersection is used when the lines agree on one."""
    if whole_seconds:
        lo, hi = off_us.max(), off_us.min() + US
        if lo <= hi:
            return int((lo + hi) // 2)
        return int(np.median(off_us) + US // 2)
    return int(np.median(off_us))


def _densest(off_us: np.ndarray, width_us: float) -> np.ndarray:
    """Indices of the largest group of offsets within `width_us` of each other."""
    order = np.argsort(off_us, kind="stable")
    s = off_us[order]
    ends = np.searchsorted(s, s + width_us, side="right")
    i = int(np.argmax(ends - np.arange(len(s))))
    return order[i:ends[i]]


def _segment_boots(samples: pl.DataFrame, events: pl.DataFrame, sources: list[str]) -> pl.DataFrame:
    """source, line, boot: boots numbered from 0 in file order; uptime falling back is a reboot."""
    rows = pl.concat([samples.select("source", "line", "uptime"), events.select("source", "line", "uptime")])
    rows = (rows.filter(pl.col("source").is_in(sources) & pl.col("uptime").is_not_null())
            .unique(["source", "line"], keep="first").sort("source", "line"))
    return rows.with_columns(
        ((pl.col("uptime") < pl.col("uptime").shift(1) - REBOOT_DROP_S).fill_null(False).cast(pl.Int32)
         .cum_sum().over("source")).alias("boot")
    ).select("source", "line", "boot")


def anchor_uptime(samples, events, infos: dict[str, InputInfo], opts: Options):
    need = pl.concat([
        rows_where(samples, pl.col("time").is_null() & pl.col("uptime").is_not_null()).select("source"),
        rows_where(events, pl.col("time").is_null() & pl.col("uptime").is_not_null()).select("source"),
    ])["source"].unique().drop_nulls().to_list()
    if not need:
        return samples, events
    boots = _segment_boots(samples, events, need)

    # offsets (clock - uptime) from the source's own lines that carry both
    both = pl.concat([
        df.filter(pl.col("source").is_in(need) & pl.col("time").is_not_null() & pl.col("uptime").is_not_null())
        .select("source", "line", "uptime", "time") for df in (samples, events)
    ]).unique(["source", "line"]).join(boots, on=["source", "line"])
    own = both.select("source", "boot", "uptime", (_epoch_us() - _uptime_us()).alias("off_us"),
                      (_epoch_us() % US == 0).alias("whole"))

    # twins: the same message in another source that has a clock
    ev = events.with_columns(message_key(pl.col("text")).alias("key")).filter(pl.col("key").str.len_chars() > 0)
    ev = ev.filter(pl.len().over("source", "kind", "key") <= MAX_REPEATS)
    mine = (ev.filter(pl.col("source").is_in(need) & pl.col("time").is_null() & pl.col("uptime").is_not_null())
            .join(boots, on=["source", "line"]).select("source", "boot", "line", "uptime", "kind", "key"))
    theirs = ev.filter(pl.col("time").is_not_null()).select(
        pl.col("source").alias("via"), "kind", "key", pl.col("time").alias("t"), pl.col("uptime").alias("u"))
    twins = (mine.join(theirs, on=["kind", "key"]).filter(pl.col("via") != pl.col("source"))
             .filter(pl.col("u").is_null() | ((pl.col("u") - pl.col("uptime")).abs() < 1e-3))
             .select("source", "boot", "line", "uptime", "via",
                     (_epoch_us("t") - _uptime_us()).alias("off_us"),
                     (_epoch_us("t") % US == 0).alias("whole"), pl.col("u").is_not_null().alias("exact")))

    anchors: dict[tuple[str, int], BootAnchor] = {}
    pair_rows: list[pl.DataFrame] = []
    seg_info = boots.group_by("source", "boot").agg(pl.col("line").min().alias("first"), pl.col("line").max().alias("last"))
    for seg in seg_info.sort("source", "boot").iter_rows(named=True):
        src, b = seg["source"], seg["boot"]
        anchor, pairs = _anchor_one_boot(src, b, own, twins, events)
        if anchor is not None:
            anchors[(src, b)] = anchor
            if anchor.nearest and pairs is not None:
                pair_rows.append(pairs)

    if opts.boot_time is not None:
        boot_us = int(opts.boot_time.astimezone(timezone.utc).timestamp() * US)
        last = seg_info.group_by("source").agg(pl.col("boot").max())
        for src, b in last.iter_rows():
            old = anchors.get((src, b))
            anchors[(src, b)] = BootAnchor(src, b, boot_us, f"to boot at {_iso(boot_us)} (--boot-time)")
            if old is not None and old.boot_us is not None and abs(old.boot_us - boot_us) > DRIFT_S * US:
                infos[src].notes.append(f"--boot-time {_iso(boot_us)} differs by {_seconds((old.boot_us - boot_us) / US)} "
                                        f"from the boot the logs show ({old.how}); --boot-time was used")

    table = pl.DataFrame(
        [(a.source, a.boot, a.boot_us, a.nearest) for a in anchors.values()],
        schema={"source": pl.String, "boot": pl.Int32, "boot_us": pl.Int64, "nearest": pl.Boolean}, orient="row")
    pairs = (pl.concat(pair_rows) if pair_rows else pl.DataFrame(
        schema={"source": pl.String, "boot": pl.Int32, "uptime": pl.Float64, "off_us": pl.Int64}))
    samples = _fill_from_uptime(samples, boots, table, pairs)
    events = _fill_from_uptime(events, boots, table, pairs)
    _uptime_anchor_text(need, seg_info, anchors, infos)
    return samples, events


def _anchor_one_boot(src: str, b: int, own: pl.DataFrame, twins: pl.DataFrame, events: pl.DataFrame):
    """(BootAnchor or None, the pairs used when rows are placed by their nearest pair)."""
    mine = own.filter((pl.col("source") == src) & (pl.col("boot") == b))
    if mine.height:
        return _anchor_from_pairs(src, b, mine, f"{mine.height} of its own lines carrying both clock and uptime")
    t = twins.filter((pl.col("source") == src) & (pl.col("boot") == b))
    if t.is_empty():
        return None, None
    best = None
    for via in t["via"].unique().sort().to_list():
        tv = t.filter(pl.col("via") == via)
        exact = tv.filter(pl.col("exact"))
        if exact.height:
            cand = (3, exact["line"].n_unique(), via, exact, True)
        else:
            off = tv["off_us"].to_numpy()
            keep = _densest(off, TWIN_WINDOW_S * US)
            cluster = tv[keep]
            n_lines = cluster["line"].n_unique()
            # the cluster must hold most matched lines and more than one (a lone repeated text proves little)
            if n_lines < 2 or n_lines * 2 <= tv["line"].n_unique():
                continue
            # a twin printing fractions of a second (dmesg --time-format iso) beats one printing whole seconds
            cand = (1 if cluster["whole"].all() else 2, n_lines, via, cluster, False)
        if best is None or cand[:2] > best[:2]:
            best = cand
    if best is None:
        return None, None
    _, n, via, pairs, exact = best
    if exact:
        what = f"{n} {os.path.basename(via)} lines carrying both clock and uptime (same text, same uptime)"
    else:
        what = f"{n} lines with the same text in {os.path.basename(via)}"
        if _is_ctime_source(events, via):
            what += f" ({_DMESG_T_CAVEAT})"
    return _anchor_from_pairs(src, b, pairs, what)


def _anchor_from_pairs(src: str, b: int, pairs: pl.DataFrame, what: str):
    off = pairs["off_us"].to_numpy()
    whole = bool(pairs["whole"].all())
    spread = (off.max() - off.min()) / US
    boot_us = _boot_from_offsets(off, whole)
    nearest = spread > DRIFT_S + (1.0 if whole else 0.0)
    how = f"to boot at {_iso(boot_us)} inferred from {what} (spread {spread:.1f} s)"
    if nearest:
        how += ("; the clock moved against uptime within this boot (suspend/resume or a clock step), "
                "so each line takes the offset of its nearest matched line")
    used = pairs.select("source", "boot", "uptime", "off_us").sort("uptime")
    return BootAnchor(src, b, boot_us, how, nearest), used


def _fill_from_uptime(df: pl.DataFrame, boots: pl.DataFrame, table: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    if df.is_empty() or table.is_empty():
        return df
    df = df.with_row_index("_r")
    todo = (df.filter(pl.col("time").is_null() & pl.col("uptime").is_not_null())
            .select("_r", "source", "line", "uptime")
            .join(boots, on=["source", "line"]).join(table, on=["source", "boot"]))
    if todo.is_empty():
        return df.drop("_r")
    by_median = todo.filter(~pl.col("nearest")).select("_r", (pl.col("boot_us") + _uptime_us()).alias("_t"))
    near = todo.filter(pl.col("nearest")).sort("uptime")
    if near.height:
        near = near.join_asof(pairs.sort("uptime"), on="uptime", by=["source", "boot"], strategy="nearest",
                               check_sortedness=False)
        by_pair = near.select("_r", (pl.col("off_us").fill_null(pl.col("boot_us")) + _uptime_us()).alias("_t"))
    else:
        by_pair = pl.DataFrame(schema={"_r": pl.UInt32, "_t": pl.Int64})
    filled = pl.concat([by_median, by_pair.cast({"_r": by_median["_r"].dtype})])
    out = df.join(filled, on="_r", how="left", maintain_order="left")
    return out.with_columns(pl.coalesce(pl.col("time"), _from_us(pl.col("_t"))).alias("time")).drop("_r", "_t")


def _uptime_anchor_text(need: list[str], seg_info: pl.DataFrame, anchors: dict, infos: dict[str, InputInfo]) -> None:
    unknown = ("boot time unknown: rows keep their seconds since boot and no clock time "
               "(pass --boot-time, or add kern.log or dmesg -T output of the same boot)")
    for src in need:
        info = infos.get(src)
        if info is None:
            continue
        segs = list(seg_info.filter(pl.col("source") == src).sort("boot").iter_rows(named=True))
        parts = []
        for s in segs:
            a = anchors.get((src, s["boot"]))
            text = f"uptime anchored {a.how}" if a else f"uptime only, {unknown}"
            if len(segs) > 1:
                text = f"boot {s['boot'] + 1} (lines {s['first']}-{s['last']}): {text}"
            parts.append(text)
        if len(segs) > 1:
            info.notes.append(f"{len(segs)} boots in this file (uptime goes backwards); each is anchored on its own")
        own = "; ".join(parts)
        # a source with clocked rows too (kern.log mixing uptime-only lines) keeps its clock's description
        info.anchor = f"{info.anchor}; {own}" if info.anchor and info.clock != "uptime" else own


# --------------------------------------------------------------------------------------------------
# 4. sources without a clock


@dataclass
class CurveFit:
    t0: float          # seconds since epoch of position 0
    dt: float          # seconds per position
    r: float
    rmse: float        # bytes
    fit: float         # 1 - mse / variance
    n: int             # positions compared
    bracketed: float   # share of readings lying between the timed readings around them
    covered: float     # share of the untimed readings inside the timed span


def _sliding_sums(U: np.ndarray, WU: np.ndarray, V: np.ndarray, WV: np.ndarray):
    """For every lag k (index k + len(U) - 1), sums over the overlap of U[i] and V[i + k]: the count of
    valid pairs, sum u², sum v², sum uv (masked by WU and WV; U and V are zero where invalid)."""
    size = 1 << (len(U) + len(V) - 2).bit_length()
    full = len(U) + len(V) - 1
    fa = {name: np.fft.rfft(x[::-1], size) for name, x in (("w", WU), ("u", U), ("uu", U * U))}
    fb = {name: np.fft.rfft(x, size) for name, x in (("w", WV), ("v", V), ("vv", V * V))}

    def corr(a: str, b: str) -> np.ndarray:
        return np.fft.irfft(fa[a] * fb[b], size)[:full]

    return np.rint(corr("w", "w")), corr("uu", "w"), corr("w", "vv"), corr("u", "v")


def match_curve(u_pos: np.ndarray, u_val: np.ndarray, t_sec: np.ndarray, t_val: np.ndarray,
                interval: float | None = None) -> tuple[CurveFit | None, str]:
    """Place an untimed series (integer positions, values) on a timed one of the same quantity: find the
    time of position 0 and the seconds per position that make the values agree. Returns (fit, why not)."""
    ok = np.isfinite(u_val)
    u_pos, u_val = u_pos[ok].astype(np.int64), u_val[ok].astype(np.float64)
    ok = np.isfinite(t_val) & np.isfinite(t_sec)
    t_sec, t_val = t_sec[ok].astype(np.float64), t_val[ok].astype(np.float64)
    if len(u_val) < MIN_CURVE_POINTS or len(t_val) < MIN_CURVE_POINTS:
        return None, "too few samples to compare"
    if np.ptp(u_val) < MIN_CURVE_RANGE:
        return None, "its curve is too flat to match (no distinct structure)"
    order = np.argsort(t_sec, kind="stable")
    t_sec, t_val = t_sec[order], t_val[order]
    t_sec, first = np.unique(t_sec, return_index=True)
    t_val = t_val[first]
    if len(t_sec) < MIN_CURVE_POINTS:
        return None, "too few distinct times in the timed series"
    u_pos = u_pos - u_pos.min()
    n_pos = int(u_pos.max()) + 1
    ref, scale = float(np.mean(u_val)), float(np.std(u_val)) or 1.0
    v_norm = (t_val - ref) / scale
    dt_t = float(np.median(np.diff(t_sec))) if len(t_sec) > 1 else 1.0
    span = t_sec[-1] - t_sec[0]
    cands = [interval] if interval else sorted(set(COMMON_INTERVALS) | {round(dt_t, 6)})
    best = None
    for dt in cands:
        # the coarse search works on at most a few thousand positions and ~100k grid points: both
        # series are thinned by the same stride, the fine alignment is left to _refine
        stride = max(1, math.ceil(n_pos / COARSE_POSITIONS), math.ceil(span / dt / COARSE_GRID))
        step = dt * stride
        m = int(span / step) + 1
        if m < MIN_CURVE_POINTS:
            continue
        keep = u_pos % stride == 0
        pos = u_pos[keep] // stride
        n = int(pos.max()) + 1
        U, WU = np.zeros(n), np.zeros(n)
        U[pos] = (u_val[keep] - ref) / scale
        WU[pos] = 1.0
        grid = t_sec[0] + np.arange(m) * step
        V = np.interp(grid, t_sec, v_norm)
        j = np.clip(np.searchsorted(t_sec, grid), 1, len(t_sec) - 1)
        near = np.minimum(np.abs(grid - t_sec[j]), np.abs(grid - t_sec[j - 1]))
        WV = (near <= max(2 * dt_t, step)).astype(np.float64)   # no made-up values across logging gaps
        V = V * WV
        N, Suu, Svv, Suv = _sliding_sums(U, WU, V, WV)
        min_overlap = max(MIN_CURVE_POINTS, 0.5 * min(WU.sum(), WV.sum()))
        valid = N >= min_overlap
        if not valid.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            mse = np.where(valid, np.maximum(Suu - 2 * Suv + Svv, 0) / N, np.inf)
        k = int(np.argmin(mse))
        if best is None or mse[k] < best[0]:
            best = (float(mse[k]), dt, k, grid[0], mse, n, stride)
    if best is None:
        return None, "the series do not overlap enough"
    mse_best, dt, k, g0, mse, n, stride = best
    # unique: every lag that fits nearly as well lies next to the best one
    close = np.flatnonzero(mse <= 2 * mse_best + 1e-4)
    width = max(3, int(0.02 * n))
    if close.min() < k - width or close.max() > k + width:
        return None, "the curve fits several offsets equally well (not distinctive enough)"
    lag = k - (n - 1)
    t0 = g0 + lag * dt * stride
    t0, dt = _refine(u_pos, u_val, t_sec, t_val, t0, dt, max(2, stride))
    fit = _score(u_pos, u_val, t_sec, t_val, t0, dt)
    if fit is None:
        return None, "the series do not overlap enough"
    if fit.covered < MIN_COVERED:
        return None, f"the best fit overlaps only {fit.covered:.0%} of its readings"
    if fit.r < MIN_R or fit.fit < MIN_FIT or fit.bracketed < MIN_BRACKETED:
        return None, (f"best fit r={fit.r:.3f}, {fit.bracketed:.0%} of readings agree with the timed ones around "
                      f"them: not close enough (needs r ≥ {MIN_R} and {MIN_BRACKETED:.0%})")
    return fit, ""


def _score(u_pos, u_val, t_sec, t_val, t0: float, dt: float) -> CurveFit | None:
    t = t0 + u_pos * dt
    inside = (t >= t_sec[0]) & (t <= t_sec[-1])
    if inside.sum() < MIN_CURVE_POINTS:
        return None
    a, tt = u_val[inside], t[inside]
    b = np.interp(tt, t_sec, t_val)
    # a reading placed right lies between the timed readings just before and after it
    j = np.clip(np.searchsorted(t_sec, tt), 1, len(t_sec) - 1)
    lo = np.minimum(t_val[j - 1], t_val[j]) - BRACKET_SLACK
    hi = np.maximum(t_val[j - 1], t_val[j]) + BRACKET_SLACK
    mse = float(np.mean((a - b) ** 2))
    var = float(np.var(a))
    r = float(np.corrcoef(a, b)[0, 1]) if var > 0 and np.var(b) > 0 else 0.0
    return CurveFit(t0=t0, dt=dt, r=r, rmse=math.sqrt(mse), fit=1 - mse / var if var > 0 else 0.0,
                    n=int(inside.sum()), bracketed=float(np.mean((a >= lo) & (a <= hi))),
                    covered=float(inside.mean()))


def _refine(u_pos, u_val, t_sec, t_val, t0: float, dt: float, shift: float) -> tuple[float, float]:
    """Least squares over (offset, interval) near the coarse match (within `shift` positions): loggers
    drift (-l 1 ticks every ~1.004 s), and the coarse search saw thinned series."""
    if len(u_pos) > REFINE_POINTS:
        sel = np.linspace(0, len(u_pos) - 1, REFINE_POINTS).astype(int)
        u_pos, u_val = u_pos[sel], u_val[sel]
    c = float(np.median(u_pos))
    tc = t0 + c * dt
    # nearest to the current estimate first, so that a flat cost (a plateau) keeps the estimate
    steps = np.linspace(-1, 1, 31)
    steps = steps[np.argsort(np.abs(steps), kind="stable")]
    for rel, reach in ((0.01, shift), (0.0005, shift / 10), (0.00005, shift / 100)):
        dts = dt * (1 + rel * steps)
        tcs = tc + dt * reach * steps
        best = (np.inf, tc, dt)
        for d in dts:
            t = tcs[:, None] + (u_pos[None, :] - c) * d
            inside = (t >= t_sec[0]) & (t <= t_sec[-1])
            err = np.where(inside, (np.interp(t, t_sec, t_val) - u_val[None, :]) ** 2, 0.0)
            cnt = inside.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                cost = np.where(cnt >= MIN_CURVE_POINTS, err.sum(axis=1) / cnt, np.inf)
            i = int(np.argmin(cost))
            if cost[i] < best[0]:
                best = (cost[i], tcs[i], d)
        _, tc, dt = best
    return tc - c * dt, dt


def _index_column(df: pl.DataFrame) -> pl.Expr:
    """The sample index of an untimed source: seq, else the line order."""
    if df["seq"].null_count() < df.height:
        return pl.col("seq")
    return pl.col("line").rank("dense").cast(pl.Int64) - 1


def place_untimed(samples, events, infos: dict[str, InputInfo], opts: Options):
    interval, end = opts.interval, opts.end
    timed = set(_times(samples, events).drop_nulls("time")["source"].unique().to_list())
    with_uptime = set(pl.concat([samples.select("source", "uptime"), events.select("source", "uptime")])
                      .drop_nulls("uptime")["source"].unique().to_list())
    has_rows = set(_times(samples, events)["source"].unique().to_list())
    untimed = [p for p in infos if p in has_rows and p not in timed and p not in with_uptime]
    for path in untimed:
        info = infos[path]
        rows = rows_where(samples, pl.col("source") == path)
        if rows.is_empty():
            info.anchor = "no clock: analyzed in file order (no samples to place)"
            continue
        idx = rows.select(_index_column(rows).alias("i"))["i"]
        i0, i1 = idx.min(), idx.max()
        steps = rows["step"].null_count() < rows.height
        on_index = "step index" if steps and rows["seq"].null_count() == rows.height else "sample index"
        placed = None
        if opts.start is not None and interval:
            t0 = opts.start.astimezone(timezone.utc).timestamp()
            placed = (t0 - i0 * interval, interval,
                      f"placed from --start {_iso(opts.start)} with --interval {interval:g} s (sample n at start + n × interval)")
        elif end is not None and interval:
            t1 = end.astimezone(timezone.utc).timestamp()
            placed = (t1 - i1 * interval, interval,
                      f"placed from --end {_iso(end)} with --interval {interval:g} s (last sample at the end)")
        else:
            placed, why_not = _place_by_curve(path, rows, samples, timed, interval)
            if placed is None and why_not:
                info.notes.append(why_not)
        if placed is None:
            hint = "" if opts.start or end else "; pass --start (or --end) with --interval to place it on the clock"
            if (opts.start or end) and not interval:
                hint = "; --start/--end need --interval to place it"
            info.anchor = f"no clock: analyzed on its {on_index}{hint}"
            continue
        t0, dt, how = placed
        samples = _place_rows(samples, path, _index_column(rows), t0, dt)
        events = _place_events_by_line(events, samples, path)
        info.anchor = how
    return samples, events


def _place_rows(samples: pl.DataFrame, path: str, index: pl.Expr, t0: float, dt: float) -> pl.DataFrame:
    mask = (samples["source"] == path).fill_null(False)
    part = samples.filter(mask)
    t_us = part.select(((pl.lit(t0) + index.cast(pl.Float64) * dt) * US).round(0).cast(pl.Int64).alias("t"))["t"]
    new = pl.DataFrame({"t": t_us}).select(_from_us(pl.col("t")).alias("time"))["time"]
    idx = pl.Series(np.flatnonzero(mask.to_numpy()))
    return samples.with_columns(samples["time"].scatter(idx, new).alias("time"))


def _place_events_by_line(events: pl.DataFrame, samples: pl.DataFrame, path: str) -> pl.DataFrame:
    """Events of a just-placed source take the time of the nearest sample line before them (else after)."""
    mask = (events["source"] == path).fill_null(False)
    if not mask.any():
        return events
    ref = samples.filter(pl.col("source") == path).select("line", pl.col("time").alias("_t")).drop_nulls().sort("line")
    ref = ref.unique("line", keep="first").sort("line")
    part = events.filter(mask).with_row_index("_k").sort("line")
    back = part.join_asof(ref, on="line", strategy="backward").select("_k", "_t")
    fwd = part.join_asof(ref, on="line", strategy="forward").select("_k", pl.col("_t").alias("_f"))
    t = back.join(fwd, on="_k").sort("_k").select(pl.coalesce("_t", "_f"))["_t"]
    idx = pl.Series(np.flatnonzero(mask.to_numpy()))
    return events.with_columns(events["time"].scatter(idx, t).alias("time"))


def _place_by_curve(path: str, rows: pl.DataFrame, samples: pl.DataFrame, timed: set[str], interval):
    """Match the untimed source's memory curves against timed ones of the same series, GPU and pid, the
    most varied curve first; the first curve with a close, unique fit places the whole source, by the
    timed source that agrees best with it."""
    rows = rows.with_columns(_index_column(rows).alias("_i")).drop_nulls(["bytes", "_i"])
    ref = rows_where(samples, pl.col("source").is_in(list(timed)) & pl.col("time").is_not_null()
                         & pl.col("bytes").is_not_null() & pl.col("series").is_in(CURVE_SERIES))
    if ref.is_empty() or rows.is_empty():
        return None, ""
    curves = []
    for (series, gpu, pid), part in rows_where(rows, pl.col("series").is_in(CURVE_SERIES)).group_by("series", "gpu", "pid"):
        same = rows_where(ref, (pl.col("series") == series)
                          & (pl.col("gpu") == gpu if gpu is not None else pl.lit(True))
                          & (pl.col("pid") == pid if pid is not None else pl.col("pid").is_null()))
        if same.height:
            curves.append((float(part["bytes"].std() or 0), series, gpu, part, same))
    tried = []
    for _, series, gpu, part, same in sorted(curves, key=lambda c: -c[0]):
        idx = part["_i"].to_numpy()
        distinct = np.unique(idx)
        step = max(1, int(np.gcd.reduce(np.diff(distinct)))) if len(distinct) > 1 else 1
        label = f"{series} curve{' of GPU ' + str(gpu) if gpu is not None else ''}"
        fits = []
        for (other, _), opart in sorted(same.group_by("source", "gpu"), key=lambda g: str(g[0][0])):
            opart = opart.sort("time")
            fit, why = match_curve((idx - idx.min()) // step, part["bytes"].to_numpy().astype(float),
                                   opart["time"].dt.epoch("us").to_numpy() / US,
                                   opart["bytes"].to_numpy().astype(float), interval * step if interval else None)
            if fit is None:
                tried.append(f"{label} vs {other}: {why}")
            else:
                fits.append((fit.rmse, other, fit))
        if not fits:
            continue
        _, other, fit = min(fits, key=lambda f: f[0])   # the timed source that agrees best
        dt_index = fit.dt / step
        how = (f"untimed, aligned to {other} by matching the {label} (r={fit.r:.3f}, rmse {fit.rmse / MIB:.1f} MiB "
               f"over {fit.n} samples, {fit.bracketed:.0%} of them between the timed readings around them; "
               f"first sample at {_iso(fit.t0 * US)}, one every {fit.dt:.4g} s)")
        return (fit.t0 - idx.min() * dt_index, dt_index, how), ""
    if not tried:
        return None, ""
    return None, "no clock, and no timed source with the same curve to align it to: " + "; ".join(tried[:3])


# --------------------------------------------------------------------------------------------------
# 5. clock skew between sources

_CLOCK_RANK = {"wall": 0, "wall-assumed": 1, "wall-yearless": 2, "uptime": 3, "none": 4}


def _stamp_us(col: str) -> pl.Expr:
    """An event's instant in µs; a stamp printed to the whole second (dmesg -T, syslog) was truncated,
    so the instant is taken half a second later."""
    us = _epoch_us(col)
    return pl.when(us % US == 0).then(us + US // 2).otherwise(us)


def _stamp_tol(col: str) -> pl.Expr:
    """Half the resolution of the stamp, in seconds."""
    return pl.when(_epoch_us(col) % US == 0).then(0.5).otherwise(0.0)


def detect_skew(samples: pl.DataFrame, events: pl.DataFrame, infos: dict[str, InputInfo]) -> list[dict]:
    """Measure how far two sources' clocks disagree on incidents both saw; report, never shift."""
    found = (_skew_from_pid_deaths(samples, events) + _skew_from_kill_and_fall(samples, events)
             + _skew_from_gpu_oom(samples, events))
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for f in found:
        by_pair.setdefault((f["a"], f["b"]), []).append(f)
    out = []
    for (a, b), items in by_pair.items():
        est = np.array([i["skew"] for i in items])
        tol = max(max(i["tol"] for i in items), 1.0)
        skew = float(np.median(est))
        if abs(skew) <= tol or a not in infos or b not in infos:
            continue
        if np.ptp(est) > 2 * tol + 2.0:
            continue  # incidents disagree about the skew: not one clock offset
        # report on the less trustworthy clock, as the seconds to add to it
        ra, rb = _CLOCK_RANK.get(infos[a].clock, 5), _CLOCK_RANK.get(infos[b].clock, 5)
        ref, other, add = (a, b, skew) if ra <= rb else (b, a, -skew)
        incidents = len({(i["evidence"]["path"], i["evidence"]["line"]) for i in items})
        direction = "behind" if add > 0 else "ahead of"
        msg = (f"clock skew: this file's clock runs {_seconds(abs(add))} {direction} {os.path.basename(ref)} "
               f"(±{_seconds(tol)}), judging by {incidents} incident{'s' if incidents > 1 else ''} seen in both "
               f"(e.g. {items[0]['what']}); times are not shifted")
        whole = round(add / 900) * 900
        if abs(add) >= 900 and abs(add - whole) <= tol + 60:
            msg += (f". A difference of {_seconds(abs(whole))} looks like a time zone mix-up: "
                    f"pass --tz {os.path.basename(other)}=ZONE with the zone this file was written in")
        info = infos[other]
        info.notes.append(msg)
        info.meta["skew_seconds"] = round(add, 3)
        info.meta["skew_reference"] = ref
        info.meta["skew_evidence"] = [i["evidence"] for i in items[:5]]
        out.append({"source": other, "reference": ref, "skew_seconds": add, "uncertainty": tol})
    return out


def _skew_from_pid_deaths(samples, events) -> list[dict]:
    """An oom_kill of pid P (source A) vs P's last process.used reading and the next reading of that
    source without it (source B): in B's clock the kill lies between the two."""
    kills = rows_where(events, (pl.col("kind") == "oom_kill") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    seen = rows_where(samples, (pl.col("series") == "process.used") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    if kills.is_empty() or seen.is_empty():
        return []
    last = seen.group_by("source", "pid").agg(pl.col("time").max().alias("t_last"), pl.col("line").max().alias("b_line")).sort("t_last")
    ticks = samples.filter(pl.col("time").is_not_null()).select("source", pl.col("time").alias("t_next")).unique().sort("t_next")
    last = last.join_asof(ticks, left_on="t_last", right_on="t_next", by="source", strategy="forward",
                          allow_exact_matches=False, check_sortedness=False)
    # a process list that went empty prints no rows: its parser marks the first block without the pid
    gone = events.filter((pl.col("kind") == "process_gone") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    gone = gone.group_by("source", "pid").agg(pl.col("time").min().alias("t_gone"))
    last = (last.join(gone, on=["source", "pid"], how="left")
            .with_columns(pl.min_horizontal(pl.col("t_next"),
                                            pl.when(pl.col("t_gone") > pl.col("t_last")).then(pl.col("t_gone")))
                          .alias("t_next"))
            .drop_nulls("t_next"))
    pairs = kills.select(pl.col("source").alias("a"), pl.col("line").alias("a_line"), "pid", pl.col("time").alias("t_kill")).join(
        last.rename({"source": "b"}), on="pid").filter(pl.col("a") != pl.col("b"))
    pairs = pairs.with_columns(
        ((_stamp_us("t_kill") - (_epoch_us("t_last") + _epoch_us("t_next")) / 2) / US).alias("skew"),
        ((_epoch_us("t_next") - _epoch_us("t_last")) / 2 / US + _stamp_tol("t_kill")).alias("tol"),
    ).filter(pl.col("skew").abs() < 86400)  # a pid reused a day apart is another process
    return [{"a": r["a"], "b": r["b"], "skew": r["skew"], "tol": r["tol"],
             "what": f"the oom_kill of pid {r['pid']} ({os.path.basename(r['a'])}:{r['a_line']}) and its last reading "
                     f"({os.path.basename(r['b'])}:{r['b_line']})",
             "evidence": {"path": r["a"], "line": r["a_line"], "other_path": r["b"], "other_line": r["b_line"]}}
            for r in pairs.iter_rows(named=True)]


def _skew_from_kill_and_fall(samples, events) -> list[dict]:
    """An oom_kill of pid P that held GPU memory (P is in a process list) vs the one fall of that GPU's
    memory.used by at least half of P's memory in another source, within a day: the kill lies between
    the readings before and after the fall."""
    kills = rows_where(events, (pl.col("kind") == "oom_kill") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    procs = rows_where(samples, (pl.col("series") == "process.used") & pl.col("pid").is_not_null()
                           & pl.col("gpu").is_not_null() & pl.col("bytes").is_not_null())
    if kills.is_empty() or procs.is_empty():
        return []
    procs = procs.group_by("pid", "gpu").agg(pl.col("bytes").max().alias("p_bytes"))
    mem = (samples.filter((pl.col("series") == "memory.used") & pl.col("time").is_not_null() & pl.col("bytes").is_not_null())
           .sort("source", "gpu", "time")
           .with_columns((pl.col("bytes").shift(1) - pl.col("bytes")).over("source", "gpu").alias("drop"),
                         pl.col("time").shift(1).over("source", "gpu").alias("t_before"))
           .filter(pl.col("drop") > 0))
    pairs = (kills.select(pl.col("source").alias("a"), pl.col("line").alias("a_line"), "pid", pl.col("time").alias("t_kill"))
             .join(procs, on="pid")
             .join(mem.select(pl.col("source").alias("b"), pl.col("line").alias("b_line"), "gpu", "drop", "t_before",
                              pl.col("time").alias("t_after")), on="gpu")
             .filter((pl.col("a") != pl.col("b")) & (pl.col("drop") >= pl.col("p_bytes") / 2)
                     & ((pl.col("t_after") - pl.col("t_kill")).abs() < pl.duration(days=1))))
    pairs = pairs.filter(pl.len().over("a", "a_line", "b") == 1)   # one clear fall, or nothing to say
    pairs = pairs.with_columns(
        ((_stamp_us("t_kill") - (_epoch_us("t_before") + _epoch_us("t_after")) / 2) / US).alias("skew"),
        ((_epoch_us("t_after") - _epoch_us("t_before")) / 2 / US + _stamp_tol("t_kill")).alias("tol"))
    return [{"a": r["a"], "b": r["b"], "skew": r["skew"], "tol": r["tol"],
             "what": f"the oom_kill of pid {r['pid']} ({os.path.basename(r['a'])}:{r['a_line']}) and GPU {r['gpu']}'s "
                     f"memory falling by {r['drop'] / MIB:.0f} MiB ({os.path.basename(r['b'])}:{r['b_line']})",
             "evidence": {"path": r["a"], "line": r["a_line"], "other_path": r["b"], "other_line": r["b_line"]}}
            for r in pairs.iter_rows(named=True)]


def _skew_from_gpu_oom(samples, events) -> list[dict]:
    """A CUDA OOM (source A) cannot come after the GPU's memory fell from its peak in source B (the
    dying process frees it): an OOM stamped after that fall means A's clock is ahead, at least by the gap."""
    ooms = rows_where(events, (pl.col("kind") == "gpu_oom") & pl.col("time").is_not_null())
    mem = rows_where(samples, (pl.col("series") == "memory.used") & pl.col("time").is_not_null() & pl.col("bytes").is_not_null())
    if ooms.is_empty() or mem.is_empty():
        return []
    out = []
    for (b, gpu), part in mem.group_by("source", "gpu"):
        part = part.sort("time")
        vals = part["bytes"].to_numpy().astype(float)
        total = part["total_bytes"].max()
        peak = vals.max()
        near_peak = vals >= peak - max(64 * MIB, 0.01 * (total or peak))
        last_peak = int(np.flatnonzero(near_peak)[-1])
        if last_peak + 1 >= len(vals) or vals[last_peak + 1:].min() > peak - max(512 * MIB, 0.1 * peak):
            continue  # no clear fall after the peak
        fall = part["time"][last_peak + 1]
        lastp = part["time"][last_peak]
        cand = ooms.filter((pl.col("source") != b) & ((pl.col("gpu") == gpu) | pl.col("gpu").is_null()))
        for r in cand.iter_rows(named=True):
            gap = (r["time"] - fall).total_seconds()
            tol = (fall - lastp).total_seconds() / 2
            if gap > tol and gap < 86400:
                out.append({"a": r["source"], "b": b, "skew": gap + tol, "tol": tol,
                            "what": f"the CUDA OOM at {os.path.basename(r['source'])}:{r['line']} stamped after GPU "
                                    f"{gpu} memory fell from its peak ({os.path.basename(b)}:{part['line'][last_peak + 1]})",
                            "evidence": {"path": r["source"], "line": r["line"], "other_path": b,
                                         "other_line": part["line"][last_peak + 1]}})
    return out


# --------------------------------------------------------------------------------------------------
# spans


def _fill_spans(samples, events, infos: dict[str, InputInfo]) -> None:
    spans = _spans(samples, events)
    for path, info in infos.items():
        s = spans.get(path)
        info.start = s[0].astimezone(timezone.utc) if s else None
        info.end = s[1].astimezone(timezone.utc) if s else None
        if info.anchor is None and info.records:
            info.anchor = "no clock: analyzed in file order"


# --------------------------------------------------------------------------------------------------
# 6. writing the aligned tables


def aligned_targets(path: str | os.PathLike) -> list[outputs.Target]:
    """The files `write_aligned` writes for `path`, checked (see outputs.target); a usage error for a
    name that is neither .parquet nor .csv."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".parquet":
        return [outputs.target(str(p), "-o")]
    if ext == ".csv":
        return [outputs.target(str(p.with_name(f"{p.stem}.{name}.csv")), "-o") for name in ("samples", "events")]
    raise UsageError(f"-o {path}: unknown output type {ext or '(none)'}, use a .parquet or .csv name")


def write_aligned(bundle: Bundle, path: str | os.PathLike) -> list[str]:
    """Write the aligned tables; returns the paths written.

    `.parquet`: ONE file at exactly `path` holding both tables, told apart by the first column `table`
    ("samples" or "events"); columns of the other table are null (read one back with
    `pl.read_parquet(p).filter(pl.col("table") == "events")`). The file's key-value metadata
    `gpu_forensics.inputs` holds the inputs (path, format, clock, anchor, start, end, notes) as JSON.
    `.csv`: two files beside `path`, `<stem>.samples.csv` and `<stem>.events.csv` (`path` itself is not
    written), times as ISO-8601 UTC with `Z`.
    Every row keeps `source` and `line`. Each file is written as outputs.write writes (a regular file
    atomically, a FIFO or device through), so a reader never sees half a file."""
    targets = aligned_targets(path)
    samples = conform(bundle.samples, SAMPLES_SCHEMA)
    events = conform(bundle.events, EVENTS_SCHEMA)
    if len(targets) == 1:
        both = pl.concat([samples.with_columns(pl.lit("samples").alias("table")),
                          events.with_columns(pl.lit("events").alias("table"))], how="diagonal")
        both = both.select("table", *[c for c in both.columns if c != "table"])
        meta = {"gpu_forensics.inputs": json.dumps([_input_meta(i) for i in bundle.inputs])}
        outputs.write(targets[0], lambda fh: both.write_parquet(fh, metadata=meta))
    else:
        for t, df in zip(targets, (samples, events)):
            outputs.write(t, lambda fh, df=df: df.write_csv(fh, datetime_format="%Y-%m-%dT%H:%M:%S%.6fZ"))
    return [t.shown for t in targets]


def _input_meta(info: InputInfo) -> dict:
    return {"path": info.path, "format": info.format, "clock": info.clock, "anchor": info.anchor,
            "start": _iso(info.start) if info.start else None, "end": _iso(info.end) if info.end else None,
            "notes": info.notes, "skew_seconds": info.meta.get("skew_seconds")}


