"""The data check once per data: a passed check's report carries a fingerprint of what it read (each
manifest's and each audio file's path, size and mtime) and of the settings it judged by, so that a
requeued or rerun `ftenv finetune` with the same data and settings skips the minutes of reading it
again; anything changed checks it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from ftenv.data import chatml, paths
from ftenv.data.rules import LengthRules

FINGERPRINT, CHECKED_AT = "fingerprint", "checked_at"
#: Part of every fingerprint: raise it when the check itself changes what it finds.
CHECK_VERSION = 1


def _stat(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}\tmissing\n"
    return f"{path}\t{info.st_size}\t{info.st_mtime_ns}\n"


def _audio_paths(manifest: Path, base: Path):
    """The audio paths a manifest's lines name, as the check opens them (unreadable lines: none)."""
    with open(manifest, "rb") as fh:
        for raw in fh:
            utt = chatml.read_line(raw)
            if isinstance(utt, chatml.Utterance):
                yield paths.trainer_path(utt.audio, base)


def fingerprint(train: list[Path], valid: list[Path], rules: LengthRules, base: Path) -> str:
    """What a check of these files with these settings depends on, in one hash."""
    digest = hashlib.sha256()
    settings = {"version": CHECK_VERSION, "rules": rules.to_dict(), "base": str(base)}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for kind, files in (("train", train), ("valid", valid)):
        for manifest in files:
            digest.update(f"{kind}\t{_stat(str(manifest))}".encode())
            if manifest.is_file():
                for audio in _audio_paths(manifest, base):
                    digest.update(_stat(audio).encode("utf-8", "replace"))
    return digest.hexdigest()


def stamp(key: str) -> dict:
    """What a passed check adds to its report."""
    return {FINGERPRINT: key, CHECKED_AT: time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def unchanged_since(report: Path, key: str) -> str | None:
    """When the report's passed check was made, if it was made of the same data and settings."""
    try:
        found = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("verdict") != "ok" or found.get(FINGERPRINT) != key:
        return None
    return str(found.get(CHECKED_AT, "an earlier run"))
