"""The launch plan of `ftenv finetune`: every value the launch needs, worked out once from the command
line and the environment without creating or running anything, so that `--dry-run`, the checks
before torchrun, the data gate, the watchdog and the unit tests read the same typed values, and the
torchrun command line is rendered from it last (torchrun_argv).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import outcome, variables
from ftenv.launch import cluster_env, lora_settings, nccl_debug, overrides, speed_options
from ftenv.launch.gpu_gate import gpu_count
from ftenv.launch.inputs import InputError, check_jsonl, check_model_dir, check_options, check_output_dir
from ftenv.launch.recipe import OFFLINE_OVERRIDES, RECIPE_DEFAULTS, hydra_run_dir
from ftenv.launch.runlife import folder, restart
from ftenv.model.funasr_import import OFFLINE_ENV
from ftenv.trainer import ENTRY_MODULE
from ftenv.trainer.runlife import failfast, hooks

#: torchrun forwards these to its workers, the watchdog's own (its default lacks SIGUSR1/SIGUSR2,
#: which Slurm's `--signal` sends: torchrun would die of them and leave its workers running).
TORCHRUN_SIGNALS = ",".join(sig.name for sig in outcome.FORWARDED)
#: torchrun, in-process, with the stop's exit code (ftenv.launch.runlife.torchrun).
TORCHRUN_MODULE = "ftenv.launch.runlife.torchrun"
#: The trainer's settings the options decide, so that the folder checks, the lease, the data gate
#: and the watchdog look where the trainer reads and writes.
OPTION_KEYS = {
    "model": "--model-dir",
    "train_data_set_list": "--train",
    "valid_data_set_list": "--valid",
    "output_dir": "--output-dir",
}


@dataclass(frozen=True)
class FinetuneOptions:
    """What `ftenv finetune` was asked for (its parser: ftenv.commands.finetune). `trainer` and
    `cwd` are test seams, not options of the command line: the trainer command torchrun starts
    (default: the trainer entry) and the folder relative paths start from (default: here)."""

    model_dir: str | None = None
    train: str | None = None
    valid: str | None = None
    output_dir: str | None = None
    gpus_per_node: int | None = None
    nnodes: int | None = None
    node_rank: int | None = None
    master_addr: str | None = None
    master_port: int | None = None
    remote_code: str | None = None
    allow_hub: bool = False
    speed: speed_options.SpeedOptions = field(default_factory=speed_options.SpeedOptions)
    skip_data_check: bool = False
    fresh: bool = False
    dry_run: bool = False
    overrides: tuple[str, ...] = ()  # Hydra ++key=value, maybe after a `--`
    trainer: str | None = None
    cwd: Path | None = None

    def working_folder(self) -> Path:
        """Where the command line's relative paths start."""
        return Path(self.cwd or os.getcwd())


@dataclass(frozen=True)
class LaunchPlan:
    """One launch, decided: the folders and data (absolute), the trainer's settings as one mapping
    (`settings`: the recipe's, then the user's overrides, each key's last value winning), the nodes
    and processes, the variables the trainer gets and the notes to print."""

    output_dir: Path
    train: Path
    valid: Path
    model: str = ""  # what the trainer loads: the model folder, or a hub id (--allow-hub)
    model_dir: Path | None = None  # the local model folder; None for a hub id
    user: overrides.Overrides = field(default_factory=overrides.Overrides)
    recipe: tuple[tuple[str, str], ...] = ()  # ftenv's settings for the trainer, the user's over them
    settings: Mapping[str, object] = field(default_factory=dict)
    max_epoch: int = 50
    keep_nbest_models: int = 20
    resume: bool = True
    launch: cluster_env.Launch = field(
        default_factory=lambda: cluster_env.Launch("single node", "1", 0, None, None)
    )
    nproc_per_node: int = 1
    speed: speed_options.TrainerAdditions = field(default_factory=speed_options.TrainerAdditions)
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    trainer: tuple[str, ...] = ("-m", ENTRY_MODULE)
    start: restart.Start = field(default_factory=restart.Start)  # which start of which job
    cwd: Path = field(default_factory=Path.cwd)
    dry_run: bool = False
    fresh: bool = False
    skip_data_check: bool = False

    @property
    def model_pt(self) -> Path | None:
        return self.model_dir / "model.pt" if self.model_dir else None

    @property
    def world_size(self) -> int:
        """Nodes x processes per node (the most nodes of an elastic range)."""
        return max(1, int(self.launch.nnodes.split(":")[-1])) * max(1, self.nproc_per_node)

    @property
    def changes_folder(self) -> bool:
        """Only node 0 changes the output folder, never a dry run (other nodes may share the folder;
        their trainers read model.pt only after torchrun's rendezvous, which waits for node 0)."""
        return not self.dry_run and self.launch.node_rank in (0, None)


def trainer_overrides(plan: LaunchPlan) -> list[str]:
    """The trainer's `++key=value`s: the recipe's settings the user does not override, then the
    user's overrides as given (the self-check's recipe run passes these too)."""
    return plan.user.over(plan.recipe)


def torchrun_argv(plan: LaunchPlan) -> list[str]:
    """The torchrun command line, rendered from the plan."""
    return [
        sys.executable,
        "-m",
        TORCHRUN_MODULE,
        *plan.launch.torchrun_args(plan.nproc_per_node),
        f"--signals-to-handle={TORCHRUN_SIGNALS}",
        *plan.trainer,
        *trainer_overrides(plan),
    ]


def _absolute(path: str, cwd: Path) -> Path:
    return Path(path) if Path(path).is_absolute() else cwd / path


