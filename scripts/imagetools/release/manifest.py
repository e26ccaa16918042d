"""The release manifest of one platform of an image (docker-stacks' "manifest"): markdown."""

from __future__ import annotations


def manifest(image: str, platform: str, labels: dict[str, str], pip_freeze: str, dpkg: str) -> str:
    """Markdown: the image, its labels, its Python packages (pip freeze) and OS packages (dpkg)."""
    lines = [f"## `{image}` ({platform})", "", "| label | value |", "|---|---|"]
    lines += [f"| `{k}` | `{val}` |" for k, val in sorted(labels.items())]
    pips = sorted(line.strip() for line in pip_freeze.splitlines() if line.strip())
    lines += ["", f"### Python packages ({len(pips)}, `pip freeze --all`)", "", "```", *pips, "```"]
    debs = sorted(tuple(line.split("\t")) for line in dpkg.splitlines() if line.strip())
    lines += ["", f"### OS packages ({len(debs)}, `dpkg-query -W`)", "", "| package | version | arch |"]
    lines += ["|---|---|---|", *(f"| {' | '.join(d)} |" for d in debs), ""]
    return "\n".join(lines)
