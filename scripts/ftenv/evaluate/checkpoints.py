"""What a model argument of `ftenv eval`, `ftenv transcribe` and `ftenv export` means, and loading a
run's checkpoint weights onto the model its base folder's config.yaml builds, because FunASR's own
loader (load_pretrained_model) only prints a warning for every key a checkpoint lacks and evaluates
random weights without saying so.

A model argument is one of:
- a model folder as released (config.yaml, model.pt, the LLM folder it names): the base model;
- a checkpoint file a run wrote: `model.pt` (the latest, with optimizer state), `model.pt.best`,
  `model.pt.avgN` (FunASR's average of the N best), `model.pt.epN` (the end of epoch N), or a step
  checkpoint `model.pt.epE.S` named on purpose (a DeepSpeed run writes each as a folder holding
  `mp_rank_00_model_states.pt`; that works too);
- a folder in transformers' layout (`ftenv export --format hf`): decoded by ftenv.evaluate.hf_decode;
- a run's output folder: its epoch, best and average checkpoints. Not `model.pt` (the latest is a
  copy of the newest epoch or step checkpoint) and not the step checkpoints `model.pt.epE.S` a
  stopped or long run leaves (mid-epoch states, often many): each skipped kind is said in one line;
  name a file to evaluate it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CONFIG = "config.yaml"
WEIGHTS = "model.pt"
#: The file a DeepSpeed run writes inside each checkpoint folder (FunASR's average reads it there).
DEEPSPEED_STATES = "mp_rank_00_model_states.pt"
#: The checkpoint names FunASR's trainer (funasr/train_utils/trainer_ds.py) and its average write.
EPOCH = re.compile(r"^model\.pt\.ep(\d+)$")
STEP = re.compile(r"^model\.pt\.ep(\d+)\.(\d+)$")
AVERAGE = re.compile(r"^model\.pt\.avg(\d+)$")
BEST = "model.pt.best"
HF_CONFIG, HF_MODEL_TYPE = "config.json", "fun_asr_nano"  #: transformers' layout of Fun-ASR-Nano
#: Parts of Fun-ASR-Nano a checkpoint may lack: upstream disables CTC timestamps when its tensors
#: are missing (checkpoint_utils.disable_incomplete_ctc); transcripts do not use them.
OPTIONAL_PREFIXES = ("ctc_decoder.", "ctc.")


class ModelLoadError(Exception):
    """A model argument that cannot be evaluated; the message names the path and the fix."""


@dataclass(frozen=True)
class ModelChoice:
    """One model to evaluate: its label in reports, the base model folder whose config builds it and
    the weights put on it (the folder's own model.pt for the base model)."""

    label: str
    model_dir: Path
    weights: Path
    is_base: bool = False


@dataclass
class Choices:
    models: list[ModelChoice]
    notes: list[str] = field(default_factory=list)


def is_model_folder(path: Path) -> bool:
    """A released model folder: config.yaml and model.pt, and no checkpoint a run writes beside them."""
    return (
        path.is_dir()
        and (path / CONFIG).is_file()
        and (path / WEIGHTS).exists()
        and not run_checkpoints(path)[0]
        and not _written_by_trainer(path)
    )


def _written_by_trainer(folder: Path) -> bool:
    """FunASR's trainer saves the run's whole configuration as config.yaml, output_dir included."""
    import yaml

    try:
        conf = yaml.safe_load((folder / CONFIG).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(conf, dict) and "output_dir" in conf and "train_data_set_list" in conf


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


def export_choice(path: Path) -> Path:
    """The one checkpoint `ftenv export` takes for RUN_OR_CHECKPOINT: a file (or DeepSpeed folder) is
    itself; a run folder means its model.pt.best (the checkpoint FunASR ranked best on the validation
    set), else its newest model.pt.epN. Step checkpoints (model.pt.epE.S: saved mid-epoch, never
    validated) only when named."""
    if path.is_file() or (path / DEEPSPEED_STATES).is_file():
        return path
    if not path.is_dir():
        raise ModelLoadError(f"{path}: no such checkpoint file or run folder; name a model.pt.* file")
    chosen, steps = run_checkpoints(path)
    if (path / BEST).exists():
        return path / BEST
    epochs = [p for p in chosen if EPOCH.match(p.name)]
    if epochs:
        return epochs[-1]
    hint = (
        f" (step checkpoints there: {', '.join(p.name for p in steps)}; name one to export it)"
        if steps
        else ""
    )
    raise ModelLoadError(f"{path}: no {BEST} and no model.pt.epN in this run folder{hint}")


def run_base(folder: Path) -> Path | None:
    """The base model folder a run started from, as FunASR's trainer recorded it (model_path in the
    run's config.yaml), when that folder is still there."""
    import yaml

    try:
        conf = yaml.safe_load((folder / CONFIG).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    raw = conf.get("model_path") if isinstance(conf, dict) else None
    return Path(raw) if raw and is_model_folder(Path(raw)) else None


def choose(arguments: list[str], base: str | None = None) -> Choices:
    """The models the arguments mean, in the order given (a run folder expands to its checkpoints).

    A checkpoint is built from the base model folder: `base`, else the one model folder among the
    arguments, else the folder the run recorded in its config.yaml.
    """
    notes: list[str] = []
    folders = [Path(a) for a in arguments if is_model_folder(Path(a))]
    given_base = Path(base) if base else None
    if given_base is not None and not is_model_folder(given_base):
        raise ModelLoadError(
            f"base model folder {given_base}: not a model folder (expected {CONFIG} and {WEIGHTS} as "
            "released, e.g. Fun-ASR-Nano-2512/ with its Qwen3-0.6B/ folder)"
        )
    models: list[ModelChoice] = []
    for raw in arguments:
        path = Path(raw)
        if not path.exists():
            raise ModelLoadError(
                f"{path}: no such file or folder; give a model folder (FunASR's or `ftenv export --format "
                "hf`'s), a run's output folder or a checkpoint (model.pt, .best, .avgN, .epN)"
            )
        if is_model_folder(path) or is_hf_folder(path):  # an HF folder's weights are its own files
            weights = path / WEIGHTS if is_model_folder(path) else path
            models.append(ModelChoice(_label(path, models), path, weights, is_base=True))
            continue
        if path.is_dir() and not (path / DEEPSPEED_STATES).is_file():
            chosen, steps = run_checkpoints(path)
            if steps:
                notes.append(
                    f"{path}: {len(steps)} step checkpoint(s) (model.pt.epE.S, mid-epoch) not "
                    f"evaluated, e.g. {steps[-1].name}; name one to evaluate it"
                )
            if (path / WEIGHTS).exists():
                notes.append(f"{path}: {WEIGHTS} (the latest, a copy of the newest checkpoint) not evaluated")
            if not chosen:
                raise ModelLoadError(
                    f"{path}: neither a model folder ({CONFIG} + {WEIGHTS}) nor a run's output folder "
                    "with checkpoints (model.pt.epN, model.pt.best, model.pt.avgN); name a checkpoint "
                    "file to evaluate it"
                )
            files = chosen
            run = path
        else:
            files = [path]
            run = path.parent.parent if path.is_dir() else path.parent
        model_dir = given_base or (folders[0] if folders else None) or run_base(run)
        if model_dir is None:
            raise ModelLoadError(
                f"{path}: a checkpoint needs its base model folder (the released folder the run "
                "started from, for config.yaml and the LLM folder): add it to the command line"
            )
        for f in files:
            models.append(ModelChoice(_label(f, models), model_dir, f))
    if not models:
        raise ModelLoadError("no model given: name a model folder, a run's output folder or a checkpoint")
    return Choices(models, notes)


def is_hf_folder(path: Path) -> bool:
    """transformers' Fun-ASR-Nano layout (`ftenv export --format hf`): config.json's model_type."""
    try:
        return json.loads((Path(path) / HF_CONFIG).read_text(encoding="utf-8"))["model_type"] == HF_MODEL_TYPE
    except (OSError, ValueError, KeyError, TypeError):  # no file, not JSON, no such key, not an object
        return False


def _label(path: Path, taken: list[ModelChoice]) -> str:
    """A short unique name: the file's or folder's name, with its parent's when two share it."""
    label = path.name if path.name != WEIGHTS or path.is_dir() else f"{path.parent.name}/{path.name}"
    if path.is_dir() and (path / DEEPSPEED_STATES).is_file():
        label = path.name
    names = {m.label for m in taken}
    if label in names:
        label = f"{path.parent.name}/{path.name}"
    n = 2
    unique = label
    while unique in names:
        unique, n = f"{label}#{n}", n + 1
    return unique


# --- loading ----------------------------------------------------------------------------------


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
    optional = tuple(OPTIONAL_PREFIXES)
    missing = sorted(k for k in own if k not in state and not k.startswith(optional))
    unexpected = sorted(k for k in state if k not in own and not k.startswith(optional))
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
            "Give the base model folder the run was fine-tuned from (and the same llm_conf, e.g. LoRA)"
        )


def put_weights(model, state: dict, path: Path) -> list[str]:
    """Copy the checkpoint's weights onto the model once check_fit passes; CTC tensors it lacks are
    switched off, as upstream does."""
    from funasr.models.fun_asr_nano.checkpoint_utils import disable_incomplete_ctc

    check_fit(model, state, path)
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
