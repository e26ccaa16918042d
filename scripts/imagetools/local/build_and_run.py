"""Build (scripts/build_image.py) and run (`python -m imagetools local run`) the image here with what
machine.choose() picked, tagged under localhost/ only so that nothing local takes a registry's name.
Runs on the host's stock python3 (3.9+, standard library only).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ftenv import variables
from ftenv.stack import versions
from imagetools import bake
from imagetools.build_args import build_args as derived_build_args
from imagetools.local.docker_builder import docker_build, docker_builder, docker_versions
from imagetools.local.machine import (
    ENGINE_CHOICES,
    GPU_CHOICES,
    LOCAL_REPOSITORY,
    ROOT,
    STANDIN_BASE,
    STANDIN_LABEL,
    STANDIN_SCRIPT,
    Choice,
    Refusal,
    Request,
    _answers,
    choose,
    choose_engine,
    detect_machine,
    docker_daemon_answers,
    engine_env,
)

#: The build secret that carries an optional CA bundle (CA_BUNDLE=) to the Dockerfile's pip steps.
CA_SECRET_ID = "ca_bundle"
_MACHINES = {
    "x86_64": "linux/amd64",
    "amd64": "linux/amd64",
    "aarch64": "linux/arm64",
    "arm64": "linux/arm64",
}


# --- build and run ---------------------------------------------------------------------------------


def variant_named(name: str | None) -> versions.Variant:
    """The variant of versions.toml by that name; without one, its default (every local command)."""
    v = versions.load()
    return v.variant(name) if name else v.default


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


def build_args(choice: Choice, variant: versions.Variant, revision: str, created: str) -> dict[str, str]:
    args = derived_build_args(variant) | {"REVISION": revision, "CREATED": created}
    if choice.standin:
        args |= {"BASE_IMAGE": STANDIN_BASE, variables.STANDIN_BASE: STANDIN_BASE}
    return args


def podman_build(
    choice: Choice, tags: list[str], args: dict[str, str], ca_bundle: Path | None = None
) -> list[str]:
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
    if choice.standin:
        cmd.append(f"--label={STANDIN_LABEL}={variables.given(variables.STANDIN_BASE, args)}")
    cmd += [f"--secret={secret}" for secret in secrets(ca_bundle)]
    for tag in tags:
        cmd += ["-t", tag]
    return cmd


def local_bake(
    choice: Choice,
    variant: versions.Variant,
    tags: list[str],
    args: dict[str, str],
    machine: str,
    ca_bundle: Path | None = None,
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
        "pull": not choice.standin,
    }
    if choice.standin:
        target["labels"] = target.get("labels", {}) | {STANDIN_LABEL: STANDIN_BASE}
        target.pop("cache-from", None)
    if ca_bundle:
        target["secret"] = secrets(ca_bundle)
    return {"target": {variant.name: target}}


def secrets(ca_bundle: Path | None) -> list[str]:
    """The build secrets, as `--secret` of podman, docker build and bake's `secret` spell them."""
    return [f"id={CA_SECRET_ID},src={ca_bundle}"] if ca_bundle else []


