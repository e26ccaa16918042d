"""The launch plan of `ftenv finetune` without training, for the launcher's tests in more than one
file: the command line on a work folder (tests/ftenv/train/conftest.py), its parse by the real
parser, and the plan and overrides the launcher makes of it."""

from __future__ import annotations

from pathlib import Path

from ftenv.train import finetune, launch_plan


def cmdline(work: Path, *extra: str) -> list[str]:
    return [
        "finetune",
        "--model-dir", "model", "--train", "train.jsonl", "--valid", "val.jsonl",
        "--output-dir", "out", "--cwd", str(work), *extra,
    ]  # fmt: skip


def parse(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    finetune.add_parser(parser.add_subparsers())
    return parser.parse_args(argv)


def plan(work: Path, *extra: str, env: dict | None = None) -> launch_plan.Plan:
    return launch_plan.plan(parse(cmdline(work, *extra)), environ=env or {})


def overrides_of(p: launch_plan.Plan) -> list[str]:
    return [a for a in p.argv if a.startswith("++")]
