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

    from forensics.parsers.nvsmi import csvlog as nvsmi_csv

    monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0 if streamed else 1 << 62)
    monkeypatch.setattr(fastpath_stream, "MAX_READINGS", 1 << 62)
    # the one-pass reference reads every row by read_cells (the in-memory read_plain has its own test)
    monkeypatch.setattr(nvsmi_csv, "PLAIN_MIN_ROWS", 1 << 62)
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
    files += sorted(REALWORLD.rglob("*.txt"))
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



# -- the plain nvidia-smi CSV path (nvsmi_csv.read_plain, _NvsmiCsv._take_plain) -------------------

def _plain_csv(tmp_path: Path, name: str = "plain.csv", head: str | None = None, rows: int = 1500, gpus: int = 4,
               row=None, extra=None, eol: str = "\n") -> Path:
    """A clean looped `--query-gpu` log; `row(i, g)` may change a row, `extra(i)` add lines after sample i."""
    head = head or "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB], utilization.gpu [%]"
    lines = [head]
    for i in range(rows):
        ts = f"2026/10/{1 + i // 86400:02d} {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{(i * 37) % 1000:03d}"
        for g in range(gpus):
            text = (f"{ts}, {g}, NVIDIA H100 80GB HBM3, 00000000:{16 + g:02X}:00.0, 81559 MiB, "
                    f"{30000 + g * 100 + (i * 7 + g) % 50 + (i // 10 if g == 1 else 0)} MiB, {(i + g) % 100} %")
            text = row(i, g, text) if row else text
            if text is not None:
                lines.append(text)
        if extra:
            lines += extra(i)
    p = tmp_path / name
    p.write_bytes((eol.join(lines) + eol).encode("utf-8", errors="surrogateescape"))   # \udcff: the byte 0xff
    return p


