"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] [-l N]` logs (docs/formats.md §1.1).

Column-wise over the whole file: each line is either a header (or a `--query-gpu=` command line,
which names the columns of the rows under it), a data row of the current column map, or something
to skip and count. Rows are keyed on index / uuid / bus id, never on their position. A file without
a header gets its columns from the shapes of its cells.

`gpu` is the index, else the UUID, else the bus id (normalised to `00000000:3B:00.0`); a query with
none of them but different GPU names is keyed on the name. `seq` is the sample number: a row's
count of readings of its own GPU so far, carried forward as a running maximum, which is "a new
sample starts when a GPU repeats" for logs whose samples list each GPU once (in any order).
Speed: a month of 1 Hz 8-GPU CSV (20M rows, 2.3 GB) parses in about 20 s on 2 cores.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from forensics import clock
from forensics.options import Options
from forensics.model import Parsed, samples_frame
from forensics.io.sources import Source
from forensics.parsers.nvsmi import common as C
from forensics.frames import rows_where

NAME = "nvidia-smi-csv"

ALIASES = {
    "gpu_name": "name", "gpu_bus_id": "pci.bus_id", "gpu_uuid": "uuid", "gpu_serial": "serial",
    "clocks.gr": "clocks.current.graphics", "clocks.mem": "clocks.current.memory",
    "clocks.sm": "clocks.current.sm", "clocks.video": "clocks.current.video",
}
ROLES = ("timestamp", "index", "uuid", "pci.bus_id", "name", "memory.used", "memory.total", "memory.free",
         "memory.reserved")
MEMORY = ("memory.used", "memory.total", "memory.free", "memory.reserved")

# Headerless layouts documented in docs/formats.md §1.1 (cell shapes -> column names). "ph" cells
# ([N/A], ...) fit any shape.
KNOWN_LAYOUTS: list[tuple[str, list[set[str]], list[str]]] = [
    ("the NVIDIA-documented query used by OmniOpt's gpu_usage_*.csv",
     [{"ts"}, {"gpuname", "text"}, {"bus"}, {"version", "float"}, {"pstate"}, {"int"}, {"int"}, {"int"},
      {"pct"}, {"pct"}, {"mib"}, {"mib"}, {"mib"}],
     ["timestamp", "name", "pci.bus_id", "driver_version", "pstate", "pcie.link.gen.max",
      "pcie.link.gen.current", "temperature.gpu", "utilization.gpu", "utilization.memory", "memory.total",
      "memory.free", "memory.used"]),
    ("index, name, driver_version, memory.total, memory.used, memory.free",
     [{"int"}, {"gpuname", "text"}, {"version", "float"}, {"mib"}, {"mib"}, {"mib"}],
     ["index", "name", "driver_version", "memory.total", "memory.used", "memory.free"]),
    ("name, memory.total, memory.used, memory.free, driver_version, temperature.gpu, power.draw, power.limit",
     [{"gpuname", "text"}, {"mib"}, {"mib"}, {"mib"}, {"version", "float"}, {"int"}, {"watt"}, {"watt"}],
     ["name", "memory.total", "memory.used", "memory.free", "driver_version", "temperature.gpu", "power.draw",
      "power.limit"]),
    ("index, uuid, name, temperature.gpu, utilization.gpu, memory.used, memory.total, power.draw, clocks",
     [{"int"}, {"uuid"}, {"gpuname", "text"}, {"int"}, {"pct"}, {"mib"}, {"mib"}, {"watt"}, {"mhz"}, {"mhz"}],
     ["index", "uuid", "name", "temperature.gpu", "utilization.gpu", "memory.used", "memory.total", "power.draw",
      "clocks.current.sm", "clocks.current.memory"]),
    ("name, fan.speed, memory.total, memory.used, utilization.gpu, temperature.gpu, power.draw, clocks",
     [{"gpuname", "text"}, {"pct"}, {"mib"}, {"mib"}, {"pct"}, {"int"}, {"watt"}, {"mhz"}, {"mhz"}],
     ["name", "fan.speed", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu", "power.draw",
      "clocks.current.graphics", "clocks.current.memory"]),
]


