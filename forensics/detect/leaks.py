"""Leak and cache-growth findings, one leak per GPU and job: the growing lifetimes of a GPU's series
grouped, a leak told from caching-allocator growth, the rate, the projection to exhaustion, the
likely causes and what to check.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np

from forensics.detect.findings import Finding
from forensics.model import POD_LABEL
from forensics.detect.measure import (DEVICE_SERIES, FRAMEWORK_SERIES, HOST_SERIES, Series, gpu_of_unnamed,
                                      leak_evidence, sample_evidence)
from forensics.detect.series import rising_into
from forensics.detect.thresholds import (DOUBLING, DOUBLINGS_MIN, JOB_START_SKEW_S, LEVEL_SHARE, LEVEL_SIGMAS,
                                         MIN_STAIRS, OOM_PATH_CONF, OOM_READINGS)
from forensics.units import human, rate_text, seconds_text

LEAK_CLASSES = ("linear_growth", "staircase")
# series whose growth is a leak; running peaks (max_allocated, ...) only repeat what these show
# (free.fall: a log of free memory alone, how far free memory fell below its highest: parsers/free.py)
LEAK_SERIES = ("allocated", "reserved", "memory.used", "process.used", "free.fall", *HOST_SERIES)
# ... unless a log prints nothing but peaks (mmengine's `memory`, torchtune's `peak_memory_*`, "peak GPU
# memory" lines): then its peaks are judged. A peak reset at each line is that interval's high-water level;
# a running peak reaches a new high only while memory keeps growing, and stays level once a job has warmed up.
PEAK_OF = {"max_allocated": "allocated", "max_reserved": "reserved"}
# a series whose name alone does not say what grows, as the report names it (series_words)
SERIES_WORDS = {"free.fall": "free.fall: memory in use, read from free memory's fall"}
# which series speaks first for a GPU's leak: the framework's own count is the strongest evidence
EVIDENCE_ORDER = {"allocated": 0, "memory.used": 1, "process.used": 2, "reserved": 3, "free.fall": 4, "host.rss": 5,
                  "host.used": 6}
EVIDENCE_MAX = 8              # evidence lines quoted per leak finding
SETTLED_WORDS = {"flat": "stays flat", "warmup_plateau": "levels off after a warm-up",
                 "sawtooth": "swings around a steady floor", "decline": "declines", "release": "is released"}


def series_words(name: str) -> str:
    """A series as a leak's sentence, a chart's legend and a finding's facts name it."""
    return SERIES_WORDS.get(name, name)


def _span_seconds(s: Series) -> float | None:
    """How long the series' job ran: the span the rate is measured over."""
    return float(s.sec[-1] - s.sec[0]) if s.sec is not None and s.sec.size else None


def _stair_every(f: Finding) -> str:
    parts = []
    if f.stair_period_seconds is not None:
        parts.append(seconds_text(f.stair_period_seconds))
    if f.stair_period_steps is not None:
        n = f.stair_period_steps
        parts.append(f"{n:.0f} steps" if round(n) > 1 else "step")
    return " or ".join(parts)


# What a leak's words say where neither a clock, a step number nor the reading order gives a rate.
NO_RATE = "no clock or step number gives it a rate"


def _fmt_rate(rate_h: float | None, rate_step: float | None, span_seconds: float | None = None,
              rate_sample: float | None = None) -> str | None:
    def known(v: float | None) -> bool:
        return v is not None and math.isfinite(v)

    parts = [rate_text(rate_h, span_seconds)] if known(rate_h) else []
    if known(rate_step):
        parts.append(f"{human(rate_step)}/step")
    if not parts and known(rate_sample):   # no clock and no step: per reading is all there is
        parts.append(f"{human(rate_sample)}/sample")
    if not parts:   # e.g. readings all at one instant: the growth is known, a rate is not
        return None
    return " (".join(parts) + (")" if len(parts) == 2 else "")


def _where(gpu: str | None, host: str | None) -> str:
    w = f"GPU {gpu}" if gpu is not None else "GPU memory"
    return w + (f" on {host}" if host else "")


def _by_rank(groups: dict) -> dict:
    """A GPU's growing series, one group per rank of a distributed job when several ranks grow on it
    (ranks sharing a GPU): each rank's leak is its own finding; series of no rank (the device's own
    view, which sees them all) are a group of their own then. With one growing rank, the GPU's series
    are that rank's finding."""
    out = {}
    for (host, gpu), members in groups.items():
        ranks = {m.result.rank for m in members if m.result.rank is not None}
        if len(ranks) <= 1:
            out[(host, gpu, next(iter(ranks), None))] = members
            continue
        for m in members:
            out.setdefault((host, gpu, m.result.rank), []).append(m)
    return out


