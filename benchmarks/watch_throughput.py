"""Throughput of `ftenv watch` against `cat`, side by side in one run.

    .venv/bin/python benchmarks/watch_throughput.py [--lines N] [--repeat R] [--in-process]

Writes two logs to a temporary folder: FunASR step lines only (about 1 kB each, every line parsed:
a training log at log_interval=1) and short non-step lines (80 bytes, the fast path). For each,
times (best of R):
  cat FILE > /dev/null                                  the floor
  cat FILE | cat > /dev/null                            one extra pipe hop, what any wrapper costs
  ftenv watch --no-summary -- cat FILE > /dev/null      the watchdog (one pipe hop + parsing)
and prints lines/s and the ratio. Step times in the step log are steady (no hints), as in a healthy
run. Results are recorded in docs/benchmarks.md.

--in-process times only the watchdog's per-chunk work (line splitting, parsing, judging, the silence
clock, the traceback look-out: ftenv.watchdog.pipes.Pump._hints) on the same logs in 64 KiB chunks,
best of R, without pipes or a process start: steadier than end to end on a shared machine. It also
runs against an ftenv from before the silence alarm (PYTHONPATH=that/scripts), to compare versions.
"""

from __future__ import annotations

import argparse
import inspect
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


def in_process(path: Path, repeat: int) -> float:
    """Best time of the watchdog's per-chunk work over the file (see the module's docstring)."""
    try:
        from ftenv.watchdog import pipes
        from ftenv.watchdog.silence import Silence, SilenceLimits
        from ftenv.watchdog.slow_step_lines import SlowStepLines

        def pump(pipe):
            state = pipes.PumpState(
                SlowStepLines(settings=lambda: None), 0, "phases", Silence(SilenceLimits())
            )
            return pipes.Pump(pipe, 1, state, None)

    except ImportError:  # an ftenv from before the watchdog was split by job (ftenv.watchdog.watch)
        from ftenv.watchdog.watcher import Watcher

        from ftenv.watchdog import watch as pipes

        def pump(pipe):
            core_args = [Watcher(settings=lambda: None), 0, "phases"]
            if "silence" in inspect.signature(pipes._Core).parameters:
                core_args.append(pipes.Silence(pipes.SilenceLimits()))
            return pipes._Pump(pipe, 1, pipes._Core(*core_args), None)

    data = path.read_bytes()
    chunks = [data[i : i + pipes.CHUNK] for i in range(0, len(data), pipes.CHUNK)]
    times = []
    for _ in range(repeat):
        with open(os.devnull, "rb") as pipe:
            p = pump(pipe)
            t = time.perf_counter()
            for chunk in chunks:
                p._hints(chunk)
            times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--in-process", action="store_true", help="only the per-chunk work, no pipes")
    a = p.parse_args()
    watch = " ".join(FTENV) + " watch --no-summary --"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in write_logs(Path(tmp), a.lines).items():
            size = path.stat().st_size
            if a.in_process:
                t = in_process(path, a.repeat)
                print(f"{label}: {a.lines} lines in process: {t:.3f} s, {a.lines / t:,.0f} lines/s")
                continue
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