@dataclass
class ColumnMap:
    ncols: int
    roles: dict[str, int] = field(default_factory=dict)       # role -> position
    units: dict[str, str | None] = field(default_factory=dict)  # role -> unit from the header brackets
    origin: str = ""

    def pattern(self) -> str:
        wanted = set(self.roles.values())
        cells = [f"(?<c{i}>[^,]*)" if i in wanted else "[^,]*" for i in range(self.ncols)]
        return "^" + ", ".join(cells) + "$"


def sniff(head: list[str]) -> str | None:
    return C.sniff_for(NAME, head)


def map_from_names(names: list[tuple[str, str | None]], origin: str) -> ColumnMap:
    m = ColumnMap(ncols=len(names), origin=origin)
    for i, (name, unit) in enumerate(names):
        name = ALIASES.get(name, name)
        if name in ROLES and name not in m.roles:
            m.roles[name] = i
            m.units[name] = unit
    return m


# -- headerless: columns from the cell shapes --------------------------------------------------------

def _mib(cell: str) -> float | None:
    m = re.fullmatch(C.MEM_VALUE_RE, cell.strip())
    if not m or not m.group(2):
        return None
    from forensics.units import to_bytes

    return to_bytes(m.group(1), m.group(2))


def infer_map(texts: list[str]) -> tuple[ColumnMap | None, list[str]]:
    """A column map for headerless rows, from the shapes of their cells; and notes saying what was
    assumed. None when the rows are not --query-gpu rows."""
    rows = [C.strip_row(t).split(", ") for t in texts if ", " in t]
    rows = [r for r in rows if C.is_gpu_row([C.cell_kind(c) for c in r])][:200]
    if not rows:
        return None, []
    ncols = Counter(len(r) for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if len(r) == ncols]
    kinds = []
    for i in range(ncols):
        col = [C.cell_kind(r[i]) for r in rows]
        real = [k for k in col if k != "ph"]
        kinds.append(Counter(real).most_common(1)[0][0] if real else "ph")
    origin = "no header: columns inferred from the cell shapes"
    for desc, shape, names in KNOWN_LAYOUTS:
        if len(shape) == ncols and all(k == "ph" or k in s for k, s in zip(kinds, shape)):
            m = map_from_names([(n, None) for n in names], f"no header: the layout of {desc}")
            return m, [f"no header: the columns were read as {desc} (docs/formats.md §1.1), from the cell shapes"]
    m = ColumnMap(ncols=ncols, origin=origin)
    described = []

    def take(role: str, kind: str, positions=None) -> None:
        for i, k in enumerate(kinds):
            if k == kind and (positions is None or i in positions) and role not in m.roles:
                m.roles[role] = i
                described.append(f"{i + 1}={role}")

    take("timestamp", "ts")
    take("index", "int", {1 if kinds[0] == "ts" else 0})
    take("uuid", "uuid")
    take("pci.bus_id", "bus")
    take("name", "gpuname")
    notes = []
    mib_cols = [i for i, k in enumerate(kinds) if k == "mib"]
    key_col = next((m.roles[r] for r in ("index", "uuid", "pci.bus_id") if r in m.roles), None)
    values = {i: [_mib(r[i]) for r in rows] for i in mib_cols}
    keys = [r[key_col] if key_col is not None else "" for r in rows]

    def constant_per_gpu(i: int) -> bool:
        seen: dict[str, float] = {}
        for k, v in zip(keys, values[i]):
            if v is None:
                continue
            if seen.setdefault(k, v) != v:
                return False
        return True

    def dominates(i: int) -> bool:
        return all(
            all(a is None or b is None or a >= b for a, b in zip(values[i], values[j])) for j in mib_cols if j != i
        )

    totals = [i for i in mib_cols if constant_per_gpu(i) and dominates(i)] if len(mib_cols) > 1 else []
    total = totals[0] if len(totals) == 1 else None
    if total is not None:
        m.roles["memory.total"] = total
        described.append(f"{total + 1}=memory.total")
    rest = [i for i in mib_cols if i != total]
    if len(mib_cols) == 1:
        m.roles["memory.used"] = mib_cols[0]
        described.append(f"{mib_cols[0] + 1}=memory.used")
        notes.append(f"no header: the only MiB column ({mib_cols[0] + 1}) was taken as memory.used (assumed)")
    elif total is not None and len(rest) == 1:
        m.roles["memory.used"] = rest[0]
        described.append(f"{rest[0] + 1}=memory.used")
        notes.append(f"no header: of the two MiB columns, column {total + 1} is constant and the larger, so it was "
                     f"taken as memory.total and column {rest[0] + 1} as memory.used (assumed; memory.free would "
                     "look the same)")
    elif not mib_cols and _unitless_memory(rows, kinds, keys, m, described, notes):
        pass
    elif not mib_cols:
        notes.append("no header and no units (`--format=csv,noheader,nounits`): cannot tell which column is "
                     "memory.used, so no memory samples were emitted; log with the header or with units")
    elif mib_cols:
        notes.append(f"no header: cannot tell which of the MiB columns {', '.join(str(i + 1) for i in rest)} is "
                     "memory.used, so no memory samples were emitted; log with the header (drop `noheader`)")
    m.origin = origin
    notes.insert(0, "no header: columns inferred from the cell shapes: " + ", ".join(described))
    return m, notes


