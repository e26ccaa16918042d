"""Whether the examples' schedulers retry what they should: a preempted or stopped run (exit STOPPED)
is retried or requeued, a bad input (exit UNUSABLE) is not, and the stop has time to save. Read
from the Kubernetes manifests and the Slurm batch scripts, so a wrong policy is caught before a
cluster spends a night retrying it."""

from __future__ import annotations

import re

from ftenv import outcome
from support.manifests import pod_specs


def restart_policies(doc: dict) -> set[str]:
    """Every restartPolicy of a manifest: the replica's (PyTorchJob) and the pod template's."""
    if doc["kind"] == "Job":
        return {doc["spec"]["template"]["spec"]["restartPolicy"]}
    replicas = doc["spec"]["pytorchReplicaSpecs"].values()
    return {r["restartPolicy"] for r in replicas} | {r["template"]["spec"]["restartPolicy"] for r in replicas}


def restarts_in_place(doc: dict) -> set[str]:
    """Restart policies that restart a failed container in place: its torchrun cannot rejoin the
    static rendezvous, and with backoffLimit 0 the operator fails the job at the first restart."""
    return restart_policies(doc) & {"OnFailure", "Always"}


#: training-operator v1.9 (pkg/controller.v1/common: isRetryableExitCode): permanent exit codes.
KUBEFLOW_PERMANENT = {1, 2, 126, 127, 128, 139}


def retry_problems(doc: dict) -> list[str]:
    """Why a manifest would not retry a preemption, would retry a bad input, or kill the stop's save."""
    bad = []
    for spec in pod_specs(doc):
        if spec.get("terminationGracePeriodSeconds", 30) < 60:
            bad.append("terminationGracePeriodSeconds < 60: too short for a full checkpoint's save")
    if doc["kind"] == "Job":
        spec = doc["spec"]
        if spec.get("backoffLimit", 6) < 1:
            bad.append("backoffLimit 0: nothing is retried")
        rules = spec.get("podFailurePolicy", {}).get("rules", [])
        name = spec["template"]["spec"]["containers"][0]["name"]
        fail = [r for r in rules if r["action"] == "FailJob" and "onExitCodes" in r]
        if not any(
            r["onExitCodes"]["operator"] == "In"
            and outcome.UNUSABLE in r["onExitCodes"]["values"]
            and r["onExitCodes"].get("containerName", name) == name
            for r in fail
        ):
            bad.append(f"a bad input (exit {outcome.UNUSABLE}) would be retried")
        ignore = [r for r in rules if r["action"] == "Ignore"]
        if not any({"type": "DisruptionTarget"} in r.get("onPodConditions", []) for r in ignore):
            bad.append("an eviction or preemption counts against backoffLimit")
        failing = [r.get("onExitCodes", {}).get("values", []) for r in rules if r["action"] == "FailJob"]
        if any(outcome.STOPPED in values for values in failing):
            bad.append(f"a saved stop (exit {outcome.STOPPED}) fails the job")
    else:
        if doc["spec"]["runPolicy"].get("backoffLimit", 0) < 1:
            bad.append("runPolicy.backoffLimit 0: nothing is retried")
        for replica in doc["spec"]["pytorchReplicaSpecs"].values():
            if replica["restartPolicy"] != "ExitCode":
                bad.append(f"restartPolicy {replica['restartPolicy']}: a saved stop is not retried")
        if outcome.STOPPED in KUBEFLOW_PERMANENT or outcome.UNUSABLE not in KUBEFLOW_PERMANENT:
            bad.append("the exit codes do not fit the operator's ExitCode policy")
    return bad


def sbatch_problems(text: str) -> list[str]:
    """Why a Slurm batch script would not requeue a stopped run, nor stop it before the time limit,
    nor resume it in the same folder."""
    bad = []
    directives = re.findall(r"^#SBATCH (\S+)", text, re.M)
    if "--requeue" not in directives:
        bad.append("no --requeue")
    if not any(re.fullmatch(r"--signal=(B:)?(USR1|TERM)@\d+", d) for d in directives):
        bad.append("no --signal before the time limit")
    if not re.search(r"^srun (.*\\\n)*\s*--kill-on-bad-exit=1 \\$", text, re.M):
        bad.append("srun without --kill-on-bad-exit=1")
    if re.search(r"OUT_DIR=.*SLURM_JOB_ID", text):
        bad.append("OUT_DIR named after the job id: a resubmitted job starts over in a new folder")
    return bad
