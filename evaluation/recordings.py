"""Truth files of the recorded incidents and what each view of a recording must say.

Two kinds of truth file, one `Recording` each:
- `sample_logs/<incident>/README.md` front matter (`key: value` lines between two `---` lines; the keys:
  sample_logs/README.md);
- `tests/corpus/<half>/<case>/truth.json` (keys: tests/corpus/README.md).
A view (all files; the timed nvidia-smi CSV; the untimed `-l 1` CSV; the step log; dmon; compute-apps) is
told apart by sniffing each file's format, not its name; a truth.json also says which files hold the jobs'
step logs (`step_logs`), so that one no step-log reader recognizes is a miss of the step-log view, not a view
the recording lacks. Whether a view can hold the evidence is decided by
`view_expectation` from what the truth file states (its findings, and `flat_in_device_views`), never by a
recording's name.
"""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

from forensics import parsers
from forensics.detect.thresholds import IDLE_BAND, SHORT_MIN, SHORT_RUN, SHORT_SIMILAR
from forensics.errors import InputError
from forensics.io.sources import Source, discover

POOL_GROWTH_SHARE = 0.5   # a pool that grew by less than half the leak hid it from device memory
# a pool whose every rise during the leak came within this many seconds (one reading of a 1 s logger)
# is one jump to device memory
POOL_ONE_JUMP_S = 1.0

ROOT = Path(__file__).resolve().parent.parent


VIEWS = ("all", "smi_csv", "smi_l1", "steplog", "dmon", "apps", "smi_q")
VIEW_TITLES = {"all": "all files", "smi_csv": "nvidia-smi CSV", "smi_l1": "nvidia-smi -l 1",
               "steplog": "step log", "dmon": "dmon", "apps": "compute-apps", "smi_q": "nvidia-smi -q"}
DEVICE_VIEWS = ("smi_csv", "smi_l1", "dmon", "apps", "smi_q")   # device memory, as nvidia-smi sees it
TOTAL_VIEWS = ("smi_csv", "smi_l1", "dmon", "smi_q")             # the GPU's total, every process's memory summed
# the job's own log: its printed memory lines, torch.cuda.memory_summary() tables or memory_stats() dicts
# (JAX's too) it logged
STEPLOG_FORMATS = ("step-markers", "hf-trainer-memory", "deepspeed-memory", "megatron-memory", "pytorch-memory-summary",
                   "pytorch-memory-stats")
NOT_RECOGNIZED = "not recognized"   # a view's result when a step log of the case was read as no step log


@dataclass
class Recording:
    name: str
    root: str                        # sample_logs | tune | heldout | a folder given with --recordings
    folder: Path
    expected: str
    findings: list[str]
    pattern: str | None = None
    onset: datetime | None = None    # the leak's onset, UTC
    jobs: list[tuple[datetime, datetime]] = field(default_factory=list)   # lifetimes, UTC
    tz: str = "UTC"
    flat_in_device_views: str | None = None   # why the device views do not hold the leak (truth file key)
    mixed_in_total: str | None = None          # why the GPU's total does not hold it (`shared_total`)
    leak_spans: list[tuple[datetime, datetime]] = field(default_factory=list)   # (leak onset, job end), UTC
    ending: str | None = None        # how the incident's job ended (truth.json `ending`: exit, sigkill, cuda_oom, ...)
    step_logs: list[str] | None = None   # the files the jobs' step logs went to (truth.json); None: not listed
    no_reserved: bool = False        # every step log's print style prints no reserved memory (PRINTS_NO_RESERVED)


def _utc(text) -> datetime | None:
    if not text or text in ("null", "None"):
        return None
    try:
        t = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace(",", "."))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def front_matter(readme: Path) -> dict[str, str]:
    """The `key: value` lines between the first two `---` lines (format: sample_logs/README.md)."""
    lines = readme.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    meta = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return meta
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return {}


def _listed(value) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if not value or value == "none":
        return []
    return [x.strip() for x in str(value).split(",") if x.strip()]


