"""Format "prometheus-text": the Prometheus text exposition format, what `curl :9400/metrics` of an
exporter prints (docs/formats.md §9.3): `# HELP` / `# TYPE` lines, then one line per series,
`NAME{label="value",...} VALUE [TIMESTAMP_MS]`. The GPU memory metrics and what their labels say are
those of the JSON reader (exporters.py: dcgm-exporter, nvidia_gpu_exporter, Triton, cAdvisor).

Times: a line's own timestamp (milliseconds since the epoch) where the exporter wrote one; else a
file of one scrape is timed by the file's modification time (when it was saved), and several scrapes
concatenated without timestamps (a series seen again starts the next scrape) are ordered by scrape
number, untimed. Each reading's evidence is its own line. Series of other metrics (utilization, clocks,
vLLM's KV-cache fraction, which holds no byte count) are named in a note, not read.
"""
from __future__ import annotations

import re

import polars as pl

from forensics.model import Parsed
from forensics.parsers.metrics import exporters
from forensics.parsers.contract import Format

NAME = "prometheus-text"

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?[ \t]+(?P<value>[^ \t]+)"
                     r"(?:[ \t]+(?P<ts>-?[0-9]+))?[ \t]*$")
_META = re.compile(r"^#\s*(?:HELP|TYPE)\s+(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)")
# the exporters whose pages hold GPU memory: a line of theirs in the head claims the file
_GPU_EXPORTER = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?(?:DCGM_FI_|dcgm_|nvidia_smi_|nvidia_gpu_|nv_gpu_|"
                           r"container_accelerator_|vllm:)[a-zA-Z0-9_:]*(?:\{|\s)")


def sniff(head: list[str]) -> str | None:
    for i, line in enumerate(head, 1):
        if _GPU_EXPORTER.match(line) and (line.startswith("#") or _SAMPLE.match(line.rstrip())):
            return f"Prometheus text exposition of a GPU exporter (line {i})"
    return None


def parse(src, opts) -> Parsed:
    p = Parsed(clock="none")
    rows, names = [], set()
    for line_no, text in src.frame().select("line", "text").iter_rows():
        text = (text or "").rstrip()
        if not text or _META.match(text):
            continue
        if text.startswith("#"):
            if not text.lstrip("# ").startswith("source:"):
                p.skipped.add("comment line", line_no)
            continue
        m = _SAMPLE.match(text)
        if not m:
            p.skipped.add("not a series line (NAME{labels} VALUE [TIMESTAMP])", line_no)
            continue
        names.add(m["name"])
        if m["name"] not in exporters.METRICS and m["name"] != exporters.GPU_INFO:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            p.skipped.add("value is not a number, not read", line_no)
            continue
        _, labels = exporters.parse_selector("{" + (m["labels"] or "") + "}")
        rows.append((m["name"], m["labels"] or "", labels, value, int(m["ts"]) if m["ts"] else None, line_no))
    other = exporters.other_metrics_note(sorted(names))
    if not rows:
        p.notes.append("no GPU memory series in it (" + (other or "no metric names")
                       + "; docs/formats.md §9 lists the ones read)")
        return p
    # a series seen again starts the next scrape (concatenated pages without timestamps)
    scrape, seen, keys = 0, set(), []
    for r in rows:
        key = (r[0], r[1])
        if key in seen:
            scrape, seen = scrape + 1, set()
        seen.add(key)
        keys.append(scrape)
    timed = all(r[4] is not None for r in rows)
    mtime = getattr(src, "mtime", None)
    if timed:
        times = [r[4] / 1000 for r in rows]
        p.clock = "wall"
    elif scrape == 0 and mtime:
        times = [mtime] * len(rows)
        p.clock = "wall"
        p.notes.append("one scrape without timestamps: timed by the file's modification time")
    else:
        # the scrape number keeps a GPU's readings of one scrape together (to_samples keys them by
        # time); the times are taken back below
        times = [float(k) for k in keys]
        p.notes.append(f"{scrape + 1} scrapes without timestamps: ordered by scrape, untimed")
    labels = [r[2] for r in rows]
    exported = any("exported_pod" in lb for lb in labels)
    index_of = exporters.gpu_index_map([r[2] for r in rows if r[0] == exporters.GPU_INFO])
    sids: dict[tuple, int] = {}
    series = []
    for r in rows:
        if r[0] == exporters.GPU_INFO or (r[0], r[1]) in sids:
            continue
        sids[(r[0], r[1])] = len(series)
        series.append({"sid": len(series), **exporters.describe(r[0], r[2], exported, index_of)})
    kept = [(i, r) for i, r in enumerate(rows) if r[0] != exporters.GPU_INFO]
    pts = pl.DataFrame({"sid": [sids[(r[0], r[1])] for _, r in kept],
                        "t": [times[i] for i, _ in kept], "value": [r[3] for _, r in kept],
                        "line": [r[5] for _, r in kept]},
                       schema={"sid": pl.Int64, "t": pl.Float64, "value": pl.Float64, "line": pl.Int64})
    bad_t = ~pl.col("t").is_between(0, 7.3e9)
    p.skipped.add_lines("timestamp outside 1970..2200, not read", pts.filter(bad_t)["line"])
    pts = pts.filter(~bad_t).with_columns(
        (pl.col("t") * 1e6).round().cast(pl.Int64).cast(pl.Datetime("us", "UTC")).alias("time")).drop("t")
    p.samples, notes, p.meta = exporters.to_samples(series, pts, p.skipped)
    if p.clock == "none":
        p.samples = p.samples.with_columns(pl.lit(None, dtype=p.samples.schema["time"]).alias("time"))
    p.notes.extend(notes)
    if other:
        p.notes.append(other)
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="Prometheus text exposition (`curl :9400/metrics`, one scrape or several concatenated) of the GPU "
          "exporters and Triton's `nv_gpu_memory_*`",
    yields="the same as `prometheus-json`",
)
