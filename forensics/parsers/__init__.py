"""The parser list. Each entry is a module with:

- `NAME`: the format name shown to users and written to the JSON summary (`inputs[].format`);
- `sniff(head: list[str]) -> str | None`: looks at the first lines (decoded, unwrapped) and returns
  the reason it claims the file, or None;
- `parse(src: Source, opts: Options) -> Parsed`: the whole file into the two fixed schemas; and, for a
  format whose files can be big, `Reader(src, opts)` with `feed(batch)` (the file's `line`, `text`
  rows, batch by batch, in order) and `finish() -> Parsed`. ingest feeds a Reader the lines of a small
  file as one batch and those of a big one in many; its `parse` is the same reader fed the whole file.
  `feed` may return True to say it took the batch whole as data rows of its format, which hold
  nothing for the free-text scanners (they then skip that batch).
  A format whose files are one document rather than lines (a JSON response, often one line over the
  line reader's limit) sets `WHOLE_DOCUMENT = True`: its `parse` reads `src.read_bytes()`, and the
  free-text scanners do not read it.

A binary format (a pickle) has `sniff_bytes(first: bytes) -> str | None` instead of `sniff`: it
claims a file by its first bytes (decompressed, up to 64 KiB), before any text is decoded, and its
`parse(src, opts)` reads the file itself (`src.open_binary()`). No text head is made of such a file,
no free-text scanner reads it, and its evidence `line` numbers count records, not text lines: the
module's docstring says what a record is, and `Parsed.lines` how many there are.

Optionally, for facts that turn up anywhere in free text (a CUDA OOM at the end of a training log,
an Xid inside a syslog), a module also has `SCAN_HINT` (a regex a line must match to be worth a
look), the literals every such line holds (`SCAN_PREFILTER`, `SCAN_BLOCK_LITERALS`, see scanners.py)
and `scan(lines: pl.DataFrame, src, opts) -> Parsed`: events from the given lines. A module whose every
hint line is an event declares `SCAN_EVENT_LINES = True`: a scan keeps the first
scanners.MAX_EVENT_LINES of them per file and counts the rest in a note.

Sniffing goes from specific to generic: the first module whose `sniff_bytes` answers claims the file,
else the first whose `sniff` does.
Adding a format = its module, one entry below, its samples and tests.

Regexes spell a digit `[0-9]`, not `\\d`: polars keeps only the last 32 compiled regexes per thread and
a job uses more, so most are compiled again for every job (some for every file), and Unicode's `\\d`
(60-odd ranges) is much dearer to compile. Plain strings go to polars with `literal=True` (no regex).
"""
from __future__ import annotations

import importlib
from types import ModuleType

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

PARSERS: list[ModuleType] = [importlib.import_module(f"{__name__}.{name}") for name in _ORDER]
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in PARSERS}
SCANNERS: list[ModuleType] = [m for m in PARSERS if hasattr(m, "scan")]
BYTE_SNIFFERS: list[ModuleType] = [m for m in PARSERS if hasattr(m, "sniff_bytes")]
TEXT_SNIFFERS: list[ModuleType] = [m for m in PARSERS if hasattr(m, "sniff")]


def claim_bytes(first: bytes) -> tuple[ModuleType | None, str]:
    """The first binary-format parser that claims a file by its first bytes, and why; or None."""
    for m in BYTE_SNIFFERS:
        reason = m.sniff_bytes(first)
        if reason:
            return m, reason
    return None, ""


def reads_whole(module) -> bool:
    """A format whose `parse` reads its files itself (one document, or a binary format): no text lines
    are fed to it, no free-text scanner reads its files, and no line wrapper is stripped from them."""
    return getattr(module, "WHOLE_DOCUMENT", False) or hasattr(module, "sniff_bytes")


def claim_file(src) -> tuple[ModuleType | None, str]:
    """Who claims a source: by its bytes first, else by its first lines (which raises InputError for
    a file that is not text)."""
    module, reason = claim_bytes(src.first_bytes())
    return (module, reason) if module is not None else claim(src.head())


def claim(head: list[str]) -> tuple[ModuleType | None, str]:
    """The first parser that claims these head lines, and why; or None and a reason for nobody."""
    for m in TEXT_SNIFFERS:
        reason = m.sniff(head)
        if reason:
            return m, reason
    if not any(line.strip() for line in head):
        return None, "empty file"
    return None, "no parser recognizes its first lines"
