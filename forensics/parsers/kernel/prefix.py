"""Shared by kernel.py and xid.py: the prefixes that tools put in front of a kernel message
(docs/formats.md §3.1), decoded column-wise, and lines rejoined into records.

`decode(lines, ...)` turns a `line`/`text` frame into one row per kernel record with `msg` (the kernel's
own text), `time` (UTC, when the prefix has a wall clock), `uptime` (seconds since boot, when a
`[ 1234.567890]` stamp is present — kept even next to a wall clock, so the timeline can infer the boot
time from lines that carry both), `host`, `family` (which prefix) and `text` (the evidence as printed).

Two decoding stages: stage 1 is the wall-clock prefix of the tool that stored the line (syslog,
journalctl, dmesg -T, dmesg --time-format iso, OpenWrt logread, Talos, Cloud Logging, CI stamps);
stage 2, applied to what is left, is the kernel's own `[uptime]` (with the CONFIG_PRINTK_CALLER tag
`[ T123]`, a `<4>` level, `dmesg -x` facility/level, or a user-trimmed `kernel: `).
"""
from __future__ import annotations

import functools

from dataclasses import dataclass, field

import polars as pl

from forensics import clock
from forensics.options import Options
from forensics.model import UTC_TIME, Skipped
from forensics.frames import rows_where

_PRI = r"(?:<[0-9]{1,3}>)?"
_ISO = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})"

# A letter in a stamp's weekday or month. Rust's \p{L} is dear to compile in each of these regexes,
# and polars keeps only its last 32 compiled regexes per thread (a job uses more), so they are
# compiled again for every file. This class (ASCII letters or any non-ASCII character) compiles far
# faster; `_stage1` then drops a match whose weekday or month holds a non-ASCII non-letter, which
# gives exactly the lines that \p{L} matched (each run is delimited by a space or dot either way).
LETTERISH = r"[^\x00-@\[-`{-\x7F]"
_LETTER_RUNS = ("wd", "mon")   # the captured runs of LETTERISH

# Stage 1, tried in this order. Each pattern matches only the prefix, captured whole as `pre` (the
# rest of the line is sliced off after it: capturing a trailing `.*` costs several times more).
STAGE1: tuple[tuple[str, str], ...] = (
    # Cloud Logging export as pretty JSON or YAML: `"textPayload": "[ 195998.4] node invoked ..."`
    ("gce-json", r'^\s*"?textPayload"?\s*:\s*(?P<val>.*?)\s*,?\s*$'),
    # talosctl dmesg: `192.168.11.119: kern: warning: [2026-04-22T21:27:51.291882381Z]: `
    ("talos", r"^(?P<pre>\s*(?P<host>[^\s:\[\]]+): [a-z]+: +[a-z]+: \[(?P<iso>" + _ISO + r")\]: ?)"),
    # dmesg -T / --ctime: `[Thu Dec  7 00:05:14 2017] `
    ("dmesg-T", r"^(?P<pre>\s*" + _PRI + r"\[(?P<wd>" + LETTERISH + r"{2,4})\.? (?P<mon>" + LETTERISH + r"{3,5}\.?) {1,2}(?P<day>[0-9]{1,2}) "
                r"(?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2}) (?P<year>[0-9]{4})\] ?)"),
    # OpenWrt logread: `Sun Jul 27 09:17:38 2025 kern.warn kernel: `
    ("openwrt", r"^(?P<pre>\s*(?P<wd>" + LETTERISH + r"{3}) (?P<mon>" + LETTERISH + r"{3}) {1,2}(?P<day>[0-9]{1,2}) (?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2}) (?P<year>[0-9]{4}) "
                r"[a-z]+\.[a-z]+ )"),
    # dmesg --time-format iso, journalctl -o short-iso[-precise], rsyslog RFC3339, CI stamps
    ("iso", r"^(?P<pre>\s*" + _PRI + r"(?P<iso>" + _ISO + r") )"),
    # CI / Jenkins style bracketed stamps: `[2024-01-15T18:10:29.216Z] `, zone optional
    ("ci", r"^(?P<pre>\s*\[(?P<ciso>[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?)(?P<zone>Z|[+-][0-9]{2}:?[0-9]{2})?\] ?)"),
    # RFC3164 syslog / journalctl short (also localized, lowercase months): `May 15 23:09:30 `
    ("syslog", r"^(?P<pre>\s*" + _PRI + r"(?P<mon>" + LETTERISH + r"{3,5}\.?) {1,2}(?P<day>[0-9]{1,2}) (?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?) )"),
    # journalctl -o short-full: `Fri 2023-09-08 17:20:30 CEST `
    ("journal-full", r"^(?P<pre>\s*(?P<wd>" + LETTERISH + r"{2,4})\.? (?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}) (?P<hms>[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?) "
                     r"(?P<zone>[A-Za-z]{2,5}|[+-][0-9]{4}) )"),
    # journalctl -o short-unix: `1694186430.655028 `
    ("unix", r"^(?P<pre>\s*(?P<epoch>[0-9]{9,10}\.[0-9]{1,6}) )"),
)
# families whose rest must be `host ident[pid]: msg` to count (else the stamp is not a log prefix)
_NEEDS_HOST = {"syslog", "journal-full", "unix"}
_HOST_IDENT = r"^(?P<pre>(?P<host>[^\s\[]\S*) (?P<ident>[^\s:\[\]]+)(?:\[[0-9]+\])?: ?)"
_IDENT = r"^(?P<pre>(?P<ident>[^\s:\[\]]+)(?:\[[0-9]+\])?: ?)"

