"""The timeline: one UTC clock from sources that disagree (frames built in the fixed schemas)."""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl
import pytest

from forensics.model import Bundle, InputInfo
from forensics.options import Options
from forensics.model import events_frame, samples_frame
from forensics.timeline import align, gpu_key, match_curve, message_key, write_aligned

UTC = timezone.utc
MIB = 1 << 20


def _z(*a) -> datetime:
    return datetime(*a, tzinfo=UTC)


def bundle(inputs: list[InputInfo], samples: list[dict] | None = None, events: list[dict] | None = None) -> Bundle:
    return Bundle(inputs=inputs, samples=samples_frame(samples or []), events=events_frame(events or []))


def ev(source, line, text, kind="marker", time=None, uptime=None, pid=None, gpu=None):
    return {"source": source, "line": line, "text": text, "kind": kind, "time": time, "uptime": uptime, "pid": pid, "gpu": gpu}


def by_line(df: pl.DataFrame, source: str) -> dict[int, datetime | None]:
    return dict(df.filter(pl.col("source") == source).select("line", "time").iter_rows())


# ---------------------------------------------------------------------------------------------- GPU ids

def test_gpu_key_normalizes_bus_id_forms():
    s = pl.Series(["00000000:3B:00.0", "PCI:0000:3b:00", "0000:3b:00.0", "3b:00.0", "GPU-ABCdef-12", "0", None,
                   "00000001:00:00.0"])
    got = pl.DataFrame({"g": s}).select(gpu_key(pl.col("g")))["g"].to_list()
    assert got[:4] == [":3b:00.0"] * 4
    assert got[4:] == ["gpu-abcdef-12", None, None, "1:00:00.0"]


def test_uuids_and_bus_ids_become_indices_everywhere():
    smi = InputInfo(path="gpu.csv", clock="wall", meta={"gpu_map": {"00000000:3B:00.0": 1, "GPU-aaaa-bbbb": 0}})
    kern = InputInfo(path="kern.log", clock="wall")
    b = bundle([smi, kern],
               samples=[{"source": "gpu.csv", "line": 2, "gpu": "GPU-AAAA-BBBB", "series": "memory.used", "bytes": 1,
                         "time": _z(2024, 1, 1)}],
               events=[ev("kern.log", 7, "NVRM: Xid (PCI:0000:3b:00): 79", "xid", _z(2024, 1, 1), gpu="PCI:0000:3b:00"),
                       ev("kern.log", 8, "x", "xid", _z(2024, 1, 1), gpu="PCI:0000:5e:00")])
    out = align(b, Options(tz="UTC"))
    assert out.samples["gpu"].to_list() == ["0"]
    assert out.events["gpu"].to_list() == ["1", "PCI:0000:5e:00"]


def test_conflicting_gpu_maps_leave_ids_alone():
    a = InputInfo(path="a/gpu.csv", clock="wall", meta={"gpu_map": {"00000000:3B:00.0": 1}})
    c = InputInfo(path="b/gpu.csv", clock="wall", meta={"gpu_map": {"0000:3b:00.0": 2}})
    b = bundle([a, c], events=[ev("a/gpu.csv", 1, "x", "xid", _z(2024, 1, 1), gpu="0000:3b:00.0")])
    out = align(b, Options(tz="UTC"))
    assert out.events["gpu"].to_list() == ["0000:3b:00.0"]
    assert any("index 1 and 2" in n for n in a.notes)


# ---------------------------------------------------------------------------------------------- wall clocks

def test_wall_anchors_say_where_the_zone_came_from():
    infos = [InputInfo(path="j.log", clock="wall"), InputInfo(path="gpu.csv", clock="wall-assumed"),
             InputInfo(path="logs/kern.log", clock="wall-yearless", meta={"year_from": "syslog year from file mtime 2024-01-02"}),
             InputInfo(path="sanitizer.txt", clock="none", records=1)]
    t = _z(2024, 1, 1, 12)
    b = bundle(infos, samples=[{"source": "gpu.csv", "line": 2, "time": t, "series": "memory.used", "bytes": 1}],
               events=[ev("j.log", 1, "x", time=t), ev("logs/kern.log", 1, "y", time=t + timedelta(hours=1)),
                       ev("sanitizer.txt", 3, "leak", "sanitizer_leak")])
    opts = Options(tz="America/New_York", tz_from_user=True, tz_overrides={"kern.log": "Europe/Berlin"})
    align(b, opts)
    assert infos[0].anchor == "explicit offset in the timestamps"
    assert infos[1].anchor == "local time read as America/New_York (--tz)"
    assert infos[2].anchor.startswith("syslog year from file mtime 2024-01-02; local time read as Europe/Berlin "
                                      "(--tz kern.log=Europe/Berlin)")
    assert infos[3].anchor.startswith("no clock")
    assert infos[0].start == t and infos[0].end == t and infos[0].start.tzinfo is not None
    assert infos[2].start == t + timedelta(hours=1)
    assert infos[3].start is None


