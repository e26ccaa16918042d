"""`ftenv transcribe MODEL AUDIO...`: one transcript per audio file, for a quick look at a model (a
released folder, an exported one, a run's checkpoint), decoded as `ftenv eval` decodes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import audio
from ftenv.evaluate import arguments, decode, hf_decode
from ftenv.model.folder import ModelLoadError
from ftenv.outcome import UNUSABLE

PROG = "ftenv transcribe"


@dataclass(frozen=True)
class TranscribeOptions:
    model: str
    audio: tuple[str, ...]
    base: str | None = None
    device: str | None = None
    batch_size: int = decode.BATCH_SIZE
    max_new_tokens: int = decode.MAX_NEW_TOKENS


def run(options: TranscribeOptions) -> int:
    """Prints `AUDIO<TAB>transcript` per file, in the order given."""
    unusable = [f"{a}: {p.problem}" for a in options.audio if (p := audio.read_duration(a)).seconds is None]
    if unusable:
        print(f"{PROG}: {'; '.join(unusable)}; exit {UNUSABLE}", file=sys.stderr)
        return UNUSABLE
    try:
        choices = arguments.choose([options.model], options.base)
        if len(choices.models) != 1:
            raise ModelLoadError(
                f"{options.model}: a run's folder holds {len(choices.models)} checkpoints; name one "
                "(e.g. model.pt.best) or use `ftenv eval` to compare them"
            )
        choice = choices.models[0]
        loaded = (
            hf_decode.load(choice.model_dir, options.device)
            if choice.hf
            else decode.load_model(choice.model_dir, choice.weights, options.device, choice.adapters)
        )
    except ModelLoadError as exc:
        print(f"{PROG}: {exc}; exit {UNUSABLE}", file=sys.stderr)
        return UNUSABLE
    for note in loaded.notes:
        print(f"{PROG}: {note}", file=sys.stderr)
    wanted = [decode.Utterance(str(i), str(Path(a))) for i, a in enumerate(options.audio)]
    got = (hf_decode if choice.hf else decode).decode_batched(
        loaded, wanted, options.batch_size, options.max_new_tokens
    )
    for utt in wanted:
        print(f"{utt.audio}\t{got.hypotheses[utt.key]}")
    return 0
