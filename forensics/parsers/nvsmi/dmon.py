"""`nvidia-smi dmon` and `nvidia-smi pmon` (docs/formats.md §1.3).

Two `#` header lines (names, then units), then whitespace-separated columns; `-` is "no value".
Columns are read by their header names, never by position: the set changes with `-s` and with the
driver. `-o D`/`-o T` add `Date` (YYYYMMDD) and `Time` (HH:MM:SS) columns, local time.

dmon: the `fb` column (unit MB, which is MiB) -> series `memory.used` per GPU (`gpu` = Idx).
pmon: one row per process; the frame-buffer column (`fb`, or `mem` when its unit is MB; with `-s u`
`mem` is a utilization % and is not memory) -> series `process.used` per pid, label = command.
A pmon row of `-` says the GPU has no process; it is counted, not a sample.
"""
from __future__ import annotations

import polars as pl

from forensics import clock
from forensics.options import Options
from forensics.model import Parsed, samples_frame
from forensics.io.sources import Source
from forensics.parsers.nvsmi import common as C
from forensics.frames import partitions, rows_where
from forensics.parsers.contract import Format

NAME = "nvidia-smi-dmon"

_NAMES = C.DMON_HEADER_RE.pattern
_UNITS = C.DMON_UNITS_RE.pattern


def sniff(head: list[str]) -> str | None:
    return C.sniff_for(NAME, head)


def parse(src: Source, opts: Options) -> Parsed:
    return parse_lines(src.frame(), src.path, opts)


def _columns(names_line: str, units_line: str | None) -> tuple[list[str], list[str | None]]:
    names = names_line.strip().lstrip("#").split()
    units = units_line.strip().lstrip("#").split() if units_line else []
    if len(units) != len(names):
        units = [None] * len(names)
    return [n.lower() for n in names], units


def parse_lines(df: pl.DataFrame, path: str, opts: Options, nested: bool = False) -> Parsed:
    p = Parsed()
    zone = opts.tz_for(path)
    df = df.select("line", "text").sort("line").with_columns(
        pl.col("text").str.contains(_NAMES).alias("is_names"),
        pl.col("text").str.contains(_UNITS).alias("is_units"),
    ).with_columns(
        # a header = a names line and the units line under it
        pl.when(pl.col("is_names")).then(
            pl.concat_str([pl.col("text").str.strip_chars(),
                           pl.when(pl.col("is_units").shift(-1)).then(pl.col("text").shift(-1).str.strip_chars())
                           .otherwise(pl.lit(""))], separator="\n")
        ).alias("header")
    ).with_columns(pl.col("header").forward_fill().alias("seg"))

    headers = df.filter(pl.col("is_names"))
    units_lines = rows_where(df, pl.col("is_units") & pl.col("is_names").shift(1).fill_null(False))
    rest_parts = [rows_where(df, pl.col("is_units") & ~pl.col("line").is_in(units_lines["line"].implode()))
                  .select("line", "text", pl.lit("comment").alias("reason"))]
    first = headers["line"].min()
    for line in headers["line"].to_list() + units_lines["line"].to_list():
        if first is not None and line not in (first, first + 1):
            p.skipped.add("repeated header", line)
    body = df.filter(~pl.col("is_names") & ~pl.col("is_units"))
    rest_parts.append(body.filter(pl.col("seg").is_null()).select("line", "text", pl.lit("unrecognized line").alias("reason")))

    samples, procs_gone = [], []
    timed_any, time_only = False, False
    for (seg,), part in partitions(body.filter(pl.col("seg").is_not_null()), "seg").items():
        names_line, _, units_line = seg.partition("\n")
        names, units = _columns(names_line, units_line or None)
        good, bad, gone, t_state = _read(part, names, units, zone)
        samples.append(good)
        rest_parts.append(bad)
        procs_gone.append(gone)
        timed_any |= t_state == "timed"
        time_only |= t_state == "time-only"
    rest = pl.concat(rest_parts, how="vertical")
    for g in procs_gone:
        p.skipped.add_lines("GPU without process (row of -)", g)

    rest = rest.with_columns(
        pl.when(pl.col("reason") == "unrecognized line").then(C.junk_reason_expr(pl.col("text")))
        .when(pl.col("reason") == "row does not fit the columns")
        .then(pl.when((C.junk_reason_expr(pl.col("text")) == "unrecognized line")
                      & pl.col("text").str.contains(r"^\s*[0-9]")).then(pl.col("reason"))
              .otherwise(C.junk_reason_expr(pl.col("text"))))
        .otherwise(pl.col("reason")).alias("reason"))
    errors = rows_where(rest, pl.col("text").str.contains(C.DRIVER_ERROR_RE))
    rest = rows_where(rest, ~pl.col("text").str.contains(C.DRIVER_ERROR_RE))
    p.skipped.add_lines("driver error", errors["line"])
    p.events = C.driver_error_events(errors)

    # (a header without a gpu column gives no rows, and no columns either)
    samples = [s for s in samples if s.height]
    rows = pl.concat(samples, how="vertical").sort("line") if samples else None
    if rows is not None and rows.height:
        key = pl.concat_str([pl.col("gpu").fill_null(""), pl.col("pid").cast(pl.String).fill_null("")], separator="|")
        rows = rows.with_columns(pl.int_range(1, pl.len() + 1).over(key).cum_max().alias("seq"))
        p.samples = samples_frame(rows)
        gpus = sorted({g for g in rows["gpu"].drop_nulls().to_list()}, key=lambda g: int(g) if g.isdigit() else 0)
        p.meta["gpus"] = [{"gpu": g, "index": g, "name": None, "uuid": None, "bus_id": None, "total_bytes": None}
                          for g in gpus]
    p.clock = "wall-assumed" if timed_any else "none"
    if time_only:
        p.notes.append("the Time column has no date (dmon -o T): rows are ordered by sample number; "
                       "use -o DT to log the date too")
    elif not timed_any and p.samples.height:
        p.notes.append("no Date/Time columns (dmon without -o DT): rows are ordered by sample number")
    return C.finish(p, rest, path, opts, NAME, nested)


