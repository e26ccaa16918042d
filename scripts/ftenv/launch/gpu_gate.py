"""Training needs a GPU: FunASR's trainer puts the model on `cuda:LOCAL_RANK` and dies ("Found no
NVIDIA driver") only after the model has loaded and the whole data check has run. `ftenv finetune`
refuses first, with the fix, unless the CPU test aid (FTENV_FUNASR_CPU_SHIM=1) is set.
"""

from __future__ import annotations

from collections.abc import Mapping

from ftenv import variables

MESSAGE = (
    "no GPU visible: training needs one (FunASR's trainer runs on CUDA only). Start the container "
    "with GPUs (`docker run --gpus all` or `--gpus '\"device=0,1\"'`, Kubernetes nvidia.com/gpu "
    "limits, Apptainer --nv, Slurm --gpus-per-node) and check that "
    f"{variables.CUDA_VISIBLE_DEVICES} is not empty; `ftenv finetune --dry-run` checks the inputs "
    "without one"
)


def gpu_count(env: Mapping[str, str]) -> int | None:
    """The GPUs torch sees in env (0 when CUDA_VISIBLE_DEVICES is empty), None when torch cannot say."""
    if variables.read(variables.CUDA_VISIBLE_DEVICES, env) == "":
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return None


def refusal(environ: Mapping[str, str] | None = None) -> str | None:
    """The message when no GPU is visible and the CPU test aid is not set, else None. A count torch
    cannot give (no torch here) is not a refusal: the trainer then says what is wrong."""
    env = variables.environment() if environ is None else environ
    if variables.read(variables.FUNASR_CPU_SHIM, env) == "1":
        return None
    return MESSAGE if gpu_count(env) == 0 else None
