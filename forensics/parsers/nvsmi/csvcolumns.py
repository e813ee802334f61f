"""The columns of an nvidia-smi `--query-gpu` CSV (docs/formats.md §1.1): named by a header or a
`--query-gpu=` command line, declared with `--columns`, or, for a headerless log, inferred from the
shapes and values of its cells."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from forensics.parsers.nvsmi import common as C

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


def infer_map(texts: list[str], spread: list[str] | None = None) -> tuple[ColumnMap | None, list[str]]:
    """A column map for headerless rows, from the shapes of their cells; and notes saying what was
    assumed. None when the rows are not --query-gpu rows. `spread`: rows drawn from all of the lead
    (not only its first ones), whose values tell memory from other numbers in a `nounits` log whose
    GPUs are idle at first."""
    rows = [C.strip_row(t).split(", ") for t in texts if ", " in t]
    rows = [r for r in rows if C.is_gpu_row([C.cell_kind(c) for c in r])][:200]
    if not rows:
        return None, []
    ncols = Counter(len(r) for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if len(r) == ncols]
    later = [r for r in (C.strip_row(t).split(", ") for t in spread or []) if len(r) == ncols]
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
    if kinds == ["ts", "int"] and max(int(r[1]) for r in rows if r[1].strip().isdigit()) > 100:
        # `--query-gpu=timestamp,memory.used --format=csv,noheader,nounits`: the one number beside the
        # clock, larger than a percentage or a temperature, is the memory the script asked for
        m = map_from_names([("timestamp", None), ("memory.used", "MiB")], origin)
        return m, ["no header and no units: a timestamp and one number above 100, read as memory.used in MiB "
                   "(assumed; if it is another column, declare it with --columns timestamp,<its name>)"]
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
    elif not mib_cols and _unitless_memory(later or rows, kinds, key_col, m, described, notes):
        pass
    elif not mib_cols:
        notes.append(_undecided(later or rows, kinds, key_col, m))
    elif mib_cols:
        notes.append(f"no header: cannot tell which of the MiB columns {', '.join(str(i + 1) for i in rest)} is "
                     "memory.used, so no memory samples were emitted; log with the header (drop `noheader`)")
    m.origin = origin
    notes.insert(0, "no header: columns inferred from the cell shapes: " + ", ".join(described))
    return m, notes


TOTAL_MIN_MIB = 1024        # every GPU has at least 1 GiB: a smaller constant is no memory.total
IDLE_USED_SHARE = 0.05      # an idle GPU's memory.used is below this share of its total, its free above 1 - it
SUM_TOLERANCE = 0.02        # used + free = total less the driver's reservation (~0.5 % on an H200)


def _int_columns(rows, kinds, m: ColumnMap) -> dict[int, list[float | None]]:
    """The values of the plain-number columns no role took (None where a cell is no number, e.g. [N/A])."""
    taken = set(m.roles.values())
    vals = {}
    for i, k in enumerate(kinds):
        if k == "int" and i not in taken:
            col = [float(r[i]) if r[i].strip().isdigit() else None for r in rows]
            if any(v is not None for v in col):
                vals[i] = col
    return vals


def _total_column(vals, keys) -> int | None:
    """memory.total: the only per-GPU constant of at least 1 GiB that no other column exceeds."""
    def constant_per_gpu(i):
        seen = {}
        return all(v is None or seen.setdefault(k, v) == v for k, v in zip(keys, vals[i]))

    def floor(i):
        return min(v for v in vals[i] if v is not None)

    totals = [i for i in vals if constant_per_gpu(i) and floor(i) >= TOTAL_MIN_MIB
              and all(all(a is None or b is None or a >= b for a, b in zip(vals[i], vals[j])) for j in vals if j != i)]
    return totals[0] if len(totals) == 1 else None


def _what_was_seen(rows, kinds, key_col, m: ColumnMap) -> str:
    """The plain-number columns as read, for the message of a log whose memory.used column is not told."""
    vals = _int_columns(rows, kinds, m)
    gpus = len({r[key_col] for r in rows}) if key_col is not None else 1
    seen = []
    for i, col in vals.items():
        v = [x for x in col if x is not None]
        seen.append(f"column {i + 1} reads " + (f"{min(v):g}–{max(v):g}" if max(v) > min(v) else f"{v[0]:g} throughout"))
    gpus_said = f"{gpus} GPU{'s' if gpus > 1 else ''}"
    return f"in {len(rows)} rows of {gpus_said}: " + (", ".join(seen) if seen else "no plain-number column")


def _columns_guess(rows, kinds, key_col, m: ColumnMap) -> tuple[int | None, str]:
    """The --columns value of the common query `..., memory.used, memory.total` as this log's columns
    fit it: the roles told, the per-GPU constant as memory.total, the first other number as memory.used
    (its position, the value)."""
    vals = _int_columns(rows, kinds, m)
    keys = [r[key_col] if key_col is not None else "" for r in rows]
    total = _total_column(vals, keys) if len(vals) > 1 else None
    names = {i: role for role, i in m.roles.items()}
    if total is not None:
        names[total] = "memory.total"
    used = next((i for i in vals if i not in names), None)
    if used is not None:
        names[used] = "memory.used"
    return used, "--columns " + ",".join(names.get(i, f"<column {i + 1}>") for i in range(len(kinds)))


def _undecided(rows, kinds, key_col, m: ColumnMap) -> str:
    """The one-line message of a `nounits` log whose memory column is not told: what its columns read and the
    --columns value that reads it; for a lone memory column (no memory.total, no other number), the values of
    both orders, the one its values fit first (_lone_fit)."""
    used, spec = _columns_guess(rows, kinds, key_col, m)
    as_free = spec.replace("memory.used", "memory.free")
    lone = used is not None and len(kinds) == len(m.roles) + 1
    fit = _lone_fit(rows, kinds, key_col, m, used) if lone else None
    if fit == "memory.free":
        todo = (f"column {used + 1} starts and ends at its highest, as free memory does on a GPU idle before and after "
                f"a job: if it is memory.free, pass `{as_free}`; if memory.used, `{spec}`")
    elif fit == "memory.used":
        todo = (f"column {used + 1} starts and ends at its lowest, as used memory does on a GPU idle before and after "
                f"a job: if it is memory.used, pass `{spec}`; if memory.free, `{as_free}`")
    elif used is not None:
        todo = f"if column {used + 1} is memory.used, pass `{spec}`" + (f"; if memory.free, `{as_free}`" if lone else "")
    else:
        todo = f"pass `{spec}`"
    todo += " (naming the other columns in their --query-gpu order)" if "<" in spec else ""
    return ("no header and no units (`--format=csv,noheader,nounits`): cannot tell which column is memory.used "
            f"({_what_was_seen(rows, kinds, key_col, m)}), so no memory samples were emitted; {todo}, or log with the "
            "header or with units")


# a GPU's reading at the edge of its range: within this share of it (an idle GPU reads the same before and after
# a job, give or take the driver's few MiB)
EDGE_SHARE = 0.05


def _lone_fit(rows, kinds, key_col, m: ColumnMap, col: int) -> str | None:
    """Which of memory.used and memory.free the values of a lone memory column (no memory.total beside it) fit:
    free memory is at its highest while a GPU is idle, before and after a job, used memory at its lowest; each
    GPU's first and last readings at that edge, and some GPU's readings moving between. Only for the message:
    values alone do not tell them apart (a job's use can dip and come back as free memory does), so the column
    is not read without --columns."""
    vals = _int_columns(rows, kinds, m)[col]
    keys = [r[key_col] if key_col is not None else "" for r in rows]
    per_gpu: dict[str, list[float]] = {}
    for k, v in zip(keys, vals):
        if v is not None:
            per_gpu.setdefault(k, []).append(v)
    if not any(max(v) > min(v) for v in per_gpu.values()):
        return None

    def at(edge) -> bool:
        return all(abs(v[0] - edge(v)) <= EDGE_SHARE * (max(v) - min(v)) and
                   abs(v[-1] - edge(v)) <= EDGE_SHARE * (max(v) - min(v)) for v in per_gpu.values())

    return "memory.free" if at(max) else "memory.used" if at(min) else None


def _unitless_memory(rows, kinds, key_col, m: ColumnMap, described: list, notes: list) -> bool:
    """`--format=csv,noheader,nounits` rows (`2026/12/01 22:33:41.398, 0, 1599, 143771`): which plain
    integer columns are memory, from their values alone. memory.total is the per-GPU constant of at
    least 1 GiB that no other column exceeds; memory.used is the column that, with another, adds up to
    it (used + free), the smaller of the two on the idle GPU; or, the only other column of MiB-sized
    values, when it reads near zero at some point (an idle GPU) and never above the total. `rows`
    include rows drawn from the whole lead: GPUs idle at first read 0–65 MiB, no more than a percentage."""
    vals = _int_columns(rows, kinds, m)
    if len(vals) < 2:
        return False
    keys = [r[key_col] if key_col is not None else "" for r in rows]
    total = _total_column(vals, keys)
    if total is None:
        return False
    # rows where a cell is no number ([N/A]) say nothing about the sums
    whole = [n for n in range(len(rows)) if all(vals[i][n] is not None for i in vals)]
    if not whole:
        return False
    vals = {i: [col[n] for n in whole] for i, col in vals.items()}
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
        elif c < total and len(set(vals[c])) > 1:
            # no idle moment tells used from free; `memory.used, memory.total` is the order scripts query
            used = c
            why = (f"column {c + 1}, the only other memory-sized column, varies, never exceeds column {total + 1} "
                   f"and comes before it, as in `memory.used,memory.total`: it is taken as memory.used (if it is "
                   f"memory.free, declare the columns with {COLUMNS_EXAMPLE.replace('memory.used', 'memory.free')})")
    if used is None:
        return False
    m.roles["memory.total"], m.roles["memory.used"] = total, used
    m.units["memory.total"] = m.units["memory.used"] = "MiB"
    described.extend([f"{used + 1}=memory.used", f"{total + 1}=memory.total"])
    notes.append(f"no header and no units (`--format=csv,noheader,nounits`): column {total + 1} is constant per "
                 f"GPU and the largest, so it is memory.total; {why} (inferred from the values, read as MiB)")
    return True



# -- declared: --columns --------------------------------------------------------------------------

COLUMNS_EXAMPLE = "--columns timestamp,index,memory.used,memory.total"


def parse_declared(spec: str) -> list[str]:
    """`--columns a,b,c` -> the names, or ValueError saying what is wrong and how to fix it."""
    names = [n.strip().lower() for n in spec.split(",")]
    fix = f"name the columns of the headerless log's --query-gpu list in their order, e.g. {COLUMNS_EXAMPLE}"
    if not spec.strip() or any(not n for n in names):
        raise ValueError(f"--columns {spec!r}: an empty column name; {fix}")
    unknown = [n for n in names if n not in C.GPU_PROPS and n not in ALIASES and not n.startswith(C.GPU_PROP_PREFIXES)]
    if unknown:
        what = "is not an nvidia-smi --query-gpu property" if len(unknown) == 1 else \
            "are not nvidia-smi --query-gpu properties"
        raise ValueError(f"--columns {spec}: {', '.join(unknown)} {what}; {fix}")
    roles = [ALIASES.get(n, n) for n in names]
    twice = sorted({n for n in roles if roles.count(n) > 1})
    if twice:
        raise ValueError(f"--columns {spec}: {', '.join(twice)} named twice; {fix}")
    if not {"memory.used", "memory.free"} & set(roles):
        raise ValueError(f"--columns {spec}: no memory.used (or memory.free) column, so there is nothing to read; {fix}")
    return names


def declared_map(names: list[str]) -> ColumnMap:
    """The column map of --columns (bare numbers in memory columns are read as MiB, as nounits prints them)."""
    return map_from_names([(n, None) for n in names], "declared with --columns")