def _read(part: pl.DataFrame, names: list[str], units: list[str | None], zone: str):
    """Rows of one header -> (samples, unusable rows, lines of '-' pmon rows, clock state)."""
    n = len(names)
    is_pmon = "pid" in names
    tok = pl.col("text").str.extract_all(r"\S+")
    df = part.with_columns(tok.alias("tok")).with_columns(pl.col("tok").list.len().alias("ntok"))
    last_is_command = names[-1] in ("command", "name")
    fits = (pl.col("ntok") >= n - (1 if last_is_command else 0)) if last_is_command else (pl.col("ntok") == n)
    fits = fits & (pl.col("ntok") > 0)

    def col(name: str) -> pl.Expr:
        return pl.col("tok").list.get(names.index(name), null_on_oob=True)

    gpu_name = "gpu" if "gpu" in names else None
    if gpu_name is None:
        return (part.head(0).select("line"), part.select("line", "text", pl.lit("row without a gpu column").alias("reason")),
                [], "none")
    gpu = col("gpu")
    fits = fits & gpu.str.contains(r"^[0-9]{1,4}$").fill_null(False)
    bad = rows_where(df, ~fits).select("line", "text", pl.lit("row does not fit the columns").alias("reason"))
    df = rows_where(df, fits)

    state = "none"
    if "date" in names and "time" in names:
        stamp = pl.concat_str([col("date"), col("time")], separator=" ")
        naive = stamp.str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
        df = df.with_columns(clock.localize(naive, zone).alias("time"))
        bad_time = df.filter(pl.col("time").is_null())
        bad = pl.concat([bad, bad_time.select("line", "text", pl.lit("unreadable timestamp").alias("reason"))])
        df = df.filter(pl.col("time").is_not_null())
        state = "timed"
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("time"))
        if "time" in names:
            state = "time-only"

    # the frame-buffer column: `fb`, or `mem` when its unit says MB (else it is a utilization %)
    mem_col = None
    for cand in ("fb", "mem"):
        if cand in names:
            unit = units[names.index(cand)]
            if unit is None and cand == "fb" or (unit or "").lower() in ("mb", "mib"):
                mem_col = cand
                break
    value = col(mem_col) if mem_col else pl.lit(None, dtype=pl.String)
    number = value.str.extract(r"^([0-9]+(?:\.[0-9]+)?)$", 1)
    from forensics.units import bytes_expr

    df = df.with_columns(gpu.alias("gpu"), bytes_expr(number, 1 << 20).alias("bytes"))
    gone: list[int] = []
    if is_pmon:
        pid = col("pid")
        no_proc = pid == "-"
        gone = df.filter(no_proc)["line"].to_list()
        df = df.filter(~no_proc)
        ok = pid.str.contains(r"^[0-9]{1,10}$")
        bad = pl.concat([bad, df.filter(~ok).select("line", "text", pl.lit("row does not fit the columns").alias("reason"))])
        df = df.filter(ok)
        command = pl.col("tok").list.slice(len(names) - 1).list.join(" ") if last_is_command else pl.lit(None, dtype=pl.String)
        df = df.with_columns(pid.cast(pl.Int64, strict=False).alias("pid"), pl.lit("process.used").alias("series"),
                             pl.when(command != "-").then(command).alias("label"))
    else:
        if mem_col is None:
            return df.head(0).select("line"), bad, gone, state
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("pid"), pl.lit("memory.used").alias("series"),
                             pl.lit(None, dtype=pl.String).alias("label"))
        # a `-` in fb is a reading the GPU does not give: null, kept; garbage is not a row
        okv = number.is_not_null() | (value == "-")
        bad = pl.concat([bad, rows_where(df, ~okv).select("line", "text", pl.lit("row does not fit the columns").alias("reason"))])
        df = rows_where(df, okv)
    out = df.select("line", "time", "gpu", "pid", "series", "bytes", "label")
    return out, bad, gone, state


C.register_section(NAME, parse_lines)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="`nvidia-smi dmon` / `pmon`",
    yields="frame-buffer use per GPU / process",
)
