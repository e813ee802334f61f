"""Lightning's `CSVLogger` metrics.csv with `DeviceStatsMonitor` columns (docs/formats.md §10.3).

CSVLogger (lightning/fabric/loggers/csv_logs.py) writes one row per `log_metrics` call, the header
the sorted union of every key logged (the file is rewritten when a new key comes), a blank cell where
a row does not have a key, and a `step` column. On a CUDA device DeviceStatsMonitor
(lightning/pytorch/callbacks/device_stats_monitor.py) logs `torch.cuda.memory_stats()` at each batch
hook, keyed `DeviceStatsMonitor.<hook><separator><stat>` (the logger's group separator, `/`), with
`step` = the batches that stepped. Earlier releases: `<hook>/<stat>` (1.6), `<hook>.<stat>` (1.5). The
stats read, by the names the step-log readers give the same PyTorch counters:
`allocated_bytes.all.current` -> `allocated`, `reserved_bytes.all.current` -> `reserved`,
`allocated_bytes.all.peak` -> `max_allocated`, `reserved_bytes.all.peak` -> `max_reserved`; one series
per hook (`label`). The GPUStatsMonitor of Lightning < 1.7 logged nvidia-smi's figures instead,
`gpu_id: <i>/memory.used (MB)` and `memory.free (MB)` (MiB) -> `memory.used` of GPU i and its capacity.

The file has no clock: the readings are on their step (and row order).
"""
from __future__ import annotations

import re

import polars as pl

from forensics.io.lines import read_whole
from forensics.model import Parsed, Skipped, samples_frame
from forensics.parsers.metrics import common
from forensics.parsers.contract import Format

NAME = "lightning-csv"

_HOOK = r"on_(?:train|validation|test)_batch_(?:start|end)"
_HOOK_PREFERENCE = ("on_train_batch_end", "on_validation_batch_end", "on_test_batch_end", "on_train_batch_start")
_DEVICE_STAT = re.compile(rf"^(?:DeviceStatsMonitor\.)?(?P<hook>{_HOOK})[/.](?P<stat>.+)$")
_GPU_STAT = re.compile(r"^gpu_id: (?P<gpu>[0-9]+)/memory\.(?P<kind>used|free) \(MB\)$")
SERIES_OF_STAT = {"allocated_bytes.all.current": "allocated", "reserved_bytes.all.current": "reserved",
                  "allocated_bytes.all.peak": "max_allocated", "reserved_bytes.all.peak": "max_reserved"}
MIB = 1 << 20


def _columns(line: str) -> list[str]:
    return [c.strip() for c in common.header_cells(line, ",")]


def sniff(head: list[str]) -> str | None:
    first = next((ln for ln in head[:5] if ln.strip()), "")
    cols = _columns(first)
    if "step" not in cols:
        return None
    if any(_DEVICE_STAT.match(c) for c in cols):
        return "Lightning CSVLogger metrics.csv with DeviceStatsMonitor columns"
    if any(_GPU_STAT.match(c) for c in cols):
        return "Lightning CSVLogger metrics.csv with GPUStatsMonitor columns"
    return None


