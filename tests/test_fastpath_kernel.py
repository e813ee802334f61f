"""A big kernel log read from its bytes (fastpath_kernel.py) gives what reading all its lines gives."""
from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from conftest import REALWORLD
from forensics.io import lines as fastpath
from forensics.parsers.kernel import blocks as fastpath_kernel
from forensics import fastpath_stream
from forensics import parsers
from forensics.errors import InputError
from forensics.options import Options
from forensics.io.sources import Source

ROOT = Path(__file__).resolve().parent.parent


def _scan_hints() -> list[str]:
    return [m.SCAN_HINT for m in parsers.SCANNERS]


def test_every_scanner_hint_has_block_literals():
    # a changed hint silently turns the fast path off: update fastpath_kernel._BLOCK_LITERALS with it
    assert fastpath_kernel.block_prefilter(fastpath_stream._KERNEL_HINT, _scan_hints()) is not None


def _text_lines():
    files = [f for f in sorted((ROOT / "sample_logs").rglob("*")) if f.is_file()]
    files += sorted((ROOT / "tests").rglob("*.txt")) + sorted((ROOT / "tests").rglob("*.log"))
    files += sorted(REALWORLD.rglob("*.txt"))
    for f in files:
        for line in f.read_bytes().decode("utf-8", "replace").splitlines():
            yield line
    yield from _SCANNER_LINES


def test_block_literals_hold_every_hinted_line():
    """Every ASCII line that the kernel hint, a scanner's prefilter or its hint matches holds one of
    the block literals (lowercased) or a `|`."""
    regexes, pipe = fastpath_kernel.block_prefilter(fastpath_stream._KERNEL_HINT, _scan_hints())
    hints = [fastpath_stream._KERNEL_HINT, *_scan_hints(), *(fastpath_stream._prefilter(h) for h in _scan_hints())]
    lines = pl.DataFrame({"text": list(_text_lines())}).filter(pl.col("text").str.len_bytes() == pl.col("text").str.len_chars())
    hinted = lines.filter(pl.any_horizontal([pl.col("text").str.contains(h) for h in hints]))
    assert hinted.height > 100
    low = pl.col("text").str.to_lowercase()
    held = pl.any_horizontal([low.str.contains(r) for r in regexes]) | (pl.col("text").str.contains("|", literal=True) & pipe)
    missed = hinted.filter(~held)
    assert missed.height == 0, missed["text"].to_list()[:5]


# -- the same result as the general path ------------------------------------------------------------

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