def _group_key(s: Series) -> tuple:
    r = s.result
    if r.series in HOST_SERIES:
        return (r.host, "host")
    return (r.host, r.gpu)


def _merge_unplaced(groups: dict, gpus: set[tuple]) -> dict:
    """Growth in series that name no GPU joins the leak of the GPU they belong to (measure.gpu_of_unnamed)."""
    placed = {k: v for k, v in groups.items() if k[1] is not None}
    for k, members in groups.items():
        if k[1] is not None:
            continue
        target = gpu_of_unnamed(k[0], gpus)
        if target in placed:
            placed[target] = placed[target] + members
        else:
            placed[k] = members
    return placed


def _interval(s: Series) -> float:
    """A timed series' typical seconds between readings."""
    return float(np.median(np.diff(s.sec))) if s.sec is not None and s.sec.size > 1 else math.inf


def _leak_finding(members: list[Series], capacity: int | None, device: list[Series]) -> Finding:
    members = sorted(members, key=lambda s: (EVIDENCE_ORDER.get(s.result.series, 9), -s.fit.leak.growth))
    primary = members[0]
    r = primary.result
    timed = next((s for s in members if s.result.x_kind == "time"), None)
    lk = primary.fit.leak
    rate_h = next((s.result.leak["rate_bytes_per_hour"] for s in members if s.result.leak["rate_bytes_per_hour"] is not None), None)
    rate_step = next((s.result.leak["rate_bytes_per_step"] for s in members if s.result.leak["rate_bytes_per_step"] is not None), None)
    proc = [s for s in members if s.result.series == "process.used" and s.result.pid is not None]
    grower = max(proc, key=lambda s: s.fit.leak.growth) if proc else None
    pid = grower.result.pid if grower else r.pid
    holder = _holder(members, pid)
    gpu = next((s.result.gpu for s in members if s.result.gpu is not None), None)
    host = next((s.result.host for s in members if s.result.host is not None), None)
    rank = next((s.result.rank for s in members if s.result.rank is not None), None)
    # a per-process series is labelled with its process name (nvidia-smi's process_name)
    f = Finding(kind="leak", severity="warning", summary="", gpu=gpu, pid=pid, series=r.series,
                pattern=lk.pattern, growth_bytes=int(lk.growth), bytes=int(primary.fit.peak),
                confidence=max(s.fit.leak.confidence for s in members), source=r.source, host=host,
                process=grower.result.label if grower else None, rank=rank)
    pods = [s.result.label for s in members if s.result.series == "process.used" and s.result.label
            and s.result.label.startswith(POD_LABEL)]
    if pods:
        # the memory's holder is a pod (GPU exporters attribute memory to pods, not pids)
        f.pod = pods[0][len(POD_LABEL):]
        if f.process == pods[0]:
            f.process = None
    f.rate_bytes_per_hour = rate_h
    f.rate_bytes_per_step = rate_step
    if timed is not None:
        # growth from a series' first reading of its job on does not say where it began (a coarse logger
        # sees the start-up and the leak as one rise): a finer series that saw the job from that reading
        # on and the growth begin after it places the onset
        placer = timed
        first = timed.to_x(timed.fit.leak.onset)
        if timed.fit.leak.onset <= timed.x[0]:
            placer = next((s for s in members if s.result.x_kind == "time" and _interval(s) < _interval(timed)
                           and s.to_x(s.x[0]) <= first < s.to_x(s.fit.leak.onset)), timed)
        f.start = placer.to_x(placer.fit.leak.onset)
        f.end = timed.to_x(timed.fit.leak.end)
    if r.x_kind != "time":
        f.start_index = primary.to_x(lk.onset)
    if r.x_kind == "index":
        f.detail["rate_bytes_per_sample"] = float(lk.rate)
    if primary.steps is not None and np.isfinite(primary.steps[primary.nearest(lk.onset)]):
        f.detail["start_step"] = int(primary.steps[primary.nearest(lk.onset)])
    # projection: the device's own series when there is one (it sees every allocator), else the primary
    proj = next((s for s in members if s.result.series == "memory.used"), None) or timed or primary
    plk = proj.fit.leak
    cap = capacity or proj.result.capacity
    if cap:
        remaining = cap - plk.end_level
        f.detail["capacity_bytes"] = int(cap)
        proj_rate_h = proj.per_hour(plk.rate, plk.onset, plk.end)
        if proj_rate_h and proj_rate_h > 0:
            hours = max(remaining, 0.0) / proj_rate_h
            f.exhaust_in_hours = hours
            f.exhaust_at = proj.to_x(plk.end) + timedelta(hours=hours)
            duration_h = proj.span_hours()
            f.detail["log_hours"] = duration_h
            if hours <= duration_h:
                f.severity = "critical"
        elif plk.rate > 0:
            n_steps = max(remaining, 0.0) / plk.rate
            f.detail["exhaust_in_" + ("steps" if proj.result.x_kind == "step" else "samples")] = n_steps
            if n_steps <= proj.x[-1] - proj.x[0]:
                f.severity = "critical"
    f.detail["series"] = [
        {"series": s.result.series, "source": s.result.source, "pid": s.result.pid, "rank": s.result.rank,
         "label": s.result.label,
         "pattern": s.fit.leak.pattern, "growth_bytes": int(s.fit.leak.growth),
         "rate_bytes_per_hour": s.result.leak["rate_bytes_per_hour"],
         "rate_bytes_per_step": s.result.leak["rate_bytes_per_step"], "onset": s.result.onset,
         "classification": s.result.classification}
        for s in members]
    f.detail["steps_at"] = [primary.to_x(v) for v in lk.steps]
    # the points of the step a log reads memory at ("before forward", "after step"), each its own series:
    # the same quantity under several labels (a label that only names one quantity, a TensorBoard tag,
    # is no point of the step)
    phases = list(dict.fromkeys(s.result.label for s in sorted(members, key=lambda s: int(s.lines[0]))
                                if s.result.label and s.result.series in FRAMEWORK_SERIES
                                and s.result.series == r.series))
    if len(phases) > 1:
        f.detail["phases"] = phases
    _lifetime_facts(f, timed or primary, members)
    for s in members[:3]:
        f.evidence.extend(leak_evidence(s))
    del f.evidence[EVIDENCE_MAX:]
    where = _where(gpu, host) if r.series not in HOST_SERIES else "Host memory" + (f" on {host}" if host else "")
    span = _span_seconds(timed) if timed is not None else None
    rate_txt = _fmt_rate(rate_h, rate_step, span, f.detail.get("rate_bytes_per_sample"))
    if lk.pattern == "linear":
        how = f"linearly at {rate_txt}" if rate_txt else f"linearly ({NO_RATE})"
    else:
        every = _stair_every(f)
        how = (f"in {f.stairs or len(lk.steps)} stairs of about {human(lk.growth / max(len(lk.steps), 1))}"
               + (f", one every {every}" if every else "")
               + (f" (on average {rate_txt.replace(' (', ', ').rstrip(')')})" if rate_txt else f" ({NO_RATE})"))
    since = (f" since {f.start.strftime('%Y-%m-%d %H:%M:%S')} UTC" if f.start is not None
             else f" since {'step' if r.x_kind == 'step' else 'sample'} {f.start_index}")
    ending = {"release": ", and did not fall back until the job's memory was released",
              "restart": ", and did not fall back until the job restarted"}.get(f.lifetime_ended, ", and does not fall back")
    job = f.detail.get("job") or {}
    who = f"rank {rank}, " if rank is not None else ""
    at = (f"; {len(members)} series grow, at {len(phases)} points of the step: {', '.join(phases)}"
          if len(phases) > 1 else "")
    f.summary = (f"{where} ({who}{series_words(r.series)}{' ' + r.label if len(phases) > 1 and r.label else ''}) grows {how}{since}, +{human(lk.growth)}"
                 + (f", in {holder}" if holder else "") + ending
                 + (f" (job {job['number']} of {job['of']} in this log)" if job.get("of", 1) > 1 else "") + at + ".")
    f.causes, f.checks = _leak_causes(f, members, device)
    return f


