"""Which nvidia-smi parser claims what: every real nvsmi_* snippet by its own parser (and by no
earlier one), and none of the five sniffs claims another format's real snippet."""
from __future__ import annotations

import pytest
from conftest import REALWORLD, parse_file

from forensics import parsers
from forensics.parsers.nvsmi import apps as nvsmi_apps
from forensics.parsers.nvsmi import csvlog as nvsmi_csv
from forensics.parsers.nvsmi import dmon as nvsmi_dmon
from forensics.parsers.nvsmi import query as nvsmi_query
from forensics.parsers.nvsmi import table as nvsmi_table
from forensics.io.sources import Source

MINE = (nvsmi_query, nvsmi_table, nvsmi_dmon, nvsmi_apps, nvsmi_csv)
EXPECTED = {
    "nvsmi_csv": "nvidia-smi-csv", "nvsmi_apps": "nvidia-smi-apps", "nvsmi_dmon": "nvidia-smi-dmon",
    "nvsmi_q": "nvidia-smi-q", "nvsmi_table": "nvidia-smi-table",
}


def _files(own: bool) -> list:
    return sorted(p for p in REALWORLD.rglob("*.txt") if p.name.startswith("nvsmi_") == own)


@pytest.mark.parametrize("path", _files(True), ids=lambda p: getattr(p, "name", "none"))
def test_each_nvsmi_snippet_is_claimed_by_its_parser_and_parses(path):
    expect = next(v for k, v in EXPECTED.items() if path.name.startswith(k))
    module, p = parse_file(path, expect=expect)
    assert p.samples.height > 0
    assert p.samples["line"].null_count() == 0 and p.samples["line"].min() >= 2  # line 1 is provenance


@pytest.mark.parametrize("path", _files(False), ids=lambda p: getattr(p, "name", "none"))
def test_no_nvsmi_sniff_claims_another_format(path):
    head = Source.open(path, str(path)).head()
    for m in MINE:
        assert m.sniff(head) is None, f"{m.NAME} claims {path.name}: {m.sniff(head)}"


def test_nvsmi_parsers_come_before_the_generic_ones():
    names = [f.name for f in parsers.PARSERS]
    first_generic = min(names.index(f.name) for f in parsers.SCANNERS)
    assert all(names.index(m.FORMAT.name) < first_generic for m in MINE)


@pytest.mark.parametrize("head", [
    [],
    [""],
    ["# source: somewhere", "index, name"],                                   # too generic to be nvidia-smi
    ["step 10, loss 1.25, lr 0.001"],                                         # a training log line
    ["| PyTorch CUDA memory summary, device ID 0                                 |"],
    ["+------+-----+", "| a    | b   |", "+------+-----+"],                     # some other box table
    ["Timestamp: 2024-01-01 10:00:00 something"],
    ["one", "two", "three", "four", "0, 10 MiB, 20 MiB"],                     # csv too far down: not the first section
])
def test_sniffs_leave_other_text_alone(head):
    for m in MINE:
        assert m.sniff(head) is None, m.NAME


def test_first_real_section_decides():
    dmon_first = ["# gpu   pwr    fb", "# Idx     W    MB", "    0   100   300",
                  "timestamp, memory.used [MiB]", "2024/01/01 00:00:00.000, 5 MiB"]
    assert nvsmi_dmon.sniff(dmon_first) and not nvsmi_csv.sniff(dmon_first)
    csv_first = ["# source: x", "$ nvidia-smi --query-gpu=index,memory.used --format=csv", "index, memory.used [MiB]",
                 "0, 5 MiB", "+-----+", "| NVIDIA-SMI 550.90.07   Driver Version: 550.90.07 |"]
    assert nvsmi_csv.sniff(csv_first) and not nvsmi_table.sniff(csv_first)
    apps = ["gpu_uuid, pid, process_name, used_gpu_memory [MiB]"]
    assert nvsmi_apps.sniff(apps) and not nvsmi_csv.sniff(apps)
