#!/usr/bin/env python3
"""Wall time of `ftenv selfcheck` (in-process and --recipe), model construction included.

Each round runs the command in a fresh process with no prebuilt tiny model (FTENV_TINY_DIR unset,
and outside the image there is no /opt/ftenv/tiny), so the time includes importing torch and
FunASR, building the tiny model, loading it, and the training steps. Inside the image, pass
--prebuilt to time the default run as users get it (the tiny model is in the image).
Prints one markdown row per mode: the median and the range over the rounds, and the verdicts.
Targets: under 3 minutes on a 2-core CPU; under 60 s on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from ftenv import variables  # noqa: E402


def once(extra: list[str], prebuilt: bool) -> tuple[float, str]:
    env = variables.environment({variables.REPORT: "0"})
    if not prebuilt:
        env.pop(variables.TINY_DIR, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SCRIPTS), os.environ.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ftenv.cli", "selfcheck", "--json", *extra],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - t0
    try:
        verdict = json.loads(proc.stdout)["verdict"]
    except (json.JSONDecodeError, KeyError):
        verdict = f"ERROR rc={proc.returncode}"
    return wall, verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prebuilt", action="store_true", help="use the image's tiny model")
    args = ap.parse_args()
    import torch

    where = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU, {os.cpu_count()} cores"
    print(f"# {platform.node()}: {where}; torch {torch.__version__}; load {os.getloadavg()[0]:.1f}")
    print("| mode | rounds | median wall | min | max | verdicts |")
    print("|---|---|---|---|---|---|")
    for name, extra in (("in-process", []), ("recipe", ["--recipe"])):
        runs = [once(extra, args.prebuilt) for _ in range(args.rounds)]
        walls = [w for w, _ in runs]
        verdicts = ", ".join(v for _, v in runs)
        print(
            f"| {name} | {len(runs)} | {statistics.median(walls):.1f} s | {min(walls):.1f} s | "
            f"{max(walls):.1f} s | {verdicts} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
