#!/usr/bin/env python3
"""How much the start-up report costs beyond `python -c "import torch"`, in the same container.

Run on the host: `python3 benchmarks/report_overhead.py [IMAGE] [--rounds N]`. It starts one
container and, inside it, alternates the two commands N times (side by side, so machine noise
hits both alike), then prints the medians, the difference and the ratio. `--inside` runs the same
comparison in the current environment (a GPU machine without the image: scripts/gpu_checks.py).
Record results in docs/benchmarks.md with the machine they ran on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "import torch": ["python3", "-c", "import torch"],
    "ftenv report": [sys.executable, "-m", "ftenv.cli", "report"],
}


def inside(rounds: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, cmd in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    base, report = (statistics.median(times[n]) for n in COMMANDS)
    for name, values in times.items():
        runs = " ".join(f"{v:.3f}" for v in values)
        print(f"{name:14s} median {statistics.median(values):.3f} s  runs: {runs}")
    print(f"report overhead beyond import torch: {report - base:+.3f} s (ratio {report / base:.2f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image", nargs="?")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--inside", action="store_true", help="measure here, not in a container")
    args = parser.parse_args()
    if args.inside:
        inside(args.rounds)
        return 0
    sys.path.insert(0, str(ROOT / "scripts"))
    from ftenv import variables
    from ftenv.stack import versions
    from imagetools.tags import image_ref

    image = args.image or image_ref(versions.load().default)
    os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "scripts/containers.conf"))
    cmd = [
        "podman",
        "run",
        "--rm",
        "--pull=never",
        "-e",
        f"{variables.REPORT}=0",
        "-v",
        f"{ROOT}/benchmarks:/bench:ro",
    ]
    cmd += [image, "python3", "/bench/report_overhead.py", "--inside", "--rounds", str(args.rounds)]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
