"""`ftenv finetune`: upstream's Fun-ASR-Nano fine-tuning recipe as one command, on one GPU or many nodes.

It does what examples/industrial_data_pretraining/fun_asr_nano/finetune.sh does (same Hydra
overrides: encoder and adaptor frozen, LLM trainable, token batching, log_interval 1; recipe.py),
but:

- the torchrun arguments come from the environment it finds (single node, Slurm, Kubeflow
  PyTorchJob, torchrun's own PET_* variables; see cluster_env.py), and `--dry-run` prints them;
- it checks the inputs first and says exactly what is wrong (inputs.py: missing model dir or files,
  a JSONL line that is not the recipe's ChatML format, an output dir it cannot write, bad numbers);
- it prints the start-up report once per node before torchrun (startup.py), as not every
  launcher runs the image's entrypoint;
- it stays offline (HF_HUB_OFFLINE=1, no update check) unless `--allow-hub` is given;
- it writes only under --output-dir (Hydra's run folder too, recipe.py) and the temporary
  directory: caches that cannot be written where the image puts them move there (cache_dirs.py);
- it reads the output folder first and says whether the run is fresh, resumes (from which file, at
  which epoch and step) or is finished (refused: exit 2), puts a loadable model.pt in place, and
  checks the free space (runlife/folder.py, runlife/space.py);
- every rank runs the trainer entry (funasr_entry.py): a SIGTERM, SIGINT or SIGUSR1 stops the run at
  a step boundary with a checkpoint of exactly where it was, exit 75 (runlife/);
- it becomes `ftenv watch -- <the torchrun command>`: the trainer runs under the step-time
  watchdog (FTENV_WATCH=0: plainly), one process as before (exec), exit code the trainer's;
- any further `++key=value` Hydra override is passed through and replaces the recipe's default
  (overrides.py).

This module is the command line; launch_plan.py works out the command.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ftenv import outcome, variables
from ftenv.attention import sdpa
from ftenv.report import startup
from ftenv.train import cache_dirs, cluster_env, data_gate, speed_options
from ftenv.train.inputs import InputError
from ftenv.train.launch_plan import plan
from ftenv.train.runlife import folder, space

PROG = "ftenv finetune"


def _run_watched(argv: list[str]) -> int:
    """Become `ftenv watch -- argv` (exec: same process, so signals and the exit code are the
    trainer's as the watchdog passes them on). A command, not an import: the launcher stays
    independent of the step-time wing, as a user's own `ftenv watch -- CMD` is."""
    cmd = [sys.executable, "-m", "ftenv.cli", "watch", "--", *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, cmd)
    except OSError as exc:
        print(f"{PROG}: cannot start {shlex.join(cmd)}: {exc}", file=sys.stderr)
        return 127


def _check_folder(args: argparse.Namespace, p) -> str | None:
    """Say what the output folder holds and make it ready (not in a dry run); the refusal, if any."""
    out = p.output_dir
    resume = p.setting("train_conf.resume", "true").lower() == "true"
    try:
        max_epoch = int(p.setting("train_conf.max_epoch", "50"))
        keep = int(p.setting("train_conf.keep_nbest_models", "20"))
    except ValueError as exc:
        return f"train_conf.max_epoch and keep_nbest_models must be whole numbers: {exc}"
    # Only node 0 changes the folder (other nodes may share it; their trainers read model.pt only
    # after torchrun's rendezvous, which waits for node 0).
    changes = not args.dry_run and p.launch.node_rank in (0, None)
    if args.fresh:
        moved = "--fresh: the earlier run's checkpoints would move to a replaced-<time>/ folder"
        if changes:
            moved = folder.start_over(out) or "--fresh: no earlier checkpoint here"
        print(f"{PROG}: {moved}", file=sys.stderr)
        state = folder.FolderState("fresh", "a fresh run (--fresh)")
    else:
        state = folder.inspect(out, max_epoch, resume)
    if state.kind in ("finished", "broken"):
        return state.line
    print(f"{PROG}: {state.line}", file=sys.stderr)
    existing = (state.relink or state.checkpoint).path if state.checkpoint else None
    problem, line = space.check(out, p.model_pt, keep, max_epoch, existing)
    if problem is not None:
        return problem
    print(f"{PROG}: {line}", file=sys.stderr)
    if changes:
        for note in folder.prepare(out, state):
            print(f"{PROG}: {note}", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    try:
        p = plan(args)
    except InputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    # Before the report and the trainer import anything that reads them (Hugging Face reads HF_HOME
    # at import): the trainer and everything it starts inherit writable caches.
    cache_dirs.redirect(PROG, create=not args.dry_run)
    if not args.dry_run:
        startup.show_once(PROG)
    raw = os.environ.get(variables.SDPA_DEPRIORITIZED)
    setting = sdpa.interpret_deprioritized(raw)
    info = [
        f"launch: {p.launch.describe()}",
        f"{variables.SDPA_DEPRIORITIZED}={'unset' if raw is None else raw}: {setting.meaning}",
        *p.notes,
    ]
    if p.env:
        info.append("environment for the trainer: " + " ".join(f"{k}={v}" for k, v in p.env.items()))
    for line in info:
        print(f"{PROG}: {line}", file=sys.stderr)
    refusal = _check_folder(args, p)
    if refusal is not None:
        print(f"{PROG}: {refusal}", file=sys.stderr)
        return outcome.UNUSABLE
    if args.dry_run:
        print(shlex.join(p.argv))
        return 0
    cwd = Path(args.cwd or os.getcwd())
    if refused := data_gate.check_before_launch(PROG, p.argv, cwd, args.skip_data_check, p.launch.node_rank):
        return refused
    os.environ.update(p.env)
    print(f"{PROG}: running {shlex.join(p.argv)}", file=sys.stderr, flush=True)
    return _run_watched(p.argv)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "finetune",
        help="fine-tune Fun-ASR-Nano with upstream's recipe, on one GPU or many nodes",
        description=(
            "Upstream's Fun-ASR-Nano finetune.sh as one command. torchrun's --nnodes/--node_rank/"
            "--master_addr come from the environment: Slurm (srun, one task per node), Kubeflow "
            "PyTorchJob (MASTER_ADDR, WORLD_SIZE = nodes, RANK), torchrun's PET_* variables, else "
            "one node. Extra ++key=value arguments are Hydra overrides passed to funasr-train-ds and "
            "replace the recipe's defaults. Before torchrun it prints the start-up report once per "
            f"node, unless the image's entrypoint already did ({variables.REPORT}=0 skips it)."
        ),
        epilog="Example: ftenv finetune --model-dir /models/Fun-ASR-Nano-2512 --train /data/train.jsonl "
        "--valid /data/val.jsonl --output-dir /out --gpus-per-node 8 ++train_conf.max_epoch=5",
    )
    p.add_argument("--model-dir", help="local Fun-ASR-Nano checkout (config.yaml, model.pt)")
    p.add_argument("--train", help="training data, ChatML JSONL (upstream's format)")
    p.add_argument("--valid", help="validation data, same format")
    p.add_argument("--output-dir", help="checkpoints and logs go here (created)")
    p.add_argument(
        "--gpus-per-node",
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="processes (GPUs) per node, 1 or more; default: PET_NPROC_PER_NODE, else every visible GPU",
    )
    p.add_argument("--nnodes", type=int, help="override the number of nodes found in the environment")
    p.add_argument("--node-rank", type=int, help="override this node's rank (0 = the master node)")
    p.add_argument("--master-addr", help="override the master address (default: from the environment)")
    p.add_argument(
        "--master-port",
        type=int,
        help=f"override the master port (1-65535; default {cluster_env.DEFAULT_MASTER_PORT})",
    )
    p.add_argument(
        "--remote-code",
        help="model.py to import (trust_remote_code); default: the model dir's model.py if present",
    )
    p.add_argument(
        "--allow-hub",
        action="store_true",
        help="allow downloads from the model hub (default: offline, a local model dir only)",
    )
    speed_options.add_arguments(p)  # --compile, --compile-parts, --buckets, --fused-adamw
    data_gate.add_arguments(p)  # --skip-data-check
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start over in --output-dir: its checkpoints move to a replaced-<time>/ folder first "
        "(default: resume from the newest checkpoint that loads; a finished run is refused)",
    )
    p.add_argument("--trainer", help=argparse.SUPPRESS)  # the trainer command (tests: a CPU shim)
    p.add_argument("--cwd", help=argparse.SUPPRESS)  # resolve relative paths here (tests)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the inputs, print the command, run nothing (no start-up report either)",
    )
    p.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        metavar="++key=value",
        help="Hydra overrides for funasr-train-ds, after all options; they replace the recipe's defaults",
    )
    p.set_defaults(func=run)
