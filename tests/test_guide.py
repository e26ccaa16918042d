"""docs/cudnn-sdpa-guide.md and docs/finetune.md say only what the image and the code do: links
resolve, variable names and values match the image and torch, the quoted output lines are the ones
the code prints, the commands exist, the figures taken from FunASR issue #3704 are the issue's
(tests/support/funasr_issue_3704.py), and the README's first screen links the guide. Each check is also
shown failing on a broken copy."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from ftenv import cli, variables
from ftenv.attention import sdpa
from ftenv.attention.facts import Facts, Gpu
from ftenv.report import render
from ftenv.stack import versions
from ftenv.steps import step as step_types
from ftenv.steps import watcher
from support import ROOT
from support import funasr_issue_3704 as issue

GUIDE = ROOT / "docs/cudnn-sdpa-guide.md"
FINETUNE = ROOT / "docs/finetune.md"
DOCS = [GUIDE, FINETUNE]
#: Every TORCH_CUDNN_SDPA_* name the docs may mention: the switch, and what section 7 says of others.
KNOWN_VARS = {
    variables.SDPA_DEPRIORITIZED,  # the switch, read by torch >= 2.10
    variables.SDPA_PREFERRED,  # torch 2.9's switch (PR #162073): "=0" opts out there
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
    text = GUIDE.read_text().replace("[report.md](report.md)", "[report.md](report.md#the-startup-report)", 1)
    assert broken_links(GUIDE, text) == ["report.md#the-startup-report"]


def test_readme_first_screen_links_the_guide_and_the_examples():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:README_FIRST_SCREEN])
    assert "(docs/cudnn-sdpa-guide.md)" in first
    assert "(docs/finetune.md)" in first


def bad_variable_mentions(text: str) -> list[str]:
    bad = [name for name in set(re.findall(r"TORCH_CUDNN_SDPA_[A-Z_]+", text)) if name not in KNOWN_VARS]
    for line in text.splitlines():
        for value in re.findall(rf"{variables.SDPA_DEPRIORITIZED}=([A-Za-z0-9_-]*)", line):
            if value not in ("0", "1"):
                bad.append(f"{variables.SDPA_DEPRIORITIZED}={value}")
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
    baked = [
        i["value"]
        for i in parser.structure
        if i["instruction"] == "ENV" and variables.SDPA_DEPRIORITIZED in i["value"]
    ]
    assert len(baked) == 1 and f"{variables.SDPA_DEPRIORITIZED}=1" in baked[0].split()
    assert f"{variables.SDPA_DEPRIORITIZED}=1" == sdpa.FIX and sdpa.interpret_deprioritized("1").deprioritizes
    assert (
        sdpa.interpret_deprioritized("0").state == "prefer-cudnn"
        and sdpa.interpret_deprioritized("true").state == "ignored"
    )
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


def report_text(sm: tuple[int, int] | None, raw: str | None, order, choice) -> list[str]:
    """The start-up report's lines, rendered by the code from injected facts."""
    gpus = [Gpu(0, "GPU0", sm, 141 * 2**30)] if sm else []
    f = Facts(torch_version=TORCH, cudnn_version=91900, gpus=gpus, env_raw=raw)
    f.live_order, f.padded_choice = order, choice
    return render.render_text(f, render.assess(f)).splitlines()


def template(quoted: str) -> re.Pattern:
    """A quoted line with placeholders (R, N, T, M, B, L numbers, Kx a ratio, A, C, F and ... any
    text) as a regex."""
    pattern = re.sub(r"\\\.\\\.\\\.|\b[ACF]\b", ".*", re.escape(quoted))
    pattern = re.sub(r"\bKx\b", r"[0-9.]+x", pattern)
    return re.compile(re.sub(r"\b[RNTMBL]\b", r"[0-9.]+", pattern))


def numbers_blanked(line: str) -> str:
    """A line with its numbers blanked: a quoted run and a rendered one then compare."""
    return re.sub(r"\d+(?:\.\d+)?", "#", line)


