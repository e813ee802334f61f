"""dmesg uptime stamps: each boot (uptime going backwards starts a new one) is anchored by --boot-time
(the last boot of a source), by the source's own lines carrying clock and uptime, by lines of another
source with the same text and the same uptime (kern.log), or by lines of a wall-clock twin with the
same text (dmesg -T, dmesg --time-format iso). A boot without anchor keeps its uptime and no time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timezone

import numpy as np
import polars as pl

from forensics.model import InputInfo
from forensics.options import Options
from forensics.frames import rows_where
from forensics.timeline import stamps
from forensics.timeline.stamps import US


_CTIME_PREFIX = r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\]"


def is_ctime_source(events: pl.DataFrame, path: str) -> bool:
    """A `dmesg -T` output: its stamps are computed by dmesg from the current boot time."""
    texts = rows_where(events, pl.col("source") == path)["text"].drop_nulls().head(200)
    return texts.len() > 0 and bool(texts.str.contains(_CTIME_PREFIX).mean() > 0.5)


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
DMESG_T_CAVEAT = ("dmesg -T stamps are boot time + uptime, and uptime stops while the machine sleeps: "
                   "after a suspend they run early by the time spent asleep")


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
    # the sources with rows that have an uptime and no clock (Series methods: no query for the many
    # jobs without any)
    need = sorted({src for df in (samples, events) if df.height
                   for src in df["source"].filter(df["time"].is_null() & df["uptime"].is_not_null()).unique()
                   if src is not None})
    if not need:
        return samples, events
    boots = _segment_boots(samples, events, need)

    # offsets (clock - uptime) from the source's own lines that carry both
    both = pl.concat([
        df.filter(pl.col("source").is_in(need) & pl.col("time").is_not_null() & pl.col("uptime").is_not_null())
        .select("source", "line", "uptime", "time") for df in (samples, events)
    ]).unique(["source", "line"]).join(boots, on=["source", "line"])
    own = both.select("source", "boot", "uptime", (stamps.epoch_us() - stamps.uptime_us()).alias("off_us"),
                      (stamps.epoch_us() % US == 0).alias("whole"))

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
                     (stamps.epoch_us("t") - stamps.uptime_us()).alias("off_us"),
                     (stamps.epoch_us("t") % US == 0).alias("whole"), pl.col("u").is_not_null().alias("exact")))

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
            anchors[(src, b)] = BootAnchor(src, b, boot_us, f"to boot at {stamps.iso(boot_us)} (--boot-time)")
            if old is not None and old.boot_us is not None and abs(old.boot_us - boot_us) > DRIFT_S * US:
                infos[src].notes.append(f"--boot-time {stamps.iso(boot_us)} differs by {stamps.seconds((old.boot_us - boot_us) / US)} "
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
        if is_ctime_source(events, via):
            what += f" ({DMESG_T_CAVEAT})"
    return _anchor_from_pairs(src, b, pairs, what)


def _anchor_from_pairs(src: str, b: int, pairs: pl.DataFrame, what: str):
    off = pairs["off_us"].to_numpy()
    whole = bool(pairs["whole"].all())
    spread = (off.max() - off.min()) / US
    boot_us = _boot_from_offsets(off, whole)
    nearest = spread > DRIFT_S + (1.0 if whole else 0.0)
    how = f"to boot at {stamps.iso(boot_us)} inferred from {what} (spread {spread:.1f} s)"
    if nearest:
        how += ("; the clock moved against uptime within this boot (suspend/resume or a clock step), "
                "so each line takes the offset of its nearest matched line")
    # (pairs at one uptime by offset: the nearest-pair join takes the first)
    used = pairs.select("source", "boot", "uptime", "off_us").sort("uptime", "off_us")
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
    by_median = todo.filter(~pl.col("nearest")).select("_r", (pl.col("boot_us") + stamps.uptime_us()).alias("_t"))
    near = todo.filter(pl.col("nearest")).sort("uptime")
    if near.height:
        near = near.join_asof(pairs.sort("uptime"), on="uptime", by=["source", "boot"], strategy="nearest",
                               check_sortedness=False)
        by_pair = near.select("_r", (pl.col("off_us").fill_null(pl.col("boot_us")) + stamps.uptime_us()).alias("_t"))
    else:
        by_pair = pl.DataFrame(schema={"_r": pl.UInt32, "_t": pl.Int64})
    filled = pl.concat([by_median, by_pair.cast({"_r": by_median["_r"].dtype})])
    out = df.join(filled, on="_r", how="left", maintain_order="left")
    return out.with_columns(pl.coalesce(pl.col("time"), stamps.from_us(pl.col("_t"))).alias("time")).drop("_r", "_t")


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
