"""Kernel logs: every real snippet with the facts a person reads off it, every line prefix of
docs/formats.md §3.1, every OOM-killer generation of §3.2, year inference, scanning, rotated-set dedupe."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from conftest import REALWORLD, parse_file, realworld
from forensics import ingest, timeline
from forensics.options import Options
from forensics.parsers.kernel import nvrm_log, oom
from forensics.parsers.kernel import syslog as kernel
from forensics.io.sources import Source

NAME = "kernel-log"
UTC = Options(tz="UTC")


def utc(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc)


def write(tmp_path: Path, text: str, name: str = "kern.log", mtime: datetime | None = None) -> Path:
    p = tmp_path / name
    p.write_text(text)
    if mtime is not None:
        os.utime(p, (mtime.timestamp(), mtime.timestamp()))
    return p


def events(parsed, kind: str) -> list[dict]:
    rows = parsed.events.filter(pl.col("kind") == kind).to_dicts()
    for r in rows:
        r["d"] = json.loads(r["detail"])
    return rows


def only_kill(parsed) -> dict:
    kills = events(parsed, "oom_kill")
    assert len(kills) == 1, kills
    return kills[0]


# -- real snippets -------------------------------------------------------------------------------

def test_kernlog_oom_01_terminal_padding_is_rejoined():
    _, p = parse_file(realworld("kernlog_oom_01.txt"), UTC, expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"], k["line"]) == (25315, "python3", 3)
    assert k["uptime"] == pytest.approx(2059991.491542) and k["time"] is None
    d = k["d"]
    assert d["anon_rss"] == 31451456 * 1024
    assert k["bytes"] == (31451456 + 74816 + 12296) * 1024
    assert d["scope"] == "global" and d["constraint"] == "CONSTRAINT_NONE"
    # "me<padding>ms_allowed" and "pgtables:690<padding>68kB" are one token each again
    assert d["mems_allowed"] == "0" and d["pgtables"] == 69068 * 1024
    assert d["task_memcg"] == "/user.slice" and d["uid"] == 0
    reaped = events(p, "oom_reaped")
    assert [(r["pid"], r["d"]["file_rss"]) for r in reaped] == [(25315, 74732 * 1024)]
    assert p.clock == "uptime"


def test_kernlog_oom_02_old_two_line_form():
    _, p = parse_file(realworld("kernlog_oom_02.txt"), UTC, expect=NAME)
    k1, k2 = events(p, "oom_kill")
    assert (k1["pid"], k1["process"], k1["d"]["anon_rss"]) == (25635, "python", 23902876 * 1024)
    assert k1["d"]["selected_pid"] == 25635 and k1["d"]["score"] == 974 and k1["d"]["scope"] == "global"
    assert k1["d"]["shmem_rss"] is None and k1["bytes"] == (23902876 + 154436) * 1024
    # a lone `Killed process` line does not say whether the OOM was global or in a cgroup
    assert (k2["pid"], k2["d"]["anon_rss"], k2["d"]["scope"]) == (9666, 23892380 * 1024, None)


def test_kernlog_oom_04_syslog_prefix_and_comm_with_parens():
    _, p = parse_file(realworld("kernlog_oom_04.txt"), Options(tz="UTC", year=2021), expect=NAME)
    kills = events(p, "oom_kill")
    assert [(k["pid"], k["process"]) for k in kills] == [
        (15784, "python3"), (15925, "(resolved)"), (15783, "python3"), (15934, "(resolved)")]
    k = kills[1]
    assert k["d"]["anon_rss"] == 4064 * 1024 and k["d"]["scope"] == "global"
    assert k["time"] == utc("2021-05-15T23:09:30Z") and k["uptime"] == pytest.approx(518.061172)
    assert k["d"]["host"] == "ubuntu-s-1vcpu-2gb-ams3-01"
    assert [r["process"] for r in events(p, "oom_reaped")][1] == "(resolved)"
    assert p.clock == "wall-yearless"
    # lines with both clocks give the boot time: 23:09:30 - 518.05 s
    boot = utc(p.meta["boots"][0]["boot_time"])
    assert abs((boot - utc("2021-05-15T23:00:52Z")).total_seconds()) < 2


def test_kernlog_oom_05_trigger_with_space_and_hash():
    _, p = parse_file(realworld("kernlog_oom_05.txt"), Options(tz="UTC", year=2022), expect=NAME)
    (inv,) = events(p, "oom_invoked")
    assert (inv["process"], inv["pid"]) == ("GC Thread#9", 25671)
    assert inv["d"]["gfp_mask"] == "0x100cca(GFP_HIGHUSER_MOVABLE)" and inv["d"]["order"] == 0
    assert inv["d"]["host"] == "netlogo01" and inv["uptime"] == pytest.approx(7097.004932)
    assert not events(p, "oom_kill")


def test_kernlog_oom_07_dmesg_T_memcg_old_form_and_task_row():
    _, p = parse_file(realworld("kernlog_oom_07.txt"), Options(tz="Europe/Berlin"), expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"]) == (28438, "java")
    assert k["time"] == utc("2017-12-06T23:05:15Z")  # [Thu Dec  7 00:05:15 2017] in Berlin
    d = k["d"]
    assert d["scope"] == "memcg" and d["selected_pid"] == 24572
    assert d["memcg"].startswith("/kubepods/pod95387fa4-da9c-11e7-9d36-5254b24cbf5e/6895a3e")
    assert d["anon_rss"] == 466160 * 1024 and k["bytes"] == (466160 + 13684) * 1024
    row = d["task"]
    assert row["pid"] == 28438 and row["nr_ptes"] == 1661 and row["rss_pages"] == 119961
    assert row["rss_bytes"] == 119961 * 4096 and row["oom_score_adj"] == -998
    (inv,) = events(p, "oom_invoked")
    assert inv["pid"] == 14881 and inv["d"]["mems_allowed"] == "0"
    assert p.clock == "wall-assumed"
    s = p.samples.filter(pl.col("series") == "host.rss")
    assert s.select("pid", "bytes", "label").row(0) == (28438, 119961 * 4096, "java")
    assert any("4096-byte pages" in n for n in p.notes)


def test_kernlog_oom_08_memcg_one_liner():
    _, p = parse_file(realworld("kernlog_oom_08.txt"), UTC, expect=NAME)
    k = only_kill(p)
    d = k["d"]
    assert (k["pid"], k["process"], d["scope"]) == (63214, "uwsgi", "memcg")
    assert (d["anon_rss"], d["shmem_rss"], d["pgtables"]) == (164992 * 1024, 92 * 1024, 1372 * 1024)
    assert (d["uid"], d["oom_score_adj"]) == (0, 986)
    (inv,) = events(p, "oom_invoked")
    assert (inv["process"], inv["pid"], inv["d"]["oom_score_adj"]) == ("uwsgi", 63635, 986)


def test_kernlog_oom_10_iso_comma_to_utc():
    _, p = parse_file(realworld("kernlog_oom_10.txt"), UTC, expect=NAME)
    (inv,) = events(p, "oom_invoked")
    assert inv["time"] == utc("2024-04-29T12:55:41.678628Z")
    k = only_kill(p)
    assert (k["pid"], k["process"], k["d"]["anon_rss"]) == (1440763, "perl", 60356340 * 1024)
    assert k["time"] == utc("2024-04-29T12:55:41.679700Z")
    assert k["d"]["trigger"] == "pool" and k["d"]["scope"] == "global" and k["d"]["uid"] == 21417
    assert k["d"]["task_memcg"] == "/user.slice/user-21417.slice/user@21417.service"
    assert p.clock == "wall"


def test_kernlog_oom_11_newest_task_table_header():
    _, p = parse_file(realworld("kernlog_oom_11.txt"), UTC, expect=NAME)
    s = p.samples.sort("line")
    assert s.height == 8
    assert s.select("pid", "label", "bytes").row(0) == (375, "systemd-journal", 2008 * 4096)
    assert s["time"][0] == utc("2025-12-08T17:51:31Z")
    rows = oom.task_rows(oom.kp.decode(Source.open(realworld("kernlog_oom_11.txt")).frame(), UTC, "x", None).records)
    d = oom.row_dict(rows.row(0, named=True))
    assert (d["rss_anon"], d["rss_file"], d["rss_shmem"], d["pgtables_bytes"]) == (160, 1848, 0, 102400)


def test_kernlog_oom_13_headerless_row_matched_by_tgid():
    _, p = parse_file(realworld("kernlog_oom_13.txt"), Options(tz="UTC", year=2017), expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"], k["d"]["anon_rss"]) == (7748, "python", 11500204 * 1024)
    assert k["d"]["host"] == "169" and k["time"] == utc("2017-08-18T03:19:11Z")
    assert k["d"]["task"]["tgid"] == 7748 and k["d"]["task"]["nr_ptes"] == 5692


def test_kernlog_oom_14_task_in_hard_wrap_and_missing_bracket():
    _, p = parse_file(realworld("kernlog_oom_14.txt"), UTC, expect=NAME)
    k = only_kill(p)
    d = k["d"]
    # the paste ends at the `Kill process` line: the kill is inferred from it, bytes from the table
    assert (k["pid"], k["process"], d["scope"]) == (62685, "bash", "memcg")
    assert "inferred" in d and k["bytes"] == 679 * 4096
    cg = "/kubepods/pod951f6bc5-c5a5-11ea-8707-80e455f266a2/024952d653ef1cd852f875a61bd27cf45cb1fd6cab3659ca7e5f12f037d99aa9"
    assert d["memcg"] == cg and d["task_memcg"] == cg  # "/kubepo" + "ds/pod..." rejoined
    assert (d["memcg_usage"], d["memcg_limit"], d["memcg_failcnt"]) == (524288 * 1024, 524288 * 1024, 0)
    assert d["task"]["pgtables_bytes"] == 65536
    # the first line lost its "[": still an uptime
    assert p.events["uptime"].min() is not None
    assert p.samples.height == 2


def test_kernlog_oom_16_nodemask_double_space_and_trailing_padding():
    _, p = parse_file(realworld("kernlog_oom_16.txt"), UTC, expect=NAME)
    (inv,) = events(p, "oom_invoked")
    d = inv["d"]
    assert (inv["process"], inv["pid"], d["order"], d["oom_score_adj"], d["nodemask"]) == ("cp", 4289, 0, -998, "(null)")


def test_kernlog_oom_17_wrapped_dockerd_line_and_rhel_cpu_line():
    _, p = parse_file(realworld("kernlog_oom_17.txt"), Options(tz="UTC", year=2018), expect=NAME)
    (inv,) = events(p, "oom_invoked")
    assert (inv["process"], inv["pid"], inv["d"]["mems_allowed"]) == ("thrash", 11554, "0-1")
    assert inv["time"] == utc("2018-12-11T10:48:09Z")
    assert p.skipped.counts.get("no log prefix", 0) == 0  # the wrapped tail joined its line


def test_kernlog_oom_19_printk_caller():
    _, p = parse_file(realworld("kernlog_oom_19.txt"), UTC, expect=NAME)
    assert [(e["process"], e["pid"], e["uptime"]) for e in events(p, "oom_invoked")] == [
        ("trinity-c4", 7791, pytest.approx(218.519632)), ("trinity-c1", 5443, pytest.approx(424.617670))]


def test_kernlog_oom_20_openwrt():
    _, p = parse_file(realworld("kernlog_oom_20.txt"), UTC, expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"], k["bytes"]) == (1350, "udhcpc", (36 + 4 + 0) * 1024)
    assert k["time"] == utc("2020-01-25T09:40:15Z") and k["uptime"] == pytest.approx(22042.602270)
    assert p.samples.select("pid", "label").row(0) == (691, "ubusd")
    assert len(p.meta["boots"]) == 2  # two boots (two pastes)


def test_kernlog_oom_22_ancient_form():
    _, p = parse_file(realworld("kernlog_oom_22.txt"), Options(tz="UTC", year=2002), expect=NAME)
    kills = events(p, "oom_kill")
    assert [(k["pid"], k["process"]) for k in kills] == [
        (475, "identd"), (660, "xfs"), (415, "rpc.statd"), (397, "portmap")]
    assert all(k["bytes"] is None for k in kills)
    assert kills[3]["time"] == utc("2002-03-11T01:20:31Z")


def test_kernlog_oom_23_memcg_summary_without_killed_line():
    _, p = parse_file(realworld("kernlog_oom_23.txt"), UTC, expect=NAME)
    k1, k2 = events(p, "oom_kill")
    assert (k1["pid"], k1["process"], k1["d"]["scope"], k1["d"]["constraint"]) == (371272, "bash", "memcg", "CONSTRAINT_MEMCG")
    assert k1["d"]["memcg"] == "/system.slice/docker-6815d730cf460a9247e8c1a19ae539dc08a1436a1cbafb096afd106e5d63d082.scope"
    assert "inferred" in k1["d"]
    # the second summary is cut before task=/pid=: a memcg kill of an unknown task, no pid invented
    assert k2["pid"] is None and k2["d"]["scope"] == "memcg" and k2["d"]["mems_allowed"] == "0-1"
    big = p.samples.filter(pl.col("pid") == 184260)
    assert big["bytes"].to_list() == [236719 * 4096]


def test_kernlog_oom_15_split_summary_alone_names_the_victim():
    """The two records of an early-4.19 summary are one summary, and with no Killed process line after
    it the summary alone gives the kill (victim, cgroup), marked as inferred from it."""
    _, p = parse_file(realworld("kernlog_oom_15.txt"), UTC, expect=NAME)
    k = only_kill(p)
    d = k["d"]
    assert (k["pid"], k["process"], k["line"], k["bytes"]) == (5096, "firewalld", 2, None)
    assert (d["constraint"], d["cpuset"], d["mems_allowed"], d["scope"]) == ("CONSTRAINT_NONE", "/", "0", "global")
    assert (d["task_memcg"], d["uid"], d["memcg"]) == ("/", 0, None)
    assert d["inferred_from"] == "oom_kill_summary" and "Killed process line is not in the log" in d["inferred"]
    assert d["evidence_lines"] == [2] and k["text"].count("\n") == 1   # both records quoted
    assert list(p.skipped.counts) == ["not a log line (provenance, separator, shell prompt)"]


def test_split_summary_pasted_into_a_job_log_is_scanned_whole(tmp_path):
    """The same two records at the end of a training log (found by the scanner, not claimed as a kernel
    log): the `,global_oom,...` half is read too, so the victim is known."""
    lines = realworld("kernlog_oom_15.txt").read_text().splitlines()[1:]
    text = ("2024-01-01 10:00:00,000 INFO train: step 1 loss 2.0\n" * 30
            + "RuntimeError: DataLoader worker (pid 5096) is killed by signal: Killed.\n"
            + "$ dmesg | tail -2\n" + "\n".join(lines) + "\n")
    src = Source.open(write(tmp_path, text, "train.log"))
    assert kernel.sniff(src.head()) is None
    _, results = ingest.parse_one(src, UTC)
    (k,) = [e for r in results for e in r.events.to_dicts() if e["kind"] == "oom_kill"]
    d = json.loads(k["detail"])
    assert (k["pid"], k["process"], d["task_memcg"], d["uid"]) == (5096, "firewalld", "/", 0)
    assert d["inferred_from"] == "oom_kill_summary"


def test_journal_iso_01_all_offsets_read():
    _, p = parse_file(realworld("journal_iso_01.txt"), UTC, expect=NAME)
    assert p.clock == "wall" and p.events.height == 0
    assert p.meta["first_time"] == "2022-11-24T03:00:35.886257Z"
    assert p.meta["last_time"] == "2023-09-08T15:20:47Z"  # 17:20:47+0200
    assert set(p.meta["hosts"]) == {"tarta", "diskfarm"}
    assert p.skipped.counts["not a log line (provenance, separator, shell prompt)"] >= 3


@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("kernlog_oom_*.txt")))
def test_every_kernlog_is_claimed_by_kernel_log(name):
    _, p = parse_file(realworld(name), UTC, expect=NAME)
    assert p.records > 0


OTHER_FAMILIES = ("nvsmi_", "torch_", "sanitizer_", "stepmem_", "deepspeed_")


@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("*.txt") if p.name.startswith(OTHER_FAMILIES)))
def test_sniffs_leave_other_families_alone(name):
    head = Source.open(realworld(name)).head()
    assert kernel.sniff(head) is None
    assert nvrm_log.sniff(head) is None


# -- every prefix of docs/formats.md §3.1 ----------------------------------------------------------------

KILL = ("Out of memory: Killed process 4242 (python3) total-vm:1000kB, anon-rss:400kB, file-rss:100kB, "
        "shmem-rss:24kB, UID:1000 pgtables:80kB oom_score_adj:0")
REAP = "oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"
BERLIN = Options(tz="Europe/Berlin")
Y2023 = Options(tz="UTC", year=2023)

PREFIXES = [
    # id, prefix of both lines, options, time, uptime, host, clock
    ("dmesg", "[  687.293876] ", UTC, None, 687.293876, None, "uptime"),
    ("printk-caller", "[  218.519632][ T7791] ", UTC, None, 218.519632, None, "uptime"),
    ("dmesg-x", "kern  :err   : [  687.293876] ", UTC, None, 687.293876, None, "uptime"),
    ("dmesg-r", "<3>[  687.293876] ", UTC, None, 687.293876, None, "uptime"),
    ("dmesg-T", "[Thu Dec  7 00:05:14 2017] ", BERLIN, "2017-12-06T23:05:14Z", None, None, "wall-assumed"),
    ("dmesg-iso", "2024-04-29T14:55:41,678628+02:00 ", UTC, "2024-04-29T12:55:41.678628Z", None, None, "wall"),
    ("syslog", "May 15 23:09:30 host1 kernel: [  518.050606] ", Y2023, "2023-05-15T23:09:30Z", 518.050606, "host1", "wall-yearless"),
    ("syslog-berlin", "May 15 23:09:30 host1 kernel: [  518.050606] ", Options(tz="Europe/Berlin", year=2023),
     "2023-05-15T21:09:30Z", 518.050606, "host1", "wall-yearless"),
    ("syslog-no-uptime", "Aug 18 03:19:11 169 kernel: ", Y2023, "2023-08-18T03:19:11Z", None, "169", "wall-yearless"),
    ("syslog-padded-day", "Dec  2 10:43:35 worker4 kernel: [240314.528856] ", Y2023, "2023-12-02T10:43:35Z", 240314.528856, "worker4", "wall-yearless"),
    ("journal-short", "Jun 16 15:09:07 ubuntu kernel: ", Y2023, "2023-06-16T15:09:07Z", None, "ubuntu", "wall-yearless"),
    ("journal-short-localized", "okt 20 03:23:46 myhost kernel: ", Y2023, "2023-10-20T03:23:46Z", None, "myhost", "wall-yearless"),
    ("journal-short-lowercase", "jun 20 03:23:46 myhost kernel: ", Y2023, "2023-06-20T03:23:46Z", None, "myhost", "wall-yearless"),
    ("short-iso-old", "2023-09-08T17:20:30+0200 tarta kernel: ", UTC, "2023-09-08T15:20:30Z", None, "tarta", "wall"),
    ("short-iso-new", "2023-09-08T17:20:30+02:00 tarta kernel: ", UTC, "2023-09-08T15:20:30Z", None, "tarta", "wall"),
    ("short-iso-precise", "2023-09-08T17:20:30.655028+0200 tarta kernel: ", UTC, "2023-09-08T15:20:30.655028Z", None, "tarta", "wall"),
    ("rsyslog-rfc3339", "2026-09-02T09:08:50.880492+00:00 Server1 kernel: ", UTC, "2026-09-02T09:08:50.880492Z", None, "Server1", "wall"),
    ("rsyslog-rfc3339-uptime", "2026-09-02T09:08:50.880492+00:00 Server1 kernel: [  518.050606] ", UTC,
     "2026-09-02T09:08:50.880492Z", 518.050606, "Server1", "wall"),
    ("short-full", "Fri 2023-09-08 17:20:30 CEST tarta kernel: ", BERLIN, "2023-09-08T15:20:30Z", None, "tarta", "wall-assumed"),
    ("short-unix", "1694186430.655028 tarta kernel: ", UTC, "2023-09-08T15:20:30.655028Z", None, "tarta", "wall"),
    ("openwrt", "Sun Jul 27 09:17:38 2025 kern.warn kernel: [155605.802542] ", UTC, "2025-07-27T09:17:38Z", 155605.802542, None, "wall-assumed"),
    ("talos", "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291882381Z]: ", UTC, "2026-04-22T21:27:51.291882Z", None, "192.168.11.119", "wall"),
    ("trimmed", "kernel: ", UTC, None, None, None, "none"),
    ("bare", "", UTC, None, None, None, "none"),
    ("ci-bracketed", "[2024-01-15T18:10:29.216Z] ", UTC, "2024-01-15T18:10:29.216Z", None, None, "wall"),
    ("ci-bracketed-no-zone", "[2024-01-15 18:10:29,216] ", BERLIN, "2024-01-15T17:10:29.216Z", None, None, "wall-assumed"),
    ("short-full-offset", "Fri 2023-09-08 17:20:30 +0200 tarta kernel: ", BERLIN, "2023-09-08T15:20:30Z", None, "tarta",
     "wall-assumed"),
    ("short-full-utc", "Fri 2023-09-08 17:20:30 UTC tarta kernel: ", BERLIN, "2023-09-08T17:20:30Z", None, "tarta",
     "wall-assumed"),
    ("github-actions-wrapped-dmesg", "2026-01-15T18:10:29.2167389Z [  687.293876] ", UTC, None, 687.293876, None, "uptime"),
]


@pytest.mark.parametrize("case", PREFIXES, ids=[c[0] for c in PREFIXES])
def test_prefix(tmp_path, case):
    _, prefix, opts, when, uptime, host, clock = case
    path = write(tmp_path, f"{prefix}{KILL}\n{prefix}{REAP}\n")
    _, p = parse_file(path, opts, expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"], k["bytes"]) == (4242, "python3", 524 * 1024)
    assert k["time"] == (utc(when) if when else None)
    assert k["uptime"] == (pytest.approx(uptime) if uptime else None)
    assert k["d"]["host"] == host
    assert p.clock == clock
    assert events(p, "oom_reaped")[0]["pid"] == 4242


def test_journal_json_export(tmp_path):
    def rec(us, mono, msg, transport="kernel"):
        return json.dumps({"__CURSOR": "s=1", "__REALTIME_TIMESTAMP": str(us), "_HOSTNAME": "gpu1",
                           "_TRANSPORT": transport, "_SOURCE_MONOTONIC_TIMESTAMP": str(mono), "MESSAGE": msg},
                          separators=(", ", " : "))
    text = "\n".join([
        rec(1700000000000000, 4999000000, "Started Session 3 of user root.", transport="journal"),
        rec(1700000000123456, 5000123456, KILL),
        rec(1700000000200000, 5000200000, REAP),
    ]) + "\n"
    _, p = parse_file(write(tmp_path, text, "oom.json"), UTC, expect=NAME)
    k = only_kill(p)
    assert k["time"] == utc("2023-11-14T22:13:20.123456Z")
    assert k["uptime"] == pytest.approx(5000.123456)
    assert k["d"]["host"] == "gpu1" and p.clock == "wall"


def test_cloud_logging_json_lines_text_payload(tmp_path):
    line = json.dumps({"insertId": "x1", "textPayload": f"[195998.443208] {KILL}\r\n",
                       "timestamp": "2021-06-01T10:00:00.123456789Z"})
    other = json.dumps({"insertId": "x2", "textPayload": f"[195998.500000] {REAP}\r\n",
                        "timestamp": "2021-06-01T10:00:00.2Z"})
    _, p = parse_file(write(tmp_path, line + "\n" + other + "\n", "serial.json"), UTC, expect=NAME)
    k = only_kill(p)
    assert k["time"] == utc("2021-06-01T10:00:00.123456Z") and k["uptime"] == pytest.approx(195998.443208)


@pytest.mark.parametrize("ts_first", [False, True])
def test_cloud_logging_pretty_json_text_payload(tmp_path, ts_first):
    def entry(payload, ts):
        body = ['    "insertId": "abc",', '    "logName": "projects/p/logs/serialconsole.googleapis.com%2Fserial_port_1_output",',
                f'    "textPayload": {json.dumps(payload)},', f'    "timestamp": "{ts}"']
        if ts_first:
            body = [body[3] + ","] + body[:2] + [body[2].rstrip(",")]
        return "  {\n" + "\n".join(body) + "\n  }"
    text = "[\n" + entry(f"[195998.443208] {KILL}\r\n", "2021-06-01T10:00:00.5Z") + ",\n" + \
           entry(f"[195999.000000] {REAP}\r\n", "2021-06-01T10:00:01Z") + "\n]\n"
    _, p = parse_file(write(tmp_path, text, "serial.json"), UTC, expect=NAME)
    k = only_kill(p)
    assert k["time"] == utc("2021-06-01T10:00:00.5Z") and k["uptime"] == pytest.approx(195998.443208)
    assert events(p, "oom_reaped")[0]["time"] == utc("2021-06-01T10:00:01Z")


# -- OOM-killer generations (docs/formats.md §3.2) -------------------------------------------------------

MODERN = """\
[ 1000.000001] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
[ 1000.000002] CPU: 7 UID: 1000 PID: 5555 Comm: python3 Not tainted 6.8.0-45-generic #45-Ubuntu
[ 1000.000003] Hardware name: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/11/2024
[ 1000.000004] Call Trace:
[ 1000.000005]  <TASK>
[ 1000.000006]  dump_stack_lvl+0x76/0xa0
[ 1000.000007] Mem-Info:
[ 1000.000008] Tasks state (memory values in pages):
[ 1000.000009] [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name
[ 1000.000010] [   5555]  1000  5555 20000000 15000000 14990000     9000     1000 120000000        0             0 python3
[ 1000.000011] [   6000]     0  6000    10000      500      300      200        0    65536        0             0 sshd
[ 1000.000012] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/user.slice/user-1000.slice/session-3.scope,task=python3,pid=5555,uid=1000
[ 1000.000013] Out of memory: Killed process 5555 (python3) total-vm:80000000kB, anon-rss:59960000kB, file-rss:36000kB, shmem-rss:4000kB, UID:1000 pgtables:117188kB oom_score_adj:0
[ 1000.200000] oom_reaper: reaped process 5555 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:4000kB
"""


def test_modern_sequence_all_fields(tmp_path):
    _, p = parse_file(write(tmp_path, MODERN), UTC, expect=NAME)
    k = only_kill(p)
    d = k["d"]
    assert (k["pid"], k["process"], k["line"]) == (5555, "python3", 13)
    assert k["bytes"] == (59960000 + 36000 + 4000) * 1024
    assert d["scope"] == "global" and d["memcg"] is None and d["constraint"] == "CONSTRAINT_NONE"
    assert d["task_memcg"] == "/user.slice/user-1000.slice/session-3.scope" and d["mems_allowed"] == "0-1"
    assert (d["total_vm"], d["pgtables"], d["uid"], d["oom_score_adj"]) == (80000000 * 1024, 117188 * 1024, 1000, 0)
    assert (d["trigger"], d["trigger_pid"]) == ("python3", 5555)
    assert d["gfp_mask"] == "0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP)"
    assert d["task"]["rss_anon"] == 14990000 and d["task"]["rss_bytes"] == 15000000 * 4096
    assert d["evidence_lines"] == [1, 10, 12, 13]
    reap = events(p, "oom_reaped")[0]
    assert reap["bytes"] == 4000 * 1024
    assert sorted(p.samples["pid"].to_list()) == [5555, 6000]


def test_memcg_modern_with_oom_memcg(tmp_path):
    text = (
        "[ 8654.886516] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-1.scope,mems_allowed=0,"
        "oom_memcg=/system.slice/docker-1.scope,task_memcg=/system.slice/docker-1.scope/sub,task=bash,pid=371272,uid=0\n"
        "[ 8654.886600] Memory cgroup out of memory: Killed process 371272 (bash) total-vm:5000kB, anon-rss:1000kB, "
        "file-rss:100kB, shmem-rss:0kB, UID:0 pgtables:40kB oom_score_adj:0\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    d = only_kill(p)["d"]
    assert d["scope"] == "memcg" and d["memcg"] == "/system.slice/docker-1.scope"
    assert d["task_memcg"] == "/system.slice/docker-1.scope/sub" and "inferred" not in d


def test_old_two_line_child_sacrificed(tmp_path):
    text = ("[ 100.000001] Out of memory: Kill process 100 (parent) score 974 or sacrifice child\n"
            "[ 100.000002] Killed process 101 (worker) total-vm:2000kB, anon-rss:1000kB, file-rss:20kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"], k["d"]["selected_pid"], k["d"]["score"]) == (101, "worker", 100, 974)
    assert k["d"]["scope"] == "global" and k["bytes"] == 1020 * 1024


def test_old_memcg_two_line(tmp_path):
    text = ("[ 100.000001] Memory cgroup out of memory: Kill process 24572 (java) score 0 or sacrifice child\n"
            "[ 100.000002] Killed process 28438 (java) total-vm:20255636kB, anon-rss:466160kB, file-rss:13684kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    assert only_kill(p)["d"]["scope"] == "memcg"


def test_oom_kill_allocating_task_and_vsz_forms(tmp_path):
    text = ("[ 1.000000] Out of memory (oom_kill_allocating_task): Killed process 7 (a.out) total-vm:10kB, "
            "anon-rss:8kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0\n"
            "[ 2.000000] Killed process 8 (old) vsz:2000kB, anon-rss:1000kB, file-rss:4kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    k1, k2 = events(p, "oom_kill")
    assert (k1["pid"], k1["d"]["message"], k1["d"]["scope"], k1["bytes"]) == (
        7, "Out of memory (oom_kill_allocating_task)", "global", 8 * 1024)
    assert (k2["pid"], k2["d"]["total_vm"], k2["bytes"]) == (8, 2000 * 1024, 1004 * 1024)


def test_early_4_19_split_summary(tmp_path):
    text = ("[   23.346650] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0\n"
            "[   23.346691] ,global_oom,task_memcg=/,task=firewalld,pid=5096,uid=0\n"
            "[   23.346700] Out of memory: Killed process 5096 (firewalld) total-vm:300000kB, anon-rss:20000kB, "
            "file-rss:0kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    d = only_kill(p)["d"]
    assert d["scope"] == "global" and d["task_memcg"] == "/" and d["uid"] == 0
    assert d["evidence_lines"] == [1, 3]


def test_summary_without_cpuset(tmp_path):
    text = ("[ 5.000000] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),task=fuzz_python,pid=16747,uid=0\n"
            "[ 5.000100] Out of memory: Killed process 16747 (fuzz_python) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    d = only_kill(p)["d"]
    assert d["cpuset"] is None and d["constraint"] == "CONSTRAINT_NONE" and d["nodemask"] == "(null)"


def test_pre_4_19_task_in_cgroup(tmp_path):
    text = ("[ 9.000000] Task in /kubepods/pod1/c1 killed as a result of limit of /kubepods/pod1\n"
            "[ 9.000001] memory: usage 524288kB, limit 524288kB, failcnt 12\n"
            "[ 9.000002] Memory cgroup out of memory: Kill process 10 (bash) score 0 or sacrifice child\n"
            "[ 9.000003] Killed process 10 (bash) total-vm:11700kB, anon-rss:2700kB, file-rss:12kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    d = only_kill(p)["d"]
    assert (d["scope"], d["memcg"], d["task_memcg"]) == ("memcg", "/kubepods/pod1", "/kubepods/pod1/c1")
    assert (d["memcg_usage"], d["memcg_limit"], d["memcg_failcnt"]) == (512 << 20, 512 << 20, 12)


@pytest.mark.parametrize("header,row,key,value", [
    ("[ pid ]   uid  tgid total_vm      rss nr_ptes swapents oom_score_adj name",
     "[  300]     0   300    10000     2500      20        0             0 victim", "nr_ptes", 20),
    ("[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
     "[    300]     0   300    10000     2500    65536        0             0 victim", "pgtables_bytes", 65536),
    ("[  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name",
     "[    300]     0   300    10000     2500     2000      400      100    65536        0             0 victim", "rss_shmem", 100),
])
def test_task_table_headers(tmp_path, header, row, key, value):
    text = (f"[ 1.000000] {header}\n[ 1.000001] {row}\n"
            "[ 1.000002] Out of memory: Killed process 300 (victim) total-vm:40000kB, anon-rss:9000kB, file-rss:1000kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    task = only_kill(p)["d"]["task"]
    assert task[key] == value and task["rss_pages"] == 2500 and task["rss_bytes"] == 2500 * 4096
    assert p.samples["bytes"].to_list() == [2500 * 4096]


def test_truncated_killed_line_keeps_pid_without_inventing_bytes(tmp_path):
    text = "[ 1.000000] Out of memory: Killed process 25315 (python3) total-vm:533\n"
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    k = only_kill(p)
    assert (k["pid"], k["process"], k["bytes"], k["d"]["anon_rss"]) == (25315, "python3", None, None)


def test_kills_separated_do_not_share_context(tmp_path):
    text = ("[ 1.000000] a invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
            "[ 1.000001] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),oom_memcg=/a,task_memcg=/a,task=a,pid=1,uid=0\n"
            "[ 1.000002] Memory cgroup out of memory: Killed process 1 (a) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n"
            "[ 9.000002] Killed process 2 (b) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), UTC, expect=NAME)
    k1, k2 = events(p, "oom_kill")
    assert k1["d"]["trigger"] == "a" and k1["d"]["memcg"] == "/a"
    assert k2["d"]["trigger"] is None and k2["d"]["memcg"] is None and k2["d"]["scope"] is None


# -- year inference --------------------------------------------------------------------------------

YEARLESS = ("Dec 31 23:59:58 h kernel: [  100.000000] Out of memory: Killed process 1 (a) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n"
            "Jan  1 00:00:03 h kernel: [  105.000000] Out of memory: Killed process 2 (b) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n")


def test_dec_to_jan_rollover_with_january_mtime(tmp_path):
    path = write(tmp_path, YEARLESS, mtime=datetime(2025, 1, 2, 12, tzinfo=timezone.utc))
    _, p = parse_file(path, UTC, expect=NAME)
    k1, k2 = events(p, "oom_kill")
    assert k1["time"] == utc("2024-12-31T23:59:58Z") and k2["time"] == utc("2025-01-01T00:00:03Z")
    assert "mtime" in p.meta["year_from"]


def test_log_ending_in_december_copied_in_january(tmp_path):
    text = YEARLESS.splitlines()[0] + "\n"
    path = write(tmp_path, text, mtime=datetime(2025, 1, 5, tzinfo=timezone.utc))
    _, p = parse_file(path, UTC, expect=NAME)
    assert only_kill(p)["time"] == utc("2024-12-31T23:59:58Z")


def test_year_option_is_the_year_of_the_last_line(tmp_path):
    path = write(tmp_path, YEARLESS, mtime=datetime(2025, 1, 2, tzinfo=timezone.utc))
    _, p = parse_file(path, Options(tz="UTC", year=2019), expect=NAME)
    k1, k2 = events(p, "oom_kill")
    assert k1["time"].year == 2018 and k2["time"].year == 2019


# -- scanning other files -------------------------------------------------------------------------

def test_scan_finds_oom_pasted_into_a_job_log(tmp_path):
    text = ("epoch 1 step 10 loss 0.5\n" * 30
            + "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244kB, anon-rss:31451456kB, "
              "file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69068kB oom_score_adj:0\n"
            + "epoch 1 step 11 loss 0.4\n")
    src = Source.open(write(tmp_path, text, "job.out"))
    assert kernel.sniff(src.head()) is None
    info, results = ingest.parse_one(src, UTC)
    found = [e for r in results for e in r.events.to_dicts() if e["kind"] == "oom_kill"]
    assert len(found) == 1
    assert (found[0]["pid"], found[0]["line"], found[0]["uptime"]) == (25315, 31, pytest.approx(2059991.491542))


def test_scan_direct(tmp_path):
    lines = pl.DataFrame({"line": [5, 9], "text": [
        "May 15 23:09:30 node kernel: [  518.050606] Out of memory: Killed process 15784 (python3) total-vm:11964kB, anon-rss:4288kB, file-rss:3028kB, shmem-rss:0kB",
        "nothing here"]})
    src = Source.open(write(tmp_path, "x\n"))
    p = kernel.scan(lines, src, Options(tz="UTC", year=2020))
    k = only_kill(p)
    assert (k["pid"], k["line"], k["time"]) == (15784, 5, utc("2020-05-15T23:09:30Z"))


# -- rotated sets -----------------------------------------------------------------------------------

def _kill_line(ts: str, up: str, pid: int) -> str:
    return (f"{ts} node kernel: [{up}] Out of memory: Killed process {pid} (p{pid}) total-vm:1kB, anon-rss:1kB, "
            "file-rss:0kB, shmem-rss:0kB\n")


def test_dedupe_overlapping_rotated_files(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    a = _kill_line("May 15 10:00:00", " 1000.000001", 1)
    b = _kill_line("May 15 11:00:00", " 4600.000001", 2)
    c = _kill_line("May 15 12:00:00", " 8200.000001", 3)
    (d / "kern.log.1").write_text(a + b)
    (d / "kern.log").write_text(b + c)      # copytruncate overlap: b is in both
    (d / "dmesg").write_text("[ 8200.000001] Out of memory: Killed process 3 (p3) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n")
    bundle = ingest.load([str(d)], Options(tz="UTC", year=2024))
    before = bundle.events.filter(pl.col("kind") == "oom_kill")
    assert before.height == 5
    after = timeline.dedupe_events(bundle.events).filter(pl.col("kind") == "oom_kill").sort("pid")
    assert after["pid"].to_list() == [1, 2, 3]
    assert after["source"].to_list() == [str(d / "kern.log.1"), str(d / "kern.log.1"), str(d / "kern.log")]
    assert after["time"].null_count() == 0  # the copy with a wall clock wins over the dmesg one


def test_dedupe_keeps_repeats_inside_one_file_and_clockless_rows(tmp_path):
    kill = "kernel: Out of memory: Killed process 3 (p3) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n"
    same_second = "[Thu Dec  7 00:05:14 2017] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception\n"
    (tmp_path / "a.log").write_text(kill + same_second * 2)
    (tmp_path / "b.log").write_text(kill)
    bundle = ingest.load([str(tmp_path)], UTC)
    after = timeline.dedupe_events(bundle.events)
    assert after.filter(pl.col("kind") == "oom_kill").height == 2   # no clock: never merged
    assert after.filter(pl.col("kind") == "xid").height == 2        # one file: real repeats
    assert timeline.dedupe_events(bundle.events.clear()).height == 0


def test_only_the_kernel_speaks_for_the_kernel(tmp_path):
    text = ("Dec 11 10:48:08 node dockerd[77]: Killed process 5 (x) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n"
            "Dec 11 10:48:08 node nv-hostengine[9]: NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=a, DBE\n"
            "Dec 11 10:48:09 node kernel: Killed process 6 (y) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB\n")
    _, p = parse_file(write(tmp_path, text), Options(tz="UTC", year=2020), expect=NAME)
    assert [k["pid"] for k in events(p, "oom_kill")] == [6] and not events(p, "xid")


def test_dedupe_task_table_samples(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    table = ("May 15 10:00:00 node kernel: [ 1000.000001] [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name\n"
             "May 15 10:00:00 node kernel: [ 1000.000002] [    300]     0   300    10000     2500    65536        0             0 victim\n")
    (d / "kern.log.1").write_text(table)
    (d / "kern.log").write_text(table + table.replace("1000.00000", "2000.00000").replace("10:00:00", "10:16:40"))
    bundle = ingest.load([str(d)], Options(tz="UTC", year=2024))
    assert bundle.samples.height == 3
    kept = timeline.dedupe_samples(bundle.samples)
    assert kept.height == 2 and kept["source"].to_list() == [str(d / "kern.log.1"), str(d / "kern.log")]
