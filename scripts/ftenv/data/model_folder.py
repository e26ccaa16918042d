"""A Fun-ASR-Nano model folder checked like the data, before anything loads it: everything the recipe
loads is there (config.yaml, model.pt, the LLM folder and the tokenizer files config.yaml points
to), and a known trap is named: a `model.pt` without the trained CTC weights (copies of
Fun-ASR-Nano-2512: FunASR #3208 and #3496, Fun-ASR #106), read from the state dict's keys only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ERROR, WARNING = "error", "warning"
#: Files one of which a Hugging Face tokenizer folder holds (fast tokenizer, BPE pair, SentencePiece).
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",))
#: The state-dict prefixes of Fun-ASR-Nano's CTC branch (funasr/models/fun_asr_nano/model.py).
CTC_PREFIXES = ("ctc_decoder.", "ctc.")


@dataclass(frozen=True)
class Problem:
    severity: str
    message: str


def _locate(raw: str, model_dir: Path, cwd: Path) -> Path | None:
    """The folder a config path names: absolute, from the working directory (FunASR's own reading),
    or inside the model folder (where a configuration.json's file_path_metas puts it)."""
    for candidate in (Path(raw), cwd / raw, model_dir / raw):
        if candidate.exists():
            return candidate
    return None


def _folder_problem(what: str, key: str, raw, model_dir: Path, cwd: Path, needs) -> Problem | None:
    if not raw:
        return Problem(WARNING, f"config.yaml sets no {key}: FunASR cannot build the {what} without it")
    found = _locate(str(raw), model_dir, cwd)
    if found is None:
        return Problem(
            ERROR,
            f"{key} {raw} (the {what}) is not found (tried it as given, from {cwd} and from {model_dir}): "
            "copy the whole model folder, the LLM subfolder included, or set the path",
        )
    if not any(all((found / name).is_file() for name in group) for group in needs):
        names = " or ".join("+".join(group) for group in needs)
        return Problem(ERROR, f"{key} {found} (the {what}) has no {names}: an incomplete copy?")
    return None


def state_dict_keys(model_pt: Path) -> list[str] | str:
    """The parameter names in model.pt without loading its tensors (memory-mapped, weights only), or
    why they cannot be read."""
    import torch

    try:
        state = torch.load(str(model_pt), map_location="meta", mmap=True, weights_only=True)
    except Exception as exc:  # an old pickle format, a non-tensor object: say so, never crash
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    while isinstance(state, dict):  # the containers funasr's normalize_checkpoint_state unwraps
        inner = next(
            (state[k] for k in ("state_dict", "model_state_dict", "model") if isinstance(state.get(k), dict)),
            None,
        )
        if inner is None:
            break
        state = inner
    if not isinstance(state, dict):
        return f"not a state dict ({type(state).__name__})"
    return [k[len("module.") :] if k.startswith("module.") else k for k in state]


def _ctc_problem(conf: dict, model_pt: Path) -> Problem | None:
    """The CTC branch configured (`ctc_decoder`) but its trained weights not in model.pt."""
    if not conf.get("ctc_decoder") or not model_pt.is_file() or model_pt.stat().st_size == 0:
        return None
    keys = state_dict_keys(model_pt)
    if isinstance(keys, str):
        return Problem(
            WARNING, f"cannot read the parameter names of {model_pt} ({keys}): CTC weights unknown"
        )
    external = (conf.get("ctc_decoder_conf") or {}).get("init_param_path")
    wanted = CTC_PREFIXES[1:] if external and os.path.exists(external) else CTC_PREFIXES
    missing = [p for p in wanted if not any(k.startswith(p) for k in keys)]
    if not missing:
        return None
    return Problem(
        WARNING,
        f"{model_pt} has no {' / '.join(p + '*' for p in missing)} weights although config.yaml sets "
        f"ctc_decoder: {conf['ctc_decoder']} (a copy of Fun-ASR-Nano-2512 without its trained CTC branch: "
        "FunASR #3208 and #3496, Fun-ASR #106). The CTC branch starts random, the recipe's loss does not "
        "train it, and the fine-tuned model.pt then holds those random tensors, so FunASR's guard that "
        "turns timestamps off for a checkpoint without them no longer applies; use the ModelScope copy "
        "(it has them) if you need timestamps",
    )


def inspect(model_dir: Path, cwd: Path) -> list[Problem]:
    """What is missing or wrong in a local model folder ([] when it has everything the recipe loads)."""
    if not model_dir.is_dir():
        return [Problem(ERROR, f"model dir {model_dir} is not a folder")]
    problems = [
        Problem(ERROR, f"model dir {model_dir} has no {name}: not a Fun-ASR-Nano checkout")
        for name in ("config.yaml", "model.pt")
        if not (model_dir / name).is_file()
    ]
    if not (model_dir / "config.yaml").is_file():
        return problems
    import yaml

    try:
        conf = yaml.safe_load((model_dir / "config.yaml").read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return [*problems, Problem(ERROR, f"{model_dir / 'config.yaml'} is not YAML: {exc}")]
    if not isinstance(conf, dict):
        return [*problems, Problem(ERROR, f"{model_dir / 'config.yaml'} is not a mapping of settings")]
    llm = (conf.get("llm_conf") or {}).get("init_param_path")
    tok = (conf.get("tokenizer_conf") or {}).get("init_param_path")
    found = [
        _folder_problem("LLM decoder", "llm_conf.init_param_path", llm, model_dir, cwd, [("config.json",)]),
        _folder_problem("tokenizer", "tokenizer_conf.init_param_path", tok, model_dir, cwd, TOKENIZER_FILES),
        _ctc_problem(conf, model_dir / "model.pt"),
    ]
    return problems + [p for p in found if p is not None]