TOTAL_MIN_MIB = 1024        # every GPU has at least 1 GiB: a smaller constant is no memory.total
IDLE_USED_SHARE = 0.05      # an idle GPU's memory.used is below this share of its total, its free above 1 - it
SUM_TOLERANCE = 0.02        # used + free = total less the driver's reservation (~0.5 % on an H200)


def _unitless_memory(rows, kinds, keys, m: ColumnMap, described: list, notes: list) -> bool:
    """`--format=csv,noheader,nounits` rows (`2026/12/01 22:33:41.398, 0, 1599, 143771`): which plain
    integer columns are memory, from their values alone. memory.total is the per-GPU constant of at
    least 1 GiB that no other column exceeds; memory.used is the column that, with another, adds up to
    it (used + free), the smaller of the two on the idle GPU; or, the only other column of MiB-sized
    values, when it reads near zero at some point (an idle GPU) and never above the total."""
    taken = set(m.roles.values())
    cols = [i for i, k in enumerate(kinds) if k == "int" and i not in taken]
    vals = {}
    for i in cols:
        try:
            vals[i] = [float(r[i]) for r in rows]
        except ValueError:
            continue
    if len(vals) < 2:
        return False

    def constant_per_gpu(i):
        seen = {}
        return all(seen.setdefault(k, v) == v for k, v in zip(keys, vals[i]))

    totals = [i for i in vals if constant_per_gpu(i) and min(vals[i]) >= TOTAL_MIN_MIB
              and all(all(a >= b for a, b in zip(vals[i], vals[j])) for j in vals if j != i)]
    if len(totals) != 1:
        return False
    total = totals[0]
    tot = vals[total]
    others = [i for i in vals if i != total and max(vals[i]) > 100]   # not a percentage or a temperature
    pairs = [(a, b) for a in others for b in others if a < b
             and all(abs(x + y - t) <= SUM_TOLERANCE * t for x, y, t in zip(vals[a], vals[b], tot))]
    used = None
    why = ""
    if len(pairs) == 1:
        a, b = pairs[0]
        used = a if min(vals[a]) <= min(vals[b]) else b
        why = (f"columns {a + 1} and {b + 1} add up to column {total + 1} (used + free = total); the one lower "
               f"on the idle GPU, column {used + 1}, is memory.used")
    elif len(others) == 1:
        c = others[0]
        if min(v / t for v, t in zip(vals[c], tot)) <= IDLE_USED_SHARE:
            used = c
            why = (f"column {c + 1} reads near zero on the idle GPU and never above column {total + 1}: "
                   "it is memory.used (memory.free would read near the total there)")
    if used is None:
        return False
    m.roles["memory.total"], m.roles["memory.used"] = total, used
    m.units["memory.total"] = m.units["memory.used"] = "MiB"
    described.extend([f"{used + 1}=memory.used", f"{total + 1}=memory.total"])
    notes.append(f"no header and no units (`--format=csv,noheader,nounits`): column {total + 1} is constant per "
                 f"GPU and the largest, so it is memory.total; {why} (inferred from the values, read as MiB)")
    return True


# -- parsing ---------------------------------------------------------------------------------------

