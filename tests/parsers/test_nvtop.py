"""nvtop -s / --snapshot and -l / --loop: every real paste read with what a person reads off it (each
device's memory used of its total, each process's pid, command and bytes), 3.3.0's JSON without commas,
3.2's snapshots without memory bytes counted and never guessed from mem_util, a loop's snapshots in order."""
from __future__ import annotations

import json

import pytest
from conftest import REALWORLD, parse_file

from forensics.options import Options
from forensics.parsers.metrics import nvtop

UTC = Options(tz="UTC", tz_from_user=True)


def _read(name: str):
    path = REALWORLD / "nvtop" / name
    _, p = parse_file(path, UTC, expect="nvtop")
    return path.read_text().splitlines(), p


def _rows(p, series: str) -> list[tuple]:
    return p.samples.filter(p.samples["series"] == series).select("gpu", "pid", "bytes", "total_bytes", "label").rows()


def test_device_and_its_processes_in_bytes():
    text, p = _read("nvtop_processes_rx6750gre.json")
    assert _rows(p, "memory.used") == [("0", None, 1153327104, 10720641024, None)]
    assert _rows(p, "process.used") == [
        ("0", 75257, 295473152, 10720641024, "Hyprland --watchdog-fd 4"),
        ("0", 75340, 44642304, 10720641024, "Xwayland :1 -rootless -core -listenfd 51 -listenfd 52 -displayfd 98 -wm 95")]
    # each reading cites the line that holds its bytes
    for line, value in p.samples.select("line", "bytes").rows():
        assert f'"{value}"' in text[line - 1]
    assert p.meta["devices"] == {"0": "AMD Radeon RX 6750 GRE 10GB"}
    assert any("GPU 0 = AMD Radeon RX 6750 GRE 10GB" in n for n in p.notes)
    assert p.clock == "none" and p.samples["time"].null_count() == p.samples.height
    assert set(p.samples["seq"]) == {1}
    assert not p.skipped.counts


def test_330_json_without_commas_cut_after_its_device():
    text, p = _read("nvtop_330_missing_commas_rtx5060ti.json")
    with pytest.raises(json.JSONDecodeError):
        json.loads("\n".join(text))
    assert _rows(p, "memory.used") == [("0", None, 7585398784, 21197180928, None)]
    assert '"mem_used"' in text[p.samples["line"][0] - 1]
    assert p.meta["devices"] == {"0": "NVIDIA GeForce RTX 5060 Ti"}
    assert not p.skipped.counts


def test_32_snapshot_without_memory_bytes_is_counted_not_guessed():
    text, p = _read("nvtop_32_two_devices_no_memory_bytes.json")
    assert p.samples.height == 0
    assert p.skipped.counts == {nvtop.NO_BYTES: 2}
    assert [text[n - 1].strip() for n in p.skipped.examples[nvtop.NO_BYTES]] == [
        '"device_name": "AMD Ryzen 9 7950X 16-Core Processor",', '"device_name": "AMD Radeon RX 7900 XTX",']
    assert any("without memory bytes" in n and "mem_util" in n for n in p.notes)
    assert p.meta["devices"] == {"0": "AMD Ryzen 9 7950X 16-Core Processor", "1": "AMD Radeon RX 7900 XTX"}


def test_paste_with_a_prompt_and_a_lost_bracket():
    _, p = _read("nvtop_32_intel_battlemage_nulls.json")
    assert p.samples.height == 0
    assert p.skipped.counts == {"not a line of nvtop's snapshot JSON": 1, nvtop.NO_BYTES: 1}   # the `$ nvtop -s` line
    assert p.meta["devices"] == {"0": "Battlemage G21 (Intel Graphics)"}


def test_patched_build_with_trailing_spaces():
    _, p = _read("nvtop_patched_arc_b580_memory_bytes.json")
    assert _rows(p, "memory.used") == [("0", None, 2260754432, 12809404416, None)]
    assert p.samples["line"].to_list() == [11] and not p.skipped.counts


