"""The commands wing: every `ftenv` command is a parser and a thin run over its wing's typed options,
no argparse below it, no test seam in a user's parser, and the report's compile line from train."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ftenv import cli, commands, variables
from ftenv.trainer import compile_setting

PACKAGE = Path(commands.__file__).parent.parent
#: The one module below commands/ with a command line of its own: the Makefile's
#: `python -m ftenv.stack.versions`, run on the host's stock python3 without the rest of ftenv.
OWN_COMMAND_LINE = {"stack/versions.py"}


def argparse_below_commands(package: Path) -> list[str]:
    """Modules outside commands/ and cli.py that import argparse or name its Namespace."""
    bad = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("commands/") or rel == "cli.py" or rel in OWN_COMMAND_LINE:
            continue
        tree = ast.parse(path.read_text())
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imports |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        named = any(isinstance(n, ast.Attribute) and n.attr == "Namespace" for n in ast.walk(tree))
        if "argparse" in imports or named:
            bad.append(rel)
    return bad


def test_no_argparse_below_the_commands():
    assert argparse_below_commands(PACKAGE) == []


def test_the_check_sees_an_argparse_import(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train/x.py").write_text("import argparse\n")
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps/y.py").write_text("def run(args):\n    return args.Namespace\n")
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands/z.py").write_text("import argparse\n")
    assert argparse_below_commands(tmp_path) == ["steps/y.py", "train/x.py"]


def test_the_cli_assembles_one_module_per_command_from_the_commands_wing():
    names = [m.__name__ for m in cli.COMMANDS]
    assert all(n.startswith("ftenv.commands.") for n in names), names
    assert [n.rsplit(".", 1)[1] for n in names] == [
        "report", "versions", "buildcheck", "data", "finetune", "eval", "transcribe", "export", "watch",
        "analyze", "selfcheck", "probe", "tinymodel",
    ]  # fmt: skip
    assert all(callable(m.add_parser) for m in cli.COMMANDS)


@pytest.mark.parametrize("seam", [["--trainer", "-m x"], ["--cwd", "/tmp"]])
def test_test_seams_are_not_options_of_ftenv_finetune(seam, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["finetune", *seam, "--model-dir", "m", "--dry-run"])
    assert stop.value.code == 2
    assert f"unrecognized arguments: {seam[0]}" in capsys.readouterr().err


def test_ftenv_report_prints_the_compile_line_of_the_train_wing(monkeypatch, capsys):
    monkeypatch.setenv(variables.COMPILE, "regional,audio")
    monkeypatch.setenv(variables.BUCKETS, "64")
    assert cli.main(["report", "--stdout", "--no-gpu-probe"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert compile_setting.report_line() in lines
    assert "regional" in compile_setting.report_line()
