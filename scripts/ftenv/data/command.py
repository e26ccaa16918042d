"""`ftenv data prepare` and `ftenv data check`: the command line of the data wing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftenv.data import check, dataset_conf, lines
from ftenv.outcome import UNUSABLE

PROG = "ftenv data"


def _check(args: argparse.Namespace) -> int:
    overrides = [x for x in args.files if x.startswith("+")]
    train = [p for x in args.files if not x.startswith("+") for p in lines.manifests(x, Path.cwd())]
    if not train and not args.valid:
        print(f"{PROG} check: no file given; usage: {PROG} check [--valid FILE] FILE...", file=sys.stderr)
        return UNUSABLE
    try:
        rules = dataset_conf.rules_for(
            Path(args.model_dir) if args.model_dir else None, overrides, args.world_size
        )
    except ValueError as exc:
        print(f"{PROG} check: {exc}", file=sys.stderr)
        return UNUSABLE
    out = Path(args.output_dir) / check.REPORT_NAME
    usable, _ = check.run_check(
        train,
        [p for v in args.valid for p in lines.manifests(v, Path.cwd())],
        rules,
        Path.cwd(),
        out,
        args.jobs,
    )
    return 0 if usable else UNUSABLE


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="prepare and check Fun-ASR-Nano training data (ChatML JSONL)")
    data = p.add_subparsers(dest="data_command", metavar="prepare|check", required=True)
    c = data.add_parser(
        "check",
        help="check every line of JSONL manifests as FunASR will read them",
        description=(
            "Streams every line: UTF-8, JSON, ChatML roles and the speech marker, the audio "
            "(present, decodable, its duration against speech_length), empty transcripts, "
            "duplicates, and what FunASR's length rules drop with the run's settings (upstream's "
            "recipe, the model's config.yaml, then ++dataset_conf.KEY=VALUE overrides). Exit 0 "
            "when usable (warnings allowed), 2 on any error. See docs/data.md."
        ),
        usage=f"{PROG} check [--valid FILE] [--model-dir DIR] [--output-dir DIR] FILE... "
        "[++dataset_conf.KEY=VALUE ...]",
    )
    c.add_argument(
        "files", nargs="*", metavar="FILE", help="training manifests, then any ++dataset_conf overrides"
    )
    c.add_argument("--valid", action="append", default=[], metavar="FILE", help="a validation manifest")
    c.add_argument("--model-dir", help="the model folder: its config.yaml's dataset_conf applies")
    c.add_argument("--output-dir", default=".", help=f"where {check.REPORT_NAME} is written (default: here)")
    c.add_argument("--world-size", type=int, default=1, help="GPUs of the run in all (sampler buffers; 1)")
    c.add_argument("--jobs", type=int, help="worker processes (default: the usable cores)")
    c.set_defaults(func=_check)
    from ftenv.data import prepare

    prepare.add_arguments(data)
