"""Which checkpoint a run folder means for `ftenv export`, and its weights read without the trainer's
state, checked against the model its base folder builds: FunASR's own loader only prints a warning
for a missing tensor and skips a tensor of the wrong shape, so a broken export would load silently."""

from __future__ import annotations

import re
from pathlib import Path

#: FunASR's trainer writes these into its output folder (funasr/train_utils/trainer_ds.py).
BEST = "model.pt.best"
EPOCH = re.compile(r"^model\.pt\.ep(\d+)$")
STEP = re.compile(r"^model\.pt\.ep(\d+)\.(\d+)$")
#: Where a checkpoint keeps the model's weights, in the order FunASR's load_pretrained_model looks.
WEIGHT_KEYS = ("state_dict", "model_state_dict", "model")


class CheckpointError(ValueError):
    """A checkpoint that cannot be exported: the message names the path and the fix."""


def resolve(path: Path) -> Path:
    """The checkpoint file that RUN_OR_CHECKPOINT means: a file is itself; a run folder means its
    model.pt.best (the checkpoint FunASR ranked best on the validation set), else its newest epoch
    checkpoint model.pt.epN. A stopped run's step checkpoints (model.pt.epE.S) are taken only when
    named: they were saved mid-epoch and never validated."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint file or run folder; name a model.pt.* file")
    if (path / BEST).is_file():
        return path / BEST
    epochs = sorted(
        (int(m.group(1)), p) for p in path.iterdir() if (m := EPOCH.match(p.name)) and p.is_file()
    )
    if epochs:
        return epochs[-1][1]
    steps = sorted(p.name for p in path.iterdir() if STEP.match(p.name))
    hint = f" (step checkpoints there: {', '.join(steps)}; name one to export it)" if steps else ""
    raise CheckpointError(f"{path}: no {BEST} and no model.pt.epN in this run folder{hint}")


def read_weights(path: Path) -> dict:
    """The model's tensors of a checkpoint, without optimizer, scheduler or scaler state, with
    DDP's `module.` prefix removed (as FunASR's loader maps it)."""
    import torch

    try:
        loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a truncated or foreign file
        raise CheckpointError(
            f"{path}: not a loadable PyTorch checkpoint ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
            "name a model.pt.* file that FunASR's trainer wrote"
        ) from None
    state = loaded
    for key in WEIGHT_KEYS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if (
        not isinstance(state, dict)
        or not state
        or not all(isinstance(v, torch.Tensor) for v in state.values())
    ):
        raise CheckpointError(
            f"{path}: holds no model state dict (a dict of tensors); name a model.pt.* file"
        )
    return {k.removeprefix("module."): v for k, v in state.items()}


def mismatches(weights: dict, expected: dict) -> list[str]:
    """What keeps `weights` from being exactly the model's tensors (names and shapes), in words."""
    out = [f"missing {k}" for k in expected if k not in weights]
    out += [f"unexpected {k}" for k in weights if k not in expected]
    out += [
        f"{k}: shape {tuple(weights[k].shape)}, the model has {tuple(shape)}"
        for k, shape in expected.items()
        if k in weights and tuple(weights[k].shape) != tuple(shape)
    ]
    return out


def check_fits(weights: dict, expected: dict, checkpoint: Path, base: Path) -> None:
    """Refuse weights that the base folder's model would not take whole."""
    found = mismatches(weights, expected)
    if found:
        shown = "; ".join(found[:5]) + (f"; ... {len(found) - 5} more" if len(found) > 5 else "")
        raise CheckpointError(
            f"{checkpoint}: does not fit the model of {base / 'config.yaml'} ({len(found)} tensor(s): "
            f"{shown}); name the model folder the run was fine-tuned from with --base"
        )