def _holder(members: list[Series], pid: int | None) -> str | None:
    """Who holds the growing memory, as the samples name it: the pid, with the process name (or the
    pod) that labels its process.used series; a process.used series without a pid is named by its
    label alone (a pod, as Prometheus GPU exporters attribute a GPU's memory)."""
    proc = [s for s in members if s.result.series == "process.used" and (s.result.pid == pid or pid is None)]
    label = max(proc, key=lambda s: s.fit.leak.growth).result.label if proc else None
    if pid is not None:
        return f"pid {pid}" + (f" ({label})" if label else "")
    return label


def _lifetime_facts(f: Finding, s: Series, members: list[Series]) -> None:
    """Which job the growth belongs to, and a staircase's stairs and spacing."""
    lt = s.lifetime
    if lt is not None:
        f.lifetime_start, f.lifetime_end = s.result.first_x, s.result.last_x
        f.lifetime_ended = lt.ended
        f.detail["job"] = {"number": s.job_number, "of": s.job_count}
    lk = s.fit.leak
    if lk.pattern == "step" and len(lk.steps) >= MIN_STAIRS:
        f.stairs = len(lk.steps)
        gaps = np.diff(lk.steps)
        period = float(np.median(gaps))
        if s.axis == "time":
            f.stair_period_seconds = period
        elif s.axis == "step":
            f.stair_period_steps = period
        if s.axis == "time" and s.steps is not None and np.isfinite(s.steps).any():
            at = [s.steps[s.nearest(v)] for v in lk.steps]
            if all(np.isfinite(at)):
                f.stair_period_steps = float(np.median(np.diff(at)))
        elif s.axis == "step" and s.sec is not None:
            f.stair_period_seconds = float(np.median(np.diff([s.seconds(v) for v in lk.steps])))


