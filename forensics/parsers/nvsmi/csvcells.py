"""The cells of nvidia-smi `--query-gpu` CSV rows -> readings (line, time, gpu, series, bytes), GPU
ids, and the rows that do not fit. read_cells reads any rows; read_plain reads rows as nvidia-smi
prints them (the stamp first, `N MiB` or bare numbers, ids that check) without a regex or a string
copy per row, and declines anything else, which read_cells then reads: the same result."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics import clock
from forensics.io.lines import ByteLines
from forensics.frames import rows_where
from forensics.parsers.nvsmi import common as C
from forensics.parsers.nvsmi.csvcolumns import MEMORY, ColumnMap

def _is_uuid(v: str) -> str | None:
    v = v.strip()
    return v if re.fullmatch(C.UUID_RE, v) else None


def _is_index(v: str) -> str | None:
    v = v.strip()
    return str(int(v)) if re.fullmatch(r"[0-9]{1,4}", v) else None


def _is_name(v: str) -> str | None:
    v = v.strip()
    return None if not v or re.fullmatch(C.PLACEHOLDER_RE, v) else v


CHUNK_ROWS = 2_000_000
BAD_SCHEMA = {"line": pl.Int64, "text": pl.String, "reason": pl.String}
ROW_SCHEMA = {"line": pl.Int64, "time": pl.Datetime("us", "UTC"), "gpu": pl.String, "series": pl.String,
               "bytes": pl.Int64, "ph": pl.Boolean, "total_bytes": pl.Int64}
ID_SCHEMA = {"gpu": pl.String, "index": pl.String, "uuid": pl.String, "bus": pl.String, "name": pl.String,
              "total_bytes": pl.Int64}


def nulls(n: int, dtype) -> pl.Series:
    return pl.repeat(None, n, dtype=dtype, eager=True)


def read_rows(rows: pl.DataFrame, m: ColumnMap, zone: str,
               plain: bool = False) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Rows of one column map -> (readings, GPU ids seen, rows that do not fit), in chunks so that
    the split cells of a month-long log never sit in memory all at once. `plain`: rows that all look
    as nvidia-smi prints them are read by read_plain (the same result)."""
    if not m.roles:
        return (pl.DataFrame(schema=ROW_SCHEMA), pl.DataFrame(schema=ID_SCHEMA),
                rows.select("line", "text").with_columns(pl.lit("row without memory columns").alias("reason")))
    if plain and PLAIN_MIN_ROWS <= rows.height <= CHUNK_ROWS:
        done = _read_plain_rows(rows, m, zone)
        if done is not None:
            return done
    outs, ids, bads = [], [], []
    for off in range(0, rows.height, CHUNK_ROWS):
        o, i, b = _read_chunk(rows.slice(off, CHUNK_ROWS), m, zone)
        outs.append(o)
        ids.append(i)
        bads.append(b)
    return pl.concat(outs), merge_ids(pl.concat(ids)), pl.concat(bads)


def merge_ids(ids: pl.DataFrame) -> pl.DataFrame:
    """One row per GPU (its ids and name as read), with the largest memory.total read for it."""
    return ids.group_by("gpu", "index", "uuid", "bus", "name", maintain_order=True).agg(pl.col("total_bytes").max())


def plain_cells(m: ColumnMap) -> list[int]:
    """The cells read_plain and read_cells read (not memory.free or memory.reserved: a log they read
    has memory.used), and the last one (a short row leaves it null)."""
    return sorted({i for role, i in m.roles.items() if role not in ("memory.free", "memory.reserved")} | {m.ncols - 1})


# Fewer rows than this: read_cells costs less than read_plain's checks.
PLAIN_MIN_ROWS = 1000


