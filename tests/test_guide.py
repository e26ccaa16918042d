"""docs/cudnn-sdpa-guide.md and docs/finetune.md say only what the image and the code do: links
resolve, variable names and values match the image and torch, the quoted output lines are the ones
the code prints, the commands exist, the figures taken from FunASR issue #3704 are the issue's
(tests/funasr_issue_3704.py), and the README's first screen links the guide. Each check is also
shown failing on a broken copy."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

import funasr_issue_3704 as issue
from ftenv import cli
from ftenv.build import versions
from ftenv.report import render, sdpa
from ftenv.steps import hints

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs/cudnn-sdpa-guide.md"
FINETUNE = ROOT / "docs/finetune.md"
DOCS = [GUIDE, FINETUNE]
#: Every TORCH_CUDNN_SDPA_* name the docs may mention: the switch, and what section 7 says of others.
KNOWN_VARS = {
    sdpa.ENV_VAR,  # the switch, read by torch >= 2.10
    sdpa.ENV_VAR_2_9,  # torch 2.9's switch (PR #162073): "=0" opts out there
    "TORCH_CUDNN_SDPA_CACHE_DEBUG",  # prints the plan cache's hit rate
    "TORCH_CUDNN_SDPA_AVOID_RECOMPILE",  # only without a mask: no help
    "TORCH_CUDNN_SDPA_ENABLED",  # does not exist in 2.9 to 2.11 (said so)
}
README_FIRST_SCREEN = 30  # lines
#: The torch the images pin, as the rule reads it (the guide's sample lines are for this stack).
TORCH = versions.load(ROOT / "versions.toml").default.torch


def links(text: str) -> list[str]:
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+://", t)]


def broken_links(path: Path, text: str) -> list[str]:
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


@pytest.mark.parametrize("path", [*DOCS, ROOT / "README.md"], ids=lambda p: p.name)
def test_links_resolve(path):
    assert broken_links(path, path.read_text()) == []


def test_broken_link_is_caught():
    text = GUIDE.read_text().replace("(finetune.md)", "(fine-tune.md)", 1)
    assert broken_links(GUIDE, text) == ["fine-tune.md"]
    text = GUIDE.read_text().replace("#the-start-up-report", "#the-startup-report", 1)
    assert broken_links(GUIDE, text) == ["../README.md#the-startup-report"]


def test_readme_first_screen_links_the_guide_and_the_examples():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:README_FIRST_SCREEN])
    assert "(docs/cudnn-sdpa-guide.md)" in first
    assert "(docs/finetune.md)" in first


def bad_variable_mentions(text: str) -> list[str]:
    bad = [name for name in set(re.findall(r"TORCH_CUDNN_SDPA_[A-Z_]+", text)) if name not in KNOWN_VARS]
    for line in text.splitlines():
        for value in re.findall(rf"{sdpa.ENV_VAR}=([A-Za-z0-9_-]*)", line):
            if value not in ("0", "1"):
                bad.append(f"{sdpa.ENV_VAR}={value}")
    return bad


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_variable_names_and_values(path):
    assert bad_variable_mentions(path.read_text()) == []


def test_variable_checks_catch_mistakes():
    assert bad_variable_mentions("set TORCH_CUDNN_SDPA_DEPRIORITISED=1") == ["TORCH_CUDNN_SDPA_DEPRIORITISED"]
    assert bad_variable_mentions("export TORCH_CUDNN_SDPA_DEPRIORITIZED=true") == [
        "TORCH_CUDNN_SDPA_DEPRIORITIZED=true"
    ]


def test_the_value_the_guide_gives_is_the_images_and_torchs():
    parser = DockerfileParser(fileobj=open(ROOT / "docker/Dockerfile", "rb"))  # noqa: SIM115
    baked = [i["value"] for i in parser.structure if i["instruction"] == "ENV" and sdpa.ENV_VAR in i["value"]]
    assert len(baked) == 1 and f"{sdpa.ENV_VAR}=1" in baked[0].split()
    assert f"{sdpa.ENV_VAR}=1" == sdpa.FIX and sdpa.interpret_env("1").deprioritizes
    assert sdpa.interpret_env("0").state == "prefer-cudnn" and sdpa.interpret_env("true").state == "ignored"
    text = GUIDE.read_text()
    assert f"`{sdpa.FIX}`" in text
    assert "ENV TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in text
    flat = " ".join(text.split())
    assert "exactly `0` or `1`" in flat and "It must be exactly `1`" in flat


def quoted_lines(text: str) -> list[str]:
    """The lines of the guide's fenced blocks that reproduce our tools' output."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    return [
        ln.strip()
        for b in blocks
        for ln in b.splitlines()
        if ln.strip().startswith(("verdict ", "[ftenv-watch]"))
    ]