def test_machine_zone_is_said_to_be_an_assumption():
    info = InputInfo(path="gpu.csv", clock="wall-assumed")
    align(bundle([info], samples=[{"source": "gpu.csv", "line": 2, "time": _z(2024, 1, 1), "bytes": 1}]),
          Options(tz="Asia/Tokyo"))
    assert "Asia/Tokyo (this machine's zone" in info.anchor


# ---------------------------------------------------------------------------------------------- yearless syslog

def test_rotated_set_continues_across_new_year():
    # copied without mtimes: each file's year came from the copy date (January 2025)
    old = InputInfo(path="var/kern.log.1", clock="wall-yearless")
    new = InputInfo(path="var/kern.log", clock="wall-yearless")
    b = bundle([old, new], events=[
        ev("var/kern.log.1", 1, "a", time=_z(2025, 12, 20, 10)),   # wrongly 2025 (should be 2024)
        ev("var/kern.log.1", 2, "b", time=_z(2025, 12, 31, 23)),
        ev("var/kern.log", 1, "c", time=_z(2025, 1, 1, 0, 5)),
        ev("var/kern.log", 2, "d", time=_z(2025, 1, 3)),
    ])
    out = align(b, Options(tz="UTC"))
    assert by_line(out.events, "var/kern.log.1") == {1: _z(2024, 12, 20, 10), 2: _z(2024, 12, 31, 23)}
    assert by_line(out.events, "var/kern.log") == {1: _z(2025, 1, 1, 0, 5), 2: _z(2025, 1, 3)}
    assert any("rotated set" in n for n in old.notes)
    assert old.end == _z(2024, 12, 31, 23)


def test_rotated_set_shift_keeps_local_wall_time_across_dst():
    # 10:00 Berlin in July 2025 is 08:00Z; moved to July 2024 it is still 10:00 local (08:00Z)
    old = InputInfo(path="kern.log.1", clock="wall-yearless")
    new = InputInfo(path="kern.log", clock="wall-yearless")
    b = bundle([old, new], events=[ev("kern.log.1", 1, "a", time=_z(2025, 7, 1, 8)),
                                   ev("kern.log", 1, "b", time=_z(2025, 3, 1, 9))])
    out = align(b, Options(tz="Europe/Berlin"))
    assert by_line(out.events, "kern.log.1") == {1: _z(2024, 7, 1, 8)}


def test_rotated_set_in_order_is_left_alone():
    old = InputInfo(path="kern.log.1", clock="wall-yearless")
    new = InputInfo(path="kern.log", clock="wall-yearless")
    b = bundle([old, new], events=[ev("kern.log.1", 1, "a", time=_z(2024, 12, 31, 23, 59)),
                                   ev("kern.log", 1, "b", time=_z(2024, 12, 31, 23, 30))])  # copytruncate overlap
    out = align(b, Options(tz="UTC"))
    assert by_line(out.events, "kern.log.1") == {1: _z(2024, 12, 31, 23, 59)}
    assert not old.notes


def test_yearless_takes_the_year_of_an_overlapping_explicit_source():
    kern = InputInfo(path="kern.log", clock="wall-yearless")
    smi = InputInfo(path="gpu.csv", clock="wall-assumed")
    b = bundle([kern, smi],
               samples=[{"source": "gpu.csv", "line": i + 2, "time": _z(2023, 5, 15, 22) + timedelta(minutes=i),
                         "series": "memory.used", "bytes": 1} for i in range(120)],
               events=[ev("kern.log", 1, "oom", "oom_kill", _z(2025, 5, 15, 23, 9, 30), pid=5)])
    out = align(b, Options(tz="UTC"))
    assert by_line(out.events, "kern.log") == {1: _z(2023, 5, 15, 23, 9, 30)}
    assert "taken from gpu.csv" in kern.anchor
    # with --year the user decides
    kern2 = InputInfo(path="kern.log", clock="wall-yearless")
    out = align(bundle([kern2, InputInfo(path="gpu.csv", clock="wall-assumed")], samples=b.samples.to_dicts(),
                       events=b.events.to_dicts()), Options(tz="UTC", year=2025))
    assert by_line(out.events, "kern.log") == {1: _z(2025, 5, 15, 23, 9, 30)}


# ---------------------------------------------------------------------------------------------- uptime

BOOT = _z(2024, 5, 6, 10, 0, 0, 250000)


