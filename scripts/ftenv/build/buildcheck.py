"""`ftenv buildcheck`: fail the image build when what pip installed is not what versions.toml pins.

Run as the last build step. The expected values come from the image's ENV, which the Dockerfile
sets from build args derived from versions.toml, so a stale lock, a resolver surprise or a wrong
index all stop the build instead of shipping a different stack under the same tag.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata

from ftenv.build.versions import cudnn_int, major_minor, public


def _expected_from_env() -> dict[str, str]:
    env = os.environ
    return {
        "torch": env["PYTORCH_VERSION"],
        "torchaudio": env["TORCHAUDIO_VERSION"],
        "cuda": env["CUDA_VERSION"],
        "cudnn_package": env["CUDNN_PACKAGE"],
        "cudnn": env["CUDNN_VERSION"],
        "transformers": env["TRANSFORMERS_VERSION"],
        "funasr": env["FUNASR_VERSION"],
        "modelscope": env["MODELSCOPE_VERSION"],
    }


def mismatches(expected: dict[str, str]) -> list[str]:
    """Each difference between the expected stack and the installed one, as a readable line."""
    import torch

    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    checks = [
        ("torch", public(torch.__version__), public(expected["torch"])),
        ("torchaudio", public(installed("torchaudio")), public(expected["torchaudio"])),
        ("torch CUDA build", torch.version.cuda, major_minor(expected["cuda"])),
        (expected["cudnn_package"], installed(expected["cudnn_package"]), expected["cudnn"]),
        ("torch.backends.cudnn.version()", torch.backends.cudnn.version(), cudnn_int(expected["cudnn"])),
        ("transformers", installed("transformers"), expected["transformers"]),
        ("funasr", installed("funasr"), expected["funasr"]),
        ("modelscope", installed("modelscope"), expected["modelscope"]),
    ]
    if public(expected["torch"]) != expected["torch"]:  # an index build: the local tag (+cuNNN) must match too
        checks.append(("torch build tag", torch.__version__, expected["torch"]))
    return [
        f"{what}: installed {got}, versions.toml says {want}" for what, got, want in checks if got != want
    ]


def run(args: argparse.Namespace) -> int:
    try:
        problems = mismatches(_expected_from_env())
    except KeyError as exc:
        print(
            f"ftenv buildcheck: {exc.args[0]} is not set; run it inside an ftenv image build", file=sys.stderr
        )
        return 2
    for line in problems:
        print(f"ftenv buildcheck: MISMATCH {line}", file=sys.stderr)
    if problems:
        print("ftenv buildcheck: FAILED: fix versions.toml or run `make lock`, then rebuild", file=sys.stderr)
        return 1
    print("ftenv buildcheck: installed stack matches versions.toml", file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("buildcheck", help="fail if the installed stack differs from versions.toml")
    p.set_defaults(func=run)
