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
import os
import re
import subprocess

import jsonschema
import kubernetes_validate
import pytest

from ftenv import outcome, variables
from ftenv.stack import versions
from ftenv.trainer.runlife.record import STOP_RECORD
from ftenv.watchdog.hang import HUNG_RECORD
from imagetools import tags
from support import ROOT, child_env
from support.example_runs import SRUN_STANDIN, dry_run, finetune_args, record, shellcheck, split_docker_run
from support.image_refs import COMMIT_PLACEHOLDER, moving_refs
from support.manifests import (
    EXAMPLES,
    first_container,
    load_yaml,
    pod_specs,
    rdma_resources,
    restricted_violations,
    set_at,
    stated_level,
    validate_job,
    validate_pytorchjob,
)
from support.retry_rules import (
    documented_retries,
    kube_retries,
    restart_policies,
    restarts_in_place,
    retry_problems,
    sbatch_problems,
)

VAR = variables.SDPA_DEPRIORITIZED
FINETUNE_DOC = ROOT / "docs/finetune.md"
VERSIONS = versions.load(ROOT / "versions.toml")
IMAGE = tags.image_ref(VERSIONS.default)
#: The image as the examples name it: the `<stack>-<commit>` tag, the commit left for the user to fill in.
PINNED = f"{IMAGE}-{COMMIT_PLACEHOLDER}"
#: A release's image, as a user sets IMAGE for the Docker scripts.
RELEASE = {"IMAGE": f"{IMAGE}-3f2a9c81d0e4"}


# --- Kubernetes ------------------------------------------------------------------------------


MANIFESTS = [("job-one-node.yaml", validate_job), ("pytorchjob-multi-node.yaml", validate_pytorchjob)]


@pytest.mark.parametrize(("name", "validate"), MANIFESTS)
def test_manifests_validate(name, validate):
    docs = load_yaml(name)
    assert len(docs) == 1
    validate(docs[0])


JOB_BREAKAGES = {
    "env value not a string": lambda d: first_container(d)["env"][0].update(value=1),
    "misspelt field": lambda d: first_container(d).update(volumeMount=first_container(d).pop("volumeMounts")),
    "resources.limit typo": lambda d: first_container(d)["resources"].update(
        limit=first_container(d)["resources"].pop("limits")
    ),
    "emptyDir medium typo": lambda d: pod_specs(d)[0]["volumes"][-1]["emptyDir"].update(medum="Memory"),
}
PYTORCHJOB_BREAKAGES = {
    **JOB_BREAKAGES,
    "replica type typo": lambda d: d["spec"]["pytorchReplicaSpecs"].update(
        Workers=d["spec"]["pytorchReplicaSpecs"].pop("Worker")
    ),
    "two masters": lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2),
    "container not named pytorch": lambda d: first_container(d).update(name="trainer"),
    "cleanPodPolicy typo": set_at(["spec", "runPolicy", "cleanPodPolicy", "Runing"]),
    "wrong apiVersion": set_at(["apiVersion", "kubeflow.org/v2"]),
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
        assert c["image"] == PINNED, "the `<stack>-<commit>` tag, its stack from versions.toml"
        assert c["imagePullPolicy"] == "IfNotPresent", "an immutable tag needs no registry check per pod"
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


def test_finetune_args_parser_catches_a_typo(capsys):
    with pytest.raises(SystemExit) as exit_info:
        finetune_args(["ftenv", "finetune", "--outptu-dir=/out"])
    assert exit_info.value.code == 2  # argparse's usage error
    assert "unrecognized arguments: --outptu-dir=/out" in capsys.readouterr().err


# --- shell scripts ---------------------------------------------------------------------------

SCRIPTS = sorted(
    p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if p.suffix in (".sh", ".sbatch")
)


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
    enroot = PINNED.replace("/", "#", 1)
    for name in SCRIPTS:
        text = (EXAMPLES / name).read_text()
        assert PINNED in text or enroot in text, name


