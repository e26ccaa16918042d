"""docs/examples/: the Kubernetes manifests validate offline, the scripts pass shellcheck, and the
Docker and Slurm scripts, run with `docker`, `srun` and `apptainer` replaced by recorders, pass the
flags the docs promise and an `ftenv finetune` command that works (run here with --dry-run on a
model dir and data laid out as the example expects). Each check is also shown failing on the
mistake it guards against.

The Kubernetes schemas: Job and PodTemplateSpec from kubernetes-validate (Kubernetes 1.37, strict:
unknown fields are errors); PyTorchJob from tests/schemas/pytorchjob-kubeflow-v1.schema.json, which
is written from kubeflow/training-operator v1.9.0's CRD and webhook (see its $comment).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import referencing
import yaml

from ftenv import outcome, variables
from ftenv.stack import versions
from ftenv.train import finetune
from support import ROOT

EXAMPLES = ROOT / "docs/examples"
K8S_VERSION = "1.37"
VAR = variables.SDPA_DEPRIORITIZED
IMAGE = versions.load(ROOT / "versions.toml").default.image_ref
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")


def load_yaml(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / "kubernetes" / name).read_text()) if d]


# --- Kubernetes ------------------------------------------------------------------------------


def _k8s_schema(name: str) -> tuple[dict, referencing.Registry]:
    base = Path(kubernetes_validate.__file__).parent / f"kubernetes-json-schema/v{K8S_VERSION}.0-local-strict"
    schema = json.loads((base / name).read_text())
    definitions = json.loads((base / "_definitions.json").read_text())
    registry = referencing.Registry().with_resources(
        [
            ("/api/_definitions.json", referencing.Resource.from_contents(definitions)),
        ]
    )
    return schema, registry


def validate_job(doc: dict) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def validate_pytorchjob(doc: dict) -> None:
    outer = json.loads((ROOT / "tests/schemas/pytorchjob-kubeflow-v1.schema.json").read_text())
    jsonschema.Draft202012Validator(outer).validate(doc)
    pod_schema, registry = _k8s_schema("podtemplatespec-v1.json")
    validator = jsonschema.Draft202012Validator(pod_schema, registry=registry)
    for replica in doc["spec"]["pytorchReplicaSpecs"].values():
        validator.validate(replica["template"])


def pod_specs(doc: dict) -> list[dict]:
    if doc["kind"] == "Job":
        return [doc["spec"]["template"]["spec"]]
    return [r["template"]["spec"] for r in doc["spec"]["pytorchReplicaSpecs"].values()]


MANIFESTS = [("job-one-node.yaml", validate_job), ("pytorchjob-multi-node.yaml", validate_pytorchjob)]


@pytest.mark.parametrize(("name", "validate"), MANIFESTS)
def test_manifests_validate(name, validate):
    docs = load_yaml(name)
    assert len(docs) == 1
    validate(docs[0])


def _container(doc):
    return pod_specs(doc)[0]["containers"][0]


def _set(path):
    """A mutation that sets doc[path...] (the last item is the value)."""

    def mutate(doc):
        target = doc
        for key in path[:-2]:
            target = target[key]
        target[path[-2]] = path[-1]

    return mutate


JOB_BREAKAGES = {
    "env value not a string": lambda d: _container(d)["env"][0].update(value=1),
    "misspelt field": lambda d: _container(d).update(volumeMount=_container(d).pop("volumeMounts")),
    "resources.limit typo": lambda d: _container(d)["resources"].update(
        limit=_container(d)["resources"].pop("limits")
    ),
    "emptyDir medium typo": lambda d: pod_specs(d)[0]["volumes"][-1]["emptyDir"].update(medum="Memory"),
}
PYTORCHJOB_BREAKAGES = {
    **JOB_BREAKAGES,
    "replica type typo": lambda d: d["spec"]["pytorchReplicaSpecs"].update(
        Workers=d["spec"]["pytorchReplicaSpecs"].pop("Worker")
    ),
    "two masters": lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2),
    "container not named pytorch": lambda d: _container(d).update(name="trainer"),
    "cleanPodPolicy typo": _set(["spec", "runPolicy", "cleanPodPolicy", "Runing"]),
    "wrong apiVersion": _set(["apiVersion", "kubeflow.org/v2"]),
}


@pytest.mark.parametrize(
    ("name", "validate", "breakage"),
    [("job-one-node.yaml", validate_job, b) for b in JOB_BREAKAGES]
    + [("pytorchjob-multi-node.yaml", validate_pytorchjob, b) for b in PYTORCHJOB_BREAKAGES],
)
def test_validation_catches(name, validate, breakage):
    doc = copy.deepcopy(load_yaml(name)[0])
    (PYTORCHJOB_BREAKAGES if "pytorchjob" in name else JOB_BREAKAGES)[breakage](doc)
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        validate(doc)


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


@pytest.mark.parametrize("name", [n for n, _ in MANIFESTS])
def test_no_in_place_restarts(name):
    doc = load_yaml(name)[0]
    assert not restarts_in_place(doc), restart_policies(doc)
    broken = copy.deepcopy(doc)
    for spec in pod_specs(broken):
        spec["restartPolicy"] = "OnFailure"
    assert restarts_in_place(broken) == {"OnFailure"}


@pytest.mark.parametrize("name", [n for n, _ in MANIFESTS])
def test_manifests_follow_the_rules(name):
    doc = load_yaml(name)[0]
    for spec in pod_specs(doc):
        c = spec["containers"][0]
        assert c["image"] == IMAGE, "pin the immutable tag from versions.toml"
        assert "command" not in c, "use args: command would skip the image's entrypoint"
        gpus = int(c["resources"]["limits"]["nvidia.com/gpu"])
        args = finetune_args(c["args"])
        assert args.gpus_per_node == gpus, "--gpus-per-node must equal the GPU limit"
        env = {e["name"]: e["value"] for e in c["env"]}
        assert env[VAR] in ("0", "1")
        shm = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        assert len(shm) == 1
        vol = next(v for v in spec["volumes"] if v["name"] == shm[0]["name"])
        assert vol["emptyDir"]["medium"] == "Memory" and vol["emptyDir"]["sizeLimit"]
        # The root stays read-only (ftenv writes only to the output dir and /tmp): /tmp is an emptyDir.
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
        assert len(tmp) == 1 and "readOnly" not in tmp[0]
        assert "emptyDir" in next(v for v in spec["volumes"] if v["name"] == tmp[0]["name"])
        mounts = {m["mountPath"] for m in c["volumeMounts"]}
        for path in (args.model_dir, args.train, args.valid, args.output_dir):
            assert any(path.startswith(m + "/") for m in mounts), f"{path} is on no volume"


def finetune_args(argv: list[str]):
    """Parse an `ftenv finetune ...` argv with the real parser (unknown options fail)."""
    import argparse

    assert argv[:2] == ["ftenv", "finetune"], argv
    parser = argparse.ArgumentParser(exit_on_error=False)
    finetune.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv[1:])
    assert all(o.startswith("++") and "=" in o for o in args.overrides), args.overrides
    return args


def test_finetune_args_parser_catches_a_typo(capsys):
    with pytest.raises(SystemExit) as exit_info:
        finetune_args(["ftenv", "finetune", "--outptu-dir=/out"])
    assert exit_info.value.code == 2  # argparse's usage error
    assert "unrecognized arguments: --outptu-dir=/out" in capsys.readouterr().err


# --- shell scripts ---------------------------------------------------------------------------

SCRIPTS = sorted(
    p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if p.suffix in (".sh", ".sbatch")
)


def shellcheck(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([SHELLCHECK, "-s", "bash", str(path)], capture_output=True, text=True)


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_pass_shellcheck(name):
    proc = shellcheck(EXAMPLES / name)
    assert proc.returncode == 0, proc.stdout


def test_shellcheck_catches_an_unquoted_path(tmp_path):
    text = (EXAMPLES / "slurm/finetune-pyxis.sbatch").read_text().replace('"$OUT_DIR"', "$OUT_DIR")
    (tmp_path / "bad.sbatch").write_text(text)
    proc = shellcheck(tmp_path / "bad.sbatch")
    assert proc.returncode != 0 and "SC2086" in proc.stdout


def test_scripts_pin_the_image():
    pyxis = IMAGE.replace("/", "#", 1)
    for name in SCRIPTS:
        text = (EXAMPLES / name).read_text()
        assert IMAGE in text or pyxis in text, name


# --- running the scripts with recorders --------------------------------------------------------

RECORDER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps({"tool": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                        "var": os.environ.get(os.environ["WATCH_VAR"])}) + "\\n")
"""


