"""The kernel reader (forensics/parsers/kernel/reader.py) gives the same result however its input
comes: the whole file as one batch, batches of 1 or 7 lines, or bytes (kernel/blocks.py) in batches of
any size, compressed or not."""
from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from conftest import REALWORLD, SAMPLE_LOGS
from forensics import ingest, parsers
from forensics.parsers import scanners as scanning
from forensics.errors import InputError
from forensics.io import lines
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.kernel import blocks
from forensics.parsers.kernel.reader import KernelReader

OPTS = Options(tz="UTC")
KERNEL_FORMATS = ("kernel-log", "nvrm-xid")


_SCANNER_LINES = [
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "[STEP 120] ALLOCATED: 2048.5 MB, Cached: 4096 MB",
    "Iteration 7 | Reserved=3.2 GB",
    "|  Allocated memory      |   1024 MB  |   2048 MB  |",
    "========= Leaked 1024 bytes at 0x7f00 on the device",
    "GPU: 2798.0/11011.5 MiB",
    "torch.cuda.memory_allocated(0) 318986240",
    "Free GPU ram: 12800.5",
]


def _oom(pid: int) -> list[str]:
    return [
        "python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
        f"CPU: 17 PID: {pid} Comm: python3 Tainted: P           OE     5.15.0-105-generic #115-Ubuntu",
        "Call Trace:",
        " <TASK>",
        " dump_stack_lvl+0x4a/0x63",
        " </TASK>",
        "Tasks state (memory values in pages):",
        "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
        "[    812]     0   812    72000    24000      196608        0             0 systemd-journal",
        *[f"[{900 + i:>7}]     0 {900 + i:>5}     3000     1000        40960        0             0 worker{i}"
          for i in range(30)],
        f"[{pid:>7}]  1000 {pid:>5} 43000000 14000000  114688000        0             0 python3",
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,"
        f"task_memcg=/user.slice,task=python3,pid={pid},uid=1000",
        f"Out of memory: Killed process {pid} (python3) total-vm:172000000kB, anon-rss:56000000kB, "
        "file-rss:74816kB, shmem-rss:12296kB, UID:1000 pgtables:112000kB oom_score_adj:0",
        f"oom_reaper: reaped process {pid} (python3), now anon-rss:0kB, file-rss:74732kB, shmem-rss:12296kB",
    ]


_ORDINARY = [
    "eth0: NIC Link is Up 100 Gbps, Flow Control: ON - receive & transmit",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
    "usb 3-1: new SuperSpeed USB device number 4 using xhci_hcd",
    "docker0: port 3(veth1a2b) entered forwarding state",
]


def _kern_log(seed: int, n: int = 1500, oom_at=(), scanner_every: int = 0, month_change: bool = True,
              crlf: bool = False, extra: dict | None = None) -> bytes:
    """A syslog kern.log: ordinary lines, OOM reports starting at the given line indexes, NVRM Xids,
    a Dec -> Jan change, lines for the free-text scanners."""
    rng = random.Random(seed)
    msgs: list[str] = []
    for i in range(n):
        if i in oom_at:
            msgs += _oom(40000 + i)
        if scanner_every and i % scanner_every == scanner_every - 1:
            msgs.append(rng.choice(_SCANNER_LINES))
        if i % 400 == 399:
            msgs.append("NVRM: Xid (PCI:0000:48:00): 43, pid=4242, name=python3, Ch 00000008")
        msgs.append(rng.choice(_ORDINARY))
    out = []
    up = 3 * 86400.0
    for i, m in enumerate(msgs):
        frac = i / len(msgs)
        mon, day = ("Dec", 31) if (month_change and frac < 0.6) else ("Jan", 1)
        if not month_change:
            mon, day = "Oct", 4
        up += 0.37
        sec = int(up) % 86400
        line = f"{mon} {day:>2} {sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} gpunode07 kernel: [{up:12.6f}] {m}"
        if extra and i in extra:
            line = extra[i]
        out.append(line + ("\r" if crlf and i % 3 == 0 else ""))
    return ("\n".join(out) + "\n").encode()


