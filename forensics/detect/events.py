"""Findings beyond growth: events (OOM kills, CUDA OOMs, sanitizer leaks, Xids), processes that keep
GPU memory after their job ended, steps that slow down as memory fills, and the links between findings."""
from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from forensics.detect.callpaths import frame_label, sanitizer_groups
from forensics.detect.findings import Evidence, Finding
from forensics.detect.measure import HOST_SERIES, sample_evidence
from forensics.detect.thresholds import (FRAGMENTATION_SHARE, JITTER_SHARE, KILL_AFTER_GROWTH_S,
                                         KILL_AFTER_GROWTH_SHARE, RESIDUAL_INTERVALS, RESIDUAL_OVERLAP_SAMPLES,
                                         SLOWDOWN_MIN_STEPS, SLOWDOWN_RATIO, SLOWDOWN_SHARE)
from forensics.kinds import KINDS
from forensics.model import detail_dict
from forensics.units import elapsed_text, human, seconds_text
from forensics.frames import partitions, rows_where
from forensics import xid_catalog

EVIDENCE_MAX = 5
# what an oom_kill event's `inferred_from` names (kernel/oom.py), in words
INFERRED_FROM = {"oom_kill_summary": "oom-kill summary line", "kill_process_line": "Kill process line"}
# who recorded an oom_kill read from a scheduler's or container runtime's record (parsers/jobs/)
RECORDED_BY = {"slurm": "Slurm", "kubernetes": "Kubernetes", "docker": "Docker"}
# the order of events wherever it shows (findings, the report's tables and chart markers): by time, then
# where they were read, then pid, so that events tied at one instant and on one line (the pids a
# compute-apps sample no longer lists) come in the same order on every run; sort with maintain_order=True
EVENT_ORDER = ["time", "source", "line", "pid", "kind"]


def _ev(row: dict) -> Evidence:
    return Evidence(path=row.get("source") or "?", line=int(row.get("line") or 0), text=row.get("text") or "")


def _when(t) -> str:
    return f" at {t.strftime('%Y-%m-%d %H:%M:%S')} UTC" if isinstance(t, datetime) else ""


def event_findings(events: pl.DataFrame) -> list[Finding]:
    if events.height == 0:
        return []
    out: list[Finding] = []
    ev = events.sort(EVENT_ORDER, nulls_last=True, maintain_order=True)
    out.extend(_oom_kills(ev.filter(pl.col("kind") == "oom_kill"), ev))
    ooms = _one_oom_two_views(_gpu_ooms(ev.filter(pl.col("kind") == "gpu_oom")))
    out.extend(f for f, _ in ooms)
    out.extend(_counted_ooms(ev.filter(pl.col("kind") == "gpu_oom_counted"), ooms))
    out.extend(_sanitizer(ev.filter(pl.col("kind") == "sanitizer_leak")))
    out.extend(_xids(ev.filter(pl.col("kind") == "xid")))
    out.extend(_kv_cache_leaks(ev.filter(pl.col("kind") == "kv_cache_leak")))
    return out


def _oom_kills(kills: pl.DataFrame, ev: pl.DataFrame) -> list[Finding]:
    out = []
    reaped = ev.filter(pl.col("kind") == "oom_reaped")
    for row in kills.iter_rows(named=True):
        d = detail_dict(row["detail"])
        who = f"pid {row['pid']}" if row["pid"] is not None else None
        if row["process"]:
            who = f"{who} ({row['process']})" if who else row["process"]
        who = who or "a process"
        rss = row["bytes"] if row["bytes"] is not None else d.get("rss_bytes")
        # a report whose `Killed process` line fell outside the excerpt: the victim is the one its
        # oom-kill summary (or Kill process line) names
        absent = (f" (known only from its {INFERRED_FROM.get(d['inferred_from'], 'report')}: the Killed process line "
                  "is not in the log)") if d.get("inferred_from") else ""
        f = Finding(kind="oom_kill", severity="critical", pid=row["pid"], start=row["time"],
                    bytes=rss, source=row["source"], process=row["process"], host=d.get("host"), pod=d.get("pod"),
                    summary=(f"The kernel's OOM killer killed {who}{_when(row['time'])}"
                             + (f", holding {human(rss)} of host memory" if rss else "") + absent
                             + (f" ({RECORDED_BY[d['reporter']]} records it: the memory limit of its cgroup was reached)"
                                if d.get("reporter") in RECORDED_BY else "") + "."),
                    evidence=[_ev(row)], detail={"process": row["process"], **d})
        if row["pid"] is not None:
            for r2 in reaped.filter(pl.col("pid") == row["pid"]).head(1).iter_rows(named=True):
                f.evidence.append(_ev(r2))
        f.causes = ["Host memory ran out. With DataLoader workers and pin_memory=True, every worker's "
                    "pinned buffers count; a growing host RSS points at objects kept across steps."]
        f.checks = ["Look at the killed process's anon-rss and the per-process table in the kernel log; "
                    "try fewer num_workers or pin_memory=False; check other jobs on the host."]
        out.append(f)
    return out


