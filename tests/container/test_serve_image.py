"""Served from the image: `IMAGE funasr-server --model-path /srv/models/nano-finetuned` on a folder
`ftenv export` wrote, as an arbitrary uid, published on 127.0.0.1 only, answers the official `openai`
client (outside the container) with the transcript `ftenv transcribe` prints for the same file."""

from __future__ import annotations

import os
import shutil
import subprocess

from support import serving

SRV = "/srv/models"
TINY = "/opt/ftenv/tiny"
USER = "4242:0"


def test_funasr_server_in_the_image_answers_the_openai_client(run, image, tiny, tmp_path):
    models = tmp_path / "models"
    serving.tiny_with_eos(tiny, models / "base")
    os.chmod(models, 0o777)
    for p in [models, *models.rglob("*")]:
        os.chmod(p, 0o777 if p.is_dir() else 0o666)
    mount = ["-v", f"{models}:{SRV}:z"]
    wav = sorted((tiny / "data" / "wav").glob("*.wav"))[0]
    shutil.copy2(wav, models / "a.wav")
    export = f"ftenv export {SRV}/base/model.pt {SRV}/nano-finetuned --base {SRV}/base"
    done = run("bash", "-c", export, user=USER, extra=mount)
    assert done.returncode == 0, done.stderr
    said = run(
        "ftenv",
        "transcribe",
        f"{SRV}/nano-finetuned",
        f"{SRV}/a.wav",
        "--device",
        "cpu",
        user=USER,
        extra=mount,
    )
    assert said.returncode == 0, said.stderr
    expected = said.stdout.strip().splitlines()[-1].split("\t", 1)[1].strip()
    port = serving.free_port()
    name = f"ftenv-serve-{port}"
    cmd = ["podman", "run", "-d", "--rm", "--pull=never", "--name", name, "--user", USER,
           "-p", f"127.0.0.1:{port}:8000", *mount, image,
           "funasr-server", "--model-path", f"{SRV}/nano-finetuned", "--device", "cpu"]  # fmt: skip
    started = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr

    def alive() -> bool:
        state = subprocess.run(
            ["podman", "inspect", "-f", "{{.State.Running}}", name], capture_output=True, text=True
        )
        return state.stdout.strip() == "true"

    try:
        serving.wait_healthy(port, alive)
        assert serving.transcribe(port, models / "a.wav") == expected
    except AssertionError:
        logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True)
        raise AssertionError((logs.stdout + logs.stderr)[-3000:]) from None
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, timeout=120)
