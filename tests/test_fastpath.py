"""The fast paths for big inputs give what the plain paths give (fastpath.py)."""
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


def _outcome(read, *args):
    try:
        return read(*args)
    except InputError as e:
        return str(e), None


def _same(path: Path, batch_bytes: int = 1 << 20) -> None:
    slow, s1 = _outcome(_python_frame, path)
    fast, s2 = _outcome(_native_frame, path, batch_bytes)
    if s1 is None or s2 is None:
        assert fast == slow   # both refuse the file, with the same message
        return
    assert fast["line"].to_list() == slow["line"].to_list()
    assert fast["text"].to_list() == slow["text"].to_list()
    assert (s2.decode_errors, s2.nul_bytes) == (s1.decode_errors, s1.nul_bytes)
    assert s2.skipped.counts == s1.skipped.counts and s2.skipped.examples == s1.skipped.examples
    assert s2.problems == s1.problems


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


# -- streamed parsing (fastpath_stream.py) gives what one pass gives --------------------------------

def _parse(path: Path, streamed: bool, monkeypatch, batch_bytes: int = 2048):
    from forensics import fastpath_stream
    from forensics import ingest
    from forensics.options import Options

    from forensics import thinning

    monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0 if streamed else 1 << 62)
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
    for f in ("format", "lines", "records", "clock"):
        assert getattr(i2, f) == getattr(i1, f), f
    if i1.format in ("kernel-log", "nvrm-xid"):
        # a big kernel log is decoded in full only around what matters: counts over all its lines are
        # counts over those (said in a note), the rest is the same
        approx = {"not a log line (provenance, separator, shell prompt)", "no log prefix"}
        assert {k: v for k, v in i2.skip_reasons.items() if k not in approx} == \
            {k: v for k, v in i1.skip_reasons.items() if k not in approx}
        assert {k: v for k, v in i2.meta.items() if k not in ("prefixes", "decoded_lines")} == \
            {k: v for k, v in i1.meta.items() if k != "prefixes"}
        assert set(i1.notes) <= set(i2.notes) and len(set(i2.notes) - set(i1.notes)) == 1
        return
    for f in ("skipped", "skip_reasons", "meta", "problems"):
        assert getattr(i2, f) == getattr(i1, f), f
    assert set(i2.notes) == set(i1.notes)


def test_streaming_consumers_are_keyed_by_parser_names():
    """A consumer under a name no parser has is never used: its format's big files are read whole
    (this once left DeepSpeed, Megatron and HF Trainer logs unstreamed)."""
    from forensics import fastpath_stream
    from forensics import parsers

    assert set(fastpath_stream._CONSUMERS) <= set(parsers.BY_NAME)
    for name in ("nvidia-smi-csv", "kernel-log", "nvrm-xid", "step-markers", "deepspeed-memory",
                 "megatron-memory", "hf-trainer-memory"):
        assert name in fastpath_stream._CONSUMERS, name


# -- the scanners' quick first pass (fastpath_stream._QUICK) -------------------------------------------

def _prefilter_hits(lines: list[str]) -> tuple[list[bool], list[bool]]:
    """For each line: (does a scanner's hint or prefilter match it, does the quick pass let it through)."""
    from forensics import fastpath_stream
    from forensics import parsers

    hints = [m.SCAN_HINT for m in parsers.SCANNERS]
    quick = "|".join(f"(?:{fastpath_stream._quick(h)})" for h in hints)
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String})
    t = pl.col("text")
    wanted = frame.select(pl.any_horizontal([t.str.contains(h) for h in hints]
                                            + [t.str.contains(fastpath_stream._prefilter(h)) for h in hints]))
    # a line whose first non-blank is `|` is let through apart from the quick pass (_PIPE_ROWS)
    passed = frame.select(t.str.contains(quick) | t.str.strip_chars_start().str.starts_with("|"))
    return wanted.to_series().to_list(), passed.to_series().to_list()


def test_every_scanner_hint_has_a_quick_pass():
    # a changed step-markers hint silently loses the quick pass (and CSV months get 20% slower)
    from forensics import fastpath_stream
    from forensics import parsers

    stepmem = next(m for m in parsers.SCANNERS if m.NAME == "step-markers")
    assert fastpath_stream._hint_key(stepmem.SCAN_HINT) in fastpath_stream._QUICK


def test_quick_pass_lets_through_every_hinted_line():
    """On every recorded line: whatever a scanner's hint or prefilter matches, the quick pass does."""
    from test_fastpath_kernel import _text_lines

    lines = list(_text_lines())
    wanted, quick = _prefilter_hits(lines)
    assert sum(wanted) > 100
    missed = [line for line, w, q in zip(lines, wanted, quick) if w and not q]
    assert not missed, missed[:5]


_HINT_WORDS = ["allocated", "reserved", "cached", "occupied", "gpu:", "gpu =", "free gpu", "free_gpu", "iter",
               "iteration", "step", "torch.cuda.", "nvidia-smi", "Max_MA", "*****", "_mem_", "oom-kill:constraint=",
               "Kill", "NVRM: ", "=========", "CUDA out of memory", "Allocation on device "]


@given(st.lists(st.tuples(st.sampled_from(_HINT_WORDS), st.integers(0, 2**20)), min_size=1, max_size=4),
       st.text(alphabet="ab .:=[]|0123456789_\tKſ", max_size=12))
@settings(max_examples=300, deadline=None)
def test_quick_pass_holds_the_hints_in_any_case(words, filler):
    """A line made of hint words, each in a random mix of cases, with random text between them."""
    parts = []
    for word, mask in words:
        parts.append("".join(c.upper() if mask >> (i % 20) & 1 else c for i, c in enumerate(word)))
    line = filler.join(parts) + f" {len(parts)} MiB"
    wanted, quick = _prefilter_hits([line])
    assert quick[0] or not wanted[0], line


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


