"""The timeline on real files through the real parsers (ingest.load -> align), and on recorded incidents.

Tests that need a parser skip while no parser module declares it (forensics/parsers/__init__.py finds them).
The recorded-incident tests run on every `sample_logs/<incident>/` folder that holds `dmesg.txt`
(raw `dmesg`) beside `dmesg-T.txt` and/or `dmesg-iso.txt` of the same boot, and `nvidia-smi.csv`
(`--query-gpu=timestamp,...`); `README.md` front matter gives `tz`, `killed_pid` and `kill_time`
(the kill's `dmesg --time-format iso` stamp).
"""
from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from forensics import ingest
from forensics import parsers
from forensics.clock import parse_offset_datetime
from forensics.options import Options
from forensics.timeline import align

ROOT = Path(__file__).resolve().parent.parent
UTC = timezone.utc
BERLIN_SUMMER = timezone(timedelta(hours=2))
BOOT = datetime(2024, 5, 6, 10, 0, 0, 250000, tzinfo=UTC)
UUID = "GPU-aaaaaaaa-1111-2222-3333-444444444444"


def need(*names: str) -> None:
    missing = [n for n in names if n not in parsers.BY_NAME]
    if missing:
        pytest.skip(f"parser(s) not registered yet: {', '.join(missing)}")


