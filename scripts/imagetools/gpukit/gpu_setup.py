"""The GPU kit's first steps (scripts/gpu_checks.py): install the kit's wheels, read the machine
(GPU, driver, stack) and check the stack against the lock. Standard library and ftenv's pure
modules only: `--check-stack` runs on a bare python3."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from ftenv.attention import sdpa
from imagetools import locks
from imagetools.gpukit.gpu_run import (
    FUNASR_SCRIPT,
    LOCK,
    SCRIPTS,
    Context,
    Result,
    ended,
    ftenv,
    json_tail,
    run_logged,
)


def install_command(python: str, site: str | Path, wheels: list[Path]) -> list[str]:
    """How the GPU machine installs the kit: its wheels only (nothing fetched, no dependency
    resolved), into a folder of their own; `gpukit build` tries the same command here."""
    cmd = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    return [*cmd, "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)]


def step_install(ctx: Context, wheels: Path | None, site: Path) -> Result:
    r = Result("install", "the kit's wheels installed with pip --no-index --no-deps --target")
    if wheels is None:
        r.expected, r.got, r.ok = "no kit given: the stack as found", "nothing to install", True
        return r
    files = sorted(wheels.glob("*.whl"))
    if not files:
        r.got, r.ok = f"no .whl in {wheels}: build the kit with `make gpu-kit`", False
        return r
    rc, output = run_logged(ctx, "install", install_command(sys.executable, site, files), 90)
    r.ok = rc == 0
    r.got = f"{len(files)} wheels installed" if r.ok else ended(rc, output)
    r.data = {"wheels": [f.name for f in files]}
    return r


def step_environment(ctx: Context) -> Result:
    r = Result("environment", "GPU, driver, torch, cuDNN, transformers, funasr read")
    rc, output = run_logged(ctx, "environment", ftenv("report", "--json", "--no-gpu-probe"), 60)
    facts = json_tail(output).get("facts", {})
    listed = 0  # GPUs the driver lists: the report must see as many, or every GPU step is skipped
    if shutil.which("nvidia-smi"):
        run_logged(ctx, "nvidia-smi", ["nvidia-smi"], 20)
        _, names = run_logged(ctx, "nvidia-smi -L", ["nvidia-smi", "-L"], 20)
        listed = len(re.findall(r"^GPU \d+:", names, flags=re.M))
    run_logged(ctx, "pip list", [sys.executable, "-m", "pip", "list", "--format=freeze"], 30)
    ctx.facts = facts
    gpus = facts.get("gpus") or []
    ctx.gpu = gpus[0] | {"driver": facts.get("driver_version")} if gpus else None
    r.ok = rc == 0 and bool(facts.get("torch_version")) and len(gpus) >= listed
    gpu = f"{ctx.gpu['name']} ({sdpa.sm_name(tuple(ctx.gpu['sm']))})" if ctx.gpu else "no GPU"
    if len(gpus) < listed:
        gpu = f"{gpu} read by ftenv report, but nvidia-smi lists {listed}"
    r.got = (
        f"{gpu}, driver {facts.get('driver_version') or 'none'}, torch {facts.get('torch_version')}, "
        f"cuDNN {sdpa.cudnn_name(facts.get('cudnn_version'))}, transformers "
        f"{facts.get('transformers_version')}, funasr {facts.get('funasr_version')}"
        if facts
        else ended(rc, output)
    )
    r.data = {"facts": facts, "python": sys.version.split()[0]}
    return r


def step_stack(ctx: Context) -> Result:
    r = Result("stack", f"every package of {LOCK.name} importable; FunASR's {FUNASR_SCRIPT} found")
    rc, output = run_logged(
        ctx, "stack", [sys.executable, str(SCRIPTS / "gpu_checks.py"), "--check-stack"], 90
    )
    data = json_tail(output)
    r.ok = rc == 0 and not data.get("problems")
    # For the record only: the machine's own packages may disagree among themselves.
    _, pip_check = run_logged(ctx, "pip check", [sys.executable, "-m", "pip", "check"], 30)
    r.data = data | {"pip_check": pip_check.strip().splitlines()[-50:]}
    if data:
        r.got = (
            "; ".join(data["problems"])
            if data["problems"]
            else (
                f"{data['present']} packages present ({len(data['other_versions'])} in the machine's "
                "own versions), funasr imports"
            )
        )
    else:
        r.got = ended(rc, output)
    return r


def check_stack() -> int:
    """Run in a child process (the kit on its path): is the locked stack there and usable?"""
    from importlib import metadata

    problems, other, missing = [], {}, 0
    reqs = lock_requirements(LOCK)
    for name, version in reqs.items():
        try:
            got = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} missing (not on this machine, not in the kit)")
            missing += 1
            continue
        if got.split("+")[0] != version:
            other[name] = f"{version} locked, {got} here"
    try:
        (entry,) = metadata.entry_points(group="console_scripts", name=FUNASR_SCRIPT)
        entry.load()
    except Exception as exc:  # any import failure is the finding
        problems.append(f"{FUNASR_SCRIPT}'s code does not import: {type(exc).__name__}: {exc}")
    if not shutil.which(FUNASR_SCRIPT):
        problems.append(f"{FUNASR_SCRIPT} is not on PATH (the recipe self-check runs it)")
    print(json.dumps({"present": len(reqs) - missing, "problems": problems, "other_versions": other}))
    return 1 if problems else 0


def lock_requirements(path: Path) -> dict[str, str]:
    """{name: version} of the lock's entries whose marker holds for the running Python."""
    from packaging.requirements import Requirement

    reqs = {}
    for entry in locks.requirements(path.read_text()):
        marker = Requirement(entry["requirement"]).marker
        if marker is None or marker.evaluate():
            reqs[entry["name"]] = entry["version"]
    return reqs
