"""`python -m imagetools gpukit build|call|results`: the wheel kit for a lent GPU machine that has
torch but not FunASR (exactly the lock's packages it lacks, hash-checked), the exact call to make
there, and the results it brought back (docs/gpu-results.md). Host-side: it needs pip.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

from ftenv.attention import sdpa
from imagetools import ROOT, locks
from imagetools.gpukit import gpu_run, gpu_setup

MACHINE_FILE = Path(__file__).with_name("gpu_machine.toml")
KIT_DIR = Path(".whl")
RESULTS_DOC = ROOT / "docs" / "gpu-results.md"
RESULTS_HEADING = "## Results"
#: The GPU machine's call: time for the whole run plus its own start-up and the copy of OUT.
CALL_MARGIN_S = 60
MIB = 1024 * 1024


def machine() -> dict:
    return tomllib.loads(MACHINE_FILE.read_text())


def target_environment(python: str) -> dict[str, str]:
    """The marker environment of a CPython `python` ("3.12") on Linux x86-64."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
    }


def kit_entries(python: str, present: set[str], lock: Path = gpu_run.LOCK) -> list[dict]:
    """The lock's entries for `python` on Linux x86-64 whose package is not in `present`."""
    env = target_environment(python)
    kit = []
    for entry in locks.requirements(lock.read_text()):
        _, _, marker = entry["requirement"].partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(env):
            continue
        if entry["name"] not in present:
            kit.append(entry)
    return kit


def find_python(version: str) -> str | None:
    """An interpreter of that version here, to build wheels from sources (None if there is none)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")))
    for exe in filter(None, candidates):
        found = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True
        )
        if found.returncode == 0 and found.stdout.decode().strip() == version:
            return exe
    return None


def pip(python: str, *args: str | Path) -> None:
    subprocess.run([python, "-m", "pip", *map(str, args)], check=True)


def build(dest: Path, python: str, present: set[str], platforms: list[str], limit_mib: float) -> list[Path]:
    """Download (hash-checked) and build the kit into dest; return its wheels. Raises SystemExit."""
    entries = kit_entries(python, present)
    dest.mkdir(parents=True, exist_ok=True)
    for old in [*dest.glob("*.whl"), *dest.glob("*.tar.gz"), *dest.glob("*.zip")]:
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="gpukit-") as tmp:
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text(
            "".join(
                f"{e['name']}=={e['version']} " + " ".join(f"--hash={h}" for h in e["hashes"]) + "\n"
                for e in entries
            )
        )
        downloads = Path(tmp) / "downloads"
        args = ["download", "-q", "--no-deps", "--prefer-binary", "-d", str(downloads), "-r", str(reqs)]
        pip(sys.executable, *args, *locks.wheels_for(python, platforms))
        sources = []
        for path in sorted(downloads.iterdir()):
            if path.suffix == ".whl":
                shutil.move(path, dest / path.name)
            else:
                sources.append(path)
        if sources:
            build_sources(sources, Path(tmp) / "built", dest, python)
    wheels = sorted(dest.glob("*.whl"))
    problems = verify(wheels, entries, present, limit_mib)
    if problems:
        raise SystemExit("gpukit: the kit is wrong:\n  " + "\n  ".join(problems))
    return wheels


def build_sources(sources: list[Path], work: Path, dest: Path, python: str) -> None:
    """Turn the packages published only as sources into wheels for the GPU machine's Python.

    All in one pip call here (this environment's setuptools, no isolated build environments to
    fetch); a wheel that comes out compiled for this Python is built again with the target one.
    """
    pip(sys.executable, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work), *sources)
    by_name = {canonicalize_name(parse_sdist_filename(s.name)[0]): s for s in sources}
    for wheel in sorted(work.glob("*.whl")):
        if wheel.name.endswith("-none-any.whl"):
            shutil.move(wheel, dest / wheel.name)
            continue
        source = by_name[canonicalize_name(parse_wheel_filename(wheel.name)[0])]
        builder = find_python(python)
        if not builder:
            raise SystemExit(
                f"gpukit: {source.name} builds a compiled wheel ({wheel.name}) and there is no Python "
                f"{python} here to build it for the GPU machine: install one (pyenv, uv or apt)"
            )
        if builder == sys.executable:
            shutil.move(wheel, dest / wheel.name)
        else:
            pip(builder, "wheel", "-q", "--no-deps", "-w", str(dest), str(source))


def verify(wheels: list[Path], entries: list[dict], present: set[str], limit_mib: float) -> list[str]:
    """What is wrong with a kit: a package the machine has, a missing or extra one, its weight."""
    got = {}
    for w in wheels:
        name, version, *_ = parse_wheel_filename(w.name)
        got.setdefault(canonicalize_name(name), []).append(str(version))
    want = {e["name"]: e["version"] for e in entries}
    problems = [f"{n}: the GPU machine has it already; carry none" for n in sorted(set(got) & present)]
    problems += [f"{n}: two versions {v}" for n, v in sorted(got.items()) if len(v) > 1]
    problems += [f"{n}=={v}: no wheel" for n, v in sorted(want.items()) if n not in got]
    problems += [
        f"{n}: wheel {got[n][0]}, lock {v}" for n, v in sorted(want.items()) if n in got and got[n][0] != v
    ]
    problems += [f"{n}: not in the lock" for n in sorted(set(got) - set(want) - present)]
    size = sum(w.stat().st_size for w in wheels) / MIB
    if size > limit_mib:
        problems.append(f"{size:.1f} MiB, over the {limit_mib} MiB the GPU machine's call can carry")
    return problems


def try_install(wheels: list[Path], python: str) -> str:
    """Install the kit with the GPU machine's own pip command into a scratch folder, if we can."""
    exe = find_python(python)
    if not exe:
        return f"not tried: no Python {python} here"
    with tempfile.TemporaryDirectory(prefix="gpukit-site-") as site:
        cmd = gpu_setup.install_command(exe, site, wheels)
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"gpukit: the kit does not install on Python {python}:\n{proc.stderr}")
    return f"installs on Python {python} ({exe}) with pip --no-index --no-deps --target"


