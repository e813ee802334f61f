"""A W&B run's system metrics (docs/formats.md §10.1): the `wandb-events.jsonl` of a local run folder
(`wandb/run-*/files/`) or what `run.history(stream="system")` gives, saved as JSON lines
(`to_json(orient="records", lines=True)`) or CSV (`to_csv`, pandas' index column first).

wandb-core writes one row per sample (every 15 s by default, `x_stats_sampling_interval`):
`_wandb: true`, `_timestamp` (Unix seconds, UTC), `_runtime` (seconds since the run started) and each
system metric under `system.` (core/internal/filestream/updatestats.go). Its NVIDIA GPU keys
(xpu/src/gpu_nvidia.rs) that hold memory:
- `gpu.{i}.memoryAllocatedBytes`: the device's used memory (NVML memory_info.used), bytes -> `memory.used`;
- `gpu.{i}.memoryAllocated`: the same as a percentage of the device's total: where both are there,
  the total is used / percentage (`total_bytes`); a run of an SDK too old to log the bytes has only
  the percentage, which without the total (not among the system metrics) is not read;
- `gpu.process.{i}.*`: the same device values again, for the GPUs the run's process uses (not the
  process's own memory): not read twice;
- `gpu.{i}.memory` is the memory controller's busy time in %, not memory: not read.
Its host memory keys (core/pkg/monitor/system.go; wandb/sdk/internal/system/assets/memory.py before),
in MB of 2^20 bytes (`rss / 1024 / 1024`):
- `proc.memory.rssMB`: the run's process's resident set -> `host.rss`;
- `proc.memory.availableMB` (the host's available memory, despite its prefix) with `memory_percent`
  (`memory` before wandb-core: psutil's percent, (total - available) / total) -> `host.used`, the
  host's used memory, total - available, with the host's total as `total_bytes`.
"""
from __future__ import annotations

import re

import polars as pl

from forensics.frames import rows_where
from forensics.io.lines import read_whole
from forensics.model import Parsed, Skipped, samples_frame
from forensics.parsers.metrics import common
from forensics.parsers.contract import Format

NAME = "wandb-system-metrics"

_KEY = r"(?:system[./])?gpu\.([0-9]+)\.memoryAllocated(Bytes)?"
_KEY_RE = re.compile(r"^(?:.* - )?" + _KEY + r"$")
_JSON_HINT = re.compile(r'^\s*\{.*"(?:system\.gpu\.[0-9]+\.|_wandb"\s*:\s*true)')
# host memory keys -> the reader's column: process RSS, host available, host used percent
_HOST_KEYS = {"rss": r"proc\.memory\.rssMB", "avail": r"proc\.memory\.availableMB", "hpct": r"memory(?:_percent)?"}
_HOST_RE = {k: re.compile(r"^(?:.* - )?(?:system[./])?" + v + "$") for k, v in _HOST_KEYS.items()}
MIB = 1 << 20
_NUM = r"(-?[0-9][0-9.eE+-]*|NaN|Infinity|-Infinity|null)"
PERCENT_SKIP = "GPU memory given only as a percentage (no total to turn it into bytes), not read"
PERCENT_ONLY = ("only the percentage of GPU memory (gpu.{i}.memoryAllocated) is logged, without the bytes or the "
                "GPU's total: not read (wandb since June 2023, #5643, also logs gpu.{i}.memoryAllocatedBytes)")


def _csv_columns(line: str) -> list[str]:
    return [c.strip() for c in common.header_cells(line, ",")]


def sniff(head: list[str]) -> str | None:
    for i, ln in enumerate(head[:20], 1):
        if not ln.strip():
            continue
        if _JSON_HINT.match(ln) and '"_timestamp"' in ln:
            return f"W&B system metrics row (JSON) on line {i}"
        cols = _csv_columns(ln)
        if (any(_KEY_RE.match(c) or _HOST_RE["rss"].match(c) for c in cols)
                and {"_timestamp", "_runtime"} & set(cols)):
            return f"W&B system metrics CSV header on line {i}"
        return None
    return None