def pool_kept_flat(jobs: list[dict]) -> str | None:
    """Why the device views cannot hold a leak, from the truth file's own numbers: the leaking jobs'
    allocator pool (`reserved`: what the framework took from the driver, all that device memory sees)
    grew by less than half of what the leak kept, so the leak grew inside memory the pool already held."""
    leaking = [j for j in jobs if j.get("leaks") and j.get("leak_growth_bytes")
               and j.get("reserved_first") is not None and j.get("reserved_max") is not None]
    if not leaking or any(j["reserved_max"] - j["reserved_first"] >= POOL_GROWTH_SHARE * j["leak_growth_bytes"]
                          for j in leaking):
        return None
    j = leaking[0]
    return (f"the allocator's pool did not grow with the leak (reserved {j['reserved_first'] / 2**20:.0f} -> "
            f"{j['reserved_max'] / 2**20:.0f} MiB while it kept {j['leak_growth_bytes'] / 2**20:.0f} MiB): "
            "device memory cannot show it")


def pool_grew_at_once(jobs: list[dict]) -> str | None:
    """Why the device views cannot hold a leak, from the truth file's own numbers: the leaking jobs'
    allocator pool rose during the leak only within POOL_ONE_JUMP_S (a cap reached, or one large
    block) and held otherwise, so device memory shows one jump and a level, which is also the shape
    of a one-off allocation."""
    leaking = [j for j in jobs if j.get("leaks") and j.get("leak_growth_bytes")]
    if not leaking or any(j.get("pool_rise_seconds") is None or j["pool_rise_seconds"] > POOL_ONE_JUMP_S
                          for j in leaking):
        return None
    j = leaking[0]
    return (f"the allocator's pool rose during the leak only within {j['pool_rise_seconds']:.1f} s "
            f"({j['pool_rises_after_onset']} step(s)) and then held: device memory shows one jump, a one-off "
            "allocation's shape")


def shared_total(jobs: list[dict]) -> str | None:
    """Why the GPU's total memory cannot show a leak, from the truth file's jobs: another job on the GPU
    started or ended between the leak's onset and the leaking job's end, or outlived it. The total then
    moves by that job's memory (a fall larger than the leak, or a fall back to where the leak began
    while the other job goes on, a transient allocation's shape), which the total cannot tell from the
    leak's own; only per-process memory (compute-apps) separates them."""
    for lk in jobs:
        onset, end = _utc(lk.get("leak_onset_time")), _utc(lk.get("end"))
        if not lk.get("leaks") or onset is None or end is None:
            continue
        for other in jobs:
            a, b = _utc(other.get("start")), _utc(other.get("end"))
            if other is lk or a is None or b is None or not (a < end and b > _utc(lk.get("start"))):
                continue
            if onset < a < end or onset < b < end or b > end:
                return (f"pid {other.get('pid')} shares the GPU and {'started' if onset < a < end else 'ended'} "
                        f"{'during the leak' if onset < a < end or onset < b < end else 'after the leaking job'}"
                        ": the GPU's total moves by its memory too")
    return None


# tools/corpus/workloads.py's print styles that print no reserved (cached) memory, only allocated figures or their
# peaks: the caching allocator's growth is not in such a step log
PRINTS_NO_RESERVED = frozenset({"tracemalloc", "tutorial", "mmengine", "detectron2", "tfinfo", "fairseq"})


def _options(job: dict) -> dict[str, str] | None:
    """A job's command-line options (each word to the next), None where it has no command (a forked worker)."""
    words = shlex.split(job.get("command") or "")
    return dict(zip(words, words[1:])) if words else None


def prints_no_reserved(jobs: list[dict]) -> bool:
    """Whether every style the jobs printed a step log in (`--style`, workloads.py's default `spine`) prints no
    reserved memory."""
    styles = {st for job in jobs if (opts := _options(job)) is not None
              for st in opts.get("--style", "spine").split("+")} - {"none"}
    return bool(styles) and styles <= PRINTS_NO_RESERVED


