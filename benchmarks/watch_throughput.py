"""Throughput of `ftenv watch` against `cat`, side by side in one run.

    .venv/bin/python benchmarks/watch_throughput.py [--lines N] [--repeat R]

Writes two logs to a temporary folder: FunASR step lines only (about 1 kB each, every line parsed:
a training log at log_interval=1) and short non-step lines (80 bytes, the fast path). For each,
times (best of R):
  cat FILE > /dev/null                                  the floor
  cat FILE | cat > /dev/null                            one extra pipe hop, what any wrapper costs
  ftenv watch --no-summary -- cat FILE > /dev/null      the watchdog (one pipe hop + parsing)
and prints lines/s and the ratio. Step times in the step log are steady (no hints), as in a healthy
run. Results are recorded in docs/watchdog.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.steplogs import GenStep, train_line

FTENV = [sys.executable, "-m", "ftenv.cli"]


def write_logs(folder: Path, n: int) -> dict[str, Path]:
    steps = folder / "steps.log"
    with open(steps, "w") as fh:
        for i in range(1, n + 1):
            s = GenStep(i % 8, i, 8 + i % 5, 300 + 4 * (i % 7), 0.011, 0.030, 0.045, 0.012)
            fh.write(train_line(s) + "\n")
    noise = folder / "noise.log"
    with open(noise, "w") as fh:
        line = ("x" * 70 + " noise\n")[-80:]
        fh.writelines(line for _ in range(n))
    return {"funasr step lines": steps, "80-byte non-step lines": noise}


def best(cmd: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, shell=True, check=True)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    watch = " ".join(FTENV) + " watch --no-summary --"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in write_logs(Path(tmp), a.lines).items():
            size = path.stat().st_size
            cat = best(f"cat {path} > /dev/null", a.repeat)
            hop = best(f"cat {path} | cat > /dev/null", a.repeat)
            w = best(f"{watch} cat {path} > /dev/null", a.repeat)
            print(f"{label}: {a.lines} lines, {size / 1e6:.0f} MB")
            for name, t in (("cat", cat), ("cat | cat", hop), ("ftenv watch -- cat", w)):
                print(f"  {name:<20} {t:7.3f} s  {a.lines / t:>12,.0f} lines/s  {size / t / 1e6:8.0f} MB/s")
            print(f"  watch / (cat | cat) time ratio: {w / hop:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