def _gpu_ooms(ooms: pl.DataFrame) -> list[tuple[Finding, int]]:
    """One finding per distinct OOM message, with how many times it was printed."""
    out = []
    if ooms.height == 0:
        return out
    groups = ooms.group_by(["source", "gpu", "pid", "bytes", "text"], maintain_order=True).agg(
        pl.col("time").first(), pl.col("line").first(), pl.col("detail").first(), pl.len().alias("n"))
    for row in groups.iter_rows(named=True):
        d = detail_dict(row["detail"])
        gpu = row["gpu"]
        f = Finding(kind="gpu_oom", severity="critical", gpu=gpu, pid=row["pid"], start=row["time"],
                    bytes=row["bytes"], source=row["source"], host=d.get("host"), pod=d.get("pod"),
                    summary=_oom_sentence(gpu, d.get("rank"), row["bytes"], row["time"], row["n"], d),
                    evidence=[_ev(row)], detail={**d, "count": row["n"]})
        reserved, allocated = d.get("reserved"), d.get("allocated")
        if reserved and allocated and reserved - allocated > FRAGMENTATION_SHARE * reserved:
            f.causes.append(f"{human(reserved - allocated)} was reserved by PyTorch but unallocated: "
                            "fragmentation of the caching allocator.")
            f.checks.append("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.")
        out.append((f, row["n"]))
    return out


# whose out-of-memory it was (the message's `framework` in the parsers' detail)
_OOM_OF = {"jax": "JAX/XLA out of memory", "tensorflow": "TensorFlow out of memory", "ggml": "ggml out of memory",
           "cupy": "CuPy out of memory"}


def oom_name(d: dict) -> str:
    """"CUDA out of memory", or whose OOM it was where the message says (JAX/XLA, ROCm's HIP, ...)."""
    return _OOM_OF.get(d.get("framework"), "HIP out of memory" if d.get("device_api") == "hip" else "CUDA out of memory")


def _oom_sentence(gpu, rank, requested, when, n: int, d: dict | None = None) -> str:
    where = (f"GPU {gpu}" if gpu is not None else "the GPU") + (f" (rank {rank})" if rank is not None else "")
    tried = f" trying to allocate {human(requested)}" if requested else ""
    times = f" ({n} times)" if n > 1 else ""
    return f"{oom_name(d or {})} on {where}{tried}{_when(when)}{times}."


def _one_oom_two_views(ooms: list[tuple[Finding, int]]) -> list[tuple[Finding, int]]:
    """A traceback's OOM message carries no clock; the same OOM seen with one (a memory snapshot's
    `oom` entry) is one OOM, not two: an untimed message printed once whose requested bytes are those
    of exactly one timed OOM (same GPU and process where both say) becomes evidence of that finding. A
    crash loop's many OOMs of one size match none, and stay apart."""
    timed = [(f, n) for f, n in ooms if f.start is not None]
    out = []
    for f, n in ooms:
        if f.start is None and n == 1 and f.bytes:
            same = [t for t, _ in timed if t.bytes == f.bytes and _compatible(t.gpu, f.gpu) and _compatible(t.pid, f.pid)]
            if len(same) == 1:
                t = same[0]
                t.evidence.extend(f.evidence)
                t.detail = {**f.detail, **t.detail, "also_printed_at": f"{f.evidence[0].path}:{f.evidence[0].line}"}
                t.gpu, t.pid = t.gpu or f.gpu, t.pid or f.pid
                t.summary = _oom_sentence(t.gpu, t.detail.get("rank"), t.bytes, t.start, 1, t.detail)
                t.causes.extend(c for c in f.causes if c not in t.causes)
                t.checks.extend(c for c in f.checks if c not in t.checks)
                continue
        out.append((f, n))
    return out


