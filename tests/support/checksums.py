"""sha256 of every file under some folders: what a command reads must be the same after it ran."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sums(*folders: Path) -> dict[str, str]:
    """{path: sha256} of every file under the folders; a link as where it points (never followed)."""
    found = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_symlink():
                found[str(p)] = f"-> {p.readlink()}"
            elif p.is_file():
                found[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return found
