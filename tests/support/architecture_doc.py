"""Reads docs/architecture.md against the tree it describes: its wing list, and the folders and
top-level modules it must name. A page about the layout goes stale the day a folder moves unless a
test compares it with the folders that are there."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path


def section(text: str, heading: str) -> str:
    """The text under the first "## " heading that starts with heading, to the next one ("" if none)."""
    parts = re.split(r"^## ", text, flags=re.M)
    return next((p for p in parts[1:] if p.startswith(heading)), "")


def listed_wings(text: str) -> list[str]:
    """The wings of the doc's table (rows "| `wing` | ..." under "## The package"), in its order."""
    return re.findall(r"^\| `(\w+)` \|", section(text, "The package"), re.M)


def folders(top: Path) -> list[str]:
    """Every folder under top, as a path relative to it (caches left out)."""
    return sorted(
        d.relative_to(top).as_posix() for d in top.rglob("*") if d.is_dir() and "__pycache__" not in d.parts
    )


def problems(text: str, root: Path, wings: Sequence[str], shared: Iterable[str]) -> list[str]:
    """Where the doc and the tree under root disagree: the wings in order, and every folder and
    top-level module named."""
    package, bad = root / "scripts/ftenv", []
    listed = listed_wings(text)
    if listed != list(wings):
        bad.append(f"the doc's wings, lowest first, are {listed}; the package's are {list(wings)}")
    for folder in folders(package):
        if folder not in wings and f"`{folder}/`" not in text:
            bad.append(f"scripts/ftenv/{folder}/ is not a wing and the doc does not name it")
    modules = {f"ftenv.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    bad += [
        f"the doc does not name {m}"
        for m in sorted(modules | set(shared) - {"ftenv"})
        if f"`{m}`" not in text
    ]
    for folder in folders(root / "scripts/imagetools"):
        if f"`imagetools/{folder}/`" not in text:
            bad.append(f"scripts/imagetools/{folder}/ is not named in the doc")
    for folder in folders(root / "tests"):
        top, _, wing = folder.partition("/")
        if "/" not in folder and f"`tests/{folder}/`" not in text:
            bad.append(f"tests/{folder}/ is not named in the doc")
        if top == "ftenv" and wing and "/" not in wing and wing not in wings:
            bad.append(f"tests/ftenv/{wing}/ mirrors no wing of the package")
    return bad


def readme_problems(readme: str, root: Path, wings: Sequence[str]) -> list[str]:
    """Where the README's short "## Repository" summary and the tree disagree: it lists the wings
    (in parentheses after "one way") in their order, and links docs/architecture.md."""
    summary = section(readme, "Repository\n")
    found = re.search(r"one way \(([^)]*)\)", summary)
    named = [w.strip() for w in found.group(1).split(",")] if found else []
    bad = [] if named == list(wings) else [f"the README's wings are {named}; the package's are {list(wings)}"]
    if "(docs/architecture.md)" not in summary:
        bad.append("the README's Repository section does not link docs/architecture.md")
    return bad
