"""Every sample is claimed by its own parser and by no earlier one (lnav-style): sniffing goes from
specific to generic, so a parser later in the list may also recognize a sample (the generic
step-marker scanner sees Megatron's lines too), but none before the right one may."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REALWORLD, SAMPLE_LOGS
from forensics import parsers
from forensics.io.sources import Source

REALWORLD_FAMILY = [
    (r"^nvsmi_csv_", "nvidia-smi-csv"),
    (r"^nvsmi_apps_", "nvidia-smi-apps"),
    (r"^nvsmi_dmon_", "nvidia-smi-dmon"),
    (r"^nvsmi_table_", "nvidia-smi-table"),
    (r"^nvsmi_q_", "nvidia-smi-q"),
    (r"^(kernlog_oom|journal_iso)_", "kernel-log"),
    (r"^xid_", "nvrm-xid"),
    (r"^sanitizer_leak_", "compute-sanitizer"),
    (r"^torch_oom_", "pytorch-oom"),
    (r"^torch_memsummary_", "pytorch-memory-summary"),
    (r"^deepspeed_mem_", "deepspeed-memory"),
    (r"^stepmem_megatron_", "megatron-memory"),
    (r"^stepmem_hf_", "hf-trainer-memory"),
    (r"^stepmem_", "step-markers"),
]

# file names the recorder writes in every sample_logs/ incident folder
SAMPLE_FILE_FORMAT = {
    "nvidia-smi.csv": "nvidia-smi-csv",
    "nvidia-smi-l1.csv": "nvidia-smi-csv",
    "compute-apps.csv": "nvidia-smi-apps",
    "dmon.txt": "nvidia-smi-dmon",
    "dmesg.txt": "kernel-log",
    "dmesg-T.txt": "kernel-log",
    "dmesg-iso.txt": "kernel-log",
    "train.log": "step-markers",
    "sanitizer.log": "compute-sanitizer",
    "sanitizer.txt": "compute-sanitizer",
    "leaky.xml": "compute-sanitizer-xml",
    "nvidia-smi-table.txt": "nvidia-smi-table",
    "nvidia-smi.txt": "nvidia-smi-table",
    "nvidia-smi-q-memory.txt": "nvidia-smi-q",
}


def expected_for(name: str) -> str:
    for rx, fmt in REALWORLD_FAMILY:
        if re.match(rx, name):
            return fmt
    raise AssertionError(f"no family for {name}: add it to REALWORLD_FAMILY")


def realworld_files() -> list[Path]:
    return sorted(REALWORLD.rglob("*.txt"))


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLE_LOGS.glob("*/*") if p.name in SAMPLE_FILE_FORMAT)


def sniffers(head: list[str]) -> list[str]:
    return [m.NAME for m in parsers.PARSERS if m.sniff(head)]


@pytest.mark.parametrize("path", realworld_files(), ids=lambda p: p.name)
def test_realworld_claimed_by_own_parser_first(path):
    head = Source.open(path).head()
    want = expected_for(path.name)
    claimed = sniffers(head)
    assert claimed, f"{path.name}: nobody claims it"
    assert claimed[0] == want, f"{path.name}: claimed first by {claimed[0]}, expected {want} (all: {claimed})"


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_samples_claimed_by_own_parser_first(path):
    head = Source.open(path).head()
    claimed = sniffers(head)
    assert claimed and claimed[0] == SAMPLE_FILE_FORMAT[path.name], f"{path}: {claimed}"


def test_every_parser_has_realworld_or_recorded_samples():
    have = {expected_for(p.name) for p in realworld_files()} | {SAMPLE_FILE_FORMAT[p.name] for p in sample_files()}
    if not have:
        pytest.skip("no samples here")
    missing = {m.NAME for m in parsers.PARSERS} - have
    assert not missing, f"parsers without any real sample: {missing}"


def test_parser_names_unique_and_order_specific_to_generic():
    names = [m.NAME for m in parsers.PARSERS]
    assert len(names) == len(set(names))
    assert names[-1] == "step-markers", "the tolerant step-marker scanner must stay last"