def _compatible(a, b) -> bool:
    return a is None or b is None or a == b


def _counted_ooms(counted: pl.DataFrame, messages: list[tuple[Finding, int]]) -> list[Finding]:
    """The OOMs the caching allocator counted (memory_stats' num_ooms rose). Each counted OOM is one
    of the messages' OOMs where a message fits it (same GPU; printed after the reading before the rise
    and not after the reading after it, when both have clocks): the count is then evidence of that
    message's finding, never a second finding. The latest rises are matched first, since the message a
    log keeps is most often the one that ended the job. An OOM no message fits (the script caught it,
    or its stderr is not among the inputs) is a finding of its own."""
    if counted.height == 0:
        return []
    left = [[f, n] for f, n in messages]
    out = []
    for row in reversed(list(counted.iter_rows(named=True))):
        d = detail_dict(row["detail"])
        rise = int(d.get("rise") or 1)
        lo, hi = _parse_time(d.get("previous_time")), _parse_time(d.get("next_time"))
        matched = []
        for _ in range(rise):
            slot = next((s for s in left if s[1] > 0 and _fits(s[0], row["gpu"], lo, hi)), None)
            if slot is None:
                break
            slot[1] -= 1
            matched.append(slot[0])
        for f in {id(f): f for f in matched}.values():   # once per finding
            f.evidence.append(_ev(row))
            f.detail["counted_by_allocator"] = f"{row['source']}:{row['line']} ({d.get('counter')} " \
                                               f"{d.get('previous')} → {d.get('value')})"
        if len(matched) < rise:
            out.append(_counted_oom(row, d, rise - len(matched)))
    return out[::-1]


def _fits(f: Finding, gpu, lo: datetime | None, hi: datetime | None) -> bool:
    if f.gpu is not None and gpu is not None and f.gpu != gpu:
        return False
    t = f.start if isinstance(f.start, datetime) else None
    return t is None or ((lo is None or t > lo) and (hi is None or t <= hi))


def _parse_time(text) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _counted_oom(row: dict, d: dict, n: int) -> Finding:
    gpu = row["gpu"]
    where = f"GPU {gpu}" if gpu is not None else "the GPU"
    if d.get("previous_step") is not None and d.get("step") is not None:
        span = f" between step {d['previous_step']} and step {d['step']}"
    elif d.get("step") is not None:
        span = f" by step {d['step']}"
    else:
        span = ""
    went_on = d.get("next_line") is not None
    f = Finding(kind="gpu_oom", severity="warning" if went_on else "critical", gpu=gpu, pid=row["pid"],
                start=row["time"], source=row["source"], evidence=[_ev(row)],
                summary=(f"PyTorch's caching allocator counted {n} CUDA out-of-memory error{'s' if n > 1 else ''} "
                         f"on {where}{span}{_when(row['time'])} ({d.get('counter')} {d.get('previous')} → "
                         f"{d.get('value')}); no out-of-memory message in these logs goes with "
                         f"{'them' if n > 1 else 'it'}" + (", and the job went on after it." if went_on else ".")),
                detail={"counted": n, "counter": d.get("counter"), "step": d.get("step"),
                        "previous_step": d.get("previous_step")})
    f.causes = ["The OutOfMemoryError was caught by the script (a retry or skip-the-batch handler) or its "
                "message went to a stream that is not among the inputs (the job's stderr)."]
    f.checks = ["Collect the job's stderr with the other logs; look for `except torch.OutOfMemoryError` "
                "(or `except RuntimeError`) in the training loop; torch.cuda.memory_summary() printed in the "
                "handler shows what held the memory."]
    return f


