"""Every parser module ends with one valid `FORMAT = Format(...)` (forensics/parsers/contract.py), and the
parser list is built from those declarations only: fields present and of the right type (checked when
a declaration is made, so importing the list checks every one), names unique, every format's samples
folder present, every scan's regexes valid."""
from __future__ import annotations

import importlib
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


@pytest.mark.parametrize("entry", parsers._ORDER)
def test_every_listed_module_ends_with_its_format(entry):
    module = importlib.import_module(f"forensics.parsers.{entry}")
    assert isinstance(module.FORMAT, Format)
    assert parsers.BY_NAME[module.FORMAT.name] is module.FORMAT


def test_names_unique_and_every_format_listed_once():
    names = [f.name for f in parsers.PARSERS]
    assert len(names) == len(set(names)) == len(parsers._ORDER)


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
    f = Format(name="x-log", sniff=_sniff, parse=_parse, scan=Scan(_parse, "a[0-9]", "a", ("a",), event_lines=True))
    assert f.samples == "tests/samples/x-log" and not f.reads_whole
    assert Format(name="x-log", sniff_bytes=_sniff, parse=_parse, samples="sample_logs/x").reads_whole