# Stage 2: the kernel's own prefix (always 6 decimals, so `[0.5]` in an app log is not one). The `[`
# may be lost when a paste starts mid-line (kernlog_oom_14).
STAGE2 = (
    r"^(?P<pre>\s*" + _PRI + r"(?:[a-z]+ *:[a-z]+ *: )?(?P<kern>kernel: )?"
    r"(?:\[\s*(?P<up>[0-9]+\.[0-9]{6})\]|(?P<up2>[0-9]+\.[0-9]{6})\])?(?:\[\s*(?P<caller>[A-Z][0-9]+)\])? ?)"
)

# Lines that are not log content: provenance, paste separators, shell prompts, elisions.
JUNK = r"^\s*# source:|^\s*-{3,}.*-{3,}\s*$|^\s*\$ |^\s*(?:\.\.\.|…)\s*$"
# An unstamped, unindented line that starts like this is its own record, not a wrapped tail.
_LOOKS_LIKE_START = (
    r"^(?:NVRM:|kernel:|Out of [Mm]emory|Killed process|oom-kill:|oom_reaper:|Memory cgroup|Task in |"
    r"Tasks state|\[|#|\S+(?: \S+)? invoked oom-killer:|CPU: [0-9]|Call Trace|Hardware name:)"
)
_TIMESTAMP_LINE = r'^\s*"?timestamp"?\s*:\s*["\']?(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}T[^"\',\s]+)["\']?\s*,?\s*$'

FAMILY_CLOCK = {
    "dmesg": "uptime", "dmesg-T": "wall-assumed", "dmesg-iso": "wall", "syslog-iso": "wall", "iso": "wall",
    "syslog": "wall-yearless", "journal-full": "wall-assumed", "unix": "wall", "openwrt": "wall-assumed",
    "talos": "wall", "gce-json": "wall", "ci": "wall", "ci-local": "wall-assumed", "trimmed": "none",
}
FAMILY_DESCRIPTION = {
    "dmesg": "dmesg lines with [uptime] stamps",
    "dmesg-T": "dmesg -T lines ([Www Mmm dd HH:MM:SS YYYY])",
    "dmesg-iso": "dmesg --time-format iso lines",
    "syslog-iso": "syslog/journal lines with RFC3339 stamps (host ident:)",
    "iso": "ISO-8601 stamped lines",
    "syslog": "syslog/journalctl lines (Mmm dd HH:MM:SS host ident:)",
    "journal-full": "journalctl -o short-full lines",
    "unix": "journalctl -o short-unix lines",
    "openwrt": "OpenWrt logread lines",
    "talos": "talosctl dmesg lines",
    "gce-json": "Cloud Logging export with kernel textPayload",
    "ci": "CI-stamped lines",
    "ci-local": "CI-stamped lines without a zone",
    "trimmed": "user-trimmed 'kernel:' lines",
}
# Prefix families that mark a system log on their own (sniffing); `iso`/`ci` need kernel content.
SYSTEM_FAMILIES = {"dmesg", "dmesg-T", "dmesg-iso", "syslog-iso", "syslog", "journal-full", "unix", "openwrt", "talos"}

