"""The ranks of a distributed job: which process and GPU each rank is, as the logs say it.

Format-free: parsers put a rank into a sample's `label` (`rank N`, or `local rank N` when only the
launcher's prefix gave the node-local rank, written by `parsers/ranks.label`) and write what they read about a rank's
identity as events: `rank_info` (a rank's own line naming its pid or CUDA device, NCCL's communicator
line), `rank_exit` (torchrun's failure records: rank, local rank, pid) and a `gpu_oom` whose detail has
the rank (its message names the GPU). `RankMap.from_events` collects those facts; a rank takes a pid or
a GPU only when every fact about it agrees (a restarted rank has a new pid: it is then left without
one). `assign` gives rank-labelled samples and rank events the pid and GPU of their rank, and a
`local rank N` label the global rank when the facts give exactly one. Each mapping keeps the lines
that stated it, for the report's evidence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from forensics.model import detail_dict
from forensics.frames import rows_where

# the facts' event kinds, and the kinds whose detail may carry a rank
FACT_KINDS = ("rank_info", "rank_exit", "gpu_oom")
_LABEL = re.compile(r"^(rank|local rank) ([0-9]{1,6})\b")
LABEL_RE = r"^(?:rank|local rank) [0-9]{1,6}\b"


def label_rank(label: str | None) -> tuple[int | None, int | None]:
    """(global rank, local rank) a series label names, as `parsers/ranks.label` writes them."""
    m = _LABEL.match(label or "")
    if not m:
        return None, None
    return (int(m[2]), None) if m[1] == "rank" else (None, int(m[2]))


@dataclass(frozen=True)
class RankFact:
    """One line's statement about a rank's identity."""
    rank: int | None
    local_rank: int | None
    pid: int | None
    gpu: str | None
    host: str | None
    how: str            # what the line is, for people ("torchrun's failure record")
    source: str
    line: int
    text: str
    kind: str


@dataclass
class RankMap:
    facts: list[RankFact] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: pl.DataFrame) -> "RankMap":
        if events.is_empty():
            return cls()
        rows = rows_where(events, pl.col("kind").is_in(list(FACT_KINDS))
                          & pl.col("detail").str.contains('"(?:local_)?rank"'))
        facts, nccl = [], []
        for r in rows.iter_rows(named=True):
            d = detail_dict(r["detail"])
            rank, local = _int(d.get("rank")), _int(d.get("local_rank"))
            if rank is None and local is None:
                continue
            gpu = r["gpu"] if r["kind"] != "rank_exit" else None
            fact = RankFact(rank, local, r["pid"], gpu, r.get("host") or d.get("host"),
                            str(d.get("how") or _HOW.get(r["kind"], r["kind"])), r["source"] or "?",
                            int(r["line"] or 0), r["text"] or "", r["kind"])
            (nccl if d.get("nranks") is not None else facts).append((fact, _int(d.get("nranks"))))
        # a communicator's rank is the job's rank only in the communicator of the whole world (the
        # default process group): of NCCL's lines, those of the largest communicator
        widest = max((n for _, n in nccl if n is not None), default=None)
        keep = [f for f, _ in facts] + [f for f, n in nccl if n == widest]
        return cls(keep)

    def _one(self, values: list) -> object:
        vals = {v for v in values if v is not None}
        return next(iter(vals)) if len(vals) == 1 else None

    def ranks(self) -> set[int]:
        return {f.rank for f in self.facts if f.rank is not None}

    def global_of_local(self, local_rank: int) -> int | None:
        return self._one([f.rank for f in self.facts if f.local_rank == local_rank])

    def pid(self, rank: int) -> int | None:
        return self._one([f.pid for f in self.facts if f.rank == rank])

    def gpu(self, rank: int) -> str | None:
        return self._one([f.gpu for f in self.facts if f.rank == rank])

    def rank_of_pid(self, pid: int | None) -> int | None:
        if pid is None:
            return None
        return self._one([f.rank for f in self.facts if f.pid == pid])

    def evidence(self, rank: int) -> list[RankFact]:
        """The lines that say which pid and GPU `rank` is (those that agree with the mapping)."""
        pid, gpu = self.pid(rank), self.gpu(rank)
        return [f for f in self.facts if f.rank == rank
                and ((pid is not None and f.pid == pid) or (gpu is not None and f.gpu == gpu))]

    def rank_of(self, rank: int | None, local_rank: int | None, pid: int | None) -> int | None:
        """The global rank of a row that gives any of these."""
        if rank is not None:
            return rank
        if local_rank is not None:
            r = self.global_of_local(local_rank)
            if r is not None:
                return r
        return self.rank_of_pid(pid)


_HOW = {"rank_exit": "torchrun's record of the rank's exit", "gpu_oom": "the rank's CUDA out-of-memory message",
        "rank_info": "a line of the rank's own log"}


def _int(v) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def assign(samples: pl.DataFrame, events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Samples labelled with a rank get their rank's pid and GPU where they have none; a `local rank N`
    label becomes `rank M` when the facts give exactly one global rank for local rank N. Events whose
    detail names a rank get its pid and GPU likewise."""
    rmap = RankMap.from_events(events)
    if not rmap.facts:
        return samples, events
    return _assign_samples(samples, rmap), _assign_events(events, rmap)


def _assign_samples(samples: pl.DataFrame, rmap: RankMap) -> pl.DataFrame:
    if samples.is_empty():
        return samples
    labels = samples.select(pl.col("label").filter(pl.col("label").str.contains(LABEL_RE)).unique())["label"]
    if not labels.len():
        return samples
    relabel, pids, gpus = {}, {}, {}
    for label in labels.to_list():
        rank, local = label_rank(label)
        if rank is None:
            rank = rmap.global_of_local(local)
            if rank is None:
                continue
            relabel[label] = f"rank {rank}" + label[len(f"local rank {local}"):]
        pids[label] = rmap.pid(rank)
        gpus[label] = rmap.gpu(rank)
    if not relabel and not any(v is not None for v in (*pids.values(), *gpus.values())):
        return samples
    lab = pl.col("label")
    return samples.with_columns(
        pl.coalesce("pid", lab.replace_strict(pids, default=None, return_dtype=pl.Int64)).alias("pid"),
        pl.coalesce("gpu", lab.replace_strict(gpus, default=None, return_dtype=pl.String)).alias("gpu"),
        lab.replace(relabel).alias("label") if relabel else lab,
    )


def _assign_events(events: pl.DataFrame, rmap: RankMap) -> pl.DataFrame:
    ranked = events.select(pl.col("detail").str.contains('"(?:local_)?rank"').fill_null(False))["detail"]
    if not ranked.any():
        return events
    pids, gpus = events["pid"].to_list(), events["gpu"].to_list()
    for i in ranked.arg_true().to_list():
        d = detail_dict(events["detail"][i])
        rank = rmap.rank_of(_int(d.get("rank")), _int(d.get("local_rank")), pids[i])
        if rank is None:
            continue
        if pids[i] is None:
            pids[i] = rmap.pid(rank)
        if gpus[i] is None and events["kind"][i] != "rank_exit":
            gpus[i] = rmap.gpu(rank)
    return events.with_columns(pl.Series("pid", pids, dtype=pl.Int64), pl.Series("gpu", gpus, dtype=pl.String))
