"""Line wrappers (docs/formats.md §6): each is found and stripped, stacks of two, and no wrapper eats a
format's own prefix. Every real snippet gets the wrapper a person would name (or none)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REALWORLD, realworld
from forensics.io import wrappers
from forensics.io.sources import Source

CASES = [
    # id, lines, wrapper name (None = no wrapper), first line after stripping
    ("docker-compose", ["skyreelsv3-comfyui  | torch.OutOfMemoryError: x", "skyreelsv3-comfyui  | ", "skyreelsv3-comfyui  | done"],
     "docker compose service prefix", "torch.OutOfMemoryError: x"),
    ("docker-compose-v2", ["trainer-1  | step 1", "trainer-1  | step 2"], "docker compose service prefix", "step 1"),
    ("github-actions", ["2026-01-15T18:10:29.2167389Z ##[group]Run tests", "2026-01-15T18:10:29.2169000Z [  12.000001] x"],
     "GitHub Actions timestamp", "##[group]Run tests"),
    ("grep-n", ["4924:torch.OutOfMemoryError: CUDA out of memory.", "4925:Traceback (most recent call last):",
                "4931-  File \"x.py\", line 3"], "grep -n line numbers", "torch.OutOfMemoryError: CUDA out of memory."),
    ("grep-n-of-iso-lines", ["12:2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer:", "40:2024-04-29T14:55:41,679700+02:00 Out of memory"],
     "grep -n line numbers", "2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer:"),
    ("markdown", ["> [Fri Aug 30 11:43:09 2024] NVRM: Xid", "> \\# gpu   pwr", ">"], "Markdown quote", "[Fri Aug 30 11:43:09 2024] NVRM: Xid"),
    ("metaflow", ["2021-03-12 05:02:21.931 [129/start/1341 (pid 5161)] [931bbcf6-5fa2-4661-83df-1d82d52b6226] index, name",
                  "2021-03-12 05:02:21.932 [129/start/1341 (pid 5161)] [931bbcf6-5fa2-4661-83df-1d82d52b6226] 0, Tesla"],
     "Metaflow task prefix", "index, name"),
    ("ci-indent", ["  ========= COMPUTE-SANITIZER", "  ========= Leaked 4 bytes at 0x7f769fe00a00", "  \tcmd"],
     "CI indentation (two spaces)", "========= COMPUTE-SANITIZER"),
    ("cri", ["2024-01-15T18:10:29.216738123Z stdout F step 1 mem 10 MiB", "2024-01-15T18:10:30.216738123Z stderr F warn"],
     "Kubernetes CRI log prefix", "step 1 mem 10 MiB"),
    ("ci-indent+grep-n", ["  4878:Traceback (most recent call last):", "  4924:torch.OutOfMemoryError: x", "  4925:Traceback"],
     "grep -n line numbers", "Traceback (most recent call last):"),
    ("github-actions+compose", ["2026-01-15T18:10:29.2167389Z web-1  | started", "2026-01-15T18:10:30.2167389Z web-1  | step 2"],
     "GitHub Actions timestamp + docker compose service prefix", "started"),
    # formats whose own prefix looks like a wrapper: left alone
    ("rfc3339-syslog", ["2026-09-02T09:08:50.880492+00:00 Server1 kernel: x", "2026-09-02T09:08:51.880492+00:00 Server1 kernel: y"], None, None),
    ("dmesg-iso", ["2024-04-29T14:55:41,678628+02:00 pool invoked", "2024-04-29T14:55:41,679685+02:00 oom-kill:"], None, None),
    ("talos", ["192.168.11.119: kern: warning: [2026-04-22T21:27:51.291882381Z]: NVRM: x", "192.168.11.119: kern: info: [2026-04-22T21:27:52Z]: y"], None, None),
    ("csv-noheader", ["0, Tesla V100-SXM2-16GB, 450.51.06, 16160 MiB", "1, Tesla V100-SXM2-16GB, 450.51.06, 16160 MiB"], None, None),
    ("csv-date-rows", ["2024-06-01 11:27:05.177, NVIDIA A100, 40960 MiB", "2024-06-01 11:27:15.309, NVIDIA A100, 40960 MiB"], None, None),
    ("hh-mm-ss", ["10:11:12 step 1", "10:11:13 step 2", "10:11:14 step 3"], None, None),
    ("numbers-not-increasing", ["3: a", "3: b", "1: c"], None, None),
    ("dmon-rows", ["    0   111    83    25", "    1   111    84    18"], None, None),
    ("code-block", ["    x = 1", "    y = 2"], None, None),
    ("mixed-indent", ["  train_mem_gpu_alloc_delta  =     -153MB", "***** train metrics *****", "  a = 1"], None, None),
    ("nvsmi-table", ["| NVIDIA-SMI 410.48     Driver Version: 410.48 |", "|   0  Tesla  |"], None, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_wrapper_detection_and_strip(case):
    _, lines, name, first = case
    w = wrappers.detect(["# source: https://example.org (provenance)"] + lines)
    assert (w.name if w else None) == name
    if w is not None:
        assert wrappers.strip_lines(w, lines)[0] == first


def test_markdown_escapes_are_undone_only_in_a_quote():
    w = wrappers.detect(["> \\# gpu   pwr", "> \\#Idx   W"])
    assert wrappers.strip_lines(w, ["> \\# gpu   pwr"]) == ["# gpu   pwr"]
    assert wrappers.strip_lines(None, ["C:\\_dir\\#x"]) == ["C:\\_dir\\#x"]


def test_crlf_and_separators(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"4924:line one\r\n--\r\n4930:line two\r\n")
    src = Source.open(p)
    assert src.head()[:3] == ["line one", "--", "line two"]
    assert src.frame()["text"].to_list() == ["line one", "--", "line two"]
    assert src.wrapper.name == "grep -n line numbers"


def _journal(msg, transport="kernel", us=1700000000123456, mono=5000123456):
    return json.dumps({"__REALTIME_TIMESTAMP": str(us), "_HOSTNAME": "gpu1", "_TRANSPORT": transport,
                       "_SOURCE_MONOTONIC_TIMESTAMP": str(mono), "MESSAGE": msg}, separators=(", ", " : "))


def test_journal_json_kernel_lines_keep_their_clocks():
    lines = [_journal("Out of memory: Killed process 1 (a)"), _journal("step 3 mem 1 GiB", transport="stdout")]
    w = wrappers.detect(lines)
    assert w.json_field == "MESSAGE"
    assert wrappers.strip_lines(w, lines) == [
        "2023-11-14T22:13:20.123456+00:00 gpu1 kernel: [ 5000.123456] Out of memory: Killed process 1 (a)",
        "step 3 mem 1 GiB"]


def test_cloud_logging_text_payload():
    dmesg = json.dumps({"textPayload": "[195998.443208] node invoked oom-killer: x\r\n", "timestamp": "2021-06-01T10:00:00Z"})
    app = json.dumps({"textPayload": "epoch 1 loss 0.3", "timestamp": "2021-06-01T10:00:01Z"})
    w = wrappers.detect([dmesg, app])
    assert w.json_field == "textPayload"
    assert wrappers.strip_lines(w, [dmesg, app, "not json"]) == [
        "2021-06-01T10:00:00Z [195998.443208] node invoked oom-killer: x", "epoch 1 loss 0.3", "not json"]


def test_docker_json_file_log():
    lines = [json.dumps({"log": "step 1\n", "stream": "stdout", "time": "2024-01-01T00:00:00Z"})] * 2
    w = wrappers.detect(lines)
    assert w.json_field == "log" and wrappers.strip_lines(w, lines) == ["step 1", "step 1"]


def test_single_line_files():
    assert wrappers.detect(["web-1  | hello"]).name == "docker compose service prefix"
    assert wrappers.detect(["12: hello"]) is None  # one number is no evidence of grep -n
    assert wrappers.detect([]) is None and wrappers.detect(["", "  "]) is None


def test_every_pattern_runs_in_polars_too():
    # the same regex is used by Python (head) and polars (all lines): a lookaround would break polars
    for w in wrappers.WRAPPERS:
        if not w.json_field:
            assert wrappers.strip_lines(w, ["x"]) == ["x"]


EXPECTED = {
    "nvsmi_csv_05.txt": "Metaflow task prefix",
    "sanitizer_leak_01.txt": "CI indentation (two spaces)",
    "sanitizer_leak_02.txt": "CI indentation (two spaces)",
    "torch_memsummary_04.txt": "docker compose service prefix",
    "torch_oom_11.txt": "grep -n line numbers",
    # kubectl describe's container block under its one unindented `Containers:` line: 17 of 18 lines
    # indented alike look like a CI log's indent; container-status reads the state block either way
    "describe_exit_code_2.txt": "CI indentation (two spaces)",
    "ggml_oom_02.txt": "docker compose service prefix",
    "torch_oom_hip_02.txt": "GitHub Actions timestamp",
}


@pytest.mark.parametrize("name", sorted(p.name for p in REALWORLD.rglob("*.txt")))
def test_realworld_wrappers(name):
    src = Source.open(realworld(name))
    head = src.head()
    assert (src.wrapper.name if src.wrapper else None) == EXPECTED.get(name)
    assert head[0].startswith("# source:")  # the provenance line is never cut


def test_junk_lines_without_the_quadratic_regex():
    """_is_junk says what _JUNK says (on lines built from the pieces that matter), and a line of a
    million dashes costs no more than reading it (the regex tried every split of the run)."""
    import random
    import time

    rng = random.Random(3)
    pieces = [" ", "\t", "\n", "-", "--", "---", "# source:", "#", "x", "\u00a0", "source"]
    for _ in range(20000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 9)))
        assert wrappers._is_junk(line) == bool(wrappers._JUNK.match(line)), repr(line)
    started = time.perf_counter()
    assert not wrappers._is_junk("-" * 1_000_000 + "x")
    assert wrappers._is_junk("-" * 1_000_000)
    assert wrappers.detect(["-" * 1_000_000 + "x"] * 3 + ["plain line"]) is None
    assert time.perf_counter() - started < 5


def test_sizes_are_read_in_linear_time():
    """units.SIZE_RE matches as its plain form `-?[\\d,]*\\.?\\d+ \\s*(unit)?\\s*` does, without trying every
    split of a digit or blank run (20 000 digits took seconds)."""
    import random
    import re
    import time

    from forensics import units

    plain = re.compile(r"^\s*(-?[\d,]*\.?\d+)\s*(" + units.UNIT_RE + r")?\s*$")
    rng = random.Random(5)
    pieces = [" ", "\t", "\n", "-", ".", ",", "1", "0", "\u0663", "B", "KiB", "kb", "bytes", "byte", "x", "MB", "M", "i"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 9)))
        a, b = plain.match(text), units.SIZE_RE.match(text)
        assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups())), repr(text)
    started = time.perf_counter()
    assert units.parse_size("1" * 1_000_000 + "!") is None
    assert units.parse_size("1" + " " * 1_000_000 + "x") is None
    assert units.parse_size("1,024 KiB") == 1024 * 1024
    assert time.perf_counter() - started < 5


def _fits_reading_every_line(w, lines):
    """wrappers._fits as it was written first: every line looked at."""
    import re

    from forensics.io import wrappers as W

    n = len(lines)
    if w.json_field:
        hits = sum(1 for ln in lines if W._JSON_LINE.match(ln) and f'"{w.json_field}"' in ln)
        return hits >= max(1, W._MIN_SHARE * n)
    hit_lines = [ln for ln in lines if re.compile(w.prefix).match(ln)]
    if w.name == W.GREP_N:
        return len(hit_lines) >= max(2, W._MIN_SHARE * n) and W._grep_fits(hit_lines)
    if w.name == W.CI_INDENT:
        return n >= 2 and len(hit_lines) >= W._MIN_SHARE_INDENT * n and any(not ln.startswith("   ") for ln in hit_lines)
    return len(hit_lines) >= max(2, W._MIN_SHARE * n) or (n == 1 and len(hit_lines) == 1)


_WRAPPED_LINES = [
    '{"textPayload": "kernel: x", "t": 1}', '{"MESSAGE": "x"}', '{"log": "step 1\\n", "stream": "stderr"}',
    "2026-01-15T18:10:29.2167389Z [  687.293876] x", "2026-01-15T18:10:29.216Z stdout F x",
    "2026-01-15 18:10:29.216 [1234/start/1 (pid 99)] [abc-12] x", "trainer-1  | x", "12:x", "13-x", "12:34:56 x",
    "> x", ">x", "  x", "    x", "x", "", "# source: y", "------ cut ------",
]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_WRAPPED_LINES), min_size=1, max_size=40), st.integers(0, 9))
def test_fits_gives_up_early_with_the_same_answer(lines, skip_first):
    """_fits stops reading a head once too few of its lines are left to fit: the same answer as
    reading every line, for each wrapper, on heads of every mix (grep -n numbers going up or not)."""
    from forensics.io import wrappers as W

    lines = [f"{i + skip_first}:x" if ln == "12:x" else ln for i, ln in enumerate(lines)]
    for w in W.WRAPPERS:
        assert W._fits(w, lines) == _fits_reading_every_line(w, lines), (w.name, lines)


def test_no_wrapper_fits_no_lines():
    """_hits gave back an empty list for an empty head, which a JSON wrapper took for a fit."""
    from forensics.io import wrappers as W

    assert [w.name for w in W.WRAPPERS if W._fits(w, [])] == []
