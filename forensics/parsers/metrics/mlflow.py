"""MLflow's system metrics (docs/formats.md §10.2): a run's GPU memory as the local FileStore keeps it
(`mlruns/<experiment>/<run>/metrics/system/gpu_0_memory_usage_megabytes`, one file per metric, lines
`<timestamp ms> <value> <step>`, older ones without the step; mlflow/store/tracking/file_store.py),
or a metric history exported as CSV or JSON lines (`MlflowClient().get_metric_history()` as rows of
`key`, `value`, `timestamp`, `step`, other columns allowed).

mlflow/system_metrics/metrics/gpu_monitor.py logs, per GPU i, under the prefix `system/` (and the node
id, `system/<node>/`, when MLFLOW_SYSTEM_METRICS_NODE_ID is set), the mean of the samples since the
last log (every 10 s by default), rounded to 0.1:
- `gpu_{i}_memory_usage_megabytes` = NVML memory.used / 1e6: decimal megabytes (unlike the MB of the
  other tools read here), -> `memory.used` bytes;
- `gpu_{i}_memory_usage_percentage` = used / total * 100: beside the megabytes (an export holding both)
  it gives the total (`total_bytes`); alone (its own FileStore file) it is not read, there being no
  total to turn it into bytes.
Its cpu_monitor.py logs the host's memory the same way: `system_memory_usage_megabytes` = psutil's
virtual_memory().used / 1e6 -> `host.used` (the host's, never a GPU's), `system_memory_usage_percentage`
= used / total * 100 giving its total as for a GPU.
A FileStore file's name is its metric's name: the reader takes it from the file's path. The `step` of
system metrics counts logging rounds, not training steps, so it is kept as the sample order only.
"""
from __future__ import annotations

import re
from pathlib import PurePath

import polars as pl

from forensics.frames import rows_where
from forensics.io.lines import read_whole
from forensics.model import Parsed, Skipped, samples_frame
from forensics.parsers.metrics import common
from forensics.parsers.contract import Format

NAME = "mlflow-system-metrics"

_FILE_LINE = r"^\s*(?P<ts>[0-9]{12,13})\s+(?P<v>-?[0-9.eE+-]+|nan|NaN|inf|-inf)(?:\s+(?P<step>-?[0-9]+))?\s*$"
_FILE_LINE_RE = re.compile(_FILE_LINE)
_KEY = (r"^(?:system/)(?:(?P<node>[^/]+)/)?(?:gpu_(?P<gpu>[0-9]+)|(?P<sys>system))_memory_usage_"
        r"(?P<kind>megabytes|percentage)$")
_KEY_RE = re.compile(_KEY)
_JSON_ROW = re.compile(r'^\s*\{.*"key"\s*:\s*".*"timestamp"\s*:|^\s*\{.*"timestamp"\s*:.*"key"\s*:')
MB = 1_000_000


def _history_header(line: str) -> list[str] | None:
    cols = [c.strip().lower() for c in common.header_cells(line, ",")]
    return cols if {"key", "value", "timestamp"} <= set(cols) else None


def sniff(head: list[str]) -> str | None:
    lines = [ln for ln in head[:50] if ln.strip()]
    if not lines:
        return None
    if all(_FILE_LINE_RE.match(ln) for ln in lines[:20]):
        return "MLflow FileStore metric file ('<timestamp ms> <value> <step>' lines)"
    if _history_header(lines[0]) and any("system/" in ln for ln in lines[1:20]):
        return "MLflow metric history CSV (key, value, timestamp, step)"
    # an MLflow row is short: its start is enough, and a long JSON-looking line costs no more than that
    # (the pattern's two .* are quadratic on a line of many "key" fields, issue 45 D-R2)
    if _JSON_ROW.match(lines[0][:4096]) and '"system/' in lines[0]:
        return "MLflow metric history JSON lines (key, value, timestamp, step)"
    return None


def _metric_of_path(path: str) -> str:
    """The metric key a FileStore file holds: the path below its run's `metrics/` folder."""
    parts = PurePath(path).parts
    if "metrics" in parts:
        i = len(parts) - 1 - parts[::-1].index("metrics")
        return "/".join(parts[i + 1:])
    # a file copied out of its run folder keeps only its own name
    name = parts[-1] if parts else ""
    return ("system/" + name) if name.startswith(("gpu_", "system_memory_")) else name


