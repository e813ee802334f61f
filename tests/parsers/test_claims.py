"""Every sample is claimed by its own parser and by no other's (lnav-style). Sniffing goes from
specific to generic; a later, more generic parser may recognize another format's sample only where
a declaration orders the two and says why beside it (`before`, `after`, the fallback: see
declared_overlap), so a new format's overlap is stated in its own module.

The real-world snippets live in tests/samples/<format>/, the folder named after the parser that must
claim them (the NAME written to `inputs[].format`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REALWORLD, SAMPLE_LOGS
from forensics import parsers
from forensics.io.sources import Source


def declared_overlap(claimer: str, own: str) -> bool:
    """Whether a declaration orders the two, the sample's own format first, and says why beside it: the
    own format names the other in `before`, the other names it in `after`, or the other is the
    fallback, tried after all (parsers/__init__.py)."""
    mine, other = parsers.BY_NAME[own], parsers.BY_NAME[claimer]
    return claimer in mine.before or own in other.after or other.fallback


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
    "snapshot.pickle": "pytorch-memory-snapshot",
}


def realworld_files() -> list[Path]:
    # every file of a format folder (formats without comments, JSON and CSV, keep their provenance in
    # tests/samples/README.md; an MLflow FileStore sample sits in its run folder layout)
    return sorted(p for p in REALWORLD.glob("*/**/*") if p.is_file() and p.name != "README.md")


def _inputs(folder: Path) -> set[str]:
    """The files a folder's README lists as `inputs` (a Lightning run's stdout holds no memory line)."""
    readme = folder / "README.md"
    lines = readme.read_text().splitlines() if readme.exists() else []
    for line in lines[1: lines.index("---", 1) if "---" in lines[1:] else 0]:
        if line.startswith("inputs:"):
            return {x.strip() for x in line.split(":", 1)[1].split(",")}
    return set()


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLE_LOGS.glob("*/*") if p.name in SAMPLE_FILE_FORMAT and p.name in _inputs(p.parent))


def sniffers(head: list[str]) -> list[str]:
    return [m.name for m in parsers.TEXT_SNIFFERS if m.sniff(head)]


def byte_sniffers(first: bytes) -> list[str]:
    return [m.name for m in parsers.BYTE_SNIFFERS if m.sniff_bytes(first)]


def _claims(path: Path, want: str) -> None:
    src = Source.open(path)
    by_bytes = byte_sniffers(src.first_bytes())
    claimed = by_bytes or sniffers(src.head())
    assert claimed, f"{path}: nobody claims it"
    assert claimed[0] == want, f"{path}: claimed first by {claimed[0]}, expected {want} (all: {claimed})"
    others = [c for c in claimed[1:] if not declared_overlap(c, want)]
    assert not others, f"{path}: also claimed by {others}: a sniffer that claims another format's sample"


def test_sample_folders_are_parser_names():
    names = {m.name for m in parsers.PARSERS}
    folders = {p.name for p in REALWORLD.iterdir() if p.is_dir()}
    assert folders and folders <= names, folders - names


@pytest.mark.parametrize("path", realworld_files(), ids=lambda p: str(p.relative_to(REALWORLD)))
def test_realworld_claimed_by_own_parser_and_no_other(path):
    _claims(path, path.relative_to(REALWORLD).parts[0])


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_samples_claimed_by_own_parser_and_no_other(path):
    _claims(path, SAMPLE_FILE_FORMAT[path.name])


def test_every_parser_has_realworld_or_recorded_samples():
    have = {p.relative_to(REALWORLD).parts[0] for p in realworld_files()} | {SAMPLE_FILE_FORMAT[p.name] for p in sample_files()}
    missing = {m.name for m in parsers.PARSERS} - have
    assert not missing, f"parsers without any real sample: {missing}"


def test_parser_names_unique_and_order_specific_to_generic():
    names = [m.name for m in parsers.PARSERS]
    assert len(names) == len(set(names))
    assert names[-1] == "step-markers", "the tolerant step-marker scanner must stay last"
