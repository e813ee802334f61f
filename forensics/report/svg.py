"""Pixel geometry of a chart for the SVG in the template: paths, ticks, markers (numbers only, no log text)."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from forensics.report.formatting import Clock
from forensics.units import human

_W = 960
_MARGIN = {"left": 70, "right": 16, "top": 22, "bottom": 44}


def _y_unit(y_max: float) -> tuple[str, int]:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if y_max >= factor:
            return unit, factor
    return "B", 1


def _nice_step(span: float, target: int) -> float:
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


_TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
               86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 91 * 86400, 182 * 86400, 364 * 86400]


def _time_ticks(x0: float, x1: float, clock: Clock, target: int = 7) -> list[dict]:
    """Ticks on whole local minutes / hours / midnights, labelled in the user's zone and in UTC."""
    span = max(x1 - x0, 1e-3)
    step = next((s for s in _TIME_STEPS if span / s <= target), None)
    if step is None:  # years: whole numbers of 364-day "years" keep the ticks few
        step = _nice_step(span / (364 * 86400), target) * 364 * 86400
    if step >= 86400:
        # walk the local calendar so every tick is a local midnight, across DST changes too
        days = int(round(step / 86400))
        day = datetime.fromtimestamp(x0, clock.zone).date()
        times = []
        while len(times) < 40:
            t = datetime.combine(day, datetime.min.time(), clock.zone).timestamp()
            if t > x1 + 1e-6:
                break
            if t >= x0 - 1e-6:
                times.append(t)
            day += timedelta(days=days if times else 1)
    else:
        off = (datetime.fromtimestamp(x0, timezone.utc).astimezone(clock.zone).utcoffset() or timedelta(0)).total_seconds()
        first = math.ceil((x0 + off) / step) * step - off
        times = [first + k * step for k in range(40) if first + k * step <= x1 + 1e-6]
    multi_day = datetime.fromtimestamp(x0, clock.zone).date() != datetime.fromtimestamp(x1, clock.zone).date()
    fmt = "%H:%M:%S" if step < 60 else "%H:%M"
    if step >= 86400:
        fmt = "%Y-%m-%d"
    elif multi_day:
        fmt = "%m-%d " + fmt
    # a local midnight is not a UTC midnight: day ticks say the UTC hour too
    ufmt = "%m-%d %H:%M" if step >= 86400 else fmt
    ticks = []
    for t in times:
        u = datetime.fromtimestamp(t, timezone.utc)
        ticks.append({"x": t, "label": u.astimezone(clock.zone).strftime(fmt),
                      "utc": None if clock.is_utc else u.strftime(ufmt) + "Z"})
    return ticks


def _num_ticks(x0: float, x1: float, target: int = 7) -> list[dict]:
    span = max(x1 - x0, 1)
    step = max(1.0, _nice_step(span, target))
    first = math.ceil(x0 / step) * step
    ticks, t = [], first
    while t <= x1 + 1e-9 and len(ticks) < 40:
        ticks.append({"x": t, "label": f"{t:,.0f}" if step >= 1 else f"{t:g}", "utc": None})
        t += step
    return ticks


def svg_model(chart: dict, clock: Clock, height: int) -> dict:
    """Pixel geometry of one chart for the template (all numbers, no text from logs)."""
    left, right, top, bottom = _MARGIN["left"], _W - _MARGIN["right"], _MARGIN["top"], height - _MARGIN["bottom"]
    x0, x1 = float(chart["x0"]), float(chart["x1"])
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    y_min = float(chart.get("y_min") or 0)
    y_max = float(chart["y_max"])
    if y_min == 0:
        y_max *= 1.05
    if y_max <= y_min:   # every reading the same (or below zero, from a Bundle built by hand)
        y_max = y_min + max(abs(y_min), 1 << 20)
    unit, factor = _y_unit(y_max)

    def px(x):
        return round(left + (float(x) - x0) / (x1 - x0) * (right - left), 1)

    def py(y):
        return round(bottom - (float(y) - y_min) / (y_max - y_min) * (bottom - top), 1)

    # px and py written out for the path points (thousands per report): the same arithmetic, in the
    # same order, without a call per coordinate
    x_span, x_px, y_span, y_px = x1 - x0, right - left, y_max - y_min, bottom - top
    paths = []
    for s in chart["series"]:
        parts, dots = [], []
        for run in s["runs"]:
            if len(run) == 1:
                dots.append({"x": px(run[0][0]), "y": py(run[0][1])})
                continue
            # "M x y x y ...": after a moveto, further pairs are linetos (shorter than an L each)
            # x on whole pixels (a bucket is several wide); y to a tenth, which the hover read-out reads back
            parts.append("M" + " ".join(
                f"{round(round(left + (x - x0) / x_span * x_px, 1))} {round(bottom - (y - y_min) / y_span * y_px, 1):g}"
                for x, y in run))
        paths.append({"d": "".join(parts), "dots": dots, "color": s["color"], "name": s["name"],
                      "dashed": s["dashed"]})
    ystep = _nice_step((y_max - y_min) / factor, max(4, min(5, (bottom - top) // 36))) * factor
    yticks = []
    v = math.ceil(y_min / ystep) * ystep
    while v <= y_max and len(yticks) < 12:
        yticks.append({"y": py(v), "label": f"{v / factor:g} {unit}" if v else "0"})
        v += ystep
    xticks = _time_ticks(x0, x1, clock) if chart["xkind"] == "time" else _num_ticks(x0, x1)
    for t in xticks:
        t["px"] = px(t["x"])
    markers = [dict(m, px=px(m["x"])) for m in chart["markers"]]
    return {
        "w": _W, "h": height, "left": left, "right": right, "top": top, "bottom": bottom,
        "paths": paths, "yticks": yticks, "xticks": [t for t in xticks if left - 1 <= t["px"] <= right + 1],
        "capacity": py(chart["capacity"]) if chart["capacity_drawn"] and chart["capacity"] else None,
        "capacity_label": f"capacity {human(chart['capacity'])}" if chart["capacity"] else None,
        "markers": markers,
        "onsets": [dict(o, px=px(o["x"])) for o in chart["onsets"]],
        "jobs": [dict(j, px0=px(max(j["x0"], x0)), px1=px(min(j["x1"], x1))) for j in chart.get("jobs", [])
                 if j["x1"] >= x0 and j["x0"] <= x1],
        "change_points": [px(x) for x in chart["change_points"]],
        "x0": x0, "x1": x1, "y_min": y_min, "y_max": y_max, "unit": unit, "factor": factor,
    }
