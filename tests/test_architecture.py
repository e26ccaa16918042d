"""The package keeps its shape: the imports of scripts/ftenv (read with ast, lazy ones included)
form no circle and at most MAX_FLOORS floors, run one way between the wings, and modules stay
short unless their docstring says why. Each rule is also shown failing on a copy of the package
with a planted violation."""

from __future__ import annotations

import ast
import shutil
from functools import cache
from pathlib import Path

import pytest

from support import ROOT

PACKAGE = ROOT / "scripts/ftenv"
MAX_FLOORS = 5  # modules in the longest import chain below the CLI
MAX_LINES = 300
LONG_REASON = "Long because"
#: The wings, lowest first: a module may import its own wing and the ones before it.
WINGS = ("stack", "attention", "report", "steps", "data", "train", "selfcheck")
#: Floor-0 modules every wing may import (they import nothing of ftenv but ftenv.text).
SHARED = {"ftenv", "ftenv.text", "ftenv.variables", "ftenv.outcome"}


def module_name(path: Path, package: Path) -> str:
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


def graph(package: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the package's modules it imports, module -> every name it imports).

    `from ftenv.stack import versions` is an edge to ftenv.stack.versions, not to the package
    ftenv.stack: a package counts only where a name is taken from its __init__."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    raw, edges = {}, {}
    for name, path in files.items():
        raw[name], edges[name] = set(), set()
        for base, taken in imports(path, name):
            modules = {f"{base}.{t}" for t in taken if f"{base}.{t}" in files}
            raw[name] |= {base} | modules
            edges[name] |= modules | ({base} if len(modules) < len(taken) or not taken else set())
        edges[name] = {n for n in edges[name] if n in files and n != name}
    return edges, raw


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


def wing_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else None


def wrong_way_imports(edges: dict[str, set[str]], raw: dict[str, set[str]]) -> list[str]:
    """Imports against the wings' direction, of the CLI, of imagetools, or of an unknown top module."""
    bad = []
    for name in sorted(edges):
        for target in sorted(edges[name]):
            if target == "ftenv.cli":
                bad.append(f"{name} imports ftenv.cli")
            src, dst = wing_of(name), wing_of(target)
            if src and dst and WINGS.index(dst) > WINGS.index(src):
                bad.append(f"{name} ({src}) imports {target} ({dst})")
            if src and dst is None and target not in SHARED and target != "ftenv.cli":
                bad.append(f"{name} ({src}) imports {target}, which is not floor 0")
        bad += [f"{name} imports {n}" for n in sorted(raw[name]) if n.split(".")[0] == "imagetools"]
    return bad


def floor_zero_breaches(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a shared floor-0 module other than ftenv.text: every wing imports them, so any
    more would pull a wing under every other."""
    return [
        f"{name} imports {target}"
        for name in sorted(SHARED & edges.keys())
        for target in sorted(edges[name])
        if target != "ftenv.text"
    ]


def long_modules(package: Path) -> list[str]:
    """Modules over MAX_LINES lines whose docstring gives no line starting with LONG_REASON."""
    bad = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        doc = ast.get_docstring(ast.parse(text)) or ""
        reasoned = any(line.strip().startswith(LONG_REASON) for line in doc.splitlines())
        if lines > MAX_LINES and not reasoned:
            bad.append(f"{path.relative_to(package.parent)} ({lines} lines)")
    return bad


# --- the tree as it is -----------------------------------------------------------------------------

EDGES, RAW = graph(PACKAGE)


def test_no_import_circle():
    assert cycles(EDGES) == []


def test_at_most_five_floors():
    """The CLI imports every command, so it stands on top of every chain: the floors are below it.
    The shared modules are floor 0 under every wing (the variables, the exit codes, the wording of
    numbers), so the floors are counted above them."""
    assert EDGES["ftenv.cli"], "the CLI imports its commands explicitly"
    below_cli = {m: e - SHARED for m, e in EDGES.items() if m != "ftenv.cli" and m not in SHARED}
    chain = longest_chain(below_cli)
    assert len(chain) <= MAX_FLOORS, " <- ".join(reversed(chain))


def test_imports_run_one_way_between_the_wings():
    assert wrong_way_imports(EDGES, RAW) == []
    # The rule sees the package: every wing is there, and lower wings are imported from above.
    assert {wing_of(m) for m in EDGES} >= set(WINGS)
    assert any(wing_of(m) == "steps" and wing_of(t) == "report" for m in EDGES for t in EDGES[m])


def test_the_shared_modules_stay_on_floor_zero():
    assert SHARED - {"ftenv"} <= EDGES.keys()
    assert floor_zero_breaches(EDGES) == []


def test_modules_are_short_or_say_why():
    assert long_modules(PACKAGE) == []


def test_the_host_tools_are_short_or_say_why_too():
    """imagetools and the scripts beside it (the GPU kit, the build and mutation scripts) keep the
    same rule, though they never go into the image."""
    assert long_modules(ROOT / "scripts/imagetools") == []
    long_scripts = [p for p in (ROOT / "scripts").glob("*.py") if len(p.read_text().splitlines()) > MAX_LINES]
    assert long_scripts == []


def test_every_folder_of_the_package_is_a_package():
    """A folder without __init__.py is a namespace package: pytest's and tools' rules for packages
    (and the package's own docstring) miss it."""
    folders = [d for d in PACKAGE.rglob("*") if d.is_dir() and d.name != "__pycache__"]
    assert folders and [d for d in folders if not (d / "__init__.py").exists()] == []


def test_the_graph_sees_the_package():
    assert len(EDGES) > 20 and "ftenv.text" in EDGES and EDGES["ftenv.text"] == set()


# --- each rule on a copy with a planted violation ---------------------------------------------------


@pytest.fixture
def copy(tmp_path) -> Path:
    dest = tmp_path / "ftenv"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def plant(package: Path, module: str, line: str) -> None:
    path = package / module
    path.write_text(path.read_text() + f"\n{line}\n")


def test_a_planted_circle_is_found(copy):
    before = cycles(graph(copy)[0])
    plant(copy, "attention/facts.py", "from ftenv.report import render")  # render imports facts
    assert [c for c in cycles(graph(copy)[0]) if c not in before] == [
        ["ftenv.attention.facts", "ftenv.report.render"]
    ]


def test_a_planted_long_chain_is_found(tmp_path):
    package = tmp_path / "ftenv"
    (package / "stack").mkdir(parents=True)
    for path in ("__init__.py", "stack/__init__.py", "stack/m0.py"):
        (package / path).write_text('"""x"""\n')
    for i in range(1, MAX_FLOORS + 1):
        (package / f"stack/m{i}.py").write_text(f"from ftenv.stack import m{i - 1}\n")
    chain = longest_chain(graph(package)[0])
    assert chain == [f"ftenv.stack.m{i}" for i in range(MAX_FLOORS, -1, -1)]
    assert len(chain) == MAX_FLOORS + 1
    (package / f"stack/m{MAX_FLOORS}.py").write_text('"""x"""\n')  # cut the top: within the limit
    assert len(longest_chain(graph(package)[0])) == MAX_FLOORS


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        (
            "attention/sdpa.py",
            "from ftenv.train import stall",
            "ftenv.attention.sdpa (attention) imports ftenv.train.stall",
        ),
        (
            "steps/stats.py",
            "import ftenv.train.finetune",
            "ftenv.steps.stats (steps) imports ftenv.train.finetune",
        ),
        ("stack/versions.py", "from ftenv.attention import facts", "ftenv.stack.versions (stack) imports"),
        ("steps/timer.py", "from ftenv import cli", "ftenv.steps.timer imports ftenv.cli"),
        ("report/render.py", "from .. import cli", "ftenv.report.render imports ftenv.cli"),
        ("text.py", "import imagetools.generated", "ftenv.text imports imagetools.generated"),
    ],
)
def test_a_planted_wrong_way_import_is_found(copy, module, line, expected):
    plant(copy, module, line)
    found = wrong_way_imports(*graph(copy))
    assert any(f.startswith(expected) for f in found), found


@pytest.mark.parametrize("module", ["outcome.py", "variables.py"])
def test_a_planted_import_in_a_floor_zero_module_is_found(copy, module):
    plant(copy, module, "from ftenv.steps import thresholds")
    name = "ftenv." + module.removesuffix(".py")
    assert floor_zero_breaches(graph(copy)[0]) == [f"{name} imports ftenv.steps.thresholds"]


def test_a_planted_long_module_is_found_unless_it_says_why(copy):
    before = long_modules(copy)
    body = "".join(f"X{i} = {i}\n" for i in range(MAX_LINES))
    (copy / "steps/planted.py").write_text('"""A planted module."""\n' + body)
    assert [m for m in long_modules(copy) if m not in before] == [
        f"ftenv/steps/planted.py ({MAX_LINES + 1} lines)"
    ]
    (copy / "steps/planted.py").write_text(
        f'"""A planted module.\n\n{LONG_REASON} it is a table of {MAX_LINES} constants."""\n' + body
    )
    assert long_modules(copy) == before
