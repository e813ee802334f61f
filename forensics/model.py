"""The data model: the two fixed table schemas every parser produces, the result a parser returns
(Parsed), and what reading all inputs gives (InputInfo per file, Bundle).

Nothing downstream of the parsers knows about formats: it sees only these columns.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

UTC_TIME = pl.Datetime("us", "UTC")

# One memory reading.
SAMPLES_SCHEMA: dict[str, pl.DataType] = {
    "time": UTC_TIME,          # null when the source has no clock
    "uptime": pl.Float64,      # seconds since boot, for dmesg-style clocks still to be anchored
    "seq": pl.Int64,           # order within the source (sample number for untimed logs)
    "source": pl.String,       # input path as given
    "line": pl.Int64,          # 1-based line number of the evidence in the source
    "host": pl.String,
    "gpu": pl.String,          # GPU index ("0"), or UUID / PCI bus id when no index is known
    "pid": pl.Int64,
    "series": pl.String,       # memory.used, process.used, allocated, reserved, ...
    "bytes": pl.Int64,
    "total_bytes": pl.Int64,   # capacity when the source states it
    "step": pl.Int64,
    "label": pl.String,        # free-form tag (step-marker tag, process name, POD_LABEL + namespace/pod/container)
}

# A process.used series whose holder is a Kubernetes pod (GPU exporters attribute memory to pods, not
# pids) is labelled POD_LABEL + "namespace/pod/container"; findings then name the pod.
POD_LABEL = "pod "

# One thing that happened.
EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "time": UTC_TIME,
    "uptime": pl.Float64,
    "source": pl.String,
    "line": pl.Int64,
    "kind": pl.String,         # oom_kill, oom_invoked, gpu_oom, xid, sanitizer_leak, marker, ...
    "pid": pl.Int64,
    "process": pl.String,
    "gpu": pl.String,
    "bytes": pl.Int64,
    "detail": pl.String,       # JSON object with kind-specific fields (scope, rss, stack, code, ...)
    "text": pl.String,         # the raw evidence line
}

EVENT_KINDS = (
    "oom_kill", "oom_invoked", "oom_reaped", "gpu_oom", "xid", "sanitizer_leak",
    "sanitizer_summary", "sanitizer_error", "process_start", "process_gone", "marker", "driver_error",
    "gpu_oom_counted",  # the allocator's num_ooms counter rose: an OutOfMemoryError was raised (memory_stats())
    "alloc_retry",      # num_alloc_retries rose: a cudaMalloc failed, the allocator freed its cache and retried
    # a distributed job (parsers/torch/distributed.py, forensics/ranks.py)
    "collective_error", "rank_exit", "rank_signal", "rank_info",
    "allocation_site",   # a call path's allocations live at a memory snapshot's dump (detail: how they grew)
    # a job, step, container or worker ended by a signal (a scheduler's cancel, a shell's "Killed", exit
    # code 137) whose record does not say it was the OOM killer (parsers/jobs/)
    "job_killed",
    "kv_cache_leak",    # a serving engine's own check found KV-cache slots never given back (SGLang)
)


# A byte count outside these bounds is garbage read as a number (no GPU or host holds 2^50 bytes,
# and only the `*_delta` summary figures of HF Trainer can be negative). ingest drops such values
# from every parser; a parser that scales what it reads (MiB to bytes) drops its own.
MAX_PLAUSIBLE_BYTES = 1 << 50
IMPLAUSIBLE = "implausible byte count (negative or over 1 PiB), value dropped"


def empty_samples() -> pl.DataFrame:
    return pl.DataFrame(schema=SAMPLES_SCHEMA)


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENTS_SCHEMA)


# conform() casts a frame of at most this many rows column by column
SMALL_FRAME_ROWS = 4096


def conform(df: pl.DataFrame | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add missing columns as nulls, cast, and order columns as the schema says."""
    if df is None or df.width == 0:
        return pl.DataFrame(schema=schema)
    if list(df.schema.items()) == list(schema.items()):
        return df   # already conforming (frames built by samples_frame / events_frame): no copy
    if df.height <= SMALL_FRAME_ROWS:
        # column by column (Series casts run no query): a small file's table pays a query's fixed cost
        # for a few rows; the same casts as the query's below
        try:
            return pl.DataFrame([df.get_column(name).cast(dtype, strict=False) if name in df.columns
                                 else pl.Series(name, [None] * df.height, dtype=dtype)
                                 for name, dtype in schema.items()])
        except pl.exceptions.InvalidOperationError:
            pass   # a cast the Series refuses (text to a time): the query decides, and says why
    exprs = []
    for name, dtype in schema.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def _fit_int64(rows: list[dict]) -> list[dict]:
    """A Python int beyond Int64 (a garbage digit run read as a number) becomes null instead of
    failing the whole frame."""
    for r in rows if isinstance(rows, list) else ():
        for k, v in (r.items() if isinstance(r, dict) else ()):
            if type(v) is int and not -(1 << 63) <= v < (1 << 63):
                r[k] = None
    return rows


