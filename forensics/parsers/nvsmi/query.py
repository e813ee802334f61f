"""`nvidia-smi -q` (also `-q -d MEMORY`, and the `-x` XML form) (docs/formats.md §1.5).

A report is `Timestamp : Sat Jan 25 22:19:18 2025` (asctime, local time), then one block per GPU
(`GPU 00000000:0F:00.0`) with indented sections; `FB Memory Usage` holds Total / Reserved (newer
drivers) / Used / Free in MiB, or `N/A`. Many reports appended (`-q -l N`, or a loop) form a series:
each Timestamp line starts a snapshot.

GPU ids: -q never prints the index. When a snapshot lists as many GPU blocks as its `Attached GPUs`
line says, the blocks are in index order (nvidia-smi enumerates devices by index), so the k-th block
is GPU k; otherwise (a `-i` selection) the bus id is the GPU's id. `meta["gpu_map"]` maps bus ids and
UUIDs to indexes when they are known.

Processes (`Processes` section: `Process ID`, `Name`, `Used GPU Memory`) -> series `process.used`.
"""
from __future__ import annotations

import re

import polars as pl

from forensics import clock
from forensics.options import Options
from forensics.model import Parsed, samples_frame
from forensics.io.sources import Source
from forensics.parsers.nvsmi import common as C
from forensics.parsers.contract import Format

NAME = "nvidia-smi-q"

KV_RE = r"^(?<ind> *)(?<key>[A-Za-z][^:]*?)\s*:\s?(?<val>.*?)\s*$"
GPU_LINE_RE = r"^GPU (?<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$"
SECTION_RE = r"^ {1,4}(?<sec>[A-Za-z][^:]*?)\s*$"
FB_SECTIONS = ["FB Memory Usage", "Memory Usage"]
STRUCTURE_RE = r"^\s*=+NVSMI LOG=+\s*$|^ +[A-Za-z][^:]*$"


def sniff(head: list[str]) -> str | None:
    return C.sniff_for(NAME, head)


def parse(src: Source, opts: Options) -> Parsed:
    return parse_lines(src.frame(), src.path, opts)


