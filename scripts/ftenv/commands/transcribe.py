"""`ftenv transcribe`: its parser; the work is ftenv.evaluate.transcribe's."""

from __future__ import annotations

import argparse

from ftenv.evaluate import decode, transcribe


def add_parser(sub) -> None:
    p = sub.add_parser(
        "transcribe",
        help="print a transcript per audio file with a model folder or a checkpoint",
        description="Decodes each AUDIO file with MODEL (a model folder as released or exported, or one "
        "checkpoint of a run, built from its base folder), greedy, as `ftenv eval` does, and prints "
        "AUDIO<TAB>transcript per file.",
    )
    p.add_argument("model", metavar="MODEL", help="a model folder or a checkpoint file")
    p.add_argument("audio", nargs="+", metavar="AUDIO", help="audio files (wav, flac, ...)")
    p.add_argument("--base", metavar="DIR", help="the base model folder a checkpoint is built from")
    p.add_argument("--device", metavar="cpu|cuda", help="where to decode (default: cuda when there is one)")
    p.add_argument("--batch-size", type=int, default=16, metavar="N", help="files per batch (16)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=decode.MAX_NEW_TOKENS,
        metavar="N",
        help=f"cap on each transcript's tokens (upstream's: {decode.MAX_NEW_TOKENS})",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = transcribe.TranscribeOptions(
        model=args.model,
        audio=tuple(args.audio),
        base=args.base,
        device=args.device,
        batch_size=max(1, args.batch_size),
        max_new_tokens=max(1, args.max_new_tokens),
    )
    return transcribe.run(options)
