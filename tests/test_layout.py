"""The layout rules of docs/architecture.md ("Rules that keep it this way"), for the product (`forensics`)
and the evaluation package (`evaluation`):

- no import cycles (function-level imports count);
- no module over 900 lines, no function over 80 lines (those listed in LONG_FUNCTIONS excepted, and no
  function at all over 150);
- no module reaching into another's private names;
- detection imports no parser (the Xid catalog and the event de-duplication live outside parsers/);
- evaluation apart from tests and benchmarks: no test imports `bench`, `bench` imports no test, and
  `evaluation` imports neither.
Each list of exceptions must shrink when one is fixed: a listed exception that no longer holds fails."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("forensics", "evaluation")
MAX_LINES = 900
MAX_FUNCTION_LINES = 80
HARD_MAX_FUNCTION_LINES = 150
# the functions over MAX_FUNCTION_LINES when the rule was written (issue 44): split one, take it off the list
LONG_FUNCTIONS = {
    "forensics.parsers.sanitizer.text:_parse_frame", "forensics.report.charts:build_charts",
    "forensics.parsers.nvsmi.csvcells:read_plain", "forensics.parsers.sanitizer.xml_report:parse",
    "forensics.io.sources:discover", "forensics.parsers.kernel.oom:oom_events", "forensics.detect.series:analyze_xy",
    "forensics.cli:scan", "forensics.parsers.torch.oom:_read",
    "forensics.parsers.nvsmi.table:parse_lines", "forensics.detect.leaks:_leak_finding",
    "forensics.parsers.nvsmi.query:parse_lines", "forensics.report.markdown:render_markdown",
    "forensics.parsers.nvsmi.csvcolumns:infer_map", "forensics.parsers.torch.snapshot_pickle:PlainUnpickler._run",
    "forensics.parsers.jobs.containers:parse", "forensics.record:record", "forensics.parsers.torch.snapshot_reader:TraceReader._run",
    "forensics.report.verdict:verdict_ctx", "forensics.parsers.torch.snapshot_fast:_fields",
    "forensics.parsers.torch.snapshot_pickle:PlainUnpickler._rare",
}


def _ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import in the file, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if _ours(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if not _ours(base):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES:
                    out.append((sub, [], node.lineno))
                else:
                    out.append((base, [a.name], node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for target, _, _ in _imports(m, p):
            if target in MODULES and target != m:
                g[m].add(target)
    return g


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_no_module_over_the_limit():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_no_private_names_taken_from_another_module():
    found = []
    for m, p in MODULES.items():
        tree = ast.parse(p.read_text())
        for target, names, line in _imports(m, p):
            found += [f"{p.relative_to(ROOT)}:{line}: {target}.{n}" for n in names
                      if n.startswith("_") and not n.startswith("__")]
        # module._name where module is a forensics module imported here
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _ours(node.module or "") or \
                    isinstance(node, ast.ImportFrom) and node.level:
                for a in node.names:
                    aliases[a.asname or a.name] = True
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if _ours(a.name):
                        aliases[a.asname or a.name.split(".")[0]] = True
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, found


def _functions(path: Path):
    """(qualified name, lines) of every function and method in the file, nested ones as outer.inner."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                yield name, child.end_lineno - child.lineno + 1
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)
    yield from walk(ast.parse(path.read_text()), "")


def _long_functions() -> dict[str, int]:
    return {f"{m}:{name}": n for m, p in MODULES.items() for name, n in _functions(p) if n > MAX_FUNCTION_LINES}


def test_no_function_over_the_limit():
    long = _long_functions()
    assert not {k: n for k, n in long.items() if k not in LONG_FUNCTIONS}, \
        f"functions over {MAX_FUNCTION_LINES} lines: split them"
    assert not {k: n for k, n in long.items() if n > HARD_MAX_FUNCTION_LINES}


def test_the_long_functions_listed_are_still_long():
    assert LONG_FUNCTIONS <= set(_long_functions()), "take the functions now short enough off LONG_FUNCTIONS"


def _detect_parser_imports() -> set[tuple[str, str]]:
    return {(m, target) for m, p in MODULES.items() if m.startswith("forensics.detect")
            for target, _, _ in _imports(m, p) if target.startswith("forensics.parsers")}


def test_detection_imports_no_parser():
    found = _detect_parser_imports()
    assert not found, f"detection imports parsers: {sorted(found)}"


def test_importing_detection_loads_no_parser():
    code = "import sys, forensics.detect; print(sorted(m for m in sys.modules if m.startswith('forensics.parsers')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out


def _import_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


BENCH = sorted((ROOT / "bench").glob("*.py"))
TESTS = sorted((ROOT / "tests").rglob("*.py"))
TEST_MODULES = {p.stem for p in TESTS if p.stem.startswith("test_") or p.stem == "conftest"}


def test_no_test_imports_bench():
    bench = {p.stem for p in BENCH}
    found = [f"{p.relative_to(ROOT)}: {sorted(_import_roots(p) & bench)}" for p in TESTS if _import_roots(p) & bench]
    # nor puts bench/ on its path
    found += [f"{p.relative_to(ROOT)}: {m.group()}" for p in TESTS
              for m in re.finditer(r"sys\.path.*[\"']bench[\"'].*", p.read_text())]
    assert not found, found


def test_bench_imports_no_test():
    found = [f"{p.relative_to(ROOT)}: {sorted(_import_roots(p) & TEST_MODULES)}" for p in BENCH
             if _import_roots(p) & TEST_MODULES]
    assert not found, found


def test_evaluation_imports_neither_tests_nor_bench():
    others = TEST_MODULES | {p.stem for p in BENCH} | {"tests", "bench"}
    found = [f"{p.relative_to(ROOT)}: {sorted(_import_roots(p) & others)}"
             for p in MODULES.values() if p.parts[len(ROOT.parts)] == "evaluation" and _import_roots(p) & others]
    assert not found, found
