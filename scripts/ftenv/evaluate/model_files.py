"""Which files of a model folder an export copies, and configuration.json naming them: FunASR joins
the names of its file_path_metas to the folder wherever it lies, and resolves nothing else of
config.yaml (a relative decoder path there is read from the working folder)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ftenv.evaluate.checkpoints import ModelLoadError

CONFIG, CONFIGURATION, WEIGHTS = "config.yaml", "configuration.json", "model.pt"
#: Keys of config.yaml whose values name files or folders of the model (the decoder, the tokenizer,
#: the CTC tokenizer's vocabulary, a CMVN or token list): copied into OUT and named relative to it.
FILE_KEYS = ("init_param_path", "vocab_path", "token_list", "bpemodel", "seg_dict", "cmvn_file")
#: The decoder's files transformers needs to build it (the weights themselves are in model.pt).
DECODER_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")


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
    """Each file setting of config.yaml: (the file or folder it means, its name inside OUT). A
    relative path is the model folder's own (as in the released folder); absolute ones are copied
    under their own name."""
    found = {}
    for trail, value in _walk(conf):
        path = Path(value) if Path(value).is_absolute() else base / value
        if not path.exists():
            continue
        path = path.resolve()
        name = path.relative_to(base).as_posix() if path.is_relative_to(base) else path.name
        found[trail] = (path, name)
    return found


def check_decoder(conf: dict, base: Path, files: dict) -> None:
    """The decoder (LLM) and tokenizer folders config.yaml points to must be there: without them
    AutoModel falls back to the hub, which is offline here."""
    for section, needed in (("llm_conf", DECODER_FILES), ("tokenizer_conf", TOKENIZER_FILES)):
        raw = (conf.get(section) or {}).get("init_param_path")
        if raw is None:
            continue
        trail = (section, "init_param_path")
        folder = files[trail][0] if trail in files else (Path(raw) if Path(raw).is_absolute() else base / raw)
        if not folder.is_dir() or not any((folder / name).is_file() for name in needed):
            raise ModelLoadError(
                f"{folder}: the {section}.init_param_path of {base / CONFIG} has no {' or '.join(needed)}; "
                "the model folder lacks its decoder/tokenizer files: download the whole model folder again"
            )


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
