"""`ftenv buildcheck`, the image build's last step: fail when what pip installed is not what
versions.toml pins, or when torch.compile could not work, so that a different stack never ships
under the same tag.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from importlib import metadata
from pathlib import Path

from ftenv import outcome, variables
from ftenv.stack.versions import cudnn_int, major_minor, public

#: Each part of the stack and the variable of the image build that declares its version (the base
#: image's ENV, or the Dockerfile's ARG of the same name).
DECLARED = {
    "torch": "PYTORCH_VERSION",
    "torchaudio": "TORCHAUDIO_VERSION",
    "cuda": "CUDA_VERSION",
    "cudnn_package": "CUDNN_PACKAGE",
    "cudnn": "CUDNN_VERSION",
    "transformers": "TRANSFORMERS_VERSION",
    "funasr": "FUNASR_VERSION",
    "modelscope": "MODELSCOPE_VERSION",
}


def _expected_from_env() -> dict[str, str]:
    """The declared versions; KeyError names the first variable that is not set."""
    expected = {part: os.environ.get(name) for part, name in DECLARED.items()}
    if missing := next((DECLARED[part] for part, value in expected.items() if value is None), None):
        raise KeyError(missing)
    return expected


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
    if (
        public(expected["torch"]) != expected["torch"]
    ):  # an index build: the local tag (+cuNNN) must match too
        checks.append(("torch build tag", torch.__version__, expected["torch"]))
    return [
        f"{what}: installed {got}, versions.toml says {want}" for what, got, want in checks if got != want
    ]


#: A tiny dynamic-shape compile on the CPU: Inductor generates C++, builds it with the C++ compiler
#: (CXX, else g++) against Python's headers, and the result must match eager.
_INDUCTOR_CPU_SNIPPET = """
import torch
def f(x):
    return torch.nn.functional.silu(x) * 2 + x.sum(-1, keepdim=True)
compiled = torch.compile(f, dynamic=True)
for n in (3, 7):
    x = torch.randn(n, 5)
    torch.testing.assert_close(compiled(x), f(x))
"""


def _error_line(stderr: str) -> str:
    """The line of a failed compile's output that says what failed (not the traceback's hints)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() and "TORCHDYNAMO_VERBOSE" not in line]
    return (errors or lines or ["no output"])[-1][:300]


def compile_problems(timeout_s: float = 600) -> list[str]:
    """What stops torch.compile (`ftenv finetune --compile`) from working here, as readable lines:
    Inductor's CPU path must compile and run a tiny function, and the C compiler Triton uses on a
    GPU (CC, else gcc, else clang) must build an extension that includes Python.h, as Triton's
    launcher does. Both run with fresh caches, so nothing cached hides a missing compiler."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="ftenv-buildcheck-") as tmp:
        # TMPDIR too: Inductor keeps its precompiled headers (~120 MB) under the temp dir, not the
        # cache dir, and none of it may stay in the image.
        env = variables.environment(
            {variables.TORCHINDUCTOR_CACHE_DIR: str(Path(tmp) / "inductor"), "TMPDIR": tmp}
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _INDUCTOR_CPU_SNIPPET],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            if proc.returncode != 0:
                why = _error_line(proc.stderr)
                problems.append(f"torch.compile on the CPU (Inductor, C++ compiler) failed: {why}")
        except subprocess.TimeoutExpired:
            problems.append(f"torch.compile on the CPU did not finish in {timeout_s:g} s")
        cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
        scheme = sysconfig.get_default_scheme()  # as Triton's build picks it (Debian's posix_local)
        include = sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]
        src = Path(tmp) / "launcher.c"
        src.write_text("#include <Python.h>\nint ftenv_launcher_check(void) { return Py_IsInitialized(); }\n")
        if cc is None:
            problems.append("no C compiler (CC, gcc or clang) for Triton's launcher")
        else:
            cmd = [cc, str(src), "-O1", "-shared", "-fPIC", f"-I{include}", "-o", str(Path(tmp) / "l.so")]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
                err = proc.returncode != 0 and _error_line(proc.stderr)
            except OSError as exc:
                err = str(exc)
            if err:
                problems.append(f"building a C extension with {cc} and {include}/Python.h (Triton): {err}")
    return problems


def run() -> int:
    """`ftenv buildcheck` (it takes no options): 0 when the stack matches and compiles."""
    try:
        problems = mismatches(_expected_from_env())
    except KeyError as exc:
        print(
            f"ftenv buildcheck: {exc.args[0]} is not set; run it inside an ftenv image build", file=sys.stderr
        )
        return outcome.UNUSABLE
    for line in problems:
        print(f"ftenv buildcheck: MISMATCH {line}", file=sys.stderr)
    if problems:
        print("ftenv buildcheck: FAILED: fix versions.toml or run `make lock`, then rebuild", file=sys.stderr)
        return outcome.EXIT[outcome.FAIL]
    print("ftenv buildcheck: installed stack matches versions.toml", file=sys.stderr)
    compile_issues = compile_problems()
    for line in compile_issues:
        print(f"ftenv buildcheck: COMPILE {line}", file=sys.stderr)
    if compile_issues:
        print(
            "ftenv buildcheck: FAILED: the compile path (--compile) cannot work: install g++ and "
            "libpython3-dev in the image's apt line",
            file=sys.stderr,
        )
        return outcome.EXIT[outcome.FAIL]
    print(
        "ftenv buildcheck: torch.compile works (Inductor C++ on CPU; C compiler, Python.h)", file=sys.stderr
    )
    return 0
