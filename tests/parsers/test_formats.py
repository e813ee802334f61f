"""Every parser module ends with one valid `FORMAT = Format(...)` (forensics/parsers/contract.py), and the
parser list is built from those declarations only: the modules found by their declaration, fields
present and of the right type (checked when a declaration is made, so importing the list checks every
one), names unique, every format's samples folder present, every scan's regexes valid, and the
sniffing order the one the declarations give (parsers/__init__.py states it in a sentence)."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import parsers
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.contract import Format, Scan

ROOT = Path(__file__).resolve().parents[2]


def _sniff(head):
    return None


def _parse(src, opts):
    return None


@pytest.mark.parametrize("name, module", sorted(parsers.MODULE.items()))
def test_every_found_module_ends_with_its_format(name, module):
    module = importlib.import_module(module)
    assert isinstance(module.FORMAT, Format)
    assert parsers.BY_NAME[name] is module.FORMAT
    assert module.FORMAT.parse.__module__.startswith("forensics.parsers.")


def test_every_module_that_declares_a_format_is_found():
    """A declaration written so that the byte search misses it (not at the start of a line) would
    leave its format out of the list without an error."""
    declaring = {}
    for info in pkgutil.walk_packages(parsers.__path__, "forensics.parsers."):
        fmt = getattr(importlib.import_module(info.name), "FORMAT", None)
        if isinstance(fmt, Format):
            declaring[fmt.name] = info.name
    assert declaring == parsers.MODULE


def test_names_unique_and_every_format_listed_once():
    names = [f.name for f in parsers.PARSERS]
    assert len(names) == len(set(names)) == len(parsers.MODULE)
    assert all(f.files and f.yields for f in parsers.PARSERS)


def _own_samples(fmt: Format) -> list[Path]:
    """The files of the format's samples folder that it claims."""
    folder = ROOT / fmt.samples
    assert folder.is_dir(), f"{fmt.name}: no samples folder {fmt.samples}/"
    return [p for p in sorted(folder.iterdir()) if p.is_file() and parsers.claim_file(Source.open(p))[0] is fmt]


@pytest.mark.parametrize("fmt", parsers.PARSERS, ids=lambda f: f.name)
def test_every_format_has_its_samples_folder(fmt):
    assert _own_samples(fmt), f"{fmt.name}: {fmt.samples}/ holds no sample it claims"


@pytest.mark.parametrize("fmt", [f for f in parsers.PARSERS if f.reader is not None], ids=lambda f: f.name)
def test_every_reader_feeds_and_finishes(fmt):
    reader = fmt.reader(Source.open(_own_samples(fmt)[0]), Options(tz="UTC"))
    assert callable(reader.feed) and callable(reader.finish)


def test_covers_and_sniff_kinds_are_consistent():
    names = {f.name for f in parsers.PARSERS}
    assert all(c in names and c != f.name for f in parsers.PARSERS for c in f.covers)
    assert {f.name for f in parsers.BYTE_SNIFFERS}.isdisjoint(f.name for f in parsers.TEXT_SNIFFERS)
    assert all(f.reads_whole for f in parsers.BYTE_SNIFFERS)


@pytest.mark.parametrize("kwargs, says", [
    (dict(name="Bad Name", sniff=_sniff, parse=_parse), "lowercase words"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, files="x"), "yields must be one line"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, files="two\nlines", yields="y"), "files must be one line"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, files="x", yields="y", before=["a"]), "before must be a tuple"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, files="x", yields="y", after=("x-log",)), "names the format itself"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, files="x", yields="y", fallback=True, before=("a",)),
     "a fallback format"),
    (dict(name="x-log", parse=_parse), "one of sniff and sniff_bytes"),
    (dict(name="x-log", sniff=_sniff, sniff_bytes=_sniff, parse=_parse), "one of sniff and sniff_bytes"),
    (dict(name="x-log", sniff=_sniff, parse="parse"), "parse must be a function"),
    (dict(name="x-log", sniff_bytes=_sniff, parse=_parse, reader=object), "has no reader"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, covers=["kernel-log"]), "covers must be a tuple"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, samples="/tmp/x"), "samples must be a folder relative"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, scan=Scan(_parse, "a(", "a", ("a",))), "scan.hint is not a valid"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, scan=Scan(_parse, "a", "a", ("A",))), "scan.block_literals"),
    (dict(name="x-log", sniff=_sniff, parse=_parse, scan=Scan(_parse, "a", "a", ())), "scan.block_literals"),
])
def test_a_bad_declaration_fails_naming_its_field(kwargs, says):
    with pytest.raises(TypeError, match=says):
        Format(**kwargs)