EXAMPLE_FILES = sorted(p for p in EXAMPLES.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_examples_name_the_image_by_something_immutable(path):
    """One image per job: a moving `<stack>` tag with IfNotPresent, or pulled on each node, can give
    two builds in one job or across a requeue. Only a digest look-up may name it."""
    text = path.read_text()
    assert moving_refs(text, VERSIONS) == []
    assert "crane digest" in text, "say how to get the immutable name for a release"


def test_the_immutable_image_check_catches_a_moving_tag():
    enroot = IMAGE.replace("/", "#", 1)
    repository = VERSIONS.default.image["repository"]
    for old in (
        f"          image: {IMAGE}\n",
        f"IMAGE=${{IMAGE:-{IMAGE}}}\n",
        f"IMAGE=${{IMAGE:-{enroot}}}\n",
        f"#   apptainer pull /lustre/images/funasr-nano-cu130.sif docker://{IMAGE}\n",
        f"#   enroot import -o x.sqsh 'docker://{enroot}'\n",
        f"image: {repository}:cu130\n",
        f"image: {repository}:latest\n",
        f"image: {repository}\n",
    ):
        assert moving_refs(old, VERSIONS), old
    for pinned in (
        f"image: {PINNED}\n",
        f"image: {IMAGE}-3f2a9c81d0e4\n",
        f"image: {repository}@sha256:{'a' * 64}\n",
        f"'docker://{PINNED.replace('/', '#', 1)}'",
        f"#   crane digest {IMAGE}\n",
    ):
        assert not moving_refs(pinned, VERSIONS), pinned


# --- running the scripts with recorders --------------------------------------------------------


DOCKER = ["docker/finetune-one-gpu.sh", "docker/finetune-all-gpus.sh", "docker/finetune-cudnn-on.sh"]


@pytest.mark.parametrize("name", DOCKER)
def test_docker_examples(name, layout, tmp_path):
    calls = record(EXAMPLES / name, ["docker"], {**layout, **RELEASE}, tmp_path)
    assert len(calls) == 1 and calls[0]["tool"] == "docker"
    opts, image, command = split_docker_run(calls[0]["argv"])
    assert image == RELEASE["IMAGE"]
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
        call = record(EXAMPLES / name, ["docker"], {**layout, **RELEASE, **env}, run_dir)[0]
        opts, _, _ = split_docker_run(call["argv"])
        assert opts[opts.index("--user") + 1] == user
    assert "CONTAINER_USER=0:0" in (EXAMPLES / name).read_text(), "say when to use it"


@pytest.mark.parametrize("name", DOCKER)
def test_docker_examples_stop_until_the_commit_is_filled_in(name, layout, tmp_path):
    """Unchanged, a script names no image that exists: it says what to fill in, exit 2, no docker call."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/docker").write_text('#!/bin/sh\ntouch "$0.called"\n')
    (tmp_path / "bin/docker").chmod(0o755)
    env = {
        **os.environ,
        **{k: str(v) for k, v in layout.items()},
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    }
    env.pop("IMAGE", None)
    proc = subprocess.run(["bash", str(EXAMPLES / name)], capture_output=True, text=True, env=env)
    assert proc.returncode == outcome.UNUSABLE, proc.stderr
    assert f"IMAGE={PINNED}: put the release's commit in place of {COMMIT_PLACEHOLDER}" in proc.stderr
    assert not (tmp_path / "bin/docker.called").exists()


def test_docker_example_with_a_typo_fails(layout, tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text((EXAMPLES / DOCKER[0]).read_text().replace("valid.jsonl", "val.jsonl"))
    _, _, command = split_docker_run(record(bad, ["docker"], {**layout, **RELEASE}, tmp_path)[0]["argv"])
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
    assert calls[0]["mellanox"] == "all", "enroot's mellanox hook mounts the HCAs only when it is set"
    (tmp_path / "own").mkdir()
    own = record(
        EXAMPLES / "slurm/finetune-pyxis.sbatch",
        ["srun"],
        {**layout, "SLURM_JOB_ID": "7", "MELLANOX_VISIBLE_DEVICES": "none"},
        tmp_path / "own",
    )
    assert own[0]["mellanox"] == "none", "a site's own value stands"
    # One image per job: every node reads the squashfs file imported once, before sbatch; pyxis reads a
    # value as a file only when it starts with / or . (anything else is an image it imports per node).
    sqsh = next(o for o in opts if o.startswith("--container-image=")).split("=", 1)[1]
    assert sqsh.startswith("/") and sqsh.endswith(".sqsh"), sqsh
    text = (EXAMPLES / "slurm/finetune-pyxis.sbatch").read_text()
    assert f"enroot import -o {sqsh} 'docker://{PINNED.replace('/', '#', 1)}'" in text, (
        "import where srun reads"
    )
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
    text = (EXAMPLES / "slurm/finetune-apptainer.sbatch").read_text()
    assert f"apptainer pull {sif} 'docker://{PINNED}'" in text, "pull to where srun reads"
    inner = argv[argv.index(sif) + 1 :]
    assert inner[:2] == ["ftenv", "finetune"], inner
    proc = dry_run(inner)
    assert proc.returncode == 0, proc.stderr


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


RESTRICTED_BREAKAGES = {
    "root allowed": lambda s: s["securityContext"].pop("runAsNonRoot"),
    "escalation": lambda s: s["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
    "capabilities kept": lambda s: s["containers"][0]["securityContext"].pop("capabilities"),
    "no seccomp": lambda s: s["securityContext"].pop("seccompProfile"),
    "hostPath": lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
}


#: The rule: each manifest states its Pod Security Standard level (a `# Pod Security Standard: LEVEL.`
#: line) and meets it; both stay restricted. The multi-node one also requests the RDMA device
#: plugin's resource in every pod, NCCL's InfiniBand/RoCE between nodes (docs/network.md): a
#: resource, no privilege. IPC_LOCK would leave restricted and baseline (and not reach a uid-1000
#: process), so it must stay out.
LEVELS = {"job-one-node.yaml": ("restricted", False), "pytorchjob-multi-node.yaml": ("restricted", True)}


@pytest.mark.parametrize("name", [n for n, _ in MANIFESTS])
def test_manifests_meet_their_stated_pod_security_level_with_gpus(name):
    level, rdma = LEVELS[name]
    assert stated_level((EXAMPLES / "kubernetes" / name).read_text()) == level, name
    doc = load_yaml(name)[0]
    for spec in pod_specs(doc):
        assert restricted_violations(spec) == [], name
        assert int(spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) > 0
        assert bool(rdma_resources(spec)) is rdma, name
    for breakage, mutate in RESTRICTED_BREAKAGES.items():
        broken = copy.deepcopy(doc)
        mutate(pod_specs(broken)[0])
        assert restricted_violations(pod_specs(broken)[0]), breakage


def test_the_multi_node_manifest_gives_every_pod_the_rdma_devices_without_ipc_lock():
    doc = load_yaml("pytorchjob-multi-node.yaml")[0]
    for role in ("Master", "Worker"):
        broken = copy.deepcopy(doc)
        spec = broken["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        spec["containers"][0]["resources"]["limits"].pop("rdma/rdma_shared_device_a")
        assert [rdma_resources(s) for s in pod_specs(broken)].count([]) == 1, role
    locked = copy.deepcopy(doc)
    pod_specs(locked)[0]["containers"][0]["securityContext"]["capabilities"]["add"] = ["IPC_LOCK"]
    assert restricted_violations(pod_specs(locked)[0])
    assert stated_level("# Pod Security Standard: restricted, mostly.") is None


RETRY_BREAKAGES = {
    "Job": {
        "no retries": set_at(["spec", "backoffLimit", 0]),
        "bad input retried": lambda d: d["spec"]["podFailurePolicy"]["rules"].pop(0),
        "evictions counted": lambda d: d["spec"]["podFailurePolicy"]["rules"].pop(1),
        "default grace": lambda d: d["spec"]["template"]["spec"].pop("terminationGracePeriodSeconds"),
    },
    "PyTorchJob": {
        "no retries": set_at(["spec", "runPolicy", "backoffLimit", 0]),
        "never restarted": set_at(["spec", "pytorchReplicaSpecs", "Worker", "restartPolicy", "Never"]),
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


@pytest.mark.parametrize("name", SBATCH)
def test_sbatch_examples_requeue_and_keep_their_folder(name, layout, tmp_path):
    text = (EXAMPLES / name).read_text()
    assert sbatch_problems(text) == []
    for bad in (
        text.replace("#SBATCH --requeue\n", ""),
        text.replace("#SBATCH --signal=USR1@300\n", ""),
        text.replace("  --kill-on-bad-exit=1 \\\n", ""),
        text.replace("$SLURM_JOB_NAME", "nano-$SLURM_JOB_ID"),
        re.sub(r"^trap .*\n", "", text, flags=re.M),
        text.replace(STOP_RECORD, "stop.json"),
    ):
        assert sbatch_problems(bad), "the check must catch it"


#: What srun's stand-in leaves in OUT_DIR and returns for each ending: the record ftenv writes, and
#: 143, srun's code when --kill-on-bad-exit ended another node's task (the highest of its tasks').
SRUN_ENDINGS = {
    outcome.STOPPED: ("stop", 143),
    outcome.HUNG: ("hung", 143),
    1: ("", 1),
    outcome.UNUSABLE: ("", 2),
}
STANDIN_SRUN = f"""#!/bin/sh
echo "srun $*" >> "$RECORD"
case "$LEAVES" in
  stop) echo '{{"signal": "SIGUSR1", "epoch": 0, "step": 3}}' > "$OUT_DIR/{STOP_RECORD}" ;;
  hung) echo '{{"hung_after_s": 1800}}' > "$OUT_DIR/{HUNG_RECORD}" ;;
