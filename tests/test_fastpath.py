"""The fast paths for big inputs give what the plain paths give (fastpath.py)."""
from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
import zstandard

from forensics import fastpath
from forensics.errors import InputError
from forensics.sources import MAX_LINE_CHARS, Source

ROOT = Path(__file__).resolve().parent.parent
REALWORLD = Path("/work/shared/realworld")


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
    files += sorted(REALWORLD.glob("*.txt")) if REALWORLD.is_dir() else []
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
