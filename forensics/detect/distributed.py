"""A distributed job's failure, in the order it happened: which rank failed first, and which errors
of the other ranks followed from it (docs/detection.md §4.1).

When one rank dies (a CUDA OOM), the others notice only at their next collective: NCCL's watchdog
times out (after the process group's timeout, 10 or 30 min by default), gloo's connection to the dead
peer closes, and torchrun's agent, seeing the first exit, sends SIGTERM to the rest and prints the
exit codes. Those errors are loud and come last; the first failure is often one line in one rank's
stderr. The rules:

- a rank's *own* failure is a CUDA OOM, a kernel OOM kill of its pid, or a CUDA error that its NCCL
  watchdog or an NCCL call reports; a collective timeout, a closed or reset peer connection, a watchdog
  that got stuck, NCCL's remote error, and the launcher's signals are *waits* on, or reactions to,
  another rank;
- the first failure is the earliest own failure of any rank; events are ordered by time, and an event
  without a clock by its place in its file (it took the time of the next timed line of that file as its
  latest possible time). Without any own failure, torchrun's root cause (the exit it saw first) is
  the first failure;
- every wait, reaction and exit of another rank that is not earlier than the first failure is its
  consequence (`Finding.consequence_of`); a wait that came before it is not, and the finding says the
  order is then in doubt.
"""
from __future__ import annotations

import signal
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from forensics.detect.findings import Evidence, Finding
from forensics.frames import rows_where
from forensics.model import detail_dict
from forensics.ranks import RankMap, label_rank

KINDS = ("collective_error", "rank_exit", "rank_signal", "gpu_oom", "oom_kill")
OWN_ERRORS = ("cuda_error", "nccl_error")     # collective_error kinds that are the rank's own failure
ERROR_WORDS = {
    "timeout": "collective timed out", "watchdog_detected": "watchdog saw a failed or timed-out collective",
    "watchdog_stuck": "watchdog got stuck (a hang)", "aborted": "NCCL operations failed or timed out, process taken down",
    "peer_closed": "connection closed by peer", "peer_reset": "connection reset by peer",
    "remote": "NCCL remote error (a peer exited or the network failed)", "transport_error": "transport error",
    "cuda_error": "CUDA error in the NCCL watchdog", "nccl_error": "NCCL error",
    "watchdog_exception": "NCCL watchdog terminated", "backend_error": "DistBackendError",
}
EVIDENCE_MAX = 10
SAID_MAX = 6       # what followed, as the sentence lists it (the evidence has every line)


@dataclass
class _Ev:
    """One event of the job, with its rank and its place in the order."""
    row: dict
    d: dict
    rank: int | None
    order: tuple          # (latest possible time, source, line): see the module's rules

    @property
    def kind(self) -> str:
        return self.row["kind"]

    @property
    def own(self) -> bool:
        return self.kind in ("gpu_oom", "oom_kill") or (self.kind == "collective_error"
                                                        and self.d.get("error") in OWN_ERRORS)

    def ref(self) -> dict:
        return {"kind": self.kind, "rank": self.rank, "path": self.row["source"], "line": self.row["line"]}

    def evidence(self) -> Evidence:
        return Evidence(path=self.row["source"] or "?", line=int(self.row["line"] or 0), text=self.row["text"] or "")

    def where(self) -> str:
        return f"{_base(self.row['source'])}:{self.row['line']}"

    def what(self) -> str:
        if self.kind == "gpu_oom":
            return "CUDA out of memory"
        if self.kind == "oom_kill":
            return "killed by the kernel's OOM killer"
        if self.kind == "collective_error":
            backend = self.d.get("backend")
            op = f" ({self.d['op']})" if self.d.get("op") else ""
            return f"{backend + ': ' if backend else ''}{ERROR_WORDS.get(self.d.get('error'), 'collective error')}{op}"
        if self.kind == "rank_signal":
            return f"torchrun sent {self.d.get('signal', 'a signal')}"
        if self.d.get("signal"):
            return f"ended by {_signal_name(self.d['signal'])}"
        return f"exited with code {self.d.get('exitcode')}"


def _signal_name(n) -> str:
    try:
        return signal.Signals(int(n)).name
    except (TypeError, ValueError):
        return f"signal {n}"


def _base(path: str | None) -> str:
    return (path or "?").replace("\\", "/").rsplit("/", 1)[-1]


def series_ranks(series: list, rmap: RankMap) -> None:
    """Each series' (and lifetime's) rank: its label's, else its pid's."""
    for s in series:
        rank, local = label_rank(s.result.label)
        r = rmap.rank_of(rank, local, s.result.pid)
        for res in [s.result] + [p.result for p in s.parts]:
            res.rank = r


