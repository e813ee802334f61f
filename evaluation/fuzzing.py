"""Hostile bytes for every parser, and the properties reading them must keep.

Whatever the bytes -- arbitrary, or real snippets truncated, with lines dropped or duplicated, bytes
flipped, NULs, CRLF, invalid UTF-8, interleaved, cut mid-line, a very long line -- reading them:
- raises nothing but the project's own errors (forensics.errors.ForensicsError);
- yields rows that each point at a line of the file (`line` within the file) and, when they carry a
  byte count, at a line that holds a number that count is made of (garbage never becomes a number);
- yields byte counts a memory can have (not negative except `*_delta` figures, not over 1 PiB).

The seeds are the repository's own files (tests/samples, sample_logs, tests/torture). Shared by
tests/test_fuzz_parsers.py (modest example counts) and bench/fuzz.py (high counts).
"""
from __future__ import annotations

import functools
import json
import math
import re
import tempfile
import zlib
from pathlib import Path

import polars as pl
from hypothesis import strategies as st

from forensics import ingest
from forensics import parsers
from forensics.errors import ForensicsError
from forensics.io.sources import Source
from forensics.model import Parsed
from forensics.options import Options
from forensics.parsers.free import FALL

# Series whose bytes are no number of their line: free.fall is the highest free reading less this line's
# (parsers/free.py); a serving engine's kv_cache.used is the line's usage fraction times the cache's size,
# which an earlier line gives (parsers/serving/engines.py; found by bench/fuzz.py, 2026-12-07)
DERIVED = (FALL, "kv_cache.used")

ROOT = Path(__file__).resolve().parent.parent
# the real-world snippets, one folder per format (tests/samples/README.md says where they come from)
REALWORLD = ROOT / "tests" / "samples"
OPTS = Options(tz="UTC")
# half the cases read clocks in a zone with DST (fold and gap code paths), chosen by the data itself
OPTS_DST = Options(tz="Europe/Berlin")
MAX_BYTES = 1 << 50
YEAR_RANGE = (1970, 2200)


# -- seeds: real snippets, the recorded samples, the torture corpus -----------------------------------

def _seed_files() -> list[Path]:
    files = sorted(REALWORLD.rglob("*.txt"))
    files += sorted(p for p in (ROOT / "sample_logs").rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".csv", ".xml"))
    files += sorted(p for p in (ROOT / "tests" / "torture").rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".csv", ".xml"))
    return files


def _load_seeds() -> list[tuple[str, str]]:
    out = []
    for p in _seed_files():
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text.strip() and len(text) < 2_000_000:
            out.append((p.name, text))
    return out


SEEDS = _load_seeds()
SEED_LINES = sorted({ln for _, t in SEEDS for ln in t.splitlines() if ln.strip() and len(ln) < 400})[:5000]


# the binary formats' seeds (claimed by their bytes): the recorded memory snapshots, TensorBoard event files
BINARY_SEEDS = sorted([*(ROOT / "sample_logs").glob("*/*.pickle"), *REALWORLD.glob("*/*.pickle"),
                       *REALWORLD.glob("*/events.out.tfevents.*")])


@functools.cache
def seeds_for(module) -> list[tuple[str, str]]:
    """Seeds whose head this module claims (so mutations exercise its parse, not only its sniff); for
    a binary format, the binary seeds it claims (their bytes in place of the text)."""
    if module.sniff_bytes is not None:
        return [(p.name, p.read_bytes()) for p in BINARY_SEEDS if module.sniff_bytes(p.read_bytes()[:65536])]
    out = []
    for name, text in SEEDS:
        lines = text.split("\n")[:200]
        try:
            if module.sniff(lines):
                out.append((name, text))
        except Exception:  # a sniff bug shows up in test_sniff_never_raises, not here
            continue
    return out


# -- strategies -------------------------------------------------------------------------------------

