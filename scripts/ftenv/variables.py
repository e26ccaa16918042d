"""The environment variables ftenv owns, the ones it sets for torch, NCCL, the model hubs and the
caches, and the ones a user sets that change what it does: each with its default and meaning, the
one place its name is spelled, so that the code, the messages and docs/variables.md (generated from
REGISTRY by `make generate`) cannot drift apart. A registered variable is read only through the
accessors at the bottom. The rest of the environment (PATH, HOME, the launchers' RANK or SLURM_*,
the base image's version variables) is read where it is used, as a plain mapping.

Long because the docs' table is generated from it: each meaning is written once, here, for the
code's messages and docs/variables.md alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ftenv import text

#: The default of a variable that is not set unless someone sets it.
UNSET = "unset"
#: The meaning of a variable only the tests set.
TEST_AID = "test aid"


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    meaning: str
    #: The value the image's Dockerfile sets (ENV), where it sets one that matters to a user: the
    #: docs show it beside the default that applies outside the image.
    image: str | None = None


# --- the image ------------------------------------------------------------------------------------
IMAGE = "FTENV_IMAGE"
IMAGE_REVISION = "FTENV_IMAGE_REVISION"
VARIANT = "FTENV_VARIANT"
MIN_DRIVER = "FTENV_MIN_DRIVER"
STANDIN_BASE = "FTENV_STANDIN_BASE"
VERSIONS_FILE = "FTENV_VERSIONS_FILE"
DEBUG = "FTENV_DEBUG"
# --- the start-up report --------------------------------------------------------------------------
REPORT = "FTENV_REPORT"
REPORT_SHOWN = "FTENV_REPORT_SHOWN"
REPORT_TIMEOUT = "FTENV_REPORT_TIMEOUT"
# --- the watchdog ---------------------------------------------------------------------------------
WATCH = "FTENV_WATCH"
WATCH_SILENCE_FACTOR = "FTENV_WATCH_SILENCE_FACTOR"
WATCH_SILENCE_MIN_S = "FTENV_WATCH_SILENCE_MIN_S"
WATCH_HANG_LIMIT_S = "FTENV_WATCH_HANG_LIMIT_S"
WATCH_PID = "FTENV_WATCH_PID"
WATCH_STACKS_DIR = "FTENV_WATCH_STACKS_DIR"
# --- fine-tuning ----------------------------------------------------------------------------------
COMPILE = "FTENV_COMPILE"
BUCKETS = "FTENV_BUCKETS"
COMPILE_CACHE_DIR = "FTENV_COMPILE_CACHE_DIR"
DATA_CHECK = "FTENV_DATA_CHECK"
DATA_COUNT = "FTENV_DATA_COUNT"
SPACE_CHECK = "FTENV_SPACE_CHECK"
COLLECTIVE_TIMEOUT_S = "FTENV_COLLECTIVE_TIMEOUT_S"
STOP_GRACE_S = "FTENV_STOP_GRACE_S"
CLOSE_TIMEOUT_S = "FTENV_CLOSE_TIMEOUT_S"
LEASE_RENEW_S = "FTENV_LEASE_RENEW_S"
OUTPUT_DIR = "FTENV_OUTPUT_DIR"
RUN_ID = "FTENV_RUN_ID"
CACHES_MOVED = "FTENV_CACHES_MOVED"
# --- the self-check and the tests -----------------------------------------------------------------
TINY_DIR = "FTENV_TINY_DIR"
FUNASR_CPU_SHIM = "FTENV_FUNASR_CPU_SHIM"
TEST_SDPA_STALL_S = "FTENV_TEST_SDPA_STALL_S"
TEST_CLOSE_HANG_RANK = "FTENV_TEST_CLOSE_HANG_RANK"
TEST_IMAGE = "FTENV_TEST_IMAGE"
DOCKER_CHECK = "FTENV_DOCKER_CHECK"
# --- set by a user: the attention order torch reads, the GPUs a process sees ---------------------
SDPA_DEPRIORITIZED = "TORCH_CUDNN_SDPA_DEPRIORITIZED"
SDPA_PREFERRED = "TORCH_CUDNN_SDPA_PREFERRED"
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
# --- NCCL's network settings, read by the report (ftenv.report.network) ------------------------------
NCCL_NET = "NCCL_NET"
NCCL_NET_PLUGIN = "NCCL_NET_PLUGIN"
NCCL_IB_DISABLE = "NCCL_IB_DISABLE"
NCCL_IB_HCA = "NCCL_IB_HCA"
NCCL_SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"
# --- set by ftenv finetune for torchrun and the trainer, unless set already --------------------------
TORCH_NCCL_ASYNC_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
TORCH_NCCL_DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
TORCH_FR_BUFFER_SIZE = "TORCH_FR_BUFFER_SIZE"
TORCH_NCCL_TRACE_BUFFER_SIZE = "TORCH_NCCL_TRACE_BUFFER_SIZE"
TORCH_FR_DUMP_TEMP_FILE = "TORCH_FR_DUMP_TEMP_FILE"
TORCH_NCCL_DEBUG_INFO_TEMP_FILE = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
NCCL_DEBUG = "NCCL_DEBUG"
NCCL_DEBUG_SUBSYS = "NCCL_DEBUG_SUBSYS"
HF_HUB_OFFLINE = "HF_HUB_OFFLINE"
TRANSFORMERS_OFFLINE = "TRANSFORMERS_OFFLINE"
MODELSCOPE_OFFLINE = "MODELSCOPE_OFFLINE"
# --- the caches ftenv finetune repoints when they cannot be written (ftenv.launch.cache_dirs) --------
XDG_CACHE_HOME = "XDG_CACHE_HOME"
HF_HOME = "HF_HOME"
MODELSCOPE_CACHE = "MODELSCOPE_CACHE"
TORCH_HOME = "TORCH_HOME"
TORCH_EXTENSIONS_DIR = "TORCH_EXTENSIONS_DIR"
TORCHINDUCTOR_CACHE_DIR = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_DIR = "TRITON_CACHE_DIR"
TRITON_HOME = "TRITON_HOME"
CUDA_CACHE_PATH = "CUDA_CACHE_PATH"
MPLCONFIGDIR = "MPLCONFIGDIR"

REGISTRY = (
    Variable(IMAGE, UNSET, "the image's reference, set by the image (the report names it)"),
    Variable(
        IMAGE_REVISION,
        UNSET,
        "the git commit the image was built from, set by the image: the report names the build's "
        "immutable `<stack>-<commit>` tag with it",
    ),
    Variable(VARIANT, UNSET, "the image's variant (`cu130`...), set by the image"),
    Variable(MIN_DRIVER, UNSET, "the oldest NVIDIA driver the image's CUDA runs on, set by the image"),
    Variable(
        STANDIN_BASE,
        UNSET,
        "set only in images built for tests on a local base instead of the real one (the report says so)",
    ),
    Variable(VERSIONS_FILE, UNSET, "the versions file to read instead of the checkout's or the image's copy"),
    Variable(DEBUG, UNSET, "`1`: an internal error prints its traceback"),
    Variable(REPORT, "1", "`0`: the image's entrypoint and the launchers print no start-up report"),
    Variable(
        REPORT_SHOWN,
        UNSET,
        "`1` once the entrypoint printed the report, so that `ftenv finetune` and `ftenv selfcheck` "
        "do not print it again",
    ),
    Variable(REPORT_TIMEOUT, "60", "seconds the start-up report may take before the command starts anyway"),
    Variable(WATCH, "1", "`0`: `ftenv finetune` runs the trainer without the watchdog"),
    Variable(
        WATCH_SILENCE_FACTOR,
        "5",
        "the silence alarm at this many times the longest gap the run has shown; `0` turns the alarm "
        "and the hang limit off",
    ),
    Variable(
        WATCH_SILENCE_MIN_S, "300", "never a silence alarm before this many seconds without a trainer line"
    ),
    Variable(
        WATCH_HANG_LIMIT_S,
        "1800",
        "end the run (exit 6) after this many seconds without a trainer line; `0`: never",
    ),
    Variable(
        WATCH_PID,
        UNSET,
        "set by `ftenv watch` for its command: the trainer's processes let this process (and the py-spy "
        "it starts) read their stacks (PR_SET_PTRACER), which Yama's ptrace_scope 1 allows then",
    ),
    Variable(
        WATCH_STACKS_DIR,
        UNSET,
        "set by `ftenv watch` for its command: where each trainer process dumps every thread's stack "
        "on SIGWINCH (Python's faulthandler: no ptrace, no capability)",
    ),
    Variable(
        COMPILE,
        UNSET,
        "the compiled training path: `1` (the default parts), `0` or unset (off), or a comma-separated "
        "list of parts",
    ),
    Variable(BUCKETS, UNSET, "pad the batches to few (batch, length) shapes (`ftenv finetune --buckets`)"),
    Variable(
        COMPILE_CACHE_DIR,
        UNSET,
        "where the compiled run keeps its compiler caches (default: compile-cache/ under the output folder)",
    ),
    Variable(DATA_CHECK, "1", "`0`: `ftenv finetune` skips the data check before training"),
    Variable(DATA_COUNT, "1", "`0`: the trainer does not count FunASR's substituted and dropped samples"),
    Variable(SPACE_CHECK, "1", "`0`: `ftenv finetune` skips the free-space check of the output folder"),
    Variable(
        COLLECTIVE_TIMEOUT_S,
        "300",
        "seconds a collective may wait before the run fails (above the longest wait of a healthy run)",
    ),
    Variable(
        STOP_GRACE_S, "300", "seconds torchrun gives its workers to save after a signal before it kills them"
    ),
    Variable(
        CLOSE_TIMEOUT_S,
        "120",
        "seconds FunASR's closing barrier may take after the last save before each training process "
        "ends with its result kept",
    ),
    Variable(
        LEASE_RENEW_S,
        "30",
        "seconds between renewals of the output folder's lease (`.ftenv-lease.json`); stale after 4 "
        "missed renewals",
    ),
    Variable(
        OUTPUT_DIR, UNSET, "the run's output folder, set by `ftenv finetune` for torchrun and every rank"
    ),
    Variable(RUN_ID, UNSET, "which launch a stop record belongs to, set for torchrun's workers"),
    Variable(CACHES_MOVED, UNSET, "the cache variables `ftenv finetune` repointed (not the user's own)"),
    Variable(TINY_DIR, UNSET, "the tiny model the self-check uses instead of the image's copy"),
    Variable(FUNASR_CPU_SHIM, UNSET, f"{TEST_AID}: `1` runs FunASR's trainer on a machine without CUDA"),
    Variable(TEST_SDPA_STALL_S, UNSET, f"{TEST_AID}: seconds of stall per new attention shape, like cuDNN's"),
    Variable(
        TEST_CLOSE_HANG_RANK,
        UNSET,
        f"{TEST_AID}: the rank that never reaches FunASR's closing barrier (a peer that does not come)",
    ),
    Variable(TEST_IMAGE, UNSET, f"{TEST_AID}: the image the container tests run against"),
    Variable(DOCKER_CHECK, UNSET, f"{TEST_AID}: `1` runs the real-Docker check (`make docker-check`)"),
    Variable(
        SDPA_DEPRIORITIZED,
        UNSET,
        "torch 2.10 and later: `1` keeps cuDNN attention out of the front of the order (FunASR issue #3704)",
        image="1",
    ),
    Variable(SDPA_PREFERRED, UNSET, "torch 2.9: `0` keeps cuDNN attention out of the front of the order"),
    Variable(
        CUDA_VISIBLE_DEVICES,
        UNSET,
        "the GPUs a process sees (`0,1`: the first two); empty: none, and `ftenv finetune` refuses to start "
        "(training needs a GPU; `--dry-run` works without one)",
    ),
    Variable(
        NCCL_NET, UNSET, "NCCL's network (`IB`, `Socket`...): the report names the network NCCL will use"
    ),
    Variable(NCCL_NET_PLUGIN, UNSET, "NCCL's network plugin: read by the report"),
    Variable(NCCL_IB_DISABLE, UNSET, "`1`: NCCL uses no InfiniBand: read by the report"),
    Variable(NCCL_IB_HCA, UNSET, "the InfiniBand adapters NCCL may use: read by the report"),
    Variable(NCCL_SOCKET_IFNAME, UNSET, "the interfaces NCCL's sockets may use: read by the report"),
    Variable(
        TORCH_NCCL_ASYNC_ERROR_HANDLING,
        "3",
        "set by `ftenv finetune` unless set: a collective error or timeout tears the process down",
    ),
    Variable(
        TORCH_NCCL_DUMP_ON_TIMEOUT,
        "1",
        "set by `ftenv finetune` unless set: the flight recorder dumps on a timeout",
    ),
    Variable(
        TORCH_FR_BUFFER_SIZE,
        "2000",
        "set by `ftenv finetune` unless set: the flight recorder's entries (torch 2.11)",
    ),
    Variable(TORCH_NCCL_TRACE_BUFFER_SIZE, "2000", "the same for torch before 2.11, set beside it"),
    Variable(
        TORCH_FR_DUMP_TEMP_FILE,
        UNSET,
        "set by `ftenv finetune` unless set: the flight recorder's dumps, one per rank, under the output "
        "folder's nccl-flight-recorder/",
    ),
    Variable(TORCH_NCCL_DEBUG_INFO_TEMP_FILE, UNSET, "the same for torch before 2.11, set beside it"),
    Variable(
        NCCL_DEBUG,
        "INFO",
        "set by `ftenv finetune` on several nodes unless NCCL_DEBUG or NCCL_DEBUG_SUBSYS is set",
    ),
    Variable(NCCL_DEBUG_SUBSYS, "INIT,NET", "set beside NCCL_DEBUG: NCCL logs the network it picked"),
    Variable(HF_HUB_OFFLINE, "1", "set by the fine-tune, the self-check, eval and export: never a hub"),
    Variable(TRANSFORMERS_OFFLINE, "1", "set beside HF_HUB_OFFLINE"),
    Variable(MODELSCOPE_OFFLINE, "1", "set beside HF_HUB_OFFLINE"),
    Variable(XDG_CACHE_HOME, UNSET, "a cache `ftenv finetune` repoints when it cannot be written"),
    Variable(HF_HOME, UNSET, "Hugging Face's cache: repointed when it cannot be written"),
    Variable(MODELSCOPE_CACHE, UNSET, "ModelScope's cache: repointed when it cannot be written"),
    Variable(TORCH_HOME, UNSET, "torch's cache: repointed when it cannot be written"),
    Variable(TORCH_EXTENSIONS_DIR, UNSET, "torch's extension builds: repointed when they cannot be written"),
    Variable(
        TORCHINDUCTOR_CACHE_DIR,
        UNSET,
        "Inductor's cache: repointed when it cannot be written; a compiled run's goes under its output "
        "folder",
    ),
    Variable(TRITON_CACHE_DIR, UNSET, "Triton's cache: as TORCHINDUCTOR_CACHE_DIR"),
    Variable(TRITON_HOME, UNSET, "Triton's dumps and overrides: repointed when they cannot be written"),
    Variable(CUDA_CACHE_PATH, UNSET, "the driver's JIT cache: repointed when it cannot be written"),
    Variable(MPLCONFIGDIR, UNSET, "matplotlib's settings: repointed when they cannot be written"),
)


def _default_text(v: Variable) -> str:
    return v.default if v.image is None else f"`{v.image}` in the image ({v.default} outside it)"


def markdown_table(prefix: str = "") -> str:
    """REGISTRY (the variables whose name starts with prefix) as the docs show it: docs/variables.md
    and the watchdog's page generate their tables from it."""
    rows = [(f"`{v.name}`", _default_text(v), v.meaning) for v in REGISTRY if v.name.startswith(prefix)]
    return "\n".join(text.markdown_table(("variable", "default", "meaning"), rows)) + "\n"