def test_quick_pass_gives_the_same_hits_when_it_turns_itself_off():
    """Batches where most lines hold the quick pass's letters (it then stops), then CSV rows with a
    few hinted lines among them: the scanners keep exactly what their hints match over all lines."""
    from forensics import fastpath_stream
    from forensics import parsers

    rows = [f"2026/10/01 00:00:{i % 60:02d}.000, {i % 8}, NVIDIA H100 80GB HBM3, 81559 MiB, 30000 MiB" for i in range(400)]
    rows[50] = "[step 12] allocated: 1024.5 MB, cached: 2048 MB"
    rows[120] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
    rows[300] = "|  Allocated memory      |   1024 MB  |   2048 MB  |"
    chatty = [f"gpuhost kernel: [{i}.0] eth0: link is up, iteration {i}" for i in range(300)]
    for order in ([rows[:200], rows[200:]], [chatty, rows[:200], rows[200:]], [rows[:200], chatty, rows[200:]]):
        sc = fastpath_stream._Scanners(set())
        line = 0
        for part in order:
            sc.feed(pl.DataFrame({"line": range(line + 1, line + 1 + len(part)), "text": part}))
            line += len(part)
        every = [x for part in order for x in part]
        frame = pl.DataFrame({"line": range(1, len(every) + 1), "text": every})
        for m in sc.mods:
            got = pl.concat(sc.hits[m.NAME])["line"].to_list() if sc.hits[m.NAME] else []
            assert got == frame.filter(pl.col("text").str.contains(m.SCAN_HINT))["line"].to_list(), m.NAME
    assert sc.quick == sc.any_hint   # the chatty batch turned it off


def test_scanners_keep_what_each_hint_keeps_on_every_recorded_line():
    """ingest._scan_free_text runs the scanners' prefilters (quick pass, literals) before the hints:
    on every recorded line, each scanner gets exactly the lines its own hint matches over all lines."""
    from test_fastpath_kernel import _text_lines

    from forensics import fastpath_stream

    lines = list(_text_lines())
    frame = pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines}, schema={"line": pl.Int64, "text": pl.String})
    sc = fastpath_stream._Scanners(set())
    sc.feed(frame)
    found = 0
    for m in sc.mods:
        got = pl.concat(sc.hits[m.NAME])["line"].to_list() if sc.hits[m.NAME] else []
        assert got == frame.filter(pl.col("text").str.contains(m.SCAN_HINT))["line"].to_list(), m.NAME
        found += len(got)
    assert found > 100


# -- memory: what the streamed consumers keep does not hold the batches it came from -------------------

_PINNING_PROBE = '''
import gc, sys
import polars as pl
from forensics import fastpath_stream as fs

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20

what, own = sys.argv[1], sys.argv[2] == "own"
if not own:
    fs._own = lambda df: df
consumer = {"step": lambda: fs._StepLog(None, None, None), "kernel": lambda: fs._Kernel(None, None, None),
            "scanners": lambda: fs._Scanners(set())}[what]()
feed = consumer.feed
# one line in 1000 is one the consumer keeps: a memory reading, an OOM kill, a CUDA OOM
kept_line = {"step": "2026-10-01 00:00:00,000 INFO train: [step 7] allocated: 20480.6 MB, cached: 24576.6 MB",
             "kernel": "Oct  1 00:00:00 host kernel: Out of memory: Killed process 4242 (python) total-vm:1kB",
             "scanners": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"}[what]
filler = "Oct  1 00:00:00 host systemd[1]: Started Session 4 of user root; nothing to see in this line at all"
base = rss_mb()
rows = 300_000
for b in range(8):
    i = pl.int_range(rows, dtype=pl.Int64)
    batch = pl.select((i + b * rows + 1).alias("line"), pl.when(i % 1000 == 7).then(pl.lit(kept_line))
                      .otherwise(pl.concat_str(pl.lit(filler), i.cast(pl.String))).alias("text"))
    feed(batch)
    del batch
    gc.collect()
print(rss_mb() - base)
'''


def _pinned_mb(what: str, own: bool) -> int:
    import os
    import subprocess
    import sys

    # freed pages go back to the OS at once: the RSS shows what is still referenced
    env = {**os.environ, "_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PINNING_PROBE, what, "own" if own else "shared"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the RSS from /proc")
@pytest.mark.parametrize("what", ["step", "kernel", "scanners"])
def test_kept_lines_do_not_hold_their_batches(what):
    """Eight batches of ~35 MB each, one line in 1000 kept: the kept lines are copied out (_own), so
    the batches are freed (a month of step log kept 1 GB of them before). The probe sees the
    difference: without the copy, the batches stay."""
    assert _pinned_mb(what, own=True) < 80
    assert _pinned_mb(what, own=False) > 160


@pytest.mark.parametrize("theirs, decay", [(None, "10000"), ("dirty_decay_ms:700", "700")])
def test_polars_allocator_keeps_freed_pages_a_while(theirs, decay):
    """Importing forensics before polars sets jemalloc's decay to 10 s (a user's own setting wins):
    jemalloc itself reports the options it took."""
    import os
    import subprocess
    import sys

    conf = "stats_print:true" + ("," + theirs if theirs else "")
    env = {**os.environ, "_RJEM_MALLOC_CONF": conf, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", "import forensics, polars"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"opt.dirty_decay_ms: {decay} " in out.stderr and "opt.muzzy_decay_ms: 10000 " in out.stderr


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
