"""Build (scripts/build_image.py) and run (`python -m imagetools local run`) the image on this machine.

What the machine offers decides three things, in `choose()` (pure, tested for every combination):
- the engine: Docker when its daemon answers (`docker buildx bake`, from docker/docker-bake.json,
  `--load`), else podman;
- the base: the real one from versions.toml when the engine can pull it; otherwise a stand-in
  (scripts/make-standin-base.sh) under a local name of its own, passed as BASE_IMAGE, and the image
  is marked (label STANDIN_LABEL, and a line in the start-up report);
- the GPUs: passed when there are any (`nvidia-smi -L` lists one, or a CDI spec names
  nvidia.com/gpu), with `--ipc=host`.
The probes (`probe()`) only find out what the machine offers. Images built here are tagged under
localhost/ only: nothing local ever takes the name of an image that a registry serves.
(About 400 lines, over the usual 300: the decision, its probes and both engines' commands belong together.)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ftenv.build import versions
from ftenv.report.render import STANDIN_BASE_ENV
from imagetools import bake

ROOT = Path(__file__).resolve().parents[2]
#: The stand-in base: a local name, so that it can never shadow the real base image.
STANDIN_BASE = "localhost/ftenv-standin-base:bookworm"
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
_MACHINES = {
    "x86_64": "linux/amd64",
    "amd64": "linux/amd64",
    "aarch64": "linux/arm64",
    "arm64": "linux/arm64",
}


class Refusal(SystemExit):
    """A combination that cannot work: the message names the fix."""

    def __init__(self, message: str):
        super().__init__(f"ftenv: {message}")


@dataclass(frozen=True)
class Machine:
    """What this machine offers, as found by probe()."""

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
class Plan:
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


def choose(m: Machine, want: Request = Request()) -> Plan:
    """Engine x registry x GPU: what to build on and how to run."""
    engine = choose_engine(m.docker_daemon, m.podman, want.engine)
    why = "asked for" if want.engine != "auto" else "" if engine == "docker" else "no Docker daemon answered"
    said = [f"engine  {engine}" + (f": {why}" if why else "")]
    standin, base_line = choose_base(m.registry, want.base)
    flags, gpu_line = choose_gpus(engine, m.nvidia_smi, m.cdi_gpu, want.gpus)
    said += [base_line] if m.registry is not None else []
    return Plan(engine, standin, flags, (*said, gpu_line))


# --- probes ----------------------------------------------------------------------------------------


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
    """Pull the real base (that is the registry probe); on failure, the engine's last line."""
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
    env = dict(os.environ)
    if engine == "podman" and "CONTAINERS_CONF" not in env and needs_engine_conf():
        env["CONTAINERS_CONF"] = str(ENGINE_CONF)
        print(
            f"ftenv: engine settings {ENGINE_CONF.name} (this root cannot raise its limits)", file=sys.stderr
        )
    return env


def probe(variant: versions.Variant | None = None, want: Request = Request()) -> Machine:
    """What this machine offers. With a variant (a build), the engine pulls its real base: that pull
    is the registry probe (nothing is written when it fails); without one (a run), no pull."""
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


# --- build and run ---------------------------------------------------------------------------------


def local_tag(variant: versions.Variant) -> str:
    return f"{LOCAL_REPOSITORY}:{variant.name}"


def local_name(tag: str) -> str:
    """A tag under localhost/: a bare `name:tag` gets the prefix (podman's own default; Docker would
    file it under docker.io), a registry other than localhost is refused."""
    first = tag.split("/", 1)[0]
    if "/" in tag and ("." in first or ":" in first or first == "localhost"):
        if first != "localhost":
            raise Refusal(
                f"tag {tag!r} names registry {first}: local builds are tagged under localhost/ only"
            )
        return tag
    return f"localhost/{tag}"


def build_args(plan: Plan, variant: versions.Variant, revision: str, created: str) -> dict[str, str]:
    args = variant.build_args() | {"REVISION": revision, "CREATED": created}
    if plan.standin:
        args |= {"BASE_IMAGE": STANDIN_BASE, STANDIN_BASE_ENV: STANDIN_BASE}
    return args


def podman_build(plan: Plan, tags: list[str], args: dict[str, str]) -> list[str]:
    cmd = [
        "podman",
        "build",
        "--format=docker",
        "--pull=never",
        "--layers",
        "-f",
        str(ROOT / bake.DOCKERFILE),
    ]
    cmd += [f"--build-arg={k}={v}" for k, v in args.items()]
    if plan.standin:
        cmd.append(f"--label={STANDIN_LABEL}={STANDIN_BASE}")
    for tag in tags:
        cmd += ["-t", tag]
    return cmd