PAGE_BYTES = 4096


@dataclass
class Decoded:
    records: pl.DataFrame          # line, text, msg, time, uptime, host, ident, family
    clock: str = "none"
    skipped: Skipped = field(default_factory=Skipped)
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    # most records carry a prefix: a record without one is odd (counted by the parsers if unused)
    mostly_stamped: bool = False

    def kernel_records(self) -> pl.DataFrame:
        """Records the kernel wrote: a syslog line tagged by another program (dockerd, a job's own
        logger echoing an Xid) does not count as the kernel saying it."""
        return rows_where(self.records, pl.col("ident").is_null() | pl.col("ident").is_in(["kernel", "kern"]))

    def unused_unstamped(self, used_lines: set[int]) -> list[int]:
        if not self.mostly_stamped:
            return []
        bare = self.records.filter(pl.col("family").is_null())["line"].to_list()
        return [n for n in bare if n not in used_lines]


_STAGE1_ROWS = 100_000   # lines per stage-1 query: its working columns peak at ~60 MB

_S1_COLUMNS = ("rest", "val", "iso", "ciso", "zone", "mon", "day", "hms", "year", "date", "epoch", "host")


def _stage1(df: pl.DataFrame) -> pl.DataFrame:
    """Stage-1 columns (`s1` family, `rest`, stamp parts, `s1host`) for the `t` column: each line's
    family is the first in STAGE1 order whose regex matches it (and, for _NEEDS_HOST, whose rest
    reads `host ident:`). One query says which families some line matches (all are anchored, so a
    family that does not fit fails on the first characters), one more extracts those families'
    captures on every line: a small file's lines cost a few polars calls, not a few per family.
    Those captures of a line exist at once (up to ~0.6 kB a line), so a big decode goes by slices of
    lines (each line's family depends on that line alone)."""
    if df.height > _STAGE1_ROWS:
        return pl.concat([_stage1(df.slice(at, _STAGE1_ROWS)) for at in range(0, df.height, _STAGE1_ROWS)])
    t = pl.col("t")
    # capture groups cost ~10x a plain match: only the families that some line matches are extracted
    # (a file holds one or two; a family no line matches is never a line's family)
    matched = df.select(t.str.contains(rx).any().alias(str(i)) for i, (_, rx) in enumerate(STAGE1)).row(0)
    present = [i for i, hit in enumerate(matched) if hit]
    if not present:
        return df.with_columns(pl.lit(None, dtype=pl.String).alias("s1"),
                               *[pl.lit(None, dtype=pl.String).alias("s1host" if c == "host" else c) for c in _S1_COLUMNS])
    g = df.select("line", "t", *[t.str.extract_groups(STAGE1[i][1]).alias(f"_g{i}") for i in present])
    g = g.with_columns(
        t.str.slice(pl.col(f"_g{i}").struct.field("pre").str.len_chars()).alias(f"_rest{i}")
        for i in present if STAGE1[i][0] != "gce-json")
    ok = {}
    for i in present:
        fam = STAGE1[i][0]
        hit = pl.col(f"_g{i}").struct.field("val" if fam == "gce-json" else "pre").is_not_null()
        if fam in _NEEDS_HOST:
            hit = hit & pl.col(f"_rest{i}").str.contains(_HOST_IDENT).fill_null(False)
        ok[i] = hit
    parts = {i: {f.name for f in g.schema[f"_g{i}"].fields} for i in present}   # each family's groups
    ok = _letters_only(g, ok, parts)
    fam_of = pl.coalesce([pl.when(hit).then(pl.lit(i, dtype=pl.Int32)) for i, hit in ok.items()])
    g = g.with_columns(fam_of.alias("_fam"))

    def field(c: str) -> pl.Expr:
        """Column c of each line's family (null where that family has no such part)."""
        picks = []
        for i in present:
            if c == "rest" and STAGE1[i][0] != "gce-json":
                picks.append(pl.when(pl.col("_fam") == i).then(pl.col(f"_rest{i}")))
            elif c != "rest" and c in parts[i]:
                picks.append(pl.when(pl.col("_fam") == i).then(pl.col(f"_g{i}").struct.field(c)))
        return pl.coalesce(picks) if picks else pl.lit(None, dtype=pl.String)

    family = pl.coalesce([pl.when(pl.col("_fam") == i).then(pl.lit(STAGE1[i][0])) for i in present])
    found = g.select(family.alias("s1"), *[field(c).alias("s1host" if c == "host" else c) for c in _S1_COLUMNS])
    return df.with_columns(found.get_columns())