def _sanitizer(leaks: pl.DataFrame) -> list[Finding]:
    """One finding per call path (detect/callpaths.py)."""
    out = []
    for g in sanitizer_groups(leaks):
        first, n = g.rows[0], len(g.rows)
        total = sum(r["bytes"] or 0 for r in g.rows)
        cut = (f" ({g.truncated} of them with a backtrace cut short to its outer frames, which match this "
               "path's)") if g.truncated else ""
        f = Finding(kind="sanitizer_leak", severity="info" if g.expected else "warning",
                    bytes=total, source=first["source"], pid=first["pid"], gpu=first["gpu"], start=first["time"],
                    summary=(f"compute-sanitizer: {n} allocation{'s' if n > 1 else ''} never freed ({human(total)}) "
                             f"from {g.label}{cut}"
                             + (" — expected: the caching allocator still held them at exit." if g.expected else ".")),
                    evidence=[_ev(r) for r in g.rows[:EVIDENCE_MAX]],
                    detail={"site": g.label, "count": n, "expected": g.expected, "stack": g.details[0].get("stack"),
                            "call_path": [frame_label(fr) for fr in g.frames], "truncated_backtraces": g.truncated})
        if not g.expected:
            f.causes = ["cudaMalloc (or cuMemAlloc) without a matching free on some path."]
            f.checks = ["Follow the allocation stack to its owner and check every exit path frees it."]
        out.append(f)
    return out


def _kv_cache_leaks(leaks: pl.DataFrame) -> list[Finding]:
    """A serving engine's own leak check (parsers/serving/engines.py): one finding per input."""
    out = []
    for source, rows in partitions(leaks, "source").items():
        rows = rows.to_dicts()
        d = KINDS["kv_cache_leak"].event_detail(rows[0]["detail"])
        avail, total = d.get("available_tokens"), d.get("total_tokens")
        how = ""
        if avail is not None and total is not None:
            how = (f": {avail} of its {total} token slots free with nothing running, {total - avail} unaccounted"
                   if avail < total else f": {avail} token slots free of the {total} it holds (a slot freed twice)")
        n = len(rows)
        f = Finding(kind="kv_cache_leak", severity="warning", pid=rows[0]["pid"], start=rows[0]["time"],
                    source=source[0],
                    summary=(f"{'SGLang' if d.get('engine') == 'sglang' else 'The serving engine'}'s own check found "
                             f"its KV cache pool leaking{how}{_when(rows[0]['time'])}"
                             + (f" ({n} times)" if n > 1 else "") + "."),
                    evidence=[_ev(r) for r in rows[:EVIDENCE_MAX]], detail={**d, "count": n})
        f.causes = ["A request's KV-cache slots were not given back to the pool (an aborted or retracted request, "
                    "a radix-cache bug); the pool is preallocated, so GPU memory use does not grow, but the server "
                    "can hold fewer requests and the check stops the scheduler."]
        f.checks = ["Note the SGLang version and the options (page size, chunked prefill, radix cache); look for an "
                    "upstream fix; flush the cache between batches as a workaround."]
        out.append(f)
    return out


def _xids(xids: pl.DataFrame) -> list[Finding]:
    """One finding per GPU (per MIG device, GPU and compute instance, on a MIG GPU) and Xid code."""
    if xids.height == 0:
        return []
    groups: dict[tuple, list[tuple[dict, dict]]] = {}
    for row in xids.iter_rows(named=True):
        d = detail_dict(row["detail"])
        code = d.get("code")
        try:
            code = int(code) if code is not None else None
        except (TypeError, ValueError):
            code = None
        groups.setdefault((row["gpu"], d.get("gpu_instance"), d.get("compute_instance"), code), []).append((row, d))
    out = []
    for (gpu, instance, compute, code), items in groups.items():
        first, d = items[0]
        x = xid_catalog.info(code)
        where = (f"GPU {gpu}" if gpu is not None else "a GPU") + (
            f" (MIG GPU instance {instance}" + (f", compute instance {compute})" if compute is not None else ")")
            if instance is not None else "")
        times = f" ({len(items)} times)" if len(items) > 1 else ""
        pids = sorted({r["pid"] for r, _ in items if r["pid"] is not None})
        processes = sorted({r["process"] for r, _ in items if r["process"]})
        f = Finding(kind="xid", severity=x.severity, gpu=gpu, pid=first["pid"], start=first["time"],
                    end=items[-1][0]["time"], source=first["source"], process=first["process"],
                    host=d.get("host"), pod=d.get("pod"),
                    summary=(f"NVRM Xid {code} on {where}{_when(first['time'])}{times}: {x.phrase}." if code is not None
                             else f"NVRM on {where}{_when(first['time'])}{times}: {x.phrase} (no Xid line; read as "
                                  "Xid 79)."),
                    evidence=[_ev(r) for r, _ in items[:EVIDENCE_MAX]],
                    detail={"code": code, "count": len(items), "xid_name": x.name, "fatal": x.fatal,
                            "meaning": d.get("meaning"), "bus_id": d.get("pci"), "gpu_uuid": d.get("uuid"),
                            "gpu_instance": instance, "compute_instance": compute,
                            "channel": d.get("channel"), "caused_by_xid": d.get("caused_by_xid"),
                            "message": d.get("message"), "pids": pids, "processes": processes})
        out.append(f)
    return out


