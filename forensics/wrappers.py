"""Line wrappers that other programs put around log lines, detected on a file's first lines and
stripped from all of them before any parser sees them (formats.md §6).

Each wrapper is a prefix regex; a wrapper is chosen only when it fits most non-blank head lines, so a
format whose own lines happen to start like a wrapper (a CSV row starting with a number) is not cut.
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


# Order matters: the first that fits wins.
WRAPPERS: tuple[Wrapper, ...] = (
    Wrapper("Cloud Logging JSON (textPayload)", r"", json_field="textPayload"),
    Wrapper("journalctl JSON export (MESSAGE)", r"", json_field="MESSAGE"),
    Wrapper("GitHub Actions timestamp", r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z "),
    Wrapper("Metaflow task prefix", r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[[^\]]*\(pid \d+\)\] \[[0-9a-f-]+\] "),
    Wrapper("docker compose service prefix", r"^[A-Za-z0-9][A-Za-z0-9_.-]*\s+\| "),
    Wrapper("grep -n line numbers", r"^\s*\d+[:-](?!\d)"),
    Wrapper("Markdown quote", r"^> ?"),
)

_JSON_LINE = re.compile(r'^\s*\{.*"(textPayload|MESSAGE)"\s*:')


def detect(head: list[str]) -> Wrapper | None:
    """The wrapper that fits at least 80% of the non-blank head lines (and at least 2 of them)."""
    lines = [ln for ln in head if ln.strip()][:200]
    if len(lines) < 1:
        return None
    for w in WRAPPERS:
        if w.json_field:
            hits = sum(1 for ln in lines if _JSON_LINE.match(ln) and f'"{w.json_field}"' in ln)
        else:
            rx = re.compile(w.prefix)
            hits = sum(1 for ln in lines if rx.match(ln))
        if hits >= max(2, 0.8 * len(lines)) or (len(lines) == 1 and hits == 1 and w.name != "grep -n line numbers"):
            return w
    return None


def strip_expr(w: Wrapper | None, text: pl.Expr) -> pl.Expr:
    """Vectorized removal of the wrapper from every line; lines without it stay as they are."""
    out = text.str.strip_suffix("\r")
    if w is None:
        return out
    if w.json_field:
        extracted = out.str.json_path_match(f"$.{w.json_field}")
        # textPayload often carries the kernel's own "\r\n"; the JSON decoder turned it into CR/LF
        extracted = extracted.str.strip_chars_end("\r\n")
        return pl.when(extracted.is_not_null()).then(extracted).otherwise(out)
    return out.str.replace(w.prefix, "")


def strip_lines(w: Wrapper | None, lines: list[str]) -> list[str]:
    if not lines:
        return lines
    return pl.DataFrame({"t": lines}, schema={"t": pl.String}).select(strip_expr(w, pl.col("t")))["t"].to_list()
