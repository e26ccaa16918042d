"""A rank that dies or hangs ends the job soon and leaves what is needed to see why: FunASR starts
its process group without a timeout (NCCL's 10 minutes), so the trainer's processes get a shorter
one (FTENV_COLLECTIVE_TIMEOUT_S, longer than a healthy run's longest wait) and NCCL's flight
recorder dumps each rank's last collectives under the output folder.
"""

from __future__ import annotations

import datetime
import functools
from pathlib import Path

from ftenv import variables

#: Folder (under the output folder) of the flight recorder's dumps: one file per rank.
TRACE_DIR = "nccl-flight-recorder"


def launcher_env(output_dir: Path, environ) -> dict[str, str]:
    """The variables `ftenv finetune` sets for torchrun and the ranks, unless already set.
    torch 2.11 reads the TORCH_FR_* names; older ones the TORCH_NCCL_* names: both are set."""
    prefix = str(output_dir / TRACE_DIR / "rank_")
    # Tear the process down on a collective error or timeout (torch's default, made explicit).
    fixed = (
        variables.TORCH_NCCL_ASYNC_ERROR_HANDLING,
        variables.TORCH_NCCL_DUMP_ON_TIMEOUT,
        variables.TORCH_FR_BUFFER_SIZE,
        variables.TORCH_NCCL_TRACE_BUFFER_SIZE,
    )
    wanted = {name: variables.default(name) for name in fixed}
    wanted |= {variables.TORCH_FR_DUMP_TEMP_FILE: prefix, variables.TORCH_NCCL_DEBUG_INFO_TEMP_FILE: prefix}
    return {k: v for k, v in wanted.items() if variables.given(k, environ) is None}


def timeout_s(environ=None) -> float:
    return variables.read_seconds(variables.COLLECTIVE_TIMEOUT_S, "the collective timeout", environ)


def install() -> str:
    """init_process_group gets the timeout when the caller (FunASR) gives none."""
    import torch
    import torch.distributed as dist

    seconds = timeout_s()
    original = dist.init_process_group

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        kwargs.setdefault("timeout", datetime.timedelta(seconds=seconds))
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group
    if (dump := variables.read(variables.TORCH_FR_DUMP_TEMP_FILE)) and torch.cuda.is_available():
        Path(dump).parent.mkdir(parents=True, exist_ok=True)
    return (
        f"collective timeout {seconds:g} s ({variables.COLLECTIVE_TIMEOUT_S}); NCCL flight recorder "
        "dumps on a timeout"
    )
