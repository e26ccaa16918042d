"""What `ftenv finetune` checks before anything starts (numeric options, model folder, ChatML JSONL,
output folder), so that each problem is one message naming the file, line or option and the fix
(exit 2) rather than a trainer's traceback on every rank.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ftenv.data import chatml, paths
from ftenv.data import lists as data_lists
from ftenv.launch.cluster_env import valid_port
from ftenv.model import folder as model_folder

#: How many leading lines of each JSONL are checked.
CHECK_LINES = 5
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
    """Problems with a local Fun-ASR-Nano checkout ([] when it looks usable), by the one model
    folder rule (ftenv.model.folder); its warnings (e.g. no trained CTC weights) go to `notes`."""
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


def check_line(line: str | bytes, base: Path, manifest_dir: Path | None = None) -> str | None:
    """What is wrong with one JSONL line of the recipe's ChatML format (None when nothing): the
    line as `ftenv data check` reads it (ftenv.data.chatml), then whether its audio is there. A
    blank line is no error: FunASR skips it (`ftenv data check` counts it as a warning)."""
    utt = chatml.read_line(line.encode("utf-8") if isinstance(line, str) else line)
    if isinstance(utt, chatml.Unreadable):
        return None if utt.code == chatml.BLANK else utt.message
    return _audio_problem(utt.audio, base, manifest_dir or base)


def check_jsonl(path: Path, what: str, base: Path, lines: int = CHECK_LINES) -> list[str]:
    """Problems with a train/valid data argument: existence, then the first `lines` lines (blank
    ones skipped) of each JSONL file it is or, for a list, names (ftenv.data.lists.manifests)."""
    if not path.exists():
        return [f"{what} data {path} does not exist"]
    if not path.is_file():
        return [f"{what} data {path} is not a file"]
    if not data_lists.is_list(path):
        return _check_one_jsonl(path, what, base, lines)
    try:
        listed = data_lists.manifests(str(path), base)
    except data_lists.DataListError as exc:
        return [f"{what} data {exc}"]
    if not listed:
        return [f"{what} data {path} is empty"]
    problems = []
    for number, file in enumerate(listed, start=1):
        if data_lists.is_list(file):
            problems.append(
                f"{what} data {path}: FunASR reads a file not named *.jsonl as a list of JSONL files, "
                f"but its line {number} is {str(file)[:80]!r}. Name the data file *.jsonl"
            )
            continue
        problems += check_jsonl(file, what, base, lines)
    return problems


def _check_one_jsonl(path: Path, what: str, base: Path, lines: int) -> list[str]:
    problems = []
    with path.open("rb") as fh:
        count = 0
        for number, raw in enumerate(fh, start=1):
            if count >= lines:
                break
            if not raw.strip():
                continue  # skipped by FunASR: not counted, not an error
            count += 1
            problem = check_line(raw, base, path.parent)
            if problem:
                problems.append(f"{what} data {path} line {number}: {problem}")
        if count == 0:
            problems.append(f"{what} data {path} is empty")
    if problems:
        problems.append(f"each line must be one JSON object like: {chatml.EXAMPLE_LINE}")
    return problems


# --- the output folder -----------------------------------------------------------------------


def _write_hint(folder: Path | None, environ: Mapping[str, str] | None) -> str:
    """How to make the folder writable, for where this runs."""
    if (os.environ if environ is None else environ).get("KUBERNETES_SERVICE_HOST"):  # in a pod
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


def check_output_dir(path: Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems with the output dir, only looked at (the plan's check, a dry run's too): an existing
    one must be a writable folder, a missing one must have a writable folder to be made in."""
    who = f"uid {os.getuid()} gid {os.getgid()}"
    if path.exists():
        if not path.is_dir():
            return [f"output dir {path} is not a directory"]
        if not os.access(path, os.W_OK | os.X_OK):
            return [f"output dir {path} is not writable by {who}: {_write_hint(path, environ)}"]
        return []
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return [
            f"output dir {path} cannot be created: {parent} is not writable by {who}: "
            f"{_write_hint(parent, environ)}"
        ]
    return []


def make_output_dir(path: Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """Create the output dir if needed and prove it writable by writing a file in it: the launch's
    step, which a dry run skips (the plan only looks, check_output_dir)."""
    who = f"uid {os.getuid()} gid {os.getgid()}"
    existing = path if path.exists() else next((p for p in path.parents if p.exists()), None)
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
