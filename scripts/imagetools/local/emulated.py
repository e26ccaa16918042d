"""`python -m imagetools emulated build|check`: the linux/arm64 image (GH200, GB200) built and started
on this CPU under qemu-user-static (`make image-arm64`, `make check-arm64`), to show that the lock
installs, the Dockerfile builds and the image passes its self-check there; it says nothing of speed.

podman only, on a stand-in base for that CPU (docs/building-here.md, "linux/arm64 under emulation").
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ftenv import outcome, variables
from ftenv.stack import versions
from imagetools import locks
from imagetools.local import build_and_run
from imagetools.local.machine import ROOT, STANDIN_BASE, STANDIN_SCRIPT, Choice, Refusal, engine_env

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
#: Where the lock's wheels for the foreign CPU are downloaded natively, one folder per architecture:
#: pip inside the emulated build downloads at about 1 MB/s here (TLS and hashing emulated), the
#: host's pip at the network's speed. The build sees the folder at /wheelhouse, read-only, and a
#: pip.conf that points pip there (no index); both are bind mounts, but the engine leaves their
#: empty mount points (/wheelhouse, a 0-byte /etc/pip.conf) in the image.
WHEELHOUSE_ROOT = Path("/var/tmp")
#: The stand-in's Python (Debian bookworm), for which the wheels are picked.
STANDIN_PYTHON = "3.11"
#: Generous time limits: under emulation the start-up report and Inductor's compile in the build
#: check take minutes where natively they take seconds.
EMULATED_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Foreign:
    """A platform this machine builds for under emulation."""

    platform: str  # buildx/OCI name, as in versions.toml's `platforms`
    debian_arch: str  # debootstrap's --arch, and the image's architecture
    machine: str  # what `uname -m` says inside the container
    qemu: str  # the binfmt_misc entry of Debian's qemu-user-static

    @property
    def standin_base(self) -> str:
        return f"{STANDIN_BASE}-{self.debian_arch}"

    @property
    def wheelhouse(self) -> Path:
        return WHEELHOUSE_ROOT / f"ftenv-wheels-{self.debian_arch}"

    def pip_platforms(self) -> list[str]:
        """pip's platform tags for a manylinux machine of this CPU (pip does not widen a manylinux
        tag by itself): every glibc from bookworm's 2.36 down, then the legacy tags."""
        tags = [f"manylinux_2_{m}_{self.machine}" for m in range(36, 16, -1)]
        return [*tags, f"manylinux2014_{self.machine}", f"linux_{self.machine}"]


FOREIGN = {"linux/arm64": Foreign("linux/arm64", "arm64", "aarch64", "qemu-aarch64")}


def foreign(variant: versions.Variant, platform: str) -> Foreign:
    """The platform, if versions.toml builds the variant for it and this module can emulate it."""
    if platform not in variant.platforms:
        raise Refusal(
            f"variant {variant.name} is built for {', '.join(variant.platforms)}, not {platform} "
            "(versions.toml, `platforms`): pick a variant that lists it"
        )
    if platform not in FOREIGN:
        raise Refusal(f"no emulated build for {platform}: one of {', '.join(FOREIGN)}")
    return FOREIGN[platform]


def emulated_tag(variant: versions.Variant, target: Foreign) -> str:
    return f"{build_and_run.local_tag(variant)}-{target.debian_arch}"


def binfmt_enabled(target: Foreign, binfmt_dir: Path = BINFMT_DIR) -> bool:
    entry = binfmt_dir / target.qemu
    return entry.is_file() and entry.read_text().startswith("enabled")


def enable_binfmt(target: Foreign) -> None:
    """Register qemu with the kernel (binfmt_misc is not always mounted: containers, minimal VMs);
    root only. Stops with the command to run where it cannot."""
    if binfmt_enabled(target):
        return
    fix = (
        f"as root: `mount -t binfmt_misc binfmt_misc {BINFMT_DIR}` (if not mounted), then "
        f"`update-binfmts --enable {target.qemu}` (Debian's qemu-user-static and binfmt-support: "
        "`python -m imagetools engine --for emulate`)"
    )
    if os.geteuid() != 0 or not shutil.which("update-binfmts"):
        raise Refusal(f"{target.platform} programs cannot run here: {target.qemu} is not registered; {fix}")
    if not (BINFMT_DIR / "register").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)], check=False)
    subprocess.run(["update-binfmts", "--enable", target.qemu], check=False)
    if not binfmt_enabled(target):
        raise Refusal(f"could not register {target.qemu} with binfmt_misc; {fix}")
    print(f"ftenv: registered {target.qemu} with binfmt_misc", file=sys.stderr)


