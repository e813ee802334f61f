"""The parser list: every entry is a module that ends with one `FORMAT = Format(...)` (contract.py says
what each field is); only that declaration is read here. Sniffing goes from specific to generic: the
first format whose `sniff_bytes` answers claims the file, else the first whose `sniff` does.
Adding a format = its module, one entry below, its samples (tests/samples/<name>/) and its tests.

Regexes spell a digit `[0-9]`, not `\\d`: polars keeps only the last 32 compiled regexes per thread and
a job uses more, so most are compiled again for every job (some for every file), and Unicode's `\\d`
(60-odd ranges) is much dearer to compile. Plain strings go to polars with `literal=True` (no regex).
"""
from __future__ import annotations

import importlib

from forensics.parsers.contract import Format

# Specific before generic. The order is tested: every sample is claimed by its own parser and by
# no earlier one.
_ORDER: list[str] = [
    "nvsmi.query", "nvsmi.table", "nvsmi.dmon", "nvsmi.apps", "nvsmi.csvlog",
    "bugreport",  # nvidia-bug-report.log: a bundle of sections, each handed to its format's reader
    "kernel.nvrm_log", "kernel.syslog",  # nvrm_log: files mostly of NVRM lines; syslog: dmesg/syslog/journal
    "sanitizer.xml_report", "sanitizer.text",
    "metrics.prometheus", "metrics.prom_text", "metrics.grafana_csv",  # GPU exporters' series: Prometheus, /metrics, Grafana
    "metrics.wandb", "metrics.mlflow", "metrics.lightning",  # experiment trackers' and frameworks' metric files
    "metrics.gpustat",  # gpustat's one line per GPU with its processes
    "metrics.nvitop",  # nvitop -1: nvidia-smi's table redrawn under its own banner, with its processes
    "metrics.nvtop",  # nvtop -s / -l: a JSON array per snapshot, devices and their processes in bytes
    "jobs.containers",  # kubectl describe pod / docker inspect: how a container ended
    "jobs.sacct",  # Slurm's accounting table: OUT_OF_MEMORY, cancelled and signalled steps, MaxRSS
    "jobs.seff",  # Slurm's seff summary: State OUT_OF_MEMORY, memory used of the request
    "metrics.tensorboard",  # claims by its bytes (sniff_bytes): TensorBoard event files
    "steplog.deepspeed", "steplog.megatron", "steplog.hf_trainer",
    "serving.engines",  # vLLM's and SGLang's memory profile, KV-cache usage and leak check; in any log from its scan
    "torch.snapshot",    # claims by its bytes (sniff_bytes): memory snapshot pickles
    "torch.memsummary",  # before torch.oom: a summary file often also holds the OOM (found by its scan)
    "torch.distributed",  # torchrun's and c10d's own logs; before torch.oom: their tracebacks end in the ranks' errors
    "torch.oom",  # claims only a traceback ending in an OOM; OOMs inside other logs come from its scan
    "oom.frameworks",  # the same for the other frameworks' OOMs (JAX, TensorFlow, CUDA C, ggml, CuPy)
    "torch.memstats",  # files mostly of memory_stats() dicts; dicts inside training logs come from its scan
    "jobs.kills",  # Slurm's OOM and cancel records, a shell's "Killed", a killed worker; in any log from its scan
    "steplog.markers",  # tolerant generic scanner of printed memory lines: keep it LAST
]


def _formats(names: list[str]) -> list[Format]:
    out: list[Format] = []
    for name in names:
        fmt = getattr(importlib.import_module(f"{__name__}.{name}"), "FORMAT", None)
        if not isinstance(fmt, Format):
            raise TypeError(f"{__name__}.{name}: a parser module ends with FORMAT = Format(...)")
        if any(f.name == fmt.name for f in out):
            raise TypeError(f"{__name__}.{name}: format name {fmt.name!r} is taken by another parser")
        out.append(fmt)
    unknown = {c for f in out for c in f.covers} - {f.name for f in out}
    if unknown:
        raise TypeError(f"covers names no format: {sorted(unknown)}")
    return out


PARSERS: list[Format] = _formats(_ORDER)
BY_NAME: dict[str, Format] = {f.name: f for f in PARSERS}
SCANNERS: list[Format] = [f for f in PARSERS if f.scan is not None]
BYTE_SNIFFERS: list[Format] = [f for f in PARSERS if f.sniff_bytes is not None]
TEXT_SNIFFERS: list[Format] = [f for f in PARSERS if f.sniff is not None]


def claim_bytes(first: bytes) -> tuple[Format | None, str]:
    """The first binary format that claims a file by its first bytes, and why; or None."""
    for f in BYTE_SNIFFERS:
        reason = f.sniff_bytes(first)
        if reason:
            return f, reason
    return None, ""


def claim_file(src) -> tuple[Format | None, str]:
    """Who claims a source: by its bytes first, else by its first lines (which raises InputError for
    a file that is not text)."""
    fmt, reason = claim_bytes(src.first_bytes())
    return (fmt, reason) if fmt is not None else claim(src.head())


def claim(head: list[str]) -> tuple[Format | None, str]:
    """The first format that claims these head lines, and why; or None and a reason for nobody."""
    for f in TEXT_SNIFFERS:
        reason = f.sniff(head)
        if reason:
            return f, reason
    if not any(line.strip() for line in head):
        return None, "empty file"
    return None, "no parser recognizes its first lines"