def _read_plain_rows(rows: pl.DataFrame, m: ColumnMap, zone: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame] | None:
    """read_rows' result by read_plain for rows in memory (cut at their commas; a third of read_cells'
    CPU on the usual log), or None when some row does not look as nvidia-smi prints it."""
    r = m.roles
    if r.get("timestamp") != 0 or "memory.used" not in r or not {"index", "uuid", "pci.bus_id"} & set(r):
        return None
    n = m.ncols
    prefix = id_prefix(rows["text"], m)
    cells = _cells_after_prefix(rows, n, prefix) if prefix is not None else _cells_at_commas(rows, n)
    if cells is None:
        return None
    cells = cells.select("line", *[f"field_{i}" for i in plain_cells(m) if not (prefix and 1 <= i <= prefix.k)])
    plain = read_plain(cells, m, zone, prefix)
    if plain is None:
        return None
    got, keys, ids = plain
    good = got.select("line", "time", pl.Series("gpu", keys, dtype=pl.String).gather(got["_key"]).alias("gpu"),
                      pl.lit("memory.used", dtype=pl.String).alias("series"), "bytes",
                      pl.lit(False).alias("ph"), "total_bytes")
    return good, merge_ids(ids), pl.DataFrame(schema=BAD_SCHEMA)


def _clean_commas(text: pl.Expr, commas: int) -> pl.Expr:
    """`commas` commas in the text, each followed by a space: then the cells cut at "," are read_cells'
    (cut at ", ") with the space in front, as read_plain takes them."""
    if commas == 0:
        return ~text.str.contains(",", literal=True)
    return (text.str.count_matches(",", literal=True) == commas) & (text.str.count_matches(", ", literal=True) == commas)


def _cells_at_commas(rows: pl.DataFrame, n: int) -> pl.DataFrame | None:
    """line, field_0 .. field_<n-1>: the rows cut at ",", or None unless each has n clean cells."""
    t = pl.col("text")
    if not rows.select(_clean_commas(t, n - 1).all()).item():
        return None
    return rows.select("line", t.str.split_exact(",", n - 1).alias("g")).unnest("g")


