"""The sniffers that test a joined head for the literals every claim needs before testing line by line
give the answer of their line-by-line test on every head: each sample's head, each of its lines alone,
and each line at the end of a head of filler (a prefilter that missed a literal would drop a claim)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.parsers.oom import frameworks
from forensics.parsers.sanitizer import text as sanitizer
from forensics.parsers.serving import engines
from forensics.parsers.steplog import families
from forensics.parsers.torch import memstats

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

PAIRS = {
    "deepspeed": (families.sniff_deepspeed, families._sniff_deepspeed_lines),
    "megatron": (families.sniff_megatron, families._sniff_megatron_lines),
    "hf-trainer": (families.sniff_hf_trainer, families._sniff_hf_trainer_lines),
    "serving-engine": (engines.sniff, engines._sniff_lines),
    "framework-oom": (frameworks.sniff, frameworks._sniff_lines),
    "compute-sanitizer": (sanitizer.sniff, sanitizer._sniff_lines),
    "memory-stats": (memstats.sniff, memstats._sniff_lines),
}

# a line for each of Megatron's signs (families._SIGNS), in their order (the last, each of its three forms)
MEGATRON_SIGNS = [
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1024.5 | max allocated: 2048.0 | reserved: 3000.0",
    "[before the start of training step] datetime: 2024-05-01 12:00:00",
    " iteration       10/     100 | consumed samples:          80 | elapsed time per iteration (ms): 812.3 |",
    "------------------------ arguments ------------------------",
    "using world size: 8, data-parallel size: 8, context-parallel size: 1",
    "Theoretical memory footprints: weight and optimizer=4321.00 MB",
    "> initializing torch distributed ...",
    "> building GPTModel model ...",
    "> compiling dataset index builder ...",
]


def _sample_lines() -> list[list[str]]:
    heads = []
    for f in sorted(SAMPLES.rglob("*")):
        if not f.is_file() or f.suffix in (".pickle", ".gz", ".zst", ".bz2", ".xz") or f.name.startswith("events."):
            continue
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        heads.append(lines[:200])
    return heads


HEADS = _sample_lines()
LINES = sorted({ln for h in HEADS for ln in h} | set(MEGATRON_SIGNS))
FILLER = [f"epoch 1 batch {i} loss 0.{i:03d}" for i in range(199)]


def test_the_samples_and_the_signs_are_there():
    assert len(HEADS) > 100 and len(LINES) > 1000


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_prefilter_keeps_every_claim(name):
    sniff, by_lines = PAIRS[name]
    claimed = 0
    for head in HEADS + [[ln] for ln in LINES] + [FILLER + [ln] for ln in LINES]:
        expected = by_lines(head)
        assert sniff(head) == expected, (name, head[-3:])
        claimed += expected is not None
    assert claimed   # (the heads hold lines that each sniffer claims)


def test_every_megatron_sign_claims_past_the_prefilter():
    whats = [what for _, what in families._SIGNS]
    whats += [whats[-1]] * 2
    for line, what in zip(MEGATRON_SIGNS, whats, strict=True):
        assert families.sniff_megatron(FILLER + [line]) == f"{what} on line 200"


def test_the_step_marker_sniff_reads_a_few_lines_as_polars_does(monkeypatch):
    """markers.sniff tests a head of a few plain lines for a reading in Python (small.rows), else in polars:
    the same answer either way, on each sample's first lines and on each line alone."""
    from forensics.parsers.steplog import markers, small

    heads = [h[:small.SMALL_LINES] for h in HEADS] + [[ln] for ln in LINES]
    in_python = [markers.sniff(h) for h in heads]
    monkeypatch.setattr(small, "rows", lambda df, most=None: None)
    assert [markers.sniff(h) for h in heads] == in_python
    assert sum(x is not None for x in in_python) > 30
