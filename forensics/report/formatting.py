"""Values as people read them, for every output (HTML, Markdown, the scan index, compare, the terminal):
clipped log text, plain data, natural order, durations, rates, instants in a zone, verdict words."""
from __future__ import annotations

import math
import os
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forensics.detect.findings import iso
from forensics.report.limits import MAX_TEXT
from forensics.units import human, rate_text  # noqa: F401  (rate_text: the one unit rule for rates, here for every output)

def verdict_words(key: str | None) -> str:
    """The words a person reads for a verdict or outcome key of the JSON summary (`no_leak`: no leak)."""
    return (key or "—").replace("_", " ")


def instant(value, zone: str = "UTC") -> str:
    """An ISO time (or datetime) as `2026-11-30 04:44:42 UTC`; anything else (an index) as it is."""
    if value is None:
        return "—"
    t = value
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if not isinstance(t, datetime):
        return str(value)
    return Clock(zone).when(t)["local"]


def lookup(obj, *names, default=None):
    """Attribute or key by the first name that exists (the analysis is duck-typed)."""
    for name in names:
        if isinstance(obj, dict):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return default


def clip(text, limit: int = MAX_TEXT) -> str:
    if text is None:
        return ""
    # one line always: the HTML is written with its indentation stripped, which is safe only so
    text = str(text).replace("\r", "").replace("\x00", "").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain(value):
    """Any value -> plain data (str/int/float/bool/list/dict/None)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return plain(value.item())
    return str(value)


def natural(text) -> tuple:
    """Sort "2" before "10", numbers before names."""
    text = "" if text is None else str(text)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", text) if p)


def base_name(path: str | None) -> str:
    return os.path.basename(path or "") or (path or "")


def per_unit(n: float | None, per: str) -> str | None:
    if n is None:
        return None
    return f"{human(n)}/{per}"


def growth_span(f) -> float | None:
    """Seconds of the job a growth finding was measured over (its lifetime, else its growth)."""
    for a, b in ((getattr(f, "lifetime_start", None), getattr(f, "lifetime_end", None)), (f.start, f.end)):
        if isinstance(a, datetime) and isinstance(b, datetime):
            return (b - a).total_seconds()
    return None


def duration(hours: float | None) -> str | None:
    if hours is None or not math.isfinite(hours):
        return None
    if hours < 0:
        return "already past"
    minutes = hours * 60
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 90:
        return f"{minutes:.0f} min"
    if hours < 48:
        h = int(hours)
        return f"{h} h {round((hours - h) * 60):02d} min"
    return f"{hours / 24:.1f} days"


class Clock:
    """Formats instants in the user's zone and in UTC."""

    def __init__(self, zone: str):
        try:
            self.zone = ZoneInfo(zone)
            self.name = zone
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            self.zone, self.name = ZoneInfo("UTC"), "UTC"
        self.is_utc = self.name in ("UTC", "Etc/UTC", "Z", "Etc/Zulu", "Zulu", "GMT", "Etc/GMT")

    def when(self, t) -> dict | None:
        if t is None:
            return None
        if isinstance(t, (int, float)):
            t = datetime.fromtimestamp(t, timezone.utc)
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        t = t.astimezone(timezone.utc)
        local = t.astimezone(self.zone)
        return {
            "iso": iso(t),
            "local": local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or self.name),
            "utc": t.strftime("%Y-%m-%d %H:%M:%S UTC"),
        }

    def offset(self, t: datetime | None = None) -> str:
        t = t or datetime.now(timezone.utc)
        off = t.astimezone(self.zone).utcoffset() or timedelta(0)
        minutes = int(off.total_seconds() // 60)
        sign = "+" if minutes >= 0 else "-"
        return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


    def span(self, a, b) -> dict | None:
        """`2024-06-01 10:00:00 → 15:59:50 CEST` (the date once when both ends share it), and in UTC."""
        if a is None or b is None:
            return None

        def as_utc(t):
            if isinstance(t, (int, float)):
                return datetime.fromtimestamp(t, timezone.utc)
            return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)

        a, b = as_utc(a), as_utc(b)

        def fmt(x, y, zone_label_x, zone_label_y):
            left = x.strftime("%Y-%m-%d %H:%M:%S")
            right = y.strftime("%H:%M:%S") if x.date() == y.date() else y.strftime("%Y-%m-%d %H:%M:%S")
            if zone_label_x != zone_label_y:
                return f"{left} {zone_label_x} → {right} {zone_label_y}"
            return f"{left} → {right} {zone_label_x}"

        la, lb = a.astimezone(self.zone), b.astimezone(self.zone)
        return {"local": fmt(la, lb, la.tzname() or self.name, lb.tzname() or self.name),
                "utc": None if self.is_utc else fmt(a, b, "UTC", "UTC")}


def epoch(t) -> float | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return round(t.timestamp(), 3)
    if isinstance(t, (int, float)):
        return float(t)
    return None


def xround(x: float):
    return int(x) if float(x).is_integer() else round(float(x), 3)