def _at(u: float) -> datetime:
    return BOOT + timedelta(seconds=u)


def _floor_s(t: datetime) -> datetime:
    return t.replace(microsecond=0)


MSGS = [(700.101234, "oom_invoked", "python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
        (700.121212, "oom_kill", "Out of memory: Killed process 4242 (python) total-vm:1000kB, anon-rss:900kB"),
        (700.131313, "oom_reaped", "oom_reaper: reaped process 4242 (python), now anon-rss:0kB"),
        (812.5, "xid", "NVRM: Xid (PCI:0000:3b:00): 79, pid=4300, GPU has fallen off the bus.")]


def raw_dmesg(path="dmesg.txt", msgs=MSGS):
    return [ev(path, i + 1, f"[{u:12.6f}] {m}", k, uptime=u, pid=4242 if k == "oom_kill" else None)
            for i, (u, k, m) in enumerate(msgs)]


def dmesg_T(path="dmesg_T.txt", msgs=MSGS, boot=BOOT):
    out = []
    for i, (u, k, m) in enumerate(msgs):
        t = _floor_s(boot + timedelta(seconds=u))
        local = t.astimezone(timezone(timedelta(hours=2)))
        out.append(ev(path, i + 1, f"[{local.strftime('%a %b %e %H:%M:%S %Y')}] {m}", k, t,
                      pid=4242 if k == "oom_kill" else None))
    return out


def test_message_key_strips_every_prefix():
    texts = pl.Series([
        "[  700.121212] Out of memory: Killed process 4242 (python)",
        "[Mon May  6 12:11:40 2024] Out of memory: Killed process 4242 (python)",
        "2024-05-06T12:11:40,371462+02:00 Out of memory: Killed process 4242 (python)",
        "May  6 12:11:40 gpu-node-3 kernel: [  700.121212] Out of memory:  Killed process 4242 (python)",
        "2024-05-06T12:11:40.371462+02:00 gpu-node-3 kernel: Out of memory: Killed process 4242 (python)",
        "[  218.519632][ T7791] Out of memory: Killed process 4242 (python)",
        "<3>[  700.121212] Out of memory: Killed process 4242 (python)",
        "[  700.121212] gpu-node-3 kernel: Out of memory: Killed process 4242 (python)",
    ])
    keys = pl.DataFrame({"t": texts}).select(message_key(pl.col("t")))["t"].unique().to_list()
    assert keys == ["Out of memory: Killed process 4242 (python)"]


def test_uptime_anchored_by_dmesg_T_twin_within_a_second():
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    twin = InputInfo(path="dmesg_T.txt", clock="wall-assumed")
    out = align(bundle([raw, twin], events=raw_dmesg() + dmesg_T()), Options(tz="Europe/Berlin"))
    got = by_line(out.events, "dmesg.txt")
    for i, (u, _, _) in enumerate(MSGS):
        assert abs((got[i + 1] - _at(u)).total_seconds()) < 0.5
    assert "4 lines with the same text in dmesg_T.txt" in raw.anchor
    assert "suspend" in raw.anchor and "suspend" in twin.anchor
    assert out.events.filter(pl.col("source") == "dmesg.txt")["uptime"].null_count() == 0  # uptime kept


def test_uptime_anchored_by_kernlog_lines_with_clock_and_uptime():
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    kern = InputInfo(path="kern.log", clock="wall-yearless")
    # syslog stamps are whole seconds, written a little after the printk
    kl = [ev("kern.log", 10 + i, f"May  6 12:11:40 node kernel: [{u:12.6f}] {m}", k,
             _floor_s(_at(u) + timedelta(milliseconds=30)), uptime=u) for i, (u, k, m) in enumerate(MSGS)]
    out = align(bundle([raw, kern], events=raw_dmesg() + kl), Options(tz="UTC"))
    got = by_line(out.events, "dmesg.txt")
    assert all(abs((got[i + 1] - _at(u)).total_seconds()) < 1.0 for i, (u, _, _) in enumerate(MSGS))
    assert "kern.log lines carrying both clock and uptime" in raw.anchor


def test_own_lines_with_clock_and_uptime_anchor_the_rest():
    # a serial-console export: some lines carry a timestamp field, some only the uptime
    src = InputInfo(path="serial.json", clock="uptime")
    rows = [ev("serial.json", i + 1, m, k, _at(u) if i % 2 == 0 else None, uptime=u) for i, (u, k, m) in enumerate(MSGS)]
    out = align(bundle([src], events=rows), Options(tz="UTC"))
    got = by_line(out.events, "serial.json")
    assert all(abs((got[i + 1] - _at(u)).total_seconds()) < 0.01 for i, (u, _, _) in enumerate(MSGS))
    assert "its own lines" in src.anchor


def test_iso_twin_gives_microsecond_anchor():
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    iso = InputInfo(path="dmesg_iso.txt", clock="wall")
    twin = [ev("dmesg_iso.txt", i + 1, f"{_at(u).isoformat()} {m}", k, _at(u)) for i, (u, k, m) in enumerate(MSGS)]
    out = align(bundle([raw, iso], events=raw_dmesg() + twin), Options(tz="UTC"))
    got = by_line(out.events, "dmesg.txt")
    assert all(abs((got[i + 1] - _at(u)).total_seconds()) < 1e-5 for i, (u, _, _) in enumerate(MSGS))


def test_no_anchor_keeps_uptime_and_no_time():
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    out = align(bundle([raw], events=raw_dmesg()), Options(tz="UTC"))
    assert out.events["time"].null_count() == len(MSGS)
    assert out.events["uptime"].to_list() == [u for u, _, _ in MSGS]
    assert "boot time unknown" in raw.anchor and raw.start is None


def test_boot_time_flag():
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    out = align(bundle([raw], events=raw_dmesg()), Options(tz="UTC", boot_time=BOOT))
    assert by_line(out.events, "dmesg.txt")[2] == _at(700.121212).replace(microsecond=_at(700.121212).microsecond)
    assert "--boot-time" in raw.anchor


def test_reboot_inside_a_dmesg_anchors_each_boot_on_its_own():
    boot2 = BOOT + timedelta(hours=3)
    msgs2 = [(5.5, "marker", "Linux version 6.8.0 (buildd@lcy02) #1 SMP"),
             (40.25, "xid", "NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', DBE"),
             (41.0, "oom_kill", "Out of memory: Killed process 77 (python3) total-vm:1kB")]
    raw = raw_dmesg() + [ev("dmesg.txt", 10 + i, f"[{u:12.6f}] {m}", k, uptime=u) for i, (u, k, m) in enumerate(msgs2)]
    # a dmesg -T of the SECOND boot only
    twin = dmesg_T("dmesg_T.txt", msgs2, boot2)
    info = InputInfo(path="dmesg.txt", clock="uptime")
    out = align(bundle([info, InputInfo(path="dmesg_T.txt", clock="wall-assumed")], events=raw + twin),
                Options(tz="UTC"))
    got = by_line(out.events, "dmesg.txt")
    assert [got[i] for i in (1, 2, 3, 4)] == [None] * 4          # first boot: no anchor, no invented clock
    for i, (u, _, _) in enumerate(msgs2):
        assert abs((got[10 + i] - (boot2 + timedelta(seconds=u))).total_seconds()) < 1.0
    assert "boot 1 (lines 1-4): uptime only, boot time unknown" in info.anchor
    assert "boot 2 (lines 10-12): uptime anchored to boot at" in info.anchor
    assert any("2 boots" in n for n in info.notes)


def test_boot_time_flag_applies_to_the_last_boot():
    raw = raw_dmesg() + [ev("dmesg.txt", 10, "[    3.000000] Linux version", uptime=3.0)]
    info = InputInfo(path="dmesg.txt", clock="uptime")
    out = align(bundle([info], events=raw), Options(tz="UTC", boot_time=_z(2024, 6, 1)))
    got = by_line(out.events, "dmesg.txt")
    assert got[1] is None and got[10] == _z(2024, 6, 1, 0, 0, 3)


def test_twin_of_another_boot_is_not_used():
    # the same generic text appears in a wall-clock log, but only once and at an unrelated offset
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    other = [ev("other.log", 1, "[Mon May  6 01:00:00 2024] " + MSGS[3][2], "xid", _z(2024, 5, 6, 1))]
    out = align(bundle([raw, InputInfo(path="other.log", clock="wall-assumed")], events=raw_dmesg() + other),
                Options(tz="UTC"))
    assert by_line(out.events, "dmesg.txt")[4] is None


def test_suspend_drift_uses_nearest_pair():
    # kern.log lines: before a 600 s suspend offset = BOOT, after it BOOT + 600 (uptime stopped while asleep)
    src = InputInfo(path="kern.log", clock="wall-yearless")
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    pre = [(100.0 + i, "marker", f"msg a{i}") for i in range(3)]
    post = [(200.0 + i, "marker", f"msg b{i}") for i in range(3)]
    kl = [ev("kern.log", i + 1, f"May  6 x kernel: [{u:12.6f}] {m}", k, _at(u) if u < 150 else _at(u + 600), uptime=u)
          for i, (u, k, m) in enumerate(pre + post)]
    out = align(bundle([raw, src], events=raw_dmesg(msgs=pre + post) + kl), Options(tz="UTC"))
    got = by_line(out.events, "dmesg.txt")
    assert abs((got[1] - _at(100)).total_seconds()) < 1e-3
    assert abs((got[6] - _at(802)).total_seconds()) < 1e-3
    assert "nearest" in raw.anchor


# ---------------------------------------------------------------------------------------------- untimed sources

def _mem_curve(n: int, seed: int = 1) -> np.ndarray:
    """A GPU memory.used curve with structure: warm-up steps, a leak ramp, a sawtooth, noise."""
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    mib = 2000 + 3000 * (i > 40) + 9 * np.maximum(0, i - 120) + 700 * ((i // 37) % 2) + rng.integers(0, 3, n)
    return mib.astype(np.int64) * MIB


def test_match_curve_recovers_offset_and_interval():
    t0 = _z(2024, 5, 6, 9).timestamp()
    t_sec = t0 + np.arange(1500) * 1.0
    vals = _mem_curve(1500)
    # the untimed logger started 300 s later and ticks every 1.004 s
    u_idx = np.arange(800)
    u_t = t0 + 300 + u_idx * 1.004
    u_val = np.interp(u_t, t_sec, vals.astype(float)).round()
    fit, why = match_curve(u_idx, u_val, t_sec, vals.astype(float))
    assert fit is not None, why
    assert abs(fit.t0 - (t0 + 300)) < 0.5 and abs(fit.dt - 1.004) < 0.001 and fit.r > 0.99


def test_match_curve_rejects_flat_and_ambiguous_curves():
    t_sec = np.arange(500.0)
    flat = np.full(200, 4000.0 * MIB)
    fit, why = match_curve(np.arange(200), flat, t_sec, np.full(500, 4000.0 * MIB))
    assert fit is None and "flat" in why
    # a square wave repeats: every period fits equally well
    wave = (np.arange(500) // 25 % 2) * 1000.0 * MIB
    fit, why = match_curve(np.arange(100), wave[:100], t_sec, wave)
    assert fit is None and "several offsets" in why


def test_untimed_nvsmi_aligned_to_timed_one_by_memory_curve():
    t0 = _z(2024, 5, 6, 9)
    vals = _mem_curve(900)
    timed = [{"source": "gpu.csv", "line": i + 2, "seq": i, "time": t0 + timedelta(seconds=i), "gpu": "0",
              "series": "memory.used", "bytes": int(v)} for i, v in enumerate(vals)]
    untimed = [{"source": "seed.log", "line": j + 5, "seq": j, "gpu": "0", "series": "memory.used",
                "bytes": int(vals[200 + j])} for j in range(400)]
    gone = ev("seed.log", 500, "RuntimeError: CUDA out of memory.", "gpu_oom")
    smi = InputInfo(path="gpu.csv", clock="wall-assumed")
    seed = InputInfo(path="seed.log", clock="none")
    out = align(bundle([smi, seed], samples=timed + untimed, events=[gone]), Options(tz="UTC"))
    got = by_line(out.samples, "seed.log")
    assert abs((got[5] - (t0 + timedelta(seconds=200))).total_seconds()) < 0.5
    assert abs((got[404] - (t0 + timedelta(seconds=599))).total_seconds()) < 0.5
    assert seed.anchor.startswith("untimed, aligned to gpu.csv by matching the memory.used curve of GPU 0 (r=")
    # the OOM line after the last sample takes that sample's time
    assert by_line(out.events, "seed.log")[500] == got[404]
    assert seed.start is not None


def test_untimed_source_without_anchor_stays_on_its_index():
    seed = InputInfo(path="seed.log", clock="none")
    rows = [{"source": "seed.log", "line": j + 1, "seq": j, "gpu": "0", "series": "memory.used", "bytes": j * MIB}
            for j in range(50)]
    out = align(bundle([seed], samples=rows), Options(tz="UTC"))
    assert out.samples["time"].null_count() == 50
    assert seed.anchor.startswith("no clock: analyzed on its sample index")


def test_unrelated_timed_curve_is_not_used():
    t0 = _z(2024, 5, 6, 9)
    timed = [{"source": "gpu.csv", "line": i + 2, "time": t0 + timedelta(seconds=i), "gpu": "0",
              "series": "memory.used", "bytes": int(v)} for i, v in enumerate(_mem_curve(600, seed=1))]
    other = _mem_curve(600, seed=2)[::-1]
    untimed = [{"source": "seed.log", "line": j + 1, "seq": j, "gpu": "0", "series": "memory.used",
                "bytes": int(other[j])} for j in range(300)]
    seed = InputInfo(path="seed.log", clock="none")
    out = align(bundle([InputInfo(path="gpu.csv", clock="wall"), seed], samples=timed + untimed), Options(tz="UTC"))
    assert out.samples.filter(pl.col("source") == "seed.log")["time"].null_count() == 300
    assert seed.anchor.startswith("no clock")
    assert any("gpu.csv" in n for n in seed.notes)


def test_start_and_interval_place_an_untimed_source():
    seed = InputInfo(path="seed.log", clock="none")
    rows = [{"source": "seed.log", "line": j + 1, "seq": j, "series": "allocated", "bytes": j * MIB} for j in range(10)]
    opts = Options(tz="UTC", start=_z(2024, 5, 6, 9), interval=2.0)
    out = align(bundle([seed], samples=rows), opts)
    assert by_line(out.samples, "seed.log")[10] == _z(2024, 5, 6, 9, 0, 18)
    assert "--start 2024-05-06T09:00:00Z with --interval 2 s" in seed.anchor
    # or from the last sample's time
    seed_end = InputInfo(path="seed.log", clock="none")
    out = align(bundle([seed_end], samples=rows), Options(tz="UTC", end=_z(2024, 5, 6, 9), interval=2.0))
    assert by_line(out.samples, "seed.log")[1] == _z(2024, 5, 6, 8, 59, 42)
    assert "--end" in seed_end.anchor
    # --start alone is not enough
    seed2 = InputInfo(path="seed.log", clock="none")
    out = align(bundle([seed2], samples=rows), Options(tz="UTC", start=_z(2024, 5, 6, 9)))
    assert out.samples["time"].null_count() == 10 and "--interval" in seed2.anchor


# ---------------------------------------------------------------------------------------------- skew

def _smi_with_pid(t0: datetime, pid: int, gone_after: int, n: int = 60, path="gpu.csv"):
    rows = []
    for i in range(n):
        t = t0 + timedelta(seconds=i)
        rows.append({"source": path, "line": 2 * i + 2, "seq": i, "time": t, "gpu": "0", "series": "memory.used",
                     "bytes": (20000 if i < gone_after else 500) * MIB})
        if i < gone_after:
            rows.append({"source": path, "line": 2 * i + 3, "seq": i, "time": t, "gpu": "0", "pid": pid,
                         "series": "process.used", "bytes": 19500 * MIB})
    return rows


def test_skew_of_an_hour_is_reported_not_applied():
    t0 = _z(2024, 5, 6, 9)
    smi = InputInfo(path="gpu.csv", clock="wall-assumed")
    kern = InputInfo(path="kern.log", clock="wall")
    kill = ev("kern.log", 40, "Out of memory: Killed process 4242 (python)", "oom_kill",
              t0 + timedelta(seconds=30.5, hours=1), pid=4242)
    b = bundle([smi, kern], samples=_smi_with_pid(t0, 4242, gone_after=31), events=[kill])
    out = align(b, Options(tz="UTC"))
    assert smi.meta["skew_seconds"] == pytest.approx(3600, abs=1.0)
    assert smi.meta["skew_reference"] == "kern.log"
    assert any("time zone" in n and "--tz gpu.csv=ZONE" in n for n in smi.notes)
    assert by_line(out.samples, "gpu.csv")[2] == t0  # not shifted
    assert "skew_seconds" not in kern.meta


def test_consistent_clocks_report_no_skew():
    t0 = _z(2024, 5, 6, 9)
    smi = InputInfo(path="gpu.csv", clock="wall-assumed")
    kern = InputInfo(path="kern.log", clock="wall")
    kill = ev("kern.log", 40, "Out of memory: Killed process 4242 (python)", "oom_kill",
              t0 + timedelta(seconds=30.5), pid=4242)
    align(bundle([smi, kern], samples=_smi_with_pid(t0, 4242, gone_after=31), events=[kill]), Options(tz="UTC"))
    assert "skew_seconds" not in smi.meta and not smi.notes


def test_cuda_oom_after_the_memory_fell_is_skew():
    t0 = _z(2024, 5, 6, 9)
    smi = InputInfo(path="gpu.csv", clock="wall")
    job = InputInfo(path="train.log", clock="wall-assumed")
    oom = ev("train.log", 99, "torch.OutOfMemoryError: CUDA out of memory.", "gpu_oom", t0 + timedelta(seconds=31 + 45), gpu="0")
    align(bundle([smi, job], samples=_smi_with_pid(t0, 4242, gone_after=31), events=[oom]), Options(tz="UTC"))
    assert job.meta["skew_seconds"] == pytest.approx(-45.5, abs=1.0)
    assert any("ahead of gpu.csv" in n for n in job.notes)


# ---------------------------------------------------------------------------------------------- the trio

def test_raw_dmesg_dmesg_T_and_nvsmi_line_up_within_a_second():
    """One incident seen three ways: raw dmesg (uptime), dmesg -T (local wall clock, whole seconds) and
    nvidia-smi (local wall clock, 1 s samples): after align they agree within one second."""
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    twin = InputInfo(path="dmesg_T.txt", clock="wall-assumed")
    smi = InputInfo(path="gpu.csv", clock="wall-assumed")
    kill_at = _at(700.121212)
    t0 = _floor_s(kill_at) - timedelta(seconds=40) + timedelta(milliseconds=177)
    gone_after = next(i for i in range(80) if t0 + timedelta(seconds=i) > kill_at)
    b = bundle([raw, twin, smi], samples=_smi_with_pid(t0, 4242, gone_after=gone_after, n=80),
               events=raw_dmesg() + dmesg_T())
    out = align(b, Options(tz="Europe/Berlin"))
    kill = out.events.filter((pl.col("kind") == "oom_kill"))
    times = dict(kill.select("source", "time").iter_rows())
    assert abs((times["dmesg.txt"] - times["dmesg_T.txt"]).total_seconds()) <= 1.0
    last_seen = out.samples.filter(pl.col("pid") == 4242)["time"].max()
    assert 0 <= (times["dmesg.txt"] - last_seen).total_seconds() <= 1.0
    assert "skew_seconds" not in smi.meta and "skew_seconds" not in twin.meta


# ---------------------------------------------------------------------------------------------- writing

def _aligned_bundle():
    raw = InputInfo(path="dmesg.txt", clock="uptime")
    twin = InputInfo(path="dmesg_T.txt", clock="wall-assumed")
    smi = InputInfo(path="gpu.csv", clock="wall-assumed")
    b = bundle([raw, twin, smi], samples=_smi_with_pid(_z(2024, 5, 6, 10, 11), 4242, gone_after=31),
               events=raw_dmesg() + dmesg_T())
    return align(b, Options(tz="UTC"))


def test_write_aligned_parquet_one_file(tmp_path):
    b = _aligned_bundle()
    target = tmp_path / "out" / "aligned.parquet"
    target.parent.mkdir()
    assert write_aligned(b, target) == [str(target)]
    back = pl.read_parquet(target)
    assert back.columns[0] == "table"
    ev_back = back.filter(pl.col("table") == "events")
    assert ev_back.height == b.events.height and ev_back["line"].null_count() == 0
    assert back.filter(pl.col("table") == "samples").height == b.samples.height
    assert back["time"].dtype == pl.Datetime("us", "UTC")
    assert sorted(p.name for p in target.parent.iterdir()) == ["aligned.parquet"]  # no temp file left
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask   # an ordinary file, not mkstemp's private one
    meta = pl.read_parquet_metadata(target)
    assert "dmesg.txt" in meta["gpu_forensics.inputs"]


def test_write_aligned_csv_two_files(tmp_path):
    b = _aligned_bundle()
    written = write_aligned(b, tmp_path / "aligned.csv")
    assert [p.split("/")[-1] for p in written] == ["aligned.samples.csv", "aligned.events.csv"]
    events = pl.read_csv(written[1])
    assert events.height == b.events.height
    assert events["time"].drop_nulls()[0].endswith("Z") and events["source"].null_count() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aligned.events.csv", "aligned.samples.csv"]


def test_write_aligned_refuses_other_extensions(tmp_path):
    from forensics.errors import UsageError
    with pytest.raises(UsageError):
        write_aligned(_aligned_bundle(), tmp_path / "aligned.json")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_no_temp_file(tmp_path, monkeypatch):
    def boom(self, *a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    from forensics.errors import UsageError
    with pytest.raises(UsageError, match="disk full"):   # one line for the user, not a traceback
        write_aligned(_aligned_bundle(), tmp_path / "aligned.parquet")
    assert list(tmp_path.iterdir()) == []


def test_empty_bundle():
    out = align(Bundle(), Options(tz="UTC"))
    assert out.samples.is_empty() and out.events.is_empty()


def test_ragged_input_never_raises():
    """Nulls where parsers could not fill a field, duplicate times, one-row series: no traceback."""
    t = _z(2024, 1, 1)
    infos = [InputInfo(path="a.csv", clock="wall"), InputInfo(path="b.log", clock="none"),
             InputInfo(path="c.txt", clock="uptime"), InputInfo(path="bad", error="unreadable")]
    samples = ([{"source": "a.csv", "line": i, "time": t, "gpu": "0", "series": "memory.used", "bytes": i * MIB}
                for i in range(30)]
               + [{"source": "b.log", "line": i, "seq": None if i % 3 else i, "gpu": "0", "series": "memory.used",
                   "bytes": (i % 7) * 100 * MIB} for i in range(40)])
    events = [ev("c.txt", 1, None, "xid", uptime=5.0), ev("c.txt", 2, "", "xid", uptime=4.0),
              ev("b.log", 50, "RuntimeError: CUDA out of memory", "gpu_oom")]
    out = align(bundle(infos, samples, events), Options(tz="UTC"))
    assert out.samples.height == 70 and out.events.height == 3
    assert infos[3].anchor is None and infos[1].anchor.startswith("no clock")


def test_twin_kernel_events_merge_into_the_finest_copy():
    import polars as pl

    from forensics.model import events_frame
    from forensics.timeline import merge_twin_events

    def t(s):
        return datetime.fromisoformat(s)

    ev = events_frame([
        {"time": t("2026-11-30T04:31:47+00:00"), "source": "dmesg-T.txt", "line": 5, "kind": "oom_kill", "pid": 7, "bytes": 100, "detail": "{}"},
        {"time": t("2026-11-30T04:31:47.898000+00:00"), "source": "dmesg-iso.txt", "line": 5, "kind": "oom_kill", "pid": 7, "bytes": 100, "detail": "{}"},
        {"time": t("2026-11-30T04:31:47.898001+00:00"), "source": "dmesg.txt", "line": 5, "kind": "oom_kill", "pid": 7, "bytes": 100, "detail": "{}"},
        # a second kill of another pid, and the same pid killed again much later: both stay
        {"time": t("2026-11-30T04:31:47.9+00:00"), "source": "dmesg.txt", "line": 9, "kind": "oom_kill", "pid": 8, "bytes": 5, "detail": None},
        {"time": t("2026-11-30T05:00:00+00:00"), "source": "dmesg-T.txt", "line": 90, "kind": "oom_kill", "pid": 7, "bytes": 100, "detail": None},
    ])
    out = merge_twin_events(ev)
    assert out.height == 3
    kept = out.filter(pl.col("pid") == 7).sort("time")
    assert kept["source"].to_list() == ["dmesg-iso.txt", "dmesg-T.txt"]
    import json as _json

    assert sorted(_json.loads(kept["detail"][0])["twins"]) == ["dmesg-T.txt:5", "dmesg.txt:5"]


def test_twin_task_table_readings_merge():
    from forensics.model import samples_frame
    from forensics.timeline import merge_twin_samples

    def t(s):
        return datetime.fromisoformat(s)

    rows = []
    for src, stamp in (("dmesg-T.txt", "2026-11-30T04:31:47+00:00"), ("dmesg-iso.txt", "2026-11-30T04:31:47.5+00:00")):
        for i, pid in enumerate((10, 11)):
            rows.append({"time": t(stamp), "source": src, "line": i + 1, "series": "host.rss", "pid": pid, "bytes": 4096 * (i + 1)})
    rows.append({"time": t("2026-11-30T04:31:47+00:00"), "source": "gpu.csv", "line": 1, "series": "memory.used", "gpu": "0", "bytes": 1})
    out = merge_twin_samples(samples_frame(rows))
    rss = out.filter(pl.col("series") == "host.rss")
    assert rss.height == 2 and set(rss["source"]) == {"dmesg-iso.txt"}
    assert out.filter(pl.col("series") == "memory.used").height == 1


def test_one_gpu_named_three_ways_is_one_gpu():
    # a monitoring query names the GPU by bus id, compute-apps by UUID, dmon by index: one GPU
    from forensics import timeline
    from forensics.model import InputInfo
    from forensics.model import events_frame, samples_frame

    rows = [{"time": None, "seq": i, "source": src, "line": i, "gpu": gpu, "series": "memory.used", "bytes": 1}
            for i, (src, gpu) in enumerate([("wide.csv", "00000000:00:06.0"), ("apps.csv", "GPU-2f0fbe6e-a498"),
                                            ("dmon.txt", "0")])]
    infos = [InputInfo(path=p) for p in ("wide.csv", "apps.csv", "dmon.txt")]
    s, _ = timeline.unify_gpus(samples_frame(rows), events_frame([]), infos)
    assert set(s["gpu"]) == {"0"}
    assert any("taken as GPU 0" in n for n in infos[0].notes)
    # two bus ids (two GPUs, even if each input shows one): left as they are
    rows[1]["gpu"] = "00000000:00:07.0"
    s, _ = timeline.unify_gpus(samples_frame(rows), events_frame([]), [InputInfo(path=p) for p in ("wide.csv", "apps.csv", "dmon.txt")])
    assert set(s["gpu"]) == {"0", "00000000:00:06.0", "00000000:00:07.0"}
