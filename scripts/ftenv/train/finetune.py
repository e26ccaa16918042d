"""`ftenv finetune`: upstream's Fun-ASR-Nano fine-tuning recipe as one command, on one GPU or many nodes.

It does what examples/industrial_data_pretraining/fun_asr_nano/finetune.sh does (same Hydra
overrides: encoder and adaptor frozen, LLM trainable, token batching, log_interval 1), but:

- the torchrun arguments come from the environment it finds (single node, Slurm, Kubeflow
  PyTorchJob, torchrun's own PET_* variables; see cluster_env.py), and `--dry-run` prints them;
- it checks the inputs first and says exactly what is wrong (missing model dir or files, a JSONL
  line that is not the recipe's ChatML format, an output dir it cannot write);
- it stays offline (HF_HUB_OFFLINE=1, no update check) unless `--allow-hub` is given;
- it runs under the step-time watchdog (`ftenv watch`) when that is installed;
- any further `++key=value` Hydra override is passed through and replaces the recipe's default.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.report import compile_setting, sdpa
from ftenv.train import cluster_env

#: upstream finetune.sh's overrides, in its order (model, data and output are added separately).
#: Its `++train_conf.deepspeed_config=...` is left out: it points into the example folder and is
#: unused with use_deepspeed=false.
RECIPE_DEFAULTS: list[tuple[str, str]] = [
    ("dataset_conf.data_split_num", "1"),
    ("dataset_conf.batch_sampler", "BatchSampler"),
    ("dataset_conf.batch_size", "6000"),
    ("dataset_conf.sort_size", "1024"),
    ("dataset_conf.batch_type", "token"),
    ("dataset_conf.num_workers", "4"),
    ("train_conf.max_epoch", "50"),
    ("train_conf.log_interval", "1"),
    ("train_conf.resume", "true"),
    ("train_conf.validate_interval", "2000"),
    ("train_conf.save_checkpoint_interval", "2000"),
    ("train_conf.effective_save_name_excludes", "None"),
    ("train_conf.keep_nbest_models", "20"),
    ("train_conf.avg_nbest_model", "10"),
    ("train_conf.use_deepspeed", "false"),
    ("optim_conf.lr", "0.0002"),
    ("audio_encoder_conf.freeze", "true"),
    ("audio_adaptor_conf.freeze", "true"),
    ("llm_conf.freeze", "false"),
]
#: Set for the trainer unless --allow-hub: no hub download, no PyPI update check.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MODELSCOPE_OFFLINE": "1"}
OFFLINE_OVERRIDES = [("disable_update", "true")]
#: How many leading lines of each JSONL are checked.
CHECK_LINES = 5
SPEECH_MARK = ("<|startofspeech|>", "<|endofspeech|>")
EXAMPLE_LINE = (
    '{"messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", '
    '"content": "语音转写：<|startofspeech|>!/data/wav/utt1.wav<|endofspeech|>"}, {"role": "assistant", '
    '"content": "几点了？"}], "speech_length": 145, "text_length": 3}'
)


class InputError(ValueError):
    """A bad argument or input file; the message is what the user sees."""


# --- Hydra overrides -------------------------------------------------------------------------


def override_key(override: str) -> str:
    """'++a.b=1' -> 'a.b'; '~a.b' -> 'a.b'."""
    return override.lstrip("+~").split("=", 1)[0]


def merge_overrides(defaults: list[tuple[str, str]], extra: list[str]) -> list[str]:
    """The recipe's `++key=value`s with every key the user overrides left out, then the user's."""
    for item in extra:
        if item.startswith("-"):
            raise InputError(
                f"{item!r} comes after a Hydra override: put ftenv's options first, then the "
                "++key=value overrides"
            )
        if not item.lstrip("+~") or (not item.startswith("~") and "=" not in item):
            raise InputError(
                f"{item!r} is not a Hydra override: extra arguments must look like ++key=value "
                "(for example ++train_conf.max_epoch=5)"
            )
    taken = {override_key(item) for item in extra}
    return [f"++{k}={v}" for k, v in defaults if k not in taken] + list(extra)


# --- input checks ----------------------------------------------------------------------------


def check_model_dir(path: Path) -> list[str]:
    """Problems with a local Fun-ASR-Nano checkout ([] when it looks usable)."""
    if not path.exists():
        return [
            f"model dir {path} does not exist: pass a local Fun-ASR-Nano checkout (the folder with "
            "config.yaml and model.pt; in a container, the path as mounted inside it)"
        ]
    if not path.is_dir():
        return [f"model dir {path} is not a directory"]
    problems = []
    for name in ("config.yaml", "model.pt"):
        if not (path / name).is_file():
            problems.append(
                f"model dir {path} has no {name}: not a Fun-ASR-Nano checkout (expected config.yaml, "
                "model.pt and the LLM folder, e.g. Qwen3-0.6B/)"
            )
    return problems


def check_line(line: str, base: Path) -> str | None:
    """What is wrong with one JSONL line of the recipe's ChatML format (None when nothing)."""
    if not line.strip():
        return "the line is empty"
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(item, dict):
        return f"a JSON {type(item).__name__}, expected an object with 'messages'"
    if "messages" not in item:
        keys = ", ".join(sorted(item)) or "none"
        hint = (
            ": this looks like FunASR's source/target format (Paraformer, SenseVoice), not "
            "Fun-ASR-Nano's ChatML messages"
            if {"source", "target"} & set(item)
            else ""
        )
        return f"no 'messages' key (keys: {keys}){hint}"
    messages = item["messages"]
    if not isinstance(messages, list) or not messages:
        return '\'messages\' must be a non-empty list of {"role": ..., "content": ...}'
    roles = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
            return f"messages[{i}] must be an object with 'role' and 'content'"
        roles.append(msg["role"])
    user = next((m["content"] for m in messages if m["role"] == "user"), None)
    if user is None:
        return f"no message with role 'user' (roles: {', '.join(map(str, roles))})"
    if "assistant" not in roles:
        return (
            f"no message with role 'assistant' holding the transcript (roles: {', '.join(map(str, roles))})"
        )
    start, end = SPEECH_MARK
    if not isinstance(user, str) or start not in user or end not in user:
        return f"the user message has no {start}!/path/to/audio.wav{end}"
    audio = user.split(start, 1)[1].split(end, 1)[0]
    if not audio.startswith("!"):
        return f"the audio path must follow {start} with '!' ({start}!/path/x.wav{end}), got {audio!r}"
    audio = audio[1:]
    if not audio.startswith(("http://", "https://")):
        audio_path = Path(audio) if Path(audio).is_absolute() else base / audio
        if not audio_path.is_file():
            return (
                f"audio file {audio} not found (relative paths are read from the working directory "
                f"{base}; in a container the data must be mounted at that path)"
            )
    for key in ("speech_length", "text_length"):
        value = item.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return (
                f"{key} must be a positive integer (fbank frames for speech_length, tokens for "
                f"text_length), got {item.get(key)!r}: FunASR silently drops such lines"
            )
    return None