def samples_frame(rows_or_df) -> pl.DataFrame:
    if isinstance(rows_or_df, pl.DataFrame):
        return conform(rows_or_df, SAMPLES_SCHEMA)
    rows_or_df = _fit_int64(rows_or_df) if rows_or_df else rows_or_df
    return conform(pl.DataFrame(rows_or_df, schema_overrides={k: v for k, v in SAMPLES_SCHEMA.items()}, infer_schema_length=None) if rows_or_df else None, SAMPLES_SCHEMA)


def events_frame(rows_or_df) -> pl.DataFrame:
    if isinstance(rows_or_df, pl.DataFrame):
        return conform(rows_or_df, EVENTS_SCHEMA)
    rows_or_df = _fit_int64(rows_or_df) if rows_or_df else rows_or_df
    return conform(pl.DataFrame(rows_or_df, schema_overrides={k: v for k, v in EVENTS_SCHEMA.items()}, infer_schema_length=None) if rows_or_df else None, EVENTS_SCHEMA)


@dataclass
class Skipped:
    """Lines a parser could not use: counted per reason, with the first few line numbers as examples."""
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[int]] = field(default_factory=dict)

    def add(self, reason: str, line: int | None = None, n: int = 1) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + n
        if line is not None:
            ex = self.examples.setdefault(reason, [])
            if len(ex) < 5:
                ex.append(line)

    def add_lines(self, reason: str, lines: list[int] | pl.Series) -> None:
        # counted, not copied: a batch of millions of skipped lines keeps only its first few numbers
        if not len(lines):
            return
        self.counts[reason] = self.counts.get(reason, 0) + len(lines)
        ex = self.examples.setdefault(reason, [])
        need = max(0, 5 - len(ex))
        ex.extend(int(n) for n in lines[:need])

    def add_count(self, reason: str, n: int, first: list[int]) -> None:
        """n lines skipped for `reason`, of which `first` are the first few line numbers."""
        if n:
            self.counts[reason] = self.counts.get(reason, 0) + n
            ex = self.examples.setdefault(reason, [])
            ex.extend(first[: max(0, 5 - len(ex))])

    def merge(self, other: "Skipped") -> None:
        for reason, n in other.counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + n
            ex = self.examples.setdefault(reason, [])
            ex.extend(other.examples.get(reason, [])[: max(0, 5 - len(ex))])

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class Parsed:
    """What a parser returns for one file."""
    samples: pl.DataFrame = field(default_factory=empty_samples)
    events: pl.DataFrame = field(default_factory=empty_events)
    skipped: Skipped = field(default_factory=Skipped)
    # How this source tells time: "wall" (explicit zone), "wall-assumed" (zone from --tz),
    # "wall-yearless" (syslog, year inferred), "uptime" (seconds since boot), "none" (index only).
    clock: str = "none"
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)  # parser-specific facts (e.g. sanitizer LEAK SUMMARY)
    # a file claimed by its bytes: how many records its evidence line numbers count (it has no text lines)
    lines: int | None = None

    @property
    def records(self) -> int:
        return self.samples.height + self.events.height



def detail_dict(text: str | None) -> dict:
    """An event's `detail` (a JSON object as text) as a dict; {} when it is empty or not an object."""
    if not text:
        return {}
    try:
        d = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


@dataclass
class InputInfo:
    """One row of the inputs table (and of the JSON summary's `inputs`)."""
    path: str
    format: str | None = None
    reason: str = ""            # why this parser claimed it (or why none did)
    lines: int = 0
    records: int = 0
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    skip_examples: dict[str, list[int]] = field(default_factory=dict)
    start: object = None        # datetime | None, filled by the timeline
    end: object = None
    error: str | None = None
    clock: str = "none"
    anchor: str | None = None   # how the clock was placed on the timeline (timeline fills it)
    compression: str | None = None
    wrapper: str | None = None
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one-line messages about this input (also in Bundle.problems)


@dataclass
class Bundle:
    inputs: list[InputInfo] = field(default_factory=list)
    samples: pl.DataFrame = field(default_factory=empty_samples)
    events: pl.DataFrame = field(default_factory=empty_events)
    problems: list[str] = field(default_factory=list)   # one-line messages for people