# ----------------------------------------------------------------------------------------------
# residual processes

def residual_findings(series, events: pl.DataFrame) -> list[Finding]:
    """A process that keeps GPU memory after the job's main process vanished or was killed."""
    procs = [s for s in series if s.result.series == "process.used" and s.result.pid is not None and s.x.size]
    if len(procs) < 2 and (events.height == 0 or not procs):
        return []
    killed: dict[int, dict] = {}
    if events.height:
        for row in rows_where(events, pl.col("kind").is_in(["oom_kill", "process_gone"]) & pl.col("pid").is_not_null()).iter_rows(named=True):
            killed.setdefault(int(row["pid"]), row)
    out = []
    # compare processes that share a clock: timed ones together, untimed ones within their source
    by_gpu: dict[tuple, list] = {}
    for s in procs:
        r = s.result
        scope = ("time",) if r.x_kind == "time" else ("index", r.source)
        by_gpu.setdefault((r.host, r.gpu) + scope, []).append(s)
    for key, members in by_gpu.items():
        timed = key[2] == "time"
        pos = {id(s): _abs(s) for s in members}
        log_end = max(p[-1] for p in pos.values())
        reported = set()
        for p in members:
            pp = pos[id(p)]
            slack = RESIDUAL_INTERVALS * _interval(pp)
            held = float(np.median(p.y[-3:]))
            if held <= 0:
                continue
            for q in members:
                if q is p:
                    continue
                qq = pos[id(q)]
                q_end = qq[-1]
                kill = killed.get(q.result.pid)
                kill_t = _kill_pos(kill) if kill is not None and timed else None
                q_gone_at = kill_t if kill_t is not None else q_end
                vanished = (q_end < log_end - slack) or kill is not None
                # p lived alongside q and started with or after it (a worker of q's job, not the
                # trainer that outlives a helper it started itself). A poll every interval can miss
                # the overlap: a worker first seen up to two samples after q's last row still lived
                # beside it.
                if not vanished or pp[0] > q_end + RESIDUAL_OVERLAP_SAMPLES * _interval(qq) * (1 + JITTER_SHARE) or pp[0] < qq[0] - slack:
                    continue
                if pp[-1] <= q_gone_at + slack:
                    continue
                if q.result.pid in reported or p.result.pid in reported:
                    continue
                reported.add(p.result.pid)
                out.append(_residual(p, q, kill, held, pp, q_gone_at, timed, log_end, slack))
                break
        # a killed process that itself keeps memory until the end of the log
        for p in members:
            kill = killed.get(p.result.pid)
            if kill is None or p.result.pid in reported or not timed:
                continue
            kt = _kill_pos(kill)
            pp = pos[id(p)]
            held = float(np.median(p.y[-3:]))
            slack = RESIDUAL_INTERVALS * _interval(pp)
            if kt is not None and held > 0 and pp[-1] > kt + slack:
                reported.add(p.result.pid)
                out.append(_residual(p, None, kill, held, pp, kt, timed, log_end, slack))
    return out


def _abs(s) -> np.ndarray:
    """Positions on a clock shared by the group: seconds since the epoch, or the raw index."""
    if s.sec is not None:
        return s.epoch()
    return s.x


def _interval(p: np.ndarray) -> float:
    if p.size < 2:
        return 1.0
    return float(np.median(np.diff(p))) or 1.0


def _kill_pos(kill: dict) -> float | None:
    t = kill.get("time")
    return t.timestamp() if isinstance(t, datetime) else None


