"""Hostile compressed streams (issue 45 D-B1 D-B4): each gzip member read once, in order; a zstd
stream of RLE blocks inflates in bounded pieces."""
from __future__ import annotations

import gzip

import pytest

from hostile_cases import _zstd_rle_bomb

from forensics.io.sources import _Decompressed


def _exact(n: int, unit: bytes) -> bytes:
    b = unit * (n // len(unit))
    return b + b"\n" * (n - len(b))


def _all(path, kind: str) -> tuple[bytes, int]:
    with open(path, "rb") as fh:
        d = _Decompressed(fh, kind)
        parts = []
        biggest = 0
        while piece := d.read(1 << 20):
            parts.append(piece)
            biggest = max(biggest, len(piece))
    return b"".join(parts), biggest


def test_a_member_ending_at_the_output_bound_is_followed_by_the_next_once(tmp_path):
    """D-B1: a member of 8 MiB at >64:1 then a second member: the second was read twice (or forever)."""
    m1 = _exact(8 << 20, b"# padding line of a log\n")
    m2 = b"".join(b"[step %d] allocated: %d MB\n" % (i, 100 + i) for i in range(1000))
    p = tmp_path / "train.log.gz"
    p.write_bytes(gzip.compress(m1) + gzip.compress(m2))
    got, _ = _all(p, "gzip")
    assert got == m1 + m2


def test_two_members_of_a_multiple_of_the_bound(tmp_path):
    m1, m2 = _exact(8 << 20, b"[step 1] allocated: 1 MB\n"), _exact(8 << 20, b"[step 2] allocated: 2 MB\n")
    p = tmp_path / "train.log.gz"
    p.write_bytes(gzip.compress(m1) + gzip.compress(m2))
    got, _ = _all(p, "gzip")
    assert got == m1 + m2


@pytest.mark.hostile_heavy
def test_zstd_rle_blocks_inflate_in_bounded_pieces(tmp_path):
    """D-B4: 640 KB of RLE blocks made 20 GB in pieces of 512 MiB; after the first big piece the rest
    come at most ~8 MiB at a time."""
    p = tmp_path / "a.zst"
    _zstd_rle_bomb(p, ord("A"), 1 << 30)
    with open(p, "rb") as fh:
        d = _Decompressed(fh, "zstd")
        sizes = []
        while piece := d.read(0):
            sizes.append(len(piece))
    assert sum(sizes) == 1 << 30 and max(sizes[1:]) <= 16 << 20


def test_a_compressed_log_is_read_up_to_max_decompressed(tmp_path):
    """A few MB of gzip can hold terabytes: past --max-decompressed the rest is not read, and the
    message names the option; the lines before are analyzed."""
    from hostile_cases import leak_csv

    from forensics.cli import build_options
    from forensics.ingest import load

    text = leak_csv(2000)
    p = tmp_path / "nvidia-smi.csv.gz"
    p.write_bytes(gzip.compress(text.encode(), mtime=0))
    limit = len(text) // 4
    bundle = load([str(p)], build_options(["UTC"], None, None, None, max_decompressed=str(limit)))
    msg = " ".join(bundle.problems)
    assert "gzip stream too big" in msg and "(--max-decompressed)" in msg and "pass --max-decompressed" in msg
    assert 0 < bundle.samples.height < 2000
    assert not load([str(p)], build_options(["UTC"], None, None, None)).problems


@pytest.mark.parametrize("limit", [1000, 4 << 20])   # within a piece, at a piece's end
def test_the_decompressed_budget_gives_the_bytes_up_to_it_then_the_error(tmp_path, limit):
    from forensics.io.sources import TooMuchDecompressed

    p = tmp_path / "a.gz"
    p.write_bytes(gzip.compress(b"x" * (12 << 20), mtime=0))
    got = b""
    with open(p, "rb") as fh:
        d = _Decompressed(fh, "gzip", limit)
        with pytest.raises(TooMuchDecompressed):
            while piece := d.read(1 << 20):
                got += piece
    assert got == b"x" * limit


def _lines_of(path, batch_bytes: int):
    from forensics.io import lines
    from forensics.io.sources import Source

    stats = lines.ReadStats()
    frames = list(lines.raw_batches(Source.open(path, str(path)), stats, batch_bytes))
    return [(ln, t) for f in frames for ln, t in f.iter_rows()], stats.nuls, stats.lines


def test_a_sparse_file_reads_as_its_nuls_without_reading_its_holes(tmp_path):
    """sparse_20GB: a file of holes took 40 s to read as NULs. Its holes are skipped and counted now;
    the lines, NUL count and line numbers are those of the same bytes written out, even where a line
    (or a partial line the reader reads again) spans a hole."""
    import random

    rnd = random.Random(45)
    sparse, dense = tmp_path / "sparse" / "train.log", tmp_path / "dense" / "train.log"
    sparse.parent.mkdir()
    dense.parent.mkdir()
    block = 4096
    with open(sparse, "wb") as s, open(dense, "wb") as d:
        for k in range(60):
            text = b"".join(b"[step %d] allocated: %d MB\n" % (rnd.randrange(10**6), rnd.randrange(100))
                            for _ in range(rnd.randrange(0, 150)))[: rnd.randrange(1, 3 * block)]
            at = k * 4 * block + rnd.choice([0, block - 7])
            for fh in (s, d):
                fh.seek(at)
                fh.write(text)
        s.truncate(60 * 4 * block + 3 * block)
        d.seek(60 * 4 * block + 3 * block - 1)
        d.write(b"\0")
    if sparse.stat().st_blocks * 512 >= sparse.stat().st_size:
        pytest.skip("this file system keeps no holes")
    for batch in (3000, 10_000, 1 << 20):
        got = _lines_of(sparse, batch)
        assert got == _lines_of(dense, batch) and got[1] > 0


@pytest.mark.parametrize("size", [64 << 20, pytest.param(20 << 30, marks=pytest.mark.hostile_heavy)])
def test_a_file_of_one_hole_is_only_nuls(tmp_path, size):
    from forensics import ingest
    from forensics.io.sources import Source
    from forensics.options import Options

    p = tmp_path / "kern.log"
    with open(p, "wb") as fh:
        fh.truncate(size)
    if p.stat().st_blocks:
        pytest.skip("this file system keeps no holes")
    info, _ = ingest.parse_one(Source.open(p, str(p)), Options(tz="UTC"))
    assert info.format is None and f"it holds only NUL bytes ({size})" in info.problems[0]


@pytest.mark.hostile_heavy
def test_a_zstd_stream_of_one_long_line_stays_in_bounded_memory(tmp_path):
    """bombs/zstd_rle_A_20GB ended "out of memory" at 5.3 GB: the decompressing thread's output, in
    128 KiB pieces joined per call, piled up (2 GB of one line: 6.3 GB held)."""
    import resource
    import subprocess
    import sys

    d = tmp_path / "job"
    d.mkdir()
    _zstd_rle_bomb(d / "train.log.zst", ord("A"), 2 << 30)
    out = subprocess.run([sys.executable, "-m", "forensics", "report", str(d), "-o", str(tmp_path / "r.html")],
                         capture_output=True, text=True, timeout=300)
    assert "1 line too long" in out.stderr and "Traceback" not in out.stderr
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10 < 1500


@pytest.mark.parametrize("byte", [ord("A"), ord("\n")])
def test_zstd_rle_blocks_inflate_in_bounded_pieces_from_the_first(tmp_path, byte):
    """bombs/zstd_rle_nl_20GB: the first 16 KiB of RLE blocks came out as one piece of 512 MiB (of
    newlines: half a billion lines for the head to split, 5.3 GB held for 1 GB of them)."""
    p = tmp_path / "a.zst"
    _zstd_rle_bomb(p, byte, 64 << 20)
    got, biggest = _all(p, "zstd")
    assert len(got) == 64 << 20 and biggest <= 16 << 20