def test_a_good_declaration_passes():
    f = _fmt("x-log", scan=Scan(_parse, "a[0-9]", "a", ("a",), event_lines=True))
    assert f.samples == "tests/samples/x-log" and not f.reads_whole
    assert Format(name="x-log", sniff_bytes=_sniff, parse=_parse, samples="sample_logs/x", files="x",
                  yields="y").reads_whole


# ---- the sniffing order ------------------------------------------------------------------------

_SCAN = Scan(_parse, "a", "a", ("a",))


def _fmt(name, **kw):
    return Format(name=name, sniff=_sniff, parse=_parse, files="x files", yields="y", **kw)


def _order(*formats):
    return [f.name for f in parsers.checked(list(formats))]


def test_the_order_is_by_name_then_groups_then_declarations():
    assert _order(_fmt("b"), _fmt("a"), _fmt("c")) == ["a", "b", "c"]
    # a format with a scan is tried after those without; the fallback after all
    assert _order(_fmt("z", fallback=True), _fmt("a", scan=_SCAN), _fmt("b")) == ["b", "a", "z"]
    # within its group, a format before those its `before` names, after those its `after` names
    assert _order(_fmt("a"), _fmt("b"), _fmt("c", before=("a",))) == ["b", "c", "a"]
    assert _order(_fmt("a", after=("c",)), _fmt("b"), _fmt("c")) == ["b", "c", "a"]
    # a declaration may also cross the groups forwards: nothing contradicts it
    assert _order(_fmt("a", scan=_SCAN, before=("b",)), _fmt("b", scan=_SCAN)) == ["a", "b"]


@pytest.mark.parametrize("formats, says", [
    ((_fmt("a", before=("b",)), _fmt("b", before=("a",))), r"cycle among \['a', 'b'\]"),
    ((_fmt("a", scan=_SCAN, before=("b",)), _fmt("b")), "cycle"),         # a scan format before one without
    ((_fmt("a", after=("z",)), _fmt("z", fallback=True)), "cycle"),      # anything after the fallback
    ((_fmt("a", before=("nope",)),), r"before names no format: \['nope'\]"),
    ((_fmt("a", covers=("nope",)),), "covers names no format"),
    ((_fmt("a"), _fmt("a")), "declared twice"),
    ((_fmt("a", fallback=True), _fmt("b", fallback=True)), "one fallback format at most"),
])
def test_a_contradiction_fails_at_import(formats, says):
    with pytest.raises(TypeError, match=says):
        parsers.checked(list(formats))


def test_every_declared_rule_holds_in_the_order():
    names = [f.name for f in parsers.PARSERS]
    at = {n: i for i, n in enumerate(names)}
    for f in parsers.PARSERS:
        assert all(at[f.name] < at[b] for b in f.before), f.name
        assert all(at[a] < at[f.name] for a in f.after), f.name
    groups = [2 if f.fallback else 1 if f.scan else 0 for f in parsers.PARSERS]
    assert groups == sorted(groups)
    assert parsers.PARSERS[-1].fallback and parsers.PARSERS[-1].name == "step-markers"


# ---- `gpu-forensics formats`: the list the README and docs/formats.md point to ---------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "forensics", "formats", *args], capture_output=True, text=True,
                          timeout=120)


def test_the_formats_command_lists_every_declaration_in_sniffing_order():
    done = _cli()
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert rows == [[f.name, f.files, f.yields] for f in parsers.PARSERS]


def test_the_formats_command_prints_a_formats_reference():
    done = _cli("pytorch-memory-summary")
    assert done.returncode == 0, done.stderr
    fmt = parsers.BY_NAME["pytorch-memory-summary"]
    assert done.stdout.startswith(f"pytorch-memory-summary: {fmt.files}\n")
    assert "before pytorch-oom" in done.stdout and "(scan)" in done.stdout
    assert parsers.reference(fmt) in done.stdout and parsers.reference(fmt).startswith(
        importlib.import_module("forensics.parsers.torch.memsummary").__doc__.strip()[:40])
    refused = _cli("no-such-format")
    assert refused.returncode == 2 and "no such format" in refused.stderr and "Traceback" not in refused.stderr
