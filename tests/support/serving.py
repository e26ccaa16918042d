"""funasr-server (funasr's OpenAI-compatible server) asked by the official `openai` client, for the
host test (tests/ftenv/evaluate/test_serve.py) and the image's (tests/container/test_serve_image.py)."""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import yaml

from ftenv.selfcheck import tinymodel

#: The model name funasr-server gives the folder of --model-path (its /v1/models lists it).
MODEL = "custom"


def tiny_with_eos(tiny: Path, dest: Path) -> Path:
    """The tiny model folder with its decoder's config.json naming the tokenizer's end token, as
    Qwen3-0.6B's does: FunASR's own decoding (AutoModel, so funasr-server) stops at the config's eos
    only, where `ftenv transcribe` also stops at the tokenizer's."""
    p = tinymodel.paths(tiny)
    dest.mkdir(parents=True)
    shutil.copy2(p.model_pt, dest / "model.pt")
    shutil.copytree(p.llm_dir, dest / p.llm_dir.name)
    tok = json.loads((p.llm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    eos = next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|im_end|>")
    config = json.loads((p.llm_dir / "config.json").read_text(encoding="utf-8"))
    (dest / p.llm_dir.name / "config.json").write_text(
        json.dumps({**config, "eos_token_id": eos}), encoding="utf-8"
    )
    conf = yaml.safe_load(p.config.read_text(encoding="utf-8"))
    conf["llm_conf"]["init_param_path"] = p.llm_dir.name
    conf["tokenizer_conf"]["init_param_path"] = p.llm_dir.name
    (dest / "config.yaml").write_text(yaml.safe_dump(conf, sort_keys=False), encoding="utf-8")
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, alive, seconds: float = 300) -> None:
    """Until /health answers; AssertionError when the server stopped (alive() False) or never did."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert alive(), "funasr-server stopped before it answered /health"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"funasr-server did not answer /health within {seconds:.0f} s")


def transcribe(port: int, wav: Path) -> str:
    """The transcript funasr-server returns to the official client's audio.transcriptions.create."""
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="not-needed")  # a placeholder
    with open(wav, "rb") as audio:
        return client.audio.transcriptions.create(model=MODEL, file=audio).text
