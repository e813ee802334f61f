"""Properties of the kernel-log and Xid readers over arbitrary input: never raise, never invent a pid
or a byte count that the text does not hold."""
from __future__ import annotations

import json
import re

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.options import Options
from forensics.parsers.kernel import prefix as kp
from forensics.parsers.kernel import nvrm_log, oom
from forensics.parsers.kernel import syslog as kernel

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
    parsed = oom.parse_decoded(dec)
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
    nvrm_log.scan(frame, _Src(), OPTS)
    assert kernel.sniff(texts) in (None,) or isinstance(kernel.sniff(texts), str)
    assert nvrm_log.sniff(texts) is None or isinstance(nvrm_log.sniff(texts), str)


class _Src:
    path = "x.log"
    mtime = 1.7e9


# -- stage 1 reads a weekday or month of letters exactly as Rust's \p{L} does ---------------------

def _stage1_with_unicode_letters(df: pl.DataFrame) -> pl.DataFrame:
    """The stage-1 loop as it was with \\p{L} in the regexes (the reference for kp._stage1)."""
    remaining, found = df.select("line", "t"), []
    for fam, rx in kp.STAGE1:
        rx = rx.replace(kp.LETTERISH, r"\p{L}")
        g = remaining.select("line", "t", pl.col("t").str.extract_groups(rx).alias("g")).unnest("g")
        if fam == "gce-json":
            ok = g["val"].is_not_null()
        else:
            g = g.with_columns(pl.col("t").str.slice(pl.col("pre").str.len_chars()).alias("rest"))
            ok = g["pre"].is_not_null()
        if fam in kp._NEEDS_HOST:
            ok = ok & g["rest"].str.contains(kp._HOST_IDENT).fill_null(False)
        hit = g.filter(ok)
        found.append(hit.select("line", pl.lit(fam).alias("s1"),
                                *[(pl.col(c) if c in hit.columns else pl.lit(None, dtype=pl.String))
                                  .alias("s1host" if c == "host" else c) for c in kp._S1_COLUMNS]))
        remaining = remaining.filter(~ok)
    return df.join(pl.concat(found), on="line", how="left", maintain_order="left")


# letters of every kind (Lu, Ll, Lt, Lm, Lo) and non-ASCII non-letters that a looser class would take
STAMP_CHARS = "MonTueNovDecéäûßДекабрьΝοε中ǅʰ→·²\u0301\u00a0\u2003 .5"
word = st.text(alphabet=STAMP_CHARS, min_size=1, max_size=6)
STAMP_SHAPES = ["[{w} {m} 7 00:05:14 2017] kernel: x", "{w} {m} 27 09:17:38 2025 kern.warn kernel: x",
                "{m} 15 23:09:30 host kernel: [  5.050606] x", "{m}. 5 23:09:30.5 host kernel: x",
                "{w} 2023-09-08 17:20:30 CEST host kernel: x", " {w}. {m}  7 00:05:14 2017 kern.err x"]
stamp_line = st.builds(lambda shape, w, m: shape.format(w=w, m=m), st.sampled_from(STAMP_SHAPES), word, word)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(stamp_line, st.text(max_size=40)), min_size=1, max_size=12))
def test_stage1_reads_letters_as_unicode_letter_class(texts):
    df = pl.DataFrame({"line": list(range(1, len(texts) + 1)), "t": texts},
                      schema={"line": pl.Int64, "t": pl.String})
    got = kp._stage1(df)
    want = _stage1_with_unicode_letters(df)
    assert got.select(want.columns).equals(want)
    rows, kp._STAGE1_ROWS = kp._STAGE1_ROWS, 3   # a big decode goes by slices of lines: the same frame
    try:
        assert kp._stage1(df).equals(got)
    finally:
        kp._STAGE1_ROWS = rows


def test_stage1_rejects_a_month_of_non_letters():
    texts = ["Nov 15 23:09:30 host kernel: a", "→→→ 15 23:09:30 host kernel: b", "Déc. 15 23:09:30 host kernel: c",
             "[Thu Дек  7 00:05:14 2017] d", "[T·u Dec  7 00:05:14 2017] e", "ǅʰ中 2023-09-08 17:20:30 CEST host kernel: f"]
    df = pl.DataFrame({"line": list(range(1, 7)), "t": texts})
    assert kp._stage1(df)["s1"].to_list() == ["syslog", None, "syslog", "dmesg-T", None, "journal-full"]


# -- an early-4.19 summary split in two records reads as the one-line summary ---------------------

_cgroup = st.lists(st.sampled_from(["user.slice", "kubepods.slice", "docker-1a2b.scope", "job_17", "x y"]),
                   max_size=3).map(lambda parts: "/" + "/".join(parts))
_comm = st.sampled_from(["python3", "pt_main_thread", "GC Thread#9", "a,b", "(sd-pam)"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["[  687.293876] ", "May 15 23:09:30 host kernel: [  687.293876] ", "kernel: ",
                        "2024-04-29T14:55:41,678628+02:00 "]),
       st.booleans(), _cgroup, _cgroup, _comm, st.integers(1, 4_000_000), st.booleans())
def test_a_split_summary_reads_as_the_one_line_summary(prefix, memcg, oom_cg, task_cg, comm, pid, killed_line):
    head = f"oom-kill:constraint=CONSTRAINT_{'MEMCG' if memcg else 'NONE'},nodemask=(null),cpuset=/,mems_allowed=0"
    tail = (f",oom_memcg={oom_cg}" if memcg else ",global_oom") + f",task_memcg={task_cg},task={comm},pid={pid},uid=0"
    kill = [f"{prefix}Killed process {pid} ({comm}) total-vm:1000kB, anon-rss:800kB, file-rss:4kB, shmem-rss:0kB"]
    one = [prefix + head + tail] + (kill if killed_line else [])
    two = [prefix + head, prefix + tail] + (kill if killed_line else [])

    def kills(texts):
        frame = pl.DataFrame({"line": list(range(1, len(texts) + 1)), "text": texts},
                             schema={"line": pl.Int64, "text": pl.String})
        ev = oom.parse_decoded(kp.decode(frame, OPTS, "x.log", 1.7e9)).events.filter(pl.col("kind") == "oom_kill")
        out = []
        for e in ev.to_dicts():
            d = json.loads(e["detail"])
            d.pop("evidence_lines")
            out.append((e["pid"], e["process"], e["bytes"], d))
        return out

    got = kills(two)
    assert len(got) == 1 and got == kills(one)
    assert got[0][3]["task_memcg"] == task_cg and got[0][3]["scope"] == ("memcg" if memcg else "global")
    assert ("inferred_from" in got[0][3]) is not killed_line