def _letters_only(g: pl.DataFrame, ok: dict[int, pl.Expr], parts: dict[int, set[str]]) -> dict[int, pl.Expr]:
    """`ok` per family, less the lines whose weekday or month run (LETTERISH) is not all letters.
    Only a file with non-ASCII text can hold such a run: the check is skipped for the others."""
    if (g["t"].str.len_bytes() == g["t"].str.len_chars()).all():
        return ok
    out = {}
    for i, hit in ok.items():
        for run in _LETTER_RUNS:
            if run in parts[i]:
                values = g.select(pl.col(f"_g{i}").struct.field(run).filter(ok[i]))[:, 0]
                odd = _not_letters(values)
                if odd:
                    hit = hit & ~pl.col(f"_g{i}").struct.field(run).is_in(odd).fill_null(False)
        out[i] = hit
    return out


def _not_letters(runs: pl.Series) -> list[str]:
    """The distinct LETTERISH runs (one trailing dot allowed) that are not all letters (\\p{L}:
    Python's isalpha is the same Unicode category L). Few values per file; ASCII ones are letters."""
    return [v for v in runs.drop_nulls().unique().to_list()
            if not v.isascii() and not (v[:-1] if v.endswith(".") else v).isalpha()]


def _unquote_payload(val: pl.Expr) -> pl.Expr:
    """A JSON/YAML string value -> its text (JSON escapes decoded, the kernel's CR/LF dropped)."""
    as_json = pl.concat_str([pl.lit('{"v":'), val, pl.lit("}")]).str.json_path_match("$.v")
    single = val.str.strip_prefix("'").str.strip_suffix("'").str.replace_all("''", "'", literal=True)
    out = (
        pl.when(val.str.starts_with('"')).then(as_json)
        .when(val.str.starts_with("'")).then(single)
        .otherwise(val)
    )
    return out.str.strip_chars_end("\r\n").str.replace_all(r"\\r\\n$", "")


