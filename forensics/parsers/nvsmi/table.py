"""Plain `nvidia-smi` output: the box table (docs/formats.md §1.4), one snapshot or many appended
(a `watch` log, or `nvidia-smi` run in a loop).

Each snapshot starts at its `| NVIDIA-SMI x.y ... Driver Version: ...` line; its time is the date
line that newer drivers print above the box (`Fri Sep 27 20:41:52 2024`, local time) or the first
line of `watch` (`Every 1.0s: nvidia-smi   host: Fri Sep 27 ...`); old drivers print none, and then
snapshots are numbered only.

Per GPU: the row under the GPU's first row (`| N/A 36C P0 41W / 300W |  12799MiB / 16280MiB |`) ->
series `memory.used` with `total_bytes`. MIG device rows (`|  1  3  0  0 | 14366MiB / 19968MiB |`) ->
`memory.used` with `gpu` = "<gpu>/<GI>/<CI>" (the MIG device's own series), label "MIG".
Process table rows (old `| 0  12345  C  python  1234MiB |`, new `| 0 N/A N/A 3543111 C
VLLM::EngineCore 29708MiB |`) -> series `process.used` per pid, label = the process name as printed
(newer drivers cut long names from the left, with `...`, and a wide memory cell to `10356...`,
read as unknown).

The same rows grep'd out of the box (`nvidia-smi | grep -E 'MiB|python'`, often in a loop with
`date`, and often pasted above a `--query-gpu` CSV) are read too: without the GPU's first row, a
run of memory rows is one snapshot and its rows are the GPUs in index order (the order nvidia-smi
lists them), timed by a date line above the run. Lines of another nvidia-smi format after them (the
CSV) are read by that format's parser (common.parse_rest).
"""
from __future__ import annotations

import polars as pl

from forensics import clock
from forensics.options import Options
from forensics.model import Parsed, samples_frame
from forensics.io.sources import Source
from forensics.parsers.nvsmi import common as C
from forensics.parsers.contract import Format

NAME = "nvidia-smi-table"

HEADER_RE = r"^\s*\|\s*NVIDIA-SMI\s+\S+"
GPU_ROW_RE = (r"^\s*\|\s*(?<idx>[0-9]+)\s+(?<name>.+?)\s+(?:On|Off|WDDM|TCC|N/A)\s*\|\s*"
              r"(?<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s")
MEM_CELL_RE = r"\|\s*(?<used>[0-9]+)MiB\s*/\s*(?<total>[0-9]+)MiB\s*\|"
MIG_ROW_RE = r"^\s*\|\s*(?<g>[0-9]+)\s+(?<gi>[0-9]+)\s+(?<ci>[0-9]+)\s+(?<dev>[0-9]+)\s*\|\s*(?<used>[0-9]+)MiB\s*/\s*(?<total>[0-9]+)MiB\s*\|"
WATCH_TIME_RE = r"^Every [0-9]+(?:\.[0-9]+)?s: .*?\s([A-Z][a-z]{2} [A-Z][a-z]{2}\s+[0-9]+ [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4})\s*$"
STRUCTURE_RE = r"^\s*[|+].*[|+]\s*$"


def sniff(head: list[str]) -> str | None:
    return C.sniff_for(NAME, head)


def parse(src: Source, opts: Options) -> Parsed:
    return parse_lines(src.frame(), src.path, opts)


