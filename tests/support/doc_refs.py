"""What a doc names and whether it exists: its relative links (anchors included), the repository
paths it mentions, the `ftenv` commands it tells users to run, and the TORCH_CUDNN_SDPA_* variables
and values it gives. A doc that names something the code lacks sends a user nowhere."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ftenv import cli, variables

#: Every TORCH_CUDNN_SDPA_* name the docs may mention: the switch, and the others that section 7 of
#: docs/cudnn-sdpa-guide.md speaks of.
KNOWN_VARS = {
    variables.SDPA_DEPRIORITIZED,  # the switch, read by torch >= 2.10
    variables.SDPA_PREFERRED,  # torch 2.9's switch (PR #162073): "=0" opts out there
    "TORCH_CUDNN_SDPA_CACHE_DEBUG",  # prints the plan cache's hit rate
    "TORCH_CUDNN_SDPA_AVOID_RECOMPILE",  # only without a mask: no help
    "TORCH_CUDNN_SDPA_ENABLED",  # does not exist in 2.9 to 2.11 (said so)
}


def links(text: str) -> list[str]:
    """The relative link targets of a Markdown text (web addresses left out)."""
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+://", t)]


def broken_links(path: Path, text: str) -> list[str]:
    """The links of path's text whose file, or heading anchor in a .md file, does not exist."""
    bad = []
    for target in links(text):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md":
            slugs = {
                re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
            }
            if anchor not in slugs:
                bad.append(target)
    return bad


def bad_variable_mentions(text: str) -> list[str]:
    """TORCH_CUDNN_SDPA_* names torch does not read, and values of the switch other than 0 and 1."""
    bad = [name for name in set(re.findall(r"TORCH_CUDNN_SDPA_[A-Z_]+", text)) if name not in KNOWN_VARS]
    for line in text.splitlines():
        for value in re.findall(rf"{variables.SDPA_DEPRIORITIZED}=([A-Za-z0-9_-]*)", line):
            if value not in ("0", "1"):
                bad.append(f"{variables.SDPA_DEPRIORITIZED}={value}")
    return bad


def ftenv_commands(text: str) -> set[str]:
    """The `ftenv` subcommands a text tells its reader to run (in code spans or command lines)."""
    return set(re.findall(r"`ftenv ([a-z][a-z-]*)", text)) | set(
        re.findall(r"^\s*ftenv ([a-z][a-z-]*)", text, re.M)
    )


def known_commands() -> set[str]:
    """The subcommands the `ftenv` parser has."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    for command in cli.COMMANDS:
        command.add_parser(sub)
    return set(sub.choices)


def repo_paths(text: str) -> set[str]:
    """The paths under docs/, tests/, scripts/ or docker/ a text mentions."""
    return set(re.findall(r"(?<![\w/])((?:docs|tests|scripts|docker)/[\w./-]*\w)", text))
