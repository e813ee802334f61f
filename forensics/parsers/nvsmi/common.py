"""What the nvidia-smi parsers share: line classes (prompts, separators, driver errors), cell shapes
of headerless CSV, GPU id normalisation, the "which nvidia-smi format comes first" sniff, and the
hand-off of a file's other sections to the parser of their format (docs/formats.md §1).

Not a parser itself (no NAME): the five parser modules are csvlog, apps, dmon, table and query
(they import this module, never the other way round).
"""
from __future__ import annotations

import functools

import re

import polars as pl

from forensics.model import Parsed, events_frame

# -- line classes ---------------------------------------------------------------------------------

# A shell prompt, possibly with the command after it: "$ nvidia-smi", "$nvidia-smi", "~ $  time ...",
# "[user@host ~]$ ...", "user@host:~$ ...", "root@host:/# ...", "(venv) user@host:~$", "PS C:\> ...".
PROMPT_RE = (
    r"^\s*(?:\([^)]*\)\s*)?(?:"
    r"[\w.-]+@[\w.-]+(?::\S*)?\s*[$#%]"
    r"|\[[^\]]*\]\s*[$#%]"
    r"|~\S*\s*\$"
    r"|\$"
    r"|(?:PS )?[A-Za-z]:\\[^>]*>"
    r"|>>>\s"
    r")"
)
# echo'd separators: "-----", "==== run 2 ====", "---- source: ... ----", "*****", "#####"
SEPARATOR_RE = r"^\s*(?:-{3,}|={3,}|\*{3,}|_{3,}|~{3,}|#{3,}|\+{3,})"
COMMENT_RE = r"^\s*(?:#|//)"
# `date` between loop iterations, and the first line of `watch`: "Every 1.0s: nvidia-smi   host: Fri ..."
DATE_LINE_RE = r"^\s*[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?: [A-Z]{2,5})? [0-9]{4}\s*$"
WATCH_RE = r"^Every [0-9]+(?:\.[0-9]+)?s: "
# What nvidia-smi prints instead of its output when the driver or a GPU is in trouble (evidence).
DRIVER_ERROR_RE = (
    r"(?i)^\s*(?:Unable to determine the device handle for|NVIDIA-SMI has failed because"
    r"|No devices were found\s*$|Failed to initialize NVML|NVIDIA-SMI couldn't find libnvidia-ml"
    r"|Unable to query number of CUDA devices|GPU access blocked by the operating system)"
)
TABLE_BORDER_RE = r"^\s*\+[-=+]{5,}\+\s*$"
# The plain table's rows that carry memory (docs/formats.md §1.4), which also turn up without the box
# around them (`nvidia-smi | grep -E 'MiB|python'`): a GPU's second row (fan, temperature, perf
# state, power | used / total |) and a process row (old `| 0 12345 C python 1234MiB |`, new `| 0 N/A
# N/A 3543111 C VLLM::EngineCore 29708MiB |`; new drivers cut a wide cell to `10356...`). Python's and
# polars' regex dialects both read these.
TABLE_MEM_ROW_RE = (r"^\s*\|\s*(?:N/A|ERR!|[0-9]{1,3}%)\s+(?:N/A|ERR!|[0-9]{1,3}C)\s+(?:P[0-9]{1,2}|N/A|ERR!)\s[^|]*\|"
                    r"\s*(?P<used>[0-9]+)MiB\s*/\s*(?P<total>[0-9]+)MiB\s*\|")
TABLE_PROC_ROW_RE = (r"^\s*\|\s+(?P<g>[0-9]+)\s+(?:(?P<gi>N/A|[0-9]+)\s+(?P<ci>N/A|[0-9]+)\s+)?(?P<pid>[0-9]+)\s+"
                     r"(?P<type>C\+G|G\+C|M\+C|C|G|M)\s+(?P<pname>[^|]*?)\s+(?P<usage>[0-9]+MiB|N/A|[0-9]*\.\.\.)\s*\|\s*$")

# -- cell shapes (headerless CSV) ------------------------------------------------------------------

