"""The kinds of finding, each declared once: its severities, its typed JSON facts, its report section and
what it means. The JSON summary's per-kind facts, the JSON Schema's kind section, the report's size
label, the finding order, the kinds tied to a job's lifetime and compare's counts are derived from here,
and so are the JSON Schema's kind section (forensics/report/summary.schema.json) and the table in
docs/design.md, both written by `python -m forensics.report.schema`; the detectors' kinds and
severities, the report's sections and the scan index's columns are tested against it
(tests/test_kinds.py, which also fails while a generated file is stale). Adding a kind: its detector,
one `Kind(...)` below, its tests, and that command.

No detection, report or parser code is imported here (only the data model), so every layer may read
the registry."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from forensics.model import detail_dict

_INT64 = 2**63    # a whole float beyond int64 is no integer fact (JSON readers take int64)
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}


# ---- values as JSON holds them --------------------------------------------------------------------

def iso(t) -> str | None:
    """ISO-8601 UTC with Z, or None."""
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        t = t.astimezone(timezone.utc)
        s = t.isoformat(timespec="milliseconds" if t.microsecond else "seconds")
        return s.replace("+00:00", "Z")
    return str(t)


def json_num(x):
    """A number as JSON holds it (not NaN or infinite; numpy scalars as Python's)."""
    if x is None or isinstance(x, bool):
        return None
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x if isinstance(x, int) else None


def json_int(x):
    """An integer fact; a whole float (12.0) counts, anything else is unknown."""
    x = json_num(x)
    if isinstance(x, float):
        return int(x) if x.is_integer() and abs(x) < _INT64 else None
    return x


def json_str(x):
    return None if x is None or x == "" else str(x)


def json_when(v):
    """A time as ISO-8601, a step or sample number as it is."""
    if isinstance(v, datetime) or v is None:
        return iso(v)
    return json_num(v) if isinstance(v, (int, float)) or hasattr(v, "item") else str(v)


def json_bool(x):
    return None if x is None else bool(x)


def json_ints(xs):
    return [i for i in (json_int(x) for x in xs or ()) if i is not None]


def json_strs(xs):
    return [s for s in (json_str(x) for x in xs or ()) if s is not None]


def _frame(fr) -> dict:
    """A stack frame as the summary gives it (a parser's frame dict, or a frame known only as text)."""
    fr = fr if isinstance(fr, dict) else {"symbol": fr}
    return {"symbol": json_str(fr.get("symbol") or fr.get("function")), "module": json_str(fr.get("module")),
            "offset": json_str(fr.get("offset")), "file": json_str(fr.get("file") or fr.get("filename")),
            "line": json_int(fr.get("line"))}


def _py_frame(fr) -> dict:
    """A frame of a Python traceback."""
    fr = fr if isinstance(fr, dict) else {"code": fr}
    return {"file": json_str(fr.get("file")), "line": json_int(fr.get("line")), "function": json_str(fr.get("func")),
            "code": json_str(fr.get("code"))}


def _series_fit(s: dict) -> dict:
    return {"series": json_str(s.get("series")), "source": json_str(s.get("source")), "pid": json_int(s.get("pid")),
            "label": json_str(s.get("label")), "pattern": json_str(s.get("pattern")),
            "growth_bytes": json_int(s.get("growth_bytes")), "rate_bytes_per_hour": json_num(s.get("rate_bytes_per_hour")),
            "rate_bytes_per_step": json_num(s.get("rate_bytes_per_step")), "onset": json_when(s.get("onset")),
            "classification": json_str(s.get("classification"))}


def failure_step(e: dict) -> dict:
    """One step of a distributed job's failure sequence (detect/distributed.py)."""
    return {"kind": json_str(e.get("kind")), "rank": json_int(e.get("rank")), "path": json_str(e.get("path")),
            "line": json_int(e.get("line")), "what": json_str(e.get("what")),
            "time": json_when(e.get("time")) if e.get("time") else None,
            "consequence_of_first": json_bool(e.get("consequence_of_first"))}


def _site(x) -> dict | None:
    """A leak's site: the call path whose bytes per step match the leak's (detect/allocations.py)."""
    if not isinstance(x, dict):
        return None
    return {"site": json_str(x.get("site")), "bytes_per_step": json_num(x.get("bytes_per_step")),
            "from": json_str(x.get("from")), "path": json_str(x.get("path")), "line": json_int(x.get("line"))}


def _other_process(o) -> dict:
    return {"pid": json_int(o.get("pid")), "bytes": json_int(o.get("bytes"))} if isinstance(o, dict) else \
        {"pid": None, "bytes": None}


def _ranks(d: dict) -> list[dict]:
    return [{"rank": int(r) if str(r).isdigit() else None, "pid": json_int(v.get("pid")), "gpu": json_str(v.get("gpu"))}
            for r, v in (d.get("ranks") or {}).items() if isinstance(v, dict)]


# ---- fact types: how a detail value is read and how the schema describes it -----------------------

@dataclass(frozen=True)
class FactType:
    read: Callable | None   # the detail's value -> the JSON value (None: the Fact reads the whole detail)
    ref: dict               # its schema when the fact has no description of its own
    typed: dict | None = None   # its schema beside a description or a minimum (None: `ref`)


def _ref(name: str) -> dict:
    return {"$ref": f"#/$defs/{name}"}


BYTES = FactType(json_int, _ref("bytes"), {"type": ["integer", "null"]})
INT = FactType(json_int, _ref("int_or_null"), {"type": ["integer", "null"]})
NUM = FactType(json_num, _ref("number_or_null"), {"type": ["number", "null"]})
STR = FactType(json_str, _ref("string_or_null"), {"type": ["string", "null"]})
BOOL = FactType(json_bool, {"type": ["boolean", "null"]})
POSITION = FactType(json_when, _ref("position"))
INTS = FactType(json_ints, {"type": "array", "items": {"type": "integer"}})
STRS = FactType(json_strs, _ref("strings"))


def one_of(*values: str) -> FactType:
    """A code from a fixed list, or null."""
    return FactType(json_str, {"enum": [*values, None]})


def list_of(read: Callable, items: dict) -> FactType:
    """A list, each item read by `read` (an absent item is left out)."""
    return FactType(lambda xs: [read(x) for x in xs or () if x is not None], {"type": "array", "items": items})


def custom(schema: dict) -> FactType:
    """A fact read from the whole detail by the Fact's own `read`."""
    return FactType(None, schema)


@dataclass(frozen=True)
class Fact:
    name: str                   # the JSON summary's field
    type: FactType
    doc: str | None = None      # the schema's description
    key: str | None = None      # the detail's key (the detector's or parser's own name), when not `name`
    read: Callable | None = None   # a reader of the whole detail, for a fact of several keys
    minimum: int | None = None

    def value(self, detail: dict):
        return self.read(detail) if self.read else self.type.read(detail.get(self.key or self.name))

    def schema(self) -> dict:
        if self.doc is None and self.minimum is None:
            return dict(self.type.ref)
        out = dict(self.type.typed or self.type.ref)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.doc is not None:
            out["description"] = self.doc
        return out


@dataclass(frozen=True)
class Kind:
    name: str
    severities: tuple[str, ...]     # those its detector gives, the usual first
    order: int                      # among findings of one severity, lower first (detect/analyze.py)
    description: str                # one line (the schema's description of its facts)
    facts: tuple[Fact, ...] = ()    # beyond the common fields, every finding of the kind has them all
    section: str | None = None      # the report's own section for it (a key of the report context), beside
                                    # the findings list
    bytes_label: str = "Size"       # what its `bytes` is, said in the report
    index_column: str | None = None     # the scan index's column counting it
    compared: bool = False          # counted before and after by compare
    job_event: bool = False         # an event tied to the job or not (detect/jobs.py): another process's,
                                    # outside the job's lifetime, is context and falls to info

    @property
    def severity(self) -> str:
        return self.severities[0]

    def json_facts(self, detail: dict) -> dict:
        return {f.name: f.value(detail) for f in self.facts}

    def event_detail(self, text: str | None) -> dict:
        """An event's detail as the events frame carries it (JSON text), each key a fact of this kind is
        read from typed as the fact declares (a value of another type is unknown, None); other keys as
        they are."""
        d = detail_dict(text)
        for f in self.facts:
            key = f.key or f.name
            if f.read is None and key in d:
                d[key] = f.type.read(d[key])
        return d


_KINDS = (
    Kind("leak", ("critical", "warning"), 0, "memory that grows and does not fall back, one finding per GPU and job",
         bytes_label="Peak", facts=(
             Fact("capacity_bytes", BYTES),
             Fact("log_hours", NUM, "hours the projected series was logged"),
             Fact("ran_out", one_of("gpu_oom", "oom_kill"), "the out-of-memory this growth ended in"),
             Fact("start_step", INT, "the training step at the onset"),
             Fact("steps_at", list_of(json_when, _ref("position")), "where each stair of a staircase rises"),
             Fact("rate_bytes_per_sample", NUM),
             Fact("exhaust_in_steps", NUM, "steps until memory is full (a log without a clock)"),
             Fact("exhaust_in_samples", NUM, "samples until memory is full (a log without a clock or steps)"),
             Fact("job_number", INT, "which job of the series' log (1-based)",
                  read=lambda d: json_int((d.get("job") or {}).get("number"))),
             Fact("job_count", INT, "how many jobs the series' log holds",
                  read=lambda d: json_int((d.get("job") or {}).get("of"))),
             Fact("series_fits", list_of(_series_fit, _ref("series_fit")), "each series that shows the growth",
                  key="series"),
             Fact("site", custom({"type": ["object", "null"]}),
                  "the code that leaks: the memory snapshot's leak site or compute-sanitizer call path whose bytes "
                  "per step match the leak's (site, bytes_per_step, from: the finding kind it comes from, path and "
                  "line of its evidence)", read=lambda d: _site(d.get("site"))),
             Fact("sites", list_of(_site, {"type": "object"}),
                  "every site whose bytes per step, alone or together, match the leak's (the first is `site`)"),
         )),
    Kind("cache_growth", ("info",), 5, "reserved (cached) memory grows while allocated memory stays level: the "
         "caching allocator, not a leak", bytes_label="Peak", facts=(
             Fact("device_growth_bytes", BYTES, "growth nvidia-smi saw on the device meanwhile"),
         )),
    Kind("cache_warmup", ("info",), 9, "reserved memory that rose at the start and then held level: the caching "
         "allocator warming up", bytes_label="Peak"),
    Kind("gpu_oom", ("critical", "warning", "info"), 2, "a GPU out-of-memory error (PyTorch's, JAX/XLA's, TensorFlow's, the "
         "CUDA APIs', ggml's, CuPy's message); one finding per distinct message", section="gpu_ooms",
         bytes_label="Tried to allocate", index_column="gpu_ooms", compared=True, job_event=True, facts=(
             Fact("requested_bytes", BYTES, "\"Tried to allocate\"", key="requested"),
             Fact("capacity_bytes", BYTES, "\"total capacity\" of the GPU", key="total"),
             Fact("free_bytes", BYTES, key="free"),
             Fact("allocated_bytes", BYTES, "allocated by PyTorch", key="allocated"),
             Fact("reserved_bytes", BYTES, "reserved by PyTorch's caching allocator in all", key="reserved"),
             Fact("reserved_unallocated_bytes", BYTES, "reserved by PyTorch but unallocated", key="reserved_unallocated"),
             Fact("private_pools_bytes", BYTES, "allocated in private pools (CUDA graphs)", key="private_pools"),
             Fact("allowed_bytes", BYTES, "the limit the message states (memory fraction)", key="allowed"),
             Fact("process_in_use_bytes", BYTES, "\"this process has ... memory in use\"", key="this_process_in_use"),
             Fact("other_processes", list_of(_other_process, {
                 "type": "object", "required": ["pid", "bytes"],
                 "properties": {"pid": _ref("int_or_null"), "bytes": _ref("bytes")}, "additionalProperties": True}),
                  "other processes the message lists on the GPU"),
             Fact("count", INT, "times the same message was printed", minimum=1),
             Fact("site", STR, "the allocating line of the traceback (file:line in function)"),
             Fact("traceback", list_of(_py_frame, _ref("python_frame"))),
             Fact("exception", STR, "the exception class"),
             Fact("torch_era", STR, "which PyTorch releases print the message this way"),
             Fact("framework", STR, "whose message it is: pytorch, jax, tensorflow, cuda (the CUDA runtime or driver "
                  "API), ggml, cupy"),
             Fact("device_api", STR, "the GPU API the message names: cuda, or hip (a ROCm build of PyTorch)"),
             Fact("allocator", STR, "the allocator the message names (XLA's and TensorFlow's GPU_0_bfc, ggml's CUDA0)"),
             Fact("limit_bytes", BYTES, "the allocator's limit (TensorFlow's BFC Stats: Limit)", key="limit"),
             Fact("in_use_bytes", BYTES, "held by the allocator when it failed (TensorFlow's BFC InUse, CuPy's "
                  "allocated so far)", key="in_use"),
             Fact("shape", STR, "the shape of the tensor or buffer that could not be allocated (TensorFlow; XLA's "
                  "largest peak buffer)"),
             Fact("node", STR, "the graph node that allocated (TensorFlow)"),
         )),
    Kind("oom_kill", ("critical", "info"), 3, "the kernel's OOM killer killed a process (host memory); the victim in "
         "pid/process, host memory held in bytes", section="oom_kills", bytes_label="Resident memory (RSS) when killed",
         index_column="oom_kills", compared=True, job_event=True, facts=(
             Fact("scope", one_of("global", "memcg"), "the whole host ran out, or a memory cgroup hit its limit"),
             Fact("cgroup", STR, "the victim's memory cgroup (task_memcg): its container, pod or systemd unit",
                  key="task_memcg"),
             Fact("oom_cgroup", STR, "the memory cgroup whose limit was hit (memcg scope only)", key="memcg"),
             Fact("constraint", STR, "CONSTRAINT_NONE, CONSTRAINT_MEMCG, CONSTRAINT_CPUSET, CONSTRAINT_MEMORY_POLICY"),
             Fact("anon_rss_bytes", BYTES, key="anon_rss"),
             Fact("file_rss_bytes", BYTES, key="file_rss"),
             Fact("shmem_rss_bytes", BYTES, key="shmem_rss"),
             Fact("total_vm_bytes", BYTES, key="total_vm"),
             Fact("pgtables_bytes", BYTES, key="pgtables"),
             Fact("uid", INT),
             Fact("oom_score_adj", INT),
             Fact("score", INT, "the victim's badness score (older kernels' Kill process line)"),
             Fact("trigger_process", STR, "the task whose allocation invoked the OOM killer", key="trigger"),
             Fact("trigger_pid", INT),
             Fact("gfp_mask", STR),
             Fact("cpuset", STR),
             Fact("nodemask", STR),
             Fact("mems_allowed", STR),
             Fact("cgroup_usage_bytes", BYTES, "the memory cgroup's usage when it hit its limit", key="memcg_usage"),
             Fact("cgroup_limit_bytes", BYTES, key="memcg_limit"),
             Fact("cgroup_failcnt", INT, key="memcg_failcnt"),
             Fact("kill_line_missing", custom({"type": "boolean"}), "the `Killed process` line is not in the log (the "
                  "kill is known from its report)", read=lambda d: bool(d.get("inferred_from"))),
             Fact("inferred_from", one_of("oom_kill_summary", "kill_process_line"),
                  "the line that named the victim when the Killed process line is missing"),
         )),
    Kind("residual_process", ("warning",), 4, "a process that keeps GPU memory after its job's main process died",
         bytes_label="Still held", compared=True, facts=(
             Fact("parent_pid", INT, "the process that went before it (null: it outlived its own kill)"),
             Fact("held_bytes", BYTES),
             Fact("until_end_of_log", BOOL),
         )),
    Kind("sanitizer_leak", ("warning", "info"), 8, "compute-sanitizer allocations never freed, one finding per "
         "allocation site", section="sanitizer", bytes_label="Never freed", facts=(
             Fact("site", STR, "the allocation site (user frame)"),
             Fact("count", INT, "allocations from this site"),
             Fact("expected", BOOL, "the caching allocator's own segments, still held at exit: not a leak"),
             Fact("stack", list_of(_frame, _ref("native_frame")), "the first allocation's backtrace, innermost first"),
         )),
    Kind("xid", ("critical", "warning", "info"), 7, "NVIDIA driver (NVRM) Xid errors, one finding per GPU (per MIG "
         "device on a MIG GPU) and code", section="xids", index_column="xids", compared=True, job_event=True,
         facts=(
             Fact("code", INT, "the Xid number; null: a GPU fallen off the bus without an Xid line"),
             Fact("xid_name", STR, "NVIDIA's mnemonic (ROBUST_CHANNEL_...)"),
             Fact("meaning", STR),
             Fact("fatal", BOOL, "the job on that GPU could not go on"),
             Fact("bus_id", STR, "PCI domain:bus:device as NVRM prints it, lower case (0000:a1:00)"),
             Fact("gpu_uuid", STR, "from the driver's `GPU at PCI:...: GPU-...` line"),
             Fact("gpu_instance", INT, "MIG GPU instance (GPU-I)"),
             Fact("compute_instance", INT, "MIG compute instance (GPU-CI)"),
             Fact("channel", STR, "the channel id, hex as printed"),
             Fact("caused_by_xid", INT, "the earlier Xid the driver names as the cause"),
             Fact("message", STR, "the driver's text after the code (first line)"),
             Fact("count", INT, minimum=1),
             Fact("pids", INTS),
             Fact("processes", STRS),
         )),
    Kind("slowdown", ("warning",), 6, "steps that take longer as memory fills", facts=(
        Fact("early_seconds_per_step", NUM),
        Fact("late_seconds_per_step", NUM),
        Fact("leak_onset", POSITION),
    )),
    Kind("distributed_failure", ("critical", "warning"), 2, "a distributed job's failure in the order it happened: "
         "the rank that failed first, then what the other ranks and the launcher did (a hang when no rank's own "
         "failure is in the logs)", facts=(
             Fact("first_failure", custom({"oneOf": [{"type": "null"}, _ref("failure_step")]}),
                  read=lambda d: failure_step(d["first_failure"]) if isinstance(d.get("first_failure"), dict) else None),
             Fact("sequence", list_of(failure_step, _ref("failure_step")),
                  "the first failure, then one step per rank and kind of what followed"),
             Fact("torchrun_root_cause_rank", INT, "the rank torchrun's ChildFailedError summary names as its root cause"),
             Fact("ranks", custom({"type": "array", "items": {
                 "type": "object", "required": ["rank", "pid", "gpu"],
                 "properties": {"rank": {"type": ["integer", "null"]}, "pid": _ref("int_or_null"),
                                "gpu": _ref("string_or_null")}, "additionalProperties": True}}),
                  "each rank and the pid and GPU the logs give it", read=_ranks),
             Fact("order_note", STR, "why the order may be in doubt"),
             Fact("own_failures", list_of(failure_step, _ref("failure_step")),
                  "other ranks' own failures (not consequences of the first)"),
             Fact("ranks_with_errors", INTS, "a hang: the ranks whose collectives failed"),
             Fact("ranks_without", INTS, "a hang: the ranks known that reported no error"),
         )),
    Kind("collective_error", ("warning", "info"), 10, "a rank's collective (NCCL, gloo) or backend error, one finding "
         "per rank and error", facts=(
             Fact("backend", STR, "nccl or gloo"),
             Fact("error", STR, "timeout, watchdog_detected, watchdog_stuck, aborted, peer_closed, peer_reset, remote, "
                  "transport_error (waits on a peer); cuda_error, nccl_error (the rank's own); watchdog_exception, "
                  "backend_error"),
             Fact("local_rank", INT),
             Fact("pg", INT, "the process group, when c10d names one other than the default"),
             Fact("pg_rank", INT, "the rank within that process group"),
             Fact("op", STR, "the collective (OpType: ALLREDUCE, BROADCAST, ...)"),
             Fact("seq", INT, "the collective's sequence number"),
             Fact("timeout_ms", INT),
             Fact("ran_ms", INT),
             Fact("last_enqueued", INT),
             Fact("last_completed", INT),
             Fact("stuck_seconds", INT),
             Fact("reason", STR, "NCCL's reason (unhandled cuda error, ...)"),
             Fact("code", STR, "NCCL's error code name (ncclRemoteError, ...)"),
             Fact("count", INT, "lines of this error", minimum=1),
         )),
    # a memory snapshot's: their facts are the finding's `allocation` object
    Kind("allocation_leak", ("warning",), 1, "a call path of a memory snapshot whose live allocations keep "
         "accumulating (its facts: the finding's `allocation`)", section="allocations", bytes_label="Still allocated"),
    Kind("allocation_footprint", ("info",), 11, "a memory snapshot's device footprint, its largest call paths (its "
         "facts: the finding's `allocation`)", section="allocations", bytes_label="Allocated in all"),
    Kind("kv_cache_leak", ("warning",), 8, "a serving engine's own check found its KV-cache pool's free slots do not "
         "add up (SGLang)", facts=(
             Fact("engine", STR, "the engine that reported it (sglang)"),
             Fact("available_tokens", INT, "token slots the pool had free when checked idle"),
             Fact("total_tokens", INT, "token slots the pool holds"),
         )),
)
KINDS: dict[str, Kind] = {k.name: k for k in _KINDS}


def schema_section() -> dict:
    """The JSON Schema's kind section: the `kind` enum, one `if kind then $defs[kind]` per kind with facts,
    and those `$defs`."""
    with_facts = [k for k in KINDS.values() if k.facts]
    return {
        "enum": list(KINDS),
        "allOf": [{"if": {"required": ["kind"], "properties": {"kind": {"const": k.name}}},
                   "then": _ref(k.name)} for k in with_facts],
        "$defs": {k.name: {"description": k.description, "required": [f.name for f in k.facts],
                           "properties": {f.name: f.schema() for f in k.facts}} for k in with_facts},
    }
