"""Reading lines: polars' native reader (io/lines.py) gives what the line-by-line reader gives, a file
read in many batches gives what one batch gives, and the frame helpers behave as documented."""
from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REALWORLD
from forensics.io import lines as fastpath
from forensics.errors import InputError
from forensics.io.sources import MAX_LINE_CHARS, Source

ROOT = Path(__file__).resolve().parent.parent


def _python_frame(path: Path) -> tuple[pl.DataFrame, Source]:
    src = Source.open(path)
    src.head()
    src.encoding = None   # not "utf-8": frame() takes the line-by-line reader
    return src.frame(), src


def _native_frame(path: Path, batch_bytes: int) -> tuple[pl.DataFrame, Source]:
    src = Source.open(path)
    parts = list(fastpath.cleaned_batches(src, batch_bytes))
    df = pl.concat(parts) if parts else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return df, src


def _default_frame(path: Path) -> tuple[pl.DataFrame, Source]:
    """What Source.frame() gives as ingest calls it: after the head, which holds every line of a small
    file (frame() then takes the head's lines instead of reading the file again)."""
    src = Source.open(path)
    src.head()
    return src.frame(), src


def _outcome(read, *args):
    try:
        return read(*args)
    except InputError as e:
        return str(e), None


def _same(path: Path, batch_bytes: int = 1 << 20) -> None:
    slow, s1 = _outcome(_python_frame, path)
    fast, s2 = _outcome(_native_frame, path, batch_bytes)
    used, s3 = _outcome(_default_frame, path)
    if s1 is None or s2 is None or s3 is None:
        assert fast == slow == used   # all refuse the file, with the same message
        return
    for df, s in ((fast, s2), (used, s3)):
        assert df["line"].to_list() == slow["line"].to_list()
        assert df["text"].to_list() == slow["text"].to_list()
        assert df.schema == fast.schema
        assert (s.decode_errors, s.nul_bytes) == (s1.decode_errors, s1.nul_bytes)
        assert s.skipped.counts == s1.skipped.counts and s.skipped.examples == s1.skipped.examples
        assert s.problems == s1.problems