def checked_ca_bundle(path: str | None) -> Path | None:
    if not path:
        return None
    bundle = Path(path).expanduser().resolve()
    if not bundle.is_file():
        raise Refusal(f"CA_BUNDLE={path}: no such file; give the PEM bundle that trusts your proxy")
    if "-----BEGIN CERTIFICATE-----" not in bundle.read_text(errors="replace"):
        raise Refusal(f"CA_BUNDLE={path}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
    return bundle


def git_revision() -> str:
    r = _answers(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    return r.stdout.strip() if r and r.returncode == 0 else "unknown"


def build_time() -> str:
    """The image's `created` label: now in UTC, as OCI spells it (time, not datetime.UTC: this runs
    on python3 before 3.11)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def run_shown(cmd: list[str], env: dict[str, str], before: str = "", after: str = "", **kw) -> int:
    """Run an engine command shown first as one could type it (`before`: the variables it adds,
    `after`: where its target comes from); its exit code."""
    shown = ["+", *([before] if before else []), *cmd, *([after] if after else [])]
    print(" ".join(shown), file=sys.stderr, flush=True)
    return subprocess.run(cmd, env=env, **kw).returncode


def _say(choice: Choice, which: tuple[str, ...], *more: str) -> None:
    lines = [line for line in choice.said if line.split()[0] in which] + [m for m in more if m]
    print("ftenv: " + "\n       ".join(lines), file=sys.stderr, flush=True)


def build(
    variant: versions.Variant,
    tags: list[str],
    extra: list[str],
    want: Request = Request(),
    default_tag: bool = True,
    ca_bundle: Path | None = None,
) -> int:
    """Build the variant (scripts/build_image.py; the caller holds the build lock); returns the
    engine's exit code. default_tag=False leaves the variant's own tag where it is (a trial build
    beside the image under test). ca_bundle: a CA bundle for pip behind a TLS-intercepting proxy,
    passed as a build secret (never in a layer)."""
    tags = [local_name(t) for t in [*([local_tag(variant)] if default_tag else []), *tags]]
    if not tags:
        raise SystemExit("build_image.py: --no-default-tag needs a --tag")
    choice = choose(detect_machine(variant, want), Request(want.engine, want.base, gpus="none"))
    builder, builder_line = docker_builder(*docker_versions()) if choice.engine == "docker" else ("", "")
    _say(choice, ("engine", "base"), builder_line)
    env = engine_env(choice.engine)
    if choice.standin:
        made = subprocess.run([str(STANDIN_SCRIPT), choice.engine, STANDIN_BASE], env=env)
        if made.returncode:
            return made.returncode
    args = build_args(choice, variant, git_revision(), build_time())
    if ca_bundle:
        print(
            f"ftenv: CA bundle {ca_bundle} goes to the pip steps as build secret {CA_SECRET_ID}",
            file=sys.stderr,
        )
    if choice.engine == "podman":
        return run_shown([*podman_build(choice, tags, args, ca_bundle), *extra, str(ROOT)], env)
    spec = local_bake(choice, variant, tags, args, platform.machine(), ca_bundle)
    target = f"(target {variant.name} of {bake.BAKE_FILE})"
    if builder == "build":
        cmd = docker_build(spec["target"][variant.name], extra)
        return run_shown(cmd, {**env, "DOCKER_BUILDKIT": "1"}, "DOCKER_BUILDKIT=1", target, cwd=ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        bake_file = Path(tmp) / "local-bake.json"
        bake_file.write_text(json.dumps(spec, indent=2))
        cmd = ["docker", "buildx", "bake", "-f", str(bake_file), "--load", *extra, variant.name]
        return run_shown(cmd, env, after=target, cwd=ROOT)


def run_command(engine: str, flags: list[str], image: str, command: list[str]) -> list[str]:
    """The image just built, never one pulled in its place."""
    return [engine, "run", "--rm", "--pull=never", *flags, image, *command]


def main(args: argparse.Namespace) -> int:
    variant = variant_named(args.variant)
    if args.action == "tag":
        print(local_tag(variant))
        return 0
    if args.action == "standin":
        engine = choose_engine(docker_daemon_answers(), bool(shutil.which("podman")), args.engine)
        return subprocess.run([str(STANDIN_SCRIPT), engine, STANDIN_BASE]).returncode
    choice = choose(detect_machine(), Request(engine=args.engine, gpus=args.gpus))
    if args.action in ("choose", "plan"):
        print("\n".join(choice.said))
        return 0
    _say(choice, ("engine", "GPUs"))
    command = args.command[args.command[:1] == ["--"] :]
    cmd = run_command(choice.engine, list(choice.run_flags), local_tag(variant), command)
    return run_shown(cmd, engine_env(choice.engine))


def add_parser(sub) -> None:
    p = sub.add_parser("local", help="run the image built here; engine and GPUs chosen for this machine")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in [
        ("choose", "print what `run` would use (`plan` is its former name)"),
        ("run", "run the image: `run [OPTIONS] [-- COMMAND...]`"),
        ("standin", "make the stand-in base"),
        ("tag", "print the local tag"),
    ]:
        a = actions.add_parser(name, help=text, aliases=["plan"] if name == "choose" else [])
        a.add_argument("--variant", help="variant from versions.toml (default: its default)")
        a.add_argument("--engine", choices=ENGINE_CHOICES, default="auto", help="auto: Docker if it answers")
        a.add_argument("--gpus", choices=GPU_CHOICES, default="auto", help="auto: pass the GPUs when found")
        if name == "run":
            a.add_argument("command", nargs=argparse.REMAINDER, help="the command (default: the image's)")
        a.set_defaults(func=main, command=[])
