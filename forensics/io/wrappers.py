"""Line wrappers that other programs put around log lines, detected on a file's first lines and
stripped from all of them before any parser sees them (docs/formats.md §6).

Each wrapper is a prefix regex (written so that Python's `re`, used on the head, and polars' regex,
used on every line, read it the same); a wrapper is chosen only when it fits most non-blank head lines,
so a format whose own lines happen to start like a wrapper is not cut: a CSV row starting with a number
has no `N:` after it, and `grep -n` line numbers must also increase down the file; an RFC3339 syslog
stamp has six decimals and an offset, a GitHub Actions stamp seven and `Z`. Two wrappers can be
stacked (CI indentation around `grep -n` output, GitHub Actions around docker compose).

JSON-per-line exports are unwrapped to the field that holds the log line. For a kernel message
(`_TRANSPORT` "kernel" in a `journalctl -o json` export, or a Cloud Logging `textPayload` that starts
with a dmesg `[uptime]` stamp), the record's own clock would be lost that way, so the line is rebuilt in
the shape `journalctl -o short-iso-precise` prints (`2024-01-15T18:10:29.123456+00:00 host kernel:
[ 1234.567890] msg`), which the kernel-log parser reads with both clocks. Other messages (a training
job's stdout) stay bare, as their own parsers expect.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Wrapper:
    name: str
    prefix: str           # regex of the prefix to remove (anchored at line start)
    json_field: str | None = None  # for JSON-per-line exports: the field that holds the log line

    def describe(self) -> str:
        return self.name


GREP_N = "grep -n line numbers"
CI_INDENT = "CI indentation (two spaces)"
MARKDOWN = "Markdown quote"

# Order matters: the first that fits wins.
WRAPPERS: tuple[Wrapper, ...] = (
    Wrapper("Cloud Logging JSON (textPayload)", r"", json_field="textPayload"),
    Wrapper("journalctl JSON export (MESSAGE)", r"", json_field="MESSAGE"),
    Wrapper("docker json-file log (log)", r"", json_field="log"),
    Wrapper("GitHub Actions timestamp", r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{7}Z "),
    Wrapper("Kubernetes CRI log prefix", r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2}) (?:stdout|stderr) [FP] "),
    Wrapper("Metaflow task prefix", r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} \[[^\]]*\(pid [0-9]+\)\] \[[0-9a-f-]+\] "),
    Wrapper("docker compose service prefix", r"^[A-Za-z0-9][A-Za-z0-9_.-]*\s+\| "),
    Wrapper(GREP_N, r"^\s*[0-9]+[:-]"),
    Wrapper(MARKDOWN, r"^> ?"),
    Wrapper(CI_INDENT, r"^  "),
)

_JSON_LINE = re.compile(r'^\s*\{.*"(textPayload|MESSAGE|log)"\s*:')
# Lines that are not content: the provenance line of realworld/ snippets and paste separators (the
# definition; _is_junk says the same in linear time).
_JUNK = re.compile(r"^\s*# source:|^\s*-{3,}.*-{3,}\s*$|^--$")


def _is_junk(line: str) -> bool:
    """_JUNK.match(line), without its `-{3,}.*-{3,}` trying every split of a run of dashes (a line of
    20 000 dashes took seconds)."""
    core = line.strip()
    return (line.lstrip().startswith("# source:") or line in ("--", "--\n")
            or (len(core) >= 6 and core.startswith("---") and core.endswith("---") and "\n" not in core))
# After a grep -n prefix, text that continues a number instead (12:34:56, 2024-01-15) means no grep.
_GREP_NUM = re.compile(r"^\s*([0-9]+)[:-]")
_LOOKS_LIKE_TIME = re.compile(r"^\s*(?:[0-9]{1,2}:[0-9]{2}:[0-9]{2}|[0-9]{4}-[0-9]{2}-[0-9]{2})")
_MIN_SHARE = 0.8
_MIN_SHARE_INDENT = 0.9
# Markdown escapes a paste picks up (`\#`, `\_`); only undone inside a Markdown quote.
_MD_ESCAPE = r"\\([#*_\[\]`>])"


def _hits(lines: list[str], hit, need: float) -> list[str] | None:
    """The lines for which hit(line) holds when there are `need` or more of them, else None; given up
    on as soon as fewer than `need` can hold (most heads fit no wrapper: they are dropped after a fifth
    of their lines instead of read to the end)."""
    out: list[str] = []
    left = len(lines)
    for ln in lines:
        left -= 1
        if hit(ln):
            out.append(ln)
        elif len(out) + left < need:
            return None
    return out if len(out) >= need else None


def _fits(w: Wrapper, lines: list[str]) -> bool:
    n = len(lines)
    if w.json_field:
        field = f'"{w.json_field}"'
        return _hits(lines, lambda ln: _JSON_LINE.match(ln) and field in ln, max(1, _MIN_SHARE * n)) is not None
    # the fewest lines the prefix must start: nearly all for a CI log's indent, else most (and at least
    # two, but the one line of a one-line head; grep -n needs two numbers to go up)
    if w.name == CI_INDENT:
        need = _MIN_SHARE_INDENT * n
    elif n == 1 and w.name != GREP_N:
        need = 1
    else:
        need = max(2, _MIN_SHARE * n)
    hit_lines = _hits(lines, re.compile(w.prefix).match, need)
    if hit_lines is None:
        return False
    if w.name == GREP_N:
        return _grep_fits(hit_lines)
    if w.name == CI_INDENT:
        # everything indented alike, and not all of it deeper (a code block is not a CI log)
        return n >= 2 and any(not ln.startswith("   ") for ln in hit_lines)
    return True


def _grep_fits(hit_lines: list[str]) -> bool:
    """grep -n (most lines carry it: `_fits`): numbers going up, and what follows is not the rest of a
    time or date."""
    nums = []
    for ln in hit_lines:
        if _LOOKS_LIKE_TIME.match(ln):
            return False
        n = _GREP_NUM.match(ln).group(1)
        if len(n) > 12:  # no file has that many lines: a digit run, not grep -n
            return False
        nums.append(int(n))
    return all(b > a for a, b in zip(nums, nums[1:]))


def _detect_one(lines: list[str], skip: set[str]) -> Wrapper | None:
    for w in WRAPPERS:
        if w.name not in skip and _fits(w, lines):
            return w
    return None


def detect(head: list[str]) -> Wrapper | None:
    """The wrapper (or a stack of two) that fits the non-blank head lines."""
    lines = [ln for ln in head if ln.strip() and not _is_junk(ln)][:200]
    if not lines:
        return None
    first = _detect_one(lines, set())
    if first is None or first.json_field:
        return first
    rx = re.compile(first.prefix)
    inner = [rx.sub("", ln, count=1) for ln in lines]
    second = _detect_one([ln for ln in inner if ln.strip()], {first.name, *[w.name for w in WRAPPERS if w.json_field]})
    if second is None:
        return first
    return Wrapper(f"{first.name} + {second.name}", first.prefix + second.prefix.removeprefix("^"))


def _dmesg_uptime(micros: pl.Expr) -> pl.Expr:
    """µs since boot -> the kernel's own `[%5lu.%06lu] ` stamp."""
    secs = (micros // 1_000_000).cast(pl.String).str.pad_start(5)
    frac = (micros % 1_000_000).cast(pl.String).str.zfill(6)
    return pl.concat_str([pl.lit("["), secs, pl.lit("."), frac, pl.lit("] ")])


def _json_expr(w: Wrapper, out: pl.Expr) -> pl.Expr:
    extracted = out.str.json_path_match(f"$.{w.json_field}")
    # textPayload / log often carry the kernel's own "\r\n"; the JSON decoder turned it into CR/LF
    extracted = extracted.str.strip_chars_end("\r\n")
    if w.json_field == "MESSAGE":
        when_us = out.str.json_path_match("$.__REALTIME_TIMESTAMP").cast(pl.Int64, strict=False)
        mono = out.str.json_path_match("$._SOURCE_MONOTONIC_TIMESTAMP").cast(pl.Int64, strict=False)
        host = out.str.json_path_match("$._HOSTNAME").fill_null("localhost")
        stamp = pl.from_epoch(when_us, "us").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f")
        kernel_line = pl.concat_str([stamp, pl.lit("+00:00 "), host, pl.lit(" kernel: "),
                                     _dmesg_uptime(mono).fill_null(""), extracted])
        is_kernel = (out.str.json_path_match("$._TRANSPORT") == "kernel") & when_us.is_not_null()
        extracted = pl.when(is_kernel.fill_null(False)).then(kernel_line).otherwise(extracted)
    elif w.json_field == "textPayload":
        stamp = out.str.json_path_match("$.timestamp")
        dmesg_like = extracted.str.contains(r"^\s*\[\s*[0-9]+\.[0-9]{6}\]")
        extracted = (pl.when(dmesg_like.fill_null(False) & stamp.is_not_null())
                     .then(pl.concat_str([stamp, pl.lit(" "), extracted])).otherwise(extracted))
    return pl.when(extracted.is_not_null()).then(extracted).otherwise(out)


def strip_expr(w: Wrapper | None, text: pl.Expr) -> pl.Expr:
    """Vectorized removal of the wrapper from every line; lines without it stay as they are."""
    out = text.str.strip_suffix("\r")
    if w is None:
        return out
    if w.json_field:
        return _json_expr(w, out)
    out = out.str.replace(w.prefix, "")
    if MARKDOWN in w.name:
        out = out.str.replace_all(_MD_ESCAPE, "${1}")
    return out


def strip_lines(w: Wrapper | None, lines: list[str]) -> list[str]:
    if not lines:
        return lines
    if w is None:
        # strip_expr(None) in plain Python: a query's fixed cost is most of a small head's
        return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    return pl.DataFrame({"t": lines}, schema={"t": pl.String}).select(strip_expr(w, pl.col("t")))["t"].to_list()
