"""nvitop -1 / --once: every real paste read with what a person reads off it (each GPU's memory used of
its total, each process's pid and GPU memory, the host's used memory), in its unicode, ASCII, compact
and early (NVIDIA-SMI banner) layouts."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from conftest import REALWORLD, parse_file

from forensics.options import Options
from forensics.parsers.metrics import nvitop

UTC = Options(tz="UTC", tz_from_user=True)
MIB, GIB = 1 << 20, 1 << 30


def _read(name: str):
    path = REALWORLD / "nvitop" / name
    _, p = parse_file(path, UTC, expect="nvitop")
    return path.read_text().splitlines(), p


def _rows(p, series: str) -> list[tuple]:
    return p.samples.filter(p.samples["series"] == series).select("gpu", "pid", "bytes", "total_bytes", "label").rows()


def test_ascii_snapshot_with_the_process_that_holds_both_gpus():
    text, p = _read("nvitop_ascii_v100_processes.txt")
    assert _rows(p, "memory.used") == [("0", None, 9319 * MIB, 16384 * MIB, None),
                                       ("1", None, round(309.1 * MIB), 16384 * MIB, None)]
    # the command as nvitop cut it; the GPU's total as the process's capacity
    assert _rows(p, "process.used") == [("0", 18830, 9316 * MIB, 16384 * MIB, "/usr/local/bi.."),
                                        ("1", 18830, 306 * MIB, 16384 * MIB, "/usr/local/bi..")]
    assert set(p.samples["time"]) == {datetime(2026, 4, 23, 15, 3, 17, tzinfo=timezone.utc)}
    assert _rows(p, "host.used") == [(None, None, round(5.82 * GIB), None, None)]
    for line in p.samples["line"]:
        assert "MiB" in text[line - 1] or "USED:" in text[line - 1]
    assert not p.skipped.counts


def test_compact_layout_each_gpu_on_one_row_untimed():
    text, p = _read("nvitop_compact_eight_gpus.txt")
    used = _rows(p, "memory.used")
    assert [g for g, *_ in used] == [str(i) for i in range(8)]
    assert used[5][2] == round(43.68 * GIB) and used[5][3] == round(47.99 * GIB)
    assert used[0][2] == round(22.69 * MIB)
    assert p.clock == "none" and p.samples["time"].null_count() == p.samples.height
    assert "43.68GiB / 47.99GiB" in text[p.samples.filter(p.samples["gpu"] == "5")["line"][0] - 1]


def test_early_nvitop_with_the_nvidia_smi_banner_and_no_process():
    _, p = _read("nvitop_old_header_p40.txt")
    assert _rows(p, "memory.used") == [("0", None, 0, round(22.38 * GIB), None)]
    assert _rows(p, "process.used") == [] and _rows(p, "host.used") == []   # no USED: in this version's bar
    # the shell's lines before the snapshot are counted, not read
    assert p.skipped.counts == {"not a line of nvitop's tables": 2}


def test_eight_idle_h800():
    _, p = _read("nvitop_once_eight_h800.txt")
    used = _rows(p, "memory.used")
    assert len(used) == 8 and {(b, t) for _, _, b, t, _ in used} == {(round(3.5 * MIB), round(79.65 * GIB))}
    assert _rows(p, "host.used") == [(None, None, round(7.92 * GIB), None, None)]


def test_repeated_snapshots_are_numbered_and_timed(tmp_path):
    once = (REALWORLD / "nvitop" / "nvitop_ascii_v100_processes.txt").read_text().splitlines()[1:]
    later = [ln.replace("15:03:17", "15:04:17").replace("9316MiB", "9400MiB") for ln in once]
    path = tmp_path / "nvitop.log"
    path.write_text("\n".join(once + later) + "\n")
    _, p = parse_file(path, UTC, expect="nvitop")
    procs = p.samples.filter((p.samples["series"] == "process.used") & (p.samples["gpu"] == "0")).sort("seq")
    assert procs["seq"].to_list() == [1, 2] and procs["bytes"].to_list() == [9316 * MIB, 9400 * MIB]
    assert procs["time"][1] == datetime(2026, 4, 23, 15, 4, 17, tzinfo=timezone.utc)


@pytest.mark.parametrize("head", [
    ["| NVIDIA-SMI 535.54.03              Driver Version: 535.54.03    CUDA Version: 12.2     |"],  # nvidia-smi's own
    ["[0] NVIDIA GeForce RTX 4090 | 50°C,  73 % | 12894 / 24564 MB | user1(12874M)"],              # gpustat
    ["NVITOP is a tool"],
])
def test_sniff_claims_only_nvitop(head):
    assert nvitop.sniff(head) is None


def test_a_paste_cut_in_its_second_gpu_reads_the_first():
    # the full layout's second row starts with the fan speed (`28%`), not a GPU index
    text, p = _read("nvitop_once_docker_1080ti.txt")
    assert _rows(p, "memory.used") == [("0", None, 2650 * MIB, 11264 * MIB, None)]
    assert p.samples["time"][0] == datetime(2023, 6, 20, 18, 35, 7, tzinfo=timezone.utc)
    assert p.skipped.counts == {"not a line of nvitop's tables": 1}   # the docker command line
