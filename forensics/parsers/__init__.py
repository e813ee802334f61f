"""The parser list, derived from the parser modules themselves: a module of this package with a line
that starts `FORMAT = Format(` is a parser, and only that declaration is read (contract.py says what
each field is). Adding a format = its module, its samples (tests/samples/<name>/) and its tests.

The sniffing order, in one sentence: formats without a `scan` first, then those with one (their lines
turn up inside other formats' files, so their sniffs are the more generic), then the `fallback`;
within that, a format before those its `before` names and after those its `after` names, ties by
name. A cycle, or a name no format has, fails at import. The first format whose `sniff_bytes`
answers claims a file, else the first whose `sniff` does.

Regexes spell a digit `[0-9]`, not `\\d`: polars keeps only the last 32 compiled regexes per thread and
a job uses more, so most are compiled again for every job (some for every file), and Unicode's `\\d`
(60-odd ranges) is much dearer to compile. Plain strings go to polars with `literal=True` (no regex).
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from forensics.parsers.contract import Format

_DECLARES = b"\nFORMAT = Format("


def _modules() -> list[str]:
    """The package's modules that declare a format, by path (a cheap byte search: nothing else is
    imported to find them)."""
    root = Path(__file__).parent
    return [".".join(p.relative_to(root).with_suffix("").parts) for p in sorted(root.rglob("*.py"))
            if _DECLARES in p.read_bytes()]


def _imported(modules: list[str]) -> dict[str, Format]:
    """{module: its FORMAT}."""
    out: dict[str, Format] = {}
    for name in modules:
        fmt = getattr(importlib.import_module(f"{__name__}.{name}"), "FORMAT", None)
        if not isinstance(fmt, Format):
            raise TypeError(f"{__name__}.{name}: a parser module ends with FORMAT = Format(...)")
        out[name] = fmt
    return out


def checked(formats: list[Format]) -> list[Format]:
    """The formats in sniffing order, checked together: names unique, every name a field gives is a
    format's, one fallback at most, no cycle in the order."""
    names = [f.name for f in formats]
    taken = sorted({n for n in names if names.count(n) > 1})
    if taken:
        raise TypeError(f"format names declared twice: {taken}")
    for field in ("covers", "before", "after"):
        unknown = {c for f in formats for c in getattr(f, field)} - set(names)
        if unknown:
            raise TypeError(f"{field} names no format: {sorted(unknown)}")
    fallback = [f.name for f in formats if f.fallback]
    if len(fallback) > 1:
        raise TypeError(f"one fallback format at most, not {fallback}")
    return _sniff_order(formats)


def _group(f: Format) -> int:
    return 2 if f.fallback else 1 if f.scan is not None else 0


def _sniff_order(formats: list[Format]) -> list[Format]:
    """The formats in the order they are tried (the module docstring's sentence): a topological sort
    of the groups' and the declarations' edges, the first ready name first."""
    by_name = {f.name: f for f in formats}
    later: dict[str, set[str]] = {n: set() for n in by_name}     # a -> the formats tried after a
    for f in formats:
        later[f.name] |= set(f.before)
        for a in f.after:
            later[a].add(f.name)
        later[f.name] |= {g.name for g in formats if _group(g) > _group(f)}
    waits = {n: 0 for n in by_name}
    for succ in later.values():
        for n in succ:
            waits[n] += 1
    ready = sorted(n for n, w in waits.items() if w == 0)
    order: list[Format] = []
    while ready:
        n = ready.pop(0)
        order.append(by_name[n])
        for m in later[n]:
            waits[m] -= 1
            if waits[m] == 0:
                ready.append(m)
        ready.sort()
    if len(order) < len(formats):
        stuck = sorted(n for n, w in waits.items() if w > 0)
        raise TypeError(f"the sniffing order has a cycle among {stuck}: their before/after contradict each "
                        "other or the groups (formats without a scan, then with one, then the fallback)")
    return order


_DECLARED = _imported(_modules())
PARSERS: list[Format] = checked(list(_DECLARED.values()))
BY_NAME: dict[str, Format] = {f.name: f for f in PARSERS}
MODULE: dict[str, str] = {f.name: f"{__name__}.{m}" for m, f in _DECLARED.items()}   # format -> its module
SCANNERS: list[Format] = [f for f in PARSERS if f.scan is not None]
BYTE_SNIFFERS: list[Format] = [f for f in PARSERS if f.sniff_bytes is not None]
TEXT_SNIFFERS: list[Format] = [f for f in PARSERS if f.sniff is not None]


def reference(fmt: Format) -> str:
    """A format's reference text: its module's docstring."""
    return (sys.modules[MODULE[fmt.name]].__doc__ or "").strip()


def described(fmt: Format) -> str:
    """What `gpu-forensics formats NAME` prints: the declaration, where it is tried, the reference."""
    rules = [f"{word} {', '.join(names)}" for word, names in (("before", fmt.before), ("after", fmt.after)) if names]
    rules += ["after all others (fallback)"] if fmt.fallback else []
    tried = ("by its first bytes, before any format of text lines" if fmt.sniff_bytes else
             "; ".join([f"{PARSERS.index(fmt) + 1} of {len(PARSERS)}"] + rules))
    scan = "; also looked for inside any text file (scan)" if fmt.scan else ""
    return (f"{fmt.name}: {fmt.files}\nyields: {fmt.yields}\nmodule: {MODULE[fmt.name]}\nsamples: {fmt.samples}/\n"
            f"tried: {tried}{scan}\n\n{reference(fmt)}")


def claim_bytes(first: bytes) -> tuple[Format | None, str]:
    """The first binary format that claims a file by its first bytes, and why; or None."""
    for f in BYTE_SNIFFERS:
        reason = f.sniff_bytes(first)
        if reason:
            return f, reason
    return None, ""


def claim_file(src) -> tuple[Format | None, str]:
    """Who claims a source: by its bytes first, else by its first lines (which raises InputError for
    a file that is not text)."""
    fmt, reason = claim_bytes(src.first_bytes())
    return (fmt, reason) if fmt is not None else claim(src.head())


def claim(head: list[str]) -> tuple[Format | None, str]:
    """The first format that claims these head lines, and why; or None and a reason for nobody."""
    for f in TEXT_SNIFFERS:
        reason = f.sniff(head)
        if reason:
            return f, reason
    if not any(line.strip() for line in head):
        return None, "empty file"
    return None, "no parser recognizes its first lines"
