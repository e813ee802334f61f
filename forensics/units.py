"""Byte units: every size becomes an integer number of bytes at parse time.

Binary prefixes (KiB, MiB, GiB) are 1024-based. The bare decimal-looking prefixes (KB, MB, GB) are
read as 1024-based too, because every tool we parse that prints them means that: nvidia-smi dmon's
"MB" column is MiB, DeepSpeed's "GB" is value/2**30, Megatron's "MB" is value/2**20, the HF Trainer's
"MB" is value >> 20, and the kernel's "kB" is KiB. A user's own print() may mean 10**6 instead; that
reading is off by at most 7.4% and does not change a trend's shape. The report states this choice.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # the vectorized forms import polars when used: the command line parses sizes without it
    import polars as pl

_FACTORS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
    "p": 1 << 50, "pb": 1 << 50, "pib": 1 << 50,
}

UNIT_RE = r"(?:[KMGTP]i?B|[kmgtp]i?b|[KMGTP]|B|bytes?)"
# `-?[\d,]*\.?\d+` and `\s*(unit)?\s*`, each written with one way to match: as written there, a
# digit run or a blank run could be split in every way (quadratic: 20 000 digits took seconds)
SIZE_RE = re.compile(r"^\s*(-?(?:[\d,]*\.\d+|[\d,]*\d))\s*(?:(" + UNIT_RE + r")\s*)?$")


def unit_factor(unit: str | None) -> int | None:
    if unit is None:
        return 1
    return _FACTORS.get(unit.strip().lower())


def to_bytes(value: float | str | None, unit: str | None = None) -> int | None:
    """`to_bytes(12.5, "MiB")` -> 13107200. Returns None for anything that is not a number."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.replace(",", "").strip()
        try:
            value = float(value)
        except ValueError:
            return None
    factor = unit_factor(unit)
    if factor is None or not math.isfinite(value):
        return None
    return int(round(value * factor))


def parse_size(text: str | None) -> int | None:
    """`"1.25 GiB"` -> 1342177280; `"4,092 bytes"` -> 4092; garbage -> None (never 0)."""
    if text is None:
        return None
    m = SIZE_RE.match(text)
    if not m:
        return None
    return to_bytes(m.group(1), m.group(2))


def factor_expr(unit: pl.Expr) -> pl.Expr:
    """Vectorized: a unit string column -> its byte factor (null for unknown units)."""
    import polars as pl

    return unit.str.strip_chars().str.to_lowercase().replace_strict(
        _FACTORS, default=None, return_dtype=pl.Int64
    )


def bytes_expr(number: pl.Expr, unit: pl.Expr | int) -> pl.Expr:
    """Vectorized: numeric text (thousands separators allowed) times unit -> Int64 bytes, null on garbage."""
    import polars as pl

    num = number.str.replace_all(",", "", literal=True).str.strip_chars().cast(pl.Float64, strict=False)
    factor = pl.lit(unit, dtype=pl.Int64) if isinstance(unit, int) else factor_expr(unit)
    return (num * factor).round(0).cast(pl.Int64, strict=False)


def human(n: int | float | None, digits: int = 2) -> str:
    """Bytes for people: 1536 MiB -> '1.50 GiB'."""
    if n is None:
        return "—"
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{sign}{n / factor:.{digits}f} {unit}"
    return f"{sign}{int(n)} B"


def rate_text(per_hour: float | None, span_seconds: float | None = None) -> str | None:
    """A growth rate in the unit that fits the job it was measured over: per second for a job of
    seconds, per minute for one of minutes, per hour, per day; "2.93 TiB/h" for a 20-second job
    would read as a quantity that never happened."""
    if per_hour is None or not math.isfinite(per_hour):
        return None
    span = span_seconds if span_seconds is not None and math.isfinite(span_seconds) else 3600.0 * 24
    if span < 120:
        return f"{human(per_hour / 3600.0)}/s"
    if span < 2 * 3600:
        return f"{human(per_hour / 60.0)}/min"
    if span < 3 * 86400:
        return f"{human(per_hour)}/h"
    return f"{human(per_hour * 24.0)}/day"


def seconds_text(seconds: float) -> str:
    """A span for people: "4 s", "12 min", "3.5 h"."""
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def elapsed_text(seconds: float) -> str:
    """How long before: "40 s", "12 min", "5.2 h", "3.1 days"."""
    h = seconds / 3600.0
    if h < 1 / 60:
        return f"{seconds:.0f} s"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} days"