def _run(path: Path, raw: bool, monkeypatch, batch_bytes: int, block: int):
    monkeypatch.setattr(fastpath_stream, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(fastpath, "BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(fastpath_kernel, "BLOCK", block)
    used = []
    if not raw:
        monkeypatch.setattr(fastpath_stream._Kernel, "raw_reader", lambda self, sc: None)
    else:
        orig = fastpath_stream._Kernel.feed_raw

        def feed_raw(self, rb, sc):
            used.append(rb.height)
            return orig(self, rb, sc)
        monkeypatch.setattr(fastpath_stream._Kernel, "feed_raw", feed_raw)
    src = Source.open(path)
    module, _ = parsers.claim(src.head())
    assert module is not None and module.NAME in ("kernel-log", "nvrm-xid")
    covered = {module.NAME, *getattr(module, "COVERS", ())}
    try:
        primary, found = fastpath_stream.parse_streamed(src, module, Options(tz="UTC"), covered)
    finally:
        monkeypatch.undo()
    return primary, found, src, used


def _same(path: Path, monkeypatch, batch_bytes: int, block: int, expect_raw: bool = True) -> None:
    p1, f1, s1, _ = _run(path, False, monkeypatch, batch_bytes, block)
    p2, f2, s2, used = _run(path, True, monkeypatch, batch_bytes, block)
    if expect_raw:
        assert used, "the fast path was not taken"
    assert_frame_equal(p2.samples, p1.samples)
    assert_frame_equal(p2.events, p1.events)
    assert (p2.skipped.counts, p2.skipped.examples) == (p1.skipped.counts, p1.skipped.examples)
    assert (p2.notes, p2.meta, p2.clock) == (p1.notes, p1.meta, p1.clock)
    assert len(f2) == len(f1)
    for a, b in zip(f1, f2):
        assert_frame_equal(b.samples, a.samples)
        assert_frame_equal(b.events, a.events)
        assert b.notes == a.notes
    assert (s2.line_count, s2.decode_errors, s2.nul_bytes, s2.problems) == \
        (s1.line_count, s1.decode_errors, s1.nul_bytes, s1.problems)
    assert (s2.skipped.counts, s2.skipped.examples) == (s1.skipped.counts, s1.skipped.examples)


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


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("batch_bytes,block", [(3000, 512), (20000, 4096), (1 << 20, 1 << 18)])
def test_raw_kernel_path_matches_general_path(tmp_path, monkeypatch, case, batch_bytes, block):
    path = tmp_path / "kern.log"
    path.write_bytes(_kern_log(7, **CASES[case]))
    _same(path, monkeypatch, batch_bytes, block)


@pytest.mark.parametrize("batch_bytes", [3000, 50000])
def test_raw_kernel_path_no_final_newline_and_compressed(tmp_path, monkeypatch, batch_bytes):
    data = _kern_log(3, oom_at=(1490,), scanner_every=50).rstrip(b"\n")
    plain = tmp_path / "kern.log"
    plain.write_bytes(data)
    _same(plain, monkeypatch, batch_bytes, 1024)
    gz = tmp_path / "kern.log.gz"
    gz.write_bytes(gzip.compress(data))
    _same(gz, monkeypatch, batch_bytes, 1024)


@pytest.mark.parametrize("bad", [b"\xff\xfe broken utf-8", b"a \x00 NUL", b"\xef\xbb\xbfBOM inside",
                                 b"x" * 3000, b"caf\xc3\xa9 \xef\xbf\xbd"])
def test_raw_kernel_path_falls_back_on_odd_bytes(tmp_path, monkeypatch, bad):
    """A batch with bytes the fast path does not read (or an over-long line for its blocks) is read by
    the general path: still the same result."""
    data = _kern_log(5, oom_at=(600,), scanner_every=80)
    lines = data.split(b"\n")
    lines[650] = lines[650] + b" " + bad
    lines[10] = bad
    lines[-2] = lines[-2] + bad   # in the last batch, handed out after the reader has finished
    path = tmp_path / "kern.log"
    path.write_bytes(b"\n".join(lines))
    _same(path, monkeypatch, 20000, 1024)


def test_raw_kernel_path_on_recorded_kernel_logs(monkeypatch):
    files = [f for f in sorted((ROOT / "sample_logs").rglob("*")) if f.is_file() and f.suffix != ".md"]
    files += sorted(REALWORLD.rglob("*.txt"))
    n = 0
    for f in files:
        try:
            src = Source.open(f)
            module, _ = parsers.claim(src.head())
        except InputError:
            continue
        if module is None or module.NAME not in ("kernel-log", "nvrm-xid") or src.encoding != "utf-8":
            continue
        n += 1
        try:
            _same(f, monkeypatch, 2048, 512, expect_raw=src.wrapper is None)
        except AssertionError as e:
            raise AssertionError(f"{f}: {e}") from e
    assert n >= 5


def test_raw_batch_line_numbers_match_the_reader():
    """RawBatch counts lines as _parse_buffer cuts them (blank lines, CRs, a last line without newline)."""
    for data in [b"\n\na\n", b"a\r\n\r\n\rb\n", b"x\ny", b"\n", b"one line", b"a\nb\n\n\n"]:
        end = len(data)
        reader = fastpath_kernel.Reader(None, [], False)
        import concurrent.futures
        reader.pool = concurrent.futures.ThreadPoolExecutor(1)
        rb = reader._parse(data, end, 10, fastpath.ReadStats())
        ref = fastpath._parse_buffer(data, end, 10, fastpath.ReadStats())
        assert rb.height == ref.height, data
        assert_frame_equal(rb.frame(), ref)
        assert_frame_equal(rb.tail(2), ref.tail(2))
        assert rb.first_text() == ref["text"][0]
        reader.pool.shutdown()


def test_hint_regex_on_blocks_is_a_superset():
    # the literals are tested on whole blocks: none of them may hold a newline or need an anchor
    regexes, _ = fastpath_kernel.block_prefilter(fastpath_stream._KERNEL_HINT, _scan_hints())
    for rx in regexes:
        assert "\n" not in rx and "^" not in rx and "$" not in rx
        assert re.compile(rx)