def record(script: Path, tools: list[str], env: dict, tmp_path: Path) -> list[dict]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        (bin_dir / tool).write_text(RECORDER)
        (bin_dir / tool).chmod(0o755)
    rec = tmp_path / "record.jsonl"
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_"))},
        **{k: str(v) for k, v in env.items()},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RECORD": str(rec),
        "WATCH_VAR": VAR,
    }
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=full, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in rec.read_text().splitlines()]


def dry_run(argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an example's `ftenv finetune ...` here, with --dry-run right after `finetune`."""
    assert argv[:2] == ["ftenv", "finetune"], argv
    cmd = [sys.executable, "-m", "ftenv.cli", "finetune", "--dry-run", *argv[2:]]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_", "TORCH_CUDNN"))}
    clean["PYTHONPATH"] = str(ROOT / "scripts")
    clean["CUDA_VISIBLE_DEVICES"] = (
        "" if env is None or "CUDA_VISIBLE_DEVICES" not in env else env["CUDA_VISIBLE_DEVICES"]
    )
    return subprocess.run(cmd, capture_output=True, text=True, env={**clean, **(env or {})})


def split_docker_run(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """docker run [options] IMAGE COMMAND... -> (options, image, command)."""
    assert argv[0] == "run"
    i, opts = 1, []
    takes_value = {
        "--gpus",
        "--user",
        "-v",
        "--volume",
        "-e",
        "--env",
        "--shm-size",
        "--entrypoint",
        "--name",
    }
    while argv[i].startswith("-"):
        opt = argv[i]
        if opt in takes_value:
            opts += [opt, argv[i + 1]]
            i += 2
        else:
            opts.append(opt)
            i += 1
    return opts, argv[i], argv[i + 1 :]


DOCKER = ["docker/finetune-one-gpu.sh", "docker/finetune-all-gpus.sh", "docker/finetune-cudnn-on.sh"]


@pytest.mark.parametrize("name", DOCKER)
def test_docker_examples(name, layout, tmp_path):
    calls = record(EXAMPLES / name, ["docker"], layout, tmp_path)
    assert len(calls) == 1 and calls[0]["tool"] == "docker"
    opts, image, command = split_docker_run(calls[0]["argv"])
    assert image == IMAGE
    assert "--gpus" in opts
    assert "--ipc=host" in opts or any(o.startswith("--shm-size") for o in opts)
    volumes = [opts[i + 1] for i, o in enumerate(opts) if o == "-v"]
    for key in ("MODEL_DIR", "DATA_DIR", "OUT_DIR"):
        path = str(layout[key])
        assert any(v.split(":")[:2] == [path, path] for v in volumes), f"{key} not mounted at its own path"
    envs = [opts[i + 1] for i, o in enumerate(opts) if o == "-e"]
    expected = {"docker/finetune-cudnn-on.sh": [f"{VAR}=0"]}.get(name, [])
    assert envs == expected
    gpus = {} if "--gpus-per-node" in command else {"CUDA_VISIBLE_DEVICES": ""}
    proc = dry_run(command, {**gpus, **dict(e.split("=", 1) for e in envs)})
    if gpus:  # all GPUs: no count given, and this machine has none; the message says what to do
        assert proc.returncode == 2 and "no GPU visible" in proc.stderr, proc.stderr
        proc = dry_run([*command[:2], "--gpus-per-node", "8", *command[2:]])
    assert proc.returncode == 0, proc.stderr
    assert f"++model={layout['MODEL_DIR']}" in proc.stdout
    if envs:
        assert f"{VAR}=0: explicitly asks torch to prefer cuDNN attention" in proc.stderr


@pytest.mark.parametrize("name", DOCKER)
def test_docker_examples_run_as_you_and_take_the_rootless_user(name, layout, tmp_path):
    # Rootless Docker/Podman: the host user is uid 0 in the container, so CONTAINER_USER=0:0.
    for env, user in (({}, "1234:0"), ({"CONTAINER_USER": "0:0"}, "0:0")):
        run_dir = tmp_path / user.replace(":", "-")
        (run_dir / "bin").mkdir(parents=True)
        (run_dir / "bin/id").write_text("#!/bin/sh\necho 1234\n")  # the user running the script
        (run_dir / "bin/id").chmod(0o755)
        call = record(EXAMPLES / name, ["docker"], {**layout, **env}, run_dir)[0]
        opts, _, _ = split_docker_run(call["argv"])
        assert opts[opts.index("--user") + 1] == user
    assert "CONTAINER_USER=0:0" in (EXAMPLES / name).read_text(), "say when to use it"


def test_docker_example_with_a_typo_fails(layout, tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text((EXAMPLES / DOCKER[0]).read_text().replace("val.jsonl", "valid.jsonl"))
    _, _, command = split_docker_run(record(bad, ["docker"], layout, tmp_path)[0]["argv"])
    proc = dry_run(command)
    assert proc.returncode == 2 and "valid data" in proc.stderr and "does not exist" in proc.stderr


def test_pyxis_example(layout, tmp_path):
    calls = record(
        EXAMPLES / "slurm/finetune-pyxis.sbatch", ["srun"], {**layout, "SLURM_JOB_ID": "7"}, tmp_path
    )
    assert len(calls) == 1
    argv = calls[0]["argv"]
    split = argv.index("ftenv")
    opts, command = argv[:split], argv[split:]
    assert "--ntasks-per-node=1" in opts
    # pyxis waits for its start command to stop itself; under the image's tini it never does.
    assert "--container-entrypoint" not in opts, "the job would hang at container start"
    assert "--no-container-entrypoint" in opts, "a site's execute_entrypoint=true would hang the job"
    assert f"--container-env={VAR}" in opts, "pyxis keeps the image's value without it"
    assert calls[0]["var"] == "1", "the value --container-env passes must be exported in the job"
    assert any(o.startswith("--container-image=" + IMAGE.replace("/", "#", 1)) for o in opts)
    mounts = next(o for o in opts if o.startswith("--container-mounts=")).split("=", 1)[1].split(",")
    for key in ("MODEL_DIR", "DATA_DIR", "OUT_DIR"):
        assert any(m.split(":")[:2] == [str(layout[key])] * 2 for m in mounts), key
    proc = dry_run(command)
    assert proc.returncode == 0, proc.stderr
    assert "--nproc_per_node 8" in proc.stdout


def test_apptainer_example(layout, tmp_path):
    # srun stand-in: drops its options and runs the command, so that apptainer (recorded) is reached.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/sh\n{SRUN_STANDIN}\n")
    (bin_dir / "srun").chmod(0o755)
    calls = record(
        EXAMPLES / "slurm/finetune-apptainer.sbatch", ["apptainer"], {**layout, "SLURM_JOB_ID": "7"}, tmp_path
    )
    assert len(calls) == 1
    argv = calls[0]["argv"]
    assert argv[:2] == ["exec", "--nv"]
    assert ["--env", f"{VAR}=1"] == argv[argv.index("--env") : argv.index("--env") + 2]
    binds = argv[argv.index("--bind") + 1].split(",")
    for key in ("MODEL_DIR", "DATA_DIR", "OUT_DIR"):
        assert any(b.split(":")[:2] == [str(layout[key])] * 2 for b in binds), key
    # After the .sif, the command itself: `ftenv finetune` prints the report (`exec` skips the entrypoint).
    sif = next(a for a in argv if a.endswith(".sif"))
    inner = argv[argv.index(sif) + 1 :]
    assert inner[:2] == ["ftenv", "finetune"], inner
    proc = dry_run(inner)
    assert proc.returncode == 0, proc.stderr


SRUN_STANDIN = 'while [ "${1#-}" != "$1" ]; do shift; done; exec "$@"'


def test_srun_standin_drops_options_and_runs_the_command():
    out = subprocess.run(
        ["sh", "-c", SRUN_STANDIN, "srun", "--ntasks-per-node=1", "-v", "echo", "x", "--y"],
        capture_output=True,
        text=True,
    ).stdout
    assert out.split() == ["x", "--y"]


def test_examples_only_use_documented_values_of_the_variable():
    for path in list(EXAMPLES.rglob("*")):
        if path.is_file():
            for value in re.findall(rf"{VAR}=([A-Za-z0-9_-]*)", path.read_text()):
                assert value in ("0", "1"), (path, value)


def test_every_example_is_linked_from_the_docs():
    text = (ROOT / "docs/finetune.md").read_text()
    for name in [n for n, _ in MANIFESTS] + SCRIPTS:
        assert name.split("/")[-1] in text, name


# --- a run's life: retries, the restricted profile, Slurm's requeue --------------------------------

#: The volume types the restricted Pod Security Standard allows (kubernetes.io/docs/concepts/security/
#: pod-security-standards, "Volume Types").
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
    "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip


def restricted_violations(spec: dict) -> list[str]:
    """What in a pod spec breaks the restricted Pod Security Standard (its checks that apply here)."""
    bad = []
    pod = spec.get("securityContext", {})
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            bad.append(f"volume {v['name']}: {kinds - RESTRICTED_VOLUMES}")
    for c in spec.get("initContainers", []) + spec["containers"]:
        sc = c.get("securityContext", {})
        if not sc.get("runAsNonRoot", pod.get("runAsNonRoot")):
            bad.append(f"{c['name']}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod.get("runAsUser")) == 0:
            bad.append(f"{c['name']}: runAsUser 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{c['name']}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities", {})
        if caps.get("drop") != ["ALL"] or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            bad.append(f"{c['name']}: capabilities must drop ALL (and add at most NET_BIND_SERVICE)")
        seccomp = sc.get("seccompProfile", pod.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{c['name']}: seccompProfile {seccomp}")
        if sc.get("privileged"):
            bad.append(f"{c['name']}: privileged")
    return bad


RESTRICTED_BREAKAGES = {
    "root allowed": lambda s: s["securityContext"].pop("runAsNonRoot"),
    "escalation": lambda s: s["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
    "capabilities kept": lambda s: s["containers"][0]["securityContext"].pop("capabilities"),
    "no seccomp": lambda s: s["securityContext"].pop("seccompProfile"),
    "hostPath": lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
}


@pytest.mark.parametrize("name", [n for n, _ in MANIFESTS])
def test_manifests_pass_the_restricted_pod_security_standard_with_gpus(name):
    doc = load_yaml(name)[0]
    for spec in pod_specs(doc):
        assert restricted_violations(spec) == [], name
        assert int(spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) > 0
    for breakage, mutate in RESTRICTED_BREAKAGES.items():
        broken = copy.deepcopy(doc)
        mutate(pod_specs(broken)[0])
        assert restricted_violations(pod_specs(broken)[0]), breakage


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


RETRY_BREAKAGES = {
    "Job": {
        "no retries": _set(["spec", "backoffLimit", 0]),
        "bad input retried": lambda d: d["spec"]["podFailurePolicy"]["rules"].pop(0),
        "evictions counted": lambda d: d["spec"]["podFailurePolicy"]["rules"].pop(1),
        "default grace": lambda d: d["spec"]["template"]["spec"].pop("terminationGracePeriodSeconds"),
    },
    "PyTorchJob": {
        "no retries": _set(["spec", "runPolicy", "backoffLimit", 0]),
        "never restarted": _set(["spec", "pytorchReplicaSpecs", "Worker", "restartPolicy", "Never"]),
        "default grace": lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"].pop(
            "terminationGracePeriodSeconds"
        ),
    },
}


@pytest.mark.parametrize("name", [n for n, _ in MANIFESTS])
def test_manifests_retry_a_preemption_but_not_a_bad_input(name):
    doc = load_yaml(name)[0]
    assert retry_problems(doc) == []
    for breakage, mutate in RETRY_BREAKAGES[doc["kind"]].items():
        broken = copy.deepcopy(doc)
        mutate(broken)
        assert retry_problems(broken), breakage


SBATCH = ["slurm/finetune-pyxis.sbatch", "slurm/finetune-apptainer.sbatch"]


def sbatch_problems(text: str) -> list[str]:
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


@pytest.mark.parametrize("name", SBATCH)
def test_sbatch_examples_requeue_and_keep_their_folder(name, layout, tmp_path):
    text = (EXAMPLES / name).read_text()
    assert sbatch_problems(text) == []
    for bad in (
        text.replace("#SBATCH --requeue\n", ""),
        text.replace("#SBATCH --signal=USR1@300\n", ""),
        text.replace("  --kill-on-bad-exit=1 \\\n", ""),
        text.replace("$SLURM_JOB_NAME", "nano-$SLURM_JOB_ID"),
    ):
        assert sbatch_problems(bad), "the check must catch it"
    # srun exiting 75 (stopped, saved): the script requeues the job and exits 75; 1 or 2: no requeue.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("srun", "scontrol", "apptainer"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "$RECORD"\nexit ${{SRUN_EXIT:-0}}\n')
        (bin_dir / tool).chmod(0o755)
    for code, requeued in ((outcome.STOPPED, True), (1, False), (outcome.UNUSABLE, False), (0, False)):
        rec = tmp_path / f"calls-{code}"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_"))},
            **{k: str(v) for k, v in layout.items()},
            "SLURM_JOB_ID": "41", "SLURM_JOB_NAME": "nano", "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "RECORD": str(rec), "SRUN_EXIT": str(code),
        }  # fmt: skip
        script = ["bash", str(EXAMPLES / name)]
        proc = subprocess.run(script, capture_output=True, text=True, env=env, cwd=tmp_path)
        calls = rec.read_text().splitlines()
        assert proc.returncode == code, (code, proc.stderr)
        assert ("scontrol requeue 41" in calls) == requeued, (code, calls)