def _leak_causes(f: Finding, members: list[Series], device: list[Series]) -> tuple[list[str], list[str]]:
    causes, checks = [], []
    names = {s.result.series for s in members}
    if names & set(HOST_SERIES):
        causes.append("Host memory grows: DataLoader workers with pin_memory=True keep pinned buffers "
                      "(each worker and its pinned batches add up), or Python objects kept across steps.")
        checks.append("Try pin_memory=False or fewer num_workers; watch each worker's RSS (ps -o rss); "
                      "check the kernel OOM-killer lines for the killed process.")
        return causes, checks
    alloc = next((s for s in members if s.result.series == "allocated"), None)
    if f.pattern == "linear":
        causes.append("Growth every iteration: tensors kept alive across steps, e.g. `total_loss += loss` "
                      "instead of `total_loss += loss.item()`, or outputs/losses appended to a list "
                      "with their autograd graph.")
        checks.append("Search the training loop for accumulators of tensors; use .item() or .detach(); "
                      "take torch.cuda.memory._record_memory_history() snapshots two steps apart and diff them.")
    else:
        causes.append("A step up at a regular interval (each epoch or evaluation): an optimizer, LR "
                      "scheduler, model copy or per-epoch object re-created and still referenced.")
        checks.append("Create optimizers and schedulers once, outside the epoch loop; look for objects "
                      "stored per epoch (lists of models, metrics holding tensors); compare "
                      "torch.cuda.memory_summary() at two epoch boundaries.")
    if alloc is None and "reserved" in names and "memory.used" not in names:
        causes.append("Only the reserved (cached) memory is known: part of this may be the caching "
                      "allocator rather than live tensors.")
        checks.append("Log torch.cuda.memory_allocated() next to memory_reserved() to tell them apart.")
    if names <= set(DEVICE_SERIES):
        causes.append("nvidia-smi counts what PyTorch's caching allocator reserved, not only live tensors: "
                      "without the framework's own allocated count, a cache that keeps growing "
                      "(fragmentation from varying shapes) raises memory.used the same way.")
        checks.append("Log torch.cuda.memory_allocated() and torch.cuda.memory_reserved() at each step: "
                      "allocated growing is a leak; only reserved growing is the cache.")
    if "process.used" in names and f.pid is not None:
        checks.append(f"nvidia-smi --query-compute-apps=pid,used_memory --format=csv shows pid {f.pid} growing.")
    return causes, checks


def _cache_finding(reserved: Series, alloc: Series | None, device: Series | None) -> Finding:
    grow = reserved if reserved.fit.leak is not None else device
    lk = grow.fit.leak
    r = grow.result
    f = Finding(kind="cache_growth", severity="info", summary="", gpu=r.gpu, pid=r.pid, series=r.series,
                pattern=lk.pattern, growth_bytes=int(lk.growth), bytes=int(grow.fit.peak), source=r.source,
                confidence=lk.confidence, host=r.host)
    f.rate_bytes_per_hour = r.leak["rate_bytes_per_hour"]
    f.rate_bytes_per_step = r.leak["rate_bytes_per_step"]
    if r.x_kind == "time":
        f.start, f.end = grow.to_x(lk.onset), grow.to_x(lk.end)
    else:
        f.start_index = grow.to_x(lk.onset)
    f.evidence.extend(leak_evidence(grow))
    flat_txt = ""
    if alloc is not None:
        f.evidence.append(sample_evidence(alloc, 0))
        f.evidence.append(sample_evidence(alloc, alloc.x.size - 1))
        flat_txt = (f" while allocated memory {SETTLED_WORDS.get(alloc.result.classification, 'stays level')} "
                    f"(about {human(alloc.fit.level)})")
    released = " until it was released (empty_cache() or the job's end)" if grow.fit.release_x is not None else ""
    f.summary = (f"{_where(r.gpu, r.host)}: {r.series} grows by {human(lk.growth)}{released}{flat_txt}: the caching "
                 "allocator holds freed blocks, which is not a leak.")
    f.causes = ["The caching allocator keeps freed blocks reserved for reuse; varying tensor shapes "
                "fragment its segments so reserved memory creeps up while live tensors do not."]
    f.checks = ["Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation.",
                "Compare torch.cuda.memory_allocated() with memory_reserved(); call "
                "torch.cuda.empty_cache() only to confirm, not as a fix."]
    return f


