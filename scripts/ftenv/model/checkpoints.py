"""The checkpoints FunASR's trainer writes for Fun-ASR-Nano (their names, what a run folder holds)
and a checkpoint's weights read and fitted onto the model its base folder's config.yaml builds,
because FunASR's own loader (load_pretrained_model) only prints a warning for every key a
checkpoint lacks and evaluates random weights without saying so. The one home of these names for
the output folder's check before a run, the eval, the export and the transcripts alike."""

from __future__ import annotations

import re
from pathlib import Path

from ftenv.model import lora
from ftenv.model.folder import CTC_PREFIXES, ModelLoadError

#: The file a DeepSpeed run writes inside each checkpoint folder (FunASR's average reads it there).
DEEPSPEED_STATES = "mp_rank_00_model_states.pt"
#: The checkpoint names FunASR's trainer (funasr/train_utils/trainer_ds.py) and its average write.
EPOCH = re.compile(r"^model\.pt\.ep(\d+)$")
STEP = re.compile(r"^model\.pt\.ep(\d+)\.(\d+)$")
EPOCH_OR_STEP = re.compile(r"^model\.pt\.ep(\d+)(?:\.(\d+))?$")
AVERAGE = re.compile(r"^model\.pt\.avg(\d+)$")
BEST = "model.pt.best"


def run_checkpoints(folder: Path) -> tuple[list[Path], list[Path]]:
    """(epoch, best and average checkpoints in that order, the step checkpoints) of a run's folder."""
    epochs, averages, steps = [], [], []
    best = None
    for p in folder.iterdir() if folder.is_dir() else ():
        if m := EPOCH.match(p.name):
            epochs.append((int(m.group(1)), p))
        elif m := STEP.match(p.name):
            steps.append(((int(m.group(1)), int(m.group(2))), p))
        elif m := AVERAGE.match(p.name):
            averages.append((int(m.group(1)), p))
        elif p.name == BEST:
            best = p
    chosen = [p for _, p in sorted(epochs)] + ([best] if best else []) + [p for _, p in sorted(averages)]
    return chosen, [p for _, p in sorted(steps)]


def read_weights(path: Path) -> dict:
    """The model weights of a checkpoint file (a FunASR checkpoint dict, an average, a plain
    state_dict, a DeepSpeed folder), as upstream unwraps them (checkpoint_utils.normalize_checkpoint_state);
    optimizer state is not kept."""
    import torch
    from funasr.models.fun_asr_nano.checkpoint_utils import normalize_checkpoint_state

    file = path / DEEPSPEED_STATES if path.is_dir() else path
    if not file.is_file():
        raise ModelLoadError(f"{path}: not a checkpoint file (no {DEEPSPEED_STATES} in the folder)")
    try:
        data = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # a cut file or not a torch file: zip, pickle and EOF errors
        first = (str(exc).splitlines() or [""])[0][:200]
        raise ModelLoadError(
            f"{file}: does not load as a PyTorch checkpoint ({type(exc).__name__}: {first}); a file cut "
            "short by a full disk or a killed save does not load: use another checkpoint of the run"
        ) from None
    if isinstance(data, dict) and "module" in data and isinstance(data["module"], dict):
        data = data["module"]  # DeepSpeed's model states
    state = normalize_checkpoint_state(data) if isinstance(data, dict) else None
    if not state or not all(hasattr(v, "shape") for v in state.values()):
        raise ModelLoadError(
            f"{file}: loads but holds no model weights (expected FunASR's checkpoint with a "
            "'state_dict', or a state_dict)"
        )
    return state


def check_fit(model, state: dict, path: Path) -> None:
    """ModelLoadError unless every tensor of the model is in the checkpoint, in its shape, and the
    checkpoint has no other; the keys upstream may lack (CTC) are the only ones allowed missing."""
    own = model.state_dict()
    missing = sorted(k for k in own if k not in state and not k.startswith(CTC_PREFIXES))
    unexpected = sorted(k for k in state if k not in own and not k.startswith(CTC_PREFIXES))
    wrong = sorted(k for k in own if k in state and tuple(own[k].shape) != tuple(state[k].shape))
    problems = []
    if missing:
        problems.append(f"{len(missing)} of the model's tensors missing (e.g. {', '.join(missing[:3])})")
    if unexpected:
        problems.append(
            f"{len(unexpected)} tensors the model does not have (e.g. {', '.join(unexpected[:3])})"
        )
    if wrong:
        k = wrong[0]
        problems.append(
            f"{len(wrong)} tensors of another shape (e.g. {k}: {tuple(state[k].shape)} in the checkpoint, "
            f"{tuple(own[k].shape)} in the model)"
        )
    if problems:
        raise ModelLoadError(
            f"{path}: does not fit the model its base folder's config.yaml builds: {'; '.join(problems)}. "
            + _fix(lora.adapter_names(unexpected), lora.adapter_names(missing))
        )


def _fix(unexpected_adapters: list[str], missing_adapters: list[str]) -> str:
    """What to do about a checkpoint that does not fit: LoRA settings are the run's, never a
    command's option, so the fix for adapters is the run folder's config.yaml."""
    if unexpected_adapters:
        return (
            f"It holds {len(unexpected_adapters)} LoRA adapter tensors (a run with "
            "++llm_conf.use_lora=true): its model is built with the llm_conf (use_lora, lora_conf) that "
            "FunASR's trainer wrote into the run folder's config.yaml, and that file is not beside the "
            "checkpoint or does not set use_lora: keep the checkpoint in its run folder with that "
            "config.yaml (lost: write one there with the run's llm_conf: use_lora: true and its "
            "lora_conf r, lora_alpha, target_modules)"
        )
    if missing_adapters:
        return (
            "The run folder's config.yaml sets llm_conf.use_lora: true but the checkpoint holds no "
            "LoRA adapters: a checkpoint of another run? Evaluate it beside its own run's config.yaml"
        )
    return "Give the base model folder the run was fine-tuned from"


def fitted(model, path: Path) -> dict:
    """A checkpoint's weights, read once (memory-mapped) and checked once to fit the model."""
    state = read_weights(path)
    check_fit(model, state, path)
    return state


def put_weights(model, state: dict, path: Path) -> list[str]:
    """Copy weights that `fitted` returned onto the model; CTC tensors they lack are switched off,
    as upstream does."""
    from funasr.models.fun_asr_nano.checkpoint_utils import disable_incomplete_ctc

    own = model.state_dict()
    usable = {k: v for k, v in state.items() if k in own}
    model.load_state_dict(usable, strict=False)
    notes = []
    if getattr(model, "ctc_decoder", None) is not None and disable_incomplete_ctc(
        model, set(usable), log=_Quiet()
    ):
        notes.append(f"{path}: no trained CTC weights (timestamps off; transcripts unaffected)")
    return notes


class _Quiet:
    """A logger for upstream's helper that says nothing (the caller reports in its own words)."""

    def warning(self, *args, **kwargs) -> None:
        return None