def line_columns(lines: pl.DataFrame) -> pl.DataFrame:
    """Per line: the cleaned text `t`, stage-1 and stage-2 parts, `msg`, `uptime`, `stamped`, `junk`."""
    df = lines.select(
        pl.col("line"),
        # Terminal hard-wrapping pads the broken line with spaces (kernlog_oom_01/16): drop trailing
        # blanks and any run of 20+ spaces inside a line (kernel messages never contain one).
        pl.col("text").fill_null("").str.strip_chars_end().str.replace_all(r"(\S) {20,}", "${1}").alias("t"),
    )
    df = _stage1(df)
    # the steps below are one lazy query, where each eager step was a query of its own (a fixed cost
    # per step, paid by every sniffed head and small log)
    payload = df["s1"].eq("gce-json").any()
    df = df.lazy()
    # Cloud Logging pretty JSON/YAML: the value is a JSON string; its time is on a `timestamp` line.
    df = df.with_columns(
        pl.when(pl.col("s1") == "gce-json").then(_unquote_payload(pl.col("val"))).otherwise(pl.col("rest")).alias("rest"),
        pl.col("t").str.extract(_TIMESTAMP_LINE, 1).alias("ts_line"),
    )
    if payload:
        df = _pair_payload_timestamps(df.collect()).lazy()
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("ts_pair"))
    # host/ident after syslog-like stamps; a comma before the fraction means dmesg --time-format iso
    needs_hi = pl.col("s1").is_in(["syslog", "journal-full", "unix", "iso"])
    df = df.with_columns(
        pl.when(needs_hi).then(pl.col("rest").str.extract_groups(_HOST_IDENT)).alias("_hi"),
        pl.when(pl.col("s1") == "openwrt").then(pl.col("rest").str.extract_groups(_IDENT)).alias("_id"),
    )
    hi_msg = pl.col("rest").str.slice(pl.col("_hi").struct.field("pre").str.len_chars())
    id_msg = pl.col("rest").str.slice(pl.col("_id").struct.field("pre").str.len_chars())
    iso_comma = pl.col("iso").str.contains(r"T[0-9]{2}:[0-9]{2}:[0-9]{2},")
    df = df.with_columns(
        pl.when(pl.col("s1") == "iso")
        .then(pl.when(iso_comma).then(pl.lit("dmesg-iso"))
              .when(hi_msg.is_not_null()).then(pl.lit("syslog-iso"))
              .otherwise(pl.lit("iso")))
        .when((pl.col("s1") == "ci") & pl.col("zone").is_null()).then(pl.lit("ci-local"))
        .otherwise(pl.col("s1")).alias("s1"),
        pl.when(pl.col("s1").is_in(["syslog", "journal-full", "unix"]) | ((pl.col("s1") == "iso") & ~iso_comma))
        .then(pl.col("_hi").struct.field("host")).otherwise(pl.col("s1host")).alias("host"),
        pl.when(pl.col("s1").is_in(["syslog", "journal-full", "unix"]) | ((pl.col("s1") == "iso") & ~iso_comma & hi_msg.is_not_null()))
        .then(hi_msg)
        .when(pl.col("s1") == "openwrt").then(pl.coalesce(id_msg, pl.col("rest")))
        .when(pl.col("s1").is_not_null()).then(pl.col("rest"))
        .otherwise(pl.col("t")).alias("after1"),
        # the program that logged the line (syslog tag): only `kernel` lines carry kernel facts
        pl.when(hi_msg.is_not_null() & ~iso_comma.fill_null(False)).then(pl.col("_hi").struct.field("ident"))
        .when(pl.col("s1") == "openwrt").then(pl.col("_id").struct.field("ident")).alias("ident"),
    )
    df = df.drop("_hi", "_id").with_columns(pl.col("after1").str.extract_groups(STAGE2).alias("_s2"))
    s2 = pl.col("_s2")
    df = df.with_columns(
        # an uptime of more digits than any boot lasts (garbage, or inf) is no uptime
        pl.coalesce(s2.struct.field("up"), s2.struct.field("up2")).cast(pl.Float64, strict=False)
        .pipe(lambda up: pl.when(up < 1e10).then(up)).alias("uptime"),
        s2.struct.field("kern").is_not_null().alias("kern"),
        pl.coalesce(pl.col("after1").str.slice(s2.struct.field("pre").str.len_chars()), pl.col("after1")).alias("msg"),
        pl.col("t").str.contains(JUNK).alias("junk"),
    )
    family = (
        pl.when(pl.col("s1").is_not_null()).then(pl.col("s1"))
        .when(pl.col("uptime").is_not_null()).then(pl.lit("dmesg"))
        .when(pl.col("kern")).then(pl.lit("trimmed"))
    )
    df = df.drop("_s2").with_columns(family.alias("family"))
    return df.with_columns((pl.col("family").is_not_null() & ~pl.col("junk")).alias("stamped")).collect()


