"""What a doc names and whether it exists: its relative links (anchors included), the repository
paths it mentions, the `ftenv` commands it tells users to run, and the TORCH_CUDNN_SDPA_* variables
and values it gives. A doc that names something the code lacks sends a user nowhere."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ftenv import cli, variables
from ftenv.commands import eval as eval_command

#: Every TORCH_CUDNN_SDPA_* name the docs may mention: the switch, and the others that section 8 of
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


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, inline Markdown dropped, every character that
    is not a letter, digit, space, hyphen or underscore removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text, repeated headings numbered as GitHub does (-1, -2),
    headings inside fenced code blocks left out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.*?)#*$", text, re.M):
        slug = github_slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def _text(dest: Path, path: Path, text: str) -> str:
    """The linked file's text: the text being checked when the link points into its own page."""
    return text if dest.resolve() == path.resolve() else dest.read_text()


def broken_links(path: Path, text: str) -> list[str]:
    """The links of path's text whose file, or heading anchor in a .md file, does not exist."""
    bad = []
    for target in links(text):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        missing = not dest.exists()
        if missing or (anchor and dest.suffix == ".md" and anchor not in anchors(_text(dest, path, text))):
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


def _parsers() -> argparse.ArgumentParser:
    """The `ftenv` parser as ftenv.cli assembles it."""
    parser = argparse.ArgumentParser(prog="ftenv")
    sub = parser.add_subparsers()
    for command in cli.COMMANDS:
        command.add_parser(sub)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def command_lines(text: str) -> list[str]:
    """What follows `ftenv ` on each command a text shows: in fenced blocks (backslash continuations
    joined) and in code spans. A line of output (`ftenv finetune: ...`) is not a command."""
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            found += re.findall(r"(?<![\w/\[-])ftenv ([a-z].*)", line)
    found += re.findall(r"`ftenv ([a-z][^`]*)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [c for c in found if not c.split()[0].endswith(":")]


def unknown_options(text: str) -> list[str]:
    """`ftenv SUB --option` a text shows whose (sub)command has no such option."""
    root = _parsers()
    bad = []
    for line in command_lines(text):
        words = line.split()
        parser, name = root, "ftenv"
        while words and words[0] in _subparsers(parser):
            name += f" {words[0]}"
            parser = _subparsers(parser)[words.pop(0)]
        if name == "ftenv eval":  # `ftenv eval TEST MODEL...` is `ftenv eval decode ...` (ftenv.cli)
            words = eval_command.with_default_action(["eval", *words])[1:]
            name += f" {words[0]}"
            parser = _subparsers(parser)[words.pop(0)]
        for word in words:
            if word in ("--", "|", "&&", ";") or word.startswith(("++", "#")):
                break
            option = word.split("=", 1)[0].strip("`\"'[](),;")
            if option.startswith("--") and len(option) > 2 and option not in parser._option_string_actions:
                bad.append(f"{name} {option}")
    return bad