def parse_lines(df: pl.DataFrame, path: str, opts: Options, nested: bool = False) -> Parsed:
    p = Parsed()
    zone = opts.tz_for(path)
    t = pl.col("text")
    df = df.select("line", "text").sort("line").with_columns(
        t.str.contains(HEADER_RE).alias("is_header"),
        t.str.extract_groups(GPU_ROW_RE).alias("gpu_row"),
        t.str.extract_groups(MEM_CELL_RE).alias("mem"),
        t.str.extract_groups(MIG_ROW_RE).alias("mig"),
        t.str.extract_groups(C.TABLE_PROC_ROW_RE).alias("proc"),
        t.str.contains(C.TABLE_MEM_ROW_RE).alias("mem_row"),
        pl.coalesce(
            pl.when(t.str.contains(C.DATE_LINE_RE)).then(t.str.replace(r" [A-Z]{2,5}( [0-9]{4})\s*$", "$1")),
            t.str.extract(WATCH_TIME_RE, 1),
        ).alias("date_text"),
    )
    # A GPU's memory row is the row under its first row; rows without it are grep'd out of the box
    # (`nvidia-smi | grep MiB`): each run of them is one snapshot, its rows the GPUs in index order.
    gpu_idx = pl.col("gpu_row").struct.field("idx")
    prev_idx = gpu_idx.shift(1)
    bare = pl.col("mem_row") & prev_idx.is_null()
    df = df.with_columns(bare.alias("bare"), (bare & ~bare.shift(1).fill_null(False)).alias("bare_start"))
    df = df.with_columns(
        (pl.col("is_header") | pl.col("bare_start")).cast(pl.Int64).cum_sum().alias("snap"),
        C.asctime_expr(pl.col("date_text")).alias("naive"),
    )
    # the date line above each box (or run of bare rows) gives that snapshot its time
    heads = df.filter(pl.col("is_header") | pl.col("bare_start")).select("line", "snap")
    dates = df.filter(pl.col("naive").is_not_null()).select(pl.col("line").alias("dline"), "naive")
    if heads.height and dates.height:
        placed = heads.join_asof(dates, left_on="line", right_on="dline", strategy="backward", tolerance=4)
    else:
        placed = heads.with_columns(pl.lit(None, dtype=pl.Int64).alias("dline"),
                                    pl.lit(None, dtype=pl.Datetime("us")).alias("naive"))
    snap_time = placed.select("snap", clock.localize(pl.col("naive"), zone).alias("time"))
    used_dates = placed["dline"].drop_nulls().to_list()
    df = df.join(snap_time, on="snap", how="left", maintain_order="left")

    gpus = df.filter(gpu_idx.is_not_null()).select(
        "line", "snap", gpu_idx.alias("gpu"), pl.col("gpu_row").struct.field("name").alias("name"),
        C.norm_bus_expr(pl.col("gpu_row").struct.field("bus")).alias("bus"))
    mem_rows = pl.concat([
        df.with_columns(prev_idx.alias("gpu")).filter(pl.col("gpu").is_not_null() & pl.col("mem").struct.field("used").is_not_null()),
        _bare_rows(df, p)]).sort("line")
    mem = mem_rows.select(
        "time", pl.col("snap").alias("seq"), "line", "gpu", pl.lit("memory.used").alias("series"),
        C.mib_expr(pl.col("mem").struct.field("used")).alias("bytes"),
        C.mib_expr(pl.col("mem").struct.field("total")).alias("total_bytes"),
        pl.lit(None, dtype=pl.Int64).alias("pid"), pl.lit(None, dtype=pl.String).alias("label"))
    mig_rows = df.filter(pl.col("mig").struct.field("used").is_not_null())
    mig = mig_rows.select(
        "time", pl.col("snap").alias("seq"), "line",
        pl.concat_str([pl.col("mig").struct.field(x) for x in ("g", "gi", "ci")], separator="/").alias("gpu"),
        pl.lit("memory.used").alias("series"),
        C.mib_expr(pl.col("mig").struct.field("used")).alias("bytes"),
        C.mib_expr(pl.col("mig").struct.field("total")).alias("total_bytes"),
        pl.lit(None, dtype=pl.Int64).alias("pid"), pl.lit("MIG").alias("label"))
    proc_rows = df.filter(pl.col("proc").struct.field("pid").is_not_null())
    usage = pl.col("proc").struct.field("usage")
    pname = pl.col("proc").struct.field("pname").str.strip_chars()
    proc = proc_rows.select(
        "time", pl.col("snap").alias("seq"), "line", pl.col("proc").struct.field("g").alias("gpu"),
        pl.lit("process.used").alias("series"),
        C.mib_expr(usage.str.extract(r"^([0-9]+)MiB$", 1)).alias("bytes"),
        pl.lit(None, dtype=pl.Int64).alias("total_bytes"),
        pl.col("proc").struct.field("pid").cast(pl.Int64, strict=False).alias("pid"),
        pl.when(pname != "").then(pname).alias("label"))
    p.samples = samples_frame(pl.concat([mem, mig, proc], how="vertical").sort("line"))
    cut = proc_rows.filter(usage.str.ends_with("..."))
    if cut.height:
        p.notes.append(f"{cut.height} process rows with their memory cut off by nvidia-smi's column width "
                       f"(`{cut['proc'].struct.field('usage')[0]}`): pid and name read, memory unknown")

    used = set(mem_rows["line"].to_list()) | set(mig_rows["line"].to_list()) | set(proc_rows["line"].to_list()) \
        | set(used_dates)
    rest = df.filter(~pl.col("line").is_in(list(used)) & ~t.str.contains(STRUCTURE_RE) & ~pl.col("is_header"))
    errors = rest.filter(t.str.contains(C.DRIVER_ERROR_RE))
    rest = rest.filter(~t.str.contains(C.DRIVER_ERROR_RE)).select("line", "text", C.junk_reason_expr(t).alias("reason"))
    p.skipped.add_lines("driver error", errors["line"])
    if errors.height:
        # nvidia-smi prints its error lines before the table of the same run
        box_times = placed.select("line", clock.localize(pl.col("naive"), zone).alias("stime"))
        errors = errors.select("line", "text").join_asof(box_times, on="line", strategy="forward")
        p.events = C.driver_error_events(errors, pl.col("stime"))

    timed = p.samples.height > 0 and p.samples["time"].null_count() < p.samples.height
    p.clock = "wall-assumed" if timed else "none"
    nsnap = heads.height
    if nsnap > 1:
        p.notes.append(f"{nsnap} nvidia-smi snapshots" + ("" if timed else " without date lines: ordered by number only"))
    elif not timed and p.samples.height:
        p.notes.append("no date line above the table" + ("" if df["bare"].any() else " (older driver)")
                       + ": the snapshot has no time")
    if gpus.height:
        g = gpus.unique(subset=["gpu", "bus"], keep="first", maintain_order=True)
        totals = mem.group_by("gpu").agg(pl.col("total_bytes").max())
        g = g.join(totals, on="gpu", how="left", maintain_order="left")
        p.meta["gpus"] = [{"gpu": r["gpu"], "index": r["gpu"], "name": r["name"], "uuid": None, "bus_id": r["bus"],
                           "total_bytes": r["total_bytes"]} for r in g.iter_rows(named=True)]
        p.meta["gpu_map"] = {r["bus_id"]: r["index"] for r in p.meta["gpus"] if r["bus_id"]}
    return C.finish(p, rest, path, opts, NAME, nested)