def check_jsonl(path: Path, what: str, base: Path, lines: int = CHECK_LINES) -> list[str]:
    """Problems with a train/valid data file: existence, then its first `lines` lines."""
    if not path.exists():
        return [f"{what} data {path} does not exist"]
    if not path.is_file():
        return [f"{what} data {path} is not a file"]
    if path.suffix not in (".jsonl", ".json"):
        # FunASR reads any other name as a list of JSONL files, one per line.
        listed = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if not listed:
            return [f"{what} data {path} is empty"]
        first = Path(listed[0])
        if first.suffix not in (".jsonl", ".json"):
            return [
                f"{what} data {path}: FunASR reads a file not named *.jsonl as a list of JSONL files, "
                f"but its line 1 is {listed[0][:80]!r}. Name the data file *.jsonl"
            ]
        return check_jsonl(first if first.is_absolute() else base / first, what, base, lines)
    problems = []
    with path.open(encoding="utf-8") as fh:
        count = 0
        for number, line in enumerate(fh, start=1):
            if number > lines:
                break
            count += 1
            problem = check_line(line, base)
            if problem:
                problems.append(f"{what} data {path} line {number}: {problem}")
        if count == 0:
            problems.append(f"{what} data {path} is empty")
    if problems:
        problems.append(f"each line must be one JSON object like: {EXAMPLE_LINE}")
    return problems


def check_output_dir(path: Path, create: bool = True) -> list[str]:
    """Create the output dir if needed and prove it writable (create=False: only look)."""
    hint = (
        "mount a writable volume there, or run the container with a user that owns it (`--user $(id -u):0`)"
    )
    who = f"uid {os.getuid()} gid {os.getgid()}"
    if not create:
        if path.exists():
            if not path.is_dir():
                return [f"output dir {path} is not a directory"]
            if not os.access(path, os.W_OK | os.X_OK):
                return [f"output dir {path} is not writable by {who}: {hint}"]
            return []
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            return [f"output dir {path} cannot be created: {parent} is not writable by {who}: {hint}"]
        return []
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return [f"output dir {path} cannot be created: {exc.strerror} ({who}): {hint}"]
    if not path.is_dir():
        return [f"output dir {path} is not a directory"]
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".ftenv-write-test-"):
            pass
    except OSError as exc:
        return [f"output dir {path} is not writable by {who} ({exc.strerror}): {hint}"]
    return []


