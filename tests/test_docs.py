"""The docs say what the code does, wherever a test can read it: the data names the examples pass are
the ones `ftenv data split` writes, every exit code a manifest names is one ftenv chooses
(ftenv.outcome; the docs' tables: tests/ftenv/test_outcome.py), every `ftenv` option a doc shows
is in the parser, the report sample's lines are the ones docs/report.md explains, every message
docs/troubleshooting.md quotes is still in the code, CHANGELOG.md's newest version is the
package's, the user pages name the image by an immutable tag and speak no internal words. Each
check is also shown failing on a broken copy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ftenv import __version__, outcome
from ftenv.data.sets import FILE_NAMES
from ftenv.stack import versions
from support import ROOT
from support.doc_refs import unknown_options
from support.image_refs import moving_refs
from support.manifests import load_yaml

DOCS = sorted((ROOT / "docs").glob("*.md"))
EXAMPLES = sorted(p for p in (ROOT / "docs/examples").rglob("*") if p.is_file())
TROUBLESHOOTING = ROOT / "docs/troubleshooting.md"
CHANGELOG = ROOT / "CHANGELOG.md"
VERSIONS = versions.load(ROOT / "versions.toml")
#: The pages a fine-tuner reads (the README's "Use" table), and the README itself.
USE_PAGES = [
    ROOT / "README.md",
    CHANGELOG,
    *(
        ROOT / "docs" / name
        for name in (
            "cudnn-sdpa-guide.md", "data.md", "finetune.md", "lora.md", "during-a-run.md", "report.md",
            "selfcheck.md", "watchdog.md",
            "troubleshooting.md", "evaluate.md", "scoring.md", "network.md", "compile.md", "variables.md",
        )
    ),
]  # fmt: skip
#: Words of the project's own workshop that mean nothing to a user.
INTERNAL_WORDS = (
    r"\bwings?\b", r"stand-in base", r"GPU kit", r"lent machine", r"\blevers?\b", r"\barms?\b",
    r"\bfloors?\b", r"one home", r"field report",
)  # fmt: skip


# --- data names -------------------------------------------------------------------------------------


def data_names(text: str) -> set[str]:
    """The file names an example passes to `--train` and `--valid`."""
    return set(re.findall(r"--(?:train|valid)[ =]\"?[^\s\"]*/([\w.-]+\.jsonl)", text))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_pass_the_names_ftenv_data_split_writes(path):
    names = data_names(path.read_text())
    assert names <= set(FILE_NAMES.values()), names
    if "ftenv finetune" in path.read_text():
        assert names == {FILE_NAMES["train"], FILE_NAMES["valid"]}


def test_a_name_the_split_does_not_write_is_caught():
    text = (ROOT / "docs/examples/docker/finetune-one-gpu.sh").read_text().replace("valid.jsonl", "val.jsonl")
    assert "val.jsonl" in data_names(text) - set(FILE_NAMES.values())


# --- exit codes -------------------------------------------------------------------------------------

CODES = {c.code for c in outcome.EXIT_CODES}


def failure_policy_codes(docs: list[dict]) -> set[int]:
    """The exit codes the podFailurePolicy of a manifest's documents acts on."""
    found = set()
    for doc in docs:
        for rule in doc.get("spec", {}).get("podFailurePolicy", {}).get("rules", []):
            found |= set(rule.get("onExitCodes", {}).get("values", []))
    return found


def manifest_codes(path: Path) -> set[int]:
    return failure_policy_codes(load_yaml(path.name))