def finding_ranks(findings: list[Finding], rmap: RankMap) -> None:
    """The rank of each CUDA OOM and OOM-kill finding (its event's rank, else its pid's)."""
    for f in findings:
        if f.kind in ("gpu_oom", "oom_kill") and f.rank is None:
            f.rank = rmap.rank_of(_int(f.detail.get("rank")), _int(f.detail.get("local_rank")), f.pid)


def _int(v) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def _events(events: pl.DataFrame, rmap: RankMap) -> list[_Ev]:
    rows = rows_where(events, pl.col("kind").is_in(list(KINDS))).with_row_index("_i")
    out: list[_Ev] = []
    by_source: dict[str, list[dict]] = {}
    for r in rows.sort("source", "line", "_i").iter_rows(named=True):
        by_source.setdefault(r["source"], []).append(r)
    for src_rows in by_source.values():
        latest = None
        bounds = []
        for r in reversed(src_rows):           # the next timed line's time bounds an untimed one
            if isinstance(r["time"], datetime):
                latest = r["time"]
            bounds.append(r["time"] if isinstance(r["time"], datetime) else latest)
        for r, bound in zip(src_rows, reversed(bounds)):
            d = detail_dict(r["detail"])
            rank = rmap.rank_of(_int(d.get("rank")), _int(d.get("local_rank")), r["pid"])
            t = bound.timestamp() if bound is not None else float("inf")
            out.append(_Ev(r, d, rank, (t, r["source"] or "", int(r["line"] or 0))))
    return out


def _distributed(evs: list[_Ev], rmap: RankMap) -> bool:
    """Whether these are a job of several ranks: a collective's error, or two ranks known (torchrun's
    lines about a job of one rank tell nothing its own error does not)."""
    return (any(e.kind == "collective_error" for e in evs)
            or len(rmap.ranks() | {e.rank for e in evs if e.rank is not None}) >= 2)


def distributed_findings(events: pl.DataFrame, findings: list[Finding], rmap: RankMap) -> list[Finding]:
    """The job's failure sequence (one `distributed_failure` finding) and one `collective_error`
    finding per rank and error, marked as consequences of the first failure where they are."""
    if events.is_empty():
        return []
    evs = _events(events, rmap)
    if not evs or not _distributed(evs, rmap):
        return []
    evs.sort(key=lambda e: e.order)
    own = [e for e in evs if e.own and e.rank is not None]
    records = [e for e in evs if e.kind == "rank_exit" and e.d.get("root_cause") and e.rank is not None]
    # a CUDA OOM, an OOM kill or a CUDA error speaks before an NCCL error of no known cause
    strong = [e for e in own if e.kind != "collective_error" or e.d.get("error") == "cuda_error"]
    first = (strong or own or [None])[0]
    if first is None:
        if any(e.kind == "collective_error" for e in evs):
            # a hang: torchrun's first exit is then a rank whose watchdog fired first, not the one
            # the others waited for
            return _collective_findings(evs, None) + [_hang_finding(evs, rmap, records)]
        if not records:
            return []
        first = records[0]      # an exit torchrun saw first, with no error of the rank's in the logs
    after = [e for e in evs if e is not first and e.order >= first.order]
    before = [e for e in evs if e is not first and e.order < first.order and e.kind == "collective_error"
              and e.rank != first.rank and e.order[0] != float("inf")]
    # what followed: the others' waits and exits and the launcher's signals; another rank's own
    # failure (a second OOM) is its own, not a consequence
    followed = [e for e in after if (e.kind == "collective_error" and not (e.own and e.rank != first.rank))
                or e.kind == "rank_signal" or (e.kind == "rank_exit" and e.rank != first.rank)]
    also = [e for e in own if e is not first and e.rank != first.rank]
    chain = _chain_finding(first, followed, before, records, rmap, evs, also)
    _mark_first(findings, first)
    return [chain] + _collective_findings(evs, first)


def _steps(first: _Ev, followed: list[_Ev]) -> list[_Ev]:
    """The first failure, then one line per rank and kind of what followed, in order."""
    seen, out = set(), [first]
    for e in followed:
        key = (e.rank, e.kind, e.d.get("error"), e.row["pid"] if e.kind == "rank_signal" else None)
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out


def _who(e: _Ev, rmap: RankMap, named: set | None = None) -> str:
    """`rank 1 (pid 1571, GPU 0)`, the pid and GPU only the first time (`named`: the ranks said)."""
    if e.rank is None:
        return f"pid {e.row['pid']}" if e.row["pid"] is not None else "a rank"
    if named is not None:
        if e.rank in named:
            return f"rank {e.rank}"
        named.add(e.rank)
    parts = []
    pid, gpu = (e.row["pid"] if e.row["pid"] is not None else rmap.pid(e.rank)), rmap.gpu(e.rank)
    if pid is not None:
        parts.append(f"pid {pid}")
    if gpu is not None:
        parts.append(f"GPU {gpu}")
    return f"rank {e.rank}" + (f" ({', '.join(parts)})" if parts else "")


