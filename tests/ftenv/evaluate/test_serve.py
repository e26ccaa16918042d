"""funasr-server (funasr's own OpenAI-compatible server, with the fastapi, uvicorn and
python-multipart the lock pins) serves a folder `ftenv export` wrote, offline, on the CPU, bound to
127.0.0.1: the official `openai` client's audio.transcriptions.create gets the transcript `ftenv
transcribe` prints for the same file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ftenv import cli
from ftenv.model.funasr_import import OFFLINE_ENV
from ftenv.selfcheck import tinymodel
from support import serving


@pytest.mark.slow  # the server loads the model and decodes 512 tokens of a random model (~30 s)
def test_funasr_server_answers_the_openai_client_with_ftenv_transcribes_text(tiny, tmp_path, capsys):
    base = serving.tiny_with_eos(tiny, tmp_path / "base")
    out = tmp_path / "nano-finetuned"
    assert cli.main(["export", str(base / "model.pt"), str(out), "--base", str(base)]) == 0
    shutil.rmtree(base)
    wav = sorted(tinymodel.paths(tiny).wav_dir.glob("*.wav"))[0]
    capsys.readouterr()
    assert cli.main(["transcribe", str(out), str(wav), "--device", "cpu"]) == 0
    expected = capsys.readouterr().out.rstrip("\n").split("\t", 1)[1].strip()
    assert expected
    port = serving.free_port()
    server = shutil.which("funasr-server", path=str(Path(sys.executable).parent))
    assert server, "funasr-server is not installed beside this Python"
    cmd = [server, "--model-path", str(out), "--device", "cpu", "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "server.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **OFFLINE_ENV})
        try:
            serving.wait_healthy(port, lambda: proc.poll() is None)
            got = serving.transcribe(port, wav)
        except AssertionError:
            raise AssertionError(log.read_text(errors="replace")[-3000:]) from None
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    assert got == expected
