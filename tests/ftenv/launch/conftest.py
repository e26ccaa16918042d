"""The work folder the launcher's tests work out `ftenv finetune` on (tests/support/finetune_launch.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import GOOD_RECORD as GOOD


@pytest.fixture
def work(tmp_path: Path, monkeypatch) -> Path:
    """A fake model dir, data with one (empty) wav, an output dir: all the launcher checks; the
    working folder, where the command line's relative paths start."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.yaml").write_text("model: FunASRNano\n")
    (tmp_path / "model/model.pt").write_bytes(b"")
    (tmp_path / "wav").mkdir()
    (tmp_path / "wav/a.wav").write_bytes(b"")
    line = json.dumps(GOOD, ensure_ascii=False)
    (tmp_path / "train.jsonl").write_text(f"{line}\n{line}\n", encoding="utf-8")
    (tmp_path / "val.jsonl").write_text(f"{line}\n", encoding="utf-8")
    return tmp_path