CASES = {
    "plain": dict(oom_at=(300, 1100)),
    "oom_first_line": dict(oom_at=(0,)),
    "oom_last_lines": dict(oom_at=(1499,)),
    "no_month_change": dict(oom_at=(700,), month_change=False),
    "scanners": dict(oom_at=(500,), scanner_every=37),
    "crlf": dict(oom_at=(200,), crlf=True, scanner_every=90),
    "odd_lines": dict(oom_at=(800,), extra={
        5: "", 6: "   ", 7: "no prefix at all", 900: "Dec 31 10:00:00 gpunode07 kernel: [  1.000000] ſtep 5 allocated: 3 MB",
        901: "Dec 31 10:00:00 gpunode07 kernel: [  2.000000] caf\u00e9 \ufffd replacement char"}),
}




def _lines_of(path: Path, size: int | None):
    """(primary, found, source) with the lines fed in batches of `size` lines (None: all at once)."""
    src = Source.open(path)
    module, _ = parsers.claim(src.head())
    assert module is not None and module.name in KERNEL_FORMATS
    frame = src.frame()
    reader = KernelReader(src, OPTS)
    scanners = scanning.Scanners({module.name, *module.covers})
    step = size or max(frame.height, 1)
    for off in range(0, max(frame.height, 1), step):
        batch = frame.slice(off, step)
        reader.feed(batch)
        scanners.feed(batch)
    return reader.finish(), scanners.finish(src, OPTS), src