EDGE_CASES = {
    "crlf.log": b"one\r\ntwo\r\r\n\r\n\nthree\rfour\n  \nlast without newline\r",
    "bom.log": b"\xef\xbb\xbfline one\n\xef\xbb\xbfline two starts with a BOM\n",
    "invalid.log": b"ok\n\xff\xfe bad\nhalf \xe2\x82\nok \xef\xbf\xbd real replacement char\n",
    "nul.log": b"\x00\x00\x00\x00a\x00b\nc\n\x00\n",
    "sep.log": b"a\x1fb\nplain\n",
    "quotes.log": b'"unbalanced\n"a","b"\n# comment-like\n,,,\n',
    "empty.log": b"",
    "blank.log": b"\n\n\n",
    "long.log": b"short\n" + b"x" * (MAX_LINE_CHARS + 5) + b"\nafter\n" + "é".encode() * (MAX_LINE_CHARS + 1) + b"\nend\n",
    "huge.log": b"start\n" + b"y" * (5 * MAX_LINE_CHARS) + b"\nend\n",
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
@pytest.mark.parametrize("batch_bytes", [7, 1 << 20])
def test_native_reader_matches_line_reader_on_edge_cases(tmp_path, name, batch_bytes):
    if name == "huge.log" and batch_bytes == 7:
        # its 5 MB line read 7 bytes at a time took 100 s of the suite (each piece joins the ones
        # before); 4 KB pieces still cut it into 1,280 of them
        batch_bytes = 4096
    p = tmp_path / name
    p.write_bytes(EDGE_CASES[name])
    _same(p, batch_bytes)


def test_native_reader_matches_on_compressed_and_truncated(tmp_path):
    body = "".join(f"line {i} \u00e9\r\n" for i in range(20000)).encode()
    for name, data in (("a.gz", gzip.compress(body)), ("a.zst", zstandard.ZstdCompressor().compress(body))):
        p = tmp_path / name
        p.write_bytes(data)
        _same(p, 4096)
        p.write_bytes(data[: len(data) // 2])
        _same(p, 4096)


def test_native_reader_matches_on_recorded_logs():
    files = [f for f in sorted((ROOT / "sample_logs").rglob("*")) if f.is_file()]
    files += sorted(REALWORLD.rglob("*.txt"))
    assert files
    for f in files:
        try:
            _same(f, 4096)
        except AssertionError as e:
            raise AssertionError(f"{f}: {e}") from e


def test_native_reader_matches_line_reader_on_random_bytes(tmp_path):
    import random

    rng = random.Random(7)
    alphabet = [b"a", b"b c", b"\r", b"\n", b"\n", b" ", b"\xff", b"\x00", b'"', b"#", b",", b"\xc3\xa9",
                b"\xef\xbb\xbf", b"\t", b"\x1f", b"\xef\xbf\xbd"]
    for i in range(300):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        for suffix, pack in (("", lambda b: b), (".gz", gzip.compress)):
            p = tmp_path / f"r{i}.log{suffix}"
            p.write_bytes(pack(data))
            try:
                _same(p, rng.choice([5, 64, 1 << 20]))
            except AssertionError as e:
                raise AssertionError(f"{data!r}: {e}") from e


def test_a_small_file_is_read_once(tmp_path, monkeypatch):
    """A file whose head holds all its lines is not read again for its frame (a job folder of thousands
    of one-line logs paid a second read of each); one with a NUL byte, one that grew after it was opened
    and one too long for the head are, as only the line reader removes and counts NULs, stops at the
    size the file had, and reads past the head."""
    reads = []
    real = fastpath.read_frame
    monkeypatch.setattr("forensics.io.sources.read_frame", lambda src: reads.append(src.path) or real(src))
    cases = {"small.log": b"[step 1] allocated: 1 MB\r\n\n[step 2] allocated: 2 MB",
             "nul.log": b"[step 1] allocated: 1 MB\n\x00\n", "long.log": b"[step 1] allocated: 1 MB\n" * 20000}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        src = Source.open(tmp_path / name)
        src.head()
        src.frame()
    grown = tmp_path / "grown.log"
    grown.write_bytes(b"[step 1] allocated: 1 MB\n")
    src = Source.open(grown)
    grown.write_bytes(b"[step 1] allocated: 1 MB\n[step 2] allocated: 2 MB\n")
    src.head()
    assert src.frame()["text"].to_list() == ["[step 1] allocated: 1 MB"]
    assert src.problems and "grew" in src.problems[0]
    assert reads == [str(tmp_path / n) for n in ("nul.log", "long.log", "grown.log")]


# -- a file read in many batches (ingest's streamed reading) gives what one batch gives --------------

def _parse(path: Path, streamed: bool, monkeypatch, batch_bytes: int = 2048):
    from forensics import ingest, thinning
    from forensics.options import Options

    monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 0 if streamed else 1 << 62)
    monkeypatch.setattr(thinning, "MAX_READINGS", 1 << 62)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", batch_bytes)
    src = Source.open(path)
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    return info, results


def _same_parse(path: Path, monkeypatch, batch_bytes: int = 2048, sort_events: bool = False) -> None:
    from forensics.model import EVENTS_SCHEMA, SAMPLES_SCHEMA, conform

    i1, r1 = _parse(path, False, monkeypatch)
    i2, r2 = _parse(path, True, monkeypatch, batch_bytes)
    def table(results, attr, schema, keys):
        return pl.concat([conform(None, schema)] + [conform(getattr(p, attr), schema) for p in results]).sort(
            keys, nulls_last=True)

    s1, s2 = (table(r, "samples", SAMPLES_SCHEMA, ["line", "series", "gpu", "pid"]) for r in (r1, r2))
    assert s2.equals(s1), (s1, s2)
    e1, e2 = (table(r, "events", EVENTS_SCHEMA, ["line", "kind"]) for r in (r1, r2))
    assert e2.equals(e1), (e1, e2)
    for f in ("format", "lines", "records", "clock", "skipped", "skip_reasons", "meta", "problems"):
        assert getattr(i2, f) == getattr(i1, f), f
    assert i2.notes == i1.notes


@pytest.mark.parametrize("at", [5, 230, 399])
def test_summary_rows_in_a_streamed_csv_are_found_as_in_one_pass(tmp_path, monkeypatch, at):
    """A row of a PyTorch memory summary holds none of the quick pass's letters ("Active memory"): the
    scanners take it for its leading `|`, which a streamed batch looks for in its bytes first (near the
    file's start, in its middle, at its end; batches of 3000 bytes put it at different places in one)."""
    head = "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB]"
    rows = [f"2026/10/01 00:{i // 60:02d}:{i % 60:02d}.000, 0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, "
            f"{30000 + i} MiB" for i in range(400)]
    rows[at:at] = ["PyTorch CUDA memory summary, device ID 0",
                   "|  Active memory         |   1024 MiB |   2048 MiB |   3072 MiB |   4096 MiB |"]
    p = tmp_path / "gpu.csv"
    p.write_text("\n".join([head, *rows]) + "\n")
    _same_parse(p, monkeypatch, batch_bytes=3000)


@pytest.mark.parametrize("theirs, decay", [(None, "1000"), ("dirty_decay_ms:700", "700")])
def test_polars_allocator_keeps_freed_pages_a_while(theirs, decay):
    """Importing forensics before polars sets jemalloc's decay to 1 s (a user's own setting wins):
    jemalloc itself reports the options it took."""
    import os
    import subprocess
    import sys

    conf = "stats_print:true" + ("," + theirs if theirs else "")
    env = {**os.environ, "_RJEM_MALLOC_CONF": conf, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", "import forensics, polars"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"opt.dirty_decay_ms: {decay} " in out.stderr and "opt.muzzy_decay_ms: 1000 " in out.stderr


# -- frames.rows_where: DataFrame.filter without polars' thread pool --------------------------------

@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 5)), st.one_of(st.none(), st.text(max_size=4)),
                          st.one_of(st.none(), st.booleans())), max_size=30),
       st.sampled_from(["mask", "a>0", "b null", "lit true", "lit false", "lit null", "regex", "two columns"]))