def _plain_variants(tmp_path: Path) -> dict[str, Path]:
    uuid_head = "timestamp, uuid, memory.used [MiB], memory.total [MiB]"

    def uuid_row(i, g, text):
        return f"{text.split(', ')[0]}, GPU-{g:08x}-aaaa-bbbb-cccc-dddddddddddd, {30000 + (i * 3 + g) % 77} MiB, 81559 MiB"

    # a longer query: the cells the path does not read (memory.free, utilization, temperature) are left
    # out when cutting, so a fault there is seen only by counting the commas in the bytes
    wide_head = ("timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
                 "utilization.gpu [%], temperature.gpu")

    def wide(change=None):
        def row(i, g, text):
            cells = text.split(", ")
            text = ", ".join([*cells[:6], "20000 MiB", cells[6], str(40 + g)])
            return change(i, g, text) if change else text
        return row

    return {
        "wide": _plain_csv(tmp_path, "wide.csv", head=wide_head, rows=400, row=wide()),
        "wide_extra_cell": _plain_csv(tmp_path, "wide_cell.csv", head=wide_head, rows=400, row=wide(
            lambda i, g, t: t + ", 5" if i == 100 and g == 3 else t)),
        "wide_short": _plain_csv(tmp_path, "wide_short.csv", head=wide_head, rows=400, row=wide(
            lambda i, g, t: t.rsplit(", ", 1)[0] if i == 150 and g == 2 else t)),
        "wide_no_comma_space": _plain_csv(tmp_path, "wide_comma.csv", head=wide_head, rows=400, row=wide(
            lambda i, g, t: ",".join(t.rsplit(", ", 1)) if i == 200 and g == 1 else t)),
        "wide_bad_utf8": _plain_csv(tmp_path, "wide_utf8.csv", head=wide_head, rows=400, row=wide(
            lambda i, g, t: t.replace(" %", "\udcff%") if i == 250 and g == 0 else t)),
        # one row a cell short, the next one a cell over: as many commas in the batch as if all were right
        "wide_balanced": _plain_csv(tmp_path, "wide_balanced.csv", head=wide_head, rows=400, row=wide(
            lambda i, g, t: t.rsplit(", ", 1)[0] if i == 300 and g == 0 else t + ", 5" if i == 300 and g == 1
            else t)),
        "clean": _plain_csv(tmp_path, "clean.csv"),
        "crlf": _plain_csv(tmp_path, "crlf.csv", eol="\r\n"),
        "uuid": _plain_csv(tmp_path, "uuid.csv", head=uuid_head, row=uuid_row),
        "no_total": _plain_csv(tmp_path, "nototal.csv", head="timestamp, index, memory.used [MiB]",
                               row=lambda i, g, t: ", ".join(t.split(", ")[i] for i in (0, 1, 5))),
        # a GPU drops out for a while: the rows no longer repeat with the number of GPUs
        "gpu_gone": _plain_csv(tmp_path, "gone.csv", row=lambda i, g, t: None if g == 2 and 300 < i < 700 else t),
        # GPUs listed in another order now and then
        "order": _plain_csv(tmp_path, "order.csv", row=lambda i, g, t: t.replace(f", {g}, ", f", {3 - g}, ")
                            if i % 97 == 5 else t),
        "placeholder": _plain_csv(tmp_path, "na.csv", row=lambda i, g, t: t.replace("81559 MiB", "[N/A]")
                                  if i == 900 and g == 0 else t),
        "gib": _plain_csv(tmp_path, "gib.csv", row=lambda i, g, t: t.replace("81559 MiB", "79.6 GiB")
                          if i == 1100 else t),
        "no_comma_space": _plain_csv(tmp_path, "comma.csv", row=lambda i, g, t: t.replace(", 81559", ",81559")
                                     if i == 400 and g == 1 else t),
        "extra_cell": _plain_csv(tmp_path, "cell.csv", row=lambda i, g, t: t + ", 5" if i == 800 and g == 3 else t),
        "odd_stamps": _plain_csv(tmp_path, "stamps.csv", row=lambda i, g, t: t.replace(".", ".5", 1) if i == 600 else
                                 t.replace(t[17:19], "60", 1) if i == 601 else t[:19] + t[23:] if i == 602 else t),
        "bad_id": _plain_csv(tmp_path, "id.csv", row=lambda i, g, t: t.replace(f", {g}, ", ", x, ") if i == 1200 else t),
        "noise": _plain_csv(tmp_path, "noise.csv", extra=lambda i: (
            ["", "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB], utilization.gpu [%]"]
            if i == 500 else ["Unable to determine the device handle for GPU 0000:12:00.0: Unknown Error"]
            if i == 1000 else [])),
        "bad_utf8": _plain_csv(tmp_path, "utf8.csv", row=lambda i, g, t: t.replace("H100", "H1\udcff0")
                               if i == 700 and g == 0 else t),
        # one GPU's ids or memory.total other on one row (the ids right after the stamp: nvsmi_csv.id_prefix
        # must see it, in the lines, since those cells are then not cut)
        "bus_changes": _plain_csv(tmp_path, "bus.csv", rows=400, row=lambda i, g, t:
                                  t.replace(":12:00.0", ":13:00.0") if i == 300 and g == 2 else t),
        "name_changes": _plain_csv(tmp_path, "name.csv", rows=400, row=lambda i, g, t:
                                   t.replace("H100", "H200") if i == 300 and g == 1 else t),
        "total_changes": _plain_csv(tmp_path, "total.csv", rows=400, row=lambda i, g, t:
                                    t.replace("81559 MiB", "81558 MiB") if i >= 350 and g == 0 else t),
        "ids_after_memory": _plain_csv(tmp_path, "late_ids.csv", rows=400,
                                       head="timestamp, memory.used [MiB], index, name",
                                       row=lambda i, g, t: ", ".join(t.split(", ")[k] for k in (0, 5, 1, 2))),
        # each GPU its own memory.total (right after the ids: read once per phase from the lines)
        "totals_differ": _plain_csv(tmp_path, "totals.csv", rows=400, row=lambda i, g, t:
                                    t.replace("81559 MiB", f"{81559 - 97 * g} MiB")),
        # 12 GPUs: the ids of GPUs 10 and 11 a character longer than the others'
        "twelve_gpus": _plain_csv(tmp_path, "twelve.csv", rows=300, gpus=12),
        # ... one of them not in MiB on every row (read_cells reads it), or with more after its unit on one
        "gib_gpu": _plain_csv(tmp_path, "gib_gpu.csv", rows=400, row=lambda i, g, t:
                              t.replace("81559 MiB", "79.6 GiB") if g == 1 else t),
        "total_suffix": _plain_csv(tmp_path, "suffix.csv", rows=400, row=lambda i, g, t:
                                   t.replace("81559 MiB,", "81559 MiBx,") if i == 300 and g == 3 else t),
        "short_stamp": _plain_csv(tmp_path, "stamp.csv", rows=400, row=lambda i, g, t:
                                  t[:19] + t[23:] if i == 350 else t),
    }