def _pair_payload_timestamps(df: pl.DataFrame) -> pl.DataFrame:
    """Give each textPayload line the `timestamp` of its own log entry: the one after it when the
    export puts `timestamp` after `textPayload` (gcloud sorts keys), else the one before it."""
    is_payload = (pl.col("s1") == "gce-json").fill_null(False)
    df = df.with_columns(is_payload.cast(pl.Int64).cum_sum().alias("_pk"))
    first_payload = df.filter(is_payload)["line"].min()
    first_ts = df.filter(pl.col("ts_line").is_not_null())["line"].min()
    ts_after = first_ts is not None and first_payload is not None and first_ts > first_payload
    per_group = df.filter(pl.col("ts_line").is_not_null()).group_by("_pk").agg(
        pl.col("ts_line").first().alias("first_ts"), pl.col("ts_line").last().alias("last_ts"))
    if ts_after:
        df = df.join(per_group.select("_pk", pl.col("first_ts").alias("ts_pair")), on="_pk", how="left")
    else:
        df = df.join(per_group.select((pl.col("_pk") + 1).alias("_pk"), pl.col("last_ts").alias("ts_pair")),
                     on="_pk", how="left")
    return df.sort("line").with_columns(
        pl.when(is_payload).then(pl.col("ts_pair")).otherwise(None).alias("ts_pair")).drop("_pk")


_KEEP = ["s1", "family", "host", "ident", "iso", "ciso", "zone", "mon", "day", "hms", "year", "date", "epoch",
         "ts_pair", "uptime"]


