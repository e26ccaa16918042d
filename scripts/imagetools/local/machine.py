"""What this machine offers for building and running the image (`detect_machine()`), and the engine,
base and GPUs to use (`choose()`, pure, so every combination is tested without the machines):
Docker when its daemon answers, else podman; the real base when it can be pulled, else a marked
stand-in; the GPUs when there are any.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv import variables
from ftenv.stack import versions
from imagetools import ROOT

#: The stand-in base: a local name, so that it can never shadow the real base image.
STANDIN_BASE = "localhost/ftenv-standin-base:bookworm"
#: What makes a stand-in base: `make-standin-base.sh ENGINE NAME [ARCH]`.
STANDIN_SCRIPT = ROOT / "scripts/make-standin-base.sh"
#: Label of an image built on the stand-in (its value: the stand-in's name).
STANDIN_LABEL = "ftenv.base.standin"
LOCAL_REPOSITORY = "localhost/ftenv"
#: Engine settings of machines where rootful podman cannot raise its limits (see needs_engine_conf).
ENGINE_CONF = ROOT / "scripts/containers.conf"
#: What rootful podman sets RLIMIT_NOFILE to in every container unless told otherwise.
PODMAN_NOFILE = 1048576
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
ENGINE_CHOICES = ("auto", "docker", "podman")
BASE_CHOICES = ("auto", "upstream", "standin")
GPU_CHOICES = ("auto", "all", "none")
_CDI_GPU_KIND = re.compile(r"""["']?kind["']?\s*:\s*["']?nvidia\.com/gpu\b""")


class Refusal(SystemExit):
    """A combination that cannot work: the message names the fix."""

    def __init__(self, message: str):
        super().__init__(f"ftenv: {message}")


@dataclass(frozen=True)
class Machine:
    """What this machine offers, as found by detect_machine()."""

    docker_daemon: bool
    podman: bool
    registry: bool | None  # the chosen engine pulled the real base; None: not asked (run only)
    nvidia_smi: bool  # `nvidia-smi -L` listed a GPU
    cdi_gpu: bool  # a CDI spec for nvidia.com/gpu exists


@dataclass(frozen=True)
class Request:
    """What the user asked for (ENGINE=, BASE=, GPUS= in the Makefile); "auto" lets the machine decide."""

    engine: str = "auto"
    base: str = "auto"
    gpus: str = "auto"


@dataclass(frozen=True)
class Choice:
    """What to use on this machine, as choose() decided it from what the machine offers."""

    engine: str
    standin: bool
    run_flags: tuple[str, ...]
    said: tuple[str, ...]  # what was decided and why, one line each


def choose_engine(docker_daemon: bool, podman: bool, engine: str = "auto") -> str:
    if engine == "docker" and not docker_daemon:
        raise Refusal(
            "ENGINE=docker, but no Docker daemon answers `docker info`: start it, or use ENGINE=auto"
        )
    if engine == "podman" and not podman:
        raise Refusal("ENGINE=podman, but podman is not installed (Debian/Ubuntu as root: `make engine`)")
    if engine != "auto":
        return engine
    if docker_daemon:
        return "docker"
    if podman:
        return "podman"
    raise Refusal(
        "no container engine: start the Docker daemon, or install podman "
        "(Debian/Ubuntu as root: `make engine`)"
    )


def choose_base(registry: bool | None, base: str = "auto") -> tuple[bool, str]:
    """(stand-in?, the line that says so)."""
    if base == "upstream" and registry is False:
        raise Refusal("the real base image cannot be pulled: check the network, or build with BASE=auto")
    if base == "standin" or (base == "auto" and registry is False):
        why = "asked for" if base == "standin" else "the real base could not be pulled"
        return True, f"base    stand-in {STANDIN_BASE} ({why}): for tests, not for training"
    return False, "base    the real base image" + (", pulled" if registry else "")


def choose_gpus(
    engine: str, nvidia_smi: bool, cdi_gpu: bool, gpus: str = "auto"
) -> tuple[tuple[str, ...], str]:
    """(run flags, the line that says what was done)."""
    if gpus == "none" or (gpus == "auto" and not (nvidia_smi or cdi_gpu)):
        why = "GPUS=none" if gpus == "none" else "none found (nvidia-smi -L, CDI spec for nvidia.com/gpu)"
        return (), f"GPUs    not passed: {why}; the self-check runs on the CPU"
    if engine == "podman" and not cdi_gpu and gpus == "auto":
        raise Refusal(
            "nvidia-smi lists a GPU but podman passes GPUs through a CDI spec, and there is none: "
            "create it with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, "
            "or run on the CPU with GPUS=none"
        )
    flags = ("--gpus", "all") if engine == "docker" else ("--device", "nvidia.com/gpu=all")
    return (*flags, "--ipc=host"), f"GPUs    passed: {' '.join(flags)} --ipc=host"


def choose(m: Machine, want: Request = Request()) -> Choice:
    """Engine x registry x GPU: what to build on and how to run."""
    engine = choose_engine(m.docker_daemon, m.podman, want.engine)
    why = "asked for" if want.engine != "auto" else "" if engine == "docker" else "no Docker daemon answered"
    said = [f"engine  {engine}" + (f": {why}" if why else "")]
    standin, base_line = choose_base(m.registry, want.base)
    flags, gpu_line = choose_gpus(engine, m.nvidia_smi, m.cdi_gpu, want.gpus)
    said += [base_line] if m.registry is not None else []
    return Choice(engine, standin, flags, (*said, gpu_line))


# --- detection ----------------------------------------------------------------------------------------


def _answers(cmd: list[str], timeout: float = 20) -> subprocess.CompletedProcess | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def docker_daemon_answers() -> bool:
    r = _answers(["docker", "info", "--format", "{{.ServerVersion}}"])
    return bool(r and r.returncode == 0 and r.stdout.strip())


def nvidia_smi_lists_a_gpu() -> bool:
    r = _answers(["nvidia-smi", "-L"])
    return bool(r and r.returncode == 0 and re.search(r"^GPU \d+", r.stdout, re.M))


def cdi_spec_names_gpu(dirs: tuple[Path, ...] = CDI_DIRS) -> bool:
    for d in dirs:
        for spec in sorted(d.glob("*")) if d.is_dir() else []:
            if spec.suffix in (".yaml", ".yml", ".json") and _CDI_GPU_KIND.search(
                spec.read_text(errors="replace")
            ):
                return True
    return False


def pull(engine: str, image: str) -> tuple[bool, str]:
    """Pull the real base (that is how the registry is tried); on failure, the engine's last line."""
    r = _answers([engine, "pull", image], timeout=900)
    if r is None:
        return False, f"{engine} pull {image} did not finish"
    last = (r.stderr.strip().splitlines() or [""])[-1]
    return r.returncode == 0, last