# the variants whose every batch nvsmi_csv.id_prefix takes (the rest it may decline)
_PREFIX_TAKES = ("clean", "crlf", "uuid", "no_total", "wide", "totals_differ", "gib_gpu", "twelve_gpus")


@pytest.mark.parametrize("batch_bytes", [3000, 64 << 10])
def test_plain_csv_path_matches_one_pass(tmp_path, monkeypatch, batch_bytes):
    """Clean logs go through read_plain, others fall back (a bad cell, a gap, CRLF, ...); the result is
    always parse_lines' own."""
    from forensics.parsers.nvsmi import csvlog as nvsmi_csv

    taken, prefixed = [], []
    real = nvsmi_csv.read_plain
    monkeypatch.setattr(nvsmi_csv, "read_plain", lambda *a: taken.append(real(*a) is not None) or real(*a))
    real_prefix = nvsmi_csv.id_prefix
    monkeypatch.setattr(nvsmi_csv, "id_prefix",
                        lambda text, m: prefixed.append((real_prefix(text, m), text.len())) or prefixed[-1][0])
    for name, p in _plain_variants(tmp_path).items():
        taken.clear()
        prefixed.clear()
        try:
            _same_parse(p, monkeypatch, batch_bytes)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e
        if name in ("clean", "crlf", "uuid", "no_total", "wide", "totals_differ", "twelve_gpus"):
            assert taken and all(taken), name
        if name in ("gpu_gone", "order", "bus_changes", "name_changes", "total_changes", "ids_after_memory"):
            assert any(taken), name   # not periodic, or the ids elsewhere: the ids are read and grouped instead
        if name == "gib_gpu":
            assert taken and not any(taken), name
        if name in _PREFIX_TAKES:   # every batch that holds more than one sample of its GPUs
            gpus = 12 if name == "twelve_gpus" else 4
            assert prefixed and all(got is not None for got, lines in prefixed if lines > gpus), name
        if name in ("gpu_gone", "order", "bus_changes", "name_changes", "total_changes", "ids_after_memory",
                    "short_stamp", "bad_id", "placeholder", "gib", "odd_stamps", "total_suffix"):
            assert any(got is None and lines > 4 for got, lines in prefixed), name


