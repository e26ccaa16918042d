"""`ftenv transcribe`: its parser; the work is ftenv.evaluate.transcribe's."""

from __future__ import annotations

from ftenv.commands.options import add_decode_options, from_options
from ftenv.evaluate import transcribe


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
    add_decode_options(p, "files")
    p.set_defaults(func=from_options(transcribe.TranscribeOptions, transcribe.run))
