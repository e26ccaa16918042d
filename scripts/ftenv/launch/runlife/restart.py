"""Whether the launcher says this start is a restart of the same job: a requeue that finds the run
finished (a preemption after the last save) then ends with success instead of a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: sbatch's count of the job's requeues and restarts.
RESTART_COUNT = "SLURM_RESTART_COUNT"


def restart_of(env: Mapping[str, str]) -> str | None:
    """ "NAME=VALUE" of the launcher's restart count when above 0; None for a first start, or when
    the launcher does not say.

    Only Slurm says so before `ftenv finetune` runs: SLURM_RESTART_COUNT (sbatch's output
    environment) counts the job's requeues and restarts, and a requeued job keeps its job id.
    Kubernetes tells a pod nothing reliable: a Job's replacement pod and a container restarted in
    place (restartPolicy OnFailure) start with the same environment as the first, the Downward API
    does not expose the restart count, Kubeflow's PyTorchJob adds no such variable, and the failure
    count an Indexed Job with backoffLimitPerIndex annotates its pods with is for that kind of Job
    only; there a finished folder is refused (exit 2) on every start. torchrun's TORCHELASTIC_RESTART_COUNT is
    set by torchrun for its workers, after this check, and torchrun's restarts rerun the workers,
    not `ftenv finetune`: it is not read.
    """
    raw = (env.get(RESTART_COUNT) or "").strip()
    return f"{RESTART_COUNT}={raw}" if raw.isdigit() and int(raw) > 0 else None


@dataclass(frozen=True)
class Start:
    """Which start of which job this launch is: the job id (Slurm's, the same across a requeue; the
    folder's lease names it) and restart_of's answer."""

    job_id: str | None = None
    restart: str | None = None

    @classmethod
    def of(cls, env: Mapping[str, str]) -> Start:
        return cls(env.get("SLURM_JOB_ID") or None, restart_of(env))