def _chain_finding(first: _Ev, followed: list[_Ev], before: list[_Ev], records: list[_Ev], rmap: RankMap,
                   evs: list[_Ev], also: list[_Ev]) -> Finding:
    steps = _steps(first, followed)
    seen: set = set()
    own_too = [e for e in also if (e.rank, e.kind) not in seen and not seen.add((e.rank, e.kind))]
    # another rank's own failure that no clock tells from the first (both untimed, in one file)
    tied = [e for e in own_too if e.order[0] == first.order[0]]
    root = records[0] if records else None       # torchrun's root cause
    f = Finding(kind="distributed_failure", severity="critical" if first.own else "warning",
                summary=_sequence_text(first, steps, own_too, tied, root, rmap), rank=first.rank,
                pid=first.row["pid"] if first.row["pid"] is not None else rmap.pid(first.rank),
                gpu=first.row["gpu"] or rmap.gpu(first.rank),
                start=first.row["time"] if isinstance(first.row["time"], datetime) else _record_time(records, first.rank),
                source=first.row["source"])
    f.evidence = [e.evidence() for e in (steps + own_too)[:EVIDENCE_MAX]]
    facts = ([root.evidence()] if root is not None else []) + [
        Evidence(path=x.source, line=x.line, text=x.text) for x in (rmap.evidence(first.rank) if first.rank is not None else [])]
    for ev in facts:      # torchrun's record and the lines that say which pid and GPU the rank is
        if all(ev.line != e.line or ev.path != e.path for e in f.evidence):
            f.evidence.append(ev)
    known = sorted(rmap.ranks() | {e.rank for e in evs if e.rank is not None})
    f.detail = {
        "first_failure": {**first.ref(), "what": first.what()},
        "sequence": [{**e.ref(), "what": e.what(), "time": e.row["time"], "consequence_of_first": e is not first}
                     for e in steps],
        "torchrun_root_cause_rank": root.rank if root is not None else None,
        "ranks": {str(r): {"pid": rmap.pid(r), "gpu": rmap.gpu(r)} for r in known},
        "own_failures": [{**e.ref(), "what": e.what()} for e in own_too],
    }
    note = _order_note(first, before, tied, root)
    if note:
        f.detail["order_note"] = note
    if own_too:
        f.causes = ["Several ranks failed on their own, alike: a bug in code that every rank runs, not one rank's "
                    "own code path."]
    else:
        f.causes = [f"Rank {first.rank}'s own failure stopped it in the middle of the job; the other ranks then "
                    "waited for it in their next collective, timed out or lost the connection, and the launcher "
                    "ended them. Their errors are consequences: look at the first failure."]
    f.checks = [f"Read rank {first.rank}'s log around {first.where()}; compare its memory with the other ranks' "
                "(a code path or cache that only this rank takes)."]
    return f


def _sequence_text(first: _Ev, steps: list[_Ev], own_too: list[_Ev], tied: list[_Ev], root: _Ev | None,
                   rmap: RankMap) -> str:
    said: set = set()     # ranks whose pid and GPU were given already
    who = _who(first, rmap, said)
    if tied:
        # no clock tells these apart: say so instead of naming one first
        text = (f"{who[:1].upper()}{who[1:]} and " + ", ".join(_who(e, rmap, said) for e in tied[:6])
                + f" each failed on its own ({first.what()}: " + ", ".join(e.where() for e in [first] + tied[:6])
                + "); the logs do not tell which came first")
    else:
        text = f"{who[:1].upper()}{who[1:]} failed first: {first.what()} ({first.where()})"
    then = [f"torchrun sent {e.d.get('signal')} to {_who(e, rmap, said)} ({e.where()})" if e.kind == "rank_signal"
            else f"{_who(e, rmap, said)}: {e.what()} ({e.where()})" for e in steps[1:]]
    if then:
        text += "; then " + "; ".join(then[:SAID_MAX]) + (f"; and {len(then) - SAID_MAX} more" if len(then) > SAID_MAX else "")
    untied = [e for e in own_too if e not in tied]
    if untied:
        text += ". Also failed on their own: " + "; ".join(f"{_who(e, rmap, said)}: {e.what()} ({e.where()})"
                                                         for e in untied[:SAID_MAX])
    if root is not None and root.rank == first.rank and first.kind != "rank_exit":
        text += (f". torchrun's summary {'names' if tied else 'agrees'}: root cause rank {root.rank} "
                 f"(exit code {root.d.get('exitcode')})" + (", to the second" if tied else ""))
    return text + "."


