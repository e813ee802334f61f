"""DeepSpeed `see_memory_usage` lines (deepspeed/runtime/utils.py).

Three log lines a call, only on rank 0:

    [2023-11-17 11:03:46,600] [INFO] [utils.py:802:see_memory_usage] DeepSpeedZeRoOffload initialize [begin]
    [2023-11-17 11:03:46,601] [INFO] [utils.py:803:see_memory_usage] MA 26.38 GB         Max_MA 26.38 GB         CA 26.71 GB         Max_CA 27 GB
    [2023-11-17 11:03:46,602] [INFO] [utils.py:810:see_memory_usage] CPU Virtual Memory:  used = 322.57 GB, percent = 17.1%

GB is value/2**30 (GiB); Max_CA is rounded to a whole number. The message line before the MA line is the
label. Copies of the function print without the logger (`print(message)`, MB or B units), put the
message on the MA line (`log_dist(f"{message} MA ...")`), or use the fork form
`[{rank}] mp: MA 0.00 GB | Max_MA ... | CA ... | Max_CA ... | NV ... GB | CPU Virtual Memory: ...`.

Series: MA -> allocated, Max_MA -> max_allocated, CA -> reserved (torch.cuda.memory_reserved),
Max_CA -> max_reserved, NV -> memory.used (NVML's device-wide used memory, the figure nvidia-smi shows),
CPU Virtual Memory used -> host.used (total - available, not this process). PEAK_MA (a running maximum
some copies add) is not read: Max_MA already carries the peak between calls.

DeepSpeed's ThroughputTimer line (deepspeed/utils/timer.py: `…global_step=N, …, MemAllocated=15.62GB,
MaxMemAllocated=24.74GB`, torch.cuda.memory_allocated() and max_memory_allocated() / 1024**3) is the
general reader's (general.py), like any `key=valueGB` print of a file this format claims.
"""
from __future__ import annotations

from forensics.model import Parsed
from forensics.parsers.steplog import families, generic
from forensics.io.lines import read_whole
from forensics.parsers.steplog.reader import StepLogReader
from forensics.parsers.contract import Format

NAME = "deepspeed-memory"
COVERS = ("step-markers",)  # its reader reads the generic step-marker lines too

sniff = families.sniff_deepspeed


def notes(parsed: Parsed) -> list[str]:
    out = ["DeepSpeed GB are GiB (value/2**30); Max_CA is rounded to a whole GiB"]
    if (parsed.samples["series"] == "memory.used").any():
        out.append("NV (NVML used memory of the whole device) is read as memory.used")
    if (parsed.samples["series"] == "host.used").any():
        out.append("'CPU Virtual Memory used' is the host's used memory (total - available), "
                   "not this process's")
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
    files="DeepSpeed `see_memory_usage` lines",
    yields="allocated / reserved per step",
)
