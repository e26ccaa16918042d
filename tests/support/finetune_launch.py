"""`ftenv finetune`'s torchrun command worked out without training, for the launcher's tests in more
than one file: the command line on a work folder (tests/ftenv/train/conftest.py), its parse by the
real parser into typed options, and the command and overrides the launcher makes of it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ftenv.commands import finetune as finetune_command
from ftenv.train import cluster_env, data_gate, torchrun_command


def cmdline(work: Path, *extra: str) -> list[str]:
    return [
        "finetune",
        "--model-dir", "model", "--train", "train.jsonl", "--valid", "val.jsonl",
        "--output-dir", "out", *extra,
    ]  # fmt: skip


def parse(argv: list[str], **seams) -> torchrun_command.FinetuneOptions:
    """The typed options the real parser gives for argv, with any test seams (trainer, cwd) set."""
    parser = argparse.ArgumentParser()
    finetune_command.add_parser(parser.add_subparsers())
    return dataclasses.replace(finetune_command.options_of(parser.parse_args(argv)), **seams)


def work_out(work: Path, *extra: str, env: dict | None = None, **seams) -> torchrun_command.TorchrunCommand:
    options = parse(cmdline(work, *extra), cwd=work, **seams)
    return torchrun_command.work_out(options, environ=env or {})


def overrides_of(p: torchrun_command.TorchrunCommand) -> list[str]:
    return [a for a in p.argv if a.startswith("++")]


def plan(settings: dict, nnodes: str = "1", nproc: int = 1) -> torchrun_command.TorchrunCommand:
    """A launch with these trainer settings on node 0, as the checks before torchrun read it."""
    launch = cluster_env.Launch("single node", nnodes, 0, None, None)
    return torchrun_command.TorchrunCommand([], {}, launch, settings=settings, nproc_per_node=nproc)


def check_data(p: torchrun_command.TorchrunCommand, cwd: Path, skip: bool) -> int | None:
    """The launcher's data check before torchrun on this launch (ftenv.train.data_gate)."""
    return data_gate.check_before_launch("x", p.settings, p.world_size, p.launch.node_rank, cwd, skip)
