"""The dataset_conf a run will have, as FunASR builds it: the model folder's config.yaml, then the
recipe's and the user's `++dataset_conf.KEY=VALUE` overrides (parsed by ftenv.launch.overrides)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ftenv.data.rules import DEFAULTS, RECIPE_KEYS, LengthRules
from ftenv.model import folder as model_folder

PREFIX = "dataset_conf."


def model_dataset_conf(model_dir: Path | None) -> dict:
    """dataset_conf of the model folder's config.yaml, read as every command reads it
    (ftenv.model.folder.read_config); {} without one or when it is unreadable (the folder's check
    names that)."""
    if model_dir is None or not (model_dir / model_folder.CONFIG).is_file():
        return {}
    conf = model_folder.read_config(model_dir)
    found = conf.get("dataset_conf") if isinstance(conf, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def rules_for(model_dir: Path | None, settings: Mapping[str, object], world_size: int = 1) -> LengthRules:
    """The length rules of a run of upstream's recipe on this model, with these settings (the
    overrides as one mapping, ftenv.launch.overrides: key to value; keys other than
    `dataset_conf.KEY` are not the sampler's)."""
    conf = model_dataset_conf(model_dir)
    conf.update({key: DEFAULTS[key] for key in RECIPE_KEYS})
    for key, value in settings.items():
        sub = key[len(PREFIX) :]
        if key.startswith(PREFIX) and "." not in sub:
            conf[sub] = value
    return LengthRules.from_conf(conf, world_size)
