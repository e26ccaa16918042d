"""What the self-check runs on: the tiny model (where it is, or built now), the device, and the
stack as the result records it."""

from __future__ import annotations

import sys
from pathlib import Path

from ftenv import variables
from ftenv.attention import facts
from ftenv.selfcheck import tinymodel

#: Where the image keeps the tiny model (built at image build time, read-only for the user).
IMAGE_TINY_DIR = "/opt/ftenv/tiny"


def tiny_dir(requested: str | None, workdir: Path) -> Path:
    """The tiny model to use: --tiny, $FTENV_TINY_DIR, the image's copy, or one built now."""
    for candidate in (requested, variables.read(variables.TINY_DIR), IMAGE_TINY_DIR):
        if candidate and tinymodel.is_built(candidate):
            return Path(candidate)
        if candidate and candidate == requested:
            raise FileNotFoundError(f"{candidate} holds no tiny model (build one: ftenv tinymodel DIR)")
    out = workdir / "tiny"
    print(f"building the tiny model in {out} ...", file=sys.stderr)
    tinymodel.build(out)
    return out


def pick_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no GPU")
    return requested


def environment(device: str) -> dict:
    """The stack the check ran on, in the JSON form `ftenv probe` records too."""
    return facts.read_stack(device).as_dict()