def shadowing_standin(engine: str, image: str) -> bool:
    """Whether the engine holds a stand-in under the real base's name (earlier versions of this
    project imported theirs that way): the real nvidia/cuda images set CUDA_VERSION, a stand-in not."""
    r = _answers([engine, "image", "inspect", "--format", "{{json .Config.Env}}", image])
    if r is None or r.returncode != 0:
        return False
    return not any(e.startswith("CUDA_VERSION=") for e in json.loads(r.stdout or "null") or [])


def needs_engine_conf() -> bool:
    """Rootful podman sets RLIMIT_NOFILE to PODMAN_NOFILE in each container; where this root cannot
    raise its own limit that far (sandboxed build machines), every `podman run` fails with
    `setrlimit RLIMIT_NOFILE: Operation not permitted`, and scripts/containers.conf is needed."""
    if os.geteuid() != 0:
        return False
    code = f"import resource as r; r.setrlimit(r.RLIMIT_NOFILE, ({PODMAN_NOFILE}, {PODMAN_NOFILE}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode != 0


def engine_env(engine: str) -> dict[str, str]:
    """The environment for engine commands: CONTAINERS_CONF only where it is needed and unset."""
    env = variables.environment()
    if engine == "podman" and os.environ.get("CONTAINERS_CONF") is None and needs_engine_conf():
        env["CONTAINERS_CONF"] = str(ENGINE_CONF)
        print(
            f"ftenv: engine settings {ENGINE_CONF.name} (this root cannot raise its limits)", file=sys.stderr
        )
    return env


def detect_machine(variant: versions.Variant | None = None, want: Request = Request()) -> Machine:
    """What this machine offers. With a variant (a build), the engine pulls its real base: that pull
    is how the registry is tried (nothing is written when it fails); without one (a run), no pull."""
    docker, podman = docker_daemon_answers(), bool(shutil.which("podman"))
    registry = None
    if variant is not None:
        registry = False
        if want.base != "standin":
            engine = choose_engine(docker, podman, want.engine)
            registry, why = pull(engine, variant.base_image)
            if not registry:
                print(f"ftenv: cannot pull {variant.base_image}: {why}", file=sys.stderr)
            if not registry and shadowing_standin(engine, variant.base_image):
                print(
                    f"ftenv: WARNING: the local {variant.base_image} is a stand-in, not NVIDIA's image "
                    f"(no CUDA_VERSION), and shadows the real one: remove it with "
                    f"`{engine} rmi {variant.base_image}` (this build does not use it)",
                    file=sys.stderr,
                )
    return Machine(docker, podman, registry, nvidia_smi_lists_a_gpu(), cdi_spec_names_gpu())