def join_records(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Rejoin continuation lines onto the record they belong to.

    Indented unstamped lines after a stamped line (multi-line kernel messages, xid_01/02) join with a
    space; unindented unstamped lines that do not start like a kernel message are the tail of a line
    a terminal hard-wrapped mid-token (kernlog_oom_14/17) and join with nothing. Files without any
    stamps (user-trimmed pastes) keep one record per line. Returns the records and the line numbers
    of junk/blank lines."""
    blank = pl.col("t").str.strip_chars() == ""
    indented = pl.col("t").str.contains(r"^\s")
    continuable = ~pl.col("stamped") & ~pl.col("junk") & ~blank & (
        indented | ~pl.col("t").str.contains(_LOOKS_LIKE_START))
    df = df.with_columns(blank.alias("blank"), indented.alias("indented"), continuable.alias("cont"))
    starts = ~pl.col("cont")
    df = df.with_columns(starts.cast(pl.Int64).cum_sum().alias("_grp"))
    # a group is a start line and the continuable lines after it; it is one record only when its
    # start line is stamped, else each line stands alone
    joined = pl.when(starts).then(pl.col("stamped")).forward_fill()
    df = df.with_columns(
        (pl.col("cont") & joined).alias("is_cont"),
        pl.when(joined).then(pl.col("_grp")).otherwise(-pl.col("line")).alias("_rec"),
    )
    dropped = rows_where(df, pl.col("junk") | pl.col("blank"))["line"]
    body = rows_where(df, ~pl.col("junk") & ~pl.col("blank"))
    if not body["is_cont"].any():
        return body.select("line", pl.col("t").alias("text"), "msg", *_KEEP), dropped
    body = body.with_columns(
        pl.when(~pl.col("is_cont")).then(pl.col("msg"))
        .when(pl.col("indented")).then(pl.lit(" ") + pl.col("t").str.strip_chars())
        .otherwise(pl.col("t")).alias("_piece"),
        pl.when(~pl.col("is_cont")).then(pl.col("t"))
        .when(pl.col("indented")).then(pl.lit("\n") + pl.col("t"))
        .otherwise(pl.col("t")).alias("_raw"),
    )
    out = body.group_by("_rec", maintain_order=True).agg(
        pl.col("line").first(),
        pl.col("_raw").str.join("").alias("text"),
        pl.col("_piece").str.join("").alias("msg"),
        *[pl.col(c).first() for c in _KEEP],
    )
    return out.drop("_rec"), dropped


def _naive(date: pl.Expr, hms: pl.Expr) -> pl.Expr:
    return pl.concat_str([date, pl.lit(" "), hms]).str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")


def _ymd(year: pl.Expr, month: pl.Expr, day: pl.Expr) -> pl.Expr:
    return pl.concat_str([
        year.cast(pl.String), pl.lit("-"), month.cast(pl.String).str.zfill(2), pl.lit("-"),
        day.cast(pl.String).str.zfill(2)])


def _first_match(fam: pl.Expr, present: set[str], branches: list, dtype) -> pl.Expr:
    """`pl.when(fam in families & cond).then(value)...` over the branches (families, cond or None, value)
    whose families some row holds: polars computes every branch of a chain on every row, and a branch
    no row takes changes nothing. A null column when no branch is left."""
    chain = None
    for families, cond, value in branches:
        if present.isdisjoint(families):
            continue
        hit = fam.is_in(families) if cond is None else fam.is_in(families) & cond
        chain = pl.when(hit).then(value) if chain is None else chain.when(hit).then(value)
    return pl.lit(None, dtype=dtype) if chain is None else chain


def compute_times(rec: pl.DataFrame, opts: Options, path: str,
                  mtime: float | None) -> tuple[pl.DataFrame, list[str], str | None]:
    """`time` (UTC) for each record from its stage-1 parts; also notes and, for yearless syslog
    stamps, where their year came from (clock.syslog_years: --year, else the file's mtime)."""
    tz = opts.tz_for(path)
    notes: list[str] = []
    fam = pl.col("family")
    rec = rec.with_columns(clock.month_number(pl.col("mon")).alias("_month"))
    syslog_mask = rec["family"] == "syslog"
    rec = rec.with_columns(pl.lit(None, dtype=pl.Int32).alias("_year"))
    year_from = None
    if syslog_mask.any():
        sub = rec.filter(syslog_mask)
        mt = mtime if opts.year_from_mtime else None
        guess = clock.syslog_years(sub["_month"], sub["day"].cast(pl.Int32, strict=False), mtime=mt,
                                   year=opts.year, zone=tz)
        notes.extend(guess.notes)
        year_from = guess.how
        idx = rec.with_row_index("_i").filter(syslog_mask)["_i"]
        full = pl.Series("_year", [None] * rec.height, dtype=pl.Int32).scatter(idx, guess.years.cast(pl.Int32))
        rec = rec.with_columns(full)
    year = pl.coalesce(pl.col("year").cast(pl.Int32, strict=False), pl.col("_year"))
    # only the branches of the families present (a file holds one or two of them; the ISO ones run six
    # regex replaces each)
    present = set(rec["family"].drop_nulls().unique().to_list())
    journal_offset = pl.col("zone").str.contains(r"^[+-][0-9]{4}$")
    local_naive = _first_match(fam, present, [
        (["dmesg-T", "openwrt", "syslog"], None, _naive(_ymd(year, pl.col("_month"), pl.col("day")), pl.col("hms"))),
        (["journal-full"], ~pl.col("zone").is_in(["UTC", "GMT", "+0000"]) & ~journal_offset,
         _naive(pl.col("date"), pl.col("hms"))),
        (["ci-local"], None, pl.col("ciso").str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
         .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")),
    ], pl.Datetime("us"))
    aware = _first_match(fam, present, [
        (["dmesg-iso", "syslog-iso", "iso", "talos"], None, clock.parse_offset_datetime(pl.col("iso"))),
        (["ci"], None, clock.parse_offset_datetime(pl.col("ciso").str.replace(" ", "T", literal=True) + pl.col("zone"))),
        (["journal-full"], None,
         pl.when(journal_offset)
         .then(clock.parse_offset_datetime(pl.col("date") + pl.lit("T") + pl.col("hms") + pl.col("zone")))
         .when(pl.col("zone").is_in(["UTC", "GMT"]))
         .then(_naive(pl.col("date"), pl.col("hms")).dt.replace_time_zone("UTC"))),
        (["unix"], None, pl.from_epoch((pl.col("epoch").cast(pl.Float64, strict=False) * 1e6).round(0).cast(pl.Int64), "us")
         .dt.replace_time_zone("UTC")),
        (["gce-json"], None, clock.parse_offset_datetime(pl.col("ts_pair"))),
    ], UTC_TIME)
    rec = rec.with_columns(local_naive.alias("_naive"), aware.cast(UTC_TIME).alias("_aware"))
    rec = rec.with_columns(
        pl.coalesce(pl.col("_aware"), clock.localize(pl.col("_naive"), tz)).cast(UTC_TIME).alias("time"))
    if rec["family"].is_in(["dmesg-T", "openwrt", "syslog", "journal-full", "ci-local"]).any() and rec["_naive"].is_not_null().any():
        notes.append(f"local times without a zone are read as {tz}")
    if rec["family"].eq("dmesg-T").any():
        notes.append("dmesg -T times are computed by dmesg from the boot time and drift after a suspend")
    return rec.drop("_month", "_year", "_naive", "_aware"), notes, year_from


def decode(lines: pl.DataFrame, opts: Options, path: str, mtime: float | None, join: bool = True) -> Decoded:
    """Records with UTC times from a `line`/`text` frame (see the module doc)."""
    cols = line_columns(lines)
    skipped = Skipped()
    if join:
        rec, dropped = join_records(cols)
        junk_lines = cols.filter(pl.col("junk"))["line"]
        skipped.add_lines("not a log line (provenance, separator, shell prompt)", junk_lines)
    else:
        rec = cols.filter(~pl.col("junk")).select("line", pl.col("t").alias("text"), "msg", *_KEEP)
    rec, notes, year_from = compute_times(rec, opts, path, mtime)
    stamped = rec.filter(pl.col("family").is_not_null())
    mostly_stamped = stamped.height > 0 and stamped.height >= rec.height / 2
    clock_name = "none"
    meta: dict = {}
    if stamped.height:
        counts = stamped["family"].value_counts(sort=True)
        top = counts["family"][0]
        clock_name = FAMILY_CLOCK.get(top, "none")
        meta["prefixes"] = {f: int(n) for f, n in zip(counts["family"], counts["count"])}
    times = rec["time"].drop_nulls()
    if times.len():
        meta["first_time"] = times.min().isoformat().replace("+00:00", "Z")
        meta["last_time"] = times.max().isoformat().replace("+00:00", "Z")
    hosts = rec["host"].drop_nulls().unique(maintain_order=True).to_list()
    if hosts:
        meta["hosts"] = hosts[:20]
    if year_from:
        meta["year_from"] = year_from
    boots = boot_times(rec)
    if boots:
        meta["boots"] = boots
    return Decoded(records=rec.select("line", "text", "msg", "time", "uptime", "host", "ident", "family"),
                   clock=clock_name, skipped=skipped, notes=notes, meta=meta, mostly_stamped=mostly_stamped)


def boot_times(rec: pl.DataFrame) -> list[dict]:
    """Boot times implied by records that carry a wall clock and an uptime (kern.log), one per boot
    (a boot ends where the uptime goes backwards): the median of time - uptime."""
    both = rows_where(rec, pl.col("time").is_not_null() & pl.col("uptime").is_not_null())
    if both.height == 0:
        return []
    both = both.with_columns(
        (pl.col("uptime") < pl.col("uptime").shift(1)).fill_null(False).cast(pl.Int64).cum_sum().alias("_boot"),
        (pl.col("time").cast(pl.Int64) - (pl.col("uptime") * 1e6).cast(pl.Int64)).alias("_b"))
    out = []
    for (_, ), g in both.group_by(["_boot"], maintain_order=True):
        med = int(g["_b"].median())
        # a stamp with whole seconds was cut, not rounded: the mean true time is half a second later
        if (g["time"].dt.microsecond() == 0).all():
            med += 500_000
        t = pl.Series([med]).cast(pl.Datetime("us", "UTC"))[0]
        out.append({"boot_time": t.isoformat().replace("+00:00", "Z"), "first_line": int(g["line"][0]),
                    "last_line": int(g["line"][-1]), "lines": g.height})
    return out


# -- sniffing --------------------------------------------------------------------------------

def head_frame(head: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line": list(range(1, len(head) + 1)), "text": head},
                        schema={"line": pl.Int64, "text": pl.String})


def head_profile(head: list[str]) -> pl.DataFrame:
    """Per head line: family, msg, junk/blank (no joining, no times)."""
    return _head_profile(tuple(head))


@functools.lru_cache(maxsize=1)   # xid.sniff and kernel.sniff ask about the same head in turn
def _head_profile(head: tuple[str, ...]) -> pl.DataFrame:
    cols = line_columns(head_frame(list(head)))
    return cols.with_columns((pl.col("t").str.strip_chars() == "").alias("blank"))
