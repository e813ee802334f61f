"""`nvidia-smi --query-compute-apps=... --format=csv` (docs/formats.md §1.2): one row per process per GPU.

Samples: series `process.used`, `pid`, `gpu` = the GPU's UUID (else its bus id; the timeline maps
these to indexes), `label` = the process name (null for `[Not Found]`), `bytes` null where the driver
prints `[N/A]` (Windows WDDM) or the query has no memory column.

Looped logs. Each run of nvidia-smi is one *sample block*: a header line starts one, and so does a
jump of more than half a second between timestamps (a `-l N` loop prints its header once). A block
that holds only its header means "no compute processes at that time": it yields no sample, but the
information is kept in two ways:
- a `process_gone` event for each (gpu, pid) that is absent from a later block of the same log,
  at the first block without it (`time` = that block's time, else the next known one; `detail`
  has `last_seen` and `last_seen_line`);
- `meta["blocks"]` (how many blocks, first and last time) and `meta["empty_blocks"]` (runs of
  header-only blocks: first/last line, count, the times just before and after).
A log that simply ends says nothing about its processes, so no event is made at its end.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from forensics.options import Options
from forensics.model import Parsed, events_frame, samples_frame
from forensics.io.sources import Source
from forensics.parsers.nvsmi import common as C
from forensics.frames import partitions, rows_where
from forensics.parsers.contract import Format

NAME = "nvidia-smi-apps"

ALIASES = {"used_gpu_memory": "used_memory", "name": "process_name", "uuid": "gpu_uuid"}
ROLES = ("timestamp", "gpu_name", "gpu_bus_id", "gpu_uuid", "pid", "process_name", "used_memory")
BLOCK_GAP_MS = 500
MAX_EMPTY_RANGES = 1000
MAX_PROCESSES = 1000


@dataclass
class AppsMap:
    ncols: int
    roles: dict[str, int] = field(default_factory=dict)
    units: dict[str, str | None] = field(default_factory=dict)

    def pattern(self) -> str:
        wanted = set(self.roles.values())
        cells = [f"(?<c{i}>[^,]*)" if i in wanted else "[^,]*" for i in range(self.ncols)]
        # the process name is the cell most likely to hold ", " (a path): let it take the slack
        if "process_name" in self.roles:
            cells[self.roles["process_name"]] = f"(?<c{self.roles['process_name']}>.*?)"
        return "^" + ", ".join(cells) + "$"


def sniff(head: list[str]) -> str | None:
    return C.sniff_for(NAME, head)


def parse(src: Source, opts: Options) -> Parsed:
    return parse_lines(src.frame(), src.path, opts)


def map_from_names(names: list[tuple[str, str | None]]) -> AppsMap:
    m = AppsMap(ncols=len(names))
    for i, (name, unit) in enumerate(names):
        name = ALIASES.get(name, name)
        if name in ROLES and name not in m.roles:
            m.roles[name] = i
            m.units[name] = unit
    return m


def infer_map(texts: list[str]) -> tuple[AppsMap | None, list[str]]:
    shapes = [(len(k), C.apps_row_roles(k), k) for k in (C.row_kinds(t) for t in texts) if k]
    shapes = [s for s in shapes if s[1]]
    if not shapes:
        return None, []
    ncols = Counter(s[0] for s in shapes).most_common(1)[0][0]
    roles, kinds = next((r, k) for n, r, k in shapes if n == ncols)
    m = AppsMap(ncols=ncols, roles=dict(roles))
    for i, k in enumerate(kinds):
        if i in roles.values():
            continue
        role = {"ts": "timestamp", "uuid": "gpu_uuid", "bus": "gpu_bus_id", "gpuname": "gpu_name"}.get(k)
        if role and role not in m.roles:
            m.roles[role] = i
    desc = ", ".join(f"{i + 1}={r}" for r, i in sorted(m.roles.items(), key=lambda kv: kv[1]))
    return m, [f"no header: compute-apps columns inferred from the cell shapes: {desc}"]


def _start_lines(df: pl.DataFrame) -> dict[str, AppsMap | None]:
    cand = rows_where(df, pl.col("t").str.contains(C.HEADER_LINE_RE) | pl.col("t").str.contains("--query-", literal=True))
    out: dict[str, AppsMap | None] = {}
    for t in cand["t"].unique(maintain_order=True).to_list():
        kind = C.header_kind(t)
        if kind == "apps":
            out[t] = map_from_names(C.header_names(t))
        elif kind == "gpu":
            out[t] = None
        elif re.match(C.PROMPT_RE, t) and (C.query_list(t, "apps") or C.query_list(t, "gpu")):
            q = C.query_list(t, "apps")
            out[t] = map_from_names([(n, None) for n in q]) if q else None
    return out


def parse_lines(df: pl.DataFrame, path: str, opts: Options, nested: bool = False) -> Parsed:
    p = Parsed()
    zone = opts.tz_for(path)
    df = df.select("line", "text").with_columns(pl.col("text").str.strip_chars().alias("t"))
    if df["t"].str.starts_with("//").any():
        # rows quoted in source code keep their comment marker ("//23492, ...")
        df = df.with_columns(pl.col("t").str.replace(r"^//+\s*", ""))
    starts = _start_lines(df)
    ids = {t: i + 1 for i, t in enumerate(starts)}
    maps: dict[int, AppsMap | None] = {ids[t]: m for t, m in starts.items()}
    df = df.with_columns(pl.col("t").replace_strict(ids, default=None, return_dtype=pl.Int32).alias("start")
                         ).with_columns(pl.col("start").forward_fill().fill_null(0).alias("map"))
    header_rows = df.filter(pl.col("start").is_not_null())
    body = df.filter(pl.col("start").is_null())
    lead = body.filter(pl.col("map") == 0)
    if lead.height:
        maps[0], notes = infer_map(lead.filter(pl.col("t").str.contains(", ", literal=True)).head(400)["t"].to_list())
        p.notes.extend(notes)

    parts, rest_parts = [], []
    for (mid,), part in partitions(body, "map").items():
        m = maps.get(mid)
        if m is None or not m.roles:
            reason = "query-gpu section" if mid else "unrecognized line"
            rest_parts.append(part.select("line", "text").with_columns(pl.lit(reason).alias("reason")))
            continue
        good, bad = _read_rows(part, m, zone)
        parts.append(good)
        rest_parts.append(bad)
    rows = pl.concat(parts, how="vertical").sort("line") if parts else _empty_rows()
    rest = pl.concat(rest_parts, how="vertical") if rest_parts else pl.DataFrame(
        schema={"line": pl.Int64, "text": pl.String, "reason": pl.String})

    # header lines: the apps headers (and their command lines) start sample blocks; the first is the file's own
    apps_starts = header_rows.filter(pl.col("start").is_in([i for i, m in maps.items() if m is not None and i]))
    is_header = pl.col("t").str.contains(C.HEADER_LINE_RE)
    first_header = apps_starts.filter(is_header)["line"].min()
    again = apps_starts.filter(pl.col("line") != (first_header or -1))
    p.skipped.add_lines("repeated header", again.filter(is_header)["line"])
    p.skipped.add_lines("shell prompt", again.filter(~is_header)["line"])
    # a sample block starts at a header, or at a command whose output has none
    apps_headers = rows_where(apps_starts, is_header | pl.col("t").str.contains("noheader", literal=True))
    other_starts = header_rows.filter(~pl.col("line").is_in(apps_starts["line"].implode()))
    rest = pl.concat([rest, other_starts.select("line", "text").with_columns(pl.lit("query-gpu section").alias("reason"))])

    rest, errors = C.classify_rest(rest)
    p.skipped.add_lines("driver error", errors["line"])

    if rows.height and rows["gpu"].null_count() == rows.height and rows["gpu_name"].n_unique() > 1:
        rows = rows.with_columns(pl.col("gpu_name").alias("gpu"))
        p.notes.append("no gpu_uuid or gpu_bus_id column: GPUs are told apart by their names")

    timed = rows.height > 0 and rows["time"].null_count() < rows.height
    p.clock = "wall-assumed" if timed else "none"
    blocks = _blocks(rows, apps_headers.select("line"))
    rows = rows.join(blocks.select("line", "block"), on="line", how="left", maintain_order="left")
    if not timed and apps_headers.height <= 1:
        # no clock and no per-run headers: number samples by repetition of a (gpu, pid)
        key = pl.concat_str([pl.col("gpu").fill_null(""), pl.col("pid").cast(pl.String).fill_null("")], separator="|")
        rows = rows.with_columns(pl.int_range(1, pl.len() + 1).over(key).cum_max().alias("seq"))
    else:
        rows = rows.with_columns(pl.col("block").alias("seq"))
    # a process the driver could not name at one poll (`[No data]` as it exits) is still the process of
    # that pid: its name from its other rows, so that its readings stay one series
    name = pl.coalesce("name", pl.col("name").forward_fill().over("gpu", "pid"),
                       pl.col("name").backward_fill().over("gpu", "pid"))
    p.samples = samples_frame(rows.select(
        "time", "seq", "line", "gpu", "pid", pl.lit("process.used").alias("series"), pl.col("used").alias("bytes"),
        name.alias("label")))
    p.events = events_frame(pl.concat([
        _gone_events(rows, blocks),
        C.driver_error_events(*C.time_after_previous_row(errors, rows)),
    ], how="vertical"))
    _meta(p, rows, blocks)
    if rows.height and rows["used"].null_count() == rows.height:
        p.notes.append("no used memory on any row ([N/A] under Windows WDDM, or not queried): processes only")
    return C.finish(p, rest, path, opts, NAME, nested)


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={"line": pl.Int64, "time": pl.Datetime("us", "UTC"), "gpu": pl.String,
                                "gpu_name": pl.String, "pid": pl.Int64, "name": pl.String, "used": pl.Int64})


def _is_uuid(v: str) -> str | None:
    v = v.strip()
    return v if re.fullmatch(C.UUID_RE, v) else None


def _is_name(v: str) -> str | None:
    v = v.strip()
    return None if not v or re.fullmatch(C.PLACEHOLDER_RE, v) else v


def _is_pid(v: str) -> int | None:
    v = v.strip()
    return int(v) if re.fullmatch(r"[0-9]{1,10}", v) else None


def _nulls(n: int, dtype) -> pl.Series:
    return pl.repeat(None, n, dtype=dtype, eager=True)


def _cells(part: pl.DataFrame, m: AppsMap) -> pl.DataFrame:
    """line, text and the cells c<i> of the rows that fit the map. A plain split for most rows; the
    rows with extra ", " (inside a process name) go through the regex that lets the name take them."""
    n = m.ncols
    split = part.select("line", "text", pl.col("t").str.split_exact(", ", n).alias("g")).unnest("g")
    exact = split[f"field_{n - 1}"].is_not_null() & split[f"field_{n}"].is_null()
    good = split.filter(exact).select("line", "text", *[pl.col(f"field_{i}").alias(f"c{i}") for i in range(n)])
    more = part.filter(pl.col("line").is_in(split.filter(~exact & split[f"field_{n}"].is_not_null())["line"].implode()))
    if more.height and "process_name" in m.roles:
        extra = more.select("line", "text", pl.col("t").str.extract_groups(m.pattern()).alias("g")).unnest("g")
        extra = extra.with_columns(*[pl.lit(None, dtype=pl.String).alias(f"c{i}") for i in range(n)
                                     if f"c{i}" not in extra.columns])
        good = pl.concat([good, extra.select(good.columns)]).sort("line")
    return good


def _read_rows(part: pl.DataFrame, m: AppsMap, zone: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Column-wise, like the --query-gpu parser: ids and names checked once per distinct value."""
    df = _cells(part, m)
    r = m.roles
    n = df.height

    def cell(role: str) -> pl.Series:
        return df[f"c{r[role]}"]

    cols = {"line": df["line"]}
    if "timestamp" in r:
        naive = cell("timestamp").str.strip_chars().str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S%.f", strict=False)
        cols["time"] = C.localize_series(naive, zone)
    else:
        cols["time"] = _nulls(n, pl.Datetime("us", "UTC"))
    keys = []
    if "gpu_uuid" in r:
        keys.append(C.map_unique(cell("gpu_uuid"), _is_uuid))
    if "gpu_bus_id" in r:
        keys.append(C.map_unique(cell("gpu_bus_id"), C.norm_bus))
    cols["gpu"] = (keys[0] if len(keys) == 1 else pl.select(pl.coalesce(keys)).to_series()) if keys \
        else _nulls(n, pl.String)
    cols["gpu_name"] = C.map_unique(cell("gpu_name"), _is_name) if "gpu_name" in r else _nulls(n, pl.String)
    cols["pid"] = C.map_unique(cell("pid"), _is_pid, pl.Int64) if "pid" in r else _nulls(n, pl.Int64)
    cols["name"] = C.map_unique(cell("process_name"), _is_name) if "process_name" in r else _nulls(n, pl.String)
    if "used_memory" in r:
        cols["used"] = C.mem_bytes(cell("used_memory"), m.units.get("used_memory") or "MiB")
        cols["used_ph"] = C.placeholder_mask(cell("used_memory"), cols["used"])
    else:
        cols["used"] = _nulls(n, pl.Int64)
        cols["used_ph"] = pl.repeat(True, n, dtype=pl.Boolean, eager=True)
    res = pl.DataFrame({k: v.alias(k) for k, v in cols.items()})
    # a row is a process when its pid (if queried) and memory cell (if queried) are real
    ok = pl.col("used").is_not_null() | pl.col("used_ph")
    if "pid" in r:
        ok = ok & pl.col("pid").is_not_null()
    if "timestamp" in r:
        ok = ok & pl.col("time").is_not_null()
    good = rows_where(res, ok).select("line", "time", "gpu", "gpu_name", "pid", "name", "used")
    bad = part.filter(~pl.col("line").is_in(good["line"].implode())).select("line", "text").with_columns(
        pl.lit("row does not fit the columns").alias("reason"))
    return good, bad


