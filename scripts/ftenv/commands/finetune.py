"""`ftenv finetune`: its parser, and the watchdog its launch runs under; the launcher is
ftenv.launch.finetune's. The test seams of the launcher (another trainer command, another starting
folder) are fields of FinetuneOptions that in-process tests set, not options here."""

from __future__ import annotations

import argparse

from ftenv import variables
from ftenv.launch import cluster_env, finetune
from ftenv.launch.launch_plan import FinetuneOptions, LaunchPlan, torchrun_argv
from ftenv.launch.speed_options import SpeedOptions
from ftenv.trainer import compile_setting
from ftenv.watchdog import watch
from ftenv.watchdog.watch_command import WatchOptions


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
        "--valid /data/valid.jsonl --output-dir /out --gpus-per-node 8 ++train_conf.max_epoch=5",
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
    _add_speed_options(p)
    p.add_argument(
        "--skip-data-check",
        action="store_true",
        help="do not check every line and audio file of the data before training "
        f"({variables.DATA_CHECK}=0 too)",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start over in --output-dir: its checkpoints move to a replaced-<time>/ folder first "
        "(default: resume from the newest checkpoint that loads; a finished run is refused)",
    )
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


def _add_speed_options(p: argparse.ArgumentParser) -> None:
    """--compile, --compile-parts, --buckets, --fused-adamw (ftenv.launch.speed_options)."""
    p.add_argument(
        "--compile",
        action="store_true",
        help="experimental, not yet measured on a GPU: the LLM decoder's layers and the audio side compiled "
        "(torch.compile, dynamic shapes; GPU batches of 2+, no KV cache), FunASRNano's forward without "
        "host syncs, the LM head over labelled positions; caches kept under the output dir; same as "
        f"{variables.COMPILE}=1 (docs/compile.md)",
    )
    p.add_argument(
        "--compile-parts",
        metavar="PARTS",
        help=f"compile these parts instead (comma-separated: {', '.join(compile_setting.PARTS)}); "
        "for comparing the parts (docs/compile.md)",
    )
    p.add_argument(
        "--buckets",
        metavar="SPEC",
        help="pad every batch to few shapes: LENGTHS[:BATCHES], e.g. 64 (lengths to multiples of 64, "
        "batch sizes to powers of two); padded rows and positions stay out of the loss",
    )
    p.add_argument(
        "--fused-adamw",
        action="store_true",
        help="the fused AdamW kernel (++optim_conf.fused=true)",
    )


def options_of(args: argparse.Namespace) -> FinetuneOptions:
    speed = SpeedOptions(
        compile=args.compile,
        compile_parts=args.compile_parts,
        buckets=args.buckets,
        fused_adamw=args.fused_adamw,
    )
    return FinetuneOptions(
        model_dir=args.model_dir,
        train=args.train,
        valid=args.valid,
        output_dir=args.output_dir,
        gpus_per_node=args.gpus_per_node,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        remote_code=args.remote_code,
        allow_hub=args.allow_hub,
        speed=speed,
        skip_data_check=args.skip_data_check,
        fresh=args.fresh,
        dry_run=args.dry_run,
        overrides=tuple(args.overrides),
    )


def watched(plan: LaunchPlan) -> int:
    """torchrun under the watchdog, in this process, as `ftenv watch --output-dir OUT -- argv` runs
    it (ftenv.watchdog.watch): torchrun in its own process group, this process's signals
    passed on, the trainer's exit code returned, the plan's output folder for the watchdog's files.
    torchrun is its child, not called here as accelerate's launch_command calls torch's run: the
    watchdog reads torchrun's output through pipes and signals its process group. With the
    watchdog off (FTENV_WATCH=0) this process becomes torchrun (exec)."""
    return watch.run(WatchOptions(cmd=tuple(torchrun_argv(plan)), output_dir=plan.output_dir))


def run(args: argparse.Namespace) -> int:
    return finetune.run(options_of(args), watched)