def parse(src: Source, opts: Options) -> Parsed:
    return parse_lines(src.frame(), src.path, opts, plain=True)


def _start_lines(df: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, ColumnMap | None], int | None]:
    """Header and `--query-gpu=` command lines -> (frame of line, start: map id, why: the skip reason
    when it is not the file's own header), the maps by id (None: a foreign section, e.g. a
    compute-apps header), and the line of the first gpu header. Each distinct text is looked at once."""
    header_like = pl.col("text").str.contains(C.HEADER_LINE_RE) | pl.col("text").str.contains("--query-", literal=True)
    cand = rows_where(df, header_like).select("line", pl.col("text").str.strip_chars().alias("t"))
    ids: dict[str, int] = {}
    why: dict[str, str] = {}
    maps: dict[int, ColumnMap | None] = {}
    for t, line in cand.group_by("t", maintain_order=True).agg(pl.col("line").first()).iter_rows():
        kind = C.header_kind(t)
        if kind == "gpu":
            m = map_from_names(C.header_names(t), f"header at line {line}")
        elif kind == "apps":
            m = None
        elif re.match(C.PROMPT_RE, t) and C.query_list(t, "gpu"):
            m = map_from_names([(n, None) for n in C.query_list(t, "gpu")], f"the command at line {line}")
        elif re.match(C.PROMPT_RE, t) and C.query_list(t, "apps"):
            m = None
        else:
            continue
        ids[t] = len(ids) + 1
        maps[ids[t]] = m
        why[t] = "repeated header" if kind else "shell prompt"
    starts = rows_where(cand, pl.col("t").is_in(list(ids))).select(
        "line", pl.col("t").replace_strict(ids, return_dtype=pl.Int32).alias("start"),
        pl.col("t").replace_strict(why, return_dtype=pl.String).alias("why"))
    gpu_headers = [t for t, i in ids.items() if maps[i] is not None and why[t] == "repeated header"]
    first_header = rows_where(starts, pl.col("start").is_in([ids[t] for t in gpu_headers]))["line"].min()
    # a header with other columns than the one before is news (another query appended), not a repeat
    is_header = pl.col("why") == "repeated header"
    starts = starts.sort("line").with_columns(
        pl.when(is_header & (pl.col("start") != pl.col("start").forward_fill().shift(1).over(is_header)).fill_null(False))
        .then(pl.lit(HEADER_CHANGED)).otherwise(pl.col("why")).alias("why"))
    return starts, maps, first_header


HEADER_CHANGED = "header changed (other columns than the header before)"


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
_BAD_SCHEMA = {"line": pl.Int64, "text": pl.String, "reason": pl.String}
_ROW_SCHEMA = {"line": pl.Int64, "time": pl.Datetime("us", "UTC"), "gpu": pl.String, "series": pl.String,
               "bytes": pl.Int64, "ph": pl.Boolean, "total_bytes": pl.Int64}
_ID_SCHEMA = {"gpu": pl.String, "index": pl.String, "uuid": pl.String, "bus": pl.String, "name": pl.String,
              "total_bytes": pl.Int64}


def _nulls(n: int, dtype) -> pl.Series:
    return pl.repeat(None, n, dtype=dtype, eager=True)