def test_quoted_report_and_watchdog_lines_are_what_the_code_prints():
    lines = quoted_lines(GUIDE.read_text())
    assert len(lines) >= 4, lines
    ok = sdpa.verdict(
        gpus=[(9, 0)],
        torch_version=TORCH,
        cudnn_version=91900,
        env=sdpa.interpret_env("1"),
        live_order=[1, 2, 0, 3, 4],
        padded_choice=2,
    )
    assert f"verdict {ok.line}" in lines
    exposed = sdpa.verdict(
        gpus=[(10, 0)],
        torch_version=TORCH,
        cudnn_version=91900,
        env=sdpa.interpret_env(None),
        live_order=None,
        padded_choice=sdpa.CUDNN,
    )
    text = GUIDE.read_text()
    assert exposed.line.startswith("EXPOSED: ")
    assert f"(`Fix: {exposed.fix}`)" in " ".join(text.split())
    assert "NO GPU" in sdpa.Verdict("no-gpu", "x").line and "`verdict NO GPU`" in text
    src = (ROOT / "scripts/ftenv/steps/messages.py").read_text()
    for line in lines:
        if line.startswith("[ftenv-watch] SLOW STEP"):
            assert hints.PREFIX == "[ftenv-watch]"
            assert "{PREFIX} SLOW STEP rank " in src and "x median " in src
        elif line.startswith("[ftenv-watch]   "):
            assert "{INDENT}" in src and 'INDENT = f"{PREFIX}   "' in src
        elif line.startswith("[ftenv-watch]"):
            assert re.match(r"\[ftenv-watch\] (SUMMARY|verdict): ", line), line
    assert render.render_text  # the report prints "verdict " + Verdict.line
    assert 'f"verdict {a.verdict.line}"' in (ROOT / "scripts/ftenv/report/render.py").read_text()


def ftenv_commands(text: str) -> set[str]:
    return set(re.findall(r"`ftenv ([a-z][a-z-]*)", text)) | set(
        re.findall(r"^\s*ftenv ([a-z][a-z-]*)", text, re.M)
    )


def known_commands() -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    import importlib

    for name in cli.COMMANDS:
        importlib.import_module(f"ftenv.{name}").add_parser(sub)
    return set(sub.choices)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_ftenv_commands_exist(path):
    used = ftenv_commands(path.read_text())
    assert used and used <= known_commands(), used - known_commands()


def test_unknown_command_is_caught():
    assert "selfchek" in ftenv_commands("run `ftenv selfchek`") - known_commands()


def repo_paths(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w/])((?:docs|tests|scripts|docker)/[\w./-]*\w)", text))


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_repo_paths_exist(path):
    missing = [p for p in repo_paths(path.read_text()) if not (ROOT / p).exists()]
    assert missing == []


def test_missing_repo_path_is_caught():
    assert [p for p in repo_paths("see tests/test_nothing.py") if not (ROOT / p).exists()] == [
        "tests/test_nothing.py"
    ]


def fr_sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.:])\s", text.replace("\n", " ")) if "**[FR]**" in s]


def figures_not_in_the_issue(guide: str) -> list[str]:
    """Figures the guide takes from FunASR issue #3704 that the issue does not state."""
    source = " ".join(issue.EXCERPTS)
    bad = [f for f in issue.FIGURES if f not in guide or f not in source]
    # Every number in an [FR] sentence is the issue's (issue and PR references are not figures).
    for sentence in fr_sentences(guide):
        sentence = re.sub(r"#\d+|/issues/\d+|/pull/\d+", "", sentence)
        bad += [n for n in re.findall(r"\d+\.\d+|\d{2,}", sentence) if n not in source]
    return bad


def test_issue_figures_are_the_issues():
    assert issue.URL.endswith("/FunASR/issues/3704")
    assert figures_not_in_the_issue(GUIDE.read_text()) == []


def test_figure_check_catches_a_changed_figure():
    guide = GUIDE.read_text().replace("59 took about 1.05 s", "59 took about 1.15 s", 1)
    assert figures_not_in_the_issue(guide) == ["1.05", "1.15"]


def test_figure_check_catches_an_invented_number():
    sentences = fr_sentences("**[FR]** the mean was 0.321 s per step.")
    numbers = [n for s in sentences for n in re.findall(r"\d+\.\d+|\d{2,}", s)]
    assert numbers == ["0.321"]