class Reader:
    """JSON lines: the wanted keys are read per line with one regex each (any key order, any other
    keys); CSV: the header says which column is which."""

    def __init__(self, src, opts):
        self.src = src
        self.kind: str | None = None          # "json" | "csv"
        self.columns: list[str] = []
        self.parts: list[pl.DataFrame] = []
        self.gpus: set[str] = set()
        self.host: list[pl.DataFrame] = []
        self.percent_only: set[str] = set()
        self.skipped = Skipped()

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        if self.kind is None:
            first = rows_where(batch, pl.col("text").str.strip_chars() != "").head(1)
            if first.height == 0:
                self.skipped.add_lines(common.BLANK, batch["line"])
                return
            self.kind = "json" if first["text"][0].lstrip().startswith("{") else "csv"
            if self.kind == "csv":
                self.columns = _csv_columns(first["text"][0])
                self.skipped.add_lines(common.BLANK, batch.filter(pl.col("line") < first["line"][0])["line"])
                batch = batch.filter(pl.col("line") > first["line"][0])
        batch = common.without_blank(batch, self.skipped)
        if batch.height:
            (self._json if self.kind == "json" else self._csv)(batch)

    def _json(self, batch: pl.DataFrame) -> None:
        t = pl.col("text")
        gpus = batch.select(t.str.extract_all(r'"system\.gpu\.[0-9]+\.memoryAllocated(?:Bytes)?"')
                            .explode().str.extract(r"gpu\.([0-9]+)\.").unique().drop_nulls())["text"].to_list()
        ok = t.str.contains(r'^\s*\{.*\}\s*$')
        self.skipped.add_lines("not a JSON object line, not read", batch.filter(~ok)["line"])
        rows = batch.filter(ok)
        values = {}
        for g in gpus:
            values[f"b{g}"] = t.str.extract(rf'"system\.gpu\.{g}\.memoryAllocatedBytes"\s*:\s*{_NUM}')
            values[f"p{g}"] = t.str.extract(rf'"system\.gpu\.{g}\.memoryAllocated"\s*:\s*{_NUM}')
        for k, key in _HOST_KEYS.items():
            values[k] = t.str.extract(rf'"system\.{key}"\s*:\s*{_NUM}')
        frame = rows.select("line", t.str.extract(rf'"_timestamp"\s*:\s*{_NUM}').alias("ts"),
                            t.str.extract(rf'"_runtime"\s*:\s*{_NUM}').alias("rt"),
                            *[e.alias(k) for k, e in values.items()])
        self._take(frame, gpus)

    def _csv(self, batch: pl.DataFrame) -> None:
        n = len(self.columns)
        t = pl.col("text")
        wanted = {"_timestamp": "ts", "_runtime": "rt"}
        gpus = []
        for c in self.columns:
            m = _KEY_RE.match(c)
            if m and "gpu.process." not in c:
                wanted[c] = ("b" if m.group(2) else "p") + m.group(1)
                gpus.append(m.group(1))
            wanted.update({c: k for k, r in _HOST_RE.items() if r.match(c)})
        # pandas quotes no number; a cell holding the delimiter would be text, which is not read here
        split = batch.select("line", t.str.split(",").list.len().alias("_n"), *common.cells(t, ",", n))
        self.skipped.add_lines("row does not fit the header, not read", split.filter(pl.col("_n") != n)["line"])
        split = split.filter(pl.col("_n") == n)
        frame = split.select("line", *[pl.col(f"c{i}").alias(wanted[c]) for i, c in enumerate(self.columns) if c in wanted])
        self._take(frame, sorted(set(gpus)))

    def _take(self, frame: pl.DataFrame, gpus: list[str]) -> None:
        """frame: line, ts, rt, b<gpu> (bytes), p<gpu> (percent) as text cells."""
        for col in ("ts", "rt"):
            if col not in frame.columns:
                frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(col))
        time = common.epoch(common.number(pl.col("ts")))
        host = [common.number(pl.col(k)).alias(k) for k in _HOST_KEYS if k in frame.columns]
        if host:
            self.host.append(frame.select("line", time.alias("time"), *host))
        for g in gpus:
            b = common.number(pl.col(f"b{g}")) if f"b{g}" in frame.columns else pl.lit(None, dtype=pl.Float64)
            pct = common.number(pl.col(f"p{g}")) if f"p{g}" in frame.columns else pl.lit(None, dtype=pl.Float64)
            part = frame.select("line", time.alias("time"), common.number(pl.col("rt")).alias("runtime"),
                                pl.lit(g).alias("gpu"), b.alias("used"), pct.alias("pct"))
            if part.filter(pl.col("used").is_not_null()).height == 0 and part.filter(pl.col("pct").is_not_null()).height:
                self.percent_only.add(g)
            self.parts.append(part.filter(pl.col("used").is_not_null() | pl.col("pct").is_not_null()))
            self.gpus.add(g)

    def _host_samples(self) -> pl.DataFrame:
        """host.rss and host.used rows: line, time, series, bytes, total."""
        if not self.host:
            return pl.DataFrame(schema={"line": pl.Int64, "time": common.UTC, "series": pl.String,
                                        "used": pl.Float64, "total": pl.Float64})
        h = pl.concat(self.host, how="diagonal_relaxed")
        for k in _HOST_KEYS:
            if k not in h.columns:
                h = h.with_columns(pl.lit(None, dtype=pl.Float64).alias(k))
        # psutil's percent is (total - available) / total: the total is available / (1 - percent)
        total = pl.when((pl.col("hpct") >= 0) & (pl.col("hpct") < 100)).then(pl.col("avail") * 100 / (100 - pl.col("hpct")))
        rss = h.select("line", "time", pl.lit("host.rss").alias("series"), (pl.col("rss") * MIB).alias("used"),
                       pl.lit(None, dtype=pl.Float64).alias("total"))
        used = h.select("line", "time", pl.lit("host.used").alias("series"), ((total - pl.col("avail")) * MIB).alias("used"),
                        (total * MIB).alias("total"))
        return pl.concat([rss, used]).filter(pl.col("used").is_finite().fill_null(False) & (pl.col("used") >= 0))

    def finish(self) -> Parsed:
        p = Parsed(skipped=self.skipped)
        host = self._host_samples()
        if not self.parts:
            p.notes.append("no GPU memory keys (gpu.{i}.memoryAllocatedBytes) in these system metrics")
            if host.height:
                p.clock = "wall" if host["time"].null_count() < host.height else "none"
                p.samples = self._samples(host)
            return p
        pts = pl.concat(self.parts)
        with_bytes = pts.filter(pl.col("used").is_finite().fill_null(False) & (pl.col("used") >= 0))
        percent = pts.filter(pl.col("used").is_null())
        if percent.height:
            p.skipped.add_lines(PERCENT_SKIP, percent["line"].unique().sort())
        if not with_bytes.height:
            p.notes.append(PERCENT_ONLY)
            if host.height:
                p.clock = "wall" if host["time"].null_count() < host.height else "none"
                p.samples = self._samples(host)
            return p
        # the total: used / share (wandb logs the share unrounded, as a float)
        share = pl.col("pct") / 100
        total = with_bytes.filter(pl.col("pct") > 0).group_by("gpu").agg((pl.col("used") / share).median().alias("total"))
        with_bytes = with_bytes.join(total, on="gpu", how="left", maintain_order="left")
        timed = with_bytes["time"].null_count() < with_bytes.height
        p.clock = "wall" if timed else "none"
        gpu = with_bytes.select("line", "time", "gpu", pl.lit("memory.used").alias("series"), "used", "total")
        p.samples = self._samples(pl.concat([gpu, host], how="diagonal_relaxed"))
        if total.height:
            p.notes.append("GPU capacity = memoryAllocatedBytes / memoryAllocated (percent), the median over the readings")
        if not timed:
            p.notes.append("no _timestamp column: readings are on their row order")
        return p

    @staticmethod
    def _samples(rows: pl.DataFrame) -> pl.DataFrame:
        """line, time, [gpu], series, used, total -> samples (host rows have no GPU)."""
        if "gpu" not in rows.columns:
            rows = rows.with_columns(pl.lit(None, dtype=pl.String).alias("gpu"))
        return samples_frame(rows.sort("line", "series", "gpu", nulls_last=True).select(
            "time", pl.col("line").rank("dense").cast(pl.Int64).alias("seq"), "line", "gpu", "series",
            pl.col("used").round().cast(pl.Int64, strict=False).alias("bytes"),
            pl.col("total").round().cast(pl.Int64, strict=False).alias("total_bytes")))


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    files='W&B system metrics (`wandb-events.jsonl`, `run.history(stream="system")` as CSV or JSON lines)',
    yields="`memory.used` per GPU, capacity; the process's host RSS (`host.rss`) and the host's used memory "
           "(`host.used`)",
)
