"""The dataset_conf a run will have, as FunASR builds it: the model folder's config.yaml, then the
recipe's and the user's `++dataset_conf.KEY=VALUE` overrides (parsed by ftenv.train.overrides)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ftenv.data.rules import DEFAULTS, RECIPE_KEYS, LengthRules

PREFIX = "dataset_conf."


def model_dataset_conf(model_dir: Path | None) -> dict:
    """dataset_conf of the model folder's config.yaml ({} without one)."""
    if model_dir is None or not (model_dir / "config.yaml").is_file():
        return {}
    import yaml

    conf = yaml.safe_load((model_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    found = conf.get("dataset_conf") if isinstance(conf, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def rules_for(model_dir: Path | None, settings: Mapping[str, object], world_size: int = 1) -> LengthRules:
    """The length rules of a run of upstream's recipe on this model, with these settings (the
    overrides as one mapping, ftenv.train.overrides: key to value; keys other than
    `dataset_conf.KEY` are not the sampler's)."""
    conf = model_dataset_conf(model_dir)
    conf.update({key: DEFAULTS[key] for key in RECIPE_KEYS})
    for key, value in settings.items():
        sub = key[len(PREFIX) :]
        if key.startswith(PREFIX) and "." not in sub:
            conf[sub] = value
    return LengthRules.from_conf(conf, world_size)