def prefetch_command(variant: versions.Variant, target: Foreign) -> list[str]:
    """The host's pip downloads the variant's whole lock (hashes checked) for the foreign CPU. The
    lock's few sdists (pure Python, `setup.py` only) install without build requirements."""
    pick = locks.wheels_for(STANDIN_PYTHON, target.pip_platforms())
    lock = ROOT / locks.lock_path(variant.name)
    return [
        *(sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar=off"),
        *("-d", str(target.wheelhouse), "--require-hashes", *pick, "-r", str(lock)),
    ]


def wheelhouse_mounts(target: Foreign) -> list[str]:
    pip_conf = target.wheelhouse.with_suffix(".pip.conf")
    return [f"--volume={target.wheelhouse}:/wheelhouse:ro", f"--volume={pip_conf}:/etc/pip.conf:ro"]


def prefetch(variant: versions.Variant, target: Foreign) -> list[str]:
    """Download the wheels natively; the build's mounts, or none (pip then downloads in emulation)
    where the host has no pip or the download fails."""
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        print(
            f"ftenv: {sys.executable} has no pip: the build downloads its wheels under emulation (slow)",
            file=sys.stderr,
        )
        return []
    target.wheelhouse.mkdir(parents=True, exist_ok=True)
    target.wheelhouse.with_suffix(".pip.conf").write_text(
        "[global]\nno-index = true\nfind-links = /wheelhouse\n"
    )
    if _timed(
        prefetch_command(variant, target), variables.environment(), stdout=subprocess.DEVNULL
    ).returncode:
        print(
            "ftenv: the native download failed: the build downloads under emulation (slow)", file=sys.stderr
        )
        return []
    return wheelhouse_mounts(target)


def build_command(
    variant: versions.Variant, target: Foreign, revision: str, created: str, extra: list[str] = ()
) -> list[str]:
    """The local podman build (imagetools.local.build_and_run), for the foreign platform on its
    stand-in base."""
    choice = Choice("podman", standin=True, run_flags=(), said=())
    args = build_and_run.build_args(choice, variant, revision, created)
    args |= {"BASE_IMAGE": target.standin_base, variables.STANDIN_BASE: target.standin_base}
    cmd = build_and_run.podman_build(choice, [emulated_tag(variant, target)], args)
    return [*cmd, f"--platform={target.platform}", *extra, str(ROOT)]


def check_commands(variant: versions.Variant, target: Foreign) -> list[list[str]]:
    """What `check` runs: the CPU the container sees, then the image's default (the report, then
    the self-check on the CPU), with the report's time limit raised for emulation."""
    image = emulated_tag(variant, target)
    cpu = f"--platform={target.platform}"
    slow = [cpu, f"--env={variables.REPORT_TIMEOUT}={EMULATED_TIMEOUT_S}"]
    return [
        build_and_run.run_command("podman", [cpu, f"--env={variables.REPORT}=0"], image, ["uname", "-m"]),
        build_and_run.run_command("podman", slow, image, ["ftenv", "report"]),
        build_and_run.run_command("podman", slow, image, []),
    ]


def _timed(cmd: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, **kw)
    print(
        f"ftenv: exit {done.returncode} after {time.monotonic() - start:.0f} s (emulated: not a speed)",
        file=sys.stderr,
        flush=True,
    )
    return done


def build(variant: versions.Variant, target: Foreign, extra: list[str]) -> int:
    enable_binfmt(target)
    env = engine_env("podman")
    made = _timed([str(STANDIN_SCRIPT), "podman", target.standin_base, target.debian_arch], env)
    if made.returncode:
        return made.returncode
    mounts = prefetch(variant, target)
    revision, created = build_and_run.git_revision(), build_and_run.build_time()
    cmd = build_command(variant, target, revision, created, [*mounts, *extra])
    return _timed(cmd, env).returncode


def check(variant: versions.Variant, target: Foreign) -> int:
    enable_binfmt(target)
    env = engine_env("podman")
    image = emulated_tag(variant, target)
    arch = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Architecture}}", image],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if arch.returncode != 0:
        raise Refusal(f"no image {image}: build it first with `make image-{target.debian_arch}`")
    if arch.stdout.strip() != target.debian_arch:
        raise Refusal(f"{image} is built for {arch.stdout.strip()}, not {target.debian_arch}: rebuild it")
    cpu, *runs = check_commands(variant, target)
    seen = _timed(cpu, env, capture_output=True, text=True)
    if seen.stdout.strip() != target.machine:
        print(
            f"ftenv: the container runs on {seen.stdout.strip() or 'nothing'}, not {target.machine}",
            file=sys.stderr,
        )
        return outcome.EXIT[outcome.FAIL]
    for cmd in runs:
        done = _timed(cmd, env)
        if done.returncode:
            return done.returncode
    return 0


def main(args: argparse.Namespace) -> int:
    variant = build_and_run.variant_named(args.variant)
    target = foreign(variant, args.platform)
    if args.action == "build":
        return build(variant, target, args.extra[args.extra[:1] == ["--"] :])
    if args.action == "check":
        return check(variant, target)
    print(
        " ".join(build_command(variant, target, "REVISION", "CREATED"))
        if args.action == "command"
        else emulated_tag(variant, target)
    )
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("emulated", help="build and start the image for another CPU under qemu (slow)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in [
        ("build", "build the image for PLATFORM: `build [OPTIONS] [-- PODMAN-BUILD-ARGS...]`"),
        ("check", "start it: the CPU it sees, `ftenv report`, then its default (the self-check)"),
        ("command", "print the build command"),
        ("tag", "print the local tag"),
    ]:
        a = actions.add_parser(name, help=text)
        a.add_argument("--variant", help="variant from versions.toml (default: its default)")
        a.add_argument("--platform", default="linux/arm64", choices=sorted(FOREIGN), help="the foreign CPU")
        if name == "build":
            a.add_argument("extra", nargs=argparse.REMAINDER, help="more arguments for podman build")
        a.set_defaults(func=main, extra=[])
