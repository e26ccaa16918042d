"""`python -m imagetools engine`: so that `make run` sets itself up on a fresh machine, install podman
(and, `--for test`, what the tests use) where no engine answers and root has apt-get; elsewhere
stop with the exact command. A Docker host is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ftenv import outcome, variables
from ftenv.stack import versions
from imagetools.local.machine import docker_daemon_answers

#: Debian's packages for building and running the image with podman (debootstrap makes the stand-in
#: base where the real one cannot be pulled).
ENGINE_PACKAGES = (
    "podman",
    "buildah",
    "debootstrap",
    "runc",
    "fuse-overlayfs",
    "slirp4netns",
    "uidmap",
    "containernetworking-plugins",
)
#: What the tests add: tini (tests/ftenv/watchdog/test_watch.py runs `ftenv watch` under it, as the
#: image does) and a
#: one-machine Slurm (tests/ftenv/launch/test_slurm.py starts and stops its daemons itself).
TEST_PACKAGES = ("tini", "slurm-wlm", "munge")
#: What `make docker-check` adds: Debian's Docker (dockerd 20.10 in Debian 12, no buildx), which the
#: check starts and stops itself.
DOCKER_CHECK_PACKAGES = ("docker.io",)
#: What an emulated build for another CPU adds (`make image-arm64`, imagetools.local.emulated): qemu's
#: user-mode emulators, registered with the kernel's binfmt_misc by binfmt-support.
EMULATION_PACKAGES = ("qemu-user-static", "binfmt-support")
#: The TOML parser of a python3 older than 3.11: the first of these the distribution has (tomli in
#: Debian 12 and Ubuntu 22.04; Debian 11 has only toml), as ftenv.stack.versions reads either.
TOML_PACKAGES = ("python3-tomli", "python3-toml")
#: The commands whose presence says the engine's packages are there.
ENGINE_COMMANDS = ("podman", "debootstrap")
#: Per purpose beyond the engine ("run" needs the engine only): (packages, the commands whose
#: presence says they are there, what they are for in the line that says they are installed).
EXTRAS = {
    "run": ((), (), ""),
    "test": (TEST_PACKAGES, ("tini", "slurmctld", "munged"), "tini and Slurm for the tests"),
    "docker-check": (DOCKER_CHECK_PACKAGES, ("dockerd",), "and Debian's docker.io for the Docker check"),
    "emulate": (
        EMULATION_PACKAGES,
        ("qemu-aarch64-static", "update-binfmts"),
        "qemu-user-static and binfmt-support for the emulated build",
    ),
}
PURPOSES = tuple(EXTRAS)


def missing_commands(purpose: str) -> list[str]:
    """The commands `purpose` (a key of EXTRAS) needs and PATH lacks. A run needs no podman where a
    Docker daemon answers; the tests, the Docker check and emulated builds always drive podman."""
    if purpose == "run" and (docker_daemon_answers() or shutil.which("podman")):
        return []
    wanted = ENGINE_COMMANDS + EXTRAS[purpose][1]
    return [c for c in wanted if not shutil.which(c)]


def packages(purpose: str) -> tuple[str, ...]:
    return ENGINE_PACKAGES + EXTRAS[purpose][0]


def apt_command(purpose: str) -> str:
    return "apt-get update && apt-get install -y " + " ".join(packages(purpose))


def _apt_install(names: tuple[str, ...]) -> int:
    env = variables.environment({"DEBIAN_FRONTEND": "noninteractive"})
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *names]):
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)
        if done.returncode:
            print(f"ftenv: `{' '.join(cmd)}` failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode
    return 0


def can_install() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("apt-get"))


def ensure_toml_parser() -> int:
    """versions.toml needs tomllib (3.11+) or tomli: install Debian's python3-tomli where it can."""
    if versions.tomllib is not None:
        return 0
    python = ".".join(map(str, sys.version_info[:2]))
    if not can_install():
        print("ftenv: " + versions.NO_TOML_PARSER.format(python=python), file=sys.stderr)
        return outcome.UNUSABLE
    subprocess.run(["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL)
    known = [p for p in TOML_PACKAGES if _apt_knows(p)]
    if not known:
        print("ftenv: " + versions.NO_TOML_PARSER.format(python=python), file=sys.stderr)
        return outcome.UNUSABLE
    print(f"ftenv: Python {python} has no tomllib: installing {known[0]} with apt-get", file=sys.stderr)
    done = _apt_install((known[0],))
    if done:
        print("ftenv: " + versions.NO_TOML_PARSER.format(python=python), file=sys.stderr)
    return done


def _apt_knows(package: str) -> bool:
    r = subprocess.run(["apt-cache", "show", package], capture_output=True, text=True)
    return r.returncode == 0 and "Package:" in r.stdout


def ensure(purpose: str) -> int:
    """Make the engine `purpose` needs available; the exit code of `make run`'s first step."""
    toml = ensure_toml_parser()
    if toml:
        return toml
    missing = missing_commands(purpose)
    if not missing:
        return 0
    if not can_install():
        print(
            f"ftenv: no container engine here ({', '.join(missing)} missing). Start the Docker daemon, or "
            f"install podman: `sudo sh -c '{apt_command(purpose)}'` (Debian/Ubuntu), "
            "`sudo dnf install -y podman buildah` (Fedora/RHEL); then run the same make command again.",
            file=sys.stderr,
        )
        return outcome.UNUSABLE
    what = ", ".join(filter(None, ["podman and its tools", EXTRAS[purpose][2]]))
    print(f"ftenv: {', '.join(missing)} missing: installing {what} with apt-get", file=sys.stderr, flush=True)
    return _apt_install(packages(purpose))


def add_parser(sub) -> None:
    p = sub.add_parser("engine", help="install podman and its tools where no engine answers (root, apt-get)")
    p.add_argument(
        "--for",
        dest="purpose",
        choices=PURPOSES,
        default="run",
        help="test: also tini and Slurm; docker-check: also docker.io; emulate: also qemu-user-static "
        "(`make image-arm64`)",
    )
    p.set_defaults(func=lambda args: ensure(args.purpose))