KERNEL = [(0.0, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) #45-Ubuntu SMP PREEMPT_DYNAMIC"),
          (700.101234, "python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
          (700.121212, "Out of memory: Killed process 4242 (python) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, "
                       "shmem-rss:0kB, UID:1000 pgtables:100kB oom_score_adj:0"),
          (700.131313, "oom_reaper: reaped process 4242 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"),
          (812.5, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4300, name=python, GPU has fallen off the bus.")]


def _at(u: float, boot: datetime = BOOT) -> datetime:
    return boot + timedelta(seconds=u)


def write_raw(path: Path, lines=KERNEL) -> None:
    path.write_text("".join(f"[{u:12.6f}] {m}\n" for u, m in lines))


def write_T(path: Path, lines=KERNEL, boot=BOOT) -> None:
    # dmesg -T: boot + uptime, truncated to the second, in local time (Berlin, summer)
    out = []
    for u, m in lines:
        t = _at(u, boot).replace(microsecond=0).astimezone(BERLIN_SUMMER)
        out.append(f"[{t.strftime('%a %b')} {t.day:2d} {t.strftime('%H:%M:%S %Y')}] {m}\n")
    path.write_text("".join(out))


def kill_time(b) -> dict[str, datetime]:
    kills = b.events.filter(pl.col("kind") == "oom_kill")
    return {os.path.basename(s): t for s, t in kills.select("source", "time").iter_rows()}


def test_raw_dmesg_takes_its_clock_from_a_dmesg_T_twin(tmp_path):
    need("kernel-log")
    write_raw(tmp_path / "dmesg.txt")
    write_T(tmp_path / "dmesg-T.txt")
    opts = Options(tz="Europe/Berlin", tz_from_user=True)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    kills = kill_time(b)
    assert abs((kills["dmesg.txt"] - _at(700.121212)).total_seconds()) < 1.0
    assert abs((kills["dmesg.txt"] - kills["dmesg-T.txt"]).total_seconds()) <= 1.0
    raw = next(i for i in b.inputs if i.path.endswith("dmesg.txt"))
    assert "dmesg-T.txt" in raw.anchor and "asleep" in raw.anchor


def test_raw_dmesg_takes_its_clock_from_kern_log(tmp_path):
    need("kernel-log")
    write_raw(tmp_path / "dmesg.txt")
    lines = []
    for u, m in KERNEL:
        t = (_at(u) + timedelta(milliseconds=20)).astimezone(BERLIN_SUMMER)
        lines.append(f"{t.strftime('%b')} {t.day:2d} {t.strftime('%H:%M:%S')} gpu-node-3 kernel: [{u:12.6f}] {m}\n")
    (tmp_path / "kern.log").write_text("".join(lines))
    opts = Options(tz="Europe/Berlin", tz_from_user=True, year=2024)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    kills = kill_time(b)
    assert abs((kills["dmesg.txt"] - _at(700.121212)).total_seconds()) < 1.0
    raw = next(i for i in b.inputs if i.path.endswith("dmesg.txt"))
    assert "kern.log lines carrying both clock and uptime" in raw.anchor


def test_reboot_inside_a_dmesg_file(tmp_path):
    need("kernel-log")
    boot2 = BOOT + timedelta(hours=5)
    second = [(3.2, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) #45-Ubuntu SMP PREEMPT_DYNAMIC"),
              (95.5, "NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit "
                     "error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fdd60000"),
              (96.25, "Out of memory: Killed process 777 (python3) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, "
                      "shmem-rss:0kB, UID:0 pgtables:100kB oom_score_adj:0")]
    write_raw(tmp_path / "dmesg.txt", KERNEL + second)
    write_T(tmp_path / "dmesg-T.txt", second, boot2)   # a twin of the second boot only
    opts = Options(tz="Europe/Berlin", tz_from_user=True)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    raw = b.events.filter(pl.col("source").str.ends_with("/dmesg.txt")).sort("line")
    first_boot = raw.filter(pl.col("line") <= len(KERNEL))
    second_boot = raw.filter(pl.col("line") > len(KERNEL))
    assert first_boot.height and first_boot["time"].null_count() == first_boot.height
    assert first_boot["uptime"].null_count() == 0
    for u, t in second_boot.select("uptime", "time").iter_rows():
        assert abs((t - _at(u, boot2)).total_seconds()) < 1.0
    info = next(i for i in b.inputs if i.path.endswith("/dmesg.txt"))
    assert "boot 1" in info.anchor and "boot time unknown" in info.anchor and "boot 2" in info.anchor


def test_rotated_kern_log_set_continues_across_new_year(tmp_path):
    need("kernel-log")
    (tmp_path / "kern.log.1").write_text(
        "Dec 30 10:00:00 node kernel: [  100.000000] Out of memory: Killed process 11 (a) total-vm:1kB, anon-rss:1kB, "
        "file-rss:0kB, shmem-rss:0kB\n"
        "Dec 31 23:59:00 node kernel: [  200.000000] Out of memory: Killed process 12 (b) total-vm:1kB, anon-rss:1kB, "
        "file-rss:0kB, shmem-rss:0kB\n")
    (tmp_path / "kern.log").write_text(
        "Jan  1 00:01:00 node kernel: [  300.000000] Out of memory: Killed process 13 (c) total-vm:1kB, anon-rss:1kB, "
        "file-rss:0kB, shmem-rss:0kB\n")
    # --year names the year of the last line: both files' last lines would get 2025 on their own
    opts = Options(tz="UTC", year=2025)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    times = {(os.path.basename(s), l): t for s, l, t in b.events.select("source", "line", "time").iter_rows()}
    assert times[("kern.log.1", 1)] == datetime(2024, 12, 30, 10, tzinfo=UTC)
    assert times[("kern.log.1", 2)] == datetime(2024, 12, 31, 23, 59, tzinfo=UTC)
    assert times[("kern.log", 1)] == datetime(2025, 1, 1, 0, 1, tzinfo=UTC)


def test_syslog_year_from_mtime_across_new_year(tmp_path):
    need("kernel-log")
    p = tmp_path / "kern.log"
    p.write_text(
        "Dec 31 23:59:58 node kernel: [  100.000000] Out of memory: Killed process 11 (a) total-vm:1kB, anon-rss:1kB, "
        "file-rss:0kB, shmem-rss:0kB\n"
        "Jan  1 00:00:02 node kernel: [  104.000000] Out of memory: Killed process 12 (b) total-vm:1kB, anon-rss:1kB, "
        "file-rss:0kB, shmem-rss:0kB\n")
    mtime = datetime(2025, 1, 1, 0, 5, tzinfo=UTC).timestamp()
    os.utime(p, (mtime, mtime))
    opts = Options(tz="UTC")
    b = align(ingest.load([str(p)], opts), opts)
    assert b.events.sort("line")["time"].to_list() == [datetime(2024, 12, 31, 23, 59, 58, tzinfo=UTC),
                                                       datetime(2025, 1, 1, 0, 0, 2, tzinfo=UTC)]
    assert "file mtime 2025-01-01" in b.inputs[0].anchor


def _write_smi(folder: Path, t0: datetime, kill: datetime, n: int = 80, step: float = 0.5, timed: bool = True,
               name: str = "nvidia-smi.csv", base: datetime | None = None, slope: float = 80) -> None:
    """memory.used ramps `slope` MiB/s from 20500 MiB at `base` (default t0) until the kill, then falls to 500."""
    base = base or t0
    head = "timestamp, index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"
    if not timed:
        head = "index, memory.used [MiB], memory.total [MiB]\n"
    rows = [head]
    for i in range(n):
        t = t0 + timedelta(seconds=i * step)
        used = 20500 + int(slope * (t - base).total_seconds()) if t <= kill else 500
        local = t.astimezone(BERLIN_SUMMER).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        rows.append(f"{local}, 0, {UUID}, 00000000:3B:00.0, NVIDIA H100 80GB HBM3, 81559 MiB, {used} MiB, "
                    f"{81559 - used} MiB\n" if timed else f"0, {used} MiB, 81559 MiB\n")
    (folder / name).write_text("".join(rows))


def _write_apps(folder: Path, t0: datetime, kill: datetime, n: int = 40) -> None:
    rows = []
    for i in range(n):
        t = t0 + timedelta(seconds=i)
        rows.append("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n")
        if t <= kill:
            local = t.astimezone(BERLIN_SUMMER).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
            rows.append(f"{local}, {UUID}, 4242, python, 20000 MiB\n")
    (folder / "compute-apps.csv").write_text("".join(rows))


def test_incident_lines_up_in_raw_dmesg_dmesg_T_and_nvidia_smi(tmp_path):
    """The synthetic trio through the parsers: the kill in raw dmesg, in dmesg -T and the GPU memory fall
    in nvidia-smi agree within one second, and no skew is reported."""
    need("kernel-log", "nvidia-smi-csv", "nvidia-smi-apps")
    kill = _at(700.121212)
    t0 = kill.replace(microsecond=0) - timedelta(seconds=20) + timedelta(milliseconds=177)
    write_raw(tmp_path / "dmesg.txt")
    write_T(tmp_path / "dmesg-T.txt")
    _write_smi(tmp_path, t0, kill)
    _write_apps(tmp_path, t0, kill)
    opts = Options(tz="Europe/Berlin", tz_from_user=True)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    _assert_lines_up(b, 4242, tolerance=1.0)


def test_same_incident_with_nvidia_smi_an_hour_off_reports_skew(tmp_path):
    need("kernel-log", "nvidia-smi-csv", "nvidia-smi-apps")
    kill = _at(700.121212)
    t0 = kill.replace(microsecond=0) - timedelta(seconds=20) + timedelta(milliseconds=177)
    write_raw(tmp_path / "dmesg.txt")
    write_T(tmp_path / "dmesg-T.txt")
    _write_smi(tmp_path, t0, kill)
    opts = Options(tz="Europe/Berlin", tz_from_user=True, tz_overrides={"nvidia-smi.csv": "Europe/London"})
    _write_apps(tmp_path, t0, kill)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    smi = next(i for i in b.inputs if i.path.endswith("nvidia-smi.csv"))
    assert smi.meta.get("skew_seconds") == pytest.approx(-3600, abs=1.5)
    assert any("time zone" in n for n in smi.notes)


def test_untimed_nvidia_smi_placed_by_its_timed_twin(tmp_path):
    need("nvidia-smi-csv")
    t0 = datetime(2024, 5, 6, 10, 0, 0, 177000, tzinfo=UTC)
    kill = t0 + timedelta(seconds=61.3)
    _write_smi(tmp_path, t0, kill, n=200, step=0.5)
    # started 7 s after the timed one, -l 1
    _write_smi(tmp_path, t0 + timedelta(seconds=7.2), kill, n=90, step=1.0, timed=False, name="nvidia-smi-l1.csv",
               base=t0)
    opts = Options(tz="Europe/Berlin", tz_from_user=True)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    l1 = next(i for i in b.inputs if i.path.endswith("nvidia-smi-l1.csv"))
    assert l1.anchor.startswith("untimed, aligned to "), (l1.anchor, l1.notes)
    first = b.samples.filter(pl.col("source").str.ends_with("nvidia-smi-l1.csv"))["time"].min()
    assert abs((first - (t0 + timedelta(seconds=7.2))).total_seconds()) < 0.6


def test_untimed_nvidia_smi_with_another_curve_is_not_placed(tmp_path):
    need("nvidia-smi-csv")
    t0 = datetime(2024, 5, 6, 10, 0, 0, 177000, tzinfo=UTC)
    _write_smi(tmp_path, t0, t0 + timedelta(seconds=61.3), n=200, step=0.5)
    # the same fall, but a ramp of half the slope (another job): the fall alone fits at r > 0.99 when the
    # interval is stretched, yet the readings around it disagree: no placement may be invented
    _write_smi(tmp_path, t0 + timedelta(seconds=7.2), t0 + timedelta(seconds=61.3), n=90, step=1.0, timed=False,
               name="nvidia-smi-l1.csv", base=t0 + timedelta(seconds=7.2), slope=40)
    opts = Options(tz="Europe/Berlin", tz_from_user=True)
    b = align(ingest.load([str(tmp_path)], opts), opts)
    l1 = next(i for i in b.inputs if i.path.endswith("nvidia-smi-l1.csv"))
    assert l1.anchor.startswith("no clock"), l1.anchor
    assert b.samples.filter(pl.col("source").str.ends_with("nvidia-smi-l1.csv"))["time"].null_count() == 90


# ---------------------------------------------------------------------------------------------- recorded

def _front_matter(readme: Path) -> dict[str, str]:
    text = readme.read_text(errors="replace") if readme.exists() else ""
    m = re.match(r"---\n(.*?)\n---", text, re.S)
    return dict(re.findall(r"^(\w+): (.*)$", m.group(1), re.M)) if m else {}


def _recorded_incidents() -> list[Path]:
    found = []
    for d in sorted((ROOT / "sample_logs").glob("*/")):
        if (d / "dmesg.txt").exists() and ((d / "dmesg-T.txt").exists() or (d / "dmesg-iso.txt").exists()):
            if "killed_pid" in _front_matter(d / "README.md"):
                found.append(d)
    return found


def _assert_lines_up(b, pid: int, tolerance: float, truth: datetime | None = None) -> None:
    kills = b.events.filter((pl.col("kind") == "oom_kill") & (pl.col("pid") == pid))
    by_file = {os.path.basename(s): t for s, t in kills.select("source", "time").iter_rows()}
    raw = by_file.get("dmesg.txt")
    assert raw is not None, f"the raw dmesg kill of pid {pid} got no time: {b.inputs}"
    for name in ("dmesg-T.txt", "dmesg-iso.txt"):
        if name in by_file:
            assert abs((raw - by_file[name]).total_seconds()) <= tolerance, (name, raw, by_file[name])
    if truth is not None:
        assert abs((raw - truth).total_seconds()) <= tolerance
    # nvidia-smi: the GPU memory fall caused by the kill lies within the tolerance of the kill
    mem = (b.samples.filter(pl.col("source").str.ends_with("/nvidia-smi.csv") & (pl.col("series") == "memory.used"))
           .sort("time").select("time", "bytes"))
    if mem.height:
        falls = mem.with_columns(pl.col("time").shift(1).alias("before"), (pl.col("bytes").shift(1) - pl.col("bytes")).alias("drop"))
        falls = falls.filter((pl.col("time") >= raw - timedelta(seconds=tolerance)) & (pl.col("drop") > 64 * 2**20))
        assert falls.height, "no GPU memory fall after the kill in nvidia-smi.csv"
        fall = falls.row(0, named=True)
        assert fall["before"] <= raw + timedelta(seconds=tolerance), (fall, raw)
        assert fall["time"] >= raw - timedelta(seconds=tolerance)
    for info in b.inputs:
        assert "skew_seconds" not in info.meta, (info.path, info.notes)


@pytest.mark.parametrize("folder", _recorded_incidents() or [None], ids=lambda p: p.name if p else "none-recorded")
def test_recorded_incident_lines_up_within_a_second(folder):
    if folder is None:
        pytest.skip("no recorded incident with dmesg.txt + dmesg-T.txt/dmesg-iso.txt in sample_logs/ yet")
    need("kernel-log", "nvidia-smi-csv")
    fm = _front_matter(folder / "README.md")
    opts = Options(tz=fm.get("tz", "UTC"), tz_from_user=True)
    names = [str(folder / n) for n in ("dmesg.txt", "dmesg-T.txt", "dmesg-iso.txt", "nvidia-smi.csv",
                                       "compute-apps.csv") if (folder / n).exists()]
    b = align(ingest.load(names, opts), opts)
    truth = None
    if fm.get("kill_time"):
        truth = pl.select(parse_offset_datetime(pl.lit(fm["kill_time"]))).item()
    _assert_lines_up(b, int(fm["killed_pid"]), tolerance=1.0, truth=truth)


def _recorded_with_untimed_l1() -> list[Path]:
    return [d for d in sorted((ROOT / "sample_logs").glob("*/"))
            if (d / "nvidia-smi.csv").exists() and (d / "nvidia-smi-l1.csv").exists()]


@pytest.mark.parametrize("folder", _recorded_with_untimed_l1() or [None], ids=lambda p: p.name if p else "none-recorded")
def test_recorded_untimed_nvidia_smi_placed_where_it_was_started(folder):
    """The recorder starts the timed `nvidia-smi.csv` logger and the untimed `-l 1` one together and
    stops them together: where curve matching places the untimed log, its first and last readings land
    within a second and a half of the timed log's first and last."""
    if folder is None:
        pytest.skip("no recorded folder with nvidia-smi.csv and nvidia-smi-l1.csv yet")
    need("nvidia-smi-csv")
    fm = _front_matter(folder / "README.md")
    opts = Options(tz=fm.get("tz", "UTC"), tz_from_user=True)
    b = align(ingest.load([str(folder / "nvidia-smi.csv"), str(folder / "nvidia-smi-l1.csv")], opts), opts)
    l1 = next(i for i in b.inputs if i.path.endswith("nvidia-smi-l1.csv"))
    placed = b.samples.filter(pl.col("source").str.ends_with("nvidia-smi-l1.csv"))["time"]
    if not l1.anchor.startswith("untimed, aligned"):
        assert placed.null_count() == placed.len(), l1.anchor
        return
    timed = b.samples.filter(pl.col("source").str.ends_with("/nvidia-smi.csv"))["time"]
    assert abs((placed.min() - timed.min()).total_seconds()) <= 1.5, l1.anchor
    assert abs((placed.max() - timed.max()).total_seconds()) <= 1.5, l1.anchor


def test_nvidia_smi_through_the_dst_fold_stays_monotonic(tmp_path):
    """Berlin, 2024-10-27: 02:00-03:00 happens twice. A 10-minute log through it, read in file order,
    keeps ten-minute steps in UTC."""
    need("nvidia-smi-csv")
    first = datetime(2024, 10, 26, 23, 40, tzinfo=UTC)   # 01:40 CEST
    rows = ["timestamp, index, memory.used [MiB], memory.total [MiB]\n"]
    for i in range(12):
        t = (first + timedelta(minutes=10 * i)).astimezone(ZoneInfo("Europe/Berlin"))
        rows.append(f"{t.strftime('%Y/%m/%d %H:%M:%S')}.000, 0, {1000 + i} MiB, 81559 MiB\n")
    (tmp_path / "gpu.csv").write_text("".join(rows))
    opts = Options(tz="Europe/Berlin", tz_from_user=True)
    b = align(ingest.load([str(tmp_path / "gpu.csv")], opts), opts)
    times = b.samples.filter(pl.col("series") == "memory.used").sort("line")["time"].to_list()
    assert times == [first + timedelta(minutes=10 * i) for i in range(12)]