def test_every_exit_code_a_manifest_names_is_ftenvs():
    manifests = sorted((ROOT / "docs/examples/kubernetes").glob("*.yaml"))
    assert any(manifest_codes(p) for p in manifests)
    for path in manifests:
        assert manifest_codes(path) <= CODES, path.name
    planted = load_yaml("job-one-node.yaml")
    planted[0]["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] = [1, 2, 5]
    assert failure_policy_codes(planted) - CODES == {5}


def test_the_finetune_docs_name_the_codes_the_job_fails_on():
    """The Job fails on exactly the codes finetune.md says (a crash and a bad input)."""
    job = manifest_codes(ROOT / "docs/examples/kubernetes/job-one-node.yaml")
    text = " ".join((ROOT / "docs/finetune.md").read_text().split())
    said = re.search(r"fails the job on exit codes? ([\d, and]+)", text)
    assert said and {int(c) for c in re.findall(r"\d+", said[1])} == job


# --- options ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_ftenv_option_a_doc_shows_is_in_the_parser(path):
    assert unknown_options(path.read_text()) == []


def test_an_unknown_option_is_caught():
    assert unknown_options("run `ftenv finetune --gpus 2`") == ["ftenv finetune --gpus"]
    assert unknown_options("```\nftenv data split --valid 5% --ouput-dir out x.jsonl\n```") == [
        "ftenv data split --ouput-dir"
    ]
    assert unknown_options("`ftenv eval score a b --rawx`") == ["ftenv eval score --rawx"]
    assert unknown_options("ftenv finetune: --not-an-option in a message") == []


# --- the report sample ------------------------------------------------------------------------------

REPORT = ROOT / "docs/report.md"


def sample_lines(text: str) -> list[str]:
    block = re.search(r"<!-- generated: report-sample -->\n```\n(.*?)```", text, re.S)
    return block[1].splitlines() if block else []


def explained_lines(text: str) -> set[str]:
    """The line names docs/report.md's table explains (its first column's code spans)."""
    return set(re.findall(r"^\| `([^`]+)` \|", text, re.M))


def unexplained(text: str) -> list[str]:
    """The sample's lines (by their first word, `GPU n` for a GPU) the table does not explain."""
    names = explained_lines(text)
    missing = []
    for line in sample_lines(text):
        if line.startswith(("==", " ")):
            continue
        word = "GPU n" if re.match(r"GPU \d", line) else line.split()[0]
        if word not in names:
            missing.append(word)
    return missing


def test_the_report_table_explains_every_line_of_the_sample():
    text = REPORT.read_text()
    assert {"build", "network", "verdict"} <= {ln.split()[0] for ln in sample_lines(text)}
    assert unexplained(text) == []


def test_a_sample_line_the_table_lacks_is_caught():
    text = REPORT.read_text()
    assert unexplained(re.sub(r"^\| `compile` \|.*\n", "", text, flags=re.M)) == ["compile"]


# --- troubleshooting --------------------------------------------------------------------------------


def quoted_messages(text: str) -> list[str]:
    """The literal parts of each message the page quotes (`> ...` lines, `...` where it varies)."""
    parts = []
    for line in re.findall(r"^> (.+)$", text, re.M):
        if line.strip() == "a message":  # the page's own explanation of the format
            continue
        parts += [p.strip() for p in line.split("...") if p.strip()]
    return parts


def code_text() -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((ROOT / "scripts").rglob("*.py")))


def missing_messages(text: str, code: str) -> list[str]:
    return [part for part in quoted_messages(text) if part not in code]


def test_every_message_the_troubleshooting_page_quotes_is_printed_by_the_code():
    text = TROUBLESHOOTING.read_text()
    assert len(quoted_messages(text)) >= 15
    assert missing_messages(text, code_text()) == []


def test_a_message_the_code_no_longer_prints_is_caught():
    code = code_text().replace("holds a finished run", "holds a completed run")
    assert missing_messages(TROUBLESHOOTING.read_text(), code) == ["holds a finished run:"]


# --- CHANGELOG --------------------------------------------------------------------------------------


def newest_version(text: str) -> str | None:
    """The first `## [X.Y.Z]` heading of a Keep a Changelog file (`[Unreleased]` passed over)."""
    found = re.search(r"^## \[(\d+\.\d+\.\d+)\]", text, re.M)
    return found[1] if found else None


