"""Throughput of `ftenv data check` on a generated manifest, header reads included.

    .venv/bin/python benchmarks/data_check_throughput.py [--lines N] [--files F] [--jobs J]

Writes F distinct short WAVs (0.1 s, 16 kHz, PCM 16) and an N-line ChatML manifest that uses
them in turn (F < N: the later uses are duplicates, which the check also looks for) into a
temporary folder, then times `ftenv data check --jobs J MANIFEST` end to end (a fresh process:
imports, every line decoded and parsed, every audio file opened and its header read, the length
rules, the JSON report) and prints lines/s. The files were just written, so their headers come
from the page cache, as on a warm data disk. Target (docs/benchmarks.md): 100,000 lines in under
a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from ftenv import outcome, variables  # noqa: E402
from ftenv.data import chatml  # noqa: E402


def write_data(folder: Path, lines: int, files: int) -> Path:
    audio = folder / "wav"
    audio.mkdir()
    samples = (0.1 * np.sin(np.arange(1600) / 5)).astype("float32")
    for i in range(files):
        soundfile.write(str(audio / f"u{i:06d}.wav"), samples, 16000, subtype="PCM_16")
    manifest = folder / "train.jsonl"
    with open(manifest, "w", encoding="utf-8") as fh:
        for i in range(lines):
            item = chatml.record(f"u{i:06d}", f"{audio}/u{i % files:06d}.wav", "ni hao shi jie", 10, 4)
            fh.write(chatml.dumps(item) + "\n")
    return manifest


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=100_000)
    p.add_argument("--files", type=int, help="distinct audio files (default: one per line)")
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args()
    files = a.files or a.lines
    with tempfile.TemporaryDirectory(prefix="ftenv-data-bench-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        manifest = write_data(folder, a.lines, files)
        made = time.perf_counter() - t
        env = variables.environment({"PYTHONPATH": str(ROOT / "scripts")})
        cmd = [sys.executable, "-m", "ftenv.cli", "data", "check", "--jobs", str(a.jobs)]
        cmd += ["--output-dir", str(folder), str(manifest)]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        took = time.perf_counter() - t
        report = json.loads((folder / "data-check.json").read_text())
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"data: {a.lines} lines, {files} distinct WAVs (written in {made:.1f} s)")
    print(
        f"ftenv data check --jobs {a.jobs}: {took:.1f} s, {a.lines / took:,.0f} lines/s, "
        f"exit {proc.returncode}, {report['errors']} errors, {report['warnings']} warnings"
    )
    return 0 if proc.returncode == 0 else outcome.EXIT[outcome.FAIL]


if __name__ == "__main__":
    sys.exit(main())
