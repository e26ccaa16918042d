"""Which files of a model folder an export copies, and configuration.json naming them: FunASR joins
the names of its file_path_metas to the folder wherever it lies, and resolves nothing else of
config.yaml (a relative decoder path there is read from the working folder). Where a path of
config.yaml is found is the model folder rule's (ftenv.model.folder.locate)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ftenv.model.folder import CONFIG, CONFIGURATION, FILE_KEYS, WEIGHTS, ModelLoadError, locate


def _walk(conf, trail=()):
    """(key trail, value) of every string in conf stored under one of FILE_KEYS."""
    if isinstance(conf, dict):
        for key, value in conf.items():
            if isinstance(value, str) and key in FILE_KEYS:
                yield (*trail, key), value
            else:
                yield from _walk(value, (*trail, key))


def set_in(tree: dict, trail: tuple, value) -> None:
    for key in trail[:-1]:
        tree = tree.setdefault(key, {})
    tree[trail[-1]] = value


def model_files(conf: dict, base: Path) -> dict[tuple, tuple[Path, str]]:
    """Each file setting of config.yaml: (the file or folder it means, its name inside OUT). A path
    inside the model folder keeps its name there (as in the released folder); others are copied
    under their own name."""
    found = {}
    for trail, value in _walk(conf):
        path = locate(value, base, Path.cwd())
        if path is None:
            continue
        path = path.resolve()
        name = path.relative_to(base).as_posix() if path.is_relative_to(base) else path.name
        found[trail] = (path, name)
    return found


def base_configuration(base: Path) -> dict:
    """The base folder's configuration.json (ModelScope's metadata), {} where it has none."""
    source = base / CONFIGURATION
    if not source.is_file():
        return {}
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(
            f"{source}: not readable JSON ({type(exc).__name__}); fix or remove it"
        ) from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{source}: not a JSON object; fix or remove it")
    return data


def listed_files(metas, base: Path) -> set[tuple[Path, str]]:
    """The files of the base folder that its configuration.json's file_path_metas names (FunASR
    joins each to the folder): they go into OUT too, under the same names."""
    values = metas.values() if isinstance(metas, dict) else metas if isinstance(metas, list) else [metas]
    found = set()
    for value in values:
        if isinstance(value, (dict, list)):
            found |= listed_files(value, base)
        elif isinstance(value, str) and value not in (CONFIG, WEIGHTS) and (base / value).exists():
            path = (base / value).resolve()
            if path.is_relative_to(base) and path != base:
                found.add((path, path.relative_to(base).as_posix()))
    return found


def configuration(base_data: dict, files: dict) -> dict:
    """configuration.json: the base's, with file_path_metas naming every file of OUT, so that FunASR
    joins them to the folder wherever it lies (it resolves nothing else of config.yaml)."""
    data = copy.deepcopy(base_data)
    metas = data.setdefault("file_path_metas", {})
    metas.update({"init_param": WEIGHTS, "config": CONFIG})
    for trail, (_path, name) in files.items():
        set_in(metas, trail, name)
    return data
