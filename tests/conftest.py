"""Shared test helpers: where the real-world snippets are, and parsing a file through the registry."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics import parsers
from forensics.options import Options
from forensics.io.sources import Source

ROOT = Path(__file__).resolve().parent.parent
# the real-world snippets, one folder per format (named after its parser), inside the repository so that a fresh clone
# runs every test (tests/samples/README.md says where they come from)
REALWORLD = ROOT / "tests" / "samples"
SAMPLE_LOGS = ROOT / "sample_logs"


def realworld(name: str) -> Path:
    """The snippet of that file name, whichever family folder holds it."""
    found = sorted(REALWORLD.rglob(name))
    assert len(found) == 1, f"{name}: expected one file of that name under {REALWORLD}, found {len(found)}"
    return found[0]


def parse_file(path: Path | str, opts: Options | None = None, expect: str | None = None):
    """Claim and parse one file the way `report` does; returns (its Format, Parsed).
    With `expect`, asserts which parser claims it."""
    opts = opts or Options(tz="UTC")
    src = Source.open(Path(path), str(path))
    module, reason = parsers.claim(src.head())
    if expect is not None:
        assert module is not None, f"{path}: nobody claimed it ({reason})"
        assert module.name == expect, f"{path}: claimed by {module.name} ({reason}), expected {expect}"
    assert module is not None, reason
    return module, module.parse(src, opts)


@pytest.fixture
def utc_opts() -> Options:
    return Options(tz="UTC")


def queries_run(fn) -> int:
    """How many polars queries `fn()` runs (every eager query goes through one of these)."""
    from polars.lazyframe.frame import LazyFrame

    count = 0
    patched = {name: getattr(LazyFrame, name) for name in ("collect", "_collect_eager") if hasattr(LazyFrame, name)}

    def counting(orig):
        def run(self, *a, **k):
            nonlocal count
            count += 1
            return orig(self, *a, **k)
        return run

    for name, orig in patched.items():
        setattr(LazyFrame, name, counting(orig))
    try:
        fn()
    finally:
        for name, orig in patched.items():
            setattr(LazyFrame, name, orig)
    return count