def _residual(p, q, kill, held, pp, gone_at, timed, log_end, slack) -> Finding:
    r = p.result
    to_t = (lambda v: datetime.fromtimestamp(v, tz=p.t0.tzinfo)) if timed else (lambda v: int(v))
    parent = f"pid {q.result.pid}" if q is not None else f"pid {r.pid} itself"
    how = "was killed by the OOM killer" if kill is not None and kill.get("kind") == "oom_kill" else (
        "exited" if kill is not None else "disappeared")
    until_end = pp[-1] >= log_end - slack
    after = pp[-1] - gone_at
    after_txt = seconds_text(after) if timed else f"{int(after)} samples"
    f = Finding(kind="residual_process", severity="warning", gpu=r.gpu, pid=r.pid, series=r.series,
                bytes=int(held), source=r.source, host=r.host, process=r.label,
                summary=(f"pid {r.pid} still holds {human(held)} on GPU {r.gpu} "
                         + (f"after {parent} {how}" if q is not None else f"after it {how}")
                         + (", until the end of the log" if until_end else f", for {after_txt} longer") + "."),
                evidence=[])
    if timed:
        f.start = to_t(gone_at)
        f.end = to_t(pp[-1])
    else:
        f.start_index = int(gone_at)
    if q is not None:
        f.evidence.append(sample_evidence(q, q.x.size - 1))
    if kill is not None:
        f.evidence.append(_ev(kill))
    f.evidence.append(sample_evidence(p, p.x.size - 1))
    f.detail = {"parent_pid": q.result.pid if q is not None else None, "held_bytes": int(held),
                "until_end_of_log": bool(until_end)}
    f.causes = ["A worker process (torch.multiprocessing, DataLoader workers, a spawned helper) kept its "
                "CUDA context and tensors after the main process died: memory held after the parent "
                "died points at child processes that were not joined or killed."]
    f.checks = [f"nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; "
                f"ps -o pid,ppid,cmd -p {r.pid}; kill the orphan, and join/terminate workers on exit "
                "(use the 'spawn' start method and a finally: that stops them)."]
    return f


# ----------------------------------------------------------------------------------------------
# slowdown

def slowdown_findings(series, samples: pl.DataFrame) -> list[Finding]:
    """Steps that take longer as memory fills, from the step log's timestamps."""
    out = []
    by_source: dict[str, list] = {}
    for s in series:
        if s.result.x_kind == "time" and s.result.series in ("allocated", "reserved", "memory.used", "process.used"):
            by_source.setdefault(s.result.source, []).append(s)
    for source, members in by_source.items():
        fw = [s for s in members if s.result.series in ("allocated", "reserved")]
        if not fw:
            continue
        ref = max(fw, key=lambda s: (s.result.series == "allocated", s.x.size))
        growing = any(s.fit.leak is not None or s.fit.classification == "warmup_plateau" for s in fw)
        if not growing:
            continue
        t = ref.epoch()
        if ref.steps is not None and np.isfinite(ref.steps).sum() >= SLOWDOWN_MIN_STEPS:
            ok = np.isfinite(ref.steps)
            st, tt, idx = ref.steps[ok], t[ok], np.nonzero(ok)[0]
            # steps that move forward past every earlier one (a step printed late, or again, is dropped)
            keep = np.concatenate([[True], st[1:] > np.maximum.accumulate(st)[:-1]])
            st, tt, idx = st[keep], tt[keep], idx[keep]
            per_step = np.diff(tt) / np.diff(st)
        else:
            idx = np.arange(t.size)
            per_step = np.diff(t)
        if per_step.size < SLOWDOWN_MIN_STEPS or not np.all(np.isfinite(per_step)):
            continue
        q = per_step.size // 4   # a quarter (SLOWDOWN_MIN_STEPS makes it three steps or more)
        early, late = float(np.median(per_step[:q])), float(np.median(per_step[-q:]))
        if early <= 0 or late < SLOWDOWN_RATIO * early:
            continue
        # steady trend, not one pause: most late steps are slower than most early ones
        if np.mean(per_step[-q:] > early) < SLOWDOWN_SHARE:
            continue
        lk = ref.fit.leak
        f = Finding(kind="slowdown", severity="warning", gpu=ref.result.gpu, pid=ref.result.pid,
                    series=ref.result.series, source=source, host=ref.result.host,
                    start=ref.to_x(float(ref.x[0])), end=ref.to_x(float(ref.x[-1])),
                    summary=(f"Steps slow down as memory fills: {early:.3g} s per step at the start, "
                             f"{late:.3g} s at the end (+{(late / early - 1) * 100:.0f}%), while "
                             f"{ref.result.series} went from {human(ref.y[0])} to {human(ref.y[-1])}."),
                    evidence=[sample_evidence(ref, int(idx[0])), sample_evidence(ref, int(idx[-1]))],
                    detail={"early_seconds_per_step": early, "late_seconds_per_step": late,
                            "leak_onset": ref.to_x(lk.onset) if lk else None})
        f.causes = ["The allocator works harder as memory fills (more frees, cache flushes, "
                    "fragmentation), or host memory swaps."]
        f.checks = ["Compare step times before and after the leak's onset; watch "
                    "torch.cuda.memory_stats()['num_alloc_retries']."]
        out.append(f)
    return out