class Reader:
    def __init__(self, src, opts):
        self.columns: list[str] | None = None
        self.header = ""
        self.parts: list[pl.DataFrame] = []
        self.skipped = Skipped()

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        batch = common.without_blank(batch, self.skipped)
        if batch.height and self.columns is None:
            self.header = batch["text"][0]
            self.columns = _columns(self.header)
            batch = batch.slice(1)
        if not batch.height:
            return
        cols = self.columns
        # a repeated header: two runs logged into one file before CSVLogger rewrote it
        again = batch["text"] == self.header
        self.skipped.add_lines("repeated header", batch.filter(again)["line"])
        batch = batch.filter(~again)
        n = len(cols)
        t = pl.col("text")
        at = {c: i for i, c in enumerate(cols)}   # a name given twice: its last column
        read = []   # (column index, series, label, gpu, kind) of the columns read
        for c in cols:
            m, g = _DEVICE_STAT.match(c), _GPU_STAT.match(c)
            if m and m.group("stat") in SERIES_OF_STAT:
                read.append((at[c], SERIES_OF_STAT[m.group("stat")], m.group("hook"), None, "used"))
            elif g:
                read.append((at[c], "memory.used", None, g.group("gpu"), g.group("kind")))
        # only the cells read are cut out: DeviceStatsMonitor writes a couple of hundred columns
        wanted = {r[0] for r in read} | ({at["step"]} if "step" in at else set())
        split = batch.select("line", t.str.split(",").list.len().alias("_n"), *common.cells(t, ",", n, wanted))
        self.skipped.add_lines("row does not fit the header, not read", split.filter(pl.col("_n") != n)["line"])
        split = split.filter(pl.col("_n") == n)
        step = (common.number(pl.col(f"c{at['step']}")).cast(pl.Int64, strict=False) if "step" in at
                else pl.lit(None, dtype=pl.Int64))
        for i, series, label, gpu, kind in read:
            g = gpu is not None   # GPUStatsMonitor's columns are in MiB
            v = common.number(pl.col(f"c{i}"))
            scale = MIB if g else 1
            self.parts.append(split.filter(v.is_not_null()).select(
                "line", step.alias("step"), pl.lit(series).alias("series"), pl.lit(label, dtype=pl.String).alias("label"),
                pl.lit(gpu, dtype=pl.String).alias("gpu"), pl.lit(kind).alias("kind"),
                (v * scale).round().cast(pl.Int64, strict=False).alias("bytes")))

    def finish(self) -> Parsed:
        p = Parsed(skipped=self.skipped, clock="none")
        cols = self.columns or []
        unread = sorted({m.group("stat") for m in map(_DEVICE_STAT.match, cols) if m and m.group("stat") not in SERIES_OF_STAT})
        if not self.parts:
            p.notes.append("no memory readings in the DeviceStatsMonitor columns")
            return p
        rows = pl.concat(self.parts)
        free = rows.filter(pl.col("kind") == "free").select("line", "gpu", pl.col("bytes").alias("_free"))
        used = rows.filter(pl.col("kind") == "used").join(free, on=["line", "gpu"], how="left", nulls_equal=True,
                                                         maintain_order="left")
        negative = used.filter(pl.col("bytes") < 0)
        self.skipped.add_lines("negative memory value, not read", negative["line"].unique().sort())
        used = used.filter(pl.col("bytes") >= 0).sort("line", "series", "label", nulls_last=True)
        hooks = [h for h in used["label"].unique().drop_nulls().to_list()]
        if len(hooks) > 1:
            # the hooks read one process's memory at several points of each step: one series of it is
            # the evidence (twins would be several findings about one leak); after the optimizer step
            # is the steady state
            keep = next((h for h in _HOOK_PREFERENCE if h in hooks), sorted(hooks)[0])
            used = used.filter(pl.col("label").is_null() | (pl.col("label") == keep))
            p.notes.append(f"readings of {keep} kept; those of {', '.join(sorted(h for h in hooks if h != keep))} "
                           "(the same memory at another point of the step) are not used")
        p.samples = samples_frame(used.select(
            pl.col("line").rank("dense").cast(pl.Int64).alias("seq"), "line", "gpu", "series", "bytes",
            (pl.col("bytes") + pl.col("_free")).alias("total_bytes"), "step", "label"))
        if unread:
            p.notes.append(f"DeviceStatsMonitor stats not read (not a memory level the detector uses): "
                           f"{', '.join(unread[:6])}" + (f" and {len(unread) - 6} more" if len(unread) > 6 else ""))
        p.notes.append("no clock in metrics.csv: readings are on their step")
        return p


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    files="Lightning `CSVLogger` metrics.csv with `DeviceStatsMonitor` (or `GPUStatsMonitor`) columns",
    yields="allocated / reserved per step",
)
