"""`make run`'s host side on a distribution's own python3, with nothing pip-installed.

Each command the Makefile runs for `make run` (the variant, the engine step, the tag, the stand-in,
the build, the run) runs under the system's python3 in isolated mode (-I), with every module from
site-packages or dist-packages hidden (what a stock interpreter has: the standard library only),
against stand-in engines (tests/support/fake_engines.py). The TOML fallback below Python 3.11 is
checked by hiding tomllib. Every other make target is checked the same way below: what it starts
with the PATH's python3 must run on that stock interpreter.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, child_env
from support import fake_engines as fakes

#: The system interpreters this test looks for (the distributions' own, never a venv's).
SYSTEM_PYTHONS = ["/usr/bin/python3", *(f"/usr/bin/python3.{minor}" for minor in range(9, 13))]
FOUND = sorted({os.path.realpath(p) for p in SYSTEM_PYTHONS if os.access(p, os.X_OK)})

#: Runs a module (`-m NAME`) or a script under a meta-path finder that refuses anything installed
#: outside the standard library; argv[1] is scripts/, then what `python3` would get.
BOOT = r"""
import importlib.machinery, runpy, sys
HIDE = tuple(sys.argv[2].split(","))

class HideInstalled:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in HIDE:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)
        if path is not None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        origin = (spec and (spec.origin or "")) or ""
        locations = list(spec.submodule_search_locations or []) if spec else []
        if any(p in x for x in [origin, *locations] for p in ("site-packages", "dist-packages")):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: not stdlib)", name=name)
        return None

sys.meta_path.insert(0, HideInstalled)
sys.path.insert(0, sys.argv[1])
args = sys.argv[3:]
if args[0] == "-m":
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
"""


def stock(
    python: str, *args: str, env: dict[str, str], hide: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    cmd = [python, "-I", "-c", BOOT, str(ROOT / "scripts"), ",".join(hide) or "-", *args]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture
def machine(tmp_path):
    """A PATH with stand-in engines first, and a clean environment as `make` would pass it."""
    bin_dir = tmp_path / "bin"
    fakes.install(bin_dir)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "HOME": str(tmp_path),
        "CONTAINERS_CONF": str(ROOT / "scripts/containers.conf"),
    }
    return env, tmp_path / "calls.log"


def _commands(variant: str) -> list[tuple[str, ...]]:
    """What `make run` (and `make image`, `make standin-base`, `make engine`) call, in order."""
    return [
        ("-m", "ftenv.stack.versions", "name"),
        ("-m", "imagetools", "engine", "--for", "run"),
        ("-m", "imagetools", "local", "tag", "--variant", variant),
        ("-m", "imagetools", "local", "choose", "--engine", "auto", "--gpus", "auto"),
        ("-m", "imagetools", "local", "standin", "--engine", "auto"),
        ("scripts/build_image.py", variant, "--engine", "auto", "--base", "auto"),
        ("-m", "imagetools", "local", "run", f"--variant={variant}", "--engine", "auto", "--gpus", "auto"),
        ("-m", "imagetools", "--help"),
    ]


@pytest.mark.skipif(not FOUND, reason=f"no system python3 here ({', '.join(SYSTEM_PYTHONS)})")
@pytest.mark.parametrize("python", FOUND)
@pytest.mark.parametrize("engine", ["podman", "docker without buildx"])
def test_make_run_on_the_stock_python3(python, engine, machine):
    env, log = machine
    if engine.startswith("docker"):
        env["DAEMON"] = "1"
    for command in _commands("cu130"):
        r = stock(python, *command, env=env)
        assert r.returncode == 0, f"{' '.join(command)}:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr
    called = [c[:2] for c in fakes.calls(log)]
    built = ["docker", "build"] if engine.startswith("docker") else ["podman", "build"]
    assert built in called and [built[0], "run"] in called


def test_a_python_without_packaging_reads_versions_as_packaging_does(machine):
    """The stock-python path of ftenv.stack.versions (packaging hidden) on this interpreter."""
    env, _ = machine
    probe = (
        "from ftenv.stack import versions as v; from imagetools import tags; ver = v.load().default; "
        "print(tags.stack_tag(ver), ver.cuda_short, ver.cuda_major_minor, ver.torch_base, "
        "v.public('2.9.1+cu126'))"
    )
    with_packaging = subprocess.run(
        [sys.executable, "-c", probe],
        env={**env, "PYTHONPATH": str(ROOT / "scripts")},
        capture_output=True,
        text=True,
    )
    script = Path(env["HOME"]) / "probe.py"
    script.write_text(probe + "\n")
    without = stock(sys.executable, str(script), env=env, hide=("packaging",))
    assert with_packaging.returncode == 0 and without.returncode == 0, without.stderr
    assert without.stdout == with_packaging.stdout != ""


@pytest.mark.parametrize(
    "distribution, packaged", [("Debian 12", "python3-tomli"), ("Debian 11", "python3-toml")]
)
def test_below_3_11_a_toml_parser_stands_in_for_tomllib_and_else_apt_brings_it(
    machine, tmp_path, distribution, packaged
):
    """Python 3.9/3.10 (no tomllib): tomli or toml is used where importable; where none is, the
    engine step installs the one the distribution packages (root with apt-get) and says so in one
    line, and a bare versions lookup names the fix."""
    env, _ = machine
    script = tmp_path / "which.py"
    script.write_text(
        "from ftenv.stack import versions as v; print(v.tomllib.__name__, v.load().default.name)\n"
    )
    # Importable as the stock interpreter sees it (this process may see more: a venv, or a module an
    # earlier test left in sys.modules).
    probe = tmp_path / "importable.py"
    probe.write_text("import importlib, sys\nimportlib.import_module(sys.argv[1])\n")
    for parser in ("tomli", "toml"):
        hidden = ("tomllib", "tomli") if parser == "toml" else ("tomllib",)
        if stock(sys.executable, str(probe), parser, env=env, hide=hidden).returncode:
            continue
        r = stock(sys.executable, str(script), env=env, hide=hidden)
        assert (r.returncode, r.stdout) == (0, f"{parser} cu130\n"), r.stderr
    no_parser = ("tomllib", "tomli", "toml")
    r = stock(sys.executable, "-m", "ftenv.stack.versions", "name", env=env, hide=no_parser)
    assert r.returncode == 1 and "has no TOML parser (tomllib is 3.11+): install tomli" in r.stderr
    assert "python3-tomli" in r.stderr and "Traceback" not in r.stderr
    apt_log = tmp_path / "apt-calls"
    bin_dir = Path(env["PATH"].split(os.pathsep)[0])
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {apt_log}\n')
    # apt-cache of a distribution that packages only `packaged` of the two parsers
    (bin_dir / "apt-cache").write_text(f'#!/bin/sh\n[ "$2" = {packaged} ] && echo "Package: $2"\n')
    for tool in ("apt-get", "apt-cache"):
        (bin_dir / tool).chmod(0o755)
    r = stock(sys.executable, "-m", "imagetools", "engine", "--for", "run", env=env, hide=no_parser)
    if os.geteuid() == 0:
        assert r.returncode == 0, r.stderr
        python = f"{sys.version_info[0]}.{sys.version_info[1]}"
        assert r.stderr == f"ftenv: Python {python} has no tomllib: installing {packaged} with apt-get\n"
        assert apt_log.read_text().splitlines()[-1].split()[3:] == [packaged]
    else:
        assert r.returncode == 2 and "install tomli" in r.stderr


def test_the_makefile_reads_versions_through_the_module_alone():
    """`make`'s VARIANT and lock loop call ftenv.stack.versions, not `ftenv` (which loads all of ftenv)."""
    makefile = (ROOT / "Makefile").read_text()
    assert "VERSIONS := PYTHONPATH=scripts python3 -m ftenv.stack.versions" in makefile
    assert "ftenv.cli" not in makefile
    r = subprocess.run(
        [sys.executable, "-m", "ftenv.stack.versions", "name"],
        env=child_env(),
        capture_output=True,
        text=True,
    )
    assert (r.returncode, r.stdout) == (0, "cu130\n"), r.stderr


