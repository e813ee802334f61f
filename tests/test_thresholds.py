"""Every number a detection rule uses lives in forensics/detect/thresholds.py with its reason, and
docs/detection.md's threshold table is that module, printed."""
from __future__ import annotations

import re
from pathlib import Path

from forensics.detect import thresholds

ROOT = Path(__file__).resolve().parent.parent


def test_docs_table_is_the_thresholds_module():
    doc = (ROOT / "docs" / "detection.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- thresholds:begin -->\n(.*?)\n<!-- thresholds:end -->", doc, re.S)
    assert block, "docs/detection.md has no generated threshold table"
    assert block.group(1) == thresholds.table(), "regenerate it: python -m forensics.detect.thresholds"


def test_every_threshold_has_a_reason_and_a_row():
    src = Path(thresholds.__file__).read_text(encoding="utf-8")
    names = re.findall(r"^([A-Z][A-Z0-9_]*) = ", src, re.M)
    rows = thresholds.table()
    assert len(names) > 40
    for name in names:
        if name.startswith("_"):
            continue
        assert f"| `{name}` |" in rows, f"{name} has no reason comment"
        assert isinstance(getattr(thresholds, name), (int, float, tuple))


def test_detect_modules_define_no_rule_numbers_of_their_own():
    # a rule's number defined again in a module would drift from the table
    names = set(re.findall(r"^([A-Z][A-Z0-9_]*) = ", Path(thresholds.__file__).read_text(encoding="utf-8"), re.M))
    for mod in ("changepoints", "patterns", "robust", "series", "lifetimes", "leaks"):
        src = (ROOT / "forensics" / "detect" / f"{mod}.py").read_text(encoding="utf-8")
        again = set(re.findall(r"^([A-Z][A-Z0-9_]*) = ", src, re.M)) & names
        assert not again, f"{mod}.py defines {again}"


def test_one_f1_target():
    doc = (ROOT / "docs" / "detection.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    bench = (ROOT / "bench" / "accuracy.py").read_text(encoding="utf-8")
    target = f"≥ {thresholds.F1_TARGET}"
    assert target in doc and target in readme
    assert not re.findall(r"F1[^|\n]*≥ 0\.9(?!8)", doc + readme)
    assert "F1_TARGET" in bench
