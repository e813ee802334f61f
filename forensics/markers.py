"""A memory marker line for training scripts: `forensics.markers.log_memory("train", step=i)`.

It prints the classic marker (`[tag] allocated: X MB, cached: Y MB`) behind the three things the
step-marker parser (forensics/parsers/steplog/markers.py) reads off the text in front of a reading:
a UTC clock with its zone (no `--tz` needed), the device (`cuda:N`, so the readings join the
nvidia-smi rows of the same GPU) and the step (`step N`, so `compare` can overlay two runs by step):

    2026-11-30T03:04:08.405Z cuda:0 step 12 [train] allocated: 1024.00 MB, cached: 2048.00 MB

The tag stays a constant label in brackets right before the reading: it names the series, so a
step number inside it would make every line a series of its own. MB here is MiB (2**20), as the
parser reads it. Importing this module does not import torch: a script may import it before it
decides whether to use a GPU.
"""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import TextIO

MIB = 1 << 20


def _torch():
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("forensics.markers.log_memory: needs PyTorch, which is not installed here "
                           f"({e}); install torch or print the marker line yourself") from None
    return torch


def marker_line(tag: str, allocated: int, reserved: int, step: int | None = None, device: int | None = None,
                when: datetime | None = None) -> str:
    """The marker line for these byte counts (what `log_memory` prints)."""
    when = (when or datetime.now(timezone.utc)).astimezone(timezone.utc)
    parts = [when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"]
    if device is not None:
        parts.append(f"cuda:{int(device)}")
    if step is not None:
        parts.append(f"step {int(step)}")
    # brackets inside the tag would end it early for the parser
    clean = str(tag).replace("[", "(").replace("]", ")").replace("\n", " ")
    parts.append(f"[{clean}] allocated: {allocated / MIB:.2f} MB, cached: {reserved / MIB:.2f} MB")
    return " ".join(parts)


def log_memory(tag: str, step: int | None = None, device=None, file: TextIO | None = None) -> str:
    """Print (to `file`, default stdout, flushed) and return the marker line of the current CUDA
    device (or `device`): torch.cuda.memory_allocated() and memory_reserved()."""
    torch = _torch()
    if not torch.cuda.is_available():
        raise RuntimeError("forensics.markers.log_memory: no CUDA device is visible to PyTorch, "
                           "call it only in a run on a GPU")
    if device is None:
        index = torch.cuda.current_device()
    else:   # 1, "cuda:1" or torch.device("cuda", 1); a bare "cuda" means the current one
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        index = torch.cuda.current_device() if dev.index is None else dev.index
    line = marker_line(tag, torch.cuda.memory_allocated(index), torch.cuda.memory_reserved(index),
                       step=step, device=index)
    out = file or sys.stdout
    print(line, file=out, flush=True)
    return line