def _blocks(rows: pl.DataFrame, headers: pl.DataFrame) -> pl.DataFrame:
    """One row per line that belongs to a sample block (header lines and data rows): line, block,
    is_header, time (of the rows; null on headers)."""
    ev = pl.concat([
        headers.select("line", pl.lit(True).alias("is_header"), pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("time")),
        rows.select("line", pl.lit(False).alias("is_header"), "time"),
    ]).sort("line")
    gap = pl.col("time").diff().dt.total_milliseconds()
    prev_is_row = ~pl.col("is_header").shift(1).fill_null(True)
    new = pl.col("is_header") | (prev_is_row & (gap > BLOCK_GAP_MS).fill_null(False))
    new = new | (pl.int_range(pl.len()) == 0)
    return ev.with_columns(new.cast(pl.Int64).cum_sum().alias("block"))


def _gone_events(rows: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    if rows.height == 0 or rows["pid"].null_count() == rows.height:
        return events_frame(None)
    per_block = blocks.group_by("block").agg(pl.col("line").min().alias("first_line"),
                                             pl.col("time").drop_nulls().min().alias("btime")).sort("block")
    # a header-only block has no time of its own: the next block's time bounds it
    per_block = per_block.with_columns(pl.col("btime").backward_fill().alias("gone_by"))
    # (in order of appearance: events on one line keep it, whatever the batches)
    last = rows.filter(pl.col("pid").is_not_null()).group_by("gpu", "pid", maintain_order=True).agg(
        pl.col("block").max().alias("last_block"), pl.col("line").max().alias("last_line"),
        pl.col("time").max().alias("last_time"), pl.col("name").drop_nulls().last())
    last = last.with_columns((pl.col("last_block") + 1).alias("block")).join(per_block, on="block", how="inner",
                                                                              maintain_order="left")
    if last.height == 0:
        return events_frame(None)

    def detail(s: dict) -> str:
        d = {"last_seen_line": s["last_line"], "gone_by_line": s["first_line"]}
        if s["last_time"] is not None:
            d["last_seen"] = s["last_time"].isoformat().replace("+00:00", "Z")
        if s["gone_by"] is None and s["last_time"] is not None:
            d["time_is"] = "last_seen"
        return json.dumps(d)

    return events_frame(last.select(
        pl.coalesce("gone_by", "last_time").alias("time"),
        pl.col("first_line").alias("line"),
        pl.lit("process_gone").alias("kind"),
        "pid", pl.col("name").alias("process"), "gpu",
        pl.struct("last_line", "first_line", "last_time", "gone_by").map_elements(detail, return_dtype=pl.String).alias("detail"),
        pl.lit("(absent from this nvidia-smi compute-apps sample)").alias("text"),
    ).sort("line", maintain_order=True))


def _iso(t) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def _meta(p: Parsed, rows: pl.DataFrame, blocks: pl.DataFrame) -> None:
    if blocks.height == 0:
        return
    per_block = blocks.group_by("block").agg(pl.col("line").min().alias("first_line"),
                                             pl.col("line").max().alias("last_line"),
                                             (~pl.col("is_header")).sum().alias("rows"),
                                             pl.col("time").drop_nulls().min().alias("btime")).sort("block")
    times = per_block["btime"].drop_nulls()
    p.meta["blocks"] = {"count": per_block.height, "first": _iso(times.min() if times.len() else None),
                        "last": _iso(times.max() if times.len() else None)}
    empty = per_block.with_columns(
        (pl.col("rows") == 0).alias("empty"),
        pl.col("btime").forward_fill().shift(1).alias("after"), pl.col("btime").backward_fill().shift(-1).alias("before"),
    ).with_columns((pl.col("empty") != pl.col("empty").shift(1)).fill_null(True).cum_sum().alias("run"))
    runs = empty.filter(pl.col("empty")).group_by("run", maintain_order=True).agg(
        pl.col("first_line").min(), pl.col("last_line").max(), pl.len().alias("count"),
        pl.col("after").first(), pl.col("before").last())
    if runs.height:
        p.meta["empty_blocks"] = [
            {"first_line": a, "last_line": b, "count": n, "after": _iso(t0), "before": _iso(t1)}
            for _, a, b, n, t0, t1 in runs.head(MAX_EMPTY_RANGES).iter_rows()
        ]
    if rows.height:
        procs = rows.group_by("gpu", "pid", maintain_order=True).agg(pl.col("name").drop_nulls().first(),
                                                                   pl.col("used").max().alias("max_bytes"))
        p.meta["processes"] = [{"gpu": g, "pid": pid, "name": n, "max_bytes": b}
                               for g, pid, n, b in procs.head(MAX_PROCESSES).iter_rows()]
        if procs.height > MAX_PROCESSES:
            p.notes.append(f"{procs.height} processes; meta lists the first {MAX_PROCESSES}")


C.register_section(NAME, parse_lines)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="`nvidia-smi --query-compute-apps …`",
    yields="`process.used` per pid and GPU",
)
