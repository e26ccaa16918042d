"""A Python package's shape, read with ast: the import graph of its modules (its longest chain,
which import-linter's contracts do not measure) and its modules too long to read. The rules and
their limits are tests/test_architecture.py's; this is the reading, kept apart so the test file
holds only the rules and the plantings that show each failing."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path


def module_name(path: Path, package: Path) -> str:
    """The dotted name of a file of the package (a package by its __init__.py)."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """(module, names taken from it) of each import of the file, relative imports resolved."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here[: len(here) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append((base, [alias.name for alias in node.names]))
    return found


def graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports.

    `from ftenv.stack import versions` is an edge to ftenv.stack.versions, not to the package
    ftenv.stack: a package counts only where a name is taken from its __init__."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    edges = {}
    for name, path in files.items():
        edges[name] = set()
        for base, taken in imports(path, name):
            modules = {f"{base}.{t}" for t in taken if f"{base}.{t}" in files}
            edges[name] |= modules | ({base} if len(modules) < len(taken) or not taken else set())
        edges[name] = {n for n in edges[name] if n in files and n != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest import chain, importer first (edges inside a circle are not followed)."""
    in_circle = {m for c in cycles(edges) for m in c}

    @cache
    def chain(v: str) -> tuple[str, ...]:
        below = [chain(w) for w in sorted(edges[v]) if not (v in in_circle and w in in_circle)]
        return (v, *max(below, key=len, default=()))

    return list(max((chain(v) for v in sorted(edges)), key=len))


def wing_of(name: str, wings: tuple[str, ...]) -> str | None:
    """The wing of a module (`pkg.WING.module`), or None for a top-level module of the package."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in wings else None


def long_modules(package: Path, *, max_lines: int, reason: str) -> list[str]:
    """Modules over max_lines lines whose docstring gives no line starting with reason."""
    bad = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        doc = ast.get_docstring(ast.parse(text)) or ""
        reasoned = any(line.strip().startswith(reason) for line in doc.splitlines())
        if lines > max_lines and not reasoned:
            bad.append(f"{path.relative_to(package.parent)} ({lines} lines)")
    return bad


def plant(package: Path, module: str, line: str) -> None:
    """Append a line (a planted violation) to a module of a copy of the package."""
    path = package / module
    path.write_text(path.read_text() + f"\n{line}\n")
