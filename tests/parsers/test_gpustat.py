"""gpustat: every real snippet with its facts (GPU used/total, the processes and who they are), the
header's clock, and --watch output (colour escapes, repeated snapshots)."""
from __future__ import annotations

from datetime import datetime, timezone

from conftest import parse_file, realworld

from forensics.options import Options

MIB = 1 << 20


def rows(name, opts=None):
    _, p = parse_file(realworld(name), opts, expect="gpustat")
    return p, p.samples.sort(["line", "series"]).select("time", "seq", "line", "host", "gpu", "pid", "series",
                                                        "bytes", "total_bytes", "label").rows()


def test_header_and_default_user_processes():
    p, got = rows("gpustat_header_driver_users.txt")
    t = datetime(2018, 10, 30, 20, 50, 35, tzinfo=timezone.utc)
    assert p.clock == "wall-assumed"
    assert got == [(t, 1, 3, "workstation", "0", None, "memory.used", 4479 * MIB, 12196 * MIB, None),
                   (t, 1, 3, "workstation", "0", None, "process.used", 4469 * MIB, 12196 * MIB, "user"),
                   (t, 1, 4, "workstation", "1", None, "memory.used", 4479 * MIB, 12196 * MIB, None),
                   (t, 1, 4, "workstation", "1", None, "process.used", 4469 * MIB, 12196 * MIB, "user")]


def test_header_time_is_local_in_the_zone_given():
    _, got = rows("gpustat_four_p100_idle.txt", Options(tz="America/Chicago"))
    assert {r[0] for r in got} == {datetime(2022, 8, 22, 20, 23, 57, tzinfo=timezone.utc)}
    assert [(r[4], r[7], r[8]) for r in got] == [(str(i), 103 * MIB, 16384 * MIB) for i in range(4)]


def test_processes_not_supported_leave_the_gpu_reading():
    _, got = rows("gpustat_debug_not_supported.txt")
    assert [(r[2], r[6], r[7], r[8]) for r in got] == [(3, "memory.used", 0, 1999 * MIB)]


def test_command_and_pid():
    _, got = rows("gpustat_cmd_pid.txt")
    assert [(r[0], r[5], r[6], r[7], r[9]) for r in got] == [(None, None, "memory.used", 11848 * MIB, None),
                                                             (None, 52046, "process.used", 11821 * MIB, "python")]


def test_degree_sign_form():
    _, got = rows("gpustat_query_repr.txt")
    assert [(r[4], r[7], r[8]) for r in got] == [("0", 0, 12212 * MIB)]


def test_watch_output_with_colours_and_user_command_pid(tmp_path):
    # gpustat --watch --color -upc: the header and lines of each refresh, the escapes its colours add
    esc = "\x1b[1m\x1b[37m"
    snaps = []
    for sec, used in ((0, 30512), (2, 31024)):
        snaps.append(f"{esc}node7\x1b[m  Thu Mar 14 10:42:{sec:02d} 2024  535.104.05\n"
                     f"\x1b[36m[0]\x1b[m \x1b[34mNVIDIA A100-SXM4-80GB\x1b[m | \x1b[31m41'C\x1b[m, \x1b[32m 87 %\x1b[m | "
                     f"\x1b[33m{used}\x1b[m / \x1b[33m81920\x1b[m MB | alice:python/2231({used - 392}M) bob:vllm/77(?M)\n")
    path = tmp_path / "gpustat.log"
    path.write_text("".join(snaps))
    _, p = parse_file(path, expect="gpustat")
    s = p.samples.sort(["seq", "series"])
    assert s["seq"].to_list() == [1, 1, 2, 2]
    assert s.filter(s["series"] == "process.used").select("pid", "label", "bytes").rows() == [
        (2231, "python", 30120 * MIB), (2231, "python", 30632 * MIB)]
    assert s["time"].to_list()[2] == datetime(2024, 3, 14, 10, 42, 2, tzinfo=timezone.utc)
    assert p.skipped.counts == {"a process whose memory gpustat could not read (?M), not read": 2}


def test_snapshots_without_headers_follow_one_another(tmp_path):
    path = tmp_path / "loop.txt"
    path.write_text("".join(f"[0] Tesla T4 | 40'C, 10 % | {u} / 15360 MB | python/9(100M)\n" for u in (1000, 1200, 1400)))
    _, p = parse_file(path, expect="gpustat")
    mem = p.samples.filter(p.samples["series"] == "memory.used").sort("seq")
    assert mem["seq"].to_list() == [1, 2, 3] and mem["bytes"].to_list() == [1000 * MIB, 1200 * MIB, 1400 * MIB]
    assert mem["time"].null_count() == 3
