"""What `ftenv finetune` checks before anything starts (numeric options, model folder, ChatML JSONL,
output folder), so that each problem is one message naming the file, line or option and the fix
(exit 2) rather than a trainer's traceback on every rank.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ftenv import variables
from ftenv.data import chatml, model_folder, paths
from ftenv.train.cluster_env import valid_port

#: How many leading lines of each JSONL are checked.
CHECK_LINES = 5
EXAMPLE_LINE = (
    '{"messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", '
    '"content": "语音转写：<|startofspeech|>!/data/wav/utt1.wav<|endofspeech|>"}, {"role": "assistant", '
    '"content": "几点了？"}], "speech_length": 145, "text_length": 3}'
)
#: The image's user: Kubernetes examples run as it, and fsGroup may not reach the volume.
IMAGE_UID = 1000


class InputError(ValueError):
    """A bad argument or input file; the message is what the user sees."""


# --- options ---------------------------------------------------------------------------------


def check_options(gpus_per_node: int | None, nnodes: int | None, node_rank: int | None, master_port):
    """Problems with the numeric options ([] when none); None means 'not given'."""
    problems = []
    if gpus_per_node is not None and gpus_per_node < 1:
        problems.append(
            f"--gpus-per-node {gpus_per_node}: give the number of GPUs (processes) per node, 1 or "
            "more, or leave it out to use every visible GPU"
        )
    if nnodes is not None and nnodes < 1:
        problems.append(
            f"--nnodes {nnodes}: the number of nodes is 1 or more; leave it out to take it from the "
            "scheduler (Slurm, Kubeflow, torchrun's PET_NNODES)"
        )
    if node_rank is not None and node_rank < 0:
        problems.append(f"--node-rank {node_rank}: node ranks count from 0 (0 is the master node)")
    if master_port is not None and not valid_port(master_port):
        problems.append(
            f"--master-port {master_port} is not a TCP port (1-65535): pick a free one, the same on "
            "every node, or leave it out to use the scheduler's or the default"
        )
    return problems


# --- the model folder ------------------------------------------------------------------------


def check_model_dir(path: Path, cwd: Path | None = None, notes: list[str] | None = None) -> list[str]:
    """Problems with a local Fun-ASR-Nano checkout ([] when it looks usable); its warnings (e.g. no
    trained CTC weights) go to `notes`."""
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
    if problems:
        return problems
    found = model_folder.inspect(path, cwd or Path.cwd())
    if notes is not None:
        notes += [f"model: warning: {p.message}" for p in found if p.severity == model_folder.WARNING]
    return [p.message for p in found if p.severity == model_folder.ERROR]


# --- the data --------------------------------------------------------------------------------


def _audio_problem(audio: str, base: Path, manifest_dir: Path) -> str | None:
    if audio.startswith(("http://", "https://")):
        return None
    if Path(audio).is_absolute():
        if Path(audio).is_file():
            return None
        return f"audio file {audio} not found (in a container the data must be mounted at that same path)"
    if (base / audio).is_file():
        return None
    if misread := paths.trainer_problem(audio, base, manifest_dir):
        return misread
    return (
        f"audio file {audio} not found (relative paths are read from the working directory "
        f"{base}; in a container the data must be mounted at that path)"
    )


def check_line(line: str, base: Path, manifest_dir: Path | None = None) -> str | None:
    """What is wrong with one JSONL line of the recipe's ChatML format (None when nothing): the
    line as `ftenv data check` reads it (ftenv.data.chatml), then whether its audio is there."""
    if not line.strip():
        return "the line is empty"
    try:
        item = chatml.load(line)
    except chatml.LineError as exc:
        return str(exc)
    utt = chatml.parse(item)
    if isinstance(utt, str):
        return utt
    return _audio_problem(utt.audio, base, manifest_dir or base)


def check_jsonl(path: Path, what: str, base: Path, lines: int = CHECK_LINES) -> list[str]:
    """Problems with a train/valid data file: existence, then its first `lines` lines."""
    if not path.exists():
        return [f"{what} data {path} does not exist"]
    if not path.is_file():
        return [f"{what} data {path} is not a file"]
    if path.suffix not in (".jsonl", ".json"):
        # FunASR reads any other name as a list of JSONL files, one per line.
        listed = [ln.strip() for ln in path.read_text("utf-8", "replace").splitlines() if ln.strip()]
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
    with path.open("rb") as fh:
        count = 0
        for number, raw in enumerate(fh, start=1):
            if number > lines:
                break
            count += 1
            try:
                problem = check_line(raw.decode("utf-8"), base, path.parent)
            except UnicodeDecodeError as exc:
                problem = chatml.not_utf8(raw, exc)
            if problem:
                problems.append(f"{what} data {path} line {number}: {problem}")
        if count == 0:
            problems.append(f"{what} data {path} is empty")
    if problems:
        problems.append(f"each line must be one JSON object like: {EXAMPLE_LINE}")
    return problems


# --- the output folder -----------------------------------------------------------------------


def _write_hint(folder: Path | None, environ: Mapping[str, str] | None) -> str:
    """How to make the folder writable, for where this runs."""
    if variables.read(variables.KUBERNETES_SERVICE_HOST, environ):
        return (
            f"make the volume writable by uid {IMAGE_UID} or gid 0 before the job starts (fsGroup is "
            "not applied to ReadWriteMany or most CSI volumes), or set runAsUser to its owner"
        )
    hint = "mount a writable folder there and run the container as its owner (`--user $(id -u):0`)"
    try:
        owner = folder.stat().st_uid if folder is not None else None
    except OSError:
        owner = None
    if owner == 0 and os.getuid() != 0:
        hint += (
            "; it belongs to uid 0 here: under rootless Docker or Podman that is the host user "
            "who started the container, so run with `--user 0:0` (that user, not the host's root)"
        )
    return hint


def check_output_dir(path: Path, create: bool = True, environ: Mapping[str, str] | None = None) -> list[str]:
    """Create the output dir if needed and prove it writable (create=False: only look)."""
    who = f"uid {os.getuid()} gid {os.getgid()}"
    existing = path if path.exists() else next((p for p in path.parents if p.exists()), None)
    if not create:
        if path.exists():
            if not path.is_dir():
                return [f"output dir {path} is not a directory"]
            if not os.access(path, os.W_OK | os.X_OK):
                return [f"output dir {path} is not writable by {who}: {_write_hint(path, environ)}"]
            return []
        parent = existing
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            return [
                f"output dir {path} cannot be created: {parent} is not writable by {who}: "
                f"{_write_hint(parent, environ)}"
            ]
        return []
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return [
            f"output dir {path} cannot be created: {exc.strerror} ({who}): {_write_hint(existing, environ)}"
        ]
    if not path.is_dir():
        return [f"output dir {path} is not a directory"]
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".ftenv-write-test-"):
            pass
    except OSError as exc:
        return [f"output dir {path} is not writable by {who} ({exc.strerror}): {_write_hint(path, environ)}"]
    return []
