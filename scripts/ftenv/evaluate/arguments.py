"""What a model argument of `ftenv eval`, `ftenv transcribe` and `ftenv export` means (the checkpoint
names and their loading are the model wing's: ftenv.model.checkpoints).

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

from dataclasses import dataclass, field
from pathlib import Path

from ftenv.model import folder as model_folder
from ftenv.model import lora
from ftenv.model.checkpoints import BEST, DEEPSPEED_STATES, EPOCH, run_checkpoints
from ftenv.model.folder import CONFIG, WEIGHTS, ModelLoadError


@dataclass(frozen=True)
class ModelChoice:
    """One model to evaluate: its label in reports, the base model folder whose config builds it and
    the weights put on it (the folder's own model.pt for the base model), and the LoRA settings of
    the checkpoint's run (its config.yaml's llm_conf), which build the adapters its weights hold;
    `hf`: a folder in transformers' layout, decoded by ftenv.evaluate.hf_decode."""

    label: str
    model_dir: Path
    weights: Path
    is_base: bool = False
    adapters: lora.Lora | None = None
    hf: bool = False


@dataclass
class Choices:
    models: list[ModelChoice]
    notes: list[str] = field(default_factory=list)


def is_model_folder(path: Path) -> bool:
    """A released model folder: config.yaml and model.pt, and no checkpoint a run writes beside them."""
    return (
        model_folder.is_fun_asr_nano_checkout(path)
        and not run_checkpoints(path)[0]
        and not _written_by_trainer(path)
    )


def run_config(folder: Path) -> dict:
    """A run folder's config.yaml as its trainer wrote it (plain YAML, nothing resolved: a run's
    config may hold Hydra interpolations); {} where it is missing or not a mapping."""
    import yaml

    try:
        conf = yaml.safe_load((folder / CONFIG).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return conf if isinstance(conf, dict) else {}


def _written_by_trainer(folder: Path) -> bool:
    """FunASR's trainer saves the run's whole configuration as config.yaml, output_dir included. The
    released config.yaml holds both keys too, empty (`output_dir: null`): only a set value is a run's."""
    conf = run_config(folder)
    return bool(conf.get("output_dir")) and bool(conf.get("train_data_set_list"))


def is_checkpoint(path: Path) -> bool:
    """One checkpoint as FunASR's trainer writes it: a file, or a DeepSpeed run's folder holding its
    model states; any other folder is a run's (its checkpoints) or a model folder."""
    return path.is_file() or (path / DEEPSPEED_STATES).is_file()


def export_choice(path: Path) -> Path:
    """The one checkpoint `ftenv export` takes for RUN_OR_CHECKPOINT: a file (or DeepSpeed folder) is
    itself; a run folder means its model.pt.best (the checkpoint FunASR ranked best on the validation
    set), else its newest model.pt.epN. Step checkpoints (model.pt.epE.S: saved mid-epoch, never
    validated) only when named."""
    if is_checkpoint(path):
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


def run_folder(checkpoint: Path) -> Path:
    """The run's output folder of a checkpoint file (or of a DeepSpeed checkpoint folder)."""
    return checkpoint.parent.parent if checkpoint.is_dir() else checkpoint.parent


def run_base(folder: Path) -> Path | None:
    """The base model folder a run started from, as FunASR's trainer recorded it (model_path in the
    run's config.yaml), when that folder is still there."""
    raw = run_config(folder).get("model_path")
    return Path(raw) if raw and is_model_folder(Path(raw)) else None


def choose(arguments: list[str], base: str | None = None) -> Choices:
    """The models the arguments mean, in the order given (a run folder expands to its checkpoints).

    A checkpoint is built from the base model folder: `base`, else the one model folder among the
    arguments, else the folder the run recorded in its config.yaml.
    """
    notes: list[str] = []
    released = {raw: is_model_folder(Path(raw)) for raw in arguments}  # once per argument
    folders = [Path(a) for a in arguments if released[a]]
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
        hf = model_folder.is_hf_folder(path)
        if released[raw] or hf:  # an HF folder's weights are its own files
            weights = path / WEIGHTS if released[raw] else path
            models.append(ModelChoice(_label(path, models), path, weights, is_base=True, hf=hf))
            continue
        if not is_checkpoint(path):  # it exists: a run's folder
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
            run = run_folder(path)
        model_dir = given_base or (folders[0] if folders else None) or run_base(run)
        if model_dir is None:
            raise ModelLoadError(
                f"{path}: a checkpoint needs its base model folder (the released folder the run "
                "started from, for config.yaml and the LLM folder): add it to the command line"
            )
        adapters = lora.of_run(run_config(run))
        for f in files:
            models.append(ModelChoice(_label(f, models), model_dir, f, adapters=adapters))
    if not models:
        raise ModelLoadError("no model given: name a model folder, a run's output folder or a checkpoint")
    return Choices(models, notes)


def _label(path: Path, taken: list[ModelChoice]) -> str:
    """A short unique name: the file's or folder's name, with its parent's when two share it."""
    label = path.name if path.name != WEIGHTS or path.is_dir() else f"{path.parent.name}/{path.name}"
    names = {m.label for m in taken}
    if label in names:
        label = f"{path.parent.name}/{path.name}"
    n = 2
    unique = label
    while unique in names:
        unique, n = f"{label}#{n}", n + 1
    return unique