def test_the_changelog_is_keep_a_changelog_and_its_newest_version_is_the_packages():
    text = CHANGELOG.read_text()
    assert "[Keep a Changelog](https://keepachangelog.com/" in text
    assert newest_version(text) == __version__
    assert re.search(r"^### Upgrade notes", text, re.M), "say what to do when resuming on a newer image"


def test_a_changelog_behind_the_package_is_caught():
    assert newest_version(CHANGELOG.read_text().replace(f"[{__version__}]", "[0.0.9]")) != __version__


# --- the user pages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", USE_PAGES, ids=lambda p: p.name)
def test_user_pages_name_the_image_by_something_immutable(path):
    """What a page tells users to run; the report sample (generated) shows what the image prints."""
    text = re.sub(r"<!-- generated: .*?<!-- /generated -->", "", path.read_text(), flags=re.S)
    assert moving_refs(text, VERSIONS) == []


def internal_words(text: str) -> list[str]:
    return [w for w in INTERNAL_WORDS if re.search(w, text, re.I)]


@pytest.mark.parametrize("path", USE_PAGES, ids=lambda p: p.name)
def test_user_pages_speak_no_internal_words(path):
    assert internal_words(path.read_text()) == []


def test_internal_words_and_moving_tags_are_caught():
    assert internal_words("built on the stand-in base, see the GPU kit") == [r"stand-in base", r"GPU kit"]
    repository = VERSIONS.default.image["repository"]
    assert moving_refs(f"docker run {repository}:cu130", VERSIONS) == [f"{repository}:cu130"]


# --- a healthy run's first lines --------------------------------------------------------------------

DURING = ROOT / "docs/during-a-run.md"
#: The lines a dry run does not print (it checks no data and starts nothing), and the code that prints them.
NOT_IN_A_DRY_RUN = {
    "checking every line of the data": "{prog}: checking every line of the data ({rules.describe()})",
    "running": "{PROG}: running {shlex.join(torchrun_argv(p))}",
}


def healthy_lines(text: str) -> list[str]:
    """The `ftenv finetune:` lines of the page's first block, each cut before its first `...`."""
    block = re.search(r"## A healthy run's first lines\n.*?```\n(.*?)```", text, re.S)
    return [ln.split("...")[0].removeprefix("ftenv finetune: ").rstrip(" (") for ln in block[1].splitlines()]


def unprinted(lines: list[str], stderr: str, out_dir: str) -> list[str]:
    printed = [ln.removeprefix("ftenv finetune: ") for ln in stderr.splitlines()]
    code = code_text()
    missing = []
    for line in lines:
        if line.split(" (")[0] in NOT_IN_A_DRY_RUN:
            if NOT_IN_A_DRY_RUN[line.split(" (")[0]] not in code:
                missing.append(line)
        elif not any(p.startswith(line.replace("/srv/runs/nano", out_dir)) for p in printed):
            missing.append(line)
    return missing


def test_a_healthy_runs_first_lines_are_what_ftenv_finetune_prints(layout, monkeypatch, capsys):
    from ftenv import cli, variables

    for name in (variables.REPORT, variables.SDPA_DEPRIORITIZED):
        monkeypatch.setenv(name, "0" if name == variables.REPORT else "1")
    for name in ("MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "PET_NNODES", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    out = layout["OUT_DIR"]
    argv = ["finetune", "--dry-run", "--model-dir", str(layout["MODEL_DIR"]), "--gpus-per-node", "1"]
    argv += ["--train", str(layout["DATA_DIR"] / FILE_NAMES["train"])]
    argv += ["--valid", str(layout["DATA_DIR"] / FILE_NAMES["valid"]), "--output-dir", str(out)]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    lines = healthy_lines(DURING.read_text())
    assert len(lines) >= 5 and unprinted(lines, err, str(out)) == [], err
    assert unprinted(["launch: one machine: node 0 of 1"], err, str(out)) != []