def _processes_per_node(options: FinetuneOptions, launch: cluster_env.Launch, env, notes: list[str]) -> int:
    if options.gpus_per_node is not None:
        return options.gpus_per_node
    if launch.nproc_per_node is not None:
        return launch.nproc_per_node
    count = gpu_count(env)
    if not count:
        raise InputError(
            "no GPU visible, so the number of processes per node is unknown: start the container "
            "with GPUs (`docker run --gpus all`, Kubernetes nvidia.com/gpu limits, Apptainer --nv, "
            "pyxis/Slurm --gpus-per-node) or pass --gpus-per-node N"
        )
    notes.append(f"--gpus-per-node not given: using the {count} visible GPU(s)")
    return count


def _user_overrides(options: FinetuneOptions) -> overrides.Overrides:
    """The one parse of the user's overrides; a key an option decides is refused (give the option)."""
    user = overrides.parse_all(options.overrides)  # misplaced options and malformed overrides first
    for key in (*user.values, *user.deleted):
        if key in OPTION_KEYS:
            raise InputError(
                f"++{key} is what {OPTION_KEYS[key]} sets: ftenv finetune checks, holds and watches "
                f"that one, so give {OPTION_KEYS[key]} instead of the override"
            )
    return user


def _folder_settings(settings: Mapping[str, object]) -> tuple[int, int, bool]:
    """(max_epoch, keep_nbest_models, resume) as the trainer gets them (the recipe's when deleted)."""
    recipe = dict(RECIPE_DEFAULTS)
    value = {k: str(settings.get(f"train_conf.{k}", recipe[f"train_conf.{k}"])) for k in (
        "max_epoch", "keep_nbest_models", "resume")}  # fmt: skip
    try:
        return int(value["max_epoch"]), int(value["keep_nbest_models"]), value["resume"].lower() == "true"
    except ValueError as exc:
        raise InputError(f"train_conf.max_epoch and keep_nbest_models must be whole numbers: {exc}") from None


def plan_launch(options: FinetuneOptions, environ=None) -> LaunchPlan:
    """The launch `ftenv finetune` will run, worked out without creating or running anything;
    InputError says every problem found in the inputs."""
    env = variables.environment() if environ is None else environ
    user = _user_overrides(options)
    missing = [
        f"--{name.replace('_', '-')}"
        for name in ("model_dir", "train", "valid", "output_dir")
        if not getattr(options, name)
    ]
    if missing:
        raise InputError(f"missing {', '.join(missing)} (see `ftenv finetune --help`)")
    problems = check_options(options.gpus_per_node, options.nnodes, options.node_rank, options.master_port)
    notes: list[str] = []
    cwd = options.working_folder()
    model = options.model_dir
    model_path = _absolute(model, cwd)
    if options.allow_hub and not model_path.exists():
        notes.append(f"{model} is not a local folder: loading it from the model hub (--allow-hub)")
    else:
        problems += check_model_dir(model_path, cwd, notes)
        model = str(model_path)
    train, valid = _absolute(options.train, cwd), _absolute(options.valid, cwd)
    problems += check_jsonl(train, "train", cwd) + check_jsonl(valid, "valid", cwd)
    out = _absolute(options.output_dir, cwd)
    if clash := folder.model_dir_problem(out, model_path):
        raise InputError(clash)  # before the output folder is made (inside the model folder, maybe)
    problems += check_output_dir(out, environ=env)  # made when the launch starts
    remote_code = options.remote_code
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
            nnodes=options.nnodes,
            node_rank=options.node_rank,
            master_addr=options.master_addr,
            master_port=options.master_port,
        )
    except cluster_env.LaunchError as exc:
        raise InputError(str(exc)) from None
    notes += launch.notes
    nproc = _processes_per_node(options, launch, env, notes)

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
    recipe += [("train_data_set_list", str(train)), ("valid_data_set_list", str(valid))]
    recipe += RECIPE_DEFAULTS
    child_env: dict[str, str] = {}
    if not options.allow_hub:
        recipe += OFFLINE_OVERRIDES
        child_env.update(OFFLINE_ENV)
    recipe.append(("output_dir", str(out)))
    recipe.append(hydra_run_dir(out))
    # --compile, --compile-parts, --buckets, --fused-adamw (speed_options.py): they read the settings
    # so far (gradient accumulation) and add to the recipe; the settings after them serve the rest.
    speed = speed_options.for_trainer(options.speed, user.settings(recipe), env, out)
    recipe += speed.recipe
    child_env.update(speed.env)
    settings = user.settings(recipe)
    notes += speed.notes + lora_settings.notes(settings)
    try:
        failfast.timeout_s(env)
        hooks.close_timeout_s(env)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    child_env[variables.OUTPUT_DIR] = str(out)
    child_env.update(failfast.launcher_env(out, env))
    child_env.update(nccl_debug.launcher_env(launch.nnodes, env))
    max_epoch, keep, resume = _folder_settings(settings)
    return LaunchPlan(
        output_dir=out,
        train=train,
        valid=valid,
        model=model,
        model_dir=model_path if model_path.is_dir() else None,
        user=user,
        recipe=tuple(recipe),
        settings=settings,
        max_epoch=max_epoch,
        keep_nbest_models=keep,
        resume=resume,
        launch=launch,
        nproc_per_node=nproc,
        speed=speed,
        env=child_env,
        notes=tuple(notes),
        trainer=tuple(shlex.split(options.trainer or f"-m {ENTRY_MODULE}")),
        start=restart.Start.of(env),
        cwd=cwd,
        dry_run=options.dry_run,
        fresh=options.fresh,
        skip_data_check=options.skip_data_check,
    )