def test_rows_where_is_filter(rows, how):
    from forensics.frames import rows_where

    df = pl.DataFrame(rows, schema={"a": pl.Int64, "b": pl.String, "m": pl.Boolean}, orient="row")
    predicate = {"mask": df["m"], "a>0": pl.col("a") > 0, "b null": pl.col("b").is_null(),
                 "lit true": pl.lit(True), "lit false": pl.lit(False), "lit null": pl.lit(None, dtype=pl.Boolean),
                 "regex": pl.col("b").str.contains("^[a-m]"), "two columns": pl.col("a", "b").is_not_null()}[how]
    try:
        want = df.filter(predicate)
    except pl.exceptions.PolarsError as e:
        with pytest.raises(type(e)):
            rows_where(df, predicate)
        return
    got = rows_where(df, predicate)
    assert got.schema == want.schema and got.equals(want), how



@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.sampled_from("ab"))),
                max_size=25), st.sampled_from([("a",), ("a", "b")]))
def test_partitions_are_partition_by_as_dict(rows, by):
    """frames.partitions (the nvidia-smi readers' sections, maps and segments): the keys, order and rows of
    partition_by(as_dict=True), null keys included, without a query per partition."""
    from forensics.frames import partitions

    df = pl.DataFrame(rows, schema={"a": pl.Int32, "b": pl.String}, orient="row").with_row_index("i")
    want = df.partition_by(list(by), as_dict=True, maintain_order=True)
    got = partitions(df, *by)
    assert list(got) == list(want)
    assert all(got[k].equals(want[k]) for k in want)

def test_batches_a_reader_took_whole_as_rows_skip_the_scanners(tmp_path, monkeypatch):
    """A batch of nothing but clean CSV rows holds nothing for the free-text scanners: the reader says so
    (feed returns True) and the scanners never see it; the batch that holds a CUDA OOM line is scanned,
    and its OOM found."""
    from forensics import ingest, parsers
    from forensics.options import Options
    from forensics.parsers import scanners as scanning

    head = "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB]"
    rows = [f"2026/10/01 00:{i // 60 % 60:02d}:{i % 60:02d}.000, 0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, "
            f"81559 MiB, {30000 + i} MiB" for i in range(3000)]
    rows[2500:2500] = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"]
    p = tmp_path / "gpu.csv"
    p.write_text("\n".join([head, *rows]) + "\n")
    monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", 20000)
    seen = []
    orig = scanning.Scanners.feed

    def feed(self, batch, raw=None):
        seen.append(batch.height)
        return orig(self, batch, raw)
    monkeypatch.setattr(scanning.Scanners, "feed", feed)
    src = Source.open(p)
    module, _ = parsers.claim(src.head())
    primary, found = ingest.read_source(src, module, Options(tz="UTC"))
    assert primary.samples.height == 3000
    assert [e for f in found for e in f.events["kind"].to_list()] == ["gpu_oom"]
    assert 0 < sum(seen) < 3001 / 4, seen   # most batches were taken whole as rows


@pytest.mark.parametrize("tail", ["\n" * 30000, "\n" * 150 + "x\n" + "\n" * 30000])
def test_blank_lines_after_a_streamed_csv_are_counted_as_in_one_pass(tmp_path, monkeypatch, tail):
    """A CSV followed by many blank lines (issue 45: a gigabyte of them): streamed, the blank batches are
    counted from their bytes and never cut into lines nor scanned, with what one pass of the lines gives."""
    from forensics import ingest, parsers
    from forensics.options import Options
    from forensics.parsers import scanners as scanning

    head = "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB]"
    rows = [f"2026/10/01 00:{i // 60:02d}:{i % 60:02d}.000, 0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, "
            f"{30000 + i} MiB" for i in range(400)]
    p = tmp_path / "gpu.csv"
    p.write_text("\n".join([head, *rows]) + "\n" + tail)
    _same_parse(p, monkeypatch, batch_bytes=3000)
    seen = []
    orig = scanning.Scanners.feed

    def feed(self, batch, raw=None):
        seen.append(batch.height)
        return orig(self, batch, raw)
    monkeypatch.setattr(scanning.Scanners, "feed", feed)
    monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", 3000)
    src = Source.open(p)
    module, _ = parsers.claim(src.head())
    primary, _ = ingest.read_source(src, module, Options(tz="UTC"))
    assert primary.skipped.counts["blank line"] == tail.count("\n") - ("x" in tail)
    assert len(seen) <= 2 and sum(seen) < 3000, seen   # only the batches where the rows end (and the x)