_NUMBERS = ["0", "-1", "-0", "7", "12.5", "1,234.5", "1e400", "-1e400", "nan", "inf", "99999999999999999999",
            "18446744073709551616", "9223372036854775807", "3.0e2", "0x1f", "١٢٣", "１２３", "[N/A]", "N/A", "-",
            "9" * 5000]  # more digits than Python's int() reads (4300)
_JUNK = ["\x00", "\ufffd", "\r", "\t", "\x1b[31m", "\u2028", "é", "💥", "<script>alert(1)</script>", "'", '"', "\\",
         "{", "}", "[", "]", "|", ",", ":", "=", "MiB", "MB", "GiB", "KB", "kB", "B", " ", "  "]

_fragment = st.one_of(
    st.sampled_from(SEED_LINES or ["x"]),
    st.sampled_from(_NUMBERS),
    st.sampled_from(_JUNK),
    st.text(max_size=12),
    st.from_regex(r"-?\d{1,12}(\.\d{1,4})?", fullmatch=True),
)


def _splice(parts: list[str]) -> str:
    return "".join(parts)


line_strategy = st.one_of(
    st.sampled_from(SEED_LINES or ["x"]),
    # a real line with a piece swapped for junk or a strange number
    st.tuples(st.sampled_from(SEED_LINES or ["x"]), st.integers(0, 400), st.integers(0, 40), _fragment).map(
        lambda t: t[0][: t[1]] + t[3] + t[0][t[1] + t[2]:]),
    st.lists(_fragment, min_size=1, max_size=10).map(_splice),
    st.text(max_size=120),
)
lines_strategy = st.lists(line_strategy, max_size=40)


def _encode(lines: list[str], how: str) -> bytes:
    text = ("\r\n" if how == "crlf" else "\n").join(lines)
    if how == "utf-16":
        return text.encode("utf-16")
    if how == "latin-1":
        return text.encode("latin-1", errors="replace")
    return text.encode("utf-8", errors="surrogatepass")


encoded_lines = st.tuples(lines_strategy, st.sampled_from(["utf-8", "utf-8", "utf-8", "crlf", "utf-16", "latin-1"])).map(
    lambda t: _encode(*t))


@st.composite
def mutated_seed(draw, seeds: list[tuple[str, str]] | None = None) -> bytes:
    """A real snippet, damaged the ways real logs are."""
    seeds = seeds or SEEDS
    _, text = draw(st.sampled_from(seeds))
    lines = text.split("\n")
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["drop", "dup", "swap", "junk", "cut", "join", "interleave", "number",
                                   "long", "repeat_block"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "junk":
            lines.insert(i, draw(line_strategy))
        elif op == "cut":  # rotated or truncated mid-line
            lines[i] = lines[i][: draw(st.integers(0, max(0, len(lines[i]))))]
        elif op == "join" and i + 1 < len(lines):  # two writers, one newline lost
            k = draw(st.integers(0, len(lines[i])))
            lines[i: i + 2] = [lines[i][:k] + lines[i + 1]]
        elif op == "interleave":
            _, other = draw(st.sampled_from(seeds))
            olines = other.split("\n")
            merged = []
            for a, b in zip(lines, olines):
                merged += [a, b]
            lines = merged + lines[len(olines):]
        elif op == "number":  # a number replaced by an absurd or broken one
            lines[i] = re.sub(r"\d+(?:\.\d+)?", lambda m: draw(st.sampled_from(_NUMBERS)), lines[i], count=1)
        elif op == "long":
            lines[i] = lines[i] + draw(st.sampled_from(["9", " allocated 5 MiB", "x", "\t"])) * draw(st.integers(1000, 200_000))
        elif op == "repeat_block":
            lines[i:i] = lines[i: i + 5] * 3
    data = "\n".join(lines).encode("utf-8")
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["truncate", "flip", "nul", "bad_utf8", "crlf", "bom"]))
        k = draw(st.integers(0, max(0, len(data))))
        if op == "truncate":
            data = data[:k]
        elif op == "flip" and data:
            k = min(k, len(data) - 1)
            data = data[:k] + bytes([data[k] ^ draw(st.integers(1, 255))]) + data[k + 1:]
        elif op == "nul":
            data = data[:k] + b"\x00" * draw(st.integers(1, 600)) + data[k:]
        elif op == "bad_utf8":
            data = data[:k] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"])) + data[k:]
        elif op == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif op == "bom":
            data = b"\xef\xbb\xbf" + data
    return data


