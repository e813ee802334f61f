"""Every number a detection rule uses lives in forensics/detect/thresholds.py with its reason, and
docs/detection.md's threshold table is that module, printed."""
from __future__ import annotations

import ast
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


DETECT = sorted(p for p in (ROOT / "forensics" / "detect").glob("*.py") if p.name != "thresholds.py")


def test_detect_modules_define_no_rule_numbers_of_their_own():
    # a rule's number defined again in a module would drift from the table
    names = set(re.findall(r"^([A-Z][A-Z0-9_]*) = ", Path(thresholds.__file__).read_text(encoding="utf-8"), re.M))
    assert len(DETECT) > 10
    for path in DETECT:
        again = set(re.findall(r"^([A-Z][A-Z0-9_]*) = ", path.read_text(encoding="utf-8"), re.M)) & names
        assert not again, f"{path.name} defines {again}"


def bare_numbers(source: str) -> list[tuple[int, object]]:
    """(line, value) of each number written in a comparison, or in the arithmetic a comparison makes,
    other than 0, 1 and 2 (nothing, one, a pair: counts no rule tunes) and an index or a slice's bound."""
    tree = ast.parse(source)
    inside_subscript = {id(n) for s in ast.walk(tree) if isinstance(s, ast.Subscript) for n in ast.walk(s.slice)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for n in ast.walk(node):
                if (isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.value not in (0, 1, 2)
                        and id(n) not in inside_subscript):
                    out.append((n.lineno, n.value))
    return out


def test_no_rule_compares_with_a_bare_number():
    # every threshold a rule compares with is a name from thresholds.py, with its reason in the table
    found = {path.name: bare_numbers(path.read_text(encoding="utf-8")) for path in DETECT}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_bare_number_check_sees_what_it_must():
    hits = bare_numbers("if a.size < 3 and b > 0.25 * c or d[3] == 2 or e[i + 5] > 1.0:\n    pass\n")
    assert hits == [(1, 3), (1, 0.25)]


def test_one_f1_target():
    doc = (ROOT / "docs" / "detection.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    bench = (ROOT / "bench" / "accuracy.py").read_text(encoding="utf-8")
    target = f"≥ {thresholds.F1_TARGET}"
    assert target in doc and target in readme
    assert not re.findall(r"F1[^|\n]*≥ 0\.9(?!8)", doc + readme)
    assert "F1_TARGET" in bench