def parse_lines(df: pl.DataFrame, path: str, opts: Options, nested: bool = False) -> Parsed:
    df = df.select("line", "text").sort("line")
    if df.filter(pl.col("text").str.contains(r"<nvidia_smi_log>")).height:
        return _parse_xml(df, path, opts, nested)
    p = Parsed()
    zone = opts.tz_for(path)
    t = pl.col("text")
    kv = t.str.extract_groups(KV_RE)
    ind = kv.struct.field("ind").str.len_chars()
    key = kv.struct.field("key")
    val = kv.struct.field("val")
    bus = t.str.extract(GPU_LINE_RE, 1)
    sec = t.str.extract(SECTION_RE, 1)
    df = df.with_columns(
        ind.alias("ind"), key.alias("key"), val.alias("val"), bus.alias("bus_raw"),
        sec.alias("sec_head"),
        ((key == "Timestamp") & (ind == 0)).alias("is_ts"),
    ).with_columns(
        pl.col("is_ts").cast(pl.Int64).cum_sum().alias("snap"),
        pl.when(pl.col("bus_raw").is_not_null()).then(pl.col("line")).alias("gpu_line"),
        # the section a line belongs to: set by an indent-4 heading, ended by anything at indent <= 4
        pl.when(pl.col("sec_head").is_not_null()).then(pl.col("sec_head"))
        .when(pl.col("bus_raw").is_not_null() | (pl.col("ind") <= 4)).then(pl.lit(""))
        .alias("sec_mark"),
    ).with_columns(
        pl.col("gpu_line").forward_fill().over("snap"),
        pl.col("sec_mark").forward_fill().alias("sec"),
    )
    stamps = df.filter(pl.col("is_ts")).select(
        "snap", clock.localize(C.asctime_expr(pl.col("val")), zone).alias("time"), pl.col("line").alias("ts_line"))
    attached = df.filter((pl.col("key") == "Attached GPUs") & (pl.col("ind") == 0)).group_by("snap").agg(
        pl.col("val").first().cast(pl.Int64, strict=False).alias("attached"))
    gpus = df.filter(pl.col("bus_raw").is_not_null()).select(
        "snap", "gpu_line", C.norm_bus_expr(pl.col("bus_raw")).alias("bus"))
    gpus = gpus.with_columns(pl.int_range(pl.len()).over("snap").alias("rank"), pl.len().over("snap").alias("n"))
    gpus = gpus.join(attached, on="snap", how="left", maintain_order="left").with_columns(
        pl.when(pl.col("n") == pl.col("attached")).then(pl.col("rank").cast(pl.String)).alias("index"))
    info = df.filter(pl.col("gpu_line").is_not_null() & (pl.col("ind") == 4) & pl.col("key").is_in(
        ["Product Name", "GPU UUID", "Minor Number"])).group_by("gpu_line").agg(
        pl.col("val").filter(pl.col("key") == "Product Name").first().alias("name"),
        pl.col("val").filter(pl.col("key") == "GPU UUID").first().alias("uuid"))
    gpus = gpus.join(info, on="gpu_line", how="left", maintain_order="left").with_columns(
        pl.coalesce("index", "bus").alias("gpu"))

    in_fb = pl.col("sec").is_in(FB_SECTIONS) & pl.col("gpu_line").is_not_null() & (pl.col("ind") > 4)
    fb = df.filter(in_fb & pl.col("key").is_in(["Total", "Reserved", "Used", "Free"])).with_columns(
        C.mem_bytes_expr(pl.col("val"), "MiB").alias("bytes"),
        pl.col("val").str.contains("^(?:" + C.PLACEHOLDER_RE + ")$").alias("ph"))
    mem = fb.group_by("gpu_line", maintain_order=True).agg(
        pl.col("bytes").filter(pl.col("key") == "Used").first().alias("bytes"),
        pl.col("bytes").filter(pl.col("key") == "Total").first().alias("total_bytes"),
        pl.col("line").filter(pl.col("key") == "Used").first().alias("line"),
        pl.col("ph").filter(pl.col("key") == "Used").first().alias("ph"),
    ).filter(pl.col("line").is_not_null() & (pl.col("bytes").is_not_null() | pl.col("ph")))
    mem = mem.join(gpus.select("gpu_line", "snap", "gpu"), on="gpu_line") \
        .join(stamps, on="snap", how="left", maintain_order="left")
    mem_samples = mem.select("time", pl.col("snap").alias("seq"), "line", "gpu", pl.lit("memory.used").alias("series"),
                             "bytes", "total_bytes")

    in_proc = (pl.col("sec") == "Processes") & pl.col("gpu_line").is_not_null() & (pl.col("ind") > 4)
    pl_df = df.filter(in_proc).with_columns(
        (pl.col("key") == "Process ID").cast(pl.Int64).cum_sum().alias("proc"))
    procs = pl_df.filter(pl.col("proc") > 0).group_by("gpu_line", "proc", maintain_order=True).agg(
        pl.col("val").filter(pl.col("key") == "Process ID").first().alias("pid"),
        pl.col("val").filter(pl.col("key").is_in(["Name", "Process Name"])).first().alias("pname"),
        pl.col("val").filter(pl.col("key") == "Used GPU Memory").first().alias("used"),
        # the evidence of the bytes is the line that holds them (the pid's line when it has none)
        pl.coalesce(pl.col("line").filter(pl.col("key") == "Used GPU Memory").first(),
                    pl.col("line").filter(pl.col("key") == "Process ID").first()).alias("line"),
    ).filter(pl.col("pid").str.contains(r"^[0-9]{1,10}$"))
    procs = procs.join(gpus.select("gpu_line", "snap", "gpu"), on="gpu_line") \
        .join(stamps, on="snap", how="left", maintain_order="left")
    proc_samples = procs.select(
        "time", pl.col("snap").alias("seq"), "line", "gpu", pl.col("pid").cast(pl.Int64, strict=False),
        pl.lit("process.used").alias("series"), C.mem_bytes_expr(pl.col("used"), "MiB").alias("bytes"),
        pl.when(~pl.col("pname").is_in(["N/A", ""])).then(pl.col("pname")).alias("label"))
    p.samples = samples_frame(pl.concat([samples_frame(mem_samples), samples_frame(proc_samples)]).sort("line"))

    # what is not a key/value, a section heading or a GPU line is counted
    known = pl.col("key").is_not_null() | pl.col("bus_raw").is_not_null() | pl.col("text").str.contains(STRUCTURE_RE)
    rest = df.filter(~known)
    errors = rest.filter(t.str.contains(C.DRIVER_ERROR_RE))
    rest = rest.filter(~t.str.contains(C.DRIVER_ERROR_RE)).select("line", "text", C.junk_reason_expr(t).alias("reason"))
    p.skipped.add_lines("driver error", errors["line"])
    if errors.height:
        p.events = C.driver_error_events(errors.select("line", "text"))

    timed = p.samples.height > 0 and p.samples["time"].null_count() < p.samples.height
    p.clock = "wall-assumed" if timed else "none"
    if stamps.height > 1:
        p.notes.append(f"{stamps.height} nvidia-smi -q reports")
    if gpus.height and gpus["index"].null_count():
        p.notes.append("not every attached GPU is listed (nvidia-smi -i): GPUs are named by bus id")
    _meta(p, gpus)
    return C.finish(p, rest, path, opts, NAME, nested)


def _meta(p: Parsed, gpus: pl.DataFrame) -> None:
    if gpus.height == 0:
        return
    g = gpus.unique(subset=["gpu"], keep="first", maintain_order=True)
    tot = p.samples.filter(pl.col("series") == "memory.used").group_by("gpu").agg(pl.col("total_bytes").max())
    g = g.join(tot, on="gpu", how="left", maintain_order="left")
    p.meta["gpus"] = [{"gpu": r["gpu"], "index": r["index"], "name": r["name"], "uuid": r["uuid"], "bus_id": r["bus"],
                       "total_bytes": r["total_bytes"]} for r in g.iter_rows(named=True)]
    gm = {}
    for r in p.meta["gpus"]:
        if r["index"] is not None:
            for k in ("bus_id", "uuid"):
                if r[k]:
                    gm[r[k]] = r["index"]
    if gm:
        p.meta["gpu_map"] = gm