def _bare_rows(df: pl.DataFrame, p: Parsed) -> pl.DataFrame:
    """Memory rows without their GPU's first row, each named by its place in its run (nvidia-smi lists
    GPUs in index order), unless the process rows of the same snapshot name a GPU the run does not
    have (`nvidia-smi -i 3`): then one row is that GPU, several are unnamed."""
    bare = df.filter(pl.col("bare")).with_columns(
        pl.int_range(pl.len()).over("snap").cast(pl.String).alias("gpu"))
    if bare.height == 0:
        return bare
    named = df.filter(pl.col("proc").struct.field("pid").is_not_null()).group_by("snap").agg(
        pl.col("proc").struct.field("g").unique().alias("proc_gpus"))
    runs = bare.group_by("snap").agg(pl.len().alias("n")).join(named, on="snap", how="left")
    fix = {}
    for snap, n, proc_gpus in runs.iter_rows():
        if proc_gpus and any(int(g) >= n for g in proc_gpus):
            fix[snap] = proc_gpus[0] if n == 1 and len(proc_gpus) == 1 else None
    if fix:
        bare = bare.with_columns(pl.when(pl.col("snap").is_in(list(fix))).then(
            pl.col("snap").replace_strict(fix, default=None, return_dtype=pl.String)).otherwise(pl.col("gpu")).alias("gpu"))
    p.notes.append(f"{bare.height} GPU memory rows without their GPU's first row (the table was grep'd): each "
                   "named by its place in its run of rows, as nvidia-smi lists GPUs in index order"
                   + ("; where the process rows name other GPUs, by those or not at all" if fix else ""))
    return bare


C.register_section(NAME, parse_lines)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="plain `nvidia-smi` tables (old and new layouts, process table, MIG devices; also pasted from the "
          "middle, or the MIG-devices section alone; its rows grep'd out of the box, `nvidia-smi | grep -E "
          "'MiB|python'`, with a `--query-gpu` CSV after them)",
    yields="per-GPU, per-MIG-device and per-process use",
)