# -- invariants -------------------------------------------------------------------------------------

_NUM = re.compile(r"\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FACTORS = [1, 1e3, 1e6, 1e9, 1e12, 1e15, 1 << 10, 1 << 20, 1 << 30, 1 << 40, 1 << 50, 4096]


def _numbers(text: str) -> list[float]:
    out = []
    # the numbers as written (`1,234 MiB`) and each cell of a CSV row without blanks (`1767618000000,20480,0`)
    for m in (m for piece in (text, *re.split(r"[,;\t]", text)) for m in _NUM.finditer(piece)):
        try:
            v = float(m.group().replace(",", "").replace("_", ""))
        except ValueError:
            continue
        if math.isfinite(v):
            out.append(v)
    return out


def made_of_a_number(value: int, text: str) -> bool:
    """The byte count is a number written in the line, times a unit (rounding allowed)."""
    value = abs(value)
    for n in _numbers(text):
        for f in _FACTORS:
            if abs(n * f - value) <= max(1.0, 1e-6 * value):
                return True
    return False


def check_rows(parsed: Parsed, src: Source, where: str, guarded: bool) -> None:
    """Invariants of one Parsed against the file's lines. `guarded`: it went through ingest's guard."""
    # a binary format's evidence lines count its records (Parsed.lines), not text lines: no text to hold the numbers
    records = parsed.lines is not None
    frame = None if records else src.frame()
    n = parsed.lines if records else frame.height
    texts = None if records else frame["text"]
    for kind, df in (("samples", parsed.samples), ("events", parsed.events)):
        if df is None or df.height == 0:
            continue
        assert "line" in df.columns, f"{where}: {kind} without a line column"
        lines = df["line"]
        assert lines.null_count() == 0, f"{where}: {kind} row without a source line"
        bad = df.filter((pl.col("line") < 1) | (pl.col("line") > n))
        assert bad.height == 0, f"{where}: {kind} line outside the file (1..{n}): {bad['line'].to_list()[:5]}"
        if guarded and "time" in df.columns and df["time"].dtype != pl.Null:  # ingest's guard nulls them
            years = df["time"].dt.year().drop_nulls()
            if years.len():
                assert YEAR_RANGE[0] <= years.min() and years.max() <= YEAR_RANGE[1], \
                    f"{where}: {kind} time out of {YEAR_RANGE}: {years.min()}..{years.max()}"
        if "detail" in df.columns:
            for d in df["detail"].drop_nulls().head(50).to_list():
                assert isinstance(json.loads(d), dict), f"{where}: detail is not a JSON object: {d[:80]}"
        for col in ("bytes", "total_bytes"):
            if col not in df.columns:
                continue
            rows = df.filter(pl.col(col).is_not_null()).select("line", col, *(["series"] if "series" in df.columns else []))
            for r in rows.head(400).iter_rows(named=True):
                v, line = r[col], r["line"]
                delta = "delta" in (r.get("series") or "")
                assert v >= 0 or (delta and col == "bytes"), f"{where}: negative {col} {v} at line {line}"
                assert abs(v) <= MAX_BYTES, f"{where}: implausible {col} {v} at line {line}"
                if records:
                    continue
                text = texts[line - 1]
                assert re.search(r"\d", text), f"{where}: {col} {v} from line {line} that holds no digit: {text[:120]!r}"
                if kind == "samples" and col == "bytes" and r.get("series") not in DERIVED:
                    assert made_of_a_number(v, text), f"{where}: {col} {v} at line {line} is no number of it: {text[:160]!r}"


def _temp_file(data: bytes, name: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix="fuzz-"))
    p = d / name
    p.write_bytes(data)
    return p


