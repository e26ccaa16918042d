"""`ftenv finetune`'s launch plan worked out without training, for the launcher's tests in more
than one file: the command line on a work folder (tests/ftenv/launch/conftest.py), its parse by the
real parser into typed options, and the plan and the torchrun command the launcher makes of it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ftenv.commands import finetune as finetune_command
from ftenv.launch import cluster_env, finetune, launch_plan


def cmdline(work: Path, *extra: str) -> list[str]:
    return [
        "finetune",
        "--model-dir", "model", "--train", "train.jsonl", "--valid", "val.jsonl",
        "--output-dir", "out", *extra,
    ]  # fmt: skip


def parse(argv: list[str], **seams) -> launch_plan.FinetuneOptions:
    """The typed options the real parser gives for argv, with any test seams (trainer, cwd) set."""
    parser = argparse.ArgumentParser()
    finetune_command.add_parser(parser.add_subparsers())
    return dataclasses.replace(finetune_command.options_of(parser.parse_args(argv)), **seams)


def work_out(work: Path, *extra: str, env: dict | None = None, **seams) -> launch_plan.LaunchPlan:
    options = parse(cmdline(work, *extra), cwd=work, **seams)
    return launch_plan.plan_launch(options, environ=env or {})


def argv_of(p: launch_plan.LaunchPlan) -> list[str]:
    return launch_plan.torchrun_argv(p)


def overrides_of(p: launch_plan.LaunchPlan) -> list[str]:
    return [a for a in argv_of(p) if a.startswith("++")]


def plan(settings: dict, nnodes: str = "1", nproc: int = 1) -> launch_plan.LaunchPlan:
    """A launch with these trainer settings on node 0 (its data and output folder the settings'),
    as the checks before torchrun read it."""
    launch = cluster_env.Launch("single node", nnodes, 0, None, None)
    keys = {"train": "train_data_set_list", "valid": "valid_data_set_list", "output_dir": "output_dir"}
    folders = {name: Path(str(settings[key])) if key in settings else None for name, key in keys.items()}
    return launch_plan.LaunchPlan(**folders, settings=settings, launch=launch, nproc_per_node=nproc)


def check_data(p: launch_plan.LaunchPlan, cwd: Path, skip: bool) -> int | None:
    """The launcher's data check before torchrun on this launch (ftenv.launch.finetune.check_data)."""
    p = dataclasses.replace(p, cwd=cwd, skip_data_check=skip, output_dir=p.output_dir or cwd)
    return finetune.check_data("x", p)
