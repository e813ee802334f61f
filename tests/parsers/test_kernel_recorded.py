"""A real OOM kill recorded for these tests: on the NVIDIA H200 test machine (kernel 6.18, driver
580.159.04), a python3 that allocates 1 MiB blocks was run in a cgroup-v2 group with memory.max=64M
and no swap; the kernel's memcg OOM killer took it. The same kernel buffer was then read with plain
`dmesg`, `dmesg -T`, `dmesg --time-format iso` and `dmesg -x` (for the last three, only the OOM lines
are kept here). /proc/stat gave btime 1796013927 (2026-11-30T04:45:27Z). Verbatim."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
import pytest

from conftest import parse_file
from forensics.options import Options

NAME = "kernel-log"
BOOT = datetime.fromtimestamp(1796013927, tz=timezone.utc)

RAW = """\
[    0.264754] process_api (1): drop_caches: 3
[    0.271333] EXT4-fs (vda): mounted filesystem 00000000-0000-0000-0000-000000000000 r/w without journal. Quota mode: none.
[    0.450011] nvidia: loading out-of-tree module taints kernel.
[    0.539140] nvidia-nvlink: Nvlink Core is being initialized, major device number 240
[    0.539151] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  
[    1.109535] NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.
[    3.715385] NVRM: Persistence mode is deprecated and will be removed in a future release. Please use nvidia-persistenced instead.
[   25.229409] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
[   25.229424] CPU: 10 UID: 0 PID: 422 Comm: python3 Tainted: G           O        6.18.44-fc-v657-gpu #1 PREEMPT(none) 
[   25.229429] Tainted: [O]=OOT_MODULE
[   25.229430] Call Trace:
[   25.229432]  <TASK>
[   25.229435]  dump_stack_lvl+0x5c/0x90
[   25.229443]  dump_stack+0x10/0x18
[   25.229446]  dump_header+0x48/0x1be
[   25.229452]  oom_kill_process.cold+0x8/0x87
[   25.229453]  out_of_memory+0x21b/0x510
[   25.229458]  mem_cgroup_out_of_memory+0xbf/0x110
[   25.229462]  ? mem_cgroup_iter+0x137/0x220
[   25.229465]  try_charge_memcg+0x412/0x6d0
[   25.229468]  charge_memcg+0x34/0x90
[   25.229470]  __mem_cgroup_charge+0x2f/0xa0
[   25.229473]  do_anonymous_page+0x354/0x8f0
[   25.229477]  ? ___pte_offset_map+0x1c/0x110
[   25.229481]  __handle_mm_fault+0xab7/0x1020
[   25.229484]  handle_mm_fault+0xdd/0x330
[   25.229486]  exc_page_fault+0x17c/0x790
[   25.229491]  asm_exc_page_fault+0x27/0x30
[   25.229493] RIP: 0033:0x7f0e3a7a1efa
[   25.229496] Code: 00 00 48 c7 c1 ff ff ff ff c4 e2 e8 f5 c9 c4 e1 fb 92 c9 62 e1 7f 49 7f 00 c3 66 0f 1f 44 00 00 40 0f b6 c6 48 89 d1 48 89 fa <f3> aa 48 89 d0 c3 48 3b 15 09 23 06 00 77 e7 62 e1 fe 48 7f 07 62
[   25.229498] RSP: 002b:00007fff827a8988 EFLAGS: 00010206
[   25.229501] RAX: 0000000000000000 RBX: 00007f0e39de51f0 RCX: 00000000000a5010
[   25.229503] RDX: 00007f0e36563010 RSI: 0000000000000000 RDI: 00007f0e365be000
[   25.229504] RBP: 00007fff827a8a50 R08: 00000000ffffffff R09: 0000000000000000
[   25.229505] R10: 0000000000000022 R11: 0000000000000246 R12: 0000000000100000
[   25.229506] R13: 00007f0e3a5fc628 R14: 0000000000000000 R15: 0000000000000001
[   25.229509]  </TASK>
[   25.229510] memory: usage 65536kB, limit 65536kB, failcnt 25
[   25.229515] swap: usage 0kB, limit 0kB, failcnt 0
[   25.229516] Memory cgroup stats for /gfoom:
[   25.229559] anon 66736128
[   25.229561] file 28672
[   25.229562] kernel 344064
[   25.229563] kernel_stack 0
[   25.229564] pagetables 208896
[   25.229565] sec_pagetables 0
[   25.229565] percpu 288
[   25.229566] sock 0
[   25.229567] vmalloc 0
[   25.229568] shmem 0
[   25.229569] zswap 0
[   25.229570] zswapped 0
[   25.229571] file_mapped 0
[   25.229572] file_dirty 16384
[   25.229572] file_writeback 0
[   25.229573] swapcached 0
[   25.229574] anon_thp 0
[   25.229575] file_thp 0
[   25.229576] shmem_thp 0
[   25.229577] inactive_anon 66727936
[   25.229577] active_anon 8192
[   25.229578] inactive_file 12288
[   25.229579] active_file 16384
[   25.229580] unevictable 0
[   25.229581] slab_reclaimable 110256
[   25.229582] slab_unreclaimable 21248
[   25.229583] slab 131504
[   25.229584] workingset_refault_anon 0
[   25.229585] workingset_refault_file 0
[   25.229586] workingset_activate_anon 0
[   25.229587] workingset_activate_file 0
[   25.229588] workingset_restore_anon 0
[   25.229589] workingset_restore_file 0
[   25.229589] workingset_nodereclaim 24
[   25.229590] pgdemote_kswapd 0
[   25.229591] pgdemote_direct 0
[   25.229592] pgdemote_khugepaged 0
[   25.229593] pgdemote_proactive 0
[   25.229594] pgpromote_success 0
[   25.229595] pgscan 409
[   25.229595] pgsteal 276
[   25.229596] pswpin 0
[   25.229597] pswpout 0
[   25.229598] pgscan_kswapd 0
[   25.229599] pgscan_direct 409
[   25.229599] pgscan_khugepaged 0
[   25.229600] pgscan_proactive 0
[   25.229601] pgsteal_kswapd 0
[   25.229602] pgsteal_direct 276
[   25.229603] pgsteal_khugepaged 0
[   25.229604] pgsteal_proactive 0
[   25.229605] pgfault 16528
[   25.229605] pgmajfault 0
[   25.229606] pgrefill 209
[   25.229607] pgactivate 139
[   25.229608] pgdeactivate 209
[   25.229609] pglazyfree 0
[   25.229610] pglazyfreed 0
[   25.229610] swpin_zero 0
[   25.229611] swpout_zero 0
[   25.229612] zswpin 0
[   25.229613] zswpout 0
[   25.229614] zswpwb 0
[   25.229614] thp_fault_alloc 0
[   25.229615] thp_collapse_alloc 0
[   25.229616] thp_swpout 0
[   25.229617] thp_swpout_fallback 0
[   25.229618] numa_pages_migrated 0
[   25.229619] numa_pte_updates 0
[   25.229619] numa_hint_faults 0
[   25.229620] Tasks state (memory values in pages):
[   25.229621] [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name
[   25.229623] [    422]     0   422    20170    18104    16288     1816         0   204800        0             0 python3
[   25.229627] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=gfoom,mems_allowed=0,oom_memcg=/gfoom,task_memcg=/gfoom,task=python3,pid=422,uid=0
[   25.229641] Memory cgroup out of memory: Killed process 422 (python3) total-vm:80680kB, anon-rss:65152kB, file-rss:7264kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0
"""

CTIME = """\
[Mon Nov 30 04:45:27 2026] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  
[Mon Nov 30 04:45:28 2026] NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.
[Mon Nov 30 04:45:30 2026] NVRM: Persistence mode is deprecated and will be removed in a future release. Please use nvidia-persistenced instead.
[Mon Nov 30 04:45:52 2026] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
[Mon Nov 30 04:45:52 2026] CPU: 10 UID: 0 PID: 422 Comm: python3 Tainted: G           O        6.18.44-fc-v657-gpu #1 PREEMPT(none) 
[Mon Nov 30 04:45:52 2026] memory: usage 65536kB, limit 65536kB, failcnt 25
[Mon Nov 30 04:45:52 2026] Memory cgroup stats for /gfoom:
[Mon Nov 30 04:45:52 2026] Tasks state (memory values in pages):
[Mon Nov 30 04:45:52 2026] [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name
[Mon Nov 30 04:45:52 2026] [    422]     0   422    20170    18104    16288     1816         0   204800        0             0 python3
[Mon Nov 30 04:45:52 2026] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=gfoom,mems_allowed=0,oom_memcg=/gfoom,task_memcg=/gfoom,task=python3,pid=422,uid=0
[Mon Nov 30 04:45:52 2026] Memory cgroup out of memory: Killed process 422 (python3) total-vm:80680kB, anon-rss:65152kB, file-rss:7264kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0
"""

ISO = """\
2026-11-30T04:45:27,646757+00:00 NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  
2026-11-30T04:45:28,217141+00:00 NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.
2026-11-30T04:45:30,822991+00:00 NVRM: Persistence mode is deprecated and will be removed in a future release. Please use nvidia-persistenced instead.
2026-11-30T04:45:52,337015+00:00 python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
2026-11-30T04:45:52,337030+00:00 CPU: 10 UID: 0 PID: 422 Comm: python3 Tainted: G           O        6.18.44-fc-v657-gpu #1 PREEMPT(none) 
2026-11-30T04:45:52,337116+00:00 memory: usage 65536kB, limit 65536kB, failcnt 25
2026-11-30T04:45:52,337122+00:00 Memory cgroup stats for /gfoom:
2026-11-30T04:45:52,337226+00:00 Tasks state (memory values in pages):
2026-11-30T04:45:52,337227+00:00 [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name
2026-11-30T04:45:52,337229+00:00 [    422]     0   422    20170    18104    16288     1816         0   204800        0             0 python3
2026-11-30T04:45:52,337233+00:00 oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=gfoom,mems_allowed=0,oom_memcg=/gfoom,task_memcg=/gfoom,task=python3,pid=422,uid=0
2026-11-30T04:45:52,337247+00:00 Memory cgroup out of memory: Killed process 422 (python3) total-vm:80680kB, anon-rss:65152kB, file-rss:7264kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0
"""

LEVELS = """\
kern  :info  : [   25.229620] Tasks state (memory values in pages):
kern  :info  : [   25.229621] [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name
kern  :info  : [   25.229623] [    422]     0   422    20170    18104    16288     1816         0   204800        0             0 python3
kern  :info  : [   25.229627] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=gfoom,mems_allowed=0,oom_memcg=/gfoom,task_memcg=/gfoom,task=python3,pid=422,uid=0
kern  :err   : [   25.229641] Memory cgroup out of memory: Killed process 422 (python3) total-vm:80680kB, anon-rss:65152kB, file-rss:7264kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0
"""


def _kill(tmp_path, text, opts=None):
    p = tmp_path / "dmesg.txt"
    p.write_text(text)
    _, parsed = parse_file(p, opts or Options(tz="UTC"), expect=NAME)
    kills = parsed.events.filter(pl.col("kind") == "oom_kill").to_dicts()
    assert len(kills) == 1
    return parsed, kills[0], json.loads(kills[0]["detail"])


def test_recorded_raw_dmesg(tmp_path):
    parsed, k, d = _kill(tmp_path, RAW)
    assert (k["pid"], k["process"], k["uptime"]) == (422, "python3", pytest.approx(25.229641))
    assert k["bytes"] == (65152 + 7264) * 1024
    assert (d["scope"], d["memcg"], d["constraint"], d["memcg_limit"], d["memcg_failcnt"]) == (
        "memcg", "/gfoom", "CONSTRAINT_MEMCG", 64 << 20, 25)
    assert (d["trigger"], d["trigger_pid"], d["pgtables"]) == ("python3", 422, 200 * 1024)
    assert d["task"]["rss_pages"] == 18104 and d["task"]["rss_anon"] == 16288
    # the kernel's two views agree: anon-rss 65152 kB == 16288 pages of 4 KiB
    assert d["anon_rss"] == d["task"]["rss_anon"] * 4096
    inv = parsed.events.filter(pl.col("kind") == "oom_invoked").row(0, named=True)
    assert (inv["pid"], inv["process"]) == (422, "python3")
    assert parsed.samples["bytes"].to_list() == [18104 * 4096]
    assert parsed.events.filter(pl.col("kind") == "xid").height == 0  # NVRM lines without an Xid


def test_recorded_ctime_and_iso_agree_with_the_boot_time(tmp_path):
    _, k_iso, _ = _kill(tmp_path, ISO)
    assert k_iso["time"] == datetime(2026, 11, 30, 4, 45, 52, 337247, tzinfo=timezone.utc)
    # wall time - uptime of the same line (from the raw recording) is the boot time /proc/stat gave
    assert abs((k_iso["time"] - BOOT).total_seconds() - 25.229641) < 1.0
    _, k_t, _ = _kill(tmp_path, CTIME, Options(tz="UTC"))
    assert k_t["time"] == datetime(2026, 11, 30, 4, 45, 52, tzinfo=timezone.utc)
    _, k_x, d_x = _kill(tmp_path, LEVELS)
    assert k_x["uptime"] == pytest.approx(25.229641) and d_x["scope"] == "memcg"


@pytest.mark.parametrize("name", ["dmesg.txt", "dmesg-T.txt", "dmesg-iso.txt"])
def test_sample_logs_host_oom(name):
    """The recorded incident in sample_logs/host_oom_pin_memory (its README states the facts)."""
    from conftest import SAMPLE_LOGS
    path = SAMPLE_LOGS / "host_oom_pin_memory" / name
    if not path.exists():
        pytest.skip(f"{path} not recorded")
    _, parsed = parse_file(path, Options(tz="UTC"), expect=NAME)
    kills = parsed.events.filter(pl.col("kind") == "oom_kill").sort("line")
    assert kills.select("pid", "process", "line").rows() == [(1506, "python3", 492), (1583, "pt_data_worker", 625)]
    assert all(json.loads(d)["memcg"] == "/gf_pin" for d in kills["detail"])
    if name == "dmesg.txt":
        assert kills["uptime"][0] == pytest.approx(193.102929)
    if name == "dmesg-iso.txt":
        assert kills["time"][0] == datetime(2026, 11, 30, 4, 31, 47, 898827, tzinfo=timezone.utc)