# ----------------------------------------------------------------------------------------------
# links

def _t(x):
    return x.timestamp() if isinstance(x, datetime) else None


def _same_gpu(a: Finding, b: Finding) -> bool:
    """On the same GPU, as far as is known; two ranks sharing a GPU are not the same."""
    if a.rank is not None and b.rank is not None and a.rank != b.rank:
        return False
    return a.gpu is None or b.gpu is None or a.gpu == b.gpu


def _only_leak(o: Finding, lk: Finding, leaks: list[Finding]) -> bool:
    """`lk` is the one leak on the GPU of `o` (of its rank's leaks, when the error names its rank and
    the GPU's leaks name theirs: the device's own growth is then the sum of the ranks')."""
    on_gpu = [x for x in leaks if _same_gpu(o, x)]
    same_rank = [x for x in on_gpu if o.rank is not None and x.rank == o.rank]
    return (same_rank or on_gpu) == [lk]


def link(findings: list[Finding]) -> None:
    """Fill Finding.related with sentences: the leak behind an OOM and how long before it began,
    the residual process left by a kill, the slowdown that came with a leak."""
    leaks = [f for f in findings if f.kind == "leak"]
    for o in [f for f in findings if f.kind in ("gpu_oom", "oom_kill")]:
        for lk in leaks:
            if o.kind == "gpu_oom" and not _same_gpu(o, lk):
                continue
            if o.kind == "oom_kill" and lk.series not in HOST_SERIES and lk.pid not in (None, o.pid):
                continue
            to, tl = _t(o.start), _t(lk.start)
            what = "CUDA out-of-memory error" if o.kind == "gpu_oom" else "OOM kill"
            where = f"GPU {lk.gpu}" if lk.gpu is not None else (lk.series or "memory")
            if to is not None and tl is not None:
                if to < tl:
                    continue
                end_t = _t(lk.end)
                if o.kind == "oom_kill" and lk.pid is None and lk.series not in HOST_SERIES and end_t is not None \
                        and abs(to - end_t) > max(KILL_AFTER_GROWTH_S, KILL_AFTER_GROWTH_SHARE * (end_t - tl)):
                    continue   # a kill long after the growth stopped is not its end
                gap = elapsed_text(to - tl)
                o.related.append(f"The leak on {where} ({lk.series}) began {gap} before this {what}.")
                lk.related.append(f"This leak led to the {what}{_when(o.start)}, {gap} after it began.")
            elif o.kind == "gpu_oom" and _only_leak(o, lk, leaks):
                # a traceback without a clock: the one leak on that GPU is what ran it out of memory
                o.related.append(f"The leak on {where} ({lk.series}) most likely led to this {what} "
                                 "(the error line carries no time to check it against).")
                lk.related.append(f"This leak most likely ends in the {what} reported in {o.source}.")
            else:
                continue
            lk.severity = "critical"
            # it did run out: the projection is the event itself
            lk.exhaust_in_hours = 0.0
            lk.exhaust_at = o.start if isinstance(o.start, datetime) else lk.end
            lk.detail["ran_out"] = o.kind
    for r in [f for f in findings if f.kind == "residual_process"]:
        parent = r.detail.get("parent_pid")
        for o in [f for f in findings if f.kind == "oom_kill" and f.pid in (parent, r.pid)]:
            r.related.append(f"pid {o.pid} was killed by the OOM killer{_when(o.start)}; pid {r.pid} kept its GPU memory.")
            o.related.append(f"After this kill, pid {r.pid} kept {human(r.bytes)} on GPU {r.gpu}.")
    for s in [f for f in findings if f.kind == "slowdown"]:
        for lk in leaks:
            if lk.source == s.source or _same_gpu(lk, s):
                s.related.append(f"It comes with the leak on {('GPU ' + lk.gpu) if lk.gpu else lk.series}.")
                lk.related.append("Steps slow down as this leak fills memory (see the slowdown finding).")
                break