def step_logs(jobs: list[dict]) -> list[str]:
    """The files (in the case folder) the jobs wrote step logs to, from each job's `stdout` and `command`
    (tools/corpus/workloads.py's options): stdout, unless `--style none` printed no step log there and no
    `--monitor` thread printed its NVML lines there (no `--monitor-file`); `<b>.log` for each further style
    of `--style a+b`; the `--monitor-file`. A job without a command (a forked worker) writes none."""
    out = []
    for job in jobs:
        opts = _options(job)
        if opts is None:
            continue
        styles = opts.get("--style", "spine").split("+")   # (workloads.py's default style)
        monitor = "--monitor" in opts and float(opts["--monitor"]) > 0
        monitor_file = opts.get("--monitor-file") if monitor else None
        if job.get("stdout") and (styles[0] != "none" or (monitor and not monitor_file)):
            out.append(job["stdout"])
        out += [f"{style}.log" for style in styles[1:]]
        if monitor_file:
            out.append(monitor_file)
    return list(dict.fromkeys(out))


def read_recordings(base: Path, root: str) -> list[Recording]:
    """Recordings under `base`: folders with a README.md front matter that states an expected verdict,
    or with a truth.json (tests/corpus format)."""
    out = []
    if not base.is_dir():
        return out
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        tj, rd = d / "truth.json", d / "README.md"
        if tj.is_file():
            try:
                t = json.loads(tj.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                print(f"  {tj}: unreadable ({e}), skipped", file=sys.stderr)
                continue
            if not t.get("expected_verdict"):
                continue
            jobs = [(a, b) for a, b in ((_utc(j.get("start")), _utc(j.get("end"))) for j in t.get("jobs") or [])
                    if a is not None and b is not None]
            spans = [(a, b) for a, b in ((_utc(j.get("leak_onset_time")), _utc(j.get("end")))
                                         for j in t.get("jobs") or [] if j.get("leaks"))
                     if a is not None and b is not None]
            out.append(Recording(t.get("case") or d.name, root, d, t["expected_verdict"],
                                 _listed(t.get("expected_findings")), t.get("pattern"),
                                 _utc(t.get("leak_onset_time")), jobs, t.get("tz") or "UTC",
                                 t.get("flat_in_device_views") or pool_kept_flat(t.get("jobs") or [])
                                 or pool_grew_at_once(t.get("jobs") or []),
                                 shared_total(t.get("jobs") or []), spans, incident_ending(t.get("jobs") or []),
                                 step_logs(t.get("jobs") or []), prints_no_reserved(t.get("jobs") or [])))
        elif rd.is_file():
            m = front_matter(rd)
            if not m.get("expected_verdict"):
                continue
            a, b = _utc(m.get("start")), _utc(m.get("end"))
            onset = _utc(m.get("onset_time"))
            out.append(Recording(m.get("incident") or d.name, root, d, m["expected_verdict"],
                                 _listed(m.get("expected_findings")), m.get("pattern"), onset,
                                 [(a, b)] if a and b else [], m.get("tz") or "UTC",
                                 m.get("flat_in_device_views"), None, [(onset, b)] if onset and b else []))
    return out


def view_of(path: Path) -> tuple[str | None, str | None]:
    """(view, format) of one file, by sniffing its head as `gpu-forensics sniff` does (not by name)."""
    try:
        src = Source.open(path, str(path))
        module, _ = parsers.claim_file(src)
    except (InputError, OSError):
        return None, None
    if module is None:
        return None, None
    name = module.name
    if name == "nvidia-smi-csv":
        # the timed --query-gpu CSV has a timestamp column; the classic `-l 1` one has none
        header = next((ln for ln in src.head() if "memory" in ln.lower()), "")
        return ("smi_csv" if "timestamp" in header.lower() else "smi_l1"), name
    if name in STEPLOG_FORMATS:
        return "steplog", name
    if name == "nvidia-smi-dmon":
        return "dmon", name
    if name == "nvidia-smi-apps":
        return "apps", name
    if name == "nvidia-smi-q":
        return "smi_q", name
    return None, name


def view_files(folder: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"all": [str(folder)]}
    for real, _shown in discover([str(folder)]).files:
        view, _ = view_of(Path(real))
        if view:
            out.setdefault(view, []).append(str(real))
    return out


def unread_step_logs(rec: Recording) -> list[str]:
    """The recording's step logs (truth.json, `step_logs`) that sniffing does not take for a step log, each
    with what read it (`train.log (read as nvidia-smi-csv)`); a listed file the job never wrote is none."""
    out = []
    for name in rec.step_logs or []:
        path = rec.folder / name
        if not path.is_file() or not path.stat().st_size:
            continue
        view, fmt = view_of(path)
        if view != "steplog":
            out.append(f"{name} ({f'read as {fmt}' if fmt else 'no reader claims it'})")
    return out


def view_expectation(rec: Recording, view: str) -> tuple[str | None, str]:
    """The verdict a view must give, or None ("n/a") and why: a view that does not hold the evidence.

    The rule, by what the incident's evidence is:
    - all files: the recording's expected verdict;
    - a residual process (leak without memory growth): only per-process memory (compute-apps) shows
      a process outliving its job; the device total and the step log cannot;
    - compute-sanitizer only (no `leak` growth expected): the evidence is the sanitizer's report;
    - caching-allocator growth: only the step log (allocated vs reserved) tells it from a leak, and only
      one that prints reserved memory;
    - host memory (a kernel OOM kill, GPU flat): the device views show the GPU flat (no_leak); the step
      log's GPU counts are not the incident's evidence;
    - otherwise (GPU memory growth, or a healthy run): every memory view shows it;
    - a leak that grew inside an allocator pool that did not grow with it (truth.json's reserved numbers,
      `pool_kept_flat`, or its `flat_in_device_views`): the device views cannot show it;
    - a leak of one of several jobs sharing the GPU, when another of them started or ended during the
      leak or outlived it (truth.json's jobs, `shared_total`): the GPU's total cannot show it;
    and whatever the incident (`run_recording`): a view with fewer readings of the job's working set
    than the tool needs to see a trend (SHORT_MIN) holds too little of it: it must say `inconclusive`."""
    if view == "all":
        return rec.expected, ""
    kinds = set(rec.findings)
    if rec.expected == "leak" and "leak" not in kinds and "residual_process" in kinds:
        return ("leak", "") if view == "apps" else (None, "only per-process memory shows a residual process")
    if "sanitizer_leak" in kinds and "leak" not in kinds:
        return None, "the evidence is compute-sanitizer's report"
    if rec.expected == "cache_growth":
        if view == "steplog" and rec.no_reserved:
            return None, "the step log prints no reserved memory: allocated alone cannot show the allocator's growth"
        return ("cache_growth", "") if view == "steplog" else (
            None, "device memory alone cannot tell the caching allocator from a leak")
    if rec.flat_in_device_views and view in DEVICE_VIEWS:
        return None, rec.flat_in_device_views
    if rec.mixed_in_total and view in TOTAL_VIEWS:
        return None, rec.mixed_in_total
    if rec.expected == "no_leak" and "oom_kill" in kinds:
        return (None, "a host-memory incident: the step log holds GPU counts only") if view == "steplog" else ("no_leak", "")
    return rec.expected, ""


def incident_ending(jobs: list[dict]) -> str | None:
    """How the job the incident is about ended: the last leaking job's ending, else the last job's."""
    leaky = [j for j in jobs if j.get("leaks")]
    job = (leaky or jobs or [None])[-1]
    return job.get("ending") if job else None


# what the report must name as "What ended the job" for each truth ending (None: nothing fatal of its own;
# a SIGKILL from outside leaves no line in these logs, unless a scheduler's kill record names it)
ENDED_BY = {"cuda_oom": ("gpu_oom",), "oom_kill": ("oom_kill",), "exit": (None,), "logger_stopped": (None,),
            "sigkill": (None, "job_killed")}


def lifetime_of(rec: Recording, t: datetime) -> float | None:
    """Seconds of the job whose lifetime holds `t` (else of the first job; None: no job known)."""
    for a, b in rec.jobs:
        if a <= t <= b:
            return (b - a).total_seconds()
    return (rec.jobs[0][1] - rec.jobs[0][0]).total_seconds() if rec.jobs else None


def working_readings(b: list[int]) -> int:
    """How many of one job's readings (in time order) show its working set: all of them, unless the job
    sat at a start level (a CUDA context, a job not yet allocating) and left it by a rise far faster than
    the rises after it (the start-up reaching its working set): then those from that rise on."""
    n = len(b)
    if n < 2:
        return n
    tol = max(0.01 * float(np.median(np.abs(b))), float(2**20))
    i = 0
    while i + 1 < n and abs(b[i + 1] - b[0]) <= tol:
        i += 1
    if i + 1 >= n:
        return n
    after = np.abs(np.diff(b[i + 1:]))
    if after.size and b[i + 1] - b[i] > SHORT_SIMILAR * float(np.median(after)):
        return n - (i + 1)
    return n


_KEY = ["source", "series", "gpu", "pid"]   # one series of a view's samples


def _held(samples: pl.DataFrame) -> pl.DataFrame:
    """The readings of each series above its idle floor (as detection's lifetimes see it), by time."""
    lo, hi = pl.col("bytes").min().over(_KEY), pl.col("bytes").max().over(_KEY)
    return samples.filter((pl.col("bytes") > lo + IDLE_BAND * (hi - lo)) | (hi == lo)).sort("time")


def _timed(samples: pl.DataFrame) -> bool:
    return "time" in samples.columns and not samples["time"].null_count()


def readings_in_jobs(samples: pl.DataFrame, jobs: list[tuple[datetime, datetime]]) -> int | None:
    """The most readings one series holds inside one job's lifetime while the job held its working set
    (above the series' idle floor, as detection's lifetimes see it, and past a start level it left by
    the start-up's jump, `working_readings`), or None when that cannot be told (no lifetimes known, or a
    file without a clock: its readings cannot be placed in a lifetime)."""
    if not jobs or not _timed(samples):
        return None
    held = _held(samples)
    most = 0
    for a, b in jobs:
        inside = held.filter(pl.col("time").is_between(a, b))
        for _, part in inside.group_by(_KEY):
            most = max(most, working_readings(part["bytes"].to_list()))
    return most


def readings_of_leak(samples: pl.DataFrame, spans: list[tuple[datetime, datetime]]) -> int | None:
    """The most readings one series holds of one leaking job from its leak's onset to the job's end (while
    the job held memory), or None when that cannot be told (no onsets known, or a file without a clock)."""
    if not spans or not _timed(samples):
        return None
    held = _held(samples)
    return max((part.height for a, b in spans
                for _, part in held.filter(pl.col("time").is_between(a, b)).group_by(_KEY)), default=0)


def expectation_seen(rec: Recording, view: str, samples: pl.DataFrame) -> tuple[str | None, str]:
    """`view_expectation`, given what the view's files hold: fewer readings of the job than a trend
    needs (SHORT_MIN) is `inconclusive`; fewer readings of the leak than a trend's rises (SHORT_RUN, in
    every leaking job) cannot show the leak as a trend, nor that there was none: `inconclusive or leak`
    (the start-up's rise and the leak's may read as one trend), never `no_leak`."""
    exp, why = view_expectation(rec, view)
    if view == "all" or exp is None:
        return exp, why
    seen = readings_in_jobs(samples, rec.jobs)
    if seen is not None and seen < SHORT_MIN:
        return "inconclusive", f"only {seen} readings of the job: too few to see a trend"
    of_leak = readings_of_leak(samples, rec.leak_spans) if exp == "leak" else None
    if of_leak is not None and of_leak < SHORT_RUN:
        return "inconclusive or leak", f"only {of_leak} readings of the leak: too few to see it as a trend"
    return exp, why


def verdict_fits(expected: str, got: str) -> bool:
    """Whether a verdict is what a view must say (`expected` may name two: "inconclusive or leak")."""
    return got in expected.split(" or ")


def recording_roots(corpus: str, extra: list[str]) -> list[tuple[Path, str]]:
    roots = []
    if corpus in ("tune", "all"):
        roots.append((ROOT / "sample_logs", "sample_logs"))
        roots.append((ROOT / "tests" / "corpus" / "tune", "tune"))
    if corpus in ("heldout", "all"):
        roots.append((ROOT / "tests" / "corpus" / "heldout", "heldout"))
    roots += [(Path(p), Path(p).name) for p in extra]
    return roots
