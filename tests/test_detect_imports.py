"""detect/ and timeline/ import no module that imports them back, and no module of theirs is over 900 lines."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("forensics/detect", "forensics/timeline")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    mods = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).glob("*.py")}
    graph = {}
    for m, p in mods.items():
        out = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.module:
                # `from pkg import mod` imports the module; `from mod import name`, the module it names
                names = [f"{n.module}.{a.name}" if f"{n.module}.{a.name}" in mods else n.module for a in n.names]
            else:
                continue
            out |= {t for t in names if t in mods and t != m}
        graph[m] = out
    return graph


def test_no_import_cycles():
    graph = _graph()

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == b:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    cycles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if reaches(b, a))
    assert cycles == []


def test_no_module_over_900_lines():
    long = {p.name: n for pkg in PACKAGES for p in (ROOT / pkg).glob("*.py")
            if (n := len(p.read_text().splitlines())) > 900}
    assert long == {}
