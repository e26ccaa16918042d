"""The torchrun command `ftenv finetune` will run, worked out without running anything, so that
`--dry-run` and the unit tests see exactly what would start.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.model.funasr_import import OFFLINE_ENV
from ftenv.steps.watch_command import FORWARDED
from ftenv.train import cluster_env, lora_settings, nccl_debug, overrides, speed_options
from ftenv.train.gpu_gate import gpu_count
from ftenv.train.inputs import InputError, check_jsonl, check_model_dir, check_options, check_output_dir
from ftenv.train.recipe import OFFLINE_OVERRIDES, RECIPE_DEFAULTS, hydra_run_dir
from ftenv.train.runlife import folder, restart
from ftenv.trainer import ENTRY_MODULE
from ftenv.trainer.runlife import failfast, hooks

#: torchrun forwards these to its workers, the watchdog's own (its default lacks SIGUSR1/SIGUSR2,
#: which Slurm's `--signal` sends: torchrun would die of them and leave its workers running).
TORCHRUN_SIGNALS = ",".join(sig.name for sig in FORWARDED)
#: torchrun, in-process, with the stop's exit code (ftenv.train.runlife.torchrun).
TORCHRUN_MODULE = "ftenv.train.runlife.torchrun"


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


@dataclass
class TorchrunCommand:
    """The command line and the variables the trainer gets, the nodes, and notes to print;
    `settings`: the trainer's overrides as one mapping (ftenv.train.overrides), which every check
    before torchrun reads instead of the command line."""

    argv: list[str]
    env: dict[str, str]
    launch: cluster_env.Launch
    notes: list[str] = field(default_factory=list)
    output_dir: Path | None = None
    model_pt: Path | None = None
    settings: dict[str, object] = field(default_factory=dict)
    nproc_per_node: int = 1
    start: restart.Start = field(default_factory=restart.Start)  # which start of which job

    def setting(self, key: str, default: str) -> str:
        """The value of `++key=` the trainer gets, as text (`default` when nothing sets it)."""
        return str(self.settings.get(key, default))

    @property
    def world_size(self) -> int:
        """Nodes x processes per node (the most nodes of an elastic range)."""
        return max(1, int(self.launch.nnodes.split(":")[-1])) * max(1, self.nproc_per_node)


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


def work_out(options: FinetuneOptions, environ=None) -> TorchrunCommand:
    """The command `ftenv finetune` will run, without running anything (the unit tests call this)."""
    env = variables.environment() if environ is None else environ
    user = overrides.parse_all(options.overrides)  # misplaced options and malformed overrides first
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
    data = {}
    for what, raw in (("train", options.train), ("valid", options.valid)):
        data[what] = str(_absolute(raw, cwd))
        problems += check_jsonl(_absolute(raw, cwd), what, cwd)
    out = _absolute(options.output_dir, cwd)
    if clash := folder.model_dir_problem(out, model_path):
        raise InputError(clash)  # before the output folder is made (inside the model folder, maybe)
    problems += check_output_dir(out, create=not options.dry_run, environ=env)
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
    recipe += [("train_data_set_list", data["train"]), ("valid_data_set_list", data["valid"])]
    recipe += RECIPE_DEFAULTS
    child_env: dict[str, str] = {}
    if not options.allow_hub:
        recipe += OFFLINE_OVERRIDES
        child_env.update(OFFLINE_ENV)
    recipe.append(("output_dir", str(out)))
    recipe.append(hydra_run_dir(out))
    # --compile, --compile-parts, --buckets, --fused-adamw (speed_options.py)
    speed = speed_options.for_trainer(
        options.speed, user.settings(recipe), env, out, create=not options.dry_run
    )
    recipe += speed.recipe
    child_env.update(speed.env)
    notes += speed.notes + lora_settings.notes(user.settings(recipe))
    try:
        failfast.timeout_s(env)
        hooks.close_timeout_s(env)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    child_env[variables.OUTPUT_DIR] = str(out)
    child_env.update(failfast.launcher_env(out, env))
    child_env.update(nccl_debug.launcher_env(launch.nnodes, env))
    trainer = options.trainer or f"-m {ENTRY_MODULE}"
    argv = [
        sys.executable,
        "-m",
        TORCHRUN_MODULE,
        *launch.torchrun_args(nproc),
        f"--signals-to-handle={TORCHRUN_SIGNALS}",
        *shlex.split(trainer),
        *user.over(recipe),
    ]
    model_pt = model_path / "model.pt" if model_path.is_dir() else None
    return TorchrunCommand(
        argv=argv,
        env=child_env,
        launch=launch,
        notes=notes,
        output_dir=out,
        model_pt=model_pt,
        settings=user.settings(recipe),
        nproc_per_node=nproc,
        start=restart.Start.of(env),
    )