# --- the accessors: the one way to read and set a registered variable -----------------------------------

_BY_NAME = {v.name: v for v in REGISTRY}


def _registered(name: str) -> Variable:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not in ftenv.variables.REGISTRY: add it there with its default") from None


def default(name: str) -> str | None:
    """The registered default of a variable (None when it is unset unless someone sets it)."""
    value = _registered(name).default
    return None if value == UNSET else value


def given(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value set in environ (this process's environment unless given), None when unset: for the
    rules that tell a set variable from its default (a user's own cache, a setting not to override)."""
    _registered(name)
    return (os.environ if environ is None else environ).get(name)


def read(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value set in environ (this process's environment unless given), else the registered default."""
    value = given(name, environ)
    return default(name) if value is None else value


def read_float(name: str, environ: Mapping[str, str] | None = None) -> float:
    """read() as a number (ValueError when the value is not one: the caller says what to set)."""
    return float(read(name, environ))


def read_seconds(name: str, what: str, environ: Mapping[str, str] | None = None) -> float:
    """read() as a number of seconds above 0; the ValueError names the variable and `what` it sets."""
    raw = read(name, environ)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1
    if value <= 0:
        raise ValueError(f"{name}={raw!r}: give {what} in seconds, above 0")
    return value


def environment(changes: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of this process's environment with changes: what a child process is started with."""
    return {**os.environ, **(changes or {})}


def export(values: Mapping[str, str], *, keep_set: bool = False) -> None:
    """Set variables in this process's environment (its children inherit them); keep_set leaves the
    ones already set as they are."""
    for name, value in values.items():
        _registered(name)
        if keep_set:
            os.environ.setdefault(name, value)
        else:
            os.environ[name] = value