def _read_rows(rows: pl.DataFrame, m: ColumnMap, zone: str,
               plain: bool = False) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Rows of one column map -> (readings, GPU ids seen, rows that do not fit), in chunks so that
    the split cells of a month-long log never sit in memory all at once. `plain`: rows that all look
    as nvidia-smi prints them are read by read_plain (the same result)."""
    if not m.roles:
        return (pl.DataFrame(schema=_ROW_SCHEMA), pl.DataFrame(schema=_ID_SCHEMA),
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
    """_read_rows' result by read_plain (a third of read_cells' CPU on the usual log, which the streamed
    reader of a big file already reads so), or None when some row does not look as nvidia-smi prints it."""
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
    return good, merge_ids(ids), pl.DataFrame(schema=_BAD_SCHEMA)


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
    import numpy as np

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
    only the role columns, the last one and `field_<ncols>` are looked at). The big-file reader
    (fastpath_stream.py) cuts them with polars' CSV reader."""
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
        cols["time"] = _nulls(n, pl.Datetime("us", "UTC"))
    id_roles = [x for x in ("index", "uuid", "pci.bus_id") if x in r]
    for role, key in (("index", "index"), ("uuid", "uuid"), ("pci.bus_id", "bus"), ("name", "name")):
        cols[key + "_raw"] = cell(role) if role in r else _nulls(n, pl.String)
    value_role = "memory.used" if "memory.used" in r else ("memory.free" if "memory.free" in r else None)
    if value_role:
        cols["bytes"] = C.mem_bytes(cell(value_role), m.units.get(value_role) or "MiB")
        cols["ph"] = C.placeholder_mask(cell(value_role), cols["bytes"])
    else:
        cols["bytes"] = _nulls(n, pl.Int64)
        cols["ph"] = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if "memory.total" in r:
        cols["total_bytes"] = C.mem_bytes(cell("memory.total"), m.units.get("memory.total") or "MiB")
    else:
        cols["total_bytes"] = _nulls(n, pl.Int64)
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
    return (res.select(list(_ROW_SCHEMA)), ids.select(list(_ID_SCHEMA)),
            pl.concat([b.select(list(_BAD_SCHEMA)).cast(_BAD_SCHEMA) for b in bad]))


_TS_FORMAT = "%Y/%m/%d %H:%M:%S%.f"


_STAMP_SHAPE = r"^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}$"


def _stamps(values: pl.Series) -> pl.Series:
    """`strip_chars().str.strptime(Datetime("us"), _TS_FORMAT, strict=False)` of nvidia-smi stamps,
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
    return values.str.strip_chars().str.strptime(pl.Datetime("us"), _TS_FORMAT, strict=False)


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
    comparison of each line with its phase's text does both (~14 ms per 32 MB). None when the ids are
    not all right after the timestamp, or the lines do not repeat so."""
    import numpy as np

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
    import numpy as np

    r = m.roles
    # a timestamp in field_0 that parses cannot start with the `//` read_cells strips there
    if r.get("timestamp") != 0 or "memory.used" not in r or not cells.height:
        return None
    raw = {key: f"field_{r[role]}" for role, key in _ID_KEYS.items() if role in r}
    first = next((k for k in ("index", "uuid", "bus") if k in raw), None)
    if first is None:
        return None

    def mib(cells: pl.Expr) -> pl.Expr:
        # mem_bytes' fast branch: "N MiB", N an integer in range (else it takes its regex); " N MiB" ->
        # N is what strip_prefix(" ") and its strip_suffix(" MiB") leave, in one slice
        return cells.str.slice(1, cells.str.len_bytes() - 5).cast(pl.Int64, strict=False)

    def has_sign(cells: pl.Expr) -> pl.Expr:
        # the cast takes a sign (and refuses a blank), so a number that it read had its sign, if any,
        # right after the cell's leading space
        return cells.str.starts_with(" +") | cells.str.starts_with(" -")

    def fits(cells: pl.Expr, n: pl.Expr) -> pl.Expr:
        return cells.str.ends_with(" MiB") & ~has_sign(cells) & (n >= 0) & (n < C.MAX_MIB)

    def total_bytes(cells: pl.Expr) -> pl.Expr:   # a memory.total cell in bytes, null unless it fits
        return pl.when(fits(cells, mib(cells))).then(mib(cells) * (1 << 20))

    cell = pl.col(f"field_{r['memory.used']}")
    # one query (its checks as aggregates, broadcast): 25% less than a frame of three columns and a second query
    used = cells.lazy().select(mib(cell).alias("n"), cell.str.ends_with(" MiB").all().alias("unit"),
                               has_sign(cell).any().alias("signed")).collect()
    n = used["n"]
    if n.null_count() or used["signed"][0] or not used["unit"][0] or n.min() < 0 \
            or n.max() >= C.MAX_MIB:
        return None
    used = (n * (1 << 20)).alias("bytes").to_frame()
    total = _nulls(cells.height, pl.Int64)
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
    naive = _stamps(runs["value"])
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
            combos = combos.with_columns(_nulls(combos.height, pl.Int64).alias("total_bytes"))
        combos = combos.group_by(*raw, maintain_order=True).agg(pl.col("total_bytes").max(), pl.col("_phase"))
    else:
        combos = pl.concat([ids_cells, rows.select("total_bytes")], how="horizontal").group_by(
            *raw, maintain_order=True).agg(pl.col("total_bytes").max())
    check = {"index": _is_index, "uuid": _is_uuid, "bus": C.norm_bus, "name": _is_name}
    ids = combos.select(*[C.map_unique(combos[k], check[k]).alias(k) if k in raw
                          else _nulls(combos.height, pl.String).alias(k) for k in ("index", "uuid", "bus", "name")],
                        "total_bytes")
    if ids[first].null_count():
        return None   # a row's GPU would come from its second id (coalesce): read_cells does that
    ids = ids.with_columns(pl.col(first).alias("gpu")).select(list(_ID_SCHEMA))
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


