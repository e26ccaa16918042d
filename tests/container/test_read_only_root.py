"""The image as enroot/pyxis start it: a read-only root filesystem with a tmpfs on /tmp, and the job
user's own uid AND gid (12345:12345 here, so neither HOME's owner nor group 0). Kubernetes'
`readOnlyRootFilesystem: true` with `runAsGroup`, and `docker run --read-only --user "$(id -u):$(id -g)"`,
are the same case. `ftenv finetune` (the CPU shim, the tiny model, to a checkpoint), `ftenv selfcheck`
and `ftenv selfcheck --compile` must succeed writing only under the output dir and /tmp.

What proves "only there": the root filesystem is read-only with podman's extra tmpfs mounts off
(`--read-only-tmpfs=false`), so the only writable places are /tmp, /out and /dev/shm (the engine's
shared memory); test_only_tmp_and_the_output_dir_are_writable shows that holds, so any other write
fails (and a run that needs it fails), and one that is skipped silently leaves nothing behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftenv import variables
from support.read_only_root import CACHE_LINE, read_only

USER = "12345:12345"
TINY = "/opt/ftenv/tiny"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    os.chmod(d, 0o777)  # the container's uid 12345 writes it
    return d


def test_only_tmp_and_the_output_dir_are_writable(run, out):
    places = "/ /workspace /home/ftenv /var/tmp /run /tmp /out"
    probe = f"for d in {places}; do touch $d/.w 2>/dev/null && echo $d; done"
    r = run("sh", "-c", probe, user=USER, env={"FTENV_REPORT": "0"}, extra=read_only(out))
    assert r.stdout.split() == ["/tmp", "/out"], r.stdout + r.stderr


def test_finetune_trains_to_a_checkpoint(run, out):
    r = run(
        "ftenv", "finetune", "--model-dir", TINY, "--train", f"{TINY}/data/train.jsonl",
        "--valid", f"{TINY}/data/valid.jsonl", "--output-dir", "/out/run", "--gpus-per-node", "1",
        "++train_conf.max_epoch=1", "++device=cpu", "++dataset_conf.batch_size=400",
        "++dataset_conf.num_workers=0",
        user=USER, env={variables.FUNASR_CPU_SHIM: "1"}, extra=read_only(out),
    )  # fmt: skip
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-6000:]
    assert (out / "run/model.pt").is_file() and (out / "run/model.pt.ep1").is_file(), log[-3000:]
    # Hydra's record of the run is under the output dir, not in the working directory.
    assert list((out / "run/hydra").glob("*/*/.hydra/overrides.yaml")), sorted(out.rglob("*"))
    assert len(CACHE_LINE.findall(log)) == 1, log[:3000]


def test_selfcheck_passes(run, out):
    r = run("ftenv", "selfcheck", user=USER, extra=read_only(out))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert r.stdout.strip().splitlines()[-1].startswith("PASS"), r.stdout[-3000:]
    assert len(CACHE_LINE.findall(r.stderr)) == 1, r.stderr[-3000:]
    assert not any(out.iterdir()), "the self-check writes only to its temporary folder"


def test_compiled_selfcheck_passes(compiled_selfcheck):
    """--compile, with Inductor's cache set under HOME (conftest.py's run, shared with
    test_selfcheck_image.py): the caches move to /tmp, nothing is written elsewhere."""
    r, out = compiled_selfcheck
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert json.loads(r.stdout)["verdict"] == "PASS", r.stdout[-3000:]
    assert len(CACHE_LINE.findall(r.stderr)) == 1, r.stderr[-3000:]
    assert not any(out.iterdir()), "the self-check writes only to its temporary folder"
