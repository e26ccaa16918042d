"""Every environment variable ftenv reads or sets, with its default and meaning: the one place a
variable's name is spelled, so that the code, the messages and docs/variables.md (generated from
REGISTRY by `make generate`) cannot drift apart.

Floor 0 (standard library only): every wing imports its names from here. Not listed: the
variables a launcher sets for torchrun (Slurm's, Kubeflow's, torchrun's own), which
ftenv.train.cluster_env reads as one rule, and the caches and NCCL settings ftenv finetune sets
for third-party libraries beside the rule that sets them (ftenv.train; NCCL's debug settings in
ftenv.train.nccl_debug). NCCL's own network settings, which the report reads to say which network
NCCL will use, are named beside that rule too (ftenv.report.network).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The default of a variable that is not set unless someone sets it.
UNSET = "unset"
#: The meaning of a variable only the tests set.
TEST_AID = "test aid"


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    meaning: str


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
OUTPUT_DIR = "FTENV_OUTPUT_DIR"
RUN_ID = "FTENV_RUN_ID"
CACHES_MOVED = "FTENV_CACHES_MOVED"
# --- the self-check and the tests -----------------------------------------------------------------
TINY_DIR = "FTENV_TINY_DIR"
FUNASR_CPU_SHIM = "FTENV_FUNASR_CPU_SHIM"
TEST_SDPA_STALL_S = "FTENV_TEST_SDPA_STALL_S"
TEST_IMAGE = "FTENV_TEST_IMAGE"
DOCKER_CHECK = "FTENV_DOCKER_CHECK"
# --- read from torch, cuDNN and the launchers -----------------------------------------------------
SDPA_DEPRIORITIZED = "TORCH_CUDNN_SDPA_DEPRIORITIZED"
SDPA_PREFERRED = "TORCH_CUDNN_SDPA_PREFERRED"
CUDNN_VERSION = "CUDNN_VERSION"
LOCAL_RANK = "LOCAL_RANK"
SLURM_LOCALID = "SLURM_LOCALID"

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
        "set only in images built on a local stand-in base instead of the real one (the report says so)",
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
        OUTPUT_DIR, UNSET, "the run's output folder, set by `ftenv finetune` for torchrun and every rank"
    ),
    Variable(RUN_ID, UNSET, "which launch a stop record belongs to, set for torchrun's workers"),
    Variable(CACHES_MOVED, UNSET, "the cache variables `ftenv finetune` repointed (not the user's own)"),
    Variable(TINY_DIR, UNSET, "the tiny model the self-check uses instead of the image's copy"),
    Variable(FUNASR_CPU_SHIM, UNSET, f"{TEST_AID}: `1` runs FunASR's trainer on a machine without CUDA"),
    Variable(TEST_SDPA_STALL_S, UNSET, f"{TEST_AID}: seconds of stall per new attention shape, like cuDNN's"),
    Variable(TEST_IMAGE, UNSET, f"{TEST_AID}: the image the container tests run against"),
    Variable(DOCKER_CHECK, UNSET, f"{TEST_AID}: `1` runs the real-Docker check (`make docker-check`)"),
    Variable(
        SDPA_DEPRIORITIZED,
        UNSET,
        "torch 2.10 and later: `1` keeps cuDNN attention out of the front of the order (FunASR issue #3704)",
    ),
    Variable(SDPA_PREFERRED, UNSET, "torch 2.9: `0` keeps cuDNN attention out of the front of the order"),
    Variable(CUDNN_VERSION, UNSET, "the cuDNN version the base image declares (read when torch cannot say)"),
    Variable(LOCAL_RANK, UNSET, "torchrun's local rank: only local rank 0 prints the start-up report"),
    Variable(SLURM_LOCALID, UNSET, "Slurm's local task id: only task 0 of a node prints the start-up report"),
)


def markdown_table(prefix: str = "") -> str:
    """REGISTRY (the variables whose name starts with prefix) as the docs show it: docs/variables.md
    and the watchdog's page generate their tables from it."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{v.name}` | {v.default} | {v.meaning} |" for v in REGISTRY if v.name.startswith(prefix)]
    return "\n".join(rows) + "\n"
