"""The package's layout holds: no import cycles (function-level imports count), no module over 900
lines, and no module reaching into another's private names."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "forensics"
MAX_LINES = 900


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
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
            out += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("forensics")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if not base.startswith("forensics"):
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
            found += [f"{p.relative_to(PKG.parent)}:{line}: {target}.{n}" for n in names
                      if n.startswith("_") and not n.startswith("__")]
        # module._name where module is a forensics module imported here
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("forensics") or \
                    isinstance(node, ast.ImportFrom) and node.level:
                for a in node.names:
                    aliases[a.asname or a.name] = True
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("forensics"):
                        aliases[a.asname or a.name.split(".")[0]] = True
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{p.relative_to(PKG.parent)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, found