def _bytes_of(path: Path, monkeypatch, batch_bytes: int, block: int):
    """The same through ingest's streamed reading, whose kernel batches are bytes (kernel/blocks.py)."""
    monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(lines, "BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(lines, "NEWLINE_PIECE", block)   # the blocks' size
    used = []
    orig = KernelReader.feed_raw

    def feed_raw(self, rb, sc):
        used.append(rb.height)
        return orig(self, rb, sc)
    monkeypatch.setattr(KernelReader, "feed_raw", feed_raw)
    src = Source.open(path)
    module, _ = parsers.claim(src.head())
    try:
        primary, found = ingest.read_source(src, module, OPTS)
    finally:
        monkeypatch.undo()
    return primary, found, src, used


def _same(a, b) -> None:
    (p1, f1, s1), (p2, f2, s2) = a[:3], b[:3]
    assert_frame_equal(p2.samples, p1.samples)
    assert_frame_equal(p2.events, p1.events)
    assert (p2.skipped.counts, p2.skipped.examples) == (p1.skipped.counts, p1.skipped.examples)
    assert (p2.notes, p2.meta, p2.clock) == (p1.notes, p1.meta, p1.clock)
    assert len(f2) == len(f1)
    for x, y in zip(f1, f2):
        assert_frame_equal(y.samples, x.samples)
        assert_frame_equal(y.events, x.events)
        assert y.notes == x.notes
    assert (s2.line_count, s2.decode_errors, s2.nul_bytes, s2.problems) == \
        (s1.line_count, s1.decode_errors, s1.nul_bytes, s1.problems)
    assert (s2.skipped.counts, s2.skipped.examples) == (s1.skipped.counts, s1.skipped.examples)


def _kernel_samples() -> list[Path]:
    files = [f for f in sorted(SAMPLE_LOGS.rglob("*")) if f.is_file() and f.suffix != ".md"]
    files += sorted(REALWORLD.rglob("*.txt"))
    out = []
    for f in files:
        try:
            src = Source.open(f)
            module, _ = parsers.claim(src.head())
        except InputError:
            continue
        if module is not None and module.name in KERNEL_FORMATS and src.encoding == "utf-8":
            out.append(f)
    return out


KERNEL_SAMPLES = _kernel_samples()


def test_there_are_kernel_samples():
    assert len(KERNEL_SAMPLES) >= 20


@pytest.mark.parametrize("size", [1, 7])
def test_kernel_samples_read_in_batches_of_lines(size):
    for f in KERNEL_SAMPLES:
        try:
            _same(_lines_of(f, None), _lines_of(f, size))
        except AssertionError as e:
            raise AssertionError(f"{f}: {e}") from e


def test_kernel_samples_read_from_bytes(monkeypatch):
    for f in KERNEL_SAMPLES:
        try:
            got = _bytes_of(f, monkeypatch, 2048, 512)
            if Source.open(f).wrapper is None:
                assert got[3], "the bytes were not read as blocks"
            _same(_lines_of(f, None), got)
        except AssertionError as e:
            raise AssertionError(f"{f}: {e}") from e


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("size", [1, 7])
def test_generated_kernel_log_in_batches_of_lines(tmp_path, case, size):
    path = tmp_path / "kern.log"
    path.write_bytes(_kern_log(7, **CASES[case]))
    _same(_lines_of(path, None), _lines_of(path, size))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("batch_bytes,block", [(3000, 512), (20000, 4096), (1 << 20, 1 << 18)])
def test_generated_kernel_log_from_bytes(tmp_path, monkeypatch, case, batch_bytes, block):
    path = tmp_path / "kern.log"
    path.write_bytes(_kern_log(7, **CASES[case]))
    got = _bytes_of(path, monkeypatch, batch_bytes, block)
    assert got[3], "the bytes were not read as blocks"
    _same(_lines_of(path, None), got)


@pytest.mark.parametrize("batch_bytes", [3000, 50000])
def test_no_final_newline_and_compressed(tmp_path, monkeypatch, batch_bytes):
    data = _kern_log(3, oom_at=(1490,), scanner_every=50).rstrip(b"\n")
    plain = tmp_path / "kern.log"
    plain.write_bytes(data)
    _same(_lines_of(plain, None), _bytes_of(plain, monkeypatch, batch_bytes, 1024))
    gz = tmp_path / "kern.log.gz"
    gz.write_bytes(gzip.compress(data))
    _same(_lines_of(gz, None), _bytes_of(gz, monkeypatch, batch_bytes, 1024))


@pytest.mark.parametrize("bad", [b"\xff\xfe broken utf-8", b"a \x00 NUL", b"\xef\xbb\xbfBOM inside",
                                 b"x" * 3000, b"caf\xc3\xa9 \xef\xbf\xbd"])
def test_odd_bytes_are_read_as_lines(tmp_path, monkeypatch, bad):
    """A batch with bytes that blocks are not read from (or an over-long line for its blocks) is read as
    lines: still the same result."""
    data = _kern_log(5, oom_at=(600,), scanner_every=80)
    rows = data.split(b"\n")
    rows[650] = rows[650] + b" " + bad
    rows[10] = bad
    rows[-2] = rows[-2] + bad   # in the last batch, handed out after the reader has finished
    path = tmp_path / "kern.log"
    path.write_bytes(b"\n".join(rows))
    _same(_lines_of(path, None), _bytes_of(path, monkeypatch, 20000, 1024))


def test_a_log_with_nothing_to_keep_says_what_was_only_counted(tmp_path):
    path = tmp_path / "kern.log"
    path.write_bytes(_kern_log(1, n=1500, month_change=False))
    p, _, src = _lines_of(path, None)
    assert src.line_count > 2 * 200
    assert any("were only counted" in n for n in p.notes), p.notes
    small = tmp_path / "short.log"
    small.write_bytes(_kern_log(1, n=50, month_change=False))
    assert not any("only counted" in n for n in _lines_of(small, None)[0].notes)


def test_raw_batch_line_numbers_match_the_reader():
    """RawBatch counts lines as parse_buffer cuts them (blank lines, CRs, a last line without newline)."""
    for data in [b"\n\na\n", b"a\r\n\r\n\rb\n", b"x\ny", b"\n", b"one line", b"a\nb\n\n\n"]:
        end = len(data)
        reader = blocks.Reader(None, [], False)
        import concurrent.futures
        reader.pool = concurrent.futures.ThreadPoolExecutor(1)
        rb = reader._parse(data, end, 10, lines.ReadStats())
        ref = lines.parse_buffer(data, end, 10, lines.ReadStats())
        assert rb.height == ref.height, data
        assert_frame_equal(rb.frame(), ref)
        assert_frame_equal(rb.tail(2), ref.tail(2))
        assert rb.first_text() == ref["text"][0]
        reader.pool.shutdown()