def _order_note(first: _Ev, before: list[_Ev], tied: list[_Ev], root: _Ev | None) -> str | None:
    notes = []
    if root is not None and root.rank != first.rank:
        notes.append(f"torchrun names rank {root.rank} as the first observed failure: it times exits to the second, "
                     "when its agent sees them, so a rank that died while the others waited can be named after them")
    if before:
        notes.append(f"{len(before)} collective error(s) on other ranks came before it (the order is then in doubt)")
    if tied:
        notes.append("the other ranks' own failures carry no time that tells them from the first one: it is first "
                     "only in its file's order (a bug that every rank runs fails them all alike)")
    return "; ".join(notes) or None


def _record_time(records: list[_Ev], rank: int | None):
    t = next((r.row["time"] for r in records if r.rank == rank and isinstance(r.row["time"], datetime)), None)
    return t


def _collective_findings(evs: list[_Ev], first: _Ev | None) -> list[Finding]:
    groups: dict[tuple, list[_Ev]] = {}
    for e in evs:
        if e.kind == "collective_error" and e is not first:
            groups.setdefault((e.rank, e.d.get("backend"), e.d.get("error")), []).append(e)
    out = []
    for (rank, _backend, error), items in groups.items():
        e = items[0]
        consequence = first is not None and e.order >= first.order and not (e.own and e.rank != first.rank)
        times = f", {len(items)} lines" if len(items) > 1 else ""
        who = f"Rank {rank}" if rank is not None else "A rank"
        summary = f"{who}: {e.what()} ({e.where()}{times})"
        f = Finding(kind="collective_error", severity="info" if consequence else "warning", summary="", rank=rank,
                    pid=e.row["pid"], gpu=e.row["gpu"], start=e.row["time"] if isinstance(e.row["time"], datetime) else None,
                    source=e.row["source"], evidence=[x.evidence() for x in items[:5]],
                    detail={k: v for k, v in e.d.items() if k not in ("rank", "message")} | {"count": len(items)})
        if consequence:
            f.consequence_of = first.ref()
            summary += f", a consequence of rank {first.rank}'s failure ({first.what()}, {first.where()})"
            f.related.append(f"This followed rank {first.rank}'s failure ({first.what()}, {first.where()}); "
                             "it is not a cause.")
        f.summary = summary + "."
        if error in ("timeout", "watchdog_stuck", "watchdog_detected"):
            f.checks.append("A collective timeout means a peer did not arrive: find the rank that failed or hung "
                            "first (the distributed_failure finding) before raising the timeout.")
        out.append(f)
    return out


def _hang_finding(evs: list[_Ev], rmap: RankMap, records: list[_Ev]) -> Finding:
    """Collective errors and no rank's own failure: the job hung; the ranks known that reported no
    timeout are the ones the others may have waited for."""
    waits = [e for e in evs if e.kind == "collective_error"]
    ranks_waiting = sorted({e.rank for e in waits if e.rank is not None})
    known = sorted(rmap.ranks() | {e.rank for e in evs if e.rank is not None})
    silent = [r for r in known if r not in ranks_waiting]
    summary = (f"Collectives failed on {len(ranks_waiting)} rank(s) ({', '.join(map(str, ranks_waiting)) or 'unknown'}) "
               "and no rank's own failure is in the logs: a hang, not a crash")
    if silent:
        summary += f"; rank(s) {', '.join(map(str, silent))} reported no such error: the others may have waited for them"
    if records:
        summary += (f"; torchrun's root cause, rank {records[0].rank}, is the first exit it saw, which in a hang "
                    "is a rank whose watchdog fired first")
    f = Finding(kind="distributed_failure", severity="warning", summary=summary + ".", evidence=[e.evidence() for e in waits[:5]],
                start=next((e.row["time"] for e in waits if isinstance(e.row["time"], datetime)), None),
                detail={"ranks_with_errors": ranks_waiting, "ranks_without": silent})
    f.checks = ["Look at what the ranks without errors were doing (py-spy dump, their last log lines); "
                "TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_NCCL_TRACE_BUFFER_SIZE record each rank's last collectives."]
    return f


def _mark_first(findings: list[Finding], first: _Ev) -> None:
    """The finding of the first failure, and the leaks of its rank, say that it came first."""
    for f in findings:
        if f.kind in ("gpu_oom", "oom_kill") and any(e.path == first.row["source"] and e.line == first.row["line"]
                                                     for e in f.evidence):
            f.related.append("The first failure of the distributed job: the other ranks' errors followed it "
                             "(see the distributed_failure finding).")
        elif f.kind == "leak" and f.rank is not None and f.rank == first.rank and first.kind in ("gpu_oom", "oom_kill"):
            f.related.append(f"Rank {first.rank}'s {first.what()} ({first.where()}) was the first failure of the "
                             "distributed job.")
