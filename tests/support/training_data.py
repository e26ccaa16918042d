"""Training data made here for the data tests: tiny generated WAVs, ChatML manifest lines that point
at them, and FunASR's own dataset class built on the tiny model as its trainer builds it, so that
what the checks accept is what FunASR loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile

from ftenv.selfcheck import tinymodel
from support import GOOD_RECORD

RATE = 16000


def wav(path: Path, seconds: float, rate: int = RATE, fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(str(path), (0.1 * np.sin(2 * np.pi * 220 * t)).astype("float32"), rate, format=fmt)
    return path


def line(
    audio: Path | str, text: str = "ni hao", speech_length: int | None = None, text_length: int = 2
) -> str:
    item = json.loads(json.dumps(GOOD_RECORD))
    item["messages"][1]["content"] = f"语音转写：<|startofspeech|>!{audio}<|endofspeech|>"
    item["messages"][2]["content"] = text
    item["speech_length"] = speech_length if speech_length is not None else 100
    item["text_length"] = text_length
    return json.dumps(item, ensure_ascii=False)


def funasr_dataset(tiny: Path, jsonl: Path, is_training: bool = True, **conf):
    """FunASR's Fun-ASR dataset on the tiny model, built as funasr-train-ds builds it."""
    import yaml

    tables = tinymodel.quiet_funasr_import()
    cfg = yaml.safe_load(tinymodel.paths(tiny).config.read_text())
    tokenizer = tables.tokenizer_classes.get(cfg["tokenizer"])(**cfg["tokenizer_conf"])
    frontend = tables.frontend_classes.get(cfg["frontend"])(**cfg["frontend_conf"])
    dataset_cls = tables.dataset_classes.get(cfg["dataset"])
    dataset_conf = {**cfg["dataset_conf"], **conf}
    return dataset_cls(
        str(jsonl), frontend=frontend, tokenizer=tokenizer, is_training=is_training, **dataset_conf
    )