def _snapshot(used: list[int], procs: list[tuple[int, int | None]]) -> str:
    """What print_snapshot writes (3.3.1 and later) for devices of 8 GiB with these used bytes, the
    processes on the last one."""
    out = ["["]
    for i, u in enumerate(used):
        out += ["  {", f'   "device_name": "GPU {i}",', '   "gpu_clock": "1500MHz",', '   "mem_clock": "7000MHz",',
                '   "gpu_util": "90%",', '   "mem_util": "40%",', f'   "mem_total": "{8 << 30}",',
                f'   "mem_used": "{u}",', f'   "mem_free": "{(8 << 30) - u}",', '   "processes" : [']
        for j, (pid, mem) in enumerate(procs if i == len(used) - 1 else []):
            alloc = "null" if mem is None else f'"{mem}"'
            out += ["     {", f'       "pid": "{pid}",', '       "cmdline": "python train.py --lr \\"1e-4\\"",',
                    '       "kind": "compute",', '       "user": "alice",', f'       "gpu_mem_bytes_alloc": {alloc},',
                    '       "encode_decode": null', "     }" + ("," if j < len(procs) - 1 else "")]
        out += ["   ]", "  }" + ("," if i < len(used) - 1 else "")]
    return "\n".join(out + ["]"])


def test_loop_snapshots_in_order_untimed(tmp_path):
    path = tmp_path / "nvtop-loop.log"
    snaps = [_snapshot([1 << 30, (k + 2) << 30], [(4242, (2 << 30) + k), (4243, None)]) for k in range(3)]
    path.write_text("\n".join(snaps) + "\n")
    _, p = parse_file(path, UTC, expect="nvtop")
    dev1 = p.samples.filter((p.samples["series"] == "memory.used") & (p.samples["gpu"] == "1")).sort("seq")
    assert dev1["seq"].to_list() == [1, 2, 3] and dev1["bytes"].to_list() == [2 << 30, 3 << 30, 4 << 30]
    proc = p.samples.filter(p.samples["series"] == "process.used").sort("seq")
    assert proc.select("seq", "gpu", "pid", "bytes", "label").rows() == [
        (k + 1, "1", 4242, (2 << 30) + k, 'python train.py --lr "1e-4"') for k in range(3)]
    assert p.samples.filter(p.samples["gpu"] == "0")["bytes"].to_list() == [1 << 30] * 3
    assert p.skipped.counts == {"a process whose GPU memory nvtop could not read (gpu_mem_bytes_alloc null), not read": 3}
    assert any("3 snapshot(s)" in n for n in p.notes)


def test_one_line_json_and_a_forks_units(tmp_path):
    # `nvtop -s | jq -c .` puts a snapshot on one line; the open PR nvtop#445 prints sizes with units
    doc = [{"device_name": "AMD Radeon RX 7900 XT", "gpu_clock": "2MHz", "mem_clock": "96MHz",
            "mem_total": "20464.0 MiB", "mem_used": "34.59 MiB",
            "processes": [{"pid": "3443353", "cmdline": "nvtop -s", "gpu_mem_bytes_alloc": "0.01 MiB"}]}]
    path = tmp_path / "nvtop.json"
    path.write_text(json.dumps(doc) + "\n")
    _, p = parse_file(path, UTC, expect="nvtop")
    assert _rows(p, "memory.used") == [("0", None, round(34.59 * (1 << 20)), round(20464.0 * (1 << 20)), None)]
    assert _rows(p, "process.used") == [("0", 3443353, round(0.01 * (1 << 20)), round(20464.0 * (1 << 20)), "nvtop -s")]


def test_implausible_and_garbage_values_are_counted(tmp_path):
    path = tmp_path / "nvtop.json"
    path.write_text(_snapshot([1 << 60], []).replace('"processes" : [', '"processes" : [ %%%') + "\n")
    _, p = parse_file(path, UTC, expect="nvtop")
    assert p.samples.height == 0
    assert set(p.skipped.counts) == {"implausible byte count (negative or over 1 PiB), value dropped",
                                     "not a line of nvtop's snapshot JSON"}


@pytest.mark.parametrize("head", [
    ['{"status":"success","data":{"resultType":"vector","result":[]}}'],                         # Prometheus
    ['   "device_name": "NVIDIA A100",'],                                                        # one key is not enough
    ['{"gpus": [{"name": "A100", "memory.used": 1}]}'],                                           # gpustat --json
    ["[0] NVIDIA GeForce RTX 4090 | 50°C,  73 % | 12894 / 24564 MB | user1(12874M)"],
])
def test_sniff_claims_only_nvtop(head):
    assert nvtop.sniff(head) is None
