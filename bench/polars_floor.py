"""What one polars expression costs on a small frame, and whether fewer, bigger queries cost less.

    POLARS_MAX_THREADS=1 taskset -c 1 python bench/polars_floor.py   # as a scan worker runs (1 core, 1 thread)
    POLARS_MAX_THREADS=1 python bench/polars_floor.py                # its pool thread free to run on the other core

A batch-scan job reads ~6 small files (a few KB to a few MB) and costs ~200 ms of CPU; 20 jobs/s on
2 cores needs ≤ 100 ms. This prints, for frames of 50 and 10,000 rows, the cost of evaluating the
same k expressions: one query each (eager), all in one query (eager), and as one lazy chain
collected once. If one query of k expressions cost about as much as one of one, reading each file
in a handful of queries would pay; the table shows whether it does.
"""
from __future__ import annotations

import os
import sys
import time
import timeit

import polars as pl

REGEXES = [r"step ([0-9]+)", r"allocated: ([0-9.]+)", r"^([0-9-]+)", r"INFO ([a-z]+)", r"(MB)$",
           r"\[([a-z]+)", r",([0-9]+)", r"([0-9]{2}):", r"train(:)", r"([0-9]+)\]"]
LINE = "2026-11-30 03:04:08,405 INFO train: [step 3] allocated: 20.0 MB, cached: 24.0 MB"


def _cost(fn) -> float:
    """CPU seconds per call of fn: the best of 3 runs of as many calls as take ~0.2 s (timeit's autorange)."""
    timer = timeit.Timer(fn, timer=time.process_time)
    n, _ = timer.autorange()
    return min(timer.repeat(repeat=3, number=n)) / n


def shapes(df: pl.DataFrame, exprs: list[pl.Expr]) -> dict[str, float]:
    """Seconds per evaluation of `exprs` over df, three ways."""
    def each():
        for e in exprs:
            df.select(e)

    def one():
        df.select(exprs)

    def lazy():
        lf = df.lazy()
        for e in exprs:
            lf = lf.with_columns(e)
        lf.collect()

    return {"one query each": _cost(each), "one query": _cost(one), "one lazy chain": _cost(lazy)}


def main() -> None:
    kinds = {
        "arithmetic": [(pl.col("line") + i).alias(f"e{i}") for i in range(10)],
        "literal contains": [pl.col("text").str.contains(w, literal=True).alias(f"e{i}")
                             for i, w in enumerate(("step", "MB", "INFO", "x", "cached", "[", "]", ":", ",", "20"))],
        "regex extract": [pl.col("text").str.extract(rx).alias(f"e{i}") for i, rx in enumerate(REGEXES)],
    }
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    print(f"polars {pl.__version__}, POLARS_MAX_THREADS={os.environ.get('POLARS_MAX_THREADS', 'all')} "
          f"(pool of {pl.thread_pool_size()}), {cpus} usable CPUs, Python {sys.version.split()[0]}")
    print("10 expressions evaluated three ways; µs per expression (CPU)")
    head = f"{'rows':>6}  {'expressions':<17}{'one query each':>16}{'one query':>11}{'one lazy chain':>16}"
    print(head)
    for rows in (50, 10_000):
        df = pl.DataFrame({"line": list(range(rows)), "text": [LINE] * rows})
        for kind, exprs in kinds.items():
            c = shapes(df, exprs)
            print(f"{rows:>6}  {kind:<17}" + "".join(f"{v / len(exprs) * 1e6:{w}.1f}"
                                                   for v, w in zip(c.values(), (16, 11, 16))))
    empty = pl.DataFrame({"line": [1]})
    print(f"a query of one column reference (the fixed cost of a call): "
          f"{_cost(lambda: empty.select(pl.col('line'))) * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
