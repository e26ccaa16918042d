"""Fixtures shared by the host tests and the container tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: Fixtures made once per pytest run (tests/support/shared_fixtures.py).
pytest_plugins = ["support.shared_fixtures"]


@pytest.fixture
def layout(tmp_path) -> dict[str, Path]:
    """A model dir and data laid out as the docs' examples expect, and an output dir.

    The files are placeholders (dry runs only read them); permissions let the image's
    non-root user read them when the folder is mounted into a container.
    """
    os.chmod(tmp_path, 0o755)
    model, data = tmp_path / "models/Fun-ASR-Nano-2512", tmp_path / "data/asr"
    model.mkdir(parents=True)
    (model / "config.yaml").write_text("model: FunASRNano\n")
    (model / "model.pt").write_bytes(b"")
    (data / "wav").mkdir(parents=True)
    (data / "wav/a.wav").write_bytes(b"")
    line = json.dumps(
        {
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": f"语音转写：<|startofspeech|>!{data}/wav/a.wav<|endofspeech|>"},
                {"role": "assistant", "content": "几点了？"},
            ],
            "speech_length": 145,
            "text_length": 3,
        },
        ensure_ascii=False,
    )
    from ftenv.data.sets import FILE_NAMES  # the names `ftenv data split` writes, as the examples use them

    for name in (FILE_NAMES["train"], FILE_NAMES["valid"]):
        (data / name).write_text(line + "\n", encoding="utf-8")
    for p in tmp_path.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return {"MODEL_DIR": model, "DATA_DIR": data, "OUT_DIR": tmp_path / "runs/out"}


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    """The tiny offline Fun-ASR-Nano (random weights) and its data, built once for the session;
    tests read it and write elsewhere."""
    from ftenv.selfcheck import tinymodel

    out = tmp_path_factory.mktemp("tiny")
    tinymodel.build(out)
    return out


@pytest.fixture(autouse=True)
def cpu_training_aid(monkeypatch):
    """On a machine without an NVIDIA driver, `ftenv finetune` refuses to train (ftenv.launch.gpu_gate)
    unless the CPU test aid is set: the tests that train the tiny model on the CPU get it, as their
    children do. Read from /proc, not torch, so that a test that never imports torch does not pay
    for it. A machine with GPUs keeps its environment. tests/ftenv/launch/test_gpu_gate.py takes the
    aid away again to see the refusal."""
    from ftenv import variables

    if not Path("/proc/driver/nvidia/gpus").is_dir():
        monkeypatch.setenv(variables.FUNASR_CPU_SHIM, "1")
