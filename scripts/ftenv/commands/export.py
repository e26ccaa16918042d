"""`ftenv export`: its parser; the folder is written by ftenv.evaluate.export."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftenv.evaluate import export, hf_export
from ftenv.model.folder import WEIGHTS
from ftenv.outcome import UNUSABLE

#: The layouts `--format` writes: FunASR's own (AutoModel, funasr-server) and transformers'
#: (FunAsrNanoForConditionalGeneration: ftenv.evaluate.hf_export).
FORMATS = ("funasr", "hf")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write a fine-tuned checkpoint as a self-contained model folder with a model card",
        description=(
            "Writes OUT: config.yaml, configuration.json, model.pt (the weights only), the decoder and "
            "tokenizer files, README.md (the model card). FunASR's AutoModel(model=OUT) loads it. A run "
            "folder means its model.pt.best, else its newest model.pt.epN; name a file to export another."
        ),
        epilog="Example: ftenv export /out/run1 /models/asr-finetuned --eval /out/eval",
    )
    p.add_argument(
        "source", metavar="RUN_OR_CHECKPOINT", type=Path, help="a run's output folder or a model.pt.* file"
    )
    p.add_argument(
        "out", metavar="OUT", type=Path, help="the model folder to write (must not exist or be empty)"
    )
    p.add_argument(
        "--base",
        type=Path,
        help="the model folder fine-tuned from (default: the one the run's config.yaml names)",
    )
    p.add_argument(
        "--eval", dest="eval_dir", type=Path, help="an `ftenv eval --out` folder: its table goes in the card"
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="funasr",
        help="funasr: FunASR's folder (AutoModel, funasr-server; the default); hf: transformers' "
        "Fun-ASR-Nano layout (FunAsrNanoForConditionalGeneration.from_pretrained, sglang-omni)",
    )
    p.add_argument("--force", action="store_true", help="replace OUT when it exists and is not empty")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = export.ExportOptions(
        source=args.source,
        out=args.out,
        base=args.base,
        eval_dir=args.eval_dir,
        force=args.force,
        format=args.format,
    )
    try:
        done = export.export(options)
    except export.ModelLoadError as exc:
        print(f"ftenv export: {exc}", file=sys.stderr)
        return UNUSABLE
    print(f"ftenv export: wrote {done.out} from {done.checkpoint} (base {done.base})")
    weights = hf_export.WEIGHTS if args.format == "hf" else WEIGHTS
    print(f"ftenv export: {weights} sha256 {done.sha256}")
    return 0
