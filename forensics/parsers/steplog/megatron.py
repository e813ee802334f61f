"""Megatron-LM training logs.

`report_memory` prints, per rank, after the first logged iteration:

    [Rank 0] (after 20 iterations) memory (MB) | allocated: 1570.77001953125 | max allocated: ... | reserved: 4020.0 | max reserved: 4020.0

(MB = value/2**20; ranks writing to one stdout can glue two records on one line.) The step is the
iteration count; the rank labels the readings (`rank 0`), each rank a series of its own, and is no GPU
index (the global rank names no local device on more than one node; forensics/ranks.py gives a rank the
GPU that other lines say it used). Those lines are read by the shared step-marker extraction; this module
adds what only Megatron
prints: the `[before the start of training step] datetime: 2025-08-01 09:31:11` lines (markers, local
time) and the per-iteration lines
` [2025-08-01 07:19:37] iteration        1/    5000 | consumed samples: 128 | elapsed time per iteration (ms): 19138.8 | ...`
(markers with the step and its duration, the clock that times the memory report of the same iteration).
"""
from __future__ import annotations

from forensics.model import Parsed
from forensics.parsers.steplog import families, generic
from forensics.io.lines import read_whole
from forensics.parsers.steplog.reader import StepLogReader
from forensics.parsers.contract import Format

NAME = "megatron-memory"
COVERS = ("step-markers",)

sniff = families.sniff_megatron


def notes(parsed: Parsed) -> list[str]:
    out = ["Megatron MB are MiB (value/2**20); each rank's report_memory lines are a series of their own"]
    if parsed.samples.height and parsed.samples["time"].is_not_null().any():
        out.append("memory reports are timed by the iteration line that follows them")
    out.extend(generic.notes(parsed, units=False))
    return out


def Reader(src, opts) -> StepLogReader:
    return StepLogReader(src, opts, notes)


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    covers=COVERS,
    files="Megatron `report_memory` lines",
    yields="allocated / reserved per step",
)