def _cache_warmup_note(reserved: Series, alloc: Series) -> Finding:
    """Reserved memory that grew while the job warmed up and then stayed level: the allocator's
    working cache, worth knowing (its size), not a finding against the job."""
    r, fit = reserved.result, reserved.fit
    top = int(fit.peak)
    # the last reading at the level it stayed at is the evidence; lower readings after it are the
    # job's memory released (or freed as it ended), which the summary says
    near = np.nonzero(reserved.y >= top - max(LEVEL_SHARE * top, LEVEL_SIGMAS * fit.noise))[0]
    i_end = int(near[-1]) if near.size else reserved.x.size - 1
    released = ", until the job's memory was released" if i_end < reserved.x.size - 1 else ""
    f = Finding(kind="cache_warmup", severity="info", gpu=r.gpu, pid=r.pid, series=r.series, source=r.source, host=r.host,
                bytes=top, growth_bytes=int(max(fit.persistent_growth, 0.0)),
                summary=(f"{_where(r.gpu, r.host)}: reserved memory grew by {human(fit.persistent_growth)} while the "
                         f"job warmed up, then stayed level at about {human(top)}{released}, while allocated memory "
                         f"{SETTLED_WORDS.get(alloc.fit.classification, 'stays level')} (about {human(alloc.fit.level)}): "
                         "the caching allocator's working cache, not a leak."))
    i_top = int(np.argmax(reserved.y[: i_end + 1]))
    f.evidence = [sample_evidence(reserved, i) for i in dict.fromkeys((0, i_top, i_end))]
    if reserved.sec is not None:
        f.start, f.end = reserved.to_x(float(reserved.x[0])), reserved.to_x(float(reserved.x[-1]))
    f.checks = ["If the cache is larger than the job needs, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                "reduces fragmentation; the size itself is not a leak."]
    return f


def _outside_allocator_note(f: Finding) -> None:
    f.causes.insert(0, "The device's memory grows while PyTorch's own allocated and reserved counts stay "
                       "flat: the growth is outside the caching allocator (another process, NCCL or cuDNN "
                       "workspaces, CUDA graphs, a native extension's cudaMalloc).")
    f.checks.insert(0, "Compare nvidia-smi per-process memory with torch.cuda.memory_reserved(); list "
                       "other processes on the GPU; run the native code under compute-sanitizer --leak-check full.")


def _growing(s: Series) -> bool:
    return s.fit.leak is not None


def _settled(s: Series) -> bool:
    """Known and not growing (enough data to say so)."""
    return s.fit.classification not in LEAK_CLASSES and s.fit.classification != "too_short"


def _level(name: str) -> str:
    """The live count a series name stands for (a peak's, PEAK_OF), else the name itself."""
    return PEAK_OF.get(name, name)


def judged(all_series: list[Series]) -> list[Series]:
    """The series whose growth is judged: LEAK_SERIES, and the peaks (PEAK_OF) of a source that printed
    none of those."""
    live = {s.result.source for s in all_series if s.result.series in LEAK_SERIES}
    return [s for s in all_series if s.result.series in LEAK_SERIES
            or (s.result.series in PEAK_OF and s.result.source not in live)]


def series_rank(name: str) -> float:
    """LEAK_SERIES' order (which series speaks first for a device); a peak just after its live count."""
    return LEAK_SERIES.index(_level(name)) + (0.5 if name in PEAK_OF else 0)


def _judged_parts(series: list[Series]) -> list[tuple[Series, Series]]:
    """(whole series, part) for every judged part (`judged` over all of them), in `series_rank` order."""
    keep = {id(p) for p in judged([p for w in series for p in w.parts])}
    return sorted(((w, p) for w in series for p in w.parts if id(p) in keep),
                  key=lambda wp: series_rank(wp[1].result.series))


def gpu_findings(all_series: list[Series]) -> tuple[list[Finding], list[Finding]]:
    """Leak and cache-growth findings: one leak per GPU."""
    leaks_by_group: dict[tuple, list[Series]] = {}
    cache: list[Finding] = []
    eligible = judged(all_series)
    # framework pairs: allocated and reserved (or a peaks-only log's peaks of them) from the same source
    # and process
    fw: dict[tuple, dict[str, Series]] = {}
    for s in eligible:
        r = s.result
        name = _level(r.series)
        if name in FRAMEWORK_SERIES:
            fw.setdefault((r.source, r.host, r.gpu, r.pid, r.label, s.lifetime.i0 if s.lifetime else 0), {})[name] = s
    excluded = set()
    for pair in fw.values():
        a, res = pair.get("allocated"), pair.get("reserved")
        if res is not None and _growing(res) and a is not None and _settled(a):
            cache.append(_cache_finding(res, a, None))
            excluded.add(id(res))
        elif res is not None and res.fit.classification == "warmup_plateau" and a is not None and _settled(a):
            cache.append(_cache_warmup_note(res, a))
    allocs = [s for s in eligible if _level(s.result.series) == "allocated"]
    reserveds = [s for s in eligible if _level(s.result.series) == "reserved"]
    for s in eligible:
        if id(s) in excluded or not _growing(s):
            continue
        leaks_by_group.setdefault(_group_key(s), []).append(s)
    gpus = {(s.result.host, s.result.gpu) for s in all_series if s.result.gpu is not None}
    groups = _by_rank(_merge_unplaced(leaks_by_group, gpus))
    leaks = []
    device_all = [s for s in all_series if s.result.series in DEVICE_SERIES]
    # each GPU's capacities looked up once, not by a pass over every device series per finding (5,000
    # GPUs: 25 M comparisons)
    caps: dict = {}
    for s in device_all:
        if s.result.capacity:
            caps.setdefault(s.result.gpu, []).append((s.result.host, s.result.capacity))
    for (host, gpu, _rank), members in _by_job(groups):
        names = {m.result.series for m in members}
        # device memory grows but the framework's allocated count (same GPU or unplaced) stays flat
        if not names & set(FRAMEWORK_SERIES) and gpu != "host":
            fa = [a for a in allocs if a.result.gpu in (None, gpu) and (host is None or a.result.host in (None, host))
                  and _printed_during(a, members)]
            fr = [a for a in reserveds if a.result.gpu in (None, gpu) and (host is None or a.result.host in (None, host))
                  and _printed_during(a, members)]
            if fa and all(_settled(a) for a in fa) and not _count_of_another_process(fa, members, all_series):
                dev = next((m for m in members if m.result.series == "memory.used"), members[0])
                if fr and all(_settled(a) for a in fr):
                    f = _leak_finding(members, _capacity(caps, host, gpu), device_all)
                    _outside_allocator_note(f)
                    leaks.append(f)
                    continue
                same = [c for c in cache if c.gpu in (None, gpu)]
                if same:   # the framework's own cache finding: the device's growth is its evidence
                    c = same[0]
                    c.gpu = gpu
                    c.evidence.extend(leak_evidence(dev)[:2])
                    c.detail["device_growth_bytes"] = int(dev.fit.leak.growth)
                    c.summary = c.summary.replace("GPU memory:", f"{_where(gpu, host)}:", 1)
                else:
                    cache.append(_cache_finding(dev, fa[0], dev))
                continue
        leaks.append(_leak_finding(members, _capacity(caps, host, gpu), device_all))
    return leaks, cache


def _count_of_another_process(counts: list[Series], members: list[Series], all_series: list[Series]) -> bool:
    """Whether the flat framework counts may be another process's than the one that grows: per-process memory
    shows a process growing (a member) beside a flat one on the GPU that holds at least what the counts hold
    (its context and cache come on top of its live tensors). Then the counts say nothing of the growing one,
    and its growth is no cache. A flat process too small to hold them (a DataLoader worker's context) is not
    theirs."""
    growing = {m.result.pid for m in members if m.result.series == "process.used" and m.result.pid is not None}
    if not growing:
        return False
    gpus = {m.result.gpu for m in members}
    level = max(float(c.fit.level) for c in counts)
    return any(s.result.series == "process.used" and s.result.pid not in growing and s.result.gpu in gpus
               and _settled(s) and float(s.fit.level) >= level and _printed_during(s, members)
               for s in all_series)


def _printed_during(count: Series, members: list[Series]) -> bool:
    """Whether a framework count was printed while the device memory of `members` was: a count that ended
    before the device's readings began, or began after they ended (another job's, an earlier run's), says
    nothing of that growth. Without clocks to compare, it may."""
    timed = [m for m in members if m.sec is not None and m.sec.size]
    if count.sec is None or not count.sec.size or not timed:
        return True
    c = count.epoch()
    return (c[-1] + JOB_START_SKEW_S >= min(m.epoch()[0] for m in timed)
            and c[0] - JOB_START_SKEW_S <= max(m.epoch()[-1] for m in timed))


def _by_job(groups: dict) -> list[tuple[tuple, list[Series]]]:
    """Each GPU's leaking lifetimes, one group per job: lifetimes of the GPU's series that overlap in
    time are one job seen by several loggers; a crash loop's restarts are one job each. Lifetimes
    without a clock join the only job there is, else the one that grew most."""
    out = []
    for key, members in groups.items():
        timed = sorted((m for m in members if m.sec is not None and m.sec.size), key=lambda m: m.epoch()[0])
        untimed = [m for m in members if m.sec is None or not m.sec.size]
        jobs: list[list[Series]] = []
        end = -math.inf
        for m in timed:
            t = m.epoch()
            slack = 2.0 * float(np.median(np.diff(t))) if t.size > 1 else 1.0
            if jobs and t[0] <= end + slack:
                jobs[-1].append(m)
                end = max(end, float(t[-1]))
            else:
                jobs.append([m])
                end = float(t[-1])
        if jobs and untimed:
            max(jobs, key=lambda j: sum(m.fit.leak.growth for m in j)).extend(untimed)
        elif untimed:
            # one job per lifetime number: a source's series (the phases of a step, allocated and
            # reserved) are one job; a series seen in several lifetimes is a job restarted
            per_job: dict[int, list[Series]] = {}
            for m in untimed:
                per_job.setdefault(m.job_number, []).append(m)
            jobs = list(per_job.values())
        out.extend((key, j) for j in jobs)
    return out


def _capacity(caps_by_gpu: dict, host, gpu) -> int | None:
    caps = [c for h, c in caps_by_gpu.get(gpu, ()) if host is None or h in (None, host)]
    return max(caps) if caps else None


def _levels(y: np.ndarray) -> list[float]:
    """The levels a stepwise series sat at, in order: runs of at least two readings within LEVEL_SHARE."""
    out: list[float] = []
    i = 0
    while i < y.size:
        j = i + 1
        while j < y.size and abs(float(y[j]) - float(y[i])) <= LEVEL_SHARE * max(abs(float(y[i])), 1.0):
            j += 1
        if j - i >= 2 and (not out or abs(float(y[i]) - out[-1]) > LEVEL_SHARE * max(out[-1], 1.0)):
            out.append(float(np.median(y[i:j])))
        i = j
    return out


def doublings(y: np.ndarray) -> int:
    """How many stairs in a row were each about twice the one before (an allocator pool doubling)."""
    lv = _levels(y)
    rises = np.diff(lv)
    best = run = 0
    for a, b in zip(rises, rises[1:]):
        run = run + 1 if a > 0 and DOUBLING[0] <= b / a <= DOUBLING[1] else 0
        best = max(best, run)
    return best


def _oom_of(s: Series, ooms: list[Finding], t: np.ndarray, dt: float, last_job: bool) -> Finding | None:
    """The CUDA OOM that ended the lifetime `s` whose readings until the error are at `t`: one of its GPU
    (a series without a GPU, a step log, is the job's whatever GPU its error names) timed within it or
    OOM_READINGS readings after it; else, for the last job the logs hold (`last_job`), an error without
    a clock (a traceback in stderr), which could have ended no other."""
    r = s.result
    mine = [o for o in ooms if (r.gpu is None or o.gpu in (None, r.gpu)) and o.host in (None, r.host)]
    timed = next((o for o in mine if isinstance(o.start, datetime)
                  and t[0] <= o.start.timestamp() <= t[-1] + OOM_READINGS * dt), None)
    if timed is not None or not last_job:
        return timed
    return next((o for o in mine if not isinstance(o.start, datetime)), None)


def growth_into_oom(series: list[Series], findings: list[Finding]) -> list[Finding]:
    """Memory that grew and then held level until this job's CUDA out-of-memory error is the path to
    that error, not a warm-up (classification `growth_into_oom`): a job that levelled below what its
    GPU holds runs out only when what it needs kept growing where the device cannot show it (inside a
    pool at its cap), so growth over several levels is a leak finding, and so is memory that rose at each
    of its last readings (SHORT_RUN or more) to a new high up to the error: it never held a level the
    job could live at; one rise to the working set then the error is a footprint too large (the verdict
    says so). Returns the leak findings."""
    ooms = [f for f in findings if f.kind == "gpu_oom"]
    timed = [p.epoch() for w in series for p in w.parts if p.sec is not None and p.sec.size]
    leaking = {(f.host, f.gpu) for f in findings if f.kind == "leak"}
    out = []
    # one finding per job and device: the live count (allocated) speaks before the pool, the pool
    # before the device's total
    ranked = _judged_parts(series)
    for whole, s in ranked:
        r = s.result
        if (not ooms or r.series in HOST_SERIES or s.sec is None
                or s.fit.classification != "warmup_plateau" or (r.host, r.gpu) in leaking):
            continue
        t = s.epoch()
        dt = float(np.median(np.diff(t))) if t.size > 1 else 1.0
        i_end = s.x.size - 1
        if s.fit.release_x is not None:
            i_end = max(s.nearest(s.fit.release_x) - 1, 0)
        oom = _oom_of(s, ooms, t[: i_end + 1], dt, i_end == s.x.size - 1 and not any(u[0] > t[-1] for u in timed))
        if oom is None:
            continue
        oom_t = oom.start.timestamp() if isinstance(oom.start, datetime) else None
        body = s.y[: i_end + 1]
        top = float(body.max())
        i_top = int(np.argmax(body >= top - max(LEVEL_SHARE * top, LEVEL_SIGMAS * s.fit.noise)))
        held = (oom_t if oom_t is not None else t[i_end]) - t[i_top]
        n_doubling = doublings(body)
        pool = " (an allocator pool that grows by doubling)" if n_doubling >= DOUBLINGS_MIN else ""
        i_run = rising_into(body, s.fit.noise)
        if i_run is not None:
            # no level held before the error: the job's memory was still growing when it ran out
            after = (f"{seconds_text(oom_t - t[i_end])} after the last" if oom_t is not None
                     else "(the error has no time: it ended the job the readings end with)")
            path = (f"{_where(r.gpu, r.host)} ({r.series}) rose at each of its last {body.size - 1 - i_run} readings, "
                    f"from {human(float(body[i_run]))} to {human(top)}, up to the CUDA out-of-memory error {after}")
        else:
            path = (f"{_where(r.gpu, r.host)} ({r.series}) grew from {human(float(body[0]))} to {human(top)}{pool}, "
                    f"then held it for {seconds_text(held)} until the CUDA out-of-memory error")
        # one rise to the working set, then the error: the footprint; a rise over several levels
        # before the cap, or a rise that had not stopped when the error came: what the job needed grew
        footprint = i_run is None and len(_levels(body[s.nearest(s.fit.start_x or s.x[0]):])) <= 2
        s.fit.classification = "growth_into_oom"
        s.fit.reason = path + (": a footprint too large for the GPU, not a warm-up" if footprint
                               else ": memory still growing when the job ran out" if i_run is not None
                               else ": what the job needed kept growing where the device cannot show it")
        for res in (r, whole.result) if whole.fit is s.fit else (r,):
            res.classification, res.reason = s.fit.classification, s.fit.reason
        if footprint:
            continue
        f = Finding(kind="leak", severity="critical", gpu=r.gpu, pid=r.pid, series=r.series, source=r.source,
                    host=r.host, pattern="step" if n_doubling >= DOUBLINGS_MIN else "linear",
                    growth_bytes=int(top - float(body[0 if i_run is None else i_run])), bytes=int(top),
                    confidence=OOM_PATH_CONF, start=s.to_x(float(s.x[0 if i_run is None else i_run + 1])),
                    end=oom.start if oom_t is not None else s.to_x(float(s.x[i_end])),
                    summary=(f"{path}: the job's memory grew until it ran out" + (
                        ", still rising at its last readings (a leak, or a footprint that grows with its input)."
                        if i_run is not None else ", the last of that growth inside what the device shows (a leak, "
                        "or a footprint too large for this GPU).")))
        f.detail["ran_out"] = "gpu_oom"
        if n_doubling >= DOUBLINGS_MIN:
            f.detail["pool_doublings"] = n_doubling
        f.evidence = [sample_evidence(s, 0), sample_evidence(s, i_top), sample_evidence(s, i_end)]
        f.evidence.extend(oom.evidence[:1])
        f.causes = ["An allocator that reserves memory in a pool (JAX/XLA, CuPy, TensorFlow's BFC, PyTorch's "
                    "caching allocator) shows the device its pool, not what lives in it: once the pool is at "
                    "its cap, live memory can keep growing inside it until an allocation fails."]
        f.checks = ["Log the framework's own live count (torch.cuda.memory_allocated(), "
                    "jax.devices()[0].memory_stats()['bytes_in_use']) at each step: rising is a leak; level "
                    "at the cap means the job needs a smaller batch or model."]
        out.append(f)
        leaking.add((r.host, r.gpu))
    return out
