"""forensics/ranks.py: which pid and GPU each rank is, from the events that say so, and how rank-labelled
rows get them (only where every fact agrees)."""
from __future__ import annotations

import json

import polars as pl

from forensics import ranks
from forensics.parsers import ranks as parser_ranks
from forensics.model import events_frame, samples_frame


def ev(kind, line, detail, pid=None, gpu=None, source="s.log"):
    return {"kind": kind, "line": line, "source": source, "pid": pid, "gpu": gpu, "detail": json.dumps(detail),
            "text": f"line {line}"}


def rank_label(rank, local_rank=None):
    """A label as the parsers write it (parsers/ranks.label)."""
    return pl.select(parser_ranks.label(pl.lit(rank, pl.Int64), pl.lit(local_rank, pl.Int64), pl.lit(None, pl.String),
                                        pl.lit(False))).item()


def test_labels_round_trip():
    assert rank_label(3) == "rank 3" and rank_label(None, 2) == "local rank 2"
    assert ranks.label_rank("rank 3 after forward") == (3, None)
    assert ranks.label_rank("local rank 2") == (None, 2) and ranks.label_rank("step 7") == (None, None)


def test_facts_agree_or_are_not_used():
    rmap = ranks.RankMap.from_events(events_frame([
        ev("rank_info", 1, {"rank": 0, "local_rank": 0}, pid=10, gpu="0"),
        ev("rank_exit", 9, {"rank": 0, "local_rank": 0, "exitcode": 1}, pid=10),
        ev("rank_info", 2, {"rank": 1}, pid=11, gpu="1"),
        ev("rank_info", 3, {"rank": 1}, pid=12),          # a restart: rank 1 is two processes
    ]))
    assert (rmap.pid(0), rmap.gpu(0), rmap.rank_of_pid(10)) == (10, "0", 0)
    assert rmap.pid(1) is None and rmap.gpu(1) == "1"
    assert [f.line for f in rmap.evidence(0)] == [1, 9]
    assert rmap.global_of_local(0) == 0 and rmap.rank_of(None, 0, None) == 0


def test_only_the_world_communicator_gives_the_rank():
    rmap = ranks.RankMap.from_events(events_frame([
        ev("rank_info", 1, {"rank": 5, "nranks": 16}, pid=100, gpu="5"),
        ev("rank_info", 2, {"rank": 1, "nranks": 4}, pid=100, gpu="5"),   # a tensor-parallel group's rank
    ]))
    assert rmap.ranks() == {5} and rmap.rank_of_pid(100) == 5


def test_assign_gives_rank_rows_their_pid_and_gpu_and_the_global_rank():
    events = events_frame([ev("rank_exit", 5, {"rank": 3, "local_rank": 1, "exitcode": 1}, pid=77),
                           ev("rank_info", 6, {"rank": 3}, pid=77, gpu="2"),
                           ev("collective_error", 7, {"rank": 3, "error": "timeout"})])
    samples = samples_frame([
        {"source": "t.log", "line": 1, "series": "allocated", "bytes": 1, "label": "local rank 1 after forward"},
        {"source": "t.log", "line": 2, "series": "allocated", "bytes": 1, "label": "rank 4"},
        {"source": "t.log", "line": 3, "series": "allocated", "bytes": 1, "label": "step 3"},
    ])
    s, e = ranks.assign(samples, events)
    assert s.select("label", "pid", "gpu").rows() == [("rank 3 after forward", 77, "2"), ("rank 4", None, None),
                                                      ("step 3", None, None)]
    assert e.filter(pl.col("kind") == "collective_error").select("pid", "gpu").row(0) == (77, "2")
    # a rank_exit's GPU is not its rank's (torchrun's record names none)
    assert e.filter(pl.col("kind") == "rank_exit")["gpu"][0] is None


def test_no_facts_change_nothing():
    samples = samples_frame([{"source": "t.log", "line": 1, "series": "allocated", "bytes": 1, "label": "rank 1"}])
    s, e = ranks.assign(samples, events_frame([]))
    assert s.equals(samples) and e.is_empty()