# --- the command -----------------------------------------------------------------------------


@dataclass
class Plan:
    argv: list[str]
    env: dict[str, str]
    launch: cluster_env.Launch
    notes: list[str] = field(default_factory=list)


def _gpu_count(env) -> int | None:
    if env.get("CUDA_VISIBLE_DEVICES") == "":
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return None


def _executable(name: str) -> str:
    """The program next to this Python (the image's venv), else on PATH, else the bare name."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name) or name


def plan(args: argparse.Namespace, environ=None) -> Plan:
    """Everything `run` will do, without doing it (the unit tests call this)."""
    env = os.environ if environ is None else environ
    extra = list(args.overrides)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    merge_overrides([], extra)  # reject misplaced options before anything else
    missing = [
        f"--{name.replace('_', '-')}"
        for name in ("model_dir", "train", "valid", "output_dir")
        if not getattr(args, name)
    ]
    if missing:
        raise InputError(f"missing {', '.join(missing)} (see `ftenv finetune --help`)")
    problems: list[str] = []
    notes: list[str] = []
    cwd = Path(args.cwd or os.getcwd())
    model = args.model_dir
    model_path = Path(model) if Path(model).is_absolute() else cwd / model
    if args.allow_hub and not model_path.exists():
        notes.append(f"{model} is not a local folder: loading it from the model hub (--allow-hub)")
    else:
        problems += check_model_dir(model_path)
        model = str(model_path)
    data = {}
    for what, raw in (("train", args.train), ("valid", args.valid)):
        p = Path(raw) if Path(raw).is_absolute() else cwd / raw
        data[what] = str(p)
        problems += check_jsonl(p, what, cwd)
    out = Path(args.output_dir) if Path(args.output_dir).is_absolute() else cwd / args.output_dir
    problems += check_output_dir(out, create=not args.dry_run)
    remote_code = args.remote_code
    if remote_code is not None:
        remote_code = str(Path(remote_code) if Path(remote_code).is_absolute() else cwd / remote_code)
        if not Path(remote_code).is_file():
            # FunASR would only print "Loading remote code failed" and train the packaged model.
            problems.append(f"--remote-code {remote_code} is not a file")
    if problems:
        raise InputError("\n".join(problems))

    try:
        launch = cluster_env.detect(env)
        launch = cluster_env.apply_overrides(
            launch,
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            master_addr=args.master_addr,
            master_port=args.master_port,
        )
    except cluster_env.LaunchError as exc:
        raise InputError(str(exc)) from None
    notes += launch.notes

    nproc = args.gpus_per_node
    if nproc is None:
        nproc = launch.nproc_per_node
    if nproc is None:
        nproc = _gpu_count(env)
        if not nproc:
            raise InputError(
                "no GPU visible, so the number of processes per node is unknown: start the container "
                "with GPUs (`docker run --gpus all`, Kubernetes nvidia.com/gpu limits, Apptainer --nv, "
                "pyxis/Slurm --gpus-per-node) or pass --gpus-per-node N"
            )
        notes.append(f"--gpus-per-node not given: using the {nproc} visible GPU(s)")

    if remote_code is None and model_path.is_dir() and (model_path / "model.py").is_file():
        remote_code = str(model_path / "model.py")
    recipe: list[tuple[str, str]] = [("model", model)]
    if remote_code:
        recipe.append(("trust_remote_code", "true"))
        recipe.append(("remote_code", remote_code))
        if model_path.is_dir() and (model_path / "requirements.txt").is_file():
            notes.append(
                f"{model_path}/requirements.txt exists: with remote code FunASR pip-installs it "
                "(network, and it may change the image's pinned stack)"
            )
    else:
        recipe.append(("trust_remote_code", "false"))
        notes.append(
            "no model.py in the model dir and no --remote-code: FunASR's packaged FunASRNano is used "
            "(upstream's finetune.sh imports the example folder's model.py; pass --remote-code PATH "
            "to do the same)"
        )
    recipe += [("train_data_set_list", data["train"]), ("valid_data_set_list", data["valid"])]
    recipe += RECIPE_DEFAULTS
    child_env: dict[str, str] = {}
    if not args.allow_hub:
        recipe += OFFLINE_OVERRIDES
        child_env.update(OFFLINE_ENV)
    recipe.append(("output_dir", str(out)))
    overrides = merge_overrides(recipe, extra)

    try:  # --compile: the trainer entry installs the compiled decoder forward (FTENV_COMPILE=1)
        compile_on = getattr(args, "compile", False) or compile_setting.enabled(env)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if compile_on:
        child_env[compile_setting.ENV] = "1"
    entry = "-m ftenv.train.funasr_entry" if compile_on else _executable("funasr-train-ds")
    trainer = args.trainer or entry
    argv = [
        _executable("torchrun"),
        *launch.torchrun_args(nproc),
        *shlex.split(trainer),
        *overrides,
    ]
    return Plan(argv=argv, env=child_env, launch=launch, notes=notes)


def _run_watched(argv: list[str]) -> int:
    try:
        from ftenv.steps.watch import run_watched
    except ImportError:
        print(
            "ftenv finetune: the watchdog (ftenv.steps.watch) is not installed; running without it",
            file=sys.stderr,
        )
        import subprocess

        return subprocess.call(argv)
    return run_watched(argv)


def run(args: argparse.Namespace) -> int:
    try:
        p = plan(args)
    except InputError as exc:
        print(f"ftenv finetune: {exc}", file=sys.stderr)
        return 2
    setting = sdpa.interpret_env(os.environ.get(sdpa.ENV_VAR))
    raw = os.environ.get(sdpa.ENV_VAR)
    info = [
        f"launch: {p.launch.describe()}",
        f"{sdpa.ENV_VAR}={'unset' if raw is None else raw}: {setting.meaning}",
        *p.notes,
    ]
    if p.env:
        info.append("environment for the trainer: " + " ".join(f"{k}={v}" for k, v in p.env.items()))
    for line in info:
        print(f"ftenv finetune: {line}", file=sys.stderr)
    if args.dry_run:
        print(shlex.join(p.argv))
        return 0
    os.environ.update(p.env)
    print(f"ftenv finetune: running {shlex.join(p.argv)}", file=sys.stderr, flush=True)
    return _run_watched(p.argv)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "finetune",
        help="fine-tune Fun-ASR-Nano with upstream's recipe, on one GPU or many nodes",
        description=(
            "Upstream's Fun-ASR-Nano finetune.sh as one command. torchrun's --nnodes/--node_rank/"
            "--master_addr come from the environment: Slurm (srun, one task per node), Kubeflow "
            "PyTorchJob (MASTER_ADDR, WORLD_SIZE = nodes, RANK), torchrun's PET_* variables, else "
            "one node. Extra ++key=value arguments are Hydra overrides passed to funasr-train-ds and "
            "replace the recipe's defaults."
        ),
        epilog="Example: ftenv finetune --model-dir /models/Fun-ASR-Nano-2512 --train /data/train.jsonl "
        "--valid /data/val.jsonl --output-dir /out --gpus-per-node 8 ++train_conf.max_epoch=5",
    )
    p.add_argument("--model-dir", help="local Fun-ASR-Nano checkout (config.yaml, model.pt)")
    p.add_argument("--train", help="training data, ChatML JSONL (upstream's format)")
    p.add_argument("--valid", help="validation data, same format")
    p.add_argument("--output-dir", help="checkpoints and logs go here (created)")
    p.add_argument(
        "--gpus-per-node",
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="processes (GPUs) per node; default: PET_NPROC_PER_NODE, else every visible GPU",
    )
    p.add_argument("--nnodes", type=int, help="override the number of nodes found in the environment")
    p.add_argument("--node-rank", type=int, help="override this node's rank")
    p.add_argument("--master-addr", help="override the master address (default: from the environment)")
    p.add_argument("--master-port", type=int, help="override the master port (default 26669)")
    p.add_argument(
        "--remote-code",
        help="model.py to import (trust_remote_code); default: the model dir's model.py if present",
    )
    p.add_argument(
        "--allow-hub",
        action="store_true",
        help="allow downloads from the model hub (default: offline, a local model dir only)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile the LLM decoder (torch.compile, dynamic shapes; GPU batches of 2+): faster steps "
        "after a start-up compile; same as FTENV_COMPILE=1 (docs/finetune.md)",
    )
    p.add_argument("--trainer", help=argparse.SUPPRESS)  # the trainer command (tests: a CPU shim)
    p.add_argument("--cwd", help=argparse.SUPPRESS)  # resolve relative paths here (tests)
    p.add_argument("--dry-run", action="store_true", help="check the inputs, print the command, run nothing")
    p.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        metavar="++key=value",
        help="Hydra overrides for funasr-train-ds, after all options; they replace the recipe's defaults",
    )
    p.set_defaults(func=run)
