"""prometheus-text: an exporter's /metrics page read with the GPU memory metrics the JSON reader knows:
every real snippet with its facts, pages concatenated with and without timestamps, Triton's metrics."""
from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest
from conftest import parse_file, realworld

MIB = 1 << 20


def test_mig_instances_with_capacity_from_free_plus_used():
    _, p = parse_file(realworld("dcgm_mig_fb_free_used.txt"), expect="prometheus-text")
    s = p.samples.sort("line")
    assert s["line"].to_list() == [10, 11, 12, 13, 14, 15]
    assert s["gpu"].to_list() == ["0/3", "0/4", "0/5", "0/6", "1/3", "1/4"]
    assert set(s["series"]) == {"memory.used"} and set(s["bytes"]) == {3 * MIB}
    assert set(s["total_bytes"]) == {(6012 + 3) * MIB}
    assert set(s["host"]) == {"yg-data-k8s-gpu-a30-node-test-test0003.mt"}


def test_shared_gpu_series_name_their_pods():
    _, p = parse_file(realworld("dcgm_mps_two_pods.txt"), expect="prometheus-text")
    s = p.samples.sort("line")
    assert s["label"].to_list() == ["pod default/gpu-burn-deployment-1-85dc8ff699-clvh5/gpu-burn-container-1",
                                    "pod vllm-inference/vllm-medgemma-4b-it-d599b4c99-f95nk/vllm"]
    assert s["series"].to_list() == ["process.used"] * 2 and s["bytes"].to_list() == [15866 * MIB] * 2
    assert any("capacity is unknown" in n for n in p.notes)


def test_free_memory_alone_is_no_reading_and_says_what_else_was_there():
    _, p = parse_file(realworld("dcgm_t4_pod_free_only.txt"), expect="prometheus-text")
    assert p.samples.height == 0
    assert any("DCGM_FI_DEV_DEC_UTIL" in n and "not read" in n for n in p.notes)


def test_one_scrape_without_timestamps_is_timed_by_the_file(tmp_path):
    path = tmp_path / "metrics.txt"
    path.write_text('DCGM_FI_DEV_FB_USED{gpu="0",Hostname="n1"} 741\nDCGM_FI_DEV_FB_TOTAL{gpu="0",Hostname="n1"} 81559\n')
    os.utime(path, (1_700_000_000, 1_700_000_000))
    _, p = parse_file(path, expect="prometheus-text")
    assert p.clock == "wall"
    assert p.samples.row(0, named=True)["time"] == datetime.fromtimestamp(1_700_000_000, timezone.utc)
    assert p.samples["total_bytes"].to_list() == [81559 * MIB]


def test_concatenated_scrapes_with_timestamps(tmp_path):
    path = tmp_path / "scrapes.prom"
    lines = []
    for i, used in enumerate((1000, 1100, 1200)):
        t = 1_700_000_000_000 + 15_000 * i
        lines += ["# TYPE DCGM_FI_DEV_FB_USED gauge", f'DCGM_FI_DEV_FB_USED{{gpu="0"}} {used} {t}',
                  f'DCGM_FI_DEV_FB_FREE{{gpu="0"}} {9000 - used} {t}']
    path.write_text("\n".join(lines) + "\n")
    _, p = parse_file(path, expect="prometheus-text")
    s = p.samples.sort("time")
    assert s["bytes"].to_list() == [1000 * MIB, 1100 * MIB, 1200 * MIB]
    assert s["line"].to_list() == [2, 5, 8] and set(s["total_bytes"]) == {9000 * MIB}
    assert s["time"][2] == datetime(2023, 11, 14, 22, 13, 50, tzinfo=timezone.utc)


def test_concatenated_scrapes_without_timestamps_are_ordered_untimed(tmp_path):
    path = tmp_path / "scrapes.txt"
    path.write_text("".join(f'nv_gpu_memory_used_bytes{{gpu_uuid="GPU-a"}} {b}\nnv_gpu_memory_total_bytes{{gpu_uuid="GPU-a"}} 16e9\n'
                            for b in (1e9, 2e9, 3e9)))
    _, p = parse_file(path, expect="prometheus-text")
    s = p.samples.sort("seq")
    assert p.clock == "none" and s["time"].null_count() == 3
    assert s["seq"].to_list() == [1, 2, 3] and s["bytes"].to_list() == [10**9, 2 * 10**9, 3 * 10**9]
    assert set(s["gpu"]) == {"GPU-a"} and set(s["total_bytes"]) == {16 * 10**9}


@pytest.mark.parametrize("head", [["# HELP go_gc_duration_seconds A summary."], ["up 1"],
                                  ['{"status":"success","data":{"resultType":"vector","result":[]}}']])
def test_other_pages_are_not_claimed(head):
    from forensics.parsers.metrics import prom_text
    assert prom_text.sniff(head) is None


def test_bad_lines_are_counted(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text('DCGM_FI_DEV_FB_USED{gpu="0"} 12\nDCGM_FI_DEV_FB_USED{gpu="1"} twelve\nDCGM_FI_DEV_FB_USED{gpu="2"\n')
    _, p = parse_file(path, expect="prometheus-text")
    assert p.samples["line"].to_list() == [1]
    assert p.skipped.counts == {"value is not a number, not read": 1,
                                "not a series line (NAME{labels} VALUE [TIMESTAMP])": 1}