def test_plain_csv_rows_in_memory_are_read_cells_rows(tmp_path, monkeypatch):
    """A file read whole (not streamed) has its clean sections read by read_plain, with or without the
    ids right after the stamp (nvsmi_csv.id_prefix): the same samples, skips, notes, meta and
    messages as read_cells gives; any row that is not clean sends the section to read_cells."""
    from forensics import ingest
    from forensics.options import Options
    from forensics.parsers.nvsmi import csvlog as nvsmi_csv
    from forensics.model import SAMPLES_SCHEMA, conform

    real_plain, real_prefix = nvsmi_csv._read_plain_rows, nvsmi_csv.id_prefix
    taken, prefixed = [], []
    monkeypatch.setattr(nvsmi_csv, "_read_plain_rows", lambda *a: taken.append(real_plain(*a)) or taken[-1])
    monkeypatch.setattr(nvsmi_csv, "id_prefix", lambda *a: prefixed.append(real_prefix(*a)) or prefixed[-1])
    monkeypatch.setattr(nvsmi_csv, "PLAIN_MIN_ROWS", 100)

    def parse(p: Path, plain: bool):
        if not plain:
            monkeypatch.setattr(nvsmi_csv, "PLAIN_MIN_ROWS", 1 << 62)
        info, results = ingest.parse_one(Source.open(p), Options(tz="Europe/Berlin"))
        monkeypatch.setattr(nvsmi_csv, "PLAIN_MIN_ROWS", 100)
        samples = pl.concat([conform(r.samples, SAMPLES_SCHEMA) for r in results])
        return samples, (info.format, info.lines, info.records, info.skip_reasons, info.skip_examples, info.meta,
                         info.notes, info.problems, info.clock)

    variants = _plain_variants(tmp_path)
    variants["dst_fold"] = _plain_csv(tmp_path, "fold.csv", rows=1200, row=lambda i, g, t: (
        f"2026/10/25 {(9600 + 2 * i - (1800 if i > 600 else 0)) // 3600:02d}:"
        f"{(9600 + 2 * i - (1800 if i > 600 else 0)) // 60 % 60:02d}:{i * 2 % 60:02d}.000" + t[23:]))
    ways = {}
    for name, p in variants.items():
        taken.clear()
        prefixed.clear()
        got, want = parse(p, True), parse(p, False)
        assert got[0].equals(want[0]), name
        assert got[1] == want[1], name
        # how its sections were read: after the ids (_cells_after_prefix), cut at every comma
        # (_cells_at_commas), or by read_cells (a row that read_plain does not take)
        ways[name] = {"prefix" if x is not None and t is not None else "commas" if t is not None else "cells"
                      for t, x in zip(taken, prefixed)}
    assert ways == {
        **{k: {"prefix"} for k in ("clean", "crlf", "uuid", "no_total", "wide", "wide_bad_utf8", "totals_differ",
                                    "twelve_gpus", "dst_fold")},
        **{k: {"commas"} for k in ("gpu_gone", "order", "ids_after_memory", "name_changes", "bad_utf8",
                                    "short_stamp", "bus_changes", "total_changes")},
        **{k: {"cells"} for k in ("bad_id", "placeholder", "gib", "no_comma_space", "extra_cell", "odd_stamps",
                                   "wide_extra_cell", "wide_short", "wide_no_comma_space", "wide_balanced",
                                   "total_suffix", "gib_gpu", "noise")},
    }, ways


def _plain_then_general(p, monkeypatch, tz: str) -> list:
    """(samples, info) of parse_one on `p`: first as it runs (the plain path may take it), then with
    read_plain switched off (the general streamed path)."""
    from forensics import ingest
    from forensics.options import Options
    from forensics.parsers.nvsmi import csvlog as nvsmi_csv
    from forensics.model import SAMPLES_SCHEMA, conform

    out = []
    for plain in (True, False):
        if not plain:
            monkeypatch.setattr(nvsmi_csv, "read_plain", lambda *a: None)
        info, results = ingest.parse_one(Source.open(p), Options(tz=tz))
        out.append((pl.concat([conform(r.samples, SAMPLES_SCHEMA) for r in results]), info))
    return out


def test_plain_csv_path_with_a_zone_that_has_dst(tmp_path, monkeypatch):
    """Local stamps through the autumn fold: the plain path localizes as the general streamed path.
    (Both localize batch by batch: across a batch boundary the fold rule does not see the step back,
    which one pass does; known, not the plain path's doing.)"""
    from forensics import fastpath_stream

    def row(i, g, text):
        t = 2 * 3600 + 40 * 60 + i * 2 - (1800 if i > 600 else 0)   # 02:40 .. 03:00, back to 02:30 ..
        return f"2026/10/25 {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}.000" + text[23:]

    p = _plain_csv(tmp_path, row=row)
    monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", 4000)
    out = [(samples.sort("line", "series"), info.skip_reasons, info.problems)
           for samples, info in _plain_then_general(p, monkeypatch, "Europe/Berlin")]
    assert out[0][0].equals(out[1][0]) and out[0][1:] == out[1][1:]


def test_plain_csv_path_thins_as_the_general_path(tmp_path, monkeypatch):
    """With thinning, read_plain + _take_plain keep exactly the rows the general path keeps."""
    from forensics import fastpath_stream

    p = _plain_csv(tmp_path, rows=3000, row=lambda i, g, t: None if g == 3 and 1000 < i < 1400 else t)
    monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(fastpath_stream, "MAX_READINGS", 1500)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", 20000)
    (a, ia), (b, ib) = [(samples.sort("line"), info) for samples, info in _plain_then_general(p, monkeypatch, "UTC")]
    assert ia.meta["thinned"]["window"] > 1
    assert a.equals(b)
    assert (ia.lines, ia.records, ia.skip_reasons, ia.meta, ia.notes) == (ib.lines, ib.records, ib.skip_reasons,
                                                                        ib.meta, ib.notes)


