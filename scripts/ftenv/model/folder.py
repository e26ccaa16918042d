"""A Fun-ASR-Nano model folder, the one rule every command applies before anything loads it
(`ftenv data check --model-dir`, `ftenv finetune`, `ftenv eval`, `ftenv transcribe`, `ftenv export`):
config.yaml read as FunASR reads it (OmegaConf, interpolations resolved), model.pt, the LLM folder
and the tokenizer files config.yaml points to, each relative path found one way, and a known trap
named: a `model.pt` without the trained CTC weights (copies of Fun-ASR-Nano-2512: FunASR #3208 and
#3496, Fun-ASR #106), read from the state dict's keys only.

The tokenizer: FunASR builds Fun-ASR-Nano's `HuggingfaceTokenizer` as
`AutoTokenizer.from_pretrained(tokenizer_conf.init_param_path)` (funasr/tokenizer/hf_tokenizer.py);
transformers loads such a folder from a fast tokenizer's tokenizer.json, a BPE pair
(vocab.json + merges.txt) or a SentencePiece tokenizer.model (converted, with the sentencepiece
package the image carries). A tokenizer_config.json alone loads an empty vocabulary and vocab.json
without merges.txt does not load: neither is enough.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

CONFIG = "config.yaml"
#: ModelScope's metadata beside it, whose file_path_metas FunASR joins to the folder.
CONFIGURATION = "configuration.json"
#: The released folder's weights, and the latest checkpoint of a run (a copy of its newest one).
WEIGHTS = "model.pt"
#: The state-dict prefixes of Fun-ASR-Nano's CTC branch (funasr/models/fun_asr_nano/model.py): the
#: parts a checkpoint may lack, since upstream disables CTC timestamps when its tensors are missing
#: (checkpoint_utils.disable_incomplete_ctc); transcripts do not use them.
CTC_PREFIXES = ("ctc_decoder.", "ctc.")
HF_CONFIG, HF_MODEL_TYPE = "config.json", "fun_asr_nano"  #: transformers' layout of Fun-ASR-Nano
ERROR, WARNING = "error", "warning"
#: The LLM folder's files transformers needs to build the decoder (its weights are in model.pt).
DECODER_FILES = (("config.json",),)
#: Files one group of which a tokenizer folder holds (see the module's docstring).
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("tokenizer.model",))
#: Keys of config.yaml whose values name files or folders of the model (the decoder, the tokenizer,
#: the CTC tokenizer's vocabulary, a CMVN or token list): found by `locate`.
FILE_KEYS = ("init_param_path", "vocab_path", "token_list", "bpemodel", "seg_dict", "cmvn_file")


class ModelLoadError(Exception):
    """A model or checkpoint that cannot be used; the message names the path and the fix."""


@dataclass(frozen=True)
class Problem:
    severity: str
    message: str


def locate(raw: str, model_dir: Path, cwd: Path) -> Path | None:
    """The file or folder a path of config.yaml names, absolute; None when there is none. A
    relative path is the model folder's own first (the released folder names its LLM folder so, and
    FunASR joins configuration.json's file_path_metas to the folder), then the working directory's
    (where FunASR and transformers read a path that configuration.json does not name). An empty
    value names nothing (the released config.yaml's `lora_conf.init_param_path: ""`), not the folder."""
    if not raw:
        return None
    path = Path(raw)
    candidates = (path,) if path.is_absolute() else (model_dir / path, cwd / path)
    for candidate in candidates:
        try:
            if candidate.exists():
                return candidate.absolute()
        except OSError:  # a value too long to be a path
            return None
    return None


def read_config(model_dir: Path) -> dict | Problem:
    """config.yaml as FunASR reads it: OmegaConf, interpolations resolved (the released config names
    the tokenizer as `${llm_conf.init_param_path}`), or what is wrong with it."""
    from omegaconf import OmegaConf

    path = model_dir / CONFIG
    try:
        conf = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception as exc:  # YAML, OmegaConf and decoding errors alike: the file is not usable
        return Problem(ERROR, f"{path} is not readable YAML ({type(exc).__name__}: {exc})")
    if not isinstance(conf, dict):
        return Problem(ERROR, f"{path} is not a mapping of settings")
    _overlay_file_path_metas(conf, _file_path_metas(model_dir), model_dir)
    return conf


def _init_path(conf: dict, section: str):
    """The path a section of config.yaml builds from (its init_param_path), as written."""
    return (conf.get(section) or {}).get("init_param_path")


def tokenizer_dir(model_dir: Path, cwd: Path | None = None) -> Path:
    """The model folder's tokenizer, which counts text_length for `ftenv data prepare` and `check`:
    config.yaml's tokenizer_conf.init_param_path found by `locate`, else the folder itself;
    ValueError when config.yaml does not read."""
    conf = read_config(model_dir)
    if isinstance(conf, Problem):
        raise ValueError(conf.message)
    raw = _init_path(conf, "tokenizer_conf")
    if not raw:
        return model_dir
    return locate(str(raw), model_dir, cwd or Path.cwd()) or model_dir / str(raw)


def load_tokenizer(path: Path):
    """The tokenizer in the folder `path` as FunASR's HuggingfaceTokenizer loads it, offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)


def _file_path_metas(model_dir: Path) -> dict:
    try:
        metas = json.loads((model_dir / CONFIGURATION).read_text(encoding="utf-8")).get("file_path_metas")
    except (OSError, ValueError, AttributeError):  # none, not JSON, not an object: FunASR reads none
        return {}
    return metas if isinstance(metas, dict) else {}


def _overlay_file_path_metas(conf: dict, metas: dict, model_dir: Path) -> None:
    """configuration.json's file_path_metas over config.yaml, as FunASR merges them when it loads a
    folder (funasr/download/download_model_from_hub.py, add_file_root_path): a file setting it names
    that exists in the folder wins. The released config.yaml leaves the CTC tokenizer's
    `vocab_path: null`; its configuration.json names multilingual.tiktoken."""
    for key, value in metas.items():
        if isinstance(value, dict):
            if conf.get(key) is None:
                conf[key] = {}
            if isinstance(conf[key], dict):
                _overlay_file_path_metas(conf[key], value, model_dir)
        elif key in FILE_KEYS and isinstance(value, str) and value and (model_dir / value).exists():
            conf[key] = value


def located(conf, model_dir: Path, cwd: Path):
    """conf with every path under FILE_KEYS that `locate` finds made absolute; others stay as written."""
    if isinstance(conf, dict):
        return {
            k: (
                str(found)
                if k in FILE_KEYS and isinstance(v, str) and v and (found := locate(v, model_dir, cwd))
                else located(v, model_dir, cwd)
            )
            for k, v in conf.items()
        }
    if isinstance(conf, list):
        return [located(v, model_dir, cwd) for v in conf]
    return conf


def _folder_problem(what: str, key: str, raw, model_dir: Path, cwd: Path, needs) -> Problem | None:
    if not raw:
        return Problem(WARNING, f"config.yaml sets no {key}: FunASR cannot build the {what} without it")
    found = locate(str(raw), model_dir, cwd)
    if found is None:
        tried = str(raw) if Path(str(raw)).is_absolute() else f"{model_dir / raw} and {cwd / raw}"
        return Problem(
            ERROR,
            f"{key} {raw} (the {what}) is not found (tried {tried}): copy the whole model folder, the "
            "LLM subfolder included, or set the path",
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


def _ctc_problem(conf: dict, model_pt: Path, model_dir: Path, cwd: Path) -> Problem | None:
    """The CTC branch configured (`ctc_decoder`) but its trained weights not in model.pt."""
    if not conf.get("ctc_decoder") or not model_pt.is_file() or model_pt.stat().st_size == 0:
        return None
    keys = state_dict_keys(model_pt)
    if isinstance(keys, str):
        return Problem(
            WARNING, f"cannot read the parameter names of {model_pt} ({keys}): CTC weights unknown"
        )
    external = _init_path(conf, "ctc_decoder_conf")
    wanted = CTC_PREFIXES[1:] if external and locate(str(external), model_dir, cwd) else CTC_PREFIXES
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
    return _inspected(model_dir, cwd)[1]


def _inspected(model_dir: Path, cwd: Path) -> tuple[dict | None, list[Problem]]:
    if not model_dir.exists():
        return None, [
            Problem(
                ERROR,
                f"model dir {model_dir} does not exist: pass a local Fun-ASR-Nano checkout (the folder with "
                "config.yaml and model.pt; in a container, the path as mounted inside it)",
            )
        ]
    if not model_dir.is_dir():
        return None, [Problem(ERROR, f"model dir {model_dir} is not a folder")]
    problems = [
        Problem(
            ERROR,
            f"model dir {model_dir} has no {name}: not a Fun-ASR-Nano checkout (expected config.yaml, "
            "model.pt and the LLM folder, e.g. Qwen3-0.6B/)",
        )
        for name in (CONFIG, WEIGHTS)
        if not (model_dir / name).is_file()
    ]
    if problems:
        return None, problems
    conf = read_config(model_dir)
    if isinstance(conf, Problem):
        return None, [*problems, conf]
    llm, tok = _init_path(conf, "llm_conf"), _init_path(conf, "tokenizer_conf")
    found = [
        _folder_problem("LLM decoder", "llm_conf.init_param_path", llm, model_dir, cwd, DECODER_FILES),
        _folder_problem("tokenizer", "tokenizer_conf.init_param_path", tok, model_dir, cwd, TOKENIZER_FILES),
        _ctc_problem(conf, model_dir / WEIGHTS, model_dir, cwd),
    ]
    return conf, problems + [p for p in found if p is not None]


def checked_config(model_dir: Path, cwd: Path | None = None) -> dict:
    """The folder's config.yaml as written (interpolations resolved); ModelLoadError naming the
    errors `inspect` finds (its warnings are the data checks' to say)."""
    conf, problems = _inspected(Path(model_dir), cwd or Path.cwd())
    errors = [p.message for p in problems if p.severity == ERROR]
    if errors or conf is None:
        raise ModelLoadError(f"{model_dir}: {'; '.join(errors)}")
    return conf


def load_config(model_dir: Path, cwd: Path | None = None) -> dict:
    """checked_config with its paths located (absolute), for building the model."""
    return located(copy.deepcopy(checked_config(model_dir, cwd)), Path(model_dir), cwd or Path.cwd())


def is_fun_asr_nano_checkout(path: Path) -> bool:
    """config.yaml and model.pt: the two files every model folder holds (released or exported)."""
    return path.is_dir() and (path / CONFIG).is_file() and (path / WEIGHTS).exists()


def is_hf_folder(path: Path) -> bool:
    """transformers' Fun-ASR-Nano layout (`ftenv export --format hf`): config.json's model_type."""
    try:
        return json.loads((Path(path) / HF_CONFIG).read_text(encoding="utf-8"))["model_type"] == HF_MODEL_TYPE
    except (OSError, ValueError, KeyError, TypeError):  # no file, not JSON, no such key, not an object
        return False