esac
exit "$SRUN_EXIT"
"""


def slurm_retries(name: str, layout: dict, tmp_path) -> dict[int, str]:
    """What the batch script does with each ending, run with srun and scontrol stand-ins at restart
    counts 0 to 5: "always", "never" or "at most N" (requeued while SLURM_RESTART_COUNT < N)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "srun").write_text(STANDIN_SRUN)
    for tool in ("scontrol", "apptainer"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "$RECORD"\n')
    for tool in ("srun", "scontrol", "apptainer"):
        (bin_dir / tool).chmod(0o755)
    found = {}
    for code, (leaves, srun_exit) in SRUN_ENDINGS.items():
        requeued = []
        for restarts in range(6):
            rec = tmp_path / f"calls-{code}-{restarts}"
            env = child_env(unset=["SLURM_*", "PET_*"], **{
                **{k: str(v) for k, v in layout.items()},
                "SLURM_JOB_ID": "41", "SLURM_JOB_NAME": "nano", "SLURM_RESTART_COUNT": str(restarts),
                "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD": str(rec), "LEAVES": leaves,
                "SRUN_EXIT": str(srun_exit),
            })  # fmt: skip
            proc = subprocess.run(["bash", str(EXAMPLES / name)], capture_output=True, text=True, env=env)
            calls = rec.read_text().splitlines()
            again = "scontrol requeue 41" in calls
            # Requeued: the script exits with the ending's own code; else srun's.
            assert proc.returncode == (code if again else srun_exit), (code, restarts, proc.stderr)
            requeued.append(again)
        n = requeued.index(False) if False in requeued else None
        found[code] = "always" if n is None else f"at most {n}" if n and not any(requeued[n:]) else "never"
        assert found[code] != "never" or not any(requeued), (code, requeued)
    return found


@pytest.mark.parametrize("name", SBATCH)
def test_sbatch_examples_requeue_what_the_docs_say(name, layout, tmp_path):
    """A stop is requeued whichever node ended first (srun's 143), a hang at most HANG_RETRIES times,
    a crash or a bad input never; as docs/finetune.md's table says."""
    documented = {code: row["Slurm"] for code, row in documented_retries(FINETUNE_DOC.read_text()).items()}
    assert slurm_retries(name, layout, tmp_path) == documented == {
        outcome.STOPPED: "always", outcome.HUNG: "at most 3", 1: "never", outcome.UNUSABLE: "never",
    }  # fmt: skip
    # A record an earlier run left (a stop, then a crash now): not this run's, not requeued.
    (layout["OUT_DIR"]).mkdir(parents=True, exist_ok=True)
    (layout["OUT_DIR"] / STOP_RECORD).write_text("{}")
    rec = tmp_path / "calls-stale"
    env = child_env(unset=["SLURM_*", "PET_*"], **{
        **{k: str(v) for k, v in layout.items()},
        "SLURM_JOB_ID": "41", "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RECORD": str(rec),
        "LEAVES": "", "SRUN_EXIT": "1",
    })  # fmt: skip
    proc = subprocess.run(["bash", str(EXAMPLES / name)], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "scontrol requeue 41" not in rec.read_text(), proc.stderr


@pytest.mark.parametrize("name", [n for n, _ in MANIFESTS])
def test_manifests_retry_what_the_docs_say(name):
    doc = load_yaml(name)[0]
    launcher = "Kubernetes Job" if doc["kind"] == "Job" else "PyTorchJob"
    documented = {code: row[launcher] for code, row in documented_retries(FINETUNE_DOC.read_text()).items()}
    assert kube_retries(doc) == documented, launcher
