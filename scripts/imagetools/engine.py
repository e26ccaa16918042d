"""`python -m imagetools engine`: make sure this machine has what `make run` (or `make test`) needs.

`make run` on a fresh machine sets itself up: where no engine answers (no Docker daemon, no podman)
and the machine can install one (root, with apt-get: Debian/Ubuntu), podman and its tools are
installed, said in one line; elsewhere it stops with the exact command to run. A Docker host is
never touched: Docker is used whenever its daemon answers. `--for test` also brings what the tests
use (tini, a one-machine Slurm), as `make test` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from imagetools.machine import docker_daemon_answers

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
#: What the tests add: tini (tests/test_watch.py runs `ftenv watch` under it, as the image does) and a
#: one-machine Slurm (tests/test_slurm.py starts and stops its daemons itself).
TEST_PACKAGES = ("tini", "slurm-wlm", "munge")
#: What an emulated build for another CPU adds (`make image-arm64`, imagetools.emulated): qemu's
#: user-mode emulators, registered with the kernel's binfmt_misc by binfmt-support.
EMULATION_PACKAGES = ("qemu-user-static", "binfmt-support")
#: The commands whose presence says the packages are there.
ENGINE_COMMANDS = ("podman", "debootstrap")
TEST_COMMANDS = ("tini", "slurmctld", "munged")
EMULATION_COMMANDS = ("qemu-aarch64-static", "update-binfmts")
#: Per purpose beyond the engine ("run" needs the engine only): (packages, the commands they bring).
EXTRAS = {
    "run": ((), ()),
    "test": (TEST_PACKAGES, TEST_COMMANDS),
    "emulate": (EMULATION_PACKAGES, EMULATION_COMMANDS),
}


def missing_commands(purpose: str) -> list[str]:
    """The commands `purpose` (a key of EXTRAS) needs and PATH lacks. A run needs no podman where a
    Docker daemon answers; the tests and emulated builds always drive podman."""
    if purpose == "run" and (docker_daemon_answers() or shutil.which("podman")):
        return []
    wanted = ENGINE_COMMANDS + EXTRAS[purpose][1]
    return [c for c in wanted if not shutil.which(c)]


def packages(purpose: str) -> tuple[str, ...]:
    return ENGINE_PACKAGES + EXTRAS[purpose][0]


def apt_command(purpose: str) -> str:
    return "apt-get update && apt-get install -y " + " ".join(packages(purpose))


def ensure(purpose: str) -> int:
    missing = missing_commands(purpose)
    if not missing:
        return 0
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print(
            f"ftenv: no container engine here ({', '.join(missing)} missing). Start the Docker daemon, or "
            f"install podman: `sudo sh -c '{apt_command(purpose)}'` (Debian/Ubuntu), "
            "`sudo dnf install -y podman buildah` (Fedora/RHEL); then run the same make command again.",
            file=sys.stderr,
        )
        return 2
    what = "podman and its tools" + {
        "test": ", tini and Slurm for the tests",
        "emulate": ", qemu-user-static and binfmt-support for the emulated build",
    }.get(purpose, "")
    print(f"ftenv: no container engine answers: installing {what} with apt-get", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages(purpose)]):
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)
        if done.returncode:
            print(f"ftenv: `{' '.join(cmd)}` failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("engine", help="install podman and its tools where no engine answers (root, apt-get)")
    p.add_argument(
        "--for",
        dest="purpose",
        choices=tuple(EXTRAS),
        default="run",
        help="test: also tini and Slurm; emulate: also qemu-user-static (`make image-arm64`)",
    )
    p.set_defaults(func=lambda args: ensure(args.purpose))