def _cleanup(p: Path) -> None:
    try:
        p.unlink()
        p.parent.rmdir()
    except OSError:
        pass


def _opts(data: bytes) -> Options:
    return OPTS_DST if zlib.crc32(data) & 1 else OPTS


def check_sniff(head: list[str]) -> None:
    """Every parser's sniff on any head: None or a reason, never an exception (a binary format's
    sniff_bytes on the head's bytes)."""
    for m in parsers.TEXT_SNIFFERS:
        r = m.sniff(head)
        assert r is None or (isinstance(r, str) and r), f"{m.name}.sniff returned {r!r}"
    for m in parsers.BYTE_SNIFFERS:
        r = m.sniff_bytes("\n".join(head).encode("utf-8", "surrogatepass"))
        assert r is None or (isinstance(r, str) and r), f"{m.name}.sniff_bytes returned {r!r}"
    parsers.claim(head)


def check_file(data: bytes, name: str = "input.log") -> tuple[ingest.InputInfo | None, list[Parsed]]:
    """parse_one on these bytes: only ForensicsError may escape; every row holds the invariants."""
    p = _temp_file(data, name)
    try:
        try:
            src = Source.open(p, name)
            info, results = ingest.parse_one(src, _opts(data))
        except ForensicsError as e:
            msg = str(e)
            assert "\n" not in msg and msg.startswith(name), f"error message not one line for {name}: {msg!r}"
            return None, []
        assert info.skipped == sum(info.skip_reasons.values()), f"skipped {info.skipped} != {info.skip_reasons}"
        for m in info.problems:
            assert "\n" not in m and m.startswith(name), f"problem not one line `path: ...`: {m!r}"
        for r in results:
            check_rows(r, src, f"{name} ({info.format})", guarded=True)
        return info, results
    finally:
        _cleanup(p)


def check_forced(module, data: bytes, name: str = "input.log") -> bool:
    """When `module` claims these bytes' head, its own parse (and scan) hold the invariants without
    ingest's guard. Returns whether it claimed them."""
    p = _temp_file(data, name)
    try:
        try:
            src = Source.open(p, name)
            if not (module.sniff_bytes(src.first_bytes()) if module.sniff_bytes is not None else module.sniff(src.head())):
                return False
            parsed = module.parse(src, _opts(data))
            check_rows(parsed, src, f"{name} ({module.name}.parse)", guarded=False)
            if module.scan is not None:
                hits = src.frame().filter(pl.col("text").str.contains(module.scan.hint))
                if hits.height:
                    scanned = module.scan.read(hits, src, _opts(data))
                    if scanned is not None:
                        check_rows(scanned, src, f"{name} ({module.name}.scan)", guarded=False)
        except ForensicsError:
            return False
        return True
    finally:
        _cleanup(p)


def _edited(t) -> bytes:
    data, edits, keep = bytearray(t[0]), t[1], t[2]
    for at, junk in edits:
        i = int(at * (len(data) - 1))
        data[i:i + len(junk)] = junk
    return bytes(data[: max(2, int(len(data) * keep))])


def forced_cases(module, seeds):
    """The cases of a parser's own property (tests/test_fuzz_parsers.py and bench/fuzz.py): for a binary format, its seeds
    with bytes flipped, cut or spliced in anywhere; else its seeds damaged as real logs are, junk lines
    after them."""
    if module.sniff_bytes is not None:
        return st.tuples(st.sampled_from([s for _, s in seeds]),
                         st.lists(st.tuples(st.floats(0, 1), st.binary(max_size=8)), max_size=4),
                         st.floats(0.05, 1)).map(_edited)
    return st.tuples(mutated_seed(seeds), st.lists(line_strategy, max_size=8)).map(
        lambda t: t[0] + b"\n" + "\n".join(t[1]).encode("utf-8", "surrogatepass"))