def local_bake(
    plan: Plan, variant: versions.Variant, tags: list[str], args: dict[str, str], machine: str
) -> dict:
    """The bake file's target for this variant, as buildx resolves it, made fit for a local `--load`:
    the host's platform only, local tags, no attestations, annotations or cache export (the
    `docker` driver refuses index annotations and cache export on a single-platform load)."""
    data = json.loads((ROOT / bake.BAKE_FILE).read_text())
    target = bake.resolve_target(
        data, variant.name, {"REVISION": args["REVISION"], "CREATED": args["CREATED"]}
    )
    host = _MACHINES.get(machine)
    if host not in target.get("platforms", []):
        built_for = ", ".join(target.get("platforms", []))
        raise Refusal(f"variant {variant.name} is built for {built_for}, not for this {machine} machine")
    for key in ("annotations", "attest", "cache-to", "output"):
        target.pop(key, None)
    target |= {
        "platforms": [host],
        "tags": tags,
        "args": target.get("args", {}) | args,
        "pull": not plan.standin,
    }
    if plan.standin:
        target["labels"] = target.get("labels", {}) | {STANDIN_LABEL: STANDIN_BASE}
        target.pop("cache-from", None)
    return {"target": {variant.name: target}}


def git_revision() -> str:
    r = _answers(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    return r.stdout.strip() if r and r.returncode == 0 else "unknown"


def _say(plan: Plan, which: tuple[str, ...]) -> None:
    lines = [line for line in plan.said if line.split()[0] in which]
    print("ftenv: " + "\n       ".join(lines), file=sys.stderr, flush=True)


def build(
    variant: versions.Variant,
    tags: list[str],
    extra: list[str],
    want: Request = Request(),
    default_tag: bool = True,
) -> int:
    """Build the variant (scripts/build_image.py; the caller holds the build lock); returns the
    engine's exit code. default_tag=False leaves the variant's own tag where it is (a trial build
    beside the image under test)."""
    tags = [local_name(t) for t in [*([local_tag(variant)] if default_tag else []), *tags]]
    if not tags:
        raise SystemExit("build_image.py: --no-default-tag needs a --tag")
    plan = choose(probe(variant, want), Request(want.engine, want.base, gpus="none"))
    _say(plan, ("engine", "base"))
    env = engine_env(plan.engine)
    if plan.standin:
        made = subprocess.run(
            [str(ROOT / "scripts/make-standin-base.sh"), plan.engine, STANDIN_BASE], env=env
        )
        if made.returncode:
            return made.returncode
    created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    args = build_args(plan, variant, git_revision(), created)
    if plan.engine == "podman":
        cmd = [*podman_build(plan, tags, args), *extra, str(ROOT)]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        return subprocess.run(cmd, env=env).returncode
    with tempfile.TemporaryDirectory() as tmp:
        bake_file = Path(tmp) / "local-bake.json"
        bake_file.write_text(json.dumps(local_bake(plan, variant, tags, args, platform.machine()), indent=2))
        cmd = ["docker", "buildx", "bake", "-f", str(bake_file), "--load", *extra, variant.name]
        print("+", " ".join(cmd), f"(target {variant.name} of {bake.BAKE_FILE})", file=sys.stderr, flush=True)
        return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def run_command(plan: Plan, image: str, command: list[str]) -> list[str]:
    """The image just built, never one pulled in its place."""
    return [plan.engine, "run", "--rm", "--pull=never", *plan.run_flags, image, *command]


def main(args: argparse.Namespace) -> int:
    v = versions.load()
    variant = v.variant(args.variant) if args.variant else v.default
    if args.action == "tag":
        print(local_tag(variant))
        return 0
    if args.action == "standin":
        engine = choose_engine(docker_daemon_answers(), bool(shutil.which("podman")), args.engine)
        return subprocess.run([str(ROOT / "scripts/make-standin-base.sh"), engine, STANDIN_BASE]).returncode
    plan = choose(probe(), Request(engine=args.engine, gpus=args.gpus))
    if args.action == "plan":
        print("\n".join(plan.said))
        return 0
    _say(plan, ("engine", "GPUs"))
    env = engine_env(plan.engine)
    cmd = run_command(plan, local_tag(variant), args.command[args.command[:1] == ["--"] :])
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, env=env).returncode


def add_parser(sub) -> None:
    p = sub.add_parser("local", help="run the image built here; engine and GPUs chosen for this machine")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in [
        ("plan", "print what `run` would use"),
        ("run", "run the image: `run [OPTIONS] [-- COMMAND...]`"),
        ("standin", "make the stand-in base"),
        ("tag", "print the local tag"),
    ]:
        a = actions.add_parser(name, help=text)
        a.add_argument("--variant", help="variant from versions.toml (default: its default)")
        a.add_argument("--engine", choices=ENGINE_CHOICES, default="auto", help="auto: Docker if it answers")
        a.add_argument("--gpus", choices=GPU_CHOICES, default="auto", help="auto: pass the GPUs when found")
        if name == "run":
            a.add_argument("command", nargs=argparse.REMAINDER, help="the command (default: the image's)")
        a.set_defaults(func=main, command=[])