def watchdog_lines() -> tuple[list[str], list[str]]:
    """What the watchdog prints for a steady run on four repeating shapes, then one slow new shape."""
    w = watcher.Watcher()
    for i in range(22):
        assert w.observe(step_types.Step(i, 0.080 + 0.001 * (i % 5), 2, 100 + 20 * (i % 4), 0)) == []
    w.val_lines = 3
    summary = w.summary_lines()
    phases = (("data_load", 0.011), ("forward_time", 0.44), ("backward_time", 0.53), ("optim_time", 0.019))
    return summary, w.observe(step_types.Step(22, 1.0, 2, 333, 0, phases=phases))


def unquoted_lines(text: str) -> list[str]:
    """The guide's quoted report and watchdog lines that the code does not print."""
    ok = report_text((9, 0), "1", [1, 2, 0, 3, 4], 2)
    exposed = report_text((10, 0), None, None, sdpa.CUDNN)
    no_gpu = report_text(None, None, None, None)
    summary, slow = watchdog_lines()
    wrong = []
    for line in quoted_lines(text):
        if line.startswith("verdict "):
            good = line in ok
        elif line.startswith(("[ftenv-watch] SLOW STEP", "[ftenv-watch]   ")):
            # the short line, then (the first time) the indented explanation: each quoted line
            # is one of them, placeholders filled
            good = any(template(line).fullmatch(printed) for printed in slow)
        else:
            good = numbers_blanked(line) in map(numbers_blanked, summary)
        if not good:
            wrong.append(line)
    flat = " ".join(text.split())
    exposed_line = next(ln for ln in exposed if ln.startswith("verdict "))
    for fix in re.findall(r"\(`(Fix: [^`]+)`\)", flat):
        if not (exposed_line.startswith("verdict EXPOSED: ") and exposed_line.endswith(fix)):
            wrong.append(fix)
    for mention in re.findall(r"`(verdict [A-Z ]+)`", flat):
        if not any(ln.startswith(mention.rstrip(" .")) for ln in ok + exposed + no_gpu):
            wrong.append(mention)
    return wrong


def test_quoted_report_and_watchdog_lines_are_what_the_code_prints():
    text = GUIDE.read_text()
    assert len(quoted_lines(text)) >= 4, quoted_lines(text)
    assert len(re.findall(r"`verdict [A-Z ]+`", " ".join(text.split()))) >= 2
    assert unquoted_lines(text) == []


@pytest.mark.parametrize(
    "old, new",
    [
        ("verdict OK: a padded-mask", "verdict OK: the padded-mask"),
        ("SLOW STEP rank R step N: T s", "SLOW STEP rank R, step N: T s"),
        ("attention: A. Cause: C.", "attention: A; Cause: C."),
        ("new to this rank; likely:", "new to this rank; cause:"),
        ("mean 0.082 s; 0 slow steps", "mean 0.082 s, 0 slow steps"),
        ("p95 step time is 1.2x", "p95 is 1.2x"),
        ("(`Fix: set TORCH_CUDNN_SDPA_", "(`Fix: export TORCH_CUDNN_SDPA_"),
        ("`verdict NO GPU`", "`verdict NO GPUS`"),
    ],
)
def test_a_misquoted_line_is_caught(old, new):
    text = GUIDE.read_text()
    assert old in text
    assert unquoted_lines(text.replace(old, new, 1)) != []


def ftenv_commands(text: str) -> set[str]:
    return set(re.findall(r"`ftenv ([a-z][a-z-]*)", text)) | set(
        re.findall(r"^\s*ftenv ([a-z][a-z-]*)", text, re.M)
    )


def known_commands() -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    for command in cli.COMMANDS:
        command.add_parser(sub)
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
    guide = GUIDE.read_text() + "\n**[FR]** the mean was 0.321 s per step.\n"
    assert figures_not_in_the_issue(guide) == ["0.321"]
