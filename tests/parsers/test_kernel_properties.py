"""Properties of the kernel-log and Xid readers over arbitrary input: never raise, never invent a pid
or a byte count that the text does not hold."""
from __future__ import annotations

import json
import re

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.options import Options
from forensics.parsers import _kernel_prefix as kp
from forensics.parsers import kernel, xid

OPTS = Options(tz="Europe/Berlin", year=2024)

# Fragments of real lines, so the generator reaches the interesting branches, mixed with noise.
PREFIXES = ["", "[  687.293876] ", "[  218.519632][ T7791] ", "[Thu Dec  7 00:05:14 2017] ",
            "2024-04-29T14:55:41,678628+02:00 ", "May 15 23:09:30 host kernel: [  518.050606] ",
            "Feb 29 01:00:00 h kernel: ", "kernel: ", "   ", "192.168.1.1: kern: warning: [2026-04-22T21:27:51.2Z]: ",
            '  "textPayload": ', "Sun Jul 27 09:17:38 2025 kern.warn kernel: "]
BODIES = ["Out of memory: Killed process ", "Killed process ", " (", ") ", "total-vm:", "kB, anon-rss:",
          "kB, file-rss:", "kB, shmem-rss:", "oom-kill:constraint=CONSTRAINT_MEMCG,", "pid=", "task=",
          ",global_oom", " invoked oom-killer: gfp_mask=0xcc0, order=0, oom_score_adj=0",
          "Memory cgroup out of memory: Kill process ", " score 0 or sacrifice child", "oom_reaper: reaped process ",
          "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
          "[  123]     0   123    1000      50    4096        0             0 ", "NVRM: Xid (PCI:0000:0a:00): ",
          ", pid='<unknown>', name=<unknown>, ", "NVRM: GPU at PCI:0000:0a:00: GPU-", "fallen off the bus",
          "Task in /a killed as a result of limit of /b", "memory: usage 1kB, limit 2kB, failcnt 0", "CPU: 1 PID: 9 Comm: x Not tainted"]
piece = st.one_of(st.sampled_from(BODIES), st.text(max_size=8), st.integers(-5, 10**12).map(str))
line = st.builds(lambda p, parts: p + "".join(parts), st.sampled_from(PREFIXES), st.lists(piece, max_size=8))
lines = st.lists(st.one_of(line, st.text(max_size=60)), max_size=25)


def _numbers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\d+", text)}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines)
def test_arbitrary_lines_never_raise_nor_invent(texts):
    frame = pl.DataFrame({"line": list(range(1, len(texts) + 1)), "text": texts},
                         schema={"line": pl.Int64, "text": pl.String})
    all_numbers = _numbers("\n".join(texts))
    dec = kp.decode(frame, OPTS, "x.log", 1.7e9)
    parsed = kernel.parse_decoded(dec)
    for ev in parsed.events.to_dicts():
        detail = json.loads(ev["detail"])
        assert isinstance(detail, dict)
        if ev["pid"] is not None:
            assert ev["pid"] in all_numbers and str(ev["pid"]) in ev["text"] + json.dumps(detail.get("task"))
        if ev["bytes"] is not None:
            assert ev["bytes"] >= 0
            # bytes are kB fields of the line (x1024) or task-table pages (x4096), nothing else
            assert "kB" in ev["text"] or (detail.get("task") or {}).get("rss_bytes") == ev["bytes"]
    for s in parsed.samples.to_dicts():
        assert s["bytes"] % 4096 == 0 and s["bytes"] // 4096 in all_numbers
    # the scanners see the same lines one by one
    kernel.scan(frame, _Src(), OPTS)
    xid.scan(frame, _Src(), OPTS)
    assert kernel.sniff(texts) in (None,) or isinstance(kernel.sniff(texts), str)
    assert xid.sniff(texts) is None or isinstance(xid.sniff(texts), str)


class _Src:
    path = "x.log"
    mtime = 1.7e9