def run_call() -> dict:
    """The GPU machine's call, exactly: what `make gpu-kit` prints and docs/gpu-results.md shows."""
    return {
        "command": f'python3 scripts/gpu_checks.py --wheels {KIT_DIR} --out "$OUT"',
        "carry": [str(KIT_DIR)],
        "timeout_s": gpu_run.TOTAL_BUDGET_S + CALL_MARGIN_S,
    }


def call_text() -> str:
    c = run_call()
    return f"command:   {c['command']}\ncarry:     {json.dumps(c['carry'])}\ntimeout_s: {c['timeout_s']}"


# --- results -----------------------------------------------------------------------------------


def render_results(summary: dict) -> str:
    """One GPU run's part of the Results section, from its summary.json. Raises SystemExit for a run
    with no GPU."""
    gpu = summary.get("gpu")
    if not gpu:
        raise SystemExit(
            "gpukit results: this run saw no GPU (a CPU rehearsal), so it is no GPU result; "
            "nothing written. Run scripts/gpu_checks.py on a GPU machine (see docs/gpu-results.md)."
        )
    f = summary["facts"]
    sm = "sm_{}{}".format(*gpu["sm"])
    cudnn = sdpa.cudnn_name(f.get("cudnn_version"))
    lines = [
        "<!-- quoted: the environment this run had (not the current pins) -->",
        f"### {summary.get('date', 'date unknown')}: {gpu['name']} ({sm})",
        "",
        f"GPU {gpu['name']} ({sm}), driver {f.get('driver_version') or 'unknown'}, torch "
        f"{f.get('torch_version')} (CUDA {f.get('torch_cuda')}), cuDNN {cudnn}, transformers "
        f"{f.get('transformers_version')}, funasr {f.get('funasr_version')}, Python {summary.get('python')}. "
        f"`scripts/gpu_checks.py` ran in {summary['total_seconds']:.0f} s "
        f"(budget {summary['budget_seconds']} s).",
        "",
        gpu_run.render_table([gpu_run.Result(**s) for s in summary["steps"]]),
        "<!-- /quoted -->",
        "",
    ]
    return "\n".join(lines)


#: What the Results section says before any GPU run; the first run replaces it.
NO_RESULTS = "None yet."


def write_results(doc: Path, run: str) -> None:
    """Put one run at the top of the doc's Results section, newest first, keeping earlier runs
    (a later partial run, `--only STEP`, must not erase a full one)."""
    text = doc.read_text()
    head, sep, rest = text.partition(f"\n{RESULTS_HEADING}\n")
    if not sep:
        raise SystemExit(f"gpukit results: {doc} has no '{RESULTS_HEADING}' heading to write under")
    body, nxt, tail = rest.partition("\n## ")
    earlier = body.strip().removeprefix(NO_RESULTS).strip()
    section = f"\n{run.rstrip()}\n" + (f"\n{earlier}\n" if earlier else "")
    doc.write_text(f"{head}\n{RESULTS_HEADING}\n{section}" + (f"\n## {tail}" if nxt else ""))


# --- command line ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if args.action == "call":
        print(call_text())
        return 0
    if args.action == "results":
        path = Path(args.out) / "summary.json"
        if not path.is_file():
            raise SystemExit(f"gpukit results: {path} not found: give the folder gpu_checks.py wrote")
        section = render_results(json.loads(path.read_text()))
        if args.write:
            write_results(Path(args.write), section)
            print(f"added the run to the Results section of {args.write}")
        else:
            print(section)
        return 0
    m = machine()
    python = args.python or m["python"]
    present = {canonicalize_name(n) for n in m["packages"]}
    wheels = build(Path(args.dest), python, present, m["platforms"], m["kit_limit_mib"])
    size = sum(w.stat().st_size for w in wheels) / MIB
    print(f"gpukit: {len(wheels)} wheels, {size:.1f} MiB in {args.dest} for CPython {python} x86_64")
    print(f"gpukit: {try_install(wheels, python)}")
    print("gpukit: the call to make on the GPU machine (docs/gpu-results.md):")
    print(call_text())
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("gpukit", help="wheel kit, call and results of the GPU machine's run")
    acts = p.add_subparsers(dest="action", required=True)
    b = acts.add_parser("build", help="build the wheel kit for the lent GPU machine")
    b.add_argument("--dest", default=str(KIT_DIR), help=f"kit folder (default {KIT_DIR})")
    b.add_argument("--python", help="target Python X.Y (default: the GPU machine's)")
    acts.add_parser("call", help="print the GPU machine's call (command, carry, timeout)")
    r = acts.add_parser("results", help="one run for docs/gpu-results.md's Results, from a run's folder")
    r.add_argument("out", help="the folder scripts/gpu_checks.py wrote ($OUT)")
    r.add_argument(
        "--write", nargs="?", const=str(RESULTS_DOC), help="add the run to this doc's Results, newest first"
    )
    p.set_defaults(func=run)
