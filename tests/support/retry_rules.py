"""Whether the examples' schedulers retry what they should: a preempted or stopped run (exit STOPPED)
is retried or requeued, a hang (exit HUNG) a bounded number of times, a crash (also a rank that
lost its peers) or a bad input (exit UNUSABLE) not, and the stop has time to save. Read from the
Kubernetes manifests and the Slurm batch scripts, so a wrong policy is caught before a cluster
spends a night retrying it; docs/finetune.md's table says the same (documented_retries)."""

from __future__ import annotations

import re

from ftenv import outcome
from ftenv.trainer.runlife.record import STOP_RECORD
from ftenv.watchdog.hang import HUNG_RECORD
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
    if f'STOP_RECORD="$OUT_DIR/{STOP_RECORD}"' not in text or 'if [ -f "$STOP_RECORD" ]' not in text:
        bad.append(f"the requeue does not follow the stop record ({STOP_RECORD}): srun's code cannot tell")
    if f'HUNG_RECORD="$OUT_DIR/{HUNG_RECORD}"' not in text:
        bad.append(f"a hang is not told from a task Slurm ended: no {HUNG_RECORD}")
    if not re.search(r"^trap .*\bTERM\b.*\bUSR1\b", text, re.M):
        bad.append("no trap for TERM and USR1: a signal to the whole job ends the batch shell first")
    if re.search(r"OUT_DIR=.*SLURM_JOB_ID", text):
        bad.append("OUT_DIR named after the job id: a resubmitted job starts over in a new folder")
    return bad


#: The ways a run ends that the examples decide on, by exit code.
ENDINGS = (outcome.STOPPED, outcome.HUNG, 1, outcome.UNUSABLE)
LAUNCHERS = ("Slurm", "Kubernetes Job", "PyTorchJob")


def kube_retries(doc: dict) -> dict[int, str]:
    """What a manifest does with each ending: "never", "at most N" (N: its backoffLimit)."""
    if doc["kind"] == "Job":
        spec = doc["spec"]
        limit = spec.get("backoffLimit", 6)
        rules = spec.get("podFailurePolicy", {}).get("rules", [])
        failing = {
            code
            for r in rules
            if r["action"] == "FailJob" and r.get("onExitCodes", {}).get("operator") == "In"
            for code in r["onExitCodes"]["values"]
        }
    else:
        limit = doc["spec"]["runPolicy"].get("backoffLimit", 0)
        policies = {r["restartPolicy"] for r in doc["spec"]["pytorchReplicaSpecs"].values()}
        failing = KUBEFLOW_PERMANENT if policies == {"ExitCode"} else set(ENDINGS)
    return {code: "never" if code in failing or limit < 1 else f"at most {limit}" for code in ENDINGS}


def documented_retries(markdown: str) -> dict[int, dict[str, str]]:
    """docs/finetune.md's "who retries what" table: per exit code, per launcher, "always", "never" or
    "at most N" (a cell that says "not" is never; one that says "at most N" is bounded)."""
    markdown = markdown[markdown.index("**Who retries what.**") :]
    markdown = markdown[: markdown.index("\n\n", markdown.index("| code |"))]
    rows = re.findall(r"^\| (\d+) \|[^|\n]*\|([^|\n]*)\|([^|\n]*)\|([^|\n]*)\|$", markdown, re.M)
    found = {}
    for code, *cells in rows:
        words = []
        for cell in cells:
            bound = re.search(r"at most (\d+)", cell)
            words.append(
                f"at most {bound.group(1)}" if bound else "never" if " not " in f" {cell} " else "always"
            )
        found[int(code)] = dict(zip(LAUNCHERS, words, strict=True))
    return found
