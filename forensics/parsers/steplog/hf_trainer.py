"""HF Trainer memory metrics (`--skip_memory_metrics 0`, transformers PR #10225/#13915).

`Trainer.log_metrics` prints a block per split at the end of training / evaluation:

    ***** train metrics *****
      before_init_mem_cpu        =     1945MB
      train_mem_gpu_alloc_delta  =     -153MB
      train_mem_gpu_peaked_delta =     2012MB

Memory keys (`*_mem_*`) are formatted as `int(v) >> 20` followed by "MB", so MB is MiB; deltas can be
negative. These are summary figures of a whole phase, not a time series: each becomes one sample of the
series `hf.<key>` and each block one `marker` event whose detail carries all of the block's metrics.
The on_log dicts (`{'loss': ..., 'memory_allocated (GB)': 3.82, ...}`) are a time series and are read by
the shared step-marker extraction.
"""
from __future__ import annotations

from forensics.model import Parsed
from forensics.parsers.steplog import families, generic
from forensics.io.lines import read_whole
from forensics.parsers.steplog.reader import StepLogReader
from forensics.parsers.contract import Format

NAME = "hf-trainer-memory"
COVERS = ("step-markers",)

sniff = families.sniff_hf_trainer


def notes(parsed: Parsed) -> list[str]:
    out = []
    if parsed.samples["series"].str.starts_with("hf.").any():
        out.append("hf.* series are HF Trainer summary metrics (one figure per phase and block, MB = MiB), "
                   "not a time series")
    out.extend(generic.notes(parsed))
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
    files="HF Trainer memory metrics",
    yields="allocated / reserved per step",
)
