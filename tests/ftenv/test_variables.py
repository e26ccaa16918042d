"""ftenv.variables is the one home of the variables ftenv owns, sets or obeys: no other module of
the package spells a registered name in its code, its accessors read the registry's defaults, the
registry matches the defaults the code applies, and docs/variables.md's table is the registry's
(each rule shown failing on a planted fault)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from ftenv import variables
from imagetools.release import generated
from support import ROOT, house_rules

PACKAGE = ROOT / "scripts/ftenv"
DOC = ROOT / "docs/variables.md"
NAME = re.compile(r"\bFTENV_[A-Z][A-Z0-9_]*")
REGISTERED = {v.name for v in variables.REGISTRY}


def spelled_outside(package: Path) -> list[str]:
    """`path:line: NAME` for each variable name in a string of the code (f-string parts included,
    docstrings and comments not) of any module but variables.py (the rule of tests/support/house_rules)."""
    files = [p for p in sorted(package.rglob("*.py")) if p != package / "variables.py"]
    found = house_rules.findings(files, package.parent, REGISTERED, "spelling")
    return [f.partition(";")[0] for f in found]


def test_no_module_but_variables_spells_a_variable_name():
    assert spelled_outside(PACKAGE) == []


def test_a_planted_spelling_is_found_and_a_docstring_is_not(tmp_path):
    copy = tmp_path / "ftenv"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "watchdog/planted.py").write_text(
        '"""FTENV_IN_PROSE and NCCL_DEBUG are fine here."""\n\n'
        'SWITCH = "FTENV_PLANTED"\n\n\n'
        "def hint(x):\n"
        '    """So is FTENV_IN_A_FUNCTION."""\n'
        '    return f"set FTENV_IN_A_MESSAGE={x}", "NCCL_DEBUG", "RANK"\n'
    )
    assert spelled_outside(copy) == [  # RANK is torchrun's, not registered: spelled where it is read
        "ftenv/watchdog/planted.py:3: FTENV_PLANTED",
        "ftenv/watchdog/planted.py:8: FTENV_IN_A_MESSAGE",
        "ftenv/watchdog/planted.py:8: NCCL_DEBUG",
    ]


# --- the accessors -----------------------------------------------------------------------------------


def test_read_gives_the_value_else_the_registered_default():
    assert variables.read(variables.REPORT_TIMEOUT, {}) == "60"
    assert variables.read(variables.REPORT_TIMEOUT, {variables.REPORT_TIMEOUT: "5"}) == "5"
    assert variables.read(variables.IMAGE, {}) is None  # unset unless someone sets it
    assert variables.read(variables.REPORT, {}) == "1" and variables.given(variables.REPORT, {}) is None
    assert variables.given(variables.REPORT, {variables.REPORT: ""}) == ""
    assert variables.read_float(variables.WATCH_HANG_LIMIT_S, {}) == 1800.0
    with pytest.raises(ValueError):
        variables.read_float(variables.REPORT_TIMEOUT, {variables.REPORT_TIMEOUT: "soon"})


def test_a_name_not_in_the_registry_is_refused():
    for access in (variables.read, variables.given, variables.default):
        with pytest.raises(KeyError, match=r"FTENV_PLANTED is not in ftenv\.variables\.REGISTRY"):
            access("FTENV_PLANTED")
    with pytest.raises(KeyError, match="FTENV_PLANTED"):
        variables.export({"FTENV_PLANTED": "1"})


def test_the_process_environment_is_read_and_set_through_the_accessors(monkeypatch):
    monkeypatch.delenv(variables.RUN_ID, raising=False)
    monkeypatch.setenv(variables.TINY_DIR, "/tiny")
    assert variables.read(variables.TINY_DIR) == "/tiny"
    child = variables.environment({variables.RUN_ID: "r1"})
    assert child[variables.RUN_ID] == "r1" and child[variables.TINY_DIR] == "/tiny"
    assert variables.given(variables.RUN_ID) is None  # a child's environment is a copy
    variables.export({variables.RUN_ID: "r2"})
    variables.export({variables.RUN_ID: "r3", variables.TINY_DIR: "/other"}, keep_set=True)
    assert (variables.read(variables.RUN_ID), variables.read(variables.TINY_DIR)) == ("r2", "/tiny")


def test_every_constant_is_registered_once_with_a_meaning():
    constants = {
        value
        for key, value in vars(variables).items()
        if key.isupper() and isinstance(value, str) and key not in ("UNSET", "TEST_AID")
    }
    names = [v.name for v in variables.REGISTRY]
    assert len(names) == len(set(names))
    assert set(names) == constants
    assert all(v.meaning and v.default for v in variables.REGISTRY)
    assert {n for n in constants if n.startswith("FTENV_")} >= {"FTENV_COMPILE", "FTENV_WATCH"}


def test_every_ftenv_name_the_docs_and_the_image_spell_is_registered():
    """A name in the docs, the README or the image's files that the registry lacks is a typo or a
    variable nothing reads."""
    registered = {v.name for v in variables.REGISTRY}
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "docker").glob("*"))]
    spelled = {(p.name, n) for p in files if p.is_file() for n in NAME.findall(p.read_text(errors="replace"))}
    assert {(f, n) for f, n in spelled if n not in registered} == set()


def test_the_registry_states_the_defaults_the_code_applies():
    from ftenv.report import startup
    from ftenv.watchdog import thresholds

    default = {v.name: v.default for v in variables.REGISTRY}
    applied = {
        variables.REPORT_TIMEOUT: startup.DEFAULT_TIMEOUT_S,
        variables.WATCH_SILENCE_FACTOR: thresholds.SILENCE_FACTOR,
        variables.WATCH_SILENCE_MIN_S: thresholds.SILENCE_MIN_S,
        variables.WATCH_HANG_LIMIT_S: thresholds.HANG_LIMIT_S,
    }
    assert {name: float(default[name]) for name in applied} == {k: float(v) for k, v in applied.items()}


def block(text: str, name: str) -> str:
    m = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- /generated -->", text, re.S)
    assert m, f"no generated block {name}"
    return m[1]


def test_the_docs_table_is_the_registrys():
    text = DOC.read_text()
    assert block(text, "environment-variables") == variables.markdown_table()
    assert all(f"| `{v.name}` |" in text for v in variables.REGISTRY)
    assert generated.regenerate(None, text) == text  # `make generate` leaves it as it is


def test_a_stale_docs_table_is_found(monkeypatch):
    text = DOC.read_text()
    planted = variables.Variable("FTENV_PLANTED", "1", "a variable added without `make generate`")
    monkeypatch.setattr(variables, "REGISTRY", (*variables.REGISTRY, planted))
    assert block(text, "environment-variables") != variables.markdown_table()
    assert generated.regenerate(None, text) != text
    assert "FTENV_PLANTED" in block(generated.regenerate(None, text), "environment-variables")


@pytest.mark.parametrize("name", ["environment-variables", "exit-codes", "watch-variables"])
def test_make_generate_knows_the_blocks(name):
    assert name in generated.BLOCKS


def test_the_watchdog_page_shows_the_registrys_watch_variables():
    table = block((ROOT / "docs/watchdog.md").read_text(), "watch-variables")
    assert table == variables.markdown_table("FTENV_WATCH_")
    watch_names = [v.name for v in variables.REGISTRY if v.name.startswith("FTENV_WATCH_")]
    assert len(watch_names) >= 3 and table.count("| `FTENV_WATCH_") == len(watch_names)
    assert "FTENV_WATCH`" not in table


def dockerfile_env(text: str) -> dict[str, str]:
    """NAME -> value of every `ENV NAME=value` the Dockerfile sets (continuation lines joined)."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    found: dict[str, str] = {}
    for i in parser.structure:
        if i["instruction"] == "ENV":
            for pair in re.findall(r'(\w+)=("[^"]*"|\S+)', i["value"]):
                found[pair[0]] = pair[1].strip('"')
    return found


def image_values_differing(text: str) -> list[str]:
    env = dockerfile_env(text)
    return [v.name for v in variables.REGISTRY if v.image is not None and env.get(v.name) != v.image]


def test_the_value_the_docs_give_for_the_image_is_the_dockerfiles():
    """docs/variables.md shows a variable's value in the image beside its default outside it; a
    Dockerfile that sets another value (or none) makes that row wrong."""
    text = (ROOT / "docker/Dockerfile").read_text()
    assert variables.SDPA_DEPRIORITIZED in {v.name for v in variables.REGISTRY if v.image}
    assert image_values_differing(text) == []
    changed = text.replace(f"{variables.SDPA_DEPRIORITIZED}=1", f"{variables.SDPA_DEPRIORITIZED}=0")
    assert image_values_differing(changed) == [variables.SDPA_DEPRIORITIZED]
    assert "`1` in the image" in DOC.read_text()
