"""docs/cudnn-sdpa-guide.md and docs/finetune.md say only what the image and the code do: links
resolve, variable names and values match the image and torch, the quoted output lines are the ones
the code prints, the commands exist, the figures taken from FunASR issue #3704 are the issue's
(tests/support/funasr_issue_3704.py), and the README's first screen links the guide. Each check is also
shown failing on a broken copy."""

from __future__ import annotations

import re

import pytest
from dockerfile_parse import DockerfileParser

from ftenv import variables
from ftenv.attention import sdpa
from support import ROOT
from support import funasr_issue_3704 as issue
from support.doc_refs import bad_variable_mentions, broken_links, ftenv_commands, known_commands, repo_paths
from support.funasr_issue_3704 import figures_not_in_the_issue
from support.printed_lines import quoted_lines, unquoted_lines

GUIDE = ROOT / "docs/cudnn-sdpa-guide.md"
FINETUNE = ROOT / "docs/finetune.md"
EVALUATE = ROOT / "docs/evaluate.md"
DOCS = [GUIDE, FINETUNE, EVALUATE]
README_FIRST_SCREEN = 30  # lines


ALL_DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "CHANGELOG.md"]


@pytest.mark.parametrize("path", ALL_DOCS, ids=lambda p: p.name)
def test_links_resolve(path):
    """Every relative link of every doc, and every heading anchor by GitHub's rule (doc_refs)."""
    assert broken_links(path, path.read_text()) == []


def test_broken_link_is_caught():
    text = GUIDE.read_text().replace("(finetune.md)", "(fine-tune.md)", 1)
    assert broken_links(GUIDE, text) == ["fine-tune.md"]
    text = GUIDE.read_text().replace("[report.md](report.md)", "[report.md](report.md#the-startup-report)", 1)
    assert broken_links(GUIDE, text) == ["report.md#the-startup-report"]
    # GitHub keeps underscores and numbers a repeated heading; an anchor into the page itself counts.
    page = "# A_b\n## Same\n## Same\n[x](#a_b) [y](#same-1) [z](#same-2)\n"
    assert broken_links(GUIDE, page) == ["#same-2"]


def test_readme_first_screen_links_the_guide_and_the_examples():
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:README_FIRST_SCREEN])
    assert "(docs/cudnn-sdpa-guide.md)" in first
    assert "(docs/finetune.md)" in first


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


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_ftenv_commands_exist(path):
    used = ftenv_commands(path.read_text())
    assert used and used <= known_commands(), used - known_commands()


def test_unknown_command_is_caught():
    assert "selfchek" in ftenv_commands("run `ftenv selfchek`") - known_commands()


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_repo_paths_exist(path):
    missing = [p for p in repo_paths(path.read_text()) if not (ROOT / p).exists()]
    assert missing == []


def test_missing_repo_path_is_caught():
    assert [p for p in repo_paths("see tests/test_nothing.py") if not (ROOT / p).exists()] == [
        "tests/test_nothing.py"
    ]


def test_issue_figures_are_the_issues():
    assert issue.URL.endswith("/FunASR/issues/3704")
    assert figures_not_in_the_issue(GUIDE.read_text()) == []


def test_figure_check_catches_a_changed_figure():
    guide = GUIDE.read_text().replace("59 took about 1.05 s", "59 took about 1.15 s", 1)
    assert figures_not_in_the_issue(guide) == ["1.05", "1.15"]


def test_figure_check_catches_an_invented_number():
    guide = GUIDE.read_text() + "\n**[FR]** the mean was 0.321 s per step.\n"
    assert figures_not_in_the_issue(guide) == ["0.321"]