class Reader:
    def __init__(self, src, opts):
        self.src = src
        self.kind: str | None = None       # "file" | "csv" | "json"
        self.columns: list[str] = []
        self.parts: list[pl.DataFrame] = []
        self.skipped = Skipped()

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        batch = common.without_blank(batch, self.skipped)
        if batch.height == 0:
            return
        if self.kind is None:
            first = batch["text"][0]
            header = _history_header(first)
            self.kind = "csv" if header else "json" if first.lstrip().startswith("{") else "file"
            if header:
                self.columns = header
                batch = batch.slice(1)
        t = pl.col("text")
        if self.kind == "file":
            g = batch.select("line", t.str.extract_groups(_FILE_LINE).alias("g")).unnest("g")
            key = pl.lit(_metric_of_path(self.src.path))
            frame = g.select("line", key.alias("key"), pl.col("v").alias("value"), "ts", "step")
        elif self.kind == "csv":
            n = len(self.columns)
            split = batch.select("line", t.str.split(",").list.len().alias("_n"), *common.cells(t, ",", n))
            self.skipped.add_lines("row does not fit the header, not read", split.filter(pl.col("_n") != n)["line"])
            split = split.filter(pl.col("_n") == n)
            at = {c: f"c{i}" for i, c in enumerate(self.columns)}
            frame = split.select("line", pl.col(at["key"]).alias("key"), pl.col(at["value"]).alias("value"),
                                 pl.col(at["timestamp"]).alias("ts"),
                                 (pl.col(at["step"]) if "step" in at else pl.lit(None, dtype=pl.String)).alias("step"))
        else:
            frame = batch.select(
                "line", t.str.extract(r'"key"\s*:\s*"([^"]*)"').alias("key"),
                t.str.extract(r'"value"\s*:\s*(-?[0-9][0-9.eE+-]*|NaN|null)').alias("value"),
                t.str.extract(r'"timestamp"\s*:\s*"?([0-9]+)').alias("ts"),
                t.str.extract(r'"step"\s*:\s*"?(-?[0-9]+)').alias("step"))
        unread = frame.filter(pl.col("ts").is_null() | pl.col("value").is_null() | pl.col("key").is_null())
        self.skipped.add_lines("not a metric row, not read", unread["line"])
        self.parts.append(rows_where(frame, pl.col("ts").is_not_null() & pl.col("value").is_not_null()
                                     & pl.col("key").is_not_null()))

    def finish(self) -> Parsed:
        p = Parsed(skipped=self.skipped)
        rows = pl.concat(self.parts) if self.parts else pl.DataFrame(
            schema={"line": pl.Int64, "key": pl.String, "value": pl.String, "ts": pl.String, "step": pl.String})
        keyed = rows.with_columns(pl.col("key").str.extract_groups(_KEY).alias("k")).unnest("k")
        other = keyed.filter(pl.col("kind").is_null())
        if other.height:
            p.skipped.add_lines("metric is not GPU or host memory, not read", other["line"].sort())
            names = other["key"].unique().sort().to_list()
            p.notes.append(f"metrics that are not GPU or host memory were not read: {', '.join(names[:5])}"
                           + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
        keyed = keyed.filter(pl.col("kind").is_not_null()).with_columns(
            common.number(pl.col("value")).alias("v"), common.epoch(common.number(pl.col("ts")) / 1000).alias("time"),
            pl.col("step").cast(pl.Int64, strict=False).alias("n"))
        mb = keyed.filter(pl.col("kind") == "megabytes")
        pct = keyed.filter(pl.col("kind") == "percentage")
        if pct.height and not mb.height:
            p.skipped.add_lines("memory given only as a percentage (no total to turn it into bytes), not read", pct["line"].sort())
            p.notes.append("memory as a percentage only (gpu_{i}_ or system_memory_usage_percentage): not read, there is "
                           "no total to turn it into bytes (the *_memory_usage_megabytes file beside it has the bytes)")
        if not mb.height:
            if not p.notes:
                p.notes.append("no GPU or host memory metric in it")
            return p
        # the total: used / share at the same logging round; MLflow rounds the share to 0.1 %, so only
        # shares of 5 % and more are used (an error of 1 % at most)
        share = pct.select("node", "gpu", "time", (pl.col("v") / 100).alias("share")).filter(pl.col("share") >= 0.05)
        total = (mb.join(share, on=["node", "gpu", "time"], how="inner", nulls_equal=True)
                 .group_by("node", "gpu").agg((pl.col("v") * MB / pl.col("share")).median().alias("total")))
        mb = mb.join(total, on=["node", "gpu"], how="left", nulls_equal=True, maintain_order="left")
        bad = mb.filter(~pl.col("v").is_finite().fill_null(False) | (pl.col("v") < 0))
        p.skipped.add_lines("value is not a memory size (NaN or negative), not read", bad["line"].sort())
        mb = mb.filter(pl.col("v").is_finite().fill_null(False) & (pl.col("v") >= 0)).sort("line")
        p.clock = "wall" if mb["time"].null_count() < mb.height else "none"
        p.samples = samples_frame(mb.select(
            "time", pl.col("line").rank("dense").cast(pl.Int64).alias("seq"), "line", pl.col("node").alias("host"),
            "gpu", pl.when(pl.col("sys").is_null()).then(pl.lit("memory.used")).otherwise(pl.lit("host.used")).alias("series"), (pl.col("v") * MB).round().cast(pl.Int64, strict=False).alias("bytes"),
            pl.col("total").round().cast(pl.Int64, strict=False).alias("total_bytes")))
        p.notes.append("*_memory_usage_megabytes are decimal megabytes (10^6 bytes), as MLflow computes them")
        if total.height:
            p.notes.append("capacity = megabytes / percentage at the same logging round, the median over the run")
        return p


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    files="MLflow system metrics (FileStore `metrics/system/gpu_N_memory_usage_megabytes`, "
          "`system_memory_usage_megabytes`, metric history CSV or JSON lines)",
    yields="`memory.used` per GPU (decimal MB), capacity; the host's used memory (`host.used`)",
)