def test_plain_stamps_match_strptime():
    from forensics.parsers.nvsmi import csvlog as nvsmi_csv

    stamps = ["2026/10/01 00:00:00.473", "2024/02/29 23:59:59.999", "2026/02/29 00:00:00.000", "2026/13/01 00:00:00.000",
              "2026/10/01 24:00:00.000", "2026/10/01 00:60:00.000", "1969/12/31 23:59:59.999"]
    for extra in ([], ["2026/10/01 00:00:60.000"], [" 2026/10/01 00:00:01.5"], ["2026/10/01 00:00:01"], ["garbage"]):
        s = pl.Series("t", stamps + extra)
        want = s.str.strip_chars().str.strptime(pl.Datetime("us"), nvsmi_csv._TS_FORMAT, strict=False)
        assert nvsmi_csv._stamps(s).equals(want), extra


def test_streaming_consumers_are_keyed_by_parser_names():
    """A consumer under a name no parser has is never used: its format's big files are read whole."""
    from forensics import fastpath_stream
    from forensics import parsers

    assert set(fastpath_stream._CONSUMERS) <= set(parsers.BY_NAME)
    for name in ("nvidia-smi-csv", "kernel-log", "nvrm-xid"):
        assert name in fastpath_stream._CONSUMERS, name


def test_csv_batches_prepared_ahead_with_a_header_that_changes(tmp_path, monkeypatch):
    """The next batches' cells are read in threads with the header in force when they were read; a
    batch whose header has changed by its turn is read again (the result is one pass's)."""
    from forensics import fastpath_stream

    stale, used = [], []
    real_feed = fastpath_stream._NvsmiCsv.feed

    def feed(self, batch, raw=None, prepared=None):
        if prepared is not None:
            (used if prepared[0] == self.map else stale).append(int(batch["line"][0]))
        return real_feed(self, batch, raw, prepared)

    monkeypatch.setattr(fastpath_stream._NvsmiCsv, "feed", feed)
    _same_parse(_big_csv(tmp_path), monkeypatch, 5000)
    assert used and stale   # both branches taken: the header changes at sample 900


def test_first_csv_batches_are_read_in_threads_too(tmp_path, monkeypatch):
    """Before the first batch is taken, its first line (the header) gives the map the next batches are
    read with in threads, the first batch's other rows included; the result is one pass's."""
    import threading

    from forensics import fastpath_stream

    monkeypatch.setattr(fastpath_stream, "PREPARED_BATCH_BYTES", 20000)
    where = {}
    real = fastpath_stream._NvsmiCsv._prepared

    def prepared(self, batch, raw, m):
        where[int(batch["line"][0])] = threading.current_thread() is threading.main_thread()
        return real(self, batch, raw, m)

    monkeypatch.setattr(fastpath_stream._NvsmiCsv, "_prepared", prepared)
    _same_parse(_plain_csv(tmp_path, rows=1500), monkeypatch, 20000)
    # line 1, the header, is read alone by the main thread (as a slow-path line: no cells to prepare)
    assert len(where) > 3 and where[2] is False and not any(v for line, v in where.items() if line > 1)