# -- XML (-q -x) ------------------------------------------------------------------------------------

def _line_after(lines: list[str], start: int, end: int, tag: str) -> int | None:
    """The index of the first line from `start` (excluded) to `end` that holds `tag`, or None."""
    return next((j for j in range(start + 1, end + 1) if tag in lines[j]), None)


def _parse_xml(df: pl.DataFrame, path: str, opts: Options, nested: bool) -> Parsed:
    """`nvidia-smi -q -x`, one document or many appended. Parsed with defusedxml (no entities)."""
    import defusedxml.ElementTree as ET
    from datetime import datetime

    from forensics.units import parse_size

    p = Parsed()
    zone = opts.tz_for(path)
    lines = df["text"].to_list()
    numbers = df["line"].to_list()
    starts = [i for i, s in enumerate(lines) if "<nvidia_smi_log>" in s]
    rows, gpus, bad_docs = [], {}, []
    for k, s in enumerate(starts):
        end = next((j for j in range(s, len(lines)) if "</nvidia_smi_log>" in lines[j]), None)
        if end is None or (k + 1 < len(starts) and end > starts[k + 1]):
            bad_docs.append(numbers[s])
            continue
        text = "\n".join(lines[s:end + 1])
        text = text[text.index("<nvidia_smi_log>"):]
        try:
            root = ET.fromstring(text)
        except Exception:
            bad_docs.append(numbers[s])
            continue
        stamp = (root.findtext("timestamp") or "").strip()
        try:
            naive = datetime.strptime(re.sub(r"\s+", " ", stamp), "%a %b %d %H:%M:%S %Y")
        except ValueError:
            naive = None
        gpu_elems = root.findall("gpu")
        attached = root.findtext("attached_gpus")
        all_listed = attached is not None and attached.strip().isdigit() and int(attached) == len(gpu_elems)
        for rank, g in enumerate(gpu_elems):
            bus = C.norm_bus(g.get("id"))
            index = str(rank) if all_listed else None
            gid = index or bus
            at = next((j for j in range(s, end + 1) if f'id="{g.get("id")}"' in lines[j]), s)
            line = numbers[at]
            fbm = g.find("fb_memory_usage")
            if fbm is not None:
                used = parse_size(fbm.findtext("used"))
                total = parse_size(fbm.findtext("total"))
                # a reading cites the line that holds its bytes: `<used>` inside this GPU's `<fb_memory_usage>`
                fb_at = _line_after(lines, at, end, "<fb_memory_usage>")
                used_at = _line_after(lines, fb_at, end, "<used>") if fb_at is not None else None
                rows.append({"naive": naive, "seq": k + 1, "line": numbers[used_at] if used_at is not None else line,
                             "gpu": gid, "series": "memory.used", "bytes": used, "total_bytes": total})
            gpus.setdefault(gid, {"gpu": gid, "index": index, "name": (g.findtext("product_name") or "").strip() or None,
                                  "uuid": (g.findtext("uuid") or "").strip() or None, "bus_id": bus,
                                  "total_bytes": parse_size(fbm.findtext("total")) if fbm is not None else None})
            proc_at = at
            for proc in g.iter("process_info"):
                proc_at = _line_after(lines, proc_at, end, "<process_info>") if proc_at is not None else None
                pid = (proc.findtext("pid") or "").strip()
                if not pid.isdigit():
                    continue
                name = (proc.findtext("process_name") or "").strip()
                mem_at = _line_after(lines, proc_at, end, "<used_memory>") if proc_at is not None else None
                rows.append({"naive": naive, "seq": k + 1, "line": numbers[mem_at] if mem_at is not None else line,
                             "gpu": gid, "pid": int(pid),
                             "series": "process.used", "bytes": parse_size(proc.findtext("used_memory")),
                             "label": name if name and name != "N/A" else None})
    if rows:
        frame = pl.DataFrame(rows, schema_overrides={"naive": pl.Datetime("us")}, infer_schema_length=None)
        frame = frame.with_columns(clock.localize(pl.col("naive"), zone).alias("time")).drop("naive")
        p.samples = samples_frame(frame.sort("line"))
    for line in bad_docs:
        p.skipped.add("unreadable XML report", line)
    p.clock = "wall-assumed" if p.samples.height and p.samples["time"].null_count() < p.samples.height else "none"
    if gpus:
        p.meta["gpus"] = list(gpus.values())
        gm = {g[k]: g["index"] for g in gpus.values() for k in ("bus_id", "uuid") if g["index"] is not None and g[k]}
        if gm:
            p.meta["gpu_map"] = gm
    return p


C.register_section(NAME, parse_lines)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="`nvidia-smi -q` and its `-x` XML",
    yields="FB memory total/used/reserved",
)