def parse_lines(df: pl.DataFrame, path: str, opts: Options, nested: bool = False, plain: bool = False) -> Parsed:
    """`plain`: a section whose rows all look as nvidia-smi prints them is read by read_plain (the
    streamed reader, whose batches take it on their own, leaves it off)."""
    p = Parsed()
    zone = opts.tz_for(path)
    df = df.select("line", "text")
    starts, maps, first_header = _start_lines(df)
    if starts.height:
        df = df.join(starts.select("line", "start"), on="line", how="left", maintain_order="left").with_columns(
            pl.col("start").forward_fill().fill_null(0).alias("map"))
        body = rows_where(df, pl.col("start").is_null())
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.Int32).alias("start"), pl.lit(0, dtype=pl.Int32).alias("map"))
        body = df

    # rows before any header: columns from the cell shapes
    lead = rows_where(body, pl.col("map") == 0) if starts.height else body
    if lead.height:
        candidates = lead.head(2000).filter(pl.col("text").str.contains(", ", literal=True)).head(400)["text"].to_list()
        maps[0], notes = infer_map(candidates)
        p.notes.extend(notes)
    parts, id_parts, rest_parts = [], [], []
    map_ids = body["map"].unique().to_list()
    groups = body.partition_by("map", as_dict=True, maintain_order=True) if len(map_ids) > 1 else {(map_ids[0],): body} \
        if map_ids else {}
    for key, part in groups.items():
        mid = key[0] if isinstance(key, tuple) else key
        m = maps.get(mid)
        if m is None:
            reason = "compute-apps section" if mid else "unrecognized line"
            rest_parts.append(part.select("line", "text").with_columns(pl.lit(reason).alias("reason")))
            continue
        good, ids, bad = _read_rows(part, m, zone, plain)
        parts.append(good)
        id_parts.append(ids)
        rest_parts.append(bad)
    del body, groups
    rows = pl.concat(parts) if parts else pl.DataFrame(schema=_ROW_SCHEMA)
    if len(parts) > 1:
        rows = rows.sort("line")
    ids = pl.concat(id_parts) if id_parts else pl.DataFrame(schema=_ID_SCHEMA)
    rest = pl.concat(rest_parts) if rest_parts else pl.DataFrame(schema=_BAD_SCHEMA)

    # repeated headers and command lines are counted; the first header is the file's own
    foreign = [i for i, m in maps.items() if m is None and i]
    for why, lines in rows_where(starts, (pl.col("line") != (first_header or -1)) & ~pl.col("start").is_in(foreign)) \
            .group_by("why", maintain_order=True).agg(pl.col("line")).iter_rows():
        p.skipped.add_lines(why, lines)
    # a compute-apps header and the rows under it are another section: the rest, for its parser
    rest = pl.concat([rest, df.filter(pl.col("start").is_in(foreign)).select(
        "line", "text", pl.lit("compute-apps section").alias("reason"))]).sort("line")
    del df

    rest, errors = C.classify_rest(rest)
    p.skipped.add_lines("driver error", errors["line"])

    if rows.height:
        no_id = ids["index"].null_count() == ids.height and ids["uuid"].null_count() == ids.height \
            and ids["bus"].null_count() == ids.height
        if no_id and ids["name"].drop_nulls().n_unique() > 1:
            p.notes.append("no index, uuid or pci.bus_id column: GPUs are told apart by their names")
        elif no_id:
            rows = rows.with_columns(pl.lit(None, dtype=pl.String).alias("gpu"))
            ids = ids.with_columns(pl.lit(None, dtype=pl.String).alias("gpu"))
            p.notes.append("no index, uuid or pci.bus_id column: all rows are taken as one GPU")
    timed = rows.height > 0 and rows["time"].null_count() < rows.height
    if not timed and rows.height:
        rows, rest, used_dates = _time_from_date_lines(rows, rest, zone)
        if used_dates:
            timed = True
            p.notes.append(f"no timestamp column: times taken from the {used_dates} `date` lines between the rows")
    # sample number: a new sample starts when a GPU repeats
    rows = rows.with_columns(pl.int_range(1, pl.len() + 1).over(pl.col("gpu").fill_null("")).cum_max().alias("seq"))
    p.clock = "wall-assumed" if timed else "none"
    if not timed and rows.height:
        p.notes.append("no timestamp column: rows are ordered by sample number (a new sample starts when a GPU repeats)")

    out = rows_where(rows, pl.col("series").is_not_null() & (pl.col("bytes").is_not_null() | pl.col("ph")))
    p.samples = samples_frame(out.select("time", "seq", "line", "gpu", "series", "bytes", "total_bytes"))
    if out.height and out["bytes"].null_count() == out.height:
        p.notes.append("memory is a placeholder such as [N/A] on every row (a unified-memory GPU such as GB10 "
                       "reports none): no memory readings")
    if rows.height and (rows["series"] == "memory.free").any():
        p.notes.append("no memory.used column: memory.free is given as series memory.free")
    if rows.height and rows["series"].null_count() == rows.height and not any("cannot tell" in n for n in p.notes):
        p.notes.append("no memory column in this query: GPU rows were read but give no memory samples")

    if errors.height:
        p.events = C.driver_error_events(*C.time_after_previous_row(errors, rows))

    _meta(p, ids)
    return C.finish(p, rest, path, opts, NAME, nested)


