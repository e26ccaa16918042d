"""The examples' scripts run here without a cluster: shellcheck on them, `docker`, `srun` and
`apptainer` replaced by recorders of their arguments, and the `ftenv finetune` command an example
runs parsed by the real parser or run as a dry run. What a script would launch is checked without
launching it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ftenv import variables
from ftenv.commands import finetune as finetune_command
from support import child_env

SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")


def finetune_args(argv: list[str]):
    """Parse an `ftenv finetune ...` argv with the real parser (unknown options fail)."""
    assert argv[:2] == ["ftenv", "finetune"], argv
    parser = argparse.ArgumentParser(exit_on_error=False)
    finetune_command.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv[1:])
    assert all(o.startswith("++") and "=" in o for o in args.overrides), args.overrides
    return args


def shellcheck(path: Path) -> subprocess.CompletedProcess:
    """shellcheck on a script, as bash."""
    return subprocess.run([SHELLCHECK, "-s", "bash", str(path)], capture_output=True, text=True)


RECORDER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps({"tool": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                        "var": os.environ.get(os.environ["WATCH_VAR"]),
                        "mellanox": os.environ.get("MELLANOX_VISIBLE_DEVICES")}) + "\\n")
"""


def record(script: Path, tools: list[str], env: dict, tmp_path: Path) -> list[dict]:
    """Run a script with env and the tools replaced by RECORDER; each call's tool, argv and values of
    the SDPA variable and of enroot's MELLANOX_VISIBLE_DEVICES, in order."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        (bin_dir / tool).write_text(RECORDER)
        (bin_dir / tool).chmod(0o755)
    rec = tmp_path / "record.jsonl"
    full = child_env(
        unset=["SLURM_*", "PET_*"],
        **{
            **{k: str(v) for k, v in env.items()},
            "PATH": f"{bin_dir}:{os.environ.get('PATH')}",
            "RECORD": str(rec),
            "WATCH_VAR": variables.SDPA_DEPRIORITIZED,
        },
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=full, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in rec.read_text().splitlines()]


def dry_run(argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an example's `ftenv finetune ...` here, with --dry-run right after `finetune`."""
    assert argv[:2] == ["ftenv", "finetune"], argv
    cmd = [sys.executable, "-m", "ftenv.cli", "finetune", "--dry-run", *argv[2:]]
    clean = child_env(unset=["SLURM_*", "PET_*", "TORCH_CUDNN*"])
    clean[variables.CUDA_VISIBLE_DEVICES] = variables.given(variables.CUDA_VISIBLE_DEVICES, env or {}) or ""
    return subprocess.run(cmd, capture_output=True, text=True, env={**clean, **(env or {})})


def split_docker_run(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """docker run [options] IMAGE COMMAND... -> (options, image, command)."""
    assert argv[0] == "run"
    i, opts = 1, []
    takes_value = {
        "--gpus",
        "--user",
        "-v",
        "--volume",
        "-e",
        "--env",
        "--shm-size",
        "--entrypoint",
        "--name",
    }
    while argv[i].startswith("-"):
        opt = argv[i]
        if opt in takes_value:
            opts += [opt, argv[i + 1]]
            i += 2
        else:
            opts.append(opt)
            i += 1
    return opts, argv[i], argv[i + 1 :]


SRUN_STANDIN = 'while [ "${1#-}" != "$1" ]; do shift; done; exec "$@"'