NVSMI_TS_RE = r"[0-9]{4}/[0-9][0-9]/[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]{3}"
BUS_RE = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
UUID_RE = r"(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4,12}){1,4}(?:/[0-9]+/[0-9]+)?"
MEM_VALUE_RE = r"([0-9]+(?:\.[0-9]+)?) ?((?:[KMGTP]i?B)|B)?"
PLACEHOLDER_RE = r"\[[A-Za-z][A-Za-z /]*\]|N/A"
# Names the driver prints for GPUs ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB", "GeForce 930M",
# old drivers' bare "A100-SXM4-40GB"). A process called "nvidia-smi" is not one of them.
GPU_NAME_RE = (
    r"(?:NVIDIA|Tesla|GeForce|Quadro|TITAN|Titan|GRID|Graphics Device|RTX|GTX)(?: [\w.()+/-]+)+"
    r"|[AHLTVPKB][0-9]{1,3}[A-Za-z]?(?:-[\w]+)*(?: [\w.()+-]+)*"
)
ENUM_WORDS = {
    "Enabled", "Disabled", "Default", "Exclusive_Process", "Exclusive_Thread", "Prohibited", "On", "Off",
    "Active", "Not Active", "WDDM", "TCC", "Yes", "No", "Supported",
}

_CELL_PATTERNS = [
    ("ts", re.compile(NVSMI_TS_RE)),
    ("bus", re.compile(BUS_RE)),
    ("uuid", re.compile(UUID_RE)),
    ("mib", re.compile(r"[0-9]+(?:\.[0-9]+)? (?:[KMGT]i?B)")),
    ("pct", re.compile(r"[0-9]+(?:\.[0-9]+)? %")),
    ("watt", re.compile(r"[0-9]+(?:\.[0-9]+)? W")),
    ("mhz", re.compile(r"[0-9]+ MHz")),
    ("int", re.compile(r"[0-9]+")),
    ("version", re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?")),
    ("float", re.compile(r"-?[0-9]+\.[0-9]+")),
    ("pstate", re.compile(r"P[0-9]{1,2}")),
    ("ph", re.compile(PLACEHOLDER_RE)),
    ("gpuname", re.compile(GPU_NAME_RE)),
    # (the part before the first slash holds none: one way to split a cell, linear; issue 45 D-R5)
    ("path", re.compile(r"(?:[A-Za-z]:)?[\\/][^\\/]*(?:[\\/][^\\/]*)*|[^\s\\/]*[\\/]\S*")),
]
GPU_ROW_KINDS = {"ts", "bus", "uuid", "mib", "pct", "watt", "mhz", "int", "version", "float", "pstate", "ph",
                 "gpuname", "enum"}
_STRONG = {"ts", "bus", "uuid", "gpuname"}


def cell_kind(cell: str) -> str:
    c = cell.strip()
    if c == "[Not Found]":
        return "notfound"
    if c in ENUM_WORDS:
        return "enum"
    for kind, rx in _CELL_PATTERNS:
        if rx.fullmatch(c):
            return kind
    return "text"


def row_kinds(text: str) -> list[str] | None:
    """The shape of a headerless CSV row, or None when it is not ", "-separated."""
    t = strip_row(text)
    if ", " not in t:
        return None
    return [cell_kind(c) for c in t.split(", ")]


def strip_row(text: str) -> str:
    """A row quoted in source code keeps its comment marker ("//0, GPU-..."): drop it."""
    return re.sub(r"^\s*//+\s*", "", text).strip()


def is_gpu_row(kinds: list[str] | None) -> bool:
    if not kinds or len(kinds) < 2:
        return False
    if any(k not in GPU_ROW_KINDS for k in kinds):
        return False
    if "mib" in kinds:
        return True
    if kinds[0] == "ts" and len(kinds) >= 2:
        # `timestamp, ...` with `--format=csv,noheader,nounits`: the clock is nvidia-smi's own shape
        return True
    return sum(k in _STRONG for k in kinds) >= 1 and sum(k in _STRONG | {"pct", "watt", "mhz", "pstate", "version"}
                                                          for k in kinds) >= 2


def apps_row_roles(kinds: list[str] | None) -> dict[str, int] | None:
    """Positions of pid, process name and used memory in a headerless compute-apps row, else None.

    Shape: [timestamp] [gpu_name] [gpu_bus_id] [gpu_uuid] pid, process_name, used_memory (the
    common query orders); the name is whatever follows the pid, the memory is the last cell."""
    if not kinds or not (3 <= len(kinds) <= 8):
        return None
    last = len(kinds) - 1
    if kinds[last] not in ("mib", "ph", "int"):
        return None
    for i in range(len(kinds) - 2, 0, -1):
        if kinds[i - 1] == "int" and kinds[i] in ("path", "notfound", "text", "gpuname", "enum"):
            others = [k for j, k in enumerate(kinds) if j not in (i - 1, i, last)]
            if all(k in ("ts", "gpuname", "bus", "uuid", "int", "text") for k in others) and (
                kinds[i] in ("path", "notfound") or "uuid" in kinds or kinds[last] == "mib"
            ):
                if i + 1 != last:
                    return None
                return {"pid": i - 1, "process_name": i, "used_memory": last}
    return None


# -- GPU ids -----------------------------------------------------------------------------------

def norm_bus(bus: str | None) -> str | None:
    """`0000:01:00.0`, `00000000:3b:00.0` -> `00000000:01:00.0` (the 8-digit, upper-case form the
    CSV prints), so files of different driver ages name a GPU the same way."""
    if bus is None:
        return None
    m = re.fullmatch(r"\s*(?:GPU\s*)?([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-9A-Fa-f])\s*", bus)
    if not m:
        return None
    return f"{int(m.group(1), 16):08X}:{m.group(2).upper()}:{m.group(3).upper()}.{m.group(4).upper()}"


def norm_bus_expr(e: pl.Expr) -> pl.Expr:
    """Vectorized norm_bus (null when the text is not a bus id)."""
    parts = e.str.strip_chars().str.extract_groups(
        r"^(?:GPU\s*)?([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-9A-Fa-f])$"
    )
    dom = parts.struct.field("1").str.to_uppercase().str.pad_start(8, "0")
    return pl.concat_str([
        dom, pl.lit(":"), parts.struct.field("2").str.to_uppercase(), pl.lit(":"),
        parts.struct.field("3").str.to_uppercase(), pl.lit("."), parts.struct.field("4").str.to_uppercase(),
    ])


def mem_bytes_expr(cell: pl.Expr, default_unit: str | None) -> pl.Expr:
    """A memory cell ("38803 MiB", or a bare "38803" under nounits) -> bytes; placeholders and garbage
    -> null. The unit in the cell wins; a bare number takes `default_unit` (None: stays null)."""
    from forensics.units import bytes_expr

    parts = cell.str.strip_chars().str.extract_groups(r"^" + MEM_VALUE_RE + r"$")
    num = parts.struct.field("1")
    unit = parts.struct.field("2")
    if default_unit is None:
        return pl.when(unit.is_not_null()).then(bytes_expr(num, unit.fill_null("MiB"))).otherwise(None)
    return bytes_expr(num, unit.fill_null(default_unit))


# -- fast column helpers (a month of 1 Hz 8-GPU CSV is 20M rows) --------------------------------------

def mem_bytes(cells: pl.Series, default_unit: str | None) -> pl.Series:
    """Series version of mem_bytes_expr. Fast path for the plain `N MiB` cell (an integer cast that
    takes ASCII digits only); the regex only for the cells left over."""
    from forensics.units import unit_factor

    mib = cells.str.strip_suffix(" MiB").cast(pl.Int64, strict=False)
    # a bare integer is not a `N MiB` cell: it takes the default unit, on the slow path. The cast also
    # takes a sign ("+1", "-0"), which nvidia-smi never prints: such cells go to the regex, which refuses them
    signed = cells.str.starts_with("+") | cells.str.starts_with("-")
    fast = pl.select(pl.when(cells.str.ends_with(" MiB") & ~signed & (mib >= 0) & (mib < MAX_MIB)).then(mib * (1 << 20))
                     .otherwise(None)).to_series()
    missing = fast.is_null()
    if not missing.any():
        return fast.alias(cells.name)
    idx = missing.arg_true()
    rest = cells.gather(idx)
    parts = rest.str.strip_chars().str.extract_groups(r"^" + MEM_VALUE_RE + r"$")
    num = parts.struct.field("1").cast(pl.Float64, strict=False)
    unit = parts.struct.field("2")
    factors = {u: unit_factor(u) for u in unit.unique().drop_nulls().to_list()}
    factor = unit.replace_strict(factors, default=None, return_dtype=pl.Int64) if factors else \
        pl.repeat(None, len(unit), dtype=pl.Int64, eager=True)
    default = unit_factor(default_unit) if default_unit else None
    if default is not None:
        factor = pl.select(pl.when(unit.is_null()).then(pl.lit(default, dtype=pl.Int64)).otherwise(factor)).to_series()
    slow = (num * factor).round(0).cast(pl.Int64, strict=False)
    return fast.scatter(idx, slow).alias(cells.name)


MAX_MIB = 1 << 40  # an exbibyte: more is garbage (and would overflow Int64 bytes)


def mib_expr(digits: pl.Expr) -> pl.Expr:
    """ASCII digits of MiB -> bytes; null for anything else or absurdly large."""
    n = digits.cast(pl.Int64, strict=False)
    return pl.when((n >= 0) & (n < MAX_MIB)).then(n * (1 << 20))


def placeholder_mask(cells: pl.Series, values: pl.Series) -> pl.Series:
    """True where a cell with no number holds a placeholder ([N/A], [Not Supported], N/A)."""
    mask = pl.repeat(False, len(cells), dtype=pl.Boolean, eager=True)
    missing = values.is_null()
    if missing.any():
        idx = missing.arg_true()
        hit = cells.gather(idx).str.strip_chars().str.contains("^(?:" + PLACEHOLDER_RE + ")$").fill_null(False)
        mask = mask.scatter(idx, hit)
    return mask


def map_unique(values: pl.Series, fn, dtype=pl.String) -> pl.Series:
    """Apply a Python function once per distinct value (ids repeat on every row of a long log)."""
    if len(values) <= 64:   # a few GPUs' ids: a polars query costs more than the Python
        listed = values.to_list()
        mapping = {v: fn(v) for v in dict.fromkeys(listed) if v is not None}
        return pl.Series(values.name, [mapping.get(v) for v in listed], dtype=dtype)
    uniq = values.unique().drop_nulls().to_list()
    mapping = {v: fn(v) for v in uniq}
    if not mapping:
        return pl.repeat(None, len(values), dtype=dtype, eager=True).alias(values.name)
    return values.replace_strict(mapping, default=None, return_dtype=dtype)


def localize_series(naive: pl.Series, zone: str) -> pl.Series:
    """clock.localize for a long Series, fast: the UTC offset is looked up once per distinct minute;
    only the days that hold a DST fold or gap go through clock.localize itself (in file order, as
    its fold rule wants). Same result as clock.localize."""
    from forensics import clock

    name = naive.name
    naive = naive.cast(pl.Datetime("us"))
    # a damaged stamp (year 7, -2026) is no time; Python datetimes would not even hold some
    naive = naive.to_frame("t").select(pl.when(pl.col("t").dt.year().is_between(1970, 2200)).then(pl.col("t")))
    naive = naive.to_series().alias(name)
    if zone in getattr(clock, "UTC_NAMES", ("UTC", "Etc/UTC", "Z")):
        return naive.dt.replace_time_zone("UTC")
    minutes = naive.dt.truncate("1m")
    uniq = minutes.unique().drop_nulls()
    earliest = uniq.dt.replace_time_zone(zone, ambiguous="earliest", non_existent="null")
    latest = uniq.dt.replace_time_zone(zone, ambiguous="latest", non_existent="null")
    clean = (earliest == latest).fill_null(False)
    offsets = pl.DataFrame({
        "m": uniq,
        "off": (earliest.dt.convert_time_zone("UTC").dt.replace_time_zone(None) - uniq),
    }).filter(clean)
    frame = pl.DataFrame({"n": naive, "m": minutes}).join(offsets, on="m", how="left", maintain_order="left")
    out = (frame["n"] + frame["off"]).dt.replace_time_zone("UTC")
    awkward_days = uniq.filter(~clean).dt.date().unique()
    if awkward_days.len():
        days = naive.dt.date()
        sel = days.is_in(awkward_days.implode()).fill_null(False)
        sub = pl.DataFrame({"n": naive.filter(sel)}).select(clock.localize(pl.col("n"), zone))
        out = out.scatter(sel.arg_true(), sub.to_series())
    return out.alias(naive.name)


# -- time ---------------------------------------------------------------------------------------

def asctime_expr(text: pl.Expr) -> pl.Expr:
    """`Sat Jan 25 22:19:18 2025` / `Sun Dec  1 15:30:44 2019` -> naive Datetime (null otherwise)."""
    norm = text.str.strip_chars().str.replace_all(r"\s+", " ")
    return norm.str.strptime(pl.Datetime("us"), "%a %b %d %H:%M:%S %Y", strict=False)


# -- driver errors ------------------------------------------------------------------------------

def driver_error_events(lines: pl.DataFrame, time: pl.Expr | None = None) -> pl.DataFrame:
    """`driver_error` events for nvidia-smi's error lines (`lines` holds only those lines)."""
    if lines.height == 0:
        return events_frame(None)
    text = pl.col("text").str.strip_chars()
    reason = text.str.extract(r":\s*([^:]+?)\.?\s*$", 1)
    bus = text.str.extract(r"(?i)device handle for (?:GPU\s*)?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])", 1)
    df = lines.with_columns(
        pl.lit("driver_error").alias("kind"),
        norm_bus_expr(bus).alias("gpu"),
        pl.struct(text.alias("message"), reason.alias("reason")).struct.json_encode().alias("detail"),
        text.alias("text"),
        *([time.alias("time")] if time is not None else []),
    )
    return events_frame(df)


def time_after_previous_row(errors: pl.DataFrame, rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.Expr | None]:
    """An error line has no clock of its own: it happened after the reading just above it. Returns
    the error lines with that time as `prev_time`, and the expression for it (None when untimed)."""
    if errors.height == 0 or rows.height == 0 or rows["time"].null_count() == rows.height:
        return errors, None
    timed = rows.select("line", pl.col("time").alias("prev_time")).sort("line")
    return errors.sort("line").join_asof(timed, on="line", strategy="backward"), pl.col("prev_time")


# -- sections: which nvidia-smi format comes first ------------------------------------------------

DMON_HEADER_RE = re.compile(r"^\s*#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+\S")
DMON_UNITS_RE = re.compile(r"^\s*#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b")
_TABLE_RE = re.compile(r"^\s*\|\s*(?:NVIDIA-SMI\s+[0-9]|GPU\s+Name\s|Processes:|MIG devices:|GPU\s+GI\s+CI\s+MIG\b)")
# nvitop's own banner: nvitop -1 --ascii redraws this table with the same | and + (parsers/metrics/nvitop.py)
_OTHER_TOOL_RE = re.compile(r"^\s*[|│]\s*NVITOP\s+[0-9]")
_TABLE_ROW = re.compile(f"(?:{TABLE_MEM_ROW_RE})|(?:{TABLE_PROC_ROW_RE})")
_QUERY_RE = re.compile(r"^\s*(?:=+NVSMI LOG=+\s*$|<nvidia_smi_log>|<!DOCTYPE nvidia_smi_log|Timestamp\s+: [A-Z][a-z]{2} )")
_PROMPT = re.compile(PROMPT_RE)
_SEPARATOR = re.compile(SEPARATOR_RE)
_DRIVER_ERROR = re.compile(DRIVER_ERROR_RE)
_JUNK = re.compile("|".join([COMMENT_RE, DATE_LINE_RE, WATCH_RE, TABLE_BORDER_RE, r"^\s*$", r"^\s*<\?xml "]))

# names and commas, possessive (*+): a run of blanks is scanned once, not once per split (issue 45 D-R1)
GPU_QUERY_RE = re.compile(r"--query-gpu[= ]\s*+([\w.]++(?:\s*+,\s*+[\w.]++)*+)(?=\s+-|\s*$)")
APPS_QUERY_RE = re.compile(r"--query-compute-apps[= ]\s*+([\w.]++(?:\s*+,\s*+[\w.]++)*+)(?=\s+-|\s*$)")

# Known --query-gpu property names (and prefixes), from `nvidia-smi --help-query-gpu`.
GPU_PROPS = {
    "timestamp", "driver_version", "count", "name", "serial", "uuid", "pci.bus_id", "pci.domain", "pci.bus",
    "pci.device", "pci.device_id", "pci.sub_device_id", "index", "display_mode", "display_active",
    "persistence_mode", "accounting.mode", "accounting.buffer_size", "driver_model.current",
    "driver_model.pending", "vbios_version", "fan.speed", "pstate", "compute_mode", "compute_cap",
    "power.management", "power.draw", "power.limit", "enforced.power.limit", "power.default_limit",
    "power.min_limit", "power.max_limit", "memory.total", "memory.used", "memory.free", "memory.reserved",
    "utilization.gpu", "utilization.memory", "temperature.gpu", "temperature.memory", "gpu_name",
    "gpu_bus_id", "gpu_uuid", "gpu_serial", "addressing_mode", "platform.chassis_serial_number",
}
GPU_PROP_PREFIXES = (
    "memory.", "utilization.", "temperature.", "clocks.", "clocks_", "power.", "pcie.", "pci.", "ecc.", "fan.",
    "encoder.", "retired_pages.", "inforom.", "mig.", "gom.", "remapped_rows.", "fabric.", "protected_memory.",
    "driver_model.", "accounting.", "reset_status.", "gpu_operation_mode.", "enforced.", "module_power.",
)
# The unmistakably nvidia-smi ones (a header of only "index, name" could be anything's)
_DISTINCT = re.compile(r"^(?:memory|utilization|temperature|clocks|clocks_\w+|power|pcie|pci|ecc|fan|encoder"
                       r"|retired_pages|inforom|mig|enforced)\.|^(?:driver_version|pstate|vbios_version|compute_mode"
                       r"|persistence_mode|gpu_bus_id|gpu_uuid|gpu_name)$")
APPS_PROPS = {"timestamp", "gpu_name", "gpu_bus_id", "gpu_serial", "gpu_uuid", "pid", "process_name", "name",
              "used_gpu_memory", "used_memory"}
HEADER_FIELD = r"[a-z_][a-z0-9_.]*(?:\s*\[[^\]]*\])?"
HEADER_LINE_RE = r"^\s*" + HEADER_FIELD + r"(?:, " + HEADER_FIELD + r")*\s*$"
_HEADER_LINE = re.compile(HEADER_LINE_RE)


def header_names(line: str) -> list[tuple[str, str | None]]:
    """`memory.used [MiB]` -> ("memory.used", "MiB"); names as printed (aliases not applied)."""
    out = []
    for f in line.strip().split(", "):
        m = re.match(r"^(.*?)\s*\[(.*)\]$", f.strip())
        out.append((m.group(1).lower(), m.group(2)) if m else (f.strip().lower(), None))
    return out


def header_kind(line: str) -> str | None:
    """"gpu" for a --query-gpu header, "apps" for a --query-compute-apps header, else None."""
    if not _HEADER_LINE.match(line):
        return None
    names = [n for n, _ in header_names(line)]
    if any(n in ("pid", "process_name", "used_gpu_memory", "used_memory") for n in names) and all(
        n in APPS_PROPS for n in names
    ):
        return "apps"
    if "gpu_uuid" in names and len(names) <= 3 and all(n in APPS_PROPS for n in names) and "process_name" in names:
        return "apps"
    known = [n in GPU_PROPS or n.startswith(GPU_PROP_PREFIXES) for n in names]
    if sum(known) >= max(1, len(names) - 1) and any(_DISTINCT.search(n) for n in names):
        return "gpu"
    return None


def query_list(line: str, kind: str) -> list[str] | None:
    """The property list of a `--query-gpu=...` / `--query-compute-apps=...` command line."""
    m = (GPU_QUERY_RE if kind == "gpu" else APPS_QUERY_RE).search(line)
    if not m:
        return None
    names = [n.strip().lower() for n in re.split(r"[,\s]+", m.group(1)) if n.strip()]
    return names or None


def line_class(line: str) -> str:
    """One head line -> query | table | table-row | dmon | gpu-header | apps-header | gpu-row | apps-row |
    gpu-prompt | apps-prompt | error | junk | other-tool | unknown."""
    if _OTHER_TOOL_RE.match(line):
        return "other-tool"
    if _QUERY_RE.match(line):
        return "query"
    if _TABLE_RE.match(line):
        return "table"
    if _TABLE_ROW.match(line):
        return "table-row"
    if DMON_HEADER_RE.match(line):
        return "dmon"
    if _PROMPT.match(line):
        if "--query-gpu" in line:
            return "gpu-prompt"
        if "--query-compute-apps" in line:
            return "apps-prompt"
        return "junk"
    if _DRIVER_ERROR.match(line):
        return "error"
    hk = header_kind(line)
    if hk:
        return hk + "-header"
    kinds = row_kinds(line)
    if kinds is not None:
        if is_gpu_row(kinds):
            return "gpu-row"
        if apps_row_roles(kinds):
            return "apps-row"
    if _SEPARATOR.match(line) or _JUNK.match(line):
        return "junk"
    return "unknown"


_SECTION_OF = {
    "query": "nvidia-smi-q", "table": "nvidia-smi-table", "table-row": "nvidia-smi-table", "dmon": "nvidia-smi-dmon",
    "gpu-header": "nvidia-smi-csv", "gpu-row": "nvidia-smi-csv", "apps-header": "nvidia-smi-apps",
    "apps-row": "nvidia-smi-apps",
}
_WHY = {
    "query": "nvidia-smi -q report", "table": "nvidia-smi table",
    "table-row": "nvidia-smi table rows without their box (grep'd)", "dmon": "nvidia-smi dmon/pmon header",
    "gpu-header": "nvidia-smi --query-gpu CSV header", "gpu-row": "headerless nvidia-smi --query-gpu CSV rows",
    "apps-header": "nvidia-smi --query-compute-apps CSV header",
    "apps-row": "headerless nvidia-smi --query-compute-apps CSV rows",
}
MAX_UNKNOWN_BEFORE = 3


def first_section(head: list[str]) -> tuple[str | None, str]:
    """The nvidia-smi format of a file's first real section, and why (None when it has none).

    Blank lines, comments (the `# source:` provenance line), prompts, separators and driver error lines
    before it are passed over; so are up to three lines of anything else."""
    unknown = 0
    errors = 0
    prompt: tuple[str, list[str]] | None = None
    for i, line in enumerate(head):   # (the head: HEAD_LINES lines that are not blank)
        c = line_class(line)
        if c in ("gpu-prompt", "apps-prompt"):
            kind = c.split("-")[0]
            names = query_list(line, kind)
            prompt = (kind, names) if names else None
            continue
        if c == "other-tool":
            return None, ""
        if c in _SECTION_OF:
            return _SECTION_OF[c], f"{_WHY[c]} at line {i + 1}"
        if prompt and c in ("unknown", "junk") and ", " in line:
            # a --format=csv,noheader,nounits row right under the command that made it
            if len(strip_row(line).split(", ")) == len(prompt[1]):
                return ("nvidia-smi-csv" if prompt[0] == "gpu" else "nvidia-smi-apps",
                        f"rows of the nvidia-smi --query-{'gpu' if prompt[0] == 'gpu' else 'compute-apps'} "
                        f"command at line {i}")
        if c == "error":
            errors += 1
        elif c == "unknown":
            unknown += 1
            if unknown > MAX_UNKNOWN_BEFORE:
                break
    if errors and unknown == 0:
        return "nvidia-smi-csv", "nvidia-smi driver error lines"
    return None, ""


@functools.lru_cache(maxsize=1)   # the five nvidia-smi sniffers ask about the same head in turn
def _first_section_of(head: tuple[str, ...]) -> tuple[str | None, str]:
    return first_section(list(head))


def sniff_for(name: str, head: list[str]) -> str | None:
    fmt, why = _first_section_of(tuple(head))
    return why if fmt == name else None


# -- multi-section files ----------------------------------------------------------------------------

# The nvidia-smi parsers by format name, each a `parse_lines(df, path, opts, nested)`: each parser
# module registers itself (register_section), so this module imports none of them.
SECTION_READERS: dict = {}


def register_section(name: str, parse_lines) -> None:
    SECTION_READERS[name] = parse_lines


def hands_on(head: list[str], own: str) -> bool:
    """Whether the unusable lines that start with `head` (their first 200) go to another parser."""
    fmt, _ = first_section(head)
    return fmt is not None and fmt != own and fmt in SECTION_READERS


def count_rest(skipped, rest: pl.DataFrame) -> None:
    """Unusable lines (line, text, reason) counted as skipped, per reason."""
    per_reason = rest.group_by("reason", maintain_order=True).agg(pl.col("line").head(5), pl.len())
    for reason, first, n in per_reason.iter_rows():
        skipped.add_count(reason, n, first)


def parse_rest(rest: pl.DataFrame, path: str, opts, own: str) -> Parsed | None:
    """Lines the claiming parser could not use, read by the nvidia-smi parser whose format they are
    (a dmon log with a CSV section appended, a CSV with compute-apps rows pasted below). One level
    only: the other parser does not hand its own leftovers on again."""
    if rest.height == 0 or not hands_on(rest["text"].head(200).to_list(), own):
        return None
    fmt, _ = first_section(rest["text"].head(200).to_list())
    p = SECTION_READERS[fmt](rest.select("line", "text"), path, opts, nested=True)
    if p.records:
        p.notes.insert(0, f"{p.records} records of a {fmt} section were read from lines the {own} parser could not use")
        return p
    return None


def finish(p: Parsed, rest: pl.DataFrame, path: str, opts, own: str, nested: bool) -> Parsed:
    """Count the unusable lines (`rest`: line, text, reason) as skipped, unless another nvidia-smi
    parser reads them; then merge what it found."""
    other = None if nested else parse_rest(rest, path, opts, own)
    if other is None:
        count_rest(p.skipped, rest)
        return p
    p.samples = pl.concat([p.samples, other.samples], how="vertical")
    p.events = pl.concat([p.events, other.events], how="vertical")
    p.skipped.merge(other.skipped)
    p.notes.extend(other.notes)
    if p.clock == "none":
        p.clock = other.clock
    for k, v in other.meta.items():
        if k not in p.meta:
            p.meta[k] = v
        elif k == "gpu_map" and isinstance(v, dict):
            p.meta[k] = {**v, **p.meta[k]}
        elif k == "gpus" and isinstance(v, list):
            p.meta[k] = p.meta[k] + [g for g in v if g not in p.meta[k]]
    return p


def classify_rest(rest: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Give the lines a parser could not use their reasons (blank, prompt, separator, comment, date
    line, or unrecognized; a CSV-looking row keeps "row does not fit the columns"), and split off
    nvidia-smi's driver error lines, which are evidence. Returns (rest, errors)."""
    if rest.height == 0:
        return rest, rest.select("line", "text")
    junk = junk_reason_expr(pl.col("text"))
    rest = rest.with_columns(
        pl.when(pl.col("text").str.contains(DRIVER_ERROR_RE)).then(pl.lit("driver error"))
        .when(pl.col("reason").is_in(["row does not fit the columns", "unrecognized line"]))
        .then(pl.when((junk == "unrecognized line") & (pl.col("reason") == "row does not fit the columns"))
              .then(pl.col("reason")).otherwise(junk))
        .otherwise(pl.col("reason")).alias("reason"))
    errors = rest.filter(pl.col("reason") == "driver error").select("line", "text")
    return rest.filter(pl.col("reason") != "driver error"), errors


def junk_reason_expr(text: pl.Expr) -> pl.Expr:
    """Why a line that is none of the format's own lines is skipped (vectorized)."""
    return (
        pl.when(text.str.strip_chars() == "").then(pl.lit("blank line"))
        .when(text.str.contains(PROMPT_RE)).then(pl.lit("shell prompt"))
        .when(text.str.contains(SEPARATOR_RE)).then(pl.lit("separator"))
        .when(text.str.contains(COMMENT_RE)).then(pl.lit("comment"))
        .when(text.str.contains(DATE_LINE_RE) | text.str.contains(WATCH_RE)).then(pl.lit("date line"))
        .otherwise(pl.lit("unrecognized line"))
    )
