"""Clock skew: an incident seen by two sources (an oom_kill of a pid vs the pid vanishing from an
nvidia-smi process list, or vs the fall of its GPU's memory.used; a CUDA OOM stamped after the GPU
memory already fell) measures how far their clocks disagree. It is reported (note +
meta["skew_seconds"]) and never applied: one incident is thin evidence for moving every row of a
file, and the usual cause, a zone, is fixed by the user with --tz FILE=ZONE.
"""
from __future__ import annotations

import os

import numpy as np
import polars as pl

from forensics.model import InputInfo
from forensics.frames import rows_where
from forensics.timeline import stamps
from forensics.timeline.stamps import MIB, US


_CLOCK_RANK = {"wall": 0, "wall-assumed": 1, "wall-yearless": 2, "uptime": 3, "none": 4}


def _stamp_us(col: str) -> pl.Expr:
    """An event's instant in µs; a stamp printed to the whole second (dmesg -T, syslog) was truncated,
    so the instant is taken half a second later."""
    us = stamps.epoch_us(col)
    return pl.when(us % US == 0).then(us + US // 2).otherwise(us)


def _stamp_tol(col: str) -> pl.Expr:
    """Half the resolution of the stamp, in seconds."""
    return pl.when(stamps.epoch_us(col) % US == 0).then(0.5).otherwise(0.0)


def _incident_order(f: dict) -> tuple:
    e = f["evidence"]
    return f["a"], f["b"], e["line"] or 0, e["other_line"] or 0, f["what"]


def detect_skew(samples: pl.DataFrame, events: pl.DataFrame, infos: dict[str, InputInfo]) -> list[dict]:
    """Measure how far two sources' clocks disagree on incidents both saw; report, never shift."""
    # each way's incidents in a stated order (the joins that find them keep none): the note quotes the first
    found = [f for way in (_skew_from_pid_deaths, _skew_from_kill_and_fall, _skew_from_gpu_oom)
             for f in sorted(way(samples, events), key=_incident_order)]
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for f in found:
        by_pair.setdefault((f["a"], f["b"]), []).append(f)
    out = []
    for (a, b), items in by_pair.items():
        est = np.array([i["skew"] for i in items])
        tol = max(max(i["tol"] for i in items), 1.0)
        skew = float(np.median(est))
        if abs(skew) <= tol or a not in infos or b not in infos:
            continue
        if np.ptp(est) > 2 * tol + 2.0:
            continue  # incidents disagree about the skew: not one clock offset
        # report on the less trustworthy clock, as the seconds to add to it
        ra, rb = _CLOCK_RANK.get(infos[a].clock, 5), _CLOCK_RANK.get(infos[b].clock, 5)
        ref, other, add = (a, b, skew) if ra <= rb else (b, a, -skew)
        incidents = len({(i["evidence"]["path"], i["evidence"]["line"]) for i in items})
        direction = "behind" if add > 0 else "ahead of"
        msg = (f"clock skew: this file's clock runs {stamps.seconds(abs(add))} {direction} {os.path.basename(ref)} "
               f"(±{stamps.seconds(tol)}), judging by {incidents} incident{'s' if incidents > 1 else ''} seen in both "
               f"(e.g. {items[0]['what']}); times are not shifted")
        whole = round(add / 900) * 900
        if abs(add) >= 900 and abs(add - whole) <= tol + 60:
            msg += (f". A difference of {stamps.seconds(abs(whole))} looks like a time zone mix-up: "
                    f"pass --tz {os.path.basename(other)}=ZONE with the zone this file was written in")
        info = infos[other]
        info.notes.append(msg)
        info.meta["skew_seconds"] = round(add, 3)
        info.meta["skew_reference"] = ref
        info.meta["skew_evidence"] = [i["evidence"] for i in items[:5]]
        out.append({"source": other, "reference": ref, "skew_seconds": add, "uncertainty": tol})
    return out


def _skew_from_pid_deaths(samples, events) -> list[dict]:
    """An oom_kill of pid P (source A) vs P's last process.used reading and the next reading of that
    source without it (source B): in B's clock the kill lies between the two."""
    kills = rows_where(events, (pl.col("kind") == "oom_kill") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    if kills.is_empty():   # (most jobs: the samples are not searched)
        return []
    seen = rows_where(samples, (pl.col("series") == "process.used") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    if seen.is_empty():
        return []
    last = seen.group_by("source", "pid").agg(pl.col("time").max().alias("t_last"), pl.col("line").max().alias("b_line")).sort("t_last")
    ticks = samples.filter(pl.col("time").is_not_null()).select("source", pl.col("time").alias("t_next")).unique().sort("t_next")
    last = last.join_asof(ticks, left_on="t_last", right_on="t_next", by="source", strategy="forward",
                          allow_exact_matches=False, check_sortedness=False)
    # a process list that went empty prints no rows: its parser marks the first block without the pid
    gone = events.filter((pl.col("kind") == "process_gone") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    gone = gone.group_by("source", "pid").agg(pl.col("time").min().alias("t_gone"))
    last = (last.join(gone, on=["source", "pid"], how="left")
            .with_columns(pl.min_horizontal(pl.col("t_next"),
                                            pl.when(pl.col("t_gone") > pl.col("t_last")).then(pl.col("t_gone")))
                          .alias("t_next"))
            .drop_nulls("t_next"))
    pairs = kills.select(pl.col("source").alias("a"), pl.col("line").alias("a_line"), "pid", pl.col("time").alias("t_kill")).join(
        last.rename({"source": "b"}), on="pid").filter(pl.col("a") != pl.col("b"))
    pairs = pairs.with_columns(
        ((_stamp_us("t_kill") - (stamps.epoch_us("t_last") + stamps.epoch_us("t_next")) / 2) / US).alias("skew"),
        ((stamps.epoch_us("t_next") - stamps.epoch_us("t_last")) / 2 / US + _stamp_tol("t_kill")).alias("tol"),
    ).filter(pl.col("skew").abs() < 86400)  # a pid reused a day apart is another process
    return [{"a": r["a"], "b": r["b"], "skew": r["skew"], "tol": r["tol"],
             "what": f"the oom_kill of pid {r['pid']} ({os.path.basename(r['a'])}:{r['a_line']}) and its last reading "
                     f"({os.path.basename(r['b'])}:{r['b_line']})",
             "evidence": {"path": r["a"], "line": r["a_line"], "other_path": r["b"], "other_line": r["b_line"]}}
            for r in pairs.iter_rows(named=True)]


def _skew_from_kill_and_fall(samples, events) -> list[dict]:
    """An oom_kill of pid P that held GPU memory (P is in a process list) vs the one fall of that GPU's
    memory.used by at least half of P's memory in another source, within a day: the kill lies between
    the readings before and after the fall."""
    kills = rows_where(events, (pl.col("kind") == "oom_kill") & pl.col("pid").is_not_null() & pl.col("time").is_not_null())
    if kills.is_empty():
        return []
    procs = rows_where(samples, (pl.col("series") == "process.used") & pl.col("pid").is_not_null()
                           & pl.col("gpu").is_not_null() & pl.col("bytes").is_not_null())
    if procs.is_empty():
        return []
    procs = procs.group_by("pid", "gpu").agg(pl.col("bytes").max().alias("p_bytes"))
    mem = (samples.filter((pl.col("series") == "memory.used") & pl.col("time").is_not_null() & pl.col("bytes").is_not_null())
           .sort("source", "gpu", "time", maintain_order=True)
           .with_columns((pl.col("bytes").shift(1) - pl.col("bytes")).over("source", "gpu").alias("drop"),
                         pl.col("time").shift(1).over("source", "gpu").alias("t_before"))
           .filter(pl.col("drop") > 0))
    pairs = (kills.select(pl.col("source").alias("a"), pl.col("line").alias("a_line"), "pid", pl.col("time").alias("t_kill"))
             .join(procs, on="pid")
             .join(mem.select(pl.col("source").alias("b"), pl.col("line").alias("b_line"), "gpu", "drop", "t_before",
                              pl.col("time").alias("t_after")), on="gpu")
             .filter((pl.col("a") != pl.col("b")) & (pl.col("drop") >= pl.col("p_bytes") / 2)
                     & ((pl.col("t_after") - pl.col("t_kill")).abs() < pl.duration(days=1))))
    pairs = pairs.filter(pl.len().over("a", "a_line", "b") == 1)   # one clear fall, or nothing to say
    pairs = pairs.with_columns(
        ((_stamp_us("t_kill") - (stamps.epoch_us("t_before") + stamps.epoch_us("t_after")) / 2) / US).alias("skew"),
        ((stamps.epoch_us("t_after") - stamps.epoch_us("t_before")) / 2 / US + _stamp_tol("t_kill")).alias("tol"))
    return [{"a": r["a"], "b": r["b"], "skew": r["skew"], "tol": r["tol"],
             "what": f"the oom_kill of pid {r['pid']} ({os.path.basename(r['a'])}:{r['a_line']}) and GPU {r['gpu']}'s "
                     f"memory falling by {r['drop'] / MIB:.0f} MiB ({os.path.basename(r['b'])}:{r['b_line']})",
             "evidence": {"path": r["a"], "line": r["a_line"], "other_path": r["b"], "other_line": r["b_line"]}}
            for r in pairs.iter_rows(named=True)]


def _skew_from_gpu_oom(samples, events) -> list[dict]:
    """A CUDA OOM (source A) cannot come after the GPU's memory fell from its peak in source B (the
    dying process frees it): an OOM stamped after that fall means A's clock is ahead, at least by the gap."""
    ooms = rows_where(events, (pl.col("kind") == "gpu_oom") & pl.col("time").is_not_null())
    if ooms.is_empty():
        return []
    mem = rows_where(samples, (pl.col("series") == "memory.used") & pl.col("time").is_not_null() & pl.col("bytes").is_not_null())
    if mem.is_empty():
        return []
    out = []
    for (b, gpu), part in mem.group_by("source", "gpu"):
        part = part.sort("time", maintain_order=True)
        vals = part["bytes"].to_numpy().astype(float)
        total = part["total_bytes"].max()
        peak = vals.max()
        near_peak = vals >= peak - max(64 * MIB, 0.01 * (total or peak))
        last_peak = int(np.flatnonzero(near_peak)[-1])
        if last_peak + 1 >= len(vals) or vals[last_peak + 1:].min() > peak - max(512 * MIB, 0.1 * peak):
            continue  # no clear fall after the peak
        fall = part["time"][last_peak + 1]
        lastp = part["time"][last_peak]
        cand = ooms.filter((pl.col("source") != b) & ((pl.col("gpu") == gpu) | pl.col("gpu").is_null()))
        for r in cand.iter_rows(named=True):
            gap = (r["time"] - fall).total_seconds()
            tol = (fall - lastp).total_seconds() / 2
            if gap > tol and gap < 86400:
                out.append({"a": r["source"], "b": b, "skew": gap + tol, "tol": tol,
                            "what": f"the CUDA OOM at {os.path.basename(r['source'])}:{r['line']} stamped after GPU "
                                    f"{gpu} memory fell from its peak ({os.path.basename(b)}:{part['line'][last_peak + 1]})",
                            "evidence": {"path": r["source"], "line": r["line"], "other_path": b,
                                         "other_line": part["line"][last_peak + 1]}})
    return out