@pytest.mark.parametrize("columns", ["memory.used [MiB], memory.free [MiB]", "memory.free [MiB]"])
def test_streamed_thinning_equals_thinning_the_whole_series(tmp_path, monkeypatch, columns):
    """Logs the general path reads (placeholders among the readings; memory.free alone is its own
    series): each series thinned batch by batch keeps exactly what thinning it whole with the final
    window keeps, and every reading has the sample number one pass gives it."""
    from forensics import fastpath_stream
    from forensics import ingest
    from forensics.options import Options
    from forensics.model import SAMPLES_SCHEMA, conform

    head = f"timestamp, index, {columns}"

    def row(i, g, text):
        used = "[N/A]" if (i * 7 + g) % 53 == 0 else f"{30000 + (i * 7919 + g * 104729) % 997} MiB"
        cells = [text.split(", ")[0], str(g), used] + ([f"{50000 - (i * 31 + g) % 211} MiB"] if "used" in columns else [])
        return ", ".join(cells)

    p = _plain_csv(tmp_path, head=head, rows=2500, gpus=3, row=row)

    def samples(streamed: bool) -> tuple[pl.DataFrame, dict]:
        monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0 if streamed else 1 << 62)
        monkeypatch.setattr(fastpath_stream, "MAX_READINGS", 2000 if streamed else 1 << 62)
        monkeypatch.setattr(fastpath, "BATCH_BYTES", 9000)
        info, results = ingest.parse_one(Source.open(p), Options(tz="UTC"))
        return pl.concat([conform(r.samples, SAMPLES_SCHEMA) for r in results]), info.meta

    thinned, meta = samples(True)
    whole, _ = samples(False)
    window = meta["thinned"]["window"]
    assert window >= 4 and thinned["bytes"].null_count()
    assert set(thinned["series"]) == {"memory.used" if "used" in columns else "memory.free"}
    sid = pl.col("gpu").rank("dense").cast(pl.Int64) * 2 + (pl.col("series") == "memory.free").cast(pl.Int64)
    whole = whole.sort("line", "series").with_columns(sid.alias("_sid"))
    whole = whole.with_columns(pl.int_range(pl.len()).over("_sid").alias("_i"))
    expected = fastpath_stream.thin(whole, window).drop("_sid", "_i")
    assert thinned.sort("line", "series").equals(expected.select(thinned.columns))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_periodic_numbering_matches_the_general_one(data):
    """_NvsmiCsv._number's shortcut for batches that list the same GPUs in the same order gives the
    sample numbers, series indexes, kept readings and carried counts of its general path, batch after
    batch (batches that start mid-sample, windows that end mid-batch, repeated values)."""
    import numpy as np

    from forensics import fastpath_stream

    period = data.draw(st.integers(1, 9), label="gpus")
    window = data.draw(st.sampled_from([1, 2, 3, 4, 8, 16]), label="window")
    ids = np.array(data.draw(st.permutations(range(period + 3)), label="ids")[:period], dtype=np.int64)
    sizes = data.draw(st.lists(st.integers(1, 60), min_size=1, max_size=6), label="batch sizes")
    values = data.draw(st.lists(st.integers(0, 5), min_size=sum(sizes), max_size=sum(sizes)), label="values")
    gid_all = np.tile(ids, -(-sum(sizes) // period) + 1)[data.draw(st.integers(0, period - 1), label="phase"):]

    def run(shortcut: bool):
        c = fastpath_stream._NvsmiCsv.__new__(fastpath_stream._NvsmiCsv)
        c.per_gpu, c.per_series, c.seq_max, c.readings, c.window = {}, {}, 0, 0, window
        out, at = [], 0
        for n in sizes:
            gid, value = gid_all[at:at + n], np.array(values[at:at + n], dtype=np.int64)
            at += n
            if not shortcut:
                fastpath_stream._period, saved = (lambda g: None), fastpath_stream._period
            try:
                seq, index, keep = c._number(gid, gid * 2, np.zeros(n, dtype=bool), value)
            finally:
                if not shortcut:
                    fastpath_stream._period = saved
            out.append((seq.tolist(), index.tolist(), None if keep is None else keep.tolist()))
        return out, (c.per_gpu, c.per_series, c.seq_max, c.readings)

    assert run(True) == run(False)


def test_periodic_numbering_takes_only_periodic_batches():
    import numpy as np

    from forensics.fastpath_stream import _period

    assert _period(np.array([3, 1, 2, 3, 1, 2, 3])) == 3
    assert _period(np.array([5, 5, 5])) == 1
    assert _period(np.array([3, 1, 2, 3, 2, 1])) is None       # another order in the second sample
    assert _period(np.array([3, 1, 3, 1, 2, 3, 1])) is None    # a GPU missing from a sample
    assert _period(np.array([3, 1, 1, 3, 1, 1])) is None       # a GPU twice in a sample
    assert _period(np.array([3, 1, 2])) is None                 # not longer than one sample


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
from forensics.parsers.steplog import markers, reader

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20

what, own = sys.argv[1], sys.argv[2] == "own"
if not own:
    fs._own = reader._copied = lambda df: df
consumer = {"step": lambda: markers.Reader(None, None), "kernel": lambda: fs._Kernel(None, None, None),
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