def _time_from_date_lines(rows: pl.DataFrame, rest: pl.DataFrame, zone: str) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """A shell loop that runs `date` before each query gives an untimed CSV its clock."""
    dates = rest.filter(pl.col("reason") == "date line").with_columns(
        pl.col("text").str.strip_chars().alias("d")
    ).with_columns(
        pl.col("d").str.extract(r" ([A-Z]{2,5}) [0-9]{4}$", 1).alias("zone"),
        C.asctime_expr(pl.col("d").str.replace(r" [A-Z]{2,5}( [0-9]{4})$", "$1")).alias("naive"),
    ).filter(pl.col("naive").is_not_null())
    if dates.height == 0:
        return rows, rest, 0
    utc_named = pl.col("zone").is_in(["UTC", "GMT", "Z"])
    dates = dates.with_columns(
        pl.when(utc_named).then(pl.col("naive").dt.replace_time_zone("UTC"))
        .otherwise(clock.localize(pl.col("naive"), zone)).alias("dtime")
    )
    rows = rows.drop("time").join_asof(dates.select("line", pl.col("dtime").alias("time")).sort("line"),
                                       on="line", strategy="backward")
    rest = rest.filter(~pl.col("line").is_in(dates["line"].implode()))
    return rows, rest, dates.height


def _meta(p: Parsed, ids: pl.DataFrame) -> None:
    if ids.height == 0:
        return
    gpus = ids.group_by("gpu", maintain_order=True).agg(
        pl.col("index").drop_nulls().first(), pl.col("name").drop_nulls().first(),
        pl.col("uuid").drop_nulls().first(), pl.col("bus").drop_nulls().first(),
        pl.col("total_bytes").drop_nulls().max(),
    )
    p.meta["gpus"] = [
        {"gpu": g, "index": i, "name": n, "uuid": u, "bus_id": b, "total_bytes": tb}
        for g, i, n, u, b, tb in gpus.iter_rows()
        if any(x is not None for x in (g, n, tb))
    ]
    gpu_map = {}
    for g in p.meta["gpus"]:
        if g["index"] is not None:
            for k in ("uuid", "bus_id"):
                if g[k]:
                    gpu_map[g[k]] = g["index"]
    if gpu_map:
        p.meta["gpu_map"] = gpu_map
