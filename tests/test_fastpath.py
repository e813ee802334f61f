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


# -- streamed parsing (fastpath_stream.py) gives what one pass gives --------------------------------

def _parse(path: Path, streamed: bool, monkeypatch, batch_bytes: int = 2048):
    from forensics import fastpath_stream, ingest
    from forensics.options import Options

    monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0 if streamed else 1 << 62)
    monkeypatch.setattr(fastpath_stream, "MAX_READINGS", 1 << 62)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", batch_bytes)
    src = Source.open(path)
    info, results = ingest.parse_one(src, Options(tz="UTC"))
    return info, results


def _same_parse(path: Path, monkeypatch, batch_bytes: int = 2048, sort_events: bool = False) -> None:
    from forensics.schema import EVENTS_SCHEMA, SAMPLES_SCHEMA, conform

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


def _big_csv(tmp_path: Path) -> Path:
    """An nvidia-smi CSV with what real ones hold besides rows: repeated headers, a shell prompt, a
    driver error, blank lines, a cut row, placeholders, CRLF lines, a second query's header."""
    head = "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB]"
    lines = [head]
    for i in range(3000):
        ts = f"2026/10/01 {i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}"
        for g in range(4):
            used = "[N/A]" if (i == 1500 and g == 2) else f"{30000 + g * 100 + (i * 7 + g) % 50} MiB"
            lines.append(f"{ts}, {g}, NVIDIA H100 80GB HBM3, 00000000:{16 + g:02X}:00.0, 81559 MiB, {used}")
        if i == 700:
            lines += ["", head, "$ nvidia-smi --query-gpu=timestamp,index,memory.used --format=csv"]
        if i == 900:
            lines += ["timestamp, index, memory.used [MiB]"]
        if i == 1200:
            lines += [head, "Unable to determine the device handle for GPU 0000:12:00.0: Unknown Error",
                      "2026/10/01 00:20:00.000, 1, NVIDIA H100", "garbage, line, here"]
        if i == 2000:
            lines[-1] += "\r"
    p = tmp_path / "gpu.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("batch_bytes", [700, 5000, 64 << 10])
def test_streamed_nvidia_smi_csv_matches_one_pass(tmp_path, monkeypatch, batch_bytes):
    _same_parse(_big_csv(tmp_path), monkeypatch, batch_bytes)


def test_streamed_parsers_match_one_pass_on_recorded_logs(monkeypatch):
    files = [f for f in sorted((ROOT / "sample_logs").rglob("*")) if f.is_file() and f.suffix != ".md"]
    files += sorted(REALWORLD.glob("*.txt")) if REALWORLD.is_dir() else []
    for f in files:
        try:
            _same_parse(f, monkeypatch)
        except InputError:
            continue
        except AssertionError as e:
            raise AssertionError(f"{f}: {e}") from e


def test_thinning_keeps_lowest_and_highest_of_each_window():
    from forensics.fastpath_stream import thin

    df = pl.DataFrame({"line": range(1, 17), "_sid": [0, 1] * 8, "_i": [i // 2 for i in range(16)],
                       "bytes": [5, 1, 3, 1, 9, 1, None, 2, 4, 2, 4, 7, 1, 7, None, 7]})
    kept = thin(df, 4)["line"].to_list()
    # series 0 (odd lines): windows 5,3,9,None -> 3 (low), 5 (high), 7 (no value); 4,4,1,None -> 13, 9, 15
    # series 1 (even lines): 1,1,1,2 -> 2 (first low), 8 (high); 2,7,7,7 -> 10, 12
    assert kept == [2, 3, 5, 7, 8, 9, 10, 12, 13, 15]
    assert thin(thin(df, 2), 4).equals(thin(df, 4))