# --- every make target ------------------------------------------------------------------------

#: A `python3` (a recipe's word, not a path's tail) and its arguments up to the shell's next operator.
BARE_PYTHON = re.compile(r"(?<![\w/.$-])python3((?:[ \t]+[^\s;|&)\\]+)*)")


def _make_targets() -> list[str]:
    """Every target `make help` lists (each has a `##` comment)."""
    return re.findall(r"(?m)^([a-z0-9-]+):.*## ", (ROOT / "Makefile").read_text())


@pytest.fixture
def stock_python3(tmp_path):
    """A PATH whose `python3` is a distribution's stock interpreter: standard library only."""
    system = FOUND[0] if FOUND else sys.executable
    (tmp_path / "boot.py").write_text(BOOT)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec {system} -I {tmp_path / "boot.py"} "$PYTHONPATH" - "$@"\n')
    shim.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(tmp_path)}


@pytest.mark.parametrize("target", _make_targets())
def test_every_make_target_runs_its_python3_on_a_stock_interpreter(target, stock_python3, tmp_path):
    """`make -n TARGET` with a stock python3 first on PATH (its VARIANT and IMAGE are worked out by
    that python3), then every command it would start with the PATH's python3, started there: one
    that writes generated files (`--write`) in its checking form, which renders the same files and
    writes nothing; any other with --help (the modules the command imports and its parser; the build
    and run paths run whole in the test above). What needs the lock (packaging, PyYAML,
    dockerfile-parse, torch) runs in the venv, `$(PY)`, and is not among them."""
    env = stock_python3
    planned = subprocess.run(
        ["make", "-n", "--no-print-directory", target, f"VENV={tmp_path / 'venv'}"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert "Traceback" not in planned.stderr and "No module named" not in planned.stderr, planned.stderr
    for found in BARE_PYTHON.finditer(planned.stdout):
        args = found.group(1).split()
        args = [a for a in args if a != "--write"] if "--write" in args else [*args, "--help"]
        r = subprocess.run(
            ["python3", *args],
            env={**env, "PYTHONPATH": "scripts"}, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, f"make {target}: python3 {' '.join(args)}:\n{r.stderr[-3000:]}"
