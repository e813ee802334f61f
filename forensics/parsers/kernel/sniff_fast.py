"""Cheap plain-Python rejects for the sniffers that otherwise decode the head with polars.

Every file that no earlier parser claims is sniffed by `kernel` (most are not kernel logs: step logs,
stderr, sanitizer output). `kernel_impossible(head)` answers True only when no head line can be
counted by kernel.sniff, so the sniffer may return None without building the head profile; when in
doubt it answers False and the full sniff runs. The tests are supersets of what line_columns reads:
- the cleaned text `t` is computed as polars does (strip the end, drop 20+ space runs after a
  non-blank); Python and polars (Rust) agree on what is whitespace except U+001C..U+001F, so a head
  holding one of those is never rejected;
- a stage-1 prefix (any family) is looked for with the same regexes (`\\p{L}` read as any letter or
  number character, a superset), and a Cloud Logging `textPayload` is never rejected;
- the kernel's own prefix counts only with an uptime (`d.dddddd]`) or `kernel: `, looked for anywhere;
- a kernel message is looked for anywhere in the line (the real test anchors some of them).
"""
from __future__ import annotations

import re

from forensics.parsers.kernel import prefix as kp

_LETTER = r"[^\W\d_]"   # Python's re has no \p{L}: letters (and a few number signs, a superset)
_STAGE1 = re.compile("|".join("(?:" + re.sub(r"\(\?P<\w+>", "(?:", rx).replace(kp.LETTERISH, _LETTER) + ")"
                              for _, rx in kp.STAGE1))
_CLEAN = re.compile(r"(\S) {20,}")
_UPTIME = re.compile(r"\d\.\d{6}\]")
_ODD_SPACE = re.compile("[\x1c-\x1f]")


def kernel_impossible(head: list[str], kernel_msg: str) -> bool:
    """True when no line of `head` has a prefix family or a kernel message (see the module doc)."""
    msg = re.compile(kernel_msg.replace("|^", "|").lstrip("^"))
    for line in head:
        if line is None:
            continue
        if "textPayload" in line or "kernel:" in line or _ODD_SPACE.search(line):
            return False
        t = _CLEAN.sub(r"\1", line.rstrip())
        if _STAGE1.search(t) or _UPTIME.search(t) or msg.search(t):
            return False
    return True
