"""The torchrun command `ftenv finetune` will run, worked out without running anything: the
inputs checked (inputs.py), the nodes found (cluster_env.py), the recipe's overrides merged with
the user's (recipe.py, overrides.py). The unit tests and `--dry-run` stop here.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.train import cluster_env, speed_options
from ftenv.train.inputs import InputError, check_jsonl, check_model_dir, check_options, check_output_dir
from ftenv.train.overrides import merge_overrides
from ftenv.train.recipe import OFFLINE_ENV, OFFLINE_OVERRIDES, RECIPE_DEFAULTS, hydra_run_dir
from ftenv.train.runlife import failfast

#: torchrun forwards these to its workers (its default lacks SIGUSR1/SIGUSR2, which Slurm's
#: `--signal` sends: torchrun would die of them and leave its workers running).
TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"
#: torchrun, in-process, with the stop's exit code (ftenv.train.runlife.torchrun).
TORCHRUN_MODULE = "ftenv.train.runlife.torchrun"
ENTRY_MODULE = "ftenv.train.funasr_entry"


@dataclass
class Plan:
    argv: list[str]
    env: dict[str, str]
    launch: cluster_env.Launch
    notes: list[str] = field(default_factory=list)
    output_dir: Path | None = None
    model_pt: Path | None = None

    def setting(self, key: str, default: str) -> str:
        """The value of `++key=` the trainer gets (the last one wins, as in Hydra)."""
        value = default
        for arg in self.argv:
            if arg.startswith(f"++{key}="):
                value = arg.split("=", 1)[1]
        return value


def _gpu_count(env) -> int | None:
    if env.get("CUDA_VISIBLE_DEVICES") == "":
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return None


def _absolute(path: str, cwd: Path) -> Path:
    return Path(path) if Path(path).is_absolute() else cwd / path


def _processes_per_node(args: argparse.Namespace, launch: cluster_env.Launch, env, notes: list[str]) -> int:
    if args.gpus_per_node is not None:
        return args.gpus_per_node
    if launch.nproc_per_node is not None:
        return launch.nproc_per_node
    count = _gpu_count(env)
    if not count:
        raise InputError(
            "no GPU visible, so the number of processes per node is unknown: start the container "
            "with GPUs (`docker run --gpus all`, Kubernetes nvidia.com/gpu limits, Apptainer --nv, "
            "pyxis/Slurm --gpus-per-node) or pass --gpus-per-node N"
        )
    notes.append(f"--gpus-per-node not given: using the {count} visible GPU(s)")
    return count


def plan(args: argparse.Namespace, environ=None) -> Plan:
    """Everything `run` will do, without doing it (the unit tests call this)."""
    env = os.environ if environ is None else environ
    extra = list(args.overrides)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    merge_overrides([], extra)  # reject misplaced options and malformed overrides first
    missing = [
        f"--{name.replace('_', '-')}"
        for name in ("model_dir", "train", "valid", "output_dir")
        if not getattr(args, name)
    ]
    if missing:
        raise InputError(f"missing {', '.join(missing)} (see `ftenv finetune --help`)")
    problems = check_options(args.gpus_per_node, args.nnodes, args.node_rank, args.master_port)
    notes: list[str] = []
    cwd = Path(args.cwd or os.getcwd())
    model = args.model_dir
    model_path = _absolute(model, cwd)
    if args.allow_hub and not model_path.exists():
        notes.append(f"{model} is not a local folder: loading it from the model hub (--allow-hub)")
    else:
        problems += check_model_dir(model_path)
        model = str(model_path)
    data = {}
    for what, raw in (("train", args.train), ("valid", args.valid)):
        data[what] = str(_absolute(raw, cwd))
        problems += check_jsonl(_absolute(raw, cwd), what, cwd)
    out = _absolute(args.output_dir, cwd)
    problems += check_output_dir(out, create=not args.dry_run, environ=env)
    remote_code = args.remote_code
    if remote_code is not None:
        remote_code = str(_absolute(remote_code, cwd))
        if not Path(remote_code).is_file():
            # FunASR would only print "Loading remote code failed" and train the packaged model.
            problems.append(f"--remote-code {remote_code} is not a file")
    if problems:
        raise InputError("\n".join(problems))

    try:
        launch = cluster_env.detect(env)
        launch = cluster_env.apply_overrides(
            launch,
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            master_addr=args.master_addr,
            master_port=args.master_port,
        )
    except cluster_env.LaunchError as exc:
        raise InputError(str(exc)) from None
    notes += launch.notes
    nproc = _processes_per_node(args, launch, env, notes)

    if remote_code is None and model_path.is_dir() and (model_path / "model.py").is_file():
        remote_code = str(model_path / "model.py")
    recipe: list[tuple[str, str]] = [("model", model)]
    if remote_code:
        recipe.append(("trust_remote_code", "true"))
        recipe.append(("remote_code", remote_code))
        if model_path.is_dir() and (model_path / "requirements.txt").is_file():
            notes.append(
                f"{model_path}/requirements.txt exists: with remote code FunASR pip-installs it "
                "(network, and it may change the image's pinned stack)"
            )
    else:
        recipe.append(("trust_remote_code", "false"))
        notes.append(
            "no model.py in the model dir and no --remote-code: FunASR's packaged FunASRNano is used "
            "(upstream's finetune.sh imports the example folder's model.py; pass --remote-code PATH "
            "to do the same)"
        )
    recipe += [("train_data_set_list", data["train"]), ("valid_data_set_list", data["valid"])]
    recipe += RECIPE_DEFAULTS
    child_env: dict[str, str] = {}
    if not args.allow_hub:
        recipe += OFFLINE_OVERRIDES
        child_env.update(OFFLINE_ENV)
    recipe.append(("output_dir", str(out)))
    recipe.append(hydra_run_dir(out))
    # --compile, --compile-parts, --buckets, --fused-adamw (speed_options.py)
    speed = speed_options.plan(args, env, out, create=not args.dry_run)
    overrides = merge_overrides(recipe + speed.recipe, extra)
    child_env.update(speed.env)
    notes += speed.notes
    try:
        failfast.timeout_s(env)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    child_env[variables.OUTPUT_DIR] = str(out)
    child_env.update(failfast.launcher_env(out, env))
    trainer = args.trainer or f"-m {ENTRY_MODULE}"
    argv = [
        sys.executable,
        "-m",
        TORCHRUN_MODULE,
        *launch.torchrun_args(nproc),
        f"--signals-to-handle={TORCHRUN_SIGNALS}",
        *shlex.split(trainer),
        *overrides,
    ]
    model_pt = model_path / "model.pt" if model_path.is_dir() else None
    return Plan(argv=argv, env=child_env, launch=launch, notes=notes, output_dir=out, model_pt=model_pt)