def _cells_after_prefix(rows: pl.DataFrame, n: int, prefix: IdPrefix) -> pl.DataFrame | None:
    """_cells_at_commas for rows that id_prefix took (its cells 1..k need no cutting: each row holds its
    phase's, after the stamp's 23 characters): the stamp and the cells after the prefix (field_0,
    field_<k+1> ...), or None unless all are clean."""
    phases = [[prefix.cells[i][ph] for i in range(1, prefix.k + 1)] for ph in range(prefix.period)]
    if any(not c.startswith(" ") for cells in phases for c in cells):
        return None
    # the rest of a row starts after "," + its phase's cells + ","
    starts = np.array([23 + 1 + sum(len(c) + 1 for c in cells) for cells in phases], dtype=np.int64)
    h = rows.height
    start = pl.Series(np.tile(starts, -(-h // prefix.period))[:h])
    t = pl.col("text")
    rest_commas = n - prefix.k - 2
    cut = rows.select("line", t.str.slice(0, 23).alias("field_0"), t.str.slice(start).alias("_rest"))
    if not cut.select(_clean_commas(pl.col("_rest"), rest_commas).all()).item():
        return None
    if rest_commas == 0:
        return cut.rename({"_rest": f"field_{n - 1}"})
    rest = cut.select(pl.col("_rest").str.split_exact(",", rest_commas)).unnest("_rest")
    return pl.concat([cut.drop("_rest"), rest.rename({f"field_{j}": f"field_{prefix.k + 1 + j}"
                                                      for j in range(rest_commas + 1)})], how="horizontal")


def _read_chunk(rows: pl.DataFrame, m: ColumnMap, zone: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Column-wise: one split into cells; ids are checked once per distinct value; memory cells take
    a fast path for the plain `N MiB`; times are localized once per distinct minute."""
    cells = rows.select("line", "text", pl.col("text").str.split_exact(", ", m.ncols).alias("g")).unnest("g")
    return read_cells(cells, m, zone)


def read_cells(cells: pl.DataFrame, m: ColumnMap, zone: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """_read_chunk from the rows already cut into cells (`line`, `text`, `field_0` ... `field_<ncols>`;
    only the role columns, the last one and `field_<ncols>` are looked at). read_clean cuts them from a
    batch's bytes with polars' CSV reader."""
    r = m.roles
    n_sep = m.ncols - 1
    # exactly ncols cells: the last one present, none beyond it
    fits = cells[f"field_{n_sep}"].is_not_null() & cells[f"field_{m.ncols}"].is_null()
    bad = [rows_where(cells, ~fits).select("line", "text").with_columns(pl.lit("row does not fit the columns").alias("reason"))]
    df = cells.filter(fits) if not fits.all() else cells
    del cells
    first = df["field_0"]
    if first.str.contains(r"^\s*//", literal=False).any():
        # a row quoted in source code keeps its comment marker ("//0, GPU-...")
        df = df.with_columns(first.str.replace(r"^\s*//+\s*", "").alias("field_0"))
    n = df.height

    def cell(role: str) -> pl.Series:
        return df[f"field_{r[role]}"]

    cols = {"line": df["line"]}
    if "timestamp" in r:
        naive = cell("timestamp").str.strip_chars().str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S%.f",
                                                                 strict=False)
        cols["time"] = C.localize_series(naive, zone)
    else:
        cols["time"] = nulls(n, pl.Datetime("us", "UTC"))
    id_roles = [x for x in ("index", "uuid", "pci.bus_id") if x in r]
    for role, key in (("index", "index"), ("uuid", "uuid"), ("pci.bus_id", "bus"), ("name", "name")):
        cols[key + "_raw"] = cell(role) if role in r else nulls(n, pl.String)
    value_role = "memory.used" if "memory.used" in r else ("memory.free" if "memory.free" in r else None)
    if value_role:
        cols["bytes"] = C.mem_bytes(cell(value_role), m.units.get(value_role) or "MiB")
        cols["ph"] = C.placeholder_mask(cell(value_role), cols["bytes"])
    else:
        cols["bytes"] = nulls(n, pl.Int64)
        cols["ph"] = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if "memory.total" in r:
        cols["total_bytes"] = C.mem_bytes(cell("memory.total"), m.units.get("memory.total") or "MiB")
    else:
        cols["total_bytes"] = nulls(n, pl.Int64)
    res = pl.DataFrame({k: v.alias(k) for k, v in cols.items()})
    # the GPU key: the first id column, checked and normalised once per distinct value; without an
    # index/uuid/bus column the name is the only key (resolved for the whole file later)
    check = {"index": _is_index, "uuid": _is_uuid, "pci.bus_id": C.norm_bus}
    if id_roles:
        keys = [C.map_unique(res[("bus" if x == "pci.bus_id" else x) + "_raw"], check[x]) for x in id_roles]
        gpu = keys[0] if len(keys) == 1 else pl.select(pl.coalesce(keys)).to_series()
    else:
        gpu = C.map_unique(res["name_raw"], _is_name)
    res = res.with_columns(gpu.alias("gpu"), pl.lit(value_role, dtype=pl.String).alias("series"))
    # a row counts when its memory cell holds a number or a placeholder; anything else is garbage
    ok = (pl.col("bytes").is_not_null() | pl.col("ph")) if value_role else pl.lit(True)
    if "timestamp" in r:
        ok = ok & pl.col("time").is_not_null()
    bad_rows = rows_where(res, ~ok)
    if bad_rows.height:
        reason = pl.when(pl.col("time").is_null() & pl.lit("timestamp" in r)).then(pl.lit("unreadable timestamp")) \
            .otherwise(pl.lit("row does not fit the columns"))
        bad.append(bad_rows.select("line", reason.alias("reason")).join(df.select("line", "text"), on="line"))
        res = res.filter(ok)
    ids = res.group_by("gpu", "index_raw", "uuid_raw", "bus_raw", "name_raw", maintain_order=True).agg(
        pl.col("total_bytes").max())
    ids = ids.select(
        "gpu",
        C.map_unique(ids["index_raw"], _is_index).alias("index"), C.map_unique(ids["uuid_raw"], _is_uuid).alias("uuid"),
        C.map_unique(ids["bus_raw"], C.norm_bus).alias("bus"), C.map_unique(ids["name_raw"], _is_name).alias("name"),
        "total_bytes")
    return (res.select(list(ROW_SCHEMA)), ids.select(list(ID_SCHEMA)),
            pl.concat([b.select(list(BAD_SCHEMA)).cast(BAD_SCHEMA) for b in bad]))


TS_FORMAT = "%Y/%m/%d %H:%M:%S%.f"


_STAMP_SHAPE = r"^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}$"


def parse_stamps(values: pl.Series) -> pl.Series:
    """`strip_chars().str.strptime(Datetime("us"), TS_FORMAT, strict=False)` of nvidia-smi stamps,
    3x faster: when all are `YYYY/MM/DD HH:MM:SS.fff` with seconds below 60, the minutes (a few
    distinct ones) are parsed and the seconds and milliseconds added as numbers."""
    minute = values.str.head(16)
    parts = pl.DataFrame({"m": minute, "s": values.str.slice(17, 2), "f": values.str.slice(20, 3)}).select(
        "m", pl.col("s", "f").cast(pl.Int64, strict=False))
    if values.str.contains(_STAMP_SHAPE).all() and parts["s"].max() < 60:
        uniq = minute.unique()
        at = dict(zip(uniq.to_list(), (uniq + ":00").str.strptime(pl.Datetime("us"), "%Y/%m/%d %H:%M:%S",
                                                                   strict=False).to_list()))
        return parts.select((pl.col("m").replace_strict(at, return_dtype=pl.Datetime("us"))
                             + pl.duration(seconds=pl.col("s"), milliseconds=pl.col("f"))).alias(values.name)
                            ).to_series()
    return values.str.strip_chars().str.strptime(pl.Datetime("us"), TS_FORMAT, strict=False)


# The roles whose cells name a GPU, and the key read_plain gives each.
_ID_KEYS = {"index": "index", "uuid": "uuid", "pci.bus_id": "bus", "name": "name"}


@dataclass
class IdPrefix:
    """The cells 1..k of every row (after the timestamp): the GPU's ids, and its memory.total when that
    comes next, the same on each row of a phase of `period` rows (`cells`: position -> the period's
    cells, as cut at "," with their space)."""
    k: int
    period: int
    cells: dict[int, list[str]]


def id_prefix(text: pl.Series, m: ColumnMap) -> IdPrefix | None:
    """For read_plain, from the lines themselves: the usual log lists the same GPUs in the same order in
    every sample, each row its 23-character timestamp and then the GPU's ids. When every line holds,
    right after its timestamp, the ids (and memory.total) of its phase, the CSV reader need not cut
    those cells (a third of its work on a usual query) nor read_plain compare them row by row; one
    comparison of each line with its phase's text does both. None when the ids are
    not all right after the timestamp, or the lines do not repeat so."""
    r = m.roles
    if r.get("timestamp") != 0 or "memory.used" not in r:
        return None
    role_at = {i: role for role, i in r.items()}
    k = 0
    while role_at.get(k + 1) in (*_ID_KEYS, "memory.total"):
        k += 1
    if not k or any(r[role] > k for role in _ID_KEYS if role in r):
        return None
    segments = []
    for line in text.head(256).to_list():
        parts = line.split(",", k + 1)
        if len(parts) < k + 2 or len(parts[0]) != 23:
            return None
        segments.append("," + ",".join(parts[1:k + 1]) + ",")
    h = text.len()
    period = next((i for i in range(1, len(segments)) if segments[i] == segments[0]), None)
    if period is None or h <= period:
        return None
    # a line whose character 23 is the comma that ends its phase's segment has a 23-character first cell
    # and then exactly those cells
    phase = pl.Series(segments[:period]).gather(np.tile(np.arange(period), -(-h // period))[:h])
    if not text.str.slice(23).str.starts_with(phase).all():
        return None
    return IdPrefix(k, period, {i: [seg.split(",")[i] for seg in segments[:period]] for i in range(1, k + 1)})


def read_plain(cells: pl.DataFrame, m: ColumnMap, zone: str,
               prefix: IdPrefix | None = None) -> tuple[pl.DataFrame, list[str], pl.DataFrame] | None:
    """read_cells for rows that all look as nvidia-smi prints them (the timestamp first, every memory
    cell `N MiB`, GPU ids that check), without a regex or a string copy per row: (rows: `line`,
    `time`, `bytes`, `total_bytes` and `_key`, the position of the row's GPU in `keys`; keys; ids as
    read_cells gives them). Its readings are read_cells' (all memory.used); None as soon as one cell
    does not look so (read_cells then decides). Unlike read_cells it takes the cells as cut at ","
    from rows whose every cell after the first starts with the space of ", " (memory cells too).
    With `prefix` (id_prefix of the same rows), `cells` lacks the cells it spans."""
    r = m.roles
    # a timestamp in field_0 that parses cannot start with the `//` read_cells strips there
    if r.get("timestamp") != 0 or "memory.used" not in r or not cells.height:
        return None
    raw = {key: f"field_{r[role]}" for role, key in _ID_KEYS.items() if role in r}
    first = next((k for k in ("index", "uuid", "bus") if k in raw), None)
    if first is None:
        return None

    def bare_ok(role: str) -> bool:
        # a bare number takes the column's unit (MiB unless the header says otherwise): only MiB here
        return (m.units.get(role) or "MiB") == "MiB"

    def mib(cells: pl.Expr, bare: bool) -> pl.Expr:
        # mem_bytes' fast branch: "N MiB", N an integer in range (else it takes its regex); " N MiB" ->
        # N is what strip_prefix(" ") and its strip_suffix(" MiB") leave, in one slice. Under nounits
        # " N" -> N, which mem_bytes reads in the column's unit
        n = pl.when(cells.str.ends_with(" MiB")).then(cells.str.slice(1, cells.str.len_bytes() - 5).cast(pl.Int64, strict=False))
        return n.otherwise(cells.str.slice(1).cast(pl.Int64, strict=False)) if bare else n

    def has_sign(cells: pl.Expr) -> pl.Expr:
        # the cast takes a sign (and refuses a blank), so a number that it read had its sign, if any,
        # right after the cell's leading space
        return cells.str.starts_with(" +") | cells.str.starts_with(" -")

    def total_bytes(cells: pl.Expr) -> pl.Expr:   # a memory.total cell in bytes, null unless it fits
        n = mib(cells, bare_ok("memory.total"))
        return pl.when(~has_sign(cells) & (n >= 0) & (n < C.MAX_MIB)).then(n * (1 << 20))

    cell = pl.col(f"field_{r['memory.used']}")
    # one query (its checks as aggregates, broadcast): 25% less than a frame of three columns and a second query
    used = cells.lazy().select(mib(cell, bare_ok("memory.used")).alias("n"),
                               has_sign(cell).any().alias("signed")).collect()
    n = used["n"]
    if n.null_count() or used["signed"][0] or n.min() < 0 or n.max() >= C.MAX_MIB:
        return None
    used = (n * (1 << 20)).alias("bytes").to_frame()
    total = nulls(cells.height, pl.Int64)
    h = cells.height
    if prefix is not None and "memory.total" in r and r["memory.total"] <= prefix.k:
        # one cell per phase
        per = pl.DataFrame({"cell": prefix.cells[r["memory.total"]]}, schema={"cell": pl.String}).select(
            total_bytes(pl.col("cell")).alias("total"))
        if per["total"].null_count():
            return None
        total = pl.Series(np.tile(per["total"].to_numpy(), -(-h // prefix.period))[:h], dtype=pl.Int64)
    elif "memory.total" in r:
        # the same for every row of a GPU: each distinct cell read once
        uniq = cells.select(pl.col(f"field_{r['memory.total']}").unique().alias("cell"))
        uniq = uniq.with_columns(total_bytes(pl.col("cell")).alias("total"))
        if uniq["total"].null_count():
            return None
        total = pl.repeat(uniq["total"][0], cells.height, dtype=pl.Int64, eager=True) if uniq.height == 1 else \
            cells[f"field_{r['memory.total']}"].replace_strict(uniq["cell"], uniq["total"], return_dtype=pl.Int64)
    # a timestamp repeats on each GPU's row of a sample: parsed once per run of equal stamps
    runs = cells.select(pl.col("field_0").rle()).unnest("field_0")
    naive = parse_stamps(runs["value"])
    utc = zone in getattr(clock, "UTC_NAMES", ())
    if utc:
        naive = C.localize_series(naive, zone)   # per value; a zone with DST wants the rows in file order
    if naive.null_count():
        return None
    times = pl.Series("time", np.repeat(naive.to_physical().to_numpy(), runs["len"].to_numpy()),
                      dtype=pl.Int64).cast(naive.dtype)
    if not utc:
        times = C.localize_series(times, zone)
        if times.null_count():
            return None
    rows = pl.DataFrame([cells["line"], times, used["bytes"], total.alias("total_bytes")])
    # the GPU ids, checked once per distinct combination (read_cells groups by the same cells). The
    # usual log lists the same GPUs in the same order in every sample: then the rows repeat with
    # that period and its first rows hold every combination.
    if prefix is not None:   # the period's ids, checked against every row by id_prefix
        period = prefix.period
        ids_cells = pl.DataFrame({key: prefix.cells[r[role]] for role, key in _ID_KEYS.items() if role in r},
                                 schema={k: pl.String for k in raw})
    else:
        ids_cells = cells.select(*[pl.col(c).alias(k) for k, c in raw.items()])
        head = ids_cells[first].head(256).to_list()
        period = next((i for i in range(1, len(head)) if head[i] == head[0]), None)
        if period is not None and h > period and not ids_cells.select(pl.all_horizontal(
                pl.all().slice(period).eq_missing(pl.all().head(h - period)).all())).item():
            period = None
    if period is not None:
        combos = ids_cells.head(min(period, h)).with_columns(pl.int_range(pl.len()).alias("_phase"))
        padded = np.full(-(-h // period) * period, np.iinfo(np.int64).min, dtype=np.int64)
        tb = rows["total_bytes"]
        if tb.null_count() < h:
            padded[:h] = tb.to_numpy()
            per_phase = padded.reshape(-1, period).max(axis=0)[: combos.height]
            combos = combos.with_columns(pl.Series("total_bytes", per_phase, dtype=pl.Int64))
        else:
            combos = combos.with_columns(nulls(combos.height, pl.Int64).alias("total_bytes"))
        combos = combos.group_by(*raw, maintain_order=True).agg(pl.col("total_bytes").max(), pl.col("_phase"))
    else:
        combos = pl.concat([ids_cells, rows.select("total_bytes")], how="horizontal").group_by(
            *raw, maintain_order=True).agg(pl.col("total_bytes").max())
    check = {"index": _is_index, "uuid": _is_uuid, "bus": C.norm_bus, "name": _is_name}
    ids = combos.select(*[C.map_unique(combos[k], check[k]).alias(k) if k in raw
                          else nulls(combos.height, pl.String).alias(k) for k in ("index", "uuid", "bus", "name")],
                        "total_bytes")
    if ids[first].null_count():
        return None   # a row's GPU would come from its second id (coalesce): read_cells does that
    ids = ids.with_columns(pl.col(first).alias("gpu")).select(list(ID_SCHEMA))
    keys = list(dict.fromkeys(ids["gpu"].to_list()))
    key_of = {g: i for i, g in enumerate(keys)}
    combo_key = [key_of[g] for g in ids["gpu"].to_list()]
    if period is not None:
        phase_key = np.zeros(period, dtype=np.int64)
        for k, phases in zip(combo_key, combos["_phase"].to_list()):
            phase_key[phases] = k
        key = np.tile(phase_key, -(-h // period))[:h]
    else:
        raw_key = dict(zip(combos[first].to_list(), combo_key))
        key = ids_cells[first].replace_strict(raw_key, return_dtype=pl.Int64).to_numpy()
    return rows.with_columns(pl.Series("_key", key, dtype=pl.Int64)), keys, ids




# -- a batch read from its own bytes ---------------------------------------------------------------

def read_clean(batch: pl.DataFrame, raw: tuple, m: ColumnMap, zone: str):
    """A batch of nothing but well-formed rows of map `m`, its cells cut by polars' CSV reader from the
    batch's own bytes (3x faster than splitting the lines; only the cells it reads are copied):
    ("plain", rows, keys, ids) when read_plain reads them, ("cells", rows, ids) when read_cells reads
    them without a row that does not fit, a placeholder or a row without a GPU; None for any other
    batch (the general path then reads it, with the same result). `raw`: (buf, end[, skip]), the
    batch's lines are buf[:end] less the first `skip` ones; a batch of io.lines.ByteLines (no `skip`) is
    cut into lines only for their text. Stateless: it may run in a thread."""
    if m is None or not batch.height or not {"timestamp", "memory.used"} <= set(m.roles) \
            or not {"index", "uuid", "pci.bus_id"} & set(m.roles):
        return None
    buf, end, *skip = raw
    n = m.ncols
    lazy = isinstance(batch, ByteLines)   # (their bytes hold no CR: io.lines.parse_bytes)
    if not lazy and buf.find(b"\r", 0, end) >= 0 and buf.count(b"\r", 0, end) != buf.count(b"\r\n", 0, end):
        return None   # a CR inside a line: the CSV reader would end the row there
    start = 0
    for _ in range(sum(skip)):
        start = buf.index(b"\n", start) + 1
    if not cells_cut_clean(buf, start, end, batch.height, n):
        return None
    memory = {m.roles[r] for r in MEMORY if r in m.roles}
    want = plain_cells(m)
    first = batch.first if lazy else int(batch["line"][0])
    text = batch.text() if lazy else batch["text"]

    def cut(columns: list[int]) -> pl.DataFrame | None:
        try:
            # the line numbers as the reader's row index: chunked as the cells are (a column added
            # afterwards is one chunk, and every select of the frame would copy the cells to align them)
            cells = pl.read_csv(buf, has_header=False, separator=",", quote_char=None, skip_lines=sum(skip),
                                schema={f"field_{i}": pl.String for i in range(n)}, columns=columns,
                                truncate_ragged_lines=False, row_index_name="line",
                                row_index_offset=first)
        except pl.exceptions.PolarsError:
            return None   # invalid UTF-8 (its replacement is the general path's business)
        if end < len(buf):
            cells = cells.slice(0, cells.height - 1)
        # no row is short (its last cell would be null); with the count of commas, each row has n cells
        if cells.height != batch.height or cells[f"field_{n - 1}"].null_count():
            return None
        return cells.with_columns(pl.col("line").cast(pl.Int64))

    # the usual log: the GPU's ids right after the timestamp, repeating with the number of GPUs,
    # checked in the lines and not cut
    prefix = id_prefix(text, m)
    cells = cut([i for i in want if not (prefix and 1 <= i <= prefix.k)])
    if cells is None:
        return None
    plain = read_plain(cells, m, zone, prefix)
    if plain is not None:
        return ("plain", *plain)
    if prefix is not None:
        cells = cut(want)   # read_cells reads every wanted cell
        if cells is None:
            return None
    # the id and name checks strip the space themselves, the memory cells must lose it (their fast
    # path reads "N MiB"); memory.free is read only without memory.used
    cells = cells.select(
        "line", text,
        *[(pl.col(f"field_{i}").str.strip_prefix(" ") if i in memory else pl.col(f"field_{i}")) for i in want],
        pl.lit(None, dtype=pl.String).alias(f"field_{n}"))
    rows, ids, bad = read_cells(cells, m, zone)
    if bad.height or rows["ph"].any() or rows["gpu"].null_count():
        return None
    return "cells", rows, ids


def cells_cut_clean(buf: bytes, start: int, end: int, rows: int, n: int) -> bool:
    """Whether buf[start:end] (`rows` lines, none of them short: the caller checks that) holds exactly
    n - 1 commas per line, each followed by a space: then cutting its lines at "," gives read_cells'
    cells (cut at ", ") with a space in front. Counted in the bytes, in pieces that stay in the CPU's
    cache: a CSV reader told to leave cells out no longer refuses a row with an extra cell (nor can it
    be given a column after the last). It still refuses invalid UTF-8 anywhere in its input."""
    a = np.frombuffer(buf, np.uint8, count=end - start, offset=start)
    # ", " as a little-endian 16-bit word, at even and at odd offsets: every pair of bytes once
    word = ord(",") | ord(" ") << 8
    even = np.frombuffer(buf, "<u2", count=(end - start) // 2, offset=start)
    odd = np.frombuffer(buf, "<u2", count=(end - start - 1) // 2, offset=start + 1)
    step = 1 << 18
    commas = pairs = 0
    for i in range(0, a.size, step):
        commas += int(np.count_nonzero(a[i:i + step] == ord(",")))
        w = i // 2
        pairs += int(np.count_nonzero(even[w:w + step // 2] == word)) + int(np.count_nonzero(odd[w:w + step // 2] == word))
    return commas == rows * (n - 1) and pairs == commas
