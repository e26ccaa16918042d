"""The `docker run` examples of docs/examples/docker/, run as written against the built image.

There is no Docker daemon here: each script runs with a `docker` on PATH that hands the same
arguments to `podman run --pull=never`, minus `--gpus` (no GPU here), plus `--dry-run` right after
`ftenv finetune` (checks the mounted model, data and output as seen inside the container, prints
the torchrun command, trains nothing). A typo in an example's flags, mounts or ftenv arguments fails
here; so does a baked variable that disagrees with what the docs say.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import ROOT

EXAMPLES = ROOT / "docs/examples/docker"
VAR = "TORCH_CUDNN_SDPA_DEPRIORITIZED"

DOCKER_TO_PODMAN = """#!/usr/bin/env python3
import os, shlex, sys
args = sys.argv[1:]
assert args[0] == "run", args
out, i = ["podman", "run", "--pull=never"], 1
while i < len(args):
    if args[i] == "--gpus":
        i += 2
        continue
    if args[i].startswith("--gpus="):
        i += 1
        continue
    out.append(args[i])
    i += 1
k = out.index("finetune") + 1
if os.environ.get("FTENV_TEST_RUN"):  # a real run: extra options after `finetune`, overrides at the end
    out[k:k] = shlex.split(os.environ.get("FTENV_TEST_OPTIONS", ""))
    out += shlex.split(os.environ.get("FTENV_TEST_OVERRIDES", ""))
    out[2:2] = shlex.split(os.environ.get("FTENV_TEST_PODMAN", ""))
else:
    out.insert(k, "--dry-run")
os.execvp("podman", out)
"""


def run_example(
    script: Path, image: str, layout: dict, tmp_path: Path, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(DOCKER_TO_PODMAN)
    (bin_dir / "docker").chmod(0o755)
    env = {
        **os.environ,
        **{k: str(v) for k, v in layout.items()},
        "IMAGE": image,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        **(extra_env or {}),
    }
    return subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("finetune-one-gpu.sh", "1"), ("finetune-cudnn-on.sh", "0")],
)
def test_docker_example_dry_runs_in_the_image(image, layout, tmp_path, name, value):
    proc = run_example(EXAMPLES / name, image, layout, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "== ftenv report" in proc.stderr, "the entrypoint's report should run first"
    meaning = {"1": "cuDNN attention is not moved to the front", "0": "explicitly asks torch to prefer"}[
        value
    ]
    assert f"ftenv finetune: {VAR}={value}: {meaning}" in proc.stderr
    argv = proc.stdout.split()
    assert argv[0].startswith("/opt/venv/bin/python") and argv[1:3] == ["-m", "ftenv.launch.runlife.torchrun"]
    assert "ftenv.trainer.funasr_entry" in argv
    assert f"++model={layout['MODEL_DIR']}" in argv and f"++output_dir={layout['OUT_DIR']}" in argv
    assert "--nproc_per_node" in argv and argv[argv.index("--nproc_per_node") + 1] == "1"


def test_all_gpus_example_asks_for_gpus_when_there_are_none(image, layout, tmp_path):
    proc = run_example(EXAMPLES / "finetune-all-gpus.sh", image, layout, tmp_path)
    # Everything up to the GPU count worked: mounts, entrypoint, argument parsing, input checks.
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "ftenv finetune: no GPU visible" in proc.stderr


def test_a_typo_in_an_example_fails_in_the_image(image, layout, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    text = (EXAMPLES / "finetune-one-gpu.sh").read_text().replace('-v "$DATA_DIR:$DATA_DIR:ro"', "")
    (broken / "finetune-one-gpu.sh").write_text(text)
    proc = run_example(broken / "finetune-one-gpu.sh", image, layout, tmp_path)
    assert proc.returncode == 2
    assert f"train data {layout['DATA_DIR']}/train.jsonl does not exist" in proc.stderr


def test_one_gpu_example_trains_the_tiny_model_in_the_image_on_the_cpu(image, tmp_path_factory, tmp_path):
    """The example's own command line, really training: the tiny random Fun-ASR-Nano built here,
    mounted as the example mounts a real one, one epoch on the CPU through ftenv finetune, torchrun,
    the watchdog and FunASR's funasr-train-ds (through `python -m ftenv.trainer.funasr_entry` with
    FTENV_FUNASR_CPU_SHIM=1, which maps the trainer's hard-coded CUDA calls to the CPU), until the
    checkpoint is written."""
    from ftenv.selfcheck import tinymodel

    base = tmp_path_factory.mktemp("tinyrun")
    os.chmod(base, 0o755)
    tiny = tinymodel.build(base / "model")
    for p in base.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    layout = {"MODEL_DIR": tiny.root, "DATA_DIR": tiny.train_jsonl.parent, "OUT_DIR": base / "out"}
    proc = run_example(
        EXAMPLES / "finetune-one-gpu.sh",
        image,
        layout,
        tmp_path,
        {
            "FTENV_TEST_RUN": "1",
            "FTENV_TEST_PODMAN": "-e FTENV_FUNASR_CPU_SHIM=1",
            "FTENV_TEST_OVERRIDES": "++train_conf.max_epoch=1 ++device=cpu ++dataset_conf.batch_size=400 "
            "++dataset_conf.num_workers=0",
        },
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "[ftenv-watch] SUMMARY:" in out and "train, rank: 0, epoch: 0/1" in out
    # The entrypoint printed the report; ftenv finetune (FTENV_REPORT_SHOWN=1) did not print it again.
    assert out.count("== ftenv report:") == 1, out[-6000:]
    assert (base / "out/model.pt").is_file() and (base / "out/model.pt.ep1").is_file()
